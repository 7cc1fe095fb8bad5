"""LayerNorm, GroupNorm, RMSNorm (mirrors ``torch.nn.modules.normalization``)."""

from nbgrad import creation
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import _factory

__all__ = ["LayerNorm", "GroupNorm", "RMSNorm"]


def _affine_parameters(module, shape, affine, bias, kw):
    """weight (ones) and bias (zeros) of ``shape``, or None where not wanted; filled by
    reset_parameters as torch's (so their ``_version`` is 1, as in torch)."""
    module.register_parameter("weight", Parameter(creation.empty(shape, **kw)) if affine else None)
    module.register_parameter("bias", Parameter(creation.empty(shape, **kw))
                              if affine and bias else None)
    _reset_affine(module)


def _norm_settings(module, normalized_shape, eps, elementwise_affine, device, dtype):
    """LayerNorm's and RMSNorm's attributes (normalized_shape a tuple); returns the factory
    keywords for their parameters."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    module.normalized_shape = tuple(normalized_shape)
    module.eps = eps
    module.elementwise_affine = elementwise_affine
    return _factory(device, dtype)


def _reset_affine(module):
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims (mirrors ``torch.nn.LayerNorm``).

    Attributes: weight ones, bias zeros, both of ``normalized_shape``.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = _norm_settings(self, normalized_shape, eps, elementwise_affine, device, dtype)
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, kw)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        ns = self.normalized_shape
        s = input._data.shape
        if s[len(s) - len(ns):] != ns or len(s) < len(ns):
            ns = list(ns)
            raise RuntimeError(
                f"{self!r}: expected input (*, {', '.join(map(str, self.normalized_shape))}), "
                f"got {tuple(input.shape)}. Given normalized_shape={ns}, expected input with "
                f"shape [*, {str(ns)[1:-1]}], but got input of size{list(input.shape)}")
        params = self._parameters  # one dict read instead of two __getattr__ round trips
        return F.layer_norm(input, self.normalized_shape,
                            params["weight"] if "weight" in params else self.weight,
                            params["bias"] if "bias" in params else self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalise over groups of channels (mirrors ``torch.nn.GroupNorm``).

    Shape: (N, C, *) -> same. weight ones (C,), bias zeros (C,) when ``affine``.

    Raises:
        ValueError: num_channels not divisible by num_groups (torch's text); RuntimeError: an
            input whose dim 1 is not num_channels, naming the layer.
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, bias=True, device=None,
                 dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        kw = _factory(device, dtype)
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, (num_channels,), affine, bias, kw)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        if self.weight is not None and (input.ndim < 2 or input.shape[1] != self.num_channels):
            raise RuntimeError(
                f"{self!r}: expected input (N, {self.num_channels}, *), got "
                f"{tuple(input.shape)}. Expected weight to be a vector of size equal to the "
                f"number of channels in input, but got weight of shape "
                f"{list(self.weight.shape)} and input of shape {list(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dims (mirrors
    ``torch.nn.RMSNorm``; see ``F.rms_norm``).

    Shape: (*, *normalized_shape) -> same. Attributes: weight ones of ``normalized_shape``
    when ``elementwise_affine`` (no bias); eps None means ``finfo(dtype).eps``.
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        kw = _norm_settings(self, normalized_shape, eps, elementwise_affine, device, dtype)
        self.register_parameter("weight", Parameter(creation.empty(self.normalized_shape, **kw))
                                if elementwise_affine else None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
