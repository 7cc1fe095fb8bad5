"""Optimizers step for step against torch.optim (float64, 20 steps), their state dicts, and the
learning-rate schedulers against torch.optim.lr_scheduler."""

import numpy as np
import pytest
import torch

import nbgrad


def npy(t):
    return np.asarray(t.detach().numpy())


def make_pair(seed=0):
    """The same small MLP in both libraries (float64), torch's weights copied into nbgrad's."""
    torch.manual_seed(seed)
    th = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)).double()
    ng = nbgrad.nn.Sequential(nbgrad.nn.Linear(5, 7), nbgrad.nn.Tanh(),
                              nbgrad.nn.Linear(7, 3)).double()
    ng.load_state_dict({k: nbgrad.tensor(v.numpy().copy()) for k, v in th.state_dict().items()})
    return th, ng


def batch(step):
    rng = np.random.default_rng(100 + step)
    return rng.standard_normal((8, 5)), rng.integers(0, 3, 8)


def loss_of(lib, model, x, y):
    if lib is torch:
        return torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
    return nbgrad.nn.functional.cross_entropy(model(nbgrad.tensor(x)), nbgrad.tensor(y))


OPTIMS = [
    ("sgd", "SGD", dict(lr=0.1)),
    ("sgd_momentum", "SGD", dict(lr=0.1, momentum=0.9)),
    ("sgd_dampening_wd", "SGD", dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=1e-2)),
    ("sgd_nesterov", "SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("sgd_maximize", "SGD", dict(lr=0.01, momentum=0.5, maximize=True)),
    ("adam", "Adam", dict(lr=1e-2)),
    ("adam_wd_amsgrad", "Adam", dict(lr=1e-2, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True)),
    ("adam_eps_max", "Adam", dict(lr=3e-3, eps=1e-6, maximize=True)),
    ("adamw", "AdamW", dict(lr=1e-2)),
    ("adamw_amsgrad", "AdamW", dict(lr=1e-2, weight_decay=0.3, amsgrad=True)),
    ("rmsprop", "RMSprop", dict(lr=1e-2)),
    ("rmsprop_centered_momentum", "RMSprop", dict(lr=1e-2, alpha=0.9, momentum=0.5,
                                                  centered=True, weight_decay=0.01)),
    ("adagrad", "Adagrad", dict(lr=0.1)),
    ("adagrad_decay", "Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.01,
                                      initial_accumulator_value=0.1, maximize=True)),
    ("adadelta", "Adadelta", dict()),
    ("adadelta_wd", "Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.02)),
    ("adamax", "Adamax", dict(lr=1e-2)),
    ("adamax_wd_max", "Adamax", dict(lr=1e-2, betas=(0.8, 0.9), weight_decay=0.1, maximize=True)),
    ("nadam", "NAdam", dict(lr=1e-2)),
    ("nadam_wd", "NAdam", dict(lr=1e-2, weight_decay=0.1, momentum_decay=0.01)),
    ("nadam_decoupled", "NAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)),
    ("radam", "RAdam", dict(lr=1e-2)),
    ("radam_wd", "RAdam", dict(lr=1e-2, betas=(0.5, 0.6), weight_decay=0.1)),
    ("radam_decoupled", "RAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True)),
]


@pytest.mark.parametrize("name,cls,kw", OPTIMS, ids=[o[0] for o in OPTIMS])
def test_optimizer_step_for_step(name, cls, kw):
    th, ng = make_pair()
    ot = getattr(torch.optim, cls)(th.parameters(), **kw)
    on = getattr(nbgrad.optim, cls)(ng.parameters(), **kw)
    versions = [p._version for p in ng.parameters()]
    for step in range(20):
        x, y = batch(step)
        for lib, model, opt in ((torch, th, ot), (nbgrad, ng, on)):
            opt.zero_grad()
            loss_of(lib, model, x, y).backward()
            opt.step()
        for (k, pt), pn in zip(th.named_parameters(), ng.parameters()):
            np.testing.assert_allclose(npy(pn), pt.detach().numpy(), rtol=1e-10, atol=1e-12,
                                       err_msg=f"{name} step {step} {k}")
    # every update is an in-place op on the parameter: its version moved
    assert all(p._version > v for p, v in zip(ng.parameters(), versions))
    st, sn = ot.state_dict(), on.state_dict()
    assert sorted(st["state"]) == sorted(sn["state"])
    for i in st["state"]:
        assert sorted(st["state"][i]) == sorted(sn["state"][i])
        for key, vt in st["state"][i].items():
            np.testing.assert_allclose(npy(sn["state"][i][key]), vt.numpy(), rtol=1e-9,
                                       atol=1e-12)
    gt, gn = st["param_groups"][0], sn["param_groups"][0]
    for key in ("lr", "params", "weight_decay", "maximize"):
        assert gt[key] == gn[key]


def test_param_groups_with_own_lr_and_skipped_params():
    th, ng = make_pair(1)
    groups = lambda m: [{"params": m[0].parameters(), "lr": 0.5},  # noqa: E731
                        {"params": m[2].parameters()}]
    ot = torch.optim.SGD(groups(th), lr=0.01, momentum=0.9)
    on = nbgrad.optim.SGD(groups(ng), lr=0.01, momentum=0.9)
    for step in range(5):
        x, y = batch(step)
        for lib, model, opt in ((torch, th, ot), (nbgrad, ng, on)):
            opt.zero_grad()
            loss_of(lib, model, x, y).backward()
            if step % 2:
                model[2].bias.grad = None  # a param without grad is skipped
            opt.step()
    for pt, pn in zip(th.parameters(), ng.parameters()):
        np.testing.assert_allclose(npy(pn), pt.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert [g["lr"] for g in on.param_groups] == [0.5, 0.01]


def test_zero_grad_set_to_none_and_zero():
    _, ng = make_pair()
    opt = nbgrad.optim.SGD(ng.parameters(), lr=0.1)
    x, y = batch(0)
    loss_of(nbgrad, ng, x, y).backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not npy(p.grad).any() for p in ng.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in ng.parameters())


@pytest.mark.parametrize("cls,kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                    ("Adam", dict(lr=1e-2, amsgrad=True)),
                                    ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.3))])
def test_state_dict_resume_equals_uninterrupted(cls, kw, tmp_path):
    _, a = make_pair(2)
    _, b = make_pair(2)
    oa = getattr(nbgrad.optim, cls)(a.parameters(), **kw)
    ob = getattr(nbgrad.optim, cls)(b.parameters(), **kw)
    for step in range(10):
        for m, o in ((a, oa), (b, ob)):
            x, y = batch(step)
            o.zero_grad()
            loss_of(nbgrad, m, x, y).backward()
            o.step()
    # b: save model+optimizer to disk, rebuild both from scratch, reload, continue
    nbgrad.save({"model": b.state_dict(), "optim": ob.state_dict()}, tmp_path / "ckpt.npz")
    _, b2 = make_pair(3)
    ob2 = getattr(nbgrad.optim, cls)(b2.parameters(), **kw)
    ck = nbgrad.load(tmp_path / "ckpt.npz")
    b2.load_state_dict(ck["model"])
    ob2.load_state_dict(ck["optim"])
    for step in range(10, 20):
        for m, o in ((a, oa), (b2, ob2)):
            x, y = batch(step)
            o.zero_grad()
            loss_of(nbgrad, m, x, y).backward()
            o.step()
    for pa, pb in zip(a.parameters(), b2.parameters()):
        np.testing.assert_array_equal(npy(pa), npy(pb))


def test_load_state_dict_checks_groups():
    _, ng = make_pair()
    o1 = nbgrad.optim.SGD(ng.parameters(), lr=0.1)
    o2 = nbgrad.optim.SGD([{"params": ng[0].parameters()}, {"params": ng[2].parameters()}],
                          lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        o1.load_state_dict(o2.state_dict())
    o3 = nbgrad.optim.SGD(ng[0].parameters(), lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        o3.load_state_dict(o1.state_dict())


def test_bad_arguments_like_torch():
    p = [nbgrad.nn.Parameter(nbgrad.zeros(2))]
    for cls, kw, msg in (("SGD", dict(lr=-1), "Invalid learning rate"),
                         ("SGD", dict(lr=0.1, nesterov=True), "Nesterov momentum requires"),
                         ("Adam", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0"),
                         ("RMSprop", dict(alpha=-1), "Invalid alpha value")):
        with pytest.raises(ValueError, match=msg):
            getattr(nbgrad.optim, cls)(p, **kw)
    with pytest.raises(ValueError, match="empty parameter list"):
        nbgrad.optim.SGD([], lr=0.1)
    with pytest.raises(TypeError):
        nbgrad.optim.SGD(nbgrad.zeros(2), lr=0.1)


def test_closure_is_evaluated_with_grad():
    _, ng = make_pair()
    opt = nbgrad.optim.SGD(ng.parameters(), lr=0.1)
    x, y = batch(0)

    def closure():
        opt.zero_grad()
        loss = loss_of(nbgrad, ng, x, y)
        loss.backward()
        return loss

    before = npy(ng[0].weight).copy()
    loss = opt.step(closure)
    assert loss.grad_fn is not None
    assert not np.array_equal(before, npy(ng[0].weight))


@pytest.mark.parametrize("make", [
    lambda s, o: s.StepLR(o, step_size=3, gamma=0.5),
    lambda s, o: s.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    lambda s, o: s.ExponentialLR(o, gamma=0.9),
    lambda s, o: s.LambdaLR(o, lambda e: 1.0 / (1 + e)),
    lambda s, o: s.CosineAnnealingLR(o, T_max=7),
    lambda s, o: s.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
], ids=["step", "multistep", "exponential", "lambda", "cosine", "cosine_eta_min"])
def test_lr_scheduler_matches_torch(make):
    pt = [torch.nn.Parameter(torch.zeros(2))]
    pn = [nbgrad.nn.Parameter(nbgrad.zeros(2))]
    ot = torch.optim.SGD([{"params": pt}], lr=0.2)
    on = nbgrad.optim.SGD([{"params": pn}], lr=0.2)
    st, sn = make(torch.optim.lr_scheduler, ot), make(nbgrad.optim.lr_scheduler, on)
    for epoch in range(25):
        assert sn.get_last_lr() == st.get_last_lr(), epoch  # same floats, bit for bit
        assert on.param_groups[0]["lr"] == ot.param_groups[0]["lr"]
        ot.step()
        on.step()
        st.step()
        sn.step()
    state = sn.state_dict()
    assert state["last_epoch"] == st.state_dict()["last_epoch"] == 25
    assert "optimizer" not in state


# ----------------------------------------------------------------------------- LBFGS
@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=0.5, max_iter=7, history_size=3),
    dict(line_search_fn="strong_wolfe"),
    dict(line_search_fn="strong_wolfe", history_size=4, max_iter=10, tolerance_change=1e-12),
    dict(line_search_fn="strong_wolfe", max_eval=6),
])
def test_lbfgs_step_for_step(kw):
    th, ng = make_pair(1)
    ot = torch.optim.LBFGS(th.parameters(), **kw)
    on = nbgrad.optim.LBFGS(ng.parameters(), **kw)
    x, y = batch(0)
    calls = {torch: 0, nbgrad: 0}

    def closure_of(lib, model, opt):
        def closure():
            calls[lib] += 1
            opt.zero_grad()
            loss = loss_of(lib, model, x, y)
            loss.backward()
            return loss
        return closure

    for step in range(3):
        lt = ot.step(closure_of(torch, th, ot))
        ln = on.step(closure_of(nbgrad, ng, on))
        np.testing.assert_allclose(ln.item(), lt.item(), rtol=1e-9, atol=1e-12)
        for (k, pt), pn in zip(th.named_parameters(), ng.parameters()):
            np.testing.assert_allclose(npy(pn), pt.detach().numpy(), rtol=1e-7, atol=1e-9,
                                       err_msg=f"step {step} {k}")
        assert calls[nbgrad] == calls[torch]
    st = ot.state[next(iter(th.parameters()))]
    sn = on.state[next(iter(ng.parameters()))]
    assert sorted(st) == sorted(sn)
    assert (sn["func_evals"], sn["n_iter"]) == (st["func_evals"], st["n_iter"])
    assert len(sn["old_dirs"]) == len(st["old_dirs"])
    np.testing.assert_allclose(float(sn["H_diag"]), float(st["H_diag"]), rtol=1e-6)
    # the state dict's structure: keys in torch's order, 0-d tensors where torch keeps tensors
    # (t on a first step, H_diag, ro, al), Python numbers where torch keeps numbers
    assert _structure(on.state_dict()["state"][0]) == _structure(ot.state_dict()["state"][0])


def _structure(v):
    if isinstance(v, dict):
        return [(k, _structure(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [_structure(x) for x in v]
    if type(v).__name__ == "Tensor":
        return ("Tensor", tuple(v.shape), str(v.dtype).split(".")[-1])
    return type(v).__name__


@pytest.mark.parametrize("steps, max_iter", [(1, 1), (1, 3), (3, 3)])
def test_lbfgs_state_keeps_torch_types(steps, max_iter):
    """A first step from a steep start (t = lr / |g|_1, a 0-d tensor in torch), then more."""
    states = []
    for lib in (torch, nbgrad):
        p = lib.nn.Parameter(lib.tensor([1.0, 2.0, -3.0]))
        opt = lib.optim.LBFGS([p], max_iter=max_iter)

        def closure():
            opt.zero_grad()
            loss = (p ** 4).sum() + p[0] * p[1]
            loss.backward()
            return loss
        for _ in range(steps):
            opt.step(closure)
        states.append(_structure(opt.state_dict()["state"][0]))
    assert states[1] == states[0]


def test_lbfgs_converges_on_a_quadratic_and_checks_arguments():
    a = nbgrad.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=nbgrad.float64)
    b = nbgrad.tensor([1.0, -1.0], dtype=nbgrad.float64)
    w = nbgrad.zeros(2, dtype=nbgrad.float64, requires_grad=True)
    opt = nbgrad.optim.LBFGS([w], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = 0.5 * (w @ (a @ w)) - b @ w
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(npy(w), np.linalg.solve(npy(a), npy(b)), rtol=1e-6)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        nbgrad.optim.LBFGS([{"params": [w]}, {"params": [nbgrad.zeros(1, requires_grad=True)]}])
    with nbgrad.no_grad():
        w.zero_()
    opt = nbgrad.optim.LBFGS([w], line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)


# ----------------------------------------------------------------------------- more schedulers
SCHEDULERS = [
    ("constant", "SGD", lambda s, o: s.ConstantLR(o, factor=0.5, total_iters=4)),
    ("linear", "SGD", lambda s, o: s.LinearLR(o, start_factor=0.1, total_iters=6)),
    ("linear_down", "SGD", lambda s, o: s.LinearLR(o, 1.0, 0.2, total_iters=8)),
    ("polynomial", "SGD", lambda s, o: s.PolynomialLR(o, total_iters=10, power=2.0)),
    ("multiplicative", "SGD", lambda s, o: s.MultiplicativeLR(o, lambda e: 0.95)),
    ("warm_restarts", "SGD", lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=4)),
    ("warm_restarts_mult", "SGD", lambda s, o: s.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.01)),
    ("cyclic", "SGDm", lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=4)),
    ("cyclic_tri2", "SGDm", lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                    step_size_down=5, mode="triangular2")),
    ("cyclic_exp_adam", "Adam", lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                        mode="exp_range", gamma=0.9)),
    ("onecycle", "SGDm", lambda s, o: s.OneCycleLR(o, max_lr=0.5, total_steps=30)),
    ("onecycle_linear_adam", "Adam", lambda s, o: s.OneCycleLR(
        o, max_lr=[0.5], epochs=3, steps_per_epoch=10, anneal_strategy="linear",
        three_phase=True, pct_start=0.25)),
    ("sequential", "SGD", lambda s, o: s.SequentialLR(
        o, [s.LinearLR(o, start_factor=0.1, total_iters=5), s.CosineAnnealingLR(o, T_max=10)],
        milestones=[5])),
    ("sequential3", "SGD", lambda s, o: s.SequentialLR(
        o, [s.ConstantLR(o, factor=0.5, total_iters=3), s.ExponentialLR(o, gamma=0.9),
            s.StepLR(o, 4)], milestones=[4, 12])),
    ("chained", "SGD", lambda s, o: s.ChainedScheduler(
        [s.LinearLR(o, start_factor=0.2, total_iters=4), s.ExponentialLR(o, gamma=0.9)])),
]


def _opt_pair(kind):
    pt = [torch.nn.Parameter(torch.zeros(2))]
    pn = [nbgrad.nn.Parameter(nbgrad.zeros(2))]
    if kind == "Adam":
        return torch.optim.Adam(pt, lr=0.2), nbgrad.optim.Adam(pn, lr=0.2)
    kw = dict(lr=0.2, momentum=0.9) if kind == "SGDm" else dict(lr=0.2)
    return torch.optim.SGD(pt, **kw), nbgrad.optim.SGD(pn, **kw)


@pytest.mark.parametrize("name,kind,make", SCHEDULERS, ids=[s[0] for s in SCHEDULERS])
def test_more_schedulers_match_torch(name, kind, make):
    ot, on = _opt_pair(kind)
    st, sn = make(torch.optim.lr_scheduler, ot), make(nbgrad.optim.lr_scheduler, on)
    for step in range(30 if "onecycle" in name else 25):
        assert sn.get_last_lr() == st.get_last_lr(), step  # bit for bit
        gt, gn = ot.param_groups[0], on.param_groups[0]
        assert gn["lr"] == gt["lr"], step
        for key in ("momentum", "betas"):
            if key in gt:
                assert gn[key] == gt[key], (step, key)
        ot.step()
        on.step()
        st.step()
        sn.step()
    assert sorted(k for k in sn.state_dict() if not k.startswith("_")) == \
        sorted(k for k in st.state_dict() if not k.startswith("_"))


def test_warm_restarts_fractional_epochs_match_torch():
    ot, on = _opt_pair("SGD")
    st = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(ot, T_0=2, T_mult=2)
    sn = nbgrad.optim.lr_scheduler.CosineAnnealingWarmRestarts(on, T_0=2, T_mult=2)
    for i in range(40):
        st.step(i / 4)
        sn.step(i / 4)
        assert sn.get_last_lr() == st.get_last_lr(), i


@pytest.mark.parametrize("kw", [dict(), dict(mode="max", factor=0.5, patience=2, cooldown=1),
                                dict(threshold_mode="abs", threshold=0.1, patience=1,
                                     min_lr=0.05)])
def test_reduce_lr_on_plateau_matches_torch(kw):
    ot, on = _opt_pair("SGD")
    st = torch.optim.lr_scheduler.ReduceLROnPlateau(ot, **kw)
    sn = nbgrad.optim.lr_scheduler.ReduceLROnPlateau(on, **kw)
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9,
               0.9, 0.91, 0.92, 0.5, 0.5, 0.5, 0.5, 0.5] * 2
    for m in metrics:
        st.step(m)
        sn.step(nbgrad.tensor(m, dtype=nbgrad.float64))
        assert sn.get_last_lr() == st.get_last_lr()
        assert (sn.num_bad_epochs, sn.cooldown_counter, sn.best) == \
            (st.num_bad_epochs, st.cooldown_counter, st.best)


def test_scheduler_argument_errors_like_torch():
    S, T = nbgrad.optim.lr_scheduler, torch.optim.lr_scheduler
    cases = [
        lambda s, o: s.ConstantLR(o, factor=2.0),
        lambda s, o: s.LinearLR(o, start_factor=0.0),
        lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=0),
        lambda s, o: s.OneCycleLR(o, max_lr=0.1),
        lambda s, o: s.OneCycleLR(o, max_lr=0.1, total_steps=10, anneal_strategy="exp"),
        lambda s, o: s.ReduceLROnPlateau(o, factor=1.5),
        lambda s, o: s.ReduceLROnPlateau(o, mode="median"),
        lambda s, o: s.SequentialLR(o, [s.StepLR(o, 2), s.StepLR(o, 3)], milestones=[]),
        lambda s, o: s.ChainedScheduler([s.ReduceLROnPlateau(o)]),
        lambda s, o: s.CyclicLR(o, 0.1, 1.0, mode="zigzag"),
    ]
    for case in cases:
        ot, on = _opt_pair("SGD")
        with pytest.raises(Exception) as et:
            case(T, ot)
        with pytest.raises(type(et.value)) as en:
            case(S, on)
        assert str(en.value) == str(et.value)


def test_lambda_scheduler_state_dict_round_trip():
    class Warmup:
        def __init__(self, n):
            self.n = n

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.n)

    ot, on = _opt_pair("SGD")
    st = torch.optim.lr_scheduler.LambdaLR(ot, [Warmup(4)])
    sn = nbgrad.optim.lr_scheduler.LambdaLR(on, [Warmup(4)])
    for _ in range(2):
        st.step()
        sn.step()
    expected = {k: v for k, v in st.state_dict().items() if k != "_get_lr_called_within_step"}
    assert sn.state_dict() == expected
    fresh_t = torch.optim.lr_scheduler.LambdaLR(_opt_pair("SGD")[0], [Warmup(9)])
    fresh_n = nbgrad.optim.lr_scheduler.LambdaLR(_opt_pair("SGD")[1], [Warmup(9)])
    fresh_t.load_state_dict(st.state_dict())
    fresh_n.load_state_dict(sn.state_dict())
    assert fresh_n.lr_lambdas[0].n == fresh_t.lr_lambdas[0].n == 4
    assert fresh_n.last_epoch == fresh_t.last_epoch == 2


@pytest.mark.parametrize("cls,kw", [("Adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
                                    ("AdamW", dict(lr=1e-2)),
                                    ("Adam", dict(lr=3e-3, maximize=True))])
def test_adam_over_concatenated_parameters_equals_one_by_one(cls, kw, monkeypatch):
    """Adam updates many small float32 parameters over one concatenation of them: every value
    (parameters and state) is bit for bit the one the per-parameter loop gives, the versions
    are torch's, and a parameter whose grad is None (or whose step count differs) is handled."""
    from nbgrad.optim import optimizers

    def run(flat_max, flat_each=4096):
        monkeypatch.setattr(optimizers, "_FLAT_MIN", 2)
        monkeypatch.setattr(optimizers, "_FLAT_MAX", flat_max)
        monkeypatch.setattr(optimizers, "_FLAT_EACH", flat_each)
        torch.manual_seed(0)
        th = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.LayerNorm(8),
                                 torch.nn.Linear(8, 3, bias=False))
        ng = nbgrad.nn.Sequential(nbgrad.nn.Linear(6, 8), nbgrad.nn.LayerNorm(8),
                                  nbgrad.nn.Linear(8, 3, bias=False))
        ng.load_state_dict({k: nbgrad.tensor(v.numpy().copy()) for k, v in th.state_dict().items()})
        ot = getattr(torch.optim, cls)(th.parameters(), **kw)
        on = getattr(nbgrad.optim, cls)(ng.parameters(), **kw)
        v0 = [(pt._version, pn._version) for pt, pn in zip(th.parameters(), ng.parameters())]
        for step in range(6):
            rng = np.random.default_rng(step)
            x = rng.standard_normal((5, 6)).astype(np.float32)
            for lib, model, opt in ((torch, th, ot), (nbgrad, ng, on)):
                opt.zero_grad()
                model(lib.tensor(x)).square().sum().backward()
                if step in (2, 3):  # the LayerNorm's bias skips steps: its step count lags
                    model[1].bias.grad = None
                opt.step()
        for pt, pn, (vt, vn) in zip(th.parameters(), ng.parameters(), v0):
            np.testing.assert_allclose(npy(pn), pt.detach().numpy(), rtol=1e-5, atol=1e-6)
            assert pn._version - vn == pt._version - vt
        return [npy(p).copy() for p in ng.parameters()], on.state_dict()["state"]

    loop_params, loop_state = run(0)
    for flat_params, flat_state in (run(1 << 20), run(1 << 20, flat_each=10)):  # all; some
        for a, b in zip(flat_params, loop_params):
            assert np.array_equal(a, b)
        for i in loop_state:
            for key, v in loop_state[i].items():
                assert np.array_equal(npy(flat_state[i][key]), npy(v))


def test_adamw_grad_sharing_its_parameter_memory_matches_torch(monkeypatch):
    """A grad that shares its parameter's memory sees the decay written into the parameter
    first, as in torch (the update over concatenated parameters is not taken then)."""
    from nbgrad.optim import optimizers

    monkeypatch.setattr(optimizers, "_FLAT_MIN", 2)  # (these four would take it)
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    nm = nbgrad.nn.Sequential(nbgrad.nn.Linear(3, 4), nbgrad.nn.Linear(4, 2))
    nm.load_state_dict({k: nbgrad.tensor(v.numpy().copy()) for k, v in tm.state_dict().items()})
    for lib, model in ((torch, tm), (nbgrad, nm)):
        opt = lib.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.5)
        for _ in range(3):
            opt.zero_grad()
            model(lib.ones(2, 3)).sum().backward()
            model[0].weight.grad = model[0].weight.detach()
            opt.step()
    for pt, pn in zip(tm.parameters(), nm.parameters()):
        np.testing.assert_allclose(npy(pn), pt.detach().numpy(), rtol=1e-6, atol=0)
