"""``nbgrad.utils``: the ``data`` package (datasets, samplers, DataLoader), mirroring ``torch.utils``."""

from . import data

__all__ = ["data"]
