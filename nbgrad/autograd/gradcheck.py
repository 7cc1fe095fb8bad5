"""Finite-difference checks of gradients (torch.autograd.gradcheck / gradgradcheck)."""
from __future__ import annotations

import numpy as np


class GradcheckError(RuntimeError):
    """Raised by gradcheck when analytical and numerical Jacobians disagree."""


def _as_tuple(x):
    """A tuple of the inputs: a tuple as it is, a list as a tuple, one tensor alone (as torch)."""
    if isinstance(x, list):
        return tuple(x)
    return x if isinstance(x, tuple) else (x,)


def _numerical_jacobians(fn, inputs, eps):
    """One (n_in, n_out) matrix per (input, output) pair by central differences."""
    from ..autograd.grad_mode import no_grad
    from ..tensor import Tensor
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    with no_grad():
        outs = [o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor)]
    jac = {}
    for i in diff:
        x = inputs[i]
        flat = x._data.reshape(-1)  # a view when contiguous
        if not np.shares_memory(flat, x._data):
            raise ValueError("gradcheck needs contiguous inputs")
        cols = []
        for k in range(flat.size):
            orig = flat[k].item()
            flat[k] = orig + eps
            with no_grad():
                plus = [o._data.astype(np.float64).reshape(-1).copy()
                        for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor)]
            flat[k] = orig - eps
            with no_grad():
                minus = [o._data.astype(np.float64).reshape(-1).copy()
                         for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor)]
            flat[k] = orig
            cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
        for j in range(len(outs)):
            jac[(i, j)] = np.stack([c[j] for c in cols]) if cols else np.zeros((0, outs[j].numel()))
    return diff, outs, jac


def _analytical_jacobians(fn, inputs, diff):
    from ..autograd import grad
    from ..tensor import Tensor
    outs = [o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor)]
    jac = {}
    for j, o in enumerate(outs):
        n = o.numel()
        rows = {i: np.zeros((inputs[i].numel(), n)) for i in diff}
        if o.requires_grad:
            for k in range(n):
                go = np.zeros(n, dtype=o._data.dtype)
                go[k] = 1
                gs = grad(o, [inputs[i] for i in diff],
                          Tensor._make_fresh(go.reshape(o._data.shape)), retain_graph=True,
                          allow_unused=True)
                for i, g in zip(diff, gs):
                    if g is not None:
                        rows[i][:, k] = g._data.reshape(-1)
        for i in diff:
            jac[(i, j)] = rows[i]
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              **_ignored):
    """Compare autograd's Jacobian of `func` at `inputs` with central finite differences.

    Inputs that require grad should be float64. Returns True, or raises GradcheckError
    (or returns False when raise_exception=False).
    """
    import warnings
    from ..tensor import Tensor
    inputs = _as_tuple(inputs)
    for k, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad and x._data.dtype != np.float64:
            warnings.warn(f"Input #{k} requires gradient and is not a double "
                          "precision floating point or complex. This check will likely fail if "
                          "all the inputs are not of double precision floating point or "
                          "complex. ", UserWarning, stacklevel=2)
    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of them have requires_grad=True.")
    diff, outs, num = _numerical_jacobians(func, inputs, eps)
    ana = _analytical_jacobians(func, inputs, diff)
    for (i, j), n in num.items():
        a = ana[(i, j)]
        if not np.allclose(a, n, rtol=rtol, atol=atol):
            if raise_exception:
                raise GradcheckError(_mismatch_text(i, j, n.astype(outs[j]._data.dtype),
                                                    a.astype(inputs[i]._data.dtype)))
            return False
    return True


def _mismatch_text(i, j, numerical, analytical):
    """PyTorch's GradcheckError text: both Jacobians (rows: input elements, columns: output
    elements) printed as tensors, the numerical one in the output's dtype, the analytical one in
    the input's."""
    from ..tensor import Tensor
    return (f"Jacobian mismatch for output {j} with respect to input {i},\n"
            f"numerical:{Tensor._make_fresh(numerical)!r}\n"
            f"analytical:{Tensor._make_fresh(analytical)!r}\n")


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, **_ignored):
    """gradcheck of the gradient of `func` (second derivatives), with random grad_outputs."""
    from ..autograd import grad
    from ..random import randn
    from ..tensor import Tensor
    inputs = _as_tuple(inputs)
    outs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]
    if grad_outputs is None:
        grad_outputs = tuple(randn(*o.shape, dtype=o.dtype).requires_grad_() for o in outs)
    grad_outputs = _as_tuple(grad_outputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    n_in = len(inputs)

    def first_grads(*args):
        from .grad_mode import enable_grad
        with enable_grad():  # the numerical pass calls this under no_grad
            return _first_grads(*args)

    def _first_grads(*args):
        xs, gos = args[:n_in], args[n_in:]
        os = [o for o in _as_tuple(func(*xs)) if isinstance(o, Tensor)]
        gs = grad(os, [xs[i] for i in diff], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
