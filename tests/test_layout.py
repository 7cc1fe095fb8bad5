"""The core's layering, checked from the source: no import cycle among core modules (every
import counts, function-local ones included, and importing a submodule runs its package's
__init__ first)."""
from __future__ import annotations

import ast
import os

import nbgrad

PKG = os.path.dirname(nbgrad.__file__)
ROOT = os.path.dirname(PKG)
# the layers above the core, which may import anything below them
ABOVE = ("nbgrad.nn", "nbgrad.optim", "nbgrad.utils", "nbgrad.notebook", "nbgrad.viz")


def _modules():
    mods = {}
    for d, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                mods[name[:-9] if name.endswith(".__init__") else name] = path
    return mods


def _imports(name, path, mods):
    """Modules of nbgrad that `name` imports, by any import statement in it."""
    is_pkg = path.endswith("__init__.py")
    here = name if is_pkg else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".")[:len(here.split(".")) - node.level + 1]
                target = ".".join(parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != name and t != "nbgrad" and not name.startswith(t + "."):
                out.add(t)
                parts = t.split(".")
                for k in range(2, len(parts)):  # the packages whose __init__ runs first
                    pkg = ".".join(parts[:k])
                    if pkg != name and not name.startswith(pkg + "."):
                        out.add(pkg)
    return out


def _core_graph():
    mods = _modules()
    core = {m: p for m, p in mods.items() if m != "nbgrad" and not m.startswith(ABOVE)}
    return {m: {t for t in _imports(m, p, mods) if t in core} for m, p in core.items()}


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph[m]):
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


def test_no_import_cycle_among_core_modules():
    graph = _core_graph()
    assert "nbgrad.tensor" in graph and "nbgrad.ops.registry" in graph
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_data_model_below_autograd_and_ops():
    graph = _core_graph()
    for low in ("nbgrad.backend", "nbgrad.dtypes", "nbgrad.storage", "nbgrad.tensor"):
        assert not {t for t in graph[low] if t.startswith(("nbgrad.autograd", "nbgrad.ops",
                                                            "nbgrad.functions"))}, low
    assert not {t for t in graph["nbgrad.autograd.apply"] if t.startswith("nbgrad.ops")}
