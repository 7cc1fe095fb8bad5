"""Re-run the real-program corpus of docs/real_programs.md with torch and with nbgrad.

    python benchmarks/real_programs/run.py build   [REGEX]   # program folders from the mirrors
    python benchmarks/real_programs/run.py run torch  [REGEX] [--jobs 2]
    python benchmarks/real_programs/run.py run nbgrad [REGEX] [--jobs 2]
    python benchmarks/real_programs/run.py compare [REGEX]   # the comparison, as a Markdown table

Options: --corpus DIR (a folder outside the repository; default $NBGRAD_CORPUS, else
~/nbgrad-corpus: src/ holds the built folders, work/<lib>/ the fresh copies each run uses,
out/<lib>/ the outputs), --mirrors DIR (the fetched repositories: one git directory per
repository, `owner+name/repo`, as the `fetch` tool leaves them; default $NBGRAD_MIRRORS).

Nothing of the programs is in this repository: manifest.txt names, for each program, the
repository and commit, the paths copied, the command, the timeout, and the size/iteration shrinks
as literal substitutions (each must match, or the build says so). README.md says how to gather
the mirrors and what the comparison means.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import compare  # noqa: E402
import preps  # noqa: E402

KEYS = {"from", "file", "run", "timeout", "seeded", "sub", "prep", "note", "row"}


def manifest(path=HERE / "manifest.txt"):
    """[{name, from: [...], file: [...], run, timeout, seeded, sub: [...], prep: [...], ...}]"""
    progs, cur = [], None
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.fullmatch(r"\[(\w+)\]", line.strip())
        if m:
            cur = {"name": m.group(1), "from": [], "file": [], "sub": [], "prep": [],
                   "timeout": "300", "seeded": "no", "note": "", "row": ""}
            progs.append(cur)
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in KEYS or cur is None:
            raise SystemExit(f"manifest.txt:{n}: not `key = value` with a known key: {line!r}")
        if isinstance(cur.get(key), list):
            cur[key].append(value)
        else:
            cur[key] = value
    return progs


def select(progs, regex):
    return [p for p in progs if re.search(regex or ".", p["name"])]


def _split_source(spec):
    """'owner/name@commit:path' -> (owner+name, commit, path)"""
    repo, _, rest = spec.partition("@")
    commit, _, path = rest.partition(":")
    return repo.replace("/", "+"), commit, path.strip("/")


def _git_dir(mirrors, repo):
    for d in (mirrors / repo / "repo", mirrors / repo):
        if (d / "HEAD").exists() or (d / ".git").exists():
            return d
    return None


def _extract(args, corpus, spec, dest, single):
    repo, commit, path = _split_source(spec)
    git = _git_dir(args.mirrors, repo)
    if git is None:  # files read through the search tool's file reader (no snapshot of the repo)
        local = corpus / "files" / repo / path
        if not local.exists():
            raise RuntimeError(f"no mirror of {repo} in {args.mirrors} and no {local}")
        if local.is_dir():
            shutil.copytree(local, dest, dirs_exist_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(local, dest)
        return
    if single:
        blob = subprocess.run(["git", "-C", str(git), "show", f"{commit}:{path}"],
                              capture_output=True, check=True).stdout
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(blob)
        return
    dest.mkdir(parents=True, exist_ok=True)
    _checkout(git, f"{commit}:{path}" if path else commit, dest)


def _checkout(git, tree, dest):
    """The files of a tree into dest; blobs the snapshot lacks (files of 4 MiB and more) are
    left out and named."""
    ls = subprocess.run(["git", "-C", str(git), "ls-tree", "-r", "-z", tree],
                        capture_output=True, check=True).stdout.decode().split("\0")
    entries = [(e.split()[2], e.split("\t", 1)[1]) for e in ls if e and e.split()[1] == "blob"]
    cat = subprocess.run(["git", "-C", str(git), "cat-file", "--batch"], capture_output=True,
                         input="".join(sha + "\n" for sha, _ in entries).encode()).stdout
    pos = 0
    for sha, name in entries:
        head_end = cat.index(b"\n", pos)
        head = cat[pos:head_end].split()
        pos = head_end + 1
        if head[-1] == b"missing":
            print(f"  (not in the snapshot: {name})")
            continue
        size = int(head[2])
        out = dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(cat[pos:pos + size])
        pos += size + 1


def build_one(args, prog):
    corpus = args.corpus
    folder = corpus / "src" / prog["name"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for spec in prog["from"]:
        src, _, dest = spec.partition("->")
        _extract(args, corpus, src.strip(), folder / dest.strip(), single=False)
    for spec in prog["file"]:
        src, _, dest = spec.partition("->")
        src = src.strip()
        dest = dest.strip() or Path(_split_source(src)[2]).name
        _extract(args, corpus, src, folder / dest, single=True)
    for p in prog["prep"]:
        name, *rest = p.split()
        getattr(preps, name)(folder, args, *rest)
    for s in prog["sub"]:
        fname, _, rest = s.partition("|")
        old, sep, new = rest.partition("=>")
        old, new = _unescape(old.strip()), _unescape(new.strip())
        f = folder / fname.strip()
        text = f.read_text(encoding="utf-8")
        if not sep or old not in text:
            raise RuntimeError(f"substitution {s!r}: not found in {fname.strip()}")
        f.write_text(text.replace(old, new), encoding="utf-8")
    return folder


def _unescape(s):
    """`sub` values are literal; `\\q` stands for a double quote (notebooks are JSON), `\\s` for
    a space at either end."""
    return s.replace("\\q", '"').replace("\\s", " ")


def command(prog, lib):
    py = "python -m nbgrad" if lib == "nbgrad" else "python"
    nb = f"{py} {HERE / 'nbrun.py'}"
    return re.sub(r"\bPY\b", py, re.sub(r"\bNB\b", nb, prog["run"]))


def run_one(args, prog, lib):
    src = args.corpus / "src" / prog["name"]
    work = args.corpus / "work" / lib / prog["name"]
    out = args.corpus / "out" / lib
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work, symlinks=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg",
               PYTHONHASHSEED="0", PYTHONUNBUFFERED="1", TQDM_DISABLE="1")
    if lib == "nbgrad":
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.time()
    with open(out / f"{prog['name']}.out", "wb") as f:
        proc = subprocess.Popen(["bash", "-c", command(prog, lib)], cwd=work, env=env, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=float(prog["timeout"]))
        except subprocess.TimeoutExpired:
            rc = 124
        finally:  # the program's own children too (DataLoader workers outlive a killed parent)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    (out / f"{prog['name']}.rc").write_text(f"{rc} {time.time() - t0:.1f}\n")
    return f"{lib} {prog['name']}: rc={rc} {time.time() - t0:.0f}s"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("action", choices=["build", "run", "compare", "list"])
    ap.add_argument("rest", nargs="*")
    ap.add_argument("--corpus", type=Path,
                    default=Path(os.environ.get("NBGRAD_CORPUS", "~/nbgrad-corpus")).expanduser())
    ap.add_argument("--mirrors", type=Path, default=os.environ.get("NBGRAD_MIRRORS"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if args.action == "build" and args.mirrors is None:
        ap.error("build needs the fetched repositories: --mirrors DIR or $NBGRAD_MIRRORS")
    args.mirrors = args.mirrors and Path(args.mirrors)
    progs = manifest()
    if args.action == "list":
        for p in select(progs, args.rest[0] if args.rest else None):
            print(p["name"], "|", ", ".join(p["from"] + p["file"]), "|", p["run"])
        return 0
    if args.action == "build":
        bad = 0
        for p in select(progs, args.rest[0] if args.rest else None):
            try:
                build_one(args, p)
            except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
                bad += 1
                print(f"BUILD FAILED {p['name']}: {e}")
        return 1 if bad else 0
    if args.action == "run":
        lib, regex = args.rest[0], (args.rest[1] if len(args.rest) > 1 else None)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for line in pool.map(lambda p: run_one(args, p, lib), select(progs, regex)):
                print(line, flush=True)
        return 0
    print(compare.report(select(progs, args.rest[0] if args.rest else None), args.corpus / "out"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
