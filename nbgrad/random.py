"""Random numbers (torch.random and torch's sampling functions): the Generator, rand / randn /
randint / randperm / *_like, bernoulli, normal, multinomial, and the in-place fills
(Tensor.uniform_, normal_, bernoulli_, random_, exponential_, geometric_, cauchy_, log_normal_).

Every function takes ``generator=`` (default: the global one that ``nbgrad.manual_seed`` seeds).
Samples come from numpy's PCG64, drawn on the CPU then moved to the tensor's device: the
distributions, dtypes, ranges and errors are PyTorch's, the exact numbers are not. In-place fills
bump the version by one and follow the in-place rules (a leaf that requires grad is refused; a
non-leaf records PyTorch's node, e.g. NormalBackward0, whose gradient is zero).
"""
from __future__ import annotations

import json

import numpy as np

from . import backend, dtypes
from .autograd.apply import _apply, _inplace, apply
from .creation import _finish, _size
from .ops import ROWS as R
from .tensor import Tensor

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "rand", "randn", "randint", "randperm", "rand_like",
           "randn_like", "randint_like", "bernoulli", "normal", "multinomial", "uniform_",
           "normal_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_",
           "log_normal_"]


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


def _with_out(name, make, inputs, out):
    """``make()``, or with ``out=`` PyTorch's out semantics (written into out, resized if needed,
    refused when an input requires grad)."""
    if out is None:
        return make()
    from .functions import _out  # functions imports this module: imported at call time

    return _out(name, make, inputs, out)


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
def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """Uniform samples from [0, 1) of the given size (torch.rand); dtype default float32.

    Raises:
        NotImplementedError: a non-floating dtype (PyTorch's text).
    """
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype)
    _require_float(dt, "check_uniform_bounds")
    return _with_out("rand", lambda: _finish(_uniform01(_gen(generator), _size(size), dt), device,
                                             requires_grad), (), out)


def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False):
    """Standard normal samples of the given size (torch.randn); dtype default float32.

    Raises:
        NotImplementedError: a non-floating dtype (PyTorch's text).
    """
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype)
    _require_float(dt, "normal_kernel_cpu")
    return _with_out("randn", lambda: _finish(_standard_normal(_gen(generator), _size(size), dt),
                                              device, requires_grad), (), out)


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
        (), out)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of 0 .. n-1 (torch.randperm); dtype default int64.

    Raises:
        RuntimeError: n < 0 (PyTorch's text).
    """
    n = _size((n,))[0]
    dt = _np_dt(dtype if out is None or dtype is not None else out.dtype, np.dtype(np.int64))
    return _with_out("randperm", lambda: _finish(_gen(generator).permutation(n).astype(dt),
                                                 device, requires_grad), (), out)


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


# ---- sampling from tensors of parameters ------------------------------------------------------
def _device_values(arr, like):
    return arr if like.device.type == "cpu" else backend.to_device(arr, like.device)


def _host(t):
    return np.asarray(backend.to_device(t._data, backend.CPU))


_P_IN = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message "
         "be improved?  If so, please report an enhancement request to PyTorch.)")


def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 samples, each 1 with the probability in ``input`` (torch.bernoulli); the output has
    input's shape and dtype. ``bernoulli(input, p)`` uses the number p for every element instead.
    When input requires grad, records BernoulliBackward0 (gradient zero).

    Raises:
        NotImplementedError: a non-floating input. RuntimeError: probabilities outside [0, 1].
    """
    if out is not None:
        return _with_out("bernoulli", lambda: bernoulli(input, p, generator=generator),
                         (input,), out)
    g = _gen(generator)
    dt = input._data.dtype
    if p is not None:
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_num(p)}")
        u = _uniform01(g, tuple(input.shape), np.dtype(np.float64))
        return Tensor._make_fresh(_device_values((u < p).astype(dt), input))
    _require_float(dt, "bernoulli_tensor_cpu_p_")
    probs = _host(input)
    if not np.all((probs >= 0) & (probs <= 1)):
        raise RuntimeError(_P_IN)
    values = (_uniform01(g, probs.shape, np.dtype(np.float64)) < probs).astype(dt)
    return apply(R["bernoulli"], (input,), (_device_values(values, input),))


def _check_std(std):
    if isinstance(std, Tensor):
        if not bool(np.all(_host(std) >= 0)):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_num(float(std))}")


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None,
           device=None, pin_memory=False, requires_grad=False):
    """Normal samples (torch.normal), in its four overloads:

    - ``normal(mean: Tensor, std: float = 1.0)``: input's shape (NormalBackward1 when mean
      requires grad);
    - ``normal(mean: float, std: Tensor)``: std's shape (NormalBackward2);
    - ``normal(mean: Tensor, std: Tensor)``: their broadcast shape (NormalBackward3);
    - ``normal(mean: float, std: float, size)``: a new tensor of ``size``, ``dtype``, ``device``.
    Gradients with respect to mean and std are zero, as in PyTorch.

    Raises:
        RuntimeError: a negative std; shapes that do not broadcast.
        NotImplementedError: an integer mean or std tensor.
        TypeError: two floats and no size.
    """
    if out is not None:
        _require_float(out._data.dtype, "normal_kernel_cpu")
        return _with_out("normal", lambda: normal(mean, std, size, generator=generator,
                                                  dtype=dtype or out.dtype, device=device),
                         tuple(t for t in (mean, std) if isinstance(t, Tensor)), out)
    g = _gen(generator)
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError(f"normal() received an invalid combination of arguments - got "
                            f"({type(mean).__name__}, {type(std).__name__}), but expected one of:"
                            "\n * (Tensor mean, Tensor std, *, torch.Generator generator, "
                            "Tensor out = None)\n * (Tensor mean, float std = 1, *, "
                            "torch.Generator generator, Tensor out = None)\n * (float mean, "
                            "Tensor std, *, torch.Generator generator, Tensor out = None)\n * "
                            "(float mean, float std, tuple of ints size, *, torch.Generator "
                            "generator, Tensor out = None, torch.dtype dtype = None, torch.layout "
                            "layout = None, torch.device device = None, bool pin_memory = False, "
                            "bool requires_grad = False)")
        _check_std(std)
        dt = _np_dt(dtype)
        _require_float(dt, "normal_kernel_cpu")
        z = _standard_normal(g, _size((size,) if isinstance(size, int) else tuple(size)), dt)
        return _finish((z * std + mean).astype(dt, copy=False), device, requires_grad)
    for t in (mean, std):
        if isinstance(t, Tensor):
            _require_float(t._data.dtype, "normal_kernel_cpu")
    _check_std(std)
    if mt and st:
        shape = tuple(np.broadcast_shapes(tuple(mean.shape), tuple(std.shape))) \
            if _broadcastable(mean, std) else None
        dt = np.result_type(mean._data.dtype, std._data.dtype)
        values = _standard_normal(g, shape, dt) * _host(std) + _host(mean)
        values = _device_values(values.astype(dt, copy=False), mean)
        # the general path: the broadcasting path caches by its arguments, and `values` is data
        return _apply(R["normal_tensor_tensor"], (mean, std), (values,), out=values,
                      meta_inputs=True)
    t = mean if mt else std
    dt = t._data.dtype
    z = _standard_normal(g, tuple(t.shape), dt)
    values = (z * std + _host(mean)) if mt else (z * _host(std) + mean)
    row = R["normal_tensor_float"] if mt else R["normal_float_tensor"]
    return apply(row, (t,), (_device_values(values.astype(dt, copy=False), t),))


def _broadcastable(a, b):
    sa, sb = tuple(a.shape), tuple(b.shape)
    for i in range(1, min(len(sa), len(sb)) + 1):
        x, y = sa[-i], sb[-i]
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                               f"({y}) at non-singleton dimension {max(len(sa), len(sb)) - i}")
    return True


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
                                                            generator=generator), (), out)
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


# ---- in-place fills (Tensor methods) ----------------------------------------------------------
def _fill(self, row, values, op_name, others=()):
    """Write sampled values into self through the in-place path: one version bump, the leaf and
    view rules, and the row's node on a non-leaf."""
    values = _device_values(np.asarray(values, dtype=self._data.dtype), self)
    return _inplace(row, self, tuple(others), (values,), op_name)


def uniform_(self, from_=0.0, to=1.0, *, generator=None, **kwargs):
    """Fill with uniform samples from [from, to) (torch.Tensor.uniform_); UniformBackward0.

    Raises:
        NotImplementedError: an integer or bool tensor. RuntimeError: from > to.
    """
    from_ = kwargs.pop("from", from_)
    dt = self._data.dtype
    _require_float(dt, "check_uniform_bounds")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={_num(from_)} > to={_num(to)}")
    u = _uniform01(_gen(generator), tuple(self.shape), np.dtype(np.float64))
    return _fill(self, R["uniform_"], from_ + (to - from_) * u, "uniform_")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal samples (torch.Tensor.normal_); NormalBackward0.

    Raises:
        NotImplementedError: an integer tensor. RuntimeError: std < 0.
    """
    _require_float(self._data.dtype, "normal_kernel_cpu")
    _check_std(std)
    z = _standard_normal(_gen(generator), tuple(self.shape), np.dtype(np.float64))
    return _fill(self, R["normal_"], mean + std * z, "normal_")


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1, each 1 with probability p, a number (BernoulliBackward2) or a tensor
    broadcast to self (BernoulliBackward1) (torch.Tensor.bernoulli_). Any dtype.

    Raises:
        RuntimeError: p outside [0, 1]; a p tensor that does not broadcast to self.
    """
    g = _gen(generator)
    u = _uniform01(g, tuple(self.shape), np.dtype(np.float64))
    if isinstance(p, Tensor):
        probs = _host(p)
        if not np.all((probs >= 0) & (probs <= 1)):
            raise RuntimeError(_P_IN)
        try:
            probs = np.broadcast_to(probs, tuple(self.shape))
        except ValueError:
            from .functions import _expand_shape
            _expand_shape(tuple(p.shape), tuple(self.shape))
            raise
        return _fill(self, R["bernoulli_tensor_p"], u < probs, "bernoulli_", (p,))
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_num(p)}")
    return _fill(self, R["bernoulli_p"], u < p, "bernoulli_")


def random_(self, *args, generator=None, **kwargs):
    """Fill with integers (torch.Tensor.random_), in its three overloads: ``random_()`` from
    [0, 2**mantissa] for floats or [0, max] for integers (RandomBackward2); ``random_(to)`` from
    [0, to) (RandomBackward1); ``random_(from, to)`` from [from, to), ``to=None`` meaning up to
    the dtype's largest (RandomBackward0).

    Raises:
        RuntimeError: from >= to, or bounds outside the dtype (PyTorch's texts).
    """
    dt = self._data.dtype
    top = _int_bounds(dt)[1] + 1
    if not args and not kwargs:
        row, low, high = R["random_"], 0, top
    elif len(args) == 1 and not kwargs or (not args and list(kwargs) == ["to"]):
        row, low, high = R["random_to"], 0, int(args[0] if args else kwargs["to"])
    else:
        bounds = dict(zip(("from", "to"), args), **kwargs)
        row, low = R["random_from_to"], int(bounds.get("from", 0))
        high = top if bounds.get("to") is None else int(bounds["to"])
    values = _integers(_gen(generator), low, high, tuple(self.shape), dt)
    return _fill(self, row, values, "random_")


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponential samples of rate lambd (torch.Tensor.exponential_);
    ExponentialBackward0.

    Raises:
        RuntimeError: an integer tensor, or lambd <= 0 (PyTorch's texts).
    """
    _continuous_only(self._data.dtype, "Exponential")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_num(lambd)}")
    values = _gen(generator).exponential(1.0 / lambd, tuple(self.shape))
    return _fill(self, R["exponential_"], values, "exponential_")


def geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success, 1, 2, ...
    (torch.Tensor.geometric_); GeometricBackward0.

    Raises:
        RuntimeError: p outside (0, 1).
    """
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_num(p)}")
    values = _gen(generator).geometric(p, tuple(self.shape))
    return _fill(self, R["geometric_"], values, "geometric_")


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy samples (torch.Tensor.cauchy_); CauchyBackward0.

    Raises:
        RuntimeError: an integer tensor, or sigma <= 0.
    """
    dt = self._data.dtype
    if dt.kind != "f":
        raise RuntimeError("Cauchy distribution is a continuous probability distribution. dtype "
                           f"must be a floating point but you specified {_CTYPE[dt.name]}")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_num(sigma)}")
    values = median + sigma * _gen(generator).standard_cauchy(tuple(self.shape))
    return _fill(self, R["cauchy_"], values, "cauchy_")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp(N(mean, std)) samples (torch.Tensor.log_normal_); LogNormalBackward0.

    Raises:
        NotImplementedError: an integer tensor. RuntimeError: std <= 0.
    """
    _require_float(self._data.dtype, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_num(std)}")
    values = _gen(generator).lognormal(mean, std, tuple(self.shape))
    return _fill(self, R["log_normal_"], values, "log_normal_")

