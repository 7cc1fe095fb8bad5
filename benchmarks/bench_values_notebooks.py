"""What values mode on by default costs the classroom notebooks (01-05): saved size and time.

    python benchmarks/bench_values_notebooks.py [01 02 ...] [--out DIR]

Each notebook is executed twice with nbclient in a real kernel (this checkout's nbgrad on the
kernel's PYTHONPATH), as stored (``%nbgrad set values=on`` in its setup cell) and with that line
taken out, alternating, so that both runs see the same machine load. Printed per notebook:
code cells, saved size (the executed .ipynb with its widget state, as a user's save) in total
and per code cell, and the summed cell time (nbclient's per-cell timing: execute_input to
execute_reply) as a ratio on / off. The executed notebooks are written to ``--out`` (default a
temporary folder) so that the panels' SVGs can be looked at. Say the load (``uptime``) with any
figure: the machine is shared.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from datetime import datetime

import nbformat
from nbclient import NotebookClient

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LINE = "%nbgrad set values=on"


def _cell_seconds(cell) -> float:
    t = cell.get("metadata", {}).get("execution", {})
    a, b = t.get("iopub.execute_input"), t.get("shell.execute_reply")
    if not a or not b:
        return 0.0
    f = "%Y-%m-%dT%H:%M:%S.%fZ"
    return (datetime.strptime(b, f) - datetime.strptime(a, f)).total_seconds()


def run(nb, path):
    os.environ["PYTHONPATH"] = REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                            record_timing=True, resources={"metadata": {"path": REPO}})
    client.execute()
    nbformat.write(nb, path)
    return os.path.getsize(path), sum(_cell_seconds(c) for c in nb.cells
                                      if c.cell_type == "code")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("which", nargs="*", default=["01", "02", "03", "04", "05"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="nbgrad-values-")
    os.makedirs(out, exist_ok=True)
    print(f"load: {os.getloadavg()}  out: {out}")
    print(f"{'notebook':34} {'cells':>5} {'KB on':>7} {'KB off':>7} {'KB/cell on':>10} "
          f"{'KB/cell off':>11} {'s on':>6} {'s off':>6} {'on/off':>6}")
    for name in sorted(os.listdir(os.path.join(REPO, "notebooks"))):
        if not name.endswith(".ipynb") or name[:2] not in args.which:
            continue
        nb = nbformat.read(os.path.join(REPO, "notebooks", name), as_version=4)
        if not any(LINE in c.source for c in nb.cells if c.cell_type == "code"):
            print(f"{name}: no '{LINE}' line, skipped")
            continue
        off = copy.deepcopy(nb)
        for c in off.cells:
            if c.cell_type == "code" and LINE in c.source:
                c.source = "\n".join(ln for ln in c.source.split("\n") if LINE not in ln)
        n = sum(1 for c in nb.cells if c.cell_type == "code")
        size_off, t_off = run(off, os.path.join(out, "off_" + name))
        size_on, t_on = run(nb, os.path.join(out, "on_" + name))
        print(f"{name:34} {n:5d} {size_on / 1024:7.1f} {size_off / 1024:7.1f} "
              f"{size_on / 1024 / n:10.1f} {size_off / 1024 / n:11.1f} {t_on:6.2f} {t_off:6.2f} "
              f"{t_on / t_off if t_off else 0:6.2f}", flush=True)
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
