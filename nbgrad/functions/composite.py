"""Functions composed of the public functions above, as PyTorch decomposes them (einsum,
tensordot, kron, meshgrid, broadcast_tensors, movedim, tile, block_diag, ...), so gradients flow
and the graph shows PyTorch's nodes.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from ..autograd.apply import apply, _broadcast_error
from ..ops import ROWS as R
from ..tensor import _dim, Size, Tensor
from .registry import method
from .args import _builtin_max, _out, scalar_name
from .views import diagonal, expand, flatten, _fold, permute, reshape, stack, unsqueeze, view
from .elementwise import mul
from .reductions import sum
from .linalg import dot, mm


def _operand_list(tensors):
    """f(a, b) and f([a, b]) alike (PyTorch's *tensors functions accept both)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(tensors[0])
    return tuple(tensors)


class _Steps:
    """einsum's plan, recorded while the first call on an equation and operand shapes runs:
    each step applies a function to earlier results (slots: the operands first), so later
    calls replay the steps without deciding anything again."""

    __slots__ = ("regs", "steps")

    def __init__(self, operands):
        self.regs = list(operands)
        self.steps = []

    def __call__(self, fn, ins, *args):
        """Run fn(*inputs, *args) now and record it; its slot."""
        self.regs.append(fn(*[self.regs[i] for i in ins], *args))
        self.steps.append((fn, ins, args))
        return len(self.regs) - 1

    def shape(self, slot):
        return self.regs[slot]._data.shape


def _replay(steps, result, operands):
    regs = list(operands)
    for fn, ins, args in steps:
        regs.append(fn(*[regs[i] for i in ins], *args))
    return regs[result]


def _permute_rows(x, dims):  # dims already a complete permutation
    return apply(R["permute"], (x,), (dims,))


def _unsqueeze_row(x, dim):  # 0 <= dim <= x.ndim
    return apply(R["unsqueeze"], (x,), (dim,))


def _bmm_row(a, b):  # (b, n, k) @ (b, k, p), shapes checked by the plan; bmm never promotes
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"expected scalar type {scalar_name(a)} but found {scalar_name(b)}")
    return apply(R["bmm"], (a, b))


def _view_row(x, shape):  # a contiguous x
    return apply(R["view"], (x,), (shape,))


def _sumproduct_pair(rec, left, right, sum_dims):
    """sum over `sum_dims` of left * right (same ndim, broadcast on size-1 dims), keeping the
    summed dims as size 1: permute both so that batch (lro), left-only (lo), summed and
    right-only (ro) dims line up, flatten to 3-D, bmm, view and permute back (PyTorch's
    decomposition, so the graph shows its nodes). `left` and `right` are slots of `rec`."""
    if not sum_dims:
        return rec(mul, (left, right))
    ls, rs = list(rec.shape(left)), list(rec.shape(right))
    nd = len(ls)
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(nd):
        sl, sr = ls[i] != 1, rs[i] != 1
        if i in sum_dims:
            if sl and sr:
                if ls[i] != rs[i]:
                    raise RuntimeError("non-broadcast dimensions must match")
                sum_size *= ls[i]
            elif sl:
                left = rec(sum, (left,), i, True)
                ls[i] = 1
            elif sr:
                right = rec(sum, (right,), i, True)
                rs[i] = 1
        elif sl and sr:
            if ls[i] != rs[i]:
                raise RuntimeError("non-broadcast dimensions must match")
            lro.append(i)
            lro_size *= ls[i]
        elif sl:
            lo.append(i)
            lo_size *= ls[i]
        else:
            ro.append(i)
            ro_size *= rs[i]
    if lo and ro and ro[-1] < lo[0]:  # right's dims all come first: bmm(right, left) then
        left, right, lo, ro, lo_size, ro_size = right, left, ro, lo, ro_size, lo_size
        ls, rs = rs, ls
    sum_dims = list(sum_dims)
    out_size = ([ls[d] for d in lro] + [ls[d] for d in lo] + [1] * len(sum_dims) +
                [rs[d] for d in ro])
    lperm = lro + lo + sum_dims + ro
    rperm = lro + sum_dims + ro + lo
    operm = [0] * len(lperm)
    for k, d in enumerate(lperm):
        operm[d] = k
    left = rec(_fold, (rec(_permute_rows, (left,), tuple(lperm)),),
               (lro_size, lo_size, sum_size))
    right = rec(_fold, (rec(_permute_rows, (right,), tuple(rperm)),),
                (lro_size, sum_size, ro_size))
    out = rec(_view_row, (rec(_bmm_row, (left, right)),), tuple(out_size))
    return rec(_permute_rows, (out,), tuple(operm))


_ELLIPSIS = "..."


def _einsum_parse(equation, operands):
    """Labels of each operand (letters and "..."), and the output's (None when implicit)."""
    lhs, arrow, rhs = equation.partition("->")
    labels = [[]]
    seen_ell = False
    i = 0
    while i < len(lhs):
        c = lhs[i]
        if c == ".":
            n = len(labels) - 1
            if seen_ell:
                raise RuntimeError(f"einsum(): found '.' for operand {n} for which an ellipsis "
                                   "was already found")
            if lhs[i:i + 3] != _ELLIPSIS:
                raise RuntimeError(f"einsum(): found '.' for operand {n} that is not part of "
                                   "any ellipsis")
            labels[-1].append(_ELLIPSIS)
            seen_ell = True
            i += 2
        elif c == ",":
            labels.append([])
            seen_ell = False
            if len(labels) > len(operands):
                raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                                   "equation")
        elif c != " ":
            if not (c.isascii() and c.isalpha()):
                raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the "
                                   "equation string, subscripts must be in [a-zA-Z]")
            labels[-1].append(c)
        i += 1
    if len(labels) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    return labels, (rhs if arrow else None), len(lhs)


def einsum(equation, *operands):
    """Einstein summation, e.g. einsum("bij,bjk->bik", a, b) (torch.einsum).

    Every contraction is done as PyTorch does it: diagonals for repeated labels, unsqueeze and
    permute to align the labels, sums of labels only one operand has, then a permute / reshape /
    bmm / view per pair of operands, left to right. Operands may be passed as a list. The steps
    are planned once per equation and operand shapes, then replayed.

    Raises:
        RuntimeError: PyTorch's einsum() messages for malformed equations and size mismatches.
    """
    operands = _operand_list(operands)
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    key = (equation, tuple(x._data.shape for x in operands)) if type(equation) is str else None
    plan = _EINSUM_PLANS.get(key) if key is not None else None
    if plan is not None:  # the same equation on the same shapes: the same steps
        return _replay(plan[0], plan[1], operands)
    rec = _Steps(operands)
    result = _einsum_plan(rec, equation, operands)
    if key is not None:
        if len(_EINSUM_PLANS) >= 256:
            _EINSUM_PLANS.clear()
        _EINSUM_PLANS[key] = (tuple(rec.steps), result)
    return rec.regs[result]


_EINSUM_PLANS = {}  # (equation, operand shapes) -> (steps, result slot)


def _einsum_plan(rec, equation, operands):
    """Run einsum through the recorder `rec` (checking the equation against the shapes, with
    PyTorch's texts); the slot of the result."""
    op_labels, rhs, lhs_len = _einsum_parse(equation, operands)
    count = collections.Counter()
    ell_ndim = 0
    for k, (x, labels) in enumerate(zip(operands, op_labels)):
        nl = len(labels) - labels.count(_ELLIPSIS)
        nd = x._data.ndim
        count.update(x for x in labels if x != _ELLIPSIS)
        if _ELLIPSIS in labels:
            ell_ndim = _builtin_max(ell_ndim, nd - nl)
            if nl > nd:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nl}) "
                                   f"is more than the number of dimensions ({nd}) for operand {k}")
        elif nl != nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nl}) does "
                               f"not match the number of dimensions ({nd}) for operand {k} and "
                               "no ellipsis was given")
    perm_of = {}  # label -> its dim in the aligned layout (output dims, then contracted ones)
    ell_index, n_out = 0, 0
    ell_in_out = rhs is None
    if rhs is None:  # implicit output: the ellipsis, then the labels seen once, sorted
        n_out = ell_ndim
        for lab in sorted(count):
            if count[lab] == 1:
                perm_of[lab] = n_out
                n_out += 1
    else:
        i = 0
        while i < len(rhs):
            c = rhs[i]
            if c == ".":
                if ell_in_out:
                    raise RuntimeError("einsum(): found '.' for output but an ellipsis (...) was "
                                       "already found")
                if rhs[i:i + 3] != _ELLIPSIS:
                    raise RuntimeError("einsum(): found '.' for output that is not part of any "
                                       "ellipsis (...)")
                ell_index, ell_in_out = n_out, True
                n_out += ell_ndim
                i += 2
            elif c != " ":
                if not (c.isascii() and c.isalpha()):
                    raise RuntimeError(f"einsum(): invalid subscript given at index "
                                       f"{lhs_len + 2 + i} in the equation string, subscripts "
                                       "must be in [a-zA-Z]")
                if count[c] == 0 or c in perm_of:
                    raise RuntimeError(f"einsum(): output subscript {c}" + (
                        " appears more than once in the output" if c in perm_of else
                        " does not appear in the equation for any input operand"))
                perm_of[c] = n_out
                n_out += 1
            i += 1
    n_all = n_out
    if not ell_in_out:
        ell_index = n_all
        n_all += ell_ndim
    for lab in sorted(count):
        if lab not in perm_of:
            perm_of[lab] = n_all
            n_all += 1
    size_of, ell_sizes = {}, [1] * ell_ndim
    dim_counts = [0] * n_all  # how many operands have a size != 1 there
    ops = []
    for k, labels in enumerate(op_labels):
        x = k  # the operand's slot
        perm = [-1] * n_all
        d = 0
        for lab in labels:
            if lab == _ELLIPSIS:
                nd = operands[k]._data.ndim - (len(labels) - 1)
                for j in range(ell_ndim - nd, ell_ndim):
                    n = rec.shape(x)[d]
                    if n != 1:
                        if ell_sizes[j] not in (1, n):
                            raise RuntimeError(
                                f"einsum(): dimension {d} covered by ellipsis in operand {k}has "
                                f"size {n} which does not broadcast with previously seen "
                                f"ellipsis with size {ell_sizes[j]} for the respective dimension")
                        ell_sizes[j] = n
                        dim_counts[ell_index + j] += 1
                    perm[ell_index + j] = d
                    d += 1
            elif perm[perm_of[lab]] == -1:
                n = rec.shape(x)[d]
                if n != 1:
                    if size_of.get(lab, 1) not in (1, n):
                        raise RuntimeError(
                            f"einsum(): subscript {lab} has size {n} for operand {k} which does "
                            f"not broadcast with previously seen size {size_of[lab]}")
                    size_of[lab] = n
                    dim_counts[perm_of[lab]] += 1
                perm[perm_of[lab]] = d
                d += 1
            else:  # a repeated label: its diagonal
                prev = perm[perm_of[lab]]
                a, b = rec.shape(x)[d], rec.shape(x)[prev]
                if a != b:
                    raise RuntimeError(f"einsum(): subscript {lab} is repeated for operand {k} "
                                       f"but the sizes don't match, {a} != {b}")
                x = rec(movedim, (rec(diagonal, (x,), 0, prev, d),), -1, prev)
        for j in range(n_all):
            if perm[j] == -1:
                x = rec(_unsqueeze_row, (x,), d)
                perm[j] = d
                d += 1
        ops.append(rec(_permute_rows, (x,), tuple(perm)))
    while len(ops) > 1:  # contract left to right
        a, b = ops.pop(0), ops.pop(0)
        sum_dims, a_sum, b_sum = [], [], []
        shape_a, shape_b = rec.shape(a), rec.shape(b)
        for d in range(n_out, n_all):
            sa, sb = shape_a[d] != 1, shape_b[d] != 1
            if sa and sb:
                dim_counts[d] -= 1
                if dim_counts[d] == 1:
                    sum_dims.append(d)
                    dim_counts[d] = 0
            elif dim_counts[d] == 1:
                if sa:
                    a_sum.append(d)
                    dim_counts[d] = 0
                elif sb:
                    b_sum.append(d)
                    dim_counts[d] = 0
        if a_sum:
            a = rec(sum, (a,), tuple(a_sum), True)
        if b_sum:
            b = rec(sum, (b,), tuple(b_sum), True)
        ops.insert(0, _sumproduct_pair(rec, a, b, sum_dims))
    r = ops[0]
    if n_all > n_out:
        if len(operands) > 1:
            return rec(view, (r,), tuple(rec.shape(r)[:n_out]))
        return rec(sum, (r,), tuple(range(n_out, n_all)))
    return r


@method
def tensordot(a, b, dims=2, out=None):
    """Contract `dims` dims of a with dims of b (torch.tensordot): an int n (a's last n with b's
    first n) or two lists. Permute, reshape to matrices, mm (dot when nothing is left), reshape.
    """
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        na = a._data.ndim
        dims_a, dims_b = list(range(na - dims, na)), list(range(dims))
    else:
        dims_a, dims_b = dims
        dims_a = [dims_a] if isinstance(dims_a, int) else list(dims_a)
        dims_b = [dims_b] if isinstance(dims_b, int) else list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a._data.dtype != b._data.dtype:
        raise RuntimeError("both inputs should have same dtype")
    dims_a = [_dim(d, a._data.ndim) for d in dims_a]
    dims_b = [_dim(d, b._data.ndim) for d in dims_b]
    csize = 1
    t1, t2 = a, b
    for d1, d2 in zip(dims_a, dims_b):
        s1, s2 = a._data.shape[d1], b._data.shape[d2]
        if s2 == 1:  # broadcast dims are summed right away
            t1 = sum(t1, d1, True)
        elif s1 == 1:
            t2 = sum(t2, d2, True)
        else:
            if s1 != s2:
                raise RuntimeError(f"contracted dimensions need to match, but first has size {s1} "
                                   f"in dim {d1} and second has size {s2} in dim {d2}")
            csize *= s1
    p1 = [i for i in range(a._data.ndim) if i not in dims_a]
    p2 = [i for i in range(b._data.ndim) if i not in dims_b]
    rsizes = [t1._data.shape[i] for i in p1] + [t2._data.shape[i] for i in p2]
    t1 = permute(t1, *(p1 + dims_a))
    t2 = permute(t2, *(dims_b + p2))
    if not rsizes:
        r = reshape(dot(flatten(t1), flatten(t2)), ())
    else:
        size1, size2 = math.prod(rsizes[:len(p1)]), math.prod(rsizes[len(p1):])
        r = reshape(mm(reshape(t1, size1, csize), reshape(t2, csize, size2)), tuple(rsizes))
    if out is not None:
        return _out("tensordot", lambda: r, (a, b), out)
    return r


@method
def kron(input, other):
    """Kronecker product (torch.kron): (a0, a1) x (b0, b1) -> (a0*b0, a1*b1); one mul between
    two interleaved views, as PyTorch."""
    nd = _builtin_max(input._data.ndim, other._data.ndim)
    sa = (1,) * (nd - input._data.ndim) + input._data.shape
    sb = (1,) * (nd - other._data.ndim) + other._data.shape
    va = _unsafe_view(input, tuple(x for n in sa for x in (n, 1)))
    vb = _unsafe_view(other, tuple(x for n in sb for x in (1, n)))
    return _unsafe_view(mul(va, vb), tuple(m * n for m, n in zip(sa, sb)))


def _unsafe_view(x, shape):
    return apply(R["unsafe_view"], (x,), (shape,))


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors (torch.meshgrid): each input viewed along its own dim
    and expanded. indexing="ij" (matrix, the default) or "xy" (Cartesian: first two swapped)."""
    tensors = _operand_list(tensors)
    if indexing is None:
        import warnings
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: '
                           f'{indexing}')
    for t in tensors:
        if t._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0
    shape = [tensors[i]._data.size for i in order]
    outs = []
    for i, t in enumerate(tensors):
        vs = [1] * len(tensors)
        vs[order.index(i)] = -1
        outs.append(expand(view(t, tuple(vs)), *shape))
    return tuple(outs)


def broadcast_shapes(*shapes):
    """The shape that all `shapes` broadcast to (torch.broadcast_shapes)."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    try:
        return Size(np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  "
                           f"Mismatch is between {list(shapes[0])} and {list(shapes[1])}") \
            from None


def broadcast_tensors(*tensors):
    """Expand every tensor to their common shape (torch.broadcast_tensors); those already of
    that shape are returned as they are."""
    tensors = _operand_list(tensors)
    shape = tuple(tensors[0]._data.shape)
    for t in tensors[1:]:
        try:
            shape = np.broadcast_shapes(shape, t._data.shape)
        except ValueError:
            raise _broadcast_error(shape, t._data.shape) from None
    return tuple(t if t._data.shape == shape else expand(t, *shape) for t in tensors)


def atleast_1d(*tensors):
    """Tensors with at least one dim: 0-d become (1,) (torch.atleast_1d)."""
    return _atleast_n(tensors, lambda t: reshape(t, 1) if t._data.ndim == 0 else t)


def atleast_2d(*tensors):
    """Tensors with at least two dims: () -> (1, 1), (n,) -> (1, n) (torch.atleast_2d)."""
    def fix(t):
        nd = t._data.ndim
        return reshape(t, 1, 1) if nd == 0 else unsqueeze(t, 0) if nd == 1 else t
    return _atleast_n(tensors, fix)


def atleast_3d(*tensors):
    """Tensors with at least three dims: () -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) ->
    (m, n, 1) (torch.atleast_3d)."""
    def fix(t):
        nd = t._data.ndim
        if nd == 0:
            return reshape(t, 1, 1, 1)
        if nd == 1:
            return unsqueeze(unsqueeze(t, 0), -1)
        return unsqueeze(t, -1) if nd == 2 else t
    return _atleast_n(tensors, fix)


def _atleast_n(tensors, fix):
    """One tensor in, one out; several (or a list), a tuple."""
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return fix(tensors[0])
    return tuple(fix(t) for t in _operand_list(tensors))


@method
def movedim(input, source, destination):
    """Move dims `source` to positions `destination` (ints or sequences); a permute view
    (torch.movedim)."""
    nd = input._data.ndim
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    src = [_dim(d, nd) for d in src]
    dst = [_dim(d, nd) for d in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({src})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({dst})")
    perm = [-1] * nd
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(nd) if i not in src)
    perm = [p if p != -1 else next(rest) for p in perm]
    return permute(input, *perm)


moveaxis = method(movedim, "moveaxis")


def cartesian_prod(*tensors):
    """All combinations of the elements of 1-D tensors, (n1*n2*..., k) (torch.cartesian_prod)."""
    tensors = _operand_list(tensors)
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([flatten(g) for g in grids], 1)


@method
def tile(input, dims):
    """Repeat along each dim; dims shorter than input.ndim are padded with 1s (torch.tile)."""
    dims = tuple(dims) if not isinstance(dims, int) else (dims,)
    dims = (1,) * (input._data.ndim - len(dims)) + dims
    return _repeat(input, dims)


def block_diag(*tensors):
    """The matrices (0-d -> (1, 1), 1-d -> (1, n)) along the diagonal of one 2-D tensor, zeros
    elsewhere (torch.block_diag; BlockDiagBackward0)."""
    for i, t in enumerate(tensors):
        if t._data.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t._data.ndim} dimensions")
    shapes = tuple((1, 1) if t._data.ndim == 0 else (1, t._data.shape[0]) if t._data.ndim == 1
                   else tuple(t._data.shape) for t in tensors)
    in_shapes = tuple(tuple(t._data.shape) for t in tensors)
    return apply(R["block_diag"], tuple(tensors), (shapes, in_shapes))


def _repeat(self, sizes):
    if len(sizes) < self._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of "
                           "dimensions of tensor")
    shape = (1,) * (len(sizes) - self._data.ndim) + tuple(self._data.shape)
    target = [n * k for n, k in zip(shape, sizes)]
    for n in target:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {target}")
    return apply(R["repeat"], (self,), (tuple(sizes),))
