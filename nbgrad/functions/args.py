"""Helpers every torch.* function shares: tensors from numbers, PyTorch's out= semantics,
argument checks with PyTorch's error texts, broadcast and type-name helpers.
"""
from __future__ import annotations

import builtins

from .. import backend, creation, dtypes, _torch_errors
from ..autograd.apply import _broadcast_error
from ..autograd.record import _mask
from ..autograd.grad_mode import no_grad, STATE as _GRAD
from ..tensor import Tensor, type_name


_builtin_max, _builtin_min, _builtin_sum, _builtin_abs = builtins.max, builtins.min, builtins.sum, \
    builtins.abs


def _t(x, like=None):
    """A Tensor for `x` (numbers become 0-d tensors of a matching dtype)."""
    if isinstance(x, Tensor):
        return x
    if like is not None and isinstance(x, (int, float, bool)):
        kind = like._data.dtype.kind
        if kind == "f" or (kind in "iu" and type(x) is not float) or type(x) is bool:
            return _filled_like(x, like)
    return creation.tensor(x)


def _filled_like(value, like):
    """`value` (a number or array-like) as a tensor of `like`'s dtype, on `like`'s device (an
    int out of an integer dtype's range wraps, as in torch)."""
    return Tensor._make_fresh(_filled_array(value, like))


def _filled_array(value, like):
    """`_filled_like`'s array alone (what a row takes as an argument)."""
    if type(value) is int:
        value = dtypes.as_dtype(value, like._data.dtype)
    return backend.get_array_module(like._data).asarray(value, like._data.dtype)


def _check_tensor(x, fname, arg="input", position=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fname}(): argument '{arg}' (position {position}) must be Tensor, not "
                        f"{type(x).__name__}")


def _out(name, fn, inputs, out):
    """Run `fn()` and write its result into `out` (PyTorch's out= semantics)."""
    if _GRAD.enabled and _mask(inputs):
        raise _torch_errors.out_requires_grad(name)
    with no_grad():
        r = fn()
    return creation.write_out(out, r, name)


def _broadcast_batch(ba, bb):
    """The broadcast of two batch shapes (tuple), or PyTorch's error."""
    n = builtins.max(len(ba), len(bb))
    out = []
    for x, y in zip((1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb):
        if x != y and x != 1 and y != 1:
            raise _broadcast_error(ba, bb)
        out.append(y if x == 1 else x)
    return tuple(out)


def type_name_of(t):
    """'nbgrad.FloatTensor'-style type string of a tensor (for error messages)."""
    return type_name(t._data.dtype, t._data)


def _xp(t):
    return backend.get_array_module(t._data)


# torch's C++ names of the dtypes, as its dtype-mismatch texts print them
_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool"}


def c_name(t):
    """torch's C++ name of a tensor's dtype ("double", "long int"), for its error texts."""
    return _C_NAMES[t._data.dtype.name]


def conv_dtypes(input, weight, bias, transposed=False):
    """torch's dtype checks of a convolution (it never promotes): RuntimeError with its texts.
    A bias of another dtype is named first, except for a transposed convolution, which adds a
    bias of another floating dtype into its output (and refuses one it cannot cast into it)."""
    dt = input._data.dtype
    if not transposed and bias is not None and bias._data.dtype != dt:
        raise RuntimeError(f"Input type ({c_name(input)}) and bias type ({c_name(bias)}) should "
                           "be the same")
    if weight._data.dtype != dt:
        raise RuntimeError(f"expected scalar type {scalar_name(input)} but found "
                           f"{scalar_name(weight)}")
    if transposed and bias is not None and bias._data.dtype != dt and dt.kind != "f":
        raise RuntimeError(f"result type {scalar_name(bias)} can't be cast to the desired output "
                           f"type {scalar_name(input)}")


def scalar_name(t):
    """torch's ScalarType name of a tensor's dtype ("Double", "Long")."""
    return type_name(t._data.dtype, t._data).split(".")[-1][:-6]


def check_same_dtype(tensors, text):
    """Raise RuntimeError(text(tensors)) when the tensors (None skipped) differ in dtype: the
    matmul family and the layers built on it do not promote (torch)."""
    dt = None
    for t in tensors:
        if t is not None:
            if dt is None:
                dt = t._data.dtype
            elif t._data.dtype != dt:
                raise RuntimeError(text())
