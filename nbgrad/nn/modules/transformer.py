"""The Transformer of "Attention Is All You Need" (mirrors ``torch.nn.modules.transformer``).

TransformerEncoderLayer / TransformerDecoderLayer (post-norm by default, pre-norm with
``norm_first``), their stacks TransformerEncoder / TransformerDecoder, and Transformer. Built
from :class:`MultiheadAttention`, Linear, Dropout and LayerNorm with torch's submodule names,
so state dicts move between the two libraries. torch's inference fast paths (nested tensors,
the fused encoder kernel) are not reproduced: every call takes the path torch takes in
training, which gives the same values.
"""

import copy
import warnings

import numpy as np

from nbgrad import creation
from nbgrad import dtypes
from .. import functional as F
from .. import init
from .activation import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float: 0 on and below the diagonal, -inf above it (a causal mask)."""
    dtype = dtype if dtype is not None else dtypes.get_default_dtype()
    mask = np.triu(np.full((sz, sz), -np.inf), 1).astype(dtypes.to_np(dtype))
    out = creation.from_numpy(mask)
    return out if device is None else out.to(device)


def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


def _seq_len(src, batch_first):
    if src.ndim == 2:
        return src.shape[0]
    return src.shape[1 if batch_first else 0]


def _is_causal(mask, is_causal, size):
    """torch's _detect_is_causal_mask: a given hint wins; else whether ``mask`` is the causal
    float mask of ``size``."""
    if is_causal is not None:
        return bool(is_causal)
    if mask is None or tuple(mask.shape[-2:]) != (size, size):
        return False
    causal = _square_subsequent_mask(size, dtype=mask.dtype)._data
    return bool(np.array_equal(mask._data, causal))


def _layers(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual and LayerNorm (mirrors
    ``torch.nn.TransformerEncoderLayer``).

    ``norm_first=False``: ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``;
    ``norm_first=True``: ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``;
    ``ff(x) = linear2(dropout(activation(linear1(x))))``.

    Args:
        d_model (int), nhead (int), dim_feedforward (int): 2048, dropout (float): 0.1,
        activation: "relu", "gelu" or a callable (a Module becomes the submodule
        ``activation``), layer_norm_eps: 1e-5, batch_first, norm_first, bias: as torch.

    Shape:
        src (S, N, E), (N, S, E) with batch_first, or unbatched (S, E) -> same shape.

    Raises:
        RuntimeError: an unknown activation name (``activation should be relu/gelu, not
            tanh``); AssertionError: d_model not divisible by nhead, or src's last dim not
            d_model (from MultiheadAttention).
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        act = self.activation
        self.activation_relu_or_gelu = (
            1 if act is F.relu or type(act).__name__ == "ReLU"
            else 2 if act is F.gelu or type(act).__name__ == "GELU" else 0)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """Args: src; src_mask (S, S) or (N * nhead, S, S); src_key_padding_mask (N, S)
        (bool: True = padding); is_causal: a hint that src_mask is causal."""
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's memory, then feed-forward, each with a
    residual and LayerNorm (mirrors ``torch.nn.TransformerDecoderLayer``).

    Args: as :class:`TransformerEncoderLayer`.

    Shape:
        tgt (T, N, E), memory (S, N, E) (batch first or unbatched alike) -> (T, N, E).
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """Args: tgt, memory; tgt_mask (T, T); memory_mask (T, S); tgt_key_padding_mask
        (N, T); memory_key_padding_mask (N, S); the *_is_causal hints."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _why_not_nested(layer):
    """torch's reason, for a layer, why its encoder cannot take the nested-tensor fast path."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    attn = layer.self_attn
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not attn.batch_first:
        return (f"{name}.self_attn.batch_first was not True(use batch_first for better "
                "inference performance)")
    if not attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` applied in turn, then ``norm`` (mirrors
    ``torch.nn.TransformerEncoder``; submodules ``layers.0``, ``layers.1``, ..., ``norm``).

    ``enable_nested_tensor`` and ``mask_check`` are accepted and kept, and torch's warning about
    a layer that could not use nested tensors is given as torch gives it; nbgrad has no nested
    tensors, so every call takes torch's ordinary path (the same values).
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _layers(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why}", stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """Args: src; mask (S, S); src_key_padding_mask (N, S); is_causal: None detects
        whether ``mask`` is the causal mask (torch's rule)."""
        src_key_padding_mask = F._float_mask(src_key_padding_mask, "src_key_padding_mask",
                                             src.dtype, mask, "mask")
        mask = F._float_mask(mask, "mask", src.dtype)
        batch_first = self.layers[0].self_attn.batch_first
        is_causal = _is_causal(mask, is_causal, _seq_len(src, batch_first))
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, is_causal=is_causal,
                        src_key_padding_mask=src_key_padding_mask)
        return self.norm(out) if self.norm is not None else out


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` applied in turn, then ``norm`` (mirrors
    ``torch.nn.TransformerDecoder``)."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _layers(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        """Args as :meth:`TransformerDecoderLayer.forward`; ``tgt_is_causal=None`` detects a
        causal ``tgt_mask``."""
        batch_first = self.layers[0].self_attn.batch_first
        tgt_is_causal = _is_causal(tgt_mask, tgt_is_causal, _seq_len(tgt, batch_first))
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """Encoder-decoder Transformer (mirrors ``torch.nn.Transformer``).

    Args:
        d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
        dim_feedforward=2048, dropout=0.1, activation=relu, custom_encoder=None,
        custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
        bias=True: as torch. Every parameter with more than one dim is re-drawn with
        ``xavier_uniform_``, as torch.

    Shape:
        src (S, N, E), tgt (T, N, E) (or batch first, or unbatched) -> (T, N, E).

    Raises:
        RuntimeError: ``the batch number of src and tgt must be equal``, ``the feature number
            of src and tgt must be equal to d_model`` (torch's texts, with the shapes).
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        """Encode ``src``, decode ``tgt`` attending to it; masks as the encoder/decoder's."""
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError(
                f"the batch number of src and tgt must be equal (src {tuple(src.shape)}, tgt "
                f"{tuple(tgt.shape)}, batch dim {batch_dim})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(
                f"the feature number of src and tgt must be equal to d_model (d_model "
                f"{self.d_model}, src {tuple(src.shape)}, tgt {tuple(tgt.shape)})")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """(sz, sz) float mask: 0 where position i may attend to j <= i, -inf above the
        diagonal (mirrors torch's)."""
        return _square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
