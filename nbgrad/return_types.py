"""torch.return_types: the named tuples ops return (``torch.max(x, 0)``'s values and indices,
``torch.linalg.svd``'s U, S and Vh, ...), printed as PyTorch prints its structseqs::

    torch.return_types.max(
    values=tensor([3., 5.]),
    indices=tensor([1, 0]))

(``nbgrad.return_types.max(`` without the torch alias, see :mod:`nbgrad.naming`). Each type is
an attribute of this module under PyTorch's name for it (``linalg_svd`` for torch.linalg.svd,
``svd`` for torch.svd), so it pickles and reads as ``torch.return_types.<name>``.
"""
from __future__ import annotations

import collections

from . import naming

__all__ = []


def _repr(self):
    fields = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
    return f"{naming.public('return_types')}.{type(self).__name__}(\n{fields})"


def structseq(name, fields):
    """The named tuple PyTorch returns as ``torch.return_types.<name>`` with these fields (one
    class per name: asking again returns it)."""
    fields = tuple(fields.split()) if isinstance(fields, str) else tuple(fields)
    cls = globals().get(name)
    if cls is not None:
        if cls._fields != fields:
            raise ValueError(f"return type {name!r} already has fields {cls._fields}")
        return cls
    cls = type(name, (collections.namedtuple(name, fields),),
               {"__slots__": (), "__repr__": _repr, "__module__": __name__})
    globals()[name] = cls
    __all__.append(name)
    return naming.expose(cls, "torch.return_types")
