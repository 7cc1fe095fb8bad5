"""Normalisation layers' functions: batch_norm, layer_norm, rms_norm, group_norm,
instance_norm (PyTorch's native_* nodes).
"""
import numpy as np

from nbgrad.autograd import grad_mode
from nbgrad import dtypes, typeinfo
from nbgrad import backend
from nbgrad.autograd.apply import apply
from nbgrad.autograd.grad_mode import GENERAL_PATH
from nbgrad.functions.args import scalar_name
from nbgrad.ops import Ctx, ROWS
from .common import _const


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
        ValueError: one value per channel in training; RuntimeError: a weight, bias or running
            statistic without C elements (torch's text).
    """
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"batch_norm" not implemented for \'{scalar_name(input)}\'')
    _check_mixed((input, weight, bias, running_mean, running_var))
    c = input.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
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
            with grad_mode.no_grad():
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


def _check_mixed(tensors):
    """torch's CPU norm kernels take one dtype for input and parameters (no promotion), with
    its texts: parameters whose first is of the input's dtype meet the kernel's own check
    (expected scalar type); otherwise the mixed-dtype check, which takes float32 parameters
    only (and then, for a float32 or float64 input, says they must share one dtype)."""
    input, params = tensors[0], [t for t in tensors[1:] if t is not None]
    dt = input._data.dtype
    if not params or all(p._data.dtype == dt for p in params):
        return
    if params[0]._data.dtype == dt:
        bad = next(p for p in params if p._data.dtype != dt)
        raise RuntimeError(f"expected scalar type {scalar_name(input)} but found "
                           f"{scalar_name(bad)}")
    if all(p._data.dtype == np.float32 for p in params):
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
    raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` dims (mirrors ``F.layer_norm``; one
    NativeLayerNormBackward0 node for input, weight and bias).

    Raises:
        RuntimeError: trailing dims differ from ``normalized_shape`` (torch's message).
    """
    x = input._data
    if not GENERAL_PATH and type(normalized_shape) is tuple and weight is not None and \
            bias is not None and x.dtype.kind == "f" and weight._data.dtype is x.dtype and \
            bias._data.dtype is x.dtype and weight._data.shape == normalized_shape and \
            bias._data.shape == normalized_shape and 0 < len(normalized_shape) <= x.ndim and \
            x.shape[x.ndim - len(normalized_shape):] == normalized_shape:
        # a LayerNorm's call (affine, one dtype, shapes right): every check below passes
        # (NBGRAD_GENERAL_PATH=1 runs them)
        return apply(_LAYER_NORM, (input, weight, bias), (normalized_shape, eps, Ctx(None)))
    normalized_shape = _trailing_shape(input, normalized_shape, "*, ")
    _check_mixed((input, weight, bias))
    if input._data.dtype.kind not in "fc":
        raise NotImplementedError(f'"LayerNormKernelImpl" not implemented for '
                                  f"'{dtypes.from_np(input._data.dtype)._tensor_name[:-6]}'")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != tuple(normalized_shape):
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got "
                               f"{name} of shape {list(t.shape)} and normalized_shape = "
                               f"{list(normalized_shape)}")
    return apply(_LAYER_NORM, (input, weight, bias), (normalized_shape, eps, Ctx(None)))


_LAYER_NORM = ROWS["native_layer_norm"]


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
        eps = typeinfo.finfo(input.dtype).eps
    dims = list(range(input.ndim - k, input.ndim))
    ms = input.pow(2).mean(dims, keepdim=True)
    out = input * apply(ROWS["add_scalar"], (ms,), (eps,)).rsqrt()
    return out if weight is None else out * weight


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
    _check_mixed((input, weight, bias))
    return apply(ROWS["native_group_norm"], (input, weight, bias),
                 (num_groups, eps, Ctx(None)))[0]  # (its mean and rstd: outputs 1, 2)


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
        with grad_mode.no_grad():
            running_mean.copy_(rm.reshape(n, c).mean(0))
            running_var.copy_(rv.reshape(n, c).mean(0))
    return out.reshape(tuple(input.shape))
