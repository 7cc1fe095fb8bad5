"""nbgrad's random numbers against torch's CPU stream, bit for bit: every sampler, dtype and size
class (scalar vs vectorised Box-Muller, 24- vs 53-bit uniforms, 32- vs 64-bit integer draws),
the generator's state in torch's layout, nn.init and the layers' default initialisation, and the
data utilities' shuffles.

CI runs a few seeds; ``NBGRAD_RNG_SEEDS=20`` runs 20 (and the sizes up to 10**5 for all).
"""
import math
import os

import numpy as np
import pytest

import nbgrad

torch = pytest.importorskip("torch")

_N_SEEDS = int(os.environ.get("NBGRAD_RNG_SEEDS", "0"))
SEEDS = list(range(_N_SEEDS)) if _N_SEEDS else [0, 1, 2**32 + 7]
SIZES = [1, 2, 7, 15, 16, 17, 31, 100, 1000, 100003]


def same(f, seed, *args):
    """f(nbgrad, *args) and f(torch, *args) after manual_seed(seed), as numpy arrays; also the
    generator states after, which must agree byte for byte."""
    nbgrad.manual_seed(seed)
    torch.manual_seed(seed)
    a = f(nbgrad, *args)
    b = f(torch, *args)
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_array_equal(a, b)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(nbgrad.get_rng_state().numpy(), torch.get_rng_state().numpy())


F32, F64, F16 = "float32", "float64", "float16"

# name -> (f(T, n, dt), the dtypes it takes); n the number of elements
SAMPLERS = {
    "rand": (lambda T, n, dt: T.rand(n, dtype=getattr(T, dt)), (F32, F64, F16)),
    "randn": (lambda T, n, dt: T.randn(n, dtype=getattr(T, dt)), (F32, F64, F16)),
    "uniform_": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).uniform_(-0.3, 1.7),
                 (F32, F64, F16)),
    "normal_": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).normal_(0.25, 3.5),
                (F32, F64, F16)),
    "normal_2d": (lambda T, n, dt: T.randn(n, 3, dtype=getattr(T, dt)), (F32, F64)),
    "randint_small": (lambda T, n, dt: T.randint(-4, 1000, (n,)), ("int64",)),
    "randint_large": (lambda T, n, dt: T.randint(0, 2**40, (n,)), ("int64",)),
    "randint_f32": (lambda T, n, dt: T.randint(0, 9, (n,), dtype=T.float32), ("float32",)),
    "random_": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).random_(),
                ("int64", "int32", "uint8", F32, F64, "bool")),
    "random_to": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).random_(77),
                  ("int64", F32)),
    "random_full": (lambda T, n, dt: T.empty(n, dtype=T.int64).random_(-2**63, None),
                    ("int64",)),
    "randperm": (lambda T, n, dt: T.randperm(n), ("int64",)),
    "bernoulli_p": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).bernoulli_(0.3),
                    (F32, F64)),
    "bernoulli_tensor": (lambda T, n, dt: T.bernoulli(T.rand(n, dtype=getattr(T, dt))),
                         (F32, F64)),
    "exponential_": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).exponential_(2.5),
                     (F32, F64)),
    "geometric_": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).geometric_(0.2),
                   (F32, F64)),
    "cauchy_": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).cauchy_(0.5, 2.0), (F32, F64)),
    "log_normal_": (lambda T, n, dt: T.empty(n, dtype=getattr(T, dt)).log_normal_(0.5, 0.75),
                    (F32, F64)),
    "normal_tensor_float": (lambda T, n, dt: T.normal(T.arange(n, dtype=getattr(T, dt)), 2.0),
                            (F32, F64)),
    "normal_float_tensor": (lambda T, n, dt: T.normal(1.5, T.ones(n, dtype=getattr(T, dt))),
                            (F32, F64)),
    "normal_size": (lambda T, n, dt: T.normal(2.0, 3.0, (n,), dtype=getattr(T, dt)), (F32, F64)),
    "multinomial": (lambda T, n, dt: T.multinomial(T.rand(3, n, dtype=getattr(T, dt)) + 0.01,
                                                   min(n, 5)), (F32, F64)),
    "multinomial_repl": (lambda T, n, dt: T.multinomial(T.rand(2, n, dtype=getattr(T, dt)),
                                                        9, True), (F32, F64)),
    "multinomial_one": (lambda T, n, dt: T.multinomial(T.rand(n, dtype=getattr(T, dt)), 1),
                        (F32,)),
}
CASES = [(name, dt) for name, (_, dts) in SAMPLERS.items() for dt in dts]


@pytest.mark.parametrize("name,dt", CASES)
def test_sampler_matches_torch_bit_for_bit(name, dt):
    f = SAMPLERS[name][0]
    sizes = SIZES if _N_SEEDS or name in ("randn", "rand", "normal_") else SIZES[:-1]
    for seed in SEEDS:
        for n in sizes:
            same(f, seed, n, dt)


def test_randperm_of_every_small_size_is_torchs():
    """randperm composes its swaps at once: every n up to 300 (the swaps aiming at one
    position, chains of them, a swap with itself) and seeds, against torch's sequential loop."""
    for n in range(0, 300):
        for seed in SEEDS[:2]:
            same(lambda T: T.randperm(n), seed)


def test_draws_across_calls_keep_torch_order():
    """The scalar path's cached Box-Muller sample carries over to the next small draw."""
    def f(T):
        a = T.randn(3)
        b = T.randn(1, dtype=T.float64)
        c = T.randn(20)
        d = T.randn(5)
        e = T.rand(2)
        return T.cat([a.double(), b, c.double(), d.double(), e.double()])
    for seed in SEEDS:
        same(lambda T: f(T), seed)


def test_state_round_trips_between_libraries():
    nbgrad.manual_seed(3)
    nbgrad.randn(3)  # leaves a cached normal in the state
    state = nbgrad.get_rng_state()
    assert tuple(state.shape) == (5056,) and state.dtype is nbgrad.uint8
    torch.set_rng_state(torch.from_numpy(state.numpy().copy()))
    a, b = nbgrad.randn(5).numpy(), torch.randn(5).numpy()
    np.testing.assert_array_equal(a, b)
    torch.manual_seed(11)
    torch.rand(700)
    nbgrad.set_rng_state(nbgrad.from_numpy(torch.get_rng_state().numpy()))
    np.testing.assert_array_equal(nbgrad.rand(10).numpy(), torch.rand(10).numpy())


def test_generator_objects():
    g, h = nbgrad.Generator(), torch.Generator()
    assert g.initial_seed() == h.initial_seed() == 67280421310721
    np.testing.assert_array_equal(g.get_state().numpy(), h.get_state().numpy())
    np.testing.assert_array_equal(nbgrad.rand(4, generator=g).numpy(),
                                  torch.rand(4, generator=h).numpy())
    assert g.manual_seed(-1) is g and g.initial_seed() == h.manual_seed(-1).initial_seed()
    s = g.seed()
    assert g.initial_seed() == s and 0 <= s < 2**64
    before = g.get_state()
    x = nbgrad.randn(40, generator=g).numpy()
    g.set_state(before)
    np.testing.assert_array_equal(nbgrad.randn(40, generator=g).numpy(), x)
    with pytest.raises(RuntimeError, match="size 5048 or a CPUGeneratorImplState"):
        g.set_state(nbgrad.zeros(10, dtype=nbgrad.uint8))


def test_default_seed_is_per_process_and_fork_rng_restores():
    import subprocess
    import sys
    code = "import nbgrad; print(nbgrad.initial_seed())"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(nbgrad.__file__)))
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env).stdout for _ in range(2)}
    assert len(runs) == 2  # torch 2.13 seeds its default generator from the OS
    nbgrad.manual_seed(5)
    with nbgrad.random.fork_rng():
        nbgrad.rand(100)
    torch.manual_seed(5)
    np.testing.assert_array_equal(nbgrad.rand(3).numpy(), torch.rand(3).numpy())


def test_numpy_sin_cos_agree_with_glibc_on_box_muller_angles():
    """float64 randn of 16 elements or more takes cos / sin from numpy (vectorised) where torch
    calls glibc: they must agree on the angles 2 pi u."""
    import math
    u = np.random.RandomState(0).random_sample(200_000)
    u = np.concatenate([u, np.arange(4096) / 4096.0, 1 - 2.0 ** -np.arange(1, 53)])
    theta = 2.0 * math.pi * u
    np.testing.assert_array_equal(np.cos(theta), [math.cos(t) for t in theta.tolist()])
    np.testing.assert_array_equal(np.sin(theta), [math.sin(t) for t in theta.tolist()])


def test_unchecked_fma_box_muller_is_exact_on_every_float32_uniform():
    """float32 randn's polynomials (torch's AVX2 log256_ps / sincos256_ps) run their fused
    multiply-adds as one float64 sum rounded to float32, without the halfway check (and the log
    with fewer passes, _log256_ps_fast): a proof by
    exhaustion that this equals the checked emulation on all 2**24 uniforms torch can feed them
    (1 - u for the log, float32(2 pi) * u for the angle), bit for bit."""
    from nbgrad import random_kernels as K
    for start in range(0, 2 ** 24, 2 ** 20):
        u = np.arange(start, start + 2 ** 20, dtype=np.uint32).astype(np.float32) * np.float32(
            2.0 ** -24)
        x = np.float32(1) - u
        np.testing.assert_array_equal(K._log256_ps_fast(x).view(np.int32),
                                      K.log256_ps(x).view(np.int32))
        theta = K._TWO_PI_F * u
        for fast, checked in zip(K._sincos256_ps_fast(theta), K.sincos256_ps(theta)):
            np.testing.assert_array_equal(fast.view(np.int32), checked.view(np.int32))


# ---- nn.init and the layers' default initialisation -----------------------------------------
def test_linear_3_2_weight_is_torchs():
    nbgrad.manual_seed(0)
    torch.manual_seed(0)
    np.testing.assert_array_equal(nbgrad.nn.Linear(3, 2).weight.detach().numpy(),
                                  torch.nn.Linear(3, 2).weight.detach().numpy())


LAYERS = {
    "Linear": lambda T: T.nn.Linear(64, 128),
    "Conv1d": lambda T: T.nn.Conv1d(4, 5, 2),
    "Conv2d": lambda T: T.nn.Conv2d(3, 8, 3),
    "ConvTranspose2d": lambda T: T.nn.ConvTranspose2d(3, 4, 3),
    "Embedding": lambda T: T.nn.Embedding(10, 4),
    "LSTM": lambda T: T.nn.LSTM(5, 7, num_layers=2),
    "GRU": lambda T: T.nn.GRU(3, 4),
    "RNN": lambda T: T.nn.RNN(3, 4),
    "LSTMCell": lambda T: T.nn.LSTMCell(3, 5),
    "MultiheadAttention": lambda T: T.nn.MultiheadAttention(8, 2),
    "TransformerEncoderLayer": lambda T: T.nn.TransformerEncoderLayer(8, 2, 16),
    "Bilinear": lambda T: T.nn.Bilinear(3, 4, 5),
    "MLP": lambda T: T.nn.Sequential(T.nn.Linear(64, 128), T.nn.ReLU(), T.nn.Linear(128, 10)),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_default_initialisation_is_torchs(name):
    for seed in SEEDS[:2]:
        nbgrad.manual_seed(seed)
        torch.manual_seed(seed)
        a = dict(LAYERS[name](nbgrad).named_parameters())
        b = dict(LAYERS[name](torch).named_parameters())
        assert list(a) == list(b)
        for k in b:
            np.testing.assert_array_equal(a[k].detach().numpy(), b[k].detach().numpy(), k)


INITS = {
    "uniform_": lambda T: T.nn.init.uniform_(T.empty(7), -2, 3),
    "normal_": lambda T: T.nn.init.normal_(T.empty(70, dtype=T.float64), 1, 2),
    "xavier_uniform_": lambda T: T.nn.init.xavier_uniform_(T.empty(30, 20)),
    "xavier_normal_": lambda T: T.nn.init.xavier_normal_(T.empty(30, 20), gain=2.0),
    "kaiming_uniform_": lambda T: T.nn.init.kaiming_uniform_(T.empty(30, 20),
                                                             nonlinearity="relu"),
    "kaiming_normal_": lambda T: T.nn.init.kaiming_normal_(T.empty(3, 5), mode="fan_out"),
    "trunc_normal_": lambda T: T.nn.init.trunc_normal_(T.empty(300, 20), std=0.02),
    "trunc_normal_wide": lambda T: T.nn.init.trunc_normal_(T.empty(4000), a=-0.5, b=0.5),
}


@pytest.mark.parametrize("name", sorted(INITS))
def test_init_is_torchs(name):
    for seed in SEEDS:
        same(INITS[name], seed)


@pytest.mark.parametrize("shape,gain", [((6, 4), 1.0), ((4, 6), 1.0), ((20, 20), 2.0),
                                        ((64, 32), 1.0), ((3, 5, 2), math.sqrt(2)),
                                        ((5, 3), 1.0)])
def test_orthogonal_is_torchs_to_its_rounding(shape, gain):
    """orthogonal_ spends the stream as torch (the state after agrees) and its Q is the
    correctly rounded one: each element differs from torch's by no more than torch's own
    float32 error against a float64 QR of the same Gaussian draws, plus half an ulp (and one
    more for a gain that does not scale exactly)."""
    for seed in SEEDS:
        nbgrad.manual_seed(seed)
        torch.manual_seed(seed)
        a = nbgrad.nn.init.orthogonal_(nbgrad.empty(*shape), gain=gain).numpy()
        b = torch.nn.init.orthogonal_(torch.empty(*shape), gain=gain).numpy()
        np.testing.assert_array_equal(nbgrad.get_rng_state().numpy(),
                                      torch.get_rng_state().numpy())
        torch.manual_seed(seed)
        rows = shape[0]
        g = torch.empty(rows, math.prod(shape) // rows).normal_().double()
        g = g.t() if g.shape[0] < g.shape[1] else g
        q, r = torch.linalg.qr(g)
        ref = q * torch.diag(r).sign()
        ref = (ref.t() if shape[0] < math.prod(shape[1:]) else ref).numpy().reshape(shape)
        ref = ref * gain
        ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
        slack = ulp * (0.5 if gain in (1.0, 2.0) else 1.5)
        assert np.all(np.abs(a - ref) <= slack)  # nbgrad's: correctly rounded
        assert np.all(np.abs(a.astype(np.float64) - b) <= np.abs(b - ref) + slack)
        assert a.dtype == b.dtype


def test_dropout_masks_are_torchs():
    for seed in SEEDS:
        same(lambda T: T.nn.functional.dropout(T.ones(1000) * 3, 0.1), seed)
        same(lambda T: T.nn.Dropout(0.5)(T.arange(60.).reshape(6, 10)), seed)
        same(lambda T: T.nn.functional.dropout2d(T.ones(4, 6, 3, 3), 0.3), seed)


# ---- data utilities ---------------------------------------------------------------------------
def _loader_order(T):
    ds = T.utils.data.TensorDataset(T.arange(50.).reshape(25, 2), T.arange(25))
    out = []
    for _ in range(2):
        for _, y in T.utils.data.DataLoader(ds, batch_size=4, shuffle=True):
            out += y.tolist()
    return out + T.rand(3).tolist()


def _loader_generator(T):
    g = T.Generator().manual_seed(7)
    ds = T.utils.data.TensorDataset(T.arange(25))
    out = [b[0].tolist() for b in T.utils.data.DataLoader(ds, batch_size=5, shuffle=True,
                                                          generator=g)]
    return out + [T.rand(2, generator=g).tolist(), T.rand(2).tolist()]


def _samplers(T):
    return [list(T.utils.data.RandomSampler(range(10), replacement=True, num_samples=70)),
            list(T.utils.data.RandomSampler(range(10), num_samples=23)),
            list(T.utils.data.SubsetRandomSampler([3, 5, 7, 9, 11])),
            list(T.utils.data.WeightedRandomSampler([0.1, 0.5, 0.2, 0.2], 12)),
            list(T.utils.data.WeightedRandomSampler([0.1, 0.5, 0.2, 0.2], 3, False)),
            T.rand(1).tolist()]


def _splits(T):
    parts = T.utils.data.random_split(range(30), [0.3, 0.3, 0.4])
    parts += T.utils.data.random_split(range(10), [3, 7], generator=T.Generator().manual_seed(42))
    return [list(p) for p in parts] + [T.rand(1).tolist()]


@pytest.mark.parametrize("f", [_loader_order, _loader_generator, _samplers, _splits])
def test_data_utilities_draw_as_torch(f):
    for seed in SEEDS:
        nbgrad.manual_seed(seed)
        torch.manual_seed(seed)
        assert f(nbgrad) == f(torch)


# ---- a seeded training loop: the same losses ---------------------------------------------------
def _train(T, steps=12):
    T.manual_seed(0)
    x = T.randn(160, 16)
    y = T.randint(0, 4, (160,))
    model = T.nn.Sequential(T.nn.Linear(16, 32), T.nn.ReLU(), T.nn.Dropout(0.2),
                            T.nn.Linear(32, 4))
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = T.utils.data.DataLoader(T.utils.data.TensorDataset(x, y), batch_size=32,
                                     shuffle=True)
    losses = []
    while len(losses) < steps:
        for xb, yb in loader:
            loss = T.nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses[:steps]


def test_seeded_training_loop_prints_torchs_losses():
    np.testing.assert_allclose(_train(nbgrad), _train(torch), rtol=1e-5)


def test_distributions_sample_torchs_numbers():
    cases = [lambda T: T.distributions.Normal(T.zeros(3), T.ones(3) * 2).sample((5,)),
             lambda T: T.distributions.Normal(T.zeros(3), T.ones(3) * 2).rsample((50,)),
             lambda T: T.distributions.Uniform(T.zeros(3), T.ones(3) * 2).sample((5,)),
             lambda T: T.distributions.Bernoulli(T.ones(3) * 0.3).sample((5,)),
             lambda T: T.distributions.Categorical(T.tensor([0.1, 0.2, 0.7])).sample((9,))]
    for f in cases:
        same(f, 1)


STRIDED = {
    "uniform_t": lambda T: T.empty(4, 5).t().uniform_(),
    "normal_t": lambda T: T.empty(4, 30).t().normal_(),  # torch's scalar path: not contiguous
    "normal_step": lambda T: T.empty(6, 8)[:, ::2].normal_(),
    "exponential_permuted": lambda T: T.empty(3, 4, 5).permute(2, 0, 1).exponential_(),
    "bernoulli_tensor_t": lambda T: T.empty(4, 5).t().bernoulli_(T.rand(5, 4)),
    "random_sliced": lambda T: T.empty(10, 10)[::3, 1:].random_(0, 9),
}


@pytest.mark.parametrize("name", sorted(STRIDED))
def test_fills_of_strided_tensors_follow_torchs_order(name):
    """torch fills a strided tensor in address order (its TensorIterator), and normal_ takes
    the scalar path there."""
    for seed in SEEDS:
        same(STRIDED[name], seed)


def _train_lstm(T, steps=6):
    T.manual_seed(1)
    emb = T.nn.Embedding(20, 8)
    lstm = T.nn.LSTM(8, 16, num_layers=2, dropout=0.3, batch_first=True)
    head = T.nn.Linear(16, 20)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(head.parameters())
    opt = T.optim.Adam(params, lr=0.01)
    data = T.randint(0, 20, (64, 12))
    loader = T.utils.data.DataLoader(T.utils.data.TensorDataset(data), batch_size=16,
                                     shuffle=True)
    losses = []
    while len(losses) < steps:
        for (xb,) in loader:
            out, _ = lstm(T.nn.functional.dropout(emb(xb[:, :-1]), 0.1))
            loss = T.nn.functional.cross_entropy(head(out).reshape(-1, 20),
                                                 xb[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses[:steps]


def _train_gpt(T, steps=4):
    T.manual_seed(2)
    emb = T.nn.Embedding(30, 16)
    pos = T.nn.Parameter(T.randn(10, 16) * 0.02)
    block = T.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
    head = T.nn.Linear(16, 30)
    params = list(emb.parameters()) + [pos] + list(block.parameters()) + list(head.parameters())
    opt = T.optim.AdamW(params, lr=0.01)
    data = T.randint(0, 30, (32, 11))
    mask = T.nn.Transformer.generate_square_subsequent_mask(10)
    losses = []
    for _ in range(steps):
        xb = data[T.randint(0, 32, (8,))]
        h = block(emb(xb[:, :-1]) + pos, src_mask=mask, is_causal=True)
        loss = T.nn.functional.cross_entropy(head(h).reshape(-1, 30), xb[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("train", [_train_lstm, _train_gpt])
def test_seeded_sequence_models_print_torchs_losses(train):
    """An LSTM with inter-layer dropout and a shuffled loader; a causal transformer block whose
    dropout1 sees attention's transposed (batch_first) output, filled by address as torch."""
    np.testing.assert_allclose(train(nbgrad), train(torch), rtol=1e-5)


def test_dropout_of_a_transposed_view_is_torchs():
    same(lambda T: T.nn.functional.dropout(T.ones(10, 4, 6).transpose(0, 1), 0.3), 0)
