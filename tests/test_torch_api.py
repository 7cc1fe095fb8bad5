"""torch-level API against torch: default device, accelerator, autograd.Variable, finfo/iinfo,
is_tensor / is_floating_point / numel, grad-mode decorators."""
import numpy as np
import pytest

import nbgrad

# Without cupy nbgrad is PyTorch built without CUDA (AssertionError "Torch not compiled with CUDA
# enabled"); with cupy but no device, PyTorch built with CUDA on a machine without a GPU.
nbgrad.cuda.is_available()
NO_CUDA = AssertionError if "cupy" in (nbgrad.backend._cupy_error or "") and \
    (nbgrad.backend._cupy_error or "").startswith("ModuleNotFoundError") else RuntimeError

torch = pytest.importorskip("torch")

FLOATS = ["float16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("name", FLOATS + [None])
def test_finfo_as_torch(name):
    n = nbgrad.finfo(getattr(nbgrad, name)) if name else nbgrad.finfo()
    t = torch.finfo(getattr(torch, name)) if name else torch.finfo()
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(n, field) == getattr(t, field), field
        assert type(getattr(n, field)) is type(getattr(t, field)), field
    assert repr(n) == repr(t)


@pytest.mark.parametrize("name", INTS)
def test_iinfo_as_torch(name):
    n, t = nbgrad.iinfo(getattr(nbgrad, name)), torch.iinfo(getattr(torch, name))
    assert (n.bits, n.min, n.max, n.dtype) == (t.bits, t.min, t.max, t.dtype)
    assert repr(n) == repr(t)


def test_finfo_follows_the_default_dtype():
    nbgrad.set_default_dtype(nbgrad.float64)
    try:
        assert nbgrad.finfo().dtype == "float64"
    finally:
        nbgrad.set_default_dtype(nbgrad.float32)


@pytest.mark.parametrize("make", [
    lambda T: T.finfo(T.int64), lambda T: T.finfo(T.bool), lambda T: T.iinfo(T.float32),
    lambda T: T.iinfo(T.bool), lambda T: T.is_floating_point(3), lambda T: T.numel([1, 2]),
])
def test_type_errors_as_torch(make):
    with pytest.raises(TypeError) as n:
        make(nbgrad)
    with pytest.raises(TypeError) as t:
        make(torch)
    assert str(n.value) == str(t.value).replace("torch.", "nbgrad.")


def test_is_tensor_is_floating_point_numel():
    for T in (nbgrad, torch):
        assert T.is_tensor(T.ones(2)) and T.is_tensor(T.nn.Parameter(T.ones(1)))
        assert not T.is_tensor([1.0]) and not T.is_tensor(1.0)
        assert T.is_floating_point(T.ones(1, dtype=T.float16))
        assert not T.is_floating_point(T.ones(1, dtype=T.int64))
        assert T.numel(T.ones(2, 3)) == 6 and T.numel(T.tensor(1.0)) == 1


def test_variable_returns_a_detached_leaf_sharing_storage():
    def run(T):
        from_t = T.ones(2, requires_grad=True) * 3
        v = T.autograd.Variable(from_t, requires_grad=True)
        w = T.autograd.Variable(from_t)
        return (type(v) is T.Tensor, v is from_t, v.requires_grad, v.is_leaf,
                v.data_ptr() == from_t.data_ptr(), w.requires_grad, w.grad_fn,
                isinstance(from_t, T.autograd.Variable), isinstance(3, T.autograd.Variable))
    assert run(nbgrad) == run(torch)
    v = nbgrad.autograd.Variable(nbgrad.ones(2), requires_grad=True)
    (v * v).sum().backward()
    assert v.grad.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="floating point"):
        nbgrad.autograd.Variable(nbgrad.ones(2, dtype=nbgrad.int64), requires_grad=True)


def test_default_device():
    assert nbgrad.get_default_device() == nbgrad.device("cpu")
    assert repr(nbgrad.get_default_device()) == repr(torch.get_default_device())
    nbgrad.set_default_device("cpu")
    nbgrad.set_default_device(None)
    assert nbgrad.get_default_device().type == "cpu"
    with nbgrad.device("cpu") as d:
        assert d.type == "cpu" and nbgrad.zeros(1).device.type == "cpu"
    if nbgrad.cuda.is_available():
        return
    nbgrad.set_default_device("cuda")
    try:
        assert repr(nbgrad.get_default_device()) == "device(type='cuda', index=0)"
        with pytest.raises(NO_CUDA, match="CUDA is not available"):
            nbgrad.zeros(2)
        assert nbgrad.from_numpy(np.ones(1)).device.type == "cpu"  # shares memory: stays
    finally:
        nbgrad.set_default_device(None)
    with pytest.raises(NO_CUDA, match="CUDA is not available"):
        with nbgrad.device("cuda"):
            nbgrad.rand(2)
    assert nbgrad.get_default_device().type == "cpu"  # restored by the with block


@pytest.mark.skipif(not nbgrad.cuda.is_available(), reason="needs a CUDA GPU (cupy)")
def test_default_device_cuda_places_new_tensors():
    nbgrad.set_default_device("cuda")
    try:
        for t in (nbgrad.zeros(2), nbgrad.tensor([1.0]), nbgrad.rand(3), nbgrad.arange(3),
                  nbgrad.randint(5, (2,)), nbgrad.normal(0.0, 1.0, (2,))):
            assert t.device.type == "cuda"
        assert "device=" not in repr(nbgrad.zeros(2))
        assert "device='cpu'" in repr(nbgrad.zeros(2, device="cpu"))
    finally:
        nbgrad.set_default_device(None)
    with nbgrad.device("cuda"):
        assert nbgrad.ones(1).device.type == "cuda"
    assert nbgrad.ones(1).device.type == "cpu"


def test_accelerator():
    acc = nbgrad.accelerator
    if nbgrad.cuda.is_available():
        assert acc.is_available() and acc.current_accelerator().type == "cuda"
        assert acc.device_count() >= 1 and acc.current_device_index() == 0
        acc.synchronize()
        return
    assert acc.is_available() is torch.accelerator.is_available() is False
    assert acc.current_accelerator() is None and acc.device_count() == 0
    for name in ("current_device_index", "synchronize"):
        with pytest.raises(RuntimeError) as n:
            getattr(acc, name)()
        with pytest.raises(RuntimeError) as t:
            getattr(torch.accelerator, name)()
        assert str(n.value) == str(t.value)


DECORATED = {
    "no_grad()": lambda T: T.no_grad(),
    "no_grad": lambda T: T.no_grad,
    "enable_grad()": lambda T: T.enable_grad(),
    "enable_grad": lambda T: T.enable_grad,
    "inference_mode()": lambda T: T.inference_mode(),
    "inference_mode": lambda T: T.inference_mode,
    "inference_mode(False)": lambda T: T.inference_mode(False),
    "set_grad_enabled(False)": lambda T: T.set_grad_enabled(False),
}


@pytest.mark.parametrize("name", sorted(DECORATED))
def test_grad_modes_as_decorators(name):
    def run(T):
        deco = DECORATED[name](T)
        x = T.ones(2, requires_grad=True)

        @deco
        def f(a):
            """doc"""
            return (a * 2).requires_grad

        @DECORATED[name](T)
        def gen(a):
            yield (a * 2).requires_grad
            yield T.is_grad_enabled()

        with T.no_grad():
            inside_no_grad = f(x)
        it = gen(x)
        first = next(it)
        between = T.is_grad_enabled()
        second = next(it)
        return f(x), inside_no_grad, f.__name__, f.__doc__, first, between, second, \
            T.is_grad_enabled()
    assert run(nbgrad) == run(torch)


def test_backends_switches_as_torch_without_cuda():
    for attr in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(nbgrad.backends.cudnn, attr) == getattr(torch.backends.cudnn, attr), attr
    assert nbgrad.backends.cudnn.is_available() is False
    assert nbgrad.backends.cudnn.version() is None
    assert nbgrad.backends.mps.is_available() is torch.backends.mps.is_available() is False
    assert nbgrad.backends.mps.is_built() is False


def test_seed_everything_function_runs_under_the_alias():
    from nbgrad import as_torch
    as_torch.enable()
    try:
        import torch as t

        def seed_everything(seed):  # as found in many training scripts
            t.manual_seed(seed)
            t.cuda.manual_seed_all(seed)
            t.backends.cudnn.deterministic = True
            t.backends.cudnn.benchmark = False
            return "mps" if t.backends.mps.is_available() else "cpu"

        assert seed_everything(0) == "cpu"
        assert nbgrad.backends.cudnn.deterministic is True
    finally:
        nbgrad.backends.cudnn.deterministic = False
        as_torch.disable()


# -- the legacy tensor types (torch.LongTensor(...) in old tutorials) ---------------------------

LEGACY = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
          "CharTensor", "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_tensor_types_construct_and_check_like_torch(name):
    import torch
    import nbgrad
    T, N = getattr(torch, name), getattr(nbgrad, name)
    data = [[1, 0], [3, 4]] if name != "BoolTensor" else [[True, False], [False, True]]
    t, n = T(data), N(data)
    assert str(n.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    assert n.tolist() == t.tolist()
    assert tuple(N(2, 3).shape) == tuple(T(2, 3).shape)
    assert tuple(N().shape) == tuple(T().shape)
    for maker in ("zeros", "ones"):
        for dt in ("float32", "float64", "int64", "bool"):
            assert isinstance(getattr(nbgrad, maker)(2, dtype=getattr(nbgrad, dt)), N) == \
                isinstance(getattr(torch, maker)(2, dtype=getattr(torch, dt)), T)


def test_legacy_long_tensor_truncates_floats_like_torch():
    import torch
    import nbgrad
    data = [1.5, 2.7, -1.5]
    assert nbgrad.LongTensor(data).tolist() == torch.LongTensor(data).tolist()


def _outcome(T, expr):
    try:
        r = eval(expr, {"T": T, "np": np, "nan": float("nan")})
    except Exception as e:  # noqa: BLE001 - the exception is the result
        return type(e).__name__, str(e).split("\n")[0]
    rs = r if isinstance(r, tuple) else (r,)
    return [(str(x.dtype).split(".")[-1], np.asarray(x.tolist()).tolist()) for x in rs]


@pytest.mark.parametrize("expr", [
    "T.tensor([1., nan, 2., nan, 1.]).unique()",
    "T.tensor([1., nan, 2., nan, 1.]).unique(return_inverse=True, return_counts=True)",
    "T.unique(T.tensor([nan, 1., nan]), return_inverse=True)",
    "T.arange(0, 10, -1)", "T.arange(10, 0)", "T.arange(0., 1., -0.5)", "T.arange(0, 0, -1)",
    "T.arange(3, 0, -1)", "T.arange(0, 1, 0)",
    "T.zeros(2, dtype='float32')", "T.ones(2, dtype=np.float32)", "T.full((2,), 1., dtype='int64')",
    "T.tensor([1], dtype='float32')", "T.eye(2, dtype='float32')", "T.arange(3, dtype='int64')",
    "T.linspace(0, 1, 3, dtype=np.float64)",
    "T.zeros(2, dtype=float)", "T.tensor([1], dtype=float)", "T.arange(3, dtype=float)",
    "T.zeros(2, dtype=int)", "T.ones(2, dtype=bool)",
])
def test_small_disagreements_as_torch(expr):
    assert repr(_outcome(nbgrad, expr)) == repr(_outcome(torch, expr))


@pytest.mark.parametrize("value", ["np.ones((1, 2), np.float32)", "[[1.0, 2.0]]"])
def test_load_state_dict_takes_tensors_only_as_torch(value):
    def run(T):
        m = T.nn.Linear(2, 1)
        try:
            m.load_state_dict({"weight": eval(value), "bias": T.zeros(1)})
        except RuntimeError as e:
            return str(e)
    assert run(nbgrad) == run(torch) is not None


@pytest.mark.parametrize("seed", range(6))
def test_topk_and_kthvalue_choose_among_ties_as_torch(seed):
    """Which of equal elements topk and kthvalue report is torch's CPU algorithms' choice
    (quickselect; libstdc++'s partial_sort, nth_element and sort): rows full of ties, NaNs,
    -0.0 and 0.0, along each dim, both branches of topk (k * 64 <= n and not)."""
    rng = np.random.default_rng(seed)
    for shape in ((7,), (3, 40), (2, 130, 2), (5, 1), (300,)):
        a = rng.integers(-2, 3, shape).astype(np.float64)
        a[a == 2] = np.nan if seed % 2 else 2.0
        a[a == 1] = -0.0 if seed % 3 == 0 else 1.0
        a[a == -1] = 0.0 if seed % 3 == 0 else -1.0
        for dim in range(a.ndim):
            n = shape[dim]
            for k in sorted({min(2, n), 1, n // 2 + 1, n}):
                for largest in (True, False):
                    got = nbgrad.tensor(a).topk(k, dim, largest)
                    want = torch.tensor(a).topk(k, dim, largest)
                    assert got.indices.tolist() == want.indices.tolist(), (shape, dim, k, largest)
                    assert np.array_equal(np.signbit(got.values.numpy()),
                                          np.signbit(want.values.numpy()))
                got = nbgrad.tensor(a).kthvalue(k, dim)
                want = torch.tensor(a).kthvalue(k, dim)
                assert got.indices.tolist() == want.indices.tolist(), (shape, dim, k)
