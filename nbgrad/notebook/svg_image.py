"""A graph's SVG made small for an ``<img>``: the static copy a saved notebook keeps per cell.

The panel's own SVG (layout.py) keeps what its front end wires up: each element's ``<g>`` with
the graph key as its id and its kind as its class, the edges' ``<title>`` (which nodes an edge
joins), the clusters' tooltips. A picture in an ``<img>`` has no script and no hover, so here all
of that goes, with what the drawing does not need either: the attribute values the root group
can give its children once (the text anchor, a black stroke), the default black fill, the point
that closes a polygon again, and the line breaks. What is drawn (every shape, colour, dash,
width and text) stays as it was: a third to a half of the bytes.
"""

from __future__ import annotations

import re

_TITLE = re.compile(r"<title>[^<]*</title>\n?")
_INERT = re.compile(r' (?:id|class)="[^"]*"')  # (a text's quotes are &quot;: never matched)
_CLOSED = re.compile(r'(points="(-?\d+,-?\d+) [^"]*?) \2"')  # a polygon's first point again
_ROOT = re.compile(r"<g( [^>]*)?>")
# the values the root group gives its children; a text has no stroke of its own (an inherited
# one would outline its letters)
_SHARED = ' text-anchor="middle" stroke="black"'
_STYLE = "<style>text{stroke:none}</style>"


def for_image(svg: str, inline: bool = False) -> str:
    """``svg`` (Graphviz's, as layout.py cleans it) as small as it draws the same in an image.

    ``inline``: for a page's own DOM (an ipywidgets HTML view), where a ``<style>`` would style
    the whole page: each shape keeps its black stroke, and there is no style element."""
    svg = _INERT.sub("", _TITLE.sub("", svg))
    root = _ROOT.search(svg)
    if root is None:
        return svg
    head, body = svg[:root.start()], svg[root.end():]
    # the elements' own groups (a node, an edge, a cluster: flat under the root group, nothing
    # but an id and a class on them) go; the root's end tag is the last one
    plain = body.count("<g>")
    if "<a" not in body and body.count("</g>") == plain + 1:
        end = body.rfind("</g>")
        body = (body[:end].replace("<g>\n", "").replace("<g>", "").replace("</g>\n", "")
                .replace("</g>", "") + body[end:])
    body = body.replace(' text-anchor="middle"', "").replace(' fill="black"', "")
    shared, style = (_SHARED, _STYLE) if not inline else (' text-anchor="middle"', "")
    if not inline:
        body = body.replace(' stroke="black"', "")
    body = _CLOSED.sub(r'\1"', body)
    if "xlink:" not in body:
        head = head.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "")
    group = (root.group(1) or "").replace("scale(1 1) rotate(0) ", "")
    out = head + f"<g{group}{shared}>{style}" + body
    return out.replace(">\n<", "><").replace("\n ", " ").replace("\n", " ")
