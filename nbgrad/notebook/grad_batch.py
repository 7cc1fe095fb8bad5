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
"""

from __future__ import annotations

import math

import numpy as np

from . import adapter as A


class GradBatch:
    """The parameters whose gradient is read when the running backward pass is over."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.pending: list = []  # ParamStat, in the order the hooks ran

    def defer(self, st, grad) -> bool:
        """Note ``st`` for the batch read after this backward pass; False: read it now."""
        eng = A.batched_grads(grad)
        if eng is None or not eng.after_backward(self.flush):  # (one callback per hook: the first reads
            return False  # all, a backward that raised before its callbacks leaves none queued)
        self.pending.append(st)
        return True

    def flush(self) -> None:
        """The backward pass is over: read the noted gradients (never raises into it)."""
        items, self.pending = self.pending, []
        if not items:
            return
        try:
            self._read(items)
        except Exception:  # noqa: BLE001 - the user's backward() is never failed by the panel
            pass

    def _read(self, items) -> None:
        live = []
        for st in items:
            p = st.ref()
            g = A.grad(p) if p is not None else None
            if g is not None:
                live.append((st, p, g))
        if not live:
            return
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
    for st, p in items:
        if flat is None:
            st.prev = A.array(p).copy()
        else:
            n = int(p.numel())
            st.prev = flat[at:at + n].reshape(tuple(p.shape))
            at += n
        st.prev_nodes = A.node_count(p)
        st.prev_version = A.version(p)
        tracker.pending_ratio.append(st)
