"""The layers and optimizers of issue 23 side by side with torch CPU, in one process: forward +
backward of bicubic and trilinear interpolation, lp_pool2d, max_unpool2d and ctc_loss at a small
training size, and one optimizer step of ASGD, Rprop and Adafactor over an MLP's parameters.
Prints the median time of each in both libraries and the ratio nbgrad / torch; say the machine's
load (`uptime`) with any figure quoted. torch runs on one thread, as numpy does.

    python benchmarks/bench_layers23.py [--repeat 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import nbgrad


def median_ms(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def layer_cases(L):
    rng = np.random.default_rng(0)
    F = L.nn.functional
    img = L.tensor(rng.standard_normal((8, 16, 32, 32)).astype(np.float32), requires_grad=True)
    vol = L.tensor(rng.standard_normal((4, 8, 8, 16, 16)).astype(np.float32), requires_grad=True)
    logits = L.tensor(rng.standard_normal((50, 16, 28)).astype(np.float32), requires_grad=True)
    targets = L.tensor(rng.integers(1, 28, (16, 20)))
    il, tl = [50] * 16, list(rng.integers(5, 21, 16))

    def unpool():
        y, i = F.max_pool2d(img, 2, return_indices=True)
        F.max_unpool2d(y, i, 2).sum().backward()

    return {
        "interpolate bicubic x2 (8,16,32,32)": lambda: F.interpolate(
            img, scale_factor=2, mode="bicubic").sum().backward(),
        "interpolate trilinear x2 (4,8,8,16,16)": lambda: F.interpolate(
            vol, scale_factor=2, mode="trilinear").sum().backward(),
        "lp_pool2d p=2 k=2 (8,16,32,32)": lambda: F.lp_pool2d(img, 2, 2).sum().backward(),
        "max_pool2d + max_unpool2d (8,16,32,32)": unpool,
        "ctc_loss T=50 N=16 C=28 S=20": lambda: F.ctc_loss(
            logits.log_softmax(2), targets, il, tl).backward(),
    }


def optim_cases(L):
    torch.manual_seed(0)
    th = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 10))
    model = th
    if L is nbgrad:
        model = nbgrad.nn.Sequential(nbgrad.nn.Linear(64, 256), nbgrad.nn.Tanh(),
                                     nbgrad.nn.Linear(256, 10))
        model.load_state_dict({k: nbgrad.tensor(v.numpy().copy())
                               for k, v in th.state_dict().items()})
    for p in model.parameters():
        p.grad = L.ones(*p.shape) * 0.01
    out = {}
    for name, kw in (("ASGD", dict(lr=0.01, t0=1)), ("Rprop", {}), ("Adafactor", {})):
        opt = getattr(L.optim, name)(model.parameters(), **kw)
        out[f"{name} step (MLP 64-256-10)"] = opt.step
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)  # numpy runs on one core: torch alike (the machine is shared)
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs")
    print(f"{'case':44s} {'torch ms':>9s} {'nbgrad ms':>10s} {'ratio':>6s}")
    for make in (layer_cases, optim_cases):
        t_cases, n_cases = make(torch), make(nbgrad)
        for name in t_cases:
            t = median_ms(t_cases[name], args.repeat)
            n = median_ms(n_cases[name], args.repeat)
            print(f"{name:44s} {t:9.2f} {n:10.2f} {n / t:6.1f}")


if __name__ == "__main__":
    main()
