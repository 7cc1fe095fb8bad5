"""default_collate and default_convert (mirror ``torch.utils.data._utils.collate``)."""

import collections.abc
import copy

import numpy as np

from nbgrad import creation
from nbgrad import dtypes
from nbgrad import functions
from nbgrad.tensor import Tensor

__all__ = ["default_collate", "default_convert"]


def _array_to_tensor(arr):
    if arr.dtype.kind in "USO":
        raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                        f"dicts or lists; found numpy array of dtype {arr.dtype}")
    return creation.from_numpy(np.ascontiguousarray(arr))


def _collate_fields(batch, elem):
    """Collate a batch of sequences field by field, keeping the container type as torch does."""
    size = len(elem)
    if any(len(e) != size for e in batch):
        raise RuntimeError("each element in list of batch should be of equal size")
    transposed = [default_collate(list(s)) for s in zip(*batch)]
    if isinstance(elem, tuple):
        return transposed  # torch returns a list for tuples (backwards compatibility)
    if isinstance(elem, collections.abc.MutableSequence):
        clone = copy.copy(elem)
        clone[:] = transposed
        return clone
    try:
        return type(elem)(transposed)
    except TypeError:
        return transposed


def default_collate(batch):
    """Stack a list of samples into a batch (mirrors ``torch.utils.data.default_collate``).

    - Tensors (each (*)) -> one tensor (B, *), by ``nbgrad.stack``;
    - numpy arrays and numpy scalars -> a tensor of their dtype, (B, *);
    - Python float -> float64 (B,), int -> int64 (B,), bool -> bool (B,);
    - str / bytes -> the list unchanged;
    - dict -> dict of collated fields; namedtuple -> namedtuple of collated fields;
      tuple -> a *list* of collated fields (as torch); list -> list of collated fields.

    Raises:
        RuntimeError: sequences of unequal length, or tensors of unequal shape (``stack``'s
            text); TypeError: an element of another type (torch's text).
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return functions.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        return _array_to_tensor(np.stack(batch))
    if isinstance(elem, np.generic):
        return _array_to_tensor(np.array(batch))
    if isinstance(elem, bool):
        return creation.tensor(batch, dtype=dtypes.bool_)
    if isinstance(elem, float):
        return creation.tensor(batch, dtype=dtypes.float64)
    if isinstance(elem, int):
        return creation.tensor(batch, dtype=dtypes.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            return type(elem)({key: default_collate([d[key] for d in batch]) for key in elem})
        except TypeError:
            return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        return _collate_fields(batch, elem)
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem)}")


def default_convert(data):
    """One sample, unbatched: numpy arrays become tensors, containers are converted per field
    (mirrors ``torch.utils.data.default_convert``, the collate of ``batch_size=None``)."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "USO":
        return creation.from_numpy(np.ascontiguousarray(data))
    if isinstance(data, np.generic) and data.dtype.kind not in "USO":
        return creation.from_numpy(np.array(data))
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data
