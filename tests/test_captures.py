"""Scene folders of real captures: lens distortion, COLMAP models, pose normalisation, split
lists, downscaled copies and the memory of loading large images."""

import json
import subprocess
import sys

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from inr import InputError
from inr.data.cameras import Lens, distort, normalise_poses, undistort_image, valid_crop
from inr.data.scenes import load_scene

pycolmap = pytest.importorskip("pycolmap")

W, H = 160, 120
K = (130.0, 128.0, 81.0, 58.5)


def pattern(x, y):
    """A smooth test image over normalised (undistorted) camera coordinates, 3 channels."""
    return np.stack([0.5 + 0.4 * np.sin(5 * x) * np.cos(4 * y), 0.5 + 0.4 * np.cos(3 * x + 2 * y), 0.5 + 0.3 * x * y], -1)


def colmap_camera(model, params):
    cam = pycolmap.Camera.create_from_model_name(1, model, 100.0, W, H)
    cam.params = params
    return cam


def distorted_view(cam):
    """The pattern as the distorted camera sees it: every pixel centre is undistorted by COLMAP
    itself (cam_from_img, an independent implementation) and the pattern read there."""
    v, u = np.meshgrid(np.arange(H) + 0.5, np.arange(W) + 0.5, indexing="ij")
    xy = cam.cam_from_img(np.stack([u.ravel(), v.ravel()], -1).astype(np.float64))
    return pattern(xy[:, 0], xy[:, 1]).reshape(H, W, 3).astype(np.float32)


def pinhole_view(k=K, h=H, w=W):
    v, u = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
    return pattern((u - k[2]) / k[0], (v - k[3]) / k[1]).astype(np.float32)


CASES = {
    "OPENCV": ([*K, -0.12, 0.03, 0.002, -0.001], Lens("OPENCV", (-0.12, 0.03, 0.0, 0.0), (0.002, -0.001))),
    "OPENCV_FISHEYE": ([*K, 0.05, -0.02, 0.01, -0.003], Lens("OPENCV_FISHEYE", (0.05, -0.02, 0.01, -0.003))),
}


@pytest.mark.parametrize("model", list(CASES))
def test_distortion_matches_colmap_and_undistortion_recovers_the_pinhole_image(model):
    params, lens = CASES[model]
    cam = colmap_camera(model, params)
    xy = np.random.default_rng(0).uniform(-0.5, 0.5, (200, 2))
    ours = distort(torch.from_numpy(xy), lens).numpy() * [K[0], K[1]] + [K[2], K[3]]
    np.testing.assert_allclose(ours, cam.img_from_cam(np.c_[xy, np.ones(len(xy))]), atol=1e-6)
    out, valid = undistort_image(torch.from_numpy(distorted_view(cam)), K, lens)
    truth = pinhole_view()
    err = (out.numpy() - truth)[valid.numpy()]
    assert valid.float().mean() > 0.8 and np.abs(err).max() < 0.02 and np.abs(err).mean() < 0.002
    x0, y0, x1, y1 = valid_crop(valid, K[2], K[3])
    assert valid[y0:y1, x0:x1].all() and (x1 - x0) * (y1 - y0) > 0.6 * W * H
    assert not valid[max(y0 - 1, 0) : y1 + 1, max(x0 - 1, 0) : x1 + 1].all() or (x0, y0, x1, y1) == (0, 0, W, H)


def test_pinhole_lens_is_the_identity_and_bad_models_are_refused():
    img = torch.rand(12, 16, 3)
    out, valid = undistort_image(img, (20.0, 20.0, 8.0, 6.0), Lens())
    assert valid.all() and torch.allclose(out, img, atol=1e-5)
    with pytest.raises(ValueError, match="unknown lens model"):
        Lens("FOV")


def ring(n=9, radius=1.0, height=0.3):
    """Cameras on a ring around the origin (z up), looking at it, OpenGL c2w."""
    from inr.render.rays import look_at

    out = []
    for k in range(n):
        a = 2 * np.pi * k / n
        eye = torch.tensor([radius * np.cos(a), radius * np.sin(a), height])
        out.append(look_at(eye, torch.zeros(3, dtype=eye.dtype), torch.tensor([0.0, 0.0, 1.0], dtype=eye.dtype)).numpy())
    return np.stack(out)


def similarity(scale=3.0, seed=1):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))
    R = q * np.sign(np.linalg.det(q))
    return scale, R, np.array([2.0, -1.0, 5.0])


def moved(c2w, s, R, t):
    out = c2w.copy()
    out[:, :3, :3] = R @ c2w[:, :3, :3]
    out[:, :3, 3] = s * c2w[:, :3, 3] @ R.T + t
    return out


def test_normalise_poses_undoes_a_similarity_up_to_a_turn_about_z():
    truth = ring()
    s, R, t = similarity()
    norm = normalise_poses(moved(truth, s, R, t))
    got = norm.poses(moved(truth, s, R, t))
    # the ring is centred (height 0.3 becomes 0), its radius 1, its up axis +z
    np.testing.assert_allclose(got[:, 2, 3], 0, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(got[:, :3, 3], axis=1), 1, atol=1e-9)
    np.testing.assert_allclose(got[:, :3, 1].mean(0) / np.linalg.norm(got[:, :3, 1].mean(0)), [0, 0, 1], atol=1e-9)
    # relative poses are kept: the angle between cameras 0 and 1
    rel = lambda c: c[0, :3, :3].T @ c[1, :3, :3]  # noqa: E731
    np.testing.assert_allclose(rel(got), rel(truth), atol=1e-9)
    np.testing.assert_allclose(norm.points(s * np.zeros((1, 3)) @ R.T + t), [[0, 0, -0.3]], atol=1e-9)


def colmap_scene(root, model="SIMPLE_RADIAL", params=(130.0, 80.0, 60.0, 0.08), n=9, text=False):
    """A COLMAP model of a ring of cameras moved by a similarity, with a few 3D points, and its
    images (the pattern, the same in every view)."""
    s, R, t = similarity()
    c2w = moved(ring(n), s, R, t)
    rec = pycolmap.Reconstruction()
    cam = pycolmap.Camera.create_from_model_name(1, model, 100.0, W, H)
    cam.params = list(params)
    rec.add_camera_with_trivial_rig(cam)
    (root / "images").mkdir(parents=True)
    for k, m in enumerate(c2w):
        cv = m.copy()
        cv[:3, 1:3] *= -1  # OpenGL -> OpenCV axes
        w2c = np.linalg.inv(cv)
        pose = pycolmap.Rigid3d(pycolmap.Rotation3d(w2c[:3, :3]), w2c[:3, 3])
        rec.add_image_with_trivial_frame(pycolmap.Image(name=f"img{k:02d}.png", camera_id=1, image_id=k + 1), pose)
        iio.imwrite(root / "images" / f"img{k:02d}.png", (distorted_view(cam) * 255).round().astype(np.uint8))
    for p in np.random.default_rng(2).uniform(-0.3, 0.3, (50, 3)):
        rec.add_point3D(s * p @ R.T + t, pycolmap.Track())
    model_dir = root / "sparse" / "0"
    model_dir.mkdir(parents=True)
    if text:
        rec.write_text(str(model_dir))
        for extra in ("rigs.txt", "frames.txt"):  # COLMAP before 3.12 wrote neither
            (model_dir / extra).unlink(missing_ok=True)
    else:
        rec.write_binary(str(model_dir))
    return root, c2w


@pytest.mark.parametrize("text", [False, True])
def test_colmap_model_folder_loads_normalised_and_undistorted(tmp_path, text):
    root, c2w = colmap_scene(tmp_path / "c", text=text)
    scene = load_scene(root)
    assert scene.format == "colmap" and scene.extra["registered"] == 9
    tr, te = scene.splits["train"], scene.splits["test"]
    assert te.names == ["img00.png", "img08.png"] and len(tr) == 7  # every 8th held out
    # normalised: the ring is centred with radius 1; every camera looks at the ring's centre,
    # which is where the points (uniform in a small cube at the origin) are
    pos = torch.cat([tr.c2w, te.c2w])[:, :3, 3].double()
    np.testing.assert_allclose(pos.norm(dim=1).numpy(), 1.0, atol=1e-5)
    centre = torch.from_numpy(scene.points.mean(0)).double()
    look = -torch.cat([tr.c2w, te.c2w])[:, :3, 2].double()
    to_centre = torch.nn.functional.normalize(centre - pos, dim=1)
    assert float((look * to_centre).sum(1).min()) > 0.99
    assert float(scene.points[:, 2].mean()) == pytest.approx(-0.3 / 1.044, abs=0.05)  # the ring is 0.3 above the origin
    # distance from camera to the point cloud is ~1: near below it
    assert 0.4 < scene.near < 1.0
    # the undistorted images hold the pinhole pattern, cropped about the principal point
    img = tr.images[0].numpy()
    fx, fy, cx, cy = tr.intrinsics[0].tolist()
    assert fx == pytest.approx(130.0) and img.shape[0] < H and img.shape[1] < W
    truth = pinhole_view((fx, fy, cx, cy), img.shape[0], img.shape[1])
    assert np.abs(img - truth).mean() < 0.01
    kept = load_scene(root, poses="keep").splits["train"].c2w[0].double().numpy()
    np.testing.assert_allclose(kept, c2w[1], atol=1e-4)  # frame 0 is a test view


def test_colmap_errors_name_the_file(tmp_path):
    root, _ = colmap_scene(tmp_path / "c", model="FOV", params=(130.0, 130.0, 80.0, 60.0, 0.1))
    with pytest.raises(InputError, match="model FOV is not supported"):
        load_scene(root)
    root, _ = colmap_scene(tmp_path / "d")
    (root / "images" / "img03.png").unlink()
    with pytest.raises(InputError, match="image 'img03.png' not found"):
        load_scene(root)
    (root / "sparse" / "0" / "images.bin").write_bytes(b"\x01\x02")
    with pytest.raises(InputError, match="cannot be read as a COLMAP model"):
        load_scene(root)


def test_transforms_json_with_distortion_is_undistorted(tmp_path):
    params, lens = CASES["OPENCV"]
    cam = colmap_camera("OPENCV", params)
    root = tmp_path / "t"
    (root / "images").mkdir(parents=True)
    frames = []
    for k, m in enumerate(ring(3)):
        iio.imwrite(root / "images" / f"{k}.png", (distorted_view(cam) * 255).round().astype(np.uint8))
        frames.append({"file_path": f"images/{k}.png", "transform_matrix": m.tolist()})
    data = {"camera_model": "OPENCV", "fl_x": K[0], "fl_y": K[1], "cx": K[2], "cy": K[3], "w": W, "h": H,
            "k1": lens.k[0], "k2": lens.k[1], "p1": lens.p[0], "p2": lens.p[1], "frames": frames}
    (root / "transforms.json").write_text(json.dumps(data))
    s = load_scene(root)
    img, k = s.splits["train"].images[0].numpy(), s.splits["train"].intrinsics[0].tolist()
    assert np.abs(img - pinhole_view(k, img.shape[0], img.shape[1])).mean() < 0.01
    data["camera_model"] = "EQUIRECTANGULAR"
    (root / "transforms.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="frame 0: camera_model EQUIRECTANGULAR is not supported"):
        load_scene(root)


def test_downscale_reads_the_images_N_copy_and_scales_intrinsics_by_its_size(tmp_path):
    root = tmp_path / "t"
    frames = []
    for k in range(2):
        (root / "images").mkdir(parents=True, exist_ok=True)
        (root / "images_4").mkdir(parents=True, exist_ok=True)
        iio.imwrite(root / "images" / f"{k}.png", np.full((40, 64, 3), 200, np.uint8))
        iio.imwrite(root / "images_4" / f"{k}.png", np.full((10, 16, 3), 20, np.uint8))  # a different value: read, not made
        frames.append({"file_path": f"images/{k}.png", "transform_matrix": np.eye(4).tolist()})
    (root / "transforms.json").write_text(json.dumps({"fl_x": 50.0, "cx": 32.0, "cy": 20.0, "frames": frames}))
    s = load_scene(root, downscale=4)
    tr = s.splits["train"]
    assert tr.images.shape == (1, 10, 16, 3) and float(tr.images.mean()) == pytest.approx(20 / 255)
    assert torch.allclose(tr.intrinsics[0], torch.tensor([12.5, 12.5, 8.0, 5.0]))
    s = load_scene(root, downscale=2)  # no images_2: the originals, block-averaged
    assert s.splits["train"].images.shape == (1, 20, 32, 3) and float(s.splits["train"].images.mean()) == pytest.approx(200 / 255)


MEMORY_PROBE = """
import json, sys
from pathlib import Path
from inr.data.scenes import load_scene

def status(key):  # kB
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(key + ":"))
    return int(line.split()[1])

load_scene(sys.argv[3])  # the image plugins imported, on a small scene
before = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")  # resets the peak (VmHWM) to the current size
scene = load_scene(sys.argv[1], downscale=int(sys.argv[2]))
print(json.dumps({"peak_mb": (status("VmHWM") - before) / 1024, "shape": list(scene.splits["train"].images.shape)}))
"""


def peak_load(root, downscale):
    small = root.parent / "small"
    if not small.exists():
        (small / "images").mkdir(parents=True)
        iio.imwrite(small / "images" / "0.jpg", np.zeros((8, 8, 3), np.uint8))
        (small / "transforms.json").write_text(json.dumps({"fl_x": 8.0, "frames": [{"file_path": "images/0.jpg",
                                                                                   "transform_matrix": np.eye(4).tolist()}]}))
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(root), str(downscale), str(small)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_loading_large_images_holds_one_original_at_a_time(tmp_path):
    n, h, w = 12, 1500, 2000  # float32 originals: 36 MB each, 432 MB for the set
    root = tmp_path / "big"
    (root / "images").mkdir(parents=True)
    frame = (np.random.default_rng(0).random((h // 8, w // 8, 3)) * 255).astype(np.uint8).repeat(8, 0).repeat(8, 1)
    frames = []
    for k in range(n):
        iio.imwrite(root / "images" / f"{k}.jpg", frame, quality=80)
        frames.append({"file_path": f"images/{k}.jpg", "transform_matrix": np.eye(4).tolist()})
    (root / "transforms.json").write_text(json.dumps({"fl_x": 1500.0, "frames": frames}))
    r = peak_load(root, 8)
    assert r["shape"] == [10, h // 8, w // 8, 3]
    one = h * w * 3 * 4 / 2**20
    assert r["peak_mb"] < 3 * one, r  # decoding one original and its float copy, besides the small scaled set
    full = peak_load(root, 1)  # the probe sees the difference: every original kept, 12 x 34 MB
    assert full["peak_mb"] > 10 * one, full


def test_process_photos_recovers_the_true_cameras(tmp_path):
    from inr.cli import main
    from inr.data.cameras import pose_errors
    from inr.data.testscenes import ring_poses, write_photos

    truth = ring_poses(24)
    write_photos(tmp_path / "photos", truth)
    out = tmp_path / "scene"
    assert main(["nerf", "process", str(tmp_path / "photos"), str(out), "--no-progress"]) == 0
    data = json.loads((out / "transforms.json").read_text())
    assert data["inr_process"]["registered"] == 24 and data["inr_process"]["reprojection_error_px"] < 1.0
    est = np.stack([np.array(f["transform_matrix"]) for f in data["frames"]])
    idx = [int(f["file_path"][-7:-4]) for f in data["frames"]]
    err = pose_errors(est, truth[idx])
    assert err["rotation_deg_max"] < 0.5 and err["position_max_share"] < 0.005, err
    assert abs(data["fl_x"] * 1.0 - 280.0) < 3.0  # the renderer's focal length, recovered
    for d in (2, 4, 8):
        assert iio.improps(out / f"images_{d}" / "photo_000.jpg").shape[:2] == (240 // d, 320 // d)
    scene = load_scene(out, downscale=4)  # the scene folder trains as it is
    assert len(scene.splits["train"]) == 21 and scene.points is not None and scene.near > 0
    assert scene.splits["train"].images.shape[1:3] == (60, 80)
    assert not list(tmp_path.glob(".scene.partial*"))


def test_process_a_video_and_refuse_what_does_not_register(tmp_path, capsys):
    from inr.cli import main
    from inr.data.cameras import pose_errors
    from inr.data.testscenes import ring_poses, write_video

    truth = ring_poses(48)
    write_video(tmp_path / "walk.mp4", truth, fps=12)
    out = tmp_path / "scene"
    assert main(["nerf", "process", str(tmp_path / "walk.mp4"), str(out), "--num-frames", "24", "--no-progress"]) == 0
    data = json.loads((out / "transforms.json").read_text())
    assert data["inr_process"]["frames"] == 24 and data["inr_process"]["registered"] == 24
    # frames are named by their number in the video: the sharper of frames 1-2, 3-4, ...
    numbers = [int(f["file_path"][-9:-4]) for f in data["frames"]]
    assert all(2 * k + 1 <= n <= 2 * k + 2 for k, n in enumerate(numbers))
    est = np.stack([np.array(f["transform_matrix"]) for f in data["frames"]])
    err = pose_errors(est, truth[[n - 1 for n in numbers]])
    assert err["rotation_deg_max"] < 1.0 and err["position_max_share"] < 0.01, err
    # noise photos: nothing to match; exit 2 with one line, no folder left behind
    (tmp_path / "noise").mkdir()
    rng = np.random.default_rng(0)
    for k in range(5):
        iio.imwrite(tmp_path / "noise" / f"{k}.png", (rng.random((120, 160, 3)) * 255).astype(np.uint8))
    capsys.readouterr()
    assert main(["nerf", "process", str(tmp_path / "noise"), str(tmp_path / "bad"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "noise: only" in err and "of 5 images registered" in err and not (tmp_path / "bad").exists()
    assert not list(tmp_path.glob(".bad.partial*"))
    assert main(["nerf", "process", str(tmp_path / "noise"), str(out), "--no-progress"]) == 2  # exists, no --overwrite
    assert "exists; pass --overwrite" in capsys.readouterr().err


def test_a_nerfstudio_camera_path_maps_into_the_scene_frame(tmp_path, capsys):
    """A path made in nerfstudio's viewer is in its dataparser's frame (dataparser_transforms.json:
    c2w' = [T_R R | scale (T_R t + T_t)] of the file's poses); mapped back and through inr's own
    normalisation, the training cameras' own poses land exactly on the loaded scene's cameras."""
    from inr.cli import main
    from inr.data.camera_path import from_nerfstudio_frame, read_dataparser_transform

    file_poses = moved(ring(8, radius=2.0), *similarity(scale=1.7, seed=4))
    (tmp_path / "images").mkdir()
    frames = []
    for k, m in enumerate(file_poses):
        iio.imwrite(tmp_path / "images" / f"{k}.png", np.full((8, 10, 3), 30 * k, np.uint8))
        frames.append({"file_path": f"images/{k}.png", "transform_matrix": m.tolist()})
    (tmp_path / "transforms.json").write_text(json.dumps({"fl_x": 9.0, "w": 10, "h": 8, "frames": frames}))
    s, R, t = similarity(scale=0.37, seed=9)  # nerfstudio's (some other) normalisation
    ns = file_poses.copy()
    ns[:, :3, :3] = R @ file_poses[:, :3, :3]
    ns[:, :3, 3] = s * (file_poses[:, :3, 3] @ R.T + t)
    dp = tmp_path / "dataparser_transforms.json"
    dp.write_text(json.dumps({"transform": np.concatenate([R, t[:, None]], 1).tolist(), "scale": s}))
    scene = load_scene(tmp_path)
    got = from_nerfstudio_frame(torch.from_numpy(ns), *read_dataparser_transform(dp), scene.extra["normalisation"])
    train = scene.splits["train"]
    assert torch.allclose(got[[k for k in range(8) if k % 8]].float(), train.c2w, atol=1e-5)
    kept = load_scene(tmp_path, poses="keep")
    got = from_nerfstudio_frame(torch.from_numpy(ns), *read_dataparser_transform(dp), kept.extra["normalisation"])
    assert np.allclose(got.numpy(), file_poses, atol=1e-9)
    dp.write_text(json.dumps({"transform": (2 * np.eye(3, 4)).tolist(), "scale": 1.0}))
    with pytest.raises(InputError, match="not a rotation"):
        read_dataparser_transform(dp)
    assert main(["nerf", "render", str(tmp_path), "--path-frame", str(dp), "--out", str(tmp_path / "o.gif")]) == 2
    assert "--path-frame applies to a camera_path" in capsys.readouterr().err
