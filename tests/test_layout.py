"""The package's layering and size, checked from the source.

The layer order is read from the layer table of docs/architecture.md (one row per layer, lowest
first; a row's files are its backquoted names relative to nbgrad/, a bare file name sitting in the
folder of the file before it, a folder standing for all its modules; the most specific name
places a module). Every import counts: module level and function-local, `import a.b` and
`from . import x`, in every module of the package, the package root and the upper layers
(nn, optim, utils, notebook, viz) included. A module may import its own layer and the layers
below it, never one above it, and never the package root (`nbgrad/__init__.py`, which re-exports
everything; only `__main__` may). No import cycle among module-level imports either.

The size budget is tinygrad's line count: a module is a file of one job, under BUDGET lines.
"""
from __future__ import annotations

import ast
import os
import re

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nbgrad")
ROOT = os.path.dirname(PKG)
ARCHITECTURE = os.path.join(ROOT, "docs", "architecture.md")
SURFACE = "torch.* surface"  # the layer of top-level modules the table does not name

BUDGET = 800  # lines per module
# Over the budget until they are cut along their jobs, each under its figure (none now).
OVER_BUDGET = {}

# Imports upward that are known and waiting for a change in a file someone else owns right now
# (module -> the modules it may still import against the order). An entry that is no longer
# needed fails the test, so the list only shrinks.
PENDING = {
    # gradgradcheck draws its grad_outputs from torch's stream (random.py, which makes tensors
    # through creation.py, a torch.* surface module that imports nothing above the data model)
    "nbgrad.autograd.gradcheck": {"nbgrad.random"},
}


def modules():
    """{dotted module name: path} of every module of the package (packages by __init__)."""
    mods = {}
    for d, dirs, files in os.walk(PKG):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                mods[name[:-9] if name.endswith(".__init__") else name] = path
    return mods


def imports(name, path, mods, local=True):
    """{module of the package: first line} that `name` imports; function-local ones too unless
    local=False. `from pkg import x` imports pkg.x when that is a module, else pkg itself."""
    is_pkg = path.endswith("__init__.py")
    here = name if is_pkg else name.rpartition(".")[0]
    tree = ast.parse(open(path, encoding="utf-8").read())
    if local:
        nodes = ast.walk(tree)
    else:  # module level: the body, and the bodies of its if/try blocks
        nodes, todo = [], list(tree.body)
        while todo:
            n = todo.pop()
            nodes.append(n)
            if isinstance(n, (ast.If, ast.Try)):
                todo += n.body + n.orelse + getattr(n, "finalbody", [])
                for h in getattr(n, "handlers", []):
                    todo += h.body
    out = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target
                       for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.setdefault(t, node.lineno)
    return out


def layer_table():
    """[(layer name, [file or folder, relative to nbgrad/])] from docs/architecture.md."""
    rows, in_table = [], False
    for line in open(ARCHITECTURE, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| layer |"):
            in_table = True
            continue
        if not in_table or set(line.strip()) <= set("|- "):
            if in_table and rows and not line.startswith("|"):
                break
            continue
        files, folder = [], ""
        for f in re.findall(r"`([^`]+)`", cells[1]):
            f = f.removeprefix("nbgrad/")
            if "/" not in f:
                f = folder + f
            folder = f.rpartition("/")[0] + "/" if "/" in f.rstrip("/") else ""
            files.append(f)
        rows.append((cells[0], files))
    return rows


def layers(mods):
    """{module: (layer index, layer name)}: the most specific table entry naming the module;
    top-level modules the table does not name belong to the torch.* surface."""
    rows = layer_table()
    names = [r[0] for r in rows]
    entry = {}
    for i, (_, files) in enumerate(rows):
        for f in files:
            dotted = "nbgrad." + f.rstrip("/").removesuffix(".py").replace("/", ".")
            entry[dotted] = i
    entry["nbgrad"] = len(rows)  # the package root: above everything
    out = {}
    for m in mods:
        t = m
        while t and t not in entry:
            t = t.rpartition(".")[0]
        if t == "nbgrad" and m not in ("nbgrad", "nbgrad.__main__"):
            i = names.index(SURFACE)
        else:
            i = entry[t] if t else None
        out[m] = (i, names[i] if i is not None and i < len(names) else "package root")
    return out


def upward(mods, where, only=None):
    """[(module, its layer, imported module, its layer, line)] for each import against the order."""
    bad = []
    for m, p in mods.items():
        if only and m not in only:
            continue
        for t, line in imports(m, p, mods).items():
            if t == "nbgrad" and m != "nbgrad.__main__" or where[t][0] > where[m][0]:
                bad.append((m, where[m][1], t, where[t][1], line))
    return bad


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                return path[path.index(t):] + [t]
            if t not in state:
                found = visit(t, path + [t])
                if found:
                    return found
        state[m] = 2
        return None
    for m in sorted(graph):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def test_the_table_places_every_module():
    mods = modules()
    where = layers(mods)
    names = [r[0] for r in layer_table()]
    assert names[:4] == ["arrays", "data model", "autograd", "the op table"], names
    assert SURFACE in names and names.index(SURFACE) < names.index("libraries") \
        < names.index("notebook"), names
    assert not [m for m, (i, _) in where.items() if i is None]
    for _, files in layer_table():  # every name in the table is a file or folder of the package
        for f in files:
            assert os.path.exists(os.path.join(PKG, f)), f"docs/architecture.md names {f}"
    # torch.* functions: a file today, a package once split; the surface either way
    assert where["nbgrad.functions"][1] == SURFACE
    assert all(n == SURFACE for m, (_, n) in where.items() if m.startswith("nbgrad.functions."))
    expect = {"nbgrad.backend": "arrays", "nbgrad.tensor": "data model",
              "nbgrad.storage": "data model", "nbgrad.autograd.apply": "autograd",
              "nbgrad.autograd.engine": "autograd", "nbgrad.ops.registry": "the op table",
              "nbgrad.ops.formulas": "the op table", "nbgrad.creation": SURFACE,
              "nbgrad.nn.functional": "libraries", "nbgrad.optim.optimizer": "libraries",
              "nbgrad.utils.data.dataloader": "libraries", "nbgrad.notebook.extension": "notebook",
              "nbgrad.viz": "notebook", "nbgrad": "package root"}
    assert {m: where[m][1] for m in expect} == expect


def test_no_import_goes_up_a_layer():
    mods = modules()
    where = layers(mods)
    bad = [b for b in upward(mods, where) if b[2] not in PENDING.get(b[0], ())]
    assert not bad, "\n".join(f"{m} ({lm}) imports {t} ({lt}) at line {line}"
                              for m, lm, t, lt, line in bad)


def test_pending_exceptions_are_still_needed():
    mods = modules()
    found = {(b[0], b[2]) for b in upward(mods, layers(mods))}
    stale = [(m, t) for m, ts in PENDING.items() for t in ts if (m, t) not in found]
    assert not stale, f"no longer imported upward, remove from PENDING: {stale}"


def test_no_import_cycle_at_module_level():
    mods = modules()
    # a submodule naming its own package (torch.distributions.bernoulli re-exporting the class)
    # finds the package already run: not a cycle
    graph = {m: {t for t in imports(m, p, mods, local=False) if not m.startswith(t + ".")}
             for m, p in mods.items()}
    found = _cycle(graph)
    assert found is None, " -> ".join(found)


def test_the_finders_find():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    mods = modules()
    got = imports("nbgrad.tensor", mods["nbgrad.tensor"], mods)
    assert "nbgrad.storage" in got and "nbgrad.printing" in got  # the latter function-local
    where = layers(mods)
    assert upward(mods, dict(where, **{"nbgrad.printing": (99, "x")}), only={"nbgrad.tensor"})


def test_size_budget():
    over = {}
    for m, p in modules().items():
        n = sum(1 for _ in open(p, encoding="utf-8"))
        if n > OVER_BUDGET.get(m, BUDGET):
            over[m] = n
    assert not over, f"over {BUDGET} lines (cut along its jobs): {over}"
    stale = [m for m in OVER_BUDGET if m in modules()
             and sum(1 for _ in open(modules()[m], encoding="utf-8")) <= BUDGET]
    assert not stale, f"back under budget, remove from OVER_BUDGET: {stale}"
