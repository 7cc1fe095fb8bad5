"""The comparison of a torch run and an nbgrad run of each program (run.py compare).

How a program ends: a script by its exit status and, when it fails, the last line of its
traceback (exception type and text); a notebook (run by nbrun.py) by whether it reached its end
and which cells failed with which exception type. The two end the same when those are equal.

Printed numbers: the outputs are normalised (warnings, tracebacks, object addresses and tqdm bars
dropped; `nbgrad.` read as `torch.`), then compared line by line: `identical`, `rounding` (the
same lines with numbers within a relative 1e-4; the largest difference and the significant digit
where it starts), or `different` (the first line that differs, both sides). Only a seeded program's
numbers are expected to agree: unseeded programs are marked so.
"""
from __future__ import annotations

import re
from pathlib import Path

NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
CELL_ERR = re.compile(r"^CELL (\d+) ERROR (\w+): ?(.*)$")
DROP = ("Warning", "warnings.warn", " at 0x", "Traceback (most recent", '  File "', "it/s]",
        "s/it]", "Consider using tensor.detach", "Triggered internally", "^^^^")


def load(out: Path, lib: str, name: str):
    rc_file, out_file = out / lib / f"{name}.rc", out / lib / f"{name}.out"
    if not rc_file.exists():
        return None
    rc, secs = rc_file.read_text().split()
    return int(rc), float(secs), out_file.read_text(errors="replace")


def last_exception(text):
    """The line naming the exception of the last traceback: 'Type: text' (or '' when none): the
    first line after the last frame (`  File ...` and its indented source lines)."""
    if "Traceback (most recent call last)" not in text:
        return ""
    tail = text.rsplit("Traceback (most recent call last)", 1)[1].splitlines()
    frames = [i for i, line in enumerate(tail) if line.startswith('  File "')]
    i = frames[-1] + 1 if frames else 1
    while i < len(tail) and (tail[i].startswith("    ") or not tail[i].strip()):
        i += 1
    return tail[i].strip()[:240] if i < len(tail) else ""


def ending(rc, text):
    """('notebook', reached_end, {cell: (type, text)}) or ('script', rc, exception line)."""
    if "--- cell 0" in text:
        cells = {}
        for line in text.splitlines():
            m = CELL_ERR.match(line)
            if m:
                cells[int(m.group(1))] = (m.group(2), m.group(3))
        return "notebook", "--- end of notebook" in text and rc == 0, cells
    return "script", rc, last_exception(text) if rc else ""


def status(end):
    kind, a, b = end
    if kind == "notebook":
        return f"PASS ({len(b)} cells fail)" if a else "STOPPED"
    return "PASS" if a == 0 else ("TIMEOUT" if a in (124, -9) else "FAIL")


def same_end(et, en):
    if et[0] != en[0]:
        return False, "one ran as a notebook, the other not"
    if et[0] == "notebook":
        if et[1] != en[1]:
            return False, "reached the end in one only"
        for c in sorted(set(et[2]) | set(en[2])):
            t, n = et[2].get(c), en[2].get(c)
            if t is None or n is None or t[0] != n[0]:
                return False, f"cell {c}: torch {t and ': '.join(t) or 'ok'} / nbgrad " \
                              f"{n and ': '.join(n) or 'ok'}"[:300]
        texts = [c for c in et[2] if et[2][c][1] != en[2][c][1]]
        return True, (f"same cells fail; exception texts differ in cells {texts}" if texts else "")
    if (et[1] == 0) != (en[1] == 0) or (et[1] in (124, -9)) != (en[1] in (124, -9)):
        return False, f"torch rc {et[1]} {et[2]} / nbgrad rc {en[1]} {en[2]}"[:300]
    if et[1] and et[2] != en[2]:
        same_type = et[2].split(":")[0] == en[2].split(":")[0]
        return same_type, f"torch: {et[2]} / nbgrad: {en[2]}"[:300]
    return True, (f"both: {et[2]}"[:200] if et[1] else "")


TIMES = re.compile(r"(time:?\s*|ms/batch\s*|elapsed\s*|took\s*)?\b\d+(\.\d+)?([eE][-+]?\d+)?\s*"
                   r"(ms|s|sec|secs|seconds)\b")


def normalise(text):
    """The printed lines that should agree: no warnings (with their source line), no traceback,
    no timings."""
    text = text.replace("nbgrad.", "torch.").split("Traceback (most recent call last)")[0]
    text = re.sub(r"ms/batch\s+[\d.]+", "ms/batch #", TIMES.sub("#time", text))
    lines, skip = [], False
    for line in text.splitlines():
        if any(d in line for d in DROP):
            skip = True
            continue
        if skip and line.startswith(" "):
            continue
        skip = False
        if line.strip():
            lines.append(line.rstrip())
    return lines


def _digit(a, b):
    """The significant digit (1-based) where two printed numbers first differ."""
    da, db = (re.sub(r"^[-+0.]*", "", x.replace(".", "")).split("e")[0].split("E")[0]
              for x in (a, b))
    k = 0
    while k < min(len(da), len(db)) and da[k] == db[k]:
        k += 1
    return k + 1


def numbers(tt, tn, tol=1e-4):
    """identical / rounding (all within tol: the largest relative difference and its digit) /
    numbers differ (the same lines, numbers beyond tol: the largest, the first such line) /
    different (the first line whose words differ, or another number of lines)."""
    lt, ln = normalise(tt), normalise(tn)
    worst, where, nlines, first = 0.0, None, 0, None
    for i, (a, b) in enumerate(zip(lt, ln)):
        if a == b:
            continue
        na, nb = NUM.findall(a), NUM.findall(b)
        if len(na) != len(nb) or NUM.sub("#", a) != NUM.sub("#", b):
            return f"different from line {i + 1}: `{a[:90]}` vs `{b[:90]}`"
        nlines += 1
        for x, y in zip(na, nb):
            fx, fy = float(x), float(y)
            if fx == fy or max(abs(fx), abs(fy)) < 1e-6:
                continue  # (values of the order of float32 rounding themselves: not compared)
            rel = abs(fx - fy) / max(abs(fx), abs(fy))
            if rel > tol and abs(fx - fy) > 1e-6 and first is None:
                first = f"line {i + 1}: `{a[:80]}` vs `{b[:80]}`"
            if rel > worst:
                worst, where = rel, (x, y)
    if len(lt) != len(ln):
        k = min(len(lt), len(ln))
        return (f"different: {len(lt)} vs {len(ln)} lines (from line {k + 1}: "
                f"`{(lt[k:] or ln[k:])[0][:90]}`)")
    if not nlines or where is None:
        return f"identical ({len(lt)} lines)" if not nlines else \
            f"rounding: {nlines} of {len(lt)} lines, in values below 1e-6 only"
    digit = f"digit {_digit(*where)}: {where[0]} vs {where[1]}"
    if first is None:
        return f"rounding: {nlines} of {len(lt)} lines, max rel {worst:.1e} ({digit})"
    return (f"numbers differ: {nlines} of {len(lt)} lines, max rel {worst:.1e} ({digit}); "
            f"first beyond {tol:g} at {first}")


def _cells(text):
    cells, cur = {}, "pre"
    for line in text.splitlines():
        if line.startswith("--- cell "):
            cur = line.split()[-1]
            continue
        cells.setdefault(cur, []).append(line)
    return {k: "\n".join(v) for k, v in cells.items()}


def notebook_numbers(tt, tn, tol=1e-4):
    """Cell by cell: how many cells print identical numbers, within rounding, or differ."""
    ct, cn = _cells(tt), _cells(tn)
    kinds = {"identical": [], "rounding": [], "differ": []}
    worst = ""
    for c in ct:
        if c not in cn or c == "pre" or not normalise(ct[c]) and not normalise(cn[c]):
            continue
        r = numbers(ct[c], cn[c], tol)
        kind = r.split(" ")[0].rstrip(":")
        if kind == "rounding" and "max rel " in r:
            worst = max(worst, r.split("max rel ")[1].split(" ")[0], key=lambda x: float(x or 0))
        kinds["identical" if kind == "identical" else "rounding" if kind == "rounding"
              else "differ"].append(c)
    text = f"cells printing: {len(kinds['identical'])} identical"
    if kinds["rounding"]:
        text += f", {len(kinds['rounding'])} rounding " + \
            (f"(max rel {worst})" if worst else "(in values below 1e-6)")
    if kinds["differ"]:
        text += f", {len(kinds['differ'])} differ (cells {', '.join(kinds['differ'])})"
    return text


def report(progs, out: Path):
    rows = ["| program | torch | nbgrad | ends the same | first difference | printed numbers |",
            "|---|---|---|---|---|---|"]
    counts = {"torch": 0, "nbgrad": 0, "same": 0, "ran": 0}
    for p in progs:
        t, n = load(out, "torch", p["name"]), load(out, "nbgrad", p["name"])
        if t is None or n is None:
            rows.append(f"| `{p['name']}` | {'-' if t is None else 'ran'} | "
                        f"{'-' if n is None else 'ran'} | not run | | |")
            continue
        et, en = ending(t[0], t[2]), ending(n[0], n[2])
        same, diff = same_end(et, en)
        nums = notebook_numbers(t[2], n[2]) if et[0] == "notebook" else numbers(t[2], n[2])
        if p["seeded"] == "no":
            nums = "unseeded: " + (nums if et[0] == "notebook" else nums.split(":")[0].split(" (")[0])
        counts["ran"] += 1
        counts["torch"] += status(et).startswith("PASS")
        counts["nbgrad"] += status(en).startswith("PASS")
        counts["same"] += same
        rows.append(f"| `{p['name']}` | {status(et)} {t[1]:.0f}s | {status(en)} {n[1]:.0f}s | "
                    f"{'yes' if same else '**no**'} | {diff.replace('|', '/')} | "
                    f"{nums.replace('|', '/')} |")
    head = (f"{counts['ran']} programs run: torch ends {counts['torch']}, nbgrad ends "
            f"{counts['nbgrad']}, ending the same {counts['same']}")
    return head + "\n\n" + "\n".join(rows)

