"""Generate the tutorial notebooks (notebooks/NN_*.ipynb) from the cell lists below.

    python notebooks/_build.py          # rewrite every notebook, without outputs

The .ipynb files are committed WITHOUT outputs (CI executes every one: tests/test_notebooks.py).
Edit the text here, not in the .ipynb, and re-run this script. A cell tagged "raises-exception"
demonstrates an error on purpose: Jupyter (and nbclient) go on to the next cell after it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent


def md(text):
    return new_markdown_cell(text.strip("\n"))


def code(src, *tags):
    c = new_code_cell(src.strip("\n"))
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def raises(src):
    """A cell that shows a real error: the kernel prints the traceback and the notebook goes on."""
    return code(src, "raises-exception")


SETUP = '''
%load_ext nbgrad
import nbgrad as torch          # PyTorch's API, on numpy: the same code runs with `import torch`

torch.manual_seed(0)
try:
    import pygraphviz           # the graph layout, in-process (pip install "nbgrad[notebook]")
    HAVE_LAYOUT = True
except ImportError:
    HAVE_LAYOUT = False
print("nbgrad", torch.__version__, "| graph layout (pygraphviz):", "found" if HAVE_LAYOUT else
      "missing -> skipped: graph drawings (the panel shows the graph as a text tree instead)")
'''
# the classroom notebooks with small graphs (01-05; 11 has its own): values mode on, each box of
# the graph shows its tensor's data and .grad, each edge the gradient backward sent along it
# (benchmarks/bench_values_notebooks.py: values add ~0.5-1.5 KB per cell to the saved file)


def values_on(setup):
    """A setup cell with values mode on, right after ``%load_ext nbgrad``."""
    return setup.replace("%load_ext nbgrad\n", "%load_ext nbgrad\n%nbgrad set values=on  "
                         "# data, .grad and edge gradients written in the graph\n", 1)


SETUP_VALUES = values_on(SETUP)

SETUP02 = '''
ENGINE = "nbgrad"               # or "torch": the same notebook in real PyTorch, the same panel
%load_ext nbgrad
if ENGINE == "torch":
    import torch
else:
    import nbgrad as torch      # PyTorch's API, on numpy: the same code runs with `import torch`

torch.manual_seed(0)
try:
    import pygraphviz           # the graph layout, in-process (pip install "nbgrad[notebook]")
    HAVE_LAYOUT = True
except ImportError:
    HAVE_LAYOUT = False
print(ENGINE, torch.__version__, "| graph layout (pygraphviz):", "found" if HAVE_LAYOUT else
      "missing -> skipped: graph drawings (the panel shows the graph as a text tree instead)")
'''
EITHER_ENGINE = """
*Either engine.* The first code cell says `ENGINE = "nbgrad"`; change it to `"torch"` and run all:
the same cells run in real PyTorch (torch must be installed), fail with PyTorch's own errors, and
the panel shows the same predictions and explanations for torch's tensors.
"""


def title(n, name, what, more=""):
    return md(f"""
# {n:02d} · {name}

{what}

*How to read this notebook.* Run the cells in order (Shift+Enter). `%load_ext nbgrad` (first code
cell) adds a **panel** under every cell that changed autograd state: the live `grad_fn` graph
(tab *Graph*), every named tensor with its `_version` (*Tensors*), which tensors share a storage
(*Views*), and memory (*Memory*). Cells marked with an error are errors **on purpose**: read the
message, then the panel under it. Exercises are at the end.
""" + (f"\n{more.strip(chr(10))}\n" if more else ""))


def exercises(*items):
    body = "\n".join(f"{i}. {t}" for i, t in enumerate(items, 1))
    return [md("## Exercises\n\n" + body), code("# your answers here\n")]


# --------------------------------------------------------------------------------------------
NB01 = [
    title(1, "Autograd basics",
          "Tensors that require grad, the graph of `grad_fn` nodes recorded as you compute, leaf "
          "tensors, `backward()`, `retain_grad()` and hooks. The worked example is the one of "
          "*PyTorch 的 Autograd* (seed 004): four layers, three weights, gradients 28 / 8 / 10."),
    code(SETUP_VALUES),
    md("""
## 1. Every operation on a tensor that requires grad records a node

`requires_grad=True` asks autograd to remember how a tensor is used. The result of an operation
gets a `grad_fn`: the node that will compute this operation's vector-Jacobian product during
`backward()`. Its class name is PyTorch's (`ExpBackward0`). Look at the panel under the cell.
"""),
    code("""
a = torch.tensor(2.0, requires_grad=True)
b = a.exp()
print(b)
print(b.grad_fn, b.requires_grad, b.is_leaf)
"""),
    md("""
`requires_grad` propagates: a result requires grad when **any** input does. A tensor created by
you (not by an operation) is a **leaf**; results of operations are not leaves.
"""),
    code("""
x = torch.ones(2, 2)                  # requires_grad=False (the default)
y = x * a                             # one input requires grad -> so does the result
print(x.requires_grad, x.is_leaf, x.grad_fn)
print(y.requires_grad, y.is_leaf, y.grad_fn)
"""),
    md("""
## 2. The example: l1 .. l4

```
l1 = input x w1        l2 = l1 + w2        l3 = l1 x w3        l4 = l2 x l3        loss = mean(l4)
```
`input` does not require grad; the three weights do. Before `backward()`, `.grad` is `None`
everywhere; leaves have no `grad_fn`.
"""),
    code("""
input = torch.ones([2, 2], requires_grad=False)
w1 = torch.tensor(2.0, requires_grad=True)
w2 = torch.tensor(3.0, requires_grad=True)
w3 = torch.tensor(4.0, requires_grad=True)

l1 = input * w1
l2 = l1 + w2
l3 = l1 * w3
l4 = l2 * l3
loss = l4.mean()

print(w1.data, w1.grad, w1.grad_fn)
print(l1.data, l1.grad_fn)
print(loss.data, loss.grad_fn)
"""),
    md("""
## 3. Walking the graph: `next_functions`

Each node points at the nodes that produced its inputs: `next_functions` is a tuple of
`(node, input_nr)`. A leaf that requires grad is reached through an `AccumulateGrad` node (it adds
the incoming gradient into the leaf's `.grad`); an input that does not require grad shows as
`None`. Nodes point *backwards*, from the loss to the leaves: when the last tensor referring to
`loss` goes away, the whole graph goes with it.
"""),
    code("""
print(loss.grad_fn.next_functions)
print(l4.grad_fn.next_functions)
print(l1.grad_fn.next_functions)          # (None, 0): input does not require grad

def walk(fn, depth=0):
    \"\"\"Print the graph below a node, one node per line.\"\"\"
    if fn is None:
        print("    " * depth + "None  (does not require grad)")
        return
    extra = ""
    if hasattr(fn, "variable"):                 # AccumulateGrad: the leaf it accumulates into
        extra = f"  -> leaf {tuple(fn.variable.shape)} = {fn.variable.item()}"
    print("    " * depth + type(fn).__name__ + extra)
    for nxt, _ in fn.next_functions:
        walk(nxt, depth + 1)

walk(loss.grad_fn)
"""),
    code("""
acc = l1.grad_fn.next_functions[1][0]     # the AccumulateGrad node of w1
print(acc, acc.variable is w1)
print({name: t.is_leaf for name, t in [("input", input), ("w1", w1), ("l1", l1), ("loss", loss)]})
"""),
    md("""
The same graph drawn (Graphviz, in-process through pygraphviz; without it a text tree). `%nbgrad graph EXPR` labels the
nodes with the variable names of this notebook; `torch.viz.graph(t, params=...)` is the
programmatic form (like torchviz's `make_dot`).
"""),
    code("%nbgrad graph loss"),
    md("""
## 4. `backward()` and the chain rule

`loss = mean(l4)`, so each element of `l4` gets gradient 1/4. Then `dl4/dl2 = l3 = 8`,
`dl4/dl3 = l2 = 5`, `dl3/dw3 = l1 = 2` per element: 4 elements x 1/4 x 5 x 2 = **10** for `w3`.
For `w2`: 4 x 1/4 x 8 x 1 = **8**. For `w1` both paths through `l1` add up:
`dl4/dl1 = l3 + l2 x w3 = 8 + 5 x 4 = 28` per element, times `input = 1`: 4 x 1/4 x 28 = **28**.
(`w2` is broadcast to 2x2 in `l1 + w2`: its gradient is the **sum** over the broadcast elements.)
"""),
    code("""
loss.backward()
print(w1.grad, w2.grad, w3.grad)
"""),
    md("""
Only leaves keep `.grad`. The intermediate gradients were computed, used and freed. Reading
`.grad` of a non-leaf gives `None` (and PyTorch's warning, to catch the mistake).
"""),
    code("print(l1.grad, l4.grad, loss.grad)"),
    md("""
## 5. Keeping an intermediate gradient: `retain_grad()`

Rebuild the graph (the last `backward()` freed it) and ask for `l1`, `l4` and `loss` to keep
their gradients.
"""),
    code("""
def forward():
    l1 = input * w1
    l2 = l1 + w2
    l3 = l1 * w3
    l4 = l2 * l3
    return l1, l4, l4.mean()

for w in (w1, w2, w3):
    w.grad = None                     # gradients accumulate across backward calls: reset them

l1, l4, loss = forward()
l1.retain_grad(); l4.retain_grad(); loss.retain_grad()
loss.backward()
print("loss.grad", loss.grad)
print("l4.grad", l4.grad)
print("l1.grad", l1.grad)
"""),
    md("""
## 6. Hooks: see (or change) a gradient as it flows

`t.register_hook(fn)` calls `fn(grad)` when the gradient of `t` is computed; it returns a handle
whose `remove()` unregisters it. Nothing is stored: `loss.grad` stays `None`.
"""),
    code("""
l1, l4, loss = forward()
handles = [l1.register_hook(lambda grad: print("l1 grad:", grad)),
           l4.register_hook(lambda grad: print("l4 grad:", grad)),
           loss.register_hook(lambda grad: print("loss grad:", grad))]
loss.backward()
print("loss.grad after the hooks:", loss.grad)
for h in handles:
    h.remove()
"""),
    md("""
A hook may **return** a new gradient, which replaces the old one for the rest of backward.
Doubling `l1`'s gradient doubles `w1`'s (28 -> 56); `w2` and `w3` do not go through `l1`'s
gradient, so they are unchanged. Gradients accumulate: we reset them first.
"""),
    code("""
for w in (w1, w2, w3):
    w.grad = None
l1, l4, loss = forward()
h = l1.register_hook(lambda grad: grad * 2)
loss.backward()
h.remove()
print(w1.grad, w2.grad, w3.grad)
"""),
    md("""
Without resetting, a second backward **adds** to `.grad` (here 8 + 8 = 16 for `w2`):
"""),
    code("""
for w in (w1, w2, w3):
    w.grad = None
for _ in range(2):
    l1, l4, loss = forward()
    loss.backward()
print(w1.grad, w2.grad, w3.grad)
"""),
    *exercises(
        "Change `input` to `torch.ones([2, 2], requires_grad=True)` and run the example again. "
        "Which tensors are leaves now? What is `input.grad`? Explain each element from `l1.grad` "
        "(section 5) and `w1`.",
        "Print `l2.grad_fn.next_functions`. Why does one entry point to an `AccumulateGrad` node "
        "and the other to a `MulBackward0`?",
        "Replace `loss = l4.mean()` by `loss = l4.sum()`. Predict the three gradients before you "
        "run it.",
        "Write a hook on `l3` that prints the *norm* of its gradient, and one on `w2` that clips "
        "its gradient to at most 5. Check `w2.grad` after backward.",
        "What does the panel show in the *Tensors* tab for `w1.grad` after two backward calls "
        "without resetting?",
    ),
]

# --------------------------------------------------------------------------------------------
NB02 = [
    title(2, "In-place operations and their errors",
          "Why `y = x.tanh(); y.add_(3)` breaks `backward()`, how the version counter finds out, "
          "what the panel shows **before** you call backward, in-place operations on leaves, "
          "and the four fixes (`no_grad`, `.data`, `detach()`, `clone()`) and why each works "
          "(seeds 000 and 004).", EITHER_ENGINE),
    code(values_on(SETUP02)),
    md("""
## 1. The classic: modifying a tensor that backward needs

`tanh'(x) = 1 - tanh(x)^2`: the backward of `tanh` needs its **output**, so `TanhBackward0`
saves `y`. Saving does not copy (that would double memory); it records the tensor and its
**version**. Every in-place operation adds 1 to the version.
"""),
    code("""
x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
y = x.tanh()
print(y._version, y.grad_fn)
"""),
    md("""
Now modify `y` in place. Nothing fails yet (PyTorch would say nothing until `backward()`), but
**look at the panel**: the saved tensor of `TanhBackward0` is drawn in red, "saved v0, now v1",
with where it was saved and where it was modified. The backward that will fail is predicted.
The red `TanhBackward0` node carries the story: the cell and line that saved `y`, its saved
tensor marked *saved v0, now v1*, and the `add_` that modified it, with its cell and line (in an
interactive panel, a click on the node also opens the source lines below the graph).
"""),
    code("""
y.add_(3)
print(y._version)
"""),
    md("And here is the real error, raised by `backward()`. The panel under it explains it with "
       "the cells and lines involved."),
    raises("y.sum().backward()"),
    md("""
The error carries the same explanation as plain data (nbgrad attaches it to the error as
`err.nbgrad_context`; for PyTorch's own error the panel reads it from the message and the graph),
so a test or a tool can read it:
"""),
    code("""
from nbgrad.notebook.adapter import error_context   # the same reading for either engine
try:
    y.sum().backward()
except RuntimeError as err:
    ctx = error_context(err)                # nbgrad: err.nbgrad_context; torch: read from the error
    print(ctx["kind"], "|", ctx["tensor"], "saved version", ctx["saved_version"],
          "now", ctx["version"])
    for line in str(err).splitlines()[1:]:     # the lines after PyTorch's own message
        print(line)
"""),
    md("""
## 2. What each operation saves decides what an in-place op breaks

| op | saves | so an in-place change of ... breaks backward |
|----|-------|-----------------------------------------------|
| `exp`, `tanh`, `sigmoid`, `relu`, `softmax` | its output | the output |
| `pow` | its input | the input |
| `mul` | both inputs | either input |
| `add`, `sub` | nothing | nothing |

`add` saves nothing (its derivative is 1), so modifying its output is harmless:
"""),
    code("""
x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
y = x + 1
y.add_(3)                       # AddBackward0 saved nothing: nothing to invalidate
y.sum().backward()
print(x.grad)
"""),
    md("""
## 3. Seed 004: `b * b`, then `b[0] = 1000`

`b * b` saves `b` (twice: as `self` and `other`). `b[0] = 1000.0` is an in-place write: `b`'s
version goes from 0 to 1. Watch `_version`, then the panel.
"""),
    code("""
a = torch.tensor([1.0, 3.0], requires_grad=True)
b = a + 2
print(b._version)
loss = (b * b).mean()
"""),
    code("""
b[0] = 1000.0
print(b._version)
"""),
    raises("loss.backward()"),
    md("""
The graph of `loss` can never be backpropagated now (its saved `b` is gone for good). Drop it:
the panel stops warning about it. To get the gradient, compute the loss again.
"""),
    code("""
del loss
loss = (b * b).mean()             # a new graph saves b at version 1
loss.backward()
print(a.grad)                     # [0, 5]: b[0] no longer depends on a
"""),
    md("""
## 4. In-place on a leaf that requires grad

A leaf's `.grad` is the gradient with respect to the value it had when the graph was built.
Modifying it in place under autograd would make that meaningless, so it is refused
**immediately**, not at backward time. The same for a view of the leaf (`a[:2]`, `a[:]`).
(Old PyTorch 1.1 let `a[:] = 0` through and failed later with "leaf variable has been moved into
the graph interior"; PyTorch 2 and nbgrad refuse it at once.)
"""),
    raises("""
a = torch.tensor([10., 5., 2., 3.], requires_grad=True)
a.add_(10.)                      # or a += 10.
"""),
    raises("a[:2].mul_(2)            # a view of the leaf"),
    md("""
## 5. The fixes, and why each works

**(a) `torch.no_grad()`**: inside it nothing is recorded, so an in-place change of a leaf is just a
change of its value (this is how optimizers update weights). The version still goes up, so a
graph built *before* would still be protected.
"""),
    code("""
a = torch.tensor([10., 5., 2., 3.], requires_grad=True)
with torch.no_grad():
    a[:] = 10.
print(a, a.is_leaf, a._version)
((a * a).mean()).backward()
print(a.grad)
"""),
    md("""
**(b) `.data`**: a tensor on the same storage with `requires_grad=False` and its **own** version
counter: autograd does not see the change at all. That is why it works, and why it is dangerous:
a saved tensor changed through `.data` is not detected, and the gradient is **silently wrong**.
"""),
    code("""
a = torch.tensor([10., 5., 2., 3.], requires_grad=True)
a.data.fill_(10.)
print(a, a._version)             # version unchanged: autograd was not told
((a * a).mean()).backward()
print(a.grad)                    # right: nothing was saved yet when we changed it

w = torch.tensor([1., 2.], requires_grad=True)
q = w * w                        # saves w (version 0)
w.data.mul_(100)                 # not detected...
q.sum().backward()
print(w.grad, "<- silently wrong: 2*w was [2, 4] when q was computed")
"""),
    md("""
**(c) `detach()`**: also a tensor on the same storage that does not require grad, but it
**shares** the version counter. Changing it is allowed, and a saved tensor it invalidates is
still caught. Prefer `detach()` to `.data`.
"""),
    code("""
a = torch.tensor([10., 5., 2., 3.], requires_grad=True)
a.detach().fill_(10.)            # allowed, and counted
print(a, a._version)
((a * a).mean()).backward()
print(a.grad)
"""),
    raises("""
w = torch.tensor([1., 2.], requires_grad=True)
q = w * w
w.detach().mul_(100)             # counted: the saved w is now stale...
q.sum().backward()               # ...and backward says so, instead of a wrong gradient
"""),
    md("""
**(d) `clone()`**: a copy with its own storage (and a `CloneBackward0` node: gradients flow
through it). Modify the copy, not the saved tensor.
"""),
    code("""
del q                            # the stale graph of the previous cell
x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
y = x.tanh()
z = y.clone()
z.add_(3)                        # y, which TanhBackward0 saved, is untouched
z.sum().backward()
print(x.grad, y._version, z._version)
"""),
    *exercises(
        "Replace `tanh` by `sigmoid`, then by `x ** 2`, then by `x * 2` in section 1. Which "
        "versions fail at backward, and why (use the table)?",
        "In section 3, change `b[0] = 1000.0` so that `loss.backward()` works and `a.grad` is "
        "the gradient of the **original** loss. (Hint: which of the four fixes leaves the saved `b` "
        "untouched? Why do the other three not help here?)",
        "`torch.nn.ReLU(inplace=True)` after a `Sigmoid`: will backward work? After a `Linear`? "
        "Check your answer, and look at the red node in the panel.",
        "Find a case where `.data` gives a silently wrong gradient but `detach()` raises. Why is "
        "the error better?",
    ),
]

# --------------------------------------------------------------------------------------------
NB03 = [
    title(3, "Views and aliasing",
          "A tensor is a view onto a **storage**: a shape, strides and an offset. Slicing, "
          "`transpose`, `view` share the storage (and its version counter). What that means "
          "for in-place operations and for autograd: `CopySlices`, regenerated views, "
          "`contiguous()` (seeds 000 and 002)."),
    code(SETUP_VALUES),
    md("""
## 1. Storage, shape, strides, offset

`x[i, j]` lives at `storage[offset + i * stride[0] + j * stride[1]]`. A view changes the shape,
strides and offset, never the data.
"""),
    code("""
x = torch.arange(12.).reshape(3, 4)
row = x[1]                 # offset 4, stride (1,)
col = x[:, 1]              # offset 1, stride (4,)
xt = x.t()                 # strides swapped, no copy
def describe(**tensors):
    for name, t in tensors.items():
        same = t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        print(f"{name:4} shape={tuple(t.shape)} stride={t.stride()} offset={t.storage_offset()} "
              f"view={t._is_view()} same storage={same}")

describe(x=x, row=row, col=col, xt=xt)
print(x.untyped_storage().nbytes(), "bytes in one storage for all four")
print("x itself is a view:", x._base.shape, "(arange's 12 elements; reshape made no copy)")
"""),
    md("""
Writing through a view writes the base, and **one version counter** is shared by every view of
the storage, in both directions (the *Views* tab of the panel lists them).
"""),
    code("""
col.fill_(-1.)
print(x)
print(x._version, row._version, col._version, xt._version)
"""),
    md("""
`.numpy()` shares memory too: the numpy array is another view of the same buffer.
"""),
    code("""
v0 = x._version
arr = x.numpy()
arr[0, 0] = 100.
print(x[0, 0], "| version before", v0, "after", x._version)
"""),
    md("""
A write through numpy is **invisible** to the version counter (like `.data`, notebook 02): autograd
cannot protect what it does not see. Use numpy views for reading.
"""),
    md("""
## 2. Seed 000: `y = x[:2]; x.add_(3)`

`y` is a view of `x`. Modifying `x` in place changes `y`'s elements too, so `y`'s history
changed. The 2017 paper says PyTorch rejected this; PyTorch today (and nbgrad) **regenerate** the
view's `grad_fn` instead: `y.grad_fn` becomes `AsStridedBackward0`, on top of `x`'s new history.
"""),
    code("""
w = torch.ones(4, requires_grad=True)
x = w * 2                   # a non-leaf (in-place on a leaf would be refused, notebook 02)
y = x[:2]
print(y.grad_fn, y._version)
x.add_(3)
print(x.grad_fn, y.grad_fn, y._version)
"""),
    code("""
(y * y).sum().backward()    # y = 2w + 3 on its first two elements: dy^2/dw = 2y * 2
print(y, w.grad)
"""),
    md("""
## 3. In-place on a view of a non-leaf: `CopySlices`

Writing into a slice of `h` changes part of `h`: its history becomes a `CopySlices` node (copy
the old gradient, then route the sliced part through the in-place op's derivative).
"""),
    code("""
w = torch.tensor([1., 2., 3., 4.], requires_grad=True)
h = w * 2
print(h.grad_fn)
h[1:3].mul_(5)              # elements 1 and 2 are now 10 * w
print(h, h.grad_fn)
print(h.grad_fn.next_functions)
"""),
    code("""
h.sum().backward()
print(w.grad)               # [2, 10, 10, 2]
"""),
    md("""
Assignment `t[idx] = value` is the same thing (`copy_` into a view): the assigned value's gradient
flows to where it came from, and the overwritten elements get zero gradient.
"""),
    code("""
w = torch.tensor([1., 2., 3., 4.], requires_grad=True)
v = torch.tensor([7., 7.], requires_grad=True)
h = w * 1
h[:2] = v * 3
h.sum().backward()
print(h.grad_fn, w.grad, v.grad)
"""),
    md("""
Two view cases autograd refuses: a view made under `no_grad` then modified with grad on, and an
output of a function returning several views (`unbind`, `split`, `chunk`):
"""),
    raises("""
q = torch.ones(4, requires_grad=True) * 1
first, second = q.unbind(0)[:2]
first.mul_(2)
"""),
    md("""
## 4. Transpose and `contiguous()`

`x.t()` is not contiguous: walking its elements in order jumps around the storage. `view` needs
strides compatible with the new shape, so it refuses; `contiguous()` copies into a new storage
(row-major) when needed, and `reshape` does `view` if it can and a copy otherwise.
"""),
    code("""
x = torch.arange(6.).reshape(2, 3)
xt = x.t()
print(x.is_contiguous(), xt.is_contiguous(), xt.stride())
"""),
    raises("xt.view(6)"),
    code("""
c = xt.contiguous()
print(c.stride(), c.view(6), c.untyped_storage().data_ptr() == x.untyped_storage().data_ptr())
r = x.reshape(3, 2)         # contiguous: a view
print(r._is_view(), xt.reshape(6)._is_view())
"""),
    *exercises(
        "Predict `stride()` and `storage_offset()` of "
        "`torch.arange(24.).reshape(2, 3, 4)[1, :, ::2]`, "
        "then check.",
        "Make `y = x[:2]` of a leaf `x` that requires grad, then `x.add_(1)`. What happens and "
        "why is it different from section 2?",
        "In section 3, replace `h[1:3].mul_(5)` by `h[1:3] = 0`. What is `w.grad`?",
        "`x.t().contiguous()` versus `x.t().clone()`: which ones share `x`'s storage, which "
        "share its version counter? Check with `_version` after an in-place op.",
    ),
]

# --------------------------------------------------------------------------------------------
NB04 = [
    title(4, "Memory",
          "Python's reference counting frees intermediates as soon as nothing refers to them; "
          "a graph holds its saved tensors until `backward()` consumes them (or until the "
          "graph itself goes); `retain_graph=True` keeps them. The *Memory* tab of the panel, "
          "and the GPU caching pool when a GPU is present (seed 001 §6.3, seed 000)."),
    code(SETUP_VALUES),
    code("""
from nbgrad.backend import memory_stats

def mem(label=""):
    s = memory_stats()
    print(f"{label:32} live {s['live_bytes'] / 2**20:7.2f} MiB in {s['live_storages']:4} storages")

mem("start")     # nothing below calls gc.collect(): reference counting alone frees
"""),
    md("""
## 1. Reference counting frees intermediates at once

No graph here (nothing requires grad): `((x * 2).exp() + 1).sum()` creates three temporary
4 MiB arrays, and each is freed as soon as the next operation has used it.
"""),
    code("""
x = torch.randn(1024, 1024)              # 4 MiB
mem("x")
s = ((x * 2).exp() + 1).sum()
mem("after the expression")            # x, and the 0-d result s: the temporaries are gone
del x, s
mem("del x, s")
"""),
    md("""
## 2. Saved tensors: what a graph holds

With `requires_grad`, each node keeps what its backward needs (notebook 02's table):
`exp` saves its output, `mul` by a constant saves nothing of size. The graph of `loss` now holds
the `exp` output (4 MiB) though no variable of ours refers to it.
"""),
    code("""
w = torch.randn(1024, 1024, requires_grad=True)
mem("w")
loss = ((w * 2).exp() + 1).sum()
mem("loss (graph alive)")
def saved(fn):                        # each node of the chain, and what it saved
    while fn is not None:
        print(f"{type(fn).__name__:16}",
              [(s.name, tuple(s.shape), s.nbytes) for s in fn._saved_tensors()])
        fn = fn.next_functions[0][0] if fn.next_functions else None

saved(loss.grad_fn)
"""),
    md("""
Open the **Memory** tab of the panel under that cell: under *saved for backward*, *1 saved tensor
holds 4.0 MiB in the graphs shown* is the `exp` output, and *this cell* lists the storages
allocated and freed. The graph tab shows the saved `result` beside `ExpBackward0`.

## 3. `backward()` frees the graph's saved tensors

After `backward()` the saved output of `exp` is released (and `w.grad` appears: 4 MiB more), even
though `loss` (and so the graph's nodes) is still alive. The panel's Memory tab now says *no
saved tensors in the graphs shown*, and the graph marks the saved `result` as *freed by backward*.
"""),
    code("""
loss.backward()
mem("after backward (+ w.grad)")
"""),
    md("""
A second `backward()` through the same graph finds the saved tensors gone. The example of seed
004 ("dynamic graph": the graph is built anew by each forward pass and freed by backward):
"""),
    raises("""
a = torch.tensor([3.0, 1.0], requires_grad=True)
b = a * a
small_loss = b.mean()
small_loss.backward()      # fine
small_loss.backward()      # the saved a's of MulBackward0 are gone
"""),
    code("""
small_loss = (a * a).mean()   # a new forward pass builds a new graph: backward works again
small_loss.backward()
print(a.grad)                 # 3, 1 from the first backward + 3, 1 from this one
"""),
    md("""
`retain_graph=True` keeps the saved tensors for another backward; the memory stays held until the
graph is dropped. The graph is freed when the last tensor referring to it goes (`del loss`):
reference counting again.
"""),
    code("""
w.grad = None
loss = ((w * 2).exp() + 1).sum()
loss.backward(retain_graph=True)
mem("after backward(retain_graph=True)")
loss.backward()                          # works: gradients add up
one_backward = 2 * (w.detach() * 2).exp()          # d loss / dw, computed by hand
print("w.grad holds", round((w.grad / one_backward).mean().item(), 3), "backward calls")
del one_backward
"""),
    code("""
w.grad = None
loss = ((w * 2).exp() + 1).sum()
mem("graph alive")
del loss
mem("del loss: graph and saved tensors freed")
"""),
    md("""
## 4. The same in a training loop

Keeping `loss` (not `loss.item()`) in a list keeps every step's graph alive: the classic memory
leak. Compare:
"""),
    code("""
w = torch.randn(256, 256, requires_grad=True)
kept = []
for step in range(5):
    loss = (w * 2).tanh().sum()           # TanhBackward0 saves its 256 KiB output
    kept.append(loss)                     # the graph stays alive
mem("5 losses kept")
kept = [l.item() for l in kept]           # plain floats: graphs freed
mem("kept .item() instead")
del loss
mem("last graph freed")
"""),
    md("""
## 5. The GPU caching allocator

On a GPU (cupy), memory comes from a caching pool, like PyTorch's caching allocator: a freed block
goes back to the pool (`memory_reserved` stays), not to the driver; `torch.cuda.empty_cache()`
returns the cached blocks. The Memory tab shows the pool when a GPU is present.
"""),
    code("""
if torch.cuda.is_available():
    g = torch.randn(1024, 1024, device="cuda")
    print("allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved())
    del g
    print("after del: allocated", torch.cuda.memory_allocated(),
          "reserved", torch.cuda.memory_reserved())
    torch.cuda.empty_cache()
    print("after empty_cache: reserved", torch.cuda.memory_reserved())
else:
    print("no GPU here: skipped the GPU memory-pool section "
          "(install nbgrad[cuda12] on a CUDA machine)")
"""),
    *exercises(
        "Replace `.exp()` by `.sin()` in section 2. What does `SinBackward0` save, and how much "
        "memory does the graph hold now?",
        "Build `loss = (w * w).sum()` with `w` of 4 MiB. How many bytes are saved, and why twice "
        "the same storage does not cost twice the memory?",
        "Write a loop that keeps 100 losses as tensors, watch the Memory tab, then fix it.",
        "With `torch.no_grad()`, how much memory does section 2's expression hold?",
    ),
]

# --------------------------------------------------------------------------------------------
NB05 = [
    title(5, "Custom Function, gradcheck, higher-order gradients",
          "Write an operation with its own backward (`torch.autograd.Function`), check it "
          "against finite differences (`gradcheck`), and differentiate a gradient "
          "(`create_graph=True`)."),
    code(SETUP_VALUES),
    md("""
## 1. A custom Function

`forward(ctx, ...)` computes the result and saves what backward needs with
`ctx.save_for_backward`; `backward(ctx, grad_output)` returns one gradient per input. Call it
with `.apply`. The node in the graph is named after the class (`MyExpBackward`).
"""),
    code("""
class MyExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)        # d exp(x)/dx = exp(x): save the output
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y

x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
y = MyExp.apply(x)
print(y.grad_fn)
y.sum().backward()
print(x.grad, torch.exp(x.detach()))
"""),
    md("""
Saved tensors of a custom Function are checked like built-in ones: modifying `y` in place breaks
its backward, and the panel shows it before you call backward.
"""),
    code("""
x.grad = None
y = MyExp.apply(x)
y.mul_(2)
"""),
    raises("y.sum().backward()"),
    md("""
`ctx.needs_input_grad` tells backward which inputs need a gradient (skip the work for the
others); return `None` for an input that needs none.
"""),
    code("""
class ScaledMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, scale):
        ctx.save_for_backward(a, b)
        ctx.scale = scale                # non-tensor state: a plain attribute
        return a * b * scale

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        print("needs_input_grad:", ctx.needs_input_grad)
        ga = g * b * ctx.scale if ctx.needs_input_grad[0] else None
        gb = g * a * ctx.scale if ctx.needs_input_grad[1] else None
        return ga, gb, None              # no gradient for the float `scale`

a = torch.tensor([1., 2.], requires_grad=True)
b = torch.tensor([3., 4.])               # does not require grad
ScaledMul.apply(a, b, 10.0).sum().backward()
print(a.grad)
"""),
    md("""
## 2. gradcheck: compare backward with finite differences

`gradcheck` perturbs each input element by a small `eps` and compares the numerical Jacobian with
the one your backward gives. Use float64 inputs (float32 is too coarse for finite differences).
"""),
    code("""
from nbgrad.autograd import gradcheck

x64 = torch.randn(4, dtype=torch.float64, requires_grad=True)
print("MyExp:", gradcheck(MyExp.apply, (x64,), eps=1e-6, atol=1e-4))
"""),
    md("A planted bug: the derivative of `sin` is `cos`, not `-cos`. gradcheck catches it:"),
    code("""
class BadSin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -g * x.cos()              # wrong sign

print("BadSin:", gradcheck(BadSin.apply, (x64,), eps=1e-6, atol=1e-4, raise_exception=False))
"""),
    raises("gradcheck(BadSin.apply, (x64,), eps=1e-6, atol=1e-4)"),
    md("""
## 3. Higher-order gradients

`torch.autograd.grad(y, x, create_graph=True)` returns the gradient **as a tensor with its own
graph**, which can be differentiated again. For `y = x^3` at `x = 2`: `y' = 3x^2 = 12`,
`y'' = 6x = 12`, `y''' = 6`.
"""),
    code("""
x = torch.tensor(2.0, requires_grad=True)
y = x ** 3
(g1,) = torch.autograd.grad(y, x, create_graph=True)
(g2,) = torch.autograd.grad(g1, x, create_graph=True)
(g3,) = torch.autograd.grad(g2, x)
print(g1, g2, g3)
"""),
    md("""
A use: the curvature of `tanh` (its second derivative is `-2 tanh(x) (1 - tanh(x)^2)`), for
many points at once. `grad_outputs=ones` sums over the points, which is fine because point i's
derivative depends only on `x[i]`.
"""),
    code("""
x = torch.linspace(-2, 2, 5, requires_grad=True)
t = x.tanh()
(d1,) = torch.autograd.grad(t, x, grad_outputs=torch.ones_like(t), create_graph=True)
(d2,) = torch.autograd.grad(d1, x, grad_outputs=torch.ones_like(d1))
expected = -2 * t.detach() * (1 - t.detach() ** 2)
print(d2)
print(expected)
"""),
    md("""
`gradgradcheck` checks second derivatives of a Function the same way (this Function's backward is
built from differentiable operations, so it has a second derivative):
"""),
    code("""
from nbgrad.autograd import gradgradcheck
print("MyExp second derivative:", gradgradcheck(MyExp.apply, (x64,), eps=1e-6, atol=1e-4))
"""),
    *exercises(
        "Write `Square` as a Function (`forward: x*x`, `backward: 2*x*g`) and gradcheck it.",
        "Make `MyExp` save its input instead of its output. What changes in backward? Does the "
        "in-place demo of section 1 still fail? Why?",
        "Compute the Hessian of `f(x) = (x ** 2).sum() * x[0]` for `x` of size 3, one row at "
        "a time with `autograd.grad(..., create_graph=True)`.",
        "Why must gradcheck inputs be float64? Try float32 and look at the error.",
    ),
]

# --------------------------------------------------------------------------------------------
NB06 = [
    title(6, "Visual debugging of a model",
          "Train an MLP and a small CNN on scikit-learn's digits (8x8 images, no download) with a "
          "progress bar and a loss curve, look at the graph of one training step, then find a "
          "planted bug with the panel: an in-place ReLU on a saved activation."),
    code(SETUP),
    code("""
import numpy as np
import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
try:
    from tqdm.auto import tqdm
except ImportError:                        # optional: no progress bar without tqdm
    print("tqdm missing: skipped the progress bars")
    def tqdm(it, **kw):
        return it

from nbgrad import nn
from nbgrad.utils.data import DataLoader, TensorDataset

d = load_digits()
images = (d.images / 16.0).astype(np.float32)[:, None]      # (1797, 1, 8, 8) in [0, 1]
labels = d.target.astype(np.int64)
perm = np.random.default_rng(0).permutation(len(images))
test, train = perm[:360], perm[360:]
x_train, y_train = torch.tensor(images[train]), torch.tensor(labels[train])
x_test, y_test = torch.tensor(images[test]), torch.tensor(labels[test])
print(x_train.shape, y_train.shape, x_test.shape)
"""),
    md("""
## 1. Train an MLP

Plain PyTorch code: `nn.Sequential`, `CrossEntropyLoss`, `optim.SGD`, a `DataLoader`. The panel
is switched off while training (`%nbgrad off`): a panel per cell is cheap, but a training cell is
not the place to read one.
"""),
    code("""
def accuracy(model):
    model.eval()
    with torch.no_grad():
        pred = model(x_test).argmax(dim=1)
    model.train()
    return (pred == y_test).float().mean().item()

def fit(model, opt, epochs, name):
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    loss_fn = nn.CrossEntropyLoss()
    history = []
    for epoch in (bar := tqdm(range(epochs), desc=name, unit="epoch")):
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            history.append(loss.item())
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{history[-1]:.3f}")
    return history
"""),
    code("""
%nbgrad off
torch.manual_seed(0)
mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                    nn.Linear(64, 10))
mlp_loss = fit(mlp, torch.optim.SGD(mlp.parameters(), lr=0.05, momentum=0.9), epochs=10, name="MLP")
print(f"MLP test accuracy: {accuracy(mlp):.3f}")
"""),
    code("""
plt.figure(figsize=(6, 3))
plt.plot(mlp_loss, label="MLP")
plt.xlabel("step"); plt.ylabel("cross-entropy"); plt.yscale("log")
plt.legend(); plt.title("training loss")
plt.show()
"""),
    md("""
## 2. The graph of one training step

One forward pass on a batch, with the panel back on: the graph from `loss` down to the
parameters (reached through `AccumulateGrad` nodes), the saved activations (`mat1`: a layer's
input, `result`: a ReLU's output) with their versions, and the memory held by the graph (*Memory*
tab). `torch.viz.graph` draws the same graph on its own, naming the parameters.
"""),
    code("""
%nbgrad on
xb, yb = x_train[:32], y_train[:32]
out = mlp(xb)
loss = nn.functional.cross_entropy(out, yb)
"""),
    code("torch.viz.graph(loss, params=dict(mlp.named_parameters()))"),
    md("""
Each parameter's version (printed after the next cell) counts the in-place updates it has had:
its initialisation, then one per optimizer step (the optimizer changes the weights in place,
under `no_grad`): 10 epochs of 23 batches. That is why a graph built **before** `opt.step()`
cannot be backpropagated after it: its saved weights are stale (the panel would show them red).
"""),
    code("""
loss.backward()
print({name: float(p.grad.abs().mean()) for name, p in mlp.named_parameters()})
print({name: p._version for name, p in mlp.named_parameters()})
"""),
    md("""
A loop that builds the same piece of graph again and again — an RNN reading the 8 rows of each
image, one step per row — is drawn **once**, in a blue box titled with the count and the line
that built it (*8 x h = torch.tanh(...)*); its layers are boxes inside, and the dashed arrow is
`h` going from one step to the next. In an interactive panel, a click on the title draws all 8
copies and a second click folds them (`%nbgrad graph h` draws the same folded graph as a
picture).
"""),
    code("""
torch.manual_seed(0)
rnn_in, rnn_h = nn.Linear(8, 16), nn.Linear(16, 16)
h = torch.zeros(32, 16)
for row in range(8):                      # one step per row of the 8x8 image
    h = torch.tanh(rnn_in(xb[:, 0, row]) + rnn_h(h))
"""),
    md("""
## 3. A small CNN

`Conv2d` (im2col over strided windows), `MaxPool2d`, Adam; a few epochs only.
"""),
    code("""
%nbgrad off
torch.manual_seed(0)
cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Flatten(), nn.Linear(128, 10))
cnn_loss = fit(cnn, torch.optim.Adam(cnn.parameters(), lr=3e-3), epochs=3, name="CNN")
print(f"CNN test accuracy: {accuracy(cnn):.3f}")
plt.figure(figsize=(6, 3))
plt.plot(mlp_loss, label="MLP (10 epochs)"); plt.plot(cnn_loss, label="CNN (3 epochs)")
plt.xlabel("step"); plt.yscale("log"); plt.legend(); plt.show()
%nbgrad on
"""),
    md("""
## 4. A planted bug, found with the panel

A colleague "saves memory" with `nn.ReLU(inplace=True)` after a `Sigmoid`. `Sigmoid` saves its
**output** for backward (`sigmoid' = s (1 - s)`), and the in-place ReLU overwrites exactly that
tensor. Run the forward pass and look at the panel **before** calling backward: the saved tensor
of `SigmoidBackward0` is red, "saved v0, now v1", modified by `relu_`. Both locations name the line
`out = buggy(xb)` (the first line outside the library); the node names say which layers.
"""),
    code("""
torch.manual_seed(0)
buggy = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.Sigmoid(), nn.ReLU(inplace=True),
                      nn.Linear(32, 10))
out = buggy(xb)
loss = nn.functional.cross_entropy(out, yb)
"""),
    raises("loss.backward()"),
    md("""
The fix: an out-of-place ReLU (or none: a sigmoid's output is already positive). In-place
activations are safe only after layers that do not save their output (`Linear`, `Conv2d`), and
the panel tells you which do.
"""),
    code("""
buggy[3] = nn.ReLU()
out = buggy(xb)
loss = nn.functional.cross_entropy(out, yb)
loss.backward()
print("backward OK, loss", round(loss.item(), 4))
"""),
    *exercises(
        "Train the MLP with `nn.ReLU(inplace=True)` everywhere. Does backward work? Why (what "
        "does `AddmmBackward0` save, what does `ReluBackward0` save)?",
        "Plant another bug: `out = mlp(xb); out.sub_(out.max())` before the loss. Is it a bug? "
        "Read the panel.",
        "Keep `loss` instead of `loss.item()` in `history` and watch the Memory tab of the "
        "panel after one epoch (notebook 04).",
        "Train the CNN for 10 epochs with SGD instead of Adam and compare the loss curves.",
    ),
]

# --------------------------------------------------------------------------------------------
NB07 = [
    title(7, "Debugging a model",
          "A digits classifier with six planted bugs, each one a bug real training code has: a "
          "layer whose output is cut from the graph, a forgotten `zero_grad()`, a NaN from the log "
          "of a softmax, `train()`/`eval()` mixed up, a loss target that broadcasts, and a "
          "training history that keeps every graph alive. Each is found with the panel (and with "
          "plain code you can use without it), then fixed, with why the fix works."),
    code(SETUP),
    code("""
import warnings
import numpy as np
from sklearn.datasets import load_digits
from nbgrad import nn
import nbgrad.nn.functional as F

d = load_digits()
X = torch.tensor((d.data / 16.0).astype(np.float32))        # (1797, 64) pixels in [0, 1]
Y = torch.tensor(d.target.astype(np.int64))                  # (1797,) digits 0-9
xb, yb = X[:64], Y[:64]                                      # one batch
print(X.shape, Y.shape)
"""),
    md("""
## Bug 1 · a layer that never learns: its output was cut from the graph

`detach()` (or `.data`, a trip through numpy, a `with torch.no_grad():` block) returns a tensor
with **no history**: backward stops there. Everything before it gets no gradient and never
learns, silently — the loss still goes down, a little, thanks to the layers after the cut.
The panel under the backward cell says it in one line, with the line of the cut — *net.body.0.weight,
net.body.0.bias got no gradient: its output was detached at cell [N] line 9* (`.detach()`, `.data`
and `torch.from_numpy` record where they ran) — and its *Gradients* tab lists every parameter by
its module path with its gradient norm.
"""),
    code("""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.body(x)
        h = h.detach()                  # BUG: "only for logging", but it cuts the graph
        return self.head(h)

torch.manual_seed(0)
net = Net()
loss = F.cross_entropy(net(xb), yb)
loss.backward()
"""),
    code("""
for name, p in net.named_parameters():
    print(f"{name:12s}", "NO GRADIENT" if p.grad is None else f"grad norm {p.grad.norm():.4f}")
"""),
    md("""
**Fix**: log a detached copy, keep the graph: `self.last_h = h.detach()` and go on with `h`.
A tensor's history is its `grad_fn`; `detach()` makes a new tensor without one, sharing the data.
"""),
    code("""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.body(x)
        self.last_h = h.detach()        # for logging only
        return self.head(h)

torch.manual_seed(0)
net = Net()
F.cross_entropy(net(xb), yb).backward()
print({name: p.grad is not None for name, p in net.named_parameters()})
"""),
    md("""
## Bug 2 · a forgotten `zero_grad()`

`backward()` **adds** into `.grad` (that is what lets two losses share parameters). A loop without
`opt.zero_grad()` steps with the sum of all gradients so far: the step grows every iteration.
The panel notes it — *model.0.weight.grad ... accumulated from 3 backward calls since zero_grad* —
a note, not an error, since accumulating over micro-batches is sometimes what you want.
"""),
    code("""
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
norms = []
for step in range(3):                                  # BUG: no opt.zero_grad()
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    norms.append(round(model[0].weight.grad.norm().item(), 4))
print("gradient norm seen by the optimizer:", norms)
"""),
    md("""
The norms grow 1x, 2x, 3x: each step used the sum of the gradients of every batch so far.
**Fix**: `opt.zero_grad()` at the start of every step (it sets `.grad` to `None`).
"""),
    code("""
norms = []
for step in range(3):
    opt.zero_grad()
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    norms.append(round(model[0].weight.grad.norm().item(), 4))
print(norms)
"""),
    md("""
## Bug 3 · NaN from the log of a softmax

A hand-written cross-entropy: `softmax`, then `log`, then pick the true class with a one-hot mask.
With confident logits, `softmax` **underflows to exactly 0** for the other classes in float32;
`log(0) = -inf`, and the one-hot mask multiplies it by 0: `0 * -inf = nan`. One NaN in the loss
and every gradient is NaN. The panel names the first operation that produced a NaN or an
infinity, with its cell and line — *loss has NaN: the first op that produced it is
LogBackward0 at cell [N] line 6* — no anomaly mode needed.
"""),
    code("""
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
logits = model(xb) * 200                        # a very confident model
probs = torch.softmax(logits, dim=1)
onehot = F.one_hot(yb, 10).float()
loss = -(onehot * torch.log(probs)).sum(dim=1).mean()
print("loss:", loss.item(), "| probabilities that are exactly 0:", (probs == 0).sum().item())
"""),
    md("""
**Fix**: never take the log of a softmax: `F.log_softmax` computes `x - logsumexp(x)`, which
cannot underflow, and `F.cross_entropy` is exactly `log_softmax` followed by `nll_loss`.
"""),
    code("""
loss = F.cross_entropy(logits, yb)
loss.backward()
print("loss:", round(loss.item(), 4), "| NaN in gradients:",
      any(torch.isnan(p.grad).any().item() for p in model.parameters()))
"""),
    md("""
## Bug 4 · `train()` and `eval()` mixed up

`Dropout` and `BatchNorm` behave differently in training and evaluation. Evaluating a model left
in training mode drops random units (the accuracy changes from one call to the next), and
training a model left in evaluation mode never drops them and never updates BatchNorm's running
statistics. `no_grad()` does **not** switch the mode: it only stops recording the graph. The
panel notes it: *model (Sequential) was evaluated under no_grad in train mode*. (The training
loop above gets one summary panel for its 60 steps, not 60 graphs: its *Training* tab draws the
loss each `backward()` started from, `F.cross_entropy` included, and the gradient norm.)
"""),
    code("""
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(60):
    opt.zero_grad()
    F.cross_entropy(model(X[:1400]), Y[:1400]).backward()
    opt.step()

with torch.no_grad():                                  # BUG: still in training mode
    accs = [(model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item() for _ in range(3)]
print("three evaluations of the same model:", [round(a, 3) for a in accs], model.training)
"""),
    code("""
model.eval()                                          # FIX: evaluation mode, then back
with torch.no_grad():
    accs = [(model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item() for _ in range(3)]
model.train()
print("three evaluations in eval mode:", [round(a, 3) for a in accs])
"""),
    md("""
## Bug 5 · a loss target that broadcasts

A regression head returns `(N, 1)`; the targets are `(N,)`. `mse_loss` broadcasts them to
`(N, N)` — every prediction compared with every target — and trains towards the mean. PyTorch
only warns, and the warning scrolls away in a training loop (here it is even caught); the panel
keeps it as a note on the cell, found from what `MseLossBackward0` saved: *a loss target
broadcasts against its input*.
"""),
    code("""
torch.manual_seed(0)
reg = nn.Linear(64, 1)
target = Y[:64].float()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loss = F.mse_loss(reg(xb), target)                 # BUG: (64, 1) against (64,)
print(caught[0].message if caught else "no warning")
"""),
    code("""
loss = F.mse_loss(reg(xb).squeeze(1), target)          # FIX: the same shape on both sides
print("shapes:", tuple(reg(xb).squeeze(1).shape), tuple(target.shape))
"""),
    md("""
## Bug 6 · a training history that keeps every graph alive

`history.append(loss)` keeps the loss **tensor**, and with it its `grad_fn` and every tensor the
graph saved for backward (activations, inputs) — if backward never ran on it, or ran with
`retain_graph=True`. Memory grows with every step. The panel names the container and the bytes
it holds: *history (list) keeps 20 graphs alive, 10.5 MiB*.
"""),
    code("""
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
history = []
before = torch.backend.memory_stats()["live_bytes"]
for step in range(20):
    loss = F.cross_entropy(model(X[:512]), Y[:512])
    history.append(loss)                               # BUG: keeps 20 graphs alive
held = torch.backend.memory_stats()["live_bytes"] - before
print(f"memory held by the history of {len(history)} losses: {held / 2**20:.1f} MiB")
"""),
    code("""
history = [h.item() for h in history]                  # FIX: keep the numbers, not the graphs
del loss
still = max(torch.backend.memory_stats()["live_bytes"] - before, 0)
print(f"after keeping only numbers: {still / 2**20:.1f} MiB")
"""),
    *exercises(
        "Bug 1 with `h = h.data` instead of `h.detach()`, and with `h = torch.tensor(h.numpy())`. "
        "Which parameters get gradients? What does the panel say?",
        "Accumulate gradients over 4 micro-batches of 16 on purpose, and step once. Write the loop "
        "so it is correct (where does `zero_grad()` go? do you scale the loss?).",
        "Write the entropy of the softmax, `-(p * log p).sum(1)`, without ever producing NaN.",
        "Add `nn.BatchNorm1d(64)` to the model of bug 4. What changes between `train()` and "
        "`eval()` in its buffers (`running_mean`)?",
        "Bug 6 with `history.append(loss.detach())`: how much memory is held now? Why?",
    ),
]

# --------------------------------------------------------------------------------------------
NB08 = [
    title(8, "Sequences: an LSTM, unrolled",
          "An LSTM reads each 8x8 digit one row at a time (8 steps of 8 pixels) and classifies it. "
          "The graph of one forward pass is the network *unrolled through time*: the same weights "
          "used at every step. Then why plain RNNs forget: gradients that vanish step by step, "
          "made visible, and why the LSTM's cell state lets them through; and `clip_grad_norm_` "
          "for gradients that explode."),
    code(SETUP),
    code("""
import numpy as np
import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from nbgrad import nn
import nbgrad.nn.functional as F
try:
    from tqdm.auto import tqdm
except ImportError:                        # optional: no progress bar without tqdm
    print("tqdm missing: skipped the progress bars")
    def tqdm(it, **kw):
        return it

d = load_digits()
seqs = torch.tensor((d.images / 16.0).astype(np.float32))   # (1797, 8, 8): 8 rows of 8 pixels
labels = torch.tensor(d.target.astype(np.int64))
perm = np.random.default_rng(0).permutation(len(seqs))
test, train = torch.tensor(perm[:360]), torch.tensor(perm[360:])
print("one sequence:", tuple(seqs[0].shape), "= (steps, features)")
"""),
    md("""
## 1. An LSTM reading rows

`nn.LSTM(input_size=8, hidden_size=64, batch_first=True)` takes `(N, L, 8)` — a batch of `N`
sequences of `L` steps — and returns the hidden state at every step, `(N, L, 64)`, and the final
`(h, c)`. We classify from the last step's hidden state. The parameters have PyTorch's names:
`weight_ih_l0` (input to the four gates), `weight_hh_l0` (hidden to the gates), and their biases.
"""),
    code("""
class RowReader(nn.Module):
    def __init__(self, cell="LSTM", hidden=64, inputs=8):
        super().__init__()
        self.rnn = getattr(nn, cell)(input_size=inputs, hidden_size=hidden, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        out, _ = self.rnn(x)               # (N, L, hidden)
        return self.head(out[:, -1])       # the last step sees the whole digit

torch.manual_seed(0)
model = RowReader()
print(model)
print([name for name, _ in model.named_parameters()])
"""),
    md("""
Three digits through the model, with the panel on. The graph is the LSTM **unrolled**: the same
`weight_hh_l0` feeds every step (follow its `AccumulateGrad`: one leaf, eight uses), and each
step's gates (`SigmoidBackward0`, `TanhBackward0`) save their outputs for backward.
"""),
    code("""
loss = F.cross_entropy(model(seqs[:3]), labels[:3])
"""),
    md("""
## 2. Training, with gradient clipping

`nn.utils.clip_grad_norm_(params, max_norm)` rescales all gradients together when their total
norm exceeds `max_norm`, and returns the norm it saw. Recurrent networks need it: one unlucky
batch can make the gradient explode (section 4).
"""),
    code("""
%nbgrad off
torch.manual_seed(0)
model = RowReader()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses, norms = [], []
for epoch in tqdm(range(8), desc="LSTM", unit="epoch"):
    for i in range(0, len(train), 64):
        idx = train[i:i + 64]
        opt.zero_grad()
        loss = F.cross_entropy(model(seqs[idx]), labels[idx])
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0).item())
        opt.step()
        losses.append(loss.item())
with torch.no_grad():
    acc = (model(seqs[test]).argmax(1) == labels[test]).float().mean().item()
print(f"LSTM test accuracy: {acc:.3f}")
fig, ax = plt.subplots(1, 2, figsize=(9, 3))
ax[0].plot(losses); ax[0].set_yscale("log"); ax[0].set_title("loss")
ax[1].plot(norms); ax[1].axhline(1.0, color="red", lw=0.8); ax[1].set_title("gradient norm (clipped at 1)")
plt.show()
%nbgrad on
"""),
    md("""
## 3. Vanishing gradients, made visible

Now read the digit **one pixel at a time**: 64 steps. How much does the loss depend on the pixel
seen at step `t`? That is the gradient of the loss with respect to the input at step `t`
(`x.grad[:, t]`, with `x.requires_grad_()`). Backward multiplies one Jacobian per step: for a plain
RNN, `tanh' * W_hh` each time, which shrinks the gradient geometrically — the first pixels get
almost nothing. The LSTM's cell state is updated by **addition** (`c = f * c + i * g`): its
gradient is multiplied only by the forget gate `f`, so it survives as long as `f` stays near 1.
At initialisation `f` is about `sigmoid(0) = 0.5`; a forget-gate bias of 1 or 3 (a common trick)
keeps it open.
"""),
    code("""
def grad_by_step(cell, forget_bias=None):
    torch.manual_seed(0)
    m = RowReader(cell, hidden=32, inputs=1)
    if forget_bias is not None:                   # gates are stacked as (input, forget, cell, output)
        with torch.no_grad():
            m.rnn.bias_ih_l0[32:64].fill_(forget_bias)
    x = seqs[train[:128]].reshape(128, 64, 1).clone().requires_grad_(True)
    F.cross_entropy(m(x), labels[train[:128]], reduction="sum").backward()
    return x.grad.abs().mean(dim=(0, 2)).numpy()

curves = {"RNN (tanh)": grad_by_step("RNN"), "LSTM": grad_by_step("LSTM"),
          "LSTM, forget bias 1": grad_by_step("LSTM", 1.0),
          "LSTM, forget bias 3": grad_by_step("LSTM", 3.0)}
for name, g in curves.items():
    print(f"{name:22s} |dloss/dx| at step 0: {g[0]:.1e}   at step 63: {g[-1]:.1e}")
plt.figure(figsize=(6, 3))
for name, g in curves.items():
    plt.semilogy(g, label=name)
plt.xlabel("step t (pixel)"); plt.ylabel("|d loss / d x_t|"); plt.legend(fontsize=8); plt.show()
"""),
    md("""
The plain RNN's gradient at the first pixel is about 13 orders of magnitude below the last one's:
whatever the first rows of the digit say, the RNN cannot learn to use them. The *Gradients* tab of
the panel shows the same from the parameters' side after a backward: per parameter, by module
path, the gradient norm.

## 4. Exploding gradients and `clip_grad_norm_`

The other way round: recurrent weights a little too large make the product of Jacobians
**grow**. One step with such a gradient throws the weights far away. `clip_grad_norm_` keeps the
direction and caps the length.
"""),
    code("""
def rnn_grad(scale):
    torch.manual_seed(0)
    m = RowReader("RNN", hidden=32, inputs=1)                  # pixel by pixel: 64 steps
    with torch.no_grad():
        m.rnn.weight_hh_l0.mul_(scale)
    F.cross_entropy(m(seqs[train[:64]].reshape(64, 64, 1)), labels[train[:64]]).backward()
    return m

print(f"gradient norm with the initial weights: "
      f"{nn.utils.clip_grad_norm_(rnn_grad(1.0).parameters(), float('inf')).item():.3f}")
m = rnn_grad(4.0)                                             # W_hh four times too large
before = nn.utils.clip_grad_norm_(m.parameters(), max_norm=1.0)
after = torch.sqrt(sum((p.grad ** 2).sum() for p in m.parameters()))
print(f"with W_hh x 4: gradient norm {before.item():.0f} -> after clipping {after.item():.3f}")
"""),
    *exercises(
        "Replace the LSTM of section 2 by `nn.GRU` and by `nn.RNN`. Which reaches the best "
        "accuracy in 8 epochs? Why?",
        "In section 3, train the plain RNN for a few steps pixel by pixel. Does the gradient at "
        "the first pixels grow?",
        "Make the LSTM bidirectional (`bidirectional=True`): what are the shapes of `out` and of "
        "the head's input now? Which parameters appear (names ending in `_reverse`)?",
        "Remove the clipping in section 2 and raise the learning rate to 0.05. Plot the "
        "gradient norms.",
    ),
]

# --------------------------------------------------------------------------------------------
NB09 = [
    title(9, "Attention, from scratch to a tiny GPT",
          "Scaled dot-product attention written by hand, the causal mask from `triu`, the in-place "
          "trap of attention code (a `masked_fill_` on what softmax saved) caught by the panel "
          "before backward, then `nn.MultiheadAttention` and a two-layer GPT trained to sort "
          "digits."),
    code(SETUP),
    code("""
import math
import numpy as np
from nbgrad import nn
import nbgrad.nn.functional as F
"""),
    md("""
## 1. Attention by hand

Each of `T` positions has a query, a key and a value (`(T, d)` each, made by three `Linear`
layers). Position `i` looks at position `j` with weight `softmax_j(q_i . k_j / sqrt(d))`, and its
output is the weighted sum of the values. A **causal** model (a language model) must not look at
later positions: the scores above the diagonal are set to `-inf` before the softmax, so their
weights are exactly 0. The mask is `triu(ones(T, T), diagonal=1)`: True above the diagonal.
"""),
    code("""
torch.manual_seed(0)
T, d = 5, 8
x = torch.randn(T, d)
to_q, to_k, to_v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
q, k, v = to_q(x), to_k(x), to_v(x)
scores = q @ k.T / math.sqrt(d)                        # (T, T)
future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
out = weights @ v                                      # (T, d)
print(weights.detach().numpy().round(2))
"""),
    md("""
Row `i` of the weights sums to 1 and is zero right of the diagonal. The panel's graph shows
`MaskedFillBackward0` feeding `SoftmaxBackward0`, which saves its **result** (softmax's
derivative is written with its output: `s * (g - (g * s).sum())`).

## 2. The in-place trap

A common variant masks *after* the softmax, in place, "to save memory". But the softmax saved
exactly that tensor for backward. Look at the panel **before** running the backward cell: the
saved result of `SoftmaxBackward0` is red — "saved v0, now v1", modified by `masked_fill_` in this
cell.
"""),
    code("""
weights = torch.softmax(scores, dim=-1)
weights.masked_fill_(future, 0.0)                      # BUG: modifies what softmax saved
out = weights @ v
"""),
    raises("out.sum().backward()"),
    md("""
**Fix**: mask the scores before the softmax, out of place (section 1). If you must mask the
weights, `weights = weights.masked_fill(future, 0.0)` (no underscore) makes a new tensor and
leaves the saved one alone — but the rows no longer sum to 1, so masking before is also the
correct attention.
"""),
    code("""
weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
out = weights @ v
out.sum().backward()
print("backward OK; to_q.weight.grad norm", round(to_q.weight.grad.norm().item(), 4))
"""),
    md("""
## 3. `nn.MultiheadAttention`

The same computation, split over `num_heads` heads of size `d / num_heads`, with the three
projections stacked in one `in_proj_weight` `(3d, d)` and an output projection `out_proj`. A
boolean `attn_mask` marks with True the positions that may **not** be attended — our `future`.
Copying our three `Linear` layers into it gives the same result, up to the output projection.
"""),
    code("""
mha = nn.MultiheadAttention(d, num_heads=1, batch_first=True)
with torch.no_grad():
    mha.in_proj_weight.copy_(torch.cat([to_q.weight, to_k.weight, to_v.weight]))
    mha.in_proj_bias.copy_(torch.cat([to_q.bias, to_k.bias, to_v.bias]))
    mha.out_proj.weight.copy_(torch.eye(d))
    mha.out_proj.bias.zero_()
y, w = mha(x[None], x[None], x[None], attn_mask=future)
print("same output:", torch.allclose(y[0], out, atol=1e-5),
      "| same weights:", torch.allclose(w[0], weights, atol=1e-5))
"""),
    md("""
## 4. A tiny GPT that sorts digits

Two transformer blocks (LayerNorm, causal multi-head attention, a GELU MLP, residual
connections), token and position embeddings. The task: read 6 digits and a separator, then write
the 6 digits sorted, one token at a time; the model only ever sees the positions before the one it
predicts (the causal mask). Trained with AdamW and `clip_grad_norm_`.
"""),
    code("""
L, V = 6, 11                     # 6 digits; tokens 0-9 and the separator 10
def batch(n, gen):
    x = torch.randint(0, 10, (n, L), generator=gen)
    y = torch.tensor(np.sort(x.numpy(), axis=1))
    seq = torch.cat([x, torch.full((n, 1), 10, dtype=torch.int64), y], dim=1)
    return seq[:, :-1], seq[:, 1:]   # predict every next token

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))

class TinyGPT(nn.Module):
    def __init__(self, d=32, heads=4, layers=2, context=2 * L):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln, self.out = nn.LayerNorm(d), nn.Linear(d, V)

    def forward(self, idx):
        n = idx.shape[1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(n))
        for block in self.blocks:
            x = block(x, mask)
        return self.out(self.ln(x))
"""),
    code("""
%nbgrad off
torch.manual_seed(0)
gen = torch.Generator().manual_seed(0)
gpt = TinyGPT()
opt = torch.optim.AdamW(gpt.parameters(), lr=3e-3)
for step in range(500):
    xb, yb = batch(64, gen)
    logits = gpt(xb)[:, L:]                     # only the sorted half is graded
    loss = F.cross_entropy(logits.reshape(-1, V), yb[:, L:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(gpt.parameters(), 1.0)
    opt.step()
gpt.eval()
with torch.no_grad():
    xb, yb = batch(500, torch.Generator().manual_seed(1))
    pred = gpt(xb)[:, L:].argmax(-1)
print(f"token accuracy {(pred == yb[:, L:]).float().mean().item():.3f}, "
      f"whole sequences sorted {(pred == yb[:, L:]).all(1).float().mean().item():.3f}")
print("input ", xb[0, :L].tolist(), "-> sorted", pred[0].tolist())
%nbgrad on
"""),
    *exercises(
        "In section 1, remove the mask. Which weights become non-zero? Why can a language model "
        "not be trained that way?",
        "Replace `weights.masked_fill_(future, 0.0)` by `weights = weights * ~future`. Does "
        "backward work? Is it correct attention?",
        "Use `num_heads=2` in section 3. Which rows of `in_proj_weight` belong to which head?",
        "Train the GPT with one layer, and with `d=16`. How low can you go and still sort?",
    ),
]

NOTEBOOKS = {
    "01_autograd_basics.ipynb": NB01,
    "02_inplace_errors.ipynb": NB02,
    "03_views_and_aliasing.ipynb": NB03,
    "04_memory.ipynb": NB04,
    "05_custom_function_gradcheck.ipynb": NB05,
    "06_visual_debugging.ipynb": NB06,
    "07_debugging_a_model.ipynb": NB07,
    "08_sequences.ipynb": NB08,
    "09_attention.ipynb": NB09,
}


def _with_builders_of_their_own():
    """The notebooks whose cells live in a builder module of their own (notebooks/_build_*.py)."""
    sys.path.insert(0, str(HERE))
    from _build_step import nb11
    from _build_torch import nb10

    return {"10_debugging_pytorch.ipynb": nb10(md, code, raises, title, exercises),
            "11_backward_step_by_step.ipynb": nb11(md, code, raises, title, exercises)}


NOTEBOOKS.update(_with_builders_of_their_own())


def build(out_dir: Path = HERE) -> list[Path]:
    written = []
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                     "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        for i, c in enumerate(nb.cells):  # stable ids: a rebuild leaves git diffs clean
            c["id"] = f"{name[:2]}-{i:02d}"
        nbformat.validate(nb)
        path = out_dir / name
        nbformat.write(nb, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(p)
