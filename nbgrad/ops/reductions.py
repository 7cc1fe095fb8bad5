"""Rows: reductions (sum, mean, prod, max/min, var/std, norm, logsumexp) and scans (cumsum).

A `_dim` row reduces over `dim` (an int or a tuple of ints) and keeps it when `keepdim`.
Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: derivatives.py.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from . import selection
from ..backend import get_array_module as _xp
from ..tensor import Tensor
from .derivatives import (_amax_grad, _count, _evenly, _expand_grad, _logsumexp_grad,
                          _norm_backward, _prod_backward, _select_grad, _std_grad, _sum_all,
                          _var_grad, ACC_TYPES, wide_scan)
from .registry import op

op("sum", _sum_all,
   self=lambda g, self_shape, xp: xp.broadcast_to(g, self_shape))
op("sum_dim", lambda self, dim, keepdim, dtype: self.sum(axis=dim, keepdims=keepdim, dtype=dtype),
   node="SumBackward1",
   self=lambda g, self_shape, dim, keepdim, xp: _expand_grad(g, self_shape, dim, keepdim, xp))
op("mean", lambda self: self.mean(dtype=self.dtype),
   self=lambda g, self_shape, xp: xp.mean_expand(g, math.prod(self_shape), self_shape, None,
                                                 False))
op("mean_dim", lambda self, dim, keepdim: self.mean(axis=dim, keepdims=keepdim, dtype=self.dtype),
   node="MeanBackward1",
   self=lambda g, self_shape, dim, keepdim, xp: xp.mean_expand(g, _count(self_shape, dim),
                                                               self_shape, dim, keepdim))
op("prod", lambda self: self.prod(),
   self=lambda g, self, result, xp: _prod_backward(g, self, result, None, False, xp))
op("prod_dim", lambda self, dim, keepdim: self.prod(axis=dim, keepdims=keepdim),
   node="ProdBackward1",
   self=lambda g, self, result, dim, keepdim, xp: _prod_backward(g, self, result, dim, keepdim,
                                                                 xp))
op("max", lambda self: self.max(), node="MaxBackward1",
   self=lambda g, self, result, xp: _evenly(g, self, result, xp), grad_version=1)
op("min", lambda self: self.min(), node="MinBackward1",
   self=lambda g, self, result, xp: _evenly(g, self, result, xp), grad_version=1)
op("max_dim", lambda self, dim, keepdim: _vals_idx(self, dim, keepdim, "argmax"),
   node="MaxBackward0", n_out=2,
   self=lambda g, self_shape, dim, keepdim, result1, xp: _select_grad(g[0], self_shape, dim,
                                                                      result1, keepdim, xp),
   grad_version=2)
op("min_dim", lambda self, dim, keepdim: _vals_idx(self, dim, keepdim, "argmin"),
   node="MinBackward0", n_out=2,
   self=lambda g, self_shape, dim, keepdim, result1, xp: _select_grad(g[0], self_shape, dim,
                                                                      result1, keepdim, xp),
   grad_version=2)
op("amax", lambda self, dim, keepdim: _xp(self).max(self, axis=dim, keepdims=keepdim),
   self=lambda g, self, result, dim, keepdim, xp: _amax_grad(g, self, result, dim, keepdim, xp))
op("amin", lambda self, dim, keepdim: _xp(self).min(self, axis=dim, keepdims=keepdim),
   self=lambda g, self, result, dim, keepdim, xp: _amax_grad(g, self, result, dim, keepdim, xp))


def _moment(x, dim, correction, keepdim, root=False):
    """var (std when `root`) as torch's CPU kernel gives it: a float32/float16 input accumulated
    in torch's accumulate type (its Welford runs in it: double, float), rounded once to the
    input's dtype: bit for bit torch's on 812 of 812 rows measured (numpy's own float32
    accumulation: 449), and finite where x * x overflows float32 (|x| > ~1.8e19)."""
    f = x.std if root else x.var
    acc = ACC_TYPES.get(x.dtype)  # (float16's: float, as torch's)
    if acc is not None:
        return f(axis=dim, ddof=correction, keepdims=keepdim, dtype=acc).astype(x.dtype,
                                                                                copy=False)
    return f(axis=dim, ddof=correction, keepdims=keepdim)


op("var", lambda self, dim, correction, keepdim: _moment(self, dim, correction, keepdim),
   self=lambda g, self, dim, correction, keepdim, xp: _var_grad(g, self, dim, correction,
                                                                keepdim, xp))
op("std", lambda self, dim, correction, keepdim: _moment(self, dim, correction, keepdim, True),
   self=lambda g, self, result, dim, correction, keepdim, xp: _std_grad(
       g, self, result, dim, correction, keepdim, xp))
op("norm", lambda self, p, dim, keepdim: _vector_norm(self, p, dim, keepdim),
   node="LinalgVectorNormBackward0",
   self=lambda g, self, result, p, dim, keepdim, xp: _norm_backward(g, self, result, p, dim,
                                                                    keepdim, xp))
op("logsumexp", lambda self, dim, keepdim: _logsumexp(self, dim, keepdim), float_op=True,
   self=lambda g, self, result, dim, keepdim, xp: _logsumexp_grad(g, self, result, dim, keepdim,
                                                                  xp))
op("cumsum", lambda self, dim: wide_scan(_xp(self).cumsum, self, dim),
   self=lambda g, dim, xp: _revcumsum(g, dim, xp))


# ---- forwards longer than a line ----------------------------------------------------------------
def _vals_idx(a, dim, keepdim, argf):
    xp = _xp(a)
    idx = getattr(xp, argf)(a, axis=dim, keepdims=True)
    vals = xp.take_along_axis(a, idx, axis=dim)
    if not keepdim:
        vals = vals.squeeze(dim)
        idx = idx.squeeze(dim)
    return vals, idx.astype(np.int64, copy=False)


def _vector_norm(a, p, dim, keepdim):
    x = _xp(a).abs(a)
    if p == 2:
        return _xp(x).sqrt((x * x).sum(axis=dim, keepdims=keepdim))
    if p == 1:
        return x.sum(axis=dim, keepdims=keepdim)
    if p == float("inf"):
        return x.max(axis=dim, keepdims=keepdim)
    if p == 0:
        return (x != 0).sum(axis=dim, keepdims=keepdim).astype(a.dtype)
    return (x ** p).sum(axis=dim, keepdims=keepdim) ** (1.0 / p)


def _logsumexp(a, dim, keepdim):
    m = a.max(axis=dim, keepdims=True)
    xp = _xp(a)
    m = xp.where(xp.isfinite(m), m, 0)
    r = xp.log(xp.exp(a - m).sum(axis=dim, keepdims=True)) + m
    return r if keepdim else (r.squeeze(dim) if dim is not None else r.reshape(()))


# ---- sorting and selection, nan-reductions, paired reductions, scans ----------------------------
def _sort_key(a, descending):
    """What an ascending sort orders to give `a` in the requested order; descending puts NaN
    first (it sorts as the largest)."""
    if not descending:
        return a
    xp = backend.get_array_module(a)
    if a.dtype.kind == "b":
        return ~a
    if a.dtype.kind == "f":
        return xp.where(xp.isnan(a), -xp.inf, -a)
    return -a.astype(np.int64)


def _sorted_idx(a, dim, descending):
    """Stable argsort along `dim`; descending puts NaN first (it sorts as the largest)."""
    return backend.get_array_module(a).argsort(_sort_key(a, descending), axis=dim, kind="stable")


_EMULATED = 4096  # rows longer than this keep numpy's order among equal elements (see below)


def _sort(a, dim, descending, stable):
    """torch.sort: a stable argsort; unstable (torch's default), the rows holding equal
    elements (up to _EMULATED long) take the order torch's std::sort leaves them in."""
    xp = backend.get_array_module(a)
    idx = _sorted_idx(a, dim, descending)
    if not stable and a.ndim and 1 < a.shape[dim] <= _EMULATED:
        found = _tied_rows(a, a, dim)
        if found is not None:
            rows, tied = found
            moved = xp.moveaxis(idx, dim, -1)
            flat = moved.reshape(-1, a.shape[dim]).copy()
            for r in tied:
                flat[r] = xp.asarray(selection.sort_indices(_host(rows[r]).tolist(), descending))
            idx = xp.moveaxis(flat.reshape(moved.shape), -1, dim)
    return xp.take_along_axis(a, idx, axis=dim), idx.astype(np.int64)


def _topk(a, k, dim, largest, sorted=True):
    """The first k of a stable sort along `dim`, found by a partition (O(n)) and a sort of the
    k candidates; a full sort when k is large, a NaN could be picked or a tie straddles the
    k-th place (the partition would not say which of the tied elements come first). Unsorted
    with k * 64 > n, torch returns what its nth_element leaves: that order, row by row (rows up
    to _EMULATED long)."""
    xp = backend.get_array_module(a)
    n = a.shape[dim] if a.ndim else 1
    if not sorted and a.ndim and k * 64 > n and k and n <= _EMULATED:
        moved = xp.moveaxis(a, dim, -1)
        rows = moved.reshape(-1, n)
        flat = xp.asarray(np.array([selection.topk_indices(_host(r).tolist(), k, largest, False)
                                    for r in rows], np.int64).reshape(-1, k))
        idx = xp.moveaxis(flat.reshape(moved.shape[:-1] + (k,)), -1, dim)
        return xp.take_along_axis(a, idx, axis=dim), idx
    idx = None
    if 0 < k and 4 * k <= n and not (a.dtype.kind == "f" and not largest and
                                     xp.isnan(a).any()):
        key = _sort_key(a, largest)
        first = xp.arange(k)
        cand = xp.sort(xp.take(xp.argpartition(key, k - 1, axis=dim), first, axis=dim), axis=dim)
        ck = xp.take_along_axis(key, cand, axis=dim)
        kth = ck.max(axis=dim, keepdims=True)
        if ((key == kth).sum(axis=dim) == (ck == kth).sum(axis=dim)).all():
            idx = xp.take_along_axis(cand, xp.argsort(ck, axis=dim, kind="stable"), axis=dim)
    if idx is None:
        idx = xp.take(_sorted_idx(a, dim, largest), xp.arange(k), axis=dim)
    found = _tied_rows(a, xp.take_along_axis(a, idx, axis=dim), dim)
    if found is not None:  # among equal elements, the ones torch's partial sort reports
        rows, tied = found
        moved = xp.moveaxis(idx, dim, -1)
        flat = moved.reshape(-1, k).copy()
        for r in tied:
            flat[r] = xp.asarray(selection.topk_indices(_host(rows[r]).tolist(), k, largest))
        idx = xp.moveaxis(flat.reshape(moved.shape), -1, dim)
    return xp.take_along_axis(a, idx, axis=dim), idx.astype(np.int64)


def _host(x):
    """A numpy copy of a device array (the tie rules run on the host, row by row)."""
    return x if type(x) is np.ndarray else x.get()


def _tied_rows(a, chosen, dim):
    """(rows of `a` with its dim last, their numbers) where an element equal to a chosen one (in
    `chosen`, along `dim`) is not unique in the row, so which index is reported is torch's
    algorithm's choice; None when there are none (the usual case: one sort of the rows)."""
    xp = backend.get_array_module(a)
    if a.ndim == 0 or a.shape[dim] < 2 or chosen.size == 0:
        return None
    rows = xp.moveaxis(a, dim, -1).reshape(-1, a.shape[dim])
    srt = xp.sort(rows, axis=1)
    dup = srt[:, 1:] == srt[:, :-1]
    if a.dtype.kind == "f":
        dup |= xp.isnan(srt[:, 1:]) & xp.isnan(srt[:, :-1])
    candidates = _host(xp.nonzero(dup.any(axis=1))[0]).tolist()
    if not candidates:
        return None
    picked = xp.moveaxis(chosen, dim, -1).reshape(rows.shape[0], -1)
    tied = []
    for r in candidates:
        twice, p = _host(srt[r, 1:][dup[r]]), _host(picked[r])
        if np.isin(p, twice).any() or (np.isnan(twice).any() and np.isnan(p).any()
                                       if a.dtype.kind == "f" else False):
            tied.append(r)
    return (rows, tied) if tied else None


def _kth(a, pos, dim, keepdim):
    """kthvalue: the element at sorted position `pos` along `dim`, and among equal ones the
    index torch's quickselect reports."""
    vals, idx = _pick(a, pos, dim, True)
    found = _tied_rows(a, vals, dim)
    if found is not None:
        rows, tied = found
        flat = _xp(idx).moveaxis(idx, dim, -1).reshape(-1) if a.ndim else idx.reshape(-1)
        flat = flat.copy()
        for r in tied:
            flat[r] = selection.kth_index(_host(rows[r]).tolist(), pos)
        moved = _xp(idx).moveaxis(idx, dim, -1)
        idx = _xp(idx).moveaxis(flat.reshape(moved.shape), -1, dim) if a.ndim else \
            flat.reshape(idx.shape)
        vals = _xp(a).take_along_axis(a, idx, axis=dim) if a.ndim else a.reshape(idx.shape)
    if not keepdim:
        vals, idx = vals.squeeze(dim), idx.squeeze(dim)
    return vals, idx


def _pick(a, pos, dim, keepdim):
    """The element at sorted position `pos` along `dim` and its index (kthvalue, median)."""
    xp = backend.get_array_module(a)
    idx = xp.take(_sorted_idx(a, dim, False), [pos], axis=dim)
    vals = xp.take_along_axis(a, idx, axis=dim)
    if not keepdim:
        vals, idx = vals.squeeze(dim), idx.squeeze(dim)
    return vals, idx.astype(np.int64)


def _mode(a, dim, keepdim):
    """Most frequent value along `dim` (the smallest of equally frequent ones) and the index
    torch reports: where its run ends in torch's std::sort of the row (rows up to _EMULATED
    long; longer ones: the last index where it occurs)."""
    xp = backend.get_array_module(a)
    m = xp.moveaxis(a, dim, -1)
    rows = m.reshape(-1, m.shape[-1]) if m.shape[-1] else m.reshape(0, 0)
    vals = xp.empty(rows.shape[0], a.dtype)
    idx = xp.empty(rows.shape[0], np.int64)
    for r in range(rows.shape[0]):
        if rows.shape[1] <= _EMULATED:  # torch's choice among equal elements: its std::sort's
            v, i = selection.mode_index(_host(rows[r]).tolist())
            vals[r], idx[r] = v, i
            continue
        u, c = xp.unique(rows[r], return_counts=True)
        vals[r] = u[int(xp.argmax(c))]
        idx[r] = rows.shape[1] - 1 - int(xp.argmax(rows[r][::-1] == vals[r]))
    shape = m.shape[:-1]
    vals, idx = vals.reshape(shape), idx.reshape(shape)
    if keepdim:
        vals, idx = xp.expand_dims(vals, dim), xp.expand_dims(idx, dim)
    return vals, idx


def _at_indices(g, shape, dim, indices, keepdim, xp, add=False):
    """Gradient of a value-selecting reduction: g put (or added) at `indices` along `dim`."""
    if g is None:
        return None
    if not keepdim:
        g = xp.expand_dims(g, dim)
        indices = xp.expand_dims(indices, dim)
    return xp.scatter_along(xp.new_zeros(g, tuple(shape)), dim, indices, g, add)


def _cum_extreme(a, dim, ufunc):
    """cummax / cummin: running extreme and the index where it was (last) reached."""
    xp = backend.get_array_module(a)
    vals = getattr(xp, ufunc.__name__).accumulate(a, axis=dim)
    shape = [1] * a.ndim
    shape[dim] = a.shape[dim]
    pos = xp.broadcast_to(xp.arange(a.shape[dim]).reshape(shape), a.shape)
    idx = xp.maximum.accumulate(xp.where(a == vals, pos, 0), axis=dim)
    return vals, idx.astype(np.int64)


def _revcumsum(x, dim, xp):
    return xp.flip(xp.cumsum(xp.flip(x, (dim,)), axis=dim), (dim,))


def _cumprod_backward(g, self, result, dim, xp):
    """sum_{j >= i} g_j * result_j / self_i; where self has zeros, without the division: for each
    i the prefix products with x_i replaced by 1 (n cumprods, for arrays and Tensors alike)."""
    if not bool((self == 0).any()):
        return _revcumsum(g * result, dim, xp) / self
    if isinstance(self, np.ndarray):
        return _cumprod_backward_zeros(g, self, result, dim)
    n = self.shape[dim]
    shape = [1] * len(self.shape)
    shape[dim] = n
    pos = np.arange(n).reshape(shape)
    parts = []
    for i in range(n):
        c = xp.cumprod(xp.where(xp.constant(pos == i), 1, self), dim)
        parts.append((g * c * xp.constant((pos >= i).astype(xp.dtype(g)))).sum(axis=dim))
    return xp.stack(parts, axis=dim)


def _cumprod_backward_zeros(g, x, out, dim):
    """PyTorch's cumprod_backward at an input with zeros, not recorded (its O(n) masks): before
    the first zero the no-zero formula; at the first zero the products after it up to the
    second zero, times the output just before it; zeros after. The same numbers as the n
    cumprods wherever the input is finite, and torch's NaN where it is not."""
    cs = np.cumsum(x == 0, axis=dim)
    before = cs == 0
    with np.errstate(all="ignore"):
        grad = np.where(before, _revcumsum(np.where(before, out * g, 0), dim, np) / x, 0)
        shape = [1] * x.ndim
        shape[dim] = x.shape[dim]
        pos = np.arange(x.shape[dim]).reshape(shape)
        one = cs == 1
        first = np.argmax(one, axis=dim, keepdims=True)
        first_mask = (pos == first) & one
        between = one & ~first_mask
        at = (np.cumprod(np.where(between, x, 1), axis=dim) * np.where(one, g, 0)).sum(
            axis=dim, keepdims=True)
        prev = np.take_along_axis(out, np.maximum(first - 1, 0), axis=dim)
        at = at * np.where(first == 0, 1, prev)
        return np.where(first_mask, at, grad).astype(g.dtype, copy=False)



def _paired(g, f0, f1):
    """Gradient through a row of two outputs, either of whose gradients may be absent."""
    parts = [f(x) for f, x in ((f0, g[0]), (f1, g[1])) if x is not None]
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


op("sort", lambda self, dim, descending: _sort(self, dim, descending, False), n_out=2,
   self=lambda g, self_shape, dim, result1, xp: _at_indices(g[0], self_shape, dim, result1, True,
                                                            xp), grad_version=2)
op("sort_stable", lambda self, dim, descending, stable: _sort(self, dim, descending, stable),
   n_out=2,
   node="SortBackward1",
   self=lambda g, self_shape, dim, result1, xp: _at_indices(g[0], self_shape, dim, result1, True,
                                                            xp), grad_version=2)
op("topk", lambda self, k, dim, largest, sorted: _topk(self, k, dim, largest, sorted),
   n_out=2,
   self=lambda g, self_shape, dim, result1, xp: _at_indices(g[0], self_shape, dim, result1, True,
                                                            xp), grad_version=2)
op("kthvalue", lambda self, k, dim, keepdim: _kth(self, k - 1, dim, keepdim), n_out=2,
   self=lambda g, self_shape, dim, keepdim, result1, xp: _at_indices(
       g[0], self_shape, dim, result1, keepdim, xp), grad_version=2)
op("median", lambda self: _median_all(self),
   self=lambda g, self, result, xp: _evenly(g, self, result, xp), grad_version=1)


def _median_all(a):
    """The lower median of every element; NaN if one is NaN; of none, NaN (the lowest integer
    for an integer dtype), as torch's."""
    xp = _xp(a)
    if not a.size:
        return xp.asarray(xp.nan if a.dtype.kind == "f" else
                          (xp.iinfo(a.dtype).min if a.dtype.kind in "iu" else False), a.dtype)
    m = xp.sort(a.reshape(-1))[(a.size - 1) // 2]
    if a.dtype.kind == "f" and xp.isnan(a).any():  # torch's median propagates NaN
        return xp.asarray(xp.nan, a.dtype)
    return m


def _median_dim(a, dim, keepdim):
    """The lower median along `dim` and its index; a row holding NaN gives NaN and the index of
    its first NaN, as torch's kernel."""
    vals, idx = _pick(a, (a.shape[dim] - 1) // 2, dim, True)
    if a.dtype.kind == "f":
        xp = _xp(a)
        nan = xp.isnan(a)
        has = nan.any(axis=dim, keepdims=True)
        if has.any():
            vals = xp.where(has, a.dtype.type(np.nan), vals)
            idx = xp.where(has, xp.argmax(nan, axis=dim).reshape(idx.shape), idx)
    if not keepdim:
        vals, idx = vals.squeeze(dim), idx.squeeze(dim)
    return vals, idx


op("median_dim", lambda self, dim, keepdim: _median_dim(self, dim, keepdim),
   node="MedianBackward1", n_out=2,
   self=lambda g, self_shape, dim, keepdim, result1, xp: _at_indices(
       g[0], self_shape, dim, result1, keepdim, xp), grad_version=2)
op("mode", lambda self, dim, keepdim: _mode(self, dim, keepdim), n_out=2,
   self=lambda g, self_shape, dim, keepdim, result1, xp: _at_indices(
       g[0], self_shape, dim, result1, keepdim, xp), grad_version=2)
op("nansum", lambda self, dim, keepdim: _xp(self).nansum(self, axis=dim, keepdims=keepdim),
   self=lambda g, self, dim, keepdim, xp: _expand_grad(g, tuple(self.shape), dim, keepdim,
                                                       xp) * (self == self))


def _welford_mean(x, dim, keepdim):
    """The mean torch's var_mean and std_mean give: Welford's running mean, m + (x - m) / n,
    which an inf followed by any other element turns to NaN (inf - inf); the plain mean
    elsewhere."""
    m = x.mean(axis=dim, keepdims=keepdim)
    xp = _xp(x)
    if x.dtype.kind not in "fc" or not x.size or not xp.isinf(x).any():
        return m
    dims = tuple(range(x.ndim)) if dim is None else tuple(
        d % x.ndim for d in (dim if isinstance(dim, (tuple, list)) else (dim,)))
    keep = [d for d in range(x.ndim) if d not in dims]
    flat = xp.transpose(x, keep + list(dims)).reshape([x.shape[d] for d in keep] + [-1])
    early = xp.isinf(flat[..., :-1]).any(axis=-1)
    if keepdim:
        early = early.reshape([1 if d in dims else x.shape[d] for d in range(x.ndim)])
    return xp.where(early, xp.asarray(np.nan, dtype=m.dtype), m)


op("std_mean", lambda self, dim, correction, keepdim: (
    _moment(self, dim, correction, keepdim, True), _welford_mean(self, dim, keepdim)),
   n_out=2,
   self=lambda g, self, result, dim, correction, keepdim, xp: _paired(
       g, lambda g0: _std_grad(g0, self, result, dim, correction, keepdim, xp),
       lambda g1: xp.mean_expand(g1, _count(tuple(self.shape), dim), tuple(self.shape), dim,
                                 keepdim)))
op("var_mean", lambda self, dim, correction, keepdim: (
    _moment(self, dim, correction, keepdim), _welford_mean(self, dim, keepdim)),
   n_out=2,
   self=lambda g, self, dim, correction, keepdim, xp: _paired(
       g, lambda g0: _var_grad(g0, self, dim, correction, keepdim, xp),
       lambda g1: xp.mean_expand(g1, _count(tuple(self.shape), dim), tuple(self.shape), dim,
                                 keepdim)))
op("aminmax", lambda self, dim, keepdim: (_xp(self).min(self, axis=dim, keepdims=keepdim),
                                          _xp(self).max(self, axis=dim, keepdims=keepdim)), n_out=2,
   self=lambda g, self, result, result1, dim, keepdim, xp: _paired(
       g, lambda g0: _amax_grad(g0, self, result, dim, keepdim, xp),
       lambda g1: _amax_grad(g1, self, result1, dim, keepdim, xp)))
op("cumprod", lambda self, dim: wide_scan(_xp(self).cumprod, self, dim),
   self=lambda g, self, result, dim, xp: _cumprod_backward(g, self, result, dim, xp))
op("cummax", lambda self, dim: _cum_extreme(self, dim, np.maximum), n_out=2,
   self=lambda g, self, dim, result1, xp: _at_indices(g[0], tuple(self.shape), dim, result1,
                                                      True, xp, add=True), grad_version=2)
op("cummin", lambda self, dim: _cum_extreme(self, dim, np.minimum), n_out=2,
   self=lambda g, self, dim, result1, xp: _at_indices(g[0], tuple(self.shape), dim, result1,
                                                      True, xp, add=True), grad_version=2)


def _logcumsumexp(x, dim):
    """logcumsumexp of an array (numpy's logaddexp accumulated) or of a Tensor (the op: under
    create_graph the backward below is recorded through it, as torch's)."""
    if isinstance(x, Tensor):
        return x.logcumsumexp(dim)
    return wide_scan(_xp(x).logaddexp.accumulate, x, dim)


def _logcumsumexp_grad(g, self, result, dim, xp):
    """torch's logcumsumexp_backward, in log space (TensorFlow's): the incoming gradient split
    into its positive and negative parts (a NaN is in neither), each summed from the end as
    exp(logcumsumexp(log|g| - result) + self), so no exp over- or underflows where the result
    is finite (exp(self) * sum(g * exp(-result)) gave inf/NaN from |x| ~ 89 in float32)."""
    if g.ndim == 0 or 0 in g.shape:
        return g
    lowest = float(np.finfo(xp.dtype(g)).min)  # (torch's: the lowest number, not -inf)
    log_abs = xp.log(xp.abs(g))

    def part(mask):
        x = xp.where(mask, log_abs, lowest) - result
        back = xp.flip(_logcumsumexp(xp.flip(x, (dim,)), dim), (dim,))
        return xp.exp(back + self)
    return part(g > 0) - part(g < 0)


op("logcumsumexp", lambda self, dim: _logcumsumexp(self, dim), float_op=True,
   self=lambda g, self, result, dim, xp: _logcumsumexp_grad(g, self, result, dim, xp))


# ---- results without a derivative: PyTorch records a node that refuses backward ----------------
def _refuse(name, exc=NotImplementedError):
    def formula(g):
        raise exc(f"the derivative for '{name}' is not implemented." if exc is NotImplementedError
                  else f"derivative for aten::{name} is not implemented")
    return formula


def _unique(a, axis):
    xp = backend.get_array_module(a)
    if axis is None:  # (each NaN is distinct, as torch: numpy merges them by default)
        nan = {"equal_nan": False} if xp is np else {}
        v, i, c = xp.unique(a.reshape(-1), return_inverse=True, return_counts=True, **nan)
        return v, i.reshape(a.shape).astype(np.int64), c.astype(np.int64)
    if a.shape[axis] == 0:
        return a.copy(), xp.zeros(0, np.int64), xp.zeros(0, np.int64)
    v, i, c = xp.unique(a, return_inverse=True, return_counts=True, axis=axis)
    return v, i.reshape(-1).astype(np.int64), c.astype(np.int64)


def _unique_consecutive(a, dim):
    """Runs of equal consecutive elements (slices along `dim`) collapsed: values, inverse,
    counts."""
    xp = backend.get_array_module(a)
    flat = a.reshape(-1) if dim is None else xp.moveaxis(a, dim, 0)
    rows = flat if dim is None else flat.reshape(flat.shape[0], -1)
    n = rows.shape[0]
    if n == 0:
        return (a.copy(), xp.zeros(a.shape if dim is None else 0, np.int64),
                xp.zeros(0, np.int64))
    change = rows[1:] != rows[:-1]
    if rows.ndim > 1:
        change = change.any(axis=1)
    starts = xp.concatenate([xp.ones(1, bool), change])
    inv = xp.cumsum(starts) - 1
    first = xp.nonzero(starts)[0]
    counts = xp.diff(xp.concatenate([first, xp.asarray([n])]))
    vals = flat[first]
    if dim is None:
        inv = inv.reshape(a.shape)
    else:
        vals = xp.moveaxis(vals, 0, dim)
    return vals, inv.astype(np.int64), counts.astype(np.int64)


op("unique", lambda self: _unique(self, None), node="Unique2Backward0", n_out=3,
   self=_refuse("_unique2"))
op("unique_dim", lambda self, dim: _unique(self, dim), n_out=3,
   self=_refuse("unique_dim"))
op("unique_consecutive", lambda self, dim: _unique_consecutive(self, dim), n_out=3,
   self=_refuse("unique_consecutive"))
op("histogram", lambda self, weight, bins, range, density: _histogram(self, weight, bins, range,
                                                                      density),
   node="NotImplemented", n_out=2,
   self=_refuse("histogram", RuntimeError))
op("bincount", lambda weights, self, minlength: _bincount(self, weights, minlength),
   node="NotImplemented",
   weights=_refuse("bincount", RuntimeError))


def _bin_counts(x, lo, hi, bins, weight):
    """Counts (or summed weights) of x in `bins` equal bins over [lo, hi], the last bin closed,
    an element's bin computed as PyTorch does: (x - lo) * bins / (hi - lo)."""
    xp = backend.get_array_module(x)
    keep = (x >= lo) & (x <= hi)
    pos = xp.minimum(((x[keep] - lo) * (bins / (hi - lo))).astype(np.int64), bins - 1)
    w = None if weight is None else weight[keep]
    return xp.bincount(pos, weights=w, minlength=bins)[:bins]


def _histogram(a, weight, bins, range, density):
    """(hist, bin_edges): `bins` an int (equal bins over `range`) or an array of edges."""
    xp = backend.get_array_module(a)
    x = a.reshape(-1)
    w = None if weight is None else weight.reshape(-1)
    if not isinstance(bins, int):
        edges = bins.astype(a.dtype)
        n = edges.size - 1
        idx = xp.where(x == edges[-1], n - 1, xp.searchsorted(edges, x, side="right") - 1)
        keep = (idx >= 0) & (idx < n)
        hist = xp.bincount(idx[keep], weights=None if w is None else w[keep], minlength=n)[:n]
    else:
        lo, hi = range
        edges = xp.linspace(lo, hi, bins + 1).astype(a.dtype)
        hist = _bin_counts(x, lo, hi, bins, w)
    hist = hist.astype(a.dtype)
    if density:
        hist = hist / (hist.sum() * xp.diff(edges))
    return hist.astype(a.dtype), edges


def _bincount(a, weights, minlength):
    xp = backend.get_array_module(a)
    if weights is None:
        return xp.bincount(a, minlength=minlength).astype(np.int64)
    dt = weights.dtype if weights.dtype.kind == "f" else np.dtype(np.float64)
    return xp.bincount(a, weights=weights, minlength=minlength).astype(dt)
