"""Triangles and diagonals (tril, triu, diag, diag_embed, trace), the fused products of the
addmm family (baddbmm, addbmm, addmv, addr: their shape and dtype checks) and determinants
(det, inverse, slogdet, logdet, pinverse, matrix_power): the torch.* functions over those rows.
"""
from __future__ import annotations


import numpy as np

from .. import creation, dtypes
from ..autograd.apply import apply
from ..ops import ROWS as R
from ..return_types import structseq
from ..tensor import _dim, Tensor
from .registry import method
from .args import c_name, check_same_dtype, scalar_name, type_name_of
from .elementwise import where
from .linalg import _check_expand, matmul


def _matrix_check(input, fname):
    if input._data.ndim < 2:
        raise RuntimeError(f"{fname}: input tensor must have at least 2 dimensions")


@method
def tril(input, diagonal=0):
    """The lower triangle of the last two dims (below and on the `diagonal`-th), zeros above
    (torch.tril)."""
    _matrix_check(input, "tril")
    return apply(R["tril"], (input,), (diagonal,))


@method
def triu(input, diagonal=0):
    """The upper triangle of the last two dims (on and above the `diagonal`-th) (torch.triu)."""
    _matrix_check(input, "triu")
    return apply(R["triu"], (input,), (diagonal,))


@method
def tril_(self, diagonal=0):
    """In-place tril (torch.Tensor.tril_); bumps _version by 1."""
    _matrix_check(self, "tril")
    return apply(R["tril"], (self,), (diagonal,), inplace="tril_")


@method
def triu_(self, diagonal=0):
    """In-place triu (torch.Tensor.triu_); bumps _version by 1."""
    _matrix_check(self, "triu")
    return apply(R["triu"], (self,), (diagonal,), inplace="triu_")


@method
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with the last dim of input on their `offset` diagonal, in dims dim1, dim2 of the
    result (torch.diag_embed): (..., n) -> (..., n + |offset|, n + |offset|)."""
    nd = input._data.ndim + 1
    d1, d2 = _dim(dim1, nd), _dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return apply(R["diag_embed"], (input,), (offset, d1, d2))


@method
def diag(input, diagonal=0):
    """1-D input: a matrix with it on the `diagonal`-th diagonal (DiagEmbedBackward0); 2-D: that
    diagonal as a 1-D copy (torch.diag)."""
    nd = input._data.ndim
    if nd == 1:
        return diag_embed(input, diagonal, 0, 1)
    if nd != 2:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{nd}D")
    return apply(R["diag_copy"], (input,), (diagonal,))


@method
def trace(input):
    """Sum of the main diagonal of a 2-D tensor (torch.trace)."""
    if input._data.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim "
                           f"{input._data.ndim}")
    return apply(R["trace"], (input,))


def _fused(name, shapes):
    """torch.X(input, a, b, *, beta=1, alpha=1) for the fused products addbmm & co., with
    their in-place forms; `shapes` checks the operands (PyTorch's texts)."""
    row = R[name]

    def f(input, a, b, *, beta=1, alpha=1):
        shapes(a, b)
        input, a, b = _fused_dtypes(name, input, a, b, False)
        _check_expand(input, _PRODUCT_SHAPE[name](a._data.shape, b._data.shape))
        return apply(row, (input, a, b), (beta, alpha))

    def f_(self, a, b, *, beta=1, alpha=1):
        shapes(a, b)
        self, a, b = _fused_dtypes(name, self, a, b, True)
        return apply(row, (self, a, b), (beta, alpha), inplace=name + "_")
    f.__name__, f_.__name__ = name, name + "_"
    f.__doc__ = (f"beta * input + alpha * product of the two operands, input broadcasting "
                 f"(torch.{name}).")
    f_.__doc__ = f"In-place {name} (torch.Tensor.{name}_); bumps _version by 1."
    return method(f), method(f_)  # both are Tensor methods


def _fused_dtypes(name, input, a, b, inplace):
    """torch's dtype checks of the fused products, with its texts: (input, a, b), addr's
    promoted to torch's result type (or, in place, to self's where that casts)."""
    if name == "addr":
        return _addr_dtypes(input, a, b, inplace)
    if not isinstance(input, Tensor):
        return input, a, b
    n = scalar_name
    if name == "baddbmm":
        if input._data.dtype != a._data.dtype:
            raise RuntimeError(f"Input dtypes must be the same, got: input {c_name(input)}, "
                               f"batch1: {c_name(a)}, batch2: {c_name(b)}")
        if a._data.dtype != b._data.dtype:
            raise RuntimeError(
                f"Bad in-place call: input tensor dtype {c_name(input)} and output tensor dtype "
                f"{c_name(b)} should match" if inplace else
                f"expected scalar type {n(a)} but found {n(b)}")
    elif name == "addbmm":
        check_same_dtype((input, b), lambda: f"self and mat2 must have the same dtype, but got "
                         f"{n(input)} and {n(b)}")
        check_same_dtype((a, b), lambda: f"mat1 and mat2 must have the same dtype, but got "
                         f"{n(a)} and {n(b)}")
    else:  # addmv
        check_same_dtype((input, a, b), lambda: f"addmv input tensors must have the same dtype, "
                         f"but got {n(input)}, {n(a)}, and {n(b)}")
    return input, a, b


def _addr_dtypes(input, a, b, inplace):
    ops = [t for t in (input, a, b) if isinstance(t, Tensor)]
    common = np.dtype(dtypes.result_type(*(t._data for t in ops)))
    if inplace:
        own = input._data.dtype
        if not np.can_cast(common, own, "same_kind"):
            raise RuntimeError(f"result type {dtypes.from_np(common)._tensor_name[:-6]} can't "
                               f"be cast to the desired output type {scalar_name(input)}")
        common = own
    return tuple(t.to(dtypes.from_np(common)) if isinstance(t, Tensor) and
                 t._data.dtype != common else t for t in (input, a, b))


_PRODUCT_SHAPE = {"baddbmm": lambda sa, sb: (sa[0], sa[1], sb[2]),
                  "addbmm": lambda sa, sb: (sa[1], sb[2]),
                  "addmv": lambda sa, sb: (sa[0],),
                  "addr": lambda sa, sb: (sa[0], sb[0])}


def _check_bmm(a, b):
    sa, sb = a._data.shape, b._data.shape
    if len(sa) != 3 or len(sb) != 3:
        raise RuntimeError(f"batch{1 if len(sa) != 3 else 2} must be a 3D tensor")
    if sa[0] != sb[0] or sa[2] != sb[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{sa[0]}, {sa[2]}] but got: [{sb[0]}, {sb[1]}].")


def _check_mv(a, b):
    if a._data.ndim != 2 or b._data.ndim != 1 or a._data.shape[1] != b._data.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a._data.shape[0]}), mat "
                           f"({'x'.join(map(str, a._data.shape))}), vec ({b._data.shape[0]})")


def _check_vectors(a, b):
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got "
                           f"{a._data.ndim}-D" if a._data.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {b._data.ndim}-D")


baddbmm, baddbmm_ = _fused("baddbmm", _check_bmm)
addbmm, addbmm_ = _fused("addbmm", _check_bmm)
addmv, addmv_ = _fused("addmv", _check_mv)
addr, addr_ = _fused("addr", _check_vectors)


def _square(A, fname, floating=True):
    """torch's checks of a batch of square matrices: at least 2 dims, square, and (unless
    `floating` is False) a floating dtype (RuntimeError, torch's texts and type names)."""
    s = A._data.shape
    if len(s) < 2:
        raise RuntimeError(f"linalg.{fname}: The input tensor A must have at least 2 dimensions.")
    if s[-1] != s[-2]:
        raise RuntimeError(f"linalg.{fname}: A must be batches of square matrices, but they are "
                           f"{s[-2]} by {s[-1]} matrices")
    if floating:
        _floating(A, f"linalg.{fname}")


def _floating(A, who):
    if A._data.dtype.kind != "f":
        raise RuntimeError(f"{who}: Expected a floating point or complex tensor as input. Got "
                           f"{type_name_of(A).split('.')[-1][:-6]}")


_slogdet = structseq("slogdet", "sign logabsdet")


@method
def det(input):
    """Determinants of (..., n, n) (torch.det = torch.linalg.det; LinalgDetBackward0)."""
    _square(input, "det")
    return apply(R["linalg_det"], (input,))


@method
def inverse(input):
    """Inverses of (..., n, n) (torch.inverse = torch.linalg.inv; LinalgInvExBackward0)."""
    _square(input, "inv")
    return apply(R["linalg_inv"], (input,))


@method
def slogdet(input):
    """(sign, log|det|) of (..., n, n) (torch.slogdet = torch.linalg.slogdet)."""
    _square(input, "slogdet")
    return _slogdet(*apply(R["linalg_slogdet"], (input,)))


@method
def logdet(input):
    """log(det(input)), NaN for a negative determinant (torch.logdet)."""
    _floating(input, "logdet")
    sign, lad = slogdet(input)
    return where(sign < 0, float("nan"), lad)


@method
def pinverse(input, rcond=1e-15):
    """The Moore-Penrose pseudo-inverse (torch.pinverse = torch.linalg.pinv;
    LinalgPinvBackward0)."""
    if input._data.ndim < 2:
        raise RuntimeError(f"linalg.pinv({type_name_of(input).split('.')[-1][:-6]}"
                           f"{{{list(input.shape)}}}): "
                           f"expected a tensor with 2 or more dimensions of float, double, cfloat "
                           f"or cdouble types")
    return apply(R["linalg_pinv"], (input,))


@method
def matrix_power(input, n):
    """input multiplied by itself n times (n < 0: its inverse's) (torch.matrix_power =
    torch.linalg.matrix_power), composed of matmuls by binary powers as PyTorch does."""
    _square(input, "matrix_power", floating=False)
    if n == 0:
        e = creation.eye(input._data.shape[-1], dtype=input.dtype).expand(*input._data.shape)
        return input.clone().copy_(e)
    if n < 0:
        input, n = inverse(input), -n
    if n == 1:
        return input.clone()
    if n == 2:
        return matmul(input, input)
    if n == 3:
        return matmul(matmul(input, input), input)
    z = result = None
    while n > 0:
        bit, n = n % 2, n // 2
        z = input if z is None else matmul(z, z)
        if bit:
            result = z if result is None else matmul(result, z)
    return result
