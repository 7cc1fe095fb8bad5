"""LAPACK's steps written out in numpy, for the inputs where numpy's LAPACK (OpenBLAS) and
torch's (MKL) answer differently and torch's answer is observable: a matrix holding inf or NaN
(which entries come out NaN), a singular one (a rounding-sized pivot, or a zero one), a
factorization that stops (its info). Each follows the reference routine (potf2, geqr2, org2r,
getrf, trsm) and says where MKL's differs from it; linalg.py's forwards and formulas call them
only on such inputs, numpy's own routines everywhere else.
"""
from __future__ import annotations

import math

import numpy as np


class _LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError (its class is torch._C._LinAlgError): a factorization LAPACK
    could not complete; a RuntimeError (nbgrad.linalg.LinAlgError)."""


def _potf2(m):
    """One (n, n) matrix -> (L, info) as LAPACK's unblocked potf2 (lower): the pivot
    a_jj - L_j L_j^T, stop (info j + 1) where it is <= 0 or NaN, the column below scaled by its
    square root's reciprocal."""
    n, to = m.shape[-1], m.dtype.type
    L = np.tril(m).astype(m.dtype)
    with np.errstate(all="ignore"):
        for j in range(n):
            ajj = to(L[j, j] - L[j, :j] @ L[j, :j])
            if not ajj > 0:
                return L, j + 1
            L[j, j] = ajj = np.sqrt(ajj)
            L[j + 1:, j] = (L[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) * (to(1) / ajj)
    return L, 0


def _geqr2(a):
    """LAPACK's unblocked geqr2 on one matrix: the reflectors below R's diagonal, their taus
    (dlarfg: beta = -sign(lapy2(alpha, |x|), alpha), a NaN alpha counted negative; lapy2 with
    Fortran's max and min, which answer their second argument beside a NaN), each applied to
    the columns on its right in full, even with tau 0 (as MKL's)."""
    h = np.array(a, copy=True)
    m, n = h.shape
    taus = []
    with np.errstate(all="ignore"):
        for j in range(min(m, n)):
            alpha, x = h[j, j], h[j + 1:, j]
            xnorm = np.sqrt(np.sum(x * x)) if x.size else h.dtype.type(0)
            tau = h.dtype.type(0)
            if xnorm != 0:
                big = alpha if abs(alpha) > xnorm else xnorm
                small = alpha if abs(alpha) < xnorm else xnorm
                big, small = abs(big), abs(small)
                r = big if small == 0 else big * np.sqrt(1 + (small / big) ** 2)
                beta = -r if alpha >= 0 else r
                tau = (beta - alpha) / beta
                x *= 1 / (alpha - beta)
                h[j, j] = beta
            taus.append(tau)
            if j + 1 < n:  # (with tau 0 too, as MKL's: 0 * inf is NaN there)
                v = np.concatenate([[1], x]).astype(h.dtype)
                c = h[j:, j + 1:]
                c -= tau * np.outer(v, v @ c)
    return h, taus


def _org2r(h, taus):
    """LAPACK's org2r: Q's k columns from the reflectors, the last first, each applied (dlarf)
    only to the rows up to its last nonzero and the columns up to their last nonzero."""
    m, k = h.shape[0], len(taus)
    q = np.zeros((m, k), h.dtype)
    with np.errstate(all="ignore"):
        for i in range(k - 1, -1, -1):
            tau, v = taus[i], np.concatenate([[1], h[i + 1:, i]]).astype(h.dtype)
            if i < k - 1 and tau != 0:
                nz = np.flatnonzero(v != 0)
                rows = nz[-1] + 1 if nz.size else 0
                c = q[i:i + rows, i + 1:]
                cols = np.flatnonzero((c != 0).any(0))
                cols = cols[-1] + 1 if cols.size else 0
                if rows and cols:
                    c[:, :cols] -= tau * np.outer(v[:rows], v[:rows] @ c[:, :cols])
            q[i + 1:, i] = -tau * v[1:]
            q[i, i] = 1 - tau
    return q


def _trsm(A, B, upper):
    """A^-1 B for triangular A by substitution as reference BLAS's trsm without its zero skip:
    row i is (B_i - A_i,others X_others) times 1 / A_ii, from the last row (upper) or the first."""
    X = np.array(np.broadcast_to(B, np.broadcast_shapes(A.shape[:-2] + (1, 1), B.shape)),
                 np.result_type(A, B))
    n = A.shape[-1]
    with np.errstate(all="ignore"):
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            rest = slice(i + 1, n) if upper else slice(0, i)
            acc = (A[..., i:i + 1, rest] @ X[..., rest, :])[..., 0, :]
            X[..., i, :] = (X[..., i, :] - acc) * (1 / A[..., i, i])[..., None]
    return X


def _near_singular(A):
    """(..., n, n) -> (...) bool: the finite matrices (n <= 8) whose determinant is within
    rounding of 0 (|det| <= 64 n eps times Hadamard's bound), where numpy's LU (OpenBLAS, no
    fused multiply-add) and torch's (MKL getrf) can round the last pivot to 0 on one side only."""
    n = A.shape[-1]
    if n > 8 or n < 2 or A.size == 0 or A.dtype.kind != "f":
        return np.zeros(A.shape[:-2], bool)
    bound = np.prod(np.sqrt((A * A).sum(-1)), -1)
    det = np.linalg.det(A)
    return np.isfinite(bound) & (abs(det) <= 64 * n * np.finfo(A.dtype).eps * bound)


def _lu_like_torch(M):
    """One (n, n) float matrix -> (LU, pivot rows) as torch 2.13's CPU LAPACK (MKL getrf)
    rounds them, bit for bit on the 3-8 x n matrices tried: right-looking partial pivoting,
    the column scaled by the pivot's reciprocal (by a division at step n - 2 when n <= 4), the
    trailing update one fused multiply-add per entry (plain float arithmetic where an inf or NaN
    takes part)."""
    from fractions import Fraction
    to = float if M.dtype == np.float64 else (lambda v: float(M.dtype.type(v)))
    A = [[float(v) for v in row] for row in M]
    n, piv = len(A), []
    for k in range(n):
        p = max(range(k, n), key=lambda i: (abs(A[i][k]), -i))
        piv.append(p)
        A[k], A[p] = A[p], A[k]
        if A[k][k] != 0:
            r = to(1.0 / A[k][k])
            for i in range(k + 1, n):
                A[i][k] = to(A[i][k] / A[k][k] if k == n - 2 and n <= 4 else A[i][k] * r)
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                a, b, c = A[i][j], A[i][k], A[k][j]
                A[i][j] = to(float(Fraction(a) - Fraction(b) * Fraction(c))
                             if math.isfinite(a + b * c) else a - b * c)
    return np.array(A, M.dtype), piv


def _each(A, which):
    """(index into the flattened batch, matrix) for each matrix of A where `which` holds."""
    mats = A.reshape((-1,) + A.shape[-2:])
    return [(i, mats[i]) for i in np.flatnonzero(which.reshape(-1))]


def _solve_like_torch(A, d, transposed):
    """d A^{-T} for one near-singular matrix from torch's LU of A^T (`transposed`) or A (torch's
    lu_solve after putting eps on each zero pivot; its substitutions trsm's): the cofactors
    where rounding left the last pivot nonzero, and torch's inf and NaN for a matrix holding an
    inf."""
    lu, piv = _lu_like_torch(A.T if transposed else A)
    n, dt = A.shape[-1], A.dtype
    u = np.triu(lu)
    np.fill_diagonal(u, np.where(np.diagonal(u) == 0, np.finfo(dt).eps, np.diagonal(u)))
    low = np.tril(lu, -1) + np.eye(n, dtype=dt)
    perm = list(range(n))
    for k, p in enumerate(piv):
        perm[k], perm[p] = perm[p], perm[k]
    with np.errstate(all="ignore"):
        if transposed:  # the LU is of A^T: (P L U) X = d I
            rhs = np.where(np.eye(n, dtype=bool)[perm], dt.type(d), dt.type(0))  # diag_embed
            return _trsm(u, _trsm(low, rhs, False), True).astype(dt)
        # the LU is of A: (P L U)^T X = d I, U^T L^T P^T X = d I
        y = _trsm(low.T, _trsm(u.T, np.where(np.eye(n, dtype=bool), dt.type(d), dt.type(0)),
                               False), True)
    return y[np.argsort(perm)].astype(dt)


def _lu_solve(A, B, transposed=False, who="torch.linalg.solve"):
    """A^-1 B (B: (..., n, k)) near a singular matrix as torch solves it: the LU of A
    (_lu_like_torch; torch's linalg.solve factors A itself, whatever A's layout: 172 of the
    176 singular systems of test_special_points agree to 1e-6), or with ``transposed`` the LU
    of A^T solved as an adjoint (torch's solve backward reuses its forward's LU so), and
    trsm's substitutions: a pivot rounding left nonzero gives torch's (huge) values, an
    exactly zero one torch's LinAlgError, naming the batch element."""
    shape = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    As = np.broadcast_to(A, shape + A.shape[-2:]).reshape((-1,) + A.shape[-2:])
    Bs = np.broadcast_to(B, shape + B.shape[-2:]).reshape((-1,) + B.shape[-2:])
    out = np.empty((len(As),) + B.shape[-2:], np.result_type(A, B))
    for i, (m, b) in enumerate(zip(As, Bs)):
        lu, piv = _lu_like_torch(m.T if transposed else m)
        if not np.diagonal(lu).all():
            batch = f"(Batch element {i}): " if len(shape) else ""
            raise _LinAlgError(f"{who}: {batch}The solver failed because the input matrix is "
                               "singular.")
        perm = list(range(len(piv)))
        for k, p in enumerate(piv):
            perm[k], perm[p] = perm[p], perm[k]
        low, up = np.tril(lu, -1) + np.eye(len(lu), dtype=lu.dtype), np.triu(lu)
        with np.errstate(all="ignore"):
            if transposed:  # A^T[perm] = L U, A = U^T L^T P: P X = L^-T U^-T B
                out[i] = _trsm(low.T, _trsm(up.T, b, False), True)[np.argsort(perm)]
            else:  # A[perm] = L U
                out[i] = _trsm(up, _trsm(low, b[perm], False), True)
    return out.reshape(shape + B.shape[-2:])
