"""Differential test of whole training programs against torch (tests/_nn_programs.py): random
small models from the nn layers with torch's weights copied in, every loss, backward, gradient
clipping, a few steps of every optimizer and a scheduler; compared: the outputs, the loss, every
gradient, the clipped norm, the learning rate and the final state dict (parameters and buffers).

Each value's tolerance is torch's own rounding noise on that program, measured by running torch
twice more with inputs and weights moved by 4 ulps: 10 times the larger distance, plus a floor of
1e-10 relative in float64 (16 ulps in float32, where one rounding of a reduction order already
moves a scalar by an ulp that a jittered run may happen not to show). A real difference is orders
of magnitude above it (a learning rate 1e-4 off fails every program). In float32 only the first
forward and backward are compared: an optimizer step then turns a gradient that is 0 in one
library and 1e-9 in the other (a ReLU unit on its boundary) into a full step of the
learning rate (Adam divides by sqrt(v)), a rounding difference no jitter of torch's reproduces;
the float64 programs compare the whole trajectory.

NBGRAD_NN_DIFF=N draws N programs (default 36: six of each model kind, < 30 s);
`python tests/test_nn_differential.py [N]` prints how many agree and the first differences.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import torch

import nbgrad

sys.path.insert(0, os.path.dirname(__file__))
import _nn_programs as P  # noqa: E402

COUNT = int(os.environ.get("NBGRAD_NN_DIFF", "36"))
JITTER = 4.0


def differences(seed):
    """(cfg, [(name, |nbgrad - torch|, tolerance)] of the values that differ beyond tolerance)."""
    cfg = P.draw(seed)
    model, _ = P.build(torch, cfg)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    _, want = P.run(torch, cfg, state)
    noise = [P.run(torch, cfg, state, jitter=JITTER, salt=k)[1] for k in range(2)]
    _, got = P.run(nbgrad, cfg, state)
    floor = 1e-10 if cfg["dtype"] == "float64" else 16 * float(np.finfo(np.float32).eps)
    bad = []
    assert sorted(got) == sorted(want), set(got) ^ set(want)
    for k, w in want.items():
        if cfg["dtype"] == "float32" and not k.startswith("step0."):
            continue  # see the module doc: float32 compares the first forward and backward
        g = got[k]
        if g.shape != w.shape:
            bad.append((k, f"shape {g.shape} vs {w.shape}", 0.0))
            continue
        if w.size == 0:
            continue
        tol = floor * max(1.0, float(np.abs(w).max())) + 10 * max(
            float(np.abs(n[k] - w).max()) for n in noise)
        err = float(np.abs(g - w).max())
        if not err <= tol:
            bad.append((k, err, tol))
    return cfg, bad


@pytest.mark.parametrize("seed", range(COUNT))
def test_training_program_matches_torch(seed):
    cfg, bad = differences(seed)
    assert not bad, f"{cfg}\n" + "\n".join(f"  {k}: {e} > {t}" for k, e, t in bad[:8])


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else COUNT
    agree = 0
    for s in range(n):
        try:
            cfg, bad = differences(s)
        except Exception as ex:  # noqa: BLE001 (a crash is a difference too)
            cfg, bad = P.draw(s), [("exception", repr(ex)[:200], 0)]
        agree += not bad
        if bad:
            print(s, cfg)
            for k, e, t in bad[:4]:
                print("   ", k, e, t)
    print(f"{n} programs, {agree} agree with torch")
