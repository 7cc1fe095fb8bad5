"""Creating tensors (torch.tensor, zeros, ones, arange, ...); random ones are in random.py."""
from __future__ import annotations

import math
import warnings

import numpy as np

from . import _torch_errors, backend, dtypes
from .naming import named
from .storage import Storage
from .tensor import _PROV, Size, Tensor, _init, _mark_cut


def _dim_int(s):
    """One size entry: ints, and (as PyTorch takes them through __index__) one-element integer
    tensors; a bool tensor gets PyTorch's RuntimeError."""
    if isinstance(s, Tensor) and s.numel() == 1:
        if s.dtype is dtypes.bool_:
            raise RuntimeError("Expected scalar.isIntegral( false) to be true, but got false.  "
                               "(Could this error message be improved?  If so, please report an "
                               "enhancement request to PyTorch.)")
        if not s.is_floating_point():
            return int(s.item())
    if not isinstance(s, (int, np.integer)):
        raise TypeError(f"size must be a tuple of ints, but got {type(s).__name__}")
    return s


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    size = tuple(_dim_int(s) for s in size)
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(size)}")
    return tuple(int(s) for s in size)


def _plain_dims(size):
    """`size` (a factory's positional sizes) as a tuple when it is the common call, one
    non-negative Python int per dimension, or a tuple/list of them, or torch.Size; None
    otherwise (then `_size` parses and checks it). One loop instead of `_size`'s generators:
    `nbgrad.ones(2, 2)` took 3-19 us against torch's 0.8 in its argument parsing."""
    if len(size) == 1 and type(size[0]) in (tuple, list, Size):
        size = size[0]
    for s in size:
        if type(s) is not int or s < 0:
            return None
    return tuple(size)


def _dev(device):
    if device is None:
        return backend.get_default_device()  # nbgrad.set_default_device / `with device(...)`
    return device if isinstance(device, backend.device) else backend.device(device)


def _finish(arr, device, requires_grad):
    dev = _dev(device)
    if dev.type != "cpu":
        arr = backend.to_device(arr, dev)
    t = Tensor._make_fresh(arr)
    if requires_grad:
        if arr.dtype.kind != "f":
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        t._requires_grad = True
    return t


def _to_array(data, dtype=None, device=None, copy=True):
    dt = dtypes.to_np(dtype)
    if isinstance(data, Tensor):
        arr = data._data
        arr = arr.astype(dt) if dt is not None and arr.dtype != dt else (arr.copy() if copy
                                                                         else arr)
        return backend.to_device(arr, _dev(device)) if device is not None else arr
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
        data = _nested_to_np(data)
    if isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    if hasattr(data, "__cuda_array_interface__"):
        arr = data.astype(dt or dtypes.infer_np_dtype(data), copy=copy)
    else:
        try:
            dt = dt or dtypes.infer_np_dtype(data)
            arr = np.array(data, dtype=dt, copy=copy) if copy else np.asarray(data, dtype=dt)
        except (ValueError, TypeError) as e:  # ragged, None, str: torch's words for it
            raise _torch_errors.data_error(data, e) from None
        if not arr.flags.writeable:
            arr = arr.copy()
    if device is not None and _dev(device).type != "cpu":
        arr = backend.to_device(arr, _dev(device))
    return arr


def _flat(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    else:
        yield x


def _nested_to_np(x):
    if isinstance(x, (list, tuple)):
        return [_nested_to_np(y) for y in x]
    if isinstance(x, Tensor):
        if x._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return x.item()
    return x


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new leaf tensor copying `data` (torch.tensor). Floats -> default dtype, ints -> int64.

    Raises:
        RuntimeError: requires_grad on a non-floating dtype.
    """
    arr = _to_array(data, dtypes.dtype_arg("tensor", dtype), None, copy=True)
    return _finish(arr, device, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like tensor() but shares memory with a numpy array / Tensor when it can (torch.as_tensor)."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device) if (dtype or device) else data
    if isinstance(data, np.ndarray) and (dtype is None or data.dtype == dtypes.to_np(dtype)) \
            and device in (None, "cpu"):
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray` (torch.from_numpy); writes show in both."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    dtypes.from_np(ndarray.dtype)
    t = Tensor._make_fresh(ndarray)
    if _PROV[0]:  # a numpy round trip may have cut a graph: where (the notebook names it)
        _mark_cut(t, "from_numpy")
    return t


def from_dlpack(ext):
    """A tensor sharing memory with a DLPack-capable array (torch.from_dlpack)."""
    if isinstance(ext, Tensor):
        return ext.detach()
    if hasattr(ext, "__cuda_array_interface__") or type(ext).__module__.startswith("cupy"):
        xp = backend.cupy_module()
        return Tensor._make_fresh(xp.from_dlpack(ext))
    return Tensor._make_fresh(np.from_dlpack(ext))


def size_arg(fn, shape, size_kw):
    """The size of a factory called ``fn(*size)`` or ``fn(size=...)`` (torch.zeros(size=(2, 3))).

    Raises:
        TypeError: neither or both given, or ``size=`` not a tuple/list/Size (PyTorch's
            texts).
    """
    if size_kw is None:
        if not shape:
            raise TypeError(f'{fn}() missing 1 required positional arguments: "size"')
        return shape
    if shape:
        raise TypeError(f"{fn}() got multiple values for argument 'size'")
    if not isinstance(size_kw, (tuple, list, Size)):
        raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, not "
                        f"{type(size_kw).__name__}")
    return (tuple(size_kw),)


def _filled(fill):
    def f(*shape, size=None, dtype=None, device=None, requires_grad=False, out=None):
        size = size_arg(fill.__name__, shape, size)
        dims = _plain_dims(size)
        if dims is None:
            if any(isinstance(s, int) and s < 0 for s in _flat(size)):
                dims = list(_flat(size))
                bad = next(s for s in dims if isinstance(s, int) and s < 0)
                raise RuntimeError("zeros: Dimension size must be non-negative." if fill is np.zeros
                                   else f"Trying to create tensor with negative dimension {bad}: "
                                   f"{dims}")
            dims = _size(size)
        size = dims
        dt = dtypes.dtype_arg(fill.__name__, dtype) or dtypes.default_np()
        arr = _allocated(fill, size, dt)
        return _finish(arr, device, requires_grad)
    return named(f, fill.__name__)


def _allocated(fill, size, dt):
    """fill(size, dt), numpy's MemoryError turned into torch's RuntimeError (its text)."""
    try:
        return fill(size, dt)
    except MemoryError:
        nbytes = int(np.prod(size, dtype=object)) * np.dtype(dt).itemsize
        raise RuntimeError(f"[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
                           f"can't allocate memory: you tried to allocate {nbytes} bytes. "
                           f"Error code 12 (Cannot allocate memory)") from None


zeros = _filled(np.zeros)
ones = _filled(np.ones)
empty = _filled(np.empty)
zeros.__doc__ = "Tensor of zeros of the given size (torch.zeros); dtype default float32."
ones.__doc__ = "Tensor of ones of the given size (torch.ones); dtype default float32."
empty.__doc__ = "Uninitialised tensor of the given size (torch.empty)."


def _check_number(fn, v):
    import numbers
    if not isinstance(v, (numbers.Number, np.generic, Tensor)):
        raise TypeError(f"{fn}(): argument 'fill_value' (position 2) must be Number, not "
                        f"{type(v).__name__}")


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """Tensor of `size` filled with `fill_value` (torch.full); dtype inferred from the value.
    TypeError when `fill_value` is not a number (torch's text)."""
    _check_number("full", fill_value)
    if dtype is None:
        dtype = (dtypes.bool_ if isinstance(fill_value, bool) else dtypes.int64
                 if isinstance(fill_value, int) else None)
    dt = dtypes.dtype_arg("full", dtype) or dtypes.default_np()
    return _finish(np.full(_size((size,) if isinstance(size, int) else tuple(size)), fill_value,
                           dtype=dt), device, requires_grad)


def _like(fn):
    def f(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
        return fn(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device,
                  requires_grad=requires_grad)
    return named(f, fn.__name__ + "_like")


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    """Tensor of input's shape filled with `fill_value` (torch.full_like); TypeError when
    `fill_value` is not a number (torch's text)."""
    _check_number("full_like", fill_value)
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Values start, start+step, ... < end (torch.arange); int64 unless a float is given."""
    given = (start,) if end is None else (start, end) if step == 1 else (start, end, step)
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    _check_range(*vals)
    if dtype is None:
        dtype = dtypes.get_default_dtype() if any(isinstance(v, float) for v in vals) else \
            dtypes.int64
    dt = dtypes.dtype_arg("arange", dtype, given)
    return _finish(np.arange(*vals).astype(dt), device, requires_grad)


def _check_range(start, end, step):
    """torch's checks of arange's arguments (RuntimeError, its texts)."""
    for v in (start, end):
        if isinstance(v, float) and not math.isfinite(v):
            raise RuntimeError(f"unsupported range: {_num(start)} -> {_num(end)}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")


def _num(v):
    """A number as C++ prints it in torch's texts: 0, 1.5, inf, nan."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def deprecated_range(start, end, step=1, *, dtype=None, device=None, requires_grad=False):
    """Values start, start+step, ... up to and including ``end`` (torch.range, deprecated in
    PyTorch for torch.arange, with its UserWarning); dtype default float32 even for ints.

    Raises:
        RuntimeError: step 0, or a step of the wrong sign (PyTorch's texts).
    """
    warnings.warn("torch.range is deprecated and will be removed in a future release because its "
                  "behavior is inconsistent with Python's range builtin. Instead, use torch.arange, "
                  "which produces values in [start, end).", UserWarning, stacklevel=2)
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    _check_range(start, end, step)
    n = int(np.floor((end - start) / step)) + 1
    dt = dtypes.to_np(dtype) or dtypes.default_np()
    return _finish((start + step * np.arange(n)).astype(dt), device, requires_grad)


deprecated_range.__name__ = deprecated_range.__qualname__ = "range"  # exported as nbgrad.range


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """`steps` evenly spaced values from start to end inclusive (torch.linspace)."""
    _check_steps(steps)
    dt = dtypes.dtype_arg("linspace", dtype, (start, end, steps)) or dtypes.default_np()
    return _finish(np.linspace(start, end, steps).astype(dt), device, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """`steps` values base ** linspace(start, end) (torch.logspace)."""
    _check_steps(steps)
    dt = dtypes.dtype_arg("logspace", dtype, (start, end, steps)) or dtypes.default_np()
    return _finish(np.logspace(start, end, steps, base=base).astype(dt), device, requires_grad)


def _check_steps(steps):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """Identity matrix (n, m) (torch.eye)."""
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    dt = dtypes.dtype_arg("eye", dtype, (n,) if m is None else (n, m)) or dtypes.default_np()
    return _finish(np.eye(n, m, dtype=dt), device, requires_grad)


def tensor_init(self, *args, dtype=None, device=None, requires_grad=False):
    """PyTorch's legacy constructor (bound as Tensor.__init__): `Tensor(data)` copies a list or
    an ndarray as float32 (the default dtype, whatever the array's dtype), `Tensor(2, 3)` is an
    uninitialised (2, 3) tensor. (`Tensor(t)` of a tensor is functions.legacy_init's alias.)"""
    if args and all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        arr = np.empty(args, dtype=dtypes.to_np(dtype) or dtypes.default_np())
    else:
        data = args[0] if args else []
        arr = _to_array(data, dtype or (None if isinstance(data, Tensor)
                                        else dtypes.get_default_dtype()), device, copy=True)
    _init(self, arr, Storage(arr), None, 0, False)
    if requires_grad:
        self.requires_grad_(True)


def write_out(out, result, name):
    """Write ``result`` into ``out`` as PyTorch's ``out=`` does: resized (with PyTorch's warning
    when it had elements) to the result's shape, cast to out's dtype, one version bump; returns
    out. The caller has refused inputs that require grad."""
    if out._data.shape != result._data.shape:
        if out._data.size:
            import warnings
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out._data.shape)}, which does not match the required output "
                          f"shape {list(result._data.shape)}. This behavior is deprecated.",
                          UserWarning, stacklevel=4)
        out._data = np.empty_like(result._data, dtype=out._data.dtype)
        out._storage = Storage(out._data)
    out._data[...] = result._data
    out._storage.bump(name)
    return out
