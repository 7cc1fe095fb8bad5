"""The general path alone: the whole core suite under NBGRAD_GENERAL_PATH=1.

A few mechanisms keep a written-out fast case beside their general path for speed (`apply`'s
one-input ops, the engine's chain step and leaf step; benchmarks/README.md says what each
saves). The switch, read once when nbgrad is imported, turns the fast cases off, so a semantic
change made to one path only shows up here as a failure of the other. Every core test file runs
in a subprocess (the switch is read at import) and must pass there as it passes in this process;
a test that checks a fast path itself skips under the switch, saying so.

Left out (they test the notebook layer, the browser or the packaging, not the core's paths):
the browser and notebook tests, the panel's torch reading, Binder's venv and the README; and
this file (its subprocess would run the suite again).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbgrad.autograd import grad_mode

ROOT = Path(__file__).resolve().parents[1]

LEFT_OUT_PREFIXES = ("test_browser", "test_notebook")
LEFT_OUT = {"test_readme.py", "test_binder.py", "test_torch_panel.py",
            "test_torch_grad_batch.py", "test_general_path.py"}


def core_suite() -> list[str]:
    """Every test file of the core, by name (a new test file joins by itself)."""
    return [f"tests/{p.name}" for p in sorted((ROOT / "tests").glob("test_*.py"))
            if p.name not in LEFT_OUT and not p.name.startswith(LEFT_OUT_PREFIXES)]


def test_core_suite_is_wide():
    files = core_suite()
    assert len(files) > 50, files
    for must in ("tests/test_ops.py", "tests/test_autograd.py", "tests/test_fused.py",
                 "tests/test_semantics.py", "tests/test_speed_paths.py", "tests/test_nn_layers.py",
                 "tests/test_optim.py", "tests/test_as_torch.py"):
        assert must in files


def test_switch_is_read_at_import():
    code = ("import nbgrad.autograd.grad_mode as g, nbgrad.autograd.apply as a, "
            "nbgrad.autograd.engine as e; print(g.GENERAL_PATH, a.GENERAL_PATH, e.GENERAL_PATH)")
    env = dict(os.environ, NBGRAD_GENERAL_PATH="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.stdout.split() == ["True"] * 3, out.stderr


@pytest.mark.timeout(3600)
def test_core_suite_passes_on_the_general_path():
    pytest.importorskip("torch")
    if grad_mode.GENERAL_PATH:
        pytest.skip("this process already runs under NBGRAD_GENERAL_PATH=1")
    env = dict(os.environ, NBGRAD_GENERAL_PATH="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfE", "--maxfail=20", "-p", "no:cacheprovider",
           *core_suite()]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=3500)
    assert out.returncode == 0, out.stdout[-8000:] + out.stderr[-3000:]
