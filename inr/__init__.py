"""inr: implicit neural representations on CPU and GPU.

>>> import inr, torch
>>> field = inr.Field(2, 3, inr.FieldConfig(encoding="fourier", network="mlp"))
>>> field(torch.zeros(8, 2)).shape
torch.Size([8, 3])
"""

from .errors import InputError
from .fields import Field, FieldConfig, available_encodings, available_networks, build_encoding, build_network
from .networks import count_parameters

__version__ = "0.1.0"

__all__ = [
    "Field",
    "FieldConfig",
    "InputError",
    "available_encodings",
    "available_networks",
    "build_encoding",
    "build_network",
    "count_parameters",
    "__version__",
]
