"""DOT source -> SVG, in-process with pygraphviz (Graphviz's library; no ``dot`` executable).

Every panel's graph is laid out here, whatever the front end (the live widget, nbclient, the
static copy saved with a notebook, ``nbgrad.viz``): a browser busy or a panel retired cannot leave
it as text. The browser lays out (extension/layout.js, viz.js) only what this could not: past the
time bound, or an SVG too big to sync. Bounds:

- the snapshot caps the nodes (``max_nodes``) before any DOT is written;
- a graph of at most :data:`IN_PROCESS_UP_TO` nodes and :data:`IN_PROCESS_EDGES` edges is laid
  out in this process (3 ms at 20 nodes, ~10 ms at 100);
  a bigger one in a forked child that is killed at the time bound (Graphviz holds the GIL while
  it works, so a thread could not be stopped), and the caller shows the text tree instead;
- the last few layouts are remembered, by the graph's shape (:func:`shape_key`): a graph drawn
  again with other tensors (ids) and other numbers of the same width in its labels (a re-run
  cell: its cell number, versions, shapes) reuses the layout, its ids and digits put back.

Without pygraphviz, :func:`svg` returns None and the panel shows the text tree.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import sys
import tempfile
import time

IN_PROCESS_UP_TO = 150  # nodes; above this (or 2x as many edges) a forked child does the work
IN_PROCESS_EDGES = 300
DEFAULT_TIMEOUT = 5.0  # seconds
_CACHE: dict[str, str] = {}  # DOT source -> SVG
CACHE_SIZE = 16
_SVG_COMMENT = re.compile(r"<!--.*?-->\n?", re.S)
_fonts_loaded = False  # the first text Graphviz measures loads fontconfig, once per process


class LayoutTimeout(TimeoutError):
    """The layout did not finish within its time bound."""


def available() -> bool:
    """True when pygraphviz (with its Graphviz library) imports."""
    try:
        import pygraphviz  # noqa: F401
    except Exception:  # noqa: BLE001 - ImportError, or a broken shared library
        return False
    return True


def cached(source: str) -> str | None:
    """The SVG of ``source`` if it (or its shape, :func:`shape_key`) was laid out recently."""
    shape = shape_key(source)
    if shape is None:
        return _CACHE.get(source)
    hit = _CACHE.get(shape[0])
    return _instantiate(hit, *shape[1:]) if hit is not None else None


def svg(source: str, *, nodes: int | None = None, timeout: float = DEFAULT_TIMEOUT) -> str | None:
    """The ``<svg>`` element for DOT ``source``; None without pygraphviz.

    Args:
        nodes: how many nodes the graph has (decides in-process vs a forked child); counted
            from the source when None.
        timeout: seconds a forked layout may take.

    Raises:
        LayoutTimeout: the layout took longer than ``timeout`` (the child was killed).
        ValueError: Graphviz rejected the DOT source.
    """
    shape = shape_key(source)
    key = shape[0] if shape is not None else source
    hit = _CACHE.get(key)
    if hit is not None:
        out = _instantiate(hit, *shape[1:]) if shape is not None else hit
        if out is not None:
            return out
    if not available():
        return None
    if nodes is None:
        nodes = source.count("[id=")
    small = nodes <= IN_PROCESS_UP_TO and source.count("->") <= IN_PROCESS_EDGES

    def draw(src):
        return _clean(_layout(src) if small or not hasattr(os, "fork") else _forked(src, timeout))

    out = None
    if shape is not None:  # the shape laid out, then this graph's ids and digits put in
        drawn = draw(key)
        out = _instantiate(drawn, *shape[1:])
        if out is None:
            key = source
        else:
            _CACHE[key] = drawn
    if out is None:
        out = _CACHE[source] = draw(source)
    while len(_CACHE) > CACHE_SIZE:
        del _CACHE[next(iter(_CACHE))]
    return out


_QUOTED_LABEL = re.compile(r'\blabel=("(?:[^"\\]|\\.)*")')
_ID_ATTR = re.compile(r'\bid=("(?:[^"\\]|\\.)*"|[^,;\]\s]+)')
_LONG_NUMBER = re.compile(r"\d{9,}")  # outside labels: only ids (``id()`` of tensors and nodes)
_DIGIT = re.compile(r"\d")
_PLACEHOLDER = re.compile(r"ZqZ(\d+)ZqZ")
_SVG_GROUP = re.compile(r'<g id="([^"]*)" class="(?:node|cluster|edge)">.*?</g>', re.S)
_SVG_TEXT = re.compile(r"(<text[^>]*>)(.*?)(</text>)", re.S)
_TEXT_DIGIT = re.compile(r"&#?\w+;|\d")


def shape_key(source: str):
    """``(shape, ids, digits)``: ``source`` with its ids (runs of 9 digits or more outside labels)
    numbered in order of appearance and every digit of its labels made ``0`` (digits are all as
    wide in Helvetica, so the layout is the same), the ids, and each element's label digits by
    its id; None when a label with digits has no id of its own (an edge's, the graph's)."""
    ids: dict = {}

    def number(m):
        return f"ZqZ{ids.setdefault(m.group(0), len(ids))}ZqZ"

    digits: dict = {}
    lines = []
    for line in source.split("\n"):
        if "label=" not in line:
            lines.append(_LONG_NUMBER.sub(number, line))
            continue
        parts, pos = [], 0
        for m in _QUOTED_LABEL.finditer(line):
            before = line[pos:m.start()]
            found = list(_ID_ATTR.finditer(before))  # the label's element: an id in its own
            owner = found[-1].group(1).strip('"') if found else None  # attribute list
            if owner is not None and any(c in before[found[-1].end():] for c in "]}>"):
                owner = None
            label = m.group(1)
            if any(c.isdigit() for c in label):
                if owner is None or owner in digits:
                    return None
                digits[owner] = "".join(_DIGIT.findall(label))
                label = _DIGIT.sub("0", label)
            parts.append(_LONG_NUMBER.sub(number, before) + "label=" + label)
            pos = m.end()
        rest = line[pos:]
        if "label=" in rest:  # a label not quoted: not one of ours
            return None
        lines.append("".join(parts) + _LONG_NUMBER.sub(number, rest))
    return "\n".join(lines), ids, digits


def _instantiate(svg: str, ids: dict, digits: dict) -> str | None:
    """The SVG of a shape (:func:`shape_key`) with one graph's ids and label digits put back;
    None when the texts do not take its digits exactly."""
    back = {k: run for run, k in ids.items()}
    try:
        svg = _PLACEHOLDER.sub(lambda m: back[int(m.group(1))], svg)
    except KeyError:
        return None
    used = set()

    def group(m):
        body = m.group(0)
        if "<text" not in body:
            return body
        want = digits.get(m.group(1), "")
        i = 0

        def text(t):
            nonlocal i

            def digit(d):
                nonlocal i
                if d.group(0)[0] == "&":  # an entity (``&#45;``): not a digit of the label
                    return d.group(0)
                i += 1
                return want[i - 1] if i <= len(want) else "?"

            return t.group(1) + _TEXT_DIGIT.sub(digit, t.group(2)) + t.group(3)

        body = _SVG_TEXT.sub(text, body)
        if i != len(want):
            raise ValueError(m.group(1))
        used.add(m.group(1))
        return body

    try:
        svg = _SVG_GROUP.sub(group, svg)
    except ValueError:
        return None
    if not used >= {k for k, v in digits.items() if v}:
        return None
    return svg


def _layout(source: str, fmt: str = "svg") -> bytes:
    import pygraphviz

    try:
        graph = pygraphviz.AGraph(string=source)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"graphviz could not read the graph: {exc}") from None
    if _fonts_loaded:
        return graph.draw(format=fmt, prog="dot")
    with _fontconfig_warnings_dropped():
        return graph.draw(format=fmt, prog="dot")


@contextlib.contextmanager
def _fontconfig_warnings_dropped():
    """Run the first layout with the C-level stderr (fd 2) sent to a temporary file.

    pygraphviz's wheels bundle a fontconfig older than Debian 12's configuration files; loading
    them, it prints ``Fontconfig warning: ... unknown element "reset-dirs"`` on fd 2, which a
    kernel shows as a red stderr box under the user's first cell. Fontconfig reads its
    configuration once per process, at the first text measured (FONTCONFIG_FILE does not help:
    the bundled library reads the system's conf.avail whatever the file says). The warnings are
    dropped; anything else written to fd 2 meanwhile is written back.
    """
    global _fonts_loaded
    _fonts_loaded = True
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no fd 2 (pythonw), or a closed sys.stderr
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [line for line in tmp.read().splitlines(keepends=True)
                    if not line.startswith(b"Fontconfig warning:")]
            if kept:
                os.write(2, b"".join(kept))


def render(source: str, fmt: str) -> bytes:
    """DOT ``source`` laid out by Graphviz ``dot`` in any of its output formats (svg, png, pdf,
    ...), in-process, for ``nbgrad.viz.Graph.render``."""
    return _layout(source, fmt)


def _forked(source: str, timeout: float) -> bytes:
    """Lay out in a child process; kill it at ``timeout`` seconds."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: lay out, write, leave without running any Python cleanup
        code = 1
        try:
            os.close(r)
            data = _layout(source)
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        except BaseException:  # noqa: BLE001
            pass
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    done = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LayoutTimeout(f"graph layout took more than {timeout:g} s")
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    done = True
                    break
                chunks.append(chunk)
    finally:  # a timeout or an interrupt (KeyboardInterrupt) never leaves the child running
        os.close(r)
        if not done:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if status != 0 or not chunks:
        raise ValueError("graphviz could not lay out the graph")
    return b"".join(chunks)


_NODE_TITLE = re.compile(r'(<g id="[^"]+" class="node">\n)<title>[^<]*</title>\n')
_GEOMETRY = re.compile(r'\b(d|points|x|y|viewBox|transform|width|height|rx|ry|cx|cy|font-size)'
                       r'="([^"]*)"')
_DECIMAL = re.compile(r"-?\d+\.\d+")


def _whole(m) -> str:
    return m.group(1) + '="' + _DECIMAL.sub(lambda d: "%d" % round(float(d.group(0))),
                                            m.group(2)) + '"'


_ROUNDED = re.compile(r'<path((?: [a-z-]+="[^"]*")*) d="M(-?\d+,-?\d+)C((?:-?\d+,-?\d+ ){23}'
                      r'-?\d+,-?\d+)"/>')


def _rect(m) -> str:
    """A rounded box (Graphviz draws it as a path of 8 curves: 25 points, each on the box's
    edge) as a ``<rect>`` with its corner radius: a fifth of the bytes."""
    pts = [tuple(map(int, p.split(","))) for p in [m.group(2)] + m.group(3).split(" ")]
    xs, ys = [x for x, _ in pts], [y for _, y in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if any(x not in (x0, x1) and y not in (y0, y1) for x, y in pts):
        return m.group(0)  # a point inside the box: not a rounded box
    r = max((x - x0 for x, y in pts if y == y0 and x - x0 <= (x1 - x0) / 2), default=0)
    return (f'<rect{m.group(1)} x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" '
            f'rx="{r}"/>')


def _clean(raw: bytes) -> str:
    """Graphviz's SVG, a third smaller (it is synced, saved in the notebook and kept by the
    static copy): no comments, coordinates in whole points (a point is 1.33 px), no node tooltips
    (the element key; the panel shows details on hover), the common font set once on the root
    group, no ``xml:space`` (Graphviz writes a run of spaces with non-breaking ones), rounded
    boxes as ``<rect>`` (extension/panel.css styles rect, path and polygon alike)."""
    text = raw.decode("utf-8", "replace")
    i = text.find("<svg")
    text = text[i:] if i >= 0 else text
    text = _SVG_COMMENT.sub("", text)
    text = _NODE_TITLE.sub(r"\1", text)
    text = text.replace(' font-family="Helvetica,sans-Serif"', "")
    text = text.replace(' font-size="10.00"', "")
    text = text.replace('class="graph"', 'class="graph" font-family="Helvetica,sans-Serif" '
                        'font-size="10"', 1)
    text = text.replace(' xml:space="preserve"', "")  # (graphviz writes runs of spaces as &#160;)
    return _ROUNDED.sub(_rect, _GEOMETRY.sub(_whole, text))
