"""PyTorch's words for the errors students meet first, where numpy would say something else.

Each helper is called on a path that is already failing (or, for 0-dim indexing, on a 0-dim
tensor only), so the common path pays nothing.
"""
from __future__ import annotations

import numbers

import numpy as np

_ITEM_HINT = ("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
              "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")


def check_0d_index(idx):
    """Raise torch's IndexError for ``s[0]`` / ``s[1:]`` / ``s[[0]]`` on a 0-dim tensor ``s``.

    Only a bare int or slice (not inside a tuple) has the first two texts in torch; any other
    index that selects along a dimension is "too many indices for tensor of dimension 0".
    """
    if isinstance(idx, slice):
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, (bool, np.bool_)):
        if idx == 0:
            raise IndexError(_ITEM_HINT)
        raise IndexError(f"index {int(idx)} is out of bounds for dimension 0 with size 0")
    for i in idx if isinstance(idx, tuple) else (idx,):
        if not (i is None or i is Ellipsis or isinstance(i, (bool, np.bool_)) or
                (hasattr(i, "dtype") and i.dtype.kind == "b" and i.ndim == 0)):
            raise IndexError("too many indices for tensor of dimension 0")


def check_index(ndim, index):
    """Before numpy sees an advanced index: torch's "too many indices for tensor of dimension
    N" (a bool mask counts its dims), then, when index arrays (ints, or bool masks as their
    nonzero coordinates) do not broadcast, "... could not be broadcast together with shapes
    [2], [3]"."""
    used, shapes = 0, []
    for i in index:
        if i is None or i is Ellipsis:
            continue
        if hasattr(i, "dtype") and hasattr(i, "shape"):
            if i.dtype.kind == "b":
                used += i.ndim
                shapes += [(int(i.sum()),)] * i.ndim
                continue
            shapes.append(tuple(i.shape))
        used += 1
    if used > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    if len(shapes) < 2:
        return
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                         "shapes " + ", ".join(str(list(s)) for s in shapes)) from None


def out_requires_grad(name):
    """torch's refusal of ``out=`` when an input requires grad (grad mode on)."""
    return RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                        "differentiation, but one of the arguments requires grad.")


def _is_seq(x):
    if isinstance(x, (list, tuple)):
        return True
    return hasattr(x, "ndim") and hasattr(x, "__len__") and x.ndim > 0  # Tensor, ndarray


def _leaves(x):
    if _is_seq(x) and isinstance(x, (list, tuple)):
        for y in x:
            yield from _leaves(y)
    else:
        yield x


def data_error(data, numpy_error):
    """The exception torch.tensor(data) raises for data numpy could not turn into an array:
    ragged nesting ("expected sequence of length 2 at dim 1 (got 1)"), a scalar where a
    sequence belongs ("not a sequence"), strings, None or other objects."""
    for leaf in _leaves(data):
        if isinstance(leaf, str):
            return TypeError(f"new(): invalid data type '{type(leaf).__name__}'")
        if not (isinstance(leaf, (numbers.Number, np.generic, np.ndarray, list, tuple))
                or _is_seq(leaf) or hasattr(leaf, "item")):
            return RuntimeError(f"Could not infer dtype of {type(leaf).__name__}")
    sizes, seq = [], data
    while _is_seq(seq):
        sizes.append(len(seq))
        if not len(seq):
            break
        seq = seq[0]
    floating = any(isinstance(v, (float, np.floating)) for v in _leaves(data))

    def walk(obj, dim):
        if dim == len(sizes):
            if _is_seq(obj):
                return TypeError(f"must be real number, not {type(obj).__name__}" if floating
                                 else f"'{type(obj).__name__}' object cannot be interpreted as "
                                 "an integer")
            return None
        if not _is_seq(obj):
            return TypeError("not a sequence")
        if len(obj) != sizes[dim]:
            return ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} "
                              f"(got {len(obj)})")
        for item in obj:
            err = walk(item, dim + 1)
            if err is not None:
                return err
        return None

    return walk(data, 0) or ValueError(f"could not make a tensor from this data: {numpy_error}")


class _LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError (its class is torch._C._LinAlgError): a factorization LAPACK
    could not complete; a RuntimeError."""


LinAlgError = _LinAlgError
