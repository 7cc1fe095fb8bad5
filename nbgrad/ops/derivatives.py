"""Derivative formulas longer than a line, shared by the table's files: each is written once
against `xp` (formulas.py: numpy's functions on arrays, the Tensor methods under create_graph), so
one formula serves every order. Also the array side of the operations whose array and Tensor
spellings differ (formulas.py's pairs: scatter writes, roll, scatter_reduce's product).
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..tensor import Tensor


def _raw(i):
    return i._data if isinstance(i, Tensor) else i


# ------------------------------------------------------------------------------------------------
# Formulas (each works on arrays and on Tensors through `xp`)
# ------------------------------------------------------------------------------------------------
def _reduce_to(g, shape, dtype, xp):
    """Sum a broadcast gradient back to `shape` and cast it to the input's `dtype` (the one
    unbroadcast helper every broadcasting op uses)."""
    gs = tuple(g.shape)
    if gs != shape and not shape:  # PyTorch's sum_to: to 0-d, the sum of all
        g = xp.sum_all(g)
    elif gs != shape:
        lead = len(gs) - len(shape)
        if lead == 1 and type(g) is np.ndarray and gs[1:] == shape:  # a bias: one reduce
            # (kept (1, *shape), then viewed as shape: a view, as torch's sum_to, so the
            # engine adds the next gradient into a new buffer, not into this one)
            g = _add_reduce(g, 0, None, None, True).reshape(shape)
            return g if dtype is None or g.dtype == dtype else g.astype(dtype)
        axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                          if s == 1 and gs[i + lead] != 1)
        if axes:
            g = xp.sum(g, axis=axes, keepdims=True)
        if lead:
            g = g.reshape(shape)
    if dtype is not None and xp.dtype(g) != dtype:
        g = xp.astype(g, dtype)
    return g


def _maybe_multiply(x, c, xp):
    """x * c for a number c, nothing when c is 1 (PyTorch's maybe_multiply: MulBackward1)."""
    return x if c == 1 else xp.mul_scalar(x, c)


def _mT(x):
    """Swap the last two dims."""
    return x.swapaxes(-1, -2)


def _unpermute(g, dims, xp):
    return xp.permute(g, np.argsort(dims).tolist())


def _dims_of(dim, ndim):
    return sorted(d % ndim for d in (dim if isinstance(dim, tuple) else (dim,)))


def _expand_grad(g, shape, dim, keepdim, xp):
    """Gradient of a reduction over `dim` back to the input's `shape` (PyTorch's sum_backward:
    unsqueeze, then expand)."""
    if dim is None:
        return xp.broadcast_to(g, shape)
    return xp.broadcast_to(_keep(g, shape, dim, keepdim, xp), shape)


def _keep(x, shape, dim, keepdim, xp):
    """A reduced value (`result`, g) with the reduced dims back as size 1, so it broadcasts
    against the input (PyTorch's unsqueeze_multiple)."""
    if dim is None or keepdim or not len(shape):
        return x
    return xp.unsqueeze_dims(x, _dims_of(dim, len(shape)))


def _restore(x, shape, dim, keepdim):
    """The same by one reshape (PyTorch's restore_reduced_dims: amax/amin)."""
    if dim is None or keepdim:
        return x
    s = list(x.shape)
    for d in _dims_of(dim, len(shape)):
        s.insert(d, 1)
    return x.reshape(tuple(s))


def _count(shape, dim):
    if dim is None:
        return math.prod(shape)
    return math.prod(shape[d] for d in (dim if isinstance(dim, tuple) else (dim,)))


def _evenly(g, self, result, xp):
    """max()/min()/median()'s gradient, shared by the ties (PyTorch's
    evenly_distribute_backward: zeros masked_fill'ed with g / count, MaskedFillBackward1); a
    NaN result shares it among the NaN elements."""
    mask = (self == result) | ((self != self) & (result != result))
    return xp.masked_fill(xp.zeros_like(self), mask, g / xp.astype(mask.sum(), xp.dtype(g)))


def _halved_at_ties(g, self, other, xp):
    """maximum/minimum: g, halved where the operands tie."""
    return xp.where(self == other, xp.div_scalar(g, 2), g)


def _prod_backward(g, self, result, dim, keepdim, xp):
    if len(self.shape) and not bool((_raw(self) == 0).any()):
        # PyTorch's prod_backward without zeros: grad * (result / self), both unsqueezed
        # (UnsqueezeBackward0 of the saved result); NaN at an inf (inf / inf), as torch's
        return _keep(g, self.shape, dim, keepdim, xp) * (
            _keep(result, self.shape, dim, keepdim, xp) / self)
    if dim is None:
        return (g * xp.prod_others(self.reshape(-1), 0)).reshape(self.shape)
    return _keep(g, self.shape, dim, keepdim, xp) * xp.prod_others(self, dim)


def _select_grad(g, shape, dim, indices, keepdim, xp):
    """Gradient of max/min along dim: g written at `indices`."""
    if not keepdim:
        g = xp.expand_dims(g, dim)
        indices = xp.expand_dims(indices, dim)
    return xp.scatter_along(xp.new_zeros(g, tuple(shape)), dim, _raw(indices), g)


def _norm_backward(g, self, result, p, dim, keepdim, xp):
    """PyTorch's norm_backward (linalg_vector_norm), case by case, with its steps."""
    gk = _keep(g, self.shape, dim, keepdim, xp)
    rk = _keep(result, self.shape, dim, keepdim, xp)
    if p == 2:
        return gk * xp.masked_fill(self / rk, rk == 0, 0)
    if p == 1:
        return xp.sign(self) * gk
    if p == float("inf"):
        # torch's mask: the entries equal to the norm, or NaN (so NaN's gradient is its sgn: 0)
        a = xp.abs(self)
        mask = xp.astype((a == rk) | (a != a), xp.dtype(self))
        return xp.sign(self) * ((gk / mask.sum(axis=dim, keepdims=True)) * mask)
    if p < 1:
        scaled = xp.sign(self) * xp.masked_fill(xp.abs(self) ** (p - 1), self == 0, 0)
        return scaled * gk * rk ** (1 - p)
    scaled = xp.sign(self) * xp.abs(self) ** (p - 1) if p < 2 else \
        self * xp.abs(self) ** (p - 2)
    return scaled * xp.masked_fill(gk / rk ** (p - 1), rk == 0, 0)


def _cat_grads(g, sizes, dim, dtypes, xp):
    out = []
    start = 0
    for n, dt in zip(sizes, dtypes):
        gi = g[(slice(None),) * dim + (slice(start, start + n),)]
        out.append(gi if xp.dtype(gi) == dt else xp.astype(gi, dt))
        start += n
    return out


def _zeros_for(gs, shapes, xp):
    """The outputs' gradients of a multi-view op, zeros where an output got none."""
    like = next(g for g in gs if g is not None)
    return [xp.new_zeros(like, s) if g is None else g for g, s in zip(gs, shapes)]


def _logsumexp_grad(g, self, result, dim, keepdim, xp):
    return _keep(g, self.shape, dim, keepdim, xp) * xp.exp(
        self - _keep(result, self.shape, dim, keepdim, xp))


def _var_grad(g, self, dim, correction, keepdim, xp):
    """PyTorch's var_backward: 2 / (n - correction) * g * (self - mean)."""
    n = _count(self.shape, dim) - correction
    mean = self.mean() if dim is None else self.mean(axis=dim, keepdims=True)
    return xp.mul_scalar(_keep(g, self.shape, dim, keepdim, xp), 2.0 / n) * (self - mean)


def _std_grad(g, self, result, dim, correction, keepdim, xp):
    """PyTorch's std_backward: var_backward of g / (2 std), 0 where std is 0."""
    return _var_grad(xp.masked_fill(g / (result * 2), result == 0, 0), self, dim, correction,
                     keepdim, xp)


def _in_range(x, lo, hi):
    if lo is None:
        return x <= hi
    if hi is None:
        return x >= lo
    return (x >= lo) & (x <= hi)


def _amax_grad(g, self, result, dim, keepdim, xp):
    rk = _restore(result, self.shape, dim, keepdim)
    mask = self == rk
    gk = _restore(g, self.shape, dim, keepdim)
    # the count in g's dtype: a float32 gradient stays float32 (int64 would promote it); a
    # multiply by the mask, not where: a NaN in g spreads, as in PyTorch
    return gk / xp.astype(mask.sum(axis=dim, keepdims=True), xp.dtype(gk)) * mask


def _repeat_backward(g, shape, repeats):
    """Sum the tiles: (r0*n0, r1*n1, ...) -> (r0, n0, r1, n1, ...) summed over the r axes."""
    lead = len(repeats) - len(shape)
    full = (1,) * lead + tuple(shape)
    split = []
    for r, n in zip(repeats, full):
        split += [r, n]
    g = g.reshape(tuple(split)).sum(axis=tuple(range(0, 2 * len(full), 2)))
    return g if tuple(g.shape) == tuple(shape) else g.reshape(shape)


def _along(dim, index):
    """The index `index` at position `dim`, all of every dim before it."""
    return (slice(None),) * dim + (index,)


_add_reduce = np.add.reduce
try:  # numpy >= 2.3: `out=...` returns the 0-d array itself, not a scalar made into one again
    _add_reduce(np.zeros(1), None, None, out=...)
    _ARRAY_OUT = True
except TypeError:
    _ARRAY_OUT = False


def _sum_all(self, dtype):
    """sum's forward (the row's own: its parameters are the row's): np.add.reduce skips
    ndarray.sum's Python wrapper, and returns a 0-d array where numpy can (a numpy scalar is
    turned into one by `apply`, ~0.5 us more); cupy takes its own."""
    if type(self) is np.ndarray:
        return _add_reduce(self, None, dtype, out=...) if _ARRAY_OUT else \
            _add_reduce(self, None, dtype)
    return self.sum(dtype=dtype)


# ------------------------------------------------------------------------------------------------
# The array side of formulas.py's pairs
# ------------------------------------------------------------------------------------------------
def _array_scatter(m, z, dim, index, src, add):
    """`z` (a fresh buffer) with `src` written, or added, at `index` along `dim`."""
    if add:
        grid = list(m.indices(index.shape, sparse=True))
        grid[dim] = index
        m.add.at(z, tuple(grid), src)
    else:
        m.put_along_axis(z, index, src, axis=dim)
    return z


def _array_zero_along(g, dim, index):
    z = g.copy()
    z[_along(dim, index)] = 0
    return z


def _array_roll(m, x, shifts, dims):
    if dims is None:
        return m.roll(x.reshape(-1), shifts).reshape(x.shape)
    return m.roll(x, shifts, dims)


def _scatter_reduce_prod(z, src, dim, index, include_self):
    return scatter_reduce_array(z, src, dim, index, "prod", include_self)


def scatter_reduce_array(self, src, dim, index, reduce, include_self):
    """scatter_reduce's forward on arrays (also used by its "prod" gradient): src reduced into a
    copy of self at `index` along `dim`."""
    m = backend.get_array_module(self)
    src = src[tuple(slice(0, n) for n in index.shape)]
    ufunc = {"sum": m.add, "mean": m.add, "prod": m.multiply, "amax": m.maximum,
             "amin": m.minimum}[reduce]
    out = self.copy()
    grid = list(m.indices(index.shape, sparse=True))
    grid[dim] = index
    grid = tuple(grid)
    if not include_self:
        out[grid] = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
    ufunc.at(out, grid, src)
    count = m.full(self.shape, 1 if include_self else 0, np.int64)
    m.add.at(count, grid, 1)
    if reduce == "mean":
        out = (out / m.maximum(count, 1)).astype(self.dtype, copy=False)
    return out if include_self else m.where(count == 0, self, out)


def _layer_norm_nonfinite_grad(gh, x2, r):
    """layer_norm's input gradient, rows of (rows, n) `x2` and `gh` (g * weight), by torch's
    kernel's algebra (a dy + b x + c from the sums of dy * x and dy), where an inf or NaN makes
    it differ from the xhat form: its infs cancel as torch's do."""
    with np.errstate(invalid="ignore", over="ignore"):
        inv_n = x2.dtype.type(1 / x2.shape[1])
        mean = x2.sum(axis=1) * inv_n
        ds, db = (gh * x2).sum(axis=1), gh.sum(axis=1)
        b = (db * mean - ds) * r * r * r * inv_n
        return r[:, None] * gh + b[:, None] * x2 + (-b * mean - db * r * inv_n)[:, None]


def _group_norm_nonfinite(x, weight, bias, mean, rstd, num_groups):
    """group_norm's output where an inf or NaN is present, by torch's kernel's algebra:
    x * s + (beta - s * mean), s = rstd * gamma per (sample, channel), whose infs cancel as
    its do (xhat * gamma + beta's need not)."""
    n, c = x.shape[0], x.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):
        s = (rstd * weight.reshape(num_groups, -1)).reshape(n, c, 1)
        t = -s * backend.get_array_module(x).repeat(mean.reshape(n, num_groups, 1),
                                                    c // num_groups, axis=1)
        t = t if bias is None else t + bias.reshape(1, c, 1)
        return (x.reshape(n, c, -1) * s + t).reshape(x.shape)


def _group_norm_nonfinite_grad(g, x, weight, num_groups, rstd):
    """group_norm's input gradient by torch's kernel's algebra (sums of dy * x and dy per
    channel, through gamma per group: c1 dy + c2 x + c3; no weight: gamma 1), where an inf or
    NaN makes it differ from the xhat form: its infs cancel as torch's do."""
    n, c = x.shape[0], x.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):
        x3, g3 = x.reshape(n, c, -1), g.reshape(n, c, -1)
        m = x3.shape[2] * (c // num_groups)
        mean = x3.reshape(n, num_groups, -1).sum(axis=2, keepdims=True) / m  # (n, G, 1)
        w = x.dtype.type(1) if weight is None else weight.reshape(1, num_groups, -1)
        ds = ((g3 * x3).sum(axis=2).reshape(n, num_groups, -1) * w).sum(axis=2, keepdims=True)
        db = (g3.sum(axis=2).reshape(n, num_groups, -1) * w).sum(axis=2, keepdims=True)
        c2 = (db * mean - ds) * rstd * rstd * rstd / m
        c3 = -c2 * mean - db * rstd / m
        c1 = (rstd * w if weight is not None else backend.get_array_module(x).repeat(
            rstd, c // num_groups, axis=2)).reshape(n, c, 1)
        per, am = c // num_groups, backend.get_array_module(x)
        return (c1 * g3 + am.repeat(c2, per, axis=1) * x3 + am.repeat(c3, per, axis=1)).reshape(
            x.shape)


def _group_norm_nonfinite_weight_grad(g, x, num_groups, rstd):
    """group_norm's weight gradient by torch's kernel's algebra, sum over the batch of
    (sum dy * x - mean sum dy) * rstd per channel, where the upstream gradient holds an inf or
    NaN: inf - inf is NaN there, as torch's, where sum dy * xhat keeps the inf."""
    n, c = x.shape[0], x.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):
        x3, g3 = x.reshape(n, c, -1), g.reshape(n, c, -1)
        per = c // num_groups
        mean = x3.reshape(n, num_groups, -1).sum(axis=2) / (x3.shape[2] * per)  # (n, G)
        am = backend.get_array_module(x)
        mean_c, rstd_c = (am.repeat(a.reshape(n, num_groups), per, axis=1)
                          for a in (mean, rstd))
        return (((g3 * x3).sum(axis=2) - g3.sum(axis=2) * mean_c) * rstd_c).sum(axis=0)


# torch's CPU accumulate type of a floating dtype, which its var/std and scans run in: double for
# float32, float for float16 (float64 is its own)
ACC_TYPES = {np.dtype(np.float32): np.dtype(np.float64), np.dtype(np.float16): np.dtype(np.float32)}


def wide_scan(f, x, axis):
    """``f(x, axis=axis)`` (a cumulative sum, product or logaddexp) of a float32/float16 array
    accumulated in torch's accumulate type and rounded once, as torch's CPU scans: bit for bit
    torch's cumsum, cumprod and logcumsumexp (float32 accumulation matched 13-22%)."""
    acc = ACC_TYPES.get(x.dtype)
    if acc is not None:
        return f(x, axis=axis, dtype=acc).astype(x.dtype, copy=False)
    return f(x, axis=axis)
