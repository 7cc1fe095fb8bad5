"""Draw a tensor's autograd graph, like torchviz's ``make_dot``.

>>> import nbgrad
>>> x = nbgrad.ones(3, requires_grad=True)
>>> g = nbgrad.viz.graph((x * x).sum(), params={"x": x})
>>> "MulBackward0" in g.source
True

``graph`` returns an object that Jupyter shows as SVG (``_repr_svg_`` / ``_repr_mimebundle_``) and
that ``.render(path)`` writes to a file. Nothing here imports IPython or pygraphviz at import
time.
"""

from __future__ import annotations

import os

__all__ = ["Graph", "graph", "make_dot", "tensor_html"]


class Graph:
    """A drawn autograd graph: DOT ``source``, SVG on demand, ``render(path)``.

    Attributes:
        source: the DOT source (str).
        snapshot: the :class:`nbgrad.notebook.inspect.Snapshot` it was drawn from (plain data,
            holds no tensor).
    """

    def __init__(self, snapshot, source: str):
        self.snapshot = snapshot
        self.source = source
        self._svg = None

    def svg(self) -> str | None:
        """The graph as an SVG string (pygraphviz), or None when it is not installed."""
        if self._svg is None:
            from nbgrad.notebook import render

            self._svg = render.dot_to_svg(self.source)
        return self._svg

    def text(self) -> str:
        """The graph as an indented text tree (no graphviz needed)."""
        from nbgrad.notebook import render

        return render.text_tree(self.snapshot)

    def _repr_svg_(self):
        """The SVG as Jupyter shows it: a picture (JupyterLab draws SVG outputs as an image),
        without the ids, classes and tooltips only the panel's script reads
        (notebook.svg_image): a saved notebook keeps it."""
        svg = self.svg()
        if svg is None:
            return None
        from nbgrad.notebook.svg_image import for_image

        return for_image(svg)

    def _repr_mimebundle_(self, include=None, exclude=None):
        from nbgrad.notebook import render

        svg = self._repr_svg_()
        data = {"text/plain": self.text()}
        if svg is not None:
            data["image/svg+xml"] = svg
        else:
            data["text/html"] = render.graph_html(None, self.snapshot)
        if include:
            data = {k: v for k, v in data.items() if k in include}
        if exclude:
            data = {k: v for k, v in data.items() if k not in exclude}
        return data

    def render(self, path, format: str | None = None) -> str:
        """Write the graph to ``path``; the format comes from the suffix (svg, png, pdf, dot).

        Returns:
            the path written (str).

        Raises:
            RuntimeError: pygraphviz is needed for svg/png/pdf and is not installed.
        """
        path = os.fspath(path)
        fmt = (format or os.path.splitext(path)[1].lstrip(".") or "svg").lower()
        if fmt in ("dot", "gv"):
            data = self.source.encode("utf-8")
        else:
            from nbgrad.notebook import layout
            from nbgrad.notebook.render import DOT_MISSING

            if not layout.available():
                raise RuntimeError(DOT_MISSING)
            data = layout.render(self.source, fmt)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def __repr__(self):
        n = self.snapshot
        return f"<nbgrad.viz.Graph: {len(n.nodes)} nodes{' (capped)' if n.truncated else ''}>"


def graph(tensors, params=None, show_saved: bool = True, max_nodes: int = 300, names=None,
          title: str | None = None) -> Graph:
    """Draw the ``grad_fn`` graph behind ``tensors`` (like ``torchviz.make_dot``).

    Args:
        tensors: a Tensor, or a list/tuple of them (the outputs).
        params: optional ``{name: tensor}`` naming leaves and intermediates, as in make_dot.
        show_saved: draw each node's saved tensors with saved vs current version (stale in red).
        max_nodes: the most nodes drawn; the rest is summarised as one "... N more" node.
        names: optional namespace (dict) to label tensors found in it (``%nbgrad graph`` passes
            the user namespace).
        title: an optional label above the graph.

    Returns:
        a :class:`Graph`.
    """
    from nbgrad.notebook import inspect as _inspect
    from nbgrad.notebook import render

    outs = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    named = []
    if names:
        named.extend(_inspect.named_tensors(names))
    if params:
        named.extend((str(k), v) for k, v in params.items())
    known = {id(t) for _, t in named}
    for i, t in enumerate(outs):
        if id(t) not in known:
            named.append(("output" if len(outs) == 1 else f"output[{i}]", t))
    # Only tensors of this graph: the outputs, their bases, and names of tensors reached.
    snap = _inspect.snapshot(named, max_nodes=max_nodes, show_saved=show_saved)
    if names or params:
        _prune_to(snap, {f"t{id(t)}" for t in outs})
    return Graph(snap, render.to_dot(snap, title=title))


def _prune_to(snap, out_keys) -> None:
    """Keep only what the outputs reach (named leaves / views outside their graph are dropped)."""
    keep_nodes = set()
    stack = [t.grad_fn_key for t in snap.tensors if t.key in out_keys and t.grad_fn_key]
    while stack:
        k = stack.pop()
        if k in keep_nodes or k not in snap.nodes:
            continue
        keep_nodes.add(k)
        stack.extend(snap.nodes[k].next)
    snap.nodes = {k: n for k, n in snap.nodes.items() if k in keep_nodes}
    leaf_keys = {n.variable for n in snap.nodes.values() if n.variable}
    keep_t = set(out_keys) | leaf_keys
    keep_t |= {t.key for t in snap.tensors if t.grad_fn_key in keep_nodes}
    for t in list(snap.tensors):
        if t.key in keep_t and t.base_key:
            keep_t.add(t.base_key)
    snap.tensors = [t for t in snap.tensors if t.key in keep_t]


def make_dot(var, params=None, show_attrs=False, show_saved=True, max_attr_chars=50):
    """torchviz's name for :func:`graph` (``show_attrs`` and ``max_attr_chars`` are ignored)."""
    return graph(var, params=params, show_saved=show_saved)


def tensor_html(t) -> str:
    """Rich HTML for a tensor (its display in IPython: ``nbgrad.notebook.register_tensor_html``)."""
    from nbgrad.notebook.render import tensor_html as _th

    return _th(t)
