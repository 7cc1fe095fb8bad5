"""Run > Run All Cells on every shipped notebook, in JupyterLab 4 and Notebook 7 (headless
chromium): every panel's Graph tab is a picture once the run is over, live panels (an SVG in the
widget) and retired ones (their static copy's image) alike, whatever the kernel was busy with.
Then, once per front end, a retired panel's "interact" button makes it live again.

One server per front end, the notebooks opened one after the other (each kernel shut down after
its notebook); each notebook's run is bounded in time. Skipped, with the reason, where chromium or
the front end is absent. Heavy: run it alone.
"""

import json
import os
import shutil
import time
import urllib.request
from pathlib import Path

import pytest
from _jupyterlab import APPS, CHROMIUM, NO_NEWS, launch_chromium, open_and_run_all, serve

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
sync_api = pytest.importorskip("playwright.sync_api")

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))
RUN_BOUND_S = 240  # one notebook's Run All, the kernel's start included
PICTURE_BOUND_S = 60  # after it, every Graph tab a picture
# every cell rendered (JupyterLab 4 otherwise draws only the cells in view)
SETTINGS = {**NO_NEWS, "notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"}}

# the notebook shown (JupyterLab keeps the notebooks opened before in hidden tabs)
NB = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"

# In the page: per panel output, what its Graph tab shows. A live panel: its Graph tab opened
# (clicked when another tab is shown first), then an <svg> with nodes; a static copy: its image.
# (A cell whose graph was freed has nothing to draw, and says so: .nbgrad-nograph.) After a
# click the tab's picture is waited for (a condition, up to 5 s: a loaded machine draws late),
# never a fixed pause.
PANELS = """async () => {
  const out = [];
  const cells = [...document.querySelectorAll('%s .jp-CodeCell')];
  const drawn = (p) => p.querySelectorAll('.nbgrad-body .nbgrad-svg svg g.node').length > 0
    || !!p.querySelector('.nbgrad-body .nbgrad-nograph');
  for (const [i, cell] of cells.entries()) {
    for (const p of cell.querySelectorAll('.nbgrad-panel')) {
      const tab = [...p.querySelectorAll('.nbgrad-tab')].find((b) => b.textContent === 'Graph');
      if (tab && !tab.classList.contains('nbgrad-active')) {
        tab.click();
        for (let t = 0; t < 100 && !drawn(p); t++) await new Promise((r) => setTimeout(r, 50));
      }
      out.push({cell: i, kind: p.classList.contains('nbgrad-waiting') ? 'waiting' : 'live',
                picture: drawn(p),
                tabs: !!tab,
                text: (p.querySelector('.nbgrad-body') || p).innerText.slice(0, 160)});
    }
    for (const s of cell.querySelectorAll('.nbgrad-static')) {
      const img = s.querySelector('img[src^="data:image/svg+xml"]');
      out.push({cell: i, kind: 'static', picture: (!!img && img.complete && img.naturalWidth > 0)
                || !!s.querySelector('.nbgrad-nograph'),
                tabs: true, text: s.innerText.slice(0, 160)});
    }
  }
  return out;
}""" % NB

PROMPTS = """() => [...document.querySelectorAll('%s .jp-CodeCell .jp-InputPrompt')]
  .map((e) => e.textContent.trim())""" % NB


@pytest.fixture(params=APPS)
def server(request, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for nb in NOTEBOOKS:
        shutil.copy(nb, root / nb.name)
    with serve(request.param, root, tmp_path, settings=SETTINGS) as url:
        yield url, request.param


def _shut_down_kernels(url):
    with urllib.request.urlopen(url + "/api/sessions", timeout=10) as r:
        sessions = json.load(r)
    for s in sessions:
        req = urllib.request.Request(f"{url}/api/sessions/{s['id']}", method="DELETE")
        urllib.request.urlopen(req, timeout=20).close()


def _run_all(page, url, name, app):
    # (?reset: a fresh JupyterLab workspace, without the notebooks opened before)
    open_and_run_all(page, url, name + ("?reset" if app == "lab" else ""), app)
    start = time.monotonic()
    prompts = []
    again = True
    while time.monotonic() < start + RUN_BOUND_S:  # every code cell ran: "[N]:" everywhere
        prompts = page.evaluate(PROMPTS)
        if prompts and all(p.strip("[]:").isdigit() for p in prompts):
            return
        if again and time.monotonic() > start + 30 and all(p == "[ ]:" for p in prompts):
            # nothing queued ("[*]") after 30 s: the menu's click came before the page was
            # ready (a loaded machine); choose Run All Cells once more
            again = False
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        page.wait_for_timeout(1000)
    raise AssertionError(f"{name}: Run All did not finish in {RUN_BOUND_S} s: {prompts}")


def _pictures(page, name):
    """Every panel's Graph tab, once the live ones have their code and every Graph tab is a
    picture (read again until then, up to PICTURE_BOUND_S: under load a live panel draws its
    SVG, or a static copy decodes its image, seconds after its cell ran)."""
    panels = []
    end = time.monotonic() + PICTURE_BOUND_S
    while True:
        panels = page.evaluate(PANELS)
        ready = panels and all(p["kind"] != "waiting" for p in panels)
        if ready and all(p["picture"] or not p["tabs"] for p in panels):
            break
        if time.monotonic() > end:
            break
        page.wait_for_timeout(500)
    assert panels, f"{name}: no panel"
    missing = [p for p in panels if p["tabs"] and not p["picture"]]
    assert not missing, f"{name}: Graph tabs that are not a picture: {missing}"
    return panels


def test_run_all_draws_every_graph(server, tmp_path):
    url, app = server
    shots = Path(os.environ.get("NBGRAD_SCREENSHOTS", tmp_path))
    seen = {}
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            for nb in NOTEBOOKS:
                _run_all(page, url, nb.name, app)
                panels = _pictures(page, nb.name)
                if os.environ.get("NBGRAD_SCREENSHOTS"):  # every panel, as the user sees it
                    _shoot_panels(page, shots / f"run_all_{app}_{nb.stem[:2]}")
                seen[nb.name] = {k: sum(1 for q in panels if q["kind"] == k)
                                 for k in ("live", "static")}
                if nb.name.startswith("07"):
                    _wake_one(page, nb.name, shots / f"woken_{app}.png")
                _shut_down_kernels(url)
        finally:
            browser.close()
    print(app, seen)  # (pytest -s: panels per notebook, live and static)
    assert len(seen) == len(NOTEBOOKS)


def _shoot_panels(page, prefix):
    items = page.locator(f"{NB} .nbgrad-panel, {NB} .nbgrad-static")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for i in range(items.count()):
        items.nth(i).scroll_into_view_if_needed()
        items.nth(i).screenshot(path=f"{prefix}_{i:02d}.png")


def _wake_one(page, name, shot):
    """A retired panel's "interact" button: the panel becomes a live widget again, in place."""
    index = page.evaluate("""() => [...document.querySelectorAll('%s .jp-CodeCell')]
        .findIndex((c) => c.querySelector('.nbgrad-static .nbgrad-wake'))""" % NB)
    assert index >= 0, f"{name}: no retired panel to wake"
    cell = page.locator(NB + " .jp-CodeCell").nth(index)
    button = cell.locator(".nbgrad-static .nbgrad-wake").first
    button.scroll_into_view_if_needed()
    button.click()
    panel = cell.locator(".nbgrad-panel:not(.nbgrad-waiting)")
    panel.wait_for(timeout=60_000)
    panel.locator(".nbgrad-body .nbgrad-svg svg g.node").first.wait_for(timeout=30_000)
    node = panel.locator("svg g.node").first
    node.hover()
    node.click()
    panel.locator(".nbgrad-details").wait_for(state="visible", timeout=10_000)
    panel.scroll_into_view_if_needed()
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot))
