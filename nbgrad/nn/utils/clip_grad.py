"""Gradient clipping (mirrors ``torch.nn.utils.clip_grad``).

The norms are computed as torch does: one norm per gradient, then the norm of those norms; the
scale ``max_norm / (total + 1e-6)`` is clamped at 1 and multiplied into every gradient in place
(so each ``.grad``'s version goes up by one, as with torch's ``mul_``). A sparse gradient gets
torch's NotImplementedError (it has no sparse kernel for the norm nor for clamping).
"""

import math

import numpy as np

from nbgrad import creation
from nbgrad.autograd import grad_mode
from nbgrad.backend import get_array_module
from nbgrad.sparse_coo import not_on_sparse
from nbgrad.storage import bump_all
from nbgrad.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _as_list(tensors):
    if isinstance(tensors, Tensor):
        return [tensors]
    return list(tensors)


def _grads(parameters):
    return [p.grad for p in _as_list(parameters) if p.grad is not None]


def _norm(d, p, xp):
    """The p-norm of array ``d`` as one vector, a 0-d array of its dtype."""
    if p == 2:
        flat = d.reshape(-1)
        return xp.sqrt(xp.dot(flat, flat))
    a = xp.abs(d)
    if p == math.inf:
        return a.max() if a.size else xp.zeros((), d.dtype)
    if p == -math.inf:
        return a.min() if a.size else xp.asarray(math.inf, d.dtype)
    if p == 0:
        return xp.asarray((d != 0).sum(), d.dtype)
    if p == 1:
        return a.sum()
    return (a ** p).sum() ** (1 / p)


def _l2_norms_float32(arrays):
    """The 2-norms of several non-empty float32 numpy arrays, as a float32 vector: their
    squares summed per array in float64 over one concatenation (a few numpy calls instead of
    four per array), each rounded once to float32; None where that does not apply."""
    if len(arrays) < 2:
        return None
    sizes = []
    for d in arrays:
        if type(d) is not np.ndarray or d.dtype != np.float32 or not d.size:
            return None
        sizes.append(d.size)
    flat = np.concatenate(arrays, axis=None, dtype=np.float64)
    flat *= flat
    starts = np.cumsum([0] + sizes[:-1])
    return np.sqrt(np.add.reduceat(flat, starts)).astype(np.float32)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of all ``tensors`` seen as one vector (mirrors torch's).

    Computed as torch does, one norm per tensor then the norm of those norms, on the arrays
    (no graph is recorded, as under torch's ``no_grad``).

    Args:
        tensors (Tensor | iterable of Tensor): usually the gradients.
        norm_type (float | str): p of the p-norm; ``inf`` (or ``"inf"``) for the max-norm.
        error_if_nonfinite (bool): raise if the norm is nan or inf.

    Returns:
        Tensor: a 0-d tensor (``tensor(0.)`` when there are no tensors).

    Raises:
        RuntimeError: the norm is non-finite and ``error_if_nonfinite`` (torch's text).
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return creation.tensor(0.0)
    if any(t.is_sparse for t in tensors):  # (torch has no sparse kernel for the norm)
        raise not_on_sparse("linalg_vector_norm")
    arrays = [t._data for t in tensors]
    xp = get_array_module(arrays[0])
    dtype = xp.result_type(*arrays)
    with np.errstate(all="ignore"):
        norms = _l2_norms_float32(arrays) if norm_type == 2 else None
        if norms is None:
            norms = xp.stack([_norm(d, norm_type, xp).astype(dtype) for d in arrays])
        total = _norm(norms, norm_type, xp)
    total = Tensor._make_fresh(xp.asarray(total, dtype))
    if error_if_nonfinite and not math.isfinite(float(total.item())):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
            "so it cannot be clipped. To disable this error and scale the gradients by the "
            "non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by ``min(1, max_norm / (total_norm + 1e-6))`` in place (as torch:
    each ``.grad``'s version goes up by one)."""
    _scale_(_grads(parameters), max_norm, total_norm)


def _scale_(grads, max_norm, total_norm):
    """clip_grads_with_norm_ on the grads (Tensors) themselves."""
    if not grads:
        return
    total = total_norm._data if isinstance(total_norm, Tensor) else np.asarray(total_norm)
    # torch's arithmetic: in the norm's (floating) dtype, on the host
    kind = np.dtype(total.dtype).type if np.dtype(total.dtype).kind == "f" else np.float64
    coef = min(kind(max_norm) / (kind(float(total)) + kind(1e-6)), 1.0)
    if coef != 1.0:  # (times 1.0 changes no value: only the version moves, as torch's mul_)
        for g in grads:
            d = g._data
            d *= d.dtype.type(coef)
    bump_all([g._storage for g in grads], "mul_")


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Rescale gradients so that their joint norm is at most ``max_norm`` (mirrors
    ``torch.nn.utils.clip_grad_norm_``).

    Args:
        parameters (Tensor | iterable of Tensor): parameters whose ``.grad`` are clipped;
            parameters without a grad are skipped.
        max_norm (float): the largest norm allowed.
        norm_type (float | str): 2.0 by default; ``inf`` for the max-norm.
        error_if_nonfinite (bool): raise instead of scaling by a nan/inf norm.
        foreach: accepted for torch compatibility (one loop either way).

    Returns:
        Tensor: the total norm of the gradients before clipping (0-d).

    Raises:
        RuntimeError: non-finite norm with ``error_if_nonfinite=True``.
    """
    grads = _grads(parameters)  # (torch collects them twice; nothing changes them between)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    _scale_(grads, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient into ``[-clip_value, clip_value]`` in place (mirrors torch's).

    Returns None.
    """
    clip_value = float(clip_value)
    with grad_mode.no_grad():
        for g in _grads(parameters):
            if g.is_sparse:  # (torch: the foreach path's clamp_min_, else clamp_)
                raise not_on_sparse("clamp_" if foreach is False else "clamp_min_")
            g.clamp_(min=-clip_value, max=clip_value)
