"""The layout cache keyed by a graph's shape (``layout.shape_key``): a graph drawn again with other
ids and other digits of the same width in its labels (a re-run cell) reuses the layout, and the SVG
it gives is exactly the one Graphviz draws for that graph."""

import pytest

import nbgrad
from nbgrad import nn
from nbgrad.notebook import inspect as nbi
from nbgrad.notebook import layout, render

pytestmark = pytest.mark.skipif(not layout.available(), reason="pygraphviz is not installed")


def _fresh(dot: str) -> str:
    return layout._clean(layout._layout(dot))


def _graphs(n: int):
    """Snapshots of a few programs; ``n`` is in the shapes their labels print."""
    x = nbgrad.randn(n, requires_grad=True)
    y = x.tanh()
    y.add_(1)  # stale: TanhBackward0's saved result
    a = nbgrad.ones(5, n, requires_grad=True)
    b = a[1:3]
    c = (a * 2).t()
    d = c.exp().sum()
    w = nbgrad.randn(n, n, requires_grad=True)
    h = nbgrad.zeros(1, n)
    for _ in range(12):
        h = (h @ w).tanh()  # a loop body: one copy drawn in a titled cluster
    net = nn.Sequential(nn.Linear(n, 3), nn.Tanh(), nn.Linear(3, 1))
    out = net(nbgrad.randn(2, n)).pow(2).mean()
    out.backward()  # saved tensors freed
    return [nbi.snapshot([("y", y), ("x", x)]),
            nbi.snapshot([("d", d), ("b", b), ("c", c), ("a", a)]),
            nbi.snapshot([("h", h), ("w", w)]),
            nbi.snapshot([("out", out)])]


def test_a_graph_laid_out_through_its_shape_is_graphviz_own_svg():
    for snap in _graphs(3):
        dot = render.to_dot(snap)
        assert layout.shape_key(dot) is not None
        layout._CACHE.clear()
        assert layout.svg(dot) == _fresh(dot)


def test_the_same_shape_again_reuses_the_layout(monkeypatch):
    first = [render.to_dot(s) for s in _graphs(3)]
    again = [render.to_dot(s) for s in _graphs(4)]  # other ids, [4] for [3]
    want = [_fresh(d) for d in again]
    layout._CACHE.clear()
    for d in first:
        layout.svg(d)
    for a, b in zip(first, again):
        assert a != b and layout.shape_key(a)[0] == layout.shape_key(b)[0]

    def no_layout(*a, **k):
        raise AssertionError("laid out again")

    monkeypatch.setattr(layout, "_layout", no_layout)
    assert [layout.svg(d) for d in again] == want
    assert [layout.cached(d) for d in again] == want


def test_digits_of_another_width_are_another_shape():
    nine, ten = (render.to_dot(_graphs(n)[0]) for n in (9, 10))
    assert layout.shape_key(nine)[0] != layout.shape_key(ten)[0]
    layout.svg(nine)
    assert layout.svg(ten) == _fresh(ten)
    assert "[10]" in layout.svg(ten)


def test_a_label_with_digits_but_no_id_is_laid_out_as_it_is():
    dot = 'digraph { a [id=a, label="x1"]; b [id=b, label="y"]; a -> b [label="2 uses"]; }'
    assert layout.shape_key(dot) is None
    layout._CACHE.clear()
    assert layout.svg(dot) == _fresh(dot) and layout.cached(dot) == _fresh(dot)
