"""Loss arguments as torch 2.13 takes them, torch the oracle: the deprecated ``size_average`` /
``reduce`` (they set the reduction, with torch's warning, by keyword and by position), an unknown
``reduction`` (torch's text, raised when the loss runs, not when a loss module is built),
``weight=`` of mse_loss / l1_loss ("mean" divides by the weights' sum), and
``multilabel_margin_loss`` / ``nn.MultiLabelMarginLoss`` (values, gradients, finite
differences, errors). Also the factories called with no size (torch's TypeError).
"""
import warnings

import numpy as np
import pytest
import torch

import nbgrad


def _run(lib, f):
    """(result as a list, or (exception type, text)), [warning texts]."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            r = f(lib)
            out = np.round(np.asarray(r.detach().numpy(), dtype=float), 10).tolist()
        except Exception as e:  # noqa: BLE001 - compared with torch's
            out = (type(e).__name__, str(e))
    return out, [str(x.message) for x in w]


def _data(lib):
    x = lib.tensor(np.linspace(-1, 1, 12).reshape(3, 4))
    y = lib.tensor(np.linspace(1, -0.5, 12).reshape(3, 4))
    p = lib.tensor(np.linspace(0.1, 0.9, 12).reshape(3, 4))
    c = lib.tensor(np.array([0, 3, 1]))
    s = lib.tensor(np.array([1., -1., 1.]))
    return x, y, p, c, s


LOSSES = {
    "mse_loss": lambda F, x, y, p, c, s: (x, y),
    "l1_loss": lambda F, x, y, p, c, s: (x, y),
    "smooth_l1_loss": lambda F, x, y, p, c, s: (x, y),
    "nll_loss": lambda F, x, y, p, c, s: (x, c),
    "cross_entropy": lambda F, x, y, p, c, s: (x, c),
    "binary_cross_entropy": lambda F, x, y, p, c, s: (p, p.flip(0)),
    "binary_cross_entropy_with_logits": lambda F, x, y, p, c, s: (x, p),
    "kl_div": lambda F, x, y, p, c, s: (x, p),
    "poisson_nll_loss": lambda F, x, y, p, c, s: (x, p),
    "cosine_embedding_loss": lambda F, x, y, p, c, s: (x, y, s),
    "margin_ranking_loss": lambda F, x, y, p, c, s: (x[0], y[0], y[0].sign()),
    "triplet_margin_loss": lambda F, x, y, p, c, s: (x, y, p),
    "hinge_embedding_loss": lambda F, x, y, p, c, s: (x, y.sign()),
    "soft_margin_loss": lambda F, x, y, p, c, s: (x, y.sign()),
    "multilabel_soft_margin_loss": lambda F, x, y, p, c, s: (x, (y > 0).double()),
    "multi_margin_loss": lambda F, x, y, p, c, s: (x, c),
    "multilabel_margin_loss": lambda F, x, y, p, c, s: (x, c.new_tensor([[3, 0, -1, 1]] * 3)),
}
KWARGS = [dict(reduction="foo"), dict(size_average=False), dict(reduce=False),
          dict(size_average=True, reduce=True), dict(size_average=False, reduce=True),
          dict(reduction="elementwise_mean"), dict(reduction="none")]


@pytest.mark.parametrize("kw", KWARGS, ids=str)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_functional_loss_reduction_arguments_as_torch(name, kw):
    def call(lib):
        F = lib.nn.functional
        return getattr(F, name)(*LOSSES[name](F, *_data(lib)), **kw)
    assert _run(nbgrad, call) == _run(torch, call)


@pytest.mark.parametrize("name,pos", [("mse_loss", 2), ("l1_loss", 2), ("smooth_l1_loss", 2),
                                      ("nll_loss", 3), ("cross_entropy", 3)])
def test_legacy_arguments_by_position(name, pos):
    # torch's positional order: size_average then reduce (mse/l1/smooth_l1 after the target)
    def call(lib):
        F = lib.nn.functional
        args = list(LOSSES[name](F, *_data(lib)))
        args += [None] * (pos - len(args)) + [False]
        return getattr(F, name)(*args)
    assert _run(nbgrad, call) == _run(torch, call)
    assert _run(torch, call)[1]  # torch warns: the case is the legacy one


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "foo"])
def test_weighted_mse_and_l1_as_torch(name, reduction):
    rng = np.random.default_rng(3)
    a, b, w = rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), rng.uniform(0.1, 2, (3, 5))
    grads = []
    for lib in (torch, nbgrad):
        x = lib.tensor(a, requires_grad=True)
        try:
            out = getattr(lib.nn.functional, name)(x, lib.tensor(b), reduction=reduction,
                                                   weight=lib.tensor(w))
        except ValueError as e:
            grads.append(str(e))
            continue
        out.sum().backward()
        grads.append((out.detach().numpy(), x.grad.numpy()))
    if isinstance(grads[0], str):
        assert grads[1] == grads[0]
        return
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-12)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-12)


def test_weight_of_another_shape_is_refused_as_torch():
    for lib in (torch, nbgrad):
        with pytest.raises(ValueError, match="Weights and input must have the same size."):
            lib.nn.functional.mse_loss(lib.ones(2, 3), lib.zeros(2, 3), weight=lib.ones(3))


MODULES = {
    "MSELoss": lambda x, y, c: (x, y), "L1Loss": lambda x, y, c: (x, y),
    "KLDivLoss": lambda x, y, c: (x, y.abs()), "CrossEntropyLoss": lambda x, y, c: (x, c),
    "BCEWithLogitsLoss": lambda x, y, c: (x, y.abs()),
    "MultiLabelMarginLoss": lambda x, y, c: (x, c.new_tensor([[3, 0, -1, 1]] * 3)),
}


@pytest.mark.parametrize("kw", [dict(reduction="foo"), dict(reduction="batchmean"),
                                dict(size_average=False), dict(reduce=False)], ids=str)
@pytest.mark.parametrize("name", sorted(MODULES))
def test_loss_modules_check_the_reduction_when_they_run(name, kw):
    def call(lib):
        x, y, _, c, _ = _data(lib)
        m = getattr(lib.nn, name)(**kw)  # built without complaint, as torch's
        return m(*MODULES[name](x, y, c))
    assert _run(nbgrad, call) == _run(torch, call)


def _mlm_case(seed, n, c, ndim):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, c))
    t = np.full((n, c), -1)
    for i in range(n):
        k = rng.integers(0, c + 1)
        t[i, :k] = rng.integers(0, c, k)  # repeats allowed; what follows the first -1 is ignored
        if k < c:
            t[i, k + 1:] = rng.integers(-1, c, c - k - 1)
    if ndim == 1:
        x, t = x[0], t[0]
    return x, t


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("seed,n,c,ndim", [(0, 4, 5, 2), (1, 1, 3, 1), (2, 6, 2, 2), (3, 3, 7, 2)])
def test_multilabel_margin_loss_values_and_grads_as_torch(seed, n, c, ndim, reduction):
    a, t = _mlm_case(seed, n, c, ndim)
    res = []
    for lib in (torch, nbgrad):
        x = lib.tensor(a, requires_grad=True)
        out = lib.nn.MultiLabelMarginLoss(reduction=reduction)(x, lib.tensor(t))
        (out * lib.tensor(np.linspace(1, 2, out.numel()).reshape(tuple(out.shape)))).sum().backward()
        res.append((tuple(out.shape), out.detach().numpy(), x.grad.numpy()))
    assert res[1][0] == res[0][0]
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(res[1][2], res[0][2], rtol=1e-12, atol=1e-15)


def test_multilabel_margin_loss_finite_differences():
    a, t = _mlm_case(5, 3, 6, 2)
    x = nbgrad.tensor(a, requires_grad=True)
    assert nbgrad.autograd.gradcheck(
        lambda x: nbgrad.nn.functional.multilabel_margin_loss(x, nbgrad.tensor(t),
                                                             reduction="none"), (x,))


@pytest.mark.parametrize("case", ["shape", "range", "dtype"])
def test_multilabel_margin_loss_errors_as_torch(case):
    def call(lib):
        x = lib.tensor(np.zeros((3, 4)))
        t = {"shape": lib.tensor(np.array([1, 2, -1])),
             "range": lib.tensor(np.array([[5, 0, -1, 1]] * 3)),
             "dtype": lib.tensor(np.array([[1., 0, -1, 1]] * 3))}[case]
        return lib.nn.functional.multilabel_margin_loss(x, t)
    assert _run(nbgrad, call) == _run(torch, call)


@pytest.mark.parametrize("fn", ["ones", "zeros", "empty", "rand", "randn"])
@pytest.mark.parametrize("how", ["nothing", "a keyword only", "empty tuple", "size=()"])
def test_factories_without_a_size_as_torch(fn, how):
    def call(lib):
        f = getattr(lib, fn)
        t = {"nothing": lambda: f(), "a keyword only": lambda: f(dtype=lib.float64),
             "empty tuple": lambda: f(()), "size=()": lambda: f(size=())}[how]()
        return t.new_zeros(()) if how != "nothing" and how != "a keyword only" else t
    assert _run(nbgrad, call) == _run(torch, call)


@pytest.mark.parametrize("fn", ["new_ones", "new_zeros", "new_empty"])
def test_new_factories_without_a_size_as_torch(fn):
    assert _run(nbgrad, lambda lib: getattr(lib.ones(2), fn)()) == \
        _run(torch, lambda lib: getattr(lib.ones(2), fn)())


def test_torch_version_module_under_the_alias():
    # torch.version: the release nbgrad follows; cuda None without a GPU (a CPU build's value)
    assert nbgrad.version.__version__ == torch.__version__ == torch.version.__version__
    assert nbgrad.version.__version__ >= (2, 1)
    assert nbgrad.version.cuda is None and torch.version.cuda is None
    assert nbgrad.version.hip is None and nbgrad.version.debug is False


@pytest.mark.parametrize("fn", ["zeros_like", "ones_like", "empty_like", "rand_like",
                                "randn_like"])
def test_like_factories_of_a_0d_tensor(fn):
    # a 0-d input has no size to spread: the factory is still called with its (empty) size
    def call(lib):
        return getattr(lib, fn)(lib.tensor(2.0)).new_zeros(())
    assert _run(nbgrad, call) == _run(torch, call)
    assert _run(nbgrad, lambda lib: getattr(lib, fn)(lib.tensor(2.0)))[0] != ()


RESIZE = {
    "expanded": lambda T: T.tensor([1., 2.]).expand(2, 2).resize_(2),
    "expanded_grown": lambda T: T.tensor([1., 2.]).expand(2, 2).resize_(5)[:2],
    "transposed_smaller": lambda T: T.arange(6.).view(2, 3).t().resize_(2, 2),
    "transposed_flat": lambda T: T.arange(6.).view(2, 3).t().resize_(6),
    "transposed_same_shape": lambda T: T.arange(6.).view(2, 3).t().resize_(3, 2),
    "offset": lambda T: T.arange(10.)[2:8].view(2, 3).t().resize_(2, 3),
    "column_slice": lambda T: T.arange(12.).view(3, 4)[:, 1:3].resize_(4),
}


@pytest.mark.parametrize("case", sorted(RESIZE))
def test_resize_of_a_non_contiguous_tensor_as_torch(case):
    # torch: contiguous strides from the same offset over the storage, in memory order
    def geometry(lib):
        t = RESIZE[case](lib)
        return tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.tolist()
    assert geometry(nbgrad) == geometry(torch)


def test_resize_of_a_slice_writes_through_to_its_base_as_torch():
    def run(lib):
        a = lib.arange(12.).view(3, 4)
        b = a[:, 1:3]
        v = b._version
        b.resize_(4)
        b[1] = -1.0
        return a.tolist(), b._version - v
    assert run(nbgrad) == run(torch)


@pytest.mark.parametrize("arg", [3.5, 0.5, True, False, float, int, bool, 3, 0], ids=repr)
def test_to_with_python_numbers_and_types_as_torch(arg):
    # torch: a Python float/bool (value or type) means its dtype; an int, an accelerator index
    def run(lib):
        r = lib.ones(2, 2).to(arg)
        return str(r.dtype).split(".")[-1], str(r.device)
    assert _run_plain(nbgrad, run) == _run_plain(torch, run)


@pytest.mark.parametrize("arg", [float, int, "float", 3, "torch.FloatTensor"], ids=repr)
def test_type_with_python_types_as_torch(arg):
    assert _run_plain(nbgrad, lambda lib: str(lib.ones(2).type(arg).dtype).split(".")[-1]) == \
        _run_plain(torch, lambda lib: str(lib.ones(2).type(arg).dtype).split(".")[-1])


def _run_plain(lib, f):
    try:
        return f(lib)
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return type(e).__name__, str(e)
