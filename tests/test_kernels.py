"""conv2d and max_pool2d against PyTorch in float64: values, grads of input, weight and bias,
indices; every layout the array kernels choose between (channels-last and channels-first im2col;
tiled and general pooling), with stride, padding, dilation, groups, non-square shapes, crops,
ties, NaN and infinities."""

import numpy as np
import pytest
import torch

import nbgrad

F, TF = nbgrad.nn.functional, torch.nn.functional


def both(a, requires_grad=True):
    t = torch.from_numpy(np.array(a)).requires_grad_(requires_grad)
    n = nbgrad.tensor(np.array(a))
    if requires_grad:
        n.requires_grad_(True)
    return n, t


def same(n, t, rtol=1e-10, atol=1e-12):
    assert n is not None and t is not None
    np.testing.assert_allclose(np.asarray(n.detach().numpy()), t.detach().numpy(), rtol=rtol,
                               atol=atol)


def backprop(yn, yt, seed=1):
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape))
    yt.backward(torch.from_numpy(g))
    yn.backward(nbgrad.tensor(g))


# x shape, weight shape, kwargs. Channels-first im2col is taken where Wo > kw*C (few channels,
# wide images), channels-last otherwise; both are covered with each kind of geometry.
CONV_CASES = [
    ((3, 1, 8, 8), (4, 1, 3, 3), dict(padding=1)),                      # channels-first
    ((2, 1, 9, 11), (3, 1, 3, 2), dict(stride=(1, 1), padding=(2, 0))),   # cf, non-square
    ((2, 2, 12, 13), (3, 2, 3, 3), dict(stride=(2, 1), padding=1)),      # cf, strided rows
    ((2, 1, 10, 12), (2, 1, 3, 3), dict(dilation=(2, 1), padding=(2, 1))),  # cf, dilated
    ((2, 2, 7, 16), (4, 1, 3, 3), dict(groups=2, padding=1)),            # cf, groups
    ((2, 4, 6, 16), (6, 2, 3, 3), dict(groups=2, padding=(1, 2))),       # cf, groups of 2
    ((2, 1, 6, 7), (2, 1, 1, 1), {}),                                    # cf, 1x1
    ((2, 16, 4, 4), (8, 16, 3, 3), dict(padding=1)),                     # channels-last
    ((11, 16, 4, 4), (8, 16, 3, 3), dict(padding=1)),    # cl, input grad in blocks of 8 images
    ((3, 16, 12, 12), (4, 16, 3, 3), dict(padding=1)),   # cl, blocks of one image
    ((2, 4, 5, 7), (3, 4, 2, 3), dict(stride=(2, 3), padding=(1, 2))),   # cl, strided
    ((2, 16, 9, 8), (3, 16, 3, 2), dict(dilation=(2, 3), padding=(2, 3))),  # cl, dilated
    ((2, 6, 5, 5), (6, 2, 3, 3), dict(groups=3, padding=1)),             # cl, groups
    ((2, 6, 5, 5), (9, 2, 3, 2), dict(groups=3, stride=2)),              # cl, groups, strided
    ((2, 8, 5, 6), (4, 8, 3, 3), dict(padding=2)),                       # cl, padding > kernel-1
    ((1, 3, 3, 3), (2, 3, 3, 3), {}),                                    # output 1x1
]


@pytest.mark.parametrize("xs,ws,kw", CONV_CASES, ids=[str(i) for i in range(len(CONV_CASES))])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_matches_torch(xs, ws, kw, bias):
    rng = np.random.default_rng(0)
    xn, xt = both(rng.standard_normal(xs))
    wn, wt = both(rng.standard_normal(ws))
    bn, bt = both(rng.standard_normal(ws[0])) if bias else (None, None)
    yn, yt = F.conv2d(xn, wn, bn, **kw), TF.conv2d(xt, wt, bt, **kw)
    same(yn, yt)
    backprop(yn, yt)
    same(xn.grad, xt.grad)
    same(wn.grad, wt.grad)
    if bias:
        same(bn.grad, bt.grad)


@pytest.mark.parametrize("xs,ws,kw", CONV_CASES[:1] + CONV_CASES[7:8], ids=["cf", "cl"])
def test_conv2d_float32_and_frozen_input(xs, ws, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    xn, xt = both(x, requires_grad=False)  # first layer: no input gradient is computed
    wn, wt = both(rng.standard_normal(ws).astype(np.float32))
    bn, bt = both(rng.standard_normal(ws[0]).astype(np.float32))
    yn, yt = F.conv2d(xn, wn, bn, **kw), TF.conv2d(xt, wt, bt, **kw)
    assert yn.dtype == nbgrad.float32 and yn.is_contiguous()
    same(yn, yt, rtol=1e-5, atol=1e-5)
    backprop(yn, yt)
    assert xn.grad is None
    same(wn.grad, wt.grad, rtol=1e-4, atol=1e-4)
    same(bn.grad, bt.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws", [((0, 1, 8, 8), (4, 1, 3, 3)), ((0, 16, 4, 4), (8, 16, 3, 3))],
                         ids=["cf", "cl"])
def test_conv2d_empty_batch(xs, ws):
    xn, xt = both(np.zeros(xs))
    wn, wt = both(np.ones(ws))
    yn, yt = F.conv2d(xn, wn, padding=1), TF.conv2d(xt, wt, padding=1)
    assert tuple(yn.shape) == tuple(yt.shape)
    yt.sum().backward()
    yn.sum().backward()
    same(xn.grad, xt.grad)
    same(wn.grad, wt.grad)


def test_conv2d_noncontiguous_input():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((2, 8, 1, 9))
    for pad in (0, 1):
        xn, xt = both(base)
        xn2, xt2 = xn.transpose(1, 2), xt.transpose(1, 2)  # (2, 1, 8, 9), not contiguous
        wn, wt = both(rng.standard_normal((3, 1, 3, 3)))
        yn, yt = F.conv2d(xn2, wn, padding=pad), TF.conv2d(xt2, wt, padding=pad)
        same(yn, yt)
        backprop(yn, yt)
        same(xn.grad, xt.grad)
        same(wn.grad, wt.grad)


@pytest.mark.parametrize("last", [True, False])
@pytest.mark.parametrize("geo", [(3, 3, 1, 1, 1, 1), (2, 3, 2, 1, 1, 2), (3, 2, 1, 2, 2, 1)])
def test_conv_window_view_equals_as_strided(monkeypatch, last, geo):
    # the fast window view (ndarray over the buffer) is as_strided's view, value for value and
    # stride for stride; the general path (as_strided) also on a non-contiguous array
    from nbgrad.ops import kernels
    kh, kw, sh, sw, dh, dw = geo
    a = np.random.default_rng(1).standard_normal((2, 9, 10, 3) if last else (2, 3, 9, 10))
    hh, ww = a.shape[1:3] if last else a.shape[2:]
    g = (kh, kw, sh, sw, dh, dw, (hh - dh * (kh - 1) - 1) // sh + 1,
         (ww - dw * (kw - 1) - 1) // sw + 1)
    monkeypatch.setattr(kernels, "_FAST_VIEW", True)
    fast = kernels._windows(a, last, g)
    monkeypatch.setattr(kernels, "_FAST_VIEW", False)
    slow = kernels._windows(a, last, g)
    assert fast.shape == slow.shape and fast.strides == slow.strides
    assert np.array_equal(fast, slow)
    h, w = g[6:]
    i, j = h - 1, w - 1  # the last window, read by hand
    want = (a[1, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw, :]
            if last else a[1, :, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                           j * sw:j * sw + dw * (kw - 1) + 1:dw])
    got = fast[1, i, j] if last else fast[:, :, :, 1, i, j]
    assert np.array_equal(got, want)
    monkeypatch.setattr(kernels, "_FAST_VIEW", True)
    t = a[:, ::-1] if last else a[:, :, ::-1]  # not C-contiguous: as_strided
    assert np.array_equal(kernels._windows(t, last, g), kernels._windows(t.copy(), last, g))


POOL_CASES = [
    ((2, 3, 8, 8), dict(kernel_size=2)),                         # tiled
    ((2, 3, 7, 9), dict(kernel_size=2)),                         # tiled, last row/col cropped
    ((2, 2, 9, 8), dict(kernel_size=3)),                         # tiled 3x3
    ((2, 2, 6, 9), dict(kernel_size=(2, 3))),                    # tiled, non-square
    ((2, 2, 6, 8), dict(kernel_size=(3, 2), stride=(3, 2))),     # tiled, explicit stride
    ((1, 2, 5, 5), dict(kernel_size=1)),                         # 1x1
    ((2, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1)),    # overlapping, padded
    ((1, 2, 8, 8), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((1, 2, 7, 8), dict(kernel_size=2, ceil_mode=True)),         # kernel == stride, partial windows
    ((1, 2, 6, 6), dict(kernel_size=2, stride=1, dilation=2)),
    ((2, 2, 8, 7), dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1))),
    ((2, 2, 6, 6), dict(kernel_size=2, padding=1)),              # kernel == stride, padded
]


def _pool_both(x, kw):
    xn, xt = both(x)
    (yn, in_), (yt, it) = (F.max_pool2d(xn, return_indices=True, **kw),
                           TF.max_pool2d(xt, return_indices=True, **kw))
    same(yn, yt)
    assert np.array_equal(in_.numpy(), it.numpy())
    backprop(yn, yt)
    same(xn.grad, xt.grad)  # overlapping windows add in another order
    return xn, xt


@pytest.mark.parametrize("xs,kw", POOL_CASES, ids=[str(i) for i in range(len(POOL_CASES))])
def test_max_pool2d_matches_torch(xs, kw):
    _pool_both(np.random.default_rng(0).standard_normal(xs), kw)


@pytest.mark.parametrize("xs,kw", POOL_CASES, ids=[str(i) for i in range(len(POOL_CASES))])
def test_max_pool2d_ties_nan_inf(xs, kw):
    # few distinct values (ties everywhere, as after ReLU), some NaN, +-inf: the chosen maximum
    # is torch's (first maximum in raster order, last NaN), -inf windows never choose padding
    rng = np.random.default_rng(3)
    x = rng.integers(-1, 2, xs).astype(np.float64)
    x[rng.random(xs) < 0.08] = np.nan
    x[rng.random(xs) < 0.08] = np.inf
    x[rng.random(xs) < 0.3] = -np.inf
    _pool_both(x, kw)


def test_max_pool2d_all_neg_inf_window_with_padding():
    x = np.full((1, 1, 4, 4), -np.inf)
    for kw in (dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, padding=1),
               dict(kernel_size=3, stride=2, ceil_mode=True)):
        _pool_both(x, kw)


def test_max_pool2d_nonfinite_upstream_grad_stays_on_maxima():
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4))
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1)):
        xn, xt = both(x)
        yn, yt = F.max_pool2d(xn, **kw), TF.max_pool2d(xt, **kw)
        g = np.ones(tuple(yt.shape))
        g[0, 0, 0, 0], g[0, 1, 0, 0] = np.inf, np.nan
        yt.backward(torch.from_numpy(g))
        yn.backward(nbgrad.tensor(g))
        np.testing.assert_array_equal(xn.grad.numpy(), xt.grad.numpy())


def test_max_pool2d_float32_and_noncontiguous():
    rng = np.random.default_rng(0)
    x = np.maximum(rng.standard_normal((4, 6, 8, 3)), 0).astype(np.float32)  # ReLU'd: ties
    xn, xt = both(x)
    yn, yt = F.max_pool2d(xn.permute(0, 3, 1, 2), 2), TF.max_pool2d(xt.permute(0, 3, 1, 2), 2)
    assert yn.dtype == nbgrad.float32 and yn.is_contiguous()
    same(yn, yt, 0, 0)
    backprop(yn, yt)
    np.testing.assert_array_equal(xn.grad.numpy(), xt.grad.numpy().astype(np.float32))
