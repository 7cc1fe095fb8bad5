"""Array kernels behind the core's convolution and max_pool2d rows (ops.py): forward and the
pieces of backward, on numpy or cupy arrays. No tensors, no autograd here — the derivative
formulas stay in the op table, which calls these. The layouts are chosen for numpy's speed on
small images: im2col is taken channels-last, so every copied run is ``kw * C``
values long (NCHW's runs are ``kw`` long, which numpy copies an order of magnitude slower), and
pooling compares the ``kh * kw`` strided window views elementwise instead of reducing over tiny
window axes.
"""

import numpy as np

__all__ = ["conv2d_forward", "conv2d_backward", "max_pool2d_forward", "max_pool2d_backward",
           "max_pool2d_indices", "pool_out_size"]


def _xp(arr):
    from ..backend import get_array_module
    return get_array_module(arr)


def _pair(v):
    return (int(v[0]), int(v[1])) if isinstance(v, (tuple, list)) else (int(v), int(v))


def _sliding(xl, kh, kw, sh, sw, dh, dw, ho, wo):
    """(N, Hp, Wp, C) contiguous -> a strided view (N, Ho, Wo, kh, kw, C) of its windows."""
    xp = _xp(xl)
    s = xl.strides
    return xp.lib.stride_tricks.as_strided(
        xl, (xl.shape[0], ho, wo, kh, kw, xl.shape[3]),
        (s[0], sh * s[1], sw * s[2], dh * s[1], dw * s[2], s[3]))


def conv2d_forward(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    """y = conv2d(x, w, b) (torch.nn.functional.conv2d semantics).

    Args:
        x: (N, C, H, W) array. w: (O, C/groups, kh, kw). b: (O,) or None.
        stride, padding, dilation: int or pair (padding >= 0). groups: int.

    Returns:
        (y, ctx): y (N, O, Ho, Wo) C-contiguous; ctx holds what the backward needs (the im2col
        matrix, the reshaped weight, the geometry).
    """
    xp = _xp(x)
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    hp, wp = h + 2 * ph, wd + 2 * pw
    ho = (hp - dh * (kh - 1) - 1) // sh + 1
    wo = (wp - dw * (kw - 1) - 1) // sw + 1
    xl = xp.zeros((n, hp, wp, c), x.dtype)
    xl[:, ph:ph + h, pw:pw + wd, :] = x.transpose(0, 2, 3, 1)
    win = _sliding(xl, kh, kw, sh, sw, dh, dw, ho, wo)  # (N, Ho, Wo, kh, kw, C)
    og = o // groups
    if groups == 1:
        cols = win.reshape(n * ho * wo, kh * kw * c)  # the one im2col copy
        w2 = xp.ascontiguousarray(w.transpose(2, 3, 1, 0)).reshape(kh * kw * c, o)
        out = cols @ w2
    else:
        cols = xp.ascontiguousarray(
            win.reshape(n * ho * wo, kh, kw, groups, cg).transpose(3, 0, 1, 2, 4)
        ).reshape(groups, n * ho * wo, kh * kw * cg)
        w2 = xp.ascontiguousarray(
            w.reshape(groups, og, cg, kh, kw).transpose(0, 3, 4, 2, 1)
        ).reshape(groups, kh * kw * cg, og)
        out = (cols @ w2).transpose(1, 0, 2).reshape(n * ho * wo, o)
    if b is not None:
        out += b
    y = xp.ascontiguousarray(out.reshape(n, ho, wo, o).transpose(0, 3, 1, 2))
    ctx = (cols, w2, (n, c, h, wd), tuple(w.shape), (sh, sw, ph, pw, dh, dw, ho, wo, groups))
    return y, ctx


def conv2d_backward(gy, ctx, needs=(True, True, True)):
    """Gradients of :func:`conv2d_forward` for upstream ``gy`` (N, O, Ho, Wo).

    Returns:
        (gx, gw, gb): arrays shaped like x, w, b (None where ``needs`` is False).
    """
    xp = _xp(gy)
    cols, w2, (n, c, h, wd), (o, cg, kh, kw), geo = ctx
    sh, sw, ph, pw, dh, dw, ho, wo, groups = geo
    g = xp.ascontiguousarray(gy.transpose(0, 2, 3, 1)).reshape(n * ho * wo, o)
    gx = gw = gb = None
    if needs[2]:
        gb = g.sum(0)
    og = o // groups
    if groups > 1:
        gg = xp.ascontiguousarray(g.reshape(n * ho * wo, groups, og).transpose(1, 0, 2))
    if needs[1]:
        if groups == 1:
            gw2 = cols.T @ g  # (kh*kw*C, O)
            gw = xp.ascontiguousarray(gw2.reshape(kh, kw, c, o).transpose(3, 2, 0, 1))
        else:
            gw2 = cols.transpose(0, 2, 1) @ gg  # (G, kh*kw*cg, og)
            gw = xp.ascontiguousarray(
                gw2.reshape(groups, kh, kw, cg, og).transpose(0, 4, 3, 1, 2)
            ).reshape(o, cg, kh, kw)
    if needs[0] and groups == 1 and sh == sw == dh == dw == 1 and ph < kh and pw < kw:
        # stride 1: the input gradient is a full correlation of gy with the flipped kernel —
        # one im2col and one product instead of kh*kw strided slice-adds
        wf = w2.reshape(kh, kw, c, o)[::-1, ::-1].transpose(0, 1, 3, 2)  # (kh, kw, O, C)
        wf = xp.ascontiguousarray(wf).reshape(kh * kw * o, c)
        gl = xp.zeros((n, ho + 2 * (kh - 1 - ph), wo + 2 * (kw - 1 - pw), o), gy.dtype)
        gl[:, kh - 1 - ph:kh - 1 - ph + ho, kw - 1 - pw:kw - 1 - pw + wo, :] = \
            g.reshape(n, ho, wo, o)
        win = _sliding(gl, kh, kw, 1, 1, 1, 1, h, wd)  # (N, H, W, kh, kw, O)
        gx = (win.reshape(n * h * wd, kh * kw * o) @ wf).reshape(n, h, wd, c)
        return xp.ascontiguousarray(gx.transpose(0, 3, 1, 2)), gw, gb
    if needs[0]:
        if groups == 1:
            gcols = (g @ xp.ascontiguousarray(w2.T)).reshape(n, ho, wo, kh, kw, c)
        else:
            gcols = (gg @ xp.ascontiguousarray(w2.transpose(0, 2, 1)))  # (G, NL, kh*kw*cg)
            gcols = gcols.reshape(groups, n, ho, wo, kh, kw, cg).transpose(1, 2, 3, 4, 5, 0, 6)
            gcols = gcols.reshape(n, ho, wo, kh, kw, c)
        hp, wp = h + 2 * ph, wd + 2 * pw
        gxl = xp.zeros((n, hp, wp, c), gy.dtype)
        for i in range(kh):  # col2im: one strided slice-add per kernel offset
            for j in range(kw):
                gxl[:, i * dh: i * dh + sh * (ho - 1) + 1: sh,
                    j * dw: j * dw + sw * (wo - 1) + 1: sw, :] += gcols[:, :, :, i, j, :]
        gx = xp.ascontiguousarray(gxl[:, ph:ph + h, pw:pw + wd, :].transpose(0, 3, 1, 2))
    return gx, gw, gb


def pool_out_size(size, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape (in ceil mode the last window must start inside)."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_geometry(shape, kernel_size, stride, padding, dilation, ceil_mode):
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride) if stride not in (None, (), []) else (kh, kw)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    h, w = shape[2], shape[3]
    ho = pool_out_size(h, kh, sh, ph, dh, ceil_mode)
    wo = pool_out_size(w, kw, sw, pw, dw, ceil_mode)
    return kh, kw, sh, sw, ph, pw, dh, dw, ho, wo


def _offset_views(a, geo):
    kh, kw, sh, sw, _, _, dh, dw, ho, wo = geo
    return [a[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
            for i in range(kh) for j in range(kw)]


def _padded(x, geo, fill):
    xp = _xp(x)
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    n, c, h, w = x.shape
    need_h = max((ho - 1) * sh + dh * (kh - 1) + 1, h + 2 * ph)
    need_w = max((wo - 1) * sw + dw * (kw - 1) + 1, w + 2 * pw)
    if (need_h, need_w) == (h, w):
        return x
    out = xp.full((n, c, need_h, need_w), fill, x.dtype)
    out[:, :, ph:ph + h, pw:pw + w] = x
    return out


def max_pool2d_forward(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Max over windows (torch.nn.functional.max_pool2d semantics, -inf padding).

    Args:
        x: (N, C, H, W) array.

    Returns:
        (y, ctx): y (N, C, Ho, Wo); ctx for the backward and :func:`max_pool2d_indices`. The
        maximum chosen is the first in raster order of the window (a NaN counts as maximum).
    """
    xp = _xp(x)
    geo = _pool_geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    views = _offset_views(_padded(x, geo, -xp.inf), geo)
    y = views[0]
    for v in views[1:]:
        y = xp.maximum(y, v)  # a NaN propagates, as in torch
    arg = xp.full(y.shape, len(views) - 1, np.int8 if len(views) < 128 else np.int64)
    nan = bool(xp.isnan(y).any())
    for k in range(len(views) - 2, -1, -1):
        hit = views[k] == y
        if nan:
            hit |= xp.isnan(views[k])
        arg = xp.where(hit, arg.dtype.type(k), arg)
    return xp.ascontiguousarray(y), (arg, geo, tuple(x.shape))


def max_pool2d_indices(ctx):
    """torch's ``return_indices``: int64 flat index into H*W of each chosen maximum."""
    arg, geo, (n, c, h, w) = ctx
    xp = _xp(arg)
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    arg = arg.astype(np.int64)
    rows = (xp.arange(ho) * sh - ph)[:, None] + (arg // kw) * dh
    cols = (xp.arange(wo) * sw - pw)[None, :] + (arg % kw) * dw
    return rows * w + cols


def max_pool2d_backward(gy, ctx):
    """Gradient of :func:`max_pool2d_forward`: each ``gy`` value goes to its window's maximum
    (added, since overlapping windows may share one)."""
    xp = _xp(gy)
    arg, geo, (n, c, h, w) = ctx
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    padded = _padded(xp.empty((n, c, h, w), gy.dtype), geo, 0)
    gx = xp.zeros(padded.shape, gy.dtype)
    overlap = sh < dh * (kh - 1) + 1 or sw < dw * (kw - 1) + 1
    zero = gy.dtype.type(0)
    for k, view in enumerate(_offset_views(gx, geo)):
        part = xp.where(arg == k, gy, zero)
        if overlap:
            view += part
        else:
            view[...] = part
    if gx.shape != (n, c, h, w):
        gx = xp.ascontiguousarray(gx[:, :, ph:ph + h, pw:pw + w])
    return gx
