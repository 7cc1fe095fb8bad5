"""Rows: elementwise ops — binary (broadcasting; a Python number may stand for either side) and
unary, plus the fills and copies that in-place ops and assignment use.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: derivatives.py.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..naming import cpp, named
from ..backend import get_array_module as _xp
from .derivatives import _halved_at_ties, _in_range, _repeat_backward
from .reductions import _refuse
from .registry import ROWS, op

_SQRT_2_OVER_PI = 2.0 / math.sqrt(math.pi)  # erf'(x) = 2/sqrt(pi) exp(-x^2)


def _ufunc(f):
    """The forward `f(self)` for a numpy ufunc, on the array's own module when not numpy's."""
    name = f.__name__

    def fwd(self):
        return f(self) if type(self) is np.ndarray else getattr(_xp(self), name)(self)
    return named(fwd, name)

# ---- binary (broadcasting) --------------------------------------------------------------------
op("add", lambda self, other, alpha: self + other if alpha == 1 else self + alpha * other,
   broadcast=True, scalar_as_0d=True, inplace_ufunc=np.add,
   self=lambda g: g,
   other=lambda g, alpha, xp: g if alpha == 1 else xp.mul_scalar(g, alpha))
op("sub", lambda self, other, alpha: self - other if alpha == 1 else self - alpha * other,
   broadcast=True, scalar_as_0d=True, inplace_ufunc=np.subtract,
   self=lambda g: g,
   other=lambda g, alpha, xp: -g if alpha == 1 else xp.mul_scalar(-g, alpha))
op("rsub", lambda self, other, alpha: other - self if alpha == 1 else other - alpha * self,
   node="RsubBackward1",
   self=lambda g, alpha: -g if alpha == 1 else g * -alpha)
op("mul", lambda self, other: self * other, broadcast=True, scalar_as_0d=True,
   inplace_ufunc=np.multiply,
   self=lambda g, other: g * other,
   other=lambda g, self: g * self)
op("div", lambda self, other: self / other, broadcast=True, scalar_as_0d=True,
   inplace_ufunc=np.true_divide,
   self=lambda g, other: g / other,
   other=lambda g, self, other: -g * (self / other / other))
# a tensor and a number as PyTorch's backward formulas combine them (mul.Scalar, div.Scalar):
# MulBackward1 / DivBackward1 nodes in gradients built under create_graph (mean's / n)
op("mul_scalar", lambda self, other: self * other, node="MulBackward1",
   self=lambda g, other, xp: xp.mul_scalar(g, other))
op("div_scalar", lambda self, other: self / other, node="DivBackward1",
   self=lambda g, other, xp: xp.div_scalar(g, other))
op("add_scalar", lambda self, other: self + other, node="AddBackward1",
   self=lambda g: g)
op("sub_scalar", lambda self, other: self - other, node="SubBackward1",  # (log_sigmoid's z - 1)
   self=lambda g: g)
def _pow(self, exponent):
    """self ** exponent as torch's kernel: sqrt at 0.5 and 1 / sqrt at -0.5 (so NaN at -inf,
    where C's pow gives inf and 0, and -0 keeps its sign); a Tensor through the row."""
    if isinstance(self, np.ndarray) and self.dtype.kind == "f" and exponent in (0.5, -0.5):
        xp = _xp(self)
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.sqrt(self) if exponent == 0.5 else 1 / xp.sqrt(self)
    return self ** exponent


op("pow", _pow,
   self=lambda g, self, exponent, xp: xp.zeros_like(g) if exponent == 0
   else g * xp.mul_scalar(_pow(self, exponent - 1), exponent))
op("pow_tt", lambda self, exponent: self ** exponent, node="PowBackward1", broadcast=True,
   self=lambda g, self, exponent, xp: xp.where(exponent == 0, 0,
                                               g * (exponent * self ** (exponent - 1))),
   exponent=lambda g, self, exponent, result, xp: g * xp.where(
       (self == 0) & (exponent >= 0), 0, result * xp.log(self)))
op("rpow", lambda exponent, base: base ** exponent, node="PowBackward2",
   exponent=lambda g, result, base, xp: xp.zeros_like(g) if base == 0
   else g * xp.mul_scalar(result, math.log(base)))
# PyTorch's: where(self == other, grad / 2, grad).masked_fill_(the other side wins, 0)
op("maximum", lambda self, other: _xp(self).maximum(self, other), broadcast=True,
   self=lambda g, self, other, xp: xp.masked_fill(_halved_at_ties(g, self, other, xp),
                                                  self < other, 0),
   other=lambda g, self, other, xp: xp.masked_fill(_halved_at_ties(g, self, other, xp),
                                                   self > other, 0))
op("minimum", lambda self, other: _xp(self).minimum(self, other), broadcast=True,
   self=lambda g, self, other, xp: xp.masked_fill(_halved_at_ties(g, self, other, xp),
                                                  self > other, 0),
   other=lambda g, self, other, xp: xp.masked_fill(_halved_at_ties(g, self, other, xp),
                                                   self < other, 0))
op("where", lambda self, other, condition: _xp(condition).where(condition, self, other),
   broadcast=True,
   self=lambda g, condition, xp: xp.where(condition, g, 0),
   other=lambda g, condition, xp: xp.where(condition, 0, g))

# ---- unary ------------------------------------------------------------------------------------
op("neg", lambda self: -self,
   self=lambda g: -g)
op("exp", _ufunc(np.exp), float_op=True,
   self=lambda g, result: g * result)
op("log", _ufunc(np.log), float_op=True,
   self=lambda g, self: g / self)
op("log1p", _ufunc(np.log1p), float_op=True, node="Log1PBackward0",
   self=lambda g, self, xp: g / xp.add_scalar(self, 1))
op("sqrt", _ufunc(np.sqrt), float_op=True,
   self=lambda g, result, xp: g / xp.mul_scalar(result, 2))
op("rsqrt", lambda self: 1 / _xp(self).sqrt(self), float_op=True,
   self=lambda g, result, xp: xp.mul_scalar(g, -0.5) * result ** 3)
op("reciprocal", lambda self: 1 / self, float_op=True,
   self=lambda g, result: -g * (result * result))
op("abs", _ufunc(np.abs),
   self=lambda g, self, xp: g * xp.sign(self))
op("sign", lambda self: _xp(self).nan_to_num(_xp(self).sign(self), nan=0.0),
   self=lambda g, xp: xp.zeros_like(g))
op("sin", _ufunc(np.sin), float_op=True,
   self=lambda g, self, xp: g * xp.cos(self))
op("cos", _ufunc(np.cos), float_op=True,
   self=lambda g, self, xp: g * -xp.sin(self))
# their gradients are PyTorch's tanh_backward / sigmoid_backward ops, with its formulas
op("tanh", _ufunc(np.tanh), float_op=True,
   double=dict(node="TanhBackwardBackward0", g="again", saved={"output": "result"},
               result=lambda gg, g, result, xp: gg * (xp.mul_scalar(result, -2) * g)),
   self=lambda g, result: g * (1 - result * result))


def _sigmoid(self):
    """torch's kernel: 1 / (1 + exp(-x)), in one fresh buffer on a numpy array (exp(-x) = inf
    below x ~ -88 in float32 gives 0, as torch's; 0.5 * tanh(0.5 * x) + 0.5 lost the relative
    precision of every negative x: sigmoid(-15) 2.6% off in float32, 0 from -18 on)."""
    xp = _xp(self)
    if type(self) is not np.ndarray or not self.ndim:
        return xp.reciprocal(xp.exp(-self) + self.dtype.type(1))
    t = np.negative(self)
    np.exp(t, out=t)
    t += self.dtype.type(1)
    np.reciprocal(t, out=t)
    return t


op("sigmoid", _sigmoid, float_op=True,
   double=dict(node="SigmoidBackwardBackward0", g="again", saved={"output": "result"},
               result=lambda gg, g, result, xp: gg * g * xp.add_scalar(
                   xp.mul_scalar(result, -2), 1)),
   self=lambda g, result: g * (1 - result) * result)  # (torch's sigmoid_backward, its order)
# relu's gradient is PyTorch's threshold_backward(grad, result, 0): its gradient is itself again
# (and zeros for `result`)
op("relu", lambda self: _xp(self).maximum(self, self.dtype.type(0)),  # (a typed 0: 1.5x faster)
   double=dict(node="ThresholdBackwardBackward0", saved={"self": "result"},
               g="again",
               result=lambda gg, xp: xp.zeros_like(gg)),
   self=lambda g, result, xp: xp.masked(g, result <= 0, unless=True))  # (NaN passes, as torch)
op("erf", lambda self: backend.erf(self), float_op=True,
   self=lambda g, self, xp: xp.mul_scalar(xp.exp(-(self ** 2)), _SQRT_2_OVER_PI) * g)
op("clamp", lambda self, min, max: _xp(self).clip(self, min, max), node="ClampBackward1",
   self=lambda g, self, min, max, xp: xp.masked(g, _in_range(self, min, max)))
op("clamp_min", lambda self, min: _xp(self).maximum(self, min),
   self=lambda g, self, min, xp: xp.masked(g, self >= min))
op("clamp_max", lambda self, max: _xp(self).minimum(self, max),
   self=lambda g, self, max, xp: xp.masked(g, self <= max))

# ---- copies, casts, fills ---------------------------------------------------------------------
op("flip", lambda self, dims: _xp(self).flip(self, dims).copy(),
   self=lambda g, dims, xp: xp.flip(g, dims))
op("repeat", lambda self, repeats: _xp(self).tile(self, repeats),
   self=lambda g, self_shape, repeats: _repeat_backward(g, self_shape, repeats))
op("clone", lambda self, contiguous: _xp(self).ascontiguousarray(self) if contiguous
   else self.copy(order="K"),
   self=lambda g: g)
# saves no tensor, as PyTorch's (which keeps self's options): `src` is self's dtype
op("to_copy", lambda self, dtype, src: self.astype(dtype), node="ToCopyBackward0",
   self=lambda g, src, xp: xp.astype(g, src))
# device: where `self` was, `to`: where it goes (the gradient goes back)
op("to_device", lambda self, device, to: backend.to_device(self, to), node="ToCopyBackward0",
   self=lambda g, device, xp: xp.to_device(g, device))
# a number as the value (masked_fill.Scalar: one input), or a 0-d tensor (masked_fill.Tensor)
op("masked_fill_scalar", lambda self, value, mask: _xp(mask).where(mask, value, self),
   node="MaskedFillBackward0",
   self=lambda g, mask, xp: xp.masked_fill(g, mask, 0))
op("masked_fill", lambda self, value, mask: _xp(mask).where(mask, value, self), broadcast=True,
   node="MaskedFillBackward1", unchecked_write=True,
   self=lambda g, mask, xp: xp.masked_fill(g, mask, 0),
   value=lambda g, mask, xp: xp.where(mask, g, 0).sum())
op("fill", lambda self, value: _xp(self).full_like(self, value), node="FillBackward2",
   unchecked_write=True,
   self=lambda g, xp: xp.new_zeros(g, g.shape))  # zeros, not g * 0 (NaN * 0)
op("fill_tensor", lambda self, value: _xp(value).broadcast_to(value, self.shape).astype(self.dtype),
   node="FillBackward3", broadcast=True,
   self=lambda g, xp: xp.new_zeros(g, g.shape),
   value=lambda g: g.sum())
op("zero", lambda self: _xp(self).zeros_like(self), unchecked_write=True,
   self=lambda g, xp: xp.new_zeros(g, g.shape))
op("copy", lambda self, src: _xp(src).broadcast_to(src, self.shape).astype(self.dtype, copy=False),
   node="CopyBackwards", broadcast=True, overlap_check="same_is_noop",
   self=lambda g, xp: xp.new_zeros(g, g.shape),  # zeros_like(grad), not g * 0 (NaN * 0)
   src=lambda g: g)
ROWS["copy"].node.name = lambda self: cpp("CopyBackwards")  # a C++ node in PyTorch


# ---- more elementwise: logs, hyperbolic and inverse trig, binary special functions, rounding,
# remainders, clamps, interpolation, addcmul/addcdiv ------------------------------------------
_LN2, _LN10 = math.log(2.0), math.log(10.0)
def _atan2_recip(self, other, xp):
    """1 / (self^2 + other^2), 0 at the origin, as torch's atan2_backward: the gradient there
    is (0, -0), not NaN (the second derivative there is NaN in both)."""
    d = self * self + other * other
    return xp.masked_fill(xp.reciprocal(d), d == 0, 0)


_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2  # erfinv'(y) = sqrt(pi)/2 exp(erfinv(y)^2)


def _keep_ints(f):
    """floor/ceil/trunc/round of an integer tensor: the same integers (PyTorch keeps the dtype)."""
    return lambda self: f(self) if self.dtype.kind == "f" else self.copy()


op("log10", _ufunc(np.log10), float_op=True,
   self=lambda g, self, xp: g / xp.mul_scalar(self, _LN10))
op("log2", _ufunc(np.log2), float_op=True,
   self=lambda g, self, xp: g / xp.mul_scalar(self, _LN2))
op("exp2", _ufunc(np.exp2), float_op=True,
   self=lambda g, result, xp: xp.mul_scalar(g * result, _LN2))
op("expm1", _ufunc(np.expm1), float_op=True,
   self=lambda g, result, xp: g * xp.add_scalar(result, 1))
op("sinh", _ufunc(np.sinh), float_op=True,
   self=lambda g, self, xp: g * xp.cosh(self))
op("cosh", _ufunc(np.cosh), float_op=True,
   self=lambda g, self, xp: g * xp.sinh(self))
op("asin", _ufunc(np.arcsin), float_op=True,
   self=lambda g, self, xp: g * xp.rsqrt(xp.add_scalar(-self * self, 1)))
op("acos", _ufunc(np.arccos), float_op=True,
   self=lambda g, self, xp: g * -xp.rsqrt(xp.add_scalar(-self * self, 1)))
op("atan", _ufunc(np.arctan), float_op=True,
   self=lambda g, self, xp: g / xp.add_scalar(self * self, 1))
# torch's derivatives.yaml: the powers as pow(2), so the recorded second order is its graph
op("tan", _ufunc(np.tan), float_op=True,
   self=lambda g, result, xp: g * xp.add_scalar(result ** 2, 1))
op("asinh", _ufunc(np.arcsinh), float_op=True,
   self=lambda g, self, xp: g * xp.rsqrt(xp.add_scalar(self ** 2, 1)))
op("acosh", _ufunc(np.arccosh), float_op=True,  # (torch's real case: self * self, one rsqrt)
   self=lambda g, self, xp: g * xp.rsqrt(self * self - 1))
op("atanh", _ufunc(np.arctanh), float_op=True,
   self=lambda g, self, xp: g / (1 - self ** 2))
op("sinc", lambda self: _xp(self).sinc(self), float_op=True,
   self=lambda g, self, xp: _sinc_grad(g, self, xp))
op("logit", lambda self, eps: _logit(self, eps), float_op=True,
   self=lambda g, self, eps, xp: _logit_grad(g, self, eps, xp))


def _sinc_grad(g, self, xp):
    """torch's sinc_backward: g (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 where pi x^2 is."""
    sp = xp.mul_scalar(self, math.pi)
    ssp = xp.mul_scalar(self * self, math.pi)
    return xp.where(ssp == 0, 0, g * (sp * xp.cos(sp) - xp.sin(sp)) / ssp)


def _logit(x, eps):
    """torch's logit kernel: log(x / (1 - x)), x first clamped to [eps, 1 - eps] when given."""
    if eps is not None:
        x = _xp(x).clip(x, eps, 1 - eps)
    return _xp(x).log(x / (1 - x))


def _logit_grad(g, x, eps, xp):
    """torch's logit_backward: g / (x (1 - x)) on [eps, 1 - eps] (on [0, 1] without eps), 0
    outside it with eps, NaN without."""
    lo, hi, fill = (0.0, 1.0, math.nan) if eps is None else (eps, 1 - eps, 0)
    return xp.where((x < lo) | (x > hi), fill, g / (x * (1 - x)))


for _name in ("asinh", "acosh", "atanh"):  # torch's in-place forms record a node that refuses
    op(_name + "_", ROWS[_name].fwd, float_op=True, node=_name.capitalize() + "Backward1",
       self=_refuse(f"inplace version of {_name}"))


op("erfinv", lambda self: backend.erfinv(self), float_op=True,
   self=lambda g, self, xp: g * _SQRT_PI_OVER_2 * xp.exp(xp.erfinv(self) ** 2))  # saves self
op("atan2", lambda self, other: _xp(self).arctan2(self, other), broadcast=True,
   self=lambda g, self, other, xp: g * other * _atan2_recip(self, other, xp),
   other=lambda g, self, other, xp: g * -self * _atan2_recip(self, other, xp))
op("hypot", lambda self, other: _xp(self).hypot(self, other), broadcast=True,
   self=lambda g, self, result: g * self / result,
   other=lambda g, other, result: g * other / result)
op("logaddexp", lambda self, other: _xp(self).logaddexp(self, other), broadcast=True,
   self=lambda g, self, other, xp: g / xp.add_scalar(xp.exp(other - self), 1),
   other=lambda g, self, other, xp: g / xp.add_scalar(xp.exp(self - other), 1))
op("logaddexp2", lambda self, other: _xp(self).logaddexp2(self, other), broadcast=True,
   self=lambda g, self, other: g / (1 + 2.0 ** (other - self)),
   other=lambda g, self, other: g / (1 + 2.0 ** (self - other)))
op("xlogy", lambda self, other: _xp(other).where((self == 0) & ~_xp(other).isnan(other), 0.0,
                                         self * _xp(other).log(other)), broadcast=True,
   self=lambda g, self, other, xp: xp.where((self == 0) & (other <= 0), 0, g * xp.log(other)),
   other=lambda g, self, other: g * self / other)
op("xlogy_scalar_other", lambda self, other: _xp(self).where(self == 0, 0.0,
                                                             self * math.log(other)),
   node="XlogyBackward2",
   self=lambda g, other: g * math.log(other) if other > 0 else g * float("nan"))
op("xlogy_scalar_self", lambda other, self: _xp(other).where(
    (self == 0) & ~_xp(other).isnan(other), 0.0, self * _xp(other).log(other)),
   node="XlogyBackward1",
   other=lambda g, other, self: g * self / other)
op("floor", _keep_ints(_ufunc(np.floor)),
   self=lambda g, xp: xp.zeros_like(g))
op("ceil", _keep_ints(_ufunc(np.ceil)),
   self=lambda g, xp: xp.zeros_like(g))
op("trunc", _keep_ints(_ufunc(np.trunc)),
   self=lambda g, xp: xp.zeros_like(g))
op("round", _keep_ints(lambda self: _xp(self).round(self)),
   self=lambda g, xp: xp.zeros_like(g))
op("round_decimals", lambda self, decimals: _xp(self).round(self, decimals), node="RoundBackward1",
   self=lambda g, xp: xp.zeros_like(g))
op("frac", lambda self: self - _xp(self).trunc(self),
   self=lambda g: g)
op("sgn", lambda self: _xp(self).nan_to_num(_xp(self).sign(self), nan=0.0),
   self=lambda g, xp: xp.zeros_like(g))
op("fmod", lambda self, other: _xp(self).fmod(self, other),
   self=lambda g: g)
op("fmod_tensor", lambda self, other: _xp(self).fmod(self, other), node="FmodBackward1",
   broadcast=True,
   self=lambda g: g,
   other=lambda g, self, other, xp: -g * xp.div_rounded(self, other, "trunc"))
op("remainder", lambda self, other: _xp(self).remainder(self, other),
   self=lambda g: g)
op("remainder_tensor", lambda self, other: _xp(self).remainder(self, other),
   node="RemainderBackward1",
   broadcast=True,
   self=lambda g: g,
   other=lambda g, self, other, xp: -g * xp.div_rounded(self, other, "floor"))
op("clamp_tensor", lambda self, min, max: _xp(self).minimum(_xp(self).maximum(self, min), max),
   node="ClampBackward0", broadcast=True,
   self=lambda g, self, min, max, xp: xp.where((self >= min) & (self <= max), g, 0),
   min=lambda g, self, min, max, xp: xp.where((self < min) & ~(max < min), g, 0),
   max=lambda g, self, min, max, xp: xp.where((self > max) | (max < min), g, 0))
op("nan_to_num", lambda self, nan, posinf, neginf: _xp(self).nan_to_num(self, nan=nan,
                                                                        posinf=posinf,
                                                                 neginf=neginf),
   self=lambda g, self, xp: g * xp.isfinite(self))
def _lerp(self, end, weight):
    """torch's lerp: from `self` below a weight of 0.5, from `end` at and above it (so an inf at
    either end gives that inf, not inf - inf)."""
    if not isinstance(weight, np.ndarray) and not hasattr(weight, "shape"):
        return self + weight * (end - self) if abs(weight) < 0.5 else \
            end - (end - self) * (1 - weight)
    return _xp(self).where(abs(weight) < 0.5, self + weight * (end - self),
                           end - (end - self) * (1 - weight))


op("lerp", _lerp, broadcast=True,
   self=lambda g, weight, xp: xp.mul_scalar(g, 1 - weight),
   end=lambda g, weight, xp: xp.mul_scalar(g, weight))
op("lerp_tensor", _lerp, node="LerpBackward1",
   broadcast=True,
   self=lambda g, weight: g * (1 - weight),
   end=lambda g, weight: g * weight,
   weight=lambda g, self, end: g * (end - self))
op("addcmul", lambda self, tensor1, tensor2, value: self + value * tensor1 * tensor2,
   broadcast=True,
   self=lambda g: g,
   tensor1=lambda g, tensor2, value, xp: g * xp.mul_scalar(tensor2, value),
   tensor2=lambda g, tensor1, value, xp: g * xp.mul_scalar(tensor1, value))
op("addcdiv", lambda self, tensor1, tensor2, value: self + value * tensor1 / tensor2,
   broadcast=True,
   self=lambda g: g,
   tensor1=lambda g, tensor2, value: g * value / tensor2,
   tensor2=lambda g, tensor1, tensor2, value: -g * value * tensor1 / (tensor2 * tensor2))
