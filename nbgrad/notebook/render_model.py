"""Draw a :class:`~nbgrad.notebook.model_report.ModelReport`: Gradients and Training tabs, notes.

Static HTML with inline SVG sparklines and curves (no script), like the rest of ``render``.
"""

from __future__ import annotations

import html
import math

C_RED = "#d00000"
C_NOTE = "#8a5a00"


def _num(x, fmt="{:.3g}") -> str:
    if x is None:
        return "\u2013"
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if x != x else ("inf" if x > 0 else "-inf")
    return fmt.format(x)


def polyline(values, width=120, height=24, color="#1a73e8", log=False) -> str:
    """An inline SVG line of ``values`` (non-finite ones dropped), scaled to the box; a long
    series keeps the lowest and highest value of each 4-pixel column (spikes stay)."""
    if len(values) == 1:  # (a cell's one backward: the same dot whatever the value)
        v = values[0]
        if v is None or not math.isfinite(v) or (log and v <= 0):
            return ""
        one = _ONE.get((width, height, color))
        if one is None:
            one = _ONE[(width, height, color)] = _polyline([1.0], width, height, color)
        return one
    return _polyline(values, width, height, color, log)


_ONE: dict = {}  # (width, height, color) -> the picture of one finite value


def _polyline(values, width, height, color, log=False) -> str:
    pts = [(i, v) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if len(pts) > width // 2:
        cols: dict = {}
        for i, v in pts:
            cols.setdefault(int(i * (width // 4) / len(values)), []).append((i, v))
        pts = sorted({p for col in cols.values() for p in
                      (min(col, key=lambda q: q[1]), max(col, key=lambda q: q[1]))})
    if log:
        pts = [(i, math.log10(v)) for i, v in pts if v > 0]
    if not pts:
        return ""
    n = max(len(values) - 1, 1)
    lo = min(v for _, v in pts)
    hi = max(v for _, v in pts)
    span = (hi - lo) or 1.0
    xy = " ".join(f"{2 + (width - 4) * i / n:.1f},{height - 2 - (height - 4) * (v - lo) / span:.1f}"
                  for i, v in pts)
    mark = (f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{xy}"/>'
            if len(pts) > 1 else f'<circle cx="{xy.split(",")[0]}" cy="{xy.split(",")[1]}" '
            f'r="2.5" fill="{color}"/>')  # one finite value: a dot, not an empty box
    return (f'<svg class="nbgrad-spark" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{mark}</svg>')


def curve(title, values, color, width=420, height=110, unit=None) -> str:
    """A titled curve with its first, last, min and max written out (a training-loop tab)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return f"<div><b>{html.escape(title)}</b>: no finite values</div>"
    stats = (f"first {_num(values[0])}, last {_num(values[-1])}, min {_num(min(finite))}, "
             f"max {_num(max(finite))} " + (unit or f"over {len(values)} steps"))
    return (f'<div class="nbgrad-curve"><div><b>{html.escape(title)}</b> '
            f'<span style="color:#555">{stats}</span></div>'
            + polyline(values, width, height, color) + "</div>")


def notes_html(rep) -> str:
    if not rep.notes:
        return ""
    return ('<ul class="nbgrad-notes" style="margin:2px 0;padding-left:18px;color:'
            f'{C_NOTE}">' + "".join(f"<li>{html.escape(n)}</li>" for n in rep.notes) + "</ul>")


def gradients_html(rep) -> str:
    """Per parameter: grad norm, update/weight ratio, exact zeros, a sparkline of the norms."""
    e = html.escape
    rows = []
    for r in rep.params:
        flag = ""
        if r.nonfinite:
            flag = f' <b style="color:{C_RED}">NaN/Inf</b>'
        elif r.accumulated >= 2:
            flag = f" <i>accumulated x{r.accumulated}</i>"
        dead = f"{100 * r.zeros:.0f}%" if r.norm is not None else "\u2013"
        if r.norm is not None and r.zeros >= 0.5:
            dead = f'<b style="color:{C_NOTE}">{dead}</b>'
        rows.append(f"<tr><td>{e(r.name)}</td><td>{e(str(list(r.shape)))}</td>"
                    f"<td>{_num(r.norm)}{flag}</td><td>{_num(r.ratio)}</td><td>{dead}</td>"
                    f"<td>{polyline(r.history)}</td></tr>")
    table = ""
    if rows:
        table = ('<table class="nbgrad-grads" style="border-collapse:collapse;font-size:12px">'
                 "<tr><th>parameter</th><th>shape</th><th>grad norm</th>"
                 '<th title="||weight change at the last step|| / ||weight||">update / weight'
                 '</th><th title="fraction of exact zeros in the gradient (dead ReLUs)">zeros'
                 "</th><th>grad norm over the steps seen</th></tr>" + "".join(rows) + "</table>")
    return notes_html(rep) + (table or "<i>no parameter has had a backward yet</i>")


def sampled_curve(title, steps, values, n, color, width=420, height=110) -> str:
    """Values known at some steps only (1-based ``steps`` out of ``n``), drawn on the same step
    axis as the loss: a dot per sample, joined when there are several."""
    pts = [(k, v) for k, v in zip(steps, values) if v is not None and math.isfinite(v)]
    at = ", ".join(str(k) for k in steps[:12]) + (", ..." if len(steps) > 12 else "")
    head = (f'<div><b>{html.escape(title)}</b> <span style="color:#555">sampled at step'
            f'{"s" if len(steps) > 1 else ""} {at} of {n}')
    if not pts:
        return head + ": no finite value</span></div>"
    lo, hi = min(v for _, v in pts), max(v for _, v in pts)
    span = (hi - lo) or 1.0
    xy = [(2 + (width - 4) * (k - 1) / max(n - 1, 1), height - 6 - (height - 12) * (v - lo) / span)
          for k, v in pts]
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in xy)
    line = (f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="'
            + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + '"/>' if len(xy) > 1 else "")
    vals = ", ".join(_num(v) for v in values[:12])
    return (f'<div class="nbgrad-curve">{head}: {vals}</span></div>'
            f'<svg class="nbgrad-spark" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{line}{dots}</svg></div>')


def training_html(rep) -> str:
    """A training-loop cell: the loss curve over its steps, the total gradient norm at the
    steps sampled (the first two and every 50th), on the same step axis."""
    parts = [f"<div>{rep.steps} training steps (backward calls) in this cell; the graph of "
             "the last step is in the Graph tab, its modules folded.</div>"]
    if rep.losses:
        parts.append(curve("loss", rep.losses, "#c0392b"))
    else:
        parts.append("<div><i>loss: no backward call started from a scalar (nothing to "
                     "plot)</i></div>")
    if rep.grad_norms:
        parts.append(sampled_curve("total gradient norm", rep.grad_norm_steps, rep.grad_norms,
                                   max(rep.steps, max(rep.grad_norm_steps, default=1)),
                                   "#1a73e8"))
    return notes_html(rep) + "".join(parts)


def kept_alive_rows(rep) -> list:
    """Memory-tab rows: the containers that keep graphs alive, in words."""
    from .render import _in_bytes

    rows = []
    for name, graphs, nbytes, kind, nodes in rep.kept_alive:
        rows.append([f"{name} ({kind})", f"keeps {graphs} graphs alive ({nodes} graph nodes): "
                     f"{_in_bytes(nbytes)} held by them and their saved tensors; append "
                     "loss.item() or loss.detach() if you only need the value"])
    return rows


def shorten_middle(text: str, limit: int = 130) -> str:
    """``text`` within about ``limit`` characters, cut in the middle at word boundaries: a note's
    head says what, its tail where ("... at cell [4] line 9"), and both must stay."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    head = text[:half].rsplit(" ", 1)[0]
    tail = text[-half:]
    tail = tail.split(" ", 1)[1] if " " in tail else tail
    return f"{head} \u2026 {tail}"


def summary_notes(rep) -> str:
    """The header's part: "2 notes: ..." (the first note cut to one short line)."""
    if not rep or not rep.notes:
        return ""
    first = shorten_middle(rep.notes[0])
    return f"{len(rep.notes)} note{'s' if len(rep.notes) > 1 else ''}: {first}"
