"""SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam: torch.optim's
single-tensor update rules, in place on numpy.

Each ``step`` follows the operation order of torch's ``_single_tensor_*`` functions (the path torch
takes on CPU), so float64 runs agree step for step to rounding.
"""

import math

import numpy as np

from ..backend import get_array_module as _xp
from ..sparse_coo import SparseCOO
from ..storage import bump_all
from .optimizer import Optimizer, _tensor_of, _use_grad
from .sparse import adagrad_sparse_step, refuse_sparse, sgd_sparse_step

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"]


def _grad_array(p, maximize):
    """The gradient's array (negated under ``maximize``); a sparse gradient as it is (only the
    optimizers that take one read it: the others refuse it first, ``refuse_sparse``)."""
    g = p._grad  # the raw .grad slot (parameters are leaves)
    if g is None:
        return None
    if g.is_sparse:
        return -g if maximize else g
    g = g._data
    return -g if maximize else g


def _sqrt(a):
    """sqrt on the array's own module (numpy, or cupy for device parameters)."""
    return _xp(a).sqrt(a)


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
            written = []
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                if g.is_sparse:
                    sgd_sparse_step(p, g, state[p], lr, momentum, dampening, wd, nesterov,
                                    maximize)
                    continue
                g = -g._data if maximize else g._data
                if wd != 0:
                    g = g + wd * p._data
                if momentum != 0:
                    st = state[p]
                    buf = st.get("momentum_buffer")
                    if buf is None:
                        buf = _tensor_of(g.copy())
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
                written.append(p._storage)
            bump_all(written, "add_")  # (torch's add_: the user's line found once)
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
            refuse_sparse(group, "Adam does not support sparse gradients, "
                          "please consider SparseAdam instead")
            amsgrad = group["amsgrad"]
            todo = []  # (parameter, grad array, state, step) of those that have a grad
            for p in group["params"]:
                g = _grad_array(p, group["maximize"])
                if g is None:
                    continue
                pd = p._data
                st = self.state[p]
                if not st:
                    st["step"] = _tensor_of(np.zeros((), np.float32))
                    st["exp_avg"] = _tensor_of(_xp(pd).zeros_like(pd))
                    st["exp_avg_sq"] = _tensor_of(_xp(pd).zeros_like(pd))
                    if amsgrad:
                        st["max_exp_avg_sq"] = _tensor_of(_xp(pd).zeros_like(pd))
                step_arr = st["step"]._data
                step_arr[()] = float(step_arr) + 1  # += 1, rounded alike: a third of the cost
                todo.append((p, g, st, float(step_arr)))
            keys = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ())
            small = [t for t in todo if t[0]._data.size <= _FLAT_EACH]
            flat = _flat_batch(self, small, keys)
            if flat is not None:  # many small parameters: one update over their concatenation
                buf_p, buf_g, bufs, write_back = flat
                _adam_update(buf_p, buf_g, *bufs, small[0][3], group)
                write_back()
            for p, g, st, step in todo if flat is None else (
                    t for t in todo if t[0]._data.size > _FLAT_EACH):
                m, v, *vmax = (st[k]._data for k in keys)
                _adam_update(p._data, g, m, v, vmax[0] if vmax else None, step, group)
            # the versions torch's mul_ and addcdiv_ give
            written = [p._storage for p, _, _, _ in todo]
            if group["weight_decay"] != 0 and group["decoupled_weight_decay"]:
                bump_all(written, "mul_")
            bump_all(written, "addcdiv_")
        return loss


def _adam_update(pd, g, m, v, vmax, step, group):
    """Adam's update of the arrays of one parameter (or of several, concatenated): torch's
    ``_single_tensor_adam`` operations in its order, so that each element's value is the same
    either way. ``vmax`` is None without amsgrad."""
    lr = group["lr"]
    beta1, beta2 = group["betas"]
    eps = group["eps"]
    wd = group["weight_decay"]
    if wd != 0:
        if group["decoupled_weight_decay"]:
            pd *= 1 - lr * wd
        else:
            g = g + wd * pd
    _lerp_(m, g, 1 - beta1)
    v *= beta2
    v += (1 - beta2) * g * g
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = bias_correction2 ** 0.5
    if vmax is not None:
        _xp(v).maximum(vmax, v, out=vmax)
        denom = _sqrt(vmax)
    else:
        denom = _sqrt(v)
    denom /= bias_correction2_sqrt
    denom += eps
    pd += -step_size * (m / denom)


# A parameter of more elements than _FLAT_EACH is updated on its own (copying it in and out
# would cost more than the numpy calls saved); at least _FLAT_MIN parameters (fewer: the
# copies cost what they save, as for an LSTM's six) and at most _FLAT_MAX elements are
# concatenated.
_FLAT_EACH = 4096
_FLAT_MIN = 8
_FLAT_MAX = 1 << 20


def _aliases(g, d):
    """Whether grad array ``g`` is (a view of) parameter array ``d`` or shares its base: the
    per-parameter update then sees its own writes, as torch's does."""
    gb, db = g.base, d.base
    return g is d or gb is d or db is g or (gb is not None and gb is db)


def _flat_batch(opt, todo, keys):
    """The parameters of ``todo`` (and their grads and the state arrays named by ``keys``)
    copied into flat buffers, for one elementwise update over all of them instead of a dozen
    small numpy calls per parameter: ``(p, g, [state buffers], write_back)``, where
    ``write_back()`` copies the parameters and states back; or None where that does not apply
    (fewer than _FLAT_MIN, not all numpy arrays of one dtype, different step counts, parameters
    sharing storage, too large). Elementwise arithmetic gives every element the value the
    per-parameter update gives it. The buffers and their per-parameter views are kept on the
    optimizer, keyed by the parameters' shapes and dtype."""
    if len(todo) < _FLAT_MIN:
        return None
    p0 = todo[0][0]._data
    dt, step = p0.dtype, todo[0][3]
    storages = set()
    for p, g, st, s in todo:
        d = p._data
        if type(d) is not np.ndarray or d.dtype is not dt or s != step or \
                type(g) is not np.ndarray or g.dtype is not dt or _aliases(g, d):
            return None
        for name in keys:
            a = st[name]._data
            if type(a) is not np.ndarray or a.dtype is not dt:
                return None
        storages.add(id(p._storage))
    if len(storages) != len(todo):
        return None
    shapes = tuple(p._data.shape for p, _, _, _ in todo)
    cache = opt.__dict__.setdefault("_flat_buffers", {})
    key = (shapes, dt, len(keys))
    entry = cache.get(key)
    if entry is None:
        total = sum(p._data.size for p, _, _, _ in todo)
        if total > _FLAT_MAX:
            return None
        if len(cache) >= 4:  # a layout per parameter group, usually the same each step
            cache.clear()
        bufs = [np.empty(total, dt) for _ in range(2 + len(keys))]
        views, o = [], 0
        for shape in shapes:
            n = math.prod(shape)
            views.append(tuple(b[o:o + n].reshape(shape) for b in bufs))
            o += n
        entry = cache[key] = (bufs, views)
    bufs, views = entry
    for (p, g, st, _), vw in zip(todo, views):
        vw[0][...] = p._data
        vw[1][...] = g
        for k, name in enumerate(keys):
            vw[2 + k][...] = st[name]._data

    def write_back():
        for (p, g, st, _), vw in zip(todo, views):
            p._data[...] = vw[0]
            for k, name in enumerate(keys):
                st[name]._data[...] = vw[2 + k]

    extra = bufs[2:] + [None] * (3 - len(keys))
    return bufs[0], bufs[1], extra, write_back


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
            refuse_sparse(group, "RMSprop does not support sparse gradients")
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
                    st["square_avg"] = _tensor_of(_xp(pd).zeros_like(pd))
                    if momentum > 0:
                        st["momentum_buffer"] = _tensor_of(_xp(pd).zeros_like(pd))
                    if centered:
                        st["grad_avg"] = _tensor_of(_xp(pd).zeros_like(pd))
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
                    avg = _sqrt(v - ga * ga)
                else:
                    avg = _sqrt(v)
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


def _check(**values):
    """torch's argument checks: each value must be >= 0 (betas in [0, 1))."""
    names = {"lr": "learning rate", "eps": "epsilon value", "weight_decay": "weight_decay value",
             "lr_decay": "lr_decay value", "rho": "rho value",
             "initial_accumulator_value": "initial_accumulator_value",
             "momentum_decay": "momentum_decay value"}
    for key, v in values.items():
        if key == "betas":
            for i, b in enumerate(v):
                if not 0.0 <= b < 1.0:
                    raise ValueError(f"Invalid beta parameter at index {i}: {b}")
        elif key == "rho":
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"Invalid rho value: {v}")
        elif not 0.0 <= v:
            raise ValueError(f"Invalid {names[key]}: {v}")


def _step_count(st):
    """Advance the float32 ``step`` tensor of a parameter's state; the new count as a float."""
    arr = st["step"]._data
    arr += 1
    return float(arr)


def _zeros_state(st, pd, *names):
    st["step"] = _tensor_of(np.zeros((), np.float32))
    for name in names:
        st[name] = _tensor_of(_xp(pd).zeros_like(pd))


def _with_grads(opt, group, *state_names):
    """Each parameter of ``group`` that has a gradient, as ``(p, g, pd, st, step)``: the
    gradient array (negated under ``maximize``), the parameter's array, its state — created
    with a float32 ``step`` and zero buffers ``state_names`` on first use — and the step count
    after this step. The loop every Adam-like optimizer below shares."""
    for p in group["params"]:
        g = _grad_array(p, group["maximize"])
        if g is None:
            continue
        pd = p._data
        st = opt.state[p]
        if not st:
            _zeros_state(st, pd, *state_names)
        yield p, g, pd, st, _step_count(st)


def _updated(p):
    p._bump_version("add_")


class Adagrad(Optimizer):
    """Adagrad (mirrors ``torch.optim.Adagrad``).

    ``clr = lr / (1 + (t - 1) lr_decay)``; ``sum += g^2``; ``p -= clr g / (sqrt(sum) + eps)``.

    Args:
        lr (float): 1e-2; lr_decay, weight_decay, initial_accumulator_value (float): 0;
        eps (float): 1e-10; maximize (bool).

    State per parameter: ``step`` (float32 scalar tensor), ``sum``.
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
               initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:  # torch fills the state at construction
            for p in group["params"]:
                st = self.state[p]
                st["step"] = _tensor_of(np.zeros((), np.float32))
                st["sum"] = _tensor_of(_xp(p._data).full_like(p._data, group["initial_accumulator_value"]))

    @_use_grad
    def step(self, closure=None):
        """One Adagrad update of every parameter that has a grad. Returns ``closure()``'s loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lr_decay, eps, wd = group["lr"], group["lr_decay"], group["eps"], \
                group["weight_decay"]
            for p in group["params"]:
                g = _grad_array(p, group["maximize"])
                if g is None:
                    continue
                pd = p._data
                st = self.state[p]
                step = _step_count(st)
                if isinstance(g, SparseCOO):
                    adagrad_sparse_step(p, g, st, lr / (1 + (step - 1) * lr_decay), eps, wd)
                    continue
                if wd != 0:
                    g = g + wd * pd
                clr = lr / (1 + (step - 1) * lr_decay)
                acc = st["sum"]._data
                acc += g * g
                std = _sqrt(acc)
                std += eps
                pd += -clr * g / std
                _updated(p)
        return loss


class Adadelta(Optimizer):
    """Adadelta (mirrors ``torch.optim.Adadelta``).

    ``v = rho v + (1 - rho) g^2``; ``d = sqrt(u + eps) / sqrt(v + eps) * g``;
    ``u = rho u + (1 - rho) d^2``; ``p -= lr d``.

    Args:
        lr (float): 1.0; rho (float): 0.9; eps (float): 1e-6; weight_decay (float): 0;
        maximize (bool).

    State per parameter: ``step``, ``square_avg``, ``acc_delta``.
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One Adadelta update of every parameter that has a grad. Returns the closure's loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            refuse_sparse(group, "Adadelta does not support sparse gradients")
            lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
            for p, g, pd, st, _ in _with_grads(self, group, "square_avg", "acc_delta"):
                if wd != 0:
                    g = g + wd * pd
                v = st["square_avg"]._data
                u = st["acc_delta"]._data
                v *= rho
                v += (1 - rho) * g * g
                delta = _sqrt(u + eps) / _sqrt(v + eps) * g
                u *= rho
                u += (1 - rho) * delta * delta
                pd += -lr * delta
                _updated(p)
        return loss


class Adamax(Optimizer):
    """Adamax, Adam with the infinity norm (mirrors ``torch.optim.Adamax``).

    ``m = lerp(m, g, 1 - beta1)``; ``u = max(beta2 u, |g| + eps)``;
    ``p -= lr / (1 - beta1^t) * m / u``.

    Args:
        lr (float): 2e-3; betas (tuple): (0.9, 0.999); eps (float): 1e-8; weight_decay: 0;
        maximize (bool).

    State per parameter: ``step``, ``exp_avg``, ``exp_inf``.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One Adamax update of every parameter that has a grad. Returns ``closure()``'s loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            refuse_sparse(group, "Adamax does not support sparse gradients")
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], \
                group["weight_decay"]
            for p, g, pd, st, step in _with_grads(self, group, "exp_avg", "exp_inf"):
                if wd != 0:
                    g = g + wd * pd
                m = st["exp_avg"]._data
                u = st["exp_inf"]._data
                _lerp_(m, g, 1 - beta1)
                u *= beta2
                _xp(u).maximum(u, _xp(g).abs(g) + eps, out=u)
                clr = lr / (1 - beta1 ** step)
                pd += -clr * m / u
                _updated(p)
        return loss


def _adam_moments(st, g, beta1, beta2):
    m = st["exp_avg"]._data
    v = st["exp_avg_sq"]._data
    _lerp_(m, g, 1 - beta1)
    v *= beta2
    v += (1 - beta2) * g * g
    return m, v


class NAdam(Optimizer):
    """Adam with Nesterov momentum (mirrors ``torch.optim.NAdam``).

    ``mu_t = beta1 (1 - 0.5 * 0.96^(t psi))`` (psi: momentum_decay), their running product kept
    in float32 as torch does; the update combines the gradient and the momentum with the
    current and next ``mu``.

    Args:
        lr (float): 2e-3; betas: (0.9, 0.999); eps: 1e-8; weight_decay: 0;
        momentum_decay (float): 4e-3; decoupled_weight_decay (bool); maximize (bool).

    State per parameter: ``step``, ``mu_product`` (float32 scalars), ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay,
               momentum_decay=momentum_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One NAdam update of every parameter that has a grad. Returns ``closure()``'s loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            refuse_sparse(group, "NAdam does not support sparse gradients")
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, psi = group["weight_decay"], group["momentum_decay"]
            for p in group["params"]:
                g = _grad_array(p, group["maximize"])
                if g is None:
                    continue
                pd = p._data
                st = self.state[p]
                if not st:
                    _zeros_state(st, pd, "exp_avg", "exp_avg_sq")
                    st["mu_product"] = _tensor_of(np.ones((), np.float32))
                    # torch orders the state: step, mu_product, exp_avg, exp_avg_sq
                    st["exp_avg"] = st.pop("exp_avg")
                    st["exp_avg_sq"] = st.pop("exp_avg_sq")
                step = _step_count(st)
                bias_correction2 = 1 - beta2 ** step
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        pd *= 1 - lr * wd
                    else:
                        g = g + wd * pd
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * psi)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * psi)))
                prod = st["mu_product"]._data
                prod *= np.float32(mu)
                mu_product = float(prod)
                m, v = _adam_moments(st, g, beta1, beta2)
                denom = _sqrt(v / bias_correction2)
                denom += eps
                mu_product_next = mu_product * mu_next
                pd += (-lr * (1.0 - mu) / (1.0 - mu_product)) * g / denom
                pd += ((-lr * mu_next) / (1.0 - mu_product_next)) * m / denom
                _updated(p)
        return loss


class RAdam(Optimizer):
    """Rectified Adam (mirrors ``torch.optim.RAdam``).

    With ``rho_inf = 2 / (1 - beta2) - 1`` and ``rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)``:
    while ``rho_t <= 5`` the step is plain momentum ``lr * m_hat``; after, the adaptive step
    scaled by the variance rectification term.

    Args:
        lr (float): 1e-3; betas: (0.9, 0.999); eps: 1e-8; weight_decay: 0;
        decoupled_weight_decay (bool); maximize (bool).

    State per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    @_use_grad
    def step(self, closure=None):
        """One RAdam update of every parameter that has a grad. Returns ``closure()``'s loss."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            refuse_sparse(group, "RAdam does not support sparse gradients")
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], \
                group["weight_decay"]
            for p, g, pd, st, step in _with_grads(self, group, "exp_avg", "exp_avg_sq"):
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        pd *= 1 - lr * wd
                    else:
                        g = g + wd * pd
                m, v = _adam_moments(st, g, beta1, beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                m_hat = m / bias_correction1
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    adaptive = (bias_correction2 ** 0.5) / (_sqrt(v) + eps)
                    pd -= m_hat * lr * adaptive * rect
                else:
                    pd -= m_hat * lr
                _updated(p)
        return loss
