"""Pooling (mirrors ``torch.nn.modules.pooling``): MaxPool1d/2d/3d, AvgPool1d/2d/3d,
AdaptiveAvgPool1d/2d/3d, AdaptiveMaxPool1d/2d, LPPool1d/2d/3d, MaxUnpool1d/2d/3d."""

from .. import functional as F
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "MaxPool3d",
           "AvgPool3d", "AdaptiveAvgPool3d", "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d",
           "MaxUnpool2d", "MaxUnpool3d"]


class _PoolNd(Module):
    """Input check shared by the pooling layers: ``_n`` spatial dims, batched or not."""

    _n = 2

    def _check(self, input):
        n = self._n
        if input.ndim not in (n + 1, n + 2):
            dims = ("L", "H, W", "D, H, W")[n - 1]
            raise RuntimeError(f"{self!r}: expected input (N, C, {dims}) or (C, {dims}), got "
                               f"{tuple(input.shape)}")


class _MaxPoolNd(_PoolNd):
    _fn = None

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
        return getattr(F, self._fn)(input, self.kernel_size, self.stride, self.padding,
                                    self.dilation, ceil_mode=self.ceil_mode,
                                    return_indices=self.return_indices)

    def extra_repr(self):
        return ("kernel_size={kernel_size}, stride={stride}, padding={padding}, "
                "dilation={dilation}, ceil_mode={ceil_mode}".format(**self.__dict__))


class MaxPool1d(_MaxPoolNd):
    """Max over sliding windows of (N, C, L) or (C, L) (mirrors ``torch.nn.MaxPool1d``)."""

    _n, _fn = 1, "max_pool1d"


class MaxPool2d(_MaxPoolNd):
    """Max over sliding windows (mirrors ``torch.nn.MaxPool2d``; stride defaults to kernel_size).

    Shape: (N, C, H, W) or (C, H, W) -> (N, C, H_out, W_out).
    """

    _fn = "max_pool2d"


class MaxPool3d(_MaxPoolNd):
    """Max over (kd, kh, kw) windows of (N, C, D, H, W) or (C, D, H, W) (``torch.nn.MaxPool3d``)."""

    _n, _fn = 3, "max_pool3d"


class AvgPool2d(_PoolNd):
    """Mean over sliding windows (mirrors ``torch.nn.AvgPool2d``)."""

    _fn = "avg_pool2d"

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
        return getattr(F, self._fn)(input, self.kernel_size, self.stride, self.padding,
                                    self.ceil_mode, self.count_include_pad,
                                    self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(AvgPool2d):
    """Mean over (kd, kh, kw) windows of (N, C, D, H, W) or (C, D, H, W)
    (``torch.nn.AvgPool3d``)."""

    _n, _fn = 3, "avg_pool3d"


def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class AvgPool1d(_PoolNd):
    """Mean over sliding windows of (N, C, L) or (C, L) (mirrors ``torch.nn.AvgPool1d``)."""

    _n = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        self._check(input)
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(_PoolNd):
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        if self._fn.startswith("adaptive_max"):
            self.return_indices = return_indices

    def forward(self, input):
        self._check(input)
        fn = getattr(F, self._fn)
        if self._fn.startswith("adaptive_max"):
            return fn(input, self.output_size, self.return_indices)
        return fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average over torch's adaptive windows to ``output_size`` (AdaptiveAvgPool1d)."""

    _fn, _n = "adaptive_avg_pool1d", 1

    def __init__(self, output_size):
        super().__init__(output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average over torch's adaptive windows to ``output_size`` (AdaptiveAvgPool2d;
    ``AdaptiveAvgPool2d(1)`` is global average pooling)."""

    _fn = "adaptive_avg_pool2d"

    def __init__(self, output_size):
        super().__init__(output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    """Max over torch's adaptive windows to ``output_size`` (AdaptiveMaxPool1d)."""

    _fn, _n = "adaptive_max_pool1d", 1


class AdaptiveMaxPool2d(_AdaptivePool):
    """Max over torch's adaptive windows to ``output_size`` (AdaptiveMaxPool2d)."""

    _fn = "adaptive_max_pool2d"


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average over torch's adaptive windows to ``output_size`` (AdaptiveAvgPool3d)."""

    _fn, _n = "adaptive_avg_pool3d", 3

    def __init__(self, output_size):
        super().__init__(output_size)


class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return getattr(F, self._fn)(input, float(self.norm_type), self.kernel_size, self.stride,
                                    self.ceil_mode)

    def extra_repr(self):
        return ("norm_type={norm_type}, kernel_size={kernel_size}, stride={stride}, "
                "ceil_mode={ceil_mode}".format(**self.__dict__))


class LPPool1d(_LPPoolNd):
    """Power-average pooling ``(sum x^p)^(1/p)`` over (N, C, L) or (C, L) windows (mirrors
    ``torch.nn.LPPool1d``; see ``F.lp_pool1d``)."""
    _fn = "lp_pool1d"


class LPPool2d(_LPPoolNd):
    """Power-average pooling over (N, C, H, W) or (C, H, W) windows (mirrors
    ``torch.nn.LPPool2d``)."""
    _fn = "lp_pool2d"


class LPPool3d(_LPPoolNd):
    """Power-average pooling over (N, C, D, H, W) or (C, D, H, W) windows (mirrors
    ``torch.nn.LPPool3d``)."""
    _fn = "lp_pool3d"


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _MaxUnpoolNd(Module):
    _fn = None
    _n = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _tuple(kernel_size, self._n)
        self.stride = _tuple(stride if stride is not None else kernel_size, self._n)
        self.padding = _tuple(padding, self._n)

    def forward(self, input, indices, output_size=None):
        return getattr(F, self._fn)(input, indices, self.kernel_size, self.stride, self.padding,
                                    output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d(return_indices=True)`` (mirrors
    ``torch.nn.MaxUnpool1d``; ``forward(input, indices, output_size=None)``)."""
    _fn, _n = "max_unpool1d", 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d(return_indices=True)`` (mirrors
    ``torch.nn.MaxUnpool2d``)."""
    _fn, _n = "max_unpool2d", 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d(return_indices=True)`` (mirrors
    ``torch.nn.MaxUnpool3d``)."""
    _fn, _n = "max_unpool3d", 3
