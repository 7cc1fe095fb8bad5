"""The in-place forms (add_, mul_, exp_, clamp_, fill_, copy_, ...): the same rows applied with
``inplace=``, each bumping the version counter by exactly one.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..autograd.apply import apply
from ..autograd.record import index_arg
from ..ops import ROWS as R
from ..tensor import _dim, Tensor
from .registry import method
from .args import _C_NAMES, _filled_like, _t
from .views import _expand_shape
from .elementwise import (_alpha_first, _check_bool_sub, _clamp_bounds, _clamp_dtype,
                          _clamp_tensor, _scalar_arg)


def _ip_binary(row_name, op_name, alpha=False):
    row = R[row_name]
    if alpha:
        def f(self, other, *rest, alpha=1):
            if rest:
                other, alpha = _alpha_first(op_name, other, rest)
            if row_name == "sub":
                _check_bool_sub(self, other)
            return apply(row, (self, other), (alpha,), inplace=op_name)
    else:
        def f(self, other):
            return apply(row, (self, other), (), inplace=op_name)
    f.__name__ = op_name
    f.__doc__ = f"In-place {row_name} (torch.Tensor.{op_name}); bumps _version by 1."
    return f


add_ = method(_ip_binary("add", "add_", alpha=True))
sub_ = method(_ip_binary("sub", "sub_", alpha=True))
mul_ = method(_ip_binary("mul", "mul_"))


@method
def div_(self, other):
    """In-place true division (torch.Tensor.div_); bumps _version by 1.

    Raises:
        RuntimeError: an integer or bool tensor (its quotient is float; PyTorch's text)."""
    d = self._data.dtype
    if d.kind != "f":
        rt = dtypes.result_type(self._data, other._data if isinstance(other, Tensor) else other)
        rt = rt if rt.kind == "f" else dtypes.default_np()
        raise RuntimeError(f"result type {dtypes.from_np(rt)._tensor_name[:-6]} can't be cast "
                           f"to the desired output type {dtypes.from_np(d)._tensor_name[:-6]}")
    return apply(R["div"], (self, other), (), inplace="div_")


@method
def pow_(self, exponent):
    """In-place power (torch.Tensor.pow_); bumps _version by 1."""
    if isinstance(exponent, Tensor):
        return apply(R["pow_tt"], (self, exponent), (), inplace="pow_")
    return apply(R["pow"], (self,), (_scalar_arg(exponent),), inplace="pow_")


def _ip_unary(row_name, op_name):
    row = R[row_name]

    def f(self):
        return apply(row, (self,), (), inplace=op_name)
    f.__name__ = op_name
    f.__doc__ = f"In-place {row_name} (torch.Tensor.{op_name}); bumps _version by 1."
    return f


neg_ = method(_ip_unary("neg", "neg_"))
exp_ = method(_ip_unary("exp", "exp_"))
tanh_ = method(_ip_unary("tanh", "tanh_"))
sigmoid_ = method(_ip_unary("sigmoid", "sigmoid_"))
relu_ = method(_ip_unary("relu", "relu_"))
zero_ = method(_ip_unary("zero", "zero_"))
log_ = method(_ip_unary("log", "log_"))
sqrt_ = method(_ip_unary("sqrt", "sqrt_"))
abs_ = method(_ip_unary("abs", "abs_"))


@method
def clamp_(self, min=None, max=None):
    """In-place clamp (torch.Tensor.clamp_); bumps _version by 1."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    d = self._data.dtype
    rt = _clamp_dtype(self, min, max)
    bounds_are_tensors = isinstance(min, Tensor) or isinstance(max, Tensor)
    if not dtypes.can_cast(rt, d):  # (torch names the output type as C++ does for numbers)
        out = dtypes.from_np(d)._tensor_name[:-6] if bounds_are_tensors else _C_NAMES[d.name]
        raise RuntimeError(f"result type {dtypes.from_np(rt)._tensor_name[:-6]} can't be cast "
                           f"to the desired output type {out}")
    if bounds_are_tensors:
        if rt != d and not self._requires_grad:  # computed in the wider type, then written
            return self.copy_(_clamp_tensor(self, min, max))
        return apply(R["clamp_tensor"], (self,) + _clamp_bounds(self, min, max), (),
                     inplace="clamp_")
    if d.kind in "iu":  # a number out of the dtype's range wraps, as torch
        min, max = (b if type(b) is not int else int(dtypes.as_dtype(b, d)) for b in (min, max))
    return apply(R["clamp"], (self,), (min, max), inplace="clamp_")


clip_ = method(clamp_, "clip_")


@method
def fill_(self, value):
    """Fill with `value` in place (torch.Tensor.fill_); bumps _version by 1.

    `value` is a number or a 0-d Tensor; a Tensor is recorded as FillBackward3 and receives
    the sum of the gradient, as in PyTorch. Raises RuntimeError for a Tensor with dimensions."""
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value._data.ndim} dimensions.")
        return apply(R["fill_tensor"], (self, value), (), inplace="fill_")
    return apply(R["fill"], (self,), (_scalar_arg(value),), inplace="fill_")


@method
def copy_(self, src, non_blocking=False, *, _op_name="copy_"):
    """Copy `src` (broadcast, cast) into self (torch.Tensor.copy_); bumps _version by 1."""
    if not isinstance(src, Tensor):
        src = _filled_like(src, self)
    elif type(src._data) is not type(self._data):
        src = src.to(self.device)
    if src._data.dtype != self._data.dtype and self._data.dtype.kind not in "fc":
        src = src.detach().to(self.dtype)  # torch casts (float into int64 truncates)
    if src._data.shape != self._data.shape:
        _expand_shape(src._data.shape, self._data.shape)  # PyTorch's text if it can't broadcast
    return apply(R["copy"], (self, src), (), inplace=_op_name)


@method
def masked_fill_(self, mask, value):
    """In-place masked_fill (torch.Tensor.masked_fill_); bumps _version by 1."""
    m = index_arg(mask) if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype.kind != "b":
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{dtypes.from_np(m.dtype)}")
    if not isinstance(value, Tensor):
        return apply(R["masked_fill_scalar"], (self,), (_filled_like(value, self)._data, m),
                     inplace="masked_fill_")
    return apply(R["masked_fill"], (self, value), (m,), inplace="masked_fill_")


# ---- the in-place forms of the other elementwise functions --------------------------------------
sin_ = method(_ip_unary("sin", "sin_"))
cos_ = method(_ip_unary("cos", "cos_"))
log1p_ = method(_ip_unary("log1p", "log1p_"))
rsqrt_ = method(_ip_unary("rsqrt", "rsqrt_"))
reciprocal_ = method(_ip_unary("reciprocal", "reciprocal_"))
sign_ = method(_ip_unary("sign", "sign_"))
erf_ = method(_ip_unary("erf", "erf_"))
log10_ = method(_ip_unary("log10", "log10_"))
log2_ = method(_ip_unary("log2", "log2_"))
exp2_ = method(_ip_unary("exp2", "exp2_"))
expm1_ = method(_ip_unary("expm1", "expm1_"))
sinh_ = method(_ip_unary("sinh", "sinh_"))
cosh_ = method(_ip_unary("cosh", "cosh_"))
asin_ = method(_ip_unary("asin", "asin_"))
acos_ = method(_ip_unary("acos", "acos_"))
atan_ = method(_ip_unary("atan", "atan_"))
erfinv_ = method(_ip_unary("erfinv", "erfinv_"))
tan_ = method(_ip_unary("tan", "tan_"))
asinh_ = method(_ip_unary("asinh_", "asinh_"))
acosh_ = method(_ip_unary("acosh_", "acosh_"))
atanh_ = method(_ip_unary("atanh_", "atanh_"))
sinc_ = method(_ip_unary("sinc", "sinc_"))


@method
def logit_(self, eps=None):
    """In-place logit (torch.Tensor.logit_); bumps _version by 1."""
    return apply(R["logit"], (self,), (None if eps is None else float(eps),), inplace="logit_")


floor_ = method(_ip_unary("floor", "floor_"))
ceil_ = method(_ip_unary("ceil", "ceil_"))
trunc_ = method(_ip_unary("trunc", "trunc_"))
frac_ = method(_ip_unary("frac", "frac_"))
sgn_ = method(_ip_unary("sgn", "sgn_"))
arcsin_ = method(asin_, "arcsin_")
arccos_ = method(acos_, "arccos_")
arctan_ = method(atan_, "arctan_")
arcsinh_ = method(asinh_, "arcsinh_")
arccosh_ = method(acosh_, "arccosh_")
arctanh_ = method(atanh_, "arctanh_")
fix_ = method(trunc_, "fix_")


def _ip_binary_row(name):
    row = R[name]

    def f(self, other):
        return apply(row, (self, _t(other, self)), (), inplace=name + "_")
    f.__name__ = name + "_"
    f.__doc__ = f"In-place {name} (torch.Tensor.{name}_); bumps _version by 1."
    return f


atan2_ = method(_ip_binary_row("atan2"), "atan2_")
hypot_ = method(_ip_binary_row("hypot"), "hypot_")
arctan2_ = method(atan2_, "arctan2_")


@method
def xlogy_(self, other):
    """In-place xlogy (torch.Tensor.xlogy_); bumps _version by 1."""
    if isinstance(other, Tensor):
        return apply(R["xlogy"], (self, other), (), inplace="xlogy_")
    return apply(R["xlogy_scalar_other"], (self,), (float(other),), inplace="xlogy_")


def _ip_mod(name):
    def f(self, other):
        if isinstance(other, Tensor):
            return apply(R[name + "_tensor"], (self, other), (), inplace=name + "_")
        return apply(R[name], (self,), (other,), inplace=name + "_")
    f.__name__ = name + "_"
    f.__doc__ = f"In-place {name} (torch.Tensor.{name}_); bumps _version by 1."
    return f


fmod_ = method(_ip_mod("fmod"), "fmod_")
remainder_ = method(_ip_mod("remainder"), "remainder_")


@method
def round_(self, *, decimals=0):
    """In-place round (torch.Tensor.round_); bumps _version by 1."""
    if decimals == 0:
        return apply(R["round"], (self,), (), inplace="round_")
    return apply(R["round_decimals"], (self,), (decimals,), inplace="round_")


@method
def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
    """In-place nan_to_num (torch.Tensor.nan_to_num_); bumps _version by 1."""
    return apply(R["nan_to_num"], (self,), (nan, posinf, neginf), inplace="nan_to_num_")


@method
def square_(self):
    """In-place square (torch.Tensor.square_, PowBackward0); bumps _version by 1."""
    return pow_(self, 2)


@method
def lerp_(self, end, weight):
    """In-place lerp (torch.Tensor.lerp_); bumps _version by 1."""
    if isinstance(weight, Tensor):
        return apply(R["lerp_tensor"], (self, end, weight), (), inplace="lerp_")
    return apply(R["lerp"], (self, end), (weight,), inplace="lerp_")


@method
def addcmul_(self, tensor1, tensor2, *, value=1):
    """In-place addcmul (torch.Tensor.addcmul_); bumps _version by 1."""
    return apply(R["addcmul"], (self, tensor1, tensor2), (value,), inplace="addcmul_")


@method
def addcdiv_(self, tensor1, tensor2, *, value=1):
    """In-place addcdiv (torch.Tensor.addcdiv_); bumps _version by 1."""
    return apply(R["addcdiv"], (self, tensor1, tensor2), (value,), inplace="addcdiv_")


# ---- in-place clamps, aliases, scans, products and index_add_ -----------------------------------
@method
def clamp_min_(self, min):
    """In-place clamp_min (torch.Tensor.clamp_min_); bumps _version by 1."""
    return apply(R["clamp_min"], (self,), (min,), inplace="clamp_min_")


@method
def clamp_max_(self, max):
    """In-place clamp_max (torch.Tensor.clamp_max_); bumps _version by 1."""
    return apply(R["clamp_max"], (self,), (max,), inplace="clamp_max_")


absolute_ = method(abs_, "absolute_")
negative_ = method(neg_, "negative_")
subtract_ = method(sub_, "subtract_")
multiply_ = method(mul_, "multiply_")
divide_ = true_divide_ = method(div_, "divide_", "true_divide_")


@method
def cumsum_(self, dim, *, dtype=None):
    """In-place cumsum (torch.Tensor.cumsum_); bumps _version by 1."""
    return apply(R["cumsum"], (self,), (_dim(dim, self._data.ndim),), inplace="cumsum_")


@method
def cumprod_(self, dim, *, dtype=None):
    """In-place cumprod (torch.Tensor.cumprod_); bumps _version by 1."""
    return apply(R["cumprod"], (self,), (_dim(dim, self._data.ndim),), inplace="cumprod_")


@method
def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    """In-place addmm (torch.Tensor.addmm_); bumps _version by 1."""
    return apply(R["addmm"], (self, mat1, mat2), (beta, alpha), inplace="addmm_")


def _check_index_add(ix, source, d):
    n = source._data.shape[d] if source._data.ndim > d else 1
    if ix.size != n:
        raise RuntimeError(f"index_add_(): Number of indices ({ix.size}) should be equal to "
                           f"source.size(dim): ({n}), for dim: {d}")


@method
def index_add_(self, dim, index, source, *, alpha=1):
    """In-place index_add (torch.Tensor.index_add_); bumps _version by 1."""
    ix = index_arg(index) if isinstance(index, Tensor) else np.asarray(index)
    _check_index_add(ix, source, _dim(dim, self._data.ndim))
    if isinstance(source, Tensor) and source._data.dtype != self._data.dtype:
        from .args import scalar_name
        raise RuntimeError(f"index_add_(): self ({scalar_name(self)}) and source "
                           f"({scalar_name(source)}) must have the same scalar type")
    if alpha != 1:
        source = source * alpha
    return apply(R["index_add"], (self, source), (_dim(dim, self._data.ndim), ix),
                 inplace="index_add_")
