"""``nbgrad.utils``: the ``data`` package (datasets, samplers, DataLoader), as ``torch.utils``."""

from . import data

__all__ = ["data"]
