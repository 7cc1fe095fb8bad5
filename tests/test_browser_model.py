"""The model panel in JupyterLab (headless chromium, Playwright): module clusters, folding a module
to one box and back, the Gradients tab, a wide graph fitted to the output width with zoom, a
selected stale node that stays red, the projector theme. ``NBGRAD_SCREENSHOTS=docs`` writes the
screenshots for the README (model_clusters.png, gradients_tab.png, wide_graph_fitted.png).
Skipped, with the reason, where chromium or JupyterLab is absent.
"""

import os
from pathlib import Path

import pytest
from _jupyterlab import CHROMIUM, has_app, jupyterlab, launch_chromium, open_and_run_all

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
sync_api = pytest.importorskip("playwright.sync_api")
nbformat = pytest.importorskip("nbformat")

REPO = Path(__file__).resolve().parent.parent

CELLS = (
    "import nbgrad\nfrom nbgrad import nn\n%load_ext nbgrad\nnbgrad.manual_seed(0)\n"
    "x = nbgrad.randn(16, 4)\ny = nbgrad.randn(16, 1)\nloss_fn = nn.MSELoss()",
    "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),\n"
    "                      nn.Linear(8, 1))\n"
    "opt = nbgrad.optim.SGD(model.parameters(), lr=0.05)",
    "loss = loss_fn(model(x), y)",
    "for step in range(3):\n    opt.zero_grad()\n    loss = loss_fn(model(x), y)\n"
    "    loss.backward()\n    opt.step()",
    "w = nbgrad.ones(3, requires_grad=True)\n"
    "wide = sum((w * float(i)).tanh() * float(i) for i in range(12))",
    "a = nbgrad.ones(3, requires_grad=True)\nb = a.sigmoid()\nb.mul_(2)",
)


def write_notebook(root):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, root / "model.ipynb")


@pytest.fixture
def lab(tmp_path):
    if not has_app("lab"):
        pytest.skip("jupyterlab is not installed")
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with jupyterlab(root, tmp_path, env, app="lab",
                    extra_args=["--ServerApp.disable_check_xsrf=True"]) as url:
        yield url, tmp_path


def cell_panel(page, i):
    """The panel of code cell ``i`` (0-based)."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(i)
    panel = cell.locator(".nbgrad-panel").first
    panel.wait_for(timeout=90_000)
    return cell, panel


def test_model_panel_in_jupyterlab(lab):
    url, tmp_path = lab
    shots = Path(os.environ.get("NBGRAD_SCREENSHOTS", tmp_path))
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            open_and_run_all(page, url, "model.ipynb")
            try:
                page.locator(".nbgrad-panel", has_text="stale saved tensor").first.wait_for(
                    timeout=120_000)
            except sync_api.TimeoutError:
                page.screenshot(path=str(tmp_path / "timeout.png"), full_page=True)
                raise AssertionError("the last panel did not render: "
                                     + page.locator(".jp-Notebook").inner_text()[-3000:])

            # module clusters, titled by path and class
            cell, panel = cell_panel(page, 2)
            panel.locator("svg g.cluster").first.wait_for(timeout=30_000)
            titles = panel.locator("svg g.cluster > text").all_inner_texts()
            for t in ("model (Sequential)", "model.0 (Linear)", "model.1 (ReLU)",
                      "model.4 (Linear)", "loss_fn (MSELoss)"):
                assert t in titles, titles
            cell.scroll_into_view_if_needed()
            panel.screenshot(path=str(shots / "model_clusters.png"))

            # fold model.0 to one box (the kernel draws it again), then expand it
            panel.locator("svg g.cluster > text", has_text="model.0 (Linear)").click()
            box = panel.locator("svg g.node", has_text="model.0 (Linear)")
            box.first.wait_for(timeout=30_000)
            assert "1 ops folded" not in box.first.inner_text()
            assert "ops folded" in box.first.inner_text()
            box.first.click()
            panel.locator("svg g.cluster > text", has_text="model.0 (Linear)").wait_for(
                timeout=30_000)

            # the Gradients tab of the training-loop cell
            cell, panel = cell_panel(page, 3)
            assert "3 training steps" in panel.locator(".nbgrad-summary").inner_text()
            panel.locator(".nbgrad-tab", has_text="Gradients").click()
            body = panel.locator(".nbgrad-body")
            assert "model.0.weight" in body.inner_text()
            assert panel.locator(".nbgrad-body svg.nbgrad-spark").count() >= 6
            cell.scroll_into_view_if_needed()
            panel.screenshot(path=str(shots / "gradients_tab.png"))

            # a wide graph fits the output width; zoom in makes it wider, fit brings it back
            cell, panel = cell_panel(page, 4)
            svg = panel.locator(".nbgrad-svg svg").first
            svg.wait_for(timeout=30_000)
            out_w = panel.bounding_box()["width"]
            fitted = svg.bounding_box()["width"]
            assert fitted <= out_w + 1
            panel.locator(".nbgrad-zoom-in").click()
            panel.locator(".nbgrad-zoom-in").click()
            assert svg.bounding_box()["width"] > fitted * 1.3
            panel.locator(".nbgrad-zoom-fit").click()
            assert abs(svg.bounding_box()["width"] - fitted) < 2
            cell.scroll_into_view_if_needed()
            panel.screenshot(path=str(shots / "wide_graph_fitted.png"))

            # a selected stale node keeps its red border
            cell, panel = cell_panel(page, 5)
            node = panel.locator("svg g.node", has_text="will fail in backward").first
            node.wait_for(timeout=30_000)
            node.click()
            assert "nbgrad-selected" in (node.get_attribute("class") or "")
            stroke = node.locator("polygon").first.evaluate("e => getComputedStyle(e).stroke")
            assert stroke == "rgb(208, 0, 0)", stroke
        finally:
            browser.close()
