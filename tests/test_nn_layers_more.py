"""The layers added for issue 10 against torch in float64: functional values and gradients
(tests/test_nn_functional_more.py's runner), then the modules' reprs, parameters, state_dict
keys and values/grads (tests/test_nn_layers.py's runner)."""

import numpy as np
import pytest
import torch

import nbgrad
from test_nn_functional_more import rnd, run
from test_nn_layers import run_both

FUNCTIONAL = [
    ("conv1d", lambda F, x, w, b: F.conv1d(x, w, b), [rnd(2, 4, 9), rnd(6, 4, 3, seed=1),
                                                      rnd(6, seed=2)], (1, 1, 1)),
    ("conv1d_strided", lambda F, x, w: F.conv1d(x, w, None, 2, 1, 2, 2), [rnd(2, 4, 11),
                                                                       rnd(6, 2, 3, seed=1)],
     (1, 1)),
    ("conv1d_groups_same", lambda F, x, w: F.conv1d(x, w, padding="same", groups=2),
     [rnd(2, 4, 9), rnd(6, 2, 4, seed=1)], (1, 1)),
    ("conv_transpose2d", lambda F, x, w, b: F.conv_transpose2d(x, w, b),
     [rnd(2, 3, 4, 5), rnd(3, 4, 3, 3, seed=1), rnd(4, seed=2)], (1, 1, 1)),
    ("conv_transpose2d_stride", lambda F, x, w: F.conv_transpose2d(x, w, None, 2, 1, 1),
     [rnd(2, 3, 4, 5), rnd(3, 2, 3, 3, seed=1)], (1, 1)),
    ("conv_transpose2d_all", lambda F, x, w, b: F.conv_transpose2d(x, w, b, (2, 3), (2, 0),
                                                                   (1, 0), 2, (2, 1)),
     [rnd(2, 4, 5, 4), rnd(4, 3, 3, 2, seed=1), rnd(6, seed=2)], (1, 1, 1)),
    ("conv_transpose1d", lambda F, x, w: F.conv_transpose1d(x, w, None, 3, 1, 2),
     [rnd(2, 3, 6), rnd(3, 2, 4, seed=1)], (1, 1)),
    ("max_pool1d", lambda F, x: F.max_pool1d(x, 3, 2, 1), [rnd(2, 3, 10)], (1,)),
    ("avg_pool1d", lambda F, x: F.avg_pool1d(x, 4, 2, 2, count_include_pad=False),
     [rnd(2, 3, 10)], (1,)),
    ("adaptive_avg_pool2d", lambda F, x: F.adaptive_avg_pool2d(x, (3, 5)), [rnd(2, 3, 7, 9)],
     (1,)),
    ("adaptive_avg_pool2d_1", lambda F, x: F.adaptive_avg_pool2d(x, 1), [rnd(2, 3, 7, 9)], (1,)),
    ("adaptive_avg_pool2d_none", lambda F, x: F.adaptive_avg_pool2d(x, (None, 4)),
     [rnd(3, 7, 9)], (1,)),
    ("adaptive_avg_pool1d", lambda F, x: F.adaptive_avg_pool1d(x, 4), [rnd(2, 3, 10)], (1,)),
    ("adaptive_max_pool2d", lambda F, x: F.adaptive_max_pool2d(x, (3, 4)), [rnd(2, 3, 7, 9)],
     (1,)),
    ("adaptive_max_pool2d_div", lambda F, x: F.adaptive_max_pool2d(x, 2), [rnd(2, 3, 6, 8)],
     (1,)),
    ("adaptive_max_pool1d", lambda F, x: F.adaptive_max_pool1d(x, 3), [rnd(2, 3, 10)], (1,)),
    ("nearest_size", lambda F, x: F.interpolate(x, size=(5, 7)), [rnd(2, 3, 3, 4)], (1,)),
    ("nearest_scale", lambda F, x: F.interpolate(x, scale_factor=2), [rnd(2, 3, 3, 4)], (1,)),
    ("nearest_down", lambda F, x: F.interpolate(x, scale_factor=0.5), [rnd(2, 3, 7, 6)], (1,)),
    ("nearest_exact", lambda F, x: F.interpolate(x, size=(5, 3), mode="nearest-exact"),
     [rnd(2, 3, 3, 4)], (1,)),
    ("nearest_1d", lambda F, x: F.interpolate(x, size=7), [rnd(2, 3, 4)], (1,)),
    ("bilinear", lambda F, x: F.interpolate(x, size=(5, 7), mode="bilinear"), [rnd(2, 3, 3, 4)],
     (1,)),
    ("bilinear_scale", lambda F, x: F.interpolate(x, scale_factor=1.5, mode="bilinear"),
     [rnd(2, 3, 4, 4)], (1,)),
    ("bilinear_corners", lambda F, x: F.interpolate(x, size=(6, 2), mode="bilinear",
                                                    align_corners=True), [rnd(2, 3, 3, 4)], (1,)),
    ("linear", lambda F, x: F.interpolate(x, scale_factor=2.5, mode="linear"), [rnd(2, 3, 4)],
     (1,)),
    ("pixel_shuffle", lambda F, x: F.pixel_shuffle(x, 2), [rnd(2, 8, 3, 4)], (1,)),
    ("pixel_unshuffle", lambda F, x: F.pixel_unshuffle(x, 2), [rnd(2, 2, 4, 6)], (1,)),
    ("fold", lambda F, x: F.fold(x, (5, 6), (2, 3)), [rnd(2, 12, 16)], (1,)),
    ("fold_all", lambda F, x: F.fold(x, (6, 5), 3, dilation=(1, 2), padding=1, stride=2),
     [rnd(2, 18, 6)], (1,)),
    ("unfold_fold", lambda F, x: F.fold(F.unfold(x, 2, stride=1), (4, 5), 2), [rnd(2, 3, 4, 5)],
     (1,)),
    ("group_norm", lambda F, x, w, b: F.group_norm(x, 2, w, b), [rnd(3, 4, 5, 2) * 2 + 1,
                                                                 rnd(4, seed=1), rnd(4, seed=2)],
     (1, 1, 1)),
    ("instance_norm", lambda F, x: F.instance_norm(x), [rnd(3, 4, 5, 2) * 2 + 1], (1,)),
    ("instance_norm_affine", lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b),
     [rnd(3, 4, 6) * 2 + 1, rnd(4, seed=1), rnd(4, seed=2)], (1, 1, 1)),
    ("bilinear_layer", lambda F, a, b, w, c: F.bilinear(a, b, w, c),
     [rnd(5, 3), rnd(5, 4, seed=1), rnd(2, 3, 4, seed=2), rnd(2, seed=3)], (1, 1, 1, 1)),
    ("pad_reflect", lambda F, x: F.pad(x, (2, 1, 1, 2), mode="reflect"), [rnd(2, 3, 4, 5)], (1,)),
    ("pad_replicate", lambda F, x: F.pad(x, (3, 1, 0, 2), mode="replicate"), [rnd(2, 3, 4, 5)],
     (1,)),
    ("pad_circular", lambda F, x: F.pad(x, (2, 1), mode="circular"), [rnd(2, 3, 5)], (1,)),
    ("embedding_bag_mean", lambda F, i, w: F.embedding_bag(i, w), [np.array([[1, 2, 2], [0, 4, 3]]),
                                                                   rnd(5, 3)], (0, 1)),
    ("embedding_bag_offsets_sum", lambda F, i, w, o: F.embedding_bag(i, w, o, mode="sum"),
     [np.array([1, 2, 4, 4, 3, 0]), rnd(5, 3), np.array([0, 2, 2, 5])], (0, 1)),
    ("embedding_bag_max", lambda F, i, w, o: F.embedding_bag(i, w, o, mode="max"),
     [np.array([1, 2, 4, 4, 3, 0]), rnd(5, 3), np.array([0, 2, 3])], (0, 1)),
    ("embedding_bag_psw", lambda F, i, w, o, p: F.embedding_bag(i, w, o, mode="sum",
                                                                per_sample_weights=p),
     [np.array([1, 2, 4, 4]), rnd(5, 3), np.array([0, 1]), rnd(4, seed=3)], (0, 1, 0, 1)),
    ("embedding_bag_padding", lambda F, i, w: F.embedding_bag(i, w, padding_idx=2),
     [np.array([[1, 2, 2], [2, 4, 3]]), rnd(5, 3)], (0, 1)),
]


@pytest.mark.parametrize("name,fn,inputs,grad", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_layer_like_torch(name, fn, inputs, grad):
    run(fn, inputs, grad=tuple(bool(g) for g in grad))
