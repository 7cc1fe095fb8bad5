"""Sparse COO tensors (``layout == torch.sparse_coo``): the gradient ``nn.Embedding(...,
sparse=True)`` and ``EmbeddingBag(..., sparse=True)`` give their weight, and what
``torch.sparse_coo_tensor`` makes.

A :class:`SparseCOO` is a Tensor holding ``indices`` (int64, (sparse_dim, nnz)) and ``values``
((nnz, *dense dims)) arrays and a size, as torch's ``SparseTensorImpl``; nothing is dense until
asked for. What torch does on such tensors and training needs is here, with torch's rules:
``coalesce`` (duplicates summed in their order, indices sorted), ``to_dense``, the sum of two of
them (torch's merge of the two index lists: equal indices met in step are added, the result
uncoalesced unless both were), a dense array plus one, scalar products, and torch's errors for
what it refuses (``add(sparse, dense)``, storage, data pointers, numpy); ``torch.sparse_coo_tensor``
is nbgrad/sparse.py's. Any other Tensor method
reads the dense value (``_data`` is the dense array, made on each access and read only): its
result is dense where torch's may be sparse, and an in-place write into it raises.
"""
from __future__ import annotations

import numpy as np

from . import backend, dtypes
from .printing import _add_suffixes, format_array
from .storage import Storage
from .tensor import Size, Tensor, _dim, type_name

__all__ = ["SparseCOO", "not_on_sparse", "merge_add", "dense_plus", "add_into", "axpy",
           "accumulate_sparse"]

_NO_STORAGE = "Cannot access data pointer of Tensor that doesn't have storage"


def not_on_sparse(op):
    """torch's error for an operator it has no sparse kernel for (``aten::<op>``)."""
    return NotImplementedError(
        f"Could not run 'aten::{op}' with arguments from the 'SparseCPU' backend. This could be "
        "because the operator doesn't exist for this backend, or was omitted during the "
        "selective/custom build process (if using custom build).")


def _wrap(arr):
    """A dense tensor viewing ``arr`` (the indices or values of a sparse tensor: its memory)."""
    return Tensor._make(arr, Storage(arr, alias=True), None, 0, False)


class SparseCOO(Tensor):
    """A sparse COO tensor (torch.Tensor with ``layout=torch.sparse_coo``)."""

    # _vc: whether torch's values tensor would be contiguous (a gradient's values viewing an
    # expanded incoming gradient are not): it picks torch's kernel for a sum (merge or concatenate)
    __slots__ = ("_idx", "_val", "_size", "_co", "_vc")
    layout = dtypes.sparse_coo
    is_sparse = True

    @staticmethod
    def _of(indices, values, size, coalesced=False, requires_grad=False, contiguous=True):
        t = Tensor.__new__(SparseCOO)
        t._idx, t._val, t._size = indices, values, tuple(int(s) for s in size)
        t._co = coalesced or indices.shape[1] < 2  # (one entry at most: coalesced, as torch's)
        t._vc = contiguous
        t._storage_or_nbytes = Storage(values)  # (its version counter)
        t._grad_fn = t._grad = t._view = t._extra = None
        t._output_nr = 0
        t._requires_grad = requires_grad
        return t

    # ---- the dense value, for everything else ----
    @property
    def _data(self):
        out = self._dense()
        out.flags.writeable = False
        return out

    def _dense(self):
        xp = backend.get_array_module(self._val)
        out = xp.zeros(self._size, self._val.dtype)
        if self._idx.shape[1]:
            xp.add.at(out, tuple(self._idx), self._val)  # duplicates in order, as coalesce
        return out

    # ---- metadata without the dense value ----
    @property
    def shape(self):
        return Size(self._size)

    def size(self, dim=None):
        return Size(self._size) if dim is None else self._size[_dim(dim, len(self._size))]

    @property
    def dtype(self):
        return dtypes.from_np(self._val.dtype)

    @property
    def device(self):
        return backend.device_of(self._val)

    @property
    def ndim(self):
        return len(self._size)

    def dim(self):
        return len(self._size)

    ndimension = dim

    def numel(self):
        return int(np.prod(self._size, dtype=np.int64))

    nelement = numel

    def element_size(self):
        return self._val.itemsize

    def __len__(self):
        return self._size[0]

    def is_contiguous(self, memory_format=None):
        return False

    def stride(self, dim=None):
        st = (0,) * len(self._size)
        return st if dim is None else st[_dim(dim, len(st))]

    def data_ptr(self):
        raise RuntimeError(_NO_STORAGE)

    def tolist(self):
        raise RuntimeError(_NO_STORAGE)

    def untyped_storage(self):
        raise NotImplementedError("Cannot access storage of SparseTensorImpl")

    storage = untyped_storage

    def numpy(self, force=False):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return type_name(self._val.dtype, self._val).replace(".", ".sparse.", 1)
        return self.to(dtype)

    # ---- torch's sparse API ----
    def sparse_dim(self):
        return self._idx.shape[0]

    def dense_dim(self):
        return self._val.ndim - 1

    def _nnz(self):
        return self._idx.shape[1]

    def is_coalesced(self):
        return self._co

    def _indices(self):
        return _wrap(self._idx)

    def _values(self):
        return _wrap(self._val)

    def indices(self):
        if not self._co:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return _wrap(self._idx)

    def values(self):
        if not self._co:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return _wrap(self._val)

    def coalesce(self):
        """This tensor when coalesced, else a new one: indices sorted and unique, the values of
        equal indices summed in their order (torch's stable sort, then one sum per index)."""
        if self._co:
            return self
        idx, val = _coalesced(self._idx, self._val, self._size)
        return SparseCOO._of(idx, val, self._size, True, self._requires_grad)

    def to_dense(self, dtype=None, *, masked_grad=None):
        out = self._dense()
        t = Tensor._make_fresh(out)
        return t if dtype is None else t.to(dtype)

    def to_sparse(self, *args, **kwargs):
        return self

    def detach(self):
        return SparseCOO._of(self._idx, self._val, self._size, self._co, contiguous=self._vc)

    @property
    def data(self):
        return self.detach()

    def clone(self, *, memory_format=None):
        return SparseCOO._of(self._idx.copy(), self._val.copy(), self._size, self._co)

    def zero_(self):
        self._idx = self._idx[:, :0].copy()
        self._val = self._val[:0].copy()
        self._co = True
        self._storage.bump("zero_")
        return self

    def to(self, *args, **kwargs):
        dt = kwargs.get("dtype")
        for a in args:
            if isinstance(a, dtypes.dtype):
                dt = a
        if dt is None or dt.np == self._val.dtype:
            return self
        return SparseCOO._of(self._idx, self._val.astype(dt.np), self._size, self._co)

    def double(self):
        return self.to(dtypes.float64)

    def float(self):
        return self.to(dtypes.float32)

    def cpu(self):
        return self

    # ---- arithmetic torch has sparse kernels for ----
    def _scaled(self, fn):
        """A new sparse tensor with ``fn`` (a Tensor function) applied to the values, as torch's
        scalar kernels on the values (type promotion included)."""
        return SparseCOO._of(self._idx.copy(), fn(_wrap(self._val))._data, self._size, self._co)

    def mul(self, other):
        if isinstance(other, Tensor) and other.numel() != 1:
            raise not_on_sparse("mul.Tensor")
        return self._scaled(lambda v: v * other)

    __mul__ = __rmul__ = mul

    def mul_(self, other):
        if isinstance(other, Tensor) and other.numel() != 1:
            raise not_on_sparse("mul_.Tensor")
        v = _wrap(self._val)
        v.mul_(other)
        self._storage.bump("mul_")
        return self

    def div(self, other, rounding_mode=None):
        return self._scaled(lambda v: v.div(other, rounding_mode=rounding_mode))

    __truediv__ = div

    def neg(self):
        return self._scaled(lambda v: -v)

    __neg__ = neg

    def _coalesced_op(self, fn):
        """``fn`` on the values of the coalesced tensor (torch's zero-preserving elementwise ops:
        their result is coalesced)."""
        c = self.coalesce()
        return SparseCOO._of(c._idx.copy(), fn(_wrap(c._val))._data, self._size, True)

    def pow(self, exponent):
        return self._coalesced_op(lambda v: v.pow(exponent))

    __pow__ = pow

    def abs(self):
        return self._coalesced_op(lambda v: v.abs())

    def sqrt(self):
        return self._coalesced_op(lambda v: v.sqrt())

    def add(self, other, *, alpha=1):
        if isinstance(other, SparseCOO):
            return merge_add(self, other, alpha)
        if isinstance(other, Tensor):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                               "instead.")
        if type(other) is np.ndarray:  # the engine's sums of gradients: dense, as torch's buffer
            return dense_plus(other, self)
        return super().add(other, alpha=alpha)

    __add__ = add

    def __radd__(self, other):
        if type(other) is np.ndarray:
            return dense_plus(other, self)
        return super().__radd__(other)

    def add_(self, other, *, alpha=1):
        if not isinstance(other, SparseCOO):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                               "instead.")
        r = merge_add(self, other, alpha)
        self._idx, self._val, self._co, self._vc = r._idx, r._val, r._co, r._vc
        self._storage.bump("add_")
        return self

    def __iadd__(self, other):
        return self.add_(other)

    def __repr__(self):
        return sparse_repr(self)

    def __deepcopy__(self, memo):
        new = memo[id(self)] = SparseCOO._of(self._idx.copy(), self._val.copy(), self._size,
                                             self._co, self._requires_grad)
        return new

    def __reduce_ex__(self, proto):
        return (_rebuild, (backend.to_device(self._idx, backend.CPU),
                           backend.to_device(self._val, backend.CPU), self._size, self._co,
                           self._requires_grad))


def _rebuild(indices, values, size, coalesced, requires_grad):
    return SparseCOO._of(indices, values, size, coalesced, requires_grad)


def _flat_keys(idx, size):
    """torch's flatten_indices: one int64 key per column of ``idx`` (row-major in ``size``)."""
    key = np.zeros(idx.shape[1], np.int64)
    for d in range(idx.shape[0]):
        key = key * size[d] + idx[d]
    return key


def _coalesced(idx, val, size):
    """(indices, values) of the coalesced tensor: keys sorted stably, equal keys' values summed
    in their order (the first copied, the next added: torch's coalesce kernel)."""
    xp = backend.get_array_module(val)
    if idx.shape[1] == 0:
        return idx.copy(), val.copy()
    key = _flat_keys(backend.to_device(idx, backend.CPU), size[:idx.shape[0]])
    order = np.argsort(key, kind="stable")
    sk = key[order]
    first = np.ones(len(sk), bool)
    first[1:] = sk[1:] != sk[:-1]
    group = np.cumsum(first) - 1
    out = xp.zeros((int(first.sum()),) + val.shape[1:], val.dtype)
    xp.add.at(out, xp.asarray(group), val[xp.asarray(order)])
    return xp.asarray(backend.to_device(idx, backend.CPU)[:, order[first]]), out


def merge_add(t, s, alpha=1):
    """``t + alpha * s`` of two sparse tensors as torch's CPU kernels: when both hold contiguous
    values (add_out_sparse_contiguous) the two index lists are walked in step, the entry of the
    smaller index taken first, equal indices added into one entry (``(0 + t) + alpha * s``),
    coalesced only if both were; else (add_out_sparse_non_contiguous) the entries of ``s``
    follow those of ``t``, coalesced once they outnumber the elements."""
    if tuple(t._size) != tuple(s._size):
        raise RuntimeError(f"add: expected sizes of 'self' and 'other' to match, but "
                           f"{list(t._size)} != {list(s._size)}")
    dt = np.promote_types(t._val.dtype, s._val.dtype)
    if s._idx.shape[1] == 0:
        return SparseCOO._of(t._idx.copy(), t._val.astype(dt), t._size, t._co)
    sv = s._val.astype(dt) * dt.type(alpha) if alpha != 1 else s._val.astype(dt)
    if t._idx.shape[1] == 0:
        return SparseCOO._of(s._idx.copy(), sv, s._size, s._co)
    tv = t._val.astype(dt)
    if not (t._vc and s._vc):
        r = SparseCOO._of(np.concatenate([t._idx, s._idx], 1), np.concatenate([tv, sv]),
                          t._size)
        if r._nnz() > r.numel():  # (torch aliases the coalesced arrays: the flag stays unset)
            r._idx, r._val = _coalesced(r._idx, r._val, r._size)
        return r
    ti, si = t._idx.T.tolist(), s._idx.T.tolist()
    nt, ns = len(ti), len(si)
    src = []  # (take from t: index or -1, take from s: index or -1) per result entry
    i = j = 0
    while i < nt or j < ns:
        if i >= nt:
            src.append((-1, j))
            j += 1
        elif j >= ns:
            src.append((i, -1))
            i += 1
        elif ti[i] < si[j]:
            src.append((i, -1))
            i += 1
        elif ti[i] > si[j]:
            src.append((-1, j))
            j += 1
        else:
            src.append((i, j))
            i += 1
            j += 1
    src = np.array(src, np.int64).reshape(-1, 2)
    a, b = src[:, 0], src[:, 1]
    idx = np.where(a >= 0, t._idx[:, np.maximum(a, 0)], s._idx[:, np.maximum(b, 0)])
    val = np.zeros((len(src),) + tv.shape[1:], dt)
    val[a >= 0] += tv[a[a >= 0]]
    sb = b >= 0  # (torch's axpy: fused)
    val[sb] = axpy(val[sb], alpha, s._val.astype(dt)[b[sb]])
    return SparseCOO._of(idx, val, t._size, t._co and s._co)


def axpy(x, alpha, y):
    """``x + alpha * y`` with one rounding for float32 (torch's CPU kernels fuse the multiply
    and the add: exact in float64, then rounded once), plainly for other types."""
    if alpha == 1:
        return x + y
    if x.dtype == np.float32:
        return (x.astype(np.float64) + float(np.float32(alpha)) * y.astype(np.float64)).astype(
            np.float32)
    return x + x.dtype.type(alpha) * y


def add_into(dense, sparse, alpha=1):
    """``dense.add_(sparse, alpha=alpha)`` on arrays as torch's CPU kernel: each entry added
    into its element in turn (``d + alpha * v``, fused), duplicates one after another."""
    idx, val = sparse._idx, sparse._val
    if not idx.shape[1]:
        return dense
    if alpha == 1:
        backend.get_array_module(dense).add.at(dense, tuple(idx), val)
        return dense
    # the k-th occurrences of the indices, k = 0, 1, ...: each a set of distinct elements
    key = _flat_keys(idx, sparse._size[:idx.shape[0]])
    order = np.argsort(key, kind="stable")
    sk = key[order]
    start = np.r_[0, np.flatnonzero(sk[1:] != sk[:-1]) + 1]
    rank = np.empty(len(key), np.int64)
    rank[order] = np.arange(len(key)) - np.repeat(start, np.diff(np.r_[start, len(key)]))
    for k in range(int(rank.max()) + 1):
        sel = rank == k
        rows = tuple(idx[:, sel])
        dense[rows] = axpy(dense[rows], alpha, val[sel])
    return dense


def dense_plus(dense, sparse, out=None):
    """``dense + sparse`` on arrays as torch's add_out_dense_sparse (into ``out`` when given,
    else a new array of the common type)."""
    if out is None:
        out = dense.astype(np.promote_types(dense.dtype, sparse._val.dtype), copy=True)
    return add_into(out, sparse)


def accumulate_sparse(var, old, g):
    """AccumulateGrad with a sparse gradient ``g`` or a sparse ``.grad`` ``old``, as PyTorch:
    the first one is taken (a clone when its values are not contiguous); sparse + sparse is
    summed into ``.grad`` in place (:func:`merge_add`, the same tensor); a sparse one is added
    into a dense ``.grad`` in place; a dense one added to a sparse ``.grad`` makes a new dense
    ``.grad``."""
    if old is None:
        var._grad = g if g._vc else g.clone()
    elif type(old) is SparseCOO:
        if type(g) is SparseCOO:
            old.add_(g)
        else:
            var._grad = Tensor._make_fresh(dense_plus(g._data if isinstance(g, Tensor) else g,
                                                      old))
    else:
        add_into(old._data, g)
        old._storage.version += 1


def sparse_repr(t):
    """``repr`` of a sparse tensor as torch's _tensor_str writes it."""
    indent = 7
    suffixes = [f"size={tuple(t._size)}", f"nnz={t._nnz()}"]
    d = dtypes.from_np(t._val.dtype)
    if d not in (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool_):
        suffixes.append(f"dtype={d}")

    def part(prefix, arr):
        body = format_array(arr, indent + len(prefix))
        if arr.size == 0:
            body += f", size={tuple(arr.shape)}"
        return prefix + body + ")"
    text = "tensor(" + part("indices=tensor(", t._idx) + ",\n" + " " * indent + \
        part("values=tensor(", t._val)
    suffixes.append(f"layout={t.layout}")
    if t._requires_grad:
        suffixes.append("requires_grad=True")
    first, rest = suffixes[0], suffixes[1:]
    return _add_suffixes(text + ",\n" + " " * indent + first, rest, indent)
