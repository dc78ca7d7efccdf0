"""The CPU twins against nerfacc's own functions, on the parts of nerfacc that run without CUDA
(batched rendering weights, packed accumulation, the occupancy grid's update)."""

import pytest
import torch

from inr.render import accumulate, render_weights
from inr.render.occupancy import OccupancyGrid

nerfacc = pytest.importorskip("nerfacc")


def _batched(n_rays=7, n_samples=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.sort(torch.rand(n_rays, n_samples + 1, generator=g) * 4, dim=1).values
    sigmas = torch.rand(n_rays, n_samples, generator=g) * 3
    return t[:, :-1].contiguous(), t[:, 1:].contiguous(), sigmas


def test_render_weights_match_nerfacc_batched():
    t0, t1, sigmas = _batched()
    ref_w, ref_trans, ref_alpha = nerfacc.render_weight_from_density(t0, t1, sigmas)
    ri = torch.arange(t0.shape[0]).repeat_interleave(t0.shape[1])
    w, trans, alpha = render_weights(t0.reshape(-1), t1.reshape(-1), sigmas.reshape(-1), ri)
    torch.testing.assert_close(w.view_as(ref_w), ref_w, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(trans.view_as(ref_trans), ref_trans, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(alpha.view_as(ref_alpha), ref_alpha, rtol=1e-5, atol=1e-6)


def test_accumulate_matches_nerfacc_packed():
    g = torch.Generator().manual_seed(1)
    ri = torch.sort(torch.randint(0, 9, (50,), generator=g)).values
    w, values = torch.rand(50, generator=g), torch.rand(50, 3, generator=g)
    ref = nerfacc.accumulate_along_rays(w, values, ray_indices=ri, n_rays=12)
    torch.testing.assert_close(accumulate(w, ri, 12, values), ref)
    ref_opacity = nerfacc.accumulate_along_rays(w, None, ray_indices=ri, n_rays=12)
    torch.testing.assert_close(accumulate(w, ri, 12), ref_opacity)


def test_occupancy_update_matches_nerfacc_estimator():
    # an opacity that is constant inside each cell: the random jitter of both updates cannot
    # change the result, so occupancies and binaries must be equal cell for cell
    aabb, res = [-1.0, -2.0, 0.0, 1.0, 2.0, 1.0], 8
    lo, hi = torch.tensor(aabb[:3]), torch.tensor(aabb[3:])

    def occ_fn(x):
        ijk = ((x - lo) / (hi - lo) * res).floor().clamp(0, res - 1)
        v = torch.sin(ijk[:, 0] * 1.3 + ijk[:, 1] * 0.7 + ijk[:, 2] * 2.1) * 0.02 + 0.012
        return v.clamp(min=0)[:, None]

    ref = nerfacc.OccGridEstimator(roi_aabb=aabb, resolution=res, levels=1)
    ref.train()
    ours = OccupancyGrid(aabb, resolution=res, ema_decay=0.95, threshold=0.01, warmup_steps=256)
    for step in (0, 16):  # two warm-up updates: all cells, EMA with decay
        ref.update_every_n_steps(step, occ_fn, occ_thre=0.01, ema_decay=0.95, warmup_steps=256, n=16)
        ours.update(step, occ_fn)
    torch.testing.assert_close(ours.occs, ref.occs)
    assert torch.equal(ours.binaries, ref.binaries.reshape(-1))
    assert 0 < int(ours.binaries.sum()) < res**3  # the threshold splits the grid
