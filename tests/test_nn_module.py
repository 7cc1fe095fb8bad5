"""nn.Module API against torch.nn.Module: traversal, naming, modes, state dicts, hooks, repr,
default initialisation, and the error messages for bad input."""

import math
import re

import numpy as np
import pytest
import torch

import nbgrad


def npy(t):
    return np.asarray(t.detach().numpy())


def to_ng(a):
    return nbgrad.tensor(np.asarray(a.detach().numpy() if isinstance(a, torch.Tensor) else a))


def build(nn):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.act = nn.ReLU()
            self.register_buffer("scale", (torch if nn is torch.nn else nbgrad).ones(1))
            self.register_buffer("tmp", (torch if nn is torch.nn else nbgrad).zeros(2),
                                 persistent=False)

        def forward(self, x):
            return self.act(self.bn(self.conv(x))) * self.scale

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.pool = nn.MaxPool2d(2)
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.GELU(),
                                      nn.Dropout(0.1), nn.Linear(16, 10))
            self.extra = nn.ModuleList([nn.LayerNorm(10), nn.Embedding(7, 3, padding_idx=2)])
            self.alpha = nn.Parameter((torch if nn is torch.nn else nbgrad).ones(1))

        def forward(self, x):
            return self.extra[0](self.head(self.pool(self.block(x)))) * self.alpha

    return Net()


def test_traversal_names_match_torch():
    t, n = build(torch.nn), build(nbgrad.nn)
    assert [k for k, _ in n.named_parameters()] == [k for k, _ in t.named_parameters()]
    assert [k for k, _ in n.named_buffers()] == [k for k, _ in t.named_buffers()]
    assert [k for k, _ in n.named_modules()] == [k for k, _ in t.named_modules()]
    assert [k for k, _ in n.named_children()] == [k for k, _ in t.named_children()]
    assert [type(m).__name__ for m in n.modules()] == [type(m).__name__ for m in t.modules()]
    assert [tuple(p.shape) for p in n.parameters()] == [tuple(p.shape) for p in t.parameters()]
    assert list(n.state_dict().keys()) == list(t.state_dict().keys())
    assert len(list(n.parameters(recurse=False))) == 1
    assert n.get_submodule("head.1") is n.head[1]
    assert all(isinstance(p, nbgrad.nn.Parameter) and p.requires_grad for p in n.parameters())


def test_repr_matches_torch():
    t, n = build(torch.nn), build(nbgrad.nn)
    assert repr(n) == repr(t)
    for make in (lambda nn: nn.Conv2d(2, 4, 3, stride=2, groups=2, bias=False, dilation=2),
                 lambda nn: nn.Conv2d(1, 16, 3, padding="same"),
                 lambda nn: nn.MaxPool2d(3, 2, 1), lambda nn: nn.AvgPool2d(2),
                 lambda nn: nn.BatchNorm1d(4, momentum=None, affine=False),
                 lambda nn: nn.LayerNorm((2, 3), elementwise_affine=False),
                 lambda nn: nn.LeakyReLU(0.2, inplace=True), lambda nn: nn.ReLU(inplace=True),
                 lambda nn: nn.Softmax(dim=-1), lambda nn: nn.GELU(approximate="tanh"),
                 lambda nn: nn.CrossEntropyLoss(label_smoothing=0.1), lambda nn: nn.Identity(),
                 lambda nn: nn.Embedding(5, 2), lambda nn: nn.Linear(3, 2, bias=False)):
        assert repr(make(nbgrad.nn)) == repr(make(torch.nn))


def test_parameter_is_a_leaf_tensor_sharing_storage():
    data = nbgrad.ones(3)
    p = nbgrad.nn.Parameter(data)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    assert type(p).__name__ == "Parameter"
    assert repr(p).startswith("Parameter containing:\n")
    assert nbgrad.nn.Parameter(data, requires_grad=False).requires_grad is False
    y = p * 2
    assert type(y) is nbgrad.Tensor  # ops on a Parameter return plain tensors
    y.sum().backward()
    np.testing.assert_array_equal(npy(p.grad), [2.0, 2.0, 2.0])


def test_train_eval_zero_grad_requires_grad():
    n = build(nbgrad.nn)
    assert n.training and n.head[3].training
    assert n.eval() is n
    assert not any(m.training for m in n.modules())
    n.train()
    assert all(m.training for m in n.modules())
    n.eval()
    out = n(nbgrad.randn(2, 1, 8, 8))
    out.sum().backward()
    assert all(p.grad is not None for p in n.parameters() if p is not n.extra[1].weight)
    n.zero_grad(set_to_none=False)
    assert all(p.grad is None or not npy(p.grad).any() for p in n.parameters())
    n.zero_grad()
    assert all(p.grad is None for p in n.parameters())
    n.requires_grad_(False)
    assert not any(p.requires_grad for p in n.parameters())


def test_setattr_registration_rules():
    m = nbgrad.nn.Module()
    m.w = nbgrad.nn.Parameter(nbgrad.zeros(2))
    m.sub = nbgrad.nn.Linear(2, 2)
    m.plain = nbgrad.zeros(2)  # a plain tensor attribute is not registered
    assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"]
    assert "plain" not in dict(m.named_buffers())
    with pytest.raises(TypeError, match="cannot assign"):
        m.w = nbgrad.zeros(2)
    del m.w
    assert "w" not in m._parameters
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        m.nothing
    with pytest.raises(KeyError):
        m.register_buffer("a.b", nbgrad.zeros(1))


def test_state_dict_round_trip_and_sharing():
    t, n = build(torch.nn), build(nbgrad.nn)
    sd = {k: to_ng(v) for k, v in t.state_dict().items()}
    res = n.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k, v in n.state_dict().items():
        np.testing.assert_array_equal(npy(v), t.state_dict()[k].numpy())
    # state_dict values share storage with the parameters, detached
    sd2 = n.state_dict()
    assert not sd2["head.1.weight"].requires_grad
    with nbgrad.no_grad():
        n.head[1].weight.fill_(3.0)
    assert npy(sd2["head.1.weight"]).max() == 3.0
    kv = n.state_dict(keep_vars=True)
    assert kv["head.1.weight"] is n.head[1].weight


def test_load_state_dict_errors_like_torch():
    t, n = torch.nn.Linear(3, 2), nbgrad.nn.Linear(3, 2)
    bad_t = {"weight": torch.zeros(2, 4), "foo": torch.zeros(1)}
    bad_n = {"weight": nbgrad.zeros(2, 4), "foo": nbgrad.zeros(1)}
    with pytest.raises(RuntimeError) as et:
        t.load_state_dict(bad_t)
    with pytest.raises(RuntimeError) as en:
        n.load_state_dict(bad_n)
    norm = lambda s: re.sub(r"(torch|nbgrad)\.Size\(\[([^\]]*)\]\)", r"(\2)", s)  # noqa: E731
    assert norm(str(en.value)) == norm(str(et.value))
    assert 'Missing key(s) in state_dict: "bias".' in str(en.value)
    assert 'Unexpected key(s) in state_dict: "foo".' in str(en.value)
    res = n.load_state_dict({"weight": nbgrad.ones(2, 3), "foo": nbgrad.zeros(1)}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["foo"]
    assert npy(n.weight).min() == 1.0


def test_load_state_dict_bumps_version_and_keeps_identity():
    n = nbgrad.nn.Linear(3, 2)
    w = n.weight
    v0 = w._version
    n.load_state_dict({"weight": nbgrad.ones(2, 3), "bias": nbgrad.zeros(2)})
    assert n.weight is w and w._version > v0


def test_forward_hooks_and_pre_hooks():
    lin = nbgrad.nn.Linear(3, 2)
    seen = []
    h1 = lin.register_forward_hook(lambda m, args, out: seen.append((m, args[0].shape, out.shape)))
    h2 = lin.register_forward_hook(lambda m, args, out: out * 0)
    h3 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    x = nbgrad.ones(4, 3)
    y = lin(x)
    assert seen[0][0] is lin and tuple(seen[0][1]) == (4, 3) and tuple(seen[0][2]) == (4, 2)
    assert not npy(y).any()
    h2.remove()
    h3.remove()
    y2 = lin(x)
    np.testing.assert_allclose(npy(y2), npy(x) @ npy(lin.weight).T + npy(lin.bias), rtol=1e-6)
    h1.remove()
    lin(x)
    assert len(seen) == 2


def test_to_dtype_and_device():
    n = build(nbgrad.nn)
    n.to(nbgrad.float64)
    assert all(p.dtype == nbgrad.float64 for p in n.parameters())
    assert n.block.bn.num_batches_tracked.dtype == nbgrad.int64  # integer buffers keep dtype
    n.float()
    assert all(p.dtype == nbgrad.float32 for p in n.parameters())
    n.to("cpu")
    assert all(str(p.device) == "cpu" for p in n.parameters())
    out = n(nbgrad.randn(2, 1, 8, 8))
    assert tuple(out.shape) == (2, 10)


def test_containers():
    nn = nbgrad.nn
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    seq.append(nn.Sigmoid())
    assert [k for k, _ in seq.named_children()] == ["0", "1", "2", "3"]
    from collections import OrderedDict
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert [k for k, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    ml.append(nn.Linear(1, 2))
    assert len(list(ml.parameters())) == 8 and len(ml) == 4
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    assert "a" in md and [k for k, _ in md.named_parameters()] == ["a.weight", "a.bias"]


# ----------------------------------------------------------------------------- default init
@pytest.mark.parametrize("make", [
    lambda nn: nn.Linear(256, 300),
    lambda nn: nn.Conv2d(16, 64, 3),
    lambda nn: nn.Conv2d(8, 32, (5, 3), groups=4),
])
def test_default_init_distribution_matches_torch(make):
    nbgrad.manual_seed(0)
    torch.manual_seed(0)
    n, t = make(nbgrad.nn), make(torch.nn)
    w = t.weight
    fan_in = w.shape[1] * int(np.prod(w.shape[2:]))
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)) and the bias rule agree
    for (name, pn), (_, pt) in zip(n.named_parameters(), t.named_parameters()):
        a, b = npy(pn), pt.detach().numpy()
        for arr in (a, b):  # the same checks hold for torch's own init
            assert np.abs(arr).max() <= bound * (1 + 1e-6), name
            assert np.abs(arr).max() >= bound * (0.95 if arr.size > 1000 else 0.5), name
            if arr.size > 1000:  # U(-bound, bound): std = bound / sqrt(3), mean 0
                assert abs(arr.std() - bound / math.sqrt(3)) < 0.03 * bound, name
                assert abs(arr.mean()) < 0.03 * bound, name


def test_default_init_of_norm_layers():
    for layer in (nbgrad.nn.BatchNorm1d(5), nbgrad.nn.BatchNorm2d(5), nbgrad.nn.LayerNorm(5)):
        assert np.all(npy(layer.weight) == 1) and np.all(npy(layer.bias) == 0)
    bn = nbgrad.nn.BatchNorm2d(5)
    assert np.all(npy(bn.running_mean) == 0) and np.all(npy(bn.running_var) == 1)
    assert bn.num_batches_tracked.dtype == nbgrad.int64


def test_init_functions():
    init = nbgrad.nn.init
    w = nbgrad.empty(200, 300)
    init.xavier_uniform_(w)
    a = math.sqrt(6 / 500)
    assert np.abs(npy(w)).max() <= a and abs(npy(w).std() - a / math.sqrt(3)) < 0.02 * a
    init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(npy(w).std() - math.sqrt(2 / 300)) < 0.02 * math.sqrt(2 / 300)
    init.normal_(w, 2.0, 0.5)
    assert abs(npy(w).mean() - 2.0) < 0.01 and abs(npy(w).std() - 0.5) < 0.01
    init.zeros_(w)
    assert not npy(w).any()
    init.constant_(w, 0.25)
    assert np.all(npy(w) == 0.25)
    init.eye_(w)
    assert np.array_equal(npy(w), np.eye(200, 300))
    init.orthogonal_(w)
    np.testing.assert_allclose(npy(w) @ npy(w).T, np.eye(200), atol=1e-4)
    assert init.calculate_gain("leaky_relu", 0.2) == torch.nn.init.calculate_gain("leaky_relu",
                                                                                  0.2)
    p = nbgrad.nn.Parameter(nbgrad.zeros(3, 4))
    v0 = p._version
    init.uniform_(p, -1, 1)  # allowed on a leaf that requires grad (no_grad inside)
    assert p._version == v0 + 1 and p.grad_fn is None


def test_init_generator_reproducible():
    g1 = nbgrad.Generator().manual_seed(5)
    g2 = nbgrad.Generator().manual_seed(5)
    a, b = nbgrad.empty(4, 4), nbgrad.empty(4, 4)
    nbgrad.nn.init.uniform_(a, generator=g1)
    nbgrad.nn.init.uniform_(b, generator=g2)
    assert np.array_equal(npy(a), npy(b))


# ----------------------------------------------------------------------------- bad input
def test_linear_wrong_shape_names_layer():
    lin = nbgrad.nn.Linear(64, 10)
    with pytest.raises(RuntimeError) as e:
        lin(nbgrad.zeros(32, 65))
    assert str(e.value) == (
        "Linear(in_features=64, out_features=10): expected input (*, 64), got (32, 65)")
    with pytest.raises(RuntimeError, match=re.escape(
            "Linear(in_features=3, out_features=2, bias=False): expected input (*, 3), got (4,)")):
        nbgrad.nn.Linear(3, 2, bias=False)(nbgrad.zeros(4))


def test_conv_and_pool_wrong_shape_names_layer():
    conv = nbgrad.nn.Conv2d(1, 16, 3)
    with pytest.raises(RuntimeError, match=re.escape(
            "Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1)): expected input (N, 1, H, W) or "
            "(1, H, W), got (32, 3, 8, 8)")):
        conv(nbgrad.zeros(32, 3, 8, 8))
    with pytest.raises(RuntimeError, match="MaxPool2d.*expected input"):
        nbgrad.nn.MaxPool2d(2)(nbgrad.zeros(4, 4))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        nbgrad.nn.Conv2d(1, 1, 5)(nbgrad.zeros(1, 1, 3, 3))


def test_norm_and_embedding_wrong_input():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\).*BatchNorm2d\(3"):
        nbgrad.nn.BatchNorm2d(3)(nbgrad.zeros(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input"):
        nbgrad.nn.BatchNorm1d(3)(nbgrad.zeros(2, 3, 4, 4))
    with pytest.raises(RuntimeError, match=r"BatchNorm1d\(3.*expected input with 3 channels"):
        nbgrad.nn.BatchNorm1d(3)(nbgrad.zeros(2, 4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        nbgrad.nn.BatchNorm1d(3)(nbgrad.zeros(1, 3))
    with pytest.raises(RuntimeError, match=re.escape("LayerNorm((10,)")):
        nbgrad.nn.LayerNorm(10)(nbgrad.zeros(3, 5))
    with pytest.raises(IndexError, match=re.escape("Embedding(10, 3): index 12 out of range")):
        nbgrad.nn.Embedding(10, 3)(nbgrad.tensor([1, 12]))
    with pytest.raises(RuntimeError, match="indices"):
        nbgrad.nn.functional.embedding(nbgrad.zeros(2), nbgrad.zeros(3, 2))


def test_loss_target_errors_name_the_loss():
    x = nbgrad.zeros(4, 3)
    ce = nbgrad.nn.CrossEntropyLoss()
    with pytest.raises(RuntimeError, match=r"CrossEntropyLoss\(\).*int64.*got .*int32"):
        ce(x, nbgrad.tensor([0, 1, 2, 1], dtype=nbgrad.int32))
    with pytest.raises(RuntimeError, match=r"CrossEntropyLoss\(\).*probabilities.*\(4, 3\)"):
        ce(x, nbgrad.tensor([0.0, 1.0, 2.0, 1.0]))
    with pytest.raises(IndexError, match=r"Target 3 is out of bounds.*CrossEntropyLoss"):
        ce(x, nbgrad.tensor([0, 1, 3, 1]))
    with pytest.raises(IndexError, match=r"Target -1 is out of bounds"):
        nbgrad.nn.NLLLoss()(x, nbgrad.tensor([0, -1, 2, 1]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match target "
                                         r"batch_size \(3\)"):
        ce(x, nbgrad.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match=r"all elements of input should be between 0 and 1.*"
                                           r"BCELoss"):
        nbgrad.nn.BCELoss()(nbgrad.tensor([1.5, 0.5]), nbgrad.tensor([1.0, 0.0]))
    with pytest.raises(RuntimeError, match=r"target should be between 0 and 1"):
        nbgrad.nn.BCELoss()(nbgrad.tensor([0.5, 0.5]), nbgrad.tensor([2.0, 0.0]))
    with pytest.raises(ValueError, match=r"target size .* different to the input size"):
        nbgrad.nn.BCEWithLogitsLoss()(nbgrad.zeros(3), nbgrad.zeros(3, 1))
    with pytest.raises(RuntimeError, match=r"BCEWithLogitsLoss.*floating target"):
        nbgrad.nn.BCEWithLogitsLoss()(nbgrad.zeros(3), nbgrad.tensor([0, 1, 1]))


def test_deepcopy_and_pickle_keep_parameters():
    import copy
    import pickle

    m = nbgrad.nn.Sequential(nbgrad.nn.Linear(3, 2), nbgrad.nn.BatchNorm1d(2))
    for clone in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert repr(clone) == repr(m)
        for (k, a), (_, b) in zip(m.state_dict().items(), clone.state_dict().items()):
            np.testing.assert_array_equal(npy(a), npy(b), err_msg=k)
        assert all(type(p).__name__ == "Parameter" and p.requires_grad
                   for p in clone.parameters())
        assert all(p is not q for p, q in zip(m.parameters(), clone.parameters()))
        clone(nbgrad.randn(4, 3)).sum().backward()
        assert clone[0].weight.grad is not None and m[0].weight.grad is None


def test_parameters_order_and_sharing_match_torch():
    """parameters() (which skips building names) yields what named_parameters() yields, in
    torch's order, each once: a submodule registered twice, a tied weight, a None entry, a
    module overriding named_modules or named_parameters (asked, as torch asks it)."""
    def build(lib):
        nn = lib.nn
        torch.manual_seed(0)
        shared = nn.Linear(3, 3)
        model = nn.Sequential(nn.Sequential(shared, nn.ReLU(), shared), nn.Linear(3, 4),
                              nn.ModuleList([nn.LayerNorm(4), None, nn.Linear(4, 4)]))
        model.register_parameter("extra", None)
        model[0].register_parameter("own", nn.Parameter(lib.ones(2)))
        model[2][0].weight = model[1].bias  # tied: the same Parameter in two places
        return model

    tm, nm = build(torch), build(nbgrad)
    shapes_t = [tuple(p.shape) for p in tm.parameters()]
    assert [tuple(p.shape) for p in nm.parameters()] == shapes_t
    assert [p for _, p in nm.named_parameters()] == list(nm.parameters())
    assert len(list(nm.parameters())) == len(list(tm.parameters()))
    assert list(nm.parameters(recurse=False)) == [] and list(tm.parameters(recurse=False)) == []

    class Flat(nbgrad.nn.Module):  # a traversal override is honoured
        def __init__(self):
            super().__init__()
            self.a, self.b = nbgrad.nn.Linear(2, 2), nbgrad.nn.Linear(2, 2)

        def named_modules(self, memo=None, prefix="", remove_duplicate=True):
            yield prefix, self
            yield prefix + ".b", self.b  # a only through b's order: b first, a skipped

    outer = nbgrad.nn.Sequential(Flat())
    assert [p for _, p in outer.named_parameters()] == list(outer.parameters())
    assert list(outer.parameters()) == list(outer[0].b.parameters())
