"""Rows: indexing with integer or bool arrays (copies, not views), index_put, index_add,
index_select, gather.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import numpy as np

from .formulas import (_index_backward, _index_select_backward, _np_dtype, _reduce_to,
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
