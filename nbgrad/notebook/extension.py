"""The IPython extension: ``%load_ext nbgrad``, the per-cell panel and the ``%nbgrad`` magic.

``pre_run_cell`` notes the engine's activity counters and the memory counters; ``post_run_cell``
compares. A cell that touched nothing costs two tuple reads. A cell that touched nbgrad is compared
with the previous one (``focus``): the panel draws what it made or changed, folds earlier graphs to
a line, and is skipped when nothing autograd-related changed. The last ``KEEP_LIVE`` panels are live
widgets; older ones are replaced by their static copy and closed, so nothing grows with the number
of cells; the last ``KEEP_RETIRED`` of those can wake (their "interact" button) while the kernel
runs. The extension keeps plain data only (names, ids, versions), never a tensor or a node, and
any exception (an interrupt included) inside it becomes a one-line message.
"""

from __future__ import annotations

import gc
import shlex
import sys
import warnings
import uuid
from collections import OrderedDict, deque

from . import adapter as A
from . import focus as _focus
from . import inspect as _inspect

_STATE: dict[int, NbgradExtension] = {}  # id(ipython shell) -> loaded extension
THEMES = ("light", "projector")


KEEP_LIVE = 8  # panels kept as live widgets; older ones become their static copy and close
KEEP_RETIRED = 32  # retired panels that can still wake (their data kept, plain and capped)
MAX_STATIC_BYTES = 44_000  # a panel's static copy at most (saved with the notebook, every cell)
MAX_STATIC_SVG = 32_000  # bytes of SVG drawn as the static copy's image; a bigger one: the tree
STATIC_TARGET = 16_000  # bytes a static copy aims at (a saved notebook keeps one per cell) ...
STATIC_TABS = 6_000  # ... its tabs but the Graph cut to what the picture leaves, at least this


def _safe_str(obj) -> str:
    """``str(obj)``, or a placeholder when its ``__str__`` raises."""
    try:
        return str(obj)
    except Exception:  # noqa: BLE001
        return f"<{type(obj).__name__} whose message cannot be read>"


class NbgradExtension:
    """Per-shell state of the extension: settings and what the previous cell left."""

    def __init__(self, ip):
        self.ip = ip
        self.enabled = True
        self.max_nodes = _inspect.DEFAULT_MAX_NODES
        self.widget = True  # False: static HTML only (also when no kernel comm is available)
        self.show_saved = True
        self.layout_timeout = 5.0  # seconds; a layout that takes longer falls back to text
        self.frontend_renders = False  # a widget reported that viz.js works in its browser
        self.tracker = _focus.Tracker()
        self.theme = "light"  # "projector": larger fonts, high contrast
        self.models = None  # model_hooks.ModelTracker (module calls, gradients) while loaded
        self.values = None  # values mode: a render_values.EdgeGrads (`%nbgrad set values=on`)
        self._activity_before = None
        self._memory_before = None
        self._live: deque = deque()  # (panel, display_id) of the live widgets, oldest first
        self.keep_live = KEEP_LIVE
        # panel id -> (drawn, folded, display id, static copy) of the retired panels that can
        # still wake (plain data; the oldest are dropped)
        self._retired: OrderedDict = OrderedDict()
        self._panels = 0
        self._session = uuid.uuid4().hex[:8]  # a panel id of another kernel never matches

    # -- hooks --------------------------------------------------------------------------------

    def pre_run_cell(self, info=None):
        try:
            A.engines_loaded()  # (torch imported by the last cell: its backward observers)
            self._activity_before = A.activity()
            self._memory_before = _inspect.memory_probe()
            if self.values is not None:
                self.values.new_cell()
            if self.models is not None:
                self.models.light = not A.recording()  # record=off: no parameter hooked
                self.models.reset_cell()
                if not self.models.global_hooks:
                    from . import model_report

                    self.models.watch(model_report.scan(self.ip.user_ns, self._hidden()).tops)
            if self.enabled:
                A.cell_started(self.ip)  # torch: the recorder of lines and writes, last
        except Exception as exc:  # noqa: BLE001 - the hook must never break the cell
            self._warn(exc)

    def post_run_cell(self, result):
        collecting = gc.isenabled()  # the panel's temporaries die young: none are scanned
        gc.disable()
        try:
            self._post_run_cell(result)
        finally:
            if collecting:
                gc.enable()

    def _post_run_cell(self, result):
        try:
            for note in A.cell_finished():  # first: the panel's own reads are not recorded
                print(f"nbgrad: {note}; the panel shows what it could read.", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)
        try:
            if not self.enabled:
                return
            self._after_cell(result)
        except KeyboardInterrupt:  # an interrupt landing while the panel is built
            print("nbgrad: panel interrupted; your cell ran normally.", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    def _warn(self, exc):
        text = (_safe_str(exc).splitlines() or [""])[0][:200]  # one line, whatever it says
        print(f"nbgrad: the notebook panel failed ({type(exc).__name__}: {text}); "
              "your cell ran normally. `%nbgrad off` silences the panel.", file=sys.stderr)

    def _after_cell(self, result):
        before = self._activity_before
        after = A.activity()
        self._activity_before = after
        _inspect.stamp_cells()
        err = getattr(result, "error_in_exec", None)
        autograd_err = err if _inspect.is_autograd_error(err) else None
        if before is not None and after == before and autograd_err is None:
            return
        delta = tuple(a - b for a, b in zip(after, before)) if before is not None else None
        named = _inspect.named_tensors(self.ip.user_ns,
                                       skip=getattr(self.ip, "user_ns_hidden", ()))
        focus = self.tracker.update(named, error=autograd_err is not None,
                                    bumped=delta is None or delta[1] > 0)
        rep = scanned = None
        if self.models is not None:
            from . import model_report

            if self.models.light:  # record=off: the gradients read after the cell
                from . import grad_light

                grad_light.after_cell(self.models)
            scanned = model_report.scan(self.ip.user_ns, self._hidden())
            rep = model_report.report(self.models, self.ip.user_ns, scanned=scanned,
                                      failed=autograd_err is not None)
            if not rep.has_news():
                rep = None
        if not focus.relevant and rep is None:
            return
        snap = _inspect.snapshot(focus.named if focus.relevant else [], previous=focus.previous,
                                 max_nodes=self.max_nodes, error=autograd_err,
                                 show_saved=self.show_saved, memory_before=self._memory_before)
        self.tracker.fold(focus, snap)
        if self.values is not None:  # values mode: data, grads, edge gradients (render_values)
            from . import render_values

            render_values.annotate(snap, focus.named if focus.relevant else [], self.values)
            self.values.new_cell()  # (the nodes its hooks read are not held past the cell)
        if rep is not None or (self.models is not None and snap.nodes):
            from . import model_report

            snap.model = model_report.with_graph(rep, self.models, self.ip.user_ns, snap,
                                                 scanned=scanned, named=named)
        if snap.is_empty() and snap.model is None:
            return
        if delta is not None:
            snap.memory["activity_delta"] = delta
        self.show(snap)

    # -- snapshot and display -----------------------------------------------------------------

    def _hidden(self):
        return getattr(self.ip, "user_ns_hidden", ())

    def take_snapshot(self, error=None, named=None):
        """A snapshot of ``named`` (default: every named tensor of the namespace)."""
        if named is None:
            named = _inspect.named_tensors(self.ip.user_ns, skip=self._hidden())
        return _inspect.snapshot(named, max_nodes=self.max_nodes, error=error,
                                 show_saved=self.show_saved, memory_before=self._memory_before)

    def layout(self, dot: str, snap) -> str | None:
        """SVG laid out here, bounded by ``layout_timeout``; None (the text tree) on failure."""
        from . import layout

        try:
            return layout.svg(dot, timeout=self.layout_timeout)  # nodes as drawn (folded)
        except (TimeoutError, ValueError) as exc:
            print(f"nbgrad: graph layout failed ({_safe_str(exc)}); showing the graph as text",
                  file=sys.stderr)
            return None

    def show(self, snap):
        from IPython.display import display

        from . import render

        folded = None
        if snap.model is not None:
            from . import model_report

            folded = model_report.default_folded(snap.model, len(snap.nodes),
                                                 loop=snap.model.is_loop)
        dot = render.to_dot(snap, folded=folded) if (snap.nodes or snap.tensors) else ""
        if "[id=" not in dot:  # nothing to draw (a cell that freed its graph): no layout
            dot = ""
        panel_cls = None
        if self.widget and _has_comm(self.ip):
            try:
                from .widgets import NbgradPanel as panel_cls
            except ImportError:  # no anywidget / ipywidgets: the static panel still works
                panel_cls = None
        if panel_cls is None:
            svg = self.layout(dot, snap) if dot else None
            display(static_bundle(snap, svg, self.theme), raw=True)
            return
        # Laid out here, whatever the front end: a browser busy with Run All, or a panel retired
        # before its browser-side layout came back, would otherwise keep the text tree; the
        # static copy needs the SVG too. The browser lays out only what the kernel could not
        # (a layout past its time bound, an SVG too big to sync): see widgets.fit_tabs.
        svg = self.layout(dot, snap) if dot else None
        panel = self._panel(panel_cls, snap, svg, dot, folded)
        data, meta = _bundle(panel)
        handle = display(data, metadata=meta, raw=True, display_id=True)
        self._keep(panel, getattr(handle, "display_id", None))

    def _panel(self, panel_cls, snap, svg, dot, folded):
        self._panels += 1
        return panel_cls(snap, svg, dot=dot, on_rendered=self._rendered, folded=folded or [],
                         theme=self.theme, layout_fn=self.layout, earlier_fn=self.with_earlier,
                         on_wake=self.wake, panel_id=f"{self._session}-{self._panels}",
                         values_fn=self.with_values, on_step=self.step_message)

    def step_message(self, panel, content):
        """A panel's "step through backward" button or Step tab control (stepper.py)."""
        from . import stepper

        stepper.panel_message(panel, content, self.ip.user_ns, self._hidden())

    def with_values(self, snap):
        """``snap`` with its named tensors' values read now (a panel's values button)."""
        from . import render_values

        return render_values.with_values_now(snap, self.ip.user_ns)

    def _keep(self, panel, display_id):
        self._live.append((panel, display_id))
        while len(self._live) > self.keep_live:
            self._retire(*self._live.popleft())

    def wake(self, panel_id: str):
        """A retired panel's "interact" button was clicked: show it as a live widget again, in
        place (its display id), as it was first drawn; the oldest live one retires instead."""
        entry = self._retired.pop(panel_id, None)
        if entry is None:
            return
        from IPython.display import update_display

        from .widgets import NbgradPanel

        (snap, svg, dot), folded, display_id, _static = entry
        panel = self._panel(NbgradPanel, snap, svg, dot, folded)
        panel.panel_id = panel_id
        self._panels -= 1
        data, meta = _bundle(panel)
        update_display(data, metadata=meta, raw=True, display_id=display_id)
        self._keep(panel, display_id)

    def with_earlier(self, snap):
        """A snapshot of ``snap``'s named tensors and of the earlier graphs it folded to a line,
        read now (a panel's "show" button), the named leaves with them (drawn where a graph
        reaches them); None when none of them is bound any more."""
        want = set(snap.earlier)
        want.update(n for t in snap.tensors if t.named for n in t.name.split(" = "))
        named = [(n, t) for n, t in _inspect.named_tensors(self.ip.user_ns, skip=self._hidden())
                 if n in want or (A.grad_fn(t) is None and t.requires_grad)]  # (leaves: named)
        if not any(n in want for n, _ in named):
            return None
        out = _inspect.snapshot(named, max_nodes=self.max_nodes, show_saved=self.show_saved)
        if snap.model is not None and self.models is not None:
            from dataclasses import replace

            from . import model_report

            out.model = replace(snap.model, clusters=model_report.graph_clusters(
                self.models, self.ip.user_ns, out, skip=self._hidden()))
        return out

    def _rendered(self, ok: bool):
        self.frontend_renders = bool(ok)

    def _retire(self, panel, display_id):
        """Replace an old panel's output by its static copy (with an "interact" button while the
        panel can be woken) and close its widget."""
        try:
            if display_id is not None:
                _update_unflushed(self.ip, panel.static_bundle(wake=True), display_id)
                self._retired[panel.panel_id] = (panel.drawn, list(panel.folded), display_id,
                                                 panel.static_bundle())
                while len(self._retired) > KEEP_RETIRED:  # the oldest can no longer wake
                    _, (_, _, old_id, static) = self._retired.popitem(last=False)
                    _update_unflushed(self.ip, static, old_id)
        finally:
            panel.retire()

    def close_panels(self):
        while self._live:
            self._retire(*self._live.popleft())

    # -- the %nbgrad magic --------------------------------------------------------------------

    def magic(self, line: str):
        """%nbgrad on|off|status | graph NAME | step LOSS | set max_nodes=N widget=on|off
        saved=on|off values=on|off timeout=SECONDS theme=light|projector live=N (panels kept as
        live widgets)
        record=on|off (torch: lines of nodes, in-place writes and cuts; off: light watching) |
        torch [on|off|status] (``import torch`` resolves to nbgrad: nbgrad.as_torch)"""
        try:
            return self._magic(line)
        except Exception as exc:  # noqa: BLE001 - a magic answers in one line
            print(f"nbgrad: {type(exc).__name__}: {_safe_str(exc).splitlines()[0][:200]}",
                  file=sys.stderr)
            return None

    def _magic(self, line: str):
        args = line.strip().split(None, 1)
        cmd = args[0] if args else "status"
        rest = args[1].strip() if len(args) > 1 else ""
        if cmd == "on":
            self.enabled = True
            print("nbgrad panel: on")
        elif cmd == "off":
            self.enabled = False
            print("nbgrad panel: off")
        elif cmd == "status":
            print(self.status())
        elif cmd == "graph":
            return self._graph(rest)
        elif cmd == "torch":
            from nbgrad import as_torch

            print(as_torch.switch(rest))
        elif cmd == "set":
            self._set(rest)
        elif cmd == "step":  # backward one node at a time (stepper.py)
            from . import stepper

            return stepper.step_magic(self, rest)
        else:
            print("usage: %nbgrad on|off|status | graph NAME | step LOSS | set max_nodes=N "
                  "widget=on|off saved=on|off values=on|off timeout=SECONDS "
                  "theme=light|projector live=N | torch [on|off]")
        return None

    def _graph(self, expr: str):
        if not expr:
            print("usage: %nbgrad graph NAME (a tensor, or an expression giving one)")
            return None
        ns = self.ip.user_ns
        if expr.isidentifier() and expr not in ns:
            print(f"nbgrad: no variable named {expr!r}")
            return None
        try:
            value = eval(expr, ns)  # noqa: S307 - the user's own expression
        except Exception as exc:  # noqa: BLE001
            print(f"nbgrad: could not evaluate {_inspect.short(expr)!r}: {type(exc).__name__}: "
                  f"{_safe_str(exc).splitlines()[0][:200] if _safe_str(exc) else ''}")
            return None
        items = value if type(value) in (list, tuple) else [value]
        if not items or not all(A.is_tensor(t) for t in items):
            print(f"nbgrad: {_inspect.short(expr)!r} is a {type(value).__name__}, not a tensor")
            return None
        from nbgrad import viz

        return viz.graph(value, show_saved=self.show_saved, max_nodes=self.max_nodes, names=ns)

    def _set(self, rest: str):
        try:
            items = shlex.split(rest, comments=True)  # `%nbgrad set values=on  # why`
        except ValueError as exc:
            print(f"nbgrad: cannot read {rest!r}: {exc}")
            return
        for item in items:
            k, _, v = item.partition("=")
            if k == "max_nodes":
                if not v.strip().isdigit() or int(v) < 1:
                    print(f"nbgrad: max_nodes must be a positive integer, not {v!r}")
                    continue
                self.max_nodes = int(v)
            elif k == "live":
                if not v.strip().isdigit():
                    print(f"nbgrad: live must be a number of panels, not {v!r}")
                    continue
                self.keep_live = int(v)
            elif k == "timeout":
                try:
                    self.layout_timeout = float(v)
                    assert self.layout_timeout > 0
                except (ValueError, AssertionError):
                    print(f"nbgrad: timeout must be a positive number of seconds, not {v!r}")
                    continue
            elif k == "theme":
                if v not in THEMES:
                    print(f"nbgrad: theme must be one of {', '.join(THEMES)}, not {v!r}")
                    continue
                self.theme = v
            elif k == "record":  # torch: the per-op recorder of lines, writes and cuts
                flag = v.lower() in ("1", "on", "true", "yes")
                if not flag and v.lower() not in ("0", "off", "false", "no"):
                    print(f"nbgrad: record must be on or off, not {v!r}")
                    continue
                from . import adapter

                adapter.set_recording(flag)
            elif k == "values":  # data, grads and edge gradients in the graph
                flag = v.lower() in ("1", "on", "true", "yes")
                if not flag and v.lower() not in ("0", "off", "false", "no"):
                    print(f"nbgrad: values must be on or off, not {v!r}")
                    continue
                self.set_values(flag)
            elif k in ("widget", "saved"):
                flag = v.lower() in ("1", "on", "true", "yes")
                if not flag and v.lower() not in ("0", "off", "false", "no"):
                    print(f"nbgrad: {k} must be on or off, not {v!r}")
                    continue
                setattr(self, "widget" if k == "widget" else "show_saved", flag)
            else:
                print(f"nbgrad: unknown setting {k!r} (max_nodes, widget, saved, timeout, "
                      "theme, live, record, values)")
        print(self.status())

    def set_values(self, on: bool) -> None:
        """Values mode on (its edge hooks observe each backward) or off (nothing runs)."""
        from . import render_values

        if on and self.values is None:
            self.values = render_values.EdgeGrads()
            self.values.install()
        elif not on and self.values is not None:
            self.values.uninstall()
            self.values = None

    def status(self) -> str:
        from . import layout

        return (f"nbgrad panel: {'on' if self.enabled else 'off'}; max_nodes={self.max_nodes}; "
                f"widget={'on' if self.widget else 'off'}; "
                f"saved={'on' if self.show_saved else 'off'}; theme={self.theme}; "
                f"values={'on' if self.values is not None else 'off'}; "
                f"live={self.keep_live}; record={'on' if A.recording() else 'off'}; "
                f"timeout={self.layout_timeout:g} s"
                f"; layout: {'pygraphviz' if layout.available() else 'text only (no pygraphviz)'}"
                + ("; the browser can lay out (viz.js)" if self.frontend_renders else ""))


def _bundle(panel) -> tuple[dict, dict]:
    """What ``display(panel)`` publishes (the widget view, the static copy, the summary), asked
    of the panel directly: IPython's formatters would also look up a dozen repr methods on it
    that it does not have (~0.1 ms a panel)."""
    out = panel._repr_mimebundle_()
    data, meta = out if isinstance(out, tuple) else (out, {})
    return data, (meta or None)


def _no_flush():
    pass


def _update_unflushed(ip, data: dict, display_id) -> None:
    """``update_display(data, raw=True, display_id=...)`` without flushing stdout and stderr
    first. ipykernel's display publisher flushes both before every message, each flush a wait
    for its IO thread (~0.2 ms an update at load 10); an update replaces an earlier cell's output,
    so no printed text has to reach the page before it (the cell's own text was flushed with its
    own display, the panel, just before)."""
    from IPython.display import update_display

    pub = getattr(ip, "display_pub", None)
    if pub is None or not hasattr(pub, "_flush_streams"):
        update_display(data, raw=True, display_id=display_id)
        return
    pub._flush_streams = _no_flush  # (this call only: the class's method is back just after)
    try:
        update_display(data, raw=True, display_id=display_id)
    finally:
        del pub._flush_streams


def static_bundle(snap, svg, theme: str = "light") -> dict:
    """The panel as static HTML within MAX_STATIC_BYTES: the graph as an image if its SVG is
    within MAX_STATIC_SVG (else the text tree), the other tabs cut to what the picture leaves of
    STATIC_TARGET, STATIC_TABS at least (a saved notebook keeps one such copy per cell)."""
    from . import render

    if svg is not None and len(svg) > MAX_STATIC_SVG:
        svg = None
    tab_html = render.tabs(snap, svg)
    graph = render.graph_html(svg, snap, inline=False)
    cut = render.fit_tabs({k: v for k, v in tab_html.items() if k != "Graph"},
                          max(STATIC_TABS, STATIC_TARGET - len(graph)))
    tab_html = {k: cut.get(k, v) for k, v in tab_html.items()}
    body = render.panel_html(snap, svg, tab_html, theme=theme, graph=graph)
    return {"text/html": body, "text/plain": render.summary_text(snap)}


def _has_comm(ip) -> bool:
    """Widgets need a kernel with comms (ipykernel); a terminal IPython gets static HTML."""
    return getattr(ip, "kernel", None) is not None


def load_ipython_extension(ip):
    """Register the hooks, the ``%nbgrad`` magic and Tensor's HTML repr; twice is a no-op."""
    if id(ip) in _STATE:
        return
    ext = NbgradExtension(ip)
    _STATE[id(ip)] = ext
    ip.events.register("pre_run_cell", ext.pre_run_cell)
    ip.events.register("post_run_cell", ext.post_run_cell)
    ip.register_magic_function(ext.magic, magic_kind="line", magic_name="nbgrad")
    try:
        from . import register_tensor_html

        register_tensor_html(ip)
    except Exception as exc:  # noqa: BLE001
        warnings.warn(f"nbgrad: no HTML repr for tensors ({exc})", stacklevel=2)
    try:
        from .model_hooks import ModelTracker

        ext.models = ModelTracker()
        ext.models.install()
    except Exception as exc:  # noqa: BLE001 - the graph panel works without the model panel
        ext.models = None
        warnings.warn(f"nbgrad: no model panel ({exc})", stacklevel=2)
    _warm_up_layout()
    ext.pre_run_cell()


def _warm_up_layout():
    """Load Graphviz's library and plugins now: the first layout costs ~20 ms more."""
    try:
        from . import layout

        layout.svg("digraph { a -> b }")
    except Exception:  # noqa: BLE001 - only a warm-up
        pass


def unload_ipython_extension(ip):
    """Remove everything :func:`load_ipython_extension` registered."""
    ext = _STATE.pop(id(ip), None)
    if ext is None:
        return
    for name, cb in (("pre_run_cell", ext.pre_run_cell), ("post_run_cell", ext.post_run_cell)):
        try:
            ip.events.unregister(name, cb)
        except ValueError:
            pass
    ip.magics_manager.magics["line"].pop("nbgrad", None)
    A.cell_finished()  # (the recorder of the cell running %unload_ext stops now)
    ext._live.clear()  # the last panels stay live widgets on the page
    ext._retired.clear()  # (their static copies stay; a click on "interact" does nothing now)
    if ext.models is not None:
        ext.models.uninstall()
    ext.set_values(False)
    ext.ip = None


def get_extension(ip=None):
    """The loaded extension of ``ip`` (default: the running shell), or None."""
    if ip is None:
        from IPython import get_ipython

        ip = get_ipython()
    return _STATE.get(id(ip)) if ip is not None else None
