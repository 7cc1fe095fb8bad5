"""What real PyTorch programs stopped on (docs/real_programs.md), each checked against torch.

Row-level cases (cross) join test_ops.py's harness through ``CASES`` (values, grad_fn names,
gradients, gradcheck, second order, float32); the rest compare values, dtypes, shapes, node names
and error texts with torch 2.13 directly.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import nbgrad
import test_ops as base
from test_ops import Case

REPO = Path(__file__).resolve().parents[1]

CASES = [
    Case("linalg_cross", lambda T, a, b: T.linalg.cross(a, b), (4, 3), (4, 3)),
    Case("linalg_cross_dim0_bcast", lambda T, a, b: T.linalg.cross(a, b, dim=0), (3, 4), (3, 1)),
    Case("cross_dim", lambda T, a, b: T.cross(a, b, dim=1), (2, 3), (2, 3)),
    Case("cross_method", lambda T, a, b: a.cross(b, dim=-1), (3,), (3,)),
    Case("svd_legacy", lambda T, a: _abs_cols(T.svd(a)), (4, 3)),
    Case("svd_legacy_full_U", lambda T, a: T.svd(a, some=False).S, (3, 4)),
    Case("cdist", lambda T, a, b: T.cdist(a, b), (1, 4, 3), (1, 5, 3)),
    Case("cdist_p1", lambda T, a, b: T.cdist(a, b, p=1), ("grid", (4, 3)), ("grid", (5, 3), 0.1)),
    Case("cdist_p3", lambda T, a, b: T.cdist(a, b, p=3), (2, 4, 3), (2, 5, 3)),
    Case("cdist_euclidean_mm", lambda T, a, b: T.cdist(a, b), (27, 3), (4, 3)),
    Case("cdist_mm_mode", lambda T, a, b: T.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
         (3, 2), (4, 2)),
    Case("ravel", lambda T, a: T.ravel(a), (3, 4)),
    Case("ravel_of_transpose", lambda T, a: a.t().ravel(), (3, 4)),
    Case("normalize", lambda T, a: T.nn.functional.normalize(a, dim=1), (3, 4)),
    Case("normalize_p1_dim0", lambda T, a: T.nn.functional.normalize(a, 1, 0), ("away", (3, 4))),
    Case("weight_norm_dim0", lambda T, v, g: T._weight_norm(v, g, 0), (3, 4), (3, 1)),
    Case("weight_norm_dim1", lambda T, v, g: T._weight_norm(v, g, 1), (2, 3, 2), (1, 3, 1)),
    Case("weight_norm_last", lambda T, v, g: T._weight_norm(v, g, -2 + 3), (2, 3, 2), (1, 1, 2)),
    Case("weight_norm_whole", lambda T, v, g: T._weight_norm(v, g, -1), (3, 4), ()),
    Case("norm_except_dim", lambda T, v: T.norm_except_dim(v, 2, 1), (3, 4)),
    Case("norm_except_dim0", lambda T, v: T.norm_except_dim(v, 2, 0), (3, 2, 2)),
    Case("norm_except_dim_mid", lambda T, v: T.norm_except_dim(v, 3, 1), (3, 2, 2)),
]


def _abs_cols(r):
    """U, S and V with the sign of each singular vector fixed (U's and V's columns)."""
    sign = (r.U[0:1, :] >= 0) * 2 - 1  # a column's sign is arbitrary; fix it by U's first row
    return r.U * sign, r.S, r.V * sign


@pytest.mark.parametrize("case", [c.param("forward") for c in CASES])
def test_forward(case):
    base.test_forward(case)


@pytest.mark.parametrize("case", [c.param("grad_fn") for c in CASES])
def test_grad_fn_name(case):
    base.test_grad_fn_name(case)


@pytest.mark.parametrize("case", [c.param("grad") for c in CASES])
def test_grad(case):
    base.test_grad(case)


@pytest.mark.parametrize("case", [c.param("gradcheck") for c in CASES])
def test_gradcheck(case):
    base.test_gradcheck(case)


# torch has no double backward through CdistBackward0 ("the derivative for '_cdist_backward' is
# not implemented"), nor has nbgrad: the refusal is checked below
NO_SECOND_IN_TORCH = {"cdist", "cdist_p1", "cdist_p3"}
# torch's double backward through WeightNormInterfaceBackward0 fails its own gradgradcheck
# (torch 2.13, CPU); nbgrad's passes it, checked below
NO_SECOND_IN_TORCH |= {"weight_norm_dim0", "weight_norm_last"}


@pytest.mark.parametrize("case", [c.param("second") for c in CASES
                                  if c.name not in NO_SECOND_IN_TORCH])
def test_second_order_vs_torch(case):
    base.test_second_order_vs_torch(case)


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, float("inf")])
def test_cdist_second_order_refused_as_torch(p):
    """cdist's gradient under create_graph hangs on CdistBackwardBackward0 (torch's
    _cdist_backward, the second input's with the sets swapped), whose backward raises torch's
    NotImplementedError; the first order it gives is cdist's."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)) + 0.05
    seen = []
    for T in (torch, nbgrad):
        x, y = T.tensor(a, requires_grad=True), T.tensor(b, requires_grad=True)
        gx, gy = T.autograd.grad(T.cdist(x, y, p=p).sum(), (x, y), create_graph=True)
        assert [type(t.grad_fn).__name__ for t in (gx, gy)] == ["CdistBackwardBackward0"] * 2
        with pytest.raises(NotImplementedError) as e:
            T.autograd.grad(gy.sum(), x)
        seen.append((gx.detach().numpy(), gy.detach().numpy(), str(e.value)))
    np.testing.assert_allclose(seen[1][0], seen[0][0], rtol=1e-12)
    np.testing.assert_allclose(seen[1][1], seen[0][1], rtol=1e-12)
    assert seen[1][2] == seen[0][2]


@pytest.mark.parametrize("dim, gshape", [(0, (3, 1)), (1, (1, 4))])
def test_weight_norm_second_order_by_finite_differences(dim, gshape):
    rng = np.random.default_rng(4)
    v = nbgrad.tensor(rng.normal(size=(3, 4)), requires_grad=True)
    g = nbgrad.tensor(rng.normal(size=gshape), requires_grad=True)
    assert nbgrad.autograd.gradgradcheck(lambda a, b: nbgrad._weight_norm(a, b, dim), (v, g))
    tv, tg = torch.tensor(v.detach().numpy(), requires_grad=True), torch.tensor(
        g.detach().numpy(), requires_grad=True)  # what the exclusion above rests on
    assert not torch.autograd.gradgradcheck(lambda a, b: torch._weight_norm(a, b, dim), (tv, tg),
                                            raise_exception=False)


def _both(fn):
    """fn(torch) and fn(nbgrad): their results, or (exception type name, message)."""
    out = []
    for T in (torch, nbgrad):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(fn(T))
        except Exception as e:  # noqa: BLE001 (the error itself is compared)
            out.append((type(e).__name__, str(e)))
    return out


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else x


@pytest.mark.parametrize("fn", [
    lambda T: T.cross(T.ones(2, 4), T.ones(2, 4)),
    lambda T: T.linalg.cross(T.ones(2, 4), T.ones(2, 4)),
    lambda T: T.linalg.cross(T.ones(2, 3), T.ones(3)),
    lambda T: T.cat([T.tensor(1.0), T.tensor(2.0)]),
    lambda T: T.cat([T.ones(2), T.tensor(2.0)]),
    lambda T: T.ones(2).type("torch.NoSuchTensor"),
    lambda T: T.ones(2).new("text"),
    lambda T: T.cdist(T.ones(3), T.ones(2, 3)),
    lambda T: T.cdist(T.ones(2, 3), T.ones(2, 4)),
    lambda T: T.cdist(T.ones(2, 3), T.ones(2, 3), p=-1),
], ids=["cross_no_dim_of_3", "linalg_cross_len", "linalg_cross_ndim", "cat_0d_first",
        "cat_0d_second", "type_bad_name", "new_bad_data", "cdist_1d", "cdist_columns",
        "cdist_negative_p"])
def test_errors_as_torch(fn):
    t, n = _both(fn)
    assert isinstance(t, tuple) and n == t


def test_cross_without_dim_takes_the_first_dim_of_size_3_and_warns():
    a, b = np.random.default_rng(0).normal(size=(2, 3, 3, 2))
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim arg"):
        y = nbgrad.cross(nbgrad.tensor(a), nbgrad.tensor(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.cross(torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(y.numpy(), want.numpy())


@pytest.mark.parametrize("some", [True, False])
def test_svd_shapes_and_compute_uv(some):
    a = np.random.default_rng(1).normal(size=(2, 4, 3))
    for uv in (True, False):
        t = torch.svd(torch.tensor(a), some=some, compute_uv=uv)
        n = nbgrad.svd(nbgrad.tensor(a), some=some, compute_uv=uv)
        assert [tuple(x.shape) for x in n] == [tuple(x.shape) for x in t]
        np.testing.assert_allclose(n.S.numpy(), t.S.numpy())
        if not uv:
            assert not n.U.numpy().any() and not n.V.numpy().any()
        assert type(n).__name__ == "svd" and n._fields == ("U", "S", "V")


def test_histogram_bins_default_to_100():
    a = np.random.default_rng(2).normal(size=50).astype(np.float32)
    t = torch.histogram(torch.tensor(a), density=True)
    n = nbgrad.histogram(nbgrad.tensor(a), density=True)
    np.testing.assert_allclose(n.hist.numpy(), t.hist.numpy(), rtol=1e-5)
    np.testing.assert_allclose(n.bin_edges.numpy(), t.bin_edges.numpy(), atol=1e-6)


@pytest.mark.parametrize("method", ["short", "char", "byte", "half", "int", "long", "bool"])
def test_dtype_methods(method):
    x = [[-1.5, 0.0], [2.7, 300.0]]
    t = getattr(torch.tensor(x), method)()
    n = getattr(nbgrad.tensor(x), method)()
    assert str(n.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    if method not in ("byte", "char"):  # out-of-range float -> small int casts are undefined
        np.testing.assert_array_equal(n.numpy(), t.numpy())


@pytest.mark.parametrize("arg", ["torch.LongTensor", "torch.DoubleTensor", "LEGACY_INT",
                                 "DTYPE_F64"])
def test_type_converts_like_torch(arg):
    def f(T):
        a = {"LEGACY_INT": T.IntTensor, "DTYPE_F64": T.float64}.get(arg, arg)
        y = T.tensor([1.5, -2.0]).type(a)
        return str(y.dtype).split(".")[1], y.tolist(), y.type().split(".")[1]
    t, n = _both(f)
    assert n == t


@pytest.mark.parametrize("args", [([1, 2],), (2, 3), ((2, 3),), (), ("SIZE",)],
                         ids=["data", "sizes", "tuple_is_data", "empty", "size"])
def test_new_like_torch(args):
    def f(T):
        a = [T.Size([2, 1]) if x == "SIZE" else x for x in args]
        y = T.ones(2, dtype=T.float64).new(*a)
        return str(y.dtype).split(".")[1], tuple(y.shape), y.tolist() if "data" in str(a) or \
            (len(a) == 1 and isinstance(a[0], (list, tuple)) and not isinstance(a[0], T.Size)) \
            else None
    t, n = _both(f)
    assert n == t


def test_new_of_a_tensor_is_an_alias():
    x = nbgrad.ones(3)
    y = x.new(x)
    y[0] = 5
    assert x[0].item() == 5 and not y.requires_grad


def test_mse_loss_keeps_the_float_dtype_against_an_int_target():
    """torch promotes float32 with int64 to float32 (the blitz tutorial's MSELoss against
    torch.arange); numpy's float64 would give a float64 loss and float64 .grad for a float32
    parameter."""
    out = {}
    for T in (torch, nbgrad):
        o = T.tensor([[0.5, 1.5, 2.0]], requires_grad=True)
        loss = T.nn.MSELoss()(o, T.arange(1, 4).view(1, -1))
        loss.backward()
        out[T.__name__] = (str(loss.dtype).split(".")[1], type(loss.grad_fn).__name__,
                           str(o.grad.dtype).split(".")[1], round(loss.item(), 6),
                           o.grad.tolist())
    assert out["nbgrad"] == out["torch"]


def test_gradcheck_takes_a_list_of_inputs():
    """The numpy-extensions tutorial calls gradcheck(module, [input])."""
    lin = nbgrad.nn.Linear(3, 2).double()
    x = nbgrad.randn(4, 3, dtype=nbgrad.float64, requires_grad=True)
    assert nbgrad.autograd.gradcheck(lin, [x])
    assert nbgrad.autograd.gradgradcheck(lambda t: (t * t).sum(), [x])


def test_bfloat16_is_named_and_refused_clearly():
    assert repr(nbgrad.bfloat16) == "nbgrad.bfloat16" and nbgrad.bfloat16.is_floating_point
    for make in (lambda: nbgrad.zeros(2, dtype=nbgrad.bfloat16),
                 lambda: nbgrad.ones(2).to(nbgrad.bfloat16)):
        with pytest.raises(TypeError, match="does not support nbgrad.bfloat16 tensors"):
            make()


def test_cuda_switches_scripts_set():
    assert nbgrad.cuda.is_bf16_supported() is False
    nbgrad.backends.cuda.matmul.allow_tf32 = True
    assert nbgrad.backends.cuda.matmul.allow_tf32 is True
    nbgrad.backends.cuda.matmul.allow_tf32 = False
    assert nbgrad.backends.cuda.is_built() is False


def test_grad_scaler_runs_as_a_disabled_one():
    w = nbgrad.nn.Parameter(nbgrad.tensor([1.0, 2.0]))
    opt = nbgrad.optim.SGD([w], lr=0.5)
    with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
        scaler = nbgrad.cuda.amp.GradScaler(enabled=True)
    quiet = nbgrad.amp.GradScaler(enabled=False)
    for s in (scaler, quiet):
        loss = (w * w).sum()
        assert s.scale(loss) is loss
        s.scale(loss).backward()
        s.unscale_(opt)
        s.step(opt)
        s.update()
        opt.zero_grad()
        assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
    # two plain SGD steps: w <- w - 0.5 * 2w each time
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])


def test_data_parallel_without_gpus_is_the_module():
    lin = nbgrad.nn.Linear(2, 3)
    dp = nbgrad.nn.DataParallel(lin)
    tdp = torch.nn.DataParallel(torch.nn.Linear(2, 3))
    assert list(dp.state_dict()) == list(tdp.state_dict()) == ["module.weight", "module.bias"]
    x = nbgrad.ones(4, 2)
    np.testing.assert_allclose(dp(x).detach().numpy(), lin(x).detach().numpy())
    assert dp.device_ids == tdp.device_ids == []


def test_distributed_reports_no_process_group_as_torch():
    assert nbgrad.distributed.is_available() is False
    assert nbgrad.distributed.is_initialized() is torch.distributed.is_initialized() is False
    t, n = _both(lambda T: T.distributed.get_rank())
    assert n[0] == t[0] == "ValueError" and n[1].startswith(t[1][:60])
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        nbgrad.nn.parallel.DistributedDataParallel(nbgrad.nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="single process"):
        nbgrad.distributed.init_process_group("gloo")


def test_a_training_script_with_ddp_imports_and_grad_scaler_runs_unchanged(tmp_path):
    """The shape of nanoGPT's train.py on a CPU: DDP/process-group imports at the top, the TF32
    switches, a dtype table naming bfloat16, a GradScaler created unconditionally."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.distributed import init_process_group, destroy_process_group
        dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() \\
            else 'float16'
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16,
                   'float16': torch.float16}[dtype]
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.AdamW(model.parameters(), lr=0.1)
        scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))
        x = torch.ones(4, 3)
        for _ in range(3):
            loss = model(x).pow(2).mean()
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        print(dtype, ptdtype is torch.float16, torch.distributed.is_initialized())
    """))
    import os
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-W", "ignore", "-m", "nbgrad", str(script)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["float16", "True", "False"]


@pytest.mark.parametrize("op", [
    lambda x: x.unsqueeze_(1), lambda x: x.squeeze_(), lambda x: x.squeeze_(0),
    lambda x: x.t_(), lambda x: x.transpose_(0, 1), lambda x: x.swapdims_(1, 0),
    lambda x: x.resize_(3, 2), lambda x: x.resize_(2), lambda x: x.resize_(1, 2, 3),
], ids=["unsqueeze_", "squeeze_", "squeeze_dim", "t_", "transpose_", "swapdims_",
        "resize_same", "resize_smaller", "resize_view_sizes"])
def test_shape_changing_inplace_ops(op):
    """In-place unsqueeze_/squeeze_/t_/transpose_/resize_ (the intro tutorials): the same object,
    its new shape and values, one version bump, and a view of it sees writes through it."""
    out = {}
    for T in (torch, nbgrad):
        x = T.arange(6.0).view(2, 3)
        y = op(x)
        y[(0,) * y.dim()] = 100.0
        out[T.__name__] = (y is x, tuple(x.shape), x.tolist(), x._version)
    assert out["nbgrad"] == out["torch"]


def test_resize_grows_and_refuses_grad():
    x = nbgrad.arange(4.0)
    x.resize_(2, 3)
    assert tuple(x.shape) == (2, 3) and x.view(-1)[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    t, n = _both(lambda T: T.ones(2, requires_grad=True).resize_(3))
    assert n == t


def test_shape_changing_inplace_ops_and_autograd():
    # a leaf that requires grad: PyTorch's leaf error; under no_grad it works
    t, n = _both(lambda T: T.ones(2, 3, requires_grad=True).unsqueeze_(0))
    assert n == t
    x = nbgrad.ones(2, 3, requires_grad=True)
    with nbgrad.no_grad():
        x.unsqueeze_(0)
    assert tuple(x.shape) == (1, 2, 3) and x.requires_grad
    # a non-leaf: recorded as PyTorch's in-place node (more in test_autograd_parity.py)
    t, n = _both(lambda T: (lambda y: (y.grad_fn.name(), tuple(y.shape)))(
        (T.ones(2, 3, requires_grad=True) * 2).t_()))
    assert n == t == ("TBackward1", (3, 2))


@pytest.mark.parametrize("data", [
    [np.float64(1.0), np.float64(2.0)], [np.float32(1.0), 2.0], [np.float64(1.0), 2],
    [1.0, np.float16(2)], [np.int32(1), np.int32(2)], [np.int64(1), 2.5], np.float64(3.0),
    [[np.float64(1)], [2.0]], (np.float64(1.0), 2.0), [np.int16(1), np.int8(2)], np.int32(4),
    [1.0, 2.0], [1, 2], [[1, 2.5]],
], ids=lambda d: repr(d)[:40])
def test_tensor_infers_dtype_from_numpy_scalars(data):
    """torch.tensor keeps a numpy scalar's dtype (the Deep Learning course's optimisation
    notebook builds torch.tensor([x, y]) from float64 meshgrid values and multiplies by a
    float32 matrix, which PyTorch refuses); Python floats stay the default dtype."""
    t, n = torch.tensor(data), nbgrad.tensor(data)
    assert str(n.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    np.testing.assert_array_equal(n.numpy(), t.numpy())


def test_add_with_alpha_first_the_deprecated_overload():
    """``p.data.add_(-lr, d_p)`` from old optimiser code: PyTorch's values, and its warning."""
    out = {}
    for T in (torch, nbgrad):
        p, d = T.ones(3), T.full((3,), 2.0)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            p.add_(-0.5, d)
            p.sub_(2.0, d)
            r = [p.tolist(), p.add(-0.5, d).tolist(), T.add(p, 2, d).tolist(),
                 T.sub(p, 2, d).tolist()]
        out[T.__name__] = r
        if T is nbgrad and not nbgrad.functions._ALPHA_FIRST_WARNED[1:]:
            msgs = [str(x.message) for x in w]
            assert not msgs or msgs[0].startswith("This overload of add_ is deprecated:\n\t"
                                                  "add_(Number alpha, Tensor other)")
    assert out["nbgrad"] == out["torch"]
    for f in (lambda T: T.ones(2).add_(1, 2).tolist(),
              lambda T: T.ones(2).add_(T.ones(2), 2), lambda T: T.add(T.ones(2), T.ones(2), 2),
              lambda T: T.ones(2).sub_(T.ones(2), T.ones(2))):
        t, n = _both(f)
        assert n == t


def _nested_np(x):
    if isinstance(x, (tuple, list)):
        return type(x)(_nested_np(y) for y in x)
    return x.detach().numpy() if hasattr(x, "detach") else x


def _assert_nested_close(a, b):
    assert type(a) is type(b) or not isinstance(a, (tuple, list))
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_nested_close(x, y)
    else:
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


_X = [0.1, 0.5, 0.9]
_Y = [0.3, 0.2, 0.8]


def _xy(T):
    return T.tensor(_X, dtype=T.float64), T.tensor(_Y, dtype=T.float64)


FUNCTIONAL = {
    "jacobian_two_inputs": lambda T, F: F.jacobian(lambda a, b: 2 * a.exp() + 3 * b, _xy(T)),
    "jacobian_one_input": lambda T, F: F.jacobian(lambda a: a ** 2, _xy(T)[0]),
    "jacobian_two_outputs": lambda T, F: F.jacobian(lambda a, b: (a * b, a.sum()), _xy(T)),
    "jacobian_matrix_in_out": lambda T, F: F.jacobian(
        lambda a: a.view(3, 1) * a.view(1, 3), _xy(T)[0]),
    "jacobian_unused_input": lambda T, F: F.jacobian(lambda a, b: a * 2, _xy(T)),
    "vjp": lambda T, F: F.vjp(lambda a: a * 2 * a, _xy(T)[0], v=_xy(T)[1]),
    "vjp_scalar_no_v": lambda T, F: F.vjp(lambda a: (a ** 3).sum(), _xy(T)[0]),
    "jvp": lambda T, F: F.jvp(lambda a, b: a ** 3 * b, _xy(T), v=_xy(T)),
    "hessian_one": lambda T, F: F.hessian(lambda a: (a ** 3).sum(), _xy(T)[0]),
    "hessian_two": lambda T, F: F.hessian(lambda a, b: (a ** 2 * b).sum() + a.prod(), _xy(T)),
    "hvp": lambda T, F: F.hvp(lambda a: (a ** 3).sum() * a.sum(), _xy(T)[0], _xy(T)[1]),
    "vhp_two": lambda T, F: F.vhp(lambda a, b: (a ** 2 * b).sum(), _xy(T), _xy(T)),
}


@pytest.mark.parametrize("name", list(FUNCTIONAL))
def test_autograd_functional_as_torch(name):
    """torch.autograd.functional (the autograd tutorial's jacobian/vjp): values, shapes,
    nesting and dtypes against torch, results detached without create_graph."""
    t = FUNCTIONAL[name](torch, torch.autograd.functional)
    n = FUNCTIONAL[name](nbgrad, nbgrad.autograd.functional)
    _assert_nested_close(_nested_np(n), _nested_np(t))
    flat = [n] if not isinstance(n, tuple) else [y for x in n for y in
                                                   (x if isinstance(x, tuple) else (x,))]
    assert not any(x.requires_grad for x in flat)


def test_autograd_functional_create_graph_and_errors():
    out = {}
    for T in (torch, nbgrad):
        x = T.tensor(_X, dtype=T.float64, requires_grad=True)
        J = T.autograd.functional.jacobian(lambda a: a ** 3, x, create_graph=True)
        J.sum().backward()
        out[T.__name__] = (J.requires_grad, x.grad.tolist())
    assert out["nbgrad"] == out["torch"]
    for f in (lambda T: T.autograd.functional.vjp(lambda a: a * 2, _xy(T)[0]),
              lambda T: T.autograd.functional.jvp(lambda a: a * 2, _xy(T)[0]),
              lambda T: T.autograd.functional.hessian(lambda a: a * 2, _xy(T)[0]),
              lambda T: T.autograd.functional.jacobian(lambda a, b: a * 2, _xy(T), strict=True)):
        t, n = _both(f)
        assert isinstance(t, tuple) and n == t


# ---- session 15's corpus: Loeber's tutorial, Raschka's LLMs-from-scratch, Bourke's course ----
def _same(fn):
    """fn(torch) and fn(nbgrad) agree: values, dtype and shape, or exception type and text."""
    t, n = _both(fn)
    if isinstance(t, tuple) and isinstance(t[0], str):
        assert n == t
        return
    assert str(n.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    assert tuple(n.shape) == tuple(t.shape)
    np.testing.assert_allclose(_np(n), _np(t), rtol=1e-6)


@pytest.mark.parametrize("fn", [
    lambda T: T.zeros(size=(2, 3)), lambda T: T.ones(size=[4]),
    lambda T: T.empty(size=(2, 1)).fill_(0),  # (empty memory may hold a NaN: * 0 kept it)
    lambda T: T.ones(size=T.Size([2, 2]), dtype=T.float64),
    lambda T: T.rand(size=(3, 4)) * 0, lambda T: T.randn(size=(2,)) * 0,
    lambda T: T.zeros(2, size=(3,)), lambda T: T.ones(size=3),
], ids=["zeros", "ones_list", "empty", "ones_Size_dtype", "rand", "randn", "zeros_both",
        "size_int"])
def test_factories_take_size_keyword(fn):
    """Bourke's fundamentals notebook: ``torch.rand(size=(3, 4))``, ``torch.zeros(size=...)``."""
    _same(fn)


@pytest.mark.parametrize("fn", [
    lambda T: T.zeros(T.tensor(3), 2), lambda T: T.ones((T.tensor([2]), 2)),
    lambda T: T.nn.Embedding(T.tensor([2, 3, 1]).max() + 1, 5).weight.shape[0] * T.ones(1),
    lambda T: T.nn.Linear(T.tensor(4), 2).weight * 0,
    lambda T: T.zeros(T.tensor(True), 2),
], ids=["zeros_0d", "ones_1elem", "embedding_from_max", "linear", "bool_refused"])
def test_sizes_from_integer_tensors(fn):
    """Raschka's embedding notebook: ``num_idx = max(idx) + 1`` (a 0-d tensor) as a layer size."""
    _same(fn)


@pytest.mark.parametrize("fn", [
    lambda T: T.range(0, 10), lambda T: T.range(1, 4, 0.5), lambda T: T.range(0, 3, dtype=T.int64),
    lambda T: T.range(5, 1, -2), lambda T: T.range(0.5, 2.25, 0.25, dtype=T.float64),
    lambda T: T.range(5, 1), lambda T: T.range(1, 2, 0),
], ids=["ints", "half_steps", "int64", "down", "float64", "wrong_sign", "zero_step"])
def test_deprecated_range_includes_end(fn):
    """Bourke's fundamentals notebook calls the deprecated ``torch.range``."""
    _same(fn)
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        nbgrad.range(0, 1)


def test_float_constants_and_masking_with_minus_inf():
    """Raschka's attention chapter: ``masked_fill(mask.bool(), -torch.inf)`` then softmax."""
    for name in ("inf", "nan", "pi", "e"):
        a, b = getattr(nbgrad, name), getattr(torch, name)
        assert type(a) is type(b) and (a == b or (a != a and b != b))
    out = []
    for T in (torch, nbgrad):
        s = T.arange(9.0).reshape(3, 3)
        m = T.triu(T.ones(3, 3), diagonal=1)
        out.append(T.softmax(s.masked_fill(m.bool(), -T.inf), dim=-1).numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6)


def test_moving_to_cuda_without_cuda_is_torchs_assertion():
    """Raschka's appendix A moves tensors with ``.to("cuda")``: PyTorch built without CUDA raises
    AssertionError, and a notebook cell that catches it, or a runner comparing cells, sees the same
    type; nbgrad without cupy says the same, then names the cause."""
    if nbgrad.cuda.is_available() or "cupy" not in (nbgrad.backend._cupy_error or ""):
        pytest.skip("checks the path without cupy")
    for fn in (lambda T: T.ones(2).to("cuda"), lambda T: T.ones(2).cuda(),
               lambda T: T.ones(2, device="cuda"), lambda T: T.nn.Linear(2, 3).to("cuda")):
        t, n = _both_base(fn)
        assert t[0] == n[0] == "AssertionError"
        assert n[1].startswith(t[1]) and "pip install nbgrad[cuda12]" in n[1]


def _both_base(fn):
    """As _both, catching BaseException's subclasses PyTorch raises outside Exception too."""
    out = []
    for T in (torch, nbgrad):
        try:
            out.append(fn(T))
        except (Exception, AssertionError) as e:  # noqa: BLE001
            out.append((type(e).__name__, str(e)))
    return out


@pytest.mark.parametrize("make", [
    lambda T: np.ones((2, 3)), lambda T: np.arange(4), lambda T: np.ones(2, dtype=np.float32),
    lambda T: [1, 2], lambda T: [[1.5, 2.0]],
], ids=["float64_array", "int64_array", "float32_array", "int_list", "float_list"])
def test_legacy_constructor_makes_default_dtype(make):
    """mnist1d's training script: ``torch.Tensor(data['x'])`` of a float64 array is float32 in
    PyTorch (float64 made the first conv refuse its float32 weights)."""
    _same(lambda T: T.Tensor(make(T)))


def test_legacy_constructor_of_a_tensor_is_an_alias():
    """mnist1d's meta-learning notebooks flatten parameters with ``torch.Tensor(p.reshape(-1))``
    and differentiate through the result: an alias (AliasBackward0), a view sharing memory."""
    out = {}
    for T in (torch, nbgrad):
        b = T.ones(3, dtype=T.float64)
        a = T.Tensor(b)
        a[0] = 5.0
        lin = T.nn.Linear(2, 2)
        with T.no_grad():
            lin.weight.copy_(T.tensor([[1.0, 2.0], [3.0, 4.0]]))
        flat = T.cat([T.Tensor(p.reshape(-1)) for p in (lin.weight, lin.bias)])
        (flat * T.arange(6.0)).sum().backward()
        out[T.__name__] = (b.tolist(), str(a.dtype).split(".")[1], a._is_view(), a._base is b,
                           a._version, b._version, type(flat.grad_fn).__name__,
                           type(T.Tensor(lin.weight).grad_fn).__name__,
                           lin.weight.grad.tolist(), lin.bias.grad.tolist())
    assert out["nbgrad"] == out["torch"]


@pytest.mark.parametrize("fn", [
    lambda T: T.roll(T.arange(6).reshape(2, 3), np.int64(1)),
    lambda T: T.roll(T.arange(6).reshape(2, 3), np.int64(-1), np.int64(1)),
    lambda T: T.arange(6).reshape(2, 3).roll((1, np.int32(2)), (0, 1)),
    lambda T: T.roll(T.arange(6.0), T.tensor(2), 0),
    lambda T: T.roll(T.arange(6.0), 1.5),
], ids=["np_shift", "np_shift_dim", "mixed_tuple", "tensor_shift", "float_refused"])
def test_roll_takes_numpy_integers(fn):
    """mnist1d's self-supervised notebook shifts by ``np.random.randint(...)``."""
    t, n = _both(fn)
    if isinstance(t, tuple):
        assert isinstance(n, tuple) and n[0] == t[0]
    else:
        assert n.tolist() == t.tolist()


def test_weight_norm_module_as_torch():
    """kimy-de's PINN notebook wraps its Linear layers in ``nn.utils.weight_norm``: the same
    parameters (names, shapes, order), state_dict keys, node, values and gradients; PyTorch's
    errors for a second hook and for removing one that is not there."""
    out = {}
    for T in (torch, nbgrad):
        lin = T.nn.Linear(3, 2)
        with T.no_grad():
            lin.weight.copy_(T.tensor([[1.0, -2.0, 0.5], [0.3, 0.2, -1.0]]))
            lin.bias.fill_(0.1)
        with pytest.warns(FutureWarning, match="torch.nn.utils.weight_norm. is deprecated"):
            T.nn.utils.weight_norm(lin)
        with T.no_grad():
            lin.weight_g.mul_(2.0)
        y = lin(T.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]))
        y.pow(2).sum().backward()
        errs = _both(lambda _: T.nn.utils.weight_norm(lin))[0][:2]
        r = [[(n, tuple(p.shape)) for n, p in lin.named_parameters()], list(lin.state_dict()),
             type(lin.weight.grad_fn).__name__, y.tolist(), lin.weight_g.grad.tolist(),
             lin.weight_v.grad.tolist(), errs]
        T.nn.utils.remove_weight_norm(lin)
        r += [[n for n, _ in lin.named_parameters()], type(lin.weight).__name__,
              lin.weight.tolist(), _both(lambda _: T.nn.utils.remove_weight_norm(lin))[0]]
        out[T.__name__] = r
    n, t = out["nbgrad"], out["torch"]
    assert n[:3] == t[:3] and n[6:9] == t[6:9] and n[10] == t[10]  # names, node, errors
    for a, b in zip(n[3:6] + [n[9]], t[3:6] + [t[9]]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_values_of_a_dense_tensor_is_torchs_error():
    """Deguchi's PINN keeps ``torch.mean(x, dim=0).values`` (a method, never called in its run):
    the attribute exists; calling it on a dense tensor raises PyTorch's RuntimeError."""
    assert callable(nbgrad.ones(2).values) and callable(nbgrad.ones(2).indices)
    for fn in (lambda T: T.ones(2, 3).values(), lambda T: T.ones(2).indices()):
        t, n = _both(fn)
        assert n == t


# ---- Karpathy's normalising flows: torch.distributions, Tensor.lu / lu_unpack ----------------
def _dists(T):
    """What small programs do with torch.distributions, as plain values to compare."""
    loc = T.tensor([0.5, -1.0], requires_grad=True)
    scale = T.tensor([1.5, 0.7], requires_grad=True)
    d = T.distributions.Normal(loc, scale)
    v = T.tensor([[0.2, 0.1], [1.0, -2.0]])
    lp = d.log_prob(v)
    lp.sum().backward()
    u = T.distributions.Uniform(T.zeros(2), T.ones(2))
    logistic = T.distributions.TransformedDistribution(u, T.distributions.SigmoidTransform().inv)
    mvn = T.distributions.MultivariateNormal(T.zeros(2), T.tensor([[2.0, 0.3], [0.3, 1.0]]))
    b = T.distributions.Bernoulli(probs=T.tensor([0.2, 0.9]))
    c = T.distributions.Categorical(logits=T.tensor([[1.0, 2.0, 0.5], [0.1, 0.1, 3.0]]))
    c2 = T.distributions.Categorical(probs=T.tensor([0.2, 0.3, 0.5]))
    ind = T.distributions.Independent(T.distributions.Normal(T.zeros(3, 2), T.ones(3, 2)), 1)
    ex = T.distributions.TransformedDistribution(T.distributions.Normal(0.0, 1.0),
                                                 [T.distributions.ExpTransform(),
                                                  T.distributions.AffineTransform(1.0, 2.0)])
    values = [lp, loc.grad, scale.grad, d.entropy(), d.cdf(v), d.icdf(T.tensor([0.3, 0.9])),
              d.mean, d.stddev, d.variance,
              u.log_prob(T.tensor([0.3, 0.9])), u.entropy(), u.mean, u.variance,
              logistic.log_prob(T.tensor([[0.3, -2.0], [4.0, 0.0]])),
              mvn.log_prob(T.tensor([[0.3, -2.0], [4.0, 0.0]])), mvn.entropy(), mvn.variance,
              T.distributions.MultivariateNormal(T.ones(2), scale_tril=T.tensor(
                  [[1.0, 0.0], [0.5, 2.0]])).log_prob(T.tensor([0.3, -2.0])),
              b.log_prob(T.tensor([1.0, 0.0])), b.entropy(),
              T.distributions.Bernoulli(logits=T.tensor([-1.0, 2.0])).log_prob(T.ones(2)),
              c.log_prob(T.tensor([2, 0])), c.entropy(), c.probs, c2.log_prob(T.tensor(1)),
              c2.entropy(), ind.log_prob(T.ones(3, 2)), ex.log_prob(T.tensor([1.5, 3.0])),
              T.distributions.kl_divergence(d, T.distributions.Normal(T.zeros(2), T.ones(2)))]
    shapes = [d.sample((3,)).shape, d.rsample().shape, u.sample((4,)).shape,
              logistic.sample([5, 2]).shape, mvn.sample((3,)).shape, b.sample((3,)).shape,
              c.sample((4,)).shape, c2.sample().shape, ind.sample().shape, d.batch_shape,
              d.event_shape, mvn.batch_shape, mvn.event_shape, c.batch_shape, ind.batch_shape,
              ind.event_shape]
    flags = [d.rsample().requires_grad, d.sample().requires_grad, str(c.sample().dtype),
             str(b.sample().dtype), repr(d), repr(T.distributions.Normal(0.0, 1.0))]
    return values, [tuple(s) for s in shapes], [f.replace("torch.", "").replace("nbgrad.", "")
                                                if isinstance(f, str) else f for f in flags]


def test_distributions_as_torch():
    """Karpathy's normalising-flow notebook takes its prior from torch.distributions
    (a logistic: Uniform pushed through SigmoidTransform().inv, or a MultivariateNormal); VAEs
    and policy gradients use Normal, Bernoulli, Categorical, Independent and kl_divergence."""
    (vt, st, ft), (vn, sn, fn) = _dists(torch), _dists(nbgrad)
    for a, b in zip(vn, vt):
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)
    assert sn == st and fn == ft


def test_distributions_errors_as_torch():
    for fn in (lambda T: T.distributions.Bernoulli(),
               lambda T: T.distributions.Categorical(probs=T.ones(2), logits=T.ones(2)),
               lambda T: T.distributions.MultivariateNormal(T.zeros(2)),
               lambda T: T.distributions.kl_divergence(
                   T.distributions.Categorical(logits=T.ones(2)), T.distributions.Normal(0.0, 1.0))):
        t, n = _both(fn)
        assert n[0] == t[0] and n[1].splitlines()[0] == t[1].splitlines()[0]


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (3, 5), (5, 3), (2, 1, 3, 3)])
def test_lu_factor_and_unpack(shape):
    """The Glow layer of the flows notebook: ``P, L, U = torch.lu_unpack(*Q.lu())``."""
    a = np.random.default_rng(1).normal(size=shape)
    r = {}
    for T in (torch, nbgrad):
        A = T.tensor(a)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            LU, piv = A.lu()
        P, L, U = T.lu_unpack(*T.linalg.lu_factor(A))
        r[T.__name__] = [LU.numpy(), piv.numpy(), P.numpy(), L.numpy(), U.numpy(),
                         str(piv.dtype).split(".")[1], (P @ L @ U).numpy()]
    for x, y in zip(r["nbgrad"], r["torch"]):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12) if not isinstance(x, str) \
            else x == y
    np.testing.assert_allclose(r["nbgrad"][6], a, atol=1e-12)


def test_lu_without_gradient_says_so():
    x = nbgrad.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="nbgrad does not implement the derivative of "
                                           "lu_factor yet .*LinalgLuFactorExBackward0"):
        nbgrad.linalg.lu_factor(x)
    with nbgrad.no_grad():
        LU, piv = nbgrad.linalg.lu_factor(x)
    assert LU.tolist() == [[1.0, 1.0], [1.0, 0.0]] and piv.tolist() == [1, 2]


def test_distributions_submodule_paths_as_torch():
    """``from torch.distributions.normal import Normal`` and friends: PyTorch's module paths."""
    from nbgrad.distributions.kl import kl_divergence
    from nbgrad.distributions.normal import Normal
    from nbgrad.distributions.transforms import SigmoidTransform
    D = nbgrad.distributions
    assert (Normal, kl_divergence, SigmoidTransform) == (D.Normal, D.kl_divergence,
                                                         D.SigmoidTransform)
    for mod in ("bernoulli", "categorical", "independent", "multivariate_normal", "uniform",
                "transformed_distribution", "distribution", "utils"):
        for name in getattr(D, mod).__all__:
            assert hasattr(getattr(torch.distributions, mod), name), (mod, name)


@pytest.mark.parametrize("fn", [
    lambda T: T.distributions.Normal(0.0, -1.0),
    lambda T: T.distributions.Normal(T.zeros(2), T.tensor([1.0, -1.0])),
    lambda T: T.distributions.Normal(0.0, float("nan")),
    lambda T: T.distributions.Normal(float("nan"), 1.0),
    lambda T: T.distributions.Bernoulli(probs=T.tensor(1.5)),
    lambda T: T.distributions.Bernoulli(probs=T.tensor(0.5)).log_prob(T.tensor(0.3)),
    lambda T: T.distributions.Uniform(1.0, 0.0),
    lambda T: T.distributions.Categorical(probs=T.tensor([-0.1, 1.0])),
    lambda T: T.distributions.Categorical(logits=T.zeros(3)).log_prob(T.tensor(3)),
    lambda T: T.distributions.Normal(0.0, -1.0, validate_args=False).scale,
    lambda T: T.distributions.Bernoulli(probs=T.tensor(0.5)).log_prob(T.tensor(1.0)),
], ids=["neg_scale", "neg_scale_vector", "nan_scale", "nan_loc", "probs_above_1",
        "bernoulli_value", "uniform_low_high", "not_simplex", "category_out_of_range",
        "validate_off", "bernoulli_ok"])
def test_distribution_arguments_validated_as_torch(fn):
    """A student's ``Normal(mu, sigma)`` with sigma <= 0: PyTorch's ValueError, same text."""
    t, n = _both(fn)
    if isinstance(t, tuple):
        assert n == (t[0], t[1].replace("torch.", "nbgrad."))
    else:
        assert n.tolist() == t.tolist()


@pytest.mark.parametrize("fn", [
    lambda T: T.nn.functional.cross_entropy(T.zeros(1, 5), T.tensor(2)),
    lambda T: T.nn.CrossEntropyLoss()(T.zeros(1, 5, 2), T.tensor(0)),
    lambda T: T.nn.functional.nll_loss(T.zeros(2, 5), T.tensor([1, 2, 3])),
    lambda T: T.nn.functional.cross_entropy(T.zeros(5), T.tensor([1, 2])),
], ids=["zero_d_target", "zero_d_target_3d", "batch_mismatch", "one_d_input_two_targets"])
def test_class_target_shape_errors_as_torch(fn):
    """hunkim's char-RNN and seq2seq lessons pass a 0-d target with a (1, C) output: PyTorch's
    ValueError reads the 0-d target's batch size as 0."""
    t, n = _both(fn)
    assert n == t


_SCALAR_WARNING = textwrap.dedent("""
    import warnings, sys
    import {T} as T
    warnings.simplefilter("always")
    t = T.ones((), requires_grad=True) * 2
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        int(t); "%1.3f" % t.detach(); float(t); float(t); f"{{t:.3f}}"
    print([(x.category.__name__, str(x.message).splitlines()[0], x.lineno) for x in w])
""")


def test_float_of_a_tensor_requiring_grad_warns_once_as_torch():
    """``"%1.3f" % loss`` (hunkim's RNN lessons, makemore part 3) converts a tensor that requires
    grad: PyTorch 2.13 warns once per process, at the user's line; int() and format() do not."""
    out = []
    for name in ("torch", "nbgrad"):
        r = subprocess.run([sys.executable, "-c", _SCALAR_WARNING.format(T=name)],
                           capture_output=True, text=True, cwd=REPO,
                           env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        out.append(r.stdout)
    assert out[1] == out[0] and "UserWarning" in out[0]


_RETURN_TYPES = textwrap.dedent("""
    import torch
    x = torch.tensor([[1., 5., 2.], [3., 2., 0.5], [0., 1., 4.]])
    for r in (torch.max(x, 0), x.min(1, keepdim=True), torch.sort(x), torch.topk(x, 2),
              torch.kthvalue(x, 1), torch.median(x, 0), torch.mode(x, 1), torch.cummax(x, 0),
              torch.cummin(x, 1), torch.aminmax(x), torch.svd(x), torch.slogdet(x),
              torch.linalg.slogdet(x), torch.linalg.qr(x), torch.linalg.eigh(x @ x.T),
              torch.linalg.svd(x), torch.histogram(x, bins=3), torch.linalg.lu_factor(x)):
        print(r)
        print(type(r).__module__, type(r).__name__, r[0] is r[:1][0], len(r))
    print(torch.return_types.max.__name__)
""")


def _printed_by_both(tmp_path, name, source):
    """[what `python script` prints (torch), what `python -m nbgrad script` prints]."""
    script = tmp_path / name
    script.write_text(source)
    out = []
    for cmd in ([sys.executable, str(script)], [sys.executable, "-m", "nbgrad", str(script)]):
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                           env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        out.append(r.stdout)
    return out


def test_return_types_print_as_torchs_structseqs(tmp_path):
    """``print(torch.max(x, 1))``, ``print(torch.svd(m))`` (the introyt tensors tutorial): PyTorch
    prints ``torch.return_types.svd(\\nU=tensor(...),\\nS=...)``, one field a line, each type under
    its own name (``linalg_svd`` for torch.linalg.svd)."""
    out = _printed_by_both(tmp_path, "return_types.py", _RETURN_TYPES)
    assert out[1] == out[0] and out[0].count("torch.return_types.") == 18


def test_return_types_without_the_alias_say_nbgrad():
    r = nbgrad.max(nbgrad.tensor([[1., 2.], [3., 0.]]), 1)
    assert repr(r) == ("nbgrad.return_types.max(\nvalues=tensor([2., 3.]),\n"
                       "indices=tensor([1, 0]))")
    assert type(r) is nbgrad.return_types.max and isinstance(r, tuple)
    assert r.values is r[0] and tuple(r._fields) == ("values", "indices")


def test_printed_version_is_torchs_cpu_build(tmp_path):
    """``torch.__version__`` (the first cell of Bourke's and Raschka's notebooks): torch 2.13's CPU
    wheel prints 2.13.0+cpu, and compares as it (not == "2.13", > (2, 13, 0))."""
    out = _printed_by_both(tmp_path, "v.py", "import torch\nv = torch.__version__\n"
                           "print(v, v == '2.13', v > (2, 13, 0), v >= '2.1', "
                           "v == '2.13.0+cpu')\n")
    assert out[1] == out[0] == "2.13.0+cpu False True True True\n"
