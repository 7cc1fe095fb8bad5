"""Notebooks executed in a real kernel (nbclient + ipykernel), widget state stored.

The seeds' in-place examples run cell by cell with ``%load_ext nbgrad``; the saved outputs must
show the red stale saved tensor, the provenance (cell numbers and ops), and no panel for a quiet
cell. Each panel is a widget view *and* a static text/html copy.
"""

import os
import re
import sys
import urllib.parse
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("anywidget")

from nbgrad.notebook import render  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
WIDGET = "application/vnd.jupyter.widget-view+json"


def execute(cells, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    old = os.environ.get("PYTHONPATH")
    # the kernel imports this checkout's nbgrad
    os.environ["PYTHONPATH"] = str(REPO) + (os.pathsep + old if old else "")
    try:
        client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                         allow_errors=True, store_widget_state=True,
                                         resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    nbformat.write(nb, tmp_path / "executed.ipynb")
    return nb


def panel_outputs(cell, live_only=False):
    """The cell's panel: the widget view with its static copy, or, once KEEP_LIVE newer panels
    were shown, the static copy alone (the extension retires older widgets)."""
    return [o for o in cell.outputs
            if o.output_type == "display_data" and (WIDGET in o.data or (
                not live_only and "nbgrad-static" in o.data.get("text/html", "")))]


def svg_in(html):
    """The graph SVG of a static panel (an <img> with a data URI, which sanitisers keep)."""
    m = re.search(r'src="data:image/svg\+xml,([^"]+)"', html)
    assert m, "no SVG image in the static panel"
    svg = urllib.parse.unquote(m.group(1))
    return svg.replace("'", '"')  # (render.svg_uri made the quotes single: the SVG had none)


def panel_html(cell):
    (p,) = panel_outputs(cell)
    assert "text/html" in p.data  # the static fallback beside the widget view
    return p.data["text/html"]


@pytest.fixture(scope="module")
def seed000(tmp_path_factory):
    return execute([
        "import nbgrad\n%load_ext nbgrad",                            # [1]
        "x = nbgrad.ones(3, requires_grad=True)",                     # [2]
        "y = x.tanh()",                                               # [3]
        "y.add_(3)\nprint('modified')",                               # [4]
        "print('a quiet cell', 1 + 1)",                               # [5]
        "y.sum().backward()",                                         # [6]
        "x = nbgrad.ones(4)\nv = x[:2]\nx.add_(3)\nprint(v._version)",  # [7]
        "%nbgrad status",                                             # [8]
    ], tmp_path_factory.mktemp("seed000"))


def test_seed000_cells_and_panels(seed000):
    c = seed000.cells
    assert [len(panel_outputs(cell)) for cell in c] == [0, 1, 1, 1, 0, 1, 1, 0]
    # the quiet cell has its own output and nothing else
    assert [o.output_type for o in c[4].outputs] == ["stream"]
    assert "a quiet cell 2" in c[4].outputs[0].text


def test_seed000_stale_saved_tensor_is_red_before_backward(seed000):
    html = panel_html(seed000.cells[3])
    svg = svg_in(html)
    assert svg.startswith("<svg")
    assert render.C_STALE in svg  # the saved tensor drawn red
    assert "saved v0, now v1" in svg and "add_ at cell [4] line 1" in svg
    assert "TanhBackward0" in svg and "cell [3] line 1" in svg and "will fail in backward" in svg
    assert "1 stale saved tensor (backward will fail)" in html
    # the text tree rides along as the image's alt text
    assert "STALE saved v0, now v1 (modified by add_ at cell [4] line 1)" in html


def test_seed000_backward_error_provenance(seed000):
    cell = seed000.cells[5]
    err = [o for o in cell.outputs if o.output_type == "error"]
    assert err and err[0].ename == "RuntimeError"
    html = panel_html(cell)
    assert "saved by TanhBackward0 at cell [3] line 1 (version 0)" in html
    assert "modified by add_ at cell [4] line 1 (now version 1)" in html
    assert "backward fails here" in svg_in(html)


def test_seed000_views_panel(seed000):
    html = panel_html(seed000.cells[6])
    assert "2 tensors alias it" in html and "_version = 1" in html
    assert "view of" in html


def test_widget_state_is_stored(seed000):
    state = seed000.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    models = [m for m in state.values() if m["model_name"] == "AnyModel"]
    assert len(models) == 5
    from nbgrad.notebook.widgets import saved_state

    for m in models:
        assert "<svg" in saved_state(m["state"])["tabs"]["Graph"] and m["state"]["_esm"]
    stale = [m for m in models if "stale saved tensor" in m["state"]["summary"]]
    assert stale and render.C_STALE in saved_state(stale[0]["state"])["tabs"]["Graph"]
    ids = {panel_outputs(cell)[0].data[WIDGET]["model_id"] for cell in seed000.cells
           if panel_outputs(cell)}
    assert ids <= set(state)


def test_seed004_setitem_and_leaf_inplace(tmp_path):
    nb = execute([
        "import nbgrad\n%load_ext nbgrad",                                                # [1]
        "a = nbgrad.tensor([1.0, 3.0], requires_grad=True)\nb = a + 2\nloss = (b * b).mean()",
        "b[0] = 1000.0\nprint(b._version)",                                               # [3]
        "loss.backward()",                                                                # [4]
        "c = nbgrad.tensor([10., 5., 2., 3.], requires_grad=True)",                       # [5]
        "c.add_(10.)",                                                                    # [6]
        "%unload_ext nbgrad",                                                             # [7]
        "d = c * 2",                                                                      # [8]
    ], tmp_path)
    c = nb.cells
    assert [len(panel_outputs(cell)) for cell in c] == [0, 1, 1, 1, 1, 1, 0, 0]
    svg = svg_in(panel_html(c[2]))
    assert render.C_STALE in svg and "MulBackward0" in svg
    assert "copy_ at cell [3] line 1" in svg and "cell [2] line 3" in svg
    html = panel_html(c[3])
    assert "saved by MulBackward0 at cell [2] line 3 (version 0)" in html
    assert "at cell [3] line 1 (now version 1)" in html
    html = panel_html(c[5])
    assert "leaf Variable that requires grad" in html and "no_grad" in html
    assert [o.output_type for o in c[7].outputs] == []  # unloaded: no panel


def test_hook_failure_in_a_kernel_is_one_line(tmp_path):
    nb = execute([
        "import nbgrad\n%load_ext nbgrad",
        "import nbgrad.notebook.inspect as nbi\n"
        "def _broken(*a, **k):\n    raise ValueError('boom')\n"
        "nbi.snapshot = _broken",
        "x = nbgrad.ones(2, requires_grad=True)\ny = x * 3\ny.shape",
        "print(tuple(y.shape))",
    ], tmp_path)
    c = nb.cells
    kinds = [o.output_type for o in c[2].outputs]
    assert "error" not in kinds and "execute_result" in kinds
    stderr = [o.text for o in c[2].outputs if o.output_type == "stream" and o.name == "stderr"]
    assert len(stderr) == 1 and stderr[0].count("\n") == 1 and "boom" in stderr[0]
    assert c[3].outputs[0].text.strip() == "(2,)"


@pytest.mark.skipif(sys.platform == "win32", reason="venv layout")
def test_wheel_carries_the_front_end(tmp_path):
    """A non-editable install in a fresh venv finds extension/'s JS and CSS."""
    import shutil
    import subprocess
    import sysconfig

    src = tmp_path / "src"
    shutil.copytree(REPO, src, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__",
                                                  ".venv", "artifacts"))
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(dist), str(src)], check=True, cwd=tmp_path)
    (wheel,) = dist.glob("nbgrad-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, cwd=tmp_path, env=clean)
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, env=clean,
                             check=True).stdout.strip()
    # -I -S: no PYTHONPATH, no .pth files (an editable or installed nbgrad of this interpreter
    # must not win); then the venv's packages first, this interpreter's (numpy, anywidget) after
    outer = sysconfig.get_paths()["purelib"]
    code = (f"import sys; sys.path += [{purelib!r}, {outer!r}]; "
            "import nbgrad, nbgrad.notebook.widgets as w, pathlib; "
            "print(pathlib.Path(nbgrad.__file__).resolve().parent); "
            "c = w.panel_code(); print('export default' in w.LOADER, "
            "'export default' in c['code'] and '.nbgrad-panel' in c['css'])")
    run = subprocess.run([str(py), "-I", "-S", "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=clean)
    assert run.returncode == 0, run.stderr
    out = run.stdout.split("\n")
    assert str(venv) in out[0]  # the installed copy, not the checkout
    assert out[1] == "True True"
