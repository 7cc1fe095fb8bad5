"""``nbgrad.utils.data``: Dataset, TensorDataset, Subset, random_split, samplers, DataLoader.

Mirrors ``torch.utils.data`` for single-process loading (``num_workers=0``). A DataLoader over a
:class:`TensorDataset` with the default collate function gathers each batch with one indexing op
per tensor instead of stacking samples one by one: the same batches, a fraction of the cost.
"""

import collections.abc
import math

import numpy as np

import nbgrad
from nbgrad.tensor import Tensor

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "random_split",
    "Sampler", "SequentialSampler", "RandomSampler", "BatchSampler", "DataLoader",
    "default_collate",
]


class Dataset:
    """Map-style dataset: subclasses define ``__getitem__(i)`` and ``__len__()``."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """Iterable-style dataset: subclasses define ``__iter__()``."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class TensorDataset(Dataset):
    """Samples are ``tuple(t[i] for t in tensors)`` (mirrors ``torch.utils.data.TensorDataset``).

    Args:
        *tensors (Tensor): all with the same first dimension (N, ...).

    Raises:
        ValueError: first dimensions differ.
    """

    def __init__(self, *tensors):
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError("Size mismatch between tensors: first dimensions "
                             f"{[t.shape[0] for t in tensors]} differ")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices`` (mirrors ``torch.utils.data.Subset``)."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Datasets one after another (mirrors ``torch.utils.data.ConcatDataset``)."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self):
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        i = int(np.searchsorted(self.cumulative_sizes, idx, side="right"))
        start = 0 if i == 0 else int(self.cumulative_sizes[i - 1])
        return self.datasets[i][idx - start]


def _randperm(n, generator):
    return nbgrad.randperm(n, generator=generator)._data.tolist()


def random_split(dataset, lengths, generator=None):
    """Split into non-overlapping random Subsets of the given lengths (or fractions summing to 1).

    Mirrors ``torch.utils.data.random_split``; the permutation is drawn from ``generator``
    (an ``nbgrad.Generator``) or the global one.
    """
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(subset_lengths)):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _randperm(n, generator)
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out


class Sampler:
    """Base class of index samplers."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation per epoch from ``generator`` (mirrors ``RandomSampler``).

    Args:
        data_source (Dataset): sized.
        replacement (bool): draw with replacement.
        num_samples (int, optional): default len(data_source).
        generator (nbgrad.Generator, optional): default: a generator seeded from the global one
            at each epoch, as torch.
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def _indices(self):
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            seed = int(nbgrad.randint(0, 2 ** 62, (1,))._data[0])
            generator = nbgrad.Generator()
            generator.manual_seed(seed)
        if self.replacement:
            return nbgrad.randint(0, n, (self.num_samples,), generator=generator)._data
        chunks = []
        for _ in range(self.num_samples // n):
            chunks.append(nbgrad.randperm(n, generator=generator)._data)
        rest = self.num_samples % n
        if rest:
            chunks.append(nbgrad.randperm(n, generator=generator)._data[:rest])
        return np.concatenate(chunks) if len(chunks) > 1 else chunks[0]

    def __iter__(self):
        return iter(self._indices().tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Group a sampler's indices into lists of ``batch_size`` (mirrors ``BatchSampler``)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def _index_arrays(self):
        """The batches as int64 numpy arrays (the fast path of DataLoader)."""
        if isinstance(self.sampler, RandomSampler):
            idx = np.asarray(self.sampler._indices(), dtype=np.int64)
        elif isinstance(self.sampler, SequentialSampler):
            idx = np.arange(len(self.sampler), dtype=np.int64)
        else:
            idx = np.fromiter(iter(self.sampler), dtype=np.int64)
        n = len(idx)
        stop = n - n % self.batch_size if self.drop_last else n
        return [idx[i:i + self.batch_size] for i in range(0, stop, self.batch_size)]

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


def default_collate(batch):
    """Stack a list of samples into a batch (mirrors ``torch.utils.data.default_collate``).

    Tensors are stacked along a new dim 0; numpy arrays and Python numbers become tensors
    (float -> float64, int -> int64, as torch); tuples, lists and dicts are collated per field.
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return nbgrad.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        return nbgrad.from_numpy(np.stack(batch))
    if isinstance(elem, np.generic):
        return nbgrad.from_numpy(np.array(batch))
    if isinstance(elem, bool):
        return nbgrad.tensor(batch, dtype=nbgrad.bool)
    if isinstance(elem, float):
        return nbgrad.tensor(batch, dtype=nbgrad.float64)
    if isinstance(elem, int):
        return nbgrad.tensor(batch, dtype=nbgrad.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = [default_collate(list(s)) for s in zip(*batch)]
        return tuple(transposed) if isinstance(elem, tuple) else transposed
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem)}")


class DataLoader:
    """Iterate over a dataset in batches (mirrors ``torch.utils.data.DataLoader``, one process).

    Args:
        dataset (Dataset): map-style (``__getitem__``/``__len__``) or iterable.
        batch_size (int | None): samples per batch (default 1); None yields single samples.
        shuffle (bool): a new random order every epoch (a RandomSampler over ``generator``).
        sampler, batch_sampler: custom index order (exclusive with shuffle / batch_size, as torch).
        num_workers (int): must be 0 (nbgrad loads in the calling process).
        collate_fn (callable): list of samples -> batch; default :func:`default_collate`.
        drop_last (bool): drop the last incomplete batch.
        generator (nbgrad.Generator, optional): the shuffling stream.

    Raises:
        ValueError: conflicting options, as torch's.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (None, False):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 "and batch_sampler options")
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
        self._auto_collation = batch_sampler is not None
        self._user_collate = collate_fn is not None
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation or iterable else _convert)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
            return n
        if self._auto_collation:
            return len(self.batch_sampler)
        return len(self.sampler)

    def __iter__(self):
        ds = self.dataset
        if isinstance(ds, IterableDataset):
            yield from self._iter_iterable()
            return
        if not self._auto_collation:
            for i in self.sampler:
                yield self.collate_fn(ds[i])
            return
        if (type(ds) is TensorDataset and not self._user_collate
                and isinstance(self.batch_sampler, BatchSampler)):
            # one fancy-indexing op per tensor per batch; identical to stacking the samples
            tensors = ds.tensors
            for idx in self.batch_sampler._index_arrays():
                if len(idx) and idx[-1] - idx[0] == len(idx) - 1 and \
                        (len(idx) == 1 or (np.diff(idx) == 1).all()):
                    sl = slice(int(idx[0]), int(idx[-1]) + 1)
                    yield tuple(t[sl].clone() for t in tensors)
                else:
                    index = nbgrad.from_numpy(idx)
                    yield tuple(t[index] for t in tensors)
            return
        for batch in self.batch_sampler:
            yield self.collate_fn([ds[i] for i in batch])

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


def _convert(sample):
    """collate for ``batch_size=None``: numpy arrays and numbers become tensors."""
    if isinstance(sample, np.ndarray):
        return nbgrad.from_numpy(sample)
    if isinstance(sample, (tuple, list)):
        return type(sample)(_convert(s) for s in sample)
    return sample
