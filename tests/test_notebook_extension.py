"""The IPython extension in an in-process shell: hooks, magic, weak references, failure isolation.

The shell's display publisher is replaced by a recorder, so each cell's panel can be inspected.
Executing real notebooks in a kernel is in test_notebook_kernel.py.
"""

import gc
import os

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from nbgrad.notebook import extension  # noqa: E402


class Recorder:
    def __init__(self):
        self.bundles = []

    def __call__(self, data, metadata=None, source=None, **kw):
        self.bundles.append(data)


@pytest.fixture
def shell(monkeypatch):
    ip = InteractiveShell.instance()
    rec = Recorder()
    monkeypatch.setattr(ip.display_pub, "publish", rec)
    ip.recorder = rec
    ip.run_cell("import nbgrad")
    yield ip
    extension.unload_ipython_extension(ip)
    ip.run_cell("%reset -f")


def run(ip, code):
    """Run a cell; the bundles displayed by it."""
    n = len(ip.recorder.bundles)
    result = ip.run_cell(code, store_history=True)
    return result, ip.recorder.bundles[n:]


def panels(bundles):
    return [b for b in bundles if "nbgrad:" in b.get("text/plain", "") and "text/html" in b]


def test_load_twice_is_harmless_and_unload_removes_everything(shell):
    n_post = len(shell.events.callbacks["post_run_cell"])
    n_pre = len(shell.events.callbacks["pre_run_cell"])
    shell.run_line_magic("load_ext", "nbgrad")
    extension.load_ipython_extension(shell)  # a direct second load as well
    assert len(shell.events.callbacks["post_run_cell"]) == n_post + 1
    assert len(shell.events.callbacks["pre_run_cell"]) == n_pre + 1
    assert "nbgrad" in shell.magics_manager.magics["line"]
    _, out = run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()")
    assert len(panels(out)) == 1

    shell.run_line_magic("unload_ext", "nbgrad")
    assert len(shell.events.callbacks["post_run_cell"]) == n_post
    assert len(shell.events.callbacks["pre_run_cell"]) == n_pre
    assert "nbgrad" not in shell.magics_manager.magics["line"]
    assert extension.get_extension(shell) is None
    _, out = run(shell, "z = y * 2")
    assert panels(out) == []


def test_panel_only_after_cells_that_change_state(shell):
    extension.load_ipython_extension(shell)
    _, out = run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.tanh()")
    (p,) = panels(out)
    assert "TanhBackward0" in p["text/html"] and "AccumulateGrad" in p["text/html"]
    _, out = run(shell, "a = 1 + 1\nprint(y.shape)")  # reads tensors, changes nothing
    assert panels(out) == []
    _, out = run(shell, "y.add_(3)")
    (p,) = panels(out)
    assert "stale saved tensor" in p["text/plain"]
    assert "add_ at cell [" in p["text/html"]


def test_autograd_error_gets_a_panel_with_the_explanation(shell):
    extension.load_ipython_extension(shell)
    run(shell, "x = nbgrad.ones(3, requires_grad=True)")
    cell_tanh = shell.execution_count
    run(shell, "y = x.tanh()")
    cell_add = shell.execution_count
    run(shell, "y.add_(3)")
    result, out = run(shell, "y.sum().backward()")
    assert isinstance(result.error_in_exec, RuntimeError)
    (p,) = panels(out)
    html = p["text/html"]
    assert f"saved by TanhBackward0 at cell [{cell_tanh}] line 1" in html
    assert f"modified by add_ at cell [{cell_add}] line 1" in html
    assert "backward fails here" in html or "Error" in html
    # an ordinary user error is not the panel's business
    _, out = run(shell, "undefined_name")
    assert panels(out) == []


def test_a_failing_hook_is_one_line_and_leaves_the_cell_alone(shell, capsys):
    from nbgrad.notebook import inspect as nbi

    extension.load_ipython_extension(shell)

    def broken(*a, **k):
        raise ValueError("boom")

    real = nbi.snapshot
    nbi.snapshot = broken
    try:
        result, out = run(shell, "x = nbgrad.ones(2, requires_grad=True)\ny = x * 3\ny.shape")
    finally:
        nbi.snapshot = real
    assert result.success and result.error_in_exec is None
    assert tuple(result.result) == (2,)
    err = capsys.readouterr().err
    warn = [line for line in err.splitlines() if "nbgrad" in line]
    assert len(warn) == 1 and "boom" in warn[0] and "your cell ran normally" in warn[0]
    assert panels(out) == []
    result, out = run(shell, "z = y * 2")  # and the next cell works, panel included
    assert result.success and len(panels(out)) == 1
    assert tuple(shell.user_ns["z"].shape) == (2,)


def test_extension_keeps_no_tensor_or_graph_alive(shell, monkeypatch):
    extension.load_ipython_extension(shell)
    monkeypatch.setattr(extension, "_has_comm", lambda ip: True)  # the widget path as well
    run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = (x * 2).tanh()\nv = y[:2]")
    run(shell, "y.add_(1)\npass")  # not the last expression: IPython's Out would keep it
    run(shell, "import weakref\nrefs = [weakref.ref(t) for t in (x, y, v)] + "
               "[weakref.ref(y.grad_fn), weakref.ref(v._base)]")
    refs = shell.user_ns["refs"]
    assert all(r() is not None for r in refs)
    run(shell, "del x, y, v")
    gc.collect()
    assert [r() is None for r in refs] == [True] * len(refs)


def test_magic_on_off_status_graph_and_set(shell, capsys):
    extension.load_ipython_extension(shell)
    shell.run_line_magic("nbgrad", "off")
    _, out = run(shell, "x = nbgrad.ones(3, requires_grad=True)\ny = x.exp()")
    assert panels(out) == []
    shell.run_line_magic("nbgrad", "status")
    assert "nbgrad panel: off" in capsys.readouterr().out
    shell.run_line_magic("nbgrad", "on")
    _, out = run(shell, "z = y * 2")
    assert len(panels(out)) == 1
    g = shell.run_line_magic("nbgrad", "graph z.sum()")
    assert "ExpBackward0" in g.source and '"y\\n' in g.source
    shell.run_line_magic("nbgrad", "set max_nodes=2")
    _, out = run(shell, "w = z * 3")
    (p,) = panels(out)
    assert "more nodes (cap 2)" in p["text/html"] or "hidden" in p["text/plain"]
    capsys.readouterr()
    shell.run_line_magic("nbgrad", "set max_nodes=5  # a comment, as in the notebooks' setup")
    out = capsys.readouterr().out
    assert "unknown setting" not in out and "max_nodes=5" in out.replace(" ", "")


def test_tensor_html_repr_in_the_shell(shell):
    extension.load_ipython_extension(shell)
    run(shell, "x = nbgrad.tensor([1.0, 2.0], requires_grad=True)")
    fmt = shell.display_formatter.format(shell.user_ns["x"])[0]
    assert "text/html" in fmt and "requires_grad" in fmt["text/html"]



def test_tensor_html_is_registered_by_the_notebook_layer():
    """The core has no _repr_html_: `import nbgrad` in an IPython shell registers the Tensor's
    text/html formatter through nbgrad.notebook, without %load_ext (a fresh process: nbgrad is
    imported there under IPython, as in Jupyter)."""
    import subprocess
    import sys

    code = ("from IPython.core.interactiveshell import InteractiveShell\n"
            "ip = InteractiveShell.instance()\n"
            "ip.run_cell('import nbgrad; p = nbgrad.nn.Parameter(nbgrad.ones(2))')\n"
            "fmt = ip.display_formatter.format(ip.user_ns['p'])[0]\n"
            "import nbgrad\n"
            "print(hasattr(nbgrad.Tensor, '_repr_html_'), 'requires_grad' in fmt['text/html'])\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.split()[-2:] == ["False", "True"], out.stderr[-2000:]
