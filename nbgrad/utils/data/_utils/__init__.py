"""Helpers of the DataLoader, at torch's paths (``torch.utils.data._utils.collate``,
``torch.utils.data._utils.worker``)."""

from . import collate, worker

__all__ = ["collate", "worker"]
