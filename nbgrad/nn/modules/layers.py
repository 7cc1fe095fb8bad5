"""Layers: Linear, Conv2d, pooling, activations, Dropout, normalisation, Embedding, Flatten.

Each mirrors the torch.nn class of the same name: constructor arguments, defaults, parameter
names and shapes, default initialisation, ``extra_repr``. A wrong input shape raises an error
that names the layer (its repr), the expected and the given shape.
"""

import math

import nbgrad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = [
    "Identity", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "Flatten", "Unflatten",
    "ReLU", "LeakyReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding",
]


def _factory(device, dtype):
    kw = {}
    if device is not None:
        kw["device"] = device
    kw["dtype"] = dtype if dtype is not None else nbgrad.get_default_dtype()
    return kw


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
        self.weight = Parameter(nbgrad.empty((out_features, in_features), **kw))
        if bias:
            self.bias = Parameter(nbgrad.empty((out_features,), **kw))
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
        weight, bias = params["weight"], params["bias"]
        if bias is not None and len(shape) == 2:
            return nbgrad.addmm(bias, input, weight.t())  # F.linear's 2-D path, inlined
        return F.linear(input, weight, bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


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


class Flatten(Module):
    """Flatten dims ``start_dim..end_dim`` (mirrors ``torch.nn.Flatten``; (N, *) -> (N, -1))."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (mirrors ``torch.nn.Unflatten``)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


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


class Dropout(Module):
    """Zero elements with probability p in training, scale the rest by 1/(1-p) (torch.nn.Dropout).

    Raises:
        ValueError: p outside [0, 1].
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class _BatchNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, bias=True):
        super().__init__()
        kw = _factory(device, dtype)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        self._has_bias = bias
        if affine:
            self.weight = Parameter(nbgrad.empty((num_features,), **kw))
            if bias:
                self.bias = Parameter(nbgrad.empty((num_features,), **kw))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", nbgrad.zeros((num_features,), **kw))
            self.register_buffer("running_var", nbgrad.ones((num_features,), **kw))
            self.register_buffer("num_batches_tracked", nbgrad.tensor(0, dtype=nbgrad.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with nbgrad.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise RuntimeError(
                f"{self!r}: expected input with {self.num_features} channels in dim 1, got "
                f"{tuple(input.shape)}")
        eaf = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with nbgrad.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                eaf = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or self.running_mean is None
        return F.batch_norm(
            input,
            self.running_mean if not self.training or self.track_running_stats else None,
            self.running_var if not self.training or self.track_running_stats else None,
            self.weight, self.bias, use_batch, eaf, self.eps)

    def extra_repr(self):
        return ("{num_features}, eps={eps}, momentum={momentum}, affine={affine}, "
                "bias={use_bias}, track_running_stats={track_running_stats}"
                .format(**self.__dict__, use_bias=self.bias is not None))


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) (mirrors ``torch.nn.BatchNorm1d``).

    Attributes: weight ones (C,), bias zeros (C,); buffers running_mean zeros, running_var ones,
    num_batches_tracked (int64 scalar).

    Raises:
        ValueError: ``expected 2D or 3D input (got 4D input)``, naming the layer.
    """

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input) for {self!r}; "
                             f"input shape {tuple(input.shape)}")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) per channel (mirrors ``torch.nn.BatchNorm2d``).

    Raises:
        ValueError: ``expected 4D input (got 3D input)``, naming the layer.
    """

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input) for {self!r}; "
                             f"input shape {tuple(input.shape)}")


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


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors (mirrors ``torch.nn.Embedding``).

    Shape: int64 (*) -> (*, embedding_dim). weight ~ N(0, 1), the ``padding_idx`` row zeroed
    and excluded from gradients.

    Raises:
        IndexError: an index outside [0, num_embeddings), naming the layer.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        kw = _factory(device, dtype)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, "Padding_idx must be within num_embeddings"
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq, sparse unsupported")
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(nbgrad.empty((num_embeddings, embedding_dim), **kw),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with nbgrad.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        ids = input._data
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_embeddings):
            bad = ids[(ids < 0) | (ids >= self.num_embeddings)].flat[0]
            raise IndexError(f"{self!r}: index {int(bad)} out of range "
                             f"[0, {self.num_embeddings}) (index out of range in self)")
        return F.embedding(input, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   **kwargs)

    def extra_repr(self):
        s = "{num_embeddings}, {embedding_dim}"
        if self.padding_idx is not None:
            s += ", padding_idx={padding_idx}"
        return s.format(**self.__dict__)
