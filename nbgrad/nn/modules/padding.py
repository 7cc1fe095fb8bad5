"""Padding layers (mirrors ``torch.nn.modules.padding``): ZeroPad1d/2d, ConstantPad1d/2d,
ReflectionPad1d/2d, ReplicationPad1d/2d, CircularPad1d/2d."""

from .. import functional as F
from .module import Module

__all__ = ["ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d",
           "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d",
           "CircularPad2d"]


class _Pad(Module):
    """``F.pad`` with a fixed ``padding`` (an int: every side) and ``_mode``; ``_dims``
    spatial dims."""

    _mode = "constant"
    _dims = 1

    def __init__(self, padding, value=0.0):
        super().__init__()
        if isinstance(padding, int):
            padding = (padding,) * (2 * self._dims)
        self.padding = tuple(padding)
        if self._mode == "constant":
            self.value = value

    def forward(self, input):
        d = self._dims
        if input.ndim not in (d + 1, d + 2):
            raise ValueError(f"{type(self).__name__}: expected {d + 1}D or {d + 2}D input, got "
                             f"{input.ndim}D input of shape {tuple(input.shape)}")
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        if self._mode == "constant" and not type(self).__name__.startswith("Zero"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


class ConstantPad1d(_Pad):
    """Pad the last dim with ``value`` (mirrors ``torch.nn.ConstantPad1d``)."""


class ConstantPad2d(_Pad):
    """Pad the last two dims with ``value`` (mirrors ``torch.nn.ConstantPad2d``)."""

    _dims = 2


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros (mirrors ``torch.nn.ZeroPad1d``)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dims with zeros (mirrors ``torch.nn.ZeroPad2d``)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_Pad):
    """Mirror the last dim at its edges (mirrors ``torch.nn.ReflectionPad1d``)."""

    _mode = "reflect"


class ReflectionPad2d(_Pad):
    """Mirror the last two dims at their edges (mirrors ``torch.nn.ReflectionPad2d``)."""

    _mode, _dims = "reflect", 2


class ReplicationPad1d(_Pad):
    """Repeat the edge values of the last dim (mirrors ``torch.nn.ReplicationPad1d``)."""

    _mode = "replicate"


class ReplicationPad2d(_Pad):
    """Repeat the edge values of the last two dims (mirrors ``torch.nn.ReplicationPad2d``)."""

    _mode, _dims = "replicate", 2


class CircularPad1d(_Pad):
    """Wrap the last dim around (mirrors ``torch.nn.CircularPad1d``)."""

    _mode = "circular"


class CircularPad2d(_Pad):
    """Wrap the last two dims around (mirrors ``torch.nn.CircularPad2d``)."""

    _mode, _dims = "circular", 2
