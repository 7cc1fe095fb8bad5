"""DistributedSampler and DataLoader worker processes against torch.utils.data."""

import numpy as np
import pytest
import torch
import torch.utils.data.distributed as tdist

import nbgrad
import nbgrad.utils.data as nud
import nbgrad.utils.data.distributed as ndist


@pytest.mark.parametrize("n,replicas", [(10, 3), (10, 2), (2, 5), (7, 7), (1, 4)])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_like_torch(n, replicas, shuffle, drop_last):
    for rank in range(replicas):
        kw = dict(num_replicas=replicas, rank=rank, shuffle=shuffle, seed=3,
                  drop_last=drop_last)
        a, b = ndist.DistributedSampler(range(n), **kw), tdist.DistributedSampler(range(n), **kw)
        for epoch in (0, 1, 5):
            a.set_epoch(epoch)
            b.set_epoch(epoch)
            assert list(a) == list(b) and len(a) == len(b)
            assert (a.num_samples, a.total_size) == (b.num_samples, b.total_size)


def test_distributed_sampler_errors_like_torch():
    with pytest.raises(ValueError,
                       match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        ndist.DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Invalid rank -1"):
        ndist.DistributedSampler(range(4), num_replicas=2, rank=-1)
    with pytest.raises(RuntimeError, match="Requires distributed package to be available"):
        ndist.DistributedSampler(range(4))
    assert nud.DistributedSampler is ndist.DistributedSampler


def test_distributed_sampler_in_a_loader_like_torch():
    x = np.arange(22, dtype=np.float32)
    kw = dict(num_replicas=2, rank=1, seed=7)
    ln = nud.DataLoader(nud.TensorDataset(nbgrad.tensor(x)), batch_size=4,
                        sampler=ndist.DistributedSampler(range(22), **kw))
    lt = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(x)),
                                     batch_size=4,
                                     sampler=tdist.DistributedSampler(range(22), **kw))
    assert [b[0].tolist() for b in ln] == [b[0].tolist() for b in lt]


# --- DataLoader(num_workers > 0): the same program under torch and under `python -m nbgrad`

_PROGRAM = r"""
import numpy as np, torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info

class DS(Dataset):
    def __len__(self): return 10
    def __getitem__(self, i):
        w = get_worker_info()
        info = [float(i), float(w.id if w else -1), float(w.seed % 1000 if w else 0)]
        return (torch.tensor(info),
                torch.rand(2), float(np.random.rand()) if w else 0.0)

class It(IterableDataset):
    def __iter__(self):
        w = get_worker_info()
        return iter(range(7)) if w is None else iter(range(w.id, 7 + 3 * w.id, w.num_workers))

def init(worker_id):
    np.random.seed(100 + worker_id)

torch.manual_seed(1)
for nw in (0, 2, 3):
    for b in DataLoader(DS(), batch_size=3, num_workers=nw, shuffle=True, pin_memory=True):
        print(nw, b[0].tolist(), b[1].tolist(), b[2].tolist() if nw else None)
print([b.tolist() for b in DataLoader(It(), batch_size=2, num_workers=2)])
print(list(DataLoader(It(), batch_size=None, num_workers=2, timeout=30)))
print([b[2].tolist() for b in DataLoader(DS(), batch_size=4, num_workers=2, worker_init_fn=init,
                                      drop_last=True)])
dl = DataLoader(TensorDataset(torch.arange(6.)), batch_size=2, num_workers=2,
                persistent_workers=True, shuffle=True, prefetch_factor=3)
for epoch in range(3):
    print([b[0].tolist() for b in dl], torch.rand(1).item())
for b in dl:
    break
print([b[0].tolist() for b in dl], torch.rand(1).item())

class Bad(Dataset):
    def __len__(self): return 4
    def __getitem__(self, i):
        if i == 3:
            raise {"k": KeyError, "v": ValueError}[EXC]("bad sample")
        return i
for EXC in ("k", "v"):
    try:
        list(DataLoader(Bad(), batch_size=1, num_workers=2))
    except (KeyError, ValueError) as e:
        lines = str(e).splitlines()
        print(type(e).__name__, lines[0], lines[1], lines[-1])
"""


def _run(tmp_path, *prefix):
    import os
    import subprocess
    import sys
    path = tmp_path / "prog.py"
    path.write_text(_PROGRAM)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, *prefix, str(path)], capture_output=True, text=True,
                          env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_worker_processes_like_torch(tmp_path):
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ.setdefault("PYTHONPATH", root)
    ours = _run(tmp_path, "-m", "nbgrad")
    assert ours == _run(tmp_path)
    assert "Caught KeyError in DataLoader worker process 1." in ours
    assert "Caught ValueError in DataLoader worker process 1." in ours


def test_worker_init_fn_runs_in_the_workers_not_here():
    seen = []
    ds = nud.TensorDataset(nbgrad.arange(6.0))
    loader = nud.DataLoader(ds, batch_size=2, num_workers=2, worker_init_fn=seen.append)
    assert [b[0].tolist() for b in loader] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert seen == [] and nud.get_worker_info() is None


def test_worker_error_in_init_and_unpicklable_batch():
    def init(worker_id):
        raise ValueError(f"init {worker_id}")
    ds = nud.TensorDataset(nbgrad.arange(4.0))
    with pytest.raises(ValueError, match=r"Caught ValueError in DataLoader worker process 0\."):
        list(nud.DataLoader(ds, batch_size=2, num_workers=2, worker_init_fn=init))
    loader = nud.DataLoader(ds, batch_size=2, num_workers=1, collate_fn=lambda b: lambda: b)
    with pytest.raises(Exception, match="in DataLoader worker process 0"):
        list(loader)


def test_early_break_and_persistent_workers_end_cleanly():
    ds = nud.TensorDataset(nbgrad.arange(40.0))
    loader = nud.DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True)
    for _ in loader:
        break
    pool = loader._pool
    assert [b[0].tolist() for b in loader][:2] == [[0.0, 1.0], [2.0, 3.0]]
    assert loader._pool is pool and pool.alive()
    procs = list(pool.procs)
    pool.shutdown()
    assert not any(p.is_alive() for p in procs)
