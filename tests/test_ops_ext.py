"""The ops of issue 9 against PyTorch, with test_ops.py's harness.

Differentiable cases (Case lists, as in test_ops.py) get: forward values/shapes/dtypes, grad_fn
names of the outputs and of the whole graph behind them (composed ops must show PyTorch's nodes),
gradients after backward, a finite-difference gradcheck, Hessian-vector products through
create_graph, and the same in float32. Functions without a gradient (unique, histograms,
searchsorted, ...) are compared as values, dtypes, shapes and error texts, and must not record a
graph where torch does not.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import nbgrad
import test_ops as base
from test_ops import Case, _fsame, _fval, _outs

# ------------------------------------------------------------------------------------------------
# Differentiable composed ops
# ------------------------------------------------------------------------------------------------


def _ein(eq):
    return lambda T, *xs: T.einsum(eq, *xs)


def _setitem(idx, T=None):
    def f(T, x, v):
        y = x * 1
        y[idx(T) if callable(idx) else idx] = v
        return y
    return f


def _loss_grad(T, loss, a, b, wrt, go=None):
    """The gradient of ``loss(a, b)`` in input ``wrt`` (0: a, 1: b), built with create_graph
    (so a node of the loss's backward op); inputs that do not require grad (finite differences
    evaluate the case on plain tensors) take part through leaf copies that do."""
    if not (a.requires_grad or b.requires_grad):
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
    with T.enable_grad():
        out = loss(a, b)
        go = None if go is None else T.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(
            tuple(out.shape)), dtype=out.dtype)
        return T.autograd.grad(out, (a, b)[wrt], go, create_graph=True)[0]


def _act_grad(T, act, x):
    """The gradient of ``act(x)`` (weighted) built with create_graph, so a node of the
    activation's backward op (GeluBackwardBackward0 of grad_output and self)."""
    if not x.requires_grad:
        x = x.detach().requires_grad_()
    with T.enable_grad():
        out = act(x)
        w = T.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)),
                     dtype=out.dtype)
        return T.autograd.grad(out, x, w, create_graph=True)[0]


def _two_zeros_src_grad(T, a, b):
    """scatter_reduce prod's src gradient built with create_graph where two zeros of src meet
    at one position: torch's DelayedError node (`Error`), whose backward refuses."""
    with T.enable_grad():
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        s = b * T.tensor([[0.0, 0.0]], dtype=b.dtype)
        y = a.scatter_reduce(1, T.tensor([[0, 0], [1, 3], [2, 2]]), s, "prod")
        return T.autograd.grad(y.sum(), s, create_graph=True)[0]


CASES = [
    # the activations' backward ops, recorded under create_graph (GeluBackwardBackward0, ...)
    Case("gelu_backward", lambda T, x: _act_grad(T, T.nn.functional.gelu, x), (3, 4)),
    Case("gelu_backward_tanh", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.gelu(t, approximate="tanh"), x), (3, 4)),
    Case("elu_backward", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.elu(t, alpha=0.7), x), (3, 4)),
    Case("elu_backward_selu", lambda T, x: _act_grad(T, T.nn.functional.selu, x), (3, 4)),
    Case("elu_backward_celu", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.celu(t, alpha=1.3), x), (3, 4)),
    Case("elu_backward_result", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.elu(t * 1, inplace=True), x), (3, 4)),
    Case("celu_backward_result", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.celu(t * 1, alpha=1.3, inplace=True), x), (3, 4)),
    Case("softplus_backward", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.softplus(t, beta=2.0, threshold=3.0), x), (3, 4)),
    Case("hardswish_backward", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.hardswish(t * 3), x), (3, 4)),
    Case("log_sigmoid_backward", lambda T, x: _act_grad(T, T.nn.functional.logsigmoid, x),
         (3, 4)),
    # its second derivative's z - 1 is sub.Scalar (SubBackward1)
    Case("sub_scalar", lambda T, x: _act_grad(T, lambda t: _act_grad(
        T, T.nn.functional.logsigmoid, t), x), (3, 4)),
    Case("_softmax_backward_data", lambda T, x: _act_grad(
        T, lambda t: T.softmax(t, 1), x), (3, 4)),
    Case("_log_softmax_backward_data", lambda T, x: _act_grad(
        T, lambda t: T.log_softmax(t, 0), x), (3, 4)),
    # the losses' backward ops, recorded under create_graph (MseLossBackwardBackward0, ...)
    Case("mse_loss_backward", lambda T, a, b: _loss_grad(
        T, T.nn.functional.mse_loss, a, b, 0), (3, 4), (3, 4)),
    Case("smooth_l1_loss_backward", lambda T, a, b: _loss_grad(
        T, lambda x, y: T.nn.functional.smooth_l1_loss(x, y, beta=0.5, reduction="sum"), a, b,
        1), (3, 4), (3, 4)),
    Case("huber_loss_backward", lambda T, a, b: _loss_grad(
        T, lambda x, y: T.nn.functional.huber_loss(x, y, reduction="none", delta=0.5), a, b, 0,
        go=True), (3, 4), (3, 4)),
    # prelu's backward op, one node for both gradients (PreluKernelBackwardBackward0)
    Case("_prelu_kernel_backward", lambda T, a, b: _loss_grad(
        T, T.nn.functional.prelu, a, b, 0, go=True), (3, 4), (4,)),
    Case("_prelu_kernel_backward_weight", lambda T, a, b: _loss_grad(
        T, T.nn.functional.prelu, a, b, 1, go=True), (2, 3, 2), (1,)),
    Case("binary_cross_entropy_backward", lambda T, a, b: _loss_grad(
        T, lambda x, y: T.nn.functional.binary_cross_entropy(x.sigmoid(), y.sigmoid()), a, b,
        0), (3, 4), (3, 4)),
    # convolution's backward op, one node for the three gradients (ConvolutionBackwardBackward0)
    Case("convolution_backward", lambda T, a, b: _loss_grad(
        T, lambda x, w: (T.nn.functional.conv2d(x, w, stride=2, padding=1) ** 2).sum(), a, b,
        0), (1, 2, 5, 4), (3, 2, 2, 3)),
    Case("convolution_backward_weight", lambda T, a, b: _loss_grad(
        T, lambda x, w: (T.nn.functional.conv2d(x, w, dilation=(2, 1), groups=2) ** 2).sum(),
        a, b, 1), (2, 2, 5, 4), (4, 1, 2, 3)),
    Case("convolution_backward_3d", lambda T, a, b: _loss_grad(
        T, lambda x, w: (T.nn.functional.conv3d(x, w, padding=(1, 0, 1)) ** 2).sum(), a, b,
        0), (1, 2, 3, 2, 3), (2, 2, 2, 1, 2)),
    # its derivative in the weight's gradient: a transposed 3-D convolution (ConvolutionBackward0)
    Case("_convolution_transpose3d", lambda T, a, b: _loss_grad(
        T, lambda x, w: (_loss_grad(T, lambda x2, w2: (T.nn.functional.conv3d(
            x2, w2, stride=(1, 2, 1)) ** 2).sum(), x, w, 1) ** 2).sum(), a, b, 0),
        (1, 1, 3, 4, 2), (2, 1, 2, 2, 1)),
    # max_pool3d's backward op (MaxPool3DWithIndicesBackwardBackward0)
    Case("max_pool3d_with_indices_backward", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.max_pool3d(t, 2, 1), x), (1, 2, 3, 3, 2)),
    # the normalizations' backward ops (NativeLayerNormBackwardBackward0, ...: ops/norms.py);
    # check=False: these cases' second order is the norms' third derivative, where torch's own
    # is off (it takes the saved mean and rstd as constants) and nbgrad's the true one
    # (test_double_backward_nodes_more.py checks it against the composite and by gradgradcheck)
    Case("native_layer_norm_backward", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.layer_norm(t, (4,)), x), (3, 4), check=False),
    Case("native_batch_norm_backward", lambda T, x: _act_grad(
        T, lambda t: T.nn.functional.batch_norm(t, None, None, training=True), x), (3, 4),
        check=False),
    # cholesky's gradient recorded: two triangular solves (LinalgSolveTriangularBackward0)
    Case("linalg_solve_triangular", lambda T, a: _act_grad(T, lambda t: T.linalg.cholesky(
        t @ t.transpose(-2, -1) + T.eye(3, dtype=t.dtype)), a), (3, 3)),
    Case("einsum_mm", _ein("ij,jk->ik"), (2, 3), (3, 4)),
    Case("einsum_mm_implicit", _ein("ij,jk"), (2, 3), (3, 4)),
    Case("einsum_transpose", _ein("ij->ji"), (2, 3)),
    Case("einsum_sum_all", _ein("ij->"), (2, 3)),
    Case("einsum_sum_rows", _ein("ij->i"), (2, 3)),
    Case("einsum_diag", _ein("ii->i"), (3, 3)),
    Case("einsum_trace", _ein("ii"), (3, 3)),
    Case("einsum_diag_3d", _ein("iji->j"), (3, 2, 3)),
    Case("einsum_hadamard", _ein("ij,ij->ij"), (2, 3), (2, 3)),
    Case("einsum_inner_all", _ein("ij,ij->"), (2, 3), (2, 3)),
    Case("einsum_dot", _ein("i,i->"), (4,), (4,)),
    Case("einsum_dot_implicit", _ein("i,i"), (4,), (4,)),
    Case("einsum_outer", _ein("i,j->ij"), (3,), (4,)),
    Case("einsum_mv", _ein("ij,j->i"), (2, 3), (3,)),
    Case("einsum_bmm", _ein("bij,bjk->bik"), (2, 3, 4), (2, 4, 5)),
    Case("einsum_ellipsis_bmm", _ein("...ij,...jk->...ik"), (2, 3, 4), (4, 2)),
    Case("einsum_ellipsis_bcast", _ein("...ij,...jk"), (2, 1, 3, 4), (5, 4, 2)),
    Case("einsum_ellipsis_sum", _ein("i...->..."), (2, 3, 4)),
    Case("einsum_attention", _ein("bhqd,bhkd->bhqk"), (2, 2, 3, 4), (2, 2, 5, 4)),
    Case("einsum_attention_out", _ein("bhqk,bhkd->bqhd"), (2, 2, 3, 5), (2, 2, 5, 4)),
    Case("einsum_three", _ein("ij,jk,kl->il"), (2, 3), (3, 4), (4, 2)),
    Case("einsum_bilinear", _ein("bn,anm,bm->ba"), (2, 3), (4, 3, 5), (2, 5)),
    Case("einsum_size1_bcast", _ein("ij,kj->ik"), (2, 1), (3, 4)),
    Case("einsum_sum_one_side", _ein("ij,k->ik"), (2, 3), (4,)),
    Case("einsum_uppercase", _ein("Ab,bC->AC"), (2, 3), (3, 4)),
    Case("einsum_spaces", _ein("i j , j k -> i k"), (2, 3), (3, 4)),
    Case("einsum_list", lambda T, a, b: T.einsum("ij,jk->ik", [a, b]), (2, 3), (3, 4)),
    Case("einsum_const", _ein("ij,jk->ik"), (2, 3), ("const", (3, 4))),
    # ---- tensordot / kron / outer ----
    Case("tensordot_1", lambda T, a, b: T.tensordot(a, b, dims=1), (2, 3), (3, 4)),
    Case("tensordot_2", lambda T, a, b: T.tensordot(a, b), (2, 3, 4), (3, 4, 5)),
    Case("tensordot_full", lambda T, a, b: T.tensordot(a, b, dims=2), (2, 3), (2, 3)),
    Case("tensordot_vec", lambda T, a, b: T.tensordot(a, b, dims=1), (3,), (3,)),
    Case("tensordot_lists", lambda T, a, b: T.tensordot(a, b, dims=([1, 0], [0, 2])),
         (3, 2, 4), (2, 5, 3)),
    Case("tensordot_0", lambda T, a, b: T.tensordot(a, b, dims=0), (2, 3), (4,)),
    Case("tensordot_bcast", lambda T, a, b: T.tensordot(a, b, dims=1), (2, 1), (1, 3)),
    Case("kron", lambda T, a, b: T.kron(a, b), (2, 3), (3, 2)),
    Case("kron_ranks", lambda T, a, b: T.kron(a, b), (3,), (2, 2)),
    Case("outer", lambda T, a, b: T.outer(a, b), (3,), (4,)),
    Case("outer_method", lambda T, a, b: a.outer(b), (3,), (2,)),
    # ---- grids, broadcasting, dims ----
    Case("meshgrid_ij", lambda T, a, b: T.meshgrid(a, b, indexing="ij"), (3,), (2,)),
    Case("meshgrid_xy", lambda T, a, b, c: T.meshgrid(a, b, c, indexing="xy"), (3,), (2,), (4,)),
    Case("meshgrid_list", lambda T, a, b: T.meshgrid([a, b], indexing="ij"), (3,), (2,)),
    Case("broadcast_tensors", lambda T, a, b, c: T.broadcast_tensors(a, b, c), (2, 1), (3,),
         (2, 3)),
    Case("broadcast_to", lambda T, a: T.broadcast_to(a, (2, 3, 4)), (3, 1)),
    Case("atleast_1d_0d", lambda T, a: T.atleast_1d(a), ()),
    Case("atleast_1d_many", lambda T, a, b: T.atleast_1d(a, b), (), (2, 3)),
    Case("atleast_2d_1d", lambda T, a: T.atleast_2d(a), (3,)),
    Case("atleast_2d_0d", lambda T, a: T.atleast_2d(a), ()),
    Case("atleast_2d_list", lambda T, a, b: T.atleast_2d([a, b]), (3,), (2, 2)),
    Case("atleast_3d_1d", lambda T, a: T.atleast_3d(a), (3,)),
    Case("atleast_3d_2d", lambda T, a: T.atleast_3d(a), (2, 3)),
    Case("atleast_3d_0d", lambda T, a: T.atleast_3d(a), ()),
    Case("movedim", lambda T, a: T.movedim(a, 0, -1), (2, 3, 4)),
    Case("movedim_tuple", lambda T, a: T.movedim(a, (0, 1), (2, 0)), (2, 3, 4)),
    Case("moveaxis_method", lambda T, a: a.moveaxis(-1, 0), (2, 3, 4)),
    Case("swapdims", lambda T, a: T.swapdims(a, 0, 2), (2, 3, 4)),
    Case("cartesian_prod", lambda T, a, b: T.cartesian_prod(a, b), (3,), (2,)),
    Case("cartesian_prod_3", lambda T, a, b, c: T.cartesian_prod(a, b, c), (2,), (2,), (3,)),
    Case("tile", lambda T, a: a.tile((2,)), (2, 3)),
    Case("tile_more_dims", lambda T, a: T.tile(a, (2, 1, 2)), (2, 3)),
    # ---- z[i] = v with v of extra leading size-1 dims ----
    Case("setitem_lead1_row", _setitem(1), (3, 4), (1, 4)),
    Case("setitem_lead1_slice", _setitem(slice(1, 3)), (3, 4), (1, 1, 2, 4)),
    Case("setitem_lead1_bcast", _setitem(slice(0, 2)), (3, 4), (1, 4)),
    Case("setitem_lead1_scalarlike", _setitem(2), (3, 4), (1, 1)),
    Case("setitem_lead1_tensor_idx", _setitem(lambda T: T.tensor([0, 2])), (3, 4), (1, 2, 4)),
    Case("setitem_lead1_same_shape", _setitem(slice(1, 2)), (3, 4), (1, 4)),
]
_ip = base._ip
_I31 = [[0], [2], [1]]


def _sym(T, a):
    return a + a.mT


def _abs_vectors(outs, *which):
    """Singular/eigen-vectors are defined up to sign, which LAPACK builds may choose differently:
    compare their absolute values (a sign-invariant function of the input)."""
    return tuple(o.abs() if i in which else o for i, o in enumerate(outs))


def _spd(T, a):
    return a @ a.mT + T.eye(a.shape[-1], dtype=a.dtype)


ROWS = [
    # ---- elementwise rows ----
    Case("log10", lambda T, a: T.log10(a), ("pos", (3, 4))),
    Case("log2", lambda T, a: a.log2(), ("pos", (3, 4))),
    Case("exp2", lambda T, a: T.exp2(a), (3, 4)),
    Case("expm1", lambda T, a: a.expm1(), (3, 4)),
    Case("sinh", lambda T, a: T.sinh(a), (3, 4)),
    Case("cosh", lambda T, a: a.cosh(), (3, 4)),
    Case("asin", lambda T, a: T.asin((a - 1.25) * 1.2), ("pos", (3, 4))),
    Case("acos", lambda T, a: ((a - 1.25) * 1.2).acos(), ("pos", (3, 4))),
    Case("arcsin_alias", lambda T, a: T.arcsin((a - 1.25) * 1.2), ("pos", (3, 4))),
    Case("atan", lambda T, a: T.atan(a), (3, 4)),
    Case("atan2", lambda T, a, b: T.atan2(a, b), (3, 4), ("away", (3, 4))),
    Case("atan2_bcast", lambda T, a, b: a.atan2(b), (3, 1), ("away", (4,))),
    Case("hypot", lambda T, a, b: T.hypot(a, b), ("away", (3, 4)), ("away", (3, 4))),
    Case("erfinv", lambda T, a: T.erfinv((a - 1.25) * 1.2), ("pos", (3, 4))),
    Case("tan", lambda T, a: T.tan(a), (3, 4)),
    Case("asinh", lambda T, a: a.asinh(), (3, 4)),
    Case("arcsinh_alias", lambda T, a: T.arcsinh(a * 3), (3, 4)),
    Case("acosh", lambda T, a: T.acosh(a + 0.6), ("pos", (3, 4))),
    Case("atanh", lambda T, a: ((a - 1.25) * 1.2).atanh(), ("pos", (3, 4))),
    Case("arctanh_alias", lambda T, a: T.arctanh((a - 1.25) * 1.2), ("pos", (3, 4))),
    Case("sinc", lambda T, a: T.sinc(a * 2), (3, 4)),
    Case("sinc_grid", lambda T, a: a.sinc(), ("grid", (3, 4), 0.15)),
    Case("logit", lambda T, a: T.logit(a / 2.1), ("pos", (3, 4))),
    Case("logit_eps", lambda T, a: (a / 2.1).logit(eps=0.3), ("pos", (3, 4))),
    Case("logit_outside", lambda T, a: T.logit(a - 0.75), ("pos", (3, 4)), check=False),
    Case("floor", lambda T, a: T.floor(a * 3), (3, 4)),
    Case("ceil", lambda T, a: (a * 3).ceil(), (3, 4)),
    Case("trunc", lambda T, a: T.trunc(a * 3), (3, 4)),
    Case("fix", lambda T, a: T.fix(a * 3), (3, 4)),
    Case("round", lambda T, a: T.round(a * 3), (3, 4)),
    Case("round_decimals", lambda T, a: T.round(a, decimals=2), (3, 4)),
    Case("frac", lambda T, a: T.frac(a * 3), (3, 4)),
    # (times a: torch's gradient of sgn alone is a ZeroTensor, which numpy() refuses)
    Case("sgn", lambda T, a: a.sgn() * a, ("grid", (3, 4))),
    Case("square", lambda T, a: T.square(a), (3, 4)),
    Case("fmod_scalar", lambda T, a: T.fmod(a, 0.7), ("grid", (3, 4), 0.01)),
    Case("fmod_tensor", lambda T, a, b: T.fmod(a, b), ("grid", (3, 4), 0.01), ("away", (4,))),
    Case("remainder_scalar", lambda T, a: T.remainder(a, 0.7), ("grid", (3, 4), 0.01)),
    Case("remainder_tensor", lambda T, a, b: a % b, ("grid", (3, 4), 0.01), ("away", (3, 4))),
    Case("logaddexp", lambda T, a, b: T.logaddexp(a, b), (3, 4), (4,)),
    Case("logaddexp2", lambda T, a, b: T.logaddexp2(a, b), (3, 4), (3, 1)),
    Case("xlogy", lambda T, a, b: T.xlogy(a, b), (3, 4), ("pos", (3, 4))),
    Case("xlogy_scalar_other", lambda T, a: T.xlogy(a, 3.0), (3, 4)),
    Case("xlogy_scalar_self", lambda T, b: T.xlogy(2.0, b), ("pos", (3, 4))),
    Case("clamp_tensor", lambda T, a, lo, hi: a.clamp(lo, hi), ("grid", (3, 4)),
         ("grid", (3, 4), -0.75), ("grid", (3, 4), 0.95)),
    Case("clamp_tensor_min", lambda T, a, lo: T.clamp(a, min=lo), ("grid", (3, 4)),
         ("grid", (4,), 0.1)),
    Case("clamp_tensor_max_const", lambda T, a, hi: T.clamp(a, max=hi), ("grid", (3, 4)),
         ("const", (3, 1))),
    Case("nan_to_num", lambda T, a: T.nan_to_num(a), (3, 4)),
    Case("lerp", lambda T, a, b: T.lerp(a, b, 0.3), (3, 4), (4,)),
    Case("lerp_tensor", lambda T, a, b, w: a.lerp(b, w), (3, 4), (3, 4), (3, 1)),
    Case("addcmul", lambda T, a, b, c: T.addcmul(a, b, c, value=0.5), (3, 4), (3, 4), (4,)),
    Case("addcdiv", lambda T, a, b, c: a.addcdiv(b, c, value=2), (3, 4), (3, 4),
         ("away", (3, 4))),
    # ---- in-place forms: the row written into self, its node, one version bump ----
    Case("ip_sin", lambda T, a: _ip(a, lambda y: y.sin_()), (3, 4)),
    Case("ip_view_log2", lambda T, a: _ip(a, lambda y: y[1].log2_()), ("pos", (3, 4))),
    Case("ip_view_scatter", lambda T, a, b: _ip(a, lambda y: y[:, 1:].scatter_(
        1, T.tensor(_I31), b)), (3, 4), (3, 1)),
    Case("ip_cos", lambda T, a: _ip(a, lambda y: y.cos_()), (3, 4)),
    Case("ip_log10", lambda T, a: _ip(a, lambda y: y.log10_()), ("pos", (3, 4))),
    Case("ip_expm1", lambda T, a: _ip(a, lambda y: y.expm1_()), (3, 4)),
    Case("ip_atan", lambda T, a: _ip(a, lambda y: y.atan_()), (3, 4)),
    Case("ip_floor", lambda T, a: _ip(a, lambda y: y.floor_()), (3, 4)),
    Case("ip_round_dec", lambda T, a: _ip(a, lambda y: y.round_(decimals=1)), (3, 4)),
    Case("ip_atan2", lambda T, a, b: _ip(a, lambda y: y.atan2_(b)), (3, 4), ("away", (4,))),
    Case("ip_fmod", lambda T, a: _ip(a, lambda y: y.fmod_(0.7)), ("grid", (3, 4), 0.01)),
    Case("ip_remainder_t", lambda T, a, b: _ip(a, lambda y: y.remainder_(b)),
         ("grid", (3, 4), 0.01), ("away", (3, 4))),
    Case("ip_xlogy", lambda T, a, b: _ip(a, lambda y: y.xlogy_(b)), (3, 4), ("pos", (3, 4))),
    Case("ip_lerp", lambda T, a, b: _ip(a, lambda y: y.lerp_(b, 0.25)), (3, 4), (3, 4)),
    Case("ip_addcmul", lambda T, a, b, c: _ip(a, lambda y: y.addcmul_(b, c)), (3, 4), (3, 4),
         (3, 4)),
    Case("ip_addcdiv", lambda T, a, b, c: _ip(a, lambda y: y.addcdiv_(b, c, value=0.5)), (3, 4),
         (3, 4), ("away", (3, 4))),
    Case("ip_nan_to_num", lambda T, a: _ip(a, lambda y: y.nan_to_num_()), (3, 4)),
    Case("ip_square", lambda T, a: _ip(a, lambda y: y.square_()), (3, 4)),
    Case("ip_sinh", lambda T, a: _ip(a, lambda y: y.sinh_()), (3, 4)),
    Case("ip_tril", lambda T, a: _ip(a, lambda y: y.tril_()), (3, 4)),
    Case("ip_clamp_tensor", lambda T, a, lo: _ip(a, lambda y: y.clamp_(min=lo)),
         ("grid", (3, 4)), ("grid", (3, 4), 0.1)),
    Case("ip_cumsum", lambda T, a: _ip(a, lambda y: y.cumsum_(1)), (3, 4)),
    Case("ip_cumprod", lambda T, a: _ip(a, lambda y: y.cumprod_(0)), ("away", (3, 4))),
    Case("ip_addmm", lambda T, a, b, c: _ip(a, lambda y: y.addmm_(b, c, beta=0.5)), (3, 4),
         (3, 2), (2, 4)),
    Case("ip_index_add", lambda T, a, b: _ip(a, lambda y: y.index_add_(0, T.tensor([2, 0]), b)),
         (3, 4), (2, 4)),
    Case("ip_divide", lambda T, a, b: _ip(a, lambda y: y.divide_(b)), (3, 4), ("away", (3, 4))),
    # ---- sorting, selection, nan-reductions, scans ----
    Case("sort", lambda T, a: T.sort(a), ("grid", (3, 4))),
    Case("sort_desc_dim0", lambda T, a: a.sort(0, descending=True), ("grid", (3, 4))),
    Case("sort_stable", lambda T, a: T.sort(a, stable=True), ("grid", (2, 5))),
    Case("topk", lambda T, a: T.topk(a, 2), ("grid", (3, 4))),
    Case("topk_smallest_dim0", lambda T, a: a.topk(2, 0, largest=False), ("grid", (3, 4))),
    # k <= n / 4: found by a partition, then a sort of the k candidates
    Case("topk_partition", lambda T, a: T.topk(a, 3), ("grid", (4, 16))),
    Case("topk_partition_smallest_dim0", lambda T, a: a.topk(4, 0, largest=False),
         ("grid", (17, 3))),
    Case("kthvalue", lambda T, a: T.kthvalue(a, 2), ("grid", (3, 4))),
    Case("kthvalue_keepdim", lambda T, a: a.kthvalue(3, 0, keepdim=True), ("grid", (3, 4))),
    Case("median", lambda T, a: T.median(a), ("grid", (3, 4))),
    Case("median_dim", lambda T, a: a.median(1), ("grid", (3, 4))),
    Case("median_dim_keepdim", lambda T, a: T.median(a, 0, keepdim=True), ("grid", (3, 4))),
    Case("mode", lambda T, a: T.mode(a.repeat(1, 2)), ("grid", (3, 4))),
    Case("median_plain", lambda T, a: a.median(), (3, 4)),  # (and in float32)
    Case("aminmax_plain", lambda T, a: T.aminmax(a, dim=0), (3, 4)),
    Case("amax_plain", lambda T, a: a.amax(1), (3, 4)),
    Case("nansum", lambda T, a: T.nansum(a), (3, 4)),
    Case("nansum_dim", lambda T, a: a.nansum(1, keepdim=True), (3, 4)),
    Case("nanmean", lambda T, a: T.nanmean(a), (3, 4)),
    Case("nanmean_dim", lambda T, a: a.nanmean(0), (3, 4)),
    Case("std_mean", lambda T, a: T.std_mean(a, 1), (3, 4)),
    Case("std_mean_all", lambda T, a: T.std_mean(a), (3, 4)),
    Case("var_mean", lambda T, a: T.var_mean(a, 0, keepdim=True, correction=0), (3, 4)),
    Case("var_mean_only_mean", lambda T, a: T.var_mean(a, 1)[1], (3, 4)),
    Case("aminmax", lambda T, a: T.aminmax(a), ("grid", (3, 4))),
    Case("aminmax_dim", lambda T, a: T.aminmax(a, dim=1, keepdim=True), ("grid", (3, 4))),
    Case("cumprod", lambda T, a: T.cumprod(a, 1), ("away", (3, 4))),
    Case("cumprod_zeros", lambda T, a: (a * T.tensor([1.0, 0.0, 1.0, 1.0],
                                                     dtype=T.float64)).cumprod(1), (3, 4)),
    Case("cummax", lambda T, a: T.cummax(a, 1), ("grid", (3, 4))),
    Case("cummin", lambda T, a: a.cummin(0), ("grid", (3, 4))),
    Case("logcumsumexp", lambda T, a: T.logcumsumexp(a, 1), (3, 4)),
    Case("quantile", lambda T, a: T.quantile(a, 0.3), ("grid", (3, 4))),
    Case("quantile_dim0", lambda T, a: a.quantile(0.6, dim=0), ("grid", (3, 4))),
    Case("quantile_keepdim", lambda T, a: T.quantile(a, 0.5, dim=1, keepdim=True),
         ("grid", (3, 4))),
    Case("quantile_all_keepdim", lambda T, a: T.quantile(a, 0.9, keepdim=True), ("grid", (3, 4))),
    Case("quantile_q_dim", lambda T, a: T.quantile(a, T.tensor([0.25, 0.5], dtype=T.float64),
                                                   dim=1, keepdim=True), ("grid", (3, 4))),
    Case("nanquantile", lambda T, a: T.nanquantile(a, 0.4, dim=1), ("grid", (3, 4))),
    Case("quantile_q_all", lambda T, a: T.quantile(a, T.tensor([0.0, 0.7, 1.0],
                                                               dtype=T.float64)), ("grid", (2, 3))),
    # ---- scatter family and masks ----
    Case("scatter", lambda T, a, b: a.scatter(1, T.tensor(_I31), b), (3, 4), (3, 1)),
    Case("scatter_value", lambda T, a: T.scatter(a, 1, T.tensor(_I31), 2.0), (3, 4)),
    Case("scatter_add", lambda T, a, b: a.scatter_add(0, T.tensor([[0, 1, 0, 2]]), b), (3, 4),
         (1, 4)),
    Case("scatter_reduce_sum", lambda T, a, b: a.scatter_reduce(
        1, T.tensor([[0, 0], [1, 3], [2, 2]]), b, "sum"), (3, 4), (3, 2)),
    Case("scatter_reduce_mean", lambda T, a, b: a.scatter_reduce(
        1, T.tensor([[0, 0], [1, 3], [2, 2]]), b, "mean"), (3, 4), (3, 2)),
    Case("scatter_reduce_mean_noself", lambda T, a, b: T.scatter_reduce(
        a, 1, T.tensor([[0, 0], [1, 3], [2, 2]]), b, "mean", include_self=False), (3, 4),
         (3, 2)),
    Case("scatter_reduce_amax", lambda T, a, b: a.scatter_reduce(
        1, T.tensor([[0, 0], [1, 3], [2, 2]]), b, "amax"), ("grid", (3, 4)),
         ("grid", (3, 2), 0.1)),
    Case("scatter_reduce_amin_noself", lambda T, a, b: a.scatter_reduce(
        1, T.tensor([[0, 0], [1, 3], [2, 2]]), b, "amin", include_self=False),
         ("grid", (3, 4)), ("grid", (3, 2), 0.1)),
    Case("scatter_reduce_prod", lambda T, a, b: a.scatter_reduce(
        1, T.tensor([[0, 0], [1, 3], [2, 2]]), b, "prod"), ("away", (3, 4)), ("away", (3, 2))),
    Case("scatter_reduce_prod_zero", lambda T, a, b: a.scatter_reduce(
        1, T.tensor([[0, 0], [1, 3], [2, 2]]), b * T.tensor([[0.0, 1.0]], dtype=T.float64),
        "prod", include_self=False), ("away", (3, 4)), ("away", (3, 2))),
    Case("index_copy", lambda T, a, b: a.index_copy(0, T.tensor([2, 0]), b), (3, 4), (2, 4)),
    Case("index_fill", lambda T, a: T.index_fill(a, 1, T.tensor([0, 2]), -1.0), (3, 4)),
    Case("index_fill_tensor", lambda T, a, v: a.index_fill(1, T.tensor([3]), v), (3, 4), ()),
    Case("masked_select", lambda T, a: T.masked_select(a, T.tensor(base.M23)), (3, 4)),
    Case("masked_select_bcast", lambda T, a: a.masked_select(T.tensor([True, False, True,
                                                                       False])), (3, 4)),
    Case("masked_scatter", lambda T, a, b: a.masked_scatter(T.tensor(base.M23), b), (3, 4),
         (2, 4)),
    Case("ip_scatter", lambda T, a, b: _ip(a, lambda y: y.scatter_(1, T.tensor(_I31), b)),
         (3, 4), (3, 1)),
    Case("ip_index_fill", lambda T, a: _ip(a, lambda y: y.index_fill_(0, T.tensor([1]), 0.5)),
         (3, 4)),
    Case("ip_masked_scatter", lambda T, a, b: _ip(a, lambda y: y.masked_scatter_(
        T.tensor(base.M23), b)), (3, 4), (3, 4)),
    Case("repeat_interleave", lambda T, a: a.repeat_interleave(2, dim=0), (3, 4)),
    Case("repeat_interleave_flat", lambda T, a: T.repeat_interleave(a, 3), (2, 2)),
    Case("repeat_interleave_tensor", lambda T, a: a.repeat_interleave(T.tensor([1, 2, 0]), 0),
         (3, 4)),
    Case("take_along_dim_flat", lambda T, a: T.take_along_dim(a, T.tensor([0, 5, 11])), (3, 4)),
    # ---- triangles, diagonals, fused products ----
    Case("tril", lambda T, a: T.tril(a), (3, 4)),
    Case("tril_k", lambda T, a: a.tril(-1), (4, 3)),
    Case("triu", lambda T, a: T.triu(a, 1), (3, 4)),
    Case("triu_batched", lambda T, a: a.triu(), (2, 3, 3)),
    Case("diag_1d", lambda T, a: T.diag(a), (3,)),
    Case("diag_1d_offset", lambda T, a: T.diag(a, -1), (3,)),
    Case("diag_2d", lambda T, a: T.diag(a), (3, 4)),
    Case("diag_2d_offset", lambda T, a: a.diag(1), (3, 4)),
    Case("diag_embed", lambda T, a: T.diag_embed(a), (2, 3)),
    Case("diag_embed_dims", lambda T, a: T.diag_embed(a, 1, 0, 2), (2, 3)),
    Case("trace", lambda T, a: T.trace(a), (3, 4)),
    Case("baddbmm", lambda T, a, b, c: T.baddbmm(a, b, c), (2, 3, 4), (2, 3, 5), (2, 5, 4)),
    Case("baddbmm_scaled_bcast", lambda T, a, b, c: a.baddbmm(b, c, beta=0.5, alpha=2), (3, 4),
         (2, 3, 5), (2, 5, 4)),
    Case("addbmm", lambda T, a, b, c: T.addbmm(a, b, c, alpha=0.5), (3, 4), (2, 3, 5),
         (2, 5, 4)),
    Case("addmv", lambda T, a, b, c: T.addmv(a, b, c, beta=2), (3,), (3, 4), (4,)),
    Case("addr", lambda T, a, b, c: a.addr(b, c), (3, 4), (3,), (4,)),
    Case("ip_baddbmm", lambda T, a, b, c: _ip(a, lambda y: y.baddbmm_(b, c)), (2, 3, 4),
         (2, 3, 5), (2, 5, 4)),
    Case("roll", lambda T, a: T.roll(a, 1, 1), (3, 4)),
    Case("roll_dims", lambda T, a: a.roll((1, -2), (0, 1)), (3, 4)),
    Case("roll_flat", lambda T, a: T.roll(a, 5), (3, 4)),
    Case("rot90", lambda T, a: T.rot90(a), (3, 4)),
    Case("rot90_k", lambda T, a: a.rot90(3, (1, 2)), (2, 3, 4)),
    Case("rot90_neg", lambda T, a: T.rot90(a, -1, (1, 0)), (3, 4)),
    Case("block_diag", lambda T, a, b, c: T.block_diag(a, b, c), (2, 3), (3,), ()),
    Case("ip_clamp_min", lambda T, a: _ip(a, lambda y: y.clamp_min_(-0.3)), ("grid", (3, 4))),
    Case("ip_clamp_max", lambda T, a: _ip(a, lambda y: y.clamp_max_(0.3)), ("grid", (3, 4))),
    # ---- results without a derivative: torch's node refuses backward (values and nodes only) ----
    Case("unique_node", lambda T, a: T.unique(a.round(), return_counts=True), (3, 4),
         grad=False),
    Case("unique_dim_node", lambda T, a: T.unique(a, dim=1), (3, 4), grad=False),
    Case("unique_consecutive_node", lambda T, a: T.unique_consecutive(a), (3, 4), grad=False),
    Case("histogram_node", lambda T, a: T.histogram(a, 3), (3, 4), grad=False),
    Case("bincount_node", lambda T, i, w: T.bincount(i, w), ("int", (6,), 4), (6,), grad=False),
    Case("scatter_reduce_prod_zeros", lambda T, a, b: _two_zeros_src_grad(T, a, b),
         ("away", (3, 4)), ("away", (3, 2)), grad=False),
    # cdist's gradient under create_graph: CdistBackwardBackward0, which refuses backward
    Case("cdist_backward", lambda T, a, b: _loss_grad(T, lambda x, y: T.cdist(x, y, p=1.5), a, b,
                                                      1, go=True), (4, 3), (5, 3), grad=False),
    # ---- torch.linalg ----
    Case("linalg_inv", lambda T, a: T.linalg.inv(_spd(T, a)), (3, 3)),
    Case("inverse", lambda T, a: T.inverse(a), (2, 3, 3)),
    Case("linalg_det", lambda T, a: T.linalg.det(a), (3, 3)),
    Case("det_batched", lambda T, a: T.det(a), (2, 3, 3)),
    Case("linalg_slogdet", lambda T, a: T.linalg.slogdet(a), (3, 3)),
    Case("linalg_solve_vec", lambda T, a, b: T.linalg.solve(_spd(T, a), b), (3, 3), (3,)),
    Case("linalg_solve_mat", lambda T, a, b: T.linalg.solve(_spd(T, a), b), (3, 3), (3, 2)),
    Case("linalg_cholesky", lambda T, a: T.linalg.cholesky(_spd(T, a)), (3, 3)),
    Case("linalg_qr", lambda T, a: T.linalg.qr(a), (4, 3)),
    Case("linalg_qr_wide", lambda T, a: T.linalg.qr(a), (2, 4)),
    Case("linalg_qr_square_r_only", lambda T, a: T.linalg.qr(a).R, (3, 3)),
    Case("linalg_eigh", lambda T, a: _abs_vectors(T.linalg.eigh(_sym(T, a)), 1), (3, 3)),
    Case("linalg_eigvalsh", lambda T, a: T.linalg.eigvalsh(_sym(T, a)), (3, 3)),
    Case("linalg_svd", lambda T, a: _abs_vectors(T.linalg.svd(a, full_matrices=False), 0, 2),
         (4, 3)),
    Case("linalg_svd_wide", lambda T, a: _abs_vectors(T.linalg.svd(a, full_matrices=False), 0,
                                                      2), (3, 4)),
    Case("linalg_svd_full", lambda T, a: _abs_vectors(T.linalg.svd(a), 0, 2), (3, 3)),
    Case("linalg_svdvals", lambda T, a: T.linalg.svdvals(a), (4, 3)),
    Case("linalg_pinv", lambda T, a: T.linalg.pinv(a), (4, 3)),
    Case("linalg_pinv_wide", lambda T, a: T.linalg.pinv(a), (2, 3)),
    Case("matrix_power_3", lambda T, a: T.linalg.matrix_power(a, 3), (3, 3)),
    Case("matrix_power_5", lambda T, a: T.matrix_power(a, 5), (3, 3)),
    Case("matrix_power_neg", lambda T, a: T.linalg.matrix_power(_spd(T, a), -2), (3, 3)),
    Case("linalg_norm", lambda T, a: T.linalg.norm(a), (3, 4)),
    Case("linalg_norm_dim", lambda T, a: T.linalg.norm(a, dim=1), (3, 4)),
    Case("vector_norm_3", lambda T, a: T.linalg.vector_norm(a, 3, dim=0), ("grid", (3, 4))),
    Case("matrix_norm_fro", lambda T, a: T.linalg.matrix_norm(a), (3, 4)),
    Case("matrix_norm_nuc", lambda T, a: T.linalg.matrix_norm(a, "nuc"), (3, 4)),
    Case("matrix_norm_2", lambda T, a: T.linalg.matrix_norm(a, 2), (3, 4)),
    Case("matrix_norm_1", lambda T, a: T.linalg.matrix_norm(a, 1), ("grid", (3, 4))),
    Case("matrix_norm_inf", lambda T, a: T.linalg.matrix_norm(a, float("inf")), ("grid", (3, 4))),
]
CASES += ROWS



assert len({c.name for c in CASES}) == len(CASES), "duplicate case names"

FORWARD = [c.param("forward") for c in CASES]
NAMES = [c.param("grad_fn") for c in CASES]
GRAPH = [c.param("graph") for c in CASES]
GRAD = [c.param("grad") for c in CASES if c.grad]
CHECK = [c.param("gradcheck") for c in CASES if c.grad and c.check]
SECOND = [c.param("second") for c in CASES if c.grad and c.check]
F32 = [pytest.param(base._as_f32(c), id=c.name) for c in CASES
       if c.grad and not c.name.endswith("_const")]  # a float64 constant: dtypes then differ


@pytest.mark.parametrize("case", FORWARD)
def test_forward(case):
    base.test_forward(case)


@pytest.mark.parametrize("case", NAMES)
def test_grad_fn_name(case):
    base.test_grad_fn_name(case)


@pytest.mark.parametrize("device", base.DEVICES)
@pytest.mark.parametrize("case", FORWARD)
def test_on_device(case, device):
    """The same bodies with every tensor on `device` (cuda where a GPU is present)."""
    base.test_on_device(case, device)


def _graph_names(outs):
    """Node names of the whole graph behind `outs`, in breadth-first order from the outputs."""
    seen, names = set(), []
    todo = [o.grad_fn for o in outs if o.grad_fn is not None]
    while todo:
        fn = todo.pop(0)
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        names.append(type(fn).__name__)
        todo += [f for f, _ in fn.next_functions if f is not None]
    return names


@pytest.mark.parametrize("case", GRAPH)
def test_graph_names(case):
    """The decomposition shows PyTorch's nodes all the way down, not only at the output."""
    _, _, yn, yt = base._run(case)
    assert _graph_names(yn) == _graph_names(yt)


@pytest.mark.parametrize("case", GRAD)
def test_grad(case):
    base.test_grad(case)


@pytest.mark.parametrize("case", CHECK)
def test_gradcheck(case):
    base.test_gradcheck(case)


@pytest.mark.parametrize("case", SECOND)
def test_second_order_vs_torch(case):
    base.test_second_order_vs_torch(case)


@pytest.mark.parametrize("case", F32)
def test_float32_forward_and_grad(case):
    base.test_float32_forward_and_grad(case)


IP_METHODS = ("sin_ cos_ log1p_ rsqrt_ reciprocal_ sign_ erf_ log10_ log2_ exp2_ expm1_ sinh_ "
              "cosh_ asin_ acos_ atan_ erfinv_ floor_ ceil_ trunc_ frac_ sgn_ square_ nan_to_num_ "
              "arcsin_ fix_ absolute_ negative_ tril_ triu_ tan_ asinh_ atanh_ arcsinh_ arctanh_ "
              "sinc_ logit_").split()


@pytest.mark.parametrize("name", IP_METHODS)
def test_inplace_version_and_node(name):
    """Every in-place form: one version bump on the tensor and on a view of it, the node torch
    records, and torch's text on a leaf that requires grad."""
    res = []
    for T in (torch, nbgrad):
        a = T.tensor(np.linspace(0.1, 0.6, 6).reshape(2, 3), requires_grad=True)
        y = a * 1
        v = y[0]
        getattr(y, name)()
        try:
            getattr(a, name)()
            leaf = None
        except RuntimeError as e:
            leaf = str(e)
        res.append((y._version, v._version, type(y.grad_fn).__name__,
                    type(v.grad_fn).__name__, leaf, _fval(y)))
    assert _fsame(res[1], res[0])


def test_meshgrid_warns_without_indexing():
    for T in (torch, nbgrad):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            T.meshgrid(T.arange(2), T.arange(3))
        assert any("indexing argument" in str(x.message) for x in w), T.__name__


# ------------------------------------------------------------------------------------------------
# Functions without a gradient, and error texts: values, dtypes, shapes vs torch
# ------------------------------------------------------------------------------------------------
_X = np.random.default_rng(3).standard_normal((3, 4))
_R = np.array([[3, 1, 2, 1], [3, 1, 2, 1], [0, 5, 5, 0]])
_S = np.array([1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 1.0, 1.0])
_SEQ = np.array([1.0, 3.0, 5.0, 7.0, 9.0])

FUNCS = {
    # unique / unique_consecutive
    "unique": lambda T, x, r, s: T.unique(r),
    "unique_inverse_counts": lambda T, x, r, s: T.unique(r, return_inverse=True,
                                                         return_counts=True),
    "unique_counts": lambda T, x, r, s: r.unique(return_counts=True),
    "unique_float": lambda T, x, r, s: T.unique(s, return_inverse=True),
    "unique_dim0": lambda T, x, r, s: T.unique(r, dim=0, return_inverse=True,
                                               return_counts=True),
    "unique_dim1": lambda T, x, r, s: T.unique(r, dim=1, return_inverse=True,
                                               return_counts=True),
    "unique_bool": lambda T, x, r, s: T.unique(r > 1),
    "unique_unsorted": lambda T, x, r, s: T.unique(r, sorted=False, return_inverse=True),
    "unique_empty": lambda T, x, r, s: T.unique(T.tensor([], dtype=T.long), return_counts=True),
    "unique_consecutive": lambda T, x, r, s: T.unique_consecutive(s),
    "unique_consecutive_all": lambda T, x, r, s: T.unique_consecutive(
        s, return_inverse=True, return_counts=True),
    "unique_consecutive_2d": lambda T, x, r, s: T.unique_consecutive(r, return_inverse=True),
    "unique_consecutive_dim0": lambda T, x, r, s: T.unique_consecutive(
        r, dim=0, return_inverse=True, return_counts=True),
    "unique_consecutive_dim1": lambda T, x, r, s: r.unique_consecutive(
        dim=1, return_counts=True),
    # histograms and counting
    "histc": lambda T, x, r, s: T.histc(x, bins=5),
    "histc_range": lambda T, x, r, s: x.histc(4, min=-1, max=1),
    "histc_f32": lambda T, x, r, s: T.histc(x.float(), bins=3, min=-2, max=2),
    "histc_const": lambda T, x, r, s: T.histc(T.ones(4), bins=4),
    "histc_int_err": lambda T, x, r, s: T.histc(r, bins=4),
    "histogram": lambda T, x, r, s: T.histogram(x, 4),
    "histogram_range": lambda T, x, r, s: T.histogram(x, 5, range=(-1.0, 1.0)),
    "histogram_edges": lambda T, x, r, s: T.histogram(x, T.tensor([-2.0, -0.5, 0.0, 3.0],
                                                                  dtype=T.float64)),
    "histogram_weight": lambda T, x, r, s: T.histogram(x, 3, weight=x.abs()),
    "histogram_density": lambda T, x, r, s: T.histogram(x, 3, density=True),
    "histogram_fields": lambda T, x, r, s: T.histogram(x, 3).bin_edges,
    "histogram_method": lambda T, x, r, s: x.float().histogram(2).hist,
    "bincount": lambda T, x, r, s: T.bincount(r.reshape(-1)),
    "bincount_minlength": lambda T, x, r, s: r.reshape(-1).bincount(minlength=9),
    "bincount_weights": lambda T, x, r, s: T.bincount(r.reshape(-1), weights=x.reshape(-1)),
    "bincount_weights_f32": lambda T, x, r, s: T.bincount(r.reshape(-1),
                                                          weights=x.reshape(-1).float()),
    "bincount_neg_err": lambda T, x, r, s: T.bincount(T.tensor([1, -1])),
    "bincount_2d_err": lambda T, x, r, s: T.bincount(r),
    # searching
    "searchsorted": lambda T, x, r, s: T.searchsorted(T.tensor(_SEQ), x * 5),
    "searchsorted_right": lambda T, x, r, s: T.searchsorted(T.tensor(_SEQ), s * 3, right=True),
    "searchsorted_side": lambda T, x, r, s: T.searchsorted(T.tensor(_SEQ), s * 3, side="right"),
    "searchsorted_int32": lambda T, x, r, s: T.searchsorted(T.tensor(_SEQ), s, out_int32=True),
    "searchsorted_scalar": lambda T, x, r, s: T.searchsorted(T.tensor(_SEQ), 4.0),
    "searchsorted_nd": lambda T, x, r, s: T.searchsorted(T.tensor(np.sort(_X, 1)), x[:, :2]),
    "searchsorted_nd_err": lambda T, x, r, s: T.searchsorted(T.tensor(np.sort(_X, 1)), s),
    "searchsorted_sorter": lambda T, x, r, s: T.searchsorted(
        T.tensor([5.0, 1.0, 3.0]), T.tensor([2.0, 6.0]), sorter=T.tensor([1, 2, 0])),
    "searchsorted_bad_side": lambda T, x, r, s: T.searchsorted(T.tensor(_SEQ), s, side="up"),
    "bucketize": lambda T, x, r, s: T.bucketize(s * 3, T.tensor(_SEQ)),
    "bucketize_right": lambda T, x, r, s: T.bucketize(s * 3, T.tensor(_SEQ), right=True),
    "bucketize_int32": lambda T, x, r, s: T.bucketize(x * 5, T.tensor(_SEQ), out_int32=True),
    # sorting indices
    "argsort": lambda T, x, r, s: T.argsort(x),
    "argsort_dim0_desc": lambda T, x, r, s: x.argsort(0, descending=True),
    "argsort_stable": lambda T, x, r, s: T.argsort(s, stable=True),
    "argsort_stable_desc": lambda T, x, r, s: T.argsort(s, descending=True, stable=True),
    "argsort_int": lambda T, x, r, s: T.argsort(r, dim=1, stable=True),
    "argsort_0d": lambda T, x, r, s: T.argsort(T.tensor(2.0)),
    # indices of nonzero, one-argument where
    "nonzero": lambda T, x, r, s: T.nonzero(r),
    "nonzero_tuple": lambda T, x, r, s: r.nonzero(as_tuple=True),
    "nonzero_0d": lambda T, x, r, s: T.nonzero(T.tensor(3)),
    "nonzero_0d_zero": lambda T, x, r, s: T.nonzero(T.tensor(0.0)),
    "nonzero_0d_tuple": lambda T, x, r, s: T.nonzero(T.tensor(3), as_tuple=True),
    "where1": lambda T, x, r, s: T.where(x > 0),
    # logic and tests
    "isfinite": lambda T, x, r, s: T.isfinite(T.tensor([1.0, float("inf"), float("nan")])),
    "isinf": lambda T, x, r, s: T.tensor([1.0, -float("inf"), float("nan")]).isinf(),
    "isnan": lambda T, x, r, s: T.isnan(T.tensor([1.0, float("inf"), float("nan")])),
    "isfinite_int": lambda T, x, r, s: T.isfinite(r),
    "isclose": lambda T, x, r, s: T.isclose(x, x + 1e-6, rtol=0, atol=1e-5),
    "isclose_nan": lambda T, x, r, s: T.isclose(T.tensor([float("nan")]),
                                                T.tensor([float("nan")]), equal_nan=True),
    "logical_and": lambda T, x, r, s: T.logical_and(x > 0, r > 1),
    "logical_or_float": lambda T, x, r, s: T.logical_or(x, T.zeros(4)),
    "logical_xor": lambda T, x, r, s: (x > 0).logical_xor(r > 1),
    "logical_not": lambda T, x, r, s: T.logical_not(r),
    "bitwise_and": lambda T, x, r, s: T.bitwise_and(r, 6),
    "bitwise_or": lambda T, x, r, s: r | T.tensor(8),
    "bitwise_xor": lambda T, x, r, s: T.bitwise_xor(r, r.flip(0)),
    "bitwise_not": lambda T, x, r, s: ~r,
    "bitwise_not_bool": lambda T, x, r, s: T.bitwise_not(r > 1),
    "bitwise_float_err": lambda T, x, r, s: T.bitwise_and(x, x),
    # reductions to bool / counts
    "any": lambda T, x, r, s: T.any(r > 4),
    "any_dim": lambda T, x, r, s: (r > 4).any(1),
    "any_keepdim": lambda T, x, r, s: (r > 4).any(0, keepdim=True),
    "all_dim": lambda T, x, r, s: T.all(r > 0, dim=1),
    "all_float": lambda T, x, r, s: T.all(x),
    "count_nonzero": lambda T, x, r, s: T.count_nonzero(r),
    "count_nonzero_dim": lambda T, x, r, s: T.count_nonzero(r, dim=0),
    "count_nonzero_dims": lambda T, x, r, s: r.count_nonzero((0, 1)),
    # rows of issue 9 on special values, integers and bad arguments
    "sort_nan": lambda T, x, r, s: T.sort(T.tensor([2.0, float("nan"), -1.0, 3.0])),
    "sort_desc_nan": lambda T, x, r, s: T.tensor([2.0, float("nan"), -1.0]).sort(descending=True),
    "sort_int": lambda T, x, r, s: T.sort(r, 1),
    "sort_bool_desc": lambda T, x, r, s: (r > 1).sort(1, descending=True),
    "argsort_nan_desc": lambda T, x, r, s: T.argsort(T.tensor([2.0, float("nan"), -1.0]),
                                                     descending=True),
    "topk_k_err": lambda T, x, r, s: T.topk(x, 9),
    "kthvalue_k_err": lambda T, x, r, s: x.kthvalue(0),
    "median_even": lambda T, x, r, s: T.median(T.tensor([4.0, 1.0, 3.0, 2.0])),
    "median_int": lambda T, x, r, s: r.median(1),
    "mode_ties": lambda T, x, r, s: T.mode(T.tensor([[1, 2, 2, 1, 3], [5, 5, 4, 4, 4]])),
    "nansum_nan": lambda T, x, r, s: T.nansum(T.tensor([1.0, float("nan"), 2.0])),
    "nanmean_nan": lambda T, x, r, s: T.tensor([[1.0, float("nan")], [2.0, 4.0]]).nanmean(0),
    "cummax_ties": lambda T, x, r, s: T.cummax(T.tensor([1.0, 3.0, 3.0, 2.0, 3.0]), 0),
    "cummin_int": lambda T, x, r, s: T.cummin(r, 1),
    "cumprod_int": lambda T, x, r, s: r.cumprod(1),
    "aminmax_int": lambda T, x, r, s: T.aminmax(r),
    "logcumsumexp_inf": lambda T, x, r, s: T.logcumsumexp(T.tensor([-float("inf"), 0.0]), 0),
    "quantile_q_err": lambda T, x, r, s: T.quantile(x, 1.5),
    "quantile_nan": lambda T, x, r, s: T.quantile(T.tensor([[1.0, float("nan"), 3.0],
                                                            [1.0, 2.0, 4.0]]), 0.5, dim=1),
    "nanquantile": lambda T, x, r, s: T.nanquantile(T.tensor([[1.0, float("nan"), 3.0],
                                                              [float("nan")] * 3]),
                                                    T.tensor([0.25, 0.5]), dim=1),
    "floor_int": lambda T, x, r, s: T.floor(r),
    "round_half_even": lambda T, x, r, s: T.round(T.tensor([0.5, 1.5, 2.5, -0.5])),
    "round_decimals_neg": lambda T, x, r, s: T.round(x * 1000, decimals=-2),
    "remainder_int": lambda T, x, r, s: T.remainder(r - 2, 3),
    "remainder_neg": lambda T, x, r, s: T.tensor([-3.0, 3.0]) % T.tensor([2.0, -2.0]),
    "fmod_int": lambda T, x, r, s: T.fmod(r - 2, 3),
    "fmod_neg": lambda T, x, r, s: T.fmod(T.tensor([-3.0, 3.0]), 2.0),
    "nan_to_num_values": lambda T, x, r, s: T.nan_to_num(T.tensor([float("nan"), float("inf"),
                                                                   -float("inf"), 1.0])),
    "nan_to_num_args": lambda T, x, r, s: T.tensor([float("nan"), float("inf")]).nan_to_num(
        1.0, posinf=2.0),
    "xlogy_zero": lambda T, x, r, s: T.xlogy(T.tensor([0.0, 0.0, 1.0]),
                                             T.tensor([0.0, float("nan"), 2.0])),
    "erfinv_edges": lambda T, x, r, s: T.erfinv(T.tensor([-1.0, 1.0, 0.0, 0.5, 1.5])),
    "logit_edges": lambda T, x, r, s: T.logit(T.tensor([-0.5, 0.0, 0.25, 1.0, 1.5, 1e-30])),
    "logit_eps_edges": lambda T, x, r, s: T.tensor([-0.5, 0.0, 0.1, 0.5, 1.0]).logit(0.2),
    "logit_int": lambda T, x, r, s: T.logit(r),
    "sinc_edges": lambda T, x, r, s: T.sinc(T.tensor([0.0, -0.0, 1e-30, 1.0, -2.5, 100.3])),
    "atanh_edges": lambda T, x, r, s: T.atanh(T.tensor([-1.0, 1.0, 1.5, 0.999999])),
    "acosh_edges": lambda T, x, r, s: T.acosh(T.tensor([0.5, 1.0, 1e30])),
    "asinh_int": lambda T, x, r, s: T.asinh(r),
    "asinh_inplace_backward": lambda T, x, r, s: T.autograd.grad(
        (x.requires_grad_() * 1).asinh_().sum(), x),
    "atanh_inplace_backward": lambda T, x, r, s: T.autograd.grad(
        (x.requires_grad_() * 0.1).atanh_().sum(), x),
    "log2_int": lambda T, x, r, s: T.log2(r + 1),
    "atan2_int": lambda T, x, r, s: T.atan2(x, x * 2),
    "logaddexp_inf": lambda T, x, r, s: T.logaddexp(T.tensor([-float("inf"), 1.0]),
                                                    T.tensor([-float("inf"), float("inf")])),
    "clamp_tensor_crossed": lambda T, x, r, s: x.clamp(T.ones(4), T.zeros(4)),
    "tril_1d_err": lambda T, x, r, s: T.tril(s),
    "tril_int": lambda T, x, r, s: r.triu(-1),
    "diag_3d_err": lambda T, x, r, s: T.diag(x[None]),
    "trace_3d_err": lambda T, x, r, s: T.trace(x[None]),
    "diag_embed_same_dims": lambda T, x, r, s: T.diag_embed(x, 0, 1, 1),
    "baddbmm_beta0_nan": lambda T, x, r, s: T.baddbmm(T.full((2, 2, 2), float("nan"),
                                                             dtype=T.float64),
                                                      x[None, :2, :3].expand(2, 2, 3),
                                                      x[None, :3, :2].expand(2, 3, 2), beta=0),
    "bmm_shape_err": lambda T, x, r, s: T.baddbmm(x, x[None], x[None]),
    "scatter_reduce_prod": lambda T, x, r, s: x.scatter_reduce(1, T.tensor([[0, 0], [1, 1],
                                                                             [2, 3]]),
                                                               x[:, :2], "prod"),
    "scatter_reduce_bad": lambda T, x, r, s: x.scatter_reduce(1, T.tensor(_I31), x, "max"),
    "scatter_int": lambda T, x, r, s: r.scatter(1, T.tensor(_I31), 7),
    "index_fill_int": lambda T, x, r, s: r.index_fill(0, T.tensor([0, 2]), -1),
    "masked_select_int": lambda T, x, r, s: T.masked_select(r, r > 1),
    "masked_scatter_values": lambda T, x, r, s: T.zeros(2, 3).masked_scatter(
        T.tensor([[True, False, True], [False, True, False]]), T.arange(6.0).reshape(2, 3)),
    "repeat_interleave_counts": lambda T, x, r, s: T.repeat_interleave(T.tensor([2, 0, 1])),
    "roll_int": lambda T, x, r, s: T.roll(r, -1, 0),
    "roll_align_err": lambda T, x, r, s: T.roll(x, (1, 2), 0),
    "rot90_err": lambda T, x, r, s: T.rot90(x, 1, (0, 0)),
    "block_diag_int": lambda T, x, r, s: T.block_diag(r[:1], T.tensor([[7]])),
    "linalg_inv_batch": lambda T, x, r, s: T.linalg.inv(x[:3, :3][None].expand(2, 3, 3)),
    "linalg_det_nonsquare": lambda T, x, r, s: T.linalg.det(x),
    "linalg_norm_ord": lambda T, x, r, s: T.linalg.norm(x, 1, dim=1),
    "linalg_vector_norm_inf": lambda T, x, r, s: T.linalg.vector_norm(x, float("inf")),
    "linalg_matrix_norm_neg2": lambda T, x, r, s: T.linalg.matrix_norm(x, -2),
    "linalg_solve_left": lambda T, x, r, s: T.linalg.solve(x[:3, :3], x[:3], left=True),
    "linalg_eigvalsh": lambda T, x, r, s: T.linalg.eigvalsh(x[:3, :3] + x[:3, :3].T),
    "matrix_power_0": lambda T, x, r, s: T.linalg.matrix_power(x[:3, :3], 0),
    "matrix_power_1": lambda T, x, r, s: T.matrix_power(x[:3, :3], 1),
    "logdet": lambda T, x, r, s: T.logdet(x[:3, :3] @ x[:3, :3].T),
    # einsum / tensordot / movedim errors, in PyTorch's words
    "einsum_few_ops": lambda T, x, r, s: T.einsum("ij,jk->ik", x),
    "einsum_many_ops": lambda T, x, r, s: T.einsum("ij->ij", x, x),
    "einsum_bad_rank": lambda T, x, r, s: T.einsum("ijk->i", x),
    "einsum_bad_char": lambda T, x, r, s: T.einsum("i1->i", x),
    "einsum_bad_out": lambda T, x, r, s: T.einsum("ij->k", x),
    "einsum_twice_out": lambda T, x, r, s: T.einsum("ij->ii", x),
    "einsum_size": lambda T, x, r, s: T.einsum("ij,ij->", x, x.t()),
    "einsum_diag_size": lambda T, x, r, s: T.einsum("ii->", x),
    "einsum_int": lambda T, x, r, s: T.einsum("ij,kj->ik", r, r),
    "tensordot_mismatch": lambda T, x, r, s: T.tensordot(x, x, dims=([0], [1])),
    "tensordot_lens": lambda T, x, r, s: T.tensordot(x, x, dims=([0], [1, 0])),
    "movedim_lens": lambda T, x, r, s: T.movedim(x, (0, 1), (1,)),
    "kron_int": lambda T, x, r, s: T.kron(r, r[:2, :2]),
    "broadcast_tensors_err": lambda T, x, r, s: T.broadcast_tensors(x, s),
    "broadcast_shapes": lambda T, x, r, s: tuple(T.broadcast_shapes((2, 1), (3,), 1)),
    "cartesian_prod_1": lambda T, x, r, s: T.cartesian_prod(s),
}

# torch records a node that refuses backward on these; nbgrad records none yet (a row, later)
UNIQUE_NODE = {"unique": "Unique2Backward0", "unique_dim": "UniqueDimBackward0",
               "unique_consecutive": "UniqueConsecutiveBackward0"}


def _call(name, T):
    try:
        with np.errstate(all="ignore"):
            return _fval(FUNCS[name](T, T.tensor(_X.copy()), T.tensor(_R.copy()),
                                     T.tensor(_S.copy())))
    except (RuntimeError, TypeError, IndexError, ValueError, NotImplementedError) as e:
        return (type(e).__name__, str(e).replace("torch.", "nbgrad."))


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_function_vs_torch(name):
    t, n = _call(name, torch), _call(name, nbgrad)
    assert _fsame(n, t), (n, t)


# Inputs that require grad: outputs of these functions carry no graph (as torch), except where
# torch records a node that refuses backward.
NOGRAD = {
    "argsort": lambda T, x: T.argsort(x),
    "searchsorted": lambda T, x: T.searchsorted(T.tensor(np.sort(_X[0])), x),
    "bucketize": lambda T, x: T.bucketize(x, T.tensor([0.0, 1.0], dtype=T.float64)),
    "histogram": lambda T, x: T.histogram(x, 3),
    "isclose": lambda T, x: T.isclose(x, x),
    "nonzero": lambda T, x: T.nonzero(x),
    "count_nonzero": lambda T, x: T.count_nonzero(x),
    "histc": lambda T, x: T.histc(x, 3),
    "unique_inverse": lambda T, x: T.unique(x, return_inverse=True)[1:],
}
# torch records a node whose backward refuses (Unique2Backward0, NotImplemented, ...)
REFUSING = {
    "unique": lambda T, x: T.unique(x),
    "unique_dim": lambda T, x: T.unique(x[None], dim=0),
    "unique_consecutive": lambda T, x: T.unique_consecutive(x),
    "histogram": lambda T, x: T.histogram(x, 3),
    "bincount_weights": lambda T, x: T.bincount(T.tensor([1, 0, 2, 2]), weights=x[:4]),
}
NOGRAD.update(REFUSING)


@pytest.mark.parametrize("name", sorted(REFUSING))
def test_backward_refused_as_torch(name):
    res = []
    for T in (torch, nbgrad):
        x = T.tensor(_X[0].copy(), requires_grad=True)
        try:
            _outs(REFUSING[name](T, x))[0].sum().backward()
            res.append(None)
        except (RuntimeError, NotImplementedError) as e:
            res.append((type(e).__name__, str(e)))
    assert res[1] == res[0]


@pytest.mark.parametrize("f", [NOGRAD[k] for k in sorted(NOGRAD)], ids=sorted(NOGRAD))
def test_graph_of_nondifferentiable(f):
    res = []
    for T in (torch, nbgrad):
        x = T.tensor(_X[0].copy(), requires_grad=True)
        outs = _outs(f(T, x))
        res.append([(o.requires_grad, None if o.grad_fn is None else type(o.grad_fn).__name__)
                    for o in outs])
    assert res[1] == res[0]


def test_einsum_values_match_numpy_on_random_equations():
    """Random two-operand contractions (some labels shared, summed, broadcast) vs torch."""
    rng = np.random.default_rng(11)
    letters = "abcde"
    for _ in range(40):
        la = "".join(rng.choice(list(letters), rng.integers(1, 4), replace=False))
        lb = "".join(rng.choice(list(letters), rng.integers(1, 4), replace=False))
        both = sorted(set(la) | set(lb))
        out = "".join(c for c in both if rng.random() < 0.5)
        size = {c: int(rng.integers(1, 4)) for c in letters}
        eq = f"{la},{lb}->{out}"
        xa = rng.standard_normal([size[c] for c in la])
        xb = rng.standard_normal([size[c] for c in lb])
        res = []
        for T in (torch, nbgrad):
            a = T.tensor(xa, requires_grad=True)
            b = T.tensor(xb, requires_grad=True)
            y = T.einsum(eq, a, b)
            y.sum().backward()
            names = _graph_names([y])
            res.append((_fval(y), _fval(a.grad), _fval(b.grad), names))
        assert _fsame(res[1][:3], res[0][:3]), eq
        assert res[1][3] == res[0][3], eq
