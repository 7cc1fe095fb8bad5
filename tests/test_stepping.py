"""nbgrad.autograd.stepping.BackwardWalk: `backward()` one node at a time is the engine's walk.

Each program is built three times: walked node by node; run by a plain `backward()` with a
pre-hook on every node (the engine's order as it runs); and in PyTorch (its engine's order and
its gradients). The walk must visit the nodes a gradient reaches in both engines' order, and end
with every leaf's `.grad` bit for bit that of the plain backward (and torch's values).
"""

import numpy as np
import pytest
import torch

import nbgrad
from nbgrad.autograd.stepping import BackwardWalk
from nbgrad.ops.formulas import ROWS
from nbgrad.ops.formula_text import formula_lines, pretty, source_of


def _linear_ce(m):
    m.manual_seed(0)
    lin = m.nn.Linear(4, 3)
    x = m.randn(5, 4)
    y = m.tensor([0, 2, 1, 1, 0])
    return list(lin.parameters()), m.nn.functional.cross_entropy(lin(x), y)


def _multi_out(m):
    a = m.tensor([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]], requires_grad=True)
    u, v = a.unbind(0)
    p, q = a.split([1, 2], dim=1)
    return [a], (u * v).sum() + (p.exp() * q.sum()).sum() + a.t().mean()


def _views_inplace(m):
    a = m.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = a * 2
    b[1:3].mul_(a[:2])
    return [a], (b * b).sum()


def _shared_weight(m):
    w = m.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    h = m.tensor([1.0, -1.0], requires_grad=True)
    for _ in range(3):
        h = (w @ h).tanh()
    return [w], h.pow(2).sum()


def _hooks(m):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    b = a.sigmoid()
    b.retain_grad()
    b.register_hook(lambda g: g * 3)
    c = (b * a).sum()
    return [a, b], c


PROGRAMS = [_linear_ce, _multi_out, _views_inplace, _shared_weight, _hooks]


def _order(root):
    seen, out, stack = set(), [], [root.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        n.register_prehook(lambda g, n=n: out.append(n.name().rsplit("::", 1)[-1]))
        stack.extend(c for c, _ in n.next_functions)
    root.backward()
    return out


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda f: f.__name__)
def test_walk_is_backward(prog):
    torch.set_num_threads(1)
    leaves, root = prog(nbgrad)
    walk = BackwardWalk(root)
    steps = walk.run()
    assert walk.done and walk.error is None and walk.pending() is None
    leaves2, root2 = prog(nbgrad)
    plain = _order(root2)
    walked = [s.name.rsplit("::", 1)[-1] for s in steps if s.grad_in is not None]
    assert walked == plain
    tleaves, troot = prog(torch)
    assert walked == _order(troot)
    for a, b, t in zip(leaves, leaves2, tleaves):
        assert a.grad is not None and b.grad is not None
        assert a.grad.dtype == b.grad.dtype and a.grad.shape == b.grad.shape
        assert a.grad.numpy().tobytes() == b.grad.numpy().tobytes()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_grad_mode_is_the_users_between_steps():
    a = nbgrad.tensor([1.0, 2.0], requires_grad=True)
    walk = BackwardWalk((a.exp() * a).sum())
    walk.step()
    assert nbgrad.is_grad_enabled()
    c = a * 2  # a cell run between two clicks records its graph as usual
    assert c.grad_fn is not None
    walk.run()
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    (t.exp() * t).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_stale_saved_tensor_stops_the_walk_with_backwards_error():
    def build(m):
        x = m.ones(3, requires_grad=True)
        y = x.tanh()
        z = (y * 2).sum()
        y.add_(1)
        return z
    walk = BackwardWalk(build(nbgrad))
    steps = walk.run()
    assert walk.done and steps[-1].error is walk.error
    assert steps[-1].name == "TanhBackward0"
    with pytest.raises(RuntimeError) as real:
        build(nbgrad).backward()
    assert str(walk.error) == str(real.value)
    with pytest.raises(RuntimeError) as theirs:
        build(torch).backward()
    assert str(theirs.value).split("[")[0] == str(walk.error).split("[")[0]
    assert walk.error.nbgrad_context["node_name"] == real.value.nbgrad_context["node_name"]


def test_refuses_what_backward_refuses():
    x = nbgrad.ones(3, requires_grad=True)
    for bad in (x * 2, nbgrad.ones(1)):
        with pytest.raises(RuntimeError) as ours:
            BackwardWalk(bad)
        t = torch.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError) as theirs:
            (t * 2 if bad.requires_grad else torch.ones(1)).backward()
        assert str(ours.value) == str(theirs.value)


def test_saved_tensors_freed_as_backward_frees_them():
    a = nbgrad.tensor([1.0, 2.0], requires_grad=True)
    y = a.exp()
    walk = BackwardWalk(y.sum())
    walk.run()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.sum().backward()


def test_accumulation_parts_add_up_to_the_gradient():
    a = nbgrad.tensor(3.0, requires_grad=True)
    walk = BackwardWalk(a * a + a)
    steps = walk.run()
    acc = [s for s in steps if s.leaf is not None]
    assert len(acc) == 1 and len(acc[0].parts[0]) == 3
    total = None
    for _, _, g in acc[0].parts[0]:
        total = g if total is None else total + g
    assert total == acc[0].grad_in == a.grad.item()
    t = torch.tensor(3.0, requires_grad=True)
    (t * t + t).backward()
    assert a.grad.item() == t.grad.item()


def test_formula_text_is_the_rows_source():
    assert formula_lines(ROWS["tanh"]) == ["self: g * (1 - result²)"]
    assert formula_lines(ROWS["mul"]) == ["self: g * other", "other: g * self"]
    for row in ROWS.values():
        for line, f in zip(formula_lines(row), [f for f in row.formulas if f is not None]):
            assert line.split(": ", 1)[1] == pretty(source_of(f))
    assert pretty("g * x * x + y * y.sum()") == "g * x² + y * y.sum()"


def test_detect_anomaly_stops_the_walk_as_backward():
    def build(m):
        a = m.tensor([0.0, 1.0], requires_grad=True)
        return (a.sqrt() * 0).sum()  # sqrt's gradient at 0 times 0: NaN
    with nbgrad.autograd.detect_anomaly():
        walk = BackwardWalk(build(nbgrad))
        walk.run()
        with pytest.raises(RuntimeError) as real:
            build(nbgrad).backward()
    with pytest.warns(UserWarning), torch.autograd.detect_anomaly():
        with pytest.raises(RuntimeError) as theirs:
            build(torch).backward()
    assert walk.error is not None and str(walk.error) == str(real.value)
    assert str(walk.error) == str(theirs.value)
    assert walk.steps[-1].name == "SqrtBackward0"
