"""The long session of issue 11: a real kernel, many cells each making new named tensors.

    python benchmarks/bench_load.py                    # 500 cells, with and without the extension
    python benchmarks/bench_load.py --cells 100 --nbgrad /tmp/nbgrad-main   # another checkout

Runs the same notebook twice through nbclient (ipykernel, widget state stored, as a saved
notebook keeps it): once with ``%load_ext nbgrad`` and once without. Each cell makes three new
named tensors with a small graph (``a = randn(16)``, ``b = (a * 2).tanh()``, ``c = b.sum()``),
so the namespace and the live graphs grow with the session. Reported per session:

- kernel memory (RSS of the kernel process) after the setup cell and after the last cell;
- per-cell time of the hooks' work: from IPython's first ``pre_run_cell`` callback to its last
  ``post_run_cell`` callback (the extension's hooks run in between), median of the first and of
  the last 50 cells, wall clock and the kernel's CPU time (the robust one on a shared machine);
  "added" is with minus without;
- the saved notebook: total bytes with widget state, bytes of outputs per panel, live widgets in
  the kernel at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SETUP = """import json, os, time
import nbgrad
from IPython import get_ipython
_bench_t, _bench_c = [], []
def _bench_pre(info=None):
    global _bench_t0, _bench_c0
    _bench_t0, _bench_c0 = time.perf_counter(), time.process_time()
def _bench_post(result=None):
    _bench_t.append(time.perf_counter() - _bench_t0)
    _bench_c.append(time.process_time() - _bench_c0)
def _bench_rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20
get_ipython().events.register('pre_run_cell', _bench_pre)
{load}
get_ipython().events.register('post_run_cell', _bench_post)
_bench_rss0 = _bench_rss()"""

CELL = """a{i} = nbgrad.randn(16, requires_grad=True)
b{i} = (a{i} * 2).tanh()
c{i} = b{i}.sum()"""

REPORT = """import gc
try:
    import ipywidgets.widgets.widget as _w
    _live = len(_w._instances)
except Exception:
    _live = -1
gc.collect()
print(json.dumps({"rss0": _bench_rss0, "rss1": _bench_rss(), "times": _bench_t[1:],
                  "cpu": _bench_c[1:],
                  "live_widgets": _live}))"""


def session(cells: int, extension: bool, nbgrad_path: Path, tmp: Path) -> dict:
    import nbclient
    import nbformat

    nb = nbformat.v4.new_notebook()
    load = "%load_ext nbgrad" if extension else ""
    nb.cells = ([nbformat.v4.new_code_cell(SETUP.replace("{load}", load))]
                + [nbformat.v4.new_code_cell(CELL.format(i=i)) for i in range(cells)]
                + [nbformat.v4.new_code_cell(REPORT)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(nbgrad_path) + (os.pathsep + old if old else "")
    t0 = time.perf_counter()
    try:
        nbclient.NotebookClient(nb, kernel_name="python3", timeout=600, store_widget_state=True,
                                resources={"metadata": {"path": str(tmp)}}).execute()
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    wall = time.perf_counter() - t0
    out = [o for o in nb.cells[-1].outputs if o.output_type == "stream"]
    res = json.loads(out[-1].text.strip().splitlines()[-1])
    path = tmp / f"session_{'with' if extension else 'without'}.ipynb"
    nbformat.write(nb, path)
    panel_bytes = []
    for cell in nb.cells[1:-1]:
        for o in cell.outputs:
            if o.output_type == "display_data":
                panel_bytes.append(len(json.dumps(o)))
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    state_bytes = len(json.dumps(state)) if state else 0
    n_panels = len(panel_bytes)
    t, c = res["times"], res["cpu"]
    return {
        "cells": cells, "extension": extension, "wall_s": wall,
        "rss0_mb": res["rss0"], "rss1_mb": res["rss1"], "growth_mb": res["rss1"] - res["rss0"],
        "first50_ms": statistics.median(t[:50]) * 1e3,
        "last50_ms": statistics.median(t[-50:]) * 1e3,
        "first50_cpu_ms": statistics.median(c[:50]) * 1e3,
        "last50_cpu_ms": statistics.median(c[-50:]) * 1e3,
        "saved_bytes": path.stat().st_size, "panels": n_panels,
        "output_bytes_per_panel": (sum(panel_bytes) / n_panels) if n_panels else 0,
        "max_output_bytes": max(panel_bytes, default=0),
        "widget_state_bytes": state_bytes,
        "saved_bytes_per_panel": ((path.stat().st_size - 0) / n_panels) if n_panels else 0,
        "live_widgets": res["live_widgets"],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=500)
    ap.add_argument("--nbgrad", type=Path, default=REPO, help="checkout whose nbgrad to run")
    ap.add_argument("--json", type=Path, help="write the figures here as JSON too")
    args = ap.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        without = session(args.cells, False, args.nbgrad, tmp)
        with_ = session(args.cells, True, args.nbgrad, tmp)
    print(f"{args.cells}-cell session, nbgrad from {args.nbgrad} "
          f"(load average {os.getloadavg()[0]:.1f})")
    for r in (without, with_):
        print(f"  {'with   ' if r['extension'] else 'without'}: kernel {r['rss0_mb']:.0f} -> "
              f"{r['rss1_mb']:.0f} MB (+{r['growth_mb']:.0f}), hooks per cell "
              f"{r['first50_ms']:.2f} ms (first 50) / {r['last50_ms']:.2f} ms (last 50) wall, "
              f"{r['first50_cpu_ms']:.2f} / {r['last50_cpu_ms']:.2f} ms CPU, saved "
              f"{r['saved_bytes'] / 1e3:.0f} KB, {r['panels']} panels, live widgets "
              f"{r['live_widgets']}, wall {r['wall_s']:.0f} s")
    n = max(with_["panels"], 1)
    print(f"  the extension adds: kernel growth {with_['growth_mb'] - without['growth_mb']:+.0f} "
          f"MB, {with_['first50_ms'] - without['first50_ms']:+.2f} ms per cell at the start, "
          f"{with_['last50_ms'] - without['last50_ms']:+.2f} ms at the end (CPU time: "
          f"{with_['first50_cpu_ms'] - without['first50_cpu_ms']:+.2f} / "
          f"{with_['last50_cpu_ms'] - without['last50_cpu_ms']:+.2f} ms), "
          f"{(with_['saved_bytes'] - without['saved_bytes']) / n / 1e3:.1f} KB saved per panel "
          f"(output {with_['output_bytes_per_panel'] / 1e3:.1f} KB, largest "
          f"{with_['max_output_bytes'] / 1e3:.1f} KB; widget state "
          f"{with_['widget_state_bytes'] / n / 1e3:.1f} KB per panel)")
    if args.json:
        args.json.write_text(json.dumps({"without": without, "with": with_}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
