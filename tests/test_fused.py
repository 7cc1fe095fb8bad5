"""Fused chains (nbgrad.autograd.fused): batched matmul and linear on (N, *, in) input record one
node standing for torch's chain of nodes. Everything observable must be torch's: the graph when
walked, gradients (values, strides), second derivatives, hooks, error texts, hook order."""
import numpy as np
import pytest
import torch

import nbgrad

RNG = np.random.default_rng(7)

# (a shape, b shape, b made by transposing an array of its last two dims swapped)
# fused: whether torch's decomposition is the expand/view/bmm chain fused here (a broadcast
# batch folds by a copy: recorded as it is; None: not checked)
MATMUL = [((4, 5, 3), (4, 3, 2), False, True), ((4, 5, 3), (4, 3, 2), True, True),
          ((2, 1, 5, 3), (4, 3, 2), False, False), ((3, 2, 4, 3), (3, 2, 3, 5), False, True),
          ((1, 5, 3), (4, 3, 2), False, None)]


def _walk(fn, depth=0):
    if fn is None:
        return ["  " * depth + "None"]
    out = ["  " * depth + type(fn).__name__]
    for f, nr in fn.next_functions:
        out += [f"  {nr}"] + _walk(f, depth + 1)
    return out


def _pair(lib, arr, rg):
    return lib.tensor(arr, requires_grad=rg)


def _matmul_case(lib, sa, sb, tb, ra, rb, arrays):
    a0 = _pair(lib, arrays[0], ra)
    b0 = _pair(lib, arrays[1], rb)
    a = a0 * 1.5 if ra else a0
    b = b0.transpose(-2, -1) if tb else b0
    return a0, b0, a, b


def _arrays(sa, sb, tb):
    sb_ = sb[:-2] + (sb[-1], sb[-2]) if tb else sb
    return (RNG.standard_normal(sa).astype(np.float32), RNG.standard_normal(sb_).astype(np.float32))


@pytest.mark.parametrize("sa,sb,tb,fuses", MATMUL)
@pytest.mark.parametrize("ra,rb", [(True, True), (True, False), (False, True)])
def test_matmul_graph_and_grads_as_torch(sa, sb, tb, fuses, ra, rb):
    arrays = _arrays(sa, sb, tb)
    seen = {}
    for lib in (torch, nbgrad):
        a0, b0, a, b = _matmul_case(lib, sa, sb, tb, ra, rb, arrays)
        y = a @ b
        if lib is nbgrad and fuses is not None:
            assert (getattr(y.grad_fn, "_chain", None) is not None) == fuses
        (y * y).sum().backward()
        seen[lib.__name__] = [(t.grad.numpy().copy(), t.grad.stride(), t.grad._version)
                              if t.grad is not None else None for t in (a0, b0)]
        y2 = a @ b
        seen[lib.__name__].append(_walk(y2.grad_fn))
    t, n = seen["torch"], seen["nbgrad"]
    assert n[2] == t[2]
    for x, y in zip(t[:2], n[:2]):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(y[0], x[0], rtol=1e-5, atol=1e-5)
            assert y[1:] == x[1:]  # strides and version (the squeezed batch of one too)


@pytest.mark.parametrize("shape", [(4, 5, 3), (2, 3, 4, 3), (5, 3)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rx,rw", [(True, True), (True, False), (False, True)])
def test_linear_graph_and_grads_as_torch(shape, bias, rx, rw):
    X = RNG.standard_normal(shape).astype(np.float32)
    W = RNG.standard_normal((6, shape[-1])).astype(np.float32)
    Bv = RNG.standard_normal(6).astype(np.float32)
    seen = {}
    for lib in (torch, nbgrad):
        x, w = lib.tensor(X, requires_grad=rx), lib.tensor(W, requires_grad=rw)
        b = lib.tensor(Bv, requires_grad=True) if bias else None
        y = lib.nn.functional.linear(x, w, b)
        if lib is nbgrad and (bias or len(shape) > 2):
            fn = y.grad_fn if not bias or len(shape) == 2 else y.grad_fn._next[0][0]
            assert fn._chain is not None  # (the visible node, or the view's input's)
        (y * y).sum().backward()
        seen[lib.__name__] = [(t.grad.numpy().copy(), t.grad.stride()) if t.grad is not None
                              else None for t in (x, w) + ((b,) if bias else ())]
        y2 = lib.nn.functional.linear(x, w, b)
        seen[lib.__name__].append(_walk(y2.grad_fn))
        node = y2.grad_fn if len(shape) == 2 or not bias else y2.grad_fn.next_functions[0][0]
        saved = [getattr(node, "_saved_" + n) for n in ("mat1", "mat2")] if bias else []
        seen[lib.__name__].append([None if v is None else tuple(v.shape) for v in saved])
    t, n = seen["torch"], seen["nbgrad"]
    assert n[-2:] == t[-2:]
    for x, y in zip(t[:-2], n[:-2]):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(y[0], x[0], rtol=1e-5, atol=1e-5)
            assert y[1] == x[1]


def test_saved_values_of_a_fused_addmm_as_torch():
    X = RNG.standard_normal((5, 3)).astype(np.float32)
    W = RNG.standard_normal((4, 3)).astype(np.float32)
    out = []
    for lib in (torch, nbgrad):
        x, w = lib.tensor(X, requires_grad=True), lib.tensor(W, requires_grad=True)
        y = lib.nn.functional.linear(x, w, lib.zeros(4, requires_grad=True))
        fn = y.grad_fn  # nothing looked below it yet: the saved values build the chain
        m2 = fn._saved_mat2
        out.append((fn._saved_mat1.detach().numpy().copy(), m2.detach().numpy().copy(),
                    m2.stride(),
                    fn._saved_beta, fn._saved_alpha, type(m2.grad_fn).__name__))
    t, n = out
    assert np.array_equal(n[0], t[0]) and np.array_equal(n[1], t[1]) and n[2:] == t[2:]


def test_fused_backward_equals_the_built_chain_exactly():
    """The one-step backward runs the chain's formulas: bit-identical gradients."""
    A, B = _arrays((4, 5, 3), (4, 3, 2), True)
    out = []
    for build in (False, True):
        a = nbgrad.tensor(A, requires_grad=True)
        b = nbgrad.tensor(B, requires_grad=True)
        y = a @ b.transpose(-2, -1)
        if build:
            y.grad_fn.next_functions
            assert y.grad_fn._chain is None
        (y * y).sum().backward()
        out.append((a.grad.numpy(), b.grad.numpy()))
    assert np.array_equal(out[0][0], out[1][0]) and np.array_equal(out[0][1], out[1][1])


@pytest.mark.parametrize("kind", ["matmul", "linear", "linear_bias", "linear_bias_2d"])
def test_second_derivative_as_torch(kind):
    A = RNG.standard_normal((4, 5) if kind.endswith("2d") else (3, 4, 5)).astype(np.float32)
    B = RNG.standard_normal((3, 5, 2) if kind == "matmul" else (2, 5)).astype(np.float32)
    C = RNG.standard_normal(2).astype(np.float32)
    res = []
    for lib in (torch, nbgrad):
        a, b = lib.tensor(A, requires_grad=True), lib.tensor(B, requires_grad=True)
        bias = lib.tensor(C, requires_grad=True) if "bias" in kind else None
        y = a @ b if kind == "matmul" else lib.nn.functional.linear(a, b, bias)
        ga, gb = lib.autograd.grad((y * y).sum(), (a, b), create_graph=True)
        h = lib.autograd.grad((ga * ga).sum() + gb.sum(), (a, b))
        res.append([t.detach().numpy() for t in (ga, gb) + h])
    for x, y in zip(*res):
        np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("op", ["matmul", "linear", "linear_bias"])
def test_inplace_error_names_the_saved_view_as_torch(which, op):
    A, B = _arrays((2, 3, 4), (2, 4, 5), False)
    B = B[0].T.copy() if op != "matmul" else B
    msgs = []
    for lib in (torch, nbgrad):
        a0, b0 = lib.tensor(A, requires_grad=True), lib.tensor(B, requires_grad=True)
        a, b = a0 * 1.0, b0 * 1.0
        F = lib.nn.functional
        y = a @ b if op == "matmul" else F.linear(a, b, lib.ones(5) if op == "linear_bias"
                                                  else None)
        (a if which == "a" else b).mul_(2)
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        msgs.append(str(e.value).split("\n")[0].replace("nbgrad.", "torch."))
    assert msgs[1] == msgs[0]


def test_backward_twice_and_graph_after_release_as_torch():
    A, B = _arrays((2, 3, 4), (2, 4, 5), False)
    out = []
    for lib in (torch, nbgrad):
        a, b = lib.tensor(A, requires_grad=True), lib.tensor(B, requires_grad=True)
        y = (a @ b).sum()
        y.backward()
        walked = _walk(y.grad_fn)  # the chain, built after its saved values were freed
        with pytest.raises(RuntimeError) as e:
            y.backward()
        out.append((walked, str(e.value)))
    assert out[1] == out[0]


def test_hooks_on_the_node_and_on_the_leaves_as_torch():
    A, B = _arrays((2, 3, 4), (2, 4, 5), False)
    logs = []
    for lib in (torch, nbgrad):
        log = []
        a, b = lib.tensor(A, requires_grad=True), lib.tensor(B, requires_grad=True)
        y = a @ b
        y.grad_fn.register_hook(lambda gi, go: log.append(
            ("post", [tuple(g.shape) for g in gi], [tuple(g.shape) for g in go])))
        y.grad_fn.register_prehook(lambda go: log.append(("pre", tuple(go[0].shape))))
        a.register_hook(lambda g: log.append(("a", tuple(g.shape))))
        b.register_hook(lambda g: log.append(("b", tuple(g.shape))))
        z = a @ b  # not looked at: stays fused; the leaves' hooks run in torch's order
        (y.sum() + z.sum()).backward()
        logs.append(log)
    assert logs[1] == logs[0]


def test_not_fused_under_anomaly_detection_and_saved_tensor_hooks():
    a = nbgrad.randn(2, 3, 4, requires_grad=True)
    b = nbgrad.randn(2, 4, 5, requires_grad=True)
    with nbgrad.autograd.detect_anomaly():
        assert getattr((a @ b).grad_fn, "_chain", None) is None
    with nbgrad.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        assert getattr((a @ b).grad_fn, "_chain", None) is None
    with nbgrad.no_grad():
        assert (a @ b).grad_fn is None
    assert (a @ b).grad_fn._chain is not None


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore", [False, True])
def test_cross_entropy_as_torch(reduction, ignore):
    L = RNG.standard_normal((6, 5)).astype(np.float32)
    Y = RNG.integers(0, 5, 6)
    if ignore:
        Y[2] = -100  # (recorded as the two nodes it is)
    out = []
    for lib in (torch, nbgrad):
        x = lib.tensor(L, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(x * 2, lib.tensor(Y), reduction=reduction)
        if lib is nbgrad:
            assert (getattr(loss.grad_fn, "_chain", None) is not None) == (not ignore)
        loss.backward()
        l2 = lib.nn.functional.cross_entropy(x * 2, lib.tensor(Y), reduction=reduction)
        node = l2.grad_fn
        saved = node._saved_self.detach().numpy().copy()
        walked = _walk(node)
        l3 = lib.nn.functional.cross_entropy(x * 2, lib.tensor(Y), reduction=reduction)
        ga, = lib.autograd.grad(l3, x, create_graph=True)  # (nbgrad: through the chain)
        hv, = lib.autograd.grad((ga * ga).sum(), x)
        out.append((loss.detach().numpy(), x.grad.numpy().copy(), x.grad.stride(), walked, saved,
                    hv.numpy()))
    t, n = out
    assert n[3] == t[3] and n[2] == t[2]
    for i in (0, 1, 4, 5):
        np.testing.assert_allclose(n[i], t[i], rtol=1e-5, atol=1e-6)


def test_cross_entropy_errors_and_second_backward_as_torch():
    L = RNG.standard_normal((4, 3)).astype(np.float32)
    for Y in ([0, 1, 2, 3], [0, 1, 2]):
        msgs = []
        for lib in (torch, nbgrad):
            with pytest.raises((IndexError, ValueError)) as e:
                lib.nn.functional.cross_entropy(lib.tensor(L, requires_grad=True),
                                                lib.tensor(Y))
            msgs.append(type(e.value).__name__)
        assert msgs[0] == msgs[1]
    texts = []
    for lib in (torch, nbgrad):
        loss = lib.nn.functional.cross_entropy(lib.tensor(L, requires_grad=True),
                                               lib.tensor([0, 1, 2, 0]))
        loss.backward()
        with pytest.raises(RuntimeError) as e:
            loss.backward()
        texts.append(str(e.value))
    assert texts[1] == texts[0]


@pytest.mark.parametrize("op", ["matmul", "linear", "cross_entropy"])
def test_operands_freed_after_backward_as_the_chain_frees_them(op):
    """After backward the chain keeps no operand (its saved views are freed): neither does the
    fused node. Its graph, built afterwards, is still torch's."""
    import weakref
    A = RNG.standard_normal((3, 4, 5) if op != "cross_entropy" else (4, 5)).astype(np.float32)
    B = RNG.standard_normal((3, 5, 2) if op == "matmul" else (2, 5)).astype(np.float32)
    walks = []
    for lib in (torch, nbgrad):
        a = lib.tensor(A, requires_grad=True)
        h = a * 2.0  # an activation: only the graph could keep it
        ref = weakref.ref(h)
        if op == "matmul":
            y = (h @ lib.tensor(B, requires_grad=True)).sum()
        elif op == "linear":
            y = lib.nn.functional.linear(h, lib.tensor(B, requires_grad=True)).sum()
        else:
            y = lib.nn.functional.cross_entropy(h, lib.tensor([0, 1, 4, 2]))
        y.backward()
        del h
        assert ref() is None
        walks.append(_walk(y.grad_fn))
    assert walks[1] == walks[0]


def test_calling_a_fused_node_as_torch():
    """node(grad) gives the gradients of its own inputs (the chain's, once built)."""
    A, B = _arrays((2, 3, 4), (2, 4, 5), False)
    out = []
    for lib in (torch, nbgrad):
        a, b = lib.tensor(A, requires_grad=True), lib.tensor(B, requires_grad=True)
        y = a @ b
        g = y.grad_fn(lib.ones(2, 3, 5))  # (one input: the Tensor itself, as torch)
        s = a.sum().grad_fn(lib.ones(()))
        m = (a * 2).grad_fn(lib.ones(2, 3, 4))
        out.append([type(g).__name__, tuple(g.shape), type(s).__name__, type(m).__name__,
                    len(m)])
    assert out[1] == out[0]


def test_the_panel_predicts_the_inplace_error_through_a_fused_node():
    """The notebook layer reads a fused graph as torch's: the stale saved tensor it points at
    before backward() is BmmBackward0's `self` (the view of `a` torch saves), and backward then
    raises torch's error."""
    from nbgrad.notebook import inspect as insp
    a0 = nbgrad.randn(2, 3, 4, requires_grad=True)
    b0 = nbgrad.randn(2, 4, 5, requires_grad=True)
    a = a0 * 1.0
    y = a @ b0
    loss = y.sum()
    a.mul_(2)
    snap = insp.snapshot([("a0", a0), ("b0", b0), ("a", a), ("y", y), ("loss", loss)])
    assert [(n.name, s.name) for n, s in snap.stale_saved] == [("BmmBackward0", "self")]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def _view_info(t):
    b = t._base
    return None if b is None else (tuple(b.shape), tuple(t.shape))


def test_regressions_found_by_the_fused_fuzz_category():
    """Three differences the differential fuzzer's `fused` category found, each against torch:
    an operand that came to require grad in place before the chain was built (the chain is the
    one recorded, and the error names the saved view as torch does); the base of a gradient
    autograd.grad returns through a fused linear (a view of the product's gradient); linear on
    non-contiguous N-d input adds its bias in place (the output's _version is 1)."""
    out = []
    for T in (torch, nbgrad):
        dt = T.float64
        W = T.tensor([[2.0], [-3.0]], dtype=dt, requires_grad=True)
        t1 = T.tensor([1.0, -2.0, 0.0, 4.0], dtype=dt)
        y = T.nn.functional.linear(t1.reshape(1, 4, 1), W, None)
        y2 = T.nn.functional.linear(t1.reshape(1, 4, 1), W, None)
        t1.add_(T.tensor(2.0, dtype=dt, requires_grad=True))  # t1 now requires grad
        walked = _walk(y2.grad_fn)
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        t0 = T.tensor([[0.5, -1.0, 2.0], [3.0, -0.25, 1.5]], dtype=dt, requires_grad=True)
        g, = T.autograd.grad(T.nn.functional.linear(t0.reshape(1, 6, 1), W, None).sum(), t0)
        x = T.tensor([1.0, -2.0, 0.0, 4.0], dtype=dt, requires_grad=True)[::2].reshape(1, 2, 1)
        z = T.nn.functional.linear(x, W.detach(), T.tensor([0.5, -1.0], dtype=dt))
        out.append((walked, str(e.value).split("\n")[0].replace("torch.", "nbgrad."),
                    _view_info(g), z._version, type(z.grad_fn).__name__))
    assert out[1] == out[0]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_with_ignored_targets_and_a_nan_gradient_as_torch(reduction):
    """torch writes only the targets of the rows not ignored: a NaN incoming gradient leaves
    every other entry 0 (found by the fuzzer's `fused` category)."""
    L = RNG.standard_normal((6, 3))
    out = []
    for T in (torch, nbgrad):
        x = T.tensor(L, requires_grad=True)
        loss = T.nn.functional.cross_entropy(x, T.tensor([1, 1, -100, -100, 0, 2]),
                                             reduction=reduction)
        loss.backward(T.full(tuple(loss.shape), float("nan"), dtype=T.float64))
        out.append(x.grad.numpy().copy())
    np.testing.assert_array_equal(out[1], out[0])


def test_a_fused_node_and_its_built_chain_carry_the_users_line():
    """Provenance: the fused node, and every node of its chain once built, point at the line
    of the call (through nn.Linear, the @ operator and F.cross_entropy)."""
    import inspect
    from nbgrad.provenance import Location
    lin = nbgrad.nn.Linear(3, 2)
    x = nbgrad.randn(4, 5, 3, requires_grad=True)
    y = lin(x); ly = inspect.currentframe().f_lineno  # noqa: E702
    z = x @ x.transpose(1, 2); lz = inspect.currentframe().f_lineno  # noqa: E702
    c = nbgrad.nn.functional.cross_entropy(x[0], nbgrad.tensor([0, 1, 2, 0, 1])); lc = inspect.currentframe().f_lineno  # noqa: E501,E702
    for out, line in ((y, ly), (z, lz), (c, lc)):
        top = out.grad_fn if out is not y else out.grad_fn._next[0][0]  # (y: the view's input)
        assert top._chain is not None
        assert Location.of(top._where).lineno == line
        # next_functions builds the chain (x[0] and x's transpose are the user's own nodes)
        chain = [f for f, _ in top.next_functions if f is not None and
                 type(f).__name__ not in ("AccumulateGrad", "SelectBackward0",
                                          "TransposeBackward0")]
        assert chain and all(Location.of(f._where).lineno == line for f in chain)


def _chain_of(fn):
    """Every node below ``fn`` (the built chains included) as plain data, in a fixed walk order:
    class, sequence number relative to ``fn``'s, line, meta, saved values and edges (an edge
    into a leaf as the leaf's id)."""
    out, seen, stack = [], set(), [fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        saved = [(s.name, s.released, s.saved_version, s.version, s.is_output, s._output_nr)
                 if hasattr(s, "saved_version") else repr(s) for s in (n._saved or ())]
        edges = [(type(m).__name__, nr, id(m.variable) if hasattr(m, "variable") else None)
                 if m is not None else None for m, nr in n.next_functions]
        out.append((type(n).__name__, fn._seq - n._seq, n._where, n._meta, saved, edges))
        stack.extend(m for m, _ in reversed(n.next_functions))
    return out


@pytest.mark.parametrize("shape,bias", [((4, 16), True), ((2, 3, 16), True),
                                        ((2, 3, 16), False)])  # (the fused ones)
def test_released_chains_copied_from_a_template_equal_replayed_ones(shape, bias):
    """A released chain's nodes are copied from the first chain of its shape (a template) instead
    of replayed: the same classes, sequence numbers, lines, saved values and edges, into this
    model's own parameters."""
    from nbgrad.autograd import fused

    nets = []
    for _ in range(2):
        nbgrad.manual_seed(0)
        layers = [m for _ in range(4) for m in (nbgrad.nn.Linear(16, 16, bias=bias),
                                                 nbgrad.nn.Tanh())]
        net = nbgrad.nn.Sequential(*layers)
        loss = net(nbgrad.randn(*shape)).pow(2).mean()
        loss.backward()
        nets.append((net, loss))
    fused._TEMPLATES.clear()
    key = fused._template_key
    try:
        fused._template_key = lambda c: None  # every chain replayed
        replayed = _chain_of(nets[0][1].grad_fn)
    finally:
        fused._template_key = key
    copied = _chain_of(nets[1][1].grad_fn)  # the first chain replayed, the others copied
    assert fused._TEMPLATES
    params = [{id(p): i for i, p in enumerate(net.parameters())} for net, _ in nets]

    def same(rows, k):  # leaves by the parameter's index, lines by their line number
        return [(c, s, w[0].co_firstlineno if w else None, w[1] if w else None, m, sv,
                 [e if e is None or e[2] is None else (e[0], e[1], params[k][e[2]]) for e in ed])
                for c, s, w, m, sv, ed in rows]

    assert [r[0] for r in copied].count("TBackward0") == 4
    assert same(replayed, 0) == same(copied, 1)
    # and the backward of a chain copied from a template fails as a replayed one does
    with pytest.raises(RuntimeError, match="second time"):
        nets[1][1].backward()
