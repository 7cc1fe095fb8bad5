"""The hand-written numpy conv / max-pool of the benchmark baseline (benchmarks/numpy_kernels.py)
against torch: forward values, gradients and max-pool indices, float64, ties and overlapping
windows included -- so the numpy column of bench_train.py computes what torch computes."""

import importlib.util
import pathlib

import numpy as np
import pytest
import torch

_spec = importlib.util.spec_from_file_location(
    "numpy_kernels",
    pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "numpy_kernels.py")
K = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(K)

CONV = [dict(), dict(stride=2, padding=1), dict(dilation=2, padding=2),
        dict(groups=2, padding=1), dict(stride=(1, 2), padding=(1, 0))]


@pytest.mark.parametrize("kw", CONV, ids=[str(k) for k in CONV])
def test_conv2d_kernels_match_torch(kw):
    rng = np.random.default_rng(0)
    groups = kw.get("groups", 1)
    x = rng.standard_normal((2, 4, 7, 6))
    w = rng.standard_normal((6, 4 // groups, 3, 2))
    b = rng.standard_normal(6)
    y, ctx = K.conv2d_forward(x, w, b, **kw)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = torch.nn.functional.conv2d(xt, wt, bt, **kw)
    gy = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(gy))
    gx, gw, gb = K.conv2d_backward(gy, ctx)
    for a, t in ((y, yt), (gx, xt.grad), (gw, wt.grad), (gb, bt.grad)):
        np.testing.assert_allclose(a, t.detach().numpy(), rtol=1e-10, atol=1e-10)
    assert y.flags.c_contiguous and gx.flags.c_contiguous


POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=2, stride=1, dilation=2),
        dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1))]


@pytest.mark.parametrize("kw", POOL, ids=[str(k) for k in POOL])
def test_max_pool_kernels_match_torch_with_ties(kw):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 8, 7))
    x[0, 0, :4, :4] = 0.0  # ties: the first maximum in raster order takes the gradient
    x[1, 2] = np.round(x[1, 2])
    y, ctx = K.max_pool2d_forward(x, kw["kernel_size"], kw.get("stride"), kw.get("padding", 0),
                                  kw.get("dilation", 1), kw.get("ceil_mode", False))
    xt = torch.tensor(x, requires_grad=True)
    yt, it = torch.nn.functional.max_pool2d(xt, return_indices=True, **kw)
    gy = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(gy))
    np.testing.assert_array_equal(y, yt.detach().numpy())
    np.testing.assert_array_equal(K.max_pool2d_indices(ctx), it.numpy())
    np.testing.assert_allclose(K.max_pool2d_backward(gy, ctx), xt.grad.numpy(), rtol=1e-12)
