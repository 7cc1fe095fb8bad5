"""The model panel's gradients in a *light* cell (``%nbgrad set record=off``): no hook on any
parameter, the gradients read a few times a cell instead of per step.

A watched step of a recorded cell hooks every parameter for its next gradient (one-shot hooks,
``model_hooks``), twice a cell. With ``record=off`` the tracker hooks no parameter
(``ModelTracker.light``); the same figures come from these reads:

- at the first step of each optimizer in the cell (torch's global optimizer step pre-hook,
  :func:`on_step`): every trained parameter's ``.grad`` read in one batch (norm, exact zeros,
  non-finite: ``grad_batch``'s reading), a parameter without one is a parameter that got no
  gradient, and the weights are copied; after that step the update/weight ratio is read once;
- at the second training step's forward (:func:`mark`): which ``.grad`` tensor each parameter
  holds and its version; after the cell (:func:`after_cell`) the same tensor that took exactly one
  in-place sum per step since is a gradient accumulated without ``zero_grad`` (PyTorch's
  AccumulateGrad adds in place, +1 on the version each; a ``zero_grad`` sets it to None or zeroes
  it in place, +1 more);
- after the cell: the gradients again where no optimizer stepped (a manual update, a single
  ``backward()``), and the weights of the trained models checked for NaN / Inf.

Given up against a recorded cell: the per-step gradient-norm curve (one point a cell), the loss
curve of a functional loss (a loss module's is kept), the step and op that made a NaN, and where
a parameter's path to the loss was cut (the parameter is still named). Nothing here keeps a
tensor: weak references and numbers.
"""

from __future__ import annotations

import math
import weakref

from . import adapter as A
from .grad_batch import _copy_weights, _note, record

NOTE = ("record=off: gradients read once this cell (at its first optimizer step, or after it), "
        "not per step; no lines of nodes, writes or cuts, no functional-loss curve, no NaN step "
        "or op (`%nbgrad set record=on` for them)")


def trained_params(tracker) -> list:
    """``[(ParamStat, parameter)]`` of the models trained this cell, each parameter once."""
    out, seen = [], set()
    for ref in list(tracker.trained.values()):
        mod = ref()
        if mod is None:
            continue
        for p in mod.parameters():
            st = tracker.params.get(id(p))
            if st is not None and id(p) not in seen and p.requires_grad:
                seen.add(id(p))
                out.append((st, p))
    return out


def read(tracker, with_ratio: bool) -> None:
    """Every trained parameter's ``.grad`` now, in one batch; with ``with_ratio`` the weights
    copied for the update ratio of the step about to run."""
    tracker.samples += 1
    live = []
    for st, p in trained_params(tracker):
        g = A.grad(p)
        if g is None:
            continue
        st.sample = tracker.samples
        st.hits = max(st.hits, 1)  # (a parameter never read this cell got no gradient)
        st.max_accumulated = max(st.max_accumulated, 1)
        st.summed_at = tracker.step_count()
        st.with_ratio = with_ratio
        live.append((st, p, g))
    if not live:
        return
    tracker.backward_seen = True
    eng = A.batched_grads(live[0][2])
    stats = eng.grad_stats([g for _, _, g in live]) if eng is not None else None
    for i, (st, p, g) in enumerate(live):
        if stats is None:
            record(tracker, st, p, g)
            continue
        sq, zeros, size = stats[i]
        _note(tracker, st, sq, math.sqrt(sq) if sq == sq else sq, zeros / max(size, 1))
    if with_ratio and stats is not None:
        _copy_weights(tracker, [(st, p) for st, p, _ in live])


def on_step(tracker, optimizer, phase: str) -> None:
    """Around an optimizer step of a light cell: the first step of each optimizer reads the
    gradients and copies the weights before, the update ratio after."""
    if not tracker.light or not tracker.trained:
        return
    if phase == "pre":
        if id(optimizer) not in tracker.light_steps:
            tracker.light_steps[id(optimizer)] = True
            read(tracker, with_ratio=True)
    elif tracker.pending_ratio:
        tracker._ratios()


def mark(tracker) -> None:
    """At the second training step's forward: which ``.grad`` each trained parameter holds."""
    marks = tracker.light_grads
    for st, p in trained_params(tracker):
        g = A.grad(p)
        if g is not None:
            marks[id(p)] = (weakref.ref(g), A.version(g))


def after_cell(tracker) -> None:
    """After a light cell: the gradients where no optimizer stepped, gradients summed since
    the second step, NaN / Inf weights, and the note of what record=off gives up."""
    if not tracker.trained:
        return
    if not tracker.light_steps:
        read(tracker, with_ratio=False)
    k = tracker.step_count()
    for st, p in trained_params(tracker):
        m = tracker.light_grads.get(id(p))
        g = A.grad(p)
        if m is not None and g is not None and m[0]() is g and k >= 2 \
                and A.version(g) - m[1] == k - 1:
            st.accumulated = st.max_accumulated = k
            st.hits, st.summed_at = max(st.hits, 1), k
            st.summed_into, st.summed_version = weakref.ref(g), A.version(g)
    tracker.light_grads.clear()
    for ref in list(tracker.trained.values()):
        mod = ref()
        if mod is None:
            continue
        bad = [n for n, p in mod.named_parameters() if not bool(_finite(p))]
        if bad:
            tracker.note(("nonfinite-weights", id(mod)), (mod, type(mod).__name__),
                         "holds NaN/Inf in {names} after the cell",
                         names=", ".join(bad[:8]) + (", ..." if len(bad) > 8 else ""))
    tracker.note(("record-off",), None, NOTE)


def _finite(p) -> bool:
    import numpy as np

    return bool(np.isfinite(A.array(p)).all())
