"""Tensors print exactly as torch prints them (repr, str, format), property-tested against torch."""
import contextlib
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import nbgrad

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]


@st.composite
def arrays(draw):
    dtype = draw(st.sampled_from(DTYPES))
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5 if ndim > 2 else 9), min_size=ndim,
                                max_size=ndim)))
    n = int(np.prod(shape))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(n).reshape(shape) < 0.5)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        lo, hi = draw(st.sampled_from([(0, 10), (-5, 5), (info.min, info.max),
                                       (-1000, 100000)]))
        lo, hi = max(lo, int(info.min)), min(hi, int(info.max))
        return rng.integers(lo, hi, n, endpoint=True).astype(dtype).reshape(shape)
    kind = draw(st.sampled_from(["normal", "ints", "wide", "tiny", "huge", "special"]))
    scale = 10.0 ** draw(st.integers(-12, 12))
    if kind == "normal":
        v = rng.standard_normal(n) * scale
    elif kind == "ints":
        v = rng.integers(-50, 50, n).astype(np.float64) * draw(st.sampled_from([1, 1000, 1e9]))
    elif kind == "wide":
        v = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)
    elif kind == "tiny":
        v = rng.random(n) * 1e-5
    elif kind == "huge":
        v = rng.random(n) * 1e9
    else:
        v = rng.choice([0.0, -0.0, 1.0, -1.5, np.nan, np.inf, -np.inf, 2.0, 1e-3, 123.456], n)
    if n and draw(st.booleans()):
        v[rng.integers(0, n)] = draw(st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]))
    with np.errstate(over="ignore"):
        return v.astype(dtype).reshape(shape)


OPTIONS = st.fixed_dictionaries({
    "precision": st.integers(0, 8),
    "threshold": st.sampled_from([1000, 5, 20, 50, math.inf]),
    "edgeitems": st.integers(0, 4),
    "linewidth": st.integers(10, 150),
    "sci_mode": st.sampled_from([None, None, True, False]),
})


def same_repr(arr, grad=None):
    arr = np.asarray(arr)
    t = torch.from_numpy(arr.copy())
    n = nbgrad.from_numpy(arr.copy())
    if grad == "leaf":
        t.requires_grad_()
        n.requires_grad_()
    elif grad == "node":
        t = t.requires_grad_() * 1
        n = n.requires_grad_() * 1
    # dtypes spelled as torch spells them, so that line lengths (where suffixes wrap) are equal
    with torch_dtype_names():
        assert repr(n) == repr(t)
        assert str(n) == str(t)


@contextlib.contextmanager
def torch_dtype_names():
    cls = nbgrad.dtypes.dtype
    old = cls.__repr__
    cls.__repr__ = lambda d: f"torch.{d.name}"
    try:
        yield
    finally:
        cls.__repr__ = old


@pytest.fixture
def restore_options():
    yield
    torch.set_printoptions(profile="default")
    nbgrad.set_printoptions(profile="default")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrays(), OPTIONS, st.sampled_from([None, None, "leaf", "node"]))
def test_repr_matches_torch(arr, options, grad):
    if grad and arr.dtype.kind != "f":
        grad = None
    torch.set_printoptions(**options)
    nbgrad.set_printoptions(**options)
    try:
        same_repr(arr, grad)
    finally:
        torch.set_printoptions(profile="default")
        nbgrad.set_printoptions(profile="default")


@settings(max_examples=150, deadline=None)
@given(arrays())
def test_repr_matches_torch_default_options(arr):
    same_repr(arr)


@pytest.mark.parametrize("make", [
    lambda T: T.arange(2000.0),
    lambda T: T.arange(2000.0) / 7,
    lambda T: T.arange(1001) * 1e-6,
    lambda T: T.linspace(-3, 3, 3000).reshape(30, 100),
    lambda T: T.tensor([[1.5, -2.25], [100.0, 3.0]]),
    lambda T: T.tensor([1e-8, 1e8]),
    lambda T: T.tensor([-0.0, 0.0]),
    lambda T: T.ones(2, 3, 4, dtype=T.float64) * -1.25,
    lambda T: T.zeros(0, 3, dtype=T.int64),
    lambda T: T.arange(100).reshape(4, 25) * 10 ** 6,
], ids=["arange2000", "summarized_fixed", "summarized_tiny", "summarized_2d", "aligned_sign",
        "sci", "neg_zero", "3d_f64", "empty_int", "int_wrap"])
def test_known_cases(make):
    assert repr(make(nbgrad)) == repr(make(torch)).replace("torch.", "nbgrad.")


def test_grad_fn_moves_to_its_own_line():
    def make(T):
        x = T.linspace(10, 20, 8, requires_grad=True)
        return x * 1.2345
    expect = repr(make(torch))
    assert "\n       grad_fn=<MulBackward0>)" in expect
    assert repr(make(nbgrad)) == expect


@pytest.mark.parametrize("value", [2.4543561935424805, -3.0, 1e-20, float("nan")])
def test_format_of_a_0d_tensor_is_the_number(value):
    for spec in ["", ".3f", "10.2e", ">12"]:
        t = torch.tensor(value, dtype=torch.float64, requires_grad=True)
        n = nbgrad.tensor(value, dtype=nbgrad.float64, requires_grad=True)
        assert format(n, spec) == format(t, spec)
    assert f"{nbgrad.tensor(2.4543561935424805)}" == f"{torch.tensor(2.4543561935424805)}"
    assert f"{nbgrad.tensor(7)}" == "7" and f"{nbgrad.tensor(True)}" == "True"


def test_format_of_a_vector():
    n, t = nbgrad.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert f"{n}" == f"{t}"
    with pytest.raises(TypeError):
        format(t, ".2f")
    with pytest.raises(TypeError):
        format(n, ".2f")


def test_printoptions_profiles(restore_options):
    big = np.linspace(-1, 1, 1500).astype(np.float32).reshape(30, 50)
    for kwargs in [{"profile": "short"}, {"profile": "full"}, {"profile": "default"},
                   {"precision": 2, "sci_mode": True}, {"profile": "short", "precision": 6}]:
        torch.set_printoptions(**kwargs)
        nbgrad.set_printoptions(**kwargs)
        assert repr(nbgrad.from_numpy(big.copy())) == repr(torch.from_numpy(big.copy()))
    assert nbgrad.printing.get_printoptions() == {
        k: getattr(torch._tensor_str.PRINT_OPTS, k)
        for k in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")}


def test_printoptions_context_manager(restore_options):
    x = nbgrad.tensor([1.23456789])
    with nbgrad.printing.printoptions(precision=2):
        assert repr(x) == "tensor([1.23])"
    assert repr(x) == "tensor([1.2346])"


def test_parameter_repr():
    w = np.array([[0.5, -1.0]], dtype=np.float32)
    assert repr(nbgrad.nn.Parameter(nbgrad.from_numpy(w))) == repr(
        torch.nn.Parameter(torch.from_numpy(w)))


@pytest.mark.parametrize("make", [
    lambda T: T.tensor([1.5, 2.0]),
    lambda T: T.tensor([1.5, 2.0], dtype=T.float32),
    lambda T: T.zeros(0),
    lambda T: T.zeros(2, 0, dtype=T.float32),
])
def test_suffixes_follow_the_default_dtype(make):
    torch.set_default_dtype(torch.float64)
    nbgrad.set_default_dtype(nbgrad.float64)
    try:
        with torch_dtype_names():
            assert repr(make(nbgrad)) == repr(make(torch))
    finally:
        torch.set_default_dtype(torch.float32)
        nbgrad.set_default_dtype(nbgrad.float32)


def test_format_of_a_0d_parameter_is_its_repr_as_torch():
    p = nbgrad.nn.Parameter(nbgrad.tensor(1.5))
    q = torch.nn.Parameter(torch.tensor(1.5))
    assert f"{p}" == f"{q}"
