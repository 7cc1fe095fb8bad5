"""Random autograd programs for the differential fuzzer (tests/test_properties.py,
tools: `python tests/_fuzz_programs.py N [START]` prints agreement counts per category,
`python tests/_fuzz_programs.py show CATEGORY SEED` prints one program's source).

A program is (category, seed): the interpreter draws each step from random.Random(seed) given
the shapes of the tensors made so far, writes it as one line of Python and runs that line, so
torch and nbgrad run the same lines and a disagreement prints as a program to paste into a test.
Steps mix views (slices, select, transpose, unsqueeze, expand, views of views, chunk/split/unbind),
in-place ops (mul_, add_, fill_ with a 0-d tensor, relu_, clamp_, copy_ through setitem, setitem
of a broadcast value), no_grad blocks, retain_grad, detach, requires_grad_ on plain tensors, and
end in backward (with NaN/inf in the incoming gradient for the nan_grad category). Every tensor
made is observed (values, grad, grad_fn, flags, version), and the error if any.
"""
from __future__ import annotations

import random
import sys

CATEGORIES = ("views_inplace", "no_grad", "retain_grad", "fill_tensor", "chunk", "nan_grad",
              "mixed", "expand", "setitem_bcast", "deep_views", "mixed2", "grad_api", "fused")

_WEIGHTS = {  # step kind -> weight, per category
    "views_inplace": dict(view=4, unary=2, inplace=4, setitem=2, backward=1),
    "no_grad": dict(view=3, unary=2, inplace=3, no_grad=4, backward=1, requires_grad=1),
    "retain_grad": dict(view=2, unary=2, inplace=3, retain=4, backward=1),
    "fill_tensor": dict(view=2, unary=1, fill=5, inplace=1, backward=1),
    "chunk": dict(chunk=4, view=1, unary=2, inplace=3, backward=1),
    "nan_grad": dict(unary=4, view=1, inplace=1, backward=2),
    "mixed": dict(view=3, unary=2, inplace=3, setitem=1, no_grad=2, retain=2, fill=2, chunk=2,
                  requires_grad=1, backward=1),
    # the wider shapes of programs (issue 9): expand, broadcast setitem, views of views,
    # several steps in one no_grad block, detach
    "expand": dict(expand=4, view=1, unary=2, inplace=3, setitem=1, backward=1),
    "setitem_bcast": dict(setitem2=5, view=2, unary=1, inplace=1, no_grad=1, backward=1),
    "deep_views": dict(view2=5, view=2, inplace=3, unary=1, retain=1, no_grad_block=1,
                       backward=1),
    "mixed2": dict(view=2, view2=2, expand=2, unary=2, inplace=3, setitem=1, setitem2=2, fill=1,
                   chunk=1, retain=1, detach=1, no_grad=1, no_grad_block=1, requires_grad=1,
                   backward=1),
    # autograd.grad (allow_unused, create_graph), double backward, tensor hooks, detach_
    "grad_api": dict(grad=3, hook=2, unary=2, view=2, inplace=2, detach_=1, retain=1,
                     backward=1),
    # the calls nbgrad records as one node standing for torch's chain (autograd/fused.py):
    # batched matmul, linear, cross_entropy, with graph walks that build the chain mid-program
    "fused": dict(matmul=3, linear=3, xent=2, walk=2, view=2, unary=1, inplace_mild=3,
                  retain=1, no_grad=1, hook=1, grad=2, backward=1),
}
_NOT_IN_NO_GRAD = ("no_grad", "no_grad_block", "backward", "grad")


def _pick(rng, weights):
    kinds = sorted(weights)
    return rng.choices(kinds, [weights[k] for k in kinds])[0]


class _Program:
    """The state of one program being drawn and run: its namespace and its source lines."""

    def __init__(self, T, rng, env, nan_g, lines):
        self.T, self.rng, self.env, self.nan_g, self.lines = T, rng, env, nan_g, lines
        self.ns = {"T": T, "dt": T.float64}
        self.names = []
        self.indent = ""

    def exec(self, code, shown=None):
        """Run one line (shown in the source as `shown` when given)."""
        self.lines.append(self.indent + (code if shown is None else shown))
        exec(code, self.ns)  # noqa: S102 - the program is ours

    def add(self, expr):
        """Run `tN = expr` for the next N."""
        name = f"t{len(self.names)}"
        self.exec(f"{name} = {expr}")
        self.names.append(name)
        self.env[name] = self.ns[name]

    def add_many(self, expr, count):
        names = [f"t{len(self.names) + i}" for i in range(count)]
        self.exec(f"{', '.join(names)}{',' if count == 1 else ''} = {expr}")
        self.names.extend(names)
        for n in names:
            self.env[n] = self.ns[n]


def run(T, category, seed, env, lines=None):
    """Run program (category, seed) with library T, putting every tensor made into env (and
    each line of its source into `lines` when given)."""
    rng = random.Random(f"{category}:{seed}")
    weights = _WEIGHTS[category]
    nan_g = category == "nan_grad"
    p = _Program(T, rng, env, nan_g, [] if lines is None else lines)
    p.add("T.tensor([[0.5, -1.0, 2.0], [3.0, -0.25, 1.5]], dtype=dt, requires_grad=True)")
    p.add(f"T.tensor([1.0, -2.0, 0.0, 4.0], dtype=dt, requires_grad={rng.random() < 0.5})")
    p.add("T.zeros(2, 3, dtype=dt)")
    if rng.random() < 0.7:
        p.add("t0 * 1")
    p.exec(f"scalar = T.tensor({rng.choice([2.0, -1.5])}, dtype=dt, requires_grad=True)")
    env["scalar"] = p.ns["scalar"]
    for _ in range(rng.randint(2, 8)):
        kind = _pick(rng, weights)
        t = rng.choice(p.names)
        if kind in ("no_grad", "no_grad_block"):  # one step, or several, under no_grad
            inner = {k: w for k, w in weights.items() if k not in _NOT_IN_NO_GRAD}
            p.exec("_ng = T.no_grad(); _ng.__enter__()", "with T.no_grad():")
            p.indent = "    "
            try:
                if kind == "no_grad":
                    _step(p, _pick(rng, inner), t)
                else:
                    for _ in range(rng.randint(2, 3)):
                        _step(p, _pick(rng, inner), rng.choice(p.names))
            finally:
                p.indent = ""
                p.ns["_ng"].__exit__(None, None, None)
        else:
            _step(p, kind, t)
    _backward(p, rng.choice(p.names), nan_g or rng.random() < 0.15)


def _step(p, kind, name):
    rng, t = p.rng, p.ns[name]
    if kind == "view":
        if t.dim() == 0:
            p.add(f"{name}[...]")
            return
        r = rng.randrange(6)
        n = t.shape[0]
        p.add([f"{name}[1:]", f"{name}[:{max(1, n - 1)}]", None, f"{name}[::2]",
               f"{name}.view(-1)" if t.is_contiguous() else
               f"{name}.t()" if t.dim() == 2 else f"{name}[:]", f"{name}[:]"][r]
              or f"{name}[{rng.randrange(n)}]")
    elif kind == "view2":  # views of views beyond slicing
        choices = [f"{name}.unsqueeze(0)", f"{name}[None]", f"{name}.reshape(-1)"]
        if t.dim() >= 1:
            choices += [f"{name}.unsqueeze(-1)", f"{name}.narrow(0, 0, 1)", f"{name}[..., :1]"]
            if t.shape[0] == 1:
                choices.append(f"{name}.squeeze(0)")
        if t.dim() >= 2:
            choices += [f"{name}.transpose(0, 1)", f"{name}.permute(1, 0)", f"{name}.diagonal()",
                        f"{name}[:, 1:]", f"{name}[:, 0]", f"{name}.view(-1)[1:]"
                        if t.is_contiguous() else f"{name}.t()[0]"]
        p.add(rng.choice(choices))
    elif kind == "expand":
        if t.dim() == 0:
            p.add(rng.choice([f"{name}.expand(3)", f"{name}.expand(2, 1)"]))
        else:
            shape = tuple(t.shape)
            choices = [f"{name}.unsqueeze(0).expand(2, {', '.join(map(str, shape))})",
                       f"{name}.expand({', '.join(map(str, shape))})",
                       f"{name}[:1].expand({', '.join(['2'] + list(map(str, shape[1:])))})",
                       f"{name}.unsqueeze(-1).expand({', '.join(map(str, shape))}, 2)",
                       f"{name}[None].expand(1, {', '.join(map(str, shape))})"]
            p.add(rng.choice(choices))
    elif kind == "chunk":
        if t.dim() == 0 or t.shape[0] < 2:
            return
        r = rng.randrange(3)
        count = 2 if r == 0 else t.shape[0]
        p.add_many([f"{name}.chunk(2)", f"{name}.split(1)", f"{name}.unbind()"][r], count)
    elif kind == "unary":
        r = rng.randrange(6)
        p.add([f"{name} * 2", f"{name}.exp()", f"{name}.relu()", f"{name}.clamp(-1, 1)",
               f"{name} * scalar", f"{name}.sum(-1)" if t.dim() else f"{name}.sum()"][r])
    elif kind == "inplace":
        r = rng.randrange(6)
        p.exec([f"{name}.mul_(2)", f"{name}.add_(scalar)", f"{name}.relu_()",
                f"{name}.clamp_(-1, 1)", f"{name}.mul_(scalar)", f"{name}.exp_()"][r])
    elif kind == "inplace_mild":  # (no exp_: exp of a loss, summed, leaves only rounding noise)
        r = rng.randrange(5)
        p.exec([f"{name}.mul_(2)", f"{name}.add_(scalar)", f"{name}.relu_()",
                f"{name}.clamp_(-1, 1)", f"{name}.mul_(scalar)"][r])
    elif kind == "setitem":
        if t.dim() == 0:
            p.exec(f"{name}[...] = scalar")
            return
        r = rng.randrange(3)
        p.exec([f"{name}[0] = scalar", f"{name}[:] = {name}[0]", f"{name}[0] = 7.0"][r])
    elif kind == "setitem2":  # values that broadcast, from other tensors, through index lists
        _setitem2(p, name, t)
    elif kind == "fill":
        p.exec(f"{name}.fill_(scalar)" if rng.random() < 0.7 else
               f"{name}.fill_(T.tensor(3.0, dtype=dt))")
    elif kind == "retain":
        p.exec(f"{name}.retain_grad()")
    elif kind == "requires_grad":
        p.exec(f"{name}.requires_grad_()")
    elif kind == "detach":
        r = rng.randrange(3)
        if r == 0:
            p.add(f"{name}.detach()")
        elif r == 1:
            p.add(f"{name}.data")
        else:
            p.exec(f"{name}.detach().mul_(2)")
    elif kind == "backward":
        retain = rng.random() < 0.5
        _backward(p, name, p.nan_g, retain=retain)
    elif kind == "grad":
        r = rng.randrange(4)
        retain = rng.random() < 0.5
        if r == 0:
            p.add_many(f"T.autograd.grad({name}.sum(), (t0, scalar), allow_unused=True, "
                       f"retain_graph={retain})", 2)
        elif r == 1:  # a gradient with a graph of its own, then used
            p.add_many(f"T.autograd.grad(({name} * {name}).sum(), (t0,), allow_unused=True, "
                       f"create_graph=True)", 1)
        elif r == 2:
            p.exec(f"{name}.sum().backward(create_graph=True, retain_graph={retain})")
        else:  # the caller's gradient: views of it come back (t, view), of its own shape
            p.add(f"T.ones({tuple(t.shape)}, dtype=dt)")
            p.add_many(f"T.autograd.grad({name}, (t0, scalar), {p.names[-1]}, allow_unused=True, "
                       f"retain_graph={retain})", 2)
    elif kind == "hook":
        if t.requires_grad:
            p.exec(f"{name}.register_hook(lambda g: g * 2)" if rng.random() < 0.5 else
                   f"{name}.register_hook(lambda g: None)")
    elif kind == "detach_":
        p.exec(f"{name}.detach_()")
    elif kind in ("matmul", "linear", "xent", "walk"):
        _fused_step(p, kind, name, t)


def _fused_step(p, kind, name, t):
    rng = p.rng
    n = max(t.numel(), 1)
    rg = rng.random() < 0.8
    a3 = f"{name}.reshape(1, {n}, 1)"
    if kind == "matmul":
        # (the last: a broadcast batch, whose gradients are reduced over it into views, as
        # torch's sum_to)
        r = rng.randrange(4)
        w = [f"T.full((1, 1, 3), 0.5, dtype=dt, requires_grad={rg})",
             f"T.full((1, 3, 1), -0.5, dtype=dt, requires_grad={rg}).transpose(1, 2)", None,
             f"T.full((2, 1, 1, 3), 0.25, dtype=dt, requires_grad={rg})"][r]
        if w is None:  # an operand times its own transpose (one tensor, two edges)
            p.add(f"{a3} @ {a3}.transpose(1, 2)")
        else:
            p.add(f"{a3} @ {w}")
    elif kind == "linear":
        x = a3 if rng.random() < 0.6 else f"{name}.reshape({n}, 1)"
        bias = rng.choice(["None", f"T.tensor([0.5, -1.0], dtype=dt, requires_grad={rg})"])
        p.add(f"T.nn.functional.linear({x}, T.tensor([[2.0], [-3.0]], dtype=dt, "
              f"requires_grad={rg}), {bias})")
    elif kind == "xent":
        targets = [rng.choice([0, 1, 2, 2, 1, -100]) for _ in range(n)]
        red = rng.choice(["mean", "sum"])
        p.add(f"T.nn.functional.cross_entropy({name}.reshape({n}, 1) * "
              f"T.tensor([1.0, -2.0, 0.5], dtype=dt), T.tensor({targets}), reduction='{red}')")
    else:  # walk the graph below a node (nbgrad builds a fused node's chain here)
        p.exec(f"_walked = [type(f).__name__ for f, _ in {name}.grad_fn.next_functions] "
               f"if {name}.grad_fn is not None else []")


def _setitem2(p, name, t):
    rng = p.rng
    if t.dim() == 0:
        p.exec(rng.choice([f"{name}[...] = scalar * 2", f"{name}[None] = scalar",
                           f"{name}.copy_(scalar.expand(()))"]))
        return
    shape = tuple(t.shape)
    others = [n for n in p.names if n != name]
    row = shape[1:]
    # a value of the row's shape, or one with extra leading size-1 dimensions, or a 0-d one
    sources = [n for n in others if tuple(p.ns[n].shape) in (row, (1,) + row, ())]
    src = rng.choice(sources + ["scalar"]) if sources else "scalar"
    targets = [f"{name}[0]", f"{name}[-1]", f"{name}[:1]", f"{name}[[0]]"]
    if p.ns[src].dim() == 0:  # a mask selects any number of elements
        targets.append(f"{name}[{name} > 0]")
    target = rng.choice(targets)
    value = rng.choice([src, f"{src} * 2", f"{src}.detach()"])
    p.exec(f"{target} = {value}")


def _backward(p, name, nan_g, retain=False):
    rng, t = p.rng, p.ns[name]
    if not nan_g:
        p.exec(f"{name}.sum().backward(retain_graph={retain})")
        return
    vals = [rng.choice([1.0, float("nan"), float("inf"), -2.0]) for _ in range(t.numel())]
    text = ", ".join(f"float('{v}')" if v != v or abs(v) == float("inf") else repr(v)
                     for v in vals)
    p.exec(f"{name}.backward(T.tensor([{text}], dtype=dt).reshape({tuple(t.shape)}), "
           f"retain_graph={retain})")


def source(category, seed):
    """The program's lines as torch runs them (up to the line that raised, if one did)."""
    import torch  # noqa: PLC0415
    lines = []
    try:
        run(torch, category, seed, {}, lines)
    except Exception as e:  # noqa: BLE001
        lines.append(f"# torch raised {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return "\n".join(lines)


def tally(n, categories=CATEGORIES, start=0):
    """{category: (agreed, ran, {first difference: (count, first seed)})} over seeds
    start..start+n-1."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _differential import differences  # noqa: PLC0415
    out = {}
    for c in categories:
        agree, classes = 0, {}
        for seed in range(start, start + n):
            d = differences(lambda T, e: run(T, c, seed, e))
            if d:
                key = str(d[0])[:160]
                count, first = classes.get(key, (0, seed))
                classes[key] = (count + 1, first)
            else:
                agree += 1
        out[c] = (agree, n, classes)
    return out


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    if sys.argv[1:2] == ["show"]:
        print(source(sys.argv[2], int(sys.argv[3])))
        sys.exit()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    start = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    cats = sys.argv[3].split(",") if len(sys.argv) > 3 else CATEGORIES
    for cat, (a, n, classes) in tally(n, cats, start=start).items():
        print(f"{cat}: {a}/{n} agree")
        for k, (v, first) in sorted(classes.items(), key=lambda kv: -kv[1][0])[:8]:
            print(f"   {v:4d}  (seed {first})  {k}")
