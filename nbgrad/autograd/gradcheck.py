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
              fast_mode=False, **_ignored):
    """Compare autograd's Jacobian of `func` at `inputs` with central finite differences
    (torch.autograd.gradcheck).

    With `fast_mode=True`, as PyTorch's: each Jacobian J is checked through one number, v^T J u,
    for random unit vectors u (per input) and v (per output) drawn as PyTorch draws them (from a
    fresh generator, so the same numbers), against the finite difference along u; on a mismatch
    the message gives both numbers, then the full Jacobians recomputed as in slow mode.

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
    if fast_mode:
        msg = _fast_mismatch(func, inputs, eps, atol, rtol)
        if msg is not None and raise_exception:
            raise GradcheckError(msg)
        return msg is None
    diff, outs, num = _numerical_jacobians(func, inputs, eps)
    if not any(o.requires_grad for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)):
        # no differentiable output: PyTorch expects a zero numerical gradient
        if any(np.count_nonzero(n) for n in num.values()):
            if raise_exception:
                raise GradcheckError(_EXPECTED_ZERO)
            return False
        return True
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


# PyTorch's fast gradcheck draws u and v with torch.rand from a fresh torch.Generator(), whose
# seed is this; its CPU mt19937 is the standard one (numpy's legacy seeding gives the same
# stream), and a float32 draw is the low 24 bits of one 32-bit output, times 2**-24
_TORCH_DEFAULT_SEED = 67280421310721


def _torch_rand_stream():
    rs = np.random.RandomState(_TORCH_DEFAULT_SEED & 0xFFFFFFFF)

    def unit(n, dtype):
        """torch.rand(n, generator=g).to(dtype), divided by its norm."""
        v = (rs.randint(0, 1 << 24, size=n, dtype=np.uint32) * 2.0 ** -24).astype(np.float32)
        v = v.astype(dtype)
        return v / np.sqrt((v * v).sum())
    return unit


def _fast_mismatch(func, inputs, eps, atol, rtol):
    """PyTorch's fast-mode check (see gradcheck): None when every v^T J u agrees, else the
    GradcheckError text for the first pair (input, output) that does not."""
    from ..autograd import grad
    from ..backend import get_array_module
    from ..tensor import Tensor
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    outs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]
    outputs = [o for o in outs if o.requires_grad]  # the differentiable outputs
    unit = _torch_rand_stream()
    all_u = [unit(inputs[i].numel(), inputs[i]._data.dtype) for i in diff]
    all_v = [unit(o.numel(), o._data.dtype) for o in outputs]
    numerical = []  # per input: v_j . (J_j u) for each float output j
    for i, u in zip(diff, all_u):
        ju = _directional(func, inputs, i, u, eps)
        if not outputs and any(j.size and float(abs(j).max()) > 0 for j in ju):
            return _EXPECTED_ZERO
        xp = get_array_module(inputs[i]._data)
        numerical.append([float((xp.asarray(v) * j).sum()) for v, j in zip(all_v, ju)])
    analytical = []  # per output: (v^T J) . u for each input
    for o, v in zip(outputs, all_v):
        xp = get_array_module(o._data)
        gs = grad(o, [inputs[i] for i in diff], Tensor._make_fresh(xp.asarray(v).reshape(
            o._data.shape)), retain_graph=True, allow_unused=True)
        analytical.append([0.0 if g is None else float((g._data.reshape(-1) * xp.asarray(u))
                                                       .sum()) for g, u in zip(gs, all_u)])
    for k, (i, u) in enumerate(zip(diff, all_u)):
        for j, (n, v) in enumerate(zip(numerical[k], all_v)):
            a = analytical[j][k]
            tol = atol * float(u.sum()) * float(v.sum())
            if abs(a - n) <= tol + rtol * abs(n):
                continue
            pos = [p for p, o in enumerate(outs) if o.requires_grad][j]
            return (f"Jacobian mismatch for output {j:d} with respect to input {k:d},\n"
                    f"numerical:{n}\nanalytical:{a}\n"
                    + _slow_mode_text(func, inputs, i, pos, eps, atol, rtol))
    return None


def _directional(func, inputs, i, u, eps):
    """J u by central differences along `u` for input `i`: one flat array per float output, in
    its dtype (PyTorch's fast mode: the input moved by -eps*u and +eps*u in its own dtype)."""
    from ..backend import get_array_module
    from ..autograd.grad_mode import no_grad
    from ..tensor import Tensor
    x = inputs[i]
    flat = x._data.reshape(-1)
    if not np.shares_memory(flat, x._data):
        raise ValueError("gradcheck needs contiguous inputs")
    orig = flat.copy()
    step = get_array_module(flat).asarray(u) * flat.dtype.type(eps)
    res = []
    for moved in (orig - step, orig + step):
        flat[...] = moved
        with no_grad():
            res.append([o._data.reshape(-1).copy() for o in _as_tuple(func(*inputs))
                        if isinstance(o, Tensor) and o._data.dtype.kind in "fc"])
    flat[...] = orig
    return [(b - a) / (2 * eps) for a, b in zip(*res)]


_EXPECTED_ZERO = "Numerical gradient for function expected to be zero"


def _slow_mode_text(func, inputs, i, j, eps, atol, rtol):
    """What PyTorch's fast mode adds to its message: the full Jacobians of input `i` and
    Tensor output `j`, recomputed as in slow mode, and their largest difference."""
    from ..tensor import Tensor
    diff, outs, num = _numerical_jacobians(func, inputs, eps)
    ana = _analytical_jacobians(func, inputs, diff)
    n = num[(i, j)].astype(outs[j]._data.dtype)
    a = ana[(i, j)].astype(inputs[i]._data.dtype)
    dt = np.result_type(n.dtype, a.dtype)
    worst = dt.type(np.abs(n.astype(dt) - a.astype(dt)).max())
    text = ("\nThe above quantities relating the numerical and analytical jacobians are computed "
            "\nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more "
            "background \nabout fast mode. Below, we recompute numerical and analytical jacobians "
            "in slow mode:\n\n"
            f"Numerical:\n {Tensor._make_fresh(n)!r}\n"
            f"Analytical:\n{Tensor._make_fresh(a)!r}\n\n"
            f"The max per-element difference (slow mode) is: {float(worst)}.\n")
    if np.allclose(a.astype(dt), n.astype(dt), rtol=rtol, atol=atol):
        text += _FAST_FAIL_SLOW_OK
    return text


_FAST_FAIL_SLOW_OK = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:

If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `fast_mode=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_fast_mode=False`
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_fast_mode=False`
""".strip()


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, fast_mode=False, **_ignored):
    """gradcheck of the gradient of `func` (second derivatives), with random grad_outputs
    (torch.autograd.gradgradcheck; `fast_mode` as in gradcheck)."""
    from ..autograd import grad
    from ..random import randn
    from ..tensor import Tensor
    inputs = _as_tuple(inputs)
    outs = [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor)]
    if grad_outputs is None:
        grad_outputs = tuple(randn(tuple(o.shape), dtype=o.dtype).requires_grad_() for o in outs)
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
                     raise_exception=raise_exception, fast_mode=fast_mode)
