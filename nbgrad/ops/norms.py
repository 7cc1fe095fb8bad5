"""Rows: group_norm (three outputs, as PyTorch's native_group_norm: the output, mean and rstd)
and the normalizations' backward ops, which a gradient built under create_graph records as
PyTorch's do — native_layer_norm_backward (NativeLayerNormBackwardBackward0 of grad_out,
input, mean, rstd, weight, bias) and native_batch_norm_backward
(NativeBatchNormBackwardBackward0 of grad_out, input, weight, save_mean, save_invstd), three
outputs each (the input's, weight's and bias's gradients).

Their derivatives: PyTorch's layer_norm_double_backward and batchnorm_double_backward take the
saved mean and rstd as constants (derivatives.yaml: non_differentiable / not_implemented), which
gives the right second derivative (the formulas account for the statistics' dependence on the
input by hand) but, differentiated once more, a third derivative that misses it (off by 0.02 for
layer_norm and 1.8 for batch_norm on tests/test_double_backward_nodes_more.py's input). Here
the derivative of each op is the vector-Jacobian product of the first-order formula
(nn.py's `_layer_norm_tensor_grads`, `_batch_norm_tensor_grads`) with the statistics
recomputed from the input, itself recorded: the same nodes and edges as torch's, the same second
derivative, and every higher one the true one.
"""
from __future__ import annotations

import math

from ..autograd.engine import run_backward
from ..autograd.grad_mode import enable_grad, no_grad
from ..backend import get_array_module as _xp
from ..tensor import Tensor
from .derivatives import _group_norm_nonfinite, _group_norm_nonfinite_grad, \
    _group_norm_nonfinite_weight_grad
from .formulas import TENSORS
from .nn import _batch_norm_grads, _batch_norm_tensor_grads, _layer_norm_grads, \
    _layer_norm_tensor_grads
from .registry import Ctx, op


def _vjp(f, inputs, wanted, cotangents, xp):
    """The vector-Jacobian product of ``f(*inputs)`` (a tuple of Tensors, None for an output
    not made) with `cotangents`, for the inputs `wanted`: recorded when `xp` is TENSORS (so
    differentiable again), else on arrays. Each input enters through an alias, so that the
    gradient is the partial derivative, not the paths through the input's own history."""
    arrays = xp is not TENSORS
    with enable_grad():
        vals, targets, at = [], [], []
        for i, (a, want) in enumerate(zip(inputs, wanted)):
            if a is not None and arrays:
                a = Tensor._make_fresh(a)
            if a is not None and want and (arrays or a.requires_grad):
                a = a.detach().requires_grad_() if arrays else a.view_as(a)
                targets.append(a)
                at.append(i)
            vals.append(a)
        roots = [(o, c if isinstance(c, Tensor) else Tensor._make_fresh(c))
                 for o, c in zip(f(*vals), cotangents)
                 if o is not None and c is not None and o.requires_grad]
        grads = iter(run_backward([o for o, _ in roots], [c for _, c in roots], None,
                                  not arrays, inputs=targets, allow_unused=True,
                                  accumulate=False, api="grad") if roots and targets else ())
    out = [None] * len(vals)
    for i in at:
        out[i] = next(grads, None)
    return [None if r is None else r._data if arrays else r for r in out]


# ---- layer_norm -------------------------------------------------------------------------------
def layer_norm_backward(g, x, weight, bias, normalized_shape, eps, ctx, needs):
    """The gradients of native_layer_norm under create_graph: PyTorch's backward op applied, its
    mean and rstd (*batch, 1, ..., 1) the forward's, as constants."""
    k = len(normalized_shape)
    xhat, rstd = ctx.get()
    keep = tuple(x.shape[:len(x.shape) - k]) + (1,) * k
    xd = x._data
    mean = xd.mean(axis=tuple(range(xd.ndim - k, xd.ndim))).reshape(keep).astype(xd.dtype)
    gi, gw, gb = TENSORS.row("native_layer_norm_backward", (
        g, x, Tensor._make_fresh(mean), Tensor._make_fresh(rstd.reshape(keep)), weight, bias),
        (tuple(normalized_shape), eps))
    return (gi if needs[0] else None, gw if len(needs) > 1 and needs[1] else None,
            gb if len(needs) > 2 and needs[2] else None)


def _layer_norm_all(grad_out, input, mean, rstd, weight, normalized_shape, eps):
    k = len(normalized_shape)
    ctx = Ctx(((input - mean) * rstd, rstd.reshape(-1, 1)))
    return _layer_norm_grads(grad_out, input, weight, k, eps, ctx, (True, True, True), None)


def _layer_norm_double(gg, grad_out, input, weight, normalized_shape, eps, needs, xp):
    k = len(normalized_shape)
    affine = weight is not None
    d_go, d_in, d_w = _vjp(lambda go, x, w: _layer_norm_tensor_grads(
        go, x, w, k, eps, (gg[0] is not None, affine and gg[1] is not None, gg[2] is not None)),
        (grad_out, input, weight), (needs[0], needs[1], needs[4]), gg, xp)
    return d_go, d_in, None, None, d_w, None


op("native_layer_norm_backward", lambda grad_out, input, mean, rstd, weight, bias,
   normalized_shape, eps: _layer_norm_all(grad_out, input, mean, rstd, weight,
                                          normalized_shape, eps),
   n_out=3, node="NativeLayerNormBackwardBackward0",
   **{"grad_out, input, mean, rstd, weight, bias": lambda g, grad_out, input, weight,
      normalized_shape, eps, needs, xp: _layer_norm_double(g, grad_out, input, weight,
                                                           normalized_shape, eps, needs, xp)})


# ---- batch_norm -------------------------------------------------------------------------------
def batch_norm_backward(g, x, weight, training, mean, invstd, eps, ctx, needs):
    """The gradients of native_batch_norm under create_graph: PyTorch's backward op applied to
    the batch's mean and invstd (training; eval: none, the running statistics are arguments)."""
    _, inv, m, _ = ctx.get()
    saved = (Tensor._make_fresh(m), Tensor._make_fresh(inv)) if training else (None, None)
    gi, gw, gb = TENSORS.row("native_batch_norm_backward", (g, x, weight) + saved,
                             (training, mean, invstd, eps))
    return (gi if needs[0] else None, gw if len(needs) > 1 and needs[1] else None,
            gb if len(needs) > 2 and needs[2] else None)


def _batch_norm_all(grad_out, input, weight, save_mean, save_invstd, training, mean, invstd,
                    eps):
    shape = (1, -1) + (1,) * (input.ndim - 2)
    m, inv = (save_mean, save_invstd) if training else (mean, invstd)
    ctx = Ctx(((input - m.reshape(shape)) * inv.reshape(shape), inv, None, None))
    return _batch_norm_grads(grad_out, input, weight, training, mean, invstd, eps, ctx,
                             (True, True, True), None)


def _batch_norm_double(gg, grad_out, input, weight, training, mean, invstd, eps, needs, xp):
    affine = weight is not None
    d_go, d_in, d_w = _vjp(lambda go, x, w: _batch_norm_tensor_grads(
        go, x, w, training, mean, invstd, eps, (gg[0] is not None, affine and gg[1] is not None,
                                                gg[2] is not None)),
        (grad_out, input, weight), needs[:3], gg, xp)
    return d_go, d_in, d_w, None, None


op("native_batch_norm_backward", lambda grad_out, input, weight, save_mean, save_invstd,
   training, mean, invstd, eps: _batch_norm_all(grad_out, input, weight, save_mean,
                                                save_invstd, training, mean, invstd, eps),
   n_out=3, node="NativeBatchNormBackwardBackward0",
   **{"grad_out, input, weight, save_mean, save_invstd": lambda g, grad_out, input, weight,
      training, mean, invstd, eps, needs, xp: _batch_norm_double(
          g, grad_out, input, weight, training, mean, invstd, eps, needs, xp)})


# ---- group_norm -------------------------------------------------------------------------------
# PyTorch's native_group_norm: (output, mean, rstd), mean and rstd (N, G), saved as its node
# saves them; under create_graph (or when mean and rstd get gradients of their own, at the next
# order) its gradient is infinitely_differentiable_native_group_norm_backward, with the saved
# mean and rstd differentiable (they are outputs of this node): right at every order
def _group_norm(x, weight, bias, num_groups, eps, ctx):
    n, c = x.shape[0], x.shape[1]
    xg = x.reshape(n, num_groups, -1)
    mean = xg.mean(axis=2, keepdims=True)
    xc = xg - mean
    rstd = 1 / _xp(xc).sqrt((xc * xc).mean(axis=2, keepdims=True) + eps)
    xhat = (xc * rstd).reshape(x.shape)
    ctx.value = (xhat, rstd)
    stats = (mean.reshape(n, num_groups), rstd.reshape(n, num_groups))
    if weight is None and bias is None:
        return (xhat.copy(),) + stats  # (its own array: xhat, read by the backward)
    shape = (1, c) + (1,) * (x.ndim - 2)
    out = xhat if weight is None else xhat * weight.reshape(shape)
    out = out if bias is None else out + bias.reshape(shape)
    m = _xp(x)
    if weight is not None and not (m.isfinite(rstd).all() and m.isfinite(weight).all() and (
            bias is None or m.isfinite(bias).all())):
        out = _group_norm_nonfinite(x, weight, bias, mean, rstd, num_groups)
    return (out,) + stats


def _group_norm_grads(g, x, weight, mean, rstd, num_groups, eps, ctx, needs, xp):
    dy, dmean, drstd = g
    if xp is TENSORS:
        return _group_norm_tensors(dy, dmean, drstd, x, weight, mean, rstd, num_groups, needs)
    if dmean is not None or drstd is not None:  # (a last derivative: the same ops, unrecorded)
        def t(a):
            return None if a is None else Tensor._make_fresh(a)
        with no_grad():
            outs = _group_norm_tensors(t(dy), t(dmean), t(drstd), t(x), t(weight), t(mean),
                                       t(rstd), num_groups, needs)
        return tuple(None if o is None else o._data for o in outs)
    n, c = x.shape[0], x.shape[1]
    shape = (1, c) + (1,) * (len(x.shape) - 2)
    xs = tuple(x.shape)
    xhat, rs = ctx.get()
    axes = (0,) + tuple(range(2, len(xs)))
    gx = gw = gb = None
    if needs[0]:
        gh = dy if weight is None else dy * weight.reshape(shape)
        ghg = gh.reshape(n, num_groups, -1)
        xhg = xhat.reshape(n, num_groups, -1)
        m = ghg.shape[2]
        s1, s2 = ghg.sum(axis=2, keepdims=True), (ghg * xhg).sum(axis=2, keepdims=True)
        if not (_xp(s1).isfinite(s1).all() and _xp(s2).isfinite(s2).all()):
            gx = _group_norm_nonfinite_grad(dy, x, weight, num_groups, rs)
        else:
            gx = (rs * (ghg - s1 / m - xhg * s2 / m)).reshape(xs)
    if len(needs) > 1 and needs[1]:
        gw = (dy * xhat).sum(axis=axes) if _xp(dy).isfinite(dy).all() else \
            _group_norm_nonfinite_weight_grad(dy, x, num_groups, rs)
    if len(needs) > 2 and needs[2]:
        gb = dy.sum(axis=axes)
    return gx, gw, gb


def _group_norm_tensors(dy, dmean, drstd, x, gamma, mean, rstd, groups, needs):
    """PyTorch's infinitely_differentiable_native_group_norm_backward, op for op."""
    n, c = x.shape[0], x.shape[1]
    hxw = math.prod(x.shape[2:])
    d = c // groups
    s = 1.0 / (d * hxw)
    xt = x.reshape(n, groups, d, hxw)
    mt = mean.reshape(n, groups, 1, 1)
    rt = rstd.reshape(n, groups, 1, 1)
    ds = db = None
    if dy is not None:
        dyt = dy.reshape(n, groups, d, hxw)
        ds = (dyt * xt).sum(3).unsqueeze_(-1)
        db = dyt.sum(3).unsqueeze_(-1)
    dx = dgamma = dbeta = None
    both = dmean is not None and drstd is not None
    if needs[0]:
        gt = None if gamma is None else gamma.reshape(1, groups, d, 1)
        cube = rt * rt * rt
        dvar = None if drstd is None else TENSORS.mul_scalar(cube, -0.5) * drstd.view(
            n, groups, 1, 1)
        if dy is not None:
            a = rt if gt is None else rt * gt
            b = (ds.sum(2) if gt is None else (ds * gt).sum(2)).unsqueeze_(-2)
            cc = (db.sum(2) if gt is None else (db * gt).sum(2)).unsqueeze_(-2)
            b = TENSORS.mul_scalar((cc * mt - b) * cube, s)
            cc = -b * mt - TENSORS.mul_scalar(cc * rt, s)
            dx = a * dyt + b * xt + cc
            if both:
                dx = dx + _var_mean_backward(dvar, dmean.view(n, groups, 1, 1), xt)
            dx = dx.reshape(tuple(x.shape))
        elif both:
            dx = _var_mean_backward(dvar, dmean.view(n, groups, 1, 1), xt).reshape(
                tuple(x.shape))
    if len(needs) > 1 and needs[1] and dy is not None:
        dgamma = ((ds - db * mt) * rt).sum(0).reshape(tuple(gamma.shape))
    if len(needs) > 2 and needs[2] and dy is not None:
        dbeta = db.sum(0).reshape((c,))
    return dx, dgamma, dbeta


def _var_mean_backward(gvar, gmean, x):
    """PyTorch's var_mean_backward over dims (2, 3), correction 0, keepdim: var_backward's
    2 / n * gvar * (x - mean), plus mean_backward's gmean expanded / n."""
    n = x.shape[2] * x.shape[3]
    out = TENSORS.mul_scalar(gvar, 2.0 / n) * (x - x.mean((2, 3), keepdim=True))
    return out + TENSORS.div_scalar(gmean.expand(*x.shape), n)


op("native_group_norm", lambda input, weight, bias, num_groups, eps, ctx: _group_norm(
    input, weight, bias, num_groups, eps, ctx), n_out=3,
   **{"input, weight, bias": lambda g, input, weight, result1, result2, num_groups, eps, ctx,
      needs, xp: _group_norm_grads(g, input, weight, result1, result2, num_groups, eps, ctx,
                                   needs, xp)})
