"""The reconstruction model end to end: normalisation, voxel features, neighbours, losses.

Clouds are normalised to their bounding-box centre and diagonal (so the model is scale-free),
and voxelised with `voxels_per_diagonal` voxels along that diagonal; stage 2 works in voxel units.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

import torch
from torch import nn

from .network import PointNet, ReconstructionConfig, VoxelNet, candidate_sites
from .sparse_conv import SparseTensor
from .voxel import pack_keys


class Frame(NamedTuple):
    centre: torch.Tensor
    diag: float
    voxel: float
    """Voxel side in normalised units (1 / voxels_per_diagonal)."""


def make_frame(points: torch.Tensor, voxels_per_diagonal: float) -> Frame:
    lo, hi = points.min(0).values, points.max(0).values
    return Frame((lo + hi) / 2, float((hi - lo).norm()), 1.0 / voxels_per_diagonal)


def to_voxel_units(points: torch.Tensor, frame: Frame) -> torch.Tensor:
    """World points -> coordinates in voxels (voxel (i, j, k) spans [i, i+1) x ...)."""
    return (points - frame.centre) / frame.diag / frame.voxel


def from_voxel_units(u: torch.Tensor, frame: Frame) -> torch.Tensor:
    return u * frame.voxel * frame.diag + frame.centre


def candidate_input(u: torch.Tensor) -> SparseTensor:
    """Candidate voxels (input voxels and their neighbours) of points u (N, 3) in voxel units,
    with features [log(1 + count), mean offset of the points from the centre (3), is_input]."""
    ijk = torch.floor(u).long()
    zeros = torch.zeros(len(u), dtype=torch.long)
    in_keys, inverse, counts = torch.unique(pack_keys(ijk, zeros), return_inverse=True, return_counts=True)
    offset_sum = torch.zeros(len(in_keys), 3).index_add_(0, inverse, u - ijk.float() - 0.5)
    in_coords = torch.empty(len(in_keys), 3, dtype=torch.long)
    in_coords[inverse] = ijk
    coords, batch, is_input = candidate_sites(in_coords, torch.zeros(len(in_keys), dtype=torch.long))
    keys = pack_keys(coords, batch)
    pos = torch.searchsorted(in_keys, keys).clamp(max=len(in_keys) - 1)
    feats = torch.zeros(len(coords), VoxelNet.IN_FEATURES)
    rows = is_input.nonzero()[:, 0]
    src = pos[rows]
    feats[rows, 0] = torch.log1p(counts[src].float())
    feats[rows, 1:4] = offset_sum[src] / counts[src, None].float()
    feats[rows, 4] = 1.0
    return SparseTensor(coords, feats, batch, _sorted_keys=keys)


def neighbours(centres: torch.Tensor, u: torch.Tensor, k: int, chunk: int = 2048) -> Tuple[torch.Tensor, torch.Tensor]:
    """The k input points nearest each voxel centre (V, 3) among u (N, 3), as positions relative
    to the centre (V, k, 3), and a mask (V, k), True where the point is outside the voxel's 3^3
    block (or missing) and must be ignored."""
    k_eff = min(k, len(u))
    rels, masks = [], []
    for s in range(0, len(centres), chunk):
        c = centres[s : s + chunk]
        d, idx = torch.cdist(c, u).topk(k_eff, dim=1, largest=False)
        rel = u[idx] - c[:, None, :]
        mask = rel.abs().amax(-1) > 1.5
        if k_eff < k:
            rel = torch.cat([rel, torch.zeros(len(c), k - k_eff, 3)], 1)
            mask = torch.cat([mask, torch.ones(len(c), k - k_eff, dtype=torch.bool)], 1)
        rels.append(torch.where(mask[..., None], torch.zeros_like(rel), rel))
        masks.append(mask)
    return torch.cat(rels), torch.cat(masks)


def nearest_index(x: torch.Tensor, y: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """Index into y of each x's nearest point (no gradient), in chunks of x."""
    with torch.no_grad():
        return torch.cat([torch.cdist(x[s : s + chunk], y).argmin(1) for s in range(0, len(x), chunk)])


def chamfer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Differentiable chamfer: mean_a min_b |a-b| + mean_b min_a |a-b| (distances, not squared).

    The nearest neighbours are found without gradient and the distances recomputed for those
    pairs: the same value and (sub)gradient as differentiating the min over a full distance
    matrix, without keeping that matrix for the backward pass.
    """
    d_ab = ((a - b[nearest_index(a, b)]) ** 2).sum(-1).clamp_min(1e-12).sqrt()  # finite gradient at 0
    d_ba = ((b - a[nearest_index(b, a)]) ** 2).sum(-1).clamp_min(1e-12).sqrt()
    return d_ab.mean() + d_ba.mean()


class Reconstructor(nn.Module):
    """Both stages; forward() returns the losses for a (noisy, clean) pair, reconstruct() the points."""

    def __init__(self, cfg: Optional[ReconstructionConfig] = None, voxels_per_diagonal: float = 40.0) -> None:
        super().__init__()
        self.cfg = cfg or ReconstructionConfig()
        self.voxels_per_diagonal = float(voxels_per_diagonal)
        self.stage1 = VoxelNet(self.cfg)
        self.stage2 = PointNet(self.cfg)

    def forward(self, noisy: torch.Tensor, clean: torch.Tensor) -> Dict[str, torch.Tensor]:
        frame = make_frame(noisy, self.voxels_per_diagonal)
        u, v = to_voxel_units(noisy, frame), to_voxel_units(clean, frame)
        x = candidate_input(u)
        out = self.stage1(x)
        gt_keys = torch.unique(pack_keys(torch.floor(v).long(), torch.zeros(len(v), dtype=torch.long)))
        target = torch.isin(x.keys, gt_keys).float()
        bce = sum(nn.functional.binary_cross_entropy_with_logits(lg, target) for lg in out.logits) / len(out.logits)
        pts = self._points(x, out, target.nonzero()[:, 0], u)  # teacher forcing: stage 2 learns on the true voxels
        cd = chamfer(pts.reshape(-1, 3), v)
        acc = ((out.logits[-1] > 0).float() == target).float().mean()
        return {"loss": bce + cd, "bce": bce.detach(), "chamfer": cd.detach(), "accuracy": acc.detach()}

    def _points(self, x: SparseTensor, out, rows: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Stage 2 on candidate rows: (V, K, 3) points in voxel units."""
        centres = x.coords[rows].float() + 0.5
        rel, mask = neighbours(centres, u, self.cfg.neighbours)
        return centres[:, None, :] + self.stage2(out.sites.feats[rows], rel, mask)

    @torch.no_grad()
    def reconstruct(self, noisy: torch.Tensor, threshold: float = 0.5) -> Tuple[torch.Tensor, torch.Tensor]:
        """(points (V * K, 3) in world units, voxel index (V * K,)) of the predicted surface."""
        frame = make_frame(noisy, self.voxels_per_diagonal)
        u = to_voxel_units(noisy, frame)
        x = candidate_input(u)
        out = self.stage1(x)
        rows = (torch.sigmoid(out.logits[-1]) > threshold).nonzero()[:, 0]
        pts = self._points(x, out, rows, u)
        voxel_index = torch.arange(len(rows)).repeat_interleave(self.cfg.points_per_voxel)
        return from_voxel_units(pts.reshape(-1, 3), frame), voxel_index
