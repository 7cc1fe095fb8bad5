"""Lookups: embedding, embedding_bag, one_hot.
"""
import numpy as np

from nbgrad import creation
from nbgrad import functions
from nbgrad.autograd import grad_mode
from nbgrad import backend
from nbgrad.autograd.apply import apply
from nbgrad.autograd.record import index_arg
from nbgrad.functions.args import type_name_of
from nbgrad.ops import ROWS
from nbgrad.sparse_coo import SparseCOO
from .common import _const, _linear


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by integer ``input`` (mirrors ``F.embedding``).

    Args:
        input (Tensor): int64/int32 indices, any shape (*).
        weight (Tensor): (num_embeddings, embedding_dim).
        padding_idx (int, optional): rows at this index get no gradient.
        sparse (bool): weight's gradient a sparse COO tensor (one entry per index looked up).
        max_norm (float, optional): looked-up rows with a larger ``norm_type``-norm are
            rescaled in place first (as torch's ``embedding_renorm_``).

    Returns:
        Tensor: (*, embedding_dim).

    Raises:
        RuntimeError: non-integer indices; IndexError: an index out of range.
    """
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq is unsupported")
    if sparse:
        _sparse_on_cpu(weight)
    ids = index_arg(input)
    if ids.dtype != np.int64 and ids.dtype != np.int32:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {type_name_of(input)} instead (while checking arguments "
            "for embedding)")
    num = weight._data.shape[0]
    if ids.size and (_out_of_range(ids, num) if type(ids) is np.ndarray else
                     ids.min() < 0 or ids.max() >= num):
        bad = ids[(ids < 0) | (ids >= num)].flat[0]
        raise IndexError(f"index out of range in self (index {int(bad)}, num_embeddings {num})")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += num
    if max_norm is not None:
        _embedding_renorm_(weight, ids, max_norm, norm_type)
    # sparse: weight's gradient is a sparse COO tensor (nbgrad.sparse_coo), as torch's
    return apply(ROWS["embedding_sparse" if sparse else "embedding"], (weight,),
                 (ids, -1 if padding_idx is None else padding_idx))


def _out_of_range(ids, num):
    """Whether an index of the numpy array `ids` is < 0 or >= `num`: numpy's min and max
    reductions without ndarray.min / max's Python wrappers (a device array takes its methods)."""
    return _MIN(ids, None) < 0 or _MAX(ids, None) >= num


_MIN, _MAX = np.minimum.reduce, np.maximum.reduce


def _sparse_on_cpu(weight):
    if weight.device.type != "cpu":
        raise NotImplementedError("sparse=True: nbgrad's sparse gradients are CPU (numpy) only, "
                                  f"not on {weight.device.type}")


def _embedding_renorm_(weight, ids, max_norm, norm_type):
    """torch's embedding_renorm_: rows looked up whose norm exceeds ``max_norm`` are scaled
    in place to ``max_norm / (norm + 1e-7)`` (one version bump of ``weight``)."""
    w = weight._data
    rows = np.unique(ids.reshape(-1))
    norms = np.linalg.norm(w[rows], ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        scale = max_norm / (norms[big] + 1e-7)
        with grad_mode.no_grad():
            weight[_const(rows[big])] = _const(w[rows[big]] * scale[:, None].astype(w.dtype))


def one_hot(tensor, num_classes=-1):
    """int64 (*,) -> int64 (*, num_classes) one-hot (mirrors ``F.one_hot``); RuntimeError for
    another dtype or a value out of range (torch's texts)."""
    ids = tensor._data
    if ids.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        num_classes = int(ids.max()) + 1 if ids.size else 0
    if ids.size and (ids.min() < 0 or ids.max() >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = np.zeros(ids.shape + (num_classes,), dtype=np.int64)
    np.put_along_axis(out, ids[..., None].astype(np.int64), 1, axis=-1)
    return _const(out)


def _embedding_bag_row(weight, ids, bag, keep, nb, mode, psw, sparse=False):
    """One EmbeddingBagBackward0 node: each bag's sum / mean / max of its rows of ``weight``.
    The bags are worked out on the host (``ids``, ``bag``, ``keep``, ``psw`` are numpy).
    ``sparse``: weight's gradient a sparse COO tensor, one entry per index kept (torch's
    _embedding_bag_sparse_backward: the bag's gradient row times the entry's weight)."""
    w = weight._data
    xp = backend.get_array_module(w)
    n, dim = len(ids), w.shape[1]
    if mode in ("sum", "mean"):
        # each kept row added into its bag with its weight (1, per_sample_weights, or 1 / the
        # bag's size): a segment sum, so an inf or NaN row stays in its own bag (a bags-by-rows
        # matrix product would spread 0 * inf = NaN into the others)
        wt = np.ones(n, w.dtype) if psw is None else np.asarray(psw, w.dtype).reshape(-1)
        if mode == "mean":
            sizes = np.bincount(bag[keep], minlength=nb)
            wt = (wt / np.maximum(sizes, 1)[bag]).astype(w.dtype)
        kb, ki, kw = (xp.asarray(v[keep]) for v in (bag, ids, wt))

        def fwd(a):
            out = xp.zeros((nb, a.shape[1]), a.dtype)
            xp.add.at(out, kb, a[ki] * kw[:, None])
            return out

        def adj(g):
            if sparse:
                return SparseCOO._of(ki[None, :], g[kb] * kw[:, None], w.shape)
            z = xp.zeros(w.shape, g.dtype)
            xp.add.at(z, ki, g[kb] * kw[:, None])
            return z
    elif mode == "max":
        vals = backend.to_device(w, backend.CPU)[ids]
        pick = np.zeros((nb, dim), np.int64)
        filled = np.zeros(nb, bool)
        for i in range(nb):
            sel = np.nonzero((bag == i) & keep)[0]
            if len(sel):
                pick[i] = ids[sel[vals[sel].argmax(0)]]
                filled[i] = True
        pick, filled, cols = xp.asarray(pick), xp.asarray(filled), xp.asarray(np.arange(dim))

        def fwd(a):
            return xp.where(filled[:, None], a[pick, cols], 0)

        def adj(g):
            z = xp.zeros(w.shape, g.dtype)
            xp.add.at(z, (pick[filled], cols), g[filled])
            return z
    else:
        raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
    return _linear("_embedding_bag", weight, fwd, adj)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embeddings (mirrors ``F.embedding_bag``).

    Args:
        input (Tensor): int64 (B, L) bags of equal length, or (n,) with ``offsets`` (B,).
        weight (Tensor): (num_embeddings, dim).
        mode (str): "sum" | "mean" | "max".
        per_sample_weights (Tensor, optional): like ``input``, "sum" mode only.
        padding_idx (int, optional): entries equal to it are left out of their bag.

    Returns:
        Tensor: (B, dim); an empty bag gives zeros.

    Raises:
        ValueError: offsets with 2-D input, or missing with 1-D input; per_sample_weights with
            another mode (torch's texts).
    """
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets)}")
        b, L = input.shape
        offs = np.arange(0, b * L, L)
        ids = backend.to_device(input._data, backend.CPU).reshape(-1)  # bags: host bookkeeping
        psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        offs = backend.to_device(offsets._data, backend.CPU).astype(np.int64)
        if include_last_offset:
            offs = offs[:-1]
        ids = backend.to_device(input._data, backend.CPU)
        psw = per_sample_weights
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if sparse:
        _sparse_on_cpu(weight)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on the "
                                  "PyTorch GitHub.")
    if ids.dtype.kind not in "iu" or ids.dtype.itemsize < 4:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {type_name_of(input)} instead (while checking arguments "
            "for embedding_bag)")
    n = len(ids)
    bad = np.flatnonzero((ids < 0) | (ids >= weight.shape[0]))
    if bad.size:
        raise RuntimeError(f"Index {bad[0]} of input takes value {ids[bad[0]]} which is not in "
                           f"the valid range [0, {weight.shape[0]})")
    bag = np.searchsorted(offs, np.arange(n), side="right") - 1
    keep = np.ones(n, bool) if padding_idx is None else ids != padding_idx
    nb = len(offs)
    if max_norm is not None:
        _embedding_renorm_(weight, ids, max_norm, norm_type)
    if psw is None or not psw.requires_grad:
        return _embedding_bag_row(weight, ids.astype(np.int64), bag, keep, nb, mode,
                                  None if psw is None else backend.to_device(psw._data,
                                                                             backend.CPU),
                                  sparse)
    rows = embedding(_const(ids.astype(np.int64)), weight, sparse=sparse)
    rows = rows * psw.unsqueeze(-1)
    if mode in ("sum", "mean"):
        m = np.zeros((nb, n), weight._data.dtype)
        m[bag[keep], np.arange(n)[keep]] = 1.0
        if mode == "mean":
            counts = m.sum(1, keepdims=True)
            m = m / np.maximum(counts, 1)
        return _const(m).matmul(rows)
    if mode == "max":
        outs = []
        for i in range(nb):
            sel = np.nonzero((bag == i) & keep)[0]
            if len(sel):
                outs.append(rows[_const(sel.astype(np.int64))].amax(0))
            else:
                outs.append(creation.zeros(weight.shape[1], dtype=weight.dtype))
        return functions.stack(outs, 0)
    raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
