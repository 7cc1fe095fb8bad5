"""Rows: matrix products (mm, bmm, dot, mv, addmm). torch.matmul is composed of these in
nbgrad/functions/linalg.py, as PyTorch composes it, so the graph shows the same nodes.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: derivatives.py.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..backend import get_array_module as _xp
from ..tensor import Tensor
from .formulas import TENSORS, array_formulas
from .derivatives import _maybe_multiply, _mT
from ..autograd.apply import apply as _apply
from .registry import ROWS, op
from .lapack import (_LinAlgError, _each, _geqr2, _lu_like_torch, _lu_solve, _near_singular,
                     _org2r, _potf2, _solve_like_torch, _trsm)

# (under create_graph the formulas' steps are PyTorch's: mm with t(), bmm with transpose)
op("mm", lambda self, mat2: self @ _contiguous(mat2, self.shape[-2]),
   self=lambda g, mat2, self_strides, xp: _mm_mat1_grad(g, mat2, self_strides, xp),
   mat2=lambda g, self, mat2_strides, xp: _mm_mat2_grad(g, self, mat2_strides, xp))
op("bmm", lambda self, mat2: self @ mat2,
   self=lambda g, mat2, xp: xp.bmm(g, xp.contiguous(_mT(mat2), g.shape[-2])),
   mat2=lambda g, self, xp: xp.bmm(_mT(self), g))
op("dot", lambda self, other: self @ other,
   self=lambda g, other: g * other,
   other=lambda g, self: g * self)
op("mv", lambda self, vec: self @ vec,
   self=lambda g, vec: g.reshape(-1, 1) * vec,
   vec=lambda g, self, xp: xp.t(self) @ g)
op("addmm", lambda self, mat1, mat2, beta, alpha: _addmm(self, mat1, mat2, beta, alpha),
   broadcast=True,
   self=lambda g, beta, xp: _maybe_multiply(g, beta, xp),
   mat1=lambda g, mat2, mat1_strides, alpha, xp: _maybe_multiply(
       _mm_mat1_grad(g, mat2, mat1_strides, xp), alpha, xp),
   mat2=lambda g, mat1, mat2_strides, alpha, xp: _maybe_multiply(
       _mm_mat2_grad(g, mat1, mat2_strides, xp), alpha, xp))


# torch's mm_mat1_backward / mm_mat2_backward: the gradient of a column-major operand (strides
# (1, rows)) comes out column-major, the transpose of a product (the engine then keeps it as
# .grad without a copy; a Linear's weight, used as weight.t(), gets a C-contiguous gradient)
def _mm_mat1_grad(g, mat2, mat1_strides, xp):
    if mat1_strides[0] == 1 and mat1_strides[1] == g.shape[0]:  # (mat1: (n, k) column-major)
        return xp.t(mat2 @ xp.t(g))
    return g @ xp.contiguous(xp.t(mat2), g.shape[-2])


def _mm_mat2_grad(g, mat1, mat2_strides, xp):
    if mat2_strides[0] == 1 and mat2_strides[1] == mat1.shape[1]:  # (mat2: (k, p) column-major)
        return xp.t(xp.t(g) @ mat1)
    return xp.t(mat1) @ g


def _contiguous(b, rows):
    """The right operand of a product with ``rows`` rows, copied C-contiguous where that pays
    (the rule: formulas.ArrayFormulas.contiguous)."""
    return b if b.flags.c_contiguous else array_formulas(b).contiguous(b, rows)


def _addmm(c, a, b, beta, alpha):
    out = a @ _contiguous(b, a.shape[-2])  # a fresh array: scaled and added into in place
    if alpha != 1:
        out *= alpha
    out += c if beta == 1 else beta * c
    return out


# ---- triangles and diagonals, fused products, torch.linalg -------------------------------------
# Formulas run on arrays or, under create_graph, on Tensors: matmul, mT, elementwise operators and
# `xp` (formulas.py: tril, diagonal, inv, solve, eye, ...), so each serves every order.
def _diag_index(n, m, offset):
    """(rows, cols) of the `offset` diagonal of an (n, m) matrix."""
    k = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    i = np.arange(k)
    return (i, i + offset) if offset >= 0 else (i - offset, i)


def _diag_put(g, shape, offset, xp):
    """zeros(shape) with the last dim of g on the `offset` diagonal of the last two dims."""
    rows, cols = _diag_index(shape[-2], shape[-1], offset)
    return xp.put(g, tuple(shape), (Ellipsis, rows, cols))


def _diag_embed(a, offset, dim1, dim2):
    n = a.shape[-1] + abs(offset)
    rows, cols = _diag_index(n, n, offset)
    m = backend.get_array_module(a)
    out = m.zeros(a.shape[:-1] + (n, n), a.dtype)
    out[..., m.asarray(rows), m.asarray(cols)] = a
    return m.moveaxis(out, (-2, -1), (dim1, dim2))


def _beta_self(self, beta):
    """beta * self, where beta = 0 ignores self (NaN and inf included), as PyTorch."""
    return np.zeros_like(self) if beta == 0 else _scaled(self, beta)


def _scaled(x, c):
    return x if c == 1 else x * c


def _as_matrix_rhs(b, a):
    """linalg.solve's B: a batch of vectors when it has one dim fewer than A."""
    return b.ndim == a.ndim - 1


def _solve_fwd(a, b):
    if _as_matrix_rhs(b, a):
        x = _solve(a, b[..., None])[..., 0]
        return _col_major(x) if x.ndim > 1 else x  # (torch: a batch of vectors as a matrix)
    return _col_major(_solve(a, b))


def _solve(a, b):
    """numpy's solve; near a singular matrix (or where numpy calls one singular) torch's LU
    (_lu_solve): its values where rounding left the last pivot nonzero, else torch's
    LinAlgError and text (numpy's LU and torch's round such a pivot to 0 at different
    matrices). A near-singular matrix is looked for only behind a huge solution."""
    xp = _xp(a)
    try:
        x = xp.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return _lu_solve(a, b)
    # a singular matrix gives a huge solution: only behind one the check (a determinant)
    if xp is np and x.size and not abs(x).max() < 1e10 and _near_singular(a).any():
        return _lu_solve(a, b)
    return x


def _solve_grads(g, A, B, result, xp, needs):
    vec = _as_matrix_rhs(B, A)
    gm = g[..., None] if vec else g
    x = result[..., None] if vec else result
    gB = xp.solve(_mT(A), gm)
    gA = -(gB @ _mT(x)) if needs[0] else None
    if vec:
        gB = gB.squeeze(-1)  # (torch's matrix_to_vector: SqueezeBackward1)
    return gA, gB


def _solve_tri(A, B, left, upper=None):
    """A^-1 B (left) or B A^-1 for triangular A: numpy's solve; where numpy's LU would pivot
    (an entry beside the diagonal larger than it: a rank-deficient A's rounding-sized pivot),
    A's diagonal holds a zero or A or B an inf or NaN (upper given), BLAS's trsm substitution
    (lapack._trsm) as torch's: its rounding, inf and NaN where it divides by the zero, never
    numpy's 'Singular matrix'."""
    m = _xp(A)
    if upper is not None and m is np and not (
            np.isfinite(A).all() and np.isfinite(B).all() and _no_pivoting(A, upper)):
        return _trsm(A, B, upper) if left else _mT(_trsm(_mT(A), _mT(B), not upper))
    return m.linalg.solve(A, B) if left else _mT(m.linalg.solve(_mT(A), _mT(B)))


def _no_pivoting(A, upper):
    """Whether partial pivoting leaves triangular A's rows in place: every diagonal entry
    nonzero and at least as large as the entries beside it in its column (numpy's LU then
    solves A as the substitution does, to rounding)."""
    d = np.abs(np.diagonal(A, 0, -2, -1))
    off = np.abs(np.triu(A, 1) if upper else np.tril(A, -1)).max(-1 if upper else -2)
    return bool(d.all() and (d >= off).all())


def _solve_tri_grads(g, A, X, upper, left, needs):
    """torch's linalg_solve_triangular_backward: gB = solve_triangular(A^H, g, !upper), gA =
    -gB X^H (left) or -X^H gB, in A's triangle."""
    if not isinstance(g, Tensor):
        gB = _solve_tri(_mT(A), g, left, not upper)
        gA = -(gB @ _mT(X) if left else _mT(X) @ gB) if needs[0] else None
        m = _xp(gB)
        return (None if gA is None else (m.triu if upper else m.tril)(gA)), gB
    gB = _apply(ROWS["linalg_solve_triangular"], (A.transpose(-2, -1), g), (not upper, left))
    gA = None
    if needs[0]:
        gA = -(gB @ X.transpose(-2, -1) if left else X.transpose(-2, -1) @ gB)
        gA = gA.triu(0) if upper else gA.tril(0)
    return gA, gB if needs[1] else None


def _cholesky_backward(g, L, xp):
    """S = L^-T Phi(L^T gL) L^-1 (Phi: the lower triangle, its diagonal halved), symmetrised;
    recorded, torch's cholesky_backward: gA = tril(L^H gL), 0.5 (gA + tril(gA, -1)^H), then
    two triangular solves (LinalgSolveTriangularBackward0)."""
    if xp is TENSORS:
        ga = (L.transpose(-2, -1) @ g).tril(0)
        ga = xp.mul_scalar(ga + ga.tril(-1).transpose(-2, -1), 0.5)
        ga = _apply(ROWS["linalg_solve_triangular"], (L.transpose(-2, -1), ga), (True, True))
        return _apply(ROWS["linalg_solve_triangular"], (L, ga), (False, False))
    p = xp.tril(_mT(L) @ g, 0)
    p = p - 0.5 * p * xp.eye(p.shape[-1], p)
    y = xp.solve(_mT(L), p)           # L^-T p
    s = _mT(xp.solve(_mT(L), _mT(y)))  # (L^-T p) L^-1
    return 0.5 * (s + _mT(s))


def _eigh_backward(g, L, V, xp):
    """torch's linalg_eig_backward (hermitian), its steps in its order (which inf/NaN in the
    incoming gradient follow): V gL V^T without gV (no diagonal matrix: 0 * inf would be NaN);
    else V^T gV made skew, divided by E (L_j - L_i, ones on its diagonal), gL on the diagonal,
    V (. V^T)."""
    gL, gV = g
    if xp is TENSORS:
        return _eigh_backward_tensors(gL, gV, L, V)
    Vh = _mT(V)
    if gV is None:
        return (V * gL[..., None, :]) @ Vh
    vg = Vh @ gV
    ret = 0.5 * (vg - _mT(vg))
    e = L[..., None, :] - L[..., :, None]  # E_ij = L_j - L_i
    i = xp.arange(L.shape[-1])
    e[..., i, i] = 1
    ret /= e
    if gL is not None:
        ret[..., i, i] = gL
    return V @ (ret @ Vh)


def _eigh_backward_tensors(gL, gV, L, V):
    """torch's linalg_eig_backward (hermitian) as it records under create_graph: V gL V^H
    without gV; else VhgV = V^H gV made skew (0.5 (X - X^H)), divided in place by E (L_j - L_i,
    ones written on its diagonal), gL copied onto the diagonal, V (. V^H)."""
    Vh = V.transpose(-2, -1)
    if gV is None:
        return (V * gL.unsqueeze(-2)) @ Vh
    vhgv = Vh @ gV
    vhgv = TENSORS.mul_scalar(vhgv - vhgv.transpose(-2, -1), 0.5)
    e = L.unsqueeze(-2) - L.unsqueeze(-1)
    e.diagonal(0, -2, -1).fill_(1.0)
    ret = vhgv.div_(e)
    if gL is not None:
        ret.diagonal(0, -2, -1).copy_(gL)
    return V @ (ret @ Vh)


def _svd_backward_tensors(gU, gS, gVh, U, S, Vh, full_matrices):
    """torch's svd_backward (real) as it records under create_graph (derivatives.yaml narrows
    full matrices to the first k vectors)."""
    k = S.shape[-1]
    if full_matrices:
        U, Vh = U.narrow(-1, 0, k), Vh.narrow(-2, 0, k)
        gU = None if gU is None else gU.narrow(-1, 0, k)
        gVh = None if gVh is None else gVh.narrow(-2, 0, k)
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        return U @ (gS.unsqueeze(-1) * Vh) if m >= n else (U * gS.unsqueeze(-2)) @ Vh

    def skew(a):
        return a - a.transpose(-2, -1)
    uhgu = None if gU is None else skew(U.transpose(-2, -1) @ gU)
    vhgv = None if gVh is None else skew(Vh @ gVh.transpose(-2, -1))
    s2 = S * S
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1)
    e.diagonal(0, -2, -1).fill_(1)
    if uhgu is not None and vhgv is not None:
        ga = (uhgu * S.unsqueeze(-2) + S.unsqueeze(-1) * vhgv) / e
    elif uhgu is not None:
        ga = (uhgu / e) * S.unsqueeze(-2)
    else:
        ga = S.unsqueeze(-1) * (vhgv / e)
    if gS is not None:
        ga = ga + gS.diag_embed()
    if m > n and gU is not None:
        ga = U @ ga
        gus = gU / S.unsqueeze(-2)
        ga = ga + gus - U @ (U.transpose(-2, -1) @ gus)
        return ga @ Vh
    if m < n and gVh is not None:
        ga = ga @ Vh
        sgv = gVh / S.unsqueeze(-1)
        ga = ga + sgv - (sgv @ Vh.transpose(-2, -1)) @ Vh
        return U @ ga
    return U @ (ga @ Vh) if m >= n else (U @ ga) @ Vh


def _svd_backward(g, U, S, Vh, full_matrices, xp):
    gU, gS, gVh = g
    if xp is TENSORS:
        return _svd_backward_tensors(gU, gS, gVh, U, S, Vh, full_matrices)
    k = S.shape[-1]
    if full_matrices:  # only the first k singular vectors have a derivative
        U, Vh = U[..., :, :k], Vh[..., :k, :]
        gU = None if gU is None else gU[..., :, :k]
        gVh = None if gVh is None else gVh[..., :k, :]
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        return (U @ (gS[..., :, None] * Vh)) if m >= n else ((U * gS[..., None, :]) @ Vh)
    eye = xp.eye(k, S)
    s2 = S * S
    e = s2[..., None, :] - s2[..., :, None] + eye
    uhgu = None if gU is None else _mT(U) @ gU
    uhgu = None if uhgu is None else uhgu - _mT(uhgu)
    vhgv = None if gVh is None else Vh @ _mT(gVh)
    vhgv = None if vhgv is None else vhgv - _mT(vhgv)
    if uhgu is not None and vhgv is not None:
        ret = (uhgu * S[..., None, :] + S[..., :, None] * vhgv) / e
    elif uhgu is not None:
        ret = uhgu * (S[..., None, :] / e)
    else:
        ret = S[..., :, None] * (vhgv / e)
    ret = ret * (1 - eye)
    if gS is not None:
        ret = ret + gS[..., None, :] * eye
    if m > n and gU is not None:
        ga = U @ ret
        gus = gU / S[..., None, :]
        ga = ga + gus - U @ (_mT(U) @ gus)
        return ga @ Vh
    if m < n and gVh is not None:
        ga = ret @ Vh
        sgv = gVh / S[..., :, None]
        ga = ga + sgv - (sgv @ _mT(Vh)) @ Vh
        return U @ ga
    return U @ (ret @ Vh)


def _eigh_fwd(A, UPLO):
    w, v = _xp(A).linalg.eigh(A, UPLO=UPLO)
    return w, _col_major(v)


def _col_major(a):
    """`a` with each matrix laid out column-major (LAPACK's layout, torch's strides)."""
    return _xp(a).ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)


def _qr_backward_tensors(gQ, gR, Q, R):
    """torch's linalg_qr_backward as it records under create_graph: gA = gR R^H - Q^H gQ;
    m >= n: syminvadj(triu(gA)) (X + X^H, its diagonal halved in place: CopySlices), Q times
    that, plus gQ, then solve_triangular(R^H, ., upper=False, left=False); m < n: Q (X -
    X^H).tril() of X = -gA, solved against R's leading square, zeros after, plus Q gR."""
    if gR is not None:
        gA = gR @ R.transpose(-2, -1)
        if gQ is not None:
            gA = gA - Q.transpose(-2, -1) @ gQ
    else:
        gA = -(Q.transpose(-2, -1) @ gQ)
    m, n = Q.shape[-2], R.shape[-1]
    if m < n:  # trilImInvAdjSkew(-gA) = (X - X^H).tril(), over R's leading m x m, zeros after
        x = -gA
        gA = Q @ (x - x.transpose(-2, -1)).tril()
        gA = _apply(ROWS["linalg_solve_triangular"], (R.narrow(-1, 0, m).transpose(-2, -1),
                                                       gA), (False, False))
        gA = TENSORS.concatenate([gA, gA.new_zeros(tuple(R.shape[:-1]) + (n - m,))], -1)
        return gA if gR is None else gA + Q @ gR
    x = gA.triu()
    ret = x + x.transpose(-2, -1)
    _apply(ROWS["mul_scalar"], (ret.diagonal(0, -2, -1),), (0.5,), inplace="mul_")  # (mul_.Scalar)
    gA = Q @ ret
    if gQ is not None:
        gA = gA + gQ
    return _apply(ROWS["linalg_solve_triangular"], (R.transpose(-2, -1), gA), (False, False))


def _qr_backward(g, A, Q, R, xp):
    """torch's linalg_qr_backward. m >= n: (gQ + Q syminvadj(triu(M))) R^-H with M = gR R^H -
    Q^H gQ (syminvadj(X) = X + X^H, its diagonal once); wide (m < n): [Q tril(M^H - M)
    R1^-H | 0] + Q gR, R1 R's leading m columns (torch's formula and order of operations: its
    rounding, which 1 / R's diagonal amplifies where A is rank-deficient)."""
    gQ, gR = g
    m, n = Q.shape[-2], R.shape[-1]
    if xp is TENSORS:  # (torch's nodes: its in-place diagonal, its solves)
        return _qr_backward_tensors(gQ, gR, Q, R)
    if gQ is not None and gR is not None:
        M = gR @ _mT(R) - _mT(Q) @ gQ
    elif gQ is not None:
        M = -(_mT(Q) @ gQ)
    else:
        M = gR @ _mT(R)
    if m < n:
        lead = _solve_tri_right(_mT(R[..., :, :m]), Q @ xp.tril(_mT(M) - M, 0), xp)
        ga = xp.concatenate([lead, xp.new_zeros(lead, tuple(lead.shape[:-1]) + (n - m,))],
                            axis=len(lead.shape) - 1)
        return ga if gR is None else ga + Q @ gR
    ga = Q @ (xp.triu(M, 0) + _mT(xp.triu(M, 1)))
    if gQ is not None:
        ga = ga + gQ
    return _solve_tri_right(_mT(R), ga, xp)


def _solve_tri_right(L, B, xp):
    """B L^-1 for lower-triangular L: torch's solve_triangular(L, B, upper=False, left=False)
    (LinalgSolveTriangularBackward0 when recorded)."""
    if xp is TENSORS:
        return _apply(ROWS["linalg_solve_triangular"], (L, B), (False, False))
    return _solve_tri(L, B, False, False)


def _pinv_backward(g, result, A):
    m, n = A.shape[-2], A.shape[-1]
    p, ph, gh = result, _mT(result), _mT(g)
    if m <= n:
        k = gh @ p
        kph = k @ ph
        return -_mT(p @ k) + kph - (A @ p) @ kph + (ph @ p) @ (gh - k @ A)
    k = p @ gh
    phk = ph @ k
    return -_mT(k @ p) + ((gh - A @ k) @ p) @ ph + phk - (phk @ p) @ A


op("tril", lambda self, diagonal: _xp(self).tril(self, diagonal),
   self=lambda g, diagonal, xp: xp.tril(g, diagonal))
op("triu", lambda self, diagonal: _xp(self).triu(self, diagonal),
   self=lambda g, diagonal, xp: xp.triu(g, diagonal))
op("diag_embed", lambda self, offset, dim1, dim2: _diag_embed(self, offset, dim1, dim2),
   self=lambda g, offset, dim1, dim2, xp: xp.diagonal(g, offset, dim1, dim2))
op("diag_copy", lambda self, diagonal: self.diagonal(diagonal).copy(),
   node="DiagonalBackward0_copy",
   self=lambda g, self_shape, diagonal, xp: _diag_put(g, self_shape, diagonal, xp))
op("trace", lambda self: self.trace(),
   self=lambda g, self_shape, xp: _diag_put(
       xp.filled(g, (min(self_shape),)), self_shape, 0, xp))
op("baddbmm", lambda self, batch1, batch2, beta, alpha: (
    _beta_self(self, beta)) + _scaled(batch1 @ batch2, alpha),
   broadcast=True,
   self=lambda g, beta, xp: _maybe_multiply(g, beta, xp),
   batch1=lambda g, batch2, alpha, xp: _maybe_multiply(
       xp.bmm(g, xp.contiguous(_mT(batch2), g.shape[-2])), alpha, xp),
   batch2=lambda g, batch1, alpha, xp: _maybe_multiply(xp.bmm(_mT(batch1), g), alpha, xp))
op("addbmm", lambda self, batch1, batch2, beta, alpha: (
    _beta_self(self, beta)) + _scaled((batch1 @ batch2).sum(0), alpha),
   broadcast=True,
   self=lambda g, beta, xp: _maybe_multiply(g, beta, xp),
   batch1=lambda g, batch2, alpha, xp: _maybe_multiply(
       xp.bmm(xp.broadcast_to(xp.expand_dims(g, 0), (batch2.shape[0],) + tuple(g.shape)),
              _mT(batch2)), alpha, xp),
   batch2=lambda g, batch1, alpha, xp: _maybe_multiply(
       xp.bmm(_mT(batch1), xp.broadcast_to(xp.expand_dims(g, 0),
                                           (batch1.shape[0],) + tuple(g.shape))), alpha, xp))
op("addmv", lambda self, mat, vec, beta, alpha: (
    _beta_self(self, beta)) + _scaled(mat @ vec, alpha), broadcast=True,
   self=lambda g, beta, xp: _maybe_multiply(g, beta, xp),
   mat=lambda g, vec, alpha, xp: _maybe_multiply(g.reshape(-1, 1) * vec, alpha, xp),
   vec=lambda g, mat, alpha, xp: _maybe_multiply(xp.t(mat) @ g, alpha, xp))
op("addr", lambda self, vec1, vec2, beta, alpha: (
    _beta_self(self, beta)) + _scaled(vec1[:, None] * vec2, alpha),
   broadcast=True,
   self=lambda g, beta, xp: _maybe_multiply(g, beta, xp),
   vec1=lambda g, vec2, alpha, xp: _maybe_multiply(g @ vec2, alpha, xp),
   vec2=lambda g, vec1, alpha, xp: _maybe_multiply(xp.t(g) @ vec1, alpha, xp))
op("linalg_inv", lambda A: _col_major(_nan_where_nan(A, _xp(A).linalg.inv(A))),
   node="LinalgInvExBackward0",
   A=lambda g, result: -(_mT(result) @ (g @ _mT(result))))  # (torch's order: R^H (g R^H))
op("linalg_det", lambda A: _det_fwd(A),
   A=lambda g, A, result, xp: _det_backward(g, A, result, xp))
# `result` (sign): saved as torch saves it (its formula reads it for complex input), so that
# an in-place write into the sign makes backward fail as torch's does
op("linalg_slogdet", lambda A: _slogdet_fwd(A), n_out=2,
   A=lambda g, A, result, xp: None if g[1] is None else _slogdet_backward(g[1], A, xp)
   if xp is not TENSORS else _solve_diag(g[1], A))
op("linalg_solve", lambda A, B: _solve_fwd(A, B), node="LinalgSolveExBackward0",
   **{"A, B": lambda g, A, B, result, xp, needs: _solve_grads(g, A, B, result, xp, needs)})
op("linalg_cholesky", lambda A: _col_major(_cholesky_fwd(A)), node="LinalgCholeskyExBackward0",
   A=lambda g, result, xp: _cholesky_backward(g, result, xp))
# A^{-1} B (left) or B A^{-1} for triangular A: what cholesky's gradient runs under create_graph
# (LinalgSolveTriangularBackward0), with torch's linalg_solve_triangular_backward
op("linalg_solve_triangular", lambda self, B, upper, left: _solve_tri(self, B, left, upper),
   **{"self, B": lambda g, self, result, upper, left, needs, xp: _solve_tri_grads(
       g, self, result, upper, left, needs)})
# LAPACK's results are column-major (inv, solve, cholesky, eigh's vectors, svd's U and Vh, qr's
# Q and R), as torch returns them: an mm of one differentiates as torch's mm_mat1_backward of
# a column-major operand, (mat2 grad^T)^T, a reshape of one copies (UnsafeViewBackward0)
op("linalg_qr", lambda A: tuple(_col_major(a) for a in _qr_fwd(A)), n_out=2,
   A=lambda g, A, result, result1, xp: _qr_backward(g, A, result, result1, xp))
op("linalg_eigh", lambda A, UPLO: _eigh_fwd(A, UPLO), n_out=2,
   A=lambda g, result, result1, xp: _eigh_backward(g, result, result1, xp))
op("linalg_svd", lambda A, full_matrices: _svd_col_major(*_svd_fwd(A, full_matrices)),
   n_out=3,
   A=lambda g, result, result1, result2, full_matrices, xp: _svd_backward(
       g, result, result1, result2, full_matrices, xp))
op("linalg_pinv", lambda A: _pinv_fwd(A),
   A=lambda g, A, result: _pinv_backward(g, result, A))
op("linalg_cross", lambda self, other, dim: _xp(self).cross(self, other, axis=dim),
   node="LinalgCrossBackward0", broadcast=True,
   self=lambda g, other, dim, xp: xp.cross(other, g, dim),
   other=lambda g, self, dim, xp: xp.cross(g, self, dim))


_SVD_NON_FINITE = ("linalg.svd: The algorithm failed to converge because the input matrix "
                   "contained non-finite values.")


def _svd_col_major(u, s, vh):
    return _col_major(u), s, _col_major(vh)


def _svd_fwd(A, full_matrices):
    """numpy's svd, never on a matrix with inf or NaN (LAPACK's gesdd loops forever on inf):
    NaN raises torch's error; inf gives NaN singular values, as torch's, and for a lone inf at
    [0, 0] torch's vectors (its gesdd's: the identity with columns 0 and k - 1 swapped, k =
    min(m, n)), NaN vectors for another inf (torch's gesdd answers those case by case)."""
    xp = _xp(A)
    fin = xp.isfinite(A).all((-2, -1))
    if bool(fin.all()):
        return tuple(xp.linalg.svd(A, full_matrices=full_matrices))
    if bool(xp.isnan(A).any()):
        raise RuntimeError(_SVD_NON_FINITE)
    m, n = A.shape[-2:]
    k = min(m, n)
    U, S, Vh = xp.linalg.svd(xp.where(fin[..., None, None], A, 0), full_matrices=full_matrices)
    S = xp.where(fin[..., None], S, xp.nan)
    lone = ~xp.isfinite(A[..., 0, 0]) & (xp.isfinite(A).sum((-2, -1)) == m * n - 1)
    swap = np.arange(max(m, n))
    swap[[0, k - 1]] = swap[[k - 1, 0]]
    pu = np.eye(m, dtype=A.dtype)[:, swap[:m]][:, :U.shape[-1]]
    pv = np.eye(n, dtype=A.dtype)[swap[:n]][:Vh.shape[-2]]
    U = xp.where(fin[..., None, None], U, xp.where(lone[..., None, None], xp.asarray(pu), xp.nan))
    Vh = xp.where(fin[..., None, None], Vh,
                  xp.where(lone[..., None, None], xp.asarray(pv), xp.nan))
    return U, S, Vh


def _pinv_fwd(A):
    """numpy's pinv (an svd: never on inf or NaN, see _svd_fwd); with inf, zeros as torch's."""
    xp = _xp(A)
    if not bool(xp.isfinite(A).all()):
        if bool(xp.isnan(A).any()):
            raise RuntimeError(_SVD_NON_FINITE)
        return xp.zeros(A.shape[:-2] + A.shape[:-3:-1], A.dtype)
    return xp.linalg.pinv(A)


def _cdist_fwd(x1, x2, p):
    """(..., P, M), (..., R, M) -> (..., P, R) p-norm distances."""
    from .reductions import _vector_norm
    return _vector_norm(x1[..., :, None, :] - x2[..., None, :, :], p, -1, False)


def _cdist_grads(g, x1, x2, result, p, xp):
    """(d/dx1, d/dx2) of the p-norm distances: each pair's gradient is
    sign(diff) |diff|^(p-1) / dist^(p-1) (diff / dist for p = 2, sign(diff) for p = 1, the
    entries at the maximum for p = inf), weighted by g and summed over the other set."""
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    dist = result[..., None]
    if p == 0:
        d = diff * 0
    elif p == 1:  # (torch's kernel's sign keeps a NaN: xp.sign is sgn, 0 there)
        d = xp.where(diff != diff, diff, xp.sign(diff))
    elif p == 2:
        d = diff / (dist + (dist == 0))
    elif p == float("inf"):
        d = xp.sign(diff) * (abs(diff) == dist)
    else:
        d = xp.sign(diff) * abs(diff) ** (p - 1) / (dist + (dist == 0)) ** (p - 1)
    gd = g[..., None] * d
    return gd.sum(-2), -gd.sum(-3)


op("cdist", lambda x1, x2, p: _cdist_fwd(x1, x2, p), node="CdistBackward0",
   **{"x1, x2": lambda g, x1, x2, result, p, xp: _cdist_grads(g, x1, x2, result, p, xp)
      if xp is not TENSORS else (
          _apply(ROWS["cdist_backward"], (g, x1, x2, result), (p,)),
          _apply(ROWS["cdist_backward"], (_mT(g), x2, x1, _mT(result).contiguous()), (p,)))})
# torch's _cdist_backward (one input's gradient; the other's with the sets swapped) has no
# derivative: under create_graph cdist's gradient hangs on CdistBackwardBackward0, which refuses
# the second backward with torch's NotImplementedError
op("cdist_backward", lambda grad, x1, x2, result, p: _cdist_grads(
    grad, x1, x2, result, p, _xp(x1))[0], node="CdistBackwardBackward0",
   **{"grad, x1, x2, result": lambda g: _no_derivative("_cdist_backward")(g)})


def _no_derivative(name):
    from .reductions import _refuse
    return _refuse(name)
def _euclidean_fwd(x1, x2):
    """torch's _euclidean_dist: one product of [-2 x1, |x1|^2, 1] and [x2, 1, |x2|^2], clamped
    at 0, its square root (torch's rounding; an inf gives NaN, as inf - inf there)."""
    xp = _xp(x1)
    n1, n2 = (x1 * x1).sum(-1, keepdims=True), (x2 * x2).sum(-1, keepdims=True)
    a = xp.concatenate([x1 * -2, n1, xp.ones_like(n1)], -1)
    b = xp.concatenate([x2, xp.ones_like(n2), n2], -1)
    return xp.sqrt(xp.maximum(a @ xp.swapaxes(b, -1, -2), 0))


def _euclidean_grads(g, x1, x2, result, xp):
    """torch's _euclidean_dist_backward: ratio = g / dist, 0 where the distance is 0 (so at a
    zero distance neither order moves), x1 * ratio summed over x2 - ratio @ x2, and for x2."""
    zero = result == 0
    ratio = xp.where(zero, 0.0, g / (result + zero))
    return (x1 * xp.sum(ratio, axis=-1, keepdims=True) - ratio @ x2,
            x2 * xp.sum(_mT(ratio), axis=-1, keepdims=True) - _mT(ratio) @ x1)


op("euclidean_dist", _euclidean_fwd, node="EuclideanDistBackward0",
   **{"x1, x2": lambda g, x1, x2, result, xp: _euclidean_grads(g, x1, x2, result, xp)})


# ------------------------------------------------------------------------------------------------
# QR of a matrix holding inf or NaN: torch's Householder steps
# ------------------------------------------------------------------------------------------------
def _qr_fwd(A):
    """numpy's reduced QR; the matrices holding an inf or NaN by LAPACK's Householder steps
    (_geqr2, _org2r), so that the NaN and inf land where torch's do (numpy's QR leaves columns
    finite that torch's make NaN)."""
    xp = _xp(A)
    Q, R = xp.linalg.qr(A, mode="reduced")
    if xp is not np or np.isfinite(A).all():
        return Q, R
    Q, R = np.array(Q), np.array(R)
    qs, rs = Q.reshape((-1,) + Q.shape[-2:]), R.reshape((-1,) + R.shape[-2:])
    for i, m in _each(A, ~np.isfinite(A).all((-2, -1))):
        h, taus = _geqr2(m)
        qs[i], rs[i] = _org2r(h, taus), np.triu(h[:len(taus)])
    return Q, R


# ------------------------------------------------------------------------------------------------
# cholesky where LAPACK's potrf stops: torch's LinAlgError
# ------------------------------------------------------------------------------------------------
def _cholesky_fwd(A):
    """numpy's cholesky of the lower triangles; for a matrix numpy refuses or one holding an inf
    or NaN, LAPACK's potf2 column by column (_potf2), so torch's result (an inf on the diagonal
    gives inf there and zeros below) or torch's LinAlgError naming the first leading minor where
    the pivot is <= 0 or NaN."""
    xp = _xp(A)
    if xp is not np:
        return xp.linalg.cholesky(A)
    if np.isfinite(np.tril(A)).all():
        try:
            return np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            pass
    out = np.zeros(A.shape, A.dtype)
    flat = out.reshape((-1,) + A.shape[-2:])
    for i, m in _each(A, np.ones(A.shape[:-2], bool)):
        flat[i], info = _potf2(m)
        if info:
            batch = f"(Batch element {i}): " if A.ndim > 2 else ""
            raise _LinAlgError(
                f"linalg.cholesky: {batch}The factorization could not be completed because the "
                f"input is not positive-definite (the leading minor of order {info} is not "
                "positive-definite).")
    return out


# ------------------------------------------------------------------------------------------------
# det at a singular matrix: its value and gradient are LAPACK's rounding, so they are torch's
# ------------------------------------------------------------------------------------------------
def _det_fwd(A):
    """(..., n, n) -> (...): numpy's det; near a singular matrix, the product of the pivots of
    torch's LU (times the permutation's sign), so that det and its gradient there are torch's."""
    xp = _xp(A)
    det = xp.linalg.det(A)
    if xp is not np:
        return det
    near = _near_singular(A) | ~np.isfinite(A).all((-2, -1))  # (an inf: torch's NaN)
    if near.any():
        det = np.array(det)
        flat = det.reshape(-1)
        for i, m in _each(A, near):  # torch factors A^T when A is contiguous, else A
            lu, piv = _lu_like_torch(m.T if A.flags.c_contiguous else m)
            v = A.dtype.type(1)
            for x in np.diagonal(lu):
                v = v * x
            flat[i] = -v if sum(p != k for k, p in enumerate(piv)) % 2 else v
    return det


def _det_backward(g, A, result, xp):
    """torch's linalg_det_backward. First order: d A^{-T} (d = g det) solved from torch's LU of
    A, with eps on a zero pivot, so 0 where d == 0 (an exactly singular LU, or g == 0) and the
    cofactors where the LU left a rounding-sized last pivot (torch's, bit for bit, near a
    singular matrix: see _lu_like_torch). Recorded (create_graph), torch takes the matrices with
    |det| < 100 eps from the SVD instead, U diag(prod_{j != i} s_j) V^H det(U) det(V^H) g, which
    stays right (and differentiable) for a singular A; the others from solve(A^H, d I). nbgrad
    takes the SVD's also for a matrix within rounding of singular (_near_singular) where torch's
    |det| came out above 100 eps: the same first derivative to rounding, and the second is the
    polynomial's (torch's solve there gives rounding noise: 0 or 1e18 by the LU's last pivot)."""
    d = (g * result)[..., None, None]
    if xp is not TENSORS and type(A) is not np.ndarray:  # a device: its own solver, not MKL's LU
        return d * _mT(xp.inv(A))
    if xp is not TENSORS:
        live = np.broadcast_to(d[..., 0, 0] != 0, A.shape[:-2])
        near = (_near_singular(A) | ~np.isfinite(A).all((-2, -1))) & live
        if live.all() and not near.any():
            return d * _mT(xp.inv(A))
        out = np.zeros(A.shape, np.result_type(d, A))
        flat, ds = out.reshape((-1,) + A.shape[-2:]), np.broadcast_to(d, out.shape).reshape(
            (-1,) + A.shape[-2:])
        for i, m in _each(A, live):
            flat[i] = _solve_like_torch(m, ds[i, 0, 0], A.flags.c_contiguous) \
                if near.reshape(-1)[i] else ds[i] * _mT(np.linalg.inv(m))
        return out
    dt = A._data.dtype
    small = abs(result._data) < 100 * np.finfo(dt).eps
    if isinstance(A._data, np.ndarray):  # torch's solve there is rounding: the SVD's cofactors
        small = small | _near_singular(A._data)
    small = small[..., None, None]
    if not small.any():  # torch's: solve(A^H, (d I)^H) (LinalgSolveExBackward0)
        return _solve_diag(g * result, A)
    safe = xp.where(xp.constant(small), xp.constant(np.eye(A.shape[-1], dtype=dt)), A)
    u, s, vh = _apply(ROWS["linalg_svd"], (A,), (False,))
    alpha = _apply(ROWS["linalg_det"], (u,)) * _apply(ROWS["linalg_det"], (vh,))
    cof = (u * (_prod_others_safe(s, xp) * (g * alpha)[..., None])[..., None, :]) @ vh
    return xp.where(xp.constant(small), cof, d * _mT(xp.inv(safe)))


def _nan_where_nan(A, out):
    """``out`` (one result per matrix of A, matrices or numbers) NaN for each matrix of A that
    holds a NaN: torch's LU (getrf) carries it into every pivot and so every entry of its
    solves, where numpy's gesv leaves some finite."""
    xp = _xp(A)
    nan = xp.isnan(A).any((-2, -1))
    if not nan.any():
        return out
    return xp.where(nan.reshape(nan.shape + (1,) * (out.ndim - nan.ndim)), np.nan, out)


def _slogdet_fwd(A):
    """(sign, log|det|) as torch's LU gives them: numpy's, but near a singular matrix from the
    pivots of torch's LU (_lu_like_torch), and sign 0, log|det| NaN for a matrix holding a NaN
    (sgn(NaN) = 0 in torch's product of the pivots' signs)."""
    xp = _xp(A)
    sign, logabs = xp.linalg.slogdet(A)
    if xp is not np:
        return sign, logabs
    nan = np.isnan(A).any((-2, -1))
    near = _near_singular(A) | (~np.isfinite(A).all((-2, -1)) & ~nan)
    if not (nan.any() or near.any()):
        return sign, logabs
    sign, logabs = np.array(sign), np.array(logabs)
    for i, m in _each(A, near):
        lu, piv = _lu_like_torch(m.T if A.flags.c_contiguous else m)
        pivots = np.diagonal(lu)
        swaps = sum(p != k for k, p in enumerate(piv)) % 2
        with np.errstate(divide="ignore"):
            sign.reshape(-1)[i] = (-1) ** swaps * np.prod(np.sign(np.nan_to_num(pivots, nan=0.0)))
            logabs.reshape(-1)[i] = np.sum(np.log(np.abs(pivots)))
    sign[nan], logabs[nan] = 0, np.nan
    return sign, logabs


def _slogdet_backward(g, A, xp):
    """g A^{-T} at first order: numpy's inverse; near a singular matrix or with an inf torch's
    LU solve (_solve_like_torch: rounding-sized pivots give torch's huge values, not numpy's
    error, an inf torch's NaN), and NaN for a matrix holding a NaN."""
    d = g[..., None, None]
    if type(A) is not np.ndarray:
        return d * _mT(xp.inv(A))
    near = _near_singular(A) | (np.isinf(A).any((-2, -1)) & ~np.isnan(A).any((-2, -1)))
    if not near.any():
        return _nan_where_nan(A, d * _mT(xp.inv(A)))
    out = np.zeros(A.shape, np.result_type(d, A))
    flat = out.reshape((-1,) + A.shape[-2:])
    ds = np.broadcast_to(d, out.shape).reshape((-1,) + A.shape[-2:])
    for i, m in _each(A, np.ones(A.shape[:-2], bool)):
        flat[i] = _solve_like_torch(m, ds[i, 0, 0], A.flags.c_contiguous) \
            if near.reshape(-1)[i] else ds[i] * _mT(np.linalg.inv(m))
    return _nan_where_nan(A, out)


def _solve_diag(d, A):
    """d A^{-H} (d: one number per matrix) as torch's det and slogdet backward under
    create_graph: solve(A^H, diag_embed(d expanded)^H) (LinalgSolveExBackward0)."""
    d = d.unsqueeze(-1)
    dI = _apply(ROWS["diag_embed"], (d.expand(*d.shape[:-1], A.shape[-1]),),
                (0, len(d.shape) - 1, len(d.shape)))
    return _apply(ROWS["linalg_solve"], (A.transpose(-2, -1), dI.transpose(-2, -1)))


def _prod_others_safe(s, xp):
    """prod_{j != i} s_j along the last dim by exclusive products from both ends, as torch's
    prod_safe_zeros_backward (s.prod() / s divides by the zero singular values)."""
    ones = xp.constant(np.ones(tuple(s.shape[:-1]) + (1,), s._data.dtype))
    left = xp.cumprod(xp.concatenate([ones, s[..., :-1]], -1), -1)
    right = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(s, (-1,))[..., :-1]], -1), -1),
                    (-1,))
    return left * right
