"""The op table: every differentiable primitive, its forward and its derivative side by side.

One row per op (as PyTorch's derivatives.yaml): the forward on backend arrays, and one formula per
input giving that input's gradient. A formula's parameters name what it needs — `g` (the output's
gradient) and then inputs (`self`, `other`, ...), `result`, non-tensor arguments (`dim`, ...),
`<input>_shape`, or `xp` (the array module) — and the row saves exactly what the formulas of the
inputs that require grad use, as SavedTensors that check their version when unpacked. Formulas are
written against numpy's API; under `create_graph` they run on Tensors (`xp` is then `_TX` below),
so the same formula gives higher-order gradients.

Below the table: the machinery that applies a row (plain, view, in-place), then the public
functions, which `nbgrad.__init__` exports and `tensor_methods.py` binds onto Tensor.
"""
from __future__ import annotations

import math
import operator
import sys

import numpy as np

from . import _conv, backend, dtypes
from .autograd import anomaly, provenance
from .autograd.grad_mode import STATE as _GRAD
from .autograd.graph import RELEASABLE, Node, SavedTensor
from .storage import Storage
from .tensor import (DEFAULT, MULTI_OUTPUT, NO_GRAD_MODE, Tensor, _ViewMeta)

_new = object.__new__
_capture = provenance.capture
_NODES = provenance.NODES
_NONE_EDGE = (None, 0)
_get_xp = backend.get_array_module


# ================================================================================================
# Rows and nodes
# ================================================================================================
class OpNode(Node):
    """A node made by a table row; its class (e.g. MulBackward0) carries the row."""

    __slots__ = ("_meta",)
    _row = None

    def _backward(self, g, create_graph):
        __tracebackhide__ = True
        row = self._row
        saved = self._saved
        if create_graph:
            xp = _TX
            v = [s.unpack(self, True) if type(s) is SavedTensor else s for s in saved] \
                if saved else ()
        else:
            if self._n_out == 1:
                xp = np if type(g) is _ND else _get_xp(g)
            else:
                g = list(g)
                xp = _get_xp(next(x for x in g if x is not None))
            v = [s.unpack(self) if type(s) is SavedTensor else s for s in saved] if saved else ()
        if row.n_out == -1 and self._n_out == 1:  # unbind/split with one output: still a list
            g = [g]
        if row.all_grad is not None:
            needs = tuple(e[0] is not None for e in self._next)
            outs = list(row.all_call(row.all_grad, g, v, xp, needs))
        else:
            calls = row.calls
            forms = row.formulas
            outs = [None if e[0] is None or c is None else c(f, g, v, xp, None)
                    for e, c, f in zip(self._next, calls, forms)]
        meta = self._meta
        if meta is not None:
            for i, m in enumerate(meta):
                if m is not None and outs[i] is not None:
                    outs[i] = _reduce_to(outs[i], m[0], m[1], xp)
        return outs

    def __getattr__(self, name):
        if name.startswith("_saved_"):
            row = type(self)._row
            key = name[7:]
            if key.endswith("_sym_sizes"):
                key = key[:-10] + "_shape"
            if key in row.index:
                s = self._saved[row.index[key]] if self._saved else None
                if type(s) is SavedTensor:
                    return s.unpack(self, True)
                if isinstance(s, np.ndarray) or (key in row.inputs and s is not None):
                    return Tensor._make_fresh(np.asarray(s))
                return s
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


class Row:
    """One op: name, node class, inputs, forward, per-input derivative formulas, what they use."""

    def __init__(self, name, node_name, inputs, fwd, grads=None, args="", n_out=1, view=False,
                 broadcast=False, float_op=False, grad_all=None):
        self.name = name
        self.inputs = tuple(s.strip() for s in inputs.split(",") if s.strip())
        self.args = tuple(s.strip() for s in args.split(",") if s.strip())
        self.fwd = fwd
        self.n_out = n_out
        self.view = view
        self.broadcast = broadcast
        self.float_op = float_op
        self.formulas = tuple(grads) if grads is not None else ()
        self.all_grad = grad_all
        names = []
        uses = []
        for f in self.formulas + ((grad_all,) if grad_all else ()):
            used = f.__code__.co_varnames[1:f.__code__.co_argcount] if f else ()
            uses.append(used)
            for n in used:
                if n not in ("xp", "needs") and n not in names:
                    names.append(n)
        self.names = tuple(names)
        self.index = {n: i for i, n in enumerate(names)}
        self.sources = tuple(self._source(n) for n in names)
        self.calls = tuple(self._caller(u) if f else None for f, u in zip(self.formulas, uses))
        self.all_call = self._caller(uses[-1]) if grad_all else None
        self.uses = uses
        self.plans = {}
        self.node = type(node_name, (OpNode,), {"__slots__": (), "_row": self,
                                                "_n_out": n_out})

    def _source(self, n):
        if n in self.inputs:
            return (0, self.inputs.index(n))
        if n == "result":
            return (1, 0)
        if n.startswith("result") and n[6:].isdigit():
            return (1, int(n[6:]))
        if n in self.args:
            return (2, self.args.index(n))
        if n.endswith("_shape") and n[:-6] in self.inputs:
            return (3, self.inputs.index(n[:-6]))
        raise NameError(f"formula of {self.name} uses unknown name {n!r}")

    def _caller(self, used):
        special = {"xp": "xp", "needs": "needs"}
        params = ", ".join(special.get(n) or f"v[{self.index[n]}]" for n in used)
        return eval(f"lambda f, g, v, xp, needs: f(g{', ' if params else ''}{params})")

    def plan(self, mask):
        """Indices of the names to save when the inputs in bitmask `mask` require grad."""
        p = self.plans.get(mask)
        if p is None:
            need = set()
            if self.all_grad is not None:
                need.update(self.uses[-1])
            else:
                for i, used in enumerate(self.uses):
                    if mask >> i & 1:
                        need.update(used)
            p = self.plans[mask] = tuple(self.index[n] for n in self.names if n in need)
        return p


ROWS = {}


def defop(name, node_name, inputs, fwd, grads=None, **kw):
    row = Row(name, node_name, inputs, fwd, grads, **kw)
    ROWS[name] = row
    return row


# ================================================================================================
# Helpers used by formulas (array or Tensor, so they serve create_graph too)
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
    return xp.where(mask, g / mask.sum(), 0)


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


def _geom(t):
    """(shape, strides, offset) of a tensor in elements, relative to its storage."""
    return (tuple(t._data.shape), t.stride(), t.storage_offset())


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


_SQRT_2_OVER_PI = 2.0 / math.sqrt(math.pi)


# ================================================================================================
# THE TABLE
# ================================================================================================
R = {}

# ---- elementwise binary (broadcasting); Python scalars may stand for either side -------------
R["add"] = defop("add", "AddBackward0", "self, other", lambda a, b, alpha: a + b if alpha == 1
                 else a + alpha * b, args="alpha", broadcast=True,
                 grads=(lambda g: g,
                        lambda g, alpha: g if alpha == 1 else g * alpha))
R["sub"] = defop("sub", "SubBackward0", "self, other", lambda a, b, alpha: a - b if alpha == 1
                 else a - alpha * b, args="alpha", broadcast=True,
                 grads=(lambda g: g,
                        lambda g, alpha: -g if alpha == 1 else g * -alpha))
R["rsub"] = defop("rsub", "RsubBackward1", "self", lambda a, other, alpha: other - alpha * a
                  if alpha != 1 else other - a, args="other, alpha",
                  grads=(lambda g, alpha: -g if alpha == 1 else g * -alpha,))
R["mul"] = defop("mul", "MulBackward0", "self, other", lambda a, b: a * b, broadcast=True,
                 grads=(lambda g, other: g * other,
                        lambda g, self: g * self))
R["div"] = defop("div", "DivBackward0", "self, other", lambda a, b: a / b, broadcast=True,
                 grads=(lambda g, other: g / other,
                        lambda g, self, other: -g * self / (other * other)))
R["pow"] = defop("pow", "PowBackward0", "self", lambda a, e: a ** e, args="exponent",
                 grads=(lambda g, self, exponent: g * 0 if exponent == 0
                        else g * exponent * self ** (exponent - 1),))
R["pow_tt"] = defop("pow_tt", "PowBackward1", "self, exponent", lambda a, b: a ** b,
                    broadcast=True,
                    grads=(lambda g, self, exponent, xp: xp.where(
                               exponent == 0, 0, g * exponent * self ** (exponent - 1)),
                           lambda g, self, result, exponent, xp: xp.where(
                               (self == 0) & (exponent >= 0), 0, g * result * xp.log(self))))
R["rpow"] = defop("rpow", "PowBackward2", "exponent", lambda e, base: base ** e, args="base",
                  grads=(lambda g, result, base, xp: g * 0 if base == 0
                         else g * result * math.log(base),))
R["maximum"] = defop("maximum", "MaximumBackward0", "self, other", lambda a, b: np.maximum(a, b),
                     broadcast=True,
                     grads=(lambda g, self, other, xp: xp.where(self == other, g / 2,
                                                                xp.where(self > other, g, 0)),
                            lambda g, self, other, xp: xp.where(self == other, g / 2,
                                                                xp.where(self < other, g, 0))))
R["minimum"] = defop("minimum", "MinimumBackward0", "self, other", lambda a, b: np.minimum(a, b),
                     broadcast=True,
                     grads=(lambda g, self, other, xp: xp.where(self == other, g / 2,
                                                                xp.where(self < other, g, 0)),
                            lambda g, self, other, xp: xp.where(self == other, g / 2,
                                                                xp.where(self > other, g, 0))))
R["where"] = defop("where", "WhereBackward0", "self, other",
                   lambda a, b, c: np.where(c, a, b), args="condition", broadcast=True,
                   grads=(lambda g, condition, xp: xp.where(condition, g, 0),
                          lambda g, condition, xp: xp.where(condition, 0, g)))
R["addmm"] = defop("addmm", "AddmmBackward0", "self, mat1, mat2",
                   lambda c, a, b, beta, alpha: (c if beta == 1 else beta * c) + (
                       a @ b if alpha == 1 else alpha * (a @ b)), args="beta, alpha",
                   broadcast=True,
                   grads=(lambda g, beta: g if beta == 1 else g * beta,
                          lambda g, mat2, alpha, xp: (g @ _c(_mT(mat2), xp))
                          * alpha,
                          lambda g, mat1, alpha, xp: (_mT(mat1) @ g) * alpha))

# ---- elementwise unary ----------------------------------------------------------------------
R["neg"] = defop("neg", "NegBackward0", "self", lambda a: -a, grads=(lambda g: -g,))
R["exp"] = defop("exp", "ExpBackward0", "self", np.exp, float_op=True,
                 grads=(lambda g, result: g * result,))
R["log"] = defop("log", "LogBackward0", "self", np.log, float_op=True,
                 grads=(lambda g, self: g / self,))
R["log1p"] = defop("log1p", "Log1PBackward0", "self", np.log1p, float_op=True,
                   grads=(lambda g, self: g / (self + 1),))
R["sqrt"] = defop("sqrt", "SqrtBackward0", "self", np.sqrt, float_op=True,
                  grads=(lambda g, result: g / (2 * result),))
R["rsqrt"] = defop("rsqrt", "RsqrtBackward0", "self", lambda a: 1 / np.sqrt(a), float_op=True,
                   grads=(lambda g, result: -0.5 * g * result * result * result,))
R["reciprocal"] = defop("reciprocal", "ReciprocalBackward0", "self", lambda a: 1 / a,
                        float_op=True, grads=(lambda g, result: -g * result * result,))
R["abs"] = defop("abs", "AbsBackward0", "self", np.abs,
                 grads=(lambda g, self, xp: g * xp.sign(self),))
R["sign"] = defop("sign", "SignBackward0", "self", lambda a: np.nan_to_num(np.sign(a), nan=0.0),
                  grads=(lambda g: g * 0,))
R["sin"] = defop("sin", "SinBackward0", "self", np.sin, float_op=True,
                 grads=(lambda g, self, xp: g * xp.cos(self),))
R["cos"] = defop("cos", "CosBackward0", "self", np.cos, float_op=True,
                 grads=(lambda g, self, xp: -g * xp.sin(self),))
R["tanh"] = defop("tanh", "TanhBackward0", "self", np.tanh, float_op=True,
                  grads=(lambda g, result: g * (1 - result * result),))
R["sigmoid"] = defop("sigmoid", "SigmoidBackward0", "self",
                     lambda a: 0.5 * np.tanh(0.5 * a) + 0.5, float_op=True,
                     grads=(lambda g, result: g * result * (1 - result),))
R["relu"] = defop("relu", "ReluBackward0", "self", lambda a: np.maximum(a, 0),
                  grads=(lambda g, result: g * (result > 0),))
R["erf"] = defop("erf", "ErfBackward0", "self", backend.erf, float_op=True,
                 grads=(lambda g, self, xp: g * _SQRT_2_OVER_PI * xp.exp(-(self * self)),))
R["clamp"] = defop("clamp", "ClampBackward1", "self", lambda a, lo, hi: np.clip(a, lo, hi),
                   args="min, max",
                   grads=(lambda g, self, min, max: g * _in_range(self, min, max),))
R["clamp_min"] = defop("clamp_min", "ClampMinBackward0", "self",
                       lambda a, lo: np.maximum(a, lo), args="min",
                       grads=(lambda g, self, min: g * (self >= min),))
R["clamp_max"] = defop("clamp_max", "ClampMaxBackward0", "self",
                       lambda a, hi: np.minimum(a, hi), args="max",
                       grads=(lambda g, self, max: g * (self <= max),))
R["flip"] = defop("flip", "FlipBackward0", "self", lambda a, dims: np.flip(a, dims).copy(),
                  args="dims", grads=(lambda g, dims, xp: xp.flip(g, dims),))
R["repeat"] = defop("repeat", "RepeatBackward0", "self", lambda a, reps: np.tile(a, reps),
                    args="repeats",
                    grads=(lambda g, self_shape, repeats: _repeat_backward(g, self_shape,
                                                                           repeats),))
R["clone"] = defop("clone", "CloneBackward0", "self", lambda a: a.copy(), grads=(lambda g: g,))
R["to_copy"] = defop("to_copy", "ToCopyBackward0", "self", lambda a, dt: a.astype(dt),
                     args="dtype", grads=(lambda g, self, xp: _astype(g, _np_dtype(self), xp),))
R["masked_fill"] = defop("masked_fill", "MaskedFillBackward0", "self, value",
                         lambda a, v, mask: np.where(mask, v, a), args="mask", broadcast=True,
                         grads=(lambda g, mask, xp: xp.where(mask, 0, g),
                                lambda g, mask, xp: xp.where(mask, g, 0).sum()))
R["fill"] = defop("fill", "FillBackward2", "self", lambda a, v: np.full_like(a, v), args="value",
                  grads=(lambda g: g * 0,))
R["fill_tensor"] = defop("fill_tensor", "FillBackward3", "self, value",
                         lambda a, v: np.broadcast_to(v, a.shape).astype(a.dtype), broadcast=True,
                         grads=(lambda g: g * 0, lambda g: g.sum()))
R["zero"] = defop("zero", "ZeroBackward0", "self", lambda a: np.zeros_like(a),
                  grads=(lambda g: g * 0,))
R["copy"] = defop("copy", "CopyBackwards", "self, src",
                  lambda a, s: np.broadcast_to(s, a.shape).astype(a.dtype, copy=False),
                  broadcast=True, grads=(lambda g: g * 0, lambda g: g))
R["copy"].node.name = lambda self: "nbgrad::autograd::CopyBackwards"  # a C++ node in PyTorch

# ---- reductions ----------------------------------------------------------------------------
R["sum"] = defop("sum", "SumBackward0", "self", lambda a, dt: _sum_all(a, dt), args="dtype",
                 grads=(lambda g, self_shape, xp: _filled(g, self_shape, xp),))
R["sum_dim"] = defop("sum_dim", "SumBackward1", "self",
                     lambda a, dim, keepdim, dt: a.sum(axis=dim, keepdims=keepdim, dtype=dt),
                     args="dim, keepdim, dtype",
                     grads=(lambda g, self_shape, dim, keepdim, xp:
                            _expand_grad(g, self_shape, dim, keepdim, xp),))
R["mean"] = defop("mean", "MeanBackward0", "self", lambda a: a.mean(dtype=a.dtype),
                  grads=(lambda g, self_shape, xp: xp.broadcast_to(g / math.prod(self_shape),
                                                                   self_shape),))
R["mean_dim"] = defop("mean_dim", "MeanBackward1", "self",
                      lambda a, dim, keepdim: a.mean(axis=dim, keepdims=keepdim, dtype=a.dtype),
                      args="dim, keepdim",
                      grads=(lambda g, self_shape, dim, keepdim, xp: _expand_grad(
                          g / _count(self_shape, dim), self_shape, dim, keepdim, xp),))
R["prod"] = defop("prod", "ProdBackward0", "self", lambda a: a.prod(),
                  grads=(lambda g, self, result, xp: _prod_backward(g, self, result, None, False,
                                                                    xp),))
R["prod_dim"] = defop("prod_dim", "ProdBackward1", "self",
                      lambda a, dim, keepdim: a.prod(axis=dim, keepdims=keepdim),
                      args="dim, keepdim",
                      grads=(lambda g, self, result, dim, keepdim, xp:
                             _prod_backward(g, self, result, dim, keepdim, xp),))
R["max"] = defop("max", "MaxBackward1", "self", lambda a: a.max(),
                 grads=(lambda g, self, result, xp: _evenly(g, self, result, xp),))
R["min"] = defop("min", "MinBackward1", "self", lambda a: a.min(),
                 grads=(lambda g, self, result, xp: _evenly(g, self, result, xp),))
R["max_dim"] = defop("max_dim", "MaxBackward0", "self",
                     lambda a, dim, keepdim: _vals_idx(a, dim, keepdim, np.argmax),
                     args="dim, keepdim", n_out=2,
                     grads=(lambda g, self_shape, dim, keepdim, result1, xp:
                            _select_grad(g[0], self_shape, dim, result1, keepdim, xp),))
R["min_dim"] = defop("min_dim", "MinBackward0", "self",
                     lambda a, dim, keepdim: _vals_idx(a, dim, keepdim, np.argmin),
                     args="dim, keepdim", n_out=2,
                     grads=(lambda g, self_shape, dim, keepdim, result1, xp:
                            _select_grad(g[0], self_shape, dim, result1, keepdim, xp),))
for _n, _node, _red in (("amax", "AmaxBackward0", np.max), ("amin", "AminBackward0", np.min)):
    # ties share the gradient evenly
    R[_n] = defop(_n, _node, "self",
                  lambda a, dim, keepdim, _red=_red: _red(a, axis=dim, keepdims=keepdim),
                  args="dim, keepdim",
                  grads=(lambda g, self, result, dim, keepdim, xp: _amax_grad(
                      g, self, result, dim, keepdim, xp),))
R["var"] = defop("var", "VarBackward0", "self",
                 lambda a, dim, correction, keepdim: a.var(axis=dim, ddof=correction,
                                                           keepdims=keepdim),
                 args="dim, correction, keepdim",
                 grads=(lambda g, self, dim, correction, keepdim, xp: _var_grad(
                     g, self, dim, correction, keepdim, xp),))
R["std"] = defop("std", "StdBackward0", "self",
                 lambda a, dim, correction, keepdim: a.std(axis=dim, ddof=correction,
                                                           keepdims=keepdim),
                 args="dim, correction, keepdim",
                 grads=(lambda g, self, result, dim, correction, keepdim, xp: _std_grad(
                     g, self, result, dim, correction, keepdim, xp),))
R["norm"] = defop("norm", "LinalgVectorNormBackward0", "self",
                  lambda a, p, dim, keepdim: _vector_norm(a, p, dim, keepdim),
                  args="p, dim, keepdim",
                  grads=(lambda g, self, result, p, dim, keepdim, xp: _norm_backward(
                      g, self, result, p, dim, keepdim, xp),))
R["logsumexp"] = defop("logsumexp", "LogsumexpBackward0", "self",
                       lambda a, dim, keepdim: _logsumexp(a, dim, keepdim), args="dim, keepdim",
                       float_op=True,
                       grads=(lambda g, self, result, dim, keepdim, xp: _logsumexp_grad(
                           g, self, result, dim, keepdim, xp),))
R["softmax"] = defop("softmax", "SoftmaxBackward0", "self", lambda a, dim: _softmax(a, dim),
                     args="dim", float_op=True,
                     grads=(lambda g, result, dim: result * (
                         g - (g * result).sum(axis=dim, keepdims=True)),))
R["log_softmax"] = defop("log_softmax", "LogSoftmaxBackward0", "self",
                         lambda a, dim: a - _logsumexp(a, dim, True), args="dim", float_op=True,
                         grads=(lambda g, result, dim, xp: g - xp.exp(result) * g.sum(
                             axis=dim, keepdims=True),))
R["cumsum"] = defop("cumsum", "CumsumBackward0", "self", lambda a, dim: np.cumsum(a, axis=dim),
                    args="dim",
                    grads=(lambda g, dim, xp: xp.flip(xp.cumsum(xp.flip(g, (dim,)), axis=dim),
                                                      (dim,)),))

# ---- linear algebra ---------------------------------------------------------------------------
R["mm"] = defop("mm", "MmBackward0", "self, mat2", lambda a, b: a @ b,
                grads=(_mm_grads(0), _mm_grads(1)))
R["bmm"] = defop("bmm", "BmmBackward0", "self, mat2", lambda a, b: a @ b,
                 grads=(_mm_grads(0), _mm_grads(1)))
R["dot"] = defop("dot", "DotBackward0", "self, other", lambda a, b: a @ b,
                 grads=(lambda g, other: g * other, lambda g, self: g * self))
R["mv"] = defop("mv", "MvBackward0", "self, other", lambda a, b: a @ b,
                grads=(lambda g, other: g[:, None] * other, lambda g, self, xp:
                       _mT(self) @ g))

# ---- convolution and pooling (array kernels in _conv.py; Ctx holds their im2col / argmax) -----
R["convolution"] = defop("convolution", "ConvolutionBackward0", "input, weight, bias",
                         lambda x, w, b, ctx: None, args="ctx",
                         grad_all=lambda g, input, weight, ctx, needs, xp: _conv_grads(
                             g, ctx, needs, xp))
R["max_pool2d"] = defop("max_pool2d", "MaxPool2DWithIndicesBackward0", "self",
                        lambda x, ctx: None, args="ctx",
                        grads=(lambda g, self, ctx, xp: _pool_grad(g, ctx, xp),))

# ---- joining (variadic) ---------------------------------------------------------------------
R["cat"] = defop("cat", "CatBackward0", "", lambda *a: None, args="sizes, dim, dtypes",
                 grad_all=lambda g, sizes, dim, dtypes, xp: _cat_grads(g, sizes, dim, dtypes, xp))
R["stack"] = defop("stack", "StackBackward0", "", lambda *a: None, args="n, dim",
                   grad_all=lambda g, n, dim, xp: [xp.take(g, i, axis=dim) for i in range(n)])

# ---- views ---------------------------------------------------------------------------------
R["view"] = defop("view", "ViewBackward0", "self", lambda a, shape: _view_reshape(a, shape),
                  args="shape", view=True,
                  grads=(lambda g, self_shape: g.reshape(self_shape),))
R["unsafe_view"] = defop("unsafe_view", "UnsafeViewBackward0", "self",
                         lambda a, shape: a.reshape(shape), args="shape",
                         grads=(lambda g, self_shape: g.reshape(self_shape),))
R["alias"] = defop("alias", "AliasBackward0", "self", lambda a: a.view(), view=True,
                   grads=(lambda g: g,))
R["transpose"] = defop("transpose", "TransposeBackward0", "self",
                       lambda a, d0, d1: a.swapaxes(d0, d1), args="dim0, dim1", view=True,
                       grads=(lambda g, dim0, dim1: g.swapaxes(dim0, dim1),))
R["t"] = defop("t", "TBackward0", "self", lambda a: a.T, view=True, grads=(lambda g: g.T,))
R["permute"] = defop("permute", "PermuteBackward0", "self", lambda a, dims: a.transpose(dims),
                     args="dims", view=True,
                     grads=(lambda g, dims, xp: _unpermute(g, dims, xp),))
R["expand"] = defop("expand", "ExpandBackward0", "self",
                    lambda a, shape: np.broadcast_to(a, shape), args="shape", view=True,
                    grads=(lambda g, self_shape, xp: _reduce_to(g, self_shape, None, xp),))
R["squeeze"] = defop("squeeze", "SqueezeBackward0", "self", lambda a: a.squeeze(), view=True,
                     grads=(lambda g, self_shape: g.reshape(self_shape),))
for _n, _node in (("squeeze_dims", "SqueezeBackward2"), ("squeeze_dims_", "SqueezeBackward4")):
    # squeeze((d, ...)) is SqueezeBackward2; matmul's internal squeeze shows as SqueezeBackward4
    R[_n] = defop(_n, _node, "self",
                  lambda a, dims: a.squeeze(tuple(d for d in dims if a.shape[d] == 1)),
                  args="dims", view=True, grads=(lambda g, self_shape: g.reshape(self_shape),))
R["squeeze_dim"] = defop("squeeze_dim", "SqueezeBackward1", "self",
                         lambda a, dim: a.squeeze(dim) if a.shape[dim] == 1 else a.view(),
                         args="dim", view=True,
                         grads=(lambda g, self_shape: g.reshape(self_shape),))
R["unsqueeze"] = defop("unsqueeze", "UnsqueezeBackward0", "self",
                       lambda a, dim: np.expand_dims(a, dim), args="dim", view=True,
                       grads=(lambda g, self_shape: g.reshape(self_shape),))
R["slice"] = defop("slice", "SliceBackward0", "self", lambda a, index: a[index], args="index",
                   view=True, grads=(lambda g, self_shape, index, xp: _put(g, self_shape, index,
                                                                           xp),))
R["select"] = defop("select", "SelectBackward0", "self", lambda a, index: a[index],
                    args="index", view=True,
                    grads=(lambda g, self_shape, index, xp: _put(g, self_shape, index, xp),))
R["as_strided"] = defop("as_strided", "AsStridedBackward0", "self",
                        lambda a, base_geom, view_geom: None, args="base_geom, view_geom",
                        view=True, grads=(lambda g, base_geom, view_geom, xp:
                                          _as_strided_backward(g, base_geom, view_geom, xp),))
R["diagonal"] = defop("diagonal", "DiagonalBackward0", "self",
                      lambda a, base_geom, view_geom: None, args="base_geom, view_geom",
                      view=True, grads=(lambda g, base_geom, view_geom, xp:
                                        _as_strided_backward(g, base_geom, view_geom, xp),))
R["unfold"] = defop("unfold", "UnfoldBackward0", "self", lambda a, dim, size, step: None,
                    args="dim, size, step", view=True,
                    grads=(lambda g, self_shape, dim, size, step, xp: _unfold_backward(
                        g, self_shape, dim, size, step, xp),))
R["unbind"] = defop("unbind", "UnbindBackward0", "self", lambda a, dim: None, args="dim, n",
                    view=True, n_out=-1,
                    grad_all=lambda g, self_shape, dim, xp: [xp.stack(
                        _zeros_for(g, [tuple(s for i, s in enumerate(self_shape) if i != dim)]
                                   * len(g), _first_dtype(g), xp), axis=dim)])
R["split"] = defop("split", "SplitBackward0", "self", lambda a, sizes, dim: None,
                   args="sizes, dim", view=True, n_out=-1,
                   grad_all=lambda g, self_shape, sizes, dim, xp: [xp.concatenate(_zeros_for(
                       g, [tuple(n if i == dim else s for i, s in enumerate(self_shape))
                           for n in sizes], _first_dtype(g), xp), axis=dim)])
R["split_sizes"] = defop("split_sizes", "SplitWithSizesBackward0", "self",
                         lambda a, sizes, dim: None, args="sizes, dim", view=True, n_out=-1,
                         grad_all=R["split"].all_grad)

# ---- indexing with tensors -------------------------------------------------------------------
R["index"] = defop("index", "IndexBackward0", "self", lambda a, index: a[index], args="index",
                   grads=(lambda g, self_shape, index, xp: _index_backward(g, self_shape, index,
                                                                           xp),))
R["index_put"] = defop("index_put", "IndexPutBackward0", "self, values",
                       lambda a, v, index, accumulate: _index_put(a, v, index, accumulate),
                       args="index, accumulate",
                       grads=(lambda g, index, accumulate, xp: g if accumulate
                              else _zero_at(g, index, xp),
                              lambda g, index, values_shape, xp: _reduce_to(
                                  g[index], values_shape, None, xp)))
R["index_add"] = defop("index_add", "IndexAddBackward0", "self, source",
                       lambda a, s, dim, index: _index_add(a, s, dim, index), args="dim, index",
                       grads=(lambda g: g,
                              lambda g, dim, index, source_shape, xp: xp.take(
                                  g, index, axis=dim).reshape(source_shape)))
R["index_select"] = defop("index_select", "IndexSelectBackward0", "self",
                          lambda a, dim, index: np.take(a, index, axis=dim), args="dim, index",
                          grads=(lambda g, self_shape, dim, index, xp: _index_select_backward(
                              g, self_shape, dim, index, xp),))
R["gather"] = defop("gather", "GatherBackward0", "self",
                    lambda a, dim, index: np.take_along_axis(a, index, axis=dim),
                    args="dim, index",
                    grads=(lambda g, self_shape, dim, index, xp: _scatter_add(
                        xp.zeros(self_shape, _np_dtype(g)), dim, index, g, xp),))


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
    return xp.where(mask, gk / mask.sum(axis=dim, keepdims=True), 0)


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


def _softmax(a, dim):
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    e /= e.sum(axis=dim, keepdims=True)
    return e


def _view_reshape(a, shape):
    try:
        return np.reshape(a, shape, copy=False)
    except ValueError as e:
        raise _ViewImpossible(str(e)) from None


class _ViewImpossible(Exception):
    pass


def _index_put(a, v, index, accumulate):
    out = a.copy()
    if accumulate:
        np.add.at(out, index, v)
    else:
        out[index] = v
    return out


def _zero_at(g, index, xp):
    if xp is _TX:
        return g.index_put(index, _TX.zeros((), _np_dtype(g)), accumulate=False)
    z = g.copy()
    z[index] = 0
    return z


class Ctx:
    """Non-tensor state a kernel keeps for backward (an im2col matrix, argmax positions);
    released with the node's saved tensors."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def release(self):
        self.value = None

    def get(self):
        if self.value is None:
            from .autograd.graph import backward_twice_error
            raise backward_twice_error()
        return self.value


RELEASABLE.add(Ctx)


def _no_double(xp, name):
    if xp is _TX:
        raise RuntimeError(f"nbgrad: double backward through {name} is not supported yet")


def _conv_grads(g, ctx, needs, xp):
    _no_double(xp, "ConvolutionBackward0")
    return _conv.conv2d_backward(g, ctx.get(), needs)  # one pass for (input, weight, bias)


def _pool_grad(g, ctx, xp):
    _no_double(xp, "MaxPool2DWithIndicesBackward0")
    return _conv.max_pool2d_backward(g, ctx.get())


def _repeat_backward(g, shape, repeats):
    """Sum the tiles: (r0*n0, r1*n1, ...) -> (r0, n0, r1, n1, ...) summed over the r axes."""
    lead = len(repeats) - len(shape)
    full = (1,) * lead + tuple(shape)
    split = []
    for r, n in zip(repeats, full):
        split += [r, n]
    g = g.reshape(tuple(split)).sum(axis=tuple(range(0, 2 * len(full), 2)))
    return g.reshape(shape)


def _index_add(a, s, dim, index):
    out = a.copy()
    idx = [slice(None)] * a.ndim
    idx[dim] = index
    np.add.at(out, tuple(idx), s)
    return out


def _index_select_backward(g, self_shape, dim, index, xp):
    z = xp.zeros(self_shape, _np_dtype(g))
    if xp is _TX:
        return z.index_add(dim, Tensor._make_fresh(index), g)
    idx = [slice(None)] * len(self_shape)
    idx[dim] = index
    xp.add.at(z, tuple(idx), g)
    return z


# ================================================================================================
# Applying a row: plain, view, in-place
# ================================================================================================
_fresh = Tensor._make_fresh
_ND = np.ndarray


def _arr(x):
    """numpy returns scalars for 0-d results; tensors always hold arrays."""
    if type(x) is _ND:
        return x
    if isinstance(x, (np.generic, int, float, bool)):
        return np.asarray(x)
    return x


def _edge(x):
    """(node, input_nr) through which a gradient reaches `x` (None for constants)."""
    if not isinstance(x, Tensor) or not x._requires_grad:
        return _NONE_EDGE
    fn = x._grad_fn if x._view is None else x.grad_fn
    if fn is not None:
        return (fn, x._output_nr)
    e = x._extra
    if e is not None and e.accum is not None:
        acc = e.accum()
        if acc is not None:
            return (acc, 0)
    return (x._grad_accumulator(), 0)


def _make_node(row, inputs, args, mask, outs, meta=None, edges=None, save_inputs=None, n_out=0):
    """Create the node of `row` for `inputs`, saving what the formulas of the inputs in `mask`
    need. `outs` already carry their output_nr."""
    cls = row.node if row.n_out != -1 else _node_for(row, n_out)
    node = _new(cls)
    node._next = edges if edges is not None else tuple([_edge(x) for x in inputs])
    node._where = _capture()
    node._hooks = node._prehooks = node._extra = None
    node._meta = meta
    _NODES[0] = node._seq = _NODES[0] + 1  # the sequence number orders the backward
    plan = row.plans.get(mask)
    if plan is None:
        plan = row.plan(mask)
    if plan:
        node._saved = _save(row, plan, save_inputs if save_inputs is not None else inputs,
                            args, outs)
    else:
        node._saved = None
    if _ANOMALY.enabled:
        anomaly.record(node)
    return node


def _save(row, plan, src, args, outs):
    names = row.names
    sources = row.sources
    saved = [None] * len(names)
    for j in plan:
        kind, k = sources[j]
        if kind == 0:
            x = src[k]
            saved[j] = SavedTensor(names[j], x) if isinstance(x, Tensor) else x
        elif kind == 1:
            saved[j] = SavedTensor(names[j], outs[k], True)
        elif kind == 2:
            saved[j] = args[k]
        else:
            saved[j] = tuple(src[k]._data.shape)
    return saved


_ANOMALY = anomaly.STATE


def _node_for(row, n):
    cache = row.__dict__.setdefault("_by_n", {})
    cls = cache.get(n)
    if cls is None:
        cls = cache[n] = type(row.node.__name__, (row.node,), {"__slots__": (), "_n_out": n})
    return cls


def _record(row, outs, inputs, args, mask, meta=None):
    for nr, o in enumerate(outs):
        o._output_nr = nr
        o._requires_grad = True
    node = _make_node(row, inputs, args, mask, outs, meta, n_out=len(outs))
    for o in outs:
        o._grad_fn = node
    return node


def _mask(inputs):
    mask = 0
    bit = 1
    for x in inputs:
        if isinstance(x, Tensor) and x._requires_grad:
            mask |= bit
        bit <<= 1
    return mask


def _meta_for(inputs, out):
    """Per input, (shape, dtype) to reduce and cast its gradient to, or None when it matches.

    When the inputs' dtypes differ, every input records its dtype: a formula mixing them (g *
    other) may come out in the wider one."""
    meta = None
    shape, dt = out.shape, out.dtype
    mixed = len({x._data.dtype for x in inputs if isinstance(x, Tensor)}) > 1
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            d = x._data
            if d.shape != shape or d.dtype != dt or mixed:
                if meta is None:
                    meta = [None] * len(inputs)
                meta[i] = (tuple(d.shape), d.dtype if (d.dtype != dt or mixed) else None)
    return meta


def _broadcast_error(sa, sb):
    n = max(len(sa), len(sb))
    for i in range(1, n + 1):
        x = sa[-i] if i <= len(sa) else 1
        y = sb[-i] if i <= len(sb) else 1
        if x != y and x != 1 and y != 1:
            return RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                                f"at non-singleton dimension {n - i}")
    return RuntimeError(f"shapes {list(sa)} and {list(sb)} cannot be broadcast together")


def _device_error(a, b):
    da, db = backend.device_of(a), backend.device_of(b)
    return RuntimeError("Expected all tensors to be on the same device, but found at least two "
                        f"devices, {da if da.type == 'cuda' else db} and cpu!")


def _scalar(b):
    t = type(b)
    if t is float or t is int or t is bool:
        return b
    if isinstance(b, np.generic):
        return b.item()
    if isinstance(b, (int, float)):
        return b
    raise TypeError(f"unsupported operand type: expected a Tensor or a Python number, got "
                    f"{t.__name__}")


def _coerce(ad, bd):
    """Apply PyTorch's type promotion before handing two operands to numpy (NEP 50 differs for
    int-with-float and for 0-d tensors)."""
    if isinstance(bd, (_ND, np.generic)) or hasattr(bd, "__cuda_array_interface__"):
        if isinstance(bd, np.generic):
            return _coerce(ad, bd.item())
        if type(ad) is not type(bd):
            raise _device_error(ad, bd)
        if ad.dtype != bd.dtype:
            rt = dtypes.result_type(ad, bd)
            if ad.dtype != rt:
                ad = ad.astype(rt)
            if bd.dtype != rt:
                bd = bd.astype(rt)
        return ad, bd
    bd = _scalar(bd)
    k = ad.dtype.kind
    if type(bd) is float and k != "f":
        ad = ad.astype(dtypes.default_np())
    elif type(bd) is int and k == "b":
        ad = ad.astype(np.int64)
    return ad, bd


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


_getframe = sys._getframe
_LIB = provenance.LIB_FILES
_PROV = provenance.ENABLED


def _record1(row, r, inputs, args, mask, meta, edges):
    """_record for one output, inlined for the hot path (called from an op, called from a
    Tensor method or public function)."""
    r._requires_grad = True
    node = _new(row.node)
    node._next = edges
    if _PROV[0]:  # provenance.capture(), inlined: first frame outside nbgrad
        f = _getframe(2)
        while f is not None and f.f_code.co_filename in _LIB:
            f = f.f_back
        node._where = None if f is None else (f.f_code, f.f_lasti)
    else:
        node._where = None
    node._hooks = node._prehooks = node._extra = None
    node._meta = meta
    _NODES[0] = node._seq = _NODES[0] + 1  # the sequence number orders the backward
    plan = row.plans.get(mask)
    if plan is None:
        plan = row.plan(mask)
    node._saved = _save(row, plan, inputs, args, (r,)) if plan else None
    if _ANOMALY.enabled:
        anomaly.record(node)
    r._grad_fn = node


def binary_op(row, args=()):
    """The function applying a broadcasting binary `row` to a Tensor `a` and a Tensor or Python
    number `b` (a closure per row, so Tensor operators cost one call)."""
    def op(a, b):
        ad = a._data
        if isinstance(b, Tensor):
            bd = b._data
            if ad.dtype is not bd.dtype:
                ad, bd = _coerce(ad, bd)
            try:
                out = row.fwd(ad, bd, *args)
            except ValueError:
                raise _broadcast_error(ad.shape, bd.shape) from None
            if type(out) is not _ND:
                out = _arr(out)
            r = _fresh(out)
            if _GRAD.enabled:
                ra, rb = a._requires_grad, b._requires_grad
                if ra or rb:
                    meta = None
                    if ad.shape != out.shape or bd.shape != out.shape or a._data.dtype is not \
                            out.dtype or b._data.dtype is not out.dtype:
                        meta = _meta_for((a, b), out)
                    _record1(row, r, (a, b), args, ra | (rb << 1), meta,
                             (_edge(a) if ra else _NONE_EDGE, _edge(b) if rb else _NONE_EDGE))
            return r
        tb = type(b)
        dt = ad.dtype
        if tb is float:
            if dt is not _F32 and dt is not _F64 and dt.kind != "f":
                ad = ad.astype(dtypes.default_np())
        elif tb is not int or dt.kind == "b":
            if not isinstance(b, (int, float, np.generic)):
                return NotImplemented  # Python then says "unsupported operand type(s)", as torch
            ad, b = _coerce(ad, b)
        out = row.fwd(ad, b, *args)
        if type(out) is not _ND:
            out = _arr(out)
        r = _fresh(out)
        if a._requires_grad and _GRAD.enabled:
            _record1(row, r, (a, b), args, 1,
                     _meta_for((a,), out) if a._data.dtype is not out.dtype else None,
                     (_edge(a), _NONE_EDGE))
        return r
    return op


_BINARY = {}


def _binary(row, a, b, args=()):
    """Apply a broadcasting binary row (see binary_op)."""
    key = (row.name, args)
    op = _BINARY.get(key)
    if op is None:
        op = _BINARY[key] = binary_op(row, args)
    return op(a, b)


def _unary(row, x, *args):
    """Apply a one-input row."""
    d = x._data
    if row.float_op and d.dtype.kind != "f":
        d = d.astype(dtypes.default_np())
    out = row.fwd(d, *args)
    if type(out) is not _ND:
        out = _arr(out)
    r = _fresh(out)
    if x._requires_grad and _GRAD.enabled:
        _record1(row, r, (x,), args, 1, None, (_edge(x),))
    return r


def _apply(row, inputs, args=(), out=None, meta_inputs=False):
    """Apply any row to Tensors (and numbers): the general path."""
    if out is None:
        out = row.fwd(*[x._data if isinstance(x, Tensor) else x for x in inputs], *args)
    out = _arr(out)
    r = _fresh(out)
    if _GRAD.enabled:
        mask = _mask(inputs)
        if mask:
            _record(row, (r,), inputs, args, mask, _meta_for(inputs, out) if meta_inputs else None)
    return r


def _view_of(x, out, creation=DEFAULT, creator=None):
    """A tensor viewing `x`'s storage through the array `out`."""
    r = _new(Tensor)
    r._data = out
    r._storage = x._storage
    r._grad_fn = None
    r._output_nr = 0
    r._requires_grad = False
    r._grad = r._extra = None
    base = x._view.base if x._view is not None else x
    r._view = _ViewMeta(base, x._storage.version, creation, creator)
    return r


def _view_op(row, x, args=(), out=None):
    """Apply a view row: the output shares `x`'s storage and version counter."""
    if out is None:
        out = row.fwd(x._data, *args)
    grad = _GRAD.enabled
    r = _view_of(x, out, DEFAULT if grad else NO_GRAD_MODE)
    if x._requires_grad and grad:
        _record(row, (r,), (x,), args, 1)
    return r


def _multi_view_op(row, x, outs, args):
    """unbind / split / chunk: several views, from one node; none may be modified in place."""
    grad = _GRAD.enabled
    creator = _strip(row.node.__name__)
    rs = tuple(_view_of(x, o, MULTI_OUTPUT if grad else NO_GRAD_MODE, creator) for o in outs)
    if x._requires_grad and grad:
        _record(row, rs, (x,), args, 1)
    return rs


def _strip(name):
    return name[:-len("Backward0")] if name.endswith("Backward0") else name


def make_as_strided_node(base, view):
    """AsStridedBackward0 from `view` to `base`'s current grad_fn (regenerated view grad_fn)."""
    row = R["as_strided"]
    return _make_node(row, (base,), (_geom(base), _geom(view)), 1, ())


# ---- in-place ----------------------------------------------------------------------------------
_LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."
_VIEW_LEAF_INPLACE = ("a view of a leaf Variable that requires grad is being used in an in-place "
                      "operation.")
_NO_GRAD_VIEW = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
    "code by moving both the view and the inplace either both inside the no_grad block (if you "
    "don't want the inplace to be tracked) or both outside (if you want the inplace to be "
    "tracked).")


def _inplace_error(msg, kind, t, op_name):
    err = RuntimeError(msg)
    err.nbgrad_context = {"kind": kind, "op": op_name, "shape": tuple(t._data.shape),
                          "where": provenance.Location.of(provenance.capture())}
    return err


def check_inplace(t, op_name="inplace"):
    """Raise PyTorch's error when modifying `t` in place is forbidden in grad mode."""
    __tracebackhide__ = True
    v = t._view
    if v is None:
        if t._requires_grad and t._grad_fn is None:
            raise _inplace_error(_LEAF_INPLACE, "leaf_inplace", t, op_name)
        return
    base = v.base
    if v.creation == MULTI_OUTPUT and t._requires_grad:
        raise _inplace_error(
            f"Output {t._output_nr} of {v.creator} is a view and is being modified inplace. This "
            "view is the output of a function that returns multiple views. Such functions do not "
            "allow the output views to be modified inplace. You should replace the inplace "
            "operation by an out-of-place one.", "multi_output_view_inplace", t, op_name)
    if v.creation == NO_GRAD_MODE and base._requires_grad:
        raise _inplace_error(_NO_GRAD_VIEW, "no_grad_view_inplace", t, op_name)
    if base._requires_grad and base._grad_fn is None:
        raise _inplace_error(_VIEW_LEAF_INPLACE, "view_of_leaf_inplace", t, op_name)


def _check_overlap(d, s):
    """PyTorch refuses an in-place op whose operand partly overlaps the written-to tensor."""
    if (d.shape == s.shape and d.strides == s.strides and
            backend.data_ptr(d) == backend.data_ptr(s)):
        return  # the very same elements: fine (x.add_(x))
    if np.shares_memory(d, s, max_work=1000):
        raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                           "written-to tensor refer to a single memory location. Please clone() "
                           "the tensor before performing the operation.")


def _np_name(dt):
    return {"f": "Float", "i": "Long", "b": "Bool", "u": "Byte"}.get(dt.kind, str(dt))


def _inplace(row, t, others, args, op_name, broadcast_meta=False):
    """Apply `row` to (t, *others) and write the result into t: bump its version by one and, in
    grad mode, rebase its history (CopySlices on the base when t is a view)."""
    __tracebackhide__ = True
    inputs = (t,) + others
    mask = 0
    edges = self_copy = None
    if _GRAD.enabled:
        check_inplace(t, op_name)
        mask = _mask(inputs)
        if mask:
            edges = tuple([_edge(x) for x in inputs])
            plan = row.plan(mask)
            if any(row.sources[j] == (0, 0) for j in plan):  # backward needs the old value
                old = t._data.copy()
                self_copy = Tensor._make(old, Storage(old), edges[0][0] if not isinstance(
                    edges[0][0], _AccumulateGrad) else None, edges[0][1], t._requires_grad)
    d = t._data
    for x in others:
        if isinstance(x, Tensor) and x._storage is t._storage and x._data is not d:
            _check_overlap(d, x._data)
    arrays = [d] + [x._data if isinstance(x, Tensor) else x for x in others]
    if len(arrays) == 2 and row.broadcast:
        a0, a1 = _coerce(d, arrays[1])
        arrays = [a0, a1]
    try:
        res = row.fwd(*arrays, *args)
    except ValueError:
        raise _broadcast_error(d.shape, getattr(arrays[-1], "shape", ())) from None
    res = _arr(res)
    if res.shape != d.shape:
        raise RuntimeError(f"output with shape {list(d.shape)} doesn't match the broadcast shape "
                           f"{list(res.shape)}")
    if res.dtype != d.dtype and not np.can_cast(res.dtype, d.dtype, "same_kind"):
        raise RuntimeError(f"result type {_np_name(res.dtype)} can't be cast to the desired "
                           f"output type {_np_name(d.dtype)}")
    try:
        d[...] = res
    except ValueError:  # a read-only (expanded / broadcast) view
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the tensor "
                           "before performing the operation.") from None
    t._storage.bump(op_name)
    if mask:
        meta = _meta_for(inputs, d) if row.broadcast else None
        _rebase(row, t, inputs, args, mask, edges, self_copy, meta)
    return t


from .autograd.graph import AccumulateGrad as _AccumulateGrad  # noqa: E402


def _rebase(row, t, inputs, args, mask, edges, self_copy, meta):
    save_inputs = inputs if self_copy is None else (self_copy,) + inputs[1:]
    t._requires_grad = True
    t._output_nr = 0
    v = t._view
    if v is None:
        t._grad_fn = node = _make_node(row, inputs, args, mask, (t,), meta, edges, save_inputs)
        _saved_before_write(node, t)
        _move_retain_grad(t)
        return
    base = v.base
    base_edge = _edge(base)
    fn = _make_node(row, inputs, args, mask, (t,), meta, edges, save_inputs)
    _saved_before_write(fn, t)
    cs = CopySlices(base_edge, fn, _geom(base), _geom(t))
    base._grad_fn = cs
    base._output_nr = 0
    base._requires_grad = True
    t._grad_fn = make_as_strided_node(base, t)
    v.version = t._storage.version
    _move_retain_grad(t)


def _saved_before_write(node, t):
    """An operand of the in-place op that is (a view of) its target was saved after the write:
    it holds the new values, so mark it as saved one version earlier — backward then refuses,
    as PyTorch does for y.mul_(y), instead of computing a wrong gradient."""
    for s in node._saved or ():
        if type(s) is SavedTensor and not s.is_output and s._tensor is not None and \
                s._storage is t._storage and s.saved_version == t._storage.version:
            s.saved_version -= 1


def _move_retain_grad(t):
    """retain_grad's hook follows the tensor to its new grad_fn (PyTorch moves it too)."""
    e = t._extra
    if e is not None and e.retains_grad:
        e.retains_grad = False
        t.retain_grad()


class CopySlices(Node):
    """Base's grad_fn after an in-place op on one of its views: runs the op's node on the view's
    slice of the gradient, and passes the rest of the base's gradient through."""

    __slots__ = ("fn", "_base_geom", "_view_geom")

    def __init__(self, base_edge, fn, base_geom, view_geom):
        Node.__init__(self, (base_edge,) + tuple(fn._next[1:]))
        self._saved = fn._saved  # what backward will unpack (released through fn)
        self.fn = fn
        self._base_geom = base_geom
        self._view_geom = view_geom

    def name(self):
        return "nbgrad::autograd::CopySlices"  # PyTorch: torch::autograd::CopySlices

    def _saved_tensors(self):
        return self.fn._saved_tensors()

    def _release(self):
        self.fn._release()

    def _backward(self, g, create_graph):
        if create_graph:
            raise RuntimeError("nbgrad: double backward through CopySlices is not supported yet")
        xp = _get_xp(g)
        bshape, bstrides, boff = self._base_geom
        vshape, vstrides, voff = self._view_geom
        end = max(boff + sum((n - 1) * s for n, s in zip(bshape, bstrides)) + 1,
                  voff + sum((n - 1) * s for n, s in zip(vshape, vstrides)) + 1)
        buf = xp.zeros(end, g.dtype)
        base_view = backend.as_strided(buf, bshape, bstrides, boff)
        base_view[...] = g
        gslice = backend.as_strided(buf, vshape, vstrides, voff)
        res = self.fn._backward(gslice.copy(), False)
        gslice[...] = 0 if res[0] is None else res[0]
        return [base_view.copy()] + list(res[1:])


# ================================================================================================
# create_graph: the numpy functions formulas use, on Tensors
# ================================================================================================
class _TX:
    """Stands in for numpy inside formulas when the backward itself is recorded (create_graph)."""

    @staticmethod
    def where(c, a, b):
        from .functions import where
        return where(c, a, b)

    @staticmethod
    def sum(x, axis=None, keepdims=False):
        return x.sum(dim=axis, keepdim=keepdims)

    @staticmethod
    def broadcast_to(x, shape):
        return x.expand(*shape) if isinstance(x, Tensor) else x

    @staticmethod
    def flip(x, dims):
        from .functions import flip
        return flip(x, dims)

    @staticmethod
    def cumsum(x, axis):
        return x.cumsum(axis)

    @staticmethod
    def take(x, i, axis):
        return x.select(axis, i)

    @staticmethod
    def stack(xs, axis):
        from .functions import stack
        return stack(xs, axis)

    @staticmethod
    def concatenate(xs, axis):
        from .functions import cat
        return cat(xs, axis)

    @staticmethod
    def zeros(shape, dt):
        from .creation import zeros
        return zeros(shape, dtype=dtypes.from_np(dt) if not isinstance(dt, dtypes.dtype) else dt)

    @staticmethod
    def expand_dims(x, dim):
        return x.unsqueeze(dim)

    @staticmethod
    def put_along_axis(z, idx, g, axis):
        raise RuntimeError("nbgrad: double backward through max/min with dim is not supported yet")


for _name in ("exp", "log", "sign", "cos", "sin", "abs"):  # xp.exp(t) -> t.exp(), ...
    setattr(_TX, _name, staticmethod(operator.methodcaller(_name)))
