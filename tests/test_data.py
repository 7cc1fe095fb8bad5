"""nbgrad.utils.data against torch.utils.data: datasets, samplers, DataLoader batches, collation."""

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import nbgrad
import nbgrad.utils.data as nud


def npy(t):
    return np.asarray(t.detach().numpy())


def both_datasets(n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n) % 4
    return (tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
            nud.TensorDataset(nbgrad.tensor(x), nbgrad.tensor(y)))


def assert_batches_equal(bn, bt):
    assert len(bn) == len(bt)
    for a, b in zip(bn, bt):
        assert isinstance(a, (tuple, list)) and len(a) == len(b)
        for u, v in zip(a, b):
            assert tuple(u.shape) == tuple(v.shape)
            assert np.array_equal(npy(u), v.numpy())
            assert str(u.dtype).split(".")[-1] == str(v.dtype).split(".")[-1]


def test_tensor_dataset_indexing():
    dt, dn = both_datasets()
    assert len(dn) == len(dt) == 10
    for i in (0, 7, -1):
        for u, v in zip(dn[i], dt[i]):
            assert np.array_equal(npy(u), v.numpy())
    with pytest.raises(ValueError, match="Size mismatch"):
        nud.TensorDataset(nbgrad.zeros(3), nbgrad.zeros(4))


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (4, True),
                                                  (10, False), (32, False)])
def test_sequential_loader_matches_torch(batch_size, drop_last):
    dt, dn = both_datasets()
    lt = tud.DataLoader(dt, batch_size=batch_size, drop_last=drop_last)
    ln = nud.DataLoader(dn, batch_size=batch_size, drop_last=drop_last)
    assert len(ln) == len(lt)
    assert_batches_equal(list(ln), list(lt))


def test_batches_are_copies_not_views():
    _, dn = both_datasets()
    first = next(iter(nud.DataLoader(dn, batch_size=4)))
    first[0].add_(100.0)
    assert npy(dn.tensors[0]).max() < 100


def test_shuffle_with_generator_is_a_reproducible_permutation():
    _, dn = both_datasets(23)
    g1 = nbgrad.Generator().manual_seed(7)
    g2 = nbgrad.Generator().manual_seed(7)
    l1 = nud.DataLoader(dn, batch_size=5, shuffle=True, generator=g1)
    l2 = nud.DataLoader(dn, batch_size=5, shuffle=True, generator=g2)
    e1 = [npy(b[1]).tolist() for b in l1]
    e2 = [npy(b[1]).tolist() for b in l2]
    assert e1 == e2
    assert [len(b) for b in e1] == [5, 5, 5, 5, 3]
    rows = np.concatenate([npy(b[0])[:, 0] for b in nud.DataLoader(
        dn, batch_size=5, shuffle=True, generator=nbgrad.Generator().manual_seed(7))])
    assert sorted((rows / 3).astype(int).tolist()) == list(range(23))
    # a second epoch of the same loader is a different order
    epoch_a = [npy(b[0]).tolist() for b in l1]
    epoch_b = [npy(b[0]).tolist() for b in l1]
    assert epoch_a != epoch_b
    # rows stay paired with their labels
    for x, y in l1:
        assert np.array_equal((npy(x)[:, 0] / 3).astype(int) % 4, npy(y))


def test_shuffle_without_generator_follows_manual_seed():
    _, dn = both_datasets(30)
    nbgrad.manual_seed(3)
    a = [npy(b[0]).tolist() for b in nud.DataLoader(dn, batch_size=8, shuffle=True)]
    nbgrad.manual_seed(3)
    b = [npy(b[0]).tolist() for b in nud.DataLoader(dn, batch_size=8, shuffle=True)]
    assert a == b


class Squares(nud.Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": np.full(2, i, dtype=np.float64), "y": i * i, "w": float(i), "name": f"s{i}"}


class SquaresT(tud.Dataset):
    __len__ = Squares.__len__
    __getitem__ = Squares.__getitem__


def test_default_collate_structures_match_torch():
    bn = list(nud.DataLoader(Squares(), batch_size=3))
    bt = list(tud.DataLoader(SquaresT(), batch_size=3))
    assert len(bn) == len(bt) == 3
    for a, b in zip(bn, bt):
        assert set(a) == set(b)
        for k in ("x", "y", "w"):
            assert np.array_equal(npy(a[k]), b[k].numpy())
            assert str(a[k].dtype).split(".")[-1] == str(b[k].dtype).split(".")[-1]
        assert a["name"] == b["name"]


def test_generic_dataset_of_tensor_tuples_matches_torch():
    class Pairs(nud.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return nbgrad.full((2,), float(i)), i

    class PairsT(tud.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return torch.full((2,), float(i)), i

    assert_batches_equal(list(nud.DataLoader(Pairs(), batch_size=2)),
                         list(tud.DataLoader(PairsT(), batch_size=2)))


def test_custom_collate_batch_size_none_and_sampler_options():
    _, dn = both_datasets(6)
    sums = list(nud.DataLoader(dn, batch_size=4, collate_fn=lambda b: len(b)))
    assert sums == [4, 2]
    single = list(nud.DataLoader(dn, batch_size=None))
    assert len(single) == 6 and tuple(single[0][0].shape) == (3,)
    bs = nud.BatchSampler(nud.SequentialSampler(range(6)), 4, drop_last=False)
    assert [len(b) for b in nud.DataLoader(dn, batch_sampler=bs)] == [2, 2]  # (x, y) tuples
    with pytest.raises(ValueError, match="mutually exclusive"):
        nud.DataLoader(dn, batch_sampler=bs, batch_size=3)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        nud.DataLoader(dn, sampler=nud.SequentialSampler(dn), shuffle=True)


def test_subset_random_split_concat():
    _, dn = both_datasets(10)
    parts = nud.random_split(dn, [7, 3], generator=nbgrad.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [7, 3]
    idx = sorted(parts[0].indices + parts[1].indices)
    assert idx == list(range(10))
    fr = nud.random_split(dn, [0.5, 0.5])
    assert [len(p) for p in fr] == [5, 5]
    cat = nud.ConcatDataset([parts[0], parts[1]])
    assert len(cat) == 10
    assert np.array_equal(npy(cat[7][0]), npy(parts[1][0][0]))
    with pytest.raises(ValueError, match="Sum of input lengths"):
        nud.random_split(dn, [3, 3])


def test_iterable_dataset():
    class Count(nud.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    out = [npy(b).tolist() for b in nud.DataLoader(Count(), batch_size=3)]
    assert out == [[0, 1, 2], [3, 4, 5], [6]]
