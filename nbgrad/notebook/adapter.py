"""The notebook layer's one reading of autograd engines: which engine an object belongs to.

Everything in ``nbgrad/notebook/`` that looks at a tensor, a ``grad_fn`` node, a saved tensor, a
storage, a module or the memory counters goes through these functions (the contract is
``docs/internals.md``). Each engine has its reading of the contract in a module of its own:
``adapter_nbgrad`` (nbgrad's introspection API) and ``adapter_torch`` (PyTorch's public one,
``grad_fn``, ``next_functions``, ``_saved_*``, ``metadata``, ``_version``, ``_base``,
``untyped_storage``). A function of one object asks the engine of that object's *type* (judged by
``type()``, cached per type: a ``Mock(spec=Tensor)`` claims ``__class__`` but not its type); a
function of no object asks every engine loaded. This is the only place that tells engines apart:
inspect, render, focus and the model panel read both through the same path.

torch is never imported here: its reading is loaded only once ``torch`` is in ``sys.modules``
(the user imported it). Every reader is defensive: it returns plain data or raises an
``Exception`` the caller skips *for that one object*. Nothing here keeps a reference.
"""

from __future__ import annotations

import sys

from . import adapter_nbgrad as _nb

_BY_TYPE: dict = {}  # type -> the engine's reading module (a few dozen types in a session)


def _torch():
    """torch's reading when the user imported torch, else None (never imports torch itself)."""
    if "torch" not in sys.modules:
        return None
    try:
        from . import adapter_torch
    except Exception:  # noqa: BLE001 - a torch too old or broken: nbgrad's panel still works
        return None
    return adapter_torch if adapter_torch.usable() else None


def engines() -> list:
    """The readings of the engines loaded now: nbgrad's, then torch's once it was imported."""
    t = _torch()
    return [_nb] if t is None else [_nb, t]


def _of(obj):
    """The reading module of ``obj``'s engine, by its type (nbgrad's when no engine owns it)."""
    cls = type(obj)
    r = _BY_TYPE.get(cls)
    if r is None:
        r = _nb
        t = _torch()
        if t is not None and not _nb.owns(cls) and t.owns(cls):
            r = t
        if t is not None or len(_BY_TYPE) < 4096:  # (before torch loads: nothing to remember)
            if len(_BY_TYPE) > 4096:
                _BY_TYPE.clear()
            _BY_TYPE[cls] = r
    return r


def reading(obj):
    """The reading module of ``obj``'s engine (its functions take ``obj``, as this module's do):
    for a caller that asks many things of one object (the snapshot: a dozen of each tensor)."""
    return _BY_TYPE.get(type(obj)) or _of(obj)


def engine_of(obj) -> str:
    """``"nbgrad"`` or ``"torch"``: which engine ``obj`` belongs to."""
    return _of(obj).ENGINE


# --- types ---------------------------------------------------------------------------------------


def tensor_types() -> tuple:
    """The tensor types of the engines loaded (a tuple for ``issubclass``)."""
    t = _torch()
    types = _TENSOR_TYPES.get(t)
    if types is None:  # (asked at every module call the model panel watches)
        types = _TENSOR_TYPES[t] = tuple(e.tensor_type() for e in engines())
    return types


_TENSOR_TYPES: dict = {}  # torch's reading (or None) -> the tensor types


def is_tensor(obj) -> bool:
    """A real engine tensor (or subclass instance), judged by its type alone."""
    return issubclass(type(obj), tensor_types())


def is_module(obj) -> bool:
    """An ``nn.Module`` instance of an engine (no ``nn`` is imported here)."""
    return any(e.is_module(obj) for e in engines())


def is_loss(module) -> bool:
    return _of(module).is_loss(module)


def named_parameters(module):
    return _of(module).named_parameters(module)


# --- tensors (by the tensor's type) ------------------------------------------------------------


def grad_fn(t):
    return _of(t).grad_fn(t)


def version(t) -> int:
    return _of(t).version(t)


def base(t):
    return _of(t).base(t)


def grad(t):
    return _of(t).grad(t)


def batched_grads(t):
    """``t``'s engine's reading when it reads a backward's gradients in one batch once the pass
    is over (its ``after_backward``, ``grad_stats``, ``flat_values``: ``notebook/grad_batch.py``),
    else None (they are read one by one)."""
    r = _of(t)
    return r if hasattr(r, "grad_stats") else None


def unhooked_grads(t) -> bool:
    """Whether ``t``'s engine runs its backward observers inside the backward call, where
    :func:`after_backward` works: the model panel watches its parameters' gradients without
    hooks (``grad_batch``)."""
    return getattr(_of(t), "UNHOOKED_GRADS", False)


def after_backward(t, cb) -> bool:
    """Have ``cb()`` run once the backward call of ``t``'s engine running now is over; False
    when it cannot (none running, or an engine without the callback)."""
    f = getattr(_of(t), "after_backward", None)
    return bool(f is not None and f(cb))


def version_and_grad(t) -> tuple:
    return _of(t).version_and_grad(t)


def shape(t) -> tuple:
    return _of(t).shape(t)


dtype_str = _nb.dtype_str  # "float32" from nbgrad.float32 and torch.float32 alike


def storage(t):
    return _of(t).storage(t)


def storage_ptr(sobj) -> int:
    return _of(sobj).storage_ptr(sobj) if sobj is not None else 0


def buffer_key(t) -> int:
    """A number naming the memory ``t`` views, the same for every tensor viewing it: a view, a
    ``.detach()``, ``.data``, a numpy round trip without a copy (``from_numpy(h.detach().numpy())``)
    (the model panel's test of an input cut from a sibling call's output, at every module call)."""
    return _of(t).buffer_key(t)


def storage_nbytes(sobj) -> int:
    return _of(sobj).storage_nbytes(sobj) if sobj is not None else 0


def element_offset(t, ptr: int) -> int:
    return _of(t).element_offset(t, ptr)


def nbytes(t) -> int:
    return _of(t).nbytes(t)


def array(t):
    """A numpy array of ``t``'s values (a view where the engine allows): read only."""
    return _of(t).array(t)


def version_history(t) -> list:
    return _of(t).version_history(t)


def cut_of(t):
    return _of(t).cut_of(t) if t is not None else None


# --- nodes (by the node's type) ------------------------------------------------------------------


def node_name(node) -> str:
    return _of(node).node_name(node)


def next_nodes(node) -> tuple:
    return _of(node).next_nodes(node)


def saved_tensors(node) -> tuple:
    return _of(node).saved_tensors(node)


def sequence_number(node) -> int:
    return _of(node).sequence_number(node)


def saved_value(node, name):
    return _of(node).saved_value(node, name)


def leaf_variable(node):
    return _of(node).leaf_variable(node)


def raw_where(obj):
    return _of(obj).raw_where(obj)


# --- per engine, chosen by an object of it (a module, a parameter) ----------------------------


def node_count(obj) -> int:
    """How many nodes ``obj``'s engine has made so far (nodes made after have a larger
    :func:`sequence_number`): read before and after a module call."""
    return _of(obj).node_count()


def grad_on(obj) -> bool:
    """Whether grad mode is on in ``obj``'s engine."""
    return _of(obj).grad_on()


def lean_steps(module) -> bool:
    """Whether ``module``'s engine wants lean training steps after the watched ones (see
    ``ModelTracker``): torch, whose module hooks cost a step its fast path."""
    return bool(getattr(_of(module), "LEAN_STEPS", False))


def pause_recording(module):
    """Before a trained model's call in a lean step: ``module``'s engine may stop recording
    each op until :func:`resume_recording` (torch: its recorder leaves torch's mode stack);
    a token for it, or None."""
    return _of(module).pause_recording()


def resume_recording(module, token, twin) -> None:
    """After that call: recording again; the nodes it made take the lines of ``twin``'s
    (``(first, end)`` node numbers of the same model's call recorded in full) when as many."""
    _of(module).resume_recording(token, twin)


def module_hook_api(engine):
    """The module of ``engine``'s global module hooks (``register_module_forward_pre_hook``)."""
    return engine.module_hook_api()


# --- every engine loaded ---------------------------------------------------------------------


def capture_where(skip=()):
    """The raw place in user code running now (for :func:`location`), or None: the innermost
    frame outside the engines' files (and outside the files in ``skip``)."""
    t = _torch()
    if t is None:
        return _nb.capture_where(skip)
    return t.capture_where(tuple(skip) + (0,))  # (0: a tuple never empty: the walk skips both)


_OBSERVERS: list = []


def observe_backward(cb) -> None:
    """Have ``cb(outputs, api)`` called before each backward or ``autograd.grad`` call of every
    engine loaded now or later (see :func:`engines_loaded`)."""
    if cb not in _OBSERVERS:
        _OBSERVERS.append(cb)
    for e in engines():
        e.observe_backward(cb)


def unobserve_backward(cb) -> None:
    while cb in _OBSERVERS:
        _OBSERVERS.remove(cb)
    for e in engines():
        e.unobserve_backward(cb)


_STEP_OBSERVERS: list = []


def observe_steps(cb) -> None:
    """Have ``cb(optimizer, phase)`` called before (``"pre"``) and after (``"post"``) each
    optimizer step of the engines that tell (torch's global optimizer step hooks), loaded now
    or later."""
    if cb not in _STEP_OBSERVERS:
        _STEP_OBSERVERS.append(cb)
    for e in engines():
        e.observe_steps(cb)


def unobserve_steps(cb) -> None:
    while cb in _STEP_OBSERVERS:
        _STEP_OBSERVERS.remove(cb)
    for e in engines():
        e.unobserve_steps(cb)


def engines_loaded() -> None:
    """Give an engine imported since (torch, by the user's cell) the backward and optimizer
    step observers."""
    for cb in _OBSERVERS:
        for e in engines():
            e.observe_backward(cb)
    for cb in _STEP_OBSERVERS:
        for e in engines():
            e.observe_steps(cb)


def sites_since(mark) -> tuple:
    """``(new mark, [raw where])``: the places in user code the engines recorded since ``mark``
    (0 at first, then what this returned), newest first."""
    marks = dict(mark) if isinstance(mark, tuple) else {}
    out, raws = [], []
    for e in engines():
        m, r = e.sites_since(marks.get(e.ENGINE, 0))
        out.append((e.ENGINE, m))
        raws.extend(r)
    return tuple(out), raws


location = _nb.location  # a Location from a raw (code, lasti): the same for every engine


def activity() -> tuple:
    """Ever-growing counters, summed over the engines: (nodes made, in-place writes or backward
    calls, storages made, storages freed); compared before and after a cell."""
    out = (0, 0, 0, 0)
    for e in engines():
        out = tuple(a + b for a, b in zip(out, e.activity()))
    return out


def memory_stats(device: str) -> dict:
    """nbgrad's counters for ``device``, with torch's (``torch_``-prefixed keys) once loaded."""
    out = {}
    es = engines()
    for e in es:
        try:
            stats = e.memory_stats(device)
        except Exception:  # noqa: BLE001 - one engine's counters may be unreadable (no CUDA)
            continue
        if e is _nb and len(es) > 1 and not stats.get("peak_bytes"):
            continue  # a torch notebook that never made an nbgrad tensor: no nbgrad line
        out.update(stats)
    return out


def cell_started(ip=None) -> None:
    """Before a cell: each engine starts what it records during a cell (torch: the recorder)."""
    for e in engines():
        e.cell_started(ip, _RECORDING[0])


def cell_finished() -> list:
    """After a cell: each engine stops recording; one-line notes of what could not be read."""
    notes = []
    for e in engines():
        notes.extend(e.cell_finished())
    return notes


_RECORDING = [True]


def recording() -> bool:
    """Whether engines that need a recorder to know lines (torch) run one during cells."""
    return _RECORDING[0]


def set_recording(on: bool) -> None:
    """``%nbgrad set record=on|off``: torch's per-op recorder (nbgrad records by itself)."""
    _RECORDING[0] = bool(on)
    t = _torch()
    if t is not None:
        t.set_recording(on)


def error_context(exc) -> dict | None:
    """The plain explanation an engine attached to (or can read from) an autograd error."""
    ctx = _nb.error_context(exc)
    t = _torch()
    if ctx is None and t is not None:
        ctx = t.error_context(exc)
    return ctx


def is_engine_error(exc) -> bool:
    """An error raised from inside an engine (by the last frame of its traceback)."""
    return any(e.is_engine_error(exc) for e in engines())


# --- backward step by step (stepper.py): nbgrad's engine only ------------------------------------

NO_WALK = ("the step-by-step backward drives nbgrad's engine node by node; PyTorch's engine runs a "
           "backward as one C++ call that cannot be paused between nodes")


def formula_lines(node) -> list:
    """The formulas a node applies, as its engine's table writes them (``[]`` when unknown)."""
    f = getattr(_of(node), "formula_lines", None)
    return f(node) if f is not None else []


def saved_inputs(node) -> list:
    """``[(name, array or number)]`` the node saved for its formulas (``[]`` when unknown)."""
    f = getattr(_of(node), "saved_inputs", None)
    return f(node) if f is not None else []


def backward_walk(root, keep):
    """A walk of ``root.backward()`` one node at a time (``step()``, ``steps``, ``done``);
    NotImplementedError for an engine that cannot be paused (torch's)."""
    f = getattr(_of(root), "backward_walk", None)
    if f is None:
        raise NotImplementedError(NO_WALK)
    return f(root, keep)
