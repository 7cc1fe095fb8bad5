"""The documentation says what is true: docs/supported.md and README's supported block are what
docs/_supported.py writes from the op table and PyTorch's namespaces; every relative link leads
to a file; the README names every %nbgrad command and installs both tested front ends; the
notebooks' text names the lines their cells really have and asks for a click only of an
interactive panel."""

import io
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "notebooks" / "README.md",
        REPO / "binder" / "README.md"]


def test_supported_list_is_generated_from_the_op_table():
    pytest.importorskip("torch")
    run = subprocess.run([sys.executable, str(REPO / "docs" / "_supported.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_supported_doc_lists_every_row():
    pytest.importorskip("torch")
    from nbgrad.ops import ROWS
    doc = (REPO / "docs" / "supported.md").read_text()
    for name, row in ROWS.items():
        assert f"| `{name}` | `{row.node.__name__}` |" in doc, name


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_to_files(doc):
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if "://" in target or target.startswith("#"):
            continue
        assert (doc.parent / target.split("#")[0]).exists(), (doc.name, target)


def test_readme_names_every_nbgrad_command():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    from nbgrad.notebook import extension

    ip = InteractiveShell.instance()
    extension.load_ipython_extension(ip)
    try:
        out = io.StringIO()
        with redirect_stdout(out):
            extension.get_extension(ip).magic("no-such-command")
    finally:
        extension.unload_ipython_extension(ip)
    usage = out.getvalue().split("usage: %nbgrad", 1)[1]  # "on|off|status | graph NAME | ..."
    first, *rest = usage.strip().split(" | ")
    commands = set(first.split("|")) | {part.split()[0] for part in rest}
    assert {"on", "graph", "set", "torch"} <= commands, usage
    readme = (REPO / "README.md").read_text()
    for cmd in sorted(commands):
        assert f"%nbgrad {cmd}" in readme, cmd


def test_readme_install_command_installs_both_tested_front_ends():
    sys.path.insert(0, str(REPO / "tests"))
    from _jupyterlab import APPS, MODULE

    text = (REPO / "README.md").read_text()
    section = text.split("Set up and open the notebooks", 1)[1]
    command = re.findall(r"```bash\n(.*?)\n```", section, flags=re.S)[0]
    assert "pip install" in command and "git clone" in text
    for app in APPS:  # what the browser tests run: JupyterLab 4 and Notebook 7
        assert MODULE[app] in command.split(), (MODULE[app], command)


def _notebook(name):
    nbformat = pytest.importorskip("nbformat")
    return nbformat.read(REPO / "notebooks" / name, as_version=4)


def test_notebook_07_names_the_line_its_cut_is_on():
    cells = _notebook("07_debugging_a_model.ipynb").cells
    for i, cell in enumerate(cells):
        m = re.search(r"detached at cell \[N\] line (\d+)", cell.source)
        if cell.cell_type == "markdown" and m:
            code = next(c for c in cells[i + 1:] if c.cell_type == "code")
            line = code.source.splitlines()[int(m.group(1)) - 1]
            assert ".detach()" in line, (m.group(0), line)
            return
    raise AssertionError("notebook 07 no longer names the line of its detach")


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "notebooks").glob("[0-9]*.ipynb")))
def test_notebooks_ask_for_a_click_only_of_an_interactive_panel(name):
    # after Run All only the last panels are live widgets; the others are pictures
    for cell in _notebook(name).cells:
        if cell.cell_type != "markdown":
            continue
        for sentence in re.split(r"(?<=[.!?])\s", cell.source):
            if re.search(r"\bclick", sentence, flags=re.I):
                assert "interactive panel" in sentence, sentence
