"""The entry points GPT's eval forward runs with nothing to record (batched matmul, masked_fill
with a broadcast mask, nn.Linear on 3-d input with a bias): the recorded path's values bit for
bit, and torch's values, layout, `_base`, `_version` and inference flag."""

import contextlib

import numpy as np
import pytest
import torch

import nbgrad

R = np.random.default_rng(3)


def _mode(lib, mode):
    if mode == "no_grad":
        return lib.no_grad()
    if mode == "inference_mode":
        return lib.inference_mode()
    return contextlib.nullcontext()  # grad on, nothing requires grad


def _version(t):
    try:
        return t._version
    except RuntimeError as e:  # an inference tensor's (torch's text)
        return str(e)


def _layout(t):
    return (tuple(t.shape), t.stride(), t.is_contiguous(), t._base is None, _version(t),
            t.requires_grad, t.is_inference(), str(t.dtype).split(".")[-1])


BMM = {
    "q@kT": ((8, 16, 8), (8, 16, 8), "float32", True),
    "w@v": ((8, 16, 16), (8, 16, 8), "float32", False),
    "float64": ((2, 3, 4), (2, 4, 5), "float64", False),
    "int64": ((2, 3, 4), (2, 4, 5), "int64", False),
    "empty batch": ((0, 3, 4), (0, 4, 2), "float32", False),
    "transposed left": ((3, 5, 4), (3, 5, 6), "float32", "left"),
}


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "plain"])
@pytest.mark.parametrize("case", sorted(BMM))
def test_batched_matmul_without_graph_like_recorded_and_torch(case, mode):
    sa, sb, dtype, transposed = BMM[case]
    if dtype == "int64":
        a0, b0 = R.integers(-5, 5, sa), R.integers(-5, 5, sb)
    else:
        a0, b0 = R.standard_normal(sa).astype(dtype), R.standard_normal(sb).astype(dtype)
    if transposed is True:
        b0 = b0.copy()

    def run(lib, grad=False):
        a, b = lib.tensor(a0), lib.tensor(b0)
        if grad:
            a.requires_grad_(True)
        if transposed is True:
            b = b.transpose(-2, -1)
        elif transposed == "left":
            a = a.transpose(-2, -1)
        with _mode(lib, mode if not grad else "plain"):
            return a @ b

    got, want = run(nbgrad), run(torch)
    if case == "empty batch":  # (numpy's strides of an empty product, (0, 0, 0), on main too)
        assert _layout(got)[2:] == _layout(want)[2:] and got.shape == want.shape
    else:
        assert _layout(got) == _layout(want)
    if dtype != "int64":
        rec = run(nbgrad, grad=True)
        assert rec.grad_fn is not None
        np.testing.assert_array_equal(got.numpy(), rec.detach().numpy())  # bit for bit
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_batched_matmul_without_graph_errors_like_torch():
    for sa, sb in [((2, 3, 4), (2, 5, 6)), ((2, 3, 4), (3, 4, 6))]:
        texts = []
        for lib in (torch, nbgrad):
            with lib.no_grad(), pytest.raises(RuntimeError) as e:
                lib.zeros(sa) @ lib.zeros(sb)
            texts.append(str(e.value))
        assert texts[0] == texts[1]


MASKS = {"trailing 2-d": (16, 16), "same": (2, 16, 16), "row": (1, 16), "0-d": (),
         "leading 1": (1, 16, 16)}


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "plain"])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_masked_fill_broadcast_mask_like_torch(mask, mode):
    x0 = R.standard_normal((2, 16, 16)).astype(np.float32)
    m0 = R.random(MASKS[mask]) < 0.5
    res = []
    for lib in (torch, nbgrad):
        with _mode(lib, mode):
            for value in (float("-inf"), 0, 2.5, True):
                out = lib.tensor(x0).masked_fill(lib.tensor(m0), value)
                res.append((_layout(out), out.numpy().tobytes()))
    assert res[:4] == res[4:]


def test_masked_fill_incompatible_mask_like_torch():
    for xs, ms in [((2, 4), (3,)), ((2, 4), (2, 3)), ((4,), (2, 5))]:
        texts = []
        for lib in (torch, nbgrad):
            try:
                lib.zeros(xs).masked_fill(lib.zeros(ms, dtype=lib.bool), 1.0)
                texts.append(None)
            except RuntimeError as e:
                texts.append(str(e))
        assert texts[0] == texts[1]


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "plain"])
@pytest.mark.parametrize("shape", [(8, 16, 32), (2, 3, 4, 32), (5, 32)])
@pytest.mark.parametrize("out_features", [32, 128, 65, 8])
def test_linear_with_bias_without_graph_like_recorded_and_torch(shape, out_features, mode):
    x0 = R.standard_normal(shape).astype(np.float32)
    w0 = R.standard_normal((out_features, 32)).astype(np.float32)
    b0 = R.standard_normal(out_features).astype(np.float32)

    def run(lib, grad=False):
        x = lib.tensor(x0)
        w, b = lib.tensor(w0, requires_grad=grad), lib.tensor(b0)
        with _mode(lib, mode if not grad else "plain"):
            return lib.nn.functional.linear(x, w, b)

    got, want = run(nbgrad), run(torch)
    assert _layout(got) == _layout(want)
    if want._base is not None:  # (none under inference_mode: a view of an inference tensor)
        assert _layout(got._base) == _layout(want._base)
    rec = run(nbgrad, grad=True)
    np.testing.assert_array_equal(got.numpy(), rec.detach().numpy())  # bit for bit
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


VIEWS = {"view": lambda t: t.view(6), "transpose": lambda t: t.transpose(0, 1),
         "select": lambda t: t[0], "slice": lambda t: t[:, 1:], "t": lambda t: t.t(),
         "split": lambda t: t.split(1)[1], "unbind": lambda t: t.unbind(1)[2],
         "view of view": lambda t: t[0].view(3, 1)}


@pytest.mark.parametrize("where", ["inside", "outside", "normal base"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_of_inference_tensors_like_torch(name, where):
    """torch: a view of an inference tensor is no view (no `_base`, `_is_view()` False), made
    inside inference_mode or outside it; a view of a normal tensor made inside one is."""
    x0 = R.standard_normal((2, 3)).astype(np.float32)
    res = []
    for lib in (torch, nbgrad):
        if where == "normal base":
            x = lib.tensor(x0)
        else:
            with lib.inference_mode():
                x = lib.tensor(x0) * 1
        with lib.inference_mode() if where != "outside" else contextlib.nullcontext():
            v = VIEWS[name](x)
            try:
                v.mul_(2)  # written through the shared storage
                err = None
            except RuntimeError as e:  # (outside inference_mode: torch's refusal)
                err = str(e)
        res.append((_layout(v), v._is_view(), err, x.numpy().tobytes(), v.numpy().tobytes()))
    assert res[0] == res[1]


# matmul of two dtypes: the text of the kernel torch dispatches to (dot, addmv for a vector on
# the right, mm for a matrix on the right, bmm for a batch on the right), with and without grad
@pytest.mark.parametrize("mode", ["no_grad", "enable_grad"])
@pytest.mark.parametrize("shapes", [((2, 3, 3), (2, 3, 2)), ((3, 3), (2, 3, 2)),
                                    ((2, 3, 3), (3, 2)), ((3,), (2, 3, 2)), ((2, 3, 3), (3,)),
                                    ((3,), (3,)), ((3, 3), (3,)), ((3,), (3, 2)),
                                    ((1, 2, 3, 3), (2, 3, 2))])
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32"),
                                    ("float32", "int64")])
def test_matmul_dtype_error_texts_like_torch(shapes, dtypes, mode):
    seen = []
    for T in (torch, nbgrad):
        a = T.zeros(*shapes[0], dtype=getattr(T, dtypes[0]))
        b = T.zeros(*shapes[1], dtype=getattr(T, dtypes[1]))
        with getattr(T, mode)():
            with pytest.raises(RuntimeError) as e:
                a @ b
        seen.append(str(e.value))
    assert seen[1] == seen[0]
