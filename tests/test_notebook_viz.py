"""nbgrad.viz.graph: torchviz's make_dot, for nbgrad."""

import sys

import pytest

import nbgrad
from nbgrad import viz
from nbgrad.notebook import layout

HAS_DOT = layout.available()  # pygraphviz (Graphviz inside its wheel)


def test_graph_source_names_params_and_saved_tensors():
    w = nbgrad.ones(3, requires_grad=True)
    x = nbgrad.ones(3)
    out = (w * x).tanh().sum()
    g = viz.graph(out, params={"w": w})
    src = g.source
    for name in ("SumBackward0", "TanhBackward0", "MulBackward0", "AccumulateGrad"):
        assert name in src
    assert '"w\\n[3] v0"' in src
    assert "result" in src  # tanh's saved output
    assert "result" not in viz.graph(out, params={"w": w}, show_saved=False).source
    assert "output" in src


def test_graph_with_names_keeps_only_what_the_output_reaches():
    a = nbgrad.ones(2, requires_grad=True)
    b = nbgrad.ones(2, requires_grad=True)
    ya = a * 2
    yb = b * 3
    g = viz.graph(ya, names={"a": a, "b": b, "ya": ya, "yb": yb})
    assert '"a\\n' in g.source and '"ya\\n' in g.source
    assert '"b\\n' not in g.source and '"yb\\n' not in g.source


@pytest.mark.skipif(not HAS_DOT, reason="pygraphviz not installed")
def test_graph_svg_and_render(tmp_path):
    x = nbgrad.ones(3, requires_grad=True)
    g = viz.make_dot((x * x).sum(), params={"x": x})
    svg = g._repr_svg_()
    assert svg.startswith("<svg") and "MulBackward0" in svg
    bundle = g._repr_mimebundle_()
    assert bundle["image/svg+xml"] == svg and "MulBackward0" in bundle["text/plain"]
    p = g.render(tmp_path / "g.svg")
    assert open(p).read().lstrip().startswith("<?xml")
    p = g.render(tmp_path / "g.png")
    assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    p = g.render(tmp_path / "g.dot")
    assert open(p).read() == g.source


def test_graph_without_dot(monkeypatch, tmp_path):
    from nbgrad.notebook import layout

    monkeypatch.setitem(sys.modules, "pygraphviz", None)  # a failed import of pygraphviz
    monkeypatch.setattr(layout, "_CACHE", {})
    x = nbgrad.ones(3, requires_grad=True)
    g = viz.graph(x.exp())
    assert g._repr_svg_() is None
    bundle = g._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert "pygraphviz is not installed" in bundle["text/html"]
    assert "ExpBackward0" in g.text()
    with pytest.raises(RuntimeError, match="install"):
        g.render(tmp_path / "g.svg")


def test_graph_cap():
    x = nbgrad.ones(1, requires_grad=True)
    y = x
    for _ in range(400):
        y = y + 1
    g = viz.graph(y, max_nodes=300)
    assert g.snapshot.truncated and len(g.snapshot.nodes) == 300
    assert "more nodes (cap 300)" in g.source


def test_viz_import_is_light():
    import subprocess
    import sys

    code = ("import sys, nbgrad; heavy = {'IPython', 'ipywidgets', 'anywidget', 'graphviz', "
            "'traitlets'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
