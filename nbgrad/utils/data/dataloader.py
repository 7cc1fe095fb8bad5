"""DataLoader (mirrors ``torch.utils.data.dataloader``): in the calling process, or with
``num_workers > 0`` in worker processes (see :mod:`._utils.worker`).

Over a :class:`TensorDataset` with the default collate function, each batch is gathered with one
indexing op per tensor instead of stacking samples one by one: the same batches, a fraction of
the cost.
"""

import itertools
import math
import multiprocessing
import pickle
import queue

import numpy as np

from nbgrad import creation
from ._utils.collate import default_collate, default_convert
from ._utils.worker import _STOP, ExceptionWrapper, _worker_loop, get_worker_info
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]


class DataLoader:
    """Iterate over a dataset in batches (mirrors ``torch.utils.data.DataLoader``).

    With ``num_workers > 0`` batches are loaded by worker processes (forked on Linux; another
    ``multiprocessing_context`` such as "spawn" needs a picklable dataset) and come back in the
    order ``num_workers=0`` gives: batch i is loaded by worker ``i % num_workers`` as in torch,
    ``prefetch_factor`` (default 2) batches per worker ahead. Each worker is seeded as torch
    seeds it (``base_seed + worker_id``), calls ``worker_init_fn(worker_id)``, sees its
    ``get_worker_info()``, and over an IterableDataset iterates its own copy (split it with
    ``get_worker_info()``, as in torch). ``persistent_workers`` keeps the processes between
    epochs; ``timeout`` bounds the wait for a batch; ``pin_memory`` changes nothing on the CPU.
    An exception in a worker is re-raised here as torch does it ("Caught ValueError in
    DataLoader worker process 0." and the worker's traceback). Where no start method fits
    (no fork and none given) the batches are loaded in-process.

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
        RuntimeError: a worker timed out or died ("DataLoader worker (pid(s) ...) exited
            unexpectedly", torch's texts).
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
        self.multiprocessing_context = multiprocessing_context
        self._pool = None  # the persistent workers
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
        # torch's _BaseDataLoaderIter draws its workers' base seed at once, even without
        # workers: one int64 random_() from the loader's generator (else the global one), so
        # the streams after an epoch are torch's
        # (once with persistent workers: torch's iterator lives on)
        from nbgrad.random import _gen, _random_full
        if self._pool is None or not self._pool.alive():
            base_seed = int(_random_full(_gen(self.generator), 1, np.dtype(np.int64))[0])
            context = self._context() if self.num_workers > 0 else None
            if context is not None:
                pool = _WorkerPool(self, context, base_seed)
                if self.persistent_workers:
                    self._pool = pool
                return pool.epoch(self._tasks(), own=not self.persistent_workers)
            if self.num_workers > 0 and self.worker_init_fn is not None:
                self.worker_init_fn(0)
        else:
            return self._pool.epoch(self._tasks(), own=False)
        ds = self.dataset
        if isinstance(ds, IterableDataset):
            return self._iter_iterable()
        if self.batch_sampler is None:
            return (self.collate_fn(ds[i]) for i in self.sampler)
        if (type(ds) is TensorDataset and not self._user_collate
                and type(self.batch_sampler) is BatchSampler):
            return self._iter_tensor_dataset(ds.tensors)
        return (self.collate_fn([ds[i] for i in batch]) for batch in self.batch_sampler)

    def _context(self):
        ctx = self.multiprocessing_context
        if ctx is None:
            if "fork" not in multiprocessing.get_all_start_methods():
                return None
            ctx = "fork"
        return multiprocessing.get_context(ctx) if isinstance(ctx, str) else ctx

    def _tasks(self):
        """What the workers are sent, one per batch: index lists, or None forever (iterable)."""
        if isinstance(self.dataset, IterableDataset):
            return itertools.repeat(None)
        return iter(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown()

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


class _WorkerPool:
    """``num_workers`` processes, one index queue each and one result queue (see
    :func:`._utils.worker._worker_loop`); :meth:`epoch` yields the batches in task order."""

    def __init__(self, loader, context, base_seed):
        self.n = loader.num_workers
        self.timeout = loader.timeout
        self.prefetch = loader.prefetch_factor or 2
        self.results = context.Queue()
        self.queues, self.procs = [], []
        self.epochs = 0
        fetch_args = (isinstance(loader.dataset, IterableDataset), loader._auto_collation,
                      loader.collate_fn, loader.batch_size, loader.drop_last)
        for worker_id in range(self.n):
            q = context.Queue()
            q.cancel_join_thread()
            p = context.Process(target=_worker_loop, daemon=True, args=(
                loader.dataset, q, self.results, fetch_args, worker_id, self.n, base_seed,
                loader.worker_init_fn))
            p.start()
            self.queues.append(q)
            self.procs.append(p)

    def alive(self):
        return bool(self.procs) and all(p.is_alive() for p in self.procs)

    def _get(self, epoch):
        """The next result of this epoch (those of an abandoned one are dropped)."""
        waited = 0.0
        while True:
            step = 5.0 if not self.timeout else min(5.0, self.timeout - waited)
            try:
                got = pickle.loads(self.results.get(timeout=step))
            except queue.Empty:
                waited += step
                dead = [str(p.pid) for p in self.procs if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(dead)}) exited "
                                       "unexpectedly") from None
                if self.timeout and waited >= self.timeout:
                    raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds") \
                        from None
                continue
            if got[0] == epoch:
                return got[1:]

    def epoch(self, tasks, own):
        self.epochs += 1
        epoch = self.epochs
        for q in self.queues:
            q.put((epoch, None, None))
        return self._run(epoch, tasks, own)

    def _run(self, epoch, tasks, own):
        active = [True] * self.n
        cycle = itertools.cycle(range(self.n))
        sent = received = 0
        worker_of, buffer = {}, {}

        def put():
            nonlocal sent
            for _ in range(self.n):
                w = next(cycle)
                if active[w]:
                    break
            else:
                return
            task = next(tasks, _STOP)
            if task is _STOP:
                return
            self.queues[w].put((epoch, sent, task))
            worker_of[sent] = w
            sent += 1

        try:
            for _ in range(self.prefetch * self.n):
                put()
            while received < sent:
                while received not in buffer:
                    idx, data = self._get(epoch)
                    buffer[idx] = data
                data = buffer.pop(received)
                received += 1
                if isinstance(data, str) and data == _STOP:
                    active[worker_of[received - 1]] = False
                    put()
                    continue
                if isinstance(data, ExceptionWrapper):
                    data.reraise()
                put()
                yield data
        finally:
            if own:
                self.shutdown()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:  # interpreter teardown: the daemon workers end with it
            pass

    def shutdown(self):
        procs, self.procs = self.procs, []
        for q in self.queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join()
