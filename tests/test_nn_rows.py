"""PyTorch's graph for the nn layers and losses: where torch records one node (MseLossBackward0,
NllLossBackward0, GeluBackward0, NativeLayerNormBackward0, ...), nbgrad records one node of that
name. The whole graph of each expression is walked in both libraries and compared node by node;
each row is then checked by finite differences, first and second order, in float64."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import nbgrad
import nbgrad.nn.functional as NF


def graph(out):
    """Node names of the graph behind ``out``, breadth first (AccumulateGrad included)."""
    names, seen, todo = [], set(), [out.grad_fn]
    while todo:
        fn = todo.pop(0)
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        names.append(type(fn).__name__)
        todo.extend(n for n, _ in fn.next_functions)
    return names


def both(fn, arrays, grad):
    """fn(lib, F, *tensors) in torch and nbgrad, inputs from numpy arrays."""
    out = []
    for lib, F in ((torch, TF), (nbgrad, NF)):
        ts = [lib.tensor(a.copy(), requires_grad=bool(g)) if a.dtype.kind == "f" else lib.tensor(a)
              for a, g in zip(arrays, grad)]
        out.append((fn(lib, F, *ts), ts))
    return out


R = np.random.default_rng(0)
X = R.standard_normal((4, 5)) * 2
T = R.standard_normal((4, 5))
P = R.random((4, 5)) * 0.9 + 0.05
Y = R.integers(0, 5, 4)
IMG = R.standard_normal((3, 4, 2, 2)) * 2 + 1

CASES = [  # name, fn(lib, F, *tensors), inputs, which require grad, expected torch root node
    ("mse", lambda L, F, x, t: F.mse_loss(x, t), [X, T], (1, 1), "MseLossBackward0"),
    ("mse_none", lambda L, F, x, t: F.mse_loss(x, t, reduction="none"), [X, T], (1, 1),
     "MseLossBackward0"),
    ("mse_sum", lambda L, F, x, t: F.mse_loss(x, t, reduction="sum"), [X, T], (1, 0),
     "MseLossBackward0"),
    ("cross_entropy", lambda L, F, x, y: F.cross_entropy(x, y), [X, Y], (1, 0),
     "NllLossBackward0"),
    ("cross_entropy_weight_ignore", lambda L, F, x, y, w: F.cross_entropy(
        x, y, weight=w, ignore_index=2), [X, Y, np.arange(1.0, 6.0)], (1, 0, 0),
     "NllLossBackward0"),
    ("cross_entropy_none", lambda L, F, x, y: F.cross_entropy(x, y, reduction="none"), [X, Y],
     (1, 0), "NllLossBackward0"),
    ("cross_entropy_2d", lambda L, F, x, y: F.cross_entropy(x, y),
     [IMG, R.integers(0, 4, (3, 2, 2))], (1, 0), "NllLoss2DBackward0"),
    ("cross_entropy_1d_none", lambda L, F, x, y: F.cross_entropy(x, y, reduction="none"),
     [IMG[:, :, 0], R.integers(0, 4, (3, 2))], (1, 0), "ViewBackward0"),
    ("cross_entropy_3d", lambda L, F, x, y: F.cross_entropy(x, y, reduction="sum"),
     [IMG[..., None], R.integers(0, 4, (3, 2, 2, 1))], (1, 0), "NllLoss2DBackward0"),
    ("nll_sum", lambda L, F, x, y: F.nll_loss(x.log_softmax(1), y, reduction="sum"), [X, Y],
     (1, 0), "NllLossBackward0"),
    ("nll_unbatched", lambda L, F, x, y: F.nll_loss(x, y), [X[0], np.array(3)], (1, 0),
     "NllLossBackward0"),
    ("bce", lambda L, F, x, t: F.binary_cross_entropy(x.sigmoid(), t), [X, P], (1, 1),
     "BinaryCrossEntropyBackward0"),
    ("bce_weight", lambda L, F, x, t, w: F.binary_cross_entropy(x.sigmoid(), t, w,
                                                                reduction="sum"),
     [X, P, np.arange(1.0, 6.0)], (1, 0, 0), "BinaryCrossEntropyBackward0"),
    ("bce_logits", lambda L, F, x, t: F.binary_cross_entropy_with_logits(x, t), [X, P], (1, 1),
     "BinaryCrossEntropyWithLogitsBackward0"),
    ("bce_logits_pos_weight", lambda L, F, x, t, pw, w: F.binary_cross_entropy_with_logits(
        x, t, w, pos_weight=pw, reduction="none"),
     [X, P, np.arange(1.0, 6.0), R.random((4, 5))], (1, 1, 0, 0),
     "BinaryCrossEntropyWithLogitsBackward0"),
    ("smooth_l1", lambda L, F, x, t: F.smooth_l1_loss(x, t, beta=0.7), [X, T], (1, 1),
     "SmoothL1LossBackward0"),
    ("huber", lambda L, F, x, t: F.huber_loss(x, t, delta=0.6, reduction="sum"), [X, T], (1, 1),
     "HuberLossBackward0"),
    ("soft_margin", lambda L, F, x, t: F.soft_margin_loss(x, t), [X, np.sign(T)], (1, 0),
     "SoftMarginLossBackward0"),
    ("gelu", lambda L, F, x: F.gelu(x), [X], (1,), "GeluBackward0"),
    ("gelu_tanh", lambda L, F, x: F.gelu(x, approximate="tanh"), [X], (1,), "GeluBackward0"),
    ("silu", lambda L, F, x: F.silu(x), [X], (1,), "SiluBackward0"),
    ("mish", lambda L, F, x: F.mish(x), [X], (1,), "MishBackward0"),
    ("elu", lambda L, F, x: F.elu(x, 0.7), [X], (1,), "EluBackward0"),
    ("selu", lambda L, F, x: F.selu(x), [X], (1,), "EluBackward0"),
    ("celu", lambda L, F, x: F.celu(x, 1.5), [X], (1,), "CeluBackward0"),
    ("leaky_relu", lambda L, F, x: F.leaky_relu(x, 0.2), [X], (1,), "LeakyReluBackward0"),
    ("softplus", lambda L, F, x: F.softplus(x, 2.0, 3.0), [X], (1,), "SoftplusBackward0"),
    ("hardtanh", lambda L, F, x: F.hardtanh(x, -1.5, 2.0), [X], (1,), "HardtanhBackward0"),
    ("relu6", lambda L, F, x: F.relu6(x * 3), [X], (1,), "HardtanhBackward0"),
    ("hardswish", lambda L, F, x: F.hardswish(x), [X], (1,), "HardswishBackward0"),
    ("hardsigmoid", lambda L, F, x: F.hardsigmoid(x), [X], (1,), "HardsigmoidBackward0"),
    ("logsigmoid", lambda L, F, x: F.logsigmoid(x), [X], (1,), "LogSigmoidBackward0"),
    ("threshold", lambda L, F, x: F.threshold(x, 0.3, -1.0), [X], (1,), "ThresholdBackward0"),
    ("hardshrink", lambda L, F, x: F.hardshrink(x, 0.8), [X], (1,), "HardshrinkBackward0"),
    ("softshrink", lambda L, F, x: F.softshrink(x, 0.8), [X], (1,), "SoftshrinkBackward0"),
    ("glu", lambda L, F, x: F.glu(x[:, :4], 1), [X], (1,), "GluBackward0"),
    ("prelu", lambda L, F, x, w: F.prelu(x, w), [IMG, np.array([0.1, 0.2, -0.3, 0.4])], (1, 1),
     "PreluKernelBackward0"),
    ("layer_norm", lambda L, F, x, w, b: F.layer_norm(x, (5,), w, b),
     [X, R.standard_normal(5), R.standard_normal(5)], (1, 1, 1), "NativeLayerNormBackward0"),
    ("layer_norm_2d_noaffine", lambda L, F, x: F.layer_norm(x, (2, 2), eps=1e-3), [IMG], (1,),
     "NativeLayerNormBackward0"),
    ("batch_norm_train", lambda L, F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     [IMG, R.standard_normal(4), R.standard_normal(4)], (1, 1, 1), "NativeBatchNormBackward0"),
    ("batch_norm_eval", lambda L, F, x, w, b, m, v: F.batch_norm(x, m, v, w, b, training=False),
     [IMG, R.standard_normal(4), R.standard_normal(4), R.standard_normal(4), R.random(4) + 0.5],
     (1, 1, 1, 0, 0), "NativeBatchNormBackward0"),
    ("embedding", lambda L, F, w, i: F.embedding(i, w), [R.standard_normal((6, 3)),
                                                        np.array([[0, 2, 2], [5, 1, 0]])],
     (1, 0), "EmbeddingBackward0"),
    ("embedding_padding", lambda L, F, w, i: F.embedding(i, w, padding_idx=2),
     [R.standard_normal((6, 3)), np.array([[0, 2, 2], [5, 1, 0]])], (1, 0), "EmbeddingBackward0"),
    ("mlp_mse", lambda L, F, x, w, t: F.mse_loss(F.gelu(F.linear(x, w)), t),
     [X, R.standard_normal((3, 5)), R.standard_normal((4, 3))], (0, 1, 0), "MseLossBackward0"),
]


@pytest.mark.parametrize("name,fn,arrays,grad,root", CASES, ids=[c[0] for c in CASES])
def test_graph_values_and_grads_like_torch(name, fn, arrays, grad, root):
    (ot, tt), (on, tn) = both(fn, arrays, grad)
    assert type(ot.grad_fn).__name__ == root  # the expectation itself is torch's
    assert graph(on) == graph(ot)
    np.testing.assert_allclose(on.detach().numpy(), ot.detach().numpy(), rtol=1e-10, atol=1e-12)
    up = np.random.default_rng(1).standard_normal(tuple(ot.shape))
    (ot * torch.tensor(up)).sum().backward()
    (on * nbgrad.tensor(up)).sum().backward()
    for a, b, g in zip(tn, tt, grad):
        if g:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name,fn,arrays,grad,root", CASES, ids=[c[0] for c in CASES])
def test_rows_gradcheck_first_and_second_order(name, fn, arrays, grad, root):
    ins = [nbgrad.tensor(a.copy(), requires_grad=bool(g)) if a.dtype.kind == "f"
           else nbgrad.tensor(a) for a, g in zip(arrays, grad)]
    diff = [t for t, g in zip(ins, grad) if g]

    def f(*xs):
        it = iter(xs)
        return fn(nbgrad, NF, *[next(it) if g else t for t, g in zip(ins, grad)])

    if name == "embedding_padding":  # torch's rule, not the derivative: padding rows get none
        return
    assert nbgrad.autograd.gradcheck(f, tuple(diff))
    if name != "embedding":  # the output is linear in the weight
        assert nbgrad.autograd.gradgradcheck(f, tuple(diff))


@pytest.mark.parametrize("name,args", [("leaky_relu", (0.1,)), ("elu", ()), ("celu", ()),
                                       ("selu", ()), ("threshold", (0.2, -1.0)), ("silu", ()),
                                       ("hardtanh", ()), ("mish", ()), ("hardswish", ())])
def test_inplace_node_names_like_torch(name, args):
    names = []
    for lib, F in ((torch, TF), (nbgrad, NF)):
        x = lib.tensor(X.copy(), requires_grad=True)
        y = x * 1.0
        out = getattr(F, name)(y, *args, inplace=True)
        assert out is y and y._version == 1
        names.append(graph(out))
        out.sum().backward()
        names.append(x.grad.numpy().copy())
    assert names[2] == names[0]
    np.testing.assert_allclose(names[3], names[1], rtol=1e-12)


MODULES = [
    ("Linear+GELU+LayerNorm", lambda nn: nn.Sequential(nn.Linear(5, 6), nn.GELU(),
                                                       nn.LayerNorm(6)), X),
    ("BatchNorm2d", lambda nn: nn.BatchNorm2d(4), IMG),
    ("Embedding", lambda nn: nn.Embedding(6, 3, padding_idx=0), np.array([[0, 2], [5, 1]])),
    ("SiLU+Softplus", lambda nn: nn.Sequential(nn.SiLU(), nn.Softplus()), X),
    ("ELU+LeakyReLU+Hardtanh", lambda nn: nn.Sequential(nn.ELU(), nn.LeakyReLU(), nn.Hardtanh()),
     X),
    ("Dropout", lambda nn: nn.Dropout(0.5), X),
]


@pytest.mark.parametrize("name,make,x", MODULES, ids=[m[0] for m in MODULES])
def test_module_graphs_like_torch(name, make, x):
    outs = []
    for lib in (torch, nbgrad):
        m = make(lib.nn).double()
        xt = lib.tensor(x.copy(), requires_grad=x.dtype.kind == "f") if x.dtype.kind == "f" \
            else lib.tensor(x)
        outs.append(graph(m(xt)))
    assert outs[1] == outs[0]


def test_embedding_max_norm_like_torch():
    w = R.standard_normal((6, 3)) * 3
    idx = np.array([[0, 2, 2], [5, 1, 0]])
    res = []
    for lib in (torch, nbgrad):
        emb = lib.nn.Embedding(6, 3, max_norm=1.5).double()
        with lib.no_grad():
            emb.weight.copy_(lib.tensor(w.copy()))
        v = emb.weight._version
        out = emb(lib.tensor(idx))
        out.sum().backward()
        res.append((emb.weight.detach().numpy().copy(), out.detach().numpy(),
                    emb.weight.grad.numpy(), emb.weight._version - v, graph(out)))
    for a, b in zip(res[1][:3], res[0][:3]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert res[1][4] == res[0][4]
    assert res[1][3] >= 1
