"""Views, shapes and joining (torch.view, reshape, transpose, permute, expand, squeeze,
narrow, select, split, ...; cat, stack; clone, contiguous, flip, dtype conversion).

A view shares its base's Storage; each function checks its arguments with PyTorch's texts and
applies a view row of nbgrad/ops/views.py.
"""
from __future__ import annotations

import math
import operator

from .. import dtypes
from ..autograd.apply import apply, _fresh
from ..autograd.record import _geom
from ..autograd.grad_mode import GENERAL_PATH, STATE as _GRAD
from ..ops import ROWS as R
from ..ops.views import _ViewImpossible
from ..tensor import _dim, Size
from .registry import method
from .args import _builtin_max, _builtin_min, _builtin_sum, _out, type_name_of

_VIEW = R["view"]


def _fold(x, shape):
    """reshape(x, shape) for a known shape of the same size: a view (ViewBackward0, or
    ReshapeAliasBackward0 on non-contiguous input the strides allow), else a copy
    (CloneBackward0, UnsafeViewBackward0), as PyTorch's reshape."""
    try:
        return apply(R["view" if x._data.flags.c_contiguous else "reshape_alias"], (x,),
                     (shape,))
    except _ViewImpossible:
        return apply(R["unsafe_view"], (clone(x),), (shape,))


def cat(tensors, dim=0, *, out=None):
    """Concatenate along `dim` (torch.cat); shapes must match elsewhere."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    if out is not None:
        return _out("cat", lambda: cat(tensors, dim), tuple(tensors), out)
    shapes = [t._data.shape for t in tensors]
    s0 = shapes[0]
    nd = len(s0)
    if not GENERAL_PATH and type(dim) is int and -nd <= dim < nd and s0 != (0,) and \
            shapes.count(s0) == len(shapes):
        # equal shapes (attention heads): every check below passes (NBGRAD_GENERAL_PATH=1 runs
        # them); nd > 0 here, as -nd <= dim < nd
        d = dim % nd
        return apply(R["cat"], tuple(tensors), ((s0[d],) * len(shapes), d,
                                                tuple([t._data.dtype for t in tensors])))
    for i, s in enumerate(shapes):
        if not s:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    ts, left_out = tensors, ()
    if (0,) in shapes:  # 1-d empty tensors are left out, as torch's legacy rule, but their
        # dtypes still take part in the promotion (they follow the inputs' in the row's dtypes)
        ts = [t for t, s in zip(tensors, shapes) if s != (0,)] or tensors[:1]
        left_out = tuple(t._data.dtype for t in tensors if not any(t is k for k in ts))
        shapes = [t._data.shape for t in ts]
    s0 = shapes[0]
    nd = len(s0)
    d = _dim(dim, nd)
    rest = s0[:d] + s0[d + 1:]
    for i, s in enumerate(shapes):
        if len(s) != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and "
                               f"{len(s)}")
        if s[:d] + s[d + 1:] != rest:  # (the first dim that differs, in torch's text)
            k = next(k for k in range(nd) if k != d and s[k] != s0[k])
            raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. "
                               f"Expected size {s0[k]} but got size {s[k]} for tensor "
                               f"number {i} in the list.")
    return apply(R["cat"], tuple(ts), (tuple(s[d] for s in shapes), d,
                                       tuple(t._data.dtype for t in ts) + left_out))


concat = concatenate = cat


def stack(tensors, dim=0, *, out=None):
    """Stack equal-shaped tensors along a new `dim` (torch.stack)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    if out is not None:
        return _out("stack", lambda: stack(tensors, dim), tuple(tensors), out)
    s0 = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != s0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(s0)} "
                               f"at entry 0 and {list(t._data.shape)} at entry {i}")
    d = _dim(dim, len(s0) + 1)
    return apply(R["stack"], tuple(tensors), (len(tensors), d))


def hstack(tensors):
    """Concatenate along dim 1 (dim 0 for 1-D tensors) (torch.hstack)."""
    return cat(tensors, 1 if tensors[0].ndim > 1 else 0)


def vstack(tensors):
    """Stack rows: 1-D tensors become (1, n), then concatenate along dim 0 (torch.vstack)."""
    return cat([t.reshape(1, -1) if t.ndim == 1 else t for t in tensors], 0)


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = shape[0]
    return tuple(map(int, shape))


def _sizes(shape, numel):
    """``_infer(_shape_arg(shape), numel)``, the usual two ints (``x.view(-1, 30)``) written
    out; anything else (one -1 that cannot be inferred, sizes as a tuple, ...) goes the long way,
    to its errors."""
    if len(shape) == 2:
        a, b = shape
        if type(a) is int and type(b) is int:
            if a == -1:
                if b > 0 and not numel % b:
                    return (numel // b, b)
            elif b == -1:
                if a > 0 and not numel % a:
                    return (a, numel // a)
            elif a >= 0 and b >= 0 and a * b == numel:
                return shape
    return _infer(_shape_arg(shape), numel)


def _infer(shape, numel):
    """`shape` with its one -1 (if any) inferred from `numel`; PyTorch's errors."""
    known, neg = 1, -1
    for i, s in enumerate(shape):
        if s == -1:
            if neg >= 0:
                raise RuntimeError("only one dimension can be inferred")
            neg = i
        elif s < 0:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {list(shape)}")
        else:
            known *= s
    if neg >= 0:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        return shape[:neg] + (numel // known,) + shape[neg + 1:]
    if known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _check_view_dtype(input, dt):
    """torch's errors for a view as a dtype of another element size."""
    a, new = input._data, dtypes.to_np(dt)
    if new.itemsize == a.dtype.itemsize:
        return
    names = (f"{type_name_of(input).split('.')[-1][:-6]} as "
             f"{dt._tensor_name[:-6]} (different element sizes)")
    if a.ndim == 0:
        raise RuntimeError(f"self.dim() cannot be 0 to view {names}")
    step = a.strides[-1] // a.dtype.itemsize if a.shape[-1] > 1 else 1
    if step != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 to view {names}, but got {step}")
    if new.itemsize > a.dtype.itemsize:
        ratio = new.itemsize // a.dtype.itemsize
        if a.shape[-1] % ratio:
            raise RuntimeError(f"self.size(-1) must be divisible by {ratio} to view {names}, but "
                               f"got {a.shape[-1]}")


@method
def view(input, *shape):
    """Same storage, new shape; needs compatible strides (torch.Tensor.view).

    Raises TypeError without a size, RuntimeError when the strides do not allow the view."""
    if not shape:
        raise TypeError("view() received an invalid combination of arguments - got (), but "
                        "expected one of:\n * (torch.dtype dtype)\n * (tuple of ints size)\n")
    if len(shape) == 1 and isinstance(shape[0], dtypes.dtype):
        _check_view_dtype(input, shape[0])
        raise NotImplementedError("nbgrad: view(dtype) is not supported")
    shape = _sizes(shape, input._data.size)
    try:
        return apply(_VIEW, (input,), (shape,))
    except _ViewImpossible:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.") from None


@method
def reshape(input, *shape):
    """A view when the strides allow, else a copy (torch.reshape). TypeError without a shape."""
    if not shape:
        raise TypeError('reshape() missing 1 required positional arguments: "shape"')
    # PyTorch: view when contiguous, else _reshape_alias when the strides allow, else a copy
    return _fold(input, _sizes(shape, input._data.size))


@method
def ravel(input):
    """The elements of ``input`` as a contiguous 1-D tensor (torch.ravel): a view
    (ViewBackward0) when ``input`` is contiguous, else a copy (CloneBackward0 then
    ViewBackward0), as PyTorch's."""
    return view(contiguous(input), -1)


@method
def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim (torch.flatten); a view when possible."""
    s = input._data.shape
    if len(s) == 0:
        return reshape(input, 1)
    a, b = _dim(start_dim, len(s)), _dim(end_dim, len(s))
    if a > b:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if a == b:
        return input
    return reshape(input, s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:])


@method
def unflatten(input, dim, sizes):
    """Split dim into `sizes` (torch.unflatten); a view."""
    s = input._data.shape
    d = _dim(dim, len(s))
    sizes = tuple(sizes)
    known = math.prod(n for n in sizes if n != -1)
    if (-1 not in sizes and known != s[d]) or (-1 in sizes and (known == 0 or s[d] % known)):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size "
                           f"of dim {d} ({s[d]}) in the input tensor")
    sizes = _infer(sizes, s[d])
    return view(input, s[:d] + tuple(sizes) + s[d + 1:])


@method
def transpose(input, dim0, dim1):
    """Swap two dims; a view (torch.transpose)."""
    nd = input._data.ndim
    d0, d1 = _dim(dim0, nd), _dim(dim1, nd)
    return apply(R["transpose"], (input,), (d0, d1))


swapaxes = swapdims = method(transpose, "swapaxes", "swapdims")


@method
def t(input):
    """Transpose of a <= 2-D tensor; a view (torch.t)."""
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{input._data.ndim}D")
    return apply(R["t"], (input,))


@method
def permute(input, *dims):
    """Reorder dims; a view (torch.permute)."""
    dims = _shape_arg(dims)
    nd = input._data.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {nd} is not equal to len(dims) = {len(dims)}")
    dims = tuple(_dim(d, nd) for d in dims)
    if len(set(dims)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return apply(R["permute"], (input,), (dims,))


@method
def expand(input, *sizes):
    """Broadcast to `sizes` without copying (-1 keeps a dim); a view (torch.Tensor.expand)."""
    sizes = _shape_arg(sizes)
    s = input._data.shape
    if len(sizes) < len(s):
        raise RuntimeError(f"expand({type_name_of(input)}{{{list(s)}}}, size={list(sizes)}): the "
                           f"number of sizes provided ({len(sizes)}) must be greater or equal to "
                           f"the number of dimensions in the tensor ({len(s)})")
    return apply(R["expand"], (input,), (_expand_shape(s, sizes),))


def _expand_shape(s, sizes):
    """The target shape of expanding shape `s` to `sizes` (-1 keeps a dim), checked from the
    last dim backwards with PyTorch's texts."""
    lead = len(sizes) - len(s)
    target = [0] * len(sizes)
    for i in range(len(sizes) - 1, -1, -1):
        n = sizes[i]
        cur = s[i - lead] if i >= lead else None
        if n == -1:
            if cur is None:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            n = cur
        elif cur is not None and cur != 1 and cur != n:
            raise RuntimeError(f"The expanded size of the tensor ({n}) must match the existing "
                               f"size ({cur}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(sizes)}.  Tensor sizes: {list(s)}")
        target[i] = n
    return tuple(target)


@method
def broadcast_to(input, shape):
    """expand to `shape`; a view (torch.broadcast_to)."""
    return expand(input, *shape)


@method
def expand_as(input, other):
    """expand to other.shape; a view (torch.Tensor.expand_as)."""
    return expand(input, *other.shape)


@method
def squeeze(input, dim=None):
    """Remove size-1 dims (all, or `dim`); a view (torch.squeeze)."""
    if dim is None:
        return apply(R["squeeze"], (input,))
    if isinstance(dim, (tuple, list)):
        dims = tuple(sorted(_dim(d, input._data.ndim) for d in dim))
        return apply(R["squeeze_dims"], (input,), (dims,))
    if input._data.ndim == 0:
        return apply(R["squeeze_dim"], (input,), (0,))
    return apply(R["squeeze_dim"], (input,), (_dim(dim, input._data.ndim),))


@method
def unsqueeze(input, dim):
    """Insert a size-1 dim at `dim`; a view (torch.unsqueeze)."""
    return apply(R["unsqueeze"], (input,), (_dim(dim, input._data.ndim + 1),))


@method
def narrow(input, dim, start, length):
    """Elements start..start+length along `dim`; a view (torch.narrow)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    start = int(start)
    if start < 0:
        start += n
    if start < 0 or start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _slice(input, d, slice(start, start + length, 1))


def _slice(input, d, slc):
    index = (slice(None),) * d + (slc,)
    return apply(R["slice"], (input,), (index,))


@method
def select(input, dim, index):
    """The slice at `index` along `dim`, dropping that dim; a view (torch.select)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    i = int(index)
    if i < -n or i >= n:
        raise IndexError(f"select(): index {i} out of range for tensor of size "
                         f"{list(input._data.shape)} at dimension {d}")
    if i < 0:
        i += n
    idx = (slice(None),) * d + (i, Ellipsis)  # Ellipsis keeps a 0-d result an array (a view)
    return apply(R["select"], (input,), (idx,))


@method
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims dim1, dim2 as the last dim; a writable view (torch.diagonal)."""
    nd = input._data.ndim
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    shape, strides, off = _geom(input)
    n1, n2 = shape[d1], shape[d2]
    if offset >= 0:
        length = _builtin_max(0, _builtin_min(n1, n2 - offset))
        off += offset * strides[d2] if length else 0
    else:
        length = _builtin_max(0, _builtin_min(n1 + offset, n2))
        off += -offset * strides[d1] if length else 0
    keep = [i for i in range(nd) if i not in (d1, d2)]
    vshape = tuple(shape[i] for i in keep) + (length,)
    vstrides = tuple(strides[i] for i in keep) + (strides[d1] + strides[d2],)
    return apply(R["diagonal"], (input,), (_geom(input), (vshape, vstrides, off),
                                           input._storage._root))


@method
def as_strided(input, size, stride, storage_offset=None):
    """A view with explicit size, stride and storage offset, in elements (torch.as_strided).

    Raises RuntimeError (torch's text) when the view would reach past the storage's end."""
    off = input.storage_offset() if storage_offset is None else int(storage_offset)
    size, stride = tuple(size), tuple(stride)
    _check_in_storage(input, size, stride, off)
    return apply(R["as_strided"], (input,), (_geom(input), (size, stride, off),
                                             input._storage._root))


def _check_in_storage(t, size, stride, off):
    item = t._data.dtype.itemsize
    reach = _builtin_sum((n - 1) * st for n, st in zip(size, stride))
    need = 0 if 0 in size else off + 1 + reach
    have = t._storage.nbytes()
    if need * item > have:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {off}, and itemsize {item} requiring a storage size of "
                           f"{need * item} are out of bounds for storage of size {have}")


@method
def unfold(input, dimension, size, step):
    """All windows of `size` elements along `dimension`, `step` apart, as a new last dim;
    a view (torch.Tensor.unfold). (N, L) -> (N, (L - size) // step + 1, size) for dimension 1."""
    d = _dim(dimension, input._data.ndim) if input._data.ndim else 0
    a = input._data
    L = a.shape[d] if a.ndim else 1
    if size > L:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {L} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return apply(R["unfold"], (input,), (d, size, step))


@method
def unbind(input, dim=0):
    """Tuple of the slices along `dim`; views that refuse in-place changes (torch.unbind)."""
    d = _dim(dim, input._data.ndim)
    return apply(R["unbind"], (input,), (d, input._data.shape[d]))


@method
def split(input, split_size_or_sections, dim=0):
    """Split into chunks of a size, or of the given sizes, along `dim`; views (torch.split)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s <= 0 and n:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        sizes = [s] * (n // s) + ([n % s] if n % s else []) if s else [0]
        row = R["split"]
    else:
        sizes = list(split_size_or_sections)
        if _builtin_sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                               f"tensor's size at dimension {d}), but got split_sizes={sizes}")
        row = R["split_sizes"]
    return apply(row, (input,), (tuple(sizes), d))


@method
def chunk(input, chunks, dim=0):
    """Split into `chunks` nearly equal pieces along `dim`; views (torch.chunk)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input._data.shape[_dim(dim, input._data.ndim)]
    size = -(-n // chunks) if n else 1
    return split(input, size, dim)


@method
def unsafe_split(input, split_size, dim=0):
    """Like :func:`split`, but the pieces are not views: they may be modified in place
    (torch.unsafe_split; one UnsafeSplitBackward0 node). Here they are copies."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if split_size <= 0 and n:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                           f"dimension size of {n}")
    sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else []) \
        if split_size else [0]
    outs = apply(R["unsafe_split"], (input,), (tuple(sizes), d))
    return tuple(outs)


@method
def unsafe_chunk(input, chunks, dim=0):
    """Like :func:`chunk`, pieces that are not views (torch.unsafe_chunk; UnsafeSplitBackward0)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input._data.shape[_dim(dim, input._data.ndim)]
    return unsafe_split(input, -(-n // chunks) if n else 1, dim)


@method
def contiguous(input, memory_format=None):
    """Self if C-contiguous, else a contiguous copy (CloneBackward0) (torch.Tensor.contiguous)."""
    if input._data.flags.c_contiguous:
        return input
    return _copied(input, apply(R["clone"], (input,), (True,)))


@method
def clone(input, *, memory_format=None):
    """A copy with its own storage; differentiable (CloneBackward0) (torch.clone)."""
    return _copied(input, apply(R["clone"], (input,), (False,)))


def _copied(input, out):
    """``out``, a copy of ``input``; of an inference tensor outside inference mode, at version 1:
    torch makes it empty, then copy_ writes it (counted on the new, normal tensor)."""
    st = input._storage_or_nbytes  # (a negative byte count: an inference tensor, _make_fresh)
    if (st < 0 if type(st) is int else st.inference) and not _GRAD.inference:
        out._bump_version("copy_")
    return out


@method
def flip(input, *dims):
    """Reverse the order along `dims`; a copy (torch.flip)."""
    dims = _shape_arg(dims) if dims and not isinstance(dims[0], int) else tuple(dims)
    return apply(R["flip"], (input,), (tuple(_dim(d, input._data.ndim) for d in dims),))


def to_dtype(input, dtype):
    """A copy in `dtype` (ToCopyBackward0 when floating), or the tensor itself if already that
    dtype."""
    dt = dtypes.to_np(dtype)
    if input._data.dtype == dt:
        return input
    if dt.kind == "f":
        return _copied(input, apply(R["to_copy"], (input,), (dt, input._data.dtype)))
    return _copied(input, _fresh(input._data.astype(dt)))  # not differentiable: no node


def _index_tuple(x):
    """An int-like (int, numpy integer, integer 0-d tensor: anything with __index__) or a
    sequence of them, as a tuple of ints."""
    try:
        return (operator.index(x),)
    except TypeError:
        return tuple(operator.index(v) for v in x)


@method
def roll(input, shifts, dims=None):
    """Shift elements along `dims` (ints or tuples) circularly; without dims, of the flattened
    tensor (torch.roll; RollBackward0)."""
    shifts = _index_tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               "dims:0")
        return apply(R["roll"], (input,), (shifts[0], None))
    nd = input._data.ndim
    dims = _index_tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    return apply(R["roll"], (input,), (shifts, tuple(_dim(d, nd) for d in dims)))


@method
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees k times in the plane of `dims` (torch.rot90; Rot90Backward0)."""
    nd = input._data.ndim
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = (_dim(d, nd) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    return apply(R["rot90"], (input,), (k % 4, (d0, d1)))
