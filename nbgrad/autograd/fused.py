"""One node standing for the chain of nodes a PyTorch decomposition records, built when looked at.

`torch.matmul` on batched operands records ExpandBackward0, ViewBackward0 (or
ReshapeAliasBackward0) for each operand, BmmBackward0 and UnsafeViewBackward0; `F.linear` on
(N, *, in) input records TBackward0, ViewBackward0, MmBackward0 and UnsafeViewBackward0. Most of
those nodes only reshape; a transformer records a few hundred of them per step. Here such a call
records one node: an instance of the chain's last class (its name, its saved values), whose
edges go straight to the operands and whose backward runs the chain's formulas one after the
other on arrays (`fast`), with no node, tensor or engine step in between.

The chain itself is built, by running the decomposition again on the same operands
(`replay`), the first time something looks below the node (`next_functions`, a hook on it),
and is used whenever the one-step path does not apply: under create_graph, or when a saved
operand was modified in place (the chain's own node then raises PyTorch's error, naming the
view it saved). The built nodes carry the sequence numbers, the user's line and the saved
versions the unfused call would have given them, so what backward computes and what the graph
shows are the decomposition's.
"""
from __future__ import annotations

from sys import _getframe

import numpy as np

from .. import provenance
from ..naming import node_class
from ..tensor import Tensor
from . import engine
from .anomaly import STATE as _ANOMALY
from .record import _edge, _NONE_EDGE
from .views import _view_of
from .graph import FREED, _NODES, _SAVED_HOOKS, Node, SavedTensor, _Rare, backward_twice_error
from .grad_mode import STATE as _GRAD

_new = object.__new__
_init_node = Node.__init__
_PROV, _cached_site_at = provenance.ENABLED, provenance.cached_site_at


class Chain:
    """What a fused node keeps: `saved` (per operand, its SavedTensor when a formula needs it,
    else None), `fast(node, g, arrays)` -> a gradient per operand, `replay(*inputs, *args)` ->
    the output of the decomposition recorded node by node, the operands (until the node is
    released: then only their layouts, `specs`, so that nothing outlives what the chain would
    have kept) and what `fast` needs (`info`)."""

    __slots__ = ("saved", "fast", "replay", "inputs", "args", "as_recorded", "specs", "info",
                 "released", "guards")

    def __init__(self, saved, fast, replay, inputs, args, info, guards=()):
        self.saved = saved
        self.guards = guards  # SavedIndex of index tensors in `args` (cross_entropy's target)
        self.fast = fast
        self.replay = replay
        self.inputs = inputs
        self.args = args
        # each operand's array and requires_grad when recorded: an in-place op may change
        # either before the chain is built (t.add_(w) makes t require grad)
        self.as_recorded = tuple([(x._data, x._requires_grad) for x in inputs])
        self.specs = None
        self.info = info
        self.released = False


def record(out, node_cls, visible_saved, inputs, saves, k, fast, replay, info, args=(),
           guards=()):
    """Hang on `out` one node of class `node_cls` (a row's node class, e.g. UnsafeViewBackward0)
    standing for a chain of `k` more nodes below it, which `replay(*inputs, *args)` records.
    `saves`: per input, the name of the SavedTensor the chain's formulas need (None when none
    needs it). `guards`: SavedIndex of the index tensors among `args`, checked before either
    backward (the replay would save them as they are then). Called by the public function's
    helper: the user's line is found from there."""
    where = _cached_site_at(_getframe(2)) if _PROV[0] else None
    edges = tuple([_edge(x, where) if x._requires_grad else _NONE_EDGE for x in inputs])
    saved = tuple([None if s is None else SavedTensor(s, x) for s, x in zip(saves, inputs)])
    _NODES[0] += k  # the chain's nodes take the numbers just below the visible one's
    node = _new(fused_class(node_cls))
    node._chain = Chain(saved, fast, replay, inputs, args, info, guards)
    _init_node(node, edges, visible_saved, None, where)
    out._output_nr = 0
    out._requires_grad = True
    out._grad_fn = node
    return node


def usable():
    """Whether a call may record a fused node now (not under anomaly detection, whose
    tracebacks are taken as each node is made, nor saved_tensors_hooks, which see each
    saved view as the chain packs it)."""
    return not _SAVED_HOOKS and not _ANOMALY.enabled


_CLASSES = {}


def fused_class(base):
    """The fused subclass of a row's node class (same name, one more slot)."""
    cls = _CLASSES.get(base)
    if cls is None:
        cls = _CLASSES[base] = node_class(type(base.__name__, (base,), {
            "__slots__": ("_chain",), "__module__": base.__module__,
            "__qualname__": base.__qualname__, "__doc__": base.__doc__,
            "_backward": _fused_backward, "_release": _fused_release,
            "next_functions": property(_next_functions, doc=Node.next_functions.__doc__),
            "register_hook": _materialize_first(base.register_hook),
            "register_prehook": _materialize_first(base.register_prehook),
            "__call__": _materialize_first(base.__call__),
            "_kept_value": _kept_value, "_saved_tensors": _saved_tensors}))
    return cls


def _fused_backward(self, g, create_graph):
    __tracebackhide__ = True
    c = self._chain
    if c is None:  # built: the visible node is the chain's last, as any other
        return type(self).__mro__[1]._backward(self, g, create_graph)
    if c.released:
        raise backward_twice_error()
    for s in c.guards:  # an index tensor modified in place: PyTorch's error, as its node's
        s.unpack(self)
    arrays = []
    stale = False
    for s in c.saved:
        if s is None:
            arrays.append(None)
            continue
        if s._data is None:
            raise backward_twice_error()
        if s._storage.version != s.saved_version:
            stale = True
        arrays.append(s._data)
    if create_graph or stale or type(g) is not np.ndarray:
        return _chain_backward(self, g, create_graph)
    return c.fast(self, g, arrays)


def _fused_release(self):
    c = self._chain
    if c is None:
        return type(self).__mro__[1]._release(self)
    if not c.released:
        c.released = True
        c.info = None  # (what `fast` kept besides the saved operands: intermediate arrays)
        for s in c.saved:
            if s is not None:
                s.release()
        for s in c.guards:
            s.release()
        # the chain keeps no operand after backward: a later build replays on stand-ins
        c.specs = [(d.shape, d.strides, d.dtype, rg) for d, rg in c.as_recorded]
        c.inputs = c.as_recorded = None


def _next_functions(self):
    c = self._chain
    if c is None:
        return self._next
    top, _ = _build(self)
    if engine.RUNNING[0]:  # (a backward is walking the fused edges: leave them; show the chain)
        return top._next
    self._next, self._saved, self._meta = top._next, top._saved, top._meta
    self._chain = None
    return self._next


def _kept_value(self, name):
    """A saved value (`_saved_mat1`, `_raw_saved_self`, ...): the built chain's."""
    if self._chain is not None and not engine.RUNNING[0]:
        self.next_functions
    return type(self).__mro__[1]._kept_value(self, name)


def _saved_tensors(self):
    self.next_functions
    return Node._saved_tensors(self)


def _materialize_first(method):
    def wrapper(self, *args, **kwargs):
        self.next_functions  # a hook on it sees the chain's gradients
        return method(self, *args, **kwargs)
    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


def _build(node):
    """Replay the decomposition: (its output's node — the visible node's twin, whose edges go
    into the chain —, the chain's nodes). Each built node gets its sequence number, the user's
    line and its saved versions as the unfused call would have given them; edges that left
    the chain go where the fused node's went; released if the fused node was."""
    c = node._chain
    key = _template_key(c)
    if key is not None:
        tpl = _TEMPLATES.get(key)
        if tpl is not None:
            return _from_template(node, tpl)
    prev, prov = _GRAD.enabled, _PROV[0]
    hooks = _SAVED_HOOKS[:]
    _SAVED_HOOKS.clear()
    _GRAD.enabled = True
    _PROV[0] = False  # (each built node gets the fused node's line below: none looked up now)
    try:
        inputs = _as_recorded(c) if c.inputs is not None else [_stand_in(*s) for s in c.specs]
        now = [_edge(x) if x._requires_grad else _NONE_EDGE for x in inputs]
        before = _NODES[0]
        out = c.replay(*inputs, *c.args)
    finally:
        _GRAD.enabled = prev
        _PROV[0] = prov
        _SAVED_HOOKS[:] = hooks
    top = out._grad_fn
    chain = []
    stack = [top]
    seen = {top}
    while stack:
        n = stack.pop()
        for e in n._next:
            m = e[0]
            if m is not None and m not in seen and m._seq > before and \
                    type(m).__name__ != "AccumulateGrad":
                seen.add(m)
                chain.append(m)
                stack.append(m)
    chain.sort(key=lambda n: n._seq)
    first = node._seq - len(chain)
    versions = {s._storage: s.saved_version for s in c.saved if s is not None}
    fused_edges = node._next
    for i, n in enumerate(chain + [top]):
        if n is not top:
            n._seq = first + i
            n._where = node._where
        for s in n._saved or ():
            if type(s) is SavedTensor and s._storage in versions:
                # (and a saved view made at that version: its grad_fn is regenerated, as
                # torch's, if its base was modified since)
                s.saved_version = versions[s._storage]
                t = s._tensor
                if t is not None and t._view is not None:
                    t._view.version = s.saved_version
                    if t._view.base._requires_grad:  # (made before its base came to require
                        t._requires_grad = True      # grad: woken, as wake_views does)
        nxt = list(n._next)
        for j, e in enumerate(nxt):
            if e[0] is not None and e[0] not in seen:
                for k, e_now in enumerate(now):
                    if e_now[0] is e[0] and e_now[1] == e[1]:
                        nxt[j] = fused_edges[k]
                        break
        n._next = tuple(nxt)
        if c.released:
            n._release()
    if key is not None:
        _keep_template(key, top, chain, fused_edges)
    return top, chain


# A released chain is replayed on stand-ins (its operands are gone): what it builds depends only
# on the replay, the operands' layouts and the plain arguments, so the first build of a shape is
# kept as a template and the next chains of that shape are copied from it (a model's 20 Linear
# layers: one replay, 19 copies; the snapshot of each cell asks for every chain's nodes).
_TEMPLATES: dict = {}
_MAX_TEMPLATES = 64
_PLAIN = (int, float, bool, str, type(None))


def _plain(x) -> bool:
    t = type(x)
    return t in _PLAIN or (t is tuple and all(_plain(v) for v in x))


def _template_key(c):
    """The template's key of a released chain (None: built by replay, not kept)."""
    if c.inputs is not None or not c.released or _ANOMALY.enabled or not _plain(c.args):
        return None
    return (c.replay, tuple(c.specs), c.args)


def _keep_template(key, top, chain, fused_edges):
    """What a copy of this released chain needs, read now (the built nodes may get hooks
    later): per node its class, its saved values, its meta and its edges, each edge into the
    chain (its index), into the fused node's edges (the operand's index) or none."""
    index = {n: i for i, n in enumerate(chain)}
    rows = []
    for n in chain + [top]:
        saved = n._saved
        if saved is not None:
            for s in saved:
                if type(s) is SavedTensor:
                    if not s.released or s._view_node is not None:
                        return
                elif not (s is FREED or _plain(s)):
                    return  # (a saved value not known to be inert once released: no template)
        edges = []
        for m, nr in n._next:
            if m is None:
                edges.append((0, None, nr))
            elif m in index:
                edges.append((1, index[m], nr))
            else:
                k = next((k for k, e in enumerate(fused_edges) if e[0] is m and e[1] == nr),
                         None)
                if k is None:
                    return
                edges.append((2, k, nr))
        site = n._site
        if type(site) is _Rare and (site.post or site.pre or site.metadata):
            return
        rows.append((type(n), saved if saved is None else tuple([_copy_saved(s) for s in saved]),
                     n._meta, tuple(edges)))
    if len(_TEMPLATES) >= _MAX_TEMPLATES:
        _TEMPLATES.clear()
    _TEMPLATES[key] = rows


_SAVED_SLOTS = [n for n in SavedTensor.__slots__ if n != "__weakref__"]


def _copy_saved(s):
    if type(s) is not SavedTensor:
        return s
    out = _new(SavedTensor)
    for name in _SAVED_SLOTS:
        v = getattr(s, name, _new)  # (`_unpack_hook` is set only with hooks)
        if v is not _new:
            setattr(out, name, v)
    return out


def _from_template(node, rows):
    """`_build` of a released chain, copied from the template of its shape: the same classes,
    saved values (released), metas and edges; the fused node's line and sequence numbers."""
    where, first = node._where, node._seq - (len(rows) - 1)
    fused_edges = node._next
    made = []
    for i, (cls, saved, meta, _) in enumerate(rows):
        n = _new(cls)
        n._saved = saved if saved is None else tuple([_copy_saved(s) for s in saved])
        n._site = where if meta is None else _Rare(where, meta)
        n._seq = first + i
        made.append(n)
    top = made[-1]
    top._site = None if rows[-1][2] is None else _Rare(None, rows[-1][2])  # (replayed: no line)
    top._seq = node._seq
    for n, (_, _, _, edges) in zip(made, rows):
        n._next = tuple([(None, nr) if kind == 0 else (made[j], nr) if kind == 1
                         else fused_edges[j] for kind, j, nr in edges])
    return top, made[:-1]


def _as_recorded(c):
    """The operands as the call saw them: each one itself, or, where an in-place op changed its
    array or its requires_grad since, a leaf over its storage with the recorded array and flag
    (so the chain has the nodes it had, and its saved views share the operand's version)."""
    out = []
    for x, (d, rg) in zip(c.inputs, c.as_recorded):
        if x._data is d and x._requires_grad is rg:
            out.append(x)
        elif x._view is not None:  # a view of the same base (so the error texts name it
            s = _view_of(x, d)     # as torch's: "output 0 of AsStrided")
            s._requires_grad = rg
            out.append(s)
        else:
            out.append(Tensor._make(d, x._storage, None, 0, rg))
    return out


def _stand_in(shape, strides, dtype, requires_grad):
    """A tensor of zeros laid out as an operand was (for a released chain, whose nodes keep
    only shapes: what they compute from it is never read)."""
    if min(strides, default=0) < 0:
        arr = np.zeros(shape, dtype)
    else:
        size = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) // dtype.itemsize if \
            all(shape) else 0
        arr = np.ndarray(shape, dtype, np.zeros(max(size, 1), dtype), 0, strides)
    t = Tensor._make_fresh(arr)
    t._requires_grad = requires_grad
    return t


def _chain_backward(node, g, create_graph):
    """Backward through the built chain (create_graph, or a saved operand modified in place):
    a gradient per fused edge."""
    __tracebackhide__ = True
    top, chain = _build(node)
    inside = set(chain)
    grads = [None] * len(node._next)
    stack = [(top, g)]
    while stack:
        n, gn = stack.pop()
        outs = n._backward(gn, create_graph)
        for (m, nr), gi in zip(n._next, outs):
            if m is None or gi is None:
                continue
            if m in inside:
                stack.append((m, gi))
                continue
            for i, e in enumerate(node._next):
                if e[0] is m and e[1] == nr:
                    grads[i] = gi if grads[i] is None else grads[i] + gi
                    break
    return grads
