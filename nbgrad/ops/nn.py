"""Rows: the layers PyTorch records as one node — activations over a dim (softmax,
log_softmax), convolution, pooling; losses and normalizations go here too.

The array kernels (im2col, window views, all conv/pool geometry) are in kernels.py; a kernel's
forward returns what its backward needs, kept in a `Ctx` released with the node.
Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import numpy as np

from .formulas import _conv_grads, _first_dtype, _pool_grad, _zeros_for
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


# ---- recurrent gates: torch's RNN cells split their gates with unsafe_split ---------------------
# the pieces are copies, not views: a piece modified in place changes nothing else (torch's
# "unsafe" pieces share memory but are not tracked as views either)
op("unsafe_split", lambda self, sizes, dim: [np.ascontiguousarray(p) for p in np.split(
    self, np.cumsum(sizes)[:-1], axis=dim)], n_out=-1,
   self=lambda g, self_shape, sizes, dim, xp: xp.concatenate(_zeros_for(
       g, [tuple(n if i == dim else s for i, s in enumerate(self_shape)) for n in sizes],
       _first_dtype(g), xp), axis=dim))

# ---- attention --------------------------------------------------------------------------------
# bias: the additive mask (0 / -inf / float values), broadcastable to (..., L, S), or None;
# dead: (..., L, 1) rows with nothing to attend to (their bias zeroed), which give zeros
op("scaled_dot_product_flash_attention_for_cpu",
   lambda query, key, value, bias, dead, scale: _sdpa_probs(query, key, bias, dead, scale,
                                                            np) @ value,
   node="ScaledDotProductFlashAttentionForCpuBackward0",
   **{"query, key, value": lambda g, query, key, value, bias, dead, scale, needs, xp:
      _sdpa_grads(g, query, key, value, bias, dead, scale, needs, xp)})


def _sdpa_probs(q, k, bias, dead, scale, xp):
    s = (q @ k.swapaxes(-2, -1)) * scale
    if bias is not None:
        s = s + bias
    p = xp.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return p if dead is None else xp.where(dead, 0.0, p)


def _sdpa_grads(g, q, k, v, bias, dead, scale, needs, xp):
    """dq, dk, dv of softmax(q k^T * scale + bias) v; the weights are recomputed, not saved."""
    p = _sdpa_probs(q, k, bias, dead, scale, xp)
    dp = g @ v.swapaxes(-2, -1)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale
    return (ds @ k if needs[0] else None, ds.swapaxes(-2, -1) @ q if needs[1] else None,
            p.swapaxes(-2, -1) @ g if needs[2] else None)


def _softmax(a, dim):
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return e
