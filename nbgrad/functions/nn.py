"""The torch.* surface of the nn kernels: torch.conv2d and torch.max_pool2d (the one definition of
each; torch.nn.functional's conv2d and max_pool2d are these functions, as PyTorch's
``F.conv2d is torch.conv2d``), with PyTorch's argument checks and error texts, and the
constant padding they need.
"""
from __future__ import annotations

from .. import backend
from ..autograd.apply import apply, _fresh
from ..autograd.grad_mode import GENERAL_PATH, STATE as _GRAD
from ..autograd.record import _arr
from ..ops import kernels
from ..ops import ROWS as R
from ..ops import Ctx
from .args import conv_dtypes


def _pair(v, name="value"):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _out_size(size, k, s, p, d, ceil_mode=False):
    # torch's pooling_output_shape: in ceil mode the last window must start inside the input
    o = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o


def _constant_pad(input, pad, value):
    """``input`` with ``pad`` = (left, right, top, bottom, ...) elements of ``value`` around its
    last ``len(pad) // 2`` dims, a negative amount cropping (torch.constant_pad_nd; one
    ConstantPadNdBackward0 node). The caller checks that ``pad`` has an even length that fits.

    Raises:
        RuntimeError: a negative output size (PyTorch's text).
    """
    nd = input.ndim
    pairs = [(0, 0)] * (nd - len(pad) // 2) + [(pad[2 * i], pad[2 * i + 1])
                                               for i in reversed(range(len(pad) // 2))]
    for d, (lo, hi) in enumerate(pairs):
        if input.shape[d] + lo + hi < 0:
            raise RuntimeError(f"The input size {input.shape[d]}, plus negative padding {lo} and "
                               f"{hi} resulted in a negative output size, which is invalid. "
                               f"Check dimension {d} of your input.")
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(pairs, input.shape))

    def padder(fill):
        def fwd(a):
            return backend.get_array_module(a).pad(a[crop], grow, constant_values=fill)
        return fwd

    shrink = tuple(slice(lo, n - hi) for (lo, hi), n in
                   zip(grow, [n + lo + hi for (lo, hi), n in zip(pairs, input.shape)]))
    regrow = [(max(-lo, 0), max(-hi, 0)) for lo, hi in pairs]

    def adj(g):
        return backend.get_array_module(g).pad(g[shrink], regrow)

    return apply(R["constant_pad_nd"], (input,), (Ctx((padder(value), adj, padder(0))),))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation (torch.conv2d, which is torch.nn.functional.conv2d): one
    ``ConvolutionBackward0`` node (channels-last im2col and one matmul, ops/nn.py).

    Args:
        input (Tensor): (N, C_in, H, W) or unbatched (C_in, H, W).
        weight (Tensor): (C_out, C_in / groups, kh, kw), of input's dtype.
        bias (Tensor, optional): (C_out,).
        stride, padding, dilation (int | tuple[int, int]): ``padding`` may also be ``"valid"``
            or ``"same"`` (stride 1).
        groups (int): channel groups.

    Returns:
        Tensor: (N, C_out, H_out, W_out), contiguous;
        ``H_out = (H + 2*ph - dh*(kh-1) - 1) // sh + 1``.

    Raises:
        RuntimeError: wrong ranks, a channel mismatch, a kernel larger than the padded input or
            input and weight of two dtypes, in PyTorch's words; ValueError: a bad padding string.
    """
    unbatched = input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    if input.ndim != 4:
        raise RuntimeError(
            f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
            f"{list(input.shape)}")
    if weight.ndim != 4:
        raise RuntimeError(f"weight should have 4 dimensions for conv2d, got {weight.ndim}")
    o, cg, kh, kw = weight.shape
    sh, sw = _pair(stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            ph = pw = 0
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            th, tw = dh * (kh - 1), dw * (kw - 1)
            if th % 2 or tw % 2:
                input = _constant_pad(input, (tw // 2, tw - tw // 2, th // 2, th - th // 2), 0.0)
                ph = pw = 0
            else:
                ph, pw = th // 2, tw // 2
        else:
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             "{'valid', 'same'}")
    else:
        ph, pw = _pair(padding, "padding")
    if min(sh, sw) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(ph, pw) < 0:
        raise RuntimeError("negative padding is not supported")
    if bias is not None and tuple(bias.shape) != (o,):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {o} elements, but got bias of size "
                           f"{list(bias.shape)} instead")
    n, c, h, w = input.shape
    if c != cg * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected "
            f"input{list(input.shape)} to have {cg * groups} channels, but got {c} channels "
            f"instead")
    hp, wp = h + 2 * ph, w + 2 * pw
    if hp < dh * (kh - 1) + 1 or wp < dw * (kw - 1) + 1:
        raise RuntimeError(
            f"Calculated padded input size per channel: ({hp} x {wp}). Kernel size: "
            f"({dh * (kh - 1) + 1} x {dw * (kw - 1) + 1}). Kernel size can't be greater than "
            f"actual input size")
    conv_dtypes(input, weight, bias)
    out = apply(R["convolution"], (input, weight, bias), ((sh, sw), (ph, pw), (dh, dw), groups))
    return out.squeeze(0) if unbatched else out


def _pool_check(input, kernel_size, stride, padding, dilation, ceil_mode):
    """PyTorch's checks of pooling arguments for ``input`` (N, C, H, W) or (C, H, W) (max_pool2d and
    avg_pool2d): the padding at most half the kernel, an output of at least one element."""
    kh, kw = _pair(kernel_size, "kernel_size")
    if stride is None or (isinstance(stride, (tuple, list)) and not stride):
        sh, sw = kh, kw
    else:
        sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError(
            f"pad should be at most half of effective kernel size, but got pad={ph}, "
            f"kernel_size={kh} and dilation={dh}")
    c, h, w = input.shape[-3:]  # ((N, C, H, W) or (C, H, W))
    ho = _out_size(h, kh, sh, ph, dh, ceil_mode)
    wo = _out_size(w, kw, sw, pw, dw, ceil_mode)
    if ho <= 0 or wo <= 0:
        raise RuntimeError(
            f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{ho}x{wo}). "
            f"Output size is too small")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over sliding windows (torch.max_pool2d, torch.nn.functional.max_pool2d).

    Args:
        input (Tensor): (N, C, H, W) or (C, H, W).
        kernel_size, stride (default: kernel_size), padding (-inf), dilation: int or pair.
        ceil_mode (bool): round the output size up.

    Returns:
        Tensor (N, C, Ho, Wo); with ``return_indices`` also the int64 flat index (into H*W) of
        each maximum. One MaxPool2DWithIndicesBackward0 node (MaxPool2DBackward0 without the
        indices); the gradient goes to the first maximum of each window in raster order, as
        PyTorch's.

    Raises:
        RuntimeError: a wrong rank, too much padding or an empty output (PyTorch's texts);
        NotImplementedError: bool input (torch has no kernel for it).
    """
    if input._data.dtype.kind == "b":
        raise NotImplementedError('"max_pool2d" not implemented for \'Bool\'')
    if input.ndim not in (3, 4):
        raise RuntimeError(f"max_pool2d: expected 3D or 4D input, got {input.ndim}D input")
    unbatched = input.ndim == 3  # (C, H, W): the row pools it as it is, as torch's kernel
    _pool_check(input, kernel_size, stride, padding, dilation, ceil_mode)
    args = (kernel_size, stride, padding, dilation, ceil_mode)
    if not return_indices:  # the int64 indices cost a pass of their own: build them only if asked
        if not (GENERAL_PATH or _GRAD.enabled and input._requires_grad):
            # nothing to record (no_grad, eval): the maxima without the choice among them the
            # backward reads, by kernels.max_pool2d_values (NBGRAD_GENERAL_PATH=1 applies the row)
            token = backend.quiet()
            try:
                y = _arr(kernels.max_pool2d_values(input._data if not unbatched else
                                                   input._data[None], *args))
            finally:
                backend.loud(token)
            return _fresh(y[0] if unbatched else y)  # a tensor of its own, not a view
        return apply(R["max_pool2d"], (input,), args)
    return apply(R["max_pool2d_with_indices"], (input,), args)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """Max over (kh, kw) windows with -inf padding, and the flat H*W index of each maximum:
    (N, C, H, W) -> ((N, C, Ho, Wo), int64 indices) (torch.nn.functional.
    max_pool2d_with_indices); :func:`max_pool2d` with ``return_indices=True``."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)
