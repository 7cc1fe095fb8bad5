"""The one place that puts methods and operators onto Tensor: every method a function declared
(nbgrad/functions/registry.py), the operators (``+``, ``@``, ``[]``, ...), and the Tensor-only
behaviour of nbgrad/functions/tensor_methods.py. Runs once, when nbgrad.functions is imported."""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend, creation, dtypes
from ..autograd import variable
from ..autograd.apply import apply
from ..ops import ROWS as R
from ..random import multinomial
from ..sampling import (bernoulli, bernoulli_, cauchy_, exponential_, geometric_, log_normal_,
                        normal_, random_, uniform_)
from ..tensor import Tensor, type_name
from .registry import METHODS
from .args import _t
from .views import _shape_arg, permute, reshape, to_dtype, transpose, view
from .comparison import (bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or,
                         bitwise_right_shift, bitwise_xor, eq, ge, gt, le, lt, ne)
from .elementwise import (_as_float, _check_bool_sub, abs, add, div, floor_divide, mul, neg, pow,
                          reciprocal, remainder, rsub, where)
from .inplace import add_, div_, mul_, pow_, sub_
from .indexing import getitem, setitem
from .linalg import matmul
from .composite import _repeat
from .tensor_methods import (_new, _new_like, _sparse_only, _sum_to_size, _to, _to_device, _type,
                             as_strided_, legacy_init, resize_, resize_as_, squeeze_, t_,
                             transpose_, unsqueeze_)


def _invert(t):
    """``~t`` (torch: a TypeError for a float tensor; bitwise_not's is NotImplementedError)."""
    if t._data.dtype.kind == "f":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return bitwise_not(t)


_OPERANDS = (Tensor, numbers.Number, np.ndarray, np.generic, list, tuple)


def _compare(f):
    """A comparison operator: NotImplemented for an operand that is no number or tensor (a str,
    None), so that Python answers as for torch: == False, != True, < "not supported"."""
    def op(s, o):
        __tracebackhide__ = True
        return f(s, o) if isinstance(o, _OPERANDS) else NotImplemented
    op.__name__ = f"__{f.__name__}__"
    return op


def bind():
    """Put the torch.* functions, the operators and the Tensor-only methods onto Tensor."""
    T = Tensor
    T.__init__ = legacy_init
    T.values = _sparse_only("values", "tensor ")
    T.indices = _sparse_only("indices", "coordinate tensor ")
    variable.bind(T)
    # operators: the functions themselves where the argument order allows (fewer frames in a
    # traceback); the three hottest apply their row directly
    add_row, sub_row, mul_row, one = R["add"], R["sub"], R["mul"], (1,)

    def __add__(s, o):
        __tracebackhide__ = True
        return apply(add_row, (s, o), one)

    def __sub__(s, o):
        __tracebackhide__ = True
        if s._data.dtype.kind == "b" or type(o) is bool or (isinstance(o, Tensor) and
                                                            o._data.dtype.kind == "b"):
            _check_bool_sub(s, o)
        return apply(sub_row, (s, o), one)

    def __mul__(s, o):
        __tracebackhide__ = True
        return apply(mul_row, (s, o))
    T.__add__, T.__sub__, T.__mul__ = __add__, __sub__, __mul__
    T.__radd__ = add
    T.__rsub__ = rsub
    T.__rmul__ = mul
    T.__truediv__ = div
    T.__rtruediv__ = lambda s, o: mul(reciprocal(_as_float(s)), o)
    T.__floordiv__ = floor_divide
    T.__rfloordiv__ = lambda s, o: div(o, s, rounding_mode="floor")
    T.__mod__ = remainder
    T.__rmod__ = lambda s, o: remainder(o, s)
    T.__pow__ = pow
    T.__rpow__ = lambda s, o: pow(o, s)
    T.__matmul__ = matmul
    T.__rmatmul__ = lambda s, o: matmul(_t(o), s)
    T.__neg__ = neg
    T.__pos__ = lambda s: s
    T.__abs__ = abs
    T.__invert__ = _invert
    T.__and__ = T.__rand__ = bitwise_and
    T.__or__ = T.__ror__ = bitwise_or
    T.__xor__ = T.__rxor__ = bitwise_xor
    T.__lshift__ = bitwise_left_shift
    T.__rshift__ = bitwise_right_shift
    T.__rlshift__ = lambda s, o: bitwise_left_shift(o, s)
    T.__rrshift__ = lambda s, o: bitwise_right_shift(o, s)
    T.__eq__, T.__ne__, T.__lt__ = _compare(eq), _compare(ne), _compare(lt)
    T.__le__, T.__gt__, T.__ge__ = _compare(le), _compare(gt), _compare(ge)
    T.__iadd__ = add_
    T.__isub__ = sub_
    T.__imul__ = mul_
    T.__itruediv__ = div_
    T.__ipow__ = pow_
    T.__getitem__ = getitem
    T.__setitem__ = setitem
    # the functions' own methods, as each declared it (@method)
    for name, fn in METHODS.items():
        setattr(T, name, fn)
    # the random fills and samplers (nbgrad/sampling.py, nbgrad/random.py)
    for fn in (uniform_, normal_, bernoulli_, exponential_, random_, geometric_, cauchy_,
               log_normal_, bernoulli, multinomial):
        setattr(T, fn.__name__, fn)
    T.where = lambda s, condition, other: where(condition, s, other)
    T.to = _to
    T.view_as = lambda s, o: view(s, tuple(o.shape))
    T.reshape_as = lambda s, o: reshape(s, tuple(o.shape))
    T.type_as = lambda s, o: to_dtype(s, o.dtype)
    T.T = property(lambda s: permute(s, *range(s._data.ndim - 1, -1, -1)))
    T.mT = property(lambda s: transpose(s, -2, -1))
    T.float = lambda s: to_dtype(s, dtypes.float32)
    T.double = lambda s: to_dtype(s, dtypes.float64)
    T.half = lambda s: to_dtype(s, dtypes.float16)
    T.long = lambda s: to_dtype(s, dtypes.int64)
    T.int = lambda s: to_dtype(s, dtypes.int32)
    T.short = lambda s: to_dtype(s, dtypes.int16)
    T.char = lambda s: to_dtype(s, dtypes.int8)
    T.byte = lambda s: to_dtype(s, dtypes.uint8)
    T.bool = lambda s: to_dtype(s, dtypes.bool_)
    T.cpu = lambda s: _to_device(s, backend.CPU)
    T.cuda = lambda s, device=None: _to_device(s, backend.device("cuda", device or 0))
    T.type = _type
    T.new = _new
    T.unsqueeze_, T.squeeze_, T.transpose_, T.t_, T.resize_, T.as_strided_ = (
        unsqueeze_, squeeze_, transpose_, t_, resize_, as_strided_)
    T.resize_as_ = resize_as_
    T.swapdims_ = T.swapaxes_ = transpose_
    T.type_name = lambda s: type_name(s._data.dtype, s._data)
    T.new_zeros = _new_like("zeros")
    T.new_ones = _new_like("ones")
    T.new_empty = _new_like("empty")
    T.new_full = lambda s, size, fill_value, dtype=None, device=None, requires_grad=False: \
        creation.full(
            size, fill_value, dtype=dtype or s.dtype, device=device or s.device,
            requires_grad=requires_grad)
    T.new_tensor = lambda s, data, dtype=None, device=None, requires_grad=False: \
        creation.tensor(
            data, dtype=dtype or s.dtype, device=device or s.device,
            requires_grad=requires_grad)
    T.repeat = lambda s, *sizes: _repeat(s, _shape_arg(sizes))
    T.sum_to_size = lambda s, *size: _sum_to_size(s, _shape_arg(size))
