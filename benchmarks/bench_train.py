"""Training speed and memory: nbgrad vs PyTorch CPU vs hand-written numpy, in one process.

    python benchmarks/bench_train.py                 # everything (about a minute)
    python benchmarks/bench_train.py --only mlp      # mlp|cnn|memory|loader|profile|kernels

Workload: scikit-learn's digits, 1437 training images, batch 64 (23 batches per epoch), the
MLP 64-128-64-10 and the CNN of examples/train_digits.py, cross entropy, SGD with momentum.
Every library runs the same epoch: a numpy permutation, then per batch an index op on the
library's tensors, forward, loss, backward, optimizer step. Times are the median over epochs
after warm-up. Memory: tracemalloc's peak over one training step (it sees numpy's buffers, and
torch's CPU allocations are invisible to it, so the comparison is with hand-written numpy), and
the traced size after 100 and after 1000 steps (a leak shows as growth).
"""

import argparse
import gc
import statistics
import time
import tracemalloc

import os

import numpy as np

import nbgrad
import torch

BATCH = 64


def load():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(x))
    tr = perm[360:]
    return x[tr], y[tr]


# ---------------------------------------------------------------------------- models
def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def cnn(lib):
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(128, 10))


def make_lib_step(lib, kind, x, y):
    """(epoch_fn, step_fn) for torch or nbgrad, weights copied from one torch init."""
    torch.manual_seed(0)
    ref = mlp(torch) if kind == "mlp" else cnn(torch)
    if lib is torch:
        model = ref
    else:
        model = mlp(nbgrad) if kind == "mlp" else cnn(nbgrad)
        model.load_state_dict({k: nbgrad.tensor(v.numpy().copy())
                               for k, v in ref.state_dict().items()})
    if kind == "mlp":
        x = x.reshape(len(x), 64)
    X, Y = lib.tensor(x), lib.tensor(y)
    opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = lib.nn.CrossEntropyLoss()

    def step(idx):
        xb, yb = X[idx], Y[idx]
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    def epoch(rng):
        perm = lib.tensor(rng.permutation(len(x)))
        for i in range(0, len(x), BATCH):
            step(perm[i:i + BATCH])

    return epoch, step


# ---------------------------------------------------------------------------- numpy by hand
class NumpyMLP:
    """64-128-64-10 ReLU MLP, softmax cross entropy, SGD momentum, written with numpy only."""

    def __init__(self, x, y):
        torch.manual_seed(0)
        ref = mlp(torch)
        self.params = [p.detach().numpy().copy() for p in ref.parameters()]
        self.bufs = [None] * len(self.params)
        self.x, self.y = x.reshape(len(x), 64), y

    def step(self, idx):
        w1, b1, w2, b2, w3, b3 = self.params
        xb, yb = self.x[idx], self.y[idx]
        n = len(idx)
        h1 = xb @ w1.T + b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w2.T + b2
        a2 = np.maximum(h2, 0)
        z = a2 @ w3.T + b3
        z = z - z.max(1, keepdims=True)
        e = np.exp(z)
        s = e.sum(1, keepdims=True)
        logp = z - np.log(s)
        loss = -logp[np.arange(n), yb].mean()
        g = e / s
        g[np.arange(n), yb] -= 1
        g /= n
        gw3, gb3 = g.T @ a2, g.sum(0)
        g = (g @ w3) * (h2 > 0)
        gw2, gb2 = g.T @ a1, g.sum(0)
        g = (g @ w2) * (h1 > 0)
        gw1, gb1 = g.T @ xb, g.sum(0)
        for i, gr in enumerate((gw1, gb1, gw2, gb2, gw3, gb3)):
            if self.bufs[i] is None:
                self.bufs[i] = gr.copy()
            else:
                self.bufs[i] *= 0.9
                self.bufs[i] += gr
            self.params[i] -= 0.05 * self.bufs[i]
        return loss

    def epoch(self, rng):
        perm = rng.permutation(len(self.x))
        for i in range(0, len(self.x), BATCH):
            self.step(perm[i:i + BATCH])


class NumpyCNN:
    """The CNN by hand in numpy: the array kernels of nbgrad/ops/kernels.py called directly, without
    any tensor or autograd (channels-last im2col + one matmul per conv, col2im by strided
    slice-adds; max pool by elementwise comparison of the window views), cross entropy and SGD
    momentum written out."""

    def __init__(self, x, y):
        from nbgrad.ops import kernels as K

        self.K = K
        torch.manual_seed(0)
        ref = cnn(torch)
        self.params = [p.detach().numpy().copy() for p in ref.parameters()]
        self.bufs = [None] * len(self.params)
        self.x, self.y = x, y

    def step(self, idx):
        K = self.K
        w1, b1, w2, b2, w3, b3 = self.params
        xb, yb = self.x[idx], self.y[idx]
        n = len(idx)
        h1, c1 = K.conv2d_forward(xb, w1, b1, 1, 1)
        a1 = np.maximum(h1, 0)
        p1, q1 = K.max_pool2d_forward(a1, 2)
        h2, c2 = K.conv2d_forward(p1, w2, b2, 1, 1)
        a2 = np.maximum(h2, 0)
        p2, q2 = K.max_pool2d_forward(a2, 2)
        f = p2.reshape(n, 128)
        z = f @ w3.T + b3
        z = z - z.max(1, keepdims=True)
        e = np.exp(z)
        s = e.sum(1, keepdims=True)
        loss = -(z - np.log(s))[np.arange(n), yb].mean()
        g = e / s
        g[np.arange(n), yb] -= 1
        g /= n
        gw3, gb3 = g.T @ f, g.sum(0)
        g = K.max_pool2d_backward((g @ w3).reshape(p2.shape), q2) * (h2 > 0)
        g, gw2, gb2 = K.conv2d_backward(g, c2)
        g = K.max_pool2d_backward(g, q1) * (h1 > 0)
        _, gw1, gb1 = K.conv2d_backward(g, c1, (False, True, True))
        for i, gr in enumerate((gw1, gb1, gw2, gb2, gw3, gb3)):
            if self.bufs[i] is None:
                self.bufs[i] = gr.copy()
            else:
                self.bufs[i] *= 0.9
                self.bufs[i] += gr
            self.params[i] -= 0.05 * self.bufs[i]
        return loss

    epoch = NumpyMLP.epoch


# ---------------------------------------------------------------------------- measurements
def time_epochs(epoch_fn, n_epochs, warmup=2):
    """Median wall-clock and CPU (process) seconds per epoch.

    CPU time is the robust figure on a shared machine: it excludes the time this process waits
    while other processes run (it does include every thread of this process, so a 2-thread torch
    is charged for both).
    """
    rng = np.random.default_rng(1)
    for _ in range(warmup):
        epoch_fn(rng)
    wall, cpu = [], []
    for _ in range(n_epochs):
        t0, c0 = time.perf_counter(), time.process_time()
        epoch_fn(rng)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def _set_torch_threads(n):
    torch.set_num_threads(n)


def bench_speed(kind, x, y, n_epochs, torch_default=True):
    """Epoch times: torch on its default threads (unless `torch_default` is False) and on one,
    nbgrad, numpy by hand; {label: (wall s, CPU s)}."""
    np_impl = NumpyMLP(x, y) if kind == "mlp" else NumpyCNN(x, y)
    ng_epoch, _ = make_lib_step(nbgrad, kind, x, y)
    th_epoch, _ = make_lib_step(torch, kind, x, y)
    default_threads = torch.get_num_threads()
    runs = [("torch", th_epoch, default_threads)] if torch_default else []
    runs += [("torch-1t", th_epoch, 1), ("nbgrad", ng_epoch, None), ("numpy", np_impl.epoch, None)]
    res = {}
    # interleave the libraries, best of 3 rounds of medians, to even out machine noise
    for _ in range(3):
        for name, fn, threads in runs:
            _set_torch_threads(threads or default_threads)
            wall, cpu = time_epochs(fn, n_epochs)
            old = res.get(name, (wall, cpu))
            res[name] = (min(old[0], wall), min(old[1], cpu))
    _set_torch_threads(default_threads)
    print(f"\n{kind.upper()} epoch (23 batches of 64), median of {n_epochs} epochs, best of 3 "
          f"rounds:")
    print(f"  {'':9s} {'wall ms':>8s} {'cpu ms':>8s}")
    for name, _, threads in runs:
        label = name if name != "torch" else f"torch-{default_threads}t"
        print(f"  {label:9s} {res[name][0] * 1e3:8.2f} {res[name][1] * 1e3:8.2f}")
    for ref in ("torch", "torch-1t", "numpy") if torch_default else ("torch-1t", "numpy"):
        print(f"  nbgrad / {ref:8s} wall {res['nbgrad'][0] / res[ref][0]:.2f}x   "
              f"cpu {res['nbgrad'][1] / res[ref][1]:.2f}x")
    return res


def bench_loader(x, y, n_epochs):
    """The same MLP epoch through each library's DataLoader(shuffle=True)."""
    res = {}
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # like for like with nbgrad's single BLAS thread
    for lib in (torch, nbgrad):
        torch.manual_seed(0)
        model = mlp(lib)
        ds = lib.utils.data.TensorDataset(lib.tensor(x.reshape(len(x), 64)), lib.tensor(y))
        loader = lib.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True)
        opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        loss_fn = lib.nn.CrossEntropyLoss()

        def epoch(rng, loader=loader, model=model, opt=opt, loss_fn=loss_fn):
            for xb, yb in loader:
                opt.zero_grad()
                loss_fn(model(xb), yb).backward()
                opt.step()

        res[lib.__name__] = time_epochs(epoch, n_epochs)
    torch.set_num_threads(default_threads)
    print("\nMLP epoch through DataLoader(batch_size=64, shuffle=True), torch on 1 thread:")
    for k, v in res.items():
        print(f"  {k:7s} wall {v[0] * 1e3:7.2f} ms   cpu {v[1] * 1e3:7.2f} ms")
    print(f"  nbgrad / torch: wall {res['nbgrad'][0] / res['torch'][0]:.2f}x   "
          f"cpu {res['nbgrad'][1] / res['torch'][1]:.2f}x")
    return res


class _Rows:
    """A map-style Dataset of numpy rows: ``(image row float32, label int)`` per item."""

    def __init__(self, x, y):
        self.x, self.y = x.reshape(len(x), 64).astype(np.float32), y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], int(self.y[i])


def bench_data(x, y, n_epochs):
    """Per batch, iterating alone: a DataLoader over a TensorDataset (batch 64, shuffle) and
    over a map-style Dataset of numpy rows with the default collate; torch on 1 thread.
    Returns {label: {"torch"/"nbgrad": CPU seconds per batch}}."""
    out = {}
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    n_batches = -(-len(x) // BATCH)
    print(f"\nDataLoader, per batch of {BATCH} (shuffle), median of {n_epochs} epochs, best of 3:")
    for label in ("TensorDataset", "numpy rows"):
        loaders = {}
        for lib in (torch, nbgrad):
            ds = lib.utils.data.TensorDataset(lib.tensor(x.reshape(len(x), 64)), lib.tensor(y)) \
                if label == "TensorDataset" else _Rows(x, y)
            loaders[lib.__name__] = lib.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True)
        res = {}
        for _ in range(3):
            for name, loader in loaders.items():
                def epoch(rng, loader=loader):
                    for _ in loader:
                        pass
                cpu = time_epochs(epoch, n_epochs)[1] / n_batches
                res[name] = min(res.get(name, cpu), cpu)
        print(f"  {label:14s} torch {res['torch'] * 1e6:7.1f} us   "
              f"nbgrad {res['nbgrad'] * 1e6:7.1f} us   nbgrad / torch {res['nbgrad'] / res['torch']:.2f}x")
        out[label] = res
    torch.set_num_threads(default_threads)
    return out


def bench_eval(kind, x, y, n_epochs):
    """The model's forward over the data in batches of 64, eval() and under no_grad /
    inference_mode; torch on 1 thread. Returns {mode: {"torch"/"nbgrad": CPU seconds}}."""
    out = {}
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    xs = x if kind == "cnn" else x.reshape(len(x), 64)
    fns = {}
    for lib in (torch, nbgrad):
        torch.manual_seed(0)
        model = (cnn if kind == "cnn" else mlp)(lib)
        model.eval()
        batches = [lib.tensor(xs[i:i + BATCH]) for i in range(0, len(xs), BATCH)]
        fns[lib.__name__] = (lib, model, batches)
    print(f"\n{kind.upper()} evaluation, forward of {len(batches)} batches of {BATCH}, eval(), "
          f"best of 3:")
    for mode in ("no_grad", "inference_mode"):
        res = {}
        for _ in range(3):
            for name, (lib, model, batches) in fns.items():
                def epoch(rng, lib=lib, model=model, batches=batches):
                    with getattr(lib, mode)():
                        for xb in batches:
                            model(xb)
                cpu = time_epochs(epoch, n_epochs)[1]
                res[name] = min(res.get(name, cpu), cpu)
        print(f"  {mode:14s} torch {res['torch'] * 1e3:7.2f} ms   nbgrad {res['nbgrad'] * 1e3:7.2f}"
              f" ms   nbgrad / torch {res['nbgrad'] / res['torch']:.2f}x")
        out[mode] = res
    torch.set_num_threads(default_threads)
    return out


def bench_memory(kind, x, y):
    np_impl = NumpyMLP(x, y) if kind == "mlp" else NumpyCNN(x, y)
    _, ng_step = make_lib_step(nbgrad, kind, x, y)
    idx_np = np.arange(BATCH)
    idx_ng = nbgrad.tensor(idx_np)
    out = {}
    for name, fn, idx in (("numpy", np_impl.step, idx_np), ("nbgrad", ng_step, idx_ng)):
        for _ in range(3):
            fn(idx)  # optimizer state exists before measuring
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn(idx)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        out[name] = peak
    print(f"\n{kind.upper()} peak traced memory of one training step (batch 64):")
    print(f"  numpy  {out['numpy'] / 1024:8.1f} KiB\n  nbgrad {out['nbgrad'] / 1024:8.1f} KiB"
          f"   ratio {out['nbgrad'] / out['numpy']:.2f}x")
    # leak check: traced bytes after 100 and after 1000 steps
    rng = np.random.default_rng(0)
    tracemalloc.start()
    sizes = {}
    for s in range(1, 1001):
        ng_step(nbgrad.tensor(rng.permutation(len(x))[:BATCH]))
        if s in (100, 1000):
            gc.collect()
            sizes[s] = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    print(f"  traced after 100 steps {sizes[100] / 1024:.1f} KiB, after 1000 steps "
          f"{sizes[1000] / 1024:.1f} KiB (growth {(sizes[1000] - sizes[100]) / 1024:+.1f} KiB)")
    out["growth"] = sizes[1000] - sizes[100]
    return out


def phases(kind, x, y, steps=300):
    """CPU microseconds per training step by phase (forward, loss, backward, step, zero_grad),
    torch (one thread) and nbgrad side by side."""
    names = ("index batch", "forward", "loss", "backward", "optimizer.step", "zero_grad")
    res = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for lib in (torch, nbgrad):
        torch.manual_seed(0)
        ref = mlp(torch) if kind == "mlp" else cnn(torch)
        model = ref
        if lib is nbgrad:
            model = mlp(nbgrad) if kind == "mlp" else cnn(nbgrad)
            model.load_state_dict({k: nbgrad.tensor(v.numpy().copy())
                                   for k, v in ref.state_dict().items()})
        xs = x.reshape(len(x), 64) if kind == "mlp" else x
        X, Y = lib.tensor(xs), lib.tensor(y)
        opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        loss_fn = lib.nn.CrossEntropyLoss()
        rng = np.random.default_rng(0)
        acc = dict.fromkeys(names, 0.0)
        clock = time.process_time
        for s in range(steps + 20):
            idx = lib.tensor(rng.permutation(len(x))[:BATCH])
            t0 = clock()
            xb, yb = X[idx], Y[idx]
            t1 = clock()
            out = model(xb)
            t2 = clock()
            loss = loss_fn(out, yb)
            t3 = clock()
            loss.backward()
            t4 = clock()
            opt.step()
            t5 = clock()
            opt.zero_grad()
            t6 = clock()
            if s >= 20:
                for k, a, b in zip(acc, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
                    acc[k] += b - a
        res[lib.__name__] = acc
    torch.set_num_threads(threads)
    print(f"\n{kind} step by phase (CPU us per step, mean of {steps}; torch on 1 thread):")
    print(f"  {'phase':15s} {'torch':>8s} {'nbgrad':>8s} {'ratio':>7s}")
    for k in names:
        t, n = res["torch"][k] / steps * 1e6, res["nbgrad"][k] / steps * 1e6
        print(f"  {k:15s} {t:8.1f} {n:8.1f} {n / t:6.2f}x")
    tt, tn = (sum(res[k].values()) / steps * 1e6 for k in ("torch", "nbgrad"))
    print(f"  {'total':15s} {tt:8.1f} {tn:8.1f} {tn / tt:6.2f}x")


def bench_kernels(reps=200):
    """CPU us per call of nbgrad's conv/pool array kernels on the CNN's shapes (batch 64), next
    to torch's forward+backward of the same layer through autograd (one thread)."""
    from nbgrad.ops import kernels as K

    rng = np.random.default_rng(0)
    f32 = np.float32
    x1 = rng.standard_normal((BATCH, 1, 8, 8)).astype(f32)
    w1, b1 = rng.standard_normal((16, 1, 3, 3)).astype(f32), np.zeros(16, f32)
    a1 = np.maximum(rng.standard_normal((BATCH, 16, 8, 8)), 0).astype(f32)  # ReLU'd: ties
    p1 = rng.standard_normal((BATCH, 16, 4, 4)).astype(f32)
    w2, b2 = rng.standard_normal((32, 16, 3, 3)).astype(f32), np.zeros(32, f32)
    a2 = np.maximum(rng.standard_normal((BATCH, 32, 4, 4)), 0).astype(f32)
    c1, c2 = K.conv2d_forward(x1, w1, b1, 1, 1)[1], K.conv2d_forward(p1, w2, b2, 1, 1)[1]
    q1, q2 = K.max_pool2d_forward(a1, 2)[1], K.max_pool2d_forward(a2, 2)[1]
    g1, g2 = np.ones_like(a1), np.ones_like(a2)
    gp1, gp2 = np.ones((BATCH, 16, 4, 4), f32), np.ones((BATCH, 32, 2, 2), f32)
    TF = torch.nn.functional

    def t_(a, grad=True):
        return torch.tensor(a, requires_grad=grad)

    def torch_fb(fn, *args):
        def run():
            y = fn(*args)
            y.backward(torch.ones_like(y))
        return run

    rows = [
        ("conv1 forward", lambda: K.conv2d_forward(x1, w1, b1, 1, 1), None),
        ("conv1 backward (weight, bias)",
         lambda: K.conv2d_backward(g1, c1, (False, True, True)),
         torch_fb(lambda a, w, b: TF.conv2d(a, w, b, padding=1), t_(x1, False), t_(w1),
                  t_(b1))),
        ("conv2 forward", lambda: K.conv2d_forward(p1, w2, b2, 1, 1), None),
        ("conv2 backward", lambda: K.conv2d_backward(g2, c2),
         torch_fb(lambda a, w, b: TF.conv2d(a, w, b, padding=1), t_(p1), t_(w2), t_(b2))),
        ("pool1 forward", lambda: K.max_pool2d_forward(a1, 2), None),
        ("pool1 backward", lambda: K.max_pool2d_backward(gp1, q1),
         torch_fb(lambda a: TF.max_pool2d(a, 2), t_(a1))),
        ("pool2 forward", lambda: K.max_pool2d_forward(a2, 2), None),
        ("pool2 backward", lambda: K.max_pool2d_backward(gp2, q2),
         torch_fb(lambda a: TF.max_pool2d(a, 2), t_(a2))),
    ]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    print("\nconv/pool kernels on the CNN's shapes, CPU us per call (torch: the layer's forward"
          " + backward):")
    total = 0.0
    for name, fn, th in rows:
        us = _cpu_us(fn, reps)
        total += us
        tus = f"{_cpu_us(th, reps):8.1f}" if th else ""
        print(f"  {name:30s} {us:8.1f}  {tus}")
    print(f"  {'total per training step':30s} {total:8.1f}")
    torch.set_num_threads(threads)


def _cpu_us(fn, reps):
    """Best of 5 rounds of the CPU time per call."""
    fn()
    best = float("inf")
    for _ in range(5):
        c0 = time.process_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.process_time() - c0) / reps)
    return best * 1e6


def profile(kind, x, y):
    import cProfile
    import pstats

    ng_epoch, _ = make_lib_step(nbgrad, kind, x, y)
    rng = np.random.default_rng(0)
    ng_epoch(rng)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20):
        ng_epoch(rng)
    pr.disable()
    print(f"\nprofile of 20 nbgrad {kind} epochs (tottime):")
    pstats.Stats(pr).sort_stats("tottime").print_stats(22)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", choices=["mlp", "cnn", "memory", "loader", "profile", "kernels",
                                      "eval", "data"])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="nbgrad.set_num_threads: numpy's BLAS threads (nbgrad and numpy rows)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.blas_threads:
        # nbgrad sets numpy's BLAS to 1 thread at import (nbgrad.set_num_threads): OpenBLAS's
        # threads cost far more than they give on these tiny matrices, as torch's do
        nbgrad.set_num_threads(args.blas_threads)
    x, y = load()
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__} "
          f"(BLAS threads: {args.blas_threads or 'default'}), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.only in (None, "mlp"):
        bench_speed("mlp", x, y, args.epochs)
    if args.only in (None, "cnn"):
        bench_speed("cnn", x, y, max(5, args.epochs // 4))
    if args.only in (None, "loader"):
        bench_loader(x, y, args.epochs)
    if args.only in (None, "eval"):
        bench_eval("mlp", x, y, args.epochs)
        bench_eval("cnn", x, y, max(5, args.epochs // 4))
    if args.only in (None, "data"):
        bench_data(x, y, args.epochs)
    if args.only in (None, "memory"):
        bench_memory("mlp", x, y)
        bench_memory("cnn", x, y)
    if args.only in (None, "kernels"):
        bench_kernels()
    if args.only in (None, "profile"):
        phases("mlp", x, y)
        phases("cnn", x, y)
    if args.only == "profile":
        profile("mlp", x, y)
        profile("cnn", x, y)


if __name__ == "__main__":
    main()
