"""Helpers the layer files share (torch keeps its ``_pair`` and friends in ``nn.modules.utils``):
factory keywords, Module's attribute bookkeeping and repr indentation."""

from nbgrad import dtypes
from nbgrad.tensor import Tensor


def _factory(device, dtype):
    kw = {}
    if device is not None:
        kw["device"] = device
    kw["dtype"] = dtype if dtype is not None else dtypes.get_default_dtype()
    return kw


def _addindent(s_, num_spaces):
    s = s_.split("\n")
    if len(s) == 1:
        return s_
    first = s.pop(0)
    s = [(num_spaces * " ") + line for line in s]
    return first + "\n" + "\n".join(s)


def _remove_from(name, *dicts_or_sets):
    for d in dicts_or_sets:
        if name in d:
            if isinstance(d, dict):
                del d[name]
            else:
                d.discard(name)


def _typename(obj):
    if isinstance(obj, Tensor):
        return "nbgrad." + type(obj).__name__ if type(obj).__name__ != "Tensor" else obj.type()
    return type(obj).__module__ + "." + type(obj).__qualname__ \
        if type(obj).__module__ not in ("builtins",) else type(obj).__qualname__


def _is_dtype(a):
    return isinstance(a, dtypes.dtype)
