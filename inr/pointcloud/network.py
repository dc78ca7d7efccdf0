"""The two-stage reconstruction network (Deep Point Cloud Reconstruction, Choe et al. 2022).

Stage 1 (voxels): the input voxels and their 26-neighbours are the candidate sites; a sparse
stacked hourglass (two encoder-decoders of submanifold / down / up convolutions with skips)
predicts which candidates the clean surface occupies, each hourglass with its own occupancy
head (intermediate supervision). Stage 2 (points): for each occupied voxel, a transformer reads
a voxel token (its stage-1 features) and tokens of the nearest input points around it (their
positions relative to the voxel centre, in voxel units, through the amplified positional
encoding) and emits K points as offsets from the voxel centre.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, NamedTuple, Tuple

import torch
from torch import nn

from .. import _external, native
from ..encodings.amplified import AmplifiedEncoding
from .sparse_conv import DownConv3d, SparseTensor, SubmanifoldConv3d, UpConv3d, kernel_offsets
from .voxel import pack_keys, unpack_keys


@dataclass
class ReconstructionConfig:
    width: int = 32
    hourglasses: int = 2
    depth: int = 2
    """Down-sampling steps per hourglass."""
    points_per_voxel: int = 8
    neighbours: int = 32
    """Input points read by stage 2 per voxel: the nearest to its centre within `reach`."""
    reach: float = 2.0
    """Neighbours farther than this from the voxel centre (max-norm, voxel units) are ignored."""
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    pe: str = "amplified"
    """'amplified', 'sinusoidal' (amplified with alpha = 0) or 'none' (raw relative positions)."""
    pe_freqs: int = 4
    pe_alpha: float = 1.0
    pe_scale: float = 4.0
    """r of the encoding, in voxels: the slowest band is sin(pi d / r)."""
    moments: bool = False
    """Stage 1 also reads each voxel's second moments: the covariance of its points (6 values,
    in voxel units squared, x4): the points' spread, which the mean offset cannot show, meant to
    tell noise from a thin part's thickness. On in the shipped weights and their preset (off
    here, as in weights from before it existed: files record their own setting)."""
    noise_input: bool = False
    """Stage 1 also reads the cloud's noise level, as `reconstruct` reads it from a first pass
    (in voxels of the pass), and a flag that says it is given (0 and 0 when not: the first pass
    itself, or a voxel set by hand). A spread wider than the noise then tells a thin part's
    thickness, which the points alone do not: on a plate 2-3 sigma thick the reading is all a
    network without it has, and it reads the thickness as noise."""

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def candidate_sites(coords: torch.Tensor, batch: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The voxels within one step (27-neighbourhood) of the given ones: (coords, batch,
    is_input), sorted by key."""
    offs = kernel_offsets(3, coords.device)
    all_c = (coords[:, None, :] + offs[None]).reshape(-1, 3)
    all_b = batch[:, None].expand(-1, 27).reshape(-1)
    keys = torch.unique(pack_keys(all_c, all_b))
    is_input = torch.isin(keys, pack_keys(coords, batch))
    c, b = unpack_keys(keys)
    return c, b, is_input


class _Block(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv, self.norm = SubmanifoldConv3d(c_in, c_out), nn.LayerNorm(c_out)

    def forward(self, x: SparseTensor) -> SparseTensor:
        y = self.conv(x)
        return y.replace(self.norm(y.feats).relu_())  # in place: fresh tensors, large on dense clouds


class Hourglass(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        chans = [width * (1 + k) for k in range(depth + 1)]
        self.enc = nn.ModuleList([_Block(chans[k], chans[k]) for k in range(depth)])
        self.down = nn.ModuleList([DownConv3d(chans[k], chans[k + 1]) for k in range(depth)])
        self.mid = _Block(chans[-1], chans[-1])
        self.up = nn.ModuleList([UpConv3d(chans[k + 1], chans[k]) for k in range(depth)])
        self.dec = nn.ModuleList([_Block(chans[k], chans[k]) for k in range(depth)])
        self.head = SubmanifoldConv3d(chans[0], 1)

    def forward(self, x: SparseTensor) -> Tuple[SparseTensor, torch.Tensor]:
        skips = []
        for enc, down in zip(self.enc, self.down):
            x = enc(x)
            skips.append(x)
            x = down(x)
            x = x.replace(x.feats.relu_())
        x = self.mid(x)
        for k in reversed(range(len(self.up))):
            x = self.up[k](x, skips[k])
            x = self.dec[k](x.replace((x.feats + skips[k].feats).relu_()))
        return x, self.head(x).feats[:, 0]


class Stage1Out(NamedTuple):
    sites: SparseTensor
    """Candidate voxels with the last hourglass's features."""
    logits: List[torch.Tensor]
    """(M,) occupancy logits of every hourglass."""


class VoxelNet(nn.Module):
    """Stage 1: candidate voxels -> occupancy logits per hourglass."""

    IN_FEATURES = 5  # log(1 + count), mean offset (3), is_input
    MOMENT_FEATURES = 6  # with cfg.moments: covariance xx, yy, zz, xy, xz, yz
    NOISE_FEATURES = 2  # with cfg.noise_input: the noise level in voxels, whether it is given

    @classmethod
    def input_width(cls, moments: bool, noise_input: bool = False) -> int:
        return cls.IN_FEATURES + cls.MOMENT_FEATURES * moments + cls.NOISE_FEATURES * noise_input

    def __init__(self, cfg: ReconstructionConfig) -> None:
        super().__init__()
        self.in_features = self.input_width(cfg.moments, cfg.noise_input)
        self.stem = _Block(self.in_features, cfg.width)
        self.hourglasses = nn.ModuleList([Hourglass(cfg.width, cfg.depth) for _ in range(cfg.hourglasses)])
        self.mix = nn.ModuleList([nn.Linear(cfg.width + 1, cfg.width) for _ in range(cfg.hourglasses - 1)])

    def forward(self, x: SparseTensor) -> Stage1Out:
        x = self.stem(x)
        logits = []
        for k, hg in enumerate(self.hourglasses):
            y, logit = hg(x)
            logits.append(logit)
            if k < len(self.mix):  # the next hourglass sees these features and this prediction
                x = y.replace(torch.relu(self.mix[k](torch.cat([y.feats, torch.sigmoid(logit)[:, None]], -1))) + x.feats)
            else:
                x = y
        return Stage1Out(x, logits)


class PointNet(nn.Module):
    """Stage 2: voxel features + neighbouring input points -> K offsets per voxel."""

    def __init__(self, cfg: ReconstructionConfig) -> None:
        super().__init__()
        self.cfg = cfg
        if cfg.pe == "none":
            self.pe, pe_dim = None, 3
        elif cfg.pe in ("amplified", "sinusoidal"):
            alpha = cfg.pe_alpha if cfg.pe == "amplified" else 0.0
            self.pe = AmplifiedEncoding(3, num_freqs=cfg.pe_freqs, voxel_size=cfg.pe_scale, alpha=alpha)
            pe_dim = self.pe.out_dim
        else:
            raise ValueError(f"pe must be amplified, sinusoidal or none, got {cfg.pe!r}")
        self.point_in = nn.Linear(pe_dim, cfg.d_model)
        self.voxel_in = nn.Linear(cfg.width, cfg.d_model)
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.heads, 2 * cfg.d_model, dropout=0.0, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.out = nn.Linear(cfg.d_model, 3 * cfg.points_per_voxel)
        self.backend = "auto"
        """The transformer's: 'native' (inr/native/encoder.cpp, inference on CPU float32 only),
        'torch', or 'auto' (native where it runs, else torch; `INR_NATIVE=0` turns it off)."""
        self.bf16 = False
        """Where the transformer runs natively: its linear layers' products in bfloat16 (`use_bf16`)."""

    CHUNK = 256
    """Voxels per block of the torch path's forward: the tokens of 256 voxels (33 x 64 floats
    each, 2.2 MB) stay in a CPU's cache through a layer's memory-bound steps. On 8,192 voxels,
    blocks of 256 ran in 0.58 of the time of blocks of 1,024, the block before (2 cores, medians
    of 12, `scripts/bench_pointcloud.py --sections stage2`), with the same outputs bit for bit."""
    NATIVE_CHUNK = 1024
    """Voxels per block when the transformer runs natively (it keeps its own groups of voxels in
    the cache): 1,024 ran in 0.92 of the time of 256 (the same benchmark)."""

    def forward(self, voxel_feats: torch.Tensor, rel: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """voxel_feats (V, width), rel (V, k, 3) neighbour positions in voxel units, mask (V, k)
        True where padded -> (V, K, 3) offsets in voxel units (within +-1 of the centre)."""
        native_runs = self._native_runs(voxel_feats, rel)
        block = self.NATIVE_CHUNK if native_runs else self.CHUNK
        return torch.cat([self._block(*(t[i:i + block] for t in (voxel_feats, rel, mask)), native_runs)
                          for i in range(0, len(voxel_feats), block)] or [self._block(voxel_feats, rel, mask, False)])

    def _block(self, voxel_feats: torch.Tensor, rel: torch.Tensor, mask: torch.Tensor, native_runs: bool) -> torch.Tensor:
        enc = rel if self.pe is None else self.pe(rel.reshape(-1, 3)).view(*rel.shape[:2], -1)
        tokens = torch.cat([self.voxel_in(voxel_feats)[:, None], self.point_in(enc)], 1)
        keep = torch.cat([torch.ones_like(mask[:, :1]), ~mask], 1)  # (V, 1 + k)
        layers = self.transformer.layers
        if native_runs:
            first = native.encoder_first_token(tokens, keep, self._native_params(), self.cfg.heads, layers[0].norm1.eps,
                                               self.bf16)
        else:
            for k, layer in enumerate(layers):
                # only the voxel token's output is read: the last layer computes its row alone
                tokens = _encoder_layer(layer, tokens, tokens[:, :1] if k == len(layers) - 1 else tokens,
                                        keep[:, None, None, :])
            first = tokens[:, 0]
        return torch.tanh(self.out(first)).view(-1, self.cfg.points_per_voxel, 3)

    def _native_runs(self, voxel_feats: torch.Tensor, rel: torch.Tensor) -> bool:
        """Whether the transformer runs natively: inference (no gradient wanted) on CPU float32
        without autocast, and the backend allows it (`backend`)."""
        if voxel_feats.device.type != "cpu" or torch.is_autocast_enabled("cpu"):
            return False
        if voxel_feats.dtype != torch.float32 or self.out.weight.dtype != torch.float32:
            return False
        if torch.is_grad_enabled() and (voxel_feats.requires_grad or rel.requires_grad
                                        or any(p.requires_grad for p in self.parameters())):
            return False
        return _external.uses_native(self.backend, "stage 2's transformer")

    def _native_params(self) -> list:
        return [t for layer in self.transformer.layers
                for t in (layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias, layer.self_attn.out_proj.weight,
                          layer.self_attn.out_proj.bias, layer.norm1.weight, layer.norm1.bias, layer.linear1.weight,
                          layer.linear1.bias, layer.linear2.weight, layer.linear2.bias, layer.norm2.weight,
                          layer.norm2.bias)]


def _encoder_layer(layer: nn.TransformerEncoderLayer, x: torch.Tensor, rows: torch.Tensor,
                   keep: torch.Tensor) -> torch.Tensor:
    """`layer` (post-norm, ReLU, no dropout: as `PointNet` builds it) on the tokens x (V, T, d), for the
    query tokens `rows` (V, R, d) only (x itself, or its first tokens); keys where `keep` (V, 1, 1, T)
    is False are left out. Equal to the layer's own forward restricted to those rows (a test checks it);
    written out so that the last layer need not compute the rows nobody reads."""
    attn = layer.self_attn
    d, heads = x.shape[-1], attn.num_heads
    w, b = attn.in_proj_weight, attn.in_proj_bias
    k, v = nn.functional.linear(x, w[d:], b[d:]).chunk(2, -1)
    q = nn.functional.linear(rows, w[:d], b[:d])

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.unflatten(-1, (heads, d // heads)).transpose(1, 2)

    o = nn.functional.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=keep)
    h = layer.norm1(rows + attn.out_proj(o.transpose(1, 2).flatten(2)))
    return layer.norm2(h + layer.linear2(layer.linear1(h).relu_()))


def use_bf16(model: nn.Module, on: bool = True) -> bool:
    """Run the native kernels of `model`'s layers (the sparse convolutions, stage 2's transformer)
    with their products in bfloat16 and float32 sums at inference, where the CPU has bfloat16 dot
    products (`native.bf16_products()`; else they stay float32). Returns whether they now do.
    Training, the torch paths and CUDA are not affected."""
    on = bool(on) and _external.has_native_cpu() and native.bf16_products()
    for m in model.modules():
        if hasattr(m, "bf16"):
            m.bf16 = on
    return on
