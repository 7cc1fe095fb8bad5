"""``nbgrad.finfo`` / ``nbgrad.iinfo``: the numeric limits of a dtype (torch.finfo, torch.iinfo)."""
from __future__ import annotations

import numpy as np

from . import dtypes

__all__ = ["finfo", "iinfo"]


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
