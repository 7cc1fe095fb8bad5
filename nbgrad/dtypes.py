"""dtypes with PyTorch's names (nbgrad.float32, nbgrad.int64, ...) over numpy's, and promotion."""
from __future__ import annotations

import builtins

import numpy as np

from .naming import expose, public


class dtype:
    """A tensor element type (torch.dtype). `is_floating_point`, `itemsize` (bytes)."""

    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "_tensor_name")

    def __init__(self, name, np_dtype, tensor_name):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = self.np.kind == "f"
        self.is_signed = self.np.kind in "fi"
        self.itemsize = self.np.itemsize
        self._tensor_name = tensor_name

    @property
    def is_complex(self):
        return False

    def to_real(self):
        return self

    def __repr__(self):
        return public(self.name)

    def __reduce__(self):
        return (from_name, (self.name,))


expose(dtype, "torch")
float32 = dtype("float32", np.float32, "FloatTensor")
float64 = dtype("float64", np.float64, "DoubleTensor")
float16 = dtype("float16", np.float16, "HalfTensor")
int64 = dtype("int64", np.int64, "LongTensor")
int32 = dtype("int32", np.int32, "IntTensor")
int16 = dtype("int16", np.int16, "ShortTensor")
int8 = dtype("int8", np.int8, "CharTensor")
uint8 = dtype("uint8", np.uint8, "ByteTensor")
bool_ = dtype("bool", np.bool_, "BoolTensor")
ALL = (float32, float64, float16, int64, int32, int16, int8, uint8, bool_)

_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(float=float32, double=float64, half=float16, long=int64, int=int32, short=int16)

_DEFAULT = [float32]


class layout:
    """A tensor memory layout (torch.layout): ``strided`` (every dense tensor) or ``sparse_coo``
    (nbgrad.sparse_coo's tensors: indices and values)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return public(self.name)

    def __reduce__(self):
        return (_layout_of, (self.name,))


expose(layout, "torch")
strided = layout("strided")
sparse_coo = layout("sparse_coo")


def _layout_of(name):
    return {"strided": strided, "sparse_coo": sparse_coo}[name]


class _unsupported_dtype:
    """A PyTorch dtype that nbgrad names but cannot store (numpy and cupy lack it): scripts that
    only mention it (``{'bfloat16': torch.bfloat16, ...}[dtype]``) run; making a tensor of it
    raises TypeError saying so."""

    __slots__ = ("name", "is_floating_point", "is_signed", "itemsize")

    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize
        self.is_floating_point = self.is_signed = True

    is_complex = False

    def __repr__(self):
        return public(self.name)


bfloat16 = _unsupported_dtype("bfloat16", 2)


def from_name(name):
    return _BY_NAME[name]


def from_np(np_dtype) -> dtype:
    """The nbgrad dtype of a numpy dtype (raises TypeError for unsupported ones)."""
    d = _BY_NP.get(np_dtype)
    if d is None:
        d = _BY_NP.get(np.dtype(np_dtype))
        if d is None:
            raise TypeError(f"nbgrad does not support the numpy dtype {np_dtype}")
    return d


def to_np(d):
    """numpy dtype for an nbgrad dtype, numpy dtype, Python type or string (None stays None)."""
    if d is None:
        return None
    if type(d) is dtype:
        return d.np
    if type(d) is _unsupported_dtype:
        raise TypeError(f"nbgrad does not support {d!r} tensors: numpy has no {d.name} type "
                        "(use float32 or float16)")
    if d is builtins.float:
        return _DEFAULT[0].np
    if d is builtins.int:
        return np.dtype(np.int64)
    if d is builtins.bool:
        return np.dtype(np.bool_)
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d].np
    try:
        return from_np(np.dtype(d)).np
    except TypeError:
        raise
    except Exception:
        raise TypeError(f"not a dtype: {d!r}") from None


def dtype_arg(fname, d, got=None):
    """The numpy dtype of a torch.* function's ``dtype=`` argument (None stays None): an nbgrad
    dtype, or Python's float, int, bool (float64, int64, bool, as torch).

    Raises:
        TypeError: anything else, a string or a numpy type (PyTorch's text; `got`, the
            positional arguments, for the functions whose text lists them).
    """
    if d is None or type(d) is dtype:
        return None if d is None else d.np
    if d is builtins.float:
        return np.dtype(np.float64)
    if d is builtins.int:
        return np.dtype(np.int64)
    if d is builtins.bool:
        return np.dtype(np.bool_)
    if type(d) is _unsupported_dtype:
        return to_np(d)
    if got is not None:  # (the functions with several signatures word it so)
        got = "".join(type(a).__name__ + ", " for a in got)
        raise TypeError(f"{fname}() received an invalid combination of arguments - got ({got}"
                        f"dtype={type(d).__name__}), but expected one of:")
    raise TypeError(f"{fname}(): argument 'dtype' must be torch.dtype, not {type(d).__name__}")


def get_default_dtype() -> dtype:
    """torch.get_default_dtype."""
    return _DEFAULT[0]


def set_default_dtype(d) -> None:
    """torch.set_default_dtype (float32 or float64)."""
    d = from_np(to_np(d))
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _DEFAULT[0] = d


def default_np():
    return _DEFAULT[0].np


def _leaf_types(data, found):
    """The types of the leaves of nested lists/tuples, added to the set ``found``."""
    kinds = set(map(type, data))
    for t in kinds:
        if t is list or t is tuple:
            for x in data:
                if type(x) is t:
                    _leaf_types(x, found)
        else:
            found.add(t)
    return found


def _scalars_dtype(types):
    """torch.tensor's dtype for leaves of these types when some are numpy scalars: a numpy
    scalar keeps its dtype, a Python float is the default dtype, a Python int int64; then
    PyTorch's promotion (a float beats any int: [np.int64(1), 2.5] is float32)."""
    dts = [np.dtype(t) if issubclass(t, np.generic) else
           _DEFAULT[0].np if t is builtins.float else
           np.dtype(np.int64) if t is builtins.int else np.dtype(np.bool_) for t in types]
    for kinds in ("f", "iu", "b"):
        picked = [d for d in dts if d.kind in kinds]
        if picked:
            out = picked[0]
            for d in picked[1:]:
                out = np.promote_types(out, d)
            return out
    return None


def infer_np_dtype(data):
    """numpy dtype for Python data as torch.tensor infers it (floats -> default, ints -> int64,
    numpy scalars their own dtype: torch.tensor([np.float64(1.0), 2.0]) is float64)."""
    arr = np.asarray(data)
    k = arr.dtype.kind
    if k in "fiu" and not isinstance(data, np.ndarray):
        if isinstance(data, np.generic):
            return data.dtype
        if isinstance(data, (list, tuple)):
            types = _leaf_types(data, set())
            if any(issubclass(t, np.generic) for t in types):
                dt = _scalars_dtype(types)
                if dt is not None and dt in _BY_NP:
                    return dt
    if k == "f":
        return _DEFAULT[0].np if not isinstance(data, np.ndarray) else arr.dtype
    if k in "iu":
        return arr.dtype if isinstance(data, np.ndarray) else np.dtype(np.int64)
    if k == "b":
        return np.dtype(np.bool_)
    if k == "O" or k == "U":
        raise TypeError(f"can't convert {type(data).__name__} to a tensor: unsupported data")
    return arr.dtype


# ---- promotion (torch.result_type): the one place every op takes its result dtype from ---------
# Categories, lowest first: bool < integer < floating. Operands come in three priorities:
# dimensioned tensors, 0-d tensors, then Python numbers ("wrapped numbers"); a lower priority
# changes the result only when it is of a higher category (int32 tensor + int64 0-d tensor is
# int32, + a 0-d float64 tensor float64, + 2.5 the default float dtype).

def _category(d):
    k = d.kind
    return 2 if k == "f" else 0 if k == "b" else 1


def promote_types(d1, d2):
    """torch.promote_types of two numpy dtypes: a float beats any integer whatever the sizes
    (int64 with float16 is float16); otherwise numpy's table, which is torch's for these."""
    if d1 is d2 or d1 == d2:
        return d1
    c1, c2 = _category(d1), _category(d2)
    if c1 != c2:
        return d1 if c1 > c2 else d2
    return np.promote_types(d1, d2)


def common_dtype(np_dtypes):
    """promote_types over several dtypes (cat and stack: every operand counts as dimensioned)."""
    out = None
    for d in np_dtypes:
        out = d if out is None else promote_types(out, d)
    return out


def _combine(higher, lower):
    """torch's combine_categories: `lower` (a less prioritised operand class) wins only when it
    is of a higher category than `higher`."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = _category(higher), _category(lower)
    if ch == 2:
        return higher
    if ch == 0 or cl == 2:
        return promote_types(higher, lower)
    return higher


def _scalar_np(x):
    """The dtype torch gives a Python number in promotion (float: the default dtype)."""
    t = type(x)
    if t is bool or t is np.bool_:
        return np.dtype(np.bool_)
    if t is int:
        return np.dtype(np.int64)
    if t is float:
        return _DEFAULT[0].np
    if isinstance(x, np.generic):
        return _scalar_np(x.item())
    if isinstance(x, int):
        return np.dtype(np.int64)
    if isinstance(x, float):
        return _DEFAULT[0].np
    raise TypeError(f"unsupported operand type: expected a Tensor or a Python number, got "
                    f"{t.__name__}")


def result_type(*operands):
    """torch.result_type of arrays (0-d arrays are 0-d tensors) and Python numbers."""
    dim = zero = wrapped = None
    for x in operands:
        if hasattr(x, "dtype") and not isinstance(x, np.generic):
            d = x.dtype
            if x.ndim:
                dim = d if dim is None else promote_types(dim, d)
            else:
                zero = d if zero is None else promote_types(zero, d)
        else:
            d = _scalar_np(x)
            wrapped = d if wrapped is None else promote_types(wrapped, d)
    return _combine(dim, _combine(zero, wrapped))


def promote_arrays(a, b):
    """Two arrays (0-d ones are 0-d tensors) in their torch.result_type: result_type's two-array
    case, without its general loop (the mixed-dtype path of every binary operator)."""
    if (a.ndim == 0) == (b.ndim == 0):
        dt = promote_types(a.dtype, b.dtype)
    elif a.ndim:
        dt = _combine(a.dtype, b.dtype)
    else:
        dt = _combine(b.dtype, a.dtype)
    return (a if a.dtype == dt else a.astype(dt)), (b if b.dtype == dt else b.astype(dt))


_INT_RANGE = {}


def int_fits(x, dt):
    """Whether the Python int `x` is in the range of the integer numpy dtype `dt` (else torch
    wraps it, where numpy raises or compares exactly)."""
    r = _INT_RANGE.get(dt)
    if r is None:
        info = np.iinfo(dt)
        r = _INT_RANGE[dt] = (int(info.min), int(info.max))
    return r[0] <= x <= r[1]


def can_cast(src, dst):
    """torch.can_cast of two numpy dtypes: everything but a float into an integer or bool, or
    an integer into bool (uint8 += int64 computes in int64 and writes uint8, as torch)."""
    if src.kind == "f":
        return dst.kind == "f"
    return dst.kind != "b" or src.kind == "b"


def as_dtype(x, dt):
    """Array or Python number `x` in the numpy dtype `dt`; integers wrap as torch's do
    (uint8 with -3 is 253), the array unchanged when it has that dtype already."""
    if hasattr(x, "dtype") and not isinstance(x, np.generic):
        return x if x.dtype == dt else x.astype(dt)
    if isinstance(x, np.generic):
        x = x.item()
    if dt.kind in "iu" and type(x) is not bool:
        if not int_fits(x, dt):
            return np.array(x & ((1 << (8 * dt.itemsize)) - 1)).astype(dt)[()]
    return dt.type(x)


def promote(*operands):
    """The operands (arrays or Python numbers) in their torch.result_type, and that dtype."""
    dt = result_type(*operands)
    return tuple(as_dtype(x, dt) for x in operands), dt
