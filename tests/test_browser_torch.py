"""Notebook 10 (real PyTorch, ``import torch`` itself) in JupyterLab 4 and headless chromium: Run
All, and the panel of the model whose encoder is cut off by a ``.detach()`` renders in the page
with torch's node names, the module clusters of ``net``, the note that parameters got no gradient
and each of them drawn by name. ``NBGRAD_SCREENSHOTS=docs`` writes ``docs/torch_model_panel.png`` for the README.
Skipped, with the reason, where chromium, JupyterLab or torch is absent."""

import os
import shutil
from pathlib import Path

import pytest
from _jupyterlab import (CHROMIUM, NO_NEWS, has_app, jupyterlab, launch_chromium,
                         open_and_run_all)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
sync_api = pytest.importorskip("playwright.sync_api")
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent
NB = "10_debugging_pytorch.ipynb"


def _no_grad_truth():
    """Which parameters of notebook 10's ``Net`` get no gradient, run here without the panel."""
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16),
                                         nn.ReLU())
            self.head = nn.Linear(16, 3)

        def forward(self, x):
            return self.head(self.encoder(x).detach())

    net = Net()
    torch.nn.functional.cross_entropy(net(torch.randn(64, 8)),
                                      torch.zeros(64, dtype=torch.long)).backward()
    return sorted(f"net.{n}" for n, p in net.named_parameters() if p.grad is None)


def test_notebook_10_torch_model_panel_in_jupyterlab(tmp_path):
    if not has_app("lab"):
        pytest.skip("jupyterlab is not installed")
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / NB, root / NB)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    shots = Path(os.environ.get("NBGRAD_SCREENSHOTS", tmp_path))
    no_grad = _no_grad_truth()
    assert no_grad == ["net.encoder.0.bias", "net.encoder.0.weight", "net.encoder.2.bias",
                       "net.encoder.2.weight"]
    settings = {**NO_NEWS,  # every cell rendered, not only those in view
                "notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"}}
    with jupyterlab(root, tmp_path, env, settings, app="lab",
                    extra_args=["--ServerApp.disable_check_xsrf=True"]) as url:
        with sync_api.sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = browser.new_page(viewport={"width": 1300, "height": 1000})
                open_and_run_all(page, url, NB)
                cells = page.locator(".jp-Notebook .jp-CodeCell")
                cells.first.wait_for(timeout=120_000)
                cell = cells.filter(has_text="BUG: the encoder is cut off").first
                cell.scroll_into_view_if_needed()
                panel = cell.locator(".nbgrad-panel", has_text="got no gradient").first
                try:
                    panel.wait_for(timeout=240_000)
                except sync_api.TimeoutError:
                    page.screenshot(path=str(tmp_path / "timeout.png"), full_page=True)
                    raise AssertionError("the panel did not render: "
                                         + page.locator(".jp-Notebook").inner_text()[-3000:])
                panel.scroll_into_view_if_needed()
                assert "got no gradient" in panel.inner_text()  # (in view, in the header)
                svg = panel.locator("svg").first
                svg.wait_for(timeout=30_000)
                drawn = svg.text_content()
                # the clusters of the modules whose nodes are drawn; the cut-off encoder's
                # parameters drawn apart, each named
                for title in ("net (Net)", "net.head (Linear)"):
                    assert title in drawn, (title, drawn[:2000])
                for name in no_grad:
                    assert name in drawn, (name, drawn[:2000])
                for node in ("AddmmBackward0", "NllLossBackward0"):
                    assert node in drawn, (node, drawn[:2000])
                cell.scroll_into_view_if_needed()
                panel.screenshot(path=str(shots / "torch_model_panel.png"))
            finally:
                browser.close()
