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
from ..tensor import Tensor
from .formulas import TENSORS, array_formulas
from .reductions import _refuse
from .registry import ROWS, _self_adjoint, op

# ---- pointwise activations (torch's CPU kernels: the same branch at each kink) ----------------
# ctx: the forward's cdf (or tanh term), which the backward reuses (recomputed on Tensors)
op("gelu", lambda self, approximate: _gelu_forward(self, approximate), float_op=True, ctx=True,
   self=lambda g, self, approximate, ctx, xp: _gelu_backward(g, self, approximate, ctx, xp))
# PyTorch's gelu_backward as an op of its own (GeluBackwardBackward0 of grad_output and self),
# with derivatives.yaml's formulas: itself again in grad_output, gelu_double_backward in self
op("gelu_backward", lambda grad_output, self, approximate: grad_output * _gelu_grad(
    self, approximate, array_formulas(self)), node="GeluBackwardBackward0",
   grad_output=lambda g, self, approximate, xp: xp.row("gelu_backward", (g, self),
                                                       (approximate,)),
   self=lambda g, grad_output, self, approximate, xp: _gelu_double(g, grad_output, self,
                                                                   approximate, xp))
op("silu", lambda self: self / (1 + _xp(self).exp(-self)), float_op=True,
   self=lambda g, self, xp: _silu_tensors(g, self) if xp is TENSORS
   else g * _silu_grad(self, xp))
op("mish", lambda self: self * _xp(self).tanh(_xp(self).log1p(_xp(self).exp(self))), float_op=True,
   self=lambda g, self, xp: _mish_tensors(g, self) if xp is TENSORS
   else g * _mish_grad(self, xp))
op("elu", lambda self, alpha, scale, input_scale: _elu(self, alpha, scale, input_scale, _xp(self)),
   float_op=True,
   self=lambda g, self, alpha, scale, input_scale, xp: _elu_backward(g, self, alpha, scale,
                                                                     input_scale, xp))
op("celu", lambda self, alpha: _elu(self, alpha, 1.0, 1.0 / alpha, _xp(self)), float_op=True,
   self=lambda g, self, alpha, xp: _elu_backward(g, self, alpha, 1.0, _celu_scale(alpha), xp))
# PyTorch's elu_backward(grad_output, self_or_result, alpha, scale, input_scale, is_result) as
# an op of its own (EluBackwardBackward0; is_result for the in-place elu_/celu_, which save
# their result): itself again in grad_output, elu_double_backward in self_or_result
op("elu_backward", lambda grad_output, self_or_result, alpha, scale, input_scale, is_result:
   _elu_backward_op(grad_output, self_or_result, alpha, scale, input_scale, is_result),
   node="EluBackwardBackward0",
   grad_output=lambda g, self_or_result, alpha, scale, input_scale, is_result, xp: xp.row(
       "elu_backward", (g, self_or_result), (alpha, scale, input_scale, is_result)),
   self_or_result=lambda g, grad_output, self_or_result, alpha, scale, input_scale, is_result,
   xp: _elu_double(g, grad_output, self_or_result, alpha, scale, input_scale, is_result, xp))
op("leaky_relu", lambda self, negative_slope: _xp(self).where(self > 0, self,
                                                              self * negative_slope),
   double=_self_adjoint("LeakyReluBackwardBackward0"),
   self=lambda g, self, negative_slope, xp: xp.where(self > 0, g, g * negative_slope))
op("softplus", lambda self, beta, threshold: _softplus(self, beta, threshold, _xp(self)),
   float_op=True,
   self=lambda g, self, beta, threshold, xp: xp.row("softplus_backward", (g, self),
                                                    (beta, threshold)) if xp is TENSORS
   else g * _softplus_grad(self, beta, threshold, xp))
# PyTorch's softplus_backward as an op of its own (SoftplusBackwardBackward0 of grad_output and
# self): itself again in grad_output; in self softplus_double_backward(gg * grad_output, self):
# sigmoid_backward(g, (self * beta).sigmoid()) * (self * beta < threshold) * beta
op("softplus_backward", lambda grad_output, self, beta, threshold: grad_output * _softplus_grad(
    self, beta, threshold, _xp(self)), node="SoftplusBackwardBackward0",
   grad_output=lambda g, self, beta, threshold, xp: xp.row("softplus_backward", (g, self),
                                                           (beta, threshold)),
   self=lambda g, grad_output, self, beta, threshold, xp: _softplus_double(
       g * grad_output, self, beta, threshold, xp))
op("hardtanh", lambda self, min_val, max_val: _xp(self).clip(self, min_val, max_val),
   double=_self_adjoint("HardtanhBackwardBackward0"),
   self=lambda g, self, min_val, max_val, xp: xp.where((self <= min_val) | (self >= max_val),
                                                       0, g))
op("hardswish", lambda self: self * _xp(self).clip(self + 3, 0, 6) / 6,
   self=lambda g, self, xp: xp.row("hardswish_backward", (g, self)) if xp is TENSORS
   else _hardswish_backward(g, self, xp))
# PyTorch's hardswish_backward as an op of its own (HardswishBackwardBackward0 of grad_output
# and self): itself again in grad_output; in self
# where(-3 < self < 3, gg * grad_output / 3, 0)
op("hardswish_backward", lambda grad_output, self: _hardswish_backward(grad_output, self,
                                                                       _xp(self)),
   node="HardswishBackwardBackward0",
   grad_output=lambda g, self, xp: xp.row("hardswish_backward", (g, self)),
   self=lambda g, grad_output, self, xp: xp.where(
       (self > -3.0) & (self < 3.0), xp.div_scalar(g * grad_output, 3.0),
       _zero(g)))
op("hardsigmoid", lambda self: _xp(self).clip(self + 3, 0, 6) / 6,
   self=lambda g, self, xp: _apply(ROWS["hardsigmoid_backward"], (g, self)) if xp is TENSORS
   else xp.where((self > -3) & (self < 3), g * _ONE_SIXTH_F32, 0))
# torch has no derivative of hardsigmoid_backward: under create_graph the gradient hangs on a
# NotImplemented node, which refuses the second backward with torch's text
op("hardsigmoid_backward", lambda grad_output, self: _xp(self).where(
    (self > -3) & (self < 3), grad_output * _ONE_SIXTH_F32, 0), node="NotImplemented",
   **{"grad_output, self": lambda g: _refuse("hardsigmoid_backward", RuntimeError)(g)})
op("log_sigmoid", lambda self: _log_sigmoid(self, _xp(self)),
   float_op=True, node="LogSigmoidBackward0",
   self=lambda g, self, xp: xp.row("log_sigmoid_backward", (g, self)) if xp is TENSORS
   else g * _log_sigmoid_grad(self, xp))
# PyTorch's log_sigmoid_backward as an op of its own (LogSigmoidBackwardBackward0 of
# grad_output and self; its `buffer` is no input of the graph): itself again in grad_output,
# log_sigmoid_double_backward(gg * grad_output, self) = g * (z - 1) * z, z = self.sigmoid()
op("log_sigmoid_backward", lambda grad_output, self: grad_output * _log_sigmoid_grad(
    self, _xp(self)), node="LogSigmoidBackwardBackward0",
   grad_output=lambda g, self, xp: xp.row("log_sigmoid_backward", (g, self)),
   self=lambda g, grad_output, self, xp: _log_sigmoid_double(g * grad_output, self, xp))
# threshold and softshrink keep a NaN (torch's kernels: `x <= threshold ? value : x`, and
# softshrink's `x * 0` in its dead zone)
op("threshold", lambda self, threshold, value: _xp(self).where(self <= threshold, value, self),
   double=_self_adjoint("ThresholdBackwardBackward0"),
   self=lambda g, self, threshold, xp: xp.where(self <= threshold, 0, g))
op("hardshrink", lambda self, lambd: _xp(self).where((self >= -lambd) & (self <= lambd), 0, self),
   double=_self_adjoint("HardshrinkBackwardBackward0"),
   self=lambda g, self, lambd, xp: xp.where((self >= -lambd) & (self <= lambd), 0, g))
op("softshrink", lambda self, lambd: _xp(self).where(
    self > lambd, self - lambd, _xp(self).where(self < -lambd, self + lambd, self * 0)),
   double=_self_adjoint("SoftshrinkBackwardBackward0"),
   self=lambda g, self, lambd, xp: xp.where((self >= -lambd) & (self <= lambd), 0, g))
# softmax's and log_softmax's gradients, PyTorch's _softmax_backward_data /
# _log_softmax_backward_data(grad_output, output, dim) as ops of their own
# (SoftmaxBackwardDataBackward0 / LogSoftmaxBackwardDataBackward0 of grad_output and output),
# with derivatives.yaml's formulas (softmax_double_backward; log_softmax's written out)
op("_softmax_backward_data", lambda grad_output, output, dim: output * (
    grad_output - (grad_output * output).sum(axis=dim, keepdims=True)),
   node="SoftmaxBackwardDataBackward0",
   grad_output=lambda g, output, dim, xp: xp.row("_softmax_backward_data", (g, output),
                                                 (dim,)),
   output=lambda g, grad_output, output, dim, xp: _softmax_double(g, grad_output, dim, output))
op("_log_softmax_backward_data", lambda grad_output, output, dim: grad_output - _xp(output).exp(
    output) * grad_output.sum(axis=dim, keepdims=True),
   node="LogSoftmaxBackwardDataBackward0",
   grad_output=lambda g, output, dim, xp: g - _sum_keep(g * xp.exp(output), dim),
   output=lambda g, grad_output, output, dim, xp: -_sum_keep(grad_output, dim) * xp.exp(
       output) * g)
# its gradient is PyTorch's glu_backward (GluBackwardBackward0 under create_graph), with
# glu_double_backward_grad_output and glu_double_backward as its derivatives
op("glu", lambda self, dim: _glu(self, dim, _xp(self)), float_op=True,
   double=dict(node="GluBackwardBackward0",
               g=lambda gg, self, dim, xp: _glu_double_grad_output(gg, self, dim, xp),
               self=lambda gg, g, self, dim, xp: _glu_double(gg, g, self, dim, xp)),
   self=lambda g, self, dim, xp: _glu_grad(g, self, dim, xp))
# its gradient is PyTorch's _prelu_kernel_backward, one op for both inputs (under create_graph
# PreluKernelBackwardBackward0, its two outputs the two gradients), with derivatives.yaml's
# formulas for the gradients that reach it (either may be missing)
op("_prelu_kernel", lambda self, weight: _xp(self).where(self > 0, self, weight * self),
   broadcast=True, node="PreluKernelBackward0",
   **{"self, weight": lambda g, self, weight, needs, xp: _prelu_grads(g, self, weight, needs,
                                                                      xp)})
op("_prelu_kernel_backward", lambda grad_output, self, weight: _prelu_backward(
    grad_output, self, weight, _xp(self)), broadcast=True, n_out=2,
   node="PreluKernelBackwardBackward0",
   **{"grad_output, self, weight": lambda g, grad_output, self, weight, needs, xp:
      _prelu_double(g, grad_output, self, weight, xp)})


# ---- helpers of the rows above ----------------------------------------------------------------
_ONE_SIXTH_F32 = float(np.float32(1.0) / np.float32(6.0))  # torch's hardsigmoid slope, float32
_SQRT1_2 = 1 / math.sqrt(2)
_GELU_PDF = 1 / math.sqrt(2 * math.pi)
_GELU_TANH_BETA = math.sqrt(2 / math.pi)
_GELU_TANH_KAPPA = 0.044715


def _prelu_grads(g, self, weight, needs, xp):
    if xp is TENSORS:  # the recorded op: one node for both
        return xp.row("_prelu_kernel_backward", (g, self, weight))
    pos = self > 0  # on arrays only what is needed (the weight's is reduced after)
    return (xp.where(pos, g, weight * g) if needs[0] else None,
            xp.where(pos, 0, self * g) if needs[1] else None)


def _prelu_backward(grad_output, self, weight, m):
    pos = self > 0
    return m.where(pos, grad_output, weight * grad_output), m.where(pos, 0, self * grad_output)


def _prelu_double(g, grad_output, self, weight, xp):
    """derivatives.yaml's _prelu_kernel_backward rows, g = (grad of grad_input, of
    grad_weight), either None."""
    g0, g1 = g
    pos = self >= 0
    if g0 is None:
        go = xp.where(pos, 0, g1 * self)
    else:
        go = xp.where(pos, g0, g0 * weight + g1 * self if g1 is not None else g0 * weight)
    gs = xp.zeros_like(self) if g1 is None else xp.where(pos, 0, grad_output * g1)
    gw = xp.zeros_like(self) if g0 is None else xp.where(pos, 0, grad_output * g0)
    return go, gs, gw


def _erf(x, scale):
    """erf(scale * x) on arrays."""
    return array_formulas(x).erf(x, scale)


def _gelu_forward(x, approximate):
    """(gelu(x), ctx): ctx is the cdf 0.5 (1 + erf(x / sqrt 2)), or tanh(inner) for "tanh"."""
    if approximate == "tanh":
        t = _xp(x).tanh(_GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x * x * x))
        return 0.5 * x * (1 + t), t
    cdf = _erf(x, _SQRT1_2)
    cdf += 1
    cdf *= 0.5
    return x * cdf, cdf


def _gelu_backward(g, x, approximate, ctx, xp):
    if xp is TENSORS:  # PyTorch's gelu_backward op, recorded as its node
        return xp.row("gelu_backward", (g, x), (approximate,))
    t = ctx.get()
    if approximate == "tanh":
        x_sq = x * x
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_TANH_BETA * (
            1 + 3 * _GELU_TANH_KAPPA * x_sq))
    pdf = x * x
    pdf *= x.dtype.type(-0.5)
    pdf = xp.exp(pdf, out=pdf) if pdf.ndim else xp.exp(pdf)  # (0-d: x * x is a numpy scalar)
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


def _gelu_double(gg, go, x, approximate, xp):
    """PyTorch's gelu_double_backward(ggI, gO, input): ``ggI * gO`` times gelu's second
    derivative, written with the same ops (pdf ``kBeta * exp(-0.5 x^2)``, ``2 pdf - x^2 pdf``;
    for "tanh", 2 f' g h + g' f h + h' f g of f = x / 2, g = sech^2, h = inner')."""
    if approximate == "tanh":
        inner = xp.mul_scalar(x + xp.mul_scalar(x ** 3, _GELU_TANH_KAPPA), _GELU_TANH_BETA)
        t = xp.tanh(inner)
        cosh = xp.cosh(inner)
        sech = _wrapped_one(cosh) / cosh if isinstance(cosh, Tensor) else 1 / cosh
        f = xp.mul_scalar(x, 0.5)
        gt = _one_minus(t * t) if isinstance(t, Tensor) else 1 - t * t
        h = xp.mul_scalar(xp.add_scalar(xp.mul_scalar(x, 3 * _GELU_TANH_KAPPA) * x, 1),
                          _GELU_TANH_BETA)
        f_prime_gh = xp.mul_scalar(gt, 0.5) * h
        # (the operands of a C++ product made right first, as torch's build evaluates them:
        # the order of the nodes decides the order of the sums in the next gradient)
        right = -sech * t
        g_prime = xp.mul_scalar(sech, 2) * right * h
        g_prime_fh = f * h * g_prime
        h_prime = xp.mul_scalar(xp.mul_scalar(x, 6 * _GELU_TANH_KAPPA), _GELU_TANH_BETA)
        h_prime_fg = f * gt * h_prime
        right = xp.mul_scalar(f_prime_gh, 2) + g_prime_fh + h_prime_fg  # (torch: 2 * f_prime_gh)
        return gg * go * right
    x_sq = x * x
    pdf = xp.mul_scalar(xp.exp(xp.mul_scalar(x_sq, -0.5)), _GELU_PDF)
    right = x_sq * pdf
    return gg * go * (xp.mul_scalar(pdf, 2) - right)


def _wrapped_one(x):
    """The number 1 as PyTorch's C++ formulas wrap it beside Tensor `x` (a 0-d tensor of its
    dtype): ``1.0 - x`` records SubBackward0, ``1 / x`` DivBackward0."""
    return Tensor._make_fresh(_xp(x._data).ones((), x._data.dtype))


def _one_minus(x):
    """``1.0 - x`` as PyTorch's C++ formulas record it: SubBackward0 of a wrapped number."""
    return _wrapped_one(x) - x


def _silu_tensors(g, x):
    """PyTorch's infinitely_differentiable_silu_backward (what it runs under create_graph):
    ``g * sigmoid * (1.0 + x * (1.0 - sigmoid))``, its right factor made first (as torch's
    build evaluates the operands of that C++ product: the node order decides which gradient
    reaches sigmoid's output first)."""
    sig = x.sigmoid()
    right = TENSORS.add_scalar(x * _one_minus(sig), 1.0)
    return g * sig * right


def _mish_tensors(g, x):
    """PyTorch's infinitely_differentiable_mish_backward:
    ``g * (tanh_sp + x * sigmoid * (1.0 - tanh_sp * tanh_sp))``, tanh_sp = x.exp().log1p().tanh()."""
    sig = x.sigmoid()
    tsp = x.exp().log1p().tanh()
    return g * (tsp + x * sig * _one_minus(tsp * tsp))


def _silu_grad(x, xp):
    sig = 1 / (1 + xp.exp(-x))
    return sig * (1 + x * (1 - sig))


def _mish_grad(x, xp):
    sig = 1 / (1 + xp.exp(-x))
    t = xp.tanh(xp.log1p(xp.exp(x)))
    return t + x * sig * (1 - t * t)


def _elu(x, alpha, scale, input_scale, xp):
    neg = xp.where(x > 0, 0, x) * input_scale  # exp only of the values on the negative branch
    # (and -0.0 kept: torch's kernel gives expm1(-0.0) * alpha = -0.0 there)
    return xp.where(x > 0, x * scale, xp.expm1(neg) * (alpha * scale))  # (torch's expm1:
    # exp(x) - 1 lost every digit below |x| ~ 1e-8 in float64, 1e-4 in float32)


def _elu_grad(x, alpha, scale, input_scale, xp):
    # (x < 0, not x <= 0: the same value at 0, and under create_graph a second derivative of 0
    # there, as torch's elu_double_backward masks with self < 0)
    neg = xp.where(x < 0, x, 0) * input_scale
    return xp.where(x <= 0, input_scale * (alpha * scale) * xp.exp(neg), scale)


def _elu_backward(g, x, alpha, scale, input_scale, xp, is_result=False):
    if xp is TENSORS:  # PyTorch's elu_backward op, recorded as its node
        return xp.row("elu_backward", (g, x), (alpha, scale, input_scale, is_result))
    return _elu_backward_op(g, x, alpha, scale, input_scale, is_result)


def _celu_scale(alpha):
    """celu's backward input_scale as torch's derivatives.yaml computes it:
    ``1.0 / alpha.toFloat()``, alpha rounded to float32 first (the forward uses double)."""
    return 1.0 / float(np.float32(alpha))


def _elu_backward_op(g, x, alpha, scale, input_scale, is_result):
    """torch's elu_backward kernel: from the input, or (is_result) from the output
    ``input_scale * (result + alpha * scale)`` on the negative branch."""
    if not is_result:
        return g * _elu_grad(x, alpha, scale, input_scale, _xp(x))
    return _xp(x).where(x <= 0, g * input_scale * (x + alpha * scale), g * scale)


def _elu_double(gg, go, x, alpha, scale, input_scale, is_result, xp):
    """PyTorch's elu_double_backward: ``gg * go * input_scale * (x < 0)`` from the result,
    else ``elu_backward(gg * go * input_scale, x) * (x < 0)``."""
    g = xp.mul_scalar(gg * go, input_scale)
    if not is_result:
        g = xp.row("elu_backward", (g, x), (alpha, scale, input_scale, False))
    return g * _mask(x < 0, gg)


def _mask(m, like):
    """A comparison's result in `like`'s dtype, as a constant (torch's ``.type_as(grad)``)."""
    m = m._data if isinstance(m, Tensor) else m
    if not isinstance(like, Tensor):
        return m.astype(like.dtype)
    return Tensor._make_fresh(m.astype(like._data.dtype))


def _softplus(x, beta, threshold, xp):
    bx = x * beta
    soft = _xp(bx).log1p(_xp(bx).exp(_xp(bx).minimum(bx, threshold))) / beta
    return xp.where(bx > threshold, x, soft)


def _softplus_grad(x, beta, threshold, xp):
    bx = x * beta
    z = xp.exp(xp.where(bx > threshold, 0, bx))
    return xp.where(bx > threshold, 1, z / (z + 1))


def _sum_keep(x, dim):
    return x.sum(dim, keepdim=True) if isinstance(x, Tensor) else x.sum(axis=dim, keepdims=True)


def _softmax_double(g, go, dim, out):
    """PyTorch's softmax_double_backward(grad, grad_output, dim, output)."""
    return go * g - _sum_keep(out * go, dim) * g - go * _sum_keep(out * g, dim)


def _hardswish_backward(g, x, xp):
    return xp.where(x <= -3, 0, xp.where(x < 3, g * (x / 3 + 0.5), g))


def _zero(like):
    """A 0-d zero of `like`'s dtype (torch's ``at::zeros({}, self.options())``)."""
    if isinstance(like, Tensor):
        return Tensor._make_fresh(_xp(like._data).zeros((), like._data.dtype))
    return _xp(like).zeros((), like.dtype)


def _sigmoid(x):
    return x.sigmoid() if isinstance(x, Tensor) else ROWS["sigmoid"].fwd(x)


def _softplus_double(g, x, beta, threshold, xp):
    bx = xp.mul_scalar(x, beta)
    s = xp.backward_op("sigmoid", g, _sigmoid(bx))
    return xp.mul_scalar(s * _mask(bx < threshold, g), beta)


def _log_sigmoid_double(g, x, xp):
    """``g * (z - 1) * z``, z = x.sigmoid() (``z - 1``: PyTorch's sub.Scalar, SubBackward1)."""
    z = _sigmoid(x)
    zm1 = _apply(ROWS["sub_scalar"], (z,), (1,)) if isinstance(z, Tensor) else z - 1
    return g * zm1 * z


def _log_sigmoid(x, xp):
    if isinstance(x, Tensor):  # recorded: torch's log_sigmoid node (smooth at 0, where min(x,
        return _apply(ROWS["log_sigmoid"], (x,))  # 0) and |x| each have a kink)
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


def _glu_double_grad_output(gg, x, dim, xp):
    """glu_double_backward_grad_output: gg * glu_backward(ones, x), its two halves added."""
    dim %= len(x.shape)
    n = x.shape[dim] // 2
    tmp = gg * xp.backward_op("glu", xp.ones_like(_narrow(x, dim, 0, n)), x, dim)
    return _narrow(tmp, dim, 0, n) + _narrow(tmp, dim, n, n)


def _glu_double(gg, go, x, dim, xp):
    """glu_double_backward: the derivative of glu_backward in self."""
    dim %= len(x.shape)
    n = x.shape[dim] // 2
    a, b = _narrow(x, dim, 0, n), _narrow(x, dim, n, n)
    sig = b.sigmoid() if isinstance(b, Tensor) else 1 / (1 + xp.exp(-b))
    one_sub = xp.ones_like(sig) - sig
    sig_one_sub = sig * one_sub
    gg_a, gg_b = _narrow(gg, dim, 0, n), _narrow(gg, dim, n, n)
    gi_a = gg_b * go * sig_one_sub
    second = sig_one_sub * one_sub - sig * sig_one_sub
    gi_b = gg_b * a * go * second + gg_a * go * sig_one_sub
    return xp.concatenate([gi_a, gi_b], dim)


def _narrow(x, dim, start, n):
    return x.narrow(dim, start, n) if isinstance(x, Tensor) else x[
        (slice(None),) * dim + (slice(start, start + n),)]



# ---- in-place variants torch names differently (leaky_relu_ -> LeakyReluBackward1) ------------
for _name, _node in (("leaky_relu", "LeakyReluBackward1"), ("threshold", "ThresholdBackward1")):
    _row = ROWS[_name]
    op(_name + "_", _row.fwd, node=_node, float_op=_row.float_op, double=_row.double_spec,
       self=_row.formulas[0])
# elu_ / celu_: PyTorch's elu_backward from the result (is_result), which they save
op("elu_", ROWS["elu"].fwd, node="EluBackward1", float_op=True,
   self=lambda g, result, alpha, scale, input_scale, xp: _elu_backward(
       g, result, alpha, scale, input_scale, xp, True))
op("celu_", ROWS["celu"].fwd, node="CeluBackward1", float_op=True,
   self=lambda g, result, alpha, xp: _elu_backward(g, result, alpha, 1.0, _celu_scale(alpha),
                                                   xp, True))
