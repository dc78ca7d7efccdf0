"""ReLU MLP, the baseline network for every encoding."""

from __future__ import annotations

import torch
from torch import nn

from .. import _external, native
from .base import Network, register_network
from .base import output_activation as make_output_activation

NATIVE_NARROW = 128
"""`backend: auto` takes the native MLP for any width where the CPU has AVX-512, and only up to
this width where it has 8-float (AVX2) vectors: there, fwd+bwd at 2^16 rows, the native kernel
ran 1.2-1.6x torch's compiled layers at width 64 and 0.7x at 256 (2026-12-01, an AVX2 EPYC,
`scripts/bench_speed.py --section cpu_kernels`)."""


@register_network("mlp")
class MLP(Network):
    """`layers` hidden Linear+ReLU layers of width `hidden`, then a linear head.

    Tancik et al.: 3 x 256 hidden (4 linear layers), sigmoid out. Instant-NGP image: 2 x 64.

    Args:
        hidden: width.
        layers: number of hidden layers (0 = a single linear map).
        output_activation: 'none' or 'sigmoid'.
        backend: 'auto' (the native fused C++ MLP on the CPU, inr/native/mlp.cpp, falling back to
            torch with one warning where it cannot build; torch elsewhere), 'torch', or 'native'
            (required on the CPU: an error where it cannot run). The native MLP computes in
            float32 and is differentiable once: a loss on input gradients with create_graph
            (an eikonal term through autograd) needs backend 'torch'. Under bf16 autocast
            (`--precision bf16`) and for float64 modules, torch's layers run.
    """

    def __init__(self, in_dim: int, out_dim: int, hidden: int = 256, layers: int = 3, output_activation: str = "none",
                 backend: str = "auto") -> None:
        super().__init__(in_dim, out_dim)
        dims = [in_dim] + [hidden] * layers
        body = []
        for a, b in zip(dims[:-1], dims[1:]):
            body += [nn.Linear(a, b), nn.ReLU(inplace=True)]
        self.body = nn.Sequential(*body)
        self.head = nn.Linear(dims[-1], out_dim)
        self.out_act = make_output_activation(output_activation)
        if backend not in ("auto", "torch", "native"):
            raise ValueError(f"backend must be 'auto', 'torch' or 'native', got {backend!r}")
        self.backend = backend
        self.hidden = hidden
        self.__dict__["_backends"] = {}  # device type -> backend, resolved on the first call there
        self.__dict__["_linears"] = [m for m in self.body if isinstance(m, nn.Linear)] + [self.head]  # not re-registered

    def backend_for(self, device: torch.device) -> str:
        """'native' or 'torch': what a forward pass on `device` runs."""
        if device.type != "cpu" or self.backend == "torch":
            return "torch"
        if self.backend == "auto" and self.hidden > NATIVE_NARROW and not native.wide_vectors():
            return "torch"  # with 8-float vectors the fused kernel loses to torch's GEMMs on wide layers
        return _external.resolve_backend(self.backend, "native", "mlp", _external.why_not(_external.native_cpu))

    @_external.not_traced  # probing may build the kernels: never inside a traced graph
    def prepare_backend(self, device: torch.device) -> str:
        backend = self._backends[device.type] = self.backend_for(device)
        return backend

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        backend = self._backends.get(x.device.type) or self.prepare_backend(x.device)
        # under bf16 autocast torch's bf16 GEMMs beat the float32 kernel (bench_speed --only mlp)
        if (backend == "native" and x.dtype != torch.float64 and self.head.weight.dtype == torch.float32
                and not torch.is_autocast_enabled("cpu")):
            y = native.mlp(x.float(), [m.weight for m in self._linears], [m.bias for m in self._linears])
            return self.out_act(y)
        return self.out_act(self.head(self.body(x)))
