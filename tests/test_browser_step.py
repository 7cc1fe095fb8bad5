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
                # (waits: under load the widget's HTML is drawn a moment after its box exists)
                expect(view).to_contain_text("step 0 of 10", timeout=30_000)
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


BUTTON_CELLS = [
    "%load_ext nbgrad\nimport nbgrad as torch",
    "x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)\n"
    "w = torch.tensor([1.5, 0.25, -0.75], requires_grad=True)\n"
    "loss = (x * w).tanh().sum()",
]


def test_step_button_on_a_loss_panel_in_jupyterlab(tmp_path):
    """A scalar loss's panel has a "step through loss.backward()" button: a click opens the
    walk in the panel's Step tab; its controls step it as the engine runs (the gradient
    TanhBackward0 sends is torch's); at the end x.grad is torch's."""
    import nbformat

    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in BUTTON_CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    nbformat.write(nb, str(root / "button.ipynb"))
    shots = Path(os.environ.get("NBGRAD_SCREENSHOTS", tmp_path))
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = torch.tensor([1.5, 0.25, -0.75], requires_grad=True)
    y = x * w
    y.retain_grad()
    y.tanh().sum().backward()
    with serve("lab", root, tmp_path) as url:
        with sync_api.sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                open_and_run_all(page, url, "button.ipynb")
                cell = page.locator(".jp-CodeCell", has_text="loss = (x * w)").first
                button = cell.locator(".nbgrad-step-open")
                button.wait_for(timeout=240_000)
                assert button.inner_text() == "step through loss.backward()"
                button.click()
                view = cell.locator(".nbgrad-step")
                expect(view).to_contain_text("step 0 of", timeout=30_000)
                assert cell.locator(".nbgrad-tab.nbgrad-active").inner_text() == "Step"
                cell.locator(".nbgrad-step-ctl.nbgrad-step-next").click()  # SumBackward0
                expect(view).to_contain_text("step 1 of", timeout=30_000)
                cell.locator(".nbgrad-step-ctl.nbgrad-step-next").click()  # TanhBackward0
                expect(view).to_contain_text("step 2 of", timeout=30_000)
                text = view.inner_text()
                assert "TanhBackward0" in text and "self: g * (1 - result²)" in text, text
                sent = re.search(r"to MulBackward0: \[([^\]]*)\]", text)
                assert sent, text
                got = [float(v) for v in sent.group(1).split(",")]
                assert all(abs(a - b) < 1e-3 for a, b in zip(got, y.grad.tolist())), text
                cell.screenshot(path=str(shots / "step_button_lab.png"))
                cell.locator(".nbgrad-step-ctl.nbgrad-step-end").click()
                expect(view).to_contain_text("done", timeout=30_000)
                svg_text = view.locator("svg").first.text_content()
                want = "[" + ", ".join(f"{v:.4g}" for v in x.grad.tolist()) + "]"
                assert f"grad {want}" in svg_text, svg_text
            except Exception:
                page.screenshot(path=str(shots / "step_button_failed_lab.png"), full_page=True)
                raise
            finally:
                browser.close()
