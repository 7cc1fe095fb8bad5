"""Rows: views (the output shares the input's storage and version counter), and joining.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import numpy as np

from ..autograd import apply
from .formulas import (_as_strided_backward, _cat_grads, _first_dtype, _put, _reduce_to,
                       _unfold_backward, _unpermute, _zeros_for)
from .registry import ROWS, op

# ---- joining (a list of inputs) -----------------------------------------------------------------
op("cat", lambda tensors, sizes, dim, dtypes: None,
   tensors=lambda g, sizes, dim, dtypes, xp: _cat_grads(g, sizes, dim, dtypes, xp))
op("stack", lambda tensors, n, dim: None,
   tensors=lambda g, n, dim, xp: [xp.take(g, i, axis=dim) for i in range(n)])

# ---- reshaping views ----------------------------------------------------------------------------
op("view", lambda self, shape: _view_reshape(self, shape), view=True,
   self=lambda g, self_shape: g.reshape(self_shape))
op("unsafe_view", lambda self, shape: self.reshape(shape),
   self=lambda g, self_shape: g.reshape(self_shape))
op("alias", lambda self: self.view(), view=True,
   self=lambda g: g)
op("transpose", lambda self, dim0, dim1: self.swapaxes(dim0, dim1), view=True,
   self=lambda g, dim0, dim1: g.swapaxes(dim0, dim1))
op("t", lambda self: self.T, node="TBackward0", view=True,
   self=lambda g: g.T)
op("permute", lambda self, dims: self.transpose(dims), view=True,
   self=lambda g, dims, xp: _unpermute(g, dims, xp))
op("expand", lambda self, shape: np.broadcast_to(self, shape), view=True,
   self=lambda g, self_shape, xp: _reduce_to(g, self_shape, None, xp))
op("squeeze", lambda self: self.squeeze(), view=True,
   self=lambda g, self_shape: g.reshape(self_shape))
# squeeze((d, ...)) is SqueezeBackward2; matmul's internal squeeze shows as SqueezeBackward4
for _name, _node in (("squeeze_dims", "SqueezeBackward2"), ("squeeze_dims_", "SqueezeBackward4")):
    op(_name, lambda self, dims: self.squeeze(tuple(d for d in dims if self.shape[d] == 1)),
       node=_node, view=True,
       self=lambda g, self_shape: g.reshape(self_shape))
op("squeeze_dim", lambda self, dim: self.squeeze(dim) if self.shape[dim] == 1 else self.view(),
   node="SqueezeBackward1", view=True,
   self=lambda g, self_shape: g.reshape(self_shape))
op("unsqueeze", lambda self, dim: np.expand_dims(self, dim), view=True,
   self=lambda g, self_shape: g.reshape(self_shape))

# ---- slicing views ------------------------------------------------------------------------------
op("slice", lambda self, index: self[index], view=True,
   self=lambda g, self_shape, index, xp: _put(g, self_shape, index, xp))
op("select", lambda self, index: self[index], view=True,
   self=lambda g, self_shape, index, xp: _put(g, self_shape, index, xp))
op("as_strided", lambda self, base_geom, view_geom: None, view=True,
   self=lambda g, base_geom, view_geom, xp: _as_strided_backward(g, base_geom, view_geom, xp))
op("diagonal", lambda self, base_geom, view_geom: None, view=True,
   self=lambda g, base_geom, view_geom, xp: _as_strided_backward(g, base_geom, view_geom, xp))
op("unfold", lambda self, dim, size, step: None, view=True,
   self=lambda g, self_shape, dim, size, step, xp: _unfold_backward(g, self_shape, dim, size,
                                                                    step, xp))

# ---- several views from one node (none may be modified in place) --------------------------------
op("unbind", lambda self, dim, n: None, view=True, n_out=-1,
   self=lambda g, self_shape, dim, xp: xp.stack(_zeros_for(
       g, [tuple(s for i, s in enumerate(self_shape) if i != dim)] * len(g), _first_dtype(g),
       xp), axis=dim))
for _name, _node in (("split", "SplitBackward0"), ("split_sizes", "SplitWithSizesBackward0")):
    op(_name, lambda self, sizes, dim: None, node=_node, view=True, n_out=-1,
       self=lambda g, self_shape, sizes, dim, xp: xp.concatenate(_zeros_for(
           g, [tuple(n if i == dim else s for i, s in enumerate(self_shape)) for n in sizes],
           _first_dtype(g), xp), axis=dim))

apply.AS_STRIDED[0] = ROWS["as_strided"]  # the node of a view whose base changed in place


def _view_reshape(a, shape):
    try:
        return np.reshape(a, shape, copy=False)
    except ValueError as e:
        raise _ViewImpossible(str(e)) from None


class _ViewImpossible(Exception):
    """The strides do not allow `view`; `reshape` then copies."""
