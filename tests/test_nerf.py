import json

import numpy as np
import pytest
import torch

from inr.cli import main
from inr.presets import available_presets

from .test_scenes import blender_scene

FAST = ["--set", "train.grid_resolution=16", "--set", "train.render_step_size=0.1", "--set", "train.rays_per_batch=64",
        "--set", "train.eval_every=1", "--set", "train.grid_warmup_steps=1", "--set", "train.compile=false"]


@pytest.mark.parametrize("preset", available_presets("nerf"))
def test_every_nerf_preset_trains_two_steps_and_evaluates(tmp_path, preset, capsys):
    scene = blender_scene(tmp_path / "s", n_train=3)
    out = tmp_path / "run"
    assert main(["nerf", "train", str(scene), "--preset", preset, "--steps", "2", "--out", str(out), "--no-progress", *FAST]) == 0
    m = json.loads((out / "metrics.json").read_text())
    for key in ("test_psnr", "test_ssim", "steps", "seconds", "rays_per_second", "params", "per_view"):
        assert key in m
    assert m["steps"] == 2 and m["rays_per_second"] > 0 and np.isfinite(m["test_psnr"])
    assert (out / "renders" / "test_000.png").is_file() and (out / "checkpoints" / "last.ckpt").is_file()
    assert main(["nerf", "eval", str(out)]) == 0
    e = json.loads((out / "eval.json").read_text())
    assert e["test_psnr"] == pytest.approx(m["test_psnr"], abs=1e-3)  # same weights, same renders
    assert "mean: PSNR" in capsys.readouterr().out


@pytest.mark.parametrize("encoding", ["{encoding: progressive, encoding_options: {num_freqs: 6, levels: 2}}",
                                      "{encoding: quantized, encoding_options: {resolution: 512, inner: positional}}"])
def test_any_library_encoding_goes_into_a_nerf_through_the_config(tmp_path, encoding):
    import yaml

    scene = blender_scene(tmp_path / "s", n_train=3)
    sets = [x for k, v in yaml.safe_load(encoding).items() for x in ("--set", f"field.{k}={v}")]
    out = tmp_path / "run"
    assert main(["nerf", "train", str(scene), "--steps", "2", "--out", str(out), "--no-progress", *FAST, *sets]) == 0
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["preset"]["field"]["encoding"] == yaml.safe_load(encoding)["encoding"]


def test_nerf_learns_a_flat_colour_scene(tmp_path):
    # every view shows the same opaque grey: a few dozen steps must fit it (loss falls >= 10x)
    scene = blender_scene(tmp_path / "g", n_train=3)
    for p in (scene / "train").glob("*.png"):
        import imageio.v3 as iio

        iio.imwrite(p, np.full((8, 8, 4), [128, 128, 128, 255], np.uint8))
    for p in (scene / "test").glob("*.png"):
        iio.imwrite(p, np.full((8, 8, 4), [128, 128, 128, 255], np.uint8))
    out = tmp_path / "run"
    assert main(["nerf", "train", str(scene), "--steps", "60", "--out", str(out), "--no-progress", *FAST]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["test_psnr"] > m["curve"][0][2] + 10
    _render_and_export_the_grey_scene(out, tmp_path)


def _render_and_export_the_grey_scene(out, tmp_path):
    import imageio.v3 as iio
    import open3d as o3d
    import trimesh

    video = tmp_path / "orbit.mp4"
    assert main(["nerf", "render", str(out), "--orbit", "--frames", "6", "--out", str(video), "--no-progress"]) == 0
    frames = iio.imread(video, plugin="FFMPEG")
    assert frames.shape == (6, 8, 8, 3)
    # the fixture's cameras all sit on the z axis (parallel optical axes): the orbit goes around
    # the box centre at their mean distance, and its first frame is the middle camera's view
    assert abs(float(frames[0].mean()) - 128) < 8
    gif = tmp_path / "orbit.gif"
    assert main(["nerf", "render", str(out), "--frames", "3", "--out", str(gif), "--no-progress"]) == 0
    assert iio.imread(gif).shape[0] == 3
    assert main(["nerf", "render", str(out), "--path", "spiral", "--frames", "4", "--out", str(gif), "--no-progress"]) == 0
    assert iio.imread(gif).shape[0] == 4
    # a nerfstudio camera path: its size and cameras (the middle training camera's pose, twice)
    c2w = np.eye(4)
    c2w[2, 3] = 4.0
    path = tmp_path / "camera_path.json"
    path.write_text(json.dumps({"render_height": 6, "render_width": 10, "fps": 5, "camera_path": [
        {"camera_to_world": c2w.ravel().tolist(), "fov": 40, "aspect": 10 / 6}] * 2}))
    assert main(["nerf", "render", str(out), "--path", str(path), "--out", str(video), "--no-progress"]) == 0
    assert iio.imread(video, plugin="FFMPEG").shape[:3] == (2, 6, 10)
    assert main(["nerf", "render", str(out), "--path", "helix", "--out", str(gif), "--no-progress"]) == 2

    points = tmp_path / "points.ply"
    assert main(["nerf", "export", str(out), "--points", str(points), "--num-points", "500"]) == 0
    cloud = o3d.io.read_point_cloud(str(points))
    assert len(cloud.points) > 250  # the views are opaque: most rays end on a surface
    colors = np.asarray(cloud.colors)
    assert abs(float(colors.mean()) - 128 / 255) < 0.05
    # the surface the cameras (on the z axis, looking down) see lies in the box, below them
    pts = np.asarray(cloud.points)
    assert (np.abs(pts) <= 1.5 + 1e-4).all() and (pts[:, 2] < 4.0).all()

    mesh_path = tmp_path / "mesh.ply"
    assert main(["nerf", "export", str(out), "--mesh", str(mesh_path), "--resolution", "24", "--threshold", "1"]) == 0
    mesh = trimesh.load(mesh_path, process=False)
    assert len(mesh.faces) > 0 and mesh.visual.vertex_colors.shape == (len(mesh.vertices), 4)
    assert abs(float(mesh.visual.vertex_colors[:, :3].mean()) - 128) < 20


def test_nerf_render_export_bad_requests_exit_2(tmp_path, capsys):
    scene = blender_scene(tmp_path / "s", n_train=3)
    out = tmp_path / "run"
    assert main(["nerf", "train", str(scene), "--steps", "1", "--out", str(out), "--no-progress", *FAST]) == 0
    capsys.readouterr()
    cases = [
        (["nerf", "render", str(out), "--out", str(tmp_path / "v.avi")], "unsupported video format"),
        (["nerf", "render", str(out), "--out", str(tmp_path / "missing" / "v.mp4")], "no such folder"),
        (["nerf", "render", str(tmp_path), "--out", str(tmp_path / "v.mp4")], "is not a run folder"),
        (["nerf", "export", str(out)], "needs --mesh"),
        (["nerf", "export", str(out), "--mesh", str(tmp_path / "m.stl")], "unsupported mesh format"),
        (["nerf", "export", str(out), "--points", str(tmp_path / "p.ptx")], "unsupported point cloud format"),
        (["nerf", "export", str(out), "--mesh", str(tmp_path / "m.ply"), "--threshold", "1e9", "--resolution", "12"], "cannot extract a mesh"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "s"]  # nothing half-written


def test_nerf_bad_scene_exit_2(tmp_path, capsys):
    assert main(["nerf", "train", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "no such scene folder" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert main(["nerf", "eval", str(tmp_path)]) == 2


def test_nerf_module_checkpoint_round_trip(tmp_path):
    from dataclasses import asdict

    from inr.presets import load_nerf_preset
    from inr.tasks.nerf import NerfModule

    p = load_nerf_preset("ngp", {"train.grid_resolution": 8})
    m = NerfModule(p.field.to_dict(), asdict(p.train), [-1, -1, -1, 1, 1, 1])
    m.grid.binaries[::3] = False
    torch.save({"hyper_parameters": dict(m.hparams), "state_dict": m.state_dict()}, tmp_path / "c.ckpt")
    ck = torch.load(tmp_path / "c.ckpt", weights_only=True)
    m2 = NerfModule(**ck["hyper_parameters"])
    m2.load_state_dict(ck["state_dict"])
    assert torch.equal(m2.grid.binaries, m.grid.binaries)
    pts = torch.rand(5, 3) * 2 - 1
    assert torch.equal(m2.field.density(pts), m.field.density(pts))


def _module(**train):
    from dataclasses import asdict

    from inr.presets import load_nerf_preset
    from inr.tasks.nerf import NerfModule

    p = load_nerf_preset("ngp", {"field.encoding_options.log2_table": 12, "train.grid_resolution": 8,
                                 **{f"train.{k}": v for k, v in train.items()}})
    return NerfModule(p.field.to_dict(), asdict(p.train), [-1, -1, -1, 1, 1, 1])


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")
def test_ray_count_follows_the_sample_budget():
    # nerfacc's dynamic batch: after a step with S samples on n rays, the next step takes
    # n * target / S rays, clamped to [64, rays_per_batch]
    torch.manual_seed(0)
    m = _module(target_samples=1000, rays_per_batch=512, compile=False)
    assert m.n_rays == 512
    o = torch.tensor([[0.0, 0.0, -3.0]]).repeat(512, 1)
    d = torch.nn.functional.normalize(torch.randn(512, 3) * 0.05 + torch.tensor([0.0, 0.0, 1.0]), dim=-1)
    rgba = torch.rand(512, 4)
    m.training_step((o, d, rgba), 0)
    from inr.render.occupancy import march
    from inr.render.rays import Rays

    n_samples = len(march(Rays(o, d), m.grid, m.step_size)[0])  # the grid is all occupied before any update
    assert n_samples > 1000
    assert m.n_rays == max(64, int(512 * 1000 / n_samples))
    m.training_step((o, d, rgba), 1)  # takes only the first n_rays rays of the batch
    assert m.rays_seen == 512 + max(64, int(512 * 1000 / n_samples))


def test_compiled_inference_matches_eager():
    # the compiled callables run in grad mode for speed (see without_grad_in_chunks); values must
    # equal the eager no-grad field's, with no graph kept
    torch.manual_seed(0)
    m = _module(compile=True)
    m.configure_model()
    pts = torch.rand(3000, 3) * 2 - 1
    dirs = torch.nn.functional.normalize(torch.randn(3000, 3), dim=-1)
    with torch.no_grad():
        ref_sigma, ref_rgb = m.field(pts, dirs)
        sigma, rgb = m.query("field", pts, dirs, chunk=1024)
        dens = m.density(pts)
    assert not sigma.requires_grad and not dens.requires_grad
    torch.testing.assert_close(sigma, ref_sigma, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(rgb, ref_rgb, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(dens, ref_sigma, rtol=1e-4, atol=1e-6)


def test_nerf_trains_with_ddp_on_two_cpu_processes(tmp_path):
    # Lightning re-runs the command for rank 1, so this goes through a real command line
    import subprocess
    import sys

    scene = blender_scene(tmp_path / "s", n_train=3)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "inr", "nerf", "train", str(scene), "--steps", "6", "--devices", "2", "--out", str(out),
           "--no-progress", *FAST, "--set", "train.target_samples=1000000"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "terminate called" not in proc.stderr  # a process ended with its process group open
    assert proc.stdout.count("test PSNR") == 1  # only the first process reports
    m = json.loads((out / "metrics.json").read_text())
    assert m["devices"] == 2 and m["steps"] == 6
    # both processes trained: 2 processes x 6 steps x 64 rays
    assert m["rays_per_second"] * m["seconds"] == pytest.approx(2 * 6 * 64, rel=1e-3)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["last.ckpt"]


def test_export_points_of_an_untrained_run_is_one_line(tmp_path, capsys):
    scene = blender_scene(tmp_path / "s", n_train=2)
    out = tmp_path / "run"
    assert main(["nerf", "train", str(scene), "--steps", "1", "--out", str(out), "--no-progress", *FAST]) == 0
    capsys.readouterr()
    assert main(["nerf", "export", str(out), "--points", str(tmp_path / "p.ply"), "--num-points", "500"]) == 2
    err = capsys.readouterr().err
    assert "no surface to export" in err and err.count("\n") == 1 and not (tmp_path / "p.ply").exists()
