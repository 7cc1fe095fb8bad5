"""float32 gradient error of a 2-layer Bi-LSTM, nbgrad vs torch (issue 23).

Weights copied from torch into nbgrad through numpy, same input (T=20, N=8, I=16, H=32, loss
sum(out^2) + sum(h_n) + sum(c_n)); every parameter's float32 gradient is compared with torch
float64's of the same model (relative L2 error |g32 - g64| / |g64|). Prints per parameter
nbgrad's error, torch's and their ratio, then the median and largest ratio over the seeds.

    PYTHONPATH=$PWD python benchmarks/bench_bilstm_float32_error.py [--no-mkldnn] [seeds...]

--no-mkldnn turns mkldnn off in both libraries: the per-step (unfused) path, whose input
projection is one linear over all steps (its bias gradient one float32 sum over T*N rows).
"""
import sys

import numpy as np
import torch

import nbgrad


def grads(lib, sd, x, dtype, hidden=32, layers=2):
    m = lib.nn.LSTM(x.shape[2], hidden, num_layers=layers, bidirectional=True,
                    dtype=getattr(lib, np.dtype(dtype).name))
    m.load_state_dict({k: lib.tensor(v.astype(dtype)) for k, v in sd.items()})
    out, (h, c) = m(lib.tensor(x.astype(dtype)))
    loss = (out * out).sum() + h.sum() + c.sum()
    loss.backward()
    return {k: p.grad.detach().numpy().astype(np.float64) for k, p in m.named_parameters()}


def errors(seed, T=20, N=8, I=16, hidden=32):
    torch.manual_seed(seed)
    ref = torch.nn.LSTM(I, hidden, num_layers=2, bidirectional=True)
    sd = {k: v.detach().numpy().astype(np.float64) for k, v in ref.state_dict().items()}
    x = np.random.default_rng(seed).standard_normal((T, N, I))
    g64 = grads(torch, sd, x, np.float64, hidden)
    t32 = grads(torch, sd, x, np.float32, hidden)
    n32 = grads(nbgrad, sd, x, np.float32, hidden)
    res = {}
    for k, r in g64.items():
        scale = np.linalg.norm(r)
        res[k] = (np.linalg.norm(n32[k] - r) / scale, np.linalg.norm(t32[k] - r) / scale)
    return res


if __name__ == "__main__":
    if "--no-mkldnn" in sys.argv:
        torch.backends.mkldnn.enabled = nbgrad.backends.mkldnn.enabled = False
    seeds = [int(s) for s in sys.argv[1:] if s != "--no-mkldnn"] or list(range(6))
    worst = {}
    for seed in seeds:
        for k, (e_nb, e_t) in errors(seed).items():
            worst.setdefault(k, []).append(e_nb / e_t)
            print(f"seed {seed} {k:24s} nbgrad {e_nb:.2e} torch {e_t:.2e} ratio {e_nb / e_t:5.2f}")
    print("median / max ratio per parameter over seeds:")
    for k, r in worst.items():
        print(f"  {k:24s} {np.median(r):5.2f} {max(r):5.2f}")
