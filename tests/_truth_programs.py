"""Model-debugging notebooks made from a seed, and their answers computed without the panel.

:func:`program` writes a notebook session (a list of cells in PyTorch's API: ``torch``, ``nn``,
``F``, ``np``) from a seed: several models in one session, cells run again, training loops that
make NaN at some step, ``.detach()`` / ``.data`` / numpy cuts, gradients accumulated without
``zero_grad``, train / eval, shared parameters, nested modules, modules called twice, a module
defined and never called. Data and weights come from numpy, so nbgrad and PyTorch start from the
same numbers.

:func:`truth` runs the same cells in PyTorch itself (``exec``, cell by cell, numbered as the
kernel numbers them) and records, with plain hooks written here (a ``TorchFunctionMode`` and
torch's global module hooks, nothing of nbgrad's), per cell:

- ``nodes``: ``(node name, cell, line) -> {innermost module path}`` for every graph node made
  (``None`` outside any module), the path being the namespace name of the module the user called
  followed by the module's path inside it; ``classes``: ``path -> class name``;
- ``backward``: the backward calls of the cell; ``losses``: the scalar each started from;
- ``nan``: the first op whose output held NaN/Inf while its inputs were finite: ``(node name,
  cell, line, step)`` (step: backward calls so far in the cell + 1); ``nan_loss_step``: the first
  backward call that started from a non-finite value;
- ``nan_params``: ``{parameter path: step}``: the parameter holds NaN/Inf since the update of
  that step (seen finite before that backward call, non-finite before the next or after the cell);
- ``no_grad``: per model the user called with grad on in a cell that ran backward, its
  parameters that no backward call of the cell summed a gradient into;
- ``accum``: ``{parameter path: n}``: the most backward calls summed into its ``.grad`` since it
  was last None or all zeros, at any backward of the cell (previous cells' calls counted), for
  the parameters where that is 2 or more (``accum_early``: those where it was 2 or more at
  backward call 1 or 2, the calls the panel watches); ``grad_norm``: ``{parameter path: norm}`` of the
  gradient the last backward call summed in; ``step_sq``: per backward call, ``{parameter path:
  squared norm}`` of the gradient it summed in;
- ``modes``: ``{(kind, module path, class, cell, line)}``: a model with Dropout / BatchNorm
  layers the user called in train mode under ``no_grad`` (``"train-nograd"``, its first such call
  of the cell), or called in eval mode with grad on and then reached by a backward of the same
  cell (``"eval-train"``, the last such call before that backward);
- ``broadcasts``: ``[(cell, line, target shape, input shape)]``: the calls of a loss that
  broadcasts its target (``F.mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``: what
  ``nn.MSELoss`` ... call) with a target of another shape than its input; ``raised``: a
  backward call of the cell raised.
"""

from __future__ import annotations

import math
import random
import sys
import warnings

NB_PRELUDE = ("import nbgrad as torch\nimport nbgrad.nn as nn\nimport nbgrad.nn.functional as F\n"
              "import numpy as np")
TORCH_PRELUDE = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
                 "import numpy as np")

HELPERS = '''def init(m, seed, scale=0.5):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.tensor((rng.standard_normal(tuple(p.shape)) * scale).astype(np.float32)))
    return m

def data(seed, *shape, scale=1.0):
    rng = np.random.default_rng(seed)
    return torch.tensor((rng.standard_normal(shape) * scale).astype(np.float32))'''

MLP = '''class MLP(nn.Module):
    def __init__(self, d_in, d_h, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_h)
        self.act = nn.{act}()
        self.fc2 = nn.Linear(d_h, d_out)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))'''

TINY_LM = '''class TinyLM(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.unused = nn.Linear(d, d)

    def forward(self, ids):
        return self.head(self.ln(self.emb(ids)))'''

BLOCK = '''class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        self.proj = nn.Linear(d, d)
        self.tied = nn.Linear(d, d)
        self.tied.weight = self.proj.weight

    def forward(self, x):
        h = self.seq(x)
        h = self.proj(self.proj(h))
        return self.tied(h)

class Net(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.block = Block(d)
        self.out = nn.Linear(d, 1)
        self.spare = nn.Linear(d, d)

    def forward(self, x):
        return self.out(self.block(x))'''

ATTN = '''class Attn(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, num_heads=1, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.to_q = nn.Linear(d, d)

    def forward(self, x):
        y, _ = self.mha(x, x, x)
        return self.norm(x + y)'''

CUT_NET = '''class CutNet(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.enc = nn.Linear(d, d)
        self.dec = nn.Linear(d, 1)

    def forward(self, x):
        h = self.enc(x).relu()
        h = {cut}
        return self.dec(h)'''

MODE_LAYERS = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "BatchNorm1d",
               "BatchNorm2d", "BatchNorm3d")  # the layers train() / eval() changes

_CUTS = ["{h}.detach()", "{h}.data", "torch.from_numpy({h}.detach().numpy())"]


def program(seed: int) -> list:
    """The cells of one session (without the prelude), in PyTorch's API."""
    r = random.Random(seed)
    cells = [HELPERS]
    scenes = ["mlp", "lm", "nested", "cut", "nan", "accum", "rerun", "eval", "attn", "bcast",
              "modes", "accum2", "fails"]
    r.shuffle(scenes)
    scenes = ["mlp"] + [s for s in scenes if s != "mlp"][:r.randint(4, 7)]
    rerun = None
    for scene in scenes:
        d = r.choice([3, 4, 5])
        if scene == "mlp":
            act = r.choice(["ReLU", "Tanh", "Sigmoid"])
            steps = r.randint(3, 35)
            cells += [MLP.format(act=act),
                      f"model = init(MLP({d}, 6, 1), {seed})\nx = data({seed + 1}, 8, {d})\n"
                      f"y = data({seed + 2}, 8, 1)\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=0.05)\nmse = nn.MSELoss()",
                      f"for step in range({steps}):\n    opt.zero_grad()\n"
                      "    loss = mse(model(x), y)\n    loss.backward()\n    opt.step()"]
            rerun = rerun or len(cells) - 1
        elif scene == "lm":
            cells += [TINY_LM,
                      f"lm = init(TinyLM(7, {d}), {seed + 3})\n"
                      f"ids = torch.tensor(np.random.default_rng({seed}).integers(0, 7, (2, 5)))",
                      "logits = lm(ids)\n"
                      "lm_loss = F.cross_entropy(logits.reshape(-1, 7), ids.reshape(-1))\n"
                      "lm_loss.backward()"]
            rerun = len(cells) - 1
        elif scene == "nested":
            cells += [BLOCK,
                      f"net = init(Net({d}), {seed + 4}, scale=0.3)\nxs = data({seed + 5}, 4, {d})",
                      "out = net(xs).sum()\nout.backward()"]
        elif scene == "cut":
            cut = r.choice(_CUTS)
            if r.random() < 0.5:
                cells += [CUT_NET.format(cut=cut.format(h="h")),
                          f"cnet = init(CutNet({d}), {seed + 6})\nxc = data({seed + 7}, 6, {d})",
                          "closs = cnet(xc).pow(2).mean()\ncloss.backward()"]
            else:
                top = cut.format(h="h1")
                cells += [f"enc = init(nn.Linear({d}, {d}), {seed + 8})\n"
                          f"dec = init(nn.Linear({d}, 1), {seed + 9})\n"
                          f"xc = data({seed + 7}, 6, {d})",
                          f"h1 = enc(xc).tanh()\nh2 = {top}\ncloss = dec(h2).pow(2).mean()\n"
                          "closs.backward()"]
        elif scene == "nan":
            steps = r.randint(20, 50)  # NaN at some step, or none: log(0) once p is 1.0
            scale = r.choice([2.0, 3.0])
            lr = r.choice([2.0, 4.0, 8.0])
            cells += [f"Xn = data({seed + 10}, 32, 2, scale={scale})\n"
                      "tn = (Xn[:, :1] > 0).float()\n"
                      f"clf = init(nn.Linear(2, 1), {seed + 11}, scale=0.1)\n"
                      f"sgd = torch.optim.SGD(clf.parameters(), lr={lr})",
                      f"for step in range({steps}):\n"
                      "    p = torch.sigmoid(clf(Xn))\n"
                      "    bce = -(tn * torch.log(p) + (1 - tn) * torch.log(1 - p)).mean()\n"
                      "    sgd.zero_grad()\n"
                      "    bce.backward()\n"
                      "    sgd.step()"]
        elif scene == "accum":
            k = r.randint(2, 4)
            cells += [f"acc = init(nn.Linear({d}, 1), {seed + 12})\nxa = data({seed + 13}, 5, {d})",
                      f"for i in range({k}):\n    acc(xa).sum().backward()"]
        elif scene == "rerun":  # a cell run again (same source, a new execution count)
            again = f"feat = model(x).{r.choice(['tanh', 'sigmoid', 'exp'])}()"
            cells += [again, "kept = feat * 2", again]
            if rerun is not None:
                cells.append(cells[rerun])
            cells.append("kept.sum().backward()")  # draws the first run's nodes
        elif scene == "attn":  # to_q is never called: no box of it, ever
            cells += [ATTN, f"att = init(Attn(4), {seed + 16}, scale=0.3)\n"
                            f"xq = data({seed + 17}, 2, 3, 4)",
                      "att_loss = att(xq).pow(2).mean()\natt_loss.backward()"]
        elif scene == "bcast":  # a loss whose target broadcasts, or the same fixed
            loss = r.choice(["nn.MSELoss()", "F.mse_loss", "nn.L1Loss()", "F.l1_loss",
                             "F.smooth_l1_loss", "nn.HuberLoss()"])
            target = r.choice(["yb", "yb", "yb.unsqueeze(1)"])
            steps = r.choice([1, 1, 3, 12])
            cells += [f"reg = init(nn.Linear({d}, 1), {seed + 18})\nxb = data({seed + 19}, 8, {d})\n"
                      f"yb = data({seed + 20}, 8)\ncrit = {loss}"]
            body = f"reg.zero_grad()\nbl = crit(reg(xb), {target})\nbl.backward()"
            cells.append(body if steps == 1 else f"for step in range({steps}):\n    "
                         + body.replace("\n", "\n    "))
            if r.random() < 0.5:  # the same cell again (a warning Python shows once)
                cells.append(cells[-1])
        elif scene == "modes":  # train / eval: under no_grad, and trained in eval mode
            cells.append(f"bn = init(nn.Sequential(nn.Linear({d}, 4), nn.BatchNorm1d(4), "
                         f"nn.ReLU(), nn.Linear(4, 1)), {seed + 21})\n"
                         f"xv = data({seed + 22}, 6, {d})")
            for _ in range(r.randint(2, 3)):
                cells.append(r.choice([
                    "with torch.no_grad():\n    val = bn(xv)",  # train mode: a note
                    "bn.eval()\nwith torch.no_grad():\n    val = bn(xv)",
                    "bn.train()\nbn(xv).pow(2).mean().backward()",
                    "bn.eval()\nfor step in range(3):\n    bn(xv).pow(2).mean().backward()",
                    "bn.eval()\nval = bn(xv).sum()\nmodel(x).pow(2).sum().backward()\n"
                    "bn.train()"]))
        elif scene == "accum2":  # gradients summed across cells, zero_grad in place or not
            cells.append(f"acc2 = init(nn.Linear({d}, 2), {seed + 23})\n"
                         f"xa2 = data({seed + 24}, 5, {d})\n"
                         "opt2 = torch.optim.SGD(acc2.parameters(), lr=0.01)")
            for _ in range(r.randint(2, 4)):
                cells.append(r.choice([
                    "acc2(xa2).pow(2).sum().backward()",
                    "acc2(xa2).pow(2).sum().backward()\nopt2.step()",
                    "opt2.zero_grad()\nacc2(xa2).pow(2).sum().backward()",
                    f"for step in range({r.randint(2, 8)}):\n"
                    "    acc2(xa2).pow(2).sum().backward()\n    opt2.step()",
                    f"for step in range({r.randint(2, 8)}):\n"
                    "    opt2.zero_grad(set_to_none=False)\n"
                    "    acc2(xa2).pow(2).sum().backward()\n    opt2.step()",
                    # accumulation meant: a step and zero_grad every k backward calls
                    f"for i in range({r.choice([8, 9, 12])}):\n"
                    "    acc2(xa2).pow(2).sum().backward()\n"
                    f"    if i % {r.choice([3, 4])} == 0:\n        opt2.step()\n"
                    f"        opt2.zero_grad({r.choice(['', 'set_to_none=False'])})"]))
        elif scene == "fails":  # a backward that stops with an error half-way (in-place ReLU
            # on what Sigmoid saved): the last layer has its gradient, the first none
            cells += [f"bug = init(nn.Sequential(nn.Linear({d}, 4), nn.Sigmoid(), "
                      f"nn.ReLU(inplace=True), nn.Linear(4, 1)), {seed + 25})\n"
                      f"xf = data({seed + 26}, 6, {d})",
                      "bug(xf).pow(2).mean().backward()",
                      "bug[2] = nn.ReLU()\nbug(xf).pow(2).mean().backward()"]
        elif scene == "eval":
            cells += [f"drop = init(nn.Sequential(nn.Linear({d}, 4), nn.Dropout(0.5), "
                      f"nn.Linear(4, 1)), {seed + 14})\nxe = data({seed + 15}, 3, {d})",
                      "drop.eval()\nev = drop(xe).sum()\nev.backward()"]
    return cells


# --- the answers, from PyTorch -------------------------------------------------------------------


def _user_where(prefix="<cell"):
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(prefix):
            return int(name[len(prefix):-1]), f.f_lineno
        f = f.f_back
    return None, None


def truth(cells: list, first_count: int = 2) -> list:
    """Run ``cells`` in PyTorch (cell ``i`` numbered ``first_count + i``); per cell a dict of
    the answers (module docstring)."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch.nn.modules import module as tm
    from torch.overrides import TorchFunctionMode

    ns: dict = {}
    exec(compile(TORCH_PRELUDE, "<cell1>", "exec"), ns)  # noqa: S102 - our own program
    stack: list = []  # [(module, root)] of the module calls running
    made: list = []  # [(node name, cell, line, [modules innermost first], root)] this cell
    state = {"backward": 0, "losses": [], "nan": None, "nan_loss_step": None}
    leaves_seen: dict = {}  # id(param) -> (param, last step seen finite)
    summed: dict = {}  # id(param) -> backward calls summed into its .grad since None / zeros
    most: dict = {}  # id(param) -> the most of summed this cell
    early: set = set()  # ids of the parameters with 2 or more summed at backward call 1 or 2
    reached: set = set()  # ids of the parameters a backward of this cell summed into
    last_sq: dict = {}  # id(param) -> squared norm of the gradient last summed in
    step_sq: list = []  # per backward call: {id(param): squared norm summed in}
    modes: dict = {}  # (kind, id(module)) -> (module, cell, line)
    eval_calls: dict = {}  # id(module) -> (module, cell, line): called in eval mode, grad on
    broadcasts: list = []  # the session's broadcasting loss calls
    losses_f = {F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss}

    def finite(t):
        return bool(torch.isfinite(t).all()) if t.is_floating_point() else True

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in losses_f:
                a = args[0] if args else (kwargs or {}).get("input")
                b = args[1] if len(args) > 1 else (kwargs or {}).get("target")
                if tuple(a.shape) != tuple(b.shape):
                    broadcasts.append((*_user_where(), list(b.shape), list(a.shape)))
            out = func(*args, **(kwargs or {}))
            outs = out if isinstance(out, (tuple, list)) else (out,)
            ins = [a for a in list(args) + list((kwargs or {}).values())
                   if isinstance(a, torch.Tensor)]
            for a in list(args):
                if isinstance(a, (list, tuple)):
                    ins += [b for b in a if isinstance(b, torch.Tensor)]
            for o in outs:
                if not isinstance(o, torch.Tensor) or o.grad_fn is None:
                    continue
                cell, line = _user_where()
                mods = [m for m, _ in reversed(stack)]
                todo = [o.grad_fn]  # every node this call made (linear: addmm and t)
                while todo:
                    fn = todo.pop()
                    if fn is None or fn in seen_nodes or type(fn).__name__ == "AccumulateGrad":
                        continue
                    seen_nodes.add(fn)
                    made.append((fn.name().rsplit("::", 1)[-1], cell, line, mods,
                                 stack[0][0] if stack else None))
                    todo += [f for f, _ in fn.next_functions]
                if state["nan"] is None and not finite(o.detach()) and all(
                        finite(a.detach()) for a in ins):
                    state["nan"] = (o.grad_fn.name().rsplit("::", 1)[-1], cell, line,
                                    state["backward"] + 1)
            return out

    def pre(module, args):
        if not stack and torch.is_grad_enabled():
            called.add(id(module))
        if not stack and any(type(m).__name__ in MODE_LAYERS for m in module.modules()):
            where = _user_where()
            if torch.is_grad_enabled() and not module.training:
                eval_calls[id(module)] = (module, *where)
            elif not torch.is_grad_enabled() and module.training:
                modes.setdefault(("train-nograd", id(module)), (module, *where))
        stack.append((module, stack[0][0] if stack else module))

    def post(module, args, out):
        stack.pop()

    real_backward = torch.Tensor.backward

    def backward(self, *a, **k):
        if state.get("inside"):  # (the mode hands Tensor.backward back to us once more)
            return real_backward(self, *a, **k)
        state["inside"] = True
        try:
            return _backward(self, *a, **k)
        finally:
            state["inside"] = False

    def _backward(self, *a, **k):
        state["backward"] += 1
        n = state["backward"]
        if self.numel() == 1:
            v = float(self.detach())
            state["losses"].append(v)
            if not math.isfinite(v) and state["nan_loss_step"] is None:
                state["nan_loss_step"] = n
        leaves = _leaves(self.grad_fn)
        sq: dict = {}
        hooks = []
        for p in leaves:
            if finite(p.detach()):
                leaves_seen[id(p)] = (p, n)
            elif id(p) not in nan_since and leaves_seen.get(id(p), (None, -1))[1] == n - 1:
                nan_since[id(p)] = (p, n - 1)
            hooks.append(p.register_hook(lambda g, p=p: _summed(p, g, sq)))
        ids = {id(p) for p in leaves}
        for mid, (m, cell, line) in list(eval_calls.items()):
            if any(id(q) in ids for q in m.parameters()):
                modes.setdefault(("eval-train", mid), (m, cell, line))
                del eval_calls[mid]
        try:
            return real_backward(self, *a, **k)
        except Exception:
            state["raised"] = True
            raise
        finally:
            for h in hooks:
                h.remove()
            step_sq.append(sq)

    def _summed(p, g, sq):
        """A gradient about to be summed into ``p.grad`` (a plain tensor hook: it runs only
        for the leaves a backward really reaches, before the sum)."""
        old = p.grad
        zero = old is None or not bool(old.detach().ne(0).any())
        summed[id(p)] = 1 if zero else summed.get(id(p), 0) + 1
        most[id(p)] = max(most.get(id(p), 0), summed[id(p)])
        reached.add(id(p))
        if summed[id(p)] >= 2 and state["backward"] <= 2:
            early.add(id(p))
        gd = g.detach().double()
        sq[id(p)] = last_sq[id(p)] = float((gd * gd).sum())

    nan_since: dict = {}
    seen_nodes: set = set()  # the graph nodes recorded (kept: their ids stay theirs)
    called: set = set()  # ids of the modules the user called with grad on, this cell
    h1 = tm.register_module_forward_pre_hook(pre)
    h2 = tm.register_module_forward_hook(post)
    torch.Tensor.backward = backward
    out = []
    try:
        for i, src in enumerate(cells):
            count = first_count + i
            made.clear()
            state.update(backward=0, losses=[], nan=None, nan_loss_step=None, raised=False)
            leaves_seen.clear()
            nan_since.clear()
            called.clear()
            most.clear()
            early.clear()
            reached.clear()
            last_sq.clear()
            step_sq.clear()
            modes.clear()
            eval_calls.clear()
            try:
                with Record(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # (torch's broadcasting warning: recorded)
                    exec(compile(src, f"<cell{count}>", "exec"), ns)  # noqa: S102
            except Exception:  # noqa: BLE001 - a cell that raises (as in the kernel): go on
                pass
            n = state["backward"]
            for pid, (p, k) in leaves_seen.items():  # the update after the last backward
                if k == n and pid not in nan_since and not finite(p.detach()):
                    nan_since[pid] = (p, n)
            mods = _paths(ns)
            nodes: dict = {}
            classes: dict = {}
            for name, cell, line, chain, root in made:
                path = _path_of(chain[0], root, mods) if chain else None
                nodes.setdefault((name, cell, line), set()).add(path)
                for m in chain:
                    p = _path_of(m, root, mods)
                    if p is not None:
                        classes[p] = type(m).__name__
            pnames: dict = {}
            for name, m in _models(ns):
                for pn, p in m.named_parameters():
                    pnames.setdefault(id(p), f"{name}.{pn}")
            no_grad = {}
            for name, m in _models(ns):
                if n and id(m) in called:
                    no_grad[name] = sorted(f"{name}.{pn}" for pn, p in m.named_parameters()
                                           if p.requires_grad and id(p) not in reached)
            out.append({"count": count, "nodes": nodes, "classes": classes, "backward": n,
                        "losses": list(state["losses"]), "nan": state["nan"],
                        "nan_loss_step": state["nan_loss_step"],
                        "nan_params": {pnames.get(pid, "?"): k for pid, (p, k) in
                                       nan_since.items()},
                        "no_grad": no_grad,
                        "accum": {pnames[k]: v for k, v in most.items()
                                  if v >= 2 and k in pnames},
                        "accum_early": sorted(pnames[k] for k in early if k in pnames),
                        "grad_norm": {pnames[k]: math.sqrt(v) for k, v in last_sq.items()
                                      if k in pnames},
                        "step_sq": [{pnames[k]: v for k, v in d.items() if k in pnames}
                                    for d in step_sq],
                        "modes": {(kind, mods.get(mid, "?"), type(m).__name__, c, ln)
                                  for (kind, mid), (m, c, ln) in modes.items()},
                        "broadcasts": list(broadcasts), "raised": state["raised"]})
    finally:
        h1.remove()
        h2.remove()
        torch.Tensor.backward = real_backward
    del np
    return out


def _leaves(fn):
    out, seen, stack = [], set(), [fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        v = getattr(n, "variable", None)
        if v is not None:
            out.append(v)
        stack += [f for f, _ in n.next_functions]
    return out


def _models(ns):
    import torch

    return [(k, v) for k, v in ns.items()
            if isinstance(v, torch.nn.Module) and not k.startswith("_")]


def _paths(ns) -> dict:
    """``id(module) -> path``: the first namespace name holding it, then its path inside."""
    out: dict = {}
    for name, m in _models(ns):
        for sub, s in m.named_modules():
            out.setdefault(id(s), f"{name}.{sub}" if sub else name)
    return out


def _path_of(m, root, mods):
    top = mods.get(id(root)) if root is not None else None
    if top is not None:
        for sub, s in root.named_modules():
            if s is m:
                return f"{top}.{sub}" if sub else top
    return mods.get(id(m))
