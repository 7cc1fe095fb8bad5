"""Convolutions: Conv2d (mirrors ``torch.nn.modules.conv``)."""

import math

import nbgrad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import _factory

__all__ = ["Conv2d"]


class Conv2d(Module):
    """2-D convolution (mirrors ``torch.nn.Conv2d``; im2col on strided views + one matmul).

    Args:
        in_channels, out_channels (int); kernel_size, stride=1, padding=0 (or "same"/"valid"),
        dilation=1 (int or pair); groups=1; bias=True; padding_mode="zeros" only.

    Shape:
        (N, C_in, H, W) or (C_in, H, W) -> (N, C_out, H_out, W_out).

    Attributes:
        weight: (C_out, C_in / groups, kh, kw), ``kaiming_uniform_(a=sqrt(5))``.
        bias: (C_out,), U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C_in / groups * kh * kw.

    Raises:
        RuntimeError: wrong rank or channel count, naming the layer.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise NotImplementedError("Conv2d: only padding_mode='zeros' is supported")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and F._pair(stride) != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
        kw = _factory(device, dtype)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = F._pair(kernel_size)
        self.stride = F._pair(stride)
        self.padding = padding if isinstance(padding, str) else F._pair(padding)
        self.dilation = F._pair(dilation)
        self.transposed = False
        self.output_padding = (0, 0)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(nbgrad.empty(
            (out_channels, in_channels // groups) + self.kernel_size, **kw))
        if bias:
            self.bias = Parameter(nbgrad.empty((out_channels,), **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        shape = tuple(input.shape)
        c = self.in_channels
        if len(shape) not in (3, 4) or shape[-3] != c:
            raise RuntimeError(
                f"{self!r}: expected input (N, {c}, H, W) or ({c}, H, W), got {shape}")
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0, 0):
            s += ", padding={padding}"
        if self.dilation != (1, 1):
            s += ", dilation={dilation}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        return s.format(**self.__dict__)
