"""Losses: MSELoss, L1Loss, CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss.

Each mirrors the torch.nn class of the same name (``reduction`` "mean" | "sum" | "none"); class
weights and ``pos_weight`` are registered buffers, as in torch. Errors about the target name the
loss.
"""

from .. import functional as F
from .module import Module

__all__ = ["MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            # torch's legacy arguments
            size_average = True if size_average is None else size_average
            reduce = True if reduce is None else reduce
            reduction = ("mean" if size_average else "sum") if reduce else "none"
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error ``(x - y)**2`` (mirrors ``torch.nn.MSELoss``). Shapes: (*), (*)."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error (mirrors ``torch.nn.L1Loss``)."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities (mirrors ``torch.nn.NLLLoss``).

    Shapes: input (N, C) / (C,) / (N, C, d1, ...); target int64 (N,) / () / (N, d1, ...).

    Raises:
        RuntimeError (target not int64), ValueError (batch sizes), IndexError (target out of
        range), each naming the loss.
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction, _who=self)


class CrossEntropyLoss(_WeightedLoss):
    """``NLLLoss(log_softmax(x))`` with ``ignore_index`` and ``label_smoothing``
    (mirrors ``torch.nn.CrossEntropyLoss``).

    Shapes: input logits (N, C) / (C,) / (N, C, d1, ...); target int64 class indices (N,) / () /
    (N, d1, ...) or float probabilities of the input's shape.

    Raises:
        RuntimeError / ValueError / IndexError for a bad target, naming the loss.
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing,
                               _who=self)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities (mirrors ``torch.nn.BCELoss``). Shapes: (*), (*)."""

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction, _who=self)


class BCEWithLogitsLoss(_Loss):
    """Sigmoid + binary cross entropy, stable (mirrors ``torch.nn.BCEWithLogitsLoss``).

    Args:
        weight (Tensor, optional): broadcast over the input.
        pos_weight (Tensor, optional): (C,) weight of positive examples per class.
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight,
            _who=self)
