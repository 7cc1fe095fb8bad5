"""`python -m nbgrad script.py` and `%nbgrad torch`: unchanged PyTorch code runs on nbgrad.

Each script is run twice, by real PyTorch (`python script.py`) and by nbgrad
(`python -m nbgrad script.py`): deterministic programs must print the same text.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nbgrad import as_torch

REPO = Path(__file__).resolve().parent.parent

REGRESSION = """
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 4)
        self.fc2 = nn.Linear(4, 1)
        with torch.no_grad():
            for i, p in enumerate(self.parameters()):
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1))

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


x = torch.linspace(-1, 1, 32).reshape(16, 2)
y = (x[:, :1] * 2 - x[:, 1:] ** 2).float()
model = Net()
opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=False)
for epoch in range(3):
    for xb, yb in loader:
        loss = F.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.5f}")
with torch.no_grad():
    print("eval", round(nn.MSELoss()(model(x), y).item(), 5))
print(torch.is_tensor(x), torch.is_grad_enabled(), isinstance(model, torch.nn.Module))
print("args", sys.argv[1:])
"""

AUTOGRAD = """
import torch
from torch.autograd import grad

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = (a * a).sum()
(g,) = grad(b, a, create_graph=True)
print([round(v, 4) for v in g.tolist()], type(b.grad_fn).__name__)
g.sum().backward()
print(a.grad.tolist(), a.is_leaf, b.requires_grad)
y = a.exp()
y.add_(1) if False else None
try:
    y = a.tanh()
    y.add_(3)
    y.sum().backward()
except RuntimeError as e:
    print("RuntimeError:", str(e).split(";")[0][:60])
"""

BIGRAM = """
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

words = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn"]
chars = sorted(set("".join(words)))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi["."] = 0
itos = {i: s for s, i in stoi.items()}
xs, ys = [], []
for w in words:
    cs = ["."] + list(w) + ["."]
    for a, b in zip(cs, cs[1:]):
        xs.append(stoi[a])
        ys.append(stoi[b])
xs, ys = torch.tensor(xs), torch.tensor(ys)
g = torch.Generator().manual_seed(2147483647)
V = len(stoi)


class Bigram(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 16)
        self.out = nn.Linear(16, V)

    def forward(self, idx):
        return self.out(torch.tanh(self.emb(idx)))


model = Bigram()
opt = torch.optim.Adam(model.parameters(), lr=3e-2)
losses = []
for step in range(60):
    loss = F.cross_entropy(model(xs), ys)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
assert losses[-1] < losses[0] * 0.7

path = os.path.join(tempfile.mkdtemp(), "bigram.pt")
torch.save({"model": model.state_dict(), "stoi": stoi, "step": 60}, path)
ck = torch.load(path)
fresh = Bigram()
fresh.load_state_dict(ck["model"])
assert ck["stoi"] == stoi and ck["step"] == 60

names = []
with torch.no_grad():
    for _ in range(5):
        ix, out = 0, []
        while True:
            p = F.softmax(fresh(torch.tensor([ix])), dim=1)
            ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
            if ix == 0 or len(out) > 20:
                break
            out.append(itos[ix])
        names.append("".join(out))
print(len(names), "names sampled", file=sys.stderr)
print(all(set(n) <= set(chars) for n in names))
x = torch.randn(3, 4, generator=g)
print(x.shape, x.dtype, torch.finfo(x.dtype).eps > 0)
"""

ERRORS = """
import torch
try:
    torch.fft.fft(torch.ones(4))
except AttributeError as e:
    print("AttributeError:", e)
try:
    from torch import affine_grid_generator  # torch has it, nbgrad not yet
except ImportError as e:
    print("ImportError:", e)
import torch.onnx  # imported at the top of real programs, used behind a flag
import torch.special.windows as windows_module
print(torch.onnx, hasattr(torch.onnx, "export"))
try:
    torch.onnx.export(None, None, "model.onnx")
except AttributeError as e:
    print("AttributeError:", e)
try:
    from torch.special import erfcx
except ImportError as e:
    print("ImportError:", e)
try:
    windows_module.hann(4)
except AttributeError as e:
    print("AttributeError:", e)
try:
    from torch.utils.data import StackDataset
except ImportError as e:
    print("ImportError:", e)
try:
    torch.nn.functional.affine_grid
except AttributeError as e:
    print("AttributeError:", e)
print(hasattr(torch, "affine_grid_generator"), hasattr(torch, "tensor"))
try:
    torch.ones(2).apply_(abs)
except AttributeError as e:
    print("AttributeError:", e)
print(hasattr(torch.ones(1), "_private_probe"), hasattr(torch.ones(1), "grad_fn"))
"""


def _run(args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _script(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.mark.parametrize("source", [REGRESSION, AUTOGRAD], ids=["regression", "autograd"])
def test_script_prints_what_torch_prints(tmp_path, source):
    pytest.importorskip("torch")
    path = _script(tmp_path, "train.py", source)
    real = _run([str(path), "--epochs", "3"], tmp_path)
    ours = _run(["-m", "nbgrad", str(path), "--epochs", "3"], tmp_path)
    assert real.returncode == 0, real.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == real.stdout
    assert ours.stdout.strip()


def test_a_small_language_model_runs_unchanged(tmp_path):
    """Embedding, Adam, cross_entropy, save/load of a checkpoint with a dict of ints, sampling
    with multinomial from a Generator: random, so checked by what it prints, not vs torch."""
    path = _script(tmp_path, "bigram.py", BIGRAM)
    out = _run(["-m", "nbgrad", str(path)], tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("loss ") and lines[1:] == [
        "True", "torch.Size([3, 4]) torch.float32 True"]  # torch's names under the alias
    assert "5 names sampled" in out.stderr


def test_script_sees_nbgrad_and_clear_errors(tmp_path):
    path = _script(tmp_path, "errors.py", ERRORS + (
        "import sys\nprint(type(torch.ones(1)).__module__, type(torch.ones(1)) is "
        "sys.modules['nbgrad'].Tensor)\n"))
    out = _run(["-m", "nbgrad", str(path)], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "AttributeError: nbgrad does not implement torch.fft yet",
        "ImportError: nbgrad does not implement torch.affine_grid_generator yet",
        "<module 'torch.onnx' (not implemented by nbgrad)> False",
        "AttributeError: nbgrad does not implement torch.onnx.export yet",
        "ImportError: nbgrad does not implement torch.special.erfcx yet",
        "AttributeError: nbgrad does not implement torch.special.windows.hann yet",
        "ImportError: nbgrad does not implement torch.utils.data.StackDataset yet",
        "AttributeError: nbgrad does not implement torch.nn.functional.affine_grid yet",
        "False True",
        "AttributeError: 'Tensor' object has no attribute 'apply_' (nbgrad does not "
        "implement torch.Tensor.apply_ yet)",
        "False True",
        "torch True",  # nbgrad's Tensor, printed under torch's module as the program expects
    ]


LACKED_BY_TORCH = """
import torch
for probe in (lambda: torch.sq, lambda: torch.nn.functional.reluu, lambda: torch.linalg.invv,
              lambda: torch.ones(2).sizee(), lambda: torch.utils.data.DataLoaderTypo,
              lambda: torch.optim.Adamm):
    try:
        probe()
    except AttributeError as e:
        print("AttributeError:", e)
try:
    from torch.nn import Linearr
except ImportError as e:
    print("ImportError:", str(e).split(" (")[0])
"""


def test_a_name_torch_lacks_too_gets_torchs_own_error(tmp_path):
    """A typo (a name PyTorch has not either) raises PyTorch's own AttributeError text, not
    "nbgrad does not implement": nbgrad/torch_names.txt lists PyTorch's names per namespace."""
    path = _script(tmp_path, "typos.py", LACKED_BY_TORCH)
    got = _run(["-m", "nbgrad", str(path)], tmp_path)
    want = _run([str(path)], tmp_path)
    assert got.returncode == want.returncode == 0, got.stderr + want.stderr
    assert len(want.stdout.splitlines()) == 7
    assert got.stdout == want.stdout


def test_uncaught_missing_attribute_names_it_at_the_point_of_use(tmp_path):
    path = _script(tmp_path, "s.py", "import torch\nx = torch.ones(3)\ny = torch.special.erf(x)\n")
    out = _run(["-m", "nbgrad", str(path)], tmp_path)
    assert out.returncode == 1
    assert 'line 3' in out.stderr
    assert out.stderr.strip().endswith(
        "AttributeError: nbgrad does not implement torch.special yet")


def test_module_mode_and_usage(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text("import sys, torch\nprint(torch.ones(2).sum().item(), "
                                 "sys.argv[1:], __name__)\n")
    out = _run(["-m", "nbgrad", "-m", "pkg.main", "x"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2.0 ['x'] __main__"
    assert _run(["-m", "nbgrad"], tmp_path).returncode == 2
    missing = _run(["-m", "nbgrad", "nope.py"], tmp_path)
    assert missing.returncode == 2 and "nope.py" in missing.stderr


def test_enable_disable_restores_real_torch():
    real = pytest.importorskip("torch")
    assert not as_torch.is_enabled()
    as_torch.enable()
    try:
        import torch
        import torch.nn.functional as F
        import nbgrad
        assert torch is not real and torch.ones is nbgrad.ones
        assert F.relu is nbgrad.nn.functional.relu
        assert torch.nn.functional is F and sys.modules["torch.nn"] is torch.nn
        assert isinstance(torch.ones(2), nbgrad.Tensor)
        with pytest.raises(AttributeError, match=r"not implement torch\.Tensor\.apply_ yet"):
            torch.ones(1).apply_
        as_torch.enable()  # twice: no-op
        assert sys.meta_path.count(as_torch._finder) == 1
    finally:
        as_torch.disable()
    import torch
    assert torch is real and sys.modules["torch.nn"].__name__ == "torch.nn"
    with pytest.raises(AttributeError) as info:
        nbgrad.ones(1).nope
    assert str(info.value) == "'Tensor' object has no attribute 'nope'"  # switched off: plain
    assert not isinstance(sys.modules["torch.nn"], as_torch._TorchModule)
    assert as_torch.switch("status") == "import torch -> nbgrad: off"
    with pytest.raises(ValueError, match="expected on, off or status"):
        as_torch.switch("maybe")


def test_setting_an_attribute_reaches_nbgrad():
    as_torch.enable()
    try:
        import torch
        import nbgrad
        old = nbgrad.nn.functional.relu
        new = lambda x: x * 0  # noqa: E731
        torch.nn.functional.relu = new
        try:
            assert nbgrad.nn.functional.relu is new and torch.nn.functional.relu is new
        finally:
            nbgrad.nn.functional.relu = old
    finally:
        as_torch.disable()


def test_notebook_magic_switches_the_kernel(tmp_path):
    pytest.importorskip("torch")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = [
        "%load_ext nbgrad\nimport torch\nprint(torch.__name__, 'site-packages' in torch.__file__)",
        "%nbgrad torch",
        "import torch\nimport torch.nn as nn\nimport nbgrad\nm = nn.Linear(2, 1)\n"
        "out = m(torch.ones(1, 2))\n"
        "print(type(out).__module__, isinstance(out, nbgrad.Tensor), torch.is_tensor(m.weight))\n"
        "print(out.dtype, out.shape)",
        "torch.linalg_nope",
        "%nbgrad torch off",
        "import torch\nprint(type(torch.ones(1)).__module__)\n"
        "print(nbgrad.ones(1).dtype, type(nbgrad.ones(1)).__module__)",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    env_old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)
    try:
        nbclient.NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True,
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if env_old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = env_old

    def text(cell):
        return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")

    assert text(nb.cells[0]).strip() == "torch True"
    assert text(nb.cells[1]).startswith("import torch -> nbgrad: on (the real torch")
    # nbgrad's tensors, printed with torch's names while the alias is on
    assert text(nb.cells[2]).split("\n")[:2] == ["torch True True",
                                                 "torch.float32 torch.Size([1, 1])"]
    err = [o for o in nb.cells[3].outputs if o.output_type == "error"]
    assert err and err[0].ename == "AttributeError"
    assert err[0].evalue == "module 'torch' has no attribute 'linalg_nope'"  # torch's text
    assert text(nb.cells[4]).startswith("import torch -> nbgrad: off")
    assert text(nb.cells[5]).split("\n")[:2] == ["torch", "nbgrad.float32 nbgrad.tensor"]


def test_version_under_the_alias_is_the_pytorch_one_nbgrad_follows(tmp_path):
    torch = pytest.importorskip("torch")
    assert as_torch.TORCH_VERSION == torch.__version__ == "2.13.0+cpu"
    path = _script(tmp_path, "version.py", """
        import torch
        import nbgrad
        from torch import __version__
        v = torch.__version__
        print(v, v is __version__, isinstance(v, str), v.split(".")[:2])
        print(v >= "2.0", v >= (2, 1), v < "2.13.1", v == "2.13", v > (2, 13, 0), v != "1.0")
        print(v == "2.13.0+cpu", v != "2.13.0", v > "2.13.0", v < "2.13.0+cu121", v >= "2.13.0rc1",
              v == "2.13.0", v < "2.14.0.dev1", v == (2, 13, 0))
        print(nbgrad.__version__ == nbgrad.__dict__["__version__"] != v)
    """)
    ours = _run(["-m", "nbgrad", str(path)], tmp_path)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == [
        "2.13.0+cpu True True ['2', '13']", "True True True False True True",
        "True True True True True False True False", "True"]


def test_unimplemented_tensor_names_without_a_getattr():
    """While the alias is on, a torch.Tensor name nbgrad lacks says so (instance and class),
    other names keep Python's plain text, dir() does not offer them, an instance attribute of
    that name can still be set, and Tensor gets no `__getattr__` (which would cost every
    attribute read of every Tensor CPython's specialized loads); switching off removes it all."""
    import nbgrad
    as_torch.enable()
    try:
        assert "__getattr__" not in vars(nbgrad.Tensor)
        t = nbgrad.ones(2)
        with pytest.raises(AttributeError) as info:
            t.apply_
        assert str(info.value) == ("'Tensor' object has no attribute 'apply_' (nbgrad does not "
                                   "implement torch.Tensor.apply_ yet)")
        assert info.value.name == "apply_" and info.value.obj is t
        with pytest.raises(AttributeError, match=r"^type object 'Tensor' has no attribute "
                                                 r"'apply_' \(nbgrad does not"):
            nbgrad.Tensor.apply_
        with pytest.raises(AttributeError) as info:
            t.nope
        assert str(info.value) == "'Tensor' object has no attribute 'nope'"
        assert not hasattr(t, "apply_") and "apply_" not in dir(t) and "add_" in dir(t)
        t.apply_ = 3
        assert t.apply_ == 3
    finally:
        as_torch.disable()
    assert "apply_" not in vars(nbgrad.Tensor) and "__dir__" not in vars(nbgrad.Tensor)
    with pytest.raises(AttributeError) as info:
        nbgrad.ones(1).apply_
    assert str(info.value) == "'Tensor' object has no attribute 'apply_'"
