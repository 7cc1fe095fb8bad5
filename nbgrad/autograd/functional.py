"""``nbgrad.autograd.functional`` (torch.autograd.functional): Jacobians, Hessians and their
products with vectors, for a function of tensors, built on :func:`nbgrad.autograd.grad`.

``inputs`` is a Tensor or a tuple of them; results mirror that structure as PyTorch's do (a
tuple of inputs gives tuples). The inputs are detached copies that require grad (views of the
inputs when ``create_graph=True`` and they require grad, so the result is differentiable back
to them); without ``create_graph`` every result is detached. Outputs that do not depend on an
input give zeros there (``strict=True`` raises instead, as PyTorch).
"""
from __future__ import annotations

from .. import creation
from ..tensor import Tensor
from . import grad as _grad
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _as_tuple(x, arg_name, fn_name):
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            where = f"The {arg_name} given to {fn_name}" if not is_tuple else \
                f"Element {i} of the {arg_name} given to {fn_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but the value at index {i} has type "
                            f"{type(t)}." if is_tuple else
                            f"{where} must be either a Tensor or a tuple of Tensors but the "
                            f"given {arg_name} has type {type(t)}.")
    return is_tuple, xs


def _prepare(inputs, create_graph):
    return tuple(t.view_as(t) if create_graph and t.requires_grad else
                 t.detach().requires_grad_(True) for t in inputs)


def _finish(xs, create_graph):
    return tuple(x if x is None or create_graph else x.detach() for x in xs)


def _grads(outputs, inputs, grad_outputs, create_graph, strict, what, out_index=0):
    """grad of outputs w.r.t. inputs, zeros (or strict's error) for unused inputs."""
    used = [o for o in outputs if o.requires_grad]
    gos = [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if used:
        res = _grad(used, inputs, gos, retain_graph=True, create_graph=create_graph,
                    allow_unused=True)
    else:
        res = (None,) * len(inputs)
    out = []
    for i, (r, x) in enumerate(zip(res, inputs)):
        if r is None:
            if strict:
                raise RuntimeError(f"Output {out_index} of the user-provided function is "
                                   f"independent of input {i}. This is not allowed in strict "
                                   "mode.")
            r = creation.zeros_like(x)
        out.append(r)
    return tuple(out)


def _call(func, inputs, fn_name):
    with enable_grad():
        out = func(*inputs)
    return _as_tuple(out, "outputs of the user-provided function", fn_name)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J) (torch.autograd.functional.vjp).

    Raises:
        RuntimeError: ``v`` None while the output has more than one element (PyTorch's text).
    """
    in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, "vjp")
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        vs = (creation.ones_like(outputs[0]),)
    else:
        vs = _as_tuple(v, "v", "vjp")[1]
    with enable_grad():
        g = _grads(outputs, inputs, vs, create_graph, strict, "vjp")
    outs = _finish(outputs, create_graph)
    g = _finish(g, create_graph)
    return (outs if out_tuple else outs[0]), (g if in_tuple else g[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v) (torch.autograd.functional.jvp), by the double-backward trick.

    Raises:
        RuntimeError: ``v`` None while an input has more than one element (PyTorch's text).
    """
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided "
                               "function is a single Tensor with a single element.")
        vs = (creation.ones_like(inputs[0]),)
    else:
        vs = _as_tuple(v, "v", "jvp")[1]
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, "jvp")
    with enable_grad():
        us = tuple(creation.zeros_like(o).requires_grad_(True) for o in outputs)
        g = _grads(outputs, inputs, us, True, strict, "jvp")
        used = [(gi, vi) for gi, vi in zip(g, vs) if gi.requires_grad]
        if used:
            res = _grad([gi for gi, _ in used], us, [vi for _, vi in used],
                        create_graph=create_graph, allow_unused=True)
        else:
            res = (None,) * len(us)
    jv = tuple(creation.zeros_like(o) if r is None else r for r, o in zip(res, outputs))
    outs = _finish(outputs, create_graph)
    jv = _finish(jv, create_graph)
    return (outs if out_tuple else outs[0]), (jv if out_tuple else jv[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs`` (torch.autograd.functional.jacobian): for output
    i and input j a tensor of shape ``out_i.shape + in_j.shape``, nested as PyTorch nests it
    (a tuple of outputs, each a tuple over inputs, when both are tuples). Row by row, by
    reverse mode (``vectorize`` and ``strategy`` are accepted; the result is the same)."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _call(func, inputs, "jacobian")
    rows = []
    with enable_grad():
        for oi, o in enumerate(outputs):
            flat = o.reshape(-1)
            per_in = [[] for _ in inputs]
            for k in range(flat.numel()):
                unit = creation.zeros_like(flat)
                unit[k] = 1
                g = _grads((flat,), inputs, (unit,), create_graph, strict, "jacobian", oi)
                for j, gj in enumerate(g):
                    per_in[j].append(gj)
            from ..functions import stack
            blocks = []
            for j, x in enumerate(inputs):
                if per_in[j]:
                    blk = stack(per_in[j]).reshape(tuple(o.shape) + tuple(x.shape))
                else:
                    blk = creation.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype)
                blocks.append(blk if create_graph else blk.detach())
            rows.append(tuple(blocks) if in_tuple else blocks[0])
    return tuple(rows) if out_tuple else rows[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func`` (torch.autograd.functional.hessian): for inputs i, j a
    tensor of shape ``in_i.shape + in_j.shape``.

    Raises:
        RuntimeError: ``func`` returns more than one element (PyTorch's text).
    """
    in_tuple, inputs_t = _as_tuple(inputs, "inputs", "hessian")

    def grad_of(*xs):
        out_tuple, outs = _call(func, xs, "hessian")
        if out_tuple or outs[0].numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return _grads(outs, xs, (creation.ones_like(outs[0]),), True, strict, "hessian")

    res = jacobian(grad_of, inputs_t, create_graph=create_graph, strict=strict)
    return res if in_tuple else res[0][0]


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a scalar ``func`` (torch.autograd.functional.vhp)."""
    in_tuple, inputs_t = _as_tuple(inputs, "inputs", "vhp")
    xs = _prepare(inputs_t, create_graph)
    out_tuple, outs = _call(func, xs, "vhp")
    if out_tuple or outs[0].numel() != 1:
        raise RuntimeError("The Tensor returned by the function given to vhp should contain a "
                           "single element")
    vs = (creation.ones_like(xs[0]),) if v is None else _as_tuple(v, "v", "vhp")[1]
    with enable_grad():
        g = _grads(outs, xs, (creation.ones_like(outs[0]),), True, strict, "vhp")
        h = _grads(g, xs, vs, create_graph, strict, "vhp")
    out = _finish(outs, create_graph)[0]
    h = _finish(h, create_graph)
    return out, (h if in_tuple else h[0])


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a scalar ``func`` (torch.autograd.functional.hvp); H is
    symmetric, so this is :func:`vhp`'s product."""
    return vhp(func, inputs, v, create_graph, strict)
