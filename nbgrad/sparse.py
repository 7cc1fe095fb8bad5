"""torch.sparse: ``sparse_coo_tensor`` (exported as ``torch.sparse_coo_tensor``), the constructor
of nbgrad.sparse_coo's tensors."""
import warnings

import numpy as np

from . import backend
from .creation import tensor as _tensor
from .sparse_coo import SparseCOO
from .tensor import Tensor

__all__ = ["sparse_coo_tensor"]

_WARNED = []


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor of ``values`` at ``indices`` (mirrors ``torch.sparse_coo_tensor``):
    ``indices`` (sparse_dim, nnz) integers, ``values`` (nnz, *dense dims); ``size`` inferred
    from the largest index of each sparse dimension and the values' trailing shape when not
    given. Not coalesced (unless ``is_coalesced=True`` or it has one entry at most); indices
    are not checked against ``size`` (torch's default, ``check_invariants`` off)."""
    if not _WARNED:
        _WARNED.append(True)
        warnings.warn("Sparse invariant checks are implicitly disabled. Memory errors (e.g. "
                      "SEGFAULT) will occur when operating on a sparse tensor which violates the "
                      "invariants, but checks incur performance overhead. To silence this "
                      "warning, explicitly opt in or out. See "
                      "`torch.sparse.check_sparse_tensor_invariants.__doc__` for guidance. ",
                      UserWarning, stacklevel=2)
    idx = indices._data if isinstance(indices, Tensor) else _tensor(indices)._data
    val = values if isinstance(values, Tensor) else _tensor(values)
    if dtype is not None:
        val = val.to(dtype)
    val = val._data
    idx = np.asarray(backend.to_device(idx, backend.CPU), np.int64)
    if idx.ndim != 2:
        idx = idx.reshape(idx.shape[0] if idx.ndim else 1, -1)
    sparse_dim, dense_dim = idx.shape[0], val.ndim - 1
    if size is None:
        size = tuple((idx.max(1) + 1).tolist() if idx.shape[1] else [0] * sparse_dim) + \
            tuple(val.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sparse_dim + dense_dim:
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                           f"{len(size)}, sparse_dim = {sparse_dim}, dense_dim = {dense_dim}")
    return SparseCOO._of(idx.copy(), np.array(val, copy=True), size,
                         bool(is_coalesced) or idx.shape[1] < 2, requires_grad)
