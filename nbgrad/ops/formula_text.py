"""The derivative formulas of a row as text, read from the row itself (never a second table).

`formula_lines(row)` gives one line per input, as derivatives.yaml writes them:
`"self: g * (1 - result²)"` for tanh's row, whose formula is
`self=lambda g, result: g * (1 - result * result)`. The text is the formula's own source: the
body of the lambda found in its file by `ast` at the line its code object starts on (or, for a
formula written as a function, its name and parameters), shown with two small rewrites for the
eye: `xp.` (the formula namespace) dropped, and `a * a` written `a²`.
"""
from __future__ import annotations

import ast
import linecache
import re

_TREES: dict = {}  # file name -> (parsed tree, source) of the table files read so far
_SQUARE = re.compile(r"(?<![\w.\])])([A-Za-z_]\w*) \* \1(?![\w.(\[])")
_SPACES = re.compile(r"\s+")


def _tree(filename):
    got = _TREES.get(filename)
    if got is None:
        source = "".join(linecache.getlines(filename))
        try:
            got = (ast.parse(source), source)
        except (SyntaxError, ValueError):
            got = (None, source)
        _TREES[filename] = got
    return got


def pretty(text: str) -> str:
    """`xp.` dropped, runs of white space made one, `a * a` written `a²`."""
    text = _SPACES.sub(" ", text.replace("xp.", "")).strip().replace("( ", "(")
    return _SQUARE.sub(r"\1²", text)


def source_of(f) -> str | None:
    """The source text of formula `f`: a lambda's body, or `name(params)` of a function;
    None when its file cannot be read."""
    code = getattr(f, "__code__", None)
    if code is None:
        return None
    params = list(code.co_varnames[:code.co_argcount])
    if code.co_name != "<lambda>":
        return f"{code.co_name}({', '.join(params)})"
    tree, source = _tree(code.co_filename)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno and \
                [a.arg for a in node.args.args] == params:
            return ast.get_source_segment(source, node.body)
    return None


def formula_lines(row) -> list:
    """`["self: g * (1 - result²)"]`: per input of `row` (a joint formula once, keyed by its
    inputs' names as written), its formula's source text, pretty; `[]` when none is readable."""
    lines = []
    for name, f in zip(row.inputs, row.formulas):
        if f is not None:
            text = source_of(f)
            if text is not None:
                lines.append(f"{name}: {pretty(text)}")
    if row.joint is not None:
        text = source_of(row.joint)
        if text is not None:
            keys = ", ".join(row.inputs) if row.inputs else "tensors"
            lines.append(f"{keys}: {pretty(text)}")
    return lines
