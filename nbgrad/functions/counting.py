"""Functions with integer or counting results and no gradient (unique, histc, histogram,
bincount, searchsorted, bucketize); their nodes refuse backward as PyTorch's do.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..autograd.apply import apply, _fresh
from ..autograd.record import _arr
from ..autograd.grad_mode import no_grad
from ..ops import ROWS as R
from ..return_types import structseq
from ..tensor import _dim, Tensor
from .registry import method
from .args import _xp


def _pick_outputs(outs, return_inverse, return_counts):
    sel = (outs[0],) + ((outs[1],) if return_inverse else ()) + ((outs[2],) if return_counts
                                                                 else ())
    return sel[0] if len(sel) == 1 else sel


@method
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements, sorted (torch.unique); with `dim`, the distinct slices along it.

    Returns values, and with return_inverse the int64 index of each element (slice) in them
    (input's shape, or (input.shape[dim],)), with return_counts the int64 count of each. Values
    of an input that requires grad carry Unique2Backward0 / UniqueDimBackward0, which refuse
    backward, as in PyTorch.
    """
    if dim is None:
        outs = apply(R["unique"], (input,))
    else:
        outs = apply(R["unique_dim"], (input,), (_dim(dim, input._data.ndim),))
    return _pick_outputs(outs, return_inverse, return_counts)


@method
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse runs of equal consecutive elements (slices along `dim`) into one
    (torch.unique_consecutive); inverse and counts as in unique."""
    d = None if dim is None else _dim(dim, input._data.ndim)
    return _pick_outputs(apply(R["unique_consecutive"], (input,), (d,)), return_inverse,
                         return_counts)


def _float_only(input, kernel):
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{dtypes.from_np(input._data.dtype)._tensor_name[:-6]}'")


@method
def histc(input, bins=100, min=0, max=0):
    """Counts of elements in `bins` equal-width bins over [min, max] (the data's range when both
    are 0); elements outside are ignored; input's dtype, no gradient (torch.histc)."""
    _float_only(input, "histogram_cpu")
    d = input._data
    if bins <= 0:
        raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo == hi and d.size:
        lo, hi = float(d.min()), float(d.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError(f"torch.histc: max must be larger than min, but got min {lo} max {hi}")
    with no_grad():
        return histogram(input, bins, range=(lo, hi))[0]


_histogram = structseq("histogram", "hist bin_edges")


@method
def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of a float tensor (torch.histogram): `bins` an int (equal bins over
    `range`, default the data's min..max) or a 1-D tensor of increasing edges; `weight` sums
    weights instead of counts; density normalises to integrate to 1."""
    _float_only(input, "histogram_cpu")
    d = input._data
    w = None if weight is None else weight._data
    if isinstance(bins, Tensor):
        b = bins._data
    else:
        b = int(bins)
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif d.size:
            lo, hi = float(d.min()), float(d.max())
        else:
            lo = hi = 0.0
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5  # an empty range widened, as numpy and PyTorch do
        if lo > hi:
            raise RuntimeError(f"torch.histogram(): min should not exceed max, but got min {lo} "
                               f"max {hi}")
        range = (lo, hi)
    return _histogram(*apply(R["histogram"], (input,), (w, b, range, density)))


@method
def bincount(input, weights=None, minlength=0):
    """Counts of each value of a 1-D non-negative int tensor, length max(input) + 1 or
    `minlength` (torch.bincount); with `weights`, their sums (float64 unless float32 weights)."""
    d = input._data
    if d.dtype.kind not in "iu":
        from .args import scalar_name
        raise NotImplementedError(f'"bincount_cpu" not implemented for \'{scalar_name(input)}\'')
    if d.ndim != 1 or (d.size and d.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and weights._data.shape != d.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if weights is None:
        return _fresh(R["bincount"].fwd(None, d, minlength))
    return apply(R["bincount"], (weights,), (d, minlength))


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """Indices where `input` would be inserted into the last dim of `sorted_sequence` to keep it
    sorted (torch.searchsorted): side "left" (first such index) or "right" (right=True).
    `sorted_sequence` is 1-D or has input's leading dims; `input` may be a number."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence._data
    xp = _xp(sorted_sequence)
    if sorter is not None:
        seq = xp.take_along_axis(seq, sorter._data, axis=-1)
    scalar = not isinstance(input, Tensor)
    v = xp.asarray(input) if scalar else input._data
    sd = "right" if right else "left"
    if seq.ndim == 1:
        out = xp.searchsorted(seq, v, side=sd)
    else:
        if scalar or seq.shape[:-1] != v.shape[:-1]:
            raise RuntimeError(
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                "dimensions of boundaries tensor and input value tensor must match, but we got "
                f"boundaries tensor {list(seq.shape)} and input value tensor "
                f"{list(v.shape)}")
        s2, v2 = seq.reshape(-1, seq.shape[-1]), v.reshape(-1, v.shape[-1])
        out = xp.stack([xp.searchsorted(s, r, side=sd) for s, r in zip(s2, v2)]).reshape(v.shape)
    return _fresh(_arr(xp.asarray(out).astype(np.int32 if out_int32 else np.int64)))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """Index of the bucket of each element, `boundaries` 1-D increasing (torch.bucketize):
    boundaries[i-1] < x <= boundaries[i], or boundaries[i-1] <= x < boundaries[i] when right."""
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries._data.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)
