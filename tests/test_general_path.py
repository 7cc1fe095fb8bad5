"""The general path alone: the op suite and the differential tests under NBGRAD_GENERAL_PATH=1.

A few mechanisms keep a written-out fast case beside their general path for speed (`apply`'s
one-input ops, the engine's chain step and leaf step; benchmarks/README.md says what each
saves). The switch, read once when nbgrad is imported, turns the fast cases off, so a semantic
change made to one path only shows up here as a failure of the other. The suites run in a
subprocess (the switch is read at import) and must pass there as they pass in this process.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the op table against PyTorch, the autograd engine, the fused nodes, the property tests and the
# differential fuzz categories (tests/_differential.py, tests/_fuzz_programs.py)
SUITES = [
    "tests/test_ops.py",
    "tests/test_autograd.py",
    "tests/test_fused.py",
    "tests/test_properties.py",
    "tests/test_semantics.py::test_random_programs_agree_with_torch",
    "tests/test_semantics.py::test_same_as_torch",
]


def test_switch_is_read_at_import():
    code = ("import nbgrad.autograd.grad_mode as g, nbgrad.autograd.apply as a, "
            "nbgrad.autograd.engine as e; print(g.GENERAL_PATH, a.GENERAL_PATH, e.GENERAL_PATH)")
    env = dict(os.environ, NBGRAD_GENERAL_PATH="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.stdout.split() == ["True"] * 3, out.stderr


def test_suites_pass_on_the_general_path():
    pytest.importorskip("torch")
    env = dict(os.environ, NBGRAD_GENERAL_PATH="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
           *SUITES]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=580)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
