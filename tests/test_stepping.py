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


# .grad as AccumulateGrad leaves it: the walk's buffers are owned as the engine's, so .grad's
# _version, its memory (shared between leaves, with a hook's tensor) are those of backward()
def _owned(m):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    return [a], [], (a * 2).sum()


def _twice_to_one_leaf(m):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    return [a], [], (a * a + a).sum()


def _expanded(m):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    b = m.tensor(2.0, requires_grad=True)
    return [a, b], [], a.sum() + b


def _added_in_buffer(m):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    b = a + 1  # AddBackward0 passes its buffer on: two additions into it, version 1
    return [a], [], (b * 2).sum() + (b * 3).sum()


def _one_array_two_leaves(m):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    b = m.tensor([3.0, 0.5, -1.0], requires_grad=True)
    return [a, b], [], ((a + b) * m.tensor([1.0, 2.0, 3.0])).sum()


# the first AccumulateGrad to run copies the array the other's buffer still holds, the last
# takes it; which leaf runs first differs (nbgrad: the later leaf; torch: its heap's tie order)
_one_array_two_leaves.order_free = True


def _leaf_hooks(m):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    b = m.tensor([3.0, 0.5, -1.0], requires_grad=True)
    c = m.tensor([0.5, 0.25, 2.0], requires_grad=True)
    kept = []
    a.register_hook(lambda g: g * 2)
    b.register_hook(kept.append)  # sees the gradient, keeps it, returns None
    c.register_hook(lambda g: kept.append(g * 3) or kept[-1])  # returns one it keeps
    return [a, b, c], kept, (a * b * c * 2).sum()


def _second_backward(m):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    (a * 3).sum().backward()  # .grad exists: the walk adds into it in place
    return [a], [], (a * a).sum()


GRAD_PROGRAMS = [_owned, _twice_to_one_leaf, _expanded, _added_in_buffer, _one_array_two_leaves,
                 _leaf_hooks, _second_backward]


def _grad_facts(leaves, kept):
    """Each leaf's .grad: its _version, and which tensors (leaves' grads, hooks' kept tensors)
    share its memory; values as bytes."""
    grads = [t.grad for t in leaves]
    others = grads + list(kept)
    return [(g._version, g.dtype, tuple(g.shape),
             [j for j, o in enumerate(others) if o is not g and o.data_ptr() == g.data_ptr()])
            for g in grads]


@pytest.mark.parametrize("prog", GRAD_PROGRAMS, ids=lambda f: f.__name__)
def test_walk_grads_are_backwards_grads(prog):
    leaves, kept, root = prog(nbgrad)
    before = [None if t.grad is None else t.grad for t in leaves]
    BackwardWalk(root).run()
    leaves2, kept2, root2 = prog(nbgrad)
    before2 = [None if t.grad is None else t.grad for t in leaves2]
    root2.backward()
    tleaves, tkept, troot = prog(torch)
    tbefore = [None if t.grad is None else t.grad for t in tleaves]
    troot.backward()
    ours, plain, theirs = (_grad_facts(leaves, kept), _grad_facts(leaves2, kept2),
                           _grad_facts(tleaves, tkept))
    assert ours == plain
    facts = [(v, s, sh) for v, _, s, sh in ours]
    tfacts = [(v, s, sh) for v, _, s, sh in theirs]
    if getattr(prog, "order_free", False):
        facts, tfacts = sorted(facts), sorted(tfacts)
    assert facts == tfacts
    assert str(ours[0][1]).split(".")[-1] == str(theirs[0][1]).split(".")[-1]
    # the same .grad object as before an accumulation, when there was one (as torch's)
    assert [a is b.grad for a, b in zip(before, leaves)] == \
        [a is b.grad for a, b in zip(before2, leaves2)] == \
        [a is b.grad for a, b in zip(tbefore, tleaves)]
    for a, b, t in zip(leaves, leaves2, tleaves):
        assert a.grad.numpy().tobytes() == b.grad.numpy().tobytes()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.detach().numpy(), rtol=1e-6)


# formula lines for the nodes without a row: CopySlices, a custom Function (its backward's body)
class _Cube(nbgrad.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        """d/dx x³."""
        x, = ctx.saved_tensors

        # the chain rule
        return g * 3 * x * x


def test_formula_lines_of_a_custom_function_and_copyslices():
    import html

    from nbgrad.notebook.adapter_nbgrad import formula_lines as node_lines
    from nbgrad.notebook.stepper import StepPanel

    a = nbgrad.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = _Cube.apply(a)
    b = y * 1
    b[1:].tanh_()
    loss = b.sum()
    assert type(y.grad_fn).__name__ == "_CubeBackward"
    assert node_lines(y.grad_fn) == ["_Cube.backward:", "    x, = ctx.saved_tensors",
                                     "    # the chain rule", "    return g * 3 * x * x"]
    assert b.grad_fn.name().rsplit("::", 1)[-1] == "CopySlices"
    assert node_lines(b.grad_fn) == [
        "self: g, its view's part replaced by TanhBackward0(g[view])[0]"] + \
        ["  TanhBackward0: " + ln for ln in formula_lines(ROWS["tanh"])]
    # the panel shows them at their step; its walk ends as backward() and torch
    panel = StepPanel(loss, [("a", a), ("y", y), ("b", b)])
    shown = []
    while not panel.walk.done:
        panel.next()
        shown.append(html.unescape(panel.html()))
    by_name = {s.name.rsplit("::", 1)[-1]: i for i, s in enumerate(panel.walk.steps)}
    assert "return g * 3 * x * x" in shown[by_name["_CubeBackward"]]
    assert "replaced by TanhBackward0(g[view])[0]" in shown[by_name["CopySlices"]]
    assert "a.grad += g" in shown[by_name["AccumulateGrad"]]

    class Cube(torch.autograd.Function):
        forward, backward = staticmethod(_Cube.forward), staticmethod(_Cube.backward)
    t = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    tb = Cube.apply(t) * 1
    tb[1:].tanh_()
    assert type(tb.grad_fn).__name__ == "CopySlices"
    tb.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def _post_acc(m, log):
    a = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    b = m.tensor([3.0, 0.5, -1.0], requires_grad=True)
    a.register_post_accumulate_grad_hook(
        lambda t: log.append(("a", t is a, t.grad.tolist(), t.grad._version)))
    b.register_post_accumulate_grad_hook(
        lambda t: log.append(("b", t is b, t.grad.tolist(), t.grad._version)))
    b.register_post_accumulate_grad_hook(lambda t: [t.grad.mul_(2)] and None)  # (a step)
    b.register_post_accumulate_grad_hook(lambda t: log.append("removed")).remove()
    return [a, b], (a * b).sum() + (a * 3).sum()


def test_post_accumulate_grad_hooks_in_the_walk_as_in_backward():
    walked, plain, theirs = [], [], []
    leaves, root = _post_acc(nbgrad, walked)
    BackwardWalk(root).run()
    leaves2, root2 = _post_acc(nbgrad, plain)
    root2.backward()
    tleaves, troot = _post_acc(torch, theirs)
    troot.backward()
    assert walked == plain and sorted(walked) == sorted(theirs) and len(walked) == 2
    for a, b, t in zip(leaves, leaves2, tleaves):
        assert a.grad.tolist() == b.grad.tolist() == t.grad.tolist()
        assert a.grad._version == b.grad._version == t.grad._version


def test_post_accumulate_grad_hook_errors_as_torch():
    got = []
    for m in (nbgrad, torch):
        a = m.ones(2, requires_grad=True)
        msgs = []
        for t in (a * 2, m.ones(2)):
            with pytest.raises(RuntimeError) as e:
                t.register_post_accumulate_grad_hook(lambda t: None)
            msgs.append(str(e.value))
        a.register_post_accumulate_grad_hook(lambda t: 5)
        with pytest.raises(TypeError) as e:
            (a * 2).sum().backward()
        msgs.append(str(e.value))
        got.append(msgs)
    assert got[0] == got[1]
