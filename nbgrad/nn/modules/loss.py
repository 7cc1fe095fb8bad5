"""Losses (mirrors ``torch.nn.modules.loss``): MSE, L1, CrossEntropy, NLL, BCE, BCEWithLogits,
SmoothL1, Huber, KLDiv, PoissonNLL, GaussianNLL, CosineEmbedding, MarginRanking, TripletMargin,
HingeEmbedding, MultiLabelSoftMargin, MultiLabelMargin, MultiMargin, SoftMargin, CTC.

Each mirrors the torch.nn class of the same name (``reduction`` "mean" | "sum" | "none"); class
weights and ``pos_weight`` are registered buffers, as in torch. Errors about the target name the
loss.
"""

from .. import functional as F
from .module import Module

from ..functional.common import legacy_reduction

__all__ = ["MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
           "SmoothL1Loss", "HuberLoss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "CosineEmbeddingLoss", "MarginRankingLoss", "TripletMarginLoss", "HingeEmbeddingLoss",
           "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss", "MultiMarginLoss", "SoftMarginLoss",
           "CTCLoss"]


class _Loss(Module):
    """Base of the loss modules (mirrors ``torch.nn.modules.loss._Loss``): ``reduction`` is
    checked when the loss runs, as in torch; the deprecated ``size_average``/``reduce`` set it,
    with torch's warning."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = legacy_reduction(size_average, reduce)
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


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta``, linear above (mirrors ``torch.nn.SmoothL1Loss``). (*), (*)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic below ``delta``, ``delta``-scaled linear above (mirrors torch.nn.HuberLoss)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """KL divergence of the target from log-probabilities (mirrors ``torch.nn.KLDivLoss``;
    ``reduction="batchmean"`` is the mathematical KL)."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class PoissonNLLLoss(_Loss):
    """Poisson negative log-likelihood (mirrors ``torch.nn.PoissonNLLLoss``)."""

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
                                  eps=self.eps, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log-likelihood with a predicted variance (mirrors
    ``torch.nn.GaussianNLLLoss``). ``forward(input, target, var)``."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full = full
        self.eps = eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)


class _MarginLoss(_Loss):
    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class CosineEmbeddingLoss(_MarginLoss):
    """``1 - cos`` for similar pairs (y = 1), ``max(0, cos - margin)`` for dissimilar (y = -1)
    (mirrors ``torch.nn.CosineEmbeddingLoss``). Shapes: (N, D), (N, D), (N,)."""

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    """``max(0, -y (x1 - x2) + margin)`` (mirrors ``torch.nn.MarginRankingLoss``). (N,) x3."""

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """``x`` for y = 1, ``max(0, margin - x)`` for y = -1 (mirrors torch.nn.HingeEmbeddingLoss).
    """

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin,
                                      reduction=self.reduction)


class TripletMarginLoss(_MarginLoss):
    """``max(0, d(a, p) - d(a, n) + margin)`` (mirrors ``torch.nn.TripletMarginLoss``)."""

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``log(1 + exp(-y x))`` (mirrors ``torch.nn.SoftMarginLoss``)."""

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per-class logistic loss averaged over classes (mirrors
    ``torch.nn.MultiLabelSoftMarginLoss``). Shapes: (N, C), (N, C); weight (C,)."""

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss (mirrors ``torch.nn.MultiLabelMarginLoss``). Shapes: (C,) or
    (N, C), int64 target of the same shape, classes before the first -1."""

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss (mirrors ``torch.nn.MultiMarginLoss``). (N, C), int64 (N,).

    Raises:
        ValueError: p not 1 or 2; weight not 1-D (torch's texts).
    """

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.ndim}D instead")
        self.p = p
        self.margin = margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class CTCLoss(_Loss):
    """The connectionist temporal classification loss (mirrors ``torch.nn.CTCLoss``;
    ``forward(log_probs, targets, input_lengths, target_lengths)``, see ``F.ctc_loss``).

    Args:
        blank (int): the blank class (default 0); reduction: "mean" | "sum" | "none";
        zero_infinity (bool): infinite losses and their gradients become 0.
    """

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)
