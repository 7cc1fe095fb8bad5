"""Activations: ReLU, LeakyReLU, GELU, Tanh, Sigmoid, Softmax, LogSoftmax
(mirrors ``torch.nn.modules.activation``; MultiheadAttention also lives here, as in torch).
"""

import nbgrad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module
from .utils import _factory

__all__ = ["ReLU", "LeakyReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax",
           "MultiheadAttention"]


class ReLU(Module):
    """max(x, 0) elementwise (mirrors ``torch.nn.ReLU``)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.relu_() if self.inplace else input.relu()

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x if x > 0 else negative_slope * x (mirrors ``torch.nn.LeakyReLU``)."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """Gaussian error linear unit (mirrors ``torch.nn.GELU``; approximate "none" or "tanh")."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """tanh elementwise (mirrors ``torch.nn.Tanh``)."""

    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    """1 / (1 + exp(-x)) elementwise (mirrors ``torch.nn.Sigmoid``)."""

    def forward(self, input):
        return input.sigmoid()


class Softmax(Module):
    """Softmax along ``dim`` (mirrors ``torch.nn.Softmax``)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along ``dim`` (mirrors ``torch.nn.LogSoftmax``)."""

    def forward(self, input):
        return F.log_softmax(input, self.dim)


class MultiheadAttention(Module):
    """Multi-head attention (mirrors ``torch.nn.MultiheadAttention``).

    ``out = concat(head_1..head_h) W_o^T + b_o``, ``head_i = softmax(q_i k_i^T / sqrt(d)) v_i``
    with q, k, v the input projections split into ``num_heads`` heads of
    ``d = embed_dim // num_heads`` features.

    Args:
        embed_dim (int), num_heads (int): embed_dim must be divisible by num_heads.
        dropout (float): dropout on the attention weights, in training.
        bias (bool): in_proj_bias and out_proj.bias.
        add_bias_kv (bool): learnt bias_k, bias_v (1, 1, E) appended to the keys and values.
        add_zero_attn (bool): a zero key and value appended.
        kdim, vdim (int, optional): features of key and value (default embed_dim); when they
            differ from embed_dim, separate q_proj_weight, k_proj_weight, v_proj_weight
            replace in_proj_weight.
        batch_first (bool): inputs and output (N, L, E) instead of (L, N, E).

    Attributes:
        in_proj_weight (3E, E), xavier_uniform_; in_proj_bias (3E,) zeros;
        out_proj: NonDynamicallyQuantizableLinear(E, E), its bias zeros.

    Raises:
        ValueError / AssertionError: bad sizes, with torch's texts.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                f"and num_heads={num_heads} instead")
        super().__init__()
        kw = _factory(device, dtype)
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(nbgrad.empty((3 * embed_dim, embed_dim), **kw))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(nbgrad.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(nbgrad.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(nbgrad.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(nbgrad.empty((3 * embed_dim,), **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(nbgrad.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(nbgrad.empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query (Tensor): (L, N, E) — (N, L, E) with batch_first — or unbatched (L, E).
            key (Tensor): (S, N, kdim); value (Tensor): (S, N, vdim) (or batch first/unbatched).
            key_padding_mask (Tensor, optional): (N, S), bool (True = ignore that key) or float.
            need_weights (bool): also return the attention weights.
            attn_mask (Tensor, optional): (L, S) or (N * num_heads, L, S), bool (True = not
                allowed) or float (added to the scores).
            average_attn_weights (bool): average the weights over heads.
            is_causal (bool): a hint that attn_mask is the causal mask.

        Returns:
            (Tensor, Tensor | None): output like ``query``; weights (N, L, S) averaged or
            (N, num_heads, L, S), or None when ``need_weights`` is False.

        Raises:
            AssertionError: the query's last dim is not embed_dim (``was expecting embedding
                dimension of 6, but got 5``) or other shape mismatches, with torch's texts.
        """
        batched = query.ndim == 3
        if self.batch_first and batched:
            # keep the identities that choose the packed projection (query is key is value)
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = query.transpose(1, 0), key.transpose(1, 0)
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        separate = not self._qkv_same_embed_dim
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and batched:
            out = out.transpose(1, 0)
        return out, weights
