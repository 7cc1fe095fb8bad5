"""Rows: indexing with integer or bool arrays (copies, not views), index_put, index_add,
index_select, gather.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..tensor import Tensor
from .formulas import (_TX, _const, _index_backward, _index_select_backward, _np_dtype, _reduce_to,
                       _scatter_add, _zero_at)
from .registry import op

op("index", lambda self, index: self[index],
   self=lambda g, self_shape, index, xp: _index_backward(g, self_shape, index, xp))
op("index_put", lambda self, values, index, accumulate: _index_put(self, values, index,
                                                                   accumulate),
   self=lambda g, index, accumulate, xp: g if accumulate else _zero_at(g, index, xp),
   values=lambda g, index, values_shape, xp: _reduce_to(g[index], values_shape, None, xp))
op("index_add", lambda self, source, dim, index: _index_add(self, source, dim, index),
   self=lambda g: g,
   source=lambda g, dim, index, source_shape, xp: xp.take(g, index, axis=dim).reshape(
       source_shape))
op("index_select", lambda self, dim, index: np.take(self, index, axis=dim),
   self=lambda g, self_shape, dim, index, xp: _index_select_backward(g, self_shape, dim, index,
                                                                     xp))
op("gather", lambda self, dim, index: np.take_along_axis(self, index, axis=dim),
   self=lambda g, self_shape, dim, index, xp: _scatter_add(xp.zeros(self_shape, _np_dtype(g)),
                                                           dim, index, g, xp))


# ---- forwards longer than a line ----------------------------------------------------------------
def _index_put(a, v, index, accumulate):
    out = a.copy()
    if accumulate:
        np.add.at(out, index, v)
    else:
        out[index] = v
    return out


def _index_add(a, s, dim, index):
    out = a.copy()
    idx = [slice(None)] * a.ndim
    idx[dim] = index
    np.add.at(out, tuple(idx), s)
    return out


# ---- issue 9: scatter family, index_copy/index_fill, masked_select/masked_scatter ---------------
# Helpers take arrays, or Tensors under create_graph (xp is _TX); index arguments stay arrays.
def _idx_t(index, xp):
    return Tensor._make_fresh(index) if xp is _TX and not isinstance(index, Tensor) else index


def _gather(g, dim, index, xp):
    """g gathered at `index` along `dim` (scatter's and sort's backward)."""
    if xp is _TX:
        return g.gather(dim, _idx_t(index, xp))
    return xp.take_along_axis(g, index, axis=dim)


def _scatter_into(z, dim, index, src, xp, add=False):
    """`z` (a fresh buffer) with `src` written, or added, at `index` along `dim`."""
    if xp is _TX:
        i = _idx_t(index, xp)
        return z.scatter_add(dim, i, src) if add else z.scatter(dim, i, src)
    if add:
        return _scatter_add(z, dim, index, src, xp)
    xp.put_along_axis(z, index, src, axis=dim)
    return z


def _zeros(shape, like, xp):
    return xp.zeros(shape, _np_dtype(like))


def _scatter_fwd(self, src, dim, index):
    out = self.copy()
    if np.ndim(src):
        src = src[tuple(slice(0, n) for n in index.shape)]
    np.put_along_axis(out, index, src, axis=dim)
    return out


def _scatter_add_fwd(self, src, dim, index):
    return _scatter_add(self.copy(), dim, index, src[tuple(slice(0, n) for n in index.shape)], np)


def _scatter_reduce_fwd(self, src, dim, index, reduce, include_self):
    src = src[tuple(slice(0, n) for n in index.shape)]
    ufunc = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
             "amin": np.minimum}[reduce]
    out = self.copy()
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    idx = tuple(idx)
    if not include_self:
        out[idx] = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
    ufunc.at(out, idx, src)
    if reduce == "mean":
        count = np.full(self.shape, 1 if include_self else 0, np.int64)
        np.add.at(count, idx, 1)
        out = out / np.maximum(count, 1)
        if not include_self:
            out = np.where(count == 0, self, out)
        out = out.astype(self.dtype, copy=False)
    elif not include_self:
        count = np.zeros(self.shape, np.int64)
        np.add.at(count, idx, 1)
        out = np.where(count == 0, self, out)
    return out


def _scatter_count(shape, dim, index, start):
    """How many times each position of `shape` is scattered to (plus `start`), an array."""
    xp = backend.get_array_module(index)
    count = xp.full(tuple(shape), start, np.int64)
    idx = list(xp.indices(index.shape, sparse=True))
    idx[dim] = index
    xp.add.at(count, tuple(idx), 1)
    return count


def _scatter_reduce_any(self, src, dim, index, include_self, xp):
    """scatter_reduce(..., "prod") inside a formula: the forward on arrays, the function (itself
    differentiable) on Tensors."""
    if xp is _TX:
        from ..functions import scatter_reduce  # noqa: PLC0415 (the torch.* layer)
        return scatter_reduce(self, dim, _idx_t(index, xp), src, "prod",
                              include_self=include_self)
    return _scatter_reduce_fwd(self, src, dim, index, "prod", include_self)


def _scatter_reduce_grads(g, self, src, result, dim, index, reduce, include_self, xp):
    """PyTorch's scatter_reduce backward (sum, prod, mean, amax, amin)."""
    shape = tuple(self.shape)
    if reduce == "sum":
        gself, gsrc = g, _gather(g, dim, index, xp)
    elif reduce == "mean":
        n = _scatter_count(shape, dim, index, 1 if include_self else 0)
        n = _const(np.maximum(n, 1).astype(_np_dtype(g)) if isinstance(n, np.ndarray)
                   else xp.maximum(n, 1).astype(_np_dtype(g)), xp)
        gself = g / n
        gsrc = _gather(g, dim, index, xp) / _gather(n, dim, index, xp)
    elif reduce in ("amax", "amin"):
        value = _gather(result, dim, index, xp)
        self_is = self == result
        src_is = src == value
        n = _scatter_into(self_is * 1.0, dim, index, src_is * 1.0, xp, add=True)
        share = g / n
        gself = xp.where(self_is, share, 0)
        gsrc = xp.where(src_is, _gather(share, dim, index, xp), 0)
    else:  # prod: products of the others, computed again with the zeros masked (as PyTorch)
        masked_self = xp.where(self == 0, 1, self)
        gself = g * _scatter_reduce_any(masked_self, src, dim, index, include_self, xp) / \
            masked_self
        src_zero = src == 0
        n_zeros = _gather(_scatter_into(xp.zeros(shape, _np_dtype(g)), dim, index,
                                        src_zero * 1.0, xp, add=True), dim, index, xp)
        single = src_zero & (n_zeros == 1)
        masked_src_result = _scatter_reduce_any(self, xp.where(single, 1, src), dim, index,
                                                include_self, xp)
        gsrc = xp.where(single, _gather(g * masked_src_result, dim, index, xp),
                        _gather(g * result, dim, index, xp) / xp.where(src_zero, 1, src))
    if not include_self:  # self took no part where src was scattered
        gself = xp.where(_const(_scatter_count(shape, dim, index, 0) > 0, xp), 0, gself)
    return gself, gsrc



op("scatter", _scatter_fwd, node="ScatterBackward0",
   self=lambda g, dim, index, xp: _scatter_into(g * 1, dim, index, 0.0, xp),
   src=lambda g, dim, index, xp: _gather(g, dim, index, xp))
op("scatter_value", lambda self, dim, index, value: _scatter_fwd(self, value, dim, index),
   node="ScatterBackward1",
   self=lambda g, dim, index, xp: _scatter_into(g * 1, dim, index, 0.0, xp))
op("scatter_add", _scatter_add_fwd,
   self=lambda g: g,
   src=lambda g, dim, index, xp: _gather(g, dim, index, xp))
op("scatter_reduce", _scatter_reduce_fwd,
   **{"self, src": lambda g, self, src, result, dim, index, reduce, include_self, xp:
      _scatter_reduce_grads(g, self, src, result, dim, index, reduce, include_self, xp)})


def _index_along(dim, index, ndim):
    return (slice(None),) * dim + (index,) + (slice(None),) * (ndim - dim - 1)


def _index_fill_zero(g, dim, index, xp):
    if xp is _TX:
        return g.index_fill(dim, _idx_t(index, xp), 0.0)
    z = g.copy()
    z[_index_along(dim, index, g.ndim)] = 0
    return z


def _index_copy_fwd(self, source, dim, index):
    out = self.copy()
    out[_index_along(dim, index, self.ndim)] = source
    return out


op("index_copy", _index_copy_fwd,
   self=lambda g, dim, index, xp: _index_fill_zero(g, dim, index, xp),
   source=lambda g, dim, index, xp: xp.take(g, index, axis=dim) if xp is not _TX
   else g.index_select(dim, _idx_t(index, xp)))
op("index_fill", lambda self, dim, index, value: _index_copy_fwd(self, value, dim, index),
   node="IndexFillBackward0",
   self=lambda g, dim, index, xp: _index_fill_zero(g, dim, index, xp))
op("index_fill_tensor", lambda self, value, dim, index: _index_copy_fwd(self, value, dim, index),
   node="IndexFillBackward1",
   self=lambda g, dim, index, xp: _index_fill_zero(g, dim, index, xp),
   value=lambda g, dim, index, xp: (xp.take(g, index, axis=dim) if xp is not _TX
                                    else g.index_select(dim, _idx_t(index, xp))).sum())


def _masked_select_backward(g, self_shape, mask, xp):
    shape = np.broadcast_shapes(tuple(self_shape), mask.shape)
    if xp is _TX:
        z = xp.zeros(shape, _np_dtype(g))
        return z.masked_scatter(Tensor._make_fresh(np.broadcast_to(mask, shape)), g)
    z = xp.zeros(shape, g.dtype)
    z[xp.broadcast_to(mask, shape)] = g
    return z


def _masked_scatter_fwd(self, source, mask):
    out = self.copy()
    m = np.broadcast_to(mask, self.shape)
    out[m] = source.reshape(-1)[:int(m.sum())]
    return out


def _masked_scatter_source_grad(g, mask, source_shape, xp):
    m = np.broadcast_to(mask, tuple(g.shape))
    k = int(m.sum())
    n = int(np.prod(source_shape))
    if xp is _TX:
        sel = g.masked_select(Tensor._make_fresh(m))
        if n > k:
            from ..functions import cat
            sel = cat([sel, xp.zeros((n - k,), _np_dtype(g))])
        return sel.reshape(source_shape)
    out = xp.zeros(n, g.dtype)
    out[:k] = g[m]
    return out.reshape(source_shape)


op("masked_select", lambda self, mask: np.broadcast_to(self, np.broadcast_shapes(
    self.shape, mask.shape))[np.broadcast_to(mask, np.broadcast_shapes(self.shape, mask.shape))],
   self=lambda g, self_shape, mask, xp: _masked_select_backward(g, self_shape, mask, xp))
op("masked_scatter", _masked_scatter_fwd,
   self=lambda g, mask, xp: xp.where(mask, 0, g),
   source=lambda g, mask, source_shape, xp: _masked_scatter_source_grad(g, mask, source_shape,
                                                                         xp))
