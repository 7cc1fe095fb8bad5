"""Rows: the layers PyTorch records as one node — activations over a dim (softmax,
log_softmax), convolution, pooling, pointwise activations (GeluBackward0, SiluBackward0, ...),
losses (MseLossBackward0, NllLossBackward0, ...), normalizations (NativeLayerNormBackward0,
NativeBatchNormBackward0), embedding, the RNN gate split and attention.

Pointwise formulas follow torch's CPU kernels (the same branch at each kink, the same constants),
and run on arrays or, under create_graph, on Tensors: ``xp.exp(x)`` is numpy's (cupy's) on
arrays and ``x.exp()`` on Tensors (ops/formulas.py).
Rows whose backward needs more than the inputs keep it in a ``Ctx`` filled by the forward; their
formulas recompute it from the saved inputs when the backward is itself recorded.

The array kernels (im2col, window views, all conv/pool geometry) are in kernels.py; a kernel's
forward returns what its backward needs, kept in a `Ctx` released with the node.
Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..autograd.apply import apply as _apply
from ..backend import get_array_module as _xp
from ..tensor import Tensor
from . import kernels
from .formulas import TENSORS, _sum_all, _zeros_for, array_formulas
from .reductions import _logsumexp, _refuse
from .registry import ROWS, Ctx, _self_adjoint, op

# ---- over a dim -------------------------------------------------------------------------------
op("softmax", lambda self, dim: _softmax(self, dim), float_op=True,
   double="SoftmaxBackwardDataBackward0",
   self=lambda g, result, dim: result * (g - _sum_keep(g * result, dim)))
op("log_softmax", lambda self, dim: _log_softmax(self, dim), float_op=True,
   double="LogSoftmaxBackwardDataBackward0",
   self=lambda g, result, dim, xp: g - xp.exp(result) * _sum_keep(g, dim))
# attention's softmax: a row that is -inf throughout gives zeros (not nan), and zero gradients
op("_safe_softmax", lambda self, dim: _safe_softmax(self, dim), float_op=True,
   double="SoftmaxBackwardDataBackward0",
   self=lambda g, result, dim: result * (g - _sum_keep(g * result, dim)))


def _sum_keep(x, dim):
    """x.sum(axis=dim, keepdims=True); over the last axis of a numpy array, a product with a
    vector of ones (numpy sums a short last axis one row at a time)."""
    if type(x) is np.ndarray and x.ndim and dim % x.ndim == x.ndim - 1:
        n = x.shape[-1]
        return (x.reshape(-1, n) @ _ones(n, x)).reshape(x.shape[:-1] + (1,))
    return x.sum(axis=dim, keepdims=True)

# ---- convolution and pooling ------------------------------------------------------------------
op("convolution", lambda input, weight, bias, stride, padding, dilation, groups:
   kernels.conv2d_forward(input, weight, bias, stride, padding, dilation, groups), ctx=True,
   **{"input, weight, bias": lambda g, input, weight, ctx, stride, padding, dilation, groups,
      needs, xp: xp.conv2d_backward(g, ctx, input, weight, stride, padding, dilation, groups,
                                    needs)})
op("max_pool2d", lambda self, kernel_size, stride, padding, dilation, ceil_mode:
   kernels.max_pool2d_forward(self, kernel_size, stride, padding, dilation, ceil_mode),
   node="MaxPool2DWithIndicesBackward0", ctx=True,
   self=lambda g, self_shape, ctx, xp: xp.max_pool2d_backward(g, ctx, self_shape))
op("max_pool2d_with_indices", lambda self, kernel_size, stride, padding, dilation, ceil_mode:
   _with_indices(kernels.max_pool2d_forward(self, kernel_size, stride, padding, dilation,
                                            ceil_mode)),
   node="MaxPool2DWithIndicesBackward0", ctx=True, n_out=2,
   self=lambda g, self_shape, ctx, xp: xp.max_pool2d_backward(g[0], ctx, self_shape))


def _with_indices(y_ctx):
    """(y, ctx) -> ((y, int64 indices as torch's return_indices), ctx)."""
    y, ctx = y_ctx
    return (y, kernels.max_pool2d_indices(ctx)), ctx


# ---- pointwise activations (torch's CPU kernels: the same branch at each kink) ----------------
# ctx: the forward's cdf (or tanh term), which the backward reuses (recomputed on Tensors)
op("gelu", lambda self, approximate: _gelu_forward(self, approximate), float_op=True, ctx=True,
   double="GeluBackwardBackward0",
   self=lambda g, self, approximate, ctx, xp: _gelu_backward(g, self, approximate, ctx, xp))
op("silu", lambda self: self / (1 + _xp(self).exp(-self)), float_op=True,
   self=lambda g, self, xp: g * _silu_grad(self, xp))
op("mish", lambda self: self * _xp(self).tanh(_xp(self).log1p(_xp(self).exp(self))), float_op=True,
   self=lambda g, self, xp: g * _mish_grad(self, xp))
op("elu", lambda self, alpha, scale, input_scale: _elu(self, alpha, scale, input_scale, _xp(self)),
   float_op=True, double="EluBackwardBackward0",
   self=lambda g, self, alpha, scale, input_scale, xp: g * _elu_grad(self, alpha, scale,
                                                                     input_scale, xp))
op("celu", lambda self, alpha: _elu(self, alpha, 1.0, 1.0 / alpha, _xp(self)), float_op=True,
   double="EluBackwardBackward0",
   self=lambda g, self, alpha, xp: g * _elu_grad(self, alpha, 1.0, 1.0 / alpha, xp))
op("leaky_relu", lambda self, negative_slope: _xp(self).where(self > 0, self,
                                                              self * negative_slope),
   double=_self_adjoint("LeakyReluBackwardBackward0"),
   self=lambda g, self, negative_slope, xp: xp.where(self > 0, g, g * negative_slope))
op("softplus", lambda self, beta, threshold: _softplus(self, beta, threshold, _xp(self)),
   float_op=True, double="SoftplusBackwardBackward0",
   self=lambda g, self, beta, threshold, xp: g * _softplus_grad(self, beta, threshold, xp))
op("hardtanh", lambda self, min_val, max_val: _xp(self).clip(self, min_val, max_val),
   double=_self_adjoint("HardtanhBackwardBackward0"),
   self=lambda g, self, min_val, max_val, xp: xp.where((self <= min_val) | (self >= max_val),
                                                       0, g))
op("hardswish", lambda self: self * _xp(self).clip(self + 3, 0, 6) / 6,
   double="HardswishBackwardBackward0",
   self=lambda g, self, xp: xp.where(self <= -3, 0,
                                     xp.where(self < 3, g * (self / 3 + 0.5), g)))
op("hardsigmoid", lambda self: _xp(self).clip(self + 3, 0, 6) / 6,
   self=lambda g, self, xp: xp.where((self > -3) & (self < 3), g * _ONE_SIXTH_F32, 0))
op("log_sigmoid", lambda self: _log_sigmoid(self, _xp(self)),
   float_op=True, node="LogSigmoidBackward0", double="LogSigmoidBackwardBackward0",
   self=lambda g, self, xp: g * _log_sigmoid_grad(self, xp))
op("threshold", lambda self, threshold, value: _xp(self).where(self > threshold, self, value),
   double=_self_adjoint("ThresholdBackwardBackward0"),
   self=lambda g, self, threshold, xp: xp.where(self <= threshold, 0, g))
op("hardshrink", lambda self, lambd: _xp(self).where((self >= -lambd) & (self <= lambd), 0, self),
   double=_self_adjoint("HardshrinkBackwardBackward0"),
   self=lambda g, self, lambd, xp: xp.where((self >= -lambd) & (self <= lambd), 0, g))
op("softshrink", lambda self, lambd: _xp(self).where(self > lambd, self - lambd,
                                              _xp(self).where(self < -lambd, self + lambd, 0)),
   double=_self_adjoint("SoftshrinkBackwardBackward0"),
   self=lambda g, self, lambd, xp: xp.where((self >= -lambd) & (self <= lambd), 0, g))
op("glu", lambda self, dim: _glu(self, dim, _xp(self)), float_op=True,
   self=lambda g, self, dim, xp: _glu_grad(g, self, dim, xp))
op("_prelu_kernel", lambda self, weight: _xp(self).where(self > 0, self, weight * self),
   broadcast=True, node="PreluKernelBackward0",
   self=lambda g, self, weight, xp: xp.where(self > 0, g, weight * g),
   weight=lambda g, self, xp: xp.where(self > 0, 0, self * g))

# ---- losses: one node each, as torch records them ---------------------------------------------
# `reduction` is "mean", "sum" or "none"; `_norm` is the 1/N of "mean" (N: the element count)
op("mse_loss", lambda self, target, reduction: _reduce((self - target) ** 2, reduction),
   self=lambda g, self, target, reduction: _norm(g, self, target, reduction) * 2 * (self - target),
   target=lambda g, self, target, reduction: _norm(g, self, target, reduction) * -2
   * (self - target))
op("smooth_l1_loss", lambda self, target, reduction, beta: _reduce(
    _smooth_l1(self - target, beta, _xp(self)), reduction),
   self=lambda g, self, target, reduction, beta, xp: _smooth_l1_grad(
       _norm(g, self, target, reduction), self - target, beta, xp),
   target=lambda g, self, target, reduction, beta, xp: -_smooth_l1_grad(
       _norm(g, self, target, reduction), self - target, beta, xp))
op("huber_loss", lambda self, target, reduction, delta: _reduce(
    _huber(self - target, delta, _xp(self)), reduction),
   self=lambda g, self, target, reduction, delta, xp: _huber_grad(
       _norm(g, self, target, reduction), self - target, delta, xp),
   target=lambda g, self, target, reduction, delta, xp: -_huber_grad(
       _norm(g, self, target, reduction), self - target, delta, xp))
op("soft_margin_loss", lambda self, target, reduction: _reduce(
    _xp(self).log1p(_xp(self).exp(-target * self)), reduction),
   self=lambda g, self, target, reduction, xp: _norm(g, self, target, reduction) * -target
   * _soft_margin_grad(self, target, xp),
   target=lambda g, self, target, reduction, xp: _norm(g, self, target, reduction) * -self
   * _soft_margin_grad(self, target, xp))
op("binary_cross_entropy", lambda self, target, weight, reduction: _reduce(
    _bce(self, target, weight, _xp(self)), reduction),
   self=lambda g, self, target, weight, reduction, xp: _bce_grad(
       _norm(g, self, target, reduction), self, target, weight, xp),
   target=lambda g, self, target, weight, reduction, xp: _bce_target_grad(
       _norm(g, self, target, reduction), self, weight, xp))
op("binary_cross_entropy_with_logits", lambda self, target, weight, pos_weight, reduction:
   _reduce(_bce_logits(self, target, weight, pos_weight, _xp(self)), reduction),
   self=lambda g, self, target, weight, pos_weight, reduction, xp: _bce_logits_grad(
       _norm(g, self, target, reduction), self, target, weight, pos_weight, xp),
   target=lambda g, self, target, weight, pos_weight, reduction, xp: _bce_logits_target_grad(
       _norm(g, self, target, reduction), self, weight, pos_weight, xp))
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
   self=lambda g, self, reduction, ctx, xp: _nll_grad(g, tuple(self.shape), reduction, ctx, xp))
op("nll_loss2d", ROWS["nll_loss"].fwd, node="NllLoss2DBackward0",  # (N, C, H, W) input, as torch
   ctx_saves=ROWS["nll_loss"].ctx_saves, self=ROWS["nll_loss"].formulas[0])

# ---- normalizations and embedding -------------------------------------------------------------
# saves input, weight, bias and (in ctx) mean and rstd, as PyTorch's node
op("native_layer_norm", lambda input, weight, bias, normalized_shape, eps, ctx: _layer_norm(
    input, weight, bias, len(normalized_shape), eps, ctx),
   ctx_saves=lambda v, src, args: _layer_norm_saves(v, src, args),
   **{"input, weight, bias": lambda g, input, weight, bias, normalized_shape, eps, ctx, needs,
      xp: _layer_norm_grads(g, input, weight, len(normalized_shape), eps, ctx, needs, xp)})
op("native_batch_norm", lambda input, weight, bias, training, mean, invstd, eps, ctx:
   _batch_norm(input, weight, bias, training, mean, invstd, eps, ctx),
   **{"input, weight, bias": lambda g, input, weight, training, mean, invstd, eps, ctx, needs,
      xp: _batch_norm_grads(g, input, weight, training, mean, invstd, eps, ctx, needs, xp)})
op("embedding", lambda weight, indices, padding_idx: weight.take(indices, 0),
   weight=lambda g, weight_shape, indices, padding_idx, xp: _embedding_grad(
       g, weight_shape, indices, padding_idx, xp))
op("native_group_norm", lambda input, weight, bias, num_groups, eps, ctx: _group_norm(
    input, weight, bias, num_groups, eps, ctx),
   **{"input, weight, bias": lambda g, input, weight, num_groups, eps, ctx, needs, xp:
      _group_norm_grads(g, input, weight, num_groups, eps, ctx, needs, xp)})

# ---- F.bilinear's kernel: out[b, o] = sum_ij i1[b, i] i2[o, i, j] i3[b, j] --------------------
op("_trilinear", lambda i1, i2, i3: _xp(i1).einsum("bi,oij,bj->bo", i1, i2, i3),
   **{"i1, i2, i3": lambda g, i1, i2, i3, needs, xp: _trilinear_grads(g, i1, i2, i3, needs, xp)})

# ---- transposed convolution: the input-gradient of conv2d, one ConvolutionBackward0 as torch --
# (N, C, L) input runs as a height-1 image; stride ... dilation are pairs
op("_convolution_transpose2d", lambda input, weight, bias, stride, padding, output_padding,
   dilation, groups: conv_transpose2d_forward(input, weight, bias, stride, padding,
                                              output_padding, dilation, groups),
   node="ConvolutionBackward0", ctx=True,
   **{"input, weight, bias": lambda g, input, weight, stride, padding, dilation, groups, needs,
      xp: _conv_transpose_grads(g, input, weight, stride, padding, dilation, groups, needs, xp)})

# ---- conv1d: the 2-D kernels over a height-1 image, one ConvolutionBackward0 as torch --------
# stride, padding, dilation are the 2-D pairs (1, s), (0, p), (1, d)
op("_convolution1d", lambda input, weight, bias, stride, padding, dilation, groups: _conv1d(
    input, weight, bias, stride, padding, dilation, groups),
   node="ConvolutionBackward0", ctx=True,
   **{"input, weight, bias": lambda g, input, weight, ctx, stride, padding, dilation, groups,
      needs, xp: _height1_grads(xp.conv2d_backward(
          xp.expand_dims(g, 2), ctx, xp.expand_dims(input, 2), xp.expand_dims(weight, 2),
          stride, padding, dilation, groups, needs))})


# ---- maps linear in their input: `ctx` holds (forward, adjoint) on arrays ---------------------
# (average and adaptive pooling, upsampling, pixel shuffle, padding by reflection, col2im/im2col,
# bags of embeddings). Under create_graph the adjoint is recorded as the same row with the two
# swapped.
def _linear_map(name, node, double=None):
    if name in _SAVE_SELF:
        formula = lambda g, self, ctx, xp: _adjoint(name, g, ctx, xp)  # noqa: E731
    else:
        formula = lambda g, ctx, xp: _adjoint(name, g, ctx, xp)  # noqa: E731
    # under create_graph: PyTorch's backward op (AvgPool2DBackwardBackward0), whose gradient
    # is the forward map again (and zeros for `self`, which the ops that take it save)
    spec = None if double is None else dict(
        node=double, g=lambda gg, ctx, xp: _forward_map(name, gg, ctx, xp))
    if spec is not None and name in _SAVE_SELF:
        spec["self"] = lambda gg, self, xp: xp.zeros_like(self)
    op(name, lambda self, ctx: _own(ctx.value[0](self), self), node=node, double=spec,
       self=formula)


def _own(out, x):
    """`out`, or a copy of it where the map returned a view of `x` (pixel_unshuffle of a 1x1
    image is a reshape): not a view row, so its output must not be `x`'s memory, which a write
    into either would change under the other's version counter."""
    return out.copy() if _xp(out).may_share_memory(out, x) else out


def _maps(ctx):
    """(forward without its constant, adjoint) of a linear map's ctx: (forward, adjoint[, linear
    part of the forward] when the forward adds a constant, as constant padding with a nonzero
    value does)."""
    maps = ctx.get()
    return (maps[-1] if len(maps) > 2 else maps[0]), maps[1]


def _adjoint(name, g, ctx, xp):
    """The gradient through a linear map: its adjoint. Recorded (create_graph, rows without a
    backward op of their own) as the partner row PyTorch records (pixel_shuffle's gradient is a
    pixel_unshuffle) or as this row, forward and adjoint swapped."""
    lin, adj = _maps(ctx)
    if xp is TENSORS:
        from ..autograd.apply import apply
        return apply(ROWS[_PARTNER.get(name, name)], (g,), (Ctx((adj, lin)),))
    return adj(g)


def _forward_map(name, g, ctx, xp):
    """The gradient of a linear map's backward op: the forward map (the row itself)."""
    lin, adj = _maps(ctx)
    if xp is TENSORS:
        from ..autograd.apply import apply
        return apply(ROWS[name], (g,), (Ctx((lin, adj)),))
    return lin(g)


# the backward ops of these take the forward's input (PyTorch saves it: zeros its gradient)
_SAVE_SELF = ("avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "reflection_pad1d",
              "avg_pool3d", "adaptive_avg_pool3d",
              "reflection_pad2d", "replication_pad1d", "replication_pad2d")
_PARTNER = {"pixel_shuffle": "pixel_unshuffle", "pixel_unshuffle": "pixel_shuffle",
            "col2im": "im2col", "im2col": "col2im"}
for _name, _node in (
        ("avg_pool2d", "AvgPool2DBackward0"),
        ("adaptive_avg_pool2d", "AdaptiveAvgPool2DBackward0"),
        ("adaptive_max_pool2d", "AdaptiveMaxPool2DBackward0"),
        ("avg_pool3d", "AvgPool3DBackward0"), ("adaptive_avg_pool3d", "AdaptiveAvgPool3DBackward0"),
        ("upsample_nearest1d", "UpsampleNearest1DBackward0"),
        ("upsample_nearest2d", "UpsampleNearest2DBackward0"),
        ("_upsample_nearest_exact1d", "UpsampleNearestExact1DBackward0"),
        ("_upsample_nearest_exact2d", "UpsampleNearestExact2DBackward0"),
        ("upsample_linear1d", "UpsampleLinear1DBackward0"),
        ("upsample_bilinear2d", "UpsampleBilinear2DBackward0"),
        ("pixel_shuffle", "PixelShuffleBackward0"),
        ("pixel_unshuffle", "PixelUnshuffleBackward0"),
        ("reflection_pad1d", "ReflectionPad1DBackward0"),
        ("reflection_pad2d", "ReflectionPad2DBackward0"),
        ("replication_pad1d", "ReplicationPad1DBackward0"),
        ("replication_pad2d", "ReplicationPad2DBackward0"),
        ("col2im", "Col2ImBackward0"),
        ("im2col", "Im2ColBackward0"),
        ("_embedding_bag", "EmbeddingBagBackward0"),
        ("constant_pad_nd", "ConstantPadNdBackward0")):
    # rows whose backward is an op of PyTorch's own (avg_pool2d_backward: its node's name)
    _double = None if _name in _PARTNER or _name in ("_embedding_bag", "constant_pad_nd") else \
        _node[:-1] + "Backward0"
    _linear_map(_name, _node, _double)

# ---- recurrent gates: torch's RNN cells split their gates with unsafe_split ---------------------
# the pieces are copies, not views: a piece modified in place changes nothing else (torch's
# "unsafe" pieces share memory but are not tracked as views either)
op("unsafe_split", lambda self, sizes, dim: _pieces(self, sizes, dim), n_out=-1,
   self=lambda g, self_shape, sizes, dim, xp: xp.concatenate(_zeros_for(
       g, [tuple(n if i == dim else s for i, s in enumerate(self_shape)) for n in sizes], xp),
       axis=dim))

def _pieces(a, sizes, dim):
    pre, out, start = (slice(None),) * dim, [], 0
    for n in sizes:  # plain slicing: np.split costs more than the copies on gate-sized arrays
        out.append(_xp(a).ascontiguousarray(a[pre + (slice(start, start + n),)]))
        start += n
    return out


# ---- a whole LSTM layer: one node, as torch's oneDNN kernel records it on CPU -----------------
# input (T, B, I), time first; weight0..3: w_ih (4H, I), w_hh (4H, H), b_ih, b_hh (4H,) or None;
# hx_, cx_ (B, H). Outputs: output (T, B, H) in the input's time order, hy, cy (B, H). Gates
# i, f, g, o as torch's. ctx: every step's activations, which the backward through time reads.
op("mkldnn_rnn_layer", lambda input, weight0, weight1, weight2, weight3, hx_, cx_, reverse:
   kernels.lstm_layer_forward(input, weight0, weight1, weight2, weight3, hx_, cx_, reverse),
   n_out=3, ctx=True,
   **{"input, weight0, weight1, weight2, weight3, hx_, cx_":
      lambda g, input, weight0, weight1, weight2, weight3, hx_, cx_, reverse, result, ctx, needs,
      xp: xp.lstm_layer_backward(g, ctx, input, weight0, weight1, weight2, weight3, hx_, cx_,
                                 reverse, result, needs)})


# ---- packed sequences: input (T, B, *) or (B, T, *) -> data (sum of batch_sizes, *) -------------
op("_pack_padded_sequence", lambda input, batch_sizes, batch_first: _xp(input).concatenate(
    [(input[:, t] if batch_first else input[t])[:n] for t, n in enumerate(batch_sizes)]),
   node="PackPaddedSequenceBackward0",
   input=lambda g, input_shape, batch_sizes, batch_first, xp: _unpack_grad(
       g, input_shape, batch_sizes, batch_first, xp))


def _unpack_grad(g, input_shape, batch_sizes, batch_first, xp):
    steps, batch = input_shape[:2][::-1] if batch_first else input_shape[:2]
    rest = tuple(input_shape[2:])
    rows, start = [], 0
    for n in batch_sizes:
        piece = g[start:start + n]
        if n < batch:
            piece = xp.concatenate([piece, xp.new_zeros(g, (batch - n,) + rest)], 0)
        rows.append(piece)
        start += n
    rows += [xp.new_zeros(g, (batch,) + rest)] * (steps - len(batch_sizes))
    return xp.stack(rows, 1 if batch_first else 0)


def _safe_softmax(a, dim):
    m = a.max(axis=dim, keepdims=True)
    e = _xp(a).exp(a - _xp(m).where(_xp(m).isfinite(m), m, 0))
    total = e.sum(axis=dim, keepdims=True)
    return e / _xp(total).where(total == 0, total.dtype.type(1), total)


def _short_rows(a, dim):
    """``a`` as an (n, rows) C-contiguous copy when ``dim`` is its last dim of n <= 32 values
    (else None). numpy reduces a short last axis one row at a time (~100 ns a row for max: 12 us
    for attention's (8, 16, 16)); across the rows of the copy each reduction is one vectorised
    pass over n rows (1-2 us), and the copy back costs less than the difference."""
    n = a.shape[-1] if a.ndim else 0
    if type(a) is not np.ndarray or not 1 < n <= 32 or dim % a.ndim != a.ndim - 1 or \
            a.size < 8 * n:
        return None
    return np.ascontiguousarray(a.reshape(-1, n).T)


def _softmax(a, dim):
    at = _short_rows(a, dim)
    if at is not None:
        at -= np.maximum.reduce(at, 0)
        np.exp(at, out=at)
        at /= np.add.reduce(at, 0)
        return np.ascontiguousarray(at.T).reshape(a.shape)
    e = _xp(a).exp(a - a.max(axis=dim, keepdims=True))
    e /= _sum_keep(e, dim)
    return e


def _log_softmax(a, dim):
    """x - max - log(sum(exp(x - max))) per row, as torch's kernel (a row holding +-inf or NaN
    gives NaN throughout, as torch's does)."""
    at = _short_rows(a, dim)
    if at is not None:
        at -= np.maximum.reduce(at, 0)
        lse = np.add.reduce(np.exp(at), 0)
        at -= np.log(lse, out=lse)
        return np.ascontiguousarray(at.T).reshape(a.shape)
    if not a.size:
        return a.copy()
    xp = _xp(a)
    z = a - a.max(axis=dim, keepdims=True)
    z -= xp.log(_sum_keep(xp.exp(z), dim))
    return z



# ---- helpers of the rows above ----------------------------------------------------------------
_ONE_SIXTH_F32 = float(np.float32(1.0) / np.float32(6.0))  # torch's hardsigmoid slope, float32
_SQRT1_2 = 1 / math.sqrt(2)
_GELU_PDF = 1 / math.sqrt(2 * math.pi)
_GELU_TANH_BETA = math.sqrt(2 / math.pi)
_GELU_TANH_KAPPA = 0.044715


def _erf(x):
    return array_formulas(x).erf(x)


def _gelu_forward(x, approximate):
    """(gelu(x), ctx): ctx is the cdf 0.5 (1 + erf(x / sqrt 2)), or tanh(inner) for "tanh"."""
    if approximate == "tanh":
        t = _xp(x).tanh(_GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x * x * x))
        return 0.5 * x * (1 + t), t
    cdf = _erf(x * x.dtype.type(_SQRT1_2))
    cdf += 1
    cdf *= 0.5
    return x * cdf, cdf


def _gelu_backward(g, x, approximate, ctx, xp):
    if xp is TENSORS:  # recompute from x, so that the second derivative is taken too
        return g * _gelu_grad(x, approximate, xp)
    t = ctx.get()
    if approximate == "tanh":
        x_sq = x * x
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_TANH_BETA * (
            1 + 3 * _GELU_TANH_KAPPA * x_sq))
    pdf = xp.exp(x * x * x.dtype.type(-0.5))
    pdf *= x
    pdf *= x.dtype.type(_GELU_PDF)
    pdf += t
    pdf *= g
    return pdf


def _gelu_grad(x, approximate, xp):
    if approximate == "tanh":
        x_sq = x * x
        t = xp.tanh(_GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x_sq * x))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_TANH_BETA * (
            1 + 3 * _GELU_TANH_KAPPA * x_sq)
    cdf = 0.5 * (1 + xp.erf(x * _SQRT1_2))
    return cdf + x * xp.exp(-0.5 * x * x) * _GELU_PDF


def _silu_grad(x, xp):
    sig = 1 / (1 + xp.exp(-x))
    return sig * (1 + x * (1 - sig))


def _mish_grad(x, xp):
    sig = 1 / (1 + xp.exp(-x))
    t = xp.tanh(xp.log1p(xp.exp(x)))
    return t + x * sig * (1 - t * t)


def _elu(x, alpha, scale, input_scale, xp):
    neg = xp.minimum(x, 0) * input_scale  # exp only of the values on the negative branch
    return xp.where(x > 0, x * scale, (xp.exp(neg) - 1) * (alpha * scale))


def _elu_grad(x, alpha, scale, input_scale, xp):
    neg = xp.where(x > 0, 0, x) * input_scale
    return xp.where(x <= 0, input_scale * (alpha * scale) * xp.exp(neg), scale)


def _softplus(x, beta, threshold, xp):
    bx = x * beta
    soft = _xp(bx).log1p(_xp(bx).exp(_xp(bx).minimum(bx, threshold))) / beta
    return xp.where(bx > threshold, x, soft)


def _softplus_grad(x, beta, threshold, xp):
    bx = x * beta
    z = xp.exp(xp.where(bx > threshold, 0, bx))
    return xp.where(bx > threshold, 1, z / (z + 1))


def _log_sigmoid(x, xp):
    return xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))


def _log_sigmoid_grad(x, xp):
    """torch's log_sigmoid_backward: 1 - s for x < 0, s otherwise, s = exp(-|x|) / (1 + that)
    (both branches in x's dtype: an int `where` beside them made float32 float64)."""
    neg = x < 0
    z = xp.exp(xp.where(neg, x, -x))  # exp(-|x|)
    s = z / (1 + z)
    return xp.where(neg, 1 - s, s)


def _halves(x, dim):
    n = x.shape[dim] // 2
    index = [slice(None)] * len(x.shape)
    index[dim] = slice(0, n)
    first = tuple(index)
    index[dim] = slice(n, None)
    return x[first], x[tuple(index)]


def _glu(x, dim, xp):
    a, b = _halves(x, dim)
    return a / (1 + xp.exp(-b))


def _glu_grad(g, x, dim, xp):
    a, b = _halves(x, dim)
    sig = 1 / (1 + xp.exp(-b))
    parts = [g * sig, g * a * sig * (1 - sig)]
    return xp.concatenate(parts, dim)


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
    h = _xp(z).maximum(z, 0)
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
    d = (z > 0) * (2 * z if p == 2 else 1.0) / c
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


def _bce_target_grad(g, x, w, xp):
    w = None if w is None else xp.constant(w)
    with np.errstate(divide="ignore"):
        out = g * (_log_clamped(1 - x, xp) - _log_clamped(x, xp))
    return out if w is None else out * w


def _log_sigmoid(x, xp):
    return xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))


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


def _bce_logits_target_grad(g, x, w, pw, xp):
    w, pw = (None if a is None else xp.constant(a) for a in (w, pw))
    ls = _log_sigmoid(x, xp)
    out = g * (-x - (pw - 1) * ls) if pw is not None else g * -x
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
    losses = -w * xl[rows, ts]
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
    """What PyTorch's NllLossBackward0 saves besides self: target, weight (when given) and its
    total_weight output (0-d: the summed weight of the counted targets, 0 for "none")."""
    rows, _, w, _ = v[:4]
    total = 0 if reduction == "none" else len(rows) if w is None else w.sum()
    return (target,) + (() if weight is None else (weight,)) + (_xp(rows).asarray(total, dtype),)


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


def _layer_norm(x, weight, bias, k, eps, ctx):
    """Normalise over the last `k` dims. The sums over each row of n values are products with
    a vector of ones (numpy reduces a short last axis one row at a time: 5 us for GPT's
    (8, 16, 32), the product 1 us); ctx gets xhat (x's shape) and rstd (rows, 1)."""
    m = _xp(x)
    n = math.prod(x.shape[x.ndim - k:])
    inv_n = x.dtype.type(1 / n)
    x2 = x.reshape(-1, n)
    ones = _ones(n, x)
    xhat = x2 - (x2 @ ones)[:, None] * inv_n
    var = (xhat * xhat) @ ones
    var *= inv_n
    var += x.dtype.type(eps)
    rstd = m.divide(1, m.sqrt(var, out=var), out=var)[:, None]
    xhat *= rstd
    xhat = xhat.reshape(x.shape)
    ctx.value = (xhat, rstd)
    if weight is None and bias is None:
        return xhat.copy()  # its own array: xhat, read by the backward, has no version check
    out = xhat if weight is None else xhat * weight
    if bias is not None:
        out = m.add(out, bias, out=out) if out is not xhat and bias.dtype == out.dtype \
            else out + bias
    return out


def _layer_norm_saves(v, src, args):
    """mean and rstd as PyTorch's node saves them, shaped (*batch, 1, ..., 1): asked for only
    under saved_tensors_hooks (the kernel keeps xhat and rstd of shape (rows, 1))."""
    x = src[0]._data
    k = len(args[0])
    keep = x.shape[:x.ndim - k] + (1,) * k
    return (x.mean(axis=tuple(range(x.ndim - k, x.ndim))).reshape(keep).astype(x.dtype),
            v[1].reshape(keep))


def _layer_norm_grads(g, x, weight, k, eps, ctx, needs, xp):
    shape = tuple(x.shape)
    n = math.prod(shape[len(shape) - k:])
    if xp is TENSORS:  # recompute the statistics from x, so that they are differentiated too
        axes = tuple(range(len(shape) - k, len(shape)))
        mean = x.sum(axis=axes, keepdims=True) / n
        xc = x - mean
        rstd = ((xc * xc).sum(axis=axes, keepdims=True) / n + eps).rsqrt()
        xhat = xc * rstd
        batch = tuple(range(len(shape) - k))
        gx = gw = gb = None
        if needs[0]:
            gh = g if weight is None else g * weight
            gx = rstd * (gh - gh.sum(axis=axes, keepdims=True) / n
                         - xhat * (gh * xhat).sum(axis=axes, keepdims=True) / n)
        if len(needs) > 1 and needs[1]:
            gw = (g * xhat).sum(axis=batch) if batch else g * xhat
        if len(needs) > 2 and needs[2]:
            gb = g.sum(axis=batch) if batch else g
        return gx, gw, gb
    # arrays: (rows, n) matrices, every sum a product with ones (see _layer_norm)
    xhat, rstd = ctx.get()
    inv_n = g.dtype.type(1 / n)
    g2 = g.reshape(-1, n)
    xh2 = xhat.reshape(-1, n)
    ones = _ones(n, g2)
    gx = gw = gb = None
    if needs[0]:
        gh = g2 if weight is None else g2 * weight.reshape(-1)
        t = xh2 * ((gh * xh2) @ ones * inv_n)[:, None]
        t += ((gh @ ones) * inv_n)[:, None]
        gx = gh - t
        gx *= rstd
        gx = gx.reshape(shape)
    w_shape = shape[len(shape) - k:]
    if len(needs) > 1 and needs[1]:
        gw = (_ones(g2.shape[0], g2) @ (g2 * xh2)).reshape(w_shape)
    if len(needs) > 2 and needs[2]:
        gb = (_ones(g2.shape[0], g2) @ g2).reshape(w_shape)
    return gx, gw, gb


_ONES = {}


def _ones(n, like):
    """A vector of n ones in `like`'s dtype on its device (numpy's kept, read-only): a sum over
    the rows or columns of a matrix as one matrix-vector product."""
    if type(like) is not np.ndarray:
        return _xp(like).ones(n, like.dtype)
    key = (n, like.dtype)
    r = _ONES.get(key)
    if r is None:
        r = np.ones(n, like.dtype)
        r.flags.writeable = False
        if len(_ONES) < 64:
            _ONES[key] = r
    return r


def _bn_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _batch_norm(x, weight, bias, training, mean, invstd, eps, ctx):
    """Normalise per channel (dim 1). Training: batch statistics; ctx gets (xhat, invstd, the
    batch mean and biased variance). Eval: the given running `mean` and `invstd`."""
    shape = _bn_shape(x)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        m = x.mean(axis=axes)
        xc = x - m.reshape(shape)
        var = (xc * xc).mean(axis=axes)
        inv = 1 / _xp(var).sqrt(var + eps)
        ctx.value = (xc * inv.reshape(shape), inv, m, var)
    else:
        inv = invstd
        xc = x - mean.reshape(shape)
        ctx.value = (xc * inv.reshape(shape), inv, None, None)
    out = ctx.value[0]
    if weight is None and bias is None:
        return out.copy()  # its own array: xhat, read by the backward, has no version check
    if weight is not None:
        out = out * weight.reshape(shape)
    return out if bias is None else out + bias.reshape(shape)


def _batch_norm_grads(g, x, weight, training, mean, invstd, eps, ctx, needs, xp):
    shape = tuple(_bn_shape(x))
    axes = (0,) + tuple(range(2, len(x.shape)))
    n = math.prod(x.shape) // x.shape[1]
    if xp is TENSORS:
        if training:
            m = x.sum(axis=axes, keepdims=True) / n
            xc = x - m
            inv = ((xc * xc).sum(axis=axes, keepdims=True) / n + eps).rsqrt()
        else:
            inv = xp.constant(invstd.reshape(shape))
            xc = x - xp.constant(mean.reshape(shape))
        xhat = xc * inv
    else:
        xhat, inv, _, _ = ctx.get()
        inv = inv.reshape(shape)
    gx = gw = gb = None
    w = 1 if weight is None else weight.reshape(shape)
    if needs[0]:
        if training:
            gx = w * inv * (g - g.sum(axis=axes, keepdims=True) / n
                            - xhat * (g * xhat).sum(axis=axes, keepdims=True) / n)
        else:
            gx = g * w * inv
    if len(needs) > 1 and needs[1]:
        gw = (g * xhat).sum(axis=axes)
    if len(needs) > 2 and needs[2]:
        gb = g.sum(axis=axes)
    return gx, gw, gb


def _group_norm(x, weight, bias, num_groups, eps, ctx):
    n, c = x.shape[0], x.shape[1]
    xg = x.reshape(n, num_groups, -1)
    mean = xg.mean(axis=2, keepdims=True)
    xc = xg - mean
    rstd = 1 / _xp(xc).sqrt((xc * xc).mean(axis=2, keepdims=True) + eps)
    xhat = (xc * rstd).reshape(x.shape)
    ctx.value = (xhat, rstd)
    if weight is None and bias is None:
        return xhat.copy()  # its own array: xhat, read by the backward, has no version check
    shape = (1, c) + (1,) * (x.ndim - 2)
    out = xhat if weight is None else xhat * weight.reshape(shape)
    return out if bias is None else out + bias.reshape(shape)


def _group_norm_grads(g, x, weight, num_groups, eps, ctx, needs, xp):
    n, c = x.shape[0], x.shape[1]
    shape = (1, c) + (1,) * (len(x.shape) - 2)
    xs = tuple(x.shape)
    if xp is TENSORS:  # recompute the statistics from x, so that they are differentiated too
        xg = x.reshape(n, num_groups, -1)
        m = xg.shape[2]
        xc = xg - xg.sum(axis=2, keepdims=True) / m
        rstd = ((xc * xc).sum(axis=2, keepdims=True) / m + eps).rsqrt()
        xhat = (xc * rstd).reshape(xs)
    else:
        xhat, rstd = ctx.get()
    axes = (0,) + tuple(range(2, len(xs)))
    gx = gw = gb = None
    if needs[0]:
        gh = g if weight is None else g * weight.reshape(shape)
        ghg = gh.reshape(n, num_groups, -1)
        xhg = xhat.reshape(n, num_groups, -1)
        m = ghg.shape[2]
        gx = (rstd * (ghg - ghg.sum(axis=2, keepdims=True) / m
                      - xhg * (ghg * xhg).sum(axis=2, keepdims=True) / m)).reshape(xs)
    if len(needs) > 1 and needs[1]:
        gw = (g * xhat).sum(axis=axes)
    if len(needs) > 2 and needs[2]:
        gb = g.sum(axis=axes)
    return gx, gw, gb


def _trilinear_grads(g, i1, i2, i3, needs, xp):
    if xp is TENSORS:  # recorded: the first two as _trilinear again (torch's formula calls it)
        tri = ROWS["_trilinear"]
        b, o = g.shape
        return (_apply(tri, (g, xp.permute(i2, (1, 0, 2)), i3)) if needs[0] else None,
                (xp.t(g) @ (i1[:, :, None] * i3[:, None, :]).reshape(b, -1)).reshape(
                    i2.shape) if needs[1] else None,
                _apply(tri, (g, xp.permute(i2, (2, 0, 1)), i1)) if needs[2] else None)
    return (xp.einsum("bo,oij,bj->bi", g, i2, i3) if needs[0] else None,
            xp.einsum("bo,bi,bj->oij", g, i1, i3) if needs[1] else None,
            xp.einsum("bo,oij,bi->bj", g, i2, i1) if needs[2] else None)


def conv_transpose2d_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    """Arrays: y = conv_transpose2d(x, w, b) as the input-gradient of conv2d(., w) ((N, C, L)
    input: over a height-1 image); returns (y, ctx) for the row above."""
    if x.ndim == 3:
        y, ctx = conv_transpose2d_forward(x[:, :, None], w[:, :, None], b, stride, padding,
                                          output_padding, dilation, groups)
        return _xp(y).ascontiguousarray(y[:, :, 0]), ctx
    n, _, h, wd = x.shape
    _, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    ho = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    wo = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    probe = _xp(x).zeros((n, cg * groups, ho, wo), x.dtype)
    _, cctx = kernels.conv2d_forward(probe, w, None, stride, padding, dilation, groups)
    y = kernels.conv2d_backward(x, cctx, (True, False, False))[0]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return _xp(y).ascontiguousarray(y), None


def _conv_transpose_grads(g, x, w, stride, padding, dilation, groups, needs, xp):
    if len(g.shape) == 3:  # conv_transpose1d: the 2-D kernels over a height-1 image
        return _height1_grads(_conv_transpose_grads(g[:, :, None], x[:, :, None], w[:, :, None],
                                                    stride, padding, dilation, groups, needs,
                                                    xp))
    if xp is TENSORS:  # recorded: the convolution of g, and conv2d's weight gradient (the
        # transposed convolution is conv2d's input gradient: its adjoint is conv2d itself)
        gx = _apply(ROWS["convolution"], (g, w, None), (stride, padding, dilation, groups)) \
            if needs[0] else None
        gw = xp.conv2d_backward(x, None, g, w, stride, padding, dilation, groups,
                                (False, True, False))[1] if needs[1] else None
        gb = g.sum(axis=(0, 2, 3)) if len(needs) > 2 and needs[2] else None
        return gx, gw, gb
    gx = gw = gb = None
    y, cctx = kernels.conv2d_forward(g, w, None, stride, padding, dilation, groups)
    if needs[0]:
        gx = y
    if needs[1]:
        gw = kernels.conv2d_backward(x, cctx, (False, True, False))[1]
    if len(needs) > 2 and needs[2]:
        gb = g.sum(axis=(0, 2, 3))
    return gx, gw, gb


def _conv1d(x, w, b, stride, padding, dilation, groups):
    y, ctx = kernels.conv2d_forward(x[:, :, None], w[:, :, None], b, stride, padding, dilation,
                                    groups)
    return _xp(y).ascontiguousarray(y[:, :, 0]), ctx


def _height1_grads(grads):
    """The (input, weight, bias) gradients of a 2-D kernel run on height-1 images, back in 1-D."""
    return tuple(t if t is None or len(t.shape) == 1 else t[:, :, 0] for t in grads)


def _embedding_grad(g, weight_shape, indices, padding_idx, xp):
    d = weight_shape[1]
    flat = indices.reshape(-1)
    g2 = g.reshape((len(flat), d))
    if padding_idx is not None and padding_idx >= 0:
        keep = (flat != padding_idx)[:, None]
        g2 = xp.where(xp.constant(keep), g2, 0)
    return xp.scatter_add(g2, tuple(weight_shape), flat)


# ---- weight normalisation (torch._weight_norm, nn.utils.weight_norm) ----------------------------
def _norm_except(v, dim):
    """The 2-norm of v over every dim but ``dim`` (all of them for dim -1), kept as size-1 dims."""
    axes = tuple(i for i in range(len(v.shape)) if i != dim) if dim != -1 else None
    return (v * v).sum(axis=axes, keepdims=True) ** 0.5, axes


def _weight_norm_fwd(v, g, dim):
    norm, _ = _norm_except(v, dim)
    return v * (g / norm)


def _weight_norm_grads(grad, v, g, dim, xp):
    """(d/dv, d/dg) of w = v * g / ||v||: g's gradient is sum(grad * v) / ||v|| (over the other
    dims), v's is g / ||v|| * (grad - v * sum(grad * v) / ||v||^2)."""
    axes = tuple(i for i in range(len(v.shape)) if i != dim) if dim != -1 else None
    norm = xp.sum(v * v, axis=axes, keepdims=True) ** 0.5
    s = xp.sum(grad * v, axis=axes, keepdims=True)
    gv = (g / norm) * (grad - v * (s / (norm * norm)))
    gg = (s / norm).reshape(tuple(g.shape))
    return gv, gg


op("weight_norm_interface", _weight_norm_fwd, node="WeightNormInterfaceBackward0",
   **{"v, g": _weight_norm_grads})


# ---- in-place variants torch names differently (leaky_relu_ -> LeakyReluBackward1) ------------
for _name, _node in (("leaky_relu", "LeakyReluBackward1"), ("elu", "EluBackward1"),
                     ("celu", "CeluBackward1"), ("threshold", "ThresholdBackward1")):
    _row = ROWS[_name]
    op(_name + "_", _row.fwd, node=_node, float_op=_row.float_op, double=_row.double_spec,
       self=_row.formulas[0])
