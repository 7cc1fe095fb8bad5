"""Sampling that records a graph (torch.bernoulli, torch.normal with tensor parameters) and the
in-place random fills (Tensor.uniform_, normal_, bernoulli_, random_, exponential_, geometric_,
cauchy_, log_normal_).

The values come from nbgrad/random.py's Generator and samplers, torch's CPU stream bit for bit
(each function's docstring says which words it spends); the rows in nbgrad/ops/random.py
put PyTorch's nodes in the graph (BernoulliBackward0, NormalBackward1..3, UniformBackward0, ...,
gradients zero). In-place fills bump the version by one and follow the in-place rules: a leaf that
requires grad is refused, a non-leaf records the node (CopySlices on a view's base).
"""
from __future__ import annotations

import math

import numpy as np

from . import _torch_errors
from .autograd.apply import apply
from .autograd.record import _mask
from .autograd.grad_mode import STATE as _GRAD
from .creation import _finish, _size, write_out
from .ops import ROWS as R
from . import random_kernels as K
from .random import (_CTYPE, _address_order, _continuous_only, _count, _device_values,
                     _exponential, _from_to, _gen, _host, _int_bounds, _integers, _normal,
                     _np_dt, _num, _random_full, _require_float, _scalar_normal, _uniform)
from .tensor import Tensor

__all__ = ["bernoulli", "normal", "uniform_", "normal_", "bernoulli_", "random_", "exponential_",
           "geometric_", "cauchy_", "log_normal_"]


def _with_out(name, make, inputs, out):
    """``make()``, or with ``out=`` PyTorch's out semantics: refused when an input requires grad
    (grad mode on), else written into out (resized if needed)."""
    if out is None:
        return make()
    if _GRAD.enabled and _mask(inputs):
        raise _torch_errors.out_requires_grad(name)
    return write_out(out, make(), name)


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
        u = _uniform(g, input.numel(), np.dtype(np.float64))
        return Tensor._make_fresh(_device_values((u < p).astype(dt).reshape(input.shape),
                                                 input))
    _require_float(dt, "bernoulli_tensor_cpu_p_")
    probs = _host(input)
    if not np.all((probs >= 0) & (probs <= 1)):
        raise RuntimeError(_P_IN)
    values = _bernoulli_tensor(g, probs).astype(dt)
    return apply(R["bernoulli"], (input,), (_device_values(values, input),))


def _bernoulli_tensor(g, probs):
    """torch's bernoulli_ with a tensor of probabilities (C order): a float64 p against a
    53-bit uniform, any other dtype against a 24-bit float32 one."""
    if probs.dtype == np.float64:
        u = _uniform(g, probs.size, np.dtype(np.float64))
    else:
        u = _uniform(g, probs.size, np.dtype(np.float32))
        probs = probs.astype(np.float32)
    return u.reshape(probs.shape) < probs


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
        shape = _size((size,) if isinstance(size, int) else tuple(size))
        z = _normal(g, _count(shape), dt, mean, std).reshape(shape)  # empty(size).normal_(...)
        return _finish(z, device, requires_grad)
    for t in (mean, std):
        if isinstance(t, Tensor):
            _require_float(t._data.dtype, "normal_kernel_cpu")
    _check_std(std)
    if mt and st:
        shape = tuple(np.broadcast_shapes(tuple(mean.shape), tuple(std.shape))) \
            if _broadcastable(mean, std) else None
        dt = np.result_type(mean._data.dtype, std._data.dtype)
        # torch: output.normal_(0, 1).mul_(std).add_(mean)
        z = _normal(g, _count(shape), dt).reshape(shape)
        values = z * _host(std).astype(dt) + _host(mean).astype(dt)
        return apply(R["normal_tensor_tensor"], (mean, std),
                     (_device_values(values.astype(dt, copy=False), mean),))
    t = mean if mt else std
    dt = t._data.dtype
    shape = tuple(t.shape)
    if mt:  # torch: output.normal_(0, std).add_(mean)
        values = _normal(g, _count(shape), dt, 0.0, std).reshape(shape) + _host(mean)
    else:  # torch: output.normal_(0, 1).mul_(std).add_(mean)
        z = _normal(g, _count(shape), dt).reshape(shape)
        values = z * _host(std) + dt.type(mean)
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


# ---- in-place fills (Tensor methods) ----------------------------------------------------------
def _fill_order(self):
    """None for a contiguous tensor; else the C-order positions of self's elements in the order
    torch's TensorIterator fills a strided tensor: by address."""
    return None if self.is_contiguous() else _address_order(tuple(self.shape), self.stride())


def _fill(self, row, values, op_name, others=()):
    """Write sampled values into self through the in-place path: one version bump, the leaf and
    view rules, and the row's node on a non-leaf. ``values`` are the draws in torch's fill
    order, laid out in self's shape (so placed by address on a strided self)."""
    order = _fill_order(self)
    if order is not None:
        placed = np.empty(values.size, np.asarray(values).dtype)
        placed[order] = np.asarray(values).ravel()
        values = placed.reshape(tuple(self.shape))
    values = _device_values(np.asarray(values, dtype=self._data.dtype), self)
    return apply(row, (self, *others), (values,), inplace=op_name)


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
    u = _uniform(_gen(generator), self.numel(), dt, from_, to)
    return _fill(self, R["uniform_"], u.reshape(self.shape), "uniform_")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal samples (torch.Tensor.normal_); NormalBackward0.

    Raises:
        NotImplementedError: an integer tensor. RuntimeError: std < 0.
    """
    _require_float(self._data.dtype, "normal_kernel_cpu")
    _check_std(std)
    dt, n = self._data.dtype, self.numel()
    if self.is_contiguous():
        z = _normal(_gen(generator), n, dt, mean, std)
    else:  # torch's scalar path for a strided tensor, whatever its size
        z = _scalar_normal(_gen(generator), n, mean, std).astype(dt)
    return _fill(self, R["normal_"], z.reshape(self.shape), "normal_")


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 0/1, each 1 with probability p, a number (BernoulliBackward2) or a tensor
    broadcast to self (BernoulliBackward1) (torch.Tensor.bernoulli_). Any dtype.

    Raises:
        RuntimeError: p outside [0, 1]; a p tensor that does not broadcast to self.
    """
    g = _gen(generator)
    if isinstance(p, Tensor):
        probs = _host(p)
        if not np.all((probs >= 0) & (probs <= 1)):
            raise RuntimeError(_P_IN)
        p.expand(*self.shape)  # PyTorch's error when p does not broadcast to self
        probs = np.broadcast_to(probs, tuple(self.shape))
        order = _fill_order(self)
        if order is not None:  # the probabilities in the order torch fills self
            probs = probs.ravel()[order].reshape(probs.shape)
        return _fill(self, R["bernoulli_tensor_p"], _bernoulli_tensor(g, probs), "bernoulli_",
                     (p,))
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_num(p)}")
    u = _uniform(g, self.numel(), np.dtype(np.float64))
    return _fill(self, R["bernoulli_p"], (u < p).reshape(self.shape), "bernoulli_")


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
    shape, n = tuple(self.shape), self.numel()
    if not args and not kwargs:
        row, values = R["random_"], _random_full(_gen(generator), n, dt).reshape(shape)
        return _fill(self, row, values, "random_")
    if len(args) == 1 and not kwargs or (not args and list(kwargs) == ["to"]):
        row, low, high = R["random_to"], 0, int(args[0] if args else kwargs["to"])
    else:
        bounds = dict(zip(("from", "to"), args), **kwargs)
        row, low = R["random_from_to"], int(bounds.get("from", 0))
        if bounds.get("to") is None and low == -2 ** 63:  # torch's full 64-bit range kernel
            values = _from_to(_gen(generator), n, low, 2 ** 63).astype(dt).reshape(shape)
            return _fill(self, row, values, "random_")
        high = top if bounds.get("to") is None else int(bounds["to"])
    values = _integers(_gen(generator), low, high, shape, dt)
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
    values = _exponential(_gen(generator), self.numel(), lambd).reshape(self.shape)
    return _fill(self, R["exponential_"], values, "exponential_")


def geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success, 1, 2, ...
    (torch.Tensor.geometric_); GeometricBackward0.

    Raises:
        RuntimeError: p outside (0, 1).
    """
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_num(p)}")
    u = _uniform(_gen(generator), self.numel(), np.dtype(np.float64))
    values = np.ceil(K.libm(math.log, u) / math.log1p(-p)).reshape(self.shape)
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
    u = _uniform(_gen(generator), self.numel(), np.dtype(np.float64))
    t = K.libm(math.tan, math.pi * (u - 0.5))
    values = K.fma64(t, float(sigma), float(median)).reshape(self.shape)
    return _fill(self, R["cauchy_"], values, "cauchy_")


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp(N(mean, std)) samples (torch.Tensor.log_normal_); LogNormalBackward0.

    Raises:
        NotImplementedError: an integer tensor. RuntimeError: std <= 0.
    """
    _require_float(self._data.dtype, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_num(std)}")
    z = _scalar_normal(_gen(generator), self.numel(), mean, std)
    values = K.libm(math.exp, z).reshape(self.shape)
    return _fill(self, R["log_normal_"], values, "log_normal_")

