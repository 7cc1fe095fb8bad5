"""Rows: elementwise ops — binary (broadcasting; a Python number may stand for either side) and
unary, plus the fills and copies that in-place ops and assignment use.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from .formulas import _astype, _in_range, _np_dtype, _repeat_backward
from .registry import ROWS, op

_SQRT_2_OVER_PI = 2.0 / math.sqrt(math.pi)  # erf'(x) = 2/sqrt(pi) exp(-x^2)

# ---- binary (broadcasting) --------------------------------------------------------------------
op("add", lambda self, other, alpha: self + other if alpha == 1 else self + alpha * other,
   broadcast=True,
   self=lambda g: g,
   other=lambda g, alpha: g if alpha == 1 else g * alpha)
op("sub", lambda self, other, alpha: self - other if alpha == 1 else self - alpha * other,
   broadcast=True,
   self=lambda g: g,
   other=lambda g, alpha: -g if alpha == 1 else g * -alpha)
op("rsub", lambda self, other, alpha: other - self if alpha == 1 else other - alpha * self,
   node="RsubBackward1",
   self=lambda g, alpha: -g if alpha == 1 else g * -alpha)
op("mul", lambda self, other: self * other, broadcast=True,
   self=lambda g, other: g * other,
   other=lambda g, self: g * self)
op("div", lambda self, other: self / other, broadcast=True,
   self=lambda g, other: g / other,
   other=lambda g, self, other: -g * self / (other * other))
op("pow", lambda self, exponent: self ** exponent,
   self=lambda g, self, exponent: g * 0 if exponent == 0
   else g * exponent * self ** (exponent - 1))
op("pow_tt", lambda self, exponent: self ** exponent, node="PowBackward1", broadcast=True,
   self=lambda g, self, exponent, xp: xp.where(exponent == 0, 0,
                                               g * exponent * self ** (exponent - 1)),
   exponent=lambda g, self, result, exponent, xp: xp.where((self == 0) & (exponent >= 0), 0,
                                                           g * result * xp.log(self)))
op("rpow", lambda exponent, base: base ** exponent, node="PowBackward2",
   exponent=lambda g, result, base: g * 0 if base == 0 else g * result * math.log(base))
op("maximum", lambda self, other: np.maximum(self, other), broadcast=True,
   self=lambda g, self, other, xp: xp.where(self == other, g / 2, xp.where(self > other, g, 0)),
   other=lambda g, self, other, xp: xp.where(self == other, g / 2, xp.where(self < other, g, 0)))
op("minimum", lambda self, other: np.minimum(self, other), broadcast=True,
   self=lambda g, self, other, xp: xp.where(self == other, g / 2, xp.where(self < other, g, 0)),
   other=lambda g, self, other, xp: xp.where(self == other, g / 2, xp.where(self > other, g, 0)))
op("where", lambda self, other, condition: np.where(condition, self, other), broadcast=True,
   self=lambda g, condition, xp: xp.where(condition, g, 0),
   other=lambda g, condition, xp: xp.where(condition, 0, g))

# ---- unary ------------------------------------------------------------------------------------
op("neg", lambda self: -self,
   self=lambda g: -g)
op("exp", np.exp, float_op=True,
   self=lambda g, result: g * result)
op("log", np.log, float_op=True,
   self=lambda g, self: g / self)
op("log1p", np.log1p, float_op=True, node="Log1PBackward0",
   self=lambda g, self: g / (self + 1))
op("sqrt", np.sqrt, float_op=True,
   self=lambda g, result: g / (2 * result))
op("rsqrt", lambda self: 1 / np.sqrt(self), float_op=True,
   self=lambda g, result: -0.5 * g * result * result * result)
op("reciprocal", lambda self: 1 / self, float_op=True,
   self=lambda g, result: -g * result * result)
op("abs", np.abs,
   self=lambda g, self, xp: g * xp.sign(self))
op("sign", lambda self: np.nan_to_num(np.sign(self), nan=0.0),
   self=lambda g: g * 0)
op("sin", np.sin, float_op=True,
   self=lambda g, self, xp: g * xp.cos(self))
op("cos", np.cos, float_op=True,
   self=lambda g, self, xp: -g * xp.sin(self))
op("tanh", np.tanh, float_op=True,
   self=lambda g, result: g * (1 - result * result))
op("sigmoid", lambda self: 0.5 * np.tanh(0.5 * self) + 0.5, float_op=True,
   self=lambda g, result: g * result * (1 - result))
op("relu", lambda self: np.maximum(self, 0),
   self=lambda g, result: g * (result > 0))
op("erf", lambda self: backend.erf(self), float_op=True,
   self=lambda g, self, xp: g * _SQRT_2_OVER_PI * xp.exp(-(self * self)))
op("clamp", lambda self, min, max: np.clip(self, min, max), node="ClampBackward1",
   self=lambda g, self, min, max: g * _in_range(self, min, max))
op("clamp_min", lambda self, min: np.maximum(self, min),
   self=lambda g, self, min: g * (self >= min))
op("clamp_max", lambda self, max: np.minimum(self, max),
   self=lambda g, self, max: g * (self <= max))

# ---- copies, casts, fills ---------------------------------------------------------------------
op("flip", lambda self, dims: np.flip(self, dims).copy(),
   self=lambda g, dims, xp: xp.flip(g, dims))
op("repeat", lambda self, repeats: np.tile(self, repeats),
   self=lambda g, self_shape, repeats: _repeat_backward(g, self_shape, repeats))
op("clone", lambda self: self.copy(),
   self=lambda g: g)
op("to_copy", lambda self, dtype: self.astype(dtype), node="ToCopyBackward0",
   self=lambda g, self, xp: _astype(g, _np_dtype(self), xp))
op("masked_fill", lambda self, value, mask: np.where(mask, value, self), broadcast=True,
   self=lambda g, mask, xp: xp.where(mask, 0, g),
   value=lambda g, mask, xp: xp.where(mask, g, 0).sum())
op("fill", lambda self, value: np.full_like(self, value), node="FillBackward2",
   self=lambda g: g * 0)
op("fill_tensor", lambda self, value: np.broadcast_to(value, self.shape).astype(self.dtype),
   node="FillBackward3", broadcast=True,
   self=lambda g: g * 0,
   value=lambda g: g.sum())
op("zero", lambda self: np.zeros_like(self),
   self=lambda g: g * 0)
op("copy", lambda self, src: np.broadcast_to(src, self.shape).astype(self.dtype, copy=False),
   node="CopyBackwards", broadcast=True,
   self=lambda g: g * 0,
   src=lambda g: g)
ROWS["copy"].node.name = lambda self: "nbgrad::autograd::CopyBackwards"  # a C++ node in PyTorch
