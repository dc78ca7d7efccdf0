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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_nerfacc_marcher_renders_like_the_torch_marcher_on_cuda():
    # same grid, same toy density: both marchers keep the same samples (float32 rounding at cell
    # boundaries may flip a few) and give the same image
    from inr.render.occupancy import march

    from .test_render import _camera_rays, _sphere_density

    dev = torch.device("cuda")
    aabb = torch.tensor([-1.0, -1, -1, 1, 1, 1])
    step = 2 * 3**0.5 / 256
    grid = OccupancyGrid(aabb, resolution=32, warmup_steps=100).to(dev)
    for k in range(16):
        grid.update(k, lambda p: _sphere_density(p) * step)
    rays = _camera_rays()
    rays = type(rays)(rays.origins.to(dev), rays.directions.to(dev))

    def sigma_fn(t0, t1, ri):
        return _sphere_density(rays.origins[ri] + rays.directions[ri] * ((t0 + t1) / 2)[:, None])

    images, counts, firsts = [], [], []
    for backend in ("torch", "nerfacc"):
        ri, t0, t1 = march(rays, grid, step, near=0.05, sigma_fn=sigma_fn, backend=backend)
        w, _, _ = render_weights(t0, t1, sigma_fn(t0, t1, ri), ri)
        images.append(accumulate(w, ri, len(rays)))
        counts.append(torch.bincount(ri, minlength=len(rays)))
        first = torch.full((len(rays),), -1.0, device=dev)
        firsts.append(first.scatter_reduce(0, ri, t0, "amin", include_self=False))
    assert images[0].max() > 0.99
    assert int(counts[0].sum()) > 0
    same = (counts[0] == counts[1]) & ((firsts[0] - firsts[1]).abs() < 1e-4)
    assert float(same.float().mean()) > 0.99, f"{int((~same).sum())} of {len(rays)} rays sample differently"
    torch.testing.assert_close(images[1], images[0], atol=1e-2, rtol=0)
    assert (images[1] - images[0]).abs().mean() < 1e-3


def test_marcher_backend_switch_on_cpu():
    from inr._external import MissingBackend
    from inr.render.occupancy import march
    from inr.render.rays import Rays

    grid = OccupancyGrid([-1.0, -1, -1, 1, 1, 1], resolution=4)
    rays = Rays(torch.tensor([[0.0, 0, -3]]), torch.tensor([[0.0, 0, 1]]))
    ri, t0, _ = march(rays, grid, 0.5, backend="auto")  # CPU rays: the torch marcher
    assert len(ri) == 4 and float(t0[0]) == pytest.approx(2.0)
    if not torch.cuda.is_available():
        with pytest.raises(MissingBackend, match="CUDA"):
            march(rays, grid, 0.5, backend="nerfacc")
    with pytest.raises(ValueError, match="backend"):
        march(rays, grid, 0.5, backend="bogus")


def test_marcher_samples_sit_on_nerfaccs_lattice_from_the_near_plane():
    from inr.render.occupancy import march
    from inr.render.rays import Rays

    grid = OccupancyGrid([-1.0, -1, -1, 1, 1, 1], resolution=4)
    rays = Rays(torch.tensor([[0.0, 0, -3]]), torch.tensor([[0.0, 0, 1]]))
    # near 0.3, step 0.5: lattice 0.3, 0.8, ..., 1.8, 2.3, ...; the box spans t in [2, 4): the
    # first kept sample is [1.8, 2.3] (its midpoint 2.05 is inside), the last [3.3, 3.8]
    ri, t0, t1 = march(rays, grid, 0.5, near=0.3)
    assert torch.allclose(t0, torch.tensor([1.8, 2.3, 2.8, 3.3])) and torch.allclose(t1 - t0, torch.full((4,), 0.5))
    # stratified: one offset per ray in [0, step), the same lattice spacing
    ri, t0, _ = march(rays, grid, 0.5, near=0.3, stratified=True, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(t0[1:] - t0[:-1], torch.full((len(t0) - 1,), 0.5)) and 1.5 <= float(t0[0]) < 2.5


def test_marcher_visibility_rule_is_nerfaccs():
    from inr.render.occupancy import march
    from inr.render.rays import Rays

    grid = OccupancyGrid([-1.0, -1, -1, 1, 1, 1], resolution=4)
    grid.occs.fill_(0.5)
    rays = Rays(torch.tensor([[0.0, 0, -3]]), torch.tensor([[0.0, 0, 1]]))
    sig = torch.tensor([0.0, 0.0, 40.0, 1.0])  # samples t0 = 2, 2.5, 3, 3.5

    def sigma_fn(t0, t1, ri):
        return sig[((t0 - 2.0) / 0.5).round().long()]

    # alpha_thre 0: zero-alpha samples stay (nerfacc keeps them), the sample behind the wall
    # (transmittance exp(-20) < 1e-4) goes
    ri, t0, _ = march(rays, grid, 0.5, sigma_fn=sigma_fn, early_stop_eps=1e-4)
    assert t0.tolist() == [2.0, 2.5, 3.0]
    # alpha_thre > 0 drops them; it is lowered to the mean occupancy (0.5) like nerfacc's
    ri, t0, _ = march(rays, grid, 0.5, sigma_fn=sigma_fn, alpha_thre=0.9)
    assert t0.tolist() == [3.0]
