"""Rows: the pointwise activations PyTorch records as one node (GeluBackward0, SiluBackward0,
EluBackward0, ...) and the in-place variants torch names differently (leaky_relu_ ->
LeakyReluBackward1).

The formulas follow torch's CPU kernels (the same branch at each kink, the same constants), and
run on arrays or, under create_graph, on Tensors: ``xp.exp(x)`` is numpy's (cupy's) on arrays
and ``x.exp()`` on Tensors (ops/formulas.py). Schema and how to add a row: nbgrad/ops/registry.py.
"""
from __future__ import annotations

import math

import numpy as np

from ..autograd.apply import apply as _apply
from ..backend import get_array_module as _xp
from .formulas import TENSORS, array_formulas
from .reductions import _refuse
from .registry import ROWS, _self_adjoint, op

# ---- pointwise activations (torch's CPU kernels: the same branch at each kink) ----------------
# ctx: the forward's cdf (or tanh term), which the backward reuses (recomputed on Tensors)
op("gelu", lambda self, approximate: _gelu_forward(self, approximate), float_op=True, ctx=True,
   double="GeluBackwardBackward0",
   self=lambda g, self, approximate, ctx, xp: _gelu_backward(g, self, approximate, ctx, xp))
op("silu", lambda self: self / (1 + _xp(self).exp(-self)), float_op=True,
   self=lambda g, self, xp: g * _silu_grad(self, xp))
op("mish", lambda self: self * _xp(self).tanh(_xp(self).log1p(_xp(self).exp(self))), float_op=True,
   self=lambda g, self, xp: g * _mish_grad(self, xp))
op("elu", lambda self, alpha, scale, input_scale: _elu(self, alpha, scale, input_scale, _xp(self)),
   float_op=True, double="EluBackwardBackward0",
   self=lambda g, self, alpha, scale, input_scale, xp: g * _elu_grad(self, alpha, scale,
                                                                     input_scale, xp))
op("celu", lambda self, alpha: _elu(self, alpha, 1.0, 1.0 / alpha, _xp(self)), float_op=True,
   double="EluBackwardBackward0",
   self=lambda g, self, alpha, xp: g * _elu_grad(self, alpha, 1.0, 1.0 / alpha, xp))
op("leaky_relu", lambda self, negative_slope: _xp(self).where(self > 0, self,
                                                              self * negative_slope),
   double=_self_adjoint("LeakyReluBackwardBackward0"),
   self=lambda g, self, negative_slope, xp: xp.where(self > 0, g, g * negative_slope))
op("softplus", lambda self, beta, threshold: _softplus(self, beta, threshold, _xp(self)),
   float_op=True, double="SoftplusBackwardBackward0",
   self=lambda g, self, beta, threshold, xp: g * _softplus_grad(self, beta, threshold, xp))
op("hardtanh", lambda self, min_val, max_val: _xp(self).clip(self, min_val, max_val),
   double=_self_adjoint("HardtanhBackwardBackward0"),
   self=lambda g, self, min_val, max_val, xp: xp.where((self <= min_val) | (self >= max_val),
                                                       0, g))
op("hardswish", lambda self: self * _xp(self).clip(self + 3, 0, 6) / 6,
   double="HardswishBackwardBackward0",
   self=lambda g, self, xp: xp.where(self <= -3, 0,
                                     xp.where(self < 3, g * (self / 3 + 0.5), g)))
op("hardsigmoid", lambda self: _xp(self).clip(self + 3, 0, 6) / 6,
   self=lambda g, self, xp: _apply(ROWS["hardsigmoid_backward"], (g, self)) if xp is TENSORS
   else xp.where((self > -3) & (self < 3), g * _ONE_SIXTH_F32, 0))
# torch has no derivative of hardsigmoid_backward: under create_graph the gradient hangs on a
# NotImplemented node, which refuses the second backward with torch's text
op("hardsigmoid_backward", lambda grad_output, self: _xp(self).where(
    (self > -3) & (self < 3), grad_output * _ONE_SIXTH_F32, 0), node="NotImplemented",
   **{"grad_output, self": lambda g: _refuse("hardsigmoid_backward", RuntimeError)(g)})
op("log_sigmoid", lambda self: _log_sigmoid(self, _xp(self)),
   float_op=True, node="LogSigmoidBackward0", double="LogSigmoidBackwardBackward0",
   self=lambda g, self, xp: g * _log_sigmoid_grad(self, xp))
op("threshold", lambda self, threshold, value: _xp(self).where(self > threshold, self, value),
   double=_self_adjoint("ThresholdBackwardBackward0"),
   self=lambda g, self, threshold, xp: xp.where(self <= threshold, 0, g))
op("hardshrink", lambda self, lambd: _xp(self).where((self >= -lambd) & (self <= lambd), 0, self),
   double=_self_adjoint("HardshrinkBackwardBackward0"),
   self=lambda g, self, lambd, xp: xp.where((self >= -lambd) & (self <= lambd), 0, g))
op("softshrink", lambda self, lambd: _xp(self).where(self > lambd, self - lambd,
                                              _xp(self).where(self < -lambd, self + lambd, 0)),
   double=_self_adjoint("SoftshrinkBackwardBackward0"),
   self=lambda g, self, lambd, xp: xp.where((self >= -lambd) & (self <= lambd), 0, g))
op("glu", lambda self, dim: _glu(self, dim, _xp(self)), float_op=True,
   self=lambda g, self, dim, xp: _glu_grad(g, self, dim, xp))
op("_prelu_kernel", lambda self, weight: _xp(self).where(self > 0, self, weight * self),
   broadcast=True, node="PreluKernelBackward0",
   self=lambda g, self, weight, xp: xp.where(self > 0, g, weight * g),
   weight=lambda g, self, xp: xp.where(self > 0, 0, self * g))


# ---- helpers of the rows above ----------------------------------------------------------------
_ONE_SIXTH_F32 = float(np.float32(1.0) / np.float32(6.0))  # torch's hardsigmoid slope, float32
_SQRT1_2 = 1 / math.sqrt(2)
_GELU_PDF = 1 / math.sqrt(2 * math.pi)
_GELU_TANH_BETA = math.sqrt(2 / math.pi)
_GELU_TANH_KAPPA = 0.044715


def _erf(x):
    return array_formulas(x).erf(x)


def _gelu_forward(x, approximate):
    """(gelu(x), ctx): ctx is the cdf 0.5 (1 + erf(x / sqrt 2)), or tanh(inner) for "tanh"."""
    if approximate == "tanh":
        t = _xp(x).tanh(_GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x * x * x))
        return 0.5 * x * (1 + t), t
    cdf = _erf(x * x.dtype.type(_SQRT1_2))
    cdf += 1
    cdf *= 0.5
    return x * cdf, cdf


def _gelu_backward(g, x, approximate, ctx, xp):
    if xp is TENSORS:  # recompute from x, so that the second derivative is taken too
        return g * _gelu_grad(x, approximate, xp)
    t = ctx.get()
    if approximate == "tanh":
        x_sq = x * x
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_TANH_BETA * (
            1 + 3 * _GELU_TANH_KAPPA * x_sq))
    pdf = xp.exp(x * x * x.dtype.type(-0.5))
    pdf *= x
    pdf *= x.dtype.type(_GELU_PDF)
    pdf += t
    pdf *= g
    return pdf


def _gelu_grad(x, approximate, xp):
    if approximate == "tanh":
        x_sq = x * x
        t = xp.tanh(_GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x_sq * x))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_TANH_BETA * (
            1 + 3 * _GELU_TANH_KAPPA * x_sq)
    cdf = 0.5 * (1 + xp.erf(x * _SQRT1_2))
    return cdf + x * xp.exp(-0.5 * x * x) * _GELU_PDF


def _silu_grad(x, xp):
    sig = 1 / (1 + xp.exp(-x))
    return sig * (1 + x * (1 - sig))


def _mish_grad(x, xp):
    sig = 1 / (1 + xp.exp(-x))
    t = xp.tanh(xp.log1p(xp.exp(x)))
    return t + x * sig * (1 - t * t)


def _elu(x, alpha, scale, input_scale, xp):
    neg = xp.minimum(x, 0) * input_scale  # exp only of the values on the negative branch
    return xp.where(x > 0, x * scale, (xp.exp(neg) - 1) * (alpha * scale))


def _elu_grad(x, alpha, scale, input_scale, xp):
    # (x < 0, not x <= 0: the same value at 0, and under create_graph a second derivative of 0
    # there, as torch's elu_double_backward masks with self < 0)
    neg = xp.where(x < 0, x, 0) * input_scale
    return xp.where(x <= 0, input_scale * (alpha * scale) * xp.exp(neg), scale)


def _softplus(x, beta, threshold, xp):
    bx = x * beta
    soft = _xp(bx).log1p(_xp(bx).exp(_xp(bx).minimum(bx, threshold))) / beta
    return xp.where(bx > threshold, x, soft)


def _softplus_grad(x, beta, threshold, xp):
    bx = x * beta
    z = xp.exp(xp.where(bx > threshold, 0, bx))
    return xp.where(bx > threshold, 1, z / (z + 1))


def _log_sigmoid(x, xp):
    return xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))


def _log_sigmoid_grad(x, xp):
    """torch's log_sigmoid_backward: 1 - s for x < 0, s otherwise, s = exp(-|x|) / (1 + that)
    (both branches in x's dtype: an int `where` beside them made float32 float64)."""
    neg = x < 0
    z = xp.exp(xp.where(neg, x, -x))  # exp(-|x|)
    s = z / (1 + z)
    return xp.where(neg, 1 - s, s)


def _halves(x, dim):
    n = x.shape[dim] // 2
    index = [slice(None)] * len(x.shape)
    index[dim] = slice(0, n)
    first = tuple(index)
    index[dim] = slice(n, None)
    return x[first], x[tuple(index)]


def _glu(x, dim, xp):
    a, b = _halves(x, dim)
    return a / (1 + xp.exp(-b))


def _glu_grad(g, x, dim, xp):
    a, b = _halves(x, dim)
    sig = 1 / (1 + xp.exp(-b))
    parts = [g * sig, g * a * sig * (1 - sig)]
    return xp.concatenate(parts, dim)



# ---- in-place variants torch names differently (leaky_relu_ -> LeakyReluBackward1) ------------
for _name, _node in (("leaky_relu", "LeakyReluBackward1"), ("elu", "EluBackward1"),
                     ("celu", "CeluBackward1"), ("threshold", "ThresholdBackward1")):
    _row = ROWS[_name]
    op(_name + "_", _row.fwd, node=_node, float_op=_row.float_op, double=_row.double_spec,
       self=_row.formulas[0])
