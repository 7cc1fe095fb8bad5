"""Rows: views (the output shares the input's storage and version counter), and joining.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: derivatives.py.
"""
from __future__ import annotations

import numpy as np

from .. import backend, dtypes
from ..backend import get_array_module as _xp
from .formulas import array_formulas
from .derivatives import _along, _cat_grads, _reduce_to, _unpermute, _zeros_for
from .registry import ROWS, op

# ---- joining (a list of inputs) -----------------------------------------------------------------
op("cat", lambda tensors, sizes, dim, dtypes: _cat(tensors, dim, dtypes),
   tensors=lambda g, sizes, dim, dtypes, xp: _cat_grads(g, sizes, dim, dtypes, xp))
op("stack", lambda tensors, n, dim: _stack(tensors, dim),
   tensors=lambda g, n, dim: [g[_along(dim, i)] for i in range(n)])

# ---- reshaping views ----------------------------------------------------------------------------
op("view", lambda self, shape: _view_reshape(self, shape), view=True,
   self=lambda g, self_shape: g.reshape(self_shape))
op("reshape_alias", lambda self, shape: _view_reshape(self, shape), view=True,
   node="ReshapeAliasBackward0",  # reshape of a non-contiguous tensor the strides allow
   self=lambda g, self_shape: g.reshape(self_shape))
op("unsafe_view", lambda self, shape: self.reshape(shape),
   self=lambda g, self_shape: g.reshape(self_shape))
op("alias", lambda self: self.view(), view=True,
   self=lambda g: g)
# a 0-d tensor's transpose(0, 0) (or -1, 0) is a view of it, as in PyTorch
op("transpose", lambda self, dim0, dim1: self.swapaxes(dim0, dim1) if self.ndim else self.view(),
   view=True, self=lambda g, dim0, dim1: g.swapaxes(dim0, dim1) if g.ndim else g)
op("t", lambda self: self.T, node="TBackward0", view=True,
   self=lambda g, xp: xp.t(g))
op("permute", lambda self, dims: self.transpose(dims), view=True,
   self=lambda g, dims, xp: _unpermute(g, dims, xp))
op("expand", lambda self, shape: _expand(self, shape), view=True,
   self=lambda g, self_shape, xp: _reduce_to(g, self_shape, None, xp))
op("squeeze", lambda self: self.squeeze(), view=True,
   self=lambda g, self_shape, xp: xp.unsqueeze_to(g, self_shape))
# squeeze((d, ...)) is SqueezeBackward2; matmul's internal squeeze shows as SqueezeBackward4
# squeeze_(dim) on a tensor that requires grad is SqueezeBackward4 too, squeeze_((d, ...)) 5
for _name, _node in (("squeeze_dims", "SqueezeBackward2"), ("squeeze_dims_", "SqueezeBackward4"),
                     ("squeeze_dims_tuple_", "SqueezeBackward5")):
    op(_name, lambda self, dims: self.squeeze(tuple(d for d in dims if self.shape[d] == 1)),
       node=_node, view=True,
       self=lambda g, self_shape, dims, xp: xp.unsqueeze_to(g, self_shape, dims))
op("squeeze_dim", lambda self, dim: self.squeeze(dim) if self.ndim and self.shape[dim] == 1
   else self.view(),
   node="SqueezeBackward1", view=True,
   self=lambda g, self_shape, dim, xp: xp.unsqueeze_to(g, self_shape, (dim,)))
op("unsqueeze", lambda self, dim: _unsqueeze(self, dim), view=True,
   self=lambda g, dim: g.squeeze(dim))
# PyTorch's decompositions (quantile) move dims with in-place unsqueeze_ / transpose_ on a fresh
# result: the same views, under the in-place ops' node names
op("unsqueeze_", lambda self, dim: _unsqueeze(self, dim), node="UnsqueezeBackward1", view=True,
   self=lambda g, dim: g.squeeze(dim))
op("transpose_", lambda self, dim0, dim1: self.swapaxes(dim0, dim1), node="TransposeBackward1",
   view=True,
   self=lambda g, dim0, dim1: g.swapaxes(dim0, dim1))
# and Tensor.squeeze_() / t_() on a tensor that requires grad (as_strided_ is below)
op("squeeze_", lambda self: self.squeeze(), node="SqueezeBackward3", view=True,
   self=lambda g, self_shape: g.reshape(self_shape))
op("t_", lambda self: self.T, node="TBackward1", view=True,
   self=lambda g: g.T)

# ---- slicing views ------------------------------------------------------------------------------
# under create_graph their gradient is PyTorch's slice_backward / select_backward op, whose own
# gradient is the slice (select) of the incoming one
op("slice", lambda self, index: _slice_view(self, index), view=True,
   double=dict(node="SliceBackwardBackward0", g=lambda gg, index: gg[index]),
   self=lambda g, self_shape, index, xp: xp.put(g, self_shape, index))
op("select", lambda self, index: self[index], view=True,
   double=dict(node="SelectBackwardBackward0", g=lambda gg, index: gg[index]),
   self=lambda g, self_shape, index, xp: xp.put(g, self_shape, index))
# root: the storage's whole array, which the view addresses (not saved: no formula uses it)
op("as_strided", lambda self, base_geom, view_geom, root: backend.as_strided(root, *view_geom),
   view=True,
   self=lambda g, base_geom, view_geom, xp: xp.as_strided_backward(g, base_geom, view_geom))
op("as_strided_", ROWS["as_strided"].fwd, node="AsStridedBackward1", view=True,
   self=ROWS["as_strided"].formulas[0])
op("diagonal", lambda self, base_geom, view_geom, root: backend.as_strided(root, *view_geom),
   view=True, double="DiagonalBackwardBackward0",
   self=lambda g, base_geom, view_geom, xp: xp.as_strided_backward(g, base_geom, view_geom))
op("unfold", lambda self, dim, size, step: _unfold(self, dim, size, step), view=True,
   double="UnfoldBackwardBackward0",
   self=lambda g, self_shape, dim, size, step, xp: xp.unfold_backward(g, self_shape, dim, size,
                                                                      step))

# ---- several views from one node (none may be modified in place) --------------------------------
op("unbind", lambda self, dim, n: [self[_along(dim, i) + (Ellipsis,)] for i in range(n)],
   view=True, n_out=-1,
   self=lambda g, self_shape, dim, xp: xp.stack(_zeros_for(
       g, [tuple(s for i, s in enumerate(self_shape) if i != dim)] * len(g), xp), axis=dim))
for _name, _node in (("split", "SplitBackward0"), ("split_sizes", "SplitWithSizesBackward0")):
    op(_name, lambda self, sizes, dim: _split(self, sizes, dim), node=_node, view=True, n_out=-1,
       self=lambda g, self_shape, sizes, dim, xp: xp.concatenate(_zeros_for(
           g, [tuple(n if i == dim else s for i, s in enumerate(self_shape)) for n in sizes], xp),
           axis=dim))



def _slice_view(a, index):
    """`a[index]` for a tuple of slices, one per leading dim. An empty result gets torch's
    strides (each sliced dim's stride times its step), which numpy leaves as they were."""
    r = a[index]
    if r.size or not r.ndim:
        return r
    st = list(a.strides)
    for d, s in enumerate(index):
        if s.step is not None and s.step != 1:
            st[d] *= s.step
    if tuple(st) == r.strides:
        return r
    return _xp(r).lib.stride_tricks.as_strided(r, r.shape, tuple(st))


def _expand(a, shape):
    """`a` broadcast to `shape` with PyTorch's strides (its inferExpandGeometry: an expanded
    dim gets stride 0, a new size-1 dim the stride that keeps it contiguous with the next), and
    writable: PyTorch refuses an in-place op on it only where a stride-0 dim has size > 1."""
    shape = tuple(shape)
    if a.shape == shape:
        return a.view()
    n, k = len(shape), a.ndim
    strides = [0] * n
    for i in range(n - 1, -1, -1):
        d = k - n + i
        size = a.shape[d] if d >= 0 else 1
        if d >= 0:
            st = a.strides[d]
        else:  # a 0-d tensor's new dims have stride 0 in PyTorch
            st = shape[i + 1] * strides[i + 1] if k and i + 1 < n else 0
        strides[i] = 0 if size != shape[i] else st
    return _xp(a).lib.stride_tricks.as_strided(a, shape, tuple(strides))


def _unsqueeze(a, dim):
    """A new size-1 dim at `dim` with PyTorch's stride (1 at the end, else the size times the
    stride of the dim it goes before)."""
    r = _xp(a).expand_dims(a, dim)
    st = a.itemsize if dim >= a.ndim else a.shape[dim] * a.strides[dim]
    strides = a.strides[:dim] + (st,) + a.strides[dim:]
    if r.strides != strides:  # (numpy's may differ in size-1 dims)
        r = _xp(a).lib.stride_tricks.as_strided(a, r.shape, strides)
    return r


def _view_reshape(a, shape):
    try:
        if type(a) is np.ndarray:  # the method: half the cost of np.reshape's wrapper
            return a.reshape(shape, copy=False)
        return _xp(a).reshape(a, shape, copy=False)
    except ValueError as e:
        raise _ViewImpossible(str(e)) from None


class _ViewImpossible(Exception):
    """The strides do not allow `view`; `reshape` then copies."""


def _stack(arrays, dim):
    """xp.stack; along dim 0, one concatenate viewed with the new dim (np.stack's own
    expand_dims per array costs three times as much for a batch of slices); in PyTorch's result
    dtype, as cat."""
    a0 = arrays[0]
    rt = a0.dtype
    if not all(a.dtype == rt for a in arrays):
        rt = dtypes.common_dtype(a.dtype for a in arrays)
        arrays = [a.astype(rt, copy=False) for a in arrays]
        a0 = arrays[0]
    if dim == 0 and a0.ndim:
        return _xp(a0).concatenate(arrays).reshape((len(arrays),) + a0.shape)
    return _xp(a0).stack(arrays, axis=dim)


def _cat(arrays, dim, dts):
    """Concatenate in PyTorch's result dtype (numpy's promotion differs for 0-d and mixed);
    `dts`: the arrays' dtypes, then those of 1-d empty inputs cat left out (the gradients zip
    `dts` with the sizes, one per array, so those trailing dtypes only promote)."""
    if dts.count(dts[0]) == len(dts):  # the usual case: nothing to promote
        return _xp(arrays[0]).concatenate(arrays, axis=dim)
    rt = dtypes.common_dtype(dts)
    return _xp(arrays[0]).concatenate([a.astype(rt, copy=False) for a in arrays], axis=dim)


def _unfold(a, dim, size, step):
    """The windows of `size` along `dim`, `step` apart, as a new last dim: a strided view."""
    n = (a.shape[dim] - size) // step + 1
    shape = a.shape[:dim] + (n,) + a.shape[dim + 1:] + (size,)
    s = a.strides
    strides = s[:dim] + (s[dim] * step,) + s[dim + 1:] + (s[dim],)
    return backend.get_array_module(a).lib.stride_tricks.as_strided(a, shape, strides)


def _split(a, sizes, dim):
    outs, start = [], 0
    for k in sizes:
        outs.append(a[_along(dim, slice(start, start + k))])
        start += k
    return outs


# ---- roll, rot90, block_diag (copies, with PyTorch's nodes) --------------------------------------
def _neg(shifts):
    return tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts


def _block_diag(arrays, shapes):
    """Matrices (as 2-D: () -> (1, 1), (n,) -> (1, n)) along the diagonal of one matrix."""
    xp = backend.get_array_module(arrays[0]) if arrays else np
    mats = [a.reshape(s) for a, s in zip(arrays, shapes)]
    dt = np.result_type(*(a.dtype for a in arrays)) if arrays else np.float32
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


op("roll", lambda self, shifts, dims: array_formulas(self).roll(self, shifts, dims),
   self=lambda g, shifts, dims, xp: xp.roll(g, _neg(shifts), dims))
op("rot90", lambda self, k, dims: array_formulas(self).rot90(self, k, dims),
   self=lambda g, k, dims, xp: xp.rot90(g, -k, dims))
op("block_diag", lambda tensors, shapes, in_shapes: _block_diag(tensors, shapes),
   tensors=lambda g, shapes, in_shapes: _block_diag_grads(g, shapes, in_shapes))
