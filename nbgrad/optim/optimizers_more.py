"""ASGD, Rprop, Adafactor: more of torch.optim's single-tensor update rules, in place
on the parameters' arrays, in the operation order of torch's ``_single_tensor_*`` functions (the
path torch takes on CPU), so float64 runs agree step for step to rounding.

Scalars torch keeps in float32 tensors (ASGD's ``eta`` and ``mu``, every ``step``) are float32
tensors here too, and read back as torch reads them (``.item()``), so their rounding is torch's.
"""

import numpy as np

from ..backend import get_array_module as _xp
from .optimizer import Optimizer, _tensor_of, _use_grad
from .optimizers import _grad_array, _lerp_
from .sparse import refuse_sparse

__all__ = ["ASGD", "Rprop", "Adafactor"]


def _lr_check(lr):
    if hasattr(lr, "numel") and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")


def _scalar32(value):
    return _tensor_of(np.array(value, np.float32))


def _step_up(st):
    """``state["step"] += 1`` on the float32 step tensor; returns its value as torch reads it."""
    arr = st["step"]._data
    arr[()] = arr + np.float32(1)
    return float(arr)


class ASGD(Optimizer):
    """Averaged stochastic gradient descent (mirrors ``torch.optim.ASGD``).

    Per step: ``g += weight_decay * p``; ``p *= 1 - lambd * eta``; ``p -= eta * g``; the average
    ``ax`` follows ``p`` (``ax += mu * (p - ax)``, or a copy while ``mu == 1``); then
    ``eta = lr / (1 + lambd * lr * step) ** alpha`` and ``mu = 1 / max(1, step - t0)``.

    Args:
        params: parameters or parameter groups.
        lr (float): 1e-2; lambd (float): 1e-4; alpha (float): 0.75; t0 (float): 1e6;
        weight_decay (float): 0; maximize (bool).

    State per parameter: ``step``, ``eta``, ``mu`` (float32 scalar tensors), ``ax`` (like p).

    Raises:
        ValueError: a negative lr or weight_decay (torch's texts).
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _lr_check(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One ASGD update of every parameter that has a grad. Returns ``closure()``'s loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            refuse_sparse(group, "ASGD does not support sparse gradients")
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
            wd = group["weight_decay"]
            for p in group["params"]:
                g = _grad_array(p, group["maximize"])
                if g is None:
                    continue
                pd = p._data
                st = self.state[p]
                if not st:
                    st["step"] = _scalar32(0.0)
                    st["eta"] = _scalar32(float(lr))
                    st["mu"] = _scalar32(1.0)
                    st["ax"] = _tensor_of(_xp(pd).zeros_like(pd))
                step = _step_up(st)
                if wd != 0:
                    g = g + wd * pd
                eta, mu = float(st["eta"]._data), float(st["mu"]._data)
                pd *= 1 - lambd * eta
                pd += -eta * g
                ax = st["ax"]._data
                if mu != 1:
                    ax += (pd - ax) * mu
                else:
                    ax[...] = pd
                st["ax"]._bump_version("add_")
                # (torch.as_tensor of a Python float: float32, then copied into eta and mu)
                st["eta"]._data[()] = np.float32(lr / ((1 + lambd * lr * step) ** alpha))
                st["mu"]._data[()] = np.float32(1 / max(1, step - t0))
                p._bump_version("mul_")
                p._bump_version("add_")
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation (mirrors ``torch.optim.Rprop``).

    Per element: the step size grows by ``etaplus`` where the gradient kept its sign, shrinks
    by ``etaminus`` where it flipped (and that gradient is then taken as 0), clamped to
    ``step_sizes``; ``p -= sign(g) * step_size``.

    Args:
        lr (float): 1e-2 (the initial step size); etas (tuple): (0.5, 1.2);
        step_sizes (tuple): (1e-6, 50); maximize (bool).

    State per parameter: ``step`` (float32 scalar), ``prev``, ``step_size`` (like p).

    Raises:
        ValueError: a negative lr, or etas not ``0 < etaminus < 1 < etaplus``.
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _lr_check(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One Rprop update of every parameter that has a grad. Returns ``closure()``'s loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            refuse_sparse(group, "Rprop does not support sparse gradients")
            etaminus, etaplus = group["etas"]
            lo, hi = group["step_sizes"]
            for p in group["params"]:
                g = _grad_array(p, group["maximize"])
                if g is None:
                    continue
                pd = p._data
                xp = _xp(pd)
                st = self.state[p]
                if not st:
                    st["step"] = _scalar32(0.0)
                    st["prev"] = _tensor_of(xp.zeros_like(pd))
                    st["step_size"] = _tensor_of(xp.full_like(g, group["lr"]))
                _step_up(st)
                prev, size = st["prev"]._data, st["step_size"]._data
                sign = xp.sign(g * prev)
                sign[sign > 0] = etaplus
                sign[sign < 0] = etaminus
                sign[sign == 0] = 1
                size *= sign
                xp.clip(size, lo, hi, out=size)
                g = g.copy()
                g[sign == etaminus] = 0
                pd += -1 * (xp.sign(g) * size)
                prev[...] = g
                st["step_size"]._bump_version("mul_")
                st["step_size"]._bump_version("clamp_")
                st["prev"]._bump_version("copy_")
                p._bump_version("addcmul_")
        return loss


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern), torch's variant (mirrors ``torch.optim.Adafactor``): the second
    moment of a matrix-shaped gradient is kept as row and column means (a vector's in full);
    relative step size ``min(lr, 1/sqrt(step))`` times the parameter's RMS; update clipping by
    ``d``; decoupled weight decay ``p *= 1 - lr * weight_decay``.

    Args:
        lr (float): 1e-2; beta2_decay (float): -0.8; eps (tuple): (None, 1e-3), eps1 None meaning
        the dtype's machine epsilon; d (float): 1.0; weight_decay (float): 0; maximize (bool).

    State per parameter: ``step`` (float32 scalar), and ``row_var`` / ``col_var`` (the
    gradient's shape with the last / second-to-last dim 1) or ``variance`` (1-D).

    Raises:
        ValueError: torch's texts for lr < 0, beta2_decay > 0, negative eps, d < 1, weight_decay
        < 0; RuntimeError: a complex parameter.
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        _lr_check(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One Adafactor update of every parameter that has a grad. Returns ``closure()``'s
        loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            refuse_sparse(group, "Adafactor does not support sparse gradients")
            lr, d, wd = group["lr"], group["d"], group["weight_decay"]
            eps1, eps2 = group["eps"]
            for p in group["params"]:
                if p._grad is not None and p._data.dtype.kind == "c":
                    raise RuntimeError("Adafactor does not support complex parameters")
                g = _grad_array(p, group["maximize"])
                if g is None:
                    continue
                pd = p._data
                xp = _xp(pd)
                st = self.state[p]
                if not st:
                    st["step"] = _scalar32(0.0)
                    if g.ndim > 1:
                        st["row_var"] = _tensor_of(xp.zeros(g.shape[:-1] + (1,), g.dtype))
                        st["col_var"] = _tensor_of(xp.zeros(g.shape[:-2] + (1,) + g.shape[-1:],
                                                            g.dtype))
                    else:
                        st["variance"] = _tensor_of(xp.zeros_like(g))
                e1 = float(np.finfo(pd.dtype).eps) if eps1 is None else eps1
                step = _step_up(st)
                one_minus_beta2_t = step ** group["beta2_decay"]
                rho_t = min(lr, 1 / (step ** 0.5))
                rms = float(xp.sqrt(xp.sum(pd * pd))) / (pd.size ** 0.5)
                alpha = max(eps2, rms) * rho_t
                if wd != 0:
                    pd *= 1 - lr * wd
                    p._bump_version("mul_")
                if g.ndim > 1:
                    row, col = st["row_var"]._data, st["col_var"]._data
                    row_mean = xp.sqrt(xp.sum(g * g, axis=-1, keepdims=True)) ** 2 / g.shape[-1]
                    _lerp_(row, row_mean, one_minus_beta2_t)
                    col_mean = xp.sqrt(xp.sum(g * g, axis=-2, keepdims=True)) ** 2 / g.shape[-2]
                    _lerp_(col, col_mean, one_minus_beta2_t)
                    var = xp.matmul(row, col)
                    var /= xp.maximum(row.mean(axis=-2, keepdims=True), e1)
                    st["row_var"]._bump_version("lerp_")
                    st["col_var"]._bump_version("lerp_")
                else:
                    v = st["variance"]._data
                    _lerp_(v, g * g, one_minus_beta2_t)
                    st["variance"]._bump_version("lerp_")
                    var = v.copy()
                update = 1 / xp.sqrt(xp.maximum(var, e1 * e1))
                update *= g
                denom = max(1.0, float(xp.sqrt(xp.sum(update * update))) / (
                    (update.size ** 0.5) * d))
                pd += (-alpha / denom) * update
                p._bump_version("add_")
        return loss
