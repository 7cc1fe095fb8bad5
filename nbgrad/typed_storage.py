"""TypedStorage: a Storage seen as elements of one dtype (``Tensor.storage()``, torch.TypedStorage),
and the legacy storage classes (``FloatStorage`` ...) that name a dtype in checkpoints.

The memory and its version counter stay the :class:`~nbgrad.storage.Storage` (``untyped()``);
this is a thin view that reads and writes its elements. PyTorch deprecates it and says so once per
process, with the same UserWarning.
"""
from __future__ import annotations

import warnings

import numpy as np

from . import backend, dtypes
from .naming import expose, public
from .storage import Storage

__all__ = ["TypedStorage", "STORAGE_TYPES", "storage_type_of", "FloatStorage", "DoubleStorage",
           "HalfStorage", "LongStorage", "IntStorage", "ShortStorage", "CharStorage",
           "ByteStorage", "BoolStorage"]

_DEPRECATED = (
    "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
    "only storage class. This should only matter to you if you are using storages directly.  To "
    "access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()")
_warned = [False]


def _warn_deprecated(stacklevel=3):
    if not _warned[0]:
        _warned[0] = True
        warnings.warn(_DEPRECATED, UserWarning, stacklevel=stacklevel)


def _flat(root):
    """The 1-D array of a storage's root array's buffer, in memory order (a view)."""
    if root.ndim == 1 and root.strides == (root.itemsize,):
        return root
    return backend.as_strided(root, (root.size,), (1,), 0)


class TypedStorage:
    """The elements of a Storage as one dtype (torch.storage.TypedStorage).

    Args:
        wrap_storage (Storage): the memory (shared, not copied).
        dtype (nbgrad.dtype): the element type; ``size()`` is ``nbytes // itemsize``.
    """

    __slots__ = ("_untyped_storage", "dtype")
    is_sparse = False

    def __init__(self, *args, device=None, dtype=None, wrap_storage=None, _internal=False):
        if not _internal:
            _warn_deprecated()
        if wrap_storage is None:
            dt = dtype if dtype is not None else dtypes.get_default_dtype()
            wrap_storage = _new_storage(args, dt, device)
        self._untyped_storage = wrap_storage
        self.dtype = dtype if dtype is not None else dtypes.uint8

    @classmethod
    def _of_tensor(cls, t):
        """``t.storage()``: its Storage typed as its dtype."""
        _warn_deprecated(4)
        return cls(wrap_storage=t.untyped_storage(), dtype=t.dtype, _internal=True)

    def _elements(self):
        flat = _flat(self._untyped_storage._root)
        np_dtype = self.dtype.np
        if flat.dtype != np_dtype:
            flat = flat.view(np.uint8).view(np_dtype)
        return flat

    # ---- sizes and identity ----
    def size(self):
        """Number of elements (int)."""
        return self._untyped_storage.nbytes() // self.dtype.itemsize

    _size = size

    def __len__(self):
        return self.size()

    def element_size(self):
        """Bytes per element."""
        return self.dtype.itemsize

    def nbytes(self):
        return self._untyped_storage.nbytes()

    def data_ptr(self):
        return self._untyped_storage.data_ptr()

    _data_ptr = data_ptr

    @property
    def device(self):
        return self._untyped_storage.device

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def untyped(self):
        """The Storage under it (torch.UntypedStorage), shared."""
        _warn_deprecated()
        return self._untyped_storage

    def is_shared(self):
        return False

    def type(self, dtype=None, non_blocking=False):
        """'torch.FloatStorage' (nbgrad.FloatStorage without the torch alias)."""
        return public(_LEGACY_NAME[self.dtype.name])

    def _pickle_storage_type(self):
        return _LEGACY_NAME[self.dtype.name]

    # ---- elements ----
    def __getitem__(self, idx):
        if isinstance(idx, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        if not isinstance(idx, (int, np.integer)):
            raise RuntimeError(f"can't index a {_class_repr()} with {type(idx)}")
        n = self.size()
        i = int(idx)
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for storage of size {n}")
        return self._elements()[i].item()

    def __setitem__(self, idx, value):
        if not isinstance(idx, (int, np.integer, slice)):
            raise RuntimeError(f"can't index a {_class_repr()} with {type(idx)}")
        el = self._elements()
        if isinstance(idx, (int, np.integer)) and not -el.shape[0] <= idx < el.shape[0]:
            raise IndexError(f"index {int(idx)} is out of bounds for dimension 0 with size "
                             f"{el.shape[0]}")
        el[idx] = _as_values(value)

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self):
        """The elements as a list of Python numbers."""
        return backend.to_device(self._elements(), backend.CPU).tolist()

    def fill_(self, value):
        """Set every element to ``value``; returns self."""
        self._elements()[...] = value
        return self

    def copy_(self, source, non_blocking=None):
        """Copy ``source``'s elements (a storage of the same size) into this one; returns self."""
        src = source._elements() if isinstance(source, TypedStorage) else _flat(source._root)
        el = self._elements()
        if src.shape[0] != el.shape[0]:
            raise RuntimeError(f"size mismatch, {el.shape[0]} vs {src.shape[0]}")
        el[...] = backend.to_device(src, backend.device_of(el)).astype(el.dtype, copy=False)
        return self

    def cpu(self):
        """This storage on the CPU (a copy if it is elsewhere)."""
        if self.device.type == "cpu":
            return TypedStorage(wrap_storage=self._untyped_storage, dtype=self.dtype,
                                _internal=True)
        arr = backend.to_device(_flat(self._untyped_storage._root), backend.CPU)
        return TypedStorage(wrap_storage=Storage(arr), dtype=self.dtype, _internal=True)

    def clone(self):
        arr = _flat(self._untyped_storage._root).copy()
        return TypedStorage(wrap_storage=Storage(arr), dtype=self.dtype, _internal=True)

    def __repr__(self):
        body = "\n".join(f" {x}" for x in self.tolist()) if self.size() else " "
        return (f"{body}\n[{_class_repr()[8:-2]}(dtype={self.dtype!r}, device={self.device}) "
                f"of size {self.size()}]")

    __str__ = __repr__

    def __reduce__(self):  # (copy, deepcopy, multiprocessing; nbgrad.save writes storages itself)
        flat = backend.to_device(_flat(self._untyped_storage._root), backend.CPU).copy()
        return (_rebuild_typed, (flat, self.dtype.name))


def _rebuild_typed(flat, dtype_name):
    return TypedStorage(wrap_storage=Storage(flat), dtype=dtypes.from_name(dtype_name),
                        _internal=True)


def _class_repr():
    return f"<class '{public('storage.TypedStorage')}'>"


def _as_values(value):
    if hasattr(value, "_data"):  # a Tensor
        return backend.to_device(value._data, backend.CPU)
    return value


def _new_storage(args, dt, device):
    """The Storage of ``FloatStorage(n)`` (n zeros) or ``FloatStorage([1, 2])``."""
    np_dtype = dtypes.to_np(dt)
    if not args:
        arr = np.empty(0, np_dtype)
    elif len(args) == 1 and isinstance(args[0], (int, np.integer)):
        arr = np.zeros(int(args[0]), np_dtype)
    elif len(args) == 1:
        arr = np.array(list(args[0]), dtype=np_dtype).reshape(-1)
    else:
        raise TypeError(f"{public('storage.TypedStorage')}(): expected a size or a sequence, "
                        f"got {len(args)} arguments")
    if device is not None and backend.device(device).type != "cpu":
        arr = backend.to_device(arr, backend.device(device))
    return Storage(arr)


# PyTorch's legacy storage classes by dtype: the names checkpoints give storages
_LEGACY_NAME = {
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
    "int64": "LongStorage", "int32": "IntStorage", "int16": "ShortStorage",
    "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
}
# dtypes PyTorch stores and nbgrad does not (numpy has no bfloat16): named for error messages
UNSUPPORTED_STORAGES = {
    "BFloat16Storage": "bfloat16", "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "QUInt8Storage": "quint8", "QInt8Storage": "qint8",
    "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}


class _LegacyStorageMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, TypedStorage) and obj.dtype is cls.dtype


def _legacy_class(name, dt):
    def __new__(cls, *args, device=None, wrap_storage=None):
        _warn_deprecated()
        return TypedStorage(*args, device=device, dtype=dt, wrap_storage=wrap_storage,
                            _internal=True)
    cls = _LegacyStorageMeta(name, (), {
        "__new__": __new__, "dtype": dt, "__module__": "nbgrad",
        "__doc__": f"A TypedStorage of {dt.name} (torch.{name}, the name checkpoints use)."})
    return cls


FloatStorage = _legacy_class("FloatStorage", dtypes.float32)
DoubleStorage = _legacy_class("DoubleStorage", dtypes.float64)
HalfStorage = _legacy_class("HalfStorage", dtypes.float16)
LongStorage = _legacy_class("LongStorage", dtypes.int64)
IntStorage = _legacy_class("IntStorage", dtypes.int32)
ShortStorage = _legacy_class("ShortStorage", dtypes.int16)
CharStorage = _legacy_class("CharStorage", dtypes.int8)
ByteStorage = _legacy_class("ByteStorage", dtypes.uint8)
BoolStorage = _legacy_class("BoolStorage", dtypes.bool_)
STORAGE_TYPES = {cls.__name__: cls for cls in (
    FloatStorage, DoubleStorage, HalfStorage, LongStorage, IntStorage, ShortStorage, CharStorage,
    ByteStorage, BoolStorage)}


def storage_type_of(dtype):
    """The legacy storage class of an nbgrad dtype (float32 -> FloatStorage)."""
    return STORAGE_TYPES[_LEGACY_NAME[dtype.name]]


expose(TypedStorage, "torch.storage")
