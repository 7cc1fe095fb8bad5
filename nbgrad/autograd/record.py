"""What recording a node takes, below `apply`: the edges to the inputs' nodes (`_edge`), what
the row's formulas will read, saved once per combination of inputs that require grad
(`row.savers[mask]`, built by `_saver` from `row.plan(mask)`), the broadcast meta, and the node
itself (`_record`). The saved kinds (`SAVED_INPUT`, ...) name what `Row.sources` holds."""
from __future__ import annotations

import weakref

import numpy as np

from ..tensor import Tensor, strides_of
from ..naming import node_class
from .graph import Ctx as _Ctx
from .graph import (_INFERENCE_SAVE, _SAVED_HOOKS, _SUFFIX, HERE, Node, SavedTensor, saved_arg)
from .grad_mode import GENERAL_PATH
from .. import provenance
from . import anomaly
from .saved_index import SavedIndex, SavedIndices

_new = object.__new__
_NONE_EDGE = (None, 0)
_ND = np.ndarray
_init_node = Node.__init__
_NODES = provenance.NODES  # (Node.__init__'s sequence counter)
_ANOMALY = anomaly.STATE
_FAST = not GENERAL_PATH  # the written-out steps of _record (NBGRAD_GENERAL_PATH=1: off)


# What a row saves for its formulas, by kind (`Row.sources`: `(kind, k)` per saved name), plain
# ints as apply.py's PATH_* for the same reason (the savers compare them on every recorded op).
SAVED_INPUT = 0    # an input (k: its position): a SavedTensor, or a Python number as given
SAVED_OUTPUT = 1   # an output (k: which): a SavedTensor that knows it is its node's output
SAVED_ARG = 2      # a non-tensor argument of the forward (k: its position), kept as given
SAVED_SHAPE = 3    # an input's shape (`self_shape`)
SAVED_CTX = 4      # the kernel's state (`ctx`), kept in a Ctx
SAVED_STRIDES = 5  # an input's strides, in elements (`self_strides`)


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
        # (one input: no comprehension, which is a function call of its own in CPython 3.11)
        if len(inputs) == 1:
            x = inputs[0]
            fn = x._grad_fn if type(x) is Tensor and x._view is None and _FAST else None
            # (_edge below, written out for an input an op made: most ops take one)
            edges = ((fn, x._output_nr),) if fn is not None else (_edge(x, where),)
        else:
            edges = tuple([_edge(x, where) for x in inputs])
    node = _new(row.node if row.n_out != -1 else _node_for(row, len(outs)))
    if meta is None and where is not HERE and _FAST and not _ANOMALY.enabled:
        # Node.__init__ below, written out for the case of every table op without
        # broadcasting (no frame walk, no _Rare, no anomaly record): one call less per op
        node._next = edges
        node._saved = saved
        node._site = where
        _NODES[0] = node._seq = _NODES[0] + 1
    else:
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


def _saved_tensor(name, t, is_output=False):
    """`SavedTensor(name, t, is_output)` as the savers below make it: they serve only while no
    saved_tensors_hooks are set, so the constructor's hook branch is left out, and so is
    type.__call__ (a recorded op saves one or two; NBGRAD_GENERAL_PATH=1: the constructor)."""
    st = t._storage
    if st.inference:
        raise RuntimeError(_INFERENCE_SAVE)
    s = _new(SavedTensor)
    s.name = name
    s._data = t._data
    s._storage = st
    s.saved_version = st.version
    s.is_output = is_output
    s._output_nr = t._output_nr
    s._tensor = None if is_output else t
    s._view_node = s._packed = None
    return s


_ST = _saved_tensor if _FAST else SavedTensor


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
                v = args[k]
                return before + (v if type(v) in _PLAIN else _kept(v, name),) + after
        elif kind == SAVED_INPUT:
            def save(row, src, args, outs, ctx):
                x = src[k]
                # a Python number PyTorch would wrap as a tensor is kept as is:
                # OpNode._release turns it into FREED
                return before + (_ST(name, x) if isinstance(x, Tensor) else x,) + after
        elif kind == SAVED_OUTPUT:
            def save(row, src, args, outs, ctx):
                o = outs[k]
                o._output_nr = k
                return before + (_ST(name, o, True),) + after
        else:
            def save(row, src, args, outs, ctx):
                return before + (tuple(src[k]._data.shape),) + after
    elif all(p[1] in (SAVED_ARG, SAVED_SHAPE, SAVED_STRIDES) for p in plan):
        # arguments and layouts only (transpose's dims)
        spec = tuple(plan)

        def save(row, src, args, outs, ctx):
            saved = [None] * n
            for j, kind, k, name in spec:
                saved[j] = _kept(args[k], name) if kind == SAVED_ARG else \
                    tuple(src[k]._data.shape) if kind == SAVED_SHAPE else strides_of(src[k]._data)
            return tuple(saved)
    elif all(p[1] in (SAVED_INPUT, SAVED_STRIDES) for p in plan):  # inputs and strides (mm's)
        spec = tuple(plan)

        def save(row, src, args, outs, ctx):
            saved = [None] * n
            for j, kind, k, name in spec:
                x = src[k]
                saved[j] = strides_of(x._data) if kind == SAVED_STRIDES else \
                    _ST(name, x) if isinstance(x, Tensor) else x
            return tuple(saved)
    else:
        def save(row, src, args, outs, ctx):
            return _save(row, plan, src, args, outs, ctx)
    row.savers[mask] = save
    return save

_PLAIN = frozenset((int, float, bool, type(None), slice, str, type(Ellipsis)))
_OWNERS = []  # weak references to the index tensors last passed by index_arg, newest last
_ref = weakref.ref


def index_arg(t):
    """The array of index or mask tensor `t`, to pass to a row as an argument: remembered (by
    a weak reference) so that a node saving that very array saves `t` with its version
    (SavedIndex), as PyTorch saves the tensor, instead of a copy."""
    d = t._data
    owners = _OWNERS
    owners.append(_ref(t))
    if len(owners) > 4:
        del owners[0]
    return d


def _kept(v, name="index"):
    """A saved argument. An index or mask array passed by index_arg: its tensor with its
    version (SavedIndex; a tuple holding some: SavedIndices); another array (one the public
    function computed) as a copy, which no later write can reach."""
    t = type(v)
    if t in _PLAIN:
        return v
    if t is tuple:
        for i in v:
            if type(i) not in _PLAIN:
                items = tuple([_kept(i, name) for i in v])
                for i in items:
                    if type(i) is SavedIndex:
                        return SavedIndices(items)
                return items
        return v
    if t is np.ndarray or hasattr(v, "__cuda_array_interface__"):
        for r in reversed(_OWNERS):
            o = r()
            if o is not None and o._data is v and not o._requires_grad:
                return SavedIndex(name, o)
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
            saved[j] = _kept(args[k], name) if not _SAVED_HOOKS else saved_arg(
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
