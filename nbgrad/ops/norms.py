"""Rows: the normalizations' backward ops, which a gradient built under create_graph records
as PyTorch's do — native_layer_norm_backward (NativeLayerNormBackwardBackward0 of grad_out,
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

from ..autograd.engine import run_backward
from ..autograd.grad_mode import enable_grad
from ..tensor import Tensor
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
