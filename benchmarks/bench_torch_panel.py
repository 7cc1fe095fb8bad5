"""What the panel costs a real PyTorch session: one process, one in-process IPython shell.

    python benchmarks/bench_torch_panel.py [--repeats 7] [--cells 500] [--json]

Side by side (AB BA ..., so the shared machine's drift hits both), ratios reported:

- ``graph cell``: a cell that makes a ~100-node torch graph, ``run_cell`` with the extension
  loaded minus without (CPU ms): the panel as static HTML laid out by pygraphviz here, and as
  the live widget when the browser lays out (what a JupyterLab session does after its first
  panel).
- ``gpt step``: a GPT-style training step (2 layers, d=32, T=16, AdamW) timed step by step
  inside a cell of 20 (CPU time: the machine is shared), with the extension (record=on), with
  ``record=off``, and without the extension (unloaded); the mean step and its ratio to without,
  and apart: the steps after the first two (the *lean* steps, see ``ModelTracker``) and the
  milliseconds the two watched steps add to the cell.
- ``session``: ``--cells`` cells each making a small graph, without then with the extension:
  the kernel's resident memory growth (MB) of each.
- ``losses``: the losses of a 100-step loop with and without the extension, bit for bit.
"""

import argparse
import json
import statistics
import time

import torch

torch.set_num_threads(1)  # a shared 2-core machine: torch's two threads measure the machine

SETUP = '''
import time, math, json
import torch
from torch import nn
torch.set_num_threads(1)

class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // self.h)
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        y = att.softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))

class GPT(nn.Module):
    def __init__(self, vocab=64, d=32, T=16, layers=2, h=4):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.Sequential(*[Block(d, h) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.ln(self.blocks(x)))

def make_gpt(seed=0):
    torch.manual_seed(seed)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, 64, (4, 17))
    def step():
        opt.zero_grad()
        logits = model(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 64), data[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()
    return step

step = make_gpt()
for _ in range(3):
    step()
'''

GRAPH_CELL = ("g = torch.randn(16, requires_grad=True)\nws = torch.randn(48, 16)\nh = g\n"
              "for i in range(48):\n    h = (h * ws[i]).tanh()\nloss_g = h.sum()")
STEP_CELL = ("_ts = []\nfor _ in range({k}):\n    _t0 = time.process_time()\n    step()\n"
             "    _ts.append(time.process_time() - _t0)\nSTEP_TIMES.append(_ts)")
WATCHED = 2  # the first steps of a cell the model panel watches in full (model_hooks)


def shell():
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_cell(SETUP)
    ip.run_cell("STEP_TIMES = []")
    return ip


def run(ip, code):
    r = ip.run_cell(code, store_history=True)
    if r.error_in_exec is not None:
        raise r.error_in_exec
    return r


def load(ip, on: bool, record: bool = True):
    from nbgrad.notebook import extension

    loaded = extension.get_extension(ip) is not None
    if on and not loaded:
        run(ip, "%load_ext nbgrad")
        run(ip, "%nbgrad set widget=off")
    if not on and loaded:
        run(ip, "%unload_ext nbgrad")
    if on:
        run(ip, f"%nbgrad set record={'on' if record else 'off'}")


def quiet(fn):
    from IPython.utils.capture import capture_output

    with capture_output():
        return fn()


def graph_cell(ip, repeats):
    """CPU ms that the extension adds to a cell making a ~100-node graph (median of the
    differences of interleaved pairs): the whole panel as a static copy laid out here
    (pygraphviz), and as the live widget once the browser lays out (the kernel sends DOT)."""
    from nbgrad.notebook import adapter, extension

    out = {}
    for browser in (False, True):
        diffs, base = [], []
        for i in range(repeats):
            times = {}
            for on in ((True, False) if i % 2 else (False, True)):
                load(ip, on)
                if on and browser:
                    ext = extension.get_extension(ip)
                    ext.widget, ext.frontend_renders = True, True
                    extension._has_comm = lambda _ip: True  # (a kernel's comm, in-process)
                t0 = time.process_time()
                run(ip, GRAPH_CELL)
                times[on] = time.process_time() - t0
            diffs.append(times[True] - times[False])
            base.append(times[False])
        out["browser" if browser else "static"] = 1e3 * statistics.median(diffs)
        out["cell_ms_without"] = 1e3 * statistics.median(base)
    load(ip, False)
    out["nodes"] = _count_nodes(ip.user_ns["loss_g"].grad_fn, adapter)
    return out


def _count_nodes(fn, adapter):
    seen, stack = set(), [fn]
    while stack:
        n = stack.pop()
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(adapter.next_nodes(n))
    return len(seen)


def gpt_step(ip, repeats, k=20):
    """Time per GPT step inside a cell of ``k`` steps: without, with record=on, with
    record=off. ``step_ms`` / ``ratio_*``: the mean step of the cell (its first, watched steps
    included); ``steady_*``: the steps after the watched ones (lean steps: model_hooks);
    ``watched_extra_ms``: what the watched steps add to the cell."""
    modes = [("without", False, True), ("record=on", True, True), ("record=off", True, False)]
    out = {m: [] for m, _, _ in modes}
    for i in range(repeats):
        order = modes if i % 2 == 0 else modes[::-1]
        for name, on, record in order:
            load(ip, on, record)
            run(ip, STEP_CELL.format(k=k))
            out[name].append(ip.user_ns["STEP_TIMES"][-1])
    load(ip, False)
    med = {m: statistics.median(statistics.fmean(ts) for ts in v) for m, v in out.items()}
    steady = {m: statistics.median(statistics.fmean(ts[WATCHED:]) for ts in v)
              for m, v in out.items()}
    first = {m: statistics.median(sum(ts[:WATCHED]) for ts in v) for m, v in out.items()}
    return {"step_ms": {m: 1e3 * v for m, v in med.items()},
            "steady_ms": {m: 1e3 * v for m, v in steady.items()},
            "watched_extra_ms": {m: 1e3 * (first[m] - WATCHED * steady["without"])
                                 - 1e3 * (first["without"] - WATCHED * steady["without"])
                                 for m in ("record=on", "record=off")},
            "steps_per_cell": k,
            "ratio_record_on": med["record=on"] / med["without"],
            "ratio_record_off": med["record=off"] / med["without"],
            "steady_record_on": steady["record=on"] / steady["without"],
            "steady_record_off": steady["record=off"] / steady["without"],
            # the median of each round's own ratio (its cells side by side: the machine's
            # drift between rounds cancels), beside the ratio of the medians above
            "paired_record_on": _paired(out["record=on"], out["without"]),
            "paired_record_off": _paired(out["record=off"], out["without"])}


def _paired(cells, without) -> float:
    return statistics.median(statistics.fmean(a) / statistics.fmean(b)
                             for a, b in zip(cells, without))


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def session(ip, cells):
    """Resident memory growth over ``cells`` cells, without then with the extension."""
    import gc

    out = {}
    for on in (False, True):
        load(ip, on)
        run(ip, "import gc; gc.collect()")
        gc.collect()
        before = _rss_mb()
        for i in range(cells):
            run(ip, f"s{i % 50} = torch.randn(8, requires_grad=True)\n"
                    f"t = (s{i % 50} * {i}).tanh().sum()\nt.backward()")
        gc.collect()
        out["with" if on else "without"] = _rss_mb() - before
    load(ip, False)
    out["extra_mb"] = out["with"] - out["without"]
    return out


LOOP = ("step100 = make_gpt(1)\nLOSSES_{tag} = [step100() for _ in range(100)]")


def losses(ip):
    load(ip, False)
    run(ip, LOOP.format(tag="A"))
    load(ip, True)
    run(ip, LOOP.format(tag="B"))
    load(ip, False)
    a, b = ip.user_ns["LOSSES_A"], ip.user_ns["LOSSES_B"]
    return {"steps": len(a), "identical": [x.hex() for x in a] == [x.hex() for x in b]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--cells", type=int, default=500)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    ip = shell()
    res = quiet(lambda: {"torch": torch.__version__,
                         "graph_cell": graph_cell(ip, a.repeats),
                         "gpt_step": gpt_step(ip, a.repeats),
                         "session": session(ip, a.cells),
                         "losses": losses(ip)})
    if a.json:
        print(json.dumps(res, indent=1))
        return res
    g, s, m, lo = res["graph_cell"], res["gpt_step"], res["session"], res["losses"]
    print(f"torch {res['torch']}")
    print(f"graph cell ({g['nodes']} nodes): {g['cell_ms_without']:.1f} ms without; the panel "
          f"adds {g['static']:.1f} ms laid out here, {g['browser']:.1f} ms when the browser "
          "lays out (budget 10 ms)")
    print(f"gpt step (mean of a {s['steps_per_cell']}-step cell): "
          + ", ".join(f"{k} {v:.2f} ms" for k, v in s["step_ms"].items())
          + f"; ratio record=on {s['ratio_record_on']:.3f} (budget 1.25), "
          f"record=off {s['ratio_record_off']:.3f} (budget 1.03); median of each round's "
          f"ratio: {s['paired_record_on']:.3f} / {s['paired_record_off']:.3f}")
    print(f"gpt step after the {WATCHED} watched steps (lean): "
          + ", ".join(f"{k} {v:.2f} ms" for k, v in s["steady_ms"].items())
          + f"; ratio record=on {s['steady_record_on']:.3f}, "
          f"record=off {s['steady_record_off']:.3f}; the watched steps add "
          + ", ".join(f"{k} {v:.1f} ms" for k, v in s["watched_extra_ms"].items())
          + " per cell")
    print(f"session of {a.cells} cells: +{m['without']:.1f} MB without, +{m['with']:.1f} MB "
          f"with: {m['extra_mb']:+.1f} MB (budget 20)")
    print(f"losses of {lo['steps']} steps identical with and without: {lo['identical']}")
    return res


if __name__ == "__main__":
    main()
