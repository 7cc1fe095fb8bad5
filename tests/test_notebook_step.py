"""Backward step by step (``%nbgrad step``) and values mode (``%nbgrad set values=on``) in a real
kernel (nbclient + ipykernel).

Ground truth is computed apart from the panel: the same programs in PyTorch (its engine's order,
read with node pre-hooks; its gradients), and in nbgrad a plain ``backward()`` on a second copy
of the graph (bit-for-bit ``.grad``). The formula text shown is checked against the row's own
source (``inspect.getsource`` of the formula).
"""

import html
import inspect
import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ipywidgets")

from test_notebook_kernel import execute, panel_html, svg_in  # noqa: E402
from test_stepping import _order  # noqa: E402

# Programs, each a function of the module `m` (nbgrad or torch) returning (leaves, root).
PROGRAMS = {
    "neuron": '''
def neuron(m):
    x1 = m.tensor(2.0, requires_grad=True); x2 = m.tensor(0.0, requires_grad=True)
    w1 = m.tensor(-3.0, requires_grad=True); w2 = m.tensor(1.0, requires_grad=True)
    b = m.tensor(6.8813735870195432, requires_grad=True)
    n = x1 * w1 + x2 * w2 + b
    o = n.tanh()
    return [x1, x2, w1, w2, b], o
''',
    "twice": '''
def twice(m):
    a = m.tensor([1.5, -2.0], requires_grad=True)
    c = m.tensor(0.5, requires_grad=True)
    e = (a * c).tanh()
    return [a, c], (e * e + e * 3 + a.exp()).sum()
''',
    "mlp": '''
def mlp(m):
    m.manual_seed(0)
    net = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.Tanh(), m.nn.Linear(4, 1))
    xs = m.tensor([[2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0]])
    ys = m.tensor([[1.0], [-1.0], [-1.0], [1.0]])
    return list(net.parameters()), ((net(xs) - ys) ** 2).mean()
''',
}

WALK = '''
import json, numpy as np, nbgrad
from nbgrad.notebook import stepper
def order_of(root):
    """The real engine's order: a pre-hook on every node, then a plain backward."""
    seen, out, stack = set(), [], [root.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        n.register_prehook(lambda g, n=n: out.append(n.name().rsplit("::", 1)[-1]))
        stack.extend(c for c, _ in n.next_functions)
    root.backward()
    return out
def walk_report(build):
    leaves, root = build(nbgrad)
    p = stepper.step(root, name="loss")
    p.next()
    shown_first = p.detail_html()
    p.run_to_end()
    leaves2, root2 = build(nbgrad)
    plain = order_of(root2)
    walked = [s.name.rsplit("::", 1)[-1] for s in p.steps if s.grad_in is not None]
    same_bits = [bool(a.grad is not None and b.grad is not None
                      and a.grad.numpy().tobytes() == b.grad.numpy().tobytes()
                      and a.grad.dtype == b.grad.dtype and a.grad.shape == b.grad.shape)
                 for a, b in zip(leaves, leaves2)]
    formulas = {v.name: v.formula for v in p.nodes.values() if v.formula}
    sums = [[n for _, n, _ in part] for s in p.steps for part in s.parts if len(part) > 1]
    twice = [s for s in p.steps if any(len(part) > 1 for part in s.parts)]
    sum_html = ""
    if twice:
        p.pos = twice[0].index + 1
        sum_html = p.detail_html()
        p.pos = len(p.steps)
    return dict(walked=walked, plain=plain, same_bits=same_bits, done=p.walk.done,
                grads=[a.grad.numpy().tolist() for a in leaves], formulas=formulas,
                sums=sums, sum_html=sum_html, first=shown_first, html=p.html())
'''


def _torch_order_and_grads(src, name):
    ns = {}
    exec(src, ns)  # noqa: S102 - the test's own program
    torch.set_num_threads(1)
    leaves, root = ns[name](torch)
    seen, out, stack = set(), [], [root.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        n.register_prehook(lambda g, n=n: out.append(n.name().rsplit("::", 1)[-1]))
        stack.extend(c for c, _ in n.next_functions)
    root.backward()
    return out, [t.grad.numpy() for t in leaves]


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    cells = ["import nbgrad\n%load_ext nbgrad\n%nbgrad set values=on", WALK]
    for name, src in PROGRAMS.items():
        cells.append(src + f"print('RESULT ' + json.dumps(walk_report({name})))")
    cells.append(  # a stale saved tensor: the walk stops where backward() raises
        "def stale(m):\n"
        "    x = m.ones(3, requires_grad=True)\n"
        "    y = x.tanh()\n"
        "    z = (y * 2).sum()\n"
        "    y.add_(1)\n"
        "    return z\n"
        "p = stepper.step(stale(nbgrad))\n"
        "p.run_to_end()\n"
        "err = p.walk.error\n"
        "try:\n"
        "    stale(nbgrad).backward()\n"
        "except RuntimeError as e:\n"
        "    real = e\n"
        "ctx, rctx = err.nbgrad_context, real.nbgrad_context\n"
        "print('RESULT ' + json.dumps(dict(msg=str(err), real=str(real),\n"
        "      at=[s.name for s in p.steps], kind=ctx['kind'], rkind=rctx['kind'],\n"
        "      node=ctx['node_name'], rnode=rctx['node_name'],\n"
        "      where=str(ctx['node_where']).split(' line ')[-1],\n"
        "      rwhere=str(rctx['node_where']).split(' line ')[-1], html=p.html())))")
    cells.append("%nbgrad step stale(nbgrad)")  # the magic: a widget with its static view
    return execute(cells, tmp_path_factory.mktemp("step"))


def _result(cell):
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    m = re.search(r"^RESULT (.*)$", text, re.M)
    assert m, text[-2000:] + str([o.get("evalue") for o in cell.outputs])
    return json.loads(m.group(1))


@pytest.mark.parametrize("k,name", [(2, "neuron"), (3, "twice"), (4, "mlp")])
def test_walk_is_the_engines(walked, k, name):
    r = _result(walked.cells[k])
    assert r["done"]
    # the nodes visited (those a gradient reached) in the real engine's order, nbgrad's and torch's
    assert r["walked"] == r["plain"]
    torch_order, torch_grads = _torch_order_and_grads(PROGRAMS[name], name)
    assert r["walked"] == torch_order
    # every leaf's .grad bit for bit that of a plain backward(), and torch's values
    assert all(r["same_bits"]) and r["same_bits"]
    for g, tg in zip(r["grads"], torch_grads):
        np.testing.assert_allclose(np.array(g, dtype=np.float32), tg, rtol=2e-6, atol=1e-7)


def test_accumulation_shown_as_a_sum(walked):
    r = _result(walked.cells[3])  # e feeds two products and the sum: reached along 2+ edges
    assert r["sums"], "no node reached twice"
    assert all(len(s) >= 2 for s in r["sums"])
    assert "the gradients add up" in r["sum_html"]
    assert r["sum_html"].count(" + ") >= 1 and "(from " in r["sum_html"]


def test_formula_text_is_the_rows(walked):
    from nbgrad.ops.formulas import ROWS

    r = _result(walked.cells[2])
    assert r["formulas"]["TanhBackward0"] == ["self: g * (1 - result²)"]
    by_node = {row.node.__name__: row for row in ROWS.values()}
    for prog in (2, 3, 4):
        for node, lines in _result(walked.cells[prog])["formulas"].items():
            row = by_node[node]
            for line in lines:
                key, _, text = line.partition(": ")
                f = row.formulas[row.inputs.index(key)]
                lines_of, first = inspect.findsource(f)[0], f.__code__.co_firstlineno - 1
                src = re.sub(r"\s+", " ", "".join(lines_of[first:first + 6])).replace("xp.", "")
                src = src.replace("( ", "(")
                back = re.sub(r"(\w+)²", r"\1 * \1", text)
                assert back in src, (node, line)
    assert "self: g * (1 - result²)" in r["first"]  # shown with the first step


def test_stale_saved_stops_the_walk_as_backward(walked):
    r = _result(walked.cells[5])
    assert r["msg"] == r["real"] and "modified by an inplace operation" in r["msg"]
    assert r["at"][-1] == "TanhBackward0" and r["node"] == r["rnode"] == "TanhBackward0"
    assert r["kind"] == r["rkind"] == "saved_modified" and r["where"] == r["rwhere"]
    assert "the walk stops here" in r["html"] and "add_" in r["html"]


def test_magic_shows_a_widget_and_a_static_copy(walked):
    cell = walked.cells[6]
    outs = [o for o in cell.outputs if o.output_type in ("execute_result", "display_data")]
    assert outs, cell.outputs
    data = outs[0].data
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "backward() of stale(nbgrad), step 0" in data["text/html"]


@pytest.fixture(scope="module")
def values_nb(tmp_path_factory):
    return execute([
        "import nbgrad\n%load_ext nbgrad\n%nbgrad set values=on",
        "x = nbgrad.tensor([0.5, -1.0, 2.0], requires_grad=True)\n"
        "w = nbgrad.tensor([1.5, 0.25, -0.75], requires_grad=True)\n"
        "y = (x * w).tanh()\nl = y.sum()\nl.backward()",
    ], tmp_path_factory.mktemp("values"))


def _numbers(s):
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", s)]


def test_values_shown_equal_data_and_grads(values_nb):
    svg = svg_in(panel_html(values_nb.cells[1]))
    texts = [html.unescape(re.sub(r"<[^>]+>", "", t))
             for t in re.findall(r"<text[^>]*>(.*?)</text>", svg)]
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = torch.tensor([1.5, 0.25, -0.75], requires_grad=True)
    p = x * w
    p.retain_grad()
    y = p.tanh()
    y.sum().backward()

    def shown(prefix):
        return [_numbers(t[len(prefix):]) for t in texts if t.startswith(prefix)]
    datas, grads = shown("data "), shown("grad ")
    for want in (x, w, y):
        assert any(len(d) == want.numel() and np.allclose(d, want.detach().numpy().reshape(-1),
                                                          rtol=1e-3, atol=1e-4) for d in datas), \
            (want, datas)
    for want in (x.grad, w.grad):
        assert any(len(g) == want.numel() and np.allclose(g, want.numpy(), rtol=1e-3, atol=1e-4)
                   for g in grads), \
            (want, grads)
    # edge labels: the gradient into TanhBackward0's input (p's gradient) and into x and w
    edge_nums = [_numbers(t) for t in texts if t.startswith("[") and "data" not in t]
    for want in (p.grad, x.grad, w.grad):
        assert any(len(e) == 3 and np.allclose(e, want.numpy(), rtol=1e-3, atol=1e-4)
                   for e in edge_nums), (want, edge_nums)


@pytest.fixture(scope="module")
def torch_nb(tmp_path_factory):
    return execute([
        "import torch\n%load_ext nbgrad\n%nbgrad set values=on",
        "x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)\n"
        "w = torch.tensor([1.5, 0.25, -0.75], requires_grad=True)\n"
        "y = (x * w).tanh()\nl = y.sum()\nl.backward()",
        "%nbgrad step (x * w).sum()",
    ], tmp_path_factory.mktemp("values_torch"))


def test_values_over_pytorch_tensors(torch_nb):
    svg = svg_in(panel_html(torch_nb.cells[1]))
    texts = [html.unescape(re.sub(r"<[^>]+>", "", t))
             for t in re.findall(r"<text[^>]*>(.*?)</text>", svg)]
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = torch.tensor([1.5, 0.25, -0.75], requires_grad=True)
    (x * w).tanh().sum().backward()
    grads = [_numbers(t[5:]) for t in texts if t.startswith("grad ")]
    datas = [_numbers(t[5:]) for t in texts if t.startswith("data ")]
    for want in (x.grad, w.grad):
        assert any(len(g) == 3 and np.allclose(g, want.numpy(), rtol=1e-3, atol=1e-4)
                   for g in grads), (want, grads)
    assert any(len(d) == 3 and np.allclose(d, x.detach().numpy()) for d in datas), datas
    edges = [_numbers(t) for t in texts if t.startswith("[") and "data" not in t]
    assert any(len(e) == 3 and np.allclose(e, x.grad.numpy(), rtol=1e-3, atol=1e-4)
               for e in edges), edges


def test_step_says_why_not_over_pytorch(torch_nb):
    from nbgrad.notebook.adapter import NO_WALK

    text = "".join(o.get("text", "") for o in torch_nb.cells[2].outputs)
    assert NO_WALK in text, torch_nb.cells[2].outputs


@pytest.fixture(scope="module")
def toggled(tmp_path_factory):
    return execute([
        "import json, nbgrad\n%load_ext nbgrad",
        "x = nbgrad.tensor([0.5, -1.0, 2.0], requires_grad=True)\n"
        "w = nbgrad.tensor([1.5, 0.25, -0.75], requires_grad=True)\n"
        "l = (x * w).tanh().sum()\nl.backward()",
        "from nbgrad.notebook.extension import get_extension\n"
        "panel = get_extension()._live[-1][0]\n"
        "before = (panel.values_shown, panel.tabs['Graph'])\n"
        "panel.values_shown = True\n"
        "on = panel.tabs['Graph']\n"
        "panel.values_shown = False\n"
        "print('RESULT ' + json.dumps(dict(shown=before[0], before=before[1], on=on,\n"
        "      off=panel.tabs['Graph'])))",
    ], tmp_path_factory.mktemp("toggle"))


def test_values_toggle_in_the_panel(toggled):
    r = _result(toggled.cells[2])
    assert not r["shown"] and "data " not in r["before"] and "nbgrad-values-toggle" in r["before"]
    assert "data " not in r["off"]
    texts = [html.unescape(re.sub(r"<[^>]+>", "", t))
             for t in re.findall(r"<text[^>]*>(.*?)</text>", r["on"])]
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = torch.tensor([1.5, 0.25, -0.75], requires_grad=True)
    (x * w).tanh().sum().backward()
    grads = [_numbers(t[5:]) for t in texts if t.startswith("grad ")]
    datas = [_numbers(t[5:]) for t in texts if t.startswith("data ")]
    for want in (x, w):
        assert any(len(d) == 3 and np.allclose(d, want.detach().numpy()) for d in datas), datas
        assert any(len(g) == 3 and np.allclose(g, want.grad.numpy(), rtol=1e-3, atol=1e-4)
                   for g in grads), grads


def test_edge_watch_is_bounded_per_cell():
    """The first MAX_WATCHED backward calls of a cell are watched (their hooks read what the
    engine sent along each edge, equal to torch's gradients); later ones are not, and nothing
    is held once the cell is over."""
    import nbgrad
    from nbgrad.notebook import render_values as V

    e = V.EdgeGrads()
    e.install()
    try:
        e.new_cell()
        a = nbgrad.tensor([1.0, -2.0], requires_grad=True)
        y = (a * a).sum()
        y.backward()
        mul = y.grad_fn.next_functions[0][0]
        got = e.grads_of(mul)
        t = torch.tensor([1.0, -2.0], requires_grad=True)
        (t * t).sum().backward()
        (texts,) = got.values()  # both edges of a * a go to a's AccumulateGrad
        half = V.text(V.keep((t.grad / 2).numpy()))
        assert texts == [half, half]
        for _ in range(V.MAX_WATCHED):
            (a * 3).sum().backward()
        assert e.calls == V.MAX_WATCHED + 1 and not e.seen and not e.handles
        e.new_cell()
        assert not e.seen and not e.pending and e.calls == 0
    finally:
        e.uninstall()
    assert not nbgrad.autograd.engine.BACKWARD_OBSERVERS


@pytest.fixture(scope="module")
def buttoned(tmp_path_factory):
    """A scalar loss's panel: its step button's message (what panel.js sends on a click), then
    the Step tab's controls, run to the end; a plain backward on a second copy."""
    return execute([
        "import json, nbgrad\n%load_ext nbgrad",
        "x = nbgrad.tensor([0.5, -1.0, 2.0], requires_grad=True)\n"
        "w = nbgrad.tensor([1.5, 0.25, -0.75], requires_grad=True)\n"
        "loss = (x * w).tanh().sum()",
        "from nbgrad.notebook.extension import get_extension\n"
        "panel = get_extension()._live[-1][0]\n"
        "graph = panel.tabs['Graph']\n"
        "panel._front_end_msg(panel, {'type': 'step', 'op': 'open', 'name': 'loss'}, [])\n"
        "opened = (panel.active, list(panel.tab_order), panel.tabs['Step'])\n"
        "panel._front_end_msg(panel, {'type': 'step', 'op': 'next', 'name': ''}, [])\n"
        "one = panel.tabs['Step']\n"
        "panel._front_end_msg(panel, {'type': 'step', 'op': 'end', 'name': ''}, [])\n"
        "x2 = nbgrad.tensor([0.5, -1.0, 2.0], requires_grad=True)\n"
        "w2 = nbgrad.tensor([1.5, 0.25, -0.75], requires_grad=True)\n"
        "(x2 * w2).tanh().sum().backward()\n"
        "print('RESULT ' + json.dumps(dict(graph=graph, opened=opened, one=one,\n"
        "      end=panel.tabs['Step'], steps=[s.name for s in panel._stepper.steps],\n"
        "      same=[a.grad.numpy().tobytes() == b.grad.numpy().tobytes()\n"
        "            for a, b in ((x, x2), (w, w2))], xg=x.grad.tolist(), wg=w.grad.tolist())))",
        "l2 = (x * w).tanh().sum()\nl2.backward()",  # backward already run: no button
        "panel = get_extension()._live[-1][0]\n"
        "print('RESULT ' + json.dumps(dict(graph=panel.tabs['Graph'])))",
    ], tmp_path_factory.mktemp("button"))


def test_step_button_on_a_scalar_loss_panel(buttoned):
    r = _result(buttoned.cells[2])
    assert 'class="nbgrad-step-open" data-op="open" data-name="loss"' in r["graph"]
    active, order, first = r["opened"]
    assert active == "Step" and order[-1] == "Step" and order.count("Step") == 1
    assert "backward() of loss, step 0" in first and 'data-op="next"' in first
    assert "backward() of loss, step 1" in r["one"]
    # the engine's order and its gradients: torch's, and bit for bit a plain backward's
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = torch.tensor([1.5, 0.25, -0.75], requires_grad=True)
    order = _order((x * w).tanh().sum())  # (test_stepping's: pre-hooks, a plain backward)
    assert [s.rsplit("::", 1)[-1] for s in r["steps"]] == order
    assert r["same"] == [True, True]
    np.testing.assert_allclose(r["xg"], x.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(r["wg"], w.grad.numpy(), rtol=1e-6)
    assert f"step {len(order)} of {len(order)}" in html.unescape(re.sub(r"<[^>]+>", "",
                                                                        r["end"]))
    # a loss whose backward already ran (its saved tensors freed) gets no button
    assert "nbgrad-step-open" not in _result(buttoned.cells[4])["graph"]
