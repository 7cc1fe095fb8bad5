"""Rows: the losses PyTorch records as one node each (MseLossBackward0, NllLossBackward0,
BinaryCrossEntropyBackward0, ...). `reduction` is "mean", "sum" or "none".

The formulas run on arrays or, under create_graph, on Tensors (ops/formulas.py). Rows whose
backward needs more than the inputs keep it in a ``Ctx`` filled by the forward (nll_loss: the
picked logits). Schema and how to add a row: nbgrad/ops/registry.py.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd.apply import apply as _apply
from ..autograd.grad_mode import no_grad
from ..backend import get_array_module as _xp
from ..tensor import Tensor
from .activations import _log_sigmoid
from .formulas import TENSORS, array_formulas
from .derivatives import _sum_all
from .reductions import _refuse
from .registry import ROWS, Ctx, op

# ---- losses: one node each, as torch records them ---------------------------------------------
# `reduction` is "mean", "sum" or "none"; `_norm` is the 1/N of "mean" (N: the element count)
op("mse_loss", lambda self, target, reduction: _reduce((self - target) ** 2, reduction),
   self=lambda g, self, target, reduction, xp: xp.row("mse_loss_backward", (g, self, target),
                                                      (reduction,)),
   target=lambda g, self, target, reduction, xp: xp.row("mse_loss_backward", (g, target, self),
                                                        (reduction,)))
# PyTorch's mse_loss_backward: the gradient above as an op of its own (a gradient built under
# create_graph records MseLossBackwardBackward0), with its derivatives (derivatives.yaml's
# mse_loss_double_backward and, for grad_output, the op again, summed when reduced)
op("mse_loss_backward", lambda grad_output, self, target, reduction: _norm(
    grad_output, self, target, reduction) * 2 * (self - target),
   broadcast=True, node="MseLossBackwardBackward0",
   grad_output=lambda g, grad_output, self, target, reduction, xp: _summed(xp.row(
       "mse_loss_backward", (g, self, target), (reduction,)), grad_output, xp),
   self=lambda g, grad_output, self, target, reduction, xp: _mse_double(
       g * grad_output, self, target, reduction, xp),
   target=lambda g, grad_output, self, target, reduction, xp: -_mse_double(
       g * grad_output, self, target, reduction, xp))
op("smooth_l1_loss", lambda self, target, reduction, beta: _reduce(
    _smooth_l1(self - target, beta, _xp(self)), reduction),
   self=lambda g, self, target, reduction, beta, xp: xp.row(
       "smooth_l1_loss_backward", (g, self, target), (reduction, beta)),
   target=lambda g, self, target, reduction, beta, xp: xp.row(
       "smooth_l1_loss_backward", (g, target, self), (reduction, beta)))
op("smooth_l1_loss_backward", lambda grad_output, self, target, reduction, beta: _smooth_l1_grad(
    _norm(grad_output, self, target, reduction), self - target, beta, _xp(self)),
   broadcast=True, node="SmoothL1LossBackwardBackward0",
   grad_output=lambda g, grad_output, self, target, reduction, beta, xp: _summed(xp.row(
       "smooth_l1_loss_backward", (g, self, target), (reduction, beta)), grad_output, xp),
   self=lambda g, grad_output, self, target, reduction, beta, xp: _within_double(
       g * grad_output, self, target, reduction, beta, True, xp),
   target=lambda g, grad_output, self, target, reduction, beta, xp: -_within_double(
       g * grad_output, self, target, reduction, beta, True, xp))
op("huber_loss", lambda self, target, reduction, delta: _reduce(
    _huber(self - target, delta, _xp(self)), reduction),
   self=lambda g, self, target, reduction, delta, xp: xp.row(
       "huber_loss_backward", (g, self, target), (reduction, delta)),
   target=lambda g, self, target, reduction, delta, xp: xp.row(
       "huber_loss_backward", (g, target, self), (reduction, delta)))
op("huber_loss_backward", lambda grad_output, self, target, reduction, delta: _huber_grad(
    _norm(grad_output, self, target, reduction), self - target, delta, _xp(self)),
   broadcast=True, node="HuberLossBackwardBackward0",
   grad_output=lambda g, grad_output, self, target, reduction, delta, xp: _huber_grad_output(
       g, grad_output, self, target, reduction, delta, xp),
   self=lambda g, grad_output, self, target, reduction, delta, xp: _within_double(
       g * grad_output, self, target, reduction, delta, False, xp),
   target=lambda g, grad_output, self, target, reduction, delta, xp: -_within_double(
       g * grad_output, self, target, reduction, delta, False, xp))
op("soft_margin_loss", lambda self, target, reduction: _reduce(
    _xp(self).log1p(_xp(self).exp(-target * self)), reduction),
   self=lambda g, self, target, reduction, xp: _norm(g, self, target, reduction) * -target
   * _soft_margin_grad(self, target, xp),
   target=lambda g, self, target, reduction, xp: _norm(g, self, target, reduction) * -self
   * _soft_margin_grad(self, target, xp))
op("binary_cross_entropy", lambda self, target, weight, reduction: _reduce(
    _bce(self, target, weight, _xp(self)), reduction),
   self=lambda g, self, target, weight, reduction, xp: xp.row(
       "binary_cross_entropy_backward", (g, self, target), (weight, reduction)),
   target=lambda g, self, target, weight, reduction, xp: _bce_target_grad(
       _norm(g, self, target, reduction), self, weight, xp))
# PyTorch's binary_cross_entropy_backward (BinaryCrossEntropyBackwardBackward0 of grad_output,
# self, target) with derivatives.yaml's binary_cross_entropy_double_backward{,_grad_output,
# _target}
op("binary_cross_entropy_backward", lambda grad_output, self, target, weight, reduction:
   _bce_grad(_norm(grad_output, self, target, reduction), self, target, weight,
             array_formulas(self)),
   broadcast=True, node="BinaryCrossEntropyBackwardBackward0",
   grad_output=lambda g, self, target, weight, reduction, xp: _bce_double_grad_output(
       g, self, target, weight, reduction, xp),
   self=lambda g, grad_output, self, target, weight, reduction, xp: _bce_double(
       g, grad_output, self, target, weight, reduction, xp),
   target=lambda g, grad_output, self, weight, reduction, xp: _bce_double_target(
       g, grad_output, self, weight, reduction, xp))
op("binary_cross_entropy_with_logits", lambda self, target, weight, pos_weight, reduction:
   _reduce(_bce_logits(self, target, weight, pos_weight, _xp(self)), reduction),
   self=lambda g, self, target, weight, pos_weight, reduction, xp: _bce_logits_tensors(
       g, self, target, weight, pos_weight, reduction) if xp is TENSORS else _bce_logits_grad(
       _norm(g, self, target, reduction), self, target, weight, pos_weight, xp),
   target=lambda g, self, target, weight, pos_weight, reduction, xp: _bce_logits_target_tensors(
       g, self, target, weight, pos_weight, reduction) if xp is TENSORS
   else _bce_logits_target_grad(_norm(g, self, target, reduction), self, weight, pos_weight,
                                xp))
op("multi_margin_loss", lambda self, target, p, margin, weight, reduction: _reduce(
    _multi_margin(self, target, p, margin, weight, _xp(self))[0], reduction),
   self=lambda g, self, target, p, margin, weight, reduction, xp: _multi_margin_grad(
       g, self, target, p, margin, weight, reduction, xp))
# class targets: `ctx` holds (rows, classes, per-row weight / total_weight) of the picked logits
# saves self, as PyTorch's node (an in-place change of self fails backward); what else PyTorch
# saves (target, weight, total_weight) is packed from ctx under saved_tensors_hooks only
op("nll_loss", lambda self, target, weight, reduction, ignore_index, ctx: _nll(
    self, target, weight, reduction, ignore_index, ctx), ctx_saves=lambda v, src, args:
   _nll_saves(v, src[0]._data.dtype, *args[:3]),
   double=dict(node="NllLossBackwardBackward0", g=lambda gg, self, target, weight, reduction,
               ignore_index, ctx, xp: _nll_again("nll_loss", gg, target, weight, reduction,
                                                 ignore_index, xp),
               self=lambda gg, xp: xp.zeros_like(gg)),
   self=lambda g, self, target, weight, reduction, ignore_index, ctx, xp: _nll_grad(
       g, tuple(self.shape), reduction, ctx, xp))
op("nll_loss2d", ROWS["nll_loss"].fwd, node="NllLoss2DBackward0",  # (N, C, H, W) input, as torch
   ctx_saves=ROWS["nll_loss"].ctx_saves,
   double=dict(node="NllLoss2DBackwardBackward0", g=lambda gg, self, target, weight, reduction,
               ignore_index, ctx, xp: _nll_again("nll_loss2d", gg, target, weight, reduction,
                                                 ignore_index, xp),
               self=lambda gg, xp: xp.zeros_like(gg)),
   self=ROWS["nll_loss"].formulas[0])


def _nll_again(name, gg, target, weight, reduction, ignore_index, xp):
    """PyTorch's derivative of nll_loss_backward in grad_output: nll_loss itself, of the new
    gradient (NllLossBackward0 under create_graph)."""
    return xp.row(name, (gg,), (target, weight, reduction, ignore_index, Ctx(None)))


# ---- helpers of the rows above ----------------------------------------------------------------
def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _norm(g, self, target, reduction):
    """The upstream gradient scaled by 1/N for "mean" (N: elements of the broadcast loss)."""
    if reduction == "mean":
        return g / math.prod(np.broadcast_shapes(tuple(self.shape), tuple(target.shape)))
    return g


def _summed(x, grad_output, xp):
    """The op again, summed to grad_output's shape: a reduced loss's 0-d grad_output gets the
    sum (SumBackward0); a full-shaped one (a third derivative) the op itself."""
    return xp.sum(x) if len(grad_output.shape) == 0 and len(x.shape) else x


def _mse_double(g, self, target, reduction, xp):
    """PyTorch's mse_loss_double_backward: ``2 * g`` (MulBackward1), divided by the element
    count for "mean" (DivBackward1)."""
    g = xp.mul_scalar(g, 2)
    if reduction == "mean":
        g = xp.div_scalar(g, math.prod(np.broadcast_shapes(tuple(self.shape),
                                                            tuple(target.shape))))
    return g


def _within_double(g, self, target, reduction, beta, scaled, xp):
    """PyTorch's smooth_l1_loss_double_backward (scaled: ``g * (|d| < beta) / beta``; zeros
    for beta 0) and huber_loss_double_backward (``g * (|d| < delta)``), d = self - target,
    divided by the element count for "mean"."""
    if scaled and beta == 0:
        return xp.zeros_like(g)
    inside = abs(_raw(self) - _raw(target)) < beta
    if scaled:
        g = xp.div_scalar(g * _const(inside.astype(_raw(g).dtype), g), beta)
    else:
        g = g * _const(inside, g)
    if reduction == "mean":
        g = xp.div_scalar(g, math.prod(np.broadcast_shapes(tuple(self.shape),
                                                            tuple(target.shape))))
    return g


def _huber_grad_output(g, grad_output, self, target, reduction, delta, xp):
    """PyTorch's huber_loss_double_backward_grad_output: the op again on the new gradient, or,
    reduced, ``(huber_loss_backward(ones, ...) * g).sum()``."""
    if reduction == "none":
        return xp.row("huber_loss_backward", (g, self, target), (reduction, delta))
    r = xp.row("huber_loss_backward", (xp.ones_like(grad_output), self, target),
               (reduction, delta))
    return xp.sum(r * g)


def _raw(x):
    return x._data if isinstance(x, Tensor) else x


def _const(arr, like):
    """A constant (a mask) beside `like`: a Tensor when `like` is one (an edge to nothing)."""
    return Tensor._make_fresh(arr) if isinstance(like, Tensor) else arr


def _smooth_l1(d, beta, xp):
    ad = xp.abs(d)
    return xp.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)


def _smooth_l1_grad(g, d, beta, xp):
    return xp.where(d < -beta, -g, xp.where(d > beta, g, d * g / beta))


def _huber(d, delta, xp):
    ad = xp.abs(d)
    return xp.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))


def _huber_grad(g, d, delta, xp):
    return xp.where(d < -delta, -g * delta, xp.where(d > delta, g * delta, d * g))


def _soft_margin_grad(x, t, xp):
    z = xp.exp(-t * x)
    return z / (1 + z)


def _multi_margin(x, t, p, margin, w, xp):
    """Per-sample losses of (N, C) scores and int targets (N,), and the hinge terms z."""
    n, c = x.shape
    rows = np.arange(n)
    z = margin - x[rows, t][:, None] + x
    z[rows, t] = 0
    h = _xp(z).where(z > 0, z, 0)  # torch's `if (z > 0)`: a NaN hinge adds nothing
    h = h * h if p == 2 else h
    if w is not None:
        h = h * w[t][:, None]
    return h.sum(1) / c, z


# torch has no derivative of multi_margin_loss_backward either (a NotImplemented node)
op("multi_margin_loss_backward",
   lambda grad_output, self, target, p, margin, weight, reduction: _multi_margin_grad(
       grad_output, self, target, p, margin, weight, reduction, _xp(self)),
   node="NotImplemented",
   **{"grad_output, self": lambda g: _refuse("multi_margin_loss_backward", RuntimeError)(g)})


def _multi_margin_grad(g, x, t, p, margin, w, reduction, xp):
    if xp is TENSORS:
        return _apply(ROWS["multi_margin_loss_backward"], (g, x), (t, p, margin, w, reduction))
    n, c = x.shape
    _, z = _multi_margin(x, t, p, margin, w, _xp(x))
    d = _xp(z).where(z > 0, 2 * z if p == 2 else 1, 0).astype(x.dtype, copy=False) / c
    if w is not None:
        d = d * w[t][:, None]
    rows = np.arange(n)
    d[rows, t] = -d.sum(1)
    scale = g / n if reduction == "mean" else (g[:, None] if reduction == "none" else g)
    return d * scale


def _log_clamped(x, xp):
    return xp.maximum(xp.log(x), -100)


def _bce(x, t, w, xp):
    with np.errstate(divide="ignore"):
        loss = -(t * _log_clamped(x, xp) + (1 - t) * _log_clamped(1 - x, xp))
    return loss if w is None else loss * w


def _bce_grad(g, x, t, w, xp):
    w = None if w is None else xp.constant(w)
    denom = xp.maximum((1 - x) * x, 1e-12)
    out = g * (x - t) / denom
    return out if w is None else out * w


_BCE_EPS = 1e-12


def _bce_double(g, grad_output, x, t, w, reduction, xp):
    """binary_cross_entropy_double_backward: the derivative in self."""
    num = x * x - xp.mul_scalar(x, 2) * t + t
    den = xp.add_scalar(x, _BCE_EPS) ** 2 * xp.add_scalar(xp.ones_like(x) - x, _BCE_EPS) ** 2
    gi = num / den * (g * grad_output)
    if w is not None:
        gi = gi * xp.constant(w)
    return xp.div_scalar(gi, math.prod(x.shape)) if reduction == "mean" else gi


def _bce_double_grad_output(g, x, t, w, reduction, xp):
    """binary_cross_entropy_double_backward_grad_output."""
    ggo = (x - t) / (xp.add_scalar(x, _BCE_EPS) * xp.add_scalar(xp.ones_like(x) - x, _BCE_EPS))
    ggo = ggo * g
    if w is not None:
        ggo = ggo * xp.constant(w)
    # (a reduced loss's 0-d grad_output gets the sum from the node's reduction, as torch's)
    return xp.div_scalar(ggo, math.prod(x.shape)) if reduction == "mean" else ggo


def _bce_double_target(g, grad_output, x, w, reduction, xp):
    """binary_cross_entropy_double_backward_target: -g grad_output / ((1 - x) x), the
    denominator clamped at 1e-12 outside the graph."""
    res = -g * grad_output
    if w is not None:
        res = res * xp.constant(w)
    denom = (xp.ones_like(x) - x) * x
    if xp is TENSORS:
        with no_grad():
            denom.clamp_min_(_BCE_EPS)
    else:
        denom = xp.maximum(denom, _BCE_EPS)
    res = res / denom
    return xp.div_scalar(res, math.prod(x.shape)) if reduction == "mean" else res


def _bce_target_grad(g, x, w, xp):
    w = None if w is None else xp.constant(w)
    with np.errstate(divide="ignore"):
        out = g * (_log_clamped(1 - x, xp) - _log_clamped(x, xp))
    return out if w is None else out * w


def _bce_logits(x, t, w, pw, xp):
    ls = _log_sigmoid(x, xp)
    if pw is not None:
        ls = ls * ((pw - 1) * t + 1)
    loss = (1 - t) * x - ls
    return loss if w is None else loss * w


def _bce_logits_grad(g, x, t, w, pw, xp):
    w, pw = (None if a is None else xp.constant(a) for a in (w, pw))
    sig = 1 / (1 + xp.exp(-x))
    if pw is not None:
        out = g * (((pw - 1) * t + 1) * sig - pw * t)
    else:
        out = g * (sig - t)
    return out if w is None else out * w


def _bce_logits_tensors(g, x, t, w, pw, reduction):
    """PyTorch's binary_cross_entropy_with_logits_backward as it runs under create_graph:
    ``(x.sigmoid() - t) * g`` (with pos_weight p: ``(p t + 1 - t) * x.sigmoid() - p t``, then
    ``* g``), ``* weight``, then ``/ N`` for "mean" (DivBackward1), in torch's op order."""
    w, pw = (None if a is None else TENSORS.constant(a) for a in (w, pw))
    if pw is not None:
        pt = pw * t
        out = (TENSORS.add_scalar(pt, 1) - t) * x.sigmoid() - pt
    else:
        out = x.sigmoid() - t
    return _bce_logits_scaled(out * g, w, x, reduction)


def _bce_logits_target_tensors(g, x, t, w, pw, reduction):
    """PyTorch's binary_cross_entropy_with_logits_target_backward under create_graph:
    ``(log_sigmoid(-x) - log_sigmoid(x) * p) * g`` with pos_weight p, else ``-x * g``."""
    w, pw = (None if a is None else TENSORS.constant(a) for a in (w, pw))
    if pw is not None:
        ls = ROWS["log_sigmoid"]
        out = (_apply(ls, (-x,)) - _apply(ls, (x,)) * pw) * g
    else:
        out = -x * g
    return _bce_logits_scaled(out, w, t, reduction)


def _bce_logits_scaled(out, w, like, reduction):
    if w is not None:
        out = out * w
    return TENSORS.div_scalar(out, like.numel()) if reduction == "mean" else out


def _bce_logits_target_grad(g, x, w, pw, xp):
    w, pw = (None if a is None else xp.constant(a) for a in (w, pw))
    # torch's log_sigmoid(-x) - pw * log_sigmoid(x) (-x - (pw - 1) * that: inf - 0 * inf at
    # x = -inf where pw is 1)
    out = g * (_log_sigmoid(-x, xp) - pw * _log_sigmoid(x, xp)) if pw is not None else g * -x
    return out if w is None else out * w


def _nll(x, target, weight, reduction, ignore_index, ctx):
    """NLL of int64 class targets (class dim 1; (C,) input with a 0-d target); fills `ctx`:
    (rows, classes, per-row weight or None for all ones, divisor). `ctx` arrives holding
    whether some target equals ignore_index, when the caller's target check found out (else
    None)."""
    if x.ndim == 2 and weight is None and reduction != "none":
        # the common case (classification / language-model batches), in 3 array calls
        # when no target is ignored: the picked log-probabilities, their sum
        t = target
        ignored = ctx.value
        if ignored is None:
            ignored = bool((t == ignore_index).any())
        if len(t) and not ignored:
            rows = _arange(len(t), x)
            total = _sum_all(x[rows, t], x.dtype)
            n = len(t) if reduction == "mean" else 1
            ctx.value = (rows, t.copy(), None, n)  # the target tensor's memory otherwise
            return _xp(x).asarray(-total / n, x.dtype)
    cdim = 0 if x.ndim == 1 else 1
    c = x.shape[cdim]
    xp = _xp(x)
    xl = xp.moveaxis(x, cdim, -1).reshape(-1, c)
    t = target.reshape(-1)
    keep = t != ignore_index
    ts = xp.where(keep, t, 0)
    w = xp.ones(t.shape, x.dtype) if weight is None else weight[ts].astype(x.dtype)
    w = xp.where(keep, w, x.dtype.type(0))
    rows = xp.arange(len(t))
    losses = xp.where(keep, -w * xl[rows, ts], x.dtype.type(0))  # an ignored row adds nothing
    # (torch skips it: 0 * its inf or NaN log-probability is not NaN there)
    # ctx: (rows, targets, per-row weight, divisor, the rows not ignored)
    if reduction == "none":
        ctx.value = (rows, ts, w, 1.0, keep)
        return losses.reshape(target.shape)
    total = w.sum()
    if reduction == "sum":
        ctx.value = (rows, ts, w, 1.0, keep)
        return losses.sum()
    ctx.value = (rows, ts, w, total, keep)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _xp(x).asarray(losses.sum() / total, x.dtype)


_ARANGES = {}


def _arange(n, like):
    """arange(n) on `like`'s device; numpy's kept (read-only) per length."""
    if type(like) is not np.ndarray:
        return _xp(like).arange(n)
    r = _ARANGES.get(n)
    if r is None:
        r = np.arange(n)
        r.flags.writeable = False
        if len(_ARANGES) < 64:
            _ARANGES[n] = r
    return r


def _nll_saves(v, dtype, target, weight, reduction):
    """What PyTorch's NllLossBackward0 saves besides self, target and weight (saved as the
    arguments the double formula reads): its total_weight output (0-d: the summed weight of the
    counted targets, 0 for "none")."""
    rows, _, w, _ = v[:4]
    total = 0 if reduction == "none" else len(rows) if w is None else w.sum()
    return (_xp(rows).asarray(total, dtype),)


def _nll_grad(g, self_shape, reduction, ctx, xp):
    v = ctx.get()
    rows, ts, w, total = v[:4]
    if w is None and xp is not TENSORS:  # the forward's fast path: g / N at the targets
        out = xp.zeros(self_shape, g.dtype)
        out[rows, ts] = -g / total if total else 0.0
        return out
    ndim = len(self_shape)
    cdim = 0 if ndim == 1 else 1
    c = self_shape[cdim]
    moved = tuple(s for i, s in enumerate(self_shape) if i != cdim) + (c,)
    if xp is not TENSORS:  # torch's kernel: only the targets of the rows not ignored are
        m = _xp(rows)      # written (a NaN gradient leaves the other entries 0)
        keep = v[4]
        coef = (-w / total) if total != 0 else m.zeros(len(rows), g.dtype)
        vals = coef * (g.reshape(-1) if reduction == "none" else g)
        out = m.zeros((len(rows), c), g.dtype)
        out[rows[keep], ts[keep]] = vals.astype(g.dtype, copy=False)[keep]
        out = out.reshape(moved)
        if ndim <= 2:
            return out
        return m.moveaxis(out, -1, 1)
    dt = xp.dtype(g)
    coef = _xp(rows).zeros((len(rows), c), dt)
    coef[rows, ts] = (-1.0 if w is None else -w) / total if total != 0 else 0.0
    if reduction == "none":
        g = g.reshape((len(rows), 1))
    out = g * xp.constant(coef)
    out = out.reshape(moved)
    if ndim <= 2:
        return out
    perm = (0, ndim - 1) + tuple(range(1, ndim - 1))
    return xp.permute(out, perm)



def cross_entropy_grad(parts, rows, t, n, g):
    """The logits' gradient of ``nll_loss(log_softmax(x, 1), t)`` for (N, C) logits, no weight,
    no target ignored, from ``log_softmax_parts(x)`` (ops/nn.py) and the loss's 0-d gradient `g`
    of x's dtype (`n`: N for "mean", 1 for "sum"). Bit for bit what nll_loss's formula
    (`_nll_grad`: ``s = -g / n`` at each row's target, 0 elsewhere) then log_softmax's
    (``gnll - exp(logp) * gnll.sum(1)``) compute, in fewer array passes and without gnll: each
    row of gnll sums to s (``s + 0``: a -0.0 sums to +0.0), so the gradient is
    ``0 - exp(logp) * (s + 0)`` off the targets and ``s - exp(logp) * (s + 0)`` on them."""
    z, lse, transposed = parts
    s = -g / n
    xp = _xp(z)
    e = xp.subtract(z, lse)  # logp, as log_softmax's forward finishes it
    xp.exp(e, out=e)
    e *= s + s.dtype.type(0)
    at = (t, rows) if transposed else (rows, t)
    picked = e[at]
    xp.subtract(e.dtype.type(0), e, out=e)
    e[at] = s - picked
    return xp.ascontiguousarray(e.T) if transposed else e
