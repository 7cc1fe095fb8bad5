"""Which of several equal elements the sorting and selection ops report, against torch 2.13's
CPU kernels: sort and argsort (unstable: libstdc++'s std::sort; stable=True: their order),
topk sorted and unsorted (partial_sort, or nth_element and for sorted a sort), kthvalue
(quickselect), median, mode (std::sort then the run's end), max / min / argmax. Values drawn
from a few integers (and NaN) so that ties are everywhere; each row is compared exactly."""
import numpy as np
import pytest

import nbgrad

torch = pytest.importorskip("torch")

OPS = {
    "sort": lambda T, t: tuple(T.sort(t)),
    "sort_descending": lambda T, t: tuple(T.sort(t, descending=True)),
    "sort_stable": lambda T, t: tuple(T.sort(t, stable=True)),
    "sort_stable_false": lambda T, t: tuple(T.sort(t, stable=False)),
    "sort_stable_descending": lambda T, t: tuple(T.sort(t, descending=True, stable=True)),
    "sort_dim0": lambda T, t: tuple(T.sort(t, dim=0)),
    "argsort": lambda T, t: T.argsort(t),
    "argsort_descending": lambda T, t: T.argsort(t, descending=True),
    "argsort_stable": lambda T, t: T.argsort(t, stable=True),
    "topk_1": lambda T, t: tuple(T.topk(t, 1)),
    "topk_half": lambda T, t: tuple(T.topk(t, t.shape[-1] // 2)),
    "topk_all": lambda T, t: tuple(T.topk(t, t.shape[-1])),
    "topk_half_unsorted": lambda T, t: tuple(T.topk(t, t.shape[-1] // 2, sorted=False)),
    "topk_all_unsorted": lambda T, t: tuple(T.topk(t, t.shape[-1], sorted=False)),
    "topk_smallest_unsorted": lambda T, t: tuple(T.topk(t, 3, largest=False, sorted=False)),
    "topk_dim0_unsorted": lambda T, t: tuple(T.topk(t, 2, dim=0, sorted=False)),
    "kthvalue": lambda T, t: tuple(T.kthvalue(t, 3)),
    "kthvalue_dim0": lambda T, t: tuple(T.kthvalue(t, 2, dim=0)),
    "median": lambda T, t: tuple(T.median(t, 1)),
    "mode": lambda T, t: tuple(T.mode(t, 1)),
    "mode_dim0": lambda T, t: tuple(T.mode(t, 0)),
    "max": lambda T, t: tuple(T.max(t, 1)),
    "min": lambda T, t: tuple(T.min(t, 1)),
    "argmax": lambda T, t: T.argmax(t, 1),
}


def _rows(seed, nan):
    g = np.random.default_rng(seed)
    n = int(g.integers(5, 90))
    a = g.integers(0, 4, (3, n)).astype(np.float32)
    if nan:
        a[g.random(a.shape) < 0.1] = np.nan
    return a


@pytest.mark.parametrize("nan", [False, True], ids=["numbers", "with_nan"])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", sorted(OPS))
def test_tie_order_as_torch(name, seed, nan):
    if nan and name.startswith("mode"):
        pytest.skip("torch.mode compares with < (a NaN is unordered): not drawn")
    a = _rows(seed, nan)
    got = [OPS[name](T, T.tensor(a)) for T in (torch, nbgrad)]
    got = [r if isinstance(r, tuple) else (r,) for r in got]
    for w, n in zip(*got):
        np.testing.assert_array_equal(n.numpy(), w.numpy())


def test_unsorted_topk_gradient_follows_its_order():
    """The unsorted order is the outputs' order: the gradient of each value goes to its
    index, as torch's."""
    a = _rows(3, False)
    grads = []
    for T in (torch, nbgrad):
        x = T.tensor(a, requires_grad=True)
        v, _ = T.topk(x, 20, sorted=False)
        (v * T.arange(1., v.numel() + 1).reshape(v.shape)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])


@pytest.mark.parametrize("op", ["median", "max", "min"])
@pytest.mark.parametrize("row", [[1., np.nan, 2., np.nan, 1.], [1., 3., 2., 3., 1.],
                                 [np.nan, 0., np.nan]])
def test_reduction_with_nan_and_ties_as_torch(op, row):
    """median / max / min of all elements: NaN when one is NaN (median used to ignore it), and
    the gradient shared among the NaN elements (torch's evenly_distribute_backward), first and
    second order; median along a dim: NaN and the first NaN's index."""
    seen = []
    for T in (torch, nbgrad):
        x = T.tensor(row, requires_grad=True)
        m = getattr(x, op)()
        g, = T.autograd.grad(m, x, create_graph=True)
        v, i = getattr(T, op)(x[None], 1)
        seen.append([m.detach().numpy(), g.detach().numpy(), v.detach().numpy(), i.numpy()])
    for w, n in zip(*seen):
        np.testing.assert_array_equal(n, w)
