"""Random numbers (torch.random and torch's factories): the Generator and the global seed, rand /
randn / randint / randperm / *_like and multinomial, and the samplers nbgrad/sampling.py uses.

Every function takes ``generator=`` (default: the global one that ``nbgrad.manual_seed`` seeds).
The stream is PyTorch's CPU stream, bit for bit: a Generator is torch's mt19937 (seeded as
``std::mt19937(seed & 0xffffffff)``, numpy's legacy MT19937 seeding, whose ``random_raw`` gives
the same 32-bit words in bulk), and each sampler spends the words as torch 2.13 CPU does
(nbgrad/random_kernels.py: which words, which arithmetic). So ``manual_seed(0); randn(3)``
prints torch's numbers, and ``get_rng_state()`` is torch's 5056-byte state, which
``torch.set_rng_state`` accepts, and the other way round.

Tensors on a cupy device are drawn from this same CPU stream and moved (cupy's own generator,
which ``nbgrad.cuda.manual_seed`` seeds, is not used for them): torch's CUDA generator (Philox,
one per device) is not reproduced, so their numbers differ from torch's on CUDA, and, unlike in
torch, a draw on the GPU advances the CPU stream.

Nothing here records a graph (this module sits below autograd: gradcheck draws its random
vectors here); the samplers whose parameters are tensors, and the in-place fills, are in
nbgrad/sampling.py.
"""
from __future__ import annotations

import contextlib
import math
import os

import numpy as np

from . import backend, dtypes
from . import random_kernels as K
from .creation import _finish, _size, size_arg, write_out
from .tensor import Tensor

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "fork_rng", "rand", "randn", "randint", "randperm",
           "rand_like", "randn_like", "randint_like", "multinomial"]

DEFAULT_SEED = 67280421310721  # torch's default_rng_seed_val: the seed of a new Generator()
_STATE_BYTES = 5056  # sizeof(CPUGeneratorImplState) in torch 2.x
_LEGACY_STATE_BYTES = 5048  # sizeof(THGeneratorState), which set_state also takes
_N = 624  # mt19937's words of state


def _nondeterministic_seed():
    return int.from_bytes(os.urandom(8), "little")


class Generator:
    """A random number generator (torch.Generator): torch's CPU mt19937, the same stream.

    ``Generator().manual_seed(0)`` returns the generator, so it can be built and seeded in one
    expression. A new Generator has torch's fixed seed 67280421310721; the default generator
    (``nbgrad.default_generator``) is seeded from the OS at import, as torch 2.13's is.
    ``get_state()`` is torch's 5056-byte layout (the mt19937 state, the cached Box-Muller
    sample), so states move between nbgrad and torch both ways.
    """

    def __init__(self, device="cpu"):
        self.device = backend.device(device)
        self._bits = np.random.MT19937()
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        """Reseed; returns self. Negative seeds wrap modulo 2**64, as in torch.

        Raises:
            RuntimeError: a seed outside [-2**63, 2**64) (torch's text).
        """
        seed = int(seed)
        if not -2 ** 63 <= seed < 2 ** 64:
            raise RuntimeError("Overflow when unpacking long long")
        self._seed = seed % 2 ** 64
        self._bits._legacy_seeding(self._seed & 0xFFFFFFFF)
        self._fresh = True  # torch's engine right after seeding: next_ 0 (the words are the same)
        self._next_normal = None  # the Box-Muller sample torch's scalar path caches (a double)
        return self

    def seed(self):
        """Reseed from OS entropy; returns the new seed (64 bits)."""
        s = _nondeterministic_seed()
        self.manual_seed(s)
        return s

    def initial_seed(self):
        """The seed given last to manual_seed (or seed)."""
        return self._seed

    # ---- the stream ----
    def _words(self, n, raw=False):
        """The next n 32-bit words of the stream (uint32; ``raw``: in the uint64 array the bit
        generator returns, without the conversion)."""
        if n:
            self._fresh = False
        w = self._bits.random_raw(n)
        return w if raw else w.astype(np.uint32)

    def _words64(self, n):
        """The next n 64-bit draws, torch's random64(): (first word << 32) | second."""
        if n:
            self._fresh = False
        w = self._bits.random_raw(2 * n)  # uint64 holding the 32-bit words
        hi = w[0::2]
        hi <<= np.uint64(32)
        hi |= w[1::2]
        return hi

    # ---- torch's state layout ----
    def get_state(self):
        """The generator's state, torch's 5056-byte uint8 tensor (torch.Generator.get_state):
        the seed, mt19937's left/seeded/next and 624 words (each in 8 bytes), the cached normal
        sample of the scalar Box-Muller path, and torch's unused float cache."""
        st = self._bits.state["state"]
        pos = int(st["pos"])
        nxt = 0 if self._fresh else pos
        buf = np.zeros(_STATE_BYTES, np.uint8)
        head = np.array([self._seed], np.uint64).view(np.uint8)
        buf[0:8] = head
        buf[8:16] = np.array([625 - pos if pos < _N else 1, 1], np.int32).view(np.uint8)
        buf[16:24] = np.array([nxt], np.uint64).view(np.uint8)
        buf[24:24 + 8 * _N] = np.asarray(st["key"], np.uint64).view(np.uint8)
        normal = self._next_normal
        buf[5016:5040] = np.array([0.0, normal or 0.0, 0.0], np.float64).view(np.uint8)
        buf[5040:5044] = np.array([normal is not None], np.int32).view(np.uint8)
        return Tensor._make_fresh(buf)

    def set_state(self, new_state):
        """Restore a state from :meth:`get_state` (nbgrad's or torch's); returns self.

        Raises:
            TypeError: not a uint8 tensor. RuntimeError: a wrong size or an invalid state
            (torch's texts).
        """
        if not isinstance(new_state, Tensor) or new_state.dtype is not dtypes.uint8:
            got = type(new_state).__name__ if not isinstance(new_state, Tensor) else \
                new_state.type()
            raise TypeError(f"expected a torch.ByteTensor, but got {got}")
        buf = np.ascontiguousarray(np.asarray(backend.to_device(new_state._data, backend.CPU)))
        if buf.size not in (_STATE_BYTES, _LEGACY_STATE_BYTES):
            raise RuntimeError("Expected either a THGeneratorState of size 5048 or a "
                               "CPUGeneratorImplState of size 5056 but found the input RNG "
                               f"state size to be {buf.size}")
        seed = int(buf[0:8].view(np.uint64)[0])
        left, seeded = (int(v) for v in buf[8:16].view(np.int32))
        nxt = int(buf[16:24].view(np.uint64)[0])
        if not (seeded and 0 < left <= _N and nxt <= _N):
            raise RuntimeError("The provided RNG state is invalid.")
        key = buf[24:24 + 8 * _N].view(np.uint64).astype(np.uint32)
        self._bits.state = {"bit_generator": "MT19937",
                            "state": {"key": key, "pos": _N if left == 1 else nxt}}
        self._seed = seed
        self._fresh = left == 1 and nxt == 0
        valid = int(buf[5040:5044].view(np.int32)[0])
        self._next_normal = float(buf[5016:5040].view(np.float64)[1]) if valid else None
        return self

    def clone_state(self):
        """A new Generator in this one's state (torch.Generator.clone_state)."""
        return Generator(self.device).set_state(self.get_state())

    def __repr__(self):
        return f"<torch._C.Generator object at {hex(id(self))}>"


default_generator = Generator()
default_generator.manual_seed(_nondeterministic_seed())  # torch 2.13: a new seed per process


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
    """The default generator's state, torch's 5056-byte uint8 tensor (torch.get_rng_state)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator from a state of :func:`get_rng_state` or torch's
    (torch.set_rng_state)."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Restore the default generator's state on exit (torch.random.fork_rng): what is drawn
    inside does not change what is drawn after."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


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


def _count(shape):
    return math.prod(shape)


# ---- samplers: flat numpy arrays on the CPU, torch's words and arithmetic ---------------------
def _uniform(g, n, np_dt, low=0.0, high=1.0):
    """n uniforms in [low, high) of dtype np_dt (torch's uniform_kernel): float64 from 53-bit
    draws, float32 and float16 from 24-bit ones through float32 (torch's opmath); ``x * (high -
    low) + low`` fused; a value rounded up to ``high`` becomes ``low``."""
    if np_dt == np.float64:
        v = K.fma64(K.u53(g._words64(n)), float(high) - float(low), float(low))
    else:
        lo, hi = np.float32(low), np.float32(high)
        v = K.u24(g._words(n, raw=True))
        if lo != 0 or hi != 1:  # (x * 1 + 0 is x: no pass)
            v = K.fma32(v, hi - lo, lo)
        v = v.astype(np_dt, copy=False)
    if low == 0.0 and high == 1.0 and np_dt != np.float16:
        return v  # below 1 by construction
    return np.where(v == np_dt.type(high), np_dt.type(low), v)


def _normal(g, n, np_dt, mean=0.0, std=1.0):
    """n normals N(mean, std**2) of dtype np_dt, as torch's normal_kernel fills a contiguous
    tensor: the vectorised Box-Muller for n >= 16, the scalar one (with its cached sample)
    below."""
    if n >= 16:
        work = np.dtype(np.float64) if np_dt == np.float64 else np.dtype(np.float32)
        # float and double fill the whole tensor with uniforms first; half works block by
        # block in a float buffer, so it draws no uniforms for the partial last block
        drawn = n if np_dt == work else n - n % 16
        u = _uniform(g, drawn, work)
        if drawn < n:
            u = np.concatenate([u, np.zeros(n - drawn, work)])
        tail = _uniform(g, 16, work) if n % 16 else None
        return K.normal_fill(u, tail, mean, std).astype(np_dt, copy=False)
    return _scalar_normal(g, n, mean, std).astype(np_dt)


def _scalar_normal(g, n, mean=0.0, std=1.0):
    """n float64 draws of torch's ``normal_distribution<double>``: pairs of uniforms give a
    cos and a sin sample; the sin one waits in the generator for the next draw."""
    if n == 0:
        return np.empty(0)
    cached = [] if g._next_normal is None else [g._next_normal]
    pairs = (n - len(cached) + 1) // 2
    c, s = K.box_muller_pairs(K.u53(g._words64(2 * pairs)))
    both = np.empty(2 * pairs)
    both[0::2], both[1::2] = c, s
    z = np.concatenate([np.array(cached), both])
    g._next_normal = float(z[n]) if z.size > n else None
    return K.fma64(z[:n], float(std), float(mean))


def _address_order(shape, strides):
    """The C-order positions of a strided tensor's elements sorted by address: the order in
    which torch's TensorIterator visits (and so fills) them."""
    offsets = np.zeros((), np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        offsets = offsets + (np.arange(n, dtype=np.int64) * s).reshape(
            (n,) + (1,) * (len(shape) - d - 1))
    return np.argsort(np.broadcast_to(offsets, shape).ravel(), kind="stable")


def _int_bounds(np_dt):
    """The inclusive range random_ and randint may draw from for np_dt."""
    if np_dt.kind == "b":
        return 0, 1
    if np_dt.kind == "f":
        digits = np.finfo(np_dt).nmant + 1
        return -(2 ** digits), 2 ** digits
    info = np.iinfo(np_dt)
    return int(info.min), int(info.max)


def _from_to(g, n, low, high):
    """torch's uniform_int_from_to: ``draw % (high - low) + low`` as int64, one 32-bit word
    per value for a range below 2**28, else one 64-bit draw."""
    span = high - low
    if span == 1 << 64:  # random_(from=int64 min): the draws themselves, as int64
        return g._words64(n).view(np.int64)
    if span >= 1 << 28:
        v = g._words64(n) % np.uint64(span)
    else:
        v = (g._words(n) % np.uint32(span)).astype(np.uint64)
    return (v + np.uint64(low % 2 ** 64)).view(np.int64)


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
    return _from_to(g, _count(shape), low, high).astype(np_dt).reshape(shape)


def _exponential(g, n, lambd):
    """n float64 draws of torch's exponential_distribution<double>: ``-1 / lambd *
    log1p(-u)`` of 53-bit uniforms (glibc's log1p)."""
    u = _uniform(g, n, np.dtype(np.float64))
    return (-1.0 / lambd) * K.libm(math.log1p, -u)


def _random_full(g, n, np_dt):
    """``random_()`` without bounds (torch's uniform_int_distribution): [0, 2**mantissa] for
    floats, [0, max] for integers; 64-bit draws for int64 and float64, 32-bit ones else."""
    if np_dt.kind == "b":
        return (g._words(n) & 1).astype(np.bool_)
    if np_dt in (np.int64, np.float64):
        w = g._words64(n)
    else:
        w = g._words(n).astype(np.uint64)
    if np_dt.kind == "f":
        mod = (1 << (np.finfo(np_dt).nmant + 1)) + 1
    else:
        mod = int(np.iinfo(np_dt).max) + 1
    return (w % np.uint64(mod)).astype(np_dt)


def _shaped(sampler, generator, size, np_dt):
    shape = _size(size)
    return sampler(_gen(generator), _count(shape), np_dt).reshape(shape)


def _swap_shuffle(j):
    """The permutation that swapping position i with j[i] >= i, for i = 0, 1, ... in turn,
    makes of 0 .. n-1 (j[-1] = n-1), computed without the sequential loop.

    Let V[k] be the value at position k when swap k comes: the value the last earlier swap
    aimed at k (the largest m < k with j[m] == k) moved there, i.e. V[m], else k itself; the
    chains of such m are followed by pointer jumping. Position i ends with what swap i finds at
    j[i]: V[i] when j[i] == i, else V[m] for the last earlier m aiming at j[i], else j[i]."""
    n = j.size
    idx = np.arange(n, dtype=np.int64)
    b = n.bit_length()
    key = j << b
    key |= idx
    key.sort()  # by target, then by index (a plain sort: the keys differ)
    order = key & ((1 << b) - 1)
    key >>= b  # the targets, sorted
    same = np.zeros(n, bool)
    np.equal(key[1:], key[:-1], out=same[1:])
    prev = np.full(n, -1, np.int64)  # prev[i]: the last m < i with j[m] == j[i]
    prev[order[same]] = order[:-1][same[1:]]
    last = np.ones(n, bool)
    last[:-1] = ~same[1:]
    sel = order[last]  # the last swap aiming at each target
    tgt = j[sel]
    parent = np.full(n, -1, np.int64)
    parent[tgt] = np.where(sel == tgt, prev[sel], sel)  # only an earlier swap counts
    root = np.where(parent >= 0, parent, idx)
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    return np.where(j == idx, root, np.where(prev >= 0, root[np.maximum(prev, 0)], j))


def _randperm(g, n):
    """torch's randperm_cpu for n < 2**32 / 20: 0..n-1 shuffled by swapping position i with
    i + (word % (n - i)), i = 0 .. n-2 (one 32-bit word each; the swaps composed at once by
    _swap_shuffle); beyond, the inside-out shuffle with 64-bit draws."""
    if n < (2 ** 32 - 1) // 20:
        if n <= 1:
            return np.arange(n, dtype=np.int64)
        j = np.arange(n, dtype=np.int64)
        j[:-1] += g._words(n - 1) % np.arange(n, 1, -1, dtype=np.uint32)
        return _swap_shuffle(j)
    z = (g._words64(n) % np.arange(1, n + 1, dtype=np.uint64)).tolist()
    perm = [0] * n
    for i, k in enumerate(z):
        perm[i] = perm[k]
        perm[k] = i
    return np.array(perm, dtype=np.int64)


# ---- factories ----------------------------------------------------------------------------------
def _all_default(*args):
    """Whether a factory got none of its keyword arguments (None / False each)."""
    return not any(a is not None and a is not False for a in args)


def _no_arguments(fn):
    """torch's text for ``torch.rand()`` / ``torch.randn()`` called with no argument at all."""
    sig = ("torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, "
           "bool pin_memory = False, bool requires_grad = False)\n")
    return (f"{fn}() received an invalid combination of arguments - got (), but expected one of:\n"
            f" * (tuple of ints size, *, torch.Generator generator, Tensor out = None, {sig}"
            f" * (tuple of ints size, *, Tensor out = None, {sig}")


def rand(*shape, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """Uniform samples from [0, 1) of the given size (torch.rand); dtype default float32.

    Raises:
        NotImplementedError: a non-floating dtype (PyTorch's text).
    """
    if not shape and size is None and _all_default(generator, out, dtype, layout, device,
                                                   requires_grad, pin_memory):
        raise TypeError(_no_arguments("rand"))
    size = size_arg("rand", shape, size)
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype)
    _require_float(dt, "check_uniform_bounds")
    return _with_out("rand", lambda: _finish(_shaped(_uniform, generator, size, dt), device,
                                             requires_grad), out)


def randn(*shape, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False):
    """Standard normal samples of the given size (torch.randn); dtype default float32.

    Raises:
        NotImplementedError: a non-floating dtype (PyTorch's text).
    """
    if not shape and size is None and _all_default(generator, out, dtype, layout, device,
                                                   requires_grad, pin_memory):
        raise TypeError(_no_arguments("randn"))
    size = size_arg("randn", shape, size)
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype)
    _require_float(dt, "normal_kernel_cpu")
    return _with_out("randn", lambda: _finish(_shaped(_normal, generator, size, dt),
                                              device, requires_grad), out)


_RANDINT_SIGNATURES = (
    " * (int high, tuple of ints size, *, torch.Generator generator, Tensor out = None, "
    "torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, "
    "bool pin_memory = False, bool requires_grad = False)\n"
    " * (int low, int high, tuple of ints size, *, torch.Generator generator, Tensor out = None, "
    "torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, "
    "bool pin_memory = False, bool requires_grad = False)")


_NO = object()  # an argument not given


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def randint(*args, low=_NO, high=_NO, size=None, generator=None, out=None, dtype=None,
            layout=None, device=None, requires_grad=False, pin_memory=False):
    """Integers drawn uniformly from [low, high) (torch.randint): ``randint(high, size)`` or
    ``randint(low, high, size)``, each argument positional or by keyword as torch's signatures
    allow (``randint(low=0, high=10, size=(3,))``, ``randint(2, high=5, size=(3,))``); size a
    tuple. dtype default int64 (floats and bool allowed).

    Raises:
        TypeError: PyTorch's texts for a missing or non-tuple size, or float bounds.
        RuntimeError: low >= high, bounds outside the dtype, requires_grad on an integer dtype.
    """
    if low is not _NO or high is not _NO:
        given = {k: v for k, v in (("low", low), ("high", high)) if v is not _NO}
        if high is _NO and not args:
            raise TypeError('randint() missing 2 required positional argument: "high", "size"')
        explicit_low = bool(args) or low is not _NO
        if (high is _NO or (size is None and not explicit_low) or len(args) > (low is _NO)
                or not all(map(_is_int, given.values()))):
            got = ", ".join([type(a).__name__ for a in args] + (
                [f"size={type(size).__name__}"] if size is not None else []) + [
                f"{k}={type(v).__name__}" for k, v in given.items()])
            raise TypeError(f"randint() received an invalid combination of arguments - got "
                            f"({got}), but expected one of:\n{_RANDINT_SIGNATURES}")
        if size is None:
            raise TypeError('randint() missing 1 required positional arguments: "size"')
        args = (low if low is not _NO else args[0] if args else 0, high)
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
    return _with_out("randperm", lambda: _finish(_randperm(_gen(generator), n).astype(dt),
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
    p = _host(input).reshape(-1, n_cat)
    if not np.all(np.isfinite(p) & (p >= 0)):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if np.any(p.sum(axis=1, dtype=np.float64) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    g = _gen(generator)
    if replacement and num_samples > 1:
        # torch's multinomial_with_replacement: per row, the running sum in the input's dtype
        # (float for half) divided by the total, then a binary search for each 53-bit uniform
        acc = p.astype(np.float32) if p.dtype == np.float16 else p
        cdf = np.cumsum(acc, axis=1)
        cdf = cdf / cdf[:, -1:]
        cdf[:, -1] = 1
        u = _uniform(g, p.shape[0] * num_samples, np.dtype(np.float64))
        u = u.reshape(p.shape[0], num_samples)
        idx = np.stack([np.searchsorted(c, r, side="left") for c, r in zip(cdf, u)])
    else:
        # torch: q = empty_like(input).exponential_(1); input / q, then argmax or topk
        q = _exponential(g, p.size, 1.0).astype(p.dtype).reshape(p.shape)
        keys = p / q
        if num_samples == 1:
            idx = np.argmax(keys, axis=1)[:, None]
        else:
            idx = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    idx = idx.astype(np.int64).reshape(tuple(input.shape[:-1]) + (num_samples,))
    return Tensor._make_fresh(_device_values(idx, input))
