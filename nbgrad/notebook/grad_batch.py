"""The model panel's gradient statistics, read once per backward pass rather than per parameter.

A watched step's one-shot gradient hooks (``model_hooks.ModelTracker._grad_hook``) used to read
each gradient through numpy as it arrived: its norm, its exact zeros, the weights copied for the
update ratio, a few numpy calls per parameter and step. When the engine allows it (torch:
``adapter_torch.after_backward`` / ``grad_stats``) and the gradient was not summed into an
earlier one (``zero_grad`` ran: ``.grad`` was None or zeros), the hook only notes the parameter;
once the backward pass is over, every noted parameter's ``.grad`` (then equal to the fresh
gradient) is read in one batch: one ``torch._foreach_norm`` over all of them, one count of exact
zeros over their concatenation, the weights copied in one concatenation. Otherwise (nbgrad's
engine, a gradient summed into another, a batch that cannot be made) :func:`record` reads that
one gradient at once, as before. Nothing here keeps a tensor past the backward call: the noted
parameters are held by the weak references of their ``ParamStat``.

Where the engine runs its backward observers inside the backward call and can run a callback at
its end (nbgrad's: ``adapter_nbgrad.UNHOOKED_GRADS``), a watched parameter gets no hook at all
(:meth:`GradBatch.arm`): before each backward call its ``.grad`` is noted (None or zeros: the
gradient will be the new one alone), and once the call is over the parameters whose ``.grad`` it
changed are read in one batch as above. One whose ``.grad`` holds an earlier sum, or a call of
``autograd.grad`` (no ``.grad`` changes), gets its one-shot hook then, as before.
"""

from __future__ import annotations

import math
import weakref
from collections import deque

import numpy as np

from . import adapter as A


UNHOOKED = "unhooked"  # ParamStat.armed of a parameter watched without a hook


class GradBatch:
    """The parameters whose gradient is read when the running backward pass is over."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.pending: list = []  # (ParamStat, gradient), in the order the hooks ran
        self.unhooked: list = []  # ParamStat armed without a hook (UNHOOKED), in arming order

    def arm(self, st, p) -> bool:
        """Watch ``p``'s next gradient without a hook, when its engine allows; False: hook it."""
        if not A.unhooked_grads(p):
            return False
        st.armed = UNHOOKED
        self.unhooked.append(st)
        return True

    def disarm(self) -> None:
        for st in self.unhooked:
            if st.armed is UNHOOKED:
                st.armed = None
        self.unhooked = []

    def before_backward(self, outputs, api) -> None:
        """The tracker's backward observer, before each backward call: the ``.grad`` of each
        parameter watched without a hook, read again once the call is over (:meth:`_after`);
        one summed into an earlier gradient, or any in an ``autograd.grad`` call, is hooked."""
        if not self.unhooked or not outputs or not A.unhooked_grads(outputs[0]):
            return
        keep, watch = [], []
        tracker = self.tracker
        for st in self.unhooked:
            p = st.ref() if st.armed is UNHOOKED else None
            if p is None:
                continue
            g = A.grad(p)
            if api != "backward" or (g is not None and A.array(g).any()):
                tracker.hook(st, p)  # (its hook sees the new gradient alone, before the sum)
                continue
            keep.append(st)
            watch.append((st, p, g, A.version(g) if g is not None else 0))
        self.unhooked = keep
        if watch and not A.after_backward(outputs[0], lambda: self._after(watch)):
            for st, p, _, _ in watch:  # (no end of the call to wait for: hooked)
                tracker.hook(st, p)
            self.unhooked = []

    def _after(self, watch) -> None:
        """The backward call is over: the watched parameters whose ``.grad`` it changed got
        their gradient (``.grad`` None or zeros before: the new one alone); read in one batch."""
        tracker = self.tracker
        got = []
        try:
            step = tracker.step_count()
            for st, p, old, version in watch:
                if st.armed is not UNHOOKED:
                    continue
                g = A.grad(p)
                if g is None or (g is old and A.version(g) == version):
                    continue  # (not reached: still armed)
                st.armed = None
                seen(tracker, st, old, True, step)
                got.append((st, p, g))
            if got:
                self.unhooked = [st for st in self.unhooked if st.armed is UNHOOKED]
                self._read(got)
                if tracker.eval_forward:
                    for st, _, _ in got:
                        eval_check(tracker, st)
        except Exception:  # noqa: BLE001 - the user's backward() is never failed by the panel
            pass

    def defer(self, st, grad) -> bool:
        """Note ``st`` for the batch read after this backward pass; False: read it now."""
        eng = A.batched_grads(grad)
        # (one callback per hook: the first reads all; a backward that raised before its
        # callbacks leaves none queued)
        if eng is None or not eng.after_backward(self.flush):
            return False
        self.pending.append((st, grad))  # (held until the pass is over)
        return True

    def flush(self) -> None:
        """The backward pass is over: read the noted gradients (never raises into it)."""
        items, self.pending = self.pending, []
        if not items:
            return
        try:
            live = []
            for st, hooked in items:
                p = st.ref()
                g = A.grad(p) if p is not None else None
                if g is None and p is not None:  # autograd.grad: no .grad, the hook's own
                    g = hooked
                if g is not None:
                    live.append((st, p, g))
            if live:
                self._read(live)
        except Exception:  # noqa: BLE001 - the user's backward() is never failed by the panel
            pass

    def _read(self, live) -> None:
        """The gradients of ``live``, ``[(stat, parameter, its .grad)]``."""
        eng = A.batched_grads(live[0][2])
        stats = eng.grad_stats([g for _, _, g in live]) if eng is not None else None
        tracker = self.tracker
        for i, (st, p, g) in enumerate(live):
            if stats is None:
                record(tracker, st, p, g)
                continue
            sq, zeros, size = stats[i]
            _note(tracker, st, sq, math.sqrt(sq) if sq == sq else sq, zeros / max(size, 1))
        ratio = [(st, p) for st, p, _ in live if st.with_ratio]
        if ratio:
            _copy_weights(tracker, ratio)


def seen(tracker, st, old, fresh: bool, step=None) -> None:
    """A watched backward call brought ``st``'s parameter a gradient: how many calls were summed
    into its ``.grad`` (``old``: it before the sum; ``fresh``: None or zeros, a new sum; ``step``:
    the tracker's step count, when read already)."""
    if step is None:
        step = tracker.step_count()
    if fresh:  # zero_grad: None, or zeroed in place
        st.accumulated, st.missed, st.summed_into = 1, False, None
    else:
        st.accumulated += 1
        st.missed = st.missed or step > st.hits + 1
        st.summed_into, st.summed_version = weakref.ref(old), A.version(old)
    st.summed_at = step
    st.max_accumulated = max(st.max_accumulated, st.accumulated)
    st.hits += 1
    tracker.backward_seen = True
    if st.sample != tracker.last_sample:  # a new backward call watched
        tracker.last_sample = st.sample
        tracker.watched_backwards += 1


def eval_check(tracker, st) -> None:
    """A backward reached the parameter of a module in eval mode (see ``eval_trained``)."""
    if st.module is None:
        tracker.find_owners()
    mod = st.module() if st.module is not None else None
    if mod is not None and not mod.training:
        tracker.eval_trained()


def record(tracker, st, p, grad) -> None:
    """One gradient read at once through numpy: its norm, zeros, and the weights copied for the
    update ratio (``st.with_ratio``)."""
    a = A.array(grad).reshape(-1)
    sq = float(a @ a) if a.dtype.kind == "f" else float((a * a).sum())
    _note(tracker, st, sq, math.sqrt(sq) if sq == sq else float("nan"),
          np.count_nonzero(a == 0) / max(a.size, 1))  # (-0.0 included)
    if st.with_ratio:
        _copy_weights(tracker, [(st, p)])


def _note(tracker, st, sq, norm, zeros) -> None:
    st.norms.append(norm)
    st.zeros = zeros
    if not math.isfinite(sq):
        st.nonfinite = True
    tracker._step_norm(st.sample, sq)


def _copy_weights(tracker, items) -> None:
    """The weights before the optimizer step, for the update ratio read at the next step (one
    copy of them all when the engine reads them together: each parameter's a view of it)."""
    eng = A.batched_grads(items[0][1]) if len(items) > 1 else None
    flat = eng.flat_values([p for _, p in items]) if eng is not None else None
    at = 0
    nodes = A.node_count(items[0][1]) if flat is not None else None  # (one engine's counter)
    for st, p in items:
        if flat is None:
            st.prev = A.array(p).copy()
            st.prev_nodes = A.node_count(p)
        else:
            n = int(p.numel())
            st.prev = flat[at:at + n].reshape(tuple(p.shape))
            at += n
            st.prev_nodes = nodes
        st.prev_version = A.version(p)
        tracker.pending_ratio.append(st)
    if flat is not None:
        tracker.ratio_flat = (flat, [st for st, _ in items])


def _unmoved(tracker) -> set:
    """ids of the stats of the last batch copied together whose weights are all unchanged now
    (one comparison: a cell that trains no further, as most do, has no ratio to compute)."""
    rf, tracker.ratio_flat = tracker.ratio_flat, None
    if rf is None:
        return set()
    flat, sts = rf
    ps = [st.ref() for st in sts]
    if any(p is None for p in ps) or any(st.prev is None or st.prev.base is not flat
                                         for st in sts):
        return set()
    eng = A.batched_grads(ps[0])
    now = eng.flat_values(ps) if eng is not None else None
    if now is None or now.shape != flat.shape or not np.array_equal(now, flat):
        return set()
    return {id(st) for st in sts}


def ratios(tracker) -> None:
    """||weight change|| / ||weight|| of the parameters copied after a watched backward, once a
    forward ran since (not in the backward that copied them)."""
    later = []
    unmoved = _unmoved(tracker) if tracker.ratio_flat is not None else ()
    for st in tracker.pending_ratio:
        p = st.ref()
        if (p is not None and st.prev_nodes >= A.node_count(p)
                and st.prev_version == A.version(p)):  # neither a forward nor a step since
            later.append(st)
            continue
        if p is None or st.prev is None or id(st) in unmoved \
                or st.prev.shape != A.array(p).shape:
            st.prev = None
            continue
        w = A.array(p).reshape(-1)
        d = st.prev.reshape(-1)  # our own copy: the difference is made in it
        d -= w
        dn = float(d @ d)
        if dn:  # the weights moved: an optimizer step
            wn = float(w @ w)
            if not st.ratios:
                st.ratios = deque(st.ratios, maxlen=st.norms.maxlen)
            st.ratios.append(math.sqrt(dn / wn) if wn else float("inf"))
        st.prev = None
    tracker.pending_ratio = later
