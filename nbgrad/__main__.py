"""``python -m nbgrad script.py [args]``: run an unchanged PyTorch script on nbgrad.

``import torch`` (and its submodules) inside the script resolve to nbgrad (see
:mod:`nbgrad.as_torch`); ``python -m nbgrad -m package.module [args]`` runs a module the same way.
Running the script with plain ``python`` again uses the real PyTorch: nothing is installed or
changed outside this process.
"""
import os
import runpy
import sys

from nbgrad import as_torch

_USAGE = "usage: python -m nbgrad script.py [args ...] | python -m nbgrad -m module [args ...]"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE + "\n\nRuns the script with `import torch` resolving to nbgrad.")
        return 0 if argv else 2
    as_torch.enable()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    path = argv[0]
    if not os.path.exists(path):
        print(f"nbgrad: can't open file {path!r}: no such file", file=sys.stderr)
        return 2
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(path))  # as `python script.py` would
    runpy.run_path(path, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
