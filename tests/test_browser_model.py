"""The model panel in headless chromium (Playwright): module clusters, folding a module to one box
and back, the Gradients tab, a wide graph fitted to the output width with zoom, a selected stale
node that stays red. ``NBGRAD_SCREENSHOTS=docs`` writes the screenshots for the README
(model_clusters.png, gradients_tab.png, wide_graph_fitted.png).

Two ways in: JupyterLab (the whole round trip, folding included), and the panel's own front end
(extension/panel.js + panel.css) on a page of its own, fed the widget state that nbclient saved
from a real kernel (no server: it still runs where JupyterLab's widget manager cannot open the
panel's comm). Skipped, with the reason, where chromium (or JupyterLab) is absent.
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
    "for step in range(8):\n    opt.zero_grad()\n    loss = loss_fn(model(x), y)\n"
    "    loss.backward()\n    opt.step()",
    # twelve different branches (twelve copies of one would be drawn once: notebook/repeats)
    "w = nbgrad.ones(3, requires_grad=True)\n"
    "fs = ['tanh', 'sigmoid', 'exp', 'sin', 'cos', 'relu', 'abs', 'neg', 'atan', 'erf', 'sqrt',\n"
    "      'log1p']\n"
    "wide = sum(getattr(w * float(i), f)() * float(i) for i, f in enumerate(fs))",
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
            page.locator(".nbgrad-panel, .nbgrad-static").first.wait_for(timeout=120_000)
            if not page.locator(".nbgrad-panel").count():
                pytest.skip("JupyterLab shows the panels' static copies: its widget manager "
                            "could not open the panel's comm here (see "
                            "test_model_panel_front_end for the front end itself)")
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
            titles = panel.locator("svg g.cluster > text").evaluate_all("es => es.map(e => e.textContent)")
            for t in ("model (Sequential)", "model.0 (Linear)", "model.1 (ReLU)",
                      "model.4 (Linear)", "loss_fn (MSELoss)"):
                assert t in titles, titles
            cell.scroll_into_view_if_needed()
            panel.screenshot(path=str(shots / "model_clusters.png"))

            # fold model.0 to one box (the kernel draws it again), then expand it
            panel.locator("svg g.cluster > text", has_text="model.0 (Linear)").click()
            box = panel.locator("svg g.node", has_text="model.0 (Linear)")
            box.first.wait_for(timeout=30_000)
            folded = box.first.text_content()  # an SVG group: no inner_text
            assert "1 ops folded" not in folded and "ops folded" in folded
            box.first.click()
            panel.locator("svg g.cluster > text", has_text="model.0 (Linear)").wait_for(
                timeout=30_000)

            # the Gradients tab of the training-loop cell
            cell, panel = cell_panel(page, 3)
            assert "8 training steps" in panel.locator(".nbgrad-summary").inner_text()
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


# --- the front end alone, on the state a real kernel produced ----------------------------------

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>%(css)s
body { font-family: sans-serif; margin: 12px; width: %(width)dpx; }</style></head>
<body><div id="root"></div><script type="module">
const state = %(state)s;
const handlers = {};
const model = {
  get: (k) => state[k],
  set: (k, v) => { state[k] = v; (handlers["change:" + k] || []).forEach((f) => f()); },
  save_changes: () => {},
  on: (ev, f) => { (handlers[ev] = handlers[ev] || []).push(f); },
  off: (ev, f) => { handlers[ev] = (handlers[ev] || []).filter((g) => g !== f); },
  // the kernel's side of the viz.js request (widgets.NbgradPanel._front_end_msg)
  send: (msg) => { if (msg.type === "viz") setTimeout(() => (handlers["msg:custom"] || [])
    .slice().forEach((f) => f({ type: "viz", code: %(viz)s })), 0); },
};
// the loader first (every panel's _esm: it inflates the packed content), then the panel's code
await import(URL.createObjectURL(new Blob([%(loader)s], { type: "text/javascript" })));
const url = URL.createObjectURL(new Blob([%(esm)s], { type: "text/javascript" }));
const mod = await import(url);
await mod.default.render({ model, el: document.getElementById("root") });
document.body.dataset.ready = "1";
</script></body></html>"""


@pytest.fixture(scope="module")
def kernel_states(tmp_path_factory):
    """Widget state of each panel of CELLS, executed by nbclient in a real kernel."""
    from test_notebook_kernel import WIDGET, execute

    nb = execute(list(CELLS), tmp_path_factory.mktemp("model_front"))
    states = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    from nbgrad.notebook.widgets import saved_state

    out = []
    for cell in nb.cells:
        views = [o for o in cell.outputs if o.output_type == "display_data" and WIDGET in o.data]
        out.append(saved_state(states[views[0].data[WIDGET]["model_id"]]["state"])
                   if views else None)
    return out


def show(page, state, width=900):
    import json

    from nbgrad.notebook.widgets import LOADER, pack, panel_code, viz_js

    keys = ("summary", "tab_order", "active", "selected", "collapsed", "dot", "folded", "theme")
    code = panel_code()  # what extension/loader.js receives from the kernel
    sent = {k: state.get(k) for k in keys}
    sent["content"] = pack(state.get("tabs") or {}, state.get("graph") or "{}")  # as synced
    html = PAGE % {"css": code["css"], "width": width, "state": json.dumps(sent),
                   "loader": json.dumps(LOADER),
                   "esm": json.dumps(code["code"]), "viz": json.dumps(viz_js())}
    page.set_content(html)
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    if state.get("active") == "Graph":  # laid out here (viz.js), or by the kernel
        page.wait_for_selector(".nbgrad-svg svg", timeout=60_000)
    return page.locator(".nbgrad-panel").first


def test_model_panel_front_end(kernel_states, tmp_path):
    shots = Path(os.environ.get("NBGRAD_SCREENSHOTS", tmp_path))
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 960, "height": 900})
            # module clusters, titled by path and class
            panel = show(page, kernel_states[2])
            titles = panel.locator("svg g.cluster > text").evaluate_all("es => es.map(e => e.textContent)")
            for t in ("model (Sequential)", "model.0 (Linear)", "model.1 (ReLU)",
                      "model.4 (Linear)", "loss_fn (MSELoss)"):
                assert t in titles, titles
            svg = panel.locator(".nbgrad-svg svg").first
            assert svg.bounding_box()["width"] <= panel.bounding_box()["width"] + 1
            panel.screenshot(path=str(shots / "model_clusters.png"))

            # the training-loop cell: its summary, then the Gradients tab
            panel = show(page, kernel_states[3])
            assert "8 training steps" in panel.locator(".nbgrad-summary").inner_text()
            body = panel.locator(".nbgrad-body")
            assert "total gradient norm" in body.inner_text()  # the Training tab opens first
            assert body.locator("svg.nbgrad-spark").count() >= 2
            panel.locator(".nbgrad-tab", has_text="Gradients").click()
            assert "model.0.weight" in body.inner_text()
            assert body.locator("svg.nbgrad-spark").count() >= 6
            panel.screenshot(path=str(shots / "gradients_tab.png"))

            # a wide graph fits the output width; zoom in makes it wider, fit brings it back
            panel = show(page, kernel_states[4])
            svg = panel.locator(".nbgrad-svg svg").first
            fitted = svg.bounding_box()["width"]
            assert fitted <= panel.bounding_box()["width"] + 1
            natural = float(svg.evaluate("e => e.viewBox.baseVal.width")) * 4 / 3
            assert natural > fitted * 1.2  # it really was too wide
            panel.locator(".nbgrad-zoom-in").click()
            panel.locator(".nbgrad-zoom-in").click()
            assert svg.bounding_box()["width"] > fitted * 1.3
            panel.locator(".nbgrad-zoom-fit").click()
            assert abs(svg.bounding_box()["width"] - fitted) < 2
            panel.screenshot(path=str(shots / "wide_graph_fitted.png"))

            # a selected stale node keeps its red border; the header wraps, never cut
            panel = show(page, kernel_states[5], width=420)
            node = panel.locator("svg g.node", has_text="will fail in backward").first
            node.click()
            assert "nbgrad-selected" in (node.get_attribute("class") or "")
            stroke = node.locator("polygon").first.evaluate("e => e.getAttribute('stroke')")
            style = node.locator("polygon").first.evaluate("e => getComputedStyle(e).stroke")
            assert stroke.lower() == "#d00000" and style == "rgb(208, 0, 0)", (stroke, style)
            head = panel.locator(".nbgrad-summary")
            assert head.evaluate("e => e.scrollWidth <= e.clientWidth + 1")

            # projector theme: larger type
            state = dict(kernel_states[2], theme="projector")
            panel = show(page, state)
            size = panel.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
            assert size >= 18

            # a graph the kernel could not lay out: its DOT, laid out here by viz.js (which the
            # kernel sends over the comm when a panel asks)
            state = dict(kernel_states[2], active="Graph", graph="{}",
                         dot='digraph { a [id=a, label="x"]; b [id=b, label="TanhBackward0"]; '
                             "a -> b; }",
                         tabs={**kernel_states[2]["tabs"], "Graph": '<div class="nbgrad-svg" '
                               'data-layout="browser"><pre>x</pre></div>'})
            panel = show(page, state)
            laid = panel.locator(".nbgrad-svg[data-laid-out='browser'] svg g.node")
            assert laid.filter(has_text="TanhBackward0").count() == 1

            # fit width shrinks only: a small graph stays at its natural size
            panel = show(page, kernel_states[5], width=1400)
            svg = panel.locator(".nbgrad-svg svg").first
            natural = float(svg.evaluate("e => e.viewBox.baseVal.width")) * 4 / 3
            assert abs(svg.bounding_box()["width"] - natural) < 2, (svg.bounding_box(), natural)
        finally:
            browser.close()
