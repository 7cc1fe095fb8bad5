"""Resampling (mirrors ``F.interpolate``, ``F.upsample``, ``F.max_unpool1d/2d/3d``) and power-average
pooling (``F.lp_pool1d/2d/3d``).

Every interpolation mode is separable: one (n_out, n_in) weight matrix per spatial dim, built with
torch's source-index rules (``area_pixel_compute_source_index``; bicubic: torch's cubic
convolution with A = -0.75 and clamped taps), applied along that dim, recorded as one node of
torch's name (UpsampleBicubic2DBackward0, UpsampleTrilinear3DBackward0, ...); antialias=True
(and lanczos) weighs every input within the filter's support, as torch's ``_upsample_*2d_aa``
(UpsampleBilinear2DAaBackward0, ...). max-unpooling is
the row ``max_unpool2d`` / ``max_unpool3d`` (MaxUnpool2DBackward0); lp_pool is torch's own
composition of public ops (pow, avg_pool, sign, relu, abs, mul, pow).
"""
import warnings

import numpy as np

from nbgrad import backend, creation
from nbgrad.autograd.apply import apply
from nbgrad.functions.nn import _pair
from nbgrad.ops import ROWS
from .activation import relu
from .common import _linear, _single
from .pooling import (_interp_matrix, _mat_fwd, adaptive_avg_pool1d, adaptive_avg_pool2d,
                      avg_pool1d, avg_pool2d, max_pool1d, max_pool2d)
from .volumes import _along, _triple, adaptive_avg_pool3d, avg_pool3d, max_pool3d

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d",
           "max_unpool2d", "max_unpool3d"]

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_LINEAR_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _cubic_matrix(n_in, n_out, align_corners, scale, dtype):
    """(n_out, n_in) bicubic weights along one dim: torch's upsample_bicubic2d (source index not
    clamped at 0, four taps clamped to the input, cubic convolution with A = -0.75)."""
    # in the input's precision, as torch's kernel computes (opmath: float for float32)
    ft = np.float32 if dtype == np.float32 else np.float64
    dst = np.arange(n_out, dtype=ft)
    if align_corners:
        src = dst * ft((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = ft(1.0 / scale if scale else ft(n_in) / ft(n_out)) * (dst + ft(0.5)) - ft(0.5)
    i0 = np.floor(src)
    t = src - i0
    a = ft(-0.75)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    coeffs = (far(t + 1), near(t), near(1 - t), far(2 - t))
    m = np.zeros((n_out, n_in), ft)
    rows = np.arange(n_out)
    for j, c in enumerate(coeffs):
        np.add.at(m, (rows, np.clip(i0.astype(np.int64) - 1 + j, 0, n_in - 1)), c)
    return m.astype(dtype)


def _aa_filter(mode, ft):
    """torch's antialias filters (Pillow's), on the weights' type ``ft``: triangle (bilinear),
    Keys cubic with a = -0.5 (bicubic), Lanczos-3 (sinc(x) sinc(x / 3))."""
    if mode == "bilinear":
        return lambda x: ft(1.0 - float(abs(x))) if abs(x) < 1 else ft(0)
    if mode == "bicubic":
        a = ft(-0.5)

        def cubic(x):
            x = abs(x)
            if x < 1:
                return ((a + ft(2)) * x - (a + ft(3))) * x * x + ft(1)
            if x < 2:
                return ((a * x - ft(5) * a) * x + ft(8) * a) * x - ft(4) * a
            return ft(0)
        return cubic
    pi = ft(np.pi)

    def sinc(x):
        if x == 0:
            return ft(1)
        x = x * pi
        return ft(np.sin(x)) / x
    return lambda x: sinc(abs(x)) * sinc(ft(float(abs(x)) / 3.0)) if abs(x) < 3 else ft(0)


def _aa_matrix(n_in, n_out, align_corners, scale, dtype, mode):
    """(n_out, n_in) antialiased weights along one dim, as torch's
    _compute_indices_min_size_weights_aa computes them in the input's type (its double
    intermediates kept double): each output averages the inputs within ``support`` (the
    filter's half width, times the scale when shrinking) of its centre, the filter stretched by
    the scale, the weights normalised to sum to one."""
    ft = np.float32 if dtype == np.float32 else np.float64
    if align_corners:
        sc = ft(ft(n_in - 1) / ft(n_out - 1)) if n_out > 1 else ft(0)
    else:
        sc = ft(1.0 / scale) if scale is not None and scale > 0 else ft(ft(n_in) / ft(n_out))
    half = {"bilinear": 1.0, "bicubic": 2.0, "lanczos": 3.0}[mode]
    support = ft(half * float(sc)) if sc >= 1 else ft(half)
    width = int(np.ceil(support)) * 2 + 1
    invscale = ft(1.0 / float(sc)) if sc >= 1 else ft(1.0)
    filt = _aa_filter(mode, ft)
    m = np.zeros((n_out, n_in), ft)
    for i in range(n_out):
        center = ft(float(sc) * (i + 0.5))
        xmin = max(int(float(center - support) + 0.5), 0)
        xsize = min(max(min(int(float(center + support) + 0.5), n_in) - xmin, 0), width)
        w = [filt(ft((float(ft(j + xmin) - center) + 0.5) * float(invscale)))
             for j in range(xsize)]
        total = ft(0)
        for v in w:
            total = ft(total + v)
        m[i, xmin:xmin + xsize] = [v / total for v in w] if total != 0 else w
    return m.astype(dtype)


def _aa_int16(n_in, n_out, align_corners, scale, mode):
    """(weights (n_out, n_in) int64, precision) of torch's uint8 antialias path
    (compute_index_ranges_int16_weights): the weights as _aa_matrix computes them in double,
    scaled by 2**precision (the largest that keeps twice the largest weight below 2**15) and
    rounded half away from zero."""
    m = _aa_matrix(n_in, n_out, align_corners, scale, np.float64, mode)
    wt_max = float(m.max()) if m.size else 0.0
    prec = 0
    while prec < 22 and int(0.5 + wt_max * (1 << (prec + 1))) < (1 << 15):
        prec += 1
    v = m * float(1 << prec)
    return np.trunc(v + np.where(v < 0, -0.5, 0.5)).astype(np.int64), prec


def _aa_uint8(input, out_size, align_corners, scales, mode):
    """torch's uint8 antialias resize (Pillow-SIMD's integer kernel): along the width then the
    height, each output ``(2**(p-1) + sum(pixel * int16 weight)) >> p`` clamped to 0..255."""
    a = backend.to_device(input._data, backend.CPU).astype(np.int64)
    for axis, (n, o, sc) in ((3, (a.shape[3], out_size[1], scales[1])),
                             (2, (a.shape[2], out_size[0], scales[0]))):
        w, prec = _aa_int16(n, o, align_corners, sc, mode)
        a = np.moveaxis(np.moveaxis(a, axis, -1) @ w.T, -1, axis)
        a = np.clip((a + (1 << (prec - 1))) >> prec, 0, 255)
    return creation.tensor(a.astype(np.uint8), device=input.device)


def _sizes(input, size, scale_factor, dim):
    """(output sizes, scales) as torch's interpolate reads size / scale_factor (its texts)."""
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {list(input.shape[2:])} and output size "
                    f"of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                    "and output size in (o1, o2, ...,oK) format.")
            if not all(isinstance(x, (int, np.integer)) for x in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] "
                                "or Tuple[int, int, int], but got size with types "
                                f"{[type(x) for x in size]}")
            return [int(x) for x in size], None
        return [int(size)] * dim, None
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(
                "Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {list(input.shape[2:])} and scale_factor "
                f"of shape {scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                "format and scale_factor in (s1, s2, ...,sK) format.")
        return None, [float(s) for s in scale_factor]
    return None, [float(scale_factor)] * dim


def _row_name(mode, dim):
    return {"nearest": "upsample_nearest", "nearest-exact": "_upsample_nearest_exact",
            "linear": "upsample_linear", "bilinear": "upsample_bilinear",
            "trilinear": "upsample_trilinear", "bicubic": "upsample_bicubic"}[mode] + f"{dim}d"


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims (mirrors ``F.interpolate``), one node of torch's name per call.

    Modes: "nearest", "nearest-exact" (3-D, 4-D or 5-D input), "linear" (3-D), "bilinear",
    "bicubic" (4-D), "trilinear" (5-D), "area" (adaptive average pooling). The output keeps the
    input's dtype (float32 stays float32).

    Args:
        input (Tensor): (N, C, *spatial) with 1 to 3 spatial dims.
        size (int | tuple) or scale_factor (float | tuple): exactly one.
        align_corners (bool): interpolating modes only (default False).
        recompute_scale_factor (bool): size from the scale, then interpolate by size.
        antialias (bool): bilinear / bicubic on 4-D input: torch's separable antialias
            filters (Pillow's: triangle, Keys cubic a = -0.5), widened by the scale when
            shrinking; "lanczos" (Lanczos-3) needs it. uint8 images run torch's integer
            kernel (int16 weights), exactly.

    Raises:
        ValueError / TypeError / NotImplementedError: torch's texts for align_corners with a
        nearest mode, both or neither of size / scale_factor, a size or scale of the wrong
        length, a mode that needs another number of dims; RuntimeError / NotImplementedError
        for an integer input to an interpolating mode ("compute_indices_weights_linear" not
        implemented for 'Long').
    """
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.ndim - 2
    out_size, scales = _sizes(input, size, scale_factor, dim)
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        out_size = [int(n * s) for n, s in zip(input.shape[2:], scales)]
        scales = None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes "
                         "and requires a 4-D tensor as input")
    if mode == "area" and dim in (1, 2, 3):
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[dim - 1](
            input, out_size)
    ok = (mode in ("nearest", "nearest-exact") and dim in (1, 2, 3)) or \
        _LINEAR_DIMS.get(mode) == dim or (mode in ("bicubic", "lanczos") and dim == 2)
    if not ok:
        need = _LINEAR_DIMS.get(mode)
        if need is not None and input.ndim in (3, 4, 5):
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                      f"{need + 2}D input")
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
            f"the modes: {_MODES} (got {mode})")
    if mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    dt = input._data.dtype
    if mode not in ("nearest", "nearest-exact") and dt.kind not in "fc":
        aa = antialias or mode == "lanczos"
        if aa and dt == np.uint8:  # (torch runs images through int16 weights there)
            sizes = out_size or [int(n * s) for n, s in zip(input.shape[2:], scales)]
            return _aa_uint8(input, sizes, bool(align_corners), scales or [None] * dim, mode)
        kind = "index_ranges_weights" if aa else "indices_weights_cubic" if mode == "bicubic" \
            else "indices_weights_linear"
        raise NotImplementedError(f"\"compute_{kind}\" not implemented for "
                                  f"'{input.dtype._tensor_name[:-6]}'")
    spatial = tuple(input.shape[2:])
    if out_size is None:
        out_size = [int(n * s) for n, s in zip(spatial, scales)]
    scales = scales or [None] * dim
    zeros = None
    if antialias or mode == "lanczos":  # (4-D bilinear / bicubic / lanczos: checked above)
        mats = [_aa_matrix(n, o, bool(align_corners), sc, dt, mode)
                for n, o, sc in zip(spatial, out_size, scales)]
    elif mode == "bicubic":
        mats = [_cubic_matrix(n, o, bool(align_corners), sc, dt)
                for n, o, sc in zip(spatial, out_size, scales)]
    else:
        mats, zeros = zip(*[_interp_matrix(n, o, mode, bool(align_corners), sc, dt, zeros=True)
                            for n, o, sc in zip(spatial, out_size, scales)])
        zeros = None if zeros[0] is None else list(zeros)
    name = f"_upsample_{mode}2d_aa" if antialias or mode == "lanczos" else _row_name(mode, dim)
    back = None if zeros is None else [z.T for z in zeros]
    if dim == 3:
        return _linear(name, input, _along(mats, zeros), _along([m.T for m in mats], back))
    mh = mats[0] if dim == 2 else None
    zh, zw = (None, None) if zeros is None else (zeros[0] if dim == 2 else None, zeros[-1])
    bh, bw = (None, None) if back is None else (back[0] if dim == 2 else None, back[-1])
    return _linear(name, input, _mat_fwd(mh, mats[-1], zh, zw),
                   _mat_fwd(None if mh is None else mh.T, mats[-1].T, bh, bw))


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (mirrors ``F.upsample``; warns as torch)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(mode="nearest")`` (mirrors ``F.upsample_nearest``; warns)."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(mode="bilinear", align_corners=True)`` (mirrors
    ``F.upsample_bilinear``; warns)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- power-average pooling: torch's composition ---------------------------------------------------
def _lp(out, norm_type, window):
    return (out.sign() * relu(out.abs())).mul(window).pow(1.0 / norm_type)


def _infinite(norm_type):
    return isinstance(norm_type, (int, float)) and norm_type in (float("inf"), -float("inf"))


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, max_pool, avg_pool, k):
    """torch's lp_pool body for every dimension: ``avg_pool(x^p) * k`` then the p-th root, sign
    kept (``k`` the window's size); p = +-inf: max-pooling of |x| (of -|x| for -inf)."""
    if _infinite(norm_type):
        out = max_pool(input.abs() if norm_type > 0 else -input.abs(), kernel_size, stride, 0, 1,
                       ceil_mode)
        return out if norm_type > 0 else -out
    if stride is not None:
        out = avg_pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp(out, norm_type, k)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``(sum over the window of x^p)^(1/p)`` over (N, C, L) or (C, L) (mirrors ``F.lp_pool1d``:
    ``avg_pool1d(x^p) * k`` then the p-th root, sign kept; p = +-inf: max-pooling of |x|)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, max_pool1d, avg_pool1d,
                    kernel_size)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over (N, C, H, W) or (C, H, W) (mirrors ``F.lp_pool2d``)."""
    kw, kh = _pair(kernel_size, "kernel_size")
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, max_pool2d, avg_pool2d,
                    kw * kh)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over (N, C, D, H, W) or (C, D, H, W) (mirrors ``F.lp_pool3d``)."""
    kd, kw, kh = _triple(kernel_size, "kernel_size")
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, max_pool3d, avg_pool3d,
                    kd * kw * kh)


# ---- max-unpooling -------------------------------------------------------------------------------
def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """torch's _unpool_output_size: the default (in - 1) * stride + kernel - 2 * padding, or the
    given size checked against it."""
    n = len(kernel_size)
    default = [(input.shape[-n + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]
               for d in range(n)]
    if output_size is None:
        ret = default
    else:
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} "
                             f"elements, but it has a length of '{len(output_size)}'")
        for d in range(n):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < output_size[d] < hi:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                                 f'{lo} and {hi})')
        ret = output_size
    for d in range(n):
        if ret[d] < 0:
            raise ValueError("max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={ret[d]}")
    return [int(v) for v in ret]


def _unpool(input, indices, output_size, name):
    """Checks of torch's max_unpooling{2,3}d, then the row."""
    nd = len(output_size)
    if indices.dtype._tensor_name != "LongTensor":
        raise RuntimeError("elements in indices should be type int64 but got: "
                           f"{indices.dtype._tensor_name[:-6]}")
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Input to max_unpooling{nd}d should be a {nd + 1}d or {nd + 2}d "
                           f"Tensor, but got a tensor with {input.ndim} dimensions.")
    if tuple(input.shape) != tuple(indices.shape):
        raise RuntimeError("Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    for i in range(1, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"max_unpooling{nd}d_forward_out_cpu(): Expected input to have "
                               "non-zero size for non-batch dimensions, but got "
                               f"{list(input.shape)} with dimension {i} being empty.")
    if input._data.dtype.kind not in "fc":
        raise NotImplementedError(f"\"max_unpool{nd}d\" not implemented for "
                                  f"'{input.dtype._tensor_name[:-6]}'")
    idx = indices._data
    return apply(ROWS[name], (input,), (idx, tuple(output_size)))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool1d(..., return_indices=True)``: each value written at
    its index in zeros of (N, C, L_out) (mirrors ``F.max_unpool1d``: max_unpool2d over a
    width-1 image, MaxUnpool2DBackward0 then SqueezeBackward1)."""
    k = (_single(kernel_size),)
    s = (_single(stride),) if stride is not None else k
    p = (_single(padding),)
    out = _unpool_output_size(input, k, s, p, output_size)
    return _unpool(input.unsqueeze(-1), indices.unsqueeze(-1), out + [1],
                   "max_unpool2d").squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool2d(..., return_indices=True)`` (mirrors
    ``F.max_unpool2d``; one MaxUnpool2DBackward0 node).

    Shapes: input and indices (N, C, H, W) or (C, H, W) -> (N, C, H_out, W_out), by default
    ``(H - 1) * stride - 2 * padding + kernel_size``.

    Raises:
        RuntimeError: indices not int64, of another shape than input, or outside the output
        (torch's texts); ValueError: an output_size out of range.
    """
    k = _pair(kernel_size, "kernel_size")
    s = _pair(stride, "stride") if stride is not None else k
    p = _pair(padding, "padding")
    out = _unpool_output_size(input, k, s, p, output_size)
    return _unpool(input, indices, out, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool3d(..., return_indices=True)`` (mirrors
    ``F.max_unpool3d``; one MaxUnpool3DBackward0 node); shapes (N, C, D, H, W) or (C, D, H, W)."""
    k = _triple(kernel_size, "kernel_size")
    s = _triple(stride, "stride") if stride is not None else k
    p = _triple(padding, "padding")
    out = _unpool_output_size(input, k, s, p, output_size)
    return _unpool(input, indices, out, "max_unpool3d")
