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


# ----------------------------------------------------------------------------- package layout
def test_torch_module_paths():
    from nbgrad.utils.data.dataloader import DataLoader, default_collate  # noqa: F401
    from nbgrad.utils.data.dataset import Dataset, TensorDataset, random_split  # noqa: F401
    from nbgrad.utils.data.sampler import BatchSampler, RandomSampler  # noqa: F401
    from nbgrad.utils.data._utils.collate import default_collate as dc, default_convert  # noqa
    assert dc is default_collate is nbgrad.utils.data.default_collate


def _structure(x):
    """A batch as plain data: types, and arrays for tensors."""
    if isinstance(x, (torch.Tensor, nbgrad.Tensor)):
        return ("T", str(x.dtype).split(".")[-1], x.numpy().tolist())
    if isinstance(x, dict):
        return (type(x).__name__, {k: _structure(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_structure(v) for v in x])
    return (type(x).__name__, x)


@pytest.mark.parametrize("batch", [
    [(1, 2.0), (3, 4.0)],
    [[1, 2], [3, 4]],
    [{"a": np.zeros(2), "b": 1.5, "c": "s"}, {"a": np.ones(2), "b": 2.5, "c": "t"}],
    [np.float32(1), np.float32(2)],
    [np.int32(1), np.int32(5)],
    [True, False],
    [(np.arange(3.0), [1, (2, 3.0)])] * 2,
])
def test_default_collate_like_torch(batch):
    from torch.utils.data import default_collate as tc
    assert _structure(nbgrad.utils.data.default_collate(batch)) == _structure(tc(batch))


@pytest.mark.parametrize("sample", [(np.zeros(2), 1), [np.float32(3)], {"a": np.ones(1)}])
def test_default_convert_like_torch(sample):
    from torch.utils.data import default_convert as tc
    assert _structure(nbgrad.utils.data.default_convert(sample)) == _structure(tc(sample))


def test_default_collate_errors_like_torch():
    from torch.utils.data import default_collate as tc
    for bad in ([object()], [[1, 2], [3]]):
        with pytest.raises(Exception) as et:
            tc(bad)
        with pytest.raises(type(et.value)) as en:
            nbgrad.utils.data.default_collate(bad)
        assert str(en.value) == str(et.value)
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        nbgrad.utils.data.default_collate([nbgrad.zeros(3), nbgrad.zeros(4)])


def test_loader_batches_are_lists_like_torch():
    x = np.arange(10.0)
    tb = next(iter(torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(x)), batch_size=4)))
    nb = next(iter(nbgrad.utils.data.DataLoader(
        nbgrad.utils.data.TensorDataset(nbgrad.tensor(x)), batch_size=4)))
    assert type(nb) is type(tb) is list


def test_random_sampler_draws_lazily_with_replacement():
    s = nbgrad.utils.data.RandomSampler(range(10 ** 6), replacement=True, num_samples=10 ** 12)
    assert len(s) == 10 ** 12
    it = iter(s)
    first = [next(it) for _ in range(5000)]
    assert all(0 <= i < 10 ** 6 for i in first)
    loader = nbgrad.utils.data.DataLoader(
        nbgrad.utils.data.TensorDataset(nbgrad.arange(10 ** 6)), batch_size=64, sampler=s)
    assert len(loader) == 10 ** 12 // 64
    batch = next(iter(loader))[0]
    assert tuple(batch.shape) == (64,)


def test_random_sampler_without_replacement_more_samples_than_data():
    nbgrad.manual_seed(0)
    idx = list(nbgrad.utils.data.RandomSampler(range(4), num_samples=10))
    assert len(idx) == 10 and sorted(idx[:4]) == [0, 1, 2, 3] and sorted(idx[4:8]) == [0, 1, 2, 3]


def test_sampler_argument_errors_like_torch():
    D = nbgrad.utils.data
    T = torch.utils.data
    cases = [
        lambda m: m.RandomSampler(range(3), replacement=1),
        lambda m: m.RandomSampler([], num_samples=None),
        lambda m: m.WeightedRandomSampler([[1.0, 2.0]], 3),
        lambda m: m.WeightedRandomSampler([1.0, 2.0], 0),
        lambda m: m.WeightedRandomSampler([1.0, 2.0], 3, replacement=1),
        lambda m: m.BatchSampler(range(3), 0, False),
        lambda m: m.BatchSampler(range(3), 2, 1),
    ]
    for case in cases:
        with pytest.raises(Exception) as et:
            case(T)
        with pytest.raises(type(et.value)) as en:
            case(D)
        assert str(en.value) == str(et.value)


def test_subset_and_weighted_samplers():
    g = nbgrad.Generator()
    g.manual_seed(1)
    s = nbgrad.utils.data.SubsetRandomSampler([10, 20, 30, 40], generator=g)
    assert sorted(s) == [10, 20, 30, 40] and len(s) == 4
    nbgrad.manual_seed(0)
    w = nbgrad.utils.data.WeightedRandomSampler([0.0, 1.0, 3.0], 4000)
    counts = np.bincount(list(w), minlength=3)
    assert len(w) == 4000 and counts[0] == 0 and 2.6 < counts[2] / counts[1] < 3.4
    once = list(nbgrad.utils.data.WeightedRandomSampler([1.0, 1.0, 0.0, 1.0], 3,
                                                        replacement=False))
    assert sorted(once) == [0, 1, 3]


@pytest.mark.parametrize("lengths", [[0.25, 0.25, 0.5], [0.1, 0.3, 0.6], [0.5, 0.5], [3, 7]])
def test_random_split_lengths_and_fractions_like_torch(lengths):
    n = 10 if lengths != [0.1, 0.3, 0.6] else 3
    tl = [len(s) for s in torch.utils.data.random_split(range(n), lengths)]
    parts = nbgrad.utils.data.random_split(range(n), lengths)
    assert [len(s) for s in parts] == tl
    assert sorted(i for s in parts for i in s) == list(range(n))


def test_random_split_warns_on_empty_split():
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        nbgrad.utils.data.random_split(range(1), [1.0, 0.0])
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        nbgrad.utils.data.random_split(range(10), [3, 3])


def test_worker_options_checked_like_torch():
    ds = nbgrad.utils.data.TensorDataset(nbgrad.arange(6.0))
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        nbgrad.utils.data.DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        nbgrad.utils.data.DataLoader(ds, persistent_workers=True)


def test_chain_dataset_and_iterable_add():
    class It(nbgrad.utils.data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.n

    chain = It(2) + It(3)
    assert isinstance(chain, nbgrad.utils.data.ChainDataset) and list(chain) == [0, 1, 0, 1, 2]
    assert [b.tolist() for b in nbgrad.utils.data.DataLoader(chain, batch_size=2)] == \
        [[0, 1], [0, 1], [2]]
