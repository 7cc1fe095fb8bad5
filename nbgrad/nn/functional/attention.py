"""Attention: scaled_dot_product_attention and multi_head_attention_forward (the function
behind nn.MultiheadAttention), with PyTorch's checks of masks and shapes.
"""
import math

import numpy as np

from nbgrad import creation
from nbgrad import dtypes
from nbgrad import functions
from nbgrad import backend
from nbgrad.autograd.apply import apply
from nbgrad.ops import ROWS
from .common import _const
from .linear import linear
from .activation import dropout
from .conv import pad


_C_TYPE = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
           "int32": "int", "bool": "bool"}


def _c_type(dtype):
    """torch's C++ name of a dtype, as its attention errors print it (float, double, ...)."""
    name = str(dtype).rsplit(".", 1)[-1]
    return _C_TYPE.get(name, name)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(q k^T * scale + mask) v`` (mirrors ``F.scaled_dot_product_attention``).

    Where torch's CPU kernel runs — 4-D inputs with the same (N, heads), no dropout, a mask that
    needs no gradient — one ``ScaledDotProductFlashAttentionForCpuBackward0`` node, as torch;
    otherwise torch's math path: matmul, softmax, dropout, matmul.

    Args:
        query (Tensor): (..., L, E).
        key (Tensor): (..., S, E).
        value (Tensor): (..., S, Ev).
        attn_mask (Tensor, optional): broadcastable to (..., L, S): bool (True = may attend)
            or float (added to the scores).
        dropout_p (float): dropout on the attention weights (always applied when > 0).
        is_causal (bool): query i attends to keys 0..i only (top-left aligned); not together
            with ``attn_mask``.
        scale (float, optional): defaults to 1 / sqrt(E).
        enable_gqa (bool): grouped-query attention: key/value heads (dim -3) are repeated to
            the query's number of heads.

    Returns:
        Tensor: (..., L, Ev). A query row that may attend to nothing gives zeros (and zero
        gradients), as torch, not NaN.

    Raises:
        RuntimeError: different dtypes, a mask of another dtype, or mismatched sizes, naming
            the shapes received.
    """
    q, k, v = query, key, value
    if not q.dtype == k.dtype == v.dtype:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_c_type(q.dtype)} key.dtype: {_c_type(k.dtype)} and value.dtype: "
            f"{_c_type(v.dtype)} instead.")
    if attn_mask is not None and attn_mask.dtype != dtypes.bool_ \
            and not attn_mask.dtype.is_floating_point:
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {_c_type(attn_mask.dtype)} and  query.dtype: "
            f"{_c_type(q.dtype)} instead.")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2 or k.shape[-1] != q.shape[-1] \
            or k.shape[-2] != v.shape[-2]:
        why = ""
        if q.ndim >= 2 and k.ndim >= 2 and k.shape[-1] != q.shape[-1]:  # torch's bmm's text
            b = int(np.prod(q.shape[:-2]))
            why = (f". Expected size for first two dimensions of batch2 tensor to be: "
                   f"{[b, q.shape[-1]]} but got: {[int(np.prod(k.shape[:-2])), k.shape[-1]]}.")
        raise RuntimeError(
            "scaled_dot_product_attention: expected query (..., L, E), key (..., S, E) and "
            f"value (..., S, Ev), got query {tuple(q.shape)}, key {tuple(k.shape)} and value "
            f"{tuple(v.shape)}{why}")
    groups = 1
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hq % hk or v.shape[-3] != hk:
            raise RuntimeError(
                f"scaled_dot_product_attention: with enable_gqa the query's {hq} heads must be "
                f"a multiple of the key's and value's, got {hk} and {v.shape[-3]}")
        groups = hq // hk
    if is_causal and attn_mask is not None:  # torch's math path (the one with gradients)
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    n_q, n_k = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    # the additive mask: bool masks and causality as 0 / -inf constants
    xp = backend.get_array_module(q._data)
    blocked = xp.triu(xp.ones((n_q, n_k), dtype=bool), 1) if is_causal else None
    float_mask = None
    if attn_mask is not None:
        if attn_mask.dtype == dtypes.bool_:
            blocked = ~attn_mask._data
        else:
            float_mask = attn_mask
    dt = q._data.dtype
    add = None if blocked is None else xp.where(blocked, -np.inf, 0.0).astype(dt)
    if (q.ndim == 4 and q.shape[:1] == k.shape[:1] == v.shape[:1] and k.shape[1] == v.shape[1]
            and v.shape[-1] == q.shape[-1] and dropout_p == 0.0
            and (float_mask is None or not float_mask.requires_grad)):
        # torch's CPU kernel: one node (the mask is a constant of the node); rows with nothing
        # to attend to give zeros
        if float_mask is not None:
            fm = float_mask._data.astype(dt)
            add = fm if add is None else add + fm
        dead = None
        if add is not None:
            dead = backend.get_array_module(add).isneginf(add).all(-1, keepdims=True)
            if dead.any():
                add = np.where(dead, np.zeros((), dt), add)
            else:
                dead = None
        return apply(ROWS["scaled_dot_product_flash_attention_for_cpu"], (q, k, v),
                     (add, dead, scale, groups))
    # torch's math path: matmul, mask, safe softmax (a fully masked row gives zeros), dropout
    if groups > 1:  # repeat_interleave of the key/value heads, as torch spells it
        k, v = (t.unsqueeze(-3).expand(*t.shape[:-2], groups, *t.shape[-2:]).contiguous()
                .view(*t.shape[:-3], q.shape[-3], *t.shape[-2:]) for t in (k, v))
    root = math.sqrt(scale)  # torch's math path scales q and k^T by sqrt(scale) each
    scores = (q * root).matmul(k.transpose(-2, -1) * root)
    if add is not None:
        scores = scores + _const(add)
    if float_mask is not None:
        scores = scores + float_mask
    attn = functions._safe_softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return attn.matmul(v)


def _float_mask(mask, name, dtype, other=None, other_name=""):
    """torch's _canonical_mask: a bool mask (True = blocked) becomes 0 / -inf of ``dtype``;
    warns, as torch, when ``other`` (the mask it is combined with) has another dtype."""
    if mask is None:
        return None
    if mask.dtype != dtypes.bool_ and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other is not None and other.dtype != mask.dtype:
        import warnings
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same "
                      "type for both instead.", stacklevel=3)
    if mask.dtype == dtypes.bool_:
        return _const(np.where(mask._data, -np.inf, 0.0).astype(dtypes.to_np(dtype)))
    return mask


def _mha_check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads):
    """torch's checks of the ranks (texts as torch's); returns whether the input is batched."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.ndim}-D query tensor")
    batched = query.ndim == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(
            f"For {kind} `query`, expected `key` and `value` to be {query.ndim}-D but found "
            f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(
            f"For {kind} `query`, expected `key_padding_mask` to be `None` or "
            f"{query.ndim - 1}-D but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(
                f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                f"{attn_mask.ndim}-D tensor instead")
        if not batched and attn_mask.ndim == 3:
            want = (num_heads, query.shape[0], key.shape[0])
            if tuple(attn_mask.shape) != want:
                raise AssertionError(f"Expected `attn_mask` shape to be {want} but got "
                                     f"{attn_mask.shape}")
    return batched


def _split_heads(x, n):
    """(L, N, n * E) projections packed on the last dim -> n tensors (L, N, E), torch's way."""
    e = x.shape[-1] // n
    x = x.unflatten(-1, (n, e)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    return [x[i] for i in range(n)]


def _in_projection(query, key, value, w, b, w_q=None, w_k=None, w_v=None):
    """q, k, v projections: one packed weight (3E, E) or three separate ones (torch's)."""
    e = query.shape[-1]
    bs = (None,) * 3 if b is None else b.chunk(3)
    if w_q is not None:
        return linear(query, w_q, bs[0]), linear(key, w_k, bs[1]), linear(value, w_v, bs[2])
    if key is value:
        if query is key:
            return _split_heads(linear(query, w, b), 3)
        w_q, w_kv = w.split([e, 2 * e])
        b_q, b_kv = (None, None) if b is None else b.split([e, 2 * e])
        return [linear(query, w_q, b_q)] + _split_heads(linear(key, w_kv, b_kv), 2)
    w_q, w_k, w_v = w.chunk(3)
    return linear(query, w_q, bs[0]), linear(key, w_k, bs[1]), linear(value, w_v, bs[2])


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention (mirrors ``F.multi_head_attention_forward``; see
    :class:`nbgrad.nn.MultiheadAttention`).

    Args:
        query (Tensor): (L, N, E) or unbatched (L, E).
        key, value (Tensor): (S, N, E_k), (S, N, E_v) (or unbatched).
        key_padding_mask (Tensor, optional): (N, S): bool (True = ignore that key) or float
            (added).
        attn_mask (Tensor, optional): (L, S) or (N * num_heads, L, S): bool (True = blocked)
            or float (added).
        need_weights (bool): also return the attention weights (N, num_heads, L, S), averaged
            over heads with ``average_attn_weights``; otherwise the attention goes through
            :func:`scaled_dot_product_attention`.
        is_causal (bool): a hint that ``attn_mask`` is causal (it must still be given).

    Returns:
        (Tensor, Tensor | None): output (L, N, E) and the weights or None.

    Raises:
        AssertionError / RuntimeError: torch's checks, with its texts.
    """
    batched = _mha_check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _float_mask(key_padding_mask, "key_padding_mask", query.dtype,
                                   attn_mask, "attn_mask")
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
            "module method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the scaled_dot_product_attention below builds it
    else:
        attn_mask = _float_mask(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        shape = tuple(query.shape) if batched else (query.shape[0], query.shape[2])
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim} "
            f"(multi-head attention: expected query of size (L, N, {embed_dim_to_check}) or "
            f"(L, {embed_dim_to_check}), got {shape})")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
        q, k, v = _in_projection(query, key, value, None, in_proj_bias, q_proj_weight,
                                 k_proj_weight, v_proj_weight)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape "
                                 f"{value.shape}")
        q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        want = (tgt_len, src_len) if attn_mask.ndim == 2 else (bsz * num_heads, tgt_len, src_len)
        if tuple(attn_mask.shape) != want:
            raise RuntimeError(f"The shape of the {attn_mask.ndim}D attn_mask is "
                               f"{attn_mask.shape}, but should be {want}.")
        if attn_mask.ndim == 2:
            attn_mask = attn_mask.unsqueeze(0)
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key.")
        k = functions.cat([k, bias_k.repeat(1, bsz, 1)])
        v = functions.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None
                             else "bias_v is set but bias_k is None")
    q = q.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = static_k if static_k is not None else \
        k.view(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = static_v if static_v is not None else \
        v.view(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        zeros = creation.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = functions.cat([k, zeros], 1), functions.cat([v, zeros], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(
                f"Expected key_padded_mask.shape to be ({bsz}, {src_len}), but got "
                f"{tuple(key_padding_mask.shape)} (key_padding_mask is (N, S))")
        kpm = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1) \
            .reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        q_scaled = q * math.sqrt(1.0 / float(head_dim))
        scores = q_scaled.bmm(k.transpose(-2, -1))  # torch: baddbmm(attn_mask, ...)
        if attn_mask is not None:
            scores = attn_mask + scores
        weights = scores.softmax(-1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = weights.bmm(v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, embed_dim)
        weights = weights.view(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, embed_dim)
    return (out if batched else out.squeeze(1)), None
