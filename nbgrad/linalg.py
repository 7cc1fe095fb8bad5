"""nbgrad.linalg: torch.linalg's functions, with PyTorch's gradients (each a row of
nbgrad/ops/linalg.py, or composed of rows as PyTorch composes it).

Matrices are the last two dims of a tensor: (..., m, n); square ones (..., n, n).
"""
from __future__ import annotations

from .autograd.apply import apply
from .functions import _square, amax, amin, det, matrix_power, movedim, sum
from .functions import slogdet as _slogdet_of
from .functions import inverse as inv
from .functions import linalg_cross as cross
from .functions import linalg_lu_factor as lu_factor
from .functions import pinverse as pinv
from .ops import ROWS as R
from .ops.lapack import _LinAlgError as LinAlgError
from .return_types import structseq
from .tensor import _dim

__all__ = ["norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet", "solve", "cholesky",
           "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv", "matrix_power", "cross", "lu_factor",
           "LinAlgError"]

_qr = structseq("linalg_qr", "Q R")
_eigh = structseq("linalg_eigh", "eigenvalues eigenvectors")
_svd = structseq("linalg_svd", "U S Vh")
_slogdet = structseq("linalg_slogdet", "sign logabsdet")


def slogdet(A):
    """(sign, log|det|) of (..., n, n): torch.slogdet's values, as PyTorch's
    ``torch.return_types.linalg_slogdet`` (LinalgSlogdetBackward0)."""
    return _slogdet(*_slogdet_of(A))


def _float(A, fname):
    from .functions.matrices import _floating
    _floating(A, f"linalg.{fname}")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The `ord`-norm of x's elements (all, or over `dim`) (torch.linalg.vector_norm);
    LinalgVectorNormBackward0."""
    if dtype is not None:
        x = x.to(dtype)
    _float(x, "vector_norm")
    if isinstance(dim, int):
        dim = (dim,)
    d = None if dim is None else tuple(sorted(_dim(i, x._data.ndim) for i in dim))
    p = float(ord) if ord not in (1, 2) else ord
    return apply(R["norm"], (x,), (p, d if d is None or len(d) > 1 else d[0], keepdim))


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """Matrix norm over `dim` (torch.linalg.matrix_norm): "fro", "nuc", 1, -1, 2, -2, inf, -inf,
    composed as PyTorch composes it (vector norms, amax/amin, singular values)."""
    if dtype is not None:
        A = A.to(dtype)
    nd = A._data.ndim
    _matrices(A, "matrix_norm")
    _float(A, "matrix_norm")
    d0, d1 = (_dim(i, nd) for i in dim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(movedim(A, (d0, d1), (-2, -1)))
        r = sum(s, -1) if ord == "nuc" else (amax(s, -1) if ord == 2 else amin(s, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
        return r
    if ord in (1, -1, float("inf"), -float("inf")):
        inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = vector_norm(A, 1, inner, keepdim)
        if not keepdim and outer > inner:
            outer -= 1
        return (amax if ord > 0 else amin)(sums, outer, keepdim)
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm (ord None: 2 over all elements, or a number) or, for
    a string ord or two dims, a matrix norm."""
    if isinstance(dim, int):
        dim = (dim,)
    if isinstance(ord, str) or (dim is not None and len(dim) == 2 and ord is not None) or (
            dim is None and ord is not None and A._data.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, dim or (-2, -1), keepdim,
                           dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def solve(A, B, *, left=True):
    """X with A X = B: A (..., n, n), B (..., n, k) or (..., n) (torch.linalg.solve;
    LinalgSolveExBackward0)."""
    _square(A, "solve")
    b = B._data
    vector = b.ndim == 1 or (b.ndim == A.dim() - 1 and tuple(b.shape) == tuple(A.shape[:-1]))
    rows, cols = (b.shape[-1], 1) if vector else b.shape[-2:]
    if rows != A.shape[-1] and left:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = "
                           f"B ({A.shape[-2]}x{A.shape[-1]} and {rows}x{cols})")
    if b.dtype != A._data.dtype:
        from .functions.args import scalar_name
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {scalar_name(A)} and B of type {scalar_name(B)} instead")
    if not left:
        return solve(A.mT, B.mT).mT
    return apply(R["linalg_solve"], (A, B))


def cholesky(A, *, upper=False):
    """L lower-triangular with A = L L^T for symmetric positive-definite A (torch.linalg.cholesky;
    LinalgCholeskyExBackward0); upper=True gives L^T."""
    _square(A, "cholesky")
    L = apply(R["linalg_cholesky"], (A,))
    return L.mT if upper else L


def qr(A, mode="reduced"):
    """(Q, R) with A = Q R, Q orthonormal columns (torch.linalg.qr, mode "reduced")."""
    if mode != "reduced":
        raise NotImplementedError("nbgrad: linalg.qr supports mode='reduced' only")
    _matrices(A, "qr")
    _float(A, "qr")
    return _qr(*apply(R["linalg_qr"], (A,)))


def eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A (torch.linalg.eigh)."""
    _square(A, "eigh", floating=False)
    if A._data.dtype.kind != "f":
        from .functions.args import scalar_name
        raise NotImplementedError(f'"linalg_eigh_cpu" not implemented for \'{scalar_name(A)}\'')
    return _eigh(*apply(R["linalg_eigh"], (A,), (UPLO,)))


def eigvalsh(A, UPLO="L"):
    """The eigenvalues of symmetric A, ascending (torch.linalg.eigvalsh)."""
    return eigh(A, UPLO).eigenvalues


def svd(A, full_matrices=True):
    """(U, S, Vh) with A = U diag(S) Vh, S descending (torch.linalg.svd; LinalgSvdBackward0)."""
    _matrices(A, "svd")
    _float(A, "svd")
    return _svd(*apply(R["linalg_svd"], (A,), (full_matrices,)))


def _matrices(A, fname):
    if A.dim() < 2:
        raise RuntimeError(f"linalg.{fname}: The input tensor A must have at least 2 dimensions.")


def svdvals(A):
    """The singular values of A, descending (torch.linalg.svdvals)."""
    return svd(A, full_matrices=False).S


