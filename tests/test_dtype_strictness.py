"""Where torch refuses to promote, nbgrad refuses too, with torch's text: the matmul family and the
layers built on it or on the CPU norm kernels (code that runs under nbgrad must run under torch);
integer division by zero; F.pad by nothing is still a copy with its node. Each against torch."""
import numpy as np
import pytest

import nbgrad

torch = pytest.importorskip("torch")


def _outcome(lib, fn):
    lib.manual_seed(0)
    x64 = lib.tensor(np.linspace(-1, 1, 8).reshape(2, 4), dtype=lib.float64)
    xi = lib.ones(2, 4, dtype=lib.int64)
    out = []
    for x in (x64, xi):
        try:
            r = fn(lib, x)
            out.append(("ok", str(r.dtype).split(".")[-1]))
        except Exception as e:  # noqa: BLE001 - the exception is the result
            out.append((type(e).__name__, str(e).split("\n")[0]))
    return out


LAYERS = {
    "Linear": lambda T, x: T.nn.Linear(4, 3)(x),
    "Linear_no_bias": lambda T, x: T.nn.Linear(4, 3, bias=False)(x),
    "LayerNorm": lambda T, x: T.nn.LayerNorm(4)(x),
    "BatchNorm1d": lambda T, x: T.nn.BatchNorm1d(4)(x),
    "GroupNorm": lambda T, x: T.nn.GroupNorm(2, 4)(x),
    "PReLU": lambda T, x: T.nn.PReLU()(x),
    "Bilinear": lambda T, x: T.nn.Bilinear(4, 4, 3)(x, x),
    "MultiheadAttention": lambda T, x: T.nn.MultiheadAttention(4, 2)(x[None], x[None], x[None])[0],
    "mm": lambda T, x: T.mm(x, T.ones(4, 2)),
    "matmul": lambda T, x: x @ T.ones(4, 2),
    "matmul_batched": lambda T, x: x[None] @ T.ones(4, 2),
    "bmm": lambda T, x: T.bmm(x[None], T.ones(1, 4, 2)),
    "mv": lambda T, x: T.mv(x, T.ones(4)),
    "dot": lambda T, x: T.dot(x[0], T.ones(4)),
    "addmm": lambda T, x: T.addmm(T.ones(2), x, T.ones(4, 2)),
    "addmm_self": lambda T, x: T.addmm(T.ones(2), T.ones(2, 4), T.ones(4, 2, dtype=x.dtype)),
    # what torch allows: a 0-d float64 tensor does not change a float32 tensor's dtype
    "mul_0d": lambda T, x: T.ones(3) * x[0, 0],
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_float32_layers_refuse_other_dtypes_as_torch(name):
    assert _outcome(nbgrad, LAYERS[name]) == _outcome(torch, LAYERS[name])


@pytest.mark.parametrize("expr", ["T.tensor([1, -2]) // 0", "T.tensor([1, -2]) % 0",
                                  "T.tensor([1, 2]) // T.tensor([1, 0])",
                                  "T.tensor([1, 2]).remainder(T.tensor([0, 1]))",
                                  "T.tensor([1, 2]).fmod(0)",
                                  "T.div(T.tensor([3]), 0, rounding_mode='trunc')",
                                  "T.tensor([3], dtype=T.uint8) // 256",
                                  "T.tensor([1.5]) // 0", "T.tensor([1]) // 0."])
def test_integer_division_by_zero_as_torch(expr):
    def run(T):
        try:
            r = eval(expr, {"T": T})
            return "ok", str(r.dtype).split(".")[-1], r.tolist()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e)
    assert run(nbgrad) == run(torch)


@pytest.mark.parametrize("pad", [(0, 0), (0, 0, 0, 0)])
def test_pad_by_nothing_is_a_copy_with_its_node(pad):
    for T in (nbgrad, torch):
        x = T.ones(2, 3, requires_grad=True)
        y = T.nn.functional.pad(x, pad)
        assert y is not x and y.data_ptr() != x.data_ptr()
        assert type(y.grad_fn).__name__ == "ConstantPadNdBackward0"
        y.mul_(2)  # in place on the copy: allowed, and x is untouched
        y.sum().backward()
        assert x.tolist() == [[1.0] * 3] * 2 and x.grad.tolist() == [[2.0] * 3] * 2


@pytest.mark.parametrize("dts", [("float32", "float64", "float32"),
                                 ("float64", "float64", "float32"),
                                 ("float32", "float32", "float64")])
def test_linear_with_a_bias_of_another_dtype_as_torch(dts):
    def run(T):
        x, w, b = (T.ones(shape, dtype=getattr(T, d)) for shape, d in zip(((2, 4), (3, 4), (3,)),
                                                                           dts))
        try:
            return str(T.nn.functional.linear(x, w, b).dtype).split(".")[-1]
        except RuntimeError as e:
            return str(e)
    assert run(nbgrad) == run(torch)
