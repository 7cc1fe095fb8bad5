"""The 3-D layers' functions (mirror ``F.conv3d``, ``F.max_pool3d``, ``F.avg_pool3d``,
``F.adaptive_avg_pool3d``): one node each, as torch (ConvolutionBackward0,
MaxPool3DWithIndicesBackward0, AvgPool3DBackward0, AdaptiveAvgPool3DBackward0). The pools'
averages are separable: one averaging matrix per spatial dim (the window's share of each input
position), applied along that dim.
"""
import numpy as np

from nbgrad import backend
from nbgrad.autograd.apply import apply
from nbgrad.functions.args import conv_dtypes
from nbgrad.functions.nn import _out_size
from nbgrad.ops import ROWS
from .common import _linear
from .pooling import _adaptive_matrix, _apply, _integer_mean, _no_kernel, _out_sizes

__all__ = ["conv3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d"]


def _triple(v, name):
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return (int(v[0]),) * 3
        if len(v) != 3:
            raise RuntimeError(f"{name} must be a single int or a tuple of three ints")
        return tuple(int(a) for a in v)
    return (int(v),) * 3


def _batched(input, who, expect="4D (unbatched) or 5D (batched)"):
    if input.ndim not in (4, 5):
        raise RuntimeError(f"Expected {expect} input to {who}, but got input of size: "
                           f"{list(input.shape)}")
    return (input.unsqueeze(0), True) if input.ndim == 4 else (input, False)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation (mirrors ``F.conv3d``): (N, C_in, D, H, W) or unbatched, weight
    (C_out, C_in / groups, kd, kh, kw); padding an int, a triple, "valid" or "same".

    Raises:
        RuntimeError: wrong rank, channel count or dtype (torch's texts).
    """
    input, unbatched = _batched(input, "conv3d")
    s, d = _triple(stride, "stride"), _triple(dilation, "dilation")
    k = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             "{'valid', 'same'}")
        if padding == "same" and s != (1, 1, 1):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        totals = [dd * (kk - 1) if padding == "same" else 0 for dd, kk in zip(d, k)]
        if any(t % 2 for t in totals):
            from .conv import pad
            widths = []
            for t in reversed(totals):
                widths += [t // 2, t - t // 2] if t % 2 else [0, 0]
            input = pad(input, widths)
            totals = [0 if t % 2 else t for t in totals]
        p = tuple(t // 2 for t in totals)
    else:
        p = _triple(padding, "padding")
    if weight.ndim != 5:
        raise RuntimeError(f"weight should have 5 dimensions for conv3d, got {weight.ndim}")
    if input.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(input.shape)} to have "
                           f"{weight.shape[1] * groups} channels, but got {input.shape[1]} "
                           "channels instead")
    conv_dtypes(input, weight, bias)
    padded = [n + 2 * pp for n, pp in zip(input.shape[2:], p)]
    reach = [dd * (kk - 1) + 1 for dd, kk in zip(d, k)]
    if any(a < b for a, b in zip(padded, reach)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, reach))}). Kernel size can't be greater than "
                           "actual input size")
    out = apply(ROWS["_convolution3d"], (input, weight, bias), (s, p, d, groups))
    return out.squeeze(0) if unbatched else out


def _pool_args(kernel_size, stride, padding):
    k = _triple(kernel_size, "max_pool3d: kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _triple(stride, "max_pool3d: stride")
    p = _triple(padding, "max_pool3d: padding")
    if any(pp > kk // 2 for pp, kk in zip(p, k)):
        raise RuntimeError("pad should be at most half of effective kernel size, but got "
                           f"pad={p[0]}, kernel_size={k[0]} and dilation=1")
    return k, s, p


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over (kd, kh, kw) windows with -inf padding (mirrors ``F.max_pool3d``); with
    ``return_indices`` also the flat D*H*W index of each maximum."""
    if input.ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    _no_kernel(input, "max_pool3d", "b")
    k, s, p = _pool_args(kernel_size, stride, padding)
    d = _triple(dilation, "max_pool3d: dilation")
    # (an unbatched (C, D, H, W) input is pooled as it is: one node, as torch's kernel)
    out, idx = apply(ROWS["max_pool3d_with_indices"], (input,), (k, s, p, d, ceil_mode))
    return (out, idx) if return_indices else out


def _avg_matrix(n, k, s, p, ceil_mode, count_include_pad, divide, dtype):
    """(n_out, n) averaging matrix of one dim: 1/size over the window's part inside the input."""
    o = _out_size(n, k, s, p, 1, ceil_mode)
    m = np.zeros((o, n), dtype)
    for i in range(o):
        start = i * s - p
        end = min(start + k, n + p)
        lo, hi = max(start, 0), min(end, n)
        size = (end - start) if count_include_pad else (hi - lo)
        m[i, lo:hi] = 1.0 / size if divide else 1.0
    return m


def _along(mats, zeros=None):
    """x -> x with mats[i] applied along spatial dim i (the last len(mats) dims), the last dim
    first as torch's kernels (zeros[i]: mats[i]'s zero-weight terms, see pooling._apply)."""
    def fwd(a):
        nd = len(mats)
        for i in reversed(range(nd)):
            a = _apply(mats[i], a, a.ndim - nd + i, zeros[i] if zeros else None)
        return backend.get_array_module(a).ascontiguousarray(a)
    return fwd


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over (kd, kh, kw) windows (mirrors ``F.avg_pool3d``; one AvgPool3DBackward0 node).

    ``count_include_pad`` divides by the window's size including the zero padding (torch's
    default); ``divisor_override`` divides by that number instead.
    """
    if input.ndim not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if input._data.dtype.kind in "biu" and input._data.dtype != np.int64:
        _no_kernel(input, "avg_pool3d_out_frame", "biu")
    if input._data.dtype.kind in "iu":
        return _integer_mean(avg_pool3d, input, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, divisor_override)
    k, s, p = _pool_args(kernel_size, stride, padding)
    dt = input._data.dtype
    mats = [_avg_matrix(n, kk, ss, pp, ceil_mode, count_include_pad, not divisor_override, dt)
            for n, kk, ss, pp in zip(input.shape[-3:], k, s, p)]
    if divisor_override:
        mats[0] = mats[0] / dt.type(divisor_override)
    return _linear("avg_pool3d", input, _along(mats), _along([m.T for m in mats]))


def adaptive_avg_pool3d(input, output_size):
    """Average over torch's adaptive windows to ``output_size`` (mirrors
    ``F.adaptive_avg_pool3d``; one AdaptiveAvgPool3DBackward0 node; output (1, 1, 1) is a mean, as
    torch); None keeps that dim."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got "
                           f"{list(input.shape)}")
    sizes = _out_sizes(output_size, input.shape[-3:])
    if sizes == (1, 1, 1):  # a mean, as torch
        return input.mean((-3, -2, -1), keepdim=True)
    _no_kernel(input, "adaptive_avg_pool3d_cpu", "biu")
    dt = input._data.dtype
    mats = [_adaptive_matrix(n, o, dt) for n, o in zip(input.shape[-3:], sizes)]
    return _linear("adaptive_avg_pool3d", input, _along(mats), _along([m.T for m in mats]))
