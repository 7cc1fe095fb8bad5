"""Every nn layer and loss against PyTorch in float64: forward values, input grads, parameter grads.

Each case builds the same layer in both libraries from one constructor expression (``make(nn)``),
copies torch's parameters into nbgrad's through ``load_state_dict``, runs the same input, and
back-propagates the same random upstream gradient.
"""


import numpy as np
import pytest
import torch

import nbgrad

RTOL, ATOL = 1e-9, 1e-11


def to_ng(a, requires_grad=False, dtype=None):
    arr = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    t = nbgrad.tensor(arr.copy())
    if dtype is not None:
        t = t.to(dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def npy(t):
    return np.asarray(t.detach().numpy())


def copy_params(ng_mod, th_mod):
    sd = {k: to_ng(v) for k, v in th_mod.state_dict().items()}
    result = ng_mod.load_state_dict(sd)
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []


def close(a, b, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(npy(a), b.detach().numpy(), rtol=rtol, atol=atol)


def run_both(make, x_np, train=True, int_input=False, seed=0):
    """Build, copy params, forward, backward with the same upstream grad; compare everything."""
    th = make(torch.nn).double()
    ng = make(nbgrad.nn).double()
    copy_params(ng, th)
    th.train(train)
    ng.train(train)
    if int_input:
        xt = torch.from_numpy(x_np)
        xn = to_ng(x_np)
    else:
        xt = torch.from_numpy(x_np.copy()).requires_grad_(True)
        xn = to_ng(x_np, requires_grad=True)
    yt = th(xt)
    yn = ng(xn)
    assert tuple(yn.shape) == tuple(yt.shape)
    close(yn, yt)
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape))
    (yt * torch.from_numpy(g)).sum().backward()
    (yn * to_ng(g)).sum().backward()
    if not int_input:
        close(xn.grad, xt.grad)
    tp = dict(th.named_parameters())
    npn = dict(ng.named_parameters())
    assert list(tp) == list(npn)
    for name, p in tp.items():
        if p.grad is None:
            assert npn[name].grad is None
        else:
            close(npn[name].grad, p.grad)
    for (name, b_t), (name_n, b_n) in zip(th.named_buffers(), ng.named_buffers()):
        assert name == name_n
        close(b_n, b_t)
    return th, ng


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


LAYER_CASES = [
    ("linear", lambda nn: nn.Linear(5, 3), (4, 5)),
    ("linear_nobias", lambda nn: nn.Linear(5, 3, bias=False), (4, 5)),
    ("linear_3d", lambda nn: nn.Linear(5, 3), (2, 4, 5)),
    ("linear_1d", lambda nn: nn.Linear(5, 3), (5,)),
    ("conv", lambda nn: nn.Conv2d(3, 4, 3), (2, 3, 7, 6)),
    ("conv_stride_pad", lambda nn: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 7, 8)),
    ("conv_rect", lambda nn: nn.Conv2d(2, 3, (2, 3), stride=(1, 2), padding=(1, 0)), (2, 2, 5, 7)),
    ("conv_dilation", lambda nn: nn.Conv2d(2, 3, 3, dilation=2, padding=2, bias=False),
     (1, 2, 7, 7)),
    ("conv_groups", lambda nn: nn.Conv2d(4, 6, 3, groups=2, padding=1), (2, 4, 5, 5)),
    ("conv_same", lambda nn: nn.Conv2d(2, 3, 4, padding="same"), (2, 2, 6, 6)),
    ("conv_unbatched", lambda nn: nn.Conv2d(2, 3, 3), (2, 5, 5)),
    ("conv_1x1", lambda nn: nn.Conv2d(3, 5, 1), (2, 3, 4, 4)),
    ("maxpool", lambda nn: nn.MaxPool2d(2), (2, 3, 6, 6)),
    ("maxpool_odd", lambda nn: nn.MaxPool2d(2), (2, 3, 7, 5)),
    ("maxpool_overlap", lambda nn: nn.MaxPool2d(3, stride=2, padding=1), (2, 2, 7, 7)),
    ("maxpool_ceil", lambda nn: nn.MaxPool2d(3, stride=2, ceil_mode=True), (1, 2, 8, 8)),
    ("maxpool_dilation", lambda nn: nn.MaxPool2d(2, stride=1, dilation=2), (1, 2, 6, 6)),
    ("avgpool", lambda nn: nn.AvgPool2d(2), (2, 3, 6, 6)),
    ("avgpool_pad", lambda nn: nn.AvgPool2d(3, stride=2, padding=1), (2, 2, 7, 7)),
    ("avgpool_nopadcount", lambda nn: nn.AvgPool2d(3, stride=2, padding=1,
                                                   count_include_pad=False), (2, 2, 7, 7)),
    ("avgpool_ceil", lambda nn: nn.AvgPool2d(3, stride=2, ceil_mode=True), (1, 2, 8, 8)),
    ("flatten", lambda nn: nn.Flatten(), (2, 3, 4)),
    ("flatten_dims", lambda nn: nn.Flatten(0, 1), (2, 3, 4)),
    ("relu", lambda nn: nn.ReLU(), (3, 7)),
    ("leaky_relu", lambda nn: nn.LeakyReLU(0.2), (3, 7)),
    ("gelu", lambda nn: nn.GELU(), (3, 7)),
    ("gelu_tanh", lambda nn: nn.GELU(approximate="tanh"), (3, 7)),
    ("tanh", lambda nn: nn.Tanh(), (3, 7)),
    ("sigmoid", lambda nn: nn.Sigmoid(), (3, 7)),
    ("softmax", lambda nn: nn.Softmax(dim=1), (3, 7)),
    ("softmax_0", lambda nn: nn.Softmax(dim=0), (3, 7)),
    ("log_softmax", lambda nn: nn.LogSoftmax(dim=-1), (3, 7)),
    ("dropout_eval", lambda nn: nn.Dropout(0.3), (3, 7)),
    ("layernorm", lambda nn: nn.LayerNorm(7), (3, 7)),
    ("layernorm_2d", lambda nn: nn.LayerNorm((4, 5)), (2, 3, 4, 5)),
    ("layernorm_noaffine", lambda nn: nn.LayerNorm(7, elementwise_affine=False), (3, 7)),
    ("batchnorm1d", lambda nn: nn.BatchNorm1d(5), (6, 5)),
    ("batchnorm1d_3d", lambda nn: nn.BatchNorm1d(3), (4, 3, 5)),
    ("batchnorm1d_noaffine", lambda nn: nn.BatchNorm1d(5, affine=False, momentum=0.3), (6, 5)),
    ("batchnorm2d", lambda nn: nn.BatchNorm2d(3), (4, 3, 5, 5)),
    ("batchnorm2d_nostats", lambda nn: nn.BatchNorm2d(3, track_running_stats=False),
     (4, 3, 5, 5)),
    ("conv3d", lambda nn: nn.Conv3d(2, 4, 3, padding=1), (2, 2, 4, 5, 4)),
    ("conv3d_stride_groups", lambda nn: nn.Conv3d(4, 6, (2, 3, 2), stride=(2, 1, 1), groups=2,
                                                  bias=False), (1, 4, 5, 4, 4)),
    ("conv3d_reflect_unbatched", lambda nn: nn.Conv3d(2, 3, 3, padding=1,
                                                      padding_mode="reflect"), (2, 4, 4, 4)),
    ("maxpool3d", lambda nn: nn.MaxPool3d(2), (2, 3, 4, 6, 4)),
    ("maxpool3d_overlap_ceil", lambda nn: nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True),
     (1, 2, 5, 6, 7)),
    ("avgpool3d", lambda nn: nn.AvgPool3d(2), (2, 3, 4, 6, 4)),
    ("avgpool3d_pad", lambda nn: nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False),
     (1, 2, 5, 6, 7)),
    ("adaptive_avgpool3d", lambda nn: nn.AdaptiveAvgPool3d((2, 3, 1)), (2, 3, 5, 6, 4)),
    ("adaptive_avgpool3d_global", lambda nn: nn.AdaptiveAvgPool3d(1), (2, 3, 5, 6, 4)),
    ("batchnorm3d", lambda nn: nn.BatchNorm3d(3), (4, 3, 3, 4, 2)),
    ("sequential_cnn3d", lambda nn: nn.Sequential(
        nn.Conv3d(1, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(), nn.MaxPool3d(2),
        nn.Conv3d(4, 2, 1), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(2, 3)),
     (2, 1, 4, 4, 4)),
    ("sequential_mlp", lambda nn: nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4)),
     (5, 6)),
    ("sequential_cnn", lambda nn: nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
        nn.Linear(24, 10)), (3, 1, 8, 8)),
]


@pytest.mark.parametrize("name,make,shape", LAYER_CASES, ids=[c[0] for c in LAYER_CASES])
def test_layer_matches_torch(name, make, shape):
    x = rnd(*shape)
    if name.startswith("layernorm") or name.startswith("batchnorm"):
        x = x * 3 + 1
    run_both(make, x, train=name != "dropout_eval")


def test_relu_family_kink_and_ties():
    # zeros (ReLU's kink) and ties inside pooling windows must route gradients as torch does
    x = np.zeros((2, 2, 4, 4))
    x[0, 0, 0, 0] = 1.0
    x[1, 1, 2:, 2:] = 2.0
    run_both(lambda nn: nn.Sequential(nn.ReLU(), nn.MaxPool2d(2)), x)
    run_both(lambda nn: nn.MaxPool2d(2), x)
    run_both(lambda nn: nn.LeakyReLU(), np.array([[-1.0, 0.0, 2.0]]))


@pytest.mark.parametrize("training", [True, False])
def test_batchnorm_running_stats_over_steps(training):
    th = torch.nn.BatchNorm2d(3, momentum=0.2).double()
    ng = nbgrad.nn.BatchNorm2d(3, momentum=0.2).double()
    for step in range(3):
        x = rnd(4, 3, 2, 2, seed=step) * 2 + step
        th.train(training)
        ng.train(training)
        close(ng(to_ng(x)), th(torch.from_numpy(x)))
    close(ng.running_mean, th.running_mean)
    close(ng.running_var, th.running_var)
    assert int(ng.num_batches_tracked.item()) == int(th.num_batches_tracked.item())


def test_batchnorm_cumulative_momentum_none():
    th = torch.nn.BatchNorm1d(4, momentum=None).double()
    ng = nbgrad.nn.BatchNorm1d(4, momentum=None).double()
    for step in range(4):
        x = rnd(5, 4, seed=step) + step
        close(ng(to_ng(x)), th(torch.from_numpy(x)))
    close(ng.running_mean, th.running_mean)
    close(ng.running_var, th.running_var)


def test_embedding_values_and_grads():
    idx = np.array([[1, 3, 3], [0, 9, 1]])
    th, ng = run_both(lambda nn: nn.Embedding(10, 4), idx, int_input=True)
    # repeated indices accumulate
    assert np.abs(npy(ng.weight.grad)[3]).sum() > 0


def test_embedding_padding_idx_gets_no_grad():
    idx = np.array([[0, 2, 0], [1, 0, 2]])
    th, ng = run_both(lambda nn: nn.Embedding(5, 3, padding_idx=0), idx, int_input=True)
    assert np.all(npy(ng.weight.grad)[0] == 0)


def test_embedding_default_init_zeroes_padding_row():
    nbgrad.manual_seed(0)
    emb = nbgrad.nn.Embedding(1000, 16, padding_idx=3)
    w = npy(emb.weight)
    assert np.all(w[3] == 0)
    assert abs(w.std() - 1.0) < 0.03 and abs(w.mean()) < 0.03


# ----------------------------------------------------------------------------- functional
def test_functional_matches_torch():
    F, TF = nbgrad.nn.functional, torch.nn.functional
    x = rnd(2, 3, 6, 6)
    w = rnd(4, 3, 3, 3, seed=1)
    b = rnd(4, seed=2)
    xt, wt, bt = (torch.from_numpy(a).requires_grad_(True) for a in (x, w, b))
    xn, wn, bn = (to_ng(a, requires_grad=True) for a in (x, w, b))
    outs = [
        (F.conv2d(xn, wn, bn, stride=2, padding=1), TF.conv2d(xt, wt, bt, stride=2, padding=1)),
        (F.unfold(xn, 3, padding=1), TF.unfold(xt, 3, padding=1)),
        (F.pad(xn, (1, 2, 0, 3), value=0.5), TF.pad(xt, (1, 2, 0, 3), value=0.5)),
        (F.max_pool2d(xn, 3, 1, 1), TF.max_pool2d(xt, 3, 1, 1)),
        (F.linear(xn.flatten(1)[:, :5], wn.flatten(1)[:, :5], bn),
         TF.linear(xt.flatten(1)[:, :5], wt.flatten(1)[:, :5], bt)),
        (F.gelu(xn), TF.gelu(xt)),
        (F.softmax(xn, dim=1), TF.softmax(xt, dim=1)),
        (F.log_softmax(xn, dim=-1), TF.log_softmax(xt, dim=-1)),
        (F.layer_norm(xn, (6,), bn[:1].expand(6), None), TF.layer_norm(xt, (6,),
                                                                       bt[:1].expand(6), None)),
        (F.batch_norm(xn, None, None, bn[:3], None, True),
         TF.batch_norm(xt, None, None, bt[:3], None, True)),
        (F.leaky_relu(xn, 0.1), TF.leaky_relu(xt, 0.1)),
    ]
    for k, (o_n, o_t) in enumerate(outs):
        close(o_n, o_t)
        g = rnd(*tuple(o_t.shape), seed=10 + k)
        (o_t * torch.from_numpy(g)).sum().backward()
        (o_n * to_ng(g)).sum().backward()
    for a_n, a_t in ((xn, xt), (wn, wt), (bn, bt)):
        close(a_n.grad, a_t.grad)


def test_max_pool_return_indices():
    x = rnd(2, 3, 7, 7)
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)):
        o_n, i_n = nbgrad.nn.functional.max_pool2d(to_ng(x), return_indices=True, **kw)
        o_t, i_t = torch.nn.functional.max_pool2d(torch.from_numpy(x), return_indices=True, **kw)
        close(o_n, o_t)
        assert np.array_equal(npy(i_n), i_t.numpy())


def test_conv2d_and_max_pool2d_are_one_definition_for_torch_and_functional():
    """torch.conv2d is torch.nn.functional.conv2d (as in PyTorch), and torch.max_pool2d takes
    F.max_pool2d's arguments: unbatched input, padding strings, PyTorch's checks and texts."""
    F = nbgrad.nn.functional
    assert F.conv2d is nbgrad.conv2d and F.max_pool2d is nbgrad.max_pool2d
    x, w = rnd(3, 5, 5), rnd(4, 3, 2, 2, seed=1)
    for kw in (dict(), dict(padding="same"), dict(padding="valid"), dict(padding="same",
                                                                         dilation=2)):
        close(nbgrad.conv2d(to_ng(x), to_ng(w), **kw),
              torch.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw))
    close(nbgrad.max_pool2d(to_ng(x), 2), torch.max_pool2d(torch.from_numpy(x), 2))
    cases = [  # (call, args): the same RuntimeError text as torch's
        ("conv2d", (rnd(1, 3, 2, 2), rnd(4, 3, 3, 3))),  # kernel larger than the input
        ("conv2d", (rnd(1, 2, 5, 5), rnd(4, 3, 3, 3))),  # channels
        ("max_pool2d", (rnd(1, 2, 5, 5), 3, 1, 2)),  # padding more than half the kernel
        ("max_pool2d", (rnd(1, 2, 2, 2), 3)),  # output too small
    ]
    for name, args in cases:
        with pytest.raises(RuntimeError) as et:
            getattr(torch, name)(*(torch.from_numpy(a) if isinstance(a, np.ndarray) else a
                                   for a in args))
        for fn in (getattr(nbgrad, name), getattr(F, name)):
            with pytest.raises(RuntimeError) as en:
                fn(*(to_ng(a) if isinstance(a, np.ndarray) else a for a in args))
            assert str(en.value) == str(et.value).split("\n")[0]


def test_one_hot():
    t = np.array([0, 3, 1])
    assert np.array_equal(npy(nbgrad.nn.functional.one_hot(to_ng(t), 5)),
                          torch.nn.functional.one_hot(torch.from_numpy(t), 5).numpy())


def test_dropout_statistics_scaling_and_grad():
    nbgrad.manual_seed(0)
    p = 0.3
    drop = nbgrad.nn.Dropout(p)
    x = to_ng(np.ones((200, 100)), requires_grad=True)
    y = drop(x)
    yv = npy(y)
    kept = yv != 0
    assert abs(kept.mean() - (1 - p)) < 0.01
    np.testing.assert_allclose(yv[kept], 1 / (1 - p))
    y.sum().backward()
    np.testing.assert_allclose(npy(x.grad), yv)  # grad = mask / (1 - p)
    drop.eval()
    assert drop(x) is x or np.array_equal(npy(drop(x)), npy(x))
    assert np.all(npy(nbgrad.nn.functional.dropout(x, 1.0)) == 0)
    with pytest.raises(ValueError, match="dropout probability"):
        nbgrad.nn.Dropout(1.5)


# ----------------------------------------------------------------------------- losses
def loss_both(make, x, t, target_float=False):
    lt = make(torch.nn)
    ln = make(nbgrad.nn)
    for mod in (lt, ln):
        mod.double() if hasattr(mod, "double") else None
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    xn = to_ng(x, requires_grad=True)
    tt = torch.from_numpy(t.copy())
    tn = to_ng(t)
    if target_float:
        tt.requires_grad_(True)
        tn.requires_grad_(True)
    out_t = lt(xt, tt)
    out_n = ln(xn, tn)
    close(out_n, out_t)
    g = rnd(*tuple(out_t.shape), seed=3)
    (out_t * torch.from_numpy(g)).sum().backward()
    (out_n * to_ng(g)).sum().backward()
    close(xn.grad, xt.grad)
    if target_float:
        close(tn.grad, tt.grad)


W5 = np.array([0.5, 1.0, 2.0, 0.1, 1.5])
LOSS_CASES = []
for red in ("mean", "sum", "none"):
    LOSS_CASES += [
        (f"mse_{red}", lambda nn, r=red: nn.MSELoss(reduction=r), "float"),
        (f"l1_{red}", lambda nn, r=red: nn.L1Loss(reduction=r), "float"),
        (f"ce_{red}", lambda nn, r=red: nn.CrossEntropyLoss(reduction=r), "class"),
        (f"ce_weight_{red}", lambda nn, r=red: nn.CrossEntropyLoss(
            weight=(torch.from_numpy(W5) if nn is torch.nn else to_ng(W5)), reduction=r),
         "class"),
        (f"ce_ignore_{red}", lambda nn, r=red: nn.CrossEntropyLoss(ignore_index=2, reduction=r),
         "class"),
        (f"ce_smooth_{red}", lambda nn, r=red: nn.CrossEntropyLoss(label_smoothing=0.2,
                                                                   reduction=r), "class"),
        (f"ce_smooth_weight_ignore_{red}", lambda nn, r=red: nn.CrossEntropyLoss(
            weight=(torch.from_numpy(W5) if nn is torch.nn else to_ng(W5)), ignore_index=1,
            label_smoothing=0.15, reduction=r), "class"),
        (f"ce_probs_{red}", lambda nn, r=red: nn.CrossEntropyLoss(reduction=r), "probs"),
        (f"ce_probs_smooth_{red}", lambda nn, r=red: nn.CrossEntropyLoss(
            label_smoothing=0.1, reduction=r), "probs"),
        (f"nll_{red}", lambda nn, r=red: nn.NLLLoss(reduction=r), "logp"),
        (f"nll_weight_ignore_{red}", lambda nn, r=red: nn.NLLLoss(
            weight=(torch.from_numpy(W5) if nn is torch.nn else to_ng(W5)), ignore_index=0,
            reduction=r), "logp"),
        (f"bce_{red}", lambda nn, r=red: nn.BCELoss(reduction=r), "prob"),
        (f"bce_weight_{red}", lambda nn, r=red: nn.BCELoss(
            weight=(torch.from_numpy(W5) if nn is torch.nn else to_ng(W5)), reduction=r),
         "prob"),
        (f"bcelogits_{red}", lambda nn, r=red: nn.BCEWithLogitsLoss(reduction=r), "logit"),
        (f"bcelogits_posw_{red}", lambda nn, r=red: nn.BCEWithLogitsLoss(
            pos_weight=(torch.from_numpy(W5) if nn is torch.nn else to_ng(W5)), reduction=r),
         "logit"),
    ]


@pytest.mark.parametrize("name,make,kind", LOSS_CASES, ids=[c[0] for c in LOSS_CASES])
def test_loss_matches_torch(name, make, kind):
    rng = np.random.default_rng(1)
    n, c = 6, 5
    x = rng.standard_normal((n, c)) * 2
    if kind == "float":
        loss_both(make, x, rng.standard_normal((n, c)), target_float=True)
    elif kind in ("class", "logp"):
        t = np.array([0, 2, 4, 1, 2, 3])
        if kind == "logp":
            x = torch.log_softmax(torch.from_numpy(x), 1).numpy()
        loss_both(make, x, t)
    elif kind == "probs":
        p = rng.random((n, c))
        loss_both(make, x, p / p.sum(1, keepdims=True), target_float=True)
    elif kind == "prob":
        loss_both(make, 1 / (1 + np.exp(-x)), rng.random((n, c)), target_float=True)
    elif kind == "logit":
        loss_both(make, x, (rng.random((n, c)) > 0.5).astype(np.float64), target_float=True)


def test_cross_entropy_spatial_and_unbatched():
    rng = np.random.default_rng(2)
    for shape, tshape in (((2, 4, 3, 3), (2, 3, 3)), ((4,), ()), ((3, 4, 5), (3, 5))):
        x = rng.standard_normal(shape)
        t = rng.integers(0, 4, tshape)
        for kw in (dict(), dict(label_smoothing=0.1), dict(ignore_index=1)):
            for red in ("mean", "none"):
                loss_both(lambda nn, kw=kw, red=red: nn.CrossEntropyLoss(reduction=red, **kw),
                          x, np.asarray(t))


def test_bce_clamps_log_like_torch():
    x = np.array([0.0, 1.0, 0.5, 1e-50])
    t = np.array([1.0, 0.0, 0.5, 1.0])
    out_t = torch.nn.functional.binary_cross_entropy(torch.from_numpy(x), torch.from_numpy(t),
                                                     reduction="none")
    out_n = nbgrad.nn.functional.binary_cross_entropy(to_ng(x), to_ng(t), reduction="none")
    close(out_n, out_t)


def test_bce_with_logits_extreme_values_are_finite():
    x = np.array([-800.0, -30.0, 0.5, 30.0, 800.0])
    t = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    loss_both(lambda nn: nn.BCEWithLogitsLoss(reduction="none"), x, t)


@pytest.mark.parametrize("call", [
    "F.conv3d(T.ones(2, 3, 4), T.ones(2, 3, 1, 1, 1))",
    "F.conv3d(T.ones(1, 3, 4, 4, 4), T.ones(2, 2, 1, 1, 1))",
    "F.conv3d(T.ones(1, 2, 2, 2, 2), T.ones(2, 2, 3, 3, 3))",
    "F.conv3d(T.ones(1, 2, 4, 4, 4), T.ones(2, 2, 1, 1, 1), stride=2, padding='same')",
    "F.max_pool3d(T.ones(2, 3), 2)", "F.max_pool3d(T.ones(1, 1, 4, 4, 4), 2, padding=2)",
    "F.avg_pool3d(T.ones(2, 2), 2)", "F.adaptive_avg_pool3d(T.ones(2, 2), 2)",
    "T.nn.BatchNorm3d(3)(T.ones(2, 3, 4, 4))",
])
def test_3d_layer_errors_as_torch(call):
    def first(T):
        with pytest.raises(Exception) as info:
            eval(call, {"T": T, "F": T.nn.functional})
        return type(info.value), str(info.value).split("\n")[0].split(" for BatchNorm3d")[0]
    ours, theirs = first(nbgrad), first(torch)
    assert ours[0].__name__ == theirs[0].__name__ and ours[1] == theirs[1]
