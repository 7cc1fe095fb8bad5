"""Reductions, scans and sorting (sum, mean, max, var, norm, softmax, cumsum, sort, topk,
median, quantile, ...): dim/keepdim parsing around the rows of nbgrad/ops/reductions.py.
"""
from __future__ import annotations

import numpy as np

from .. import backend, dtypes
from ..autograd.apply import apply, _fresh
from ..autograd.record import _arr
from ..ops import ROWS as R
from ..ops.reductions import _sort as _sort_array
from ..tensor import _dim, Tensor
from ..return_types import structseq
from .registry import method
from .args import _builtin_max
from .views import flatten, to_dtype, transpose, unsqueeze, view
from .comparison import isnan, logical_not
from .elementwise import div, maximum, minimum
from .inplace import lerp_
from .indexing import gather


def _dims(dim, ndim):
    """Normalise dim (int, tuple, list or None) to None, an int, or a sorted tuple."""
    if dim is None:
        return None
    if ndim == 0:  # dims -1 and 0 of a 0-d tensor: nothing to reduce (PyTorch allows them)
        for d in (dim if isinstance(dim, (tuple, list)) else (dim,)):
            _dim(d, 0)
        return ()
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return None
        ds = tuple(sorted(_dim(d, ndim) for d in dim))
        for a, b in zip(ds, ds[1:]):
            if a == b:
                raise RuntimeError(f"dim {a} appears multiple times in the list of dims")
        return ds if len(ds) > 1 else ds[0]
    return _dim(dim, ndim)


def _check_reduced_dim(name, input, dim, exc):
    """torch refuses to reduce an empty tensor over all of it, and over an empty dim."""
    d = input._data
    if d.size:
        return
    if dim is None or dim == ():
        tail = (". Specify the reduction dim with the 'dim' argument." if exc is RuntimeError
                else ".")
        raise exc(f"{name}(): Expected reduction dim to be specified for input.numel() == 0"
                  f"{tail}")
    for k in (dim if isinstance(dim, (tuple, list)) else (dim,)):
        if d.ndim and d.shape[_dim(k, d.ndim)] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {_dim(k, d.ndim)} to have "
                             f"non-zero size.")


def _red_args(dim, keepdim, axis, keepdims, fname="sum"):
    """(dim, keepdim) from torch's names or numpy's; TypeError (torch's parser's text, method
    form) for a dim that is not an int or a sequence of ints, or a keepdim that is not a bool."""
    if axis is not None:
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    ok = dim is None or isinstance(dim, (int, np.integer)) or (
        isinstance(dim, (tuple, list)) and all(isinstance(i, (int, np.integer)) for i in dim))
    if not ok or isinstance(dim, bool):
        raise TypeError(f"{fname}() received an invalid combination of arguments - got "
                        f"({type(dim).__name__}), but expected one of:\n * (*, torch.dtype "
                        f"dtype = None)\n * (tuple of ints dim, bool keepdim = False, *, "
                        f"torch.dtype dtype = None)\n")
    if not isinstance(keepdim, (bool, np.bool_)):
        raise TypeError(f"{fname}(): argument 'keepdim' (position 2) must be bool, not "
                        f"{type(keepdim).__name__}")
    return dim, keepdim


@method
def sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Sum of all elements, or over `dim` (int or tuple) (torch.sum). Ints sum to int64."""
    d = input._data
    if dim is None and axis is None and dtype is None and not keepdim and d.dtype.kind == "f":
        return apply(_SUM, (input,), (None,))  # the common case, kept short
    dim, keepdim = _red_args(dim, keepdim, axis, keepdims)
    dt = dtypes.to_np(dtype)
    if dt is not None and dt != d.dtype and d.dtype.kind == "f":
        input, d, dt = to_dtype(input, dtype), None, None
        d = input._data
    if dt is None and d.dtype.kind in "biu":
        dt = np.dtype(np.int64)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        r = apply(R["sum"], (input,), (dt,))
        return r if not keepdim else r.reshape((1,) * d.ndim)
    return apply(R["sum_dim"], (input,), (_dims(dim, d.ndim), keepdim, dt))


_SUM = R["sum"]


def _float_check(input, name):
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"{name}(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: "
                           f"{dtypes.from_np(input._data.dtype)._tensor_name[:-6]}")


@method
def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Mean of all elements, or over `dim` (torch.mean). Needs a floating dtype."""
    dim, keepdim = _red_args(dim, keepdim, axis, keepdims, "mean")
    if dtype is not None:
        input = input.to(dtype)
    _float_check(input, "mean")
    if dim is None:
        r = apply(R["mean"], (input,))
        return r if not keepdim else r.reshape((1,) * input._data.ndim)
    return apply(R["mean_dim"], (input,), (_dims(dim, input._data.ndim), keepdim))


@method
def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product of all elements, or along `dim` (torch.prod); zeros are handled in backward."""
    if dtype is not None:
        input = input.to(dtype)
    elif input._data.dtype.kind in "biu" and input._data.dtype != np.int64:
        input = to_dtype(input, dtypes.int64)  # (torch: integers and bools accumulate in int64)
    if dim is None:
        return apply(R["prod"], (input,))
    return apply(R["prod_dim"], (input,), (_dim(dim, input._data.ndim), keepdim))


_minmax = structseq("max", "values indices")
_minmax_min = structseq("min", "values indices")


def _empty_check(input, name):
    if input._data.size == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                           "== 0. Specify the reduction dim with the 'dim' argument.")


@method
def max(input, dim=None, keepdim=False, *, out=None):
    """Max of all elements; with `dim`, (values, indices); with a tensor, maximum (torch.max)."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        _empty_check(input, "max")
        return apply(R["max"], (input,))
    _check_reduced_dim("max", input, dim, IndexError)
    return _vals_indices(R["max_dim"], input, dim, keepdim, _minmax)


@method
def min(input, dim=None, keepdim=False):
    """Min of all elements; with `dim`, (values, indices); with a tensor, minimum (torch.min)."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        _empty_check(input, "min")
        return apply(R["min"], (input,))
    _check_reduced_dim("min", input, dim, IndexError)
    return _vals_indices(R["min_dim"], input, dim, keepdim, _minmax_min)


def _vals_indices(row, input, dim, keepdim, ntuple):
    return ntuple(*apply(row, (input,), (_dim(dim, input._data.ndim), keepdim)))


@method
def amax(input, dim=(), keepdim=False):
    """Max over `dim` (all if empty); ties share the gradient evenly (torch.amax)."""
    _check_reduced_dim("amax", input, dim, RuntimeError)
    return apply(R["amax"], (input,), (_dims(dim, input._data.ndim), keepdim))


@method
def amin(input, dim=(), keepdim=False):
    """Min over `dim` (all if empty); ties share the gradient evenly (torch.amin)."""
    _check_reduced_dim("amin", input, dim, RuntimeError)
    return apply(R["amin"], (input,), (_dims(dim, input._data.ndim), keepdim))


@method
def argmax(input, dim=None, keepdim=False):
    """Index of the max (flattened when dim is None) (torch.argmax). int64, no gradient."""
    d = input._data
    if d.dtype.kind == "b":
        raise RuntimeError("argmax(): does not support bool input")
    _check_reduced_dim("argmax", input, dim, IndexError)
    if dim is None:
        return _fresh(_arr(np.argmax(d)).astype(np.int64))
    return _fresh(_arr(np.argmax(d, axis=_dim(dim, d.ndim), keepdims=keepdim)).astype(np.int64))


@method
def argmin(input, dim=None, keepdim=False):
    """Index of the min (torch.argmin). int64, no gradient."""
    d = input._data
    if d.dtype.kind == "b":
        raise RuntimeError("argmin(): does not support bool input")
    _check_reduced_dim("argmin", input, dim, IndexError)
    if dim is None:
        return _fresh(_arr(np.argmin(d)).astype(np.int64))
    return _fresh(_arr(np.argmin(d, axis=_dim(dim, d.ndim), keepdims=keepdim)).astype(np.int64))


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _spread(name, input, dim, unbiased, keepdim, correction):
    """The var / std row over `dim`; `std(x, True)` reads a bool dim as `unbiased`, as torch."""
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _float_check(input, name)
    return apply(R[name], (input,), (_dims(dim, input._data.ndim),
                                     _correction(unbiased, correction), keepdim))


@method
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance (Bessel-corrected by default) (torch.var)."""
    return _spread("var", input, dim, unbiased, keepdim, correction)


@method
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation (Bessel-corrected by default) (torch.std)."""
    return _spread("std", input, dim, unbiased, keepdim, correction)


@method
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over all elements or `dim` (torch.norm; 'fro' is p=2)."""
    if p == "fro" or p is None:
        p = 2
    if dtype is not None:
        input = input.to(dtype)
    return apply(R["norm"], (input,), (float(p) if p not in (1, 2) else p,
                                       _dims(dim, input._data.ndim), keepdim))


@method
def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input), dim)), computed stably (torch.logsumexp)."""
    return apply(R["logsumexp"], (input,), (_dims(dim, input._data.ndim), keepdim))


@method
def softmax(input, dim, dtype=None):
    """exp(x) / sum(exp(x)) along `dim` (torch.softmax); saves its output.

    Raises NotImplementedError for an integer or bool input without a floating `dtype`
    (torch's kernel text)."""
    if dtype is not None:
        input = input.to(dtype)
    _float_kernel("softmax", input, dim)
    return apply(R["softmax"], (input,), (_dim(dim, input._data.ndim),))


def _float_kernel(name, input, dim):
    """torch's softmax kernels exist for floating types only: NotImplementedError naming the
    kernel (the last-dim one when `dim` is the last) and torch's type name."""
    if input._data.dtype.kind in "biu":
        from .args import scalar_name
        last = input._data.ndim <= 1 or _dim(dim, input._data.ndim) == input._data.ndim - 1
        kernel = f"{name}_lastdim_kernel_impl" if last else f"{name}_kernel_impl"
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_name(input)}\'')


@method
def log_softmax(input, dim, dtype=None):
    """x - logsumexp(x, dim), stable (torch.log_softmax); saves its output. NotImplementedError
    for an integer or bool input without a floating `dtype`, as softmax."""
    if dtype is not None:
        input = input.to(dtype)
    _float_kernel("log_softmax", input, dim)
    return apply(R["log_softmax"], (input,), (_dim(dim, input._data.ndim),))


@method
def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along `dim` (torch.cumsum)."""
    if dtype is not None:
        input = input.to(dtype)
    elif input._data.dtype.kind in "biu" and input._data.dtype != np.int64:
        input = to_dtype(input, dtypes.int64)  # (torch: integers and bools accumulate in int64)
    return apply(R["cumsum"], (input,), (_dim(dim, input._data.ndim),))


def _safe_softmax(input, dim, dtype=None):
    """Softmax along `dim` where a slice that is -inf throughout gives zeros, not nan
    (torch._safe_softmax, attention's softmax; one SafeSoftmaxBackward0 node)."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    return apply(R["_safe_softmax"], (input,), (_dim(dim, input._data.ndim),))


@method
def argsort(input, dim=-1, descending=False, stable=False):
    """Indices that sort `input` along `dim` (torch.argsort); int64, no gradient. Equal
    elements in the order torch's unstable sort leaves them, or with stable=True in their
    order (torch.sort's indices)."""
    d = input._data
    if d.ndim == 0:
        return _fresh(backend.get_array_module(d).zeros((), np.int64))
    return _fresh(_sort_array(d, _dim(dim, d.ndim), descending, bool(stable))[1])


# ---- sorting, selection, nan-reductions, scans --------------------------------------------------
_rt = {n: structseq(n, f) for n, f in (
    ("sort", "values indices"), ("topk", "values indices"), ("kthvalue", "values indices"),
    ("median", "values indices"), ("mode", "values indices"), ("cummax", "values indices"),
    ("cummin", "values indices"), ("aminmax", "min max"))}


@method
def sort(input, dim=-1, descending=False, *, stable=None):
    """(values, indices) sorted along `dim` (torch.sort), NaN sorting as the largest; equal
    elements in the order torch's unstable sort leaves them, or with stable=True in their
    order. SortBackward0 (SortBackward1 when `stable` is given): the gradient goes back to
    where each value came from."""
    if input._data.ndim == 0:
        return _rt["sort"](input.clone(), _fresh(np.zeros((), np.int64)))
    d = _dim(dim, input._data.ndim)
    if stable is None:
        return _rt["sort"](*apply(R["sort"], (input,), (d, descending)))
    return _rt["sort"](*apply(R["sort_stable"], (input,), (d, descending, bool(stable))))


@method
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) elements along `dim` and their indices (torch.topk); with
    sorted=False in the order torch's selection leaves them."""
    d = _dim(dim, _builtin_max(input._data.ndim, 1))
    n = input._data.shape[d] if input._data.ndim else 1
    if k < 0 or k > n:
        raise RuntimeError("selected index k out of range")
    return _rt["topk"](*apply(R["topk"], (input,), (k, d, largest, bool(sorted))))


@method
def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element along `dim` and its index (torch.kthvalue)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return _rt["kthvalue"](*apply(R["kthvalue"], (input,), (k, d, keepdim)))


@method
def median(input, dim=None, keepdim=False):
    """The lower median of all elements (MedianBackward0), or (values, indices) along `dim`
    (MedianBackward1) (torch.median)."""
    if dim is None:
        return apply(R["median"], (input,))
    return _rt["median"](*apply(R["median_dim"], (input,), (_dim(dim, input._data.ndim),
                                                              keepdim)))


@method
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along `dim` (the smallest if several) and the last index where it
    occurs (torch.mode)."""
    return _rt["mode"](*apply(R["mode"], (input,), (_dim(dim, input._data.ndim), keepdim)))


@method
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum treating NaN as zero (torch.nansum)."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    return apply(R["nansum"], (input,), (_dims(dim, input._data.ndim), keepdim))


@method
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-NaN elements (torch.nanmean): nansum / count, as PyTorch composes it."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    _float_check(input, "nanmean")
    count = sum(logical_not(isnan(input)), dim, keepdim)
    return div(nansum(input, dim, keepdim), count)


def _stat_mean(name, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _float_check(input, name)
    return apply(R[name], (input,), (_dims(dim, input._data.ndim),
                                     _correction(unbiased, correction), keepdim))


@method
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) in one node, StdMeanBackward0 (torch.std_mean)."""
    return _stat_mean("std_mean", input, dim, unbiased, keepdim, correction)


@method
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) in one node, VarMeanBackward0 (torch.var_mean)."""
    return _stat_mean("var_mean", input, dim, unbiased, keepdim, correction)


@method
def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over all elements or `dim`; ties share the gradient (torch.aminmax)."""
    d = None if dim is None else _dim(dim, input._data.ndim)
    return _rt["aminmax"](*apply(R["aminmax"], (input,), (d, keepdim)))


@method
def cumprod(input, dim, *, dtype=None):
    """Cumulative product along `dim` (torch.cumprod); zeros are fine in backward."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    elif input._data.dtype.kind in "biu" and input._data.dtype != np.int64:
        input = to_dtype(input, dtypes.int64)  # (torch: integers and bools accumulate in int64)
    return apply(R["cumprod"], (input,), (_dim(dim, input._data.ndim),))


@method
def cummax(input, dim):
    """Running maximum along `dim` and the index where it was reached (torch.cummax)."""
    return _rt["cummax"](*apply(R["cummax"], (input,), (_dim(dim, input._data.ndim),)))


@method
def cummin(input, dim):
    """Running minimum along `dim` and the index where it was reached (torch.cummin)."""
    return _rt["cummin"](*apply(R["cummin"], (input,), (_dim(dim, input._data.ndim),)))


@method
def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along `dim`, stable (torch.logcumsumexp)."""
    return apply(R["logcumsumexp"], (input,), (_dim(dim, input._data.ndim),))


@method
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or 1-D tensor in [0, 1]) over all elements or along `dim`
    (torch.quantile), composed as PyTorch does: sort, view, gather both neighbours, lerp_, and
    the quantiles moved to the first dim. A NaN in a reduced row makes its quantiles NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


@method
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaN (torch.nanquantile): NaN only where a row is all NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    if interpolation != "linear":
        raise NotImplementedError("nbgrad: quantile supports interpolation='linear' only")
    scalar_q = not isinstance(q, Tensor)
    qa = np.asarray(q if scalar_q else backend.to_device(q._data, backend.CPU),
                    dtype=input._data.dtype)  # the ranks are worked out on the host
    if ((qa < 0) | (qa > 1)).any():
        raise RuntimeError("quantile() q values must be in the range [0, 1]" if not scalar_q else
                           f"quantile() q must be in the range [0, 1] but got {q}")
    nd = input._data.ndim
    if dim is None:
        srt = sort(flatten(input)).values
        out_shape = [1] * nd if keepdim else []
    else:
        d = _dim(dim, nd)
        x = input if d == nd - 1 else transpose(unsqueeze(input, -1), d, -1)
        srt = sort(x).values
        out_shape = [1 if i == d else n for i, n in enumerate(input._data.shape)
                     if keepdim or i != d]
    n = srt._data.shape[-1]
    srt = view(srt, tuple(out_shape + [n]))  # (..., n), keepdim's size-1 dims included
    nan = np.isnan(backend.to_device(srt._data, backend.CPU))  # NaN sorts last
    qv = qa.reshape(-1)
    if ignore_nan:  # the quantile of the non-NaN values; all NaN: the last (NaN) one
        count = (~nan).sum(-1, keepdims=True)
        ranks = np.where(count == 0, n - 1, qv * (count - 1))
    else:
        ranks = np.where(nan.any(-1, keepdims=True), n - 1, qv * (n - 1))
    below = np.floor(ranks).astype(np.int64)

    def at(i):
        return _fresh(backend.to_device(np.ascontiguousarray(i), backend.device_of(srt._data)))
    values = gather(srt, -1, at(below))
    lerp_(values, gather(srt, -1, at(np.ceil(ranks).astype(np.int64))),
          at((ranks - below).astype(input._data.dtype)))
    if not scalar_q:  # the quantiles first (PyTorch: unsqueeze_(0).transpose_(0, -1))
        values = apply(R["unsqueeze_"], (values,), (0,))
        values = apply(R["transpose_"], (values,), (0, values._data.ndim - 1))
    return apply(R["squeeze_dims_"], (values,), ((values._data.ndim - 1,),))
