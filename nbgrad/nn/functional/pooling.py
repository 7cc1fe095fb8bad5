"""Pooling other than max_pool2d (avg_pool2d, the 1-d pools, adaptive pools) and the
interpolation matrices of resampling (interpolate itself: upsampling.py). max_pool2d is
torch.max_pool2d (nbgrad/functions/nn.py).
"""
import numpy as np

from nbgrad import backend
from nbgrad.functions.nn import max_pool2d, _out_size, _pair, _pool_check
from nbgrad.functions.args import scalar_name
from .common import _const, _linear, _single


def _no_kernel(input, kernel, kinds):
    """NotImplementedError (torch's text) for an input whose dtype kind is in `kinds`: torch's
    pooling kernels exist for floating types (and some for integers) only."""
    if input._data.dtype.kind in kinds:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_name(input)}\'')


def _integer_mean(pool, input, *args):
    """torch's integer average pools: the window's sum divided by its count in integer
    arithmetic (truncated toward zero), in the input's dtype. Computed in float64, which is
    exact for the sums and whose correctly rounded quotient truncates to the same integer."""
    out = pool(input.double(), *args)
    return _const(backend.get_array_module(out._data).trunc(out._data)).to(input.dtype)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over sliding windows (mirrors ``torch.nn.functional.avg_pool2d``; one
    AvgPool2DBackward0 node, as torch).

    Args:
        input (Tensor): (N, C, H, W) or (C, H, W).
        count_include_pad (bool): divide by the full window size even where it overlaps the
            zero padding (torch's default).
        divisor_override (int, optional): divide by this instead.
    """
    if input.ndim not in (3, 4):
        raise RuntimeError(f"non-empty 3D or 4D (batch mode) tensor expected for input, got "
                           f"{list(input.shape)}")
    if input._data.dtype.kind in "biu" and input._data.dtype != np.int64:
        _no_kernel(input, "avg_pool2d", "biu")  # (torch's integer kernel is int64's)
    if input._data.dtype.kind in "iu":
        return _integer_mean(avg_pool2d, input, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, divisor_override)
    _pool_check(input if input.ndim == 4 else input.unsqueeze(0), kernel_size, stride, padding, 1,
                ceil_mode)
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = (kh, kw) if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    lead, (h, w) = tuple(input.shape[:-2]), tuple(input.shape[-2:])
    ho, wo = _out_size(h, kh, sh, ph, 1, ceil_mode), _out_size(w, kw, sw, pw, 1, ceil_mode)
    if divisor_override:
        div = float(divisor_override)
    else:
        # window extents, clipped like torch: to the padded input (count_include_pad) or input
        hs, ws = np.arange(ho) * sh - ph, np.arange(wo) * sw - pw
        he, we = np.minimum(hs + kh, h + ph), np.minimum(ws + kw, w + pw)
        if not count_include_pad:
            hs, ws = np.maximum(hs, 0), np.maximum(ws, 0)
            he, we = np.minimum(he, h), np.minimum(we, w)
        counts = (he - hs)[:, None] * (we - ws)[None, :]
        div = float(kh * kw) if (counts == kh * kw).all() else backend.to_device(
            counts.astype(input._data.dtype), input.device)
    extra_h = max(0, (ho - 1) * sh + kh - h - 2 * ph)
    extra_w = max(0, (wo - 1) * sw + kw - w - 2 * pw)
    grow = ((0, 0),) * len(lead) + ((ph, ph + extra_h), (pw, pw + extra_w))
    windows = [(slice(i, i + sh * (ho - 1) + 1, sh), slice(j, j + sw * (wo - 1) + 1, sw))
               for i in range(kh) for j in range(kw)]

    def fwd(a):  # the sum of kh*kw strided views: elementwise, as fast as numpy goes
        a = backend.get_array_module(a).pad(a, grow)
        total = a[..., windows[0][0], windows[0][1]].copy()
        for wh, ww in windows[1:]:
            total += a[..., wh, ww]
        return total / div

    def adj(g):
        xp = backend.get_array_module(g)
        g = g / div
        z = xp.zeros(lead + (h + 2 * ph + extra_h, w + 2 * pw + extra_w), g.dtype)
        for wh, ww in windows:
            z[..., wh, ww] += g
        return xp.ascontiguousarray(z[..., ph:ph + h, pw:pw + w])

    return _linear("avg_pool2d", input, fwd, adj)


def _mat_fwd(mh, mw, zh=None, zw=None):
    """x -> mh @ x @ mw.T over the last two dims, the width first as torch's kernels (either
    matrix may be None: identity; zh, zw: their zero-weight terms, see _apply)."""
    def fwd(a):
        if mw is not None:
            a = _apply(mw, a, a.ndim - 1, zw)
        if mh is not None:
            a = _apply(mh, a, a.ndim - 2, zh)
        return backend.get_array_module(a).ascontiguousarray(a)
    return fwd


def _apply(m, a, axis, zeros=None):
    """The (n_out, n_in) matrix ``m`` applied along ``axis`` of ``a`` as torch's kernels sum
    the terms its entries stand for: ``w * x`` for each nonzero ``w``, and ``0 * x`` where the
    bool mask ``zeros`` says (the zero weights a kernel multiplies, as linear interpolation's
    at an integer source index). So a NaN or inf in ``a`` reaches only the outputs whose terms
    take it (the plain product would spread ``0 * inf = nan`` over all): NaN from a NaN or a
    ``0 * inf``, NaN where +inf meets -inf, else the inf."""
    xp = backend.get_array_module(a)

    def along(mat, arr):
        mat = xp.asarray(mat)
        if axis == arr.ndim - 1:
            return arr @ mat.T
        if axis == arr.ndim - 2:
            return mat @ arr
        return xp.moveaxis(xp.tensordot(mat, arr, ([1], [axis])), 0, axis)

    bad = ~xp.isfinite(a)
    if not bad.any():
        return along(m, a)
    out = along(m, xp.where(bad, 0, a))
    f = np.float64
    pos, neg = (a == np.inf).astype(f), (a == -np.inf).astype(f)
    up, down = (m > 0).astype(f), (m < 0).astype(f)
    plus, minus = along(up, pos) + along(down, neg), along(up, neg) + along(down, pos)
    nan = along((m != 0).astype(f), xp.isnan(a).astype(f)) > 0
    if zeros is not None:
        nan |= along(zeros.astype(f), bad.astype(f)) > 0
    nan |= (plus > 0) & (minus > 0)
    out = xp.where(plus > 0, np.inf, xp.where(minus > 0, -np.inf, out))
    return xp.where(nan, np.nan, out).astype(a.dtype, copy=False)


def _check_1d_pool(input, who):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{who}: expected 2D or 3D input (C, L) or (N, C, L), got "
                           f"{list(input.shape)}")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over sliding windows of (N, C, L) or (C, L) (mirrors ``F.max_pool1d``);
    NotImplementedError for integer and bool input without indices (torch's kernel)."""
    _check_1d_pool(input, "max_pool1d")
    if not return_indices:
        _no_kernel(input, "max_pool1d_impl", "biu")
    k = _single(kernel_size)
    s = k if stride is None or stride == [] else _single(stride)
    out = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding)),
                     (1, _single(dilation)), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """Mean over sliding windows of (N, C, L) or (C, L) (mirrors ``F.avg_pool1d``)."""
    _check_1d_pool(input, "avg_pool1d")
    k = _single(kernel_size)
    s = k if stride is None or stride == [] else _single(stride)
    return avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding)), ceil_mode,
                      count_include_pad).squeeze(-2)


def _adaptive_windows(n_in, n_out):
    """torch's adaptive pooling windows: [floor(i n_in / n_out), ceil((i+1) n_in / n_out))."""
    i = np.arange(n_out)
    return (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)


def _adaptive_matrix(n_in, n_out, dtype):
    starts, ends = _adaptive_windows(n_in, n_out)
    m = np.zeros((n_out, n_in), dtype)
    for i, (a, b) in enumerate(zip(starts, ends)):
        m[i, a:b] = 1.0 / (b - a)
    return m


def _out_sizes(output_size, shape):
    size = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * len(shape)
    return tuple(s if o is None else int(o) for o, s in zip(size, shape))


def adaptive_avg_pool2d(input, output_size):
    """Average over torch's adaptive windows to ``output_size`` (mirrors
    ``F.adaptive_avg_pool2d``; one AdaptiveAvgPool2DBackward0 node, ``A_h @ x @ A_w^T`` with the
    averaging matrices; output (1, 1) is a mean, as torch).

    Args:
        input (Tensor): (N, C, H, W) or (C, H, W).
        output_size (int | tuple): (H_out, W_out); None keeps that dim.
    """
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{list(input.shape)}")
    ho, wo = _out_sizes(output_size, input.shape[-2:])
    h, w = input.shape[-2:]
    if (ho, wo) == (1, 1):
        return input.mean((-2, -1), keepdim=True)
    _no_kernel(input, "adaptive_avg_pool2d", "biu")
    dt = input._data.dtype
    mh, mw = _adaptive_matrix(h, ho, dt), _adaptive_matrix(w, wo, dt)
    return _linear("adaptive_avg_pool2d", input, _mat_fwd(mh, mw), _mat_fwd(mh.T, mw.T))


def adaptive_avg_pool1d(input, output_size):
    """Average over torch's adaptive windows of (N, C, L) or (C, L) (F.adaptive_avg_pool1d;
    adaptive_avg_pool2d over a height-1 image, as torch)."""
    _check_1d_pool(input, "adaptive_avg_pool1d")
    lo = _out_sizes(output_size, input.shape[-1:])[0]
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, lo)).squeeze(-2)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over torch's adaptive windows (mirrors ``F.adaptive_max_pool2d``; one
    AdaptiveMaxPool2DBackward0 node; the gradient goes to each window's first maximum).
    NotImplementedError for integer and bool input (torch's kernel).

    Returns:
        Tensor (*, H_out, W_out); with ``return_indices`` also the int64 flat index into H*W.
    """
    _no_kernel(input, "adaptive_max_pool2d", "biu")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{list(input.shape)}")
    x = input._data
    h, w = x.shape[-2:]
    ho, wo = _out_sizes(output_size, (h, w))
    (hs, he), (ws, we) = _adaptive_windows(h, ho), _adaptive_windows(w, wo)
    lead = x.shape[:-2]
    xp = backend.get_array_module(x)  # the input's module: indices stay on its device
    flat = x.reshape(-1, h, w)
    idx = xp.empty((flat.shape[0], ho, wo), np.int64)
    for i in range(ho):
        for j in range(wo):
            win = flat[:, hs[i]:he[i], ws[j]:we[j]]
            k = win.reshape(len(flat), -1).argmax(1)
            kw_ = we[j] - ws[j]
            idx[:, i, j] = (hs[i] + k // kw_) * w + ws[j] + k % kw_
    rows = xp.arange(len(flat))[:, None] * (h * w) + idx.reshape(len(flat), -1)
    out_shape = lead + (ho, wo)

    def fwd(a):
        return a.reshape(-1)[rows].reshape(out_shape)

    def adj(g):
        m = backend.get_array_module(g)
        z = m.zeros(x.size, g.dtype)
        m.add.at(z, rows.reshape(-1), g.reshape(-1))
        return z.reshape(x.shape)

    out = _linear("adaptive_max_pool2d", input, fwd, adj)
    return (out, _const(idx.reshape(out_shape))) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over torch's adaptive windows of (N, C, L) or (C, L) (F.adaptive_max_pool1d;
    adaptive_max_pool2d over a height-1 image, as torch)."""
    _check_1d_pool(input, "adaptive_max_pool1d")
    lo = _out_sizes(output_size, input.shape[-1:])[0]
    out = adaptive_max_pool2d(input.unsqueeze(-2), (1, lo), return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def _interp_matrix(n_in, n_out, mode, align_corners, scale, dtype, zeros=False):
    """(n_out, n_in) interpolation weights along one dim, torch's source-index rules; with
    ``zeros`` also the mask of the zero weights its kernel multiplies (linear: the second
    neighbour at an integer source index, the element itself when the size is kept)."""
    m = np.zeros((n_out, n_in), dtype)
    dst = np.arange(n_out, dtype=np.float64)
    rows = np.arange(n_out)
    if mode in ("nearest", "nearest-exact"):
        ratio = 1.0 / scale if scale else n_in / n_out
        src = np.floor((dst + 0.5) * ratio) if mode == "nearest-exact" else np.floor(dst * ratio)
        m[rows, np.minimum(src.astype(np.int64), n_in - 1)] = 1.0
        return (m, None) if zeros else m
    if align_corners:
        ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        src = dst * ratio
    else:
        ratio = 1.0 / scale if scale else n_in / n_out
        src = np.maximum((dst + 0.5) * ratio - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = i0 if n_in == n_out else np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    np.add.at(m, (rows, i0), 1.0 - lam)
    np.add.at(m, (rows, i1), lam)
    if not zeros:
        return m
    z = np.zeros((n_out, n_in), bool)
    z[rows, i0] |= lam == 1.0
    z[rows, i1] |= lam == 0.0
    return m, z
