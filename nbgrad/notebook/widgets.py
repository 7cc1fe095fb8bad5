"""The panel widget: an anywidget whose front end lives in ``extension/`` (ES module + CSS).

The kernel sends finished HTML/SVG per tab and a small JSON description of the graph; the front
end adds tabs, selection, hover details and collapsing. Displayed as a mimebundle that carries the
widget view *and* a static ``text/html`` copy, so a saved notebook stays readable without a kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import anywidget
import traitlets

from . import render


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


def graph_data(snap, folded=()) -> dict:
    """What the front end needs to know about each graph element (hover text, edges), and the
    module clusters (SVG id -> module path) it can fold."""
    nodes = {}
    modules = {}
    rep = getattr(snap, "model", None)
    if rep is not None and rep.clusters:
        from . import model

        for path, c in rep.clusters.items():
            modules[model.cluster_id(path)] = path
            nodes[model.box_id(path)] = {"kind": "module", "title": c["title"], "path": path,
                                         "details": ["folded: click to expand"]}
        snap = model.fold(snap, rep, folded)
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
        if n.folded:
            continue  # a folded module's box: described above
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
            details.append("grad_fn of " + ", ".join(n.outputs))
        nodes[n.key] = {"kind": "node", "title": n.name, "details": details,
                        "next": list(n.next), "stale": n.stale, "failing": n.failing}
    return {"nodes": nodes, "truncated": snap.truncated, "hidden": snap.hidden_nodes,
            "modules": modules}


class NbgradPanel(anywidget.AnyWidget):
    """One cell's panel: tabs of HTML, the graph as SVG, hover details, selection."""

    _esm = _asset("panel.js")
    _css = _asset("panel.css")

    summary = traitlets.Unicode("", help="one-line summary shown in the header").tag(sync=True)
    tabs = traitlets.Dict({}, help="tab name -> HTML body, in display order").tag(sync=True)
    tab_order = traitlets.List([], help="tab names in display order").tag(sync=True)
    active = traitlets.Unicode("Graph", help="the tab shown").tag(sync=True)
    graph = traitlets.Unicode("{}", help="JSON: graph elements by SVG id (kind, title, details, "
                              "next); one string, cheaper to sync than a nested dict"
                              ).tag(sync=True)
    selected = traitlets.Unicode("", help="SVG id of the selected graph element (front end sets it)"
                                 ).tag(sync=True)
    collapsed = traitlets.Bool(False, help="the whole panel folded to its header").tag(sync=True)
    folded = traitlets.List([], help="module paths drawn as one box each; the front end folds a "
                            "module (click its cluster title) or expands one (click its box)"
                            ).tag(sync=True)
    theme = traitlets.Unicode("light", help="light | projector (larger type, high contrast)"
                              ).tag(sync=True)

    def __init__(self, snap=None, svg: str | None = None, layout_timeout: float = 5.0, **kwargs):
        self._static_html = ""
        self._snap = None  # plain data, kept to redraw when the user folds or expands a module
        self._layout_timeout = layout_timeout
        super().__init__(**kwargs)
        if snap is not None:
            self.update_from(snap, svg)

    @traitlets.observe("folded")
    def _refold(self, change) -> None:
        snap = self._snap
        if snap is None or getattr(snap, "model", None) is None:
            return
        try:
            svg = render.dot_to_svg(render.to_dot(snap, folded=list(change["new"])),
                                    timeout=self._layout_timeout)
        except Exception:  # noqa: BLE001 - keep the picture shown
            return
        with self.hold_sync():
            self.tabs = {**self.tabs, "Graph": render.graph_html(svg, snap)}
            self.graph = json.dumps(graph_data(snap, change["new"]), separators=(",", ":"))

    def update_from(self, snap, svg: str | None) -> None:
        self._snap = snap
        tab_html = render.tabs(snap, svg)
        self._static_html = render.panel_html(snap, svg, tab_html, theme=self.theme)
        with self.hold_sync():
            self.summary = render.summary_text(snap)
            self.tab_order = list(tab_html)
            self.tabs = tab_html
            self.active = render.first_tab(tab_html)
            self.graph = json.dumps(graph_data(snap, self.folded), separators=(",", ":"))

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data)
        data["text/html"] = self._static_html
        data["text/plain"] = self.summary or data.get("text/plain", "")
        return data, meta
