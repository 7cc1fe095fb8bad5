"""Rows: views (the output shares the input's storage and version counter), and joining.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import apply
from .formulas import (_TX, _as_strided_backward, _cat_grads, _first_dtype, _put, _reduce_to,
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


# ---- issue 9: roll, rot90, block_diag (copies, with PyTorch's nodes) -----------------------------
def _roll(x, shifts, dims, xp):
    if xp is _TX:
        return x.roll(shifts, dims)
    if dims is None:
        return xp.roll(x.reshape(-1), shifts).reshape(x.shape)
    return xp.roll(x, shifts, dims)


def _neg(shifts):
    return tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts


def _rot90(x, k, dims, xp):
    return x.rot90(k, dims) if xp is _TX else xp.rot90(x, k, axes=dims).copy()


def _block_diag(arrays, shapes):
    """Matrices (as 2-D: () -> (1, 1), (n,) -> (1, n)) along the diagonal of one matrix."""
    xp = backend.get_array_module(arrays[0]) if arrays else np
    mats = [a.reshape(s) for a, s in zip(arrays, shapes)]
    dt = np.result_type(*arrays) if arrays else np.float32
    out = xp.zeros((sum(s[0] for s in shapes), sum(s[1] for s in shapes)), dt)
    r = c = 0
    for m, (h, w) in zip(mats, shapes):
        out[r:r + h, c:c + w] = m
        r, c = r + h, c + w
    return out


def _block_diag_grads(g, shapes, in_shapes):
    out, r, c = [], 0, 0
    for (h, w), s in zip(shapes, in_shapes):
        out.append(g[r:r + h, c:c + w].reshape(s))
        r, c = r + h, c + w
    return out


op("roll", lambda self, shifts, dims: _roll(self, shifts, dims, np),
   self=lambda g, shifts, dims, xp: _roll(g, _neg(shifts), dims, xp))
op("rot90", lambda self, k, dims: _rot90(self, k, dims, np),
   self=lambda g, k, dims, xp: _rot90(g, -k, dims, xp))
op("block_diag", lambda tensors, shapes, in_shapes: _block_diag(tensors, shapes),
   tensors=lambda g, shapes, in_shapes: _block_diag_grads(g, shapes, in_shapes))
