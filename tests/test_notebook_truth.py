"""Every claim of the model panel against ground truth, on generated model-debugging notebooks.

``_truth_programs.program(seed)`` writes a session in PyTorch's API; it runs in a real kernel
under ``import nbgrad as torch`` and ``%load_ext nbgrad``, and, for the answers, in PyTorch
itself (``_truth_programs.truth``: plain hooks, nothing of the panel's code). A probe written here
records what each panel claims (the snapshot it draws: each node's name and place, the module
cluster it sits in, the notes, the step count, the header) and, with a plain wrapper of
``Tensor.backward``, the value every backward call started from in nbgrad (where nbgrad and
PyTorch compute differently, a NaN step may differ: such a notebook is counted apart).

Checked per panel: the innermost module cluster of every drawn node is the module (path from the
module the user called) whose call made a node of that name at that cell and line, and the cell
number is the one of the run that made it; every cluster's class; the training steps (the header
and the report) are the cell's backward calls; the NaN note names the step of the first
non-finite loss, and the op, cell, line and step of the first op that made a non-finite value;
every parameter said to hold NaN/Inf, since the step that wrote it; every "got no gradient"
name. ``NBGRAD_TRUTH_PROGRAMS=N`` runs N generated notebooks (default 3 in CI); the counts of
notebooks run and agreeing are printed and written to ``$NBGRAD_TRUTH_REPORT`` when set.
"""

import json
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
_shell, _ext, _PATH = get_ipython(), _get_ext(), {path!r}
_cell_losses, _cell_panels = [], []

def _probe_show(snap, _orig=_ext.show):
    from nbgrad.notebook import render as _render
    rep = snap.model
    rec = {{"summary": _render.summary_text(snap),
           "nodes": {{k: [n.name, n.where] for k, n in snap.nodes.items() if not n.module}},
           "clusters": {{p: [c["title"], c["keys"]] for p, c in (rep.clusters if rep else {{}}).items()}},
           "notes": list(rep.notes) if rep else [], "steps": rep.steps if rep else None,
           "truncated": snap.truncated}}
    _cell_panels.append(rec)
    return _orig(snap)

_ext.show = _probe_show
_real_backward = torch.Tensor.backward

def _probe_backward(self, *a, **k):
    if self.numel() == 1:
        _cell_losses.append(float(self.detach()))
    return _real_backward(self, *a, **k)

torch.Tensor.backward = _probe_backward

def _probe_cell(result):
    with open(_PATH, "a") as f:
        for rec in _cell_panels:
            f.write(_json.dumps({{**rec, "count": result.execution_count}}) + "\\n")
        f.write(_json.dumps({{"count": result.execution_count, "losses": list(_cell_losses)}})
                + "\\n")
    _cell_losses.clear()
    _cell_panels.clear()

_shell.events.register("post_run_cell", _probe_cell)'''

_NAN = re.compile(r"the loss is (NaN|Inf) from step (\d+) of (\d+) on(?:; the first non-finite "
                  r"value was made by (\w+) at cell \[(\d+)\] line (\d+).* in step (\d+))?")
_HOLDS = re.compile(r"^(.+?) holds? (NaN|Inf) (?:since step (\d+)|already when step (\d+) ran)")
_NO_GRAD = re.compile(r"^(.+?) got no gradient: ")
_WHERE = re.compile(r"cell \[(\d+)\] line (\d+)")


def _same_numbers(a, b) -> bool:
    """nbgrad's and PyTorch's backward values agree on which are finite (and roughly so)."""
    import math

    if len(a) != len(b):
        return False
    return all(math.isfinite(x) == math.isfinite(y) and (not math.isfinite(x) or
               abs(x - y) <= 1e-3 * (1 + abs(y))) for x, y in zip(a, b))


def check(seed, tmp_path) -> dict:
    """Run program ``seed`` both ways; ``{"claims": n, "wrong": [...], "engines_differ": ...}``."""
    cells = T.program(seed)
    probe = tmp_path / f"probe{seed}.jsonl"
    head = (T.NB_PRELUDE + "\n%load_ext nbgrad\n%nbgrad set live=100\n"
            + PROBE.format(path=str(probe)))
    execute([head] + cells, tmp_path)
    truth = {t["count"]: t for t in T.truth(cells, first_count=2)}
    panels, losses = [], {}
    for line in probe.read_text().splitlines():
        rec = json.loads(line)
        if "losses" in rec:
            losses[rec["count"]] = rec["losses"]
        else:
            panels.append(rec)
    differ = [c for c, t in truth.items() if not _same_numbers(losses.get(c, []), t["losses"])]
    classes = {p: cls for t in truth.values() for p, cls in t["classes"].items()}
    made = {}  # (node name, cell, line) -> paths, whichever cell ran it
    for t in truth.values():
        for k, paths in t["nodes"].items():
            made.setdefault(k, set()).update(paths)
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
        for key, (name, where) in rec["nodes"].items():
            m = _WHERE.fullmatch(where or "")
            if name == "AccumulateGrad" or m is None:
                continue
            made_in, line = int(m.group(1)), int(m.group(2))
            paths = made.get((name, made_in, line))
            claim(paths is not None, f"cell [{c}] {name} at {where}: PyTorch made no {name} "
                                     f"at cell [{made_in}] line {line}")
            if paths is not None:
                claim(inner.get(key) in paths, f"cell [{c}] {name} at {where} drawn in "
                                               f"{inner.get(key)!r}, made in {sorted(map(str, paths))}")
        if c in differ:
            continue
        if rec["steps"] is not None and t["backward"]:
            claim(rec["steps"] == t["backward"], f"cell [{c}] {rec['steps']} training steps, "
                                                  f"{t['backward']} backward calls")
        m = re.search(r"(\d+) training steps", rec["summary"])
        if m:
            claim(int(m.group(1)) == t["backward"], f"cell [{c}] header: {rec['summary']!r}, "
                                                     f"{t['backward']} backward calls")
        notes = rec["notes"]
        nan = [_NAN.search(n) for n in notes if _NAN.search(n)]
        if t["nan_loss_step"] is not None and rec["steps"] is not None:
            claim(len(nan) == 1, f"cell [{c}] no NaN note (loss non-finite from step "
                                 f"{t['nan_loss_step']})")
            if len(nan) == 1:
                g = nan[0].groups()
                claim(int(g[1]) == t["nan_loss_step"] and int(g[2]) == t["backward"],
                      f"cell [{c}] NaN from step {g[1]} of {g[2]}, truth {t['nan_loss_step']} "
                      f"of {t['backward']}")
                if t["nan"] is not None and t["nan"][3] == t["nan_loss_step"]:
                    said = (g[3], int(g[4]), int(g[5]), int(g[6])) if g[3] else None
                    claim(said == tuple(t["nan"]), f"cell [{c}] first non-finite op {said}, "
                                                   f"truth {tuple(t['nan'])}")
        else:
            claim(not nan, f"cell [{c}] NaN note {nan[0].group(0) if nan else ''!r} with no "
                           "non-finite loss")
        said = {}
        for n in notes:
            m = _HOLDS.match(n)
            if m:
                for name in m.group(1).split(", "):
                    said[name] = (int(m.group(3)) if m.group(3) else None,
                                  int(m.group(4)) if m.group(4) else None)
        for name, (since, seen) in said.items():
            true = t["nan_params"].get(name)
            ok = true == since if since is not None else true is None or true <= seen - 1
            claim(ok, f"cell [{c}] {name} holds NaN since {since or f'before {seen}'}, "
                      f"truth {true}")
        if rec["steps"]:
            for name in t["nan_params"]:
                claim(name in said, f"cell [{c}] {name} holds NaN (since step "
                                    f"{t['nan_params'][name]}): not said")
            no_grad = {x for n in notes if _NO_GRAD.match(n)
                       for x in _NO_GRAD.match(n).group(1).split(", ")}
            true = {x for names in t["no_grad"].values() for x in names}
            claim(no_grad == true, f"cell [{c}] no gradient: said {sorted(no_grad)}, truth "
                                   f"{sorted(true)}")
    return {"seed": seed, "claims": claims, "wrong": wrong, "engines_differ": differ,
            "panels": len(panels)}


def test_the_panel_tells_the_truth(tmp_path):
    results = [check(seed, tmp_path) for seed in range(FIRST_SEED, FIRST_SEED + N_PROGRAMS)]
    agree = [r for r in results if not r["wrong"]]
    summary = (f"{len(results)} generated notebooks run, {len(agree)} agree with ground truth "
               f"({sum(r['claims'] for r in results)} claims in "
               f"{sum(r['panels'] for r in results)} panels checked; cells where nbgrad and "
               f"PyTorch computed differently, skipped for numbers: "
               f"{sum(len(r['engines_differ']) for r in results)})")
    print(summary)
    if os.environ.get("NBGRAD_TRUTH_REPORT"):
        with open(os.environ["NBGRAD_TRUTH_REPORT"], "w") as f:
            json.dump({"summary": summary, "results": results}, f, indent=1)
    wrong = [w for r in results for w in r["wrong"]]
    assert not wrong, summary + "\n" + "\n".join(wrong[:40])
