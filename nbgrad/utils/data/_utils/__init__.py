"""Helpers of the DataLoader, at torch's paths (``torch.utils.data._utils.collate``)."""

from . import collate

__all__ = ["collate"]
