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
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
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
                                     batch_size=4, sampler=tdist.DistributedSampler(range(22), **kw))
    assert [b[0].tolist() for b in ln] == [b[0].tolist() for b in lt]
