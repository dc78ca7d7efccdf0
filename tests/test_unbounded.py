"""Unbounded scenes: the contraction, the contracted occupancy grid and its marcher (torch twin,
native C++ walk and a slow float64 reference), the field over all of space, per-image appearance
codes, and the preset `nerf train` picks for captures."""

import json
import math

import numpy as np
import pytest
import torch

from inr.render.contraction import contract, s_of_t, stretch, t_of_s, uncontract
from inr.render.occupancy import OccupancyGrid, march
from inr.render.rays import Rays


def test_contraction_known_values_and_inverse():
    x = torch.tensor([[0.5, -0.2, 0.9], [2.0, 0.0, 0.0], [4.0, 1.0, 0.0], [-1e6, 3.0, 0.0]])
    y = contract(x)
    assert torch.allclose(y[0], x[0])  # inside the box: unchanged
    assert torch.allclose(y[1], torch.tensor([1.5, 0.0, 0.0]))  # (2 - 1/2) * x / 2
    assert torch.allclose(y[2], torch.tensor([1.75, 0.4375, 0.0]))  # n = 4: (2 - 1/4) / 4 = 0.4375
    assert abs(float(y[3, 0]) + 2.0) < 1e-5 and y.abs().max() < 2.0
    pts = torch.randn(1000, 3, dtype=torch.float64) * torch.logspace(-1, 3, 1000, dtype=torch.float64)[:, None]
    assert torch.allclose(uncontract(contract(pts)), pts, rtol=1e-9, atol=1e-12)
    assert torch.allclose(stretch(x[:3]), torch.tensor([1.0, 4.0, 16.0]))
    # the stretch is the radial derivative: |d contract / d x| along x = 1 / n^2 beyond the box
    p = torch.tensor([[3.0, 1.0, 0.5]], dtype=torch.float64)
    h = 1e-6 * p / p.norm()
    dy = (contract(p + h) - contract(p)).norm() / h.norm()
    assert abs(float(dy) * 9.0 - 1.0) < 1e-4  # n = 3


def test_sample_spacing_is_uniform_inside_and_reaches_infinity():
    knee = 2.0
    t = torch.tensor([0.0, 1.0, 2.0, 3.0, 10.0, 1e6], dtype=torch.float64)
    s = s_of_t(t, knee)
    assert torch.allclose(s[:3], t[:3]) and torch.allclose(s[3], torch.tensor(4 - 4 / 3, dtype=torch.float64))
    assert torch.allclose(t_of_s(s, knee), t, rtol=1e-6)
    assert torch.isinf(t_of_s(torch.tensor([4.0, 5.0]), knee)).all()
    # continuous slope at the knee: the step just beyond it equals the base step
    eps = 1e-6
    slope = (t_of_s(torch.tensor([knee + eps], dtype=torch.float64), knee) - knee) / eps
    assert abs(float(slope) - 1.0) < 1e-5


def _rays(n=2000, seed=0):
    g = torch.Generator().manual_seed(seed)
    o = (torch.rand(n, 3, generator=g) * 2 - 1) * 0.9
    d = torch.nn.functional.normalize(torch.randn(n, 3, generator=g), dim=-1)
    d[:5] = torch.tensor([1.0, 0.0, 0.0])  # axis-aligned rays
    return Rays(o, d)


def _reference(ray, grid, step, near, far):
    """The contracted march of one ray, in float64 with a plain loop (an independent slow twin)."""
    o, d = ray.origins[0].double(), ray.directions[0].double()
    knee = grid.knee
    s = float(s_of_t(torch.tensor(near, dtype=torch.float64), knee))
    centre, half = grid.centre.double(), grid.half.double()
    out = []
    while s + step < 2 * knee:
        ta, tb = (knee * knee / (2 * knee - v) if v > knee else v for v in (s, s + step))
        mid = 0.5 * (ta + tb)
        if mid >= far:
            break
        u = (contract(((o + d * mid) - centre) / half) + 2) / 4
        ijk = (u.clamp(0, 1 - 1e-6) * grid.resolution).long()
        if grid.binaries[(ijk[0] * grid.resolution + ijk[1]) * grid.resolution + ijk[2]]:
            out.append((ta, tb))
        s += step
    return out


def test_contracted_march_matches_a_float64_reference_and_native_is_bit_exact():
    grid = OccupancyGrid([-1.0, -0.8, -0.5, 1.0, 1.2, 1.5], resolution=24, contracted=True)
    grid.binaries.copy_(torch.rand(24**3, generator=torch.Generator().manual_seed(1)) < 0.3)
    rays = _rays()
    twin = march(rays, grid, 0.02, near=0.1, far=500.0, backend="torch")
    fast = march(rays, grid, 0.02, near=0.1, far=500.0, backend="native")
    assert len(twin[0]) > 20000 and all(torch.equal(a, b) for a, b in zip(twin, fast))
    for stratified in (False, True):  # jittered lattices too
        a = march(rays, grid, 0.02, near=0.1, stratified=stratified, backend="torch", generator=torch.Generator().manual_seed(5))
        b = march(rays, grid, 0.02, near=0.1, stratified=stratified, backend="native", generator=torch.Generator().manual_seed(5))
        assert all(torch.equal(x, y) for x, y in zip(a, b))
    ri, t0, t1 = twin
    for r in (0, 7, 123, 1999):
        ref = np.array(_reference(rays[r : r + 1], grid, 0.02, 0.1, 500.0)).reshape(-1, 2)
        mine = torch.stack([t0[ri == r], t1[ri == r]], -1).double().numpy()
        # float32 against float64: the same samples unless a midpoint sits on a cell border
        assert abs(len(ref) - len(mine)) <= 2 and len(ref) > 10
        n = min(len(ref), len(mine))
        close = np.isclose(mine[:n], ref[:n], rtol=1e-4).all(1).mean()
        assert close > 0.95, (r, close)


def test_contracted_march_spans_near_to_far_with_growing_steps():
    grid = OccupancyGrid([-1, -1, -1, 1, 1, 1], resolution=16, contracted=True)  # all cells occupied
    ray = Rays(torch.tensor([[0.0, 0.0, 0.0]]), torch.tensor([[0.0, 0.0, 1.0]]))
    ri, t0, t1 = march(ray, grid, 0.05, near=0.2, far=1000.0)
    assert abs(float(t0[0]) - 0.2) < 1e-6 and torch.equal(t0[1:], t1[:-1])  # contiguous from near
    steps = t1 - t0
    knee = grid.knee  # 2: uniform steps up to it, then growing as t^2
    assert torch.allclose(steps[t1 <= knee], torch.tensor(0.05), atol=1e-5)
    far_part = (t0 > 2 * knee) & (t0 < 3 * knee)  # (the derivative rule holds where steps are small)
    assert torch.allclose(steps[far_part], 0.05 * (t0[far_part] / knee) ** 2, rtol=0.1)
    # the lattice ends one step before s = 2 knee, i.e. near t = knee^2 / step (here 80), before far
    assert float(t1[-1]) >= 0.5 * knee**2 / 0.05 and float(t1[-1]) <= knee**2 / 0.05 + 1e-3
    assert abs(len(ri) - (2 * knee - 0.2) / 0.05) <= 2  # steps bounded by 2 knee / step
    ri, t0, t1 = march(ray, grid, 0.05, near=0.2, far=10.0)  # a nearer far ends the rays there
    mids = 0.5 * (t0 + t1)
    assert float(mids[-1]) < 10.0 and float(t1[-1]) >= 10.0


def test_contracted_grid_update_finds_a_far_shell():
    grid = OccupancyGrid([-1, -1, -1, 1, 1, 1], resolution=16, contracted=True, warmup_steps=10)
    u = (torch.rand(500, 3) * 0.999)
    assert torch.allclose(grid.to_unit(grid.from_unit(u)), u, atol=1e-4)

    def density(p):  # a shell of world points 2 to 3 units out (max-norm): 'far walls'
        n = p.abs().amax(-1)
        return ((n > 2) & (n < 3)).float() * 10.0

    gen = torch.Generator().manual_seed(0)
    for step in range(20):  # one jittered point per cell and update: 20 of them find the shell
        grid.update(step, lambda p: density(p) * 0.01, generator=gen)
    occ, occs = grid.binaries.view(16, 16, 16), grid.occs.view(16, 16, 16)
    c = (torch.arange(16) + 0.5) / 16 * 4 - 2  # cell centres in contracted space
    m = torch.maximum(torch.maximum(c[:, None, None].abs(), c[None, :, None].abs()), c[None, None, :].abs())
    # max-norm 2 and 3 contract to 1.5 and 1.667: the layer of cells between 1.5 and 1.75
    layer = (m > 1.5) & (m < 1.75)
    assert occ[layer].all() and not occ[~layer].any()
    # opacities carry the stretch n^2 (4 to 9) of the longer world steps there: without it, 0.1
    assert float(occs[layer].max()) > 0.8 and float(occs[layer].min()) >= 0.4 * 0.95**19


def test_a_young_thin_field_keeps_its_inner_cells():
    """A fresh field is thin everywhere (density ~ e^-1): far cells' stretched opacities must not
    raise the threshold so that the whole inner region is culled (objects could never be learned)."""
    grid = OccupancyGrid([-1, -1, -1, 1, 1, 1], resolution=16, contracted=True)
    g = torch.Generator().manual_seed(0)
    grid.update(0, lambda p: (0.37 + 0.05 * torch.rand(len(p), generator=g)) * 0.0135, generator=g)
    occ = grid.binaries.view(16, 16, 16)
    inner = occ[4:12, 4:12, 4:12]
    assert 0.2 < inner.float().mean() < 0.8 and occ.float().mean() > inner.float().mean()
    assert abs(grid.mean_occupancy() - float(grid.occs.view(16, 16, 16)[4:12, 4:12, 4:12].mean())) < 1e-9


def test_contracted_field_has_density_everywhere_and_bounded_only_inside():
    from inr.render.radiance import RadianceField, RadianceFieldConfig

    cfg = dict(encoding="hashgrid", encoding_options={"n_levels": 2, "log2_table": 10, "base_resolution": 4, "max_resolution": 16},
               direction_encoding="spherical_harmonics", direction_options={"degree": 2})
    far = torch.tensor([[50.0, 0.0, 0.0], [0.0, -1e5, 3.0], [0.3, 0.2, 0.1]])
    bounded = RadianceField(RadianceFieldConfig.from_dict(cfg), [-1, -1, -1, 1, 1, 1])
    unbounded = RadianceField(RadianceFieldConfig.from_dict({**cfg, "contraction": True}), [-1, -1, -1, 1, 1, 1])
    assert (bounded.density(far)[:2] == 0).all() and bounded.density(far)[2] > 0
    assert (unbounded.density(far) > 0).all() and torch.isfinite(unbounded.density(far)).all()
    x, _ = unbounded.normalize(far)
    assert x.abs().max() < 1.0  # the encoding sees [-1, 1]^3


def test_appearance_codes_change_colour_and_train_only_their_images():
    from dataclasses import asdict

    from inr.presets import load_nerf_preset
    from inr.tasks.nerf import NerfModule

    p = load_nerf_preset("ngp_unbounded", {"train.compile": False, "train.grid_warmup_steps": 1})
    assert p.field.contraction and p.field.appearance_dim == 16
    m = NerfModule(p.field.to_dict(), asdict(p.train), [-1, -1, -1, 1, 1, 1], near=0.05, n_images=5)
    with torch.no_grad():
        m.field.appearance.weight[3] += 2.0
    pts, dirs = torch.rand(64, 3) - 0.5, torch.nn.functional.normalize(torch.randn(64, 3), dim=-1)
    c3 = m.field(pts, dirs, m.field.appearance_codes(torch.full((64,), 3), 64, "cpu"))[1]
    c1 = m.field(pts, dirs, m.field.appearance_codes(torch.full((64,), 1), 64, "cpu"))[1]
    mean = m.field(pts, dirs)[1]
    expect = m.field(pts, dirs, m.field.appearance.weight.mean(0).expand(64, -1))[1]
    assert not torch.allclose(c3, c1) and torch.allclose(mean, expect)
    g = torch.Generator().manual_seed(0)
    n = 256
    o = torch.zeros(n, 3) + torch.tensor([0.0, 0.0, 0.5])
    d = torch.nn.functional.normalize(torch.randn(n, 3, generator=g), dim=-1)
    rgba = torch.cat([torch.rand(n, 3, generator=g), torch.ones(n, 1)], -1)
    images = torch.tensor([0, 2] * (n // 2))
    m.n_rays = n
    loss = m.training_step((o, d, rgba, images), 0)
    loss.backward()
    grad = m.field.appearance.weight.grad
    assert grad[[0, 2]].abs().sum() > 0 and grad[[1, 3, 4]].abs().sum() == 0


def _process_like_scene(root, n=6, w=16, h=12, marker=True):
    import imageio.v3 as iio

    from inr.data.testscenes import ring_poses

    (root / "images").mkdir(parents=True)
    frames = []
    for k, m in enumerate(ring_poses(n)):
        iio.imwrite(root / "images" / f"frame_{k:05d}.png", np.full((h, w, 3), 40 * k, np.uint8))
        frames.append({"file_path": f"images/frame_{k:05d}.png", "transform_matrix": m.tolist()})
    data = {"fl_x": 14.0, "fl_y": 14.0, "cx": w / 2, "cy": h / 2, "w": w, "h": h, "frames": frames}
    if marker:
        data["inr_process"] = {"registered": n, "given": n}
    (root / "transforms.json").write_text(json.dumps(data))
    return root


def test_nerf_train_picks_the_unbounded_preset_for_captures_and_says_so(tmp_path, capsys):
    from inr.cli import main
    from inr.data.scenes import capture_kind
    from inr.tasks.nerf_fit import NerfTask

    cap = _process_like_scene(tmp_path / "cap")
    plain = _process_like_scene(tmp_path / "plain", marker=False)
    assert "inr nerf process" in capture_kind(cap) and capture_kind(plain) is None
    assert NerfTask.auto_preset(str(plain)) is None
    out = tmp_path / "run"
    assert main(["nerf", "train", str(cap), "--steps", "2", "--out", str(out), "--no-progress",
                 "--set", "train.compile=false", "--set", "train.eval_every=2"]) == 0
    first = capsys.readouterr().out.strip().splitlines()[0]
    assert first.startswith("inr: preset ngp_unbounded") and "--preset overrides" in first
    saved = (out / "config.yaml").read_text()
    assert "contraction: true" in saved and "appearance_dim: 16" in saved
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["preset"] == "ngp_unbounded" and math.isfinite(metrics["test_psnr"])
    out2 = tmp_path / "run2"  # --preset overrides
    assert main(["nerf", "train", str(cap), "--preset", "ngp", "--steps", "1", "--out", str(out2), "--no-progress",
                 "--set", "train.compile=false"]) == 0
    assert "ngp_unbounded" not in capsys.readouterr().out
    assert json.loads((out2 / "metrics.json").read_text())["preset"] == "ngp"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_contracted_march_on_cuda_matches_cpu():
    grid = OccupancyGrid([-1, -1, -1, 1, 1, 1], resolution=16, contracted=True)
    grid.binaries.copy_(torch.rand(16**3, generator=torch.Generator().manual_seed(2)) < 0.4)
    rays = _rays(500)
    cpu = march(rays, grid, 0.03, near=0.1, far=300.0, backend="torch")
    gpu = march(Rays(rays.origins.cuda(), rays.directions.cuda()), grid.cuda(), 0.03, near=0.1, far=300.0)
    assert gpu[0].is_cuda and torch.equal(cpu[0], gpu[0].cpu())
    assert torch.allclose(cpu[1], gpu[1].cpu(), rtol=1e-5) and torch.allclose(cpu[2], gpu[2].cpu(), rtol=1e-5)
