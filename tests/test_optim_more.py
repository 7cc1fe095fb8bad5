"""ASGD, Rprop, Adafactor, SparseAdam and optim.swa_utils against torch: step for step on identical
float64 parameters (with weight decay and the other options), float32 kept, state dicts equal to
torch's and a resumed run equal to an uninterrupted one, argument errors with torch's texts."""

import numpy as np
import pytest
import torch

import nbgrad
from test_optim import batch, loss_of, make_pair, npy

MORE = [
    ("asgd", "ASGD", dict(lr=0.05)),
    ("asgd_t0_wd", "ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.6, t0=5, weight_decay=0.05)),
    ("asgd_max", "ASGD", dict(lr=0.01, t0=0, maximize=True)),
    ("rprop", "Rprop", dict()),
    ("rprop_opts", "Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2))),
    ("rprop_max", "Rprop", dict(lr=0.01, maximize=True)),
    ("adafactor", "Adafactor", dict()),
    ("adafactor_opts", "Adafactor", dict(lr=0.05, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=1.5,
                                         weight_decay=0.1)),
    ("adafactor_max", "Adafactor", dict(lr=0.02, maximize=True)),
]


def _run(cls, kw, steps, th, ng):
    ot = getattr(torch.optim, cls)(th.parameters(), **kw)
    on = getattr(nbgrad.optim, cls)(ng.parameters(), **kw)
    for step in range(steps):
        x, y = batch(step)
        for lib, model, opt in ((torch, th, ot), (nbgrad, ng, on)):
            opt.zero_grad()
            loss_of(lib, model, x, y).backward()
            opt.step()
        for (k, pt), pn in zip(th.named_parameters(), ng.parameters()):
            np.testing.assert_allclose(npy(pn), pt.detach().numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=f"{cls} step {step} {k}")
    return ot, on


@pytest.mark.parametrize("name,cls,kw", MORE, ids=[o[0] for o in MORE])
def test_step_for_step_and_state_like_torch(name, cls, kw):
    th, ng = make_pair()
    versions = [p._version for p in ng.parameters()]
    ot, on = _run(cls, kw, 12, th, ng)
    assert all(p._version > v for p, v in zip(ng.parameters(), versions))
    st, sn = ot.state_dict(), on.state_dict()
    assert sorted(st["state"]) == sorted(sn["state"])
    for i in st["state"]:
        assert sorted(st["state"][i]) == sorted(sn["state"][i])
        for key, vt in st["state"][i].items():
            vn = sn["state"][i][key]
            assert str(vn.dtype).split(".")[1] == str(vt.dtype).split(".")[1], (key, vn.dtype)
            assert tuple(vn.shape) == tuple(vt.shape), key
            np.testing.assert_allclose(npy(vn), vt.numpy(), rtol=1e-9, atol=1e-12)
    gt, gn = st["param_groups"][0], sn["param_groups"][0]
    assert sorted(gt) == sorted(gn)
    for key in gt:
        assert gt[key] == gn[key], key


@pytest.mark.parametrize("cls,kw", [("ASGD", dict(lr=0.05, t0=3)), ("Rprop", dict(lr=0.02)),
                                    ("Adafactor", dict(weight_decay=0.1))])
def test_float32_stays_float32_and_matches_torch(cls, kw):
    torch.manual_seed(1)
    th = torch.nn.Linear(6, 4)
    ng = nbgrad.nn.Linear(6, 4)
    ng.load_state_dict({k: nbgrad.tensor(v.numpy().copy()) for k, v in th.state_dict().items()})
    ot = getattr(torch.optim, cls)(th.parameters(), **kw)
    on = getattr(nbgrad.optim, cls)(ng.parameters(), **kw)
    rng = np.random.default_rng(0)
    for _ in range(6):
        x = rng.standard_normal((5, 6)).astype(np.float32)
        for lib, m, o in ((torch, th, ot), (nbgrad, ng, on)):
            o.zero_grad()
            (m(lib.from_numpy(x)) ** 2).mean().backward()
            o.step()
    for (k, pt), pn in zip(th.named_parameters(), ng.parameters()):
        assert pn.dtype == nbgrad.float32
        np.testing.assert_allclose(npy(pn), pt.detach().numpy(), rtol=1e-5, atol=1e-6)
    for i, s in on.state_dict()["state"].items():
        for key, v in s.items():
            assert v.dtype == nbgrad.float32, (key, v.dtype)


@pytest.mark.parametrize("cls,kw", [("ASGD", dict(lr=0.05, t0=4, weight_decay=0.01)),
                                    ("Rprop", dict(lr=0.02)), ("Adafactor", dict(lr=0.05))])
def test_state_dict_resume_equals_uninterrupted(cls, kw, tmp_path):
    _, a = make_pair(2)
    _, b = make_pair(2)
    oa = getattr(nbgrad.optim, cls)(a.parameters(), **kw)
    ob = getattr(nbgrad.optim, cls)(b.parameters(), **kw)

    def train(pairs, steps):
        for step in steps:
            for m, o in pairs:
                x, y = batch(step)
                o.zero_grad()
                loss_of(nbgrad, m, x, y).backward()
                o.step()

    train(((a, oa), (b, ob)), range(6))
    nbgrad.save({"model": b.state_dict(), "optim": ob.state_dict()}, tmp_path / "ckpt.pt")
    _, b2 = make_pair(3)
    ob2 = getattr(nbgrad.optim, cls)(b2.parameters(), **kw)
    ck = nbgrad.load(tmp_path / "ckpt.pt")
    b2.load_state_dict(ck["model"])
    ob2.load_state_dict(ck["optim"])
    train(((a, oa), (b2, ob2)), range(6, 12))
    if cls != "ASGD":  # (torch casts ASGD's float32 eta and mu to the parameter's dtype on
        # load, so a resumed run differs from an uninterrupted one in torch too: checked below)
        for pa, pb in zip(a.parameters(), b2.parameters()):
            np.testing.assert_array_equal(npy(pa), npy(pb))
    # and torch reads the optimizer's checkpoint into its own optimizer, which continues alike
    th, _ = make_pair(2)
    ot = getattr(torch.optim, cls)(th.parameters(), **kw)
    ck_t = torch.load(tmp_path / "ckpt.pt")
    th.load_state_dict(ck_t["model"])
    ot.load_state_dict(ck_t["optim"])
    _, b3 = make_pair(3)
    ob3 = getattr(nbgrad.optim, cls)(b3.parameters(), **kw)
    b3.load_state_dict(ck["model"])
    ob3.load_state_dict(ck["optim"])
    for i, s in ot.state_dict()["state"].items():
        for key, v in s.items():
            assert str(ob3.state_dict()["state"][i][key].dtype)[7:] == str(v.dtype)[6:], key
    for step in range(6, 9):
        x, y = batch(step)
        for lib, m, o in ((torch, th, ot), (nbgrad, b3, ob3)):
            o.zero_grad()
            loss_of(lib, m, x, y).backward()
            o.step()
    for pt, pn in zip(th.parameters(), b3.parameters()):
        np.testing.assert_allclose(npy(pn), pt.detach().numpy(), rtol=1e-10, atol=1e-12)


BAD = [("ASGD", dict(lr=-1)), ("ASGD", dict(weight_decay=-1)),
       ("Rprop", dict(lr=-0.1)), ("Rprop", dict(etas=(1.2, 0.5))), ("Rprop", dict(etas=(0.5, 1.0))),
       ("Adafactor", dict(lr=-1)), ("Adafactor", dict(beta2_decay=0.1)),
       ("Adafactor", dict(eps=(-1.0, 1e-3))), ("Adafactor", dict(eps=(None, -1.0))),
       ("Adafactor", dict(d=0.5)), ("Adafactor", dict(weight_decay=-0.1)),
       ("SparseAdam", dict(lr=0.0)), ("SparseAdam", dict(eps=0.0)),
       ("SparseAdam", dict(betas=(1.0, 0.9))), ("SparseAdam", dict(betas=(0.9, -0.1)))]


@pytest.mark.parametrize("cls,kw", BAD)
def test_bad_arguments_raise_torchs_errors(cls, kw):
    with pytest.raises(Exception) as et:
        getattr(torch.optim, cls)([torch.nn.Parameter(torch.zeros(2))], **kw)
    with pytest.raises(type(et.value)) as en:
        getattr(nbgrad.optim, cls)([nbgrad.nn.Parameter(nbgrad.zeros(2))], **kw)
    assert str(en.value) == str(et.value)


def test_sparse_adam_refuses_a_dense_gradient_as_torch():
    pt, pn = torch.nn.Parameter(torch.ones(3)), nbgrad.nn.Parameter(nbgrad.ones(3))
    ot, on = torch.optim.SparseAdam([pt]), nbgrad.optim.SparseAdam([pn])
    ot.step(), on.step()  # no grad: nothing to do
    (pt * 2).sum().backward()
    (pn * 2).sum().backward()
    with pytest.raises(RuntimeError) as et:
        ot.step()
    with pytest.raises(RuntimeError) as en:
        on.step()
    assert str(en.value) == str(et.value)
    assert sorted(on.state_dict()["param_groups"][0]) == sorted(
        ot.state_dict()["param_groups"][0])


# ---- swa_utils ---------------------------------------------------------------------------------
def _bn_pair():
    torch.manual_seed(4)
    th = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(),
                             torch.nn.Linear(6, 3)).double()
    ng = nbgrad.nn.Sequential(nbgrad.nn.Linear(5, 6), nbgrad.nn.BatchNorm1d(6), nbgrad.nn.ReLU(),
                              nbgrad.nn.Linear(6, 3)).double()
    ng.load_state_dict({k: nbgrad.tensor(v.numpy().copy()) for k, v in th.state_dict().items()})
    return th, ng


def _assert_modules_equal(mt, mn, rtol=1e-10):
    st, sn = mt.state_dict(), mn.state_dict()
    assert list(st) == list(sn)
    for k in st:
        assert str(sn[k].dtype).split(".")[1] == str(st[k].dtype).split(".")[1], k
        np.testing.assert_allclose(npy(sn[k]), st[k].numpy(), rtol=rtol, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("kind", ["swa", "avg_fn_ema", "multi_ema", "multi_swa", "use_buffers"])
def test_averaged_model_and_swalr_follow_torch(kind):
    th, ng = _bn_pair()
    kw = {"swa": ({}, {}), "use_buffers": (dict(use_buffers=True),) * 2,
          "avg_fn_ema": (dict(avg_fn=torch.optim.swa_utils.get_ema_avg_fn(0.9)),
                         dict(avg_fn=nbgrad.optim.swa_utils.get_ema_avg_fn(0.9))),
          "multi_ema": (dict(multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.8)),
                        dict(multi_avg_fn=nbgrad.optim.swa_utils.get_ema_multi_avg_fn(0.8))),
          "multi_swa": (dict(multi_avg_fn=torch.optim.swa_utils.get_swa_multi_avg_fn()),
                        dict(multi_avg_fn=nbgrad.optim.swa_utils.get_swa_multi_avg_fn()))}[kind]
    at = torch.optim.swa_utils.AveragedModel(th, **kw[0])
    an = nbgrad.optim.swa_utils.AveragedModel(ng, **kw[1])
    ot, on = torch.optim.SGD(th.parameters(), lr=0.5), nbgrad.optim.SGD(ng.parameters(), lr=0.5)
    schedt = torch.optim.swa_utils.SWALR(ot, swa_lr=0.05, anneal_epochs=3)
    schedn = nbgrad.optim.swa_utils.SWALR(on, swa_lr=0.05, anneal_epochs=3)
    for step in range(7):
        x, y = batch(step)
        for lib, m, o, a, s in ((torch, th, ot, at, schedt), (nbgrad, ng, on, an, schedn)):
            o.zero_grad()
            loss_of(lib, m, x, y).backward()
            o.step()
            a.update_parameters(m)
            s.step()
        assert schedn.get_last_lr() == schedt.get_last_lr()
    _assert_modules_equal(at, an)
    assert int(an.n_averaged) == int(at.n_averaged) == 7
    loader = [(torch.from_numpy(batch(s)[0]),) for s in range(3)]
    torch.optim.swa_utils.update_bn(loader, at)
    nbgrad.optim.swa_utils.update_bn([(nbgrad.tensor(b[0].numpy()),) for b in loader], an)
    _assert_modules_equal(at, an)
    x = batch(9)[0]
    at.eval(), an.eval()
    np.testing.assert_allclose(npy(an(nbgrad.tensor(x))), at(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-10)
    sd_t, sd_n = schedt.state_dict(), schedn.state_dict()
    assert sorted(k for k in sd_t if not k.startswith("_get_lr")) == sorted(
        k for k in sd_n if not k.startswith("_get_lr"))


def test_swa_errors_like_torch():
    p_t, p_n = [torch.nn.Parameter(torch.zeros(2))], [nbgrad.nn.Parameter(nbgrad.zeros(2))]
    cases = [(lambda m: m.optim.swa_utils.SWALR(m.optim.SGD(p_t if m is torch else p_n, lr=1),
                                               0.1, anneal_strategy="exp")),
             (lambda m: m.optim.swa_utils.SWALR(m.optim.SGD(p_t if m is torch else p_n, lr=1),
                                               0.1, anneal_epochs=-1)),
             (lambda m: m.optim.swa_utils.SWALR(m.optim.SGD(p_t if m is torch else p_n, lr=1),
                                               [0.1, 0.2])),
             (lambda m: m.optim.swa_utils.get_ema_avg_fn(1.5)),
             (lambda m: m.optim.swa_utils.get_ema_multi_avg_fn(-0.1)),
             (lambda m: m.optim.swa_utils.AveragedModel(
                 m.nn.Linear(2, 2), avg_fn=m.optim.swa_utils.get_swa_avg_fn(),
                 multi_avg_fn=m.optim.swa_utils.get_swa_multi_avg_fn()))]
    for make in cases:
        with pytest.raises(Exception) as et:
            make(torch)
        with pytest.raises(type(et.value)) as en:
            make(nbgrad)
        assert str(en.value) == str(et.value)


def test_copy_of_floats_into_integer_tensors_casts_as_torch():
    """AveragedModel(use_buffers=True) copies the averaged num_batches_tracked (a float) into
    the int64 buffer: copy_ casts, truncating toward zero, and bumps the version once."""
    for dst, src in (([3, 0], [1.5, -2.7]), ([True, False], [0.0, 2.0]), ([7], [True])):
        t_dst, n_dst = torch.tensor(dst), nbgrad.tensor(dst)
        t_dst.copy_(torch.tensor(src))
        n_dst.copy_(nbgrad.tensor(src))
        assert npy(n_dst).tolist() == t_dst.tolist()
        assert str(n_dst.dtype)[7:] == str(t_dst.dtype)[6:]
        assert n_dst._version == t_dst._version == 1
