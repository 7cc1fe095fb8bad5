"""Scaled dot-product attention: torch's CPU flash kernel as one row (its node
ScaledDotProductFlashAttentionForCpuBackward0), its backward recomputing the weights, and that
backward's own row, which refuses a second derivative as torch's does."""
from __future__ import annotations

from ..autograd.apply import apply as _apply
from ..backend import get_array_module as _xp
from .formulas import TENSORS
from .reductions import _refuse
from .registry import ROWS, op

# bias: the additive mask (0 / -inf / float values), broadcastable to (..., L, S), or None;
# dead: (..., L, 1) rows with nothing to attend to (their bias zeroed), which give zeros
# groups: query heads per key/value head (grouped-query attention; 1 otherwise)
op("scaled_dot_product_flash_attention_for_cpu",
   lambda query, key, value, bias, dead, scale, groups: _like(query, _sdpa_probs(
       query, key, bias, dead, scale, groups, _xp(query)) @ _heads(value, groups, _xp(query))),
   node="ScaledDotProductFlashAttentionForCpuBackward0",
   # `result`: saved as torch's kernel saves its output (a write into it fails backward)
   **{"query, key, value": lambda g, query, key, value, bias, dead, scale, groups, result,
      needs, xp: _sdpa_grads(g, query, key, value, bias, dead, scale, groups, needs, xp)})


def _like(query, out):
    """``out`` laid out in memory as ``query`` is, as torch's kernel writes it: the usual
    ``out.transpose(1, 2).reshape(N, L, H * E)`` after heads split by a view is then a view."""
    res = _xp(query).empty_like(query)  # numpy keeps query's stride order
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


# torch's flash kernel has no derivative of its backward: a gradient taken with create_graph is
# recorded as a NotImplemented node, which refuses the second backward with torch's text
op("scaled_dot_product_flash_attention_for_cpu_backward",
   lambda grad_out, query, key, value, bias, dead, scale, groups: _sdpa_grads(
       grad_out, query, key, value, bias, dead, scale, groups, (True,) * 3, _xp(query)),
   node="NotImplemented", n_out=3,
   **{"grad_out, query, key, value": lambda g: _refuse(
       "_scaled_dot_product_flash_attention_for_cpu_backward", RuntimeError)(g)})


def _sdpa_grads(g, q, k, v, bias, dead, scale, groups, needs, xp):
    """dq, dk, dv of softmax(q k^T * scale + bias) v; the weights are recomputed, not saved."""
    if xp is TENSORS:
        grads = _apply(ROWS["scaled_dot_product_flash_attention_for_cpu_backward"],
                       (g, q, k, v), (bias, dead, scale, groups))
        return tuple(d if need else None for d, need in zip(grads, needs))
    p = _sdpa_probs(q, k, bias, dead, scale, groups, xp)
    dp = g @ _heads(v, groups, xp).swapaxes(-2, -1)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale
    return (ds @ _heads(k, groups, xp) if needs[0] else None,
            _sum_heads(ds.swapaxes(-2, -1) @ q, groups) if needs[1] else None,
            _sum_heads(p.swapaxes(-2, -1) @ g, groups) if needs[2] else None)
