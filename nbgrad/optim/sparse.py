"""torch.optim on sparse COO gradients (``nn.Embedding(..., sparse=True)``'s): SparseAdam, and
the sparse branches of SGD and Adagrad, in the operation order of torch's ``sparse_adam``,
``_single_tensor_sgd`` and ``_single_tensor_adagrad``; the other optimizers refuse a sparse
gradient with torch's error (:func:`refuse_sparse`).

A sparse gradient is coalesced (sorted unique indices, duplicates summed) where torch coalesces
it; ``param.add_(sparse, alpha)`` adds each entry into its row in turn (sparse_coo.add_into,
torch's fused ``p + alpha * v``).
"""
import math

import numpy as np

from ..sparse_coo import SparseCOO, add_into, merge_add
from .optimizer import Optimizer, _use_grad

__all__ = ["SparseAdam", "refuse_sparse", "sgd_sparse_step", "adagrad_sparse_step"]


def refuse_sparse(group, message):
    """torch's RuntimeError ``message`` when a parameter of ``group`` has a sparse gradient
    (checked before the group's update, as torch's ``_init_group``)."""
    for p in group["params"]:
        g = p._grad
        if g is not None and g.is_sparse:
            raise RuntimeError(message)


def sgd_sparse_step(p, g, st, lr, momentum, dampening, wd, nesterov, maximize):
    """One SGD update of ``p`` by the sparse gradient ``g`` (torch's single-tensor rule: the
    momentum buffer is a sparse tensor too; weight decay adds a dense tensor to a sparse one,
    which torch refuses)."""
    grad = -g if maximize else g
    if wd != 0:
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    if momentum != 0:
        buf = st.get("momentum_buffer")
        if buf is None:
            buf = st["momentum_buffer"] = grad.clone()
        else:
            buf.mul_(momentum).add_(grad, alpha=1 - dampening)
        grad = merge_add(grad, buf, momentum) if nesterov else buf
    add_into(p._data, grad, -lr)
    p._bump_version("add_")


def adagrad_sparse_step(p, g, st, clr, eps, wd):
    """One Adagrad update by the sparse gradient ``g`` (already negated under maximize; the
    step already counted): ``sum += g^2`` on the gradient's rows, ``p -= clr g / (sqrt(sum)
    + eps)`` there."""
    if wd != 0:
        raise RuntimeError("weight_decay option is not compatible with sparse gradients")
    c = g.coalesce()
    if not c._nnz():
        return
    rows = tuple(c._idx)
    acc = st["sum"]._data
    acc[rows] += c._val ** 2
    std = np.sqrt(acc[rows])
    std += eps
    add_into(p._data, SparseCOO._of(c._idx, c._val / std, c._size, True), -clr)
    p._bump_version("add_")


class SparseAdam(Optimizer):
    """Adam for sparse gradients (mirrors ``torch.optim.SparseAdam``): only the rows a
    gradient names are updated, their moments decayed as ``old += (1 - b) * (new - old)``.

    Args:
        lr (float): 1e-3; betas (tuple): (0.9, 0.999); eps (float): 1e-8; maximize (bool).

    State per parameter: ``step`` (a Python int), ``exp_avg``, ``exp_avg_sq`` (dense).

    Raises:
        ValueError: lr <= 0, eps <= 0, betas outside [0, 1), sparse or complex parameters
            (torch's texts); RuntimeError: ``step`` over a dense gradient.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        for kind, test, text in (
                ("Sparse", lambda p: p.is_sparse, "SparseAdam requires dense parameter tensors"),
                ("Complex", lambda p: p._data.dtype.kind == "c",
                 "SparseAdam does not support complex parameters")):
            found = [[i, j] for i, group in enumerate(self.param_groups)
                     for j, p in enumerate(group["params"]) if test(p)]
            if found:
                raise ValueError(f"{kind} params at indices {found}: {text}")

    @_use_grad
    def step(self, closure=None):
        """One SparseAdam update of every parameter that has a (sparse) grad. Returns
        ``closure()``'s loss, if any."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            todo = []
            for p in group["params"]:
                if p._grad is None:
                    continue
                if not p._grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = p.detach().new_zeros(p.shape)
                    st["exp_avg_sq"] = p.detach().new_zeros(p.shape)
                st["step"] += 1
                todo.append((p, st))
            beta1, beta2 = group["betas"]
            for p, st in todo:
                _sparse_adam(p, st, group["lr"], beta1, beta2, group["eps"], group["maximize"])
        return loss


def _sparse_adam(p, st, lr, beta1, beta2, eps, maximize):
    """torch's ``sparse_adam`` for one parameter, on the coalesced gradient's rows."""
    grad = p._grad
    grad = (-grad if maximize else grad).coalesce()
    if grad._val.size == 0:
        return
    rows = tuple(grad._idx)
    gv = grad._val
    ea, eas = st["exp_avg"]._data, st["exp_avg_sq"]._data
    old_ea = ea[rows]
    upd1 = (gv - old_ea) * (1 - beta1)
    ea[rows] += upd1
    old_eas = eas[rows]
    upd2 = (gv ** 2 - old_eas) * (1 - beta2)
    eas[rows] += upd2
    numer = upd1 + old_ea
    upd2 += old_eas
    denom = np.sqrt(upd2)
    denom += eps
    step = st["step"]
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = float(lr) * math.sqrt(bias_correction2) / bias_correction1
    pd = p._data
    pd[rows] += -step_size * (numer / denom)
    p._bump_version("add_")
    for k in ("exp_avg", "exp_avg_sq"):
        st[k]._bump_version("add_")

