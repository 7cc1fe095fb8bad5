"""Stochastic weight averaging (mirrors ``torch.optim.swa_utils``): ``AveragedModel`` (a running
average of a model's parameters, equal weights or an exponential moving average), ``SWALR`` (anneal
each group's lr to a constant), ``update_bn`` (recompute BatchNorm statistics for the averaged
weights), and the averaging functions ``get_swa_avg_fn``, ``get_ema_avg_fn`` and their ``multi_``
(list) forms. Built on the public API; on CPU the averages are computed as torch's CPU path does
(one tensor at a time, ``avg + (p - avg) / (n + 1)``).
"""

import itertools
import math
import warnings
from copy import deepcopy

from nbgrad import creation, dtypes
from nbgrad.autograd import grad_mode
from nbgrad.tensor import Tensor
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from .lr_scheduler import LRScheduler, _per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] "
                         "range.")


def _floating(t):
    return t._data.dtype.kind in "fc"


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place EMA over lists: ``ema.lerp_(p, 1 - decay)`` for each pair (floating), else
    ``ema.copy_(ema * decay + p * (1 - decay))``.

    Raises:
        ValueError: decay outside [0, 1].
    """
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with grad_mode.no_grad():
            if _floating(ema_param_list[0]):
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An in-place equal-weight average over lists: ``avg.lerp_(p, 1 / (n + 1))`` (floating)."""

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with grad_mode.no_grad():
            if _floating(averaged_param_list[0]):
                w = float(1 / (num_averaged + 1))
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.lerp_(p_model, w)
            else:
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    diff = p_model - p_avg
                    if isinstance(num_averaged, Tensor):
                        p_avg.addcdiv_(diff, num_averaged + 1)
                    else:
                        p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """``(ema, p, n) -> decay * ema + (1 - decay) * p``.

    Raises:
        ValueError: decay outside [0, 1].
    """
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with grad_mode.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """``(avg, p, n) -> avg + (p - avg) / (n + 1)``."""

    def swa_update(averaged_param, current_param, num_averaged):
        with grad_mode.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` whose parameters hold the average of the ``model`` parameters
    passed to :meth:`update_parameters` (mirrors ``torch.optim.swa_utils.AveragedModel``).

    Args:
        model (Module): copied with ``copy.deepcopy``.
        device: move the copy there.
        avg_fn: ``(averaged, current, n_averaged) -> new averaged`` per tensor; or
        multi_avg_fn: the in-place form over lists; neither: the equal-weight average.
        use_buffers (bool): average the buffers too (else they are copied from ``model``).

    Buffers: ``n_averaged`` (int64 scalar).

    Raises:
        AssertionError: both avg_fn and multi_avg_fn given (torch's text).
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", creation.tensor(0, dtype=dtypes.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Fold ``model``'s current parameters (and buffers, with use_buffers) into the
        average; the first call copies them."""
        with grad_mode.no_grad():
            self._update(model)

    def _update(self, model):
        self_param = (itertools.chain(self.module.parameters(), self.module.buffers())
                      if self.use_buffers else self.parameters())
        model_param = (itertools.chain(model.parameters(), model.buffers())
                       if self.use_buffers else model.parameters())
        mine, theirs = [], []
        copy_param = bool(self.n_averaged == 0)
        for p_averaged, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach().to(p_averaged.device)
            mine.append(p_averaged.detach())
            theirs.append(p_model_)
            if copy_param:
                p_averaged.detach().copy_(p_model_)
        if self.n_averaged > 0:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                groups = {}  # torch groups the tensors by (device, dtype) first
                for a, b in zip(mine, theirs):
                    groups.setdefault((str(a.device), a.dtype), ([], []))
                    groups[(str(a.device), a.dtype)][0].append(a)
                    groups[(str(a.device), a.dtype)][1].append(b)
                for (device, _), (self_params, model_params) in groups.items():
                    n_averaged = self.n_averaged.to(device)
                    if self.multi_avg_fn:
                        self.multi_avg_fn(self_params, model_params, n_averaged)
                    else:  # the CPU path: no foreach kernels
                        avg_fn = get_swa_avg_fn()
                        for p_averaged, p_model in zip(self_params, model_params):
                            p_averaged.copy_(avg_fn(p_averaged, p_model, n_averaged))
            else:
                for p_averaged, p_model in zip(mine, theirs):
                    n_averaged = self.n_averaged.to(p_averaged.device)
                    p_averaged.detach().copy_(self.avg_fn(p_averaged.detach(), p_model,
                                                          n_averaged))
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged += 1


def update_bn(loader, model, device=None):
    """Recompute every BatchNorm's running statistics with one pass over ``loader`` (its
    batches, or their first element), as a cumulative average (momentum None); restores the
    momenta and the training mode (mirrors ``torch.optim.swa_utils.update_bn``)."""
    with grad_mode.no_grad():
        momenta = {}
        for module in model.modules():
            if isinstance(module, _BatchNorm):
                module.reset_running_stats()
                momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
        for bn_module in momenta:
            bn_module.momentum = momenta[bn_module]
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr from its current value to ``swa_lr`` over ``anneal_epochs``, then
    hold it (mirrors ``torch.optim.swa_utils.SWALR``).

    Args:
        optimizer (Optimizer); swa_lr (float or list, one per group); anneal_epochs (int): 10;
        anneal_strategy (str): "cos" or "linear"; last_epoch (int): -1.

    Raises:
        ValueError: a bad anneal_strategy, a negative or non-int anneal_epochs, a swa_lr list of
        the wrong length (torch's texts).
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', "
                             f"instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        self._get_lr_called_within_step = False
        super().__init__(optimizer, last_epoch)

    def step(self, epoch=None):
        self._get_lr_called_within_step = True
        try:
            super().step(epoch)
        finally:
            self._get_lr_called_within_step = False

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        """The lrs of this step (torch's formula, from the lrs the groups hold now)."""
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = (self._cosine_anneal if anneal_strategy == "cos"
                            else self._linear_anneal)

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items()
                if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
