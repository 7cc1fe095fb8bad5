"""A panel's life after its cell: what a retired panel keeps (its static copy, an "interact" button
that wakes it, almost nothing in the saved widget state), the code the loader gets once per page,
and what is drawn of a big loop (folded before it is laid out, with a smaller SVG)."""

import json
import re
import urllib.parse

import pytest
from test_notebook_focus import shell  # noqa: F401 - the fixture live_shell extends

from nbgrad.notebook import extension, layout, render
from nbgrad.notebook.render_model import shorten_middle

pytest.importorskip("anywidget")
from nbgrad.notebook.widgets import LOADER, NbgradPanel, panel_code  # noqa: E402

WIDGET = "application/vnd.jupyter.widget-view+json"


class Recorder:
    def __init__(self):
        self.bundles = []  # (data, transient, whether it updates a display)

    def __call__(self, data, metadata=None, source=None, *, transient=None, update=False, **kw):
        self.bundles.append((data, transient or {}, update))


@pytest.fixture
def live_shell(shell, monkeypatch):  # noqa: F811 - test_notebook_focus's fixture, extended
    """test_notebook_focus's shell, its displays recorded with their display ids, widgets on."""
    shell.recorder = Recorder()
    monkeypatch.setattr(shell.display_pub, "publish", shell.recorder)
    monkeypatch.setattr(extension, "_has_comm", lambda ip: True)  # the widget path
    return shell


def test_a_retired_panel_wakes_in_place(live_shell):
    ext = extension.get_extension(live_shell)
    for i in range(ext.keep_live + 1):
        live_shell.run_cell(f"y{i} = (nbgrad.ones(3, requires_grad=True) * {i}).tanh()")
    # the first panel retired: its output updated to the static copy with an "interact" button
    first, oldest = None, None
    for data, transient, update in live_shell.recorder.bundles:
        if WIDGET in data and first is None:
            first = transient["display_id"]
        if update and transient.get("display_id") == first:
            oldest = data
    assert oldest is not None and WIDGET not in oldest
    m = re.search(r'data-nbgrad-wake="([^"]+)"', oldest["text/html"])
    assert m and "TanhBackward0" in urllib.parse.unquote(oldest["text/html"])
    live_before = [p.panel_id for p, _ in ext._live]
    # the click, relayed by any live panel: that panel is a widget again, in the same output
    n = len(live_shell.recorder.bundles)
    ext._live[-1][0]._front_end_msg(None, {"type": "wake", "panel": m.group(1)}, [])
    woken = [(d, t) for d, t, u in live_shell.recorder.bundles[n:] if u and WIDGET in d]
    assert len(woken) == 1 and woken[0][1]["display_id"] == first
    assert [p.panel_id for p, _ in ext._live] == live_before[1:] + [m.group(1)]
    assert len(ext._live) == ext.keep_live  # the oldest live one retired instead
    # an unknown (or already woken) id does nothing
    n = len(live_shell.recorder.bundles)
    ext.wake(m.group(1))
    ext.wake("another-kernel-1")
    assert len(live_shell.recorder.bundles) == n


def test_retired_panels_that_can_wake_are_bounded(live_shell, monkeypatch):
    monkeypatch.setattr(extension, "KEEP_RETIRED", 2)
    ext = extension.get_extension(live_shell)
    ext.keep_live = 1
    for i in range(5):
        live_shell.run_cell(f"z{i} = (nbgrad.ones(2, requires_grad=True) * {i}).exp()")
    assert len(ext._retired) == 2
    # the one that can no longer wake lost its button
    last = {}
    for data, transient, update in live_shell.recorder.bundles:
        if update:
            last[transient["display_id"]] = data["text/html"]
    buttons = [h for h in last.values() if "data-nbgrad-wake" in h]
    assert len(last) == 4 and len(buttons) == 2


def _snap():
    from nbgrad.notebook import inspect as nbi
    import nbgrad

    x = nbgrad.ones(3, requires_grad=True)
    y = (x * 2).tanh()
    return nbi.snapshot(nbi.named_tensors({"x": x, "y": y})), (x, y)


def test_a_retired_panel_leaves_almost_nothing_in_the_saved_state():
    snap, _keep = _snap()
    panel = NbgradPanel(snap, layout.svg(render.to_dot(snap)) if layout.available() else None)
    sent = []
    assert panel.comm is not None  # (comm's dummy outside a kernel)
    panel.comm.send = lambda data=None, *a, **k: sent.append(data)
    panel.retire()
    (update,) = [m for m in sent if m and m.get("method") == "update"]
    state = update["state"]
    # nbclient merges this into the closed widget's saved state: the big traits now empty
    assert state["content"] == "" and len(state["_esm"]) < 40
    assert len(json.dumps(state)) < 300


def test_the_loader_gets_the_code_once_per_page():
    snap, _keep = _snap()
    panel = NbgradPanel(snap, None)
    sent = []
    panel.send = sent.append
    try:
        panel._front_end_msg(panel, {"type": "code"}, [])
        (msg,) = sent
        assert msg["type"] == "code" and msg == {"type": "code", **panel_code()}
        assert "export default" in msg["code"] and ".nbgrad-panel" in msg["css"]
        # every panel carries only the loader: a few KB, not the whole front end
        assert len(LOADER) < 4_000 < len(msg["code"])
    finally:
        panel.close()


def test_a_loop_of_parameters_is_folded_before_layout(live_shell):
    live_shell.run_cell("ps = [nbgrad.randn(8, requires_grad=True) for _ in range(200)]\n"
                   "s = sum((t * t).sum() for t in ps)")
    ext = extension.get_extension(live_shell)
    panel = ext._live[-1][0]
    dot = render.to_dot(panel._own)
    # one copy of the loop body and its leaf, not a box per parameter
    assert dot.count("[id=") < 40 and "ps[3]" not in dot
    assert "copies of one loop body" in panel.summary


@pytest.mark.skipif(not layout.available(), reason="pygraphviz is not installed")
def test_svg_is_compact_and_keeps_its_text():
    dot = ('digraph { a [id=a, label="y * 1.001\\nv0"]; b [id=b, label="x  y"]; a -> b; '
           'subgraph cluster_c { id=cluster_c; label="loop"; a; } }')
    svg = layout.svg(dot)
    assert ">y * 1.001<" in svg  # a label keeps its decimals
    assert not re.search(r'(points|d|x|y)="[^"]*\d\.\d', svg)  # geometry in whole points
    assert '<g id="a" class="node">\n<title>' not in svg  # no tooltip that says "a"
    assert "<title>cluster_c</title>" in svg  # the cluster's (the front end rewrites it)
    assert 'font-family="Helvetica,sans-Serif" font-size="10"' in svg
    assert "x &#160;y" in svg and "xml:space" not in svg  # two spaces kept without it


def test_svg_data_uri_round_trips():
    svg = ('<svg xmlns="http://www.w3.org/2000/svg"><text fill="#d00000">a &lt; b &amp; 100%'
           '</text>\n</svg>')
    uri = render.svg_uri(svg)
    assert uri.startswith("data:image/svg+xml,") and '"' not in uri and "&" not in uri
    assert urllib.parse.unquote(uri.split(",", 1)[1]).replace("'", '"') == svg


def test_a_long_note_keeps_its_line_number():
    note = ("model.fc1.weight got no gradient: its path to the loss was cut by .detach() inside "
            "Net.forward, so the optimizer never updates it, at cell [4] line 9")
    short = shorten_middle(note, 100)
    assert len(short) <= 102 and short.startswith("model.fc1.weight got no gradient")
    assert short.endswith("at cell [4] line 9") and "\u2026" in short
    assert shorten_middle("short note") == "short note"


def test_a_panel_is_published_as_ipython_would_format_it(live_shell):
    # the panel's bundle is published raw (no formatter loop): the same data and metadata
    live_shell.run_cell("w = (nbgrad.ones(3, requires_grad=True) * 2).tanh()")
    ext = extension.get_extension(live_shell)
    panel = ext._live[-1][0]
    data, meta = live_shell.display_formatter.format(panel)
    shown = [d for d, t, u in live_shell.recorder.bundles if WIDGET in d]
    assert shown[-1] == data and extension._bundle(panel) == (data, meta or None)
    assert "text/html" in data and "TanhBackward0" in data["text/html"]


def test_a_retired_panel_is_updated_without_flushing_the_streams(live_shell, monkeypatch):
    pub = live_shell.display_pub
    flushes = []
    monkeypatch.setattr(type(pub), "_flush_streams", lambda self: flushes.append(1),
                        raising=False)

    def publish(data, metadata=None, *, transient=None, update=False, **kw):
        pub._flush_streams()  # as ipykernel's display publisher does before every message
        live_shell.recorder(data, metadata, transient=transient, update=update)

    monkeypatch.setattr(pub, "publish", publish)
    extension._update_unflushed(live_shell, {"text/plain": "x"}, "some-id")
    assert flushes == [] and "_flush_streams" not in vars(pub)  # the class's method is back
    assert live_shell.recorder.bundles[-1] == ({"text/plain": "x"}, {"display_id": "some-id"},
                                                True)
    # the cell's own output (the panel) still flushes what the cell printed first
    live_shell.run_cell("v = (nbgrad.ones(3, requires_grad=True) * 2).exp()")
    assert flushes
