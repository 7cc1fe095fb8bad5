"""Views below `apply`: a tensor viewing another's storage (`_view_of`), a view row's
application (`_apply_view`), and `CopySlices`, the node a base gets when one of its views is
written in place (its backward runs the op's node on the view's part of the base's gradient)."""
from __future__ import annotations

import sys
import weakref

import numpy as np

from .. import backend
from ..tensor import DEFAULT, INFERENCE, MULTI_OUTPUT, NO_GRAD_MODE, Tensor, _ViewMeta
from .. import provenance
from ..naming import cpp
from .grad_mode import STATE as _GRAD
from .graph import Node, backward_twice_error
from .record import _record, _strip, positions

_new = object.__new__
_ND = np.ndarray
_PROV = provenance.ENABLED
_site_at = provenance.site_at
_cached_site_at = provenance.cached_site_at
_getframe = sys._getframe


def _apply_view(row, x, args):
    """A view (or, for unbind/split, several): shares `x`'s storage and version counter."""
    __tracebackhide__ = True
    grad = _GRAD.enabled
    out = row.fwd(x._data, *args)
    if row.n_out == 1:
        r = _view_of(x, out, DEFAULT if grad else INFERENCE if _GRAD.inference else NO_GRAD_MODE)
        if x._requires_grad:
            if grad:
                _record(row, (r,), (x,), args, 1,
                        where=_cached_site_at(_getframe(3)) if _PROV[0] else None)
            elif r._view.base._requires_grad:  # PyTorch: a view made under no_grad requires
                r._requires_grad = True        # grad when its base does
        return r
    creator = _strip(row.node.__name__)  # none of several views may be modified in place
    mode = MULTI_OUTPUT if grad else INFERENCE if _GRAD.inference else NO_GRAD_MODE
    rs = tuple(_view_of(x, o, mode, creator) for o in out)
    if x._requires_grad:
        if grad:
            _record(row, rs, (x,), args, 1, where=_site_at(_getframe(3)) if _PROV[0] else None)
        elif rs and rs[0]._view.base._requires_grad:
            for r in rs:
                r._requires_grad = True
    return rs


def _view_of(x, out, creation=DEFAULT, creator=None):
    """A tensor viewing `x`'s storage through the array `out`."""
    r = _new(Tensor)
    r._data = out
    r._storage_or_nbytes = st = x._storage  # (a property: read once)
    r._grad_fn = None
    r._output_nr = 0
    r._requires_grad = False
    r._grad = r._extra = None
    if st.inference and not x._requires_grad:
        # torch: a view of an inference tensor is no view (`_base` None, `_is_view()` False;
        # no version counter to keep): the storage shared, nothing else to remember
        r._view = None
        return r
    xv = x._view
    if xv is not None and creation == DEFAULT and xv.creation != DEFAULT:
        creation = xv.creation  # a view of a no_grad or multi-output view inherits it (torch)
    base = xv.base if xv is not None else x
    r._view = _ViewMeta(base, st.version, creation, creator)
    if not base._requires_grad:  # it may come to require grad: remember the view (wake_views)
        vs = st._views
        if vs is None:
            st._views = [weakref.ref(r)]
        else:
            if len(vs) >= 64 and len(vs) & (len(vs) - 1) == 0:  # drop dead ones now and then
                vs[:] = [w for w in vs if w() is not None]
            vs.append(weakref.ref(r))
    return r


def _contiguous(shape, strides):
    """Whether a layout is C-contiguous (strides in elements; size-1 dims' strides free)."""
    acc = 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != acc:
            return False
        acc *= n
    return True


def _overlapping(shape, strides):
    """PyTorch's has_internal_overlap == YES: a stride-0 dim of size > 1 (never when empty)."""
    return 0 not in shape and any(s == 0 and n > 1 for n, s in zip(shape, strides))


def _write_overlap_error():
    raise RuntimeError("unsupported operation: more than one element of the written-to tensor "
                       "refers to a single memory location. Please clone() the tensor before "
                       "performing the operation.")


class CopySlices(Node):
    """Base's grad_fn after an in-place op on one of its views: runs the op's node on the view's
    slice of the gradient, and passes the rest of the base's gradient through."""

    __slots__ = ("fn", "_base_geom", "_view_geom")

    def __init__(self, base_edge, fn, base_geom, view_geom):
        # fn's saved values are what backward unpacks (released through fn); never None, so
        # the engine releases it: PyTorch drops fn then, a second backward through it fails
        Node.__init__(self, (base_edge,) + tuple(fn._next[1:]), fn._saved or ())
        self.fn = fn
        self._base_geom = base_geom
        self._view_geom = view_geom

    def name(self):
        return cpp("CopySlices")  # PyTorch: torch::autograd::CopySlices

    def _saved_tensors(self):
        return () if self.fn is None else self.fn._saved_tensors()

    def _release(self):
        if self.fn is not None:
            self.fn._release()
            self.fn = None

    def _backward(self, g, create_graph):
        """The base's gradient, its view part replaced by what the op's node makes of it. Done
        by the positions of the view's elements within the base, so the same steps serve arrays
        and, under create_graph, Tensors."""
        if self.fn is None:
            raise backward_twice_error()
        if create_graph and _contiguous(*self._base_geom[:2]):
            return self._backward_recorded(g)
        pos = self._positions()
        flat = g.reshape(-1)
        if not create_graph and type(g) is not _ND:
            pos = backend.get_array_module(g).asarray(pos)
        res = self.fn._backward(flat[pos].reshape(self._view_geom[0]), create_graph)
        r0 = res[0]
        if self._next[0][0] is not None and 0 in self._view_geom[1] and \
                _overlapping(*self._view_geom[:2]):
            _write_overlap_error()  # PyTorch copies the result into the gradient's view slice
        if create_graph:
            new = flat.index_put((pos,), flat.new_zeros(()) if r0 is None else r0.reshape(-1))
        else:
            new = flat.copy()
            new[pos] = 0 if r0 is None else r0.reshape(-1)
        return [new.reshape(self._base_geom[0])] + list(res[1:])

    def _backward_recorded(self, g):
        """Under create_graph, PyTorch's steps, so the gradient's graph has its nodes: the
        gradient copied into a new base-shaped tensor (CopyBackwards), the view's part of it
        (AsStridedBackward0) cloned into the op's node, whose result is copied back into that
        part (CopySlices)."""
        shape, _, off = self._base_geom
        vshape, vstrides, voff = self._view_geom
        result = g.new_zeros(tuple(shape))
        result.copy_(g)
        part = result.as_strided(vshape, vstrides, voff - off)
        res = self.fn._backward(part.clone(), True)
        r0 = res[0]
        if self._next[0][0] is not None and 0 in vstrides and _overlapping(vshape, vstrides):
            _write_overlap_error()
        if r0 is None:
            part.zero_()
        else:
            part.copy_(r0)
        return [result] + list(res[1:])

    def _positions(self):
        """Index of each of the view's elements in the base's flattened (C-order) elements."""
        base = positions(self._base_geom).reshape(-1)
        where = np.full(int(base.max()) + 1 if base.size else 1, -1, np.int64)
        where[base] = np.arange(base.size)
        return where[positions(self._view_geom).reshape(-1)]
