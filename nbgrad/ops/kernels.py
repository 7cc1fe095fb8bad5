"""Array kernels behind the core's convolution, max_pool2d and LSTM-layer rows (ops/nn.py):
forward and the pieces of backward, on numpy or cupy arrays. No tensors, no autograd here — the
derivative formulas stay in the op table, which calls these.

On small images numpy's cost is the number of contiguous runs a copy or an elementwise op walks,
not the number of values, so the layouts are chosen to make runs long:

- convolution: im2col into one matrix product, the columns taken channels-last (runs of ``kw*C``
  values) or channels-first (runs of ``Wo`` values), whichever runs are longer. The bias rides in
  the product as one more column (row) of ones, so its gradient comes out of the weight's.
  Backward is two products; for channels-last at stride 1 the input gradient is a full
  correlation with the flipped kernel (one more im2col and product, a few images at a time).
- max pooling: a ``(kh*kw, N*C*Ho*Wo)`` boolean mask of the chosen maxima (torch's choice: the
  first maximum in raster order, the last NaN) is all backward needs. Non-overlapping windows
  (kernel == stride, the usual ``MaxPool2d(2)``) are read as whole rows: the ``kh`` rows of each
  window are moved apart in one copy (:func:`_swap_rows`), each window offset's values are then
  made contiguous, and backward writes through 1-D strided views of the same row layout.
- LSTM layer: a time step is one (B, H) @ (H, 4H) product and a few elementwise ops on its
  (B, 4H) result, so the cost is the number of array calls per step. The sigmoid of gates i, f, o
  is ``0.5 * tanh(z / 2) + 0.5``: the weights of those gates are halved once per call, so one
  tanh covers all four gates; the biases ride in the input projection as a column of ones; every
  step writes into preallocated (T, B, *) buffers, which backward reads. ``i * g`` and
  ``f * c`` are one product (the cell state sits after the gates in the step's buffer) and
  their sum one (2,) @ (2, B*H) product. With no graph to record (``keep=False``) the steps
  use two buffers in turn (0.6 MB less written for T=8, B=H=64) and the sigmoid's factor 1/2
  is carried by powers of two (exact) instead of one more pass: eight array calls a step.
"""

import numpy as np

from ..autograd.grad_mode import GENERAL_PATH
from ..backend import get_array_module as _xp

# rows of a temporary im2col block (the input gradient's correlation): ~150 KB for 3x3 kernels
# over 32 channels, which stays in cache; one whole-batch copy (1.2 MB for the digits CNN) made
# the training step 5-10% slower on a shared machine
_BLOCK_ROWS = 128
# numpy's window views built by ndarray(buffer=) rather than as_strided (NBGRAD_GENERAL_PATH=1: off)
_FAST_VIEW = not GENERAL_PATH

__all__ = ["conv2d_forward", "conv2d_backward", "max_pool2d_forward", "max_pool2d_backward",
           "max_pool2d_indices", "pool_out_size", "lstm_layer_forward", "lstm_layer_backward",
           "erf_float32"]


def _pair(v):
    return (int(v[0]), int(v[1])) if isinstance(v, (tuple, list)) else (int(v), int(v))


def _swap_rows(a):
    """(A, B, W) -> (B, A, W) C-contiguous. numpy walks such a copy one row of ``W`` values at a
    time; viewing each row as one opaque (void) element lets it copy in one long loop instead,
    3-10x faster for rows of 4-16 values. Other array modules copy as usual."""
    xp = _xp(a)
    if xp is not np or not a.flags.c_contiguous or a.size == 0:
        return xp.ascontiguousarray(a.transpose(1, 0, 2))
    n_a, n_b, w = a.shape
    rows = a.view(np.dtype((np.void, w * a.itemsize)))[..., 0]  # (A, B) of opaque rows
    return np.ascontiguousarray(rows.T).view(a.dtype).reshape(n_b, n_a, w)


def _to_nchw(out, n, length):
    """(O, N*L) product result -> (N, O, L) C-contiguous (a copy of runs of L values)."""
    return _swap_rows(out.reshape(out.shape[0], n, length))


def _from_nchw(gy):
    """(N, O, Ho, Wo) -> (O, N*Ho*Wo) C-contiguous, the layout of the products' results."""
    n, o, ho, wo = gy.shape
    return _swap_rows(_xp(gy).ascontiguousarray(gy).reshape(n, o, ho * wo)).reshape(o, n * ho * wo)


# ---------------------------------------------------------------------------- convolution
def _conv_geometry(x_shape, w_shape, stride, padding, dilation, groups):
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    n, c, h, wd = x_shape
    o, cg, kh, kw = w_shape
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    # channels-last columns copy runs of kw*C values (C when dilated), channels-first runs of Wo
    # (single values when strided): take the longer runs
    last = (kw * c if dw == 1 else c) >= (wo if sw == 1 else 1)
    return (n, c, h, wd, o, cg, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo, groups, last)


def conv2d_forward(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    """y = conv2d(x, w, b) (torch.nn.functional.conv2d semantics).

    Args:
        x: (N, C, H, W) array. w: (O, C/groups, kh, kw). b: (O,) or None.
        stride, padding, dilation: int or pair (padding >= 0). groups: int.

    Returns:
        (y, ctx): y (N, O, Ho, Wo) C-contiguous; ctx holds what the backward needs (the im2col
        matrix, the reshaped weight, the geometry). The bias rides in the product as one more
        column of ones (channels-first: row), so its gradient comes out of the weight's.
    """
    xp = _xp(x)
    geo = _conv_geometry(x.shape, w.shape, stride, padding, dilation, groups)
    n, c, h, wd, o, cg, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo, g, last = geo
    m, og, kk = n * ho * wo, o // g, kh * kw * cg
    k1 = kk + (b is not None)
    if last:
        # cols (G, N*Ho*Wo, kh*kw*cg [+1]) @ weight (G, kh*kw*cg [+1], og)
        xl = xp.zeros((n, h + 2 * ph, wd + 2 * pw, c), x.dtype)
        xl[:, ph:ph + h, pw:pw + wd, :] = x.transpose(0, 2, 3, 1)
        win = _windows(xl, True, (kh, kw, sh, sw, dh, dw, ho, wo))  # (N,Ho,Wo,kh,kw,C)
        cols = xp.empty((g, m, k1), x.dtype)
        cols[:, :, :kk].reshape(g, n, ho, wo, kh, kw, cg)[...] = \
            win.reshape(n, ho, wo, kh, kw, g, cg).transpose(5, 0, 1, 2, 3, 4, 6)  # the one copy
        wm = xp.empty((g, k1, og), w.dtype)
        wm[:, :kk].reshape(g, kh, kw, cg, og)[...] = \
            w.reshape(g, og, cg, kh, kw).transpose(0, 3, 4, 2, 1)
        if b is not None:
            cols[:, :, kk] = 1
            wm[:, kk] = b.reshape(g, og)
        # (M, O); one group is one 2-D product (numpy's batched matmul costs more around it)
        out = cols[0] @ wm[0] if g == 1 else (cols @ wm).transpose(1, 0, 2).reshape(m, o)
        y = xp.ascontiguousarray(out.reshape(n, ho * wo, o).transpose(0, 2, 1))
    else:
        # weight (G, og, cg*kh*kw [+1]) -- w's own order -- @ cols (G, cg*kh*kw [+1], N*Ho*Wo)
        xpd = x
        if ph or pw:
            xpd = xp.zeros((n, c, h + 2 * ph, wd + 2 * pw), x.dtype)
            xpd[:, :, ph:ph + h, pw:pw + wd] = x
        win = _windows(xpd, False, (kh, kw, sh, sw, dh, dw, ho, wo))  # (C,kh,kw,N,Ho,Wo)
        cols = xp.empty((g, k1, m), x.dtype)
        cols[:, :kk].reshape(g, cg, kh, kw, n, ho, wo)[...] = \
            win.reshape(g, cg, kh, kw, n, ho, wo)  # the one im2col copy
        wm = xp.empty((g, og, k1), w.dtype)
        wm[:, :, :kk] = w.reshape(g, og, kk)
        if b is not None:
            cols[:, kk] = 1
            wm[:, :, kk] = b.reshape(g, og)
        y = _to_nchw(wm[0] @ cols[0] if g == 1 else (wm @ cols).reshape(o, m), n, ho * wo)
    return y.reshape(n, o, ho, wo), (cols, wm, geo)


def _windows(a, last, geo):
    """A strided view of the (kh, kw) windows of a padded image: (N, Ho, Wo, kh, kw, C) of a
    channels-last ``a`` (N, H, W, C) when ``last``, else (C, kh, kw, N, Ho, Wo) of ``a``
    (N, C, H, W)."""
    kh, kw, sh, sw, dh, dw, ho, wo = geo
    if last:
        n, hh, ww, c = a.strides
        shape, strides = (a.shape[0], ho, wo, kh, kw, a.shape[3]), \
            (n, sh * hh, sw * ww, dh * hh, dw * ww, c)
    else:
        n, c, hh, ww = a.strides
        shape, strides = (a.shape[1], kh, kw, a.shape[0], ho, wo), \
            (c, dh * hh, dw * ww, n, sh * hh, sw * ww)
    if _FAST_VIEW and type(a) is np.ndarray and a.flags.c_contiguous:
        # the same view as as_strided's, made by ndarray's constructor over a's buffer (which
        # checks the view stays inside it): 0.4 instead of 5 us a call
        return np.ndarray(shape, a.dtype, a, 0, strides)
    return _xp(a).lib.stride_tricks.as_strided(a, shape, strides)


def conv2d_backward(gy, ctx, needs=(True, True, True)):
    """Gradients of :func:`conv2d_forward` for upstream ``gy`` (N, O, Ho, Wo).

    Returns:
        (gx, gw, gb): arrays shaped like x, w, b (None where ``needs`` is False).
    """
    xp = _xp(gy)
    cols, wm, geo = ctx
    n, c, h, wd, o, cg, kh, kw, sh, sw, ph, pw, dh, dw, ho, wo, g, last = geo
    m, og, kk = n * ho * wo, o // g, kh * kw * cg
    gx = gw = gb = None
    if last:
        gm = xp.ascontiguousarray(gy.transpose(0, 2, 3, 1)).reshape(m, o)
        gg = gm[None] if g == 1 else xp.ascontiguousarray(
            gm.reshape(m, g, og).transpose(1, 0, 2))  # (G, M, og)
        if needs[1] or needs[2]:
            gwb = cols.transpose(0, 2, 1) @ gg  # (G, kh*kw*cg [+1], og)
            gb = gwb[:, kk].reshape(o) if needs[2] else None
            gw = xp.ascontiguousarray(
                gwb[:, :kk].reshape(g, kh, kw, cg, og).transpose(0, 4, 3, 1, 2))
            gw = gw.reshape(o, cg, kh, kw) if needs[1] else None
        if not needs[0]:
            return gx, gw, gb
        if g == 1 and sh == sw == dh == dw == 1 and ph < kh and pw < kw and \
                xp.isfinite(wm).all():
            # stride 1: the input gradient is a full correlation of gy with the flipped kernel --
            # one im2col and one product instead of kh*kw strided slice-adds (not with an inf or
            # NaN weight: the zeros padding gy would take it where torch's col2im adds none)
            wf = wm[0, :kk].reshape(kh, kw, c, o)[::-1, ::-1].transpose(0, 1, 3, 2)
            wf = xp.ascontiguousarray(wf).reshape(kh * kw * o, c)  # (kh*kw*O, C)
            qh, qw = kh - 1 - ph, kw - 1 - pw
            gl = xp.zeros((n, ho + 2 * qh, wo + 2 * qw, o), gy.dtype)
            gl[:, qh:qh + ho, qw:qw + wo, :] = gm.reshape(n, ho, wo, o)
            win = _windows(gl, True, (kh, kw, 1, 1, 1, 1, h, wd))  # (N,H,W,kh,kw,O)
            gx = xp.empty((n, h, wd, c), gy.dtype)
            step = max(1, _BLOCK_ROWS // (h * wd))
            for s in range(0, n, step):  # im2col and product a few images at a time, so the
                xp.matmul(win[s:s + step].reshape(-1, kh * kw * o), wf,  # copy stays in cache
                          out=gx[s:s + step].reshape(-1, c))
            return xp.ascontiguousarray(gx.transpose(0, 3, 1, 2)), gw, gb
        gcols = gg @ wm[:, :kk].transpose(0, 2, 1)  # (G, M, kh*kw*cg)
        gcols = gcols.reshape(g, n, ho, wo, kh, kw, cg).transpose(1, 2, 3, 4, 5, 0, 6)
        gcols = gcols.reshape(n, ho, wo, kh, kw, c)
        gxl = xp.zeros((n, h + 2 * ph, wd + 2 * pw, c), gy.dtype)
        for i in range(kh):  # col2im: one strided slice-add per kernel offset
            for j in range(kw):
                gxl[:, i * dh: i * dh + sh * (ho - 1) + 1: sh,
                    j * dw: j * dw + sw * (wo - 1) + 1: sw, :] += gcols[:, :, :, i, j, :]
        gx = xp.ascontiguousarray(gxl[:, ph:ph + h, pw:pw + wd, :].transpose(0, 3, 1, 2))
        return gx, gw, gb
    gg = _from_nchw(gy).reshape(g, og, m)
    if needs[1] or needs[2]:
        gwb = gg @ cols.transpose(0, 2, 1)  # (G, og, cg*kh*kw [+1])
        gb = gwb[:, :, kk].reshape(o) if needs[2] else None
        gw = gwb[:, :, :kk].reshape(o, cg, kh, kw) if needs[1] else None
    if needs[0]:
        gcols = (wm[:, :, :kk].transpose(0, 2, 1) @ gg).reshape(c, kh, kw, n, ho, wo)
        gxp = xp.zeros((c, n, h + 2 * ph, wd + 2 * pw), gy.dtype)
        for i in range(kh):  # col2im: one strided slice-add per kernel offset
            for j in range(kw):
                gxp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh,
                    j * dw: j * dw + sw * (wo - 1) + 1: sw] += gcols[:, i, j]
        gx = xp.ascontiguousarray(gxp[:, :, ph:ph + h, pw:pw + wd].transpose(1, 0, 2, 3))
    return gx, gw, gb


# ---------------------------------------------------------------------------- max pooling
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


def _tiles(geo, shape):
    """Whether the windows tile the image: non-overlapping, unpadded, undilated, every window
    whole (kernel == stride; rows and columns past the last window are left out)."""
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    return ((kh, kw) == (sh, sw) and ph == pw == 0 and dh == dw == 1
            and ho * kh <= shape[2] and wo * kw <= shape[3])


def _offset_views(a, geo):
    """The kh*kw views (N, C, Ho, Wo) of a padded image, one per window offset (raster order)."""
    kh, kw, sh, sw, _, _, dh, dw, ho, wo = geo
    return [a[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
            for i in range(kh) for j in range(kw)]


def _tile_views(rows, geo):
    """The kh*kw 1-D strided views (N*C*Ho*Wo,) of ``rows`` (kh, N*C*Ho, Wo*kw), an image with
    the kh rows of each window moved apart (:func:`_swap_rows`), in window raster order."""
    kh, kw = geo[:2]
    return [rows[i].reshape(-1, kw)[:, j] for i in range(kh) for j in range(kw)]


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


def _chosen(views, y, valid=None):
    """(K, y.size) bool: True at the maximum each window passes back, as torch's kernel chooses
    it: the first maximum in raster order, or the last NaN where the window holds one. ``valid``
    (optional K views of bools) excludes padding, which only matters when a window's values are
    all -inf."""
    xp = _xp(y)
    k_all = len(views)
    mask = xp.empty((k_all, y.size), bool)
    for k, v in enumerate(views):
        xp.equal(v, y, out=mask[k].reshape(y.shape))
        if valid is not None:
            mask[k] &= valid[k].reshape(-1)
    _keep_first(mask, range(k_all))
    if bool(xp.isnan(y).any()):  # NaN != NaN: those windows have no True yet
        nan = xp.empty_like(mask)
        for k, v in enumerate(views):
            xp.not_equal(v, v, out=nan[k].reshape(y.shape))
        _keep_first(nan, range(k_all - 1, -1, -1))
        mask |= nan
    return mask


def _keep_first(mask, order):
    """Along axis 0 of ``mask``, in the given order of rows, keep only each column's first True."""
    xp = _xp(mask)
    order = list(order)
    seen = mask[order[0]].copy()
    for k in order[1:]:
        xp.greater(mask[k], seen, out=mask[k])  # True and not seen before
        seen |= mask[k]


def max_pool2d_forward(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Max over windows (torch.nn.functional.max_pool2d semantics, -inf padding).

    Args:
        x: (N, C, H, W) array, or (C, H, W) (unbatched: y too; ctx as for N = 1).

    Returns:
        (y, ctx): y (N, C, Ho, Wo) C-contiguous; ctx for the backward and
        :func:`max_pool2d_indices`. The maximum chosen is torch's: the first in raster order of
        the window, the last NaN where there is one (a NaN counts as maximum).
    """
    if x.ndim == 3:
        y, ctx = max_pool2d_forward(x[None], kernel_size, stride, padding, dilation, ceil_mode)
        return y[0], ctx
    xp = _xp(x)
    y, views, geo, padded = _pool_max(x, kernel_size, stride, padding, dilation, ceil_mode)
    valid = None
    if padded and bool((y == -xp.inf).any()):
        # a window whose values are all -inf must not choose its -inf padding
        valid = _offset_views(_padded(xp.ones(x.shape, bool), geo, False), geo)
    mask = _chosen(views, y, valid)
    return y.reshape(x.shape[:2] + geo[-2:]), (mask, geo, tuple(x.shape))


def max_pool2d_values(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """:func:`max_pool2d_forward`'s y alone (nothing will be differentiated: no choice of
    maxima, which costs about as much as the maxima)."""
    geo = _pool_geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    if not _tiles(geo, x.shape):
        y, _, geo, _ = _pool_max(x, kernel_size, stride, padding, dilation, ceil_mode)
        return y.reshape(x.shape[:2] + geo[-2:])
    # tiles: no window views at all -- the max across each window's kw columns (1-D strided
    # views of one long run), the kh rows of the result moved apart (:func:`_swap_rows`), the max
    # across them (contiguous): two passes and one copy of half the image
    xp = _xp(x)
    kh, kw, ho, wo = geo[0], geo[1], geo[-2], geo[-1]
    n, c = x.shape[:2]
    cols = xp.ascontiguousarray(x[:, :, :ho * kh, :wo * kw]).reshape(-1, kw)
    r = _max_fold([cols[:, j] for j in range(kw)])  # (N*C*Ho*kh*Wo,)
    if kh > 1:
        r = _max_fold(list(_swap_rows(r.reshape(n * c * ho, kh, wo))))
    return r.reshape(n, c, ho, wo)


def _max_fold(views):
    """The elementwise max of ``views`` (same shape) as a new array. Folded from the last view
    to the first: numpy's maximum returns its second argument on a tie, so of equal values (0.0
    and -0.0) the first in window raster order is kept, as torch's kernel keeps it; a NaN
    propagates."""
    xp = _xp(views[0])
    if len(views) == 1:
        return views[0].copy()
    y = xp.maximum(views[-1], views[-2])
    for v in views[-3::-1]:
        xp.maximum(y, v, out=y)
    return y


def _pool_max(x, kernel_size, stride, padding, dilation, ceil_mode):
    """(the maxima (N*C*Ho*Wo,), the windows' values per offset, the geometry, whether x was
    padded)."""
    xp = _xp(x)
    n, c = x.shape[:2]
    geo = _pool_geometry(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    padded = False
    if _tiles(geo, x.shape):
        # the kh rows of each window apart, then each window offset's values contiguous
        whole = xp.ascontiguousarray(x[:, :, :ho * kh, :wo * kw])
        rows = _swap_rows(whole.reshape(n * c * ho, kh, wo * kw))  # (kh, N*C*Ho, Wo*kw)
        views = xp.ascontiguousarray(rows.reshape(kh, -1, kw).transpose(0, 2, 1))
        views = views.reshape(kh * kw, -1)  # (kh*kw, N*C*Ho*Wo)
    else:
        xpad = _padded(x, geo, -xp.inf)
        views, padded = _offset_views(xpad, geo), xpad is not x
    return _max_fold(list(views)), views, geo, padded


def max_pool2d_indices(ctx):
    """torch's ``return_indices``: int64 flat index into H*W of each chosen maximum."""
    mask, geo, (n, c, h, w) = ctx
    xp = _xp(mask)
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    arg = mask.argmax(0).reshape(n, c, ho, wo).astype(np.int64)
    rows = (xp.arange(ho) * sh - ph)[:, None] + (arg // kw) * dh
    cols = (xp.arange(wo) * sw - pw)[None, :] + (arg % kw) * dw
    return rows * w + cols


def max_pool2d_backward(gy, ctx):
    """Gradient of :func:`max_pool2d_forward`: each ``gy`` value goes to its window's chosen
    maximum (added, since overlapping windows may share one); every other value gets 0."""
    xp = _xp(gy)
    mask, geo, (n, c, h, w) = ctx
    kh, kw, sh, sw, ph, pw, dh, dw, ho, wo = geo
    g = xp.ascontiguousarray(gy).reshape(-1)
    finite = bool(xp.isfinite(g).all())  # else 0 * inf would leave NaN off the maxima

    def scatter(k, out):
        if finite:
            xp.multiply(mask[k], g, out=out)
        else:
            out[...] = xp.where(mask[k], g, gy.dtype.type(0))

    if _tiles(geo, (n, c, h, w)):
        rows = xp.empty((kh, n * c * ho, wo * kw), gy.dtype)
        for k, view in enumerate(_tile_views(rows, geo)):
            scatter(k, view)
        whole = _swap_rows(rows).reshape(n, c, ho * kh, wo * kw)
        if whole.shape[2:] == (h, w):
            return whole
        gx = xp.zeros((n, c, h, w), gy.dtype)
        gx[:, :, :ho * kh, :wo * kw] = whole
        return gx
    padded = _padded(xp.empty((n, c, h, w), gy.dtype), geo, 0)
    gx = xp.zeros(padded.shape, gy.dtype)
    part = xp.empty((n, c, ho, wo), gy.dtype)
    for k, view in enumerate(_offset_views(gx, geo)):
        scatter(k, part.reshape(-1))
        view += part
    if gx.shape != (n, c, h, w):
        gx = xp.ascontiguousarray(gx[:, :, ph:ph + h, pw:pw + w])
    return gx


# ---------------------------------------------------------------------------------- LSTM layer
# Gate-major layout: each step's gates are (4, B, H), one contiguous (B, H) block per gate, in
# the order i, f, o, g (the three sigmoid gates side by side). numpy runs an op on a column
# block of a (B, 4H) array row by row, 3-5x slower than on a contiguous block.
_IFOG = [0, 1, 3, 2]  # torch's gate blocks (i, f, g, o) in that order (and back: it swaps two)


def lstm_layer_forward(x, w_ih, w_hh, b_ih, b_hh, h, c, reverse, keep=True):
    """One LSTM layer over the whole sequence (torch's gates i, f, g, o).

    Args: x (T, B, I); w_ih (4H, I); w_hh (4H, H); b_ih, b_hh (4H,) or None; h, c (B, H);
    reverse: run from the last step to the first (output stays in input time order); keep:
    keep every step's activations for the backward (False, no graph recorded: two steps'
    buffers, used in turn, the same numbers).
    Returns: ((output (T, B, H), hy, cy), ctx) with ctx = (gates (T, 4, B, H): sigmoid of i,
    f, o and tanh of g, in that order; cell states (T, B, H); their tanh (T, B, H)), in time
    order, for the backward; None unless ``keep``.
    """
    m = _xp(x)
    n, batch, size = x.shape
    hidden = w_hh.shape[1]
    dt = x.dtype
    scale = m.asarray([0.5, 0.5, 0.5, 1], dt).reshape(4, 1, 1)  # sigmoid(z) = 0.5 tanh(z/2) + 0.5
    wx = m.empty((4, size + 1, hidden), dt)  # per gate [w_ih.T; bias], gates i, f, o halved
    m.multiply(w_ih.reshape(4, hidden, size)[_IFOG].transpose(0, 2, 1), scale, out=wx[:, :size])
    if b_ih is None:
        wx[:, size] = 0
    else:
        m.multiply((b_ih + b_hh).reshape(4, 1, hidden)[_IFOG], scale, out=wx[:, size:])
    x1 = m.empty((n * batch, size + 1), dt)
    x1.reshape(n, batch, size + 1)[:, :, :size] = x  # (x may be a batch-first view: one copy)
    x1[:, size] = 1
    proj = m.matmul(x1.reshape(n, 1, batch, size + 1), wx)  # (T, 4, B, H): a block per step
    # keep (a backward will read the steps): the gates hold sigmoid(z), two calls (x 0.5,
    # + 0.5); else 2 sigmoid(z), one call (+ 1), and the factor 2 rides along exactly (powers of
    # two): the hidden state is carried as 2h against w_hh.T halved once more (the first step
    # reads h0 itself, 2 h0 could overflow, and doubles its product), the cell state halves
    # its sum (2i g + 2f c) / 2 in the product that adds it
    d = 1 if keep else 2
    wh = m.empty((4, hidden, hidden), dt)  # per gate w_hh.T, contiguous: a faster operand
    m.multiply(w_hh.reshape(4, hidden, hidden)[_IFOG].transpose(0, 2, 1), scale / d, out=wh)
    # one buffer per step: gates i, f, o, g, then the cell state the step reads, so that i * g
    # and f * c are one product; the step writes its cell state into the next slot (reverse:
    # the previous one; without ``keep``, two slots in turn)
    r = 1 if reverse else 0
    cells = m.empty((n + 1 if keep else 2, 5, batch, hidden), dt)
    first = n if reverse and keep else 0
    cells[first, 4] = c
    flat = cells.reshape(len(cells), 5, batch * hidden)[:, 4]
    hd = m.empty((n, batch, hidden), dt)  # d h, in time order
    tanh_c = m.empty((n if keep else 1, batch, hidden), dt)
    both = m.empty((2, batch, hidden), dt)
    ways = both.reshape(2, batch * hidden)
    add = m.full((2,), 1 / d, dt)  # (i g + f c: one rounding, as a sum)
    # the scalars typed as the arrays (a Python number costs numpy a promotion per call) and
    # each slot's views made once: (gates, the three sigmoid gates, i and f, g and the cell
    # state, o, the cell state and it flat) -- two slots without ``keep``, T + 1 with it
    one, half = dt.type(1), dt.type(0.5)
    views = [(s[:4], s[:3], s[:2], s[3:], s[2], s[4], f) for s, f in zip(cells, flat)]
    b = first  # (the slot of the last cell state)
    for k, t in enumerate(range(n - 1, -1, -1) if reverse else range(n)):
        a, b = (t + r, t + 1 - r) if keep else (k & 1, ~k & 1)  # the slots it reads, writes
        g4, sig, i_f, g_c, o = views[a][:5]
        if k:
            m.matmul(hd[t - 1 + 2 * r], wh, out=g4)
        else:
            m.matmul(h, wh, out=g4)
            if d != 1:
                g4 *= d
        g4 += proj[t]
        m.tanh(g4, out=g4)
        if keep:
            sig *= half
            sig += half
        else:
            sig += one
        m.multiply(i_f, g_c, out=both)  # d i g, d f c
        c_next, c_flat = views[b][5:]
        m.matmul(add, ways, out=c_flat)  # c
        tc = tanh_c[t if keep else 0]
        m.tanh(c_next, out=tc)
        m.multiply(o, tc, out=hd[t])  # d o tanh(c)
    out = hd if d == 1 else m.multiply(hd, 1 / d)
    states = (out, out[0 if reverse else n - 1].copy() if n else h.copy(), cells[b, 4].copy())
    if not keep:
        return states, None
    gates = cells[1:, :4] if reverse else cells[:n, :4]
    return states, (gates, cells[:n, 4] if reverse else cells[1:, 4], tanh_c)


def lstm_layer_backward(g_out, dh, dc, ctx, x, w_ih, w_hh, h0, c0, out, reverse, needs):
    """Back through time for :func:`lstm_layer_forward`: the gradients of (x, w_ih, w_hh, b_ih,
    b_hh, h0, c0) (None where ``needs`` says no), from those of (output, hy, cy) (None: zero)."""
    m = _xp(w_hh)
    gates, cells, tanh_c = ctx
    n, _, batch, hidden = gates.shape
    size = x.shape[2]
    if dh is None:
        dh = m.zeros((batch, hidden), w_hh.dtype)
    if dc is None:
        dc = m.zeros((batch, hidden), w_hh.dtype)
    w4 = w_hh.reshape(4, hidden, hidden)[_IFOG]  # per gate (H out, H in), as the gates
    # gate-major: (4, T*B, H) below, its steps in the order the forward ran them (reverse: time
    # reversed): the weight gradients sum T*B products in that order, as torch's oneDNN does.
    # The steps backward reaches first (the forward's last) usually carry the largest gradients;
    # summed first in float32, the many small ones after lost 2-3x torch's precision (issue 23)
    dz = m.empty((4, n, batch, hidden), gates.dtype)
    slope = m.empty((4, batch, hidden), gates.dtype)
    steps = range(n) if reverse else range(n - 1, -1, -1)  # the last step first
    for t in steps:
        s, tc, dzt = gates[t], tanh_c[t], dz[:, n - 1 - t if reverse else t]
        prev = t + 1 if reverse else t - 1
        c_in = c0 if prev < 0 or prev >= n else cells[prev]
        if g_out is not None:
            dh = dh + g_out[t]
        dc = dc + dh * s[2] * (1 - tc * tc)
        m.multiply(dc, s[3], out=dzt[0])  # through i
        m.multiply(dc, c_in, out=dzt[1])  # through f
        m.multiply(dh, tc, out=dzt[2])  # through o
        m.multiply(dc, s[0], out=dzt[3])  # through g
        m.multiply(s, s, out=slope)  # sigmoid' = s - s^2 of i, f, o; tanh' = 1 - g^2 of g
        m.subtract(s[:3], slope[:3], out=slope[:3])
        m.subtract(1, slope[3], out=slope[3])
        dzt *= slope
        dc = dc * s[1]
        dh = m.add.reduce(m.matmul(dzt, w4), 0)
    flat = dz.reshape(4, n * batch, hidden)
    gx = gw_ih = gw_hh = gb = None
    if needs[0]:
        gx = m.add.reduce(m.matmul(flat, w_ih.reshape(4, hidden, size)[_IFOG]), 0).reshape(x.shape)
        gx = m.ascontiguousarray(gx[::-1]) if reverse else gx
    if needs[1]:
        x_run = m.ascontiguousarray(x[::-1]) if reverse else x  # in dz's step order
        gw_ih = m.matmul(flat.transpose(0, 2, 1), x_run.reshape(n * batch, size))[_IFOG]
        gw_ih = gw_ih.reshape(4 * hidden, size)
    if needs[2]:
        h_in = m.empty(out.shape, out.dtype)  # the hidden state each step read, in dz's order
        h_in[0] = h0
        h_in[1:] = out[:0:-1] if reverse else out[:-1]
        gw_hh = m.matmul(flat.transpose(0, 2, 1), h_in.reshape(n * batch, hidden))[_IFOG]
        gw_hh = gw_hh.reshape(4 * hidden, hidden)
    if needs[3] or needs[4]:
        gb = m.add.reduce(flat, 1)[_IFOG].reshape(4 * hidden)
    return (gx, gw_ih, gw_hh, gb if needs[3] else None, gb.copy() if needs[4] else None,
            dh if needs[5] else None, dc if needs[6] else None)


# ---------------------------------------------------------------------------------- erf, float32
# erf(x) = tanh(x S(x^2)), S a polynomial of degree 6 fitted for this file (iteratively
# reweighted least squares against atanh(erf) from scipy in float64, weighted by how an error in
# S moves erf: fully near 0, hardly where tanh saturates). Evaluated in float32 it stays within
# 4 ulps of torch's float32 erf (3.8 of the exact value) over a dense grid of [-8, 8], the
# denormals and +-inf/NaN: numpy's tanh saturates to +-1 by itself (x S(x^2) > 9 for
# |x| >= 3.9), so no clip; 16 passes where the previous rational x P(x^2) / Q(x^2) took 24.
# scipy's erf walks the array one element at a time (11 ns per value).
_ERF_S = (1.12837927431102, 0.10276905564406642, -0.00019183025237903093,
          -0.0006197852961216092, 8.763762069383634e-05, -5.6685310715445945e-06,
          1.418557599811076e-07)
_ERF_SCALED = {}


def _erf_coefs(scale):
    """S's coefficients for erf(scale * x), as float32: ``c_k scale^(2k+1)``."""
    c = _ERF_SCALED.get(scale)
    if c is None:
        c = _ERF_SCALED[scale] = tuple(np.float32(ck * scale ** (2 * k + 1))
                                       for k, ck in enumerate(_ERF_S))
    return c


def erf_float32(x, scale=1.0):
    """erf(scale * x) of a float32 array (NaN stays NaN, +-inf gives +-1), as a new float32
    array; the scale rides in the coefficients (GELU's erf(x / sqrt 2) takes no pass for it)."""
    c = _erf_coefs(scale)
    with np.errstate(over="ignore"):  # x^2 and x S(x^2) overflow to inf for |x| > ~1e6: tanh 1
        u = x * x
        p = u * c[6]
        for k in c[5:0:-1]:
            p += k
            p *= u
        p += c[0]
        p *= x
        m = _xp(x)
        return m.tanh(p, out=p) if p.ndim else m.tanh(p)  # (0-d: numpy gives scalars)
