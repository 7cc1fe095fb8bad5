"""Rows: the layers PyTorch records as one node — activations over a dim (softmax,
log_softmax), convolution, pooling; losses and normalizations go here too.

The array kernels (im2col, window views, all conv/pool geometry) are in kernels.py; a kernel's
forward returns what its backward needs, kept in a `Ctx` released with the node.
Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import numpy as np

from . import kernels
from .reductions import _logsumexp
from .registry import op

# ---- over a dim -------------------------------------------------------------------------------
op("softmax", lambda self, dim: _softmax(self, dim), float_op=True,
   self=lambda g, result, dim: result * (g - (g * result).sum(axis=dim, keepdims=True)))
op("log_softmax", lambda self, dim: self - _logsumexp(self, dim, True), float_op=True,
   self=lambda g, result, dim, xp: g - xp.exp(result) * g.sum(axis=dim, keepdims=True))

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


def _softmax(a, dim):
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return e
