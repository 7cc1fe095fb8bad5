"""Comparisons and logic (eq, lt, logical_and, bitwise_*, isnan, all, any, nonzero, ...):
boolean or integer results, no gradient, computed on the arrays directly.
"""
from __future__ import annotations

import numpy as np

from .. import backend, dtypes
from ..autograd.apply import apply, _broadcast_error, _fresh
from ..autograd.record import _arr
from ..ops import ROWS as R
from ..tensor import Tensor, _dim
from .registry import method
from .args import _t


def _operands(name, input, other):
    """The arrays (or a Python number) of a two-operand op, one of which must be a Tensor."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return (input._data if isinstance(input, Tensor) else input,
            other._data if isinstance(other, Tensor) else other)


def _run(fn, a, b):
    try:
        return _fresh(_arr(fn(a, b)))
    except ValueError:
        raise _broadcast_error(np.shape(a), np.shape(b)) from None


def _cmp(ufunc, name):
    def f(input, other):
        if isinstance(input, Tensor):  # (operators: always; `2 < t` is t.__gt__(2))
            a, b = input._data, other._data if isinstance(other, Tensor) else other
        else:
            a, b = _operands(name, input, other)
        tb = type(b)
        if tb is type(a):
            if a.dtype is not b.dtype:
                a, b = dtypes.promote_arrays(a, b)
        elif not ((tb is float and a.dtype.kind == "f") or
                  (tb is int and a.dtype.kind in "iu" and dtypes.int_fits(b, a.dtype)) or
                  (tb is int and a.dtype.kind == "f" and -2048 <= b <= 2048)):
            # (a small int is exact in every float dtype: `mask == 0` compares in the tensor's)
            a, b = dtypes.promote(a, b)[0]  # (uint8 < -3 compares in uint8, as torch)
        try:
            return _fresh(_arr(ufunc(a, b)))
        except ValueError:
            raise _broadcast_error(np.shape(a), np.shape(b)) from None
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (torch.{name}); returns a bool tensor, no gradient."
    return f


eq = method(_cmp(np.equal, "eq"))
ne = method(_cmp(np.not_equal, "ne"))
lt = method(_cmp(np.less, "lt"))
le = method(_cmp(np.less_equal, "le"))
gt = method(_cmp(np.greater, "gt"))
ge = method(_cmp(np.greater_equal, "ge"))
greater = method(gt, "greater")
greater_equal = method(ge, "greater_equal")
less = method(lt, "less")
less_equal = method(le, "less_equal")
not_equal = method(ne, "not_equal")
logical_and = method(_cmp(np.logical_and, "logical_and"))
logical_or = method(_cmp(np.logical_or, "logical_or"))
logical_xor = method(_cmp(np.logical_xor, "logical_xor"))


def _ints_only(f):
    """PyTorch's text when a bitwise op meets a floating tensor."""
    def g(input, *other):
        for x in (input,) + other:
            if isinstance(x, Tensor) and x._data.dtype.kind == "f":
                raise NotImplementedError(f'"{f.__name__}_cpu" not implemented for '
                                          f"'{dtypes.from_np(x._data.dtype)._tensor_name[:-6]}'")
        return f(input, *other)
    g.__name__, g.__doc__ = f.__name__, f.__doc__ + " Integer and bool tensors only."
    return g


def _bitwise(fn, name, kernel):
    """An integer/bool op in the operands' torch.result_type; PyTorch's text (naming its
    `kernel`) for a float one."""
    def f(input, other):
        (a, b), dt = dtypes.promote(*_operands(name, input, other))
        if dt.kind == "f" or (dt.kind == "b" and kernel.endswith("shift")):
            raise NotImplementedError(f'"{kernel}_cpu" not implemented for '
                                      f"'{dtypes.from_np(dt)._tensor_name[:-6]}'")
        return _run(fn, a, b)
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (torch.{name}); integer and bool tensors, no gradient."
    return f


def _shift(left):
    """torch's shifts: a shift by a negative amount or by the type's width or more gives 0
    (a right shift of a signed value: its sign, 0 or -1), where numpy's is undefined."""
    def fn(a, b):
        bits = 8 * a.dtype.itemsize
        xp = backend.get_array_module(a)
        out_of_range = (b < 0) | (b >= bits)
        safe = xp.where(out_of_range, 0, b).astype(a.dtype)
        if left or a.dtype.kind != "i":
            fill = xp.zeros_like(a)
        else:
            fill = xp.right_shift(a, a.dtype.type(bits - 1))
        if left:
            return xp.where(out_of_range, fill, xp.left_shift(a, safe))
        return xp.where(out_of_range, fill, xp.right_shift(a, safe))
    return fn


bitwise_and = method(_bitwise(np.bitwise_and, "bitwise_and", "bitwise_and"))
bitwise_or = method(_bitwise(np.bitwise_or, "bitwise_or", "bitwise_or"))
bitwise_xor = method(_bitwise(np.bitwise_xor, "bitwise_xor", "bitwise_xor"))
bitwise_left_shift = method(_bitwise(_shift(True), "bitwise_left_shift", "lshift"))
bitwise_right_shift = method(_bitwise(_shift(False), "bitwise_right_shift", "rshift"))


def _nograd_unary(fn, name):
    def f(input):
        d = input._data
        return _fresh(_arr(fn(d) if type(d) is np.ndarray else
                           getattr(backend.get_array_module(d), fn.__name__)(d)))
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (torch.{name}); no gradient."
    return f


logical_not = method(_nograd_unary(np.logical_not, "logical_not"))
bitwise_not = method(_ints_only(_nograd_unary(np.invert, "bitwise_not")))
isnan = method(_nograd_unary(np.isnan, "isnan"))
isinf = method(_nograd_unary(np.isinf, "isinf"))
isfinite = method(_nograd_unary(np.isfinite, "isfinite"))
signbit = _nograd_unary(np.signbit, "signbit")


@method
def round(input, *, decimals=0):
    """Round to `decimals` places, halves to even (torch.round); gradient zero (RoundBackward0,
    RoundBackward1 with decimals)."""
    if decimals == 0:
        return apply(R["round"], (input,))
    return apply(R["round_decimals"], (input,), (decimals,))


@method
def equal(input, other):
    """True when both have the same shape and elements (torch.equal)."""
    return input._data.shape == other._data.shape and bool((input._data == other._data).all())


@method
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |a - b| <= atol + rtol * |b| as a bool tensor (torch.isclose)."""
    b = _t(other)._data
    _broadcastable(input._data, b)
    return _fresh(_arr(np.isclose(input._data, b, rtol, atol, equal_nan)))


@method
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element isclose (torch.allclose); returns a Python bool."""
    b = _t(other)._data
    _broadcastable(input._data, b)
    return bool(np.allclose(input._data, b, rtol, atol, equal_nan))


def _broadcastable(a, b):
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise _broadcast_error(a.shape, b.shape) from None


@method
def all(input, dim=None, keepdim=False):
    """True where all elements (over `dim`) are nonzero; a bool tensor (torch.all)."""
    return _fresh(_arr(np.all(input._data, axis=_axis(dim, input), keepdims=keepdim)))


@method
def any(input, dim=None, keepdim=False):
    """True where any element (over `dim`) is nonzero; a bool tensor (torch.any)."""
    return _fresh(_arr(np.any(input._data, axis=_axis(dim, input), keepdims=keepdim)))


@method
def nonzero(input, *, as_tuple=False):
    """Indices of nonzero elements: (n, ndim) int64, or a tuple of 1-D tensors with as_tuple
    (torch.nonzero)."""
    d = input._data
    nz = np.nonzero(d.reshape(1) if d.ndim == 0 else d)
    if d.ndim == 0:  # one index column per dim: none
        if as_tuple:
            return (_fresh(nz[0].astype(np.int64)),)
        return _fresh(np.zeros((nz[0].size, 0), np.int64))
    if as_tuple:
        return tuple(_fresh(i.astype(np.int64)) for i in nz)
    return _fresh(np.stack(nz, axis=1).astype(np.int64) if nz else np.zeros((0, 0), np.int64))


@method
def count_nonzero(input, dim=None):
    """Number of nonzero elements, over `dim` or all; int64 (torch.count_nonzero)."""
    return _fresh(_arr(np.count_nonzero(input._data, axis=_axis(dim, input))).astype(np.int64))


def _axis(dim, input):
    """dim (None, an int or a tuple) checked as torch checks it (IndexError, its text)."""
    nd = input._data.ndim
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(_dim(d, nd) for d in dim) if nd else None
    return _dim(dim, nd) if nd else None
