"""scaled_dot_product_attention, MultiheadAttention and the Transformer modules against PyTorch.

Parameters are copied from torch through ``load_state_dict``; outputs, attention weights and
the gradients of every input and parameter are compared in float64 (one float32 case with a
tolerance). Dropout is compared in eval mode (the random streams differ) and checked for its
own properties in training.
"""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import nbgrad
import nbgrad.nn.functional as NF
from test_nn_layers import copy_params, npy, to_ng
from test_nn_rnn import _errors, graph_names

ATOL, RTOL = 1e-10, 1e-9
tnn, nnn = torch.nn, nbgrad.nn


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def both(a):
    """The same value for torch and nbgrad: numpy arrays become tensors, others pass."""
    if isinstance(a, np.ndarray):
        return torch.tensor(a), to_ng(a)
    return a, a


# torch's C++ math path multiplies by a Scalar (MulBackward1) and its matmul reshapes a
# transposed key with _reshape_alias; nbgrad records MulBackward0 and ViewBackward0
_SAME = {"MulBackward1": "MulBackward0"}


def torch_names(out):
    return [_SAME.get(n, n) for n in graph_names(out.grad_fn)]


def check_grads(outs_t, outs_n, ins_t, ins_n, params=()):
    """Back-propagate the same random upstream grads; compare input and parameter grads."""
    loss_t, loss_n = 0, 0
    for k, (a, b) in enumerate(zip(outs_t, outs_n)):
        np.testing.assert_allclose(npy(b), a.detach().numpy(), rtol=RTOL, atol=ATOL)
        g = rnd(*a.shape, seed=10 + k)
        loss_t = loss_t + (a * torch.tensor(g, dtype=a.dtype)).sum()
        loss_n = loss_n + (b * to_ng(g, dtype=b.dtype)).sum()
    loss_t.backward()
    loss_n.backward()
    for a, b in zip(ins_t, ins_n):
        np.testing.assert_allclose(npy(b.grad), a.grad.numpy(), rtol=RTOL, atol=ATOL)
    for (name, p), q in params:
        np.testing.assert_allclose(npy(q.grad), p.grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=name)


# ---------------------------------------------------------------------------- SDPA
CAUSAL_4x4 = np.tril(np.ones((4, 4), dtype=bool))
ROW_BLOCKED = np.ones((4, 6), dtype=bool)
ROW_BLOCKED[1] = False
FLOAT_MASK = rnd(4, 6, seed=5)
FLOAT_MASK[2] = -np.inf
FLOAT_MASK[0, 3] = -np.inf

SDPA = [
    ("plain", (2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7), {}),
    ("unbatched", (4, 5), (6, 5), (6, 5), {}),
    ("scale", (2, 4, 5), (2, 6, 5), (2, 6, 5), {"scale": 0.3}),
    ("causal", (2, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 5), {"is_causal": True}),
    ("causal_rect", (2, 4, 5), (2, 3, 5), (2, 3, 2), {"is_causal": True}),
    ("bool_mask", (2, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 5), {"attn_mask": CAUSAL_4x4}),
    ("bool_mask_dead_row", (2, 4, 5), (2, 6, 5), (2, 6, 5), {"attn_mask": ROW_BLOCKED}),
    ("float_mask_inf_rows", (2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5),
     {"attn_mask": FLOAT_MASK}),
    ("bool_mask_broadcast_batch", (2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5),
     {"attn_mask": rnd(2, 1, 4, 6, seed=7) > 0}),
    ("gqa", (2, 4, 3, 5), (2, 2, 6, 5), (2, 2, 6, 5), {"enable_gqa": True}),
    ("gqa_math_path", (4, 3, 5), (2, 6, 5), (2, 6, 3), {"enable_gqa": True}),
]


@pytest.mark.parametrize("name,qs,ks,vs,kw", SDPA, ids=[c[0] for c in SDPA])
def test_sdpa_against_torch(name, qs, ks, vs, kw):
    arrays = [rnd(*s, seed=i) for i, s in enumerate((qs, ks, vs))]
    ins_t = [torch.tensor(a, requires_grad=True) for a in arrays]
    ins_n = [to_ng(a, requires_grad=True) for a in arrays]
    kw_t = {k: both(v)[0] for k, v in kw.items()}
    kw_n = {k: both(v)[1] for k, v in kw.items()}
    out_t = TF.scaled_dot_product_attention(*ins_t, **kw_t)
    out_n = NF.scaled_dot_product_attention(*ins_n, **kw_n)
    assert not np.isnan(npy(out_n)).any()
    assert graph_names(out_n.grad_fn) == torch_names(out_t)
    check_grads([out_t], [out_n], ins_t, ins_n)


def test_sdpa_float32():
    arrays = [rnd(2, 3, 4, 5, seed=i).astype(np.float32) for i in range(3)]
    out_t = TF.scaled_dot_product_attention(*map(torch.tensor, arrays), is_causal=True)
    out_n = NF.scaled_dot_product_attention(*map(nbgrad.tensor, arrays), is_causal=True)
    assert out_n.dtype == nbgrad.float32
    np.testing.assert_allclose(npy(out_n), out_t.numpy(), rtol=1e-5, atol=1e-6)


def test_sdpa_dropout():
    q = nbgrad.tensor(rnd(2, 8, 16, 4))
    nbgrad.manual_seed(3)
    a = NF.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    nbgrad.manual_seed(3)
    b = NF.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    np.testing.assert_array_equal(npy(a), npy(b))
    assert not np.allclose(npy(a), npy(NF.scaled_dot_product_attention(q, q, q)))
    # every weight dropped: zeros, as torch
    assert not npy(NF.scaled_dot_product_attention(q, q, q, dropout_p=1.0)).any()
    # the graph records the dropout between softmax and the value product
    names = graph_names(NF.scaled_dot_product_attention(q.requires_grad_(), q, q,
                                                        dropout_p=0.5).grad_fn)
    assert "SafeSoftmaxBackward0" in names and "MulBackward0" in names


def test_sdpa_errors():
    q = np.zeros((2, 3, 4, 5), dtype=np.float32)

    def call(lib, f, *arrays, **kw):
        return lambda: f(*(lib.tensor(a) for a in arrays), **kw)

    _errors(call(torch, TF.scaled_dot_product_attention, q, q, q.astype(np.float64)),
            call(nbgrad, NF.scaled_dot_product_attention, q, q, q.astype(np.float64)))
    mask = np.ones((4, 4), dtype=np.int64)
    _errors(lambda: TF.scaled_dot_product_attention(*(torch.tensor(q),) * 3,
                                                    attn_mask=torch.tensor(mask)),
            lambda: NF.scaled_dot_product_attention(*(nbgrad.tensor(q),) * 3,
                                                    attn_mask=nbgrad.tensor(mask)))
    qt = torch.tensor(q, requires_grad=True)  # torch's math path: no mask with is_causal
    _errors(lambda: TF.scaled_dot_product_attention(qt, qt, qt, attn_mask=torch.tensor(q[0, 0]),
                                                    is_causal=True),
            lambda: NF.scaled_dot_product_attention(*(nbgrad.tensor(q),) * 3,
                                                    attn_mask=nbgrad.tensor(q[0, 0]),
                                                    is_causal=True))
    with pytest.raises(RuntimeError, match=r"key \(2, 3, 4, 4\)"):
        NF.scaled_dot_product_attention(nbgrad.tensor(q), nbgrad.tensor(q[..., :4]),
                                        nbgrad.tensor(q))


# ---------------------------------------------------------------------------- MHA
def run_mha(make, shapes, same_graph=False, self_attention=False, **kw):
    th, ng = make(tnn).double(), make(nnn).double()
    copy_params(ng, th)
    assert repr(ng) == repr(th)
    assert list(ng.state_dict()) == list(th.state_dict())
    arrays = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    ins_t = [torch.tensor(a, requires_grad=True) for a in arrays]
    ins_n = [to_ng(a, requires_grad=True) for a in arrays]
    args_t, args_n = (ins_t * 3, ins_n * 3) if self_attention else (ins_t, ins_n)
    with warnings.catch_warnings(record=True) as warned_t:
        warnings.simplefilter("always")
        out_t, w_t = th(*args_t, **{k: both(v)[0] for k, v in kw.items()})
    with warnings.catch_warnings(record=True) as warned_n:
        warnings.simplefilter("always")
        out_n, w_n = ng(*args_n, **{k: both(v)[1] for k, v in kw.items()})
    assert [str(w.message) for w in warned_n] == [str(w.message) for w in warned_t]
    if same_graph:
        assert graph_names(out_n.grad_fn) == graph_names(out_t.grad_fn)
    outs_t, outs_n = [out_t], [out_n]
    if w_t is None:
        assert w_n is None
    else:
        outs_t.append(w_t)
        outs_n.append(w_n)
    check_grads(outs_t, outs_n, ins_t, ins_n, zip(th.named_parameters(), ng.parameters()))


KPM = np.array([[False, False, True, False], [False, True, True, False]])
CAUSAL_MASK = np.triu(np.ones((3, 3), dtype=bool), 1)  # MHA's bool masks: True = blocked
FLOAT_3x4 = rnd(3, 4, seed=9)

MHA = [
    ("self_attention", lambda nn: nn.MultiheadAttention(6, 2), [(3, 2, 6)], True, {}),
    ("self_no_weights", lambda nn: nn.MultiheadAttention(6, 2), [(3, 2, 6)], True,
     {"need_weights": False}),
    ("cross_batch_first_per_head", lambda nn: nn.MultiheadAttention(6, 3, batch_first=True),
     [(2, 3, 6), (2, 4, 6), (2, 4, 6)], False, {"average_attn_weights": False}),
    ("kdim_vdim", lambda nn: nn.MultiheadAttention(6, 3, kdim=4, vdim=5),
     [(3, 2, 6), (4, 2, 4), (4, 2, 5)], False, {}),
    ("bool_attn_mask", lambda nn: nn.MultiheadAttention(6, 2), [(3, 2, 6)], True,
     {"attn_mask": CAUSAL_MASK}),
    ("causal_hint_sdpa", lambda nn: nn.MultiheadAttention(6, 2), [(3, 2, 6)], True,
     {"attn_mask": CAUSAL_MASK, "need_weights": False, "is_causal": True}),
    ("key_padding_bias_kv_zero_attn",
     lambda nn: nn.MultiheadAttention(6, 2, add_bias_kv=True, add_zero_attn=True),
     [(3, 2, 6), (4, 2, 6), (4, 2, 6)], False,
     {"key_padding_mask": KPM, "attn_mask": FLOAT_3x4}),
    ("key_padding_no_weights", lambda nn: nn.MultiheadAttention(6, 2),
     [(3, 2, 6), (4, 2, 6), (4, 2, 6)], False, {"key_padding_mask": KPM, "need_weights": False}),
    ("per_head_3d_mask", lambda nn: nn.MultiheadAttention(6, 2),
     [(3, 2, 6), (4, 2, 6), (4, 2, 6)], False,
     {"attn_mask": rnd(4, 3, 4, seed=4)}),
    ("unbatched_nobias", lambda nn: nn.MultiheadAttention(6, 2, bias=False),
     [(3, 6), (4, 6), (4, 6)], False, {"key_padding_mask": KPM[0]}),
]


@pytest.mark.parametrize("name,make,shapes,self_attention,kw", MHA, ids=[c[0] for c in MHA])
def test_mha_against_torch(name, make, shapes, self_attention, kw):
    run_mha(make, shapes, self_attention=self_attention, **kw)


def test_mha_graph_is_torchs():
    """Without a mask: the same nodes as torch, from the packed projection (AddmmBackward0 ->
    ... SelectBackward0) through the scaled bmm and softmax (or SDPA's node) to out_proj."""
    run_mha(lambda nn: nn.MultiheadAttention(6, 2), [(3, 2, 6)], same_graph=True,
            self_attention=True)
    run_mha(lambda nn: nn.MultiheadAttention(6, 2, batch_first=True), [(2, 3, 6)],
            same_graph=True, self_attention=True, need_weights=False)  # through SDPA's node
    run_mha(lambda nn: nn.MultiheadAttention(6, 3, kdim=4, vdim=5),
            [(3, 2, 6), (4, 2, 4), (4, 2, 5)], same_graph=True)


def test_mha_float32_and_eval_dropout():
    th, ng = tnn.MultiheadAttention(8, 4, dropout=0.3), nnn.MultiheadAttention(8, 4, dropout=0.3)
    copy_params(ng, th)
    th.eval()
    ng.eval()
    x = rnd(5, 2, 8).astype(np.float32)
    out_t, w_t = th(*(torch.tensor(x),) * 3)
    out_n, w_n = ng(*(nbgrad.tensor(x),) * 3)
    assert out_n.dtype == nbgrad.float32
    np.testing.assert_allclose(npy(out_n), out_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(npy(w_n), w_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    ng.train()
    nbgrad.manual_seed(0)
    out_train = ng(*(nbgrad.tensor(x),) * 3)[0]
    assert not np.allclose(npy(out_train), npy(out_n))


def test_mha_parameters_and_init():
    m = nnn.MultiheadAttention(8, 2, add_bias_kv=True)
    t = tnn.MultiheadAttention(8, 2, add_bias_kv=True)
    assert [(k, tuple(v.shape)) for k, v in m.named_parameters()] == \
        [(k, tuple(v.shape)) for k, v in t.named_parameters()]
    assert not npy(m.in_proj_bias).any() and not npy(m.out_proj.bias).any()
    bound = np.sqrt(6 / (8 + 24))  # xavier_uniform_ on (24, 8)
    w = npy(m.in_proj_weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert m.q_proj_weight is None and type(m.out_proj).__name__ == \
        "NonDynamicallyQuantizableLinear"
    sep = nnn.MultiheadAttention(8, 2, kdim=3, vdim=5)
    assert sep.in_proj_weight is None and tuple(sep.k_proj_weight.shape) == (8, 3)
    assert "in_proj_weight" not in sep.state_dict()
    from nbgrad.nn.modules.activation import MultiheadAttention
    from nbgrad.nn.modules.linear import NonDynamicallyQuantizableLinear  # noqa: F401
    assert MultiheadAttention is nnn.MultiheadAttention


def test_mha_errors():
    t, n = tnn.MultiheadAttention(6, 2), nnn.MultiheadAttention(6, 2)

    def call(mod, lib, shapes, **kw):
        return lambda: mod(*(lib.zeros(*s) for s in shapes), **kw)

    msg = _errors(call(t, torch, [(3, 2, 5)] * 3), call(n, nbgrad, [(3, 2, 5)] * 3))
    assert "expected query of size (L, N, 6) or (L, 6), got (3, 2, 5)" in msg
    _errors(call(t, torch, [(3, 2, 6), (4, 6), (4, 6)]),
            call(n, nbgrad, [(3, 2, 6), (4, 6), (4, 6)]))
    _errors(call(t, torch, [(3, 2, 6), (4, 2, 6), (5, 2, 6)]),
            call(n, nbgrad, [(3, 2, 6), (4, 2, 6), (5, 2, 6)]))
    _errors(call(t, torch, [(3, 2, 6)] * 3, attn_mask=torch.zeros(3, 4)),
            call(n, nbgrad, [(3, 2, 6)] * 3, attn_mask=nbgrad.zeros(3, 4)))
    _errors(call(t, torch, [(3, 2, 6)] * 3, is_causal=True),
            call(n, nbgrad, [(3, 2, 6)] * 3, is_causal=True))
    _errors(call(t, torch, [(3, 2, 6)] * 3, key_padding_mask=torch.zeros(2, 3, dtype=torch.long)),
            call(n, nbgrad, [(3, 2, 6)] * 3,
                 key_padding_mask=nbgrad.zeros(2, 3, dtype=nbgrad.int64)))
    _errors(lambda: tnn.MultiheadAttention(6, 4), lambda: nnn.MultiheadAttention(6, 4))
    _errors(lambda: tnn.MultiheadAttention(0, 4), lambda: nnn.MultiheadAttention(0, 4))


# ---------------------------------------------------------------------------- Transformer
def run_module(make, shapes, train=False, **kw):
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as warned_t:
        warnings.simplefilter("always")
        th = make(tnn).double()
    with warnings.catch_warnings(record=True) as warned_n:
        warnings.simplefilter("always")
        ng = make(nnn).double()
    assert [str(w.message) for w in warned_n] == [str(w.message) for w in warned_t]
    copy_params(ng, th)
    th.train(train)
    ng.train(train)
    assert repr(ng) == repr(th)
    assert list(ng.state_dict()) == list(th.state_dict())
    arrays = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    ins_t = [torch.tensor(a, requires_grad=True) for a in arrays]
    ins_n = [to_ng(a, requires_grad=True) for a in arrays]
    with warnings.catch_warnings(record=True) as warned_t:
        warnings.simplefilter("always")
        out_t = th(*ins_t, **{k: both(v)[0] for k, v in kw.items()})
    with warnings.catch_warnings(record=True) as warned_n:
        warnings.simplefilter("always")
        out_n = ng(*ins_n, **{k: both(v)[1] for k, v in kw.items()})
    assert [str(w.message) for w in warned_n] == [str(w.message) for w in warned_t]
    assert graph_names(out_n.grad_fn) == torch_names(out_t)
    check_grads([out_t], [out_n], ins_t, ins_n, zip(th.named_parameters(), ng.parameters()))


CAUSAL5 = np.triu(np.full((5, 5), -np.inf), 1)
CAUSAL4 = np.triu(np.full((4, 4), -np.inf), 1)
PAD = np.zeros((3, 5), dtype=bool)
PAD[1, 3:] = True

TRANSFORMER = [
    ("encoder_layer_train_no_dropout",
     lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), [(5, 3, 8)], True, {}),
    ("encoder_layer_gelu_norm_first_batch_first",
     lambda nn: nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", norm_first=True,
                                           batch_first=True), [(3, 5, 8)], False, {}),
    ("encoder_layer_module_activation_mask",
     lambda nn: nn.TransformerEncoderLayer(8, 2, 16, activation=nn.GELU()), [(5, 3, 8)], False,
     {"src_mask": CAUSAL5}),
    ("encoder_layer_unbatched_nobias",
     lambda nn: nn.TransformerEncoderLayer(8, 2, 16, bias=False), [(5, 8)], False, {}),
    ("encoder_causal_and_padding",
     lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2, nn.LayerNorm(8)),
     [(5, 3, 8)], False, {"mask": CAUSAL5, "src_key_padding_mask": PAD}),
    ("encoder_bool_mask",
     lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2),
     [(5, 3, 8)], False, {"mask": np.isinf(CAUSAL5)}),
    ("decoder_layer_norm_first",
     lambda nn: nn.TransformerDecoderLayer(8, 2, 16, norm_first=True),
     [(4, 3, 8), (5, 3, 8)], False, {"tgt_mask": CAUSAL4, "memory_key_padding_mask": PAD}),
    ("decoder_stack",
     lambda nn: nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, batch_first=True), 2),
     [(3, 4, 8), (3, 5, 8)], False, {"tgt_mask": CAUSAL4, "tgt_is_causal": True}),
    ("transformer_batch_first",
     lambda nn: nn.Transformer(8, 2, 2, 2, 16, batch_first=True),
     [(3, 5, 8), (3, 4, 8)], False, {"tgt_mask": CAUSAL4, "src_key_padding_mask": PAD}),
]


@pytest.mark.parametrize("name,make,shapes,train,kw", TRANSFORMER,
                         ids=[c[0] for c in TRANSFORMER])
def test_transformer_modules_against_torch(name, make, shapes, train, kw):
    run_module(make, shapes, train, **kw)


@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"batch_first": True, "nhead": 3},
                                {"batch_first": True, "norm_first": True},
                                {"batch_first": True, "bias": False},
                                {"batch_first": True, "activation": torch.tanh}])
def test_encoder_nested_tensor_warning_as_torch(kw):
    def make(nn):
        args = dict(kw)
        if "activation" in args:
            args["activation"] = nbgrad.tanh if nn is nnn else torch.tanh
        layer = nn.TransformerEncoderLayer(args.pop("d_model", 6), args.pop("nhead", 2), 8,
                                           **args)
        return nn.TransformerEncoder(layer, 2)

    with warnings.catch_warnings(record=True) as warned_t:
        warnings.simplefilter("always")
        t = make(tnn)
    with warnings.catch_warnings(record=True) as warned_n:
        warnings.simplefilter("always")
        n = make(nnn)
    assert [str(w.message) for w in warned_n] == [str(w.message) for w in warned_t]
    assert n.use_nested_tensor == t.use_nested_tensor


def test_transformer_float32():
    torch.manual_seed(0)
    th = tnn.Transformer(8, 2, 1, 1, 16, dropout=0.0)
    ng = nnn.Transformer(8, 2, 1, 1, 16, dropout=0.0)
    copy_params(ng, th)
    src, tgt = rnd(5, 2, 8).astype(np.float32), rnd(4, 2, 8, seed=1).astype(np.float32)
    mask = tnn.Transformer.generate_square_subsequent_mask(4)
    out_t = th(torch.tensor(src), torch.tensor(tgt), tgt_mask=mask)
    out_n = ng(nbgrad.tensor(src), nbgrad.tensor(tgt),
               tgt_mask=nnn.Transformer.generate_square_subsequent_mask(4))
    np.testing.assert_allclose(npy(out_n), out_t.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_generate_square_subsequent_mask():
    for n in (1, 4):
        a = tnn.Transformer.generate_square_subsequent_mask(n)
        b = nnn.Transformer.generate_square_subsequent_mask(n)
        assert b.dtype == nbgrad.float32
        np.testing.assert_array_equal(npy(b), a.numpy())
    assert nnn.Transformer.generate_square_subsequent_mask(3, dtype=nbgrad.float64).dtype == \
        nbgrad.float64


def test_transformer_init_and_layers_are_copies():
    m = nnn.Transformer(8, 2, 2, 1, 16)
    assert m.encoder.layers[0] is not m.encoder.layers[1]
    assert m.encoder.layers[0].linear1.weight is not m.encoder.layers[1].linear1.weight
    bound = np.sqrt(6 / (8 + 16))  # xavier_uniform_ on linear1 (16, 8)
    w = npy(m.encoder.layers[0].linear1.weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert not npy(m.encoder.layers[0].norm1.bias).any()


def test_transformer_errors():
    t, n = tnn.Transformer(8, 2, 1, 1, 16), nnn.Transformer(8, 2, 1, 1, 16)
    _errors(lambda: t(torch.zeros(5, 2, 8), torch.zeros(4, 3, 8)),
            lambda: n(nbgrad.zeros(5, 2, 8), nbgrad.zeros(4, 3, 8)))
    msg = _errors(lambda: t(torch.zeros(5, 2, 8), torch.zeros(4, 2, 7)),
                  lambda: n(nbgrad.zeros(5, 2, 8), nbgrad.zeros(4, 2, 7)))
    assert "(4, 2, 7)" in msg
    _errors(lambda: tnn.TransformerEncoderLayer(8, 2, activation="tanh"),
            lambda: nnn.TransformerEncoderLayer(8, 2, activation="tanh"))


def test_finite_differences():
    """The SDPA node (with a mask, with grouped heads), its math path and MultiheadAttention:
    nbgrad's gradients against finite differences (float64)."""
    from nbgrad.autograd import gradcheck
    q, k, v = (to_ng(rnd(1, 2, 3, 4, seed=i), requires_grad=True) for i in range(3))
    allowed = nbgrad.tensor(np.tril(np.ones((3, 3), dtype=bool)))
    assert gradcheck(lambda q, k, v: NF.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
                     (q, k, v))
    assert gradcheck(lambda q, k, v: NF.scaled_dot_product_attention(
        q, k[:, :1], v[:, :1], enable_gqa=True), (q, k, v))
    assert gradcheck(lambda q, k, v: NF.scaled_dot_product_attention(q[0], k[0], v[0],
                                                                     is_causal=True), (q, k, v))
    mha = nnn.MultiheadAttention(4, 2, batch_first=True).double()
    x = to_ng(rnd(2, 3, 4, seed=5), requires_grad=True)
    assert gradcheck(lambda x, w: mha(x, x, x, key_padding_mask=nbgrad.tensor(KPM[:, :3]))[0],
                     (x, mha.in_proj_weight))
