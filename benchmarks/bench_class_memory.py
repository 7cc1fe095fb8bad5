"""How much memory one student's kernel needs: each notebook run top to bottom in a fresh kernel.

For every notebook in notebooks/ (or those named on the command line) this executes it with
nbclient in a new ipykernel of this interpreter, then asks the kernel for its resident memory
(VmRSS: what it holds now) and its peak (VmHWM), both from /proc (Linux). The first row is a bare
kernel that ran nothing, the second one that only imported nbgrad and loaded the extension.

From the largest peak it prints how many kernels fit in a server of a given size, keeping a share
for the system and the Jupyter server itself (docs/hosting.md quotes these figures).

    python benchmarks/bench_class_memory.py [--server-gib 16 32 64] [notebooks/07_*.ipynb ...]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
PROBE = ("import re as _re\n"
         "_s = open('/proc/self/status').read()\n"
         "print('NBGRAD_MEM', *(int(_re.search(k + r':\\s+(\\d+) kB', _s).group(1))"
         " for k in ('VmRSS', 'VmHWM')))")
RESERVED_GIB = 2.0  # the operating system and the Jupyter server, kept aside per server


def run(cells, workdir: Path, name: str) -> tuple[int, int, float]:
    """Execute `cells` (a notebook) in a fresh kernel; return (rss_kib, peak_kib, seconds)."""
    nb = cells if isinstance(cells, nbformat.NotebookNode) else nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    client = NotebookClient(nb, kernel_name="python3", timeout=300, allow_errors=True,
                            resources={"metadata": {"path": str(workdir)}})
    t0 = time.perf_counter()
    client.execute()
    secs = time.perf_counter() - t0
    for out in nb.cells[-1].get("outputs", []):
        m = re.search(r"NBGRAD_MEM (\d+) (\d+)", out.get("text", ""))
        if m:
            return int(m.group(1)), int(m.group(2)), secs
    raise RuntimeError(f"{name}: the memory probe printed nothing")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--server-gib", nargs="*", type=float, default=[8, 16, 32, 64])
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    paths = args.notebooks or sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows.append(("(bare kernel)",) + run(["pass"], work, "bare"))
        rows.append(("(import nbgrad, %load_ext nbgrad)",)
                    + run(["import nbgrad as torch", "%load_ext nbgrad"], work, "import"))
        for p in paths:
            rows.append((p.name,) + run(nbformat.read(p, as_version=4), work, p.name))
    print(f"{'notebook':44s} {'RSS MiB':>8s} {'peak MiB':>9s} {'run s':>6s}")
    for name, rss, peak, secs in rows:
        print(f"{name:44s} {rss / 1024:8.0f} {peak / 1024:9.0f} {secs:6.1f}")
    worst = max(r[2] for r in rows) / 1024 ** 2  # GiB
    print(f"\nlargest peak: {worst * 1024:.0f} MiB per kernel; with {RESERVED_GIB:g} GiB kept for "
          "the system and the server:")
    for gib in args.server_gib:
        print(f"  {gib:5.0f} GiB server: {int(max(gib - RESERVED_GIB, 0) // worst)} students "
              "running a notebook at once")
    if args.json:
        args.json.write_text(json.dumps([dict(zip(("notebook", "rss_kib", "peak_kib", "seconds"),
                                                  r)) for r in rows], indent=1))


if __name__ == "__main__":
    sys.exit(main())
