"""The gradients autograd.grad and backward hand out, against torch: which are views (PyTorch's
sum backward is an expand of the incoming gradient, t's a transpose of it), of what base, and
their `_version` (PyTorch's engine adds into a gradient buffer only it holds in place, and some
formulas write into zeros in place); the errors in-place ops and detach_ on them raise, word for
word. Each program runs in both libraries (tests/_differential.py compares values, .grad, flags,
versions, view bases and strides, and error texts)."""
from __future__ import annotations

import pytest
import torch

import nbgrad
from _differential import assert_same


def _leaf(T, values):
    return T.tensor(values, dtype=T.float64, requires_grad=True)


def _grads(e):
    """Observe the .grad tensors of the leaves in `e` too (their own version and view)."""
    for k, t in list(e.items()):
        if getattr(t, "is_leaf", False) and t.requires_grad and t.grad is not None:
            e[k + ".grad"] = t.grad


X = [[0.5, -1.0, 2.0], [3.0, -0.25, 1.5]]


# ---- autograd.grad's results: views made in no_grad mode, or new tensors ----------------------
def grad_of_sum(T, e):
    e["x"] = x = _leaf(T, X)
    e["g"], = T.autograd.grad(x.sum(), (x,))  # an expand of the 0-d ones: strides (0, 0)
    e["row"] = e["g"][0]  # a view of it: the same base


def grad_of_sum_over_dim(T, e):
    e["x"] = x = _leaf(T, X)
    e["g"], = T.autograd.grad(x.sum(-1).sum(), (x,))
    e["h"], = T.autograd.grad(x.sum(0, keepdim=True), (x,), T.ones(1, 3, dtype=T.float64))


def grad_of_0d_sum(T, e):
    e["s"] = s = _leaf(T, 2.0)
    e["g"], = T.autograd.grad(s.sum(), (s,))  # expand to (): still a view


def grad_through_views(T, e):
    e["x"] = x = _leaf(T, X)
    e["t"], = T.autograd.grad(x.t().sum(), (x,))
    e["v"], = T.autograd.grad(x.view(-1).sum(), (x,))
    e["a"], = T.autograd.grad(x[...].sum(), (x,))  # AliasBackward0 passes the expand on
    e["c"], = T.autograd.grad((x + 1).sum(), (x,))


def grad_of_given_gradient_is_its_view(T, e):
    e["x"] = x = _leaf(T, X)
    e["go"] = go = T.ones(6, dtype=T.float64)
    e["g"], = T.autograd.grad(x.view(-1), (x,), go)
    e["same_base"] = e["g"]._base is go  # PyTorch: the caller's tensor itself


def grad_not_views(T, e):
    e["x"] = x = _leaf(T, X)
    e["s"] = s = _leaf(T, 2.0)
    e["m"], e["ms"] = T.autograd.grad((x * s).sum(), (x, s))
    e["e"], = T.autograd.grad(x.exp().sum(), (x,))
    e["sl"], = T.autograd.grad(x[1:].sum(), (x,))
    e["xx"], = T.autograd.grad((x + x).sum(), (x,))


def hook_result_is_not_a_view(T, e):
    e["x"] = x = _leaf(T, X)
    x.register_hook(lambda g: g * 2)
    e["g"], = T.autograd.grad(x.sum(), (x,))


@pytest.mark.parametrize("op", ["g.mul_(2)", "g.add_(s)", "g.relu_()", "g.clamp_(-1, 1)",
                                "g.exp_()", "g.detach_()", "g.copy_(g * 0)", "g[0] = 1.0",
                                "g.zero_()", "g.fill_(3.0)", "g.mul_(s)"])
def test_inplace_on_grad_of_sum(op):
    def prog(T, e):
        e["x"] = x = _leaf(T, X)
        e["s"] = s = _leaf(T, 2.0)
        e["g"], = T.autograd.grad(x.sum(), (x,))
        exec(op, {"g": e["g"], "s": s})  # noqa: S102
    assert_same(prog)


@pytest.mark.parametrize("op", ["g.add_(s)", "g.mul_(2)", "g.detach_()"])
def test_inplace_on_grad_of_sum_under_no_grad(op):
    def prog(T, e):
        e["x"] = x = _leaf(T, X)
        e["s"] = s = _leaf(T, 2.0)
        e["g"], = T.autograd.grad(x.sum(), (x,))
        with T.no_grad():
            exec(op, {"g": e["g"], "s": s})  # noqa: S102
    assert_same(prog)


def inplace_on_new_grad(T, e):
    e["x"] = x = _leaf(T, X)
    e["g"], = T.autograd.grad((x * 2).sum(), (x,))
    e["g"].mul_(3)  # a new tensor: allowed, version 1


# ---- _version: the engine's in-place additions, and formulas that write in place --------------
def scalar_gradient_summed_in_place(T, e):
    e["x"] = x = _leaf(T, [1.0, 2.0])
    e["s"] = s = _leaf(T, 2.0)
    e["a"], = T.autograd.grad((x * s).sum() + (x * s).sum(), (s,))
    e["b"], = T.autograd.grad(s * 2 + s * 3, (s,))
    e["z"] = z = T.zeros(2, 3, dtype=T.float64)
    z.add_(s)
    z.mul_(s)
    e["c"], = T.autograd.grad(z.sum(), (s,))


def product_gradient_summed_in_place(T, e):
    e["x"] = x = _leaf(T, X)
    e["g"], = T.autograd.grad((x * x).sum(), (x,))  # two new gradients: the second added in


def shared_gradient_not_summed_in_place(T, e):
    e["x"] = x = _leaf(T, X)
    e["g"], = T.autograd.grad((x + x).sum(), (x,))  # AddBackward0 hands one to both: a new sum


def given_gradient_not_summed_in_place(T, e):
    e["x"] = x = _leaf(T, X)
    e["go"] = go = T.ones(2, 3, dtype=T.float64)
    y = x * 1
    e["g"], = T.autograd.grad(y + y * 2, (x,), go)
    e["go_version"] = go._version


def leaf_grad_versions(T, e):
    e["x"] = x = _leaf(T, X)
    x.sum().backward()  # the expand is copied into .grad (empty + copy_: version 1)
    x.sum().backward()  # then added in place
    e["y"] = y = _leaf(T, X)
    (y * 2).sum().backward()  # a new gradient nothing else holds: .grad is it (version 0)
    e["z"] = z = _leaf(T, X)
    go = T.ones(2, 3, dtype=T.float64)
    (z * 1).backward(go)
    e["w"] = w = _leaf(T, X)
    w.backward(go)  # the caller's gradient itself: copied (version 1)
    e["v"] = v = _leaf(T, X)
    v.view(-1).backward(T.ones(6, dtype=T.float64))  # a view laid out as v: kept (version 0)
    e["h"] = h = _leaf(T, X)
    h.register_hook(lambda g: g * 2)
    h.sum().backward()  # the hook's new result: kept
    _grads(e)


def flip_and_cumsum_gradients_are_new(T, e):
    e["x"] = x = _leaf(T, X)
    e["f"], = T.autograd.grad(x.flip(1), (x,), T.ones(2, 3, dtype=T.float64))
    e["c"], = T.autograd.grad(x.cumsum(1), (x,), T.ones(2, 3, dtype=T.float64))
    x.flip(0).backward(T.ones(2, 3, dtype=T.float64))
    _grads(e)


FORMULAS_WRITING_IN_PLACE = {
    "index": lambda T, x: x[[0, 1, 0]], "mask": lambda T, x: x[x > 0],
    "index_select": lambda T, x: x.index_select(1, T.tensor([0, 2])),
    "gather": lambda T, x: x.gather(1, T.tensor([[0], [2]])),
    "masked_select": lambda T, x: x.masked_select(x > 0), "max": lambda T, x: x.max(),
    "min": lambda T, x: x.min(), "median": lambda T, x: x.median(),
    "max_dim": lambda T, x: x.max(1)[0], "min_dim": lambda T, x: x.min(0, keepdim=True)[0],
    "sort": lambda T, x: x.sort(1)[0], "topk": lambda T, x: x.topk(2)[0],
    "kthvalue": lambda T, x: x.kthvalue(2, 1)[0], "median_dim": lambda T, x: x.median(1)[0],
    "mode": lambda T, x: x.mode(1)[0], "cummax": lambda T, x: x.cummax(1)[0],
    "cummin": lambda T, x: x.cummin(1)[0],
    "take_along_dim": lambda T, x: T.take_along_dim(x, T.tensor([[0], [2]]), 1),
}


@pytest.mark.parametrize("name", sorted(FORMULAS_WRITING_IN_PLACE))
def test_version_of_gradients_written_in_place(name):
    f = FORMULAS_WRITING_IN_PLACE[name]

    def prog(T, e):
        e["x"] = x = _leaf(T, X)
        y = f(T, x)
        e["g"], = T.autograd.grad(y, (x,), T.ones(tuple(y.shape), dtype=T.float64))
        f(T, x).sum().backward()
        e["first"] = x.grad._version
        f(T, x).sum().backward()
        _grads(e)
    assert_same(prog)


PROGRAMS = [grad_of_sum, grad_of_sum_over_dim, grad_of_0d_sum, grad_through_views,
            grad_of_given_gradient_is_its_view, grad_not_views, hook_result_is_not_a_view,
            inplace_on_new_grad, scalar_gradient_summed_in_place,
            product_gradient_summed_in_place, shared_gradient_not_summed_in_place,
            given_gradient_not_summed_in_place, leaf_grad_versions,
            flip_and_cumsum_gradients_are_new]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_same_as_torch(prog):
    assert_same(prog)


def test_grad_of_sum_is_a_view_of_the_ones():
    """The observable parts directly: flags, base, strides, versions (not via the differ)."""
    out = {}
    for T in (torch, nbgrad):
        x = _leaf(T, X)
        g, = T.autograd.grad(x.sum(), (x,))
        out[T] = (g._is_view(), tuple(g._base.shape), g.stride(), g.is_contiguous(),
                  g._version, g.requires_grad, g.is_leaf, g.tolist())
    assert out[nbgrad] == out[torch]


def given_gradient_comes_back_itself(T, e):
    e["x"] = x = _leaf(T, X)
    e["s"] = s = _leaf(T, 2.0)
    e["go"] = go = T.ones(2, 3, dtype=T.float64)
    e["g"], _ = T.autograd.grad(x, (x, s), go, allow_unused=True)
    e["same"] = e["g"] is go
    e["g"].add_(s)  # go itself now has AddBackward0, version 1
    y = x * 2
    e["h"], = T.autograd.grad(y + 0, (y,), go)  # AddBackward0 passes it on unchanged
    e["same2"] = e["h"] is go


def test_given_gradient_comes_back_itself():
    assert_same(given_gradient_comes_back_itself)


def grad_kept_as_a_view_of_the_given_gradient(T, e):
    e["s"] = s = _leaf(T, 2.0)
    e["go"] = go = T.tensor(1.0, dtype=T.float64)
    s.sum().backward(go)  # the expand of go to (): laid out as s, kept: .grad shares go's memory
    e["first"] = s.grad._version
    s.sum().backward(go)  # added in place: go's version counter too
    e["v"] = v = _leaf(T, X)
    e["go6"] = go6 = T.ones(6, dtype=T.float64)
    v.view(-1).backward(go6)
    v.view(-1).backward(go6)
    _grads(e)


def test_grad_kept_as_a_view_of_the_given_gradient():
    assert_same(grad_kept_as_a_view_of_the_given_gradient)


# ---- .grad laid out as its variable (torch's gradient layout contract) ------------------------
def _t_leaf(T):
    """A leaf whose memory is column-major: (3, 4) with strides (1, 3)."""
    return T.tensor([[float(i + 3 * j) for i in range(3)] for j in range(4)],
                    dtype=T.float64).t().detach().requires_grad_()


def grad_of_a_column_major_leaf(T, e):
    e["w"] = w = _t_leaf(T)
    (w * 2).sum().backward()  # a new gradient laid out otherwise: copied as w (version 1)
    _grads(e)


def grad_of_a_column_major_leaf_twice(T, e):
    e["w"] = w = _t_leaf(T)
    (w * 2).sum().backward()
    (w.exp()).sum().backward()  # added in place: keeps the layout
    _grads(e)


def grad_of_a_transposed_use(T, e):
    e["w"] = w = _leaf(T, X)
    (w.t() * 2).sum().backward()  # the gradient arrives transposed: copied C-contiguous
    e["u"] = u = _leaf(T, X)
    u.backward(T.ones(3, 2, dtype=T.float64).t())  # the caller's transposed gradient: copied
    _grads(e)


def grad_of_permuted_and_non_dense_leaves(T, e):
    e["p"] = p = T.ones(2, 3, 4, dtype=T.float64).permute(2, 0, 1).detach().requires_grad_()
    (p * T.ones(4, 2, 3, dtype=T.float64)).sum().backward()
    e["n"] = n = T.ones(4, 6, dtype=T.float64)[:, ::2].detach().requires_grad_()
    (n * 2).sum().backward()  # not dense: a C-contiguous clone (version 0)
    _grads(e)


def grad_of_a_column_major_leaf_create_graph(T, e):
    e["w"] = w = _t_leaf(T)
    e["gw"], = T.autograd.grad((w * w).sum(), (w,), create_graph=True)
    w.backward(e["gw"], create_graph=True)  # copy_ into w's layout: CopyBackwards, version 1
    e["copy"] = type(w.grad.grad_fn).__name__
    _grads(e)


@pytest.mark.parametrize("prog", [grad_of_a_column_major_leaf, grad_of_a_column_major_leaf_twice,
                                  grad_of_a_transposed_use, grad_of_permuted_and_non_dense_leaves,
                                  grad_of_a_column_major_leaf_create_graph],
                         ids=lambda p: p.__name__)
def test_grad_laid_out_as_its_variable(prog):
    assert_same(prog)


# ---- mm's gradients laid out as their operands (torch's mm_mat1/mat2_backward) ----------------
def grad_of_linear_weight(T, e):
    """A weight used as weight.t() (column-major): its gradient comes out C-contiguous and
    becomes .grad without a copy (version 0), with a bias, without, on N-d input."""
    e["w"] = w = T.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], dtype=T.float64,
                          requires_grad=True)
    e["b"] = b = T.zeros(2, dtype=T.float64, requires_grad=True)
    e["x"] = x = _leaf(T, X)
    T.nn.functional.linear(x, w, b).sum().backward()
    e["v"] = v = _leaf(T, X)
    (T.ones(4, 2, 3, dtype=T.float64) @ v.t()).sum().backward()
    e["u"] = u = _leaf(T, X)
    T.nn.functional.linear(T.ones(4, 5, 3, dtype=T.float64), u).sum().backward()
    _grads(e)


def grad_of_column_major_operands(T, e):
    e["a"] = a = T.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
                          dtype=T.float64).t().detach().requires_grad_()  # (2, 3), column-major
    e["c"] = c = T.tensor([[1.0, -1.0, 0.5], [2.0, 0.0, 1.0]],
                          dtype=T.float64).t().detach().requires_grad_()  # (3, 2), column-major
    y = a @ c
    e["strides"] = (y.grad_fn._saved_self_sym_strides, y.grad_fn._saved_mat2_sym_strides)
    (y * y).sum().backward()
    e["s"] = s = T.ones(1, 2, 3, dtype=T.float64, requires_grad=True)
    (s @ T.ones(4, 3, 5, dtype=T.float64)).sum().backward()  # a squeezed batch of one
    _grads(e)


@pytest.mark.parametrize("prog", [grad_of_linear_weight, grad_of_column_major_operands],
                         ids=lambda p: p.__name__)
def test_mm_gradients_laid_out_as_their_operands(prog):
    assert_same(prog)


# ---- parameters' .grad after a backward: strides and _version as torch's -----------------------
_MODULES = {
    "Linear": (lambda nn: nn.Linear(3, 4), [(5, 3)]),
    "Conv2d": (lambda nn: nn.Conv2d(2, 3, 3, padding=1), [(2, 2, 5, 5)]),
    "Conv1d": (lambda nn: nn.Conv1d(2, 3, 3), [(2, 2, 7)]),
    "ConvTranspose2d": (lambda nn: nn.ConvTranspose2d(2, 3, 3), [(2, 2, 4, 4)]),
    "LayerNorm": (lambda nn: nn.LayerNorm(4), [(2, 3, 4)]),
    "BatchNorm1d": (lambda nn: nn.BatchNorm1d(4), [(6, 4)]),
    "GroupNorm": (lambda nn: nn.GroupNorm(2, 4), [(2, 4, 3)]),
    "LSTM": (lambda nn: nn.LSTM(3, 4), [(5, 2, 3)]),
    "GRU": (lambda nn: nn.GRU(3, 4), [(5, 2, 3)]),  # (b_hh: 5 steps' gradients added)
    "RNN": (lambda nn: nn.RNN(3, 4), [(5, 2, 3)]),
    "MultiheadAttention": (lambda nn: nn.MultiheadAttention(4, 2), [(3, 2, 4)] * 3),
    "Bilinear": (lambda nn: nn.Bilinear(3, 3, 2), [(4, 3), (4, 3)]),
}


@pytest.mark.parametrize("name", sorted(_MODULES))
def test_parameter_grads_laid_out_and_versioned_as_torch(name):
    import numpy as np
    make, shapes = _MODULES[name]
    torch.manual_seed(0)
    ref = make(torch.nn)
    got = {}
    for T in (torch, nbgrad):
        m = ref if T is torch else make(nbgrad.nn)
        if T is nbgrad:
            m.load_state_dict({k: nbgrad.tensor(v.detach().numpy().copy())
                               for k, v in ref.state_dict().items()})
        xs = [T.tensor(np.random.default_rng(i).standard_normal(s).astype(np.float32))
              for i, s in enumerate(shapes)]
        y = m(*xs)
        y = y[0] if isinstance(y, tuple) else y
        (y * y).sum().backward()
        got[T] = {n: (tuple(p.grad.stride()), p.grad._version)
                  for n, p in m.named_parameters()}
    assert got[nbgrad] == got[torch]


def grad_of_a_bias_used_several_times(T, e):
    """A broadcast input's gradient is summed over the leading dims as torch's sum_to: kept
    (1, n), then viewed as (n,). The engine adds the next one into a new buffer, the later
    ones in place (versions 0, 0, 1, 2); autograd.grad returns the view (its _base (1, n))."""
    for k in (1, 2, 3, 4):
        e[f"b{k}"] = b = T.zeros(4, dtype=T.float64, requires_grad=True)
        s = 0
        for _ in range(k):
            s = s + (T.ones(2, 4, dtype=T.float64) + b).sum()
        s.backward()
    e["c"] = c = T.zeros(4, dtype=T.float64, requires_grad=True)
    e["g"], = T.autograd.grad((T.ones(2, 4, dtype=T.float64) + c).sum(), (c,))
    e["base_shape"] = tuple(e["g"]._base.shape)
    _grads(e)


def test_grad_of_a_bias_used_several_times():
    assert_same(grad_of_a_bias_used_several_times)
