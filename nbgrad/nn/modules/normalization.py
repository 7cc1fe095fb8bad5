"""LayerNorm (mirrors ``torch.nn.modules.normalization``)."""

import nbgrad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import _factory

__all__ = ["LayerNorm"]


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims (mirrors ``torch.nn.LayerNorm``).

    Attributes: weight ones, bias zeros, both of ``normalized_shape``.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = _factory(device, dtype)
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(nbgrad.ones(self.normalized_shape, **kw))
            if bias:
                self.bias = Parameter(nbgrad.zeros(self.normalized_shape, **kw))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        k = len(self.normalized_shape)
        if tuple(input.shape[input.ndim - k:]) != self.normalized_shape or input.ndim < k:
            raise RuntimeError(
                f"{self!r}: expected input (*, {', '.join(map(str, self.normalized_shape))}), "
                f"got {tuple(input.shape)}")
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")
