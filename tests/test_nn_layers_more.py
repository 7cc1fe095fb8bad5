"""The layers added for issue 10 against torch in float64: functional values and gradients
(tests/test_nn_functional_more.py's runner), then the modules' reprs, parameters, state_dict
keys and values/grads (tests/test_nn_layers.py's runner)."""

import numpy as np
import pytest
import torch

import nbgrad
from test_nn_functional_more import rnd, run
from test_nn_layers import run_both
from test_nn_rows import graph as _graph

FUNCTIONAL = [
    ("conv1d", lambda F, x, w, b: F.conv1d(x, w, b), [rnd(2, 4, 9), rnd(6, 4, 3, seed=1),
                                                      rnd(6, seed=2)], (1, 1, 1)),
    ("conv1d_strided", lambda F, x, w: F.conv1d(x, w, None, 2, 1, 2, 2), [rnd(2, 4, 11),
                                                                       rnd(6, 2, 3, seed=1)],
     (1, 1)),
    ("conv1d_groups_same", lambda F, x, w: F.conv1d(x, w, padding="same", groups=2),
     [rnd(2, 4, 9), rnd(6, 2, 4, seed=1)], (1, 1)),
    ("conv_transpose2d", lambda F, x, w, b: F.conv_transpose2d(x, w, b),
     [rnd(2, 3, 4, 5), rnd(3, 4, 3, 3, seed=1), rnd(4, seed=2)], (1, 1, 1)),
    ("conv_transpose2d_stride", lambda F, x, w: F.conv_transpose2d(x, w, None, 2, 1, 1),
     [rnd(2, 3, 4, 5), rnd(3, 2, 3, 3, seed=1)], (1, 1)),
    ("conv_transpose2d_all", lambda F, x, w, b: F.conv_transpose2d(x, w, b, (2, 3), (2, 0),
                                                                   (1, 0), 2, (2, 1)),
     [rnd(2, 4, 5, 4), rnd(4, 3, 3, 2, seed=1), rnd(6, seed=2)], (1, 1, 1)),
    ("conv_transpose1d", lambda F, x, w: F.conv_transpose1d(x, w, None, 3, 1, 2),
     [rnd(2, 3, 6), rnd(3, 2, 4, seed=1)], (1, 1)),
    ("max_pool1d", lambda F, x: F.max_pool1d(x, 3, 2, 1), [rnd(2, 3, 10)], (1,)),
    ("avg_pool1d", lambda F, x: F.avg_pool1d(x, 4, 2, 2, count_include_pad=False),
     [rnd(2, 3, 10)], (1,)),
    ("avg_pool2d", lambda F, x: F.avg_pool2d(x, 2), [rnd(2, 3, 6, 7)], (1,)),
    ("avg_pool2d_pad_ceil", lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                                      count_include_pad=False),
     [rnd(2, 3, 8, 7)], (1,)),
    ("avg_pool2d_divisor", lambda F, x: F.avg_pool2d(x, (2, 3), (1, 2), divisor_override=4),
     [rnd(3, 6, 7)], (1,)),
    ("adaptive_avg_pool2d", lambda F, x: F.adaptive_avg_pool2d(x, (3, 5)), [rnd(2, 3, 7, 9)],
     (1,)),
    ("adaptive_avg_pool2d_1", lambda F, x: F.adaptive_avg_pool2d(x, 1), [rnd(2, 3, 7, 9)], (1,)),
    ("adaptive_avg_pool2d_none", lambda F, x: F.adaptive_avg_pool2d(x, (None, 4)),
     [rnd(3, 7, 9)], (1,)),
    ("adaptive_avg_pool1d", lambda F, x: F.adaptive_avg_pool1d(x, 4), [rnd(2, 3, 10)], (1,)),
    ("adaptive_max_pool2d", lambda F, x: F.adaptive_max_pool2d(x, (3, 4)), [rnd(2, 3, 7, 9)],
     (1,)),
    ("adaptive_max_pool2d_div", lambda F, x: F.adaptive_max_pool2d(x, 2), [rnd(2, 3, 6, 8)],
     (1,)),
    ("adaptive_max_pool1d", lambda F, x: F.adaptive_max_pool1d(x, 3), [rnd(2, 3, 10)], (1,)),
    ("nearest_size", lambda F, x: F.interpolate(x, size=(5, 7)), [rnd(2, 3, 3, 4)], (1,)),
    ("nearest_scale", lambda F, x: F.interpolate(x, scale_factor=2), [rnd(2, 3, 3, 4)], (1,)),
    ("nearest_down", lambda F, x: F.interpolate(x, scale_factor=0.5), [rnd(2, 3, 7, 6)], (1,)),
    ("nearest_exact", lambda F, x: F.interpolate(x, size=(5, 3), mode="nearest-exact"),
     [rnd(2, 3, 3, 4)], (1,)),
    ("nearest_1d", lambda F, x: F.interpolate(x, size=7), [rnd(2, 3, 4)], (1,)),
    ("bilinear", lambda F, x: F.interpolate(x, size=(5, 7), mode="bilinear"), [rnd(2, 3, 3, 4)],
     (1,)),
    ("bilinear_scale", lambda F, x: F.interpolate(x, scale_factor=1.5, mode="bilinear"),
     [rnd(2, 3, 4, 4)], (1,)),
    ("bilinear_corners", lambda F, x: F.interpolate(x, size=(6, 2), mode="bilinear",
                                                    align_corners=True), [rnd(2, 3, 3, 4)], (1,)),
    ("linear", lambda F, x: F.interpolate(x, scale_factor=2.5, mode="linear"), [rnd(2, 3, 4)],
     (1,)),
    ("pixel_shuffle", lambda F, x: F.pixel_shuffle(x, 2), [rnd(2, 8, 3, 4)], (1,)),
    ("pixel_unshuffle", lambda F, x: F.pixel_unshuffle(x, 2), [rnd(2, 2, 4, 6)], (1,)),
    ("fold", lambda F, x: F.fold(x, (5, 6), (2, 3)), [rnd(2, 12, 16)], (1,)),
    ("fold_all", lambda F, x: F.fold(x, (6, 5), 3, dilation=(1, 2), padding=1, stride=2),
     [rnd(2, 18, 6)], (1,)),
    ("unfold_fold", lambda F, x: F.fold(F.unfold(x, 2, stride=1), (4, 5), 2), [rnd(2, 3, 4, 5)],
     (1,)),
    ("group_norm", lambda F, x, w, b: F.group_norm(x, 2, w, b), [rnd(3, 4, 5, 2) * 2 + 1,
                                                                 rnd(4, seed=1), rnd(4, seed=2)],
     (1, 1, 1)),
    ("instance_norm", lambda F, x: F.instance_norm(x), [rnd(3, 4, 5, 2) * 2 + 1], (1,)),
    ("instance_norm_affine", lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b),
     [rnd(3, 4, 6) * 2 + 1, rnd(4, seed=1), rnd(4, seed=2)], (1, 1, 1)),
    ("bilinear_layer", lambda F, a, b, w, c: F.bilinear(a, b, w, c),
     [rnd(5, 3), rnd(5, 4, seed=1), rnd(2, 3, 4, seed=2), rnd(2, seed=3)], (1, 1, 1, 1)),
    ("pad_reflect", lambda F, x: F.pad(x, (2, 1, 1, 2), mode="reflect"), [rnd(2, 3, 4, 5)], (1,)),
    ("pad_replicate", lambda F, x: F.pad(x, (3, 1, 0, 2), mode="replicate"), [rnd(2, 3, 4, 5)],
     (1,)),
    ("pad_circular", lambda F, x: F.pad(x, (2, 1), mode="circular"), [rnd(2, 3, 5)], (1,)),
    ("embedding_bag_mean", lambda F, i, w: F.embedding_bag(i, w), [np.array([[1, 2, 2], [0, 4, 3]]),
                                                                   rnd(5, 3)], (0, 1)),
    ("embedding_bag_offsets_sum", lambda F, i, w, o: F.embedding_bag(i, w, o, mode="sum"),
     [np.array([1, 2, 4, 4, 3, 0]), rnd(5, 3), np.array([0, 2, 2, 5])], (0, 1)),
    ("embedding_bag_max", lambda F, i, w, o: F.embedding_bag(i, w, o, mode="max"),
     [np.array([1, 2, 4, 4, 3, 0]), rnd(5, 3), np.array([0, 2, 3])], (0, 1)),
    ("embedding_bag_psw", lambda F, i, w, o, p: F.embedding_bag(i, w, o, mode="sum",
                                                                per_sample_weights=p),
     [np.array([1, 2, 4, 4]), rnd(5, 3), np.array([0, 1]), rnd(4, seed=3)], (0, 1, 0, 1)),
    ("embedding_bag_padding", lambda F, i, w: F.embedding_bag(i, w, padding_idx=2),
     [np.array([[1, 2, 2], [2, 4, 3]]), rnd(5, 3)], (0, 1)),
]


@pytest.mark.parametrize("name,fn,inputs,grad", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_layer_like_torch(name, fn, inputs, grad):
    run(fn, inputs, grad=tuple(bool(g) for g in grad))


MODULES = [  # constructor expression, input shape (float input unless given as an array)
    ("Conv1d(4, 6, 3)", (2, 4, 9)),
    ("Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, bias=False)", (2, 4, 11)),
    ("Conv1d(4, 6, 3, padding='same', padding_mode='reflect')", (2, 4, 9)),
    ("Conv1d(4, 6, 3)", (4, 9)),
    ("Conv2d(2, 3, 3, padding=1, padding_mode='replicate')", (2, 2, 5, 4)),
    ("Conv2d(2, 3, 3, padding=2, padding_mode='circular')", (2, 2, 5, 4)),
    ("ConvTranspose2d(3, 4, 3)", (2, 3, 4, 5)),
    ("ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(2, 0), output_padding=(1, 0), "
     "groups=2, dilation=(2, 1))", (2, 4, 5, 4)),
    ("ConvTranspose1d(3, 2, 4, stride=3, padding=1, output_padding=2)", (2, 3, 6)),
    ("MaxPool1d(3, 2, 1)", (2, 3, 10)),
    ("MaxPool1d(3)", (3, 10)),
    ("AvgPool1d(4, 2, 2, count_include_pad=False)", (2, 3, 10)),
    ("AdaptiveAvgPool2d((3, 5))", (2, 3, 7, 9)),
    ("AdaptiveAvgPool2d(1)", (2, 3, 7, 9)),
    ("AdaptiveAvgPool1d(4)", (2, 3, 10)),
    ("AdaptiveMaxPool2d((3, 4))", (2, 3, 7, 9)),
    ("AdaptiveMaxPool1d(3)", (2, 3, 10)),
    ("Upsample(scale_factor=2)", (2, 3, 3, 4)),
    ("Upsample(size=(5, 7), mode='bilinear')", (2, 3, 3, 4)),
    ("Upsample(scale_factor=2, mode='bilinear', align_corners=True)", (2, 3, 3, 4)),
    ("UpsamplingNearest2d(scale_factor=2)", (2, 3, 3, 4)),
    ("UpsamplingBilinear2d(size=(4, 4))", (2, 3, 3, 5)),
    ("PixelShuffle(2)", (2, 8, 3, 4)),
    ("PixelUnshuffle(2)", (2, 2, 4, 6)),
    ("Fold((5, 6), (2, 3))", (2, 12, 16)),
    ("Unfold(2, stride=1)", (2, 3, 4, 5)),
    ("GroupNorm(2, 4)", (3, 4, 5, 2)),
    ("GroupNorm(2, 4, affine=False)", (3, 4, 5)),
    ("InstanceNorm1d(4)", (3, 4, 6)),
    ("InstanceNorm2d(4, affine=True)", (3, 4, 3, 2)),
    ("InstanceNorm2d(4, track_running_stats=True)", (3, 4, 3, 2)),
    ("Dropout1d(0.2)", (3, 4, 6)),
    ("Dropout2d()", (3, 4, 3, 2)),
    ("ZeroPad2d(2)", (2, 3, 4, 5)),
    ("ZeroPad1d((1, 2))", (2, 3, 5)),
    ("ConstantPad1d(2, 3.5)", (2, 3, 5)),
    ("ConstantPad2d((1, 2, 0, 1), 1.0)", (2, 3, 4, 5)),
    ("ReflectionPad1d(2)", (2, 3, 5)),
    ("ReflectionPad2d((1, 1, 2, 0))", (2, 3, 4, 5)),
    ("ReplicationPad1d(3)", (2, 3, 5)),
    ("ReplicationPad2d(1)", (2, 3, 4, 5)),
    ("CircularPad1d(2)", (2, 3, 5)),
    ("EmbeddingBag(5, 3)", np.array([[1, 2, 2], [0, 4, 3]])),
    ("EmbeddingBag(5, 3, mode='max', padding_idx=2)", np.array([[1, 2, 2], [0, 4, 3]])),
    ("EmbeddingBag(5, 3, mode='sum')", np.array([[1, 2, 2], [0, 4, 3]])),
]


@pytest.mark.parametrize("expr,shape", MODULES, ids=[m[0] for m in MODULES])
def test_module_like_torch(expr, shape):
    make = lambda nn: eval("nn." + expr, {"nn": nn})  # noqa: E731
    mt, mn = make(torch.nn), make(nbgrad.nn)
    assert repr(mn) == repr(mt)
    assert list(mn.state_dict()) == list(mt.state_dict())
    assert [tuple(p.shape) for p in mn.parameters()] == [tuple(p.shape) for p in mt.parameters()]
    if isinstance(shape, np.ndarray):
        run_both(make, shape, int_input=True)
    else:
        run_both(make, rnd(*shape) * 2 + 0.5, train="Dropout" not in expr)


def test_instance_norm_running_stats_like_torch():
    th = torch.nn.InstanceNorm1d(4, track_running_stats=True, momentum=0.3).double()
    ng = nbgrad.nn.InstanceNorm1d(4, track_running_stats=True, momentum=0.3).double()
    for step in range(3):
        x = rnd(3, 4, 6, seed=step) * 2 + step
        ng(nbgrad.tensor(x))
        th(torch.from_numpy(x))
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ng, name).numpy(), getattr(th, name).numpy(),
                                   rtol=1e-10)
    ng.eval()
    th.eval()
    x = rnd(3, 4, 6, seed=9)
    np.testing.assert_allclose(ng(nbgrad.tensor(x)).numpy(), th(torch.from_numpy(x)).numpy(),
                               rtol=1e-10)


@pytest.mark.parametrize("make", [lambda nn: nn.Dropout1d(0.5), lambda nn: nn.Dropout2d(0.5)])
def test_channel_dropout_drops_whole_channels(make):
    nbgrad.manual_seed(0)
    m = make(nbgrad.nn)
    x = nbgrad.ones(8, 16, 5, 3) if isinstance(m, nbgrad.nn.Dropout2d) else nbgrad.ones(8, 16, 5)
    y = m(x).numpy().reshape(8, 16, -1)
    per_channel = y.std(-1)
    assert np.all(per_channel == 0) and set(np.unique(y)) == {0.0, 2.0}
    assert 0.3 < (y[..., 0] == 0).mean() < 0.7


def test_bilinear_module_like_torch():
    th = torch.nn.Bilinear(3, 4, 2).double()
    ng = nbgrad.nn.Bilinear(3, 4, 2).double()
    assert repr(ng) == repr(th)
    ng.load_state_dict({k: nbgrad.tensor(v.detach().numpy().copy())
                        for k, v in th.state_dict().items()})
    a, b = rnd(5, 3), rnd(5, 4, seed=1)
    at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    an, bn = nbgrad.tensor(a, requires_grad=True), nbgrad.tensor(b, requires_grad=True)
    th(at, bt).sum().backward()
    ng(an, bn).sum().backward()
    np.testing.assert_allclose(an.grad.numpy(), at.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(ng.weight.grad.numpy(), th.weight.grad.numpy(), rtol=1e-10)


def test_distance_modules_like_torch():
    a, b = rnd(5, 3), rnd(5, 3, seed=1)
    for expr in ("CosineSimilarity()", "CosineSimilarity(dim=0, eps=1e-3)",
                 "PairwiseDistance(p=1.0)", "PairwiseDistance(keepdim=True)"):
        mt, mn = eval("torch.nn." + expr), eval("nbgrad.nn." + expr)
        assert repr(mn) == repr(mt)
        np.testing.assert_allclose(mn(nbgrad.tensor(a), nbgrad.tensor(b)).numpy(),
                                   mt(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-10)


def test_layer_errors_name_the_layer_and_shapes():
    cases = [
        (nbgrad.nn.Conv1d(3, 4, 3), nbgrad.zeros(2, 2, 5),
         r"Conv1d\(3, 4, kernel_size=\(3,\), stride=\(1,\)\): expected input \(N, 3, L\) or "
         r"\(3, L\), got \(2, 2, 5\)"),
        (nbgrad.nn.ConvTranspose2d(3, 4, 3), nbgrad.zeros(2, 5, 5),
         r"ConvTranspose2d.*expected input \(N, 3, H, W\) or \(3, H, W\), got \(2, 5, 5\)"),
        (nbgrad.nn.MaxPool1d(2), nbgrad.zeros(2, 3, 4, 5),
         r"MaxPool1d.*expected input \(N, C, L\) or \(C, L\), got \(2, 3, 4, 5\)"),
        (nbgrad.nn.AdaptiveAvgPool2d(2), nbgrad.zeros(3, 4),
         r"AdaptiveAvgPool2d\(output_size=2\): expected input \(N, C, H, W\) or \(C, H, W\), got"),
        (nbgrad.nn.GroupNorm(2, 4), nbgrad.zeros(2, 3, 5),
         r"GroupNorm\(2, 4.*expected input \(N, 4, \*\), got \(2, 3, 5\)"),
        (nbgrad.nn.InstanceNorm2d(4), nbgrad.zeros(4, 5),
         r"expected 3D or 4D input \(got 2D input\) for InstanceNorm2d"),
        (nbgrad.nn.ReflectionPad2d(2), nbgrad.zeros(5),
         r"ReflectionPad2d: expected 3D or 4D input, got 1D input of shape \(5,\)"),
    ]
    for layer, x, msg in cases:
        with pytest.raises((RuntimeError, ValueError), match=msg):
            layer(x)
    with pytest.raises(ValueError, match=r"num_channels \(4\) must be divisible by num_groups "
                       r"\(3\)"):
        nbgrad.nn.GroupNorm(3, 4)
    with pytest.raises(RuntimeError, match="pixel_shuffle expects its input's 'channel' "
                       "dimension to be divisible by the square of upscale_factor"):
        nbgrad.nn.PixelShuffle(2)(nbgrad.zeros(1, 6, 2, 2))
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding "
                       "input dimension"):
        nbgrad.nn.ReflectionPad1d(3)(nbgrad.zeros(1, 2, 3))


# graphs that differ from torch's, and why (everything else in FUNCTIONAL must match node by node)
GRAPH_DIFFERS = {
    "pad_circular": "torch composes circular padding from slices; nbgrad gathers",
    "embedding_bag_psw": "per_sample_weights that require grad: composed (Mm of Embedding)",
}



def _tensors(lib, inputs, grad):
    grad = tuple(grad) + (0,) * (len(inputs) - len(grad))
    return [lib.tensor(np.array(a).copy(), requires_grad=bool(g))
            if np.asarray(a).dtype.kind == "f" else lib.tensor(np.array(a))
            for a, g in zip(inputs, grad)]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("name,fn,inputs,grad", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_layer_graph_like_torch(name, fn, inputs, grad):
    gt = _graph(fn(torch.nn.functional, *_tensors(torch, inputs, grad)))
    gn = _graph(fn(nbgrad.nn.functional, *_tensors(nbgrad, inputs, grad)))
    if name in GRAPH_DIFFERS:
        assert gn != gt  # the day they match, drop the entry
    else:
        assert gn == gt


LINEAR_ROWS = ["avg_pool2d_pad_ceil", "adaptive_avg_pool2d", "adaptive_max_pool2d", "nearest_scale", "nearest_exact",
               "bilinear", "linear", "pixel_shuffle", "pixel_unshuffle", "fold_all",
               "unfold_fold", "pad_reflect", "pad_replicate", "group_norm",
               "embedding_bag_mean", "embedding_bag_max"]


@pytest.mark.parametrize("name", LINEAR_ROWS)
def test_rows_gradcheck_and_gradgradcheck(name):
    _, fn, inputs, grad = next(c for c in FUNCTIONAL if c[0] == name)
    grad = tuple(grad) + (0,) * (len(inputs) - len(grad))
    ins = _tensors(nbgrad, inputs, grad)
    diff = [t for t, g in zip(ins, grad) if g]

    def f(*xs):
        it = iter(xs)
        return fn(nbgrad.nn.functional, *[next(it) if g else t for t, g in zip(ins, grad)])

    assert nbgrad.autograd.gradcheck(f, tuple(diff))
    assert nbgrad.autograd.gradgradcheck(f, tuple(diff))


def test_constant_pad_like_torch():
    for p in [(1, 2), (2, -1, 0, 3), (-1, -1, 1, 0)]:
        run(lambda F, x: F.pad(x, p, value=1.5), [rnd(2, 3, 4)])
        tn = nbgrad.nn.functional.pad(nbgrad.zeros(2, 3, 4, requires_grad=True), p)
        assert type(tn.grad_fn).__name__ == "ConstantPadNdBackward0"
    x = nbgrad.tensor(rnd(2, 3), requires_grad=True)
    assert nbgrad.autograd.gradgradcheck(lambda t: nbgrad.nn.functional.pad(t, (1, 2), value=3.0)
                                         ** 2, (x,))


# ---- RMSNorm (a small LLM's norm) and the norms' parameter versions --------------------------
@pytest.mark.parametrize("shape, norm, affine, eps", [
    ((2, 5, 6), (6,), True, None), ((3, 2, 3), (2, 3), True, 1e-3), ((4, 6), 6, False, None)])
def test_rms_norm_as_torch(shape, norm, affine, eps):
    x0 = np.random.default_rng(3).standard_normal(shape)
    out = {}
    for T in (torch, nbgrad):
        m = T.nn.RMSNorm(norm, eps=eps, elementwise_affine=affine, dtype=T.float64)
        x = T.tensor(x0, requires_grad=True)
        y = m(x)
        (y * y.detach().exp()).sum().backward()
        out[T] = (repr(m), y.detach().numpy(), x.grad.numpy(), _graph(y),
                  None if m.weight is None else (m.weight.grad.numpy(), m.weight._version),
                  [n for n, _ in m.named_parameters()])
    a, b = out[torch], out[nbgrad]
    assert a[0] == b[0] and a[3] == b[3] and a[5] == b[5]
    np.testing.assert_allclose(b[1], a[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b[2], a[2], rtol=1e-10, atol=1e-12)
    if affine:
        np.testing.assert_allclose(b[4][0], a[4][0], rtol=1e-10)
        assert b[4][1] == a[4][1] == 1


def test_rms_norm_gradcheck_and_error():
    x = nbgrad.randn(3, 4, dtype=nbgrad.float64, requires_grad=True)
    w = nbgrad.randn(4, dtype=nbgrad.float64, requires_grad=True)
    assert nbgrad.autograd.gradcheck(lambda x, w: nbgrad.nn.functional.rms_norm(x, (4,), w), (x, w))
    msgs = []
    for T in (torch, nbgrad):
        with pytest.raises(RuntimeError) as e:
            T.nn.functional.rms_norm(T.ones(2, 3), [4])
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_norm_parameters_filled_in_place_as_torch():
    """torch's norms fill their parameters in reset_parameters: _version 1."""
    for make in (lambda T: T.nn.LayerNorm(4), lambda T: T.nn.GroupNorm(2, 4),
                 lambda T: T.nn.RMSNorm(4)):
        va, vb = ({n: p._version for n, p in make(T).named_parameters()} for T in (torch, nbgrad))
        assert va == vb
