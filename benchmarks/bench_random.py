"""Random sampling, nbgrad against torch (CPU, one thread): the same calls on the same stream.

Each row times one call (best of several repeats of a loop, microseconds per call) in nbgrad and
in torch and prints the ratio nbgrad / torch (below 1: nbgrad faster).

    PYTHONPATH=. python benchmarks/bench_random.py [--cpu] [NAME ...]

``--cpu`` times with the process's CPU time instead of the wall clock: on a loaded machine the
time spent waiting for a core is left out (torch runs on one thread, so its CPU time is its
work). NAMEs keep the rows whose call contains one of them.
"""
from __future__ import annotations

import sys
import time
import timeit

import nbgrad
import torch

torch.set_num_threads(1)

CASES = {
    "rand(64, 128)": lambda T: T.rand(64, 128),
    "randn(64, 128)": lambda T: T.randn(64, 128),
    "randn(64, 128) float64": lambda T: T.randn(64, 128, dtype=T.float64),
    "randn(7)": lambda T: T.randn(7),
    "randn(1000, 1000)": lambda T: T.randn(1000, 1000),
    "randint(0, 10, (4096,))": lambda T: T.randint(0, 10, (4096,)),
    "randperm(1797)": lambda T: T.randperm(1797),
    "randperm(100000)": lambda T: T.randperm(100000),
    "empty(4096).bernoulli_(0.3)": lambda T: T.empty(4096).bernoulli_(0.3),
    "dropout(64x128, 0.2)": lambda T, x={}: T.nn.functional.dropout(
        x.setdefault(T.__name__, T.ones(64, 128)), 0.2),
    "nn.Linear(128, 128)": lambda T: T.nn.Linear(128, 128),
    "empty(4096).exponential_()": lambda T: T.empty(4096).exponential_(),
    "multinomial(rand(1000), 10)": lambda T, p={}: T.multinomial(
        p.setdefault(T.__name__, T.rand(1000)), 10),
}


def per_call_us(f, module, number, timer=time.perf_counter):
    module.manual_seed(0)
    return min(timeit.repeat(lambda: f(module), number=number, repeat=5,
                             timer=timer)) / number * 1e6


def main(names):
    timer = time.perf_counter
    if "--cpu" in names:
        names = [n for n in names if n != "--cpu"]
        timer = time.process_time
    print(f"{'call':32} {'nbgrad us':>11} {'torch us':>10} {'ratio':>7}")
    for name, f in CASES.items():
        if names and not any(n in name for n in names):
            continue
        number = 3 if "1000, 1000" in name or "100000" in name else 50
        a, b = per_call_us(f, nbgrad, number, timer), per_call_us(f, torch, number, timer)
        print(f"{name:32} {a:11.1f} {b:10.1f} {a / b:7.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
