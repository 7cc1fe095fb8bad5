"""The model panel in a real kernel (nbclient + ipykernel): module clusters, the Gradients and
Training tabs, and the notes for the bugs models have, each on a small model written here.

Numbers the panel shows (grad norms, update ratios, bytes) are checked against what the same
kernel computes with nbgrad's own tensors and prints, never against constants.
"""

import html
import json
import re

import pytest

from test_notebook_kernel import WIDGET, execute, panel_outputs, svg_in  # noqa: F401

from nbgrad.notebook import render_model

SETUP = """import nbgrad
from nbgrad import nn
%load_ext nbgrad
%nbgrad set live=100
nbgrad.manual_seed(0)
x = nbgrad.randn(8, 4)
y = nbgrad.randn(8, 1)
mse = nn.MSELoss()"""

CELLS = {
    "setup": SETUP,
    # 1. module structure: a 3-layer Sequential
    "seq": "model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 1))",
    "forward": "loss = mse(model(x), y)",
    # 2. Gradients tab after backward, and the update ratio after a step
    "backward": ("opt = nbgrad.optim.SGD(model.parameters(), lr=0.1)\n"
                 "loss.backward()\n"
                 "print('NORM', float(model[0].weight.grad.norm()))"),
    "step": ("w0 = model[0].weight.detach().clone()\n"
             "opt.step()\nopt.zero_grad()\n"
             "loss = mse(model(x), y)\nloss.backward()\n"
             "d = model[0].weight.detach() - w0\n"
             "print('RATIO', float(d.norm() / model[0].weight.detach().norm()))"),
    # 3. a forgotten zero_grad: a second backward sums into .grad
    "again": "loss = mse(model(x), y)\nloss.backward()",
    # 4. a layer whose output is detached inside forward
    "detached_cls": ("class Net(nn.Module):\n"
                     "    def __init__(self):\n"
                     "        super().__init__()\n"
                     "        self.fc1 = nn.Linear(4, 6)\n"
                     "        self.fc2 = nn.Linear(6, 1)\n"
                     "    def forward(self, x):\n"
                     "        h = self.fc1(x).relu().detach()\n"
                     "        return self.fc2(h)\n"
                     "net = Net()"),
    "detached_run": "loss2 = mse(net(x), y)\nloss2.backward()",
    "detached_top": ("h = model[0](x).detach()\n"
                     "out3 = model[2](model[1](h))\n"
                     "mse(out3, y).backward()"),
    # 5. NaN from the log of a softmax that underflowed
    "nan_setup": "nll = nn.NLLLoss()\nt = nbgrad.tensor([0, 1, 2, 0, 1, 2, 0, 1])\nhead = nn.Linear(4, 3)",
    "nan": ("z = head(x) * 1000\n"
            "p = z.softmax(1)\n"
            "logp = p.log()\n"
            "bad = nll(logp * p, t)"),
    "nan_mul": ("oh = nbgrad.nn.functional.one_hot(t, 3).float()\n"
                "ce = -(oh * p.log()).sum(1).mean()"),
    # 6. eval / train mode mixed up, on a model with Dropout
    "drop": ("dmodel = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.5), nn.Linear(6, 1))\n"
             "dopt = nbgrad.optim.SGD(dmodel.parameters(), lr=0.1)"),
    "eval_nograd": "with nbgrad.no_grad():\n    val = dmodel(x)",
    "eval_train": ("dmodel.eval()\n"
                   "dl = mse(dmodel(x), y)\ndl.backward()\ndopt.step()\ndopt.zero_grad()"),
    # 7. a target of shape (N,) against an input of (N, 1)
    "broadcast": "dmodel.train()\nbl = mse(dmodel(x), y.reshape(8))",
    "broadcast_f": ("import nbgrad.nn.functional as F\n"
                    "fl = F.mse_loss(model(x), y.reshape(8))"),
    "broadcast_caught": ("import warnings\n"
                         "with warnings.catch_warnings(record=True):\n"
                         "    warnings.simplefilter('always')\n"
                         "    fc = F.mse_loss(model(x), y.reshape(8))"),
    "no_reset_loop": ("opt.zero_grad()\n"
                      "for i in range(3):\n"
                      "    F.mse_loss(model(x), y).backward()"),
    # 8. a training loop that keeps every graph alive in a list
    "loop": ("history = []\n"
             "for i in range(12):\n"
             "    opt.zero_grad()\n"
             "    l = mse(model(x), y)\n"
             "    l.backward()\n"
             "    opt.step()\n"
             "    history.append(l)\n"
             "print('LOSSES', [round(float(h), 6) for h in history])"),
    "val": "val_hist = [mse(model(x), y) for _ in range(3)]",
    "held": ("def held(ts):\n"
             "    seen, bufs, stack = set(), set(), [t.grad_fn for t in ts]\n"
             "    total = sum(t.nbytes for t in ts)\n"
             "    while stack:\n"
             "        n = stack.pop()\n"
             "        if id(n) in seen:\n"
             "            continue\n"
             "        seen.add(id(n))\n"
             "        for s in n._saved_tensors():\n"
             "            if not s.released and (s.data_ptr, s.shape) not in bufs:\n"
             "                bufs.add((s.data_ptr, s.shape))\n"
             "                total += s.nbytes\n"
             "        stack += [f for f, _ in n.next_functions if f is not None]\n"
             "    return total, len(seen)\n"
             "print('HELD', *held(history), *held(val_hist))"),
    # 9. projector theme, 10. views as rows x columns
    "theme": "%nbgrad set theme=projector",
    "views": "b = nbgrad.arange(12.).reshape(3, 4)\ncol = b[:, 1]\ncol.mul_(2)",
}


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    names = list(CELLS)
    out = execute([CELLS[k] for k in names], tmp_path_factory.mktemp("model"))
    return {k: out.cells[i] for i, k in enumerate(names)}, out


def static(cell):
    """The panel's static copy: beside a live widget, or what replaced a retired one."""
    (h,) = [o.data["text/html"] for o in cell.outputs if o.output_type == "display_data"
            and "nbgrad-static" in o.data.get("text/html", "")]
    return h


def state(notebook, cell):
    (p,) = panel_outputs(cell)
    mid = p.data[WIDGET]["model_id"]
    from nbgrad.notebook.widgets import saved_state

    return saved_state(notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"][
        "state"][mid]["state"])


def printed(cell, tag):
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    m = re.search(tag + r" (.+)", text)
    assert m, text
    return m.group(1)


def text(h):
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", h)).split())


def test_sequential_drawn_as_module_clusters(nb):
    cells, notebook = nb
    picture = svg_in(static(cells["forward"]))  # the static copy: a picture, no ids or classes
    svg = state(notebook, cells["forward"])["tabs"]["Graph"]  # the live panel's, wired by ids
    for title in ("model (Sequential)", "model.0 (Linear)", "model.1 (ReLU)",
                  "model.2 (Linear)", "mse (MSELoss)"):  # (the loss module is a module too)
        assert f">{title}<" in svg and f">{title}<" in picture, title
    assert svg.count('class="cluster"') == 5 and picture.count("<text") == svg.count("<text")
    # each Linear's ops and parameters sit inside its cluster
    block = re.search(r'<g id="cluster_model_0" class="cluster">.*?(?=<g id="(?:cluster|n|t))',
                      svg, re.S)
    assert block and "model.0 (Linear)" in block.group(0)


def test_gradients_tab_after_backward(nb):
    cells, _ = nb
    h = static(cells["backward"])
    assert "<summary>Gradients</summary>" in h
    norm = float(printed(cells["backward"], "NORM"))
    row = re.search(r"<td>model\.0\.weight</td><td>\[6, 4\]</td><td>([^<]+)</td>", h)
    assert row and row.group(1) == render_model._num(norm)


def test_update_ratio_after_an_optimizer_step(nb):
    cells, _ = nb
    h = static(cells["step"])
    ratio = float(printed(cells["step"], "RATIO"))
    row = re.search(r"<td>model\.0\.weight</td><td>\[6, 4\]</td><td>[^<]+</td><td>([^<]+)</td>",
                    h)
    assert row and row.group(1) == render_model._num(ratio)
    assert "<polyline" in h  # the sparkline over the steps seen


def test_forgotten_zero_grad_is_a_note(nb):
    cells, _ = nb
    t = text(static(cells["again"]))
    assert re.search(r"(\S+\.grad, )*model\.0\.weight\.grad(, \S+\.grad)* accumulated from 2 "
                     r"backward calls since zero_grad", t), t
    assert "accumulated" not in text(static(cells["step"]))  # zero_grad ran: no note


def test_detached_layer_named_with_where_it_was_cut(nb):
    cells, _ = nb
    n = cells["detached_cls"].execution_count
    t = text(static(cells["detached_run"]))
    # detached after a function (relu) of its output: the line of the .detach() (the core
    # records where a graph was cut)
    assert ("net.fc1.weight, net.fc1.bias got no gradient: its output was detached at "
            f"cell [{n}] line 7, before net.fc2 (Linear) used it") in t
    assert "net.fc2.weight" in t  # fc2 did get its gradient: a row, no note
    assert "net.fc2.weight, " not in t
    n = cells["detached_top"].execution_count
    t = text(static(cells["detached_top"]))
    assert ("model.0.weight, model.0.bias got no gradient: its output was detached at "
            f"cell [{n}] line 1, before model.1 (ReLU) used it") in t


def test_nan_named_with_its_first_op(nb):
    cells, _ = nb
    n = cells["nan"].execution_count
    t = text(static(cells["nan"]))
    assert re.search(r"bad has (NaN|Inf): the first op that produced it is LogBackward0 at "
                     rf"cell \[{n}\] line 3 \(logp = p\.log\(\)\)", t), t


def test_nan_made_by_a_log_whose_output_no_node_saved(nb):
    cells, _ = nb
    # 0 * log(0): the log's -inf is kept by no node; its saved input (0) tells where it came from
    n = cells["nan_mul"].execution_count
    t = text(static(cells["nan_mul"]))
    assert (f"ce has NaN: the first op that produced it is LogBackward0 at cell [{n}] line 2") in t


def test_train_mode_under_no_grad_and_eval_mode_in_training(nb):
    cells, _ = nb
    n = cells["eval_nograd"].execution_count
    t = text(static(cells["eval_nograd"]))
    assert (f"dmodel (Sequential) was evaluated under no_grad in train mode at cell [{n}] line 2:"
            " its Dropout layer behaves as in training") in t
    n = cells["eval_train"].execution_count
    t = text(static(cells["eval_train"]))
    assert (f"dmodel (Sequential) ran its forward in eval mode at cell [{n}] line 2 and was then "
            "trained") in t


def test_broadcasting_target_noted_with_pytorchs_warning(nb):
    cells, _ = nb
    t = text(static(cells["broadcast"]))
    assert "mse (MSELoss) target broadcasts against its input" in t
    assert "that is different to the input size" in t and "Please ensure they have the same size" \
        in t


def test_broadcasting_target_of_the_functional_loss(nb):
    cells, _ = nb
    n = cells["broadcast_f"].execution_count
    t = text(static(cells["broadcast_f"]))
    assert (f"a loss target broadcasts against its input at cell [{n}] line 2: \u201cUsing a "
            "target size") in t


def test_broadcasting_target_noted_when_the_warning_was_caught(nb):
    cells, _ = nb
    n = cells["broadcast_caught"].execution_count
    t = text(static(cells["broadcast_caught"]))
    assert (f"a loss target broadcasts against its input at cell [{n}] line 4: \u201cUsing a "
            "target size (nbgrad.Size([8])) that is different to the input size "
            "(nbgrad.Size([8, 1]))") in t


def test_forgotten_zero_grad_in_a_loop_counts_every_backward(nb):
    cells, _ = nb
    t = text(static(cells["no_reset_loop"]))
    assert re.search(r"(\S+\.grad, )*model\.0\.weight\.grad(, \S+\.grad)* accumulated from 3 "
                     r"backward calls since zero_grad", t), t


def test_training_loop_cell_gets_one_summary_panel(nb):
    cells, notebook = nb
    cell = cells["loop"]
    assert len(panel_outputs(cell)) == 1
    st = state(notebook, cell)
    assert st["active"] == "Training" and st["tab_order"][0] == "Training"
    assert st["summary"].startswith("nbgrad: 12 training steps")
    losses = json.loads(printed(cell, "LOSSES"))
    train = st["tabs"]["Training"]
    assert f"first {render_model._num(losses[0])}, last {render_model._num(losses[-1])}" in train
    assert "total gradient norm" in train
    assert "history (list) keeps 12 graphs alive" in text(st["summary"]) or \
        "history (list) keeps 12 graphs alive" in text(train)
    # the last step's graph, its modules folded
    assert {"model.0", "model.1", "model.2"} <= set(st["folded"])
    # (one box per module call: the SVG of this graph, with the stale graphs of two earlier
    # cells, is over the size synced, and the browser lays out the DOT)
    graph = st["tabs"]["Graph"] if "<svg" in st["tabs"]["Graph"] else st["dot"]
    assert "<title>cluster_model" not in graph and 'id="cluster_model' not in graph  # (boxes)
    assert re.search(r'>model\.0 \(Linear\)<|label="model\.0 \(Linear\)\\n', graph)
    # the 12 steps' graphs kept in `history`: one step drawn, in a cluster with the count
    assert re.search(r'>12 x l = mse\(model\(x\), y\)<|label="12 x l = mse\(model\(x\), y\)"',
                     graph)


def test_graphs_kept_alive_by_a_list_named_in_memory(nb):
    cells, notebook = nb
    hist_bytes, hist_nodes, val_bytes, val_nodes = map(int, printed(cells["held"], "HELD").split())
    from nbgrad.notebook.render import _in_bytes

    t = text(state(notebook, cells["loop"])["tabs"]["Memory"])
    assert (f"history (list) keeps 12 graphs alive ({hist_nodes} graph nodes): "
            f"{_in_bytes(hist_bytes)} held") in t
    t = text(state(notebook, cells["val"])["tabs"]["Memory"])  # no backward: their saved tensors are still held
    assert (f"val_hist (list) keeps 3 graphs alive ({val_nodes} graph nodes): "
            f"{_in_bytes(val_bytes)} held") in t
    assert val_bytes > 3 * 8 * 4  # more than the three losses themselves


def test_projector_theme(nb):
    cells, notebook = nb
    assert "theme=projector" in "".join(o.get("text", "") for o in cells["theme"].outputs)
    st = state(notebook, cells["views"])
    assert st["theme"] == "projector"
    assert "nbgrad-theme-projector" in static(cells["views"])


def test_views_map_in_the_base_shape(nb):
    cells, _ = nb
    h = static(cells["views"])
    assert "elements drawn as the base's 3 x 4" in h
    dot, box = "\u00b7", "\u25a0"
    col = "\n".join(f"{dot} {box} {dot} {dot}" for _ in range(3))
    assert col in html.unescape(h)


# --- in process: folding a module, the tracker's hooks come and go ----------------------------


def test_a_module_folds_to_one_box_and_the_widget_redraws():
    import nbgrad
    from nbgrad import nn
    from nbgrad.notebook import inspect as nbi
    from nbgrad.notebook import model_hooks, model_report
    from nbgrad.notebook import render
    from nbgrad.notebook.widgets import NbgradPanel

    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
        tracker.reset_cell()
        out = net(nbgrad.randn(2, 4)).sum()
        snap = nbi.snapshot([("out", out)])
        snap.model = model_report.with_graph(None, tracker, {"net": net, "out": out}, snap)
        assert set(snap.model.clusters) == {"net", "net.0", "net.1", "net.2"}
        expanded = render.to_dot(snap, folded=[])
        assert 'label="net.0 (Linear)"' in expanded and "box3d" not in expanded
        folded = render.to_dot(snap, folded=["net.0"])
        # AddmmBackward0, TBackward0 and the two AccumulateGrads of net.0: one box
        assert 'label="net.0 (Linear)\\n4 ops folded"' in folded and "shape=box3d" in folded
        assert 'label="net.0 (Linear)";' not in folded  # its cluster is gone
        panel = NbgradPanel(snap, None, dot=expanded, layout_fn=lambda dot, s: None)
        try:
            panel.folded = ["net.0"]  # what the front end sets when its title is clicked
            assert panel.dot == folded  # no SVG from the kernel: the browser lays it out
            assert "net.0" in panel.graph and '"kind":"module"' in panel.graph
        finally:
            panel.close()
    finally:
        tracker.uninstall()
    from nbgrad.nn.modules import module as m

    assert not m._global_forward_pre_hooks and not m._global_forward_hooks
    assert all(not (p._hooks or []) for p in net.parameters())


@pytest.mark.parametrize("order, note", [
    ("zero_grad first", False),  # the usual loop: no gradient is left at the second step
    ("zero_grad after the forward", False),  # gradients still there at the second forward
    ("no zero_grad", True),
])
def test_accumulation_is_noted_whatever_the_loop_order(order, note):
    import nbgrad
    from nbgrad import nn
    from nbgrad.notebook import model_hooks, model_report

    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        nbgrad.manual_seed(0)
        net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
        mse = nn.MSELoss()
        opt = nbgrad.optim.SGD(net.parameters(), lr=0.01)
        x, y = nbgrad.randn(8, 4), nbgrad.randn(8, 1)
        tracker.reset_cell()
        for _ in range(6):
            if order == "zero_grad first":
                opt.zero_grad()
            loss = mse(net(x), y)
            if order == "zero_grad after the forward":
                opt.zero_grad()
            loss.backward()
            opt.step()
        rep = model_report.report(tracker, {"net": net, "mse": mse})
        assert rep.steps == 6 and len(rep.losses) == 6
        accumulated = [n for n in rep.notes if "accumulated from" in n]
        assert bool(accumulated) == note, rep.notes
        if note:  # the second step's backward summed into the first's .grad
            assert "net.0.weight.grad" in accumulated[0]
    finally:
        tracker.uninstall()


def test_a_container_of_released_graphs_is_walked_once(monkeypatch):
    import nbgrad
    from nbgrad import nn
    from nbgrad.notebook import adapter, model_report

    net, mse = nn.Linear(4, 1), nn.MSELoss()
    x, y = nbgrad.randn(8, 4), nbgrad.randn(8, 1)
    history = []
    for _ in range(5):
        loss = mse(net(x), y)
        loss.backward()  # its saved tensors are released
        history.append(loss)
    held = [mse(net(x), y) for _ in range(2)]  # saved tensors still held
    ns = {"history": history, "held": held}
    walked = []
    real = adapter.saved_tensors
    monkeypatch.setattr(adapter, "saved_tensors", lambda node: walked.append(node) or real(node))
    cache: dict = {}
    first = model_report.kept_alive(ns, cache=cache)
    assert [r[:2] for r in first] == [("history", 5), ("held", 2)]
    assert first == model_report.kept_alive(ns)  # the same figures as without the cache
    walked.clear()
    assert model_report.kept_alive(ns, cache=cache) == first
    # only the unreleased graphs were walked again, not the history's
    assert walked and not {id(n) for n in walked} & {id(h.grad_fn) for h in history}
    n_held = len(walked)
    walked.clear()
    history.append(mse(net(x), y))  # a new graph, not released: walked again, counted
    again = model_report.kept_alive(ns, cache=cache)
    assert again[0][1] == 6 and again[0][2] > first[0][2] and len(walked) > n_held


# --- in process: what the panel says about a loop is what happened ---------------------------


def _logistic(steps, lr, scale, seed=0):
    import numpy as np

    import nbgrad
    from nbgrad import nn

    rng = np.random.default_rng(seed)
    X = nbgrad.tensor((rng.standard_normal((32, 2)) * scale).astype(np.float32))
    t = (X[:, :1] > 0).float()
    clf = nn.Linear(2, 1)
    with nbgrad.no_grad():
        clf.weight.copy_(nbgrad.tensor([[0.05, -0.02]]))
        clf.bias.zero_()
    return X, t, clf, nbgrad.optim.SGD(clf.parameters(), lr=lr)


def test_a_loop_names_its_first_nan_step_op_and_the_parameters_it_wrote():
    import math

    import nbgrad
    from nbgrad.notebook import model_hooks, model_report

    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        X, t, clf, opt = _logistic(30, lr=8.0, scale=3.0)
        tracker.reset_cell()
        losses, finite_w = [], []
        for _step in range(30):
            finite_w.append(bool(nbgrad.isfinite(clf.weight).all()))
            p = nbgrad.sigmoid(clf(X))
            loss = -(t * nbgrad.log(p) + (1 - t) * nbgrad.log(1 - p)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        finite_w.append(bool(nbgrad.isfinite(clf.weight).all()))
        rep = model_report.report(tracker, {"clf": clf, "X": X, "t": t, "loss": loss})
    finally:
        tracker.uninstall()
    k = next(i for i, v in enumerate(losses, 1) if not math.isfinite(v))  # (steps from 1)
    since = next(i for i, ok in enumerate(finite_w) if not ok)  # after step `since`'s update
    assert rep.steps == 30 and len(rep.losses) == 30  # not 31
    nan = [n for n in rep.notes if n.startswith("the loss is")]
    assert nan and nan[0].startswith(f"the loss is NaN from step {k} of 30 on; the first "
                                     "non-finite value was made by LogBackward0 at ")
    assert nan[0].endswith(f"in step {k}") and "NegBackward0" not in nan[0]
    assert f"clf.bias, clf.weight hold NaN since step {since} (written by " in " ".join(rep.notes)


def test_clusters_of_a_second_model_never_carry_the_first_ones_names():
    import nbgrad
    from nbgrad import nn
    from nbgrad.notebook import inspect as nbi
    from nbgrad.notebook import model_hooks, model_report

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.ln, self.head = nn.Embedding(7, 4), nn.LayerNorm(4), nn.Linear(4, 4)
            self.unused = nn.Linear(4, 4)

        def forward(self, ids):
            return self.head(self.ln(self.emb(ids)))

    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        model, lm = MLP(), TinyLM()
        opt = nbgrad.optim.SGD(model.parameters(), lr=0.1)
        x = nbgrad.randn(3, 4)
        tracker.reset_cell()
        for _ in range(3):  # watching ends after the first step
            opt.zero_grad()
            model(x).pow(2).sum().backward()
            opt.step()
        out = lm(nbgrad.tensor([[1, 2, 3]]))
        out2 = lm.head(model(x))  # the user calls a submodule: its path names it
        ns = {"model": model, "lm": lm, "out": out, "out2": out2}
        snap = nbi.snapshot([("out", out)])
        snap.model = model_report.with_graph(None, tracker, ns, snap)
        titles = {c["title"] for c in snap.model.clusters.values()}
        assert titles == {"lm (TinyLM)", "lm.emb (Embedding)", "lm.ln (LayerNorm)",
                          "lm.head (Linear)"}
        snap = nbi.snapshot([("out2", out2)])
        snap.model = model_report.with_graph(None, tracker, ns, snap)
        titles = {c["title"] for c in snap.model.clusters.values()}
        assert titles == {"lm.head (Linear)", "model (MLP)", "model.fc1 (Linear)",
                          "model.fc2 (Linear)"}
    finally:
        tracker.uninstall()


def test_folded_modules_own_their_keys_as_the_plain_definition_says():
    """Each key of a module inside (or equal to) a folded module goes to the outermost folded
    one holding it: the one-pass lookup by dot prefixes agrees with the definition (every
    folded path, longest first, claims the keys of every module it is, or is a dot prefix of)
    on random module trees and folds, keys shared between modules included."""
    import random

    from nbgrad.notebook.model_fold import _fold_owners

    def plain(clusters, folded):
        owner = {}
        for path in sorted(folded, key=len, reverse=True):
            for p, c in clusters.items():
                if p == path or p.startswith(path + "."):
                    for k in c["keys"]:
                        owner[k] = path
        return owner

    rng = random.Random(0)
    names = ["m", "m.a", "m.a.b", "m.ab", "m.a.c", "n", "n.x", "m.a.b.c", "mm", "m.b"]
    for _ in range(3000):
        clusters = {p: {"keys": [f"k{rng.randrange(8)}" for _ in range(rng.randrange(4))]}
                    for p in rng.sample(names, rng.randrange(1, len(names)))}
        folded = [p for p in (rng.choice(names) for _ in range(rng.randrange(5)))
                  if p in clusters]
        assert _fold_owners(clusters, folded) == plain(clusters, folded), (clusters, folded)
