"""Variable-length sequences for the recurrent layers (mirrors ``torch.nn.utils.rnn``).

A batch of sequences of different lengths is either *padded* — one tensor (T, B, *) (or
(B, T, *) with ``batch_first``) with ``padding_value`` past each sequence's end — or *packed*:
a :class:`PackedSequence` whose ``data`` (sum of lengths, *) holds time step 0 of every
sequence, then step 1 of every sequence still running, and so on, longest sequence first;
``batch_sizes[t]`` says how many sequences are still running at step t.

The graphs are torch's: packing is one ``PackPaddedSequenceBackward0`` node (after an
``IndexSelectBackward0`` when the batch is sorted here); padding copies each run of steps with
the same batch size (or each sequence) into a filled tensor, one ``CopySlices`` node each.
"""

from collections import namedtuple

import numpy as np

from nbgrad import creation
from nbgrad import dtypes
from nbgrad.autograd.apply import apply
from nbgrad.ops import ROWS
from nbgrad.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


def _ints(x):
    """A 1-D int64 numpy array from a list, tuple, numpy array or int tensor."""
    return np.asarray(x._data if isinstance(x, Tensor) else x, dtype=np.int64).reshape(-1)


def _index(arr):
    return creation.from_numpy(np.ascontiguousarray(arr, dtype=np.int64))


def invert_permutation(permutation):
    """The inverse permutation (int64 tensor), or None for None (mirrors torch's)."""
    if permutation is None:
        return None
    p = _ints(permutation)
    out = np.empty_like(p)
    out[p] = np.arange(len(p))
    return _index(out)


class PackedSequence(namedtuple("PackedSequence_",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Sequences packed time step by time step (mirrors ``torch.nn.utils.rnn.PackedSequence``).

    Attributes:
        data (Tensor): (sum of lengths, *): step 0 of every sequence, then step 1, ...
        batch_sizes (Tensor): int64 (T,), the number of sequences running at each step,
            non-increasing.
        sorted_indices (Tensor | None): int64 (B,): position j of the packed batch holds
            sequence ``sorted_indices[j]`` of the original batch (None: already sorted).
        unsorted_indices (Tensor | None): its inverse.

    Build one with :func:`pack_padded_sequence` or :func:`pack_sequence`, not by hand.
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            raise ValueError("PackedSequence: batch_sizes is required (use pack_padded_sequence "
                             "or pack_sequence to build one)")
        if not isinstance(batch_sizes, Tensor):
            batch_sizes = _index(_ints(batch_sizes))
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """A PackedSequence with ``data.to(*args, **kwargs)`` (batch_sizes stay int64)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def double(self):
        """The same sequences with float64 data."""
        return self.to(dtype=dtypes.float64)

    def float(self):
        """The same sequences with float32 data."""
        return self.to(dtype=dtypes.float32)

    @property
    def is_cuda(self):
        """Whether the data is on a CUDA device."""
        return self.data.is_cuda

    def _lengths_sorted(self):
        """The length of each sequence in packed (sorted) order, numpy int64 (B,)."""
        bs = _ints(self.batch_sizes)
        return (bs[None, :] > np.arange(int(bs[0]))[:, None]).sum(1) if len(bs) else bs


def _check_lengths(lengths, batch, steps):
    if len(lengths) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={batch})")
    if len(lengths) and lengths.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    if len(lengths) and lengths.max() > steps:
        raise RuntimeError(f"pack_padded_sequence: a length of {int(lengths.max())} is longer "
                           f"than the padded input's {steps} time steps")


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (mirrors ``torch.nn.utils.rnn.pack_padded_sequence``).

    Args:
        input (Tensor): (T, B, *), or (B, T, *) with ``batch_first``.
        lengths (list[int] | Tensor): (B,) lengths, each in [1, T].
        enforce_sorted (bool): require lengths in decreasing order; with False the batch is
            sorted here and the permutation kept in ``sorted_indices``.

    Returns:
        PackedSequence: ``data`` (sum(lengths), *).

    Raises:
        RuntimeError: unsorted lengths with ``enforce_sorted`` (torch's text), a length <= 0 or
            longer than T; RuntimeError: ``len(lengths)`` differs from the batch size.
    """
    lens = _ints(lengths)
    b_dim, t_dim = (0, 1) if batch_first else (1, 0)
    if input.ndim < 2:
        raise ValueError(f"pack_padded_sequence: expected input of at least 2 dims "
                         f"({'(B, T, *)' if batch_first else '(T, B, *)'}), got "
                         f"{tuple(input.shape)}")
    batch, steps = input.shape[b_dim], input.shape[t_dim]
    _check_lengths(lens, batch, steps)
    if enforce_sorted:
        if np.any(lens[1:] > lens[:-1]):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.")
        order, sorted_indices = np.arange(batch), None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = _index(order)
    lens = lens[order]
    batch_sizes = (lens[None, :] > np.arange(int(lens[0]) if batch else 0)[:, None]).sum(1)
    if sorted_indices is not None:
        input = input.index_select(b_dim, sorted_indices)
    data = apply(ROWS["_pack_padded_sequence"], (input,),
                 (tuple(int(n) for n in batch_sizes), batch_first))
    return PackedSequence(data, _index(batch_sizes), sorted_indices, None)


def _filled(shape, fill, like):
    return creation.full(shape, fill, dtype=like.dtype, device=like.device)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Unpack to a padded batch in the original order (mirrors torch's ``pad_packed_sequence``).

    Args:
        sequence (PackedSequence): from :func:`pack_padded_sequence` or an RNN.
        total_length (int, optional): pad to this many steps (at least the longest length).

    Returns:
        (Tensor, Tensor): padded (T, B, *) — (B, T, *) with ``batch_first`` — and the int64
        lengths (B,).

    Raises:
        ValueError: ``total_length`` shorter than the longest sequence (torch's text).
    """
    bs = _ints(sequence.batch_sizes)
    steps, batch = len(bs), int(bs[0]) if len(bs) else 0
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{steps}")
        steps_out = total_length
    else:
        steps_out = steps
    data = sequence.data
    out = _filled((steps_out, batch) + tuple(data.shape[1:]), padding_value, data)
    start, t = 0, 0
    while t < steps:  # one copy per run of steps with the same batch size, as torch
        n, run = int(bs[t]), 1
        while t + run < steps and bs[t + run] == n:
            run += 1
        feat = tuple(data.shape[1:])
        out[t:t + run, :n] = data[start:start + run * n].view(run, n, *feat)
        start, t = start + run * n, t + run
    lens = sequence._lengths_sorted()
    if batch_first:
        out = out.transpose(0, 1)
    if sequence.unsorted_indices is not None:
        out = out.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lens = lens[_ints(sequence.unsorted_indices)]
    return out, _index(lens)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of different lengths, padding them (mirrors torch's ``pad_sequence``).

    Args:
        sequences (list[Tensor]): B tensors (L_i, *), the same trailing dims and dtype.
        padding_side (str): "right" (pad after each sequence) or "left".

    Returns:
        Tensor: (max L_i, B, *), or (B, max L_i, *) with ``batch_first``.

    Raises:
        RuntimeError: a bad ``padding_side``, or trailing dims differ.
    """
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    feat = tuple(sequences[0].shape[1:])
    for s in sequences:
        if tuple(s.shape[1:]) != feat:
            raise RuntimeError(
                f"pad_sequence: every sequence must be (L_i, {', '.join(map(str, feat))}), got "
                f"{[tuple(x.shape) for x in sequences]}")
    steps = max(x.shape[0] for x in sequences)
    shape = (len(sequences), steps) if batch_first else (steps, len(sequences))
    out = _filled(shape + feat, padding_value, sequences[0])
    for i, x in enumerate(sequences):
        n = x.shape[0]
        where = slice(0, n) if padding_side == "right" else slice(steps - n, steps)
        if batch_first:
            out[i, where] = x
        else:
            out[where, i] = x
    return out


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of :func:`pad_sequence`: a list of B tensors (L_i, *) (torch's)."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :int(n)] for i, n in enumerate(_ints(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of B tensors (L_i, *) (mirrors torch's ``pack_sequence``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The inverse of :func:`pack_sequence`: a list of B tensors (L_i, *) (torch's)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
