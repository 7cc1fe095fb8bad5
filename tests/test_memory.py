"""Memory behaviour of the core, with the cyclic garbage collector off: graphs and saved arrays are
freed by reference counting alone (no cycles), backward releases saved tensors unless
retain_graph, and long chains neither recurse nor leak."""
from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

import nbgrad
from nbgrad import backend
from nbgrad.autograd.graph import SavedTensor


@pytest.fixture
def nogc():
    """Cyclic GC off for the test (reference counting only), collected and restored after."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        if was:
            gc.enable()
        gc.collect()


def live():
    return backend.memory_stats()["live_bytes"]


def _saved(node):
    return list(node._saved_tensors())


def _nbgrad_garbage():
    """Run the collector keeping what it finds; return the found objects of nbgrad's types."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [o for o in gc.garbage if type(o).__module__.startswith("nbgrad")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


# ------------------------------------------------------------------------------------------------
def _mlp_loss():
    x = nbgrad.randn(16, 8)
    w1 = nbgrad.randn(8, 32, requires_grad=True)
    w2 = nbgrad.randn(32, 1, requires_grad=True)
    h = (x @ w1).tanh()
    y = (h @ w2).sigmoid()
    loss = ((y - 0.5) ** 2).mean()
    return loss, (w1, w2)


def test_dropping_loss_frees_graph_and_saved_arrays(nogc):
    base = live()
    loss, params = _mlp_loss()
    assert live() > base
    node = loss.grad_fn
    nodes, saved, arrays = [], [], []
    stack = [node]
    while stack:  # every node reachable from the loss
        n = stack.pop()
        if n is None or any(n is m() for m in nodes):
            continue
        nodes.append(weakref.ref(n))
        for s in _saved(n):
            saved.append(weakref.ref(s))
            if s._data is not None and not any(s._data is p._data for p in params):
                arrays.append(weakref.ref(s._data))
        stack.extend(f for f, _ in n.next_functions)
    assert len(nodes) >= 8 and saved and arrays
    del node, stack, n, s
    param_bytes = sum(p.nbytes for p in params)
    del loss
    assert [r for r in nodes if r() is not None and type(r()).__name__ != "AccumulateGrad"] == []
    assert all(r() is None for r in saved)
    assert all(r() is None for r in arrays)
    assert live() == base + param_bytes
    del params
    assert all(r() is None for r in nodes)
    assert live() == base


def test_backward_frees_saved_but_keeps_graph_until_loss_dropped(nogc):
    base = live()
    loss, params = _mlp_loss()
    saved = [s for s in _all_saved(loss.grad_fn)]
    assert saved and not any(s.released for s in saved)
    before = live()
    loss.backward()
    assert all(s.released for s in saved)
    grads = sum(p.grad.nbytes for p in params)
    assert live() < before + grads  # saved intermediates released by backward
    node = weakref.ref(loss.grad_fn)
    del loss
    assert node() is None
    del params, saved
    assert live() == base


def _all_saved(node, seen=None):
    seen = set() if seen is None else seen
    if node is None or id(node) in seen:
        return []
    seen.add(id(node))
    out = _saved(node)
    for f, _ in node.next_functions:
        out += _all_saved(f, seen)
    return out


def test_retain_graph_keeps_saved_tensors(nogc):
    a = nbgrad.randn(5, requires_grad=True)
    y = (a.exp() * a).tanh().sum()
    saved = _all_saved(y.grad_fn)
    y.backward(retain_graph=True)
    assert saved and not any(s.released for s in saved)
    g = a.grad.clone()
    y.backward()
    assert all(s.released for s in saved)
    np.testing.assert_allclose(a.grad.numpy(), 2 * g.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_saved_tensor_released_by_autograd_grad(nogc):
    a = nbgrad.randn(4, requires_grad=True)
    y = (a * a).sum()
    saved = _all_saved(y.grad_fn)
    nbgrad.autograd.grad(y, a, retain_graph=True)
    assert not any(s.released for s in saved)
    nbgrad.autograd.grad(y, a)
    assert all(s.released for s in saved)


def test_saved_output_does_not_keep_its_node_alive(nogc):
    a = nbgrad.randn(3, requires_grad=True)
    y = a.exp()  # ExpBackward0 saves its own output
    node = weakref.ref(y.grad_fn)
    (s,) = _saved(y.grad_fn)
    assert isinstance(s, SavedTensor) and s.is_output
    del y, s
    assert node() is None


def test_intermediates_freed_during_forward(nogc):
    base = live()
    x = nbgrad.randn(256, 256)
    after_x = live()
    y = ((x * 2) + 1).sum()  # no grad: temporaries die at once
    assert live() - after_x == y.nbytes
    del x, y
    assert live() == base


def test_long_chain_backward_no_recursion(nogc):
    n = 100_000
    a = nbgrad.ones(1, requires_grad=True)
    y = a
    for _ in range(n):
        y = y * 1.0
    assert n > sys.getrecursionlimit()
    y.sum().backward()
    assert a.grad.tolist() == [1.0]
    node = weakref.ref(y.grad_fn)
    del y  # freeing a deep chain must not overflow the C stack either
    assert node() is None


def test_long_chain_dropped_without_backward(nogc):
    base = live()
    a = nbgrad.ones(1, requires_grad=True)
    y = a
    for _ in range(100_000):
        y = (y * 1.0).exp()  # each node saves (1,) arrays
    node = weakref.ref(y.grad_fn)
    del y
    assert node() is None
    del a
    assert live() == base


def test_long_chain_with_views_and_saves(nogc):
    n = 20_000
    a = nbgrad.ones(2, requires_grad=True)
    y = a
    for _ in range(n):
        y = (y * 1.0).view(2).tanh() + 0.0 * y
    y.sum().backward()
    assert a.grad is not None and np.isfinite(a.grad.numpy()).all()
    del y
    assert [type(o).__name__ for o in _nbgrad_garbage()] == []


CYCLE_SCENARIOS = {}


def scenario(f):
    CYCLE_SCENARIOS[f.__name__] = f
    return f


@scenario
def plain():
    loss, params = _mlp_loss()
    loss.backward()


@scenario
def retain_grad_and_hooks():
    a = nbgrad.randn(4, requires_grad=True)
    b = a * 2
    b.retain_grad()
    h = a.register_hook(lambda g: g * 2)
    c = b.exp()
    c.grad_fn.register_hook(lambda gi, go: None)
    c.grad_fn.register_prehook(lambda go: None)
    c.sum().backward()
    h.remove()


@scenario
def inplace_and_views():
    a = nbgrad.randn(4, 3, requires_grad=True)
    b = a * 1
    v = b[1:]
    v.mul_(2)
    w = b.t()
    b.add_(1)
    (b.sum() + w.sum() + v.sum()).backward()


@scenario
def multi_output_and_index():
    a = nbgrad.randn(4, 3, requires_grad=True)
    parts = a.split(2)
    m, i = a.max(1)
    (parts[0].sum() + m.sum() + a[nbgrad.tensor([0, 0, 2])].sum()).backward()


class _SqSavesInput(nbgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.k = 2
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return ctx.k * x * g


class _SqSavesOutput(nbgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * x
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return 2 * x * g


@scenario
def custom_function_saving_input():
    a = nbgrad.randn(3, requires_grad=True)
    _SqSavesInput.apply(a).sum().backward()
    _SqSavesInput.apply(a)


@scenario
def custom_function_saving_output():
    a = nbgrad.randn(3, requires_grad=True)
    _SqSavesOutput.apply(a).sum().backward()
    _SqSavesOutput.apply(a)


@scenario
def create_graph_with_autograd_grad():
    a = nbgrad.randn(3, requires_grad=True)
    (g,) = nbgrad.autograd.grad((a ** 3).sum(), a, create_graph=True)
    (h,) = nbgrad.autograd.grad(g.sum(), a)


@scenario
def saved_tensors_hooks():
    with nbgrad.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
        a = nbgrad.randn(3, requires_grad=True)
        y = (a * a).sum()
    y.backward()


@scenario
def anomaly_mode():
    with nbgrad.autograd.detect_anomaly():
        a = nbgrad.randn(3, requires_grad=True)
        (a.exp() * a).sum().backward()


@scenario
def no_grad_and_detach():
    a = nbgrad.randn(3, requires_grad=True)
    with nbgrad.no_grad():
        b = a * 2
    c = a.detach()
    c.add_(1)
    d = a.data
    assert not d.requires_grad
    (a * b).sum().backward()


CYCLE_BUGS = {}  # scenario -> reason, for core bugs reported and open


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=f"core bug: {CYCLE_BUGS[n]}", strict=True))
    if n in CYCLE_BUGS else n for n in sorted(CYCLE_SCENARIOS)])
def test_no_reference_cycles(nogc, name):
    gc.collect()
    base = live()
    CYCLE_SCENARIOS[name]()
    found = sorted({type(o).__name__ for o in _nbgrad_garbage()})  # names only: keep no refs
    assert found == []
    assert live() == base


def test_custom_function_and_copyslices_saved_released(nogc):
    a = nbgrad.randn(3, requires_grad=True)
    y = _SqSavesInput.apply(a)
    b = a * 1
    b[1:].mul_(a[1:])  # CopySlices around MulBackward0 (saves both operands)
    z = b.exp()
    loss = y.sum() + z.sum()
    saved = _all_saved(loss.grad_fn)
    kinds = {type(s).__name__ for s in saved}
    assert saved and kinds == {"SavedTensor"}
    loss.backward(retain_graph=True)
    assert not any(s.released for s in saved)
    loss.backward()
    assert all(s.released for s in saved)


def test_retain_graph_then_drop_frees_everything(nogc):
    base = live()
    loss, params = _mlp_loss()
    loss.backward(retain_graph=True)
    saved = [weakref.ref(s) for s in _all_saved(loss.grad_fn)]
    assert all(r() is not None for r in saved)
    del loss
    assert all(r() is None for r in saved)
    del params
    assert live() == base


def test_data_inplace_keeps_the_parameter_storage_and_version(nogc):
    """`p.data += u` (manual SGD) writes p's memory: p keeps its version counter (torch: 0, the
    in-place op bumped `.data`'s own counter) and its bytes stay counted while p lives."""
    import torch
    versions = {}
    for lib in (torch, nbgrad):
        p = lib.ones(1000, requires_grad=True)
        p.data += 1
        p.data.mul_(2)
        versions[lib.__name__] = (p._version, p.data._version, float(p.detach().sum()))
    assert versions["nbgrad"] == versions["torch"] == (0, 0, 4000.0)
    del p
    before = live()
    p = nbgrad.ones(1000, requires_grad=True)
    assert live() - before == 4000
    st = p.untyped_storage()
    for _ in range(3):
        p.data += 1
    assert p.untyped_storage() is st and live() - before == 4000
    assert p.detach().sum().item() == 4000.0
    del p, st
    assert live() == before
    q = nbgrad.ones(3, requires_grad=True)
    q.data = nbgrad.zeros(5)  # another tensor's memory: q now shows it, as torch
    assert q.shape == (5,) and q.sum().item() == 0.0
