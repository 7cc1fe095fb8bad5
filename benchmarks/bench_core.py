"""Core speed and memory, side by side with PyTorch CPU and hand-written numpy, in one process.

Run: python benchmarks/bench_core.py [--quick]
Prints a table of times and ratios (nbgrad / torch, nbgrad / numpy). Timings are the best of
several interleaved rounds (the machine is shared and noisy); ratios are what to compare. The
clock is the process's CPU time (time.process_time: torch runs on one thread, in this process),
which leaves out the time spent waiting for a core on a loaded machine.
"""
from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np

import nbgrad
import nbgrad.provenance  # noqa: F401  (for the provenance on/off row)

try:
    import torch
except ImportError:  # the benchmark still runs, without the torch column
    torch = None


_clock = time.process_time


def _best(fn, rounds, reps):
    best = float("inf")
    for _ in range(rounds):
        t0 = _clock()
        for _ in range(reps):
            fn()
        best = min(best, (_clock() - t0) / reps)
    return best


def _interleaved(fns, rounds=7, reps=50):
    """Best time of each fn, measuring them in alternation so noise hits all alike."""
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            best[k] = min(best[k], _best(fn, 1, reps))
    return best


def chain_10(lib):
    x = lib.ones(2, 2, requires_grad=True)

    def run():
        y = x
        for i in range(10):
            y = y * 1.0001 if i % 2 else y + 0.0001
        y.sum().backward()
    return run


def chain_mixed(lib, phase=None):
    """The issue's 10-op chain: Python-number and tensor operands, unary ops, a fresh leaf each
    time (x * 1.5, + 0.5, * x, tanh, sigmoid, exp, * 1.5, + x, tanh, sum; the leaf's making
    counted). `phase`: "fwd" times
    the forward alone."""
    def run():
        x = lib.ones(2, 2, requires_grad=True)
        y = x * 1.5
        y = y + 0.5
        y = y * x
        y = y.tanh().sigmoid().exp()
        y = y * 1.5
        y = y + x
        s = y.tanh().sum()
        if phase != "fwd":
            s.backward()
    return run


def chain_1000(lib):
    x = lib.ones(2, 2, requires_grad=True)

    def run():
        y = x
        for _ in range(1000):
            y = y * 1.0001 + 0.0001
        y.sum().backward()
    return run


def chain_1000_numpy():
    x = np.ones((2, 2), np.float32)

    def run():
        ys = [x]
        y = x
        for _ in range(1000):
            y = y * np.float32(1.0001) + np.float32(0.0001)
        g = np.ones_like(y)
        for _ in range(1000):
            g = g * np.float32(1.0001)
        return g
    return run


def matmul_tanh(lib, n):
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((n, n)).astype(np.float32)
    wa = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    x = lib.tensor(xa)
    w = lib.tensor(wa, requires_grad=True)

    def run():
        w.grad = None
        (x @ w).tanh().sum().backward()
    return run


def matmul_tanh_numpy(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n)).astype(np.float32)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)

    def run():
        y = np.tanh(x @ w)
        s = y.sum()
        g = np.ones_like(y) * (1 - y * y)
        return x.T @ g, s
    return run


def index_ops(lib, n):
    """Ops that save an index or mask tensor (index_select, gather, masked_fill, embedding,
    x[idx], cross_entropy's target), forward and backward, on n indices: what saving the index
    costs (a copy before, the tensor and its version now)."""
    g = np.random.default_rng(0)
    x = lib.tensor(g.random((1000, 8)), dtype=lib.float32, requires_grad=True)
    i = lib.tensor(g.integers(0, 1000, n))
    i2 = lib.tensor(g.integers(0, 1000, (n, 8)))
    m = lib.tensor(g.random((1000, 8)) > 0.5)
    logits = lib.tensor(g.random((n, 10)), dtype=lib.float32, requires_grad=True)
    t = lib.tensor(g.integers(0, 10, n))
    F = lib.nn.functional

    def run():
        (x.index_select(0, i).sum() + x.gather(0, i2).sum() + x.masked_fill(m, 0.0).sum()
         + F.embedding(i, x).sum() + x[i].sum()).backward()
        F.cross_entropy(logits, t).backward()
    return run


def bytes_per_node(lib, n=1000):
    """Memory held by the graph of the 1000-step chain, per node (tracemalloc for nbgrad;
    torch's C++ allocations are invisible to tracemalloc, so torch is measured by RSS-free
    counting: see benchmarks/README.md for the figure measured with /proc)."""
    x = lib.ones(2, 2, requires_grad=True)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    y = x
    for _ in range(n):
        y = y * 1.0001 + 0.0001
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del y
    return used / (2 * n)


_RSS_SNIPPET = """
import gc, sys
import {lib} as lib
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
x = lib.ones(2, 2, requires_grad=True)
y = x
for _ in range(1000):   # warm the allocator
    y = y * 1.0001 + 0.0001
del y
gc.collect()
base = rss()
y = x
for _ in range({n}):
    y = y * 1.0001 + 0.0001
print((rss() - base) / (2 * {n}))
"""


def rss_bytes_per_node(lib_name, n=100000):
    """Per-node memory from the RSS growth of a fresh process (sees C++ allocations too)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _RSS_SNIPPET.format(lib=lib_name, n=n)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def measure(rounds=7, matmul=True):
    """[(row name, {"nbgrad"/"torch"/"numpy": seconds})] for the per-op targets, and the
    provenance on/off pair {"on"/"off": seconds} (bench_targets.py reads them too)."""
    if torch:
        torch.set_num_threads(1)  # like for like: nbgrad runs numpy's BLAS on one thread
    rows = []

    fns = {"nbgrad": chain_10(nbgrad)}
    if torch:
        fns["torch"] = chain_10(torch)
    b = _interleaved(fns, rounds, 100)
    rows.append(("10-op chain (2,2) fwd+bwd, per op", {k: v / 11 for k, v in b.items()}))
    for phase in ("fwd", None):
        fns = {"nbgrad": chain_mixed(nbgrad, phase)}
        if torch:
            fns["torch"] = chain_mixed(torch, phase)
        b = _interleaved(fns, rounds, 100)
        rows.append((f"10-op chain, number/tensor operands, {phase or 'fwd+bwd'}, per op",
                     {k: v / 10 for k, v in b.items()}))
    prov = nbgrad.provenance
    on = chain_10(nbgrad)

    def off():
        prov.set_enabled(False)
        try:
            on()
        finally:
            prov.set_enabled(True)
    prov_cost = _interleaved({"on": on, "off": off}, rounds, 100)

    fns = {"nbgrad": chain_1000(nbgrad), "numpy": chain_1000_numpy()}
    if torch:
        fns["torch"] = chain_1000(torch)
    rows.append(("1000-step chain y*1.0001+0.0001 fwd+bwd", _interleaved(fns, rounds, 3)))

    for n in (512, 1024) if matmul else ():
        fns = {"nbgrad": matmul_tanh(nbgrad, n), "numpy": matmul_tanh_numpy(n)}
        if torch:
            fns["torch"] = matmul_tanh(torch, n)
        rows.append((f"(x@w).tanh().sum() fwd+bwd N={n}", _interleaved(fns, rounds * 2, 5)))
    for n in (64, 100000):
        fns = {"nbgrad": index_ops(nbgrad, n)}
        if torch:
            fns["torch"] = index_ops(torch, n)
        b = _interleaved(fns, rounds, 20 if n < 1000 else 2)
        rows.append((f"6 index-saving ops fwd+bwd, {n} indices, per op",
                     {k: v / 6 for k, v in b.items()}))
    return rows, prov_cost


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    rows, prov_cost = measure(3 if a.quick else 7)
    print(f"{'benchmark':45s} {'nbgrad':>10s} {'torch':>10s} {'numpy':>10s} {'nb/torch':>9s} "
          f"{'nb/numpy':>9s}")
    for name, r in rows:
        nb, th, npy = r.get("nbgrad"), r.get("torch"), r.get("numpy")

        def us(v):
            return f"{v * 1e6:9.1f}u" if v is not None else f"{'-':>10s}"
        print(f"{name:45s} {us(nb)} {us(th)} {us(npy)} "
              f"{(nb / th if th else float('nan')):9.2f} "
              f"{(nb / npy if npy else float('nan')):9.2f}")
    print(f"\nprovenance (where each node/bump happened), 10-op chain per op: on "
          f"{prov_cost['on'] / 11 * 1e6:.2f} us, off {prov_cost['off'] / 11 * 1e6:.2f} us")
    print(f"\nmemory per graph node, y = y*1.0001 + 0.0001 chain: nbgrad "
          f"{bytes_per_node(nbgrad):.0f} B (tracemalloc), {rss_bytes_per_node('nbgrad'):.0f} B "
          "(RSS growth, 200k nodes)" + (f"; torch {rss_bytes_per_node('torch'):.0f} B "
                                        "(RSS growth)" if torch else ""))


if __name__ == "__main__":
    main()
