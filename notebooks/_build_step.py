"""The cells of notebooks/11_backward_step_by_step.ipynb: backward one node at a time.

Kept apart from _build.py (which writes every notebook, this one included, through ``nb11``).
"""


def nb11(md, code, raises, title, exercises):
    """The notebook's cells, from _build.py's cell helpers."""
    return [
        title(11, "Backward, step by step",
              "The lesson every autograd course has: a tiny expression, every value and every "
              "gradient written in the graph, and backpropagation done by hand one node at a "
              "time with the chain rule. Here the engine is the real one: `%nbgrad step loss` "
              "runs `loss.backward()` one node at a time, in the engine's own order, and shows "
              "the gradient each node receives, the formula it applies (its row of the op "
              "table) and what it sends along each edge. **Predict each gradient before you "
              "click *next* in the interactive panel.**"),
        code('''
%load_ext nbgrad
%nbgrad set values=on
import nbgrad as torch          # PyTorch's API, on numpy: the same code runs with `import torch`
from nbgrad.notebook.stepper import step

torch.manual_seed(0)
'''),
        md("""
`%nbgrad set values=on` (values mode) writes each tensor's data, and its `.grad` once known, in
the graph of the panel, and the gradient that flowed along each edge in the last backward.

## 1. A neuron

Two inputs `x1, x2`, two weights `w1, w2`, a bias `b`, and `tanh`: the neuron of micrograd's
lecture, with the same numbers.
"""),
        code('''
x1 = torch.tensor(2.0, requires_grad=True)
x2 = torch.tensor(0.0, requires_grad=True)
w1 = torch.tensor(-3.0, requires_grad=True)
w2 = torch.tensor(1.0, requires_grad=True)
b = torch.tensor(6.8813735870195432, requires_grad=True)
n = x1 * w1 + x2 * w2 + b
o = n.tanh()
print("n =", n.item(), " o =", o.item())
'''),
        md("""
**Predict, on paper, before the next cell.** `backward()` starts at `o` with the gradient
`do/do = 1`. The first node is `TanhBackward0`: its formula is `g * (1 - result²)` with
`result = o = 0.7071`. What does it send to `n`? Then `n = (x1*w1 + x2*w2) + b` is an addition:
what does `AddBackward0` send to each side? What will `w1.grad` and `x2.grad` be?

Run the next cell; in the interactive panel it shows, click **next ▶** once per node: the yellow
node runs next, the orange one just ran; each edge shows the gradient sent along it. **run to
end** finishes the walk.
"""),
        code('''
%nbgrad step o
'''),
        md("""
The same walk driven from code (this is what a saved notebook shows): `step(o)` gives the panel
object; `.next()` runs one node, `.run_to_end()` the rest. At the end every leaf's `.grad` is
bit for bit what `o.backward()` gives — checked here on a second copy of the graph.
"""),
        code('''
def neuron():
    x1, x2 = torch.tensor(2.0, requires_grad=True), torch.tensor(0.0, requires_grad=True)
    w1, w2 = torch.tensor(-3.0, requires_grad=True), torch.tensor(1.0, requires_grad=True)
    b = torch.tensor(6.8813735870195432, requires_grad=True)
    return [x1, x2, w1, w2, b], (x1 * w1 + x2 * w2 + b).tanh()

leaves, out = neuron()
walk = step(out, name="o")
walk.next()                     # TanhBackward0: g = 1, sends 1 - 0.7071² = 0.5
walk
'''),
        code('''
walk.run_to_end()
leaves2, out2 = neuron()
out2.backward()                 # the plain backward, on a copy
for name, a, c in zip(["x1", "x2", "w1", "w2", "b"], leaves, leaves2):
    print(f"{name}.grad  walk: {a.grad.item():+.4f}   backward(): {c.grad.item():+.4f}   "
          f"identical: {a.grad.numpy().tobytes() == c.grad.numpy().tobytes()}")
walk
'''),
        md("""
## 2. A node reached twice: the gradients add up

`a + a` uses `a` twice, so two gradients arrive at `a`'s AccumulateGrad. micrograd's first
version had a bug here (it overwrote the gradient instead of adding). **Predict `a.grad` for
`c = a * a + a` with `a = 3`**, then step: the panel writes the incoming gradient as the sum of
what came along each edge.
"""),
        code('''
a = torch.tensor(3.0, requires_grad=True)
c = a * a + a
twice = step(c, name="c")
twice.run_to_end()
print("a.grad =", a.grad.item(), "= 2*a + 1")
twice
'''),
        md("""
## 3. A small MLP

Three inputs, two hidden layers of four `tanh` units, one output, and the squared error over
four examples (micrograd's `MLP(3, [4, 4, 1])`). The graph is bigger, and the nodes are
PyTorch's: `AddmmBackward0` for each `nn.Linear`, `TBackward0` for its weight, `TanhBackward0`,
`SubBackward0`, `PowBackward0`, `MeanBackward0`. **Predict before stepping:** what does
`MeanBackward0` send to each of the four squared errors? What does `PowBackward0` compute with
its saved `self` (the differences)?
"""),
        code('''
from nbgrad import nn

torch.manual_seed(0)
mlp = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
xs = torch.tensor([[2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0]])
ys = torch.tensor([[1.0], [-1.0], [-1.0], [1.0]])
loss = ((mlp(xs) - ys) ** 2).mean()
print("loss =", loss.item())
'''),
        code('''
%nbgrad step loss
'''),
        md("""
## 4. When backward fails, the walk stops where it fails

`tanh` saves its output. Modifying that output in place makes the saved value stale: the walk
runs `SumBackward0` and `MulBackward0`, then stops at `TanhBackward0` with backward()'s own error
and the lines that saved and modified the tensor.
"""),
        code('''
x = torch.ones(3, requires_grad=True)
y = x.tanh()
z = (y * 2).sum()
y.add_(1)                       # BUG: y was saved by TanhBackward0
broken = step(z, name="z")
broken.run_to_end()
broken
'''),
        *exercises(
            "Change `b` in section 1 so that `n = 0`. Predict every gradient, then step.",
            "Replace `tanh` by `sigmoid` in the neuron: which formula does the panel show for "
            "`SigmoidBackward0`, and which saved value does it use?",
            "In the MLP, which parameter's gradient is computed last? Why does the engine run "
            "the `AccumulateGrad` nodes as soon as they are ready?",
            "Write `c = a * a + a` as `c = a * (a + 1)`. Does the walk still show a sum at `a`?"),
    ]
