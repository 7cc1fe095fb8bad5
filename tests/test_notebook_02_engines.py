"""Notebook 02 on either engine: its first line ``ENGINE = "nbgrad"`` switched to ``"torch"``.

Both runs execute every code cell of ``notebooks/02_inplace_errors.ipynb`` in a real kernel
(nbclient + ipykernel, this checkout's nbgrad). Ground truth: the same cells run here with real
torch and no extension (``exec``, the ``%`` magic lines left out): the torch run's printed text
and errors must be exactly those (the extension changes nothing torch computes or raises); the
nbgrad run must fail in the same cells with torch's message (its first line, the tensor type
named ``nbgrad.`` or ``nbgrad::`` instead of ``torch``) and print the same values.
"""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from test_notebook_kernel import execute  # noqa: E402
from test_notebook_model import static, text  # noqa: E402

NB = Path(__file__).resolve().parent.parent / "notebooks" / "02_inplace_errors.ipynb"
SWITCH = 'ENGINE = "nbgrad"'


def code_cells():
    nb = json.loads(NB.read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def switched(engine):
    cells = code_cells()
    assert cells[0].splitlines()[0].startswith(SWITCH)
    cells[0] = cells[0].replace(SWITCH, f'ENGINE = "{engine}"', 1)
    return cells


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return {e: execute(switched(e), tmp_path_factory.mktemp(e)).cells for e in ("torch",
                                                                              "nbgrad")}


def truth():
    """Each cell's stdout and error (type name, message), run here in torch without the panel."""
    ns, out = {}, []
    for src in switched("torch"):
        code = "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith("%"))
        buf, err = io.StringIO(), None
        with contextlib.redirect_stdout(buf):
            try:
                exec(compile(code, "<cell>", "exec"), ns)  # noqa: S102 - the notebook's own code
            except Exception as exc:  # noqa: BLE001 - the notebook's errors on purpose
                err = (type(exc).__name__, str(exc))
        out.append((_plain(buf.getvalue()), err))
    return out


def _plain(s):
    return re.sub(r" at 0x[0-9a-fA-F]+", "", s)  # (a grad_fn's repr names its address)


def stdout(cell):
    """The program's stdout: without the status line `%nbgrad set` prints (the magic lines
    are not the program's; truth() runs without them)."""
    text = "".join(o.get("text", "") for o in cell.outputs
                   if o.output_type == "stream" and o.name == "stdout")
    return _plain("".join(ln for ln in text.splitlines(keepends=True)
                          if not ln.startswith("nbgrad panel: ")))


def error(cell):
    errs = [(o.ename, o.evalue) for o in cell.outputs if o.output_type == "error"]
    assert len(errs) <= 1
    return errs[0] if errs else None


def test_the_switch_is_the_first_line():
    assert code_cells()[0].splitlines()[0].startswith(SWITCH)


def test_torch_run_prints_and_raises_exactly_what_torch_does(runs):
    want = truth()
    cells = runs["torch"]
    assert len(cells) == len(want)
    assert sum(e is not None for _, e in want) == 5  # the notebook's errors on purpose
    for i, (cell, (out, err)) in enumerate(zip(cells, want)):
        assert stdout(cell) == out, (i, cell.source)
        assert error(cell) == err, (i, cell.source)


def test_nbgrad_run_fails_in_the_same_cells_with_torchs_message(runs):
    for i, (t, n) in enumerate(zip(runs["torch"], runs["nbgrad"])):
        et, en = error(t), error(n)
        assert (et is None) == (en is None), (i, t.source)
        if et is not None:
            assert en[0] == et[0], (i, t.source)
            first = en[1].splitlines()[0]
            first = first.replace("nbgrad.", "torch.").replace("nbgrad::", "torch::")
            assert first == et[1].splitlines()[0], (i, t.source)
        if i:  # (the first cell names its engine)
            # the same values printed; nbgrad adds its explanation lines after torch's message
            # (printed by the cell that prints the error's lines after the first)
            tl = stdout(t).replace("torch.", "nbgrad.").splitlines()
            nl = stdout(n).splitlines()
            if "splitlines()[1:]" in t.source:
                assert len(nl) > len(tl) and any("saved by" in ln for ln in nl[len(tl):])
                nl = nl[:len(tl)]
            assert nl == tl, (i, t.source)


def test_torch_panel_predicts_and_explains_the_stale_tensor(runs):
    cells = runs["torch"]
    by_src = {c.source: c for c in cells}
    inplace = next(c for s, c in by_src.items() if s.startswith("y.add_(3)"))
    forward = next(c for s, c in by_src.items() if s.startswith("x = torch.tensor([0.5")
                   and "y = x.tanh()\nprint" in s)
    backward = next(c for s, c in by_src.items() if s.startswith("y.sum().backward()"))
    fwd, mod = forward.execution_count, inplace.execution_count
    assert "1 stale saved tensor" in text(static(inplace))
    t = text(static(backward))
    assert f"was saved by TanhBackward0 at cell [{fwd}] line 2 (version 0)" in t, t
    assert f"modified by add_ at cell [{mod}] line 1 (now version 1)" in t, t
