"""``nbgrad.nn.utils``: gradient clipping and parameter/vector conversion (mirrors torch.nn.utils).

``clip_grad_norm_``, ``clip_grad_value_``, ``get_total_norm``, ``clip_grads_with_norm_``
(``clip_grad.py``); ``parameters_to_vector``, ``vector_to_parameters``
(``convert_parameters.py``); ``weight_norm``, ``remove_weight_norm`` (``weight_norm.py``).
"""

from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .weight_norm import remove_weight_norm, weight_norm
from . import clip_grad, convert_parameters  # noqa: F401  (torch's module paths)

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "weight_norm", "remove_weight_norm"]
from . import rnn  # noqa: E402,F401  (nn.utils.rnn, as torch)
