"""``nbgrad.nn.functional``: layers and losses composed of core ops (mirrors torch.nn.functional).

Nothing here carries its own derivative: every function is built from the core's differentiable
ops (``addmm``, ``log_softmax``, ``gather``, ``as_strided``, ...), so autograd, the version
checks and the notebook's graph see ordinary nodes. Data-dependent checks (target ranges) read the
backing numpy array directly, which records nothing.
"""

import math

import numpy as np

import nbgrad
from nbgrad import backend
from nbgrad.autograd import fused
from nbgrad.autograd.grad_mode import STATE as _GRAD
from nbgrad.autograd.apply import _broadcast_error, apply
from nbgrad.ops import ROWS, Ctx
from nbgrad.ops.formulas import NUMPY, _reduce_to
from nbgrad.tensor import strides_of

__all__ = [
    "linear", "conv2d", "unfold", "max_pool2d", "avg_pool2d", "pad", "flatten",
    "relu", "relu_", "leaky_relu", "gelu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout",
    "batch_norm", "layer_norm", "rms_norm", "embedding", "one_hot",
    "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    # activations and losses beyond the first set (nn-b)
    "threshold", "hardtanh", "relu6", "elu", "selu", "celu", "silu", "softplus", "mish",
    "softsign", "hardswish", "hardsigmoid", "tanhshrink", "hardshrink", "softshrink",
    "logsigmoid", "softmin", "glu", "prelu",
    "smooth_l1_loss", "huber_loss", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
    "pairwise_distance", "cosine_similarity", "cosine_embedding_loss", "margin_ranking_loss",
    "triplet_margin_loss", "hinge_embedding_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss",
    "conv1d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "avg_pool1d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "interpolate", "upsample", "pixel_shuffle", "pixel_unshuffle", "fold", "group_norm",
    "instance_norm", "dropout1d", "dropout2d", "bilinear", "embedding_bag",
]


def _pair(v, name="value"):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _const(arr):
    """A constant (no-grad) tensor over the numpy array ``arr``."""
    arr = np.asarray(arr)
    return nbgrad.from_numpy(arr if arr.flags.c_contiguous else arr.copy())


def _check_reduction(reduction, who):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{who}: {reduction} is not a valid value for reduction")


def _reduce(loss, reduction, who):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{who}: {reduction} is not a valid value for reduction")


# ---------------------------------------------------------------------------- linear, conv, pool
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (mirrors ``torch.nn.functional.linear``).

    Args:
        input (Tensor): (*, in_features).
        weight (Tensor): (out_features, in_features).
        bias (Tensor, optional): (out_features,).

    Returns:
        Tensor: (*, out_features); with a bias, on 2-D or contiguous input, one
        ``AddmmBackward0`` node (N-d input viewed to 2-D and back), as torch.
    """
    x, w = input._data, weight._data
    if (x.ndim >= 2 and w.ndim == 2 and x.shape[-1] == w.shape[1] and x.dtype is w.dtype
            and type(x) is type(w) and x.flags.c_contiguous
            and (bias is None or (bias._data.shape == w.shape[:1] and bias._data.dtype is x.dtype
                                  and type(bias._data) is type(x)))):
        # the usual case, checked: torch's nodes (TBackward0, [ViewBackward0,] MmBackward0 /
        # AddmmBackward0, [UnsafeViewBackward0 / ViewBackward0]), recorded as one node when
        # something requires grad (nbgrad.autograd.fused)
        fuse = type(x) is np.ndarray and _GRAD.enabled and (
            input._requires_grad or weight._requires_grad or
            bias is not None and bias._requires_grad) and fused.usable()
        if bias is None:
            return _linear_fused(input, weight) if fuse and x.ndim > 2 else \
                _linear_chain(input, weight)
        out = _addmm_fused(bias, input, weight) if fuse else _addmm_chain(bias, input, weight)
        return out if x.ndim == 2 else apply(ROWS["view"], (out,), (x.shape[:-1] + w.shape[:1],))
    if bias is not None and input.ndim == 2:
        return nbgrad.addmm(bias, input, weight.t())
    if bias is not None and input.ndim > 2 and bias.ndim == 1 and input.is_contiguous():
        # torch's fused path for contiguous N-d input: addmm on a 2-D view, viewed back
        out = nbgrad.addmm(bias, input.view(-1, input.shape[-1]), weight.t())
        return out.view((*input.shape[:-1], out.shape[-1]))
    out = input.matmul(weight.t())
    if bias is not None:
        out.add_(bias)  # in place, as torch's linear (the output's _version is 1)
    return out


def _linear_chain(input, weight):
    """linear without bias on (N, *, in) contiguous input as torch records it: TBackward0,
    [ViewBackward0,] MmBackward0, [UnsafeViewBackward0]."""
    x, w = input._data, weight._data
    wt = apply(ROWS["t"], (weight,))
    if x.ndim == 2:
        return apply(ROWS["mm"], (input, wt))
    x2 = apply(ROWS["view"], (input,), ((x.size // x.shape[-1], x.shape[-1]),))
    return apply(ROWS["unsafe_view"], (apply(ROWS["mm"], (x2, wt)),),
                 (x.shape[:-1] + w.shape[:1],))


def _linear_fused(input, weight):
    """`_linear_chain` recorded as one UnsafeViewBackward0 node (nbgrad.autograd.fused) whose
    backward runs the chain's formulas (unsafe_view, mm, view, t) on arrays."""
    x, w = input._data, weight._data
    rows = x.size // x.shape[-1]
    out2 = _MM.fwd(_VIEW.fwd(x, (rows, x.shape[-1])), _T.fwd(w))
    out = nbgrad.Tensor._make_fresh(_UNSAFE_VIEW.fwd(out2, x.shape[:-1] + w.shape[:1]))
    rx, rw = input._requires_grad, weight._requires_grad
    fused.record(out, _UNSAFE_VIEW.node, (tuple(out2.shape),), (input, weight),
                 ("self" if rw else None, "mat2" if rx else None), rx + rw + 1,
                 _linear_fused_backward, _linear_chain,
                 (rows, tuple(x.shape), tuple(out2.shape), _mm_strides(x, w, rows)))
    return out


def _mm_strides(x, w, rows):
    """The strides (in elements) mm's formulas read: of the input viewed as (rows, in) and of
    the weight's transpose."""
    return strides_of(_VIEW.fwd(x, (rows, x.shape[-1]))), strides_of(w)[::-1]


def _linear_fused_backward(node, g, arrays):
    """The chain's formulas in the order its nodes would run: unsafe_view, mm, then view (the
    input's) and t (the weight's)."""
    x, w = arrays
    rows, x_shape, out2_shape, (x2_strides, wt_strides) = node._chain.info
    g2 = _UNSAFE_VIEW.vjp(0, g, out2_shape)
    (cx, _), (cw, _) = node._next
    gx = gw = None
    if cx is not None:  # (mm's saved values: mat2, self_strides, self, mat2_strides)
        gx = _VIEW.vjp(0, _MM.vjp(0, g2, _T.fwd(w), x2_strides, None, None), x_shape)
    if cw is not None:
        gw = _T.vjp(0, _MM.vjp(1, g2, None, None, _VIEW.fwd(x, (rows, x_shape[-1])),
                               wt_strides))
    return [gx, gw]


def _addmm_chain(bias, input, weight):
    """linear's product with a bias as torch records it: TBackward0, [ViewBackward0,]
    AddmmBackward0 (the 2-D result; N-d input is viewed back by the caller)."""
    x = input._data
    wt = apply(ROWS["t"], (weight,))
    x2 = input if x.ndim == 2 else apply(ROWS["view"], (input,), ((x.size // x.shape[-1],
                                                                   x.shape[-1]),))
    return apply(ROWS["addmm"], (bias, x2, wt), (1, 1))


def _addmm_fused(bias, input, weight):
    """`_addmm_chain` recorded as one AddmmBackward0 node (nbgrad.autograd.fused) whose edges
    go to bias, input and weight, and whose backward runs the chain's formulas (addmm, then
    view for the input, t for the weight) on arrays."""
    x, w = input._data, weight._data
    rows = x.size // x.shape[-1]
    x2 = x if x.ndim == 2 else _VIEW.fwd(x, (rows, x.shape[-1]))
    out = nbgrad.Tensor._make_fresh(_ADDMM.fwd(bias._data, x2, _T.fwd(w), 1, 1))
    rx, rw = input._requires_grad, weight._requires_grad
    fused.record(out, _ADDMM.node, (), (bias, input, weight),
                 (None, "mat1" if rw else None, "mat2" if rx else None),
                 rw + (rx if x.ndim > 2 else 0), _addmm_fused_backward,
                 _addmm_chain,
                 (rows, tuple(x.shape), tuple(bias._data.shape), _mm_strides(x, w, rows)))
    return out


def _addmm_fused_backward(node, g, arrays):
    """The chain's formulas in the order its nodes would run: addmm (the bias's gradient summed
    over the rows), then view (the input's) and t (the weight's)."""
    _, x, w = arrays
    rows, x_shape, b_shape, (x2_strides, wt_strides) = node._chain.info
    (cb, _), (cx, _), (cw, _) = node._next
    x2 = None if x is None else x if len(x_shape) == 2 else _VIEW.fwd(x, (rows, x_shape[-1]))
    # addmm's saved values: beta, mat2, mat1_strides, alpha, mat1, mat2_strides
    saved = (1, None if w is None else _T.fwd(w), x2_strides, 1, x2, wt_strides)
    gb = gx = gw = None
    if cb is not None:
        gb = _reduce_to(_ADDMM.vjp(0, g, *saved), b_shape, None, NUMPY)
    if cx is not None:
        gx = _ADDMM.vjp(1, g, *saved)
        if len(x_shape) > 2:
            gx = _VIEW.vjp(0, gx, x_shape)
    if cw is not None:
        gw = _T.vjp(0, _ADDMM.vjp(2, g, *saved))
    return [gb, gx, gw]


_MM, _VIEW, _T, _UNSAFE_VIEW = ROWS["mm"], ROWS["view"], ROWS["t"], ROWS["unsafe_view"]
_ADDMM = ROWS["addmm"]
# the orders of the saved values _addmm_fused_backward and _linear_fused_backward pass
assert _ADDMM.names == ("beta", "mat2", "mat1_strides", "alpha", "mat1", "mat2_strides")
assert _MM.names == ("mat2", "self_strides", "self", "mat2_strides")


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
        ValueError: reflect padding not smaller than the dim; RuntimeError: a negative output
            size; NotImplementedError: an unknown mode.
    """
    if mode in ("reflect", "replicate", "circular"):
        return _pad_by_index(input, pad, mode)
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported (constant, reflect, "
                                  "replicate, circular)")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError("Padding length must be divisible by 2 and at most twice the input dims")
    if not any(pad):
        return input
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

    return apply(ROWS["constant_pad_nd"], (input,), (Ctx((padder(value), adj, padder(0))),))


def _out_size(size, k, s, p, d, ceil_mode=False):
    # torch's pooling_output_shape: in ceil mode the last window must start inside the input
    o = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o



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


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation (mirrors ``F.conv2d``): one ``ConvolutionBackward0`` node.

    Validates the arguments (naming the problem as torch does), resolves ``padding="same"`` and
    unbatched input, then calls the core's ``nbgrad.conv2d`` (channels-last im2col + one matmul).

    Args:
        input (Tensor): (N, C_in, H, W) or unbatched (C_in, H, W).
        weight (Tensor): (C_out, C_in / groups, kh, kw).
        bias (Tensor, optional): (C_out,).
        stride, padding, dilation (int | tuple[int, int]): ``padding`` may also be ``"valid"``
            or ``"same"`` (stride 1).
        groups (int): channel groups.

    Returns:
        Tensor: (N, C_out, H_out, W_out), contiguous;
        ``H_out = (H + 2*ph - dh*(kh-1) - 1) // sh + 1``.

    Raises:
        RuntimeError: channel mismatch or a kernel larger than the padded input, in torch's words.
    """
    unbatched = input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    if input.ndim != 4:
        raise RuntimeError(
            f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: "
            f"{list(input.shape)}")
    n, c, h, w = input.shape
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
                input = pad(input, (tw // 2, tw - tw // 2, th // 2, th - th // 2))
                ph = pw = 0
            else:
                ph, pw = th // 2, tw // 2
        else:
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             "{'valid', 'same'}")
    else:
        ph, pw = _pair(padding, "padding")
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
    out = nbgrad.conv2d(input, weight, bias, (sh, sw), (ph, pw), (dh, dw), groups)
    return out.squeeze(0) if unbatched else out


def _pool_setup(input, kernel_size, stride, padding, dilation, ceil_mode, fill,
                check_only=False):
    """Validate pooling arguments; pad ``input`` (N, C, H, W) with ``fill`` as far as the windows
    reach. Returns the padded tensor and the geometry (kh, kw, sh, sw, ph, pw, dh, dw, ho, wo)."""
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
    n, c, h, w = input.shape
    ho = _out_size(h, kh, sh, ph, dh, ceil_mode)
    wo = _out_size(w, kw, sw, pw, dw, ceil_mode)
    if ho <= 0 or wo <= 0:
        raise RuntimeError(
            f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{ho}x{wo}). "
            f"Output size is too small")
    if check_only:
        return None, None
    extra_h = max(0, (ho - 1) * sh + dh * (kh - 1) + 1 - h - 2 * ph)
    extra_w = max(0, (wo - 1) * sw + dw * (kw - 1) + 1 - w - 2 * pw)
    x = input
    if ph or pw or extra_h or extra_w:
        x = pad(x, (pw, pw + extra_w, ph, ph + extra_h), value=fill)
    return x, (kh, kw, sh, sw, ph, pw, dh, dw, ho, wo)



def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over sliding windows (mirrors ``torch.nn.functional.max_pool2d``).

    Args:
        input (Tensor): (N, C, H, W) or (C, H, W).
        kernel_size, stride (default: kernel_size), padding (-inf), dilation: int or pair.
        ceil_mode (bool): round the output size up.

    Returns:
        Tensor (N, C, Ho, Wo); with ``return_indices`` also the int64 flat index (into H*W) of
        each maximum. One ``MaxPool2DWithIndicesBackward0`` node (the core's
        ``nbgrad.max_pool2d_with_indices``); the gradient goes to the first maximum of each
        window in raster order, as torch's.
    """
    unbatched = input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    if input.ndim != 4:
        raise RuntimeError(f"max_pool2d: expected 3D or 4D input, got {input.ndim}D input")
    _pool_setup(input, kernel_size, stride, padding, dilation, ceil_mode, None, check_only=True)
    if not return_indices:  # the int64 indices cost a pass of their own: build them only if asked
        out = nbgrad.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)
        return out.squeeze(0) if unbatched else out
    out, idx = nbgrad.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation,
                                              ceil_mode)
    if unbatched:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return out, idx


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
    _pool_setup(input if input.ndim == 4 else input.unsqueeze(0), kernel_size, stride, padding,
                1, ceil_mode, 0.0, check_only=True)
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

def flatten(input, start_dim=0, end_dim=-1):
    """Same as ``nbgrad.flatten`` (mirrors ``torch.flatten``)."""
    return input.flatten(start_dim, end_dim)


# ---------------------------------------------------------------------------- activations
def relu(input, inplace=False):
    """max(x, 0) (mirrors ``F.relu``); ``inplace`` uses ``relu_``."""
    return input.relu_() if inplace else input.relu()


def relu_(input):
    return input.relu_()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x if x > 0 else negative_slope * x (mirrors ``F.leaky_relu``; LeakyReluBackward0, and
    LeakyReluBackward1 in place)."""
    return _pointwise("leaky_relu", input, inplace, negative_slope)


def gelu(input, approximate="none"):
    """Gaussian error linear unit (mirrors ``F.gelu``; one GeluBackward0 node).

    ``approximate="none"``: ``x * Phi(x)`` with erf; ``"tanh"``: the tanh approximation.
    """
    if approximate in ("none", "tanh"):
        return apply(ROWS["gelu"], (input,), (approximate,))
    raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def _softmax_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, dtype=None):
    """exp(x) / sum exp(x) along ``dim`` (mirrors ``F.softmax``; None: torch's legacy dim)."""
    if dim is None:
        dim = _softmax_dim(input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return input.softmax(dim)


def log_softmax(input, dim=None, dtype=None):
    """log(softmax(x)) computed stably (mirrors ``F.log_softmax``)."""
    if dim is None:
        dim = _softmax_dim(input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return input.log_softmax(dim)


def _dropout_noise(input, shape, p):
    """torch's dropout noise: ``empty(shape).bernoulli_(1 - p).div_(1 - p)`` in input's dtype,
    on input's device."""
    from nbgrad.random import _address_order, _uniform, default_generator
    from nbgrad.tensor import is_dense
    dt = input._data.dtype
    u = _uniform(default_generator, math.prod(shape), np.dtype(np.float64))
    if shape == tuple(input.shape) and not input.is_contiguous() and is_dense(input._data):
        # empty_like keeps a dense input's strides, and bernoulli_ fills by address (a
        # batch_first attention output is such a transposed view)
        placed = np.empty_like(u)
        placed[_address_order(shape, input.stride())] = u
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
        mask = nbgrad.zeros_like(input)
    else:
        mask = _const(_dropout_noise(input, tuple(input.shape), p))
    if inplace:
        return input.mul_(mask)
    return input * mask


# ---------------------------------------------------------------------------- normalisation
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise over the batch (and spatial) dims per channel (mirrors ``F.batch_norm``; one
    NativeBatchNormBackward0 node for input, weight and bias, in training and in eval).

    Args:
        input (Tensor): (N, C) or (N, C, L) or (N, C, H, W).
        running_mean, running_var (Tensor | None): (C,), updated in place when ``training``
            (``running_var`` with the unbiased variance, as torch).
        weight, bias (Tensor, optional): (C,).
        momentum (float | None): None means a cumulative average (set by the module).

    Raises:
        ValueError: one value per channel in training.
    """
    c = input.shape[1]
    ctx = Ctx(None)
    if training:
        count = input.numel() // c
        if count <= 1:
            raise ValueError(
                "Expected more than 1 value per channel when training, got input size "
                f"{input.shape}")
        out = apply(ROWS["native_batch_norm"], (input, weight, bias),
                    (True, None, None, eps, ctx))
        if running_mean is not None:
            _, _, mean, var = ctx.value
            with nbgrad.no_grad():
                m = momentum
                running_mean.mul_(1 - m).add_(_const(mean), alpha=m)
                running_var.mul_(1 - m).add_(_const(var), alpha=m * count / (count - 1))
        return out
    invstd = 1 / backend.get_array_module(running_var._data).sqrt(running_var._data + eps)
    return apply(ROWS["native_batch_norm"], (input, weight, bias),
                 (False, running_mean._data.copy(), invstd, eps, ctx))


def _trailing_shape(input, normalized_shape, star):
    """``normalized_shape`` as a tuple, checked against ``input``'s trailing dims; torch's
    RuntimeError otherwise (layer_norm writes ``[*, 4]``, rms_norm ``[*4]``: ``star``)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise RuntimeError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[{star}{', '.join(map(str, normalized_shape))}], but got input of size"
            f"{list(input.shape)}")
    return normalized_shape


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` dims (mirrors ``F.layer_norm``; one
    NativeLayerNormBackward0 node for input, weight and bias).

    Raises:
        RuntimeError: trailing dims differ from ``normalized_shape`` (torch's message).
    """
    normalized_shape = _trailing_shape(input, normalized_shape, "*, ")
    return apply(ROWS["native_layer_norm"], (input, weight, bias),
                 (normalized_shape, eps, Ctx(None)))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalisation over the last ``len(normalized_shape)`` dims (mirrors
    ``F.rms_norm``): ``input * rsqrt(mean(input**2) + eps) * weight``, recorded as torch's CPU
    composite (PowBackward0, MeanBackward1, AddBackward1, RsqrtBackward0, MulBackward0).

    Args:
        input (Tensor): floating point, shape (*, *normalized_shape).
        weight (Tensor, optional): shape ``normalized_shape``.
        eps (float, optional): added to the mean square; default ``finfo(input.dtype).eps``.

    Raises:
        RuntimeError: trailing dims differ from ``normalized_shape`` (torch's message).
    """
    normalized_shape = _trailing_shape(input, normalized_shape, "*")
    k = len(normalized_shape)
    if eps is None:
        eps = nbgrad.finfo(input.dtype).eps
    dims = list(range(input.ndim - k, input.ndim))
    ms = input.pow(2).mean(dims, keepdim=True)
    out = input * apply(ROWS["add_scalar"], (ms,), (eps,)).rsqrt()
    return out if weight is None else out * weight


# ---------------------------------------------------------------------------- embedding
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by integer ``input`` (mirrors ``F.embedding``).

    Args:
        input (Tensor): int64/int32 indices, any shape (*).
        weight (Tensor): (num_embeddings, embedding_dim).
        padding_idx (int, optional): rows at this index get no gradient.
        max_norm (float, optional): looked-up rows with a larger ``norm_type``-norm are
            rescaled in place first (as torch's ``embedding_renorm_``).

    Returns:
        Tensor: (*, embedding_dim).

    Raises:
        RuntimeError: non-integer indices; IndexError: an index out of range.
    """
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse are unsupported")
    ids = input._data
    if ids.dtype != np.int64 and ids.dtype != np.int32:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {input.dtype} instead (while checking arguments for "
            "embedding)")
    num = weight._data.shape[0]
    if ids.size and (ids.min() < 0 or ids.max() >= num):
        bad = ids[(ids < 0) | (ids >= num)].flat[0]
        raise IndexError(f"index out of range in self (index {int(bad)}, num_embeddings {num})")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += num
    if max_norm is not None:
        _embedding_renorm_(weight, ids, max_norm, norm_type)
    return apply(ROWS["embedding"], (weight,), (ids, -1 if padding_idx is None else padding_idx))


def _embedding_renorm_(weight, ids, max_norm, norm_type):
    """torch's embedding_renorm_: rows looked up whose norm exceeds ``max_norm`` are scaled
    in place to ``max_norm / (norm + 1e-7)`` (one version bump of ``weight``)."""
    w = weight._data
    rows = np.unique(ids.reshape(-1))
    norms = np.linalg.norm(w[rows], ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        scale = max_norm / (norms[big] + 1e-7)
        with nbgrad.no_grad():
            weight[_const(rows[big])] = _const(w[rows[big]] * scale[:, None].astype(w.dtype))


def one_hot(tensor, num_classes=-1):
    """int64 (*,) -> int64 (*, num_classes) one-hot (mirrors ``F.one_hot``)."""
    ids = tensor._data
    if num_classes == -1:
        num_classes = int(ids.max()) + 1 if ids.size else 0
    if ids.size and (ids.min() < 0 or ids.max() >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = np.zeros(ids.shape + (num_classes,), dtype=np.int64)
    np.put_along_axis(out, ids[..., None].astype(np.int64), 1, axis=-1)
    return _const(out)


# ---------------------------------------------------------------------------- losses
def mse_loss(input, target, reduction="mean", weight=None):
    """Mean squared error (mirrors ``F.mse_loss``; one MseLossBackward0 node).

    ``input``, ``target``: same shape (*) (broadcast, with torch's warning, otherwise).
    """
    _warn_target_size(input, target)
    _check_reduction(reduction, "mse_loss")
    input, target = _promoted(input, target)
    if weight is not None:
        d = input - target
        return _reduce(d * d * weight, reduction, "mse_loss")
    return apply(ROWS["mse_loss"], (input, target), (reduction,))


def _promoted(input, target):
    """``input`` and ``target`` in their common dtype by PyTorch's promotion (a float32 output
    against an int64 target computes in float32, as torch's loss kernels do, not numpy's
    float64); tensors already of that dtype are returned as they are."""
    if input.dtype is target.dtype:
        return input, target
    common = nbgrad.dtypes.from_np(nbgrad.dtypes.result_type(input._data, target._data))
    return (input if input.dtype is common else input.to(common),
            target if target.dtype is common else target.to(common))


def l1_loss(input, target, reduction="mean"):
    """Mean absolute error (mirrors ``F.l1_loss``). ``input``, ``target``: same shape (*)."""
    _warn_target_size(input, target)
    return _reduce((input - target).abs(), reduction, "l1_loss")


def _check_class_target(input, target, who, ignore_index):
    """Validate integer class targets for (N, C, ...) / (C,) input.

    Returns:
        (class_dim, n_classes, any_ignored): whether some target equals ``ignore_index``.
    """
    t, x = target._data, input._data
    if t.dtype != np.int64:
        raise RuntimeError(
            f"{who}: expected target dtype to be Long (int64 class indices), but got "
            f"{target.dtype}" + (" (floating targets must have the input's shape "
                                 f"{tuple(x.shape)}, as class probabilities)"
                                 if t.dtype.kind == "f" else ""))
    nd = x.ndim
    if nd == 0:
        raise ValueError(f"{who}: expected input with at least 1 dimension, got 0")
    cdim = 0 if nd == 1 else 1
    c = x.shape[cdim]
    if nd == 1:
        if t.ndim != 0:
            raise ValueError(
                f"{who}: expected a 0-D target for 1-D input of {c} classes, got target of "
                f"shape {tuple(t.shape)}")
    else:
        tb = t.shape[0] if t.ndim else None
        if tb != x.shape[0]:
            raise ValueError(
                f"Expected input batch_size ({x.shape[0]}) to match target batch_size "
                f"({tb}).")
        if t.ndim != nd - 1 or t.shape[1:] != x.shape[2:]:
            raise RuntimeError(
                f"{who}: expected target of shape {(x.shape[0],) + x.shape[2:]} for input of "
                f"shape {tuple(x.shape)}, got {tuple(t.shape)}")
    if not t.size:
        return cdim, c, False
    in_range = t.min() >= 0 and t.max() < c
    if not in_range:
        bad = ((t < 0) | (t >= c)) & (t != ignore_index)
        if bad.any():
            raise IndexError(
                f"Target {int(t[bad].flat[0])} is out of bounds. ({who}: class indices must be "
                f"in [0, {c}) or equal ignore_index={ignore_index})")
        return cdim, c, True  # every out-of-range target is ignore_index
    return cdim, c, bool(0 <= ignore_index < c and (t == ignore_index).any())


def _safe_div(total, denom):
    # every target ignored: torch returns nan with a zero (not nan) gradient
    return total / denom if denom != 0 else total + math.nan


def _nll(logp, target, weight, ignore_index, reduction, who):
    """Negative log-likelihood of int64 class targets: one NllLossBackward0 node, as torch."""
    ignored = _check_class_target(logp, target, who, ignore_index)[2]
    _check_reduction(reduction, who)
    w = None if weight is None else weight._data
    t = target._data
    if logp._data.ndim <= 2:
        return apply(ROWS["nll_loss"], (logp,), (t, w, reduction, ignore_index, Ctx(ignored)))
    # torch's nll_loss_nd: 4-D input goes to nll_loss2d, other ranks are viewed as 4-D first
    n, c = logp.shape[0], logp.shape[1]
    x4 = logp if logp.ndim == 4 else logp.view(n, c, 1, -1)
    t4 = t if t.ndim == 3 else t.reshape(n, 1, -1)
    out = apply(ROWS["nll_loss2d"], (x4,), (t4, w, reduction, ignore_index, Ctx(None)))
    if reduction == "none" and logp.ndim != 4:
        out = out.view(tuple(target.shape))
    return out


def _cross_entropy_fused(input, target, ignore_index, reduction, who):
    """cross_entropy of (N, C) logits and int64 targets, none of them ignored, recorded as one
    NllLossBackward0 node (nbgrad.autograd.fused) standing for torch's LogSoftmaxBackward0 ->
    NllLossBackward0; its backward runs nll_loss's then log_softmax's formula on arrays. None
    when a target is ignore_index (then the two nodes are recorded as they are)."""
    if _check_class_target(input, target, who, ignore_index)[2]:
        return None
    x = input._data
    logp = _LOG_SOFTMAX.fwd(x, 1)
    ctx = Ctx(False)
    out = nbgrad.Tensor._make_fresh(np.asarray(_NLL_LOSS.fwd(logp, target._data, None, reduction,
                                                             ignore_index, ctx)))
    fused.record(out, _NLL_LOSS.node, (), (input,), (None,), 1, _cross_entropy_fused_backward,
                 _cross_entropy_chain, (logp, reduction, ctx),
                 (target, ignore_index, reduction, who))
    return out


def _cross_entropy_chain(input, target, ignore_index, reduction, who):
    return _nll(input.log_softmax(1), target, None, ignore_index, reduction, who)


def _cross_entropy_fused_backward(node, g, arrays):
    """nll_loss's formula (saved: self, reduction, ctx), then log_softmax's (result, dim)."""
    logp, reduction, ctx = node._chain.info
    return [_LOG_SOFTMAX.vjp(0, _NLL_LOSS.vjp(0, g, logp, reduction, ctx), logp, 1)]


_LOG_SOFTMAX, _NLL_LOSS = ROWS["log_softmax"], ROWS["nll_loss"]
assert _NLL_LOSS.names == ("self", "reduction", "ctx") and _LOG_SOFTMAX.names == ("result", "dim")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean", _who="nll_loss"):
    """Negative log-likelihood (mirrors ``F.nll_loss``).

    Args:
        input (Tensor): log-probabilities (N, C), (C,) or (N, C, d1, ...).
        target (Tensor): int64 class indices (N,), () or (N, d1, ...), in [0, C) or
            ``ignore_index``.
        weight (Tensor, optional): (C,) per-class weights; "mean" divides by their sum.

    Raises:
        RuntimeError: target not int64; ValueError: batch sizes differ;
        IndexError: a target out of range (``Target 10 is out of bounds.``).
    """
    return _nll(input, target, weight, ignore_index, reduction, _who)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0, _who="cross_entropy"):
    """``nll_loss(log_softmax(input, 1), target)`` with label smoothing (mirrors F.cross_entropy).

    Args:
        input (Tensor): unnormalised logits (N, C), (C,) or (N, C, d1, ...).
        target (Tensor): int64 class indices (N,) / () / (N, d1, ...), or floating class
            probabilities of the input's shape.
        weight (Tensor, optional): (C,) class weights.
        ignore_index (int): targets equal to it contribute nothing (class-index targets only).
        label_smoothing (float): in [0, 1]; mixes the target with the uniform distribution.

    Returns:
        Tensor: a scalar, or per-element losses for ``reduction="none"``.

    Raises:
        RuntimeError / ValueError / IndexError: as :func:`nll_loss`, naming the loss.
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    nd = input._data.ndim
    if nd == 2 and weight is None and label_smoothing <= 0 and input._requires_grad and \
            _GRAD.enabled and type(input._data) is np.ndarray and \
            input._data.dtype.kind == "f" and target._data.dtype == np.int64 and \
            reduction in ("mean", "sum") and fused.usable():
        out = _cross_entropy_fused(input, target, ignore_index, reduction, _who)
        if out is not None:
            return out
    cdim = 0 if nd == 1 else 1
    logp = input.log_softmax(cdim)
    c = input._data.shape[cdim]
    wshape = [1] * nd
    wshape[cdim] = c
    if target._data.dtype.kind == "f":
        if tuple(target.shape) != tuple(input.shape):
            raise RuntimeError(
                f"{_who}: floating targets are class probabilities and must have the input's "
                f"shape {tuple(input.shape)}, got {tuple(target.shape)} (for class indices use "
                "int64)")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape(wshape)
        _check_reduction(reduction, _who)  # the order of torch's ops, so the graph is its own
        if reduction == "none":
            return prod.sum(cdim).neg()
        loss = prod.sum().neg()
        return loss / (input.numel() // c) if reduction == "mean" else loss
    nll = _nll(logp, target, weight, ignore_index, reduction, _who)
    if label_smoothing <= 0:
        return nll
    t = target._data
    ignored = t == ignore_index
    smooth = logp * weight.reshape(wshape) if weight is not None else logp
    smooth = smooth.sum(cdim).neg()
    smooth = smooth.masked_fill(_const(ignored), 0.0)
    if reduction == "mean":
        if weight is not None:
            denom = float(weight._data[t[~ignored]].sum())
        else:
            denom = float((~ignored).sum())
        smooth = _safe_div(smooth.sum(), denom)
    else:
        smooth = _reduce(smooth, reduction, _who)
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / c)


def _check_same_shape(input, target, who):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}) is deprecated. Please ensure they have the same size. ({who})")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean", _who="binary_cross_entropy"):
    """-(t log x + (1-t) log(1-x)), logs clamped at -100 (mirrors F.binary_cross_entropy).

    Args:
        input (Tensor): probabilities in [0, 1], any shape (*).
        target (Tensor): same shape, floating, in [0, 1].

    Raises:
        ValueError: shapes differ; RuntimeError: values outside [0, 1] or an integer target.
    """
    _check_same_shape(input, target, _who)
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"{_who}: expected a floating target (probabilities), got "
                           f"{target.dtype}")
    x = input._data
    if x.size and not ((x >= 0) & (x <= 1)).all():
        raise RuntimeError(f"all elements of input should be between 0 and 1 ({_who})")
    tt = target._data
    if tt.size and not ((tt >= 0) & (tt <= 1)).all():
        raise RuntimeError(f"all elements of target should be between 0 and 1 ({_who})")
    _check_reduction(reduction, _who)
    if weight is not None:
        weight = weight._data if isinstance(weight, nbgrad.Tensor) else np.asarray(weight)
    return apply(ROWS["binary_cross_entropy"], (input, target), (weight, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None,
                                     _who="binary_cross_entropy_with_logits"):
    """Sigmoid + binary cross entropy in one stable expression (mirrors the torch function).

    ``loss = (1 - t) x + (1 + (pw - 1) t) * log(1 + exp(-x))``, computed with torch's
    max-shift. ``input``, ``target``: same shape (*); ``pos_weight``: broadcast over the last
    dim (C,).
    """
    _check_same_shape(input, target, _who)
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"{_who}: expected a floating target, got {target.dtype}")
    _check_reduction(reduction, _who)
    weight = None if weight is None else weight._data
    pos_weight = None if pos_weight is None else pos_weight._data
    return apply(ROWS["binary_cross_entropy_with_logits"], (input, target),
                 (weight, pos_weight, reduction))


# ---------------------------------------------------------------------------- more activations
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


def softmin(input, dim=None, dtype=None):
    """``softmax(-x)`` along ``dim`` (mirrors ``F.softmin``)."""
    return softmax(input.neg(), dim, dtype)


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
    n = weight.numel()
    c = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != c:
        raise RuntimeError(
            f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
            f"{n} and channel size = {c}.")
    if n != 1 and input.ndim >= 2:
        weight = weight.reshape((c,) + (1,) * (input.ndim - 2))
    elif n == 1:
        weight = weight.reshape(())
    return apply(ROWS["_prelu_kernel"], (input, weight))


# ---------------------------------------------------------------------------- more losses
def _warn_target_size(input, target):
    """torch's UserWarning when a regression target's shape differs from the input's, and
    torch's error when the two do not broadcast."""
    a, b = tuple(input.shape), tuple(target.shape)
    if b != a:
        import warnings
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}). This will likely lead to incorrect results due to broadcasting. "
            "Please ensure they have the same size.", stacklevel=3)
        try:
            np.broadcast_shapes(a, b)
        except ValueError:
            raise _broadcast_error(a, b) from None


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (mirrors
    ``F.smooth_l1_loss``; ``beta=0`` is the L1 loss).

    Args:
        input, target (Tensor): the same shape (*) (broadcast with a warning otherwise).
        beta (float): >= 0.

    Raises:
        RuntimeError: negative beta (torch's text).
    """
    _warn_target_size(input, target)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    _check_reduction(reduction, "smooth_l1_loss")
    return apply(ROWS["smooth_l1_loss"], (input, target), (reduction, beta))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (mirrors
    ``F.huber_loss``). ``input``, ``target``: same shape (*); ``weight`` broadcast over it.

    Raises:
        RuntimeError: delta <= 0 (torch's text).
    """
    _warn_target_size(input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _check_reduction(reduction, "huber_loss")
    if weight is not None:
        return _reduce(apply(ROWS["huber_loss"], (input, target), ("none", delta)) * weight,
                       reduction, "huber_loss")
    return apply(ROWS["huber_loss"], (input, target), (reduction, delta))


def _xlogy(x, y):
    """``x * log(y)``, 0 where x == 0 (torch.xlogy)."""
    zero = _const(x._data == 0)
    return nbgrad.where(zero, 0.0, x * nbgrad.where(zero, 1.0, y).log())


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence of ``target`` from the log-probabilities ``input`` (mirrors ``F.kl_div``).

    ``loss = target * (log(target) - input)`` (``exp(target) * (target - input)`` with
    ``log_target``); ``reduction="batchmean"`` divides the sum by the batch size (dim 0), "mean"
    by the element count, with torch's warning.

    Raises:
        ValueError: an unknown reduction.
    """
    if reduction == "mean":
        import warnings
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.", stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = _xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction, "kl_div")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Poisson negative log-likelihood (mirrors ``F.poisson_nll_loss``).

    ``exp(x) - t x`` with ``log_input``, else ``x - t log(x + eps)``; ``full`` adds Stirling's
    ``t log t - t + 0.5 log(2 pi t)`` where ``t > 1``.
    """
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        t = nbgrad.where(big, target, 1.0)  # log of the targets <= 1 is never used
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + nbgrad.where(big, stirling, 0.0)
    return _reduce(loss, reduction, "poisson_nll_loss")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Gaussian negative log-likelihood ``0.5 (log var + (x - t)^2 / var)`` (mirrors
    ``F.gaussian_nll_loss``; ``var`` clamped at ``eps`` without blocking its gradient, as torch).

    Args:
        input, target (Tensor): (N, *).
        var (Tensor | float): (N, *), or (N, *) with one dim fewer or a last dim of 1
            (one variance per sample), or a float.

    Raises:
        ValueError: var of an incompatible size, or negative (torch's texts); an unknown
            reduction.
    """
    if not isinstance(var, nbgrad.Tensor):
        var = nbgrad.full(tuple(input.shape), float(var), dtype=input.dtype)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if (var._data < 0).any():
        raise ValueError("var has negative entry/entries")
    var = var.clone()
    with nbgrad.no_grad():  # clamped without blocking the gradient, as torch
        var.clamp_(min=eps)
    loss = (var.log() + (input - target) ** 2 / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "gaussian_nll_loss")


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dim (mirrors ``F.pairwise_distance``).

    Shapes: (N, D) and (N, D) (or broadcastable; (D,) unbatched) -> (N,).
    """
    return (x1 - x2 + eps).norm(p, dim=-1, keepdim=keepdim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim`` (mirrors ``F.normalize``; the graph is
    PyTorch's: LinalgVectorNormBackward0, ClampMinBackward0, ExpandBackward0, DivBackward0).

    Shapes: any (*); the norm is taken over ``dim`` and broadcast back. With ``out``, the result
    is written there and nothing is recorded, as PyTorch's ``out=`` forms.
    """
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is None:
        return input / denom
    with nbgrad.no_grad():
        return out.copy_(input / denom)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``x1 . x2 / (max(||x1||, eps) max(||x2||, eps))`` along ``dim`` (mirrors
    ``F.cosine_similarity``; the norms are clamped without blocking their gradient, as torch).
    """
    n1 = x1.norm(2, dim=dim, keepdim=True).clone()
    n2 = x2.norm(2, dim=dim, keepdim=True).clone()
    with nbgrad.no_grad():  # clamped without blocking the gradient, as torch
        n1.clamp_(min=eps)
        n2.clamp_(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _filled(like, value):
    """A constant tensor of ``like``'s shape (torch's C++ ``scalar - tensor``: SubBackward0)."""
    return nbgrad.full(tuple(like.shape), value, dtype=like.dtype)


def _check_label_target(target, shape, who):
    if tuple(target.shape) != tuple(shape):
        raise RuntimeError(f"{who}: expected target of shape {tuple(shape)}, got "
                           f"{tuple(target.shape)}")


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` for ``y = 1``, ``max(0, cos(x1, x2) - margin)`` for ``y = -1``
    (mirrors ``F.cosine_embedding_loss``). Shapes: (N, D), (N, D), (N,) or (D,), (D,), ().
    """
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(
            f"cosine_embedding_loss: expected 1D or 2D inputs of the same shape, got "
            f"{tuple(input1.shape)} and {tuple(input2.shape)}")
    _check_label_target(target, input1.shape[:-1], "cosine_embedding_loss")
    eps = 1e-12
    d = input1.ndim - 1
    prod = (input1 * input2).sum(d)
    mag1 = (input1 * input1).sum(d) + eps
    mag2 = (input2 * input2).sum(d) + eps
    cos = prod / (mag1 * mag2).sqrt()
    pos = nbgrad.where(target == 1, _filled(cos, 1.0) - cos, 0.0)
    neg = nbgrad.where(target == -1, (cos - margin).clamp_min(0), 0.0)
    return _reduce(pos + neg, reduction, "cosine_embedding_loss")


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -y (x1 - x2) + margin)`` (mirrors ``F.margin_ranking_loss``). Shapes: (N,) x3.

    Raises:
        RuntimeError: the three sizes differ (torch's text).
    """
    if not (input1.ndim == input2.ndim == target.ndim):
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    loss = (target.neg() * (input1 - input2) + margin).clamp_min(0)
    return _reduce(loss, reduction, "margin_ranking_loss")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(0, d(a, p) - d(a, n) + margin)`` with the pairwise p-norm distance (mirrors
    ``F.triplet_margin_loss``; ``swap`` uses ``min(d(a, n), d(p, n))``). Shapes: (N, D) x3.

    Raises:
        RuntimeError: inputs of different ranks (torch's text).
    """
    a, pos, neg = anchor.ndim, positive.ndim, negative.ndim
    if not (a == pos == neg):
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {a}D, positive {pos}D, and negative {neg}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = nbgrad.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    loss = (d_pos + margin - d_neg).clamp_min(0)
    return _reduce(loss, reduction, "triplet_margin_loss")


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``x`` where ``y = 1``, ``max(0, margin - x)`` where ``y = -1`` (mirrors
    ``F.hinge_embedding_loss``). ``input``, ``target``: the same shape (*).
    """
    margin_part = nbgrad.where(target != 1, (_filled(input, margin) - input).clamp_min(0), 0.0)
    self_part = nbgrad.where(target != -1, input, 0.0)
    return _reduce(margin_part + self_part, reduction, "hinge_embedding_loss")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-y x))`` (mirrors ``F.soft_margin_loss``). Shapes: (*), (*)."""
    _check_label_target(target, input.shape, "soft_margin_loss")
    _check_reduction(reduction, "soft_margin_loss")
    return apply(ROWS["soft_margin_loss"], (input, target), (reduction,))


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per-class binary logistic loss averaged over classes (mirrors
    ``F.multilabel_soft_margin_loss``). Shapes: input (N, C), target (N, C) of 0/1; weight (C,).
    """
    _check_label_target(target, input.shape, "multilabel_soft_margin_loss")
    loss = (target * logsigmoid(input) + (1 - target) * logsigmoid(input.neg())).neg()
    if weight is not None:
        loss = loss * weight
    cdim = input.ndim - 1
    loss = loss.sum(cdim) / input.shape[cdim]
    return _reduce(loss, reduction, "multilabel_soft_margin_loss")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge loss ``sum_{i != y} max(0, margin - x[y] + x[i])^p / C`` (mirrors
    ``F.multi_margin_loss``; one MultiMarginLossBackward0 node).

    Shapes: input (N, C) or (C,); target int64 (N,) or (); weight (C,).

    Raises:
        ValueError: p not 1 or 2 (torch's text); IndexError: a target out of range.
    """
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    n, c = x.shape
    t = target._data.reshape(-1).astype(np.int64)
    if t.shape[0] != n:
        raise RuntimeError(f"multi_margin_loss: expected target of shape ({n},) for input of "
                           f"shape {tuple(input.shape)}, got {tuple(target.shape)}")
    if t.size and (t.min() < 0 or t.max() >= c):
        raise IndexError(f"Target {int(t[(t < 0) | (t >= c)][0])} is out of bounds. "
                         f"(multi_margin_loss: class indices must be in [0, {c}))")
    _check_reduction(reduction, "multi_margin_loss")
    w = None if weight is None else weight._data.astype(x._data.dtype)
    out = apply(ROWS["multi_margin_loss"], (x,), (t, p, margin, w, reduction))
    if input.ndim < 2 and reduction == "none":
        out = out.reshape(tuple(target.shape))
    return out



# ---------------------------------------------------------------------------- attention
__all__ += ["scaled_dot_product_attention", "multi_head_attention_forward"]

_C_TYPE = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
           "int32": "int", "bool": "bool"}


def _c_type(dtype):
    """torch's C++ name of a dtype, as its attention errors print it (float, double, ...)."""
    name = str(dtype).rsplit(".", 1)[-1]
    return _C_TYPE.get(name, name)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(q k^T * scale + mask) v`` (mirrors ``F.scaled_dot_product_attention``).

    Where torch's CPU kernel runs — 4-D inputs with the same (N, heads), no dropout, a mask that
    needs no gradient — one ``ScaledDotProductFlashAttentionForCpuBackward0`` node, as torch;
    otherwise torch's math path: matmul, softmax, dropout, matmul.

    Args:
        query (Tensor): (..., L, E).
        key (Tensor): (..., S, E).
        value (Tensor): (..., S, Ev).
        attn_mask (Tensor, optional): broadcastable to (..., L, S): bool (True = may attend)
            or float (added to the scores).
        dropout_p (float): dropout on the attention weights (always applied when > 0).
        is_causal (bool): query i attends to keys 0..i only (top-left aligned); not together
            with ``attn_mask``.
        scale (float, optional): defaults to 1 / sqrt(E).
        enable_gqa (bool): grouped-query attention: key/value heads (dim -3) are repeated to
            the query's number of heads.

    Returns:
        Tensor: (..., L, Ev). A query row that may attend to nothing gives zeros (and zero
        gradients), as torch, not NaN.

    Raises:
        RuntimeError: different dtypes, a mask of another dtype, or mismatched sizes, naming
            the shapes received.
    """
    q, k, v = query, key, value
    if not q.dtype == k.dtype == v.dtype:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_c_type(q.dtype)} key.dtype: {_c_type(k.dtype)} and value.dtype: "
            f"{_c_type(v.dtype)} instead.")
    if attn_mask is not None and attn_mask.dtype != nbgrad.bool \
            and not attn_mask.dtype.is_floating_point:
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {_c_type(attn_mask.dtype)} and  query.dtype: "
            f"{_c_type(q.dtype)} instead.")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2 or k.shape[-1] != q.shape[-1] \
            or k.shape[-2] != v.shape[-2]:
        raise RuntimeError(
            "scaled_dot_product_attention: expected query (..., L, E), key (..., S, E) and "
            f"value (..., S, Ev), got query {tuple(q.shape)}, key {tuple(k.shape)} and value "
            f"{tuple(v.shape)}")
    groups = 1
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hq % hk or v.shape[-3] != hk:
            raise RuntimeError(
                f"scaled_dot_product_attention: with enable_gqa the query's {hq} heads must be "
                f"a multiple of the key's and value's, got {hk} and {v.shape[-3]}")
        groups = hq // hk
    if is_causal and attn_mask is not None:  # torch's math path (the one with gradients)
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    n_q, n_k = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    # the additive mask: bool masks and causality as 0 / -inf constants
    xp = backend.get_array_module(q._data)
    blocked = xp.triu(xp.ones((n_q, n_k), dtype=bool), 1) if is_causal else None
    float_mask = None
    if attn_mask is not None:
        if attn_mask.dtype == nbgrad.bool:
            blocked = ~attn_mask._data
        else:
            float_mask = attn_mask
    dt = q._data.dtype
    add = None if blocked is None else xp.where(blocked, -np.inf, 0.0).astype(dt)
    if (q.ndim == 4 and q.shape[:1] == k.shape[:1] == v.shape[:1] and k.shape[1] == v.shape[1]
            and v.shape[-1] == q.shape[-1] and dropout_p == 0.0
            and (float_mask is None or not float_mask.requires_grad)):
        # torch's CPU kernel: one node (the mask is a constant of the node); rows with nothing
        # to attend to give zeros
        if float_mask is not None:
            fm = float_mask._data.astype(dt)
            add = fm if add is None else add + fm
        dead = None
        if add is not None:
            dead = backend.get_array_module(add).isneginf(add).all(-1, keepdims=True)
            if dead.any():
                add = np.where(dead, np.zeros((), dt), add)
            else:
                dead = None
        return apply(ROWS["scaled_dot_product_flash_attention_for_cpu"], (q, k, v),
                     (add, dead, scale, groups))
    # torch's math path: matmul, mask, safe softmax (a fully masked row gives zeros), dropout
    if groups > 1:  # repeat_interleave of the key/value heads, as torch spells it
        k, v = (t.unsqueeze(-3).expand(*t.shape[:-2], groups, *t.shape[-2:]).contiguous()
                .view(*t.shape[:-3], q.shape[-3], *t.shape[-2:]) for t in (k, v))
    root = math.sqrt(scale)  # torch's math path scales q and k^T by sqrt(scale) each
    scores = (q * root).matmul(k.transpose(-2, -1) * root)
    if add is not None:
        scores = scores + _const(add)
    if float_mask is not None:
        scores = scores + float_mask
    attn = nbgrad._safe_softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True)
    return attn.matmul(v)


def _float_mask(mask, name, dtype, other=None, other_name=""):
    """torch's _canonical_mask: a bool mask (True = blocked) becomes 0 / -inf of ``dtype``;
    warns, as torch, when ``other`` (the mask it is combined with) has another dtype."""
    if mask is None:
        return None
    if mask.dtype != nbgrad.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other is not None and other.dtype != mask.dtype:
        import warnings
        warnings.warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same "
                      "type for both instead.", stacklevel=3)
    if mask.dtype == nbgrad.bool:
        return _const(np.where(mask._data, -np.inf, 0.0).astype(nbgrad.dtypes.to_np(dtype)))
    return mask


def _mha_check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads):
    """torch's checks of the ranks (texts as torch's); returns whether the input is batched."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.ndim}-D query tensor")
    batched = query.ndim == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(
            f"For {kind} `query`, expected `key` and `value` to be {query.ndim}-D but found "
            f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(
            f"For {kind} `query`, expected `key_padding_mask` to be `None` or "
            f"{query.ndim - 1}-D but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(
                f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                f"{attn_mask.ndim}-D tensor instead")
        if not batched and attn_mask.ndim == 3:
            want = (num_heads, query.shape[0], key.shape[0])
            if tuple(attn_mask.shape) != want:
                raise AssertionError(f"Expected `attn_mask` shape to be {want} but got "
                                     f"{attn_mask.shape}")
    return batched


def _split_heads(x, n):
    """(L, N, n * E) projections packed on the last dim -> n tensors (L, N, E), torch's way."""
    e = x.shape[-1] // n
    x = x.unflatten(-1, (n, e)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    return [x[i] for i in range(n)]


def _in_projection(query, key, value, w, b, w_q=None, w_k=None, w_v=None):
    """q, k, v projections: one packed weight (3E, E) or three separate ones (torch's)."""
    e = query.shape[-1]
    bs = (None,) * 3 if b is None else b.chunk(3)
    if w_q is not None:
        return linear(query, w_q, bs[0]), linear(key, w_k, bs[1]), linear(value, w_v, bs[2])
    if key is value:
        if query is key:
            return _split_heads(linear(query, w, b), 3)
        w_q, w_kv = w.split([e, 2 * e])
        b_q, b_kv = (None, None) if b is None else b.split([e, 2 * e])
        return [linear(query, w_q, b_q)] + _split_heads(linear(key, w_kv, b_kv), 2)
    w_q, w_k, w_v = w.chunk(3)
    return linear(query, w_q, bs[0]), linear(key, w_k, bs[1]), linear(value, w_v, bs[2])


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention (mirrors ``F.multi_head_attention_forward``; see
    :class:`nbgrad.nn.MultiheadAttention`).

    Args:
        query (Tensor): (L, N, E) or unbatched (L, E).
        key, value (Tensor): (S, N, E_k), (S, N, E_v) (or unbatched).
        key_padding_mask (Tensor, optional): (N, S): bool (True = ignore that key) or float
            (added).
        attn_mask (Tensor, optional): (L, S) or (N * num_heads, L, S): bool (True = blocked)
            or float (added).
        need_weights (bool): also return the attention weights (N, num_heads, L, S), averaged
            over heads with ``average_attn_weights``; otherwise the attention goes through
            :func:`scaled_dot_product_attention`.
        is_causal (bool): a hint that ``attn_mask`` is causal (it must still be given).

    Returns:
        (Tensor, Tensor | None): output (L, N, E) and the weights or None.

    Raises:
        AssertionError / RuntimeError: torch's checks, with its texts.
    """
    batched = _mha_check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _float_mask(key_padding_mask, "key_padding_mask", query.dtype,
                                   attn_mask, "attn_mask")
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
            "module method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the scaled_dot_product_attention below builds it
    else:
        attn_mask = _float_mask(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        shape = tuple(query.shape) if batched else (query.shape[0], query.shape[2])
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim} "
            f"(multi-head attention: expected query of size (L, N, {embed_dim_to_check}) or "
            f"(L, {embed_dim_to_check}), got {shape})")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
        q, k, v = _in_projection(query, key, value, None, in_proj_bias, q_proj_weight,
                                 k_proj_weight, v_proj_weight)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape "
                                 f"{value.shape}")
        q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        want = (tgt_len, src_len) if attn_mask.ndim == 2 else (bsz * num_heads, tgt_len, src_len)
        if tuple(attn_mask.shape) != want:
            raise RuntimeError(f"The shape of the {attn_mask.ndim}D attn_mask is "
                               f"{attn_mask.shape}, but should be {want}.")
        if attn_mask.ndim == 2:
            attn_mask = attn_mask.unsqueeze(0)
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key.")
        k = nbgrad.cat([k, bias_k.repeat(1, bsz, 1)])
        v = nbgrad.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k is set but bias_v is None" if bias_k is not None
                             else "bias_v is set but bias_k is None")
    q = q.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = static_k if static_k is not None else \
        k.view(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = static_v if static_v is not None else \
        v.view(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        zeros = nbgrad.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = nbgrad.cat([k, zeros], 1), nbgrad.cat([v, zeros], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(
                f"Expected key_padded_mask.shape to be ({bsz}, {src_len}), but got "
                f"{tuple(key_padding_mask.shape)} (key_padding_mask is (N, S))")
        kpm = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1) \
            .reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        q_scaled = q * math.sqrt(1.0 / float(head_dim))
        scores = q_scaled.bmm(k.transpose(-2, -1))  # torch: baddbmm(attn_mask, ...)
        if attn_mask is not None:
            scores = attn_mask + scores
        weights = scores.softmax(-1)
        if dropout_p > 0.0:
            weights = dropout(weights, dropout_p)
        out = weights.bmm(v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, embed_dim)
        weights = weights.view(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, embed_dim)
    return (out if batched else out.squeeze(1)), None


# ---------------------------------------------------------------------------- more layers
def _pad_by_index(input, pad, mode):
    """reflect / replicate / circular padding: gather along each padded dim (reflect and
    replicate of 1 or 2 dims: one ReflectionPad2DBackward0-style node, as torch)."""
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError("Padding length must be divisible by 2 and at most twice the input dims")
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
                raise ValueError(f"Padding size should be less than the corresponding input "
                                 f"dimension, but got: padding ({lo}, {hi}) at dimension {d} "
                                 f"of input {list(input.shape)}")
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


def _linear(name, input, fwd, adj):
    """Apply the one-node row ``name`` for a map linear in ``input``: ``fwd`` computes it on
    arrays, ``adj`` its adjoint (the gradient)."""
    return apply(ROWS[name], (input,), (Ctx((fwd, adj)),))


def _mat_fwd(mh, mw):
    """x -> mh @ x @ mw.T over the last two dims (either matrix may be None: identity)."""
    def fwd(a):
        xp = backend.get_array_module(a)  # the matrices are made on the host
        if mw is not None:
            a = a @ xp.asarray(mw).T
        return xp.asarray(mh) @ a if mh is not None else xp.ascontiguousarray(a)
    return fwd


def _single(v, name="value"):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{name} must be an int or a 1-tuple, got {v!r}")
        return int(v[0])
    return int(v)


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
    if x.dtype != w.dtype:
        raise RuntimeError(f"Input type ({input.dtype}) and weight type ({weight.dtype}) should "
                           "be the same")
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
    if input.dtype != weight.dtype:
        raise RuntimeError(f"Input type ({input.dtype}) and weight type ({weight.dtype}) should "
                           "be the same")
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
    s, p, op, d = (_single(v) for v in (stride, padding, output_padding, dilation))
    if op >= max(s, d):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but "
                           f"got output_padding: {op} stride: {s} dilation: {d}")
    out = apply(ROWS["_convolution_transpose2d"], (input, weight, bias),
                ((1, s), (0, p), (0, op), (1, d), groups))
    return out.squeeze(0) if unbatched else out


def _check_1d_pool(input, who):
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{who}: expected 2D or 3D input (C, L) or (N, C, L), got "
                           f"{list(input.shape)}")


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over sliding windows of (N, C, L) or (C, L) (mirrors ``F.max_pool1d``)."""
    _check_1d_pool(input, "max_pool1d")
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

    Returns:
        Tensor (*, H_out, W_out); with ``return_indices`` also the int64 flat index into H*W.
    """
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


def _interp_matrix(n_in, n_out, mode, align_corners, scale, dtype):
    """(n_out, n_in) interpolation weights along one dim, torch's source-index rules."""
    m = np.zeros((n_out, n_in), dtype)
    dst = np.arange(n_out, dtype=np.float64)
    rows = np.arange(n_out)
    if mode in ("nearest", "nearest-exact"):
        ratio = 1.0 / scale if scale else n_in / n_out
        src = np.floor((dst + 0.5) * ratio) if mode == "nearest-exact" else np.floor(dst * ratio)
        m[rows, np.minimum(src.astype(np.int64), n_in - 1)] = 1.0
        return m
    if align_corners:
        ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        src = dst * ratio
    else:
        ratio = 1.0 / scale if scale else n_in / n_out
        src = np.maximum((dst + 0.5) * ratio - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    np.add.at(m, (rows, i0), 1.0 - lam)
    np.add.at(m, (rows, i1), lam)
    return m


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims (mirrors ``F.interpolate``): modes "nearest", "nearest-exact",
    "linear" (3-D input), "bilinear" (4-D input), each one node as torch
    (UpsampleNearest2DBackward0, UpsampleBilinear2DBackward0, ...), computed as a product with
    per-dim interpolation matrices built with torch's source-index rules.

    Args:
        input (Tensor): (N, C, L) or (N, C, H, W).
        size (int | tuple) or scale_factor (float | tuple): exactly one.
        align_corners (bool): linear modes only (default False).

    Raises:
        ValueError: both or neither of size / scale_factor, align_corners with nearest;
        NotImplementedError: other modes, antialias.
    """
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    if mode in ("nearest", "nearest-exact") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if mode not in ("nearest", "nearest-exact", "linear", "bilinear") or antialias:
        raise NotImplementedError(f"interpolate: mode {mode!r} (antialias={antialias}) is not "
                                  "supported (nearest, nearest-exact, linear, bilinear)")
    dims = input.ndim - 2
    if dims not in (1, 2) or (mode == "linear" and dims != 1) or (mode == "bilinear"
                                                                   and dims != 2):
        need = {"linear": "3D", "bilinear": "4D"}.get(mode, "3D or 4D")
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {need} input")
    spatial = tuple(input.shape[2:])
    if size is not None:
        out_size = _out_sizes(size, spatial)
        scales = (None,) * dims
    else:
        sf = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * dims
        out_size = tuple(int(math.floor(n * f)) for n, f in zip(spatial, sf))
        scales = (None,) * dims if recompute_scale_factor else tuple(float(f) for f in sf)
    dt = input._data.dtype
    mats = [_interp_matrix(n, o, mode, bool(align_corners), sc, dt)
            for n, o, sc in zip(spatial, out_size, scales)]
    mh = mats[0] if dims == 2 else None
    name = {"nearest": "upsample_nearest", "nearest-exact": "_upsample_nearest_exact",
            "linear": "upsample_linear", "bilinear": "upsample_bilinear"}[mode] + f"{dims}d"
    return _linear(name, input, _mat_fwd(mh, mats[-1]),
                   _mat_fwd(None if mh is None else mh.T, mats[-1].T))


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (mirrors ``F.upsample``)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


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


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise over groups of channels (mirrors ``F.group_norm``; one
    NativeGroupNormBackward0 node for input, weight and bias): statistics per (sample, group),
    then the per-channel affine.

    Raises:
        RuntimeError: channels not divisible by num_groups (torch's text).
    """
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    c = input.shape[1]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    return apply(ROWS["native_group_norm"], (input, weight, bias), (num_groups, eps, Ctx(None)))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each (sample, channel) over its spatial dims (mirrors ``F.instance_norm``):
    batch_norm over the input viewed as (1, N*C, *spatial), as torch does
    (NativeBatchNormBackward0 between two views); running stats averaged over the batch.
    """
    n, c = input.shape[0], input.shape[1]
    x = input.reshape(1, n * c, *input.shape[2:])
    w = None if weight is None else weight.repeat(n)
    b = None if bias is None else bias.repeat(n)
    rm = None if running_mean is None else running_mean.repeat(n)
    rv = None if running_var is None else running_var.repeat(n)
    out = batch_norm(x, rm, rv, w, b, use_input_stats, momentum, eps)
    if use_input_stats and running_mean is not None:
        with nbgrad.no_grad():
            running_mean.copy_(rm.reshape(n, c).mean(0))
            running_var.copy_(rv.reshape(n, c).mean(0))
    return out.reshape(tuple(input.shape))


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


def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1^T W_o x2 + b_o`` (mirrors ``F.bilinear``; torch's graph: a TrilinearBackward0
    node between views).

    Shapes: input1 (*, in1), input2 (*, in2), weight (out, in1, in2), bias (out,) -> (*, out).

    Raises:
        RuntimeError: sizes that do not match the weight.
    """
    o, i1, i2 = weight.shape
    if input1.shape[-1] != i1 or input2.shape[-1] != i2 or \
            tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear: expected input1 (*, {i1}) and input2 (*, {i2}) with the "
                           f"same leading dims, got {list(input1.shape)} and "
                           f"{list(input2.shape)}")
    lead = tuple(input1.shape[:-1])
    out = apply(ROWS["_trilinear"], (input1.reshape(-1, i1), weight, input2.reshape(-1, i2)))
    out = out.reshape(*lead, o)
    return out + bias if bias is not None else out


def _embedding_bag_row(weight, ids, bag, keep, nb, mode, psw):
    """One EmbeddingBagBackward0 node: each bag's sum / mean / max of its rows of ``weight``.
    The bags are worked out on the host (``ids``, ``bag``, ``keep``, ``psw`` are numpy)."""
    w = weight._data
    xp = backend.get_array_module(w)
    n, dim = len(ids), w.shape[1]
    if mode in ("sum", "mean"):
        m = np.zeros((nb, n), w.dtype)
        m[bag[keep], np.arange(n)[keep]] = 1.0 if psw is None else psw[keep]
        if mode == "mean":
            m = m / np.maximum((m != 0).sum(1, keepdims=True), 1)
        m, ids = xp.asarray(m), xp.asarray(ids)

        def fwd(a):
            return m @ a[ids]

        def adj(g):
            z = xp.zeros(w.shape, g.dtype)
            xp.add.at(z, ids, m.T @ g)
            return z
    elif mode == "max":
        vals = backend.to_device(w, backend.CPU)[ids]
        pick = np.zeros((nb, dim), np.int64)
        filled = np.zeros(nb, bool)
        for i in range(nb):
            sel = np.nonzero((bag == i) & keep)[0]
            if len(sel):
                pick[i] = ids[sel[vals[sel].argmax(0)]]
                filled[i] = True
        pick, filled, cols = xp.asarray(pick), xp.asarray(filled), xp.asarray(np.arange(dim))

        def fwd(a):
            return xp.where(filled[:, None], a[pick, cols], 0)

        def adj(g):
            z = xp.zeros(w.shape, g.dtype)
            xp.add.at(z, (pick[filled], cols), g[filled])
            return z
    else:
        raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
    return _linear("_embedding_bag", weight, fwd, adj)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embeddings (mirrors ``F.embedding_bag``).

    Args:
        input (Tensor): int64 (B, L) bags of equal length, or (n,) with ``offsets`` (B,).
        weight (Tensor): (num_embeddings, dim).
        mode (str): "sum" | "mean" | "max".
        per_sample_weights (Tensor, optional): like ``input``, "sum" mode only.
        padding_idx (int, optional): entries equal to it are left out of their bag.

    Returns:
        Tensor: (B, dim); an empty bag gives zeros.

    Raises:
        ValueError: offsets with 2-D input, or missing with 1-D input; per_sample_weights with
            another mode (torch's texts).
    """
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets)}")
        b, L = input.shape
        offs = np.arange(0, b * L, L)
        ids = backend.to_device(input._data, backend.CPU).reshape(-1)  # bags: host bookkeeping
        psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        offs = backend.to_device(offsets._data, backend.CPU).astype(np.int64)
        if include_last_offset:
            offs = offs[:-1]
        ids = backend.to_device(input._data, backend.CPU)
        psw = per_sample_weights
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on the "
                                  "PyTorch GitHub.")
    n = len(ids)
    bag = np.searchsorted(offs, np.arange(n), side="right") - 1
    keep = np.ones(n, bool) if padding_idx is None else ids != padding_idx
    nb = len(offs)
    if max_norm is not None:
        _embedding_renorm_(weight, ids, max_norm, norm_type)
    if psw is None or not psw.requires_grad:
        return _embedding_bag_row(weight, ids.astype(np.int64), bag, keep, nb, mode,
                                  None if psw is None else backend.to_device(psw._data,
                                                                             backend.CPU))
    rows = embedding(_const(ids.astype(np.int64)), weight)
    rows = rows * psw.unsqueeze(-1)
    if mode in ("sum", "mean"):
        m = np.zeros((nb, n), weight._data.dtype)
        m[bag[keep], np.arange(n)[keep]] = 1.0
        if mode == "mean":
            counts = m.sum(1, keepdims=True)
            m = m / np.maximum(counts, 1)
        return _const(m).matmul(rows)
    if mode == "max":
        outs = []
        for i in range(nb):
            sel = np.nonzero((bag == i) & keep)[0]
            if len(sel):
                outs.append(rows[_const(sel.astype(np.int64))].amax(0))
            else:
                outs.append(nbgrad.zeros(weight.shape[1], dtype=weight.dtype))
        return nbgrad.stack(outs, 0)
    raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
