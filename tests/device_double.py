"""A strict stand-in for cupy, so the op suite can prove without a GPU that every array call on
device data goes through `backend` (the array's own module, `xp`), never numpy directly.

`DeviceArray` wraps a numpy array and behaves as a cupy array does where host and device meet:
- implicit conversion to numpy refuses with cupy's own TypeError (`__array__`), and so does any
  numpy function or ufunc called on it (`__array_function__` / `__array_ufunc__`: stricter than
  cupy, which forwards some of those to itself — a numpy call on device data is a routing bug);
- mixing it with a numpy array in an operator raises (cupy: "Unsupported type");
- `.get()` returns the host array; `.item()`, `float()`, `int()`, `bool()` work (they sync);
- views share memory (slicing, reshape, `xp.lib.stride_tricks.as_strided`), as device views do.

`xp` (a `DoubleModule`) is the array module `backend.get_array_module` hands back for it: numpy's
functions with device arrays unwrapped on the way in (host arrays refused, as cupy refuses them,
except in `asarray`/`array`, the explicit host-to-device copies) and results wrapped on the way
out; 0-d results stay arrays, as cupy's reductions return 0-d arrays.

`install(monkeypatch)` makes `backend` take this module for cupy: device="cuda" then lands here.
"""
from __future__ import annotations

import types

import numpy as np

MESSAGE = ("Implicit conversion to a NumPy array is not allowed. "
           "Please use `.get()` to construct a NumPy array explicitly.")


def _unwrap(x, host_ok=False):
    if type(x) is DeviceArray:
        return x._a
    if isinstance(x, np.ndarray) and not host_ok:
        raise TypeError(f"Unsupported type {type(x)} (a host array mixed with device data)")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, host_ok) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v, host_ok) for k, v in x.items()}
    return x


def _wrap(x):
    if isinstance(x, np.ndarray):
        return DeviceArray(x)
    if isinstance(x, np.generic):
        return DeviceArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


class _Ptr:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


class _Dev:
    id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


class DeviceArray:
    """A device array double (see the module docstring)."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, a):
        assert isinstance(a, np.ndarray)
        self._a = a

    # ---- host boundary: explicit only --------------------------------------------------------
    def __array__(self, *args, **kw):
        raise TypeError(MESSAGE)

    def __array_function__(self, func, types, args, kwargs):
        raise TypeError(f"numpy.{func.__name__} called on a device array: " + MESSAGE)

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        # a numpy scalar on the left of an operator (np.float64(2) * d) reaches here, as in cupy;
        # anything with a host array, or a numpy function called on device data, is refused
        if method == "__call__" and not kw and all(
                type(v) is DeviceArray or isinstance(v, (np.generic, int, float, bool))
                for v in inputs) and ufunc.__name__ in _OPERATOR_UFUNCS:
            return _wrap(ufunc(*_unwrap(inputs)))
        raise TypeError(f"numpy.{ufunc.__name__} called on a device array: " + MESSAGE)

    def get(self):
        return self._a.copy()

    def item(self):
        return self._a.item()

    def tolist(self):
        raise TypeError(MESSAGE)  # cupy has tolist, but a host copy is what nbgrad must ask for

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __bool__(self):
        return bool(self._a)

    def __index__(self):
        return self._a.__index__()

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (DeviceArray(np.asarray(v)) if not isinstance(v, np.ndarray) else DeviceArray(v)
                for v in self._a)

    def __repr__(self):
        return "DeviceArray(" + repr(self._a) + ")"

    # ---- metadata -----------------------------------------------------------------------------
    shape = property(lambda s: s._a.shape)
    dtype = property(lambda s: s._a.dtype)
    ndim = property(lambda s: s._a.ndim)
    size = property(lambda s: s._a.size)
    itemsize = property(lambda s: s._a.itemsize)
    nbytes = property(lambda s: s._a.nbytes)
    strides = property(lambda s: s._a.strides)
    flags = property(lambda s: s._a.flags)
    base = property(lambda s: None if s._a.base is None else s)
    data = property(lambda s: _Ptr(s._a.__array_interface__["data"][0]))
    device = property(lambda s: _Dev())
    # cupy arrays carry it; nbgrad tells device arrays from host ones by it
    __cuda_array_interface__ = property(lambda s: s._a.__array_interface__)
    T = property(lambda s: DeviceArray(s._a.T))
    real = property(lambda s: DeviceArray(s._a.real))
    imag = property(lambda s: DeviceArray(s._a.imag))

    # ---- indexing -----------------------------------------------------------------------------
    # host index arrays (lists, numpy arrays) are accepted in indexing, as cupy copies them over
    def __getitem__(self, idx):
        return _wrap(self._a[_unwrap(idx, host_ok=True)])

    def __setitem__(self, idx, value):
        self._a[_unwrap(idx, host_ok=True)] = _unwrap(value)


def _method(name):
    def m(self, *args, **kw):
        return _wrap(getattr(self._a, name)(*_unwrap(args), **_unwrap(kw)))
    m.__name__ = name
    return m


def _binop(name):
    def m(self, other):
        r = getattr(self._a, name)(_unwrap(other))
        return NotImplemented if r is NotImplemented else _wrap(r)
    m.__name__ = name
    return m


for _n in ("reshape", "astype", "copy", "sum", "mean", "prod", "max", "min", "argmax", "argmin",
           "transpose", "swapaxes", "ravel", "flatten", "view", "fill", "squeeze", "cumsum",
           "clip", "round", "conj", "nonzero", "any", "all", "std", "var", "dot", "repeat",
           "take", "diagonal", "trace", "argsort", "sort", "put", "cumprod"):
    setattr(DeviceArray, _n, _method(_n))
for _n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
           "lshift", "rshift", "divmod"):
    for _p in ("__%s__", "__r%s__", "__i%s__"):
        if _n == "divmod" and _p == "__i%s__":
            continue
        setattr(DeviceArray, _p % _n, _binop(_p % _n))
for _n in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__neg__", "__pos__",
           "__abs__", "__invert__"):
    setattr(DeviceArray, _n, _binop(_n) if _n.startswith(("__l", "__g", "__e", "__n"))
            and _n != "__neg__" else _method(_n))
DeviceArray.__hash__ = None

_OPERATOR_UFUNCS = {"add", "subtract", "multiply", "true_divide", "divide", "floor_divide",
                    "remainder", "power", "less", "less_equal", "greater", "greater_equal",
                    "equal", "not_equal", "bitwise_and", "bitwise_or", "bitwise_xor",
                    "matmul"}
# numpy functions that take host data by design (explicit host -> device copies)
_HOST_OK = {"asarray", "array", "ascontiguousarray", "asanyarray"}


class DoubleModule(types.ModuleType):
    """numpy's namespace with device arrays in and out (the `xp` of a DeviceArray)."""

    def __init__(self, inner, name):
        super().__init__(name)
        self._inner = inner
        self._cache = {}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        cache = self.__dict__["_cache"]
        if name in cache:
            return cache[name]
        obj = getattr(self.__dict__["_inner"], name)
        if isinstance(obj, types.ModuleType):
            r = DoubleModule(obj, f"{self.__name__}.{name}")
        elif isinstance(obj, np.ufunc):
            r = _UFunc(obj)
        elif isinstance(obj, type) or not callable(obj):
            r = obj  # dtypes, scalar types, constants (xp.float32, xp.inf, xp.newaxis)
        else:
            host_ok = name in _HOST_OK

            def r(*args, _f=obj, _h=host_ok, **kw):
                out = _f(*_unwrap(args, _h), **_unwrap(kw, _h))
                if _h and isinstance(out, np.ndarray) and args and type(args[0]) is not \
                        DeviceArray and np.shares_memory(out, args[0]):
                    out = out.copy()  # host -> device is a copy, never shared memory
                return _wrap(out)
            r.__name__ = name
        cache[name] = r
        return r


class _UFunc:
    """A numpy ufunc on device arrays (call, .at, .reduce, ... as cupy's ufuncs)."""

    def __init__(self, uf):
        self._uf = uf
        self.__name__ = uf.__name__

    def __call__(self, *args, **kw):
        return _wrap(self._uf(*_unwrap(args), **_unwrap(kw)))

    def __getattr__(self, name):
        f = getattr(self._uf, name)
        if not callable(f):
            return f
        return lambda *args, **kw: _wrap(f(*_unwrap(args), **_unwrap(kw)))


xp = DoubleModule(np, "devicedouble")
xp.ndarray = DeviceArray


def get_array_module(*args):
    return xp if any(type(a) is DeviceArray for a in args) else np


class _Pool:
    def used_bytes(self):
        return 0

    total_bytes = free_bytes = n_free_blocks = get_limit = used_bytes

    def free_all_blocks(self):
        pass


xp.get_array_module = get_array_module
xp.is_available = lambda: True
xp.get_default_memory_pool = lambda: _Pool()
xp.cuda = types.SimpleNamespace(Device=lambda i=0: _Dev(),
                                runtime=types.SimpleNamespace(getDeviceCount=lambda: 1))


def _erf(a):
    import scipy.special
    return DeviceArray(np.asarray(scipy.special.erf(a._a)))


def _erfinv(a):
    import scipy.special
    return DeviceArray(np.asarray(scipy.special.erfinv(a._a)))


def install(monkeypatch):
    """Make nbgrad.backend take the double for cupy (device='cuda' arrays become DeviceArrays),
    and `cupyx.scipy.special` the double's erf/erfinv."""
    import sys

    from nbgrad import backend
    special = types.SimpleNamespace(erf=_erf, erfinv=_erfinv)
    cupyx = types.ModuleType("cupyx")
    cupyx.scipy = types.ModuleType("cupyx.scipy")
    cupyx.scipy.special = special
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    monkeypatch.setitem(sys.modules, "cupyx.scipy", cupyx.scipy)
    monkeypatch.setitem(sys.modules, "cupyx.scipy.special", special)
    monkeypatch.setattr(backend, "_cupy", xp)
    monkeypatch.setattr(backend, "_cupy_error", None)
