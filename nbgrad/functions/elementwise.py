"""Elementwise arithmetic and math (add, mul, div, pow, exp, tanh, clamp, where, lerp, ...):
argument parsing (alpha=, out=, Python numbers) around the elementwise rows of
nbgrad/ops/elementwise.py.
"""
from __future__ import annotations

import numpy as np

from .. import backend, dtypes
from ..autograd.apply import apply, _broadcast_error, _fresh
from ..autograd.record import _arr, index_arg
from ..ops import ROWS as R
from ..tensor import Tensor
from .registry import method
from .args import _broadcast_batch, _check_tensor, _filled_array, _filled_like, _out, _t
from .views import to_dtype
from .comparison import nonzero


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


@method
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


@method
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


subtract = method(sub, "subtract")


def rsub(input, other, *, alpha=1):
    """other - alpha * input (torch.rsub)."""
    if isinstance(other, Tensor):
        return sub(other, input, alpha=alpha)
    _check_bool_sub(other, input)
    d = input._data
    if type(other) is float and d.dtype.kind != "f":
        input = input.to(dtypes.get_default_dtype())
    elif type(other) is int and d.dtype.kind in "iu":  # out of the dtype's range: wraps
        other = int(dtypes.as_dtype(other, d.dtype))
    return apply(R["rsub"], (input,), (other, alpha))


@method
def mul(input, other, *, out=None):
    """Elementwise product, broadcasting (torch.mul)."""
    if out is not None:
        return _out("mul", lambda: mul(input, other), (input, other), out)
    if not isinstance(input, Tensor):
        input, other = other, input
    return apply(R["mul"], (input, other))


multiply = method(mul, "multiply")


@method
def div(input, other, *, rounding_mode=None, out=None):
    """True division (or 'trunc' / 'floor' rounding, not differentiable) (torch.div)."""
    if out is not None:
        return _out("div", lambda: div(input, other, rounding_mode=rounding_mode),
                    (input, other), out)
    if rounding_mode is not None:
        return _rounded_div(input, other, rounding_mode)
    if not isinstance(input, Tensor):
        return mul(reciprocal(_as_float(other)), input)
    if rounding_mode is not None:
        return _rounded_div(input, other, rounding_mode)
    if input._data.dtype.kind != "f" and (not isinstance(other, Tensor) or
                                          other._data.dtype.kind != "f") and \
            type(other) is not float:
        input = input.to(dtypes.get_default_dtype())
    return apply(R["div"], (input, other))


divide = true_divide = method(div, "divide", "true_divide")


def _as_float(x):
    return x if x._data.dtype.kind == "f" else x.to(dtypes.get_default_dtype())


@method
def floor_divide(input, other):
    """input // other, rounded toward -inf (torch.floor_divide); no gradient."""
    return div(input, other, rounding_mode="floor")


@method
def remainder(input, other):
    """input % other with the sign of other, Python-style (torch.remainder): RemainderBackward0
    for a number, RemainderBackward1 for a tensor (gradient -floor(input / other))."""
    return _mod_like("remainder", input, other)


@method
def fmod(input, other):
    """C's fmod: input % other with the sign of input (torch.fmod): FmodBackward0 for a number,
    FmodBackward1 for a tensor (gradient -trunc(input / other))."""
    return _mod_like("fmod", input, other)


def _mod_like(name, input, other):
    if not isinstance(input, Tensor):
        if name == "fmod" or not isinstance(other, Tensor):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"({type(input).__name__}, {type(other).__name__}), but expected one "
                            "of:\n * (Tensor input, Tensor other)\n * (Tensor input, Number other)")
        dt = _division_dtype(name, input, other)  # remainder(Number, Tensor): a wrapped number
        xp = backend.get_array_module(other._data)
        input = Tensor._make_fresh(xp.asarray(dtypes.as_dtype(input, dt)))
    else:
        dt = _division_dtype(name, input, other)
    if input._data.dtype != dt:
        input = to_dtype(input, dtypes.from_np(dt))
    if isinstance(other, Tensor):
        return apply(R[name + "_tensor"], (input, other))
    if dt.kind in "iu":
        other = int(dtypes.as_dtype(other, dt))
    return apply(R[name], (input,), (other,))


def _division_dtype(kernel, input, other):
    """The result dtype (numpy) of an integer-capable division (``//``, ``%``, fmod, div with
    rounding), torch's promotion of the two operands.

    Raises:
        NotImplementedError: bool operands (PyTorch's text naming its `kernel`).
        RuntimeError: an integer division by zero (PyTorch's text is "ZeroDivisionError").
    """
    a = input._data if isinstance(input, Tensor) else input
    b = other._data if isinstance(other, Tensor) else other
    dt = dtypes.result_type(a, b)
    if dt.kind == "b":
        raise NotImplementedError(f'"{kernel}_cpu" not implemented for \'Bool\'')
    if dt.kind in "iu" and not (dtypes.as_dtype(b, dt) != 0).all():
        raise RuntimeError("ZeroDivisionError")
    return dt


def _rounded_div(input, other, mode):
    """torch.div with rounding_mode 'trunc' or 'floor' (no gradient): integers stay integers
    (floor rounds toward -inf, as Python's //), in torch's result type."""
    if isinstance(input, Tensor) and (type(other) is float or type(other) is int):
        a = input._data
        k = a.dtype.kind
        if k == "f" or (k in "iu" and type(other) is int and other and
                        dtypes.int_fits(other, a.dtype)):  # (no promotion: the usual case)
            return _fresh(_arr(_rounded(backend.get_array_module(a), a, other, mode, a.dtype)))
    _division_dtype("div_" + mode, input, other)
    ad = input._data if isinstance(input, Tensor) else input
    od = other._data if isinstance(other, Tensor) else other
    (a, b), dt = dtypes.promote(ad, od)
    xp = backend.get_array_module(ad if isinstance(input, Tensor) else od)
    return _fresh(_arr(_rounded(xp, a, b, mode, dt)))


def _rounded(xp, a, b, mode, dt):
    if dt.kind == "f":
        with np.errstate(divide="ignore", invalid="ignore"):  # (x / 0 is a value: inf or nan)
            q = xp.floor_divide(a, b) if mode == "floor" else xp.trunc(a / b)
    else:
        q = xp.floor_divide(a, b)
        if mode == "trunc" and dt.kind == "i":  # toward zero: one up where the signs differ
            q = q + ((q * b != a) & ((a < 0) != (b < 0))).astype(dt)
    return xp.asarray(q, dt)


@method
def pow(input, exponent, *, out=None):
    """input ** exponent; either may be a number (torch.pow)."""
    if out is not None:
        return _out("pow", lambda: pow(input, exponent), (input, exponent), out)
    if not isinstance(input, Tensor):
        if not isinstance(exponent, Tensor):
            raise TypeError("pow() needs at least one Tensor")
        dt = _pow_dtype(input, exponent._data)
        if dt.kind in "iu" and type(input) is int:
            input = int(dtypes.as_dtype(input, dt))
        e = exponent if exponent._data.dtype == dt else to_dtype(exponent, dtypes.from_np(dt))
        if dt.kind in "iu" and (e._data < 0).any():
            return _fresh(_arr(_int_pow(backend.get_array_module(e._data).asarray(
                dtypes.as_dtype(input, dt)), e._data)))
        return apply(R["rpow"], (e,), (input,))
    if isinstance(exponent, Tensor):
        dt = _pow_dtype(input._data, exponent._data)
        if input._data.dtype != dt:
            input = to_dtype(input, dtypes.from_np(dt))
        if exponent._data.dtype != dt:
            exponent = to_dtype(exponent, dtypes.from_np(dt))
        if dt.kind in "iu" and (exponent._data < 0).any():
            return _fresh(_arr(_int_pow(input._data, exponent._data)))
        return apply(R["pow_tt"], (input, exponent))
    exponent = _scalar_arg(exponent)
    if type(exponent) is bool and input._data.dtype.kind == "b":  # x ** True is x, ** False 1
        return _fresh(input._data | (not exponent))
    dt = _pow_dtype(input._data, exponent)
    if input._data.dtype != dt:
        input = to_dtype(input, dtypes.from_np(dt))
    if type(exponent) is int and exponent < 0 and dt.kind in "iu":
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return apply(R["pow"], (input,), (exponent,))


def _pow_dtype(base, exponent):
    dt = dtypes.result_type(base, exponent)
    if dt.kind == "b":
        raise NotImplementedError('"pow" not implemented for \'Bool\'')
    return dt


def _int_pow(base, exponent):
    """Integer base ** exponent with negative exponents as torch gives them: 1 ** e is 1,
    (-1) ** e is 1 or -1 by parity, anything else 0 (numpy refuses negative powers)."""
    xp = backend.get_array_module(base)
    base, exponent = xp.broadcast_arrays(base, exponent)
    negative = exponent < 0
    out = base ** xp.where(negative, 0, exponent)
    inverse = xp.where(base == 1, 1, xp.where(base == -1, 1 - 2 * (exponent & 1), 0))
    return xp.where(negative, inverse.astype(base.dtype), out)


def _scalar_arg(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Tensor):
        return x.item()
    return x


@method
def float_power(input, exponent):
    """input ** exponent computed in float64 (torch.float_power)."""
    return pow(input.double(), exponent)


@method
def square(input):
    """input ** 2 (torch.square); PowBackward0."""
    return pow(input, 2)


@method
def neg(input):
    """-input (torch.neg)."""
    if input._data.dtype.kind == "b":
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you "
                           "are trying to invert a mask, use the `~` or `logical_not()` operator "
                           "instead.")
    return apply(R["neg"], (input,))


negative = method(neg, "negative")


# torch's kernel for the unary ops that refuse a bool tensor (sign keeps it)
_BOOL_KERNEL = {"abs": "abs_cpu", "floor": "floor_vml_cpu", "ceil": "ceil_vml_cpu",
                "trunc": "trunc_vml_cpu"}


def _unary_fn(name, doc):
    row = R[name]
    bool_kernel = _BOOL_KERNEL.get(name)
    bool_special = bool(bool_kernel) or name in ("sign", "sgn")  # (decided once, not per call)

    def f(input, *, out=None):
        if out is not None:
            return _out(name, lambda: f(input), (input,), out)
        if not isinstance(input, Tensor):
            _check_tensor(input, name)  # (raises torch's TypeError)
        if bool_special and input._data.dtype.kind == "b":
            if bool_kernel is None:
                return _fresh(input._data.copy())
            raise NotImplementedError(f'"{bool_kernel}" not implemented for \'Bool\'')
        return apply(row, (input,))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{doc} elementwise (torch.{name}). Shape and dtype are kept (ints become float)."
    return f


exp = method(_unary_fn("exp", "e ** input"))
log = method(_unary_fn("log", "Natural logarithm"))
log1p = method(_unary_fn("log1p", "log(1 + input)"))
sqrt = method(_unary_fn("sqrt", "Square root"))
rsqrt = method(_unary_fn("rsqrt", "1 / sqrt(input)"))
reciprocal = method(_unary_fn("reciprocal", "1 / input"))
abs = method(_unary_fn("abs", "Absolute value"))
absolute = method(abs, "absolute")
sign = method(_unary_fn("sign", "Sign (-1, 0, 1)"))
sin = method(_unary_fn("sin", "Sine"))
cos = method(_unary_fn("cos", "Cosine"))
tanh = method(_unary_fn("tanh", "Hyperbolic tangent"))
sigmoid = method(_unary_fn("sigmoid", "Logistic sigmoid 1 / (1 + exp(-input))"))
erf = method(_unary_fn("erf", "Error function"))


@method
def relu(input):
    """max(input, 0) elementwise (torch.relu); saves its output. RuntimeError for a bool
    input (torch's text)."""
    if input._data.dtype == np.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")
    return apply(R["relu"], (input,))


@method
def clamp(input, min=None, max=None, *, out=None):
    """Clamp into [min, max]; either bound may be None, a number or a Tensor (torch.clamp)."""
    if out is not None:
        return _out("clamp", lambda: clamp(input, min, max), (input,), out)
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensor(input, min, max)
    d = input._data
    if d.dtype.kind == "f" and type(min) is not bool and type(max) is not bool:
        return apply(R["clamp"], (input,), (min, max))  # (numbers keep a float dtype)
    dt = _clamp_dtype(input, min, max)
    if d.dtype != dt:  # (an int tensor clamped to 0.5 is float32, as torch)
        input = to_dtype(input, dtypes.from_np(dt))
    if dt.kind in "iu":  # a bound out of the dtype's range wraps, as torch
        min, max = (b if type(b) is not int else int(dtypes.as_dtype(b, dt)) for b in (min, max))
    return apply(R["clamp"], (input,), (min, max))


def _clamp_tensor(input, min, max):
    """clamp with tensor bounds (ClampBackward0, a gradient for each bound), in the result type
    of the three; a missing bound is -inf / +inf."""
    rt = _clamp_dtype(input, min, max)
    if input._data.dtype != rt:
        input = to_dtype(input, dtypes.from_np(rt))
    return apply(R["clamp_tensor"], (input,) + _clamp_bounds(input, min, max))


def _clamp_dtype(input, min, max):
    """torch's result type of a clamp: of the tensor and its bounds.

    Raises:
        NotImplementedError: a bool clamp by bool numbers (PyTorch's kernel names)."""
    rt = dtypes.result_type(input._data, *(b._data if isinstance(b, Tensor) else b
                                           for b in (min, max) if b is not None))
    if rt.kind == "b" and not isinstance(min, Tensor) and not isinstance(max, Tensor):
        which = "" if min is not None and max is not None else "_min" if min is not None \
            else "_max"
        raise NotImplementedError(f'"clamp{which}_scalar_cpu" not implemented for \'Bool\'')
    return rt


def _clamp_bounds(input, min, max):
    """Both bounds as tensors of input's dtype; a missing one the dtype's lowest / highest."""
    dt = input._data.dtype
    if dt.kind == "f":
        lowest, highest = float("-inf"), float("inf")
    elif dt.kind == "b":
        lowest, highest = False, True
    else:
        lowest, highest = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    bounds = []
    for b, none in ((min, lowest), (max, highest)):
        b = _t(none if b is None else b, input)
        if b._data.dtype != input._data.dtype:
            b = to_dtype(b, input.dtype)
        bounds.append(b)
    return tuple(bounds)


clip = method(clamp, "clip")


@method
def clamp_min(input, min):
    """max(input, min) (torch.clamp_min, ClampMinBackward0)."""
    return apply(R["clamp_min"], (input,), (min,))


@method
def clamp_max(input, max):
    """min(input, max) (torch.clamp_max, ClampMaxBackward0)."""
    return apply(R["clamp_max"], (input,), (max,))


@method
def maximum(input, other):
    """Elementwise maximum of two tensors (torch.maximum); ties share the gradient."""
    _check_tensor(input, "maximum")
    _check_tensor(other, "maximum", "other", 2)
    return apply(R["maximum"], (input, other))


@method
def minimum(input, other):
    """Elementwise minimum of two tensors (torch.minimum); ties share the gradient."""
    _check_tensor(input, "minimum")
    _check_tensor(other, "minimum", "other", 2)
    return apply(R["minimum"], (input, other))


def where(condition, input=None, other=None):
    """Pick from input where condition is True, else from other (torch.where). Numbers are fine.

    With only a condition, returns the tuple of index tensors (torch.nonzero(as_tuple=True)).
    """
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    c = index_arg(condition) if isinstance(condition, Tensor) else np.asarray(condition)
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


@method
def masked_fill(input, mask, value):
    """Fill positions where the bool `mask` is True with `value` (torch.masked_fill)."""
    m = index_arg(mask) if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype.kind != "b":
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{dtypes.from_np(m.dtype)}")
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value._data.ndim} dimension(s).")
        return apply(R["masked_fill"], (input, value), (m,))
    s, ms = input._data.shape, m.shape
    if ms != s and ms != s[len(s) - len(ms):] and _broadcast_batch(ms, s) != s:
        raise _broadcast_error(s, m.shape)  # (torch's text when incompatible)
    return apply(R["masked_fill_scalar"], (input,), (_filled_array(value, input), m))


# ---- logarithms, hyperbolics, inverse trigonometry, rounding; two-argument math -----------------
log10 = method(_unary_fn("log10", "Base-10 logarithm"))
log2 = method(_unary_fn("log2", "Base-2 logarithm"))
exp2 = method(_unary_fn("exp2", "2 ** input"))
expm1 = method(_unary_fn("expm1", "exp(input) - 1, accurate near 0"))
sinh = method(_unary_fn("sinh", "Hyperbolic sine"))
cosh = method(_unary_fn("cosh", "Hyperbolic cosine"))
asin = arcsin = method(_unary_fn("asin", "Inverse sine"), "asin", "arcsin")
acos = arccos = method(_unary_fn("acos", "Inverse cosine"), "acos", "arccos")
atan = arctan = method(_unary_fn("atan", "Inverse tangent"), "atan", "arctan")
erfinv = method(_unary_fn("erfinv", "Inverse error function"))
tan = method(_unary_fn("tan", "Tangent"))
asinh = arcsinh = method(_unary_fn("asinh", "Inverse hyperbolic sine"), "asinh", "arcsinh")
acosh = arccosh = method(_unary_fn("acosh", "Inverse hyperbolic cosine"), "acosh", "arccosh")
atanh = arctanh = method(_unary_fn("atanh", "Inverse hyperbolic tangent"), "atanh", "arctanh")
sinc = method(_unary_fn("sinc", "sin(pi input) / (pi input), 1 at 0: the normalized sinc"))


@method
def logit(input, eps=None, *, out=None):
    """log(p / (1 - p)) elementwise, p clamped to [eps, 1 - eps] when `eps` is given (torch.logit;
    LogitBackward0: NaN gradient outside [0, 1] without eps, 0 outside the clamp with it).
    Shape kept; integers become float."""
    if out is not None:
        return _out("logit", lambda: logit(input, eps), (input,), out)
    if not isinstance(input, Tensor):
        _check_tensor(input, "logit")
    return apply(R["logit"], (input,), (None if eps is None else float(eps),))


floor = method(_unary_fn("floor", "Round down (gradient zero)"))
ceil = method(_unary_fn("ceil", "Round up (gradient zero)"))
trunc = fix = method(_unary_fn("trunc", "Round toward zero (gradient zero)"), "trunc", "fix")
frac = method(_unary_fn("frac", "input - trunc(input)"))
sgn = method(_unary_fn("sgn", "Sign, the complex-aware spelling (real tensors: sign)"))


def _binary_fn(name, doc):
    """A float op of two tensors (atan2, hypot, ...): integer operands compute in the default
    float dtype, after torch's promotion."""
    row = R[name]

    def f(input, other):
        _check_tensor(input, name)
        _check_tensor(other, name, "other", 2)
        dt = dtypes.result_type(input._data, other._data)
        if dt.kind != "f":
            dt = dtypes.default_np()
        if input._data.dtype != dt:
            input = to_dtype(input, dtypes.from_np(dt))
        if other._data.dtype != dt:
            other = to_dtype(other, dtypes.from_np(dt))
        return apply(row, (input, other))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{doc}, elementwise with broadcasting (torch.{name})."
    return f


atan2 = arctan2 = method(
    _binary_fn("atan2", "atan(input / other) in the right quadrant"),
    "atan2", "arctan2")
hypot = method(_binary_fn("hypot", "sqrt(input ** 2 + other ** 2)"))
logaddexp = method(_binary_fn("logaddexp", "log(exp(input) + exp(other)), stable"))
logaddexp2 = method(_binary_fn("logaddexp2", "log2(2 ** input + 2 ** other), stable"))


@method
def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN) (torch.xlogy). Either side
    may be a number: XlogyBackward0 for two tensors, 1 for a number input, 2 for a number
    other."""
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        return apply(R["xlogy"], (_as_float(input), _as_float(other)))
    if isinstance(input, Tensor):
        return apply(R["xlogy_scalar_other"], (_as_float(input),), (float(other),))
    return apply(R["xlogy_scalar_self"], (_as_float(other),), (float(input),))


@method
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN -> nan, +inf -> posinf, -inf -> neginf (default: the dtype's largest finite values)
    (torch.nan_to_num); the gradient passes where input is finite."""
    return apply(R["nan_to_num"], (input,), (nan, posinf, neginf))


@method
def lerp(input, end, weight):
    """input + weight * (end - input) (torch.lerp); weight a number (LerpBackward0) or a tensor
    (LerpBackward1), all broadcasting."""
    if isinstance(weight, Tensor):
        return apply(R["lerp_tensor"], (input, end, weight))
    return apply(R["lerp"], (input, end), (weight,))


@method
def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, broadcasting (torch.addcmul)."""
    return apply(R["addcmul"], (input, tensor1, tensor2), (value,))


@method
def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2, broadcasting (torch.addcdiv)."""
    return apply(R["addcdiv"], (input, tensor1, tensor2), (value,))
