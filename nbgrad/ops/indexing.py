"""Rows: indexing with integer or bool arrays (copies, not views), index_put, index_add,
index_select, gather.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: derivatives.py.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..backend import get_array_module as _xp
from .derivatives import _along, _reduce_to, scatter_reduce_array
from ..autograd.apply import apply as _apply
from .formulas import TENSORS
from .registry import ROWS, op

op("index", lambda self, index: _index(self, index),
   self=lambda g, self_shape, index, xp: xp.index_backward(g, self_shape, index),
   grad_version=1)


def _index_put_fwd(self, values, index, accumulate):
    return _index_put(self, values, index, accumulate)


op("index_put", _index_put_fwd, overlap_check="any", unchecked_write=True,
   self=lambda g, index, accumulate, xp: g if accumulate else xp.zeroed(g, index),
   values=lambda g, index, values_shape, xp: _reduce_to(g[index], values_shape, None, xp))
# PyTorch's index backward writes with the in-place _index_put_impl_ (IndexPutImplBackward0)
op("index_put_impl", _index_put_fwd,
   node="IndexPutImplBackward0",
   self=lambda g, index, accumulate, xp: g if accumulate else xp.zeroed(g, index),
   values=lambda g, index, values_shape, xp: _reduce_to(g[index], values_shape, None, xp))
op("index_add", lambda self, source, dim, index: _index_add(self, source, dim, index),
   self=lambda g: g,
   source=lambda g, dim, index, source: g[_along(dim, index)].reshape(source.shape))
op("index_select", lambda self, dim, index: _xp(self).take(self, index, axis=dim),
   self=lambda g, self_shape, dim, index, xp: xp.index_add_to_zeros(g, self_shape, dim, index),
   grad_version=1)
op("gather", lambda self, dim, index: _xp(self).take_along_axis(self, index, axis=dim),
   self=lambda g, self, dim, index, xp: xp.scatter_along(  # saves self, as torch
       xp.new_zeros(g, tuple(self.shape)), dim, index, g, add=True),
   grad_version=1)


# ---- forwards longer than a line ----------------------------------------------------------------
def _index_put(a, v, index, accumulate):
    out = a.copy()
    if accumulate:
        _xp(out).add.at(out, index, v)
    else:
        out[index] = v
    return out


def _index_add(a, s, dim, index):
    out = a.copy()
    idx = [slice(None)] * a.ndim
    idx[dim] = index
    _xp(out).add.at(out, tuple(idx), s)
    return out


# ---- scatter family, index_copy/index_fill, masked_select/masked_scatter ------------------------
# Formulas run on arrays or, under create_graph, on Tensors: through `xp` (formulas.py) only.
def _scatter_fwd(self, src, dim, index):
    out = self.copy()
    if getattr(src, "ndim", 0):
        src = src[tuple(slice(0, n) for n in index.shape)]
    _xp(out).put_along_axis(out, index, src, axis=dim)
    return out


def _scatter_count(shape, dim, index, start):
    """How many times each position of `shape` is scattered to (plus `start`), an array."""
    m = backend.get_array_module(index)
    count = m.full(tuple(shape), start, np.int64)
    grid = list(m.indices(index.shape, sparse=True))
    grid[dim] = index
    m.add.at(count, tuple(grid), 1)
    return count


def _maximum(a, b):
    return _xp(a).maximum(a, b)


def _scatter_reduce_grads(g, self, src, result, dim, index, reduce, include_self, xp):
    """PyTorch's scatter_reduce backward (sum, prod, mean, amax, amin)."""
    shape = tuple(self.shape)
    if reduce == "sum":
        gself, gsrc = g, xp.gather(g, dim, index)
    elif reduce == "mean":
        n = xp.constant(_maximum(_scatter_count(shape, dim, index, 1 if include_self else 0),
                                   1).astype(xp.dtype(g)))
        gself = g / n
        gsrc = xp.gather(g, dim, index) / xp.gather(n, dim, index)
    elif reduce in ("amax", "amin"):
        value = xp.gather(result, dim, index)
        self_is = self == result
        src_is = src == value
        dt = xp.dtype(g)  # (a bool times 1.0 is float64 in numpy)
        n = xp.scatter_along(xp.astype(self_is, dt), dim, index, xp.astype(src_is, dt), add=True)
        share = g / n  # (torch multiplies by the masks: NaN where a NaN left no one equal)
        gself = xp.astype(self_is, dt) * share
        gsrc = xp.astype(src_is, dt) * xp.gather(share, dim, index)
    else:  # prod: products of the others, computed again with the zeros masked (as PyTorch)
        masked_self = xp.where(self == 0, 1, self)
        gself = g * xp.scatter_prod(masked_self, src, dim, index, include_self) / masked_self
        src_zero = src == 0
        n_zeros = xp.gather(xp.scatter_along(xp.new_zeros(g, shape), dim, index,
                                             xp.astype(src_zero, xp.dtype(g)), add=True),
                            dim, index)  # (g's dtype: a bool times 1.0 is the default dtype)
        single = src_zero & (n_zeros == 1)
        masked_src_result = xp.scatter_prod(self, xp.masked_fill(src, single, 1), dim, index,
                                            include_self)
        gsrc = xp.where(single, xp.gather(g * masked_src_result, dim, index),
                        xp.gather(g * result, dim, index) / xp.masked_fill(src, src_zero, 1))
        if xp is TENSORS and bool((_raw_data(n_zeros) > 1).any()):  # torch's DelayedError
            gsrc = _apply(ROWS["scatter_reduce_prod_zeros"], (gsrc,))
    if not include_self:  # self took no part where src was scattered
        gself = xp.where(xp.constant(_scatter_count(shape, dim, index, 0) > 0), 0, gself)
    return gself, gsrc


def _raw_data(t):
    return getattr(t, "_data", t)


def _zeros_refused(g):
    raise RuntimeError("scatter_reduce(): Double backward is unsupported for src when >1 zeros "
                       "in src are scattered to the same position in self")


# what torch puts on scatter_reduce's prod src-gradient under create_graph when two zeros of src
# meet at one position (a DelayedError node, which Python sees as `Error`): the gradient as it
# is, whose own backward raises
op("scatter_reduce_prod_zeros", lambda self: self.copy(), node="Error",
   self=_zeros_refused)
op("scatter", _scatter_fwd, node="ScatterBackward0",
   self=lambda g, dim, index, xp: xp.scatter_along(g * 1, dim, index, 0.0),
   src=lambda g, dim, index, xp: xp.gather(g, dim, index))
op("scatter_value", lambda self, dim, index, value: _scatter_fwd(self, value, dim, index),
   node="ScatterBackward1",
   self=lambda g, dim, index, xp: xp.scatter_along(g * 1, dim, index, 0.0))
op("scatter_add", lambda self, src, dim, index: scatter_reduce_array(self, src, dim, index,
                                                                     "sum", True),
   self=lambda g: g,
   src=lambda g, dim, index, xp: xp.gather(g, dim, index))
op("scatter_reduce", scatter_reduce_array,
   **{"self, src": lambda g, self, src, result, dim, index, reduce, include_self, xp:
      _scatter_reduce_grads(g, self, src, result, dim, index, reduce, include_self, xp)})


def _index_copy_fwd(self, source, dim, index):
    out = self.copy()
    out[_along(dim, index)] = source
    return out


op("index_copy", _index_copy_fwd,
   self=lambda g, dim, index, xp: xp.zero_along(g, dim, index),
   source=lambda g, dim, index, xp: xp.index_select(g, dim, index))
op("index_fill", lambda self, dim, index, value: _index_copy_fwd(self, value, dim, index),
   node="IndexFillBackward0", unchecked_write=True,
   self=lambda g, dim, index, xp: xp.zero_along(g, dim, index))
op("index_fill_tensor", lambda self, value, dim, index: _index_copy_fwd(self, value, dim, index),
   node="IndexFillBackward1", unchecked_write=True,
   self=lambda g, dim, index, xp: xp.zero_along(g, dim, index),
   value=lambda g, dim, index, xp: xp.index_select(g, dim, index).sum())


def _masked_scatter_fwd(self, source, mask):
    out = self.copy()
    m = _xp(mask).broadcast_to(mask, self.shape)
    out[m] = source.reshape(-1)[:int(m.sum())]
    return out


def _masked_scatter_source_grad(g, mask, source_shape, xp):
    """The first mask.sum() elements of source got g where mask is True; the rest nothing."""
    m = _xp(mask).broadcast_to(mask, tuple(g.shape))
    k, n = int(m.sum()), int(np.prod(source_shape))
    sel = g[m]
    if n > k:
        sel = xp.concatenate([sel, xp.new_zeros(g, (n - k,))], axis=0)
    return sel.reshape(source_shape)


def _broadcast_mask(self_shape, mask):
    return _xp(mask).broadcast_to(mask, np.broadcast_shapes(tuple(self_shape), mask.shape))


op("masked_select", lambda self, mask: _xp(self).broadcast_to(
    self, np.broadcast_shapes(self.shape, mask.shape))[_broadcast_mask(self.shape, mask)],
   self=lambda g, self, mask, xp: xp.put(g, _broadcast_mask(self.shape, mask).shape,
                                         _broadcast_mask(self.shape, mask)), grad_version=1)
op("masked_scatter", _masked_scatter_fwd,
   self=lambda g, mask, xp: xp.where(mask, 0, g),
   source=lambda g, mask, source_shape, xp: _masked_scatter_source_grad(g, mask, source_shape,
                                                                         xp))


def _index(a, index):
    """a[index]; one integer array on the first dim is a take (4-8x faster than numpy's fancy
    indexing on small tables: C[X] of a language model, X[ix] of a batch), same values and
    errors."""
    if len(index) == 1:
        i = index[0]
        if type(i) is type(a) and i.dtype.kind in "iu":
            return a.take(i, 0)
    return a[index]
