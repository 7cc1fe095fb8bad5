"""``nbgrad.nn.init``: in-place initialisers (mirrors ``torch.nn.init``).

Each fills its tensor in place under ``no_grad`` (one version bump, as torch's ``uniform_``) and
returns it. Random values come from nbgrad's generator (``nbgrad.manual_seed`` or the
``generator=`` argument), so the distributions match torch's but not the exact numbers.
"""

import math

import numpy as np

from nbgrad import creation
from nbgrad import dtypes
from nbgrad import random as _random
from nbgrad.autograd import grad_mode

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
    "orthogonal_",
]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (mirrors ``torch.nn.init.calculate_gain``).

    Raises:
        ValueError: unknown nonlinearity or a bad negative slope.
    """
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fill(tensor, values):
    """Write numpy ``values`` into ``tensor`` in place under no_grad (one version bump)."""
    with grad_mode.no_grad():
        tensor.copy_(creation.from_numpy(np.asarray(values, dtype=tensor._data.dtype)))
    return tensor


def _rand(shape, generator):
    return _random.rand(tuple(shape), dtype=dtypes.float64, generator=generator)._data


def _randn(shape, generator):
    return _random.randn(tuple(shape), dtype=dtypes.float64, generator=generator)._data


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    return _fill(tensor, a + (b - a) * _rand(tensor.shape, generator))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std**2)."""
    return _fill(tensor, mean + std * _randn(tensor.shape, generator))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std**2) truncated to [a, b] (inverse-CDF method, as torch)."""
    from math import erf, sqrt

    def norm_cdf(x):
        return (1.0 + erf(x / sqrt(2.0))) / 2.0

    lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    u = (2 * lo - 1) + (2 * hi - 2 * lo) * _rand(tensor.shape, generator)
    from scipy.special import erfinv  # scikit-learn brings scipy
    v = erfinv(u) * std * math.sqrt(2.0) + mean
    return _fill(tensor, np.clip(v, a, b))


def constant_(tensor, val):
    """Fill with ``val``."""
    with grad_mode.no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with grad_mode.no_grad():
        tensor.zero_()
    return tensor


def eye_(tensor):
    """Fill a 2-D tensor with the identity."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def _calculate_fan_in_and_fan_out(tensor):
    dims = tensor.ndim
    if dims < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.shape[1]
    num_output_fmaps = tensor.shape[0]
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b) with ``b = gain * sqrt(3 / fan)`` (He et al.). Linear/Conv use ``a=sqrt(5)``."""
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std**2) with ``std = gain / sqrt(fan)``."""
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian one."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _randn((rows, cols), generator)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tuple(tensor.shape)))
