"""The short paths taken for speed give what the general paths give, checked against torch:
in-place binary ops written straight into their target (`p.data += -lr * p.grad`)."""

import numpy as np
import pytest
import torch

import nbgrad
from test_nn_rows import graph

R = np.random.default_rng(0)


def _run(lib, fn):
    """fn(lib) -> list of tensors / numbers / error texts, as plain Python values."""
    try:
        out = fn(lib)
    except Exception as e:  # the error itself is compared
        return ("error", type(e).__name__, str(e).split("\n")[0])
    res = []
    for o in out:
        if isinstance(o, (torch.Tensor, nbgrad.Tensor)):
            res.append((str(o.dtype).split(".")[-1], o.detach().numpy().tolist()))
        else:
            res.append(o)
    return res


def _inplace_case(op, other, alpha=None, grad=False, dtype="float32", shape=(3, 4)):
    a0 = R.standard_normal(shape).astype(dtype)
    o0 = other if not isinstance(other, np.ndarray) else other.copy()

    def fn(lib):
        a = lib.tensor(a0.copy(), requires_grad=grad)
        o = lib.tensor(o0.copy()) if isinstance(o0, np.ndarray) else o0
        target = a.data if grad else a
        v = target._version
        kw = {} if alpha is None else {"alpha": alpha}
        with lib.no_grad() if grad == "no_grad" else _null():
            r = getattr(target, op)(o, **kw)
        return [r, a, r is target, target._version - v, a._version]
    return fn


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


CASES = {
    "add_tensor": _inplace_case("add_", R.standard_normal((3, 4)).astype(np.float32)),
    "add_row_broadcast": _inplace_case("add_", R.standard_normal(4).astype(np.float32)),
    "add_alpha": _inplace_case("add_", R.standard_normal((3, 4)).astype(np.float32), alpha=-0.1),
    "sub_alpha_scalar": _inplace_case("sub_", 3, alpha=0.5),
    "mul_scalar": _inplace_case("mul_", 0.9),
    "div_zero": _inplace_case("div_", 0),
    "div_tensor": _inplace_case("div_", R.standard_normal(4).astype(np.float32)),
    "add_data_of_leaf": _inplace_case("add_", R.standard_normal((3, 4)).astype(np.float32),
                                      grad=True),
    "mul_float64_other": _inplace_case("mul_", R.standard_normal((3, 4))),
    "add_int_other": _inplace_case("add_", np.arange(4)),
    "add_broadcast_too_big": _inplace_case("add_", R.standard_normal((2, 3, 4)).astype(
        np.float32)),
    "add_bad_shape": _inplace_case("add_", R.standard_normal(5).astype(np.float32)),
    "int_target_float_scalar": _inplace_case("add_", 0.5, dtype="int64"),
    "float64_target": _inplace_case("mul_", R.standard_normal((3, 4)), dtype="float64"),
    "bool_other": _inplace_case("mul_", True),
}


def _same(a, b):
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], list):
        return a[0] == b[0] and np.allclose(a[1], b[1], rtol=1e-6, atol=1e-7, equal_nan=True)
    return a == b


@pytest.mark.parametrize("name", CASES)
def test_inplace_binary_like_torch(name):
    got, want = _run(nbgrad, CASES[name]), _run(torch, CASES[name])
    if want[0] == "error":
        assert got == want
        return
    assert len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want)), (got, want)


def test_inplace_on_leaf_still_refused_and_recorded_ops_still_recorded():
    for lib in (torch, nbgrad):
        w = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            w.add_(1.0)
        y = w * 2
        y.mul_(3.0)  # recorded: MulBackward0 on a non-leaf
        assert type(y.grad_fn).__name__ == "MulBackward0"
        y.sum().backward()
        assert w.grad.tolist() == [6.0, 6.0, 6.0]


def test_inplace_through_data_alias_and_view():
    """`.data` shares memory under another storage; a view writes into its base."""
    res = []
    for lib in (torch, nbgrad):
        x = lib.arange(6.0)
        d = x.data
        d += x  # the very same elements
        v = x[1:4]
        v.mul_(lib.tensor([1.0, 2.0, 3.0]))
        res.append((x.tolist(), x._version, v._version))
    assert res[0] == res[1]


MATMULS = {  # batched matmul applies torch's nodes directly (no public reshape / expand)
    "3d_3d": (lambda a, b: a @ b, (2, 3, 4), (2, 4, 5)),
    "attention_scores": (lambda q, k: q @ k.transpose(-2, -1), (8, 16, 8), (8, 16, 8)),
    "4d_broadcast_both": (lambda a, b: a @ b, (2, 1, 3, 4), (5, 4, 2)),
    "4d_expanded_copy": (lambda a, b: a.expand(3, 2, 3, 4) @ b, (1, 2, 3, 4), (2, 4, 5)),
    "empty_batch": (lambda a, b: a @ b, (0, 3, 4), (1, 4, 2)),
    "empty_rows": (lambda a, b: a @ b, (2, 0, 3), (2, 3, 4)),
}


@pytest.mark.parametrize("name", MATMULS)
def test_batched_matmul_graph_values_grads_like_torch(name):
    fn, sa, sb = MATMULS[name]
    a0, b0 = R.standard_normal(sa), R.standard_normal(sb)
    res = []
    for lib in (torch, nbgrad):
        a, b = lib.tensor(a0, requires_grad=True), lib.tensor(b0, requires_grad=True)
        out = fn(a, b)
        (out * lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)))).sum() \
            .backward()
        res.append((graph(out), out.detach().numpy(), a.grad.numpy(), b.grad.numpy()))
    assert res[1][0] == res[0][0]
    for x, y in zip(res[1][1:], res[0][1:]):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


def test_batched_matmul_broadcast_error_like_torch():
    msgs = []
    for lib in (torch, nbgrad):
        with pytest.raises(RuntimeError) as e:
            lib.ones(2, 3, 4) @ lib.ones(3, 4, 2)
        msgs.append(str(e.value))
    assert msgs[1] == msgs[0]


SHAPES = [((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)),
          ((1, 3, 4), (2, 4, 5)), ((2, 3, 4), (1, 4, 5)), ((2, 2, 3, 4), (4,)),
          ((4,), (2, 2, 4, 3)), ((2, 1, 3, 4), (5, 4, 2)), ((0, 3, 4), (4, 2)), ((3, 4), (0, 4, 2))]


@pytest.mark.parametrize("grads", [(1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul_decomposition_like_torch(sa, sb, layout, grads):
    """Fold into mm / mv, squeeze a batch of one, or bmm: decided as aten's _matmul_impl
    decides (by which operand requires grad, and by the strides)."""
    a0, b0 = R.standard_normal(sa), R.standard_normal(sb)
    res = []
    for lib in (torch, nbgrad):
        a = lib.tensor(a0, requires_grad=bool(grads[0]))
        b = lib.tensor(b0, requires_grad=bool(grads[1]))
        x, y = a, b
        if layout == "transposed":  # same values, other strides
            x = a.mT.contiguous().mT if a.ndim > 1 else a
            y = b.mT.contiguous().mT if b.ndim > 1 else b
        out = x @ y
        out.sum().backward()
        res.append((graph(out), out.detach().numpy(),
                    [t.grad.numpy() for t in (a, b) if t.requires_grad]))
    assert res[1][0] == res[0][0]
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-10, atol=1e-12)
    for g1, g0 in zip(res[1][2], res[0][2]):
        np.testing.assert_allclose(g1, g0, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", ["last_dim", "all_dims", "two_dims_weight_only",
                                  "transposed_input", "empty_batch"])
def test_layer_norm_row_sums_like_torch(case):
    """layer_norm's row sums are products with a vector of ones: values and the three
    gradients equal torch's, float64 and float32."""
    shape, norm, affine = {"last_dim": ((4, 3, 8), (8,), (1, 1)),
                           "all_dims": ((3, 8), (3, 8), (1, 1)),
                           "two_dims_weight_only": ((2, 3, 4, 5), (4, 5), (1, 0)),
                           "transposed_input": ((5, 6), (5,), (1, 1)),
                           "empty_batch": ((0, 4), (4,), (1, 1))}[case]
    for dt, tol in ((np.float64, 1e-10), (np.float32, 2e-5)):
        x0 = R.standard_normal(shape).astype(dt)
        w0, b0 = R.standard_normal(norm).astype(dt), R.standard_normal(norm).astype(dt)
        g0 = R.standard_normal(shape[::-1] if case == "transposed_input" else shape).astype(dt)
        res = []
        for lib in (torch, nbgrad):
            x = lib.tensor(x0, requires_grad=True)
            w = lib.tensor(w0, requires_grad=True) if affine[0] else None
            b = lib.tensor(b0, requires_grad=True) if affine[1] else None
            xin = x.t() if case == "transposed_input" else x
            out = lib.nn.functional.layer_norm(xin, norm[::-1] if case == "transposed_input"
                                               else norm, w, b)
            (out * lib.tensor(g0)).sum().backward()
            res.append([out.detach().numpy()] + [t.grad.numpy() for t in (x, w, b)
                                                 if t is not None])
        for a, e in zip(res[1], res[0]):
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


EINSUMS = [("bij,bjk->bik", (2, 3, 4), (2, 4, 5)), ("ij,jk", (3, 4), (4, 2)),
           ("ii->i", (4, 4)), ("i,j->ij", (3,), (2,)), ("...ij,...jk->...ik", (2, 3, 4), (4, 5)),
           ("bi,bi->b", (3, 4), (3, 4)), ("iij,jk->ik", (3, 3, 2), (2, 5))]


@pytest.mark.parametrize("case", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_plan_replayed_like_torch(case):
    """The second and third calls on the same equation and shapes replay the first call's
    steps: values, graph and gradients stay torch's, whichever operands require grad."""
    eq, shapes = case[0], case[1:]
    arrays = [R.standard_normal(s) for s in shapes]
    n = len(shapes)
    for grads in ([True] * n, [True] * n, [False] + [True] * (n - 1)):
        res = []
        for lib in (torch, nbgrad):
            ts = [lib.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
            out = lib.einsum(eq, *ts)
            if out.requires_grad:
                out.sum().backward()
            res.append((graph(out) if out.grad_fn is not None else [], out.detach().numpy(),
                        [t.grad.numpy() for t in ts if t.requires_grad]))
        assert res[1][0] == res[0][0]
        np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-10, atol=1e-12)
        for a, b in zip(res[1][2], res[0][2]):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_einsum_errors_every_time():
    for _ in range(2):  # a plan that failed is not kept
        msgs = []
        for lib in (torch, nbgrad):
            with pytest.raises(RuntimeError) as e:
                lib.einsum("ij,jk->ik", lib.ones(2, 3), lib.ones(4, 5))
            msgs.append(str(e.value))
        assert msgs[1] == msgs[0]


def test_masked_fill_broadcast_mask_and_its_error_like_torch():
    res = []
    for lib in (torch, nbgrad):
        x = lib.arange(8.0).reshape(2, 4).requires_grad_()
        out = x.masked_fill(lib.tensor([True, False, False, True]), float("-inf"))
        with pytest.raises(RuntimeError) as e:
            x.masked_fill(lib.tensor([True, False, True]), 0.0)
        res.append((out.tolist(), type(out.grad_fn).__name__, str(e.value)))
    assert res[1] == res[0]


@pytest.mark.parametrize("index", [[2, 0, 2], [[0, -1], [1, 1]], [-3], [5], [-6]],
                         ids=["repeat", "2d_negative", "negative", "out_of_range",
                              "out_of_range_negative"])
def test_index_by_integer_tensor_like_torch(index):
    """x[int tensor] on the first dim (taken as a take): values, IndexBackward0 and its
    gradient, and the out-of-range text, as torch's."""
    w0 = R.standard_normal((5, 3))
    res = []
    for lib in (torch, nbgrad):
        w = lib.tensor(w0, requires_grad=True)
        try:
            out = w[lib.tensor(index)]
        except IndexError as e:
            res.append(str(e))
            continue
        (out * out).sum().backward()
        res.append((type(out.grad_fn).__name__, out.detach().numpy().tolist(),
                    w.grad.numpy().tolist()))
    assert res[1] == res[0]


def test_accumulate_grad_made_at_the_ops_line():
    """A leaf's AccumulateGrad takes the user's line the op found (no second frame walk): the
    line of the op that first used the leaf, through operators, views and modules."""
    from nbgrad.provenance import Location
    x, x2 = nbgrad.ones(3, requires_grad=True), nbgrad.ones(3, requires_grad=True)
    lin = nbgrad.nn.Linear(3, 2)
    lines = {}
    import inspect
    y = x * 2.0; lines["mul"] = inspect.currentframe().f_lineno  # noqa: E702
    v = x2.view(3, 1); lines["view"] = inspect.currentframe().f_lineno  # noqa: E702
    z = lin(nbgrad.ones(4, 3)); lines["linear"] = inspect.currentframe().f_lineno  # noqa: E702
    accs = {"mul": y.grad_fn.next_functions[0][0], "view": v.grad_fn.next_functions[0][0],
            "linear": z.grad_fn.next_functions[0][0]}  # (linear: the bias's)
    for k, acc in accs.items():
        assert type(acc).__name__ == "AccumulateGrad"
        loc = Location.of(acc._where)
        assert loc.filename == __file__ and loc.lineno == lines[k], k


# factories: plain non-negative int sizes take one loop (creation._plain_dims), the rest the
# full parsing; both give torch's shape, dtype, error type and text
_SIZES = {
    "ints": lambda lib: ((2, 3), {}), "tuple": lambda lib: (((2, 3),), {}),
    "list": lambda lib: (([2, 3],), {}), "Size": lambda lib: ((lib.Size([2, 3]),), {}),
    "zero": lambda lib: ((0, 4), {}), "one": lambda lib: ((3,), {}),
    "numpy int": lambda lib: ((np.int64(2), 3), {}),
    "int tensor": lambda lib: ((lib.tensor(2), 3), {}),
    "bool tensor": lambda lib: ((lib.tensor(True), 2), {}),
    "size=": lambda lib: ((), {"size": (2, 3)}),
    "size= and positional": lambda lib: ((2,), {"size": (2, 3)}),
    "size= int": lambda lib: ((), {"size": 3}),
}


@pytest.mark.parametrize("factory", ["ones", "zeros", "empty"])
@pytest.mark.parametrize("case", sorted(_SIZES))
def test_factory_sizes_like_torch(factory, case):
    def fn(lib):
        args, kw = _SIZES[case](lib)
        r = getattr(lib, factory)(*args, requires_grad=True, **kw)
        return [tuple(r.shape), str(r.dtype).split(".")[-1], r.requires_grad, r.is_leaf,
                r.detach().fill_(1).sum().item() if factory == "empty" else r.sum().item()]
    # (empty's memory may hold NaN or inf: * 0 would not clear it)
    assert _run(nbgrad, fn) == _run(torch, fn)


# with nothing to record (no_grad, inference_mode, no input requiring grad), batched matmul and
# cross_entropy compute their chains' arrays into one fresh tensor: torch's values, dtype, flags
_MODES = ["no_grad", "inference_mode", "plain"]


def _under(lib, mode, fn):
    if mode == "plain":
        return fn()
    with getattr(lib, mode)():
        return fn()


def _flags(r):
    return [tuple(r.shape), str(r.dtype).split(".")[-1], r.requires_grad, r.is_inference(),
            r._version, r._base is None, r.is_contiguous()]


@pytest.mark.parametrize("mode", _MODES)
@pytest.mark.parametrize("sa,sb,layout", [
    ((2, 3, 4), (2, 4, 5), "c"), ((2, 3, 4), (2, 4, 5), "t"), ((3, 4), (2, 4, 5), "c"),
    ((2, 1, 3, 4), (5, 4, 2), "c"), ((2, 1, 3, 4), (5, 4, 2), "t"), ((1, 3, 4), (2, 4, 5), "c"),
    ((2, 0, 4), (2, 4, 5), "c"), ((2, 3, 4), (3, 4, 5), "c"), ((2, 3, 4), (2, 5, 4), "c"),
    ((3, 4), (4, 5), "c"), ((3, 4), (4, 5), "t"), ((3, 4), (5, 4), "c")])
def test_batched_matmul_without_graph_like_torch(mode, sa, sb, layout):
    a0 = R.standard_normal(sa).astype("float32")
    b0 = R.standard_normal(sb).astype("float32")

    def fn(lib):
        a, b = lib.tensor(a0, requires_grad=True), lib.tensor(b0)
        if layout == "t":  # a non-contiguous operand (its fold is a reshape_alias)
            b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
        r = _under(lib, mode, lambda: a.detach() @ b if mode == "plain" else a @ b)
        return [r] + _flags(r)
    got, want = _run(nbgrad, fn), _run(torch, fn)
    if want[0] == "error":
        assert got == want
        return
    np.testing.assert_allclose(got[0][1], want[0][1], rtol=1e-5, atol=1e-5)
    assert got[0][0] == want[0][0] and got[1:] == want[1:]


@pytest.mark.parametrize("mode", _MODES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("target", ["classes", "one ignored", "all ignored", "out of range",
                                    "negative", "batch mismatch", "float64 logits"])
def test_cross_entropy_without_graph_like_torch(mode, reduction, target):
    x0 = R.standard_normal((5, 4)).astype("float64" if target == "float64 logits" else "float32")
    x0[0, 1] = -np.inf
    t0 = np.array([0, 3, 1, 2, 1])
    t0 = {"one ignored": np.array([0, -100, 1, 2, 1]), "all ignored": np.full(5, -100),
          "out of range": np.array([0, 3, 7, 2, 1]), "negative": np.array([0, 3, -3, 2, 1]),
          "batch mismatch": t0[:3]}.get(target, t0)

    def fn(lib):
        x = lib.tensor(x0, requires_grad=mode != "plain")
        r = _under(lib, mode, lambda: lib.nn.functional.cross_entropy(x, lib.tensor(t0),
                                                                      reduction=reduction))
        return [r] + _flags(r)
    got, want = _run(nbgrad, fn), _run(torch, fn)
    if want[0] == "error":  # torch's text, then nbgrad's note on it
        assert got[:2] == want[:2] and got[2].startswith(want[2])
        return
    np.testing.assert_allclose(got[0][1], want[0][1], rtol=1e-6)
    assert got[0][0] == want[0][0] and got[1:] == want[1:]


def _eval_flags(r):
    """_flags, the version left out for an inference tensor (which has none)."""
    f = _flags(r) if not r.is_inference() else None
    return f or [tuple(r.shape), str(r.dtype).split(".")[-1], r.requires_grad, True,
                 r._base is None, r.is_contiguous()]


@pytest.mark.parametrize("mode", _MODES)
@pytest.mark.parametrize("shape", [(32, 27), (128, 65), (7, 33), (1, 40)],
                         ids=["short_rows", "long_rows", "few_rows", "one_row"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_value_without_graph_is_the_graphs(mode, shape, reduction):
    """With nothing to record, cross_entropy computes the targets' log-probabilities alone: the
    same float32 value, bit for bit, as the recorded log_softmax + nll (whose backward needs
    every log-probability), and torch's value."""
    x0 = (R.standard_normal(shape) * 4).astype("float32")
    t0 = R.integers(0, shape[1], shape[0])
    x0[0, (t0[0] + 1) % shape[1]] = -np.inf  # a class of probability 0 (not the target)
    def fn(lib):
        r = _under(lib, mode, lambda: lib.nn.functional.cross_entropy(
            lib.tensor(x0), lib.tensor(t0), reduction=reduction))
        return [r] + _eval_flags(r)
    got, want = _run(nbgrad, fn), _run(torch, fn)
    np.testing.assert_allclose(got[0][1], want[0][1], rtol=1e-6)
    assert got[0][0] == want[0][0] and got[1:] == want[1:]
    ref = nbgrad.nn.functional.cross_entropy(nbgrad.tensor(x0, requires_grad=True),
                                             nbgrad.tensor(t0), reduction=reduction)
    value = _under(nbgrad, mode, lambda: nbgrad.nn.functional.cross_entropy(
        nbgrad.tensor(x0), nbgrad.tensor(t0), reduction=reduction))
    assert value._data.tobytes() == ref._data.tobytes()


@pytest.mark.parametrize("shape", [(32, 27), (128, 65), (7, 33), (1, 40), (40, 2)],
                         ids=["short_rows", "long_rows", "few_rows", "one_row", "two_classes"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_recorded_cross_entropy_is_the_chains_bit_for_bit(shape, dtype, reduction):
    """The recorded cross_entropy (one fused node: the targets' log-probabilities picked from
    log_softmax's parts, the gradient finished in its backward) gives the value and gradient of
    log_softmax then nll_loss recorded as their two nodes, bit for bit, for gradients 1, 0, -0.0
    (a -0.0 row sum is +0.0) and 2.5, with a class of probability 0 and one dominating class;
    and torch's, to rounding."""
    x0 = (R.standard_normal(shape) * 4).astype(dtype)
    t0 = R.integers(0, shape[1], shape[0])
    x0[0, (t0[0] + 1) % shape[1]] = -np.inf
    x0[-1, t0[-1]] = 1e4
    F = nbgrad.nn.functional
    for gv in (1.0, 0.0, -0.0, 2.5):
        got = []
        for fn in (lambda x, t: F.cross_entropy(x, t, reduction=reduction),
                   lambda x, t: F.nll_loss(x.log_softmax(1), t, reduction=reduction)):
            x = nbgrad.tensor(x0, requires_grad=True)
            loss = fn(x, nbgrad.tensor(t0))
            loss.backward(nbgrad.tensor(np.asarray(gv, dtype)))
            got.append((loss._data.tobytes(), x.grad._data.dtype, x.grad._data.tobytes(),
                        x.grad.stride()))
        assert got[0] == got[1], gv
    if dtype == "float16":
        return
    xt = torch.tensor(x0, requires_grad=True)
    torch.nn.functional.cross_entropy(xt, torch.tensor(t0), reduction=reduction).backward()
    x = nbgrad.tensor(x0, requires_grad=True)
    F.cross_entropy(x, nbgrad.tensor(t0), reduction=reduction).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "plain"])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, ceil_mode=True),
                                dict(kernel_size=(2, 3), dilation=2)],
                         ids=["tiles", "padded", "ceil", "dilated"])
def test_max_pool2d_without_graph_like_torch(mode, kw):
    """With nothing to record, max_pool2d computes the maxima alone (no choice of which one a
    gradient goes to): torch's values (NaN windows, a window of -inf beside the padding) and
    flags; and what the recorded path gives."""
    x0 = R.standard_normal((2, 3, 9, 8)).astype("float32")
    x0[0, 0, 0, 0] = np.nan
    x0[1, 1, :3, :3] = -np.inf

    def fn(lib):
        r = _under(lib, mode, lambda: lib.nn.functional.max_pool2d(lib.tensor(x0), **kw))
        return [r] + _eval_flags(r)
    got, want = _run(nbgrad, fn), _run(torch, fn)
    np.testing.assert_array_equal(np.array(got[0][1]), np.array(want[0][1]))
    assert got[0][0] == want[0][0] and got[1:] == want[1:]
    recorded = nbgrad.nn.functional.max_pool2d(nbgrad.tensor(x0, requires_grad=True), **kw)
    np.testing.assert_array_equal(recorded.detach().numpy(), np.array(got[0][1]))


@pytest.mark.parametrize("recorded", [False, True], ids=["no_graph", "recorded"])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 4)),
                                dict(kernel_size=(1, 2)), dict(kernel_size=(3, 1)),
                                dict(kernel_size=3, stride=1, padding=1)],
                         ids=["tiles", "wide", "row", "column", "padded"])
def test_max_pool2d_ties_keep_torchs_first_maximum(recorded, kw):
    """Windows of equal maxima, 0.0 and -0.0 (a ReLU's output holds both): the sign of each
    pooled zero is torch's, the first maximum in the window's raster order, with and without a
    graph; NaN beside them still wins."""
    x0 = np.where(R.random((2, 3, 6, 8)) < 0.5, -0.0, 0.0).astype("float32")
    x0[1, 2, 0, 0] = np.nan
    want = torch.nn.functional.max_pool2d(torch.tensor(x0), **kw).numpy()
    x = nbgrad.tensor(x0, requires_grad=recorded)
    with nbgrad.set_grad_enabled(recorded):
        got = nbgrad.nn.functional.max_pool2d(x, **kw).detach().numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_index_by_integer_tensor_without_graph_like_torch(dtype, mode):
    """x[int tensor] with nothing to record (a batch X[ix], an embedding table C[X]): torch's
    values, flags and out-of-range text."""
    w0 = R.standard_normal((5, 3)).astype("float32")
    for index in ([2, 0, 2], [[0, -1], [1, 1]], [5]):
        def fn(lib):
            i = lib.tensor(np.array(index, dtype))
            r = _under(lib, mode, lambda: lib.tensor(w0)[i])
            return [r] + _eval_flags(r)
        assert _run(nbgrad, fn) == _run(torch, fn)


def _leaf_program(lib, case):
    """Leaves fed in the ways the engine's leaf steps tell apart: by one edge (a new array, a
    view of one, or the incoming gradient passed on), by two edges, with a tensor hook, a
    post-accumulate hook, a hook on the AccumulateGrad node or one on the node feeding it that
    keeps the gradient; what is observable of their
    .grad: values, version, memory shared with another .grad, the order the hooks ran in."""
    g = lib.Generator().manual_seed(0)
    w = lib.randn(4, 3, generator=g, requires_grad=True)
    b = lib.randn(3, generator=g, requires_grad=True)
    c = lib.randn(4, 3, generator=g, requires_grad=True)
    e = lib.randn(5, 3, generator=g, requires_grad=True)
    f = lib.randn(15, generator=g, requires_grad=True)
    x = lib.randn(5, 4, generator=g)
    seen = []
    if case == "tensor_hook":
        w.register_hook(lambda t: seen.append("w") or t * 2)
        b.register_hook(lambda t: seen.append("b"))
    elif case == "post_acc":
        for name, p in (("w", w), ("b", b)):
            p.register_post_accumulate_grad_hook(
                lambda p, name=name: seen.append((name, round(p.grad.sum().item(), 4))))
    y = x @ w + b  # AddBackward0: b's gradient summed (a new array); MmBackward0: w's
    kept, kept_b = [], []
    if case == "node_hook":  # (b's AccumulateGrad; the hook keeps nothing: torch takes the buffer)
        y.grad_fn.next_functions[1][0].register_prehook(lambda go: seen.append("acc_b"))
    elif case == "node_hook_keeps":  # it keeps the gradient it was given: torch copies it
        y.grad_fn.next_functions[1][0].register_prehook(lambda go: kept_b.extend(go))
    elif case == "node_hook_tuple":  # it keeps the tuple
        y.grad_fn.next_functions[1][0].register_prehook(lambda go: kept_b.append(go))
    if case == "post_hook":  # MmBackward0's hook keeps the gradient it passes on to w
        y.grad_fn.next_functions[0][0].register_hook(lambda gi, go: kept.extend(gi))
    # e: the gradient an AddBackward0 passes on unchanged; f: a view of a new one (ViewBackward0)
    y = y * (x[:, :3] + e) * f.view(5, 3)
    if case == "twice":
        y = y + (x @ w) * 0.5  # w fed by two edges
    z = (y.tanh() @ c.t()).sum() + c.sum()  # c: along two edges as well
    z.backward()
    shares = w.grad.data_ptr() == b.grad.data_ptr()
    return [w.grad, b.grad, c.grad, e.grad, f.grad, w.grad._version, b.grad._version,
            c.grad._version, e.grad._version, f.grad._version, shares, seen,
            [k.data_ptr() == w.grad.data_ptr() for k in kept if k is not None],
            [(k if isinstance(k, lib.Tensor) else k[0]).data_ptr() == b.grad.data_ptr()
             for k in kept_b]]


@pytest.mark.parametrize("case", ["plain", "twice", "tensor_hook", "post_acc", "post_hook",
                                  "node_hook", "node_hook_keeps", "node_hook_tuple"])
def test_leaf_accumulation_like_torch(case):
    """The engine's step for a leaf nothing observes (accumulated as its last edge arrives)
    gives the .grad torch gives, and hooks see what torch's show, in its order."""
    got = _run(nbgrad, lambda lib: _leaf_program(lib, case))
    want = _run(torch, lambda lib: _leaf_program(lib, case))
    for a, b in zip(got[:5], want[:5]):  # the gradients: dtype and values
        assert a[0] == b[0] and np.allclose(a[1], b[1], rtol=1e-5, atol=1e-6)
    assert got[5:] == want[5:]


# a leaf's gradient as it arrives from the engine's chain step (handed on without its buffer)
# and from an expand (sum's zero-stride gradient, a read-only broadcast: copied into .grad, no
# Storage made for it first): .grad's values and _version over two backward calls, as torch's
# (a chain step handing on the wrong array fails 6 of these 7)
GRAD_GRAPHS = {
    "sum": lambda x: x.sum(),
    "mul-sum": lambda x: (x * 2.0).sum(),
    "chain": lambda x: _chain(x).sum(),
    "tanh-chain-mean": lambda x: _chain(x).tanh().mean(),
    "sum-dim-sum": lambda x: (x.sum(0) * 3.0).sum(),
    "expand": lambda x: x.expand(3, 2, 2).sum(),
    "two-uses": lambda x: (x * x + x).sum(),
}


def _chain(x):
    y = x
    for _ in range(5):
        y = y * 1.1 + 0.1
    return y


@pytest.mark.parametrize("name", sorted(GRAD_GRAPHS))
def test_leaf_grad_values_and_versions_like_torch(name):
    x0 = R.standard_normal((2, 2)).astype("float32")

    def fn(lib):
        x = lib.tensor(x0.copy(), requires_grad=True)
        GRAD_GRAPHS[name](x).backward()
        first = (x.grad.clone(), x.grad._version)
        GRAD_GRAPHS[name](x).backward()
        return [first[0], first[1], x.grad, x.grad._version]
    a, b = _run(torch, fn), _run(nbgrad, fn)
    assert b[1] == a[1] and b[3] == a[3]
    np.testing.assert_allclose(np.array(b[0][1]), np.array(a[0][1]), rtol=1e-5)
    np.testing.assert_allclose(np.array(b[2][1]), np.array(a[2][1]), rtol=1e-5)


# ---- an LSTM layer with nothing to record reads a batch-first input as it is (no clone) and
# makes one zero state: the values are those of the recorded path, bit for bit, and torch's
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("layers,bidirectional", [(1, False), (2, True)])
@pytest.mark.parametrize("given_state", [False, True])
def test_lstm_without_graph_gives_the_recorded_values(batch_first, layers, bidirectional,
                                                       given_state):
    torch.manual_seed(0)
    ref = torch.nn.LSTM(8, 16, num_layers=layers, bidirectional=bidirectional,
                        batch_first=batch_first)
    m = nbgrad.nn.LSTM(8, 16, num_layers=layers, bidirectional=bidirectional,
                       batch_first=batch_first)
    m.load_state_dict({k: nbgrad.tensor(v.detach().numpy().copy())
                       for k, v in ref.state_dict().items()})
    x0 = R.standard_normal((5, 7, 8)).astype("float32")
    d = layers * (2 if bidirectional else 1)
    h0 = R.standard_normal((d, 5 if batch_first else 7, 16)).astype("float32")
    c0 = R.standard_normal(h0.shape).astype("float32")

    def run(lib, mode, model, grad=False):
        x = lib.tensor(x0.copy(), requires_grad=grad)
        hx = (lib.tensor(h0.copy()), lib.tensor(c0.copy())) if given_state else None
        with getattr(lib, mode)():
            out, (h, c) = model(x, hx)
        return [t.detach().numpy() for t in (out, h, c)], out.stride()

    recorded, strides = run(nbgrad, "enable_grad", m, grad=True)  # the clone, the node
    expected, torch_strides = run(torch, "no_grad", ref)
    for mode in ("no_grad", "inference_mode"):
        got, got_strides = run(nbgrad, mode, m)
        assert got_strides == strides == torch_strides
        for g, r, e in zip(got, recorded, expected):
            assert g.dtype == r.dtype and g.shape == r.shape == e.shape
            assert np.array_equal(g.view(np.uint32), r.view(np.uint32))
            np.testing.assert_allclose(g, e, atol=2e-6)


@pytest.mark.parametrize("case", [
    lambda lib: [lib.cat([lib.ones(2, 3), lib.ones(2, 4)], 1)],
    lambda lib: [lib.cat([lib.ones(2, 3), lib.ones(3, 4)], 1)],  # error: dim 0 differs
    lambda lib: [lib.cat([lib.ones(2, 3, 4), lib.ones(2, 3, 5)], 1)],  # error: dim 2
    lambda lib: [lib.cat([lib.ones(2, 3), lib.ones(2, 3, 1)], 0)],  # error: ndim
    lambda lib: [lib.cat([lib.ones(2, 3), lib.tensor(1.0)], 0)],  # error: 0-d
    lambda lib: [lib.cat([lib.ones(0), lib.ones(2, 3), lib.ones(1, 3)], 0)],  # empty 1-d left out
    lambda lib: [lib.cat([lib.ones(0), lib.ones(0)], 0)],
    # a left-out empty 1-d tensor's dtype still promotes (nbgrad gave int64 in all three)
    lambda lib: [lib.cat([lib.zeros(0, dtype=lib.int64), lib.zeros(0)], 0)],
    lambda lib: [lib.cat([lib.zeros(0), lib.ones(2, dtype=lib.int64)], 0)],
    lambda lib: [lib.cat([lib.ones(2, 2, dtype=lib.int32), lib.zeros(0, dtype=lib.float64)])],
    lambda lib: [lib.cat([lib.ones(2, 3), lib.zeros(2, 2, dtype=lib.float64)], -1)],
    # equal shapes (the short path): dtypes promoted, dims counted from the end, out of range,
    # 0-d
    lambda lib: [lib.cat([lib.ones(2, 3), lib.zeros(2, 3, dtype=lib.float64)], -1)],
    lambda lib: [lib.cat([lib.arange(6.).reshape(2, 3), lib.arange(6.).reshape(2, 3) * 2], -2)],
    lambda lib: [lib.cat([lib.arange(4).reshape(2, 2)] * 3, 1)],
    lambda lib: [lib.cat([lib.ones(2, 3), lib.ones(2, 3)], 2)],  # error: dim out of range
    lambda lib: [lib.cat([lib.ones(2, 3), lib.ones(2, 3)], -3)],  # error: dim out of range
    lambda lib: [lib.cat([lib.tensor(1.0), lib.tensor(2.0)], 0)],  # error: 0-d
])
def test_cat_shape_checks_like_torch(case):
    assert _run(nbgrad, case) == _run(torch, case)


def test_cat_of_equal_shapes_grads_like_torch():
    """Attention heads' cat (equal shapes, the last dim): values, CatBackward0 and each input's
    gradient as torch's."""
    x0 = [R.standard_normal((2, 3, 4)).astype("float32") for _ in range(3)]
    w = R.standard_normal((2, 3, 12)).astype("float32")
    seen = []
    for lib in (torch, nbgrad):
        xs = [lib.tensor(a.copy(), requires_grad=True) for a in x0]
        y = lib.cat(xs, dim=-1)
        (y * lib.tensor(w)).sum().backward()
        seen.append((type(y.grad_fn).__name__, y.detach().numpy().tolist(),
                     [x.grad.numpy().tolist() for x in xs]))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("opt,names", [("AdamW", ["mul_", "addcdiv_"]), ("SGD", ["add_"])])
def test_optimizer_and_clip_writes_name_the_users_line(opt, names):
    """AdamW's and SGD's steps and clip_grad_norm_ write every parameter (gradient) from one
    user line and find that line once for all: each write is still recorded on its own tensor,
    with torch's versions, the op torch's would name (mul_ then addcdiv_ for AdamW's decay and
    update, add_ for SGD's, mul_ for the clip) and the line of the call."""
    import inspect
    versions = []
    for lib in (torch, nbgrad):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 2))
        o = getattr(lib.optim, opt)(m.parameters(), lr=0.1, momentum=0.9) if opt == "SGD" \
            else getattr(lib.optim, opt)(m.parameters(), lr=0.1)
        for _ in range(2):  # (SGD's momentum buffer: made, then updated)
            m(lib.ones(5, 3)).sum().backward()
            lib.nn.utils.clip_grad_norm_(m.parameters(), 0.1); lc = inspect.currentframe().f_lineno  # noqa: E702,E501
            o.step(); ls = inspect.currentframe().f_lineno  # noqa: E702
        versions.append([(p._version, p.grad._version) for p in m.parameters()])
    assert versions[1] == versions[0]
    k = len(names)
    for p in m.parameters():
        h = p._version_history()[-k:]  # (before them: the first step's and init's writes)
        assert [(v, name) for v, name, _ in h] == [
            (p._version - k + 1 + i, name) for i, name in enumerate(names)]
        assert [(w.filename, w.lineno) for _, _, w in h] == [(__file__, ls)] * k
        _, name, w = p.grad._version_history()[-1]
        assert (name, w.filename, w.lineno) == ("mul_", __file__, lc)


# view/reshape with two int sizes skip the general size parser: torch's shapes, errors, nodes
@pytest.mark.parametrize("sizes", [(-1, 8), (3, -1), (4, 6), (24, 1), (-1, 24), (-1, 5), (5, -1),
                                   (0, -1), (-1, 0), (-1, -1), (4, 5), (0, 24), ((4, 6),),
                                   ((-1, 12),), (-2, -12), (-2, 12), (-1, -2), (24, -5),
                                   (2, -3, 4), (-1, -1, -3)])
@pytest.mark.parametrize("how", ["view", "reshape"])
def test_two_int_sizes_like_torch(sizes, how):
    x0 = R.standard_normal((6, 4)).astype("float32")

    def fn(lib):
        x = lib.tensor(x0, requires_grad=True)
        y = getattr(x * 1, how)(*sizes)
        y.sum().backward()
        return [y, tuple(y.shape), type(y.grad_fn).__name__, y._base is not None, x.grad]
    assert _run(nbgrad, fn) == _run(torch, fn)


@pytest.mark.parametrize("targets", ["last class", "ignore_index inside", "strided", "one short", "too many", "2-d", "0-d", "class count"])
@pytest.mark.parametrize("mode", ["no_grad", "plain", "grad"])
def test_cross_entropy_target_checks_like_torch(targets, mode):
    """The one range check that lets the usual (N,) targets skip the general checks: targets
    at the edge of the classes, ignore_index naming a class, a strided target, and the shapes
    and dtypes the general checks refuse, as torch (value, gradient, error text)."""
    x0 = R.standard_normal((6, 5)).astype("float32")
    t0 = np.array([4, 0, 3, 4, 1, 2])
    kw = {}
    if targets == "ignore_index inside":
        kw = dict(ignore_index=3)
    t0 = {"strided": np.arange(12)[::2] % 5, "one short": t0[:5],
          "too many": np.append(t0, 1), "2-d": t0.reshape(2, 3), "0-d": np.array(2),
          "class count": np.array([4, 0, 5, 4, 1, 2])}.get(targets, t0)

    def fn(lib):
        x = lib.tensor(x0, requires_grad=mode == "grad")
        t = lib.tensor(t0) if targets != "strided" else lib.tensor(np.arange(12))[::2] % 5
        loss = _under(lib, "plain" if mode == "grad" else mode,
                      lambda: lib.nn.functional.cross_entropy(x, t, **kw))
        if mode == "grad":
            loss.backward()
            return [loss, x.grad, type(loss.grad_fn).__name__]
        return [loss] + _flags(loss)
    got, want = _run(nbgrad, fn), _run(torch, fn)
    if want[0] == "error":  # torch's text, then nbgrad's note on it
        assert got[:2] == want[:2] and got[2].startswith(want[2].split(" (")[0][:40]), got
        return
    np.testing.assert_allclose(got[0][1], want[0][1], rtol=1e-6)
    if mode == "grad":
        np.testing.assert_allclose(got[1][1], want[1][1], rtol=1e-5, atol=1e-7)
        assert got[2] == want[2]
    else:
        assert got[1:] == want[1:]

# The issue's chain (issue 25): the steps written out in `_record` (the node's fields, a one-input
# op's edge, the SavedTensor of an input or output), in `apply`'s binary path (the edge) and in
# `OpNode._backward` / `_release` (a saved array unpacked and released, a saved number as the
# cached 0-d array) give torch's values, gradients, graph, saved values and errors
def _chain_case(lib, kind):
    x = lib.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    a = x * 1.5
    b = (a + 0.5) * x
    c = b.tanh().sigmoid().exp()
    y = (c * 1.5 + x).tanh()
    s = y.sum()
    if kind == "graph":
        out, fn, seen = [], s.grad_fn, 0
        while fn is not None and seen < 20:  # the first input's chain, names and edge counts
            out.append((fn.name().replace("nbgrad::", "torch::"),
                        [None if n is None else n.name().replace("nbgrad::", "torch::")
                         for n, _ in fn.next_functions]))
            fn = fn.next_functions[0][0] if fn.next_functions else None
            seen += 1
        return out
    if kind == "saved":
        return [c.grad_fn._saved_result, b.grad_fn._saved_self, b.grad_fn._saved_other,
                a.grad_fn._saved_other]
    s.backward(retain_graph=kind == "twice_retained")
    if kind == "grads":
        return [x.grad]
    if kind in ("twice", "twice_retained"):
        s.backward()  # (the first backward released what it saved unless retained)
        return [x.grad]
    if kind == "freed_number":
        return [a.grad_fn._saved_other]
    raise AssertionError(kind)


def _stale_case(lib, where):
    x = lib.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    y = (x * 2.0).tanh() if where == "output" else x * 2.0
    # (exp saves its output; mul its input y, as self or as other: record's two-input saver)
    z = y.exp() if where == "output" else y * x if where == "input" else x * y
    y.add_(1.0)  # (output: tanh's result, saved by TanhBackward0)
    z.sum().backward()
    return [x.grad]


def _texts(res):
    return tuple(r.replace("nbgrad.", "torch.") if isinstance(r, str) else r for r in res)


@pytest.mark.parametrize("kind", ["graph", "saved", "grads", "twice", "twice_retained",
                                  "freed_number"])
def test_issue_chain_written_out_steps_like_torch(kind):
    got = _run(nbgrad, lambda lib: _chain_case(lib, kind))
    want = _run(torch, lambda lib: _chain_case(lib, kind))
    if want[0] == "error" or kind == "graph":
        assert _texts(got) == _texts(want), (got, want)
        return
    assert len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want)), (got, want)


@pytest.mark.parametrize("where", ["output", "input", "other"])
def test_issue_chain_stale_saved_tensor_like_torch(where):
    """A saved output (tanh's result, unpacked by the written-out step) or input (mul's self)
    modified in place after it was saved: torch's error, from the first backward."""
    got = _run(nbgrad, lambda lib: _stale_case(lib, where))
    want = _run(torch, lambda lib: _stale_case(lib, where))
    assert want[0] == "error" and _texts(got) == _texts(want), (got, want)


def test_array_formulas_read_numpy_without_getattr():
    """The formulas' `xp` over numpy holds numpy's names itself (no `__getattr__`, which costs
    CPython's specialized loads on each `xp.<name>` read), its own helpers first; the device
    double's module still resolves names on first use."""
    from nbgrad.ops import formulas
    assert "__getattr__" not in vars(formulas.ArrayFormulas)
    ns = formulas.NUMPY
    assert ns.exp is np.exp and ns.where is np.where and ns.linalg is np.linalg
    assert ns.sum is formulas.ArrayFormulas.sum and ns.sign.__func__ is formulas.ArrayFormulas.sign
    for name, helper in vars(formulas.ArrayFormulas).items():  # every helper wins over numpy's
        if not name.startswith("_"):  # name, those set on the class after it too (eye, ...)
            assert name not in vars(ns) and getattr(ns, name) == helper.__get__(ns), name
    x = np.array([np.nan, -2.0, 0.0])
    assert ns.sign(x).tolist() == [0.0, -1.0, 0.0]  # torch's sgn (numpy's sign: NaN)


@pytest.mark.parametrize("rows", ["non-negative", "negative", "mixed", "one negative"])
@pytest.mark.parametrize("width", [(10,), (1,), (3, 2)])
def test_lookup_gradient_wraps_negative_rows_like_torch(rows, width):
    """C[X]'s gradient (`_add_rows`: bincount over row * width + column; rows counted from the
    end are wrapped only when bincount refuses a negative position): against np.add.at summed
    in float64 (the same once-rounded sums: equal bits) and against torch to rounding; 96
    indices with repeats, so the bincount path runs."""
    n = 27
    x = {"non-negative": R.integers(0, n, (32, 3)), "negative": R.integers(-n, 0, (32, 3)),
         "mixed": R.integers(-n, n, (32, 3)), "one negative": R.integers(0, n, (32, 3))}[rows]
    if rows == "one negative":
        x[5, 1] = -1
    c = R.standard_normal((n,) + width).astype(np.float32)
    g = R.standard_normal(x.shape + width).astype(np.float32)
    a = nbgrad.tensor(c, requires_grad=True)
    a[nbgrad.tensor(x)].backward(nbgrad.tensor(g))
    want = np.zeros((n,) + width)
    np.add.at(want, x, g.astype(np.float64))
    assert a.grad.numpy().tobytes() == want.astype(np.float32).tobytes()
    b = torch.tensor(c, requires_grad=True)
    b[torch.tensor(x)].backward(torch.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
