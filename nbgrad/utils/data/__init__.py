"""``nbgrad.utils.data`` (mirrors ``torch.utils.data``), at torch's module paths:
``dataset`` (Dataset, TensorDataset, Subset, ConcatDataset, random_split, ...), ``sampler``
(Sequential/Random/SubsetRandom/WeightedRandom/BatchSampler), ``distributed``
(DistributedSampler), ``dataloader`` (DataLoader,
in-process or in worker processes) and ``_utils.collate`` (default_collate, default_convert).
"""

from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,
                      TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)
from ._utils.collate import default_collate, default_convert
from .dataloader import DataLoader, get_worker_info
from .distributed import DistributedSampler
from . import dataset, sampler, dataloader, distributed  # noqa: F401  (torch's module paths)

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset",
    "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
    "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "DataLoader",
    "default_collate", "default_convert", "get_worker_info",
]
