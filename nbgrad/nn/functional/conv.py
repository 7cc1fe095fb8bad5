"""Convolutions other than conv2d (conv1d, the transposed ones), padding, unfold/fold
(im2col/col2im), pixel_shuffle and flatten. conv2d itself is torch.conv2d
(nbgrad/functions/nn.py), as in PyTorch.
"""
import numpy as np

from nbgrad import backend
from nbgrad.autograd.apply import apply
from nbgrad.functions.args import conv_dtypes
from nbgrad.functions.nn import _constant_pad, _pair
from nbgrad.ops import ROWS
from .common import _const, _linear, _single


def pad(input, pad, mode="constant", value=0.0):
    """Pad the last ``len(pad) // 2`` dimensions (mirrors ``torch.nn.functional.pad``).

    Args:
        input (Tensor): any shape.
        pad (tuple[int]): ``(left, right, top, bottom, ...)``, last dimension first; a negative
            amount crops (constant mode).
        mode (str): ``"constant"`` (``value``; one ConstantPadNdBackward0 node, as torch),
            ``"reflect"``, ``"replicate"`` (ReflectionPad2DBackward0, ...) or ``"circular"``.
        value (float): fill value.

    Raises:
        RuntimeError: reflect padding not smaller than the dim, a padding of odd length or
            longer than twice the dims, a negative output size (torch's texts);
            NotImplementedError: an unknown mode.
    """
    if mode in ("reflect", "replicate", "circular"):
        return _pad_by_index(input, pad, mode)
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported (constant, reflect, "
                                  "replicate, circular)")
    _check_pad_length(input, pad)
    return _constant_pad(input, pad, value)


def _check_pad_length(input, pad):
    """torch's RuntimeErrors for a padding of odd length, or longer than the input has dims."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{input.ndim}")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding blocks: (N, C, H, W) -> (N, C*kh*kw, L) (mirrors ``F.unfold`` / im2col;
    one Im2ColBackward0 node, as torch)."""
    unbatched = input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    if input.ndim != 4:
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got "
                           f"{input.ndim}D)")
    (kh, kw), (dh, dw) = _pair(kernel_size), _pair(dilation)
    (ph, pw), (sh, sw) = _pair(padding), _pair(stride)
    n, c, h, w = input.shape
    geo = _col_geometry(n, c, h, w, kh, kw, dh, dw, ph, pw, sh, sw)
    if geo[-3] <= 0 or geo[-2] <= 0:
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size=({kh}, {kw}), "
                           f"dilation=({dh}, {dw}), padding=({ph}, {pw}), calculated shape of "
                           f"the array of sliding blocks as ({geo[-3]}, {geo[-2]}), but its "
                           "components must be at least one.")
    out = _linear("im2col", input, _im2col(geo), _col2im(geo))
    return out.squeeze(0) if unbatched else out

def flatten(input, start_dim=0, end_dim=-1):
    """Same as ``nbgrad.flatten`` (mirrors ``torch.flatten``)."""
    return input.flatten(start_dim, end_dim)


def _pad_by_index(input, pad, mode):
    """reflect / replicate / circular padding: gather along each padded dim (reflect and
    replicate of 1 or 2 dims: one ReflectionPad2DBackward0-style node, as torch)."""
    _check_pad_length(input, pad)
    gathers = []
    for i in range(len(pad) // 2):
        d = input.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if not (lo or hi):
            continue
        n = input.shape[d]
        idx = np.arange(-lo, n + hi)
        if mode == "reflect":
            if lo >= n or hi >= n:
                raise RuntimeError(f"Argument #4: Padding size should be less than the "
                                   f"corresponding input dimension, but got: padding ({lo}, "
                                   f"{hi}) at dimension {d} of input {list(input.shape)}")
            idx = np.abs(idx)
            idx = np.where(idx > n - 1, 2 * (n - 1) - idx, idx)
        elif mode == "replicate":
            idx = np.clip(idx, 0, n - 1)
        else:
            if lo > n or hi > n:
                raise ValueError("Padding value causes wrapping around more than once.")
            idx = idx % n
        gathers.append((d, idx.astype(np.int64)))
    k = len(pad) // 2
    if mode in ("reflect", "replicate") and k in (1, 2):
        name = ("reflection" if mode == "reflect" else "replication") + f"_pad{k}d"
        shape = tuple(input.shape)

        def fwd(a):
            xp = backend.get_array_module(a)
            for d, idx in gathers:
                a = xp.take(a, xp.asarray(idx), axis=d)
            return a

        def adj(g):
            xp = backend.get_array_module(g)
            for d, idx in reversed(gathers):
                z = xp.zeros(g.shape[:d] + (shape[d],) + g.shape[d + 1:], g.dtype)
                index = [slice(None)] * g.ndim
                index[d] = xp.asarray(idx)
                xp.add.at(z, tuple(index), g)
                g = z
            return g

        return _linear(name, input, fwd, adj)
    out = input
    for d, idx in gathers:
        out = out.index_select(d, _const(idx))
    return out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation (mirrors ``F.conv1d``): the 2-D kernels over a height-1 image,
    recorded as one ConvolutionBackward0 node, as torch.

    Args:
        input (Tensor): (N, C_in, L) or (C_in, L); weight (C_out, C_in / groups, k);
        bias (C_out,); stride, padding (int, or "same"/"valid"), dilation (int); groups.

    Returns:
        Tensor: (N, C_out, L_out), ``L_out = (L + 2p - d(k-1) - 1) // s + 1``.

    Raises:
        RuntimeError: wrong rank, channel count or dtype (torch's texts).
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to conv1d, but got "
                           f"input of size: {list(input.shape)}")
    unbatched = input.ndim == 2
    if unbatched:
        input = input.unsqueeze(0)
    s, d = _single(stride, "stride"), _single(dilation, "dilation")
    k = weight.shape[-1]
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             "{'valid', 'same'}")
        if padding == "same" and s != 1:
            raise ValueError("padding='same' is not supported for strided convolutions")
        total = d * (k - 1) if padding == "same" else 0
        if total % 2:
            input = pad(input, (total // 2, total - total // 2))
            total = 0
        p = total // 2
    else:
        p = _single(padding, "padding")
    x, w = input._data, weight._data
    if weight.ndim != 3:
        raise RuntimeError(f"weight should have 3 dimensions for conv1d, got {weight.ndim}")
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected "
                           f"input{list(x.shape)} to have {w.shape[1] * groups} channels, but "
                           f"got {x.shape[1]} channels instead")
    conv_dtypes(input, weight, bias)
    if x.shape[2] + 2 * p < d * (k - 1) + 1:
        raise RuntimeError(f"Calculated padded input size per channel: ({x.shape[2] + 2 * p}). "
                           f"Kernel size: ({d * (k - 1) + 1}). Kernel size can't be greater than "
                           "actual input size")
    out = apply(ROWS["_convolution1d"], (input, weight, bias), ((1, s), (0, p), (1, d), groups))
    return out.squeeze(0) if unbatched else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 2-D convolution (mirrors ``F.conv_transpose2d``; one ConvolutionBackward0
    node): the gradient of conv2d with respect to its input, computed by the conv kernels.

    Args:
        input (Tensor): (N, C_in, H, W) or (C_in, H, W).
        weight (Tensor): (C_in, C_out / groups, kh, kw).
        bias (Tensor, optional): (C_out,).
        stride, padding, output_padding, dilation (int | pair); groups (int).

    Returns:
        Tensor: (N, C_out, H_out, W_out),
        ``H_out = (H - 1) s - 2p + d (kh - 1) + output_padding + 1``.

    Raises:
        RuntimeError: channel mismatch, output_padding not smaller than stride or dilation.
    """
    unbatched = input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    if input.ndim != 4:
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, "
                           f"but got input of size: {list(input.shape)}")
    n, c, h, w = input.shape
    cin, cg, kh, kw = weight.shape
    if c != cin:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(input.shape)} to have {cin} channels, but got {c} "
                           "channels instead")
    (sh, sw), (ph, pw) = _pair(stride, "stride"), _pair(padding, "padding")
    (oph, opw), (dh, dw) = _pair(output_padding, "output_padding"), _pair(dilation, "dilation")
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but "
                           f"got output_padding_height: {oph} output_padding_width: {opw} "
                           f"stride_height: {sh} stride_width: {sw} dilation_height: {dh} "
                           f"dilation_width: {dw}")
    conv_dtypes(input, weight, bias, transposed=True)
    if bias is not None and bias.dtype != input.dtype:  # (torch adds it into the output)
        bias = bias.to(input.dtype)
    out = apply(ROWS["_convolution_transpose2d"], (input, weight, bias),
                ((sh, sw), (ph, pw), (oph, opw), (dh, dw), groups))
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 1-D convolution (mirrors ``F.conv_transpose1d``; one ConvolutionBackward0
    node): the 2-D kernels over a height-1 image.

    input (N, C_in, L) or (C_in, L); weight (C_in, C_out / groups, k).
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to "
                           f"conv_transpose1d, but got input of size: {list(input.shape)}")
    unbatched = input.ndim == 2
    if unbatched:
        input = input.unsqueeze(0)
    if input.shape[1] != weight.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(input.shape)} to have {weight.shape[0]} channels, but got "
                           f"{input.shape[1]} channels instead")
    conv_dtypes(input, weight, bias, transposed=True)
    if bias is not None and bias.dtype != input.dtype:  # (torch adds it into the output)
        bias = bias.to(input.dtype)
    s, p, op, d = (_single(v) for v in (stride, padding, output_padding, dilation))
    if op >= max(s, d):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but "
                           f"got output_padding: {op} stride: {s} dilation: {d}")
    out = apply(ROWS["_convolution_transpose2d"], (input, weight, bias),
                ((1, s), (0, p), (0, op), (1, d), groups))
    return out.squeeze(0) if unbatched else out


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r) (mirrors ``F.pixel_shuffle``; PixelShuffleBackward0).

    Raises:
        RuntimeError: channels not divisible by r^2 (torch's text).
    """
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    return _linear("pixel_shuffle", input, _shuffle(lead, c // (r * r), h, w, r, True),
                   _shuffle(lead, c // (r * r), h, w, r, False))


def _shuffle(lead, c, h, w, r, up):
    """The array map of pixel_shuffle (``up``: (C r r, H, W) -> (C, H r, W r)) or its inverse."""
    k = len(lead)
    lead = tuple(lead)

    def fwd(a):
        if up:
            a = a.reshape(lead + (c, r, r, h, w)).transpose(
                tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
            return backend.get_array_module(a).ascontiguousarray(a).reshape(
                lead + (c, h * r, w * r))
        a = a.reshape(lead + (c, h, r, w, r)).transpose(
            tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
        return backend.get_array_module(a).ascontiguousarray(a).reshape(
            lead + (c * r * r, h, w))
    return fwd


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W) (mirrors ``F.pixel_unshuffle``;
    PixelUnshuffleBackward0)."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by "
                           f"downscale_factor, but got {h} x {w} and {r}")
    return _linear("pixel_unshuffle", input, _shuffle(lead, c, h // r, w // r, r, False),
                   _shuffle(lead, c, h // r, w // r, r, True))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum sliding blocks back into an image (col2im; mirrors ``F.fold``, the adjoint of
    :func:`unfold`; one Col2ImBackward0 node): (N, C kh kw, L) -> (N, C, H, W), overlapping
    values added.

    Raises:
        RuntimeError: the block count L does not match the geometry (torch's text).
    """
    unbatched = input.ndim == 2
    if unbatched:
        input = input.unsqueeze(0)
    (h, w), (kh, kw) = _pair(output_size), _pair(kernel_size)
    (dh, dw), (ph, pw), (sh, sw) = _pair(dilation), _pair(padding), _pair(stride)
    n, ckk, L = input.shape
    if ckk % (kh * kw):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={ckk} and "
                           f"kernel_size={(kh, kw)}")
    c = ckk // (kh * kw)
    geo = _col_geometry(n, c, h, w, kh, kw, dh, dw, ph, pw, sh, sw)
    if geo[-1] != L:
        bh, bw = geo[-3], geo[-2]
        raise RuntimeError(f"Given output_size=({h}, {w}), kernel_size=({kh}, {kw}), "
                           f"dilation=({dh}, {dw}), padding=({ph}, {pw}), stride=({sh}, {sw}), "
                           f"expected size of input's dimension 2 to match the calculated "
                           f"number of sliding blocks {bh} * {bw} = {bh * bw}, but got "
                           f"input.size(2)={L}.")
    out = _linear("col2im", input, _col2im(geo), _im2col(geo))
    return out.squeeze(0) if unbatched else out


def _col_geometry(n, c, h, w, kh, kw, dh, dw, ph, pw, sh, sw):
    """The flat index into the padded (C, Hp, Wp) image of every (C kh kw, L) block element."""
    hp, wp = h + 2 * ph, w + 2 * pw
    bh = (hp - dh * (kh - 1) - 1) // sh + 1
    bw = (wp - dw * (kw - 1) - 1) // sw + 1
    ci, ki, kj, bi, bj = np.meshgrid(np.arange(c), np.arange(kh), np.arange(kw), np.arange(bh),
                                     np.arange(bw), indexing="ij")
    flat = (ci * hp * wp + (bi * sh + ki * dh) * wp + (bj * sw + kj * dw)).reshape(-1)
    return n, c, h, w, ph, pw, hp, wp, flat, bh, bw, bh * bw


def _im2col(geo):
    n, c, h, w, ph, pw, hp, wp, flat, bh, bw, L = geo

    def fwd(a):
        a = backend.get_array_module(a).pad(a, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        return a.reshape(n, -1)[:, flat].reshape(n, -1, L)
    return fwd


def _col2im(geo):
    n, c, h, w, ph, pw, hp, wp, flat, bh, bw, L = geo

    def fwd(cols):
        xp = backend.get_array_module(cols)
        z = xp.zeros((n, c * hp * wp), cols.dtype)
        xp.add.at(z, (slice(None), xp.asarray(flat)), cols.reshape(n, -1))
        return xp.ascontiguousarray(z.reshape(n, c, hp, wp)[:, :, ph:ph + h, pw:pw + w])
    return fwd
