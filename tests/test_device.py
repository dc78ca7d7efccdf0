"""Every tensor a function creates follows its inputs' device.

Without a GPU this is checked with two torch modes: `torch.device("meta")` makes every factory
call that does not name a device (torch.zeros, arange, full, ...) land on the meta device, and
`SameDevice` raises as soon as one op mixes tensors of two devices (a 0-dim CPU scalar aside, as
CUDA allows). The inputs and modules are on the CPU, so a missing `device=` fails loudly here
exactly where it would hand a CPU tensor to a CUDA module on a GPU machine (and indexing with a
meta index, which torch would silently accept, is caught too).
"""

from contextlib import contextmanager

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves


class SameDevice(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        devices = {t.device for t in tree_leaves((args, kwargs))
                   if isinstance(t, torch.Tensor) and not (t.device.type == "cpu" and t.dim() == 0)}
        if len(devices) > 1:
            raise RuntimeError(f"{getattr(func, '__name__', func)} mixes devices {sorted(map(str, devices))}")
        return func(*args, **kwargs)


@contextmanager
def factories_elsewhere():
    """Factory calls without device= go to meta; mixing devices raises."""
    with torch.device("meta"), SameDevice():
        yield


def test_the_check_fails_on_a_missing_device():
    x = torch.rand(4, 3)
    with pytest.raises(RuntimeError):
        with factories_elsewhere():
            x + torch.zeros(4, 3)  # the bug this file hunts
    with pytest.raises(RuntimeError):
        with factories_elsewhere():
            x[torch.arange(2)]  # torch itself returns garbage here instead of failing
    with factories_elsewhere():
        y = x + torch.zeros(4, 3, device=x.device) + torch.zeros_like(x)
    assert y.device.type == "cpu"


@pytest.mark.parametrize("name", ["identity", "basic", "positional", "fourier", "learnable_fourier", "shifted_basis",
                                  "progressive", "quantized", "hashgrid", "amplified"])
def test_encodings_follow_their_input(name):
    from inr import build_encoding

    opts = {"hashgrid": {"log2_table": 10, "n_levels": 4}}.get(name, {})
    enc = build_encoding(name, 2, **opts)
    x = torch.rand(16, 2, requires_grad=True) * 2 - 1
    with factories_elsewhere():
        y = enc(x)
        y.sum().backward()
    assert y.device.type == "cpu" and torch.isfinite(y).all()


def test_spherical_harmonics_follow_their_input():
    from inr import build_encoding

    enc = build_encoding("spherical_harmonics", 3, degree=4)
    d = torch.nn.functional.normalize(torch.randn(8, 3), dim=-1)
    with factories_elsewhere():
        y = enc(d)
    assert y.device.type == "cpu"


@pytest.mark.parametrize("name", ["mlp", "siren", "spder", "poly_inr", "pins"])
def test_networks_follow_their_input(name):
    from inr import build_network

    net = build_network(name, 8, 3)
    x = torch.rand(16, 8)
    with factories_elsewhere():
        y = net(x)
        y.sum().backward()
    assert y.device.type == "cpu"


def test_rendering_maths_follows_its_input():
    from inr.render.extract import extract_mesh
    from inr.render.occupancy import OccupancyGrid, march
    from inr.render.paths import orbit_poses
    from inr.render.rays import look_at, pinhole_rays
    from inr.render.volume import accumulate, render_weights

    grid = OccupancyGrid([-1, -1, -1, 1, 1, 1], resolution=8, warmup_steps=4)
    c2w = look_at(torch.tensor([0.0, -3.0, 0.5]), torch.zeros(3), torch.tensor([0.0, 0.0, 1.0]))
    pixels = torch.stack(torch.meshgrid(torch.arange(6), torch.arange(6), indexing="ij"), -1).reshape(-1, 2)
    c2w_side = look_at(torch.tensor([3.0, 0.0, 0.5]), torch.zeros(3), torch.tensor([0.0, 0.0, 1.0]))
    sphere = lambda p: 50.0 * (p.norm(dim=-1) < 0.5).float()  # noqa: E731
    with factories_elsewhere():
        grid.update(0, lambda p: sphere(p) * 0.01, generator=torch.Generator().manual_seed(0))
        grid.update(10, lambda p: sphere(p) * 0.01, generator=torch.Generator().manual_seed(0))
        rays = pinhole_rays(c2w, 5.0, 5.0, 3.0, 3.0, pixels)
        ri, t0, t1 = march(rays, grid, 0.05, sigma_fn=lambda a, b, r: sphere(rays.origins[r] + rays.directions[r] * ((a + b) / 2)[:, None]))
        w, _, _ = render_weights(t0, t1, sphere(rays.origins[ri] + rays.directions[ri] * t0[:, None]), ri)
        opacity = accumulate(w, ri, len(rays))
        poses = orbit_poses(torch.stack([c2w, c2w_side]), 3)
        verts, faces, colors = extract_mesh(sphere, grid.aabb, 12, 25.0, lambda p, d: p.abs())
    assert opacity.max() > 0.9 and poses.shape == (3, 4, 4) and len(faces) > 0 and colors.shape == verts.shape


def test_pointcloud_maths_follows_its_input():
    from inr.pointcloud.network import ReconstructionConfig
    from inr.pointcloud.reconstruct import Reconstructor

    torch.manual_seed(0)
    model = Reconstructor(ReconstructionConfig(width=8, d_model=16, heads=2, layers=1, neighbours=8), 12.0)
    clean = torch.nn.functional.normalize(torch.randn(600, 3), dim=-1)
    noisy = clean + 0.01 * torch.randn_like(clean)
    with factories_elsewhere():
        losses = model(noisy, clean)
        losses["loss"].backward()
        model.eval()
        pts, index = model.reconstruct(noisy, threshold=0.0, tile=6, margin=2)
    assert torch.isfinite(losses["loss"]) and pts.device.type == "cpu" and len(index) == len(pts)


def _steps(module, batches, n=2):
    """n optimizer steps of a LightningModule outside a Trainer, factories elsewhere."""
    opt = module.configure_optimizers()["optimizer"]
    for _ in range(n):
        batch = next(batches)
        with factories_elsewhere():
            loss = module.training_step(batch, 0)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert torch.isfinite(loss)
    return module


def test_signal_fit_steps_follow_their_input():
    from inr.tasks.signal_fit import SignalData, SignalFitModule

    module = SignalFitModule(2, 3, {"encoding": "hashgrid", "encoding_options": {"log2_table": 10, "n_levels": 4}},
                             {"batch_size": 32, "compile": False})
    data = SignalData(torch.rand(8, 8, 3), "even-odd", 32, (0.0, 1.0), (0.0, 1.0))
    data.setup()
    _steps(module, iter(data.train_dataloader()))
    with factories_elsewhere():
        pred = module.predict_values(data.test_coords, (0.0, 1.0), (0.0, 1.0))
    assert pred.shape == (16, 3)


def test_sdf_fit_steps_and_mesh_lattice_follow_their_input():
    from inr.render.extract import sdf_lattice
    from inr.tasks.sdf import sdf_slice
    from inr.tasks.sdf_fit import SdfData, SdfFitModule

    pts = torch.nn.functional.normalize(torch.randn(500, 3), dim=-1) * 0.5
    for gradient, field in (("numerical", {"encoding": "hashgrid", "encoding_options": {"log2_table": 10, "n_levels": 4}}),
                            ("analytic", {"network": "siren", "network_options": {"hidden": 16, "layers": 1}})):
        train = {"gradient": gradient, "surface_batch": 64, "space_batch": 64, "near_share": 0.5, "w_sign": 10.0}
        module = SdfFitModule(field, train, {"centre": [0.0, 0.0, 0.0], "scale": 1.0})
        data = SdfData(pts, pts / 0.5, module.train_cfg)
        _steps(module, iter(data._batches()))
    with factories_elsewhere():
        values, mask = sdf_lattice(module.sdf_eval, 17, device=pts.device)
        image = sdf_slice(module, size=8)
        world = module.to_world(pts[:4])
    assert values.shape == (17, 17, 17) and image.shape == (8, 8, 3) and world.device == pts.device


@pytest.mark.parametrize("preset", ["ngp", "ngp_unbounded"])
def test_nerf_steps_and_renders_follow_their_input(preset):
    from inr.data.scenes import SceneSplit
    from inr.presets import load_nerf_preset
    from inr.render.rays import look_at
    from inr.tasks.nerf import NerfModule, SceneData, render_split_view
    from dataclasses import asdict

    p = load_nerf_preset(preset, {"field.encoding_options.log2_table": 10, "field.encoding_options.n_levels": 4,
                                 "train.grid_resolution": 8, "train.compile": False, "train.target_samples": 2048})
    module = NerfModule(p.field.to_dict(), asdict(p.train), [-1, -1, -1, 1, 1, 1], n_images=2)
    c2w = torch.stack([look_at(torch.tensor([0.0, -3.0, 0.5]), torch.zeros(3), torch.tensor([0.0, 0.0, 1.0]))] * 2)
    split = SceneSplit(torch.rand(2, 6, 6, 4), c2w, torch.tensor([[5.0, 5.0, 3.0, 3.0]] * 2), ["a", "b"])
    data = SceneData(split, 64)
    _steps(module, iter(data.train_dataloader()))
    with factories_elsewhere():
        img = render_split_view(module, split, 0, 1.0)
    assert img.shape == (6, 6, 3) and img.device.type == "cpu"


def test_pointcloud_train_steps_follow_their_input():
    from inr.presets import PointCloudTrainConfig
    from inr.tasks.pointcloud_train import PointCloudModule, shape_data

    cfg = {"dense_points": 2000, "voxels_per_diagonal": 12.0, "shape_pool": 2}
    module = PointCloudModule({"width": 8, "d_model": 16, "heads": 2, "layers": 1, "neighbours": 8}, cfg)
    _steps(module, iter(shape_data(PointCloudTrainConfig.from_dict(cfg), None, 0)))
