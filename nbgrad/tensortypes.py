"""The legacy tensor types of PyTorch: ``torch.FloatTensor``, ``torch.LongTensor``, ...

Each is a constructor of one dtype — ``LongTensor([1, 2])`` is an int64 tensor of that data,
``FloatTensor(2, 3)`` an uninitialised float32 tensor of that size — and an ``isinstance``
check by dtype: ``isinstance(t, FloatTensor)`` holds for a float32 CPU tensor only (as
``torch.tensortype`` does). Old tutorials build their index tensors with ``LongTensor``.
"""
from __future__ import annotations

from . import dtypes
from .naming import public
from .creation import empty, tensor
from .tensor import Tensor


class tensortype(type):
    """The class of ``FloatTensor`` and its kind (torch.tensortype)."""

    def __instancecheck__(cls, obj):
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype
                and obj.device.type == "cpu")

    def __call__(cls, *args, device=None):
        """``T(data)`` -> a tensor of the data; ``T(*sizes)`` -> an uninitialised tensor.

        Raises:
            TypeError: arguments that are neither data nor sizes (PyTorch's wording).
        """
        if len(args) == 1 and not isinstance(args[0], int):
            return tensor(args[0], dtype=cls.dtype, device=device)
        if not args:
            return empty(0, dtype=cls.dtype, device=device)
        if not all(isinstance(a, int) for a in args):
            raise TypeError(f"new(): invalid data type '{type(args[0]).__name__}'")
        return empty(*args, dtype=cls.dtype, device=device)

    def __repr__(cls):
        return f"<class '{public(cls.__name__)}'>"


def _make(name, dt):
    return tensortype(name, (), {"dtype": dt, "__module__": "nbgrad"})


FloatTensor = _make("FloatTensor", dtypes.float32)
DoubleTensor = _make("DoubleTensor", dtypes.float64)
HalfTensor = _make("HalfTensor", dtypes.float16)
LongTensor = _make("LongTensor", dtypes.int64)
IntTensor = _make("IntTensor", dtypes.int32)
ShortTensor = _make("ShortTensor", dtypes.int16)
CharTensor = _make("CharTensor", dtypes.int8)
ByteTensor = _make("ByteTensor", dtypes.uint8)
BoolTensor = _make("BoolTensor", dtypes.bool_)
