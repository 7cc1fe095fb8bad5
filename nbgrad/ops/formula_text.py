"""The derivative formulas of a row as text, read from the row itself (never a second table).

`formula_lines(row)` gives one line per input, as derivatives.yaml writes them:
`"self: g * (1 - result²)"` for tanh's row, whose formula is
`self=lambda g, result: g * (1 - result * result)`. The text is the formula's own source: the
body of the lambda found in its file by `ast` at the line its code object starts on (or, for a
formula written as a function, its name and parameters), shown with two small rewrites for the
eye: `xp.` (the formula namespace) dropped, and `a * a` written `a²`.

`body_lines(f)` gives a function's body as written (a custom Function's `backward`, read from
its class: the step panel's formula for such a node).
"""
from __future__ import annotations

import ast
import inspect
import linecache
import re
import textwrap

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


def body_lines(f, limit=12) -> list:
    """The body of function `f` (a custom Function's `backward`, as read from its class) as
    written: its source lines after the `def` line, dedented, the docstring and blank lines
    dropped, at most `limit` lines (then `"..."`); `[]` when its source cannot be read (a
    builtin, a lambda, a file gone)."""
    f = getattr(f, "__func__", f)
    try:
        src = textwrap.dedent(inspect.getsource(f))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return []
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    body = fn.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and \
            isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    lines = src.splitlines()[body[0].lineno - 1:body[-1].end_lineno]
    lines = [ln.rstrip() for ln in textwrap.dedent("\n".join(lines)).splitlines() if ln.strip()]
    return lines[:limit] + ["..."] if len(lines) > limit else lines
