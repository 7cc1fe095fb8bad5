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
    """torch's check of ``reduction`` (``_Reduction.get_enum``); ``who`` is unused in the text,
    which is torch's."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_reduction(fn, elementwise_mean=True):
    """``fn`` taking torch's deprecated reduction arguments: ``reduction="elementwise_mean"`` as
    "mean" (torch's ``get_enum`` warning; not where torch checks the string itself:
    ``elementwise_mean=False``), and ``size_average``/``reduce`` where ``fn`` has them, which set
    ``reduction`` (torch's ``_Reduction.legacy_get_string``, with its warning); by keyword or by
    position."""
    sig = inspect.signature(fn)
    names = list(sig.parameters)
    pos = names.index("reduction")
    legacy = tuple(names.index(n) for n in ("size_average", "reduce") if n in names)
    first = min(legacy, default=len(names))  # calls with fewer positionals skip the scan

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if (len(args) > first and any(len(args) > i and args[i] is not None for i in legacy)) or (
                kwargs and legacy and (kwargs.get("size_average") is not None
                                       or kwargs.get("reduce") is not None)):
            bound = sig.bind(*args, **kwargs)
            bound.arguments["reduction"] = legacy_reduction(
                bound.arguments.pop("size_average", None), bound.arguments.pop("reduce", None))
            return fn(*bound.args, **bound.kwargs)
        if not elementwise_mean:
            return fn(*args, **kwargs)
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


def legacy_reduction(size_average, reduce, stacklevel=3):
    """The reduction torch's deprecated ``size_average``/``reduce`` mean (None counts as True),
    with torch's UserWarning (``torch.nn._reduction.legacy_get_string``)."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = ("mean" if size_average else "sum") if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' "
                  "instead.", UserWarning, stacklevel=stacklevel)
    return ret


def _reduce(loss, reduction, who):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


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
