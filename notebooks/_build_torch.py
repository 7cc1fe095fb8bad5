"""The cells of notebooks/10_debugging_pytorch.ipynb: the panel over PyTorch itself.

Kept apart from _build.py (which writes every notebook, this one included, through ``nb10``),
so that the text of the nbgrad notebooks and this one can change independently.
"""


def nb10(md, code, raises, title, exercises):
    """The notebook's cells, from _build.py's cell helpers."""
    return [
        title(10, "Debugging a real PyTorch model",
              "The same panel, over **PyTorch itself**: `import torch` is the real one here, on "
              "the GPU when there is one. The panel reads torch's own introspection (`grad_fn`, "
              "`next_functions`, `_saved_*`, `_version`, `_base`, the module hooks) and, while "
              "each cell runs, notes the line of every node and every in-place write. It never "
              "changes what torch computes."),
        code('''
%load_ext nbgrad
import torch
from torch import nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("torch", torch.__version__, "on", device)
'''),
        md("""
## 1. The in-place error, predicted before `backward()`

`sigmoid` saves its output for its backward. Modifying that output in place makes the saved
value stale: the panel under the next cell draws the saved tensor in red, with the line that
saved it and the line that modified it. torch itself would say so only when `backward()` runs.
"""),
        code('''
x = torch.randn(4, requires_grad=True, device=device)
y = x.sigmoid()
loss = (y * y).sum()
'''),
        code('''
y.mul_(2)          # BUG: y was saved by SigmoidBackward0 (and by the product)
'''),
        raises('''
loss.backward()    # torch's own error; the panel explains it with both lines
'''),
        md("""
The fix: `y = y * 2` (a new tensor; the saved one stays at version 0), or the in-place op
before the forward that saves it.

## 2. A model whose first layers never learn

A two-part model: an encoder and a head. Someone "saved memory" by detaching the encoder's
output. The panel's note names the parameters that got no gradient and the line that cut them.
"""),
        code('''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        h = self.encoder(x)
        return self.head(h.detach())     # BUG: the encoder is cut off from the loss

net = Net().to(device)
xb = torch.randn(64, 8, device=device)
yb = (xb[:, 0] > 0).long() + (xb[:, 1] > 0).long()
loss = F.cross_entropy(net(xb), yb)
loss.backward()
print({n: p.grad is not None for n, p in net.named_parameters()})
'''),
        md("""
## 3. Gradients that pile up

`backward()` sums into `.grad`. Without `zero_grad()` between steps, step k's gradient is k
times too large. The panel counts the backward calls summed into each `.grad`.
"""),
        code('''
net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3)).to(device)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    loss = F.cross_entropy(net(xb), yb)
    loss.backward()        # BUG: no opt.zero_grad() before it
    opt.step()
'''),
        md("""
## 4. Where the NaN came from

`log(softmax(...))` underflows to `log(0) = -inf` for a confident model. The panel finds the
first op whose output was not finite, without turning on anomaly mode.
"""),
        code('''
logits = net(xb) * 200          # a very confident model
probs = logits.softmax(dim=1)
loss = -torch.log(probs)[torch.arange(len(yb)), yb].mean()    # BUG: use F.cross_entropy
loss.backward()
print("loss:", loss.item())
'''),
        md("""
## 5. A training loop, and the eval-mode mix-up

A loop cell gets one summary panel: the loss curve, the total gradient norm, and the
*Gradients* tab (norm, update/weight ratio, dead fraction per parameter). This model has a
Dropout layer and was left in eval mode by an evaluation: the panel notes it.
"""),
        code('''
torch.manual_seed(1)
model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 3)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
model.eval()
with torch.no_grad():
    print("accuracy before:", (model(xb).argmax(1) == yb).float().mean().item())
for step in range(40):              # BUG: still in eval mode (no model.train())
    opt.zero_grad()
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
print("loss after 40 steps:", round(loss.item(), 4))
'''),
        md("""
## 6. Memory

The *Memory* tab of each panel gives the bytes the saved tensors of the graphs shown hold and,
on a GPU, the state of torch's caching allocator after the cell and its change: allocated,
reserved, active, peak, inactive split blocks (fragmentation), segments, allocation retries and
OOMs.
"""),
        code('''
big = torch.randn(256, 256, device=device, requires_grad=True)
chain = big
for _ in range(6):
    chain = (chain @ big).tanh()       # each step saves a 256x256 result
out = chain.sum()
if device == "cuda":
    print(torch.cuda.memory_allocated() // 2**20, "MiB allocated")
'''),
        md("""
`%nbgrad graph NAME` draws one tensor's graph; `%nbgrad set record=off` turns the per-op
recording off (the graphs stay; lines of nodes and writes are no longer known).
"""),
        code('''
%nbgrad graph loss
'''),
        *exercises(
            "Fix section 1 with an out-of-place op. Which nodes' saved tensors change?",
            "Fix section 2 and check that every parameter gets a gradient.",
            "Add `opt.zero_grad()` in section 3. What does the panel say now?",
            "Replace the hand-written loss of section 4 by `F.cross_entropy(logits, yb)`.",
            "Call `model.train()` before the loop of section 5 and compare the losses.",
        ),
    ]
