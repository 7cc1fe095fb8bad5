"""Random small training programs for the nn / loss / optim differential test
(tests/test_nn_differential.py): a model from the nn layers, a loss, clipping, an optimizer and
a scheduler, drawn from a seed. Every builder takes the library `T` (torch or nbgrad), so the
same code builds both sides; torch's weights are copied into nbgrad's through numpy.

Most programs run in float64, where the two libraries agree to ~1e-12 and a real bug stands
out; a third in float32. The tolerance of each compared value is measured, not chosen: torch is
run again with its inputs and weights moved by a few ulps, and the distance torch moves from
itself is the rounding noise of that value (large where the program is ill-conditioned: a
max-pool tie, a ReLU at zero); see tests/test_nn_differential.py. dtype promotion and module
dtype strictness are promo's area: not drawn here.
"""
from __future__ import annotations

import random

import numpy as np

ACTS = ["ReLU", "Tanh", "GELU", "SiLU", "ELU", "LeakyReLU", "Sigmoid", "Softplus", "Mish",
        "Hardswish", "PReLU", "SELU", "CELU", "Hardtanh", "LogSigmoid"]
NORMS1D = ["none", "LayerNorm", "BatchNorm1d"]
NORMS2D = ["none", "BatchNorm2d", "GroupNorm", "InstanceNorm2d", "LayerNorm"]
POOLS2D = ["none", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"]
RNNS = ["RNN", "LSTM", "GRU"]
MODELS = ["mlp", "conv2d", "conv1d", "rnn", "attention", "encoder"]
LOSSES = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "CrossEntropyLoss",
          "CrossEntropyLoss_weight", "CrossEntropyLoss_ignore", "CrossEntropyLoss_smooth",
          "CrossEntropyLoss_probs", "NLLLoss", "NLLLoss_weight", "BCELoss", "BCEWithLogitsLoss",
          "BCEWithLogitsLoss_pos_weight", "KLDivLoss", "KLDivLoss_log_target",
          "CosineEmbeddingLoss", "MarginRankingLoss", "TripletMarginLoss", "SoftMarginLoss",
          "MultiLabelSoftMarginLoss", "MultiMarginLoss", "HingeEmbeddingLoss", "PoissonNLLLoss",
          "GaussianNLLLoss"]
OPTIMS = ["SGD", "SGD_momentum", "SGD_nesterov", "SGD_wd", "Adam", "Adam_amsgrad", "AdamW",
          "AdamW_amsgrad", "RMSprop", "RMSprop_centered", "Adagrad", "Adadelta", "Adamax",
          "NAdam", "RAdam", "LBFGS"]
SCHEDS = ["none", "StepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "OneCycleLR"]
N, C = 4, 3  # batch, classes (the model's output is (N, C))


def draw(seed):
    """A configuration (a dict of names and numbers) from `seed`."""
    r = random.Random(seed)
    cfg = dict(seed=seed, model=MODELS[seed % len(MODELS)], act=r.choice(ACTS),
               loss=r.choice(LOSSES), optim=r.choice(OPTIMS), sched=r.choice(SCHEDS),
               clip=r.choice([None, 0.5, 5.0]), eval=r.random() < 0.2,
               affine=r.random() < 0.6, steps=3,
               dtype="float32" if r.random() < 0.3 else "float64")
    if cfg["model"] == "mlp":
        cfg.update(norm=r.choice(NORMS1D), hidden=r.choice([5, 8]), depth=r.choice([1, 2]))
    elif cfg["model"] == "conv2d":
        cfg.update(norm=r.choice(NORMS2D), pool=r.choice(POOLS2D), transpose=r.random() < 0.4,
                   stride=r.choice([1, 2]), padding=r.choice([0, 1]))
    elif cfg["model"] == "conv1d":
        cfg.update(pool=r.choice(["none", "MaxPool1d", "AvgPool1d"]), dilation=r.choice([1, 2]))
    elif cfg["model"] == "rnn":
        cfg.update(cell=r.choice(RNNS), layers=r.choice([1, 2]), bidirectional=r.random() < 0.4,
                   embed=r.random() < 0.5)
    # drawn after the rest, so that each seed's earlier draws stay what they were: the layers and
    # optimizers issue 23 added
    if cfg["model"] == "conv2d":
        cfg["resample"] = r.choice(["none", "none", "bicubic", "LPPool2d", "MaxUnpool2d"])
    elif cfg["model"] == "conv1d":
        cfg["resample"] = r.choice(["none", "LPPool1d", "MaxUnpool1d"])
    if r.random() < 0.25 and cfg["optim"] != "LBFGS":
        cfg["optim"] = r.choice(MORE_OPTIMS)
    if cfg["optim"] == "LBFGS":
        cfg["sched"] = "none"
    return cfg


MORE_OPTIMS = ["ASGD", "Rprop", "Adafactor"]


def _act(T, name):
    return getattr(T.nn, name)()


def build(T, cfg):
    """The model of `cfg` in library T (in cfg's dtype), and the kind and shape of its input."""
    model, spec = _build(T, cfg)
    return model.to(getattr(T, cfg["dtype"])), spec


def _build(T, cfg):
    nn = T.nn
    T.manual_seed(cfg["seed"])
    m = cfg["model"]
    if m == "mlp":
        layers, d = [], 6
        for _ in range(cfg["depth"]):
            layers += [nn.Linear(d, cfg["hidden"]), _act(T, cfg["act"])]
            if cfg["norm"] == "LayerNorm":
                layers.append(nn.LayerNorm(cfg["hidden"], elementwise_affine=cfg["affine"]))
            elif cfg["norm"] == "BatchNorm1d":
                layers.append(nn.BatchNorm1d(cfg["hidden"], affine=cfg["affine"]))
            layers.append(nn.Dropout(0.0))
            d = cfg["hidden"]
        layers.append(nn.Linear(d, C))
        return nn.Sequential(*layers), ("float", (N, 6))
    if m == "conv2d":
        layers = [nn.Conv2d(2, 4, 3, stride=cfg["stride"], padding=cfg["padding"])]
        size = (8 + 2 * cfg["padding"] - 3) // cfg["stride"] + 1
        norm = cfg["norm"]
        if norm == "BatchNorm2d":
            layers.append(nn.BatchNorm2d(4, affine=cfg["affine"]))
        elif norm == "GroupNorm":
            layers.append(nn.GroupNorm(2, 4, affine=cfg["affine"]))
        elif norm == "InstanceNorm2d":
            layers.append(nn.InstanceNorm2d(4, affine=cfg["affine"]))
        elif norm == "LayerNorm":
            layers.append(nn.LayerNorm([4, size, size], elementwise_affine=cfg["affine"]))
        layers.append(_act(T, cfg["act"]))
        pool = cfg["pool"]
        if pool in ("MaxPool2d", "AvgPool2d"):
            layers.append(getattr(nn, pool)(2))
            size //= 2
        elif pool.startswith("Adaptive"):
            layers.append(getattr(nn, pool)(2))
            size = 2
        size = _resample(T, cfg.get("resample", "none"), layers, size, 2)
        if cfg["transpose"]:
            layers.append(nn.ConvTranspose2d(4, 4, 2, stride=2))
            size *= 2
        layers += [nn.Flatten(), nn.Linear(4 * size * size, C)]
        return nn.Sequential(*layers), ("float", (N, 2, 8, 8))
    if m == "conv1d":
        layers = [nn.Conv1d(3, 4, 3, dilation=cfg["dilation"]), _act(T, cfg["act"])]
        size = 10 - 2 * cfg["dilation"]
        if cfg["pool"] != "none":
            layers.append(getattr(nn, cfg["pool"])(2))
            size //= 2
        size = _resample(T, cfg.get("resample", "none"), layers, size, 1)
        layers += [nn.Flatten(), nn.Linear(4 * size, C)]
        return nn.Sequential(*layers), ("float", (N, 3, 10))
    if m == "rnn":
        return _Recurrent(T, cfg), ("index" if cfg["embed"] else "float", (N, 5))
    return _Attention(T, cfg), ("float", (N, 5, 4))


def _resample(T, name, layers, size, dims):
    """Append the resampling layer `name` (bicubic upsampling, LP pooling, max-pool then
    max-unpool) to `layers` over `dims` spatial dims of `size`; returns the new size."""
    nn = T.nn
    if name == "bicubic":
        layers.append(nn.Upsample(scale_factor=2, mode="bicubic"))
        return size * 2
    if name.startswith("LPPool") and size >= 2:
        layers.append(getattr(nn, name)(1.0, 2))  # (p = 1: no 0^(1/p) at a dead ReLU window)
        return size // 2
    if name.startswith("MaxUnpool") and size >= 2:
        layers.append(_Unpool(T, dims))
        return size
    return size


def _Unpool(T, dims):
    nn = T.nn

    class Unpool(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = getattr(nn, f"MaxPool{dims}d")(2, return_indices=True)
            self.unpool = getattr(nn, f"MaxUnpool{dims}d")(2)

        def forward(self, x):
            return self.unpool(*self.pool(x), output_size=x.shape[2:])
    return Unpool()


def _Recurrent(T, cfg):
    nn = T.nn

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(7, 4) if cfg["embed"] else None
            self.rnn = getattr(nn, cfg["cell"])(4, 5, num_layers=cfg["layers"],
                                                bidirectional=cfg["bidirectional"],
                                                batch_first=True)
            self.head = nn.Linear(5 * (2 if cfg["bidirectional"] else 1), C)

        def forward(self, x):
            x = self.embed(x) if self.embed is not None else x.unsqueeze(-1).expand(-1, -1, 4)
            out = self.rnn(x)[0]
            return self.head(out[:, -1])
    return Recurrent()


def _Attention(T, cfg):
    nn = T.nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            if cfg["model"] == "encoder":
                self.body = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True,
                                                       norm_first=cfg["affine"])
            else:
                self.body = nn.MultiheadAttention(4, 2, batch_first=True)
            self.head = nn.Linear(4, C)

        def forward(self, x):
            if cfg["model"] == "encoder":
                y = self.body(x)
            else:
                y = self.body(x, x, x, need_weights=cfg["affine"])[0]
            return self.head(y.mean(1))
    return Attention()


def inputs(cfg, kind, shape):
    """numpy input, target and the extra operands of the loss, from the seed."""
    rng = np.random.default_rng(cfg["seed"])
    x = rng.integers(0, 7, shape) if kind == "index" else rng.standard_normal(shape)
    extra = dict(cls=rng.integers(0, C, N), prob=rng.dirichlet(np.ones(C), N),
                 real=rng.standard_normal((N, C)), unit=rng.uniform(0.05, 0.95, (N, C)),
                 sign=rng.choice([-1.0, 1.0], N), sign_nc=rng.choice([-1.0, 1.0], (N, C)),
                 other=rng.standard_normal((N, C)), other2=rng.standard_normal((N, C)),
                 weight=rng.uniform(0.5, 2.0, C), bits=rng.integers(0, 2, (N, C)).astype(float),
                 var=rng.uniform(0.5, 2.0, (N, C)), counts=rng.poisson(2.0, (N, C)).astype(float))
    extra["cls_ignored"] = extra["cls"].copy()
    extra["cls_ignored"][1] = -100
    return x, extra


def loss_value(T, name, out, e):
    """The loss `name` of the model's output `out` (N, C); `e`: extra operands as tensors."""
    nn, F = T.nn, T.nn.functional
    if name in ("MSELoss", "L1Loss"):
        return getattr(nn, name)()(out, e["real"])
    if name == "SmoothL1Loss":
        return nn.SmoothL1Loss(beta=0.5)(out, e["real"])
    if name == "HuberLoss":
        return nn.HuberLoss(delta=0.7)(out, e["real"])
    if name == "CrossEntropyLoss":
        return nn.CrossEntropyLoss()(out, e["cls"])
    if name == "CrossEntropyLoss_weight":
        return nn.CrossEntropyLoss(weight=e["weight"])(out, e["cls"])
    if name == "CrossEntropyLoss_ignore":
        return nn.CrossEntropyLoss(ignore_index=-100, reduction="sum")(out, e["cls_ignored"])
    if name == "CrossEntropyLoss_smooth":
        return nn.CrossEntropyLoss(label_smoothing=0.1, weight=e["weight"])(out, e["cls"])
    if name == "CrossEntropyLoss_probs":
        return nn.CrossEntropyLoss(label_smoothing=0.2)(out, e["prob"])
    if name == "NLLLoss":
        return nn.NLLLoss()(F.log_softmax(out, 1), e["cls"])
    if name == "NLLLoss_weight":
        return nn.NLLLoss(weight=e["weight"])(F.log_softmax(out, 1), e["cls"])
    if name == "BCELoss":
        return nn.BCELoss()(T.sigmoid(out), e["unit"])
    if name == "BCEWithLogitsLoss":
        return nn.BCEWithLogitsLoss()(out, e["unit"])
    if name == "BCEWithLogitsLoss_pos_weight":
        return nn.BCEWithLogitsLoss(pos_weight=e["weight"], weight=e["weight"])(out, e["bits"])
    if name == "KLDivLoss":
        return nn.KLDivLoss(reduction="batchmean")(F.log_softmax(out, 1), e["prob"])
    if name == "KLDivLoss_log_target":
        return nn.KLDivLoss(reduction="sum", log_target=True)(F.log_softmax(out, 1),
                                                              e["prob"].log())
    if name == "CosineEmbeddingLoss":
        return nn.CosineEmbeddingLoss(margin=0.1)(out, e["other"], e["sign"])
    if name == "MarginRankingLoss":
        return nn.MarginRankingLoss(margin=0.2)(out[:, 0], out[:, 1], e["sign"])
    if name == "TripletMarginLoss":
        return nn.TripletMarginLoss(margin=1.0)(out, e["other"], e["other2"])
    if name == "SoftMarginLoss":
        return nn.SoftMarginLoss()(out, e["sign_nc"])
    if name == "MultiLabelSoftMarginLoss":
        return nn.MultiLabelSoftMarginLoss(weight=e["weight"])(out, e["bits"])
    if name == "MultiMarginLoss":
        return nn.MultiMarginLoss(margin=0.5)(out, e["cls"])
    if name == "HingeEmbeddingLoss":
        return nn.HingeEmbeddingLoss(margin=0.5)(out, e["sign_nc"])
    if name == "PoissonNLLLoss":
        return nn.PoissonNLLLoss()(out, e["counts"])
    if name == "GaussianNLLLoss":
        return nn.GaussianNLLLoss()(out, e["real"], e["var"])
    raise KeyError(name)


def optimizer(T, name, params):
    o = T.optim
    table = {
        "SGD": lambda: o.SGD(params, lr=0.05),
        "SGD_momentum": lambda: o.SGD(params, lr=0.05, momentum=0.9, dampening=0.1),
        "SGD_nesterov": lambda: o.SGD(params, lr=0.05, momentum=0.9, nesterov=True),
        "SGD_wd": lambda: o.SGD(params, lr=0.05, momentum=0.5, weight_decay=0.1),
        "Adam": lambda: o.Adam(params, lr=0.01),
        "Adam_amsgrad": lambda: o.Adam(params, lr=0.01, amsgrad=True, weight_decay=0.01),
        "AdamW": lambda: o.AdamW(params, lr=0.01),
        "AdamW_amsgrad": lambda: o.AdamW(params, lr=0.01, amsgrad=True),
        "RMSprop": lambda: o.RMSprop(params, lr=0.01),
        "RMSprop_centered": lambda: o.RMSprop(params, lr=0.01, centered=True, momentum=0.5),
        "Adagrad": lambda: o.Adagrad(params, lr=0.05, lr_decay=0.01),
        "Adadelta": lambda: o.Adadelta(params, lr=1.0, weight_decay=0.01),
        "Adamax": lambda: o.Adamax(params, lr=0.02),
        "NAdam": lambda: o.NAdam(params, lr=0.02),
        "RAdam": lambda: o.RAdam(params, lr=0.02),
        "LBFGS": lambda: o.LBFGS(params, lr=0.5, max_iter=4, history_size=3),
        "ASGD": lambda: o.ASGD(params, lr=0.02, t0=1, weight_decay=0.01),
        "Rprop": lambda: o.Rprop(params, lr=0.01),
        "Adafactor": lambda: o.Adafactor(params, lr=0.02, weight_decay=0.01),
    }
    return table[name]()


def scheduler(T, name, opt):
    s = T.optim.lr_scheduler
    return {"none": lambda: None,
            "StepLR": lambda: s.StepLR(opt, 1, gamma=0.5),
            "ExponentialLR": lambda: s.ExponentialLR(opt, 0.8),
            "CosineAnnealingLR": lambda: s.CosineAnnealingLR(opt, 4),
            "LinearLR": lambda: s.LinearLR(opt, 0.5, 1.0, 3),
            "OneCycleLR": lambda: s.OneCycleLR(opt, 0.05, total_steps=5, cycle_momentum=(
                "momentum" in opt.defaults or "betas" in opt.defaults))}[name]()


def run(T, cfg, state=None, jitter=0.0, salt=0):
    """Run the program of `cfg` in library T; returns {name: numpy array} of everything compared.

    state: torch's state dict as numpy (nbgrad's side loads it); jitter: a relative move of the
    inputs and weights, in ulps of the dtype (torch's run against itself), drawn by `salt`."""
    model, (kind, shape) = build(T, cfg)
    x, extra = inputs(cfg, kind, shape)
    dt, eps = getattr(T, cfg["dtype"]), np.finfo(cfg["dtype"]).eps
    if state is not None:
        model.load_state_dict({k: T.tensor(v.copy()) for k, v in state.items()})
    rng = np.random.default_rng((1000 + cfg["seed"], salt))
    if jitter:
        with T.no_grad():
            for p in model.parameters():
                p.mul_(T.tensor(1 + jitter * eps * rng.standard_normal(tuple(p.shape)),
                                dtype=dt))
        if kind == "float":
            x = x * (1 + jitter * eps * rng.standard_normal(x.shape))
    if cfg["eval"]:
        model.eval()
    xt = T.tensor(x, dtype=dt) if kind == "float" else T.tensor(x)
    e = {k: T.tensor(v, dtype=dt) if v.dtype.kind == "f" else T.tensor(v)
         for k, v in extra.items()}
    params = list(model.parameters())
    opt = optimizer(T, cfg["optim"], params)
    sched = scheduler(T, cfg["sched"], opt)
    rec = {}
    for step in range(cfg["steps"]):
        def closure():
            opt.zero_grad()
            out = model(xt)
            loss = loss_value(T, cfg["loss"], out, e)
            loss.backward()
            return loss, out
        loss, out = closure()
        rec[f"step{step}.output"] = out.detach().numpy().copy()
        rec[f"step{step}.loss"] = np.array(loss.item())
        for name, p in model.named_parameters():
            rec[f"step{step}.grad.{name}"] = (np.zeros(tuple(p.shape)) if p.grad is None
                                              else p.grad.numpy().copy())
        if cfg["clip"] is not None:
            rec[f"step{step}.clip_norm"] = np.array(float(T.nn.utils.clip_grad_norm_(
                params, cfg["clip"])))
        if cfg["optim"] == "LBFGS":
            opt.step(lambda: closure()[0])
        else:
            opt.step()
        if sched is not None:
            sched.step()
            rec[f"step{step}.lr"] = np.array(opt.param_groups[0]["lr"])
    for name, v in model.state_dict().items():
        rec[f"final.{name}"] = v.numpy().copy()
    return model, rec
