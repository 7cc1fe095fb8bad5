"""The IPython extension: ``%load_ext nbgrad``, the per-cell panel and the ``%nbgrad`` magic.

``pre_run_cell`` notes :func:`nbgrad.autograd.graph.activity` (a tuple of counters) and the memory
counters; ``post_run_cell`` compares. A cell that touched nothing costs two tuple reads. Only a
cell that created nodes, bumped a version, allocated or freed a storage, or raised an autograd
error gets a snapshot and a panel. The extension keeps plain data only (names, ids, versions), never
a tensor or a node, and any exception inside it becomes a one-line warning.
"""

from __future__ import annotations

import shlex
import sys
import warnings

from . import inspect as _inspect

_STATE: dict[int, NbgradExtension] = {}  # id(ipython shell) -> loaded extension


class NbgradExtension:
    """Per-shell state of the extension: settings and what the previous cell left."""

    def __init__(self, ip):
        self.ip = ip
        self.enabled = True
        self.max_nodes = _inspect.DEFAULT_MAX_NODES
        self.widget = True  # False: static HTML only (also when no kernel comm is available)
        self.show_saved = True
        self.layout_timeout = 5.0  # seconds; a layout that takes longer falls back to text
        self._activity_before = None
        self._memory_before = None
        self._versions: dict = {}

    # -- hooks --------------------------------------------------------------------------------

    def pre_run_cell(self, info=None):
        try:
            from nbgrad.autograd import graph

            self._activity_before = graph.activity()
            self._memory_before = _inspect.memory_probe()
        except Exception as exc:  # noqa: BLE001 - the hook must never break the cell
            self._warn(exc)

    def post_run_cell(self, result):
        try:
            if not self.enabled:
                return
            self._after_cell(result)
        except Exception as exc:  # noqa: BLE001
            self._warn(exc)

    def _warn(self, exc):
        text = (str(exc).splitlines() or [""])[0][:200]  # one line, whatever the exception says
        print(f"nbgrad: the notebook panel failed ({type(exc).__name__}: {text}); "
              "your cell ran normally. `%nbgrad off` silences the panel.", file=sys.stderr)

    def _after_cell(self, result):
        from nbgrad.autograd import graph

        before = self._activity_before
        after = graph.activity()
        self._activity_before = after
        err = getattr(result, "error_in_exec", None)
        autograd_err = err if _inspect.is_autograd_error(err) else None
        if before is not None and after == before and autograd_err is None:
            return
        delta = tuple(a - b for a, b in zip(after, before)) if before is not None else None
        snap = self.take_snapshot(error=autograd_err)
        self._versions = _inspect.versions_of(snap)
        if snap.is_empty():
            return
        if delta is not None:
            snap.memory["activity_delta"] = delta
        self.show(snap)

    # -- snapshot and display -----------------------------------------------------------------

    def take_snapshot(self, error=None, named=None):
        ns = self.ip.user_ns
        if named is None:
            named = _inspect.named_tensors(ns, skip=getattr(self.ip, "user_ns_hidden", ()))
        return _inspect.snapshot(named, previous=self._versions, max_nodes=self.max_nodes,
                                 error=error, show_saved=self.show_saved,
                                 memory_before=self._memory_before)

    def show(self, snap):
        from IPython.display import display

        from . import render

        svg = None
        if snap.nodes or snap.tensors:
            try:
                svg = render.dot_to_svg(render.to_dot(snap), timeout=self.layout_timeout)
            except Exception as exc:  # noqa: BLE001 - a layout failure leaves the text tree
                print(f"nbgrad: graph layout failed ({exc}); showing the graph as text",
                      file=sys.stderr)
        panel_cls = None
        if self.widget and _has_comm(self.ip):
            try:
                from .widgets import NbgradPanel as panel_cls
            except ImportError:  # no anywidget / ipywidgets: the static panel still works
                panel_cls = None
        if panel_cls is not None:
            display(panel_cls(snap, svg))
        else:
            display({"text/html": render.panel_html(snap, svg),
                     "text/plain": render.summary_text(snap)}, raw=True)

    # -- the %nbgrad magic --------------------------------------------------------------------

    def magic(self, line: str):
        """%nbgrad on|off|status | graph EXPR | set max_nodes=N widget=on|off saved=on|off |
        torch [on|off]  (``import torch`` resolves to nbgrad: nbgrad.as_torch)"""
        args = line.strip().split(None, 1)
        cmd = args[0] if args else "status"
        rest = args[1] if len(args) > 1 else ""
        if cmd == "on":
            self.enabled = True
            print("nbgrad panel: on")
        elif cmd == "off":
            self.enabled = False
            print("nbgrad panel: off")
        elif cmd == "status":
            print(self.status())
        elif cmd == "graph":
            if not rest:
                print("usage: %nbgrad graph EXPR")
                return None
            value = eval(rest, self.ip.user_ns)  # noqa: S307 - the user's own expression
            from nbgrad import viz

            return viz.graph(value, show_saved=self.show_saved, max_nodes=self.max_nodes,
                             names=self.ip.user_ns)
        elif cmd == "torch":
            from nbgrad import as_torch

            print(as_torch.switch(rest))
        elif cmd == "set":
            for item in shlex.split(rest):
                k, _, v = item.partition("=")
                if k == "max_nodes":
                    self.max_nodes = max(1, int(v))
                elif k in ("widget", "saved"):
                    flag = v.lower() in ("1", "on", "true", "yes")
                    setattr(self, "widget" if k == "widget" else "show_saved", flag)
                else:
                    print(f"nbgrad: unknown setting {k!r} (max_nodes, widget, saved)")
            print(self.status())
        else:
            print("usage: %nbgrad on|off|status | graph EXPR | set max_nodes=N widget=on|off "
                  "saved=on|off | torch [on|off]")
        return None

    def status(self) -> str:
        from . import render

        return (f"nbgrad panel: {'on' if self.enabled else 'off'}; max_nodes={self.max_nodes}; "
                f"widget={'on' if self.widget else 'off'}; "
                f"saved={'on' if self.show_saved else 'off'}"
                f"; graphviz dot: {'found' if render.dot_available() else 'missing'}")


def _has_comm(ip) -> bool:
    """Widgets need a kernel with comms (ipykernel); a terminal IPython gets static HTML."""
    return getattr(ip, "kernel", None) is not None


def _html_formatter(t):
    from .render import tensor_html

    return tensor_html(t)


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
        import nbgrad

        if not hasattr(nbgrad.Tensor, "_repr_html_"):
            ip.display_formatter.formatters["text/html"].for_type(nbgrad.Tensor, _html_formatter)
            ext._formatter = True
    except Exception as exc:  # noqa: BLE001
        warnings.warn(f"nbgrad: no HTML repr for tensors ({exc})", stacklevel=2)
    _warm_up_dot()
    ext.pre_run_cell()


def _warm_up_dot():
    """Start graphviz's dot now, off the main thread: its first layout costs ~20 ms more."""
    import threading

    def warm():
        try:
            from . import render

            render.dot_to_svg("digraph { a }")
        except Exception:  # noqa: BLE001 - only a warm-up
            pass

    threading.Thread(target=warm, name="nbgrad-dot-warmup", daemon=True).start()


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
    if getattr(ext, "_formatter", False):
        try:
            import nbgrad

            ip.display_formatter.formatters["text/html"].pop(nbgrad.Tensor, None)
        except Exception:  # noqa: BLE001
            pass
    ext.ip = None


def get_extension(ip=None):
    """The loaded extension of ``ip`` (default: the running shell), or None."""
    if ip is None:
        from IPython import get_ipython

        ip = get_ipython()
    return _STATE.get(id(ip)) if ip is not None else None
