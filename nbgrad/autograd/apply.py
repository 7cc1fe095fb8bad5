"""The one path from a row of the op table to tensors: `apply(row, inputs, args)`.

It runs the row's forward on the inputs' arrays, wraps the result (a new tensor; a view sharing
the input's storage; several views; or the input itself for an in-place op), and, when grad mode
is on and an input requires grad, records the row's node with what its formulas will need.
In-place ops (`apply(..., inplace="add_")`) bump the version and rebase the target's history:
CopySlices on the base when the target is a view. A row is any object with the attributes of
`nbgrad.ops.registry.Row`; this module never imports the table.
"""
from __future__ import annotations

import sys
import weakref

import numpy as np

from .. import backend, dtypes
from ..storage import Storage
from ..tensor import Tensor, wake_views
from .. import provenance
from .grad_mode import GENERAL_PATH
from .grad_mode import STATE as _GRAD
from .graph import AccumulateGrad as _AccumulateGrad
from .graph import SavedTensor
from .record import (_NONE_EDGE, SAVED_INPUT, _arr, _edge, _geom, _mask, _meta, _meta_for,
                     _record)
from .views import CopySlices, _apply_view
from .inplace import (_cast_error, _check_overlap, _masked_fill_put, _move_retain_grad,
                      _same_data, _saved_before_write, _ufunc_inplace, _write, check_inplace)

# Which branch of `apply` serves a row (`Row.path`, decided once per row). Plain module-level
# ints, as the saved kinds (record.py): `apply` compares the path first thing on every call, and an
# IntEnum member compares slower than an int (it misses CPython's int fast path).
PATH_UNARY = 0    # one tensor input, one output
PATH_BINARY = 1   # two broadcasting operands (the second maybe a Python number)
PATH_VIEW = 2     # a view, or several (unbind, split)
PATH_GENERAL = 3  # the rest: lists, several outputs, kernels with a ctx
_fresh = Tensor._make_fresh
# the edge to an input an op made, written out in the binary path (record._edge's first case);
# NBGRAD_GENERAL_PATH=1: _edge alone
_FAST = not GENERAL_PATH
_ND = np.ndarray
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_quiet, _loud = backend.quiet, backend.loud
_PROV = provenance.ENABLED
_site_at = provenance.site_at
_cached_site_at = provenance.cached_site_at
_getframe = sys._getframe
# The two rows this module applies by itself, given by the op table (`use_rows`) once defined:
# the as_strided row (a view whose base changed in place gets its node) and the clone row (an
# in-place op whose backward needs the old value saves a clone of it, recorded as PyTorch
# records it: CloneBackward0 below the node).
_AS_STRIDED_ROW = _CLONE_ROW = None


def use_rows(*, as_strided, clone):
    """Give this module the op table's `as_strided` and `clone` rows (nbgrad.ops does, once its
    rows are defined: autograd sits below the table and never imports it)."""
    global _AS_STRIDED_ROW, _CLONE_ROW
    _AS_STRIDED_ROW, _CLONE_ROW = as_strided, clone


def apply(row, inputs, args=(), inplace=None):
    """Apply `row` to `inputs` (Tensors, or numbers where the row allows) and the non-tensor
    `args` (in the order of the forward's parameters after the inputs).

    Returns the output Tensor; a tuple for rows with several outputs (those that are not
    floating point, such as indices, never require grad); or `inputs[0]`, written in place,
    when `inplace` names the in-place op (e.g. "add_"). A broadcasting binary row returns
    NotImplemented when the second operand is neither a Tensor nor a number (so Python's
    operator protocol answers "unsupported operand type(s)", as PyTorch does).
    """
    __tracebackhide__ = True
    path = row.path
    if path == PATH_VIEW and inplace is None:  # (no arithmetic: numpy's error state untouched)
        return _apply_view(row, inputs[0], args)
    token = _quiet()  # NaN and Inf are values: no numpy warning reaches the user
    try:
        if path == PATH_BINARY and inplace is None:
            # two broadcasting operands, the second maybe a Python number, with PyTorch's
            # promotion (the general path below does not broadcast or promote)
            a, b = inputs
            ad = a._data
            if isinstance(b, Tensor):
                bd = b._data
                if ad.dtype is not bd.dtype:
                    ad, bd = _coerce(ad, bd)
                try:
                    out = row.fwd(ad, bd, *args)
                except ValueError:
                    raise _broadcast_error(ad.shape, bd.shape) from None
                except TypeError:  # a host and a device array (cupy refuses to mix them)
                    if type(ad) is not type(bd):
                        raise _device_error(ad, bd) from None
                    raise
                if type(out) is not _ND:
                    out = _arr(out)
                r = _fresh(out)
                if _GRAD.enabled:
                    ra, rb = a._requires_grad, b._requires_grad
                    if ra or rb:
                        meta = None
                        if ad.shape != out.shape or bd.shape != out.shape or a._data.dtype is not \
                                out.dtype or b._data.dtype is not out.dtype:
                            meta = _meta_for(inputs, out)
                        where = _cached_site_at(_getframe(2)) if _PROV[0] else None
                        _record(row, (r,), inputs, args, ra | (rb << 1), meta,
                                (_edge(a, where) if ra else _NONE_EDGE,
                                 _edge(b, where) if rb else _NONE_EDGE), None, None, where)
                return r
            tb = type(b)
            dt = ad.dtype
            bd = b
            if tb is float:
                if dt is _F32 or dt is _F64:
                    if row.scalar_as_0d and type(ad) is _ND and (not args or args[0] == 1):
                        bd = (_ZD32 if dt is _F32 else _ZD64).get(b)
                        if bd is None:
                            bd = _zero_d(b, dt)
                elif dt.kind != "f":
                    ad = ad.astype(dtypes.default_np())
            elif tb is not int or dt.kind == "b":
                if not isinstance(b, (int, float, np.generic)):
                    return NotImplemented  # Python: "unsupported operand type(s)", as torch
                ad, bd = _coerce(ad, b)
            try:
                out = row.fwd(ad, bd, *args)
            except OverflowError:  # an int out of an integer dtype's range: torch wraps it
                ad, bd = _coerce(ad, b)
                out = row.fwd(ad, bd, *args)
            if type(out) is not _ND:
                out = _arr(out)
            r = _fresh(out)
            if a._requires_grad and _GRAD.enabled:
                where = _cached_site_at(_getframe(2)) if _PROV[0] else None
                fn = a._grad_fn if a._view is None and _FAST else None
                _record(row, (r,), inputs, args, 1,
                        _meta_for((a,), out) if a._data.dtype is not out.dtype else None,
                        ((fn, a._output_nr) if fn is not None else _edge(a, where), _NONE_EDGE),
                        None, None, where)
            return r
        if inplace is not None:
            return _apply_inplace(row, inputs, args, inplace)
        if path == PATH_UNARY and not GENERAL_PATH:
            # one tensor input: the general path below, written out without its loops and
            # checks (NBGRAD_GENERAL_PATH=1 runs the general path alone)
            x = inputs[0]
            d = x._data
            if row.float_op and d.dtype.kind != "f":
                d = d.astype(dtypes.default_np())
            out = row.fwd(d, *args)
            ctx = None
            if row.ctx:
                out, ctx = out
            if type(out) is not _ND:
                out = _arr(out)
            r = _fresh(out)
            if x._requires_grad and _GRAD.enabled:
                _record(row, (r,), inputs, args, 1, None, None, None, ctx,
                        _cached_site_at(_getframe(2)) if _PROV[0] else None)
            return r
        arrays = []
        for x in inputs:
            arrays.append(x._data if isinstance(x, Tensor) else x)
        if row.float_op and arrays[0].dtype.kind != "f":
            arrays[0] = arrays[0].astype(dtypes.default_np())
        out = row.fwd(arrays, *args) if row.listed else row.fwd(*arrays, *args)
        ctx = None
        if row.ctx:
            out, ctx = out
        if row.n_out == 1:
            if type(out) is not _ND:
                out = _arr(out)
            r = _fresh(out)
            if _GRAD.enabled:
                mask = _mask(inputs)
                if mask:
                    _record(row, (r,), inputs, args, mask, _meta(row, inputs, out), ctx=ctx,
                            where=_cached_site_at(_getframe(2)) if _PROV[0] else None)
            return r
        outs = tuple(_fresh(_arr(o)) for o in out)
        if _GRAD.enabled:
            mask = _mask(inputs)
            if mask:
                # (a broadcasting row's outputs have the broadcast shape: _prelu_kernel_backward)
                _record(row, outs, inputs, args, mask, _meta(row, inputs, outs[0]._data),
                        ctx=ctx, where=_site_at(_getframe(2)) if _PROV[0] else None)
                for o in outs:
                    if o._data.dtype.kind not in "fc":
                        o._requires_grad = False
                        o._grad_fn = None
        return outs
    finally:
        _loud(token)


# A Python float meeting a float32/float64 numpy array: numpy takes ~0.2 us longer for the weak
# scalar than for a 0-d array of the array's dtype, with the same result (NEP 50 casts the float
# to that dtype first; cupy arrays keep the float). Rows flagged `scalar_as_0d` compute one ufunc
# of the two operands (alpha 1), so they get a cached 0-d array instead; 0.0 and -0.0 (equal
# keys) and NaN (never equal) are not cached.
_ZD32, _ZD64 = {}, {}
_ZERO_D = {_F32: _ZD32, _F64: _ZD64}


def _zero_d(b, dt):
    """`b` as a read-only 0-d array of dtype `dt` (float32/float64; b itself otherwise)."""
    cache = _ZERO_D.get(dt)
    if cache is None or not b:
        return b
    z = cache.get(b)
    if z is None:
        if len(cache) >= 4096:
            cache.clear()
        z = np.array(b, dt)
        z.flags.writeable = False
        if b == b:
            cache[b] = z
    return z


def _broadcast_error(sa, sb):
    n = max(len(sa), len(sb))
    for i in range(1, n + 1):
        x = sa[-i] if i <= len(sa) else 1
        y = sb[-i] if i <= len(sb) else 1
        if x != y and x != 1 and y != 1:
            return RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                                f"at non-singleton dimension {n - i}")
    return RuntimeError(f"shapes {list(sa)} and {list(sb)} cannot be broadcast together")


def _device_error(a, b):
    da, db = backend.device_of(a), backend.device_of(b)
    return RuntimeError("Expected all tensors to be on the same device, but found at least two "
                        f"devices, {da if da.type == 'cuda' else db} and cpu!")


def _scalar(b):
    t = type(b)
    if t is float or t is int or t is bool:
        return b
    if isinstance(b, np.generic):
        return b.item()
    if isinstance(b, (int, float)):
        return b
    raise TypeError(f"unsupported operand type: expected a Tensor or a Python number, got "
                    f"{t.__name__}")


def _coerce(ad, bd):
    """Both operands in their PyTorch result type (dtypes.promote) before numpy sees them (NEP 50
    differs for int-with-float, for 0-d tensors and for numbers out of an integer type's range)."""
    if isinstance(bd, _ND) or hasattr(bd, "__cuda_array_interface__"):
        if type(ad) is not type(bd):
            raise _device_error(ad, bd)
        return dtypes.promote_arrays(ad, bd)
    else:
        _scalar(bd)  # (a TypeError for what is neither a Tensor nor a number)
    return dtypes.promote(ad, bd)[0]


def make_as_strided_node(base, view):
    """AsStridedBackward0 from `view` to `base`'s current grad_fn (regenerated view grad_fn)."""
    return _record(_AS_STRIDED_ROW, (), (base,), (_geom(base), _geom(view), None), 1)


def _apply_inplace(row, inputs, args, op_name):
    """Apply `row` to `inputs` and write the result into `t = inputs[0]`: bump its version by
    one and, in grad mode, rebase its history (CopySlices on the base when t is a view)."""
    __tracebackhide__ = True
    t = inputs[0]
    uf = row.inplace_ufunc
    if uf is not None and _ufunc_inplace(uf, t, inputs[1], args):
        t._storage.bump(op_name)
        return t
    others = inputs[1:]
    mask = 0
    edges = self_copy = None
    if _GRAD.enabled:
        mask = _mask(inputs)
        check_inplace(t, op_name, mask > 1)
        if mask:
            edges = tuple(map(_edge, inputs))
            plan = row.plan(mask)
            if any(e[1:3] == (SAVED_INPUT, 0) for e in plan):  # backward needs the old value
                if t._requires_grad and not isinstance(edges[0][0], _AccumulateGrad):
                    self_copy = apply(_CLONE_ROW, (t,), (False,))
                else:
                    old = t._data.copy()
                    self_copy = Tensor._make(old, Storage(old), None, edges[0][1],
                                             t._requires_grad)
    d = t._data
    same = False  # copy_ from the very same elements returns early in PyTorch (no checks)
    for x in others:  # (fill_ reads its 0-d value before writing)
        if isinstance(x, Tensor) and x._storage is t._storage and op_name != "fill_":
            if row.overlap_check == "any":  # refuses the very same elements too (index_put_)
                if not _masked_fill_put(x, args):
                    _check_overlap(d, x._data, False)
            elif x._data is not d:
                same = row.overlap_check == "same_is_noop" and _same_data(d, x._data)
                if not same:
                    _check_overlap(d, x._data)
    arrays = [d]
    for x in others:
        arrays.append(x._data if isinstance(x, Tensor) else x)
    if len(arrays) == 2 and row.broadcast:
        arrays = list(_coerce(d, arrays[1]))
        if arrays[0].dtype != d.dtype and not dtypes.can_cast(arrays[0].dtype, d.dtype):
            raise _cast_error(arrays[0].dtype, d.dtype)  # (the promoted type, as torch names)
    try:
        res = row.fwd(*arrays, *args)
    except ValueError:
        raise _broadcast_error(d.shape, getattr(arrays[-1], "shape", ())) from None
    res = _arr(res)
    if res.shape != d.shape:
        raise RuntimeError(f"output with shape {list(d.shape)} doesn't match the broadcast shape "
                           f"{list(res.shape)}")
    if res.dtype != d.dtype and not dtypes.can_cast(res.dtype, d.dtype):
        raise _cast_error(res.dtype, d.dtype)
    if not same:
        _write(t, d, res, row.unchecked_write)
    t._storage.bump(op_name)
    if mask:
        meta = _meta_for(inputs, d) if row.broadcast else None
        _rebase(row, t, inputs, args, mask, edges, self_copy, meta)
    return t


def _rebase(row, t, inputs, args, mask, edges, self_copy, meta):
    saved_from = None if self_copy is None else (self_copy,) + inputs[1:]
    v = t._view
    if v is None:
        node = _record(row, (t,), inputs, args, mask, meta, edges, saved_from)
        _saved_before_write(node, t)
        _move_retain_grad(t)
        wake_views(t)
        return
    base = v.base
    base_edge = _edge(base)
    fn = _record(row, (t,), inputs, args, mask, meta, edges, saved_from)
    _saved_before_write(fn, t)
    base._grad_fn = CopySlices(base_edge, fn, _geom(base), _geom(t))
    base._output_nr = 0
    base._requires_grad = True
    _move_retain_grad(base)
    wake_views(base)
    t._grad_fn = make_as_strided_node(base, t)
    for s in fn._saved or ():  # PyTorch's version error names this node while it lives
        if type(s) is SavedTensor and s.is_output:
            s._view_node = weakref.ref(t._grad_fn)
    t._output_nr = 0
    t._requires_grad = True
    v.version = t._storage.version
    _move_retain_grad(t)

