"""Recurrent layers: RNN, LSTM, GRU and their cells (mirrors ``torch.nn.modules.rnn``).

A float32 LSTM layer (no projection, unpacked input) is one ``MkldnnRnnLayerBackward0`` node per
layer and direction, as torch's oneDNN path records it (nbgrad's own kernel: ops/kernels.py,
row ``mkldnn_rnn_layer``). Every other layer, and that one with
``nbgrad.backends.mkldnn.enabled = False`` (torch: ``torch.backends.mkldnn.enabled = False``), is
composed of the core's differentiable ops, one time step at a time, in the order torch's plain
CPU kernels record them, so the graph a notebook draws is torch's, unrolled: the
input projection of the whole sequence as one ``AddmmBackward0`` -> ``ViewBackward0`` ->
``UnbindBackward0``; per step an ``AddmmBackward0`` for the hidden projection, the gates
(``SigmoidBackward0``, ``TanhBackward0``, ``MulBackward0``, ``AddBackward0``), and the outputs
joined by ``StackBackward0`` (``CatBackward0`` across directions). Gates are split with
``unsafe_chunk`` (``UnsafeSplitBackward0``), as torch's cells.

Parameter names, shapes, order and initialisation U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))
are torch's, so ``load_state_dict(torch_model.state_dict())`` works both ways.
"""

import math
import numbers
import warnings

from nbgrad import creation
from nbgrad import dtypes
from nbgrad import functions
from nbgrad.autograd.apply import apply
from nbgrad.autograd.grad_mode import GENERAL_PATH
from nbgrad.autograd.grad_mode import STATE as _GRAD
from nbgrad.backends import mkldnn
from nbgrad.ops import ROWS
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module
from .utils import _factory

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


# ---------------------------------------------------------------------------- one step
# gi: input projection (N, G) (with bias_ih); gh: hidden projection (N, G) (with bias_hh)
def _lstm_gates(gates, c):
    i, f, g, o = gates.unsafe_chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = f * c + i * g
    return o * c.tanh(), c


def _gru_gates(gi, gh, h):
    i_r, i_z, i_n = gi.unsafe_chunk(3, 1)
    h_r, h_z, h_n = gh.unsafe_chunk(3, 1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + h_n * r).tanh()
    return (h - n) * z + n


def _step(mode, gi, gh, h, c):
    """One time step from the two projections: returns the new (h, c) (c is None but for LSTM)."""
    if mode == "LSTM":
        return _lstm_gates(gh + gi, c)
    if mode == "GRU":
        return _gru_gates(gi, gh, h), None
    pre = gh + gi
    return (pre.tanh() if mode == "RNN_TANH" else pre.relu()), None


def _shape(t):
    return tuple(t.shape)


_SCALAR = {"float64": "Double", "float32": "Float", "float16": "Half"}


def _check_state_dtype(name, state, input):
    """torch fails in its first matmul (``mat1 and mat2 must have the same dtype``) when the
    hidden state's dtype is not the input's; say so, naming both."""
    if state.dtype != input.dtype:
        a, b = (_SCALAR.get(str(t.dtype).rsplit(".", 1)[-1], str(t.dtype)) for t in (state, input))
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {a} and {b} "
                           f"({name}: the hidden state is {state.dtype}, the input "
                           f"{input.dtype})")


# ---------------------------------------------------------------------------- layers
class RNNBase(Module):
    """The multi-layer recurrent layer shared by :class:`RNN`, :class:`LSTM` and :class:`GRU`
    (mirrors ``torch.nn.RNNBase``).

    Args:
        mode (str): "LSTM", "GRU", "RNN_TANH" or "RNN_RELU".
        input_size (int), hidden_size (int): features of x and h.
        num_layers (int): stacked layers, each reading the previous one's output.
        bias (bool): bias_ih / bias_hh.
        batch_first (bool): input and output (N, L, *) instead of (L, N, *).
        dropout (float): dropout on each layer's output but the last, in training.
        bidirectional (bool): a second direction reading the sequence backwards; outputs of
            both are concatenated (2 * hidden_size features).
        proj_size (int): LSTM only: h is projected to proj_size features by weight_hr.

    Attributes:
        weight_ih_l{k}{_reverse}: (G * hidden_size, input_size) for k = 0, else
            (G * hidden_size, D * H_out); G = 4 (LSTM: gates i, f, g, o), 3 (GRU: r, z, n), 1.
        weight_hh_l{k}{_reverse}: (G * hidden_size, H_out); bias_ih/bias_hh: (G * hidden_size,).
        weight_hr_l{k}{_reverse}: (proj_size, hidden_size) when proj_size > 0.
        All drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

    Raises:
        ValueError / TypeError: bad constructor arguments, with torch's texts.
    """

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}")
        for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                  ("input_size", input_size, int),
                                  ("hidden_size", hidden_size, int)):
            if not isinstance(value, kind):
                raise TypeError(f"{name} should be of type {kind.__name__}, got: "
                                f"{type(value).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        kw = _factory(device, dtype)
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                names = []
                for base, shape in shapes:
                    setattr(self, base + suffix, Parameter(creation.empty(shape, **kw)))
                    names.append(base + suffix)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """Does nothing: kept so code written for cuDNN's packed weights runs (torch's no-op on
        CPU)."""

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    def _weights(self, k):
        """(w_ih, w_hh, b_ih, b_hh, w_hr) of layer-direction ``k`` (None where absent)."""
        p = self._parameters
        names = self._all_weights[k]
        b_ih, b_hh = (p[names[2]], p[names[3]]) if self.bias else (None, None)
        return p[names[0]], p[names[1]], b_ih, b_hh, p[names[-1]] if self.proj_size else None

    @property
    def all_weights(self):
        """The parameters per layer and direction, as lists (torch's ``all_weights``)."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ------------------------------------------------------------------ checks
    def _layer_name(self):
        return type(self).__name__

    def _expected_input(self, batched, packed):
        i = self.input_size
        if packed:
            return f"(sum of lengths, {i})"
        if not batched:
            return f"(L, {i})"
        return f"(N, L, {i})" if self.batch_first else f"(L, N, {i})"

    def _check_input(self, input, batched, packed):
        w = self._parameters[self._flat_weights_names[0]]
        if input.dtype != w.dtype:
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). "
                f"Convert input: input.to({w.dtype}), or convert model: model.to({input.dtype})")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                f"{input.shape[-1]} ({self._layer_name()}: expected input of size "
                f"{self._expected_input(batched, packed)}, got {_shape(input)})")

    def _hidden_sizes(self, batch):
        d = (2 if self.bidirectional else 1) * self.num_layers
        h = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (d, batch, h), (d, batch, self.hidden_size)

    def _check_hidden(self, hx, expected, which, batched):
        got = _shape(hx) if batched else _shape(hx)[:1] + _shape(hx)[2:]
        if _shape(hx) != expected:
            exp = expected if batched else expected[:1] + expected[2:]
            raise RuntimeError(
                f"Expected hidden{which} size {exp}, got {list(got)} ({self._layer_name()}: "
                f"hidden state (num_layers * num_directions, N, H) = {exp})")

    def _prepare(self, input, hx):
        """Validate; return (x, batch_sizes, hx list, unbatched, sorted/unsorted indices)."""
        name = self._layer_name()
        is_lstm = self.mode == "LSTM"
        if isinstance(input, PackedSequence):
            x, batch_sizes = input.data, [int(b) for b in input.batch_sizes._data]
            sorted_indices, unsorted_indices = input.sorted_indices, input.unsorted_indices
            if x.ndim != 2:
                raise RuntimeError(f"input must have 2 dimensions, got {x.ndim}")
            self._check_input(x, True, True)
            batch, batched = batch_sizes[0], True
        else:
            x, batch_sizes, sorted_indices, unsorted_indices = input, None, None, None
            if x.ndim not in (2, 3):
                raise ValueError(
                    f"{name}: Expected input to be 2D or 3D, got {x.ndim}D "
                    f"{'tensor ' if self.mode.startswith('RNN') else ''}instead (expected "
                    f"input of size {self._expected_input(True, False)} or "
                    f"{self._expected_input(False, False)}, got {_shape(x)})")
            batched = x.ndim == 3
            self._check_input(x, batched, False)
            if not batched:
                x = x.unsqueeze(1)
            elif self.batch_first:
                x = x.transpose(0, 1)
            batch = x.shape[1]
        if hx is None:  # zeros, made by the caller (`_zero_states`) where it needs them
            return x, batch_sizes, None, not batched, unsorted_indices
        h_size, c_size = self._hidden_sizes(batch)
        states = list(hx) if is_lstm else [hx]
        want = 3 if batched else 2
        if any(s.ndim != want for s in states):
            dims = ", ".join(f"{s.ndim}-D" for s in states)
            kind = "batched 3-D" if batched else "unbatched 2-D"
            what = "hx and cx" if is_lstm else "hx"
            raise RuntimeError(f"For {kind} input, {what} should also be {want}-D but got "
                               + (f"({dims}) tensors" if is_lstm else f"{dims} tensor"))
        if not batched:
            states = [s.unsqueeze(1) for s in states]
        for k, (s, size) in enumerate(zip(states, (h_size, c_size))):
            self._check_hidden(s, size, f"[{k}]" if is_lstm else "", batched)
            _check_state_dtype(name, s, x)
        if sorted_indices is not None:
            states = [s.index_select(1, sorted_indices) for s in states]
        return x, batch_sizes, states, not batched, unsorted_indices

    def _zero_states(self, x, batch):
        """The initial states when none is given: zeros (num_layers * D, N, H_out) (LSTM: and
        (num_layers * D, N, hidden_size)), in x's dtype and on its device."""
        kw = {"dtype": x.dtype, "device": x.device}
        return [creation.zeros(size, **kw) for size in
                self._hidden_sizes(batch)[:2 if self.mode == "LSTM" else 1]]

    # ------------------------------------------------------------------ forward
    def _direction(self, gis, h, c, w_hh, b_hh, w_hr, batch_sizes, reverse):
        """Run one direction of one layer over the step projections ``gis``.

        With packed input, step t has ``batch_sizes[t]`` rows (longest sequences first): going
        forward, finished rows leave the state and are kept aside; going backward, rows join
        from the initial state when their sequence starts.

        Returns:
            (outputs per step in time order, final h (N, H_out), final c or None)
        """
        mode = self.mode
        steps = range(len(gis) - 1, -1, -1) if reverse else range(len(gis))
        outs = [None] * len(gis)
        h0, c0 = h, c
        done_h, done_c = [], []
        if batch_sizes is not None and reverse:
            h, c = h0[:batch_sizes[-1]], None if c0 is None else c0[:batch_sizes[-1]]
        for t in steps:
            if batch_sizes is not None:
                bs, now = batch_sizes[t], h.shape[0]
                if bs < now:  # forward: sequences ended
                    done_h.append(h[bs:])
                    h = h[:bs]
                    if c is not None:
                        done_c.append(c[bs:])
                        c = c[:bs]
                elif bs > now:  # backward: sequences start
                    h = functions.cat([h, h0[now:bs]], 0)
                    if c is not None:
                        c = functions.cat([c, c0[now:bs]], 0)
            h, c = _step(mode, gis[t], F.linear(h, w_hh, b_hh), h, c)
            if w_hr is not None:
                h = F.linear(h, w_hr)
            outs[t] = h
        if done_h:
            h = functions.cat([h] + done_h[::-1], 0)
            if c is not None:
                c = functions.cat([c] + done_c[::-1], 0)
        return outs, h, c

    def _project(self, x, w_ih, b_ih, batch_sizes):
        """The input projection of every step at once: a list of (N_t, G) tensors."""
        if batch_sizes is not None:  # one slice per step, as torch (SliceBackward0)
            proj, start, out = F.linear(x, w_ih, b_ih), 0, []
            for bs in batch_sizes:
                out.append(proj[start:start + bs])
                start += bs
            return out
        return F.linear(x, w_ih, b_ih).unbind(0)  # torch's linear: (L, N, G), then per step

    def forward(self, input, hx=None):
        """Run the stacked layers over a sequence.

        Args:
            input (Tensor | PackedSequence): (L, N, input_size), (N, L, input_size) with
                ``batch_first``, unbatched (L, input_size), or a PackedSequence.
            hx: initial hidden state (num_layers * D, N, H_out) (unbatched: without N), zeros
                if None; LSTM: a tuple (h_0, c_0), c_0 (num_layers * D, N, hidden_size).

        Returns:
            (output, h_n) — LSTM: (output, (h_n, c_n)). output: (L, N, D * H_out) (or batch
            first, unbatched, or a PackedSequence like the input); h_n: the last step's hidden
            state of every layer and direction, (num_layers * D, N, H_out).

        Raises:
            ValueError: input not 2-D/3-D, or of another dtype than the weights;
            RuntimeError: wrong feature or hidden sizes, naming expected and received shapes.
        """
        x, batch_sizes, states, unbatched, unsorted = self._prepare(input, hx)
        is_lstm = self.mode == "LSTM"
        num_directions = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        fused = (is_lstm and mkldnn.enabled and batch_sizes is None and not self.proj_size
                 and x.dtype == dtypes.float32)
        if states is None and not (fused and not GENERAL_PATH):
            states = self._zero_states(x, x.shape[1] if batch_sizes is None else batch_sizes[0])
        if fused:  # torch's oneDNN path: one node per layer and direction, states by select
            if GENERAL_PATH or _GRAD.enabled and (x._requires_grad or any(
                    p._requires_grad for p in self._parameters.values())):
                x = x.contiguous()  # a transposed (batch-first) input is copied: CloneBackward0
            # (else nothing is recorded: the kernel reads a batch-first view as it copies it)
            h0 = [states[0][k] for k in range(len(states[0]))] if hx is not None else None
            c0 = [states[1][k] for k in range(len(states[1]))] if hx is not None else None
        else:
            h0 = states[0].unbind(0)
            c0 = states[1].unbind(0) if is_lstm else None
        for layer in range(self.num_layers):
            outs = []
            for direction in range(num_directions):
                k = layer * num_directions + direction
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(k)
                if fused:
                    zero = None
                    if hx is None:  # the zero state, one (N, H) tensor for both inputs
                        zero = creation.zeros(x.shape[1], self.hidden_size, dtype=x.dtype,
                                              device=x.device) if states is None \
                            else states[0][0].detach()
                    inputs = (x, w_ih, w_hh, b_ih, b_hh, zero if h0 is None else h0[k],
                              zero if c0 is None else c0[k])
                    # keep: the kernel keeps its steps' activations, when apply records the
                    # node (else it runs in two steps' buffers; NBGRAD_GENERAL_PATH=1: always)
                    keep = GENERAL_PATH or _GRAD.enabled and any(
                        t is not None and t._requires_grad for t in inputs)
                    out, h, c = apply(ROWS["mkldnn_rnn_layer"], inputs, (direction == 1, keep))
                    outs.append(out)
                    h_n.append(h)
                    c_n.append(c)
                    continue
                gis = self._project(x, w_ih, b_ih, batch_sizes)
                out, h, c = self._direction(gis, h0[k], c0[k] if is_lstm else None, w_hh, b_hh,
                                            w_hr, batch_sizes, direction == 1)
                outs.append(functions.stack(out, 0) if batch_sizes is None
                            else functions.cat(out, 0))
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if num_directions == 1 else functions.cat(outs, outs[0].ndim - 1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        hidden = [functions.stack(h_n, 0)] + ([functions.stack(c_n, 0)] if is_lstm else [])
        if batch_sizes is not None:
            output = PackedSequence(x, input.batch_sizes, input.sorted_indices, unsorted)
            if unsorted is not None:
                hidden = [s.index_select(1, unsorted) for s in hidden]
        elif unbatched:
            output, hidden = x.squeeze(1), [s.squeeze(1) for s in hidden]
        else:
            output = x.transpose(0, 1) if self.batch_first else x
        return output, (tuple(hidden) if is_lstm else hidden[0])


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (mirrors
    ``torch.nn.RNN``; ``nonlinearity="relu"`` for ReLU).

    Args: input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
    batch_first=False, dropout=0.0, bidirectional=False (see :class:`RNNBase`).
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(mode, *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory (mirrors ``torch.nn.LSTM``).

    Per step, with gates split from ``x W_ih^T + b_ih + h W_hh^T + b_hh`` in torch's order
    (input, forget, cell, output): ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``,
    ``h' = sigmoid(o) * tanh(c')`` (then ``h' W_hr^T`` with ``proj_size``).

    Args: input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0 (see :class:`RNNBase`).

    Returns (forward): ``output, (h_n, c_n)``.
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit (mirrors ``torch.nn.GRU``).

    Per step: ``r = sigmoid(i_r + h_r)``, ``z = sigmoid(i_z + h_z)``,
    ``n = tanh(i_n + r * h_n)``, ``h' = (1 - z) * n + z * h`` (computed as torch does,
    ``(h - n) * z + n``).

    Args: input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False (see :class:`RNNBase`).
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


# ---------------------------------------------------------------------------- cells
class RNNCellBase(Module):
    """One step of a recurrent layer (mirrors ``torch.nn.RNNCellBase``).

    Attributes:
        weight_ih: (G * hidden_size, input_size); weight_hh: (G * hidden_size, hidden_size);
        bias_ih, bias_hh: (G * hidden_size,); all U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
    """

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        kw = _factory(device, dtype)
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(creation.empty((num_chunks * hidden_size, input_size), **kw))
        self.weight_hh = Parameter(creation.empty((num_chunks * hidden_size, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(creation.empty((num_chunks * hidden_size,), **kw))
            self.bias_hh = Parameter(creation.empty((num_chunks * hidden_size,), **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def _check(self, input, states):
        """Validate input (N, input_size) / (input_size,) and states; return them batched."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        for k, s in enumerate(states):
            if s is not None and s.ndim not in (1, 2):
                what = f"hx[{k}]" if len(states) > 1 else "hidden"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {s.ndim}D instead")
        batched = input.ndim == 2
        if input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input has inconsistent input_size: got {input.shape[-1]} expected "
                f"{self.input_size} ({name}: expected input of size "
                f"{'(N, ' if batched else '('}{self.input_size}), got {_shape(input)})")
        if not batched:
            input = input.unsqueeze(0)
            states = [None if s is None else s.unsqueeze(0) for s in states]
        n = input.shape[0]
        out = []
        for k, s in enumerate(states):
            if s is None:
                s = creation.zeros((n, self.hidden_size), dtype=input.dtype, device=input.device)
            elif s.shape[0] != n:
                raise RuntimeError(f"Input batch size {n} doesn't match hidden{k} batch size "
                                   f"{s.shape[0]} ({name}: expected hidden ({n}, "
                                   f"{self.hidden_size}), got {_shape(s)})")
            elif s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {s.shape[1]}, "
                                   f"expected {self.hidden_size} ({name}: expected hidden "
                                   f"({n}, {self.hidden_size}), got {_shape(s)})")
            else:
                _check_state_dtype(name, s, input)
            out.append(s)
        return input, out, batched

    def _projections(self, input, h):
        p = self._parameters
        return (F.linear(input, p["weight_ih"], p["bias_ih"]),
                F.linear(h, p["weight_hh"], p["bias_hh"]))


class RNNCell(RNNCellBase):
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (mirrors ``torch.nn.RNNCell``).

    Shape: input (N, input_size) or (input_size,); hx (N, hidden_size), zeros if None ->
    h' (N, hidden_size).
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        x, (h,), batched = self._check(input, [hx])
        gi, gh = self._projections(x, h)
        out = _step("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", gi, gh, h, None)[0]
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step (mirrors ``torch.nn.LSTMCell``; gates as :class:`LSTM`).

    Shape: input (N, input_size) or (input_size,); hx a tuple (h, c), each (N, hidden_size),
    zeros if None -> (h', c').
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        x, (h, c), batched = self._check(input, [None, None] if hx is None else list(hx))
        gi, gh = self._projections(x, h)
        h, c = _step("LSTM", gi, gh, h, c)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (mirrors ``torch.nn.GRUCell``; gates as :class:`GRU`).

    Shape: input (N, input_size) or (input_size,); hx (N, hidden_size), zeros if None.
    """

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._check(input, [hx])
        gi, gh = self._projections(x, h)
        out = _step("GRU", gi, gh, h, None)[0]
        return out if batched else out.squeeze(0)
