"""Tensor behaviour that no torch.* function has: ``.to``, ``.type``, ``.new``, the legacy
``Tensor(...)`` constructor, and the in-place shape changes (unsqueeze_, t_, resize_, ...).
"""
from __future__ import annotations

import builtins
import math
import weakref

from .. import backend, creation, dtypes
from ..autograd.apply import apply, _fresh
from ..autograd.record import _geom
from ..autograd.inplace import check_inplace
from ..autograd.grad_mode import no_grad, STATE as _GRAD
from ..ops import ROWS as R
from ..ops.formulas import TENSORS, _contiguous_strides
from ..ops.derivatives import _reduce_to
from ..tensor import _dim, Size, Tensor
from .views import as_strided, _shape_arg, squeeze, t, to_dtype, transpose, unsqueeze


def _to(self, *args, **kwargs):
    """Tensor.to(dtype), .to(device), .to(other), .to(device, dtype) (torch.Tensor.to)."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    for a in args:
        if isinstance(a, dtypes.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (str, backend.device)) or (isinstance(a, int)
                                                      and not isinstance(a, bool)):
            device = a  # (an int: an accelerator index, as torch.device(0))
        elif isinstance(a, (bool, float)):  # a Python number: its type's dtype, as torch
            dtype = type(a)
        elif a is not None:
            dtype = a
    if dtype is not None and not isinstance(dtype, dtypes.dtype):
        dtype = dtypes.dtype_arg("to", dtype)  # Python's float, int, bool: torch's dtypes
    r = self
    if device is not None:
        r = _to_device(r, backend.device(device) if not isinstance(device, backend.device)
                       else device)
    if dtype is not None:
        r = to_dtype(r, dtype)
    return r


def _to_device(self, dev):
    if backend.device_of(self._data) == dev:
        return self
    return apply(R["to_device"], (self,), (backend.device_of(self._data), dev))


def _new_like(fn):
    def f(self, *size, dtype=None, device=None, requires_grad=False):
        if not size:
            raise TypeError(f'new_{fn}() missing 1 required positional arguments: "size"')
        return getattr(creation, fn)(*size, dtype=dtype or self.dtype, device=device or
                                     self.device, requires_grad=requires_grad)
    return f


def legacy_init(self, *args, dtype=None, device=None, requires_grad=False):
    """``Tensor(...)``, PyTorch's legacy constructor (bound as Tensor.__init__): ``Tensor(t)`` of
    one tensor is torch.alias(t), a view of it (same dtype, memory and version counter;
    AliasBackward0 when t requires grad: old code flattens parameters this way and
    differentiates through them); anything else is creation.tensor_init's (data copied as the
    default dtype, or sizes)."""
    if len(args) == 1 and isinstance(args[0], Tensor) and dtype is None and device is None:
        a = apply(R["alias"], (args[0],))
        a._storage  # (a view has its Storage: shared, not counted twice)
        for k in ("_data", "_storage_or_nbytes", "_grad_fn", "_output_nr", "_requires_grad",
                  "_grad", "_view", "_extra"):
            setattr(self, k, getattr(a, k))
        vs = self._storage._views
        if vs and vs[-1]() is a:  # the storage remembers views to wake: this one, not a
            vs[-1] = weakref.ref(self)
        return
    creation.tensor_init(self, *args, dtype=dtype, device=device, requires_grad=requires_grad)


def _sparse_only(name, layout):
    def f(self):
        raise RuntimeError(f"{name} expected sparse {layout}layout but got Strided")
    f.__name__ = name
    f.__doc__ = (f"Tensor.{name}() of a sparse tensor in PyTorch; nbgrad's tensors are dense "
                 "(strided), so it raises PyTorch's RuntimeError for a dense tensor.")
    return f


def _type(self, dtype=None, non_blocking=False):
    """Tensor.type: the type string ('torch.FloatTensor' style) without an argument; with one
    (a dtype, a legacy type such as ``torch.LongTensor``, or its name as a string, 'torch.' or
    'nbgrad.' prefixed) the tensor converted to it.

    Raises:
        ValueError: a string or a Python type that names no tensor type (PyTorch's "invalid
            type" text); TypeError: neither a type, a string nor a dtype.
    """
    if dtype is None:
        return self.type_name()
    if isinstance(dtype, str):
        from .. import tensortypes
        name = dtype.split(".")[-1]
        legacy = getattr(tensortypes, name, None)
        if legacy is None or not dtype.startswith(("torch.", "nbgrad.")):
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = legacy
    elif isinstance(dtype, type) and not isinstance(getattr(dtype, "dtype", None), dtypes.dtype):
        raise ValueError(f"invalid type: '{dtype.__name__}'")  # (Python's float, int, ...)
    elif not isinstance(dtype, (dtypes.dtype, type)):
        raise TypeError("dtype must be a type, str, or dtype object")
    return to_dtype(self, getattr(dtype, "dtype", dtype))


def _new(self, *args, device=None):
    """Tensor.new (legacy constructor): ``t.new(data)`` a tensor of the data, ``t.new(*sizes)``
    an uninitialised one (sizes or a Size), ``t.new()`` an empty one, all of ``t``'s dtype and
    device; mirrors ``torch.Tensor.new``. A Tensor of the same dtype comes back as an alias.

    Raises:
        TypeError: arguments that are neither data nor sizes (PyTorch's wording), or a Tensor
            of another dtype.
    """
    device = self.device if device is None else device
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not self.dtype:
            raise TypeError(f"new(): expected a tensor of dtype {self.dtype}, got {args[0].dtype}")
        return args[0].detach()  # an alias, as PyTorch's
    if not args or (len(args) == 1 and isinstance(args[0], Size)):
        return creation.empty(tuple(args[0]) if args else (0,), dtype=self.dtype, device=device)
    if len(args) == 1 and not isinstance(args[0], int):
        return creation.tensor(args[0], dtype=self.dtype, device=device)
    if not builtins.all(isinstance(a, int) for a in args):
        raise TypeError(f"new(): invalid data type '{type(args[0]).__name__}'")
    return creation.empty(*args, dtype=self.dtype, device=device)


def _reshape_in_place(self, name, make, row, args=()):
    """An in-place op that changes only the shape of ``self`` (unsqueeze_, squeeze_, t_,
    transpose_, swapdims_, as_strided_): ``self`` becomes the view ``make(self)`` of the same
    memory and its version goes up by one, as PyTorch's. On a tensor that requires grad with
    grad mode on, PyTorch's in-place node (`row`: UnsqueezeBackward1, TransposeBackward1, ...)
    becomes its grad_fn, after the old one; a leaf, or a view of one, gets PyTorch's error."""
    if self._requires_grad and _GRAD.enabled:
        check_inplace(self, name)
        v = apply(R[row], (self,), args)
        self._data = v._data
        self._grad_fn, self._output_nr = v._grad_fn, 0
        self._bump_version(name)
        if self._view is not None:  # its grad_fn is current: not regenerated from the base
            self._view.version = self._storage.version
        return self
    with no_grad():
        new = make(self)._data
    self._data = new
    self._bump_version(name)
    return self


def unsqueeze_(self, dim):
    """In place: ``self`` gains a size-1 dimension at ``dim`` (torch.Tensor.unsqueeze_);
    recorded as UnsqueezeBackward1."""
    return _reshape_in_place(self, "unsqueeze_", lambda t: unsqueeze(t, dim), "unsqueeze_",
                             (_dim(dim, self._data.ndim + 1),))


def squeeze_(self, dim=None):
    """In place: size-1 dimensions (or ``dim``) removed (torch.Tensor.squeeze_); recorded as
    SqueezeBackward3 (all) or SqueezeBackward4 (``dim``)."""
    if dim is None:
        return _reshape_in_place(self, "squeeze_", lambda t: squeeze(t), "squeeze_")
    dims = tuple(sorted(_dim(d, self._data.ndim) for d in dim)) \
        if isinstance(dim, (tuple, list)) else (_dim(dim, self._data.ndim) if self._data.ndim
                                                else 0,)
    return _reshape_in_place(self, "squeeze_", lambda t: squeeze(t, dim),
                             "squeeze_dims_tuple_" if isinstance(dim, (tuple, list))
                             else "squeeze_dims_", (dims if self._data.ndim else (),))


def transpose_(self, dim0, dim1):
    """In place: dims ``dim0`` and ``dim1`` swapped (torch.Tensor.transpose_, swapdims_,
    swapaxes_); recorded as TransposeBackward1."""
    n = self._data.ndim
    return _reshape_in_place(self, "transpose_", lambda t: transpose(t, dim0, dim1),
                             "transpose_", (_dim(dim0, n) if n else 0, _dim(dim1, n) if n else 0))


def t_(self):
    """In place: a matrix (or vector) transposed (torch.Tensor.t_); recorded as TBackward1."""
    if self._requires_grad and _GRAD.enabled:
        check_inplace(self, "t_")  # PyTorch checks a leaf first
    if self._data.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is "
                           f"{self._data.ndim}D")
    return _reshape_in_place(self, "t_", t, "t_")


def as_strided_(self, size, stride, storage_offset=None):
    """In place: ``self`` takes the given size, stride and storage offset, in elements
    (torch.Tensor.as_strided_); recorded as AsStridedBackward1."""
    off = self.storage_offset() if storage_offset is None else int(storage_offset)
    size, stride = tuple(size), tuple(stride)
    return _reshape_in_place(
        self, "as_strided_", lambda t: as_strided(t, size, stride, off), "as_strided_",
        (_geom(self), (size, stride, off), self._storage._root))


def resize_(self, *sizes):
    """torch.Tensor.resize_: ``self`` takes the shape ``sizes``, keeping its first elements in
    row-major order (a non-contiguous one: its storage's, in memory order, from its offset);
    growing it appends uninitialised (here zero) elements in a new buffer.
    Bumps the version by one.

    Raises:
        RuntimeError: ``self`` requires grad ("cannot resize variables that require grad").
    """
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    sizes = tuple(_shape_arg(sizes))
    if sizes == self._data.shape:
        return self  # PyTorch: nothing changes, not even the version
    n = math.prod(sizes)
    if not self._data.flags.c_contiguous:
        return _resize_strided(self, sizes, n)
    flat = self._data.reshape(-1)
    if n <= flat.size:
        self._data = flat[:n].reshape(sizes)
    else:
        xp = backend.get_array_module(self._data)
        grown = xp.zeros(n, dtype=self._data.dtype)
        grown[:flat.size] = flat
        fresh = _fresh(grown.reshape(sizes))
        if self._storage.inference:  # still an inference tensor (PyTorch's error below)
            fresh._storage.__class__ = type(self._storage)
        self._data, self._storage = fresh._data, fresh._storage
    self._bump_version("resize_")
    return self


def _resize_strided(self, sizes, n):
    """resize_ of a non-contiguous tensor, as PyTorch's: contiguous strides from the same storage
    offset over the storage's memory (an expanded or transposed tensor reads its storage in
    memory order); a storage too small is copied into a larger buffer first."""
    off, root = self.storage_offset(), self._storage._root
    item = self._data.dtype.itemsize
    if (off + n) * item <= root.nbytes:
        with no_grad():
            self._data = as_strided(self, sizes, _contiguous_strides(sizes), off)._data
    else:
        xp = backend.get_array_module(self._data)
        old = root.reshape(-1).view(xp.uint8)[off * item:]
        grown = xp.zeros(n * item, dtype=xp.uint8)
        grown[:old.size] = old
        fresh = _fresh(grown.view(self._data.dtype).reshape(sizes))
        if self._storage.inference:  # still an inference tensor
            fresh._storage.__class__ = type(self._storage)
        self._data, self._storage = fresh._data, fresh._storage
    self._bump_version("resize_")
    return self


def resize_as_(self, other):
    """torch.Tensor.resize_as_: :func:`resize_` to ``other``'s shape."""
    return resize_(self, *other.shape)


def _sum_to_size(self, size):
    return _reduce_to(self, tuple(size), None, TENSORS)
