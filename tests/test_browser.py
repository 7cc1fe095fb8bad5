"""The panel in a real browser: JupyterLab 4 and Notebook 7, headless chromium driven by Playwright.

Starts the server on 127.0.0.1 with a temporary root, opens a notebook, runs all cells through the
Run menu, checks the panel renders with its graph SVG, clicks a node (its details appear), checks
every graph was laid out by the kernel (no viz.js needed), takes screenshots
(``NBGRAD_SCREENSHOTS=docs`` writes them for the README); then (JupyterLab) opens the same notebook
saved by nbclient, without a kernel, and checks the static fallback shows the graph. Stops the
server it started by its PID. Skipped, with the reason, where chromium is absent.
"""

import os
import re
from pathlib import Path

import pytest
from _jupyterlab import APPS, CHROMIUM, launch_chromium, open_and_run_all, serve

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect  # (waits for its condition: a loaded machine renders late)
nbformat = pytest.importorskip("nbformat")

REPO = Path(__file__).resolve().parent.parent


def write_notebook(root):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in (
        "import nbgrad\n%load_ext nbgrad",
        "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()",
        "y.add_(3)\nprint('done')",
        "w = nbgrad.ones(2, requires_grad=True)\nv = (w * 2).exp().sum()",
    )]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, root / "panel.ipynb")
    # the same notebook executed and saved (nbclient): opened later without running anything
    nbclient = pytest.importorskip("nbclient")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO) + (os.pathsep + old if old else "")
    try:
        nbclient.NotebookClient(nb, kernel_name="python3", timeout=120, store_widget_state=True,
                                resources={"metadata": {"path": str(root)}}).execute()
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    nbformat.write(nb, root / "saved.ipynb")


@pytest.fixture(params=APPS)
def lab(request, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root)
    with serve(request.param, root, tmp_path) as url:
        yield url, tmp_path, request.param


def test_panel_renders_in_the_browser(lab):
    url, tmp_path, app = lab
    shots = Path(os.environ.get("NBGRAD_SCREENSHOTS", tmp_path))
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            console = []
            page.on("console", lambda m: console.append(m.text)
                    if "nbgrad" in m.text or m.type == "error" else None)
            open_and_run_all(page, url, "panel.ipynb", app)
            # the third cell's panel (the second cell's one may render first)
            panel = page.locator(".nbgrad-panel", has_text="stale saved tensor").first
            panel.wait_for(timeout=180_000)  # a loaded CI machine: the kernel starts slowly
            page.locator(".nbgrad-panel", has_text="ExpBackward0").first.wait_for(timeout=90_000)
            expect(page.locator(".nbgrad-panel")).to_have_count(3, timeout=60_000)
            svg_node = panel.locator("svg g.node")
            svg_node.first.wait_for(timeout=30_000)
            assert svg_node.count() >= 5  # x, y, AddBackward0, TanhBackward0, saved, AccumulateGrad
            assert "stale saved tensor" in panel.locator(".nbgrad-summary").inner_text()
            # the stale saved tensor is drawn red
            stale = panel.locator("svg g.node polygon[fill='#ff9e9e']")
            assert stale.count() >= 1
            tanh = panel.locator("svg g.node", has_text="TanhBackward0").first
            # hover first: the details box appearing may re-fit the graph (a scrollbar comes or
            # goes), and a click whose press and release land on different elements selects none
            tanh.hover()
            tanh.click()
            details = panel.locator(".nbgrad-details")
            details.wait_for(state="visible", timeout=10_000)
            text = details.inner_text()
            assert "TanhBackward0" in text and "STALE" in text and "add_" in text
            expect(tanh).to_have_class(re.compile(r"\bnbgrad-selected\b"))
            # double-click collapses everything upstream of a node, and expands it again
            add = panel.locator("svg g.node", has_text="AddBackward0").first
            add.hover()
            add.dblclick()
            expect(tanh).to_have_class(re.compile(r"\bnbgrad-hidden\b"))
            expect(tanh).to_be_hidden()
            add.dblclick()
            expect(tanh).to_be_visible()
            panel.locator(".nbgrad-tab", has_text="Tensors").click()
            expect(panel.locator(".nbgrad-body")).to_contain_text("requires_grad")
            panel.locator(".nbgrad-fold").click()  # fold the panel to its header
            expect(panel.locator(".nbgrad-body")).to_be_hidden()
            panel.locator(".nbgrad-fold").click()
            panel.locator(".nbgrad-tab", has_text="Graph").click()
            tanh.hover()
            tanh.click()
            panel.scroll_into_view_if_needed()
            shots.mkdir(parents=True, exist_ok=True)
            shot = shots / f"panel_{app}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000

            # every panel laid out by the kernel, whatever the browser: no viz.js loaded
            cell = page.locator(".jp-Notebook .jp-CodeCell").last
            graph = cell.locator(".nbgrad-panel svg")
            expect(graph.locator("g.node", has_text="ExpBackward0")).to_have_count(1)
            expect(graph.locator("g.node", has_text="AccumulateGrad")).to_have_count(1)
            assert page.evaluate("() => typeof globalThis.__nbgradViz") == "undefined"
            assert not [m for m in console if "did not load" in m], console
            if app != "lab":
                return

            # a saved notebook, opened without running it (untrusted: the static fallback shows)
            saved = browser.new_page(viewport={"width": 1400, "height": 1000})
            saved.goto(url + "/lab/tree/saved.ipynb", wait_until="domcontentloaded")
            saved.locator(".nbgrad-static", has_text="stale saved tensor").wait_for(timeout=60_000)
            img = saved.locator(".nbgrad-static img[src^='data:image/svg+xml']")
            img.first.wait_for(timeout=60_000)
            expect(img).to_have_count(3, timeout=60_000)  # the three cells that changed state
            saved.wait_for_function(  # every picture decoded (a condition, not a pause)
                "() => [...document.querySelectorAll(\".nbgrad-static img\")].every("
                "(e) => e.complete)", timeout=60_000)
            widths = img.evaluate_all("els => els.map(e => e.complete ? e.naturalWidth : -1)")
            assert all(w > 50 for w in widths), widths
            saved.screenshot(path=str(shots / "nbgrad_saved.png"))
        finally:
            browser.close()
