"""The layers, activations and losses added for issue 10 as modules, against torch.nn in float64:
repr, state_dict keys, values and gradients (inputs and parameters)."""

import warnings

import numpy as np
import pytest
import torch

import nbgrad
from test_nn_layers import run_both, rnd

ACT_MODULES = [
    "PReLU()", "PReLU(3, 0.1)", "ELU()", "ELU(0.5, True)", "SELU()", "SELU(True)", "CELU()",
    "CELU(2.0)", "SiLU()", "SiLU(True)", "Mish()", "Softplus()", "Softplus(2, 10)",
    "Softsign()", "Hardtanh()", "Hardtanh(-2, 2, True)", "Hardswish()", "Hardsigmoid()",
    "ReLU6()", "ReLU6(True)", "Tanhshrink()", "Threshold(0.1, 20)", "Threshold(0.1, 20, True)",
    "GLU()", "GLU(-2)", "LogSigmoid()", "Softmin(1)", "Hardshrink()", "Softshrink(0.7)",
    "Softmax2d()",
]


@pytest.mark.parametrize("expr", ACT_MODULES)
def test_activation_module(expr):
    make = lambda nn: eval("nn." + expr, {"nn": nn})  # noqa: E731
    assert repr(make(nbgrad.nn)) == repr(make(torch.nn))
    assert list(make(nbgrad.nn).state_dict()) == list(make(torch.nn).state_dict())
    if "True" in expr:  # in-place on a leaf: run the non-inplace twin for values
        expr = expr.replace("True", "False")
    run_both(make, rnd(2, 3, 4, 4) * 3)


def test_prelu_weight_shape_and_grad():
    th, ng = run_both(lambda nn: nn.PReLU(3), rnd(2, 3, 5) * 2)
    assert tuple(ng.weight.shape) == (3,) and np.all(ng.weight.detach().numpy() == 0.25)


def test_hardtanh_bad_range_like_torch():
    with pytest.raises(AssertionError, match=r"max_val \(0\) must be greater than min_val \(1\)"):
        nbgrad.nn.Hardtanh(1, 0)
    with pytest.raises(ValueError, match=r"Softmax2d: expected input to be 3D or 4D, got 1D"):
        nbgrad.nn.Softmax2d()(nbgrad.zeros(3))


LOSS_MODULES = [
    ("SmoothL1Loss()", "reg"), ("SmoothL1Loss(beta=0.5, reduction='sum')", "reg"),
    ("HuberLoss()", "reg"), ("HuberLoss(reduction='none', delta=0.2)", "reg"),
    ("KLDivLoss(reduction='batchmean')", "kl"), ("KLDivLoss(reduction='sum', log_target=True)",
                                                 "kllog"),
    ("PoissonNLLLoss()", "count"), ("PoissonNLLLoss(log_input=False, full=True)", "countpos"),
    ("GaussianNLLLoss()", "gauss"), ("GaussianNLLLoss(full=True, reduction='sum')", "gauss"),
    ("CosineEmbeddingLoss()", "pair"), ("CosineEmbeddingLoss(margin=0.3)", "pair"),
    ("MarginRankingLoss(margin=0.1)", "rank"), ("TripletMarginLoss()", "triplet"),
    ("TripletMarginLoss(margin=2.0, p=1, swap=True)", "triplet"),
    ("HingeEmbeddingLoss()", "pm1"), ("HingeEmbeddingLoss(margin=2.0)", "pm1"),
    ("MultiLabelSoftMarginLoss()", "01"), ("SoftMarginLoss()", "pm1"),
    ("MultiMarginLoss()", "cls"), ("MultiMarginLoss(p=2, margin=0.5)", "cls"),
]


def _inputs(kind):
    g = np.random.default_rng(3)
    x = g.standard_normal((4, 5))
    if kind == "reg":
        return [x, g.standard_normal((4, 5))], 1
    if kind == "kl":
        return [np.log(g.dirichlet(np.ones(5), 4)), g.dirichlet(np.ones(5), 4)], 1
    if kind == "kllog":
        return [np.log(g.dirichlet(np.ones(5), 4)), np.log(g.dirichlet(np.ones(5), 4))], 1
    if kind == "count":
        return [x, g.poisson(2.0, (4, 5)).astype(float)], 1
    if kind == "countpos":
        return [np.abs(x) + 0.1, g.poisson(2.0, (4, 5)).astype(float)], 1
    if kind == "gauss":
        return [x, g.standard_normal((4, 5)), np.abs(g.standard_normal((4, 5))) + 0.1], 3
    if kind == "pair":
        return [x, g.standard_normal((4, 5)), np.array([1.0, -1.0, -1.0, 1.0])], 2
    if kind == "rank":
        return [x[:, 0], x[:, 1], np.array([1.0, -1.0, -1.0, 1.0])], 2
    if kind == "triplet":
        return [x, g.standard_normal((4, 5)), g.standard_normal((4, 5))], 3
    if kind == "pm1":
        return [x, np.where(g.random((4, 5)) < 0.5, -1.0, 1.0)], 1
    if kind == "01":
        return [x, (g.random((4, 5)) < 0.5).astype(float)], 1
    if kind == "cls":
        return [x, g.integers(0, 5, 4)], 1
    raise AssertionError(kind)


@pytest.mark.parametrize("expr,kind", LOSS_MODULES, ids=[c[0] for c in LOSS_MODULES])
def test_loss_module(expr, kind):
    make = lambda nn: eval("nn." + expr, {"nn": nn})  # noqa: E731
    mt, mn = make(torch.nn), make(nbgrad.nn)
    assert repr(mn) == repr(mt)
    arrays, n_grad = _inputs(kind)
    tt = [torch.from_numpy(a.copy()).requires_grad_(i < n_grad) for i, a in enumerate(arrays)]
    nt = [nbgrad.tensor(a.copy(), requires_grad=i < n_grad) for i, a in enumerate(arrays)]
    lt, ln = mt(*tt), mn(*nt)
    np.testing.assert_allclose(ln.detach().numpy(), lt.detach().numpy(), rtol=1e-9, atol=1e-12)
    up = np.random.default_rng(0).standard_normal(tuple(lt.shape))
    (lt * torch.from_numpy(up)).sum().backward()
    (ln * nbgrad.tensor(up)).sum().backward()
    for a, b in zip(nt[:n_grad], tt[:n_grad]):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_loss_constructor_errors():
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nbgrad.nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="expected margin to be greater than 0"):
        nbgrad.nn.TripletMarginLoss(margin=0.0)
    # an unknown reduction is refused when the loss runs, as in torch (test_loss_arguments.py)
    with pytest.raises(ValueError, match="batchmean is not a valid value for reduction"):
        nbgrad.nn.MSELoss(reduction="batchmean")(nbgrad.ones(2), nbgrad.ones(2))
    assert nbgrad.nn.MultiMarginLoss(weight=nbgrad.ones(3)).state_dict().keys() == \
        torch.nn.MultiMarginLoss(weight=torch.ones(3)).state_dict().keys()


def _warned(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(x.message) for x in w if issubclass(x.category, UserWarning)]


@pytest.mark.parametrize("name, args", [
    ("MSELoss", ((2, 3), (2, 3))), ("L1Loss", ((2, 3), (2, 3))),
    ("SmoothL1Loss", ((2, 3), (2, 3))), ("BCEWithLogitsLoss", ((2, 3), (2, 3))),
    ("CrossEntropyLoss", ((4, 3), "cls")), ("NLLLoss", ((4, 3), "cls")),
])
def test_elementwise_mean_reduction_as_torch(name, args):
    """vinhkhuc/PyTorch-Mini-Tutorials builds MSELoss(reduction='elementwise_mean'): torch's
    deprecated spelling of 'mean', accepted with a UserWarning at each call."""
    rng = np.random.default_rng(0)
    arrs = [rng.integers(0, 3, 4) if a == "cls" else rng.random(a) for a in args]
    outs = {}
    for lib in (torch, nbgrad):
        ts = [lib.tensor(a) for a in arrs]
        m = getattr(lib.nn, name)(reduction="elementwise_mean")
        assert m.reduction == "elementwise_mean"
        (v, w) = _warned(lambda: m(*ts))
        fname = {"MSELoss": "mse_loss", "L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss",
                 "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
                 "CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll_loss"}[name]
        (vf, wf) = _warned(lambda: getattr(lib.nn.functional, fname)(*ts,
                                                                      reduction="elementwise_mean"))
        mean = getattr(lib.nn.functional, fname)(*ts, reduction="mean")
        outs[lib] = (v.item(), vf.item(), mean.item(), w, wf, v.dtype)
    t, n = outs[torch], outs[nbgrad]
    assert n[:3] == pytest.approx(t[:3], rel=1e-12) and n[0] == n[2]
    assert n[3] == t[3] == ["reduction='elementwise_mean' is deprecated. Please use "
                            "reduction='mean' instead."] and n[4] == t[4]
    assert str(n[5]).split(".")[-1] == str(t[5]).split(".")[-1]


def test_elementwise_mean_positional_and_bad_reduction_as_torch():
    a, b = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    vals = [lib.nn.functional.smooth_l1_loss(lib.tensor(a), lib.tensor(b), None, None,
                                              "elementwise_mean").item() for lib in (torch, nbgrad)]
    assert vals[0] == vals[1]
    for lib in (torch, nbgrad):
        with pytest.raises(ValueError, match="elementwise_sum is not a valid value for reduction"):
            lib.nn.functional.mse_loss(lib.tensor(a), lib.tensor(b), reduction="elementwise_sum")


def test_class_target_0d_for_batched_input_message_as_torch():
    """hunkim/PyTorchZeroToAll 13_3 passes a 0-d target with (1, C) logits: torch reads its batch
    size as 0."""
    msgs = []
    for lib in (torch, nbgrad):
        for fn in (lib.nn.functional.cross_entropy, lib.nn.functional.nll_loss):
            with pytest.raises(ValueError) as e:
                fn(lib.zeros(1, 3), lib.tensor(1))
            msgs.append(str(e.value))
    assert msgs[2:] == msgs[:2] == ["Expected input batch_size (1) to match target batch_size "
                                    "(0)."] * 2
