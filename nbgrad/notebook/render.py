"""Draw a :class:`~nbgrad.notebook.inspect.Snapshot`: DOT, SVG (pygraphviz), HTML (the text tree
is render_text.py).

Pure functions of a snapshot; pygraphviz is imported only when SVG is asked for (``layout``).
Every HTML piece here is static (inline styles, ``<details>`` instead of scripts) so that a saved
notebook stays readable without a kernel; the widget in ``widgets.py`` reuses the same pieces.
"""

from __future__ import annotations

import html

from . import layout, repeats
from .render_text import _shape_str, text_tree
from .svg_image import for_image

NOTHING_DRAWN = ("No graph to draw: no tensor this cell made or changed has a grad_fn graph "
                 "(its other tabs say what changed).")
TOO_BIG = "The graph is too big to draw as a picture here: it is shown as text."
DOT_MISSING = ("pygraphviz is not installed: the graph is shown as text "
               "(pip install 'nbgrad[notebook]' to see it as a picture).")

# Colours (also used by extension/panel.css, keep in sync).
C_LEAF = "#cfe6ff"
C_OUT = "#d6f5d0"
C_FN = "#f0f0f0"
C_ACC = "#e4e9f2"
C_SAVED = "#ffe7c2"
C_STALE = "#ff9e9e"
C_RED = "#d00000"
C_VIEW = "#7a5fb5"
C_FREED = "#bbbbbb"
C_MODULE = "#e8e4f5"
C_REPEAT = "#1a4d8f"
C_GRAD = "#b3261e"


def _q(s: str) -> str:
    """A DOT double-quoted string."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    n = int(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{sign}{n} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _delta(d) -> str:
    if d is None:
        return "new"
    return f"+{d}" if d > 0 else ("" if d == 0 else str(d))


# --- DOT -------------------------------------------------------------------------------------


def tensor_label(t) -> str:
    head = t.name or ("(base)" if not t.requires_grad else "")
    lines = [head] if head else []
    ver = f"v{t.version}"
    if t.version_delta:
        ver += f" ({_delta(t.version_delta)})"
    lines.append(f"{_shape_str(t.shape)} {ver}")
    if t.values:  # values mode (render_values)
        lines.append(t.values)
    return "\n".join(lines)


def saved_label(s) -> str:
    who = f"{s.name} = {s.alias}" if s.alias else s.name
    if s.released:
        return f"{who}\nfreed by backward"
    if s.is_stale:
        lines = [f"{who} {_shape_str(s.shape)}", f"saved v{s.saved_version}, now v{s.version}"]
        for v, op, where in s.modified_by[-2:]:
            lines.append(f"{op} at {where}" if where else op)
        return "\n".join(lines)
    return f"{who} {_shape_str(s.shape)}\nv{s.saved_version}"


# Above this many nodes, saved tensors that are fine are written inside their node's label
# instead of as boxes of their own: half the elements for dot to place, and a calmer picture.
SEPARATE_SAVED_UP_TO = 40
# A node used by more than this many shown nodes is drawn once per use (see to_dot).
FANOUT_SPLIT = 4


def to_dot(snap, *, title: str | None = None, separate_saved: bool | None = None,
           folded=None, expanded=()) -> str:
    """The graph of a snapshot as DOT source: data flows top to bottom (inputs first).

    Every element carries an ``id`` (the snapshot key) so the front end can find it in the SVG.
    Stale saved tensors always get a red box of their own; the others too when
    ``separate_saved`` (default: graphs of at most ``SEPARATE_SAVED_UP_TO`` nodes). With a model
    report (``snap.model``), nodes are grouped in one cluster per module and the modules in
    ``folded`` (default: ``model_report.default_folded``) are drawn as one box each. Copies of one
    sub-graph (a loop body: :mod:`repeats`) are drawn once in a cluster titled "50 x <source>",
    except the repeats whose keys are in ``expanded``.
    """
    rep = getattr(snap, "model", None)
    snap, folded, reps = drawn(snap, folded, expanded)
    if separate_saved is None:
        separate_saved = len(snap.nodes) <= SEPARATE_SAVED_UP_TO
    out = ["digraph nbgrad {",
           '  graph [rankdir=TB, nodesep=0.25, ranksep=0.35, fontname="Helvetica", fontsize=10,'
           ' bgcolor="transparent"' + (f", label={_q(title)}, labelloc=t" if title else "")
           # big graphs: fewer crossing-minimisation passes (seconds saved at 300 nodes)
           + (", mclimit=0.3, nslimit=2, nslimit1=2, searchsize=10" if len(snap.nodes) > 100
              else "") + "];",
           '  node [fontname="Helvetica", fontsize=10, height=0.25, margin="0.08,0.04"];',
           '  edge [fontname="Helvetica", fontsize=9, arrowsize=0.6];']
    shown_tensors = {}
    reached = {n.variable for n in snap.nodes.values() if n.variable}
    for t in snap.tensors:
        # Only what belongs to a graph: requires grad, a view, or the base of a shown view.
        if not (t.requires_grad or t.grad_fn or t.is_view or not t.named):
            continue
        # A leaf no drawn node uses (another model's parameter, say) that this cell left alone
        # is only a row of the Tensors tab: new or modified ones are drawn.
        if (t.named and t.requires_grad and not t.grad_fn and not t.is_view
                and t.key not in reached and t.version_delta == 0):
            continue
        shown_tensors[t.key] = t
    by_key = {t.key: t for t in snap.tensors}
    for t in list(shown_tensors.values()):
        b = by_key.get(t.base_key) if t.base_key else None
        if b is not None:
            shown_tensors[b.key] = b
    if len(shown_tensors) > snap.max_nodes:
        # the cap holds for tensor boxes too: those the drawn nodes need come first
        need = {n.variable for n in snap.nodes.values() if n.variable}
        need |= {t.key for t in shown_tensors.values() if t.grad_fn_key in snap.nodes}
        order = sorted(shown_tensors.values(), key=lambda t: (t.key not in need, not t.named))
        shown_tensors = {t.key: t for t in order[:snap.max_nodes]}
        left = len(order) - len(shown_tensors)
        out.append(f'  moretensors [id=moretensors, shape=plaintext, fontcolor=gray,'
                   f' label="... {left} more tensors (cap {snap.max_nodes})"];')
    for t in shown_tensors.values():
        fill = C_LEAF if t.is_leaf and t.requires_grad else (C_OUT if t.named else "white")
        style = "filled,rounded" if t.named else "filled,rounded,dashed"
        out.append(f"  {t.key} [id={t.key}, shape=box, style={_q(style)}, fillcolor={_q(fill)},"
                   f" label={_q(tensor_label(t))}];")
    saved_drawn: set = set()  # keys of the saved tensors drawn as boxes of their own
    for n in snap.nodes.values():
        if n.folded:  # a folded module: one box for its ops (click to expand)
            attrs = (f'shape=box3d, fillcolor="{C_MODULE}", '
                     + (f'color="{C_RED}", penwidth=2' if n.stale else 'color="#44446a"'))
            out.append(f"  {n.key} [id={n.key}, style=filled, {attrs},"
                       f" label={_q(n.name + chr(10) + n.where)}];")
            continue
        if n.failing:
            attrs = f'color="{C_RED}", penwidth=3, fillcolor="{C_STALE}", fontcolor="{C_RED}"'
            label = "\u2716 " + n.name + "\nbackward fails here"
        elif n.stale:
            attrs = f'color="{C_RED}", penwidth=2, fillcolor="{C_FN}"'
            label = n.name + "\nwill fail in backward"
        else:
            attrs = f'fillcolor="{C_ACC if n.is_accumulate else C_FN}"'
            label = n.name
        if n.where and not n.is_accumulate:
            label += "\n" + n.where
        if not separate_saved:
            inline = [s for s in n.saved if not s.is_stale or s.released]
            if inline:
                label += "\nsaves " + ", ".join(
                    f"{s.name} " + ("freed" if s.released else f"v{s.saved_version}")
                    for s in inline)
        out.append(f"  {n.key} [id={n.key}, shape=box, style=filled, {attrs}, label={_q(label)}];")
        for s in n.saved:
            if not separate_saved and (not s.is_stale or s.released):
                continue
            if s.released:
                sattrs = (f'style="filled,dashed", fillcolor=white, color="{C_FREED}",'
                          ' fontcolor=gray')
            elif s.is_stale:
                sattrs = (f'style=filled, fillcolor="{C_STALE}", color="{C_RED}", penwidth=2,'
                          f' fontcolor="#600000"')
            else:
                sattrs = f'style=filled, fillcolor="{C_SAVED}", color="#c58a2c"'
            saved_drawn.add(s.key)
            out.append(f"  {s.key} [id={s.key}, shape=note, fontsize=9, {sattrs},"
                       f" label={_q(saved_label(s))}];")
            ecol = C_RED if s.is_stale and not s.released else "#c58a2c"
            out.append(f'  {s.key} -> {n.key} [style=dashed, color="{ecol}", arrowhead=odot];')
    more = "more" if snap.truncated else None
    if more:
        out.append(f'  {more} [id=more, shape=plaintext, fontcolor=gray, label='
                   f'{_q(hidden_summary(snap, sep=chr(10)))}];')
    # A node feeding many others (a weight used at every step) pulls long edges across the whole
    # layout, and dot's edge routing then takes seconds: each use gets a small copy instead.
    fanout: dict[str, int] = {}
    for n in snap.nodes.values():
        for nxt in n.next:
            fanout[nxt] = fanout.get(nxt, 0) + 1
    copies: dict[str, int] = {}
    used: dict = {}  # (node, child) -> edges labelled so far (values mode)
    for n in snap.nodes.values():
        for nxt in n.next:
            if nxt not in snap.nodes:
                continue
            if nxt == n.key:  # a repeat's copy feeding the next copy (drawn once)
                out.append(f'  {nxt} -> {n.key} [style=dashed, color="{C_REPEAT}"];')
                continue
            if fanout[nxt] <= FANOUT_SPLIT:
                g = n.grads.get(nxt)  # values mode: the gradient along this edge (render_values)
                if g:
                    j = used[(n.key, nxt)] = used.get((n.key, nxt), -1) + 1
                    g = g[j] if j < len(g) else ""
                out.append(f"  {nxt} -> {n.key} [label={_q(g)}, fontcolor=\"{C_GRAD}\"];"
                           if g else f"  {nxt} -> {n.key};")
                continue
            i = copies[nxt] = copies.get(nxt, 0) + 1
            src = snap.nodes[nxt]
            label = src.name
            if src.variable and src.variable in shown_tensors:
                label += f"\n({shown_tensors[src.variable].name or 'leaf'})"
            out.append(f'  "{nxt}~{i}" [id="{nxt}~{i}", shape=box, style="dashed,filled",'
                       f' fillcolor="{C_ACC if src.is_accumulate else C_FN}", fontsize=8,'
                       f" label={_q(label + f' (use {i} of {fanout[nxt]})')}];")
            out.append(f'  "{nxt}~{i}" -> {n.key};')
        if more and n.key in snap.hidden_edges:
            out.append(f"  {more} -> {n.key} [style=dotted, color=gray];")
        if n.variable and n.variable in shown_tensors:
            out.append(f"  {n.variable} -> {n.key} [style=dotted, arrowhead=none];")
    for t in shown_tensors.values():
        if t.grad_fn_key and t.grad_fn_key in snap.nodes and t.named:
            out.append(f"  {t.grad_fn_key} -> {t.key};")
        if t.base_key and t.base_key in shown_tensors:
            out.append(f'  {t.base_key} -> {t.key} [style=dashed, color="{C_VIEW}",'
                       f' fontcolor="{C_VIEW}", label="view", arrowhead=empty];')
    if rep is not None and rep.clusters:
        from . import model_report as _model

        out.extend(_model.cluster_dot(rep, set(snap.nodes) | set(shown_tensors) | saved_drawn,
                                      folded))
    out.extend(repeats.cluster_dot(snap, reps, expanded))
    out.append("}")
    return "\n".join(out)


def drawn(snap, folded=None, expanded=()) -> tuple:
    """``(snapshot as the graph draws it, modules folded, repeats folded)``: every repeat
    (:mod:`repeats`) not in ``expanded`` drawn once, then the modules in ``folded`` (default:
    ``model_report.default_folded``) and those called inside a folded repeat as one box each
    (an RNN cell unrolled 8 times: one copy, its layers as boxes, in a cluster "8 x ...")."""
    modules = getattr(getattr(snap, "model", None), "clusters", None)
    memo = (id(snap), None if folded is None or not modules else tuple(folded), tuple(expanded))
    if _DRAWN[0] == memo and _DRAWN[1] is snap:  # the DOT, the tree and the widget ask in turn
        return _DRAWN[2]
    out = _drawn(snap, folded, expanded)
    _DRAWN[:] = [memo, snap, out]
    return out


_DRAWN: list = [None, None, None]  # the last drawn(): (key, snapshot, result)


def _drawn(snap, folded, expanded) -> tuple:
    reps = repeats.active(snap, expanded)
    rep = getattr(snap, "model", None)
    full = snap
    snap = repeats.fold(snap, reps)
    if rep is not None and rep.clusters:
        from . import model_fold, model_report as _model

        if folded is None:
            folded = _model.default_folded(rep, len(full.nodes))
        inside = {k for r in reps for c in r.copies for k in c}
        given = set(folded)
        folded = list(folded) + [p for p, c in rep.clusters.items()
                                 if p not in given and inside.intersection(c["keys"])]
        snap = model_fold.fold(snap, rep, folded)
        kept = {k: r.key for r in reps for k in r.copies[r.keep]}
        for n in snap.nodes.values():  # a module box made of a kept copy's nodes: in its cluster
            if n.module and not n.repeat:
                keys = {k for p, c in rep.clusters.items()
                        if p == n.module or p.startswith(n.module + ".") for k in c["keys"]}
                mine = {kept[k] for k in keys if k in kept}
                if len(mine) == 1:
                    n.repeat = mine.pop()
    return snap, folded or [], reps


def hidden_summary(snap, sep: str = "; ") -> str:
    """What the cap left out: "... 700 more nodes (cap 300)" and the commonest kinds."""
    more = f"{snap.hidden_nodes}" + ("" if snap.hidden_exact else "+")
    head = f"... {more} more nodes (cap {snap.max_nodes})"
    kinds = [f"{name} x{n}" for name, n in snap.hidden_kinds[:4]]
    if len(snap.hidden_kinds) > 4:
        kinds.append("...")
    return head + (sep + ", ".join(kinds) if kinds else "")


# --- SVG -------------------------------------------------------------------------------------


def dot_available() -> bool:
    """True when graphs can be laid out here (pygraphviz imports)."""
    return layout.available()


def dot_to_svg(source: str, timeout: float = layout.DEFAULT_TIMEOUT) -> str | None:
    """Lay out DOT source in-process (:mod:`nbgrad.notebook.layout`); the ``<svg>`` element,
    or None without pygraphviz.

    Raises:
        TimeoutError: the layout took longer than ``timeout`` seconds.
    """
    return layout.svg(source, timeout=timeout)


# --- HTML ------------------------------------------------------------------------------------

_TABLE = 'style="border-collapse:collapse;font-size:12px;font-family:monospace"'
_TD = 'style="padding:1px 8px;border-bottom:1px solid #ddd;text-align:left"'


def _table(header, rows) -> str:
    e = html.escape
    out = [f"<table {_TABLE}><tr>" + "".join(f"<th {_TD}>{e(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        attrs = ""
        if isinstance(row, tuple) and len(row) == 2 and isinstance(row[1], dict):
            row, meta = row
            attrs = " ".join(f'{k}="{e(str(v))}"' for k, v in meta.items())
        out.append(f"<tr {attrs}>" + "".join(f"<td {_TD}>{c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def tensors_html(snap) -> str:
    e = html.escape
    rows = []
    named = [t for t in snap.tensors if t.named]
    if len(named) > snap.max_nodes:
        # the cap holds here too: tensors this cell made or modified first
        named.sort(key=lambda t: t.version_delta == 0)
    for t in named[:snap.max_nodes]:
        dv = _delta(t.version_delta)
        ver = f"{t.version}" + (f' <b style="color:{C_RED}">({e(dv)})</b>' if dv and dv != "new"
                                else "")
        rows.append(([e(t.name), e(_shape_str(t.shape)), e(t.dtype), e(t.device),
                      str(t.requires_grad), str(t.is_leaf), e(t.grad_fn or ""), ver,
                      e(f"{t.storage} +{t.offset}"), e(t.view_of or ""), e(t.grad or "")],
                     {"data-key": t.key}))
    if not rows:
        return "<i>no named tensors</i>"
    more = len(named) - len(rows)
    return _table(["name", "shape", "dtype", "device", "requires_grad", "is_leaf", "grad_fn",
                   "_version", "storage", "view of", "grad"], rows) + (
        f"<div>... {more} more tensors (cap {snap.max_nodes})</div>" if more else "")


def _base_grid(st) -> tuple[int, int]:
    """(rows, columns) of the storage as its base tensor is shaped: the view that covers the
    whole storage contiguously from element 0 (rows = all but the last dimension)."""
    for _name, off, shape, stride, _covers in st.views:
        n = 1
        for d in shape:
            n *= d
        contiguous = all(stride[i] == _prod(shape[i + 1:]) for i in range(len(shape))
                         if shape[i] > 1)
        if off == 0 and n == st.size and contiguous and shape:
            cols = shape[-1]
            return (st.size // cols if cols else 1), cols
    return 1, st.size


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _cover_str(covers, size, cols=None) -> str:
    """The storage's elements as a grid of the base's rows x columns, ``covers`` as filled."""
    if covers is None:
        return ""
    c = set(covers)
    cols = cols or size or 1
    cells = ["\u25a0" if i in c else "\u00b7" for i in range(size)]
    return "\n".join(" ".join(cells[i:i + cols]) for i in range(0, size, cols))


def views_html(snap) -> str:
    e = html.escape
    parts = []
    alone = 0
    for st in snap.storages:
        if len(st.views) < 2:
            alone += 1  # nothing aliases it: no map to draw
            continue
        head = (f"<div><b>{e(st.key)}</b> {e(st.device)}, {st.size} elements, "
                f"{_bytes(st.nbytes)}, shared version counter <b>_version = {st.version}</b>"
                + (f" &mdash; {len(st.views)} tensors alias it" if len(st.views) > 1 else "")
                + "</div>")
        rows = []
        n_rows, cols = _base_grid(st)
        if n_rows > 1:
            head = head[:-len("</div>")] + f"; elements drawn as the base's {n_rows} x {cols}</div>"
        for name, off, shape, stride, covers in st.views:
            first = covers[0] if covers else off
            rows.append([e(name), str(off), e(_shape_str(shape)), e(_shape_str(stride)),
                         f'<span style="white-space:pre;line-height:1.1">'
                         f'{e(_cover_str(covers, st.size, cols))}</span>'
                         if covers is not None else f"from element {first}"])
        parts.append(head + _table(["tensor", "offset", "shape", "strides", "elements covered"],
                                   rows))
    if alone:
        parts.append(f"<div>{alone} other storage{'s' if alone > 1 else ''} "
                     f"held by one tensor each.</div>")
    return "".join(parts) or "<i>no storages</i>"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _in_bytes(n) -> str:
    """ "72 bytes", "1.5 KiB": what the Memory tab says, in words."""
    n = int(n or 0)
    return _plural(n, "byte") if abs(n) < 1024 else _bytes(n)


def memory_html(snap, activity_delta=None) -> str:
    """The Memory tab in plain words: what this cell added, what the saved tensors of the graphs
    shown hold, what is live in all, and which containers keep graphs alive."""
    m = snap.memory or {}
    rows = []
    delta = m.get("delta") or {}
    for dev in sorted({k.split(".")[0] for k in delta} or {"cpu"}):
        db = delta.get(f"{dev}.live_bytes")
        ds = delta.get(f"{dev}.live_storages")
        if db is None:
            continue
        dev_name = "" if dev == "cpu" else f" on {dev}"
        what = ("no change in live tensor memory" if not db else
                f"{_in_bytes(abs(db))} {'more' if db > 0 else 'less'} live tensor memory")
        if ds:
            what += f" ({_plural(abs(ds), 'storage')} {'more' if ds > 0 else 'fewer'})"
        rows.append(["this cell", what + dev_name])
    for dev in sorted({k.split(".")[0] for k in delta if k.endswith(".used_bytes")}):
        du = delta[f"{dev}.used_bytes"]
        if du:
            rows.append(["this cell", f"{_in_bytes(abs(du))} {'more' if du > 0 else 'less'} "
                         f"used in the {dev} memory pool"])
    if any(k.endswith(".torch_cuda_allocated") for k in delta):
        from .render_cuda import cuda_delta_rows

        rows += cuda_delta_rows(delta)
    ad = activity_delta or m.get("activity_delta")
    if ad:
        rows.append(["this cell made", f"{_plural(ad[0], 'graph node')}, "
                     f"{_plural(ad[1], 'in-place change')}; {_plural(ad[2], 'storage')} "
                     f"allocated, {ad[3]} freed"])
    n_saved = m.get("saved_count", 0)
    rows.append(["saved for backward",
                 (f"{_plural(n_saved, 'saved tensor')} "
                  f"{'holds' if n_saved == 1 else 'hold'} {_in_bytes(m.get('saved_bytes', 0))}"
                  " in the graphs shown" if n_saved else "no saved tensors in the graphs shown")
                 + (" (graph capped: at least this)" if m.get("saved_partial") else "")])
    rows.append(["named tensors", f"their storages hold {_in_bytes(m.get('named_storage_bytes'))}"])
    for dev, st in (m.get("devices") or {}).items():
        if "live_bytes" in st:
            rows.append([f"all live tensors ({dev})",
                         f"{_in_bytes(st.get('live_bytes'))} in "
                         f"{_plural(st.get('live_storages') or 0, 'storage')} "
                         f"(peak {_in_bytes(st.get('peak_bytes'))})"])
        if "used_bytes" in st:
            rows.append([f"{dev} memory pool", f"{_in_bytes(st.get('used_bytes'))} used of "
                         f"{_in_bytes(st.get('total_bytes'))} reserved, "
                         f"{_plural(st.get('free_blocks') or 0, 'free block')}, limit "
                         f"{_in_bytes(st.get('limit')) if st.get('limit') else 'none'}"])
        if "torch_cuda_allocated" in st:
            from .render_cuda import cuda_state

            rows.append(["CUDA caching allocator (torch)", cuda_state(st)])
    rep = getattr(snap, "model", None)
    if rep is not None:
        from .render_model import kept_alive_rows

        rows += kept_alive_rows(rep)
    return _table(["", ""], [[html.escape(a), html.escape(b)] for a, b in rows])


def error_html(err) -> str:
    if not err:
        return ""
    e = html.escape
    out = [f'<div style="color:{C_RED};font-weight:bold">{e(err["type"])}: '
           f'{e(err["headline"])}</div>']
    if err["lines"]:
        out.append('<ul style="margin:2px 0">' + "".join(
            f"<li>{e(x)}</li>" for x in err["lines"]) + "</ul>")
    return "".join(out)


def summary_text(snap) -> str:
    """One line: what the panel shows."""
    named = sum(1 for t in snap.tensors if t.named)
    parts = [f"{named} tensors", f"{len(snap.nodes)} nodes" + (
        f" (+{snap.hidden_nodes} hidden)" if snap.truncated else "")]
    reps = getattr(snap, "repeats", None) or []
    if reps:  # what the graph folds (the Graph tab's blue boxes)
        r = max(reps, key=lambda r: r.count)
        parts[1] += (f", {r.count}{'+' if r.more else ''} copies of one loop body drawn once"
                     + (f" (and {len(reps) - 1} more loop{'s' if len(reps) > 2 else ''})"
                        if len(reps) > 1 else ""))
    stale = snap.stale_saved
    if stale:
        parts.append(f"{len(stale)} stale saved tensor" + ("s" if len(stale) > 1 else "")
                     + " (backward will fail)")
    if snap.error:
        parts.append("error: " + short_error(snap.error["headline"]) + " (see the Error tab)")
    if getattr(snap, "model", None) is not None:
        from .render_model import summary_notes

        if snap.model.is_loop:
            parts.insert(0, f"{snap.model.steps} training steps")
        note = summary_notes(snap.model)
        if note:
            parts.append(note)
    return "nbgrad: " + ", ".join(parts)


def short_error(headline: str, limit: int = 120) -> str:
    """An error's first clause, whole words only: the header's one short line."""
    head = headline.split(": ", 1)[0].split("; ", 1)[0].strip()
    if len(head) <= limit:
        return head
    cut = head[:limit].rsplit(" ", 1)[0]
    return cut + " \u2026"


def graph_html(svg: str | None, snap, inline: bool = True) -> str:
    """The Graph tab: the SVG inline (the widget wires its elements), or as an ``<img>`` with a
    data URI (``inline=False``: what survives the HTML sanitiser of an untrusted notebook),
    or the text tree when there is no SVG."""
    if svg == "":  # the browser lays the DOT out (extension/layout.js); the tree until then
        return (f'<div class="nbgrad-svg" data-layout="browser" style="overflow:auto">'
                f'<pre style="font-size:11px">{html.escape(_head_lines(text_tree(snap)))}</pre>'
                f'</div>')
    if svg is not None:
        if inline:
            return f'<div class="nbgrad-svg" style="overflow:auto;max-height:520px">{svg}</div>'
        return (f'<div class="nbgrad-svg" style="overflow:auto;max-height:520px">'
                f'<img style="max-width:100%;height:auto" alt="{html.escape(_alt(snap))}" '
                f'src="{svg_uri(for_image(svg))}"></div>')
    if not layout.available():
        why = DOT_MISSING
    elif draws_nothing(snap):
        return (f'<div class="nbgrad-nograph" style="color:#666">{html.escape(NOTHING_DRAWN)}'
                '</div>')
    else:  # laid out past its time bound, or too big to send: the printed message says which
        why = TOO_BIG
    return (f'<div style="color:#8a5a00">{html.escape(why)}</div>'
            f'<pre style="font-size:11px">{html.escape(text_tree(snap))}</pre>')


def draws_nothing(snap) -> bool:
    """True when the graph of ``snap`` has no element to draw (a cell that freed its graph)."""
    return "[id=" not in to_dot(snap)


_URI_ESCAPES = [(c, "%%%02X" % ord(c)) for c in '%#<>&\n"']  # "%" first


def svg_uri(svg: str) -> str:
    """``svg`` as a ``data:`` URI for an ``<img>``: percent-escaped where a URI or the HTML
    attribute needs it (``&`` too: the HTML parser would decode ``&lt;`` back into the SVG), the
    SVG's attribute quotes made single. 15 % smaller than base64 in a saved notebook."""
    if "'" not in svg:
        svg = svg.replace('"', "'")
    for c, esc in _URI_ESCAPES:  # (str.replace: a few times faster than translate here)
        if c in svg:
            svg = svg.replace(c, esc)
    return "data:image/svg+xml," + svg


def _alt(snap, limit: int = 600) -> str:
    """The image's alternative text: the head of the text tree (read aloud, or searched)."""
    text = text_tree(snap)
    return text if len(text) <= limit else text[:limit].rsplit("\n", 1)[0] + "\n..."


def _head_lines(text: str, limit: int = 200) -> str:
    lines = text.split("\n")
    if len(lines) <= limit:
        return text
    return "\n".join(lines[:limit] + [f"... {len(lines) - limit} more lines"])


def earlier_html(snap, live: bool = False, shown=None) -> str:
    """The graphs earlier cells made, folded to one line: "3 earlier graphs: loss, y, c".

    ``live`` (the widget): ends with a "show" button that draws them in the panel; ``shown``: the
    names of the earlier graphs drawn now (the line then offers to hide them). Static: the
    ``%nbgrad graph NAME`` hint."""
    names = list(shown) if shown else (getattr(snap, "earlier", None) or [])
    if not names:
        return ""
    listed = ", ".join(names[:8]) + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")
    n = len(names)
    head = f'{n} earlier graph{"s" if n > 1 else ""}{" shown" if shown else ""}: '
    if live:
        tail = ('<button class="nbgrad-show-earlier" title="'
                + ("draw this cell's graph alone" if shown else "draw them in this panel")
                + f'">{"hide" if shown else "show"}</button>')
    else:
        tail = "<code>%nbgrad graph NAME</code> shows one"
    return (f'<div class="nbgrad-earlier" style="color:#666">{head}{html.escape(listed)} '
            f'&mdash; {tail}</div>')


def tabs(snap, svg: str | None, live: bool = False) -> dict:
    """The panel's tab contents as HTML strings, in display order (error first when present);
    ``live``: for the widget (its earlier-graphs line has a "show" button)."""
    if _TABS[0] is not snap:  # the widget and its static copy ask in turn: built once
        _TABS[:] = [snap, _other_tabs(snap)]
    return {name: graph_html(svg, snap) + earlier_html(snap, live) if body is None
            else _styled_by_class(body) if live else body for name, body in _TABS[1].items()}


def _styled_by_class(body: str) -> str:
    """A table's inline styles replaced by panel.css's classes: the widget state (and so the
    saved notebook) carries them once, not per cell of every table."""
    return body.replace(f" {_TD}", "").replace(_TABLE, 'class="nbgrad-table"')


_TABS: list = [None, None]  # the last snapshot's tabs but the Graph (None: its place)


def _other_tabs(snap) -> dict:
    out = {}
    if snap.error:
        out["Error"] = error_html(snap.error)
    rep = getattr(snap, "model", None)
    if rep is not None and rep.is_loop:
        from .render_model import training_html

        out["Training"] = training_html(rep)
    out["Graph"] = None
    if rep is not None and (rep.params or rep.notes):
        from .render_model import gradients_html

        out["Gradients"] = gradients_html(rep)
    out["Tensors"] = tensors_html(snap)
    out["Views"] = views_html(snap)
    out["Memory"] = memory_html(snap)
    return out


def first_tab(tab_html: dict) -> str:
    """The tab a panel opens on: the error, a training loop's curves, else the graph."""
    return next(t for t in ("Error", "Training", "Graph") if t in tab_html)


def panel_html(snap, svg: str | None, tab_html: dict | None = None, theme: str = "light",
               graph: str | None = None) -> str:
    """The static panel: every tab as a ``<details>`` section (no script needed);
    ``theme="projector"``: larger type, black on white; ``graph``: the static
    :func:`graph_html` of ``svg`` when the caller made it already."""
    tab_html = dict(tab_html or tabs(snap, svg))
    tab_html["Graph"] = (graph or graph_html(svg, snap, inline=False)) + earlier_html(snap)
    first = first_tab(tab_html)
    look = ("font-size:18px;color:#000;background:#fff;border:2px solid #000"
            if theme == "projector" else "font-size:12px;border:1px solid #ccc")
    out = [f'<div class="nbgrad-static nbgrad-theme-{html.escape(theme)}" '
           f'style="font-family:sans-serif;{look};border-radius:4px;padding:4px 8px;'
           'overflow-wrap:anywhere">',
           f"<div><b>{html.escape(summary_text(snap))}</b>{_WAKE_SLOT}</div>"]
    for name, body in tab_html.items():
        opn = " open" if name == first or (name == "Graph" and first != "Training") else ""
        out.append(f"<details{opn}><summary>{name}</summary>{body}</details>")
    out.append("</div>")
    return "".join(out)


_WAKE_SLOT = '<span class="nbgrad-wake-slot"></span>'


def with_wake_button(static_html: str, panel_id: str) -> str:
    """A retired panel's static copy with its "interact" button: a click asks the kernel, through
    any live panel of the page (extension/loader.js), to show it as a live widget again."""
    button = (f' <button class="nbgrad-wake" data-nbgrad-wake="{html.escape(panel_id)}" '
              'style="font-size:11px;margin-left:6px;cursor:pointer" '
              'title="make this panel interactive again (while the kernel that drew it runs)">'
              'interact</button>')
    return static_html.replace(_WAKE_SLOT, button, 1)


def tensor_html(t) -> str:
    """Rich HTML for one tensor: shape, dtype, device, stats, grad_fn, version."""
    e = html.escape
    rows = [["shape", _shape_str(tuple(t.shape))], ["dtype", str(t.dtype)],
            ["device", str(t.device)], ["requires_grad", str(t.requires_grad)],
            ["is_leaf", str(t.is_leaf)],
            ["grad_fn", t.grad_fn.name() if t.grad_fn is not None else "None"],
            ["_version", "none (inference tensor)" if t.is_inference() else str(t._version)]]
    if t._is_view():
        rows.append(["view", f"offset {t.storage_offset()}, strides {tuple(t.stride())}"])
    try:
        a = t._data
        n = int(t.numel())
        if n and n <= 50_000_000 and str(t.dtype).split(".")[-1] != "bool":
            af = a.astype("float64") if a.dtype.kind in "iub" else a
            rows.append(["stats", f"min {float(af.min()):.4g}  max {float(af.max()):.4g}  "
                         f"mean {float(af.mean()):.4g}  std {float(af.std()):.4g}"])
    except Exception:
        pass
    g = getattr(t, "_grad", None)
    if g is not None:
        rows.append(["grad", f"{_shape_str(tuple(g.shape))} {g.dtype}"])
    try:
        preview = repr(t)
    except Exception:
        preview = object.__repr__(t)
    if len(preview) > 600:
        preview = preview[:600] + " ..."
    return (f'<div class="nbgrad-tensor"><pre style="margin:0 0 2px 0">{e(preview)}</pre>'
            + _table(["", ""], [[e(a), e(b)] for a, b in rows]) + "</div>")


def fit_tabs(tab_html: dict, limit: int, graph_limit: int | None = None) -> dict:
    """``tab_html`` within ``limit`` bytes in all: the Graph tab up to ``graph_limit`` (default
    half), then the small tabs whole and the large ones cut to an equal share of what is left."""
    out = dict(tab_html)
    if sum(len(v) for v in out.values()) <= limit:
        return out
    if "Graph" in out:
        out["Graph"] = cap_html(out["Graph"], graph_limit or limit // 2)
    left = limit - len(out.get("Graph", ""))
    others = sorted((n for n in out if n != "Graph"), key=lambda n: len(out[n]))
    for i, name in enumerate(others):
        out[name] = cap_html(out[name], max(left // (len(others) - i), 1000))
        left -= len(out[name])
    return out


def cap_html(body: str, limit: int) -> str:
    """``body`` cut to about ``limit`` characters at a table row (or tag) boundary."""
    if len(body) <= limit:
        return body
    cut = body.rfind("</tr>", 0, limit)
    cut = cut + len("</tr>") if cut > 0 else max(body.rfind(">", 0, limit) + 1, 0)
    svg = body.rfind("<svg", 0, cut)  # never inside a picture: before it
    if svg >= 0 and body.find("</svg>", svg, cut) < 0:
        cut = svg
    table = body.rfind("<table", 0, cut) > body.rfind("</table>", 0, cut)
    return (body[:cut] + ("</table>" if table else "")
            + f"<div><i>... cut here ({len(body) // 1000} KB in all)</i></div>")
