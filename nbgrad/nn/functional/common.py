"""Helpers the files of torch.nn.functional share: constants over arrays, the reduction
argument, and the one kind of row for layers linear in their input (``_linear``).
"""
import functools
import inspect
import warnings

import numpy as np

from nbgrad import creation
from nbgrad.autograd.apply import apply
from nbgrad.ops import Ctx, ROWS


def _const(arr):
    """A constant (no-grad) tensor over the numpy array ``arr``."""
    arr = np.asarray(arr)
    return creation.from_numpy(arr if arr.flags.c_contiguous else arr.copy())


def _check_reduction(reduction, who):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{who}: {reduction} is not a valid value for reduction")


def _legacy_reduction(fn):
    """``fn`` taking torch's deprecated ``reduction="elementwise_mean"`` as "mean", with torch's
    UserWarning (``torch.nn._reduction.get_enum``), by keyword or by position."""
    pos = list(inspect.signature(fn).parameters).index("reduction")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs.get("reduction") == "elementwise_mean":
            kwargs["reduction"] = "mean"
        elif len(args) > pos and isinstance(args[pos], str) and args[pos] == "elementwise_mean":
            args = args[:pos] + ("mean",) + args[pos + 1:]
        else:
            return fn(*args, **kwargs)
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' "
                      "instead.", UserWarning, stacklevel=2)
        return fn(*args, **kwargs)
    return wrapper


def _reduce(loss, reduction, who):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{who}: {reduction} is not a valid value for reduction")


def _filled(like, value):
    """A constant tensor of ``like``'s shape (torch's C++ ``scalar - tensor``: SubBackward0)."""
    return creation.full(tuple(like.shape), value, dtype=like.dtype)


def _linear(name, input, fwd, adj):
    """Apply the one-node row ``name`` for a map linear in ``input``: ``fwd`` computes it on
    arrays, ``adj`` its adjoint (the gradient)."""
    return apply(ROWS[name], (input,), (Ctx((fwd, adj)),))


def _single(v, name="value"):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{name} must be an int or a 1-tuple, got {v!r}")
        return int(v[0])
    return int(v)
