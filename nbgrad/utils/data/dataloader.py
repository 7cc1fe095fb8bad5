"""DataLoader (mirrors ``torch.utils.data.dataloader``), loading in the calling process.

Over a :class:`TensorDataset` with the default collate function, each batch is gathered with one
indexing op per tensor instead of stacking samples one by one: the same batches, a fraction of
the cost.
"""

import math

import numpy as np

from nbgrad import creation
from ._utils.collate import default_collate, default_convert
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]


def get_worker_info():
    """Always None: nbgrad loads in the calling process, which torch reports as None too."""
    return None


class DataLoader:
    """Iterate over a dataset in batches (mirrors ``torch.utils.data.DataLoader``).

    Every batch is loaded in the calling process: ``num_workers``, ``pin_memory``,
    ``prefetch_factor``, ``persistent_workers`` and ``timeout`` are accepted so that PyTorch
    programs run unchanged, and change nothing but this: with ``num_workers > 0``,
    ``worker_init_fn(0)`` is called once at the start of each epoch, as the one in-process
    worker (``get_worker_info()`` stays None, so an IterableDataset yields all its samples once).

    Args:
        dataset (Dataset): map-style (``__getitem__``/``__len__``) or iterable.
        batch_size (int | None): samples per batch (default 1); None yields single samples
            (converted by ``default_convert``).
        shuffle (bool): a new random order every epoch (a RandomSampler over ``generator``).
        sampler, batch_sampler: custom index order (exclusive with shuffle / batch_size, as torch).
        collate_fn (callable): list of samples -> batch; default :func:`default_collate`.
        drop_last (bool): drop the last incomplete batch.
        generator (nbgrad.Generator, optional): the shuffling stream.

    Batches are lists for tuple samples (``[x, y]``), as torch's.

    Raises:
        ValueError: conflicting options, a negative num_workers (torch's texts).
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.generator = generator
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (None, False):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None or (iterable and batch_size is not None)
        self._user_collate = collate_fn is not None
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
            return n
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    def __iter__(self):
        if self.num_workers > 0 and self.worker_init_fn is not None:
            self.worker_init_fn(0)
        ds = self.dataset
        if isinstance(ds, IterableDataset):
            return self._iter_iterable()
        if self.batch_sampler is None:
            return (self.collate_fn(ds[i]) for i in self.sampler)
        if (type(ds) is TensorDataset and not self._user_collate
                and type(self.batch_sampler) is BatchSampler):
            return self._iter_tensor_dataset(ds.tensors)
        return (self.collate_fn([ds[i] for i in batch]) for batch in self.batch_sampler)

    def _iter_tensor_dataset(self, tensors):
        # one indexing op per tensor per batch; identical to stacking the samples
        for idx in self.batch_sampler._index_arrays():
            if len(idx) == 1 or (idx[-1] - idx[0] == len(idx) - 1 and (np.diff(idx) == 1).all()):
                sl = slice(int(idx[0]), int(idx[-1]) + 1)
                yield [t[sl].clone() for t in tensors]
            else:
                index = creation.from_numpy(idx)
                yield [t[index] for t in tensors]

    def _iter_iterable(self):
        it = iter(self.dataset)
        if self.batch_size is None:
            for sample in it:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in it:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)
