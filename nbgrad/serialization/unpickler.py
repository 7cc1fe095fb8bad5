"""Reading a checkpoint's pickle: the weights-only unpickler and the globals it allows.

:class:`WeightsUnpickler` is torch's weights-only unpickler (torch/_weights_only_unpickler.py)
written as a subclass of pickle's Python unpickler: ``find_class`` answers only the names of an
allow-list (the rebuild functions of tensors and parameters, storage types, dtypes,
``torch.Size``, ``torch.device``, ``OrderedDict``, ``Counter``, ``set``, ``bytearray``,
``complex``, ``_codecs.encode`` for bytes, and what the user added with
:func:`add_safe_globals`), so that no other function can be reached, let alone called; its
opcode table holds only the opcodes torch's unpickler accepts, and BUILD, NEWOBJ, REDUCE, APPEND
and SETITEM act only on the objects torch lets them act on. Every refusal is a
``pickle.UnpicklingError`` with torch's text. Nothing in a file can run code through it.

:class:`FullUnpickler` (``weights_only=False``) is pickle's unpickler, reading PyTorch's names as
nbgrad's (``torch.nn.modules.linear.Linear`` -> ``nbgrad.nn.modules.linear.Linear``): it runs
what the file names, as torch.load(weights_only=False) does.
"""
from __future__ import annotations

import _compat_pickle
import importlib
import pickle
import struct
import warnings
from _codecs import encode
from collections import Counter, OrderedDict

import numpy as np

from .. import backend, dtypes
from ..nn.parameter import Parameter
from ..sparse_coo import SparseCOO
from ..storage import Storage
from ..tensor import Size, Tensor
from ..typed_storage import STORAGE_TYPES, UNSUPPORTED_STORAGES, TypedStorage

__all__ = ["WeightsUnpickler", "FullUnpickler", "add_safe_globals", "get_safe_globals",
           "clear_safe_globals", "safe_globals"]

UnpicklingError = pickle.UnpicklingError

# ---------------------------------------------------------------- rebuilding tensors


def _ints(what, values):
    if not isinstance(values, (tuple, list)) or not all(
            type(v) is int for v in values):
        raise UnpicklingError(f"{what} must be a tuple of ints, got {values!r}")
    return tuple(values)


def _rebuild_tensor(storage, storage_offset, size, stride):
    """A tensor viewing ``storage`` (torch._utils._rebuild_tensor), bounds checked first: a file
    cannot make a view reach outside its storage."""
    if not isinstance(storage, TypedStorage):
        raise UnpicklingError(f"_rebuild_tensor: expected a storage, got {type(storage)}")
    size = _ints("size", size)
    stride = _ints("stride", stride)
    if type(storage_offset) is not int or len(size) != len(stride):
        raise UnpicklingError(f"_rebuild_tensor: bad view: offset {storage_offset!r}, size "
                              f"{list(size)}, stride {list(stride)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{min(size)}: {list(size)}")
    if any(s < 0 for s in stride) or storage_offset < 0:
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {list(stride)}" if storage_offset >= 0 else
                           f"Tensor: invalid storage offset {storage_offset}")
    n = storage.size()
    need = 0 if 0 in size else storage_offset + 1 + sum((a - 1) * b for a, b in zip(size, stride))
    if need > n:
        it = storage.dtype.itemsize
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
            f"{storage_offset}, and itemsize {it} requiring a storage size of {need * it} are "
            f"out of bounds for storage of size {n * it}")
    untyped = storage._untyped_storage
    data = backend.as_strided(storage._elements(), size, stride, storage_offset)
    return Tensor._make(data, untyped, None, 0, False)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       metadata=None):
    """torch._utils._rebuild_tensor_v2 (hooks and metadata are not kept, as in torch)."""
    t = _rebuild_tensor(storage, storage_offset, size, stride)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks):
    """torch._utils._rebuild_parameter."""
    if not isinstance(data, Tensor):
        raise UnpicklingError(f"_rebuild_parameter: expected a tensor, got {type(data)}")
    return Parameter(data, bool(requires_grad))


def _set_obj_state(obj, state):
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    else:
        slots = None
    if state:
        if not isinstance(state, dict):
            raise UnpicklingError(f"bad object state {type(state)}")
        obj.__dict__.update(state)
    if slots:
        for k, v in slots.items():
            setattr(obj, k, v)
    return obj


def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    """torch._utils._rebuild_parameter_with_state (a Parameter with Python attributes)."""
    return _set_obj_state(_rebuild_parameter(data, requires_grad, backward_hooks), state)


def _rebuild_from_type_v2(func, new_type, args, state):
    """torch._tensor._rebuild_from_type_v2: a Tensor subclass, or a tensor with attributes."""
    if func not in _REBUILDERS:
        raise UnpicklingError(f"_rebuild_from_type_v2: unexpected function {func}")
    ret = func(*args)
    if type(ret) is not new_type:
        if not (isinstance(new_type, type) and issubclass(new_type, Tensor)):
            raise UnpicklingError(f"_rebuild_from_type_v2: {new_type} is not a Tensor type")
        ret = Tensor._make_subclass(new_type, ret, ret.requires_grad)
    return _set_obj_state(ret, state)


def _rebuild_sparse_tensor(layout, data):
    """torch._utils._rebuild_sparse_tensor, for the COO layout: (indices, values, size[,
    is_coalesced])."""
    if layout is not dtypes.sparse_coo:
        raise UnpicklingError(f"_rebuild_sparse_tensor: nbgrad holds sparse_coo tensors only, "
                              f"not {layout}")
    indices, values, size, *co = data
    if not (isinstance(indices, Tensor) and isinstance(values, Tensor)):
        raise UnpicklingError("_rebuild_sparse_tensor: expected indices and values tensors")
    return SparseCOO._of(np.asarray(indices._data, np.int64), values._data,
                         tuple(int(n) for n in size), bool(co and co[0]))


def _get_layout(name):
    """torch.serialization._get_layout: a layout from its name ("torch.sparse_coo")."""
    found = {"torch.strided": dtypes.strided, "torch.sparse_coo": dtypes.sparse_coo}.get(name)
    if found is None:
        raise UnpicklingError(f"_get_layout: nbgrad has no layout {name!r}")
    return found


_REBUILDERS = (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_parameter,
               _rebuild_parameter_with_state, _rebuild_sparse_tensor)


class UnsupportedStorage:
    """A storage type PyTorch has and nbgrad cannot hold (torch.BFloat16Storage ...)."""

    def __init__(self, name):
        self.name = name
        self.dtype_name = UNSUPPORTED_STORAGES[name]

    def __repr__(self):
        return f"StorageType(dtype=torch.{self.dtype_name})"


# ---------------------------------------------------------------- the allow-list

_BLOCKED_MODULES = ("sys", "os", "posix", "nt")
_ALLOWED = {}
_safe = set()  # what add_safe_globals added: objects or (object, "module.name")


def _allowed():
    """PyTorch's name of each global a weights-only load may use -> nbgrad's object."""
    if not _ALLOWED:
        _ALLOWED.update({
            "collections.OrderedDict": OrderedDict, "collections.Counter": Counter,
            "torch.nn.parameter.Parameter": Parameter, "torch.Size": Size,
            "torch.Tensor": Tensor, "torch.device": backend.device,
            "_codecs.encode": encode, "builtins.bytearray": bytearray, "builtins.set": set,
            "builtins.complex": complex,
            "torch.storage.UntypedStorage": Storage,
            "torch.storage.TypedStorage": TypedStorage,
            "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        })
        for d in dtypes.ALL + (dtypes.bfloat16,):
            _ALLOWED[f"torch.{d.name}"] = d
        _ALLOWED["torch.serialization._get_layout"] = _get_layout
        for name, cls in STORAGE_TYPES.items():
            _ALLOWED[f"torch.{name}"] = cls
        for name in UNSUPPORTED_STORAGES:
            _ALLOWED[f"torch.{name}"] = UnsupportedStorage(name)
        for f in _REBUILDERS:
            _ALLOWED[f"torch._utils.{f.__name__}"] = f
    return _ALLOWED


def _user_allowed():
    out = {}
    for f in _safe:
        if isinstance(f, tuple):
            if len(f) != 2:
                raise ValueError("Expected tuple of length 2 (global, str of callable full path),"
                                 f" but got tuple of length: {len(f)}")
            if type(f[1]) is not str:
                raise TypeError("Expected second item in tuple to be str of callable full path, "
                                f"but got: {type(f[1])}")
            out[f[1]] = f[0]
        else:
            module, name = f.__module__, f.__qualname__
            out[f"{module}.{name}"] = f
            if module == "nbgrad" or module.startswith("nbgrad."):  # named as torch in files
                out[f"torch{module[6:]}.{name}"] = f
    return out


def add_safe_globals(safe_globals):
    """Allow these globals in weights-only loads (torch.serialization.add_safe_globals).

    Args:
        safe_globals (list): classes or functions, or ``(object, "module.name")`` pairs naming
            them as the file does.
    """
    _safe.update(safe_globals)


def get_safe_globals():
    """The globals :func:`add_safe_globals` added (a list)."""
    return list(_safe)


def clear_safe_globals():
    """Forget every global :func:`add_safe_globals` added."""
    _safe.clear()


class safe_globals:
    """``with safe_globals([MyClass]):`` allows them for the loads inside (torch's context
    manager)."""

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals

    def __enter__(self):
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        _safe.difference_update(self.safe_globals)


def allowed(full_path):
    """Whether a weights-only load accepts the global ``module.name``."""
    module = full_path.rsplit(".", 1)[0]
    return module not in _BLOCKED_MODULES and (full_path in _allowed()
                                               or full_path in _user_allowed())


def _refused(full_path):
    if full_path.startswith("builtins"):
        rest = full_path[len("builtins"):]
        full_path = rest[1:] if rest[:1] == "." else "builtins" + rest
    return UnpicklingError(
        f"Unsupported global: GLOBAL {full_path} was not an allowed global by default. "
        f"Please use `torch.serialization.add_safe_globals([{full_path}])` or the "
        f"`torch.serialization.safe_globals([{full_path}])` context manager to allowlist this "
        "global if you trust this class/function.")


def _compat(module, name):
    """Python 2 names (``__builtin__``) as Python 3's, as torch's unpickler maps them."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


# ---------------------------------------------------------------- the unpicklers

class _Opcodes(dict):
    def __missing__(self, key):
        def refuse(unpickler):
            raise UnpicklingError(f"Unsupported operand {key}")
        return refuse


# the opcodes torch's weights-only unpickler reads (protocol 2 as torch.save writes it)
_TORCH_OPCODES = (
    pickle.APPEND, pickle.APPENDS, pickle.BINFLOAT, pickle.BINGET, pickle.BININT,
    pickle.BININT1, pickle.BININT2, pickle.BINPERSID, pickle.BINPUT, pickle.BINUNICODE,
    pickle.BUILD, pickle.EMPTY_DICT, pickle.EMPTY_LIST, pickle.EMPTY_SET, pickle.EMPTY_TUPLE,
    pickle.GLOBAL, pickle.LONG1, pickle.LONG_BINGET, pickle.LONG_BINPUT, pickle.MARK,
    pickle.NEWFALSE, pickle.NEWOBJ, pickle.NEWTRUE, pickle.NONE, pickle.PROTO, pickle.REDUCE,
    pickle.SETITEM, pickle.SETITEMS, pickle.SHORT_BINSTRING, pickle.STOP, pickle.TUPLE,
    pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3)


# classes NEWOBJ may make (their __new__ alone gives a whole object; torch also lets it make
# Tensors and storages, whose nbgrad objects need more than __new__: refused here)
_PLAIN_CLASSES = (OrderedDict, Counter, set, bytearray, complex, Size)


class WeightsUnpickler(pickle._Unpickler):
    """torch's weights-only unpickler (see the module docstring).

    Args:
        file: the pickle (``read``, ``readline``).
        load_storage (callable): ``(dtype, numel, key, location) -> TypedStorage``, the storage
            a persistent id names (the loader reads it from the archive once per key).
    """

    dispatch = _Opcodes({op[0]: pickle._Unpickler.dispatch[op[0]] for op in _TORCH_OPCODES})

    def __init__(self, file, load_storage, encoding="utf-8"):
        super().__init__(file, encoding=encoding)
        self._load_storage = load_storage

    def find_class(self, module, name):
        module, name = _compat(module, name)
        full = f"{module}.{name}"
        if module in _BLOCKED_MODULES:
            raise UnpicklingError(f"Trying to load unsupported GLOBAL {full} whose module "
                                  f"{module} is blocked.")
        found = _allowed().get(full, _allowed)
        if found is _allowed:
            found = _user_allowed().get(full, _allowed)
        if found is _allowed:
            raise _refused(full)
        return found

    def _known(self, obj):
        return (any(obj is v for v in _allowed().values())
                or any(obj is v for v in _user_allowed().values()))

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        if cls is Parameter:
            self.append(Parameter(*args))
        elif cls in _PLAIN_CLASSES or (isinstance(cls, type) and any(
                cls is v for v in _user_allowed().values())):
            self.append(cls.__new__(cls, *args))
        else:
            raise UnpicklingError("Can only create new object for nn.Parameter or classes "
                                  f"allowlisted via `add_safe_globals` but got {cls}")
    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if not self._known(func):
            msg = f"Trying to call reduce for unrecognized function {func}"
            if hasattr(func, "__self__"):
                msg += f" which belongs to {func.__self__}"
            raise UnpicklingError(msg)
        if not isinstance(args, tuple):
            raise UnpicklingError(f"REDUCE: arguments must be a tuple, got {type(args)}")
        self.stack[-1] = func(*args)
    dispatch[pickle.REDUCE[0]] = load_reduce

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        cls = type(inst)
        if cls is OrderedDict or cls is Parameter:
            if not isinstance(state, dict):
                raise UnpicklingError(f"Can only set the state of {cls} from a dict, got "
                                      f"{type(state)}")
            inst.__dict__.update(state)
        elif cls is not Tensor and any(cls is v for v in _user_allowed().values()):
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None:
                setstate(state)
            else:
                _set_obj_state(inst, state)
        else:
            raise UnpicklingError("Can only build Tensor, Parameter, OrderedDict or types "
                                  f"allowlisted via `add_safe_globals`, but got {cls}")
    dispatch[pickle.BUILD[0]] = load_build

    def load_append(self):
        item = self.stack.pop()
        if type(self.stack[-1]) is not list:
            raise UnpicklingError(f"Can only append to lists, but got {type(self.stack[-1])}")
        self.stack[-1].append(item)
    dispatch[pickle.APPEND[0]] = load_append

    def load_appends(self):
        items = self.pop_mark()
        if type(self.stack[-1]) is not list:
            raise UnpicklingError(f"Can only extend lists, but got {type(self.stack[-1])}")
        self.stack[-1].extend(items)
    dispatch[pickle.APPENDS[0]] = load_appends

    def _check_mapping(self, opcode):
        if type(self.stack[-1]) not in (dict, OrderedDict, Counter):
            raise UnpicklingError(f"Can only {opcode} for dict, collections.OrderedDict, "
                                  f"collections.Counter, but got {type(self.stack[-1])}")

    def load_setitem(self):
        v, k = self.stack.pop(), self.stack.pop()
        self._check_mapping("SETITEM")
        self.stack[-1][k] = v
    dispatch[pickle.SETITEM[0]] = load_setitem

    def load_setitems(self):
        items = self.pop_mark()
        self._check_mapping("SETITEMS")
        if len(items) % 2:
            raise UnpicklingError("SETITEMS: odd number of items")
        d = self.stack[-1]
        for i in range(0, len(items), 2):
            d[items[i]] = items[i + 1]
    dispatch[pickle.SETITEMS[0]] = load_setitems

    def load_binpersid(self):
        pid = self.stack.pop()
        if type(pid) is not tuple and type(pid) is not int:
            raise UnpicklingError(f"persistent_load id must be tuple or int, but got {type(pid)}")
        if type(pid) is tuple and pid and pid[0] != "storage":
            raise UnpicklingError("Only persistent_load of storage is allowed, but got "
                                  f"{type(pid[0])}")
        self.append(self.persistent_load(pid))
    dispatch[pickle.BINPERSID[0]] = load_binpersid

    def load_proto(self):
        proto = self.read(1)
        if not proto:
            raise EOFError
        self.proto = proto[0]
        if self.proto != 2:
            warnings.warn(
                f"Detected pickle protocol {self.proto} in the checkpoint, which was not the "
                "default pickle protocol used by `torch.load` (2). The weights_only Unpickler "
                "might not support all instructions implemented by this protocol, please file "
                "an issue for adding support if you encounter this.", stacklevel=2)
    dispatch[pickle.PROTO[0]] = load_proto

    def persistent_load(self, pid):
        return _storage_from_pid(pid, self._load_storage)

    def load(self):
        try:
            return super().load()
        except struct.error:  # a number cut short: the data ends inside an opcode
            raise EOFError("Ran out of input: the pickle data was truncated") from None


def _storage_from_pid(pid, load_storage):
    """The TypedStorage of ``('storage', storage_type, key, location, numel)``."""
    if type(pid) is not tuple or len(pid) != 5:
        raise UnpicklingError(f"persistent id must be ('storage', storage_type, key, location, "
                              f"numel), got {pid!r:.200}")
    _, storage_type, key, location, numel = pid
    if isinstance(location, bytes):
        location = location.decode("ascii")
    if type(key) is not str or type(location) is not str or type(numel) is not int or numel < 0:
        raise UnpicklingError(f"persistent id: bad key, location or size in {pid!r:.200}")
    if storage_type is Storage:
        dtype = dtypes.uint8
    elif isinstance(storage_type, UnsupportedStorage):
        dtype = storage_type
    elif isinstance(storage_type, type) and storage_type in STORAGE_TYPES.values():
        dtype = storage_type.dtype
    else:
        raise UnpicklingError(f"persistent id: {storage_type!r:.100} is not a storage type")
    return load_storage(dtype, numel, key, location)


class FullUnpickler(pickle.Unpickler):
    """pickle's unpickler for ``weights_only=False``: runs what the file names (as torch does),
    with PyTorch's names read as nbgrad's."""

    def __init__(self, file, load_storage, **kwargs):
        super().__init__(file, **kwargs)
        self._load_storage = load_storage

    def find_class(self, module, name):
        found = _allowed().get(f"{module}.{name}", _allowed)
        if found is not _allowed:
            return found
        if module == "torch" or module.startswith("torch."):
            nb = "nbgrad" + module[5:]
            try:
                return getattr(importlib.import_module(nb), name)
            except (ImportError, AttributeError):
                raise AttributeError(f"Can't get attribute '{name}' on <module '{module}'>: "
                                     f"nbgrad has no {nb}.{name}") from None
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return _storage_from_pid(pid, self._load_storage)
