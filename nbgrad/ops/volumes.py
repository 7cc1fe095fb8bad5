"""Rows: the 3-D layers PyTorch records as one node (ConvolutionBackward0 of conv3d,
MaxPool3DWithIndicesBackward0), with their array kernels written once for any number of spatial
dims over a strided window view (N, C, *out, *kernel) of the padded input.

Under create_graph their backward is recorded from rows, as the 2-D ones in formulas.py: the
convolution as an im2col gather and batched matmuls, the pool as one accumulating index_put_.
The average and adaptive 3-D pools are linear maps: rows of nn.py's ``_linear_map``
kind (AvgPool3DBackward0, AdaptiveAvgPool3DBackward0), built in nn/functional/pooling3d.py.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..backend import get_array_module as _xp
from .formulas import TENSORS
from .kernels import pool_out_size
from .registry import op


def _window_view(a, kernel, stride, dilation, out):
    """(N, C, *S) padded array -> strided view (N, C, *out, *kernel) of its windows."""
    st = a.strides
    sp = st[2:]
    shape = a.shape[:2] + tuple(out) + tuple(kernel)
    strides = st[:2] + tuple(s * t for s, t in zip(stride, sp)) + tuple(
        d * t for d, t in zip(dilation, sp))
    return _xp(a).lib.stride_tricks.as_strided(a, shape, strides)  # read only


def _pad(x, lo, hi, fill):
    xp = _xp(x)
    if not any(lo) and not any(hi):
        return x
    out = xp.full(x.shape[:2] + tuple(n + a + b for n, a, b in zip(x.shape[2:], lo, hi)), fill,
                  x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(a, a + n) for a, n in zip(lo, x.shape[2:]))] = x
    return out


def conv_nd_forward(x, w, b, stride, padding, dilation, groups):
    """y = convNd(x, w, b): x (N, C, *S), w (O, C/groups, *k); returns (y, ctx)."""
    xp = _xp(x)
    k = w.shape[2:]
    out = tuple((n + 2 * p - d * (kk - 1) - 1) // s + 1
                for n, kk, s, p, d in zip(x.shape[2:], k, stride, padding, dilation))
    xpad = _pad(x, padding, padding, 0)
    win = _window_view(xpad, k, stride, dilation, out)
    nd, og, cg = len(k), w.shape[0] // groups, w.shape[1]
    red = [1] + list(range(2 + nd, 2 + 2 * nd))
    parts = [xp.tensordot(win[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og], (red, [1] + list(
        range(2, 2 + nd)))) for g in range(groups)]  # each (N, *out, og)
    y = xp.concatenate(parts, -1) if groups > 1 else parts[0]
    if b is not None:
        y = y + b
    y = xp.ascontiguousarray(xp.moveaxis(y, -1, 1))
    return y, (xpad.shape, out)


def conv_nd_backward(gy, x, w, ctx, stride, padding, dilation, groups, needs):
    """(grad input, grad weight, grad bias) of :func:`conv_nd_forward` for upstream gy."""
    xp = _xp(gy)
    pad_shape, out = ctx
    k, nd = w.shape[2:], len(w.shape) - 2
    og, cg = w.shape[0] // groups, w.shape[1]
    sp = list(range(2, 2 + nd))
    gx = gw = gb = None
    if needs[0]:
        gxp = xp.zeros(pad_shape, gy.dtype)
        for off in itertools.product(*(range(kk) for kk in k)):
            region = tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                           for o, d, s, n in zip(off, dilation, stride, out))
            for g in range(groups):
                wg = w[(slice(g * og, (g + 1) * og), slice(None)) + off]  # (og, cg)
                part = xp.tensordot(gy[:, g * og:(g + 1) * og], wg, ([1], [0]))  # (N, *out, cg)
                gxp[(slice(None), slice(g * cg, (g + 1) * cg)) + region] += xp.moveaxis(part, -1, 1)
        gx = gxp[(slice(None), slice(None)) + tuple(
            slice(p, p + n) for p, n in zip(padding, x.shape[2:]))]
        gx = xp.ascontiguousarray(gx)
    if needs[1]:
        win = _window_view(_pad(x, padding, padding, 0), k, stride, dilation, out)
        gw = xp.concatenate([xp.tensordot(
            gy[:, g * og:(g + 1) * og], win[:, g * cg:(g + 1) * cg], ([0] + sp, [0] + sp))
            for g in range(groups)], 0) if groups > 1 else xp.tensordot(gy, win, ([0] + sp,
                                                                             [0] + sp))
        gw = gw.astype(w.dtype, copy=False)
    if len(needs) > 2 and needs[2]:
        gb = gy.sum(axis=tuple([0] + sp))
    return gx, gw, gb


def max_pool_nd_forward(x, kernel, stride, padding, dilation, ceil_mode):
    """Max over windows with -inf padding, torch's choice of maximum (the first in raster order,
    the last NaN): returns ((y, int64 flat spatial indices), ctx). An unbatched (C, *spatial)
    input is pooled as it is (as torch's kernel: one node, no unsqueeze)."""
    if x.ndim == len(kernel) + 1:
        (y, flat), _ = max_pool_nd_forward(x[None], kernel, stride, padding, dilation, ceil_mode)
        return (y[0], flat[0]), flat[0]
    xp = _xp(x)
    spatial = x.shape[2:]
    out = tuple(pool_out_size(n, kk, s, p, d, ceil_mode)
                for n, kk, s, p, d in zip(spatial, kernel, stride, padding, dilation))
    hi = tuple(max(p, (o - 1) * s + d * (kk - 1) + 1 - n - p)
               for n, kk, s, p, d, o in zip(spatial, kernel, stride, padding, dilation, out))
    xpad = _pad(x, padding, hi, -np.inf)
    kk = int(np.prod(kernel))
    win = _window_view(xpad, kernel, stride, dilation, out).reshape(x.shape[:2] + out + (kk,))
    choice = xp.argmax(win, -1)
    nans = xp.isnan(win)
    if nans.any():
        last_nan = kk - 1 - xp.argmax(nans[..., ::-1], -1)
        choice = xp.where(nans.any(-1), last_nan, choice)
    y = xp.take_along_axis(win, choice[..., None], -1)[..., 0]
    # the flat index into the input's spatial dims of each chosen element
    flat = xp.zeros(choice.shape, np.int64)
    rest = choice
    coords = []
    for kd in reversed(kernel):
        coords.append(rest % kd)
        rest = rest // kd
    coords.reverse()
    for i, (c, s, p, d, n) in enumerate(zip(coords, stride, padding, dilation, spatial)):
        pos = xp.arange(out[i]).reshape((-1,) + (1,) * (len(out) - 1 - i)) * s - p + c * d
        flat = flat * n + pos
    return (xp.ascontiguousarray(y), flat), flat


def max_pool_nd_backward(gy, flat, self_shape, nd=3):
    """The gradient of :func:`max_pool_nd_forward` (`nd` spatial dims): gy added at each chosen
    element."""
    xp = _xp(gy)
    lead = int(np.prod(self_shape[:-nd]))
    gx = xp.zeros((lead, int(np.prod(self_shape[-nd:]))), gy.dtype)
    rows = xp.arange(lead).reshape(-1, 1)
    xp.add.at(gx, (rows, flat.reshape(lead, -1)), gy.reshape(lead, -1))
    return gx.reshape(self_shape)


def _im2col_index(c, spatial, kernel, stride, padding, dilation):
    """(C*prod(kernel), prod(out)) positions into a flattened (C*prod(spatial) + 1) input;
    padding reads the last (zero) element. The N-d form of formulas.py's 2-D index."""
    nd = len(spatial)
    out = [(n + 2 * p - d * (k - 1) - 1) // s + 1
           for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation)]
    flat, inside = np.zeros((1,) * (2 * nd), np.int64), np.ones((1,) * (2 * nd), bool)
    for i, (n, k, s, p, d, o) in enumerate(zip(spatial, kernel, stride, padding, dilation, out)):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = k, o
        pos = (np.arange(k) * d).reshape(shape[:i + 1] + [1] * (2 * nd - i - 1)) + (
            np.arange(o) * s - p).reshape([1] * (nd + i) + [o] + [1] * (nd - i - 1))
        inside = inside & (pos >= 0) & (pos < n)
        flat = flat * n + pos
    size = int(np.prod(spatial))
    chan = np.arange(c).reshape((c,) + (1,) * (2 * nd)) * size
    idx = np.where(inside[None], chan + flat[None], c * size)
    return idx.reshape(c * int(np.prod(kernel)), int(np.prod(out))), tuple(out)


def _conv_nd_tensor_grads(g, input, weight, stride, padding, dilation, groups, needs):
    """Under create_graph: the convolution as im2col by an index gather and a batched matmul,
    differentiated by hand (as formulas.py's 2-D conv2d_backward): each step is a row of the
    table, so the result is differentiable again (torch: ConvolutionBackwardBackward0)."""
    n, c, spatial = input.shape[0], input.shape[1], tuple(input.shape[2:])
    o, cg, kernel = weight.shape[0], weight.shape[1], tuple(weight.shape[2:])
    idx, out = _im2col_index(c, spatial, kernel, stride, padding, dilation)
    size, ck, length = int(np.prod(spatial)), cg * int(np.prod(kernel)), int(np.prod(out))
    gy = g.reshape(n, groups, o // groups, length)
    gx = gw = gb = None
    if needs[1]:
        flat = input.new_zeros((n, c * size + 1)).index_put_(
            (slice(None), slice(0, c * size)), input.reshape(n, c * size))
        cols = flat[:, idx].reshape(n, groups, ck, length)
        gw = (gy @ cols.swapaxes(-1, -2)).sum(0).reshape(tuple(weight.shape))
    if needs[0]:
        w2 = weight.reshape(groups, o // groups, ck)
        gcols = (w2.swapaxes(-1, -2) @ gy).reshape(n, c * int(np.prod(kernel)), length)
        gflat = input.new_zeros((n, c * size + 1)).index_put_(
            (slice(None), idx), gcols, accumulate=True)
        gx = gflat[:, :c * size].reshape(tuple(input.shape))
    if len(needs) > 2 and needs[2]:
        gb = g.sum(tuple([0] + list(range(2, 2 + len(kernel)))))
    return gx, gw, gb


def _conv_nd_grads(g, input, weight, ctx, stride, padding, dilation, groups, needs, xp):
    if xp is TENSORS:  # PyTorch's convolution_backward (ConvolutionBackwardBackward0), nn.py's
        gi, gw, gb = xp.row("convolution_backward", (g, input, weight),
                            (stride, padding, dilation, groups))
        return (gi if needs[0] else None, gw if needs[1] else None,
                gb if len(needs) > 2 and needs[2] else None)
    return conv_nd_backward(g, input, weight, ctx.get(), stride, padding, dilation, groups, needs)


def conv_nd_all_grads(g, x, w, stride, padding, dilation, groups):
    """convolution_backward's forward on N-d arrays: the (input, weight, bias) gradients."""
    _, ctx = conv_nd_forward(x, w, None, stride, padding, dilation, groups)
    return conv_nd_backward(g, x, w, ctx, stride, padding, dilation, groups, (True, True, True))


def conv_transpose_nd_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    """The transposed convolution (conv_nd's input gradient of x, to the size output_padding
    picks): y (N, C/groups * groups, *size)."""
    xp = _xp(x)
    size = tuple((o - 1) * s - 2 * p + d * (k - 1) + 1 + op for o, k, s, p, op, d in zip(
        x.shape[2:], w.shape[2:], stride, padding, output_padding, dilation))
    c = w.shape[1] * groups
    pad_shape = (x.shape[0], c) + tuple(n + 2 * p for n, p in zip(size, padding))
    like = xp.broadcast_to(xp.zeros((), x.dtype), (x.shape[0], c) + size)
    y = conv_nd_backward(x, like, w, (pad_shape, tuple(x.shape[2:])), stride, padding, dilation,
                         groups, (True, False))[0]
    return y if b is None else y + b.reshape((1, -1) + (1,) * len(size))


def _conv_transpose_nd_grads(g, x, w, stride, padding, dilation, groups, needs, xp):
    """The transposed convolution's adjoint in its input is the convolution itself; its weight
    gradient is that convolution's, of g with x as the upstream gradient."""
    gx = gw = gb = None
    if xp is TENSORS:
        if needs[0]:
            gx = xp.row("_convolution3d", (g, w, None), (stride, padding, dilation, groups))
        if needs[1]:
            gw = _conv_nd_tensor_grads(x, g, w, stride, padding, dilation, groups,
                                       (False, True))[1]
    else:
        y, ctx = conv_nd_forward(g, w, None, stride, padding, dilation, groups)
        gx = y if needs[0] else None
        if needs[1]:
            gw = conv_nd_backward(x, g, w, ctx, stride, padding, dilation, groups,
                                  (False, True))[1]
    if len(needs) > 2 and needs[2]:
        gb = g.sum((0, 2, 3, 4))
    return gx, gw, gb


op("_convolution3d", lambda input, weight, bias, stride, padding, dilation, groups:
   conv_nd_forward(input, weight, bias, stride, padding, dilation, groups),
   node="ConvolutionBackward0", ctx=True,
   **{"input, weight, bias": lambda g, input, weight, ctx, stride, padding, dilation, groups,
      needs, xp: _conv_nd_grads(g, input, weight, ctx, stride, padding, dilation, groups,
                                needs, xp)})
# the transposed 3-D convolution (ConvolutionBackward0, as torch records it): under create_graph
# the input's part of convolution_backward's derivative (_convolution_double_backward)
op("_convolution_transpose3d", lambda input, weight, bias, stride, padding, output_padding,
   dilation, groups: conv_transpose_nd_forward(input, weight, bias, stride, padding,
                                               output_padding, dilation, groups),
   node="ConvolutionBackward0",
   **{"input, weight, bias": lambda g, input, weight, stride, padding, dilation, groups, needs,
      xp: _conv_transpose_nd_grads(g, input, weight, stride, padding, dilation, groups, needs,
                                   xp)})
# saves self, as PyTorch's node; under create_graph its gradient is PyTorch's backward op
# max_pool3d_with_indices_backward as a row (MaxPool3DWithIndicesBackwardBackward0 of
# grad_output and self): max_pool_double_backward in grad_output, zeros in self
op("max_pool3d_with_indices", lambda self, kernel_size, stride, padding, dilation, ceil_mode:
   max_pool_nd_forward(self, kernel_size, stride, padding, dilation, ceil_mode),
   node="MaxPool3DWithIndicesBackward0", ctx=True, n_out=2,
   self=lambda g, self, ctx, xp: xp.row("max_pool3d_with_indices_backward", (g[0], self), (
       ctx.get(),)) if xp is TENSORS else max_pool_nd_backward(g[0], ctx.get(), self.shape))
op("max_pool3d_with_indices_backward", lambda grad_output, self, indices: max_pool_nd_backward(
    grad_output, indices, self.shape), node="MaxPool3DWithIndicesBackwardBackward0",
   grad_output=lambda g, indices, xp: max_pool_double(g, indices, 3, xp),
   self=lambda g, self, xp: xp.zeros_like(self))


def max_pool_double(g, indices, nd, xp):
    """PyTorch's max_pool_double_backward: g (made contiguous) viewed (*lead, -1), gathered at
    the flat spatial indices, viewed as the indices."""
    lead = tuple(indices.shape[:-nd]) + (-1,)
    if xp is TENSORS:
        g = g.contiguous().view(lead)
    else:
        g = g.reshape(lead)
    return xp.gather(g, -1, indices.reshape(lead)).reshape(tuple(indices.shape))
