"""What torch does not record and the panel shows: the user's line of each node, of each in-place
write and of each cut, seen by a lean ``TorchFunctionMode`` entered around each cell.

While a cell runs (``pre_run_cell`` to ``post_run_cell``; ``%nbgrad set record=off`` leaves it
out) every torch call passes through :class:`Recorder`, which calls the function and then:

- when the call made nodes (torch's node counter, ``_get_sequence_nr``, moved), keeps the range
  of their sequence numbers with ``(code, lasti)`` of the innermost frame of a notebook cell (a
  ``sys._getframe`` walk; the line is worked out only when shown): a composite's inner nodes
  (``linear``'s ``TBackward0``) get its line too, and no node's Python object is made;
- for an in-place op (``add_``, ``t[i] = v``, ``out=``, ``_foreach_*_``, ``inplace=True``), keeps
  ``(version after, op name, where)`` for the storage it wrote, keyed by the storage's address,
  a few per storage and a bounded number of storages (a storage freed and another made at the
  same address is told apart by its version: entries above the current version are dropped),
  and stamps the rebased node's ``grad_fn.metadata[KEY]``;
- for ``.detach()``, ``.data``, ``.detach_()`` and ``.numpy()`` of a tensor that requires grad,
  the cut and its line: by ``id`` with a weak reference (a tensor), or by address (a numpy
  array, for the ``torch.from_numpy`` that may follow);
- before ``Tensor.backward`` / ``torch.autograd.backward`` / ``torch.autograd.grad``, calls the
  panel's backward observers (the loss of each step, the NaN origin).

It never changes what torch computes: the function is called with the same arguments, its result
or error passes through untouched, versions are not touched (``metadata`` is a plain dict on the
node), and nothing holds a tensor or a node (a code object per line, weak references).
"""

from __future__ import annotations

import importlib
import sys
import weakref
from array import array
from bisect import bisect_right
from functools import partial

import torch
from torch.overrides import TorchFunctionMode

KEY = "nbgrad_where"  # grad_fn.metadata key: (code, lasti) of the user's line that made it
MAX_STORAGES = 4096  # storages whose in-place writes are remembered (then the map starts over)
WRITES_PER_STORAGE = 8
MAX_CUTS = 4096
MAX_RANGES = 1 << 18  # node-number ranges kept (24 bytes each: 6 MB at most)
MAX_SITES = 1 << 16


def _lasting_storages() -> bool:
    """A tensor's ``untyped_storage()`` is one Python object for the storage's whole life (torch
    keeps it, as it keeps a tensor's): a weak reference to it tells when the storage is freed."""
    try:
        t = torch.zeros(1)
        return t.untyped_storage() is t.untyped_storage()
    except Exception:  # noqa: BLE001
        return False


_LASTING_STORAGES = _lasting_storages()
_PANEL_DIR = __file__.rsplit("/", 1)[0] + "/"
_getframe = sys._getframe
_Tensor = torch.Tensor

PLAIN, INPLACE, CUT, BACKWARD = 0, 1, 2, 3
_NOT_WRITES = frozenset(("requires_grad_", "share_memory_", "retain_grad_", "record_stream_",
                         "_fix_weakref_", "pin_memory_"))
_KIND: dict = {}  # the torch function -> its kind (classified once)


def _classify(func) -> int:
    name = getattr(func, "__name__", "") or ""
    if func in _BACKWARDS:
        kind = BACKWARD
    elif name in ("detach", "detach_", "numpy"):
        kind = CUT
    elif name == "__get__":
        owner = getattr(func, "__self__", None)
        kind = CUT if getattr(owner, "__name__", "") == "data" else PLAIN
    elif name in ("__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                  "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__",
                  "__ilshift__", "__irshift__", "__imatmul__") or (
            name.endswith("_") and not name.startswith("__") and name not in _NOT_WRITES):
        kind = INPLACE
    else:
        kind = PLAIN
    if len(_KIND) < 65536:
        _KIND[func] = kind
    return kind


_BACKWARDS = {}  # the functions that start a backward -> "backward" / "grad"


class _State:
    """The recorder's tables; one per kernel."""

    def __init__(self):
        self.on = True  # %nbgrad set record=on|off
        self.mode = None  # the Recorder while a cell runs
        self.cells = None  # IPython's {cell file name: execution count}, or None
        self.writes: dict = {}  # storage address -> [(version after, op name, where)]
        self.cuts: dict = {}  # id(tensor) -> (weakref, how, where)
        self.array_cuts: dict = {}  # address of a numpy array's memory -> (how, where)
        self.sites: dict = {}  # (id(code), lasti) -> (code, lasti), first seen first
        self.events = 0  # in-place writes, cuts and backward calls seen
        self.starts, self.ends = array("q"), array("q")  # node-number ranges, in order ...
        self.wheres: list = []  # ... and the (code, lasti) of the call that made each
        self.nodes = 0  # nodes stamped (the node counter when torch has no _get_sequence_nr)
        self.observers: list = []
        self.step_observers: list = []  # cb(optimizer, "pre" / "post") at each optimizer step
        self.opt_hooks = None  # handles of torch's global optimizer step hooks
        self.suspended = None  # DisableTorchFunction entered for an optimizer step
        self.step_where = None
        self.paused = 0  # nesting of model calls the recorder stepped aside for (lean steps)
        self.lean = False  # lean steps began this cell
        self.steps: dict = {}  # id(optimizer) -> (weakref, where) of its last lean step
        self.faults: list = []  # one line per kind of fault, said once after the cell
        self.said: set = set()


STATE = _State()


def _site(code, lasti):
    s = STATE.sites.get((id(code), lasti))
    if s is None:
        if len(STATE.sites) >= MAX_SITES:
            STATE.sites.clear()
        s = STATE.sites[(id(code), lasti)] = (code, lasti)
    return s


def _where(skip_panel=False, depth=2):
    """(code, lasti) of the innermost frame of a notebook cell (outside IPython: of the first
    frame outside torch and nbgrad), or None; with ``skip_panel``, None when the panel's own
    code made the call (its reads are no user's cut or write)."""
    cells = STATE.cells
    f = _getframe(depth)  # (2: the caller of __torch_function__; 3 from its helpers)
    if cells is not None:
        while f is not None:
            code = f.f_code
            if code.co_filename in cells:
                return _site(code, f.f_lasti)
            if skip_panel and code.co_filename.startswith(_PANEL_DIR):
                return None
            f = f.f_back
        return None
    from nbgrad.provenance import LIB_FILES

    while f is not None:
        fn = f.f_code.co_filename
        if skip_panel and fn.startswith(_PANEL_DIR):
            return None
        if fn not in LIB_FILES and not fn.startswith(_TORCH_DIR):
            return _site(f.f_code, f.f_lasti)
        f = f.f_back
    return None


_TORCH_DIR = torch.__file__.rsplit("/", 1)[0] + "/"


_seq_nr = getattr(getattr(torch._C, "_autograd", None), "_get_sequence_nr", None) or int


class Recorder(TorchFunctionMode):
    """The mode entered around a cell; lean: a dict lookup by function, the call, torch's node
    counter read before and after it, and, when the call made nodes, a frame walk and one entry
    in the table of node-number ranges (measured in benchmarks/bench_torch_panel.py: touching
    ``grad_fn`` of each output instead, its Python object and ``metadata`` dict, cost ~3 us per
    node)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        __tracebackhide__ = True  # noqa: F841 - IPython shows the user's line, not this frame
        kind = _KIND.get(func)
        if kind is None:
            kind = _classify(func)
        if kind == BACKWARD:
            _backward(func, args, kwargs)
        before = _seq_nr()
        out = func(*args, **kwargs) if kwargs else func(*args)
        try:
            after = _seq_nr()
            if after != before:
                _made(before, after)
            if kind == PLAIN:
                if kwargs and kwargs.get("out") is not None:
                    _wrote(kwargs["out"], getattr(func, "__name__", "out="))
                elif kwargs and kwargs.get("inplace") and args:
                    _wrote(args[0], getattr(func, "__name__", "") + "(inplace=True)")
            elif kind == INPLACE:
                if args:
                    _wrote(args[0], getattr(func, "__name__", "?"))
            elif kind == CUT:
                _cut(func, args, out)
        except Exception as exc:  # noqa: BLE001 - recording never breaks the user's op
            _fault(f"could not record every op (the first: "
                   f"{getattr(func, '__name__', '?')}, {type(exc).__name__})", "record")
        return out


def _made(before: int, after: int) -> None:
    """Nodes ``before <= seq < after`` were made by the call running now: their line, as one
    range (merged with the previous one when the same line made both)."""
    STATE.nodes += after - before
    _range(before, after, _where(depth=3))


def _range(before: int, after: int, where) -> None:
    ends, wheres = STATE.ends, STATE.wheres
    if wheres and wheres[-1] is where and ends[-1] == before:
        ends[-1] = after
        return
    if len(wheres) >= MAX_RANGES:  # the oldest half goes (their nodes are mostly freed)
        half = MAX_RANGES // 2
        del STATE.starts[:half], ends[:half], wheres[:half]
    STATE.starts.append(before)
    ends.append(after)
    wheres.append(where)


def where_of(seq: int):
    """``(code, lasti)`` of the call that made the node numbered ``seq``, or None."""
    ends = STATE.ends
    i = bisect_right(ends, seq)
    if i < len(ends) and STATE.starts[i] <= seq:
        w = STATE.wheres[i]
        if type(w) is _Shift:  # a lean step's node: the line of its twin in the watched step
            return where_of(seq - w.delta) if w.delta > 0 else None
        return w
    return None


class _Shift:
    """A range of node numbers made by a model call the recorder stepped aside for, the same
    count of nodes as the watched call ``delta`` numbers earlier: each node's line is its
    twin's (the same code made them in the same order)."""

    __slots__ = ("delta",)

    def __init__(self, delta):
        self.delta = delta


def pause():
    """Step aside for a model call of a lean training step (see ``ModelTracker``): the mode
    leaves torch's stack until :func:`resume`. Returns ``(node number before, where)`` of the
    call, or None when nothing is recording (record=off, another mode above ours)."""
    mode = STATE.mode
    if mode is None or STATE.suspended is not None:
        return None
    if STATE.paused:
        STATE.paused += 1
        return None
    STATE.lean = True
    try:
        from torch.overrides import _get_current_function_mode_stack

        stack = _get_current_function_mode_stack()
        if not stack or stack[-1] is not mode:
            return None
        where = _where(depth=2)
        mode.__exit__(None, None, None)
    except Exception as exc:  # noqa: BLE001 - a torch without the stack: recorded op by op
        _fault(f"lean steps unavailable ({type(exc).__name__})", "pause")
        return None
    STATE.paused = 1
    return (_seq_nr(), where)


def resume(token, twin=None) -> None:
    """Back on torch's stack after the call :func:`pause` stepped aside for; its nodes get the
    lines of ``twin`` (``(first, end)`` node numbers of the watched call of the same model)
    when it made as many, else the line of the call."""
    if STATE.paused > 1:
        STATE.paused -= 1
        return
    if token is None or not STATE.paused:
        return
    STATE.paused = 0
    mode = STATE.mode
    if mode is None:
        return
    before, where = token
    mode.__enter__()
    after = _seq_nr()
    if after == before:
        return
    STATE.nodes += after - before
    if twin is not None and twin[1] - twin[0] == after - before and twin[0] < before:
        where = _Shift(before - twin[0])
    _range(before, after, where)


def _wrote(target, op: str) -> None:
    """An in-place write into ``target`` (a tensor, or a list of them): its storage's write
    history, and the rebased node's line."""
    where = _where(skip_panel=True, depth=3)
    if where is None and STATE.cells is not None:
        return
    STATE.events += 1
    for t in (target if isinstance(target, (list, tuple)) else (target,)):
        if isinstance(t, _Tensor):
            _write(t, op, where)


class _Writes(list):
    """A storage's writes, ``owner``: a weak reference to it (its entry goes when it is freed:
    another storage made at the same address has none of its writes), None on a torch whose
    storages have no lasting Python object (then the address alone keys them)."""

    __slots__ = ("owner",)


def _forget_writes(ref, _ptr=None):
    w = STATE.writes.get(_ptr)
    if w is not None and w.owner is ref:
        del STATE.writes[_ptr]


def _write(t, op, where) -> None:
    s = t.untyped_storage()
    ptr = s.data_ptr()
    w = STATE.writes.get(ptr)
    if w is not None and w.owner is not None and w.owner() is not s:
        w = None  # (a storage freed before its callback ran: another at its address)
    if w is None:
        if len(STATE.writes) >= MAX_STORAGES:
            STATE.writes.clear()
        w = STATE.writes[ptr] = _Writes()
        w.owner = None
        if _LASTING_STORAGES:
            try:
                w.owner = weakref.ref(s, partial(_forget_writes, _ptr=ptr))
            except TypeError:  # noqa: PERF203 - a storage without weak references
                pass
    elif len(w) >= WRITES_PER_STORAGE:
        del w[0]
    w.append((0 if t.is_inference() else t._version, op, where))
    fn = t.grad_fn
    if fn is not None:
        md = fn.metadata
        if KEY not in md:
            md[KEY] = where


def _cut(func, args, out) -> None:
    src = args[0] if args else None
    if not isinstance(src, _Tensor) or not src.requires_grad:
        return
    where = _where(skip_panel=True, depth=3)
    if where is None and STATE.cells is not None:
        return
    name = getattr(func, "__name__", "")
    how = "data" if name == "__get__" else name
    STATE.events += 1
    if how == "numpy":
        if len(STATE.array_cuts) >= MAX_CUTS:
            STATE.array_cuts.clear()
        try:
            STATE.array_cuts[int(out.__array_interface__["data"][0])] = (how, where)
        except Exception:  # noqa: BLE001 - not a plain numpy array
            pass
        return
    if not isinstance(out, _Tensor):
        return
    cuts = STATE.cuts
    if len(cuts) >= MAX_CUTS:
        cuts.clear()
    key = id(out)
    cuts[key] = (weakref.ref(out, lambda _r, k=key, c=cuts: c.pop(k, None)), how, where)


def cut_of(t, ptr: int):
    """``(how, where)`` of the cut that made ``t``, or None."""
    rec = STATE.cuts.get(id(t))
    if rec is not None and rec[0]() is t:
        return rec[1], rec[2]
    rec = STATE.array_cuts.get(ptr) if ptr else None
    if rec is not None and not t.requires_grad:
        return "numpy", rec[1]
    return None


def writes_of(ptr: int, version: int) -> list:
    """The writes remembered for the storage at ``ptr`` up to ``version`` (later ones were into
    an older storage at the same address)."""
    return [w for w in STATE.writes.get(ptr, ()) if w[0] <= version] if ptr else []


def _backward(func, args, kwargs) -> None:
    STATE.events += 1
    if not STATE.observers:
        return
    api = _BACKWARDS.get(func, "backward")
    first = args[0] if args else (kwargs or {}).get("tensors", (kwargs or {}).get("outputs"))
    outputs = (first,) if isinstance(first, _Tensor) else tuple(first or ())
    for cb in list(STATE.observers):
        try:
            cb(outputs, api)
        except Exception:  # noqa: BLE001 - the backward runs whatever happens here
            _fault("a backward observer failed")


def _fault(text: str, key=None) -> None:
    """A one-line note for after the cell, once per ``key`` (the text) in a cell."""
    key = key or text
    if key not in STATE.said and len(STATE.faults) < 8:
        STATE.said.add(key)
        STATE.faults.append(text)


def sites_since(mark: int) -> tuple:
    from itertools import islice

    n = len(STATE.sites)
    new = n - mark if n >= mark else n
    return n, list(islice(reversed(STATE.sites.values()), new))


def _observe_step(optimizer, phase) -> None:
    for cb in STATE.step_observers:
        try:
            cb(optimizer, phase)
        except Exception:  # noqa: BLE001 - the step runs whatever happens here
            _fault("an optimizer step observer failed")


def _opt_pre(optimizer, args, kwargs) -> None:
    """Before an optimizer's step: the recorder steps aside (a step is hundreds of small
    in-place ops on parameters and state: recording each would cost more than the step); then
    the step observers (recording or not)."""
    if STATE.mode is not None and STATE.suspended is None:
        off = torch._C.DisableTorchFunction()
        off.__enter__()
        STATE.suspended = off
        STATE.step_where = _where(skip_panel=True)
    if STATE.step_observers:
        _observe_step(optimizer, "pre")


def _opt_post(optimizer, args, kwargs) -> None:
    """After it: one write per parameter it updated, named ``<Optimizer>.step`` at the user's
    line of ``step()``; first the step observers."""
    if STATE.step_observers:
        _observe_step(optimizer, "post")
    off, STATE.suspended = STATE.suspended, None
    if off is None:
        return
    off.__exit__(None, None, None)
    where = STATE.step_where
    if where is None and STATE.cells is not None:
        return
    STATE.events += 1
    if STATE.lean:  # a lean step: its writes are written down once, after the cell
        if id(optimizer) in STATE.steps or len(STATE.steps) < 64:
            STATE.steps[id(optimizer)] = (weakref.ref(optimizer), where)
        return
    _step_writes(optimizer, where)


def _step_writes(optimizer, where) -> None:
    """One write per parameter with a gradient, ``<Optimizer>.step`` at ``where``."""
    op = f"{type(optimizer).__name__}.step"
    try:
        with torch._C.DisableTorchFunction():  # (these reads are the panel's, not the user's)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        _write(p, op, where)
    except Exception as exc:  # noqa: BLE001
        _fault(f"could not record an optimizer step ({type(exc).__name__})", "step")


def observe_steps(cb) -> None:
    """Have ``cb(optimizer, "pre" / "post")`` called around every optimizer step."""
    _hook_optimizers()
    if cb not in STATE.step_observers:
        STATE.step_observers.append(cb)


def unobserve_steps(cb) -> None:
    """No more ``cb``; the last observer gone while no cell records (``%unload_ext``), torch's
    global optimizer step hooks go too (:func:`start` registers them again)."""
    while cb in STATE.step_observers:
        STATE.step_observers.remove(cb)
    if not STATE.step_observers and STATE.mode is None and STATE.suspended is None:
        for h in STATE.opt_hooks or ():
            h.remove()
        STATE.opt_hooks = None


def _hook_optimizers() -> None:
    """torch's global optimizer step hooks, registered once (they record while recording, and
    call the step observers)."""
    if STATE.opt_hooks is not None:
        return
    try:
        opt = importlib.import_module("torch.optim.optimizer")
    except Exception:  # noqa: BLE001 - a torch without it: steps are recorded op by op
        opt = None
    pre = getattr(opt, "register_optimizer_step_pre_hook", None)
    post = getattr(opt, "register_optimizer_step_post_hook", None)
    STATE.opt_hooks = (pre(_opt_pre), post(_opt_post)) if pre and post else ()


def start(ip=None) -> None:
    """Enter the recorder for the cell about to run (no-op when ``record=off`` or entered)."""
    if not STATE.on or STATE.mode is not None:
        return
    if ip is not None:
        STATE.cells = getattr(getattr(ip, "compile", None), "_filename_map", None)
    _hook_optimizers()
    mode = Recorder()
    try:
        mode.__enter__()
    except Exception as exc:  # noqa: BLE001 - a torch whose modes cannot be entered
        _fault(f"no per-op recording ({type(exc).__name__}: {str(exc)[:80]})")
        return
    STATE.mode = mode


def stop() -> list:
    """Leave the recorder after the cell; the one-line faults of this cell (said once each)."""
    mode, STATE.mode = STATE.mode, None
    if STATE.paused:  # (a model call that raised: the recorder is off the stack already)
        STATE.paused, mode = 0, None
    if STATE.suspended is not None:  # an optimizer step that raised: its post hook never ran
        off, STATE.suspended = STATE.suspended, None
        off.__exit__(None, None, None)
    if mode is not None:
        try:
            from torch.overrides import _get_current_function_mode_stack

            stack = _get_current_function_mode_stack()
        except Exception:  # noqa: BLE001 - older torch: trust that ours is on top
            stack = [mode]
        if stack and stack[-1] is mode:
            mode.__exit__(None, None, None)
        elif mode in stack:  # the cell left a mode of its own entered above ours
            _fault("a TorchFunctionMode the cell entered is still active above the panel's; "
                   "recording stays on until it exits")
            STATE.mode = mode
    STATE.lean = False
    steps, STATE.steps = STATE.steps, {}
    for ref, where in steps.values():  # the last lean step of each optimizer
        opt = ref()
        if opt is not None:
            _step_writes(opt, where)
    out, STATE.faults = STATE.faults, []
    STATE.said = set()
    return out


def set_on(on: bool) -> None:
    STATE.on = bool(on)


def _init_backwards() -> None:
    for fn, api in ((getattr(torch.Tensor, "backward", None), "backward"),
                    (getattr(torch.autograd, "backward", None), "backward"),
                    (getattr(torch.autograd, "grad", None), "grad")):
        if fn is not None:
            _BACKWARDS[fn] = api


_init_backwards()
