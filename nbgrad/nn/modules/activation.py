"""Activations: ReLU, LeakyReLU, GELU, Tanh, Sigmoid, Softmax, LogSoftmax
(mirrors ``torch.nn.modules.activation``; MultiheadAttention also lives here, as in torch).
"""

from .. import functional as F
from .module import Module

__all__ = ["ReLU", "LeakyReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax"]


class ReLU(Module):
    """max(x, 0) elementwise (mirrors ``torch.nn.ReLU``)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.relu_() if self.inplace else input.relu()

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x if x > 0 else negative_slope * x (mirrors ``torch.nn.LeakyReLU``)."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """Gaussian error linear unit (mirrors ``torch.nn.GELU``; approximate "none" or "tanh")."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """tanh elementwise (mirrors ``torch.nn.Tanh``)."""

    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    """1 / (1 + exp(-x)) elementwise (mirrors ``torch.nn.Sigmoid``)."""

    def forward(self, input):
        return input.sigmoid()


class Softmax(Module):
    """Softmax along ``dim`` (mirrors ``torch.nn.Softmax``)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along ``dim`` (mirrors ``torch.nn.LogSoftmax``)."""

    def forward(self, input):
        return F.log_softmax(input, self.dim)
