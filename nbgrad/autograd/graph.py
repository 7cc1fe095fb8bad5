"""The autograd graph: Node (every `grad_fn`), AccumulateGrad, SavedTensor, hooks.

A Node is a closure computing vector-Jacobian products. The output's Node points at its inputs'
Nodes through `next_functions`; nothing points back, and a saved output is kept as its array, never
as the Tensor that owns the Node, so the graph has no reference cycles and is freed by reference
counting the moment the last tensor referring to it goes.
"""
from __future__ import annotations

from .. import tensor as _tm  # noqa: E402  (a module reference: no import cycle)

import re
import sys

from ..backend import as_array
from .. import provenance
from . import anomaly

_ANOMALY = anomaly.STATE

_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.")
_HINT = ("Hint: enable anomaly detection to find the operation that failed to compute its "
         "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")
_getrefcount = sys.getrefcount
_getframe = sys._getframe
_PROV = provenance.ENABLED
_LIB = provenance.LIB_FILES
_NODES = provenance.NODES
_SUFFIX = re.compile(r"Backward(?:0|(\d+))?$")  # torch: MulBackward0 -> Mul, FillBackward3 -> Fill3


def activity():
    """(nodes_created, version_bumps, storages_created, storages_freed): ever-growing counters.

    The notebook layer compares them before and after a cell to know whether it touched nbgrad.
    """
    from ..backend import COUNTERS
    return (provenance.NODES[0], provenance.BUMPS[0], COUNTERS.created, COUNTERS.freed)


def _first_outside():
    """The innermost frame outside nbgrad's files (None if there is none)."""
    f = _getframe(2)
    while f is not None and f.f_code.co_filename in _LIB:
        f = f.f_back
    return f


class RemovableHandle:
    """Returned by `register_hook`; `remove()` unregisters (torch.utils.hooks.RemovableHandle)."""

    __slots__ = ("_list_ref", "_item")

    def __init__(self, lst, item):
        self._list_ref = lst
        self._item = item

    def remove(self):
        lst = self._list_ref
        if lst is not None:
            try:
                lst.remove(self._item)
            except ValueError:
                pass
            self._list_ref = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _error(msg, **context):
    err = RuntimeError(msg)
    if context:
        err.nbgrad_context = context
    return err


def backward_twice_error():
    return _error(_BACKWARD_TWICE, kind="backward_twice")


# ------------------------------------------------------------------------------------------------
class SavedTensor:
    """A tensor saved for backward, with the version it had when saved (the saved-tensor check).

    Attributes:
        name: PyTorch's name of the saved value (`self`, `other`, `result`, ...).
        saved_version: the version of its storage when it was saved.
    """

    __slots__ = ("name", "_data", "_storage", "saved_version", "_tensor", "_output_nr",
                 "is_output", "_packed", "_unpack_hook", "__weakref__")

    def __init__(self, name, t, is_output=False, data=None):
        self.name = name
        self._data = t._data if data is None else data
        self._storage = t._storage
        self.saved_version = t._storage.version
        self.is_output = is_output
        self._output_nr = t._output_nr
        # an input is kept as the tensor itself (as PyTorch does); an output only as its array,
        # since the tensor owns the node that saves it (no reference cycle); for an output of
        # an in-place op on a view, _tensor is later a weak reference to the view's new node
        self._tensor = None if is_output else t
        self._packed = None
        hooks = _SAVED_HOOKS
        if hooks:
            pack, self._unpack_hook = hooks[-1]
            self._packed = pack(t)
            self._data = None

    # ---- read-only introspection for the notebook layer ----
    @property
    def shape(self):
        return tuple(self._data.shape) if self._data is not None else None

    @property
    def dtype(self):
        from ..dtypes import from_np
        return from_np(self._data.dtype) if self._data is not None else None

    @property
    def nbytes(self) -> int:
        return 0 if self._data is None else int(self._data.nbytes)

    @property
    def data_ptr(self):
        """Root storage address (int), or None once released."""
        return None if self._storage is None else self._storage.data_ptr()

    @property
    def version(self) -> int:
        """Current version of its storage (the saved version once released)."""
        return self.saved_version if self._storage is None else self._storage.version

    @property
    def is_stale(self) -> bool:
        return self._storage is not None and self._storage.version != self.saved_version

    @property
    def released(self) -> bool:
        return self._data is None and self._packed is None

    def modified_by(self):
        """[(version, op_name, Location)] of in-place ops on its storage since it was saved."""
        return [] if self._storage is None else self._storage.history(self.saved_version)

    def release(self):
        """Free what was saved (backward consumed it): the buffer goes with the last reference."""
        self._data = self._packed = self._tensor = self._storage = None

    # ---- backward ----
    def unpack(self, node, as_tensor=False):
        """The saved value (array, or Tensor when `as_tensor`), after the version check."""
        __tracebackhide__ = True
        if self._packed is not None:
            t = self._unpack_hook(self._packed)
            return t if as_tensor else (t._data if isinstance(t, _tm.Tensor) else t)
        data = self._data
        if data is None:
            raise backward_twice_error()
        if self._storage.version != self.saved_version:
            raise self._stale_error(node)
        if not as_tensor:
            return data
        if not self.is_output:
            return self._tensor
        return _tm.Tensor._make(data, self._storage, node, self._output_nr, True)

    def _stale_error(self, node):
        if self.is_output:
            fn = self._tensor() if self._tensor is not None else None
            fn = node if fn is None else fn
        else:
            fn = self._tensor.grad_fn
        desc = f"[{_tm.type_name(self._data.dtype, self._data)} {list(self._data.shape)}]"
        op_name = _SUFFIX.sub(lambda m: m.group(1) or "", fn.name()) if fn is not None else ""
        owner = f", which is output {self._output_nr} of {op_name}," if fn is not None else ""
        now = self._storage.version
        msg = ("one of the variables needed for gradient computation has been modified by an "
               f"inplace operation: {desc}{owner} is at version {now}; expected version "
               f"{self.saved_version} instead. {_HINT}")
        where = provenance.Location.of(node._where)
        mods = self.modified_by()
        lines = [f"nbgrad: this tensor ({self.name!r}) was saved by {node.name()}"
                 + (f" at {where}" if where else "") + f" (version {self.saved_version})"]
        for v, op, loc in mods:
            lines.append(f"modified in place by {op}" + (f" at {loc}" if loc else "")
                         + f" (now version {v})")
        if where is not None and where.source:
            lines.append(f"saved by: {where.source}")
        if mods and mods[-1][2] is not None and mods[-1][2].source:
            lines.append(f"modified by: {mods[-1][2].source}")
        msg += "\n" + "\n".join(lines[:1]) + ("; " + "; ".join(lines[1:1 + len(mods)])
                                              if mods else "")
        extra = lines[1 + len(mods):]
        if extra:
            msg += "\n" + "\n".join(extra)
        return _error(msg, kind="saved_modified", node_name=node.name(), node_where=where,
                      tensor=desc, saved_name=self.name, saved_version=self.saved_version,
                      version=now, modified_by=mods)


class Ctx:
    """Non-tensor state an array kernel keeps for backward (an im2col matrix, argmax
    positions); released with the node's saved tensors."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def release(self):
        self.value = None

    def get(self):
        if self.value is None:  # released by a backward without retain_graph
            raise backward_twice_error()
        return self.value


class SavedScalar:
    """A Python number input a formula needs (`x * 2` keeps `other`): PyTorch saves it as a
    wrapped-number tensor, so a second backward through the node fails after release."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def release(self):
        self.value = None

    def unpack(self, node, as_tensor=False):
        if self.value is None:
            raise backward_twice_error()
        return self.value


_ACC_SEQ = 1 << 62  # above every other node's sequence number, still unique
RELEASABLE = (SavedTensor, Ctx, SavedScalar)  # what Node._release frees
UNPACKED = (SavedTensor, SavedScalar)  # what a node unpacks before its formulas run
_SAVED_HOOKS = []  # stack of (pack_hook, unpack_hook), innermost last


class saved_tensors_hooks:
    """Pack/unpack hooks for saved tensors (torch.autograd.graph.saved_tensors_hooks).

    Args:
        pack_hook: called with the Tensor being saved; its result is stored instead.
        unpack_hook: called with that result in backward; must return a Tensor.
    """

    def __init__(self, pack_hook, unpack_hook):
        self.hooks = (pack_hook, unpack_hook)

    def __enter__(self):
        _SAVED_HOOKS.append(self.hooks)
        return self

    def __exit__(self, *exc):
        _SAVED_HOOKS.remove(self.hooks)
        return False


# ------------------------------------------------------------------------------------------------
class Node:
    """Base class of every `grad_fn` (torch.autograd.graph.Node).

    Subclasses are named as in PyTorch (`MulBackward0`, `AccumulateGrad`, `CopySlices`, ...).
    """

    # where the node was made is kept as two slots, not a (code, lasti) tuple: 64 bytes less per
    # node; `_where` rebuilds the pair when the notebook or an error message asks
    __slots__ = ("_next", "_saved", "_meta", "_code", "_lasti", "_hooks", "_prehooks", "_extra",
                 "_seq", "__weakref__")
    _n_out = 1

    def __init__(self, next_functions=(), saved=None, meta=None):
        """The one constructor of every node: its edges, what it saved, per input the (shape,
        dtype) to reduce its gradient to (or None), where it was made, its sequence number."""
        self._next = next_functions
        self._saved = saved
        self._meta = meta
        if _PROV[0]:  # provenance.capture(), inlined (hot): the first frame outside nbgrad
            # On the common paths (user -> op -> apply -> _record -> here) the user's frame is
            # 4 up. sys._getframe(n) makes a frame object for frame n only, where walking f_back
            # makes one for every frame on the way (~0.3 us each on Python 3.11).
            try:
                f = _getframe(4)
                if f.f_code.co_filename in _LIB:
                    f = f.f_back
                    while f is not None and f.f_code.co_filename in _LIB:
                        f = f.f_back
                elif _getframe(3).f_code.co_filename not in _LIB:
                    f = _first_outside()
            except ValueError:  # a shallower stack
                f = _first_outside()
            if f is None:
                self._code = None
            else:
                self._code = f.f_code
                self._lasti = f.f_lasti
        else:
            self._code = None
        self._hooks = self._prehooks = self._extra = None
        _NODES[0] = self._seq = _NODES[0] + 1  # the sequence number orders the backward
        if _ANOMALY.enabled:
            anomaly.record(self)

    @property
    def _where(self):
        """`(code, lasti)` of the user's code that made this node, or None."""
        code = self._code
        return None if code is None else (code, self._lasti)

    def name(self) -> str:
        """The node's class name, e.g. 'MulBackward0' (torch Node.name())."""
        return type(self).__name__

    @property
    def next_functions(self):
        """Tuple of `(Node or None, input_nr)`, one per differentiable input."""
        return self._next

    @property
    def metadata(self) -> dict:
        """A dict for user data, kept with the node (torch Node.metadata)."""
        if self._extra is None:
            self._extra = {}
        md = self._extra.get("metadata")
        if md is None:
            md = self._extra["metadata"] = {}
        return md

    def _saved_tensors(self):
        """The SavedTensor objects this node holds (for introspection)."""
        return tuple(s for s in (self._saved or ()) if type(s) is SavedTensor)

    def register_hook(self, fn):
        """`fn(grad_inputs, grad_outputs)` after this node runs; may return new grad_inputs."""
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(fn)
        return RemovableHandle(self._hooks, fn)

    def register_prehook(self, fn):
        """`fn(grad_outputs)` before this node runs; may return new grad_outputs."""
        if self._prehooks is None:
            self._prehooks = []
        item = (None, fn)
        self._prehooks.append(item)
        return RemovableHandle(self._prehooks, item)

    def _add_tensor_prehook(self, output_nr, fn):
        if self._prehooks is None:
            self._prehooks = []
        item = (output_nr, fn)
        # tensor hooks run before the node's own pre-hooks, in registration order, and
        # retain_grad's hook after all other tensor hooks (PyTorch's order)
        retain = getattr(fn, "_nbgrad_retain", False)
        n = sum(1 for nr, f in self._prehooks
                if nr is not None and (retain or not getattr(f, "_nbgrad_retain", False)))
        self._prehooks.insert(n, item)
        return RemovableHandle(self._prehooks, item)

    def _release(self):
        for s in self._saved or ():
            if type(s) in RELEASABLE:  # SavedTensor, or a kernel's Ctx (not hasattr: slow on
                s.release()            # the floats and Nones most nodes keep)

    def _backward(self, grads, create_graph):  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, *grads):
        """Apply the node to output grads (arrays or tensors), returning input grads."""
        arrs = [g._data if isinstance(g, _tm.Tensor) else g for g in grads]
        out = self._backward(arrs if self._n_out > 1 else arrs[0], False)
        return tuple(None if g is None else _tm.Tensor._make_fresh(as_array(g)) for g in out)

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"


class AccumulateGrad(Node):
    """Sink node of a leaf that requires grad: adds the incoming grad into `variable.grad`."""

    __slots__ = ("variable",)

    def name(self):
        return "nbgrad::autograd::AccumulateGrad"  # PyTorch: torch::autograd::AccumulateGrad

    def __init__(self, variable):
        Node.__init__(self, ())
        self._seq += _ACC_SEQ  # PyTorch: UINT64_MAX, so a ready AccumulateGrad runs first
        self.variable = variable

    def _backward(self, g, create_graph):
        var = self.variable
        if var._grad_fn is not None:
            raise RuntimeError("leaf variable has been moved into the graph interior")
        hooks = var._hooks
        if hooks:
            g = _run_tensor_hooks(hooks, g)
        if g is None:
            return ()
        if not isinstance(g, _tm.Tensor):
            g = as_array(g)
        old = var._grad
        if old is None:
            if isinstance(g, _tm.Tensor):
                var._grad = g if create_graph else g.detach()
            else:
                # a grad may be shared (AddBackward0 hands one array to both inputs), and later
                # accumulations add into .grad in place: keep the array only when nothing else
                # holds it (engine local + parameter + getrefcount's own), as PyTorch does
                if g.base is None and _getrefcount(g) <= 3 and g.flags.writeable:
                    var._grad = _tm.Tensor._make_fresh(g)
                else:
                    var._grad = _tm.Tensor._make_fresh(g.copy())
        elif create_graph:
            var._grad = old + (g if isinstance(g, _tm.Tensor) else _tm.Tensor._make_fresh(g))
        else:
            gd = g._data if isinstance(g, _tm.Tensor) else g
            if old._grad_fn is None and not old._requires_grad:
                old._data += gd   # in place, as torch does when the grad is not part of a graph
            else:
                var._grad = _tm.Tensor._make_fresh(old._data + gd)
        return ()


def _check_same_meta(name, a, b):
    """PyTorch's errors for a hook that returned a gradient of another shape or dtype."""
    if tuple(b.shape) != tuple(a.shape):
        raise RuntimeError(f"hook '{name}' has changed the size of value")
    if b._data.dtype != a._data.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was "
                           f"{_tm.type_name(a._data.dtype)} got {_tm.type_name(b._data.dtype)})")


def _run_tensor_hooks(hooks, g):
    as_t = isinstance(g, _tm.Tensor)
    for fn in list(hooks):
        gt = g if as_t else _tm.Tensor._make_fresh(as_array(g))
        r = fn(gt)
        if r is not None:
            _check_same_meta(getattr(fn, "__name__", repr(fn)), gt, r)
            g = r if as_t else r._data
    return g
