"""GPU discipline without a GPU: the op suite's cases run with device="cuda" served by a strict
cupy double (tests/device_double.py), whose arrays refuse implicit host conversion and numpy
functions. A case passing here proves every array call its rows make on device data goes through
`backend` (the array's own module), and that values, grad_fn names and grads match torch."""
import numpy as np
import pytest

import nbgrad
import nbgrad.nn.functional as NF
import test_nn_rows
import torch
import torch.nn.functional as TF
from device_double import MESSAGE, DeviceArray, install
import test_ops_ext
from test_ops import CASES, check_on_device

# rows whose path still calls numpy on device data: {case name: the bug} (none left open)
XFAIL = {}
# nn rows found by the double, not fixed yet {case name: what still reaches numpy} (none left)
NN_XFAIL = {}


@pytest.fixture
def double(monkeypatch):
    install(monkeypatch)
    yield


def _param(case):
    marks = () if case.name not in XFAIL else pytest.mark.xfail(
        reason=f"GPU bug: {XFAIL[case.name]}", strict=True)
    return pytest.param(case, id=case.name, marks=marks)


def test_double_is_strict(double):
    a = nbgrad.ones(3, device="cuda")
    assert type(a._data) is DeviceArray and a.device.type == "cuda"
    for call in (lambda: np.asarray(a._data), lambda: np.exp(a._data),
                 lambda: np.sum(a._data), lambda: a._data + np.ones(3),
                 lambda: np.ones(3) + a._data):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(TypeError, match=MESSAGE.split(".")[0]):
        np.asarray(a._data)
    np.testing.assert_array_equal(a.cpu().numpy(), np.ones(3))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + nbgrad.ones(3)  # the hot path of operators: cupy's TypeError becomes torch's text
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + nbgrad.ones(2, 3)
    assert float(a.sum()) == 3.0


@pytest.mark.parametrize("case", [_param(c) for c in CASES + test_ops_ext.CASES])
def test_case_on_double(case, double):
    check_on_device(case, "cuda")


@pytest.mark.parametrize("name,fn,arrays,grad,root", [
    pytest.param(*c, id=c[0], marks=() if c[0] not in NN_XFAIL else pytest.mark.xfail(
        reason=f"GPU bug: {NN_XFAIL[c[0]]}", strict=True)) for c in test_nn_rows.CASES])
def test_nn_row_on_double(name, fn, arrays, grad, root, double):
    """tests/test_nn_rows.py's layers and losses with every tensor on the double: values and
    grads as torch's on the CPU."""
    outs = []
    for lib, F, dev in ((torch, TF, "cpu"), (nbgrad, NF, "cuda")):
        ts = [lib.tensor(a.copy(), requires_grad=bool(g)) if a.dtype.kind == "f"
              else lib.tensor(a) for a, g in zip(arrays, grad)]
        if dev == "cuda":
            ts = [t.to(dev).detach().requires_grad_(t.requires_grad) for t in ts]
        y = fn(lib, F, *ts)
        (y * lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)), dtype=y.dtype,
                        device=dev)).sum().backward()
        outs.append((y, ts))
    (yt, tt), (yn, tn) = outs
    assert yn.device.type == "cuda"
    np.testing.assert_allclose(yn.detach().cpu().numpy(), yt.detach().numpy(), rtol=1e-9,
                               atol=1e-9)
    for a, b in zip(tn, tt):
        if b.requires_grad:
            assert a.grad.device.type == "cuda"
            np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.numpy(), rtol=1e-9,
                                       atol=1e-9)


OPTIMIZERS = [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
              ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, maximize=True)),
              ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.01)),
              ("AdamW", dict(lr=0.01)), ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
              ("Adagrad", dict(lr=0.1)), ("Adadelta", dict(lr=1.0)), ("Adamax", dict(lr=0.01)),
              ("NAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01)),
              ("LBFGS", dict(lr=0.5, history_size=3)),
              ("LBFGS", dict(lr=1.0, line_search_fn="strong_wolfe"))]


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}{i}" for i, (n, _) in
                                                     enumerate(OPTIMIZERS)])
def test_optimizer_on_double(name, kw, double):
    """Every optimizer's update, with the parameters and their state on the double: no numpy
    call on device data, and the parameters after 5 steps equal torch's on the CPU."""
    w0 = np.random.default_rng(0).standard_normal((3, 4))
    res = []
    for lib, dev in ((torch, "cpu"), (nbgrad, "cuda")):
        w = lib.tensor(w0.copy()).to(dev).requires_grad_()
        opt = getattr(lib.optim, name)([w], **kw)
        for k in range(5):
            def closure(k=k):
                opt.zero_grad()
                loss = (w * w).sum() * (k + 1) + (w * w * w * w).sum() + w.sum()
                loss.backward()
                return loss
            opt.step(closure)
        assert w.device.type == dev
        res.append(w.detach().cpu().numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_with_an_inf_upstream_gradient_on_double(affine, double):
    """group_norm's gradients by torch's kernel's algebra where the upstream gradient holds an
    inf (the path an all-finite gradient never takes) through the array module, as torch's."""
    x = np.random.default_rng(0).standard_normal((2, 4, 3))
    gy = np.cos(np.arange(24.0)).reshape(2, 4, 3)
    gy.flat[0], gy.flat[7] = np.inf, -np.inf
    seen = []
    for lib, dev in ((torch, "cpu"), (nbgrad, "cuda")):
        xt = lib.tensor(x, device=dev, requires_grad=True)
        w, b = (lib.tensor(np.linspace(lo, hi, 4), device=dev, requires_grad=True)
                if affine else None for lo, hi in ((-1.0, 1.0), (1.0, 0.0)))
        y = lib.nn.functional.group_norm(xt, 2, w, b)
        gs = lib.autograd.grad(y, [xt] + ([w, b] if affine else []), lib.tensor(gy, device=dev))
        seen.append([g.cpu().numpy() for g in gs])
    for want, got in zip(*seen):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)
