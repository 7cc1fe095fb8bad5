"""Convolutions: Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d (mirrors
``torch.nn.modules.conv``)."""

import math

from nbgrad import creation
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import _factory

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"]


def _ntuple(v, n):
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(f"expected an int or a {n}-tuple, got {v!r}")
        return tuple(int(x) for x in v)
    return (int(v),) * n


class _ConvNd(Module):
    """What every convolution shares: arguments, parameters, initialisation, repr.

    ``_n`` is the number of spatial dims; ``_transposed`` selects the weight layout
    (C_in, C_out / groups, *k) of the transposed convolutions.
    """

    _n = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 groups, bias, padding_mode, output_padding=0, device=None, dtype=None):
        super().__init__()
        n = self._n
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', "
                             f"'circular'], but got padding_mode='{padding_mode}'")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        kw = _factory(device, dtype)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(creation.empty(shape, **kw))
        if bias:
            self.bias = Parameter(creation.empty((out_channels,), **kw))
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

    def _check(self, input):
        n, c = self._n, self.in_channels
        shape = tuple(input.shape)
        dims = ("L", "H, W", "D, H, W")[n - 1]
        if len(shape) not in (n + 1, n + 2) or shape[-n - 1] != c:
            if len(shape) not in (n + 1, n + 2):
                why = (f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                       f"conv{'_transpose' if self.transposed else ''}{n}d, but got input of "
                       f"size: {list(shape)}")
            else:  # torch's text: the weight's shape and the (batched) input's
                w = list(self.weight.shape)
                given = "transposed=1" if self.transposed else f"groups={self.groups}"
                why = (f"Given {given}, weight of size {w}, expected input"
                       f"{list(shape if len(shape) == n + 2 else (1,) + shape)} to have {c} "
                       f"channels, but got {shape[-n - 1]} channels instead")
            raise RuntimeError(f"{self!r}: expected input (N, {c}, {dims}) or ({c}, {dims}), "
                               f"got {shape}. {why}")

    def _prepad(self, input):
        """padding_mode other than zeros: pad explicitly, then convolve without padding."""
        if self.padding_mode == "zeros":
            return input, self.padding
        if isinstance(self.padding, str):
            total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pads = [(t // 2, t - t // 2) for t in total] if self.padding == "same" else \
                [(0, 0)] * self._n
        else:
            pads = [(p, p) for p in self.padding]
        flat = [v for lo_hi in reversed(pads) for v in lo_hi]
        return F.pad(input, flat, mode=self.padding_mode), 0

    def forward(self, input):
        self._check(input)
        input, padding = self._prepad(input)
        return self._conv(input, self.weight, self.bias, self.stride, padding, self.dilation,
                          self.groups)

    def extra_repr(self):
        n = self._n
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * n:
            s += ", padding={padding}"
        if self.dilation != (1,) * n:
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * n:
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class Conv1d(_ConvNd):
    """1-D convolution (mirrors ``torch.nn.Conv1d``).

    Shape: (N, C_in, L) or (C_in, L) -> (N, C_out, L_out). weight (C_out, C_in / groups, k),
    bias (C_out,), both ``kaiming_uniform_(a=sqrt(5))``-style as torch.

    Raises:
        RuntimeError: wrong rank or channel count, naming the layer and the shapes.
    """

    _n = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)

    _conv = staticmethod(F.conv1d)


class Conv2d(_ConvNd):
    """2-D convolution (mirrors ``torch.nn.Conv2d``; im2col on strided views + one matmul).

    Args:
        in_channels, out_channels (int); kernel_size, stride=1, padding=0 (or "same"/"valid"),
        dilation=1 (int or pair); groups=1; bias=True; padding_mode "zeros" | "reflect" |
        "replicate" | "circular".

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
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)

    _conv = staticmethod(F.conv2d)


class Conv3d(_ConvNd):
    """3-D convolution (mirrors ``torch.nn.Conv3d``): (N, C_in, D, H, W) or (C_in, D, H, W) ->
    (N, C_out, D_out, H_out, W_out); weight (C_out, C_in / groups, kd, kh, kw) and bias
    initialised as torch's; the arguments as :class:`Conv2d`'s, ints or triples.

    Raises:
        RuntimeError: wrong rank or channel count, naming the layer.
    """

    _n = 3

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)

    _conv = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device=device, dtype=dtype)

    def _output_padding(self, input, output_size):
        """torch's rule: an ``output_size`` picks the output_padding that reaches it."""
        if output_size is None:
            return self.output_padding
        n = self._n
        output_size = tuple(output_size)[-n:]
        pads = []
        for d in range(n):
            size = input.shape[d - n]
            base = ((size - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            extra = output_size[d] - base
            if not 0 <= extra < max(self.stride[d], self.dilation[d]):
                raise ValueError(f"requested an output size of {list(output_size)}, but valid "
                                 f"sizes range from {base} to "
                                 f"{base + max(self.stride[d], self.dilation[d]) - 1}")
            pads.append(extra)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution (mirrors ``torch.nn.ConvTranspose1d``).

    Shape: (N, C_in, L) or (C_in, L) -> (N, C_out, L_out),
    ``L_out = (L - 1) s - 2p + d (k - 1) + output_padding + 1``; weight (C_in, C_out / g, k).
    """

    _n = 1

    def forward(self, input, output_size=None):
        self._check(input)
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution (mirrors ``torch.nn.ConvTranspose2d``).

    Shape: (N, C_in, H, W) or (C_in, H, W) -> (N, C_out, H_out, W_out); weight
    (C_in, C_out / groups, kh, kw). ``forward(input, output_size)`` picks the output_padding.
    """

    def forward(self, input, output_size=None):
        self._check(input)
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)
