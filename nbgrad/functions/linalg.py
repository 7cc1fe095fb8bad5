"""Linear algebra (matmul, mm, bmm, dot, mv, addmm, outer, cross, weight norm, lu, cdist, svd;
triangles, the addmm family's checks and determinants are in matrices.py). Batched matmul
records PyTorch's decomposition as one fused node (autograd/fused.py).
"""
from __future__ import annotations

import builtins
import math
import warnings

import numpy as np

from .. import backend, creation, dtypes
from ..autograd import fused
from ..autograd.apply import apply, _device_error, _fresh
from ..autograd.record import _arr
from ..autograd.grad_mode import GENERAL_PATH, is_grad_enabled, STATE as _GRAD
from ..ops import ROWS as R
from ..return_types import structseq
from ..ops.views import _ViewImpossible
from ..tensor import _dim, Tensor
from .registry import method
from .args import _broadcast_batch, _out, c_name, check_same_dtype, scalar_name
from .views import contiguous, _fold, reshape, transpose, unsqueeze, view
from .elementwise import mul


@method
def matmul(input, other, *, out=None):
    """Matrix product with numpy/PyTorch broadcasting rules (torch.matmul).

    (n,)@(n,) -> () DotBackward0; (n,m)@(m,p) MmBackward0; (n,m)@(m,) MvBackward0;
    (b,n,m)@(b,m,p) BmmBackward0; other batched cases MatmulBackward0.
    """
    a, b = input._data, other._data
    if out is None and a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0] and \
            a.dtype is b.dtype and type(a) is type(b):  # the usual case, checked
        if not GENERAL_PATH and type(a) is np.ndarray and not (
                _GRAD.enabled and (input._requires_grad or other._requires_grad)):
            # nothing to record (no_grad, eval): mm's product in a fresh tensor, what `apply`
            # gives (NBGRAD_GENERAL_PATH=1 applies the row)
            token = _quiet()
            try:
                return _fresh(_MM.fwd(a, b))
            finally:
                _loud(token)
        return apply(_MM, (input, other))
    if out is None and a.ndim == 3 and b.ndim == 3 and not GENERAL_PATH and \
            type(a) is np.ndarray and type(b) is np.ndarray and a.dtype is b.dtype and \
            a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1] and not (
                _GRAD.enabled and (input._requires_grad or other._requires_grad)):
        # attention's q @ k^T and w @ v with nothing to record: the checks below pass, and
        # `_matmul` gives `_bmm_folded`'s bmm (the operands as they are, one batch dim the
        # same) in a fresh tensor, unsafe_view'd to its own shape (NBGRAD_GENERAL_PATH=1: it)
        return _fresh(_BMM.fwd(a, b))
    if out is not None:
        return _out("matmul", lambda: matmul(input, other), (input, other), out)
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    if a.dtype != b.dtype:  # (the text of the kernel torch's matmul dispatches to)
        if a.ndim == 1 and b.ndim == 1:
            _dot_dtypes(input, other)
        if b.ndim == 1:  # (a 2-d or folded batch: mv)
            _mv_dtypes(input, other)
        if b.ndim >= 3:  # (bmm)
            raise RuntimeError(f"expected scalar type {scalar_name(input)} but found "
                               f"{scalar_name(other)}")
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{c_name(input)} != {c_name(other)}")
    if type(a) is not type(b):
        raise _device_error(a, b)
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb and a.ndim == 2 and b.ndim == 1:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{ka}), "
                           f"vec ({kb})")
    if ka != kb:
        if a.ndim == 2 and b.ndim == 2:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{ka} and "
                               f"{b.shape[0]}x{b.shape[1]})")
        if a.ndim == 1 and b.ndim == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                               f"[{b.shape[0]}] to have the same number of elements, but got "
                               f"{a.shape[0]} and {b.shape[0]} elements respectively")
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{b.shape[0] if b.ndim > 2 else 1}, {ka}] but got: "
                           f"[{b.shape[0] if b.ndim > 2 else 1}, {kb}].")
    return _matmul(input, other)


_MM = R["mm"]
_quiet, _loud = backend.quiet, backend.loud


def _matmul(a, b):
    """matmul as PyTorch decomposes it (aten's _matmul_impl), so the graph shows the same nodes:
    mm / mv / dot; a batched operand folded into the rows of one mm or mv (UnsafeViewBackward0
    around it) when torch folds; else expand both to the broadcast batch, fold it into one dim,
    bmm, unfold. The views are applied as rows directly (no public reshape / expand)."""
    da, db = a._data.ndim, b._data.ndim
    if da == 2 and db == 2:
        return apply(R["mm"], (a, b))
    if da == 1 and db == 1:
        return apply(R["dot"], (a, b))
    if da == 2 and db == 1:
        return apply(R["mv"], (a, b))
    if da == 1 and db == 2:
        return apply(R["squeeze_dims_"], (apply(R["mm"], (unsqueeze(a, 0), b)),), ((0,),))
    if _should_fold(a, b, da, db):
        return _matmul_folded(a, b, da, db)
    sa, sb = a._data.shape, b._data.shape
    if da == 3 and db == 3 and sa[0] != sb[0]:  # a batch of one that requires grad: squeezed
        if sa[0] == 1 and a._requires_grad:
            return _matmul(apply(R["squeeze_dim"], (a,), (0,)), b)
        if sb[0] == 1 and b._requires_grad:
            return _matmul(a, apply(R["squeeze_dim"], (b,), (0,)))
    if da > 1 and db > 1 and type(a._data) is np.ndarray and type(b._data) is np.ndarray:
        if not (_GRAD.enabled and (a._requires_grad or b._requires_grad)):
            # nothing to record (no_grad, eval): the chain's values in one fresh tensor, as
            # torch's result (no _base, version 0) without the chain's views
            folded = _bmm_folded(a._data, b._data)
            if folded is not None:
                out3, (batch, _, n, _, p, *_) = folded
                return _fresh(_arr(_UNSAFE_VIEW.fwd(out3, batch + (n, p))))
        elif fused.usable():
            r = _bmm_fused(a, b)
            if r is not None:
                return r
    return _bmm_chain(a, b)


def _bmm_chain(a, b):
    """Batched matmul: expand both to the broadcast batch, fold it into one dim, bmm, unfold."""
    da, db = a._data.ndim, b._data.ndim
    sa, sb = a._data.shape, b._data.shape
    ba, bb = sa[:-2], sb[:-2]
    batch = ba if ba == bb else _broadcast_batch(ba, bb)
    n, k = sa[-2] if da > 1 else 1, sa[-1]
    p = sb[-1] if db > 1 else 1
    rows = math.prod(batch)
    a3 = _fold(apply(R["expand"], (a,), (batch + (n, k),)), (rows, n, k))
    if db == 1:
        b3 = apply(R["unsqueeze"], (_fold(apply(R["expand"], (b,), (batch + (k,),)), (rows, k)),),
                   (2,))
        out = apply(R["squeeze_dim"], (apply(R["bmm"], (a3, b3)),), (2,))
    else:
        b3 = _fold(apply(R["expand"], (b,), (batch + (k, p),)), (rows, k, p))
        out = apply(R["bmm"], (a3, b3))
    shape = batch + ((n,) if da > 1 else ()) + ((p,) if db > 1 else ())
    return apply(R["unsafe_view"], (out,), (shape,))


def _bmm_fused(a, b):
    """`_bmm_chain` of two operands of 2 dims or more, recorded as one UnsafeViewBackward0 node
    (nbgrad.autograd.fused) whose backward runs the chain's formulas (unsafe_view, bmm, view or
    reshape_alias, expand) on arrays; the chain's nodes are built when looked at. None when a
    fold would copy (then the chain is recorded as it is)."""
    folded = _bmm_folded(a._data, b._data)
    if folded is None:
        return None
    out3, info = folded
    batch, rows, n, k, p, fa, fb, sa, sb = info
    r = _fresh(_arr(_UNSAFE_VIEW.fwd(out3, batch + (n, p))))
    ra, rb = a._requires_grad, b._requires_grad
    fused.record(r, _UNSAFE_VIEW.node, (tuple(out3.shape),), (a, b),
                 ("self" if rb else None, "mat2" if ra else None), 2 * ra + 2 * rb + 1,
                 _bmm_fused_backward, _bmm_chain, info)
    return r


def _bmm_folded(ad, bd):
    """`_bmm_chain`'s forward on two arrays of 2 dims or more: (the bmm's (rows, n, p) result,
    (batch, rows, n, k, p, fold of a, fold of b, a's shape, b's shape)), the folds being the
    view or reshape_alias rows the chain applies; None when a fold would copy."""
    sa, sb = ad.shape, bd.shape
    n, k, p = sa[-2], sa[-1], sb[-1]
    if len(sa) == 3 and len(sb) == 3 and sa[0] == sb[0]:
        # one batch dim, the same (attention's q @ k^T): the expands and folds are the
        # operands as they are
        batch, rows = sa[:1], sa[0]
        fa = _VIEW if ad.flags.c_contiguous else _RESHAPE_ALIAS
        fb = _VIEW if bd.flags.c_contiguous else _RESHAPE_ALIAS
        out3 = _BMM.fwd(ad, bd)
    else:
        ba, bb = sa[:-2], sb[:-2]
        batch = ba if ba == bb else _broadcast_batch(ba, bb)
        rows = math.prod(batch)
        ea, eb = _EXPAND.fwd(ad, batch + (n, k)), _EXPAND.fwd(bd, batch + (k, p))
        fa = _VIEW if ea.flags.c_contiguous else _RESHAPE_ALIAS
        fb = _VIEW if eb.flags.c_contiguous else _RESHAPE_ALIAS
        try:
            a3, b3 = fa.fwd(ea, (rows, n, k)), fb.fwd(eb, (rows, k, p))
        except _ViewImpossible:
            return None
        out3 = _BMM.fwd(a3, b3)
    return out3, (batch, rows, n, k, p, fa, fb, sa, sb)


def _bmm_fused_backward(node, g, arrays):
    """The chain's formulas in the order its nodes would run: unsafe_view, bmm, then per
    operand view (or reshape_alias) and expand."""
    ad, bd = arrays
    batch, rows, n, k, p, fa, fb, sa, sb = node._chain.info
    g3 = _UNSAFE_VIEW.vjp(0, g, (rows, n, p))
    (ca, _), (cb, _) = node._next
    ga = gb = None
    same = len(sa) == len(sb) == 3 and sa[0] == sb[0]  # (the operands were the folds)
    if ca is not None:
        b3 = bd if same else fb.fwd(_EXPAND.fwd(bd, batch + (k, p)), (rows, k, p))
        ga = _EXPAND.vjp(0, fa.vjp(0, _BMM.vjp(0, g3, b3, None), batch + (n, k)), sa)
    if cb is not None:
        a3 = ad if same else fa.fwd(_EXPAND.fwd(ad, batch + (n, k)), (rows, n, k))
        gb = _EXPAND.vjp(0, fb.vjp(0, _BMM.vjp(1, g3, None, a3), batch + (k, p)), sb)
    return [ga, gb]


_EXPAND, _BMM, _UNSAFE_VIEW = R["expand"], R["bmm"], R["unsafe_view"]
_VIEW, _RESHAPE_ALIAS = R["view"], R["reshape_alias"]


def _should_fold(a, b, da, db):
    """aten's should_fold: whether the operand of 3 dims or more (the other one's transpose
    when that is the larger) is folded into the rows of one mm / mv instead of a bmm."""
    larger = da >= db
    if not ((da if larger else db) >= 3 and (db if larger else da) <= 2):
        return False
    if (b if larger else a)._requires_grad:
        return True
    if da == 2:
        return False
    t1 = a._data if larger else b._data.swapaxes(-2, -1)
    if not t1.size:
        return True
    shape, strides = t1.shape, t1.strides
    return builtins.all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(t1.ndim - 2))


def _matmul_folded(a, b, da, db):
    """The larger operand (or b's transpose) viewed as one matrix: mm / mv, unfolded; with the
    transpose, the result is transposed back and made contiguous (CloneBackward0), as torch."""
    transpose = db > da
    if transpose:
        t1 = apply(R["transpose"], (b,), (db - 2, db - 1))
        t2 = apply(R["t"], (a,)) if da == 2 else a
    else:
        t1, t2 = a, b
    s1 = t1._data.shape
    shape = s1[:-1]
    folded = _fold(t1, (math.prod(shape), s1[-1]))
    if t2._data.ndim == 1:
        return apply(R["unsafe_view"], (apply(R["mv"], (folded, t2)),), (shape,))
    out = apply(R["unsafe_view"], (apply(R["mm"], (folded, t2)),), (shape + t2._data.shape[1:],))
    if not transpose:
        return out
    return contiguous(apply(R["transpose"], (out,), (len(shape) - 1, len(shape))))


@method
def mm(input, mat2):
    """(n, m) @ (m, p) (torch.mm)."""
    if input._data.ndim != 2 or mat2._data.ndim != 2:
        raise RuntimeError("self must be a matrix" if input._data.ndim != 2 else
                           "mat2 must be a matrix")
    return matmul(input, mat2)


@method
def bmm(input, mat2):
    """(b, n, m) @ (b, m, p) (torch.bmm)."""
    if input._data.ndim != 3 or mat2._data.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if input._data.ndim != 3 else
                           "batch2 must be a 3D tensor")
    if input._data.shape[0] != mat2._data.shape[0] or input._data.shape[2] != \
            mat2._data.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input._data.shape[0]}, {input._data.shape[2]}] but got: "
                           f"[{mat2._data.shape[0]}, {mat2._data.shape[1]}].")
    check_same_dtype((input, mat2), lambda: f"expected scalar type {scalar_name(input)} but "
                     f"found {scalar_name(mat2)}")
    return apply(R["bmm"], (input, mat2))


def _dot_dtypes(input, other):
    check_same_dtype((input, other), lambda: f"dot : expected both vectors to have same dtype, "
                     f"but found {scalar_name(input)} and {scalar_name(other)}")


def _mv_dtypes(input, vec):  # (torch's addmv: its zero "self" in the vector's... first dtype)
    check_same_dtype((input, vec), lambda: f"addmv input tensors must have the same dtype, but "
                     f"got {scalar_name(vec)}, {scalar_name(input)}, and {scalar_name(vec)}")


@method
def dot(input, other):
    """Inner product of two 1-D tensors (torch.dot)."""
    if input._data.ndim != 1 or other._data.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input._data.ndim}D and "
                           f"{other._data.ndim}D tensors")
    return matmul(input, other)


@method
def mv(input, vec):
    """(n, m) @ (m,) (torch.mv); RuntimeError for other dims or sizes (torch's texts)."""
    a, v = input._data, vec._data
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {v.ndim}")
    if a.shape[1] != v.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x"
                           f"{a.shape[1]}), vec ({v.shape[0]})")
    return matmul(input, vec)


@method
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2); `input` broadcasts to (n, p) (torch.addmm).

    This is what nn.Linear uses on 2-D input: grad_fn AddmmBackward0.
    """
    a, b = mat1._data, mat2._data
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError("mat1 must be a matrix, got {}-D tensor".format(a.ndim) if a.ndim != 2
                           else "mat2 must be a matrix, got {}-D tensor".format(b.ndim))
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} "
                           f"and {b.shape[0]}x{b.shape[1]})")
    check_same_dtype((input, mat2), lambda: f"self and mat2 must have the same dtype, but got "
                     f"{scalar_name(input)} and {scalar_name(mat2)}")
    check_same_dtype((mat1, mat2), lambda: f"mat1 and mat2 must have the same dtype, but got "
                     f"{scalar_name(mat1)} and {scalar_name(mat2)}")
    _check_expand(input, (a.shape[0], b.shape[1]))
    return apply(R["addmm"], (input, mat1, mat2), (beta, alpha))


@method
def outer(input, vec2):
    """Outer product of two 1-D tensors, (n,) x (m,) -> (n, m) (torch.outer); RuntimeError
    naming the argument that is not 1-D (torch's text)."""
    for name, t in (("self", input), ("vec2", vec2)):
        if t._data.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t._data.ndim}-D")
    return mul(reshape(input, -1, 1), vec2)


def linalg_cross(input, other, *, dim=-1):
    """Cross product of 3-vectors along ``dim`` (torch.linalg.cross): input, other (..., 3, ...)
    broadcast against each other; one LinalgCrossBackward0 node.

    Raises:
        RuntimeError: ``dim`` of length other than 3 (PyTorch's text), or shapes that do not
            broadcast.
    """
    a, b = input._data, other._data
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = _dim(dim, a.ndim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")
    return apply(R["linalg_cross"], (input, other), (d,))


@method
def cross(input, other, dim=None):
    """Cross product of 3-vectors (torch.cross): along ``dim``, or, when it is None (deprecated
    in PyTorch, with its warning), along the first dimension of size 3. LinalgCrossBackward0.

    Raises:
        RuntimeError: no dimension of size 3 (PyTorch's text); see :func:`linalg_cross`.
    """
    if dim is None:
        import warnings
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
                      "The default value of dim will change to agree with that of linalg.cross "
                      "in a future release.", UserWarning, stacklevel=2)
        shape = input._data.shape
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim)


def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm of v over every dim but ``dim``, keeping them as size-1 dims (shape
    (n, 1, ...) for dim 0); dim -1: the norm of all of v, 0-d (torch.norm_except_dim)."""
    p = float(pow) if pow not in (1, 2) else pow
    nd = v._data.ndim
    if dim == -1:
        return apply(R["norm"], (v,), (p, None, False))
    dim = _dim(dim, nd)
    shape = v._data.shape
    if dim == 0:  # composed as PyTorch composes it: a view, a norm, a view back
        n = apply(R["norm"], (v.contiguous().view(shape[0], -1),), (p, 1, False))
        return n.view(shape[0], *[1] * (nd - 1))
    if dim == nd - 1:
        n = apply(R["norm"], (v.contiguous().view(-1, shape[-1]),), (p, 0, False))
        return n.view(*[1] * (nd - 1), shape[-1])
    return norm_except_dim(v.transpose(0, dim), pow, 0).transpose(0, dim)


def _weight_norm(v, g, dim=0):
    """w = v * g / ||v|| with the norm over every dim but ``dim`` (torch._weight_norm, what
    nn.utils.weight_norm computes before each forward): v (out, ...), g of the norm's shape
    ((out, 1, ...) for dim 0). For the first or last dim one WeightNormInterfaceBackward0 node,
    as PyTorch's fused kernel; other dims and -1 (the whole tensor) composed: MulBackward0.

    Raises:
        IndexError: dim out of range (PyTorch's text).
    """
    if dim != -1:
        dim = _dim(dim, v._data.ndim)
    if dim not in (0, v._data.ndim - 1):  # PyTorch's fused kernel serves the first and last
        return v * (g / norm_except_dim(v, 2, dim))
    return apply(R["weight_norm_interface"], (v, g), (dim,))


_lu_factor = structseq("linalg_lu_factor", "LU pivots")
_lu_unpack = structseq("lu_unpack", "P L U")


def _no_lu_grad(name, *ts):
    if is_grad_enabled() and builtins.any(isinstance(t, Tensor) and t.requires_grad for t in ts):
        node = "LuUnpackBackward0" if name == "lu_unpack" else "LinalgLuFactorExBackward0"
        raise RuntimeError(f"nbgrad does not implement the derivative of {name} yet (PyTorch "
                           f"records {node}): call it under no_grad() or on a tensor that does "
                           "not require grad")


def linalg_lu_factor(A, *, pivot=True):
    """LU factorisation with partial pivoting, LAPACK's getrf (torch.linalg.lu_factor): A
    (..., m, n) -> LU (..., m, n) holding L below the diagonal (unit diagonal implied) and U on
    and above it, pivots (..., min(m, n)) int32, 1-based row swaps. No gradient yet.

    Raises:
        RuntimeError: A requires grad (nbgrad has no derivative for it yet), or pivot=False.
    """
    _no_lu_grad("lu_factor", A)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    a = np.array(A._data, copy=True)
    m, n = a.shape[-2:]
    k = builtins.min(m, n)
    piv = np.zeros(a.shape[:-2] + (k,), dtype=np.int32)
    rows = np.arange(m)
    for j in range(k):  # one column at a time, vectorised over the batch
        p = np.abs(a[..., j:, j]).argmax(-1) + j
        piv[..., j] = p + 1
        pj = np.take_along_axis(a, p[..., None, None] * np.ones((1, n), dtype=int), -2)
        rj = a[..., j:j + 1, :].copy()
        np.put_along_axis(a, p[..., None, None] * np.ones((1, n), dtype=int), rj, -2)
        a[..., j:j + 1, :] = pj
        d = a[..., j, j]
        below = rows > j
        with np.errstate(divide="ignore", invalid="ignore"):
            a[..., below, j] = a[..., below, j] / d[..., None]
        a[..., j + 1:, j + 1:] -= a[..., j + 1:, j:j + 1] * a[..., j:j + 1, j + 1:]
    return _lu_factor(Tensor._make_fresh(a), Tensor._make_fresh(piv))


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's result, A = P @ L @ U (torch.lu_unpack): P (..., m, m), L
    (..., m, k) unit lower, U (..., k, n) upper. No gradient yet.

    Raises:
        RuntimeError: LU_data requires grad (nbgrad has no derivative for it yet).
    """
    _no_lu_grad("lu_unpack", LU_data)
    a = LU_data._data
    m, n = a.shape[-2:]
    k = builtins.min(m, n)
    L = U = P = None
    if unpack_data:
        L = np.tril(a[..., :, :k], -1) + np.eye(m, k, dtype=a.dtype)
        U = np.triu(a[..., :k, :])
    if unpack_pivots:
        piv = LU_pivots._data.astype(np.int64) - 1
        perm = np.broadcast_to(np.arange(m), piv.shape[:-1] + (m,)).copy()
        for j in range(k):
            pj = piv[..., j:j + 1]
            a_j = perm[..., j:j + 1].copy()
            perm[..., j:j + 1] = np.take_along_axis(perm, pj, -1)
            np.put_along_axis(perm, pj, a_j, -1)
        P = (perm[..., :, None] == np.arange(m)).swapaxes(-1, -2).astype(a.dtype)
    empty = np.zeros((0,), dtype=a.dtype)
    return _lu_unpack(*(Tensor._make_fresh(x if x is not None else empty) for x in (P, L, U)))


_LU_WARNED = [False]


def _tensor_lu(self, pivot=True, get_infos=False):
    """Tensor.lu (deprecated torch.lu, with PyTorch's once-per-process warning): (LU, pivots),
    and infos (zeros) with get_infos."""
    if not _LU_WARNED[0]:
        _LU_WARNED[0] = True
        warnings.warn(
            "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex "
            "and will be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, "
            "compute_pivots)\nshould be replaced with\nLU, pivots = torch.linalg.lu_factor(A, "
            "compute_pivots)\nand\nLU, pivots, info = torch.lu(A, compute_pivots, get_infos=True)"
            "\nshould be replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, "
            "compute_pivots)", UserWarning, stacklevel=2)
    LU, piv = linalg_lu_factor(self, pivot=pivot)
    if get_infos:
        return LU, piv, creation.zeros(tuple(self.shape[:-2]), dtype=dtypes.int32)
    return LU, piv


method(_tensor_lu, "lu")  # Tensor.lu, PyTorch's deprecated spelling of linalg.lu_factor


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distance between each pair of rows (torch.cdist): x1 (B, P, M), x2 (B, R, M)
    (or without the batch dims, broadcast) -> (B, P, R). Its graph is PyTorch's: one
    CdistBackward0 node, or for p = 2 with more than 25 rows on either side (or
    compute_mode='use_mm_for_euclid_dist') EuclideanDistBackward0 then ViewBackward0.

    Raises:
        RuntimeError: fewer than 2 dims, different M, or p < 0 (PyTorch's texts).
    """
    a, b = x1._data, x2._data
    if a.ndim < 2 or b.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {a.ndim}D")
    for name, t in (("X1", x1), ("X2", x2)):
        if t._data.dtype.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{scalar_name(t)}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {scalar_name(x1)} but found {scalar_name(x2)}")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} "
                           f"X2: {b.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    rows1, rows2 = a.shape[-2], b.shape[-2]
    mm = compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary" and (rows1 > 25 or rows2 > 25))
    if p == 2 and mm:
        d = apply(R["euclidean_dist"], (x1, x2), ())
        return view(d, *d._data.shape)
    return apply(R["cdist"], (x1, x2), (float(p),))


_svd_result = structseq("svd", "U S V")


@method
def svd(input, some=True, compute_uv=True):
    """Singular value decomposition, PyTorch's older form (torch.svd): (U, S, V) with
    input = U diag(S) V^T for input (..., m, n). ``some`` gives the reduced U (m, k) and V (n, k),
    k = min(m, n); ``some=False`` the full U (m, m) and V (n, n). ``compute_uv=False`` gives
    zero U (m, m) and V (n, n), as PyTorch does. U and S come from one LinalgSvdBackward0 node,
    V through TransposeBackward0, as in PyTorch (which recommends torch.linalg.svd, whose third
    output is V^T).
    """
    if not compute_uv:
        s = apply(R["linalg_svd"], (input,), (False,))[1]
        m, n = input._data.shape[-2:]
        batch = tuple(input._data.shape[:-2])
        return _svd_result(creation.zeros(*batch, m, m, dtype=input.dtype), s,
                           creation.zeros(*batch, n, n, dtype=input.dtype))
    U, S, Vh = apply(R["linalg_svd"], (input,), (not some,))
    return _svd_result(U, S, transpose(Vh, -2, -1))


def _check_expand(input, target):
    """`input` must expand to the product's shape: torch's expand text where it cannot."""
    shape = tuple(input.shape) if isinstance(input, Tensor) else ()
    if len(shape) > len(target):
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(shape)}}}, size={list(target)}): "
                           f"the number of sizes provided ({len(target)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({len(shape)})")
    for i in range(len(target) - 1, -1, -1):
        j = i - (len(target) - len(shape))
        if j >= 0 and shape[j] != 1 and shape[j] != target[i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({target[i]}) must match the existing size "
                f"({shape[j]}) at non-singleton dimension {i}.  Target sizes: "
                f"{list(target)}.  Tensor sizes: {list(shape)}")
