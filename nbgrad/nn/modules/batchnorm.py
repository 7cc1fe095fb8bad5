"""Batch normalisation: BatchNorm1d, BatchNorm2d (mirrors ``torch.nn.modules.batchnorm``)."""

from nbgrad import creation
from nbgrad import dtypes
from nbgrad.autograd import grad_mode
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import _factory

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


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
            self.weight = Parameter(creation.empty((num_features,), **kw))
            if bias:
                self.bias = Parameter(creation.empty((num_features,), **kw))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros((num_features,), **kw))
            self.register_buffer("running_var", creation.ones((num_features,), **kw))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dtypes.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with grad_mode.no_grad():
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
            with grad_mode.no_grad():
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
        _expect_ndim(self, input, 4)


def _expect_ndim(layer, input, ndim):
    if input.ndim != ndim:
        raise ValueError(f"expected {ndim}D input (got {input.ndim}D input) for {layer!r}; "
                         f"input shape {tuple(input.shape)}")


class BatchNorm3d(_BatchNorm):
    """Batch normalisation over (N, C, D, H, W) per channel (mirrors ``torch.nn.BatchNorm3d``).

    Raises:
        ValueError: ``expected 5D input (got 4D input)``, naming the layer.
    """

    def _check_input_dim(self, input):
        _expect_ndim(self, input, 5)
