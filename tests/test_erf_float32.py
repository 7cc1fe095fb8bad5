"""The float32 erf kernel behind exact GELU (nbgrad/ops/kernels.py: erf = tanh(x S(x^2))) in
ulps against torch's float32 erf and the exact value (scipy, float64) over a dense grid of
[-8, 8], the denormals, huge values and +-inf/NaN; GELU built on it against torch."""
import warnings

import numpy as np
import pytest
import torch

import nbgrad
from nbgrad.ops import kernels

special = pytest.importorskip("scipy.special")

_EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 1.1754944e-38, 1e6, -1e6,
          1e19, 1e30, -3e38, 3.4028235e38, 3.92, 3.93, 4.0, -3.9]


def _grid():
    tiny = np.logspace(-45, 1, 100001)
    x = np.concatenate([np.linspace(-8, 8, 1000001), tiny, -tiny, _EDGES])
    return x.astype(np.float32)


def _ulps(got, want):
    """|got - want| in ulps of want rounded to float32 (NaN against NaN: 0)."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    assert not (np.isnan(got) ^ np.isnan(want)).any()
    spacing = np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want) / spacing
    err[both_nan | (got == want)] = 0
    return err


@pytest.mark.parametrize("scale", [1.0, 2 ** -0.5])
def test_erf_float32_within_a_few_ulps(scale):
    x = _grid()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning where x^2 overflows
        got = kernels.erf_float32(x, scale)
    assert got.dtype == np.float32 and got.shape == x.shape
    exact = special.erf(x.astype(np.float64) * scale)
    assert _ulps(got, exact).max() <= 4
    if scale == 1.0:
        assert _ulps(got, torch.erf(torch.from_numpy(x)).numpy()).max() <= 4
    # sign, saturation and the special points exactly
    fin = np.isfinite(x)
    assert (np.signbit(got[fin & (x != 0)]) == np.signbit(x[fin & (x != 0)])).all()
    assert got[x == np.inf].tolist() == [1.0] and got[x == -np.inf].tolist() == [-1.0]
    assert np.isnan(got[np.isnan(x)]).all()
    # erf rounds to +-1 from |x| = 3.92; numpy's float32 tanh reaches 1 from 9.7 (one step
    # under it before), x S(x^2) passes 9.7 at |x| = 4.1
    ax = np.abs(x.astype(np.float64)) * scale
    assert (np.abs(got[ax >= 3.92]) >= np.float32(1) - np.float32(2 ** -24)).all()
    assert (got[ax >= 4.1] == np.sign(x[ax >= 4.1])).all()
    zeros = got[x == 0]
    assert (zeros == 0).all() and np.signbit(zeros).sum() == 1  # erf(-0) = -0


def test_gelu_float32_matches_torch():
    x = _grid()
    # (torch's gelu is NaN at +inf and overflows to inf near float32's largest values)
    x = x[(np.abs(x) < 1e30) | np.isnan(x)]
    got = nbgrad.nn.functional.gelu(nbgrad.tensor(x)).numpy()
    want = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, equal_nan=True)
    # away from the cancellation in 1 + erf (x < 0), a few ulps of torch (erf's 4 plus the
    # roundings of 1 + erf, * 0.5 and * x)
    pos = (x > 0) & (x < 1e30)
    assert _ulps(got[pos], want[pos]).max() <= 6


@pytest.mark.parametrize("shape", [(), (1,), (3, 0), (2, 3)])
def test_gelu_float32_shapes_values_and_grads(shape):
    """0-d, empty and small inputs: GELU's value and gradient against torch's."""
    a = np.asarray(np.random.default_rng(1).standard_normal(shape) * 3, dtype=np.float32)
    seen = []
    for lib in (torch, nbgrad):
        x = lib.tensor(a.copy(), requires_grad=True)
        y = lib.nn.functional.gelu(x)
        y.sum().backward()
        seen.append((y.detach().numpy(), x.grad.numpy()))
    for got, want in zip(seen[1], seen[0]):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=4e-6, atol=1e-6)
