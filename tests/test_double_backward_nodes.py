"""Gradients built under create_graph carry PyTorch's nodes (issue 9).

PyTorch's backward formulas are ops themselves: a named backward function records one node
(tanh_backward -> TanhBackwardBackward0, slice_backward -> SliceBackwardBackward0), a formula
written with ordinary ops records theirs (sum's gradient: UnsqueezeBackward0 then
ExpandBackward0; mean's: ExpandBackward0 then DivBackward1). For each case below, in torch and in
nbgrad: the first gradient's graph three levels down (node names), and where the row's backward op
has derivative formulas of its own (a `double=` row with formulas), the second gradient's graph
too; the first, second and third derivatives' values; and gradgradcheck against finite
differences.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nbgrad
from nbgrad.autograd import gradgradcheck
from _differential import _graph

X = [[0.3, -1.2, 2.5, -0.4], [1.1, 0.7, -2.2, 0.05]]
_TARGET = np.linspace(-1, 1, 8).reshape(2, 4)


# name: (f(T, F, x) -> tensor, whether the second gradient's graph is compared too)
CASES = {
    # named backward ops (PyTorch's *_backward functions)
    "tanh": (lambda T, F, x: x.tanh(), True),
    "sigmoid": (lambda T, F, x: x.sigmoid(), True),
    "relu": (lambda T, F, x: x.relu(), True),
    "relu_of_product": (lambda T, F, x: (x * x).relu(), True),
    "relu_": (lambda T, F, x: (x * 1).relu_(), True),
    "gelu": (lambda T, F, x: F.gelu(x), True),
    "gelu_tanh": (lambda T, F, x: F.gelu(x, approximate="tanh"), True),
    "elu": (lambda T, F, x: F.elu(x), True),
    "elu_alpha": (lambda T, F, x: F.elu(x, alpha=0.7), True),
    "selu": (lambda T, F, x: F.selu(x), True),
    "elu_inplace": (lambda T, F, x: F.elu(x * 1, inplace=True), True),
    # formulas of ordinary ops (PyTorch's infinitely_differentiable_silu/mish_backward)
    "silu": (lambda T, F, x: F.silu(x), True),
    "mish": (lambda T, F, x: F.mish(x), True),
    "leaky_relu": (lambda T, F, x: F.leaky_relu(x, 0.1), True),
    "softplus": (lambda T, F, x: F.softplus(x), True),
    "softplus_beta": (lambda T, F, x: F.softplus(x, beta=2.0, threshold=3.0), True),
    "hardtanh": (lambda T, F, x: F.hardtanh(x), True),
    "threshold": (lambda T, F, x: F.threshold(x, 0.5, -1.0), True),
    "hardshrink": (lambda T, F, x: F.hardshrink(x, 0.5), True),
    "softshrink": (lambda T, F, x: F.softshrink(x, 0.5), True),
    "celu": (lambda T, F, x: F.celu(x, alpha=1.3), True),
    "avg_pool": (lambda T, F, x: F.avg_pool1d(x[None], 2), True),
    "adaptive_avg_pool": (lambda T, F, x: F.adaptive_avg_pool2d(x[None, None], (1, 2)), True),
    "reflection_pad": (lambda T, F, x: F.pad(x[None], (1, 1), mode="reflect"), True),
    "upsample": (lambda T, F, x: F.interpolate(x[None], scale_factor=2), True),
    "pixel_shuffle": (lambda T, F, x: F.pixel_shuffle(x.reshape(1, 4, 1, 2), 2), True),
    "hardswish": (lambda T, F, x: F.hardswish(x), True),
    "hardswish_wide": (lambda T, F, x: F.hardswish(x * 2), True),
    "logsigmoid": (lambda T, F, x: F.logsigmoid(x), True),
    "softmax": (lambda T, F, x: F.softmax(x, 1), True),
    "softmax_dim0": (lambda T, F, x: F.softmax(x * 2, 0), True),
    "log_softmax": (lambda T, F, x: F.log_softmax(x, 1), True),
    "log_softmax_dim0": (lambda T, F, x: F.log_softmax(x * 2, 0), True),
    "slice": (lambda T, F, x: (x * x)[1:], True),
    "slice_step": (lambda T, F, x: (x * x)[:, ::2], True),
    "narrow": (lambda T, F, x: (x * x).narrow(1, 1, 2), True),
    "select": (lambda T, F, x: (x * x)[0], True),
    "select_then_slice": (lambda T, F, x: (x * x)[1][1:], True),
    # formulas of ordinary ops
    "sum_dim": (lambda T, F, x: (x * x).sum(1), True),
    "sum_dims": (lambda T, F, x: (x * x).unsqueeze(0).sum((0, 2)), True),
    "sum_keepdim": (lambda T, F, x: (x * x).sum(0, keepdim=True), True),
    "sum": (lambda T, F, x: (x * x).sum(), True),
    "mean": (lambda T, F, x: (x * x).mean(), True),
    "mean_dim": (lambda T, F, x: (x * x).mean(0), True),
    "var": (lambda T, F, x: x.var(1), True),
    "var_all": (lambda T, F, x: x.var(), True),
    "std": (lambda T, F, x: x.std(0), False),
    # glu_backward: GluBackwardBackward0(grad_output, self); glu_double_backward{,_grad_output}
    "glu": (lambda T, F, x: F.glu(x, 1), True),
    "glu_dim0": (lambda T, F, x: F.glu(x * 2, 0), True),
    "glu_last": (lambda T, F, x: F.glu(x.reshape(2, 2, 2), -1), True),
    # linear algebra under create_graph: det's and slogdet's gradient solve(A^H, (d I)^H), and
    # solve's (LinalgSolveExBackward0), matrix_to_vector's squeeze for a vector right side
    "det": (lambda T, F, x: T.linalg.det(x[:, :2] * 1), True),
    "slogdet": (lambda T, F, x: T.linalg.slogdet(x[:, :2] * 1)[1], True),
    "solve": (lambda T, F, x: T.linalg.solve(x[:, :2] * 1, x[:, 2:] * 1), True),
    "solve_vector": (lambda T, F, x: T.linalg.solve(x[:, :2] * 1, x[:, 2] * 1), True),
    # cholesky's gradient: torch's cholesky_backward, two triangular solves
    # (LinalgSolveTriangularBackward0, with linalg_solve_triangular_backward)
    "cholesky": (lambda T, F, x: T.linalg.cholesky(x[:, :2] @ x[:, :2].t() + T.eye(
        2, dtype=T.float64)), True),
    "cholesky_of_product": (lambda T, F, x: T.linalg.cholesky(x @ x.t() * 0.5 + T.eye(
        2, dtype=T.float64)) * x[:, :2], True),
    # (batched: the matmul's fused nodes, expanded under create_graph, tie with another node's
    # sequence number, which made the engine's heap compare two nodes: TypeError)
    "cholesky_batched": (lambda T, F, x: T.linalg.cholesky(
        x.reshape(2, 2, 2) @ x.reshape(2, 2, 2).transpose(-2, -1) + T.eye(2, dtype=T.float64)),
        False),
    # prod_backward without zeros: grad * (result / self), the saved result unsqueezed
    "prod": (lambda T, F, x: x.prod(1), True),
    "prod_all": (lambda T, F, x: x.prod(), True),
    "prod_keepdim": (lambda T, F, x: x.prod(0, keepdim=True), True),
    "prod_with_zero": (lambda T, F, x: (x * T.tensor([[1.0, 0, 1, 1], [1, 1, 1, 1]],
                                                     dtype=T.float64)).prod(1), True),
    "squeeze": (lambda T, F, x: (x * x).unsqueeze(1).squeeze(), True),
    "squeeze_dim": (lambda T, F, x: (x * x)[None].squeeze(0), True),
    "unsqueeze": (lambda T, F, x: (x * x).unsqueeze(1), True),
    "t": (lambda T, F, x: (x * x).t(), True),
    "expand": (lambda T, F, x: (x * x)[:1].expand(3, 4), True),
    "diagonal": (lambda T, F, x: (x * x).diagonal(1), False),
    "unfold": (lambda T, F, x: (x * x).unfold(1, 2, 1), False),
    "as_strided": (lambda T, F, x: (x * x).as_strided((2, 2), (4, 1), 1), True),
    "copy_slices": (lambda T, F, x: _write_view(x), True),
    "copy_slices_tanh": (lambda T, F, x: _write_view_tanh(x), False),
    "view_after_write": (lambda T, F, x: _view_after_write(x), True),
    # losses whose backward is an op of its own with two tensor inputs (mse_loss_backward:
    # MseLossBackwardBackward0(grad_output, self, target)), and its derivatives' nodes
    "mse_loss": (lambda T, F, x: F.mse_loss(x, T.tensor(_TARGET)), True),
    "mse_loss_both": (lambda T, F, x: F.mse_loss(x, x.flip(0)), True),
    "mse_loss_none": (lambda T, F, x: F.mse_loss(x, T.tensor(_TARGET), reduction="none"), True),
    "smooth_l1_loss": (lambda T, F, x: F.smooth_l1_loss(x, T.tensor(_TARGET), beta=0.7), True),
    "smooth_l1_loss_both": (lambda T, F, x: F.smooth_l1_loss(x, x.flip(1), reduction="sum"),
                            True),
    "huber_loss": (lambda T, F, x: F.huber_loss(x, T.tensor(_TARGET), delta=0.7), True),
    "huber_loss_none": (lambda T, F, x: F.huber_loss(x, x.flip(0), reduction="none"), True),
    # nll_loss_backward: NllLossBackwardBackward0(grad_output, self), whose derivative in
    # grad_output is nll_loss again (and zeros in self)
    "nll_loss": (lambda T, F, x: F.nll_loss(x, T.tensor([1, 3])), True),
    "nll_loss_none": (lambda T, F, x: F.nll_loss(x, T.tensor([1, 3]), reduction="none"), True),
    "nll_loss_weight": (lambda T, F, x: F.nll_loss(x, T.tensor([1, 3]), weight=T.tensor(
        [0.5, 1.0, 2.0, 1.5], dtype=T.float64), reduction="sum"), True),
    # embedding_dense_backward: EmbeddingDenseBackwardBackward0(grad_output), whose derivative
    # picks the rows again (index_select, masked_fill at padding_idx, view)
    "embedding": (lambda T, F, x: F.embedding(T.tensor([1, 0, 1]), x), True),
    "embedding_padding": (lambda T, F, x: F.embedding(T.tensor([[1, 0], [1, 0], [0, 0]]), x,
                                                      padding_idx=0), True),
    # max_pool2d_with_indices_backward: MaxPool2DWithIndicesBackwardBackward0(grad_output, self)
    "max_pool2d": (lambda T, F, x: F.max_pool2d(x[None, None], (1, 2)), True),
    "max_pool2d_overlap": (lambda T, F, x: F.max_pool2d(x.reshape(1, 2, 2, 2), 2, 1, 1), True),
    "max_pool1d": (lambda T, F, x: F.max_pool1d(x[None], 2), True),
    # _prelu_kernel_backward: PreluKernelBackwardBackward0(grad_output, self, weight), one node
    # for both gradients (its outputs 0 and 1), the weight's summed back to its shape
    "prelu": (lambda T, F, x: F.prelu(x, x[0, :1] * 1), True),
    "prelu_channels": (lambda T, F, x: F.prelu(x.reshape(2, 2, 2), x[1, 1:3] * 1), True),
    "prelu_constant_weight": (lambda T, F, x: F.prelu(x * 2, T.tensor([0.25],
                                                                      dtype=T.float64)), True),
    # binary_cross_entropy_backward: BinaryCrossEntropyBackwardBackward0(grad_output, self,
    # target), derivatives.yaml's binary_cross_entropy_double_backward{,_grad_output,_target}
    "bce": (lambda T, F, x: F.binary_cross_entropy(x.sigmoid(), T.tensor(abs(_TARGET))), True),
    "bce_sum": (lambda T, F, x: F.binary_cross_entropy(x.sigmoid(), T.tensor(abs(_TARGET)),
                                                       reduction="sum"), True),
    "bce_none": (lambda T, F, x: F.binary_cross_entropy(x.sigmoid(), T.tensor(abs(_TARGET)),
                                                        reduction="none"), True),
    "bce_weight": (lambda T, F, x: F.binary_cross_entropy(
        x.sigmoid(), T.tensor(abs(_TARGET)), weight=T.tensor(_TARGET + 2)), True),
    # convolution_backward: ConvolutionBackwardBackward0(grad_output, input, weight), one node
    # for the three gradients; its derivatives are _convolution_double_backward's convolutions
    # (ConvolutionBackward0, transposed for the input's, per group for the weight's)
    "conv2d": (lambda T, F, x: F.conv2d(x[None, None], x[None, None, :, :2] * 1), True),
    "conv2d_bias": (lambda T, F, x: F.conv2d(x.reshape(1, 2, 2, 2), T.tensor(
        _TARGET.reshape(2, 1, 2, 2).repeat(2, 1).reshape(4, 2, 1, 2)), x[0] * 1, padding=1),
        True),
    "conv2d_groups": (lambda T, F, x: F.conv2d(x.reshape(1, 2, 2, 2).repeat(1, 1, 2, 2),
                                               x.reshape(4, 1, 1, 2), None, stride=2,
                                               padding=(1, 0), groups=2), True),
    "conv1d": (lambda T, F, x: F.conv1d(x.reshape(1, 2, 4).repeat(1, 1, 2), x.reshape(4, 1, 2),
                                        x[0] * 1, stride=2, padding=1, groups=2), True),
    "nll_of_log_softmax": (lambda T, F, x: F.nll_loss(F.log_softmax(x, 1), T.tensor([0, 2])),
                           False),
}


# core bug (on main before this work too): the third derivative through an in-place op's saved
# output on a temporary view (y[0].tanh_()) reaches the op's node directly after its CopySlices
# freed it, and raises "backward through the graph a second time"; PyTorch computes it
_THIRD_ORDER_BUG = {"copy_slices_tanh"}


def _param(name):
    marks = pytest.mark.xfail(reason="core bug: third order through a freed CopySlices fn",
                              strict=True) if name in _THIRD_ORDER_BUG else ()
    return pytest.param(name, id=name, marks=marks)


NAMES = [_param(n) for n in sorted(CASES)]


def _write_view(x):
    y = x * 1
    y[:, 1:3].mul_(x[:, :2])
    return y


def _write_view_tanh(x):
    y = x * 2
    y[0].tanh_()
    return y


def _view_after_write(x):
    y = x * 1
    v = y[1:]
    v.clamp_(-1, 1)
    return v


def grads_of(T, f):
    """(first gradient, second, third) of case f(T, F, x) at X, each order recorded."""
    F = T.nn.functional
    x = T.tensor(X, dtype=T.float64, requires_grad=True)
    y = f(T, F, x)
    w = T.tensor(np.linspace(0.5, 1.5, y.numel()).reshape(tuple(y.shape)))
    g, = T.autograd.grad((y * y * w).sum(), x, create_graph=True)
    h, = T.autograd.grad((g * g).sum(), x, create_graph=True)
    third, = T.autograd.grad(h.sum(), x, allow_unused=True)
    return g, h, third


def _grads(T, name):
    return grads_of(T, CASES[name][0])


def assert_orders_like_torch(f):
    """Case f's first, second and third gradients equal torch's."""
    for a, b in zip(grads_of(nbgrad, f), grads_of(torch, f)):
        if b is None:
            assert a is None or np.allclose(a.numpy(), 0)
        else:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9,
                                       atol=1e-9)


def assert_gradgradcheck(f):
    x = nbgrad.tensor(X, dtype=nbgrad.float64, requires_grad=True)
    assert gradgradcheck(lambda t: f(nbgrad, nbgrad.nn.functional, t), (x,))


@pytest.mark.parametrize("name", NAMES)
def test_node_names_under_create_graph(name):
    gt, ht, _ = _grads(torch, name)
    gn, hn, _ = _grads(nbgrad, name)
    assert _graph(gn.grad_fn, 3) == _graph(gt.grad_fn, 3)
    if CASES[name][1]:
        assert _graph(hn.grad_fn, 3) == _graph(ht.grad_fn, 3)


@pytest.mark.parametrize("name", NAMES)
def test_values_vs_torch(name):
    assert_orders_like_torch(CASES[name][0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradgradcheck(name):
    assert_gradgradcheck(CASES[name][0])


def test_double_row_saves_and_frees_like_a_node():
    """The double row's node (relu's ThresholdBackwardBackward0) saves the incoming gradient
    and `result` as its inputs; a second backward through it after the first freed it fails
    with PyTorch's error."""
    out = {}
    for T in (torch, nbgrad):
        x = T.tensor([0.5, -1.0, 2.0], dtype=T.float64, requires_grad=True)
        g, = T.autograd.grad((x.relu() * x).sum(), x, create_graph=True)
        node = g.grad_fn.next_functions[0][0]
        names = [node.name().split("::")[-1]] + [
            None if f is None else f.name().split("::")[-1] for f, _ in node.next_functions]
        g.sum().backward()
        try:
            g.sum().backward()
            err = None
        except RuntimeError as e:
            err = str(e).split(".")[0]
        out[T] = (names, x.grad.tolist(), err)
    assert out[nbgrad] == out[torch]


@pytest.mark.parametrize("name", ["silu", "mish", "gelu", "conv2d", "glu", "det", "cholesky"])
def test_node_names_deeper(name):
    """Formulas written with ops make their nodes in torch's order (the operands of a C++
    product right first: silu's sigmoid then receives the product's gradient before the
    subtraction's), so the graphs agree further down than three levels."""
    gt, ht, _ = _grads(torch, name)
    gn, hn, _ = _grads(nbgrad, name)
    assert _graph(gn.grad_fn, 8) == _graph(gt.grad_fn, 8)
    assert _graph(hn.grad_fn, 8) == _graph(ht.grad_fn, 8)
