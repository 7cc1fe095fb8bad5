"""Random autograd programs for the differential fuzzer (tests/test_properties.py,
tools: `python tests/_fuzz_programs.py N` prints agreement counts per category).

A program is (category, seed): the interpreter draws each step from random.Random(seed) given
the shapes of the tensors made so far, so torch and nbgrad run the same steps. Steps mix views
(slices, select, chunk/split/unbind), in-place ops (mul_, add_, fill_ with a 0-d tensor, relu_,
clamp_, copy_ through setitem), no_grad blocks, retain_grad, requires_grad_ on plain tensors, and
end in backward (with NaN/inf in the incoming gradient for the nan_grad category). Every tensor
made is observed (values, grad, grad_fn, flags, version), and the error if any.
"""
from __future__ import annotations

import random
import sys

CATEGORIES = ("views_inplace", "no_grad", "retain_grad", "fill_tensor", "chunk", "nan_grad",
              "mixed")

_WEIGHTS = {  # step kind -> weight, per category
    "views_inplace": dict(view=4, unary=2, inplace=4, setitem=2, backward=1),
    "no_grad": dict(view=3, unary=2, inplace=3, no_grad=4, backward=1, requires_grad=1),
    "retain_grad": dict(view=2, unary=2, inplace=3, retain=4, backward=1),
    "fill_tensor": dict(view=2, unary=1, fill=5, inplace=1, backward=1),
    "chunk": dict(chunk=4, view=1, unary=2, inplace=3, backward=1),
    "nan_grad": dict(unary=4, view=1, inplace=1, backward=2),
    "mixed": dict(view=3, unary=2, inplace=3, setitem=1, no_grad=2, retain=2, fill=2, chunk=2,
                  requires_grad=1, backward=1),
}


def _pick(rng, weights):
    kinds = sorted(weights)
    return rng.choices(kinds, [weights[k] for k in kinds])[0]


def run(T, category, seed, env):
    """Run program (category, seed) with library T, putting every tensor made into env."""
    rng = random.Random(f"{category}:{seed}")
    weights = _WEIGHTS[category]
    dt = T.float64
    pool = []

    def add(t):
        env[f"t{len(pool)}"] = t
        pool.append(t)
        return t

    add(T.tensor([[0.5, -1.0, 2.0], [3.0, -0.25, 1.5]], dtype=dt, requires_grad=True))
    add(T.tensor([1.0, -2.0, 0.0, 4.0], dtype=dt, requires_grad=rng.random() < 0.5))
    add(T.zeros(2, 3, dtype=dt))
    if rng.random() < 0.7:
        add(pool[0] * 1)
    scal = T.tensor(rng.choice([2.0, -1.5]), dtype=dt, requires_grad=True)
    env["scalar"] = scal
    nan_g = category == "nan_grad"
    for _ in range(rng.randint(2, 8)):
        kind = _pick(rng, weights)
        t = rng.choice(pool)
        if kind == "no_grad":
            with T.no_grad():
                _step(T, rng, _pick(rng, {k: w for k, w in weights.items()
                                          if k not in ("no_grad", "backward")}), t, pool, add,
                      scal, nan_g)
        else:
            _step(T, rng, kind, t, pool, add, scal, nan_g)
    last = rng.choice(pool)
    _backward(T, rng, last, nan_g or rng.random() < 0.15)


def _step(T, rng, kind, t, pool, add, scal, nan_g):
    if kind == "view":
        if t.dim() == 0:
            add(t[...])
            return
        r = rng.randrange(6)
        n = t.shape[0]
        if r == 0:
            add(t[1:])
        elif r == 1:
            add(t[: max(1, n - 1)])
        elif r == 2:
            add(t[rng.randrange(n)])
        elif r == 3:
            add(t[::2])
        elif r == 4:
            add(t.view(-1) if t.is_contiguous() else t.t() if t.dim() == 2 else t[:])
        else:
            add(t[:])
    elif kind == "chunk":
        if t.dim() == 0 or t.shape[0] < 2:
            return
        r = rng.randrange(3)
        outs = t.chunk(2) if r == 0 else t.split(1) if r == 1 else t.unbind()
        for o in outs:
            add(o)
    elif kind == "unary":
        r = rng.randrange(6)
        add([lambda: t * 2, lambda: t.exp(), lambda: t.relu(), lambda: t.clamp(-1, 1),
             lambda: t * scal, lambda: t.sum(-1) if t.dim() else t.sum()][r]())
    elif kind == "inplace":
        r = rng.randrange(6)
        [lambda: t.mul_(2), lambda: t.add_(scal), lambda: t.relu_(), lambda: t.clamp_(-1, 1),
         lambda: t.mul_(scal), lambda: t.exp_()][r]()
    elif kind == "setitem":
        if t.dim() == 0:
            t[...] = scal
            return
        r = rng.randrange(3)
        if r == 0:
            t[0] = scal
        elif r == 1:
            t[:] = t[0] if t.dim() else t
        else:
            t[0] = 7.0
    elif kind == "fill":
        t.fill_(scal if rng.random() < 0.7 else T.tensor(3.0, dtype=T.float64))
    elif kind == "retain":
        t.retain_grad()
    elif kind == "requires_grad":
        t.requires_grad_()
    elif kind == "backward":
        _backward(T, rng, t, nan_g, retain=rng.random() < 0.5)


def _backward(T, rng, t, nan_g, retain=False):
    if not nan_g:
        t.sum().backward(retain_graph=retain)
        return
    vals = [rng.choice([1.0, float("nan"), float("inf"), -2.0]) for _ in range(t.numel())]
    g = T.tensor(vals, dtype=T.float64).reshape(t.shape)
    t.backward(g, retain_graph=retain)


def tally(n, categories=CATEGORIES):
    """{category: (agreed, ran, {first difference: count})} over seeds 0..n-1."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _differential import differences  # noqa: PLC0415
    out = {}
    for c in categories:
        agree, classes = 0, {}
        for seed in range(n):
            d = differences(lambda T, e: run(T, c, seed, e))
            if d:
                key = str(d[0])[:160]
                classes[key] = classes.get(key, 0) + 1
            else:
                agree += 1
        out[c] = (agree, n, classes)
    return out


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    for cat, (a, n, classes) in tally(int(sys.argv[1]) if len(sys.argv) > 1 else 100).items():
        print(f"{cat}: {a}/{n} agree")
        for k, v in sorted(classes.items(), key=lambda kv: -kv[1])[:8]:
            print(f"   {v:4d}  {k}")
