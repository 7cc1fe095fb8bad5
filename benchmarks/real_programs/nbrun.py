"""nbrun.py notebook.ipynb: run a notebook's code cells in order in one namespace, as Jupyter
does: a failing cell prints its error and the next cell runs. IPython magics (`%...`) and shell
lines (`!...`) are dropped; a cell whose last statement is an expression prints its repr.

Run it with `python nbrun.py nb.ipynb` (torch) or `python -m nbgrad nbrun.py nb.ipynb`."""
import ast
import json
import os
import sys

sys.path.insert(0, os.getcwd())


def cell_source(cell):
    src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return "\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!")))


def run_cell(i, src, ns):
    tree = ast.parse(src)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, f"<cell {i}>", "exec"), ns)
    if last is not None:
        value = eval(compile(last, f"<cell {i}>", "eval"), ns)
        if value is not None:
            print(repr(value))


def main(path):
    cells = [c for c in json.load(open(path, encoding="utf-8"))["cells"]
             if c["cell_type"] == "code"]
    ns = {"__name__": "__main__"}
    for i, cell in enumerate(cells):
        print(f"--- cell {i}", flush=True)
        try:
            run_cell(i, cell_source(cell), ns)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # SystemExit too: Jupyter goes on to the next cell
            text = " ".join(str(e).split())[:300]
            print(f"CELL {i} ERROR {type(e).__name__}: {text}", flush=True)
        sys.stdout.flush()
    print("--- end of notebook", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
