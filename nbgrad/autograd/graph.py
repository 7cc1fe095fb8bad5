"""The autograd graph: Node (every `grad_fn`), AccumulateGrad, SavedTensor, hooks.

A Node is a closure computing vector-Jacobian products. The output's Node points at its inputs'
Nodes through `next_functions`; nothing points back, and a saved output is kept as its array, never
as the Tensor that owns the Node, so the graph has no reference cycles and is freed by reference
counting the moment the last tensor referring to it goes."""
from __future__ import annotations

from .. import tensor as _tm  # noqa: E402  (a module reference: no import cycle)

import contextlib
import re
import sys
import weakref

import numpy as np

from ..backend import as_array, get_array_module
from .. import provenance
from ..naming import _NODE_BASES, cpp, expose
from ..sparse_coo import SparseCOO, accumulate_sparse
from . import anomaly
from .grad_mode import _restore_grad, _set_grad

_ANOMALY = anomaly.STATE

_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.")
_HINT = ("Hint: enable anomaly detection to find the operation that failed to compute its "
         "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")
_HINT_ANOMALY = ("Hint: the backtrace further above shows the operation that failed to compute its "
                 "gradient. The variable in question was changed in there or anywhere later. Good "
                 "luck!")
_getrefcount = sys.getrefcount
_ND = np.ndarray
_NODES = provenance.NODES
_capture = provenance.capture
HERE = object()  # Node(where=HERE): find the user's line by walking the frames
_SUFFIX = re.compile(r"Backward(?:0|(\d+))?$")  # torch: MulBackward0 -> Mul, FillBackward3 -> Fill3


def activity():
    """(nodes_created, version_bumps, storages_created, storages_freed): ever-growing counters
    the notebook layer compares before and after a cell to know whether it touched nbgrad."""
    from ..backend import COUNTERS
    return (provenance.NODES[0], provenance.BUMPS[0], COUNTERS.created, COUNTERS.freed)


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
        saved_version: the version of its storage when it was saved."""

    __slots__ = ("name", "_data", "_storage", "saved_version", "_tensor", "_output_nr",
                 "_view_node",
                 "is_output", "_packed", "_unpack_hook", "__weakref__")

    def __init__(self, name, t, is_output=False, data=None):
        st = t._storage
        if st.inference:
            raise RuntimeError(_INFERENCE_SAVE)
        self.name = name
        self._data = t._data if data is None else data
        self._storage = st
        self.saved_version = st.version
        self.is_output = is_output
        self._output_nr = t._output_nr
        # an input is kept as the tensor itself (as PyTorch does); an output only as its array,
        # since the tensor owns the node that saves it (no reference cycle)
        self._tensor = None if is_output else t
        self._view_node = None  # an output of an in-place op on a view: its new node, weakly
        self._packed = None
        if _SAVED_HOOKS:
            self._pack(t, *_SAVED_HOOKS[-1])

    def _pack(self, t, pack_hook, unpack_hook):
        """Store what `pack_hook(t)` returns instead of the tensor (PyTorch calls the hook
        with grad mode off, and refuses a hook that modified `t` in place)."""
        st = t._storage
        version = st.version
        prev = _set_grad(False)
        try:
            packed = pack_hook(t)
        finally:
            _restore_grad(prev)
        if st.version != version:
            raise RuntimeError(_PACK_INPLACE)
        self._packed = _PACKED_NONE if packed is None else packed
        self._unpack_hook = unpack_hook
        self._data = None
        # an input keeps only where its gradient goes, so that what unpack_hook returns is
        # differentiable again under create_graph (PyTorch restores grad_fn or accumulator)
        self._tensor = None if self.is_output or not t._requires_grad else (
            t.grad_fn, t._output_nr, t._grad_accumulator() if t.grad_fn is None else None)

    @classmethod
    def _undefined(cls, name):
        """What a node holds for a tensor it did not need to save (`_raw_saved_other` of
        `x * 2`): a SavedTensor whose value is None, as PyTorch's."""
        s = cls.__new__(cls)
        s.name, s._data, s._storage, s._tensor, s._packed = name, None, None, None, None
        s._view_node = None
        s.saved_version, s.is_output, s._output_nr = 0, False, -1  # -1: never saved
        return s

    # ---- torch._C._autograd.SavedTensor's API (node._raw_saved_<name>) ----
    def register_hooks(self, *hooks):
        """Pack the saved tensor now with `pack_hook`, and unpack it in backward with
        `unpack_hook` (torch's SavedTensor.register_hooks).

        Raises:
            TypeError: not exactly two callables.
            RuntimeError: PyTorch's texts for a value None, hooks already set, a saved tensor
                already freed, or a pack hook that modified its input in place."""
        if len(hooks) != 2 or not all(callable(h) for h in hooks):
            raise TypeError(
                "register_hooks(): incompatible function arguments. The following argument types "
                "are supported:\n    1. (self: nbgrad.autograd.graph.SavedTensor, arg0: "
                "collections.abc.Callable, arg1: collections.abc.Callable) -> None\n\nInvoked "
                f"with: {self!r}, " + ", ".join(repr(h) for h in hooks))
        if self._packed is not None:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already "
                               "been set. Hint: only one pair of hooks is allowed at a time.")
        if self._storage is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is "
                               "forbidden" if self._output_nr == -1 else _REGISTER_FREED)
        t = self._tensor if self._tensor is not None else \
            _tm.Tensor._make(self._data, self._storage, None, 0, False)
        self._pack(t, *hooks)

    @property
    def data(self):
        """The saved tensor (None for a value that was not saved)."""
        return self.unpack()

    @property
    def unpack_hook(self):
        return None if self._packed is None else self._unpack_hook

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
    def unpack(self, node=None, as_tensor=False):
        """The saved value (array, or Tensor when `as_tensor`), after the version check.
        Called with no argument (torch's SavedTensor.unpack()): the Tensor, or None."""
        __tracebackhide__ = True
        if node is None:
            if self._output_nr == -1:
                return None
            as_tensor = True
        packed = self._packed
        if packed is not None:
            t = self._unpack_hook(None if packed is _PACKED_NONE else packed)
            if not isinstance(t, _tm.Tensor):
                raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but "
                                f"got result of type {type(t).__name__}")
            if not as_tensor:
                return t._data
            if self.is_output:
                return _tm.Tensor._make(t._data, t._storage, node, self._output_nr,
                                        node is not None)
            if self._tensor is None:
                return t
            fn, nr, acc = self._tensor
            r = _tm.Tensor._make(t._data, t._storage, fn, nr, True)
            if acc is not None:
                r._x().accum = weakref.ref(acc)
            return r
        data = self._data
        if data is None:
            raise backward_twice_error()
        if self._storage.version != self.saved_version:
            raise self._stale_error(node)
        if not as_tensor:
            return data
        if not self.is_output:
            return self._tensor
        return _tm.Tensor._make(data, self._storage, node, self._output_nr, node is not None)

    def _stale_error(self, node):
        if self.is_output:  # PyTorch names the view's node while it lives (its weak grad_fn)
            fn = self._view_node() if self._view_node is not None else None
            fn = node if fn is None else fn
        else:
            fn = self._tensor.grad_fn
        # PyTorch describes the tensor as it is now (an input reshaped in place by unsqueeze_)
        shape = self._data.shape if self._tensor is None else self._tensor._data.shape
        name = _tm.type_name(self._data.dtype, self._data)
        if self._data.dtype.kind == "b":  # (torch's toString of a bool tensor: its legacy name)
            name = "CPUBoolType" if type(self._data) is np.ndarray else "CUDABoolType"
        desc = f"[{name} {list(shape)}]"
        op_name = _SUFFIX.sub(lambda m: m.group(1) or "", fn.name()) if fn is not None else ""
        owner = f", which is output {self._output_nr} of {op_name}," if fn is not None else ""
        now = self._storage.version
        msg = ("one of the variables needed for gradient computation has been modified by an "
               f"inplace operation: {desc}{owner} is at version {now}; expected version "
               f"{self.saved_version} instead. {_HINT_ANOMALY if _ANOMALY.enabled else _HINT}")
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


class _Freed:
    """What a saved Python number becomes once backward released it (x * 2's `other`: PyTorch
    saves it as a tensor, so a second backward through the node fails)."""

    __slots__ = ()

    def unpack(self, node, as_tensor=False):
        raise backward_twice_error()

    def __repr__(self):
        return "FREED"


FREED = _Freed()


_INFERENCE_SAVE = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a clone "
    "to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
    "`torch.inference_mode()`.")
_PACK_INPLACE = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack "
    "hook cannot be modified by in-place operations as this can lead to unexpected side-effects. "
    "Please open an issue if you need to perform in-place operations on the input to a pack hook.")
_REGISTER_FREED = (
    "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values "
    "of the graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or if you need to "
    "access saved variables after calling backward.")
_PACKED_NONE = object()  # a pack hook returned None (a valid packed value)
_ACC_SEQ = 1 << 62  # above every other node's sequence number, still unique


def _is_array(x):
    return isinstance(x, _ND) or hasattr(x, "__cuda_array_interface__")


class SavedArray:
    """An index or mask array (or a tuple holding some) that a node keeps while
    saved_tensors_hooks are on: PyTorch saves these as tensors, so each goes through the pack
    hook when saved and the unpack hook in backward (plain arrays otherwise)."""

    __slots__ = ("name", "value", "_unpack_hook")

    def __init__(self, name, value, pack_hook, unpack_hook):
        self.name = name
        self._unpack_hook = unpack_hook
        prev = _set_grad(False)
        try:
            if type(value) is tuple:
                self.value = tuple(_Packed(pack_hook(_tm.Tensor._make_fresh(v)))
                                   if _is_array(v) else v for v in value)
            else:
                self.value = _Packed(pack_hook(_tm.Tensor._make_fresh(value)))
        finally:
            _restore_grad(prev)

    def release(self):
        self.value = None

    def unpack(self, node=None, as_tensor=False):
        """The arrays, each from the unpack hook (formulas index with arrays, also under
        create_graph)."""
        value = self.value
        if value is None:
            raise backward_twice_error()
        if type(value) is tuple:
            return tuple(self._array(v) if type(v) is _Packed else v for v in value)
        return self._array(value)

    def _array(self, p):
        t = self._unpack_hook(p.packed)
        if not isinstance(t, _tm.Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but "
                            f"got result of type {type(t).__name__}")
        return t._data


class _Packed:
    __slots__ = ("packed",)

    def __init__(self, packed):
        self.packed = packed


class SavedCtx(Ctx):
    """A kernel's Ctx kept while saved_tensors_hooks are on. PyTorch's kernel saves, besides
    its inputs, extra outputs that nbgrad's kernel keeps inside its Ctx (layer_norm's mean and
    rstd, nll_loss's total_weight): the row's `ctx_saves` gives them as arrays, and each goes
    through the pack hook when saved and the unpack hook when the node runs backward, as
    PyTorch's. The backward itself reads the kernel's own copy (the Ctx value)."""

    __slots__ = ("_saved",)

    def __init__(self, ctx, arrays):
        Ctx.__init__(self, ctx.value)
        self._saved = SavedArray("ctx", tuple(arrays), *_SAVED_HOOKS[-1]) if arrays else None

    def release(self):
        self.value = None
        if self._saved is not None:
            self._saved.release()

    def unpack(self, node=None, as_tensor=False):
        """Run the unpack hooks (and their type check); the Ctx itself for the formulas."""
        if self.value is None:
            raise backward_twice_error()
        if self._saved is not None:
            self._saved.unpack()
        return self


def saved_arg(name, value, ctx_saves=None, src=None, args=None):
    """What a node keeps of an argument while saved_tensors_hooks are on: a SavedArray for an
    index or mask array (or a tuple holding one), a SavedCtx for a kernel's Ctx (packing what
    `ctx_saves(value, src, args)` returns: the tensors PyTorch saves that the Ctx holds), the
    value itself otherwise."""
    if _is_array(value) or (type(value) is tuple and any(_is_array(v) for v in value)):
        return SavedArray(name, value, *_SAVED_HOOKS[-1])
    if type(value) is Ctx and ctx_saves is not None:
        return SavedCtx(value, ctx_saves(value.value, src, args))
    return value


# what Node._release frees, and what a node unpacks before its formulas run (sets: the saved
# index types of autograd/saved_index.py add themselves)
RELEASABLE = {SavedTensor, Ctx, SavedArray, SavedCtx}
UNPACKED = {SavedTensor, _Freed, SavedArray, SavedCtx}
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
        if _HOOKS_DISABLED[0] is not None:
            raise RuntimeError(_HOOKS_DISABLED[0])
        _SAVED_HOOKS.append(self.hooks)
        return self

    def __exit__(self, *exc):
        _SAVED_HOOKS.pop()
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are kept in host memory and moved back to their device in backward
    (torch.autograd.graph.save_on_cpu). As PyTorch's, a tensor already on the CPU is kept as is
    (no copy, no version check), and `pin_memory=True` always copies."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            t = t.detach().cpu()
            return t.device, t.clone() if pin_memory else t

        def unpack(packed):
            device, t = packed
            return t.to(device)
        super().__init__(pack, unpack)


_HOOKS_DISABLED = [None]  # the error message while disable_saved_tensors_hooks is on


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Inside, entering saved_tensors_hooks raises RuntimeError(error_message)
    (torch.autograd.graph.disable_saved_tensors_hooks); entering it while hooks are on raises it
    too. Also a decorator."""
    if _SAVED_HOOKS:
        raise RuntimeError(error_message)
    prev = _HOOKS_DISABLED[0]
    _HOOKS_DISABLED[0] = error_message
    try:
        yield
    finally:
        _HOOKS_DISABLED[0] = prev


# ------------------------------------------------------------------------------------------------
class _Rare:
    """A node's rarely used parts (hooks, pre-hooks, metadata, a broadcasting op's per input
    (shape, dtype) to reduce to), made when one is set: it takes the node's slot `_site`."""

    __slots__ = ("where", "post", "pre", "metadata", "meta")

    def __init__(self, where, meta=None):
        self.where, self.meta, self.post, self.pre, self.metadata = where, meta, None, None, None


class Node:
    """Base class of every `grad_fn` (torch.autograd.graph.Node), named as in PyTorch
    (`MulBackward0`, `AccumulateGrad`, `CopySlices`, ...). Slot `_site`: where the node was
    made, or a `_Rare` carrying it with the node's rarely used parts (one slot: 8 B a node)."""

    __slots__ = ("_next", "_saved", "_site", "_seq", "__weakref__")
    _n_out = 1
    _grad_version = 0  # the _version of the gradients it makes (a row's grad_version)

    def __init__(self, next_functions=(), saved=None, meta=None, where=HERE):
        """The one constructor of every node: its edges, what it saved, per input the (shape,
        dtype) to reduce its gradient to (or None), where it was made (`_where`: the user's
        `(code, lasti)`, shared by every node made at that place; the op path passes it, found
        from its entry point, else the frames are walked), its sequence number."""
        self._next = next_functions
        self._saved = saved
        where = _capture(1) if where is HERE else where
        self._site = where if meta is None else _Rare(where, meta)  # (broadcasting ops only)
        _NODES[0] = self._seq = _NODES[0] + 1  # the sequence number orders the backward
        if _ANOMALY.enabled:
            anomaly.record(self)

    def __lt__(self, other):  # a tie in the engine's heap of (-seq, node) (a fused chain
        return False  # built again under create_graph numbers its nodes alike): heap order

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
        h = self._x()
        if h.metadata is None:
            h.metadata = {}
        return h.metadata

    @property
    def _where(self):  # the user's `(code, lasti)` that made this node (provenance), or None
        return self._site.where if type(self._site) is _Rare else self._site

    @_where.setter
    def _where(self, where):  # (a fused chain's nodes take the fused node's)
        if type(self._site) is _Rare:
            self._site.where = where
        else:
            self._site = where

    @property
    def _meta(self):  # per input the (shape, dtype) its gradient is reduced to, or None
        return self._site.meta if type(self._site) is _Rare else None

    @_meta.setter
    def _meta(self, meta):
        if meta is not None or type(self._site) is _Rare:
            self._x().meta = meta

    def _x(self):
        s = self._site
        if type(s) is not _Rare:
            s = self._site = _Rare(s)
        return s

    def _saved_tensors(self):
        """The SavedTensor objects this node holds (for introspection)."""
        return tuple(s for s in (self._saved or ()) if type(s) is SavedTensor)

    def register_hook(self, fn):
        """`fn(grad_inputs, grad_outputs)` after this node runs; may return new grad_inputs."""
        h = self._x()
        if h.post is None:
            h.post = []
        h.post.append(fn)
        return RemovableHandle(h.post, fn)

    def register_prehook(self, fn):
        """`fn(grad_outputs)` before this node runs; may return new grad_outputs."""
        h = self._x()
        if h.pre is None:
            h.pre = []
        item = (None, fn)
        h.pre.append(item)
        return RemovableHandle(h.pre, item)

    def _add_tensor_prehook(self, output_nr, fn):
        h = self._x()
        if h.pre is None:
            h.pre = []
        item = (output_nr, fn)
        # tensor hooks run before the node's own pre-hooks, in registration order, and
        # retain_grad's hook after all other tensor hooks (PyTorch's order)
        retain = getattr(fn, "_nbgrad_retain", False)
        n = sum(1 for nr, f in h.pre
                if nr is not None and (retain or not getattr(f, "_nbgrad_retain", False)))
        h.pre.insert(n, item)
        return RemovableHandle(h.pre, item)

    def _release(self):
        for s in self._saved or ():
            if type(s) in RELEASABLE:  # SavedTensor, or a kernel's Ctx (not hasattr: slow on
                s.release()            # the floats and Nones most nodes keep)

    def _backward(self, grads, create_graph):  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, *grads):
        """Apply the node to output grads (arrays or tensors), returning input grads: a tuple,
        or the one Tensor of a node with one input (as torch's)."""
        arrs = [g._data if isinstance(g, _tm.Tensor) else g for g in grads]
        out = self._backward(arrs if self._n_out > 1 else arrs[0], False)
        res = tuple(None if g is None else _tm.Tensor._make_fresh(as_array(g)) for g in out)
        return res[0] if len(res) == 1 else res

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"


_NODE_BASES[:0] = [Node]  # nodes print as PyTorch's under the torch alias (nbgrad.naming)
expose(Node, "torch.autograd.graph")


# Who holds a gradient array AccumulateGrad is given (`owned`): the third answer is the Storage
# of the memory a view-gradient views, when only the engine holds it. Plain ints, not an IntEnum:
# every leaf's accumulation tests them, and an IntEnum member compares slower than an int.
GRAD_SHARED = 0  # something else may hold it: copy it into .grad
GRAD_OWNED = 2   # the engine's own new array: it becomes .grad as it is


class AccumulateGrad(Node):
    """Sink node of a leaf that requires grad: adds the incoming grad into `variable.grad`."""

    __slots__ = ("variable",)

    def name(self):
        return cpp("AccumulateGrad")  # PyTorch: torch::autograd::AccumulateGrad

    def __init__(self, variable, where=HERE):
        # made by the first op on the leaf in a graph, which passes the user's line it found;
        # else: user -> op -> apply [-> _record] -> _edge -> _grad_accumulator -> here (the
        # user's frame 6 or 5 up from capture's caller)
        Node.__init__(self, (), where=_capture(6) if where is HERE else where)
        self._seq += _ACC_SEQ  # PyTorch: UINT64_MAX, so a ready AccumulateGrad runs first
        self.variable = variable

    def _backward(self, g, create_graph, owned=GRAD_SHARED, version=0):
        """`owned` (the engine's, `engine._ownership`): GRAD_OWNED when nothing else holds the
        array `g`, GRAD_SHARED when something may, or for a view nothing else holds the Storage
        of the memory it views; `version`: the in-place additions the engine made into `g`
        (`.grad`'s _version when it takes `g` itself, before the post-accumulate hooks)."""
        var = self.variable
        given = g
        if var._grad_fn is not None:
            raise RuntimeError("leaf variable has been moved into the graph interior")
        hooks = var._hooks
        if hooks:
            kept = []
            new = _run_tensor_hooks(hooks, g, kept)
            if new is not g:  # the hook's result: the engine's own unless the hook kept it
                owned = GRAD_OWNED if type(new) is _ND and new.base is None and \
                    _getrefcount(new) == 2 else GRAD_SHARED
            elif kept:  # a hook kept the tensor it was given (PyTorch: use count > 1, a copy)
                owned = GRAD_SHARED
            g = new
        if g is None or not var._requires_grad:  # (turned off since: its hooks ran, no .grad)
            return ()
        if not isinstance(g, _tm.Tensor):
            g = as_array(g)
        accumulate_into(var, g, create_graph, owned)
        if version and var._grad is not None and var._grad._data is given:
            var._grad._storage.version = version
        e = var._extra
        if e is not None and e.post_acc:  # register_post_accumulate_grad_hook's, in order
            for fn in list(e.post_acc):
                r = fn(var)
                if r is not None:
                    raise TypeError(f"expected Variable, but hook returned "
                                    f"'{type(r).__name__}'")
        return ()


def accumulate_into(var, g, create_graph, owned=GRAD_SHARED):
    """Add gradient `g` (array or Tensor) into `var.grad` as PyTorch's AccumulateGrad does: the
    first one is taken as is when nothing else holds it and it is laid out as the variable
    (torch's gradient layout contract), else copied into the variable's layout (version 1),
    or under create_graph copied by copy_ (CopyBackwards, version 1); later ones are added in
    place (version + 1), or under create_graph out of place (`grad + g`, a new tensor)."""
    old = var._grad
    if type(g) is SparseCOO or old is not None and old.is_sparse:
        return accumulate_sparse(var, old, g)  # (torch's rules for a sparse gradient)
    if old is None:
        if create_graph:
            var._grad = _copy_in_grad_mode(g, var._data)
        elif isinstance(g, _tm.Tensor):
            var._grad = g.detach()
        # a grad may be shared (AddBackward0 hands one array to both inputs), and later
        # accumulations add into .grad in place: keep the array only when nothing else holds it
        # (`owned`), and only when laid out as the variable, as PyTorch
        elif owned and g.flags.writeable and (
                g.strides == var._data.strides and var._data.flags.c_contiguous and
                0 not in g.strides or obeys_layout(g, var._data)):  # (the usual case inline)
            var._grad = _tm.Tensor._make_fresh(g) if owned == GRAD_OWNED else \
                _tm.Tensor._make(g, owned, None, 0, False)
        else:  # PyTorch's clone_obey_contract
            var._grad = _tm.Tensor._make_fresh(_clone_as(g, var._data))
            if _tm.is_dense(var._data):  # (empty_strided, then copy_: version 1; else a clone)
                var._grad._storage.version = 1
    elif create_graph:
        var._grad = old + (g if isinstance(g, _tm.Tensor) else _tm.Tensor._make_fresh(g))
    else:
        gd = g._data if isinstance(g, _tm.Tensor) else g
        od = old._data
        if od.flags.writeable if type(od) is _ND else True:
            od += gd  # in place, as PyTorch (under no_grad, so a grad with grad_fn keeps it)
            old._storage.version += 1
        else:
            var._grad = _tm.Tensor._make_fresh(od + gd)


def _copy_in_grad_mode(g, like):
    """The first gradient accumulated under create_graph, as PyTorch makes it: a new tensor
    laid out as the variable's array `like` (when dense), written by copy_ (version 1;
    CopyBackwards when the gradient requires grad)."""
    if not isinstance(g, _tm.Tensor):
        g = _tm.Tensor._make_fresh(g)
    return _tm.Tensor._make_fresh(_empty_as(g._data, like)).copy_(g)


def obeys_layout(g, like):
    """torch's obeys_layout_contract: whether gradient `g` may become the .grad of a variable
    whose array is `like` as it is: laid out as it (the same strides where the size is not 1,
    and no stride 0), for a dense variable; C-contiguous otherwise."""
    gs, ls = g.strides, like.strides
    if not _tm.is_dense(like):
        return bool(g.flags.c_contiguous)
    for n, a, b in zip(g.shape, gs, ls):
        if (a != b) if n != 1 else (a == 0):
            return False
    return True


def _empty_as(g, like):
    """An empty array for a copy of `g`, laid out as `like` when that is dense (torch's
    clone_obey_contract: empty_strided with the variable's strides), else C-contiguous."""
    xp = get_array_module(g)
    return xp.empty_like(like, dtype=g.dtype) if _tm.is_dense(like) else xp.empty(g.shape, g.dtype)


def _clone_as(g, like):
    """A copy of `g` laid out as `like` when that is dense, else C-contiguous."""
    out = _empty_as(g, like)
    out[...] = g
    return out


def _check_same_meta(name, a, b):
    """PyTorch's errors for a hook that returned a gradient of another shape or dtype."""
    if tuple(b.shape) != tuple(a.shape):
        raise RuntimeError(f"hook '{name}' has changed the size of value")
    if b._data.dtype != a._data.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was "
                           f"{_tm.type_name(a._data.dtype)} got {_tm.type_name(b._data.dtype)})")


def _run_tensor_hooks(hooks, g, kept=None):
    """`g` through the tensor hooks `hooks`; `kept` (a list): True appended when a hook that
    returned None kept the tensor it was given (the last gradient is then not the engine's
    alone)."""
    as_t = isinstance(g, _tm.Tensor)
    for fn in list(hooks):
        gt = g if as_t else _tm.Tensor._make_fresh(as_array(g))
        r = fn(gt)
        if r is not None:
            _check_same_meta(getattr(fn, "__name__", repr(fn)), gt, r)
            g = r if as_t else r._data
            if kept:
                kept.clear()
        elif kept is not None and not as_t and _getrefcount(gt) > 2:
            kept.append(True)
    return g
