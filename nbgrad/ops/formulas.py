"""Derivative formulas longer than a line, used by the rows of the op table.

Each takes what its row's formula names (`g`, inputs, `result`, arguments, `xp`) and works on
backend arrays, or on Tensors when the backward itself is recorded (`create_graph`: `xp` is then
`_TX` below, which stands in for the array module), so the same formula gives higher-order
gradients.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import backend, dtypes
from ..tensor import Tensor
from . import kernels


# ================================================================================================
def _reduce_to(g, shape, dtype, xp):
    """Sum a broadcast gradient back to `shape` and cast it to the input's `dtype` (the one
    unbroadcast helper every broadcasting op uses)."""
    gs = tuple(g.shape)
    if gs != shape:
        lead = len(gs) - len(shape)
        axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                          if s == 1 and gs[i + lead] != 1)
        if axes:
            g = xp.sum(g, axis=axes, keepdims=True)
        if lead:
            g = g.reshape(shape)
    if dtype is not None and _np_dtype(g) != dtype:
        g = _astype(g, dtype, xp)
    return g


def _mT(x):
    """Swap the last two dims (arrays of numpy or cupy, or Tensors under create_graph)."""
    return x.swapaxes(-1, -2)


def _astype(g, dt, xp):
    return g.to(dtypes.from_np(dt)) if xp is _TX else g.astype(dt)


def _np_dtype(x):
    return x._data.dtype if isinstance(x, Tensor) else x.dtype


_add_reduce = np.add.reduce


def _sum_all(a, dt):
    # np.add.reduce skips ndarray.sum's Python wrapper; cupy arrays take their own sum
    return _add_reduce(a, None, dt) if type(a) is np.ndarray else a.sum(dtype=dt)


def _unpermute(g, dims, xp):
    inv = np.argsort(dims).tolist()
    return g.permute(*inv) if xp is _TX else g.transpose(inv)


def _filled(g, shape, xp):
    """A 0-d gradient spread over `shape` (cheaper than numpy's broadcast_to for small shapes)."""
    if xp is np:
        out = np.empty(shape, g.dtype)
        out[...] = g
        return out
    return xp.broadcast_to(g, shape)


def _expand_grad(g, shape, dim, keepdim, xp):
    """Gradient of a reduction over `dim` back to the input's `shape`."""
    if dim is None:
        return xp.broadcast_to(g, shape)
    if not keepdim:
        dims = sorted(d % len(shape) for d in (dim if isinstance(dim, tuple) else (dim,)))
        gshape = list(g.shape)
        for d in dims:
            gshape.insert(d, 1)
        g = g.reshape(tuple(gshape))
    return xp.broadcast_to(g, shape)


def _keep(x, shape, dim, keepdim):
    """Reshape a reduced value (`result`, g) so it broadcasts against the input."""
    if dim is None:
        return x
    if keepdim:
        return x
    dims = sorted(d % len(shape) for d in (dim if isinstance(dim, tuple) else (dim,)))
    s = list(x.shape)
    for d in dims:
        s.insert(d, 1)
    return x.reshape(tuple(s))


def _count(shape, dim):
    if dim is None:
        return math.prod(shape)
    return math.prod(shape[d] for d in (dim if isinstance(dim, tuple) else (dim,)))


def _put(g, shape, index, xp):
    """zeros(shape) with `g` written at basic index `index` (Select/Slice backward)."""
    z = xp.zeros(shape, _np_dtype(g))
    z[index] = g
    return z


def _evenly(g, self, result, xp):
    mask = self == result
    return xp.where(mask, g / _astype(mask.sum(), _np_dtype(g), xp), 0)


def _prod_backward(g, self, result, dim, keepdim, xp):
    if dim is None:
        flat = self.reshape(-1)
        return (g * _prod_others(flat, 0, xp)).reshape(self.shape)
    gk = _keep(g, self.shape, dim, keepdim)
    return gk * _prod_others(self, dim, xp)


def _prod_others(x, dim, xp):
    """Product of all elements along `dim` except the one at each position (zeros are fine)."""
    if xp is _TX:
        return x.prod(dim, keepdim=True) / x
    ones = xp.ones_like(xp.take(x, [0], axis=dim))
    left = xp.cumprod(xp.concatenate([ones, xp.take(x, range(x.shape[dim] - 1), axis=dim)],
                                     axis=dim), axis=dim)
    rev = xp.flip(x, (dim,))
    right = xp.flip(xp.cumprod(xp.concatenate(
        [ones, xp.take(rev, range(x.shape[dim] - 1), axis=dim)], axis=dim), axis=dim), (dim,))
    return left * right


def _select_grad(g, shape, dim, indices, keepdim, xp):
    """Gradient of max/min along dim: g scattered at `indices`."""
    if not keepdim:
        g = xp.expand_dims(g, dim)
        indices = xp.expand_dims(indices, dim)
    z = xp.zeros(shape, _np_dtype(g))
    xp.put_along_axis(z, indices, g, axis=dim)
    return z


def _norm_backward(g, self, result, p, dim, keepdim, xp):
    gk = _keep(g, self.shape, dim, keepdim)
    rk = _keep(result, self.shape, dim, keepdim)
    if p == 2:
        return xp.where(rk == 0, 0, self * (gk / xp.where(rk == 0, 1, rk)))
    if p == 1:
        return xp.sign(self) * gk
    if p == float("inf"):
        mask = xp.abs(self) == rk
        return xp.sign(self) * xp.where(mask, gk / mask.sum(axis=dim, keepdims=True), 0)
    a = xp.abs(self)
    return xp.where(rk == 0, 0, xp.sign(self) * a ** (p - 1) * gk /
                    xp.where(rk == 0, 1, rk) ** (p - 1))


def _as_strided_backward(g, base_geom, view_geom, xp):
    if xp is _TX:
        raise RuntimeError("nbgrad: double backward through AsStridedBackward0 is not supported")
    shape, strides, off = base_geom
    size = max([off] + [off + sum((n - 1) * s for n, s in zip(shape, strides)) + 1,
                        view_geom[2] + sum((n - 1) * s for n, s in zip(view_geom[0],
                                                                       view_geom[1])) + 1])
    buf = xp.zeros(size, g.dtype)
    vshape, vstrides, voff = view_geom
    if _overlapping(vshape, vstrides):  # windows share elements: add every contribution
        idx = xp.indices(vshape)
        flat = voff + sum(i * s for i, s in zip(idx, vstrides))
        xp.add.at(buf, flat.reshape(-1), g.reshape(-1))
    else:
        backend.as_strided(buf, vshape, vstrides, voff)[...] = g
    return backend.as_strided(buf, shape, strides, off).copy()


def _unfold_backward(g, shape, dim, size, step, xp):
    """Sum the windows back: one strided slice-add per position inside the window."""
    z = xp.zeros(shape, _np_dtype(g))
    n = g.shape[dim]
    pre = (slice(None),) * dim
    if xp is not _TX:  # window axis first, contiguous: each slice below is then a dense block
        g = xp.ascontiguousarray(xp.moveaxis(g, -1, 0))
        for k in range(size):
            z[pre + (slice(k, k + step * (n - 1) + 1, step),)] += g[k]
        return z
    for k in range(size):
        z[pre + (slice(k, k + step * (n - 1) + 1, step),)] += g[(Ellipsis, k)]
    return z


def _overlapping(shape, strides):
    """Whether a strided view may reach one element twice (strides in elements)."""
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    extent = 1
    for s, n in dims:
        if s < extent:
            return True
        extent = s * n
    return False


def _scatter_add(z, dim, index, src, xp):
    """z[index[i][j]][j] += src[i][j] along `dim` (gather's backward)."""
    idx = list(xp.indices(index.shape, sparse=True))
    idx[dim] = index
    xp.add.at(z, tuple(idx), src)
    return z


def _index_backward(g, self_shape, index, xp):
    z = xp.zeros(self_shape, _np_dtype(g))
    if xp is _TX:
        return z.index_put_(index, g, accumulate=True)
    xp.add.at(z, index, g)
    return z


def _c(b, xp):
    """The right operand of a matrix product, C-contiguous: numpy's matmul is several times
    slower on a transposed right operand at these sizes, and the copy is cheap next to it."""
    if xp is _TX or b.flags.c_contiguous:
        return b
    return xp.ascontiguousarray(b)


def _mm_grads(which):
    if which == 0:
        return lambda g, mat2, xp: g @ _c(_mT(mat2), xp)
    return lambda g, self, xp: _mT(self) @ g


def _cat_grads(g, sizes, dim, dtypes, xp):
    out = []
    start = 0
    for n, dt in zip(sizes, dtypes):
        idx = [slice(None)] * g.ndim
        idx[dim] = slice(start, start + n)
        gi = g[tuple(idx)]
        out.append(gi if _np_dtype(gi) == dt else _astype(gi, dt, xp))
        start += n
    return out


def _zeros_for(gs, shapes, dtype, xp):
    return [xp.zeros(s, dtype) if g is None else g for g, s in zip(gs, shapes)]


def _logsumexp_grad(g, self, result, dim, keepdim, xp):
    return _keep(g, self.shape, dim, keepdim) * xp.exp(self - _keep(result, self.shape, dim,
                                                                     keepdim))


def _var_grad(g, self, dim, correction, keepdim, xp):
    n = _count(self.shape, dim) - correction
    mean = self.mean(axis=dim, keepdims=True)
    return (2.0 / n) * _keep(g, self.shape, dim, keepdim) * (self - mean)


def _std_grad(g, self, result, dim, correction, keepdim, xp):
    n = _count(self.shape, dim) - correction
    mean = self.mean(axis=dim, keepdims=True)
    rk = _keep(result, self.shape, dim, keepdim)
    return _keep(g, self.shape, dim, keepdim) * (self - mean) / (n * rk)

def _in_range(x, lo, hi):
    if lo is None:
        return x <= hi
    if hi is None:
        return x >= lo
    return (x >= lo) & (x <= hi)


def _first_dtype(gs):
    return next(_np_dtype(g) for g in gs if g is not None)


def _amax_grad(g, self, result, dim, keepdim, xp):
    rk = _keep(result, self.shape, dim, keepdim)
    mask = self == rk
    gk = _keep(g, self.shape, dim, keepdim)
    # the count in g's dtype: a float32 gradient stays float32 (int64 would promote it)
    return xp.where(mask, gk / _astype(mask.sum(axis=dim, keepdims=True), _np_dtype(gk), xp), 0)



def _zero_at(g, index, xp):
    if xp is _TX:
        return g.index_put(index, _TX.zeros((), _np_dtype(g)), accumulate=False)
    z = g.copy()
    z[index] = 0
    return z



def _no_double(xp, name):
    if xp is _TX:
        raise RuntimeError(f"nbgrad: double backward through {name} is not supported yet")


def _conv_grads(g, ctx, needs, xp):
    _no_double(xp, "ConvolutionBackward0")
    return kernels.conv2d_backward(g, ctx.get(), needs)  # one pass for (input, weight, bias)


def _pool_grad(g, ctx, xp):
    _no_double(xp, "MaxPool2DWithIndicesBackward0")
    return kernels.max_pool2d_backward(g, ctx.get())


def _repeat_backward(g, shape, repeats):
    """Sum the tiles: (r0*n0, r1*n1, ...) -> (r0, n0, r1, n1, ...) summed over the r axes."""
    lead = len(repeats) - len(shape)
    full = (1,) * lead + tuple(shape)
    split = []
    for r, n in zip(repeats, full):
        split += [r, n]
    g = g.reshape(tuple(split)).sum(axis=tuple(range(0, 2 * len(full), 2)))
    return g.reshape(shape)



def _index_select_backward(g, self_shape, dim, index, xp):
    z = xp.zeros(self_shape, _np_dtype(g))
    if xp is _TX:
        return z.index_add(dim, Tensor._make_fresh(index), g)
    idx = [slice(None)] * len(self_shape)
    idx[dim] = index
    xp.add.at(z, tuple(idx), g)
    return z



# ---- create_graph: the numpy functions formulas use, on Tensors ---------------------------------
class _TX:
    """Stands in for numpy inside formulas when the backward itself is recorded (create_graph)."""

    @staticmethod
    def where(c, a, b):
        from ..functions import where
        return where(c, a, b)

    @staticmethod
    def sum(x, axis=None, keepdims=False):
        return x.sum(dim=axis, keepdim=keepdims)

    @staticmethod
    def broadcast_to(x, shape):
        return x.expand(*shape) if isinstance(x, Tensor) else x

    @staticmethod
    def flip(x, dims):
        from ..functions import flip
        return flip(x, dims)

    @staticmethod
    def cumsum(x, axis):
        return x.cumsum(axis)

    @staticmethod
    def take(x, i, axis):
        return x.select(axis, i)

    @staticmethod
    def stack(xs, axis):
        from ..functions import stack
        return stack(xs, axis)

    @staticmethod
    def concatenate(xs, axis):
        from ..functions import cat
        return cat(xs, axis)

    @staticmethod
    def zeros(shape, dt):
        from ..creation import zeros
        return zeros(shape, dtype=dtypes.from_np(dt) if not isinstance(dt, dtypes.dtype) else dt)

    @staticmethod
    def expand_dims(x, dim):
        return x.unsqueeze(dim)

    @staticmethod
    def put_along_axis(z, idx, g, axis):
        raise RuntimeError("nbgrad: double backward through max/min with dim is not supported yet")


for _name in ("exp", "log", "sign", "cos", "sin", "abs"):  # xp.exp(t) -> t.exp(), ...
    setattr(_TX, _name, staticmethod(operator.methodcaller(_name)))



def _const(arr, xp):
    """A constant array as a formula's operand: on the gradient's device, or a Tensor under
    create_graph."""
    return Tensor._make_fresh(arr) if xp is _TX else xp.asarray(arr)
