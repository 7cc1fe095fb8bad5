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
STALE_SEARCH = 3000  # nodes of earlier graphs searched for a saved tensor this cell made stale


@dataclass
class Focus:
    """The outcome of :meth:`Tracker.update` for one cell."""

    named: list = field(default_factory=list)  # [(name, tensor)] to snapshot
    earlier: list = field(default_factory=list)  # names of earlier graphs, folded
    previous: dict = field(default_factory=dict)  # {name: (id, version)} before this cell
    relevant: bool = False  # False: nothing autograd-related changed, no panel
    labels: dict = field(default_factory=dict)  # "n<id of grad_fn>" -> [names] of old tensors


def _signature(t) -> tuple:
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
        """
        focus = Focus()
        new_state = {}
        changed, unchanged = [], []
        grads_changed = False
        old = self.state
        for name, t in named:
            try:
                sig = _signature(t)
            except Exception:  # noqa: BLE001 - an unreadable tensor is skipped, alone
                continue
            new_state[name] = sig
            prev = old.get(name)
            if prev is not None and prev[0] == sig[0]:
                focus.previous[name] = (prev[0], prev[1])
            if prev == sig:
                if sig[5]:
                    unchanged.append((name, t, sig))
                continue
            changed.append((name, t))
            rebound = prev is None or prev[0] != sig[0]
            if sig[4] or sig[5] or sig[6]:
                focus.relevant = True  # requires grad, has a graph, or is a view
            elif not rebound and (prev[1] != sig[1] or prev[3] != sig[3]):
                focus.relevant = True  # an old tensor modified in place, or its .grad changed
            if not rebound and prev[3] != sig[3]:
                grads_changed = True
        self.state = new_state
        if error:
            focus.relevant = True
        focus.named = changed[:MAX_FOCUS]
        if bumped and unchanged:
            stale = _with_stale_saved(unchanged)
            if stale:
                focus.relevant = True
                focus.named += [(n, t) for n, t, _ in unchanged if id(t) in stale][:MAX_CONTEXT]
                unchanged = [u for u in unchanged if id(u[1]) not in stale]
        context = error or grads_changed
        if context:  # the graphs the backward ran through: draw the first few earlier ones too
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


def _with_stale_saved(entries) -> set:
    """ids of the tensors among ``[(name, tensor, sig)]`` whose graph holds a stale saved
    tensor, searching at most :data:`STALE_SEARCH` nodes in all."""
    out = set()
    seen = set()
    budget = STALE_SEARCH
    for _, t, _ in entries:
        stack = [A.grad_fn(t)]
        while stack and budget > 0:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            budget -= 1
            if any(s.is_stale and not s.released for s in A.saved_tensors(node)):
                out.add(id(t))
                break
            stack.extend(A.next_nodes(node))
    return out
