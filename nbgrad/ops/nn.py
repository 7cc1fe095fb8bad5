"""Rows: the layers PyTorch records as one node — activations over a dim (softmax,
log_softmax), convolution, pooling; losses and normalizations go here too.

The array kernels (im2col, window views, all conv/pool geometry) are in kernels.py; a kernel's
forward returns what its backward needs, kept in a `Ctx` released with the node.
Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import numpy as np

from .formulas import _conv_grads, _pool_grad
from .reductions import _logsumexp
from .registry import op

# ---- over a dim -------------------------------------------------------------------------------
op("softmax", lambda self, dim: _softmax(self, dim), float_op=True,
   self=lambda g, result, dim: result * (g - (g * result).sum(axis=dim, keepdims=True)))
op("log_softmax", lambda self, dim: self - _logsumexp(self, dim, True), float_op=True,
   self=lambda g, result, dim, xp: g - xp.exp(result) * g.sum(axis=dim, keepdims=True))

# ---- convolution and pooling ------------------------------------------------------------------
op("convolution", lambda input, weight, bias, ctx: None,
   **{"input, weight, bias": lambda g, input, weight, ctx, needs, xp: _conv_grads(g, ctx, needs,
                                                                                  xp)})
op("max_pool2d", lambda self, ctx: None, node="MaxPool2DWithIndicesBackward0",
   self=lambda g, self, ctx, xp: _pool_grad(g, ctx, xp))


def _softmax(a, dim):
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return e
