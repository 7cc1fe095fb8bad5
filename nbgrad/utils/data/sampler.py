"""Samplers (mirrors ``torch.utils.data.sampler``): Sampler, SequentialSampler, RandomSampler,
SubsetRandomSampler, WeightedRandomSampler, BatchSampler.

Random indices are drawn lazily, a chunk at a time, as torch draws them: a RandomSampler with
``replacement=True, num_samples=10**12`` costs nothing until iterated, and iterating it holds one
chunk in memory, not 10**12 indices. The values come from nbgrad's generators, not torch's stream.
"""

import numpy as np

from nbgrad import creation
from nbgrad import random as _random
from nbgrad.tensor import Tensor

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]

_CHUNK = 4096  # indices drawn at a time with replacement (torch draws 32)


class Sampler:
    """Base class of index samplers: subclasses define ``__iter__`` (and usually ``__len__``).

    ``_chunks()`` yields the same indices as int64 numpy arrays; the DataLoader's fast path
    reads those.
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError

    def _chunks(self):
        it = iter(self)
        while True:
            chunk = np.fromiter(_take(it, _CHUNK), dtype=np.int64)
            if not len(chunk):
                return
            yield chunk


def _take(it, n):
    for _, x in zip(range(n), it):
        yield x


def _check_positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


def _epoch_generator(generator):
    """The stream of one epoch: ``generator``, or a fresh one seeded from the global one (torch)."""
    if generator is not None:
        return generator
    g = _random.Generator()
    g.manual_seed(int(_random.randint(0, 2 ** 62, (1,))._data[0]))
    return g


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1 (mirrors ``SequentialSampler``)."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)

    def _chunks(self):
        n = len(self.data_source)
        for start in range(0, n, 1 << 20):
            yield np.arange(start, min(n, start + (1 << 20)), dtype=np.int64)


class RandomSampler(Sampler):
    """Random indices into ``data_source`` (mirrors ``torch.utils.data.RandomSampler``).

    Without replacement: one random permutation per ``len(data_source)`` samples (so
    ``num_samples`` may exceed the length); with replacement: uniform draws, made lazily.

    Args:
        data_source (Dataset): sized.
        replacement (bool): draw with replacement.
        num_samples (int, optional): default len(data_source).
        generator (nbgrad.Generator, optional): default: a generator seeded from the global one
            at each epoch, as torch.

    Raises:
        TypeError: replacement not a bool; ValueError: num_samples not a positive int (torch's
            texts).
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        _check_positive_int("num_samples", self.num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def _chunks(self):
        n = len(self.data_source)
        generator = _epoch_generator(self.generator)
        if self.replacement:
            for start in range(0, self.num_samples, _CHUNK):
                size = min(_CHUNK, self.num_samples - start)
                yield _random.randint(0, n, (size,), generator=generator)._data
            return
        for _ in range(self.num_samples // n):
            yield _random.randperm(n, generator=generator)._data
        rest = self.num_samples % n
        if rest:
            yield _random.randperm(n, generator=generator)._data[:rest]

    def __iter__(self):
        for chunk in self._chunks():
            yield from chunk.tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order, without replacement (mirrors torch's)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _random.randperm(len(self.indices), generator=self.generator)._data.tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """Indices 0..len(weights)-1 drawn with probability proportional to ``weights`` (mirrors
    ``torch.utils.data.WeightedRandomSampler``).

    Args:
        weights (sequence | Tensor): (N,) non-negative, need not sum to one.
        num_samples (int): how many indices per epoch.
        replacement (bool): default True; without it ``num_samples <= N`` non-zero weights.
        generator (nbgrad.Generator, optional).

    Raises:
        ValueError: num_samples not a positive int, replacement not a bool, weights not 1-D
            (torch's texts).
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_positive_int("num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = weights._data if isinstance(weights, Tensor) else np.asarray(weights)
        if w.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights = creation.tensor(np.asarray(w, dtype=np.float64))
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        drawn = _random.multinomial(self.weights, self.num_samples, self.replacement,
                                   generator=self.generator)
        yield from drawn._data.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Group a sampler's indices into lists of ``batch_size`` (mirrors ``BatchSampler``).

    Raises:
        ValueError: batch_size not a positive int or drop_last not a bool (torch's texts).
    """

    def __init__(self, sampler, batch_size, drop_last):
        _check_positive_int("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def _index_arrays(self):
        """The batches as int64 numpy arrays, lazily (the fast path of DataLoader)."""
        chunks = (self.sampler._chunks() if isinstance(self.sampler, Sampler)
                  else Sampler._chunks(self.sampler))
        bs = self.batch_size
        pending = np.empty(0, dtype=np.int64)
        for chunk in chunks:
            if len(pending):
                chunk = np.concatenate([pending, chunk])
            stop = len(chunk) - len(chunk) % bs
            for i in range(0, stop, bs):
                yield chunk[i:i + bs]
            pending = chunk[stop:]
        if len(pending) and not self.drop_last:
            yield pending

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
