"""Values mode (``%nbgrad set values=on``): the numbers flowing through the graph.

- Each tensor box shows its data and, once known, its ``.grad``: in full for a tensor of at most
  ``SMALL`` elements, else a summary (shape, min / max / mean).
- Each edge into a ``grad_fn`` node shows the gradient that flowed along it in the last backward
  of the cell, as the engine computed it: :class:`EdgeGrads` registers a post-hook
  (``node.register_hook(fn(grad_inputs, grad_outputs))``, PyTorch's Node hook) on every node of
  the graph a backward starts from, just before it runs (``adapter.observe_backward``), for graphs
  of at most ``MAX_HOOKED`` nodes, in the first ``MAX_WATCHED`` backward calls of a cell (a
  training loop's edges show nothing: the graph drawn is its last step's); the hooks only read,
  and are removed, with the nodes they read, once the cell's panel is drawn (or when the next
  cell starts).

What is kept is plain data (:func:`keep`: a tuple of floats, or a summary), never a tensor, and
for both engines (read through ``adapter.array``). Off (the default outside the classroom
notebooks), none of this runs: the panel's cost is unchanged.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import adapter as A

SMALL = 6  # elements shown in full; larger tensors get shape, min, max, mean
MAX_WATCHED = 2
MAX_HOOKED = 300  # nodes of a graph whose edges are watched in a backward (above: not watched)
# backward calls watched per cell: a training-loop cell's later steps run unwatched (watching
# every step made a 20-layer MLP's step 3.2-3.7x slower), and its panel shows no edge gradients
_MAX_SEEN = 2000  # nodes whose edge gradients are remembered until the next cell


def keep(arr):
    """What values mode keeps of an array (numpy or a backend array): ``("v", shape, values)``
    (values a tuple of Python floats) for at most SMALL elements, else ``("s", shape, min, max,
    mean)``; None for None."""
    if arr is None:
        return None
    a = np.asarray(arr.get() if hasattr(arr, "get") and not isinstance(arr, np.ndarray) else arr)
    shape = tuple(a.shape)
    if a.size <= SMALL:
        return ("v", shape, tuple(float(v) for v in a.reshape(-1)))
    if a.dtype.kind not in "fiub":
        return ("s", shape, None, None, None)
    f = a.astype(np.float64, copy=False)
    with np.errstate(all="ignore"):
        return ("s", shape, float(f.min()), float(f.max()), float(f.mean()))


def num(v: float) -> str:
    """One number as shown: four significant digits (``0.7071``, ``-3``, ``1.2e-05``)."""
    return f"{v:.4g}"


def text(kept) -> str:
    """A kept value as one short line: ``0.7071``, ``[1, -2, 0.5]``, ``[[1, 2], [3, 4]]``, or
    ``[64, 10] min -0.3 max 0.5 mean 0.01``; ``""`` for None."""
    if kept is None:
        return ""
    if kept[0] == "v":
        _, shape, vals = kept
        if not shape:
            return num(vals[0])
        return _nested(shape, [num(v) for v in vals])
    _, shape, lo, hi, mean = kept
    head = "[" + ", ".join(str(s) for s in shape) + "]"
    if lo is None:
        return head
    return f"{head} min {num(lo)} max {num(hi)} mean {num(mean)}"


def _nested(shape, items) -> str:
    if len(shape) == 1:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nested(shape[1:], items[i * step:(i + 1) * step])
                           for i in range(shape[0])) + "]"


def tensor_values(t) -> str:
    """``"data 0.7071\\ngrad -0.5"``: a tensor's values, and its ``.grad`` once known."""
    lines = [f"data {text(keep(A.array(t)))}"]
    g = A.grad(t)
    if g is not None:
        lines.append(f"grad {text(keep(A.array(g)))}")
    return "\n".join(lines)


class EdgeGrads:
    """The gradient along each edge in the cell's last backward, read by the engine's own
    post-hooks on each node (see the module doc). ``grads_of(node)``: ``{child key: [text, ...]}``
    (one text per edge to that child, in ``next_functions`` order)."""

    def __init__(self):
        self.handles = []
        # id(node) -> (node, {child key: [kept, ...]}, its children): held from the backward to
        # the end of the cell (new_cell), never longer
        self.seen = {}
        self.pending = {}  # id(hook) -> its node, while the hooks are on (the same lifetime)
        self.installed = False
        self.calls = 0  # backward calls seen in this cell

    def install(self):
        if not self.installed:
            A.observe_backward(self.before_backward)
            self.installed = True

    def uninstall(self):
        if self.installed:
            A.unobserve_backward(self.before_backward)
            self.installed = False
        self.clear_hooks()
        self.seen = {}

    def clear_hooks(self):
        for h in self.handles:
            try:
                h.remove()
            except Exception:  # noqa: BLE001 - a graph already freed
                pass
        self.handles = []
        self.pending = {}

    def new_cell(self):
        """A cell begins, or its panel was drawn: the hooks go, and what they read and held."""
        self.clear_hooks()
        self.seen = {}
        self.calls = 0

    def before_backward(self, outputs, api):
        """A backward starts from ``outputs``: watch every node of their graph (bounded: graphs
        of MAX_HOOKED nodes, the first MAX_WATCHED backward calls of a cell)."""
        self.clear_hooks()  # the last backward is what is shown
        self.seen = {}
        self.calls += 1
        if self.calls > MAX_WATCHED:
            return
        nodes = []
        seen = set()
        stack = []
        for t in outputs:
            try:
                fn = A.grad_fn(t)
            except Exception:  # noqa: BLE001
                fn = None
            if fn is not None and id(fn) not in seen:
                seen.add(id(fn))
                stack.append(fn)
        while stack:
            n = stack.pop()
            nodes.append(n)
            if len(nodes) > MAX_HOOKED:
                return  # too big to watch: edges show nothing
            for c in A.next_nodes(n):
                if id(c) not in seen:
                    seen.add(id(c))
                    stack.append(c)
        for n in nodes:
            if A.node_name(n) == "AccumulateGrad":
                continue
            try:
                self.handles.append(n.register_hook(self._hook(n)))
            except Exception:  # noqa: BLE001 - a node that takes no hook: its edges show nothing
                pass

    def _hook(self, node):
        ref = weakref.ref(self)  # (the hook lives on the node: it keeps neither the node nor us)

        def read_edges(grad_inputs, grad_outputs):
            me = ref()
            n = me.pending.get(id(read_edges)) if me is not None else None
            if n is None or len(me.seen) > _MAX_SEEN:
                return None
            out = {}
            try:
                nexts = [c for c, _ in n.next_functions]
                for c, g in zip(nexts, grad_inputs):
                    if c is not None:
                        out.setdefault(f"n{id(c)}", []).append(
                            None if g is None else keep(A.array(g)))
            except Exception:  # noqa: BLE001 - reading must never break the backward
                return None
            # the node and its children are held until the cell's panel read them (torch makes
            # a node's Python object anew when none is held: its id, the panel's key, would change)
            me.seen[id(n)] = (n, out, nexts)
            return None
        self.pending[id(read_edges)] = node
        return read_edges

    def grads_of(self, node) -> dict:
        got = self.seen.get(id(node))
        if got is None or got[0] is not node:
            return {}
        return {k: [text(v) if v is not None else "None" for v in vs] for k, vs in got[1].items()}


def annotate(snap, named, edges: EdgeGrads | None) -> None:
    """Fill ``TensorInfo.values`` and ``NodeInfo.grads`` of ``snap`` (read from ``named``, the
    ``[(name, tensor)]`` it was taken from, and the leaves its AccumulateGrad nodes hold)."""
    objs = {}
    for _, t in named:
        objs[f"t{id(t)}"] = t
    want = snap.nodes
    stack = []
    seen = set()
    for t in list(objs.values()):
        try:
            fn = A.grad_fn(t)
        except Exception:  # noqa: BLE001
            fn = None
        if fn is not None and f"n{id(fn)}" in want and id(fn) not in seen:
            seen.add(id(fn))
            stack.append(fn)
    while stack:
        n = stack.pop()
        key = f"n{id(n)}"
        info = want.get(key)
        if info is None:
            continue
        if edges is not None:
            info.grads = edges.grads_of(n)
        var = A.leaf_variable(n) if info.is_accumulate else None
        if var is not None:
            objs.setdefault(f"t{id(var)}", var)
        for c in A.next_nodes(n):
            if id(c) not in seen and f"n{id(c)}" in want:
                seen.add(id(c))
                stack.append(c)
    for info in snap.tensors:
        t = objs.get(info.key)
        if t is not None:
            try:
                info.values = tensor_values(t)
            except Exception:  # noqa: BLE001 - an unreadable tensor shows no values
                pass


def toggle_html(shown: bool) -> str:
    """The live Graph tab's values switch (``extension/panel.js`` syncs ``values_shown``)."""
    return ('<div class="nbgrad-values-line" style="color:#666">values in the graph: '
            '<button class="nbgrad-values-toggle" title="the values and .grad of each tensor, '
            f'the gradient along each edge">{"hide" if shown else "show"}</button></div>')


def has_values(snap) -> bool:
    return any(t.values for t in snap.tensors) or any(n.grads for n in snap.nodes.values())


def without_values(snap):
    """A copy of ``snap`` whose boxes and edges show no values (the snapshot itself is kept)."""
    from dataclasses import replace

    return replace(snap, tensors=[replace(t, values="") for t in snap.tensors],
                   nodes={k: replace(n, grads={}) for k, n in snap.nodes.items()})


def with_values_now(snap, ns: dict):
    """A copy of ``snap`` with the values of its named tensors read now from namespace ``ns``
    (by name; a name bound to another tensor since is left out) and of the leaves they reach;
    no edge gradients (no backward was watched)."""
    from dataclasses import replace

    out = replace(snap, tensors=[replace(t) for t in snap.tensors],
                  nodes={k: replace(n, grads={}) for k, n in snap.nodes.items()})
    named = []
    for t in out.tensors:
        for name in (t.name.split(" = ") if t.named else ()):
            v = ns.get(name)
            if v is not None and f"t{id(v)}" == t.key:
                named.append((name, v))
                break
    annotate(out, named, None)
    return out
