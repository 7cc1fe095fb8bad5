"""What a cell made or changed: the panel's focus, found incrementally from one cell to the next.

The extension keeps, per name, a small signature of the tensor bound to it after the last cell
(ids and counters: never the tensor). After a cell that touched nbgrad it compares: a name that is
new, rebound, modified in place, or whose ``.grad`` or ``grad_fn`` changed is *this cell's*; the
panel draws from those tensors only. Graphs that earlier cells made and this one left alone are
folded to a line ("3 earlier graphs: loss, y, c"), and a cell that made only plain tensors (no
graph, no view, nothing modified) gets no panel at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import adapter as A

MAX_FOCUS = 200  # tensors of one cell drawn at most (the snapshot caps nodes on its own)
MAX_CONTEXT = 16  # earlier graphs drawn in full when the cell raised or ran backward
GRAPH_SEARCH = 3000  # nodes of earlier graphs searched for what this cell did to them


@dataclass
class Focus:
    """The outcome of :meth:`Tracker.update` for one cell."""

    named: list = field(default_factory=list)  # [(name, tensor)] to snapshot
    earlier: list = field(default_factory=list)  # names of earlier graphs, folded
    previous: dict = field(default_factory=dict)  # {name: (id, version)} before this cell
    relevant: bool = False  # False: nothing autograd-related changed, no panel
    labels: dict = field(default_factory=dict)  # "n<id of grad_fn>" -> [names] of old tensors


def _signature(t) -> tuple:
    """(id, version, id of grad_fn, id of .grad, requires_grad, has grad_fn, is a view)."""
    fn = A.grad_fn(t)
    return (id(t), A.version(t), id(fn) if fn is not None else 0, id(A.grad(t)),
            bool(t.requires_grad), fn is not None, A.base(t) is not None)


class Tracker:
    """Signatures of the named tensors after the previous cell (plain ints and bools)."""

    def __init__(self):
        self.state: dict[str, tuple] = {}

    def update(self, named, *, error: bool = False, bumped: bool = False) -> Focus:
        """Compare ``named`` (this cell's ``[(name, tensor)]``) with the previous cell's.

        ``bumped``: the cell modified tensors in place; earlier graphs holding a saved tensor
        that is now stale are then this cell's business too (backward through them will fail).
        Likewise the earlier graphs a backward of this cell ran through (their leaves' ``.grad``
        changed), and, when the cell raised, graphs with a stale saved tensor (else the first
        few).
        """
        focus = Focus()
        new_state = {}
        changed, unchanged = [], []
        grads_changed = False
        leaves = set()  # ids of tensors whose .grad this cell changed
        made_graph = False  # a tensor of this cell has a grad_fn
        old = self.state
        for name, t in named:
            prev = old.get(name)
            try:
                if prev is not None and prev[0] == id(t):
                    # the same tensor: only an in-place write (counted by the engine: `bumped`)
                    # or a backward (into a leaf's .grad) can have changed it
                    if not bumped and (prev[5] or not prev[4]):
                        sig = prev  # no in-place op this cell, and not a leaf that takes a grad
                    else:
                        version, grad = A.version_and_grad(t)
                        sig = (prev if (version, id(grad)) == (prev[1], prev[3])
                               else _signature(t))
                else:
                    sig = _signature(t)
            except Exception:  # noqa: BLE001 - an unreadable tensor is skipped, alone
                continue
            new_state[name] = sig
            if prev is not None and prev[0] == sig[0]:
                focus.previous[name] = (prev[0], prev[1])
            if prev == sig:
                if sig[5]:
                    unchanged.append((name, t, sig))
                continue
            changed.append((name, t))
            rebound = prev is None or prev[0] != sig[0]
            made_graph = made_graph or sig[5]
            if sig[4] or sig[5] or sig[6]:
                focus.relevant = True  # requires grad, has a graph, or is a view
            elif not rebound and (prev[1] != sig[1] or prev[3] != sig[3]):
                focus.relevant = True  # an old tensor modified in place, or its .grad changed
            if not rebound and prev[3] != sig[3]:
                grads_changed = True
                leaves.add(sig[0])
        self.state = new_state
        if error:
            focus.relevant = True
        focus.named = changed[:MAX_FOCUS]
        # Earlier graphs this cell acted on: one holding a saved tensor the cell made stale, one
        # a backward of this cell ran through (its leaves got a gradient), or when the cell
        # raised, the first few.
        tests = []
        if bumped or error:
            tests.append(lambda node: any(s.is_stale and not s.released
                                          for s in A.saved_tensors(node)))
        if grads_changed and not made_graph:  # `loss.backward()` on an earlier cell's graph
            tests.append(lambda node: id(A.leaf_variable(node)) in leaves)
        if tests and unchanged:
            hit = _graphs_with(unchanged, lambda node: any(f(node) for f in tests))
            if hit:
                focus.relevant = True
                focus.named += [(n, t) for n, t, _ in unchanged if id(t) in hit][:MAX_CONTEXT]
                unchanged = [u for u in unchanged if id(u[1]) not in hit]
            elif error:
                focus.named += [(n, t) for n, t, _ in unchanged[:MAX_CONTEXT]]
                unchanged = unchanged[MAX_CONTEXT:]
        for name, _, sig in unchanged:
            focus.labels.setdefault(f"n{sig[2]}", []).append(name)
        return focus

    def fold(self, focus: Focus, snap) -> None:
        """Name the old tensors whose grad_fn the drawn graph reaches (``y`` on the TanhBackward0
        node under ``z = y * 2``); the rest are the earlier graphs, folded to one line."""
        earlier = []
        for key, names in focus.labels.items():
            node = snap.nodes.get(key)
            if node is not None:
                node.outputs.extend(n for n in names if n not in node.outputs)
            else:
                earlier.extend(names)
        snap.earlier = sorted(earlier)


def _graphs_with(entries, test) -> set:
    """ids of the tensors among ``[(name, tensor, sig)]`` whose graph has a node for which
    ``test(node)`` is true, searching at most :data:`GRAPH_SEARCH` nodes in all."""
    out = set()
    seen = set()
    budget = GRAPH_SEARCH
    for _, t, _ in entries:
        stack = [A.grad_fn(t)]
        while stack and budget > 0:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            budget -= 1
            if test(node):
                out.add(id(t))
                break
            stack.extend(A.next_nodes(node))
    return out
