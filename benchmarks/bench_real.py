"""Real training loops per step: nbgrad vs PyTorch (1 thread) vs hand-written numpy, one process.

    python benchmarks/bench_real.py                    # all three loops, 300 timed steps each
    python benchmarks/bench_real.py --steps 100 --only mlp_lm
    python benchmarks/bench_real.py --only gpt --phases --profile   # where the time goes
    python benchmarks/bench_real.py --eval no_grad     # the forward and loss alone (eval())

Each loop is written once, in the style of public teaching code, against a module ``lib`` that is
``torch`` or ``nbgrad`` (the same source runs on both, as ``import nbgrad as torch`` would):

- ``mlp_lm``: a character-level MLP language model in the style of makemore's MLP (Bengio et
  al. 2003): vocabulary 27, context 3, embedding 10, hidden 200, batch 32; an embedding lookup
  ``C[X[ix]]``, ``view``, tanh layer, ``F.cross_entropy``, ``p.grad = None``, manual SGD on
  ``p.data``. Also written by hand in numpy.
- ``gpt``: a 2-layer GPT in the style of the "let's build GPT" lecture: d=32, 4 heads (one
  ``Head`` module each, concatenated), T=16, batch 8, causal mask from ``torch.tril`` in a
  buffer, ``masked_fill``, softmax, LayerNorm, GELU MLP, AdamW, ``clip_grad_norm_``.
- ``lstm``: an LSTM classifier over the 8 rows of scikit-learn's 8x8 digits (hidden 64,
  batch 64, Adam, cross entropy on the last hidden state). Also written by hand in numpy.

Data are synthetic (fixed seeds) or scikit-learn's bundled digits: no download. All libraries
start from the same weights (torch's initialisation, copied) and see the same batches, so their
losses agree, which the script checks. Figures: per-step CPU time (``time.process_time``: what
this process ran, robust on a shared machine) and wall time, median over the timed steps, best
of 3 interleaved rounds. torch runs on one thread (``torch.set_num_threads(1)``), as nbgrad's
numpy BLAS does. A loop whose API is missing from nbgrad prints ``skipped: <missing API>``.
"""

import argparse
import os
import statistics
import time

import numpy as np

import nbgrad
import torch

ROUNDS = 3


class Phases:
    """Optional per-phase CPU clock: ``mark("forward")`` closes the phase that ends there. Off
    (one attribute test per mark) unless ``--phases``; the loops call it the same way for every
    library."""

    def __init__(self):
        self.on, self.acc, self.t = False, {}, 0.0

    def start(self):
        if self.on:
            self.t = time.process_time()

    def __call__(self, name):
        if self.on:
            now = time.process_time()
            self.acc[name] = self.acc.get(name, 0.0) + now - self.t
            self.t = now


mark = Phases()
# --eval no_grad / inference_mode: each loop's forward and loss alone, under that mode, modules
# in eval() (what evaluating the model on a batch costs); None: the training step
EVAL = None


# ================================================================================= (a) MLP LM
VOCAB, CONTEXT, EMB, HIDDEN, BATCH_LM = 27, 3, 10, 200, 32


def lm_data(n_words=4000, seed=0):
    """Synthetic 'names': letter chains from a fixed random bigram table ('.' = 0 ends a word),
    turned into (3 previous characters, next character) pairs as makemore does."""
    rng = np.random.default_rng(seed)
    bigram = rng.dirichlet(np.full(VOCAB, 0.3), size=VOCAB)
    bigram[0, 0] = 0  # a word has at least one letter
    bigram[0] /= bigram[0].sum()
    xs, ys = [], []
    for _ in range(n_words):
        ctx = [0] * CONTEXT
        for _ in range(12):
            nxt = int(rng.choice(VOCAB, p=bigram[ctx[-1]]))
            xs.append(ctx)
            ys.append(nxt)
            ctx = ctx[1:] + [nxt]
            if nxt == 0:
                break
    return np.array(xs, np.int64), np.array(ys, np.int64)


def lm_params(seed=0):
    """C, W1, b1, W2, b2 as float32 arrays (makemore's scaled initialisation), one seed."""
    g = np.random.default_rng(seed)
    return [g.standard_normal(s).astype(np.float32) * k for s, k in (
        ((VOCAB, EMB), 1.0), ((CONTEXT * EMB, HIDDEN), (5 / 3) / (CONTEXT * EMB) ** 0.5),
        ((HIDDEN,), 0.01), ((HIDDEN, VOCAB), 0.01), ((VOCAB,), 0.0))]


def make_mlp_lm(lib, data, batches):
    """makemore-style MLP LM on ``lib``; returns step() -> the loss (a 0-d tensor)."""
    F = lib.nn.functional
    Xtr, Ytr = lib.tensor(data[0]), lib.tensor(data[1])
    C, W1, b1, W2, b2 = (lib.tensor(p.copy()) for p in lm_params())
    parameters = [C, W1, b1, W2, b2]
    for p in parameters:
        p.requires_grad = True
    it = iter(batches)
    lr = 0.1

    if EVAL:
        def evaluate():
            ix = lib.tensor(next(it))
            Xb, Yb = Xtr[ix], Ytr[ix]
            with getattr(lib, EVAL)():
                h = lib.tanh(C[Xb].view(-1, CONTEXT * EMB) @ W1 + b1)
                return F.cross_entropy(h @ W2 + b2, Yb)
        return evaluate

    def step():
        mark.start()
        ix = lib.tensor(next(it))
        Xb, Yb = Xtr[ix], Ytr[ix]
        mark("batch")
        emb = C[Xb]  # (32, 3, 10)
        h = lib.tanh(emb.view(-1, CONTEXT * EMB) @ W1 + b1)  # (32, 200)
        logits = h @ W2 + b2  # (32, 27)
        mark("forward")
        loss = F.cross_entropy(logits, Yb)
        mark("loss")
        for p in parameters:
            p.grad = None
        loss.backward()
        mark("backward")
        for p in parameters:
            p.data += -lr * p.grad
        mark("update")
        return loss

    return step


def np_cross_entropy(logits, y):
    """Mean cross entropy of (N, C) logits and int targets, and its gradient (N, C), by hand."""
    n = len(y)
    z = logits - logits.max(1, keepdims=True)
    e = np.exp(z)
    s = e.sum(1, keepdims=True)
    loss = np.log(s[:, 0]).mean() - z[np.arange(n), y].mean()
    dl = e / s
    dl[np.arange(n), y] -= 1
    return loss, dl / n


def make_mlp_lm_numpy(data, batches):
    """The same step written by hand in numpy (forward, backward, SGD)."""
    Xtr, Ytr = data
    C, W1, b1, W2, b2 = (p.copy() for p in lm_params())
    it = iter(batches)
    lr = np.float32(0.1)

    def step():
        ix = next(it)
        Xb, Yb = Xtr[ix], Ytr[ix]
        n = len(ix)
        emb = C[Xb]
        x = emb.reshape(n, CONTEXT * EMB)
        h = np.tanh(x @ W1 + b1)
        loss, dl = np_cross_entropy(h @ W2 + b2, Yb)
        dW2, db2 = h.T @ dl, dl.sum(0)
        dh = (dl @ W2.T) * (1 - h * h)
        dW1, db1 = x.T @ dh, dh.sum(0)
        dC = np.zeros_like(C)
        np.add.at(dC, Xb.reshape(-1), (dh @ W1.T).reshape(-1, EMB))
        for p, gr in ((C, dC), (W1, dW1), (b1, db1), (W2, dW2), (b2, db2)):
            p += -lr * gr
        return loss

    return step


# ================================================================================= (b) GPT
N_EMBD, N_HEAD, N_LAYER, BLOCK, BATCH_GPT, VOCAB_GPT = 32, 4, 2, 16, 8, 65


def gpt_model(lib):
    """The lecture's GPT: Head / MultiHeadAttention / FeedForward / Block modules."""
    nn, F = lib.nn, lib.nn.functional

    class Head(nn.Module):
        def __init__(self, head_size):
            super().__init__()
            self.key = nn.Linear(N_EMBD, head_size, bias=False)
            self.query = nn.Linear(N_EMBD, head_size, bias=False)
            self.value = nn.Linear(N_EMBD, head_size, bias=False)
            self.register_buffer("tril", lib.tril(lib.ones(BLOCK, BLOCK)))

        def forward(self, x):
            B, T, C = x.shape
            k = self.key(x)  # (B, T, hs)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T)
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
            wei = F.softmax(wei, dim=-1)
            v = self.value(x)
            return wei @ v

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_heads, head_size):
            super().__init__()
            self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
            self.proj = nn.Linear(head_size * num_heads, N_EMBD)

        def forward(self, x):
            out = lib.cat([h(x) for h in self.heads], dim=-1)
            return self.proj(out)

    class FeedForward(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                     nn.Linear(4 * n_embd, n_embd))

        def forward(self, x):
            return self.net(x)

    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.sa = MultiHeadAttention(n_head, n_embd // n_head)
            self.ffwd = FeedForward(n_embd)
            self.ln1 = nn.LayerNorm(n_embd)
            self.ln2 = nn.LayerNorm(n_embd)

        def forward(self, x):
            x = x + self.sa(self.ln1(x))
            x = x + self.ffwd(self.ln2(x))
            return x

    class GPTLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding_table = nn.Embedding(VOCAB_GPT, N_EMBD)
            self.position_embedding_table = nn.Embedding(BLOCK, N_EMBD)
            self.blocks = nn.Sequential(*[Block(N_EMBD, N_HEAD) for _ in range(N_LAYER)])
            self.ln_f = nn.LayerNorm(N_EMBD)
            self.lm_head = nn.Linear(N_EMBD, VOCAB_GPT)

        def forward(self, idx, targets):
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)  # (B, T, C)
            pos_emb = self.position_embedding_table(lib.arange(T))  # (T, C)
            x = tok_emb + pos_emb
            x = self.blocks(x)
            x = self.ln_f(x)
            logits = self.lm_head(x)  # (B, T, vocab)
            mark("forward")
            B, T, C = logits.shape
            loss = F.cross_entropy(logits.view(B * T, C), targets.view(B * T))
            mark("loss")
            return logits, loss

    return GPTLanguageModel()


def gpt_data(n=20000, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB_GPT, n).astype(np.int64)


def make_gpt(lib, data, batches):
    torch.manual_seed(0)
    ref = gpt_model(torch)
    if lib is torch:
        model = ref
    else:
        model = gpt_model(lib)
        model.load_state_dict({k: lib.tensor(v.detach().numpy().copy())
                               for k, v in ref.state_dict().items()})
    train_data = lib.tensor(data)
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)
    it = iter(batches)

    def get_batch():
        ix = next(it)
        x = lib.stack([train_data[i:i + BLOCK] for i in ix])
        y = lib.stack([train_data[i + 1:i + BLOCK + 1] for i in ix])
        return x, y

    if EVAL:
        model.eval()

        def evaluate():
            xb, yb = get_batch()
            with getattr(lib, EVAL)():
                return model(xb, yb)[1]
        return evaluate

    def step():
        mark.start()
        xb, yb = get_batch()
        mark("batch")
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        mark("backward")
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        mark("clip_grad_norm_")
        optimizer.step()
        mark("update")
        return loss

    return step


# ================================================================================= (c) LSTM
HIDDEN_LSTM, BATCH_LSTM = 64, 64


def digits_rows():
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0).astype(np.float32), d.target.astype(np.int64)  # (N, 8, 8), (N,)


def lstm_model(lib):
    nn = lib.nn

    class LSTMClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(input_size=8, hidden_size=HIDDEN_LSTM, batch_first=True)
            self.fc = nn.Linear(HIDDEN_LSTM, 10)

        def forward(self, x):  # x: (batch, 8 rows, 8 pixels)
            out, (h_n, c_n) = self.lstm(x)
            return self.fc(out[:, -1, :])

    return LSTMClassifier()


def make_lstm(lib, data, batches):
    torch.manual_seed(0)
    ref = lstm_model(torch)
    if lib is torch:
        model = ref
    else:
        model = lstm_model(lib)
        model.load_state_dict({k: lib.tensor(v.detach().numpy().copy())
                               for k, v in ref.state_dict().items()})
    X, Y = lib.tensor(data[0]), lib.tensor(data[1])
    criterion = lib.nn.CrossEntropyLoss()
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-2)
    it = iter(batches)

    if EVAL:
        model.eval()

        def evaluate():
            ix = lib.tensor(next(it))
            with getattr(lib, EVAL)():
                return criterion(model(X[ix]), Y[ix])
        return evaluate

    def step():
        mark.start()
        ix = lib.tensor(next(it))
        images, labels = X[ix], Y[ix]
        mark("batch")
        outputs = model(images)
        mark("forward")
        loss = criterion(outputs, labels)
        mark("loss")
        optimizer.zero_grad()
        loss.backward()
        mark("backward")
        optimizer.step()
        mark("update")
        return loss

    return step


def make_lstm_numpy(data, batches):
    """The same step by hand in numpy: LSTM forward over the 8 rows, backward through time,
    cross entropy, Adam (torch's update formula)."""
    torch.manual_seed(0)
    params = [p.detach().numpy().copy() for p in lstm_model(torch).parameters()]
    # w_ih (4H, 8), w_hh (4H, H), b_ih, b_hh (4H,), fc weight (10, H), fc bias (10,)
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    X, Y = data
    it = iter(batches)
    H = HIDDEN_LSTM
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
    count = [0]

    def sigmoid(z):
        return 0.5 * np.tanh(0.5 * z) + 0.5

    def step():
        w_ih, w_hh, b_ih, b_hh, w_fc, b_fc = params
        ix = next(it)
        x, y = X[ix], Y[ix]
        n, steps = x.shape[0], x.shape[1]
        proj = x @ w_ih.T + (b_ih + b_hh)  # (N, T, 4H), all steps at once
        h, c = np.zeros((n, H), np.float32), np.zeros((n, H), np.float32)
        cache = []
        for t in range(steps):
            z = proj[:, t] + h @ w_hh.T
            i, f, o = sigmoid(z[:, :H]), sigmoid(z[:, H:2 * H]), sigmoid(z[:, 3 * H:])
            g = np.tanh(z[:, 2 * H:3 * H])
            c_prev, h_prev = c, h
            c = f * c + i * g
            tc = np.tanh(c)
            h = o * tc
            cache.append((h_prev, c_prev, i, f, g, o, tc))
        loss, dl = np_cross_entropy(h @ w_fc.T + b_fc, y)
        grads = [None, np.zeros_like(w_hh), None, None, dl.T @ h, dl.sum(0)]
        dh, dc = dl @ w_fc, np.zeros((n, H), np.float32)
        dproj = np.empty_like(proj)
        for t in range(steps - 1, -1, -1):
            h_prev, c_prev, i, f, g, o, tc = cache[t]
            dc = dc + dh * o * (1 - tc * tc)
            dz = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                                 dc * i * (1 - g * g), dh * tc * o * (1 - o)], 1)
            dc = dc * f
            grads[1] += dz.T @ h_prev
            dh = dz @ w_hh
            dproj[:, t] = dz
        dflat = dproj.reshape(-1, 4 * H)
        grads[0] = dflat.T @ x.reshape(-1, x.shape[2])
        grads[2] = grads[3] = dflat.sum(0)
        count[0] += 1
        bc1, bc2 = 1 - b1 ** count[0], 1 - b2 ** count[0]
        for p, gr, mm, vv in zip(params, grads, m, v):
            mm *= b1
            mm += (1 - b1) * gr
            vv *= b2
            vv += (1 - b2) * gr * gr
            p -= (lr / bc1) * mm / (np.sqrt(vv) / bc2 ** 0.5 + eps)
        return loss

    return step


# ================================================================================= harness
def missing_api(name):
    """The nbgrad API a loop needs and nbgrad lacks, or None."""
    need = {"mlp_lm": [], "gpt": ["tril", "nn.utils.clip_grad_norm_", "optim.AdamW",
                                  "nn.ModuleList", "nn.GELU", "Tensor.masked_fill"],
            "lstm": ["nn.LSTM", "optim.Adam"]}[name]
    for api in need:
        obj = nbgrad.Tensor if api.startswith("Tensor.") else nbgrad
        for part in api.split(".")[1 if api.startswith("Tensor.") else 0:]:
            obj = getattr(obj, part, None)
        if obj is None:
            return api
    return None


def setup(name, steps_total):
    """(data, batch index list, {label: step factory})."""
    rng = np.random.default_rng(1)
    if name == "mlp_lm" and EVAL:
        data = lm_data()
        batches = [rng.integers(0, len(data[0]), BATCH_LM) for _ in range(steps_total)]
        return data, batches, {"torch": lambda d, b: make_mlp_lm(torch, d, b),
                               "nbgrad": lambda d, b: make_mlp_lm(nbgrad, d, b)}
    if name == "mlp_lm":
        data = lm_data()
        batches = [rng.integers(0, len(data[0]), BATCH_LM) for _ in range(steps_total)]
        return data, batches, {"torch": lambda d, b: make_mlp_lm(torch, d, b),
                               "nbgrad": lambda d, b: make_mlp_lm(nbgrad, d, b),
                               "numpy": make_mlp_lm_numpy}
    if name == "gpt":
        data = gpt_data()
        batches = [rng.integers(0, len(data) - BLOCK - 1, BATCH_GPT) for _ in range(steps_total)]
        return data, batches, {"torch": lambda d, b: make_gpt(torch, d, b),
                               "nbgrad": lambda d, b: make_gpt(nbgrad, d, b)}
    data = digits_rows()
    batches = [rng.integers(0, len(data[0]), BATCH_LSTM) for _ in range(steps_total)]
    makers = {"torch": lambda d, b: make_lstm(torch, d, b),
              "nbgrad": lambda d, b: make_lstm(nbgrad, d, b)}
    if not EVAL:
        makers["numpy"] = make_lstm_numpy
    return data, batches, makers


def run(step, n):
    """Per-step CPU and wall seconds (lists) and the losses, for n steps."""
    cpu, wall, losses = [], [], []
    for _ in range(n):
        c0, w0 = time.process_time(), time.perf_counter()
        loss = step()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        losses.append(loss.item())
    return cpu, wall, losses


def bench(name, steps, warmup=20):
    miss = missing_api(name)
    if miss:
        print(f"\n{name}: skipped: nbgrad has no {miss} yet")
        return None
    data, batches, makers = setup(name, (steps + warmup) * ROUNDS)
    best, losses = {}, {}
    steppers = {k: make(data, batches) for k, make in makers.items()}
    for r in range(ROUNDS):  # interleaved: the machine's noise hits every library alike
        for label, step in steppers.items():
            run(step, warmup)
            cpu, wall, ls = run(step, steps)
            med = (statistics.median(cpu), statistics.median(wall))
            old = best.get(label, med)
            best[label] = (min(old[0], med[0]), min(old[1], med[1]))
            if r == 0:
                losses[label] = ls
    ref = np.array(losses["torch"])
    what = f"evaluation ({EVAL})" if EVAL else "training"
    print(f"\n{name}: per {what} step, median of {steps} steps, best of {ROUNDS} rounds")
    print(f"  {'':8s} {'cpu us':>9s} {'wall us':>9s} {'/ torch (cpu)':>14s} {'last loss':>10s}"
          f" {'max |loss - torch|':>19s}")
    for label, (c, w) in best.items():
        dev = float(np.max(np.abs(np.array(losses[label]) - ref)))
        print(f"  {label:8s} {c * 1e6:9.1f} {w * 1e6:9.1f} {c / best['torch'][0]:13.2f}x"
              f" {losses[label][-1]:10.4f} {dev:19.2e}")
    return best


def phases(name, steps):
    """CPU us per step by phase, each library's own loop (the marks in the loop bodies)."""
    if missing_api(name):
        return
    data, batches, makers = setup(name, (steps + 20) * 2)
    res = {}
    for label in ("torch", "nbgrad"):
        step = makers[label](data, batches)
        run(step, 20)
        mark.on, mark.acc = True, {}
        run(step, steps)
        mark.on = False
        res[label] = dict(mark.acc)
    print(f"\n{name}: CPU us per step by phase (mean of {steps})")
    print(f"  {'phase':16s} {'torch':>9s} {'nbgrad':>9s} {'ratio':>7s}")
    for k in res["nbgrad"]:
        t, n = res["torch"].get(k, 0.0) / steps, res["nbgrad"][k] / steps
        print(f"  {k:16s} {t * 1e6:9.1f} {n * 1e6:9.1f} {n / t if t else float('nan'):6.2f}x")
    tt, tn = (sum(res[k].values()) / steps for k in ("torch", "nbgrad"))
    print(f"  {'total':16s} {tt * 1e6:9.1f} {tn * 1e6:9.1f} {tn / tt:6.2f}x")


def profile(name, steps):
    if missing_api(name):
        return
    from pyinstrument import Profiler

    data, batches, makers = setup(name, steps + 20)
    step = makers["nbgrad"](data, batches)
    run(step, 20)
    p = Profiler(interval=0.0001)
    p.start()
    run(step, steps)
    p.stop()
    print(p.output_text(unicode=False, color=False))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300, help="timed steps per round")
    ap.add_argument("--only", choices=["mlp_lm", "gpt", "lstm"], action="append")
    ap.add_argument("--phases", action="store_true", help="nbgrad's CPU time by phase")
    ap.add_argument("--profile", action="store_true", help="pyinstrument tree of nbgrad's step")
    ap.add_argument("--eval", choices=["no_grad", "inference_mode"],
                    help="time each model's forward and loss alone under this mode (eval())")
    args = ap.parse_args()
    global EVAL
    EVAL = args.eval
    torch.set_num_threads(1)
    nbgrad.set_num_threads(1)
    print(f"torch {torch.__version__} (1 thread), numpy {np.__version__} (1 BLAS thread), "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for name in args.only or ["mlp_lm", "gpt", "lstm"]:
        bench(name, args.steps)
        if args.phases:
            phases(name, args.steps)
        if args.profile:
            profile(name, args.steps)


if __name__ == "__main__":
    main()
