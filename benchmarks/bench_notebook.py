"""How much the notebook layer adds to a cell, this checkout side by side with another (old) one.

    python benchmarks/bench_notebook.py                          # this checkout only
    python benchmarks/bench_notebook.py --old /tmp/nbgrad-main   # and an older checkout beside it
    (git archive main | tar -x -C /tmp/nbgrad-main makes one)

Each checkout is measured in its own process (its nbgrad on sys.path), in an in-process IPython
shell with ``%load_ext nbgrad`` and the display captured (not sent):

1. quiet cell (touches no tensor) in a namespace of 200 named tensors and a 100-node graph;
2. changing cell (``z = y * 2``) in that namespace: run_cell with minus without the extension,
   (a) in a front end that lays the graph out itself (the widget gets DOT; viz.js in the browser),
   (b) with the layout done in the kernel (nbclient, a saved notebook's static copy), layouts not
   cached, (c) the static HTML panel (no kernel comm);
3. the same changing cell with 5000 named tensors in the namespace;
4. a 300-node graph: snapshot + DOT + SVG, and the text tree.

An old checkout has no browser layout: its (a) is its widget panel with its own layout.
Timings are the best of several runs (the least disturbed by the machine's other load).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def timeit(fn, repeat=7, number=1):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return min(times)


def _no_layout_cache():
    from nbgrad.notebook import render

    try:
        from nbgrad.notebook import layout

        layout.CACHE_SIZE = 0
        layout._CACHE.clear()
    except ImportError:  # an old checkout: graphviz's `dot` through render's own cache
        render._SVG_CACHE_SIZE = 0
        render._SVG_CACHE.clear()


def measure() -> dict:
    """The figures for the nbgrad importable here (ms)."""
    from IPython.core.interactiveshell import InteractiveShell

    import nbgrad
    from nbgrad.notebook import extension, render
    from nbgrad.notebook import inspect as nbi

    ip = InteractiveShell.instance()
    shown = []
    ip.display_pub.publish = lambda data, metadata=None, **kw: shown.append(data)
    ip.run_cell("import nbgrad\n"
                "for _i in range(200):\n"
                "    globals()[f't{_i}'] = nbgrad.ones(8)\n"
                "x = nbgrad.ones(16, requires_grad=True)\n"
                "y = x\n"
                "for _i in range(99):\n"
                "    y = (y * 1.001) if _i % 2 else y.tanh()\n")
    out = {}

    def run(code):
        ip.run_cell(code, store_history=False, silent=False)

    quiet, change = "a = 1 + 1", "z = y * 2"
    base_quiet = timeit(lambda: run(quiet), repeat=15, number=10)
    base_change = timeit(lambda: run(change), repeat=15, number=3)
    extension.load_ipython_extension(ip)
    ext = extension.get_extension(ip)
    out["quiet"] = (timeit(lambda: run(quiet), repeat=15, number=10) - base_quiet) * 1e3
    has_comm = extension._has_comm
    extension._has_comm = lambda ip: True  # as in a kernel (a comm to nowhere here)
    ext.frontend_renders = True  # a browser with viz.js answered (new checkouts only)
    n0 = len(shown)
    out["change_browser"] = (timeit(lambda: run(change), repeat=15, number=3) - base_change) * 1e3
    assert len(shown) > n0, "the changing cell showed no panel"
    ext.frontend_renders = False
    _no_layout_cache()
    out["change_kernel_layout"] = (timeit(lambda: run(change), repeat=9, number=2)
                                   - base_change) * 1e3
    extension._has_comm = has_comm
    out["change_static"] = (timeit(lambda: run(change), repeat=9, number=2) - base_change) * 1e3
    extension._has_comm = lambda ip: True
    ext.frontend_renders = True
    extension.unload_ipython_extension(ip)
    ip.run_cell("for _i in range(200, 5000):\n    globals()[f't{_i}'] = nbgrad.ones(8)\n")
    base_change = timeit(lambda: run(change), repeat=9, number=3)
    extension.load_ipython_extension(ip)
    ext = extension.get_extension(ip)
    ext.frontend_renders = True
    run(change)
    out["change_5000"] = (timeit(lambda: run(change), repeat=9, number=3) - base_change) * 1e3
    extension._has_comm = has_comm
    extension.unload_ipython_extension(ip)

    a = nbgrad.ones(4, requires_grad=True)
    b = nbgrad.ones(4, requires_grad=True)
    h = a
    for i in range(180):
        h = (h * b).tanh() if i % 3 else h + a
    named = [("a", a), ("b", b), ("h", h)]

    def full():
        return render.dot_to_svg(render.to_dot(nbi.snapshot(named, max_nodes=300)))

    _no_layout_cache()
    out["graph300_svg"] = timeit(full, repeat=3) * 1e3
    out["graph300_text"] = timeit(lambda: render.text_tree(nbi.snapshot(named, max_nodes=300)),
                                  repeat=5) * 1e3
    return out


ROWS = [
    ("quiet", "quiet cell, 200 named tensors + 100-node graph in the namespace"),
    ("change_browser", "changing cell, widget, browser lays out (viz.js)"),
    ("change_kernel_layout", "changing cell, widget, layout in the kernel (nbclient)"),
    ("change_static", "changing cell, static HTML panel (no comm)"),
    ("change_5000", "changing cell with 5000 named tensors, widget (browser)"),
    ("graph300_svg", "300-node graph: snapshot + DOT + SVG"),
    ("graph300_text", "300-node graph: snapshot + text tree"),
]


def in_process(path: str) -> dict:
    """Run :func:`measure` in a fresh interpreter that imports nbgrad from ``path``."""
    env = {**os.environ, "PYTHONPATH": path + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = (f"import sys; sys.path.insert(0, {path!r}); sys.path.insert(1, {HERE!r}); "
            "import json, bench_notebook as b; print('RESULT', json.dumps(b.measure()))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=path, timeout=1800)
    for line in run.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"measuring {path} failed:\n{run.stderr[-3000:]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", help="an older checkout to measure beside this one")
    args = ap.parse_args(argv)
    new = in_process(REPO)
    old = in_process(args.old) if args.old else None
    print(f"added to a cell, ms (best of several runs; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f})")
    head = f"{'':66s} {'new':>9s}" + (f" {'old':>9s}" if old else "")
    print(head)
    for key, label in ROWS:
        line = f"{label:66s} {new[key]:9.3f}"
        if old:
            line += f" {old.get(key, float('nan')):9.3f}"
        print(line)


if __name__ == "__main__":
    main()
