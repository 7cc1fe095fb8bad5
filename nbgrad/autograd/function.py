"""Custom autograd functions (torch.autograd.Function): forward/backward written by the user,
with ctx.save_for_backward, saved_tensors, mark_dirty, mark_non_differentiable and
needs_input_grad. The ctx *is* the graph node, as in PyTorch."""
from __future__ import annotations

from .. import tensor as _tm  # noqa: E402  (a module reference: no import cycle)

import functools

from .. import dtypes
from ..backend import as_array
from .grad_mode import STATE, no_grad
from .graph import Node, SavedTensor
from ..naming import _NODE_BASES, expose, node_class


class FunctionCtx:
    """What `forward` gets as `ctx` (and `backward` gets back)."""

    def save_for_backward(self, *tensors):
        """Save tensors (or None) for backward; they are version-checked when unpacked."""
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        self._to_save_fwd = tensors

    def mark_dirty(self, *tensors):
        """Declare inputs that forward modified in place."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        """Declare outputs that get no gradient (e.g. integer indices)."""
        self._non_diff = tensors

    def set_materialize_grads(self, value):
        """Whether None output grads reach backward as zeros (default True)."""
        self._materialize = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """Node of a custom Function; named `<Function name>Backward` like PyTorch's."""

    _fn_cls = None

    def __repr__(self):
        # Python's own repr, as PyTorch's (a C++ node prints its bare name):
        # <nbgrad.autograd.function.MyFnBackward object at 0x...>, torch.autograd.function under
        # the torch alias
        return f"<{type(self).__module__}.{type(self).__qualname__} object at {hex(id(self))}>"

    @property
    def saved_tensors(self):
        """The tensors given to save_for_backward, after the version check."""
        saved = self._saved
        if saved is None:
            return ()
        return tuple(None if s is None else s.unpack(self, True) for s in saved)

    @property
    def saved_variables(self):
        return self.saved_tensors

    @property
    def _raw_saved_tensors(self):
        """The SavedTensor objects themselves (torch's `_raw_saved_tensors`), with
        `register_hooks`."""
        return tuple(SavedTensor._undefined("saved") if s is None else s
                     for s in self._saved or ())

    def _release(self):
        for s in self._saved or ():
            if s is not None:
                s.release()

    def _saved_tensors(self):
        return tuple(s for s in (self._saved or ()) if s is not None)

    def _backward(self, gs, create_graph):
        if self._saved is not None and any(s is not None and s.released for s in self._saved):
            from .graph import backward_twice_error
            raise backward_twice_error()
        grads = list(gs) if self._n_out > 1 else [gs]
        wrapped = []
        for g, shape_dt in zip(grads, self._out_meta):
            if g is None:
                if self._materialize:
                    g = _tm.fresh_zeros(tuple(shape_dt[0]), dtypes.to_np(shape_dt[1]))
                wrapped.append(g)
            else:
                wrapped.append(g if isinstance(g, _tm.Tensor)
                               else _tm.Tensor._make_fresh(as_array(g)))
        if not all(self._out_is_tensor):  # non-tensor outputs get None, as in PyTorch
            it = iter(wrapped)
            wrapped = [next(it) if is_t else None for is_t in self._out_is_tensor]
        res = self._fn_cls.backward(self, *wrapped)
        if not isinstance(res, tuple):
            res = (res,)
        n_args = len(self._arg_is_tensor)
        if len(res) != n_args:
            if len(res) > n_args and all(r is None for r in res[n_args:]):
                res = res[:n_args]
            else:
                raise RuntimeError(f"function {type(self).__name__} returned an incorrect number "
                                   f"of gradients (expected {n_args}, got {len(res)})")
        out = []
        metas = iter(self._in_meta)  # one entry per TENSOR argument
        for is_t, r in zip(self._arg_is_tensor, res):
            if not is_t:
                continue
            meta = next(metas)
            if r is None:
                out.append(None)
                continue
            if not isinstance(r, _tm.Tensor):
                raise TypeError(f"function {type(self).__name__} returned a gradient of type "
                                f"{type(r).__name__}, expected a Tensor or None")
            if tuple(r._data.shape) != meta:
                shape = tuple(r._data.shape)
                # PyTorch sums a gradient that expands to the input's shape; anything else is
                # an error naming both shapes
                lead = len(shape) - len(meta)
                ok = lead >= 0 and all(m == s or m == 1 for m, s in zip(meta, shape[lead:]))
                if not ok:
                    raise RuntimeError(f"Function {type(self).__name__} returned an invalid "
                                       f"gradient at index {len(out)} - got {list(shape)} but "
                                       f"expected shape compatible with {list(meta)}")
                r = r.sum_to_size(*meta)
            out.append(r if create_graph else r._data)
        return out


_NODE_BASES.append(BackwardCFunction)  # its subclasses print under torch.autograd.function
expose(FunctionCtx, "torch.autograd.function")


class Function:
    """Base class for custom differentiable operations (torch.autograd.Function).

    Define `forward(ctx, *args)` and `backward(ctx, *grad_outputs)` as staticmethods and call
    `MyFunction.apply(*args)`.
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        """PyTorch 2's style: `forward(*args)` without ctx, then this fills ctx."""
        raise NotImplementedError

    @classmethod
    def _node_class(cls):
        c = cls.__dict__.get("_backward_cls")
        if c is None:
            c = node_class(type(cls.__name__ + "Backward", (BackwardCFunction,),
                                {"_fn_cls": cls}))
            cls._backward_cls = c
        return c

    @classmethod
    def apply(cls, *args, **kwargs):
        from .record import _edge
        from .views import _view_of
        from .inplace import check_inplace
        node = cls._node_class().__new__(cls._node_class())
        Node.__init__(node, ())
        node._to_save = ()
        node._dirty = ()
        node._non_diff = ()
        node._materialize = True
        is_t = tuple(isinstance(a, _tm.Tensor) for a in args)
        node._arg_is_tensor = is_t
        node.needs_input_grad = tuple(t and a._requires_grad for t, a in zip(is_t, args))
        with no_grad():
            if cls.setup_context is not Function.setup_context:  # forward(*args) + setup_context
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(node, args, outputs)
            else:
                outputs = cls.forward(node, *args, **kwargs)
        tracked = STATE.enabled and any(node.needs_input_grad)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else tuple(outputs)
        if not tracked:
            return outputs
        node._next = tuple(_edge(a) for a, t in zip(args, is_t) if t)
        node._in_meta = tuple(tuple(a._data.shape) for a, t in zip(args, is_t) if t)
        dirty = {id(t) for t in node._dirty}
        non_diff = {id(t) for t in node._non_diff}
        input_ids = {id(a) for a, t in zip(args, is_t) if t}
        new_outs = []
        for o in outs:
            if isinstance(o, _tm.Tensor):
                if id(o) in dirty:
                    if o._requires_grad and o._grad_fn is None and o._view is None:
                        raise RuntimeError("a leaf Variable that requires grad has been used in "
                                           "an in-place operation.")
                    check_inplace(o, cls.__name__)
                    o._storage.bump(cls.__name__)  # PyTorch bumps a dirty tensor once more
                elif id(o) in input_ids:
                    o = _view_of(o, o._data)  # an input returned as is: a view of it, as torch
            new_outs.append(o)
        t_outs = [o for o in new_outs if isinstance(o, _tm.Tensor)]
        node._n_out = len(t_outs)
        node._out_meta = tuple((tuple(o._data.shape), o.dtype) for o in t_outs)
        node._out_is_tensor = tuple(isinstance(o, _tm.Tensor) for o in new_outs)
        for nr, o in enumerate(t_outs):
            if id(o) in non_diff:
                continue
            o._grad_fn = node
            o._output_nr = nr
            o._requires_grad = True
        out_ids = {id(o): True for o in t_outs}
        saved = []
        for s in node._to_save:
            if s is None:
                saved.append(None)
            else:
                saved.append(SavedTensor("saved", s, is_output=id(s) in out_ids and
                                         s._grad_fn is node))
        node._saved = saved
        node._to_save = ()  # the SavedTensors hold them now (an output kept here: a cycle)
        return new_outs[0] if single else tuple(new_outs)


class DelayedError(Node):
    """Stands where a once_differentiable backward would be differentiated: raises if reached."""

    __slots__ = ()

    def _backward(self, g, create_graph):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")


def once_differentiable(fn):
    """Decorator for a backward that cannot itself be differentiated: it runs under no_grad, and
    under create_graph its results carry a node that raises if a second backward reaches it."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        from .record import _edge
        with no_grad():
            out = fn(ctx, *args)
        if not STATE.enabled:
            return out
        needs = [a for a in args if isinstance(a, _tm.Tensor) and a._requires_grad]
        if not needs:
            return out
        single = not isinstance(out, tuple)
        res = []
        for r in ((out,) if single else out):
            if isinstance(r, _tm.Tensor) and r._data.dtype.kind == "f":
                r = r.detach()
                r._grad_fn = DelayedError(tuple(_edge(a) for a in needs))
                r._requires_grad = True
            res.append(r)
        return res[0] if single else tuple(res)
    return wrapper
