"""Named data steps of manifest.txt (`prep = NAME [args]`): data a program needs that its
repository does not ship whole. Each works inside the program's folder and uses no network."""
from __future__ import annotations

from pathlib import Path


def _shakespeare_lines(folder: Path):
    lines = (folder / "input.txt").read_text().split("\n")
    return [l for l in lines if l.strip()]


def wlm_small(folder: Path, args):
    """word_language_model's --data data/small: Shakespeare lines (the snapshot lacks
    wikitext-2's train.txt): 1500 lines to train, 200 to validate, 200 to test."""
    t = _shakespeare_lines(folder)
    d = folder / "data" / "small"
    d.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", t[:1500]), ("valid", t[1500:1700]), ("test", t[1700:1900])):
        (d / f"{name}.txt").write_text("\n".join(part) + "\n")


def shakespeare_train(folder: Path, args, dest="data/train.txt", n="2000"):
    """yunjey's language model reads data/train.txt (Penn Treebank, over the snapshot's size
    limit): the first n lines of the Shakespeare text instead."""
    p = folder / dest
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(_shakespeare_lines(folder)[:int(n)]) + "\n")


def tiktoken_stub(folder: Path, args):
    """nanoGPT's sample.py imports tiktoken at the top and, with the character-level meta.pkl,
    never uses it: an empty stand-in module."""
    (folder / "tiktoken.py").write_text('"""stand-in: never used with meta.pkl"""\n'
                                        "def get_encoding(name):\n"
                                        "    raise RuntimeError('no tiktoken here')\n")
