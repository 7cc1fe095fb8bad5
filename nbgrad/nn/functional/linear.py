"""linear and bilinear. ``linear`` records PyTorch's decomposition (t, view, mm or addmm,
unsafe_view) as one fused node (nbgrad/autograd/fused.py); the chain is built on demand.
"""
import numpy as np

from nbgrad import functions
from nbgrad.functions.args import c_name, check_same_dtype, scalar_name
from nbgrad.autograd import fused
from nbgrad.autograd.apply import apply
from nbgrad.autograd.views import _apply_view
from nbgrad.autograd.grad_mode import STATE as _GRAD
from nbgrad.ops import ROWS
from nbgrad.ops.formulas import NUMPY
from nbgrad.ops.derivatives import _reduce_to
from nbgrad.tensor import Tensor, strides_of


def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (mirrors ``torch.nn.functional.linear``).

    Args:
        input (Tensor): (*, in_features).
        weight (Tensor): (out_features, in_features).
        bias (Tensor, optional): (out_features,).

    Returns:
        Tensor: (*, out_features); with a bias, on 2-D or contiguous input, one
        ``AddmmBackward0`` node (N-d input viewed to 2-D and back), as torch.
    """
    x, w = input._data, weight._data
    if x.dtype is not w.dtype or (bias is not None and bias._data.dtype is not w.dtype):
        _linear_dtype_error(input, weight, bias)
    if (x.ndim >= 2 and w.ndim == 2 and x.shape[-1] == w.shape[1] and x.dtype is w.dtype
            and type(x) is type(w) and x.flags.c_contiguous
            and (bias is None or (bias._data.shape == w.shape[:1] and bias._data.dtype is x.dtype
                                  and type(bias._data) is type(x)))):
        # the usual case, checked: torch's nodes (TBackward0, [ViewBackward0,] MmBackward0 /
        # AddmmBackward0, [UnsafeViewBackward0 / ViewBackward0]), recorded as one node when
        # something requires grad (nbgrad.autograd.fused)
        graph = _GRAD.enabled and (input._requires_grad or weight._requires_grad or
                                   bias is not None and bias._requires_grad)
        if not graph:  # nothing to record (no_grad, eval): the arrays' product, the chain's values
            if x.ndim == 2:
                out = _MM.fwd(x, _T.fwd(w)) if bias is None else \
                    _ADDMM.fwd(bias._data, x, _T.fwd(w), 1, 1)
                return Tensor._make_fresh(out)
            if bias is None:
                return Tensor._make_fresh(_UNSAFE_VIEW.fwd(_MM.fwd(
                    _VIEW.fwd(x, (x.size // x.shape[-1], x.shape[-1])), _T.fwd(w)),
                    x.shape[:-1] + w.shape[:1]))
            out = Tensor._make_fresh(_ADDMM.fwd(bias._data, _VIEW.fwd(
                x, (x.size // x.shape[-1], x.shape[-1])), _T.fwd(w), 1, 1))
            # viewed back (torch's _base): the view row's own application, `apply`'s first step
            return _apply_view(_VIEW, out, (x.shape[:-1] + w.shape[:1],))
        fuse = type(x) is np.ndarray and fused.usable()
        if bias is None:
            return _linear_fused(input, weight) if fuse and x.ndim > 2 else \
                _linear_chain(input, weight)
        out = _addmm_fused(bias, input, weight) if fuse else _addmm_chain(bias, input, weight)
        return out if x.ndim == 2 else apply(ROWS["view"], (out,), (x.shape[:-1] + w.shape[:1],))
    if bias is not None and input.ndim == 2:
        return functions.addmm(bias, input, weight.t())
    if bias is not None and input.ndim > 2 and bias.ndim == 1 and input.is_contiguous():
        # torch's fused path for contiguous N-d input: addmm on a 2-D view, viewed back
        out = functions.addmm(bias, input.view(-1, input.shape[-1]), weight.t())
        return out.view((*input.shape[:-1], out.shape[-1]))
    out = input.matmul(weight.t())
    if bias is not None:
        out.add_(bias)  # in place, as torch's linear (the output's _version is 1)
    return out


def _linear_chain(input, weight):
    """linear without bias on (N, *, in) contiguous input as torch records it: TBackward0,
    [ViewBackward0,] MmBackward0, [UnsafeViewBackward0]."""
    x, w = input._data, weight._data
    wt = apply(ROWS["t"], (weight,))
    if x.ndim == 2:
        return apply(ROWS["mm"], (input, wt))
    x2 = apply(ROWS["view"], (input,), ((x.size // x.shape[-1], x.shape[-1]),))
    return apply(ROWS["unsafe_view"], (apply(ROWS["mm"], (x2, wt)),),
                 (x.shape[:-1] + w.shape[:1],))


def _linear_fused(input, weight):
    """`_linear_chain` recorded as one UnsafeViewBackward0 node (nbgrad.autograd.fused) whose
    backward runs the chain's formulas (unsafe_view, mm, view, t) on arrays."""
    x, w = input._data, weight._data
    rows = x.size // x.shape[-1]
    x2 = _VIEW.fwd(x, (rows, x.shape[-1]))
    out2 = _MM.fwd(x2, _T.fwd(w))
    out = Tensor._make_fresh(_UNSAFE_VIEW.fwd(out2, x.shape[:-1] + w.shape[:1]))
    rx, rw = input._requires_grad, weight._requires_grad
    fused.record(out, _UNSAFE_VIEW.node, (out2.shape,), (input, weight),
                 ("self" if rw else None, "mat2" if rx else None), rx + rw + 1,
                 _linear_fused_backward, _linear_chain,
                 (rows, x.shape, out2.shape, _mm_strides(x2, w)))
    return out


def _mm_strides(x2, w):
    """The strides (in elements) mm's formulas read: of the input viewed as (rows, in), `x2`,
    and of the weight's transpose."""
    return strides_of(x2), strides_of(w)[::-1]


def _linear_fused_backward(node, g, arrays):
    """The chain's formulas in the order its nodes would run: unsafe_view, mm, then view (the
    input's) and t (the weight's)."""
    x, w = arrays
    rows, x_shape, out2_shape, (x2_strides, wt_strides) = node._chain.info
    g2 = _UNSAFE_VIEW.vjp(0, g, out2_shape)
    (cx, _), (cw, _) = node._next
    gx = gw = None
    if cx is not None:  # (mm's saved values: mat2, self_strides, self, mat2_strides)
        gx = _VIEW.vjp(0, _MM.vjp(0, g2, _T.fwd(w), x2_strides, None, None), x_shape)
    if cw is not None:
        gw = _T.vjp(0, _MM.vjp(1, g2, None, None, _VIEW.fwd(x, (rows, x_shape[-1])),
                               wt_strides))
    return [gx, gw]


def _addmm_chain(bias, input, weight):
    """linear's product with a bias as torch records it: TBackward0, [ViewBackward0,]
    AddmmBackward0 (the 2-D result; N-d input is viewed back by the caller)."""
    x = input._data
    wt = apply(ROWS["t"], (weight,))
    x2 = input if x.ndim == 2 else apply(ROWS["view"], (input,), ((x.size // x.shape[-1],
                                                                   x.shape[-1]),))
    return apply(ROWS["addmm"], (bias, x2, wt), (1, 1))


def _addmm_fused(bias, input, weight):
    """`_addmm_chain` recorded as one AddmmBackward0 node (nbgrad.autograd.fused) whose edges
    go to bias, input and weight, and whose backward runs the chain's formulas (addmm, then
    view for the input, t for the weight) on arrays."""
    x, w = input._data, weight._data
    rows = x.size // x.shape[-1]
    x2 = x if x.ndim == 2 else _VIEW.fwd(x, (rows, x.shape[-1]))
    out = Tensor._make_fresh(_ADDMM.fwd(bias._data, x2, _T.fwd(w), 1, 1))
    rx, rw = input._requires_grad, weight._requires_grad
    fused.record(out, _ADDMM.node, (), (bias, input, weight),
                 (None, "mat1" if rw else None, "mat2" if rx else None),
                 rw + (rx if x.ndim > 2 else 0), _addmm_fused_backward,
                 _addmm_chain,
                 (rows, x.shape, bias._data.shape, _mm_strides(x2, w)))
    return out


def _addmm_fused_backward(node, g, arrays):
    """The chain's formulas in the order its nodes would run: addmm (the bias's gradient summed
    over the rows), then view (the input's) and t (the weight's)."""
    _, x, w = arrays
    rows, x_shape, b_shape, (x2_strides, wt_strides) = node._chain.info
    (cb, _), (cx, _), (cw, _) = node._next
    x2 = None if x is None else x if len(x_shape) == 2 else _VIEW.fwd(x, (rows, x_shape[-1]))
    # addmm's saved values: beta, mat2, mat1_strides, alpha, mat1, mat2_strides
    saved = (1, None if w is None else _T.fwd(w), x2_strides, 1, x2, wt_strides)
    gb = gx = gw = None
    if cb is not None:
        gb = _reduce_to(_ADDMM.vjp(0, g, *saved), b_shape, None, NUMPY)
    if cx is not None:
        gx = _ADDMM.vjp(1, g, *saved)
        if len(x_shape) > 2:
            gx = _VIEW.vjp(0, gx, x_shape)
    if cw is not None:
        gw = _T.vjp(0, _ADDMM.vjp(2, g, *saved))
    return [gb, gx, gw]


_MM, _VIEW, _T, _UNSAFE_VIEW = ROWS["mm"], ROWS["view"], ROWS["t"], ROWS["unsafe_view"]
_ADDMM = ROWS["addmm"]
# the orders of the saved values _addmm_fused_backward and _linear_fused_backward pass
assert _ADDMM.names == ("beta", "mat2", "mat1_strides", "alpha", "mat1", "mat2_strides")
assert _MM.names == ("mat2", "self_strides", "self", "mat2_strides")


def _linear_dtype_error(input, weight, bias):
    """torch's texts for a linear whose operands differ in dtype (no promotion)."""
    if bias is None or input._data.ndim == 1:
        check_same_dtype((input, weight), lambda: f"expected m1 and m2 to have the same dtype, "
                         f"but got: {c_name(input)} != {c_name(weight)}")
    check_same_dtype((bias, weight), lambda: f"self and mat2 must have the same dtype, but got "
                     f"{scalar_name(bias)} and {scalar_name(weight)}")
    check_same_dtype((input, weight), lambda: f"mat1 and mat2 must have the same dtype, but got "
                     f"{scalar_name(input)} and {scalar_name(weight)}")


def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1^T W_o x2 + b_o`` (mirrors ``F.bilinear``; torch's graph: a TrilinearBackward0
    node between views).

    Shapes: input1 (*, in1), input2 (*, in2), weight (out, in1, in2), bias (out,) -> (*, out).

    Raises:
        RuntimeError: sizes that do not match the weight.
    """
    check_same_dtype((input1, input2, weight, bias), lambda: (
        f"All tensors must have the same dtype, got input1: {c_name(input1)}, input2: "
        f"{c_name(input2)}, weight: {c_name(weight)}"
        + (f", bias: {c_name(bias)}" if bias is not None else "")))
    o, i1, i2 = weight.shape
    if input1.shape[-1] != i1 or input2.shape[-1] != i2 or \
            tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise RuntimeError(f"bilinear: expected input1 (*, {i1}) and input2 (*, {i2}) with the "
                           f"same leading dims, got {list(input1.shape)} and "
                           f"{list(input2.shape)}")
    lead = tuple(input1.shape[:-1])
    out = apply(ROWS["_trilinear"], (input1.reshape(-1, i1), weight, input2.reshape(-1, i2)))
    out = out.reshape(*lead, o)
    return out + bias if bias is not None else out
