"""Rows: reductions (sum, mean, prod, max/min, var/std, norm, logsumexp) and scans (cumsum).

A `_dim` row reduces over `dim` (an int or a tuple of ints) and keeps it when `keepdim`.
Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

import math

import numpy as np

from .formulas import (_amax_grad, _count, _evenly, _expand_grad, _filled, _logsumexp_grad,
                       _norm_backward, _prod_backward, _select_grad, _std_grad, _sum_all,
                       _var_grad)
from .registry import op

op("sum", lambda self, dtype: _sum_all(self, dtype),
   self=lambda g, self_shape, xp: _filled(g, self_shape, xp))
op("sum_dim", lambda self, dim, keepdim, dtype: self.sum(axis=dim, keepdims=keepdim, dtype=dtype),
   node="SumBackward1",
   self=lambda g, self_shape, dim, keepdim, xp: _expand_grad(g, self_shape, dim, keepdim, xp))
op("mean", lambda self: self.mean(dtype=self.dtype),
   self=lambda g, self_shape, xp: xp.broadcast_to(g / math.prod(self_shape), self_shape))
op("mean_dim", lambda self, dim, keepdim: self.mean(axis=dim, keepdims=keepdim, dtype=self.dtype),
   node="MeanBackward1",
   self=lambda g, self_shape, dim, keepdim, xp: _expand_grad(g / _count(self_shape, dim),
                                                             self_shape, dim, keepdim, xp))
op("prod", lambda self: self.prod(),
   self=lambda g, self, result, xp: _prod_backward(g, self, result, None, False, xp))
op("prod_dim", lambda self, dim, keepdim: self.prod(axis=dim, keepdims=keepdim),
   node="ProdBackward1",
   self=lambda g, self, result, dim, keepdim, xp: _prod_backward(g, self, result, dim, keepdim,
                                                                 xp))
op("max", lambda self: self.max(), node="MaxBackward1",
   self=lambda g, self, result, xp: _evenly(g, self, result, xp))
op("min", lambda self: self.min(), node="MinBackward1",
   self=lambda g, self, result, xp: _evenly(g, self, result, xp))
op("max_dim", lambda self, dim, keepdim: _vals_idx(self, dim, keepdim, np.argmax),
   node="MaxBackward0", n_out=2,
   self=lambda g, self_shape, dim, keepdim, result1, xp: _select_grad(g[0], self_shape, dim,
                                                                      result1, keepdim, xp))
op("min_dim", lambda self, dim, keepdim: _vals_idx(self, dim, keepdim, np.argmin),
   node="MinBackward0", n_out=2,
   self=lambda g, self_shape, dim, keepdim, result1, xp: _select_grad(g[0], self_shape, dim,
                                                                      result1, keepdim, xp))
op("amax", lambda self, dim, keepdim: np.max(self, axis=dim, keepdims=keepdim),
   self=lambda g, self, result, dim, keepdim, xp: _amax_grad(g, self, result, dim, keepdim, xp))
op("amin", lambda self, dim, keepdim: np.min(self, axis=dim, keepdims=keepdim),
   self=lambda g, self, result, dim, keepdim, xp: _amax_grad(g, self, result, dim, keepdim, xp))
op("var", lambda self, dim, correction, keepdim: self.var(axis=dim, ddof=correction,
                                                          keepdims=keepdim),
   self=lambda g, self, dim, correction, keepdim, xp: _var_grad(g, self, dim, correction,
                                                                keepdim, xp))
op("std", lambda self, dim, correction, keepdim: self.std(axis=dim, ddof=correction,
                                                          keepdims=keepdim),
   self=lambda g, self, result, dim, correction, keepdim, xp: _std_grad(
       g, self, result, dim, correction, keepdim, xp))
op("norm", lambda self, p, dim, keepdim: _vector_norm(self, p, dim, keepdim),
   node="LinalgVectorNormBackward0",
   self=lambda g, self, result, p, dim, keepdim, xp: _norm_backward(g, self, result, p, dim,
                                                                    keepdim, xp))
op("logsumexp", lambda self, dim, keepdim: _logsumexp(self, dim, keepdim), float_op=True,
   self=lambda g, self, result, dim, keepdim, xp: _logsumexp_grad(g, self, result, dim, keepdim,
                                                                  xp))
op("cumsum", lambda self, dim: np.cumsum(self, axis=dim),
   self=lambda g, dim, xp: xp.flip(xp.cumsum(xp.flip(g, (dim,)), axis=dim), (dim,)))


# ---- forwards longer than a line ----------------------------------------------------------------
def _vals_idx(a, dim, keepdim, argf):
    idx = argf(a, axis=dim, keepdims=True)
    vals = np.take_along_axis(a, idx, axis=dim)
    if not keepdim:
        vals = vals.squeeze(dim)
        idx = idx.squeeze(dim)
    return vals, idx.astype(np.int64, copy=False)


def _vector_norm(a, p, dim, keepdim):
    x = np.abs(a)
    if p == 2:
        return np.sqrt((x * x).sum(axis=dim, keepdims=keepdim))
    if p == 1:
        return x.sum(axis=dim, keepdims=keepdim)
    if p == float("inf"):
        return x.max(axis=dim, keepdims=keepdim)
    if p == 0:
        return (x != 0).sum(axis=dim, keepdims=keepdim).astype(a.dtype)
    return (x ** p).sum(axis=dim, keepdims=keepdim) ** (1.0 / p)


def _logsumexp(a, dim, keepdim):
    m = a.max(axis=dim, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    r = np.log(np.exp(a - m).sum(axis=dim, keepdims=True)) + m
    return r if keepdim else (r.squeeze(dim) if dim is not None else r.reshape(()))
