"""nbgrad's reading of the adapter contract: its introspection API, as the notebook layer reads it.

The notebook layer never imports this module: ``adapter`` picks it (or ``adapter_torch``) by the
type of the object read. The names mirror PyTorch's (``grad_fn``, ``next_functions``,
``_saved_*``, ``_version``, ``_base``, ``untyped_storage``); the contract is
``docs/internals.md``.

Every reader is defensive: the namespace holds user objects (mocks, subclasses whose properties
raise, objects whose ``__getattr__`` raises anything), so a reader either returns plain data or
raises an ``Exception`` the caller skips *for that one object*. Nothing here keeps a reference.
"""

from __future__ import annotations

import sys

import numpy as np

ENGINE = "nbgrad"


# --- types: decided by type(), never by isinstance() on the object (a Mock(spec=Tensor) claims
# __class__ = Tensor, and isinstance() would believe it) --------------------------------------


def tensor_type():
    from ..tensor import Tensor

    return Tensor


def is_tensor(obj) -> bool:
    """A real engine tensor (or subclass instance), judged by its type alone."""
    return issubclass(type(obj), tensor_type())


def owns(cls) -> bool:
    """Whether objects of type ``cls`` are nbgrad's (tensor, node, storage, module)."""
    from ..autograd.graph import Node
    from ..storage import Storage

    types = (tensor_type(), Node, Storage)
    nn = sys.modules.get("nbgrad.nn")
    mod = getattr(nn, "Module", None) if nn is not None else None
    return issubclass(cls, types + ((mod,) if mod is not None else ()))


def is_module(obj) -> bool:
    """An ``nn.Module`` instance (only when nbgrad.nn was imported: no import happens here)."""
    nn = sys.modules.get("nbgrad.nn")
    mod = getattr(nn, "Module", None) if nn is not None else None
    return mod is not None and issubclass(type(obj), mod)


def is_loss(module) -> bool:
    from ..nn.modules.loss import _Loss

    return isinstance(module, _Loss)


LEAN_STEPS = False  # nbgrad's model panel keeps its module hooks for the whole cell


def pause_recording():
    """nbgrad records each node's line by itself: nothing to step aside."""
    return None


def resume_recording(token, twin) -> None:
    return None


def module_hook_api():
    """The module holding nn's global hooks (``register_module_forward_pre_hook``)."""
    from ..nn.modules import module as m

    return m


def named_parameters(module):
    """``module.named_parameters()`` (an iterator of ``(path, tensor)``)."""
    return module.named_parameters()


# --- tensors -----------------------------------------------------------------------------------


def grad_fn(t):
    return t.grad_fn


def version(t) -> int:
    """``t._version`` (0 for an inference tensor, which has no version counter)."""
    return 0 if t.is_inference() else int(t._version)


def base(t):
    """The tensor ``t`` is a view of, or None."""
    return t._base if t._is_view() else None


def grad(t):
    """The raw ``.grad`` slot (no warning for a non-leaf)."""
    g = getattr(t, "_grad", None)
    if g is None and getattr(t, "is_leaf", False):
        g = getattr(t, "grad", None)
    return g


def version_and_grad(t) -> tuple:
    """``(t._version, raw .grad)``: the two things an in-place op or a backward changes on a
    tensor that stays bound to its name (the cheap per-cell check)."""
    return version(t), getattr(t, "_grad", None)


def shape(t) -> tuple:
    return tuple(int(s) for s in t.shape)


def dtype_str(dtype) -> str:
    s = str(dtype)
    return s[len("nbgrad."):] if s.startswith("nbgrad.") else s.replace("torch.", "")


def storage(t):
    """The storage object of ``t`` (identity = its ``id``), or None."""
    try:
        return t.untyped_storage()
    except Exception:  # noqa: BLE001
        return None


def storage_ptr(sobj) -> int:
    return int(sobj.data_ptr()) if sobj is not None else 0


def buffer_key(t) -> int:
    """The identity of the array owning ``t``'s buffer (numpy keeps a view's ``base`` at the
    owner: every view, ``.detach()``, ``.data`` and numpy round trip without a copy names the
    same one); neither an address read through ctypes nor a Storage made for a tensor an op made
    without one (``Tensor._storage``)."""
    d = t._data
    b = d.base
    return id(b if b is not None and type(b) is type(d) else d)


def storage_nbytes(sobj) -> int:
    try:
        return int(sobj.nbytes()) if sobj is not None else 0
    except Exception:  # noqa: BLE001
        return 0


def element_offset(t, ptr: int) -> int:
    """``t.storage_offset()``, from the storage pointer already read."""
    try:
        return (int(t.data_ptr()) - ptr) // max(int(t.element_size()), 1)
    except Exception:  # noqa: BLE001
        return int(t.storage_offset())


def nbytes(t) -> int:
    return int(t.numel()) * int(t.element_size())


def array(t):
    """The backend array (numpy / cupy) a tensor views: read only."""
    return t._data


def version_history(t) -> list:
    return list(t._version_history())


# --- nodes -------------------------------------------------------------------------------------


def node_name(node) -> str:
    """'MulBackward0', 'AccumulateGrad' (PyTorch's ``torch::autograd::`` prefix dropped)."""
    try:
        name = node.name()
    except Exception:  # noqa: BLE001
        name = type(node).__name__
    return str(name).rsplit("::", 1)[-1]


def next_nodes(node) -> tuple:
    """The nodes ``node`` passes gradients to (``next_functions``, Nones dropped)."""
    try:
        return tuple(nf for nf, _ in node.next_functions if nf is not None)
    except Exception:  # noqa: BLE001
        return ()


def saved_tensors(node) -> tuple:
    """The node's saved tensors (objects with ``name``, ``shape``, ``saved_version``, ...)."""
    fn = getattr(node, "_saved_tensors", None)
    if fn is None:
        return ()
    try:
        return tuple(fn())
    except Exception:  # noqa: BLE001
        return ()


def sequence_number(node) -> int:
    """The engine's creation counter of ``node`` (0 when unknown): nodes made inside one module
    call have numbers between :func:`node_counter` read before and after it."""
    try:
        return int(node._seq)
    except Exception:  # noqa: BLE001
        return 0


# The hottest readers (~200 calls a cell: the node counter around each module call, the grad
# mode, the frame capture) keep the engine modules they read in these globals, imported at first
# use (a function-local import costs ~1 us a call; at module level it would run at load time).
_PROV = None  # nbgrad.autograd.provenance
_GRAD_MODE = None  # nbgrad.autograd.grad_mode


def _provenance():
    global _PROV
    from ..autograd import provenance

    _PROV = provenance
    return provenance


def node_count() -> int:
    """How many nodes nbgrad has made so far (the last :func:`sequence_number` given)."""
    return (_PROV or _provenance()).NODES[0]


def grad_on() -> bool:
    global _GRAD_MODE
    g = _GRAD_MODE
    if g is None:
        from ..autograd import grad_mode as g

        _GRAD_MODE = g
    return g.is_grad_enabled()


def saved_value(node, name):
    """The backend array of the saved tensor ``name`` of ``node`` (``node._saved_<name>``)."""
    return getattr(node, f"_saved_{name}")._data


def capture_where(skip=()):
    """The raw place in user code running now (for :func:`location`), or None: the innermost
    frame outside the engine's files (and outside the files in ``skip``)."""
    provenance = _PROV or _provenance()
    if not skip:
        return provenance.capture()
    f = sys._getframe(1)
    while f is not None and (f.f_code.co_filename in provenance.LIB_FILES
                             or f.f_code.co_filename in skip):
        f = f.f_back
    return None if f is None else (f.f_code, f.f_lasti)


def observe_backward(cb) -> None:
    """Have ``cb(outputs, api)`` called before each ``backward`` (``api="backward"``) or
    ``autograd.grad`` (``"grad"``) call, ``outputs`` being the tensors it starts from."""
    from nbgrad.autograd import engine

    if cb not in engine.BACKWARD_OBSERVERS:
        engine.BACKWARD_OBSERVERS.append(cb)


def unobserve_backward(cb) -> None:
    from nbgrad.autograd import engine

    while cb in engine.BACKWARD_OBSERVERS:
        engine.BACKWARD_OBSERVERS.remove(cb)


_ENGINE = None  # nbgrad.autograd.engine (imported at first use)
UNHOOKED_GRADS = True  # its observers run inside the backward call: after_backward works there


def after_backward(cb) -> bool:
    """Have ``cb()`` run once the backward pass running now is over, also when it raised (the
    engine's ``queue_callback``: what it did until then is read); False when none is running."""
    global _ENGINE
    if _ENGINE is None:
        from ..autograd import engine as _ENGINE
    if not _ENGINE._FINAL:
        return False
    _ENGINE.queue_callback(cb, on_error=True)
    return True


def _flat_arrays(tensors):
    """The tensors' numpy arrays, flattened, when they are all on the host, of one floating
    type; else None (device arrays, complex, mixed types: read one by one)."""
    out = [t._data.reshape(-1) for t in tensors]
    dt = out[0].dtype if out else None
    if dt is None or dt.kind != "f" or any(type(a) is not np.ndarray or a.dtype is not dt
                                          for a in out):
        return None
    return out


def flat_values(tensors: list):
    """The values of ``tensors`` one after the other in a new numpy array (one concatenation:
    a copy of its own), or None when they cannot be read together."""
    arrays = _flat_arrays(tensors)
    return None if arrays is None else np.concatenate(arrays)


def grad_stats(grads: list):
    """``[(squared L2 norm, exact zeros (-0.0 too), elements)]`` of each tensor of ``grads``
    (the norm as :func:`grad_batch.record` computes it: a dot product of the array with
    itself), or None when they cannot be read together: the caller reads them one by one."""
    arrays = _flat_arrays(grads)
    if arrays is None:
        return None
    return [(float(a @ a), int(np.count_nonzero(a == 0)), a.size) for a in arrays]


def cut_of(t):
    """``(how, raw where)`` when ``t`` was made by cutting a graph (``"detach"``, ``"data"``,
    ``"detach_"``, ``"from_numpy"``) while provenance was on, else None (:func:`location`
    reads the place)."""
    e = getattr(t, "_extra", None)
    return getattr(e, "cut", None) if e is not None else None


def leaf_variable(node):
    """The leaf tensor of an ``AccumulateGrad`` node, else None."""
    return getattr(node, "variable", None)


def raw_where(obj):
    """What the engine recorded about where ``obj`` (a node) was made; None when nothing."""
    return getattr(obj, "_where", None)


def observe_steps(cb) -> None:
    """nbgrad's optimizers have no step hooks: nothing observed."""


def unobserve_steps(cb) -> None:
    """Nothing to remove."""


def sites_since(mark: int) -> tuple:
    """``(new mark, [raw where])``: the places in user code the engine recorded since ``mark``
    (a count it returned before; 0 at first), newest first. The engine keeps each place once, in
    the order first seen (``provenance.SITES``); when it emptied its table, all it holds."""
    from itertools import islice

    from nbgrad import provenance

    sites = getattr(provenance, "SITES", None)
    if not isinstance(sites, dict):
        return mark, []
    n = len(sites)
    new = n - mark if n >= mark else n
    return n, list(islice(reversed(sites.values()), new))


def location(raw):
    """A Location (``str()`` -> "cell [3] line 1", ``.source``) from :func:`raw_where`'s value."""
    if isinstance(raw, tuple):
        from nbgrad.autograd.provenance import Location

        return Location.of(raw)
    return raw


# --- activity and memory -----------------------------------------------------------------------


def activity() -> tuple:
    """Ever-growing counters (nodes made, version bumps, storages made, storages freed)."""
    from nbgrad.autograd import graph

    return graph.activity()


def memory_stats(device: str) -> dict:
    from nbgrad import backend

    return dict(backend.memory_stats(device))


# --- the cell's lifecycle and errors -----------------------------------------------------------


def cell_started(ip=None, record: bool = True) -> None:
    """nbgrad records provenance by itself: nothing to start."""


def cell_finished() -> list:
    return []


def error_context(exc) -> dict | None:
    """``err.nbgrad_context``: the plain explanation nbgrad attached to an autograd error."""
    try:
        ctx = getattr(exc, "nbgrad_context", None)
    except Exception:  # noqa: BLE001 - a user exception with a raising __getattr__
        return None
    return ctx if isinstance(ctx, dict) else None


def is_engine_error(exc) -> bool:
    """A RuntimeError whose traceback ends inside nbgrad (outside its notebook layer)."""
    if not isinstance(exc, RuntimeError):
        return False
    fname = _last_frame_file(exc)
    return "/nbgrad/" in fname and "/nbgrad/notebook/" not in fname


def _last_frame_file(exc) -> str:
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return "" if last is None else last.tb_frame.f_code.co_filename.replace("\\", "/")


# --- backward step by step (notebook/stepper.py) ----------------------------------------------


def formula_lines(node) -> list:
    """The derivative formulas the node applies, as its row writes them (``["self: g * (1 -
    result²)"]``, nbgrad.ops.formula_text); for CopySlices, the base's gradient with the view's
    part replaced by what the in-place op's node makes of it, then that node's formulas; for a
    custom Function, ``"MyFn.backward:"`` and its body as written in its class; ``[]`` for
    AccumulateGrad (the panel writes ``x.grad += g``) and a node without any of these."""
    from nbgrad.ops.formula_text import body_lines, formula_lines as lines

    cls = getattr(type(node), "_fn_cls", None)
    if cls is not None:  # a custom Function's node: its class's backward, as the user wrote it
        src = body_lines(getattr(cls, "backward", None))
        return [f"{cls.__name__}.backward:"] + ["    " + ln for ln in src] if src else []
    if type(node).__name__ == "CopySlices":
        fn = getattr(node, "fn", None)  # (None once its saved values are freed)
        inner = "the in-place op's node" if fn is None else fn.name().rsplit("::", 1)[-1]
        return [f"self: g, its view's part replaced by {inner}(g[view])[0]"] + \
            ([] if fn is None else [f"  {inner}: {ln}" for ln in formula_lines(fn)])
    row = getattr(type(node), "_row", None)
    if row is None or not hasattr(row, "formulas"):
        return []
    return lines(row)


def saved_inputs(node) -> list:
    """``[(name, value)]``: what the node saved for its formulas, by the formulas' names: a
    backend array (the saved tensor's data as saved, not version-checked: a stale one is the
    walk's to report when it runs), a Python number or tuple, or None once freed. A node
    without a row: its saved tensors by name."""
    from nbgrad.autograd.graph import SavedTensor

    row = getattr(type(node), "_row", None)
    saved = getattr(node, "_saved", None)
    out = []
    if row is not None and hasattr(row, "names") and saved is not None:
        for name, s in zip(row.names, saved):
            if type(s) is SavedTensor:
                out.append((name, None if s.released else s._data))
            elif s is None or isinstance(s, (int, float, bool, tuple)):
                out.append((name, s))
        return out
    for s in saved_tensors(node):
        if type(s) is SavedTensor:
            out.append((s.name, None if s.released else s._data))
    return out


def backward_walk(root, keep):
    """``root.backward()`` one node at a time (nbgrad.autograd.stepping.BackwardWalk)."""
    from nbgrad.autograd.stepping import BackwardWalk

    return BackwardWalk(root, keep=keep)
