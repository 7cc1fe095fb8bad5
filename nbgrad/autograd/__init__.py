"""nbgrad.autograd: backward, grad, custom Function, grad modes, anomaly detection, gradcheck."""
from __future__ import annotations

import sys

from .. import tensor as _tm  # noqa: E402  (a module reference: no import cycle)

from . import graph
from .engine import run_backward
from .anomaly import (detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled,
                      set_detect_anomaly)
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                        set_grad_enabled)
from ._variable import Variable  # torch.autograd.Variable, the deprecated alias

__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable", "gradcheck",
           "gradgradcheck", "GradcheckError", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "set_detect_anomaly", "detect_anomaly",
           "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "graph", "Variable",
           "functional"]


_CYCLE_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter "
    "and its gradient which can cause a memory leak. We recommend using autograd.grad when "
    "creating the graph to avoid this. If you have to use this function, make sure to reset the "
    ".grad fields of your parameters to None after use to break the cycle and avoid the leak.")
_CYCLE_WARNED = [False]


def _seq(x):
    if x is None:
        return None
    if isinstance(x, _tm.Tensor):
        return [x]
    return list(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate gradients of `tensors` into the leaves' `.grad` (torch.autograd.backward).

    Raises:
        RuntimeError: PyTorch's messages for a tensor without grad_fn, an implicit gradient for a
            non-scalar output, a gradient of the wrong shape, backward through a freed graph,
            or a saved tensor modified in place (with nbgrad's provenance added).
    """
    __tracebackhide__ = True
    tensors = _seq(tensors)
    grads = _seq(grad_tensors) or [None] * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(grads)} tensors and {len(tensors)} gradients")
    ins = _seq(inputs)
    if ins is not None and len(ins) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    if create_graph and not _CYCLE_WARNED[0]:
        _CYCLE_WARNED[0] = True  # once per process, as PyTorch
        import warnings
        from ..provenance import _PKG
        level, f = 1, sys._getframe(1)
        while f is not None and f.f_code.co_filename.startswith(_PKG):
            level, f = level + 1, f.f_back
        warnings.warn(_CYCLE_WARNING, UserWarning, stacklevel=level + 1)
    res = run_backward(tensors, grads, retain_graph, create_graph, inputs=ins,
                       accumulate=ins is None)
    if ins is not None:
        for t, g in zip(ins, res):
            if g is None:
                continue
            if t.grad_fn is None:  # a leaf: as its AccumulateGrad
                graph.accumulate_into(t, g, create_graph)
            elif t._grad is None:  # a non-leaf: as retain_grad, a clone (CloneBackward0)
                t._grad = g.clone() if create_graph else _tm.Tensor._make_fresh(g._data.copy())
            else:
                t._grad = t._grad + g


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` w.r.t. `inputs`, returned, not accumulated (torch.autograd.grad).

    Returns:
        tuple of Tensors (None for unused inputs when allow_unused=True).
    """
    __tracebackhide__ = True
    outputs = _seq(outputs)
    ins = _seq(inputs)
    grads = _seq(grad_outputs) or [None] * len(outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    res = run_backward(outputs, grads, retain_graph, create_graph, inputs=ins,
                       allow_unused=allow_unused, accumulate=False, api="grad")
    if materialize_grads:
        res = [_tm.fresh_zeros(t._data.shape, t._data.dtype, t.device) if g is None else g
               for t, g in zip(ins, res)]
    return tuple(res)
