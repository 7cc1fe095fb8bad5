"""The public functions (torch.add, torch.sum, ...) over the op table, and their Tensor methods.

Each function checks its arguments (PyTorch's texts), picks a row of the table (nbgrad/ops/) and
applies it through nbgrad/autograd/apply.py. The block at the end binds them onto Tensor as
methods and operators, with PyTorch's names.
"""
from __future__ import annotations

import builtins
import collections
import math
import operator
import warnings
import weakref

import numpy as np

from . import _torch_errors, creation, dtypes
from .autograd.apply import (_arr, _broadcast_error, _device_error, _fresh,
                             _geom, _mask, apply, check_inplace)
from .autograd.grad_mode import STATE as _GRAD
from .autograd import fused, variable
from .autograd.grad_mode import is_grad_enabled, no_grad
from .ops import ROWS as R
from .ops.formulas import TENSORS, _reduce_to
from .ops.reductions import _sorted_idx
from .ops.views import _ViewImpossible
from .tensor import Size, Tensor, _dim, type_name
from . import backend

_builtin_max, _builtin_min, _builtin_sum, _builtin_abs = builtins.max, builtins.min, builtins.sum, \
    builtins.abs


def _t(x, like=None):
    """A Tensor for `x` (numbers become 0-d tensors of a matching dtype)."""
    if isinstance(x, Tensor):
        return x
    if like is not None and isinstance(x, (int, float, bool)):
        kind = like._data.dtype.kind
        if kind == "f" or (kind in "iu" and type(x) is not float) or type(x) is bool:
            return _filled_like(x, like)
    return creation.tensor(x)


def _filled_like(value, like):
    """`value` (a number or array-like) as a tensor of `like`'s dtype, on `like`'s device."""
    return Tensor._make_fresh(backend.get_array_module(like._data).asarray(value,
                                                                             like._data.dtype))


def _check_tensor(x, fname, arg="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fname}(): argument '{arg}' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")


def _out(name, fn, inputs, out):
    """Run `fn()` and write its result into `out` (PyTorch's out= semantics)."""
    if _GRAD.enabled and _mask(inputs):
        raise _torch_errors.out_requires_grad(name)
    with no_grad():
        r = fn()
    return creation.write_out(out, r, name)


# ================================================================================================
# elementwise arithmetic
# ================================================================================================
_ALPHA_FIRST_WARNED = []


def _alpha_first(name, other, rest):
    """PyTorch's deprecated overload ``add(Number alpha, Tensor other)`` (and sub, add_, sub_),
    still in old tutorials (``p.data.add_(-lr, d_p)``): returns (other, alpha), with PyTorch's
    UserWarning, given once per process as PyTorch gives it.

    Raises:
        TypeError: other extra arguments (PyTorch's count).
    """
    if len(rest) != 1 or isinstance(other, Tensor) or not isinstance(rest[0], (Tensor, int, float)):
        if name.endswith("_"):  # the method's count (without self), as PyTorch words it
            raise TypeError(f"{name}() takes 1 positional argument but {1 + len(rest)} were given")
        raise TypeError(f"{name}() takes 2 positional arguments but {2 + len(rest)} were given")
    if _ALPHA_FIRST_WARNED:
        return rest[0], other
    _ALPHA_FIRST_WARNED.append(True)
    import warnings
    warnings.warn(f"This overload of {name} is deprecated:\n\t{name}(Number alpha, Tensor other)"
                  f"\nConsider using one of the following signatures instead:\n\t{name}(Tensor "
                  "other, *, Number alpha = 1)", UserWarning, stacklevel=3)
    return rest[0], other


def add(input, other, *rest, alpha=1, out=None):
    """input + alpha * other, broadcasting (torch.add). ``add(input, alpha, other)``, PyTorch's
    deprecated overload, is accepted with its warning."""
    if rest:
        other, alpha = _alpha_first("add", other, rest)
    if out is not None:
        return _out("add", lambda: add(input, other, alpha=alpha), (input, other), out)
    if not isinstance(input, Tensor):
        return add(_t(input, other), other, alpha=alpha)
    return apply(R["add"], (input, other), (alpha,))


def sub(input, other, *rest, alpha=1, out=None):
    """input - alpha * other, broadcasting (torch.sub); ``sub(input, alpha, other)`` as add."""
    if rest:
        other, alpha = _alpha_first("sub", other, rest)
    if out is not None:
        return _out("sub", lambda: sub(input, other, alpha=alpha), (input, other), out)
    _check_bool_sub(input, other)
    if not isinstance(input, Tensor):
        return rsub(other, input, alpha=alpha)
    return apply(R["sub"], (input, other), (alpha,))


def _check_bool_sub(a, b):
    ba = isinstance(a, Tensor) and a._data.dtype.kind == "b"
    bb = isinstance(b, Tensor) and b._data.dtype.kind == "b"
    if (ba and bb) or (ba and type(b) is bool) or (bb and type(a) is bool):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if ba or bb or (isinstance(a, Tensor) and type(b) is bool) or \
            (isinstance(b, Tensor) and type(a) is bool):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")


subtract = sub


def rsub(input, other, *, alpha=1):
    """other - alpha * input (torch.rsub)."""
    if isinstance(other, Tensor):
        return sub(other, input, alpha=alpha)
    d = input._data
    if type(other) is float and d.dtype.kind != "f":
        input = input.to(dtypes.get_default_dtype())
    return apply(R["rsub"], (input,), (other, alpha))


def mul(input, other, *, out=None):
    """Elementwise product, broadcasting (torch.mul)."""
    if out is not None:
        return _out("mul", lambda: mul(input, other), (input, other), out)
    if not isinstance(input, Tensor):
        input, other = other, input
    return apply(R["mul"], (input, other))


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    """True division (or 'trunc' / 'floor' rounding, not differentiable) (torch.div)."""
    if out is not None:
        return _out("div", lambda: div(input, other, rounding_mode=rounding_mode),
                    (input, other), out)
    if not isinstance(input, Tensor):
        return mul(reciprocal(_as_float(other)), input)
    if rounding_mode is not None:
        od = other._data if isinstance(other, Tensor) else other
        q = input._data / od
        q = np.trunc(q) if rounding_mode == "trunc" else np.floor(q)
        if input._data.dtype.kind in "iu" and (not isinstance(other, Tensor) or
                                               od.dtype.kind in "iu") and type(od) is not float:
            q = q.astype(input._data.dtype)
        return _fresh(_arr(q))
    if input._data.dtype.kind != "f" and (not isinstance(other, Tensor) or
                                          other._data.dtype.kind != "f") and \
            type(other) is not float:
        input = input.to(dtypes.get_default_dtype())
    return apply(R["div"], (input, other))


divide = true_divide = div


def _as_float(x):
    return x if x._data.dtype.kind == "f" else x.to(dtypes.get_default_dtype())


def floor_divide(input, other):
    """input // other, rounded toward -inf (torch.floor_divide); no gradient."""
    return div(input, other, rounding_mode="floor")


def remainder(input, other):
    """input % other with the sign of other, Python-style (torch.remainder): RemainderBackward0
    for a number, RemainderBackward1 for a tensor (gradient -floor(input / other))."""
    return _mod_like("remainder", input, other)


def fmod(input, other):
    """C's fmod: input % other with the sign of input (torch.fmod): FmodBackward0 for a number,
    FmodBackward1 for a tensor (gradient -trunc(input / other))."""
    return _mod_like("fmod", input, other)


def _mod_like(name, input, other):
    if isinstance(other, Tensor):
        return apply(R[name + "_tensor"], (input, other))
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if type(other) is float and input._data.dtype.kind != "f":
        input = to_dtype(input, dtypes.get_default_dtype())
    return apply(R[name], (input,), (other,))


def pow(input, exponent, *, out=None):
    """input ** exponent; either may be a number (torch.pow)."""
    if out is not None:
        return _out("pow", lambda: pow(input, exponent), (input, exponent), out)
    if not isinstance(input, Tensor):
        if not isinstance(exponent, Tensor):
            raise TypeError("pow() needs at least one Tensor")
        e = exponent if exponent._data.dtype.kind == "f" or type(input) is int else \
            exponent.to(dtypes.get_default_dtype())
        return apply(R["rpow"], (e,), (input,))
    if isinstance(exponent, Tensor):
        return apply(R["pow_tt"], (input, exponent))
    exponent = _scalar_arg(exponent)
    if type(exponent) is float and input._data.dtype.kind != "f":
        input = input.to(dtypes.get_default_dtype())
    if type(exponent) is int and exponent < 0 and input._data.dtype.kind in "iu":
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return apply(R["pow"], (input,), (exponent,))


def _scalar_arg(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Tensor):
        return x.item()
    return x


def float_power(input, exponent):
    """input ** exponent computed in float64 (torch.float_power)."""
    return pow(input.double(), exponent)


def square(input):
    """input ** 2 (torch.square); PowBackward0."""
    return pow(input, 2)


def neg(input):
    """-input (torch.neg)."""
    if input._data.dtype.kind == "b":
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you "
                           "are trying to invert a mask, use the `~` or `logical_not()` operator "
                           "instead.")
    return apply(R["neg"], (input,))


negative = neg


def _unary_fn(name, doc):
    row = R[name]

    def f(input, *, out=None):
        if out is not None:
            return _out(name, lambda: f(input), (input,), out)
        _check_tensor(input, name)
        return apply(row, (input,))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{doc} elementwise (torch.{name}). Shape and dtype are kept (ints become float)."
    return f


exp = _unary_fn("exp", "e ** input")
log = _unary_fn("log", "Natural logarithm")
log1p = _unary_fn("log1p", "log(1 + input)")
sqrt = _unary_fn("sqrt", "Square root")
rsqrt = _unary_fn("rsqrt", "1 / sqrt(input)")
reciprocal = _unary_fn("reciprocal", "1 / input")
abs = _unary_fn("abs", "Absolute value")
absolute = abs
sign = _unary_fn("sign", "Sign (-1, 0, 1)")
sin = _unary_fn("sin", "Sine")
cos = _unary_fn("cos", "Cosine")
tanh = _unary_fn("tanh", "Hyperbolic tangent")
sigmoid = _unary_fn("sigmoid", "Logistic sigmoid 1 / (1 + exp(-input))")
erf = _unary_fn("erf", "Error function")


def relu(input):
    """max(input, 0) elementwise (torch.relu); saves its output."""
    return apply(R["relu"], (input,))


def clamp(input, min=None, max=None, *, out=None):
    """Clamp into [min, max]; either bound may be None, a number or a Tensor (torch.clamp)."""
    if out is not None:
        return _out("clamp", lambda: clamp(input, min, max), (input,), out)
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensor(input, min, max)
    return apply(R["clamp"], (input,), (min, max))


def _clamp_tensor(input, min, max):
    """clamp with tensor bounds (ClampBackward0, a gradient for each bound); a missing bound is
    -inf / +inf."""
    return apply(R["clamp_tensor"], (input,) + _clamp_bounds(input, min, max))


def _clamp_bounds(input, min, max):
    inf = float("inf")
    bounds = []
    for b, none in ((min, -inf), (max, inf)):
        b = _t(none if b is None else b, input)
        if b._data.dtype != input._data.dtype:
            b = to_dtype(b, input.dtype)
        bounds.append(b)
    return tuple(bounds)


clip = clamp


def clamp_min(input, min):
    """max(input, min) (torch.clamp_min, ClampMinBackward0)."""
    return apply(R["clamp_min"], (input,), (min,))


def clamp_max(input, max):
    """min(input, max) (torch.clamp_max, ClampMaxBackward0)."""
    return apply(R["clamp_max"], (input,), (max,))


def maximum(input, other):
    """Elementwise maximum of two tensors (torch.maximum); ties share the gradient."""
    return apply(R["maximum"], (input, _t(other, input)))


def minimum(input, other):
    """Elementwise minimum of two tensors (torch.minimum); ties share the gradient."""
    return apply(R["minimum"], (input, _t(other, input)))


def where(condition, input=None, other=None):
    """Pick from input where condition is True, else from other (torch.where). Numbers are fine.

    With only a condition, returns the tuple of index tensors (torch.nonzero(as_tuple=True)).
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    c = condition._data if isinstance(condition, Tensor) else np.asarray(condition)
    if c.dtype.kind != "b":
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {dtypes.from_np(c.dtype).name.capitalize()}")
    if not isinstance(input, Tensor):
        input = _t(input, other if isinstance(other, Tensor) else None)
    if not isinstance(other, Tensor):
        other = _t(other, input)
    a, b = input._data, other._data
    if a.dtype != b.dtype:
        rt = dtypes.result_type(a, b)
        if a.dtype != rt:
            input = input.to(dtypes.from_np(rt))
        if b.dtype != rt:
            other = other.to(dtypes.from_np(rt))
    try:  # report the first pair that fails, in PyTorch's order (cond, self, other)
        first = np.broadcast_shapes(c.shape, input._data.shape)
    except ValueError:
        raise _broadcast_error(c.shape, input._data.shape) from None
    try:
        np.broadcast_shapes(first, other._data.shape)
    except ValueError:
        raise _broadcast_error(first, other._data.shape) from None
    return apply(R["where"], (input, other), (c,))


def masked_fill(input, mask, value):
    """Fill positions where the bool `mask` is True with `value` (torch.masked_fill)."""
    m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype.kind != "b":
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{dtypes.from_np(m.dtype)}")
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value._data.ndim} dimension(s).")
        return apply(R["masked_fill"], (input, value), (m,))
    s = input._data.shape
    if m.shape != s and _broadcast_batch(m.shape, s) != s:  # (torch's text when incompatible)
        raise _broadcast_error(s, m.shape)
    return apply(R["masked_fill_scalar"], (input,), (_filled_like(value, input)._data, m))


# ---- comparisons and logic: no gradient ------------------------------------------------------
def _cmp(ufunc, name):
    def f(input, other):
        a = input._data if isinstance(input, Tensor) else input
        b = other._data if isinstance(other, Tensor) else other
        try:
            return _fresh(_arr(ufunc(a, b)))
        except ValueError:
            raise _broadcast_error(np.shape(a), np.shape(b)) from None
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (torch.{name}); returns a bool tensor, no gradient."
    return f


eq = _cmp(np.equal, "eq")
ne = _cmp(np.not_equal, "ne")
lt = _cmp(np.less, "lt")
le = _cmp(np.less_equal, "le")
gt = _cmp(np.greater, "gt")
ge = _cmp(np.greater_equal, "ge")
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
logical_and = _cmp(np.logical_and, "logical_and")
logical_or = _cmp(np.logical_or, "logical_or")
logical_xor = _cmp(np.logical_xor, "logical_xor")


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


bitwise_and = _ints_only(_cmp(np.bitwise_and, "bitwise_and"))
bitwise_or = _ints_only(_cmp(np.bitwise_or, "bitwise_or"))
bitwise_xor = _ints_only(_cmp(np.bitwise_xor, "bitwise_xor"))


def _nograd_unary(fn, name):
    def f(input):
        d = input._data
        return _fresh(_arr(fn(d) if type(d) is np.ndarray else
                           getattr(backend.get_array_module(d), fn.__name__)(d)))
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (torch.{name}); no gradient."
    return f


logical_not = _nograd_unary(np.logical_not, "logical_not")
bitwise_not = _ints_only(_nograd_unary(np.invert, "bitwise_not"))
isnan = _nograd_unary(np.isnan, "isnan")
isinf = _nograd_unary(np.isinf, "isinf")
isfinite = _nograd_unary(np.isfinite, "isfinite")
signbit = _nograd_unary(np.signbit, "signbit")


def round(input, *, decimals=0):
    """Round to `decimals` places, halves to even (torch.round); gradient zero (RoundBackward0,
    RoundBackward1 with decimals)."""
    if decimals == 0:
        return apply(R["round"], (input,))
    return apply(R["round_decimals"], (input,), (decimals,))


def equal(input, other):
    """True when both have the same shape and elements (torch.equal)."""
    return input._data.shape == other._data.shape and bool((input._data == other._data).all())


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |a - b| <= atol + rtol * |b| as a bool tensor (torch.isclose)."""
    return _fresh(_arr(np.isclose(input._data, _t(other)._data, rtol, atol, equal_nan)))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element isclose (torch.allclose); returns a Python bool."""
    return bool(np.allclose(input._data, _t(other)._data, rtol, atol, equal_nan))


def all(input, dim=None, keepdim=False):
    """True where all elements (over `dim`) are nonzero; a bool tensor (torch.all)."""
    return _fresh(_arr(np.all(input._data, axis=dim, keepdims=keepdim)))


def any(input, dim=None, keepdim=False):
    """True where any element (over `dim`) is nonzero; a bool tensor (torch.any)."""
    return _fresh(_arr(np.any(input._data, axis=dim, keepdims=keepdim)))


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


def count_nonzero(input, dim=None):
    """Number of nonzero elements, over `dim` or all; int64 (torch.count_nonzero)."""
    return _fresh(_arr(np.count_nonzero(input._data, axis=dim)).astype(np.int64))


# ================================================================================================
# reductions
# ================================================================================================
def _dims(dim, ndim):
    """Normalise dim (int, tuple, list or None) to None, an int, or a sorted tuple."""
    if dim is None:
        return None
    if ndim == 0:  # dims -1 and 0 of a 0-d tensor: nothing to reduce (PyTorch allows them)
        for d in (dim if isinstance(dim, (tuple, list)) else (dim,)):
            _dim(d, 0)
        return ()
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return None
        ds = tuple(sorted(_dim(d, ndim) for d in dim))
        return ds if len(ds) > 1 else ds[0]
    return _dim(dim, ndim)


def _red_args(dim, keepdim, axis, keepdims):
    if axis is not None:
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    return dim, keepdim


def sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Sum of all elements, or over `dim` (int or tuple) (torch.sum). Ints sum to int64."""
    d = input._data
    if dim is None and axis is None and dtype is None and not keepdim and d.dtype.kind == "f":
        return apply(_SUM, (input,), (None,))  # the common case, kept short
    dim, keepdim = _red_args(dim, keepdim, axis, keepdims)
    dt = dtypes.to_np(dtype)
    if dt is not None and dt != d.dtype and d.dtype.kind == "f":
        input, d, dt = to_dtype(input, dtype), None, None
        d = input._data
    if dt is None and d.dtype.kind in "biu":
        dt = np.dtype(np.int64)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        r = apply(R["sum"], (input,), (dt,))
        return r if not keepdim else r.reshape((1,) * d.ndim)
    return apply(R["sum_dim"], (input,), (_dims(dim, d.ndim), keepdim, dt))


_SUM = R["sum"]


def _float_check(input, name):
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"{name}(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: "
                           f"{dtypes.from_np(input._data.dtype)._tensor_name[:-6]}")


def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Mean of all elements, or over `dim` (torch.mean). Needs a floating dtype."""
    dim, keepdim = _red_args(dim, keepdim, axis, keepdims)
    if dtype is not None:
        input = input.to(dtype)
    _float_check(input, "mean")
    if dim is None:
        r = apply(R["mean"], (input,))
        return r if not keepdim else r.reshape((1,) * input._data.ndim)
    return apply(R["mean_dim"], (input,), (_dims(dim, input._data.ndim), keepdim))


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product of all elements, or along `dim` (torch.prod); zeros are handled in backward."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        return apply(R["prod"], (input,))
    return apply(R["prod_dim"], (input,), (_dim(dim, input._data.ndim), keepdim))


_minmax = collections.namedtuple("max", ["values", "indices"])
_minmax_min = collections.namedtuple("min", ["values", "indices"])


def _empty_check(input, name):
    if input._data.size == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                           "== 0. Specify the reduction dim with the 'dim' argument.")


def max(input, dim=None, keepdim=False, *, out=None):
    """Max of all elements; with `dim`, (values, indices); with a tensor, maximum (torch.max)."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        _empty_check(input, "max")
        return apply(R["max"], (input,))
    return _vals_indices(R["max_dim"], input, dim, keepdim, _minmax)


def min(input, dim=None, keepdim=False):
    """Min of all elements; with `dim`, (values, indices); with a tensor, minimum (torch.min)."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        _empty_check(input, "min")
        return apply(R["min"], (input,))
    return _vals_indices(R["min_dim"], input, dim, keepdim, _minmax_min)


def _vals_indices(row, input, dim, keepdim, ntuple):
    return ntuple(*apply(row, (input,), (_dim(dim, input._data.ndim), keepdim)))


def amax(input, dim=(), keepdim=False):
    """Max over `dim` (all if empty); ties share the gradient evenly (torch.amax)."""
    return apply(R["amax"], (input,), (_dims(dim, input._data.ndim), keepdim))


def amin(input, dim=(), keepdim=False):
    """Min over `dim` (all if empty); ties share the gradient evenly (torch.amin)."""
    return apply(R["amin"], (input,), (_dims(dim, input._data.ndim), keepdim))


def argmax(input, dim=None, keepdim=False):
    """Index of the max (flattened when dim is None) (torch.argmax). int64, no gradient."""
    d = input._data
    if dim is None:
        return _fresh(_arr(np.argmax(d)).astype(np.int64))
    return _fresh(_arr(np.argmax(d, axis=_dim(dim, d.ndim), keepdims=keepdim)).astype(np.int64))


def argmin(input, dim=None, keepdim=False):
    """Index of the min (torch.argmin). int64, no gradient."""
    d = input._data
    if dim is None:
        return _fresh(_arr(np.argmin(d)).astype(np.int64))
    return _fresh(_arr(np.argmin(d, axis=_dim(dim, d.ndim), keepdims=keepdim)).astype(np.int64))


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance (Bessel-corrected by default) (torch.var)."""
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _float_check(input, "var")
    return apply(R["var"], (input,), (_dims(dim, input._data.ndim),
                                      _correction(unbiased, correction), keepdim))


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation (Bessel-corrected by default) (torch.std)."""
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _float_check(input, "std")
    return apply(R["std"], (input,), (_dims(dim, input._data.ndim),
                                      _correction(unbiased, correction), keepdim))


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over all elements or `dim` (torch.norm; 'fro' is p=2)."""
    if p == "fro" or p is None:
        p = 2
    if dtype is not None:
        input = input.to(dtype)
    return apply(R["norm"], (input,), (float(p) if p not in (1, 2) else p,
                                       _dims(dim, input._data.ndim), keepdim))


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input), dim)), computed stably (torch.logsumexp)."""
    return apply(R["logsumexp"], (input,), (_dims(dim, input._data.ndim), keepdim))


def softmax(input, dim, dtype=None):
    """exp(x) / sum(exp(x)) along `dim` (torch.softmax); saves its output."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(R["softmax"], (input,), (_dim(dim, input._data.ndim),))


def log_softmax(input, dim, dtype=None):
    """x - logsumexp(x, dim), stable (torch.log_softmax); saves its output."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(R["log_softmax"], (input,), (_dim(dim, input._data.ndim),))


def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along `dim` (torch.cumsum)."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(R["cumsum"], (input,), (_dim(dim, input._data.ndim),))


# ================================================================================================
# linear algebra
# ================================================================================================
def matmul(input, other, *, out=None):
    """Matrix product with numpy/PyTorch broadcasting rules (torch.matmul).

    (n,)@(n,) -> () DotBackward0; (n,m)@(m,p) MmBackward0; (n,m)@(m,) MvBackward0;
    (b,n,m)@(b,m,p) BmmBackward0; other batched cases MatmulBackward0.
    """
    a, b = input._data, other._data
    if out is None and a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0] and \
            a.dtype is b.dtype and type(a) is type(b):
        return apply(_MM, (input, other))  # the usual case, checked
    if out is not None:
        return _out("matmul", lambda: matmul(input, other), (input, other), out)
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{dtypes.from_np(a.dtype).name} != {dtypes.from_np(b.dtype).name}")
    if type(a) is not type(b):
        raise _device_error(a, b)
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb and a.ndim == 2 and b.ndim == 1:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{ka}), "
                           f"vec ({kb})")
    if ka != kb:
        if a.ndim == 2 and b.ndim == 2:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{ka} and "
                               f"{b.shape[0]}x{b.shape[1]})")
        if a.ndim == 1 and b.ndim == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                               f"[{b.shape[0]}] to have the same number of elements, but got "
                               f"{a.shape[0]} and {b.shape[0]} elements respectively")
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{b.shape[0] if b.ndim > 2 else 1}, {ka}] but got: "
                           f"[{b.shape[0] if b.ndim > 2 else 1}, {kb}].")
    return _matmul(input, other)


_MM = R["mm"]


def _matmul(a, b):
    """matmul as PyTorch decomposes it (aten's _matmul_impl), so the graph shows the same nodes:
    mm / mv / dot; a batched operand folded into the rows of one mm or mv (UnsafeViewBackward0
    around it) when torch folds; else expand both to the broadcast batch, fold it into one dim,
    bmm, unfold. The views are applied as rows directly (no public reshape / expand)."""
    da, db = a._data.ndim, b._data.ndim
    if da == 2 and db == 2:
        return apply(R["mm"], (a, b))
    if da == 1 and db == 1:
        return apply(R["dot"], (a, b))
    if da == 2 and db == 1:
        return apply(R["mv"], (a, b))
    if da == 1 and db == 2:
        return apply(R["squeeze_dims_"], (apply(R["mm"], (unsqueeze(a, 0), b)),), ((0,),))
    if _should_fold(a, b, da, db):
        return _matmul_folded(a, b, da, db)
    sa, sb = a._data.shape, b._data.shape
    if da == 3 and db == 3 and sa[0] != sb[0]:  # a batch of one that requires grad: squeezed
        if sa[0] == 1 and a._requires_grad:
            return _matmul(apply(R["squeeze_dim"], (a,), (0,)), b)
        if sb[0] == 1 and b._requires_grad:
            return _matmul(a, apply(R["squeeze_dim"], (b,), (0,)))
    if da > 1 and db > 1 and _GRAD.enabled and (a._requires_grad or b._requires_grad) and \
            type(a._data) is np.ndarray and type(b._data) is np.ndarray and fused.usable():
        r = _bmm_fused(a, b)
        if r is not None:
            return r
    return _bmm_chain(a, b)


def _bmm_chain(a, b):
    """Batched matmul: expand both to the broadcast batch, fold it into one dim, bmm, unfold."""
    da, db = a._data.ndim, b._data.ndim
    sa, sb = a._data.shape, b._data.shape
    ba, bb = sa[:-2], sb[:-2]
    batch = ba if ba == bb else _broadcast_batch(ba, bb)
    n, k = sa[-2] if da > 1 else 1, sa[-1]
    p = sb[-1] if db > 1 else 1
    rows = math.prod(batch)
    a3 = _fold(apply(R["expand"], (a,), (batch + (n, k),)), (rows, n, k))
    if db == 1:
        b3 = apply(R["unsqueeze"], (_fold(apply(R["expand"], (b,), (batch + (k,),)), (rows, k)),),
                   (2,))
        out = apply(R["squeeze_dim"], (apply(R["bmm"], (a3, b3)),), (2,))
    else:
        b3 = _fold(apply(R["expand"], (b,), (batch + (k, p),)), (rows, k, p))
        out = apply(R["bmm"], (a3, b3))
    shape = batch + ((n,) if da > 1 else ()) + ((p,) if db > 1 else ())
    return apply(R["unsafe_view"], (out,), (shape,))


def _bmm_fused(a, b):
    """`_bmm_chain` of two operands of 2 dims or more, recorded as one UnsafeViewBackward0 node
    (nbgrad.autograd.fused) whose backward runs the chain's formulas (unsafe_view, bmm, view or
    reshape_alias, expand) on arrays; the chain's nodes are built when looked at. None when a
    fold would copy (then the chain is recorded as it is)."""
    ad, bd = a._data, b._data
    sa, sb = ad.shape, bd.shape
    n, k, p = sa[-2], sa[-1], sb[-1]
    if len(sa) == 3 and len(sb) == 3 and sa[0] == sb[0]:
        # one batch dim, the same (attention's q @ k^T): the expands and folds are the
        # operands as they are
        batch, rows = sa[:1], sa[0]
        fa = _VIEW if ad.flags.c_contiguous else _RESHAPE_ALIAS
        fb = _VIEW if bd.flags.c_contiguous else _RESHAPE_ALIAS
        out3 = _BMM.fwd(ad, bd)
    else:
        ba, bb = sa[:-2], sb[:-2]
        batch = ba if ba == bb else _broadcast_batch(ba, bb)
        rows = math.prod(batch)
        ea, eb = _EXPAND.fwd(ad, batch + (n, k)), _EXPAND.fwd(bd, batch + (k, p))
        fa = _VIEW if ea.flags.c_contiguous else _RESHAPE_ALIAS
        fb = _VIEW if eb.flags.c_contiguous else _RESHAPE_ALIAS
        try:
            a3, b3 = fa.fwd(ea, (rows, n, k)), fb.fwd(eb, (rows, k, p))
        except _ViewImpossible:
            return None
        out3 = _BMM.fwd(a3, b3)
    r = _fresh(_arr(_UNSAFE_VIEW.fwd(out3, batch + (n, p))))
    ra, rb = a._requires_grad, b._requires_grad
    fused.record(r, _UNSAFE_VIEW.node, (tuple(out3.shape),), (a, b),
                 ("self" if rb else None, "mat2" if ra else None), 2 * ra + 2 * rb + 1,
                 _bmm_fused_backward, _bmm_chain,
                 (batch, rows, n, k, p, fa, fb, sa, sb))
    return r


def _bmm_fused_backward(node, g, arrays):
    """The chain's formulas in the order its nodes would run: unsafe_view, bmm, then per
    operand view (or reshape_alias) and expand."""
    ad, bd = arrays
    batch, rows, n, k, p, fa, fb, sa, sb = node._chain.info
    g3 = _UNSAFE_VIEW.vjp(0, g, (rows, n, p))
    (ca, _), (cb, _) = node._next
    ga = gb = None
    same = len(sa) == len(sb) == 3 and sa[0] == sb[0]  # (the operands were the folds)
    if ca is not None:
        b3 = bd if same else fb.fwd(_EXPAND.fwd(bd, batch + (k, p)), (rows, k, p))
        ga = _EXPAND.vjp(0, fa.vjp(0, _BMM.vjp(0, g3, b3, None), batch + (n, k)), sa)
    if cb is not None:
        a3 = ad if same else fa.fwd(_EXPAND.fwd(ad, batch + (n, k)), (rows, n, k))
        gb = _EXPAND.vjp(0, fb.vjp(0, _BMM.vjp(1, g3, None, a3), batch + (k, p)), sb)
    return [ga, gb]


_EXPAND, _BMM, _UNSAFE_VIEW = R["expand"], R["bmm"], R["unsafe_view"]
_VIEW, _RESHAPE_ALIAS = R["view"], R["reshape_alias"]


def _should_fold(a, b, da, db):
    """aten's should_fold: whether the operand of 3 dims or more (the other one's transpose
    when that is the larger) is folded into the rows of one mm / mv instead of a bmm."""
    larger = da >= db
    if not ((da if larger else db) >= 3 and (db if larger else da) <= 2):
        return False
    if (b if larger else a)._requires_grad:
        return True
    if da == 2:
        return False
    t1 = a._data if larger else b._data.swapaxes(-2, -1)
    if not t1.size:
        return True
    shape, strides = t1.shape, t1.strides
    return builtins.all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(t1.ndim - 2))


def _matmul_folded(a, b, da, db):
    """The larger operand (or b's transpose) viewed as one matrix: mm / mv, unfolded; with the
    transpose, the result is transposed back and made contiguous (CloneBackward0), as torch."""
    transpose = db > da
    if transpose:
        t1 = apply(R["transpose"], (b,), (db - 2, db - 1))
        t2 = apply(R["t"], (a,)) if da == 2 else a
    else:
        t1, t2 = a, b
    s1 = t1._data.shape
    shape = s1[:-1]
    folded = _fold(t1, (math.prod(shape), s1[-1]))
    if t2._data.ndim == 1:
        return apply(R["unsafe_view"], (apply(R["mv"], (folded, t2)),), (shape,))
    out = apply(R["unsafe_view"], (apply(R["mm"], (folded, t2)),), (shape + t2._data.shape[1:],))
    if not transpose:
        return out
    return contiguous(apply(R["transpose"], (out,), (len(shape) - 1, len(shape))))


def _broadcast_batch(ba, bb):
    """The broadcast of two batch shapes (tuple), or PyTorch's error."""
    n = builtins.max(len(ba), len(bb))
    out = []
    for x, y in zip((1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb):
        if x != y and x != 1 and y != 1:
            raise _broadcast_error(ba, bb)
        out.append(y if x == 1 else x)
    return tuple(out)


def _fold(x, shape):
    """reshape(x, shape) for a known shape of the same size: a view (ViewBackward0, or
    ReshapeAliasBackward0 on non-contiguous input the strides allow), else a copy
    (CloneBackward0, UnsafeViewBackward0), as PyTorch's reshape."""
    try:
        return apply(R["view" if x._data.flags.c_contiguous else "reshape_alias"], (x,),
                     (shape,))
    except _ViewImpossible:
        return apply(R["unsafe_view"], (clone(x),), (shape,))


def mm(input, mat2):
    """(n, m) @ (m, p) (torch.mm)."""
    if input._data.ndim != 2 or mat2._data.ndim != 2:
        raise RuntimeError("self must be a matrix" if input._data.ndim != 2 else
                           "mat2 must be a matrix")
    return matmul(input, mat2)


def bmm(input, mat2):
    """(b, n, m) @ (b, m, p) (torch.bmm)."""
    if input._data.ndim != 3 or mat2._data.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if input._data.ndim != 3 else
                           "batch2 must be a 3D tensor")
    if input._data.shape[0] != mat2._data.shape[0] or input._data.shape[2] != \
            mat2._data.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input._data.shape[0]}, {input._data.shape[2]}] but got: "
                           f"[{mat2._data.shape[0]}, {mat2._data.shape[1]}].")
    return apply(R["bmm"], (input, mat2))


def dot(input, other):
    """Inner product of two 1-D tensors (torch.dot)."""
    if input._data.ndim != 1 or other._data.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input._data.ndim}D and "
                           f"{other._data.ndim}D tensors")
    return matmul(input, other)


def mv(input, vec):
    """(n, m) @ (m,) (torch.mv)."""
    return matmul(input, vec)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2); `input` broadcasts to (n, p) (torch.addmm).

    This is what nn.Linear uses on 2-D input: grad_fn AddmmBackward0.
    """
    a, b = mat1._data, mat2._data
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError("mat1 must be a matrix, got {}-D tensor".format(a.ndim) if a.ndim != 2
                           else "mat2 must be a matrix, got {}-D tensor".format(b.ndim))
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} "
                           f"and {b.shape[0]}x{b.shape[1]})")
    return apply(R["addmm"], (input, mat1, mat2), (beta, alpha))


def outer(input, vec2):
    """Outer product of two 1-D tensors, (n,) x (m,) -> (n, m) (torch.outer)."""
    return mul(reshape(input, -1, 1), vec2)


def linalg_cross(input, other, *, dim=-1):
    """Cross product of 3-vectors along ``dim`` (torch.linalg.cross): input, other (..., 3, ...)
    broadcast against each other; one LinalgCrossBackward0 node.

    Raises:
        RuntimeError: ``dim`` of length other than 3 (PyTorch's text), or shapes that do not
            broadcast.
    """
    a, b = input._data, other._data
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = _dim(dim, a.ndim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")
    return apply(R["linalg_cross"], (input, other), (d,))


def cross(input, other, dim=None):
    """Cross product of 3-vectors (torch.cross): along ``dim``, or, when it is None (deprecated
    in PyTorch, with its warning), along the first dimension of size 3. LinalgCrossBackward0.

    Raises:
        RuntimeError: no dimension of size 3 (PyTorch's text); see :func:`linalg_cross`.
    """
    if dim is None:
        import warnings
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
                      "The default value of dim will change to agree with that of linalg.cross "
                      "in a future release.", UserWarning, stacklevel=2)
        shape = input._data.shape
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim)


def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm of v over every dim but ``dim``, keeping them as size-1 dims (shape
    (n, 1, ...) for dim 0); dim -1: the norm of all of v, 0-d (torch.norm_except_dim)."""
    p = float(pow) if pow not in (1, 2) else pow
    nd = v._data.ndim
    if dim == -1:
        return apply(R["norm"], (v,), (p, None, False))
    dim = _dim(dim, nd)
    shape = v._data.shape
    if dim == 0:  # composed as PyTorch composes it: a view, a norm, a view back
        n = apply(R["norm"], (v.contiguous().view(shape[0], -1),), (p, 1, False))
        return n.view(shape[0], *[1] * (nd - 1))
    if dim == nd - 1:
        n = apply(R["norm"], (v.contiguous().view(-1, shape[-1]),), (p, 0, False))
        return n.view(*[1] * (nd - 1), shape[-1])
    return norm_except_dim(v.transpose(0, dim), pow, 0).transpose(0, dim)


def _weight_norm(v, g, dim=0):
    """w = v * g / ||v|| with the norm over every dim but ``dim`` (torch._weight_norm, what
    nn.utils.weight_norm computes before each forward): v (out, ...), g of the norm's shape
    ((out, 1, ...) for dim 0). For the first or last dim one WeightNormInterfaceBackward0 node,
    as PyTorch's fused kernel; other dims and -1 (the whole tensor) composed: MulBackward0.

    Raises:
        IndexError: dim out of range (PyTorch's text).
    """
    if dim != -1:
        dim = _dim(dim, v._data.ndim)
    if dim not in (0, v._data.ndim - 1):  # PyTorch's fused kernel serves the first and last
        return v * (g / norm_except_dim(v, 2, dim))
    return apply(R["weight_norm_interface"], (v, g), (dim,))


_lu_factor = collections.namedtuple("linalg_lu_factor", ["LU", "pivots"])
_lu_unpack = collections.namedtuple("lu_unpack", ["P", "L", "U"])


def _no_lu_grad(name, *ts):
    if is_grad_enabled() and builtins.any(isinstance(t, Tensor) and t.requires_grad for t in ts):
        node = "LuUnpackBackward0" if name == "lu_unpack" else "LinalgLuFactorExBackward0"
        raise RuntimeError(f"nbgrad does not implement the derivative of {name} yet (PyTorch "
                           f"records {node}): call it under no_grad() or on a tensor that does "
                           "not require grad")


def linalg_lu_factor(A, *, pivot=True):
    """LU factorisation with partial pivoting, LAPACK's getrf (torch.linalg.lu_factor): A
    (..., m, n) -> LU (..., m, n) holding L below the diagonal (unit diagonal implied) and U on
    and above it, pivots (..., min(m, n)) int32, 1-based row swaps. No gradient yet.

    Raises:
        RuntimeError: A requires grad (nbgrad has no derivative for it yet), or pivot=False.
    """
    _no_lu_grad("lu_factor", A)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    a = np.array(A._data, copy=True)
    m, n = a.shape[-2:]
    k = builtins.min(m, n)
    piv = np.zeros(a.shape[:-2] + (k,), dtype=np.int32)
    rows = np.arange(m)
    for j in range(k):  # one column at a time, vectorised over the batch
        p = np.abs(a[..., j:, j]).argmax(-1) + j
        piv[..., j] = p + 1
        pj = np.take_along_axis(a, p[..., None, None] * np.ones((1, n), dtype=int), -2)
        rj = a[..., j:j + 1, :].copy()
        np.put_along_axis(a, p[..., None, None] * np.ones((1, n), dtype=int), rj, -2)
        a[..., j:j + 1, :] = pj
        d = a[..., j, j]
        below = rows > j
        with np.errstate(divide="ignore", invalid="ignore"):
            a[..., below, j] = a[..., below, j] / d[..., None]
        a[..., j + 1:, j + 1:] -= a[..., j + 1:, j:j + 1] * a[..., j:j + 1, j + 1:]
    return _lu_factor(Tensor._make_fresh(a), Tensor._make_fresh(piv))


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's result, A = P @ L @ U (torch.lu_unpack): P (..., m, m), L
    (..., m, k) unit lower, U (..., k, n) upper. No gradient yet.

    Raises:
        RuntimeError: LU_data requires grad (nbgrad has no derivative for it yet).
    """
    _no_lu_grad("lu_unpack", LU_data)
    a = LU_data._data
    m, n = a.shape[-2:]
    k = builtins.min(m, n)
    L = U = P = None
    if unpack_data:
        L = np.tril(a[..., :, :k], -1) + np.eye(m, k, dtype=a.dtype)
        U = np.triu(a[..., :k, :])
    if unpack_pivots:
        piv = LU_pivots._data.astype(np.int64) - 1
        perm = np.broadcast_to(np.arange(m), piv.shape[:-1] + (m,)).copy()
        for j in range(k):
            pj = piv[..., j:j + 1]
            a_j = perm[..., j:j + 1].copy()
            perm[..., j:j + 1] = np.take_along_axis(perm, pj, -1)
            np.put_along_axis(perm, pj, a_j, -1)
        P = (perm[..., :, None] == np.arange(m)).swapaxes(-1, -2).astype(a.dtype)
    empty = np.zeros((0,), dtype=a.dtype)
    return _lu_unpack(*(Tensor._make_fresh(x if x is not None else empty) for x in (P, L, U)))


_LU_WARNED = [False]


def _tensor_lu(self, pivot=True, get_infos=False):
    """Tensor.lu (deprecated torch.lu, with PyTorch's once-per-process warning): (LU, pivots),
    and infos (zeros) with get_infos."""
    if not _LU_WARNED[0]:
        _LU_WARNED[0] = True
        warnings.warn(
            "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex "
            "and will be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, "
            "compute_pivots)\nshould be replaced with\nLU, pivots = torch.linalg.lu_factor(A, "
            "compute_pivots)\nand\nLU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)"
            "\nshould be replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, "
            "compute_pivots)", UserWarning, stacklevel=2)
    LU, piv = linalg_lu_factor(self, pivot=pivot)
    if get_infos:
        return LU, piv, creation.zeros(*self.shape[:-2], dtype=dtypes.int32)
    return LU, piv


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distance between each pair of rows (torch.cdist): x1 (B, P, M), x2 (B, R, M)
    (or without the batch dims, broadcast) -> (B, P, R). Its graph is PyTorch's: one
    CdistBackward0 node, or for p = 2 with more than 25 rows on either side (or
    compute_mode='use_mm_for_euclid_dist') EuclideanDistBackward0 then ViewBackward0.

    Raises:
        RuntimeError: fewer than 2 dims, different M, or p < 0 (PyTorch's texts).
    """
    a, b = x1._data, x2._data
    if a.ndim < 2 or b.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {a.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} "
                           f"X2: {b.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    rows1, rows2 = a.shape[-2], b.shape[-2]
    mm = compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary" and (rows1 > 25 or rows2 > 25))
    if p == 2 and mm:
        d = apply(R["euclidean_dist"], (x1, x2), ())
        return view(d, *d._data.shape)
    return apply(R["cdist"], (x1, x2), (float(p),))


_svd_result = collections.namedtuple("svd", ["U", "S", "V"])


def svd(input, some=True, compute_uv=True):
    """Singular value decomposition, PyTorch's older form (torch.svd): (U, S, V) with
    input = U diag(S) V^T for input (..., m, n). ``some`` gives the reduced U (m, k) and V (n, k),
    k = min(m, n); ``some=False`` the full U (m, m) and V (n, n). ``compute_uv=False`` gives
    zero U (m, m) and V (n, n), as PyTorch does. U and S come from one LinalgSvdBackward0 node, V through TransposeBackward0, as in
    PyTorch (which recommends torch.linalg.svd, whose third output is V^T).
    """
    if not compute_uv:
        s = apply(R["linalg_svd"], (input,), (False,))[1]
        m, n = input._data.shape[-2:]
        batch = tuple(input._data.shape[:-2])
        return _svd_result(creation.zeros(*batch, m, m, dtype=input.dtype), s,
                           creation.zeros(*batch, n, n, dtype=input.dtype))
    U, S, Vh = apply(R["linalg_svd"], (input,), (not some,))
    return _svd_result(U, S, transpose(Vh, -2, -1))


# ================================================================================================
# convolution and pooling
# ================================================================================================
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (torch.conv2d): input (N, C, H, W), weight (O, C/groups, kh, kw),
    bias (O,) -> (N, O, Ho, Wo). One ConvolutionBackward0 node.

    Raises:
        RuntimeError: PyTorch's messages for wrong ranks and channel counts.
    """
    x, w = input._data, weight._data
    if x.ndim != 4:
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                           f"input of size: {list(x.shape)}")
    if w.ndim != 4:
        raise RuntimeError(f"weight should have 4 dimensions for conv2d, got {w.ndim}")
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected "
                           f"input{list(x.shape)} to have {w.shape[1] * groups} channels, but got "
                           f"{x.shape[1]} channels instead")
    if x.dtype != w.dtype:
        raise RuntimeError(f"Input type ({type_name_of(input)}) and weight type "
                           f"({type_name_of(weight)}) should be the same")
    return apply(R["convolution"], (input, weight, bias), (stride, padding, dilation, groups))


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """Max over (kh, kw) windows with -inf padding, and the flat H*W index of each maximum:
    (N, C, H, W) -> ((N, C, Ho, Wo), int64 indices). One MaxPool2DWithIndicesBackward0 node."""
    return _max_pool2d("max_pool2d_with_indices", input, kernel_size, stride, padding, dilation,
                       ceil_mode)


def _max_pool2d(row, input, kernel_size, stride, padding, dilation, ceil_mode):
    if input._data.ndim != 4:
        raise RuntimeError(f"max_pool2d: Expected 3D or 4D tensor for input, but got "
                           f"{list(input._data.shape)}")
    return apply(R[row], (input,), (kernel_size, stride, padding, dilation, ceil_mode))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling (torch.max_pool2d); the int64 indices are built only when asked for."""
    if return_indices:
        return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return _max_pool2d("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)


def type_name_of(t):
    """'nbgrad.FloatTensor'-style type string of a tensor (for error messages)."""
    return type_name(t._data.dtype, t._data)


# ================================================================================================
# joining
# ================================================================================================
def cat(tensors, dim=0, *, out=None):
    """Concatenate along `dim` (torch.cat); shapes must match elsewhere."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    if out is not None:
        return _out("cat", lambda: cat(tensors, dim), tuple(tensors), out)
    for i, t in enumerate(tensors):
        if t._data.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    ts = [t for t in tensors if not (t._data.ndim == 1 and t._data.shape[0] == 0)] or tensors[:1]
    nd = ts[0]._data.ndim
    d = _dim(dim, nd)
    for i, t in enumerate(ts):
        if t._data.ndim != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and "
                               f"{t._data.ndim}")
        for k in range(nd):
            if k != d and t._data.shape[k] != ts[0]._data.shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. "
                                   f"Expected size {ts[0]._data.shape[k]} but got size "
                                   f"{t._data.shape[k]} for tensor number {i} in the list.")
    sizes = tuple(t._data.shape[d] for t in ts)
    return apply(R["cat"], tuple(ts), (sizes, d, tuple(t._data.dtype for t in ts)))


concat = concatenate = cat


def stack(tensors, dim=0, *, out=None):
    """Stack equal-shaped tensors along a new `dim` (torch.stack)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    if out is not None:
        return _out("stack", lambda: stack(tensors, dim), tuple(tensors), out)
    s0 = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != s0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(s0)} "
                               f"at entry 0 and {list(t._data.shape)} at entry {i}")
    d = _dim(dim, len(s0) + 1)
    return apply(R["stack"], tuple(tensors), (len(tensors), d))


def hstack(tensors):
    """Concatenate along dim 1 (dim 0 for 1-D tensors) (torch.hstack)."""
    return cat(tensors, 1 if tensors[0].ndim > 1 else 0)


def vstack(tensors):
    """Stack rows: 1-D tensors become (1, n), then concatenate along dim 0 (torch.vstack)."""
    return cat([t.reshape(1, -1) if t.ndim == 1 else t for t in tensors], 0)


# ================================================================================================
# views and shape
# ================================================================================================
def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = shape[0]
    return tuple(map(int, shape))


def _infer(shape, numel):
    """`shape` with its one -1 (if any) inferred from `numel`; PyTorch's errors."""
    known, neg = 1, -1
    for i, s in enumerate(shape):
        if s == -1:
            if neg >= 0:
                raise RuntimeError("only one dimension can be inferred")
            neg = i
        else:
            known *= s
    if neg >= 0:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        return shape[:neg] + (numel // known,) + shape[neg + 1:]
    if known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def view(input, *shape):
    """Same storage, new shape; needs compatible strides (torch.Tensor.view).

    Raises TypeError without a size, RuntimeError when the strides do not allow the view."""
    if not shape:
        raise TypeError("view() received an invalid combination of arguments - got (), but "
                        "expected one of:\n * (torch.dtype dtype)\n * (tuple of ints size)\n")
    if len(shape) == 1 and isinstance(shape[0], dtypes.dtype):
        raise NotImplementedError("nbgrad: view(dtype) is not supported")
    shape = _infer(_shape_arg(shape), input._data.size)
    try:
        return apply(R["view"], (input,), (shape,))
    except _ViewImpossible:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.") from None


def reshape(input, *shape):
    """A view when the strides allow, else a copy (torch.reshape). TypeError without a shape."""
    if not shape:
        raise TypeError('reshape() missing 1 required positional arguments: "shape"')
    # PyTorch: view when contiguous, else _reshape_alias when the strides allow, else a copy
    return _fold(input, _infer(_shape_arg(shape), input._data.size))


def ravel(input):
    """The elements of ``input`` as a contiguous 1-D tensor (torch.ravel): a view
    (ViewBackward0) when ``input`` is contiguous, else a copy (CloneBackward0 then
    ViewBackward0), as PyTorch's."""
    return view(contiguous(input), -1)


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim (torch.flatten); a view when possible."""
    s = input._data.shape
    if len(s) == 0:
        return reshape(input, 1)
    a, b = _dim(start_dim, len(s)), _dim(end_dim, len(s))
    if a > b:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if a == b:
        return input
    return reshape(input, s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:])


def unflatten(input, dim, sizes):
    """Split dim into `sizes` (torch.unflatten); a view."""
    s = input._data.shape
    d = _dim(dim, len(s))
    sizes = tuple(sizes)
    known = math.prod(n for n in sizes if n != -1)
    if (-1 not in sizes and known != s[d]) or (-1 in sizes and (known == 0 or s[d] % known)):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size "
                           f"of dim {d} ({s[d]}) in the input tensor")
    sizes = _infer(sizes, s[d])
    return view(input, s[:d] + tuple(sizes) + s[d + 1:])


def transpose(input, dim0, dim1):
    """Swap two dims; a view (torch.transpose)."""
    nd = input._data.ndim
    d0, d1 = _dim(dim0, nd), _dim(dim1, nd)
    return apply(R["transpose"], (input,), (d0, d1))


swapaxes = swapdims = transpose


def t(input):
    """Transpose of a <= 2-D tensor; a view (torch.t)."""
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{input._data.ndim}D")
    return apply(R["t"], (input,))


def permute(input, *dims):
    """Reorder dims; a view (torch.permute)."""
    dims = _shape_arg(dims)
    nd = input._data.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {nd} is not equal to len(dims) = {len(dims)}")
    dims = tuple(_dim(d, nd) for d in dims)
    if len(set(dims)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return apply(R["permute"], (input,), (dims,))


def expand(input, *sizes):
    """Broadcast to `sizes` without copying (-1 keeps a dim); a view (torch.Tensor.expand)."""
    sizes = _shape_arg(sizes)
    s = input._data.shape
    if len(sizes) < len(s):
        raise RuntimeError(f"expand({type_name_of(input)}{{{list(s)}}}, size={list(sizes)}): the "
                           f"number of sizes provided ({len(sizes)}) must be greater or equal to "
                           f"the number of dimensions in the tensor ({len(s)})")
    return apply(R["expand"], (input,), (_expand_shape(s, sizes),))


def _expand_shape(s, sizes):
    """The target shape of expanding shape `s` to `sizes` (-1 keeps a dim), checked from the
    last dim backwards with PyTorch's texts."""
    lead = len(sizes) - len(s)
    target = [0] * len(sizes)
    for i in range(len(sizes) - 1, -1, -1):
        n = sizes[i]
        cur = s[i - lead] if i >= lead else None
        if n == -1:
            if cur is None:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            n = cur
        elif cur is not None and cur != 1 and cur != n:
            raise RuntimeError(f"The expanded size of the tensor ({n}) must match the existing "
                               f"size ({cur}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(sizes)}.  Tensor sizes: {list(s)}")
        target[i] = n
    return tuple(target)


def broadcast_to(input, shape):
    """expand to `shape`; a view (torch.broadcast_to)."""
    return expand(input, *shape)


def expand_as(input, other):
    """expand to other.shape; a view (torch.Tensor.expand_as)."""
    return expand(input, *other.shape)


def squeeze(input, dim=None):
    """Remove size-1 dims (all, or `dim`); a view (torch.squeeze)."""
    if dim is None:
        return apply(R["squeeze"], (input,))
    if isinstance(dim, (tuple, list)):
        dims = tuple(sorted(_dim(d, input._data.ndim) for d in dim))
        return apply(R["squeeze_dims"], (input,), (dims,))
    if input._data.ndim == 0:
        return apply(R["squeeze_dim"], (input,), (0,))
    return apply(R["squeeze_dim"], (input,), (_dim(dim, input._data.ndim),))


def unsqueeze(input, dim):
    """Insert a size-1 dim at `dim`; a view (torch.unsqueeze)."""
    return apply(R["unsqueeze"], (input,), (_dim(dim, input._data.ndim + 1),))


def narrow(input, dim, start, length):
    """Elements start..start+length along `dim`; a view (torch.narrow)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    start = int(start)
    if start < 0:
        start += n
    if start < 0 or start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _slice(input, d, slice(start, start + length, 1))


def _slice(input, d, slc):
    index = (slice(None),) * d + (slc,)
    return apply(R["slice"], (input,), (index,))


def select(input, dim, index):
    """The slice at `index` along `dim`, dropping that dim; a view (torch.select)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    i = int(index)
    if i < -n or i >= n:
        raise IndexError(f"select(): index {i} out of range for tensor of size "
                         f"{list(input._data.shape)} at dimension {d}")
    if i < 0:
        i += n
    idx = (slice(None),) * d + (i, Ellipsis)  # Ellipsis keeps a 0-d result an array (a view)
    return apply(R["select"], (input,), (idx,))


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims dim1, dim2 as the last dim; a writable view (torch.diagonal)."""
    nd = input._data.ndim
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    shape, strides, off = _geom(input)
    n1, n2 = shape[d1], shape[d2]
    if offset >= 0:
        length = _builtin_max(0, _builtin_min(n1, n2 - offset))
        off += offset * strides[d2] if length else 0
    else:
        length = _builtin_max(0, _builtin_min(n1 + offset, n2))
        off += -offset * strides[d1] if length else 0
    keep = [i for i in range(nd) if i not in (d1, d2)]
    vshape = tuple(shape[i] for i in keep) + (length,)
    vstrides = tuple(strides[i] for i in keep) + (strides[d1] + strides[d2],)
    return apply(R["diagonal"], (input,), (_geom(input), (vshape, vstrides, off),
                                           input._storage._root))


def as_strided(input, size, stride, storage_offset=None):
    """A view with explicit size, stride and storage offset, in elements (torch.as_strided)."""
    off = input.storage_offset() if storage_offset is None else int(storage_offset)
    size, stride = tuple(size), tuple(stride)
    return apply(R["as_strided"], (input,), (_geom(input), (size, stride, off),
                                             input._storage._root))


def unfold(input, dimension, size, step):
    """All windows of `size` elements along `dimension`, `step` apart, as a new last dim;
    a view (torch.Tensor.unfold). (N, L) -> (N, (L - size) // step + 1, size) for dimension 1."""
    d = _dim(dimension, input._data.ndim) if input._data.ndim else 0
    a = input._data
    L = a.shape[d] if a.ndim else 1
    if size > L:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {L} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return apply(R["unfold"], (input,), (d, size, step))


def unbind(input, dim=0):
    """Tuple of the slices along `dim`; views that refuse in-place changes (torch.unbind)."""
    d = _dim(dim, input._data.ndim)
    return apply(R["unbind"], (input,), (d, input._data.shape[d]))


def split(input, split_size_or_sections, dim=0):
    """Split into chunks of a size, or of the given sizes, along `dim`; views (torch.split)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s <= 0 and n:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        sizes = [s] * (n // s) + ([n % s] if n % s else []) if s else [0]
        row = R["split"]
    else:
        sizes = list(split_size_or_sections)
        if _builtin_sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                               f"tensor's size at dimension {d}), but got split_sizes={sizes}")
        row = R["split_sizes"]
    return apply(row, (input,), (tuple(sizes), d))


def chunk(input, chunks, dim=0):
    """Split into `chunks` nearly equal pieces along `dim`; views (torch.chunk)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input._data.shape[_dim(dim, input._data.ndim)]
    size = -(-n // chunks) if n else 1
    return split(input, size, dim)


def _safe_softmax(input, dim, dtype=None):
    """Softmax along `dim` where a slice that is -inf throughout gives zeros, not nan
    (torch._safe_softmax, attention's softmax; one SafeSoftmaxBackward0 node)."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    return apply(R["_safe_softmax"], (input,), (_dim(dim, input._data.ndim),))


def unsafe_split(input, split_size, dim=0):
    """Like :func:`split`, but the pieces are not views: they may be modified in place
    (torch.unsafe_split; one UnsafeSplitBackward0 node). Here they are copies."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if split_size <= 0 and n:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                           f"dimension size of {n}")
    sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else []) \
        if split_size else [0]
    outs = apply(R["unsafe_split"], (input,), (tuple(sizes), d))
    return tuple(outs)


def unsafe_chunk(input, chunks, dim=0):
    """Like :func:`chunk`, pieces that are not views (torch.unsafe_chunk; UnsafeSplitBackward0)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input._data.shape[_dim(dim, input._data.ndim)]
    return unsafe_split(input, -(-n // chunks) if n else 1, dim)


def contiguous(input, memory_format=None):
    """Self if C-contiguous, else a contiguous copy (CloneBackward0) (torch.Tensor.contiguous)."""
    if input._data.flags.c_contiguous:
        return input
    return apply(R["clone"], (input,), (True,))


def clone(input, *, memory_format=None):
    """A copy with its own storage; differentiable (CloneBackward0) (torch.clone)."""
    return apply(R["clone"], (input,), (False,))


def flip(input, *dims):
    """Reverse the order along `dims`; a copy (torch.flip)."""
    dims = _shape_arg(dims) if dims and not isinstance(dims[0], int) else tuple(dims)
    return apply(R["flip"], (input,), (tuple(_dim(d, input._data.ndim) for d in dims),))


def to_dtype(input, dtype):
    """A copy in `dtype` (ToCopyBackward0 when floating), or the tensor itself if already that
    dtype."""
    dt = dtypes.to_np(dtype)
    if input._data.dtype == dt:
        return input
    if dt.kind == "f":
        return apply(R["to_copy"], (input,), (dt, input._data.dtype))
    return _fresh(input._data.astype(dt))  # not differentiable: no node


# ================================================================================================
# indexing
# ================================================================================================
def _is_basic(idx):
    for i in idx:
        if i is None or i is Ellipsis or type(i) is int or type(i) is slice or type(i) is bool:
            if type(i) is bool:
                return False
            continue
        if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            continue
        return False
    return True


def _index_arrays(input, idx):
    """The index arrays of `idx` (a tuple) on `input`'s device: lists and host arrays or CPU
    index tensors for a device tensor are copied there (PyTorch accepts CPU indices too)."""
    index = tuple(_to_index_array(i) for i in idx)
    xp = backend.get_array_module(input._data)
    if xp is np:
        return index
    return tuple(xp.asarray(i) if isinstance(i, np.ndarray) else i for i in index)


def _to_index_array(i):
    if isinstance(i, float):
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                         "Variables are valid indices (got float)")
    if isinstance(i, Tensor):
        a = i._data
        if a.dtype.kind not in "biu":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if isinstance(i, (list, tuple)):
        a = np.asarray(i)
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if isinstance(i, slice):
        for v in (i.start, i.stop, i.step):
            if isinstance(v, Tensor):
                return slice(*(int(x) if isinstance(x, Tensor) else x for x in
                               (i.start, i.stop, i.step)))
        if i.step is not None and i.step <= 0:
            raise ValueError("step must be greater than zero")
        return i
    if isinstance(i, np.ndarray):
        return i
    return i


def getitem(input, idx):
    """Indexing (torch.Tensor.__getitem__): basic indexing gives views (Select/Slice/Unsqueeze
    nodes, as in PyTorch); integer tensors, lists and bool masks give copies (IndexBackward0)."""
    if input._data.ndim == 0:
        _torch_errors.check_0d_index(idx)
    if not isinstance(idx, tuple):
        idx = (idx,)
    if _is_basic(idx):
        return _basic_index(input, idx)
    index = _index_arrays(input, idx)
    _check_masks(input, index)
    _torch_errors.check_index(input._data.ndim, index)
    try:
        return apply(R["index"], (input,), (index,))
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None


def _check_masks(input, index):
    """PyTorch's text for a bool mask whose shape does not match the dims it indexes."""
    d = 0
    for i in index:
        if isinstance(i, np.ndarray) and i.dtype.kind == "b":
            want = input._data.shape[d:d + i.ndim]
            for k, (m, n) in enumerate(zip(i.shape, want)):
                if m != n:
                    raise IndexError(f"The shape of the mask {list(i.shape)} at index {k} does not "
                                     f"match the shape of the indexed tensor "
                                     f"{list(input._data.shape)} at index {d + k}")
            d += i.ndim
        elif i is not None:
            d += 1


def _basic_index(input, idx):
    nd = input._data.ndim
    if nd and len(idx) == 1 and type(idx[0]) is slice:  # x[a:b], a batch's rows: no loop
        r = _slice_along(input, 0, idx[0])
        return r if r is not input else _slice(input, 0, slice(0, input._data.shape[0], 1))
    n_real = _builtin_sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > nd:
        raise IndexError(f"too many indices for tensor of dimension {nd}")
    if not idx or builtins.all(i is Ellipsis for i in idx):
        return apply(R["alias"], (input,))

    r = input
    d = 0
    for i in idx:
        if i is None:
            r = unsqueeze(r, d)
            d += 1
        elif i is Ellipsis:
            d += nd - n_real
        elif isinstance(i, slice):
            r = _slice_along(r, d, i)
            d += 1
        else:
            i = int(i)
            n = r._data.shape[d]
            if i < -n or i >= n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            r = select(r, d, i)
    if r is input:
        if len(idx) == 1 and isinstance(idx[0], slice):  # x[:], x[0:n]: SliceBackward0
            return _slice(input, 0, slice(0, nd and input._data.shape[0], 1))
        return apply(R["alias"], (input,))
    return r


def _slice_along(r, d, i):
    """`r` sliced by the slice `i` along dim `d` (SliceBackward0), or `r` itself when `i`
    takes all of it."""
    if i.step is not None and i.step <= 0:
        raise ValueError("step must be greater than zero")
    n = r._data.shape[d]
    start, stop, step = i.indices(n)
    if start == 0 and stop >= n and step == 1:
        return r
    return _slice(r, d, slice(start, _builtin_max(stop, start), step))


def setitem(input, idx, value):
    """`t[idx] = value`: copy_ into the view (basic index) or index_put_ (advanced); one
    version bump either way, CopySlices / IndexPutBackward0 in the graph (torch semantics)."""
    if input._data.ndim == 0:
        _torch_errors.check_0d_index(idx)
    if not isinstance(idx, tuple):
        idx = (idx,)
    if _is_basic(idx):
        whole = _whole(input, idx)
        dst = input if whole else _basic_index(input, idx)
        if isinstance(value, Tensor) and value._data.ndim and \
                value._data.shape != dst._data.shape:
            value = _expanded_value(value, dst._data.shape)
        if whole:
            # the whole tensor: PyTorch fills / copies into it directly (no view, no CopySlices);
            # a 0-d tensor gets copy_ (CopyBackwards)
            if isinstance(value, Tensor) and value._data.ndim or input._data.ndim == 0:
                copy_(input, value)
            else:
                v = value if isinstance(value, Tensor) else \
                    _filled_like(value, input)
                apply(R["fill_tensor"], (input, v), (), inplace="fill_")
            return None
        if isinstance(value, Tensor) and not value._data.ndim and dst._data.ndim:
            # a 0-d value fills the target (read before writing: no overlap check)
            apply(R["fill_tensor"], (dst, value), (), inplace="fill_")
        else:
            copy_(dst, value, _op_name="copy_")
        return None
    if isinstance(value, Tensor) and value._data.ndim and value._data.shape[0] == 1:
        value = _strip_leading_ones(value)
    index = _index_arrays(input, idx)
    if not isinstance(value, Tensor):
        value = _filled_like(value, input)
    elif value._data.dtype != input._data.dtype:
        value = value.to(input.dtype)
    index_put_(input, index, value)
    return None


def _expanded_value(value, shape):
    """The value of `t[i] = value` as PyTorch's copy_to makes it: viewed without its leading
    size-1 dims (ViewBackward0), then expanded to the target's shape (ExpandBackward0) unless
    it has it already; copy_ then judges any overlap with the target on these strides."""
    value = _strip_leading_ones(value)
    return value if value._data.shape == shape else expand(value, *shape)


def _strip_leading_ones(value):
    """`value` viewed without its leading size-1 dims ((1, n) -> (n,)), as PyTorch views the
    value of a setitem (ViewBackward0, also when there are none to strip)."""
    shape = value._data.shape
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return view(value, tuple(shape[k:]))


def _whole(input, idx):
    """Whether a basic index selects the whole tensor (only full-range, step-1 slices)."""
    if _builtin_sum(1 for i in idx if i is not Ellipsis) > input._data.ndim:
        return False
    shape = input._data.shape
    if Ellipsis in idx:
        k = idx.index(Ellipsis)
        dims = list(range(k)) + list(range(len(shape) - (len(idx) - k - 1), len(shape)))
        parts = idx[:k] + idx[k + 1:]
    else:
        dims, parts = range(len(idx)), idx
    for d, i in zip(dims, parts):
        # as PyTorch: a literal full slice (start None/0, step None/1, stop None or >= size)
        if not isinstance(i, slice) or i.start not in (None, 0) or i.step not in (None, 1) or \
                not (i.stop is None or (isinstance(i.stop, int) and i.stop >= shape[d])):
            return False
    return True


def index_put_(input, indices, values, accumulate=False):
    """input[indices] = values (or += with accumulate) in place (torch.Tensor.index_put_)."""
    index = _index_arrays(input, indices if isinstance(indices, tuple) else (indices,))
    _torch_errors.check_index(input._data.ndim, index)
    if not isinstance(values, Tensor):
        values = _filled_like(values, input)
    if values._data.dtype != input._data.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_kind_name(input._data.dtype)} for the destination and "
                           f"{_kind_name(values._data.dtype)} for the source.")
    return apply(R["index_put"], (input, values), (index, accumulate), inplace="index_put_")


def _kind_name(dt):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
            "int32": "Int", "bool": "Bool", "uint8": "Byte"}.get(str(dt), str(dt))


def index_put(input, indices, values, accumulate=False):
    """Out-of-place index_put_: a clone with values put at `indices` (torch.index_put)."""
    return index_put_(clone(input), indices, values, accumulate)


def index_add(input, dim, index, source, *, alpha=1):
    """input with source's slices added at `index` along `dim` (torch.index_add)."""
    d = _dim(dim, input._data.ndim)
    ix = index._data if isinstance(index, Tensor) else np.asarray(index)
    if alpha != 1:
        source = source * alpha
    if source._data.dtype != input._data.dtype:
        source = source.to(input.dtype)
    return apply(R["index_add"], (input, source), (d, ix))


def index_select(input, dim, index):
    """Rows of `dim` picked by the 1-D int tensor `index`; a copy (torch.index_select)."""
    d = _dim(dim, input._data.ndim)
    ix = index._data if isinstance(index, Tensor) else np.asarray(index)
    if ix.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if ix.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32/int64 for index")
    n = input._data.shape[d]
    if ix.size and (ix.max() >= n or ix.min() < -n):
        raise IndexError("index out of range in self")
    return apply(R["index_select"], (input,), (d, ix))


def gather(input, dim, index):
    """out[i][j] = input[index[i][j]][j] for dim=0, etc. (torch.gather)."""
    d = _dim(dim, input._data.ndim)
    ix = index._data
    if ix.dtype.kind not in "iu":
        raise RuntimeError("gather(): Expected dtype int64 for index")
    if ix.ndim != input._data.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    n = input._data.shape[d]
    if ix.size and (ix.max() >= n or ix.min() < -n):
        raise RuntimeError(f"index {int(ix.max())} is out of bounds for dimension {d} with size "
                           f"{n}")
    return apply(R["gather"], (input,), (d, ix))


def take_along_dim(input, indices, dim=None):
    """gather(input, dim, indices); with dim None, of the flattened input (torch.take_along_dim)."""
    if dim is None:
        return gather(reshape(input, -1), 0, reshape(indices, -1))
    return gather(input, dim, indices)


# ================================================================================================
# in-place ops (each bumps the version by exactly one)
# ================================================================================================
def _ip_binary(row_name, op_name, alpha=False):
    row = R[row_name]
    if alpha:
        def f(self, other, *rest, alpha=1):
            if rest:
                other, alpha = _alpha_first(op_name, other, rest)
            return apply(row, (self, other), (alpha,), inplace=op_name)
    else:
        def f(self, other):
            return apply(row, (self, other), (), inplace=op_name)
    f.__name__ = op_name
    f.__doc__ = f"In-place {row_name} (torch.Tensor.{op_name}); bumps _version by 1."
    return f


add_ = _ip_binary("add", "add_", alpha=True)
sub_ = _ip_binary("sub", "sub_", alpha=True)
mul_ = _ip_binary("mul", "mul_")


def div_(self, other):
    """In-place true division (torch.Tensor.div_); bumps _version by 1."""
    return apply(R["div"], (self, other), (), inplace="div_")


def pow_(self, exponent):
    """In-place power (torch.Tensor.pow_); bumps _version by 1."""
    if isinstance(exponent, Tensor):
        return apply(R["pow_tt"], (self, exponent), (), inplace="pow_")
    return apply(R["pow"], (self,), (_scalar_arg(exponent),), inplace="pow_")


def _ip_unary(row_name, op_name):
    row = R[row_name]

    def f(self):
        return apply(row, (self,), (), inplace=op_name)
    f.__name__ = op_name
    f.__doc__ = f"In-place {row_name} (torch.Tensor.{op_name}); bumps _version by 1."
    return f


neg_ = _ip_unary("neg", "neg_")
exp_ = _ip_unary("exp", "exp_")
tanh_ = _ip_unary("tanh", "tanh_")
sigmoid_ = _ip_unary("sigmoid", "sigmoid_")
relu_ = _ip_unary("relu", "relu_")
zero_ = _ip_unary("zero", "zero_")
log_ = _ip_unary("log", "log_")
sqrt_ = _ip_unary("sqrt", "sqrt_")
abs_ = _ip_unary("abs", "abs_")


def clamp_(self, min=None, max=None):
    """In-place clamp (torch.Tensor.clamp_); bumps _version by 1."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return apply(R["clamp_tensor"], (self,) + _clamp_bounds(self, min, max), (),
                     inplace="clamp_")
    return apply(R["clamp"], (self,), (min, max), inplace="clamp_")


clip_ = clamp_


def fill_(self, value):
    """Fill with `value` in place (torch.Tensor.fill_); bumps _version by 1.

    `value` is a number or a 0-d Tensor; a Tensor is recorded as FillBackward3 and receives
    the sum of the gradient, as in PyTorch. Raises RuntimeError for a Tensor with dimensions."""
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value._data.ndim} dimensions.")
        return apply(R["fill_tensor"], (self, value), (), inplace="fill_")
    return apply(R["fill"], (self,), (_scalar_arg(value),), inplace="fill_")


def copy_(self, src, non_blocking=False, *, _op_name="copy_"):
    """Copy `src` (broadcast, cast) into self (torch.Tensor.copy_); bumps _version by 1."""
    if not isinstance(src, Tensor):
        src = _filled_like(src, self)
    elif type(src._data) is not type(self._data):
        src = src.to(self.device)
    if src._data.shape != self._data.shape:
        _expand_shape(src._data.shape, self._data.shape)  # PyTorch's text if it can't broadcast
    return apply(R["copy"], (self, src), (), inplace=_op_name)


def masked_fill_(self, mask, value):
    """In-place masked_fill (torch.Tensor.masked_fill_); bumps _version by 1."""
    m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype.kind != "b":
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{dtypes.from_np(m.dtype)}")
    if not isinstance(value, Tensor):
        return apply(R["masked_fill_scalar"], (self,), (_filled_like(value, self)._data, m),
                     inplace="masked_fill_")
    return apply(R["masked_fill"], (self, value), (m,), inplace="masked_fill_")


# the random fills and samplers live in sampling.py / random.py; imported to be bound as methods
from .random import multinomial  # noqa: E402,F401
from .sampling import (bernoulli, bernoulli_, cauchy_, exponential_, geometric_,  # noqa: E402,F401
                       log_normal_, normal_, random_, uniform_)


# ================================================================================================
# composed functions (issue 9): einsum, tensordot, kron, meshgrid & co. are built from the public
# functions above, as PyTorch decomposes them, so gradients flow and the graph shows PyTorch's
# nodes; unique, histograms, searchsorted & co. have no gradient (integer or counting results)
# ================================================================================================
def _xp(t):
    return backend.get_array_module(t._data)


def _operand_list(tensors):
    """f(a, b) and f([a, b]) alike (PyTorch's *tensors functions accept both)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(tensors[0])
    return tuple(tensors)


class _Steps:
    """einsum's plan, recorded while the first call on an equation and operand shapes runs:
    each step applies a function to earlier results (slots: the operands first), so later
    calls replay the steps without deciding anything again."""

    __slots__ = ("regs", "steps")

    def __init__(self, operands):
        self.regs = list(operands)
        self.steps = []

    def __call__(self, fn, ins, *args):
        """Run fn(*inputs, *args) now and record it; its slot."""
        self.regs.append(fn(*[self.regs[i] for i in ins], *args))
        self.steps.append((fn, ins, args))
        return len(self.regs) - 1

    def shape(self, slot):
        return self.regs[slot]._data.shape


def _replay(steps, result, operands):
    regs = list(operands)
    for fn, ins, args in steps:
        regs.append(fn(*[regs[i] for i in ins], *args))
    return regs[result]


def _permute_rows(x, dims):  # dims already a complete permutation
    return apply(R["permute"], (x,), (dims,))


def _unsqueeze_row(x, dim):  # 0 <= dim <= x.ndim
    return apply(R["unsqueeze"], (x,), (dim,))


def _bmm_row(a, b):  # (b, n, k) @ (b, k, p), checked by the plan
    return apply(R["bmm"], (a, b))


def _view_row(x, shape):  # a contiguous x
    return apply(R["view"], (x,), (shape,))


def _sumproduct_pair(rec, left, right, sum_dims):
    """sum over `sum_dims` of left * right (same ndim, broadcast on size-1 dims), keeping the
    summed dims as size 1: permute both so that batch (lro), left-only (lo), summed and
    right-only (ro) dims line up, flatten to 3-D, bmm, view and permute back (PyTorch's
    decomposition, so the graph shows its nodes). `left` and `right` are slots of `rec`."""
    if not sum_dims:
        return rec(mul, (left, right))
    ls, rs = list(rec.shape(left)), list(rec.shape(right))
    nd = len(ls)
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(nd):
        sl, sr = ls[i] != 1, rs[i] != 1
        if i in sum_dims:
            if sl and sr:
                if ls[i] != rs[i]:
                    raise RuntimeError("non-broadcast dimensions must match")
                sum_size *= ls[i]
            elif sl:
                left = rec(sum, (left,), i, True)
                ls[i] = 1
            elif sr:
                right = rec(sum, (right,), i, True)
                rs[i] = 1
        elif sl and sr:
            if ls[i] != rs[i]:
                raise RuntimeError("non-broadcast dimensions must match")
            lro.append(i)
            lro_size *= ls[i]
        elif sl:
            lo.append(i)
            lo_size *= ls[i]
        else:
            ro.append(i)
            ro_size *= rs[i]
    if lo and ro and ro[-1] < lo[0]:  # right's dims all come first: bmm(right, left) then
        left, right, lo, ro, lo_size, ro_size = right, left, ro, lo, ro_size, lo_size
        ls, rs = rs, ls
    sum_dims = list(sum_dims)
    out_size = ([ls[d] for d in lro] + [ls[d] for d in lo] + [1] * len(sum_dims) +
                [rs[d] for d in ro])
    lperm = lro + lo + sum_dims + ro
    rperm = lro + sum_dims + ro + lo
    operm = [0] * len(lperm)
    for k, d in enumerate(lperm):
        operm[d] = k
    left = rec(_fold, (rec(_permute_rows, (left,), tuple(lperm)),),
               (lro_size, lo_size, sum_size))
    right = rec(_fold, (rec(_permute_rows, (right,), tuple(rperm)),),
                (lro_size, sum_size, ro_size))
    out = rec(_view_row, (rec(_bmm_row, (left, right)),), tuple(out_size))
    return rec(_permute_rows, (out,), tuple(operm))


_ELLIPSIS = "..."


def _einsum_parse(equation, operands):
    """Labels of each operand (letters and "..."), and the output's (None when implicit)."""
    lhs, arrow, rhs = equation.partition("->")
    labels = [[]]
    seen_ell = False
    i = 0
    while i < len(lhs):
        c = lhs[i]
        if c == ".":
            n = len(labels) - 1
            if seen_ell:
                raise RuntimeError(f"einsum(): found '.' for operand {n} for which an ellipsis "
                                   "was already found")
            if lhs[i:i + 3] != _ELLIPSIS:
                raise RuntimeError(f"einsum(): found '.' for operand {n} that is not part of "
                                   "any ellipsis")
            labels[-1].append(_ELLIPSIS)
            seen_ell = True
            i += 2
        elif c == ",":
            labels.append([])
            seen_ell = False
            if len(labels) > len(operands):
                raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                                   "equation")
        elif c != " ":
            if not (c.isascii() and c.isalpha()):
                raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the "
                                   "equation string, subscripts must be in [a-zA-Z]")
            labels[-1].append(c)
        i += 1
    if len(labels) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    return labels, (rhs if arrow else None), len(lhs)


def einsum(equation, *operands):
    """Einstein summation, e.g. einsum("bij,bjk->bik", a, b) (torch.einsum).

    Every contraction is done as PyTorch does it: diagonals for repeated labels, unsqueeze and
    permute to align the labels, sums of labels only one operand has, then a permute / reshape /
    bmm / view per pair of operands, left to right. Operands may be passed as a list. The steps
    are planned once per equation and operand shapes, then replayed.

    Raises:
        RuntimeError: PyTorch's einsum() messages for malformed equations and size mismatches.
    """
    operands = _operand_list(operands)
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    key = (equation, tuple(x._data.shape for x in operands)) if type(equation) is str else None
    plan = _EINSUM_PLANS.get(key) if key is not None else None
    if plan is not None:  # the same equation on the same shapes: the same steps
        return _replay(plan[0], plan[1], operands)
    rec = _Steps(operands)
    result = _einsum_plan(rec, equation, operands)
    if key is not None:
        if len(_EINSUM_PLANS) >= 256:
            _EINSUM_PLANS.clear()
        _EINSUM_PLANS[key] = (tuple(rec.steps), result)
    return rec.regs[result]


_EINSUM_PLANS = {}  # (equation, operand shapes) -> (steps, result slot)


def _einsum_plan(rec, equation, operands):
    """Run einsum through the recorder `rec` (checking the equation against the shapes, with
    PyTorch's texts); the slot of the result."""
    op_labels, rhs, lhs_len = _einsum_parse(equation, operands)
    count = collections.Counter()
    ell_ndim = 0
    for k, (x, labels) in enumerate(zip(operands, op_labels)):
        nl = len(labels) - labels.count(_ELLIPSIS)
        nd = x._data.ndim
        count.update(x for x in labels if x != _ELLIPSIS)
        if _ELLIPSIS in labels:
            ell_ndim = _builtin_max(ell_ndim, nd - nl)
            if nl > nd:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nl}) "
                                   f"is more than the number of dimensions ({nd}) for operand {k}")
        elif nl != nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nl}) does "
                               f"not match the number of dimensions ({nd}) for operand {k} and "
                               "no ellipsis was given")
    perm_of = {}  # label -> its dim in the aligned layout (output dims, then contracted ones)
    ell_index, n_out = 0, 0
    ell_in_out = rhs is None
    if rhs is None:  # implicit output: the ellipsis, then the labels seen once, sorted
        n_out = ell_ndim
        for lab in sorted(count):
            if count[lab] == 1:
                perm_of[lab] = n_out
                n_out += 1
    else:
        i = 0
        while i < len(rhs):
            c = rhs[i]
            if c == ".":
                if ell_in_out:
                    raise RuntimeError("einsum(): found '.' for output but an ellipsis (...) was "
                                       "already found")
                if rhs[i:i + 3] != _ELLIPSIS:
                    raise RuntimeError("einsum(): found '.' for output that is not part of any "
                                       "ellipsis (...)")
                ell_index, ell_in_out = n_out, True
                n_out += ell_ndim
                i += 2
            elif c != " ":
                if not (c.isascii() and c.isalpha()):
                    raise RuntimeError(f"einsum(): invalid subscript given at index "
                                       f"{lhs_len + 2 + i} in the equation string, subscripts "
                                       "must be in [a-zA-Z]")
                if count[c] == 0 or c in perm_of:
                    raise RuntimeError(f"einsum(): output subscript {c}" + (
                        " appears more than once in the output" if c in perm_of else
                        " does not appear in the equation for any input operand"))
                perm_of[c] = n_out
                n_out += 1
            i += 1
    n_all = n_out
    if not ell_in_out:
        ell_index = n_all
        n_all += ell_ndim
    for lab in sorted(count):
        if lab not in perm_of:
            perm_of[lab] = n_all
            n_all += 1
    size_of, ell_sizes = {}, [1] * ell_ndim
    dim_counts = [0] * n_all  # how many operands have a size != 1 there
    ops = []
    for k, labels in enumerate(op_labels):
        x = k  # the operand's slot
        perm = [-1] * n_all
        d = 0
        for lab in labels:
            if lab == _ELLIPSIS:
                nd = operands[k]._data.ndim - (len(labels) - 1)
                for j in range(ell_ndim - nd, ell_ndim):
                    n = rec.shape(x)[d]
                    if n != 1:
                        if ell_sizes[j] not in (1, n):
                            raise RuntimeError(
                                f"einsum(): dimension {d} covered by ellipsis in operand {k}has "
                                f"size {n} which does not broadcast with previously seen "
                                f"ellipsis with size {ell_sizes[j]} for the respective dimension")
                        ell_sizes[j] = n
                        dim_counts[ell_index + j] += 1
                    perm[ell_index + j] = d
                    d += 1
            elif perm[perm_of[lab]] == -1:
                n = rec.shape(x)[d]
                if n != 1:
                    if size_of.get(lab, 1) not in (1, n):
                        raise RuntimeError(
                            f"einsum(): subscript {lab} has size {n} for operand {k} which does "
                            f"not broadcast with previously seen size {size_of[lab]}")
                    size_of[lab] = n
                    dim_counts[perm_of[lab]] += 1
                perm[perm_of[lab]] = d
                d += 1
            else:  # a repeated label: its diagonal
                prev = perm[perm_of[lab]]
                a, b = rec.shape(x)[d], rec.shape(x)[prev]
                if a != b:
                    raise RuntimeError(f"einsum(): subscript {lab} is repeated for operand {k} "
                                       f"but the sizes don't match, {a} != {b}")
                x = rec(movedim, (rec(diagonal, (x,), 0, prev, d),), -1, prev)
        for j in range(n_all):
            if perm[j] == -1:
                x = rec(_unsqueeze_row, (x,), d)
                perm[j] = d
                d += 1
        ops.append(rec(_permute_rows, (x,), tuple(perm)))
    while len(ops) > 1:  # contract left to right
        a, b = ops.pop(0), ops.pop(0)
        sum_dims, a_sum, b_sum = [], [], []
        shape_a, shape_b = rec.shape(a), rec.shape(b)
        for d in range(n_out, n_all):
            sa, sb = shape_a[d] != 1, shape_b[d] != 1
            if sa and sb:
                dim_counts[d] -= 1
                if dim_counts[d] == 1:
                    sum_dims.append(d)
                    dim_counts[d] = 0
            elif dim_counts[d] == 1:
                if sa:
                    a_sum.append(d)
                    dim_counts[d] = 0
                elif sb:
                    b_sum.append(d)
                    dim_counts[d] = 0
        if a_sum:
            a = rec(sum, (a,), tuple(a_sum), True)
        if b_sum:
            b = rec(sum, (b,), tuple(b_sum), True)
        ops.insert(0, _sumproduct_pair(rec, a, b, sum_dims))
    r = ops[0]
    if n_all > n_out:
        if len(operands) > 1:
            return rec(view, (r,), tuple(rec.shape(r)[:n_out]))
        return rec(sum, (r,), tuple(range(n_out, n_all)))
    return r


def tensordot(a, b, dims=2, out=None):
    """Contract `dims` dims of a with dims of b (torch.tensordot): an int n (a's last n with b's
    first n) or two lists. Permute, reshape to matrices, mm (dot when nothing is left), reshape.
    """
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        na = a._data.ndim
        dims_a, dims_b = list(range(na - dims, na)), list(range(dims))
    else:
        dims_a, dims_b = dims
        dims_a = [dims_a] if isinstance(dims_a, int) else list(dims_a)
        dims_b = [dims_b] if isinstance(dims_b, int) else list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a._data.dtype != b._data.dtype:
        raise RuntimeError("both inputs should have same dtype")
    dims_a = [_dim(d, a._data.ndim) for d in dims_a]
    dims_b = [_dim(d, b._data.ndim) for d in dims_b]
    csize = 1
    t1, t2 = a, b
    for d1, d2 in zip(dims_a, dims_b):
        s1, s2 = a._data.shape[d1], b._data.shape[d2]
        if s2 == 1:  # broadcast dims are summed right away
            t1 = sum(t1, d1, True)
        elif s1 == 1:
            t2 = sum(t2, d2, True)
        else:
            if s1 != s2:
                raise RuntimeError(f"contracted dimensions need to match, but first has size {s1} "
                                   f"in dim {d1} and second has size {s2} in dim {d2}")
            csize *= s1
    p1 = [i for i in range(a._data.ndim) if i not in dims_a]
    p2 = [i for i in range(b._data.ndim) if i not in dims_b]
    rsizes = [t1._data.shape[i] for i in p1] + [t2._data.shape[i] for i in p2]
    t1 = permute(t1, *(p1 + dims_a))
    t2 = permute(t2, *(dims_b + p2))
    if not rsizes:
        r = reshape(dot(flatten(t1), flatten(t2)), ())
    else:
        size1, size2 = math.prod(rsizes[:len(p1)]), math.prod(rsizes[len(p1):])
        r = reshape(mm(reshape(t1, size1, csize), reshape(t2, csize, size2)), tuple(rsizes))
    if out is not None:
        return _out("tensordot", lambda: r, (a, b), out)
    return r


def kron(input, other):
    """Kronecker product (torch.kron): (a0, a1) x (b0, b1) -> (a0*b0, a1*b1); one mul between
    two interleaved views, as PyTorch."""
    nd = _builtin_max(input._data.ndim, other._data.ndim)
    sa = (1,) * (nd - input._data.ndim) + input._data.shape
    sb = (1,) * (nd - other._data.ndim) + other._data.shape
    va = _unsafe_view(input, tuple(x for n in sa for x in (n, 1)))
    vb = _unsafe_view(other, tuple(x for n in sb for x in (1, n)))
    return _unsafe_view(mul(va, vb), tuple(m * n for m, n in zip(sa, sb)))


def _unsafe_view(x, shape):
    return apply(R["unsafe_view"], (x,), (shape,))


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors (torch.meshgrid): each input viewed along its own dim
    and expanded. indexing="ij" (matrix, the default) or "xy" (Cartesian: first two swapped)."""
    tensors = _operand_list(tensors)
    if indexing is None:
        import warnings
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: '
                           f'{indexing}')
    for t in tensors:
        if t._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0
    shape = [tensors[i]._data.size for i in order]
    outs = []
    for i, t in enumerate(tensors):
        vs = [1] * len(tensors)
        vs[order.index(i)] = -1
        outs.append(expand(view(t, tuple(vs)), *shape))
    return tuple(outs)


def broadcast_shapes(*shapes):
    """The shape that all `shapes` broadcast to (torch.broadcast_shapes)."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    try:
        return Size(np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  "
                           f"Mismatch is between {list(shapes[0])} and {list(shapes[1])}") \
            from None


def broadcast_tensors(*tensors):
    """Expand every tensor to their common shape (torch.broadcast_tensors); those already of
    that shape are returned as they are."""
    tensors = _operand_list(tensors)
    shape = tuple(tensors[0]._data.shape)
    for t in tensors[1:]:
        try:
            shape = np.broadcast_shapes(shape, t._data.shape)
        except ValueError:
            raise _broadcast_error(shape, t._data.shape) from None
    return tuple(t if t._data.shape == shape else expand(t, *shape) for t in tensors)


def atleast_1d(*tensors):
    """Tensors with at least one dim: 0-d become (1,) (torch.atleast_1d)."""
    return _atleast_n(tensors, lambda t: reshape(t, 1) if t._data.ndim == 0 else t)


def atleast_2d(*tensors):
    """Tensors with at least two dims: () -> (1, 1), (n,) -> (1, n) (torch.atleast_2d)."""
    def fix(t):
        nd = t._data.ndim
        return reshape(t, 1, 1) if nd == 0 else unsqueeze(t, 0) if nd == 1 else t
    return _atleast_n(tensors, fix)


def atleast_3d(*tensors):
    """Tensors with at least three dims: () -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) ->
    (m, n, 1) (torch.atleast_3d)."""
    def fix(t):
        nd = t._data.ndim
        if nd == 0:
            return reshape(t, 1, 1, 1)
        if nd == 1:
            return unsqueeze(unsqueeze(t, 0), -1)
        return unsqueeze(t, -1) if nd == 2 else t
    return _atleast_n(tensors, fix)


def _atleast_n(tensors, fix):
    """One tensor in, one out; several (or a list), a tuple."""
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return fix(tensors[0])
    return tuple(fix(t) for t in _operand_list(tensors))


def movedim(input, source, destination):
    """Move dims `source` to positions `destination` (ints or sequences); a permute view
    (torch.movedim)."""
    nd = input._data.ndim
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    src = [_dim(d, nd) for d in src]
    dst = [_dim(d, nd) for d in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({src})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({dst})")
    perm = [-1] * nd
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    perm = [p if p != -1 else next(rest) for p in perm]
    return permute(input, *perm)


moveaxis = movedim


def cartesian_prod(*tensors):
    """All combinations of the elements of 1-D tensors, (n1*n2*..., k) (torch.cartesian_prod)."""
    tensors = _operand_list(tensors)
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([flatten(g) for g in grids], 1)


def tile(input, dims):
    """Repeat along each dim; dims shorter than input.ndim are padded with 1s (torch.tile)."""
    dims = tuple(dims) if not isinstance(dims, int) else (dims,)
    dims = (1,) * (input._data.ndim - len(dims)) + dims
    return _repeat(input, dims)


# ---- unique, histograms: rows whose node refuses backward (as PyTorch's) -------------------------
def _pick_outputs(outs, return_inverse, return_counts):
    sel = (outs[0],) + ((outs[1],) if return_inverse else ()) + ((outs[2],) if return_counts
                                                                 else ())
    return sel[0] if len(sel) == 1 else sel


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements, sorted (torch.unique); with `dim`, the distinct slices along it.

    Returns values, and with return_inverse the int64 index of each element (slice) in them
    (input's shape, or (input.shape[dim],)), with return_counts the int64 count of each. Values
    of an input that requires grad carry Unique2Backward0 / UniqueDimBackward0, which refuse
    backward, as in PyTorch.
    """
    if dim is None:
        outs = apply(R["unique"], (input,))
    else:
        outs = apply(R["unique_dim"], (input,), (_dim(dim, input._data.ndim),))
    return _pick_outputs(outs, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse runs of equal consecutive elements (slices along `dim`) into one
    (torch.unique_consecutive); inverse and counts as in unique."""
    d = None if dim is None else _dim(dim, input._data.ndim)
    return _pick_outputs(apply(R["unique_consecutive"], (input,), (d,)), return_inverse,
                         return_counts)


def _float_only(input, kernel):
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{dtypes.from_np(input._data.dtype)._tensor_name[:-6]}'")


def histc(input, bins=100, min=0, max=0):
    """Counts of elements in `bins` equal-width bins over [min, max] (the data's range when both
    are 0); elements outside are ignored; input's dtype, no gradient (torch.histc)."""
    _float_only(input, "histogram_cpu")
    d = input._data
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and d.size:
        lo, hi = float(d.min()), float(d.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc: max must be larger than min, but got min {lo} max {hi}")
    with no_grad():
        return histogram(input, bins, range=(lo, hi))[0]


_histogram = collections.namedtuple("histogram", ["hist", "bin_edges"])


def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of a float tensor (torch.histogram): `bins` an int (equal bins over
    `range`, default the data's min..max) or a 1-D tensor of increasing edges; `weight` sums
    weights instead of counts; density normalises to integrate to 1."""
    _float_only(input, "histogram_cpu")
    d = input._data
    w = None if weight is None else weight._data
    if isinstance(bins, Tensor):
        b = bins._data
    else:
        b = int(bins)
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif d.size:
            lo, hi = float(d.min()), float(d.max())
        else:
            lo = hi = 0.0
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5  # an empty range widened, as numpy and PyTorch do
        if lo > hi:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min {lo} "
                               f"max {hi}")
        range = (lo, hi)
    return _histogram(*apply(R["histogram"], (input,), (w, b, range, density)))


def bincount(input, weights=None, minlength=0):
    """Counts of each value of a 1-D non-negative int tensor, length max(input) + 1 or
    `minlength` (torch.bincount); with `weights`, their sums (float64 unless float32 weights)."""
    d = input._data
    if d.ndim != 1 or d.dtype.kind not in "iub" or (d.size and d.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and weights._data.shape != d.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if weights is None:
        return _fresh(R["bincount"].fwd(None, d, minlength))
    return apply(R["bincount"], (weights,), (d, minlength))


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Indices where `input` would be inserted into the last dim of `sorted_sequence` to keep it
    sorted (torch.searchsorted): side "left" (first such index) or "right" (right=True).
    `sorted_sequence` is 1-D or has input's leading dims; `input` may be a number."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence._data
    xp = _xp(sorted_sequence)
    if sorter is not None:
        seq = xp.take_along_axis(seq, sorter._data, axis=-1)
    scalar = not isinstance(input, Tensor)
    v = xp.asarray(input) if scalar else input._data
    sd = "right" if right else "left"
    if seq.ndim == 1:
        out = xp.searchsorted(seq, v, side=sd)
    else:
        if scalar or seq.shape[:-1] != v.shape[:-1]:
            raise RuntimeError(
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                "dimensions of boundaries tensor and input value tensor must match, but we got "
                f"boundaries tensor {list(seq.shape)} and input value tensor "
                f"{list(v.shape)}")
        s2, v2 = seq.reshape(-1, seq.shape[-1]), v.reshape(-1, v.shape[-1])
        out = xp.stack([xp.searchsorted(s, r, side=sd) for s, r in zip(s2, v2)]).reshape(v.shape)
    return _fresh(_arr(xp.asarray(out).astype(np.int32 if out_int32 else np.int64)))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """Index of the bucket of each element, `boundaries` 1-D increasing (torch.bucketize):
    boundaries[i-1] < x <= boundaries[i], or boundaries[i-1] <= x < boundaries[i] when right."""
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries._data.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def argsort(input, dim=-1, descending=False, stable=False):
    """Indices that sort `input` along `dim` (torch.argsort); int64, no gradient. Equal
    elements keep their order (a stable sort; PyTorch guarantees it only with stable=True)."""
    d = input._data
    if d.ndim == 0:
        return _fresh(backend.get_array_module(d).zeros((), np.int64))
    return _fresh(_sorted_idx(d, _dim(dim, d.ndim), descending).astype(np.int64))


# ---- rows of issue 9: elementwise, and their in-place forms -------------------------------------
log10 = _unary_fn("log10", "Base-10 logarithm")
log2 = _unary_fn("log2", "Base-2 logarithm")
exp2 = _unary_fn("exp2", "2 ** input")
expm1 = _unary_fn("expm1", "exp(input) - 1, accurate near 0")
sinh = _unary_fn("sinh", "Hyperbolic sine")
cosh = _unary_fn("cosh", "Hyperbolic cosine")
asin = arcsin = _unary_fn("asin", "Inverse sine")
acos = arccos = _unary_fn("acos", "Inverse cosine")
atan = arctan = _unary_fn("atan", "Inverse tangent")
erfinv = _unary_fn("erfinv", "Inverse error function")
floor = _unary_fn("floor", "Round down (gradient zero)")
ceil = _unary_fn("ceil", "Round up (gradient zero)")
trunc = fix = _unary_fn("trunc", "Round toward zero (gradient zero)")
frac = _unary_fn("frac", "input - trunc(input)")
sgn = _unary_fn("sgn", "Sign, the complex-aware spelling (real tensors: sign)")


def _binary_fn(name, doc):
    row = R[name]

    def f(input, other):
        _check_tensor(input, name)
        return apply(row, (input, _t(other, input)))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{doc}, elementwise with broadcasting (torch.{name})."
    return f


atan2 = arctan2 = _binary_fn("atan2", "atan(input / other) in the right quadrant")
hypot = _binary_fn("hypot", "sqrt(input ** 2 + other ** 2)")
logaddexp = _binary_fn("logaddexp", "log(exp(input) + exp(other)), stable")
logaddexp2 = _binary_fn("logaddexp2", "log2(2 ** input + 2 ** other), stable")


def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN) (torch.xlogy). Either side
    may be a number: XlogyBackward0 for two tensors, 1 for a number input, 2 for a number
    other."""
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        return apply(R["xlogy"], (_as_float(input), _as_float(other)))
    if isinstance(input, Tensor):
        return apply(R["xlogy_scalar_other"], (_as_float(input),), (float(other),))
    return apply(R["xlogy_scalar_self"], (_as_float(other),), (float(input),))


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN -> nan, +inf -> posinf, -inf -> neginf (default: the dtype's largest finite values)
    (torch.nan_to_num); the gradient passes where input is finite."""
    return apply(R["nan_to_num"], (input,), (nan, posinf, neginf))


def lerp(input, end, weight):
    """input + weight * (end - input) (torch.lerp); weight a number (LerpBackward0) or a tensor
    (LerpBackward1), all broadcasting."""
    if isinstance(weight, Tensor):
        return apply(R["lerp_tensor"], (input, end, weight))
    return apply(R["lerp"], (input, end), (weight,))


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, broadcasting (torch.addcmul)."""
    return apply(R["addcmul"], (input, tensor1, tensor2), (value,))


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2, broadcasting (torch.addcdiv)."""
    return apply(R["addcdiv"], (input, tensor1, tensor2), (value,))


sin_ = _ip_unary("sin", "sin_")
cos_ = _ip_unary("cos", "cos_")
log1p_ = _ip_unary("log1p", "log1p_")
rsqrt_ = _ip_unary("rsqrt", "rsqrt_")
reciprocal_ = _ip_unary("reciprocal", "reciprocal_")
sign_ = _ip_unary("sign", "sign_")
erf_ = _ip_unary("erf", "erf_")
log10_ = _ip_unary("log10", "log10_")
log2_ = _ip_unary("log2", "log2_")
exp2_ = _ip_unary("exp2", "exp2_")
expm1_ = _ip_unary("expm1", "expm1_")
sinh_ = _ip_unary("sinh", "sinh_")
cosh_ = _ip_unary("cosh", "cosh_")
asin_ = _ip_unary("asin", "asin_")
acos_ = _ip_unary("acos", "acos_")
atan_ = _ip_unary("atan", "atan_")
erfinv_ = _ip_unary("erfinv", "erfinv_")
floor_ = _ip_unary("floor", "floor_")
ceil_ = _ip_unary("ceil", "ceil_")
trunc_ = _ip_unary("trunc", "trunc_")
frac_ = _ip_unary("frac", "frac_")
sgn_ = _ip_unary("sgn", "sgn_")
arcsin_, arccos_, arctan_, fix_ = asin_, acos_, atan_, trunc_


def _ip_binary_row(name):
    row = R[name]

    def f(self, other):
        return apply(row, (self, _t(other, self)), (), inplace=name + "_")
    f.__name__ = name + "_"
    f.__doc__ = f"In-place {name} (torch.Tensor.{name}_); bumps _version by 1."
    return f


atan2_, hypot_ = _ip_binary_row("atan2"), _ip_binary_row("hypot")
arctan2_ = atan2_


def xlogy_(self, other):
    """In-place xlogy (torch.Tensor.xlogy_); bumps _version by 1."""
    if isinstance(other, Tensor):
        return apply(R["xlogy"], (self, other), (), inplace="xlogy_")
    return apply(R["xlogy_scalar_other"], (self,), (float(other),), inplace="xlogy_")


def _ip_mod(name):
    def f(self, other):
        if isinstance(other, Tensor):
            return apply(R[name + "_tensor"], (self, other), (), inplace=name + "_")
        return apply(R[name], (self,), (other,), inplace=name + "_")
    f.__name__ = name + "_"
    f.__doc__ = f"In-place {name} (torch.Tensor.{name}_); bumps _version by 1."
    return f


fmod_, remainder_ = _ip_mod("fmod"), _ip_mod("remainder")


def round_(self, *, decimals=0):
    """In-place round (torch.Tensor.round_); bumps _version by 1."""
    if decimals == 0:
        return apply(R["round"], (self,), (), inplace="round_")
    return apply(R["round_decimals"], (self,), (decimals,), inplace="round_")


def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
    """In-place nan_to_num (torch.Tensor.nan_to_num_); bumps _version by 1."""
    return apply(R["nan_to_num"], (self,), (nan, posinf, neginf), inplace="nan_to_num_")


def square_(self):
    """In-place square (torch.Tensor.square_, PowBackward0); bumps _version by 1."""
    return pow_(self, 2)


def lerp_(self, end, weight):
    """In-place lerp (torch.Tensor.lerp_); bumps _version by 1."""
    if isinstance(weight, Tensor):
        return apply(R["lerp_tensor"], (self, end, weight), (), inplace="lerp_")
    return apply(R["lerp"], (self, end), (weight,), inplace="lerp_")


def addcmul_(self, tensor1, tensor2, *, value=1):
    """In-place addcmul (torch.Tensor.addcmul_); bumps _version by 1."""
    return apply(R["addcmul"], (self, tensor1, tensor2), (value,), inplace="addcmul_")


def addcdiv_(self, tensor1, tensor2, *, value=1):
    """In-place addcdiv (torch.Tensor.addcdiv_); bumps _version by 1."""
    return apply(R["addcdiv"], (self, tensor1, tensor2), (value,), inplace="addcdiv_")


# ---- rows of issue 9: sorting, selection, nan-reductions, scans -------------------------------
_rt = {n: collections.namedtuple(n, f) for n, f in (
    ("sort", "values indices"), ("topk", "values indices"), ("kthvalue", "values indices"),
    ("median", "values indices"), ("mode", "values indices"), ("cummax", "values indices"),
    ("cummin", "values indices"), ("aminmax", "min max"))}


def sort(input, dim=-1, descending=False, *, stable=None):
    """(values, indices) sorted along `dim` (torch.sort); the sort is stable, NaN sorts as the
    largest. SortBackward0 (SortBackward1 when `stable` is given): the gradient goes back to
    where each value came from."""
    if input._data.ndim == 0:
        return _rt["sort"](input.clone(), _fresh(np.zeros((), np.int64)))
    row = R["sort" if stable is None else "sort_stable"]
    return _rt["sort"](*apply(row, (input,), (_dim(dim, input._data.ndim), descending)))


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) elements along `dim` and their indices (torch.topk)."""
    d = _dim(dim, _builtin_max(input._data.ndim, 1))
    n = input._data.shape[d] if input._data.ndim else 1
    if k < 0 or k > n:
        raise RuntimeError("selected index k out of range")
    return _rt["topk"](*apply(R["topk"], (input,), (k, d, largest)))


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element along `dim` and its index (torch.kthvalue)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return _rt["kthvalue"](*apply(R["kthvalue"], (input,), (k, d, keepdim)))


def median(input, dim=None, keepdim=False):
    """The lower median of all elements (MedianBackward0), or (values, indices) along `dim`
    (MedianBackward1) (torch.median)."""
    if dim is None:
        return apply(R["median"], (input,))
    return _rt["median"](*apply(R["median_dim"], (input,), (_dim(dim, input._data.ndim),
                                                              keepdim)))


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along `dim` (the smallest if several) and the last index where it
    occurs (torch.mode)."""
    return _rt["mode"](*apply(R["mode"], (input,), (_dim(dim, input._data.ndim), keepdim)))


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum treating NaN as zero (torch.nansum)."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    return apply(R["nansum"], (input,), (_dims(dim, input._data.ndim), keepdim))


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-NaN elements (torch.nanmean): nansum / count, as PyTorch composes it."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    _float_check(input, "nanmean")
    count = sum(logical_not(isnan(input)), dim, keepdim)
    return div(nansum(input, dim, keepdim), count)


def _stat_mean(name, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _float_check(input, name)
    return apply(R[name], (input,), (_dims(dim, input._data.ndim),
                                     _correction(unbiased, correction), keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) in one node, StdMeanBackward0 (torch.std_mean)."""
    return _stat_mean("std_mean", input, dim, unbiased, keepdim, correction)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) in one node, VarMeanBackward0 (torch.var_mean)."""
    return _stat_mean("var_mean", input, dim, unbiased, keepdim, correction)


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over all elements or `dim`; ties share the gradient (torch.aminmax)."""
    d = None if dim is None else _dim(dim, input._data.ndim)
    return _rt["aminmax"](*apply(R["aminmax"], (input,), (d, keepdim)))


def cumprod(input, dim, *, dtype=None):
    """Cumulative product along `dim` (torch.cumprod); zeros are fine in backward."""
    if dtype is not None:
        input = to_dtype(input, dtype)
    return apply(R["cumprod"], (input,), (_dim(dim, input._data.ndim),))


def cummax(input, dim):
    """Running maximum along `dim` and the index where it was reached (torch.cummax)."""
    return _rt["cummax"](*apply(R["cummax"], (input,), (_dim(dim, input._data.ndim),)))


def cummin(input, dim):
    """Running minimum along `dim` and the index where it was reached (torch.cummin)."""
    return _rt["cummin"](*apply(R["cummin"], (input,), (_dim(dim, input._data.ndim),)))


def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along `dim`, stable (torch.logcumsumexp)."""
    return apply(R["logcumsumexp"], (input,), (_dim(dim, input._data.ndim),))


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles (q a number or 1-D tensor in [0, 1]) over all elements or along `dim`
    (torch.quantile), composed as PyTorch does: sort, view, gather both neighbours, lerp_, and
    the quantiles moved to the first dim. A NaN in a reduced row makes its quantiles NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaN (torch.nanquantile): NaN only where a row is all NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, True)


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    if interpolation != "linear":
        raise NotImplementedError("nbgrad: quantile supports interpolation='linear' only")
    scalar_q = not isinstance(q, Tensor)
    qa = np.asarray(q if scalar_q else backend.to_device(q._data, backend.CPU),
                    dtype=input._data.dtype)  # the ranks are worked out on the host
    if ((qa < 0) | (qa > 1)).any():
        raise RuntimeError("quantile() q values must be in the range [0, 1]" if not scalar_q else
                           f"quantile() q must be in the range [0, 1] but got {q}")
    nd = input._data.ndim
    if dim is None:
        srt = sort(flatten(input)).values
        out_shape = [1] * nd if keepdim else []
    else:
        d = _dim(dim, nd)
        x = input if d == nd - 1 else transpose(unsqueeze(input, -1), d, -1)
        srt = sort(x).values
        out_shape = [1 if i == d else n for i, n in enumerate(input._data.shape)
                     if keepdim or i != d]
    n = srt._data.shape[-1]
    srt = view(srt, tuple(out_shape + [n]))  # (..., n), keepdim's size-1 dims included
    nan = np.isnan(backend.to_device(srt._data, backend.CPU))  # NaN sorts last
    qv = qa.reshape(-1)
    if ignore_nan:  # the quantile of the non-NaN values; all NaN: the last (NaN) one
        count = (~nan).sum(-1, keepdims=True)
        ranks = np.where(count == 0, n - 1, qv * (count - 1))
    else:
        ranks = np.where(nan.any(-1, keepdims=True), n - 1, qv * (n - 1))
    below = np.floor(ranks).astype(np.int64)

    def at(i):
        return _fresh(backend.to_device(np.ascontiguousarray(i), backend.device_of(srt._data)))
    values = gather(srt, -1, at(below))
    lerp_(values, gather(srt, -1, at(np.ceil(ranks).astype(np.int64))),
          at((ranks - below).astype(input._data.dtype)))
    if not scalar_q:  # the quantiles first (PyTorch: unsqueeze_(0).transpose_(0, -1))
        values = apply(R["unsqueeze_"], (values,), (0,))
        values = apply(R["transpose_"], (values,), (0, values._data.ndim - 1))
    return apply(R["squeeze_dims_"], (values,), ((values._data.ndim - 1,),))


# ---- rows of issue 9: scatter family and masks --------------------------------------------------
def _index_arg(index, fname):
    ix = index._data if isinstance(index, Tensor) else np.asarray(index)
    if ix.dtype.kind not in "iu":
        raise RuntimeError(f"{fname}(): Expected dtype int64 for index")
    return ix


def _out_and_inplace(plan, name, doc):
    """torch.X and Tensor.X_ from one `plan(input, ...) -> (row, other inputs, args)`: the same
    row, applied out of place or written into self (one version bump)."""
    def f(input, *args, **kwargs):
        row, others, rargs = plan(input, *args, **kwargs)
        return apply(row, (input,) + others, rargs)

    def f_(self, *args, **kwargs):
        row, others, rargs = plan(self, *args, **kwargs)
        return apply(row, (self,) + others, rargs, inplace=name + "_")
    f.__name__ = f.__qualname__ = name
    f_.__name__ = f_.__qualname__ = name + "_"
    f.__doc__ = f"{doc} (torch.{name})."
    f_.__doc__ = f"In-place {name} (torch.Tensor.{name}_); bumps _version by 1."
    return f, f_


def _scatter_plan(input, dim, index, src=None, *, value=None, reduce=None):
    if reduce is not None:
        return _scatter_reduce_plan(input, dim, index, src, {"add": "sum",
                                                             "multiply": "prod"}[reduce])
    d, ix = _dim(dim, input._data.ndim), _index_arg(index, "scatter")
    src = value if src is None else src
    if isinstance(src, Tensor):
        return R["scatter"], (src,), (d, ix)
    return R["scatter_value"], (), (d, ix, src)


def _scatter_add_plan(input, dim, index, src):
    return R["scatter_add"], (src,), (_dim(dim, input._data.ndim),
                                      _index_arg(index, "scatter_add"))


def _scatter_reduce_plan(input, dim, index, src, reduce, *, include_self=True):
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)  # accepted by PyTorch too
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    return R["scatter_reduce"], (src,), (_dim(dim, input._data.ndim), _index_arg(
        index, "scatter_reduce"), reduce, include_self)


def _index_copy_plan(input, dim, index, source):
    return R["index_copy"], (source,), (_dim(dim, input._data.ndim),
                                        _index_arg(index, "index_copy"))


def _index_fill_plan(input, dim, index, value):
    d, ix = _dim(dim, input._data.ndim), _index_arg(index, "index_fill")
    if isinstance(value, Tensor):
        return R["index_fill_tensor"], (value,), (d, ix)
    return R["index_fill"], (), (d, ix, value)


def _masked_scatter_plan(input, mask, source):
    m = _bool_mask(mask, "masked_scatter_")
    if m.shape != input._data.shape:
        m = np.broadcast_to(m, input._data.shape)
    return R["masked_scatter"], (source,), (m,)


scatter, scatter_ = _out_and_inplace(
    _scatter_plan, "scatter", "input with src (a tensor, or a number `value`) written at `index` "
    "along `dim`: out[index[i][j]][j] = src[i][j] for dim=0; ScatterBackward0 / 1")
scatter_add, scatter_add_ = _out_and_inplace(
    _scatter_add_plan, "scatter_add", "input with src added at `index` along `dim`")
scatter_reduce, scatter_reduce_ = _out_and_inplace(
    _scatter_reduce_plan, "scatter_reduce", "input with src reduced into it at `index` along "
    "`dim` by 'sum', 'prod', 'mean', 'amax' or 'amin' (include_self=True); gradients for all "
    "but 'prod'")
index_copy, index_copy_ = _out_and_inplace(
    _index_copy_plan, "index_copy", "input with the slices of `source` copied at `index` along "
    "`dim`")
index_fill, index_fill_ = _out_and_inplace(
    _index_fill_plan, "index_fill", "input with the slices at `index` along `dim` set to `value` "
    "(a number, or a 0-d tensor that gets a gradient)")
masked_scatter, masked_scatter_ = _out_and_inplace(
    _masked_scatter_plan, "masked_scatter", "input with the first elements of `source` written, "
    "in order, where the bool `mask` is True")


def _bool_mask(mask, fname):
    m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype.kind != "b":
        raise RuntimeError(f"{fname}: expected BoolTensor for mask")
    return m


def masked_select(input, mask):
    """The elements where the bool `mask` (broadcasting) is True, as a 1-D tensor
    (torch.masked_select)."""
    return apply(R["masked_select"], (input,), (_bool_mask(mask, "masked_select"),))


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (slice along `dim`) `repeats` times (torch.repeat_interleave); an int
    is unsqueeze/expand/clone/view, a tensor of counts index_select, as PyTorch composes it."""
    if repeats is None:  # repeat_interleave(counts): the indices 0..n-1, each counts[i] times
        c = input._data
        return _fresh(np.repeat(np.arange(c.size), c).astype(np.int64))
    if dim is None:
        input, dim = flatten(input), 0
    d = _dim(dim, input._data.ndim)
    if isinstance(repeats, Tensor) and repeats._data.ndim == 0:
        repeats = int(repeats.item())
    if isinstance(repeats, Tensor):
        r = repeats._data
        if r.size != input._data.shape[d] and r.size != 1:
            raise RuntimeError("repeats must have the same size as input along dim")
        n = input._data.shape[d]
        r = backend.to_device(r, backend.CPU)  # the output's size: known on the host only
        idx = np.repeat(np.arange(n), np.broadcast_to(r, (n,))).astype(np.int64)
        return index_select(input, d, _fresh(backend.to_device(idx, input.device)))
    shape = list(input._data.shape)
    x = unsqueeze(input, d + 1)
    x = expand(x, *(shape[:d + 1] + [repeats] + shape[d + 1:]))
    shape[d] *= repeats
    return view(contiguous(x), tuple(shape))


# ---- rows of issue 9: triangles, diagonals, fused products -------------------------------------
def _matrix_check(input, fname):
    if input._data.ndim < 2:
        raise RuntimeError(f"{fname}: input tensor must have at least 2 dimensions")


def tril(input, diagonal=0):
    """The lower triangle of the last two dims (below and on the `diagonal`-th), zeros above
    (torch.tril)."""
    _matrix_check(input, "tril")
    return apply(R["tril"], (input,), (diagonal,))


def triu(input, diagonal=0):
    """The upper triangle of the last two dims (on and above the `diagonal`-th) (torch.triu)."""
    _matrix_check(input, "triu")
    return apply(R["triu"], (input,), (diagonal,))


def tril_(self, diagonal=0):
    """In-place tril (torch.Tensor.tril_); bumps _version by 1."""
    _matrix_check(self, "tril")
    return apply(R["tril"], (self,), (diagonal,), inplace="tril_")


def triu_(self, diagonal=0):
    """In-place triu (torch.Tensor.triu_); bumps _version by 1."""
    _matrix_check(self, "triu")
    return apply(R["triu"], (self,), (diagonal,), inplace="triu_")


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with the last dim of input on their `offset` diagonal, in dims dim1, dim2 of the
    result (torch.diag_embed): (..., n) -> (..., n + |offset|, n + |offset|)."""
    nd = input._data.ndim + 1
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(R["diag_embed"], (input,), (offset, d1, d2))


def diag(input, diagonal=0):
    """1-D input: a matrix with it on the `diagonal`-th diagonal (DiagEmbedBackward0); 2-D: that
    diagonal as a 1-D copy (torch.diag)."""
    nd = input._data.ndim
    if nd == 1:
        return diag_embed(input, diagonal, 0, 1)
    if nd != 2:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{nd}D")
    return apply(R["diag_copy"], (input,), (diagonal,))


def trace(input):
    """Sum of the main diagonal of a 2-D tensor (torch.trace)."""
    if input._data.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim "
                           f"{input._data.ndim}")
    return apply(R["trace"], (input,))


def _fused(name, shapes):
    """torch.X(input, a, b, *, beta=1, alpha=1) for the fused products addbmm & co., with
    their in-place forms; `shapes` checks the operands (PyTorch's texts)."""
    row = R[name]

    def f(input, a, b, *, beta=1, alpha=1):
        shapes(a, b)
        return apply(row, (input, a, b), (beta, alpha))

    def f_(self, a, b, *, beta=1, alpha=1):
        shapes(a, b)
        return apply(row, (self, a, b), (beta, alpha), inplace=name + "_")
    f.__name__, f_.__name__ = name, name + "_"
    f.__doc__ = (f"beta * input + alpha * product of the two operands, input broadcasting "
                 f"(torch.{name}).")
    f_.__doc__ = f"In-place {name} (torch.Tensor.{name}_); bumps _version by 1."
    return f, f_


def _check_bmm(a, b):
    sa, sb = a._data.shape, b._data.shape
    if len(sa) != 3 or len(sb) != 3:
        raise RuntimeError(f"batch{1 if len(sa) != 3 else 2} must be a 3D tensor")
    if sa[0] != sb[0] or sa[2] != sb[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{sa[0]}, {sa[2]}] but got: [{sb[0]}, {sb[1]}].")


def _check_mv(a, b):
    if a._data.ndim != 2 or b._data.ndim != 1 or a._data.shape[1] != b._data.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a._data.shape[0]}), mat "
                           f"({'x'.join(map(str, a._data.shape))}), vec ({b._data.shape[0]})")


def _check_vectors(a, b):
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got "
                           f"{a._data.ndim}-D" if a._data.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {b._data.ndim}-D")


baddbmm, baddbmm_ = _fused("baddbmm", _check_bmm)
addbmm, addbmm_ = _fused("addbmm", _check_bmm)
addmv, addmv_ = _fused("addmv", _check_mv)
addr, addr_ = _fused("addr", _check_vectors)


def _square(A, fname):
    s = A._data.shape
    if len(s) < 2:
        raise RuntimeError(f"linalg.{fname}: The input tensor A must have at least 2 dimensions.")
    if s[-1] != s[-2]:
        raise RuntimeError(f"linalg.{fname}: A must be batches of square matrices, but they are "
                           f"{s[-2]} by {s[-1]} matrices")


_slogdet = collections.namedtuple("slogdet", ["sign", "logabsdet"])


def det(input):
    """Determinants of (..., n, n) (torch.det = torch.linalg.det; LinalgDetBackward0)."""
    _square(input, "det")
    return apply(R["linalg_det"], (input,))


def inverse(input):
    """Inverses of (..., n, n) (torch.inverse = torch.linalg.inv; LinalgInvExBackward0)."""
    _square(input, "inv")
    return apply(R["linalg_inv"], (input,))


def slogdet(input):
    """(sign, log|det|) of (..., n, n) (torch.slogdet = torch.linalg.slogdet)."""
    _square(input, "slogdet")
    return _slogdet(*apply(R["linalg_slogdet"], (input,)))


def logdet(input):
    """log(det(input)), NaN for a negative determinant (torch.logdet)."""
    sign, lad = slogdet(input)
    return where(sign < 0, float("nan"), lad)


def pinverse(input, rcond=1e-15):
    """The Moore-Penrose pseudo-inverse (torch.pinverse = torch.linalg.pinv;
    LinalgPinvBackward0)."""
    return apply(R["linalg_pinv"], (input,))


def matrix_power(input, n):
    """input multiplied by itself n times (n < 0: its inverse's) (torch.matrix_power =
    torch.linalg.matrix_power), composed of matmuls by binary powers as PyTorch does."""
    _square(input, "matrix_power")
    if n == 0:
        e = creation.eye(input._data.shape[-1], dtype=input.dtype).expand(*input._data.shape)
        return input.clone().copy_(e)
    if n < 0:
        input, n = inverse(input), -n
    if n == 1:
        return input.clone()
    if n == 2:
        return matmul(input, input)
    if n == 3:
        return matmul(matmul(input, input), input)
    z = result = None
    while n > 0:
        bit, n = n % 2, n // 2
        z = input if z is None else matmul(z, z)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def clamp_min_(self, min):
    """In-place clamp_min (torch.Tensor.clamp_min_); bumps _version by 1."""
    return apply(R["clamp_min"], (self,), (min,), inplace="clamp_min_")


def clamp_max_(self, max):
    """In-place clamp_max (torch.Tensor.clamp_max_); bumps _version by 1."""
    return apply(R["clamp_max"], (self,), (max,), inplace="clamp_max_")


absolute_, negative_ = abs_, neg_
subtract_, multiply_ = sub_, mul_
divide_ = true_divide_ = div_


def cumsum_(self, dim, *, dtype=None):
    """In-place cumsum (torch.Tensor.cumsum_); bumps _version by 1."""
    return apply(R["cumsum"], (self,), (_dim(dim, self._data.ndim),), inplace="cumsum_")


def cumprod_(self, dim, *, dtype=None):
    """In-place cumprod (torch.Tensor.cumprod_); bumps _version by 1."""
    return apply(R["cumprod"], (self,), (_dim(dim, self._data.ndim),), inplace="cumprod_")


def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    """In-place addmm (torch.Tensor.addmm_); bumps _version by 1."""
    return apply(R["addmm"], (self, mat1, mat2), (beta, alpha), inplace="addmm_")


def index_add_(self, dim, index, source, *, alpha=1):
    """In-place index_add (torch.Tensor.index_add_); bumps _version by 1."""
    ix = index._data if isinstance(index, Tensor) else np.asarray(index)
    if alpha != 1:
        source = source * alpha
    return apply(R["index_add"], (self, source), (_dim(dim, self._data.ndim), ix),
                 inplace="index_add_")


def _index_tuple(x):
    """An int-like (int, numpy integer, integer 0-d tensor: anything with __index__) or a
    sequence of them, as a tuple of ints."""
    try:
        return (operator.index(x),)
    except TypeError:
        return tuple(operator.index(v) for v in x)


def roll(input, shifts, dims=None):
    """Shift elements along `dims` (ints or tuples) circularly; without dims, of the flattened
    tensor (torch.roll; RollBackward0)."""
    shifts = _index_tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               "dims:0")
        return apply(R["roll"], (input,), (shifts[0], None))
    nd = input._data.ndim
    dims = _index_tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    return apply(R["roll"], (input,), (shifts, tuple(_dim(d, nd) for d in dims)))


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees k times in the plane of `dims` (torch.rot90; Rot90Backward0)."""
    nd = input._data.ndim
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = (_dim(d, nd) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    return apply(R["rot90"], (input,), (k % 4, (d0, d1)))


def block_diag(*tensors):
    """The matrices (0-d -> (1, 1), 1-d -> (1, n)) along the diagonal of one 2-D tensor, zeros
    elsewhere (torch.block_diag; BlockDiagBackward0)."""
    for i, t in enumerate(tensors):
        if t._data.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t._data.ndim} dimensions")
    shapes = tuple((1, 1) if t._data.ndim == 0 else (1, t._data.shape[0]) if t._data.ndim == 1
                   else tuple(t._data.shape) for t in tensors)
    in_shapes = tuple(tuple(t._data.shape) for t in tensors)
    return apply(R["block_diag"], tuple(tensors), (shapes, in_shapes))


def _bind_composed():
    """Tensor methods of the functions in this section (torch.Tensor.unique, ...)."""
    T = Tensor
    for name in ("unique unique_consecutive histc histogram bincount argsort movedim moveaxis "
                 "tile kron tensordot "
                 "log10 log2 exp2 expm1 sinh cosh asin acos atan arcsin arccos arctan erfinv "
                 "frac sgn fix atan2 arctan2 hypot logaddexp logaddexp2 xlogy nan_to_num lerp "
                 "addcmul addcdiv fmod "
                 "sin_ cos_ log1p_ rsqrt_ reciprocal_ sign_ erf_ log10_ log2_ exp2_ expm1_ "
                 "sinh_ cosh_ asin_ acos_ atan_ erfinv_ floor_ ceil_ trunc_ frac_ sgn_ arcsin_ "
                 "arccos_ arctan_ fix_ atan2_ arctan2_ hypot_ xlogy_ fmod_ remainder_ round_ "
                 "nan_to_num_ square_ lerp_ addcmul_ addcdiv_ "
                 "sort topk kthvalue median mode nansum nanmean std_mean var_mean aminmax "
                 "cumprod cummax cummin logcumsumexp quantile nanquantile scatter scatter_add "
                 "scatter_reduce "
                 "index_copy index_fill masked_select masked_scatter scatter_ scatter_add_ "
                 "scatter_reduce_ index_copy_ index_fill_ masked_scatter_ "
                 "repeat_interleave tril triu tril_ triu_ diag_embed diag trace baddbmm "
                 "baddbmm_ addbmm addbmm_ addmv addmv_ addr addr_ det inverse logdet slogdet "
                 "matrix_power pinverse roll rot90 clamp_min_ clamp_max_ absolute_ negative_ "
                 "subtract_ multiply_ divide_ true_divide_ cumsum_ cumprod_ addmm_ index_add_ "
                 "bitwise_and bitwise_or bitwise_xor bitwise_not cross svd ravel").split():
        setattr(T, name, globals()[name])


_bind_composed()


# ================================================================================================
# Tensor methods and operators
# ================================================================================================
def _to(self, *args, **kwargs):
    """Tensor.to(dtype), .to(device), .to(other), .to(device, dtype) (torch.Tensor.to)."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    for a in args:
        if isinstance(a, dtypes.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (str, backend.device)):
            device = a
        elif a is not None:
            dtype = a
    r = self
    if device is not None:
        r = _to_device(r, backend.device(device) if not isinstance(device, backend.device)
                       else device)
    if dtype is not None:
        r = to_dtype(r, dtype)
    return r


def _to_device(self, dev):
    if backend.device_of(self._data) == dev:
        return self
    return apply(R["to_device"], (self,), (backend.device_of(self._data), dev))


def _new_like(fn):
    def f(self, *size, dtype=None, device=None, requires_grad=False):
        return getattr(creation, fn)(*size, dtype=dtype or self.dtype, device=device or
                                     self.device, requires_grad=requires_grad)
    return f


def legacy_init(self, *args, dtype=None, device=None, requires_grad=False):
    """``Tensor(...)``, PyTorch's legacy constructor (bound as Tensor.__init__): ``Tensor(t)`` of
    one tensor is torch.alias(t), a view of it (same dtype, memory and version counter;
    AliasBackward0 when t requires grad: old code flattens parameters this way and
    differentiates through them); anything else is creation.tensor_init's (data copied as the
    default dtype, or sizes)."""
    if len(args) == 1 and isinstance(args[0], Tensor) and dtype is None and device is None:
        a = apply(R["alias"], (args[0],))
        a._storage  # (a view has its Storage: shared, not counted twice)
        for k in ("_data", "_st", "_grad_fn", "_output_nr", "_requires_grad", "_grad",
                  "_view", "_extra"):
            setattr(self, k, getattr(a, k))
        vs = self._storage._views
        if vs and vs[-1]() is a:  # the storage remembers views to wake: this one, not a
            vs[-1] = weakref.ref(self)
        return
    creation.tensor_init(self, *args, dtype=dtype, device=device, requires_grad=requires_grad)


def _sparse_only(name, layout):
    def f(self):
        raise RuntimeError(f"{name} expected sparse {layout}layout but got Strided")
    f.__name__ = name
    f.__doc__ = (f"Tensor.{name}() of a sparse tensor in PyTorch; nbgrad's tensors are dense "
                 "(strided), so it raises PyTorch's RuntimeError for a dense tensor.")
    return f


def _bind():
    T = Tensor
    g = globals()
    T.__init__ = legacy_init
    T.values = _sparse_only("values", "tensor ")
    T.lu = _tensor_lu
    T.indices = _sparse_only("indices", "coordinate tensor ")
    variable.bind(T)
    # operators
    # operators: the functions themselves where the argument order allows (fewer frames in a
    # traceback); the three hottest apply their row directly
    add_row, sub_row, mul_row, one = R["add"], R["sub"], R["mul"], (1,)

    def __add__(s, o):
        __tracebackhide__ = True
        return apply(add_row, (s, o), one)

    def __sub__(s, o):
        __tracebackhide__ = True
        if s._data.dtype.kind == "b" or type(o) is bool or (isinstance(o, Tensor) and
                                                            o._data.dtype.kind == "b"):
            _check_bool_sub(s, o)
        return apply(sub_row, (s, o), one)

    def __mul__(s, o):
        __tracebackhide__ = True
        return apply(mul_row, (s, o))
    T.__add__, T.__sub__, T.__mul__ = __add__, __sub__, __mul__
    T.__radd__ = add
    T.__rsub__ = rsub
    T.__rmul__ = mul
    T.__truediv__ = div
    T.__rtruediv__ = lambda s, o: mul(reciprocal(_as_float(s)), o)
    T.__floordiv__ = floor_divide
    T.__rfloordiv__ = lambda s, o: floor_divide(_t(o, s), s)
    T.__mod__ = remainder
    T.__pow__ = pow
    T.__rpow__ = lambda s, o: pow(o, s)
    T.__matmul__ = matmul
    T.__rmatmul__ = lambda s, o: matmul(_t(o), s)
    T.__neg__ = neg
    T.__pos__ = lambda s: s
    T.__abs__ = abs
    T.__invert__ = bitwise_not
    T.__and__ = bitwise_and
    T.__or__ = bitwise_or
    T.__xor__ = bitwise_xor
    T.__eq__ = eq
    T.__ne__ = ne
    T.__lt__ = lt
    T.__le__ = le
    T.__gt__ = gt
    T.__ge__ = ge
    T.__iadd__ = add_
    T.__isub__ = sub_
    T.__imul__ = mul_
    T.__itruediv__ = div_
    T.__ipow__ = pow_
    T.__getitem__ = getitem
    T.__setitem__ = setitem
    # methods with the same name as the function
    for name in (
            "add sub mul div pow neg exp log log1p sqrt rsqrt reciprocal abs sign sin cos tanh "
            "sigmoid relu erf clamp clip maximum minimum masked_fill eq ne lt le gt ge "
            "logical_and logical_or logical_xor logical_not isnan isinf isfinite floor ceil "
            "trunc round sum mean prod max min amax amin argmax argmin var std norm logsumexp "
            "softmax log_softmax cumsum matmul mm bmm dot mv addmm outer view reshape flatten "
            "unflatten transpose swapaxes swapdims t permute expand expand_as broadcast_to "
            "squeeze unsqueeze narrow select diagonal as_strided unbind split chunk contiguous "
            "unsafe_split unsafe_chunk "
            "unfold clone flip index_select gather index_put_ index_put index_add square subtract "
            "multiply divide true_divide remainder floor_divide all any nonzero count_nonzero "
            "equal allclose isclose add_ sub_ mul_ div_ pow_ neg_ exp_ tanh_ sigmoid_ relu_ "
            "zero_ log_ sqrt_ abs_ clamp_ clip_ fill_ copy_ masked_fill_ uniform_ normal_ "
            "bernoulli_ exponential_ random_ geometric_ cauchy_ log_normal_ bernoulli multinomial "
            "float_power absolute negative greater less "
            "greater_equal less_equal not_equal clamp_min clamp_max take_along_dim").split():
        setattr(T, name, g[name])
    T.where = lambda s, condition, other: where(condition, s, other)
    T.to = _to
    T.view_as = lambda s, o: view(s, tuple(o.shape))
    T.reshape_as = lambda s, o: reshape(s, tuple(o.shape))
    T.type_as = lambda s, o: to_dtype(s, o.dtype)
    T.T = property(lambda s: permute(s, *range(s._data.ndim - 1, -1, -1)))
    T.mT = property(lambda s: transpose(s, -2, -1))
    T.float = lambda s: to_dtype(s, dtypes.float32)
    T.double = lambda s: to_dtype(s, dtypes.float64)
    T.half = lambda s: to_dtype(s, dtypes.float16)
    T.long = lambda s: to_dtype(s, dtypes.int64)
    T.int = lambda s: to_dtype(s, dtypes.int32)
    T.short = lambda s: to_dtype(s, dtypes.int16)
    T.char = lambda s: to_dtype(s, dtypes.int8)
    T.byte = lambda s: to_dtype(s, dtypes.uint8)
    T.bool = lambda s: to_dtype(s, dtypes.bool_)
    T.cpu = lambda s: _to_device(s, backend.CPU)
    T.cuda = lambda s, device=None: _to_device(s, backend.device("cuda", device or 0))
    T.type = _type
    T.new = _new
    T.unsqueeze_, T.squeeze_, T.transpose_, T.t_, T.resize_, T.as_strided_ = (
        unsqueeze_, squeeze_, transpose_, t_, resize_, as_strided_)
    T.resize_as_ = resize_as_
    T.swapdims_ = T.swapaxes_ = transpose_
    T.type_name = lambda s: type_name(s._data.dtype, s._data)
    T.new_zeros = _new_like("zeros")
    T.new_ones = _new_like("ones")
    T.new_empty = _new_like("empty")
    T.new_full = lambda s, size, fill_value, dtype=None, device=None, requires_grad=False: \
        creation.full(
            size, fill_value, dtype=dtype or s.dtype, device=device or s.device,
            requires_grad=requires_grad)
    T.new_tensor = lambda s, data, dtype=None, device=None, requires_grad=False: \
        creation.tensor(
            data, dtype=dtype or s.dtype, device=device or s.device,
            requires_grad=requires_grad)
    T.repeat = lambda s, *sizes: _repeat(s, _shape_arg(sizes))
    T.sum_to_size = lambda s, *size: _sum_to_size(s, _shape_arg(size))


def _type(self, dtype=None, non_blocking=False):
    """Tensor.type: the type string ('torch.FloatTensor' style) without an argument; with one
    (a dtype, a legacy type such as ``torch.LongTensor``, or its name as a string, 'torch.' or
    'nbgrad.' prefixed) the tensor converted to it.

    Raises:
        ValueError: a string that names no tensor type (PyTorch's "invalid type" text).
    """
    if dtype is None:
        return self.type_name()
    if isinstance(dtype, str):
        from . import tensortypes
        name = dtype.split(".")[-1]
        legacy = getattr(tensortypes, name, None)
        if legacy is None or not dtype.startswith(("torch.", "nbgrad.")):
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = legacy
    return to_dtype(self, getattr(dtype, "dtype", dtype))


def _new(self, *args, device=None):
    """Tensor.new (legacy constructor): ``t.new(data)`` a tensor of the data, ``t.new(*sizes)``
    an uninitialised one (sizes or a Size), ``t.new()`` an empty one, all of ``t``'s dtype and
    device; mirrors ``torch.Tensor.new``. A Tensor of the same dtype comes back as an alias.

    Raises:
        TypeError: arguments that are neither data nor sizes (PyTorch's wording), or a Tensor
            of another dtype.
    """
    device = self.device if device is None else device
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not self.dtype:
            raise TypeError(f"new(): expected a tensor of dtype {self.dtype}, got {args[0].dtype}")
        return args[0].detach()  # an alias, as PyTorch's
    if not args or (len(args) == 1 and isinstance(args[0], Size)):
        return creation.empty(*(args[0] if args else (0,)), dtype=self.dtype, device=device)
    if len(args) == 1 and not isinstance(args[0], int):
        return creation.tensor(args[0], dtype=self.dtype, device=device)
    if not builtins.all(isinstance(a, int) for a in args):
        raise TypeError(f"new(): invalid data type '{type(args[0]).__name__}'")
    return creation.empty(*args, dtype=self.dtype, device=device)


def _reshape_in_place(self, name, make, row, args=()):
    """An in-place op that changes only the shape of ``self`` (unsqueeze_, squeeze_, t_,
    transpose_, swapdims_, as_strided_): ``self`` becomes the view ``make(self)`` of the same
    memory and its version goes up by one, as PyTorch's. On a tensor that requires grad with
    grad mode on, PyTorch's in-place node (`row`: UnsqueezeBackward1, TransposeBackward1, ...)
    becomes its grad_fn, after the old one; a leaf, or a view of one, gets PyTorch's error."""
    if self._requires_grad and _GRAD.enabled:
        check_inplace(self, name)
        v = apply(R[row], (self,), args)
        self._data = v._data
        self._grad_fn, self._output_nr = v._grad_fn, 0
        self._bump_version(name)
        if self._view is not None:  # its grad_fn is current: not regenerated from the base
            self._view.version = self._storage.version
        return self
    with no_grad():
        new = make(self)._data
    self._data = new
    self._bump_version(name)
    return self


def unsqueeze_(self, dim):
    """In place: ``self`` gains a size-1 dimension at ``dim`` (torch.Tensor.unsqueeze_);
    recorded as UnsqueezeBackward1."""
    return _reshape_in_place(self, "unsqueeze_", lambda t: unsqueeze(t, dim), "unsqueeze_",
                             (_dim(dim, self._data.ndim + 1),))


def squeeze_(self, dim=None):
    """In place: size-1 dimensions (or ``dim``) removed (torch.Tensor.squeeze_); recorded as
    SqueezeBackward3 (all) or SqueezeBackward4 (``dim``)."""
    if dim is None:
        return _reshape_in_place(self, "squeeze_", lambda t: squeeze(t), "squeeze_")
    dims = tuple(sorted(_dim(d, self._data.ndim) for d in dim)) \
        if isinstance(dim, (tuple, list)) else (_dim(dim, self._data.ndim) if self._data.ndim
                                                else 0,)
    return _reshape_in_place(self, "squeeze_", lambda t: squeeze(t, dim),
                             "squeeze_dims_tuple_" if isinstance(dim, (tuple, list))
                             else "squeeze_dims_", (dims if self._data.ndim else (),))


def transpose_(self, dim0, dim1):
    """In place: dims ``dim0`` and ``dim1`` swapped (torch.Tensor.transpose_, swapdims_,
    swapaxes_); recorded as TransposeBackward1."""
    n = self._data.ndim
    return _reshape_in_place(self, "transpose_", lambda t: transpose(t, dim0, dim1),
                             "transpose_", (_dim(dim0, n) if n else 0, _dim(dim1, n) if n else 0))


def t_(self):
    """In place: a matrix (or vector) transposed (torch.Tensor.t_); recorded as TBackward1."""
    if self._requires_grad and _GRAD.enabled:
        check_inplace(self, "t_")  # PyTorch checks a leaf first
    if self._data.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is "
                           f"{self._data.ndim}D")
    return _reshape_in_place(self, "t_", t, "t_")


def as_strided_(self, size, stride, storage_offset=None):
    """In place: ``self`` takes the given size, stride and storage offset, in elements
    (torch.Tensor.as_strided_); recorded as AsStridedBackward1."""
    off = self.storage_offset() if storage_offset is None else int(storage_offset)
    size, stride = tuple(size), tuple(stride)
    return _reshape_in_place(
        self, "as_strided_", lambda t: as_strided(t, size, stride, off), "as_strided_",
        (_geom(self), (size, stride, off), self._storage._root))


def resize_(self, *sizes):
    """torch.Tensor.resize_: ``self`` takes the shape ``sizes``, keeping its first elements in
    row-major order; growing it appends uninitialised (here zero) elements in a new buffer.
    Bumps the version by one.

    Raises:
        RuntimeError: ``self`` requires grad ("cannot resize variables that require grad"), or
            is not contiguous.
    """
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    sizes = tuple(_shape_arg(sizes))
    if sizes == self._data.shape:
        return self  # PyTorch: nothing changes, not even the version
    n = math.prod(sizes)
    if not self._data.flags.c_contiguous:
        raise RuntimeError("nbgrad does not implement resize_ of a non-contiguous tensor yet")
    flat = self._data.reshape(-1)
    if n <= flat.size:
        self._data = flat[:n].reshape(sizes)
    else:
        xp = backend.get_array_module(self._data)
        grown = xp.zeros(n, dtype=self._data.dtype)
        grown[:flat.size] = flat
        fresh = _fresh(grown.reshape(sizes))
        if self._storage.inference:  # still an inference tensor (PyTorch's error below)
            fresh._storage.__class__ = type(self._storage)
        self._data, self._storage = fresh._data, fresh._storage
    self._bump_version("resize_")
    return self


def resize_as_(self, other):
    """torch.Tensor.resize_as_: :func:`resize_` to ``other``'s shape."""
    return resize_(self, *other.shape)


def _repeat(self, sizes):
    if len(sizes) < self._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of "
                           "dimensions of tensor")
    return apply(R["repeat"], (self,), (tuple(sizes),))


def _sum_to_size(self, size):
    return _reduce_to(self, tuple(size), None, TENSORS)


_bind()

__all__ = [_n for _n, _v in list(globals().items())
           if not _n.startswith("_") and callable(_v)
           and getattr(_v, "__module__", None) == __name__]
