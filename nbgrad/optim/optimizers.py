"""SGD, Adam, AdamW, RMSprop: torch.optim's single-tensor update rules, in place on numpy.

Each ``step`` follows the operation order of torch's ``_single_tensor_*`` functions (the path torch
takes on CPU), so float64 runs agree step for step to rounding.
"""

import numpy as np

from .optimizer import Optimizer, _tensor_of, _use_grad

__all__ = ["SGD", "Adam", "AdamW", "RMSprop"]


def _grad_array(p, maximize):
    g = p._grad  # the raw .grad slot (parameters are leaves)
    if g is None:
        return None
    g = g._data
    return -g if maximize else g


def _lerp_(a, b, w):
    """``a.lerp_(b, w)`` with torch's formula (stable for either half of the weight range)."""
    if w < 0.5:
        a += w * (b - a)
    else:
        a[...] = b - (b - a) * (1 - w)


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov, weight decay.

    Mirrors ``torch.optim.SGD``: ``g += wd * p``; ``buf = momentum * buf + (1 - dampening) * g``
    (``buf = g`` on the first step); ``g = g + momentum * buf`` (Nesterov) or ``buf``;
    ``p -= lr * g``.

    Args:
        params: parameters or parameter groups.
        lr (float): default 1e-3 (torch 2.x).
        momentum, dampening, weight_decay (float): default 0.
        nesterov (bool): needs momentum > 0 and dampening == 0.
        maximize (bool): ascend instead.

    Raises:
        ValueError: a negative lr / momentum / weight_decay, or Nesterov without momentum.
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One update of every parameter that has a grad. Returns ``closure()``'s loss, if any."""
        loss = self._closure_loss(closure)
        state = self.state
        for group in self.param_groups:
            lr = group["lr"]
            momentum = group["momentum"]
            dampening = group["dampening"]
            wd = group["weight_decay"]
            nesterov = group["nesterov"]
            maximize = group["maximize"]
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                g = -g._data if maximize else g._data
                if wd != 0:
                    g = g + wd * p._data
                if momentum != 0:
                    st = state[p]
                    buf = st.get("momentum_buffer")
                    if buf is None:
                        buf = _tensor_of(np.array(g, copy=True))
                        st["momentum_buffer"] = buf
                    else:
                        b = buf._data
                        b *= momentum
                        if dampening:
                            b += (1 - dampening) * g
                        else:
                            b += g
                    g = g + momentum * buf._data if nesterov else buf._data
                pd = p._data
                pd -= lr * g
                p._bump_version("add_")
        return loss


class Adam(Optimizer):
    """Adam (Kingma & Ba), with optional AMSGrad and L2 weight decay (mirrors torch.optim.Adam).

    ``m = lerp(m, g, 1 - beta1)``; ``v = beta2 v + (1 - beta2) g^2``;
    ``p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``.

    Args:
        lr (float): 1e-3; betas (tuple): (0.9, 0.999); eps (float): 1e-8;
        weight_decay (float): 0 (added to the gradient); amsgrad (bool); maximize (bool);
        decoupled_weight_decay (bool): AdamW's decay instead.

    State per parameter: ``step`` (float32 scalar tensor), ``exp_avg``, ``exp_avg_sq``
    (and ``max_exp_avg_sq`` with amsgrad).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One Adam update of every parameter that has a grad. Returns ``closure()``'s loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = group["lr"]
            beta1, beta2 = group["betas"]
            eps = group["eps"]
            wd = group["weight_decay"]
            amsgrad = group["amsgrad"]
            decoupled = group["decoupled_weight_decay"]
            for p in group["params"]:
                g = _grad_array(p, group["maximize"])
                if g is None:
                    continue
                pd = p._data
                st = self.state[p]
                if not st:
                    st["step"] = _tensor_of(np.zeros((), np.float32))
                    st["exp_avg"] = _tensor_of(np.zeros_like(pd))
                    st["exp_avg_sq"] = _tensor_of(np.zeros_like(pd))
                    if amsgrad:
                        st["max_exp_avg_sq"] = _tensor_of(np.zeros_like(pd))
                step_arr = st["step"]._data
                step_arr += 1
                step = float(step_arr)
                if wd != 0:
                    if decoupled:
                        pd *= 1 - lr * wd
                        p._bump_version("mul_")
                    else:
                        g = g + wd * pd
                m = st["exp_avg"]._data
                v = st["exp_avg_sq"]._data
                _lerp_(m, g, 1 - beta1)
                v *= beta2
                v += (1 - beta2) * g * g
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                step_size = lr / bias_correction1
                bias_correction2_sqrt = bias_correction2 ** 0.5
                if amsgrad:
                    vmax = st["max_exp_avg_sq"]._data
                    np.maximum(vmax, v, out=vmax)
                    denom = np.sqrt(vmax)
                else:
                    denom = np.sqrt(v)
                denom /= bias_correction2_sqrt
                denom += eps
                pd += -step_size * (m / denom)
                p._bump_version("addcdiv_")
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay ``p *= 1 - lr * wd`` (mirrors ``torch.optim.AdamW``).

    Same arguments as :class:`Adam`; ``weight_decay`` defaults to 1e-2.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)


class RMSprop(Optimizer):
    """RMSprop (mirrors ``torch.optim.RMSprop``).

    ``v = alpha v + (1 - alpha) g^2``; centred: ``avg = sqrt(v - gavg^2)``, else ``sqrt(v)``;
    ``avg += eps``; with momentum ``buf = momentum buf + g / avg; p -= lr buf``, else
    ``p -= lr g / avg``.

    Args:
        lr (float): 1e-2; alpha (float): 0.99; eps (float): 1e-8; weight_decay, momentum: 0;
        centered (bool); maximize (bool).
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One RMSprop update of every parameter that has a grad. Returns ``closure()``'s loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            wd, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
            for p in group["params"]:
                g = _grad_array(p, group["maximize"])
                if g is None:
                    continue
                pd = p._data
                st = self.state[p]
                if not st:
                    st["step"] = _tensor_of(np.zeros((), np.float32))
                    st["square_avg"] = _tensor_of(np.zeros_like(pd))
                    if momentum > 0:
                        st["momentum_buffer"] = _tensor_of(np.zeros_like(pd))
                    if centered:
                        st["grad_avg"] = _tensor_of(np.zeros_like(pd))
                step_arr = st["step"]._data
                step_arr += 1
                if wd != 0:
                    g = g + wd * pd
                v = st["square_avg"]._data
                v *= alpha
                v += (1 - alpha) * g * g
                if centered:
                    ga = st["grad_avg"]._data
                    _lerp_(ga, g, 1 - alpha)
                    avg = np.sqrt(v - ga * ga)
                else:
                    avg = np.sqrt(v)
                avg += eps
                if momentum > 0:
                    buf = st["momentum_buffer"]._data
                    buf *= momentum
                    buf += g / avg
                    pd -= lr * buf
                else:
                    pd -= lr * (g / avg)
                p._bump_version("add_")
        return loss
