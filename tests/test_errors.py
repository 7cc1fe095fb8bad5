"""Errors and warnings as a user meets them: nbgrad's errors point at the user's line (plain
Python: no nbgrad frame is printed; IPython: nbgrad's intermediate frames are hidden), and no
numpy RuntimeWarning ever reaches the user (NaN and Inf are values, as in PyTorch)."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import torch

import nbgrad

SCRIPT = """\
import nbgrad
x = nbgrad.ones(2, 3, requires_grad=True)
y = x + nbgrad.ones(4)
"""


def _run(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env})


def test_plain_python_traceback_shows_the_users_line_only():
    r = _run(SCRIPT)
    err = r.stderr
    assert "The size of tensor a (3) must match the size of tensor b (4)" in err
    assert 'File "<string>", line 3, in <module>' in err  # the user's line (python -c)
    assert "nbgrad" + os.sep not in err and "apply.py" not in err, err


def test_plain_python_full_traceback_on_request():
    err = _run(SCRIPT, NBGRAD_FULL_TRACEBACK="1").stderr
    assert "apply.py" in err


def test_backward_error_points_at_the_users_line():
    code = ("import nbgrad\nx = nbgrad.ones(3, requires_grad=True)\ny = x.exp()\n"
            "y.add_(1)\ny.sum().backward()\n")
    err = _run(code).stderr
    assert "modified by an inplace operation" in err
    assert 'File "<string>", line 5, in <module>' in err
    assert "engine.py" not in err and "graph.py" not in err, err


def test_user_errors_inside_hooks_keep_their_frames():
    code = ("import nbgrad\nx = nbgrad.ones(3, requires_grad=True)\n"
            "def hook(g):\n    raise ValueError('mine')\n"
            "x.register_hook(hook)\nx.sum().backward()\n")
    err = _run(code).stderr
    assert "ValueError: mine" in err and "line 4, in hook" in err


def test_ipython_hides_nbgrad_frames():
    code = ("from IPython.core.interactiveshell import InteractiveShell\n"
            "sh = InteractiveShell.instance(colors='NoColor')\n"
            "sh.run_cell('import nbgrad')\n"
            "sh.run_cell('x = nbgrad.ones(2, 3)\\ny = x + nbgrad.ones(4)')\n")
    out = _run(code).stdout
    assert "y = x + nbgrad.ones(4)" in out
    assert "skipping hidden 1 frame" in out, out  # Tensor.__add__; the raising frame shows
    assert "in __add__(" not in out, out


def _no_warning(f):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        return f()


def test_no_numpy_warning_in_forward_or_backward():
    def f(T):
        x = T.tensor([-1.0, 0.0, 1000.0], requires_grad=True)
        y = x.sqrt() + x.log() + (1 / x) + x.exp() + x.log().exp() * 0
        y.sum().backward()
        return y.detach().numpy(), x.grad.numpy()
    yn, gn = _no_warning(lambda: f(nbgrad))
    yt, gt = f(torch)
    np.testing.assert_array_equal(np.isnan(yn), np.isnan(yt))
    np.testing.assert_array_equal(np.isnan(gn), np.isnan(gt))


def test_no_numpy_warning_under_create_graph():
    x = nbgrad.tensor([0.0, -1.0], requires_grad=True)
    (g,) = _no_warning(lambda: nbgrad.autograd.grad(x.sqrt().sum(), x, create_graph=True))
    assert np.isinf(g.detach().numpy()[0]) and np.isnan(g.detach().numpy()[1])
