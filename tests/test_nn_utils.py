"""nn.utils (clip_grad_*, parameters_to_vector, vector_to_parameters) against torch in float64."""

import math

import numpy as np
import pytest
import torch

import nbgrad


def _pair_of_models(seed=0):
    torch.manual_seed(seed)
    th = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)).double()
    ng = nbgrad.nn.Sequential(nbgrad.nn.Linear(4, 5), nbgrad.nn.Tanh(),
                              nbgrad.nn.Linear(5, 2)).double()
    ng.load_state_dict({k: nbgrad.tensor(v.numpy().copy()) for k, v in th.state_dict().items()})
    x = np.random.default_rng(seed).standard_normal((6, 4)) * 3
    (th(torch.from_numpy(x)) ** 2).sum().backward()
    (ng(nbgrad.tensor(x)) ** 2).sum().backward()
    return th, ng


def _grads_close(th, ng):
    for pt, pn in zip(th.parameters(), ng.parameters()):
        np.testing.assert_allclose(pn.grad.numpy(), pt.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (0.5, 1.0), (0.1, math.inf),
                                                (1e6, 2.0), (2.0, 3.0), (0.3, "inf")])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    th, ng = _pair_of_models()
    tt = torch.nn.utils.clip_grad_norm_(th.parameters(), max_norm, norm_type)
    tn = nbgrad.nn.utils.clip_grad_norm_(ng.parameters(), max_norm, norm_type)
    assert tn.shape == () and tn.dtype == nbgrad.float64
    np.testing.assert_allclose(tn.item(), tt.item(), rtol=1e-12)
    _grads_close(th, ng)


def test_clip_grad_norm_single_tensor_skips_missing_grads_and_bumps_version():
    p = nbgrad.tensor([3.0, 4.0], requires_grad=True)
    q = nbgrad.tensor([1.0], requires_grad=True)  # no grad: skipped
    (p * p).sum().backward()
    v = p.grad._version
    total = nbgrad.nn.utils.clip_grad_norm_([p, q], 1.0)
    assert abs(total.item() - 10.0) < 1e-6
    assert p.grad._version == v + 1 and q.grad is None
    np.testing.assert_allclose(p.grad.numpy(), np.array([6.0, 8.0]) / (10 + 1e-6), rtol=1e-6)
    assert nbgrad.nn.utils.clip_grad_norm_(q, 1.0).item() == 0.0


def test_clip_grad_norm_nonfinite():
    p = nbgrad.tensor([1.0, 2.0], requires_grad=True)
    p.grad = nbgrad.tensor([float("inf"), 1.0])
    tp = torch.tensor([1.0, 2.0], requires_grad=True)
    tp.grad = torch.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError) as et:
        torch.nn.utils.clip_grad_norm_(tp, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as en:
        nbgrad.nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    assert str(en.value) == str(et.value)
    assert math.isinf(nbgrad.nn.utils.clip_grad_norm_(p, 1.0).item())


def test_clip_grad_value_matches_torch():
    th, ng = _pair_of_models(1)
    assert torch.nn.utils.clip_grad_value_(th.parameters(), 0.7) is None
    assert nbgrad.nn.utils.clip_grad_value_(ng.parameters(), 0.7) is None
    _grads_close(th, ng)


def test_get_total_norm_and_clip_grads_with_norm():
    th, ng = _pair_of_models(2)
    gt = [p.grad for p in th.parameters()]
    gn = [p.grad for p in ng.parameters()]
    tt = torch.nn.utils.get_total_norm(gt, 2.0)
    tn = nbgrad.nn.utils.get_total_norm(gn, 2.0)
    np.testing.assert_allclose(tn.item(), tt.item(), rtol=1e-12)
    torch.nn.utils.clip_grads_with_norm_(th.parameters(), 0.2, tt)
    nbgrad.nn.utils.clip_grads_with_norm_(ng.parameters(), 0.2, tn)
    _grads_close(th, ng)


def test_parameters_to_vector_and_back():
    th, ng = _pair_of_models(3)
    vt = torch.nn.utils.parameters_to_vector(th.parameters())
    vn = nbgrad.nn.utils.parameters_to_vector(ng.parameters())
    np.testing.assert_array_equal(vn.detach().numpy(), vt.detach().numpy())
    assert type(vn.grad_fn).__name__ == type(vt.grad_fn).__name__ == "CatBackward0"
    assert [type(n).__name__ for n, _ in vn.grad_fn.next_functions] == \
        [type(n).__name__ for n, _ in vt.grad_fn.next_functions]
    new = np.arange(vt.numel(), dtype=np.float64)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(new.copy()), th.parameters())
    nbgrad.nn.utils.vector_to_parameters(nbgrad.tensor(new.copy()), ng.parameters())
    for pt, pn in zip(th.parameters(), ng.parameters()):
        np.testing.assert_array_equal(pn.detach().numpy(), pt.detach().numpy())
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        nbgrad.nn.utils.vector_to_parameters([1.0], ng.parameters())
    with pytest.raises(RuntimeError, match="vec has 3 elements, the parameters need 37"):
        nbgrad.nn.utils.vector_to_parameters(nbgrad.zeros(3), ng.parameters())


def test_module_paths():
    from nbgrad.nn.utils import clip_grad, convert_parameters  # noqa: F401
    from nbgrad.nn.utils.clip_grad import clip_grad_norm_  # noqa: F401
    from nbgrad.nn.utils.convert_parameters import parameters_to_vector  # noqa: F401


def test_clip_grad_norm_float32_many_grads_matches_torch():
    """float32 grads of several sizes (the norms then come from one concatenation): the total
    norm and the clipped grads agree with torch's to float32 rounding; versions move by one."""
    torch.manual_seed(0)
    shapes = [(65, 32), (16, 32), (32,), (128, 32), (1,), (7, 3, 5)]
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s).astype(np.float32) * rng.uniform(0.1, 10) for s in shapes]
    grads[1][0, 0] = 1e4  # one large entry
    for max_norm in (1.0, 1e9):
        tp = [torch.zeros(s, requires_grad=True) for s in shapes]
        npar = [nbgrad.zeros(s, requires_grad=True) for s in shapes]
        for t, n, g in zip(tp, npar, grads):
            t.grad, n.grad = torch.from_numpy(g.copy()), nbgrad.tensor(g.copy())
        versions = [n.grad._version for n in npar]
        tt = torch.nn.utils.clip_grad_norm_(tp, max_norm)
        tn = nbgrad.nn.utils.clip_grad_norm_(npar, max_norm)
        assert tn.dtype == nbgrad.float32
        np.testing.assert_allclose(tn.item(), tt.item(), rtol=1e-6)
        for t, n, v in zip(tp, npar, versions):
            np.testing.assert_allclose(n.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=0)
            assert n.grad._version == v + 1
    for t, n in zip(tp, npar):
        t.grad[0] = float("nan") if t.dim() == 1 and t.shape[0] == 1 else t.grad[0]
        n.grad = nbgrad.tensor(t.grad.numpy().copy())
    assert math.isnan(torch.nn.utils.clip_grad_norm_(tp, 1.0).item())
    assert math.isnan(nbgrad.nn.utils.clip_grad_norm_(npar, 1.0).item())
