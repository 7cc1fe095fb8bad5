"""The panel's engine in an in-process shell: focus (what the cell made or changed), the caps,
the widget lifecycle, faults kept to one line, the magic's answers, the layout's time bound.

The display publisher is replaced by a recorder (see test_notebook_extension.py); a kernel is in
test_notebook_kernel.py and the long session in test_notebook_load.py.
"""

import json
import threading
import time
from unittest import mock

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import nbgrad  # noqa: E402
from nbgrad.notebook import adapter, extension, focus, layout, render  # noqa: E402
from nbgrad.notebook import inspect as nbi  # noqa: E402


class Recorder:
    def __init__(self):
        self.bundles = []

    def __call__(self, data, metadata=None, source=None, **kw):
        self.bundles.append(data)


@pytest.fixture
def shell(monkeypatch):
    ip = InteractiveShell.instance()
    rec = Recorder()
    monkeypatch.setattr(ip.display_pub, "publish", rec)
    ip.recorder = rec
    ip.run_cell("import nbgrad")
    extension.load_ipython_extension(ip)
    yield ip
    extension.unload_ipython_extension(ip)
    ip.run_cell("%reset -f")


def run(ip, code):
    n = len(ip.recorder.bundles)
    result = ip.run_cell(code, store_history=True)
    return result, ip.recorder.bundles[n:]


def panels(bundles):
    return [b for b in bundles if "nbgrad:" in b.get("text/plain", "") and "text/html" in b]


def one_panel(ip, code):
    result, out = run(ip, code)
    ps = panels(out)
    assert len(ps) == 1, [b.get("text/plain") for b in out]
    return ps[0]


def nbgrad_lines(err: str) -> list:
    return [line for line in err.splitlines() if "nbgrad" in line]


# --- focus ---------------------------------------------------------------------------------


def test_plain_tensors_get_no_panel(shell):
    _, out = run(shell, "a = nbgrad.ones(3)\nb = nbgrad.zeros(2, 2)\nc = a * 2\n"
                        "d = nbgrad.arange(4.)")
    assert panels(out) == []
    # and a graph after that gets one, without the plain tensors drawn
    p = one_panel(shell, "w = nbgrad.ones(3, requires_grad=True)\nloss = (w * a).sum()")
    assert "MulBackward0" in p["text/html"] and "SumBackward0" in p["text/html"]


def test_a_panel_shows_this_cells_graph_and_folds_earlier_ones(shell):
    run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()")
    run(shell, "c = (x * 3).exp()")
    p = one_panel(shell, "w = nbgrad.ones(2, requires_grad=True)\nloss = (w * w).sum()")
    html = p["text/html"]
    assert "MulBackward0" in html and "SumBackward0" in html
    assert "TanhBackward0" not in html and "ExpBackward0" not in html
    assert "2 earlier graphs: c, y" in html
    assert p["text/plain"].startswith("nbgrad: 2 tensors")  # w and loss only


def test_a_graph_built_on_an_earlier_tensor_names_it(shell):
    run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()")
    ext = extension.get_extension(shell)
    named = nbi.named_tensors(shell.user_ns)
    shell.run_cell("z = y * 2")  # the extension's own panel aside, check the fold directly
    tracker = focus.Tracker()
    tracker.update(named)
    f = tracker.update(nbi.named_tensors(shell.user_ns))
    assert [n for n, _ in f.named] == ["z"]
    snap = nbi.snapshot(f.named, previous=f.previous)
    tracker.fold(f, snap)
    tanh = next(n for n in snap.nodes.values() if n.name == "TanhBackward0")
    assert "y" in tanh.outputs and snap.earlier == []
    assert ext is not None


def test_an_inplace_op_brings_in_the_earlier_graph_it_made_stale(shell):
    run(shell, "a = nbgrad.tensor([1.0, 3.0], requires_grad=True)\nb = a + 2\n"
               "loss = (b * b).mean()")
    run(shell, "unrelated = nbgrad.ones(2, requires_grad=True) * 3")
    p = one_panel(shell, "b[0] = 1000.0")
    assert "stale saved tensor" in p["text/plain"]
    assert "MulBackward0" in p["text/html"]  # loss's graph, though loss did not change
    assert "unrelated" not in p["text/html"].split("earlier graph")[0]


def test_backward_on_an_earlier_graph_shows_that_graph(shell):
    run(shell, "w = nbgrad.ones(3, requires_grad=True)\nloss = (w * 2).sum()")
    run(shell, "other = nbgrad.ones(2, requires_grad=True).exp()")
    p = one_panel(shell, "loss.backward()")
    html = p["text/html"]
    assert "MulBackward0" in html and "ExpBackward0" not in html.split("earlier graph")[0]
    assert "1 earlier graph: other" in html


def test_quiet_cell_costs_no_scan(shell, monkeypatch):
    run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()")
    calls = []
    monkeypatch.setattr(nbi, "named_tensors", lambda *a, **k: calls.append(1) or [])
    _, out = run(shell, "n = 1 + 1\nprint(y.shape)")
    assert panels(out) == [] and calls == []


# --- what the engine is read through ---------------------------------------------------------


def test_types_are_judged_by_type_not_by_claims():
    fake = mock.Mock(spec=nbgrad.Tensor)
    assert isinstance(fake, nbgrad.Tensor)  # what a Mock claims
    assert not adapter.is_tensor(fake)
    assert adapter.is_tensor(nbgrad.ones(1))


def test_hidden_node_count_is_exact_for_a_100k_chain():
    x = nbgrad.ones(1, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    snap = nbi.snapshot([("y", y)], max_nodes=300)
    assert len(snap.nodes) == 300
    # 100000 MulBackward0 + one AccumulateGrad
    assert snap.hidden_exact and snap.hidden_nodes == 100_001 - 300
    assert dict(snap.hidden_kinds)["MulBackward0"] == 100_000 - 300
    assert "99701 more nodes (cap 300)" in render.hidden_summary(snap)
    del y


# --- faults stay one line ---------------------------------------------------------------------

ODD = '''
class LoudGetattr:
    def __getattr__(self, name):
        raise ValueError("no attributes here")

class BadEq:
    def __eq__(self, other):
        raise TypeError("cannot compare")
    __hash__ = object.__hash__

class BadShape(nbgrad.Tensor):
    @property
    def shape(self):
        raise RuntimeError("no shape for you")

from unittest import mock
loud = LoudGetattr()
bad_eq = BadEq()
bad_shape = nbgrad.Tensor._make_subclass(BadShape, nbgrad.ones(2), True)
fake = mock.Mock(spec=nbgrad.Tensor)
mixed = {"w": nbgrad.ones(2, requires_grad=True), "loud": loud, bad_eq: 1}
'''


def test_odd_objects_in_the_namespace_are_skipped_one_by_one(shell, capsys):
    result, _ = run(shell, ODD)
    assert result.success, result.error_in_exec
    p = one_panel(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()")
    assert "TanhBackward0" in p["text/html"]
    p = one_panel(shell, "z = y * 2")  # and the next cell too: nothing was silenced
    assert "MulBackward0" in p["text/html"]
    assert nbgrad_lines(capsys.readouterr().err) == []
    named = dict(nbi.named_tensors(shell.user_ns))
    assert "mixed['w']" in named and "fake" not in named and "loud" not in named


def test_a_thread_mutating_a_dict_of_tensors(shell, capsys):
    run(shell, "store = {}\nstop = False\n"
               "import threading\n"
               "def churn():\n"
               "    i = 0\n"
               "    while not stop:\n"
               "        store[i % 50] = nbgrad.ones(1)\n"
               "        store.pop((i * 7) % 50, None)\n"
               "        i += 1\n"
               "th = threading.Thread(target=churn, daemon=True)\nth.start()")
    try:
        for i in range(15):
            _, out = run(shell, f"v{i} = nbgrad.ones(2, requires_grad=True) * {i}")
            assert len(panels(out)) == 1
    finally:
        run(shell, "stop = True\nth.join()")
    assert nbgrad_lines(capsys.readouterr().err) == []


def test_a_16kb_label_is_cut(shell, capsys):
    p = one_panel(shell, "d = {'k' * 16384: nbgrad.ones(2, requires_grad=True) * 2}\n"
                         + "globals()['n' * 16384] = nbgrad.ones(1, requires_grad=True).exp()")
    assert len(p["text/html"]) < 40_000
    assert "k" * nbi.MAX_LABEL not in p["text/html"] and "k" * 20 in p["text/html"]
    assert "n" * (nbi.MAX_LABEL + 1) not in p["text/html"]
    assert nbgrad_lines(capsys.readouterr().err) == []


def test_an_interrupt_while_the_panel_is_built_is_one_line(shell, capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(nbi, "snapshot", interrupted)
    result, out = run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.exp()")
    assert result.success and panels(out) == []
    lines = nbgrad_lines(capsys.readouterr().err)
    assert lines == ["nbgrad: panel interrupted; your cell ran normally."]


def test_an_exception_whose_text_raises(shell, capsys):
    run(shell, "class Weird(RuntimeError):\n"
               "    def __str__(self):\n"
               "        raise ValueError('no text')\n"
               "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()")
    raising = "e = Weird()\ne.nbgrad_context = {'kind': 'other'}\nraise e"
    # not stored in the history: IPython 9 stores str(error) of a cell stored there, and when
    # that raises, its own ValueError replaces the cell's error (IPython's doing, not the panel's)
    n = len(shell.recorder.bundles)
    result = shell.run_cell(raising, store_history=False)
    assert isinstance(result.error_in_exec, RuntimeError)
    (p,) = panels(shell.recorder.bundles[n:])
    assert "could not be read" in p["text/html"]
    # stored, whichever error IPython reports then, the panel does not fail
    result, _ = run(shell, raising)
    assert result.error_in_exec is not None
    assert nbgrad_lines(capsys.readouterr().err) == []


def test_error_shown_once_short_header_full_explanation(shell):
    run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()")
    run(shell, "y.add_(3)")
    p = one_panel(shell, "y.sum().backward()")
    head = p["text/plain"]
    assert ("error: one of the variables needed for gradient computation has been modified by "
            "an inplace operation (see the Error tab)") in head
    assert "Hint" not in head and "\n" not in head
    assert "saved by TanhBackward0" in p["text/html"]


def test_leaf_inplace_hint_suggests_no_grad_or_detach_not_data(shell):
    run(shell, "c = nbgrad.tensor([1., 2.], requires_grad=True)")
    p = one_panel(shell, "c.add_(1.)")
    html = p["text/html"]
    assert "with nbgrad.no_grad():" in html and ".detach()" in html
    assert "not `.data`" in html and "write to `.data`" not in html


# --- the magic answers in one line ------------------------------------------------------------


@pytest.mark.parametrize("line, says", [
    ("graph unknown_name", "nbgrad: no variable named 'unknown_name'"),
    ("graph 42", "nbgrad: '42' is a int, not a tensor"),
    ("graph plain_list", "nbgrad: 'plain_list' is a list, not a tensor"),
    ("graph 1 +", "nbgrad: could not evaluate '1 +': SyntaxError"),
    ("set max_nodes=abc", "nbgrad: max_nodes must be a positive integer, not 'abc'"),
    ("set timeout=-1", "nbgrad: timeout must be a positive number of seconds, not '-1'"),
    ("set widget=maybe", "nbgrad: widget must be on or off, not 'maybe'"),
])
def test_magic_mistakes_are_one_line(shell, capsys, line, says):
    run(shell, "plain_list = [1, 2]")
    capsys.readouterr()
    result = shell.run_line_magic("nbgrad", line)
    out = capsys.readouterr()
    assert result is None
    text = (out.out + out.err).strip().splitlines()
    assert text and text[0].startswith(says), text
    assert "Traceback" not in out.out + out.err
    assert extension.get_extension(shell).max_nodes == nbi.DEFAULT_MAX_NODES


# --- widgets: replaced and closed, never piling up ---------------------------------------------


WIDGET = "application/vnd.jupyter.widget-view+json"


def _live_widgets():
    import ipywidgets.widgets.widget as w

    return len(w._instances)


def test_live_widgets_do_not_grow_with_cells(shell, monkeypatch):
    pytest.importorskip("anywidget")
    monkeypatch.setattr(extension, "_has_comm", lambda ip: True)
    ext = extension.get_extension(shell)
    for i in range(ext.keep_live + 2):
        run(shell, f"a{i} = nbgrad.ones(2, requires_grad=True) * {i}")
    base = _live_widgets()
    sizes = []
    for i in range(30):
        _, out = run(shell, f"b{i} = (nbgrad.ones(3, requires_grad=True) * {i}).tanh()")
        # the new panel, and the oldest live one replaced by its static copy
        assert [WIDGET in b for b in out] == [True, False]
        assert "nbgrad-static" in out[1]["text/html"]
        sizes.append(_live_widgets())
    assert max(sizes) <= base and len(ext._live) == ext.keep_live
    panel = ext._live[-1][0]
    # every part of a widget capped, the shared Layout included
    assert panel.layout is ext._live[0][0].layout
    assert len(panel.graph) <= 12_000 and sum(len(v) for v in panel.tabs.values()) <= 36_000


def test_widget_data_capped_for_thousands_of_tensors(shell, monkeypatch):
    pytest.importorskip("anywidget")
    from nbgrad.notebook import widgets

    monkeypatch.setattr(extension, "_has_comm", lambda ip: True)
    run(shell, "ts = {}\nfor i in range(3000):\n    globals()[f'p{i}'] = nbgrad.ones(1, "
               "requires_grad=True) * i")
    ext = extension.get_extension(shell)
    panel = ext._live[-1][0]
    state = json.dumps({k: getattr(panel, k) for k in ("tabs", "graph", "dot", "summary")})
    # the tabs (widgets.MAX_TABS) and the hover details (MAX_GRAPH_JSON), JSON-escaped
    assert len(state) < 1.1 * (widgets.MAX_TABS + widgets.MAX_GRAPH_JSON)
    assert len(panel.static_bundle()["text/html"]) <= extension.MAX_STATIC_BYTES + 1000


# --- layout: in-process, bounded -------------------------------------------------------------


@pytest.mark.skipif(not layout.available(), reason="pygraphviz not installed")
def test_a_layout_that_cannot_finish_is_stopped(monkeypatch):
    monkeypatch.setattr(layout, "_CACHE", {})
    n = 3000
    edges = ";".join(f"n{i}->n{(i * 7 + 3) % n};n{i}->n{(i * 13 + 5) % n}" for i in range(n))
    source = "digraph{" + edges + "}"
    start = time.monotonic()
    with pytest.raises(layout.LayoutTimeout):
        layout.svg(source, nodes=n, timeout=0.5)
    assert time.monotonic() - start < 30  # a guard against a hang, not a timing
    assert layout.svg("digraph { a -> b }").startswith("<svg")  # and the next one works


@pytest.mark.skipif(not layout.available(), reason="pygraphviz not installed")
def test_layout_in_process_and_forked_give_the_same_svg(monkeypatch):
    x = nbgrad.ones(3, requires_grad=True)
    y = (x * 2).tanh().sum()
    dot = render.to_dot(nbi.snapshot([("x", x), ("y", y)]))
    monkeypatch.setattr(layout, "_CACHE", {})
    here = layout.svg(dot, nodes=1)
    monkeypatch.setattr(layout, "_CACHE", {})
    child = layout.svg(dot, nodes=10_000)
    assert here == child and 'id="n' in here and "TanhBackward0" in here


def _threads():
    # IPython 9 stops its history-saving thread before a fork (a forked layout) and starts it
    # again at the next stored cell: IPython's own thread, not the panel's
    return {t for t in threading.enumerate() if not t.name.startswith("IPython")}


def test_threads_do_not_leak_from_the_panel(shell):
    before = _threads()
    for i in range(5):
        run(shell, f"q{i} = nbgrad.ones(2, requires_grad=True).exp()")
    assert _threads() <= before


@pytest.mark.skipif(not layout.available(), reason="pygraphviz not installed")
def test_first_layout_drops_only_fontconfig_warnings(monkeypatch, capfd):
    import os

    monkeypatch.setattr(layout, "_fonts_loaded", False)
    with layout._fontconfig_warnings_dropped():
        os.write(2, b'Fontconfig warning: "x.conf", line 6: unknown element "reset-dirs"\n')
        os.write(2, b"something else\n")
    assert layout._fonts_loaded
    assert capfd.readouterr().err == "something else\n"


def test_a_new_grad_at_the_old_ones_address_counts_as_changed():
    """A leaf's ``.grad`` replaced by a new tensor that the allocator put at the same address
    (its id is the old one's): the tracker still sees this cell changed it (it once took the id
    alone, and the panel then drew the leaf unnamed, in a row order that depended on memory)."""
    tracker = focus.Tracker()
    w = nbgrad.ones(3, requires_grad=True)
    w.grad = nbgrad.zeros(3)
    first = tracker.update([("w", w)])
    assert [n for n, _ in first.named] == ["w"]
    same = tracker.update([("w", w)])  # nothing happened: unchanged
    assert same.named == []
    for _ in range(100):
        tracker.update([("w", w)])  # the .grad read now
        old_id = id(w.grad)
        w.grad = None
        g = nbgrad.zeros(3)  # (CPython's allocator gives the freed address back first)
        w.grad = g
        if id(w.grad) == old_id:
            break
    else:
        pytest.fail("the allocator never reused the address")
    again = tracker.update([("w", w)])
    assert [n for n, _ in again.named] == ["w"]
    assert tracker.update([("w", w)]).named == []  # and unchanged once read
