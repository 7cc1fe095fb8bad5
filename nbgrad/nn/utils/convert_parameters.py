"""One flat vector from parameters and back (mirrors ``torch.nn.utils.convert_parameters``)."""

from nbgrad import functions
from nbgrad.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_device(param, old):
    if old is not None and param.device != old:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return param.device


def parameters_to_vector(parameters):
    """Concatenate the parameters, flattened, into one 1-D tensor (differentiable, as torch).

    Args:
        parameters (iterable of Tensor).

    Returns:
        Tensor: (sum of numel,), recorded as ``CatBackward0`` over ``ViewBackward0`` nodes.
    """
    device = None
    vec = []
    for param in parameters:
        device = _check_device(param, device)
        vec.append(param.view(-1))
    return functions.cat(vec)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into the parameters' data (mirrors torch's).

    Args:
        vec (Tensor): (sum of numel,).
        parameters (iterable of Tensor).

    Raises:
        TypeError: ``vec`` is not a Tensor (torch's text).
        RuntimeError: ``vec`` is shorter or longer than the parameters together.
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    parameters = list(parameters)
    total = sum(p.numel() for p in parameters)
    if vec.numel() != total:
        raise RuntimeError(f"vector_to_parameters: vec has {vec.numel()} elements, the "
                           f"parameters need {total}")
    device = None
    pointer = 0
    for param in parameters:
        device = _check_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
