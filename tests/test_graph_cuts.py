"""The two small core facts the notebook panel reads: where a graph was cut (``.detach()``,
``.data``, ``from_numpy``, ``detach_()`` record the user's line while provenance is on), and
which tensors each backward / ``autograd.grad`` call started from (the engine's observers)."""

import sys

import numpy as np
import pytest

import nbgrad
from nbgrad import provenance
from nbgrad.autograd import engine


def _cut(t):
    e = t._extra
    return None if e is None else e.cut


def _line(where) -> int:
    return provenance.Location.of(where).lineno


def _here() -> int:
    return sys._getframe(1).f_lineno


@pytest.mark.parametrize("how", ["detach", "data", "detach_"])
def test_a_cut_records_the_users_line(how):
    x = nbgrad.randn(3, requires_grad=True)
    h = x * 2
    if how == "detach":
        y, line = h.detach(), _here()
    elif how == "data":
        y, line = h.data, _here()
    else:
        y, line = h.detach_(), _here()
    kind, where = _cut(y)
    assert kind == how
    assert _line(where) == line
    assert provenance.Location.of(where).filename == __file__
    assert not y.requires_grad and y.grad_fn is None


def test_from_numpy_records_its_line():
    a = np.ones(3)
    t, line = nbgrad.from_numpy(a), _here()
    kind, where = _cut(t)
    assert kind == "from_numpy" and _line(where) == line


def test_a_cut_inside_a_library_call_names_the_users_line():
    # state_dict() detaches each parameter inside nn: the line recorded is the caller's
    lin = nbgrad.nn.Linear(2, 2)
    sd, line = lin.state_dict(), _here()
    assert _line(_cut(sd["weight"])[1]) == line


def _data_of(t):
    return t.data


def _data_too(t):
    return t.data


def _add_one(t):
    t.add_(1.0)


def _add_two(t):
    t.add_(2.0)


def test_the_same_offset_in_two_functions_names_each_functions_line():
    # the line cache is keyed by the bytecode offset: two functions with the same code shape
    # (the cut, or the in-place write, at one offset) must each get their own line
    assert _data_of.__code__.co_code == _data_too.__code__.co_code
    h = nbgrad.randn(3, requires_grad=True) * 2
    for _ in range(2):  # (a second round reads the cache)
        for fn in (_data_of, _data_too, _data_of):
            kind, where = _cut(fn(h))
            assert kind == "data" and where[0] is fn.__code__
            assert _line(where) == fn.__code__.co_firstlineno + 1
    d = nbgrad.zeros(3)
    for _ in range(2):
        for fn in (_add_one, _add_two, _add_one):
            fn(d)
    hist = d.untyped_storage().history()
    assert [v for v, _, _ in hist] == [1, 2, 3, 4, 5, 6]
    assert [loc.code for _, _, loc in hist] == [f.__code__ for f in (_add_one, _add_two,
                                                                       _add_one) * 2]
    assert [loc.lineno for _, _, loc in hist] == [f.__code__.co_firstlineno + 1 for f in
                                                  (_add_one, _add_two, _add_one) * 2]
    assert d.tolist() == [8.0, 8.0, 8.0]


def test_nothing_recorded_when_nothing_was_cut_or_provenance_is_off():
    assert _cut(nbgrad.ones(3).detach()) is None  # no graph to cut: no record, no _Extra
    assert nbgrad.ones(3).detach()._extra is None
    x = nbgrad.ones(3, requires_grad=True)
    provenance.set_enabled(False)
    try:
        assert x.detach()._extra is None
        assert x.data._extra is None
        assert nbgrad.from_numpy(np.ones(2))._extra is None
    finally:
        provenance.set_enabled(True)


def test_a_detached_tensor_still_behaves_as_torchs():
    torch = pytest.importorskip("torch")
    x = nbgrad.tensor([1.0, 2.0], requires_grad=True)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    d, td = x.detach(), tx.detach()
    d.add_(1)
    td.add_(1)
    assert x._version == tx._version and d._version == td._version
    np.testing.assert_array_equal(x.detach().numpy(), tx.detach().numpy())
    assert d.requires_grad == td.requires_grad and d.is_leaf == td.is_leaf


def test_backward_observers_see_the_roots_before_the_walk():
    seen = []

    def cb(outputs, api):
        seen.append(([id(t) for t in outputs], api, outputs[0].grad_fn is not None))

    x = nbgrad.randn(3, requires_grad=True)
    engine.BACKWARD_OBSERVERS.append(cb)
    try:
        loss = (x * x).sum()
        loss.backward()
        y = (x * 3).sum()
        nbgrad.autograd.grad(y, x)
        with pytest.raises(RuntimeError):  # a call that fails its checks is not reported
            nbgrad.ones(2).sum().backward()
    finally:
        engine.BACKWARD_OBSERVERS.remove(cb)
    assert seen == [([id(loss)], "backward", True), ([id(y)], "grad", True)]
    (x * 2).sum().backward()  # removed: not called
    assert len(seen) == 2
