"""Rows: the layers PyTorch records as one node — activations over a dim (softmax,
log_softmax), convolution, pooling, normalizations (NativeLayerNormBackward0,
NativeBatchNormBackward0), embedding, linear maps (average pooling, upsampling, padding), the
RNN gate split and LSTM layer, weight normalisation. Pointwise activations are activations.py's,
losses losses.py's, attention attention.py's.

Pointwise formulas follow torch's CPU kernels (the same branch at each kink, the same constants),
and run on arrays or, under create_graph, on Tensors: ``xp.exp(x)`` is numpy's (cupy's) on
arrays and ``x.exp()`` on Tensors (ops/formulas.py).
Rows whose backward needs more than the inputs keep it in a ``Ctx`` filled by the forward; their
formulas recompute it from the saved inputs when the backward is itself recorded.

The array kernels (im2col, window views, all conv/pool geometry) are in kernels.py; a kernel's
forward returns what its backward needs, kept in a `Ctx` released with the node.
Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: derivatives.py.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd.apply import apply as _apply
from ..autograd.grad_mode import no_grad
from ..backend import get_array_module as _xp
from ..tensor import Tensor
from ..sparse_coo import SparseCOO
from . import kernels
from .formulas import TENSORS
from .derivatives import _layer_norm_nonfinite_grad, _zeros_for
from .registry import ROWS, Ctx, op

# ---- over a dim -------------------------------------------------------------------------------
# their gradients: PyTorch's _softmax_backward_data / _log_softmax_backward_data, rows of their
# own under create_graph (ops/activations.py)
op("softmax", lambda self, dim: _softmax(self, dim), float_op=True,
   self=lambda g, result, dim, xp: _softmax_grad(g, result, dim, xp))
op("log_softmax", lambda self, dim: _log_softmax(self, dim), float_op=True,
   self=lambda g, result, dim, xp: xp.row("_log_softmax_backward_data", (g, result), (dim,))
   if xp is TENSORS else g - xp.exp(result) * _sum_keep(g, dim))
# attention's softmax: a row that is -inf throughout gives zeros (not nan), and zero gradients
op("_safe_softmax", lambda self, dim: _safe_softmax(self, dim), float_op=True,
   self=lambda g, result, dim, xp: _softmax_grad(g, result, dim, xp))


def _softmax_grad(g, result, dim, xp):
    if xp is TENSORS:
        return xp.row("_softmax_backward_data", (g, result), (dim,))
    return result * (g - _sum_keep(g * result, dim))


def _sum_keep(x, dim):
    """x.sum(axis=dim, keepdims=True); over the last axis of a numpy array, a product with a
    vector of ones (numpy sums a short last axis one row at a time)."""
    if type(x) is np.ndarray and x.ndim and dim % x.ndim == x.ndim - 1:
        n = x.shape[-1]
        return (x.reshape(-1, n) @ _ones(n, x)).reshape(x.shape[:-1] + (1,))
    return x.sum(axis=dim, keepdims=True)

# ---- convolution and pooling ------------------------------------------------------------------
# under create_graph the gradient is PyTorch's convolution_backward, one op for the three
# (ConvolutionBackwardBackward0 of grad_output, input, weight), whose derivative is
# _convolution_double_backward (convolutions of the incoming gradients)
op("convolution", lambda input, weight, bias, stride, padding, dilation, groups:
   kernels.conv2d_forward(input, weight, bias, stride, padding, dilation, groups), ctx=True,
   **{"input, weight, bias": lambda g, input, weight, ctx, stride, padding, dilation, groups,
      needs, xp: _conv_grads(g, input, weight, ctx, stride, padding, dilation, groups, needs,
                             xp)})
op("convolution_backward", lambda grad_output, input, weight, stride, padding, dilation, groups:
   _conv_backward(grad_output, input, weight, stride, padding, dilation, groups), n_out=3,
   node="ConvolutionBackwardBackward0",
   **{"grad_output, input, weight": lambda g, grad_output, input, weight, stride, padding,
      dilation, groups, needs, xp: _conv_double(g, grad_output, input, weight, stride, padding,
                                                dilation, groups, needs, xp)})
# saves self, as PyTorch's node; under create_graph its backward op max_pool2d_with_indices_backward
# (MaxPool2DWithIndicesBackwardBackward0 of grad_output and self): in grad_output the gradient
# picked at the indices (max_pool_double_backward), zeros in self; return_indices=True's row
# (two outputs) applies the same op as a row
_MAX_POOL2D_DOUBLE = dict(node="MaxPool2DWithIndicesBackwardBackward0",
                          g=lambda gg, ctx, xp: _max_pool_double(gg, ctx, xp),
                          self=lambda gg, self, xp: xp.zeros_like(self))
op("max_pool2d", lambda self, kernel_size, stride, padding, dilation, ceil_mode:
   kernels.max_pool2d_forward(self, kernel_size, stride, padding, dilation, ceil_mode),
   node="MaxPool2DWithIndicesBackward0", ctx=True, double=_MAX_POOL2D_DOUBLE,
   self=lambda g, self, ctx, xp: xp.max_pool2d_backward(g, ctx, tuple(self.shape)))
op("max_pool2d_with_indices", lambda self, kernel_size, stride, padding, dilation, ceil_mode:
   _with_indices(kernels.max_pool2d_forward(self, kernel_size, stride, padding, dilation,
                                            ceil_mode)),
   node="MaxPool2DWithIndicesBackward0", ctx=True, n_out=2,
   self=lambda g, self, ctx, xp: _apply(ROWS["max_pool2d"].double_row, (g[0], self), (
       Ctx(ctx.get()),)) if xp is TENSORS else xp.max_pool2d_backward(g[0], ctx,
                                                                      tuple(self.shape)))


def _max_pool_double(gg, ctx, xp):
    """PyTorch's max_pool_double_backward: gg (N, C, H, W) gathered at the argmax indices into
    each H*W plane, shaped as the pooled output."""
    idx = kernels.max_pool2d_indices(ctx.get())
    n, c = idx.shape[:2]
    shape = idx.shape if gg.ndim == 4 else idx.shape[1:]  # (an unbatched (C, H, W) input)
    if xp is not TENSORS:
        return _xp(gg).take_along_axis(gg.reshape(n, c, -1), idx.reshape(n, c, -1),
                                       -1).reshape(shape)
    return gg.contiguous().view(n, c, -1).gather(-1, Tensor._make_fresh(
        idx.reshape(n, c, -1))).view(tuple(shape))


def _with_indices(y_ctx):
    """(y, ctx) -> ((y, int64 indices as torch's return_indices), ctx)."""
    y, ctx = y_ctx
    idx = kernels.max_pool2d_indices(ctx)
    return (y, idx if y.ndim == 4 else idx[0]), ctx


# ---- normalizations and embedding -------------------------------------------------------------
# saves input, weight, bias and (in ctx) mean and rstd, as PyTorch's node
op("native_layer_norm", lambda input, weight, bias, normalized_shape, eps, ctx: _layer_norm(
    input, weight, bias, len(normalized_shape), eps, ctx),
   ctx_saves=lambda v, src, args: _layer_norm_saves(v, src, args),
   **{"input, weight, bias": lambda g, input, weight, bias, normalized_shape, eps, ctx, needs,
      xp: _norm_backward("layer_norm_backward", g, input, weight, bias, normalized_shape, eps,
                         ctx, needs) if xp is TENSORS else _layer_norm_grads(
          g, input, weight, len(normalized_shape), eps, ctx, needs, xp)})
op("native_batch_norm", lambda input, weight, bias, training, mean, invstd, eps, ctx:
   _batch_norm(input, weight, bias, training, mean, invstd, eps, ctx),
   **{"input, weight, bias": lambda g, input, weight, training, mean, invstd, eps, ctx, needs,
      xp: _norm_backward("batch_norm_backward", g, input, weight, training, mean, invstd, eps,
                         ctx, needs) if xp is TENSORS else _batch_norm_grads(
          g, input, weight, training, mean, invstd, eps, ctx, needs, xp)})
# under create_graph: PyTorch's embedding_dense_backward (EmbeddingDenseBackwardBackward0 of
# grad_output), whose derivative is embedding_dense_double_backward: the rows picked again
op("embedding", lambda weight, indices, padding_idx: weight.take(indices, 0),
   double=dict(node="EmbeddingDenseBackwardBackward0", g=lambda gg, indices, padding_idx, xp:
               _embedding_double(gg, indices, padding_idx, xp)),
   weight=lambda g, weight_shape, indices, padding_idx, xp: _embedding_grad(
       g, weight_shape, indices, padding_idx, xp))
# sparse=True: the same node, its weight's gradient a sparse COO tensor (embedding_sparse_backward)
op("embedding_sparse", ROWS["embedding"].fwd, node="EmbeddingBackward0",
   weight=lambda g, weight_shape, indices, padding_idx: _embedding_sparse_grad(
       g, weight_shape, indices, padding_idx))

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
          stride, padding, dilation, groups, needs)) if xp is not TENSORS else _conv_grads(
          g, input, weight, ctx, stride, padding, dilation, groups, needs, xp)})


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
        ("_upsample_bilinear2d_aa", "UpsampleBilinear2DAaBackward0"),
        ("_upsample_bicubic2d_aa", "UpsampleBicubic2DAaBackward0"),
        ("_upsample_lanczos2d_aa", "UpsampleLanczos2DAaBackward0"),
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
# keep=False (nn.LSTM, when no graph is recorded): the kernel keeps no ctx, the same numbers
op("mkldnn_rnn_layer", lambda input, weight0, weight1, weight2, weight3, hx_, cx_, reverse,
   keep=True: kernels.lstm_layer_forward(input, weight0, weight1, weight2, weight3, hx_, cx_,
                                         reverse, keep),
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
    """torch's: softmax (so NaN across a row holding +inf, inf - inf), then 0 across a row
    that is all -inf."""
    xp = _xp(a)
    m = a.max(axis=dim, keepdims=True)
    dead = m == -np.inf
    with np.errstate(invalid="ignore"):
        e = xp.exp(a - xp.where(dead, a.dtype.type(0), m))
        total = e.sum(axis=dim, keepdims=True)
        return xp.where(dead, a.dtype.type(0), e / xp.where(dead, total.dtype.type(1), total))


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
        # divided straight into the output's C-contiguous rows: no copy back
        out = np.empty(a.shape, a.dtype)
        np.divide(at, np.add.reduce(at, 0), out=out.reshape(-1, at.shape[0]).T)
        return out
    e = _xp(a).exp(a - a.max(axis=dim, keepdims=True))
    e /= _sum_keep(e, dim)
    return e


def _log_softmax(a, dim):
    """x - max - log(sum(exp(x - max))) per row, as torch's kernel (a row holding +-inf or NaN
    gives NaN throughout, as torch's does)."""
    if not a.size:
        return a.copy()
    z, lse, transposed = log_softmax_parts(a, dim)
    z -= lse
    return np.ascontiguousarray(z.T).reshape(a.shape) if transposed else z


def log_softmax_parts(a, dim=1):
    """``(z, lse, transposed)`` of a non-empty array: ``z - lse`` is `_log_softmax(a, dim)`
    (`_log_softmax` subtracts them in place), z the rows shifted by their max, lse the log of
    each row's sum of ``exp(z)``. `transposed` (short rows along the last dim, `_short_rows`):
    z is (C, rows) and lse (rows,); else z has a's shape and lse a's with `dim` kept as 1.
    cross_entropy picks the targets' log-probabilities from them (`log_softmax_picked`) and
    finishes the others only in its backward."""
    at = _short_rows(a, dim)
    if at is not None:
        at -= np.maximum.reduce(at, 0)
        lse = np.add.reduce(np.exp(at), 0)
        return at, np.log(lse, out=lse), True
    xp = _xp(a)
    z = a - a.max(axis=dim, keepdims=True)
    return z, xp.log(_sum_keep(xp.exp(z), dim)), False


def log_softmax_picked(parts, rows, t):
    """``_log_softmax(a, 1)[rows, t]`` of a 2-d `a` from ``log_softmax_parts(a)``: the targets'
    log-probabilities alone, bitwise the same."""
    z, lse, transposed = parts
    return z[t, rows] - lse if transposed else z[rows, t] - lse[:, 0]


def _layer_norm(x, weight, bias, k, eps, ctx):
    """Normalise over the last `k` dims. The sums over each row of n values are products with
    a vector of ones (numpy reduces a short last axis one row at a time: 5 us for GPT's
    (8, 16, 32), the product 1 us); ctx gets xhat (x's shape) and rstd (rows, 1)."""
    m = _xp(x)
    n = math.prod(x.shape[x.ndim - k:])
    inv_n = x.dtype.type(1 / n)
    x2 = x.reshape(-1, n)
    ones = _ones(n, x)
    mean = x2 @ ones  # (the row statistics in place: (rows,) temporaries)
    mean *= inv_n
    xhat = x2 - mean[:, None]
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


def _norm_backward(name, *args):
    """Under create_graph: PyTorch's native_{layer,batch}_norm_backward applied (norms.py)."""
    from . import norms  # (its rows follow nn's in the table)
    return getattr(norms, name)(*args)


def _layer_norm_tensor_grads(g, x, weight, k, eps, needs):
    """The gradients on Tensors with the statistics recomputed from x, so that they are
    differentiated too (the derivative of native_layer_norm_backward, norms.py)."""
    shape = tuple(x.shape)
    n = math.prod(shape[len(shape) - k:])
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


def _layer_norm_grads(g, x, weight, k, eps, ctx, needs, xp):
    shape = tuple(x.shape)
    n = math.prod(shape[len(shape) - k:])
    # arrays: (rows, n) matrices, every sum a product with ones (see _layer_norm)
    xhat, rstd = ctx.get()
    inv_n = g.dtype.type(1 / n)
    g2 = g.reshape(-1, n)
    xh2 = xhat.reshape(-1, n)
    ones = _ones(n, g2)
    gx = gw = gb = None
    if needs[0]:
        gh = g2 if weight is None else g2 * weight.reshape(-1)
        ds, db = (gh * xh2) @ ones, gh @ ones
        xp = _xp(ds)
        if xp.isfinite(ds).all() and xp.isfinite(db).all():
            t = xh2 * (ds * inv_n)[:, None]
            t += (db * inv_n)[:, None]
            gx = gh - t
            gx *= rstd
        else:  # an inf or NaN: torch's kernel's algebra, whose infs cancel as its do
            gx = _layer_norm_nonfinite_grad(gh, x.reshape(-1, n), rstd[:, 0])
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


def _batch_norm_tensor_grads(g, x, weight, training, mean, invstd, eps, needs):
    """The gradients on Tensors, the batch statistics recomputed from x (differentiated too:
    the derivative of native_batch_norm_backward, norms.py)."""
    return _batch_norm_grads(g, x, weight, training, mean, invstd, eps, None, needs, TENSORS)


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


def _trilinear_grads(g, i1, i2, i3, needs, xp):
    if xp is TENSORS:  # recorded: the first two as _trilinear again (torch's formula calls it)
        tri = ROWS["_trilinear"]
        b, o = g.shape
        return (_apply(tri, (g, xp.permute(i2, (1, 0, 2)), i3)) if needs[0] else None,
                (xp.t(g) @ (i1[:, :, None] * i3[:, None, :]).reshape(b, -1)).reshape(
                    i2.shape) if needs[1] else None,
                _apply(tri, (g, xp.permute(i2, (2, 0, 1)), i1)) if needs[2] else None)
    # grouped as torch's _trilinear_backward calls _trilinear (a pair, then the third, one
    # slice of o at a time), which an inf or NaN decides: input2's gradient sums the weight with
    # input1 over i before g multiplies it (one einsum over all three put g inside that sum:
    # NaN where torch has inf); the other two sum every product with g inside, as one einsum
    return (xp.einsum("bo,oij,bj->bi", g, i2, i3) if needs[0] else None,
            xp.einsum("bo,bi,bj->oij", g, i1, i3) if needs[1] else None,
            xp.einsum("bo,boj->bj", g, xp.einsum("oij,bi->boj", i2, i1)) if needs[2] else None)


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


def _conv_grads(g, input, weight, ctx, stride, padding, dilation, groups, needs, xp):
    if xp is not TENSORS:
        return xp.conv2d_backward(g, ctx, input, weight, stride, padding, dilation, groups,
                                  needs)
    gi, gw, gb = _apply(ROWS["convolution_backward"], (g, input, weight),
                        (stride, padding, dilation, groups))
    return (gi if needs[0] else None, gw if needs[1] else None,
            gb if len(needs) > 2 and needs[2] else None)


def _conv_backward(g, x, w, stride, padding, dilation, groups):
    """convolution_backward on arrays: the (input, weight, bias) gradients ((N, C, L): over a
    height-1 image, stride ... dilation the 2-D pairs)."""
    if x.ndim == 5:
        from .volumes import conv_nd_all_grads  # (volumes' rows follow nn's in the table)
        return conv_nd_all_grads(g, x, w, stride, padding, dilation, groups)
    if x.ndim == 3:
        return _height1_grads(_conv_backward(g[:, :, None], x[:, :, None], w[:, :, None],
                                             stride, padding, dilation, groups))
    _, ctx = kernels.conv2d_forward(x, w, None, stride, padding, dilation, groups)
    gi, gw, _ = kernels.conv2d_backward(g, ctx, (True, True, False))
    return gi, gw, g.sum(axis=(0, 2, 3))


def _conv(x, w, stride, padding, dilation, groups):
    """The recorded convolution (ConvolutionBackward0) of 4-D or 3-D x."""
    return _apply(ROWS[_CONV_ROWS[len(x.shape)]], (x, w, None), (stride, padding, dilation,
                                                                 groups))


_CONV_ROWS = {3: "_convolution1d", 4: "convolution", 5: "_convolution3d"}


def _conv_double(g, gO, input, weight, stride, padding, dilation, groups, needs, xp):
    """PyTorch's _convolution_double_backward (not transposed): from the gradients (ggI, ggW,
    ggb) of convolution_backward's outputs, those of grad_output (conv(ggI, w) + conv(x, ggW)
    + ggb), of input (the transposed convolution of grad_output with ggW) and of weight (the
    convolution of ggI with grad_output, batch and channels swapped, stride and dilation
    swapped, per group). On arrays (a last derivative): the same ops, not recorded."""
    if xp is not TENSORS:
        def t(a):
            return None if a is None else Tensor._make_fresh(a)
        with no_grad():
            outs = _conv_double([t(a) for a in g], t(gO), t(input), t(weight), stride, padding,
                                dilation, groups, needs, TENSORS)
        return tuple(None if o is None else o._data for o in outs)
    ggI, ggW, ggb = g
    ggO = gI = gW = None
    if needs[0]:
        if ggI is not None:
            ggO = _conv(ggI, weight, stride, padding, dilation, groups)
        if ggW is not None:
            t = _conv(input, ggW, stride, padding, dilation, groups)
            ggO = t if ggO is None else ggO + t
        if ggb is not None:
            t = ggb.contiguous().view(1, -1, *(1,) * (len(gO.shape) - 2)).expand(*gO.shape)
            ggO = t if ggO is None else ggO + t
    if needs[2] and ggI is not None:
        ggIt, gOt = ggI.transpose(0, 1), gO.transpose(0, 1)
        if groups == 1:
            gW = _conv(ggIt, gOt, dilation, padding, stride, 1)
        else:
            ci, co = ggIt.shape[0] // groups, gOt.shape[0] // groups
            gW = TENSORS.concatenate([_conv(ggIt.narrow(0, i * ci, ci), gOt.narrow(
                0, i * co, co), dilation, padding, stride, 1) for i in range(groups)], 1)
        gW = gW.transpose(0, 1)
        for d in range(2, len(gW.shape)):
            if gW.shape[d] > weight.shape[d]:
                gW = gW.narrow(d, 0, weight.shape[d])
    if needs[1] and ggW is not None:
        k = len(gO.shape) - 2  # (1-D: the last of each pair)
        out_pad = (0,) * (2 - k) + tuple(
            x - ((n - 1) * dl - 2 * p + s * (o - 1) + 1)
            for x, n, dl, p, s, o in zip(input.shape[2:], weight.shape[2:], dilation[-k:],
                                         padding[-k:], stride[-k:], gO.shape[2:]))
        gI = _apply(ROWS["_convolution_transpose3d" if k == 3 else "_convolution_transpose2d"],
                    (gO, ggW, None),
                    (stride, padding, out_pad, dilation, groups))
    return ggO, gI, gW


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


def _embedding_sparse_grad(g, weight_shape, indices, padding_idx):
    """torch's embedding_sparse_backward: one entry per looked-up index (int64, in order, those
    equal to padding_idx left out), its value the gradient's row (a copy, marked contiguous or
    not as torch's view of the gradient would be); not coalesced."""
    if isinstance(g, Tensor) and g.requires_grad:  # (create_graph: torch's sparse constructor
        raise NotImplementedError(  # records SparseCooTensorWithDimsAndTensorsBackward0)
            "embedding(sparse=True): a differentiable sparse gradient (create_graph=True) is "
            "not implemented in nbgrad")
    ga = g._data if isinstance(g, Tensor) else g
    flat = indices.reshape(-1).astype(np.int64)
    vals = ga.reshape((len(flat), weight_shape[1]))
    contiguous = bool(vals.flags.c_contiguous)  # (torch's values view the gradient: reshape)
    if padding_idx is not None and padding_idx >= 0:
        keep = flat != padding_idx
        flat, vals, contiguous = flat[keep], vals[_xp(vals).asarray(keep)], True
    return SparseCOO._of(flat[None, :], vals.copy(), weight_shape, contiguous=contiguous)


def _embedding_double(gg, indices, padding_idx, xp):
    """PyTorch's embedding_dense_double_backward: gg's rows at the indices (index_select), zero
    at padding_idx (masked_fill), viewed as (*indices.shape, D)."""
    flat = indices.reshape(-1)
    size = tuple(indices.shape) + (-1,)
    if xp is not TENSORS:
        out = gg[flat]
        if padding_idx is not None and padding_idx >= 0:
            out[flat == padding_idx] = 0
        return out.reshape(size)
    out = gg.index_select(0, Tensor._make_fresh(flat))
    if padding_idx is not None and padding_idx >= 0:
        out = xp.masked_fill(out, (flat == padding_idx)[:, None], 0)
    return out.view(size)


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
