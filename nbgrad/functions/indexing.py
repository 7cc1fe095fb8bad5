"""Indexing: ``t[idx]`` and ``t[idx] = v`` (basic and advanced), index_put, index_select,
gather, the scatter family, masked_select and repeat_interleave.
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from .. import backend, _torch_errors
from ..autograd.apply import apply, _broadcast_error, _fresh
from ..autograd.grad_mode import GENERAL_PATH
from ..autograd.record import index_arg
from ..ops import ROWS as R
from ..tensor import _dim, Tensor
from .registry import method
from .args import _builtin_max, _builtin_sum, _filled_like, scalar_name
from .views import clone, contiguous, expand, flatten, reshape, select, _slice, unsqueeze, view
from .inplace import _check_index_add, copy_


def _is_basic(idx):
    for i in idx:
        if i is None or i is Ellipsis or type(i) is int or type(i) is slice or type(i) is bool:
            if type(i) is bool:
                return False
            continue
        if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            continue
        return False
    return True


def _ints_of_0d(idx):
    """``idx`` with each 0-d integer tensor read as the int it holds: PyTorch indexes with it as
    with an int (a view, SelectBackward0), not as an index tensor."""
    return tuple(i.item() if type(i) is Tensor and i._data.ndim == 0
                 and i._data.dtype.kind == "i" else i for i in idx)


_UINT8_INDEX = ("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                "torch.bool instead.")


def _index_arrays(input, idx):
    """The index arrays of `idx` (a tuple) on `input`'s device: lists and host arrays or CPU
    index tensors for a device tensor are copied there (PyTorch accepts CPU indices too)."""
    index = tuple(_to_index_array(i) for i in idx)
    xp = backend.get_array_module(input._data)
    if xp is np:
        return index
    return tuple(xp.asarray(i) if isinstance(i, np.ndarray) else i for i in index)


def _to_index_array(i):
    if isinstance(i, str):  # torch reads it as data for a new index tensor
        raise TypeError("new(): invalid data type 'str'")
    if isinstance(i, float):
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                         "Variables are valid indices (got float)")
    if isinstance(i, Tensor):
        a = index_arg(i)
        if a.dtype.kind not in "biu":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if a.dtype == np.uint8:  # a byte tensor is a mask, as PyTorch reads it (with its warning
            if a.ndim:           # but for a 0-d one)
                warnings.warn(_UINT8_INDEX, UserWarning, stacklevel=4)
            return a.astype(bool)
        return a
    if isinstance(i, (list, tuple)):
        a = np.asarray(i)
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if isinstance(i, slice):
        for v in (i.start, i.stop, i.step):
            if isinstance(v, Tensor):
                return slice(*(int(x) if isinstance(x, Tensor) else x for x in
                               (i.start, i.stop, i.step)))
        if i.step is not None and i.step <= 0:
            raise ValueError("step must be greater than zero")
        return i
    if isinstance(i, np.ndarray):
        return i
    return i


def getitem(input, idx):
    """Indexing (torch.Tensor.__getitem__): basic indexing gives views (Select/Slice/Unsqueeze
    nodes, as in PyTorch); integer tensors, lists and bool masks give copies (IndexBackward0)."""
    d = input._data
    if type(idx) is Tensor and not GENERAL_PATH and d.ndim and type(idx._data) is type(d) \
            and idx._data.dtype.kind == "i" and idx._data.ndim:
        # one integer index tensor (a batch X[ix], an embedding table C[X]): the general
        # path's checks below all pass for it (NBGRAD_GENERAL_PATH=1 runs them)
        try:
            return apply(R["index"], (input,), ((index_arg(idx),),))
        except IndexError as e:
            raise IndexError(str(e).replace("axis", "dimension")) from None
    if d.ndim == 0:
        _torch_errors.check_0d_index(idx)
    if not isinstance(idx, tuple):
        idx = (idx,)
    if _is_basic(idx) or _is_basic(idx := _ints_of_0d(idx)):
        return _basic_index(input, idx)
    index = _index_arrays(input, idx)
    _check_masks(input, index)
    _torch_errors.check_index(input._data.ndim, index)
    try:
        return apply(R["index"], (input,), (index,))
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None


def _check_masks(input, index):
    """PyTorch's text for a bool mask whose shape does not match the dims it indexes."""
    d = 0
    for i in index:
        if isinstance(i, np.ndarray) and i.dtype.kind == "b":
            want = input._data.shape[d:d + i.ndim]
            for k, (m, n) in enumerate(zip(i.shape, want)):
                if m != n:
                    raise IndexError(f"The shape of the mask {list(i.shape)} at index {k} does not "
                                     f"match the shape of the indexed tensor "
                                     f"{list(input._data.shape)} at index {d + k}")
            d += i.ndim
        elif i is not None:
            d += 1


def _basic_index(input, idx):
    nd = input._data.ndim
    if nd and len(idx) == 1 and type(idx[0]) is slice:  # x[a:b], a batch's rows: no loop
        r = _slice_along(input, 0, idx[0])
        return r if r is not input else _slice(input, 0, slice(0, input._data.shape[0], 1))
    n_real = 0  # (a loop: a generator costs more than the few entries of an index)
    for i in idx:
        if i is not None and i is not Ellipsis:
            n_real += 1
    if n_real > nd:
        raise IndexError(f"too many indices for tensor of dimension {nd}")
    if not n_real and builtins.all(i is Ellipsis for i in idx):
        return apply(R["alias"], (input,))

    r = input
    d = 0
    for i in idx:
        if i is None:
            r = unsqueeze(r, d)
            d += 1
        elif i is Ellipsis:
            d += nd - n_real
        elif isinstance(i, slice):
            r = _slice_along(r, d, i)
            d += 1
        else:
            i = int(i)
            n = r._data.shape[d]
            if i < -n or i >= n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            r = select(r, d, i)
    if r is input:
        if len(idx) == 1 and isinstance(idx[0], slice):  # x[:], x[0:n]: SliceBackward0
            return _slice(input, 0, slice(0, nd and input._data.shape[0], 1))
        return apply(R["alias"], (input,))
    return r


def _slice_along(r, d, i):
    """`r` sliced by the slice `i` along dim `d` (SliceBackward0), or `r` itself when `i`
    takes all of it."""
    if i.step is not None and i.step <= 0:
        raise ValueError("step must be greater than zero")
    n = r._data.shape[d]
    start, stop, step = i.indices(n)
    if start == 0 and stop >= n and step == 1:
        return r
    return _slice(r, d, slice(start, _builtin_max(stop, start), step))


def setitem(input, idx, value):
    """`t[idx] = value`: copy_ into the view (basic index) or index_put_ (advanced); one
    version bump either way, CopySlices / IndexPutBackward0 in the graph (torch semantics)."""
    if input._data.ndim == 0:
        _torch_errors.check_0d_index(idx)
    if not isinstance(idx, tuple):
        idx = (idx,)
    if _is_basic(idx) or _is_basic(idx := _ints_of_0d(idx)):
        whole = _whole(input, idx)
        dst = input if whole else _basic_index(input, idx)
        if isinstance(value, Tensor) and value._data.ndim and \
                value._data.shape != dst._data.shape:
            value = _expanded_value(value, dst._data.shape)
        if whole:
            # the whole tensor: PyTorch fills / copies into it directly (no view, no CopySlices);
            # a 0-d tensor gets copy_ (CopyBackwards)
            if isinstance(value, Tensor) and value._data.ndim or input._data.ndim == 0:
                copy_(input, value)
            else:
                v = value if isinstance(value, Tensor) else \
                    _filled_like(value, input)
                apply(R["fill_tensor"], (input, v), (), inplace="fill_")
            return None
        if isinstance(value, Tensor) and not value._data.ndim and dst._data.ndim:
            # a 0-d value fills the target (read before writing: no overlap check)
            apply(R["fill_tensor"], (dst, value), (), inplace="fill_")
        else:
            copy_(dst, value, _op_name="copy_")
        return None
    if isinstance(value, Tensor) and value._data.ndim and value._data.shape[0] == 1:
        value = _strip_leading_ones(value)
    index = _index_arrays(input, idx)
    if not isinstance(value, Tensor):
        value = _filled_like(value, input)
    elif value._data.dtype != input._data.dtype:
        value = value.to(input.dtype)
    index_put_(input, index, value)
    return None


def _expanded_value(value, shape):
    """The value of `t[i] = value` as PyTorch's copy_to makes it: viewed without its leading
    size-1 dims (ViewBackward0), then expanded to the target's shape (ExpandBackward0) unless
    it has it already; copy_ then judges any overlap with the target on these strides."""
    value = _strip_leading_ones(value)
    return value if value._data.shape == shape else expand(value, *shape)


def _strip_leading_ones(value):
    """`value` viewed without its leading size-1 dims ((1, n) -> (n,)), as PyTorch views the
    value of a setitem (ViewBackward0, also when there are none to strip)."""
    shape = value._data.shape
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return view(value, tuple(shape[k:]))


def _whole(input, idx):
    """Whether a basic index selects the whole tensor (only full-range, step-1 slices)."""
    if _builtin_sum(1 for i in idx if i is not Ellipsis) > input._data.ndim:
        return False
    shape = input._data.shape
    if Ellipsis in idx:
        k = idx.index(Ellipsis)
        dims = list(range(k)) + list(range(len(shape) - (len(idx) - k - 1), len(shape)))
        parts = idx[:k] + idx[k + 1:]
    else:
        dims, parts = range(len(idx)), idx
    for d, i in zip(dims, parts):
        # as PyTorch: a literal full slice (start None/0, step None/1, stop None or >= size)
        if not isinstance(i, slice) or i.start not in (None, 0) or i.step not in (None, 1) or \
                not (i.stop is None or (isinstance(i.stop, int) and i.stop >= shape[d])):
            return False
    return True


@method
def index_put_(input, indices, values, accumulate=False):
    """input[indices] = values (or += with accumulate) in place (torch.Tensor.index_put_)."""
    index = _index_arrays(input, indices if isinstance(indices, tuple) else (indices,))
    _torch_errors.check_index(input._data.ndim, index)
    if not isinstance(values, Tensor):
        values = _filled_like(values, input)
    if values._data.dtype != input._data.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_kind_name(input._data.dtype)} for the destination and "
                           f"{_kind_name(values._data.dtype)} for the source.")
    if values._data.ndim:
        _check_put_shape(input._data, index, values._data.shape)
    return apply(R["index_put"], (input, values), (index, accumulate), inplace="index_put_")


def _check_put_shape(a, index, vshape):
    """torch's text when the values do not broadcast to the indexing result's shape (found on
    a zero-stride stand-in for `a`: no copy). Host indices only: a device's index arrays are
    not read back to the host for a message (the op's own check speaks there)."""
    if any(hasattr(i, "shape") and backend.get_array_module(i) is not np for i in index):
        return
    stand_in = np.lib.stride_tricks.as_strided(np.zeros(1, bool), a.shape, (0,) * a.ndim)
    try:
        shape = stand_in[index].shape
    except (IndexError, ValueError):
        return  # the index itself is wrong: the op's own check says so
    try:
        np.broadcast_shapes(vshape, shape)
    except ValueError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(vshape)} cannot be "
                           f"broadcast to indexing result of shape {list(shape)}") from None


def _kind_name(dt):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
            "int32": "Int", "bool": "Bool", "uint8": "Byte"}.get(str(dt), str(dt))


@method
def index_put(input, indices, values, accumulate=False):
    """Out-of-place index_put_: a clone with values put at `indices` (torch.index_put)."""
    return index_put_(clone(input), indices, values, accumulate)


@method
def index_add(input, dim, index, source, *, alpha=1):
    """input with source's slices added at `index` along `dim` (torch.index_add)."""
    d = _dim(dim, input._data.ndim)
    ix = index_arg(index) if isinstance(index, Tensor) else np.asarray(index)
    _check_index_add(ix, source, d)
    _same_dtype(input, source, lambda a, b: f"index_add_(): self ({a}) and source ({b}) must have "
                f"the same scalar type")
    if alpha != 1:
        source = source * alpha
    return apply(R["index_add"], (input, source), (d, ix))


@method
def index_select(input, dim, index):
    """Rows of `dim` picked by the 1-D int tensor `index`; a copy (torch.index_select)."""
    d = _dim(dim, input._data.ndim)
    ix = index_arg(index) if isinstance(index, Tensor) else np.asarray(index)
    if ix.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if ix.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32/int64 for index")
    n = input._data.shape[d]
    if ix.size and (ix.max() >= n or ix.min() < -n):
        raise IndexError("index out of range in self")
    return apply(R["index_select"], (input,), (d, ix))


@method
def gather(input, dim, index):
    """out[i][j] = input[index[i][j]][j] for dim=0, etc. (torch.gather)."""
    d = _dim(dim, input._data.ndim)
    ix = index_arg(index)
    if ix.dtype.kind not in "iu":
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if ix.ndim != input._data.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    n = input._data.shape[d]
    if ix.size and (ix.max() >= n or ix.min() < -n):
        raise RuntimeError(f"index {int(ix.max())} is out of bounds for dimension {d} with size "
                           f"{n}")
    return apply(R["gather"], (input,), (d, ix))


@method
def take_along_dim(input, indices, dim=None):
    """gather(input, dim, indices); with dim None, of the flattened input (torch.take_along_dim)."""
    if dim is None:
        return gather(reshape(input, -1), 0, reshape(indices, -1))
    # torch gathers with its broadcast copy of the indices: a later in-place write into
    # `indices` changes nothing and raises nothing (with dim None, a view: it raises)
    return gather(input, dim, Tensor._make_fresh(indices._data.copy()))


# ---- the scatter family and masks ---------------------------------------------------------------
def _index_arg(index, fname):
    ix = index_arg(index) if isinstance(index, Tensor) else np.asarray(index)
    if ix.dtype.kind not in "iu":
        raise RuntimeError(f"{fname}(): Expected dtype "
                           f"{'int32/int64' if fname in ('gather', 'scatter') else 'int64'} "
                           f"for index")
    return ix


def _out_and_inplace(plan, name, doc):
    """torch.X and Tensor.X_ from one `plan(input, ...) -> (row, other inputs, args)`: the same
    row, applied out of place or written into self (one version bump)."""
    def f(input, *args, **kwargs):
        row, others, rargs = plan(input, *args, **kwargs)
        return apply(row, (input,) + others, rargs)

    def f_(self, *args, **kwargs):
        row, others, rargs = plan(self, *args, **kwargs)
        return apply(row, (self,) + others, rargs, inplace=name + "_")
    f.__name__ = f.__qualname__ = name
    f_.__name__ = f_.__qualname__ = name + "_"
    f.__doc__ = f"{doc} (torch.{name})."
    f_.__doc__ = f"In-place {name} (torch.Tensor.{name}_); bumps _version by 1."
    return method(f), method(f_)  # both are Tensor methods


def _in_bounds(input, d, ix):
    """torch's RuntimeError for an index outside dim `d` of `input` (scatter & co.)."""
    n = input._data.shape[d] if input._data.ndim else 1
    bad = (ix < -n) | (ix >= n) if ix.size else ix
    if ix.size and bad.any():
        raise RuntimeError(f"index {int(ix[bad].reshape(-1)[0])} is out of bounds for dimension "
                           f"{d} with size {n}")
    return ix


def _scatter_plan(input, dim, index, src=None, *, value=None, reduce=None):
    if reduce is not None:
        return _scatter_reduce_plan(input, dim, index, src, {"add": "sum",
                                                             "multiply": "prod"}[reduce])
    d, ix = _dim(dim, input._data.ndim), _index_arg(index, "scatter")
    _in_bounds(input, d, ix)
    src = value if src is None else src
    if isinstance(src, Tensor) and src._data.dtype != input._data.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if isinstance(src, Tensor):
        return R["scatter"], (src,), (d, ix)
    return R["scatter_value"], (), (d, ix, src)


def _same_dtype(input, source, text):
    """torch's scatter/index/masked families never promote the source: RuntimeError."""
    if isinstance(source, Tensor) and source._data.dtype != input._data.dtype:
        raise RuntimeError(text(scalar_name(input), scalar_name(source)))


def _scatter_add_plan(input, dim, index, src):
    _same_dtype(input, src, lambda a, b: "scatter(): Expected self.dtype to be equal to src.dtype")
    d = _dim(dim, input._data.ndim)
    return R["scatter_add"], (src,), (d, _in_bounds(input, d, _index_arg(index, "scatter_add")))


def _scatter_reduce_plan(input, dim, index, src, reduce, *, include_self=True):
    _same_dtype(input, src, lambda a, b: "scatter(): Expected self.dtype to be equal to src.dtype")
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)  # accepted by PyTorch too
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    return R["scatter_reduce"], (src,), (_dim(dim, input._data.ndim), _index_arg(
        index, "scatter_reduce"), reduce, include_self)


def _index_copy_plan(input, dim, index, source):
    _same_dtype(input, source, lambda a, b: f"index_copy_(): self and source expected to have the "
                f"same dtype, but got (self) {a} and (source) {b}")
    return R["index_copy"], (source,), (_dim(dim, input._data.ndim),
                                        _index_arg(index, "index_copy"))


def _index_fill_plan(input, dim, index, value):
    d, ix = _dim(dim, input._data.ndim), _index_arg(index, "index_fill")
    if isinstance(value, Tensor):
        return R["index_fill_tensor"], (value,), (d, ix)
    return R["index_fill"], (), (d, ix, value)


def _masked_scatter_plan(input, mask, source):
    _same_dtype(input, source, lambda a, b: f"masked_scatter: expected self and source to have "
                f"same dtypes but got{a} and {b}")
    m = _bool_mask(mask, "masked_scatter_")
    if m.shape != input._data.shape:
        m = np.broadcast_to(m, input._data.shape)
    return R["masked_scatter"], (source,), (m,)


scatter, scatter_ = _out_and_inplace(
    _scatter_plan, "scatter", "input with src (a tensor, or a number `value`) written at `index` "
    "along `dim`: out[index[i][j]][j] = src[i][j] for dim=0; ScatterBackward0 / 1")
scatter_add, scatter_add_ = _out_and_inplace(
    _scatter_add_plan, "scatter_add", "input with src added at `index` along `dim`")
scatter_reduce, scatter_reduce_ = _out_and_inplace(
    _scatter_reduce_plan, "scatter_reduce", "input with src reduced into it at `index` along "
    "`dim` by 'sum', 'prod', 'mean', 'amax' or 'amin' (include_self=True); gradients for all "
    "but 'prod'")
index_copy, index_copy_ = _out_and_inplace(
    _index_copy_plan, "index_copy", "input with the slices of `source` copied at `index` along "
    "`dim`")
index_fill, index_fill_ = _out_and_inplace(
    _index_fill_plan, "index_fill", "input with the slices at `index` along `dim` set to `value` "
    "(a number, or a 0-d tensor that gets a gradient)")
masked_scatter, masked_scatter_ = _out_and_inplace(
    _masked_scatter_plan, "masked_scatter", "input with the first elements of `source` written, "
    "in order, where the bool `mask` is True")


def _bool_mask(mask, fname):
    m = index_arg(mask) if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype.kind != "b":
        raise RuntimeError(f"{fname}: expected BoolTensor for mask")
    return m


@method
def masked_select(input, mask):
    """The elements where the bool `mask` (broadcasting) is True, as a 1-D tensor
    (torch.masked_select)."""
    m = _bool_mask(mask, "masked_select")
    try:
        np.broadcast_shapes(m.shape, input._data.shape)
    except ValueError:
        raise _broadcast_error(m.shape, input._data.shape) from None
    return apply(R["masked_select"], (input,), (m,))


@method
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (slice along `dim`) `repeats` times (torch.repeat_interleave); an int
    is unsqueeze/expand/clone/view, a tensor of counts index_select, as PyTorch composes it."""
    if repeats is None:  # repeat_interleave(counts): the indices 0..n-1, each counts[i] times
        c = input._data
        return _fresh(np.repeat(np.arange(c.size), c).astype(np.int64))
    if dim is None:
        input, dim = flatten(input), 0
    d = _dim(dim, input._data.ndim)
    if isinstance(repeats, Tensor) and repeats._data.ndim == 0:
        repeats = int(repeats.item())
    if isinstance(repeats, Tensor):
        r = repeats._data
        if r.size != input._data.shape[d] and r.size != 1:
            raise RuntimeError("repeats must have the same size as input along dim")
        n = input._data.shape[d]
        r = backend.to_device(r, backend.CPU)  # the output's size: known on the host only
        idx = np.repeat(np.arange(n), np.broadcast_to(r, (n,))).astype(np.int64)
        return index_select(input, d, _fresh(backend.to_device(idx, input.device)))
    shape = list(input._data.shape)
    x = unsqueeze(input, d + 1)
    x = expand(x, *(shape[:d + 1] + [repeats] + shape[d + 1:]))
    shape[d] *= repeats
    return view(contiguous(x), tuple(shape))
