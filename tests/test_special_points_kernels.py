"""Pools, resampling, convolution and cdist at +-inf, NaN, zeros and ties against torch: the
lines of tests/special_points_known.txt these kernels had, swept wider than the generator's
one drawn input (every position of the non-finite value, the modes and sizes that change which
terms torch's kernels multiply)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nbgrad
import test_special_points as sp


def _both(f, a, grad=False):
    """f's value (and gradient of its cos-weighted sum) in torch and nbgrad: two lists of arrays."""
    seen = []
    for T in (torch, nbgrad):
        x = T.tensor(a.copy(), requires_grad=grad)
        y = f(T, x)
        out = [y.detach().numpy().copy()]
        if grad:
            w = T.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), dtype=y.dtype)
            out.append(T.autograd.grad(y, x, w)[0].numpy().copy())
        seen.append(out)
    return seen


def _equal(seen):
    for want, got in zip(*seen):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


_INTERP = [("nearest", None), ("nearest-exact", None), ("linear", True), ("linear", False)]


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("mode,align", _INTERP)
@pytest.mark.parametrize("n_out", [2, 4, 5, 8])
def test_interpolate_1d_at_every_non_finite_position(value, mode, align, n_out):
    """torch multiplies a zero weight at an integer source index (0 * inf = nan there, and at
    the element itself when the size is kept); the interpolation matrix must not spread it."""
    for pos in range(4):
        a = np.linspace(-1.0, 2.0, 8).reshape(1, 2, 4)
        a[0, 0, pos] = value
        _equal(_both(lambda T, x: T.nn.functional.interpolate(
            x, size=n_out, mode=mode, align_corners=align), a))


@pytest.mark.parametrize("value", [np.inf, np.nan])
@pytest.mark.parametrize("mode,align", [("nearest", None), ("nearest-exact", None),
                                        ("bilinear", True), ("bilinear", False)])
@pytest.mark.parametrize("size", [(3, 4), (2, 5), (5, 7)])
def test_interpolate_2d_at_non_finite_points(value, mode, align, size):
    rng = np.random.default_rng(0)
    for pos in [(0, 0), (1, 2), (2, 3), (0, 3)]:
        a = rng.standard_normal((1, 2, 3, 4))
        a[0, 0][pos] = value
        a[0, 1][2 - pos[0], 3 - pos[1]] = -value
        _equal(_both(lambda T, x: T.nn.functional.interpolate(
            x, size=size, mode=mode, align_corners=align), a, grad=True))


@pytest.mark.parametrize("expr", [
    "F.avg_pool3d(x, 2)", "F.avg_pool3d(x, 3, 2, 1, ceil_mode=True)",
    "F.avg_pool3d(x, 2, divisor_override=3)", "F.adaptive_avg_pool3d(x, (2, 3, 3))",
    "F.adaptive_avg_pool2d(x[0], (3, 2))", "F.adaptive_avg_pool1d(x[0, 0], 3)",
    "F.interpolate(x, size=(5, 3, 6), mode='trilinear')",
    "F.interpolate(x, size=(4, 4, 2), mode='trilinear', align_corners=True)",
    "F.interpolate(x, scale_factor=2, mode='nearest')"])
def test_pools_at_non_finite_points(expr):
    """Window sums reach only their window: +inf and -inf in one window are NaN, a NaN spreads
    to the windows holding it and no further."""
    rng = np.random.default_rng(1)
    for k in range(6):
        a = rng.standard_normal((1, 2, 4, 4, 4))
        flat = a.reshape(-1)
        flat[rng.choice(flat.size, 3, replace=False)] = [np.inf, -np.inf, np.nan][:1 + k % 3] + \
            [0.5] * (2 - k % 3)
        _equal(_both(lambda T, x: eval(expr, {"F": T.nn.functional, "x": x}), a, grad=True))


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("padding", [0, 1])
@pytest.mark.parametrize("channels_last_path", [False, True])
def test_conv2d_input_gradient_at_a_non_finite_weight(value, padding, channels_last_path):
    """torch's col2im adds each weight's products only where its window lies: an inf weight
    reaches the inputs under it, not (0 * inf = nan) the whole image."""
    rng = np.random.default_rng(2)
    c = 8 if channels_last_path else 3
    x, w = rng.standard_normal((2, c, 5, 5)), rng.standard_normal((4, c, 3, 3))
    for k in [0, 4, 8]:
        wk = w.copy()
        wk.reshape(4, c, 9)[1, 0, k] = value
        seen = []
        for T in (torch, nbgrad):
            xt = T.tensor(x, requires_grad=True)
            y = T.nn.functional.conv2d(xt, T.tensor(wk), padding=padding)
            gy = T.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
            seen.append([y.detach().numpy(), T.autograd.grad(y, xt, gy)[0].numpy()])
        _equal(seen)


@pytest.mark.parametrize("kind", ["coincident", "some_equal", "inf", "nan", "generic"])
def test_cdist_mm_mode_like_torch_every_order(kind):
    """compute_mode='use_mm_for_euclid_dist' is torch's _euclidean_dist: one product (an inf
    gives NaN, inf - inf) and _euclidean_dist_backward, whose ratio g / dist is 0 at a zero
    distance at first and second order."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    if kind == "coincident":
        a[:], b[:] = 0.5, 0.5
    elif kind == "some_equal":
        b[1] = a[2]
        b[3] = a[0]
    elif kind in ("inf", "nan"):
        a[1, 2] = np.inf if kind == "inf" else np.nan
        b[0, 0] = -np.inf if kind == "inf" else 1.0
    seen = []
    for T in (torch, nbgrad):
        x, y = T.tensor(a, requires_grad=True), T.tensor(b, requires_grad=True)
        d = T.cdist(x, y, compute_mode="use_mm_for_euclid_dist")
        w = T.tensor(np.cos(np.arange(20.0)).reshape(5, 4))
        gx, gy = T.autograd.grad(d, (x, y), w, create_graph=True)
        out = [d.detach().numpy(), gx.detach().numpy(), gy.detach().numpy()]
        if kind not in ("inf", "nan"):
            s = (gx * T.arange(1.0, 16.0, dtype=T.float64).reshape(5, 3)).sum() + gy.sum()
            out += [t.numpy() for t in T.autograd.grad(s, (x, y))]
        seen.append(out)
    for want, got in zip(*seen):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, equal_nan=True)


def _outcome(f):
    try:
        r = f()
        return [t.detach().numpy().copy() for t in (r if isinstance(r, tuple) else (r,))]
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def _same_outcome(f):
    want, got = _outcome(lambda: f(torch)), _outcome(lambda: f(nbgrad))
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    for a, b in zip(want, got):
        tol = 1e-9 if a.dtype == np.float64 else 1e-5  # float32: its rounding
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol * 1e-3, equal_nan=True)


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("pos", [(0, 0), (1, 0), (0, 1), (2, 1), (2, 2)])
def test_cholesky_at_a_non_finite_entry_like_torch(value, pos):
    """LAPACK's potrf stops at the first pivot <= 0 or NaN: torch's LinAlgError (its type name
    and text) naming that minor; an inf pivot it takes (inf, zeros below); the upper triangle
    is not read."""
    a = np.random.default_rng(5).standard_normal((3, 3))
    a = a @ a.T + np.eye(3)
    a[pos] = value
    _same_outcome(lambda T: T.linalg.cholesky(T.tensor(a)))
    b = np.stack([np.eye(3), a])
    _same_outcome(lambda T: T.linalg.cholesky(T.tensor(b)))


def test_cholesky_not_positive_definite_like_torch():
    a = np.array([[4.0, 2.0, 1.0], [2.0, 1.0, 3.0], [1.0, 3.0, 2.0]])
    _same_outcome(lambda T: T.linalg.cholesky(T.tensor(a)))
    _same_outcome(lambda T: T.linalg.cholesky(T.tensor(np.stack([np.eye(3), np.eye(3), -a]))))
    assert issubclass(nbgrad.linalg.LinAlgError, RuntimeError)


@pytest.mark.parametrize("pos", [(0, 0), (1, 2), (2, 1), (2, 2)])
def test_inverse_and_slogdet_of_a_matrix_holding_nan_like_torch(pos):
    """torch's LU carries a NaN into every pivot: the whole inverse NaN, slogdet's sign 0 and
    log|det| NaN, its gradient NaN everywhere (numpy's gesv leaves entries finite)."""
    a = np.random.default_rng(6).standard_normal((2, 3, 3))
    a[0][pos] = np.nan
    _same_outcome(lambda T: T.inverse(T.tensor(a)))
    _same_outcome(lambda T: T.linalg.slogdet(T.tensor(a)))

    def grad(T):
        x = T.tensor(a, requires_grad=True)
        return T.autograd.grad(T.linalg.slogdet(x)[1].sum(), x)[0]
    _same_outcome(grad)


@pytest.mark.parametrize("shape", [(1, 3), (2, 2), (4, 3), (3, 4), (5, 5), (2, 6), (7, 4)])
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_svd_of_a_lone_inf_at_the_corner_like_torch(shape, full, dtype):
    """torch's gesdd at a matrix whose one non-finite entry is an inf at [0, 0]: NaN singular
    values and the identity with columns (Vh: rows) 0 and k - 1 swapped; the batch's finite
    matrix its own svd; the gradient of the singular values U diag(g) Vh, finite."""
    a = np.random.default_rng(7).standard_normal((2,) + shape).astype(dtype)
    for value in (np.inf, -np.inf):
        a[1, 0, 0] = value
        seen = []
        for T in (torch, nbgrad):
            x = T.tensor(a, requires_grad=True)
            U, S, Vh = T.linalg.svd(x, full_matrices=full)
            g, = T.autograd.grad(S[1].sum() + (U[1] ** 2).sum(), x)
            seen.append([t.detach().numpy() for t in (U[1], S, Vh[1], g[1])])
        for want, got in zip(*seen):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 4), (5, 2), (1, 3), (3, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_qr_with_an_inf_or_nan_anywhere_like_torch(shape, dtype):
    """torch's Householder QR (geqrf, orgqr) of a matrix holding an inf or NaN, at every
    position: which entries of Q and R come out NaN, inf or finite (numpy's leaves columns
    finite that torch's make NaN, and a NaN pivot torch's lapy2 passes over)."""
    a0 = np.random.default_rng(8).standard_normal(shape).astype(dtype)
    for value in (np.inf, -np.inf, np.nan):
        for pos in np.ndindex(*shape):
            a = a0.copy()
            a[pos] = value
            _same_outcome(lambda T: T.linalg.qr(T.tensor(a)))


@pytest.mark.parametrize("shape", [(4, 3), (2, 4), (3, 3)])
def test_qr_gradient_at_the_zero_matrix_like_torch(shape):
    """R = 0: torch's qr_backward solves with R^H by substitution (trsm), inf and NaN where it
    divides by the zero diagonal, not numpy's 'Singular matrix'; and the second order."""
    def grads(T):
        x = T.zeros(*shape, dtype=T.float64, requires_grad=True)
        Q, R = T.linalg.qr(x)
        gq = T.tensor(np.cos(np.arange(Q.numel())).reshape(tuple(Q.shape)))
        gr = T.tensor(np.sin(np.arange(R.numel())).reshape(tuple(R.shape)))
        g, = T.autograd.grad((Q, R), x, (gq, gr), create_graph=True)
        h, = T.autograd.grad(g.sum(), x)
        return g, h
    _same_outcome(grads)


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_det_and_slogdet_with_an_inf_or_nan_like_torch(n, layout):
    """torch's det and slogdet of a matrix holding an inf or NaN are its LU's (of A^T when A is
    contiguous, else A) pivots: det NaN where inf - inf meets in the trailing update, slogdet's
    sign 0 at a NaN pivot; their gradients its lu_solve of diag_embed(d) (no 0 * inf off the
    diagonal), substitution by substitution: inf, NaN and finite entries where torch's are."""
    a0 = np.random.default_rng(9).standard_normal((n, n))
    for value in (np.inf, -np.inf, np.nan):
        for pos in np.ndindex(n, n):
            a = a0.copy()
            a[pos] = value

            def run(T):
                x = T.tensor(a.T.copy() if layout == "transposed" else a)
                x = (x.T if layout == "transposed" else x).requires_grad_(True)
                d, (s, lad) = T.linalg.det(x), T.linalg.slogdet(x)
                return (d, s, lad, T.autograd.grad(d, x)[0], T.autograd.grad(lad, x)[0])
            _same_outcome(run)


def test_solve_at_singular_matrices_like_torch():
    """torch's linalg.solve factors A itself: where its LU rounds the last pivot to exactly 0
    it raises its LinAlgError (numpy may solve), where rounding leaves it nonzero it returns
    the huge values (numpy may raise 'Singular matrix'). Every singular matrix of
    test_special_points, both layouts, a vector and a matrix right side."""
    agree = total = 0
    for a in sp._SINGULAR.values():
        a = np.array(a)
        for layout in (0, 1):
            for k in (None, 2):
                def run(T):
                    x = T.tensor(a.T.copy() if layout else a)
                    x = x.T if layout else x
                    n = a.shape[0]
                    b = T.ones(n, dtype=T.float64) if k is None else T.tensor(
                        np.arange(n * 2.0).reshape(n, 2))
                    return T.linalg.solve(x, b)
                want, got = _outcome(lambda: run(torch)), _outcome(lambda: run(nbgrad))
                total += 1
                if isinstance(want, str) or isinstance(got, str):
                    agree += got == want
                else:
                    agree += bool(np.allclose(got[0], want[0], rtol=1e-6))
    assert agree >= total - 4, (agree, total)  # 4 differ by LU rounding (measured: 172 of 176)


def test_slogdet_second_order_at_a_singular_matrix_like_torch():
    """slogdet's gradient under create_graph is torch's linalg_solve(A^H, g I), its second
    order that solve's backward on the same LU: values (rounding-sized pivots) where numpy's
    solve would call the matrix singular."""
    a = np.random.default_rng(10).standard_normal((3, 3))
    a[1] = a[0]

    def run(T):
        x = T.tensor(a, requires_grad=True)
        g, = T.autograd.grad(T.linalg.slogdet(x)[1], x, create_graph=True)
        h, = T.autograd.grad((g * T.arange(1.0, 10.0, dtype=T.float64).reshape(3, 3)).sum(), x)
        return g, h
    want, got = _outcome(lambda: run(torch)), _outcome(lambda: run(nbgrad))
    assert not isinstance(want, str) and not isinstance(got, str), (want, got)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# What was left of these ops in special_points_known.txt, told apart by measurement: torch against
# itself with one input entry moved by 2 ulps (the tie, zero or rank kept to rounding)
# ------------------------------------------------------------------------------------------------
_MINE = ("op:linalg_", "op:svd", "op:det_", "op:inverse", "op:matrix_norm_nuc", "op:cdist",
         "op:avg_pool3d", "op:adaptive_avg_pool3d", "nn_row:adaptive_avg_pool2d",
         "nn_row:upsample_", "op:conv2d")


def test_none_of_these_ops_is_left_in_the_known_file():
    """Each line these ops had in special_points_known.txt is fixed, or LAPACK's rounding where
    the answer is ill-conditioned (rounding), or a point where neither library's answer has a
    significant digit (undetermined), by the generator's measurement: none is left there."""
    assert not sorted(k for k in sp.KNOWN if k[0].startswith(_MINE))


_SVD = [n for n, _ in sp.PROGRAMS if n.startswith(("op:linalg_svd", "op:svd"))]


@pytest.mark.parametrize("name", _SVD)
def test_svd_at_zero_singular_values_is_told_apart(name):
    """At the all-0.75 matrix (rank 1) svd_backward divides by s_i^2 - s_j^2 at the zero
    singular values, which numpy's gesdd gives as 8e-49 and MKL's (torch) as 5e-33: rounding
    noise of 1e16 to 1e48 in both. Measured: agree, rounding or undetermined, never differ
    (linalg_svd, linalg_svdvals' second order and svd are undetermined)."""
    special, second = sp.SPECIAL["all_tied"]
    cls, what = sp.classify(dict(sp.PROGRAMS)[name], special, second)
    assert cls in ("agree", "rounding", "undetermined"), what


@pytest.mark.parametrize("shape,rank_deficient", [
    ((2, 4), False), ((3, 5), False), ((3, 3), False), ((4, 2), False), ((2, 4), True),
    ((3, 5), True)])
def test_qr_gradient_in_torch_s_order_of_operations(shape, rank_deficient):
    """torch's linalg_qr_backward term by term (wide: [Q tril(M^H - M) R1^-H | 0] + Q gR, not
    the square formula on [X | Y]; a trsm substitution, not an LU): where A is rank-deficient
    R's diagonal holds a rounding-sized entry that amplifies any other rounding to O(1). (A
    square or tall rank-deficient A is left out: there numpy's and MKL's R differ in that entry
    itself, 1e-16 against 1e-16 of another value, and so does the gradient.)"""
    a = np.random.default_rng(11).standard_normal(shape)
    if rank_deficient:
        a[:, 1] = a[:, 0]

    def run(T):
        x = T.tensor(a, requires_grad=True)
        Q, R = T.linalg.qr(x)
        gq = T.tensor(np.cos(np.arange(Q.numel())).reshape(tuple(Q.shape)))
        gr = T.tensor(np.cos(np.arange(R.numel()) + 0.5).reshape(tuple(R.shape)))
        return T.autograd.grad((Q, R), x, (gq, gr))[0]
    _same_outcome(run)


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("outputs", ["values", "vectors", "both"])
def test_eigh_with_a_non_finite_incoming_gradient_like_torch(value, outputs):
    """eigh's backward takes an inf/NaN incoming gradient through torch's steps (V gL V^T with
    no diagonal matrix, whose zeros made 0 * inf = NaN everywhere: eigvalsh gave all NaN where
    torch gives inf), element by element as torch's."""
    a0 = np.random.default_rng(3).standard_normal((3, 3))
    a0 = a0 + a0.T
    gl = np.cos(np.arange(3.0))
    gv = np.cos(np.arange(9.0)).reshape(3, 3)
    gl[0] = gv[0, 0] = value
    got = []
    for T in (torch, nbgrad):
        a = T.tensor(a0, requires_grad=True)
        L, V = T.linalg.eigh(a)
        pairs = {"values": [(L, gl)], "vectors": [(V, gv)], "both": [(L, gl), (V, gv)]}[outputs]
        got.append(T.autograd.grad([o for o, _ in pairs], [a],
                                   [T.tensor(g) for _, g in pairs])[0].numpy())
    np.testing.assert_array_equal(got[1], got[0])


@pytest.mark.parametrize("pos", [0, 1, 5])
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_bilinear_with_a_non_finite_incoming_gradient_like_torch(value, pos):
    """F.bilinear's gradients take an inf/NaN incoming gradient as torch's _trilinear sums:
    the weight with the other input first, then the gradient (contracting all three at once
    added signed infinite products: NaN where torch has inf)."""
    rng = np.random.default_rng(pos)
    a0, b0, w0 = (rng.standard_normal(s) for s in ((4, 3), (4, 2), (3, 3, 2)))
    g0 = np.cos(np.arange(12.0)).reshape(4, 3)
    g0.flat[pos] = value
    got = []
    for T in (torch, nbgrad):
        a, b, w = (T.tensor(v, requires_grad=True) for v in (a0, b0, w0))
        got.append([t.numpy() for t in T.autograd.grad(
            [T.nn.functional.bilinear(a, b, w)], [a, b, w], [T.tensor(g0)])])
    for want, have in zip(*got):
        np.testing.assert_array_equal(np.isnan(have), np.isnan(want))
        np.testing.assert_allclose(have, want, rtol=1e-12, atol=1e-12)  # (infs: equal)


# logcumsumexp's backward at large magnitudes and with a non-finite incoming gradient: the
# first-order formula exp(x) * revcumsum(g * exp(-result)) overflowed (inf/NaN from |x| ~ 89 in
# float32, ~709 in float64) where torch's log-space formula is finite, and kept a NaN upstream
# gradient that torch's sign split drops; second order recorded through logcumsumexp again
_LCSE_X = {"large": [100., 101., 102., 99.], "very negative": [-100., -101., -102., -103.],
           "spread": [-200., 5., 300., -1.], "-inf first": [-np.inf, 1., 2., 0.5],
           "-inf inside": [1., -np.inf, 2., 0.5], "float64 large": [800., 801., 799., 802.]}
_LCSE_G = {"mixed": [1., -2., 3., 0.5], "zeros": [0., 0., 1., -1.], "nan": [np.nan, 1., -2., 3.],
           "inf": [1., np.inf, -2., 3.]}


@pytest.mark.parametrize("g", list(_LCSE_G))
@pytest.mark.parametrize("x", list(_LCSE_X))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logcumsumexp_backward_like_torch(x, g, dtype):
    rows = np.array([_LCSE_X[x], _LCSE_X[x][::-1]], dtype)
    gs = np.array([_LCSE_G[g], _LCSE_G[g][::-1]], dtype)
    seen = []
    for T in (torch, nbgrad):
        t = T.tensor(rows, requires_grad=True)
        gt = T.tensor(gs, requires_grad=True)
        (gx,) = T.autograd.grad(t.logcumsumexp(1), t, gt, create_graph=True)
        w = T.tensor(np.cos(np.arange(8.0)).reshape(2, 4), dtype=gx.dtype)
        gg = T.autograd.grad((gx * w).sum(), gt, allow_unused=True)[0]
        seen.append([gx.detach().numpy(), gg.numpy(), type(gx.grad_fn).__name__])
    (want, want2, name), (got, got2, got_name) = seen
    assert got_name == name
    # exp(logcumsumexp(...) + x) carries the rounding of x's magnitude into a relative error:
    # the tolerance scales with the largest |x| (torch's own formula is as conditioned)
    scale = 8 * np.finfo(dtype).eps * max(1.0, np.abs(rows[np.isfinite(rows)]).max())
    tol = dict(rtol=max(scale, 2e-6 if dtype == "float32" else 1e-12), atol=1e-6 if dtype ==
               "float32" else 1e-12)
    np.testing.assert_allclose(got, want, equal_nan=True, **tol)
    np.testing.assert_allclose(got2, want2, equal_nan=True, **tol)


# ELU's family near zero: torch's kernel is expm1(x * input_scale) * alpha * scale; exp(x) - 1
# lost every digit below |x| ~ 1e-8 (float64) / 1e-4 (float32), gave 0 for tiny negative x and
# 0.0 for -0.0. float64 bit for bit, float32 within 1 ulp (numpy's float32 exp is not SLEEF's:
# exp(-3e-8) rounds the other way), the sign of zero as torch's, out of place and in place
_ELU_X = [-1e-10, -3e-8, -1e-5, -0.3, -1e-300, -30.0, -100.0, 0.0, -0.0, -np.inf, np.nan, 1e-30,
          3.0, np.inf]
_ELUS = {"elu": lambda F, t, **k: F.elu(t, **k), "elu_0.5": lambda F, t, **k: F.elu(t, 0.5, **k),
         "celu_1.3": lambda F, t, **k: F.celu(t, 1.3, **k), "selu": lambda F, t, **k: F.selu(t, **k)}


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name", list(_ELUS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elu_family_near_zero_bit_for_bit_like_torch(name, dtype, inplace):
    seen = []
    for T in (torch, nbgrad):
        x = T.tensor(np.array(_ELU_X, dtype), requires_grad=True)
        y = _ELUS[name](T.nn.functional, x * 1, inplace=inplace)
        (g,) = T.autograd.grad(y, x, T.ones_like(y))
        seen.append((y.detach().numpy(), g.numpy()))
    for want, got in zip(*seen):
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(np.signbit(got), np.signbit(want))
        ok = ~np.isnan(want)
        np.testing.assert_array_max_ulp(got[ok], want[ok], maxulp=0 if dtype == "float64" else 1)


# sigmoid as torch's kernel, 1 / (1 + exp(-x)): 0.5 * tanh(0.5 * x) + 0.5 lost the relative
# precision of every negative x (float32: sigmoid(-15) 2.6% off, 0 from -18 on where torch has
# 2e-9 ... 6e-39; numpy's exp and torch's differ by 1-2 ulps); its backward (g * (1 - y)) * y
# in torch's order: the same bits where y is
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_tails_like_torch(dtype):
    rng = np.random.default_rng(5)
    v = np.concatenate([np.linspace(-110, 110, 2201), rng.standard_normal(2000) * 8,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, -745.0, -800.0]])
    v = v.astype(dtype)
    g0 = rng.standard_normal(v.size).astype(dtype)
    seen = []
    for T in (torch, nbgrad):
        x = T.tensor(v, requires_grad=True)
        y = x.sigmoid()
        (g,) = T.autograd.grad(y, x, T.tensor(g0))
        seen.append((y.detach().numpy(), g.numpy()))
    (want, gw), (got, gg) = seen
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_max_ulp(got[ok], want[ok], maxulp=4)
    same = ok & (got == want)
    assert same.mean() > 0.8
    assert np.array_equal(gg[same], gw[same])


# var/std of float32 as torch's CPU kernel: Welford in double, rounded once: bit for bit
# (numpy's float32 accumulation matched about half the rows), and finite above |x| ~ 1.8e19
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3, 1e20])
@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
def test_float32_var_std_bit_for_bit_like_torch(op, scale):
    rng = np.random.default_rng(3)
    for shape, kw in [((64, 100), dict(dim=1)), ((1000,), {}), ((32, 7), dict(dim=0)),
                      ((8, 16, 32), dict(dim=2, keepdim=True)), ((4, 6), dict(dim=1, correction=0))]:
        x0 = (rng.standard_normal(shape) * scale + 3 * scale).astype(np.float32)
        seen = []
        for T in (torch, nbgrad):
            x = T.tensor(x0, requires_grad=True)
            r = getattr(T, op)(x, **kw)
            r = r if isinstance(r, tuple) else (r,)
            (g,) = T.autograd.grad(r[0].sum(), x)
            seen.append([t.detach().numpy() for t in r] + [g.numpy()])
        for want, got in zip(*seen):
            assert got.dtype == want.dtype
        assert np.array_equal(seen[1][0], seen[0][0])  # the moment itself: the same bits
        # the gradient's x - mean: float32 means rounded in each library's order
        np.testing.assert_allclose(seen[1][-1], seen[0][-1], rtol=1e-5,
                                   atol=1e-6 * np.abs(seen[0][-1]).max())


# float32 scans as torch's CPU kernels, accumulated in double and rounded once: cumsum and
# cumprod bit for bit in value and gradient, logcumsumexp in value (float32 accumulation matched
# 13-22% of the elements of 400-long rows)
_SCANS = {"cumsum": lambda t, d: t.cumsum(d), "cumprod": lambda t, d: (t * 0.01 + 1).cumprod(d),
          "logcumsumexp": lambda t, d: t.logcumsumexp(d)}


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", list(_SCANS))
def test_float32_scans_bit_for_bit_like_torch(name, dim):
    rng = np.random.default_rng(4)
    x0 = (rng.standard_normal((50, 400)) * 3 + 1).astype(np.float32)
    g0 = rng.standard_normal((50, 400)).astype(np.float32)
    seen = []
    for T in (torch, nbgrad):
        x = T.tensor(x0, requires_grad=True)
        y = _SCANS[name](x, dim)
        (g,) = T.autograd.grad(y, x, T.tensor(g0))
        seen.append((y.detach().numpy(), g.numpy()))
    (want, gw), (got, gg) = seen
    assert got.dtype == want.dtype and np.array_equal(got, want)
    if name != "logcumsumexp":  # (its gradient's exp and log: numpy's against torch's ulps)
        assert np.array_equal(gg, gw)
    else:
        np.testing.assert_allclose(gg, gw, rtol=1e-5, atol=1e-5 * np.abs(gw).max())


# float16: torch accumulates in float (not double) there; values bit for bit
@pytest.mark.parametrize("op", ["var", "std", "var_mean", "cumsum", "logcumsumexp"])
def test_float16_moments_and_scans_bit_for_bit_like_torch(op):
    x0 = (np.random.default_rng(6).standard_normal((50, 400)) * 3 + 1).astype(np.float16)
    seen = []
    for T in (torch, nbgrad):
        r = getattr(T, op)(T.tensor(x0), 1)
        seen.append((r[0] if isinstance(r, tuple) else r).numpy())
    assert seen[1].dtype == seen[0].dtype and np.array_equal(seen[1], seen[0])
