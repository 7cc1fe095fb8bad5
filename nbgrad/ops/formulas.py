"""The formula namespace `xp` every derivative formula runs on (the formulas longer than a line
are derivatives.py's).

One formula path for every order (as HIPS autograd's `anp`): a formula is written once against
`xp`, which is `ArrayFormulas(numpy)` (or cupy) when backward runs on arrays, and `TENSORS` when
the backward itself is recorded (create_graph), so the same formula gives higher-order gradients.
`xp` offers numpy's functions (where, exp, sum(axis=, keepdims=), ...) and the few operations
whose array and Tensor spellings differ (scatter writes, casts, kernel backwards): each of those
is a method written twice below, side by side, never an `if` inside a formula.

Why not gradients that are always Tensors (PyTorch, tinygrad)? Tensor gradients cost a third
more per backward node on the 10-op chain (benchmarks/README.md, "Array gradients on the first
order"). So arrays on the first order, Tensors only under create_graph; one formula serves both.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import backend, dtypes
from ..autograd.apply import apply as _apply
from ..autograd.record import positions
from ..tensor import Tensor, fresh_zeros
from . import kernels
from .derivatives import (_along, _array_roll, _array_scatter, _array_zero_along, _expand_grad,
                          _raw, _scatter_reduce_prod, wide_scan)


# The op table, name -> Row: registry.py's ROWS, filled by its `op` (the dict lives here so that
# the few Tensor formulas with no Tensor method, div_scalar, apply their row)
ROWS = {}


# ------------------------------------------------------------------------------------------------
# The namespace over arrays (first order: numpy, or cupy on the GPU)
# ------------------------------------------------------------------------------------------------
class ArrayFormulas:
    """`xp` for arrays of one array module: the module's functions (where, exp, log, stack, ...),
    plus the helpers below. The module's public names are copied in once, at construction: a
    class with `__getattr__` loses CPython's specialized attribute loads, and every formula reads
    `xp.<name>`."""

    def __init__(self, module):
        self.m = module
        own = type(self)
        for name, value in list(vars(module).items()):  # (not dir: it would import numpy's lazy
            if not name.startswith("_") and not hasattr(own, name):  # submodules) the helpers win
                self.__dict__[name] = value

    @staticmethod
    def dtype(x):
        return x.dtype

    @staticmethod
    def sum(x, axis=None, keepdims=False):
        """The array's own sum: np.sum's Python wrapper costs ~1 us per call (bias gradients)."""
        return x.sum(axis=axis, keepdims=keepdims)

    @staticmethod
    def astype(x, dt):
        return x.astype(dt)

    def sign(self, x):
        """PyTorch's sgn, which its formulas read (abs's, the norms', l1's): 0 at NaN (the
        module's sign: NaN)."""
        s = self.m.sign(x)
        if s.dtype.kind == "f" and self.m.isnan(s).any():
            s = self.m.nan_to_num(s, nan=0.0)
        return s

    def div_rounded(self, a, b, mode):
        """torch's a.div(b, rounding_mode=mode) ("floor" or "trunc")."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.m.floor_divide(a, b) if mode == "floor" else self.m.trunc(a / b)

    def flip(self, x, dims):
        """A flipped copy, as PyTorch's flip makes (numpy's is a view with negative strides:
        as a gradient it would come out a view, and .grad a copy of it)."""
        return self.m.flip(x, dims).copy()

    def broadcast_to(self, g, shape):
        """`g` expanded to `shape`: a view of it, as PyTorch's expand. A 0-d numpy g (sum's
        gradient) is spread by the ndarray constructor (a third of np.broadcast_to's cost):
        writable, as an expand is (writes that overlap are refused before they happen)."""
        if type(g) is np.ndarray and g.ndim == 0 and g.base is None:
            return np.ndarray(shape, g.dtype, g, 0, (0,) * len(shape))
        return self.m.broadcast_to(g, shape)

    @staticmethod
    def permute(x, dims):
        return x.transpose(dims)

    def contiguous(self, b, rows=None):
        """The right operand of a matrix product with ``rows`` rows, C-contiguous where that pays
        (one BLAS thread, this machine): the product on a transposed operand is 1-2 us slower
        once the result has 4096 values, while copying the operand costs ~1 us up to ~12800
        values and then 10-60 us (a transposing copy leaving the cache). Otherwise as it is."""
        if b.flags.c_contiguous or (rows is not None and (
                b.size > 12800 or rows * b.shape[-1] < 4096)):
            return b
        return self.m.ascontiguousarray(b)

    def filled(self, g, shape):
        """A 0-d gradient spread over `shape` (cheaper than broadcast_to for small shapes)."""
        out = self.m.empty(shape, g.dtype)
        out[...] = g
        return out

    def new_zeros(self, like, shape):
        return self.m.zeros(shape, like.dtype)

    @staticmethod
    def unsqueeze_dims(x, dims):
        """New size-1 dims at `dims` (sorted): one reshape."""
        s = list(x.shape)
        for d in dims:
            s.insert(d, 1)
        return x.reshape(tuple(s))

    @staticmethod
    def unsqueeze_to(g, shape, dims=None):
        """`g` reshaped to `shape` (a squeeze's input shape)."""
        return g.reshape(shape)

    @staticmethod
    def t(x):
        return x.T

    @staticmethod
    def div_scalar(x, n):
        return x / n

    @staticmethod
    def backward_op(name, *vals):
        """Row `name`'s backward op (its `double` row, threshold_backward) on arrays: the row's
        formula. `vals`: that row's inputs then arguments."""
        return ROWS[name].double_row.fwd(*vals)

    @staticmethod
    def row(name, inputs, args=()):
        """Row `name`'s forward on arrays (a backward op PyTorch records as a node of its own,
        mse_loss_backward): `inputs` then `args`."""
        return ROWS[name].fwd(*inputs, *args)

    @staticmethod
    def mul_scalar(x, n):
        return x * n

    @staticmethod
    def bmm(a, b):
        return a @ b

    def rsqrt(self, x):
        return 1 / self.m.sqrt(x)

    @staticmethod
    def sum_all(x):
        """The sum of all elements as a new 0-d array (PyTorch's sum_to 0-d: a new tensor,
        so the engine may add into it in place; half the cost of a keepdims sum reshaped)."""
        s = x.sum()
        return np.asarray(s) if type(x) is np.ndarray else s

    @staticmethod
    def add_scalar(x, n):
        return x + n

    def masked_fill(self, x, mask, value):
        """`x` (a fresh array) with `value` where `mask`."""
        return self.m.where(mask, value, x)

    @staticmethod
    def mean_expand(g, n, shape, dim, keepdim):
        """mean's gradient: g / n spread over the input's `shape` (divided first: a broadcast
        view, no copy)."""
        return _expand_grad(g / n, shape, dim, keepdim, NUMPY if type(g) is np.ndarray
                            else array_formulas(g))

    @staticmethod
    def erf(x, scale=None):
        """erf(x), or erf(scale * x) (GELU's): numpy has no erf: the vectorised float32 kernel
        for float32 (the scale in its coefficients), backend's otherwise."""
        if type(x) is np.ndarray and x.dtype == np.float32:
            return kernels.erf_float32(x, 1.0 if scale is None else scale)
        return backend.erf(x if scale is None else x * x.dtype.type(scale))

    @staticmethod
    def erfinv(x):
        return backend.erfinv(x)

    def put(self, g, shape, index):
        """zeros(shape) with `g` written at `index` (basic or advanced)."""
        z = self.m.zeros(shape, g.dtype)
        z[index] = g
        return z

    def scatter_add(self, g, shape, index):
        """zeros(shape) with `g` added at `index` (repeated positions add up)."""
        rows = index[0] if type(index) is tuple and len(index) == 1 else index
        if type(rows) is np.ndarray and rows.dtype.kind in "iu" and rows.size >= 32 and \
                type(g) is np.ndarray and g.dtype.kind == "f" and \
                g.shape == rows.shape + tuple(shape[1:]):
            return _add_rows(g, shape, rows)
        z = self.m.zeros(shape, g.dtype)
        self.m.add.at(z, index, g)
        return z

    def index_backward(self, g, shape, index):
        """The gradient of an advanced index: zeros(shape) with g added at `index`."""
        return self.scatter_add(g, shape, index)

    def index_add_to_zeros(self, g, shape, dim, index):
        """index_select's gradient: zeros(shape) with g added at `index` along `dim`."""
        return self.scatter_add(g, shape, _along(dim, index))

    @staticmethod
    def zeroed(g, index):
        """`g` with zeros written at `index`."""
        z = g.copy()
        z[index] = 0
        return z

    def masked(self, g, mask, unless=False):
        """`g` where `mask` (where not `mask` when `unless`), exactly 0 elsewhere even where g
        is inf or NaN (PyTorch's threshold_backward). On float32/float64 numpy arrays a bitwise
        and of g's bits with the mask widened to words of all ones or zeros (3 passes; np.where
        is ~10x slower); otherwise a multiply by the mask, np.where when g has a non-finite
        value."""
        words = _WORDS.get(g.dtype) if type(g) is np.ndarray else None
        if words is not None and type(mask) is np.ndarray and mask.shape == g.shape:
            out = np.empty(g.shape, g.dtype)  # (a new array, not a view: the engine's own)
            w = out.view(words)
            np.copyto(w, mask.view(np.uint8))  # 0 or 1
            if unless:
                w -= 1  # 1 -> 0, 0 -> all ones
            else:
                np.negative(w, out=w)  # 1 -> all ones
            np.bitwise_and(w, g.view(words), out=w)
            return out
        if unless:
            mask = ~mask
        if not self.m.isfinite(g).all():
            return self.m.where(mask, g, 0)  # rare: the slow form
        return g * mask.astype(g.dtype)

    def index_grid(self, index, dim):
        """The advanced index that reaches `index`'s positions along `dim` (gather/scatter)."""
        grid = list(self.m.indices(index.shape, sparse=True))
        grid[dim] = index
        return tuple(grid)

    def prod_others(self, x, dim):
        """Product of all elements along `dim` except the one at each position (zeros are
        fine): exclusive cumulative products from both ends."""
        m = self.m
        ones = m.ones_like(m.take(x, [0], axis=dim))
        head = range(x.shape[dim] - 1)
        left = m.cumprod(m.concatenate([ones, m.take(x, head, axis=dim)], axis=dim), axis=dim)
        rev = m.flip(x, (dim,))
        right = m.flip(m.cumprod(m.concatenate([ones, m.take(rev, head, axis=dim)], axis=dim),
                                 axis=dim), (dim,))
        return left * right

    def as_strided_backward(self, g, base_geom, view_geom):
        shape, strides, off = base_geom
        vshape, vstrides, voff = view_geom
        buf = self.m.zeros(_extent(base_geom, view_geom), g.dtype)
        if _overlapping(vshape, vstrides):  # windows share elements: add every contribution
            self.m.add.at(buf, self.m.asarray(positions(view_geom)).reshape(-1), g.reshape(-1))
        else:
            backend.as_strided(buf, vshape, vstrides, voff)[...] = g
        return backend.as_strided(buf, shape, strides, off).copy()

    def unfold_backward(self, g, shape, dim, size, step):
        """Sum the windows back: one strided slice-add per position inside the window (window
        axis first, contiguous: each slice below is then a dense block)."""
        z = self.m.zeros(shape, g.dtype)
        n = g.shape[dim]
        pre = (slice(None),) * dim
        g = self.m.ascontiguousarray(self.m.moveaxis(g, -1, 0))
        for k in range(size):
            z[pre + (slice(k, k + step * (n - 1) + 1, step),)] += g[k]
        return z

    @staticmethod
    def to_device(g, device):
        return backend.to_device(g, device)

    @staticmethod
    def conv2d_backward(g, ctx, input, weight, stride, padding, dilation, groups, needs):
        return kernels.conv2d_backward(g, ctx.get(), needs)  # one pass for (input, weight, bias)

    @staticmethod
    def max_pool2d_backward(g, ctx, self_shape):
        return kernels.max_pool2d_backward(g, ctx.get()).reshape(self_shape)  # ((C, H, W) too)

    @staticmethod
    def lstm_layer_backward(g, ctx, x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse, out, needs):
        return kernels.lstm_layer_backward(*g, ctx.get(), x, w_ih, w_hh, h0, c0, out, reverse,
                                           needs)


def _add_rows(g, shape, rows):
    """zeros(shape) with g's rows added at `rows` (an int array indexing dim 0: embedding and
    ``C[X]`` lookups): one bincount over the flat positions ``row * D + column``, which sums in
    float64; np.add.at, the general scatter, pays per index row: 2x slower from ~32 rows on.
    Negative rows (from the end) are wrapped only when bincount refuses a position."""
    n, d = shape[0], math.prod(shape[1:])
    flat = rows.reshape(-1)
    for wrap in (False, True):
        pos = flat % n if wrap else flat
        pos = pos if d == 1 else (pos[:, None] * d + np.arange(d)).reshape(-1)
        try:
            out = np.bincount(pos, weights=g.reshape(-1), minlength=n * d)
            return out.astype(g.dtype, copy=False).reshape(shape)
        except ValueError:  # a negative position: a row counted from the end
            if wrap or not n:
                raise


class _ArrayFormulasOnUse(ArrayFormulas):
    """ArrayFormulas for a module that makes names on first use (cupy's lazy submodules, the
    tests' device double): the module's name looked up when a formula first reads it."""

    def __getattr__(self, name):
        f = getattr(self.m, name)
        self.__dict__[name] = f
        return f


_WORDS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}  # same-size integers


def array_formulas(a):
    """The formula namespace for array `a` (numpy's, or cupy's on the GPU)."""
    ns = _BY_TYPE.get(type(a))
    if ns is None:
        ns = _BY_TYPE[type(a)] = _ArrayFormulasOnUse(backend.get_array_module(a))
    return ns


# ------------------------------------------------------------------------------------------------
# The namespace over Tensors (create_graph: the backward is itself recorded)
# ------------------------------------------------------------------------------------------------
class TensorFormulas:
    """`xp` under create_graph: the same functions as ArrayFormulas, on Tensors, through the
    Tensor methods (so through the table: every step is differentiable again)."""

    @staticmethod
    def where(c, a, b):
        """torch.where(c, a, b); a number beside a Tensor becomes a 0-d tensor of its dtype
        (PyTorch's formulas write at::zeros({}) there: the node's edges in the same order)."""
        if isinstance(a, Tensor):
            return a.where(c, b)
        if isinstance(b, Tensor):
            return Tensor._make_fresh(backend.get_array_module(b._data).asarray(
                a, b._data.dtype)).where(c, b)
        c = _raw(c)  # two numbers: a constant
        return Tensor._make_fresh(backend.get_array_module(c).where(c, a, b))

    @staticmethod
    def sum(x, axis=None, keepdims=False):
        return x.sum(dim=axis, keepdim=keepdims)

    @staticmethod
    def maximum(a, b):
        """Elementwise maximum; against a number, a clamp (ClampMinBackward0)."""
        if not isinstance(b, Tensor):
            return a.clamp(min=b)
        return b.clamp(min=a) if not isinstance(a, Tensor) else a.maximum(b)

    @staticmethod
    def minimum(a, b):
        if not isinstance(b, Tensor):
            return a.clamp(max=b)
        return b.clamp(max=a) if not isinstance(a, Tensor) else a.minimum(b)

    @staticmethod
    def broadcast_to(x, shape):
        return x.expand(*shape) if isinstance(x, Tensor) else x

    filled = broadcast_to

    @staticmethod
    def flip(x, dims):
        return x.flip(dims)

    @staticmethod
    def expand_dims(x, dim):
        return x.unsqueeze(dim)

    @staticmethod
    def dtype(x):
        return x._data.dtype

    @staticmethod
    def astype(x, dt):
        return x.to(dtypes.from_np(dt))

    @staticmethod
    def permute(x, dims):
        return x.permute(*dims)

    @staticmethod
    def contiguous(b, rows=None):
        return b

    @staticmethod
    def new_zeros(like, shape):
        return like.new_zeros(shape)

    @staticmethod
    def put(g, shape, index):
        return g.new_zeros(shape).index_put_(_index(index), g)

    @staticmethod
    def zeros_like(x):
        return x.new_zeros(tuple(x.shape))

    @staticmethod
    def ones_like(x):
        return x.new_ones(tuple(x.shape))

    @staticmethod
    def sum_all(x):
        return x.sum()

    @staticmethod
    def unsqueeze_dims(x, dims):
        """Size-1 dims at `dims` (sorted), one unsqueeze each (PyTorch's unsqueeze_multiple)."""
        for d in dims:
            x = x.unsqueeze(d)
        return x

    @staticmethod
    def unsqueeze_to(g, shape, dims=None):
        """A squeeze's gradient: one unsqueeze per size-1 dim of `shape` (among `dims` when
        given), PyTorch's unsqueeze_to."""
        for d, n in enumerate(shape):
            if n == 1 and (dims is None or d in dims):
                g = g.unsqueeze(d)
        return g

    @staticmethod
    def t(x):
        return x.t()

    @staticmethod
    def backward_op(name, *vals):
        """Row `name`'s backward op (its `double` row) applied to Tensors: recorded as its node
        (ThresholdBackwardBackward0), as PyTorch's formulas that call that op again."""
        d = ROWS[name].double_row
        k = len(d.inputs)
        return _apply(d, vals[:k], vals[k:])

    @staticmethod
    def row(name, inputs, args=()):
        """Row `name` applied to Tensors and recorded as its node (mse_loss_backward:
        MseLossBackwardBackward0), as PyTorch's formulas that call a backward op."""
        return _apply(ROWS[name], tuple(inputs), tuple(args))

    @staticmethod
    def div_scalar(x, n):
        """x / n with n a number: PyTorch's div.Scalar (DivBackward1)."""
        return _apply(ROWS["div_scalar"], (x,), (n,))

    @staticmethod
    def masked_fill(x, mask, value):
        """`x` with `value` where `mask` (MaskedFillBackward0)."""
        return x.masked_fill(mask if isinstance(mask, Tensor) else Tensor._make_fresh(mask),
                             value)

    @staticmethod
    def mul_scalar(x, n):
        """x * n with n a number: PyTorch's mul.Scalar (MulBackward1)."""
        return _apply(ROWS["mul_scalar"], (x,), (n,))

    @staticmethod
    def bmm(a, b):
        return a.bmm(b)

    @staticmethod
    def add_scalar(x, n):
        """x + n with n a number: PyTorch's add.Scalar (AddBackward1)."""
        return _apply(ROWS["add_scalar"], (x,), (n,))

    @staticmethod
    def mean_expand(g, n, shape, dim, keepdim):
        """mean's gradient as PyTorch's mean_backward: sum_backward, then / n (DivBackward1)."""
        return TensorFormulas.div_scalar(_expand_grad(g, shape, dim, keepdim, TENSORS), n)

    @staticmethod
    def scatter_add(g, shape, index):
        return g.new_zeros(shape).index_put_(_index(index), g, accumulate=True)

    @staticmethod
    def zeroed(g, index):
        """index_put's self gradient: g.index_put(index, 0) (IndexPutBackward0)."""
        return _apply(ROWS["index_put"], (g, g.new_zeros(())), (_index(index), False))

    @staticmethod
    def index_backward(g, shape, index):
        """PyTorch's index_backward: zeros(shape)._index_put_impl_(index, g, accumulate)."""
        return _apply(ROWS["index_put_impl"], (g.new_zeros(tuple(shape)), g),
                      (_index(index), True), inplace="_index_put_impl_")

    @staticmethod
    def index_add_to_zeros(g, shape, dim, index):
        """PyTorch's index_select_backward: zeros(shape).index_add_(dim, index, g)."""
        return g.new_zeros(tuple(shape)).index_add_(dim, _index_tensor(index), g)

    @staticmethod
    def masked(g, mask, unless=False):
        return TensorFormulas.where(mask, 0, g) if unless else TensorFormulas.where(mask, g, 0)

    @staticmethod
    def index_grid(index, dim):
        index = _raw(index)
        grid = list(backend.get_array_module(index).indices(index.shape, sparse=True))
        grid[dim] = index
        return tuple(grid)

    @staticmethod
    def stack(xs, axis):
        """torch.stack (StackBackward0: unbind's gradient as PyTorch's)."""
        axis %= len(xs[0].shape) + 1
        return _apply(ROWS["stack"], tuple(xs), (len(xs), axis))

    @staticmethod
    def concatenate(xs, axis):
        """torch.cat (CatBackward0: split's gradient as PyTorch's)."""
        axis %= len(xs[0].shape)
        return _apply(ROWS["cat"], tuple(xs), (tuple(x.shape[axis] for x in xs), axis,
                                               tuple(x._data.dtype for x in xs)))

    @staticmethod
    def to_device(g, device):
        return g.to(device)

    # numpy's spellings that M1-era formulas call on `xp` (in-place on fresh zeros)
    @staticmethod
    def take(x, i, axis):
        return x.select(axis, i) if isinstance(i, int) else x[_along(axis, _raw(i))]

    @staticmethod
    def zeros(shape, dt):
        return fresh_zeros(tuple(shape), dtypes.to_np(dt) if isinstance(dt, dtypes.dtype)
                           else np.dtype(dt))

    @staticmethod
    def put_along_axis(z, idx, g, axis):
        z.index_put_(TensorFormulas.index_grid(idx, axis), g)

    @staticmethod
    def prod_others(x, dim):
        """torch's prod_backward: prod / x where x has no zero; else its
        prod_safe_zeros_backward, exclusive cumulative products from both ends (the division
        would give NaN), differentiable again through cumprod's zero-safe formula."""
        if not bool((_raw(x) == 0).any()):
            return x.prod(dim, keepdim=True) / x
        n = x.shape[dim]
        shape = list(x.shape)
        shape[dim] = 1
        ones = x.new_ones(tuple(shape))
        left = TensorFormulas.concatenate([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
        right = TensorFormulas.concatenate([ones, x.narrow(dim, 1, n - 1).flip(dim)], dim)
        return left * right.cumprod(dim).flip(dim)

    @staticmethod
    def as_strided_backward(g, base_geom, view_geom):
        """Scatter-add g at the storage positions of the view, read back those of the base.
        Where neither layout reaches an element twice, PyTorch's steps (so its nodes): g copied
        into the view's layout of a zero storage (CopySlices), read in the base's layout
        (AsStridedBackward0)."""
        if not _overlapping(*view_geom[:2]) and not _overlapping(*base_geom[:2]):
            buf = g.new_zeros((_extent(base_geom, view_geom),))
            buf.as_strided(*view_geom).copy_(g)
            return buf.as_strided(*base_geom)
        buf = g.new_zeros((_extent(base_geom, view_geom),))
        buf = buf.index_put_((positions(view_geom).reshape(-1),), g.reshape(-1),
                             accumulate=True)
        return buf[positions(base_geom)]

    @staticmethod
    def unfold_backward(g, shape, dim, size, step):
        strides = _contiguous_strides(shape)
        n = g.shape[dim]
        view = (tuple(shape[:dim]) + (n,) + tuple(shape[dim + 1:]) + (size,),
                strides[:dim] + (strides[dim] * step,) + strides[dim + 1:] + (strides[dim],), 0)
        return TensorFormulas.as_strided_backward(g, (tuple(shape), strides, 0), view)

    @staticmethod
    def conv2d_backward(g, ctx, input, weight, stride, padding, dilation, groups, needs):
        """The convolution as im2col by an index gather and a batched matmul, differentiated by
        hand: each step is a row of the table, so the result is differentiable again."""
        n, c, h, w = input.shape
        o, cg, kh, kw = weight.shape
        idx, ho, wo = _im2col_index(c, h, w, kh, kw, stride, padding, dilation)
        ck, length = cg * kh * kw, ho * wo
        gy = g.reshape(n, groups, o // groups, length)
        gx = gw = gb = None
        if needs[1]:
            flat = _cat_zero(input.reshape(n, c * h * w))
            cols = flat[:, idx].reshape(n, groups, ck, length)
            gw = (gy @ cols.swapaxes(-1, -2)).sum(0).reshape(o, cg, kh, kw)
        if needs[0]:
            w2 = weight.reshape(groups, o // groups, ck)
            gcols = (w2.swapaxes(-1, -2) @ gy).reshape(n, c * kh * kw, length)
            gflat = input.new_zeros((n, c * h * w + 1)).index_put_(
                (slice(None), idx), gcols, accumulate=True)
            gx = gflat[:, :c * h * w].reshape(n, c, h, w)
        if needs[2]:
            gb = g.sum((0, 2, 3))
        return gx, gw, gb

    @staticmethod
    def max_pool2d_backward(g, ctx, self_shape):
        n, c, h, w = self_shape if len(self_shape) == 4 else (1,) + tuple(self_shape)
        idx = kernels.max_pool2d_indices(ctx.get())  # (N, C, Ho, Wo) into each H*W plane
        xp = backend.get_array_module(idx)
        flat = idx + (xp.arange(n * c) * (h * w)).reshape(n, c, 1, 1)
        z = g.new_zeros((n * c * h * w,)).index_put_((flat.reshape(-1),), g.reshape(-1),
                                                      accumulate=True)
        return z.reshape(self_shape)


    @staticmethod
    def lstm_layer_backward(g, ctx, x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse, out, needs):
        """Back through time on Tensors: the layer's steps recomputed from its inputs (so that
        they are differentiated too), then the gradients step by step, last step first."""
        g_out, dh, dc = g
        n, hidden = x.shape[0], w_hh.shape[1]
        g0, g1 = 2 * hidden, 3 * hidden
        proj = x @ w_ih.T
        if b_ih is not None:
            proj = proj + (b_ih + b_hh)
        order = range(n - 1, -1, -1) if reverse else range(n)
        h, c, steps = h0, c0, [None] * n
        for t in order:  # the forward: what each step read and made
            z = proj[t] + h @ w_hh.T
            s, gg = z.sigmoid(), z[:, g0:g1].tanh()
            c_in, h_in = c, h
            c = s[:, hidden:g0] * c + s[:, :hidden] * gg
            tc = c.tanh()
            h = s[:, g1:] * tc
            steps[t] = (s, gg, c_in, h_in, tc)
        dh = h0.new_zeros(tuple(h0.shape)) if dh is None else dh
        dc = h0.new_zeros(tuple(h0.shape)) if dc is None else dc
        dzs, h_ins = [None] * n, [None] * n
        for t in reversed(order):
            s, gg, c_in, h_ins[t], tc = steps[t]
            i, f, o = s[:, :hidden], s[:, hidden:g0], s[:, g1:]
            if g_out is not None:
                dh = dh + g_out[t]
            dc = dc + dh * o * (1 - tc * tc)
            dzs[t] = dz = TensorFormulas.concatenate(
                [dc * gg * i * (1 - i), dc * c_in * f * (1 - f), dc * i * (1 - gg * gg),
                 dh * tc * o * (1 - o)], 1)
            dc = dc * f
            dh = dz @ w_hh
        flat = TensorFormulas.concatenate(dzs, 0)  # (T * B, 4H)
        gb = flat.sum(0) if needs[3] or needs[4] else None
        return ((flat @ w_ih).reshape(tuple(x.shape)) if needs[0] else None,
                flat.T @ x.reshape(-1, x.shape[2]) if needs[1] else None,
                flat.T @ TensorFormulas.concatenate(h_ins, 0) if needs[2] else None,
                gb if needs[3] else None, gb + 0 if needs[4] else None,
                dh if needs[5] else None, dc if needs[6] else None)


for _name in ("exp", "log", "log1p", "erf", "erfinv", "reciprocal", "cos", "sin", "abs",
              "tanh"):  # t.exp(), ...
    setattr(TensorFormulas, _name, staticmethod(operator.methodcaller(_name)))
TensorFormulas.sign = staticmethod(operator.methodcaller("sgn"))  # PyTorch's formulas: sgn
# a.div(b, rounding_mode=mode): a step without a gradient (torch's is grad * 0), so never the
# 0 * inf of floor(a / b)'s DivBackward0 at b = 0
TensorFormulas.div_rounded = staticmethod(lambda a, b, mode: a.div(b, rounding_mode=mode))

TENSORS = TensorFormulas()


def _index(index):
    return tuple(_raw(i) for i in index) if isinstance(index, tuple) else _raw(index)


def _cat_zero(x2):
    """(N, M) -> (N, M + 1) with a zero column: the target of im2col's padding positions."""
    return x2.new_zeros((x2.shape[0], x2.shape[1] + 1)).index_put_(
        (slice(None), slice(0, x2.shape[1])), x2)


def _im2col_index(c, h, w, kh, kw, stride, padding, dilation):
    """(C*kh*kw, Ho*Wo) positions into a flattened (C*H*W + 1) image; padding reads the last."""
    sh, sw = kernels._pair(stride)
    ph, pw = kernels._pair(padding)
    dh, dw = kernels._pair(dilation)
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    rows = (np.arange(kh) * dh)[:, None, None, None] + (np.arange(ho) * sh - ph)[None, None, :,
                                                                                   None]
    cols = (np.arange(kw) * dw)[None, :, None, None] + (np.arange(wo) * sw - pw)[None, None,
                                                                                  None, :]
    inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
    plane = np.where(inside, rows * w + cols, -1)  # (kh, kw, Ho, Wo)
    chan = np.arange(c)[:, None, None, None, None] * (h * w)
    idx = np.where(plane[None] >= 0, chan + plane[None], c * h * w)
    return idx.reshape(c * kh * kw, ho * wo), ho, wo


def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(tuple(shape)):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def _extent(*geoms):
    """Storage elements spanned by the layouts."""
    return max(off + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
               for shape, strides, off in geoms)


def _overlapping(shape, strides):
    """Whether a strided view may reach one element twice (strides in elements)."""
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    extent = 1
    for s, n in dims:
        if s < extent:
            return True
        extent = s * n
    return False


# ------------------------------------------------------------------------------------------------
# Sorting, scatter, linear algebra, ...: operations whose array and Tensor spellings differ,
# each written for ArrayFormulas and for TensorFormulas side by side (index args stay arrays)
# ------------------------------------------------------------------------------------------------
def _array_solve(m, a, b):
    """numpy's solve; where numpy calls the matrix singular, torch's: a backward's solve with
    A^T reuses the forward's LU of A as an adjoint (lapack._lu_solve)."""
    try:
        return m.linalg.solve(a, b)
    except m.linalg.LinAlgError:
        from .lapack import _lu_solve
        return _lu_solve(a, b, transposed=True)


def _index_tensor(index):
    return index if isinstance(index, Tensor) else Tensor._make_fresh(index)


_PAIRS = {
    # name: (on arrays: self is ArrayFormulas, self.m numpy or cupy), (on Tensors)
    "constant": (lambda self, arr: self.m.asarray(arr),
                 lambda arr: Tensor._make_fresh(arr)),
    "gather": (lambda self, g, dim, index: self.m.take_along_axis(g, index, axis=dim),
               lambda g, dim, index: g.gather(dim, _index_tensor(index))),
    "scatter_along": (lambda self, z, dim, index, src, add=False: _array_scatter(
                          self.m, z, dim, index, src, add),
                      lambda z, dim, index, src, add=False: (z.scatter_add if add else z.scatter)(
                          dim, _index_tensor(index), src)),
    "index_select": (lambda self, g, dim, index: self.m.take(g, index, axis=dim),
                     lambda g, dim, index: g.index_select(dim, _index_tensor(index))),
    "zero_along": (lambda self, g, dim, index: _array_zero_along(g, dim, index),
                   lambda g, dim, index: g.index_fill(dim, _index_tensor(index), 0.0)),
    "tril": (lambda self, x, k: self.m.tril(x, k), lambda x, k: x.tril(k)),
    "triu": (lambda self, x, k: self.m.triu(x, k), lambda x, k: x.triu(k)),
    "diagonal": (lambda self, x, offset, d1, d2: self.m.diagonal(x, offset, d1, d2).copy(),
                 lambda x, offset, d1, d2: x.diagonal(offset, d1, d2)),
    "eye": (lambda self, n, like: self.m.eye(n, dtype=like.dtype),
            lambda n, like: Tensor._make_fresh(np.eye(n, dtype=like._data.dtype))),
    "inv": (lambda self, x: self.m.linalg.inv(x), lambda x: x.inverse()),
    "solve": (lambda self, a, b: _array_solve(self.m, a, b),  # (recorded: LinalgSolveExBackward0)
              lambda a, b: _apply(ROWS["linalg_solve"], (a, b))),
    "cumprod": (lambda self, x, dim: wide_scan(self.m.cumprod, x, dim),  # (torch's accumulate
                lambda x, dim: x.cumprod(dim)),                           # type: double)
    "cumsum": (lambda self, x, axis: wide_scan(self.m.cumsum, x, axis),
               lambda x, axis: x.cumsum(axis)),
    "roll": (lambda self, x, shifts, dims: _array_roll(self.m, x, shifts, dims),
             lambda x, shifts, dims: x.roll(shifts, dims)),
    "cross": (lambda self, a, b, dim: self.m.cross(a, b, axis=dim),
              lambda a, b, dim: a.cross(b, dim=dim)),
    "rot90": (lambda self, x, k, dims: self.m.rot90(x, k, axes=dims).copy(),
              lambda x, k, dims: x.rot90(k, dims)),
    "scatter_prod": (lambda self, z, src, dim, index, include_self: _scatter_reduce_prod(
                         z, src, dim, index, include_self),
                     lambda z, src, dim, index, include_self: z.scatter_reduce(
                         dim, _index_tensor(index), src, "prod", include_self=include_self)),
}
for _name, (_on_arrays, _on_tensors) in _PAIRS.items():
    setattr(ArrayFormulas, _name, _on_arrays)
    setattr(TensorFormulas, _name, staticmethod(_on_tensors))
for _name in ("sinh", "cosh", "sqrt", "rsqrt", "floor", "trunc", "isfinite"):  # xp.f(t) -> t.f()
    setattr(TensorFormulas, _name, staticmethod(operator.methodcaller(_name)))

NUMPY = ArrayFormulas(np)  # after every helper is on the class (the copied names yield to them)
_BY_TYPE = {np.ndarray: NUMPY}
