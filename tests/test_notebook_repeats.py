"""Repeated structure folded: a loop that built the same sub-graph many times is drawn once, with
the count and its source ("50 x t = x * i; total = total + (t * t).sum()"), in the DOT (what the
kernel lays out, and what the browser lays out with viz.js), in the text tree, and in the widget,
which expands it to every copy and folds it again. In process, and in a real kernel."""

import html
import re

import pytest

import nbgrad
from nbgrad.notebook import inspect as nbi
from nbgrad.notebook import layout, render, repeats

LOOP = ("total = nbgrad.zeros(())\n"
        "for i in range(50):\n"
        "    t = x * i\n"
        "    total = total + (t * t).sum()")


def _loop(n=50, stale_at=None):
    x = nbgrad.randn(4, requires_grad=True)
    total = nbgrad.zeros(())
    ts = []
    for i in range(n):
        t = x * i
        ts.append(t)
        total = total + (t * t).sum()
    if stale_at is not None:
        ts[stale_at].add_(1)  # the saved `self` and `other` of that copy's MulBackward0 go stale
    return x, total


def test_a_loop_body_is_found_with_its_count_and_source():
    x, total = _loop()
    snap = nbi.snapshot([("total", total), ("x", x)])
    (r,) = snap.repeats
    assert r.count == 50 and len(r.copies) == 50
    assert [snap.nodes[k].name for k in r.copies[0]] == ["MulBackward0", "MulBackward0",
                                                         "SumBackward0", "AddBackward0"]
    assert r.label == "t = x * i; total = total + (t * t).sum()"
    assert r.title.startswith("50 x t = x * i")
    assert r.keep == 49  # the newest copy is drawn


def test_no_repeat_in_a_graph_without_one():
    a = nbgrad.randn(3, requires_grad=True)
    b = (a.exp() * 2).tanh().sum()
    assert nbi.snapshot([("b", b)]).repeats == []
    x, total = _loop(n=2)  # two copies: drawn as they are
    assert nbi.snapshot([("total", total)]).repeats == []


def test_dot_draws_one_copy_in_a_titled_cluster():
    x, total = _loop()
    snap = nbi.snapshot([("total", total), ("x", x)])
    full = render.to_dot(snap, expanded=[snap.repeats[0].key])
    dot = render.to_dot(snap)
    assert full.count("label=\"MulBackward0") == 100
    assert dot.count("label=\"MulBackward0") == 2  # one copy: x * i and t * t
    assert dot.count("label=\"SumBackward0") == 1
    assert 'label="50 x t = x * i; total = total + (t * t).sum()"' in dot
    # the chain of copies (total = total + ...) is one dashed edge from the copy to itself
    add = next(n.key for n in snap.nodes.values()
               if n.name == "AddBackward0" and n.key in snap.repeats[0].copies[-1])
    assert re.search(rf"{add} -> {add} \[style=dashed", dot)
    assert 'label="50 x t = x * i; total = total + (t * t).sum() (expanded)"' in full


def test_the_text_tree_marks_the_copy_drawn():
    x, total = _loop()
    text = render.text_tree(nbi.snapshot([("total", total), ("x", x)]))
    assert text.splitlines()[0] == ("50 x t = x * i; total = total + (t * t).sum(): one copy "
                                    "drawn, marked [x50]")
    assert "AddBackward0  [x50, each copy feeds the next]" in text
    assert text.count("MulBackward0") == 2


def test_a_stale_copy_is_the_one_drawn_and_stays_red():
    x, total = _loop(stale_at=7)
    snap = nbi.snapshot([("total", total), ("x", x)])
    (r,) = snap.repeats
    assert r.keep == 7
    dot = render.to_dot(snap)
    assert "will fail in backward" in dot and render.C_STALE in dot


@pytest.mark.skipif(not layout.available(), reason="pygraphviz is not installed")
def test_the_kernel_svg_shows_the_count_and_is_smaller():
    x, total = _loop()
    snap = nbi.snapshot([("total", total), ("x", x)])
    svg = layout.svg(render.to_dot(snap))
    full = layout.svg(render.to_dot(snap, expanded=[snap.repeats[0].key]))
    assert "50 x t = x * i" in html.unescape(svg)
    assert svg.count('class="node"') < full.count('class="node"') // 10


def test_the_widget_expands_a_repeat_and_folds_it_again():
    from nbgrad.notebook.widgets import NbgradPanel

    x, total = _loop()
    snap = nbi.snapshot([("total", total), ("x", x)])
    key = snap.repeats[0].key
    panel = NbgradPanel(snap, None, dot=render.to_dot(snap), layout_fn=lambda dot, s: None)
    try:
        assert f'"{repeats.cluster_id(key)}":["{key}",false]' in panel.graph
        assert "one of 50 copies" in panel.graph
        panel.expanded = [key]  # what the front end sets when the cluster title is clicked
        assert panel.dot.count('label="MulBackward0') == 100
        assert f'"{repeats.cluster_id(key)}":["{key}",true]' in panel.graph
        panel.expanded = []
        assert panel.dot.count('label="MulBackward0') == 2
    finally:
        panel.close()


def test_in_a_real_kernel_the_panel_folds_the_loop():
    from test_notebook_kernel import execute, panel_html, svg_in

    pytest.importorskip("nbclient")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        nb = execute(["import nbgrad\n%load_ext nbgrad",
                      "x = nbgrad.randn(4, requires_grad=True)",
                      LOOP], Path(d))
    h = panel_html(nb.cells[2])
    assert "201 nodes, 50 copies of one loop body drawn once" in html.unescape(h)
    want = "50 x t = x * i; total = total + (t * t).sum()"
    if layout.available():
        svg = html.unescape(svg_in(h))
        assert want in svg
        assert svg.count(">MulBackward0<") == 2
    else:
        assert want in html.unescape(h)


def test_an_unrolled_rnn_is_one_step_with_its_layers_as_boxes():
    from nbgrad import nn
    from nbgrad.notebook import model_hooks, model_report

    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        tracker.reset_cell()
        rnn_in, rnn_h = nn.Linear(3, 5), nn.Linear(5, 5)
        x = nbgrad.randn(2, 8, 3)
        h = nbgrad.zeros(2, 5)
        for row in range(8):
            h = nbgrad.tanh(rnn_in(x[:, row]) + rnn_h(h))
        snap = nbi.snapshot([("h", h)])
        snap.model = model_report.with_graph(None, tracker, {"rnn_in": rnn_in, "rnn_h": rnn_h,
                                                             "h": h}, snap)
    finally:
        tracker.uninstall()
    (r,) = snap.repeats
    assert r.count == 8 and r.label == "h = nbgrad.tanh(rnn_in(x[:, row]) + rnn_h(h))"
    dot = render.to_dot(snap, folded=[])  # modules inside the folded loop: boxes all the same
    assert dot.count('label="rnn_in (Linear)') == 1 and dot.count("shape=box3d") == 2
    assert dot.count('label="TanhBackward0') == 1 and dot.count('label="AddmmBackward0') == 0
    cluster = next(line for line in dot.splitlines() if "8 x h = " in line)
    assert '"m_rnn_in"' in cluster and '"m_rnn_h"' in cluster  # the boxes are in the loop's box
    full = render.to_dot(snap, folded=[], expanded=[r.key])  # expanded: every step, clusters
    assert full.count('label="AddmmBackward0') == 16 and "shape=box3d" not in full


def test_an_expansion_too_big_to_sync_is_the_text_tree():
    from nbgrad.notebook import widgets

    x, total = _loop(n=300)
    snap = nbi.snapshot([("total", total), ("x", x)], max_nodes=1200)
    key = snap.repeats[0].key
    panel = widgets.NbgradPanel(snap, None, dot=render.to_dot(snap), layout_fn=lambda d, s: None)
    try:
        panel.expanded = [key]
        assert len(render.to_dot(snap, expanded=[key])) > widgets.MAX_DOT_ASKED
        assert panel.dot == "" and "AddBackward0" in panel.tabs["Graph"]  # (the tree)
        panel.expanded = []
        assert 0 < len(panel.dot) < widgets.MAX_DOT
    finally:
        panel.close()


def test_a_module_box_inside_a_folded_loop_says_how_to_open_it():
    import json

    from nbgrad import nn
    from nbgrad.notebook import model_hooks, model_report, widgets

    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        tracker.reset_cell()
        cell = nn.Linear(5, 5)
        h = nbgrad.zeros(2, 5)
        for _ in range(6):
            h = cell(h).tanh()
        snap = nbi.snapshot([("h", h)])
        snap.model = model_report.with_graph(None, tracker, {"cell": cell, "h": h}, snap)
    finally:
        tracker.uninstall()
    data = json.loads(widgets.graph_json(snap))
    assert data["nodes"]["m_cell"]["details"] == [
        "4 ops of one copy of 6: click the loop's title to draw every copy"]
