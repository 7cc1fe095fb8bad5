"""The panel widget: an anywidget whose front end lives in ``extension/`` (ES module + CSS).

The kernel sends finished HTML/SVG per tab and a small JSON description of the graph; the front
end adds tabs, selection, hover details and collapsing. Displayed as a mimebundle that carries the
widget view *and* a static ``text/html`` copy, so a saved notebook stays readable without a kernel.
"""

from __future__ import annotations

import base64
import contextlib
import json
import zlib
from pathlib import Path

import anywidget
import traitlets

from . import render
from . import render_values as _values
from . import repeats as repeats_mod


def _asset(name: str) -> str:
    """Read an ``extension/`` file: from the installed package data, else from the repo."""
    here = Path(__file__).resolve().parent
    for p in (here / "static" / name, here.parent.parent / "extension" / name):
        if p.is_file():
            return p.read_text(encoding="utf-8")
    try:  # an installed wheel may map extension/ elsewhere in the package
        from importlib import resources

        return (resources.files("nbgrad") / "extension" / name).read_text(encoding="utf-8")
    except Exception:
        raise FileNotFoundError(f"nbgrad front-end file {name!r} is missing") from None


def graph_data(snap, folded=(), expanded=()) -> dict:
    """What the front end needs to know about each graph element (hover text, edges), the
    module clusters (SVG id -> module path) it can fold, and the repeats (SVG id of the cluster
    -> [repeat key, expanded?]) it can expand or fold."""
    nodes = {}
    modules = {}
    rep = getattr(snap, "model", None)
    if rep is not None and rep.clusters:
        from . import model_report as model

        for path, c in rep.clusters.items():
            modules[model.cluster_id(path)] = path
            nodes[model.box_id(path)] = {"kind": "module", "title": c["title"], "path": path,
                                         "details": ["folded: click to expand"]}
    repeats = {repeats_mod.cluster_id(r.key): [r.key, r.key in expanded]
               for r in getattr(snap, "repeats", None) or ()}
    snap, _folded, shown = render.drawn(snap, list(folded), expanded)
    counts = {r.key: r for r in shown}
    for t in snap.tensors:
        if t.named and not (t.requires_grad or t.grad_fn or t.is_view):
            continue  # not drawn: a plain tensor is only a row of the Tensors tab
        nodes[t.key] = {"kind": "tensor", "title": t.name or "(unnamed tensor)", "details": [
            f"shape {list(t.shape)} {t.dtype} {t.device}", f"requires_grad={t.requires_grad} "
            f"is_leaf={t.is_leaf}", f"grad_fn={t.grad_fn}", f"_version={t.version}",
            f"storage {t.storage} offset {t.offset} strides {list(t.stride)}"]
            + ([f"view of {t.view_of}"] if t.view_of else [])
            + ([f"grad {t.grad}"] if t.grad else [])}
    for n in snap.nodes.values():
        if n.folded:  # a folded module's box: described above
            if n.repeat in counts and n.key in nodes:  # inside a loop body drawn once
                nodes[n.key]["details"] = [f"{n.folded} ops of one copy of {counts[n.repeat].count}"
                                           ": click the loop's title to draw every copy"]
            continue
        details = [f"at {n.where}"] if n.where else []
        if n.source:
            details.append(n.source)
        for s in n.saved:
            st = ("freed" if s.released else
                  f"STALE: saved v{s.saved_version}, now v{s.version}" if s.is_stale else
                  f"v{s.saved_version}")
            details.append(f"saves {s.name}{' = ' + s.alias if s.alias else ''} "
                           f"{list(s.shape)}: {st}")
            for v, op, w in s.modified_by:
                details.append(f"  modified by {op} at {w or '?'} (-> v{v})")
            nodes[s.key] = {"kind": "saved", "title": f"saved {s.name} of {n.name}",
                            "details": [f"{list(s.shape)} {s.dtype}, {s.nbytes} bytes", st]
                            + [f"modified by {op} at {w or '?'} (-> v{v})"
                               for v, op, w in s.modified_by]}
        if n.outputs:
            details.append("grad_fn of " + ", ".join(n.outputs[:8])
                           + (f", ... ({len(n.outputs) - 8} more)" if len(n.outputs) > 8 else ""))
        if n.repeat in counts:
            details.insert(0, f"one of {counts[n.repeat].count} copies "
                              f"({counts[n.repeat].label}): click the title to draw them all")
        nodes[n.key] = {"kind": "node", "title": n.name, "details": details,
                        "next": list(n.next), "stale": n.stale, "failing": n.failing}
    return {"nodes": nodes, "truncated": snap.truncated, "hidden": snap.hidden_nodes,
            "modules": modules, "repeats": repeats}


MAX_GRAPH_JSON = 12_000  # bytes of hover details synced per panel; beyond, details are dropped
MAX_SVG = 96_000  # bytes of SVG synced (a 130-node model graph: 87 KB); bigger: DOT for viz.js
MAX_TABS = MAX_SVG + 16_000  # bytes of tab HTML per panel: long tables are cut to fit
MAX_DOT = 16_000  # bytes of DOT sent for the browser to lay out; beyond, the text tree
MAX_DOT_ASKED = 64_000  # ... when the user asked for more (expanded a repeat, earlier graphs)


def fit_tabs(snap, svg: str | None, dot: str) -> tuple[dict, str]:
    """The tabs' HTML and the DOT to send, within :data:`MAX_TABS` bytes in all: the kernel's
    SVG up to :data:`MAX_SVG`, else the DOT for the browser to lay out (or the text tree); the
    largest other tabs are cut to what is left, the small ones kept whole."""
    if svg is not None and len(svg) > MAX_SVG:
        svg = None
    if svg is None and len(dot) > MAX_DOT:
        dot = ""
    tab_html = render.tabs(snap, svg if svg is not None or not dot else "", live=True)
    tab_html = render.fit_tabs(tab_html, MAX_TABS, MAX_SVG + 2000)
    return tab_html, (dot if svg is None else "")


def pack(tabs: dict, graph: str) -> str:
    """The ``content`` trait: ``{"tabs": tabs, "graph": graph}`` as JSON, raw-deflated (zlib,
    no header) and base64-encoded after the JSON's length in bytes and a comma (the front end
    inflates it synchronously: extension/inflate.js)."""
    raw = json.dumps({"tabs": tabs, "graph": graph}, separators=(",", ":")).encode("utf-8")
    # level 6: 12 % smaller than 3 for ~0.1 ms more a panel (notebook 07 saves +19.6 KB a cell
    # with it, +19.9 with 3: the 20 KB budget's margin)
    z = zlib.compressobj(6, zlib.DEFLATED, -15)
    return f"{len(raw)}," + base64.b64encode(z.compress(raw) + z.flush()).decode("ascii")


def unpack(content: str) -> dict:
    """``{"tabs": ..., "graph": ...}`` from a ``content`` trait (or a saved widget state's);
    empty ones for a retired panel's ``""``."""
    if not content:
        return {"tabs": {}, "graph": "{}"}
    size, _, data = content.partition(",")
    raw = zlib.decompress(base64.b64decode(data), -15)
    if len(raw) != int(size):
        raise ValueError(f"content inflates to {len(raw)} bytes, its prefix says {size}")
    return json.loads(raw.decode("utf-8"))


def saved_state(state: dict) -> dict:
    """A panel's widget state as saved in a notebook, its ``content`` unpacked into ``tabs`` and
    ``graph`` (what tests and tools read)."""
    return {**state, **unpack(state.get("content", ""))}


def graph_json(snap, folded=(), expanded=()) -> str:
    """:func:`graph_data` as compact JSON, capped at :data:`MAX_GRAPH_JSON` (titles kept)."""
    data = graph_data(snap, folded, expanded)
    text = json.dumps(data, separators=(",", ":"))
    if len(text) > MAX_GRAPH_JSON:
        for info in data["nodes"].values():
            info["details"] = info["details"][:1]
        text = json.dumps(data, separators=(",", ":"))
    if len(text) > MAX_GRAPH_JSON:
        data["nodes"] = {k: {**{x: v[x] for x in ("path",) if x in v}, "kind": v["kind"],
                             "title": v["title"][:40], "next": v.get("next", [])[:8]}
                         for k, v in list(data["nodes"].items())[:200]}
        text = json.dumps(data, separators=(",", ":"))
    return text


_SHARED_LAYOUT = None


def _shared_layout():
    """One ipywidgets Layout for every panel: a DOMWidget otherwise makes one each, and closing
    the panel leaves it open (a widget per cell, forever)."""
    global _SHARED_LAYOUT
    if _SHARED_LAYOUT is None or getattr(_SHARED_LAYOUT, "comm", None) is None:
        from ipywidgets import Layout

        _SHARED_LAYOUT = Layout()
    return _SHARED_LAYOUT


_VIZ_JS = None


def viz_js() -> str:
    """extension/viz.js (@viz-js/viz's ES module: Graphviz compiled to WebAssembly)."""
    global _VIZ_JS
    if _VIZ_JS is None:
        _VIZ_JS = _asset("viz.js")
    return _VIZ_JS


def _compact(text: str, line_comment: str | None) -> str:
    """Front-end source without indentation and whole-line comments: every panel's widget state
    carries it (a saved notebook keeps one copy per panel), so bytes here count per cell.
    Line breaks stay (JavaScript's automatic semicolons depend on them)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line_comment:  # a comment after the code ("x = 1;  // why"), outside any string
            code, sep, _ = line.partition("  " + line_comment + " ")
            if sep and not any(code.count(q) % 2 for q in "\"'`"):
                line = code.rstrip()
        if line and not (line_comment and line.startswith(line_comment)):
            out.append(line)
    return "\n".join(out)


_CODE = None


def panel_code() -> dict:
    """The panel's front end: ``{"code": inflate.js + layout.js + panel.js, "css": panel.css}``,
    sent once per page to the loader (extension/loader.js) that every panel carries as its
    ``_esm``."""
    global _CODE
    if _CODE is None:
        code = "\n".join(_asset(f) for f in ("inflate.js", "layout.js", "panel.js"))
        _CODE = {"code": _compact(code, "//"),
                 "css": _compact(_asset("panel.css"), None)}
    return _CODE


# A retired panel's module (its view is gone: the static copy replaced it).
_RETIRED_ESM = "export default { render() {} };"


LOADER = _compact(_asset("loader.js"), "//")  # a panel's ``_esm``: it asks for the code


class NbgradPanel(anywidget.AnyWidget):
    """One cell's panel: tabs of HTML, the graph as SVG, hover details, selection."""

    # Only the loader: the widget state (and a saved notebook) keeps it once per panel; the
    # code itself comes over the comm once per page (``panel_code``).
    _esm = traitlets.Unicode(LOADER).tag(sync=True)
    # anywidget adds ``_esm`` and its id as traits of each instance, which makes a new class per
    # panel (~0.4 ms a cell): both are declared here once, and add_traits skips them
    _anywidget_id = traitlets.Unicode(f"{__name__}.NbgradPanel").tag(sync=True)

    summary = traitlets.Unicode("", help="one-line summary shown in the header").tag(sync=True)
    # ``tabs`` and ``graph`` reach the front end packed in ``content`` (deflate, base64): a saved
    # notebook keeps the last state of every panel next to its static copy (4x less this way)
    tabs = traitlets.Dict({}, help="tab name -> HTML body, in display order (in ``content``)")
    tab_order = traitlets.List([], help="tab names in display order").tag(sync=True)
    active = traitlets.Unicode("Graph", help="the tab shown").tag(sync=True)
    graph = traitlets.Unicode("{}", help="JSON: graph elements by SVG id (kind, title, details, "
                              "next); one string (in ``content``)")
    content = traitlets.Unicode("", help="``{\"tabs\": tabs, \"graph\": graph}`` as JSON, "
                                "deflated, base64 (:func:`pack`): what the front end draws"
                                ).tag(sync=True)
    selected = traitlets.Unicode("", help="SVG id of the selected graph element (front end sets "
                                 "it)").tag(sync=True)
    collapsed = traitlets.Bool(False, help="the whole panel folded to its header").tag(sync=True)
    dot = traitlets.Unicode("", help="DOT source of the graph: the browser lays it out (viz.js) "
                            "when the Graph tab has no SVG").tag(sync=True)
    folded = traitlets.List([], help="module paths drawn as one box each; the front end folds a "
                            "module (click its cluster title) or expands one (click its box)"
                            ).tag(sync=True)
    expanded = traitlets.List([], help="keys of the repeats drawn in full (every copy of a loop "
                              "body); the front end expands one (click its cluster title) or "
                              "folds it again").tag(sync=True)
    earlier_shown = traitlets.Bool(False, help="the graphs of earlier cells drawn in this panel "
                                   "too (the front end's show / hide button)").tag(sync=True)
    theme = traitlets.Unicode("light", help="light | projector (larger type, high contrast)"
                              ).tag(sync=True)
    values_shown = traitlets.Bool(False, help="values mode in this panel's graph: data and .grad "
                                  "in the boxes (the front end's values button)").tag(sync=True)

    def __init__(self, snap=None, svg: str | None = None, dot: str = "", on_rendered=None,
                 layout_fn=None, earlier_fn=None, on_wake=None, panel_id: str = "",
                 values_fn=None, on_step=None, **kwargs):
        """``layout_fn(dot, snap) -> svg``: lays a refolded graph out in the kernel (None: the
        browser lays it out); ``earlier_fn(snap) -> snapshot or None``: ``snap`` with the
        earlier graphs it folded to a line drawn too (the "show" button); ``on_wake(panel_id)``:
        a retired panel's "interact" button was clicked (any live panel relays it);
        ``on_step(panel, message)``: a "step through backward" button or a Step tab control
        was clicked (stepper.panel_message)."""
        self._static = {"text/html": "", "text/plain": ""}
        self._on_rendered = on_rendered
        self._on_wake = on_wake
        self.panel_id = panel_id
        self.drawn = (None, None, "")  # (snapshot, svg, dot) as first shown: to wake it later
        self._snap = None  # plain data, kept to redraw when the user folds or expands a module
        self._own = None  # this cell's snapshot (``_snap`` adds the earlier graphs once shown)
        self._layout_fn = layout_fn
        self._earlier_fn = earlier_fn
        self._values_fn = values_fn  # snap -> a copy with the values read now (render_values)
        self._on_step = on_step
        self._stepper = None  # the Step tab's walk, once a step button was clicked
        self._plain = None  # this cell's snapshot as taken, with or without values
        self._drawing = False  # update_from sets values_shown itself: nothing to redraw
        self._packing = False  # update_from and _refold pack ``content`` once, after both traits
        kwargs.setdefault("layout", _shared_layout())
        if snap is not None:  # drawn before the comm opens: its first message carries it all
            kwargs.update(self._drawing_of(snap, svg, dot, kwargs.get("theme", "light"),
                                           list(kwargs.get("folded", ())),
                                           list(kwargs.get("expanded", ()))))
            self._drawing = self._packing = True  # (the observers: nothing to redo)
        try:
            super().__init__(**kwargs)
        finally:
            self._drawing = self._packing = False
        self.on_msg(self._front_end_msg)
        if snap is not None:
            self._snap = self._own = self._plain = snap
            self.drawn = (snap, svg, dot)

    def add_traits(self, **traits) -> None:
        """Only the traits not declared already (see ``_anywidget_id``)."""
        new = {k: v for k, v in traits.items() if not self.has_trait(k)}
        if new:
            super().add_traits(**new)

    @traitlets.observe("earlier_shown")
    def _show_earlier(self, change) -> None:
        """The user asked for the earlier graphs (or to hide them): the Graph tab drawn again
        from a snapshot that adds them (taken now), or from this cell's own."""
        own = self._own
        if own is None:
            return
        snap = own
        if change["new"] and self._earlier_fn is not None and own.earlier:
            try:
                snap = self._earlier_fn(own) or own
            except Exception:  # noqa: BLE001 - keep the picture shown
                snap = own
        self._snap = snap
        self._refold(None)

    def _graph_tab(self, svg, snap) -> str:
        shown = self._own.earlier if self._own is not None and snap is not self._own else None
        return (render.graph_html(svg, snap) + render.earlier_html(self._own or snap, True, shown)
                + _values.toggle_html(self.values_shown) + self._step_buttons(snap))

    def _step_buttons(self, snap) -> str:
        if self._on_step is None:
            return ""
        from .stepper import button_html

        return button_html(snap)

    @traitlets.observe("values_shown")
    def _show_values(self, change) -> None:
        """The values button: this cell's graph drawn again with its values (as the cell left
        them in values mode, else read now from the namespace) or without."""
        plain = self._plain
        if plain is None or self._drawing:
            return
        try:
            if not change["new"]:
                snap = _values.without_values(plain)
            elif _values.has_values(plain) or self._values_fn is None:
                snap = plain
            else:
                snap = self._values_fn(plain)
        except Exception:  # noqa: BLE001 - keep the picture shown
            return
        self._snap = self._own = snap
        self._refold(None)

    @traitlets.observe("folded", "expanded")
    def _refold(self, change) -> None:
        """The user folded or expanded a module or a repeat: the graph drawn again (DOT for the
        browser, or laid out here)."""
        snap = self._snap
        if snap is None:
            return
        try:
            dot = render.to_dot(snap, folded=list(self.folded), expanded=list(self.expanded))
            svg = self._layout_fn(dot, snap) if self._layout_fn is not None else None
        except Exception:  # noqa: BLE001 - keep the picture shown
            return
        if svg is not None and len(svg) > MAX_SVG:
            svg = None
        if svg is None and len(dot) > MAX_DOT_ASKED:
            dot = ""  # too big to sync even when asked for: the text tree
        with self.hold_sync(), self._packed():
            self.tabs = {**self.tabs, "Graph": self._graph_tab(svg if svg is not None else "",
                                                               snap)}
            self.graph = graph_json(snap, self.folded, self.expanded)
            self.dot = dot if svg is None else ""

    @contextlib.contextmanager
    def _packed(self):
        """Set ``tabs`` and ``graph`` inside: ``content`` packed once, on the way out."""
        self._packing = True
        try:
            yield
        finally:
            self._packing = False
        self.content = pack(self.tabs, self.graph)

    @traitlets.observe("tabs", "graph")
    def _repack(self, _change) -> None:
        """``tabs`` or ``graph`` set alone (the Step tab): ``content`` follows."""
        if not self._packing:
            self.content = pack(self.tabs, self.graph)

    def update_from(self, snap, svg: str | None, dot: str = "") -> None:
        """Show ``snap``: with ``svg`` laid out here, or None and ``dot`` for the browser."""
        self._snap = self._own = self._plain = snap
        self.drawn = (snap, svg, dot)
        state = self._drawing_of(snap, svg, dot, self.theme, self.folded, self.expanded)
        self._drawing = True
        try:
            self.values_shown = state.pop("values_shown")
        finally:
            self._drawing = False
        self._packing = True  # (``content`` is in ``state``, packed once)
        try:
            with self.hold_sync():
                for name, value in state.items():
                    setattr(self, name, value)
        finally:
            self._packing = False

    def _drawing_of(self, snap, svg, dot, theme, folded, expanded) -> dict:
        """The traits that show ``snap`` (``content`` packed) and, as ``_static``, its static
        copy."""
        from .extension import static_bundle

        values = _values.has_values(snap)
        tab_html, dot = fit_tabs(snap, svg, dot)
        if "Graph" in tab_html:
            tab_html["Graph"] += _values.toggle_html(values) + self._step_buttons(snap)
        self._static = static_bundle(snap, svg, theme)
        graph = graph_json(snap, folded, expanded)
        return {"values_shown": values, "summary": render.summary_text(snap),
                "tab_order": list(tab_html), "tabs": tab_html,
                "active": render.first_tab(tab_html), "graph": graph, "dot": dot,
                "content": pack(tab_html, graph)}

    @property
    def _static_html(self) -> str:
        return self._static["text/html"]

    def static_bundle(self, wake: bool = False) -> dict:
        """The static copy (``text/html`` + ``text/plain``) that replaces a retired panel;
        ``wake``: with its "interact" button (the kernel makes it live again)."""
        out = dict(self._static)
        if wake and self.panel_id:
            out["text/html"] = render.with_wake_button(out["text/html"], self.panel_id)
        return out

    def retire(self) -> None:
        """Close the widget, leaving almost nothing of it in the saved widget state: nbclient
        keeps the last state of every widget it saw, closed or not (40 KB a panel)."""
        if self.comm is not None:
            try:
                self.comm.send({"method": "update", "buffer_paths": [], "state": {
                    "content": "", "tab_order": [], "dot": "", "summary": "",
                    "folded": [], "expanded": [], "_esm": _RETIRED_ESM}})
            except Exception:  # noqa: BLE001 - a comm already gone: nothing was kept
                pass
        self.close()
        # A widget is a reference cycle (its message callbacks hold it): what it drew is let go
        # now, freed as soon as the extension forgets it rather than by a garbage collection
        self._snap = self._own = self._plain = None
        self.drawn = (None, None, "")

    def _front_end_msg(self, _widget, content, _buffers):
        """``{"type": "code"}``: send the panel's code (once per page); ``{"type": "wake",
        "panel": id}``: a retired panel's static copy was clicked, make it live again;
        ``{"type": "viz"}``: send viz.js (a graph the kernel could not lay out);
        ``{"type": "step", "op": ..., "name": ...}``: a step button or a Step tab control;
        ``{"type": "rendered", "ok": b}``: whether viz.js works in this browser."""
        if not isinstance(content, dict):
            return
        if content.get("type") == "code":
            self.send({"type": "code", **panel_code()})
        elif content.get("type") == "wake" and self._on_wake is not None:
            self._on_wake(str(content.get("panel", "")))
        elif content.get("type") == "viz":
            try:
                self.send({"type": "viz", "code": viz_js()})
            except FileNotFoundError:
                self.send({"type": "viz", "code": ""})
        elif content.get("type") == "step" and self._on_step is not None:
            self._on_step(self, content)
        elif content.get("type") == "rendered" and self._on_rendered is not None:
            self._on_rendered(bool(content.get("ok")))

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data)
        data.update(self._static)
        return data, meta
