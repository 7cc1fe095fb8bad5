"""The tutorial notebooks (notebooks/*.ipynb), executed top to bottom in a real kernel.

Each notebook is copied into a temporary directory and run there with nbclient, in a kernel of
*this* interpreter (a kernelspec written to a temporary JUPYTER_PATH) with PYTHONPATH cleared: so
``import nbgrad`` resolves to the installed package (CI installs it with ``pip install .``, not
editable), never to the source tree, and a file missing from the wheel fails here.

Cells tagged ``raises-exception`` demonstrate an error on purpose (nbclient goes on after them);
any other error fails the test. Beyond "it ran", each notebook is checked for a few things a
student must see in its outputs (the seed 004 gradients 28 / 8 / 10, PyTorch's in-place error
text, the panel's prediction before backward, ...).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import _jupyterlab
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parent.parent
NB_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(p.name for p in NB_DIR.glob("[0-9][0-9]_*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"
KERNEL = "nbgrad-tests"
CELL_TIMEOUT = 180  # seconds per cell; every notebook takes well under a minute in all


def write_kernelspec(root: Path, python: str = sys.executable, env: dict | None = None) -> Path:
    """A kernelspec named KERNEL running ``python -m ipykernel_launcher``, under root/kernels."""
    d = root / "kernels" / KERNEL
    d.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "nbgrad tests", "language": "python",
            "env": {"PYTHONPATH": "", **(env or {})}}
    (d / "kernel.json").write_text(json.dumps(spec))
    return root


def execute_notebook(src: Path, workdir: Path, jupyter_path: Path, extra_cells=()):
    """Execute a copy of ``src`` in ``workdir``; return the executed notebook."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / src.name
    shutil.copy(src, path)
    nb = nbformat.read(path, as_version=4)
    for code in extra_cells:
        nb.cells.append(nbformat.v4.new_code_cell(code))
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(jupyter_path) + (os.pathsep + old if old else "")
    try:
        client = nbclient.NotebookClient(
            nb, kernel_name=KERNEL, timeout=CELL_TIMEOUT, allow_errors=False,
            store_widget_state=True, resources={"metadata": {"path": str(workdir)}})
        client.execute()
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    nbformat.write(nb, workdir / ("executed_" + src.name))
    return nb


# -- reading outputs ----------------------------------------------------------------------------

def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def text_of(cell) -> str:
    """Everything a reader sees as text in one cell's outputs (streams, results, errors)."""
    parts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            parts.append(o.text)  # a print may come in several chunks: keep them joined
        elif o.output_type == "error":
            parts.append(f"\n{o.ename}: {o.evalue}\n")
        else:
            parts.append("\n" + o.get("data", {}).get("text/plain", "") + "\n")
    return "".join(parts)


def cell_with(nb, source_part: str):
    """The first code cell whose source contains ``source_part``."""
    for c in code_cells(nb):
        if source_part in c.source:
            return c
    raise AssertionError(f"no cell contains {source_part!r}")


def cell_is(nb, source: str):
    """The first code cell whose whole source is ``source``."""
    for c in code_cells(nb):
        if c.source.strip() == source:
            return c
    raise AssertionError(f"no cell is {source!r}")


def panels(cell):
    return [o for o in cell.get("outputs", [])
            if o.output_type == "display_data" and o.get("data", {}).get("text/plain", "")
            .startswith("nbgrad:")]


def all_text(nb) -> str:
    return "\n".join(text_of(c) for c in code_cells(nb))


# -- fixtures -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jupyter_path(tmp_path_factory):
    return write_kernelspec(tmp_path_factory.mktemp("jupyter"))


_EXECUTED: dict[str, object] = {}


@pytest.fixture(scope="module")
def executed(jupyter_path, tmp_path_factory):
    """name -> executed notebook (each executed once per test session)."""
    def get(name):
        if name not in _EXECUTED:
            _EXECUTED[name] = execute_notebook(
                NB_DIR / name, tmp_path_factory.mktemp(name[:2]), jupyter_path,
                extra_cells=["import nbgrad as _nbg\nprint('NBGRAD_FILE', _nbg.__file__)"])
        return _EXECUTED[name]
    return get


def installed_nbgrad_file() -> str:
    """Where this interpreter imports nbgrad from outside the source tree (no cwd, PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import nbgrad; print(nbgrad.__file__)"],
                         cwd=os.path.expanduser("~") if os.path.isdir(os.path.expanduser("~"))
                         else "/", env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


# -- the notebooks as files ---------------------------------------------------------------------

def test_the_notebooks_are_numbered_in_order():
    assert [int(n[:2]) for n in NOTEBOOKS] == list(range(1, len(NOTEBOOKS) + 1)), NOTEBOOKS
    assert len(NOTEBOOKS) >= 7, NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_without_outputs_and_ends_with_exercises(name):
    nb = nbformat.read(NB_DIR / name, as_version=4)
    nbformat.validate(nb)
    for c in code_cells(nb):
        assert c.outputs == [] and c.execution_count is None, f"{name}: stored outputs"
    assert "%load_ext nbgrad" in code_cells(nb)[0].source
    assert any(c.cell_type == "markdown" and c.source.startswith("## Exercises")
               for c in nb.cells[-3:]), f"{name} does not end with exercises"


def test_generator_and_notebooks_agree(tmp_path):
    """notebooks/_build.py is the source: the committed .ipynb are exactly what it writes."""
    subprocess.run([sys.executable, str(NB_DIR / "_build.py"), str(tmp_path)], check=True,
                   capture_output=True)
    for name in NOTEBOOKS:
        assert (tmp_path / name).read_text() == (NB_DIR / name).read_text(), (
            f"{name} differs from what notebooks/_build.py writes: "
            "run `python notebooks/_build.py`")


# -- executed -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(executed, name):
    nb = executed(name)
    for c in code_cells(nb):
        errors = [o for o in c.outputs if o.output_type == "error"]
        tagged = "raises-exception" in c.metadata.get("tags", [])
        if tagged:
            assert errors, f"{name}: the cell tagged raises-exception did not raise:\n{c.source}"
        else:
            assert not errors, f"{name}: unexpected error in\n{c.source}"
        for o in c.outputs:
            if o.output_type == "stream" and o.name == "stderr":
                assert "the notebook panel failed" not in o.text, o.text
    # the kernel ran the installed package, not the source tree (unless that is what is installed)
    (where,) = re.findall(r"NBGRAD_FILE (\S+)", text_of(code_cells(nb)[-1]))
    assert os.path.realpath(where) == os.path.realpath(installed_nbgrad_file())
    # the extension loaded and showed its panel somewhere
    assert any(panels(c) for c in code_cells(nb)), f"{name}: no nbgrad panel in any cell"
    assert WIDGET in json.dumps([c.outputs for c in code_cells(nb)])
    assert nb.metadata.get("widgets"), "widget state was not stored"


def test_01_basics(executed):
    nb = executed("01_autograd_basics.ipynb")
    assert "tensor(28.) tensor(8.) tensor(10.)" in text_of(cell_with(nb, "loss.backward()\nprint"))
    assert "ExpBackward0" in text_of(cell_with(nb, "b = a.exp()"))
    walk = text_of(cell_with(nb, "walk(loss.grad_fn)"))
    assert "AccumulateGrad  -> leaf () = 2.0" in walk and "None  (does not require grad)" in walk
    rg = text_of(cell_with(nb, "l1.retain_grad()"))
    assert "l1.grad tensor([[7., 7.]" in rg and "loss.grad tensor(1.)" in rg
    hooks = text_of(cell_with(nb, "handles = ["))
    assert hooks.index("loss grad:") < hooks.index("l4 grad:") < hooks.index("l1 grad:")
    assert "tensor(56.) tensor(8.) tensor(10.)" in text_of(cell_with(nb, "grad * 2"))
    assert "tensor(56.) tensor(16.) tensor(20.)" in text_of(cell_with(nb, "for _ in range(2)"))
    graph_cell = cell_with(nb, "%nbgrad graph loss")
    kinds = {k for o in graph_cell.outputs for k in o.get("data", {})}
    assert "image/svg+xml" in kinds  # pygraphviz: laid out in-process
    assert "MeanBackward0" in text_of(graph_cell)
    # the panel appears under the cell that built the graph
    assert panels(cell_with(nb, "l4 = l2 * l3\nloss = l4.mean()"))


def test_02_inplace(executed):
    nb = executed("02_inplace_errors.ipynb")
    # the prediction, before backward is called
    (p,) = panels(cell_with(nb, "y.add_(3)\nprint(y._version)"))
    assert "1 stale saved tensor (backward will fail)" in p.data["text/plain"]
    html = p.data.get("text/html", "")
    assert "saved v0, now v1" in html and "add_" in html
    err = text_of(cell_with(nb, "y.sum().backward()"))
    assert ("one of the variables needed for gradient computation has been modified by an "
            "inplace operation: [nbgrad.FloatTensor [3]], which is output 0 of Tanh, is at "
            "version 1; expected version 0 instead.") in err
    assert "saved by TanhBackward0 at cell" in err and "modified in place by add_" in err
    assert ("saved_modified | [nbgrad.FloatTensor [3]] saved version 0 now 1"
            in all_text(nb))
    seed004 = text_of(cell_with(nb, "loss.backward()"))
    assert "modified by an inplace operation" in seed004 and "b[0] = 1000.0" in seed004
    assert "tensor([0., 5.])" in text_of(cell_with(nb, "del loss"))
    assert ("a leaf Variable that requires grad is being used in an in-place operation."
            in text_of(cell_with(nb, "a.add_(10.)")))
    assert ("a view of a leaf Variable that requires grad is being used in an in-place operation."
            in text_of(cell_with(nb, "a[:2].mul_(2)")))
    assert "True 1\ntensor([5., 5., 5., 5.])" in text_of(cell_with(nb, "with torch.no_grad():"))
    assert "tensor([200., 400.]) <- silently wrong" in text_of(cell_with(nb, "w.data.mul_(100)"))
    assert "modified by an inplace operation" in text_of(cell_with(nb, "w.detach().mul_(100)"))
    assert "tensor([0.7864, 0.4200, 0.0707]) 0 1" in text_of(cell_with(nb, "z = y.clone()"))


def test_03_views(executed):
    nb = executed("03_views_and_aliasing.ipynb")
    strides = text_of(cell_with(nb, "row = x[1]"))
    assert "col  shape=(3,) stride=(4,) offset=1 view=True same storage=True" in strides
    assert "xt   shape=(4, 3) stride=(1, 4) offset=0" in strides
    assert "1 1 1 1" in text_of(cell_with(nb, "col.fill_(-1.)"))
    regen = text_of(cell_with(nb, "x.add_(3)\nprint"))
    assert "SliceBackward0" in regen and "AsStridedBackward0" in regen
    assert "tensor([20., 20.,  0.,  0.])" in text_of(cell_with(nb, "(y * y).sum().backward()"))
    assert "CopySlices" in text_of(cell_with(nb, "h[1:3].mul_(5)"))
    assert "tensor([ 2., 10., 10.,  2.])" in text_of(cell_with(nb, "h.sum().backward()\nprint"))
    assert "tensor([0., 0., 1., 1.]) tensor([3., 3.])" in text_of(cell_with(nb, "h[:2] = v * 3"))
    assert "function that returns multiple views" in text_of(cell_with(nb, "unbind"))
    assert "view size is not compatible" in text_of(cell_with(nb, "xt.view(6)"))


def mib(text: str, label: str) -> float:
    m = re.search(re.escape(label) + r"\s+live\s+([\d.]+) MiB", text)
    assert m, f"no memory line {label!r} in\n{text}"
    return float(m.group(1))


def test_04_memory(executed):
    nb = executed("04_memory.ipynb")
    t = all_text(nb)
    assert mib(t, "x") == 4.0 and mib(t, "after the expression") == 4.0
    assert mib(t, "del x, s") == 0.0
    assert mib(t, "loss (graph alive)") == 8.0          # w + the saved exp output
    assert "ExpBackward0     [('result', (1024, 1024), 4194304)]" in t
    assert mib(t, "after backward (+ w.grad)") == 8.0   # saved output freed, w.grad added
    assert "Trying to backward through the graph a second time" in t
    assert "tensor([6., 2.])" in text_of(cell_with(nb, "small_loss = (a * a).mean()"))
    assert "w.grad holds 2.0 backward calls" in t
    assert mib(t, "after backward(retain_graph=True)") == 12.0  # w, w.grad, the kept exp output
    assert mib(t, "graph alive") == 8.0 and mib(t, "del loss: graph and saved tensors freed") == 4.0
    assert mib(t, "5 losses kept") > mib(t, "kept .item() instead") > mib(t, "last graph freed")
    assert "no GPU here: skipped" in t or "after empty_cache" in t
    # the memory panel under the cell that built the graph: the saved exp output
    (p,) = panels(cell_with(nb, 'mem("loss (graph alive)")'))
    memory = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", p.data["text/html"]))
    assert re.search(r"saved for backward 1 saved tensor holds 4(\.0)? MiB", memory), memory[-1500:]


def test_05_function(executed):
    nb = executed("05_custom_function_gradcheck.ipynb")
    t = all_text(nb)
    assert "MyExpBackward" in t
    assert "tensor([1.0000, 2.7183, 7.3891]) tensor([1.0000, 2.7183, 7.3891])" in t
    assert "which is output 0 of MyExp" in text_of(cell_is(nb, "y.sum().backward()"))
    assert "needs_input_grad: (True, False, False)" in t and "tensor([30., 40.])" in t
    assert "MyExp: True" in t and "BadSin: False" in t
    raised = [c for c in code_cells(nb) if "raises-exception" in c.metadata.get("tags", [])]
    assert "GradcheckError" in text_of(raised[-1]) and "BadSin" in raised[-1].source
    assert ("tensor(12., grad_fn=<MulBackward0>) tensor(12., grad_fn=<MulBackward0>) tensor(6.)"
            in t)
    d2 = re.findall(r"tensor\(\[([^\]]+)\]\)", text_of(cell_with(nb, "expected = ")))
    assert len(d2) == 2 and d2[0] == d2[1]
    assert "MyExp second derivative: True" in t


def test_06_model(executed):
    nb = executed("06_visual_debugging.ipynb")
    t = all_text(nb)
    acc = float(re.search(r"MLP test accuracy: ([\d.]+)", t).group(1))
    assert acc > 0.9
    assert float(re.search(r"CNN test accuracy: ([\d.]+)", t).group(1)) > 0.5
    plots = [o for c in code_cells(nb) for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(plots) == 2
    step = cell_with(nb, "torch.viz.graph(loss")
    assert "AccumulateGrad" in text_of(step) or "leaf" in text_of(step)
    (p,) = panels(cell_with(nb, "nn.ReLU(inplace=True)"))
    assert "1 stale saved tensor (backward will fail)" in p.data["text/plain"]
    bug = [c for c in code_cells(nb) if "raises-exception" in c.metadata.get("tags", [])][0]
    assert "which is output 0 of Sigmoid" in text_of(bug) and "relu_" in text_of(bug)
    assert "backward OK" in t
    # the RNN over the image rows: one step drawn, with the count and the line that built it
    (p,) = panels(cell_with(nb, "for row in range(8)"))
    assert "8 x h = torch.tanh(rnn_in(xb[:, 0, row]) + rnn_h(h))" in html.unescape(
        p.data["text/html"])


def test_07_debugging(executed):
    nb = executed("07_debugging_a_model.ipynb")
    # bug 1: the layers before the detach get no gradient, the fix gives every one a gradient
    cut = text_of(cell_with(nb, "for name, p in net.named_parameters()"))
    assert re.search(r"body\.0\.weight\s+NO GRADIENT", cut)
    assert re.search(r"head\.weight\s+grad norm", cut)
    assert "False" not in text_of(cell_with(nb, "self.last_h = h.detach()"))
    # bug 2: without zero_grad the gradient grows 1x, 2x, 3x; with it, it stays
    grows = eval(re.search(r"optimizer: (\[.*\])", all_text(nb)).group(1))
    assert grows[1] == pytest.approx(2 * grows[0], rel=1e-3)
    assert grows[2] == pytest.approx(3 * grows[0], rel=1e-3)
    same = eval(text_of(cell_with(nb, "    opt.zero_grad()\n    loss = F.cross_entropy(model(xb)"))
                .strip().splitlines()[0])
    assert same[0] == same[1] == same[2]
    # bug 3: log of a softmax gives NaN, cross_entropy does not
    assert "loss: nan" in text_of(cell_with(nb, "torch.log(probs)"))
    assert "NaN in gradients: False" in text_of(cell_with(nb, "loss = F.cross_entropy(logits, yb)"))
    # bug 4: train-mode evaluation varies, eval-mode evaluation does not
    varied = eval(re.search(r"same model: (\[[^\]]*\])", all_text(nb)).group(1))
    fixed = eval(re.search(r"in eval mode: (\[[^\]]*\])", all_text(nb)).group(1))
    assert len(set(varied)) > 1 and len(set(fixed)) == 1
    # bug 5: PyTorch's broadcasting warning
    assert "Using a target size" in text_of(cell_with(nb, "BUG: (64, 1) against (64,)"))
    # bug 6: the history holds megabytes, the numbers nothing
    held = float(re.search(r"history of 20 losses: ([\d.]+) MiB", all_text(nb)).group(1))
    # the panel's notes name each bug in the cell that made it
    def note(source):  # the header line and the full notes (the static copy's HTML)
        return " ".join(p.data["text/plain"] + p.data.get("text/html", "")
                        for p in panels(cell_with(nb, source)))
    cut = note("h = h.detach()                  # BUG")
    assert "body.0.weight" in cut and "got no gradient" in cut and "detach" in cut
    nan = note("torch.log(probs)")
    assert "NaN" in nan and "LogBackward0" in nan and "cell [" in nan
    assert "train mode" in note("BUG: still in training mode")
    # its 60-step loop (F.cross_entropy, no loss module) gets a loss curve
    assert "<b>loss</b>" in note("BUG: still in training mode")
    acc = note("BUG: no opt.zero_grad()")
    assert "model.0.weight.grad" in acc and "accumulated from 3 backward calls" in acc
    bc = note("BUG: (64, 1) against (64,)")
    assert "broadcasts" in bc and "Using a target size" in bc
    kept = note("history.append(loss)")
    assert "history" in kept and "graphs alive" in kept
    still = float(re.search(r"only numbers: ([\d.]+) MiB", all_text(nb)).group(1))
    assert held > 5 and still < 0.5


def test_08_sequences(executed):
    nb = executed("08_sequences.ipynb")
    t = all_text(nb)
    assert "rnn.weight_ih_l0" in t and "rnn.weight_hh_l0" in t
    assert float(re.search(r"LSTM test accuracy: ([\d.]+)", t).group(1)) >= 0.9
    # vanishing: the plain RNN's first-step gradient is orders of magnitude below its last;
    # an open forget gate keeps the LSTM's within one order
    steps = {m.group(1).strip(): (float(m.group(2)), float(m.group(3))) for m in re.finditer(
        r"^(.+?)\|dloss/dx\| at step 0: (\S+)\s+at step 63: (\S+)$", t, flags=re.M)}
    first, last = steps["RNN (tanh)"]
    assert first < 1e-6 * last
    first, last = steps["LSTM, forget bias 3"]
    assert first > 0.1 * last
    # exploding: a large W_hh gives a huge norm, clipping brings it to 1
    m = re.search(r"gradient norm (\d+) -> after clipping ([\d.]+)", t)
    assert float(m.group(1)) > 1000 and float(m.group(2)) == pytest.approx(1.0, abs=1e-3)
    # the unrolled graph of one forward pass is drawn with the LSTM's own nodes
    assert panels(cell_is(nb, "loss = F.cross_entropy(model(seqs[:3]), labels[:3])"))


def test_09_attention(executed):
    nb = executed("09_attention.ipynb")
    t = all_text(nb)
    # the causal weights are lower-triangular, each row summing to 1
    rows = [[float(v) for v in r.split()] for r in
            re.findall(r"\[+([\d. ]+)\]", text_of(cell_with(nb, "weights = torch.softmax(scores.masked_fill")))]
    assert len(rows) == 5 and all(abs(sum(r) - 1) < 0.03 for r in rows)
    assert all(r[j] == 0 for i, r in enumerate(rows) for j in range(i + 1, 5))
    # the in-place trap: predicted by the panel before backward, then PyTorch's error
    (p,) = panels(cell_with(nb, "weights.masked_fill_(future, 0.0)"))
    assert "1 stale saved tensor (backward will fail)" in p.data["text/plain"]
    bug = [c for c in code_cells(nb) if "raises-exception" in c.metadata.get("tags", [])][0]
    assert "which is output 0 of SoftmaxBackward0" in text_of(bug) or \
        "which is output 0 of Softmax" in text_of(bug)
    assert "masked_fill_" in text_of(bug)
    assert "backward OK" in t
    assert "same output: True | same weights: True" in t
    acc = float(re.search(r"token accuracy ([\d.]+)", t).group(1))
    assert acc >= 0.95


def test_10_pytorch(executed):
    """The panel over real PyTorch: each classic bug named in the cell that made it."""
    nb = executed("10_debugging_pytorch.ipynb")

    def note(source):
        return html.unescape(" ".join(p.data["text/plain"] + p.data.get("text/html", "")
                                      for p in panels(cell_with(nb, source))))
    made, changed = cell_with(nb, "y = x.sigmoid()"), cell_with(nb, "y.mul_(2)")
    assert "stale saved tensor" in note("y.mul_(2)")
    err = note("loss.backward()    # torch")
    assert "modified by an inplace operation" in text_of(cell_with(nb, "loss.backward()    #"))
    assert f"cell [{made.execution_count}] line 2" in err
    assert f"modified by mul_ at cell [{changed.execution_count}] line 1" in err
    cut = note("return self.head(h.detach())")
    assert "net.encoder.0.weight" in cut and "got no gradient" in cut and "detached" in cut
    assert "accumulated from 3 backward calls" in note("BUG: no opt.zero_grad() before it")
    nan = note("torch.log(probs)")
    assert "LogBackward0" in nan and "first non-finite value" in nan
    loop = note("BUG: still in eval mode")
    assert "40 training steps" in loop and "eval mode" in loop


def test_11_step_by_step(executed):
    """Backward one node at a time: the walk's .grad identical to backward()'s, a node reached
    three times shown as a sum, the MLP's and the neuron's panels, the stale saved tensor."""
    nb = executed("11_backward_step_by_step.ipynb")
    same = text_of(cell_with(nb, "walk.run_to_end()"))
    assert same.count("identical: True") == 5 and "identical: False" not in same
    assert "a.grad = 7.0" in text_of(cell_with(nb, "twice = step(c"))

    def view(source):
        return html.unescape(" ".join(o.data.get("text/html", "")
                                      for o in cell_with(nb, source).outputs
                                      if o.output_type in ("execute_result", "display_data")))
    assert "self: g * (1 - result²)" in view("walk.next()")
    assert "the gradients add up" not in view("walk.next()")
    assert "backward() of loss, step 0" in view("%nbgrad step loss")
    broken = view("broken = step(z")
    assert "modified by an inplace operation" in broken and "TanhBackward0" in broken
    assert "data 0.7071" in view("o = n.tanh()")  # values mode on: the value in the graph


def test_runs_without_graphviz(jupyter_path, tmp_path):
    """pygraphviz cannot be imported: the notebook still runs, says what it skipped, and the
    panels and %nbgrad graph fall back to a text tree."""
    block = tmp_path / "block"
    (block / "pygraphviz").mkdir(parents=True)
    (block / "pygraphviz" / "__init__.py").write_text("raise ImportError('blocked by the test')\n")
    bare = write_kernelspec(tmp_path / "jp", env={"PYTHONPATH": str(block)})
    nb = execute_notebook(NB_DIR / "01_autograd_basics.ipynb", tmp_path / "run", bare)
    first = text_of(code_cells(nb)[0])
    assert "graph layout (pygraphviz): missing -> skipped: graph drawings" in first
    assert "tensor(28.) tensor(8.) tensor(10.)" in all_text(nb)
    graph_cell = cell_with(nb, "%nbgrad graph loss")
    assert "MeanBackward0" in text_of(graph_cell)
    assert not any("image/svg+xml" in o.get("data", {}) for o in graph_cell.outputs)
    assert any(panels(c) for c in code_cells(nb))


# -- in JupyterLab, as a class runs it ----------------------------------------------------------

@pytest.mark.skipif(_jupyterlab.CHROMIUM is None, reason="chromium is not installed")
def test_run_all_in_jupyterlab(tmp_path):
    """JupyterLab 4 + headless chromium: open notebook 02, Run > Run All Cells, save.

    The tagged error cells must not stop Run All (JupyterLab honours `raises-exception` too), every
    code cell runs, and the panels render as widgets in the page.
    """
    import time

    from _jupyterlab import NO_NEWS, jupyterlab, launch_chromium, open_and_run_all  # noqa: I001

    sync_api = pytest.importorskip("playwright.sync_api")
    pytest.importorskip("jupyterlab")
    name = "02_inplace_errors.ipynb"
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NB_DIR / name, root / name)
    settings = {**NO_NEWS,  # and render every cell, not only those in view
                "notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"}}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with jupyterlab(root, tmp_path, env, settings) as url, sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            open_and_run_all(page, url, name)
            saved = None
            for _ in range(60):  # save until the last code cell has run
                time.sleep(2)
                page.keyboard.press("Control+s")
                time.sleep(1)
                saved = nbformat.read(root / name, as_version=4)
                if code_cells(saved)[-1].execution_count is not None:
                    break
            # the last 8 panels are live widgets; older ones were replaced by their static copy
            n_live = page.locator(".nbgrad-panel").count()
            n_panels = n_live + page.locator(".nbgrad-static").count()
        finally:
            browser.close()
    cells = code_cells(saved)
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), (
        "Run All stopped early: " + str([c.execution_count for c in cells]))
    for c in cells:
        errors = [o for o in c.outputs if o.output_type == "error"]
        assert bool(errors) == ("raises-exception" in c.metadata.get("tags", [])), c.source
    assert sum(1 for c in cells if panels(c)) >= 10
    assert n_panels >= 10 and 1 <= n_live <= 8
