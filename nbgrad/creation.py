"""Creating tensors (torch.tensor, zeros, ones, arange, rand, ...) and the random generator."""
from __future__ import annotations

import numpy as np

from . import backend, dtypes
from .storage import Storage
from .tensor import Size, Tensor, _init


class Generator:
    """A random number generator (torch.Generator) over numpy's PCG64; `manual_seed(seed)`."""

    def __init__(self, device="cpu"):
        self.device = backend.device(device)
        self._seed = 67280421310721
        self._rng = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed):
        self._seed = int(seed)
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self):
        s = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return self._rng.bit_generator.state

    def set_state(self, state):
        self._rng.bit_generator.state = state

    def __getattr__(self, name):  # uniform, normal, random, permutation, integers...
        return getattr(self._rng, name)


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator (torch.manual_seed); returns it."""
    return default_generator.manual_seed(seed)


def seed():
    """Seed the default generator from OS entropy; returns the seed (torch.seed)."""
    return default_generator.seed()


def initial_seed():
    """The default generator's seed (torch.initial_seed)."""
    return default_generator.initial_seed()


def _gen(generator):
    return default_generator if generator is None else generator


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)):
            raise TypeError(f"size must be a tuple of ints, but got {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(size)}")
    return tuple(int(s) for s in size)


def _dev(device):
    return backend.CPU if device is None else (device if isinstance(device, backend.device)
                                               else backend.device(device))


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
    if dt is None:
        dt = dtypes.infer_np_dtype(data)
    if hasattr(data, "__cuda_array_interface__"):
        arr = data.astype(dt, copy=copy)
    else:
        try:
            arr = np.array(data, dtype=dt, copy=copy) if copy else np.asarray(data, dtype=dt)
        except ValueError as e:
            raise ValueError(f"could not make a tensor from this data: {e}") from None
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
    arr = _to_array(data, dtype, None, copy=True)
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
    return Tensor._make_fresh(ndarray)


def from_dlpack(ext):
    """A tensor sharing memory with a DLPack-capable array (torch.from_dlpack)."""
    if isinstance(ext, Tensor):
        return ext.detach()
    if hasattr(ext, "__cuda_array_interface__") or type(ext).__module__.startswith("cupy"):
        xp = backend.cupy_module()
        return Tensor._make_fresh(xp.from_dlpack(ext))
    return Tensor._make_fresh(np.from_dlpack(ext))


def _filled(fill):
    def f(*size, dtype=None, device=None, requires_grad=False, out=None):
        if fill is not np.empty and any(isinstance(s, int) and s < 0 for s in _flat(size)):
            raise RuntimeError(f"{fill.__name__}: Dimension size must be non-negative.")
        size = _size(size)
        dt = dtypes.to_np(dtype) or dtypes.default_np()
        arr = fill(size, dt)
        return _finish(arr, device, requires_grad)
    return f


zeros = _filled(np.zeros)
ones = _filled(np.ones)
empty = _filled(np.empty)
zeros.__doc__ = "Tensor of zeros of the given size (torch.zeros); dtype default float32."
ones.__doc__ = "Tensor of ones of the given size (torch.ones); dtype default float32."
empty.__doc__ = "Uninitialised tensor of the given size (torch.empty)."


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """Tensor of `size` filled with `fill_value` (torch.full); dtype inferred from the value."""
    if dtype is None:
        dtype = (dtypes.bool_ if isinstance(fill_value, bool) else dtypes.int64
                 if isinstance(fill_value, int) else None)
    dt = dtypes.to_np(dtype) or dtypes.default_np()
    return _finish(np.full(_size((size,) if isinstance(size, int) else tuple(size)), fill_value,
                           dtype=dt), device, requires_grad)


def _like(fn):
    def f(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
        return fn(*input.shape, dtype=dtype or input.dtype, device=device or input.device,
                  requires_grad=requires_grad)
    return f


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    """Tensor of input's shape filled with `fill_value` (torch.full_like)."""
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Values start, start+step, ... < end (torch.arange); int64 unless a float is given."""
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if dtype is None:
        dtype = dtypes.get_default_dtype() if any(isinstance(v, float) for v in vals) else \
            dtypes.int64
    dt = dtypes.to_np(dtype)
    return _finish(np.arange(*vals).astype(dt), device, requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """`steps` evenly spaced values from start to end inclusive (torch.linspace)."""
    dt = dtypes.to_np(dtype) or dtypes.default_np()
    return _finish(np.linspace(start, end, steps).astype(dt), device, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """`steps` values base ** linspace(start, end) (torch.logspace)."""
    dt = dtypes.to_np(dtype) or dtypes.default_np()
    return _finish(np.logspace(start, end, steps, base=base).astype(dt), device, requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """Identity matrix (n, m) (torch.eye)."""
    dt = dtypes.to_np(dtype) or dtypes.default_np()
    return _finish(np.eye(n, m, dtype=dt), device, requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform [0, 1) samples (torch.rand); reproducible after manual_seed."""
    dt = dtypes.to_np(dtype) or dtypes.default_np()
    return _finish(_gen(generator).random(_size(size)).astype(dt), device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples (torch.randn); reproducible after manual_seed."""
    dt = dtypes.to_np(dtype) or dtypes.default_np()
    return _finish(_gen(generator).standard_normal(_size(size)).astype(dt), device,
                   requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Integers in [low, high) (torch.randint(low=0, high, size)); int64."""
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    dt = dtypes.to_np(dtype) or np.dtype(np.int64)
    return _finish(_gen(generator).integers(low, high, _size((size,) if isinstance(size, int)
                                                             else tuple(size))).astype(dt),
                   device, requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 (torch.randperm); int64."""
    dt = dtypes.to_np(dtype) or np.dtype(np.int64)
    return _finish(_gen(generator).permutation(n).astype(dt), device, requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False):
    """Uniform [0, 1) samples of input's shape (torch.rand_like)."""
    return rand(*input.shape, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def randn_like(input, *, dtype=None, device=None, requires_grad=False):
    """Standard normal samples of input's shape (torch.randn_like)."""
    return randn(*input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def randint_like(input, low, high=None, *, dtype=None, device=None):
    """Integers in [low, high) of input's shape (torch.randint_like)."""
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype,
                   device=device or input.device)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Sample indices from the rows of a probability tensor (torch.multinomial); int64."""
    p = np.asarray(input._data, dtype=np.float64)
    g = _gen(generator)
    if p.ndim == 1:
        p = p / p.sum()
        return Tensor._make_fresh(g.choice(len(p), num_samples, replace=replacement,
                                           p=p).astype(np.int64))
    rows = [g.choice(p.shape[1], num_samples, replace=replacement, p=r / r.sum()) for r in p]
    return Tensor._make_fresh(np.stack(rows).astype(np.int64))


def tensor_init(self, *args, dtype=None, device=None, requires_grad=False):
    """`Tensor(data)` copies data as float32 (the default dtype), `Tensor(2, 3)` is an
    uninitialised (2, 3) tensor, like PyTorch's legacy constructor (bound as Tensor.__init__)."""
    if args and all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        arr = np.empty(args, dtype=dtypes.to_np(dtype) or dtypes.default_np())
    else:
        data = args[0] if args else []
        arr = _to_array(data, dtype or (None if isinstance(data, (Tensor, np.ndarray))
                                        else dtypes.get_default_dtype()), device, copy=True)
    _init(self, arr, Storage(arr), None, 0, False)
    if requires_grad:
        self.requires_grad_(True)
