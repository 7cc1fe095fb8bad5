"""Generated documentation is up to date: docs/supported.md and README's supported block are what
docs/_supported.py writes from the op table and PyTorch's namespaces."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parent.parent


def test_supported_list_is_generated_from_the_op_table():
    run = subprocess.run([sys.executable, str(REPO / "docs" / "_supported.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_supported_doc_lists_every_row():
    from nbgrad.ops import ROWS
    doc = (REPO / "docs" / "supported.md").read_text()
    for name, row in ROWS.items():
        assert f"| `{name}` | `{row.node.__name__}` |" in doc, name
