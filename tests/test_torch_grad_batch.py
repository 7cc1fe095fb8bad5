"""The model panel's gradient statistics over torch, read in one batch after each backward pass
(``nbgrad/notebook/grad_batch.py``), in this process (no kernel).

Each number the Gradients tab shows (gradient norm, fraction of exact zeros, update/weight ratio,
gradients summed without ``zero_grad``) is checked against torch's own reading of the same
tensors; the batch path is checked to be the one taken, to keep no tensor, and to change nothing
torch computes.
"""

import gc
import math
import weakref

import pytest

torch = pytest.importorskip("torch")

from nbgrad.notebook import adapter_torch as T  # noqa: E402
from nbgrad.notebook import grad_batch, model_hooks  # noqa: E402


def _net():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3),
                              torch.nn.Linear(3, 3, bias=False))
    with torch.no_grad():
        net[0].bias[:8] = -50.0  # dead ReLU units: exact zeros in the gradients below them
    return net


def _train(tracker, steps, set_to_none=True, forget=False, functional=False):
    net = _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    xb, yb, mse = torch.randn(6, 4), torch.randn(6, 3), torch.nn.MSELoss()
    grads, before, after, losses = [], [], [], []
    if tracker is not None:
        tracker.reset_cell()
    for i in range(steps):
        if not forget or i == 0:
            opt.zero_grad(set_to_none=set_to_none)
        # (a loss module: the steps are counted by its hook; a functional loss: by the model's)
        loss = torch.nn.functional.mse_loss(net(xb), yb) if functional else mse(net(xb), yb)
        loss.backward()
        grads.append([p.grad.clone() for p in net.parameters()])
        before.append([p.detach().clone() for p in net.parameters()])
        opt.step()
        after.append([p.detach().clone() for p in net.parameters()])
        losses.append(loss.item())
    return net, grads, before, after, losses


@pytest.fixture
def tracker():
    t = model_hooks.ModelTracker()
    t.install()
    try:
        yield t
    finally:
        t.uninstall()


@pytest.mark.parametrize("set_to_none", [True, False])
def test_gradient_numbers_equal_torchs(tracker, monkeypatch, set_to_none):
    """Norm, exact zeros and update ratio of each parameter, the watched step's, against torch:
    with ``zero_grad()`` (``.grad`` None: read in one batch after the pass) and with
    ``zero_grad(set_to_none=False)`` (zeros summed into: read at once, through numpy)."""
    batches = []
    orig = T.grad_stats
    monkeypatch.setattr(T, "grad_stats", lambda gs: batches.append(len(gs)) or orig(gs))
    net, grads, before, after, _ = _train(tracker, 3, set_to_none)
    for k, p in enumerate(net.parameters()):
        st = tracker.params[id(p)]
        assert len(st.norms) >= 2  # the sparkline's points: the watched steps 1, 2, ...
        # read in one batch of the 5 parameters after each pass when .grad was None (with
        # set_to_none=False only the first, a new model's)
        assert batches == ([5] * len(st.norms) if set_to_none else [5])
        for norm, g in zip(st.norms, grads):
            want = float(torch.linalg.vector_norm(g[k].double()))
            assert math.isclose(norm, want, rel_tol=1e-6), (k, norm, want)
        g = grads[len(st.norms) - 1][k]
        assert st.zeros == pytest.approx(float((g == 0).double().mean()), abs=0)
        w0, w1 = before[0][k].double(), after[0][k].double()
        want = float(torch.linalg.vector_norm(w1 - w0) / torch.linalg.vector_norm(w1))
        assert len(st.ratios) == 1 and math.isclose(st.ratios[0], want, rel_tol=1e-5)
        assert st.max_accumulated == 1 and not st.nonfinite
    assert any(tracker.params[id(p)].zeros > 0.4 for p in net.parameters())  # the dead units


@pytest.mark.parametrize("functional", [False, True])
def test_update_ratio_covers_one_step(tracker, functional):
    """The update/weight ratio shown is the first optimizer step's, ||w1 - w0|| / ||w1||, with a
    loss module and with a functional loss (``F.mse_loss``: no loss module; the second step's
    model pre-hook reads it before any node of that step is made), never two steps'."""
    net, _, before, after, _ = _train(tracker, 4, functional=functional)
    for k, p in enumerate(net.parameters()):
        st = tracker.params[id(p)]
        w0, w1 = before[0][k].double(), after[0][k].double()
        want = float(torch.linalg.vector_norm(w1 - w0) / torch.linalg.vector_norm(w1))
        assert len(st.ratios) == 1 and math.isclose(st.ratios[0], want, rel_tol=1e-5), (
            k, list(st.ratios), want)


def test_forgotten_zero_grad_is_still_seen(tracker):
    """A second backward summed into the first's ``.grad``: counted as accumulated."""
    net, *_ = _train(tracker, 3, forget=True)
    assert all(tracker.params[id(p)].max_accumulated >= 2 for p in net.parameters())


def test_a_non_finite_gradient_is_flagged(tracker):
    net = _net()
    x = torch.randn(2, 4)
    net.zero_grad()
    tracker.reset_cell()
    (net(x) * float("inf")).sum().backward()
    assert all(tracker.params[id(p)].nonfinite for p in net.parameters())


def test_values_identical_and_nothing_kept(tracker):
    """The same losses bit for bit with and without the tracker; after each pass nothing is
    left pending, and a dropped model's parameters and gradients are freed."""
    _, _, _, _, with_ = _train(tracker, 6)
    _, _, _, _, without = _train(None, 6)
    assert [v.hex() for v in with_] == [v.hex() for v in without]
    assert tracker.batch.pending == []
    net, *_ = _train(tracker, 2)
    refs = [weakref.ref(p) for p in net.parameters()] + [weakref.ref(p.grad)
                                                         for p in net.parameters()]
    del net
    gc.collect()
    assert all(r() is None for r in refs)


def test_segment_stats_against_numpy():
    """Empty tensors, -0.0 counted as a zero, squares summed per tensor."""
    gs = [torch.tensor([0.0, -0.0, 3.0]), torch.zeros(0), torch.tensor([[4.0, 0.0]]),
          torch.tensor(2.0)]
    assert T.grad_stats(gs) == [(9.0, 2, 3), (0.0, 0, 0), (16.0, 1, 2), (4.0, 0, 1)]
    bf = [torch.tensor([0.0, 3.0], dtype=torch.bfloat16), torch.zeros(0), torch.tensor([4.0])]
    assert T.grad_stats(bf) == [(9.0, 1, 2), (0.0, 0, 0), (16.0, 0, 1)]  # (one concatenation)
    assert T.grad_stats([torch.ones(2, dtype=torch.complex64)]) is None  # (read one by one)


def test_no_batch_outside_a_backward():
    assert T.after_backward(lambda: None) is False
    b = grad_batch.GradBatch(None)
    b.flush()  # nothing pending: nothing read
