"""Activations, softmax and dropout (relu, gelu, elu, softplus, glu, prelu, softmax,
log_softmax, dropout, dropout1d/2d, ...): each one row of nbgrad/ops/activations.py
or nbgrad/ops/nn.py, or a composition.
"""
import math

import numpy as np

from nbgrad import backend
from nbgrad import random as _random
from nbgrad import creation
from nbgrad.autograd.apply import apply
from nbgrad.functions.args import check_same_dtype, scalar_name
from nbgrad.tensor import is_dense
from nbgrad.ops import ROWS
from .common import _const


def relu(input, inplace=False):
    """max(x, 0) (mirrors ``F.relu``); ``inplace`` uses ``relu_``."""
    return input.relu_() if inplace else input.relu()


def relu_(input):
    return input.relu_()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x if x > 0 else negative_slope * x (mirrors ``F.leaky_relu``; LeakyReluBackward0, and
    LeakyReluBackward1 in place). TypeError for a slope that is not a number (torch's text)."""
    if isinstance(negative_slope, (str, bytes, list, tuple, dict)) or negative_slope is None:
        raise TypeError(f"leaky_relu(): argument 'negative_slope' (position 2) must be Number, "
                        f"not {type(negative_slope).__name__}")
    return _pointwise("leaky_relu", input, inplace, negative_slope)


def gelu(input, approximate="none"):
    """Gaussian error linear unit (mirrors ``F.gelu``; one GeluBackward0 node).

    ``approximate="none"``: ``x * Phi(x)`` with erf; ``"tanh"``: the tanh approximation.
    """
    if approximate in ("none", "tanh"):
        if input._data.dtype.kind in "biu":
            raise NotImplementedError(f'"GeluKernelImpl" not implemented for '
                                      f"'{scalar_name(input)}'")
        return apply(ROWS["gelu"], (input,), (approximate,))
    raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def _softmax_dim(name, ndim, stacklevel):
    """torch's ``_get_softmax_dim``: the legacy dim for ``dim=None``, with its UserWarning."""
    import warnings
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                  "include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum exp(x) along ``dim`` (mirrors ``F.softmax``, its argument order included;
    ``dim=None``: torch's legacy dim, 0 for 0-, 1- and 3-D input, else 1, with its UserWarning
    "Implicit dimension choice for softmax has been deprecated")."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    return input.softmax(dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) computed stably (mirrors ``F.log_softmax``; ``dim=None`` as softmax's)."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    return input.log_softmax(dim)


def _dropout_noise(input, shape, p):
    """torch's dropout noise: ``empty(shape).bernoulli_(1 - p).div_(1 - p)`` in input's dtype,
    on input's device."""
    dt = input._data.dtype
    u = _random._uniform(_random.default_generator, math.prod(shape), np.dtype(np.float64))
    if shape == tuple(input.shape) and not input.is_contiguous() and is_dense(input._data):
        # empty_like keeps a dense input's strides, and bernoulli_ fills by address (a
        # batch_first attention output is such a transposed view)
        placed = np.empty_like(u)
        placed[_random._address_order(shape, input.stride())] = u
        u = placed
    noise = (u.reshape(shape) < 1.0 - p).astype(dt) / dt.type(1.0 - p)
    return noise if input.device.type == "cpu" else backend.to_device(noise, input.device)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p) (mirrors F.dropout).

    The mask is torch's on the CPU, bit for bit: ``empty_like(input).bernoulli_(1 - p)`` from
    the global generator, divided by ``1 - p``, then ``input * mask``.

    Raises:
        ValueError: p outside [0, 1].
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        mask = creation.zeros_like(input)
    else:
        mask = _const(_dropout_noise(input, tuple(input.shape), p))
    if inplace:
        return input.mul_(mask)
    return input * mask


def _pointwise(name, input, inplace, *args):
    """Apply the one-node row ``name``; ``inplace`` writes into ``input`` (the row ``name_``
    when torch names its in-place node differently, e.g. LeakyReluBackward1)."""
    if not inplace:
        return apply(ROWS[name], (input,), args)
    return apply(ROWS.get(name + "_", ROWS[name]), (input,), args, inplace=name + "_")


def threshold(input, threshold, value, inplace=False):
    """``x if x > threshold else value`` (mirrors ``F.threshold``; ThresholdBackward0)."""
    return _pointwise("threshold", input, inplace, threshold, value)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``x`` clamped to ``[min_val, max_val]``; gradient 1 strictly inside (mirrors F.hardtanh;
    HardtanhBackward0).

    Raises:
        ValueError: ``max_val < min_val``.
    """
    if max_val < min_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _pointwise("hardtanh", input, inplace, min_val, max_val)


def relu6(input, inplace=False):
    """``min(max(x, 0), 6)`` (mirrors ``F.relu6``; recorded as HardtanhBackward0, as torch)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def elu(input, alpha=1.0, inplace=False):
    """``x if x > 0 else alpha * (exp(x) - 1)`` (mirrors ``F.elu``; EluBackward0)."""
    return _pointwise("elu", input, inplace, alpha, 1.0, 1.0)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with the self-normalising constants (mirrors ``F.selu``;
    EluBackward0, as torch)."""
    return _pointwise("elu", input, inplace, _SELU_ALPHA, _SELU_SCALE, 1.0)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (mirrors ``F.celu``; CeluBackward0).

    Raises:
        RuntimeError: ``alpha == 0``.
    """
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _pointwise("celu", input, inplace, alpha)


def silu(input, inplace=False):
    """``x * sigmoid(x)`` (mirrors ``F.silu``; SiluBackward0)."""
    return _pointwise("silu", input, inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, linear where ``beta x > threshold`` (mirrors F.softplus;
    SoftplusBackward0)."""
    return apply(ROWS["softplus"], (input,), (beta, threshold))


def mish(input, inplace=False):
    """``x * tanh(softplus(x))`` (mirrors ``F.mish``; MishBackward0)."""
    return _pointwise("mish", input, inplace)


def softsign(input):
    """``x / (1 + |x|)`` (mirrors ``F.softsign``; composed, as torch)."""
    return input / (input.abs() + 1)


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6``; derivative 0 at -3 and 1 at 3, as torch's (F.hardswish;
    HardswishBackward0)."""
    return _pointwise("hardswish", input, inplace)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``; gradient 1/6 (torch's float32 constant) strictly inside (-3, 3)
    (mirrors F.hardsigmoid; HardsigmoidBackward0)."""
    return _pointwise("hardsigmoid", input, inplace)


def tanhshrink(input):
    """``x - tanh(x)`` (mirrors ``F.tanhshrink``; composed, as torch)."""
    return input - input.tanh()


def hardshrink(input, lambd=0.5):
    """``x if |x| > lambd else 0`` (mirrors ``F.hardshrink``; HardshrinkBackward0)."""
    return apply(ROWS["hardshrink"], (input,), (lambd,))


def softshrink(input, lambd=0.5):
    """``x - lambd`` above lambd, ``x + lambd`` below -lambd, else 0 (mirrors F.softshrink;
    SoftshrinkBackward0)."""
    return apply(ROWS["softshrink"], (input,), (lambd,))


def logsigmoid(input):
    """``log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|))``, stable for large |x| (mirrors
    ``F.logsigmoid``; LogSigmoidBackward0)."""
    return apply(ROWS["log_sigmoid"], (input,))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x)`` along ``dim`` (mirrors ``F.softmin``; ``dim=None`` as softmax's)."""
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim, _stacklevel)
    return softmax(input.neg(), dim, dtype=dtype)


def glu(input, dim=-1):
    """Gated linear unit: ``a * sigmoid(b)`` for the two halves of ``dim`` (mirrors F.glu;
    GluBackward0).

    Raises:
        RuntimeError: ``dim`` has an odd size (torch's text).
    """
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension "
                           f"{dim % input.ndim} is size {size}")
    return apply(ROWS["glu"], (input,), (dim % input.ndim,))


def prelu(input, weight):
    """``x if x > 0 else a * x`` with a learnt slope per channel (dim 1) (mirrors F.prelu;
    PreluKernelBackward0).

    Args:
        input (Tensor): (N, C, *); a 1-D or 0-D input has one channel (as torch).
        weight (Tensor): (C,) or (1,).

    Raises:
        RuntimeError: weight has neither 1 nor C elements (torch's text).
    """
    check_same_dtype((input, weight), lambda: f"prelu: Type promoting not supported. Got "
                     f"{scalar_name(input)} and {scalar_name(weight)}")
    n = weight.numel()
    c = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != c:
        raise RuntimeError(
            f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
            f"{n} and channel size = {c}.")
    if input.ndim != weight.ndim:  # as torch: to input's ndim, (1, C, 1, ...)
        shape = [1] * input.ndim
        if input.ndim > 1:
            shape[1] = n
        weight = weight.reshape(tuple(shape))
    return apply(ROWS["_prelu_kernel"], (input, weight))


def _feature_dropout(input, p, training, inplace, batched_ndim, who):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    batched = input.ndim == batched_ndim
    shape = tuple(input.shape[:2]) if batched else tuple(input.shape[:1])
    shape += (1,) * (input.ndim - len(shape))
    if p == 1.0:
        mask = np.zeros(shape, input._data.dtype)
    else:
        mask = _dropout_noise(input, shape, p)
    if inplace:
        return input.mul_(_const(mask))
    return input * _const(mask)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) with probability p (mirrors F.dropout1d).

    Raises:
        RuntimeError: input not 2-D or 3-D (torch's text).
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout "
                           "on inputs with 1 spatial dimension, a channel dimension, and an "
                           "optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, 3, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability p (F.dropout2d)."""
    if input.ndim not in (3, 4):
        import warnings
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).")
    return _feature_dropout(input, p, training, inplace, 4, "dropout2d")
