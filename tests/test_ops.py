"""Every op of the core's table against PyTorch (the oracle), from ONE list of cases.

Each case is (name, f, input specs, options). `f(T, *xs)` is called once with `T = nbgrad` and
nbgrad tensors and once with `T = torch` and torch tensors built from the same float64 arrays
(`tf` gives a separate torch callable where the spellings differ). Generated tests check:
forward values/shapes/dtypes, the gradient of every differentiable input after backward with a
random upstream gradient, the grad_fn class names of the outputs, and a finite-difference
`nbgrad.autograd.gradcheck`. Below the list: second-order tests (create_graph, gradgradcheck).
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

import nbgrad
from nbgrad.autograd import gradcheck, gradgradcheck


# ------------------------------------------------------------------------------------------------
# Input specs
#   (3, 4)                 float64 normal, requires grad
#   ("pos", shape)         float64 in [0.5, 2], requires grad (log, sqrt, pow bases)
#   ("away", shape)        float64, |v| in [0.5, 1.5], random sign (divisors, prod)
#   ("grid", shape[, s])   distinct float64 values 0.3 apart, none within 0.15 of 0 or of
#                          +-0.3k (no ties, no kinks: abs, relu, clamp, max, norm inf); shift s
#   ("const", shape)       float64 normal, no grad
#   ("f32", shape)         float32 normal, requires grad
#   ("int", shape, high)   int64 in [0, high), no grad
#   ("bool", shape)        bool, no grad
#   ("i", value)           a Python value passed as is (both libraries)
# ------------------------------------------------------------------------------------------------


class Case:
    def __init__(self, name, f, *specs, tf=None, grad=True, check=True, atol=1e-5, xfail=None):
        self.name = name
        self.f = f
        self.tf = tf or f
        self.specs = specs
        self.grad = grad      # backward + grad comparison
        self.check = check    # finite-difference gradcheck
        self.atol = atol
        # {test kind ("forward", "grad_fn", "grad", "gradcheck") or "all": reason} for core bugs
        # reported to the core and not fixed yet
        self.xfail = xfail or {}

    def param(self, kind):
        reason = self.xfail.get(kind, self.xfail.get("all"))
        marks = () if reason is None else pytest.mark.xfail(reason=f"core bug: {reason}",
                                                             strict=True)
        return pytest.param(self, id=self.name, marks=marks)


def _array(spec, rng):
    if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
        kind = spec[0]
        shape = spec[1] if len(spec) > 1 else ()
        n = int(np.prod(shape))
        if kind == "pos":
            return rng.uniform(0.5, 2.0, shape), True
        if kind == "away":
            return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape), True
        if kind == "grid":
            shift = spec[2] if len(spec) > 2 else 0.0
            v = (rng.permutation(n) - n // 2 + 0.5) * 0.3 + shift
            return v.reshape(shape).astype(np.float64), True
        if kind == "const":
            return rng.standard_normal(shape), False
        if kind == "f32":
            return rng.standard_normal(shape).astype(np.float32), True
        if kind == "f32c":
            return rng.standard_normal(shape).astype(np.float32), False
        if kind == "int":
            return rng.integers(0, spec[2], shape).astype(np.int64), False
        if kind == "bool":
            return rng.random(shape) < 0.5, False
        if kind == "i":
            return spec[1], None
        raise ValueError(kind)
    return rng.standard_normal(spec), True


def _inputs(case):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    arrays = [_array(s, rng) for s in case.specs]
    nb, th = [], []
    for a, rg in arrays:
        if rg is None:
            nb.append(a)
            th.append(a)
            continue
        nb.append(nbgrad.tensor(a.copy(), requires_grad=rg))
        th.append(torch.tensor(a.copy(), requires_grad=rg))
    return nb, th


def _outs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _dtype_name(t):
    return str(t.dtype).split(".")[-1]


# ------------------------------------------------------------------------------------------------
# Helpers used by cases
# ------------------------------------------------------------------------------------------------
def _setitem(idx, tensor_idx=None):
    """y = x.clone(); y[idx] = v  (idx may be built from an index tensor of the right library)."""
    def f(T, x, v):
        y = x.clone()
        i = idx(T) if callable(idx) else idx
        y[i] = v
        return y
    return f


def _idx(values, dtype="long"):
    return lambda T: T.tensor(values, dtype=getattr(T, dtype))


def _mask(rows):
    return lambda T: T.tensor(rows, dtype=T.bool)


# core bugs reported and still open: set Case(xfail={kind: reason}) while open

M23 = [[True, False, True, False], [False, False, True, True], [True, True, False, False]]

CASES = [
    # ---- + - * / with broadcasting and Python scalars on either side ----
    Case("add", lambda T, a, b: a + b, (3, 4), (3, 4)),
    Case("add_bcast", lambda T, a, b: a + b, (3, 1), (4,)),
    Case("add_bcast3d", lambda T, a, b: T.add(a, b), (2, 3, 4), (3, 1)),
    Case("add_alpha", lambda T, a, b: T.add(a, b, alpha=2.5), (3, 4), (4,)),
    Case("add_scalar_right", lambda T, a: a + 2.0, (3, 4)),
    Case("add_scalar_left", lambda T, a: 2.0 + a, (3, 4)),
    Case("add_int_scalar", lambda T, a: a + 3, (3, 4)),
    Case("add_const", lambda T, a, b: a + b, (3, 4), ("const", (3, 4))),
    Case("sub", lambda T, a, b: a - b, (3, 4), (3, 4)),
    Case("sub_bcast", lambda T, a, b: a - b, (4,), (3, 1)),
    Case("sub_alpha", lambda T, a, b: T.sub(a, b, alpha=0.5), (3, 4), (3, 4)),
    Case("sub_scalar_right", lambda T, a: a - 2.0, (3, 4)),
    Case("rsub_scalar_left", lambda T, a: 2.0 - a, (3, 4)),
    Case("mul", lambda T, a, b: a * b, (3, 4), (3, 4)),
    Case("mul_bcast", lambda T, a, b: a * b, (2, 1, 4), (3, 1)),
    Case("mul_scalar_right", lambda T, a: a * 3.0, (3, 4)),
    Case("mul_scalar_left", lambda T, a: 3 * a, (3, 4)),
    Case("mul_0d", lambda T, a, b: a * b, (), (3, 4)),
    Case("mul_same", lambda T, a: a * a, (3, 4)),
    Case("div", lambda T, a, b: a / b, (3, 4), ("away", (3, 4))),
    Case("div_bcast", lambda T, a, b: a / b, (3, 4), ("away", (3, 1))),
    Case("div_scalar_right", lambda T, a: a / 4.0, (3, 4)),
    Case("div_scalar_left", lambda T, a: 2.0 / a, ("away", (3, 4))),
    Case("div_fn", lambda T, a, b: T.div(a, b), (4,), ("away", (3, 4))),
    # ---- pow: tensor**scalar, tensor**tensor, scalar**tensor ----
    Case("pow_2", lambda T, a: a ** 2, (3, 4)),
    Case("pow_3", lambda T, a: a ** 3, (3, 4)),
    Case("pow_half", lambda T, a: a ** 0.5, ("pos", (3, 4))),
    Case("pow_neg1", lambda T, a: a ** -1, ("away", (3, 4))),
    Case("pow_0", lambda T, a: a ** 0, (3, 4)),
    Case("pow_fn", lambda T, a: T.pow(a, 2.5), ("pos", (3, 4))),
    Case("pow_tt", lambda T, a, b: a ** b, ("pos", (3, 4)), (3, 4)),
    Case("pow_tt_bcast", lambda T, a, b: a ** b, ("pos", (3, 1)), (4,)),
    Case("pow_tt_const_exponent", lambda T, a, b: a.pow(b), ("pos", (3, 4)), ("const", (4,))),
    Case("rpow_float", lambda T, a: 2.0 ** a, (3, 4)),
    Case("rpow_int", lambda T, a: 3 ** a, (3, 4)),
    # ---- elementwise unary ----
    Case("neg", lambda T, a: -a, (3, 4)),
    Case("neg_method", lambda T, a: a.neg(), (3, 4)),
    Case("exp", lambda T, a: a.exp(), (3, 4)),
    Case("exp_fn", lambda T, a: T.exp(a), (3, 4)),
    Case("log", lambda T, a: a.log(), ("pos", (3, 4))),
    Case("log1p", lambda T, a: T.log1p(a), ("pos", (3, 4))),
    Case("sqrt", lambda T, a: a.sqrt(), ("pos", (3, 4))),
    Case("rsqrt", lambda T, a: a.rsqrt(), ("pos", (3, 4))),
    Case("reciprocal", lambda T, a: a.reciprocal(), ("away", (3, 4))),
    Case("abs", lambda T, a: a.abs(), ("grid", (3, 4))),
    Case("abs_fn", lambda T, a: T.abs(a), ("grid", (3, 4))),
    Case("sign", lambda T, a: a.sign(), ("grid", (3, 4))),
    Case("sin", lambda T, a: a.sin(), (3, 4)),
    Case("cos", lambda T, a: T.cos(a), (3, 4)),
    Case("tanh", lambda T, a: a.tanh(), (3, 4)),
    Case("sigmoid", lambda T, a: a.sigmoid(), (3, 4)),
    Case("sigmoid_fn", lambda T, a: T.sigmoid(a), (3, 4)),
    Case("relu", lambda T, a: a.relu(), ("grid", (3, 4))),
    Case("relu_fn", lambda T, a: T.relu(a), ("grid", (3, 4))),
    Case("erf", lambda T, a: T.erf(a), (3, 4)),
    Case("clamp_both", lambda T, a: a.clamp(-0.3, 0.6), ("grid", (3, 4))),
    Case("clamp_min", lambda T, a: a.clamp(min=-0.3), ("grid", (3, 4))),
    Case("clamp_max", lambda T, a: T.clamp(a, max=0.3), ("grid", (3, 4))),
    Case("clamp_min_fn", lambda T, a: T.clamp_min(a, -0.3), ("grid", (3, 4))),
    Case("maximum", lambda T, a, b: T.maximum(a, b), ("grid", (3, 4)), ("grid", (3, 4), 0.1)),
    Case("maximum_bcast", lambda T, a, b: T.maximum(a, b), ("grid", (3, 4)),
         ("grid", (4,), 0.1)),
    Case("minimum", lambda T, a, b: T.minimum(a, b), ("grid", (3, 4)), ("grid", (3, 4), 0.1)),
    Case("where", lambda T, c, a, b: T.where(c, a, b), ("bool", (3, 4)), (3, 4), (3, 4)),
    Case("where_bcast", lambda T, c, a, b: T.where(c, a, b), ("bool", (3, 4)), (4,), (3, 1)),
    Case("where_method", lambda T, c, a: a.where(c, 0.0), ("bool", (3, 4)), (3, 4)),
    Case("masked_fill", lambda T, m, a: a.masked_fill(m, 0.5), ("bool", (3, 4)), (3, 4)),
    Case("masked_fill_tensor_value", lambda T, m, a, v: a.masked_fill(m, v), ("bool", (3, 4)),
         (3, 4), ()),
    Case("masked_fill_bcast", lambda T, m, a: T.masked_fill(a, m, -1.0), ("bool", (4,)),
         (3, 4)),
    # ---- reductions ----
    Case("sum", lambda T, a: a.sum(), (3, 4)),
    Case("sum_dim", lambda T, a: a.sum(1), (3, 4)),
    Case("sum_dim_neg", lambda T, a: a.sum(-1), (2, 3, 4)),
    Case("sum_dims", lambda T, a: a.sum((0, 2)), (2, 3, 4)),
    Case("sum_keepdim", lambda T, a: T.sum(a, 1, keepdim=True), (3, 4)),
    Case("mean", lambda T, a: a.mean(), (3, 4)),
    Case("mean_dim", lambda T, a: a.mean(0), (3, 4)),
    Case("mean_keepdim", lambda T, a: T.mean(a, (0, 1), keepdim=True), (2, 3, 4)),
    # the gradients of mean and var built under create_graph: PyTorch's div.Scalar and
    # mul.Scalar nodes (DivBackward1, MulBackward1), rows of their own
    Case("mean_grad_graph", lambda T, a: T.autograd.grad(a.mean(), a, a.sum(),
                                                         create_graph=True)[0], (3, 4),
         check=False),
    Case("log1p_grad_graph", lambda T, a: T.autograd.grad(a.log1p().sum(), a,
                                                          create_graph=True)[0], ("pos", (3, 4)),
         check=False),  # add.Scalar: AddBackward1
    Case("index_grad_graph", lambda T, a: T.autograd.grad(
        a[T.tensor([0, 2, 0])], a, a[T.tensor([1, 1, 2])] * 2, create_graph=True)[0], (3, 4),
        check=False),  # index's backward: _index_put_impl_ (IndexPutImplBackward0)
    Case("var_grad_graph", lambda T, a: T.autograd.grad(a.var(1), a, a.sum(1),
                                                        create_graph=True)[0], (3, 4),
         check=False),
    # backwards torch cannot differentiate: recorded as its NotImplemented node (issue 21)
    Case("multi_margin_grad_graph", lambda T, a: T.autograd.grad(
        T.nn.functional.multi_margin_loss(a, T.tensor([0, 2, 1])), a, create_graph=True)[0],
        (3, 4), grad=False, check=False),
    Case("sdpa_flash_grad_graph", lambda T, a: T.autograd.grad(
        T.nn.functional.scaled_dot_product_attention(a, a, a).sum(), a, create_graph=True)[0],
        (1, 2, 3, 4), grad=False, check=False),
    Case("hardsigmoid_grad_graph", lambda T, a: T.autograd.grad(
        T.nn.functional.hardsigmoid(a).sum(), a, create_graph=True)[0],
        (3, 4), grad=False, check=False),
    Case("prod", lambda T, a: a.prod(), ("away", (2, 3))),
    Case("prod_dim", lambda T, a: a.prod(1), ("away", (3, 4))),
    Case("prod_keepdim", lambda T, a: T.prod(a, 0, keepdim=True), ("away", (3, 4))),
    Case("max", lambda T, a: a.max(), ("grid", (3, 4))),
    Case("min", lambda T, a: T.min(a), ("grid", (3, 4))),
    Case("max_dim", lambda T, a: a.max(1), ("grid", (3, 4))),
    Case("max_dim_keepdim", lambda T, a: T.max(a, 0, keepdim=True), ("grid", (3, 4))),
    Case("min_dim", lambda T, a: a.min(dim=0), ("grid", (3, 4))),
    Case("min_dim_neg", lambda T, a: T.min(a, -1, True), ("grid", (2, 3, 4))),
    Case("amax", lambda T, a: a.amax(1), ("grid", (3, 4))),
    Case("amax_dims", lambda T, a: T.amax(a, (0, 1)), ("grid", (3, 4))),
    Case("amin_keepdim", lambda T, a: a.amin(0, keepdim=True), ("grid", (3, 4))),
    Case("var", lambda T, a: a.var(), (3, 4)),
    Case("var_dim", lambda T, a: a.var(1), (3, 4)),
    Case("var_unbiased_false", lambda T, a: T.var(a, 0, unbiased=False), (3, 4)),
    Case("var_correction_keepdim", lambda T, a: a.var(1, correction=0, keepdim=True), (3, 4)),
    Case("std", lambda T, a: a.std(), (3, 4)),
    Case("std_dim", lambda T, a: T.std(a, dim=0, keepdim=True), (3, 4)),
    Case("norm_2", lambda T, a: a.norm(), (3, 4)),
    Case("norm_p2", lambda T, a: T.norm(a, 2), (3, 4)),
    Case("norm_p1", lambda T, a: a.norm(1), ("grid", (3, 4))),
    Case("norm_inf", lambda T, a: a.norm(float("inf")), ("grid", (3, 4))),
    Case("norm_p3", lambda T, a: a.norm(3), (3, 4)),
    Case("norm_dim", lambda T, a: a.norm(dim=1), (3, 4)),
    Case("norm_p1_dim_keepdim", lambda T, a: T.norm(a, 1, dim=0, keepdim=True),
         ("grid", (3, 4))),
    Case("logsumexp", lambda T, a: a.logsumexp(1), (3, 4)),
    Case("logsumexp_keepdim", lambda T, a: T.logsumexp(a, 0, keepdim=True), (3, 4)),
    Case("softmax", lambda T, a: a.softmax(1), (3, 4)),
    Case("softmax_dim0", lambda T, a: T.softmax(a, 0), (3, 4)),
    Case("log_softmax", lambda T, a: a.log_softmax(-1), (3, 4)),
    Case("log_softmax_fn", lambda T, a: T.log_softmax(a, dim=0), (2, 3, 4)),
    Case("cumsum", lambda T, a: a.cumsum(0), (3, 4)),
    Case("cumsum_dim1", lambda T, a: T.cumsum(a, dim=1), (3, 4)),
    # ---- matmul family ----
    Case("matmul_1d_1d", lambda T, a, b: a @ b, (4,), (4,)),
    Case("matmul_2d_2d", lambda T, a, b: a @ b, (3, 4), (4, 2)),
    Case("matmul_2d_1d", lambda T, a, b: T.matmul(a, b), (3, 4), (4,)),
    Case("matmul_1d_2d", lambda T, a, b: a.matmul(b), (4,), (4, 2)),
    Case("matmul_3d", lambda T, a, b: a @ b, (2, 3, 4), (2, 4, 2)),
    Case("matmul_bcast_batch", lambda T, a, b: a @ b, (2, 1, 3, 4), (3, 4, 2)),
    Case("matmul_3d_2d", lambda T, a, b: a @ b, (2, 3, 4), (4, 2)),
    Case("matmul_3d_1d", lambda T, a, b: a @ b, (2, 3, 4), (4,)),
    Case("matmul_1d_3d", lambda T, a, b: a @ b, (4,), (2, 4, 3)),
    Case("mm", lambda T, a, b: T.mm(a, b), (3, 4), (4, 2)),
    Case("mm_method", lambda T, a, b: a.mm(b), (2, 3), (3, 3)),
    Case("bmm", lambda T, a, b: T.bmm(a, b), (2, 3, 4), (2, 4, 2)),
    Case("dot", lambda T, a, b: T.dot(a, b), (5,), (5,)),
    Case("mv", lambda T, a, b: T.mv(a, b), (3, 4), (4,)),
    Case("addmm", lambda T, c, a, b: T.addmm(c, a, b), (3, 2), (3, 4), (4, 2)),
    Case("addmm_bias_bcast", lambda T, c, a, b: T.addmm(c, a, b), (2,), (3, 4), (4, 2)),
    Case("addmm_beta_alpha", lambda T, c, a, b: T.addmm(c, a, b, beta=0.5, alpha=2.0),
         (3, 2), (3, 4), (4, 2)),
    # ---- joining ----
    Case("cat0", lambda T, a, b: T.cat([a, b]), (2, 3), (1, 3)),
    Case("cat1", lambda T, a, b, c: T.cat((a, b, c), dim=1), (2, 3), (2, 1), (2, 2)),
    Case("cat_neg_const", lambda T, a, b: T.cat([a, b], -1), (2, 3), ("const", (2, 2))),
    Case("stack0", lambda T, a, b: T.stack([a, b]), (2, 3), (2, 3)),
    Case("stack1", lambda T, a, b, c: T.stack((a, b, c), dim=1), (2, 3), (2, 3), (2, 3)),
    Case("stack_neg", lambda T, a, b: T.stack([a, b], -1), (2, 3), (2, 3)),
    # ---- views and shape ops ----
    Case("view", lambda T, a: a.view(12), (3, 4)),
    Case("view_infer", lambda T, a: a.view(2, -1), (3, 4)),
    Case("view_tuple", lambda T, a: a.view((4, 3)), (3, 4)),
    Case("reshape_view", lambda T, a: a.reshape(2, 6), (3, 4)),
    Case("reshape_copy", lambda T, a: a.t().reshape(-1), (3, 4)),
    Case("reshape_fn", lambda T, a: T.reshape(a, (6, 2)), (3, 4)),
    Case("flatten", lambda T, a: a.flatten(), (2, 3, 4)),
    Case("flatten_start", lambda T, a: T.flatten(a, 1), (2, 3, 4)),
    Case("flatten_range", lambda T, a: a.flatten(0, 1), (2, 3, 4)),
    Case("unflatten", lambda T, a: a.unflatten(1, (2, 2)), (3, 4)),
    Case("transpose", lambda T, a: a.transpose(0, 1), (3, 4)),
    Case("transpose_3d", lambda T, a: T.transpose(a, -1, 0), (2, 3, 4)),
    Case("t", lambda T, a: a.t(), (3, 4)),
    Case("t_fn", lambda T, a: T.t(a), (3, 4)),
    Case("T_attr", lambda T, a: a.T, (3, 4)),
    Case("permute", lambda T, a: a.permute(2, 0, 1), (2, 3, 4)),
    Case("permute_tuple", lambda T, a: T.permute(a, (1, 2, 0)), (2, 3, 4)),
    Case("expand", lambda T, a: a.expand(3, 4), (3, 1)),
    Case("expand_new_dims", lambda T, a: a.expand(2, 3, 4), (4,)),
    Case("expand_minus1", lambda T, a: a.expand(-1, 5), (3, 1)),
    Case("expand_as", lambda T, a, b: a.expand_as(b), (1, 4), ("const", (3, 4))),
    Case("squeeze", lambda T, a: a.squeeze(), (3, 1, 4)),
    Case("squeeze_dim", lambda T, a: a.squeeze(1), (3, 1, 4)),
    Case("squeeze_dim_noop", lambda T, a: a.squeeze(0), (3, 1, 4)),
    Case("unsqueeze", lambda T, a: a.unsqueeze(0), (3, 4)),
    Case("unsqueeze_neg", lambda T, a: T.unsqueeze(a, -1), (3, 4)),
    Case("narrow", lambda T, a: a.narrow(1, 1, 2), (3, 4)),
    Case("narrow_fn", lambda T, a: T.narrow(a, 0, 0, 2), (3, 4)),
    Case("select", lambda T, a: a.select(0, 1), (3, 4)),
    Case("select_neg", lambda T, a: T.select(a, 1, -1), (3, 4)),
    Case("diagonal", lambda T, a: a.diagonal(), (3, 4)),
    Case("diagonal_offset", lambda T, a: T.diagonal(a, 1), (3, 4)),
    Case("diagonal_neg_offset", lambda T, a: a.diagonal(-1), (3, 4)),
    Case("diagonal_3d", lambda T, a: a.diagonal(0, 1, 2), (2, 3, 3)),
    Case("as_strided", lambda T, a: a.as_strided((2, 2), (1, 3), 1), (3, 4)),
    Case("as_strided_fn", lambda T, a: T.as_strided(a, (3, 2), (4, 2)), (3, 4)),
    Case("as_strided_overlap", lambda T, a: a.as_strided((4, 3), (1, 1), 0), (6,)),
    Case("unbind", lambda T, a: a.unbind(), (3, 4)),
    Case("unbind_dim1", lambda T, a: T.unbind(a, 1), (3, 4)),
    Case("split", lambda T, a: a.split(2), (5, 3)),
    Case("split_sizes", lambda T, a: T.split(a, [1, 3], 1), (2, 4)),
    Case("chunk", lambda T, a: a.chunk(2), (4, 3)),
    Case("chunk_uneven", lambda T, a: T.chunk(a, 3, 1), (2, 5)),
    Case("unsafe_split", lambda T, a: T.unsafe_split(a, 2, 1), (3, 5)),
    Case("unsafe_chunk", lambda T, a: a.unsafe_chunk(4, 1), (2, 8)),
    Case("unfold", lambda T, a: a.unfold(1, 2, 1), (3, 4)),
    Case("unfold_step", lambda T, a: a.unfold(0, 2, 2), (5, 3)),
    Case("contiguous", lambda T, a: a.t().contiguous(), (3, 4)),
    Case("contiguous_noop", lambda T, a: (a * 1).contiguous(), (3, 4)),
    Case("clone", lambda T, a: a.clone(), (3, 4)),
    Case("clone_fn", lambda T, a: T.clone(a.t()), (3, 4)),
    # ---- indexing ----
    Case("index_int", lambda T, a: a[1], (3, 4)),
    Case("index_neg_int", lambda T, a: a[-1, 2], (3, 4)),
    Case("index_slice", lambda T, a: a[1:3], (4, 3)),
    Case("index_slice_step", lambda T, a: a[::2], (5, 3)),
    Case("index_slice_step2", lambda T, a: a[:, 1::2], (3, 5)),
    Case("index_slice_neg", lambda T, a: a[-2:, :-1], (4, 3)),
    Case("index_none", lambda T, a: a[None], (3, 4)),
    Case("index_none_mid", lambda T, a: a[:, None, 1:], (3, 4)),
    Case("index_ellipsis", lambda T, a: a[..., 1], (2, 3, 4)),
    Case("index_ellipsis_none", lambda T, a: a[None, ..., 0], (2, 3, 4)),
    Case("index_int_slice", lambda T, a: a[1, 1:3], (2, 3, 4)),
    Case("index_tensor", lambda T, a: a[T.tensor([2, 0])], (3, 4)),
    Case("index_tensor_dup", lambda T, a: a[T.tensor([1, 1, 0, 1])], (3, 4)),
    Case("index_tensor_dim1", lambda T, a: a[:, T.tensor([3, 0, 3])], (3, 4)),
    Case("index_tensor_2d", lambda T, a: a[T.tensor([[0, 2], [1, 1]])], (3, 4)),
    Case("index_tensor_pair", lambda T, a: a[T.tensor([0, 2, 2]), T.tensor([1, 3, 3])], (3, 4)),
    Case("index_list", lambda T, a: a[[0, 2]], (3, 4)),
    Case("index_bool_mask", lambda T, a: a[T.tensor(M23)], (3, 4)),
    Case("index_bool_rows", lambda T, a: a[T.tensor([True, False, True])], (3, 4)),
    Case("index_bool_from_cmp", lambda T, a: a[a > 0], (3, 4)),
    # ---- assignment into each kind of index ----
    Case("setitem_int", _setitem(1), (3, 4), (4,)),
    Case("setitem_int_scalar", lambda T, x: _setitem((0, 2))(T, x, 5.0), (3, 4)),
    Case("setitem_slice_step", _setitem((slice(None), slice(None, None, 2))), (3, 4), (3, 2)),
    Case("setitem_slice_bcast", _setitem(slice(1, 3)), (3, 4), (4,)),
    Case("setitem_none", _setitem(None), (3, 4), (3, 4)),
    Case("setitem_ellipsis", _setitem((Ellipsis, 0)), (2, 3, 4), (2, 3)),
    Case("setitem_tensor", _setitem(_idx([2, 0])), (3, 4), (2, 4)),
    Case("setitem_tensor_dim1", _setitem(lambda T: (slice(None), T.tensor([1, 3]))),
         (3, 4), (3, 2)),
    Case("setitem_bool_mask", _setitem(_mask(M23)), (3, 4), (6,)),
    Case("setitem_bool_scalar", lambda T, x: _setitem(_mask(M23))(T, x, 0.0), (3, 4)),
    Case("setitem_into_nonleaf_view", lambda T, x, v: _setitem_view(T, x, v), (3, 4), (2,)),
    # ---- index_select / gather ----
    Case("index_select", lambda T, a, i: a.index_select(0, i), (3, 4), ("int", (5,), 3)),
    Case("index_select_dim1", lambda T, a, i: T.index_select(a, 1, i), (3, 4),
         ("int", (3,), 4)),
    Case("gather", lambda T, a, i: a.gather(1, i), (3, 4), ("int", (3, 5), 4)),
    Case("gather_dim0", lambda T, a, i: T.gather(a, 0, i), (3, 4), ("int", (2, 4), 3)),
    # ---- more table rows and composites ----
    Case("alias_ellipsis", lambda T, a: a[...], (3, 4)),
    Case("clamp_max_fn", lambda T, a: T.clamp_max(a, 0.3), ("grid", (3, 4))),
    Case("squeeze_dims", lambda T, a: a.squeeze((0, 2)), (1, 3, 1, 4)),
    Case("square", lambda T, a: T.square(a), (3, 4)),
    Case("flip", lambda T, a: T.flip(a, (0,)), (3, 4)),
    Case("flip_method", lambda T, a: a.flip(0, 1), (3, 4)),
    Case("outer", lambda T, a, b: T.outer(a, b), (3,), (4,)),
    Case("hstack", lambda T, a, b: T.hstack([a, b]), (2, 3), (2, 1)),
    Case("vstack", lambda T, a, b: T.vstack([a, b]), (3,), (2, 3)),
    Case("broadcast_to", lambda T, a: T.broadcast_to(a, (2, 3, 4)), (3, 1)),
    Case("take_along_dim", lambda T, a, i: T.take_along_dim(a, i, 1), (3, 4),
         ("int", (3, 2), 4)),
    Case("index_add", lambda T, a, i, b: a.index_add(0, i, b), (3, 4), ("int", (5,), 3),
         (5, 4)),
    Case("repeat", lambda T, a: a.repeat(2, 3), (2, 3)),
    Case("sum_dtype", lambda T, a: a.sum(dtype=T.float64), ("f32", (3, 4)), check=False),
    Case("exp_f32", lambda T, a: a.exp(), ("f32", (3, 4)), check=False),
    Case("matmul_f32", lambda T, a, b: a @ b, ("f32", (3, 4)), ("f32", (4, 2)), check=False),
    Case("softmax_f32", lambda T, a: a.softmax(-1), ("f32", (3, 4)), check=False),
    Case("mean_f32", lambda T, a: a.mean(1), ("f32", (3, 4)), check=False),
    # ---- in-place forms inside a differentiable function (rebase, CopySlices) ----
    Case("ip_add_tensor", lambda T, a, b: _ip(a, lambda y: y.add_(b)), (3, 4), (4,)),
    Case("ip_mul_tensor", lambda T, a, b: _ip(a, lambda y: y.mul_(b)), (3, 4), (3, 1)),
    Case("ip_div_tensor", lambda T, a, b: _ip(a, lambda y: y.div_(b)), (3, 4),
         ("away", (4,))),
    Case("ip_sub_alpha", lambda T, a, b: _ip(a, lambda y: y.sub_(b, alpha=2)), (3, 4), (3, 4)),
    Case("ip_pow", lambda T, a: _ip(a, lambda y: y.pow_(3)), (3, 4)),
    Case("ip_exp", lambda T, a: _ip(a, lambda y: y.exp_()), (3, 4)),
    Case("ip_tanh", lambda T, a: _ip(a, lambda y: y.tanh_()), (3, 4)),
    Case("ip_sigmoid", lambda T, a: _ip(a, lambda y: y.sigmoid_()), (3, 4)),
    Case("ip_relu", lambda T, a: _ip(a, lambda y: y.relu_()), ("grid", (3, 4))),
    Case("ip_neg", lambda T, a: _ip(a, lambda y: y.neg_()), (3, 4)),
    Case("ip_clamp", lambda T, a: _ip(a, lambda y: y.clamp_(-0.3, 0.6)), ("grid", (3, 4))),
    Case("ip_zero", lambda T, a: _ip(a, lambda y: y.zero_()) * a, (3, 4)),
    Case("ip_fill", lambda T, a: _ip(a, lambda y: y.fill_(2.0)) * a, (3, 4)),
    Case("ip_copy", lambda T, a, b: _ip(a, lambda y: y.copy_(b)) * a, (3, 4), (4,)),
    Case("ip_masked_fill", lambda T, m, a: _ip(a, lambda y: y.masked_fill_(m, 0.5)),
         ("bool", (3, 4)), (3, 4)),
    Case("ip_iadd_twice", lambda T, a, b: _ip(a, lambda y: y.__iadd__(b).__imul__(b)), (3, 4),
         (3, 4)),
    Case("ip_view_mul", lambda T, a, b: _ip(a, lambda y: y[1:, ::2].mul_(b)), (3, 4), (2,)),
    Case("ip_view_exp", lambda T, a: _ip(a, lambda y: y[0].exp_()), (3, 4)),
    Case("ip_view_chain", lambda T, a, b: _ip(a, lambda y: y.t()[1].add_(b).mul_(b)), (3, 4),
         (3,)),
    Case("ip_view_returned", lambda T, a, b: _ipv(a, lambda y: y[:, 1:3], b), (3, 4), (3, 2)),
    Case("ip_diag", lambda T, a: _ip(a, lambda y: y.diagonal().mul_(3)), (3, 3)),
    # in-place shape changes of a tensor that requires grad: PyTorch's in-place view nodes
    Case("ip_unsqueeze_", lambda T, a: _ip(a, lambda y: y.unsqueeze_(1)), (3, 4)),
    Case("ip_squeeze_", lambda T, a: _ip(a, lambda y: y.squeeze_()), (3, 1, 4)),
    Case("ip_squeeze_dim", lambda T, a: _ip(a, lambda y: y.squeeze_(1)), (3, 1, 4)),
    Case("ip_squeeze_dims", lambda T, a: _ip(a, lambda y: y.squeeze_((0, 2))), (1, 3, 1, 4)),
    Case("ip_t_", lambda T, a: _ip(a, lambda y: y.t_()), (3, 4)),
    Case("ip_transpose_", lambda T, a: _ip(a, lambda y: y.transpose_(0, -1)), (2, 3, 4)),
    Case("ip_as_strided_", lambda T, a: _ip(a, lambda y: y.as_strided_((2, 3), (1, 4), 1)),
         (3, 4)),
    Case("ip_setitem_tensor_value", lambda T, a, b: _ip(a, lambda y: y.__setitem__(
        (slice(None), 0), b)), (3, 4), (3,)),
    Case("ip_setitem_mask_tensor", lambda T, m, a, b: _ip(a, lambda y: y.__setitem__(m, b)),
         ("bool", (3, 4)), (3, 4), ()),
    Case("setitem_whole_0d", _setitem(Ellipsis), (3, 4), ()),
    # ---- convolution and pooling (array kernels; create_graph composes them from rows) ----
    Case("conv2d", lambda T, x, w, b: T.nn.functional.conv2d(x, w, b),
         (2, 3, 5, 5), (4, 3, 3, 3), (4,)),
    Case("conv2d_stride_pad", lambda T, x, w, b: T.nn.functional.conv2d(x, w, b, stride=2,
                                                                          padding=1),
         (1, 2, 6, 5), (3, 2, 3, 2), (3,)),
    Case("conv2d_groups_dilation", lambda T, x, w: T.nn.functional.conv2d(
        x, w, None, padding=2, dilation=2, groups=2), (1, 4, 6, 6), (4, 2, 3, 3)),
    Case("conv2d_const_weight", lambda T, x, w: T.nn.functional.conv2d(x, w),
         (1, 2, 4, 4), ("const", (2, 2, 2, 2))),
    Case("max_pool2d", lambda T, x: T.nn.functional.max_pool2d(x, 2), ("grid", (2, 2, 4, 4))),
    Case("max_pool2d_pad_stride", lambda T, x: T.nn.functional.max_pool2d(
        x, 3, stride=2, padding=1), ("grid", (1, 2, 5, 5))),
    Case("max_pool2d_indices", lambda T, x: T.nn.functional.max_pool2d(
        x, 2, return_indices=True), ("grid", (1, 2, 4, 4))),
    # 3-D layers: N-d kernels (ops/volumes.py; create_graph composes them from rows) and
    # separable linear pools
    Case("conv3d", lambda T, x, w, b: T.nn.functional.conv3d(x, w, b),
         (2, 2, 3, 4, 3), (3, 2, 2, 2, 2), (3,)),
    Case("conv3d_stride_pad_groups", lambda T, x, w: T.nn.functional.conv3d(
        x, w, None, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2), groups=2),
         (1, 4, 3, 5, 4), (2, 2, 2, 2, 2)),
    Case("conv3d_same_unbatched", lambda T, x, w: T.nn.functional.conv3d(x, w, padding="same"),
         (2, 3, 3, 4), (2, 2, 2, 3, 2)),
    Case("max_pool3d", lambda T, x: T.nn.functional.max_pool3d(x, 2), ("grid", (2, 2, 4, 4, 4))),
    Case("max_pool3d_pad_ceil_dilation", lambda T, x: T.nn.functional.max_pool3d(
        x, (2, 3, 2), stride=2, padding=1, dilation=(1, 1, 2), ceil_mode=True),
         ("grid", (1, 2, 5, 5, 6))),
    Case("max_pool3d_indices", lambda T, x: T.nn.functional.max_pool3d(
        x, 2, return_indices=True), ("grid", (1, 2, 4, 4, 4))),
    Case("avg_pool3d", lambda T, x: T.nn.functional.avg_pool3d(x, 2), (2, 2, 4, 4, 4)),
    Case("avg_pool3d_pad_ceil", lambda T, x: T.nn.functional.avg_pool3d(
        x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (1, 2, 5, 4, 6)),
    Case("avg_pool3d_divisor", lambda T, x: T.nn.functional.avg_pool3d(
        x, (2, 1, 2), divisor_override=3), (2, 4, 3, 4)),
    Case("adaptive_avg_pool3d", lambda T, x: T.nn.functional.adaptive_avg_pool3d(
        x, (2, None, 3)), (1, 2, 5, 3, 7)),
    # ---- dtype conversion and promotion ----
    Case("to_float32", lambda T, a: a.to(T.float32), (3, 4), check=False),
    Case("float_method", lambda T, a: (a * 2).float(), (3, 4), check=False),
    Case("to_float64_from_f32", lambda T, a: a.to(T.float64), ("f32", (3, 4)), check=False),
    Case("double_noop", lambda T, a: (a + 1).double(), (3, 4)),
    Case("promote_int_times_float", lambda T, a: a * 1.5, ("int", (3, 4), 5), grad=False),
    Case("promote_int_plus_int", lambda T, a: a + 2, ("int", (3, 4), 5), grad=False),
    Case("promote_int_div_int", lambda T, a: a / 2, ("int", (3, 4), 5), grad=False),
    Case("promote_bool_plus_int", lambda T, a: a + 1, ("bool", (3, 4)), grad=False),
    Case("promote_int_exp", lambda T, a: a.exp(), ("int", (3, 4), 3), grad=False),
    Case("promote_f32_plus_f64", lambda T, a, b: a + b, ("f32", (3, 4)), (3, 4), check=False),
    Case("promote_f32_times_0d_f64", lambda T, a, b: a * b, ("f32", (3, 4)), (), check=False),
    Case("promote_0d_f32_times_f64", lambda T, a, b: a * b, ("f32", ()), (3, 4), check=False),
    Case("promote_int_plus_0d_f64", lambda T, i, b: i + b, ("int", (3, 4), 5), (), check=False),
    Case("promote_0d_int_plus_f32", lambda T, i, b: i + b, ("int", (), 5), ("f32", (3,)),
         check=False),
    Case("promote_0d_0d", lambda T, a, b: a * b, ("f32", ()), (), check=False),
    Case("promote_f32_scalar", lambda T, a: a * 2.5, ("f32", (3,)), check=False),
]


def _ip(a, op):
    """y = a * 1 (a non-leaf), apply the in-place `op` to y, return y."""
    y = a * 1
    op(y)
    return y


def _ipv(a, view, b):
    """In-place through a view of a non-leaf; return base and view (CopySlices, AsStrided)."""
    y = a * 1
    v = view(y)
    v.mul_(b)
    return y, v


def _setitem_view(T, x, v):
    y = x * 1
    y[1, 1:3] = v
    return y


def _by_name():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"


_by_name()
FORWARD = [c.param("forward") for c in CASES]
NAMES = [c.param("grad_fn") for c in CASES]
GRAD = [c.param("grad") for c in CASES if c.grad]
CHECK = [c.param("gradcheck") for c in CASES if c.grad and c.check]


def _run(case):
    nb, th = _inputs(case)
    yn = _outs(case.f(nbgrad, *nb))
    yt = _outs(case.tf(torch, *th))
    return nb, th, yn, yt


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", FORWARD)
def test_forward(case):
    _, _, yn, yt = _run(case)
    assert len(yn) == len(yt)
    for a, b in zip(yn, yt):
        assert tuple(a.shape) == tuple(b.shape)
        assert _dtype_name(a) == _dtype_name(b)
        tol = 1e-5 if b.dtype == torch.float32 else 1e-10
        np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("case", NAMES)
def test_grad_fn_name(case):
    _, _, yn, yt = _run(case)
    names_n = [None if a.grad_fn is None else type(a.grad_fn).__name__ for a in yn]
    names_t = [None if b.grad_fn is None else type(b.grad_fn).__name__ for b in yt]
    assert names_n == names_t
    assert [a.requires_grad for a in yn] == [b.requires_grad for b in yt]


@pytest.mark.parametrize("case", GRAD)
def test_grad(case):
    nb, th, yn, yt = _run(case)
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + 1)
    outs_n, outs_t, gn, gt = [], [], [], []
    for a, b in zip(yn, yt):
        if not b.requires_grad:
            continue
        g = rng.standard_normal(tuple(b.shape)).astype(_np(b).dtype)
        outs_n.append(a)
        outs_t.append(b)
        gn.append(nbgrad.tensor(g.copy()))
        gt.append(torch.tensor(g.copy()))
    assert outs_t, "the case must produce an output that requires grad"
    torch.autograd.backward(outs_t, gt)
    nbgrad.autograd.backward(outs_n, gn)
    for i, (xn, xt) in enumerate(zip(nb, th)):
        if not isinstance(xt, torch.Tensor) or not xt.requires_grad:
            continue
        assert xn.grad is not None, f"input {i} got no grad"
        assert tuple(xn.grad.shape) == tuple(xt.grad.shape)
        assert _dtype_name(xn.grad) == _dtype_name(xt.grad)
        tol = 1e-5 if xt.dtype == torch.float32 else 1e-10
        np.testing.assert_allclose(_np(xn.grad), _np(xt.grad), rtol=tol, atol=tol,
                                   err_msg=f"grad of input {i}")


@pytest.mark.parametrize("case", CHECK)
def test_gradcheck(case):
    nb, _ = _inputs(case)
    assert gradcheck(lambda *xs: tuple(_outs(case.f(nbgrad, *xs))), tuple(nb), atol=case.atol)


# ------------------------------------------------------------------------------------------------
# Second order
# ------------------------------------------------------------------------------------------------
def test_third_derivative_of_cube():
    for T in (nbgrad, torch):
        x = T.tensor([0.5, -1.5, 2.0], dtype=T.float64, requires_grad=True)
        y = (x ** 3).sum()
        (g1,) = T.autograd.grad(y, x, create_graph=True)
        (g2,) = T.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = T.autograd.grad(g2.sum(), x)
        np.testing.assert_allclose(_np(g1), 3 * np.array([0.5, -1.5, 2.0]) ** 2)
        np.testing.assert_allclose(_np(g2), 6 * np.array([0.5, -1.5, 2.0]))
        np.testing.assert_allclose(_np(g3), [6.0, 6.0, 6.0])


def test_third_derivative_backward_create_graph():
    x = nbgrad.tensor(2.0, dtype=nbgrad.float64, requires_grad=True)
    y = x ** 3
    y.backward(create_graph=True)
    g1 = x.grad
    assert g1.requires_grad and g1.grad_fn is not None
    assert g1.item() == pytest.approx(12.0)
    x.grad = None
    g1.backward(create_graph=True)
    assert x.grad.item() == pytest.approx(12.0)
    g2 = x.grad
    x.grad = None
    g2.backward()
    assert x.grad.item() == pytest.approx(6.0)


GG = {
    "tanh": (lambda x: x.tanh(), [(3,)]),
    "sigmoid": (lambda x: x.sigmoid(), [(3,)]),
    "exp": (lambda x: x.exp(), [(3,)]),
    "mul": (lambda x, y: x * y, [(3,), (3,)]),
    "mul_bcast": (lambda x, y: x * y, [(2, 3), (3,)]),
    "div": (lambda x, y: x / y, [(3,), ("away", (3,))]),
    "pow_scalar": (lambda x: x ** 3, [(3,)]),
    "pow_tt": (lambda x, y: x ** y, [("pos", (3,)), (3,)]),
    "sum": (lambda x: (x * x).sum(), [(2, 3)]),
    "mean": (lambda x: (x * x).mean(0), [(2, 3)]),
    "matmul": (lambda x, y: x @ y, [(2, 3), (3, 2)]),
    "log": (lambda x: x.log(), [("pos", (3,))]),
    "sin": (lambda x: x.sin(), [(3,)]),
}


@pytest.mark.parametrize("name", sorted(GG))
def test_gradgradcheck(name):
    f, specs = GG[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    xs = tuple(nbgrad.tensor(_array(s, rng)[0], requires_grad=True) for s in specs)
    assert gradgradcheck(f, xs)


@pytest.mark.parametrize("name", sorted(GG))
def test_second_derivative_vs_torch(name):
    """Hessian-vector products through create_graph equal torch's."""
    f, specs = GG[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 7)
    arrays = [_array(s, rng)[0] for s in specs]
    res = []
    for T in (nbgrad, torch):
        xs = [T.tensor(a.copy(), requires_grad=True) for a in arrays]
        y = f(*xs)
        go = T.tensor(np.linspace(0.5, 1.5, int(np.prod(tuple(y.shape)))).reshape(tuple(y.shape)))
        gs = T.autograd.grad(y, xs, go, create_graph=True)
        s = sum((g * g).sum() for g in gs)
        hs = T.autograd.grad(s, xs, allow_unused=True)
        res.append([None if h is None else _np(h) for h in hs])
    for a, b in zip(*res):
        if b is None:
            assert a is None or np.allclose(a, 0)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------------------------------
# The same cases in float32 (default dtype): output and gradient dtypes and values
# ------------------------------------------------------------------------------------------------
def _as_f32(case):
    def conv(spec):
        if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
            return ("f32c", spec[1]) if spec[0] == "const" else spec
        return ("f32", spec)
    return Case(case.name + "_f32", case.f, *[conv(s) for s in case.specs], tf=case.tf,
                grad=case.grad)


F32_BUGS = {}  # case name -> reason, for core bugs reported and open
F32 = [pytest.param(_as_f32(c), id=c.name, marks=pytest.mark.xfail(
           reason=f"core bug: {F32_BUGS[c.name]}", strict=True) if c.name in F32_BUGS else ())
       for c in CASES
       if c.grad and not c.name.startswith(("promote", "to_", "float_", "double", "sum_dtype"))]


@pytest.mark.parametrize("case", F32)
def test_float32_forward_and_grad(case):
    nb, th, yn, yt = _run(case)
    for a, b in zip(yn, yt):
        assert tuple(a.shape) == tuple(b.shape)
        assert _dtype_name(a) == _dtype_name(b)
        np.testing.assert_allclose(_np(a), _np(b), rtol=2e-5, atol=2e-5)
    outs_n = [a for a, b in zip(yn, yt) if b.requires_grad]
    outs_t = [b for b in yt if b.requires_grad]
    gs = [np.linspace(-1, 1, b.numel()).reshape(tuple(b.shape)).astype(_np(b).dtype)
          for b in outs_t]
    torch.autograd.backward(outs_t, [torch.tensor(g) for g in gs])
    nbgrad.autograd.backward(outs_n, [nbgrad.tensor(g) for g in gs])
    for xn, xt in zip(nb, th):
        if isinstance(xt, torch.Tensor) and xt.requires_grad:
            assert _dtype_name(xn.grad) == _dtype_name(xt.grad)
            np.testing.assert_allclose(_np(xn.grad), _np(xt.grad), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------
# The same bodies on the GPU (cupy) where one is present: nbgrad on the device vs torch on the CPU
# ------------------------------------------------------------------------------------------------
class _OnDevice:
    """`nbgrad` as seen by a case, with tensor factories defaulting to `device`."""

    _FACTORIES = ("tensor", "ones", "zeros", "arange", "full", "empty", "randn", "rand",
                  "ones_like", "zeros_like", "eye")

    def __init__(self, device):
        self._device = device
        self.__name__ = "nbgrad"

    def __getattr__(self, name):
        obj = getattr(nbgrad, name)
        if name in self._FACTORIES:
            def make(*args, **kw):
                kw.setdefault("device", self._device)
                return obj(*args, **kw)
            return make
        return obj


def _host(t):
    return t.detach().cpu().numpy()


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not nbgrad.cuda.is_available(), reason="no CUDA device (cupy absent or no GPU)"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", FORWARD)
def test_on_device(case, device):
    """Forward values, grad_fn names and gradients with every tensor on `device`."""
    check_on_device(case, device)


def check_on_device(case, device):
    """The body of test_on_device (tests/test_device_double.py runs it on a strict cupy double)."""
    T = _OnDevice(device)
    nb, th = _inputs(case)
    nb = [x.to(device).detach().requires_grad_(x.requires_grad) if isinstance(x, nbgrad.Tensor)
          else x for x in nb]
    yn = _outs(case.f(T, *nb))
    yt = _outs(case.tf(torch, *th))
    for a, b in zip(yn, yt):
        assert str(a.device).startswith(device)
        assert _dtype_name(a) == _dtype_name(b)
        tol = 1e-5 if b.dtype == torch.float32 else 1e-9
        np.testing.assert_allclose(_host(a), _np(b), rtol=tol, atol=tol)
    assert [None if a.grad_fn is None else type(a.grad_fn).__name__ for a in yn] == \
        [None if b.grad_fn is None else type(b.grad_fn).__name__ for b in yt]
    if not case.grad:
        return
    pairs = [(a, b) for a, b in zip(yn, yt) if b.requires_grad]
    gs = [np.linspace(-1, 1, b.numel()).reshape(tuple(b.shape)).astype(_np(b).dtype)
          for _, b in pairs]
    torch.autograd.backward([b for _, b in pairs], [torch.tensor(g) for g in gs])
    nbgrad.autograd.backward([a for a, _ in pairs], [T.tensor(g) for g in gs])
    for xn, xt in zip(nb, th):
        if isinstance(xt, torch.Tensor) and xt.requires_grad:
            assert str(xn.grad.device).startswith(device)
            f32 = any(isinstance(x, torch.Tensor) and x.dtype == torch.float32 for x in th + yt)
            tol = 1e-5 if f32 else 1e-9
            np.testing.assert_allclose(_host(xn.grad), _np(xt.grad), rtol=tol, atol=tol)


# ------------------------------------------------------------------------------------------------
# type promotion: every pair of (tensor | 0-d tensor | Python number) operands
# ------------------------------------------------------------------------------------------------
_DT = ["bool", "int64", "float16", "float32", "float64"]
_LEFT = [(k, d) for k in ("tensor", "0d") for d in _DT]
_RIGHT = _LEFT + [("py", "int"), ("py", "float"), ("py", "bool")]
_BIN = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
        "sub": lambda a, b: a - b, "radd": lambda a, b: b + a, "rmul": lambda a, b: b * a,
        "rdiv": lambda a, b: b / a}


def _operand(T, kind, dt):
    if kind == "py":
        return {"int": 3, "float": 2.5, "bool": True}[dt]
    vals = [1, 0, 2] if dt != "bool" else [True, False, True]
    t = T.tensor(vals if kind == "tensor" else vals[0], dtype=getattr(T, dt))
    return t


def _promote(T, left, right, op):
    a, b = _operand(T, *left), _operand(T, *right)
    try:
        with np.errstate(all="ignore"):
            y = _BIN[op](a, b)
    except (RuntimeError, TypeError) as e:
        return (type(e).__name__, str(e).replace("torch.", "nbgrad."))
    return (_dtype_name(y), tuple(y.shape), _np(y))


def _bool_sub(left, right, op):
    return op == "sub" and "bool" in (left[1], right[1])


@pytest.mark.parametrize("right", _RIGHT, ids=lambda r: "-".join(r))
@pytest.mark.parametrize("left", _LEFT, ids=lambda r: "-".join(r))
def test_type_promotion(left, right):
    for op in sorted(_BIN):
        if _bool_sub(left, right, op):
            continue  # test_bool_subtraction_error
        rt, rn = _promote(torch, left, right, op), _promote(nbgrad, left, right, op)
        assert rn[:2] == rt[:2], op
        if len(rt) == 3:
            np.testing.assert_array_equal(rn[2], rt[2], err_msg=op)


_BOOL_SUB = [(lf, rt) for lf in _LEFT for rt in _RIGHT if _bool_sub(lf, rt, "sub")]


@pytest.mark.parametrize("left,right", [
    pytest.param(lf, rt, id=f"{'-'.join(lf)}-{'-'.join(rt)}") for lf, rt in _BOOL_SUB])
def test_bool_subtraction_error(left, right):
    assert _promote(nbgrad, left, right, "sub") == _promote(torch, left, right, "sub")


# ------------------------------------------------------------------------------------------------
# Second order for every case: Hessian-vector products through create_graph vs torch
# ------------------------------------------------------------------------------------------------
def _hvp(T, case, xs):
    outs = [o for o in _outs(case.f(T, *xs) if T is nbgrad else case.tf(T, *xs))
            if o.requires_grad]
    diff = [x for x in xs if isinstance(x, (torch.Tensor, nbgrad.Tensor)) and x.requires_grad]
    gos = [T.tensor(np.linspace(0.5, 1.5, o.numel()).reshape(tuple(o.shape)).astype(
        _np(o).dtype)) for o in outs]
    gs = T.autograd.grad(outs, diff, gos, create_graph=True, allow_unused=True)
    s = None
    for k, g in enumerate(gs):
        if g is not None and g.requires_grad:
            w = T.tensor(np.cos(np.arange(g.numel()) + k).reshape(tuple(g.shape)))
            term = (g * g * w).sum()
            s = term if s is None else s + term
    first = [None if g is None else _np(g) for g in gs]
    if s is None:
        return first, [None] * len(diff)
    hs = T.autograd.grad(s, diff, allow_unused=True)
    # torch may answer with a ZeroTensor (abs: sgn' = 0), whose numpy() needs force=True
    return first, [None if h is None else h.detach().numpy(force=True) for h in hs]


SECOND = [c.param("second") for c in CASES if c.grad and c.check]


@pytest.mark.parametrize("case", SECOND)
def test_second_order_vs_torch(case):
    nb, th = _inputs(case)
    ft, ht = _hvp(torch, case, th)
    fn, hn = _hvp(nbgrad, case, nb)
    for a, b in zip(fn + hn, ft + ht):
        if b is None or a is None:
            z = a if b is None else b
            assert z is None or np.allclose(z, 0), "one side is None, the other non-zero"
        else:
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8)


# ------------------------------------------------------------------------------------------------
# conv3d and max_pool3d double backward: every argument, the grad_output differentiated too
# ------------------------------------------------------------------------------------------------
def _conv3d_mod(T, x, w, b):  # nn.Conv3d with the weights given (differentiated in x)
    m = T.nn.Conv3d(4, 2, (2, 3, 2), stride=(2, 1, 1), padding=(1, 1, 0), dilation=(1, 2, 1),
                    groups=2, dtype=T.float64)
    with T.no_grad():
        m.weight.copy_(w)
        m.bias.copy_(b)
    return m(x)


VOL2 = {  # name -> (f(T, *xs), input shapes; the first differentiated in every case)
    "conv3d_plain": (lambda T, x, w, b: T.nn.functional.conv3d(x, w, b),
                     [(2, 2, 3, 4, 3), (3, 2, 2, 2, 2), (3,)]),
    "conv3d_stride_pad_dil_groups": (lambda T, x, w: T.nn.functional.conv3d(
        x, w, None, stride=(2, 1, 2), padding=(1, 2, 0), dilation=(2, 1, 1), groups=2),
        [(1, 4, 5, 4, 5), (4, 2, 2, 3, 2)]),
    "conv3d_same_unbatched": (lambda T, x, w: T.nn.functional.conv3d(x, w, padding="same",
                                                                      dilation=(1, 2, 1)),
                              [(2, 3, 4, 3), (3, 2, 3, 2, 2)]),
    "conv3d_module": (lambda T, x, w, b: _conv3d_mod(T, x, w, b),
                      [(2, 4, 3, 4, 3), ("const", (2, 2, 2, 3, 2)), ("const", (2,))]),
    "max_pool3d_plain": (lambda T, x: T.nn.functional.max_pool3d(x, 2),
                         [("grid", (2, 2, 4, 4, 4))]),
    "max_pool3d_overlap": (lambda T, x: T.nn.functional.max_pool3d(
        x, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1)), [("grid", (1, 2, 4, 5, 4))]),
    "max_pool3d_dil_ceil": (lambda T, x: T.nn.functional.max_pool3d(
        x, 2, stride=(2, 3, 2), padding=1, dilation=(2, 1, 1), ceil_mode=True),
        [("grid", (1, 3, 5, 6, 5))]),
    "max_pool3d_module_indices": (lambda T, x: T.nn.MaxPool3d(
        (2, 2, 3), stride=2, ceil_mode=True, return_indices=True)(x)[0],
        [("grid", (2, 5, 5, 7))]),
}


@pytest.mark.parametrize("name", sorted(VOL2))
def test_volume_double_backward_vs_torch(name):
    """The second-order gradients of conv3d/max_pool3d (inputs and grad_output) equal torch's."""
    f, specs = VOL2[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    req = [_array(s, rng) for s in specs]
    arrays = [a for a, _ in req]
    res = []
    for T in (nbgrad, torch):
        xs = [T.tensor(a.copy(), requires_grad=r) for a, (_, r) in zip(arrays, req)]
        y = f(T, *xs)
        go = T.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), requires_grad=True)
        xs = [x for x in xs if x.requires_grad]
        gs = T.autograd.grad(y, xs, go, create_graph=True)
        s = sum((g * g * T.tensor(np.sin(np.arange(g.numel()) + 1.0).reshape(tuple(g.shape))))
                .sum() for g in gs)
        hs = T.autograd.grad(s, xs + [go], allow_unused=True)
        res.append([_np(g) for g in gs] + [None if h is None else h.detach().numpy(force=True)
                                           for h in hs])
    for a, b in zip(*res):
        if a is None or b is None:
            z = a if b is None else b
            assert z is None or np.allclose(z, 0), "one side is None, the other non-zero"
        else:
            assert a.dtype == b.dtype == np.float64
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(VOL2))
def test_volume_gradgradcheck(name):
    f, specs = VOL2[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 3)
    xs = [nbgrad.tensor(a, requires_grad=r) for a, r in (_array(s, rng) for s in specs)]
    diff = [k for k, x in enumerate(xs) if x.requires_grad]

    def fn(*d):
        args = list(xs)
        for k, v in zip(diff, d):
            args[k] = v
        return f(nbgrad, *args)
    assert gradgradcheck(fn, tuple(xs[k] for k in diff))


# ------------------------------------------------------------------------------------------------
# repr (what a notebook shows), with "torch." printed "nbgrad."
# ------------------------------------------------------------------------------------------------
REPRS = {
    "leaf": lambda T: T.tensor([1.0, 2.5], requires_grad=True),
    "nonleaf": lambda T: T.tensor([1.0, 2.5], requires_grad=True) * 2,
    "0d": lambda T: T.tensor(3.0),
    "int": lambda T: T.tensor([1, 2]),
    "float64": lambda T: T.tensor([1.0, 2.0], dtype=T.float64),
    "sum": lambda T: (T.tensor([1.0, 2.5], requires_grad=True) * 2).sum(),
    "matrix": lambda T: T.zeros(2, 3),
    "sci": lambda T: T.tensor([1e-8, 1e8]),
    "unbind": lambda T: T.tensor([1.0, 2.5], requires_grad=True).unbind()[0],
    "size": lambda T: T.ones(2, 3).shape,
    "bool": lambda T: T.tensor([True, False]),
    "summarized": lambda T: T.arange(2000.0),
}


@pytest.mark.parametrize("make", [v if hasattr(v, "values") else pytest.param(v, id=k)
                                  for k, v in sorted(REPRS.items())])
def test_repr(make):
    assert repr(make(nbgrad)) == repr(make(torch)).replace("torch.", "nbgrad.")


F16 = {
    "mul": lambda a, b: a * b,
    "add_scalar": lambda a, b: (a + 1.5) * b,
    "exp": lambda a, b: (a * 0.5).exp() + b,
    "tanh_sum": lambda a, b: (a.tanh() * b).sum(1),
    "matmul": lambda a, b: a @ b.t(),
    "softmax": lambda a, b: a.softmax(-1) * b,
    "mean": lambda a, b: (a * b).mean(),
    "view_slice": lambda a, b: a.t()[1:] * b.t()[1:],
}


@pytest.mark.parametrize("name", sorted(F16))
def test_float16(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    xa, xb = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    res = {}
    for T in (torch, nbgrad):
        a = T.tensor(xa, dtype=T.float16, requires_grad=True)
        b = T.tensor(xb, dtype=T.float16, requires_grad=True)
        y = F16[name](a, b)
        y.backward(T.ones(tuple(y.shape), dtype=T.float16))
        res[T] = [(_dtype_name(t), _np(t).astype(np.float64)) for t in (y, a.grad, b.grad)]
    for (dn, vn), (dt, vt) in zip(res[nbgrad], res[torch]):
        assert dn == dt == "float16"
        np.testing.assert_allclose(vn, vt, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------------------------------------
# Public functions beyond the table rows (no grad): values, dtypes, shapes, errors vs torch
# ------------------------------------------------------------------------------------------------
_FX = np.random.default_rng(0).standard_normal((3, 4))
_FY = np.random.default_rng(1).standard_normal((3, 4))
I = np.array([[1, 0], [2, 3], [0, 0]])
FUNCS = {
    "argmax": lambda T, x, y: x.argmax(),
    "argmax_dim": lambda T, x, y: x.argmax(1),
    "argmin_keep": lambda T, x, y: x.argmin(0, keepdim=True),
    "all": lambda T, x, y: (x > -5).all(),
    "any_dim": lambda T, x, y: (x > 1).any(1),
    "nonzero": lambda T, x, y: (x > 0).nonzero(),
    "nonzero_tuple": lambda T, x, y: (x > 0).nonzero(as_tuple=True),
    "count_nonzero": lambda T, x, y: T.count_nonzero(x > 0),
    "isclose": lambda T, x, y: T.isclose(x, x + 1e-9),
    "allclose": lambda T, x, y: T.allclose(x, y),
    "equal": lambda T, x, y: T.equal(x, x.clone()),
    "round": lambda T, x, y: T.round(x * 10),
    "round_dec": lambda T, x, y: T.round(x, decimals=2),
    "floor_divide": lambda T, x, y: T.floor_divide(x, y),
    "remainder": lambda T, x, y: T.remainder(x, y),
    "float_power": lambda T, x, y: T.float_power(x.abs(), 2),
    "where1": lambda T, x, y: T.where(x > 0),
    "hstack": lambda T, x, y: T.hstack([x, y]),
    "vstack": lambda T, x, y: T.vstack([x, y]),
    "index_put": lambda T, x, y: x.index_put((T.tensor([0, 2]),), T.tensor(1.0)),
    "index_put_acc": lambda T, x, y: x.index_put((T.tensor([0, 0]),), T.ones(4), accumulate=True),
    "masked_fill_t": lambda T, x, y: x.masked_fill(x > 0, T.tensor(2.0)),
    "clamp_t": lambda T, x, y: x.clamp(min=y, max=y + 1),
    "max2": lambda T, x, y: T.max(x, y),
    "min2": lambda T, x, y: T.min(x, y),
    "sum_int": lambda T, x, y: (x > 0).sum(),
    "sum_int_dim": lambda T, x, y: (x > 0).sum(1),
    "mean_dtype": lambda T, x, y: x.float().mean(dtype=T.float64),
    "prod_int": lambda T, x, y: T.tensor([[1, 2], [3, 4]]).prod(1),
    "cumsum_int": lambda T, x, y: T.tensor([1, 2, 3]).cumsum(0),
    "cumsum_dtype": lambda T, x, y: x.cumsum(1, dtype=T.float32),
    "softmax_dtype": lambda T, x, y: x.float().softmax(1, dtype=T.float64),
    "norm_fro": lambda T, x, y: x.norm("fro"),
    "norm_dims": lambda T, x, y: x.norm(dim=(0, 1)),
    "std_unbiased": lambda T, x, y: x.std(1, unbiased=False),
    "var_all_keep": lambda T, x, y: x.var(correction=2),
    "logsumexp_dims": lambda T, x, y: x.logsumexp((0, 1)),
    "max_all_int": lambda T, x, y: T.tensor([3, 1, 2]).max(),
    "amax_int": lambda T, x, y: T.tensor([[3, 1], [2, 5]]).amax(0),
    "sign_int": lambda T, x, y: T.tensor([-2, 0, 3]).sign(),
    "abs_int": lambda T, x, y: T.tensor([-2, 0, 3]).abs(),
    "neg_int": lambda T, x, y: -T.tensor([-2, 0, 3]),
    "relu_int": lambda T, x, y: T.tensor([-2, 0, 3]).relu(),
    "clamp_int": lambda T, x, y: T.tensor([-2, 0, 3]).clamp(-1, 1),
    "pow_int": lambda T, x, y: T.tensor([1, 2, 3]) ** 2,
    "pow_int_neg": lambda T, x, y: T.tensor([1, 2, 3]) ** -1.0,
    "div_floor": lambda T, x, y: T.div(T.tensor([7, -7]), 2, rounding_mode="floor"),
    "div_trunc": lambda T, x, y: T.div(T.tensor([7.0, -7.0]), 2, rounding_mode="trunc"),
    "sqrt_int": lambda T, x, y: T.tensor([4, 9]).sqrt(),
    "sigmoid_int": lambda T, x, y: T.tensor([0, 1]).sigmoid(),
    "mean_int_err": lambda T, x, y: T.tensor([1, 2]).mean(),
    "matmul_int": lambda T, x, y: T.tensor([[1, 2], [3, 4]]) @ T.tensor([1, 1]),
    "cat_promote": lambda T, x, y: T.cat([T.tensor([1, 2]), T.tensor([1.5])]),
    "stack_promote": lambda T, x, y: T.stack(
        [T.tensor([1, 2]), T.tensor([1.5, 2.5], dtype=T.float64)]
    ),
    "where_promote": lambda T, x, y: T.where(x > 0, 1, 0.5),
    "where_scalar_t": lambda T, x, y: T.where(x > 0, x, 0),
    "expand_as": lambda T, x, y: x[:1].expand_as(y),
    "take_along_dim": lambda T, x, y: T.take_along_dim(x, T.tensor(I), 1),
    "gather_neg": lambda T, x, y: x.gather(-1, T.tensor(I)),
    "index_select_neg": lambda T, x, y: x.index_select(-1, T.tensor([3, 0])),
    "t_0d": lambda T, x, y: T.tensor(2.0).t(),
    "squeeze_neg": lambda T, x, y: x[:, :1].squeeze(-1),
    "unflatten_neg": lambda T, x, y: x.unflatten(-1, (2, -1)),
    "split_neg": lambda T, x, y: x.split(3, -1),
    "chunk_more": lambda T, x, y: x.chunk(5, 1),
    "narrow_neg": lambda T, x, y: x.narrow(-1, -2, 2),
    "diag_neg_dims": lambda T, x, y: x.diagonal(0, -1, -2),
    "permute_neg": lambda T, x, y: x.permute(-1, 0),
    "repeat": lambda T, x, y: x.repeat(2, 1, 1),
    "flip": lambda T, x, y: x.flip(-1),
    "reshape_3d": lambda T, x, y: x.reshape(2, -1, 3),
    "to_bool": lambda T, x, y: x.to(T.bool),
    "to_long": lambda T, x, y: (x * 10).long(),
    "to_int": lambda T, x, y: (x * 10).int(),
    "bool_float": lambda T, x, y: (x > 0).float(),
    "max_dim_ties": lambda T, x, y: T.tensor([[1.0, 1.0], [2.0, 2.0]]).max(1),
    "min_dim_nan": lambda T, x, y: T.tensor([[1.0, float("nan")], [2.0, 0.0]]).min(1),
    "max_nan": lambda T, x, y: T.tensor([1.0, float("nan")]).max(),
    "argmax_nan": lambda T, x, y: T.tensor([1.0, float("nan"), 3.0]).argmax(),
    "maximum_nan": lambda T, x, y: T.maximum(T.tensor([1.0, float("nan")]), T.tensor([2.0, 1.0])),
    "clamp_nan": lambda T, x, y: T.tensor([float("nan"), 1.0]).clamp(0, 0.5),
    "relu_nan": lambda T, x, y: T.tensor([float("nan"), -1.0]).relu(),
    "sign_nan": lambda T, x, y: T.tensor([float("nan"), -0.0]).sign(),
    "softmax_inf": lambda T, x, y: T.tensor([float("-inf"), 0.0]).softmax(0),
    "logsumexp_inf": lambda T, x, y: T.tensor([float("-inf"), float("-inf")]).logsumexp(0),
}

FUNC_BUGS = {}  # name -> reason, for core bugs reported and open


def _fval(r):
    if isinstance(r, (tuple, list)):
        return tuple(_fval(v) for v in r)
    if hasattr(r, "detach"):
        return (_dtype_name(r), tuple(r.shape), r.detach().numpy())
    return r


def _fsame(a, b):
    if isinstance(a, tuple) and len(a) == 3 and isinstance(a[2], np.ndarray):
        if not (isinstance(b, tuple) and len(b) == 3 and a[:2] == b[:2]):
            return False
        if a[2].dtype.kind == "f":
            tol = 1e-6 if a[2].dtype.itemsize <= 4 else 1e-12
            return np.allclose(a[2], b[2], rtol=tol, atol=tol, equal_nan=True)
        return np.array_equal(a[2], b[2])
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_fsame, a, b))
    return a == b


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=f"core bug: {FUNC_BUGS[n]}", strict=True))
    if n in FUNC_BUGS else n for n in sorted(FUNCS)])
def test_function_vs_torch(name):
    out = []
    for T in (torch, nbgrad):
        try:
            with np.errstate(all="ignore"):
                out.append(_fval(FUNCS[name](T, T.tensor(_FX.copy()), T.tensor(_FY.copy()))))
        except (RuntimeError, TypeError, IndexError, ValueError) as e:
            out.append((type(e).__name__, str(e).replace("torch.", "nbgrad.")))
    assert _fsame(out[1], out[0]), out


def test_default_dtype_float64():
    def f(T):
        T.set_default_dtype(T.float64)
        try:
            ts = [T.tensor([1.5]), T.tensor([1]) * 1.5, T.ones(2), T.arange(3.0),
                  T.tensor([1]) / 2, T.tensor([1]).exp(), T.randn(2),
                  T.tensor(1.5, dtype=T.float32), T.ones(2, dtype=T.float32) * 2.5]
            return [_dtype_name(t) for t in ts] + [str(T.get_default_dtype()).split(".")[-1]]
        finally:
            T.set_default_dtype(T.float32)
    assert f(nbgrad) == f(torch)
    assert _dtype_name(nbgrad.ones(1)) == "float32"


# ------------------------------------------------------------------------------------------------
# Every row of the table is reached by some case above (so each is checked for values, grads,
# node names, gradcheck and second order)
# ------------------------------------------------------------------------------------------------
def _rows_reached(outs):
    rows, seen = set(), set()
    stack = [o.grad_fn for o in outs if isinstance(o, nbgrad.Tensor)]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        row = getattr(type(n), "_row", None)
        if row is not None:
            rows.add(row.name)
        stack.append(getattr(n, "fn", None))  # CopySlices runs the in-place op's node
        stack.extend(c for c, _ in n.next_functions)
    return rows


NEEDS_A_DEVICE = {"to_device"}  # exercised by test_on_device on a GPU
# rows merged before their cases (branches ops, nn-a at 15:30): remove a name when its case lands
AWAITING_CASES = {
    "leaky_relu_", "threshold_",
}


def _all_cases():
    """(name, thunk giving nbgrad outputs) of every row-level case: this file's CASES, issue 9's
    (test_ops_ext.py), the nn rows' (test_nn_rows.py) and the random rows' (test_random.py)."""
    import test_nn_rows
    import test_ops_ext
    import test_real_programs
    for case in CASES + test_ops_ext.CASES + test_real_programs.CASES:
        yield case.name, lambda case=case: case.f(nbgrad, *_inputs(case)[0])
    for name, fn, arrays, grad, *_ in test_nn_rows.CASES:
        yield name, lambda fn=fn, arrays=arrays, grad=grad: test_nn_rows.both(fn, arrays,
                                                                              grad)[1][0]
    import test_random  # the random rows: their cases compare nodes, not values
    yield from test_random.row_cases()
    import test_nn_rnn  # the fused LSTM layer: compared with torch's oneDNN path there
    yield from test_nn_rnn.row_cases()
    import test_nn_layers23  # interpolation, max_unpool and CTC: compared with torch there
    yield from test_nn_layers23.row_cases()
    import test_sparse  # sparse=True embeddings: compared with torch there
    yield from test_sparse.row_cases()


def test_every_row_has_a_case():
    reached = set()
    for _, make in _all_cases():
        reached |= _rows_reached(_outs(make()))
    missing = sorted(set(nbgrad.ops.ROWS) - reached - NEEDS_A_DEVICE - AWAITING_CASES)
    assert not missing, f"rows without a case in CASES: {missing}"
    landed = sorted(AWAITING_CASES & reached)
    assert not landed, f"these rows have cases now: remove them from AWAITING_CASES: {landed}"
