"""The backward engine: an iterative walk of the graph with dependency counts (no recursion, so
graphs of 100k nodes are fine), gradient buffers per node, hooks, and the release of saved
tensors unless `retain_graph`."""
from __future__ import annotations

from .. import tensor as _tm  # noqa: E402  (a module reference: no import cycle)

from . import anomaly
from ..naming import public
from heapq import heappop, heappush

import sys

import numpy as np

from ..backend import as_array, get_array_module, loud, quiet
from .graph import (GRAD_OWNED, GRAD_SHARED, AccumulateGrad, _check_same_meta, _Rare,
                    _run_tensor_hooks)
from .grad_mode import GENERAL_PATH, STATE
from .views import _view_of
from ..tensor import NO_GRAD_MODE
from ..sparse_coo import SparseCOO

_ND = np.ndarray
_getrefcount = sys.getrefcount
# Callbacks `cb(outputs, api)` told of each backward / autograd.grad call before it runs
# (`outputs`: the root tensors; `api`: "backward" or "grad"). Empty unless a tool (the notebook
# panel) observes: then one list check per call.
BACKWARD_OBSERVERS: list = []
RUNNING = [0]  # backward calls under way (a fused node leaves its edges alone meanwhile)
_FINAL: list = []  # per backward call under way, the callbacks queued for its end (innermost last)


def queue_callback(cb, on_error: bool = False) -> None:
    """Have ``cb()`` run once the backward call running now is over, before it returns (torch's
    ``Variable._execution_engine.queue_callback``; a backward observer may queue one too); a
    callback may queue another. When the call raises, only those queued ``on_error`` run (a
    tool's reading of what the pass did until then: they must not raise)."""
    if not _FINAL:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    _FINAL[-1].append((cb, on_error))


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
    The callbacks queued meanwhile (`queue_callback`) run once it is over.
    """
    __tracebackhide__ = True
    final = []
    _FINAL.append(final)
    try:
        try:
            result = _run_backward(outputs, grad_outputs, retain_graph, create_graph, inputs,
                                   allow_unused, accumulate, api)
        except BaseException:
            for cb, on_error in final:
                if on_error:
                    cb()
            raise
        for cb, _ in final:  # (one queued meanwhile is run too)
            cb()
        return result
    finally:
        _FINAL.pop()


def _run_backward(outputs, grad_outputs, retain_graph, create_graph, inputs, allow_unused,
                  accumulate, api):
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
    # Who else holds a buffer's gradient, as PyTorch's use counts tell. A buffer's array is the
    # engine's own (PyTorch adds the next gradient into it in place, its _version counting the
    # additions; AccumulateGrad keeps it as .grad without a copy) when it is a new array a
    # formula returned along one edge, or one the engine made (a root's implicit ones), or an
    # own array passed on unchanged (AddBackward0); not a view (its memory is its base's). The
    # exceptions are few: `shared` holds the nodes whose buffer something else may hold too
    # (the caller's gradient, one sent along two edges, one a hook or autograd.grad saw).
    shared = {node for (node, _, g), given in zip(root_edges, grad_outputs)
              if given is not None and buffers.get(node) is g} \
        if len(grad_outputs) != 1 or grad_outputs[0] is not None else set()  # (loss.backward())
    # autograd.grad: the buffers holding a view PyTorch's formula made of its incoming gradient
    # (sum's expand, t, view): node -> (base array, its version); the result is then such a view
    vbase = {} if captures is not None else None
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
    vbases = captured[:]
    bumps = {}  # node -> in-place additions into its gradient buffer (its version)
    prev = STATE.enabled
    STATE.enabled = bool(create_graph)
    anomaly_on = anomaly.STATE.enabled
    check_nan = anomaly.STATE.check_nan if anomaly_on else False
    release = not retain_graph
    # nodes without hooks just run, and a chain's next node is taken without the edge loop
    # (NBGRAD_GENERAL_PATH=1: every node goes through the general steps below)
    plain = captures is None and not anomaly_on and not GENERAL_PATH
    pop = buffers.pop
    get = buffers.get
    token = quiet()  # NaN and Inf are values: formulas run with numpy's warnings off
    RUNNING[0] += 1
    try:
        node = heappop(ready)[1] if ready else None
        carried = None  # the gradient of the chain's next node, handed on without its buffer
        while node is not None:
            if carried is None:
                gs = pop(node, None)
            else:
                gs = carried
                carried = None
            out = None
            hooked = False  # its post-hooks saw its outputs
            vb = vbase.pop(node, None) if vbase else None
            if gs is not None:
                hooks = node._site  # (a node's hooks: kept with its where, in a _Rare)
                if type(hooks) is not _Rare or not (hooks.pre or hooks.post):
                    hooks = None  # (a _Rare with only metadata or meta: the common case)
                if plain and hooks is None and type(node) is AccumulateGrad:
                    # a leaf: its gradient into .grad, and no edge to follow (the general steps
                    # below, less those a leaf never takes; kept for speed: a GPT step has 50)
                    # (ownership first: as an argument after gs, gs would be one more
                    # reference on the stack, which _ownership counts)
                    owned = _ownership(node, gs, shared, grad_outputs)
                    node._backward(gs, create_graph, owned, bumps.get(node, 0) if bumps else 0)
                    gs = None
                    node = heappop(ready)[1] if ready else None
                    continue
                if plain and hooks is None:
                    out = node._backward(gs, create_graph)  # the common case: just run it
                    if release and node._saved is not None:
                        node._release()
                    # One live edge (x * 2.0 has a second, None) to a node no other edge has
                    # fed yet and none will (a chain): that node is ready with exactly this
                    # gradient — the edge loop below, written out for this case (kept for
                    # speed: benchmarks/README.md, seventh round).
                    c = None
                    if len(out) == 1:
                        (c, _), = node._next
                        gi = out[0]
                    elif len(out) == 2:
                        (c, _), (c1, _) = node._next
                        if c1 is None:
                            gi = out[0]
                        elif c is None:
                            c, gi = c1, out[1]
                        else:
                            c = None
                    if c is not None and gi is not None and deps[c] == 1 and c._n_out == 1 and \
                            c not in buffers:  # (the last edge into it, and the only one)
                        if gi is gs and shared and node in shared:
                            shared.add(c)  # (the given gradient passed on unchanged)
                        gv = node._grad_version
                        if gv and gi is not gs:
                            bumps[c] = gv
                        elif bumps and gi is gs and node in bumps:  # (passed on: its version)
                            bumps[c] = bumps[node]
                        deps[c] = 0
                        if not ready:
                            carried = gi
                            out = gi = gs = None
                            node = c
                            continue
                        buffers[c] = gi
                        heappush(ready, (-c._seq, c))
                        out = gi = gs = None
                        node = heappop(ready)[1]
                        continue
                else:
                    if hooks is not None and hooks.pre:
                        new, kept = _run_prehooks(node, gs, node._n_out > 1, create_graph)
                        if new is not gs:  # a hook's result: its own version, not a view
                            if bumps:
                                bumps.pop(node, None)
                            vb = None
                        gs = new
                        if kept:  # (a hook kept what it was given: torch's use_count > 1)
                            shared.add(node)
                    if captures is not None:
                        if not accumulate and type(node) is AccumulateGrad and \
                                node.variable._hooks and (node, 0) in captures:
                            # a captured leaf's tensor hooks run before its gradient is taken
                            new = _run_tensor_hooks(node.variable._hooks, gs)
                            if new is not gs:  # the hook's result: not a view, its own version
                                if bumps:
                                    bumps.pop(node, None)
                                vb = None
                            gs = new
                        if _capture(captures, captured, node, gs, versions, bumps, vb, vbases):
                            shared.add(node)
                    if needed is None or node in needed:
                        if type(node) is AccumulateGrad:
                            if accumulate:
                                owned = _ownership(node, gs, shared, grad_outputs)
                                # (bumps: .grad's version when it takes the buffer itself)
                                node._backward(gs, create_graph, owned,
                                               bumps.get(node, 0) if bumps else 0)
                        else:
                            if anomaly_on:
                                out = anomaly.run_node(node, gs, create_graph, check_nan)
                            else:
                                out = node._backward(gs, create_graph)
                            if hooks is not None and hooks.post:
                                out = _run_posthooks(node, out, gs)
                                hooked = True
                        if release and node._saved is not None:  # (a node that did not run keeps
                            node._release()                      # them, as PyTorch's)
            single = None  # the one node this one made ready, while the heap is empty
            gi = None
            gv = node._grad_version  # (PyTorch's formula wrote its gradients in place)
            # one array sent along two edges (x + x: AddBackward0): neither buffer owns it
            dup = out is not None and len(out) > 1 and (
                out[0] is out[1] if len(out) == 2 else _twice(out))
            for (c, nr), gi in zip(node._next, out) if out is not None else \
                    ((e, None) for e in node._next):
                if c is None:
                    continue
                if gi is not None:
                    if c._n_out == 1:
                        old = get(c)
                        if old is None:
                            if plain and type(c) is AccumulateGrad and deps[c] == 1 and \
                                    gi is not gs and not (dup or gv or hooked) and _quiet_leaf(c):
                                # a leaf's last edge, a new array: .grad now, as the ready leaf
                                # would run next (nothing observes it in between; kept for speed)
                                deps[c] = 0
                                owned = _ownership(c, gi, shared, grad_outputs)
                                c._backward(gi, create_graph, owned)
                                continue
                            buffers[c] = gi
                            # the engine's own unless the hooks saw it, or it went along two
                            # edges, or it is the one this node was given and did not own
                            if hooked or dup or gi is gs and node in shared:
                                shared.add(c)
                            if gv and gi is not gs:
                                bumps[c] = gv
                            elif bumps and gi is gs and node in bumps:  # (passed on unchanged:
                                bumps[c] = bumps[node]                  # the same version)
                            if vbase is not None and type(gi) is _ND:
                                if gi is gs:
                                    if vb is not None:
                                        vbase[c] = vb
                                elif gi.base is not None and type(gs) is _ND:
                                    root = root_array(gi)
                                    if root is root_array(gs):  # a view of its gradient
                                        vbase[c] = vb or (gs, bumps.get(node, 0) if bumps else 0)
                                    else:  # a view of a new array (torch: of a new tensor,
                                        vbase[c] = (root, 0)  # its _base, as a fused chain's)
                        elif (old.base is None and old.flags.writeable if type(old) is _ND
                              else isinstance(old, np.generic)) and \
                                old.dtype is gi.dtype and old.shape == gi.shape and \
                                not (shared and c in shared):
                            # in place into the engine's own buffer: its _version counts the
                            # additions (a 0-d one, a numpy scalar, is replaced: same count)
                            if type(old) is _ND:
                                old += gi
                            else:
                                buffers[c] = old + gi
                            bumps[c] = bumps.get(c, 0) + 1
                        else:  # (a sparse buffer: the new gradient first, as torch's InputBuffer)
                            buffers[c] = gi + old if type(old) is SparseCOO else old + gi
                            if shared:
                                shared.discard(c)
                            if bumps:
                                bumps.pop(c, None)
                            if vbase:
                                vbase.pop(c, None)
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
        RUNNING[0] -= 1
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
                given = _given(arr, grad_outputs)
                if given is not None:  # the caller's gradient itself, passed on unchanged
                    g = given
                elif vbases[k] is not None:
                    g = _grad_view(arr, vbases[k], made, grad_outputs)
                else:
                    g = _tm.Tensor._make_fresh(as_array(arr))
                    if versions[k]:
                        g._storage.version = versions[k]
                made[id(arr)] = g
        if g is None and not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {k} appears to not have been "
                               "used in the graph. Set allow_unused=True if this is the desired "
                               "behavior.")
        result.append(g)
    return result


def _quiet_leaf(node):
    """Whether nothing can see when leaf node `node` accumulates: no hook on it, no tensor hook
    or post-accumulate hook on its variable."""
    site = node._site
    if type(site) is _Rare and (site.pre or site.post):
        return False
    e = node.variable._extra
    return e is None or not (e.hooks or e.post_acc)


def _capture(captures, captured, node, gs, versions, bumps, vb, vbases):
    """autograd.grad: keep the gradients arriving at the requested inputs' edges (and their
    version: the in-place additions into the buffer; and `vb`, the base of a single gradient
    that is a view). True when one was kept."""
    multi = node._n_out > 1
    kept = False
    for nr in range(node._n_out):
        ks = captures.get((node, nr))
        if ks:
            gk = gs[nr] if multi else gs
            kept = True
            for k in ks:
                captured[k] = gk
                versions[k] = bumps.get(node, 0) if bumps else 0
                if not multi:
                    vbases[k] = vb
    return kept


def root_array(a):
    """The numpy array owning the memory the view `a` looks at (`a` when it owns it)."""
    while type(a.base) is _ND:
        a = a.base
    return a


def _twice(out):
    """Whether some array is in `out` twice."""
    ids = [id(o) for o in out if o is not None]
    return len(set(ids)) < len(ids)


def _grad_view(arr, vb, made, grad_outputs):
    """autograd.grad's result for a gradient PyTorch's formula made as a view of the gradient
    it was given (sum's expand of the ones, t, view): a view made in no_grad mode of that
    gradient (`vb`: its array and version), which is the caller's tensor when it came as
    grad_outputs. In-place ops and detach_ on it then fail as in PyTorch."""
    base_arr, version = vb
    key = ("base", id(base_arr))
    base = made.get(key)
    if base is None:
        base = _given(base_arr, grad_outputs)
        if base is None:
            base = _tm.Tensor._make_fresh(as_array(base_arr))
            base._storage.version = version
        made[key] = base
    return _view_of(base, arr, NO_GRAD_MODE)


def _ownership(node, g, shared, grad_outputs):
    """What AccumulateGrad may do with the gradient `g` of its buffer (graph.GRAD_*): keep it
    (GRAD_OWNED: the engine's own new array), copy it (GRAD_SHARED: something else may hold
    it), or, for a view only the engine holds, the Storage of the memory it views (the caller's
    gradient's, when it is a view of that: PyTorch's .grad then shares its memory and version
    counter)."""
    if node in shared and (type(g) is not _ND or _getrefcount(g) > 3):
        # (3: the caller's `gs`, `g`, getrefcount's own: an array sent along two edges is
        # copied by the first leaf and taken by the last, as PyTorch's use count decides)
        return GRAD_SHARED
    if type(g) is not _ND:
        return GRAD_OWNED if isinstance(g, np.generic) else GRAD_SHARED
    if g.base is None:
        return GRAD_OWNED
    root = root_array(g)
    if root.nbytes < g.nbytes or not g.flags.writeable:
        # elements that overlap (an expand: sum's gradient) or a read-only view never become
        # .grad as they are (accumulate_into copies them whatever it is told): no Storage
        return GRAD_SHARED
    for given in grad_outputs:
        if isinstance(given, _tm.Tensor) and given._storage._root is root:
            return given._storage
    if root.nbytes == g.nbytes and g.flags.c_contiguous:  # all of a new array (sum_to's
        return GRAD_OWNED  # (1, n) viewed as (n,)): as good as that array
    return _tm.Storage(root)


def _given(arr, grad_outputs):
    """The caller's gradient tensor whose array `arr` is (PyTorch hands that tensor back)."""
    for given in grad_outputs:
        if isinstance(given, _tm.Tensor) and given._data is arr:
            return given
    return None


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
        buffers[node] = g if old is None else g + old if type(old) is SparseCOO else old + g
    else:
        lst = buffers.get(node)
        if lst is None:
            lst = buffers[node] = [None] * node._n_out
        lst[nr] = _add(lst[nr], g)


def _run_prehooks(node, gs, multi, create_graph):
    """``(gradients, kept)``: the gradients after the node's pre-hooks, and whether a hook may
    still hold them (a tensor hook or retain_grad, a Tensor a hook was given and kept: torch's
    AccumulateGrad then copies instead of taking the buffer, its `use_count` test)."""
    gl = list(gs) if multi else [gs]
    kept = False
    for nr, fn in list(node._site.pre):
        if nr is not None:   # a tensor hook on output nr (or retain_grad)
            if gl[nr] is not None:
                gl[nr] = _run_tensor_hooks([fn], gl[nr])
                kept = True
        else:
            wrapped = tuple(None if g is None else (g if isinstance(g, _tm.Tensor)
                                                    else _tm.Tensor._make_fresh(as_array(g)))
                            for g in gl)
            r = fn(wrapped)
            if r is not None:
                _check_hook_result(fn, wrapped, r)
                gl = [None if g is None else (g if create_graph else g._data) for g in r]
                r = None
            # held by the tuple, the loop's name and getrefcount's argument: nothing else
            kept = kept or sys.getrefcount(wrapped) > 2 or any(
                w is not None and sys.getrefcount(w) > 3 for w in wrapped)
    return (gl if multi else gl[0]), kept


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
    for fn in list(node._site.post):
        r = fn(gin, gout)
        if r is not None:
            _check_hook_result(fn, gin, tuple(r))
            gin = wrap(r)
    return tuple(None if g is None else (g if STATE.enabled else g._data) for g in gin)
