"""The notebook layer's snapshot and drawing functions, on the seeds' classroom graphs.

No kernel here: ``inspect.snapshot`` reads live nbgrad objects, ``render`` draws the result.
"""

import gc
import sys

import pytest

import nbgrad
from nbgrad.notebook import inspect as nbi
from nbgrad.notebook import layout, render

HAS_DOT = layout.available()  # pygraphviz (Graphviz inside its wheel)


def snap_of(ns, **kw):
    return nbi.snapshot(nbi.named_tensors(ns), **kw)


def node_by_name(snap, name):
    found = [n for n in snap.nodes.values() if n.name == name]
    assert found, f"{name} not in {[n.name for n in snap.nodes.values()]}"
    return found[0]


def tensor_by_name(snap, name):
    return next(t for t in snap.tensors if t.name == name)


# --- seed 000: y = x.tanh(); y.add_(3); y.sum().backward() fails ------------------------------


def test_seed000_tanh_then_add_marks_the_saved_output_stale():
    x = nbgrad.ones(3, requires_grad=True)
    y = x.tanh()
    before = nbi.snapshot(nbi.named_tensors({"x": x, "y": y}))
    tanh = node_by_name(before, "TanhBackward0")
    assert not tanh.stale
    assert [s.name for s in tanh.saved] == ["result"]
    assert tanh.saved[0].alias == "y" and tanh.saved[0].saved_version == 0

    y.add_(3)
    snap = nbi.snapshot(nbi.named_tensors({"x": x, "y": y}), previous=nbi.versions_of(before))
    tanh = node_by_name(snap, "TanhBackward0")
    saved = tanh.saved[0]
    assert tanh.stale and saved.is_stale
    assert (saved.saved_version, saved.version) == (0, 1)
    assert [op for _, op, _ in saved.modified_by] == ["add_"]
    assert "test_notebook_inspect.py" in saved.modified_by[0][2]
    yt = tensor_by_name(snap, "y")
    assert yt.version == 1 and yt.version_delta == 1
    assert yt.grad_fn == "AddBackward0"
    assert tensor_by_name(snap, "x").is_leaf
    # the leaf is reached through AccumulateGrad, whose box is x
    acc = node_by_name(snap, "AccumulateGrad")
    assert acc.variable == tensor_by_name(snap, "x").key
    assert len(snap.stale_saved) == 1

    dot = render.to_dot(snap)
    assert render.C_STALE in dot and "saved v0, now v1" in dot and "add_ at" in dot
    tree = render.text_tree(snap)
    assert "STALE saved v0, now v1 (modified by add_" in tree
    assert "TanhBackward0" in tree and "will fail in backward" in tree


def test_seed000_backward_error_is_explained_and_its_node_marked():
    x = nbgrad.ones(3, requires_grad=True)
    y = x.tanh()
    y.add_(3)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    assert nbi.is_autograd_error(info.value)
    snap = nbi.snapshot(nbi.named_tensors({"x": x, "y": y}), error=info.value)
    err = snap.error
    assert err["context"]["kind"] == "saved_modified"
    text = "\n".join(err["lines"])
    assert "saved by TanhBackward0 at" in text
    assert "modified by add_ at" in text and "(now version 1)" in text
    failing = [n for n in snap.nodes.values() if n.failing]
    assert [n.name for n in failing] == ["TanhBackward0"]
    assert "backward fails here" in render.to_dot(snap)
    html = render.panel_html(snap, None)
    assert "saved by TanhBackward0" in html and "Error" in html


def test_user_errors_are_not_autograd_errors():
    assert not nbi.is_autograd_error(None)
    assert not nbi.is_autograd_error(NameError("x"))
    assert not nbi.is_autograd_error(RuntimeError("raised by user code"))


# --- seed 000: y = x[:2]; x.add_(3) -- views share one storage and one version counter ----------


def test_views_share_storage_and_version_counter():
    x = nbgrad.ones(4)
    y = x[:2]
    z = x[1::2]
    x.add_(3)
    snap = snap_of({"x": x, "y": y, "z": z})
    assert len(snap.storages) == 1
    st = snap.storages[0]
    assert st.version == 1 and st.size == 4
    views = {name: (off, shape, stride, covers) for name, off, shape, stride, covers in st.views}
    assert views["x"] == (0, (4,), (1,), [0, 1, 2, 3])
    assert views["y"] == (0, (2,), (1,), [0, 1])
    assert views["z"] == (1, (2,), (2,), [1, 3])
    yt = tensor_by_name(snap, "y")
    assert yt.is_view and yt.view_of == "x" and yt.version == 1
    html = render.views_html(snap)
    assert "3 tensors alias it" in html and "_version = 1" in html
    dot = render.to_dot(snap)
    assert f"{tensor_by_name(snap, 'x').key} -> {yt.key}" in dot and 'label="view"' in dot


def test_unnamed_base_of_a_named_view_is_drawn():
    y = nbgrad.arange(6.0).reshape(2, 3)[0]
    snap = snap_of({"y": y})
    names = [t.name for t in snap.tensors]
    assert names[0] == "y" and "" in names  # the base, unnamed
    assert tensor_by_name(snap, "y").view_of == "(unnamed base)"


# --- seed 004: loss = (b * b).mean(); b[0] = 1000 ----------------------------------------------


def test_seed004_setitem_on_a_saved_input():
    a = nbgrad.tensor([1.0, 3.0], requires_grad=True)
    b = a + 2
    loss = (b * b).mean()
    assert b._version == 0
    b[0] = 1000.0
    assert b._version == 1
    snap = snap_of({"a": a, "b": b, "loss": loss})
    mul = node_by_name(snap, "MulBackward0")
    assert mul.stale
    assert {s.name for s in mul.saved} == {"self", "other"}
    assert all(s.is_stale and s.alias == "b" for s in mul.saved)
    assert "test_notebook_inspect.py:" in mul.where  # outside a notebook: file:line
    with pytest.raises(RuntimeError) as info:
        loss.backward()
    snap = snap_of({"a": a, "b": b, "loss": loss}, error=info.value)
    assert [n.name for n in snap.nodes.values() if n.failing] == ["MulBackward0"]
    assert "saved by MulBackward0" in "\n".join(snap.error["lines"])


def test_seed004_leaf_inplace_error_is_explained():
    a = nbgrad.tensor([10.0, 5.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad") as info:
        a.add_(10.0)
    err = nbi.error_info(info.value)
    assert err["context"]["kind"] == "leaf_inplace"
    assert any("no_grad" in line for line in err["lines"])


# --- after backward, memory ------------------------------------------------------------------


def test_saved_tensors_released_by_backward_and_memory_counted():
    x = nbgrad.ones(3, requires_grad=True)
    y = x.tanh()
    s = y.sum()
    snap = snap_of({"x": x, "y": y, "s": s})
    assert snap.memory["saved_bytes"] == 12 and snap.memory["saved_count"] == 1
    assert snap.memory["devices"]["cpu"]["live_bytes"] > 0
    s.backward()
    snap = snap_of({"x": x, "y": y, "s": s})
    tanh = node_by_name(snap, "TanhBackward0")
    assert tanh.saved[0].released and not tanh.stale
    assert snap.memory["saved_bytes"] == 0
    assert tensor_by_name(snap, "x").grad == "[3] float32"
    assert "freed by backward" in render.to_dot(snap)
    html = render.memory_html(snap)
    assert "no saved tensors in the graphs shown" in html  # freed: in plain words
    live = snap.memory["devices"]["cpu"]
    assert f"{live['live_bytes']} bytes in {live['live_storages']} storages" in html


def test_memory_tab_speaks_plain_words():
    gc.collect()  # earlier tests' garbage freed now, not between the probe and the snapshot
    before = nbi.memory_probe()
    x = nbgrad.ones(3, requires_grad=True)
    y = x * x  # MulBackward0 saves self and other: one storage, 12 bytes each
    z = y.tanh()  # saves its result: 12 bytes
    snap = snap_of({"x": x, "z": z}, memory_before=before)
    grown = snap.memory["delta"]["cpu.live_bytes"]
    html = render.memory_html(snap)
    assert f"{grown} bytes more live tensor memory" in html
    assert "2 saved tensors hold 24 bytes in the graphs shown" in html
    assert "cpu.live_bytes" not in html and "1 saved tensors" not in html


def test_memory_delta_against_a_probe_taken_before():
    gc.collect()
    before = nbi.memory_probe()
    keep = nbgrad.zeros(1000)
    snap = snap_of({"keep": keep}, memory_before=before)
    assert snap.memory["delta"]["cpu.live_bytes"] >= 4000


# --- caps, names ---------------------------------------------------------------------------


def test_large_graph_is_capped_and_summarised():
    x = nbgrad.ones(2, requires_grad=True)
    y = x
    for _ in range(1000):
        y = y * 1.0001
    snap = snap_of({"x": x, "y": y}, max_nodes=50)
    assert len(snap.nodes) == 50 and snap.truncated
    assert snap.hidden_nodes >= 951  # 1000 muls + AccumulateGrad, 50 shown
    dot = render.to_dot(snap, expanded=[r.key for r in snap.repeats])
    assert "... 951 more nodes (cap 50)" in dot
    assert "MulBackward0 x950, AccumulateGrad x1" in dot
    assert dot.count('label="MulBackward0') == 50
    assert "more nodes (cap 50)" in render.text_tree(snap)
    # the loop's copies are drawn once, the count a lower bound (the cap hid the older ones)
    folded = render.to_dot(snap)
    assert folded.count('label="MulBackward0') == 1
    assert 'label="50+ x y = y * 1.0001"' in folded


def test_named_tensors_looks_into_containers_and_skips_private_names():
    t = nbgrad.ones(1)
    ns = {"a": t, "_hidden": t, "_5": t, "xs": [t, 3, t], "d": {"w": t}, "n": 3}
    names = [n for n, _ in nbi.named_tensors(ns)]
    assert names == ["a", "d['w']", "xs[0]", "xs[2]"]
    snap = snap_of(ns)
    assert [x.name for x in snap.tensors] == ["a = d['w'] = xs[0] = xs[2]"]


def test_version_delta_only_for_the_same_object():
    x = nbgrad.ones(2)
    prev = nbi.versions_of(snap_of({"x": x}))
    x.mul_(2)
    assert tensor_by_name(snap_of({"x": x}, previous=prev), "x").version_delta == 1
    x = nbgrad.ones(2)  # a new tensor under the same name is "new", not a delta
    assert tensor_by_name(snap_of({"x": x}, previous=prev), "x").version_delta is None


def test_snapshot_holds_no_tensor():
    import gc
    import weakref

    x = nbgrad.ones(3, requires_grad=True)
    y = x.tanh() * 2
    snap = snap_of({"x": x, "y": y})
    refs = [weakref.ref(x), weakref.ref(y), weakref.ref(y.grad_fn)]
    del x, y
    gc.collect()
    assert all(r() is None for r in refs)
    assert render.to_dot(snap)  # still drawable from plain data


# --- SVG and the fallback ------------------------------------------------------------------


@pytest.mark.skipif(not HAS_DOT, reason="pygraphviz not installed")
def test_svg_has_element_ids_for_the_front_end():
    x = nbgrad.ones(3, requires_grad=True)
    y = x.tanh()
    snap = snap_of({"x": x, "y": y})
    svg = render.dot_to_svg(render.to_dot(snap))
    assert svg.startswith("<svg")
    for key in list(snap.nodes) + [t.key for t in snap.tensors]:
        assert f'id="{key}"' in svg


def test_without_dot_the_graph_is_a_text_tree(monkeypatch):
    from nbgrad.notebook import layout

    monkeypatch.setitem(sys.modules, "pygraphviz", None)  # a failed import of pygraphviz
    monkeypatch.setattr(layout, "_CACHE", {})
    x = nbgrad.ones(3, requires_grad=True)
    y = x.tanh()
    snap = snap_of({"x": x, "y": y})
    assert render.dot_to_svg(render.to_dot(snap)) is None
    html = render.graph_html(None, snap)
    assert "pygraphviz is not installed" in html and "TanhBackward0" in html
    assert "Tensors" in render.panel_html(snap, None)


def test_tensor_html_repr():
    x = nbgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    html = render.tensor_html(y)
    for piece in ("[3]", "float32", "cpu", "MulBackward0", "_version", "mean 4", "max 6"):
        assert piece in html


def test_unused_leaves_left_alone_this_cell_are_not_drawn():
    w = nbgrad.ones(3, requires_grad=True)  # another model's parameter
    x = nbgrad.ones(3, requires_grad=True)
    prev = nbi.versions_of(snap_of({"w": w, "x": x}))
    y = x.exp()
    snap = snap_of({"w": w, "x": x, "y": y}, previous=prev)
    dot = render.to_dot(snap)
    assert '"x\\n' in dot and '"y\\n' in dot
    assert '"w\\n' not in dot
    assert "w" in [t.name for t in snap.tensors]  # still a row of the Tensors tab
    with nbgrad.no_grad():
        w.add_(1)  # modified this cell: drawn again
    assert '"w\\n' in render.to_dot(snap_of({"w": w, "x": x, "y": y}, previous=prev))


def test_tensors_table_is_capped_changed_ones_first():
    ns = {f"t{i:03d}": nbgrad.ones(2) for i in range(20)}
    prev = nbi.versions_of(snap_of(ns))
    ns["t019"].add_(1)
    html = render.tensors_html(snap_of(ns, previous=prev, max_nodes=5))
    assert html.count("<tr ") == 5  # data rows (the header is a bare <tr>)
    assert ">t019<" in html and "(+1)" in html
    assert "... 15 more tensors (cap 5)" in html
