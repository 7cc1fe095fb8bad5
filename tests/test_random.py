"""Random sampling against torch: shapes, dtypes, ranges, distributions, Generator
reproducibility, in-place version/leaf rules and node names, and PyTorch's error texts.
(The numbers themselves, torch's stream bit for bit, are tested in test_random_streams.py.)"""
import numpy as np
import pytest

import nbgrad

torch = pytest.importorskip("torch")


def gen(T, seed=0):
    return T.Generator().manual_seed(seed)


# ---- shapes, dtypes, grad_fn: every function and overload, as torch --------------------------
SAMPLES = {
    "rand": lambda T, g: T.rand(2, 3, generator=g),
    "rand_tuple_f64": lambda T, g: T.rand((4,), generator=g, dtype=T.float64),
    "rand_f16": lambda T, g: T.rand(5, generator=g, dtype=T.float16),
    "randn": lambda T, g: T.randn(3, 1, 2, generator=g),
    "randn_grad": lambda T, g: T.randn(3, generator=g, requires_grad=True),
    "randint_high": lambda T, g: T.randint(7, (3, 2), generator=g),
    "randint_low_high": lambda T, g: T.randint(-3, 4, (5,), generator=g),
    "randint_size_kw": lambda T, g: T.randint(0, 4, size=(2,), generator=g),
    "randint_float": lambda T, g: T.randint(5, (3,), generator=g, dtype=T.float32),
    "randint_bool": lambda T, g: T.randint(0, 2, (3,), generator=g, dtype=T.bool),
    "randint_uint8": lambda T, g: T.randint(0, 256, (3,), generator=g, dtype=T.uint8),
    "randperm": lambda T, g: T.randperm(6, generator=g),
    "randperm_float": lambda T, g: T.randperm(4, generator=g, dtype=T.float64),
    "randperm_0": lambda T, g: T.randperm(0, generator=g),
    "rand_like": lambda T, g: T.rand_like(T.ones(2, 3, dtype=T.float64), generator=g),
    "randn_like": lambda T, g: T.randn_like(T.ones(4), generator=g),
    "randint_like": lambda T, g: T.randint_like(T.ones(2, 2), 10, generator=g),
    "randint_like_low": lambda T, g: T.randint_like(T.ones(3, dtype=T.int32), 3, 9, generator=g),
    "bernoulli": lambda T, g: T.bernoulli(T.full((2, 3), 0.3), generator=g),
    "bernoulli_f64": lambda T, g: T.bernoulli(T.full((3,), 0.5, dtype=T.float64), generator=g),
    "bernoulli_grad": lambda T, g: T.bernoulli(T.full((3,), 0.5, requires_grad=True),
                                               generator=g),
    "bernoulli_p": lambda T, g: T.bernoulli(T.zeros(4), 0.5, generator=g),
    "tensor_bernoulli": lambda T, g: T.full((3,), 0.5).bernoulli(generator=g),
    "normal_tensor_float": lambda T, g: T.normal(T.zeros(2, 3), 2.0, generator=g),
    "normal_tensor_float_grad": lambda T, g: T.normal(T.zeros(2, requires_grad=True), 1.0,
                                                      generator=g),
    "normal_float_tensor_grad": lambda T, g: T.normal(1.0, T.ones(3, requires_grad=True),
                                                      generator=g),
    "normal_tensor_tensor": lambda T, g: T.normal(T.zeros(2, 3, requires_grad=True),
                                                  T.ones(3, requires_grad=True), generator=g),
    "normal_f64_mean": lambda T, g: T.normal(T.zeros(2, dtype=T.float64), 1.0, generator=g),
    "normal_size": lambda T, g: T.normal(2.0, 3.0, (2, 2), generator=g),
    "normal_size_f64": lambda T, g: T.normal(2.0, 3.0, size=(3,), generator=g,
                                             dtype=T.float64),
    "multinomial": lambda T, g: T.multinomial(T.tensor([0.2, 0.3, 0.5]), 2, generator=g),
    "multinomial_rows_repl": lambda T, g: T.multinomial(T.ones(2, 3), 7, True, generator=g),
    "multinomial_grad": lambda T, g: T.multinomial(T.ones(3, requires_grad=True), 3,
                                                   generator=g),
    "tensor_multinomial": lambda T, g: T.ones(4).multinomial(2, generator=g),
}


def describe(t):
    return (tuple(t.shape), str(t.dtype).split(".")[-1], t.requires_grad,
            t.grad_fn.name().split("::")[-1] if t.grad_fn is not None else None, t.is_leaf)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_shape_dtype_and_node_as_torch(name):
    f = SAMPLES[name]
    assert describe(f(nbgrad, gen(nbgrad))) == describe(f(torch, gen(torch)))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_generator_reproducibility(name):
    f = SAMPLES[name]
    a = f(nbgrad, gen(nbgrad, 5)).detach().numpy()
    b = f(nbgrad, gen(nbgrad, 5)).detach().numpy()
    np.testing.assert_array_equal(a, b)
    nbgrad.manual_seed(123)
    c = f(nbgrad, None).detach().numpy()
    nbgrad.manual_seed(123)
    np.testing.assert_array_equal(c, f(nbgrad, None).detach().numpy())


def test_different_seeds_and_streams_differ():
    g = gen(nbgrad, 1)
    a, b = nbgrad.rand(100, generator=g), nbgrad.rand(100, generator=g)
    assert not nbgrad.equal(a, b)
    assert not nbgrad.equal(nbgrad.rand(100, generator=gen(nbgrad, 2)),
                            nbgrad.rand(100, generator=gen(nbgrad, 1)))
    # a private generator does not move the global one
    nbgrad.manual_seed(0)
    x = nbgrad.rand(3)
    nbgrad.manual_seed(0)
    nbgrad.randn(50, generator=gen(nbgrad, 9))
    assert nbgrad.equal(x, nbgrad.rand(3))


def test_generator_state_round_trip():
    g = gen(nbgrad, 7)
    state = g.get_state()
    assert state.dtype == nbgrad.uint8 and state.ndim == 1
    a = nbgrad.randn(5, generator=g)
    g.set_state(state)
    assert nbgrad.equal(a, nbgrad.randn(5, generator=g))
    assert g.initial_seed() == 7
    s = nbgrad.get_rng_state()
    b = nbgrad.rand(4)
    nbgrad.set_rng_state(s)
    assert nbgrad.equal(b, nbgrad.rand(4))
    with pytest.raises(TypeError, match="ByteTensor"):
        g.set_state({"not": "a tensor"})


# ---- ranges and distributions (a fixed seed: these cannot flake) -------------------------------
N = 200_000


def test_uniform_and_integer_ranges():
    g = gen(nbgrad)
    u = nbgrad.rand(N, generator=g).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.005
    h = nbgrad.rand(N, generator=g, dtype=nbgrad.float16).numpy()
    assert h.min() >= 0 and h.max() < 1
    r = nbgrad.randint(-3, 4, (N,), generator=g).numpy()
    assert set(np.unique(r)) == set(range(-3, 4))
    counts = np.bincount(r + 3) / N
    np.testing.assert_allclose(counts, 1 / 7, atol=0.005)
    p = nbgrad.randperm(50, generator=g).numpy()
    assert sorted(p.tolist()) == list(range(50))
    x = nbgrad.empty(N).uniform_(-2, 3, generator=g).numpy()
    assert x.min() >= -2 and x.max() < 3 and abs(x.mean() - 0.5) < 0.02


def test_random__overloads_ranges():
    g = gen(nbgrad)
    a = nbgrad.empty(N).random_(generator=g).numpy()
    assert a.min() >= 0 and a.max() <= 2 ** 24 and np.all(a == np.round(a))
    assert a.max() > 2 ** 23
    b = nbgrad.empty(N, dtype=nbgrad.int8).random_(generator=g).numpy()
    assert b.min() == 0 and b.max() == 127
    c = nbgrad.empty(N).random_(5, generator=g).numpy()
    assert set(np.unique(c)) == {0, 1, 2, 3, 4}
    d = nbgrad.empty(N, dtype=nbgrad.int64).random_(-2, 3, generator=g).numpy()
    assert set(np.unique(d)) == {-2, -1, 0, 1, 2}
    e = nbgrad.empty(N, dtype=nbgrad.uint8).random_(250, None, generator=g).numpy()
    assert set(np.unique(e)) == set(range(250, 256))
    f = nbgrad.empty(1000, dtype=nbgrad.bool).random_(generator=g).numpy()
    assert set(np.unique(f)) == {False, True}


def test_continuous_distributions():
    g = gen(nbgrad)
    z = nbgrad.randn(N, generator=g, dtype=nbgrad.float64).numpy()
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    n = nbgrad.empty(N).normal_(3.0, 0.5, generator=g).numpy()
    assert abs(n.mean() - 3) < 0.01 and abs(n.std() - 0.5) < 0.01
    m = nbgrad.normal(nbgrad.full((N,), -1.0), nbgrad.full((N,), 2.0), generator=g).numpy()
    assert abs(m.mean() + 1) < 0.02 and abs(m.std() - 2) < 0.02
    s = nbgrad.normal(5.0, 0.1, (N,), generator=g).numpy()
    assert abs(s.mean() - 5) < 0.002 and abs(s.std() - 0.1) < 0.002
    e = nbgrad.empty(N).exponential_(4.0, generator=g).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005
    c = nbgrad.empty(N).cauchy_(2.0, 1.0, generator=g).numpy()
    assert abs(np.median(c) - 2) < 0.02
    ln = nbgrad.empty(N, dtype=nbgrad.float64).log_normal_(0.5, 0.25, generator=g).numpy()
    assert abs(np.median(np.log(ln)) - 0.5) < 0.005
    geo = nbgrad.empty(N).geometric_(0.25, generator=g).numpy()
    assert geo.min() == 1 and np.all(geo == np.round(geo)) and abs(geo.mean() - 4) < 0.05


def test_bernoulli_distributions():
    g = gen(nbgrad)
    probs = nbgrad.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).expand(N, 5)
    b = nbgrad.bernoulli(probs, generator=g).numpy()
    assert set(np.unique(b)) == {0.0, 1.0}
    np.testing.assert_allclose(b.mean(0), [0, 0.1, 0.5, 0.9, 1], atol=0.005)
    x = nbgrad.empty(N, dtype=nbgrad.int64).bernoulli_(0.3, generator=g).numpy()
    assert x.dtype == np.int64 and abs(x.mean() - 0.3) < 0.005
    y = nbgrad.empty(N, 2).bernoulli_(nbgrad.tensor([0.2, 0.7]), generator=g).numpy()
    np.testing.assert_allclose(y.mean(0), [0.2, 0.7], atol=0.005)


def test_multinomial_distributions():
    g = gen(nbgrad)
    w = nbgrad.tensor([[1.0, 2.0, 0.0, 7.0], [5.0, 0.0, 5.0, 0.0]])
    s = nbgrad.multinomial(w, 50_000, replacement=True, generator=g).numpy()
    f0 = np.bincount(s[0], minlength=4) / s.shape[1]
    f1 = np.bincount(s[1], minlength=4) / s.shape[1]
    np.testing.assert_allclose(f0, [0.1, 0.2, 0, 0.7], atol=0.01)
    np.testing.assert_allclose(f1, [0.5, 0, 0.5, 0], atol=0.01)
    # without replacement: distinct indices, first draw distributed as the weights
    draws = np.stack([nbgrad.multinomial(w[0], 3, generator=g).numpy() for _ in range(20_000)])
    assert all(len(set(r)) == 3 for r in draws[:200])
    np.testing.assert_allclose(np.bincount(draws[:, 0], minlength=4) / len(draws),
                               [0.1, 0.2, 0, 0.7], atol=0.01)
    # the zero-weight category only once the others are used up, as torch
    full = nbgrad.multinomial(w[0], 4, generator=g).numpy()
    assert full[-1] == 2 and sorted(full.tolist()) == [0, 1, 2, 3]


# ---- in place: version, leaf rules, node names and zero gradients, as torch -------------------
FILLS = {
    "uniform_": lambda t, g: t.uniform_(generator=g),
    "uniform_range": lambda t, g: t.uniform_(-1, 1, generator=g),
    "normal_": lambda t, g: t.normal_(generator=g),
    "bernoulli_p": lambda t, g: t.bernoulli_(0.5, generator=g),
    "bernoulli_tensor": lambda t, g: t.bernoulli_(t.detach() * 0 + 0.5, generator=g),
    "random_": lambda t, g: t.random_(generator=g),
    "random_to": lambda t, g: t.random_(10, generator=g),
    "random_from_to": lambda t, g: t.random_(2, 10, generator=g),
    "exponential_": lambda t, g: t.exponential_(generator=g),
    "geometric_": lambda t, g: t.geometric_(0.3, generator=g),
    "cauchy_": lambda t, g: t.cauchy_(generator=g),
    "log_normal_": lambda t, g: t.log_normal_(generator=g),
}


def fill_graph(T, fill):
    x = T.ones(2, 3, requires_grad=True)
    y = x * 2
    v0 = y._version
    out = fill(y, gen(T))
    assert out is y
    name = y.grad_fn.name()
    (y * 3).sum().backward()
    return name, y._version - v0, x.grad.tolist()


def row_cases():
    """(name, thunk giving nbgrad outputs) reaching every row of nbgrad/ops/random.py, for
    test_ops.test_every_row_has_a_case (the node names are compared with torch's above/below)."""
    for name, f in SAMPLES.items():
        yield name, lambda f=f: f(nbgrad, gen(nbgrad))
    for name, fill in FILLS.items():
        yield name, lambda fill=fill: fill(nbgrad.ones(2, 3, requires_grad=True) * 2, gen(nbgrad))


@pytest.mark.parametrize("name", sorted(FILLS))
def test_inplace_node_version_and_grad_as_torch(name):
    assert fill_graph(nbgrad, FILLS[name]) == fill_graph(torch, FILLS[name])


@pytest.mark.parametrize("name", sorted(FILLS))
def test_inplace_leaf_rules_as_torch(name):
    fill = FILLS[name]

    def leaf(T):
        x = T.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError) as info:
            fill(x, gen(T))
        with pytest.raises(RuntimeError) as view_info:
            fill(x[:2], gen(T))
        with T.no_grad():
            fill(x, gen(T))  # allowed under no_grad, as nn.init does
        fill(x.detach(), gen(T))
        return str(info.value), str(view_info.value), x._version, x.is_leaf, x.grad_fn
    assert leaf(nbgrad) == leaf(torch)


def test_inplace_on_a_view_of_a_non_leaf_gives_copyslices():
    def run(T):
        x = T.ones(2, 3, requires_grad=True)
        y = x * 1
        y[0].normal_(generator=gen(T))
        y.sum().backward()
        return y.grad_fn.name().split("::")[-1], x.grad.tolist()
    assert run(nbgrad) == run(torch)


def test_the_fill_changes_the_values_it_is_applied_to():
    g = gen(nbgrad)
    t = nbgrad.zeros(1000)
    base = nbgrad.zeros(4, 250)
    base[1].uniform_(5, 6, generator=g)
    assert base[1].min().item() >= 5 and base[0].abs().sum().item() == 0
    assert t.normal_(generator=g).std().item() > 0.9


# ---- errors in PyTorch's words ---------------------------------------------------------------
ERRORS = {
    "randint_low_ge_high": lambda T: T.randint(5, 5, (2,)),
    "randint_size_int": lambda T: T.randint(5, 3),
    "randint_uint8_range": lambda T: T.randint(0, 300, (3,), dtype=T.uint8),
    "randint_int8_low": lambda T: T.randint(-200, 3, (3,), dtype=T.int8),
    "randint_requires_grad": lambda T: T.randint(5, (3,), requires_grad=True),
    "randint_like_bad": lambda T: T.randint_like(T.ones(2), 10, 3),
    "randperm_negative": lambda T: T.randperm(-1),
    "rand_int_dtype": lambda T: T.rand(2, dtype=T.int64),
    "randn_int_dtype": lambda T: T.randn(2, dtype=T.int64),
    "rand_like_int": lambda T: T.rand_like(T.ones(2, dtype=T.int64)),
    "randn_like_int": lambda T: T.randn_like(T.ones(2, dtype=T.int64)),
    "bernoulli_out_of_range": lambda T: T.bernoulli(T.full((3,), 2.0)),
    "bernoulli_int": lambda T: T.bernoulli(T.ones(3, dtype=T.int64)),
    "bernoulli__p": lambda T: T.ones(3).bernoulli_(2),
    "bernoulli__tensor_p": lambda T: T.ones(3).bernoulli_(T.full((3,), -1.0)),
    "bernoulli__p_shape": lambda T: T.ones(2, 3).bernoulli_(T.full((4,), 0.5)),
    "normal_std_negative": lambda T: T.normal(T.zeros(2), -1.0),
    "normal_std_tensor_negative": lambda T: T.normal(T.zeros(2), T.tensor([1.0, -1.0])),
    "normal_size_std_negative": lambda T: T.normal(0.0, -1.5, (2,)),
    "normal_int_mean": lambda T: T.normal(T.zeros(2, dtype=T.int64), 1.0),
    "normal_shapes": lambda T: T.normal(T.zeros(2, 3), T.ones(4)),
    "normal__std": lambda T: T.ones(2).normal_(0, -1),
    "normal__int": lambda T: T.ones(2, dtype=T.int64).normal_(),
    "uniform__range": lambda T: T.ones(2).uniform_(1, 0),
    "uniform__int": lambda T: T.ones(2, dtype=T.int64).uniform_(),
    "uniform__bool": lambda T: T.ones(2, dtype=T.bool).uniform_(),
    "random__from_ge_to": lambda T: T.ones(2).random_(5, 3),
    "random__zero": lambda T: T.ones(2).random_(0),
    "random__uint8": lambda T: T.ones(2, dtype=T.uint8).random_(0, 300),
    "random__int16": lambda T: T.ones(2, dtype=T.int16).random_(0, 2 ** 20),
    "random__bool": lambda T: T.ones(2, dtype=T.bool).random_(0, 3),
    "exponential__lambda": lambda T: T.ones(2).exponential_(0),
    "exponential__int": lambda T: T.ones(2, dtype=T.int64).exponential_(),
    "geometric__p": lambda T: T.ones(2).geometric_(1),
    "cauchy__sigma": lambda T: T.ones(2).cauchy_(0, 0),
    "cauchy__int": lambda T: T.ones(2, dtype=T.int64).cauchy_(),
    "log_normal__std": lambda T: T.ones(2).log_normal_(1, 0),
    "log_normal__int": lambda T: T.ones(2, dtype=T.int64).log_normal_(),
    "multinomial_int": lambda T: T.multinomial(T.ones(3, dtype=T.int64), 1),
    "multinomial_3d": lambda T: T.multinomial(T.ones(2, 2, 2), 1),
    "multinomial_0d": lambda T: T.multinomial(T.tensor(1.0), 1),
    "multinomial_zero_samples": lambda T: T.multinomial(T.ones(3), 0),
    "multinomial_too_many": lambda T: T.multinomial(T.ones(3), 4),
    "multinomial_negative": lambda T: T.multinomial(T.tensor([1.0, -1.0]), 1),
    "multinomial_nan": lambda T: T.multinomial(T.tensor([1.0, float("nan")]), 1, True),
    "multinomial_inf": lambda T: T.multinomial(T.tensor([1.0, float("inf")]), 1),
    "multinomial_zero_row": lambda T: T.multinomial(T.tensor([[1.0, 1.0], [0.0, 0.0]]), 1),
    "variable_of_a_list": lambda T: T.autograd.Variable([1.0, 2.0]),
}


def first_line(fn, lib):
    with pytest.raises(Exception) as info:
        fn(lib)
    return type(info.value).__name__, str(info.value).split("\n")[0].replace("torch.", "nbgrad.")


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_as_torch(name):
    assert first_line(ERRORS[name], nbgrad) == first_line(ERRORS[name], torch)


def test_normal_needs_a_size_for_two_floats():
    assert first_line(lambda T: T.normal(0.0, 1.0), nbgrad) == first_line(
        lambda T: T.normal(0.0, 1.0), torch)
    assert first_line(lambda T: T.randint(5), nbgrad) == first_line(lambda T: T.randint(5),
                                                                     torch)


OUTS = {
    "rand": lambda T, o, g: T.rand(2, 3, out=o, generator=g),
    "randn": lambda T, o, g: T.randn(2, 3, out=o, generator=g),
    "randint": lambda T, o, g: T.randint(3, (2, 3), out=o, generator=g),
    "randperm": lambda T, o, g: T.randperm(6, out=o, generator=g),
    "normal": lambda T, o, g: T.normal(T.zeros(2, 3), 1.0, out=o, generator=g),
    "normal_size": lambda T, o, g: T.normal(0.0, 1.0, (2, 3), out=o, generator=g),
    "bernoulli": lambda T, o, g: T.bernoulli(T.full((2, 3), 0.5), out=o, generator=g),
    "multinomial": lambda T, o, g: T.multinomial(T.ones(3), 2, out=o, generator=g),
}


@pytest.mark.parametrize("name", sorted(OUTS))
@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_out_argument_as_torch(name, dtype):
    def run(T):
        o = T.zeros(2, 3, dtype=getattr(T, dtype))
        try:
            r = OUTS[name](T, o, gen(T))
        except Exception as e:  # noqa: BLE001 - the same refusal is the point
            return type(e).__name__, str(e).split("\n")[0].replace("torch.", "nbgrad.")
        return r is o, tuple(o.shape), str(o.dtype).split(".")[-1], o._version
    assert run(nbgrad) == run(torch)


def test_out_refuses_inputs_that_require_grad():
    for T in (nbgrad, torch):
        with pytest.raises(RuntimeError, match="out=... arguments don't support automatic"):
            T.normal(T.zeros(3, requires_grad=True), 1.0, out=T.zeros(3))


# ---- randint: every signature torch accepts, positional or by keyword --------------------------
RANDINT_CALLS = [
    "low=2, high=5, size=(3,)", "high=5, size=(3,)", "2, high=5, size=(3,)", "5, size=(3,)",
    "2, 5, size=(3,)", "5, (3,)", "2, 5, (3,)", "high=5, size=(3,), low=1",
    "2, high=5, size=[3]", "low=-3, high=3, size=(2, 2), dtype=T.int32",
    "low=0, high=7, size=(4,), generator=T.Generator().manual_seed(3)",
]
RANDINT_ERRORS = ["low=2, size=(3,)", "low=2, high=5", "high=5", "size=(3,)",
                  "low=1.5, high=5, size=(3,)", "5, low=1, size=(2,)", "2, 5"]


@pytest.mark.parametrize("call", RANDINT_CALLS)
def test_randint_signatures_as_torch(call):
    def draw(T):
        T.manual_seed(0)
        return eval(f"T.randint({call})")
    ours, theirs = draw(nbgrad), draw(torch)
    assert ours.tolist() == theirs.tolist()
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]


@pytest.mark.parametrize("call", RANDINT_ERRORS)
def test_randint_argument_errors_as_torch(call):
    fn = eval(f"lambda T: T.randint({call})")
    (ours, ours_text), (theirs, theirs_text) = first_line(fn, nbgrad), first_line(fn, torch)
    assert ours == theirs and ours_text.split(" - got")[0] == theirs_text.split(" - got")[0]
