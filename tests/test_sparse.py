"""Sparse COO gradients against torch: nn.Embedding / EmbeddingBag(sparse=True) give weight a
sparse gradient (indices, values, coalesced flag, repr), two of them sum as torch's kernels do
(merged or concatenated, by the values' contiguity; in .grad and in the engine's buffers),
torch.sparse_coo_tensor, coalesce / to_dense, SGD / Adagrad / SparseAdam steps bit for bit in
float32, the other optimizers' and clip_grad's errors, zero_grad, and a training loop."""

import re
import warnings

import numpy as np
import pytest
import torch

import nbgrad

warnings.filterwarnings("ignore", message="Sparse invariant checks")


def _both(fn):
    """fn(lib) run on torch and on nbgrad: (torch's result, nbgrad's)."""
    return fn(torch), fn(nbgrad)


def _bits(t):
    a = np.array(t.tolist())
    return a.astype(np.float32).view(np.int32) if t.dtype in (torch.float32, nbgrad.float32) \
        else a.view(np.int64)


def _same_sparse(gt, gn):
    assert gn.layout is nbgrad.sparse_coo and gt.layout is torch.sparse_coo
    assert gn.is_sparse and gn.is_coalesced() == gt.is_coalesced()
    assert (gn.sparse_dim(), gn.dense_dim(), gn._nnz()) == (gt.sparse_dim(), gt.dense_dim(),
                                                           gt._nnz())
    assert tuple(gn.shape) == tuple(gt.shape) and str(gn.dtype)[7:] == str(gt.dtype)[6:]
    assert gn._indices().tolist() == gt._indices().tolist()
    assert str(gn._indices().dtype) == "nbgrad.int64"
    assert (_bits(gn._values()) == _bits(gt._values())).all()
    assert repr(gn).replace("nbgrad.", "torch.") == repr(gt)


def _emb(lib, ids, w, how, **kw):
    y = lib.nn.functional.embedding(lib.tensor(ids), w, sparse=True, **kw)
    return {"sum": y.sum(), "mul": y.mul(2).sum(), "pow": y.pow(2).sum()}[how]


def _weight(lib, dtype="float32", shape=(6, 3)):
    lib.manual_seed(0)
    return lib.randn(*shape, dtype=getattr(lib, dtype), requires_grad=True)


@pytest.mark.parametrize("ids,kw", [([[0, 2, 2], [4, 0, 1]], {}),
                                    ([4, 1, 0, 1], dict(padding_idx=1)),
                                    ([1, 1], dict(padding_idx=1)), ([5], {})])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_sparse_gradient_is_torchs(ids, kw, dtype):
    def run(lib):
        w = _weight(lib, dtype)
        y = lib.nn.functional.embedding(lib.tensor(ids), w, sparse=True, **kw)
        assert type(y.grad_fn).__name__ == "EmbeddingBackward0"
        (y * lib.arange(3.0, dtype=w.dtype)).sum().backward()
        return w.grad
    gt, gn = _both(run)
    _same_sparse(gt, gn)
    assert gn.grad_fn is None and not gn.requires_grad and gn.is_leaf
    assert (_bits(gn.to_dense()) == _bits(gt.to_dense())).all()
    ct, cn = gt.coalesce(), gn.coalesce()
    _same_sparse(ct, cn)
    assert cn.indices().tolist() == ct.indices().tolist()
    if not gt.is_coalesced():
        with pytest.raises(RuntimeError) as et:
            gt.indices()
        with pytest.raises(RuntimeError) as en:
            gn.indices()
        assert str(en.value) == str(et.value)


@pytest.mark.parametrize("first,second", [("sum", "mul"), ("sum", "sum"), ("mul", "pow"),
                                          ("pow", "sum")])
def test_two_backwards_sum_into_grad_as_torch(first, second):
    """torch merges two sparse gradients whose values are contiguous, and concatenates them
    otherwise (the gradient of .sum() views an expanded tensor); .grad stays the same tensor."""
    def run(lib):
        w = _weight(lib)
        _emb(lib, [0, 2, 2, 5], w, first).backward()
        g = w.grad
        _emb(lib, [[0, 2], [1, 1]], w, second).backward()
        assert w.grad is g
        _emb(lib, [3, 0], w, "mul").backward()
        return w.grad
    _same_sparse(*_both(run))


def test_many_concatenations_coalesce_once_they_outnumber_the_elements():
    def run(lib):
        w = _weight(lib, shape=(2, 3))
        for _ in range(3):
            _emb(lib, [0, 1, 1], w, "sum").backward()
        return w.grad
    _same_sparse(*_both(run))


@pytest.mark.parametrize("order", ["dense_first", "sparse_first", "one_graph"])
def test_dense_and_sparse_gradients_sum_to_a_dense_grad(order):
    def run(lib):
        w = _weight(lib)
        if order == "one_graph":
            (_emb(lib, [4, 1], w, "sum") + (w * 2).sum()).backward()
        else:
            for step in ((lambda: (w * 3).pow(2).sum().backward()),
                         (lambda: _emb(lib, [4, 1, 4], w, "pow").backward()))[
                    ::1 if order == "dense_first" else -1]:
                step()
        return w.grad
    gt, gn = _both(run)
    assert gn.layout is nbgrad.strided and not gn.is_sparse
    assert (_bits(gn) == _bits(gt)).all()


def test_one_weight_in_two_lookups_of_one_graph():
    """The engine's buffer: the new gradient first, then the one already there (torch's
    InputBuffer), concatenated when their values are not contiguous."""
    def run(lib):
        w = _weight(lib)
        (_emb(lib, [4, 1], w, "sum") + _emb(lib, [0, 1, 3], w, "sum") * 3 +
         _emb(lib, [2, 2], w, "mul")).backward()
        return w.grad
    _same_sparse(*_both(run))


@pytest.mark.parametrize("mode,kw", [("sum", {}), ("mean", {}), ("sum", dict(padding_idx=1)),
                                     ("sum", dict(psw=True))])
def test_embedding_bag_sparse_gradient(mode, kw):
    def run(lib):
        lib.manual_seed(0)
        pad = kw.get("padding_idx")
        e = lib.nn.EmbeddingBag(6, 3, mode=mode, sparse=True, padding_idx=pad)
        psw = lib.tensor([1.0, 2.0, 3.0, 4.0, 0.5]) if kw.get("psw") else None
        out = e(lib.tensor([0, 1, 1, 3, 5]), lib.tensor([0, 3]), per_sample_weights=psw)
        (out * lib.arange(3.0)).sum().backward()
        return e.weight.grad
    _same_sparse(*_both(run))


def test_embedding_bag_max_refuses_sparse_and_reprs():
    for lib in (torch, nbgrad):
        with pytest.raises(ValueError, match="max mode does not support sparse weights"):
            lib.nn.EmbeddingBag(5, 3, mode="max", sparse=True)(lib.tensor([[0, 1]]))
    rt, rn = _both(lambda lib: repr(lib.nn.Embedding(5, 3, padding_idx=0, max_norm=1.0,
                                                     sparse=True)))
    assert rn == rt


def test_sparse_coo_tensor_and_its_methods():
    def run(lib):
        s = lib.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
        s1 = lib.sparse_coo_tensor(lib.tensor([[0, 2]]), lib.ones(2, 2), (4, 2),
                                   dtype=lib.float64, requires_grad=True)
        inferred = lib.sparse_coo_tensor([[0, 3]], [1, 2])
        one = lib.sparse_coo_tensor([[1]], [1.0], (3,))
        a = lib.sparse_coo_tensor([[0, 2, 2]], lib.ones(3, 2), (4, 2))
        b = lib.sparse_coo_tensor([[0, 2, 1]], lib.ones(3, 2) * 2, (4, 2))
        z = a.clone().zero_()
        return [repr(x) for x in (s, s1, inferred, one, a + b, a * 2, -a, z, a.coalesce(),
                                  a.pow(2), a.double(), s.to_dense(), lib.ones(4, 2) + a,
                                  lib.ones(4, 2).add_(a, alpha=-0.5))] + [
            s.is_coalesced(), one.is_coalesced(), z.is_coalesced(), (a + b).is_coalesced(),
            s.type(), s.is_contiguous(), s.stride(), len(s), s.numel(), s.dim(),
            inferred.dtype is lib.int64, s.element_size()]
    rt, rn = _both(run)
    assert [r.replace("nbgrad.", "torch.") if isinstance(r, str) else r for r in rn] == rt


@pytest.mark.parametrize("call", ["numpy", "storage", "data_ptr", "tolist", "add_dense",
                                  "bad_size"])
def test_sparse_tensors_refuse_as_torch(call):
    def run(lib):
        s = lib.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,))
        return {"numpy": s.numpy, "storage": s.untyped_storage, "data_ptr": s.data_ptr,
                "tolist": s.tolist, "add_dense": lambda: s + lib.ones(3),
                "bad_size": lambda: lib.sparse_coo_tensor([0, 1], [1, 2], (2,))}[call]()
    with pytest.raises(Exception) as et:
        run(torch)
    with pytest.raises(type(et.value)) as en:
        run(nbgrad)
    assert str(en.value) == str(et.value)


OPTS = [("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9)),
        ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5)),
        ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
        ("SGD", dict(lr=0.1, maximize=True, momentum=0.5)),
        ("Adagrad", dict(lr=0.1)), ("Adagrad", dict(lr=0.1, lr_decay=0.1,
                                                    initial_accumulator_value=0.5)),
        ("Adagrad", dict(lr=0.1, maximize=True)), ("SparseAdam", dict(lr=0.1)),
        ("SparseAdam", dict(lr=0.1, maximize=True, betas=(0.8, 0.9))), ("LBFGS", dict(lr=0.1))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cls,kw", OPTS)
def test_optimizers_step_on_sparse_gradients_as_torch(cls, kw, dtype):
    def run(lib):
        w = _weight(lib, dtype)
        opt = getattr(lib.optim, cls)([w], **kw)
        for ids, how in (([0, 2, 2, 4], "sum"), ([1, 0], "pow"), ([3, 3], "mul"),
                         ([4, 0, 4], "pow")):
            opt.zero_grad()
            _emb(lib, ids, w, how).backward()
            opt.step((lambda: 0.0) if cls == "LBFGS" else None)
        st = opt.state[w]
        return w.detach(), {k: (v.layout if hasattr(v, "layout") else v) for k, v in st.items()}
    (wt, st), (wn, sn) = _both(run)
    if dtype == "float32":  # (float64: torch fuses p + alpha * v, numpy rounds twice)
        assert (_bits(wn) == _bits(wt)).all()
    else:
        np.testing.assert_allclose(np.array(wn.tolist()), wt.numpy(), rtol=1e-13, atol=1e-14)
    if cls != "LBFGS":
        assert {k: str(v).replace("nbgrad.", "torch.") for k, v in sn.items()} == \
            {k: str(v) for k, v in st.items() if k in sn} and len(sn) == len(st)


BAD_OPTS = [("SGD", dict(weight_decay=0.1)), ("Adagrad", dict(weight_decay=0.1)),
            ("Adam", {}), ("AdamW", {}), ("RMSprop", {}), ("Adadelta", {}), ("Adamax", {}),
            ("NAdam", {}), ("RAdam", {}), ("ASGD", {}), ("Rprop", {}), ("Adafactor", {})]


@pytest.mark.parametrize("cls,kw", BAD_OPTS)
def test_optimizers_refuse_sparse_gradients_with_torchs_errors(cls, kw):
    def run(lib):
        w = _weight(lib)
        opt = getattr(lib.optim, cls)([w], lr=0.1, **kw)
        _emb(lib, [0, 1], w, "sum").backward()
        before = w.detach().clone()
        with pytest.raises(RuntimeError) as e:
            opt.step()
        assert w.detach().tolist() == before.tolist()
        return str(e.value)
    et, en = _both(run)
    assert en == et


def test_sparse_adam_refuses_sparse_parameters_and_dense_gradients():
    def run(lib):
        s = lib.sparse_coo_tensor([[0]], [1.0], (2,))
        with pytest.raises(ValueError) as e:
            lib.optim.SparseAdam([s])
        return str(e.value)
    et, en = _both(run)
    assert en == et


@pytest.mark.parametrize("call", ["norm", "norm_inf", "norm_noforeach", "value",
                                  "value_noforeach"])
def test_clip_grad_over_a_sparse_grad_raises_as_torch(call):
    def run(lib):
        w = _weight(lib)
        _emb(lib, [0, 1], w, "sum").backward()
        u = lib.nn.utils
        {"norm": lambda: u.clip_grad_norm_([w], 1.0),
         "norm_inf": lambda: u.clip_grad_norm_([w], 1.0, norm_type="inf"),
         "norm_noforeach": lambda: u.clip_grad_norm_([w], 1.0, foreach=False),
         "value": lambda: u.clip_grad_value_([w], 0.1),
         "value_noforeach": lambda: u.clip_grad_value_([w], 0.1, foreach=False)}[call]()
    with pytest.raises(NotImplementedError) as et:
        run(torch)
    with pytest.raises(NotImplementedError) as en:
        run(nbgrad)
    first = re.match(r"[^\[]*\(if using custom build\)\.", str(et.value)).group(0)
    assert str(en.value) == first


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_of_a_sparse_grad(set_to_none):
    def run(lib):
        w = _weight(lib)
        opt = lib.optim.SGD([w], lr=0.1)
        _emb(lib, [0, 1], w, "sum").backward()
        opt.zero_grad(set_to_none=set_to_none)
        return repr(w.grad)
    rt, rn = _both(run)
    assert rn.replace("nbgrad.", "torch.") == rt


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_training_loop_with_sparse_embeddings_and_two_optimizers(dtype):
    """An EmbeddingBag and an Embedding (sparse) trained by SparseAdam, the rest by Adam: the
    parameters after 8 steps are torch's (float32: to rounding)."""
    def run(lib):
        lib.manual_seed(0)
        nn = lib.nn
        bag = nn.EmbeddingBag(20, 6, mode="mean", sparse=True)
        emb = nn.Embedding(20, 6, sparse=True, padding_idx=0)
        head = nn.Sequential(nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 3))
        mods = (bag, emb, head)
        if dtype == "float64":
            mods = tuple(m.double() for m in mods)
        sparse_opt = lib.optim.SparseAdam(list(bag.parameters()) + list(emb.parameters()),
                                          lr=0.05)
        dense_opt = lib.optim.Adam(head.parameters(), lr=0.01)
        g = np.random.default_rng(1)
        losses = []
        for step in range(8):
            ids = lib.tensor(g.integers(0, 20, (4, 5)))
            target = lib.tensor(g.integers(0, 3, 4))
            sparse_opt.zero_grad()
            dense_opt.zero_grad()
            x = lib.cat([bag(ids), emb(ids).sum(1)], 1)
            loss = lib.nn.functional.cross_entropy(head(x), target)
            loss.backward()
            assert bag.weight.grad.is_sparse and emb.weight.grad.is_sparse
            sparse_opt.step()
            dense_opt.step()
            losses.append(loss.item())
        return losses, [p.detach() for m in mods for p in m.parameters()]
    (lt, pt), (ln, pn) = _both(run)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ln, lt, **tol)
    for a, b in zip(pn, pt):
        np.testing.assert_allclose(np.array(a.tolist()), b.numpy(), **tol)


def test_version_string_is_torchs_cpu_wheels():
    assert nbgrad.version.__version__ == torch.__version__ == "2.13.0+cpu"


@pytest.mark.parametrize("lib_name", ["nbgrad", "torch"])
def test_the_panels_gradient_watch_reads_a_sparse_grad(lib_name):
    """The model panel's gradient norms and zero counts of a sparse .grad are those of its
    dense value (read with to_dense() here), and watching it changes no gradient."""
    from nbgrad.notebook import model_hooks
    lib = nbgrad if lib_name == "nbgrad" else torch
    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        tracker.reset_cell()
        lib.manual_seed(0)
        emb = lib.nn.Embedding(10, 4, sparse=True)
        head = lib.nn.Linear(4, 1)
        out = head(emb(lib.tensor([[1, 2, 2], [5, 1, 0]])).sum(1)).pow(2).mean()
        out.backward()
        assert emb.weight.grad.is_sparse
        for name, p in list(emb.named_parameters()) + list(head.named_parameters()):
            g = p.grad.to_dense() if p.grad.is_sparse else p.grad
            g = np.array(g.tolist()).reshape(-1)
            st = tracker.params[id(p)]
            assert list(st.norms) == pytest.approx([float(np.sqrt(g @ g))], rel=1e-6), name
            assert st.zeros == np.count_nonzero(g == 0) / g.size, name
    finally:
        tracker.uninstall()
    assert emb.weight.grad.is_sparse and emb.weight.grad._nnz() == 6


def row_cases():
    """(name, thunk giving nbgrad outputs) reaching the sparse embedding row, for
    test_ops.test_every_row_has_a_case; the checks against torch are the tests above."""
    def run():
        w = _weight(nbgrad)
        return nbgrad.nn.functional.embedding(nbgrad.tensor([[0, 2, 2]]), w, sparse=True)
    yield "embedding_sparse", run


@pytest.mark.parametrize("weights_only", [True, False])
def test_sparse_tensors_in_checkpoints_both_ways(tmp_path, weights_only):
    """torch's format for a sparse tensor (_rebuild_sparse_tensor, _get_layout): a file either
    library writes, the other reads; an SGD momentum buffer (sparse) in an optimizer state."""
    def write(lib, path):
        w = _weight(lib)
        opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
        _emb(lib, [0, 2, 2], w, "mul").backward()
        opt.step()
        s = lib.sparse_coo_tensor([[0, 2, 2]], lib.arange(6.0).reshape(3, 2), (4, 2))
        lib.save({"g": w.grad, "c": s.coalesce(), "s": s, "opt": opt.state_dict()}, path)
    write(torch, tmp_path / "torch.pt")
    write(nbgrad, tmp_path / "nbgrad.pt")
    ref = torch.load(tmp_path / "torch.pt", weights_only=weights_only)
    ours = nbgrad.load(tmp_path / "torch.pt", weights_only=weights_only)  # torch's file
    theirs = torch.load(tmp_path / "nbgrad.pt", weights_only=weights_only)  # nbgrad's file
    for k in ("g", "c", "s"):
        _same_sparse(ref[k], ours[k])
        _same_sparse(theirs[k], _as_nbgrad(ref[k]))
    _same_sparse(ref["opt"]["state"][0]["momentum_buffer"],
                 ours["opt"]["state"][0]["momentum_buffer"])
    _same_sparse(theirs["opt"]["state"][0]["momentum_buffer"],
                 _as_nbgrad(ref["opt"]["state"][0]["momentum_buffer"]))


def _as_nbgrad(t):
    return nbgrad.sparse_coo_tensor(nbgrad.tensor(t._indices().numpy()),
                                    nbgrad.tensor(t._values().numpy()), tuple(t.shape),
                                    is_coalesced=t.is_coalesced())


def test_deepcopy_and_pickle_keep_a_sparse_tensor():
    import copy
    import pickle
    def run(lib):
        emb = lib.nn.Embedding(5, 3, sparse=True)
        emb(lib.tensor([1, 2, 2])).sum().backward()
        g = emb.weight.grad
        return [repr(x) for x in (copy.deepcopy(g), pickle.loads(pickle.dumps(g)),
                                  copy.deepcopy(emb).weight.grad)]
    rt, rn = _both(run)
    assert [r.replace("nbgrad.", "torch.") for r in rn] == rt


def test_a_differentiable_sparse_gradient_is_refused_not_made_without_its_graph():
    w = _weight(nbgrad)
    y = _emb(nbgrad, [1, 2], w, "pow")
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        nbgrad.autograd.grad(y, w, create_graph=True)
    wt = _weight(torch)  # (torch records SparseCooTensorWithDimsAndTensorsBackward0 there)
    gt, = torch.autograd.grad(_emb(torch, [1, 2], wt, "pow"), wt, create_graph=True)
    assert gt.is_sparse and gt.requires_grad
