"""The activations and losses added for issue 10, against torch.nn.functional in float64:
values, gradients of every differentiable input, at random points and at the kinks."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import nbgrad
import nbgrad.nn.functional as NF
from test_nn_rows import graph as _graph


def rnd(*shape, seed=0, scale=1.0):
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale)


KINKS = np.array([-20.5, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 20.5, 25.0])


def run(fn, inputs, grad=(True,), rtol=1e-9, atol=1e-11):
    """fn(F, *tensors) in both libraries; compare the value and each requires-grad input's grad."""
    grad = tuple(grad) + (False,) * (len(inputs) - len(grad))
    tt = [torch.from_numpy(np.array(a)).requires_grad_(g) if np.asarray(a).dtype.kind == "f"
          else torch.from_numpy(np.array(a)) for a, g in zip(inputs, grad)]
    nt = [nbgrad.tensor(np.array(a), requires_grad=g) if np.asarray(a).dtype.kind == "f"
          else nbgrad.tensor(np.array(a)) for a, g in zip(inputs, grad)]
    yt = fn(TF, *tt)
    yn = fn(NF, *nt)
    assert tuple(yn.shape) == tuple(yt.shape)
    np.testing.assert_allclose(yn.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=atol)
    if not any(grad):
        return
    up = rnd(*yt.shape, seed=7)
    (yt * torch.from_numpy(up)).sum().backward()
    (yn * nbgrad.tensor(up)).sum().backward()
    for a, b, g in zip(nt, tt, grad):
        if g:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol)


ACTIVATIONS = [
    ("threshold", lambda F, x: F.threshold(x, 0.5, -2.0)),
    ("hardtanh", lambda F, x: F.hardtanh(x)),
    ("hardtanh_range", lambda F, x: F.hardtanh(x, -3.0, 6.0)),
    ("relu6", lambda F, x: F.relu6(x)),
    ("elu", lambda F, x: F.elu(x)),
    ("elu_alpha", lambda F, x: F.elu(x, 0.3)),
    ("selu", lambda F, x: F.selu(x)),
    ("celu", lambda F, x: F.celu(x, 2.0)),
    ("silu", lambda F, x: F.silu(x)),
    ("softplus", lambda F, x: F.softplus(x)),
    ("softplus_beta", lambda F, x: F.softplus(x, beta=2.0, threshold=5.0)),
    ("mish", lambda F, x: F.mish(x)),
    ("softsign", lambda F, x: F.softsign(x)),
    ("hardswish", lambda F, x: F.hardswish(x)),
    ("hardsigmoid", lambda F, x: F.hardsigmoid(x)),
    ("tanhshrink", lambda F, x: F.tanhshrink(x)),
    ("hardshrink", lambda F, x: F.hardshrink(x, 1.0)),
    ("softshrink", lambda F, x: F.softshrink(x, 1.0)),
    ("logsigmoid", lambda F, x: F.logsigmoid(x)),
    ("softmin", lambda F, x: F.softmin(x, dim=-1)),
    ("glu", lambda F, x: F.glu(x, dim=-1)),
    ("leaky_relu", lambda F, x: F.leaky_relu(x, 0.1)),
]


@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_random(name, fn):
    run(fn, [rnd(3, 8, scale=3.0)])


@pytest.mark.parametrize("name,fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_at_kinks(name, fn):
    run(fn, [np.tile(KINKS, (2, 1))])


@pytest.mark.parametrize("name,fn", [a for a in ACTIVATIONS if a[0] not in ("softmin", "glu")],
                         ids=[a[0] for a in ACTIVATIONS if a[0] not in ("softmin", "glu")])
def test_activation_gradcheck(name, fn):
    x = nbgrad.tensor(rnd(2, 5, seed=3, scale=2.5) + 0.05, requires_grad=True)
    assert nbgrad.autograd.gradcheck(lambda t: fn(NF, t), (x,))


@pytest.mark.parametrize("name", ["elu", "selu", "celu", "silu", "mish", "hardswish",
                                  "hardsigmoid", "hardtanh", "relu6", "threshold"])
def test_inplace_variants_write_the_input_and_backprop(name):
    extra = {"threshold": (0.1, 0.0)}.get(name, ())
    xt = torch.from_numpy(rnd(4, 5, scale=3.0)).requires_grad_(True)
    xn = nbgrad.tensor(rnd(4, 5, scale=3.0), requires_grad=True)
    yt = xt * 1.5
    yn = xn * 1.5
    outt = getattr(TF, name)(yt, *extra, inplace=True)
    outn = getattr(NF, name)(yn, *extra, inplace=True)
    assert outn is yn and yn._version == 1
    np.testing.assert_allclose(yn.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    (outt ** 2).sum().backward()
    (outn ** 2).sum().backward()
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shape,wshape", [((2, 3, 4), (3,)), ((2, 3), (1,)), ((3,), (1,)),
                                          ((2, 3, 2, 2), (3,))])
def test_prelu(shape, wshape):
    run(lambda F, x, w: F.prelu(x, w), [rnd(*shape, scale=2.0), rnd(*wshape, seed=1)],
        grad=(True, True))


def test_activation_errors_like_torch():
    for fn in (lambda F: F.glu(F_tensor(F, (2, 3))),
               lambda F: F.prelu(F_tensor(F, (2, 3)), F_tensor(F, (2,))),
               lambda F: F.prelu(F_tensor(F, (3,)), F_tensor(F, (3,))),
               lambda F: F.hardtanh(F_tensor(F, (2,)), 1.0, 0.0)):
        with pytest.raises(Exception) as et:
            fn(TF)
        with pytest.raises(type(et.value)) as en:
            fn(NF)
        assert str(en.value) == str(et.value)


def F_tensor(F, shape):
    return (torch if F is TF else nbgrad).zeros(shape, dtype=(torch if F is TF else
                                                               nbgrad).float64)


def y_pm1(n, seed=0):
    return np.where(np.random.default_rng(seed).random(n) < 0.5, -1.0, 1.0)


REDUCTIONS = ["mean", "sum", "none"]
LOSSES = [
    ("smooth_l1", lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r), "reg"),
    ("smooth_l1_beta", lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.5), "reg"),
    ("smooth_l1_beta0", lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0), "reg"),
    ("huber", lambda F, x, t, r: F.huber_loss(x, t, reduction=r), "reg"),
    ("huber_delta", lambda F, x, t, r: F.huber_loss(x, t, reduction=r, delta=0.3), "reg"),
    ("l1", lambda F, x, t, r: F.l1_loss(x, t, reduction=r), "reg"),
    ("mse", lambda F, x, t, r: F.mse_loss(x, t, reduction=r), "reg"),
    ("kl_div", lambda F, x, t, r: F.kl_div(x, t, reduction=r), "kl"),
    ("kl_div_batchmean", lambda F, x, t, r: F.kl_div(x, t, reduction="batchmean"), "kl"),
    ("kl_div_log_target", lambda F, x, t, r: F.kl_div(x, t.log(), reduction=r,
                                                      log_target=True), "kl"),
    ("poisson", lambda F, x, t, r: F.poisson_nll_loss(x, t, reduction=r), "count"),
    ("poisson_full", lambda F, x, t, r: F.poisson_nll_loss(x, t, full=True, reduction=r),
     "count"),
    ("poisson_nolog", lambda F, x, t, r: F.poisson_nll_loss(x.exp(), t, log_input=False,
                                                            reduction=r), "count"),
    ("soft_margin", lambda F, x, t, r: F.soft_margin_loss(x, t, reduction=r), "pm1"),
    ("hinge_embedding", lambda F, x, t, r: F.hinge_embedding_loss(x, t, reduction=r), "pm1"),
    ("hinge_embedding_margin", lambda F, x, t, r: F.hinge_embedding_loss(x, t, margin=0.3,
                                                                        reduction=r), "pm1"),
    ("multilabel_soft_margin", lambda F, x, t, r: F.multilabel_soft_margin_loss(
        x, t, reduction=r), "01"),
    ("multi_margin", lambda F, x, t, r: F.multi_margin_loss(x, t, reduction=r), "cls"),
    ("multi_margin_p2", lambda F, x, t, r: F.multi_margin_loss(x, t, p=2, margin=0.5,
                                                                reduction=r), "cls"),
]


def _loss_inputs(kind, seed=0):
    x = rnd(4, 5, seed=seed, scale=2.0)
    g = np.random.default_rng(seed + 1)
    if kind == "reg":
        return x, rnd(4, 5, seed=seed + 1, scale=2.0)
    if kind == "kl":
        return np.log(g.dirichlet(np.ones(5), 4)), g.dirichlet(np.ones(5), 4)
    if kind == "count":
        return x * 0.5, g.poisson(2.0, (4, 5)).astype(np.float64)
    if kind == "pm1":
        return x, np.where(g.random((4, 5)) < 0.5, -1.0, 1.0)
    if kind == "01":
        return x, (g.random((4, 5)) < 0.5).astype(np.float64)
    if kind == "cls":
        return x, g.integers(0, 5, 4)
    raise AssertionError(kind)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,fn,kind", LOSSES, ids=[c[0] for c in LOSSES])
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
def test_loss_matches_torch(name, fn, kind, reduction):
    x, t = _loss_inputs(kind)
    run(lambda F, a, b: fn(F, a, b, reduction), [x, t], grad=(True, kind in ("reg", "kl")))


def test_regression_losses_at_kinks():
    x = np.array([0.0, 0.5, 1.0, -1.0, 2.0, 0.3])
    t = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 0.0])
    for fn in (lambda F, a, b: F.smooth_l1_loss(a, b, reduction="sum"),
               lambda F, a, b: F.huber_loss(a, b, reduction="sum"),
               lambda F, a, b: F.smooth_l1_loss(a, b, reduction="sum", beta=0.3),
               lambda F, a, b: F.l1_loss(a, b, reduction="sum")):
        run(fn, [x, t], grad=(True, True))


def test_kl_div_zero_target():
    run(lambda F, a, b: F.kl_div(a, b, reduction="sum"),
        [np.log(np.array([0.2, 0.3, 0.5])), np.array([0.0, 0.4, 0.6])], grad=(True, False))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("vshape", [(4, 3), (4,), (4, 1)])
def test_gaussian_nll(reduction, full, vshape):
    var = np.abs(rnd(*vshape, seed=2)) + 0.1
    var.flat[0] = 1e-9  # clamped at eps, gradient still flows
    run(lambda F, x, t, v: F.gaussian_nll_loss(x, t, v, full=full, reduction=reduction),
        [rnd(4, 3), rnd(4, 3, seed=1), var], grad=(True, True, True))


def test_gaussian_nll_errors_like_torch():
    for var in ((2, 5), (4, 2)):
        with pytest.raises(ValueError, match="var is of incorrect size"):
            NF.gaussian_nll_loss(nbgrad.zeros(4, 3), nbgrad.zeros(4, 3), nbgrad.ones(*var))
    with pytest.raises(ValueError, match="var has negative entry/entries"):
        NF.gaussian_nll_loss(nbgrad.zeros(4, 3), nbgrad.zeros(4, 3), -nbgrad.ones(4, 3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.4])
def test_cosine_embedding(reduction, margin):
    run(lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, margin=margin, reduction=reduction),
        [rnd(6, 4), rnd(6, 4, seed=1), y_pm1(6)], grad=(True, True))
    run(lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, margin=margin, reduction=reduction),
        [rnd(4), rnd(4, seed=1), np.array(-1.0)], grad=(True, True))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking(reduction):
    run(lambda F, a, b, y: F.margin_ranking_loss(a, b, y, margin=0.2, reduction=reduction),
        [rnd(7), rnd(7, seed=1), y_pm1(7)], grad=(True, True))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,swap", [(2, False), (1, False), (2, True), (3, True)])
def test_triplet_margin(reduction, p, swap):
    run(lambda F, a, b, c: F.triplet_margin_loss(a, b, c, margin=0.7, p=p, swap=swap,
                                                 reduction=reduction),
        [rnd(5, 3), rnd(5, 3, seed=1), rnd(5, 3, seed=2)], grad=(True, True, True))


@pytest.mark.parametrize("shape,dim", [((5, 3), 1), ((4, 3, 2), 1), ((3,), 0), ((4, 6), -1)])
def test_cosine_similarity_and_pairwise_distance(shape, dim):
    a, b = rnd(*shape), rnd(*shape, seed=1)
    a.flat[:shape[-1]] = 0.0  # a zero vector: the clamped norm
    run(lambda F, x, y: F.cosine_similarity(x, y, dim=dim), [a, b], grad=(True, True))
    run(lambda F, x, y: F.pairwise_distance(x, y), [a, b], grad=(True, True))
    run(lambda F, x, y: F.pairwise_distance(x, y, p=1.0, keepdim=True), [a, b],
        grad=(True, True))


def test_multi_margin_weight_and_unbatched():
    w = np.array([0.5, 1.0, 2.0, 1.5, 0.1])
    run(lambda F, x, t, w: F.multi_margin_loss(x, t, weight=w), [rnd(4, 5), np.array([0, 4, 2, 2]),
                                                                  w])
    run(lambda F, x, t: F.multi_margin_loss(x, t), [rnd(5), np.array(3)])


@pytest.mark.parametrize("fn", [NF.mse_loss, NF.l1_loss, NF.smooth_l1_loss, NF.huber_loss])
def test_target_size_warning_like_torch(fn):
    with pytest.warns(UserWarning, match=r"Using a target size \(nbgrad.Size\(\[3, 1\]\)\) that "
                      r"is different to the input size \(nbgrad.Size\(\[3\]\)\)"):
        fn(nbgrad.zeros(3), nbgrad.zeros(3, 1))
    with pytest.warns(UserWarning, match="Using a target size"):
        getattr(TF, fn.__name__)(torch.zeros(3), torch.zeros(3, 1))


def test_kl_div_mean_warns_like_torch():
    with pytest.warns(UserWarning) as wt:
        TF.kl_div(torch.zeros(2, 3), torch.ones(2, 3))
    with pytest.warns(UserWarning) as wn:
        NF.kl_div(nbgrad.zeros(2, 3), nbgrad.ones(2, 3))
    assert str(wn[0].message) == str(wt[0].message)


# torch's C++ compositions record the Scalar overloads (AddBackward1, SubBackward1) and at::norm
# (NormBackward1), which Python code cannot reach (``x + 1.0`` is AddBackward0 in torch too); the
# graphs must match node by node up to those names
_CPP_ONLY = {"AddBackward1": "AddBackward0", "SubBackward1": "SubBackward0",
             "MulBackward1": "MulBackward0", "DivBackward1": "DivBackward0",
             "NormBackward1": "LinalgVectorNormBackward0"}

COMPOSITE = [
    ("gaussian_nll", lambda F, x, t, v: F.gaussian_nll_loss(x, t, v), (1, 1, 1)),
    ("cosine_embedding", lambda F, x, t, y: F.cosine_embedding_loss(x, t, y[:, 0].sign(),
                                                                    margin=0.2), (1, 1, 0)),
    ("margin_ranking", lambda F, x, t, y: F.margin_ranking_loss(x[:, 0], t[:, 0], y[:, 0].sign()),
     (1, 1, 0)),
    ("triplet", lambda F, a, p, n: F.triplet_margin_loss(a, p, n), (1, 1, 1)),
    ("cosine_similarity", lambda F, a, b, _: F.cosine_similarity(a, b), (1, 1, 0)),
    ("pairwise_distance", lambda F, a, b, _: F.pairwise_distance(a, b), (1, 1, 0)),
    ("poisson_nolog", lambda F, x, t, _: F.poisson_nll_loss(x.exp(), t.abs(), log_input=False),
     (1, 0, 0)),
    ("hinge_embedding", lambda F, x, t, _: F.hinge_embedding_loss(x, t.sign()), (1, 0, 0)),
    ("multilabel_soft_margin", lambda F, x, t, _: F.multilabel_soft_margin_loss(
        x, (t > 0).to(x.dtype)), (1, 0, 0)),
    ("kl_div_batchmean", lambda F, x, t, _: F.kl_div(x.log_softmax(1), t.softmax(1),
                                                     reduction="batchmean"), (1, 0, 0)),
    ("l1", lambda F, x, t, _: F.l1_loss(x, t), (1, 1, 0)),
    ("cross_entropy_probs", lambda F, x, t, _: F.cross_entropy(x, t.softmax(1)), (1, 0, 0)),
    ("cross_entropy_smoothing", lambda F, x, t, _: F.cross_entropy(
        x, (t.abs() * 2).to(nbgrad.int64 if F is NF else torch.int64)[:, 0].clamp(max=3),
        label_smoothing=0.1), (1, 0, 0)),
]



@pytest.mark.parametrize("name,fn,grad", COMPOSITE, ids=[c[0] for c in COMPOSITE])
def test_composite_loss_graphs_like_torch(name, fn, grad):
    arrays = [rnd(5, 4), rnd(5, 4, seed=1), np.abs(rnd(5, 4, seed=2)) + 0.1]
    outs = []
    for lib, F in ((torch, TF), (nbgrad, NF)):
        ts = [lib.tensor(a.copy(), requires_grad=bool(g)) for a, g in zip(arrays, grad)]
        outs.append(fn(F, *ts))
    gt = [_CPP_ONLY.get(n, n) for n in _graph(outs[0])]
    assert _graph(outs[1]) == gt
    np.testing.assert_allclose(outs[1].detach().numpy(), outs[0].detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
@pytest.mark.filterwarnings("ignore:Using a target size")
def test_regression_losses_refuse_unbroadcastable_targets_like_torch(name):
    with pytest.raises(RuntimeError) as et:
        getattr(TF, name)(torch.zeros(3), torch.zeros(4))
    with pytest.raises(RuntimeError) as en:
        getattr(NF, name)(nbgrad.zeros(3), nbgrad.zeros(4))
    assert str(en.value) == str(et.value)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 3, 4), (2, 3, 4, 2)])
def test_implicit_softmax_dim_warns_as_torch(name, shape):
    """hunkim/PyTorchZeroToAll's attention calls ``F.softmax(scores)``: torch picks the legacy
    dim and warns; the module forms (nn.Softmax() without dim) warn the same."""
    import warnings
    x = np.random.default_rng(1).standard_normal(shape)
    got = {}
    for lib in (torch, nbgrad):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            f = getattr(lib.nn.functional, name)(lib.tensor(x))
            cls = {"softmax": "Softmax", "log_softmax": "LogSoftmax", "softmin": "Softmin"}[name]
            m = getattr(lib.nn, cls)()(lib.tensor(x))
            explicit = getattr(lib.nn.functional, name)(lib.tensor(x), 0 if len(shape) < 2 else 1)
        got[lib] = (f.numpy(), m.numpy(), explicit.numpy(), [str(a.message) for a in w],
                    w[0].filename)
    t, n = got[torch], got[nbgrad]
    for a, b in zip(t[:3], n[:3]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15)
    assert n[3] == t[3] == [f"Implicit dimension choice for {name} has been deprecated. Change "
                            "the call to include dim=X as an argument."] * 2
    assert n[4] == t[4] == __file__  # the functional form points at its caller


def test_softmax_positional_arguments_as_torch():
    """torch's order is (input, dim, _stacklevel, dtype): dtype goes by keyword."""
    x = np.arange(6.0).reshape(2, 3)
    for name in ("softmax", "log_softmax", "softmin"):
        t = getattr(torch.nn.functional, name)(torch.tensor(x), 1, 3, torch.float32)
        n = getattr(nbgrad.nn.functional, name)(nbgrad.tensor(x), 1, 3, nbgrad.float32)
        assert str(n.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] == "float32"
        np.testing.assert_allclose(n.numpy(), t.numpy(), rtol=1e-6)
