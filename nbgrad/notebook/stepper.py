"""Backward step by step: ``%nbgrad step loss`` (or :func:`step`).

The walk is the engine's own (``adapter.backward_walk``: nbgrad.autograd.stepping.BackwardWalk,
the engine's order and calls, one node per click): this module only draws it. Each state shows
the graph with the nodes that ran (green), the one that runs next (yellow), the gradient sent
along each edge so far, every leaf's data and ``.grad`` (values mode, a toggle), and for the node
that just ran: the gradient it received (as the sum of what arrived along each edge when it was
reached more than once), the formula its row applies with the saved values it used, and what it
sent along each edge. An error the node raised (a saved tensor modified in place) stops the walk
there with backward()'s own message and provenance. Next / previous / run to end: previous only
shows an earlier state again (the gradients already accumulated stay, as in the engine).

nbgrad's engine only: PyTorch's runs a backward as one call (``adapter.NO_WALK``).
The panel holds the graph (strong references, as ``loss`` does) only until the walk is over.
"""

from __future__ import annotations

import html
import weakref

from . import adapter as A
from . import inspect as _inspect
from . import render_values as V

MAX_NODES = 120  # nodes drawn; a bigger graph still steps, its picture is the text list
C_DONE = "#d6f5d0"
C_NEXT = "#fff3a0"
C_NOW = "#ffd08a"
C_ERR = "#ff9e9e"


class _NodeView:
    __slots__ = ("key", "name", "where", "source", "next", "formula", "leaf", "leaf_name")

    def __init__(self, node, names):
        self.key = f"n{id(node)}"
        self.name = A.node_name(node)
        self.where, self.source = _inspect._where_of(A.raw_where(node))
        self.next = [f"n{id(c)}" for c in A.next_nodes(node)]
        self.formula = A.formula_lines(node)
        var = A.leaf_variable(node)
        self.leaf = weakref.ref(var) if var is not None else None
        self.leaf_name = names.get(id(var), "") if var is not None else ""


class StepPanel:
    """The walk of ``root.backward()`` and its views; :meth:`next`, :meth:`prev`,
    :meth:`run_to_end`, :meth:`html` (the current state), :attr:`walk` (the engine's walk).

    Raises RuntimeError as ``root.backward()`` does (no grad_fn, not a scalar), and
    NotImplementedError for a torch tensor."""

    def __init__(self, root, named=(), root_name: str = "loss", values: bool = True):
        names = {}
        self.outputs = {}  # node key -> [(name, kept data)] of the named tensors it made
        for n, t in named:
            names.setdefault(id(t), n)
            try:
                fn = A.grad_fn(t)
                if fn is not None and t is not root:
                    self.outputs.setdefault(f"n{id(fn)}", []).append((n, V.keep(A.array(t))))
            except Exception:  # noqa: BLE001 - an unreadable tensor is left out
                pass
        self.walk = A.backward_walk(root, keep=V.keep)
        self.root_name = root_name
        self.values = values
        fn = A.grad_fn(root)
        self.nodes: dict = {}  # key -> _NodeView, in the order reached
        stack = [fn] if fn is not None else []
        seen = {id(fn)}
        while stack and len(self.nodes) < 10_000:
            n = stack.pop()
            v = _NodeView(n, names)
            self.nodes[v.key] = v
            for c in A.next_nodes(n):
                if id(c) not in seen:
                    seen.add(id(c))
                    stack.append(c)
        self.root_key = f"n{id(fn)}" if fn is not None else ""
        self.root_shape = tuple(A.shape(root))
        self.root_value = V.keep(A.array(root))
        self.saved = {}  # step index -> [(name, kept value)] read just before the node ran
        self.leaf_grads = {}  # step index -> text of the leaf's .grad after AccumulateGrad
        self.pos = 0  # the state shown: this many nodes have run
        self._widget = None
        self._html = None

    # -- moving ------------------------------------------------------------------------------

    @property
    def steps(self) -> list:
        return self.walk.steps

    def _run_one(self):
        node = self.walk.pending()
        if node is None:
            return None
        i = len(self.walk.steps)
        self.saved[i] = [(name, V.text(V.keep(val)) if hasattr(val, "shape") else
                          "freed" if val is None else _inspect.short(str(val)))
                         for name, val in A.saved_inputs(node)]
        st = self.walk.step()
        if st is not None and st.leaf is not None:
            view = self.nodes.get(st.key)
            var = view.leaf() if view is not None and view.leaf is not None else None
            g = A.grad(var) if var is not None else None
            self.leaf_grads[i] = V.text(V.keep(A.array(g))) if g is not None else ""
        return st

    def next(self):
        """One node further (running it when it has not run yet); returns the state shown."""
        if self.pos < len(self.walk.steps):
            self.pos += 1
        elif not self.walk.done and self._run_one() is not None:
            self.pos = len(self.walk.steps)
        self._refresh()
        return self.pos

    def prev(self):
        """Show the state before the last node shown (nothing is undone)."""
        self.pos = max(0, self.pos - 1)
        self._refresh()
        return self.pos

    def run_to_end(self):
        """Run every remaining node (or up to the error) and show the last state."""
        while not self.walk.done and self._run_one() is not None:
            pass
        self.pos = len(self.walk.steps)
        self._refresh()
        return self.pos

    @property
    def done(self) -> bool:
        return self.walk.done and self.pos == len(self.walk.steps)

    # -- drawing -----------------------------------------------------------------------------

    def _sent(self):
        """{(child key, node key): [text]} of the gradients sent by the nodes run so far."""
        sent = {}
        for st in self.walk.steps[:self.pos]:
            for child, _name, g in st.grads_out:
                if child is not None and g is not None:
                    sent.setdefault((child, st.key), []).append(V.text(g))
        return sent

    def dot(self) -> str:
        steps = self.walk.steps[:self.pos]
        ran = {st.key for st in steps}
        now = steps[-1].key if steps else None
        err = steps[-1].key if steps and steps[-1].error is not None else None
        if self.pos < len(self.walk.steps):
            nxt = self.walk.steps[self.pos].key
        else:
            pending = self.walk.pending()
            nxt = f"n{id(pending)}" if pending is not None else None
        grads = {}
        for i, st in enumerate(steps):
            if st.leaf is not None and i in self.leaf_grads:
                grads[st.key] = self.leaf_grads[i]
        q = _q
        out = ["digraph step {", '  graph [rankdir=TB, nodesep=0.3, ranksep=0.4, '
               'fontname="Helvetica", fontsize=10, bgcolor="transparent"];',
               '  node [fontname="Helvetica", fontsize=10, shape=box, style=filled, '
               'height=0.25, margin="0.08,0.04"];', '  edge [fontname="Helvetica", fontsize=9, '
               'arrowsize=0.6, fontcolor="#b3261e"];']
        views = list(self.nodes.values())[:MAX_NODES]
        shown = {v.key for v in views}
        for v in views:
            fill = C_ERR if v.key == err else C_NOW if v.key == now else \
                C_NEXT if v.key == nxt else C_DONE if v.key in ran else "#f0f0f0"
            width = ", penwidth=2.5" if v.key in (now, nxt, err) else ""
            label = v.name
            ins = {st.key: st.grad_in for st in steps if st.grad_in is not None}
            for oname, data in self.outputs.get(v.key, [])[:2]:
                label += f"\n\u2192 {oname}"
                if self.values:
                    label += f"\ndata {V.text(data)}"
                    if v.key in ins and not isinstance(ins[v.key], list):
                        label += f"\ngrad {V.text(ins[v.key])}"
            if v.leaf is not None:
                label = f"{v.name}\n{v.leaf_name or 'leaf'}"
                var = v.leaf()
                if self.values and var is not None:
                    label += "\ndata " + V.text(V.keep(A.array(var)))
                    if v.key in grads:
                        label += "\ngrad " + grads[v.key]
            out.append(f"  {v.key} [id={v.key}, fillcolor={q(fill)}{width}, label={q(label)}];")
        sent = self._sent()
        for v in views:
            for c in v.next:
                if c in shown:
                    g = sent.get((c, v.key))
                    lab = g.pop(0) if g and self.values else ""
                    out.append(f"  {c} -> {v.key}" + (f" [label={q(lab)}];" if lab else ";"))
        if self.root_key in shown:
            label = self.root_name
            if self.values:
                label += "\ndata " + V.text(self.root_value) + "\ngrad 1"
            out.append(f'  root [id=root, shape=box, style="filled,rounded", fillcolor="#d6f5d0",'
                       f" label={q(label)}];")
            out.append(f"  {self.root_key} -> root;")
        out.append("}")
        return "\n".join(out)

    def svg(self) -> str | None:
        from . import layout

        if len(self.nodes) > MAX_NODES:
            return None
        try:
            return layout.svg(self.dot())
        except Exception:  # noqa: BLE001 - no picture: the text says it all
            return None

    def detail_html(self) -> str:
        """The text of the current state: the node that just ran, or where the walk starts."""
        e = html.escape
        total = len(self.nodes)
        head = (f"<b>backward() of {e(self.root_name)}, step {self.pos} of "
                f"{total if not self.walk.error else len(self.walk.steps)}</b>")
        if self.pos == 0:
            first = self.nodes.get(self.root_key)
            body = (f"<p>backward() starts at <code>{e(first.name if first else '?')}</code> "
                    f"with the gradient 1 (d {e(self.root_name)} / d {e(self.root_name)}).</p>")
            return head + body + self._next_line()
        st = self.walk.steps[self.pos - 1]
        view = self.nodes.get(st.key)
        rows = []
        where = f" <span style='color:gray'>made at {e(view.where)}</span>" \
            if view is not None and view.where else ""
        rows.append(f"<p>ran <code><b>{e(_name_of(st))}</b></code>{where}</p>")
        if st.grad_in is None:
            rows.append("<p>no gradient reached it: it passes nothing on.</p>")
        else:
            for k, parts in enumerate(st.parts or []):
                lab = "incoming gradient" + (f" (output {k})" if len(st.parts) > 1 else "")
                total_g = st.grad_in[k] if isinstance(st.grad_in, list) else st.grad_in
                if len(parts) > 1:
                    terms = " + ".join(f"{e(V.text(g))} <span style='color:gray'>(from "
                                       f"{e(_short(n))})</span>" for _, n, g in parts)
                    rows.append(f"<p>{lab} g = {terms} = <b>{e(V.text(total_g))}</b> "
                                "(reached along several edges: the gradients add up)</p>")
                else:
                    rows.append(f"<p>{lab} g = <b>{e(V.text(total_g))}</b></p>")
        if view is not None and view.formula:
            rows.append("<p>formula (its row in the op table; a custom Function: its "
                        "backward):<br>" + "<br>".join(
                            f"<code>{e(f)}</code>" for f in view.formula) + "</p>")
        if st.leaf is not None:
            name = view.leaf_name if view is not None and view.leaf_name else "the leaf"
            rows.append(f"<p><code>{e(name)}.grad += g</code> &rarr; {e(name)}.grad = "
                        f"<b>{e(self.leaf_grads.get(st.index, ''))}</b></p>")
        saved = self.saved.get(st.index) or []
        if saved:
            rows.append("<p>saved values it used: " + ", ".join(
                f"<code>{e(n)} = {e(v)}</code>"
                for n, v in saved) + "</p>")
        if st.error is not None:
            err = _inspect.error_info(st.error)
            from . import render

            rows.append("<div>the walk stops here, as backward() does:</div>"
                        + render.error_html(err))
        elif st.grads_out:
            outs = [f"<li>to <code>{e(_short(n) or 'None')}</code>: <b>{e(V.text(g))}</b></li>"
                    for _, n, g in st.grads_out if g is not None]
            if outs:
                rows.append("<p>sends along its edges:</p><ul style='margin:2px 0'>"
                            + "".join(outs) + "</ul>")
        return head + "".join(rows) + self._next_line()

    def _next_line(self) -> str:
        if self.pos < len(self.walk.steps):
            nxt = html.escape(_name_of(self.walk.steps[self.pos]))
            return f"<p style='color:gray'>next: {nxt}</p>"
        if self.walk.error is not None:
            return "<p style='color:#d00000'>stopped: backward() raises at this node.</p>"
        nxt = self.walk.pending()
        if nxt is None:
            return "<p><b>done</b>: every leaf's .grad is what loss.backward() gives.</p>"
        return (f"<p style='color:gray'>next: <code>{html.escape(A.node_name(nxt))}</code> "
                "(predict what it sends, then step)</p>")

    def html(self, inline: bool = True, bare: bool = False) -> str:
        """The current state as HTML: the graph inline (a panel's Step tab, whose script wires
        its elements; ``bare``: without the ids, classes and tooltips only that script reads, for
        the ipywidgets view), or as an ``<img>`` with a data URI (``inline=False``: the static
        copy, which survives the sanitiser of an untrusted notebook), beside the text."""
        svg = self.svg()
        if svg and (bare or not inline):
            from .svg_image import for_image

            svg = for_image(svg, inline=inline)
        if svg and not inline:
            from . import render

            svg = f'<img src="{render.svg_uri(svg)}" alt="the graph of the backward walk">'
        pic = f"<div style='overflow:auto;max-width:100%'>{svg}</div>" if svg else \
            "<pre>" + html.escape("\n".join(
                f"{'*' if i < self.pos else ' '} {_name_of(st)}"
                for i, st in enumerate(self.walk.steps))) + "</pre>"
        return (f"<div class='nbgrad-step' style='display:flex;gap:16px;flex-wrap:wrap;"
                f"font-family:sans-serif;font-size:13px'><div>{pic}</div>"
                f"<div style='max-width:460px'>{self.detail_html()}</div></div>")

    # -- the widget --------------------------------------------------------------------------

    def widget(self):
        """An ipywidgets box: previous / next / run to end, a values toggle, the view."""
        if self._widget is not None:
            return self._widget
        import ipywidgets as W

        wide, style = _shared(W.Layout, width="110px"), _shared(_style_of(W.Button))
        prev = W.Button(description="\u25c0 previous", layout=wide, style=style)
        nxt = W.Button(description="next \u25b6", button_style="primary", layout=wide,
                       style=style)
        end = W.Button(description="run to end \u00bb", layout=_shared(W.Layout, width="120px"),
                       style=style)
        vals = W.ToggleButton(value=self.values, description="values", style=_shared(
            _style_of(W.ToggleButton)), layout=_shared(W.Layout, width="80px"))
        self._html = W.HTML(self.html(bare=True), layout=_shared(W.Layout), style=_shared(_style_of(W.HTML)))
        prev.on_click(lambda _b: self.prev())
        nxt.on_click(lambda _b: self.next())
        end.on_click(lambda _b: self.run_to_end())

        def toggle(change):
            self.values = bool(change["new"])
            self._refresh()
        vals.observe(toggle, names="value")
        prev.add_class("nbgrad-step-prev")
        nxt.add_class("nbgrad-step-next")
        end.add_class("nbgrad-step-end")
        self._widget = W.VBox([W.HBox([prev, nxt, end, vals], layout=_shared(W.Layout)),
                               self._html], layout=_shared(W.Layout))
        return self._widget

    def _refresh(self):
        if self._html is not None:
            self._html.value = self.html(bare=True)

    def _repr_mimebundle_(self, **kwargs):
        try:
            bundle = self.widget()._repr_mimebundle_(**kwargs)
        except Exception:  # noqa: BLE001 - no ipywidgets / no comm: the static view
            bundle = {}
        bundle = dict(bundle or {})
        bundle["text/html"] = self.html(inline=False)
        bundle.setdefault("text/plain", f"<nbgrad step-by-step backward of {self.root_name}>")
        return bundle


_SHARED: dict = {}


def _shared(kind, **traits):
    """One ``kind`` (an ipywidgets Layout or style) with these traits for every step widget: a
    saved notebook keeps the state of each widget object (~1 KB a Layout), and a Button makes a
    Layout and a style of its own unless given one (~10 KB a step widget)."""
    key = (kind, tuple(sorted(traits.items())))
    w = _SHARED.get(key)
    if w is None or getattr(w, "comm", None) is None:  # (closed: Widget.close_all)
        w = _SHARED[key] = kind(**traits)
    return w


def _style_of(widget_class):
    """The style class a widget class makes its ``style`` of (ipywidgets names some of them
    only in submodules)."""
    return widget_class.class_traits()["style"].klass


def _name_of(st) -> str:
    return _short(st.name)


def _short(name: str) -> str:
    return str(name).rsplit("::", 1)[-1]


def _q(s: str) -> str:
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def step(loss, named=None, name: str = "loss", values: bool = True) -> StepPanel:
    """A :class:`StepPanel` walking ``loss.backward()`` (nbgrad tensors; a scalar), its boxes
    labelled with the names of ``named`` (``[(name, tensor)]``; default: the IPython namespace's
    tensors, when IPython runs). Raises as ``loss.backward()`` would (RuntimeError), and
    NotImplementedError for a torch tensor."""
    if named is None:
        named = []
        try:
            from IPython import get_ipython

            ip = get_ipython()
            if ip is not None:
                named = _inspect.named_tensors(ip.user_ns, skip=getattr(ip, "user_ns_hidden", ()))
        except Exception:  # noqa: BLE001 - unnamed boxes then
            named = []
    return StepPanel(loss, named=named, root_name=name, values=values)


def step_magic(ext, rest: str):
    """``%nbgrad step EXPR``: the step-by-step panel of ``EXPR.backward()``."""
    expr = rest.strip()
    if not expr:
        print("usage: %nbgrad step LOSS (a scalar tensor with a grad_fn)")
        return None
    ns = ext.ip.user_ns
    try:
        value = eval(expr, ns)  # noqa: S307 - the user's own expression
    except Exception as exc:  # noqa: BLE001
        print(f"nbgrad: could not evaluate {_inspect.short(expr)!r}: {type(exc).__name__}: {exc}")
        return None
    if not A.is_tensor(value):
        print(f"nbgrad: {_inspect.short(expr)!r} is a {type(value).__name__}, not a tensor")
        return None
    named = _inspect.named_tensors(ns, skip=getattr(ext.ip, "user_ns_hidden", ()))
    try:
        panel = StepPanel(value, named=named, root_name=_inspect.short(expr))
    except NotImplementedError as exc:
        print(f"nbgrad: {exc}")
        return None
    except RuntimeError as exc:  # backward() would refuse: say so as it does
        print(f"nbgrad: {expr}.backward() raises RuntimeError: {exc}")
        return None
    return panel


# -- the "step through backward" button of a scalar loss's panel ---------------------------------

MAX_BUTTONS = 3  # buttons on one panel (its named one-element tensors with a grad_fn)


def losses_of(snap) -> list:
    """Names of the snapshot's named one-element tensors with a ``grad_fn`` whose node still
    holds its saved tensors (a backward already run has freed them: its walk would stop at once
    with backward()'s "a second time" error), at most MAX_BUTTONS."""
    out = []
    for t in snap.tensors:
        if not (t.named and t.grad_fn and t.requires_grad) or len(out) >= MAX_BUTTONS:
            continue
        n = 1
        for d in t.shape:
            n *= d
        if n == 1 and not _freed(snap, t.grad_fn_key):
            out.append(t.name.split(" = ")[0])
    return out


def _freed(snap, key) -> bool:
    """Whether a node the snapshot draws below node ``key`` has freed its saved tensors."""
    seen, stack = {key}, [key]
    while stack:
        node = snap.nodes.get(stack.pop())
        if node is None:
            continue
        if any(s.released for s in node.saved):
            return True
        for c in node.next:
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return False


def button_html(snap) -> str:
    """The Graph tab's line of "step through backward" buttons (``extension/panel.js`` sends
    ``{"type": "step", "op": "open", "name": ...}``); ``""`` when the panel has no loss."""
    names = losses_of(snap)
    if not names:
        return ""
    e = html.escape
    return ('<div class="nbgrad-step-line" style="color:#666">backward step by step: ' + " ".join(
        f'<button class="nbgrad-step-open" data-op="open" data-name="{e(n, quote=True)}" '
        f'title="run {e(n)}.backward() one node at a time, in the engine\'s order">'
        f'step through {e(n)}.backward()</button>' for n in names) + "</div>")


def _tab_html(panel) -> str:
    """The panel's Step tab: the controls (buttons ``panel.js`` relays) and the walk's state."""
    ctl = "".join(
        f'<button class="nbgrad-step-ctl nbgrad-step-{op}" data-op="{op}">{label}</button> '
        for op, label in (("prev", "\u25c0 previous"), ("next", "next \u25b6"),
                          ("end", "run to end \u00bb"),
                          ("values", "hide values" if panel.values else "show values")))
    return f"<div class='nbgrad-step-tab'><div style='margin:4px 0'>{ctl}</div>{panel.html()}</div>"


def panel_message(widget, content: dict, ns: dict, hidden=()) -> None:
    """A graph panel's step message (its button, then the Step tab's controls): ``op`` "open"
    makes the walk of ``ns[name].backward()`` (a :class:`StepPanel`, kept on the widget) and
    shows it in a Step tab; "next", "prev", "end", "values" move it. What ``%nbgrad step name``
    refuses is said in the tab instead."""
    op = str(content.get("op", ""))
    panel = getattr(widget, "_stepper", None)
    if op == "open":
        name = str(content.get("name", ""))
        value = ns.get(name)
        try:
            if not A.is_tensor(value):
                raise TypeError(f"{name!r} is not a tensor in the namespace any more")
            panel = StepPanel(value, named=_inspect.named_tensors(ns, skip=hidden),
                              root_name=name)
        except (TypeError, NotImplementedError, RuntimeError) as exc:
            body = f"<p>nbgrad: {html.escape(str(exc))}</p>"
        else:
            widget._stepper = panel
            body = _tab_html(panel)
    elif panel is None:
        return
    else:
        if op == "next":
            panel.next()
        elif op == "prev":
            panel.prev()
        elif op == "end":
            panel.run_to_end()
        elif op == "values":
            panel.values = not panel.values
        body = _tab_html(panel)
    order = list(widget.tab_order)
    with widget.hold_sync():
        widget.tabs = {**widget.tabs, "Step": body}
        if "Step" not in order:
            widget.tab_order = order + ["Step"]
        widget.active = "Step"
