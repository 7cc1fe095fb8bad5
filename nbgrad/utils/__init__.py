"""``nbgrad.utils``: ``data`` (Dataset, TensorDataset, DataLoader), mirroring ``torch.utils``."""

from . import data

__all__ = ["data"]
