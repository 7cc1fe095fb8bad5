"""PyTorch's reading of the adapter contract: the same functions as ``adapter_nbgrad``, over torch's
public introspection.

``grad_fn``, ``next_functions``, ``name()``, ``_raw_saved_*`` / ``_saved_*``, ``metadata``,
``_version``, ``_base``, ``_is_view()``, ``untyped_storage()``, ``storage_offset()``,
``stride()``, ``retains_grad``, ``is_leaf``, the global module hooks, and for CUDA the caching
allocator's ``memory_stats()`` / ``memory._snapshot()``. What torch does not record (the user's
line of each node and of each in-place write, the cuts) the recorder of ``torch_record`` stamps
while a cell runs: on ``grad_fn.metadata`` and in a bounded map keyed by storage address.

A stale saved tensor is found by torch's own check, never by a guess: reading
``node._saved_<name>`` unpacks it, and torch raises its "modified by an inplace operation ... is
at version 1; expected version 0" error; the versions are read from that message.

Only ``adapter`` imports this module, once ``torch`` is in ``sys.modules``. Any torch internal
read here may be missing or raise in another torch version (2.1 to 2.13 are in use): each reader
returns plain data or raises for that one object, and what could not be read is said once, in
one line (:func:`cell_finished`).
"""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import torch

from . import torch_record as R
from .adapter_nbgrad import (  # noqa: F401 - nbgrad's API is PyTorch's: these read both alike
    base,
    grad_fn,
    nbytes,
    next_nodes,
    node_name,
    shape,
    storage,
    storage_nbytes,
    storage_ptr,
    version,
)

ENGINE = "torch"
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_Node = torch.autograd.graph.Node
_seq_nr = getattr(getattr(torch._C, "_autograd", None), "_get_sequence_nr", None)


def usable() -> bool:
    return hasattr(torch, "Tensor") and hasattr(torch, "autograd")


def owns(cls) -> bool:
    """Tensors, ``grad_fn`` nodes (C++ classes that ``Node``'s subclass hook recognises),
    storages and modules of torch."""
    nn = sys.modules.get("torch.nn")
    types = (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)
    if nn is not None:
        types += (nn.Module,)
    try:
        return issubclass(cls, types) or issubclass(cls, _Node)
    except TypeError:
        return False


def tensor_type():
    return torch.Tensor


def is_module(obj) -> bool:
    nn = sys.modules.get("torch.nn")
    return nn is not None and issubclass(type(obj), nn.Module)


def is_loss(module) -> bool:
    from torch.nn.modules.loss import _Loss

    return isinstance(module, _Loss)


def named_parameters(module):
    return module.named_parameters()


LEAN_STEPS = True  # after a cell's watched steps: no global module hooks, the recorder aside


def pause_recording():
    return R.pause()


def resume_recording(token, twin) -> None:
    R.resume(token, twin)


def module_hook_api():
    """torch's global module hooks, the hooks wrapped so that what they read while a cell runs
    is not seen by the recorder (``torch._C.DisableTorchFunction``)."""
    return _HookApi


class _HookApi:
    @staticmethod
    def register_module_forward_pre_hook(hook):
        from torch.nn.modules import module as m

        return m.register_module_forward_pre_hook(_unrecorded(hook))

    @staticmethod
    def register_module_forward_hook(hook):
        from torch.nn.modules import module as m

        return m.register_module_forward_hook(_unrecorded(hook))


def _unrecorded(hook):
    off, state = torch._C.DisableTorchFunction, R.STATE

    def nbgrad_panel_module_hook(*args):
        if state.mode is None:  # (record=off: nothing to step aside from)
            return hook(*args)
        with off():
            return hook(*args)

    return nbgrad_panel_module_hook


# --- tensors -----------------------------------------------------------------------------------





def grad(t):
    """``.grad`` of a leaf or of a tensor that retains it (no warning for other non-leaves)."""
    return t.grad if (t.is_leaf or t.retains_grad) else None


def version_and_grad(t) -> tuple:
    return version(t), grad(t)






def after_backward(cb) -> bool:
    """Have ``cb()`` run once the backward pass running now is over (torch's engine's final
    callbacks, ``Variable._execution_engine.queue_callback``); False when none is running."""
    try:
        torch.autograd.Variable._execution_engine.queue_callback(cb)
    except Exception:  # noqa: BLE001 - not in a backward pass, or an engine without it
        return False
    return True


_FLATTEN = getattr(getattr(torch._C, "_nn", None), "flatten_dense_tensors", None)


def flat_values(tensors: list):
    """The values of ``tensors`` one after the other in a new numpy array (one ``torch.cat``: a
    copy of its own; from a GPU, float32 for types numpy lacks), or None when they cannot be
    read together (devices, complex)."""
    try:
        with torch._C.DisableTorchFunction(), torch.no_grad():
            if len(tensors) > 1 and _FLATTEN is not None:  # (one C++ call: a third of cat's
                flat = _FLATTEN(tensors)  # time from Python; for one tensor it is a view)
            else:
                flat = torch.cat([t.detach().reshape(-1) for t in tensors])
            if flat.is_complex():
                return None
            if flat.device.type != "cpu":
                flat = flat.cpu()
            if flat.dtype not in _NUMPY_DTYPES:
                flat = flat.float()
            return flat.resolve_neg().numpy()
    except Exception:  # noqa: BLE001 - the caller reads them one by one
        return None


def grad_stats(grads: list):
    """``[(squared L2 norm, exact zeros (-0.0 too), elements)]`` of each tensor of ``grads``,
    read through numpy views (CPU tensors of numpy's types: no copy), else from
    :func:`flat_values`; None when they cannot be read together: the caller reads them one by
    one."""
    try:
        with torch._C.DisableTorchFunction():
            if all(g.device.type == "cpu" and g.dtype in _NUMPY_DTYPES and not g.requires_grad
                   and not g.is_conj() and not g.is_neg() for g in grads):
                out = []
                for g in grads:
                    a = g.numpy().reshape(-1)
                    out.append((float(a @ a), int(np.count_nonzero(a == 0)), a.size))
                return out
    except Exception:  # noqa: BLE001 - read them from one concatenation
        pass
    a = flat_values(grads)
    return None if a is None else _segment_stats(a, [int(g.numel()) for g in grads])


def _segment_stats(a, sizes) -> list:
    """Per consecutive segment of ``a`` (lengths ``sizes``): squared norm (a dot product of the
    segment with itself, as numpy sums it), exact zeros, length."""
    zeros = np.flatnonzero(a == 0)  # (few in a gradient: no temporary the size of ``a``)
    ends, at = [], 0
    for n in sizes:
        at += n
        ends.append(at)
    zc = np.searchsorted(zeros, ends).tolist()
    out, at, zprev = [], 0, 0
    for n, e, z in zip(sizes, ends, zc):
        s = a[at:e]
        out.append((float(s @ s) if n else 0.0, z - zprev, n))
        at, zprev = e, z
    return out


def buffer_key(t) -> int:
    """The address of ``t``'s storage's buffer."""
    return storage_ptr(storage(t))


def element_offset(t, ptr: int) -> int:
    return int(t.storage_offset())



def array(t):
    """A numpy array of ``t``'s values: a view on CPU, a copy from a GPU or of a sparse tensor's
    dense value; bfloat16 and other types numpy lacks as float32. Never recorded as a cut."""
    with torch._C.DisableTorchFunction():
        t = t.detach()
        if t.layout != torch.strided:  # (a sparse gradient: its dense value)
            t = t.to_dense()
        if t.device.type != "cpu":
            t = t.cpu()
        if t.dtype not in _NUMPY_DTYPES:
            t = t.float()
        return t.resolve_conj().resolve_neg().numpy()


_NUMPY_DTYPES = {torch.float16, torch.float32, torch.float64, torch.int8, torch.int16,
                 torch.int32, torch.int64, torch.uint8, torch.bool}


def version_history(t) -> list:
    """``[(version, op name, raw where)]`` of the in-place writes the recorder saw into ``t``'s
    storage, oldest first."""
    return R.writes_of(storage_ptr(storage(t)), version(t))


def cut_of(t):
    """``(how, raw where)`` when the recorder saw ``t`` made by cutting a graph (``detach``,
    ``data``, ``detach_``, ``numpy``: a numpy round trip), else None."""
    return R.cut_of(t, storage_ptr(storage(t)))


# --- nodes -------------------------------------------------------------------------------------




_SAVED_NAMES: dict = {}  # node type -> the names of its saved tensors (``_raw_saved_<name>``)


def _saved_names(node) -> tuple:
    cls = type(node)
    names = _SAVED_NAMES.get(cls)
    if names is None:
        names = _SAVED_NAMES[cls] = tuple(
            a[len("_raw_saved_"):] for a in dir(node) if a.startswith("_raw_saved_"))
    return names


_VERSIONS = re.compile(r"is at version (\d+); expected version (\d+)")
# torch < 2.5 (2.4.1 tried): a SavedTensor has neither .data nor .unpack_hook
_NO_RAW_DATA = not hasattr(getattr(torch._C._autograd, "SavedTensor", object), "data")


class Saved:
    """One tensor a torch node saved, read through torch's own unpack check: ``is_stale`` is
    True exactly when reading ``node._saved_<name>`` raised torch's in-place error."""

    __slots__ = ("name", "shape", "dtype", "nbytes", "data_ptr", "saved_version", "version",
                 "is_stale", "released", "is_output", "error")

    def modified_by(self) -> list:
        """The in-place writes the recorder saw into its storage since it was saved."""
        if not self.data_ptr:
            return []
        return [w for w in R.writes_of(self.data_ptr, self.version)
                if w[0] > self.saved_version]


def saved_tensors(node) -> tuple:
    """The node's saved tensors (:class:`Saved`). A tensor saved with unpack hooks
    (``saved_tensors_hooks``: checkpointing, offloading) is not unpacked, so that reading never
    runs user code; it is shown as not stale."""
    out = []
    for name in _saved_names(node):
        try:
            raws = getattr(node, "_raw_saved_" + name)
        except Exception:  # noqa: BLE001
            continue
        many = isinstance(raws, (list, tuple))
        for j, raw in enumerate(raws if many else (raws,)):
            s = _read_saved(node, name, raw, j if many else None)
            if s is not None:
                out.append(s)
    return tuple(out)


def _read_saved(node, name, raw, index):
    if raw is None:
        return None
    s = Saved()
    s.name = name if index is None else f"{name}[{index}]"
    s.is_output = name.startswith("result")
    s.error = None
    try:
        data = raw.data
    except Exception:  # noqa: BLE001 - older torch: no .data on a SavedTensor
        data = None
    hooked = getattr(raw, "unpack_hook", None) is not None
    s.released = False
    if data is None and not hooked:  # never saved (an undefined tensor), or freed by backward
        try:
            t = getattr(node, "_saved_" + name)
            if t is None:
                return None
            if _NO_RAW_DATA and isinstance(t, torch.Tensor):
                data = t  # (older torch: the tensor unpacked, after torch's version check)
        except RuntimeError as exc:
            text = str(exc)
            s.released = "freed" in text
            if not s.released and not _VERSIONS.search(text):  # (stale: read below)
                return None
    if data is not None and not hooked:
        s.shape, s.dtype = tuple(int(d) for d in data.shape), data.dtype
        s.nbytes = int(data.numel()) * int(data.element_size())
        try:
            s.data_ptr = int(data.untyped_storage().data_ptr())
        except Exception:  # noqa: BLE001
            s.data_ptr = 0
        s.version = s.saved_version = version(data)
    else:
        s.shape, s.dtype, s.nbytes, s.data_ptr = None, None, 0, 0
        s.version = s.saved_version = 0
    s.is_stale = False
    if s.released or hooked:
        return s
    try:
        getattr(node, "_saved_" + name)  # torch's check: raises when stale
    except RuntimeError as exc:
        text = str(exc)
        m = _VERSIONS.search(text)
        if m:
            s.is_stale = True
            s.version, s.saved_version = int(m.group(1)), int(m.group(2))
            s.error = text
        elif "after they have already been freed" in text:
            s.released = True
    return s


def sequence_number(node) -> int:
    try:
        return int(node._sequence_nr())
    except Exception:  # noqa: BLE001
        return 0


def node_count() -> int:
    """The last sequence number torch gave a node in this thread (``_get_sequence_nr`` peeks
    at the next); without it, the nodes the recorder stamped."""
    if _seq_nr is not None:
        return int(_seq_nr()) - 1
    return R.STATE.nodes


def grad_on() -> bool:
    return torch.is_grad_enabled()


def saved_value(node, name):
    """The values of the saved tensor ``name`` of ``node`` (a numpy array)."""
    return array(getattr(node, f"_saved_{name}"))


def leaf_variable(node):
    return getattr(node, "variable", None) if node_name(node) == "AccumulateGrad" else None


def raw_where(obj):
    """The ``(code, lasti)`` of the user's line that made the node ``obj``: the recorder's
    stamp on ``obj.metadata`` (an in-place op's rebased node), else the range of node numbers
    its call made; None when the recorder did not see it."""
    try:
        where = obj.metadata.get(R.KEY)
        return where if where is not None else R.where_of(obj._sequence_nr())
    except Exception:  # noqa: BLE001
        return None


def capture_where(skip=()):
    """The innermost frame outside torch's and nbgrad's files (and ``skip``'s)."""
    from nbgrad.provenance import LIB_FILES, site

    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if fn not in LIB_FILES and fn not in skip and not fn.startswith(_TORCH_DIR):
            return site(f.f_code, f.f_lasti)
        f = f.f_back
    return None


def observe_backward(cb) -> None:
    if cb not in R.STATE.observers:
        R.STATE.observers.append(cb)


def unobserve_backward(cb) -> None:
    while cb in R.STATE.observers:
        R.STATE.observers.remove(cb)


def observe_steps(cb) -> None:
    R.observe_steps(cb)


def unobserve_steps(cb) -> None:
    R.unobserve_steps(cb)


def sites_since(mark: int) -> tuple:
    return R.sites_since(mark)


def activity() -> tuple:
    """(nodes made, in-place writes + backward calls + cuts seen, 0, 0)."""
    return (node_count(), R.STATE.events, 0, 0)


# --- memory --------------------------------------------------------------------------------------


def memory_stats(device: str) -> dict:
    """torch's CUDA caching allocator, when the user's session has initialised CUDA (never
    initialised here): ``torch_cuda_*`` keys (:func:`cuda_summary`). CPU: nothing (torch keeps
    no count; the panel counts the storages it can reach)."""
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_available() or not cuda.is_initialized():
        return {}
    segments = None
    try:
        segments = cuda.memory._snapshot().get("segments")
    except Exception:  # noqa: BLE001 - an allocator without snapshots (older torch, ROCm)
        segments = None
    return cuda_summary(cuda.memory_stats(), segments)


def cuda_summary(stats: dict, segments=None) -> dict:
    """The allocator's state in a few numbers, from ``torch.cuda.memory_stats()`` (its documented
    flat keys ``"allocated_bytes.all.current"``, ...) and the ``segments`` of
    ``torch.cuda.memory._snapshot()`` (dicts with ``total_size``, ``allocated_size``,
    ``blocks``: ``[{"size", "state"}]``). Keys missing from either are left out."""
    pick = {"allocated": "allocated_bytes.all.current", "reserved": "reserved_bytes.all.current",
            "active": "active_bytes.all.current", "peak": "allocated_bytes.all.peak",
            "inactive_split": "inactive_split_bytes.all.current",
            "allocations": "allocation.all.current", "alloc_retries": "num_alloc_retries",
            "ooms": "num_ooms", "segments": "segment.all.current"}
    out = {}
    for k, key in pick.items():
        v = stats.get(key)
        if isinstance(v, (int, float)):
            out[f"torch_cuda_{k}"] = int(v)
    if segments is not None:
        largest_free = 0
        n = 0
        for seg in segments:
            n += 1
            for b in seg.get("blocks") or ():
                if b.get("state") == "inactive":
                    largest_free = max(largest_free, int(b.get("size", 0)))
        out["torch_cuda_segments"] = n
        out["torch_cuda_largest_free_block"] = largest_free
    return out


# --- the cell's lifecycle and errors -----------------------------------------------------------


def cell_started(ip=None, record: bool = True) -> None:
    R.set_on(record)
    R.start(ip)


def set_recording(on: bool) -> None:
    R.set_on(on)


def cell_finished() -> list:
    notes = R.stop()
    if _MISSING and not _SAID:
        _SAID.append(True)
        notes.append(f"torch {torch.__version__} has no {', '.join(_MISSING)}")
    return notes


def _missing() -> list:
    """What this torch lacks of what the panel reads (said once, in one line)."""
    out = []
    if not hasattr(_Node, "metadata"):
        out.append("grad_fn.metadata (the lines of nodes are not shown)")
    if _seq_nr is None:
        out.append("_get_sequence_nr (no lines of nodes, no module clusters)")
    if not hasattr(torch._C._autograd, "SavedTensor"):
        out.append("_raw_saved_* (saved tensors are not shown)")
    elif _NO_RAW_DATA:
        out.append("SavedTensor.data (saved tensors are read through torch's unpack: an unpack "
                   "hook of saved_tensors_hooks runs when the panel reads one; a stale one's "
                   "in-place write is not named)")
    return out


_MISSING = _missing()
_SAID: list = []


def error_context(exc) -> dict | None:
    """torch's in-place error in the shape of nbgrad's context (``kind="saved_modified"``, the
    tensor, the versions); the node and the lines come from the graph's stale saved tensor."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        return None
    m = _VERSIONS.search(text)
    if not isinstance(exc, RuntimeError) or "modified by an inplace operation" not in text \
            or m is None:
        if isinstance(exc, RuntimeError) and "backward through the graph a second time" in text:
            return {"kind": "backward_twice"}
        return None
    t = re.search(r"operation: (\[[^\]]*\[[^\]]*\]\])", text)
    return {"kind": "saved_modified", "tensor": t.group(1) if t else "a tensor",
            "version": int(m.group(1)), "saved_version": int(m.group(2))}


def is_engine_error(exc) -> bool:
    """A RuntimeError whose traceback ends inside torch."""
    if not isinstance(exc, RuntimeError):
        return False
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and last.tb_frame.f_code.co_filename.startswith(_TORCH_DIR)
