"""What a cell made or changed: the panel's focus, found incrementally from one cell to the next.

The extension keeps, per name, a small signature of the tensor bound to it after the last cell
(ids and counters: never the tensor). After a cell that touched nbgrad it compares: a name that is
new, rebound, modified in place, or whose ``.grad`` or ``grad_fn`` changed is *this cell's*; the
panel draws from those tensors only. Graphs that earlier cells made and this one left alone are
folded to a line ("3 earlier graphs: loss, y, c"), and a cell that made only plain tensors (no
graph, no view, nothing modified) gets no panel at all.
"""

from __future__ import annotations

import weakref
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
    previous: dict = field(default_factory=dict)  # {name: (id, version, ...)} before this cell
    relevant: bool = False  # False: nothing autograd-related changed, no panel
    unchanged: list = field(default_factory=list)  # [(name, id of grad_fn)] of earlier graphs
    leaves: dict = field(default_factory=dict)  # id -> name of earlier leaves that need grad


def _signature(t) -> tuple:
    """(id, version, id of grad_fn, id of .grad, requires_grad, has grad_fn, is a view)."""
    fn = A.grad_fn(t)
    return (id(t), A.version(t), id(fn) if fn is not None else 0, id(A.grad(t)),
            bool(t.requires_grad), fn is not None, A.base(t) is not None)


_NO_GRAD = id(None)


def _ref(g):
    """A weak reference to a ``.grad`` (None: no grad, or one that takes none: the id alone)."""
    if g is None:
        return None
    try:
        return weakref.ref(g)
    except TypeError:
        return None


class Tracker:
    """Signatures of the named tensors after the previous cell (plain ints and bools)."""

    def __init__(self):
        self.state: dict[str, tuple] = {}
        # name -> a weak reference to its .grad when read (a new .grad can land at the address
        # of the one it replaced: the id alone would call it unchanged)
        self.grads: dict = {}

    def update(self, named, *, error: bool = False, bumped: bool = False) -> Focus:
        """Compare ``named`` (this cell's ``[(name, tensor)]``) with the previous cell's.

        ``bumped``: the engine counted in-place writes in this cell. A tensor still bound to its
        name is read only then, or when it is a leaf that takes a gradient (a backward changes
        its ``.grad``): the per-cell cost is a dict lookup per name otherwise.

        Earlier graphs come into the panel when the cell acted on them: a saved tensor in them
        went stale (a named tensor was written in place), a backward of this cell ran through
        them (their leaves' ``.grad`` changed and the cell made no graph of its own), or the
        cell raised (those with a stale saved tensor, else the first few).
        """
        focus = Focus(previous=self.state)
        new_state = {}
        changed = []
        unchanged = []  # (name, tensor, sig) of earlier graphs
        leaves = set()  # ids of tensors whose .grad this cell changed
        modified = made_graph = relevant = False
        old = self.state
        get = old.get
        refs, new_refs = self.grads, {}
        for name, t in named:
            prev = get(name)
            if prev is not None and prev[0] == id(t):
                if bumped or (prev[4] and not prev[5]):
                    try:
                        version, grad = A.version_and_grad(t)
                        ref = refs.get(name)
                        sig = (prev if version == prev[1] and id(grad) == prev[3]
                               and (ref is None or ref() is grad) else _signature(t))
                        new_refs[name] = _ref(grad) if sig is not prev else ref
                    except Exception:  # noqa: BLE001 - an unreadable tensor is skipped, alone
                        continue
                else:  # no in-place op this cell, and not a leaf that takes a gradient
                    sig = prev
                    new_refs[name] = refs.get(name)
                new_state[name] = sig
                if sig is prev:
                    if sig[5]:
                        unchanged.append((name, t, sig))
                    elif sig[4]:
                        focus.leaves.setdefault(sig[0], name)
                    continue
                changed.append((name, t))
                relevant = True  # an old tensor modified in place, or its .grad changed
                modified = modified or sig[1] != prev[1]
                if sig[3] != prev[3]:
                    leaves.add(sig[0])
                made_graph = made_graph or sig[5]
                continue
            try:
                sig = _signature(t)
                if sig[3] != _NO_GRAD:
                    new_refs[name] = _ref(A.grad(t))
            except Exception:  # noqa: BLE001
                continue
            new_state[name] = sig
            changed.append((name, t))
            made_graph = made_graph or sig[5]
            relevant = relevant or sig[4] or sig[5] or sig[6]  # needs grad, a graph, a view
        self.state, self.grads = new_state, new_refs
        focus.relevant = relevant or error
        focus.named = changed[:MAX_FOCUS]
        tests = []
        if modified or error:
            tests.append(lambda node: any(s.is_stale and not s.released
                                          for s in A.saved_tensors(node)))
        if leaves and not made_graph:  # `loss.backward()` on an earlier cell's graph
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
        focus.unchanged = [(name, sig[2]) for name, _, sig in unchanged]
        return focus

    def fold(self, focus: Focus, snap) -> None:
        """Name the old tensors whose grad_fn the drawn graph reaches (``y`` on the TanhBackward0
        node under ``z = y * 2``); the rest are the earlier graphs, folded to one line."""
        earlier = []
        drawn = {}  # id of a drawn grad_fn -> its node ("n<id>" keys: a few, not a string each)
        for key, node in (snap.nodes or {}).items():
            if key[:1] == "n" and key[1:].isdigit():
                drawn[int(key[1:])] = node
        for name, fn_id in focus.unchanged:
            node = drawn.get(fn_id)
            if node is None:
                earlier.append(name)
            elif name not in node.outputs:
                node.outputs.append(name)
        snap.earlier = sorted(earlier)
        for t in snap.tensors:  # an earlier leaf the drawn graph reaches (x under y = x.tanh())
            if not t.named:
                name = focus.leaves.get(int(t.key[1:]))
                if name is not None:
                    t.name, t.named = name, True


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
