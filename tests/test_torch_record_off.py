"""What the model panel reports with ``%nbgrad set record=off`` (a *light* cell: no parameter
hooked, the gradients read at each optimizer's first step or after the cell,
``nbgrad/notebook/grad_light.py``), checked against plain torch, in this process (no kernel).

docs/pytorch.md promises, with record=off: the graph with torch's node names and module
clusters, parameters that got no gradient, gradients accumulated without ``zero_grad``, NaN
parameters, the Gradients tab (norm, exact zeros, update ratio) and a loss module's curve, and
says in one line what it gives up; each is checked here, and that no hook is put on a parameter.
"""

import math

import pytest

torch = pytest.importorskip("torch")

from nbgrad.notebook import grad_light, model_hooks, model_report  # noqa: E402
from nbgrad.notebook import inspect as nbi  # noqa: E402
from nbgrad.notebook import torch_record as R  # noqa: E402


class Cut(torch.nn.Module):
    """A two-layer net whose first layer's output is detached: ``a`` gets no gradient."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)).detach())


def _net(cut=False):
    torch.manual_seed(0)
    if cut:
        return Cut()
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        net[0].bias[:8] = -50.0  # dead ReLU units: exact zeros in the gradients below them
    return net


def _cell(record, steps=5, cut=False, zero="before", loss_module=False, poison=False, cells=1):
    """A training loop run as a cell runs it (the tracker and the recorder as the extension
    sets them before and after a cell), ``cells`` times on one model; what torch says of each
    step of the last cell, and its report."""
    tracker = model_hooks.ModelTracker()
    tracker.install()
    old = R.STATE.cells
    try:
        R.STATE.cells = {__file__: 1}
        R.set_on(record)
        tracker.light = not record
        net = _net(cut)
        opt = torch.optim.AdamW(net.parameters(), lr=0.05)
        mse = torch.nn.MSELoss()
        xb, yb = torch.randn(6, 4), torch.randn(6, 3)
        for _ in range(cells):
            tracker.reset_cell()
            R.start()
            grads, before, after, losses = [], [], [], []
            hooked = set()
            for i in range(steps):
                if zero == "before" or (zero == "once" and i == 0):
                    opt.zero_grad()
                out = net(xb)
                loss = mse(out, yb) if loss_module else torch.nn.functional.mse_loss(out, yb)
                loss.backward()
                hooked |= {n for n, p in net.named_parameters() if p._backward_hooks}
                grads.append({n: None if p.grad is None else p.grad.clone()
                              for n, p in net.named_parameters()})
                before.append({n: p.detach().clone() for n, p in net.named_parameters()})
                opt.step()
                after.append({n: p.detach().clone() for n, p in net.named_parameters()})
                if zero == "after":
                    opt.zero_grad()
                losses.append(loss.item())
                if poison and i == steps - 2:
                    with torch.no_grad():
                        next(net.parameters())[0, 0] = float("nan")
            R.stop()
            if tracker.light:
                grad_light.after_cell(tracker)
            ns = {"net": net, "loss": loss, "mse": mse}
            rep = model_report.report(tracker, ns)
        snap = nbi.snapshot([("loss", loss)])
        snap.model = model_report.with_graph(rep, tracker, ns, snap)
        clusters = {c["title"]: sorted(snap.nodes[k].name for k in c["keys"] if k in snap.nodes)
                    for c in snap.model.clusters.values()}
        nodes = sorted(n.name for n in snap.nodes.values())
        rows = {r.name: r for r in snap.model.params}
        return dict(grads=grads, before=before, after=after, losses=losses, rows=rows,
                    notes=snap.model.notes, clusters=clusters, nodes=nodes, hooked=hooked,
                    tracker=tracker, rep=snap.model, calls=list(tracker.calls), cell=tracker.cell)
    finally:
        tracker.uninstall()
        R.STATE.cells = old
        R.set_on(True)


def _norm(t):
    return float(torch.linalg.vector_norm(t.double()))


@pytest.mark.parametrize("zero", ["before", "after"])
def test_gradients_tab_equals_torchs_first_step(zero):
    """No hook on any parameter; each parameter's gradient norm, exact zeros and update ratio
    are the first step's, as torch computes them (read at the optimizer's first step: also when
    the loop ends with ``zero_grad()`` and no ``.grad`` is left after the cell)."""
    got = _cell(False, zero=zero)
    assert got["hooked"] == set()
    assert all(st.armed is None for st in got["tracker"].params.values())
    g0, w0, w1 = got["grads"][0], got["before"][0], got["after"][0]
    assert set(got["rows"]) == {f"net.{n}" for n in g0}
    for n, g in g0.items():
        row = got["rows"][f"net.{n}"]
        assert math.isclose(row.norm, _norm(g), rel_tol=1e-6), n
        assert row.zeros == float((g == 0).double().mean())
        want = _norm(w1[n] - w0[n]) / _norm(w1[n])
        assert math.isclose(row.ratio, want, rel_tol=1e-5), (n, row.ratio, want)
        assert not row.nonfinite and row.accumulated == 1
    assert any(r.zeros > 0.4 for r in got["rows"].values())  # the dead units
    assert got["rep"].steps == 5
    assert sum(n.startswith("record=off:") for n in got["notes"]) == 1  # the one line


def test_clusters_and_node_names_equal_record_on():
    """The last step's graph: torch's node names and the module clusters, as with record=on."""
    off, on = _cell(False, loss_module=True), _cell(True, loss_module=True)
    assert off["nodes"] == on["nodes"]
    assert off["clusters"] == on["clusters"]
    assert {"net (Sequential)", "net.0 (Linear)", "net.2 (Linear)", "mse (MSELoss)"} <= set(
        off["clusters"])
    assert [v.hex() for v in off["losses"]] == [v.hex() for v in on["losses"]]


def test_loss_module_curve():
    got = _cell(False, loss_module=True)
    assert got["rep"].losses == got["losses"]


def test_no_gradient_parameter_is_named():
    got = _cell(False, cut=True)
    assert got["grads"][0]["a.weight"] is None and got["grads"][0]["b.weight"] is not None
    note = [n for n in got["notes"] if "got no gradient" in n]
    assert len(note) == 1 and "net.a.weight" in note[0] and "net.a.bias" in note[0], got["notes"]
    assert "net.b" not in note[0]


@pytest.mark.parametrize("zero,summed", [("once", 5), ("before", None), ("after", None)])
def test_accumulation_without_zero_grad(zero, summed):
    """``zero_grad()`` forgotten after the first step: each ``.grad`` summed 5 backward calls,
    as torch's own ``.grad`` shows; with it, no note."""
    got = _cell(False, zero=zero)
    notes = [n for n in got["notes"] if "accumulated from" in n]
    if summed is None:
        assert notes == [] and all(r.accumulated == 1 for r in got["rows"].values())
        return
    last = got["grads"][-1]
    for n, g in last.items():  # torch: the last .grad is the sum of the 5 steps' gradients
        assert got["rows"][f"net.{n}"].accumulated == summed
        assert not torch.equal(g, got["grads"][0][n])
    assert len(notes) == 1 and f"accumulated from {summed} backward calls" in notes[0]


def test_nan_parameter_is_named():
    got = _cell(False, poison=True)
    w = dict(got["after"][-1])
    assert torch.isnan(w["0.weight"]).any()  # (torch: the poisoned weight stays NaN)
    note = [n for n in got["notes"] if "holds NaN/Inf in" in n]
    assert len(note) == 1 and note[0].startswith("net (Sequential) holds NaN/Inf in 0.weight")


def test_a_gradient_left_by_an_earlier_cell_is_not_read_again():
    """A light cell that only runs the model forward (no backward): the ``.grad`` the earlier
    training cell left is not this cell's gradient; no gradients and no step are reported."""
    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        net = _net()
        R.set_on(False)
        tracker.light = True
        tracker.reset_cell()
        net(torch.randn(2, 4)).sum().backward()  # a cell that trains once (no optimizer)
        grad_light.after_cell(tracker)
        assert all(tracker.params[id(p)].hits == 1 for p in net.parameters())
        ns = {"net": net}
        assert model_report.report(tracker, ns).steps == 1
        tracker.reset_cell()
        out = net(torch.randn(2, 4))  # noqa: F841 - a forward only, grad on
        grad_light.after_cell(tracker)
        rep = model_report.report(tracker, ns)
        assert rep.steps == 0 and all(tracker.params[id(p)].hits == 0 for p in net.parameters())
        assert all(p.grad is not None for p in net.parameters())  # (torch kept the old ones)
    finally:
        tracker.uninstall()
        R.set_on(True)


def test_steps_counted_in_each_cell_light_or_not():
    """A functional loss (the model's own hook counts its steps; in a light cell its lean
    pre-hook does, the counting hook being back for the next cell): each cell's step count is
    the number of steps it ran, light, light again, then recorded."""
    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        net = _net()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        xb, yb = torch.randn(6, 4), torch.randn(6, 3)
        counts = []
        for light, steps in ((True, 5), (True, 4), (False, 3), (True, 2)):
            R.set_on(not light)
            tracker.light = light
            tracker.reset_cell()
            for _ in range(steps):
                opt.zero_grad()
                torch.nn.functional.mse_loss(net(xb), yb).backward()
                opt.step()
            if light:
                grad_light.after_cell(tracker)
            counts.append((tracker.step_count(), model_report.report(tracker, {"net": net}).steps))
        assert counts == [(5, 5), (4, 4), (3, 3), (2, 2)]
        tracker.light = False
        tracker.reset_cell()
        assert id(net) in tracker.roots  # (the counting hook, back after a light cell)
    finally:
        tracker.uninstall()
        R.set_on(True)


@pytest.mark.parametrize("loss_module", [False, True])
def test_a_later_light_cell_runs_every_step_lean(loss_module):
    """A model trained in an earlier cell: a light cell's first step already runs lean (no
    module call of the cell goes through nn's global hooks: its calls are the lean ones, known
    by their node ranges), and reports what a single light cell does: the last step's clusters
    and node names as record=on's, the step count, the first step's gradients, the losses."""
    from nbgrad.notebook.model_lean import Call

    got = _cell(False, cells=3, loss_module=loss_module)
    mine = [c for c in got["calls"] if c.cell == got["cell"]]
    assert [c for c in mine if type(c) is Call] == []  # (all lean)
    assert len(mine) == 5 * (2 if loss_module else 1)
    on = _cell(True, loss_module=loss_module)
    assert got["nodes"] == on["nodes"] and got["clusters"] == on["clusters"]
    assert "net.0 (Linear)" in got["clusters"]
    assert got["rep"].steps == 5 and got["hooked"] == set()
    g0 = got["grads"][0]
    for n, g in g0.items():
        assert math.isclose(got["rows"][f"net.{n}"].norm, _norm(g), rel_tol=1e-6), n
    if loss_module:
        assert got["rep"].losses == got["losses"]
    once = _cell(False, cells=3, zero="once")
    assert all(r.accumulated == 5 for r in once["rows"].values())


def test_unload_leaves_no_torch_hook(monkeypatch):
    """A light session in a shell, then ``%unload_ext``: torch's global module and optimizer
    step hooks are as before the load (nothing of the panel runs in a later step)."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from torch.nn.modules import module as M
    from torch.optim import optimizer as O

    from nbgrad.notebook import extension

    tables = (O._global_optimizer_pre_hooks, O._global_optimizer_post_hooks,
              M._global_forward_pre_hooks, M._global_forward_hooks)
    ip = InteractiveShell.instance()
    monkeypatch.setattr(ip.display_pub, "publish", lambda *a, **k: None)
    before = [set(t) for t in tables]
    try:
        ip.run_cell("%load_ext nbgrad")
        ip.run_cell("%nbgrad set record=off")
        for _ in range(2):
            r = ip.run_cell("import torch\nnet = torch.nn.Linear(3, 2)\n"
                            "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
                            "for _ in range(3):\n    opt.zero_grad()\n"
                            "    net(torch.ones(4, 3)).sum().backward()\n    opt.step()")
            assert r.error_in_exec is None
        assert R._opt_pre in tables[0].values() and R._opt_post in tables[1].values()
    finally:
        ip.run_cell("%unload_ext nbgrad")
        ip.run_cell("%reset -f")
    assert R._opt_pre not in tables[0].values() and R._opt_post not in tables[1].values()
    assert [set(t) for t in tables[2:]] == before[2:]


def test_a_model_whose_call_changed_is_watched_again():
    """A light cell whose model made other nodes than its twin's (another code path): its
    twins are dropped, and the next light cell watches its first step again (a twin of the
    new path), whose lean steps then expand to the inner calls of the new path."""
    from nbgrad.notebook.model_lean import Call

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)
            self.twice = False

        def forward(self, x):
            h = self.a(x)
            return self.b(self.a(h) if self.twice else h)

    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        R.set_on(False)
        tracker.light = True
        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        xb = torch.randn(5, 4)
        kinds = []
        for twice in (False, False, True, True):
            net.twice = twice
            tracker.reset_cell()
            for _ in range(3):
                opt.zero_grad()
                net(xb).sum().backward()
                opt.step()
            grad_light.after_cell(tracker)
            mine = [c for c in tracker.calls if c.cell == tracker.cell]
            lean = [c for c in mine if type(c) is not Call]
            kinds.append((sum(type(c) is Call for c in mine), len(lean),
                          len(lean[-1].expand())))
        # watched first step (net, a, b), 2 lean; all lean; lean but another path: not expanded;
        # watched again (net, a, a, b), then expanded to the new path's 4 calls
        assert kinds == [(3, 2, 3), (0, 3, 3), (0, 3, 1), (4, 2, 4)]
    finally:
        tracker.uninstall()
        R.set_on(True)
