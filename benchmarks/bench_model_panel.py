"""What the model panel costs a training loop: the digits MLP of bench_train.py, one process.

    python benchmarks/bench_model_panel.py [--epochs 3] [--repeats 7] [--calibrate]

Per step, the panel's hooks run: module forward pre/post hooks (a few counters, one provenance
capture) and one gradient hook per parameter (norm, zero count, update/weight ratio against a
copy of the weights). Reported: the median epoch time without and with the hooks (interleaved,
so drift hits both), the overhead in %, and the panel's own time after the loop cell
(``post_run_cell``: the report, the summary panel) in ms, through an in-process IPython shell.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nbgrad  # noqa: E402
from bench_train import BATCH, load, mlp  # noqa: E402


def make(x, y):
    nbgrad.manual_seed(0)
    model = mlp(nbgrad)
    X, Y = nbgrad.tensor(x.reshape(len(x), 64)), nbgrad.tensor(y)
    opt = nbgrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nbgrad.nn.CrossEntropyLoss()

    def epoch(rng):
        perm = rng.permutation(len(x))
        for i in range(0, len(x) - BATCH + 1, BATCH):
            idx = nbgrad.tensor(perm[i:i + BATCH])
            opt.zero_grad()
            loss = loss_fn(model(X[idx]), Y[idx])
            loss.backward()
            opt.step()

    return model, loss_fn, epoch


def hook_overhead(epochs, repeats, hooks=True):
    """Two identical models trained side by side, epoch by epoch (AB BA AB ..., so the shared
    machine's drift and the order hit both): A under the tracker (as one cell of ``epochs``
    epochs), B not. ``hooks=False``: the tracker is not installed (the measure's own bias)."""
    from nbgrad.notebook.model_hooks import ModelTracker

    x, y = load()
    model_a, loss_a, epoch_a = make(x, y)
    _model_b, _loss_b, epoch_b = make(x, y)
    tracker = ModelTracker()
    if hooks:
        tracker.install()
        # with nn's global module hooks, B's calls would be seen too while a cell's first step
        # is watched: each cell starts with A's epoch, and watching ends at A's second step
        tracker.watch([model_a, loss_a])
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    epoch_a(rng_a)
    epoch_b(rng_b)
    clock = time.process_time  # CPU time: the machine is shared
    ratios, ta, tb = [], [], []
    for _ in range(repeats):
        tracker.reset_cell()  # one cell: its first steps are watched in full
        a = b = 0.0
        for e in range(epochs):
            for which in ("ab" if e % 2 == 0 else "ba"):
                t = clock()
                if which == "a":
                    epoch_a(rng_a)
                    a += clock() - t
                else:
                    epoch_b(rng_b)
                    b += clock() - t
        ratios.append(a / b)
        ta.append(a / epochs)
        tb.append(b / epochs)
    steps = len(x) // BATCH
    p, h = statistics.median(tb), statistics.median(ta)
    if hooks:
        print(f"digits MLP 64-128-64-10, batch {BATCH}, {steps} steps/epoch, "
              f"global module hooks: {tracker.global_hooks}")
        print(f"  epoch without the panel's hooks: {p * 1e3:8.2f} ms  "
              f"({p / steps * 1e3:.3f} ms/step)")
        print(f"  epoch with the panel's hooks:    {h * 1e3:8.2f} ms  "
              f"({h / steps * 1e3:.3f} ms/step)")
    q = sorted(ratios)
    label = "overhead" if hooks else "the measure's own bias (no hooks on A either)"
    print(f"  {label}: {100 * (statistics.median(ratios) - 1):+.1f} %  (median of {repeats} cells "
          f"of {epochs * steps} steps, CPU time; quartiles {100 * (q[len(q) // 4] - 1):+.1f} / "
          f"{100 * (q[3 * len(q) // 4] - 1):+.1f} %)")
    tracker.uninstall()
    return p, h


def cell_cost(repeats):
    """post_run_cell of a 23-step loop cell in an in-process IPython shell (the panel shown as
    static HTML: no kernel, no widget)."""
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_cell("import nbgrad, numpy as np, sys\n%load_ext nbgrad", silent=True)
    ip.user_ns["_bench"] = str(Path(__file__).resolve().parent)
    ip.run_cell("sys.path.insert(0, _bench)\nfrom bench_model_panel import make, load\n"
                "x, y = load()\nmodel, loss_fn, epoch = make(x, y)\n"
                "rng = np.random.default_rng(0)", silent=True)
    from nbgrad.notebook import extension

    ext = extension.get_extension(ip)
    import IPython.display

    shown = []
    IPython.display.display = lambda *a, **k: shown.append(a)
    times = []
    orig = ext.post_run_cell

    def timed(result):
        t = time.perf_counter()
        orig(result)
        times.append(time.perf_counter() - t)

    ip.events.unregister("post_run_cell", orig)
    ip.events.register("post_run_cell", timed)
    for _ in range(repeats):
        ip.run_cell("epoch(rng)")
    ms = statistics.median(times) * 1e3
    print(f"  panel after a 23-step loop cell (report + summary panel): {ms:.1f} ms "
          f"(median of {repeats})")
    return ms


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--calibrate", action="store_true",
                    help="also run the same measure without the tracker (its bias)")
    a = ap.parse_args()
    hook_overhead(a.epochs, a.repeats)
    if a.calibrate:
        hook_overhead(a.epochs, a.repeats, hooks=False)
    cell_cost(a.repeats)
