"""The public functions (torch.add, torch.sum, ...) over the op table, and their Tensor methods.

Each function checks its arguments (PyTorch's texts), picks a row of the table (nbgrad/ops/) and
applies it through nbgrad/autograd/apply.py. The block at the end binds them onto Tensor as
methods and operators, with PyTorch's names.
"""
from __future__ import annotations

import builtins
import collections
import math

import numpy as np

from . import _torch_errors, dtypes
from .autograd.apply import (_apply, _arr, _binary, _broadcast_error, _device_error, _fresh,
                             _geom, _inplace, _mask, _multi_view_op, _record, _unary, _view_op,
                             binary_op)
from .autograd.grad_mode import STATE as _GRAD
from .autograd.grad_mode import no_grad
from .ops import ROWS as R
from .ops import Ctx, kernels, op
from .ops.formulas import _TX, _reduce_to
from .ops.views import _ViewImpossible
from .tensor import Size, Tensor, _dim
from . import backend

_builtin_max, _builtin_min, _builtin_sum, _builtin_abs = builtins.max, builtins.min, builtins.sum, \
    builtins.abs


def _t(x, like=None):
    """A Tensor for `x` (numbers become 0-d tensors of a matching dtype)."""
    if isinstance(x, Tensor):
        return x
    from .creation import tensor
    if like is not None and isinstance(x, (int, float, bool)):
        kind = like._data.dtype.kind
        if kind == "f" or (kind in "iu" and type(x) is not float) or type(x) is bool:
            return Tensor._make_fresh(np.asarray(x, dtype=like._data.dtype))
    return tensor(x)


def _check_tensor(x, fname, arg="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fname}(): argument '{arg}' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")


def _out(name, fn, inputs, out):
    """Run `fn()` and write its result into `out` (PyTorch's out= semantics)."""
    if _GRAD.enabled and _mask(inputs):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    with no_grad():
        r = fn()
    if out._data.shape != r._data.shape:
        if out._data.size:
            import warnings
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out._data.shape)}, which does not match the required output "
                          f"shape {list(r._data.shape)}. This behavior is deprecated.",
                          UserWarning, stacklevel=3)
        from .storage import Storage
        out._data = np.empty_like(r._data, dtype=out._data.dtype)
        out._storage = Storage(out._data)
    out._data[...] = r._data
    out._storage.bump(name)
    return out


# ================================================================================================
# elementwise arithmetic
# ================================================================================================
def add(input, other, *, alpha=1, out=None):
    """input + alpha * other, broadcasting (torch.add)."""
    if out is not None:
        return _out("add", lambda: add(input, other, alpha=alpha), (input, other), out)
    if not isinstance(input, Tensor):
        return add(_t(input, other), other, alpha=alpha)
    return _binary(R["add"], input, other, (alpha,))


def sub(input, other, *, alpha=1, out=None):
    """input - alpha * other, broadcasting (torch.sub)."""
    if out is not None:
        return _out("sub", lambda: sub(input, other, alpha=alpha), (input, other), out)
    _check_bool_sub(input, other)
    if not isinstance(input, Tensor):
        return rsub(other, input, alpha=alpha)
    return _binary(R["sub"], input, other, (alpha,))


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
    return _unary(R["rsub"], input, other, alpha)


def mul(input, other, *, out=None):
    """Elementwise product, broadcasting (torch.mul)."""
    if out is not None:
        return _out("mul", lambda: mul(input, other), (input, other), out)
    if not isinstance(input, Tensor):
        input, other = other, input
    return _binary(R["mul"], input, other)


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
    return _binary(R["div"], input, other)


divide = true_divide = div


def _as_float(x):
    return x if x._data.dtype.kind == "f" else x.to(dtypes.get_default_dtype())


def floor_divide(input, other):
    """input // other, rounded toward -inf (torch.floor_divide); no gradient."""
    return div(input, other, rounding_mode="floor")


def remainder(input, other):
    """input % other with the sign of other, Python-style (torch.remainder); no gradient."""
    od = other._data if isinstance(other, Tensor) else other
    return _fresh(_arr(np.mod(input._data, od)))


def pow(input, exponent, *, out=None):
    """input ** exponent; either may be a number (torch.pow)."""
    if out is not None:
        return _out("pow", lambda: pow(input, exponent), (input, exponent), out)
    if not isinstance(input, Tensor):
        if not isinstance(exponent, Tensor):
            raise TypeError("pow() needs at least one Tensor")
        e = exponent if exponent._data.dtype.kind == "f" or type(input) is int else \
            exponent.to(dtypes.get_default_dtype())
        return _unary(R["rpow"], e, input)
    if isinstance(exponent, Tensor):
        return _binary(R["pow_tt"], input, exponent)
    exponent = _scalar_arg(exponent)
    if type(exponent) is float and input._data.dtype.kind != "f":
        input = input.to(dtypes.get_default_dtype())
    if type(exponent) is int and exponent < 0 and input._data.dtype.kind in "iu":
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return _unary(R["pow"], input, exponent)


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
    return _unary(R["neg"], input)


negative = neg


def _unary_fn(name, doc):
    row = R[name]

    def f(input, *, out=None):
        if out is not None:
            return _out(name, lambda: f(input), (input,), out)
        _check_tensor(input, name)
        return _unary(row, input)
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
    return _unary(R["relu"], input)


def clamp(input, min=None, max=None, *, out=None):
    """Clamp into [min, max]; either bound may be None, a number or a Tensor (torch.clamp)."""
    if out is not None:
        return _out("clamp", lambda: clamp(input, min, max), (input,), out)
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        r = input
        if min is not None:
            r = maximum(r, _t(min, input))
        if max is not None:
            r = minimum(r, _t(max, input))
        return r
    return _unary(R["clamp"], input, min, max)


clip = clamp


def clamp_min(input, min):
    """max(input, min) (torch.clamp_min, ClampMinBackward0)."""
    return _unary(R["clamp_min"], input, min)


def clamp_max(input, max):
    """min(input, max) (torch.clamp_max, ClampMaxBackward0)."""
    return _unary(R["clamp_max"], input, max)


def maximum(input, other):
    """Elementwise maximum of two tensors (torch.maximum); ties share the gradient."""
    return _binary(R["maximum"], input, _t(other, input))


def minimum(input, other):
    """Elementwise minimum of two tensors (torch.minimum); ties share the gradient."""
    return _binary(R["minimum"], input, _t(other, input))


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
    try:
        out = np.where(c, input._data, other._data)
    except ValueError:  # report the first pair that fails, in PyTorch's order (cond, self, other)
        try:
            first = np.broadcast_shapes(c.shape, input._data.shape)
        except ValueError:
            raise _broadcast_error(c.shape, input._data.shape) from None
        raise _broadcast_error(first, other._data.shape) from None
    return _apply(R["where"], (input, other), (c,), out, meta_inputs=True)


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
        return _apply(R["masked_fill"], (input, value), (m,), meta_inputs=True)
    out = np.where(m, np.asarray(value, dtype=input._data.dtype), input._data)
    if out.shape != input._data.shape:
        raise _broadcast_error(input._data.shape, m.shape)
    return _apply(R["masked_fill"], (input, value), (m,), out, meta_inputs=True)


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
bitwise_and = _cmp(np.bitwise_and, "bitwise_and")
bitwise_or = _cmp(np.bitwise_or, "bitwise_or")
bitwise_xor = _cmp(np.bitwise_xor, "bitwise_xor")


def _nograd_unary(fn, name):
    def f(input):
        return _fresh(_arr(fn(input._data)))
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (torch.{name}); no gradient."
    return f


logical_not = _nograd_unary(np.logical_not, "logical_not")
bitwise_not = _nograd_unary(np.invert, "bitwise_not")
isnan = _nograd_unary(np.isnan, "isnan")
isinf = _nograd_unary(np.isinf, "isinf")
isfinite = _nograd_unary(np.isfinite, "isfinite")
floor = _nograd_unary(np.floor, "floor")
ceil = _nograd_unary(np.ceil, "ceil")
trunc = _nograd_unary(np.trunc, "trunc")
signbit = _nograd_unary(np.signbit, "signbit")


def round(input, decimals=0):
    """Round to `decimals` places, halves to even (torch.round); no gradient."""
    return _fresh(_arr(np.round(input._data, decimals)))


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
    nz = np.nonzero(input._data)
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
        return _unary(_SUM, input, None)  # the common case, kept short
    dim, keepdim = _red_args(dim, keepdim, axis, keepdims)
    dt = dtypes.to_np(dtype)
    if dt is not None and dt != d.dtype and d.dtype.kind == "f":
        input, d, dt = to_dtype(input, dtype), None, None
        d = input._data
    if dt is None and d.dtype.kind in "biu":
        dt = np.dtype(np.int64)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        r = _unary(R["sum"], input, dt)
        return r if not keepdim else r.reshape((1,) * d.ndim)
    return _unary(R["sum_dim"], input, _dims(dim, d.ndim), keepdim, dt)


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
        r = _unary(R["mean"], input)
        return r if not keepdim else r.reshape((1,) * input._data.ndim)
    return _unary(R["mean_dim"], input, _dims(dim, input._data.ndim), keepdim)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product of all elements, or along `dim` (torch.prod); zeros are handled in backward."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        return _unary(R["prod"], input)
    return _unary(R["prod_dim"], input, _dim(dim, input._data.ndim), keepdim)


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
        return _unary(R["max"], input)
    return _vals_indices(R["max_dim"], input, dim, keepdim, _minmax)


def min(input, dim=None, keepdim=False):
    """Min of all elements; with `dim`, (values, indices); with a tensor, minimum (torch.min)."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        _empty_check(input, "min")
        return _unary(R["min"], input)
    return _vals_indices(R["min_dim"], input, dim, keepdim, _minmax_min)


def _vals_indices(row, input, dim, keepdim, ntuple):
    dim = _dim(dim, input._data.ndim)
    vals, idx = row.fwd(input._data, dim, keepdim)
    v, i = _fresh(_arr(vals)), _fresh(_arr(idx))
    if input._requires_grad and _GRAD.enabled:
        _record(row, (v, i), (input,), (dim, keepdim), 1)
        i._requires_grad = False
        i._grad_fn = None
    return ntuple(v, i)


def amax(input, dim=(), keepdim=False):
    """Max over `dim` (all if empty); ties share the gradient evenly (torch.amax)."""
    return _unary(R["amax"], input, _dims(dim, input._data.ndim), keepdim)


def amin(input, dim=(), keepdim=False):
    """Min over `dim` (all if empty); ties share the gradient evenly (torch.amin)."""
    return _unary(R["amin"], input, _dims(dim, input._data.ndim), keepdim)


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
    return _unary(R["var"], input, _dims(dim, input._data.ndim),
                  _correction(unbiased, correction), keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation (Bessel-corrected by default) (torch.std)."""
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _float_check(input, "std")
    return _unary(R["std"], input, _dims(dim, input._data.ndim),
                  _correction(unbiased, correction), keepdim)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over all elements or `dim` (torch.norm; 'fro' is p=2)."""
    if p == "fro" or p is None:
        p = 2
    if dtype is not None:
        input = input.to(dtype)
    return _unary(R["norm"], input, float(p) if p not in (1, 2) else p,
                  _dims(dim, input._data.ndim), keepdim)


def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input), dim)), computed stably (torch.logsumexp)."""
    return _unary(R["logsumexp"], input, _dims(dim, input._data.ndim), keepdim)


def softmax(input, dim, dtype=None):
    """exp(x) / sum(exp(x)) along `dim` (torch.softmax); saves its output."""
    if dtype is not None:
        input = input.to(dtype)
    return _unary(R["softmax"], input, _dim(dim, input._data.ndim))


def log_softmax(input, dim, dtype=None):
    """x - logsumexp(x, dim), stable (torch.log_softmax); saves its output."""
    if dtype is not None:
        input = input.to(dtype)
    return _unary(R["log_softmax"], input, _dim(dim, input._data.ndim))


def cumsum(input, dim, *, dtype=None):
    """Cumulative sum along `dim` (torch.cumsum)."""
    if dtype is not None:
        input = input.to(dtype)
    return _unary(R["cumsum"], input, _dim(dim, input._data.ndim))


# ================================================================================================
# linear algebra
# ================================================================================================
def matmul(input, other, *, out=None):
    """Matrix product with numpy/PyTorch broadcasting rules (torch.matmul).

    (n,)@(n,) -> () DotBackward0; (n,m)@(m,p) MmBackward0; (n,m)@(m,) MvBackward0;
    (b,n,m)@(b,m,p) BmmBackward0; other batched cases MatmulBackward0.
    """
    if out is not None:
        return _out("matmul", lambda: matmul(input, other), (input, other), out)
    a, b = input._data, other._data
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


def _matmul(a, b):
    """matmul as PyTorch decomposes it, so the graph shows the same nodes (mm, mv, dot, bmm,
    folded through views and UnsafeViewBackward0)."""
    da, db = a._data.ndim, b._data.ndim
    if da == 2 and db == 2:
        return _apply(R["mm"], (a, b), (), a._data @ _cc(b._data))
    if da == 1 and db == 1:
        return _apply(R["dot"], (a, b), (), a._data @ b._data)
    if da == 2 and db == 1:
        return _apply(R["mv"], (a, b), (), a._data @ b._data)
    if da == 1 and db == 2:
        return _view_op(R["squeeze_dims_"], _matmul(unsqueeze(a, 0), b), ((0,),))
    if da >= 3 and db <= 2:   # fold the batch into the rows of a matrix product
        k = a._data.shape[-1]
        folded = _matmul(reshape(a, -1, k), b)
        shape = a._data.shape[:-1] + ((b._data.shape[-1],) if db == 2 else ())
        return _unary(R["unsafe_view"], folded, shape)
    if da == 1 and db >= 3:
        return _matmul(b.mT, a)
    # batched: broadcast the batch dims, fold them into one, bmm, unfold
    ba, bb = a._data.shape[:-2], b._data.shape[:-2]
    try:
        batch = np.broadcast_shapes(ba, bb)
    except ValueError:
        raise _broadcast_error(ba, bb) from None
    n, k = a._data.shape[-2:] if da > 1 else (1, a._data.shape[0])
    p = b._data.shape[-1]
    a3 = reshape(expand(a, *batch, n, k), -1, n, k) if da > 1 else None
    b3 = reshape(expand(b, *batch, k, p), -1, k, p)
    if a3 is None:
        a3 = reshape(expand(unsqueeze(a, 0), *batch, 1, k), -1, 1, k)
    out = _apply(R["bmm"], (a3, b3), (), a3._data @ b3._data)
    shape = tuple(batch) + ((n,) if da > 1 else ()) + (p,)
    return _unary(R["unsafe_view"], out, shape)


def _cc(b):
    # numpy's matmul is several times slower on a transposed (F-ordered) right operand
    return b if b.flags.c_contiguous else backend.get_array_module(b).ascontiguousarray(b)


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
    return _apply(R["bmm"], (input, mat2), (), input._data @ mat2._data)


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
    out = a @ _cc(b)
    if alpha != 1:
        out *= alpha
    c = input._data
    out += c if beta == 1 else beta * c
    return _apply(R["addmm"], (input, mat1, mat2), (beta, alpha), out, meta_inputs=True)


def outer(input, vec2):
    """Outer product of two 1-D tensors, (n,) x (m,) -> (n, m) (torch.outer)."""
    return mul(input.unsqueeze(1), vec2.unsqueeze(0))


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
    y, ctx = kernels.conv2d_forward(x, w, None if bias is None else bias._data, stride, padding,
                                  dilation, groups)
    return _apply(R["convolution"], (input, weight, bias), (Ctx(ctx),), y)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """Max over (kh, kw) windows with -inf padding, and the flat H*W index of each maximum:
    (N, C, H, W) -> ((N, C, Ho, Wo), int64 indices). One MaxPool2DWithIndicesBackward0 node."""
    out, ctx = _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)
    return out, Tensor._make_fresh(kernels.max_pool2d_indices(ctx))


def _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode):
    x = input._data
    if x.ndim != 4:
        raise RuntimeError(f"max_pool2d: Expected 3D or 4D tensor for input, but got "
                           f"{list(x.shape)}")
    y, ctx = kernels.max_pool2d_forward(x, kernel_size, stride, padding, dilation, ceil_mode)
    return _apply(R["max_pool2d"], (input,), (Ctx(ctx),), y), ctx


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling (torch.max_pool2d); the int64 indices are built only when asked for."""
    if return_indices:
        return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)[0]


def type_name_of(t):
    """'nbgrad.FloatTensor'-style type string of a tensor (for error messages)."""
    from .tensor import type_name
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
    arrs = [t._data for t in ts]
    rt = arrs[0].dtype
    for a in arrs[1:]:
        rt = dtypes.result_type(np.empty(1, rt), a if a.ndim else a.reshape(1))
    out_arr = np.concatenate([a.astype(rt, copy=False) for a in arrs], axis=d)
    sizes = tuple(t._data.shape[d] for t in ts)
    in_dtypes = tuple(a.dtype for a in arrs)
    return _apply(R["cat"], tuple(ts), (sizes, d, in_dtypes), out_arr)


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
    out_arr = np.stack([t._data for t in tensors], axis=d)
    return _apply(R["stack"], tuple(tensors), (len(tensors), d), out_arr)


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
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _infer(shape, numel):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def view(input, *shape):
    """Same storage, new shape; needs compatible strides (torch.Tensor.view)."""
    if len(shape) == 1 and isinstance(shape[0], dtypes.dtype):
        raise NotImplementedError("nbgrad: view(dtype) is not supported")
    shape = _infer(_shape_arg(shape), input._data.size)
    try:
        out = R["view"].fwd(input._data, shape)
    except _ViewImpossible:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.") from None
    return _view_op(R["view"], input, (shape,), out)


def reshape(input, *shape):
    """A view when the strides allow, else a copy (torch.reshape)."""
    shape = _infer(_shape_arg(shape), input._data.size)
    try:
        out = R["view"].fwd(input._data, shape)
    except _ViewImpossible:
        return _unary(R["unsafe_view"], clone(input), shape)
    return _view_op(R["view"], input, (shape,), out)


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
    return _view_op(R["transpose"], input, (d0, d1))


swapaxes = swapdims = transpose


def t(input):
    """Transpose of a <= 2-D tensor; a view (torch.t)."""
    if input._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{input._data.ndim}D")
    return _view_op(R["t"], input)


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
    return _view_op(R["permute"], input, (dims,))


def expand(input, *sizes):
    """Broadcast to `sizes` without copying (-1 keeps a dim); a view (torch.Tensor.expand)."""
    sizes = _shape_arg(sizes)
    s = input._data.shape
    if len(sizes) < len(s):
        raise RuntimeError(f"expand(nbgrad.FloatTensor{{{list(s)}}}, size={list(sizes)}): the "
                           "number of sizes provided ({}) must be greater or equal to the number "
                           "of dimensions in the tensor ({})".format(len(sizes), len(s)))
    return _view_op(R["expand"], input, (_expand_shape(s, sizes),))


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
        return _view_op(R["squeeze"], input)
    if isinstance(dim, (tuple, list)):
        return _view_op(R["squeeze_dims"], input,
                        (tuple(sorted(_dim(d, input._data.ndim) for d in dim)),))
    if input._data.ndim == 0:
        return _view_op(R["squeeze_dim"], input, (0,), input._data.view())
    return _view_op(R["squeeze_dim"], input, (_dim(dim, input._data.ndim),))


def unsqueeze(input, dim):
    """Insert a size-1 dim at `dim`; a view (torch.unsqueeze)."""
    return _view_op(R["unsqueeze"], input, (_dim(dim, input._data.ndim + 1),))


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
    return _view_op(R["slice"], input, (index,), input._data[index])


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
    return _view_op(R["select"], input, (idx,), input._data[idx])


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
    out = backend.as_strided(input._storage._root, vshape, vstrides, off)
    return _view_op(R["diagonal"], input, (_geom(input), (vshape, vstrides, off)), out)


def as_strided(input, size, stride, storage_offset=None):
    """A view with explicit size, stride and storage offset, in elements (torch.as_strided)."""
    off = input.storage_offset() if storage_offset is None else int(storage_offset)
    size, stride = tuple(size), tuple(stride)
    out = backend.as_strided(input._storage._root, size, stride, off)
    return _view_op(R["as_strided"], input, (_geom(input), (size, stride, off)), out)


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
    n = (L - size) // step + 1
    shape = a.shape[:d] + (n,) + a.shape[d + 1:] + (size,)
    strides = a.strides[:d] + (a.strides[d] * step,) + a.strides[d + 1:] + (a.strides[d],)
    xp = backend.get_array_module(a)
    out = xp.lib.stride_tricks.as_strided(a, shape, strides)
    return _view_op(R["unfold"], input, (d, size, step), out)


def unbind(input, dim=0):
    """Tuple of the slices along `dim`; views that refuse in-place changes (torch.unbind)."""
    d = _dim(dim, input._data.ndim)
    n = input._data.shape[d]
    pre = (slice(None),) * d
    outs = [input._data[pre + (i, Ellipsis)] for i in range(n)]
    return _multi_view_op(R["unbind"], input, outs, (d, n))


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
    pre = (slice(None),) * d
    outs, start = [], 0
    for k in sizes:
        outs.append(input._data[pre + (slice(start, start + k),)])
        start += k
    return _multi_view_op(row, input, outs, (tuple(sizes), d))


def chunk(input, chunks, dim=0):
    """Split into `chunks` nearly equal pieces along `dim`; views (torch.chunk)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input._data.shape[_dim(dim, input._data.ndim)]
    size = -(-n // chunks) if n else 1
    return split(input, size, dim)


def contiguous(input, memory_format=None):
    """Self if C-contiguous, else a contiguous copy (CloneBackward0) (torch.Tensor.contiguous)."""
    if input._data.flags.c_contiguous:
        return input
    return _contig_clone(input)


def _contig_clone(input):
    out = np.ascontiguousarray(input._data)
    return _apply(R["clone"], (input,), (), out)


def clone(input, *, memory_format=None):
    """A copy with its own storage; differentiable (CloneBackward0) (torch.clone)."""
    out = input._data.copy(order="K")
    return _apply(R["clone"], (input,), (), out)


def flip(input, *dims):
    """Reverse the order along `dims`; a copy (torch.flip)."""
    dims = _shape_arg(dims) if dims and not isinstance(dims[0], int) else tuple(dims)
    return _unary(R["flip"], input, tuple(_dim(d, input._data.ndim) for d in dims))


def to_dtype(input, dtype):
    """A copy in `dtype` (ToCopyBackward0 when floating), or the tensor itself if already that
    dtype."""
    dt = dtypes.to_np(dtype)
    if input._data.dtype == dt:
        return input
    r = _fresh(input._data.astype(dt))
    if input._requires_grad and _GRAD.enabled and dt.kind == "f":
        _record(R["to_copy"], (r,), (input,), (dt,), 1)
    return r


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
    index = tuple(_to_index_array(i) for i in idx)
    _check_masks(input, index)
    _torch_errors.check_index(input._data.ndim, index)
    try:
        out = input._data[index]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None
    return _apply(R["index"], (input,), (index,), out)


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
    n_real = _builtin_sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > nd:
        raise IndexError(f"too many indices for tensor of dimension {nd}")
    if not idx or builtins.all(i is Ellipsis for i in idx):
        return _view_op(R["alias"], input)
    r = input
    d = 0
    for i in idx:
        if i is None:
            r = unsqueeze(r, d)
            d += 1
        elif i is Ellipsis:
            d += nd - n_real
        elif isinstance(i, slice):
            if i.step is not None and i.step <= 0:
                raise ValueError("step must be greater than zero")
            n = r._data.shape[d]
            start, stop, step = i.indices(n)
            if not (start == 0 and stop >= n and step == 1):
                stop = _builtin_max(stop, start)
                r = _slice(r, d, slice(start, stop, step))
            d += 1
        else:
            i = int(i)
            n = r._data.shape[d]
            if i < -n or i >= n:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {n}")
            r = select(r, d, i)
    if r is input:
        return _view_op(R["alias"], input)
    return r


def setitem(input, idx, value):
    """`t[idx] = value`: copy_ into the view (basic index) or index_put_ (advanced); one
    version bump either way, CopySlices / IndexPutBackward0 in the graph (torch semantics)."""
    if input._data.ndim == 0:
        _torch_errors.check_0d_index(idx)
    if not isinstance(idx, tuple):
        idx = (idx,)
    if _is_basic(idx):
        if _whole(input, idx):
            # the whole tensor: PyTorch fills / copies into it directly (no view, no CopySlices)
            if isinstance(value, Tensor) and value._data.ndim:
                copy_(input, value)
            else:
                v = value if isinstance(value, Tensor) else \
                    Tensor._make_fresh(np.asarray(value, dtype=input._data.dtype))
                _inplace(R["fill_tensor"], input, (v,), (), "fill_")
            return None
        view_ = _basic_index(input, idx)
        copy_(view_, value, _op_name="copy_")
        return None
    index = tuple(_to_index_array(i) for i in idx)
    if not isinstance(value, Tensor):
        value = Tensor._make_fresh(np.asarray(value, dtype=input._data.dtype))
    elif value._data.dtype != input._data.dtype:
        value = value.to(input.dtype)
    index_put_(input, index, value)
    return None


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
    index = tuple(_to_index_array(i) for i in (indices if isinstance(indices, tuple)
                                                 else (indices,)))
    _torch_errors.check_index(input._data.ndim, index)
    if not isinstance(values, Tensor):
        values = Tensor._make_fresh(np.asarray(values, dtype=input._data.dtype))
    if values._data.dtype != input._data.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_kind_name(input._data.dtype)} for the destination and "
                           f"{_kind_name(values._data.dtype)} for the source.")
    return _inplace(R["index_put"], input, (values,), (index, accumulate), "index_put_")


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
    return _apply(R["index_add"], (input, source), (d, ix), meta_inputs=True)


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
    return _unary(R["index_select"], input, d, ix)


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
    return _unary(R["gather"], input, d, ix)


def take_along_dim(input, indices, dim):
    """gather(input, dim, indices) (torch.take_along_dim)."""
    return gather(input, dim, indices)


# ================================================================================================
# in-place ops (each bumps the version by exactly one)
# ================================================================================================
def _ip_binary(row_name, op_name, alpha=False):
    row = R[row_name]
    if alpha:
        def f(self, other, *, alpha=1):
            return _inplace(row, self, (other,), (alpha,), op_name)
    else:
        def f(self, other):
            return _inplace(row, self, (other,), (), op_name)
    f.__name__ = op_name
    f.__doc__ = f"In-place {row_name} (torch.Tensor.{op_name}); bumps _version by 1."
    return f


add_ = _ip_binary("add", "add_", alpha=True)
sub_ = _ip_binary("sub", "sub_", alpha=True)
mul_ = _ip_binary("mul", "mul_")


def div_(self, other):
    """In-place true division (torch.Tensor.div_); bumps _version by 1."""
    return _inplace(R["div"], self, (other,), (), "div_")


def pow_(self, exponent):
    """In-place power (torch.Tensor.pow_); bumps _version by 1."""
    if isinstance(exponent, Tensor):
        return _inplace(R["pow_tt"], self, (exponent,), (), "pow_")
    return _inplace(R["pow"], self, (), (_scalar_arg(exponent),), "pow_")


def _ip_unary(row_name, op_name):
    row = R[row_name]

    def f(self):
        return _inplace(row, self, (), (), op_name)
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
    return _inplace(R["clamp"], self, (), (min, max), "clamp_")


clip_ = clamp_


def fill_(self, value):
    """Fill with `value` in place (torch.Tensor.fill_); bumps _version by 1."""
    return _inplace(R["fill"], self, (), (_scalar_arg(value),), "fill_")


def copy_(self, src, non_blocking=False, *, _op_name="copy_"):
    """Copy `src` (broadcast, cast) into self (torch.Tensor.copy_); bumps _version by 1."""
    if not isinstance(src, Tensor):
        src = Tensor._make_fresh(np.asarray(src, dtype=self._data.dtype))
    elif type(src._data) is not type(self._data):
        src = src.to(self.device)
    if src._data.shape != self._data.shape:
        _expand_shape(src._data.shape, self._data.shape)  # PyTorch's text if it can't broadcast
    return _inplace(R["copy"], self, (src,), (), _op_name)


def masked_fill_(self, mask, value):
    """In-place masked_fill (torch.Tensor.masked_fill_); bumps _version by 1."""
    m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype.kind != "b":
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{dtypes.from_np(m.dtype)}")
    v = value if isinstance(value, Tensor) else Tensor._make_fresh(
        np.asarray(value, dtype=self._data.dtype))
    return _inplace(R["masked_fill"], self, (v,), (m,), "masked_fill_")


# the random fills and samplers live in random.py; imported here to be bound as Tensor methods
from .random import (bernoulli, bernoulli_, cauchy_, exponential_, geometric_,  # noqa: E402,F401
                     log_normal_, multinomial, normal_, random_, uniform_)


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
    arr = backend.to_device(self._data, dev)
    r = _fresh(arr)
    if self._requires_grad and _GRAD.enabled:
        _record(_TO_DEVICE, (r,), (self,), (backend.device_of(self._data),), 1)
    return r


_TO_DEVICE = op("to_device", lambda self, device: self, node="ToCopyBackward0",
                self=lambda g, device: backend.to_device(g, device) if not isinstance(
                    g, Tensor) else _to_device(g, device))


def _new_like(fn):
    def f(self, *size, dtype=None, device=None, requires_grad=False):
        from . import creation
        return getattr(creation, fn)(*size, dtype=dtype or self.dtype, device=device or
                                     self.device, requires_grad=requires_grad)
    return f


def _bind():
    T = Tensor
    g = globals()
    # operators
    T.__add__ = binary_op(R["add"], (1,))
    T.__radd__ = lambda s, o: add(s, o)
    _sub = binary_op(R["sub"], (1,))

    def __sub__(s, o):
        if s._data.dtype.kind == "b" or type(o) is bool or (isinstance(o, Tensor) and
                                                            o._data.dtype.kind == "b"):
            _check_bool_sub(s, o)
        return _sub(s, o)
    T.__sub__ = __sub__
    T.__rsub__ = lambda s, o: rsub(s, o)
    T.__mul__ = binary_op(R["mul"])
    T.__rmul__ = lambda s, o: mul(s, o)
    T.__truediv__ = lambda s, o: div(s, o)
    T.__rtruediv__ = lambda s, o: mul(reciprocal(_as_float(s)), o)
    T.__floordiv__ = lambda s, o: floor_divide(s, o)
    T.__rfloordiv__ = lambda s, o: floor_divide(_t(o, s), s)
    T.__mod__ = lambda s, o: remainder(s, o)
    T.__pow__ = lambda s, o: pow(s, o)
    T.__rpow__ = lambda s, o: pow(o, s)
    T.__matmul__ = lambda s, o: matmul(s, o)
    T.__rmatmul__ = lambda s, o: matmul(_t(o), s)
    T.__neg__ = lambda s: neg(s)
    T.__pos__ = lambda s: s
    T.__abs__ = lambda s: abs(s)
    T.__invert__ = lambda s: bitwise_not(s)
    T.__and__ = lambda s, o: bitwise_and(s, o)
    T.__or__ = lambda s, o: bitwise_or(s, o)
    T.__xor__ = lambda s, o: bitwise_xor(s, o)
    T.__eq__ = lambda s, o: eq(s, o)
    T.__ne__ = lambda s, o: ne(s, o)
    T.__lt__ = lambda s, o: lt(s, o)
    T.__le__ = lambda s, o: le(s, o)
    T.__gt__ = lambda s, o: gt(s, o)
    T.__ge__ = lambda s, o: ge(s, o)
    T.__iadd__ = lambda s, o: add_(s, o)
    T.__isub__ = lambda s, o: sub_(s, o)
    T.__imul__ = lambda s, o: mul_(s, o)
    T.__itruediv__ = lambda s, o: div_(s, o)
    T.__ipow__ = lambda s, o: pow_(s, o)
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
    T.view_as = lambda s, o: view(s, *o.shape)
    T.reshape_as = lambda s, o: reshape(s, *o.shape)
    T.type_as = lambda s, o: to_dtype(s, o.dtype)
    T.T = property(lambda s: permute(s, *range(s._data.ndim - 1, -1, -1)))
    T.mT = property(lambda s: transpose(s, -2, -1))
    T.float = lambda s: to_dtype(s, dtypes.float32)
    T.double = lambda s: to_dtype(s, dtypes.float64)
    T.half = lambda s: to_dtype(s, dtypes.float16)
    T.long = lambda s: to_dtype(s, dtypes.int64)
    T.int = lambda s: to_dtype(s, dtypes.int32)
    T.bool = lambda s: to_dtype(s, dtypes.bool_)
    T.cpu = lambda s: _to_device(s, backend.CPU)
    T.cuda = lambda s, device=None: _to_device(s, backend.device("cuda", device or 0))
    T.type = lambda s, dtype=None: (s.type_name() if dtype is None else to_dtype(s, dtype))
    T.type_name = lambda s: __import__("nbgrad.tensor", fromlist=["type_name"]).type_name(
        s._data.dtype, s._data)
    T.new_zeros = _new_like("zeros")
    T.new_ones = _new_like("ones")
    T.new_empty = _new_like("empty")
    T.new_full = lambda s, size, fill_value, dtype=None, device=None, requires_grad=False: \
        __import__("nbgrad.creation", fromlist=["full"]).full(
            size, fill_value, dtype=dtype or s.dtype, device=device or s.device,
            requires_grad=requires_grad)
    T.new_tensor = lambda s, data, dtype=None, device=None, requires_grad=False: \
        __import__("nbgrad.creation", fromlist=["tensor"]).tensor(
            data, dtype=dtype or s.dtype, device=device or s.device,
            requires_grad=requires_grad)
    T.repeat = lambda s, *sizes: _repeat(s, _shape_arg(sizes))
    T.sum_to_size = lambda s, *size: _sum_to_size(s, _shape_arg(size))


def _repeat(self, sizes):
    if len(sizes) < self._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of "
                           "dimensions of tensor")
    return _unary(R["repeat"], self, tuple(sizes))


def _sum_to_size(self, size):
    xp = _TX if _GRAD.enabled and self._requires_grad else backend.get_array_module(self._data)
    if xp is _TX:
        return _reduce_to(self, tuple(size), None, xp)
    return Tensor._make_fresh(_arr(_reduce_to(self._data, tuple(size), None, xp)))


_bind()

__all__ = [_n for _n, _v in list(globals().items())
           if not _n.startswith("_") and callable(_v)
           and getattr(_v, "__module__", None) == __name__]
