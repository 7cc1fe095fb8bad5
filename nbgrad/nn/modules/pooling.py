"""Pooling: MaxPool2d, AvgPool2d (mirrors ``torch.nn.modules.pooling``)."""

from .. import functional as F
from .module import Module

__all__ = ["MaxPool2d", "AvgPool2d"]


class _Pool2d(Module):
    def _check(self, input):
        if input.ndim not in (3, 4):
            raise RuntimeError(
                f"{self!r}: expected input (N, C, H, W) or (C, H, W), got {tuple(input.shape)}")


class MaxPool2d(_Pool2d):
    """Max over sliding windows (mirrors ``torch.nn.MaxPool2d``; stride defaults to kernel_size).

    Shape: (N, C, H, W) or (C, H, W) -> (N, C, H_out, W_out).
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        self._check(input)
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return ("kernel_size={kernel_size}, stride={stride}, padding={padding}, "
                "dilation={dilation}, ceil_mode={ceil_mode}".format(**self.__dict__))


class AvgPool2d(_Pool2d):
    """Mean over sliding windows (mirrors ``torch.nn.AvgPool2d``)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        self._check(input)
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
