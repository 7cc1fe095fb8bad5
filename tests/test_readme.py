"""The README's first example, run as a reader would: each code block one cell, in a real kernel.

The blocks under "A first example, cell by cell" are executed in order; only the last may raise
(it fails on purpose), and it must raise PyTorch's in-place error with nbgrad's provenance, after
the panel had predicted it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

import test_notebooks as tn  # noqa: E402  (the notebook runner and output readers)

REPO = Path(__file__).resolve().parent.parent


def example_blocks() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## A first example, cell by cell", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_example_runs_cell_by_cell(tmp_path, monkeypatch):
    # ipykernel does not forward the C-level stderr (fd 2) to the notebook under pytest (it looks
    # for this variable); a user's kernel does, so the kernel here runs as a user's does
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    blocks = example_blocks()
    assert len(blocks) >= 3, "the example is written as several cells"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(b.rstrip()) for b in blocks])
    nb.cells[-1].metadata["tags"] = ["raises-exception"]
    src = tmp_path / "readme_example.ipynb"
    nbformat.write(nb, src)
    ran = tn.execute_notebook(src, tmp_path / "run", tn.write_kernelspec(tmp_path / "jupyter"))
    cells = tn.code_cells(ran)
    for c in cells[:-1]:
        assert not any(o.output_type == "error" for o in c.outputs), tn.text_of(c)
        # nothing on stderr in a fresh kernel: Graphviz's first layout (at %load_ext) loads the
        # fontconfig bundled with pygraphviz, whose warnings about the system's newer config
        # files would be a red box under the first cell
        assert not [o.text for o in c.outputs if o.output_type == "stream"
                    and o.name == "stderr"], (c.source, tn.text_of(c))
    # the cell that mutates y gets a panel predicting the failure; %nbgrad graph draws y
    assert any("STALE" in tn.text_of(c) for c in cells[:-1])
    last = tn.text_of(cells[-1])
    assert "modified by an inplace operation" in last
    assert "saved by TanhBackward0 at cell [2] line 2" in last
    assert "modified in place by add_ at cell [2] line 3" in last


def readme_test_command() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("Set up and run the tests with pip alone", 1)[1]
    (command,) = re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)[:1]
    return command.strip()


def test_ci_runs_the_readmes_test_command_in_a_fresh_venv():
    """.ci/run makes a venv and runs the README's test command in it: each part of it a line of
    its own, in the README's order, after the venv is activated."""
    command = readme_test_command()
    assert command == 'pip install ".[test]" && pytest -q'
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    venv = next(i for i, line in enumerate(lines) if line.startswith("python3 -m venv "))
    activate = next(i for i, line in enumerate(lines) if line.startswith(". ")
                    and line.endswith("/bin/activate\""))
    at = [next(i for i, line in enumerate(lines) if line == part or line.startswith(part + " || "))
          for part in command.split(" && ")]
    assert venv < activate < at[0] < at[1], (venv, activate, at)
    # pytest's exit status 5 (no test collected) fails the run rather than passing unnoticed
    assert 'if [ "$status" -eq 5 ]' in (REPO / ".ci" / "run").read_text()
