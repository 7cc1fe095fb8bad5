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
# attention's softmax: a row that is -inf throughout gives zeros (not nan), and zero gradients
op("_safe_softmax", lambda self, dim: _safe_softmax(self, dim), float_op=True,
   self=lambda g, result, dim: result * (g - (g * result).sum(axis=dim, keepdims=True)))

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
# groups: query heads per key/value head (grouped-query attention; 1 otherwise)
op("scaled_dot_product_flash_attention_for_cpu",
   lambda query, key, value, bias, dead, scale, groups: _like(query, _sdpa_probs(
       query, key, bias, dead, scale, groups, np) @ _heads(value, groups, np)),
   node="ScaledDotProductFlashAttentionForCpuBackward0",
   **{"query, key, value": lambda g, query, key, value, bias, dead, scale, groups, needs, xp:
      _sdpa_grads(g, query, key, value, bias, dead, scale, groups, needs, xp)})


def _like(query, out):
    """``out`` laid out in memory as ``query`` is, as torch's kernel writes it: the usual
    ``out.transpose(1, 2).reshape(N, L, H * E)`` after heads split by a view is then a view."""
    res = np.empty_like(query)  # numpy keeps query's stride order
    res[...] = out
    return res


def _heads(kv, groups, xp):
    """(N, Hk, S, E) -> (N, Hk * groups, S, E): each key/value head serves `groups` queries."""
    return kv if groups == 1 else xp.repeat(kv, groups, axis=-3)


def _sum_heads(g, groups):
    if groups == 1:
        return g
    return g.reshape(g.shape[:-3] + (g.shape[-3] // groups, groups) + g.shape[-2:]).sum(axis=-3)


def _sdpa_probs(q, k, bias, dead, scale, groups, xp):
    s = (q @ _heads(k, groups, xp).swapaxes(-2, -1)) * scale
    if bias is not None:
        s = s + bias
    p = xp.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return p if dead is None else xp.where(dead, 0.0, p)


def _sdpa_grads(g, q, k, v, bias, dead, scale, groups, needs, xp):
    """dq, dk, dv of softmax(q k^T * scale + bias) v; the weights are recomputed, not saved."""
    p = _sdpa_probs(q, k, bias, dead, scale, groups, xp)
    dp = g @ _heads(v, groups, xp).swapaxes(-2, -1)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale
    return (ds @ _heads(k, groups, xp) if needs[0] else None,
            _sum_heads(ds.swapaxes(-2, -1) @ q, groups) if needs[1] else None,
            _sum_heads(p.swapaxes(-2, -1) @ g, groups) if needs[2] else None)


def _safe_softmax(a, dim):
    m = a.max(axis=dim, keepdims=True)
    e = np.exp(a - np.where(np.isfinite(m), m, np.zeros((), m.dtype)))
    total = e.sum(axis=dim, keepdims=True)
    return e / np.where(total == 0, np.ones((), total.dtype), total)


def _softmax(a, dim):
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return e
