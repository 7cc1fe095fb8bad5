"""Tensor's autograd methods: grad_fn, retain_grad, register_hook, backward and the leaf's
AccumulateGrad. They need the graph, so they live here, above the data model (nbgrad/tensor.py),
and nbgrad/functions/bind.py binds them onto Tensor with the ops."""
from __future__ import annotations

import weakref

from ..tensor import Tensor
from . import backward as _backward  # the package's, which checks the arguments
from ..tensor import DEFAULT
from .engine import run_backward
from .apply import make_as_strided_node
from .inplace import _move_retain_grad, view_modified_text
from .grad_mode import STATE as _GRAD
from .graph import HERE, AccumulateGrad, RemovableHandle


def grad_fn(self):
    """The node that made this tensor (None for a leaf). A view whose storage was modified in
    place since gets AsStridedBackward0 to its base's current grad_fn, as PyTorch does."""
    v = self._view
    if v is not None and v.version != self._storage.version and (
            self._grad_fn is not None or self._requires_grad and v.base._requires_grad):
        if v.creation != DEFAULT:  # made under no_grad, or one of several views: PyTorch refuses
            raise RuntimeError(view_modified_text(self, False))
        node = make_as_strided_node(v.base, self)
        self._grad_fn = node
        self._output_nr = 0
        v.version = self._storage.version
        _move_retain_grad(self)
        return node
    return self._grad_fn


def retain_grad(self):
    """Populate `.grad` for this non-leaf tensor during backward (torch.Tensor.retain_grad)."""
    if not self._requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self._grad_fn is None:  # a leaf by the stored field, as PyTorch (no view regeneration)
        return
    e = self._x()
    if e.retains_grad:
        return
    e.retains_grad = True
    ref = weakref.ref(self)
    node = weakref.ref(self._grad_fn)  # weak: the hook lives on that node

    def _retain(g):  # runs after the tensor's other hooks, wherever it was registered
        t = ref()
        # once an in-place op gave the tensor a new grad_fn, the hook moved there: .grad is the
        # gradient of the current version only (PyTorch)
        if t is not None and t._grad_fn is node():
            if t._grad is None:
                # a clone, as PyTorch (CloneBackward0 under create_graph)
                t._grad = g.clone() if _GRAD.enabled else Tensor._make_fresh(g._data.copy())
            else:
                t._grad = t._grad + g
        return None
    _retain._nbgrad_retain = True
    self.grad_fn._add_tensor_prehook(self._output_nr, _retain)


def register_hook(self, hook):
    """Register `hook(grad) -> Tensor or None`, called with this tensor's gradient.

    Returns a RemovableHandle. Raises RuntimeError on a tensor that does not require grad.
    """
    if not self._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    fn = self.grad_fn
    if fn is not None:
        return fn._add_tensor_prehook(self._output_nr, hook)
    e = self._x()
    if e.hooks is None:
        e.hooks = []
    e.hooks.append(hook)
    return RemovableHandle(e.hooks, hook)


def register_post_accumulate_grad_hook(self, hook):
    """Register `hook(tensor) -> None`, called with this leaf after backward() accumulated its
    `.grad` (torch.Tensor.register_post_accumulate_grad_hook; an optimizer step per parameter).

    Returns a RemovableHandle. Raises RuntimeError on a tensor that does not require grad or is
    not a leaf; the hook returning a value raises TypeError in backward, as PyTorch's."""
    if not self._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    e = self._x()
    if e.post_acc is None:
        e.post_acc = []
    e.post_acc.append(hook)
    return RemovableHandle(e.post_acc, hook)


def _grad_accumulator(self, where=HERE):
    """The AccumulateGrad node of this leaf (cached weakly, as PyTorch does); `where`: the
    user's line of the op that asks for it, when that op found it (else the frames are
    walked)."""
    e = self._x()
    acc = e.accum() if e.accum is not None else None
    if acc is None:
        acc = AccumulateGrad(self, where)
        e.accum = weakref.ref(acc)
    return acc


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute the gradient of this tensor w.r.t. graph leaves (torch.Tensor.backward).

    Raises:
        RuntimeError: PyTorch's errors (no grad_fn, non-scalar without gradient, wrong
            gradient shape, backward twice, a saved tensor modified in place).
    """
    __tracebackhide__ = True  # IPython: show the user's line, not nbgrad's frames
    if inputs is None and not create_graph and (gradient is None or isinstance(gradient, Tensor)):
        run_backward([self], [gradient], retain_graph, False)  # autograd.backward's common case
        return
    _backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def bind(T):
    """Put these methods on Tensor (called once by nbgrad/functions/bind.py)."""
    T.grad_fn = property(grad_fn)
    T.retain_grad = retain_grad
    T.register_hook = register_hook
    T.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
    T._grad_accumulator = _grad_accumulator
    T.backward = backward
