"""Crashes and wrong exception types of issue 21, each against torch: double backward through
attention (torch's flash kernel refuses it, its math path computes it), through
multi_margin_loss (torch refuses), and linalg.det's gradient at singular matrices."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nbgrad


def _outcome(lib, f):
    """('ok', values) or (exception type name, message) of f(lib)."""
    try:
        return "ok", [np.asarray(v.detach().numpy()) for v in f(lib)]
    except Exception as e:  # noqa: BLE001 (the type itself is compared)
        return type(e).__name__, str(e)


def _same(f, rtol=1e-6, atol=1e-9):
    want, got = _outcome(torch, f), _outcome(nbgrad, f)
    assert got[0] == want[0], (got, want)
    if want[0] != "ok":
        assert got[1] == want[1]
        return
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _penalty(lib, out, inputs):
    """A gradient penalty: the second derivative of out.sum() through |d out / d inputs|^2."""
    gs = lib.autograd.grad(out.pow(2).sum(), inputs, create_graph=True)
    return lib.autograd.grad(sum((g * g).sum() for g in gs), inputs)


def _qkv(lib, shape):
    rng = np.random.default_rng(0)
    return [lib.tensor(rng.standard_normal(shape), requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("mask", [None, "bool", "float", "causal"])
def test_sdpa_double_backward_math_path(mask):
    """3-D inputs: torch's math path, whose double backward exists (nbgrad crashed with
    "max() got an unexpected keyword argument 'axis'")."""
    def f(lib):
        q, k, v = _qkv(lib, (2, 3, 4))
        kw = {}
        if mask == "bool":
            kw["attn_mask"] = lib.tensor([[True, False, True]] * 3)
        elif mask == "float":
            kw["attn_mask"] = lib.tensor(np.linspace(-1, 1, 9).reshape(3, 3))
        elif mask == "causal":
            kw["is_causal"] = True
        out = lib.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
        return _penalty(lib, out, (q, k, v))
    _same(f)


def test_sdpa_double_backward_flash_path_refuses_as_torch():
    """4-D inputs run torch's flash kernel: the first gradient (create_graph) works, the second
    raises torch's RuntimeError; nbgrad raised a TypeError from inside its formula."""
    def f(lib):
        q, k, v = _qkv(lib, (1, 2, 3, 4))
        out = lib.nn.functional.scaled_dot_product_attention(q, k, v)
        return _penalty(lib, out, (q, k, v))
    _same(f)


@pytest.mark.parametrize("layer", ["mha", "encoder"])
def test_attention_layers_under_a_gradient_penalty(layer):
    def f(lib):
        lib.manual_seed(0)
        m = (lib.nn.MultiheadAttention(4, 2, batch_first=True) if layer == "mha" else
             lib.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True))
        x = lib.randn(2, 3, 4, requires_grad=True)
        out = m(x, x, x, need_weights=False)[0] if layer == "mha" else m(x)
        return _penalty(lib, out, (x,))
    _same(f)


def test_multi_margin_double_backward_refuses_as_torch():
    def f(lib):
        x = lib.tensor(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
        loss = lib.nn.functional.multi_margin_loss(x, lib.tensor([0, 2, 1]))
        g, = lib.autograd.grad(loss, x, create_graph=True)
        assert g.grad_fn.name().endswith("NotImplemented")
        return lib.autograd.grad(g.sum(), x)
    _same(f)


SINGULAR = [[[1., 2.], [2., 4.]], [[1., 2.], [3., 4.]], [[0., 0.], [0., 0.]], [[0., 1.], [0., 0.]]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_det_backward_at_singular_matrices(dtype):
    """numpy's LinAlgError reached the user; torch's first gradient is 0 where det == 0 (its LU
    solve has a zero right side), the cofactors elsewhere."""
    def f(lib):
        a = lib.tensor(SINGULAR, dtype=getattr(lib, dtype), requires_grad=True)
        lib.linalg.det(a).sum().backward()
        b = lib.tensor(SINGULAR[0], dtype=getattr(lib, dtype), requires_grad=True)
        lib.linalg.det(b).backward()
        return a.grad, b.grad
    _same(f)


def test_det_create_graph_at_singular_matrices():
    """Recorded, torch takes a singular matrix's cofactors from its SVD: right values, and a
    second derivative that stays finite where the rank is n - 1."""
    def f(lib):
        a = lib.tensor(SINGULAR, dtype=lib.float64, requires_grad=True)
        g, = lib.autograd.grad(lib.linalg.det(a).sum(), a, create_graph=True)
        g2, = lib.autograd.grad(g[[0, 1, 3]].sum(), a)
        return g, g2
    _same(f, rtol=1e-9, atol=1e-12)


DOUBLE = {  # f(F, *inputs), input shapes: double backward nbgrad refused ("not supported yet")
    "conv_transpose2d": (lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=2),
                         [(1, 2, 4, 4), (2, 3, 3, 3), (3,)]),
    "conv_transpose2d_all": (lambda F, x, w, b: F.conv_transpose2d(
        x, w, b, (2, 3), (2, 0), (1, 2), 2, (2, 1)), [(2, 4, 4, 5), (4, 2, 3, 3), (4,)]),
    "conv_transpose1d": (lambda F, x, w: F.conv_transpose1d(x, w, None, 3, 1, 2),
                         [(2, 2, 5), (2, 3, 3)]),
    "bilinear": (lambda F, x, y, w, b: F.bilinear(x, y, w, b), [(2, 3), (2, 4), (5, 3, 4), (5,)]),
}


@pytest.mark.parametrize("name", sorted(DOUBLE))
def test_double_backward_values(name):
    f, shapes = DOUBLE[name]

    def run(lib):
        rng = np.random.default_rng(0)
        ins = [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
        out = f(lib.nn.functional, *ins)
        return _penalty(lib, out, ins)
    _same(run, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", sorted(DOUBLE))
def test_double_backward_gradgradcheck(name):
    f, shapes = DOUBLE[name]
    rng = np.random.default_rng(1)
    ins = [nbgrad.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    assert nbgrad.autograd.gradgradcheck(lambda *a: f(nbgrad.nn.functional, *a), ins)
