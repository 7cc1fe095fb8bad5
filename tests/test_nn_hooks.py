"""Module hooks against torch: global forward (pre-)hooks, full backward (pre-)hooks, the order
they run in, what they receive, and load_state_dict(assign=True)."""

import numpy as np
import pytest
import torch

import nbgrad


def _models():
    torch.manual_seed(0)
    th = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    ng = nbgrad.nn.Sequential(nbgrad.nn.Linear(3, 4), nbgrad.nn.Tanh(),
                              nbgrad.nn.Linear(4, 2)).double()
    ng.load_state_dict({k: nbgrad.tensor(v.numpy().copy()) for k, v in th.state_dict().items()})
    return th, ng


X = np.random.default_rng(0).standard_normal((5, 3))


def _record(lib, model, x_requires_grad=True, modify=False):
    """Run forward and backward with every kind of hook; return the event log."""
    mm = lib.nn.modules.module
    log = []

    def pre(m, args):
        log.append(("gpre", type(m).__name__, tuple(args[0].shape)))

    def fwd(m, args, out):
        log.append(("gfwd", type(m).__name__, tuple(out.shape)))

    def bw(m, gi, go):
        log.append(("bw", type(m).__name__, [None if g is None else np.round(g.numpy(), 10)
                                              .tolist() for g in gi],
                    [np.round(g.numpy(), 10).tolist() for g in go]))
        if modify and gi[0] is not None:
            return (gi[0] * 2,)

    def bw_pre(m, go):
        log.append(("bwpre", type(m).__name__))

    handles = [mm.register_module_forward_pre_hook(pre), mm.register_module_forward_hook(fwd)]
    for sub in (model[0], model[2]):
        handles.append(sub.register_full_backward_hook(bw))
        handles.append(sub.register_full_backward_pre_hook(bw_pre))
    handles.append(model[0].register_forward_hook(
        lambda m, a, o: log.append(("local_fwd", type(m).__name__))))
    x = lib.tensor(X.copy(), requires_grad=x_requires_grad)
    out = model(x)
    names = []
    fn = out.grad_fn
    while fn is not None:
        names.append(type(fn).__name__)
        nxt = [n for n, _ in fn.next_functions if n is not None
               and type(n).__name__ != "AccumulateGrad"]
        fn = nxt[0] if nxt else None
    out.sum().backward()
    for h in handles:
        h.remove()
    model(x)  # no hook left
    return log, names, None if x.grad is None else x.grad.numpy()


@pytest.mark.parametrize("x_requires_grad,modify", [(True, False), (True, True), (False, False)])
@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_hooks_like_torch(x_requires_grad, modify):
    th, ng = _models()
    lt, nt, gt = _record(torch, th, x_requires_grad, modify)
    ln, nn_, gn = _record(nbgrad, ng, x_requires_grad, modify)
    assert ln == lt
    assert nn_ == nt
    if gt is None:
        assert gn is None
    else:
        np.testing.assert_allclose(gn, gt, rtol=1e-12)


def test_no_grad_call_skips_backward_hooks_and_unused_globals_cost_nothing():
    m = nbgrad.nn.Linear(3, 2)
    m.register_full_backward_hook(lambda *a: None)
    with nbgrad.no_grad():
        out = m(nbgrad.randn(2, 3))
    assert out.grad_fn is None
    mm = nbgrad.nn.modules.module
    assert not (mm._global_forward_hooks or mm._global_forward_pre_hooks)
    assert mm._GLOBAL_HOOKS_ON is False
    with mm.register_module_forward_hook(lambda *a: None):
        assert mm._GLOBAL_HOOKS_ON is True
    assert mm._GLOBAL_HOOKS_ON is False


def test_backward_hook_warns_without_input_grads_like_torch():
    m = nbgrad.nn.Linear(3, 2)
    m.register_full_backward_hook(lambda *a: None)
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are "
                      "computed with respect to module outputs"):
        m(nbgrad.randn(2, 3)).sum().backward()


def test_load_state_dict_assign_like_torch():
    for lib in (torch, nbgrad):
        m = lib.nn.Linear(3, 2)
        m.weight.requires_grad_(False)
        w = lib.ones(2, 3)
        b = lib.nn.Parameter(lib.zeros(2))
        res = m.load_state_dict({"weight": w, "bias": b}, assign=True)
        assert not res.missing_keys and not res.unexpected_keys
        assert isinstance(m.weight, lib.nn.Parameter) and m.weight.requires_grad is False
        assert m.bias is b and m.bias.requires_grad
        assert m.weight.data_ptr() == w.data_ptr()
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        nbgrad.nn.Linear(3, 2).load_state_dict({"weight": nbgrad.ones(3, 3),
                                                "bias": nbgrad.zeros(2)}, assign=True)


def test_apply_requires_grad_and_casts():
    m = nbgrad.nn.Sequential(nbgrad.nn.Linear(3, 2), nbgrad.nn.BatchNorm1d(2))
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "BatchNorm1d", "Sequential"]
    assert m.requires_grad_(False) is m and not any(p.requires_grad for p in m.parameters())
    assert m.double()[0].weight.dtype == nbgrad.float64
    assert m[1].num_batches_tracked.dtype == nbgrad.int64  # integer buffers keep their dtype
    assert m.float()[0].weight.dtype == nbgrad.float32
    assert m.half()[0].weight.dtype == nbgrad.float16
