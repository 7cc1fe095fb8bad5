"""The model panel's watch of nbgrad's gradients without tensor hooks (``grad_batch``), and the
engine's end-of-backward callbacks it rests on (``engine.queue_callback``), in this process.

A watched parameter of nbgrad's engine gets no hook: its ``.grad`` is noted before each backward
call and read once the call is over. Checked: torch's behaviour of ``queue_callback`` (the oracle
where torch can say), the numbers against numpy's reading of the same ``.grad`` (computed here,
not by the panel), that no hook is registered and the gradients are those of a run without the
panel, and the cases the hooks used to cover: a backward that stops half-way, ``autograd.grad``,
a second backward summed into ``.grad`` (no ``zero_grad``).
"""

import math

import numpy as np
import pytest

import nbgrad
from nbgrad import nn
from nbgrad.autograd import engine
from nbgrad.notebook import grad_batch, model_hooks


@pytest.fixture
def tracker():
    t = model_hooks.ModelTracker()
    t.install()
    try:
        t.reset_cell()
        yield t
    finally:
        t.uninstall()


def _net(seed=0):
    nbgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3), nn.Tanh(),
                         nn.Linear(3, 1))


def _hooks_counted(monkeypatch):
    calls = []
    orig = nbgrad.Tensor.register_hook

    def counted(self, fn):
        calls.append(fn)
        return orig(self, fn)

    monkeypatch.setattr(nbgrad.Tensor, "register_hook", counted)
    return calls


# --- engine.queue_callback ------------------------------------------------------------------


def test_queue_callback_outside_backward_raises_torchs_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as theirs:
        torch.autograd.Variable._execution_engine.queue_callback(lambda: None)
    with pytest.raises(RuntimeError) as ours:
        engine.queue_callback(lambda: None)
    assert str(ours.value) == str(theirs.value)


def test_queued_callback_runs_once_the_pass_is_over():
    x = nbgrad.ones(3, requires_grad=True)
    seen = []

    def hook(g):  # (queued from inside the pass, as torch's; .grad set when it runs)
        engine.queue_callback(lambda: seen.append(x.grad.tolist() if x.grad is not None
                                                   else None))

    x.register_hook(hook)
    (x * 2).sum().backward()
    assert seen == [[2.0, 2.0, 2.0]]


def test_on_error_callbacks_alone_run_when_the_pass_raises():
    x = nbgrad.ones(3, requires_grad=True)
    y = x.sigmoid()
    ran = []

    def hook(g):
        engine.queue_callback(lambda: ran.append("plain"))
        engine.queue_callback(lambda: ran.append("on_error"), on_error=True)

    y.register_hook(hook)
    y.mul_(2)  # the output Sigmoid saved is modified: its backward raises
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    assert ran == ["on_error"]
    assert engine._FINAL == []  # (nothing left queued for a later call)


# --- the tracker's watch without hooks ----------------------------------------------------------


def test_gradients_read_without_hooks_equal_numpys_reading(tracker, monkeypatch):
    hooks = _hooks_counted(monkeypatch)
    net = _net()
    x = nbgrad.randn(4, 5)
    net(x).pow(2).mean().backward()
    assert hooks == []  # watched without a single tensor hook
    total = 0.0
    for name, p in net.named_parameters():
        g = p.grad.numpy().reshape(-1)
        st = tracker.params[id(p)]
        assert st.armed is None and st.hits == 1 and st.accumulated == 1, name
        assert list(st.norms) == [math.sqrt(float(g @ g))], name
        assert st.zeros == np.count_nonzero(g == 0) / g.size, name
        total += float(g @ g)
    assert len(tracker.step_norms) == 1
    assert tracker.step_norms[0][1] == pytest.approx(total, rel=1e-12)
    assert tracker.watched_backwards == 1 and tracker.batch.unhooked == []
    tracker.uninstall()
    plain = _net()
    plain(x).pow(2).mean().backward()
    for (name, p), q in zip(net.named_parameters(), plain.parameters()):
        assert np.array_equal(p.grad.numpy(), q.grad.numpy()), name  # the panel changed nothing


def test_a_backward_that_stops_half_way_reads_what_it_reached(tracker):
    nbgrad.manual_seed(1)
    net = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid(), nn.ReLU(inplace=True), nn.Linear(4, 1))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        net(nbgrad.randn(6, 4)).pow(2).mean().backward()
    reached = {n for n, p in net.named_parameters() if p.grad is not None}
    assert reached == {"3.weight", "3.bias"}  # ground truth: what the engine wrote
    for n, p in net.named_parameters():
        st = tracker.params[id(p)]
        if n in reached:
            g = p.grad.numpy().reshape(-1)
            assert st.hits == 1 and list(st.norms) == [math.sqrt(float(g @ g))], n
        else:
            assert st.hits == 0 and st.armed is grad_batch.UNHOOKED, n  # still watched


def test_autograd_grad_is_read_by_a_hook_then(tracker):
    net = _net(2)
    out = net(nbgrad.randn(3, 5)).sum()
    grads = nbgrad.autograd.grad(out, list(net.parameters()))
    for p, g in zip(net.parameters(), grads):
        st = tracker.params[id(p)]
        a = g.numpy().reshape(-1)
        assert p.grad is None and st.hits == 1
        assert list(st.norms) == [math.sqrt(float(a @ a))]


def test_a_second_backward_without_zero_grad_is_counted(tracker):
    net = _net(3)
    x = nbgrad.randn(4, 5)
    net(x).sum().backward()
    first = [p.grad.numpy().copy() for p in net.parameters()]
    tracker.reset_cell()  # the next cell: watching again
    net(x).sum().backward()  # summed into the first gradients
    for p, g in zip(net.parameters(), first):
        st = tracker.params[id(p)]
        assert st.accumulated == 2 and st.max_accumulated == 2
        assert st.norms[-1] == pytest.approx(float(np.linalg.norm(g)), rel=1e-6)  # the new
        # gradient alone (the same input: equal to the first), not the sum
