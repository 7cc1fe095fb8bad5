"""The connectionist temporal classification loss (mirrors ``F.ctc_loss``): torch's
``ctc_loss`` — the row ``_ctc_loss`` (one CtcLossBackward0 node, nbgrad/ops/ctc.py), then, as
torch's C++ composes it, ``where(loss == inf, 0, loss)`` for zero_infinity (WhereBackward0) and the
reduction (mean: each loss divided by its target length, clamped to 1, then the mean:
DivBackward0, MeanBackward0; sum: SumBackward0).
"""
import numpy as np

from nbgrad import creation, functions
from nbgrad.autograd.apply import apply
from nbgrad.ops import ROWS
from nbgrad.tensor import Tensor

__all__ = ["ctc_loss"]

_WHERE = "ctc_loss_allocate_outputs"


def _lengths(v, name):
    """A list of ints from a Tensor (integral, torch's text otherwise), a list or an int."""
    if isinstance(v, Tensor):
        if v._data.dtype.kind not in "iub":
            raise RuntimeError(f"{name} must be integral")
        return [int(i) for i in np.asarray(v.detach().cpu().numpy()).reshape(-1)]
    if isinstance(v, (list, tuple)):
        return [int(i) for i in v]
    return [int(v)]


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The CTC loss of log-probabilities over time against unaligned targets (mirrors
    ``F.ctc_loss``; torch's CPU kernel, float32 kept float32).

    Args:
        log_probs (Tensor): (T, N, C) or unbatched (T, C), e.g. ``log_softmax`` over C.
        targets (Tensor): (N, S) padded, or 1-D: the targets concatenated (sum of
            target_lengths); any dtype (read as int64), classes in [0, C), not the blank.
        input_lengths, target_lengths (Tensor | list | tuple): one length per sequence.
        blank (int): the blank class (default 0); reduction: "mean" (each loss divided by its
            target length, then averaged), "sum" or "none"; zero_infinity (bool): infinite
            losses (impossible alignments) and their gradients become 0.

    Returns: a scalar, or (N,) / () with reduction "none".

    Raises:
        ValueError: a bad reduction; TypeError: one length a Tensor, the other not; RuntimeError: torch's texts for a blank outside the classes,
        lengths that are not integral or not one per sequence, targets too short, lengths out of
        range; NotImplementedError: integer log_probs. A target class outside [0, C) raises
        RuntimeError (torch reads out of bounds there).
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if isinstance(input_lengths, Tensor) != isinstance(target_lengths, Tensor):
        kinds = tuple("Tensor" if isinstance(v, Tensor) else type(v).__name__
                      for v in (input_lengths, target_lengths))
        raise TypeError("ctc_loss() received an invalid combination of arguments - got (Tensor, "
                        f"Tensor, {kinds[0]}, {kinds[1]}, int, int, bool): input_lengths and "
                        "target_lengths must both be Tensors or both tuples of ints")
    il = _lengths(input_lengths, "input_lengths")
    tl = _lengths(target_lengths, "target_lengths")
    if log_probs._data.dtype.kind != "f":
        raise NotImplementedError(f"\"ctc_loss_cpu\" not implemented for "
                                  f"'{log_probs.dtype._tensor_name[:-6]}'")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    tg = np.asarray(targets.detach().cpu().numpy()).astype(np.int64)
    if not batched and tg.ndim == 1 and len(tl) == 1 and tg.shape[0] != tl[0]:
        tg = tg[None]
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    if len(il) != n:
        raise RuntimeError("input_lengths must be of size batch_size")
    if len(tl) != n:
        raise RuntimeError("target_lengths must be of size batch_size")
    for v in tl:
        if v < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value "
                               f"{v} (while checking arguments for {_WHERE})")
    want = sum(tl) if tg.ndim == 1 else n
    if tg.shape[0] != want:
        raise RuntimeError(f"Expected tensor to have size {want} at dimension 0, but got size "
                           f"{tg.shape[0]} for argument #2 'targets' (while checking arguments "
                           f"for {_WHERE})")
    if tg.ndim == 2 and tg.shape[1] < max(tl, default=0):
        raise RuntimeError(f"Expected tensor to have size at least {max(tl)} at dimension 1, but "
                           f"got size {tg.shape[1]} for argument #2 'targets' (while checking "
                           f"arguments for {_WHERE})")
    for v in il:
        if v < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value "
                               f"{v} (while checking arguments for {_WHERE})")
        if v > t_max:
            raise RuntimeError(f"Expected input_lengths to have value at most {t_max}, but got "
                               f"value {v} (while checking arguments for {_WHERE})")
    used = np.concatenate([tg[b, :length] for b, length in enumerate(tl)]) if tg.ndim == 2 \
        else tg[:sum(tl)]
    if used.size and (used.min() < 0 or used.max() >= c):
        bad = used[(used < 0) | (used >= c)][0]
        raise RuntimeError(f"ctc_loss: target class {int(bad)} is out of range for log_probs of "
                           f"{c} classes")
    res = apply(ROWS["_ctc_loss"], (lp,), (tg, tuple(il), tuple(tl), int(blank),
                                           bool(zero_infinity)))
    if zero_infinity:
        res = functions.where(res == float("inf"), creation.zeros((), dtype=res.dtype), res)
    if reduction == "mean":
        return (res / creation.tensor(tl, dtype=res.dtype).clamp_min(1)).mean()
    if reduction == "sum":
        return res.sum()
    return res if batched else res.squeeze(0)
