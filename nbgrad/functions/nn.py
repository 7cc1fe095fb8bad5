"""The torch.* surface of the nn kernels (torch.conv2d, torch.max_pool2d, ...), each with
PyTorch's argument checks; torch.nn.functional calls these.
"""
from __future__ import annotations

from ..autograd.apply import apply
from ..ops import ROWS as R
from .args import type_name_of


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (torch.conv2d): input (N, C, H, W), weight (O, C/groups, kh, kw),
    bias (O,) -> (N, O, Ho, Wo). One ConvolutionBackward0 node.

    Raises:
        RuntimeError: PyTorch's messages for wrong ranks and channel counts.
    """
    x, w = input._data, weight._data
    if x.ndim != 4:
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                           f"input of size: {list(x.shape)}")
    if w.ndim != 4:
        raise RuntimeError(f"weight should have 4 dimensions for conv2d, got {w.ndim}")
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected "
                           f"input{list(x.shape)} to have {w.shape[1] * groups} channels, but got "
                           f"{x.shape[1]} channels instead")
    if x.dtype != w.dtype:
        raise RuntimeError(f"Input type ({type_name_of(input)}) and weight type "
                           f"({type_name_of(weight)}) should be the same")
    return apply(R["convolution"], (input, weight, bias), (stride, padding, dilation, groups))


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    """Max over (kh, kw) windows with -inf padding, and the flat H*W index of each maximum:
    (N, C, H, W) -> ((N, C, Ho, Wo), int64 indices). One MaxPool2DWithIndicesBackward0 node."""
    return _max_pool2d("max_pool2d_with_indices", input, kernel_size, stride, padding, dilation,
                       ceil_mode)


def _max_pool2d(row, input, kernel_size, stride, padding, dilation, ceil_mode):
    if input._data.ndim != 4:
        raise RuntimeError(f"max_pool2d: Expected 3D or 4D tensor for input, but got "
                           f"{list(input._data.shape)}")
    return apply(R[row], (input,), (kernel_size, stride, padding, dilation, ceil_mode))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling (torch.max_pool2d); the int64 indices are built only when asked for."""
    if return_indices:
        return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return _max_pool2d("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)
