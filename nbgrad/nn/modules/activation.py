"""Activations (mirrors ``torch.nn.modules.activation``; MultiheadAttention also lives here,
as in torch). Each calls the ``nn.functional`` function of the same name; reprs are torch's.
"""

from nbgrad import creation
from nbgrad.autograd import grad_mode
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module
from .utils import _factory

__all__ = ["ReLU", "LeakyReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax",
           "Threshold", "Hardtanh", "ReLU6", "ELU", "SELU", "CELU", "SiLU", "Mish", "Softplus",
           "Softsign", "Hardswish", "Hardsigmoid", "Tanhshrink", "Hardshrink", "Softshrink",
           "LogSigmoid", "Softmin", "Softmax2d", "GLU", "PReLU",
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
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along ``dim`` (mirrors ``torch.nn.LogSoftmax``)."""

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)


def _inplace_str(inplace, first=False):
    return ("inplace=True" if first else ", inplace=True") if inplace else ""


class Threshold(Module):
    """``x if x > threshold else value`` (mirrors ``torch.nn.Threshold``)."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + _inplace_str(self.inplace)


class Hardtanh(Module):
    """Clamp to ``[min_val, max_val]`` (mirrors ``torch.nn.Hardtanh``).

    Raises:
        AssertionError: ``max_val <= min_val`` (at construction, as torch).
    """

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({max_val}) must be greater than min_val ({min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace_str(self.inplace)


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)`` (mirrors ``torch.nn.ReLU6``, a Hardtanh(0, 6))."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace, first=True)


class _AlphaActivation(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_str(self.inplace)


class ELU(_AlphaActivation):
    """``x if x > 0 else alpha (exp(x) - 1)`` (mirrors ``torch.nn.ELU``)."""

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)


class CELU(_AlphaActivation):
    """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))`` (mirrors ``torch.nn.CELU``)."""

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class _InplaceActivation(Module):
    """An activation whose only option is ``inplace``; ``_fn`` names the functional."""

    _fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return getattr(F, self._fn)(input, inplace=self.inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace, first=True)


class SELU(_InplaceActivation):
    """``scale * elu(x, alpha)``, self-normalising constants (mirrors ``torch.nn.SELU``)."""

    _fn = "selu"


class SiLU(_InplaceActivation):
    """``x * sigmoid(x)`` (mirrors ``torch.nn.SiLU``)."""

    _fn = "silu"


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))`` (mirrors ``torch.nn.Mish``)."""

    _fn = "mish"


class Hardswish(_InplaceActivation):
    """``x * relu6(x + 3) / 6`` (mirrors ``torch.nn.Hardswish``)."""

    _fn = "hardswish"


class Hardsigmoid(_InplaceActivation):
    """``relu6(x + 3) / 6`` (mirrors ``torch.nn.Hardsigmoid``)."""

    _fn = "hardsigmoid"


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold`` (mirrors torch.nn.Softplus)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class _Shrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def extra_repr(self):
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """``x if |x| > lambd else 0`` (mirrors ``torch.nn.Hardshrink``)."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Softshrink(_Shrink):
    """Shrink towards 0 by ``lambd`` (mirrors ``torch.nn.Softshrink``)."""

    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Softsign(Module):
    """``x / (1 + |x|)`` (mirrors ``torch.nn.Softsign``)."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """``x - tanh(x)`` (mirrors ``torch.nn.Tanhshrink``)."""

    def forward(self, input):
        return F.tanhshrink(input)


class LogSigmoid(Module):
    """``log(sigmoid(x))`` (mirrors ``torch.nn.LogSigmoid``)."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softmin(Softmax):
    """``softmax(-x)`` along ``dim`` (mirrors ``torch.nn.Softmin``)."""

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) (mirrors ``torch.nn.Softmax2d``).

    Raises:
        ValueError: input not 3-D or 4-D, naming the shape.
    """

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D "
                             f"instead (shape {tuple(input.shape)})")
        return F.softmax(input, -3)


class GLU(Module):
    """Gated linear unit along ``dim`` (mirrors ``torch.nn.GLU``)."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """``x if x > 0 else a x`` with learnt slopes ``a`` (mirrors ``torch.nn.PReLU``).

    Args:
        num_parameters (int): 1, or the number of channels (dim 1 of the input).
        init (float): the initial slope, 0.25.

    Attributes:
        weight: (num_parameters,), filled with ``init``.
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(creation.empty((num_parameters,), **_factory(device, dtype)))
        self.reset_parameters()

    def reset_parameters(self):
        with grad_mode.no_grad():
            self.weight.fill_(self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


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
            self.in_proj_weight = Parameter(creation.empty((3 * embed_dim, embed_dim), **kw))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(creation.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(creation.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(creation.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(creation.empty((3 * embed_dim,), **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(creation.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(creation.empty((1, 1, embed_dim), **kw))
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
