"""Writing PyTorch's checkpoint format: a zip archive of a protocol-2 pickle and raw storages.

The archive holds, under one folder (the file's stem, or ``archive``), as ``torch.save`` writes:
``data.pkl`` (the object, its tensors written as ``torch._utils._rebuild_tensor_v2(storage,
offset, size, stride, requires_grad, OrderedDict())`` and its storages as persistent ids
``('storage', torch.FloatStorage, key, location, numel)``), ``.format_version``,
``.storage_alignment``, ``byteorder``, one ``data/<key>`` record per storage (its bytes, aligned to
64 bytes in the file so that it can be mapped), ``version`` and ``.data/serialization_id``.
Storages are written once: views keep sharing theirs.

The pickle names PyTorch's globals (``torch.FloatStorage``, ``torch.float32``, ``torch.Size``,
``torch.nn.modules.linear.Linear`` for a whole module), never nbgrad's, so that ``torch.load``
reads it; nbgrad's loader maps them back.
"""
from __future__ import annotations

import io
import os
import pickle
import struct
import sys
import zipfile
from collections import OrderedDict

import numpy as np

from .. import backend, dtypes
from ..nn.parameter import Parameter
from ..storage import Storage
from ..tensor import Size, Tensor
from ..typed_storage import STORAGE_TYPES, TypedStorage, storage_type_of

_ALIGN = 64  # torch's storage alignment (.storage_alignment)
_PROTOCOL = 2  # torch.save's default pickle protocol


class _Global:
    """A name in PyTorch's namespace that the pickle refers to (written as a GLOBAL opcode)."""

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # (pickle asks for a callable; this one is only ever named)
        raise TypeError(f"{self.module}.{self.name} is a name in a checkpoint, not a function")


REBUILD_TENSOR_V2 = _Global("torch._utils", "_rebuild_tensor_v2")
REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
REBUILD_PARAMETER_WITH_STATE = _Global("torch._utils", "_rebuild_parameter_with_state")
REBUILD_FROM_TYPE_V2 = _Global("torch._tensor", "_rebuild_from_type_v2")
REBUILD_SPARSE = _Global("torch._utils", "_rebuild_sparse_tensor")
_GET_LAYOUT = _Global("torch.serialization", "_get_layout")
_SIZE = _Global("torch", "Size")
_DEVICE = _Global("torch", "device")

# nbgrad's classes and objects that have a PyTorch name of their own
_TORCH_NAME = {Tensor: ("torch", "Tensor"), Parameter: ("torch.nn.parameter", "Parameter"),
               Size: ("torch", "Size"), backend.device: ("torch", "device"),
               Storage: ("torch.storage", "UntypedStorage"),
               TypedStorage: ("torch.storage", "TypedStorage"),
               dtypes.dtype: ("torch", "dtype")}
_TORCH_NAME.update({cls: ("torch", name) for name, cls in STORAGE_TYPES.items()})
_TORCH_NAME.update({d: ("torch", d.name) for d in dtypes.ALL})
_TORCH_NAME[dtypes.bfloat16] = ("torch", "bfloat16")


def _torch_module(module):
    """``nbgrad.nn.modules.linear`` -> ``torch.nn.modules.linear`` (other modules unchanged)."""
    if module == "nbgrad" or module.startswith("nbgrad."):
        return "torch" + module[len("nbgrad"):]
    return module


def _layout(t):
    """(root array, offset, strides) of tensor ``t`` in elements, or None when its view cannot be
    written as one (negative or misaligned strides: the tensor is then written contiguous)."""
    data = t._data
    root = t._storage._root
    it = data.itemsize
    off = backend.data_ptr(data) - backend.data_ptr(root)
    if off < 0 or off % it or root.nbytes % it or any(s < 0 or s % it for s in data.strides):
        return None
    if root.ndim and not (root.flags.c_contiguous or root.flags.f_contiguous):
        return None
    return root, off // it, tuple(s // it for s in data.strides)


class _Writer:
    """The storages met while pickling, by root array: key, dtype, bytes to write."""

    def __init__(self):
        self.keys = {}      # id(root) -> key
        self.records = []   # [(key, root)]
        self.dtypes = {}    # key -> nbgrad dtype
        self.keep = []      # the roots, alive until written (ids stay unique)

    def storage_id(self, root, dtype):
        key = self.keys.get(id(root))
        if key is None:
            key = self.keys[id(root)] = str(len(self.keys))
            self.records.append((key, root))
            self.keep.append(root)
            self.dtypes[key] = dtype
        elif self.dtypes[key] is not dtype:
            raise RuntimeError("Cannot save multiple tensors or storages that view the same data "
                               "as different types")
        location = str(backend.device_of(root))
        if location == "cuda":
            location = "cuda:0"
        if dtype is None:  # an untyped storage: counted in bytes
            return ("storage", Storage, key, location, root.nbytes)
        return ("storage", storage_type_of(dtype), key, location, root.nbytes // dtype.itemsize)


class _Pickler(pickle._Pickler):
    """pickle's Python pickler, writing PyTorch's names and storages as persistent ids.

    (The Python pickler, not the C one: only it lets ``save_global`` write a name that is not
    where the object lives — ``torch.float32`` for nbgrad.float32.)
    """

    def __init__(self, file, writer):
        super().__init__(file, protocol=_PROTOCOL)
        self._writer = writer

    def persistent_id(self, obj):
        cls = type(obj)
        if cls is TypedStorage:
            return self._writer.storage_id(obj._untyped_storage._root, obj.dtype)
        if cls is Storage or isinstance(obj, Storage):
            return self._writer.storage_id(obj._root, None)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return _reduce_tensor(obj)
        cls = type(obj)
        if cls is dtypes.layout:  # (torch: the layout named through _get_layout)
            return (_GET_LAYOUT, (f"torch.{obj.name}",))
        if cls is _Global or cls is dtypes.dtype or cls is dtypes._unsupported_dtype:
            return obj.name  # written by save_global
        if cls is Size:
            return (_SIZE, (tuple(obj),))
        if cls is backend.device:
            return (_DEVICE, (obj.type,) if obj.index is None else (obj.type, obj.index))
        return NotImplemented

    def save_global(self, obj, name=None):
        if type(obj) is _Global:
            module, name = obj.module, obj.name
        else:
            try:
                module, name = _TORCH_NAME[obj]
            except (KeyError, TypeError):  # (TypeError: an unhashable object)
                module, name = self._importable(obj, name)
        if self.proto >= 3 or "." in name:
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode("utf-8"))
        self.memoize(obj)

    def _importable(self, obj, name):
        """(module, name) of ``obj``, nbgrad's modules under PyTorch's names; raises pickle's
        PicklingError when it cannot be found there again, as pickle does."""
        if name is None:
            name = getattr(obj, "__qualname__", None) or obj.__name__
        module = pickle.whichmodule(obj, name)
        try:
            __import__(module, level=0)
            found = sys.modules[module]
            for part in name.split("."):
                found = getattr(found, part)
        except (ImportError, KeyError, AttributeError):
            raise pickle.PicklingError(
                f"Can't pickle {obj!r}: it's not found as {module}.{name}") from None
        if found is not obj:
            raise pickle.PicklingError(
                f"Can't pickle {obj!r}: it's not the same object as {module}.{name}")
        return _torch_module(module), name


def _reduce_tensor(t):
    """torch.Tensor.__reduce_ex__'s answer for an nbgrad tensor (Parameter as torch's)."""
    if type(t) is Parameter or isinstance(t, Parameter):
        state = dict(t.__dict__)
        data = t.detach()
        if state:
            return (REBUILD_PARAMETER_WITH_STATE, (data, t.requires_grad, OrderedDict(), state))
        return (REBUILD_PARAMETER, (data, t.requires_grad, OrderedDict()))
    if t.is_sparse:  # (torch's: indices, values, size, coalesced)
        return (REBUILD_SPARSE, (t.layout, (t._indices(), t._values(), Size(t.shape),
                                            t.is_coalesced())))
    lay = _layout(t)
    if lay is None:
        data = np.ascontiguousarray(backend.to_device(t._data, backend.CPU))
        if backend.device_of(t._data).type != "cpu":
            data = backend.to_device(data, backend.device_of(t._data))
        root, offset = data, 0
        strides = tuple(s // data.itemsize for s in data.strides)
    else:
        root, offset, strides = lay
    storage = TypedStorage(wrap_storage=Storage(root, alias=True) if root is not
                           t._storage._root else t._storage, dtype=t.dtype, _internal=True)
    args = (storage, offset, tuple(t._data.shape), strides, bool(t.requires_grad),
            OrderedDict())
    if type(t) is not Tensor or t.__dict__:  # a subclass, or Python attributes (t.foo = 1)
        return (REBUILD_FROM_TYPE_V2, (REBUILD_TENSOR_V2, type(t), args, dict(t.__dict__)))
    return (REBUILD_TENSOR_V2, args)


def _record_name(f):
    if isinstance(f, (str, os.PathLike)):
        stem = os.path.splitext(os.path.basename(os.fspath(f)))[0]
        return stem or "archive"
    return "archive"


def _write_record(z, name, data, nbytes):
    """One stored (uncompressed) record whose data starts on a 64-byte boundary of the file,
    padded as torch's writer does (an extra field "FB" of 'Z's)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = nbytes
    zip64 = nbytes * 1.05 > zipfile.ZIP64_LIMIT
    start = z.fp.tell() + 30 + len(name.encode("utf-8")) + 4 + (20 if zip64 else 0)
    pad = -start % _ALIGN
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    with z.open(info, "w", force_zip64=zip64) as out:
        out.write(data)


def _serialization_id():
    return str(int.from_bytes(os.urandom(17), "little")).zfill(40)[-40:]


def save(obj, f, pickle_module=pickle, pickle_protocol=_PROTOCOL,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Save ``obj`` in PyTorch's checkpoint format (torch.save): ``torch.load`` reads the file.

    See :func:`nbgrad.save`.
    """
    if not _use_new_zipfile_serialization:
        raise RuntimeError("nbgrad.save writes only the zip format (torch.save's default since "
                           "PyTorch 1.6); _use_new_zipfile_serialization=False is not supported")
    if isinstance(f, (str, os.PathLike)):
        f = os.fspath(f)
    elif not hasattr(f, "write"):
        raise AttributeError("expected 'f' to be string, path, or a file-like object with a "
                             "'write' attribute")
    writer = _Writer()
    buf = io.BytesIO()
    _Pickler(buf, writer).dump(obj)
    prefix = _record_name(f)
    close = isinstance(f, str)
    fh = open(f, "wb") if close else f
    try:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            records = [("data.pkl", buf.getbuffer()), (".format_version", b"1"),
                       (".storage_alignment", str(_ALIGN).encode())]
            if not _disable_byteorder_record:
                records.append(("byteorder", sys.byteorder.encode()))
            for name, data in records:
                _write_record(z, f"{prefix}/{name}", data, len(data))
            for key, root in writer.records:
                flat = backend.as_strided(root, (root.size,), (1,), 0) if root.ndim != 1 or \
                    root.strides != (root.itemsize,) else root
                flat = backend.to_device(flat, backend.CPU)
                data = memoryview(np.ascontiguousarray(flat)).cast("B")
                _write_record(z, f"{prefix}/data/{key}", data, data.nbytes)
            for name, data in (("version", b"3\n"),
                               (".data/serialization_id", _serialization_id().encode())):
                _write_record(z, f"{prefix}/{name}", data, len(data))
    finally:
        if close:
            fh.close()
