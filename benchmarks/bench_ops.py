"""Per op, the issue's number/tensor chain: nbgrad against torch in one process, CPU time.

    python benchmarks/bench_ops.py            # about 20 s of CPU
    R=7 python benchmarks/bench_ops.py        # more repeats

Each op of bench_core.py's `chain_mixed` (on (2, 2) float32 that requires grad: the leaf's
`ones(2, 2, requires_grad=True)`, `x * 1.5`, `y + 0.5`, `y * x`, tanh, sigmoid, exp, sum), then
the chain's forward and its fwd+bwd; torch on one thread, the libraries interleaved, median of
R repeats (default 3) of 2000 calls, `time.process_time`. For an A/B of two trees, run it with
PYTHONPATH set to each in turn, alternating.
"""
import os
import statistics
import time
import timeit

import torch
from bench_core import chain_mixed

import nbgrad


def cases(lib):
    x = lib.ones(2, 2, requires_grad=True)
    y = x * 1.5
    c = {
        "ones(2, 2, requires_grad=True)": lambda: lib.ones(2, 2, requires_grad=True),
        "x * 1.5": lambda: x * 1.5,
        "y + 0.5": lambda: y + 0.5,
        "y * x": lambda: y * x,
        "tanh": lambda: y.tanh(),
        "sigmoid": lambda: y.sigmoid(),
        "exp": lambda: y.exp(),
        "sum": lambda: y.sum(),
    }

    c["chain, forward"] = chain_mixed(lib, "fwd")
    c["chain, fwd+bwd"] = chain_mixed(lib)
    return c


def main():
    torch.set_num_threads(1)
    repeats = int(os.environ.get("R", 3))
    libs = {"torch": cases(torch), "nbgrad": cases(nbgrad)}
    res = {}
    for _ in range(repeats):
        for name, fns in libs.items():
            for k, f in fns.items():
                t = timeit.repeat(f, number=2000, repeat=1, timer=time.process_time)[0] / 2000
                res.setdefault((name, k), []).append(t)
    print(f"load average {os.getloadavg()[0]:.1f}; nbgrad from "
          f"{os.path.dirname(os.path.dirname(nbgrad.__file__))}; CPU us per call")
    print(f"{'op':32s} {'torch':>8s} {'nbgrad':>8s} {'ratio':>6s}")
    for k in libs["torch"]:
        t, n = (statistics.median(res[(lib, k)]) for lib in ("torch", "nbgrad"))
        print(f"{k:32s} {t * 1e6:8.2f} {n * 1e6:8.2f} {n / t:6.2f}")


if __name__ == "__main__":
    main()
