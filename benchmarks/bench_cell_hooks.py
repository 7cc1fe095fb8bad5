"""What the model panel's hooks add to a cell while it runs, in this process (no kernel, no panel).

    python benchmarks/bench_cell_hooks.py            # 400 cells, alternately with and without
    python benchmarks/bench_cell_hooks.py --cells 600 --kind many
    python benchmarks/bench_cell_hooks.py --gc       # the collector on in the cells, as a kernel

The cell of ``bench_panel.py`` (``--kind model``: a new 20-layer MLP, Linear 16x16 + Tanh, its loss
and backward; ``many``: 200 new parameters summed) runs alternately with a ``ModelTracker``
installed (``reset_cell`` before it, as the extension's ``pre_run_cell``; the report after it,
untimed, as ``post_run_cell``) and without one. Reported: the cell's CPU time (``process_time``)
both ways, median over the cells (the first 5 of each left out), and the median of the paired
differences: the hooks' cost inside the cell (module hooks, gradient watch, the update ratio).
By default the collector runs between cells only (the code alone); ``--gc`` leaves it on, as a
kernel does (the objects the hooks keep then cost collections too).
The panel itself (snapshot, layout, widget) is ``bench_panel.py``'s.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_panel import CELLS  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=400)
    ap.add_argument("--kind", choices=sorted(CELLS), default="model")
    ap.add_argument("--gc", action="store_true", help="the collector on during the cells")
    args = ap.parse_args(argv)

    import nbgrad
    from nbgrad import nn
    from nbgrad.notebook import model_report
    from nbgrad.notebook.model_hooks import ModelTracker

    code = compile(CELLS[args.kind], "<cell>", "exec")
    ns = {"nbgrad": nbgrad, "nn": nn}
    tracker = ModelTracker()
    on, off = [], []
    if not args.gc:
        gc.disable()  # (collected between cells, untimed: the medians compare the code alone)
    for i in range(args.cells):
        watched = i % 2 == 0
        if watched:
            tracker.install()
            t = time.process_time()
            tracker.reset_cell()
            exec(code, ns)
            on.append(time.process_time() - t)
            model_report.report(tracker, ns)
            tracker.uninstall()
        else:
            t = time.process_time()
            exec(code, ns)
            off.append(time.process_time() - t)
        if i % 20 == 19 and not args.gc:
            gc.collect()
    gc.enable()
    on, off = on[5:], off[5:]
    diff = statistics.median(a - b for a, b in zip(on, off))
    print(f"{args.kind} cell{' (gc on)' if args.gc else ''}, CPU, median of {len(on)}: "
          f"without the hooks "
          f"{1e3 * statistics.median(off):.2f} ms, with {1e3 * statistics.median(on):.2f} ms; "
          f"added {1e3 * diff:.2f} ms (median of the paired differences)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
