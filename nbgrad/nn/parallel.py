"""``nbgrad.nn.parallel`` (torch.nn.parallel): the data-parallel wrappers, for one process.

:class:`DataParallel` behaves as PyTorch's without a GPU: it holds the model as ``.module``
(so its state_dict keys gain the ``module.`` prefix) and its forward calls the model.
:class:`DistributedDataParallel` needs a process group, which nbgrad never has: constructing one
raises PyTorch's ValueError for an uninitialised group.
"""
from __future__ import annotations

from .. import distributed
from .modules.module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]


class DataParallel(Module):
    """torch.nn.DataParallel on a machine without CUDA devices: ``forward`` is the wrapped
    module's; ``device_ids`` is ``[]``."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []
        self.output_device = None
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    """torch.nn.parallel.DistributedDataParallel: always raises on construction (no group).

    Raises:
        ValueError: PyTorch's "Default process group has not been initialized ..." text.
    """

    def __init__(self, module, *args, **kwargs):
        super().__init__()
        distributed.get_rank()  # raises: there is no process group
