"""DistributedSampler (mirrors ``torch.utils.data.distributed``), for single-process use.

nbgrad has no process groups, so ``num_replicas`` and ``rank`` must be given (without them torch
asks ``torch.distributed``, which nbgrad reports as unavailable: torch's RuntimeError). The order
is torch's: ``randperm`` from a fresh generator seeded with ``seed + epoch``, padded by repeating
indices (or cut with ``drop_last``), then every ``num_replicas``-th index from ``rank``.
"""

import math

from nbgrad import random as _random
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """The share of ``dataset`` seen by replica ``rank`` of ``num_replicas`` (mirrors torch's).

    Args:
        dataset (Dataset): sized.
        num_replicas (int): replicas taking part; rank (int): this one, in [0, num_replicas).
        shuffle (bool): a new order per epoch (see :meth:`set_epoch`), the same on every replica.
        seed (int): the shuffle's base seed. drop_last (bool): cut the tail instead of padding.

    Raises:
        RuntimeError: num_replicas or rank left None (no distributed package in nbgrad);
        ValueError: rank outside [0, num_replicas - 1] (torch's text).
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            raise RuntimeError("Requires distributed package to be available")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = _random.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = _random.randperm(n, generator=g)._data.tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Set the epoch: with ``shuffle``, each epoch's order differs (the same on all ranks)."""
        self.epoch = epoch
