"""An LSTM reads each 8x8 digit row by row (8 steps of 8 pixels) and classifies it.

    python examples/train_lstm_digits.py             # nbgrad, progress bar, test accuracy
    python examples/train_lstm_digits.py --torch     # the same script on PyTorch

Plain PyTorch code with ``import nbgrad as torch``: ``nn.LSTM(batch_first=True)``, the last
hidden state into a ``Linear``, Adam, cross entropy. The data is scikit-learn's bundled digits
(no download), split as in ``train_digits.py``.
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from train_digits import load_digits_split  # noqa: E402  (the same data and split)


def make_model(torch, hidden=64):
    """LSTM(8 -> hidden) over the 8 rows, then Linear(hidden -> 10) on the last hidden state."""
    nn = torch.nn

    class RowLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, hidden, batch_first=True)
            self.head = nn.Linear(hidden, 10)

        def forward(self, images):  # (N, 1, 8, 8) -> logits (N, 10)
            rows = images.reshape(images.shape[0], 8, 8)  # (N, L=8 steps, 8 pixels)
            _, (h_n, _) = self.lstm(rows)
            return self.head(h_n[-1])

    return RowLSTM()


def accuracy(torch, model, x, y):
    model.eval()
    with torch.no_grad():
        pred = model(torch.tensor(x)).argmax(dim=1)
    model.train()
    return float((pred.numpy() == y).mean())


def train(torch, epochs=25, seed=0, progress=True, data=None, hidden=64, lr=1e-2):
    """Train; return (model, test accuracy, seconds per training step).

    Adam(lr=1e-2) with cosine decay, batch 64, ``epochs`` passes over the 1437 training images.
    """
    x_tr, y_tr, x_te, y_te = data if data is not None else load_digits_split()
    torch.manual_seed(seed)
    model = make_model(torch, hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = torch.nn.CrossEntropyLoss()
    ds = torch.utils.data.TensorDataset(torch.tensor(x_tr), torch.tensor(y_tr))
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True,
                                         generator=torch.Generator().manual_seed(seed))
    bar = range(epochs)
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(bar, desc=f"LSTM ({torch.__name__})", unit="epoch")
    steps, t0 = 0, time.perf_counter()
    for _ in bar:
        total, count = 0.0, 0
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(yb)
            count += len(yb)
            steps += 1
        sched.step()
        if progress:
            bar.set_postfix(loss=f"{total / count:.4f}")
    per_step = (time.perf_counter() - t0) / max(steps, 1)
    return model, accuracy(torch, model, x_te, y_te), per_step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=25)
    p.add_argument("--hidden", type=int, default=64)
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
    _, acc, per_step = train(torch, args.epochs, args.seed, not args.no_progress,
                             hidden=args.hidden)
    print(f"LSTM on digit rows ({torch.__name__}): test accuracy {acc:.4f}, "
          f"{per_step * 1000:.2f} ms/step, {time.perf_counter() - t0:.1f} s in all")


if __name__ == "__main__":
    main()
