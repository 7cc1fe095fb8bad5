"""Type promotion against torch: every operator x every dtype pair x operand kind.

Each case runs the same expression in torch and in nbgrad and compares the result's dtype and
values, or the exception's type. Operand kinds: a tensor of shape (3,), a 0-d tensor, a Python
number (bool, int, negative int, float), on either side. ``python tests/test_promotion.py``
prints the counts (cases, agree, differ) and the first disagreements of each operator.
"""
import operator

import numpy as np
import pytest

import nbgrad

torch = pytest.importorskip("torch")

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
A = np.array([5, -7, 3, 0])     # cast to each dtype (uint8 wraps -7 to 249; bool: nonzero)
B = np.array([2, 3, -2, 4])     # no zero: dividing by zero is a case of its own
SCALARS = (True, 2, -3, 2.5)


def _tensors(lib, name, values, zero_d):
    arr = values.astype(np.dtype("bool" if name == "bool" else name))
    if zero_d:
        arr = np.array(arr[1])
    return lib.from_numpy(np.array(arr))


def _run(lib, fn, operands):
    try:
        out = fn(lib, *operands)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if not isinstance(out, lib.Tensor):
            return ("value", type(out).__name__, out)
        return ("tensor", str(out.dtype).replace("torch.", "").replace("nbgrad.", ""),
                np.array(out.detach().numpy()))
    except Exception as e:  # noqa: BLE001 - the exception's type is the result
        return ("raise", type(e).__name__, str(e).split("\n")[0])


def _same(r_t, r_n):
    if r_t[0] != r_n[0] or r_t[1] != r_n[1]:
        return False
    if r_t[0] == "raise":
        return True
    if r_t[0] == "value":
        return r_t[2] == r_n[2]
    a, b = r_t[2], r_n[2]
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        tol = 1e-3 if a.dtype == np.float16 else 1e-6
        return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol,
                                equal_nan=True))
    return bool((a == b).all())


def _binary(op):
    return lambda lib, a, b: op(a, b)


BINARY = {
    "add": _binary(operator.add), "sub": _binary(operator.sub), "mul": _binary(operator.mul),
    "truediv": _binary(operator.truediv), "floordiv": _binary(operator.floordiv),
    "mod": _binary(operator.mod), "pow": _binary(operator.pow),
    "and": _binary(operator.and_), "or": _binary(operator.or_), "xor": _binary(operator.xor),
    "lshift": _binary(operator.lshift), "rshift": _binary(operator.rshift),
    "eq": _binary(operator.eq), "ne": _binary(operator.ne), "lt": _binary(operator.lt),
    "le": _binary(operator.le), "gt": _binary(operator.gt), "ge": _binary(operator.ge),
    "torch.add": lambda lib, a, b: lib.add(a, b), "torch.mul": lambda lib, a, b: lib.mul(a, b),
    "div_trunc": lambda lib, a, b: lib.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda lib, a, b: lib.div(a, b, rounding_mode="floor"),
    "remainder": lambda lib, a, b: lib.remainder(a, b),
    "fmod": lambda lib, a, b: lib.fmod(a, b),
    "maximum": lambda lib, a, b: lib.maximum(a, b),
    "minimum": lambda lib, a, b: lib.minimum(a, b),
    "atan2": lambda lib, a, b: lib.atan2(a, b),
    "where": lambda lib, a, b: lib.where(lib.tensor([True, False, True, False]), a, b),
}
# ops whose first operand is a tensor: in place (the result is cast back to its dtype when
# torch.can_cast allows), and clamp by a bound
TENSOR_FIRST = {
    "iadd": _binary(operator.iadd), "isub": _binary(operator.isub),
    "imul": _binary(operator.imul), "itruediv": _binary(operator.itruediv),
    "add_": lambda lib, a, b: a.add_(b), "mul_": lambda lib, a, b: a.mul_(b),
    "clamp_": lambda lib, a, b: a.clamp_(min=b), "clamp": lambda lib, a, b: a.clamp(min=b),
    "clamp_max": lambda lib, a, b: a.clamp(max=b),
}
# ops of tensors only (no Python number on either side)
JOINING = {
    "cat": lambda lib, a, b: lib.cat([a, b]),
    "stack": lambda lib, a, b: lib.stack([a, b]),
}
UNARY = {
    "neg": lambda lib, a: -a, "abs": lambda lib, a: a.abs(), "exp": lambda lib, a: a.exp(),
    "sqrt": lambda lib, a: a.sqrt(), "sigmoid": lambda lib, a: a.sigmoid(),
    "floor": lambda lib, a: a.floor(), "sign": lambda lib, a: a.sign(),
    "invert": lambda lib, a: ~a, "logical_not": lambda lib, a: lib.logical_not(a),
    "sum": lambda lib, a: a.sum(), "prod": lambda lib, a: a.prod(), "mean": lambda lib, a: a.mean(),
    "cumsum": lambda lib, a: a.cumsum(0), "max": lambda lib, a: a.max(),
    "argmax": lambda lib, a: a.argmax(), "amin": lambda lib, a: a.amin(),
    "clamp_min_int": lambda lib, a: a.clamp(min=0),
    "clamp_min_float": lambda lib, a: a.clamp(min=0.5),
    "clamp_max_negint": lambda lib, a: a.clamp(max=-1),
    "floordiv_zero": lambda lib, a: a // 0, "mod_zero": lambda lib, a: a % 0,
    "pow_negint": lambda lib, a: a ** -2,
}


def cases():
    """(op name, label, function, operand builders) for every case of the sweep."""
    out = []
    for name, fn in {**BINARY, **JOINING}.items():
        for da in DTYPES:
            for db in DTYPES:
                for za, zb in ((False, False), (False, True), (True, False)):
                    label = f"{da}{'[0d]' if za else ''} {name} {db}{'[0d]' if zb else ''}"
                    out.append((name, label, fn,
                                (("t", da, A, za), ("t", db, B, zb))))
        if name in JOINING:
            continue
        for d in DTYPES:
            for s in SCALARS:
                out.append((name, f"{d} {name} {s!r}", fn, (("t", d, A, False), ("s", s))))
                out.append((name, f"{s!r} {name} {d}", fn, (("s", s), ("t", d, B, False))))
    for name, fn in TENSOR_FIRST.items():
        for da in DTYPES:
            for db in DTYPES:
                for zb in (False, True):
                    out.append((name, f"{da} {name} {db}{'[0d]' if zb else ''}", fn,
                                (("t", da, A, False), ("t", db, B, zb))))
            for s in SCALARS:
                out.append((name, f"{da} {name} {s!r}", fn, (("t", da, A, False), ("s", s))))
    for name, fn in UNARY.items():
        for d in DTYPES:
            out.append((name, f"{name}({d})", fn, (("t", d, A, False),)))
    return out


def _operands(lib, spec):
    return [x[1] if x[0] == "s" else _tensors(lib, x[1], x[2], x[3]) for x in spec]


def run_case(fn, spec):
    """(agree, torch's result, nbgrad's result)."""
    r_t = _run(torch, fn, _operands(torch, spec))
    r_n = _run(nbgrad, fn, _operands(nbgrad, spec))
    return _same(r_t, r_n), r_t, r_n


ALL = cases()
OPS = sorted({c[0] for c in ALL})


@pytest.mark.parametrize("op", OPS)
def test_promotion_matches_torch(op):
    bad = []
    for name, label, fn, spec in ALL:
        if name == op:
            ok, r_t, r_n = run_case(fn, spec)
            if not ok:
                bad.append(f"{label}: torch {r_t[:2]} nbgrad {r_n[:2]}")
    assert not bad, f"{len(bad)} cases differ:\n" + "\n".join(bad[:20])


def test_result_type_promote_types_and_can_cast_as_torch():
    for da in DTYPES:
        for db in DTYPES:
            ta, tb = getattr(torch, da), getattr(torch, db)
            na, nb = getattr(nbgrad, da), getattr(nbgrad, db)
            assert str(nbgrad.promote_types(na, nb)).split(".")[-1] == \
                str(torch.promote_types(ta, tb)).split(".")[-1]
            assert nbgrad.can_cast(na, nb) == torch.can_cast(ta, tb), (da, db)
            for za in (False, True):
                x = [_tensors(lib, da, A, za) for lib in (torch, nbgrad)]
                y = [_tensors(lib, db, B, False) for lib in (torch, nbgrad)]
                assert str(nbgrad.result_type(x[1], y[1])).split(".")[-1] == \
                    str(torch.result_type(x[0], y[0])).split(".")[-1]
            for s in SCALARS:
                assert str(nbgrad.result_type(_tensors(nbgrad, da, A, False), s)) \
                    .split(".")[-1] == str(torch.result_type(_tensors(torch, da, A, False), s)) \
                    .split(".")[-1]


if __name__ == "__main__":
    import collections
    import warnings
    warnings.simplefilter("ignore")
    per_op = collections.defaultdict(list)
    n_bad = n_torch_ok_nb_raises = 0
    other_text = []
    for name, label, fn, spec in ALL:
        ok, r_t, r_n = run_case(fn, spec)
        if ok and r_t[0] == "raise" and r_t[2] != r_n[2]:
            other_text.append(f"{label}: torch {r_t[2]!r} nbgrad {r_n[2]!r}")
        if not ok:
            n_bad += 1
            n_torch_ok_nb_raises += r_t[0] != "raise" and r_n[0] == "raise"
            per_op[name].append(f"{label}: torch {r_t[:2]} nbgrad {r_n[:2]} "
                                f"{r_t[2] if r_t[0] == 'raise' else ''}"
                                f"{r_n[2] if r_n[0] == 'raise' else ''}")
    for name, bad in per_op.items():
        print(f"{name}: {len(bad)}")
        for line in bad[:6]:
            print("   ", line[:200])
    print(f"same exception type, other text: {len(other_text)}")
    for line in other_text[:10]:
        print("   ", line[:200])
    print(f"cases {len(ALL)}  agree {len(ALL) - n_bad}  differ {n_bad}  "
          f"(torch computes, nbgrad raises: {n_torch_ok_nb_raises})")
