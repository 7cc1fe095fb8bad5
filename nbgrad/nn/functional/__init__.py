"""``nbgrad.nn.functional``: layers and losses composed of core ops (mirrors torch.nn.functional).

Nothing here carries its own derivative: every function is built from the core's differentiable
ops (``addmm``, ``log_softmax``, ``gather``, ``as_strided``, ...), so autograd, the version
checks and the notebook's graph see ordinary nodes. Data-dependent checks (target ranges) read the
backing numpy array directly, which records nothing.

One file per kind of layer, as torch.nn.functional's documentation groups them: ``linear``,
``activation``, ``conv`` (conv2d itself is torch.conv2d), ``pooling`` (max_pool2d is
torch.max_pool2d), ``volumes`` (3-D layers), ``upsampling`` (interpolate, lp_pool, max_unpool),
``normalization``, ``sparse`` (embeddings), ``loss`` (``ctc``: the CTC loss), ``attention``; ``common`` holds what they
share.
"""
from nbgrad.functions.nn import conv2d, max_pool2d
from .linear import bilinear, linear
from .activation import (celu, dropout, dropout1d, dropout2d, elu, gelu, glu, hardshrink,
                         hardsigmoid, hardswish, hardtanh, leaky_relu, log_softmax, logsigmoid,
                         mish, prelu, relu, relu6, relu_, selu, sigmoid, silu, softmax, softmin,
                         softplus, softshrink, softsign, tanh, tanhshrink, threshold)
from .conv import (conv1d, conv_transpose1d, conv_transpose2d, flatten, fold, pad, pixel_shuffle,
                   pixel_unshuffle, unfold)
from .pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,
                      adaptive_max_pool2d, avg_pool1d, avg_pool2d, max_pool1d)
from .volumes import adaptive_avg_pool3d, avg_pool3d, conv3d, max_pool3d
from .ctc import ctc_loss
from .upsampling import (interpolate, lp_pool1d, lp_pool2d, lp_pool3d, max_unpool1d, max_unpool2d,
                         max_unpool3d, upsample, upsample_bilinear, upsample_nearest)
from .normalization import batch_norm, group_norm, instance_norm, layer_norm, rms_norm
from .sparse import embedding, embedding_bag, one_hot
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss,
                   cosine_similarity, cross_entropy, gaussian_nll_loss, hinge_embedding_loss,
                   huber_loss, kl_div, l1_loss, margin_ranking_loss, mse_loss, multi_margin_loss,
                   multilabel_soft_margin_loss, multilabel_margin_loss, nll_loss, pairwise_distance,
                   poisson_nll_loss, smooth_l1_loss, soft_margin_loss, triplet_margin_loss)
from .attention import multi_head_attention_forward, scaled_dot_product_attention
from .attention import _float_mask  # noqa: F401  (nn.Transformer's masks)
from .loss import normalize  # noqa: F401  (public, outside __all__ as before)

__all__ = [
    "linear", "conv2d", "unfold", "max_pool2d", "avg_pool2d", "pad", "flatten",
    "relu", "relu_", "leaky_relu", "gelu", "tanh", "sigmoid", "softmax", "log_softmax", "dropout",
    "batch_norm", "layer_norm", "rms_norm", "embedding", "one_hot",
    "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    # activations, losses and layers beyond the first set
    "threshold", "hardtanh", "relu6", "elu", "selu", "celu", "silu", "softplus", "mish",
    "softsign", "hardswish", "hardsigmoid", "tanhshrink", "hardshrink", "softshrink",
    "logsigmoid", "softmin", "glu", "prelu",
    "smooth_l1_loss", "huber_loss", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
    "pairwise_distance", "cosine_similarity", "cosine_embedding_loss", "margin_ranking_loss",
    "triplet_margin_loss", "hinge_embedding_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "multilabel_margin_loss", "multi_margin_loss",
    "conv3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d",
    "conv1d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "avg_pool1d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "interpolate", "upsample", "pixel_shuffle", "pixel_unshuffle", "fold", "group_norm",
    "instance_norm", "dropout1d", "dropout2d", "bilinear", "embedding_bag",
    "scaled_dot_product_attention", "multi_head_attention_forward",
    "upsample_nearest", "upsample_bilinear", "ctc_loss", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
]
