"""Losses (mse, l1, nll, cross_entropy with its fused path, bce, smooth_l1, huber, kl_div,
margin and embedding losses, ...) and the distances they use (pairwise_distance,
cosine_similarity, normalize).
"""
import math
import warnings

import numpy as np

from nbgrad import backend, creation, dtypes
from nbgrad import functions
from nbgrad.autograd import grad_mode
from nbgrad.tensor import Tensor
from nbgrad.autograd import fused
from nbgrad.autograd.apply import apply, _broadcast_error
from nbgrad.autograd.grad_mode import GENERAL_PATH, STATE as _GRAD
from nbgrad.autograd.saved_index import SavedIndex
from nbgrad.autograd.record import index_arg
from nbgrad.ops import Ctx, ROWS
from nbgrad.functions.args import scalar_name
from nbgrad.ops.derivatives import _sum_all
from nbgrad.ops.losses import _arange, cross_entropy_grad
from nbgrad.ops.nn import log_softmax_parts, log_softmax_picked
from .common import _check_reduction, _const, _filled, _legacy_reduction, _reduce, legacy_reduction
from .activation import logsigmoid

_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)
_max_reduce = np.maximum.reduce


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error (mirrors ``F.mse_loss``; one MseLossBackward0 node).

    ``input``, ``target``: same shape (*) (broadcast, with torch's warning, otherwise).
    ``weight``: the input's shape; "mean" then divides by ``weight.sum()``, as torch does.
    ``size_average``/``reduce``: torch's deprecated arguments (they set ``reduction``).

    Raises:
        ValueError: ``weight`` not of the input's shape; an unknown ``reduction``.
    """
    _warn_target_size(input, target)
    if weight is not None:
        return _weighted(input, target, weight, reduction, lambda d: d * d)
    _check_reduction(reduction, "mse_loss")
    input, target = _promoted(input, target)
    return apply(ROWS["mse_loss"], (input, target), (reduction,))


def _weighted(input, target, weight, reduction, err):
    """torch's weighted mse/l1 (``F.mse_loss(..., weight=)``): ``err(input - target) * weight``,
    summed, or for "mean" divided by ``weight.sum()``."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = err(input - target) * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / weight.sum()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', "
                     "'sum'.")


def _promoted(input, target):
    """``input`` and ``target`` in their common dtype by PyTorch's promotion (a float32 output
    against an int64 target computes in float32, as torch's loss kernels do, not numpy's
    float64); tensors already of that dtype are returned as they are."""
    if input.dtype is target.dtype:
        return input, target
    common = dtypes.from_np(dtypes.result_type(input._data, target._data))
    return (input if input.dtype is common else input.to(common),
            target if target.dtype is common else target.to(common))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error (mirrors ``F.l1_loss``). ``input``, ``target``: same shape (*);
    ``weight`` as in :func:`mse_loss`."""
    _warn_target_size(input, target)
    if weight is not None:
        return _weighted(input, target, weight, reduction, lambda d: d.abs())
    return _reduce((input - target).abs(), reduction, "l1_loss")


def _check_class_target(input, target, who, ignore_index):
    """Validate integer class targets for (N, C, ...) / (C,) input.

    Returns:
        (class_dim, n_classes, any_ignored): whether some target equals ``ignore_index``.
    """
    t, x = target._data, input._data
    if t.dtype is not _I64 and t.dtype != np.int64:
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
        if t.ndim == 1 and t.shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                             f"{t.shape[0]}")
        if t.ndim != 0:
            raise ValueError(
                f"{who}: expected a 0-D target for 1-D input of {c} classes, got target of "
                f"shape {tuple(t.shape)}")
    else:
        tb = t.shape[0] if t.ndim else 0  # torch reads a 0-d target's batch size as 0
        if t.ndim == 0 or tb != x.shape[0]:
            raise ValueError(
                f"Expected input batch_size ({x.shape[0]}) to match target batch_size "
                f"({tb}).")
        if t.ndim != nd - 1 or t.shape[1:] != x.shape[2:]:
            torch_text = (f"size mismatch (got input: {list(x.shape)} , target: "
                          f"{list(t.shape)}" if nd == 4 else
                          f"Expected target size {[x.shape[0]] + list(x.shape[2:])}, got "
                          f"{list(t.shape)}")
            raise RuntimeError(
                f"{who}: expected target of shape {(x.shape[0],) + x.shape[2:]} for input of "
                f"shape {tuple(x.shape)}, got {tuple(t.shape)}. {torch_text}")
    if not t.size:
        return cdim, c, False
    # (one pass: a negative index is a huge uint64; the ufunc's reduce without max's wrapper)
    u = t.view(_U64)
    in_range = (_max_reduce(u, axis=None) if type(u) is np.ndarray else u.max()) < c
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
    c = logp.shape[0 if logp.ndim == 1 else 1] if logp.ndim else 0
    if weight is not None and weight.numel() != c:
        raise RuntimeError(
            f"weight tensor should be defined either for all {c} classes or no classes but got "
            f"weight tensor of shape: {list(weight.shape)}" if logp.ndim <= 2 else
            "weight tensor should be defined either for all or no classes")
    ignored = _check_class_target(logp, target, who, ignore_index)[2]
    _check_reduction(reduction, who)
    w = None if weight is None else weight._data
    t = index_arg(target)  # saved as the tensor, version-checked (as torch's target)
    if logp._data.ndim <= 2:
        return apply(ROWS["nll_loss"], (logp,), (t, w, reduction, ignore_index, Ctx(ignored)))
    # torch's nll_loss_nd: 4-D input goes to nll_loss2d, other ranks are viewed as 4-D first
    n, c = logp.shape[0], logp.shape[1]
    x4 = logp if logp.ndim == 4 else logp.view(n, c, 1, -1)
    tv = target if t.ndim == 3 else target.reshape(n, 1, -1)  # (torch saves this view)
    t4 = index_arg(tv)
    out = apply(ROWS["nll_loss2d"], (x4,), (t4, w, reduction, ignore_index, Ctx(None)))
    if reduction == "none" and logp.ndim != 4:
        out = out.view(tuple(target.shape))
    return out


def _cross_entropy_fused(input, target, ignore_index, reduction, who):
    """cross_entropy of (N, C) logits and int64 targets, none of them ignored, recorded as one
    NllLossBackward0 node (nbgrad.autograd.fused) standing for torch's LogSoftmaxBackward0 ->
    NllLossBackward0. None when a target is ignore_index (then the two nodes are recorded as
    they are). Its forward picks the targets' log-probabilities from log_softmax's parts
    (`log_softmax_parts`) and its backward finishes the others (`cross_entropy_grad`): the
    rows' values bit for bit in fewer array passes; NBGRAD_GENERAL_PATH=1 (and an empty batch)
    runs log_softmax's and nll_loss's forwards and formulas themselves."""
    x, t = input._data, target._data
    if not _plain_targets(x, t, ignore_index) and \
            _check_class_target(input, target, who, ignore_index)[2]:
        return None
    n = len(t)
    if GENERAL_PATH or not n:
        logp = _LOG_SOFTMAX.fwd(x, 1)
        ctx = Ctx(False)
        value = np.asarray(_NLL_LOSS.fwd(logp, t, None, reduction, ignore_index, ctx), x.dtype)
        fast, info = _cross_entropy_rows_backward, (logp, t, reduction, ignore_index, ctx)
    else:
        value, parts, rows, div = _picked_loss(x, t, reduction)
        fast, info = _cross_entropy_backward, (parts, rows, t.copy(), div)
    out = Tensor._make_fresh(value)
    fused.record(out, _NLL_LOSS.node, (), (input,), (None,), 1, fast, _cross_entropy_chain, info,
                 (target, ignore_index, reduction, who), (SavedIndex("target", target),))
    return out


def _plain_targets(x, t, ignore_index):
    """Whether int64 targets `t` of (N, C) logits `x` are the usual ones: (N,) numpy, N > 0,
    each a class and none ``ignore_index``, i.e. what `_check_class_target` passes, returning
    ``(1, C, False)``, in one range check; False sends the call through `_check_class_target`
    (its errors, or the ignored targets)."""
    c = x.shape[1]
    return type(t) is np.ndarray and t.ndim == 1 and 0 < len(t) == x.shape[0] and \
        _max_reduce(t.view(_U64), axis=None) < c and \
        not (0 <= ignore_index < c and (t == ignore_index).any())


def _picked_loss(x, t, reduction):
    """``(value, parts, rows, div)``: nll_loss(log_softmax(x, 1), t) of (N, C) logits, a 0-d
    array of x's dtype, from the targets' log-probabilities alone (`log_softmax_picked`, summed
    as the nll row sums them: bit for bit its value), with what the fused backward needs (the
    no-grad path and the fused node share it)."""
    parts = log_softmax_parts(x)
    rows = _arange(len(t), x)
    div = len(t) if reduction == "mean" else 1  # (as nll_loss's forward divides)
    value = -_sum_all(log_softmax_picked(parts, rows, t), x.dtype) / div
    return np.asarray(value, x.dtype), parts, rows, div


def _cross_entropy_chain(input, target, ignore_index, reduction, who):
    return _nll(input.log_softmax(1), target, None, ignore_index, reduction, who)


def _cross_entropy_backward(node, g, arrays):
    parts, rows, t, div = node._chain.info
    if g.dtype != parts[0].dtype:  # (a gradient of another dtype: the chain's nodes promote)
        return fused._chain_backward(node, g, False)
    return [cross_entropy_grad(parts, rows, t, div, g)]


def _cross_entropy_rows_backward(node, g, arrays):
    """nll_loss's formula (saved: self, target, weight, reduction, ignore_index, ctx), then
    log_softmax's (result, dim)."""
    logp, t, reduction, ignore_index, ctx = node._chain.info
    return [_LOG_SOFTMAX.vjp(0, _NLL_LOSS.vjp(0, g, logp, t, None, reduction, ignore_index, ctx),
                             logp, 1)]


_LOG_SOFTMAX, _NLL_LOSS = ROWS["log_softmax"], ROWS["nll_loss"]
assert _NLL_LOSS.names == ("self", "target", "weight", "reduction", "ignore_index", "ctx") and \
    _LOG_SOFTMAX.names == ("result", "dim")


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
    if nd == 2 and weight is None and label_smoothing <= 0 and \
            type(input._data) is np.ndarray and input._data.dtype.kind == "f" and \
            (target._data.dtype is _I64 or target._data.dtype == _I64) and \
            reduction in ("mean", "sum"):
        if not (_GRAD.enabled and input._requires_grad):
            # nothing to record (no_grad, eval): the chain's values on arrays, one fresh tensor
            x, t = input._data, target._data
            ignored = False
            plain = _plain_targets(x, t, ignore_index)
            if not plain:  # (the checks' errors; an empty batch or an ignored target: rows)
                ignored = _check_class_target(input, target, _who, ignore_index)[2]
                plain = not ignored and len(t) > 0
            token = backend.quiet()  # (as `apply`: no numpy warning reaches the user)
            try:
                if plain:  # the targets' log-probabilities alone, summed as the nll row sums
                    # them: the same value
                    return Tensor._make_fresh(_picked_loss(x, t, reduction)[0])
                return Tensor._make_fresh(np.asarray(_NLL_LOSS.fwd(
                    _LOG_SOFTMAX.fwd(input._data, 1), target._data, None, reduction,
                    ignore_index, Ctx(ignored))))
            finally:
                backend.loud(token)
        if fused.usable():
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
            from nbgrad.functions.args import scalar_name
            raise RuntimeError(
                f"{_who}: floating targets are class probabilities and must have the input's "
                f"shape {tuple(input.shape)}, got {tuple(target.shape)} (for class indices use "
                f"int64): expected target dtype to be Long or Byte, but got "
                f"{scalar_name(target)}")
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
        weight = weight._data if isinstance(weight, Tensor) else np.asarray(weight)
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
    return functions.where(zero, 0.0, x * functions.where(zero, 1.0, y).log())


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence of ``target`` from the log-probabilities ``input`` (mirrors ``F.kl_div``).

    ``loss = target * (log(target) - input)`` (``exp(target) * (target - input)`` with
    ``log_target``); ``reduction="batchmean"`` divides the sum by the batch size (dim 0), "mean"
    by the element count, with torch's warning.

    Raises:
        ValueError: an unknown reduction.
    """
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce)
    elif reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.", stacklevel=2)
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' "
                      "instead.", UserWarning, stacklevel=2)
        reduction = "mean"
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
    _check_reduction(reduction, "poisson_nll_loss")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        t = functions.where(big, target, 1.0)  # log of the targets <= 1 is never used
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + functions.where(big, stirling, 0.0)
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
    if not isinstance(var, Tensor):
        var = creation.full(tuple(input.shape), float(var), dtype=input.dtype)
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
    with grad_mode.no_grad():  # clamped without blocking the gradient, as torch
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
    with grad_mode.no_grad():
        return out.copy_(input / denom)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``x1 . x2 / (max(||x1||, eps) max(||x2||, eps))`` along ``dim`` (mirrors
    ``F.cosine_similarity``; the norms are clamped without blocking their gradient, as torch).
    """
    n1 = x1.norm(2, dim=dim, keepdim=True).clone()
    n2 = x2.norm(2, dim=dim, keepdim=True).clone()
    with grad_mode.no_grad():  # clamped without blocking the gradient, as torch
        n1.clamp_(min=eps)
        n2.clamp_(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


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
            f"{tuple(input1.shape)} and {tuple(input2.shape)}" + (
                f". {_broadcast_error(tuple(input1.shape), tuple(input2.shape))}"
                if input1.ndim == input2.ndim else ""))
    _check_label_target(target, input1.shape[:-1], "cosine_embedding_loss")
    eps = 1e-12
    d = input1.ndim - 1
    prod = (input1 * input2).sum(d)
    mag1 = (input1 * input1).sum(d) + eps
    mag2 = (input2 * input2).sum(d) + eps
    cos = prod / (mag1 * mag2).sqrt()
    pos = functions.where(target == 1, _filled(cos, 1.0) - cos, 0.0)
    neg = functions.where(target == -1, (cos - margin).clamp_min(0), 0.0)
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
        d_neg = functions.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    loss = (d_pos + margin - d_neg).clamp_min(0)
    return _reduce(loss, reduction, "triplet_margin_loss")


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``x`` where ``y = 1``, ``max(0, margin - x)`` where ``y = -1`` (mirrors
    ``F.hinge_embedding_loss``). ``input``, ``target``: the same shape (*).
    """
    margin_part = functions.where(target != 1, (_filled(input, margin) - input).clamp_min(0), 0.0)
    self_part = functions.where(target != -1, input, 0.0)
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
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    _check_label_target(target, input.shape, "multilabel_soft_margin_loss")
    loss = (target * logsigmoid(input) + (1 - target) * logsigmoid(input.neg())).neg()
    if weight is not None:
        loss = loss * weight
    cdim = input.ndim - 1
    loss = loss.sum(cdim) / input.shape[cdim]
    return _reduce(loss, reduction, "multilabel_soft_margin_loss")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss (mirrors ``F.multilabel_margin_loss``): for each sample,
    ``sum_j sum_i max(0, 1 - (x[y_j] - x[i])) / C`` over the target classes ``y_j`` (the entries
    of ``target`` before its first -1, repeats counted) and the classes ``i`` not among them.

    Shapes: input (C,) or (N, C); target int64 of the same shape; "none" gives () or (N,).

    Raises:
        RuntimeError: target of another shape or dtype, or a class out of range (torch's texts).
    """
    _check_reduction(reduction, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(input.shape) or input.ndim not in (1, 2):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    if target.dtype is not dtypes.int64:
        raise RuntimeError(f"expected scalar type Long but found {scalar_name(target)}")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    n, c = x.shape
    t = target._data.reshape(n, c)
    xp = backend.get_array_module(t)
    valid = xp.cumprod(t != -1, axis=1).astype(bool)  # entries before the first -1
    if bool(((valid & ((t < 0) | (t >= c)))).any()):
        raise RuntimeError("argument #2 'target' is out of range")
    # counts[n, k]: how often class k is a target of sample n (repeats count, as in torch)
    counts = ((t[:, :, None] == xp.arange(c)) & valid[:, :, None]).sum(1)
    weight = _const((counts[:, :, None] * (counts == 0)[:, None, :]).astype(x._data.dtype))
    hinge = (1 - x.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)  # [n, target class, other]
    loss = (hinge * weight).sum((1, 2)) / c
    if input.ndim == 1:
        loss = loss.squeeze(0)
    return _reduce(loss, reduction, "multilabel_margin_loss")


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
    t = target._data
    # a 1-D int64 target is saved as the tensor (version-checked, as torch's); another, as the
    # int64 copy made here
    t = index_arg(target) if t.ndim == 1 and t.dtype == np.int64 else \
        t.reshape(-1).astype(np.int64)
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


# torch's deprecated reduction="elementwise_mean" (mean, with its warning)
mse_loss = _legacy_reduction(mse_loss)
l1_loss = _legacy_reduction(l1_loss)
nll_loss = _legacy_reduction(nll_loss)
cross_entropy = _legacy_reduction(cross_entropy)
binary_cross_entropy = _legacy_reduction(binary_cross_entropy)
binary_cross_entropy_with_logits = _legacy_reduction(binary_cross_entropy_with_logits)
smooth_l1_loss = _legacy_reduction(smooth_l1_loss)
huber_loss = _legacy_reduction(huber_loss)
cosine_embedding_loss = _legacy_reduction(cosine_embedding_loss)
margin_ranking_loss = _legacy_reduction(margin_ranking_loss)
triplet_margin_loss = _legacy_reduction(triplet_margin_loss)
hinge_embedding_loss = _legacy_reduction(hinge_embedding_loss)
soft_margin_loss = _legacy_reduction(soft_margin_loss)
multi_margin_loss = _legacy_reduction(multi_margin_loss)
multilabel_margin_loss = _legacy_reduction(multilabel_margin_loss)
# torch checks these two reduction strings itself: "elementwise_mean" is refused there
poisson_nll_loss = _legacy_reduction(poisson_nll_loss, elementwise_mean=False)
multilabel_soft_margin_loss = _legacy_reduction(multilabel_soft_margin_loss,
                                                elementwise_mean=False)
