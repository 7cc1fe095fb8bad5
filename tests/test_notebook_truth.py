"""Every claim of the model panel against ground truth, on generated model-debugging notebooks.

``_truth_programs.program(seed)`` writes a session in PyTorch's API; it runs in a real kernel
under ``import nbgrad as torch`` and ``%load_ext nbgrad``, and, for the answers, in PyTorch
itself (``_truth_programs.truth``: plain hooks, nothing of the panel's code). A probe written here
records what each panel claims (the snapshot it draws: each node's name and place, the module
cluster it sits in, the notes, the step count, the header) and, with a plain wrapper of
``Tensor.backward``, the value every backward call started from in nbgrad (where nbgrad and
PyTorch compute differently, a NaN step may differ: such a notebook is counted apart).

Checked per panel: for every drawn node (the cell that was running when it was made: the
engine's node counter read after each cell), PyTorch made a node of that name at that cell and
line while that cell ran (the cell number is the one of the run that made it), and its innermost
module cluster is the module (path from the module the user called) whose call made it; every
cluster's class; the training steps (the header and the report) are the cell's backward calls;
the NaN note names the step of the first
non-finite loss, and the op, cell, line and step of the first op that made a non-finite value;
every parameter said to hold NaN/Inf, since the step that wrote it; every "got no gradient"
name (no backward of the cell summed into it); every ".grad accumulated from N backward calls"
(N, or "at least N", against the calls PyTorch summed into that ``.grad`` since it was last None
or zeros, previous cells' included) and the Gradients tab's "accumulated xN", said whenever the
watched calls (1 and 2) saw it; every train / eval note (the model, its class, the kind, the
call's cell and line) and none missing; every broadcasting-target note (cell, line, both sizes)
and one for each cell that calls such a loss; the header's count of notes; the Training tab's
loss curve (one value per backward call, nbgrad's own) and total gradient norm at each sampled
step (PyTorch's, where both engines computed alike); the Gradients tab's norm of a parameter
after a cell with one backward. ``NBGRAD_TRUTH_PROGRAMS=N`` runs N generated notebooks (default 3 in CI); the counts of
notebooks run and agreeing are printed and written to ``$NBGRAD_TRUTH_REPORT`` when set.
"""

import json
import math
import os
import re

import pytest

pytest.importorskip("torch")
from test_notebook_kernel import execute  # noqa: E402

import _truth_programs as T  # noqa: E402

N_PROGRAMS = int(os.environ.get("NBGRAD_TRUTH_PROGRAMS", "3"))
FIRST_SEED = int(os.environ.get("NBGRAD_TRUTH_SEED", "0"))

PROBE = '''import json as _json
from nbgrad.notebook.extension import get_extension as _get_ext
from nbgrad.autograd.graph import activity as _activity
_shell, _ext, _PATH = get_ipython(), _get_ext(), {path!r}
_cell_losses, _cell_panels = [], []

def _probe_show(snap, _orig=_ext.show):
    from nbgrad.notebook import render as _render
    rep = snap.model
    rec = {{"summary": _render.summary_text(snap),
           "nodes": {{k: [n.name, n.where, n.seq] for k, n in snap.nodes.items() if not n.module}},
           "clusters": {{p: [c["title"], c["keys"]]
                        for p, c in (rep.clusters if rep else {{}}).items()}},
           "notes": list(rep.notes) if rep else [], "steps": rep.steps if rep else None,
           "losses": list(rep.losses) if rep else [],
           "norms": [list(rep.grad_norm_steps), list(rep.grad_norms)] if rep else [[], []],
           "params": [[r.name, r.accumulated, r.norm, r.nonfinite] for r in rep.params]
                     if rep else [],
           "truncated": snap.truncated}}
    _cell_panels.append(rec)
    return _orig(snap)

_ext.show = _probe_show
_real_backward = torch.Tensor.backward

_seen_finite, _nan_since = {{}}, {{}}

def _probe_leaves(fn):
    out, seen, stack = [], set(), [fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        v = getattr(n, "variable", None)
        if v is not None:
            out.append(v)
        stack += [f for f, _ in n.next_functions]
    return out

def _probe_backward(self, *a, **k):
    n = len(_cell_losses) + 1
    _cell_losses.append(float(self.detach()) if self.numel() == 1 else 0.0)
    for p in _probe_leaves(self.grad_fn):
        if bool(torch.isfinite(p.detach()).all()):
            _seen_finite[id(p)] = (p, n)
        elif id(p) not in _nan_since and _seen_finite.get(id(p), (None, -1))[1] == n - 1:
            _nan_since[id(p)] = (p, n - 1)
    return _real_backward(self, *a, **k)

torch.Tensor.backward = _probe_backward

def _probe_cell(result):
    n = len(_cell_losses)
    for pid, (p, k) in _seen_finite.items():
        if k == n and pid not in _nan_since and not bool(torch.isfinite(p.detach()).all()):
            _nan_since[pid] = (p, n)
    names = {{}}
    for name, m in list(_shell.user_ns.items()):
        if isinstance(m, nn.Module) and not name.startswith("_"):
            for pn, p in m.named_parameters():
                names.setdefault(id(p), f"{{name}}.{{pn}}")
    since = {{names.get(pid, "?"): k for pid, (p, k) in _nan_since.items()}}
    with open(_PATH, "a") as f:
        for rec in _cell_panels:
            f.write(_json.dumps({{**rec, "count": result.execution_count}}) + "\\n")
        f.write(_json.dumps({{"count": result.execution_count, "losses": list(_cell_losses),
                             "nan_params": since, "nodes_made": _activity()[0]}}) + "\\n")
    _cell_losses.clear()
    _cell_panels.clear()
    _seen_finite.clear()
    _nan_since.clear()

_shell.events.register("post_run_cell", _probe_cell)'''

_NAN = re.compile(r"the loss is (NaN|Inf) from step (\d+) of (\d+) on(?:; the first non-finite "
                  r"value was made by (\w+) at cell \[(\d+)\] line (\d+).* in step (\d+))?")
_HOLDS = re.compile(r"^(.+?) holds? (NaN|Inf) (?:since step (\d+)|already when step (\d+) ran)")
_NO_GRAD = re.compile(r"^(.+?) got no gradient: ")
_WHERE = re.compile(r"cell \[(\d+)\] line (\d+)")
_ACC = re.compile(r"^(.+?) accumulated from (at least )?(\d+) backward calls since zero_grad")
_MODE = re.compile(r"^(\S+) \((\w+)\) (was evaluated under no_grad in train mode|ran its forward "
                   r"in eval mode) at cell \[(\d+)\] line (\d+)")
_BCAST = re.compile(r"target broadcasts against its input at cell \[(\d+)\] line (\d+): "
                    r"\u201cUsing a target size \(\w+\.Size\(\[([\d, ]*)\]\)\) that is "
                    r"different to the input size \(\w+\.Size\(\[([\d, ]*)\]\)\)")
_NOTES = re.compile(r"(\d+) notes?: ")


def _same_numbers(a, b) -> bool:
    """nbgrad's and PyTorch's backward values agree on which are finite (and roughly so)."""
    if len(a) != len(b):
        return False
    return all(math.isfinite(x) == math.isfinite(y) and (not math.isfinite(x) or
               abs(x - y) <= 1e-4 * abs(y) + 1e-6) for x, y in zip(a, b))


def check(seed, tmp_path) -> dict:
    """Run program ``seed`` both ways; ``{"claims": n, "wrong": [...], "engines_differ": ...}``."""
    cells = T.program(seed)
    probe = tmp_path / f"probe{seed}.jsonl"
    head = (T.NB_PRELUDE + "\n%load_ext nbgrad\n%nbgrad set live=100\n"
            + PROBE.format(path=str(probe)))
    execute([head] + cells, tmp_path)
    truth = {t["count"]: t for t in T.truth(cells, first_count=2)}
    panels, losses, nb_nan, ends = [], {}, {}, []  # ends: (nodes made so far, cell) per cell
    for line in probe.read_text().splitlines():
        rec = json.loads(line)
        if "nodes_made" in rec:
            losses[rec["count"]] = rec["losses"]
            nb_nan[rec["count"]] = rec["nan_params"]
            ends.append((rec["nodes_made"], rec["count"]))
        else:
            panels.append(rec)
    differ = [c for c, t in truth.items() if not _same_numbers(losses.get(c, []), t["losses"])]
    classes = {p: cls for t in truth.values() for p, cls in t["classes"].items()}
    wrong, claims = [], 0

    def claim(ok, what):
        nonlocal claims
        claims += 1
        if not ok:
            wrong.append(f"seed {seed}: {what}")

    for rec in panels:
        c = rec["count"]
        t = truth.get(c)
        if t is None:
            continue
        inner = {}  # node key -> innermost cluster path
        for path, (title, keys) in sorted(rec["clusters"].items(), key=lambda kv: len(kv[0])):
            for k in keys:
                inner[k] = path
            m = re.fullmatch(r"(.+) \((\w+)\)", title)
            claim(m is not None and m.group(1) == path and classes.get(path) == m.group(2),
                  f"cell [{c}] cluster {title!r}: PyTorch's module there is "
                  f"{classes.get(path)!r}")
        for key, (name, where, seq) in rec["nodes"].items():
            m = _WHERE.fullmatch(where or "")
            if name == "AccumulateGrad" or m is None:
                continue
            made_in, line = int(m.group(1)), int(m.group(2))
            ran = next((cell for end, cell in ends if seq <= end), None)  # the cell running
            paths = truth.get(ran, {}).get("nodes", {}).get((name, made_in, line))
            claim(paths is not None, f"cell [{c}] {name} at {where} (made while cell [{ran}] "
                                     f"ran): PyTorch made no {name} at cell [{made_in}] line "
                                     f"{line} then")
            if paths is not None:
                claim(inner.get(key) in paths,
                      f"cell [{c}] {name} at {where} drawn in {inner.get(key)!r}, made in "
                      f"{sorted(map(str, paths))}")
        # numbers: what nbgrad computed (the probe's plain wrapper of backward); the op and
        # line of the first non-finite value: PyTorch's, and its step where both computed alike
        vals = losses.get(c, [])
        n_back = len(vals)
        nan_step = next((i for i, v in enumerate(vals, 1) if not math.isfinite(v)), None)
        if rec["steps"] is not None and n_back:
            claim(rec["steps"] == n_back, f"cell [{c}] {rec['steps']} training steps, "
                                          f"{n_back} backward calls")
        m = re.search(r"(\d+) training steps", rec["summary"])
        if m:
            claim(int(m.group(1)) == n_back, f"cell [{c}] header: {rec['summary']!r}, "
                                              f"{n_back} backward calls")
        notes = rec["notes"]
        nan = [_NAN.search(n) for n in notes if _NAN.search(n)]
        if nan_step is not None and rec["steps"] is not None:
            claim(len(nan) == 1, f"cell [{c}] no NaN note (loss non-finite from step {nan_step})")
            if len(nan) == 1:
                g = nan[0].groups()
                claim(int(g[1]) == nan_step and int(g[2]) == n_back,
                      f"cell [{c}] NaN from step {g[1]} of {g[2]}, truth {nan_step} of {n_back}")
                if t["nan"] is not None:
                    said = (g[3], int(g[4]), int(g[5])) if g[3] else None
                    claim(said == tuple(t["nan"][:3]), f"cell [{c}] first non-finite op {said}, "
                                                       f"truth {tuple(t['nan'][:3])}")
                    if c not in differ and g[3]:
                        claim(int(g[6]) == t["nan"][3], f"cell [{c}] first non-finite op in "
                                                        f"step {g[6]}, truth {t['nan'][3]}")
        else:
            claim(not nan, f"cell [{c}] NaN note {nan[0].group(0) if nan else ''!r} with no "
                           "non-finite loss")
        true_nan = nb_nan.get(c, {})
        said = {}
        for n in notes:
            m = _HOLDS.match(n)
            if m:
                for name in m.group(1).split(", "):
                    said[name] = (int(m.group(3)) if m.group(3) else None,
                                  int(m.group(4)) if m.group(4) else None)
        for name, (since, seen) in said.items():
            true = true_nan.get(name)
            ok = true == since if since is not None else true is None or true <= seen - 1
            claim(ok, f"cell [{c}] {name} holds NaN since {since or f'before {seen}'}, "
                      f"truth {true}")
        if rec["steps"]:
            for name in true_nan:
                claim(name in said, f"cell [{c}] {name} holds NaN (since step "
                                    f"{true_nan[name]}): not said")
            no_grad = {x for n in notes if _NO_GRAD.match(n)
                       for x in _NO_GRAD.match(n).group(1).split(", ")}
            true = {x for names in t["no_grad"].values() for x in names}
            claim(no_grad == true, f"cell [{c}] no gradient: said {sorted(no_grad)}, truth "
                                   f"{sorted(true)}")
            if t["raised"]:  # the backward stopped: what it did not reach did reach the loss
                for n in notes:
                    claim("never reached the loss" not in n, f"cell [{c}] {n!r}, but the "
                                                             "backward raised")
        prev = truth.get(c - 1, {}).get("broadcasts", [])
        _more_claims(rec, t, vals, c in differ, t["broadcasts"][len(prev):], claim)
    return {"seed": seed, "claims": claims, "wrong": wrong, "engines_differ": differ,
            "panels": len(panels)}


def _close(a, b, rel=1e-3) -> bool:
    if a is None or b is None:
        return a is b
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.isfinite(a) == math.isfinite(b)
    return abs(a - b) <= rel * (1 + abs(b))


def _more_claims(rec, t, vals, differ, new_broadcasts, claim) -> None:
    """The accumulation, train / eval and broadcast notes, the Gradients tab's accumulation and
    norms, the loss curve, the sampled gradient norms and the notes' count of one panel."""
    c, notes, n_back = rec["count"], rec["notes"], len(vals)
    m = _NOTES.search(rec["summary"])
    if m:
        claim(int(m.group(1)) == len(notes), f"cell [{c}] header: {m.group(0)!r}, "
                                              f"{len(notes)} notes")
    # gradients summed into .grad since it was last reset
    least = {}
    for n in notes:
        m = _ACC.match(n)
        if not m:
            continue
        for name in m.group(1).split(", "):
            name = name.removesuffix(".grad")
            true, k = t["accum"].get(name, 1), int(m.group(3))
            least[name] = bool(m.group(2))
            claim(true >= k if m.group(2) else true == k,
                  f"cell [{c}] {name}.grad accumulated from {m.group(2) or ''}{k} backward "
                  f"calls, truth {true}")
    if rec["steps"]:  # (said whenever seen in the backward calls the panel watches, 1 and 2)
        for name in t["accum_early"]:
            claim(name in least, f"cell [{c}] {name}.grad accumulated from "
                                 f"{t['accum'][name]} backward calls: not said")
    for name, acc, norm, nonfinite in rec["params"]:
        true = t["accum"].get(name, 1)
        if not nonfinite and acc >= 2:  # the row says "accumulated xN"
            claim(true >= acc if least.get(name) else true == acc,
                  f"cell [{c}] Gradients tab: {name} accumulated x{acc}, truth {true}")
        elif not nonfinite and name in t["accum_early"]:
            claim(False, f"cell [{c}] Gradients tab: {name} accumulated x{true}: not shown")
        if n_back == 1 and not differ and name in t["grad_norm"] and norm is not None:
            claim(_close(norm, t["grad_norm"][name]), f"cell [{c}] Gradients tab: {name} grad "
                                                      f"norm {norm}, truth {t['grad_norm'][name]}")
    # train / eval mode
    said = set()
    for n in notes:
        m = _MODE.match(n)
        if m:
            kind = "train-nograd" if m.group(3).startswith("was") else "eval-train"
            said.add((kind, m.group(1), m.group(2), int(m.group(4)), int(m.group(5))))
    for x in said - t["modes"]:
        claim(False, f"cell [{c}] mode note {x}: truth {sorted(t['modes'])}")
    for x in t["modes"]:
        claim(x in said, f"cell [{c}] mode {x}: not said (said {sorted(said)})")
    # loss targets that broadcast
    told = [(int(m.group(1)), int(m.group(2)), [int(v) for v in m.group(3).split(", ") if v],
             [int(v) for v in m.group(4).split(", ") if v])
            for m in (_BCAST.search(n) for n in notes) if m]
    for x in told:
        claim(list(x) in [list(b) for b in t["broadcasts"]],
              f"cell [{c}] broadcast note {x}: truth {t['broadcasts']}")
    if new_broadcasts:
        claim(any(list(x)[:2] == list(b)[:2] for x in told for b in new_broadcasts),
              f"cell [{c}] broadcasting loss at {new_broadcasts[0][:2]}: not said ({told})")
    # the loss curve and the gradient norms sampled (the Training tab)
    if rec["losses"] and n_back and rec["steps"]:
        claim(len(rec["losses"]) == n_back and all(_close(a, b, 1e-6) for a, b in
                                                   zip(rec["losses"], vals)),
              f"cell [{c}] loss curve {rec['losses'][:5]}..., backward from {vals[:5]}...")
    steps, norms = rec["norms"]
    if steps and rec["steps"]:
        claim(steps == sorted(set(steps)) and 1 <= steps[0] and steps[-1] <= n_back,
              f"cell [{c}] gradient norm sampled at steps {steps} of {n_back}")
        if not differ:
            for k, v in zip(steps, norms):
                if 1 <= k <= len(t["step_sq"]):
                    true = math.sqrt(sum(t["step_sq"][k - 1].values()))
                    claim(_close(v, true), f"cell [{c}] total gradient norm {v} at step {k}, "
                                           f"truth {true}")


def test_the_panel_tells_the_truth(tmp_path):
    results = [check(seed, tmp_path) for seed in range(FIRST_SEED, FIRST_SEED + N_PROGRAMS)]
    agree = [r for r in results if not r["wrong"]]
    summary = (f"{len(results)} generated notebooks run, {len(agree)} agree with ground truth "
               f"({sum(r['claims'] for r in results)} claims in "
               f"{sum(r['panels'] for r in results)} panels checked; cells whose backward values "
               f"differ between nbgrad and PyTorch, where only nbgrad's own numbers are used: "
               f"{sum(len(r['engines_differ']) for r in results)})")
    print(summary)
    if os.environ.get("NBGRAD_TRUTH_REPORT"):
        with open(os.environ["NBGRAD_TRUTH_REPORT"], "w") as f:
            json.dump({"summary": summary, "results": results}, f, indent=1)
    wrong = [w for r in results for w in r["wrong"]]
    assert not wrong, summary + "\n" + "\n".join(wrong[:40])
