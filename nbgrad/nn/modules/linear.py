"""Linear layers: Identity, Linear, Bilinear (mirrors ``torch.nn.modules.linear``)."""

import math

from nbgrad import creation
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import _factory

__all__ = ["Identity", "Linear", "NonDynamicallyQuantizableLinear", "Bilinear"]


class Identity(Module):
    """Returns its input (mirrors ``torch.nn.Identity``)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x W^T + b`` (mirrors ``torch.nn.Linear``).

    Args:
        in_features (int), out_features (int), bias (bool): default True.

    Shape:
        input (*, in_features) -> output (*, out_features).

    Attributes:
        weight: (out_features, in_features), ``kaiming_uniform_(a=sqrt(5))``, i.e.
            U(-1/sqrt(in_features), 1/sqrt(in_features)).
        bias: (out_features,), U(-1/sqrt(in_features), 1/sqrt(in_features)).

    Raises:
        RuntimeError: ``Linear(in_features=64, out_features=10): expected input (*, 64), got
            (32, 65)`` (the class in torch's error, ``mat1 and mat2 shapes cannot be multiplied``).
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        kw = _factory(device, dtype)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(creation.empty((out_features, in_features), **kw))
        if bias:
            self.bias = Parameter(creation.empty((out_features,), **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        shape = input._data.shape
        if not shape or shape[-1] != self.in_features:
            name = f"Linear(in_features={self.in_features}, out_features={self.out_features}"
            name += ")" if self.bias is not None else ", bias=False)"
            raise RuntimeError(
                f"{name}: expected input (*, {self.in_features}), got {tuple(shape)}")
        params = self._parameters  # one dict read instead of two __getattr__ round trips
        # weight_norm and similar re-parametrisations replace the parameter by an attribute
        weight = params["weight"] if "weight" in params else self.weight
        bias = params["bias"] if "bias" in params else self.bias
        return F.linear(input, weight, bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under another name: MultiheadAttention's ``out_proj`` (as in torch, whose
    quantization tooling skips this class); only the repr differs."""


class Bilinear(Module):
    """``y = x1^T W x2 + b`` (mirrors ``torch.nn.Bilinear``).

    Shape: (*, in1_features), (*, in2_features) -> (*, out_features). weight
    (out, in1, in2) and bias (out,) ~ U(-1/sqrt(in1), 1/sqrt(in1)).
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        kw = _factory(device, dtype)
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(creation.empty((out_features, in1_features, in2_features), **kw))
        if bias:
            self.bias = Parameter(creation.empty((out_features,), **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
