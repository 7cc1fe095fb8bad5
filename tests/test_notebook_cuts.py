"""Two things the panel learns from the core, in a real kernel (nbclient + ipykernel), on small
models written here:

- the loss curve of a training-loop cell whose loss is functional (``F.cross_entropy(...)
  .backward()``): the engine tells the panel what each backward started from;
- where a parameter's path to the loss was cut: ``.detach()``, ``.data`` and ``from_numpy`` record
  their line (provenance), so the note names it ("its output was detached at cell [3] line 1").

Values are checked against what the same kernel prints, never against constants.
"""

import json

import pytest

from test_notebook_kernel import execute
from test_notebook_model import printed, state, static, text

from nbgrad.notebook import render_model

SETUP = """import nbgrad
from nbgrad import nn
import nbgrad.nn.functional as F
%load_ext nbgrad
%nbgrad set live=100
nbgrad.manual_seed(0)
x = nbgrad.randn(16, 4)
t = nbgrad.tensor([0, 1, 2] * 5 + [0])
y = nbgrad.randn(16, 1)
model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
opt = nbgrad.optim.SGD(model.parameters(), lr=0.5)"""

CELLS = {
    "setup": SETUP,
    "functional_loop": ("losses = []\n"
                        "for step in range(8):\n"
                        "    opt.zero_grad()\n"
                        "    loss = F.cross_entropy(model(x), t)\n"
                        "    loss.backward()\n"
                        "    opt.step()\n"
                        "    losses.append(loss.item())\n"
                        "print('LOSSES', losses)"),
    # a loss module also called for validation inside the loop: the curve is what backward
    # started from (the training loss), not every output of the loss module
    "val_loop": ("ce = nn.CrossEntropyLoss()\n"
                 "train, val = [], []\n"
                 "for step in range(6):\n"
                 "    opt.zero_grad()\n"
                 "    loss = ce(model(x), t) + 0.01 * model[0].weight.pow(2).sum()\n"
                 "    loss.backward()\n"
                 "    opt.step()\n"
                 "    train.append(loss.item())\n"
                 "    with nbgrad.no_grad():\n"
                 "        val.append(ce(model(x[:8]), t[:8]).item())\n"
                 "print('LOSSES', train)"),
    "data_cut": ("h = model[0](x).data\n"
                 "out = model[2](model[1](h))\n"
                 "F.cross_entropy(out, t).backward()"),
    "enc_cls": ("class Enc(nn.Module):\n"
                "    def __init__(self):\n"
                "        super().__init__()\n"
                "        self.fc = nn.Linear(4, 6)\n"
                "    def forward(self, x):\n"
                "        return self.fc(x).tanh().detach()\n"
                "enc, head = Enc(), nn.Linear(6, 3)"),
    "enc_run": "F.cross_entropy(head(enc(x)), t).backward()",
    "np_cls": ("class NumpyNet(nn.Module):\n"
               "    def __init__(self):\n"
               "        super().__init__()\n"
               "        self.fc1 = nn.Linear(4, 6)\n"
               "        self.fc2 = nn.Linear(6, 3)\n"
               "    def forward(self, x):\n"
               "        a = self.fc1(x).relu().detach().numpy()\n"
               "        h = nbgrad.from_numpy(a * 2)\n"
               "        return self.fc2(h)\n"
               "npnet = NumpyNet()"),
    "np_run": "F.cross_entropy(npnet(x), t).backward()",
    "prov_off": ("from nbgrad import provenance\n"
                 "provenance.set_enabled(False)\n"
                 "m2 = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))\n"
                 "h2 = m2[0](x).detach()\n"
                 "F.cross_entropy(m2[2](m2[1](h2)), t).backward()\n"
                 "provenance.set_enabled(True)"),
    "unload": ("%unload_ext nbgrad\n"
               "from nbgrad.autograd import engine\n"
               "print('OBSERVERS', len(engine.BACKWARD_OBSERVERS))"),
}


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    names = list(CELLS)
    out = execute([CELLS[k] for k in names], tmp_path_factory.mktemp("cuts"))
    return {k: out.cells[i] for i, k in enumerate(names)}, out


@pytest.mark.parametrize("name", ["functional_loop", "val_loop"])
def test_a_loop_gets_the_curve_of_what_backward_started_from(nb, name):
    cells, notebook = nb
    st = state(notebook, cells[name])
    losses = json.loads(printed(cells[name], "LOSSES"))
    assert st["active"] == "Training"
    train = text(st["tabs"]["Training"])
    assert (f"loss first {render_model._num(losses[0])}, last {render_model._num(losses[-1])}, "
            f"min {render_model._num(min(losses))}, max {render_model._num(max(losses))} "
            f"over {len(losses)} steps") in train
    assert "nothing to plot" not in train


@pytest.mark.parametrize("made, ran, note", [
    ("data_cut", "data_cut", "model.0.weight, model.0.bias got no gradient: its output was taken "
     "out of the graph through .data at cell [{n}] line 1, before model.1 (ReLU) used it"),
    ("enc_cls", "enc_run", "enc.fc.weight, enc.fc.bias got no gradient: the output of enc (Enc) "
     "was detached inside its forward at cell [{n}] line 6"),
    ("np_cls", "np_run", "npnet.fc1.weight, npnet.fc1.bias got no gradient: its output was turned "
     "into numpy and back (from_numpy) at cell [{n}] line 8, before npnet.fc2 (Linear) used it"),
])
def test_a_cut_is_named_with_the_line_it_ran_at(nb, made, ran, note):
    cells, _ = nb
    assert note.format(n=cells[made].execution_count) in text(static(cells[ran]))


def test_without_provenance_the_note_still_says_what_cut_it(nb):
    cells, _ = nb
    t = text(static(cells["prov_off"]))
    assert ("m2.0.weight, m2.0.bias got no gradient: its output was detached (.detach() or .data) "
            "before m2.1 (ReLU) used it at ?") in t


def test_unloading_removes_the_backward_observer(nb):
    cells, _ = nb
    assert printed(cells["unload"], "OBSERVERS") == "0"
