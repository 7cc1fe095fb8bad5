"""A 2-layer GPT learns to sort short digit sequences.

    python examples/train_gpt_sort.py              # nbgrad, progress bar, token accuracy
    python examples/train_gpt_sort.py --torch      # the same script on PyTorch

The task (as in minGPT's demo): the model reads ``x_1 .. x_n`` (digits 0-9) followed by the
sorted digits, and is trained to predict each sorted digit from everything before it. At test
time it writes the sorted half itself, greedily, one token at a time; token accuracy is the
fraction of those digits it gets right on sequences it has not seen.

The model is nanoGPT's shape in miniature, written as plain PyTorch (``import nbgrad as torch``):
token + position embeddings, two pre-norm blocks of causal self-attention
(``F.scaled_dot_product_attention(is_causal=True)``) and a GELU MLP, a final LayerNorm and a
linear head; AdamW, ``clip_grad_norm_``, cross entropy with ``ignore_index`` on the prompt.
"""

import argparse
import time

import numpy as np


def make_batch(rng, batch, length=6, digits=10):
    """(inputs, targets): int64 (batch, 2 * length - 1); targets -100 on the unsorted half."""
    x = rng.integers(0, digits, size=(batch, length))
    seq = np.concatenate([x, np.sort(x, axis=1)], axis=1)
    inp, tgt = seq[:, :-1].copy(), seq[:, 1:].copy()
    tgt[:, :length - 1] = -100  # only the sorted half is predicted
    return inp, tgt


def make_model(torch, vocab=10, block=11, n_embd=48, n_head=4, n_layer=2):
    """A GPT: embeddings, ``n_layer`` pre-norm transformer blocks, LayerNorm, linear head."""
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):  # (B, T, C)
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * n_embd, n_embd))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab)

        def forward(self, idx):  # int64 (B, T) -> logits (B, T, vocab)
            pos = torch.arange(idx.shape[1])
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))

    return GPT()


def sort_accuracy(torch, model, rng, n=500, length=6):
    """Greedy generation of the sorted half of ``n`` new sequences: the fraction of correct
    digits (token accuracy) and of fully correct sequences."""
    x = rng.integers(0, 10, size=(n, length))
    seq = torch.tensor(x)
    model.eval()
    with torch.no_grad():
        for _ in range(length):
            nxt = model(seq)[:, -1].argmax(dim=-1)
            seq = torch.cat([seq, nxt.unsqueeze(1)], dim=1)
    model.train()
    out = seq.numpy()[:, length:]
    right = out == np.sort(x, axis=1)
    return float(right.mean()), float(right.all(axis=1).mean())


def train(torch, steps=400, seed=0, progress=True, batch=64, lr=3e-3):
    """Train the GPT; return (model, token accuracy, sequence accuracy, seconds per step).

    AdamW(lr=3e-3, weight_decay=0.01) with linear warmup (50 steps) then cosine decay,
    gradient norm clipped at 1.0.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = make_model(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = min(50, steps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm
        else 0.5 * (1 + np.cos(np.pi * (s - warm) / max(1, steps - warm))))
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100)
    bar = range(steps)
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(bar, desc=f"GPT sort ({torch.__name__})", unit="step")
    t0 = time.perf_counter()
    for step in bar:
        inp, tgt = make_batch(rng, batch)
        logits = model(torch.tensor(inp))
        loss = loss_fn(logits.view(-1, logits.shape[-1]), torch.tensor(tgt).view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if progress and step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    per_step = (time.perf_counter() - t0) / max(steps, 1)
    tok, full = sort_accuracy(torch, model, np.random.default_rng(seed + 1000))
    return model, tok, full, per_step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch", action="store_true", help="run on PyTorch instead, to compare")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.torch:
        import torch
        torch.set_num_threads(1)
    else:
        import nbgrad as torch
    t0 = time.perf_counter()
    _, tok, full, per_step = train(torch, args.steps, args.seed, not args.no_progress)
    print(f"GPT sort ({torch.__name__}): token accuracy {tok:.4f}, sequences fully sorted "
          f"{full:.4f}, {per_step * 1000:.2f} ms/step, {time.perf_counter() - t0:.1f} s in all")


if __name__ == "__main__":
    main()
