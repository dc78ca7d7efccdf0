"""Multiresolution hash grid (Instant-NGP, Mueller et al. 2022): pure torch, tiny-cuda-nn on
CUDA, or the toolkit's native C++ kernels on the CPU (inr/native/hashgrid.cpp).

The torch path computes exactly the function of tiny-cuda-nn's `HashGrid` encoding, so that a
table trained on one backend can be evaluated on the other:
- level l has scale s_l = N_min * b^l - 1 and resolution R_l = ceil(s_l) + 1,
  b = exp((ln N_max - ln N_min) / (L - 1));
- a point u in [0, 1]^d sits at p = s_l u + 0.5, corner cells floor(p) + {0, 1}^d, d-linear weights;
- level l owns min(T, next_multiple_of_8(R_l^d)) table rows; a level with R_l^d rows or fewer is
  indexed densely (sum_i c_i R_l^i), a finer one by the hash XOR_i (c_i * pi_i mod 2^32), with
  pi = (1, 2654435761, 805459861, ...); both mod the level's row count;
- all levels live in one flat parameter of rows x F values, level l from row offset_l on,
  each row's F features side by side (tcnn's parameter layout, so tcnn trains the same tensor),
  and the output is level-major (N, L * F).
"""

from __future__ import annotations

import math
import struct
from typing import Literal, Optional

import torch
from torch import nn

from .. import _external, native
from .base import Encoding, register_encoding, to_unit

TCNN_DIMS = (2, 3, 4)
TCNN_FEATURES = (1, 2, 4, 8)
"""What tiny-cuda-nn's HashGrid builds (input dimensions, features per level)."""
NATIVE_DIMS = (1, 2, 3, 4)
NATIVE_FEATURES = (1, 2, 4, 8)
NATIVE_DTYPES = (torch.float32, torch.float64)
"""What the native CPU kernels take (input dimensions, features per level, table dtypes)."""
PRIMES = (1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737)
MASK32 = 0xFFFFFFFF


def level_layout(in_dim: int, n_levels: int, log2_table: int, base_resolution: int, per_level_scale: float):
    """Per-level (scale, resolution, rows, offset) lists, as tiny-cuda-nn lays them out."""
    scales, resolutions, rows, offsets = [], [], [], []
    offset = 0
    for level in range(n_levels):
        scale = math.exp2(level * math.log2(per_level_scale)) * base_resolution - 1.0
        res = int(math.ceil(scale)) + 1
        n = res**in_dim
        n = min(-(-n // 8) * 8, 1 << log2_table)
        scales.append(scale)
        resolutions.append(res)
        rows.append(n)
        offsets.append(offset)
        offset += n
    return scales, resolutions, rows, offsets


def _size_problem(who: str, in_dim: int, n_features: int, dims, features) -> Optional[str]:
    if in_dim not in dims:
        return f"{who} encode{'s' if who == 'it' else ''} {'/'.join(map(str, dims))}-D inputs, not {in_dim}-D"
    if n_features not in features:
        return f"{who} take{'s' if who == 'it' else ''} {features} features per level, not {n_features}"
    return None


def _float32_scales(scales):
    # tcnn computes the scale in float32 (exp2f); keep the same rounding
    return torch.tensor(scales, dtype=torch.float32)


@register_encoding("hashgrid")
class HashGrid(Encoding):
    """Multiresolution hash encoding: (N, d) in [-1, 1] -> (N, n_levels * n_features).

    Args:
        n_levels: L (16).
        n_features: F per level (2).
        log2_table: log2 T, rows per level at most (19 for NeRF; 18-24 for images).
        base_resolution: N_min (16).
        max_resolution: N_max, the finest level's resolution (e.g. the image side). Ignored if
            per_level_scale is given.
        per_level_scale: b, directly.
        backend: 'auto' (the fast path of each device: tcnn on CUDA, native on CPU, each falling
            back to the torch twin with one warning where it cannot run), 'torch' (the twin
            everywhere), 'tcnn' or 'native' (that fast path required on its device: an error
            where it cannot run; the other device runs the twin).
    """

    def __init__(
        self,
        in_dim: int,
        n_levels: int = 16,
        n_features: int = 2,
        log2_table: int = 19,
        base_resolution: int = 16,
        max_resolution: int = 2048,
        per_level_scale: float | None = None,
        backend: Literal["auto", "torch", "tcnn"] = "auto",
    ) -> None:
        super().__init__(in_dim)
        if in_dim > len(PRIMES):
            raise ValueError(f"hashgrid supports in_dim <= {len(PRIMES)}, got {in_dim}")
        if per_level_scale is None:
            per_level_scale = (
                math.exp((math.log(max_resolution) - math.log(base_resolution)) / (n_levels - 1)) if n_levels > 1 else 1.0
            )
        self.n_levels, self.n_features = int(n_levels), int(n_features)
        self.log2_table, self.base_resolution = int(log2_table), int(base_resolution)
        self.per_level_scale = float(per_level_scale)
        scales, res, rows, offsets = level_layout(in_dim, n_levels, log2_table, base_resolution, per_level_scale)
        self.resolutions, self.rows = res, rows
        self.register_buffer("scales", _float32_scales(scales), persistent=False)
        f32 = [struct.unpack("f", struct.pack("f", v))[0] for v in scales]  # the same float32 rounding, device-free
        self._layout = (f32, list(res), list(rows), list(offsets))  # for the native kernels
        self.register_buffer("level_rows", torch.tensor(rows, dtype=torch.int64), persistent=False)
        self.register_buffer("level_offsets", torch.tensor(offsets, dtype=torch.int64), persistent=False)
        hashed = [r**in_dim > n for r, n in zip(res, rows)]
        self.register_buffer("hashed", torch.tensor(hashed), persistent=False)
        strides = torch.tensor([[r**i if r**i <= n else 0 for i in range(in_dim)] for r, n in zip(res, rows)])
        self.register_buffer("strides", strides.to(torch.int64), persistent=False)
        self.register_buffer("primes", torch.tensor(PRIMES[:in_dim], dtype=torch.int64), persistent=False)
        bits = torch.tensor([[(c >> i) & 1 for i in range(in_dim)] for c in range(2**in_dim)], dtype=torch.int64)
        self.register_buffer("corner_bits", bits, persistent=False)
        # flat, in tiny-cuda-nn's parameter layout (level-major rows of F features), so that
        # both backends read and train the very same tensor; the torch path views it (rows, F)
        self.table = nn.Parameter(torch.empty(sum(rows) * n_features).uniform_(-1e-4, 1e-4))
        self.out_dim = self.n_levels * self.n_features
        self.backend = backend
        if backend not in ("auto", "torch", "tcnn", "native"):
            raise ValueError(f"backend must be 'auto', 'torch', 'tcnn' or 'native', got {backend!r}")
        if backend == "tcnn" and self.tcnn_problem(in_dim, n_features) is not None:
            raise _external.MissingBackend(f"hashgrid: tiny-cuda-nn cannot build this grid: {self.tcnn_problem(in_dim, n_features)}")
        if backend == "native" and self.native_problem(in_dim, n_features) is not None:
            raise _external.MissingBackend(f"hashgrid: the native CPU kernels cannot run this grid: {self.native_problem(in_dim, n_features)}")
        # built on the first CUDA call and kept outside the module tree (its only parameter is
        # `table`): state dicts are the same on every backend, and a CPU run never builds it
        self.__dict__["_tcnn"] = None
        self.__dict__["_backends"] = {}  # device type -> backend, resolved on the first call there

    @staticmethod
    def tcnn_problem(in_dim: int, n_features: int) -> Optional[str]:
        """Why tiny-cuda-nn's HashGrid cannot encode this configuration (None: it can)."""
        return _size_problem("it", in_dim, n_features, TCNN_DIMS, TCNN_FEATURES)

    @staticmethod
    def native_problem(in_dim: int, n_features: int) -> Optional[str]:
        """Why the native CPU kernels cannot encode this configuration (None: they can)."""
        return _size_problem("they", in_dim, n_features, NATIVE_DIMS, NATIVE_FEATURES)

    def backend_for(self, device: torch.device) -> str:
        """'tcnn', 'native' or 'torch': what a forward pass on `device` runs."""
        if device.type == "cuda":
            fast, problem = "tcnn", self.tcnn_problem(self.in_dim, self.n_features) or _external.why_not(_external.tinycudann)
        elif device.type == "cpu":
            fast, problem = "native", self.native_problem(self.in_dim, self.n_features) or _external.why_not(_external.native_cpu)
        else:
            return "torch"
        requested = self.backend if self.backend in ("auto", "torch", fast) else "torch"
        return _external.resolve_backend(requested, fast, "hashgrid", problem)

    @_external.not_traced  # probing may build a backend: never inside a traced graph
    def prepare_backend(self, device: torch.device) -> str:
        backend = self._backends[device.type] = self.backend_for(device)
        if backend == "tcnn":
            self.__dict__["_tcnn"] = self._make_tcnn()
        return backend

    def _make_tcnn(self) -> nn.Module:
        tcnn = _external.tinycudann()
        enc = tcnn.Encoding(
            self.in_dim,
            {
                "otype": "HashGrid",
                "n_levels": self.n_levels,
                "n_features_per_level": self.n_features,
                "log2_hashmap_size": self.log2_table,
                "base_resolution": self.base_resolution,
                "per_level_scale": self.per_level_scale,
            },
            dtype=torch.float32,
        ).to(self.table.device)
        if enc.params.numel() != self.table.numel():
            raise RuntimeError(f"tcnn hash grid has {enc.params.numel()} params, the torch layout {self.table.numel()}")
        # one parameter for both backends: tcnn reads and trains the table through `params`
        del enc.params
        enc.params = self.table
        return enc

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key = prefix + "table"
        if key in state_dict and state_dict[key].dim() == 2:  # checkpoints from before the flat layout
            state_dict[key] = state_dict[key].reshape(-1)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def indices_and_weights(self, x: torch.Tensor):
        """Row indices (N, L, 2^d) into `table` and d-linear weights (N, L, 2^d)."""
        u = to_unit(x).clamp(0.0, 1.0)
        pos = u[:, None, :] * self.scales[None, :, None] + 0.5  # (N, L, d)
        cell = torch.floor(pos)
        frac = pos - cell
        corner = cell.to(torch.int64)[:, :, None, :] + self.corner_bits  # (N, L, C, d)
        dense = (corner * self.strides[None, :, None, :]).sum(-1)
        hashed = corner[..., 0] * self.primes[0]
        for i in range(1, self.in_dim):
            hashed = hashed ^ ((corner[..., i] * self.primes[i]) & MASK32)
        index = torch.where(self.hashed[None, :, None], hashed, dense)
        index = index % self.level_rows[None, :, None] + self.level_offsets[None, :, None]
        bits = self.corner_bits.bool()
        weight = torch.where(bits, frac[:, :, None, :], 1.0 - frac[:, :, None, :]).prod(-1)
        return index, weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        backend = self._backends.get(x.device.type)
        if backend is None:
            backend = self.prepare_backend(x.device)
        if backend == "tcnn":
            return self._tcnn(to_unit(x).clamp(0.0, 1.0)).to(x.dtype)
        if backend == "native" and self.table.dtype in NATIVE_DTYPES:
            return native.hashgrid(x.to(self.table.dtype), self.table, *self._layout, self.n_features)
        index, weight = self.indices_and_weights(x)
        feats = nn.functional.embedding(index, self.table.view(-1, self.n_features))  # (N, L, C, F)
        out = (feats * weight[..., None].to(feats.dtype)).sum(2)
        return out.reshape(x.shape[0], self.out_dim)
