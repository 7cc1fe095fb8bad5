"""What the panel adds to a cell and to the saved notebook, in a real kernel (nbclient).

    python benchmarks/bench_panel.py                 # 9 repeats of each cell, with and without
    python benchmarks/bench_panel.py --repeats 15 --runs 3
    python benchmarks/bench_panel.py --nbgrad /tmp/old      # another checkout, the same cells
    python benchmarks/bench_panel.py --values       # also with `%nbgrad set values=on`

The same notebook runs twice through nbclient (ipykernel, ``store_widget_state=True``, as
nbconvert --execute saves it): once with ``%load_ext nbgrad`` and once without. It repeats two
cells ``--repeats`` times each:

- model: a new 20-layer MLP (Linear 16x16 + Tanh), its loss and backward: ~100 graph nodes;
- many: 200 new parameters and ``sum((t * t).sum() for t in ps)``: ~800 nodes, one repeated
  shape (a loop body drawn once).

Reported: per cell, the hooks' time (IPython's first ``pre_run_cell`` callback to its last
``post_run_cell`` callback, wall clock and the kernel's CPU time), median over the repeats (the
first of each kind left out), with minus without; and the saved notebook's bytes per cell, with
minus without. ``--runs`` repeats the whole measure (the machine is shared: read the spread).
``--values`` runs the notebook a third time with values mode on (data and grads in the graph,
edge gradients read by node hooks during each backward, which the measured interval includes:
it runs from the first pre_run_cell callback to the last post_run_cell one, the cell inside).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SETUP = """import time
import nbgrad
from nbgrad import nn
from IPython import get_ipython
_bench = []
def _bench_pre(info=None):
    global _bench_t0, _bench_c0
    _bench_t0, _bench_c0 = time.perf_counter(), time.process_time()
def _bench_post(result=None):
    _bench.append((time.perf_counter() - _bench_t0, time.process_time() - _bench_c0))
get_ipython().events.register('pre_run_cell', _bench_pre)
{load}
get_ipython().events.register('post_run_cell', _bench_post)"""

CELLS = {
    "model": """net = nn.Sequential(*[m for _ in range(20) for m in (nn.Linear(16, 16), nn.Tanh())])
loss = net(nbgrad.randn(4, 16)).pow(2).mean()
loss.backward()""",
    "many": """ps = [nbgrad.randn(8, requires_grad=True) for _ in range(200)]
s = sum((t * t).sum() for t in ps)""",
}

REPORT = """import json
print(json.dumps(_bench))"""


LOADS = {False: "", True: "%load_ext nbgrad", "values": "%load_ext nbgrad\n%nbgrad set values=on"}


def notebook(load, repeats: int):
    import nbformat

    cells = [SETUP.format(load=LOADS[load])]
    kinds = []
    for kind, code in CELLS.items():
        for _ in range(repeats):
            cells.append(code)
            kinds.append(kind)
    cells.append(REPORT)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb, kinds


def saved_split(nb) -> dict:
    """Bytes the panels add to a saved notebook, split: ``live`` and ``retired`` (lists of the
    bytes of each panel cell's outputs, a live one's with its widget state), ``closed`` (the widget
    state nbclient keeps of the retired panels' closed widgets), ``other`` (shared models)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    out = {"live": [], "retired": [], "closed": 0, "other": 0}
    seen = set()
    for cell in nb.cells:
        outs = cell.get("outputs", [])
        views = [o["data"][WIDGET]["model_id"] for o in outs if WIDGET in o.get("data", {})]
        panels = [o for o in outs if "nbgrad" in o.get("data", {}).get("text/plain", "")]
        if not panels:
            continue
        size = sum(len(json.dumps(o)) for o in panels)
        size += sum(len(json.dumps(state[i])) for i in views if i in state)
        seen.update(views)
        out["live" if views else "retired"].append(size)
    for i, s in state.items():
        if i not in seen:
            out["closed" if s.get("model_name") == "AnyModel" else "other"] += len(json.dumps(s))
    return out


def retired_per_cell(split) -> float:
    """What one more cell adds once its panel retired: its static copy and its closed state."""
    n = len(split["retired"])
    return (sum(split["retired"]) + split["closed"]) / n if n else float("nan")


WIDGET = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def run(load: bool, repeats: int, path: Path, repo: Path = REPO) -> tuple[dict, int, int]:
    """Per kind, the list of (wall, cpu) seconds; the saved bytes; the number of cells."""
    import nbformat
    from nbclient import NotebookClient

    nb, kinds = notebook(load, repeats)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(repo)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                       if p and Path(p).resolve() != REPO]))
    os.environ.update(env)  # the kernel inherits it
    NotebookClient(nb, kernel_name="python3", timeout=600, store_widget_state=True).execute()
    nbformat.write(nb, str(path))
    out = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    times = json.loads(out.strip().splitlines()[-1])
    run.split = saved_split(nb)
    # the timings: the setup cell's post hook registers after its pre hook ran -> one per cell
    # from the first kind's first cell on (the setup cell itself is measured too: drop it)
    times = times[-(len(kinds) + 1):-1]
    per: dict = {}
    for kind, t in zip(kinds, times):
        per.setdefault(kind, []).append(t)
    return per, path.stat().st_size, len(kinds)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--values", action="store_true", help="also with values mode on")
    ap.add_argument("--out", default="/tmp/nbgrad-bench-panel")
    ap.add_argument("--nbgrad", default=str(REPO), help="the checkout to measure (first on the "
                    "kernel's path); `git archive <commit> | tar -x -C /tmp/old` makes one")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for r in range(args.runs):
        res = {}
        for load in (False, True):
            name = f"panel-{'with' if load else 'without'}.ipynb"
            res[load] = run(load, args.repeats, out / name, Path(args.nbgrad).resolve())
        split = run.split
        if args.values:
            res["values"] = run("values", args.repeats, out / "panel-values.ipynb",
                                Path(args.nbgrad).resolve())
        print(f"run {r + 1} (load average {os.getloadavg()[0]:.1f}):")
        for kind in CELLS:
            row = []
            for i, what in ((0, "wall"), (1, "cpu")):
                med = {load: statistics.median(t[i] for t in res[load][0][kind][1:])
                       for load in res}
                row.append(f"{what} {1e3 * med[False]:.1f} -> {1e3 * med[True]:.1f} ms "
                           f"(+{1e3 * (med[True] - med[False]):.1f})")
            print(f"  {kind:6s} cell: " + "; ".join(row))
            if "values" in res:
                on = [statistics.median(t[i] for t in res["values"][0][kind][1:]) for i in (0, 1)]
                off = [statistics.median(t[i] for t in res[True][0][kind][1:]) for i in (0, 1)]
                print(f"  {kind:6s} cell, values on: wall {1e3 * on[0]:.1f} ms "
                      f"(+{1e3 * (on[0] - off[0]):.1f} over values off); cpu {1e3 * on[1]:.1f} ms "
                      f"(+{1e3 * (on[1] - off[1]):.1f})")
        cells = res[True][2]
        kb = (res[True][1] - res[False][1]) / cells / 1e3
        print(f"  saved: {res[False][1] / 1e3:.0f} KB without, {res[True][1] / 1e3:.0f} KB with, "
              f"+{kb:.1f} KB per cell ({cells} cells, {len(split['live'])} panels live); "
              f"a retired panel's cell +{retired_per_cell(split) / 1e3:.1f} KB (its outputs "
              f"{statistics.mean(split['retired'] or [0]) / 1e3:.1f} KB + its closed widget "
              f"{split['closed'] / max(len(split['retired']), 1) / 1e3:.1f} KB); a live one "
              f"{statistics.mean(split['live'] or [0]) / 1e3:.1f} KB; largest panel output "
              f"{max(split['retired'] + split['live'] or [0]) / 1e3:.1f} KB")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
