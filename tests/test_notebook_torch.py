"""The panel over real PyTorch, in a real kernel (nbclient + ipykernel, torch 2.13 CPU).

One notebook uses ``import torch`` itself and ``%load_ext nbgrad``; every claim its panels make
is checked against ground truth computed here, independently of the panel's code: the same
program run in torch in this process (which backward fails and with what message, which
parameters get no gradient, how many backward calls were summed into ``.grad``, which op made
the first non-finite value, the losses of the loop bit for bit).
"""

import json
import math
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from test_notebook_kernel import WIDGET, execute, panel_outputs, svg_in  # noqa: E402,F401
from test_notebook_model import printed, state, static, text  # noqa: E402

CELLS = {
    "load": "%load_ext nbgrad\n%nbgrad set live=100\nimport sys\n"
            "print('TORCH_BEFORE', 'torch' in sys.modules)",
    "imports": "import torch\nfrom torch import nn\ntorch.manual_seed(0)",
    "leaf": "x = torch.ones(3, requires_grad=True)",
    "forward": "y = x.tanh()\nz = y * 2",
    "inplace": "y.add_(3)\nprint('modified')",
    "backward": "z.sum().backward()",
    "model": ("net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
              "xb = torch.randn(5, 4)\n"
              "out = net(xb)\n"
              "loss = out.pow(2).mean()"),
    "detach": ("h = net[0](xb).detach()\n"
               "out2 = net[2](net[1](h))\n"
               "out2.sum().backward()"),
    "accumulate": ("net.zero_grad()\n"
                   "for _ in range(3):\n"
                   "    net(xb).sum().backward()"),
    "nan": ("w = torch.ones(2, requires_grad=True)\n"
            "r = torch.log(torch.tensor([1.0, 0.0]) * w)\n"
            "q = (r * 0).sum()\n"
            "q.backward()"),
    "loop": ("torch.manual_seed(1)\n"
             "opt = torch.optim.SGD(net.parameters(), lr=0.05)\n"
             "mse = nn.MSELoss()\n"
             "yb = torch.randn(5, 2)\n"
             "losses = []\n"
             "for i in range(12):\n"
             "    opt.zero_grad()\n"
             "    l = mse(net(xb), yb)\n"
             "    l.backward()\n"
             "    opt.step()\n"
             "    losses.append(l.item())\n"
             "print('LOSSES', json.dumps([float(v).hex() for v in losses]))"),
    "graph": "%nbgrad graph loss",
    "record_off": "%nbgrad set record=off",
    "unrecorded": "a = torch.ones(2, requires_grad=True)\nb = a.exp()",
    # record=off: a loop that forgets zero_grad, the first step's gradient norms printed by torch
    "loop_off": ("torch.manual_seed(2)\n"
                 "net2 = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
                 "opt2 = torch.optim.SGD(net2.parameters(), lr=0.01)\n"
                 "for i in range(6):\n"
                 "    l2 = mse(net2(xb), yb)\n"
                 "    l2.backward()\n"
                 "    if i == 0:\n"
                 "        G1 = {n: p.grad.norm().item() for n, p in net2.named_parameters()}\n"
                 "    opt2.step()\n"
                 "print('G1', json.dumps(G1))"),
    "versions": "print('VERSIONS', x._version, y._version, net[0].weight._version)",
    "record_on": "%nbgrad set record=on",
    "gc_make": "big_a = torch.randn(100, requires_grad=True)\nbig_b = big_a.exp() * 2\n"
               "big_c = big_b[:10]\nbig_c.add_(1)\npass  # (no Out[] holding a result)",
    "gc_drop": ("import weakref, gc\n"
                "refs = [weakref.ref(t) for t in (big_a, big_b, big_c)]\n"
                "del big_a, big_b, big_c\n"
                "gc.collect()\n"
                "print('ALIVE', sum(r() is not None for r in refs))"),
}
CELLS["loop"] = "import json\n" + CELLS["loop"]


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    names = list(CELLS)
    out = execute([CELLS[k] for k in names], tmp_path_factory.mktemp("torch"))
    return {k: out.cells[i] for i, k in enumerate(names)}, out


def count(cells, key):
    return cells[key].execution_count


def errors(cell):
    return [o for o in cell.outputs if o.output_type == "error"]


def stderr(cell):
    return "".join(o.get("text", "") for o in cell.outputs
                   if o.output_type == "stream" and o.name == "stderr")


def test_nothing_imports_torch_but_the_user(nb):
    cells, _ = nb
    assert printed(cells["load"], "TORCH_BEFORE") == "False"
    code = ("import sys, nbgrad\nfrom nbgrad.notebook import extension, inspect, render, "
            "model_report, adapter\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_no_panel_part_fails_or_warns(nb):
    cells, _ = nb
    for key, cell in cells.items():
        assert "nbgrad: the notebook panel failed" not in stderr(cell), (key, stderr(cell))
        assert "Traceback" not in stderr(cell), key


def test_stale_saved_tensor_predicted_with_both_lines(nb):
    cells, _ = nb
    fwd, mod = count(cells, "forward"), count(cells, "inplace")
    assert "1 stale saved tensor" in text(static(cells["inplace"]))
    svg = svg_in(static(cells["inplace"]))
    assert "TanhBackward0" in svg and "MulBackward0" in svg and "AddBackward0" in svg
    # the saved output of tanh: saved at version 0, now 1, by add_ in the next cell
    assert re.search(r"TanhBackward0</text>.*?will fail in backward</text>.*?"
                     rf"cell \[{fwd}\] line 1</text>.*?saved v0, now v1</text>.*?"
                     rf"add_ at cell \[{mod}\] line 1</text>", svg, re.S), svg
    assert "freed by backward" not in svg  # (y * 2 saves no self: nothing freed)


def test_the_error_is_torchs_own_and_explained_with_both_lines(nb):
    cells, _ = nb
    fwd, mod = count(cells, "forward"), count(cells, "inplace")
    (err,) = errors(cells["backward"])
    # ground truth: the same program here, without the extension
    x = torch.ones(3, requires_grad=True)
    y = x.tanh()
    z = y * 2
    y.add_(3)
    with pytest.raises(RuntimeError) as truth:
        z.sum().backward()
    assert err.ename == "RuntimeError" and err.evalue == str(truth.value)
    t = text(static(cells["backward"]))
    assert f"was saved by TanhBackward0 at cell [{fwd}] line 1 (version 0)" in t
    assert f"modified by add_ at cell [{mod}] line 1 (now version 1)" in t
    assert "saved by: y = x.tanh()" in t and "modified by: y.add_(3)" in t


def test_module_clusters_from_torchs_module_hooks(nb):
    cells, _ = nb
    svg = svg_in(static(cells["model"]))
    for title in ("net (Sequential)", "net.0 (Linear)", "net.1 (ReLU)", "net.2 (Linear)"):
        assert title in svg, title
    # torch's own node names, each with the user's line
    for name in ("AddmmBackward0", "ReluBackward0", "TBackward0", "PowBackward0",
                 "MeanBackward0"):
        assert name in svg, name
    assert f"cell [{count(cells, 'model')}] line 3" in svg


def _no_grad_truth():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    xb = torch.randn(5, 4)
    h = net[0](xb).detach()
    net[2](net[1](h)).sum().backward()
    return sorted(f"net.{n}" for n, p in net.named_parameters() if p.grad is None)


def test_no_gradient_parameters_named_with_the_cut(nb):
    cells, _ = nb
    t = text(static(cells["detach"]))
    names = _no_grad_truth()
    assert names == ["net.0.bias", "net.0.weight"]
    m = re.search(r"(net\.\S+(?:, net\.\S+)*) got no gradient: its output was detached at "
                  rf"cell \[{count(cells, 'detach')}\] line 1", t)
    assert m, t
    assert sorted(m.group(1).split(", ")) == names


def test_accumulation_without_zero_grad(nb):
    cells, _ = nb
    t = text(static(cells["accumulate"]))
    assert re.search(r"net\.0\.weight\.grad.* accumulated from 3 backward calls since zero_grad",
                     t), t


def test_nan_origin_is_the_first_non_finite_op(nb):
    cells, _ = nb
    # ground truth: run the ops one by one and find the first non-finite result
    w = torch.ones(2, requires_grad=True)
    steps = [("MulBackward0", lambda v: torch.tensor([1.0, 0.0]) * w), ("LogBackward0", torch.log)]
    v, first = None, None
    for name, f in steps:
        v = f(v)
        if first is None and not bool(torch.isfinite(v).all()):
            first = name
    assert first == "LogBackward0"
    t = text(static(cells["nan"]))
    assert f"made by {first} at cell [{count(cells, 'nan')}] line 2" in t, t


def test_loop_gets_one_summary_panel_and_identical_losses(nb):
    cells, notebook = nb
    cell = cells["loop"]
    assert len(panel_outputs(cell)) == 1
    st = state(notebook, cell)
    assert st["summary"].startswith("nbgrad: 12 training steps"), st["summary"]
    assert "Training" in st["tab_order"] and "Gradients" in st["tab_order"]
    got = [float.fromhex(v) for v in json.loads(printed(cell, "LOSSES"))]
    # ground truth: the same program here, without the extension (bit for bit)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    xb = torch.randn(5, 4)
    net[2](net[1](net[0](xb).detach())).sum().backward()
    net.zero_grad()
    for _ in range(3):
        net(xb).sum().backward()
    torch.manual_seed(1)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    yb = torch.randn(5, 2)
    want = []
    for _ in range(12):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(xb), yb)
        loss.backward()
        opt.step()
        want.append(loss.item())
    assert got == want
    # the graph of the last step's loss, made in a lean step (after the watched ones), its
    # modules folded: each module a box, as when every step is recorded (test_torch_panel)
    svg = svg_in(static(cell))
    for title in ("net.0 (Linear)", "net.1 (ReLU)", "net.2 (Linear)", "mse (MSELoss)"):
        assert f">{title}<" in svg, title
    grads = st["tabs"]["Gradients"]
    for p in ("net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"):
        assert p in grads
    assert all(math.isfinite(v) for v in got)


def test_graph_magic_draws_a_torch_tensor(nb):
    cells, _ = nb
    out = [o for o in cells["graph"].outputs if o.output_type in ("display_data",
                                                                   "execute_result")]
    assert out and any("MeanBackward0" in json.dumps(o.get("data", {})) for o in out)


def test_record_off_leaves_lines_out_but_draws_the_graph(nb):
    cells, _ = nb
    assert "record=off" in "".join(o.get("text", "") for o in cells["record_off"].outputs)
    svg = svg_in(static(cells["unrecorded"]))
    assert "ExpBackward0" in svg
    assert f"cell [{count(cells, 'unrecorded')}]" not in text(static(cells["unrecorded"]))


def test_record_off_loop_panel_against_torch(nb):
    """With record=off (a light cell: no parameter hooked) the loop's panel still has the step
    count, the module clusters, the Gradients tab (the first step's norms, as torch computed
    them), the gradients accumulated without zero_grad, and the one line of what it gives up."""
    cells, notebook = nb
    cell = cells["loop_off"]
    st = state(notebook, cell)
    assert st["summary"].startswith("nbgrad: 6 training steps"), st["summary"]
    svg = svg_in(static(cell))
    for title in ("net2.0 (Linear)", "net2.1 (ReLU)", "net2.2 (Linear)", "mse (MSELoss)"):
        assert f">{title}<" in svg, title
    t = text(static(cell))
    assert "record=off: gradients read once this cell" in t, t
    assert re.search(r"net2\.0\.weight\.grad.* accumulated from 6 backward calls since "
                     "zero_grad", t), t
    grads = text(st["tabs"]["Gradients"])
    for name, norm in json.loads(printed(cell, "G1")).items():  # torch's own norms, step 1
        assert re.search(rf"net2\.{re.escape(name)} \[[^\]]*\] {re.escape(f'{norm:.3g}')}\b",
                         grads), (
            name, norm, grads)


def test_versions_untouched(nb):
    cells, _ = nb
    x = torch.ones(3, requires_grad=True)
    y = x.tanh()
    y.add_(3)
    assert printed(cells["versions"], "VERSIONS").split()[:2] == [str(x._version),
                                                                  str(y._version)]


def test_no_tensor_or_graph_kept_alive_by_the_panel(nb):
    cells, _ = nb
    assert panel_outputs(cells["gc_make"])  # the panel read them (a view, a write, a graph)
    assert printed(cells["gc_drop"], "ALIVE") == "0"
