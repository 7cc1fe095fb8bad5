"""Provenance: where each graph node, saved tensor and in-place modification came from.

Capturing is a short frame walk to the first frame outside the nbgrad package, keeping only
`(code object, instruction offset)`; line numbers, source text and the notebook cell are worked
out only when shown (`Location`). Reading `f_lineno` eagerly would cost microseconds per op.
"""
from __future__ import annotations

import linecache
import os
import re
import sys

_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep
_getframe = sys._getframe


def _library_files():
    """The package's source files: a set lookup (hash cached on the str) beats startswith in
    the frame walk, which runs for every node."""
    out = set()
    for root, _, files in os.walk(_PKG):
        out.update(os.path.join(root, f) for f in files if f.endswith(".py"))
    return frozenset(out)


LIB_FILES = _library_files()

ENABLED = [True]
NODES = [0]   # nodes created so far (activity counters read by the notebook layer)
BUMPS = [0]   # in-place version bumps so far


def enabled() -> bool:
    """Whether provenance is being recorded (on by default)."""
    return ENABLED[0]


def set_enabled(on: bool) -> None:
    """Turn provenance recording on or off (a few hundred ns per op when on)."""
    ENABLED[0] = bool(on)


SITES = {}  # (code, lasti) -> that same tuple: nodes made at one place share one
_MAX_SITES = 1 << 16


def site(key):
    """The shared `(code, lasti)` tuple equal to `key` (a loop's nodes keep one, not one each;
    forgotten all at once when the table grows past 65536 places, as notebooks recompile)."""
    if len(SITES) >= _MAX_SITES:
        SITES.clear()
    return SITES.setdefault(key, key)


def capture():
    """`(code, lasti)` of the innermost frame outside nbgrad, or None when disabled."""
    if not ENABLED[0]:
        return None
    f = _getframe(1)
    lib = LIB_FILES
    while f is not None and f.f_code.co_filename in lib:
        f = f.f_back
    if f is None:
        return None
    key = (f.f_code, f.f_lasti)
    return SITES.get(key) or site(key)


_INPUT_RE = re.compile(r"<ipython-input-(\d+)-[0-9a-f]+>")


def _cell_of(filename):
    """IPython's execution count for a cell's pseudo-filename, or None outside IPython."""
    m = _INPUT_RE.match(filename)
    if m:
        return int(m.group(1))
    ip_mod = sys.modules.get("IPython")
    if ip_mod is None:
        return None
    try:
        shell = ip_mod.get_ipython()
        return shell.compile._filename_map.get(filename) if shell is not None else None
    except Exception:
        return None


class Location:
    """A place in user code: `filename`, `lineno`, `source`, `cell` (IPython execution count)."""

    __slots__ = ("code", "lasti", "_lineno")

    def __init__(self, code, lasti):
        self.code = code
        self.lasti = lasti
        self._lineno = None

    @classmethod
    def of(cls, where):
        """A Location from a captured `(code, lasti)`, or None."""
        return None if where is None else cls(*where)

    @property
    def filename(self) -> str:
        return self.code.co_filename

    @property
    def function(self) -> str:
        return self.code.co_name

    @property
    def lineno(self) -> int:
        if self._lineno is None:
            line = self.code.co_firstlineno
            for start, end, ln in self.code.co_lines():
                if start <= self.lasti < end and ln is not None:
                    line = ln
                    break
            self._lineno = line
        return self._lineno

    @property
    def cell(self):
        return _cell_of(self.code.co_filename)

    @property
    def source(self) -> str:
        return linecache.getline(self.code.co_filename, self.lineno).strip()

    def __str__(self):
        cell = self.cell
        if cell is not None:
            return f"cell [{cell}] line {self.lineno}"
        return f"{self.filename}:{self.lineno}"

    def __repr__(self):
        return f"<Location {self}>"

    def __eq__(self, other):
        return (isinstance(other, Location) and self.code is other.code
                and self.lineno == other.lineno)

    def __hash__(self):
        return hash((id(self.code), self.lineno))
