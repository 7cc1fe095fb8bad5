"""Random numbers (torch.random and torch's factories): the Generator and the global seed, rand /
randn / randint / randperm / *_like and multinomial, and the samplers nbgrad/sampling.py uses.

Every function takes ``generator=`` (default: the global one that ``nbgrad.manual_seed`` seeds).
Samples come from numpy's PCG64, drawn on the CPU then moved to the tensor's device: the
distributions, dtypes, ranges and errors are PyTorch's, the exact numbers are not. Nothing here
records a graph (this module sits below autograd: gradcheck draws its random vectors here); the
samplers whose parameters are tensors, and the in-place fills, are in nbgrad/sampling.py.
"""
from __future__ import annotations

import json

import numpy as np

from . import backend, dtypes
from .creation import _finish, _size, size_arg, write_out
from .tensor import Tensor

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "rand", "randn", "randint", "randperm", "rand_like",
           "randn_like", "randint_like", "multinomial"]


class Generator:
    """A random number generator (torch.Generator) over numpy's PCG64.

    ``Generator().manual_seed(0)`` returns the generator, so it can be built and seeded in one
    expression; ``get_state()`` is a uint8 tensor that ``set_state`` accepts back.
    """

    def __init__(self, device="cpu"):
        self.device = backend.device(device)
        self.manual_seed(67280421310721)

    def manual_seed(self, seed):
        """Reseed (any int; negative seeds wrap as in torch); returns self."""
        self._seed = int(seed) % (2 ** 64)
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self):
        """Reseed from OS entropy; returns the new seed."""
        s = int(np.random.SeedSequence().entropy % (2 ** 63))
        self.manual_seed(s)
        return s

    def initial_seed(self):
        """The seed given last to manual_seed (or seed)."""
        return self._seed

    def get_state(self):
        """The generator's state as a uint8 tensor (torch.Generator.get_state)."""
        state = {"seed": self._seed, "bit_generator": self._rng.bit_generator.state}
        return Tensor._make_fresh(np.frombuffer(json.dumps(state).encode(), np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state from :meth:`get_state`; returns self.

        Raises:
            TypeError: not a uint8 tensor. ValueError: not a state this class wrote.
        """
        if not isinstance(new_state, Tensor) or new_state.dtype is not dtypes.uint8:
            raise TypeError(f"expected a torch.ByteTensor, but got {type(new_state).__name__}")
        try:
            state = json.loads(bytes(np.asarray(new_state._data)).decode())
            self._seed = state["seed"]
            self._rng.bit_generator.state = state["bit_generator"]
        except (ValueError, KeyError, TypeError):
            raise ValueError("set_state: not a state returned by nbgrad's "
                             "Generator.get_state()") from None
        return self

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


def get_rng_state():
    """The default generator's state, a uint8 tensor (torch.get_rng_state)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator from :func:`get_rng_state` (torch.set_rng_state)."""
    default_generator.set_state(new_state)


def _gen(generator):
    return default_generator if generator is None else generator


def _with_out(name, make, out):
    """``make()``, or with ``out=`` PyTorch's out semantics (written into out, resized if
    needed); for factories, whose inputs are numbers."""
    return make() if out is None else write_out(out, make(), name)


# ---- PyTorch's texts for dtypes a kernel does not support ---------------------------------------
_SCALAR = {"float16": "Half", "float32": "Float", "float64": "Double", "int64": "Long",
           "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}
_CTYPE = {"float16": "c10::Half", "int64": "long int", "int32": "int", "int16": "short int",
          "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}


def _np_dt(dtype, default=None):
    return dtypes.to_np(dtype) or default or dtypes.default_np()


def _require_float(np_dt, kernel):
    if np_dt.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{_SCALAR[np_dt.name]}'")


def _continuous_only(np_dt, name):
    if np_dt.kind != "f":
        raise RuntimeError(f"{name} distribution is a continuous probability distribution. dtype "
                           f"must be a floating point but you specified {_SCALAR[np_dt.name]}")


def _num(x):
    """A number as PyTorch's C++ prints it in messages (2, 0.5, -1)."""
    return f"{x:g}" if isinstance(x, float) else str(x)


# ---- samplers: numpy arrays on the CPU, of the requested dtype --------------------------------
def _uniform01(g, shape, np_dt):
    """Uniform [0, 1) samples of dtype np_dt (float16 drawn in float32, kept below 1)."""
    if np_dt in (np.float32, np.float64):
        return g.random(shape, dtype=np_dt.type)
    u = g.random(shape, dtype=np.float32).astype(np_dt)
    return np.minimum(u, np.nextafter(np_dt.type(1), np_dt.type(0)))


def _standard_normal(g, shape, np_dt):
    if np_dt in (np.float32, np.float64):
        return g.standard_normal(shape, dtype=np_dt.type)
    return g.standard_normal(shape, dtype=np.float32).astype(np_dt)


def _int_bounds(np_dt):
    """The inclusive range random_ and randint may draw from for np_dt."""
    if np_dt.kind == "b":
        return 0, 1
    if np_dt.kind == "f":
        digits = np.finfo(np_dt).nmant + 1
        return -(2 ** digits), 2 ** digits
    info = np.iinfo(np_dt)
    return int(info.min), int(info.max)


def _integers(g, low, high, shape, np_dt):
    """Integers in [low, high) as np_dt, with PyTorch's checks and texts (random_, randint)."""
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    lo, hi = _int_bounds(np_dt)
    if np_dt.kind != "f" or np_dt == np.float16:
        name = _CTYPE[np_dt.name]
        if not lo <= low <= hi:
            raise RuntimeError(f"from is out of bounds for {name}")
        if not lo <= high - 1 <= hi:
            raise RuntimeError(f"to - 1 is out of bounds for {name}")
    return g.integers(low, high, shape, dtype=np.int64, endpoint=False).astype(np_dt)


# ---- factories ----------------------------------------------------------------------------------
def rand(*shape, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """Uniform samples from [0, 1) of the given size (torch.rand); dtype default float32.

    Raises:
        NotImplementedError: a non-floating dtype (PyTorch's text).
    """
    size = size_arg("rand", shape, size)
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype)
    _require_float(dt, "check_uniform_bounds")
    return _with_out("rand", lambda: _finish(_uniform01(_gen(generator), _size(size), dt), device,
                                             requires_grad), out)


def randn(*shape, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False):
    """Standard normal samples of the given size (torch.randn); dtype default float32.

    Raises:
        NotImplementedError: a non-floating dtype (PyTorch's text).
    """
    size = size_arg("randn", shape, size)
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype)
    _require_float(dt, "normal_kernel_cpu")
    return _with_out("randn", lambda: _finish(_standard_normal(_gen(generator), _size(size), dt),
                                              device, requires_grad), out)


_RANDINT_SIGNATURES = (
    " * (int high, tuple of ints size, *, torch.Generator generator, Tensor out = None, "
    "torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, "
    "bool pin_memory = False, bool requires_grad = False)\n"
    " * (int low, int high, tuple of ints size, *, torch.Generator generator, Tensor out = None, "
    "torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, "
    "bool pin_memory = False, bool requires_grad = False)")


def randint(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False):
    """Integers drawn uniformly from [low, high) (torch.randint): ``randint(high, size)`` or
    ``randint(low, high, size)``; size a tuple. dtype default int64 (floats and bool allowed).

    Raises:
        TypeError: PyTorch's texts for a missing or non-tuple size, or float bounds.
        RuntimeError: low >= high, bounds outside the dtype, requires_grad on an integer dtype.
    """
    if size is not None:
        args = args + (size,)
    if len(args) not in (2, 3) or any(not isinstance(a, (int, np.integer)) or
                                      isinstance(a, bool) for a in args[:-1]):
        got = ", ".join(type(a).__name__ for a in args)
        if len(args) in (2, 3) and isinstance(args[-1], (int, np.integer)) and \
                all(isinstance(a, (int, np.integer)) for a in args):
            if len(args) == 2:
                raise TypeError("randint(): argument 'size' (position 2) must be tuple of ints, "
                                "not int")
        raise TypeError(f"randint() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:\n{_RANDINT_SIGNATURES}")
    *bounds, shape = args
    if not isinstance(shape, (tuple, list)) and not hasattr(shape, "__iter__"):
        raise TypeError(f"randint(): argument 'size' (position {len(args)}) must be tuple of "
                        f"ints, not {type(shape).__name__}")
    low, high = (0, int(bounds[0])) if len(bounds) == 1 else (int(bounds[0]), int(bounds[1]))
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype, np.dtype(np.int64))
    return _with_out("randint", lambda: _finish(
        _integers(_gen(generator), low, high, _size(tuple(shape)), dt), device, requires_grad),
        out)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of 0 .. n-1 (torch.randperm); dtype default int64.

    Raises:
        RuntimeError: n < 0 (PyTorch's text).
    """
    n = _size((n,))[0]
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype, np.dtype(np.int64))
    return _with_out("randperm", lambda: _finish(_gen(generator).permutation(n).astype(dt),
                                                 device, requires_grad), out)


def _like(input, dtype, device):
    return (tuple(input.shape), dtype or input.dtype,
            device if device is not None else input.device)


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None,
              requires_grad=False, memory_format=None):
    """Uniform [0, 1) samples of input's shape, dtype and device (torch.rand_like)."""
    shape, dt, dev = _like(input, dtype, device)
    return rand(shape, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None,
               requires_grad=False, memory_format=None):
    """Standard normal samples of input's shape, dtype and device (torch.randn_like)."""
    shape, dt, dev = _like(input, dtype, device)
    return randn(shape, generator=generator, dtype=dt, device=dev, requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None,
                 device=None, requires_grad=False, memory_format=None):
    """Integers in [low, high) of input's shape, dtype and device (torch.randint_like):
    ``randint_like(x, high)`` or ``randint_like(x, low, high)``.

    Raises:
        RuntimeError: low >= high, or bounds outside the dtype.
    """
    if high is None:
        low, high = 0, low
    shape, dt, dev = _like(input, dtype, device)
    return randint(int(low), int(high), shape, generator=generator, dtype=dt, device=dev,
                   requires_grad=requires_grad)


# ---- parameters given as tensors, results placed on their device (sampling.py uses these too)
def _device_values(arr, like):
    return arr if like.device.type == "cpu" else backend.to_device(arr, like.device)


def _host(t):
    return np.asarray(backend.to_device(t._data, backend.CPU))


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices sampled from the categories of each row of ``input`` (torch.multinomial).

    Args:
        input: (C,) or (N, C) non-negative weights (need not sum to 1), floating dtype.
        num_samples (int): samples per row; without replacement at most C (categories of
            weight 0 come last, as in torch).
        replacement (bool): draw with replacement.

    Returns:
        int64 tensor (num_samples,) or (N, num_samples); never requires grad.

    Raises:
        RuntimeError: PyTorch's texts for a non-floating input, other ranks, num_samples <= 0,
            too many samples without replacement, negative / inf / nan weights, a zero row.
    """
    if out is not None:
        if out._data.dtype != np.int64:
            raise RuntimeError(f"multinomial expects Long tensor out, got: "
                               f"{_SCALAR[out._data.dtype.name]}")
        return _with_out("multinomial", lambda: multinomial(input, num_samples, replacement,
                                                            generator=generator), out)
    dt = input._data.dtype
    if dt.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{_SCALAR[dt.name]}")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    n_cat = input.shape[-1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > n_cat:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    p = _host(input).astype(np.float64).reshape(-1, n_cat)
    if not np.all(np.isfinite(p) & (p >= 0)):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    total = p.sum(axis=1, keepdims=True)
    if np.any(total <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    g = _gen(generator)
    if replacement:  # inverse CDF: a category of weight 0 spans an empty interval
        cdf = np.cumsum(p, axis=1) / total
        cdf[:, -1] = 1.0
        u = g.random((p.shape[0], num_samples))
        idx = np.stack([np.searchsorted(c, r, side="right") for c, r in zip(cdf, u)])
    else:  # exponential race: the k largest p / Exp(1) are k draws without replacement
        keys = p / g.exponential(1.0, p.shape)
        idx = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    idx = idx.astype(np.int64).reshape(tuple(input.shape[:-1]) + (num_samples,))
    return Tensor._make_fresh(_device_values(idx, input))
