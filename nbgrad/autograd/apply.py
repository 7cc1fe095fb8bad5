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
from ..tensor import (DEFAULT, INFERENCE, MULTI_OUTPUT, NO_GRAD_MODE, Tensor, _ViewMeta,
                      is_dense, strides_of, wake_views)
from .. import provenance
from ..naming import cpp, node_class
from .grad_mode import GENERAL_PATH
from .grad_mode import STATE as _GRAD
from .graph import AccumulateGrad as _AccumulateGrad
from .graph import Ctx as _Ctx
from .graph import (_SAVED_HOOKS, _SUFFIX, HERE, Node, SavedTensor, saved_arg,
                    backward_twice_error)

_new = object.__new__
_NONE_EDGE = (None, 0)

# Which branch of `apply` serves a row (`Row.path`, decided once per row). Plain module-level
# ints, as the saved kinds below: `apply` compares the path first thing on every call, and an
# IntEnum member compares slower than an int (it misses CPython's int fast path).
PATH_UNARY = 0    # one tensor input, one output
PATH_BINARY = 1   # two broadcasting operands (the second maybe a Python number)
PATH_VIEW = 2     # a view, or several (unbind, split)
PATH_GENERAL = 3  # the rest: lists, several outputs, kernels with a ctx
# What a row saves for its formulas, by kind (`Row.sources`: `(kind, k)` per saved name), ints
# for the same reason (the savers compare them on every recorded op).
SAVED_INPUT = 0    # an input (k: its position): a SavedTensor, or a Python number as given
SAVED_OUTPUT = 1   # an output (k: which): a SavedTensor that knows it is its node's output
SAVED_ARG = 2      # a non-tensor argument of the forward (k: its position), kept as given
SAVED_SHAPE = 3    # an input's shape (`self_shape`)
SAVED_CTX = 4      # the kernel's state (`ctx`), kept in a Ctx
SAVED_STRIDES = 5  # an input's strides, in elements (`self_strides`)
_fresh = Tensor._make_fresh
_ND = np.ndarray
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_quiet, _loud = backend.quiet, backend.loud
_init_node = Node.__init__
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
    token = _quiet()  # NaN and Inf are values: no numpy warning reaches the user
    try:
        path = row.path
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
                                 _edge(b, where) if rb else _NONE_EDGE), where=where)
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
                _record(row, (r,), inputs, args, 1,
                        _meta_for((a,), out) if a._data.dtype is not out.dtype else None,
                        (_edge(a, where), _NONE_EDGE), where=where)
            return r
        if inplace is not None:
            return _apply_inplace(row, inputs, args, inplace)
        if path == PATH_VIEW:
            return _apply_view(row, inputs[0], args)
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
                _record(row, outs, inputs, args, mask, ctx=ctx,
                        where=_site_at(_getframe(2)) if _PROV[0] else None)
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


def _strip(name):
    """A node's name as PyTorch's view error texts give it: SqueezeBackward1 -> Squeeze1."""
    return _SUFFIX.sub(lambda m: m.group(1) or "", name)


def _meta(row, inputs, out):
    """Per input, what its gradient must be reduced and cast to (broadcasting rows only)."""
    if not row.broadcast:
        return None
    for x in inputs:
        if isinstance(x, Tensor):
            d = x._data
            if d.shape != out.shape or d.dtype is not out.dtype:
                return _meta_for(inputs, out)
    return None


def _arr(x):
    """numpy returns scalars for 0-d results; tensors always hold arrays."""
    if type(x) is _ND:
        return x
    if isinstance(x, (np.generic, int, float, bool)):
        return np.asarray(x)
    return x


def _geom(t):
    """(shape, strides, offset) of a tensor in elements, relative to its storage."""
    return (tuple(t._data.shape), t.stride(), t.storage_offset())


def positions(geom):
    """Storage positions (int64, shaped like the tensor) of a (shape, strides, offset) layout."""
    shape, strides, off = geom
    pos = np.full(tuple(shape), off, np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        pos += (np.arange(n) * s).reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos


def _edge(x, where=HERE):
    """(node, input_nr) through which a gradient reaches `x` (None for constants); `where`:
    the user's line of the op asking, for a leaf's AccumulateGrad made now."""
    if not isinstance(x, Tensor) or not x._requires_grad:
        return _NONE_EDGE
    fn = x._grad_fn
    v = x._view
    if v is not None:
        fn = x.grad_fn  # (regenerated when the base was modified in place since)
        if fn is None and v.base._requires_grad and not v.own:
            return _NONE_EDGE  # a view made under no_grad (PyTorch: no grad accumulator)
    if fn is not None:
        return (fn, x._output_nr)
    e = x._extra
    if e is not None and e.accum is not None:
        acc = e.accum()
        if acc is not None:
            return (acc, 0)
    return (x._grad_accumulator(where), 0)


def _record(row, outs, inputs, args, mask, meta=None, edges=None, saved_from=None, ctx=None,
           where=HERE):
    """Make the node of `row` for `inputs` and hang `outs` on it; the node saves what the
    formulas of the inputs in bitmask `mask` need (taken from `saved_from` instead of `inputs`
    for an in-place op whose `self` was copied before the write). `where`: the user's line
    (`apply` finds it from its entry point's frame; by default the frames are walked)."""
    if _SAVED_HOOKS:
        plan = row.plan(mask)
        if plan:
            # pack hooks see the outputs with their grad_fn, as PyTorch's (its node exists first)
            node = _new(row.node if row.n_out != -1 else _node_for(row, len(outs)))
            _init_node(node, tuple(map(_edge, inputs)) if edges is None else edges, None, meta,
                       where)
            for nr, o in enumerate(outs):
                o._output_nr, o._requires_grad, o._grad_fn = nr, True, node
                if o._data.dtype.kind not in "fc":  # (an index output: apply unhooks it after)
                    o._requires_grad, o._grad_fn = False, None
            node._saved = _save(row, plan, inputs if saved_from is None else saved_from, args,
                                outs, ctx)
            return node
        saved = None
    else:
        save = row.savers.get(mask)
        if save is None:
            save = _saver(row, mask)
        saved = save(row, inputs if saved_from is None else saved_from, args, outs, ctx)
    if edges is None:
        edges = tuple([_edge(x, where) for x in inputs])
    node = _new(row.node if row.n_out != -1 else _node_for(row, len(outs)))
    _init_node(node, edges, saved, meta, where)  # Node.__init__, without type.__call__'s
    if len(outs) == 1:
        o = outs[0]
        o._output_nr = 0
        o._requires_grad = True
        o._grad_fn = node
        return node
    nr = 0
    for o in outs:
        o._output_nr = nr
        o._requires_grad = True
        o._grad_fn = node
        nr += 1
    return node


def _nothing(row, src, args, outs, ctx):
    return None


def _saver(row, mask):
    """The function that makes the saved tuple of `row`'s node when the inputs in `mask`
    require grad, decided once per row and mask (`row.savers`): one value saved, as most rows
    save, or only arguments and shapes, is written out; the rest goes through `_save` (and
    everything under saved_tensors_hooks, in `_record`)."""
    plan = row.plan(mask)
    n = len(row.sources)
    if not plan:
        save = _nothing
    elif len(plan) == 1 and plan[0][1] in (SAVED_INPUT, SAVED_OUTPUT, SAVED_ARG, SAVED_SHAPE):
        j, kind, k, name = plan[0]
        before, after = (None,) * j, (None,) * (n - j - 1)
        if kind == SAVED_ARG:  # an argument (add's alpha, softmax's dim): kept as given
            def save(row, src, args, outs, ctx):
                return before + (_kept(args[k]),) + after
        elif kind == SAVED_INPUT:
            def save(row, src, args, outs, ctx):
                x = src[k]
                # a Python number PyTorch would wrap as a tensor is kept as is:
                # OpNode._release turns it into FREED
                return before + (SavedTensor(name, x) if isinstance(x, Tensor) else x,) + after
        elif kind == SAVED_OUTPUT:
            def save(row, src, args, outs, ctx):
                o = outs[k]
                o._output_nr = k
                return before + (SavedTensor(name, o, True),) + after
        else:
            def save(row, src, args, outs, ctx):
                return before + (tuple(src[k]._data.shape),) + after
    elif all(p[1] in (SAVED_ARG, SAVED_SHAPE, SAVED_STRIDES) for p in plan):
        # arguments and layouts only (transpose's dims)
        spec = tuple((j, kind, k) for j, kind, k, _ in plan)

        def save(row, src, args, outs, ctx):
            saved = [None] * n
            for j, kind, k in spec:
                saved[j] = _kept(args[k]) if kind == SAVED_ARG else tuple(src[k]._data.shape) \
                    if kind == SAVED_SHAPE else strides_of(src[k]._data)
            return tuple(saved)
    elif all(p[1] in (SAVED_INPUT, SAVED_STRIDES) for p in plan):  # inputs and strides (mm's)
        spec = tuple(plan)

        def save(row, src, args, outs, ctx):
            saved = [None] * n
            for j, kind, k, name in spec:
                x = src[k]
                saved[j] = strides_of(x._data) if kind == SAVED_STRIDES else \
                    SavedTensor(name, x) if isinstance(x, Tensor) else x
            return tuple(saved)
    else:
        def save(row, src, args, outs, ctx):
            return _save(row, plan, src, args, outs, ctx)
    row.savers[mask] = save
    return save


_PLAIN = frozenset((int, float, bool, type(None), slice, str, type(Ellipsis)))


def _kept(v):
    """A saved argument; an index or mask array as a copy: it is usually a tensor's memory
    (gather's index, a mask), which a later in-place write would change under the node, with
    no version to tell (PyTorch saves these as tensors and checks their version)."""
    t = type(v)
    if t in _PLAIN:
        return v
    if t is tuple:
        for i in v:
            if type(i) not in _PLAIN:
                return tuple([_kept(i) for i in v])
        return v
    if t is np.ndarray or hasattr(v, "__cuda_array_interface__"):
        return v.copy()
    return v


def _save(row, plan, src, args, outs, ctx):
    saved = [None] * len(row.sources)
    if _SAVED_HOOKS and row.unpack_order is not None:  # pack in PyTorch's order
        plan = sorted(plan, key=lambda p: row.unpack_order.index(p[0]))
    for j, kind, k, name in plan:
        if kind == SAVED_INPUT:
            x = src[k]
            # a Python number PyTorch would wrap as a tensor is kept as is: OpNode._release
            # turns it into FREED
            saved[j] = SavedTensor(name, x) if isinstance(x, Tensor) else x
        elif kind == SAVED_OUTPUT:  # numbered before it is saved: its SavedTensor keeps it
            outs[k]._output_nr = k
            saved[j] = SavedTensor(name, outs[k], True)
        elif kind == SAVED_ARG:
            # an index or mask array is a tensor PyTorch saves: OpNode._release frees it (and
            # under saved_tensors_hooks it is packed, as PyTorch packs it)
            saved[j] = _kept(args[k]) if not _SAVED_HOOKS else saved_arg(
                name, args[k], row.ctx_saves, src, args)
        elif kind == SAVED_SHAPE:
            saved[j] = tuple(src[k]._data.shape)
        elif kind == SAVED_STRIDES:
            saved[j] = strides_of(src[k]._data)
        else:
            saved[j] = _Ctx(ctx)
    return tuple(saved)


def _node_for(row, n):
    """The node class of a row with a number of outputs decided at call time (unbind, split)."""
    cache = row.__dict__.setdefault("_by_n", {})
    cls = cache.get(n)
    if cls is None:
        cls = cache[n] = node_class(type(row.node.__name__, (row.node,),
                                         {"__slots__": (), "_n_out": n}))
    return cls


def _mask(inputs):
    mask = 0
    bit = 1
    for x in inputs:
        if isinstance(x, Tensor) and x._requires_grad:
            mask |= bit
        bit <<= 1
    return mask


def _meta_for(inputs, out):
    """Per input, (shape, dtype) to reduce and cast its gradient to, or None when it matches.

    When the inputs' dtypes differ, every input records its dtype: a formula mixing them (g *
    other) may come out in the wider one."""
    meta = None
    shape, dt = out.shape, out.dtype
    first = mixed = None
    for x in inputs:
        if isinstance(x, Tensor):
            if first is None:
                first = x._data.dtype
            elif x._data.dtype != first:
                mixed = True
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            d = x._data
            if d.shape != shape or d.dtype != dt or mixed:
                if meta is None:
                    meta = [None] * len(inputs)
                meta[i] = (tuple(d.shape), d.dtype if (d.dtype != dt or mixed) else None)
    return meta


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


def _view_of(x, out, creation=DEFAULT, creator=None):
    """A tensor viewing `x`'s storage through the array `out`."""
    r = _new(Tensor)
    r._data = out
    r._storage_or_nbytes = x._storage
    r._grad_fn = None
    r._output_nr = 0
    r._requires_grad = False
    r._grad = r._extra = None
    xv = x._view
    if xv is not None and creation == DEFAULT and xv.creation != DEFAULT:
        creation = xv.creation  # a view of a no_grad or multi-output view inherits it (torch)
    base = xv.base if xv is not None else x
    r._view = _ViewMeta(base, x._storage.version, creation, creator)
    if not base._requires_grad:  # it may come to require grad: remember the view (wake_views)
        st = x._storage
        vs = st._views
        if vs is None:
            st._views = [weakref.ref(r)]
        else:
            if len(vs) >= 64 and len(vs) & (len(vs) - 1) == 0:  # drop dead ones now and then
                vs[:] = [w for w in vs if w() is not None]
            vs.append(weakref.ref(r))
    return r




def make_as_strided_node(base, view):
    """AsStridedBackward0 from `view` to `base`'s current grad_fn (regenerated view grad_fn)."""
    return _record(_AS_STRIDED_ROW, (), (base,), (_geom(base), _geom(view), None), 1)


# ---- in-place ----------------------------------------------------------------------------------
_LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
_VIEW_LEAF_INPLACE = ("a view of a leaf Variable that requires grad is being used in an in-place "
                      "operation.")
_MULTI_VIEW = (" This view is the output of a function that returns multiple views. Such "
               "functions do not allow the output views to be modified inplace. You should "
               "replace the inplace operation by an out-of-place one.")
_NO_GRAD_AMBIGUOUS = (
    " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
    "code by moving both the view and the inplace either both inside the no_grad block (if you "
    "don't want the inplace to be tracked) or both outside (if you want the inplace to be "
    "tracked).")


def view_modified_text(t, itself):
    """PyTorch's text for a view made under no_grad, or one of several views (split, unbind),
    that is modified in place (`itself`) or whose base was (found when the view is next used)."""
    obj = "is being" if itself else "its base or another view of its base has been"
    v = t._view
    if v.creation == MULTI_OUTPUT and t._grad_fn is not None:
        creator = v.creator or _strip(t._grad_fn.name())  # (a view of one: its own node)
        return f"Output {t._output_nr} of {creator} is a view and {obj} modified inplace." + \
            _MULTI_VIEW
    if v.creation in (NO_GRAD_MODE, INFERENCE) and t._grad_fn is not None:  # a view of such a view
        who = f"Output {t._output_nr} of {_strip(t._grad_fn.name())} is a view of a view which was"
    else:
        who = "A view was"
    if v.creation == INFERENCE:
        return f"{who} created in inference mode and {obj} modified inplace in normal mode." + \
            _NO_GRAD_AMBIGUOUS.replace("no_grad block", "inference_mode block")
    msg = f"{who} created in no_grad mode and {obj} modified inplace with grad mode enabled."
    return msg + (_MULTI_VIEW if v.creation == MULTI_OUTPUT else _NO_GRAD_AMBIGUOUS)


def _inplace_error(msg, kind, t, op_name):
    err = RuntimeError(msg)
    err.nbgrad_context = {"kind": kind, "op": op_name, "shape": tuple(t._data.shape),
                          "where": provenance.Location.of(provenance.capture())}
    return err


def check_inplace(t, op_name="inplace", others_require=False):
    """Raise PyTorch's error when modifying `t` in place is forbidden in grad mode
    (`others_require`: another operand requires grad, so the result will)."""
    __tracebackhide__ = True
    v = t._view
    if v is None:
        if t._requires_grad and t._grad_fn is None:
            raise _inplace_error(_LEAF_INPLACE, "leaf_inplace", t, op_name)
        return
    base = v.base
    if v.creation == MULTI_OUTPUT and (t._requires_grad or others_require):
        raise _inplace_error(view_modified_text(t, True), "multi_output_view_inplace", t, op_name)
    if (v.creation == NO_GRAD_MODE or v.creation == INFERENCE) and \
            (t._requires_grad or others_require):
        raise _inplace_error(view_modified_text(t, True), "no_grad_view_inplace", t, op_name)
    if t._requires_grad and base._grad_fn is None:  # (torch: requires_grad and base is a leaf)
        raise _inplace_error(_VIEW_LEAF_INPLACE, "view_of_leaf_inplace", t, op_name)
    if t._requires_grad and t._grad_fn is None:
        # a view of a base that came to require grad, its grad_fn not regenerated yet: PyTorch
        # reads the stale field and calls it a leaf
        raise _inplace_error(_LEAF_INPLACE, "leaf_inplace", t, op_name)


def _bounds(a):
    """[low, high) byte addresses an array's elements span."""
    lo = hi = backend.data_ptr(a)
    for n, st in zip(a.shape, a.strides):
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return lo, hi + a.itemsize


def _check_overlap(d, s, full_ok=True):
    """PyTorch refuses an in-place op whose operand partly overlaps the written-to tensor: both
    dense, their memory overlaps and they are not the very same elements (torch's
    get_overlap_status: operands it cannot judge simply, strided or expanded, pass). With
    `full_ok=False` (index_put_'s values) the very same elements are refused too."""
    if d.size == 0 or s.size == 0 or not is_dense(d) or not is_dense(s):
        return
    lo_d, hi_d = _bounds(d)
    lo_s, hi_s = _bounds(s)
    if full_ok and lo_d == lo_s and hi_d == hi_s and d.strides == s.strides:
        return  # the very same elements (x.add_(x), x[None] = x: torch compares strides)
    if lo_d < hi_s and lo_s < hi_d:
        raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                           "written-to tensor refer to a single memory location. Please clone() "
                           "the tensor before performing the operation.")


def _masked_fill_put(value, args):
    """index_put_ of one value through one bool mask: PyTorch runs masked_fill_ with the value
    read first, without the overlap check."""
    index, accumulate = args
    arrays = [i for i in index if hasattr(i, "dtype")]
    return not accumulate and value._data.size == 1 and len(arrays) == 1 and \
        arrays[0].dtype.kind in "bu"


def _same_data(a, b):
    return a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype and \
        backend.data_ptr(a) == backend.data_ptr(b)


def _cast_error(src, dst):
    return RuntimeError(f"result type {_np_name(src)} can't be cast to the desired output type "
                        f"{_np_name(dst)}")


def _np_name(dt):
    return dtypes.from_np(dt)._tensor_name[:-6]  # torch's ScalarType name: Float, Char, ...



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


def _ufunc_inplace(uf, t, other, args):
    """`t op= other` by `uf(d, other, out=d)`, when that is the out-of-place result written back:
    nothing to record (no operand requires grad, or grad mode is off), a float numpy target
    without stride-0 dims, `other` a Python number or a tensor of the same dtype on another
    storage. False (nothing written) otherwise, or when numpy refuses (shapes, a read-only
    target): the general path then gives PyTorch's behaviour or error."""
    d = t._data
    if type(d) is not _ND or d.dtype.kind != "f" or 0 in d.strides:
        return False
    if isinstance(other, Tensor):
        # (a tensor whose storage is not made yet, a byte count, shares memory with no other)
        st = other._storage_or_nbytes
        if type(st) is not int and st is t._storage_or_nbytes or \
                other._data.dtype is not d.dtype or (
                _GRAD.enabled and (t._requires_grad or other._requires_grad)):
            return False
        o = other._data
    elif type(other) is float or type(other) is int:
        if t._requires_grad and _GRAD.enabled:
            return False
        o = other
    else:
        return False
    if args and args[0] != 1:  # add_/sub_'s alpha, applied as the row's forward does
        o = args[0] * o
    try:
        uf(d, o, out=d)
    except ValueError:
        return False
    return True


def _write(t, d, res, unchecked):
    """d[...] = res. PyTorch refuses a target with internal overlap (a dimension of stride 0
    and size > 1: an expand) except for the rows flagged `unchecked_write` (fill_, zero_, ...);
    an expand without one is written (numpy's broadcast views are read-only: write through the
    storage's array instead)."""
    strides = d.strides
    overlap = 0 in strides and _overlapping(d.shape, strides)
    if overlap and not unchecked:
        _write_overlap_error()
    if overlap:  # only the elements the op writes (an unchanged alias must not undo them)
        if not getattr(d.flags, "writeable", True):
            d = backend.as_strided(t._storage._root, *_geom(t))
        changed = ~((res == d) | ((res != res) & (d != d)))
        d[changed] = res[changed]
        return
    try:
        d[...] = res
    except ValueError:
        if getattr(d.flags, "writeable", True):
            raise
        backend.as_strided(t._storage._root, *_geom(t))[...] = res


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


def _saved_before_write(node, t):
    """An operand of the in-place op that is (a view of) its target was saved after the write:
    it holds the new values, so mark it as saved one version earlier — backward then refuses,
    as PyTorch does for y.mul_(y), instead of computing a wrong gradient."""
    for s in node._saved or ():
        if type(s) is SavedTensor and not s.is_output and s._tensor is not None and \
                s._storage is t._storage and s.saved_version == t._storage.version:
            s.saved_version -= 1


def _move_retain_grad(t):
    """retain_grad's hook follows the tensor to its new grad_fn (PyTorch moves it too)."""
    e = t._extra
    if e is not None and e.retains_grad:
        e.retains_grad = False
        t.retain_grad()


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
