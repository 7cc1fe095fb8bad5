"""Two panel features in a real browser, JupyterLab 4 and Notebook 7 in headless chromium:

- a loop body built 50 times is drawn once in a cluster titled "50 x <its source>"; clicking the
  title draws every copy, clicking it again folds them;
- "2 earlier graphs: t, total — show": clicking "show" draws those graphs in the panel, "hide"
  goes back.

Screenshots of both go to $NBGRAD_SCREENSHOTS (docs/ for the README). Skipped, with the reason,
where chromium (or the app) is absent.
"""

import os
from pathlib import Path

import pytest
from _jupyterlab import APPS, CHROMIUM, has_app, jupyterlab, launch_chromium, open_and_run_all

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
sync_api = pytest.importorskip("playwright.sync_api")
nbformat = pytest.importorskip("nbformat")

REPO = Path(__file__).resolve().parent.parent
TITLE = "50 x t = x * i; total = total + (t * t).sum()"
CELLS = [
    "import nbgrad\n%load_ext nbgrad",
    "x = nbgrad.randn(4, requires_grad=True)",
    ("total = nbgrad.zeros(())\n"
     "for i in range(50):\n"
     "    t = x * i\n"
     "    total = total + (t * t).sum()"),
    "b = nbgrad.ones(2, requires_grad=True)\nc = b.exp()",
]


def _muls(panel):
    return panel.locator("svg g.node", has_text="MulBackward0").count()


def _wait(page, test, what, timeout=60):
    for _ in range(timeout * 4):
        if test():
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("app", APPS)
def test_folded_repeats_and_the_show_button(app, tmp_path):
    if not has_app(app):
        pytest.skip(f"{'jupyterlab' if app == 'lab' else 'notebook'} is not installed")
    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, root / "features.ipynb")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    shots = Path(os.environ.get("NBGRAD_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with jupyterlab(root, tmp_path, env, app=app,
                    extra_args=["--ServerApp.disable_check_xsrf=True"]) as url:
        with sync_api.sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 1000})
                open_and_run_all(page, url, "features.ipynb", app)
                cells = page.locator(".jp-Notebook .jp-CodeCell")
                last = cells.nth(3).locator(".nbgrad-panel")
                last.wait_for(timeout=240_000)  # the end of Run All

                # 1. the loop's panel: one copy, in a cluster titled with the count and source
                loop = cells.nth(2).locator(".nbgrad-panel")
                loop.scroll_into_view_if_needed()
                title = loop.locator("svg g.cluster.nbgrad-repeat > text", has_text="50 x")
                title.first.wait_for(timeout=60_000)
                assert title.first.text_content().strip() == TITLE
                assert _muls(loop) == 2
                loop.screenshot(path=str(shots / f"repeats_folded_{app}.png"))
                title.first.click()  # every copy drawn
                _wait(page, lambda: _muls(loop) == 100, "the 50 copies")
                expanded = loop.locator("svg g.cluster.nbgrad-repeat > text",
                                        has_text="(expanded)")
                expanded.first.click()  # folded again
                _wait(page, lambda: _muls(loop) == 2, "the folded copy")

                # 2. the next panel folds the earlier graphs to a line; "show" draws them
                last.scroll_into_view_if_needed()
                line = last.locator(".nbgrad-earlier")
                assert "2 earlier graphs: t, total" in line.inner_text()
                assert _muls(last) == 0 and last.locator("svg g.node",
                                                         has_text="ExpBackward0").count() == 1
                last.screenshot(path=str(shots / f"earlier_line_{app}.png"))
                line.locator("button.nbgrad-show-earlier", has_text="show").click()
                _wait(page, lambda: _muls(last) >= 2, "the earlier graphs")
                assert last.locator("svg g.node", has_text="ExpBackward0").count() == 1
                assert last.locator("svg g.cluster.nbgrad-repeat").count() == 1  # still folded
                assert "2 earlier graphs shown: t, total" in last.locator(
                    ".nbgrad-earlier").inner_text()
                last.screenshot(path=str(shots / f"earlier_shown_{app}.png"))
                last.locator("button.nbgrad-show-earlier", has_text="hide").click()
                _wait(page, lambda: _muls(last) == 0, "this cell's graph alone")
            finally:
                browser.close()
