"""Datasets (mirrors ``torch.utils.data.dataset``): Dataset, IterableDataset, TensorDataset,
Subset, ConcatDataset, ChainDataset, random_split."""

import bisect
import itertools
import math
import warnings

from nbgrad import random as _random

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "ChainDataset", "random_split"]


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

    def __add__(self, other):
        return ChainDataset([self, other])


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
    """Datasets one after another (mirrors ``torch.utils.data.ConcatDataset``).

    Raises:
        ValueError: no datasets; AssertionError (as torch): an IterableDataset among them.
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            assert not isinstance(d, IterableDataset), \
                "ConcatDataset does not support IterableDataset"
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        i = bisect.bisect_right(self.cumulative_sizes, idx)
        start = 0 if i == 0 else self.cumulative_sizes[i - 1]
        return self.datasets[i][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (mirrors ``torch.utils.data.ChainDataset``)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


def random_split(dataset, lengths, generator=None):
    """Split into non-overlapping random Subsets (mirrors ``torch.utils.data.random_split``).

    Args:
        dataset (Dataset): sized.
        lengths (sequence of int | sequence of float): the subset sizes, or fractions summing
            to 1 (``floor(n * f)`` each, the remainder dealt out one by one from the first).
        generator (nbgrad.Generator, optional): the permutation's stream; default the global one.

    Returns:
        list of Subset.

    Raises:
        ValueError: the lengths do not add up to ``len(dataset)`` (torch's text).
    """
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(subset_lengths)):
            subset_lengths[i % len(subset_lengths)] += 1
        for i, length in enumerate(subset_lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.")
        lengths = subset_lengths
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _random.randperm(n, generator=generator)._data.tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out
