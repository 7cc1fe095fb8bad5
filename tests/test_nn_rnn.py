"""RNN, LSTM, GRU, their cells and nn.utils.rnn against PyTorch.

Each case builds the layer in both libraries, copies torch's parameters into nbgrad's through
``load_state_dict``, runs the same input (and initial state), back-propagates the same random
upstream gradients into every output, and compares outputs, final states, the gradients of the
input, of the initial states and of every parameter (float64; one float32 case with a
tolerance), and the grad_fn graph against torch's CPU graph (mkldnn off in both libraries).
The fused float32 LSTM layer (one MkldnnRnnLayerBackward0 per layer and direction, mkldnn on)
is compared with torch's oneDNN path at the end.
"""

import warnings

import numpy as np
import pytest
import torch

import nbgrad
from test_nn_layers import copy_params, npy, to_ng

ATOL = 1e-10
tnn, nnn = torch.nn, nbgrad.nn


@pytest.fixture(autouse=True)
def _no_mkldnn(request):
    # torch's mkldnn LSTM records one fused node (so does nbgrad's, tested at the end); its
    # plain CPU path records the per-step graph, which both libraries record with mkldnn off
    if "fused" in request.node.name:
        yield
        return
    old = torch.backends.mkldnn.enabled, nbgrad.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = nbgrad.backends.mkldnn.enabled = False
    yield
    torch.backends.mkldnn.enabled, nbgrad.backends.mkldnn.enabled = old


# torch's C++ layers transpose batch-first output in place; nbgrad records the same graph
# with transpose
SAME = {"TransposeBackward1": "TransposeBackward0"}


def graph_names(fn):
    """Node class names in depth-first order, each node once (torch's names mapped by SAME)."""
    out, seen, stack = [], set(), [fn]
    while stack:
        f = stack.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        name = type(f).__name__
        out.append(SAME.get(name, name))
        stack.extend(g for g, _ in reversed(f.next_functions))
    return out


def _flat(out):
    """(output, h) / (output, (h, c)) / PackedSequence -> a flat list of tensors."""
    res = []
    for o in out if isinstance(out, tuple) and not hasattr(out, "batch_sizes") else (out,):
        if hasattr(o, "batch_sizes"):
            res.append(o.data)
        elif isinstance(o, tuple):
            res.extend(o)
        else:
            res.append(o)
    return res


def compare(make, x, hx=(), lengths=None, dtype="float64", atol=ATOL, rtol=1e-9,
            same_graph=True, train=True):
    """Run ``make(nn)`` on ``x`` (and initial states ``hx``) in both libraries; compare all."""
    th = make(tnn).to(getattr(torch, dtype))
    ng = make(nnn).to(getattr(nbgrad, dtype))
    copy_params(ng, th)
    th.train(train)
    ng.train(train)
    assert list(ng.state_dict()) == list(th.state_dict())
    assert repr(ng) == repr(th)
    xs_t = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True) for a in (x,) + hx]
    xs_n = [to_ng(a, requires_grad=True, dtype=getattr(nbgrad, dtype)) for a in (x,) + hx]
    args_t, args_n = list(xs_t), list(xs_n)
    if lengths is not None:
        bf = getattr(th, "batch_first", False)
        args_t[0] = tnn.utils.rnn.pack_padded_sequence(xs_t[0], lengths, batch_first=bf,
                                                       enforce_sorted=False)
        args_n[0] = nnn.utils.rnn.pack_padded_sequence(xs_n[0], lengths, batch_first=bf,
                                                       enforce_sorted=False)
    if isinstance(th, (tnn.LSTM, tnn.LSTMCell)) and hx:
        args_t, args_n = [args_t[0], tuple(args_t[1:])], [args_n[0], tuple(args_n[1:])]
    outs_t, outs_n = _flat(th(*args_t)), _flat(ng(*args_n))
    assert len(outs_t) == len(outs_n)
    loss_t, loss_n = 0, 0
    for k, (a, b) in enumerate(zip(outs_t, outs_n)):
        assert tuple(b.shape) == tuple(a.shape)
        assert b.dtype == getattr(nbgrad, dtype)
        np.testing.assert_allclose(npy(b), a.detach().numpy(), rtol=rtol, atol=atol)
        g = np.random.default_rng(k).standard_normal(tuple(a.shape))
        loss_t = loss_t + (a * torch.tensor(g, dtype=a.dtype)).sum()
        loss_n = loss_n + (b * to_ng(g, dtype=b.dtype)).sum()
        if same_graph:
            assert graph_names(b.grad_fn) == graph_names(a.grad_fn)
    loss_t.backward()
    loss_n.backward()
    for a, b in zip(xs_t, xs_n):
        np.testing.assert_allclose(npy(b.grad), a.grad.numpy(), rtol=rtol, atol=atol)
    for (name, p), q in zip(th.named_parameters(), ng.parameters()):
        np.testing.assert_allclose(npy(q.grad), p.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)
    return th, ng


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


LAYERS = [
    ("rnn", lambda nn: nn.RNN(4, 5), (6, 3, 4)),
    ("rnn_relu_3layers_nobias", lambda nn: nn.RNN(4, 5, 3, nonlinearity="relu", bias=False),
     (6, 3, 4)),
    ("lstm", lambda nn: nn.LSTM(4, 5), (6, 3, 4)),
    ("lstm_2layers_bidir", lambda nn: nn.LSTM(4, 5, num_layers=2, bidirectional=True),
     (6, 3, 4)),
    ("lstm_proj_bidir", lambda nn: nn.LSTM(4, 5, proj_size=3, bidirectional=True), (6, 3, 4)),
    ("gru", lambda nn: nn.GRU(4, 5), (6, 3, 4)),
    ("gru_2layers_bidir", lambda nn: nn.GRU(4, 5, num_layers=2, bidirectional=True), (6, 3, 4)),
    ("rnn_unbatched", lambda nn: nn.RNN(4, 5, bidirectional=True), (6, 4)),
    ("lstm_unbatched", lambda nn: nn.LSTM(4, 5, num_layers=2), (6, 4)),
    ("gru_unbatched", lambda nn: nn.GRU(4, 5), (6, 4)),
]


@pytest.mark.parametrize("name,make,shape", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_against_torch(name, make, shape):
    compare(make, rnd(*shape))


BATCH_FIRST = [
    ("rnn", lambda nn: nn.RNN(4, 5, batch_first=True, num_layers=2)),
    ("lstm", lambda nn: nn.LSTM(4, 5, batch_first=True, bidirectional=True)),
    ("gru", lambda nn: nn.GRU(4, 5, batch_first=True, bidirectional=True, num_layers=2)),
]


@pytest.mark.parametrize("name,make", BATCH_FIRST, ids=[c[0] for c in BATCH_FIRST])
def test_batch_first_against_torch(name, make):
    compare(make, rnd(3, 6, 4))


INITIAL_STATE = [
    ("rnn", lambda nn: nn.RNN(4, 5, num_layers=2, bidirectional=True), ((4, 3, 5),)),
    ("lstm", lambda nn: nn.LSTM(4, 5, num_layers=2, bidirectional=True),
     ((4, 3, 5), (4, 3, 5))),
    ("lstm_proj", lambda nn: nn.LSTM(4, 5, proj_size=2), ((1, 3, 2), (1, 3, 5))),
    ("gru", lambda nn: nn.GRU(4, 5, num_layers=3), ((3, 3, 5),)),
]


@pytest.mark.parametrize("name,make,shapes", INITIAL_STATE, ids=[c[0] for c in INITIAL_STATE])
def test_initial_states_get_gradients(name, make, shapes):
    compare(make, rnd(6, 3, 4), tuple(rnd(*s, seed=i + 1) for i, s in enumerate(shapes)))


def test_unbatched_initial_state():
    compare(lambda nn: nn.LSTM(4, 5, num_layers=2), rnd(6, 4), (rnd(2, 5, seed=1),
                                                                 rnd(2, 5, seed=2)))
    compare(lambda nn: nn.GRU(4, 5), rnd(6, 4), (rnd(1, 5, seed=1),))


PACKED = [
    ("lstm_bidir_2layers", lambda nn: nn.LSTM(4, 5, num_layers=2, bidirectional=True),
     (6, 4, 4), [2, 6, 3, 1], ()),
    ("gru_batch_first_bidir", lambda nn: nn.GRU(4, 5, batch_first=True, bidirectional=True),
     (4, 6, 4), [2, 6, 3, 1], ()),
    ("rnn_with_h0", lambda nn: nn.RNN(4, 5, bidirectional=True), (5, 3, 4), [3, 5, 2],
     ((2, 3, 5),)),
    ("lstm_with_h0_c0", lambda nn: nn.LSTM(4, 5), (5, 3, 4), [4, 1, 5], ((1, 3, 5), (1, 3, 5))),
    ("lstm_proj_bidir", lambda nn: nn.LSTM(4, 5, proj_size=2, bidirectional=True), (5, 3, 4),
     [4, 1, 5], ((2, 3, 2), (2, 3, 5))),
]


@pytest.mark.parametrize("name,make,shape,lengths,hx", PACKED, ids=[c[0] for c in PACKED])
def test_packed_sequence_against_torch(name, make, shape, lengths, hx):
    compare(make, rnd(*shape), tuple(rnd(*s, seed=i + 1) for i, s in enumerate(hx)),
            lengths=lengths)


def test_float32_against_torch():
    compare(lambda nn: nn.LSTM(4, 5, num_layers=2, bidirectional=True), rnd(6, 3, 4),
            dtype="float32", atol=1e-5, rtol=1e-4)
    compare(lambda nn: nn.GRU(4, 5), rnd(6, 3, 4), dtype="float32", atol=1e-5, rtol=1e-4)


def test_dropout_between_layers():
    # in eval mode dropout is off: exactly torch's values
    compare(lambda nn: nn.GRU(4, 5, num_layers=2, dropout=0.5), rnd(6, 3, 4), train=False)
    m = nnn.LSTM(4, 5, num_layers=2, dropout=0.5)
    x = nbgrad.tensor(rnd(6, 3, 4).astype(np.float32))
    nbgrad.manual_seed(1)
    a = m(x)[0]
    nbgrad.manual_seed(1)
    b = m(x)[0]
    np.testing.assert_array_equal(npy(a), npy(b))  # the same seed, the same masks
    m.eval()
    c = m(x)[0]
    assert not np.allclose(npy(a), npy(c))
    # dropout on the last layer's output never happens: a 1-layer LSTM ignores it (with
    # torch's warning) and matches eval
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last"):
        one = nnn.LSTM(4, 5, dropout=0.5)
    np.testing.assert_array_equal(npy(one(x)[0]), npy(one.eval()(x)[0]))


CELLS = [
    ("rnn_cell", lambda nn: nn.RNNCell(4, 5), ((3, 5),)),
    ("rnn_cell_relu_nobias", lambda nn: nn.RNNCell(4, 5, bias=False, nonlinearity="relu"),
     ((3, 5),)),
    ("lstm_cell", lambda nn: nn.LSTMCell(4, 5), ((3, 5), (3, 5))),
    ("gru_cell", lambda nn: nn.GRUCell(4, 5), ((3, 5),)),
]


@pytest.mark.parametrize("name,make,hx", CELLS, ids=[c[0] for c in CELLS])
def test_cell_against_torch(name, make, hx):
    compare(make, rnd(3, 4))  # zero initial state
    compare(make, rnd(3, 4), tuple(rnd(*s, seed=i + 1) for i, s in enumerate(hx)))
    compare(make, rnd(4), tuple(rnd(*s[1:], seed=i + 1) for i, s in enumerate(hx)))


def test_cell_used_in_a_loop_matches_the_layer():
    """An LSTMCell stepped by hand gives what LSTM gives with the same weights."""
    layer, cell = nnn.LSTM(4, 5).double(), nnn.LSTMCell(4, 5).double()
    cell.load_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})
    x = to_ng(rnd(6, 3, 4))
    h = c = nbgrad.zeros(3, 5, dtype=nbgrad.float64)
    outs = []
    for t in range(6):
        h, c = cell(x[t], (h, c))
        outs.append(h)
    out, (hn, cn) = layer(x)
    np.testing.assert_allclose(npy(nbgrad.stack(outs)), npy(out), atol=1e-12)
    np.testing.assert_allclose(npy(c), npy(cn[0]), atol=1e-12)


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("make", [
    lambda nn: nn.LSTM(3, 8, num_layers=2, bidirectional=True, proj_size=2),
    lambda nn: nn.GRU(3, 8, bias=False, num_layers=2),
    lambda nn: nn.RNN(3, 8, bidirectional=True),
    lambda nn: nn.GRUCell(3, 8),
    lambda nn: nn.LSTMCell(3, 8, bias=False),
])
def test_parameter_names_shapes_and_init(make):
    th, ng = make(tnn), make(nnn)
    assert [(k, tuple(v.shape)) for k, v in ng.named_parameters()] == \
        [(k, tuple(v.shape)) for k, v in th.named_parameters()]
    bound = 1 / np.sqrt(8)
    values = np.concatenate([npy(p).ravel() for p in ng.parameters()])
    assert np.abs(values).max() <= bound
    assert np.abs(values).max() > 0.9 * bound and abs(values.mean()) < 0.1 * bound  # U(-b, b)
    assert all(p.dtype == nbgrad.float32 and p.requires_grad for p in ng.parameters())


def test_state_dict_round_trip_both_ways():
    th = tnn.GRU(3, 4, num_layers=2, bidirectional=True)
    ng = nnn.GRU(3, 4, num_layers=2, bidirectional=True)
    copy_params(ng, th)
    back = tnn.GRU(3, 4, num_layers=2, bidirectional=True)
    back.load_state_dict({k: torch.tensor(npy(v)) for k, v in ng.state_dict().items()})
    for (k, a), b in zip(th.state_dict().items(), back.state_dict().values()):
        assert torch.equal(a, b), k


def test_all_weights_and_flatten_parameters():
    m = nnn.LSTM(3, 4, num_layers=2, bidirectional=True)
    t = tnn.LSTM(3, 4, num_layers=2, bidirectional=True)
    assert [[tuple(p.shape) for p in ws] for ws in m.all_weights] == \
        [[tuple(p.shape) for p in ws] for ws in t.all_weights]
    assert m.all_weights[1][0] is m.weight_ih_l0_reverse
    m.flatten_parameters()  # accepted, as on torch's CPU


@pytest.mark.parametrize("make", [
    lambda nn: nn.LSTM(10, 20, num_layers=2, bias=False, batch_first=True, dropout=0.25,
                       bidirectional=True, proj_size=5),
    lambda nn: nn.RNN(10, 20, nonlinearity="relu"),
    lambda nn: nn.GRU(10, 20),
    lambda nn: nn.RNNCell(10, 20, nonlinearity="relu", bias=False),
    lambda nn: nn.LSTMCell(10, 20),
    lambda nn: nn.GRUCell(10, 20, bias=False),
])
def test_repr_is_torch(make):
    assert repr(make(nnn)) == repr(make(tnn))


# ---------------------------------------------------------------------------- errors
def _errors(fn_t, fn_n):
    """Both raise the same exception type; nbgrad's text contains torch's."""
    with pytest.raises(Exception) as et:
        fn_t()
    with pytest.raises(Exception) as en:
        fn_n()
    assert type(en.value) is type(et.value), (en.value, et.value)
    assert str(et.value).replace("torch.", "nbgrad.") in str(en.value)
    return str(en.value)


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_bad_input_errors(cls):
    t, n = getattr(tnn, cls)(10, 20), getattr(nnn, cls)(10, 20)

    def both(shape, dtype="float32", **kw):
        return (lambda: t(torch.zeros(shape, dtype=getattr(torch, dtype)), **kw),
                lambda: n(nbgrad.zeros(shape, dtype=getattr(nbgrad, dtype)), **kw))

    msg = _errors(*both((5, 3, 7)))
    assert f"{cls}: expected input of size (L, N, 10), got (5, 3, 7)" in msg
    _errors(*both((5, 3, 2, 10)))
    _errors(*both((5, 3, 10), "float64"))
    if cls == "LSTM":
        hx_t = (torch.zeros(1, 2, 20), torch.zeros(1, 3, 20))
        hx_n = (nbgrad.zeros(1, 2, 20), nbgrad.zeros(1, 3, 20))
        msg = _errors(lambda: t(torch.zeros(5, 3, 10), hx_t),
                      lambda: n(nbgrad.zeros(5, 3, 10), hx_n))
        _errors(lambda: t(torch.zeros(5, 3, 10), (torch.zeros(2, 20),) * 2),
                lambda: n(nbgrad.zeros(5, 3, 10), (nbgrad.zeros(2, 20),) * 2))
    else:
        msg = _errors(lambda: t(torch.zeros(5, 3, 10), torch.zeros(1, 2, 20)),
                      lambda: n(nbgrad.zeros(5, 3, 10), nbgrad.zeros(1, 2, 20)))
        _errors(lambda: t(torch.zeros(5, 10), torch.zeros(1, 1, 20)),
                lambda: n(nbgrad.zeros(5, 10), nbgrad.zeros(1, 1, 20)))
    assert "(1, 3, 20)" in msg and "[1, 2, 20]" in msg


@pytest.mark.parametrize("cls", ["RNN", "GRU", "GRUCell"])
def test_hidden_state_of_another_dtype(cls):
    t, n = getattr(tnn, cls)(3, 4), getattr(nnn, cls)(3, 4)
    shape = (2, 4) if cls.endswith("Cell") else (1, 2, 4)
    x = (2, 3) if cls.endswith("Cell") else (5, 2, 3)
    msg = _errors(lambda: t(torch.zeros(x), torch.zeros(shape, dtype=torch.float64)),
                  lambda: n(nbgrad.zeros(x), nbgrad.zeros(shape, dtype=nbgrad.float64)))
    assert "the hidden state is nbgrad.float64, the input nbgrad.float32" in msg


@pytest.mark.parametrize("cls,n_states", [("RNNCell", 1), ("LSTMCell", 2), ("GRUCell", 1)])
def test_cell_bad_input_errors(cls, n_states):
    t, n = getattr(tnn, cls)(10, 20), getattr(nnn, cls)(10, 20)

    def hx(lib, *shape):
        s = lib.zeros(*shape)
        return (s, s) if n_states == 2 else s

    msg = _errors(lambda: t(torch.zeros(3, 7)), lambda: n(nbgrad.zeros(3, 7)))
    assert f"{cls}: expected input of size (N, 10), got (3, 7)" in msg
    _errors(lambda: t(torch.zeros(2, 3, 10)), lambda: n(nbgrad.zeros(2, 3, 10)))
    _errors(lambda: t(torch.zeros(3, 10), hx(torch, 2, 20)),
            lambda: n(nbgrad.zeros(3, 10), hx(nbgrad, 2, 20)))
    _errors(lambda: t(torch.zeros(3, 10), hx(torch, 3, 19)),
            lambda: n(nbgrad.zeros(3, 10), hx(nbgrad, 3, 19)))


@pytest.mark.parametrize("kwargs", [
    {"dropout": 1.5}, {"dropout": -0.1}, {"hidden_size": 0}, {"num_layers": 0},
    {"proj_size": 20}, {"proj_size": -1}, {"bias": 1}, {"batch_first": "yes"},
    {"input_size": 2.0},
])
def test_constructor_errors(kwargs):
    args = {"input_size": 10, "hidden_size": 20, **kwargs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _errors(lambda: tnn.LSTM(**args), lambda: nnn.LSTM(**args))
    _errors(lambda: tnn.GRU(10, 20, proj_size=2), lambda: nnn.GRU(10, 20, proj_size=2))
    _errors(lambda: tnn.RNN(10, 20, nonlinearity="gelu"),
            lambda: nnn.RNN(10, 20, nonlinearity="gelu"))


# ---------------------------------------------------------------------------- nn.utils.rnn
tr, nr = tnn.utils.rnn, nnn.utils.rnn


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce_sorted", [([5, 3, 3, 1], True), ([2, 5, 1, 4], False)])
def test_pack_and_pad_round_trip(batch_first, lengths, enforce_sorted):
    x = rnd(4, 5, 3) if batch_first else rnd(5, 4, 3)
    xt, xn = torch.tensor(x, requires_grad=True), to_ng(x, requires_grad=True)
    pt = tr.pack_padded_sequence(xt, lengths, batch_first=batch_first,
                                 enforce_sorted=enforce_sorted)
    pn = nr.pack_padded_sequence(xn, nbgrad.tensor(lengths), batch_first=batch_first,
                                 enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(npy(pn.data), pt.data.detach().numpy())
    np.testing.assert_array_equal(npy(pn.batch_sizes), pt.batch_sizes.numpy())
    assert graph_names(pn.data.grad_fn) == graph_names(pt.data.grad_fn)
    assert pn.batch_sizes.dtype == nbgrad.int64
    if enforce_sorted:
        assert pn.sorted_indices is None and pn.unsorted_indices is None
    else:
        np.testing.assert_array_equal(npy(pn.sorted_indices), pt.sorted_indices.numpy())
        np.testing.assert_array_equal(npy(pn.unsorted_indices), pt.unsorted_indices.numpy())
    for total in (None, 7):
        ot, lt = tr.pad_packed_sequence(pt, batch_first=not batch_first, padding_value=-1.0,
                                        total_length=total)
        on, ln = nr.pad_packed_sequence(pn, batch_first=not batch_first, padding_value=-1.0,
                                        total_length=total)
        np.testing.assert_array_equal(npy(on), ot.detach().numpy())
        np.testing.assert_array_equal(npy(ln), lt.numpy())
        assert graph_names(on.grad_fn) == graph_names(ot.grad_fn)
    g = rnd(*ot.shape, seed=3)
    (ot * torch.tensor(g)).sum().backward()
    (on * to_ng(g)).sum().backward()
    np.testing.assert_array_equal(npy(xn.grad), xt.grad.numpy())


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["left", "right"])
def test_pad_sequence(batch_first, side):
    seqs = [rnd(n, 2, seed=n) for n in (3, 5, 2)]
    st = [torch.tensor(s, requires_grad=True) for s in seqs]
    sn = [to_ng(s, requires_grad=True) for s in seqs]
    a = tr.pad_sequence(st, batch_first=batch_first, padding_value=9.0, padding_side=side)
    b = nr.pad_sequence(sn, batch_first=batch_first, padding_value=9.0, padding_side=side)
    np.testing.assert_array_equal(npy(b), a.detach().numpy())
    assert graph_names(b.grad_fn) == graph_names(a.grad_fn)
    g = rnd(*a.shape, seed=1)
    (a * torch.tensor(g)).sum().backward()
    (b * to_ng(g)).sum().backward()
    for x, y in zip(st, sn):
        np.testing.assert_array_equal(npy(y.grad), x.grad.numpy())


def test_pack_sequence_unpack_and_unpad():
    seqs = [rnd(n, 2, seed=n) for n in (3, 5, 2)]
    pt = tr.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    pn = nr.pack_sequence([to_ng(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(npy(pn.data), pt.data.numpy())
    for s, u in zip(seqs, nr.unpack_sequence(pn)):
        np.testing.assert_array_equal(npy(u), s)
    padded = nr.pad_sequence([to_ng(s) for s in seqs], batch_first=True)
    for s, u in zip(seqs, nr.unpad_sequence(padded, nbgrad.tensor([3, 5, 2]), batch_first=True)):
        np.testing.assert_array_equal(npy(u), s)
    assert isinstance(pn, tuple) and pn._fields == pt._fields
    assert pn.double().data.dtype == nbgrad.float64


def test_packing_errors():
    x = torch.zeros(5, 3, 2)
    _errors(lambda: tr.pack_padded_sequence(x, [2, 5, 1]),
            lambda: nr.pack_padded_sequence(nbgrad.zeros(5, 3, 2), [2, 5, 1]))
    _errors(lambda: tr.pack_padded_sequence(x, [5, 2]),
            lambda: nr.pack_padded_sequence(nbgrad.zeros(5, 3, 2), [5, 2]))
    _errors(lambda: tr.pack_padded_sequence(x, [5, 2, 0]),
            lambda: nr.pack_padded_sequence(nbgrad.zeros(5, 3, 2), [5, 2, 0]))
    pt = tr.pack_padded_sequence(x, [5, 2, 1])
    pn = nr.pack_padded_sequence(nbgrad.zeros(5, 3, 2), [5, 2, 1])
    _errors(lambda: tr.pad_packed_sequence(pt, total_length=3),
            lambda: nr.pad_packed_sequence(pn, total_length=3))
    _errors(lambda: tr.pad_sequence([torch.zeros(2)], padding_side="up"),
            lambda: nr.pad_sequence([nbgrad.zeros(2)], padding_side="up"))


def test_finite_differences():
    """LSTM (two layers, both directions, packed) and GRUCell against finite differences."""
    from nbgrad.autograd import gradcheck
    lstm = nnn.LSTM(3, 4, num_layers=2, bidirectional=True).double()
    x = to_ng(rnd(4, 2, 3), requires_grad=True)
    h0 = to_ng(rnd(4, 2, 4, seed=1), requires_grad=True)
    assert gradcheck(lambda x, h0, w: lstm(x, (h0, h0 * 0.5))[0], (x, h0, lstm.weight_hh_l1))
    assert gradcheck(lambda x: lstm(nnn.utils.rnn.pack_padded_sequence(x, [4, 2]))[0].data, (x,))
    cell = nnn.GRUCell(3, 4).double()
    assert gradcheck(lambda x, h: cell(x, h), (to_ng(rnd(2, 3), requires_grad=True),
                                               to_ng(rnd(2, 4, seed=2), requires_grad=True)))


# ---------------------------------------------------------------------------- the fused layer
FUSED = [  # float32 LSTMs that torch runs through oneDNN: one MkldnnRnnLayerBackward0 each
    ("lstm", lambda nn: nn.LSTM(4, 5), (6, 3, 4), ()),
    ("batch_first", lambda nn: nn.LSTM(4, 5, batch_first=True), (3, 6, 4), ()),
    ("2layers_bidir_h0_c0", lambda nn: nn.LSTM(4, 5, num_layers=2, bidirectional=True),
     (6, 3, 4), ((4, 3, 5), (4, 3, 5))),
    ("nobias", lambda nn: nn.LSTM(4, 5, bias=False), (6, 3, 4), ((1, 3, 5), (1, 3, 5))),
    ("unbatched", lambda nn: nn.LSTM(4, 5, num_layers=2), (6, 4), ()),
    ("eval_dropout", lambda nn: nn.LSTM(4, 5, num_layers=2, dropout=0.5), (6, 3, 4), ()),
]


@pytest.mark.parametrize("name,make,shape,hx", FUSED, ids=[c[0] for c in FUSED])
def test_fused_layer_like_torch_onednn(name, make, shape, hx):
    assert torch.backends.mkldnn.enabled and nbgrad.backends.mkldnn.enabled
    compare(make, rnd(*shape), tuple(rnd(*s, seed=i + 1) for i, s in enumerate(hx)),
            dtype="float32", atol=2e-6, rtol=1e-5, train=name != "eval_dropout")


def _fused_inputs(bias=True, seed=3):
    r = np.random.default_rng(seed)
    t, b, i, h = 4, 2, 3, 5
    shapes = [(t, b, i), (4 * h, i), (4 * h, h), (4 * h,), (4 * h,), (b, h), (b, h)]
    return [nbgrad.tensor(r.standard_normal(s) * 0.7, requires_grad=True)
            if bias or k not in (3, 4) else None for k, s in enumerate(shapes)]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_layer_row_first_and_second_order(reverse, bias):
    """The row against finite differences (float64), first and second order: its backward
    through time, and under create_graph the recomputed Tensor formula."""
    from nbgrad.autograd import gradcheck, gradgradcheck
    from nbgrad.autograd.apply import apply
    from nbgrad.ops import ROWS
    ins = _fused_inputs(bias)
    diff = [t for t in ins if t is not None]

    def f(*xs):
        it = iter(xs)
        return apply(ROWS["mkldnn_rnn_layer"], [None if t is None else next(it) for t in ins],
                     (reverse,))

    assert gradcheck(f, tuple(diff))
    assert gradgradcheck(f, tuple(diff))


def test_fused_layer_only_the_gradients_asked_for():
    """Inputs that do not require grad get none (and the rest are unchanged)."""
    from nbgrad.autograd.apply import apply
    from nbgrad.ops import ROWS
    full = _fused_inputs()
    out = apply(ROWS["mkldnn_rnn_layer"], full, (False,))
    sum(o.sum() for o in out).backward()
    part = [t.detach().requires_grad_(k in (1, 6)) for k, t in enumerate(_fused_inputs())]
    out = apply(ROWS["mkldnn_rnn_layer"], part, (False,))
    sum(o.sum() for o in out).backward()
    for k, (a, b) in enumerate(zip(full, part)):
        if k in (1, 6):
            np.testing.assert_allclose(npy(b.grad), npy(a.grad), rtol=1e-12)
        else:
            assert b.grad is None


def row_cases():
    """(name, thunk giving nbgrad outputs) reaching the fused layer's row, for
    test_ops.test_every_row_has_a_case (its checks against torch and finite differences are
    the tests above)."""
    from nbgrad.autograd.apply import apply
    from nbgrad.ops import ROWS
    yield "mkldnn_rnn_layer", lambda: apply(ROWS["mkldnn_rnn_layer"], _fused_inputs(), (False,))


def _bilstm_grads(T, dtype, weights, x, y):
    """A 2-layer bidirectional LSTM and a linear head on identical weights: the loss and every
    parameter's gradient (as float64 numpy) after one backward, computed in `dtype`."""
    m = T.nn.LSTM(8, 16, num_layers=2, bidirectional=True)
    head = T.nn.Linear(32, 3)
    params = list(m.parameters()) + list(head.parameters())
    with T.no_grad():
        for p, w in zip(params, weights):
            p.copy_(T.tensor(w))
    m, head = m.to(getattr(T, dtype)), head.to(getattr(T, dtype))
    out, _ = m(T.tensor(x).to(getattr(T, dtype)))
    loss = T.nn.functional.cross_entropy(head(out).reshape(-1, 3), T.tensor(y))
    loss.backward()
    return loss.item(), [p.grad.double().numpy() for p in list(m.parameters()) +
                         list(head.parameters())]


@pytest.mark.parametrize("seed,scale", [(0, 1.0), (1, 4.0), (2, 8.0)])
def test_bilstm_float32_gradients_as_accurate_as_torchs(seed, scale):
    """Issue 23: a float32 Bi-LSTM's gradients, against torch's float64 ones on the same weights
    (gates pushed towards saturation by `scale`): nbgrad's relative error stays within twice
    torch's own float32 error (measured: 0.8-1.2x)."""
    rng = np.random.default_rng(seed)
    shapes = [tuple(p.shape) for p in torch.nn.LSTM(8, 16, num_layers=2,
                                                   bidirectional=True).parameters()]
    weights = [rng.uniform(-0.25, 0.25, s) * (scale if len(s) == 2 else 1) for s in shapes]
    weights += [rng.uniform(-0.2, 0.2, (3, 32)), rng.uniform(-0.2, 0.2, 3)]
    x, y = rng.standard_normal((30, 4, 8)) * 2, rng.integers(0, 3, 120)
    _, ref = _bilstm_grads(torch, "float64", weights, x, y)

    def err(grads):
        return np.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(grads, ref)) /
                       sum((b ** 2).sum() for b in ref))
    ours = err(_bilstm_grads(nbgrad, "float32", weights, x, y)[1])
    theirs = err(_bilstm_grads(torch, "float32", weights, x, y)[1])
    assert 1e-9 < theirs and ours <= 2 * theirs, (ours, theirs)


def _bilstm_param_grads(T, dtype, state, x):
    """Every parameter's gradient (name -> float64 numpy) of a float `dtype` 2-layer Bi-LSTM on
    the weights `state` (numpy), for the loss sum(out^2) + sum(h_n) + sum(c_n)."""
    m = T.nn.LSTM(x.shape[2], state["weight_hh_l0"].shape[1], num_layers=2, bidirectional=True,
                  dtype=getattr(T, dtype))
    m.load_state_dict({k: T.tensor(v.astype(dtype)) for k, v in state.items()})
    out, (h, c) = m(T.tensor(x.astype(dtype)))
    ((out * out).sum() + h.sum() + c.sum()).backward()
    return {k: p.grad.double().numpy() for k, p in m.named_parameters()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fused_bilstm_float32_gradients_per_parameter(seed):
    """Issue 23, per parameter: every float32 gradient of a 2-layer Bi-LSTM (the fused layer),
    against torch float64's on the same weights, within twice torch float32's own relative
    error. The reverse direction's weight gradients summed their T*B float32 products in time
    order, the large ones (the steps it ran last) first: 2-4x torch's error; in the forward's
    step order, as torch: 0.9-1.1x (benchmarks/bench_bilstm_float32_error.py).
    mkldnn on ("fused" in the name): both libraries' default float32 path."""
    assert torch.backends.mkldnn.enabled and nbgrad.backends.mkldnn.enabled
    torch.manual_seed(seed)
    state = {k: v.double().numpy() for k, v in torch.nn.LSTM(
        16, 32, num_layers=2, bidirectional=True).state_dict().items()}
    x = np.random.default_rng(seed).standard_normal((20, 8, 16))
    ref = _bilstm_param_grads(torch, "float64", state, x)
    ours = _bilstm_param_grads(nbgrad, "float32", state, x)
    theirs = _bilstm_param_grads(torch, "float32", state, x)
    for k, r in ref.items():
        e_ours = np.linalg.norm(ours[k] - r) / np.linalg.norm(r)
        e_theirs = np.linalg.norm(theirs[k] - r) / np.linalg.norm(r)
        assert 1e-9 < e_theirs and e_ours <= 2 * e_theirs, (k, e_ours, e_theirs)


@pytest.mark.parametrize("hx", [False, True])
def test_fused_layer_eval_forward_is_the_recorded_forward(hx):
    """The fused layer's forward with no graph (no_grad, inference_mode, eval()) gives the
    recorded forward's outputs and states bit for bit (training and evaluation do not drift
    apart), both of them within float32 tolerance of torch's oneDNN layer; the recorded one's
    backward, run twice (retain_graph), gives the same gradients twice (the kernel's saved
    gate activations are read, never rescaled in place)."""
    assert torch.backends.mkldnn.enabled and nbgrad.backends.mkldnn.enabled
    torch.manual_seed(5)
    ref = torch.nn.LSTM(6, 7, num_layers=2, bidirectional=True, batch_first=True)
    ours = nbgrad.nn.LSTM(6, 7, num_layers=2, bidirectional=True, batch_first=True)
    ours.load_state_dict({k: nbgrad.tensor(v.detach().numpy().copy())
                          for k, v in ref.state_dict().items()})
    x = np.random.default_rng(5).standard_normal((3, 5, 6)).astype(np.float32)
    states = [np.random.default_rng(k).standard_normal((4, 3, 7)).astype(np.float32)
              for k in (6, 7)] if hx else None

    def run(T, m, mode):
        args = (T.tensor(x),) + ((tuple(T.tensor(s) for s in states),) if hx else ())
        if mode == "train":
            out, (h, c) = m(*args)
            return out, h, c
        with getattr(T, mode)():
            out, (h, c) = m(*args)
        return out, h, c

    recorded = run(nbgrad, ours, "train")
    assert recorded[0].grad_fn is not None
    for mode in ("no_grad", "inference_mode"):
        for a, b in zip(run(nbgrad, ours, mode), recorded):
            assert a.grad_fn is None
            np.testing.assert_array_equal(npy(a), npy(b))
    for a, b in zip(recorded, run(torch, ref, "train")):
        np.testing.assert_allclose(npy(a), b.detach().numpy(), atol=2e-6, rtol=1e-5)
    loss = sum((o * o).sum() for o in recorded)
    first = [npy(g).copy() for g in nbgrad.autograd.grad(loss, list(ours.parameters()),
                                                        retain_graph=True)]
    second = nbgrad.autograd.grad(loss, list(ours.parameters()))
    for a, b in zip(first, second):
        np.testing.assert_array_equal(npy(b), a)
