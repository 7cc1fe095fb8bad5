"""The backward engine: an iterative walk of the graph with dependency counts (no recursion, so
graphs of 100k nodes are fine), gradient buffers per node, hooks, and the release of saved
tensors unless `retain_graph`."""
from __future__ import annotations

from .. import tensor as _tm  # noqa: E402  (a module reference: no import cycle)

from . import anomaly
from ..naming import public
from heapq import heappop, heappush
from sys import getrefcount as _getrefcount

import numpy as np

from ..backend import as_array, get_array_module, loud, quiet
from .graph import AccumulateGrad, _check_same_meta, _run_tensor_hooks
from .grad_mode import STATE

_ND = np.ndarray
# Callbacks `cb(outputs, api)` told of each backward / autograd.grad call before it runs
# (`outputs`: the root tensors; `api`: "backward" or "grad"). Empty unless a tool (the notebook
# panel) observes: then one list check per call.
BACKWARD_OBSERVERS: list = []


def _root_edge(t):
    """(node, output_nr) where the gradient of `t` enters the graph."""
    fn = t.grad_fn
    if fn is not None:
        return fn, t._output_nr
    v = t._view
    if t._requires_grad and (v is None or v.own or not v.base._requires_grad):
        return t._grad_accumulator(), 0
    return None, 0  # (a view made under no_grad has no grad accumulator, as in PyTorch)


def _size(shape):
    return public(f"Size({list(shape)})")


def _make_root_grads(outputs, grads, create_graph):
    roots = []
    for i, (t, g) in enumerate(zip(outputs, grads)):
        if g is None and not t.requires_grad:
            pass  # as PyTorch: no implicit gradient; "element i ... does not require grad" below
        elif g is None:
            d = t._data
            if d.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if d.dtype.kind != "f":
                raise RuntimeError("grad can be implicitly created only for real scalar outputs "
                                   f"but got {t.dtype}")
            g = get_array_module(d).empty(d.shape, d.dtype)
            g.fill(1)  # two C calls; xp.ones goes through a Python wrapper
            if create_graph:
                g = _tm.Tensor._make_fresh(g)
        else:
            if not isinstance(g, _tm.Tensor):
                raise TypeError(f"gradient must be a Tensor or None, got {type(g).__name__}")
            if tuple(g.shape) != tuple(t.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {_size(g.shape)} and "
                    f"output[{i}] has a shape of {_size(t.shape)}.")
            if g.device != t.device:
                raise RuntimeError(f"invalid gradient at index {i} - expected device {t.device} "
                                   f"but got {g.device}")
            if g._data.dtype != t._data.dtype:  # PyTorch casts the given gradient
                g = g.to(t.dtype)
            g = g if create_graph else g._data
        roots.append((t, g))
    return roots


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def run_backward(outputs, grad_outputs, retain_graph, create_graph, inputs=None,
                 allow_unused=True, accumulate=True, api="backward"):
    """Shared core of `Tensor.backward`, `autograd.backward` and `autograd.grad`.

    Returns the grads captured for `inputs` (a list aligned with it) when `inputs` is given.
    """
    __tracebackhide__ = True
    if retain_graph is None:
        retain_graph = create_graph
    roots = _make_root_grads(outputs, grad_outputs, create_graph)

    # edges into the graph for each root
    root_edges = []
    for i, (t, g) in enumerate(roots):
        node, nr = _root_edge(t)
        if node is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a "
                               "grad_fn")
        root_edges.append((node, nr, g))
    if BACKWARD_OBSERVERS:
        for cb in tuple(BACKWARD_OBSERVERS):
            cb(outputs, api)

    # capture targets: (node, output_nr) -> index in inputs
    captures = None
    if inputs is not None:
        captures = {}
        for k, t in enumerate(inputs):
            if not isinstance(t, _tm.Tensor):
                raise TypeError("inputs must be Tensors")
            if not t._requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            node, nr = _root_edge(t)
            captures.setdefault((node, nr), []).append(k)

    # dependency counts over the reachable graph
    deps = {}
    stack = []
    for node, _, _ in root_edges:
        if node not in deps:
            deps[node] = 0
            stack.append(node)
    get = deps.get
    while stack:
        n = stack.pop()
        for c, _ in n._next:
            if c is not None:
                d = get(c)
                if d is None:
                    deps[c] = 1
                    stack.append(c)
                else:
                    deps[c] = d + 1

    needed = None
    if captures is not None:
        needed = _needed(deps, {n for n, _ in captures})

    # gradient buffers: node -> grad (single output) or list of grads
    buffers = {}
    for node, nr, g in root_edges:
        _accumulate(buffers, node, nr, g)
    # ready nodes run highest sequence number first (the most recently created), as in PyTorch;
    # this decides hook order and which error a broken graph reports first. `ready` is a heap of
    # (-seq, node); when a node leaves exactly one node ready and the heap is empty (a chain),
    # that node runs next without going through the heap.
    ready = []
    for node, _, _ in root_edges:
        if deps[node] == 0:
            deps[node] = -1  # queued (the same root may come twice)
            heappush(ready, (-node._seq, node))

    captured = [None] * (len(inputs) if inputs is not None else 0)
    versions = captured[:]
    bumps = {}  # node -> in-place additions into its gradient buffer (its version)
    prev = STATE.enabled
    STATE.enabled = bool(create_graph)
    anomaly_on = anomaly.STATE.enabled
    check_nan = anomaly.STATE.check_nan if anomaly_on else False
    release = not retain_graph
    pop = buffers.pop
    get = buffers.get
    token = quiet()  # NaN and Inf are values: formulas run with numpy's warnings off
    try:
        node = heappop(ready)[1] if ready else None
        while node is not None:
            gs = pop(node, None)
            out = None
            if gs is not None:
                hooks = node._hooks
                if hooks is not None and hooks.pre:
                    new = _run_prehooks(node, gs, node._n_out > 1, create_graph)
                    if bumps and new is not gs:  # a hook's result: its own version
                        bumps.pop(node, None)
                    gs = new
                if captures is not None:
                    if not accumulate and type(node) is AccumulateGrad and \
                            node.variable._hooks and (node, 0) in captures:
                        # a captured leaf's tensor hooks run before its gradient is taken
                        new = _run_tensor_hooks(node.variable._hooks, gs)
                        if bumps and new is not gs:
                            bumps.pop(node, None)
                        gs = new
                    _capture(captures, captured, node, gs, versions, bumps)
                if needed is None or node in needed:
                    if type(node) is AccumulateGrad:
                        if accumulate:
                            node._backward(gs, create_graph)
                            if bumps and node in bumps:  # .grad took the buffer: its version
                                _set_version(node.variable._grad, gs, bumps[node])
                    else:
                        if anomaly_on:
                            out = anomaly.run_node(node, gs, create_graph, check_nan)
                        else:
                            out = node._backward(gs, create_graph)
                        if hooks is not None and hooks.post:
                            out = _run_posthooks(node, out, gs)
                    if release and node._saved is not None:  # (a node that did not run keeps
                        node._release()                      # them, as PyTorch's)
            single = None  # the one node this one made ready, while the heap is empty
            gi = None
            for (c, nr), gi in zip(node._next, out) if out is not None else \
                    ((e, None) for e in node._next):
                if c is None:
                    continue
                if gi is not None:
                    if c._n_out == 1:
                        old = get(c)
                        if old is None:
                            buffers[c] = gi
                        elif type(old) is _ND and type(gi) is _ND and old.base is None and \
                                old.dtype is gi.dtype and old.shape == gi.shape and \
                                (_getrefcount(old) == 3 or _getrefcount(old) == 3 + sum(
                                    o is old for o in out)) and old.flags.writeable:
                            # PyTorch adds into a buffer only it holds, in place (the dict,
                            # `old`, getrefcount's argument, and this node's outputs): the
                            # gradient's _version counts these additions
                            old += gi
                            bumps[c] = bumps.get(c, 0) + 1
                        else:
                            buffers[c] = old + gi
                            if bumps:
                                bumps.pop(c, None)
                    else:
                        _accumulate(buffers, c, nr, gi)
                d = deps[c] - 1
                deps[c] = d
                if d == 0:
                    if single is None and not ready:
                        single = c
                    else:
                        if single is not None:
                            heappush(ready, (-single._seq, single))
                            single = None
                        heappush(ready, (-c._seq, c))
            # drop this node's references to the gradients it passed on: AccumulateGrad keeps
            # a gradient array as .grad without a copy only when nothing else holds it
            out = gi = gs = old = None
            node = single if single is not None else heappop(ready)[1] if ready else None
    finally:
        STATE.enabled = prev
        loud(token)

    if inputs is None:
        return None
    result = []
    made = {}  # one Tensor per captured array: the same input twice gets the same object
    for k, t in enumerate(inputs):
        g = captured[k]
        if g is not None and not isinstance(g, _tm.Tensor):
            arr = g
            g = made.get(id(arr))
            if g is None:
                g = made[id(arr)] = _tm.Tensor._make_fresh(as_array(arr))
                if versions[k]:
                    g._storage.version = versions[k]
        if g is None and not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {k} appears to not have been "
                               "used in the graph. Set allow_unused=True if this is the desired "
                               "behavior.")
        result.append(g)
    return result


def _set_version(t, arr, version):
    """The version of `.grad` when it is the engine's buffer `arr` itself (not a copy)."""
    if t is not None and t._data is arr:
        t._storage.version = version


def _capture(captures, captured, node, gs, versions, bumps):
    """autograd.grad: keep the gradients arriving at the requested inputs' edges (and their
    version: the in-place additions into the buffer)."""
    multi = node._n_out > 1
    for nr in range(node._n_out):
        ks = captures.get((node, nr))
        if ks:
            gk = gs[nr] if multi else gs
            for k in ks:
                captured[k] = gk
                versions[k] = bumps.get(node, 0) if bumps else 0


def _needed(deps, targets):
    """Nodes from which some capture target is reachable (only these need to run)."""
    needed = set()
    order = []
    seen = set()
    for root in deps:
        if root in seen:
            continue
        stack = [(root, iter(root._next))]
        seen.add(root)
        while stack:
            n, it = stack[-1]
            for c, _ in it:
                if c is not None and c not in seen:
                    seen.add(c)
                    stack.append((c, iter(c._next)))
                    break
            else:
                stack.pop()
                order.append(n)
    for n in order:  # post-order: children first; a capture target itself need not run
        if any(c in needed or c in targets for c, _ in n._next if c is not None):
            needed.add(n)
    return needed


def _accumulate(buffers, node, nr, g):
    if node._n_out == 1:
        old = buffers.get(node)
        buffers[node] = g if old is None else old + g
    else:
        lst = buffers.get(node)
        if lst is None:
            lst = buffers[node] = [None] * node._n_out
        lst[nr] = _add(lst[nr], g)


def _run_prehooks(node, gs, multi, create_graph):
    gl = list(gs) if multi else [gs]
    for nr, fn in list(node._hooks.pre):
        if nr is not None:   # a tensor hook on output nr (or retain_grad)
            if gl[nr] is not None:
                gl[nr] = _run_tensor_hooks([fn], gl[nr])
        else:
            wrapped = tuple(None if g is None else (g if isinstance(g, _tm.Tensor)
                                                    else _tm.Tensor._make_fresh(as_array(g)))
                            for g in gl)
            r = fn(wrapped)
            if r is not None:
                _check_hook_result(fn, wrapped, r)
                gl = [None if g is None else (g if create_graph else g._data) for g in r]
    return gl if multi else gl[0]


def _check_hook_result(fn, old, new):
    """PyTorch's checks on what a hook returns in place of gradients."""
    name = getattr(fn, "__name__", repr(fn))
    if len(new) != len(old):
        raise RuntimeError(f"hook '{name}' has returned an incorrect number of values (got "
                           f"{len(new)}, but expected {len(old)})")
    for a, b in zip(old, new):
        if a is None and b is not None:
            raise RuntimeError("can't replace a None gradient with a non-None value")
        if a is not None and b is not None:
            _check_same_meta(name, a, b)


def _run_posthooks(node, out, gs):

    def wrap(seq):
        return tuple(None if g is None else (g if isinstance(g, _tm.Tensor)
                                             else _tm.Tensor._make_fresh(as_array(g))) for g in seq)
    gin = wrap(out)
    gout = wrap(gs if node._n_out > 1 else (gs,))
    for fn in list(node._hooks.post):
        r = fn(gin, gout)
        if r is not None:
            _check_hook_result(fn, gin, tuple(r))
            gin = wrap(r)
    return tuple(None if g is None else (g if STATE.enabled else g._data) for g in gin)
