"""``nbgrad.nn.init``: in-place initialisers (mirrors ``torch.nn.init``).

Each fills its tensor in place under ``no_grad`` (one version bump, as torch's ``uniform_``) and
returns it. Random values come from nbgrad's generator (``nbgrad.manual_seed`` or the
``generator=`` argument), which is torch's CPU stream, and each initialiser spends it as torch's
does with torch's float expressions for the bounds, so the numbers are torch's bit for bit
(``manual_seed(0); nn.Linear(3, 2).weight`` included). Two exceptions, in the last bits only:
``orthogonal_`` (same Gaussian draws; its Q is the correctly rounded one, torch's carries MKL's
float32 rounding) and the rejection branch of
``trunc_normal_`` for a narrow window (its ``log`` is numpy's, not torch's vectorised one).
"""

import math
import warnings

import numpy as np

from nbgrad import creation
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


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b) (torch.nn.init.uniform_: ``tensor.uniform_(a, b)``)."""
    with grad_mode.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std**2) (torch.nn.init.normal_: ``tensor.normal_(mean, std)``)."""
    with grad_mode.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std**2) restricted to [a, b], torch 2.13's rejection sampling: when the
    window holds more than 30% of the mass, normal draws, the whole tensor redrawn and the
    rejected elements replaced until none is left; otherwise uniform proposals on [a, b]
    accepted with the normal's density ratio.

    Warns (UserWarning): mean more than 2 std from [a, b] (torch's text).
    """
    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    with grad_mode.no_grad():
        if tensor.numel() == 0:
            return tensor
        dt = tensor._data.dtype.type
        lo, hi = float(dt(a)), float(dt(b))
        if norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std) > 0.3:
            result = tensor.normal_(mean, std, generator=generator)._data.copy()
            while True:
                bad = (result < lo) | (result > hi)
                if not bad.any():
                    break
                fresh = creation.empty_like(tensor).normal_(mean, std, generator=generator)
                result = np.where(bad, fresh._data, result)
            return _fill(tensor, result)
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2

        def log_ratio(x):  # torch: sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)
            return ((x - dt(mean)) / dt(std)) ** 2 * dt(-0.5) - dt(log_peak)

        def reject(cand):
            u = creation.empty_like(tensor).uniform_(generator=generator)._data
            return np.log(u) > cand

        result = tensor.uniform_(a, b, generator=generator)._data.copy()
        pending = reject(log_ratio(result))
        while pending.any():
            cand = creation.empty_like(tensor).uniform_(a, b, generator=generator)._data
            result = np.where(pending, cand, result)
            pending = np.where(pending, reject(log_ratio(cand)), pending)
        return _fill(tensor, result)


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
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std  # torch's expression, so torch's bound to the last bit
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
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std  # torch's expression, so torch's bound to the last bit
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std**2) with ``std = gain / sqrt(fan)``."""
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    """Fill a tensor of >= 2 dims (trailing dims flattened) with a (semi-)orthogonal matrix
    (torch.nn.init.orthogonal_): Q of the QR decomposition of a (rows, cols) Gaussian matrix
    (of its transpose when rows < cols), columns times the signs of R's diagonal, times gain.

    The Gaussian draws are torch's, bit for bit (the generator's state after agrees). torch
    factors them with LAPACK's geqrf/orgqr (MKL) in the tensor's dtype, whose Householder
    steps round differently from any other LAPACK; nbgrad factors them in float64 and rounds Q
    once to the tensor's dtype, so each element of its Q is the correctly rounded one and
    differs from torch's by torch's own float32 rounding error (a few ulps,
    tests/test_random_streams.py); the gain is then applied in the tensor's dtype, as torch's
    ``mul_``.

    Raises:
        ValueError: fewer than 2 dimensions (torch's text).
    """
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = creation.empty((rows, cols), dtype=tensor.dtype).normal_(0, 1, generator=generator)
    flat = flat._data.T if rows < cols else flat._data
    q, r = np.linalg.qr(flat.astype(np.float64))
    q = (q * np.sign(np.diag(r))).astype(flat.dtype)
    if rows < cols:
        q = q.T
    q = q * flat.dtype.type(gain)
    return _fill(tensor, q.reshape(tuple(tensor.shape)))
