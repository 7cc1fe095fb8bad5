"""Pinned special points of the nn rows, activations, losses, elementwise ops and reductions
(issue 21), each against torch: the configurations where nbgrad differed from torch at zeros,
+-inf and NaN, and the generator's way of telling torch's own inconsistencies from differences
(tests/test_special_points.py).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import nbgrad
import test_special_points as sp

inf, nan = np.inf, np.nan


def _run(T, f, xs, create_graph=False, weights=True):
    """[value, first gradients, second gradients (create_graph)] of f(T, *leaves)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = [T.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in xs]
        y = f(T, *x)
        ys = y if isinstance(y, tuple) else (y,)
        gs = [T.tensor(np.cos(np.arange(t.numel())).reshape(tuple(t.shape))) for t in ys]
        first = T.autograd.grad(ys, x, gs, create_graph=create_graph, allow_unused=True)
        out = [[t.detach().numpy().copy() for t in ys],
               [None if g is None else g.detach().numpy().copy() for g in first]]
        if create_graph:
            s = sum((g * T.arange(1.0, g.numel() + 1, dtype=g.dtype).reshape(g.shape)).sum()
                    for g in first if g is not None and g.requires_grad)
            out.append([None] * len(x) if isinstance(s, int) else  # (no first depends on x)
                       [None if h is None else h.numpy().copy()
                        for h in T.autograd.grad(s, x, allow_unused=True)])
        return out


def _like_torch(f, *xs, create_graph=False):
    want, got = _run(torch, f, xs, create_graph), _run(nbgrad, f, xs, create_graph)
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            if a is None or b is None:
                assert a is None and b is None or not np.any(a if b is None else b)
                continue
            np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12, equal_nan=True)


ROW = [0.3, -1.2, 2.0, 0.1]

# (name, f, inputs, second order): each differed from torch before
CASES = [
    ("threshold_nan", lambda T, x: T.nn.functional.threshold(x, 0.2, -1.0), [[nan] + ROW], 0),
    ("softshrink_nan", lambda T, x: T.nn.functional.softshrink(x, 0.5), [[nan] + ROW], 0),
    ("abs_nan", lambda T, x: x.abs(), [[nan] + ROW], 0),
    ("norm_p1_nan", lambda T, x: x.norm(1), [[nan] + ROW], 0),
    ("norm_inf_nan", lambda T, x: x.norm(float("inf")), [[nan] + ROW], 0),
    ("l1_inf", lambda T, x, t: T.nn.functional.l1_loss(x, t), [[inf] + ROW, [inf] + ROW], 0),
    ("l1_nan", lambda T, x, t: T.nn.functional.l1_loss(x, t), [[nan] + ROW, ROW + [1.0]], 0),
    ("prod_inf", lambda T, x: x.prod(), [[inf] + ROW], 0),
    ("prod_nan", lambda T, x: x.prod(), [[nan] + ROW], 0),
    ("prod_dim_inf", lambda T, x: x.prod(1), [[[inf, 2.0], [3.0, -inf]]], 0),
    ("cumprod_zero_nan", lambda T, x: x.cumprod(0), [[nan, 0.0, 2.0, 3.0]], 0),
    ("cumprod_zero_inf", lambda T, x: x.cumprod(1), [[[2.0, inf, 0.0, 3.0, 0.0, 4.0]]], 0),
    ("var_mean_inf_first", lambda T, x: T.var_mean(x, 1), [[[inf] + ROW, ROW + [1.0]]], 0),
    ("std_mean_inf_last", lambda T, x: T.std_mean(x), [ROW + [-inf]], 0),
    ("var_mean_inf_dim0", lambda T, x: T.var_mean(x, 0, keepdim=True),
     [[[inf, 1.0], [2.0, 3.0], [4.0, -inf]]], 0),
    ("lerp_inf_half", lambda T, x, y: T.lerp(x, y, 0.75), [[-inf, 1.0], [2.0, inf]], 0),
    ("quantile_minus_inf", lambda T, x: T.quantile(x, T.tensor([0.2, 0.5], dtype=T.float64),
                                                   dim=1), [[[-inf] + ROW]], 0),
    ("scatter_amax_nan", lambda T, x, s: x.scatter_reduce(
        1, T.tensor([[0, 0], [1, 3]]), s, "amax"), [[[nan] + ROW[1:], ROW], [[1.0, 2.0]] * 2], 0),
    ("scatter_amin_noself_nan", lambda T, x, s: x.scatter_reduce(
        1, T.tensor([[0, 0], [1, 3]]), s, "amin", include_self=False),
     [[ROW, ROW], [[nan, 2.0], [1.0, 2.0]]], 0),
    ("remainder_zero_divisor", lambda T, x, y: x % y, [ROW, [0.0, 1.5, -0.7, 0.0]], 1),
    ("fmod_zero_divisor", lambda T, x, y: T.fmod(x, y), [ROW, [0.0, 1.5, -0.7, 0.0]], 1),
    ("pow_half_minus_inf", lambda T, x: x ** 0.5, [[-inf, -0.0, 4.0, 0.25]], 0),
    ("pow_minus_half_zero", lambda T, x: x ** -0.5, [[-inf, 4.0, 0.25]], 0),
    ("pow_tt_zero_base", lambda T, x, y: x ** y, [[0.0, 0.0, 2.0], [-1.5, 0.0, 0.5]], 0),
    ("multi_margin_nan", lambda T, x: T.nn.functional.multi_margin_loss(
        x, T.tensor([1, 0]), p=2, margin=0.7), [[[nan, 0.5, -0.2], [0.1, -inf, 0.3]]], 0),
    ("safe_softmax_plus_inf", lambda T, x: T._safe_softmax(x, -1),
     [[[inf, 1.0, 2.0], [-inf, -inf, -inf], [0.5, -inf, 1.0]]], 0),
    ("layer_norm_inf_weight", lambda T, x, w, b: T.nn.functional.layer_norm(x, (3,), w, b),
     [[[0.3, -1.2, 2.0], [1.0, 0.5, -0.5]], [inf, 1.0, 2.0], [inf, 0.0, 1.0]], 0),
    ("group_norm_inf_weight", lambda T, x, w, b: T.nn.functional.group_norm(x, 2, w, b),
     [np.linspace(-1, 1, 16).reshape(2, 4, 2), [1.0, inf, 2.0, 0.5], [0.0, inf, 1.0, 0.0]], 0),
    ("bce_logits_pos_weight_origin", lambda T, x, t:
     T.nn.functional.binary_cross_entropy_with_logits(
         x, t, pos_weight=T.tensor([1.0, 2.0, 3.0], dtype=T.float64), reduction="none"),
     [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], 1),
    ("bce_logits_pos_weight_minus_inf", lambda T, x, t:
     T.nn.functional.binary_cross_entropy_with_logits(
         x, t, pos_weight=T.tensor([1.0, 2.0, 3.0], dtype=T.float64), reduction="none"),
     [[-inf, 0.5, -0.5], [0.2, 0.4, 0.6]], 0),
]


@pytest.mark.parametrize("name,f,xs,second", CASES, ids=[c[0] for c in CASES])
def test_special_point_like_torch(name, f, xs, second):
    _like_torch(f, *xs, create_graph=bool(second))


def test_cumprod_with_zeros_and_non_finite_like_torch():
    """torch's O(n) masks at an input with zeros (not recorded): NaN where they take an inf or
    NaN, the products after the first zero there; random rows against torch."""
    rng = np.random.default_rng(0)
    for _ in range(60):
        a = rng.standard_normal((3, 5))
        a[rng.random((3, 5)) < 0.3] = 0.0
        a.flat[rng.integers(15)] = rng.choice([inf, -inf, nan])
        for dim in (0, 1):
            _like_torch(lambda T, x, dim=dim: x.cumprod(dim), a)


@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("layer", ["group_norm", "layer_norm", "batch_norm", "instance_norm"])
def test_norms_with_an_inf_or_nan_upstream_gradient_like_torch(layer, affine):
    """The generator's upstream gradients are finite: here one or two entries of it are +-inf
    or NaN. torch's group_norm kernel sums dy * x and dy per channel (weight: (sum dy x - mean
    sum dy) rstd, input: c1 dy + c2 x + c3 with gamma 1 when there is none): inf - inf is NaN
    where the xhat form keeps the inf; float32 too, an input holding an inf or NaN too."""
    rng = np.random.default_rng(12)
    for dtype, shape, x_value, g_value, pos in [
            (d, s, xv, gv, p) for d in ("float64", "float32") for s in [(2, 4, 3), (3, 4, 2, 2)]
            for xv in (None, inf, nan) for gv in (inf, -inf, nan) for p in (0, 5)]:
        x = rng.standard_normal(shape)
        gy = np.cos(np.arange(x.size)).reshape(shape)
        gy.flat[pos] = g_value
        gy.flat[pos + 7] = -g_value if pos else 1.0
        if x_value is not None:
            x.flat[(pos + 3) % x.size] = x_value
        seen = []
        for T in (torch, nbgrad):
            dt = getattr(T, dtype)
            xt = T.tensor(x, dtype=dt, requires_grad=True)
            ps = shape[1:] if layer == "layer_norm" else shape[1:2]
            w, b = (T.tensor(np.linspace(lo, hi, int(np.prod(ps))).reshape(ps), dtype=dt,
                             requires_grad=True) if affine else None
                    for lo, hi in ((-1.3, 1.7), (0.3, -0.7)))
            F = T.nn.functional
            y = {"group_norm": lambda: F.group_norm(xt, 2, w, b),
                 "layer_norm": lambda: F.layer_norm(xt, ps, w, b),
                 "batch_norm": lambda: F.batch_norm(xt, None, None, w, b, training=True),
                 "instance_norm": lambda: F.instance_norm(xt, weight=w, bias=b)}[layer]()
            leaves = [xt] + ([w, b] if affine else [])
            seen.append([t.detach().numpy() for t in
                         [y, *T.autograd.grad(y, leaves, T.tensor(gy, dtype=dt))]])
        for want, got in zip(*seen):
            assert got.dtype == want.dtype
            tol = 1e-9 if dtype == "float64" else 1e-4
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True,
                                       err_msg=f"{dtype} {shape} x {x_value} dy {g_value} {pos}")


def test_scatter_reduce_prod_two_zeros_refuses_double_backward_like_torch():
    seen = []
    for T in (torch, nbgrad):
        a = T.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
        s = T.tensor([[0.0, 0.0]], requires_grad=True)
        y = a.scatter_reduce(1, T.tensor([[0, 0]]), s, "prod")
        ga, gs = T.autograd.grad(y.sum(), (a, s), create_graph=True)
        with pytest.raises(RuntimeError) as e:
            T.autograd.grad(gs.sum(), s)
        seen.append((gs.detach().numpy().tolist(), str(e.value)))
    assert seen[1] == seen[0]


# ------------------------------------------------------------------------------------------------
# The generator's classes, by measurement
# ------------------------------------------------------------------------------------------------
def _program(f, x):
    def run(T, dtype=None, special=None):
        t = T.tensor(special(np.array(x, dtype=np.float64)), requires_grad=True)
        return [t], [f(T, t)]
    return run


def test_scalar_loops_reach_torch_scalar_kernels():
    """hardtanh's gradient at NaN: 0 from the vectorised loop of a contiguous tensor of 20,
    1 from its scalar loop (what a tensor of 4 gets): the measurement sees both."""
    x = torch.zeros(20, dtype=torch.float64)
    x[0] = nan
    x.requires_grad_(True)
    g = [torch.autograd.grad(torch.nn.functional.hardtanh(x * 3).sum(), x)[0][0].item()]
    with sp.ScalarLoops():
        g.append(torch.autograd.grad(torch.nn.functional.hardtanh(x * 3).sum(), x)[0][0].item())
    small = torch.tensor([nan, 0.5, 0.2, 0.1], dtype=torch.float64, requires_grad=True)
    g.append(torch.autograd.grad(torch.nn.functional.hardtanh(small).sum(), small)[0][0].item())
    assert g == [0.0, 3.0, 1.0]


def test_classes_by_measurement():
    x = np.linspace(-2, 2, 20)
    nan_first = sp.SPECIAL["nan"][0]
    # torch's vectorised and scalar loops disagree at NaN; nbgrad gives the scalar loop's
    hardtanh = _program(lambda T, t: T.nn.functional.hardtanh(t), x)
    assert sp.classify(hardtanh, nan_first, False)[0] == "torch-inconsistent"
    # the same op where nbgrad is wrong: a difference torch never shows
    wrong = _program(lambda T, t: T.nn.functional.hardtanh(t) * (1 if T is torch else 1.01), x)
    assert sp.classify(wrong, nan_first, False)[0] == "differ"
    # weight_norm: torch's second order is not the derivative of its first; nbgrad's is
    def weight_norm(T, dtype=None, special=None):
        v = T.tensor(special(np.arange(1.0, 13.0).reshape(3, 4) / 7), requires_grad=True)
        g = T.tensor(special(np.array([[0.5], [1.5], [-1.0]])), requires_grad=True)
        return [v, g], [T._weight_norm(v, g, 0)]
    assert sp.classify(weight_norm, sp.SPECIAL["zero"][0], True)[0] == "torch-inconsistent"
    assert sp.classify(hardtanh, sp.SPECIAL["zero"][0], True)[0] == "agree"



def _svd_beside(factor):
    """svd of the special matrix and, beside it, a second leaf b whose sum of squares nbgrad
    multiplies by `factor` (1: right; else a wrong gradient where torch's is determined)."""
    def run(T, dtype=None, special=None):
        a = T.tensor(special(np.linspace(-1.0, 1.0, 12).reshape(4, 3)), requires_grad=True)
        b = T.tensor([0.5, -1.5, 2.0], dtype=T.float64, requires_grad=True)
        U, S, V = T.svd(a)
        return [a, b], [U.abs(), S, V.abs(), (b * b).sum() * (1.0 if T is torch else factor)]
    return run


def test_undetermined_by_measurement_and_not_a_bug():
    """svd at the all-0.75 4 x 3 matrix (rank 1, two zero singular values): svd_backward
    divides by s_i^2 - s_j^2 and s, numpy's zeros are 8e-49, MKL's 5e-33, and under 2-ulp
    nudges each library's gradient moves by more than itself: undetermined, not agree. A wrong
    gradient at an element torch determines (a second leaf of the same program, at the same
    point), or at a well-conditioned matrix, stays differ."""
    tied, _ = sp.SPECIAL["all_tied"]
    assert sp.classify(dict(sp.PROGRAMS)["op:svd_legacy"], tied, True)[0] == "undetermined"
    assert sp.classify(_svd_beside(1.0), tied, True)[0] == "undetermined"
    assert sp.classify(_svd_beside(1.01), tied, True)[0] == "differ"
    generic = _program(lambda T, t: T.svd(t).S * (1.0 if T is torch else 1.01),
                       np.linspace(-1.0, 1.0, 12).reshape(4, 3) ** 3 + np.eye(4, 3))
    assert sp.classify(generic, lambda a: a, True)[0] == "differ"
