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


SITES = {}  # (id(code), lasti) -> (code, lasti): nodes made at one place share one tuple
_MAX_SITES = 1 << 16


def site(code, lasti):
    """The shared `(code, lasti)` tuple of a place in user code (a loop's nodes keep one, not
    one each). Keyed by the code's id (hashing a code object hashes its bytecode); the table
    holds the code, so the id stays its own; emptied when it grows past 65536 places."""
    if len(SITES) >= _MAX_SITES:
        SITES.clear()
        BY_LASTI.clear()
    return SITES.setdefault((id(code), lasti), (code, lasti))


def capture(hint=1):
    """`(code, lasti)` of the innermost frame outside nbgrad, or None when disabled.

    `hint`: how many frames above the caller the user's frame usually is (Storage.bump: 4),
    or one less. Checked, not trusted: the frame there must be outside nbgrad and the one below
    it inside.
    Jumping there skips making a frame object for each nbgrad frame on the way (f_back makes
    one per frame, ~0.2 us each on Python 3.11)."""
    if not ENABLED[0]:
        return None
    lib = LIB_FILES
    try:
        f = _getframe(hint + 1)
        if f.f_code.co_filename not in lib:
            if hint == 1:
                return _site_of(f)
            below = _getframe(hint)
            if below.f_code.co_filename in lib:
                return _site_of(f)
            # one frame shallower (a path with one call less)?
            if hint > 2 and _getframe(hint - 1).f_code.co_filename in lib:
                return _site_of(below)
    except ValueError:  # a shallower stack
        pass
    f = _getframe(2)
    while f is not None and f.f_code.co_filename in lib:
        f = f.f_back
    return None if f is None else _site_of(f)


def _site_of(f):
    """The shared `(code, lasti)` of user frame `f`, first from the BY_LASTI cache (a small-int
    lookup, no key tuple to build and hash)."""
    code, lasti = f.f_code, f.f_lasti
    s = BY_LASTI.get(lasti)
    if s is None or s[0] is not code:
        s = BY_LASTI[lasti] = SITES.get((id(code), lasti)) or site(code, lasti)
    return s


def site_at(f):
    """The shared `(code, lasti)` of frame `f`, or of the first frame above it outside nbgrad
    (None if there is none). The op path calls it with the frame its entry point was called
    from (`sys._getframe(2)` in `apply`): one frame object, that of the user's line, which stays
    alive with it, instead of one for every nbgrad frame on the way.

    Hot callers first try `BY_LASTI.get(f.f_lasti)`, checking its code is `f.f_code`: the last
    user site seen at that instruction offset (a small-int dict lookup; a lib frame never
    matches, its code is not a user site's)."""
    while f.f_code.co_filename in LIB_FILES:
        f = f.f_back
        if f is None:
            return None
    code, lasti = f.f_code, f.f_lasti
    s = BY_LASTI[lasti] = SITES.get((id(code), lasti)) or site(code, lasti)
    return s


BY_LASTI = {}  # lasti -> the last user site seen at that offset (any code): a cache of SITES


def cached_site_at(f):
    """`site_at(f)`, first trying the BY_LASTI cache."""
    s = BY_LASTI.get(f.f_lasti)
    if s is None or s[0] is not f.f_code:
        s = site_at(f)
    return s


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
