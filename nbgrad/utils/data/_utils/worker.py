"""DataLoader worker processes (mirrors ``torch.utils.data._utils.worker``): the loop each worker
runs, ``get_worker_info``, and the per-worker seeds torch gives (``base_seed + worker_id`` for
``random`` and nbgrad's generator, ``_generate_state`` for numpy's global one).

A worker receives ``(epoch, idx, indices)`` tasks on its own queue and answers
``(epoch, idx, data)`` on the shared result queue, pickled by the worker itself so that a batch
that cannot be pickled becomes an error the main process re-raises instead of a silent hang.
``data`` is the collated batch, ``_STOP`` (its IterableDataset copy is exhausted) or an
:class:`ExceptionWrapper`.
"""

import pickle
import random
import sys
import traceback
from dataclasses import dataclass

import numpy as np

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper"]

_STOP = "__nbgrad_iterable_stop__"
_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: id, num_workers, seed, dataset (the
    worker's own copy)."""

    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """The :class:`WorkerInfo` of the worker process calling it; None in the main process."""
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker, with its traceback text, re-raised in the main process
    with torch's text: "Caught ValueError in DataLoader worker process 1.\\nOriginal Traceback
    (most recent call last): ..."."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where
        try:  # a class defined in a function cannot travel back: torch would say RuntimeError
            pickle.loads(pickle.dumps(self.exc_type))
        except Exception:
            self.exc_type = RuntimeError

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


class _KeyErrorMessage(str):
    def __repr__(self):  # KeyError prints repr(arg): keep the traceback readable, as torch
        return self


def _generate_state(base_seed, worker_id):
    """numpy's seed for worker ``worker_id`` (torch's SeedSequence-like hash of both)."""
    mask = 0xFFFFFFFF
    entropy = [worker_id, base_seed & mask, base_seed >> 32, 0]
    const_a = [0x43B0D7E5]

    def hash_(value):
        value = (value ^ const_a[0]) & mask
        const_a[0] = (const_a[0] * 0x931E8875) & mask
        value = (value * const_a[0]) & mask
        return (value ^ (value >> 16)) & mask

    def mix(x, y):
        result = (((0xCA01F9DD * x) & mask) - ((0x4973F715 * y) & mask)) & mask
        return (result ^ (result >> 16)) & mask

    pool = [hash_(e) for e in entropy]
    for i_src in range(4):
        for i_dst in range(4):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hash_(pool[i_src]))
    const_b = 0x8B51F9DD
    state = []
    for value in pool:
        value = (value ^ const_b) & mask
        const_b = (const_b * 0x58F38DED) & mask
        value = (value * const_b) & mask
        state.append((value ^ (value >> 16)) & mask)
    return state


class _Fetcher:
    """One epoch's fetching in a worker: indices -> batch (map-style) or the next batch of the
    worker's own iterator over an IterableDataset."""

    def __init__(self, dataset, iterable, auto_collation, collate_fn, batch_size, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        self.batch_size, self.drop_last = batch_size, drop_last
        self.it = iter(dataset) if iterable else None

    def fetch(self, indices):
        if self.it is None:
            if self.auto_collation:
                return self.collate_fn([self.dataset[i] for i in indices])
            return self.collate_fn(self.dataset[indices])
        if not self.auto_collation:
            return self.collate_fn(next(self.it))
        batch = []
        for sample in self.it:
            batch.append(sample)
            if len(batch) == self.batch_size:
                break
        if not batch or (self.drop_last and len(batch) < self.batch_size):
            raise StopIteration
        return self.collate_fn(batch)


def _worker_loop(dataset, index_queue, result_queue, fetch_args, worker_id, num_workers,
                 base_seed, init_fn):
    """The body of worker ``worker_id`` (runs until it receives None)."""
    global _worker_info
    from nbgrad.random import manual_seed
    where = f"in DataLoader worker process {worker_id}"
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(_generate_state(base_seed, worker_id))
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    pending = None  # an error of worker_init_fn / iter(dataset): the answer to the next task
    try:
        if init_fn is not None:
            init_fn(worker_id)
    except Exception:
        pending = ExceptionWrapper(sys.exc_info(), where)
    fetcher = None
    try:
        while True:
            task = index_queue.get()
            if task is None:
                break
            epoch, idx, indices = task
            if idx is None:  # a new epoch: a fresh fetcher (and iterator)
                try:
                    fetcher = _Fetcher(dataset, *fetch_args)
                except Exception:
                    pending = pending or ExceptionWrapper(sys.exc_info(), where)
                continue
            if pending is not None:
                data, pending = pending, None
            else:
                try:
                    data = fetcher.fetch(indices)
                except StopIteration:
                    data = _STOP
                except Exception:
                    data = ExceptionWrapper(sys.exc_info(), where)
            try:
                message = pickle.dumps((epoch, idx, data))
            except Exception:
                message = pickle.dumps((epoch, idx, ExceptionWrapper(sys.exc_info(), where)))
            result_queue.put(message)
    except KeyboardInterrupt:
        pass
    result_queue.cancel_join_thread()
