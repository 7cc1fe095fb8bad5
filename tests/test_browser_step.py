"""Notebook 11 (backward step by step) in JupyterLab 4, headless chromium: Run All, then the
step panel of `%nbgrad step o` is stepped with its buttons as a student clicks them, and each state
is checked against the engine's numbers (TanhBackward0 sends 1 - tanh(n)² to n; at the end x1.grad
is w1 * that, read from PyTorch) and photographed. Skipped, with the reason, where chromium (or
JupyterLab) is absent."""

import os
import re
import shutil
from pathlib import Path

import pytest
from _jupyterlab import CHROMIUM, launch_chromium, open_and_run_all, serve

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parent.parent
NB = "11_backward_step_by_step.ipynb"


def _truth():
    x1, x2 = torch.tensor(2.0, requires_grad=True), torch.tensor(0.0, requires_grad=True)
    w1, w2 = torch.tensor(-3.0, requires_grad=True), torch.tensor(1.0, requires_grad=True)
    b = torch.tensor(6.8813735870195432, requires_grad=True)
    n = x1 * w1 + x2 * w2 + b
    n.retain_grad()
    o = n.tanh()
    o.backward()
    return n.grad.item(), x1.grad.item()


def test_notebook_11_stepped_in_jupyterlab(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / NB, root / NB)
    shots = Path(os.environ.get("NBGRAD_SCREENSHOTS", tmp_path))
    n_grad, x1_grad = _truth()
    with serve("lab", root, tmp_path) as url:
        with sync_api.sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                open_and_run_all(page, url, NB)
                # the last cell's walk marks the end of Run All
                page.locator(".nbgrad-step", has_text="stopped").first.wait_for(timeout=240_000)
                cell = page.locator(".jp-CodeCell", has_text="%nbgrad step o").first
                cell.scroll_into_view_if_needed()
                view = cell.locator(".nbgrad-step")
                view.wait_for(timeout=30_000)  # (re-read at each use: the view is redrawn)
                assert "step 0 of 10" in view.inner_text()
                nxt = cell.locator(".nbgrad-step-next")
                nxt.click()  # TanhBackward0
                expect(view).to_contain_text("step 1 of", timeout=30_000)
                text = view.inner_text()
                assert "TanhBackward0" in text and "self: g * (1 - result²)" in text
                sent = re.search(r"to AddBackward0: (-?[\d.e+-]+)", text)
                assert sent and abs(float(sent.group(1)) - n_grad) < 1e-3, text
                nxt.click()  # AddBackward0
                expect(view).to_contain_text("step 2 of", timeout=30_000)
                cell.screenshot(path=str(shots / "step_by_step_lab.png"))
                cell.locator(".nbgrad-step-end").click()
                expect(view).to_contain_text("done", timeout=30_000)
                svg_text = view.locator("svg").first.text_content()
                assert f"grad {x1_grad:.4g}" in svg_text, svg_text
                cell.screenshot(path=str(shots / "step_by_step_done_lab.png"))
                cell.locator(".nbgrad-step-prev").click()  # one state back: shown, not undone
                expect(view).to_contain_text("step 9 of", timeout=30_000)
            except Exception:
                page.screenshot(path=str(shots / "step_failed_lab.png"), full_page=True)
                raise
            finally:
                browser.close()
