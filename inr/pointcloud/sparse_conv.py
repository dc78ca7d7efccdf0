"""Sparse 3D convolutions in pure torch.

A sparse tensor is a set of active voxels (integer coordinates, optionally a batch index) with
a feature row each. Neighbours are found by packing coordinates into int64 keys, sorting them
once, and binary-searching the shifted keys (`torch.searchsorted`); a convolution is then, for
every kernel offset, a gather of the neighbours' features, a matmul with that offset's weight,
and an `index_add_` into the outputs (the centre offset, every site's own row, is a plain
matmul). Kernel maps are cached on the tensor, so the layers of one resolution share them. This
is the measured-steady CPU path (see ENVIRONMENT.md: spconv's CPU backward needs a patch; this
runs within ~20 % of its speed), and the one CUDA, float64 and autocast take.

On the CPU in float32 without autocast the layers take the native kernel instead
(`inr/native/sparse_conv.cpp`, backend 'auto'): one gather table per layer ((M, K) rows of x, -1
where none), every output row summed in the cache in one pass (README "Native CPU kernels"); at
inference its products can run in bfloat16 with float32 sums (`bf16`, `network.use_bf16`).
Training goes through it too (`_GatherConv`): the input gradient is the same gather over the
transposed table (for a submanifold convolution the table itself, the offsets mirrored), the
weight gradient the kernel's `gather_wgrad` over the layer's own table.

Three layers, each equal to a dense convolution evaluated at the active sites (inactive voxels
hold zeros), which the tests check:
- SubmanifoldConv3d (k odd, stride 1): outputs at the input's sites  == conv3d(padding=k//2);
- DownConv3d (k=2, stride 2): outputs at the occupied parent cells    == conv3d(k=2, stride=2);
- UpConv3d (k=2, stride 2): outputs at given child sites of the parents == conv_transpose3d(k=2, stride=2).
"""

from __future__ import annotations

import itertools
import math
from typing import Dict, Optional, Tuple

import torch
from torch import nn

from .. import _external, native
from .voxel import pack_keys, unpack_keys

BACKENDS = ("auto", "torch", "native")


def _native_runs(layer: nn.Module, x: torch.Tensor) -> bool:
    """Whether `layer` runs on x with the native kernel: its backend is 'native', or 'auto' and
    the kernels build here; and the call is one the kernel computes: CPU float32 features and
    weights, no autocast (whose products are bf16)."""
    if x.device.type != "cpu" or x.dtype != torch.float32 or layer.weight.dtype != torch.float32:
        return False
    return not torch.is_autocast_enabled("cpu") and _external.uses_native(layer.backend, "sparse convolutions")


def _wants_grad(layer: nn.Module, x: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in layer.parameters()))


class _GatherConv(torch.autograd.Function):
    """native.gather_conv with its gradients. `transposed`: the table of the transposed convolution
    (for each input row, the output rows that read it, in the column of the weight they used;
    with `mirror`, in the mirrored column: a submanifold convolution's own table)."""

    @staticmethod
    def forward(ctx, feats, weight, bias, table, transposed, mirror: bool):
        ctx.save_for_backward(feats, weight, table, transposed)
        ctx.mirror, ctx.has_bias = mirror, bias is not None
        return native.gather_conv(feats, table, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        feats, weight, table, transposed = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            w = weight.flip(0) if ctx.mirror else weight
            grad_x = native.gather_conv(grad, transposed, w.transpose(1, 2), None)
        if ctx.needs_input_grad[1]:
            grad_w = native.gather_wgrad(feats, table, grad)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad.sum(0)
        return grad_x, grad_w, grad_b, None, None, None


def _native_conv(layer: nn.Module, feats: torch.Tensor, table: torch.Tensor, transposed, mirror: bool = False):
    """The layer's output features through the native kernel; `transposed()` gives the transposed
    table, built only where a gradient is wanted."""
    if _wants_grad(layer, feats):
        return _GatherConv.apply(feats, layer.weight, layer.bias, table, transposed(), mirror)
    return native.gather_conv(feats, table, layer.weight, layer.bias, layer.bf16)


def _check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'auto', 'torch' or 'native', got {backend!r}")
    return backend


class SparseTensor:
    """Active voxels: coords (M, 3) int64, batch (M,) int64, feats (M, C). Rows are kept in key
    order (batch, x, y, z), which makes lookups a binary search."""

    def __init__(self, coords: torch.Tensor, feats: torch.Tensor, batch: Optional[torch.Tensor] = None,
                 _sorted_keys: Optional[torch.Tensor] = None) -> None:
        batch = torch.zeros(len(coords), dtype=torch.long, device=coords.device) if batch is None else batch.long()
        if _sorted_keys is None:
            keys = pack_keys(coords, batch)
            keys, order = torch.sort(keys)
            if len(keys) > 1 and bool((keys[1:] == keys[:-1]).any()):
                raise ValueError("SparseTensor coordinates must be unique")
            coords, batch, feats = coords[order], batch[order], feats[order]
            _sorted_keys = keys
        self.coords, self.batch, self.feats, self.keys = coords.long(), batch, feats, _sorted_keys
        self.cache: Dict[Tuple, object] = {}

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    def replace(self, feats: torch.Tensor) -> "SparseTensor":
        """Same sites (and kernel-map cache), new features."""
        out = SparseTensor(self.coords, feats, self.batch, _sorted_keys=self.keys)
        out.cache = self.cache
        return out

    def lookup(self, coords: torch.Tensor, batch: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Row index of each queried site and whether it is active."""
        q = pack_keys(coords, batch)
        if len(self.keys) == 0:
            return torch.zeros_like(q), torch.zeros_like(q, dtype=torch.bool)
        pos = torch.searchsorted(self.keys, q).clamp(max=len(self.keys) - 1)
        return pos, self.keys[pos] == q


def kernel_offsets(k: int, device=None) -> torch.Tensor:
    """(k^3, 3) offsets -(k//2)..k//2 per axis, x-major (matching conv3d's weight layout)."""
    r = range(-(k // 2), k // 2 + 1)
    return torch.tensor(list(itertools.product(r, r, r)), dtype=torch.long, device=device)


def _submanifold_table(x: SparseTensor, k: int) -> torch.Tensor:
    """(M, k^3) int32: the row of each site's neighbour at each kernel offset, -1 where inactive."""
    key = ("subm-table", k)
    if key not in x.cache:
        x.cache[key] = native.submanifold_table(x.keys, k)
    return x.cache[key]


def _submanifold_map(x: SparseTensor, k: int):
    key = ("subm", k)
    if key not in x.cache:
        maps = []
        for off in kernel_offsets(k, x.coords.device):
            idx, found = x.lookup(x.coords + off, x.batch)
            out_rows = found.nonzero()[:, 0]
            maps.append((out_rows, idx[out_rows]))
        x.cache[key] = maps
    return x.cache[key]


class SubmanifoldConv3d(nn.Module):
    """y_i = b + sum_{o in kernel} W_o^T x_{i + o} over active neighbours; outputs at the input sites."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, bias: bool = True,
                 backend: str = "auto") -> None:
        super().__init__()
        self.backend = _check_backend(backend)
        self.bf16 = False  # inference on the native kernel: products in bfloat16 (`network.use_bf16`)
        if kernel_size % 2 != 1:
            raise ValueError("submanifold convolutions need an odd kernel size")
        self.k = kernel_size
        self.weight = nn.Parameter(torch.empty(kernel_size**3, in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        nn.init.normal_(self.weight, std=math.sqrt(2.0 / (kernel_size**3 * in_channels)))  # He

    def forward(self, x: SparseTensor) -> SparseTensor:
        if _native_runs(self, x.feats):
            table = _submanifold_table(x, self.k)
            return x.replace(_native_conv(self, x.feats, table, lambda: table, mirror=True))
        centre = self.k**3 // 2  # offset 0: every site is its own neighbour, no gather needed
        out = (x.feats @ self.weight[centre]).to(x.feats.dtype)
        for o, (w, (out_rows, in_rows)) in enumerate(zip(self.weight, _submanifold_map(x, self.k))):
            if o != centre and len(out_rows):
                out.index_add_(0, out_rows, (x.feats[in_rows] @ w).to(out.dtype))
        if self.bias is not None:
            out = out + self.bias
        return x.replace(out)


def _down_map(x: SparseTensor):
    if "down" not in x.cache:
        parent = torch.div(x.coords, 2, rounding_mode="floor")
        keys, inverse = torch.unique(pack_keys(parent, x.batch), return_inverse=True)
        coords, batch = unpack_keys(keys)
        child = x.coords - 2 * parent  # in {0, 1}^3
        k = child[:, 0] * 4 + child[:, 1] * 2 + child[:, 2]
        coarse = SparseTensor(coords, x.feats.new_zeros(len(keys), 0), batch, _sorted_keys=keys)
        x.cache["down"] = (coarse, inverse, k)
    return x.cache["down"]


class DownConv3d(nn.Module):
    """Kernel 2, stride 2: each occupied parent cell sums W_c^T x over its occupied children c."""

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True, backend: str = "auto") -> None:
        super().__init__()
        self.backend = _check_backend(backend)
        self.bf16 = False  # inference on the native kernel: products in bfloat16 (`network.use_bf16`)
        self.weight = nn.Parameter(torch.empty(8, in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        nn.init.normal_(self.weight, std=math.sqrt(2.0 / (8 * in_channels)))

    def forward(self, x: SparseTensor) -> SparseTensor:
        coarse, inverse, k = _down_map(x)
        if _native_runs(self, x.feats):
            if "down-table" not in x.cache:  # each parent's child rows by position, -1 where none
                table = torch.full((len(coarse), 8), -1, dtype=torch.int32, device=x.feats.device)
                table[inverse, k] = torch.arange(len(x), dtype=torch.int32, device=x.feats.device)
                x.cache["down-table"] = table

            def transposed():  # each child's parent row in the column of its position
                if "down-table-t" not in x.cache:
                    t = torch.full((len(x), 8), -1, dtype=torch.int32, device=x.feats.device)
                    t[torch.arange(len(x), device=x.feats.device), k] = inverse.to(torch.int32)
                    x.cache["down-table-t"] = t
                return x.cache["down-table-t"]

            return coarse.replace(_native_conv(self, x.feats, x.cache["down-table"], transposed))
        out = x.feats.new_zeros(len(coarse), self.weight.shape[2])
        for c in range(8):
            rows = (k == c).nonzero()[:, 0]
            if len(rows):
                out.index_add_(0, inverse[rows], (x.feats[rows] @ self.weight[c]).to(out.dtype))
        if self.bias is not None:
            out = out + self.bias
        return coarse.replace(out)


class UpConv3d(nn.Module):
    """Kernel 2, stride 2, onto given fine sites: y_f = b + W_c^T x_parent(f), c = f - 2 parent(f)
    (zero input where the parent is not active)."""

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True, backend: str = "auto") -> None:
        super().__init__()
        self.backend = _check_backend(backend)
        self.bf16 = False  # inference on the native kernel: products in bfloat16 (`network.use_bf16`)
        self.weight = nn.Parameter(torch.empty(8, in_channels, out_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        nn.init.normal_(self.weight, std=math.sqrt(2.0 / in_channels))

    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        cached = target.cache.get("up")
        if cached is None or cached[0] is not x.keys:  # the map depends on both site sets
            parent = torch.div(target.coords, 2, rounding_mode="floor")
            idx, found = x.lookup(parent, target.batch)
            child = target.coords - 2 * parent
            target.cache["up"] = cached = (x.keys, idx, found, child[:, 0] * 4 + child[:, 1] * 2 + child[:, 2])
        _, idx, found, k = cached[:4]
        if _native_runs(self, x.feats):
            if len(cached) == 4:  # each child's parent row in the column of its position, -1 elsewhere
                rows = found.nonzero()[:, 0]
                table = torch.full((len(target), 8), -1, dtype=torch.int32, device=x.feats.device)
                table[rows, k[rows]] = idx[rows].to(torch.int32)
                target.cache["up"] = cached = (*cached, table, {})

            def transposed():  # each parent's child rows by position
                if "t" not in cached[5]:
                    rows = found.nonzero()[:, 0]
                    t = torch.full((len(x), 8), -1, dtype=torch.int32, device=x.feats.device)
                    t[idx[rows], k[rows]] = rows.to(torch.int32)
                    cached[5]["t"] = t
                return cached[5]["t"]

            return target.replace(_native_conv(self, x.feats, cached[4], transposed))
        out = x.feats.new_zeros(len(target), self.weight.shape[2])
        for c in range(8):
            rows = ((k == c) & found).nonzero()[:, 0]
            if len(rows):
                out.index_add_(0, rows, (x.feats[idx[rows]] @ self.weight[c]).to(out.dtype))
        if self.bias is not None:
            out = out + self.bias
        return target.replace(out)
