"""Train an MLP and a small CNN on scikit-learn's bundled digits (8x8, 10 classes) with nbgrad.

    python examples/train_digits.py            # both models, progress bars, test accuracy
    python examples/train_digits.py --model cnn --epochs 20

The code is plain PyTorch with ``import nbgrad as torch``: the same script runs on PyTorch by
changing that one line (``--torch`` does exactly that, for comparison).
No download: ``sklearn.datasets.load_digits`` ships with scikit-learn.
"""

import argparse
import time

import numpy as np


def load_digits_split(test_fraction=0.2, seed=0):
    """The 1797 digits as float32 images (N, 1, 8, 8) scaled to [0, 1] and int64 labels (N,).

    Returns:
        (x_train, y_train, x_test, y_test) numpy arrays; a fixed random split (1437 / 360).
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None, :, :]
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = perm[:n_test], perm[n_test:]
    return x[train], y[train], x[test], y[test]


def make_mlp(torch):
    nn = torch.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64),
                         nn.ReLU(), nn.Linear(64, 10))


def make_cnn(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # (N, 16, 4, 4)
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # (N, 32, 2, 2)
        nn.Flatten(), nn.Linear(128, 10))


def accuracy(torch, model, x, y):
    model.eval()
    with torch.no_grad():
        pred = model(torch.tensor(x)).argmax(dim=1)
    model.train()
    return float((pred.numpy() == y).mean())


def train(torch, kind="mlp", epochs=None, seed=0, progress=True, data=None):
    """Train one model; return (model, test_accuracy, seconds per epoch).

    MLP: SGD(lr=0.05, momentum=0.9), 40 epochs. CNN: Adam(lr=3e-3), 25 epochs. Batch 64.
    """
    x_tr, y_tr, x_te, y_te = data if data is not None else load_digits_split()
    torch.manual_seed(seed)
    model = make_mlp(torch) if kind == "mlp" else make_cnn(torch)
    if kind == "mlp":
        epochs = epochs or 40
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        epochs = epochs or 25
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = torch.nn.CrossEntropyLoss()
    ds = torch.utils.data.TensorDataset(torch.tensor(x_tr), torch.tensor(y_tr))
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True,
                                         generator=torch.Generator().manual_seed(seed))
    bar = range(epochs)
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(bar, desc=f"{kind} ({torch.__name__})", unit="epoch")
    t0 = time.perf_counter()
    for _ in bar:
        total, count = 0.0, 0
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(yb)
            count += len(yb)
        sched.step()
        if progress:
            bar.set_postfix(loss=f"{total / count:.4f}", lr=f"{sched.get_last_lr()[0]:.4f}")
    per_epoch = (time.perf_counter() - t0) / epochs
    return model, accuracy(torch, model, x_te, y_te), per_epoch


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch", action="store_true", help="run on PyTorch instead, to compare")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--save", default=None, help="save the trained state dict(s) to this prefix")
    args = p.parse_args(argv)
    if args.torch:
        import torch
    else:
        import nbgrad as torch
    data = load_digits_split()
    kinds = ["mlp", "cnn"] if args.model == "both" else [args.model]
    for kind in kinds:
        model, acc, sec = train(torch, kind, args.epochs, args.seed, not args.no_progress, data)
        print(f"{kind}: test accuracy {acc:.4f} ({len(data[3])} images), "
              f"{sec * 1000:.1f} ms/epoch")
        if args.save:
            torch.save(model.state_dict(), f"{args.save}_{kind}.pt")


if __name__ == "__main__":
    main()
