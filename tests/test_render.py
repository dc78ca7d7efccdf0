import math

import pytest
import torch

from inr.render import accumulate, pinhole_rays, render_weights


def test_pinhole_rays_known_camera():
    # camera at (0, 0, 4) looking down -z (identity rotation), 4x4 image, f = 2, principal point at the centre
    c2w = torch.eye(4)
    c2w[2, 3] = 4.0
    pixels = torch.tensor([[1, 2], [0, 0], [3, 3]])
    rays = pinhole_rays(c2w, 2.0, 2.0, 2.0, 2.0, pixels)
    # pixel (1, 2): u = 2.5, v = 1.5 -> ((2.5 - 2)/2, -(1.5 - 2)/2, -1) = (0.25, 0.25, -1)
    d = torch.tensor([0.25, 0.25, -1.0]) / math.sqrt(0.25**2 * 2 + 1)
    assert torch.allclose(rays.directions[0], d, atol=1e-6)
    # pixel (0, 0): (-0.75, 0.75, -1); pixel (3, 3): (0.75, -0.75, -1)
    assert torch.allclose(rays.directions[1] * math.sqrt(0.75**2 * 2 + 1), torch.tensor([-0.75, 0.75, -1.0]), atol=1e-6)
    assert torch.allclose(rays.directions[2] * math.sqrt(0.75**2 * 2 + 1), torch.tensor([0.75, -0.75, -1.0]), atol=1e-6)
    assert torch.allclose(rays.origins, torch.tensor([[0.0, 0.0, 4.0]] * 3))


def test_pinhole_rays_rotated_camera():
    # camera rotated 90 degrees about y: its -z axis points along world -x
    c2w = torch.tensor([[0.0, 0.0, 1.0, 3.0], [0.0, 1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0]])
    rays = pinhole_rays(c2w, 10.0, 10.0, 0.5, 0.5, torch.tensor([[0, 0]]))
    assert torch.allclose(rays.directions[0], torch.tensor([-1.0, 0.0, 0.0]), atol=1e-6)
    assert torch.allclose(rays.origins[0], torch.tensor([3.0, 0.0, 0.0]))


def test_render_weights_hand_worked():
    # ray 0: three samples of length 1 with sigma 0, ln 2, ln 4
    #   alphas: 0, 1/2, 3/4; transmittance: [1.0, 1.0, 0.5]; weights: [0, 0.5, 0.375]
    # ray 1: one sample, sigma ln 10, length 0.5: alpha = 1 - 10^-0.5, T = 1
    t0 = torch.tensor([0.0, 1.0, 2.0, 0.0])
    t1 = torch.tensor([1.0, 2.0, 3.0, 0.5])
    sig = torch.tensor([0.0, math.log(2), math.log(4), math.log(10)])
    rays = torch.tensor([0, 0, 0, 1])
    w, T, a = render_weights(t0, t1, sig, rays)
    assert torch.allclose(T, torch.tensor([1.0, 1.0, 0.5, 1.0]), atol=1e-6)
    assert torch.allclose(a, torch.tensor([0.0, 0.5, 0.75, 1 - 10**-0.5]), atol=1e-6)
    assert torch.allclose(w, torch.tensor([0.0, 0.5, 0.375, 1 - 10**-0.5]), atol=1e-6)
    rgb = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 1.0]])
    color = accumulate(w, rays, 3, rgb)
    assert torch.allclose(color, torch.tensor([[0.0, 0.5, 0.375], [1 - 10**-0.5] * 3, [0.0, 0.0, 0.0]]), atol=1e-6)
    assert torch.allclose(accumulate(w, rays, 3)[:, 0], torch.tensor([0.875, 1 - 10**-0.5, 0.0]), atol=1e-6)


def test_render_weights_match_dense_reference_and_gradients():
    # random packed rays against a per-ray loop with torch.cumprod, values and gradients
    g = torch.Generator().manual_seed(0)
    counts = [5, 1, 0, 7, 3]
    rays = torch.cat([torch.full((c,), i) for i, c in enumerate(counts)])
    dt = torch.rand(len(rays), generator=g, dtype=torch.float64) * 0.2
    t0 = torch.cat([torch.cumsum(d, 0) - d for d in torch.split(dt, counts)])
    sig = (torch.rand(len(rays), generator=g, dtype=torch.float64) * 5).requires_grad_()
    w, _, _ = render_weights(t0, t0 + dt, sig, rays)
    ref = []
    for s, d in zip(torch.split(sig, counts), torch.split(dt, counts)):
        a = 1 - torch.exp(-s * d)
        T = torch.cumprod(torch.cat([torch.ones(1, dtype=s.dtype), 1 - a[:-1]]), 0)
        ref.append(T * a)
    ref = torch.cat(ref)
    assert torch.allclose(w, ref, atol=1e-12)
    g1 = torch.autograd.grad(w.square().sum(), sig)[0]
    g2 = torch.autograd.grad(ref.square().sum(), sig)[0]
    assert torch.allclose(g1, g2, atol=1e-10)


def _sphere_density(points, radius=0.5, value=30.0):
    return torch.where(points.norm(dim=-1) < radius, torch.full_like(points[:, 0], value), torch.zeros_like(points[:, 0]))


def _camera_rays(n=24):
    c2w = torch.eye(4)
    c2w[2, 3] = 2.5
    ii, jj = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    return pinhole_rays(c2w, n * 1.2, n * 1.2, n / 2, n / 2, torch.stack([ii, jj], -1).reshape(-1, 2))


def test_ray_aabb_known_distances():
    from inr.render.occupancy import ray_aabb
    from inr.render.rays import Rays

    rays = Rays(torch.tensor([[0.0, 0.0, 3.0], [5.0, 5.0, 3.0]]), torch.tensor([[0.0, 0.0, -1.0], [0.0, 0.0, -1.0]]))
    t0, t1 = ray_aabb(rays, torch.tensor([-1.0, -1, -1, 1, 1, 1]))
    assert torch.allclose(t0[0], torch.tensor(2.0)) and torch.allclose(t1[0], torch.tensor(4.0))
    assert t1[1] < t0[1]  # the second ray misses the box


def test_marcher_skips_empty_space_and_matches_dense_rendering():
    from inr.render.occupancy import OccupancyGrid, march

    aabb = torch.tensor([-1.0, -1, -1, 1, 1, 1])
    step = 2 * 3**0.5 / 256
    grid = OccupancyGrid(aabb, resolution=32, warmup_steps=100)
    # one jittered point per cell per update: a cell the sphere only clips is caught over
    # several updates (the EMA keeps the max), as during training
    gen = torch.Generator().manual_seed(0)
    for k in range(16):
        grid.update(k, lambda p: _sphere_density(p) * step, generator=gen)
    # cells wholly outside the sphere are empty; the centre is occupied
    assert grid.binaries.float().mean() < 0.2
    assert grid.occupied(torch.zeros(1, 3)).item() and not grid.occupied(torch.tensor([[0.9, 0.9, 0.9]])).item()
    rays = _camera_rays()

    def sigma_fn(t0, t1, ri):
        return _sphere_density(rays.origins[ri] + rays.directions[ri] * ((t0 + t1) / 2)[:, None])

    # dense reference: every uniform step in the box, no grid, no early termination
    full = OccupancyGrid(aabb, resolution=1)
    ri_d, t0_d, t1_d = march(rays, full, step)
    w_d, _, _ = render_weights(t0_d, t1_d, sigma_fn(t0_d, t1_d, ri_d), ri_d)
    ri, t0, t1 = march(rays, grid, step, sigma_fn=sigma_fn, early_stop_eps=1e-4)
    w, _, _ = render_weights(t0, t1, sigma_fn(t0, t1, ri), ri)
    assert len(ri) < 0.25 * len(ri_d)  # empty space and occluded samples skipped
    dense = accumulate(w_d, ri_d, len(rays))
    fast = accumulate(w, ri, len(rays))
    assert dense.max() > 0.99 and dense.min() == 0.0  # the sphere covers some rays, misses others
    # early termination drops < 1e-4 of opacity; rays grazing the sphere may also miss a sliver
    # of a cell no jittered point has hit yet: 1e-3 at worst, far less on average
    assert torch.allclose(fast, dense, atol=1e-3)
    assert (fast - dense).abs().mean() < 1e-4


def test_occupancy_update_decays_and_keeps_max():
    from inr.render.occupancy import OccupancyGrid

    grid = OccupancyGrid([-1, -1, -1, 1, 1, 1], resolution=2, ema_decay=0.5, threshold=0.3, warmup_steps=10)
    grid.update(0, lambda p: torch.ones(len(p)))
    assert torch.allclose(grid.occs, torch.ones(8)) and grid.binaries.all()
    grid.update(1, lambda p: torch.zeros(len(p)))
    assert torch.allclose(grid.occs, torch.full((8,), 0.5))  # max(1 * 0.5, 0)
    grid.update(2, lambda p: (p[:, 0] > 0).float() * 0.2)
    # x > 0 cells: max(0.25, 0.2) = 0.25; others 0.25; threshold min(0.3, mean 0.25) -> none above
    assert torch.allclose(grid.occs, torch.full((8,), 0.25)) and not grid.binaries.any()


def test_trunc_exp_gradcheck_and_clamped_gradient():
    from inr.render.radiance import trunc_exp

    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(trunc_exp, (x,))  # below 15 it is exactly exp
    big = torch.tensor([20.0], dtype=torch.float64, requires_grad=True)
    trunc_exp(big).backward()
    assert big.grad.item() == pytest.approx(math.exp(15.0))


def test_radiance_field_shapes_box_and_direction_dependence():
    from inr.render.radiance import RadianceField, RadianceFieldConfig

    cfg = RadianceFieldConfig(encoding_options={"n_levels": 4, "log2_table": 10, "max_resolution": 64})
    f = RadianceField(cfg, [-2, -2, -2, 2, 2, 2])
    pts = torch.tensor([[0.0, 0.0, 0.0], [1.9, -1.9, 0.5], [2.5, 0.0, 0.0]])
    dirs = torch.nn.functional.normalize(torch.randn(3, 3), dim=-1)
    sigma, rgb = f(pts, dirs)
    assert sigma.shape == (3,) and rgb.shape == (3, 3)
    assert sigma[2] == 0 and (sigma[:2] > 0).all()  # outside the box: empty
    assert ((rgb > 0) & (rgb < 1)).all()
    _, rgb2 = f(pts, -dirs)
    assert not torch.allclose(rgb, rgb2)  # colour depends on the view direction
    assert torch.equal(f.density(pts), sigma)


def test_pinhole_rays_per_pixel_cameras_match_one_camera_at_a_time():
    c2w = torch.eye(4).repeat(2, 1, 1)
    c2w[1, :3, 3] = torch.tensor([1.0, 2.0, 3.0])
    pixels = torch.tensor([[1, 2], [3, 0]])
    fx, fy = torch.tensor([2.0, 5.0]), torch.tensor([3.0, 4.0])
    cx, cy = torch.tensor([2.0, 1.0]), torch.tensor([2.5, 0.5])
    both = pinhole_rays(c2w, fx, fy, cx, cy, pixels)
    for k in range(2):
        one = pinhole_rays(c2w[k], float(fx[k]), float(fy[k]), float(cx[k]), float(cy[k]), pixels[k : k + 1])
        assert torch.allclose(both.directions[k], one.directions[0]) and torch.allclose(both.origins[k], one.origins[0])


def test_look_at_hand_computed():
    from inr.render.rays import look_at

    c2w = look_at(torch.tensor([0.0, -4.0, 0.0]), torch.zeros(3), torch.tensor([0.0, 0.0, 1.0]))
    # looking along +y with z up: right = +x, up = +z, back (camera +z) = -y, at (0, -4, 0)
    expected = torch.tensor([[1.0, 0, 0, 0], [0, 0, -1, -4], [0, 1, 0, 0], [0, 0, 0, 1]])
    torch.testing.assert_close(c2w, expected)
    # the ray through the image centre points at the target
    r = pinhole_rays(c2w, 10.0, 10.0, 5.0, 5.0, torch.tensor([[4, 4]]))
    torch.testing.assert_close(r.directions, torch.tensor([[-0.0499, 0.9975, 0.0499]]), atol=1e-4, rtol=0)
    with pytest.raises(ValueError):
        look_at(torch.zeros(3), torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.0, 0.0, 1.0]))


def test_orbit_poses_recover_the_cameras_circle():
    from inr.render.paths import orbit_poses
    from inr.render.rays import look_at

    centre, up = torch.tensor([0.5, -0.2, 0.3]), torch.tensor([0.0, 0.0, 1.0])
    cams = []
    for k in range(7):  # cameras on a circle of radius 3, 2 above the centre, looking at it
        a = 0.4 + 2 * math.pi * k / 7
        eye = centre + torch.tensor([3 * math.cos(a), 3 * math.sin(a), 2.0])
        cams.append(look_at(eye, centre, up))
    poses = orbit_poses(torch.stack(cams), 12)
    assert poses.shape == (12, 4, 4)
    off = poses[:, :3, 3] - centre
    torch.testing.assert_close(off[:, 2], torch.full((12,), 2.0), atol=1e-4, rtol=0)
    torch.testing.assert_close(off[:, :2].norm(dim=-1), torch.full((12,), 3.0), atol=1e-4, rtol=0)
    forward = -poses[:, :3, 2]
    torch.testing.assert_close(forward, torch.nn.functional.normalize(-off, dim=-1), atol=1e-4, rtol=0)
    angles = torch.atan2(off[:, 1], off[:, 0])
    steps = torch.remainder(angles[1:] - angles[:-1], 2 * math.pi)
    torch.testing.assert_close(steps, torch.full((11,), 2 * math.pi / 12), atol=1e-4, rtol=0)


def test_extract_mesh_of_a_sphere_is_closed_and_coloured():
    import trimesh

    from inr.render.extract import extract_mesh

    def density(p):  # 100 inside a sphere of radius 0.5, a smooth step across its surface
        return 100 * torch.sigmoid((0.5 - p.norm(dim=-1)) * 50)

    def color(p, d):
        return d * 0.5 + 0.5  # encodes the direction the colour was asked for

    aabb = torch.tensor([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0])
    v, f, c = extract_mesh(density, aabb, 48, 50.0, color)
    mesh = trimesh.Trimesh(v, f, process=False)
    assert mesh.is_watertight
    r = torch.from_numpy(v).norm(dim=-1)
    assert float((r - 0.5).abs().max()) < 2.0 / 47  # within a lattice cell of the true surface
    assert mesh.volume == pytest.approx(4 / 3 * math.pi * 0.125, rel=0.03)  # outward faces: positive volume
    # colours were looked up with the direction pointing into the surface
    inward = -torch.from_numpy(v) / r[:, None]
    torch.testing.assert_close(torch.from_numpy(c), inward * 0.5 + 0.5, atol=0.05, rtol=0)
    # a box cutting the sphere still gives a closed surface (zero padding outside the box)
    v2, f2, _ = extract_mesh(density, torch.tensor([-1.0, -1.0, 0.0, 1.0, 1.0, 1.0]), 32, 50.0)
    assert trimesh.Trimesh(v2, f2, process=False).is_watertight
    with pytest.raises(ValueError, match="no surface"):
        extract_mesh(density, aabb, 16, 500.0)


def test_functional_renderer_known_answer_and_chunks_agree():
    import math

    from inr.render import RenderSettings, Rays, render_rays, render_rays_chunked
    from inr.render.occupancy import OccupancyGrid

    grid = OccupancyGrid([-1.0, -1, -1, 1, 1, 1], resolution=4)  # every cell occupied

    def field(p, d):  # density 2 and a fixed colour inside the box
        inside = (p.abs() < 1).all(-1).float()
        return 2.0 * inside, torch.tensor([0.2, 0.4, 0.6]).expand(len(p), 3)

    rays = Rays(torch.tensor([[0.0, 0, -3], [0.5, 0.5, -3], [0.0, 5, -3]]), torch.tensor([[0.0, 0, 1]] * 3))
    bg = torch.ones(3, 3)
    settings = RenderSettings(step_size=0.01, early_stop_eps=0.0)
    out = render_rays(field, grid, rays, bg, settings)
    # 2 units of density 2: opacity 1 - e^-4; the third ray misses the box
    alpha = 1 - math.exp(-4.0)
    assert torch.allclose(out.opacity[:, 0], torch.tensor([alpha, alpha, 0.0]), atol=1e-5)
    assert torch.allclose(out.color[0], alpha * torch.tensor([0.2, 0.4, 0.6]) + (1 - alpha), atol=1e-5)
    assert torch.allclose(out.color[2], torch.ones(3))
    # the expected depth of a uniform slab from t=2: 2 + (1/s) - L e^{-sL} / (1 - e^{-sL}), s=2, L=2
    expect = 2 + 0.5 - 2 * math.exp(-4) / alpha
    assert abs(float(out.depth[0]) - expect) < 1e-2
    chunked = render_rays_chunked(field, grid, rays, 1.0, settings, chunk=2)
    torch.testing.assert_close(chunked.color, out.color)
    assert chunked.n_samples == out.n_samples


def test_spiral_poses_look_at_the_focus_within_the_cameras_spread():
    from inr.render.paths import spiral_poses
    from inr.render.rays import look_at

    # forward-facing cameras spread over x in [-0.4, 0.4], y in [-0.2, 0.2], looking down -z
    cams = [look_at(torch.tensor([x, y, 0.0]), torch.tensor([x, y, -1.0]), torch.tensor([0.0, 1.0, 0.0]))
            for x in (-0.4, 0.0, 0.4) for y in (-0.2, 0.2)]
    poses = spiral_poses(torch.stack(cams), 24, focus=3.0, rotations=2, percentile=100)
    assert poses.shape == (24, 4, 4)
    pos = poses[:, :3, 3]
    assert float(pos[:, 0].abs().max()) == pytest.approx(0.4, abs=1e-5) and float(pos[:, 1].abs().max()) <= 0.2 + 1e-5
    ahead = torch.nn.functional.normalize(torch.tensor([0.0, 0.0, -3.0]) - pos, dim=1)
    assert torch.allclose(-poses[:, :3, 2], ahead, atol=1e-5)  # every frame looks at (0, 0, -3)
    assert torch.allclose(poses[0, :3, 3], torch.tensor([0.4, 0.0, 0.0]), atol=1e-5)  # a = 0: (r_x, 0, 0)


def test_nerfstudio_camera_path_files(tmp_path):
    import json

    import numpy as np

    from inr import InputError
    from inr.data.camera_path import read_camera_path

    a, b = np.eye(4), np.eye(4)
    b[:3, 3] = [2.0, 0.0, 0.0]
    f = tmp_path / "path.json"
    f.write_text(json.dumps({"render_height": 30, "render_width": 40, "fps": 12, "camera_path": [
        {"camera_to_world": a.ravel().tolist(), "fov": 50, "aspect": 4 / 3},
        {"camera_to_world": b.ravel().tolist(), "fov": 60, "aspect": 4 / 3}]}))
    p = read_camera_path(f)
    assert p.size == (30, 40) and p.fps == 12 and p.fov_y.tolist() == [50, 60]
    assert torch.allclose(p.poses[1], torch.from_numpy(b).float())
    # keyframes only: three.js matrices (column-major: the translation in elements 12-14)
    f.write_text(json.dumps({"seconds": 1, "fps": 5, "keyframes": [
        {"matrix": json.dumps(a.T.ravel().tolist()), "fov": 40}, {"matrix": json.dumps(b.T.ravel().tolist()), "fov": 80}]}))
    p = read_camera_path(f)
    assert len(p.poses) == 5 and torch.allclose(p.poses[-1, :3, 3], torch.tensor([2.0, 0, 0]))
    assert torch.allclose(p.poses[2, :3, 3], torch.tensor([1.0, 0, 0])) and p.fov_y[2] == pytest.approx(60)
    f.write_text(json.dumps({"keyframes": [{"matrix": "[1, 2]"}, {"matrix": "[1]"}]}))
    with pytest.raises(InputError, match=r"keyframes\[0\].matrix: expected 16 finite numbers"):
        read_camera_path(f)
    f.write_text("{}")
    with pytest.raises(InputError, match="has no camera_path list"):
        read_camera_path(f)
