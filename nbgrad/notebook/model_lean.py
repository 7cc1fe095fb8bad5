"""The model panel's *lean* training steps: after a cell's watched steps, nn's global module hooks
go and each model trained in the cell keeps a pre/post hook of its own (``ModelTracker``, which
takes these methods from :class:`LeanSteps`).

A lean step's model call is known by its range of node numbers; the calls inside it are those of
its *twin*, the last call of the same module recorded by the global hooks, shifted by the
difference in node numbers when the counts agree (the same code made the same nodes). The twins
of a cell are kept for the model's later cells (weakly: a dict by ``id`` with a weak reference):
in a light cell (``record=off``) a model whose twin is known goes lean at its first call, so no
step of the cell goes through the global hooks.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from . import adapter as A

MAX_KNOWN = 64  # models whose twins are kept for their later cells


@dataclass(slots=True)
class Call:
    """One module call: nodes with ``start < _seq <= end`` were made inside it."""

    start: int
    end: int
    ref: object  # weakref to the module
    cls: str
    where: object  # raw provenance capture of the user line that called it
    grad_on: bool
    out_requires_grad: bool
    cell: int
    # an input cut from a sibling's graph: (where raw, how, sure). how: "shared" / "copy" (seen
    # from storages; where: this call) or "detach" / "data" / "detach_" / "from_numpy" (the cut
    # recorded it; where: the cut); sure: the storages say so (else only the record does)
    cut: tuple | None = None
    out_cut: tuple | None = None  # (how, where raw): its output was cut inside its forward
    root: object = None  # weakref to the module the user called (this call's, or an outer one)
    depth: int = 1  # 1: a call the user made; 2: a call inside it, ...
    watched: bool = True  # False: a call after watching (only its node range and module known)


class LeanSteps:
    """The lean-step methods of ``ModelTracker`` (its ``calls``, ``lean``, ``known``, ...)."""

    def _start_lean(self) -> None:
        """The end of the first top-level call after watching (the second training step), when
        the engines of the modules called this cell want it (torch: ``A.lean_steps``): nn's
        global module hooks go, for the rest of the cell. Each module called at the top level
        this cell (the model, the loss module) gets a pre/post hook of its own instead, which
        lets the engine's recorder step aside inside it (its nodes get the lines of its *twin*
        when they are as many) and records the call's node range. A module first called later
        in the cell is not seen (no cluster)."""
        self.go_lean = False
        mine = []  # this cell's calls, newest first (the deque holds earlier cells' too)
        for c in reversed(self.calls):
            if c.cell != self.cell:
                break
            if type(c) is Call:
                mine.append(c)
        twins = {}
        for c in mine:  # the last top-level call of each module
            if c.depth == 1:
                m = c.ref()
                if m is not None and id(m) not in twins:
                    if not A.lean_steps(m):
                        return
                    twins[id(m)] = _Twin(c, [i for i in reversed(mine)
                                             if c.start <= i.start and i.end <= c.end])
        known = self.known
        for key in twins:
            if key in self.trained:
                if len(known) >= MAX_KNOWN:
                    for k, (ref, _) in list(known.items()):
                        if ref() is None:
                            del known[k]
                    if len(known) >= MAX_KNOWN:
                        known.clear()
                known[key] = (self.trained[key], twins)
        self._go_lean(twins)

    def _go_lean(self, twins) -> None:
        for key, twin in twins.items():
            mod = twin.top.ref()
            if mod is None:
                continue
            if self.light:  # (no recorder to step aside from: the node range, read directly)
                pre, post = self._light_hooks(twin, A.reading(mod).node_count, key)
            else:
                pre, post = self._lean_pre, self._make_lean_post(twin)
            try:  # (also when the forward raises: the recorder goes back on the stack)
                post = mod.register_forward_hook(post, always_call=True)
            except TypeError:  # an nn without always_call
                post = mod.register_forward_hook(post)
            self.lean[key] = (mod.register_forward_pre_hook(pre), post)
        if self.lean:
            self._disable()

    def _lean_known(self, module, args) -> bool:
        """A light cell's first top-level call of a model whose twins an earlier cell left:
        lean from this call on (the model armed, its step counted as a watched call would, the
        modules called with it at the top level then hooked again); False when not known."""
        rec = self.known.get(id(module))
        if rec is None or rec[0]() is not module or not A.grad_on(module):
            return False
        key, twins = id(module), rec[1]
        counted = key in self.roots  # (else its loss module's hook counts its steps)
        if not counted and not any(k in self.loss_hooks for k in twins):
            return False
        if not self._arm(module):
            return False
        self.watching = self.go_lean = False
        self._start_counting(skip=key)
        self._go_lean(twins)
        if key not in self.lean:
            return False
        self._lean_enter(module, args)  # (torch runs no hook added now in this call)
        return True

    def _lean_enter(self, module, args) -> None:
        """What the lean pre-hook added during ``module``'s call would have done for it."""
        if self.light:
            self._lean_stack.append(A.node_count(module))
        else:
            self._lean_pre(module, args)

    def _light_hooks(self, twin, count, key):
        """A light cell's lean hooks: the call's node range (``count``: the engine's node
        counter), nothing else; a call that made other nodes than its twin leaves the twins
        known no longer (the module ``key``'s next cell is watched again)."""
        stack, calls, cell, known = self._lean_stack, self.calls, self.cell, self.known
        n = twin.top.end - twin.top.start

        def nbgrad_panel_light_pre(module, args):
            stack.append(count())

        def nbgrad_panel_light_step(module, args, output):
            if stack:  # (else a hook added during this call)
                start = stack.pop()
                end = count()
                if end != start:
                    calls.append(_LeanCall(start, end, twin, cell))
                if end - start != n:
                    known.pop(key, None)

        return nbgrad_panel_light_pre, nbgrad_panel_light_step

    def _lean_pre(self, module, args):
        self._lean_stack.append((A.pause_recording(module), A.node_count(module)))

    def _make_lean_post(self, twin):
        def nbgrad_panel_lean_step(module, args, output):
            if not self._lean_stack:  # (hook added during this call)
                return
            token, start = self._lean_stack.pop()
            end = A.node_count(module)
            A.resume_recording(module, token, (twin.top.start + 1, twin.top.end + 1))
            if end != start:
                self.calls.append(_LeanCall(start, end, twin, self.cell))
        return nbgrad_panel_lean_step

    def _lean_off(self) -> None:
        for handles in self.lean.values():
            for h in handles:
                h.remove()
        self.lean = {}
        self._lean_stack = []


class _Twin:
    """The last call of a trained model recorded by the global hooks, and the calls inside it."""

    __slots__ = ("top", "inner")

    def __init__(self, top, inner):
        self.top, self.inner = top, inner


class _LeanCall:
    """A trained model's call in a lean step: nodes ``start < seq <= end``."""

    __slots__ = ("start", "end", "twin", "cell")

    def __init__(self, start, end, twin, cell):
        self.start, self.end, self.twin, self.cell = start, end, twin, cell

    def top(self) -> Call:
        t = self.twin.top
        return Call(self.start, self.end, t.ref, t.cls, None, True, True, self.cell,
                    root=t.ref, depth=1, watched=False)

    def expand(self) -> list:
        t = self.twin.top
        if self.end - self.start != t.end - t.start:
            return [self.top()]
        d = self.start - t.start
        return [Call(c.start + d, c.end + d, c.ref, c.cls, None, True, True, self.cell,
                     root=t.ref, depth=c.depth, watched=False) for c in self.twin.inner]
