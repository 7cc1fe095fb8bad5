"""The model panel's gradients in a *light* cell (``%nbgrad set record=off``): no hook on any
parameter, the gradients read a few times a cell instead of per step.

A watched step of a recorded cell hooks every parameter for its next gradient (one-shot hooks,
``model_hooks``), twice a cell. With ``record=off`` the tracker hooks no parameter
(``ModelTracker.light``); the same figures come from these reads:

- at the first step of each optimizer in the cell (torch's global optimizer step hooks,
  :func:`on_step`): before it, the gradients and the weights of its trained parameters copied
  in one flat copy (a parameter without a ``.grad`` then is one that got no gradient), after it
  the weights copied again; the norms, exact zeros, non-finite gradients and update/weight
  ratios are worked out from the copies after the cell (:func:`after_cell`), not in the step;
- at the second training step's forward (:func:`mark`): which ``.grad`` tensor each parameter
  holds and its version; after the cell the same tensor that took exactly one in-place sum per
  step since is a gradient accumulated without ``zero_grad`` (PyTorch's AccumulateGrad adds in
  place, +1 on the version each; a ``zero_grad`` sets it to None or zeroes it in place, +1 more);
- after the cell: the gradients no optimizer step read (a manual update, a single
  ``backward()``), only those made or written during the cell (:func:`start_cell` notes each
  ``.grad`` before it), and the weights of the trained models checked for NaN / Inf.

Given up against a recorded cell: the per-step gradient-norm curve (one point a cell), the loss
curve of a functional loss (a loss module's is kept), the step and op that made a NaN, and where
a parameter's path to the loss was cut (the parameter is still named). Nothing here keeps a
tensor: weak references and numbers.
"""

from __future__ import annotations

import math
import weakref
from collections import deque

import numpy as np

from . import adapter as A
from .grad_batch import _note, record

NOTE = ("record=off: gradients read once this cell (at its first optimizer step, or after it), "
        "not per step; no lines of nodes, writes or cuts, no functional-loss curve, no NaN step "
        "or op (`%nbgrad set record=on` for them)")


def trained_params(tracker, want=None) -> list:
    """``[(ParamStat, parameter)]`` of the models trained this cell (listed when the model was
    first called), each parameter once; ``want(st, p)`` picks some."""
    out, seen = [], set()
    for sts in list(tracker.light_params.values()):
        for st in sts:
            p = st.ref()
            if p is not None and id(p) not in seen and (want is None or want(st, p)):
                seen.add(id(p))
                out.append((st, p))
    return out


def _take(tracker, want) -> list:
    """``[(ParamStat, parameter, .grad)]`` of the trained parameters ``want`` picks that have a
    gradient now, each noted as read this cell (one never read got no gradient)."""
    tracker.samples += 1
    k, live = tracker.step_count(), []
    for st, p in trained_params(tracker, want):
        g = A.grad(p)
        if g is not None:
            st.sample, st.summed_at = tracker.samples, k
            st.hits = max(st.hits, 1)
            st.max_accumulated = max(st.max_accumulated, 1)
            live.append((st, p, g))
    if live:
        tracker.backward_seen = True
    return live


def read(tracker, want=None) -> None:
    """The gradients ``want`` picks read now, in one batch: norm, exact zeros, non-finite."""
    live = _take(tracker, want)
    eng = A.batched_grads(live[0][2]) if live else None
    stats = eng.grad_stats([g for _, _, g in live]) if eng is not None else None
    for i, (st, p, g) in enumerate(live):
        if stats is None:
            st.with_ratio = False
            record(tracker, st, p, g)
        else:
            _stat(tracker, st, *stats[i])


def _stat(tracker, st, sq, zeros, size) -> None:
    _note(tracker, st, sq, math.sqrt(sq) if sq == sq else sq, zeros / max(size, 1))


def _flat(tensors):
    eng = A.batched_grads(tensors[0]) if tensors else None
    return eng.flat_values(tensors) if eng is not None else None


def on_step(tracker, optimizer, phase: str) -> None:
    """Around an optimizer step of a light cell: at the first step of each optimizer, its
    trained parameters' gradients and weights copied before (one copy of them all), the
    weights copied again after; all else (which were read, the numbers) is worked out after the
    cell (:func:`after_cell`), not inside the step."""
    if not tracker.light or not tracker.trained:
        return
    key = id(optimizer)
    if phase == "pre":
        if key in tracker.light_steps:
            return
        tracker.light_steps[key] = True
        stats = tracker.light_ids  # (the trained parameters, by id)
        sts, ps, gs = [], [], []
        rd = None
        for group in optimizer.param_groups:
            for p in group["params"]:
                st = stats.get(id(p))
                if st is not None and st.ref() is p:
                    rd = rd or A.reading(p)
                    g = rd.grad(p)
                    if g is not None:
                        sts.append(st)
                        ps.append(p)
                        gs.append(g)
        both = _flat(gs + ps) if gs else None  # (one copy)
        if both is None:  # (nothing, or devices / types not copied together: read now)
            for st, p, g in _take(tracker, lambda st, p: id(p) in {id(q) for q in ps}):
                st.with_ratio = False
                record(tracker, st, p, g)
            return
        tracker.light_flat[key] = [sts, (ps, gs), both, None, tracker.step_count()]
        return
    tracker.light_steps[key] = 2  # (its later steps: nothing to read)
    rec = tracker.light_flat.get(key)
    if rec is not None and rec[3] is None and rec[1] is not None:
        (ps, gs), rec[1] = rec[1], None  # (held from the step's start to its end only)
        rec[3] = _flat(ps)
        marks, version = tracker.light_grads, A.version  # (mark(), for these parameters)
        for p, g in zip(ps, gs):
            marks[id(p)] = (weakref.ref(g), version(g))


def _from_copies(tracker) -> None:
    """The gradient numbers and update ratios (||w after - w before|| / ||w after||) of the
    parameters copied at an optimizer's first step, one segment of the copies each (noted as
    read then: at its step count then)."""
    for sts, _, both, after, k in tracker.light_flat.values():
        tracker.samples += 1
        sizes = []
        for st in sts:
            p = st.ref()
            sizes.append(int(p.numel()) if p is not None else -1)
            st.sample, st.summed_at = tracker.samples, k
            st.hits = max(st.hits, 1)
            st.max_accumulated = max(st.max_accumulated, 1)
        if sts:
            tracker.backward_seen = True
        half = sum(sizes)  # (the gradients, then the weights before the step)
        if -1 in sizes or both.shape != (2 * half,):  # (a parameter gone since)
            continue
        ratio = after is not None and after.shape == (half,)
        at = 0
        for st, n in zip(sts, sizes):
            g = both[at:at + n]
            _stat(tracker, st, float(g @ g) if n else 0.0, int(np.count_nonzero(g == 0)), n)
            if ratio and n:
                w = after[at:at + n].astype(np.float64)
                d = w - both[half + at:half + at + n]
                dn, wn = float(d @ d), float(w @ w)
                if dn:
                    if not st.ratios:  # (a deque from the first ratio on, as grad_batch's)
                        st.ratios = deque(st.ratios, maxlen=st.norms.maxlen)
                    st.ratios.append(math.sqrt(dn / wn) if wn else float("inf"))
            at += n
    tracker.light_flat.clear()


def start_cell(tracker) -> None:
    """Before a light cell (outside its steps): which ``.grad`` each known parameter holds, so
    that a gradient left by an earlier cell is not read as this cell's."""
    tracker.light_start = {}
    for key, st in list(tracker.params.items()):
        p = st.ref()
        g = A.grad(p) if p is not None else None
        if g is not None:
            tracker.light_start[key] = (weakref.ref(g), A.version(g))


def _fresh(tracker, p) -> bool:
    """``p.grad`` was made or written since the cell began."""
    m = tracker.light_start.get(id(p))
    g = A.grad(p)
    return g is not None and (m is None or m[0]() is not g or A.version(g) != m[1])


def mark(tracker) -> None:
    """At the second training step's forward: which ``.grad`` each trained parameter holds
    (or already at the end of an optimizer's first step: a ``zero_grad`` between that and the
    next forward changes the tensor or its version, which :func:`after_cell` checks either
    way)."""
    marks = tracker.light_grads
    if marks:
        return
    for st, p in trained_params(tracker):
        g = A.grad(p)
        if g is not None:
            marks[id(p)] = (weakref.ref(g), A.version(g))


def after_cell(tracker) -> None:
    """After a light cell: the gradients no optimizer step read, the update ratios, gradients
    summed since the second step, NaN / Inf weights, and the note of what record=off gives up."""
    if not tracker.trained:
        return
    _from_copies(tracker)
    read(tracker, lambda st, p: not st.hits and _fresh(tracker, p))
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
        bad = [n for n, p in mod.named_parameters() if not np.isfinite(A.array(p)).all()]
        if bad:
            tracker.note(("nonfinite-weights", id(mod)), (mod, type(mod).__name__),
                         "holds NaN/Inf in {names} after the cell",
                         names=", ".join(bad[:8]) + (", ..." if len(bad) > 8 else ""))
    tracker.note(("record-off",), None, NOTE)
