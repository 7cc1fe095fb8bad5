"""``nbgrad.finfo`` / ``nbgrad.iinfo``: the numeric limits of a dtype (torch.finfo, torch.iinfo)."""
from __future__ import annotations

import numpy as np

from . import dtypes

__all__ = ["finfo", "iinfo", "promote_types", "result_type", "can_cast"]


class finfo:
    """Limits of a floating dtype (torch.finfo); ``finfo()`` describes the default dtype.

    Attributes (Python floats, as torch's): ``bits``, ``eps`` (smallest x with 1 + x != 1),
    ``max``, ``min`` (most negative), ``tiny`` and ``smallest_normal`` (smallest positive normal
    number), ``resolution`` (10 ** -decimal digits); ``dtype`` is the name ("float32").

    Raises:
        TypeError: an integer or bool dtype (use :class:`iinfo`).
    """

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):
        d = dtypes.get_default_dtype() if type is None else type
        if not isinstance(d, dtypes.dtype) or not d.is_floating_point:
            raise TypeError("nbgrad.finfo() requires a floating point input type. Use "
                            "nbgrad.iinfo to handle 'nbgrad.finfo'")
        info = np.finfo(d.np)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)
        self.dtype = d.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (torch.iinfo): ``bits``, ``min``, ``max`` (Python ints),
    ``dtype`` (the name, "int64").

    Raises:
        TypeError: a floating dtype (use :class:`finfo`) or bool.
    """

    __slots__ = ("bits", "min", "max", "dtype")

    def __init__(self, type):
        if type is dtypes.bool_:
            raise TypeError("nbgrad.bool is not supported by nbgrad.iinfo")
        if not isinstance(type, dtypes.dtype) or type.is_floating_point:
            raise TypeError("nbgrad.iinfo() requires an integer input type. Use nbgrad.finfo "
                            "to handle 'nbgrad.iinfo'")
        info = np.iinfo(type.np)
        self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)
        self.dtype = type.name

    def __repr__(self):
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"


def _np_of(x, fname):
    if type(x) is dtypes.dtype:
        return x.np
    raise TypeError(f"{fname}(): argument must be torch.dtype, not {type(x).__name__}")


def promote_types(type1, type2):
    """The dtype of an op mixing tensors of these dtypes (torch.promote_types): a float beats
    any integer, bool loses to all."""
    return dtypes.from_np(dtypes.promote_types(_np_of(type1, "promote_types"),
                                               _np_of(type2, "promote_types")))


def result_type(tensor1, tensor2):
    """The dtype of an op on these operands, Tensors or Python numbers (torch.result_type): 0-d
    tensors and numbers count only when of a higher category (bool < int < float)."""
    def operand(x):
        return x._data if hasattr(x, "_data") else x
    return dtypes.from_np(dtypes.result_type(operand(tensor1), operand(tensor2)))


def can_cast(from_, to):
    """Whether torch's casting rules allow writing `from_` into `to` (torch.can_cast): all but
    a float into an integer or bool, or an integer into bool."""
    return dtypes.can_cast(_np_of(from_, "can_cast"), _np_of(to, "can_cast"))
