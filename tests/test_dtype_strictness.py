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


# the convolutions, the fused products, einsum, the recurrent layers, the embeddings, cdist and
# the norm kernels with a float64 / int64 operand beside float32 ones: torch raises (its text,
# the namespace's name aside) or keeps float32; the first line of each outcome is compared
MIXED = {
    "Conv1d": lambda T, x: T.nn.Conv1d(2, 3, 2)(x[None]),
    "Conv2d": lambda T, x: T.nn.Conv2d(2, 3, 1)(x.reshape(1, 2, 2, 2)),
    "Conv3d": lambda T, x: T.nn.Conv3d(1, 3, 1)(x.reshape(1, 1, 2, 2, 2)),
    "Conv2d_no_bias": lambda T, x: T.nn.Conv2d(2, 3, 1, bias=False)(x.reshape(1, 2, 2, 2)),
    "ConvTranspose1d": lambda T, x: T.nn.ConvTranspose1d(2, 3, 2)(x[None]),
    "ConvTranspose2d": lambda T, x: T.nn.ConvTranspose2d(2, 3, 1)(x.reshape(1, 2, 2, 2)),
    "conv1d_weight": lambda T, x: T.nn.functional.conv1d(T.ones(1, 2, 4), x.reshape(1, 2, 4)),
    "conv2d_weight": lambda T, x: T.nn.functional.conv2d(T.ones(1, 2, 2, 2),
                                                         x.reshape(4, 2, 1, 1)),
    "conv2d_bias": lambda T, x: T.nn.functional.conv2d(T.ones(1, 2, 2, 2), T.ones(4, 2, 1, 1),
                                                       x[0]),
    "conv3d_bias": lambda T, x: T.nn.functional.conv3d(T.ones(1, 2, 1, 2, 2),
                                                       T.ones(4, 2, 1, 1, 1), x[0]),
    "conv_transpose2d_weight": lambda T, x: T.nn.functional.conv_transpose2d(
        T.ones(1, 2, 2, 2), x.reshape(2, 4, 1, 1)),
    "conv_transpose2d_bias": lambda T, x: T.nn.functional.conv_transpose2d(
        T.ones(1, 2, 2, 2), T.ones(2, 4, 1, 1), x[0]),
    "conv_transpose1d_int": lambda T, x: T.nn.functional.conv_transpose1d(
        x.long()[None, :, :2], T.ones(2, 4, 1, dtype=T.int64), x[0]),
    "bmm_other": lambda T, x: T.bmm(T.ones(1, 2, 4), x.reshape(1, 4, 2)),
    "baddbmm": lambda T, x: T.baddbmm(T.ones(1, 2, 2), x[None], T.ones(1, 4, 2)),
    "baddbmm_self": lambda T, x: T.baddbmm(x.reshape(2, 2, 2)[:1], T.ones(1, 2, 4),
                                           T.ones(1, 4, 2)),
    "baddbmm_batch2": lambda T, x: T.baddbmm(T.ones(1, 2, 2), T.ones(1, 2, 4),
                                             x.reshape(1, 4, 2)),
    "baddbmm_batch2_": lambda T, x: T.ones(1, 2, 2).baddbmm_(T.ones(1, 2, 4),
                                                             x.reshape(1, 4, 2)),
    "addmm_mat2": lambda T, x: T.addmm(T.ones(2, 2), T.ones(2, 4), x.reshape(4, 2)),
    "addbmm": lambda T, x: T.addbmm(T.ones(2, 2), x[None], T.ones(1, 4, 2)),
    "addbmm_self": lambda T, x: T.addbmm(x[:, :2], T.ones(1, 2, 4), T.ones(1, 4, 2)),
    "addmv": lambda T, x: T.addmv(T.ones(2), x, T.ones(4)),
    "addmv_": lambda T, x: T.ones(2).addmv_(T.ones(2, 4), x[0]),
    "addr": lambda T, x: T.addr(T.ones(2, 4), T.ones(2), x[0]),  # torch promotes here
    "einsum": lambda T, x: T.einsum("ij,jk->ik", x, T.ones(4, 2)),
    "einsum_contract": lambda T, x: T.einsum("i,i->", T.ones(4), x[0]),
    "einsum_no_contraction": lambda T, x: T.einsum("i,i->i", T.ones(4), x[0]),  # a mul
    "einsum_outer": lambda T, x: T.einsum("i,j->ij", T.ones(2), x[0]),
    "RNN": lambda T, x: T.nn.RNN(4, 3)(x[None])[0],
    "LSTM": lambda T, x: T.nn.LSTM(4, 3)(x[None])[0],
    "GRU": lambda T, x: T.nn.GRU(4, 3)(x[None])[0],
    "RNNCell": lambda T, x: T.nn.RNNCell(4, 3)(x),
    "LSTMCell": lambda T, x: T.nn.LSTMCell(4, 3)(x)[0],
    "GRUCell": lambda T, x: T.nn.GRUCell(4, 3)(x),
    "Embedding": lambda T, x: T.nn.Embedding(10, 3)(x),
    "embedding_weight": lambda T, x: T.nn.functional.embedding(T.tensor([0, 1]), x),
    "EmbeddingBag": lambda T, x: T.nn.EmbeddingBag(10, 3)(x),
    "EmbeddingBag_sum": lambda T, x: T.nn.EmbeddingBag(10, 3, mode="sum")(x),
    "linear_weight": lambda T, x: T.nn.functional.linear(T.ones(2, 4), x),
    "cdist": lambda T, x: T.cdist(T.ones(2, 4), x),
    "cdist_x1": lambda T, x: T.cdist(x, T.ones(2, 4)),
    "layer_norm_weight": lambda T, x: T.nn.functional.layer_norm(T.ones(2, 4), (4,), x[0]),
    "layer_norm_bias": lambda T, x: T.nn.functional.layer_norm(T.ones(2, 4), (4,), T.ones(4),
                                                               x[0]),
    "layer_norm_input": lambda T, x: T.nn.functional.layer_norm(x, (4,), T.ones(4), x[0]),
    "batch_norm_weight": lambda T, x: T.nn.functional.batch_norm(T.ones(2, 4), T.zeros(4),
                                                                 T.ones(4), x[0]),
    "batch_norm_running": lambda T, x: T.nn.functional.batch_norm(T.ones(2, 4), x[0], x[1]),
    "group_norm_weight": lambda T, x: T.nn.functional.group_norm(T.ones(2, 4), 2, x[0]),
    "group_norm_bias": lambda T, x: T.nn.functional.group_norm(T.ones(2, 4), 2, T.ones(4), x[0]),
    "InstanceNorm1d": lambda T, x: T.nn.InstanceNorm1d(2, affine=True)(x[None]),
    "TransformerEncoderLayer": lambda T, x: T.nn.TransformerEncoderLayer(
        4, 2, 8, dropout=0.0)(x[None]),
}


def _named(outcome):
    return [(kind, text.replace("nbgrad.", "torch.")) for kind, text in outcome]


@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed_dtypes_as_torch(name):
    assert _named(_outcome(nbgrad, MIXED[name])) == _named(_outcome(torch, MIXED[name]))


# integer and bool pooling: torch's integer average pools truncate in the input's dtype (nbgrad
# gave float64, and 0 for avg_pool3d), the others have no kernel for them
POOLS = {
    "max_pool1d": lambda T, x: T.nn.functional.max_pool1d(x, 2),
    "max_pool2d": lambda T, x: T.nn.functional.max_pool2d(x[None], 2),
    "max_pool3d": lambda T, x: T.nn.functional.max_pool3d(x[None, None], (1, 1, 2)),
    "avg_pool1d": lambda T, x: T.nn.functional.avg_pool1d(x, 2),
    "avg_pool1d_pad": lambda T, x: T.nn.functional.avg_pool1d(x, 3, 2, 1),
    "avg_pool2d": lambda T, x: T.nn.functional.avg_pool2d(x[None], 2),
    "avg_pool2d_divisor": lambda T, x: T.nn.functional.avg_pool2d(x[None], 2,
                                                                  divisor_override=3),
    "avg_pool3d": lambda T, x: T.nn.functional.avg_pool3d(x[None, None], (1, 2, 2)),
    "adaptive_avg_pool1d": lambda T, x: T.nn.functional.adaptive_avg_pool1d(x, 3),
    "adaptive_avg_pool2d_mean": lambda T, x: T.nn.functional.adaptive_avg_pool2d(x[None], 1),
    "adaptive_avg_pool3d": lambda T, x: T.nn.functional.adaptive_avg_pool3d(x[None, None],
                                                                            (1, 2, 3)),
    "adaptive_max_pool1d": lambda T, x: T.nn.functional.adaptive_max_pool1d(x, 2),
    "adaptive_max_pool2d": lambda T, x: T.nn.functional.adaptive_max_pool2d(x[None], 1),
}


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name", sorted(POOLS))
def test_integer_pooling_as_torch(name, dtype):
    def run(T):
        x = T.tensor([[[7, -2, 3, 5, -9, 4], [1, 0, -6, 2, 8, -3]]]).to(getattr(T, dtype))
        try:
            r = POOLS[name](T, x)
            return "ok", str(r.dtype).split(".")[-1], r.tolist()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e).split("\n")[0]
    assert run(nbgrad) == run(torch)


# the scatter, index and masked families write a source into self: torch never promotes it
SOURCES = {
    "scatter_add": lambda T, s, src: s.scatter_add(0, T.tensor([[0, 1, 2]] * 4), src),
    "scatter_add_": lambda T, s, src: s.clone().scatter_add_(0, T.tensor([[0, 1, 2]] * 4), src),
    "scatter_reduce": lambda T, s, src: s.scatter_reduce(0, T.tensor([[0, 1, 2]] * 4), src,
                                                         "amax"),
    "scatter": lambda T, s, src: s.scatter(0, T.tensor([[0, 1, 2]] * 4), src),
    "index_add": lambda T, s, src: s.index_add(0, T.tensor([0, 1, 2, 3]), src),
    "index_add_": lambda T, s, src: s.clone().index_add_(0, T.tensor([0, 1, 2, 3]), src),
    "index_copy": lambda T, s, src: s.index_copy(0, T.tensor([0, 1, 2, 3]), src),
    "index_copy_": lambda T, s, src: s.clone().index_copy_(0, T.tensor([0, 1, 2, 3]), src),
    "masked_scatter": lambda T, s, src: s.masked_scatter(T.ones(4, 3, dtype=T.bool), src),
    "masked_scatter_": lambda T, s, src: s.clone().masked_scatter_(T.ones(4, 3, dtype=T.bool),
                                                                   src),
}


@pytest.mark.parametrize("src_dtype", ["float64", "int64", "float32"])
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_source_of_another_dtype_as_torch(name, src_dtype):
    def run(T):
        try:
            r = SOURCES[name](T, T.zeros(4, 3), T.ones(4, 3, dtype=getattr(T, src_dtype)))
            return "ok", str(r.dtype).split(".")[-1], r.tolist()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e)
    assert run(nbgrad) == run(torch)
