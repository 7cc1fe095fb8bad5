"""Rows: the connectionist temporal classification loss (torch's ``_ctc_loss``, one
CtcLossBackward0 node) and its backward op (a NotImplemented node under create_graph, as torch,
whose second backward raises torch's "derivative for aten::_ctc_loss_backward is not
implemented").

The kernels are torch's CPU ones, vectorised over the batch and the extended target: log_probs
(T, N, C); the extended target l' of target l (length L) is blank, l1, blank, ..., lL, blank
(2L + 1 positions, padded to the batch's longest with invalid positions). The forward runs the
alpha recursion in log space and returns the negative log likelihood per sequence (N,); the
backward runs the beta recursion and gives torch's gradient
``exp(lp) - exp(logsumexp_{s: l'(s)=c}(alpha + beta) + nll - lp)`` (zero past each input length,
and for an infinite loss with zero_infinity).
"""
from __future__ import annotations

import numpy as np

from ..backend import get_array_module as _xp
from .formulas import ROWS, TENSORS
from .reductions import _refuse
from .registry import op


def _lse3(a, b, c, xp):
    """log(exp a + exp b + exp c) as torch's kernel: shifted by the max (0 when all are -inf)."""
    m = xp.maximum(xp.maximum(a, b), c)
    m = xp.where(m == -np.inf, 0, m)
    return xp.log(xp.exp(a - m) + xp.exp(b - m) + xp.exp(c - m)) + m


def _extended(targets, target_lengths, blank):
    """(N, S) extended targets, their validity and where the skip from s - 2 is allowed."""
    n = len(target_lengths)
    s = 2 * max(target_lengths, default=0) + 1
    ext = np.full((n, s), blank, np.int64)
    offset = 0
    for b, length in enumerate(target_lengths):
        if targets.ndim == 2:
            row = targets[b, :length]
        else:
            row = targets[offset:offset + length]
            offset += length
        ext[b, 1:2 * length:2] = row
    valid = np.arange(s)[None, :] < (2 * np.asarray(target_lengths, np.int64) + 1)[:, None]
    skip = np.zeros((n, s), bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    return ext, valid, skip


def _shift(a, k, xp, back=False):
    """a[:, s - k] (or a[:, s + k] with back), -inf where out of range."""
    pad = xp.full(a.shape[:1] + (k,), -np.inf, a.dtype)
    if back:
        return xp.concatenate([a[:, k:], pad], 1)
    return xp.concatenate([pad, a[:, :a.shape[1] - k]], 1)


def ctc_forward(log_probs, targets, input_lengths, target_lengths, blank):
    """(nll (N,), ctx) of torch's ctc_loss_cpu for log_probs (T, N, C)."""
    xp = _xp(log_probs)
    t_max, n, _ = log_probs.shape
    ext, valid, skip = _extended(np.asarray(targets), target_lengths, blank)
    ext_d, valid_d, skip_d = xp.asarray(ext), xp.asarray(valid), xp.asarray(skip)
    s = ext.shape[1]
    lp_ext = xp.take_along_axis(log_probs, xp.broadcast_to(ext_d, (t_max, n, s)), axis=2)
    il = xp.asarray(np.asarray(input_lengths, np.int64))[:, None]
    tl = np.asarray(target_lengths, np.int64)
    alpha = xp.full((t_max, n, s), -np.inf, log_probs.dtype)
    if t_max:
        first = xp.full((n, s), -np.inf, log_probs.dtype)
        first[:, 0] = lp_ext[0, :, 0]
        if s > 1:
            first[:, 1] = xp.where(xp.asarray(tl) > 0, lp_ext[0, :, 1], -np.inf)
        alpha[0] = xp.where(valid_d & (il > 0), first, -np.inf)
    for t in range(1, t_max):
        prev = alpha[t - 1]
        new = _lse3(prev, _shift(prev, 1, xp), xp.where(skip_d, _shift(prev, 2, xp), -np.inf),
                    xp) + lp_ext[t]
        alpha[t] = xp.where(valid_d & (t < il), new, -np.inf)
    rows = xp.arange(n)  # (index arrays on the arrays' device)
    last = alpha[xp.asarray(np.asarray(input_lengths, np.int64) - 1), rows]  # (N, S)
    l1 = last[rows, xp.asarray(2 * tl)]
    l2 = xp.where(xp.asarray(tl) > 0, last[rows, xp.asarray(np.maximum(2 * tl - 1, 0))],
                  -np.inf)
    m = xp.maximum(l1, l2)
    m = xp.where(m == -np.inf, 0, m)
    nll = -(xp.log(xp.exp(l1 - m) + xp.exp(l2 - m)) + m)
    return nll, (alpha, lp_ext, ext, valid, skip)


def ctc_backward(grad, log_probs, nll, ctx, input_lengths, target_lengths, zero_infinity):
    """torch's ctc_loss_backward_cpu: the gradient wrt log_probs (T, N, C) for upstream grad
    (N,)."""
    xp = _xp(log_probs)
    alpha, lp_ext, ext, valid, skip = ctx
    t_max, n, s = lp_ext.shape
    valid_d = xp.asarray(valid)
    skip_next = xp.asarray(np.concatenate([skip[:, 2:], np.zeros((n, min(2, s)), bool)], 1))
    il = np.asarray(input_lengths, np.int64)
    tl = np.asarray(target_lengths, np.int64)
    il_d = xp.asarray(il)[:, None]
    rows = np.arange(n)
    beta = xp.full((t_max, n, s), -np.inf, log_probs.dtype)
    at_end = np.zeros((n, s), bool)  # where beta starts at t = input_length - 1
    at_end[rows, 2 * tl] = True
    at_end[rows[tl > 0], 2 * tl[tl > 0] - 1] = True
    at_end = xp.asarray(at_end)
    for t in range(t_max - 1, -1, -1):
        start = xp.where(at_end, lp_ext[t], -np.inf)
        if t < t_max - 1:
            nxt = beta[t + 1]
            rec = _lse3(nxt, _shift(nxt, 1, xp, True),
                        xp.where(skip_next, _shift(nxt, 2, xp, True), -np.inf), xp) + lp_ext[t]
            rec = xp.where(valid_d & (t < il_d - 1), rec, -np.inf)
        else:
            rec = xp.full((n, s), -np.inf, log_probs.dtype)
        beta[t] = xp.where(t == il_d - 1, start, rec)
    # sum over the positions s of each class c of exp(alpha + beta + nll - lp)
    term = xp.exp(alpha + beta + nll[None, :, None] - lp_ext)
    occupied = xp.zeros(log_probs.shape, log_probs.dtype)
    ext_d = xp.asarray(ext)
    rows_d = xp.asarray(rows)
    for j in range(s):
        occupied[:, rows_d, ext_d[:, j]] += xp.where(valid_d[:, j], term[:, :, j], 0)
    out = (xp.exp(log_probs) - occupied) * grad[None, :, None]
    live = xp.arange(t_max)[:, None] < il_d[:, 0][None, :]  # (T, N)
    if zero_infinity:
        live = live & ~xp.isinf(nll)[None, :]
    else:  # torch's exp(-inf + inf - lp): NaN for every class of an impossible alignment
        out = xp.where(xp.isinf(nll)[None, :, None], np.nan, out)
    return xp.where(live[:, :, None], out, 0).astype(log_probs.dtype, copy=False)


def _grad(g, log_probs, result, ctx, input_lengths, target_lengths, zero_infinity, xp):
    if xp is TENSORS:  # recorded as torch's backward op, which has no derivative
        from ..autograd.apply import apply
        return apply(ROWS["_ctc_loss_backward"], (g, log_probs),
                     (result._data, ctx.get(), input_lengths, target_lengths, zero_infinity))
    return ctc_backward(g, log_probs, result, ctx.get(), input_lengths, target_lengths,
                        zero_infinity)


op("_ctc_loss", lambda log_probs, targets, input_lengths, target_lengths, blank, zero_infinity:
   ctc_forward(log_probs, targets, input_lengths, target_lengths, blank),
   node="CtcLossBackward0", ctx=True,
   log_probs=lambda g, log_probs, result, ctx, input_lengths, target_lengths, zero_infinity, xp:
   _grad(g, log_probs, result, ctx, input_lengths, target_lengths, zero_infinity, xp))
op("_ctc_loss_backward", lambda grad, log_probs, nll, ctx, input_lengths, target_lengths,
   zero_infinity: ctc_backward(grad, log_probs, nll, ctx, input_lengths, target_lengths,
                               zero_infinity),
   node="NotImplemented",
   **{"grad, log_probs": lambda g: _refuse("_ctc_loss_backward", RuntimeError)(g)})
