"""InstanceNorm1d, InstanceNorm2d (mirrors ``torch.nn.modules.instancenorm``)."""

from .. import functional as F
from .batchnorm import _BatchNorm

__all__ = ["InstanceNorm1d", "InstanceNorm2d"]


class _InstanceNorm(_BatchNorm):
    """BatchNorm's parameters and buffers with instance-norm defaults (no affine, no running
    stats); ``_ndim`` is the batched input's rank."""

    _ndim = 3

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        n = self._ndim
        if input.ndim not in (n - 1, n):
            raise ValueError(f"expected {n - 1}D or {n}D input (got {input.ndim}D input) for "
                             f"{self!r}; input shape {tuple(input.shape)}")
        unbatched = input.ndim == n - 1
        if unbatched:
            input = input.unsqueeze(0)
        if self.affine and input.shape[1] != self.num_features:
            raise ValueError(f"expected input's size at dim=1 to match num_features "
                             f"({self.num_features}), but got: {input.shape[1]}.")
        out = F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats, self.momentum or 0.1,
                              self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Normalise each (sample, channel) of (N, C, L) or (C, L) over L (torch.nn.InstanceNorm1d).
    """


class InstanceNorm2d(_InstanceNorm):
    """Normalise each (sample, channel) of (N, C, H, W) or (C, H, W) over H, W
    (mirrors ``torch.nn.InstanceNorm2d``)."""

    _ndim = 4
