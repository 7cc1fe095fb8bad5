"""In-place ops below `apply`'s in-place branch: PyTorch's checks and error texts (a leaf, a view
made under no_grad or one of several views, operands overlapping the target), the write itself
(numpy's ufunc with `out=` when nothing is recorded; through the storage for an expanded
target), and the saved values and retain_grad hook that follow the rebased history."""
from __future__ import annotations

import numpy as np

from .. import backend, dtypes
from ..tensor import INFERENCE, MULTI_OUTPUT, NO_GRAD_MODE, Tensor, is_dense
from .. import provenance
from .grad_mode import STATE as _GRAD
from .graph import SavedTensor
from .record import _geom, _strip
from .views import _overlapping, _write_overlap_error

_ND = np.ndarray


# ---- in-place ----------------------------------------------------------------------------------
_LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."

_VIEW_LEAF_INPLACE = ("a view of a leaf Variable that requires grad is being used in an in-place "
                      "operation.")

_MULTI_VIEW = (" This view is the output of a function that returns multiple views. Such "
               "functions do not allow the output views to be modified inplace. You should "
               "replace the inplace operation by an out-of-place one.")

_NO_GRAD_AMBIGUOUS = (
    " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
    "code by moving both the view and the inplace either both inside the no_grad block (if you "
    "don't want the inplace to be tracked) or both outside (if you want the inplace to be "
    "tracked).")


def view_modified_text(t, itself):
    """PyTorch's text for a view made under no_grad, or one of several views (split, unbind),
    that is modified in place (`itself`) or whose base was (found when the view is next used)."""
    obj = "is being" if itself else "its base or another view of its base has been"
    v = t._view
    if v.creation == MULTI_OUTPUT and t._grad_fn is not None:
        creator = v.creator or _strip(t._grad_fn.name())  # (a view of one: its own node)
        return f"Output {t._output_nr} of {creator} is a view and {obj} modified inplace." + \
            _MULTI_VIEW
    if v.creation in (NO_GRAD_MODE, INFERENCE) and t._grad_fn is not None:  # a view of such a view
        who = f"Output {t._output_nr} of {_strip(t._grad_fn.name())} is a view of a view which was"
    else:
        who = "A view was"
    if v.creation == INFERENCE:
        return f"{who} created in inference mode and {obj} modified inplace in normal mode." + \
            _NO_GRAD_AMBIGUOUS.replace("no_grad block", "inference_mode block")
    msg = f"{who} created in no_grad mode and {obj} modified inplace with grad mode enabled."
    return msg + (_MULTI_VIEW if v.creation == MULTI_OUTPUT else _NO_GRAD_AMBIGUOUS)


def _inplace_error(msg, kind, t, op_name):
    err = RuntimeError(msg)
    err.nbgrad_context = {"kind": kind, "op": op_name, "shape": tuple(t._data.shape),
                          "where": provenance.Location.of(provenance.capture())}
    return err


def check_inplace(t, op_name="inplace", others_require=False):
    """Raise PyTorch's error when modifying `t` in place is forbidden in grad mode
    (`others_require`: another operand requires grad, so the result will)."""
    __tracebackhide__ = True
    v = t._view
    if v is None:
        if t._requires_grad and t._grad_fn is None:
            raise _inplace_error(_LEAF_INPLACE, "leaf_inplace", t, op_name)
        return
    base = v.base
    if v.creation == MULTI_OUTPUT and (t._requires_grad or others_require):
        raise _inplace_error(view_modified_text(t, True), "multi_output_view_inplace", t, op_name)
    if (v.creation == NO_GRAD_MODE or v.creation == INFERENCE) and \
            (t._requires_grad or others_require):
        raise _inplace_error(view_modified_text(t, True), "no_grad_view_inplace", t, op_name)
    if t._requires_grad and base._grad_fn is None:  # (torch: requires_grad and base is a leaf)
        raise _inplace_error(_VIEW_LEAF_INPLACE, "view_of_leaf_inplace", t, op_name)
    if t._requires_grad and t._grad_fn is None:
        # a view of a base that came to require grad, its grad_fn not regenerated yet: PyTorch
        # reads the stale field and calls it a leaf
        raise _inplace_error(_LEAF_INPLACE, "leaf_inplace", t, op_name)


def _bounds(a):
    """[low, high) byte addresses an array's elements span."""
    lo = hi = backend.data_ptr(a)
    for n, st in zip(a.shape, a.strides):
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return lo, hi + a.itemsize


def _check_overlap(d, s, full_ok=True):
    """PyTorch refuses an in-place op whose operand partly overlaps the written-to tensor: both
    dense, their memory overlaps and they are not the very same elements (torch's
    get_overlap_status: operands it cannot judge simply, strided or expanded, pass). With
    `full_ok=False` (index_put_'s values) the very same elements are refused too."""
    if d.size == 0 or s.size == 0 or not is_dense(d) or not is_dense(s):
        return
    lo_d, hi_d = _bounds(d)
    lo_s, hi_s = _bounds(s)
    if full_ok and lo_d == lo_s and hi_d == hi_s and d.strides == s.strides:
        return  # the very same elements (x.add_(x), x[None] = x: torch compares strides)
    if lo_d < hi_s and lo_s < hi_d:
        raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                           "written-to tensor refer to a single memory location. Please clone() "
                           "the tensor before performing the operation.")


def _masked_fill_put(value, args):
    """index_put_ of one value through one bool mask: PyTorch runs masked_fill_ with the value
    read first, without the overlap check."""
    index, accumulate = args
    arrays = [i for i in index if hasattr(i, "dtype")]
    return not accumulate and value._data.size == 1 and len(arrays) == 1 and \
        arrays[0].dtype.kind in "bu"


def _same_data(a, b):
    return a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype and \
        backend.data_ptr(a) == backend.data_ptr(b)


def _cast_error(src, dst):
    return RuntimeError(f"result type {_np_name(src)} can't be cast to the desired output type "
                        f"{_np_name(dst)}")


def _np_name(dt):
    return dtypes.from_np(dt)._tensor_name[:-6]  # torch's ScalarType name: Float, Char, ...


def _ufunc_inplace(uf, t, other, args):
    """`t op= other` by `uf(d, other, out=d)`, when that is the out-of-place result written back:
    nothing to record (no operand requires grad, or grad mode is off), a float numpy target
    without stride-0 dims, `other` a Python number or a tensor of the same dtype on another
    storage. False (nothing written) otherwise, or when numpy refuses (shapes, a read-only
    target): the general path then gives PyTorch's behaviour or error."""
    d = t._data
    if type(d) is not _ND or d.dtype.kind != "f" or 0 in d.strides:
        return False
    if isinstance(other, Tensor):
        # (a tensor whose storage is not made yet, a byte count, shares memory with no other)
        st = other._storage_or_nbytes
        if type(st) is not int and st is t._storage_or_nbytes or \
                other._data.dtype is not d.dtype or (
                _GRAD.enabled and (t._requires_grad or other._requires_grad)):
            return False
        o = other._data
    elif type(other) is float or type(other) is int:
        if t._requires_grad and _GRAD.enabled:
            return False
        o = other
    else:
        return False
    if args and args[0] != 1:  # add_/sub_'s alpha, applied as the row's forward does
        o = args[0] * o
    try:
        uf(d, o, out=d)
    except ValueError:
        return False
    return True


def _write(t, d, res, unchecked):
    """d[...] = res. PyTorch refuses a target with internal overlap (a dimension of stride 0
    and size > 1: an expand) except for the rows flagged `unchecked_write` (fill_, zero_, ...);
    an expand without one is written (numpy's broadcast views are read-only: write through the
    storage's array instead)."""
    strides = d.strides
    overlap = 0 in strides and _overlapping(d.shape, strides)
    if overlap and not unchecked:
        _write_overlap_error()
    if overlap:  # only the elements the op writes (an unchanged alias must not undo them)
        if not getattr(d.flags, "writeable", True):
            d = backend.as_strided(t._storage._root, *_geom(t))
        changed = ~((res == d) | ((res != res) & (d != d)))
        d[changed] = res[changed]
        return
    try:
        d[...] = res
    except ValueError:
        if getattr(d.flags, "writeable", True):
            raise
        backend.as_strided(t._storage._root, *_geom(t))[...] = res


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
