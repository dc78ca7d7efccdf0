"""The web viewer in a real headless browser (Debian's chromium driven by playwright; WebGL through
SwiftShader): the page must show the scene, not a blank canvas.

- a NeRF run of a scene whose every view is one opaque red: the canvas must turn red where the
  field is, and match the frame the server rendered;
- a point cloud of pure green points: green pixels must appear;
- `nerf train --viewer`: the page's step count must advance while it trains.
"""

import io
import re
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from inr.cli import main

from .test_nerf import FAST
from .test_scenes import blender_scene

CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "") if p and Path(p).is_file()), None)
BROWSER_ARGS = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist", "--no-sandbox",
                "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows"]
RED = (200, 40, 40)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def page_at(url: str):
    from playwright.sync_api import sync_playwright

    assert CHROMIUM, "chromium is not installed (make setup installs it)"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 960, "height": 640})
            page.goto(url)
            yield page
        finally:
            browser.close()


def canvas(page) -> np.ndarray:
    return iio.imread(io.BytesIO(page.locator("canvas").first.screenshot()), extension=".png")[..., :3].astype(int)


def wait_until(page, test, seconds: float = 60.0) -> np.ndarray:
    deadline = time.time() + seconds
    while True:
        img = canvas(page)
        if test(img) or time.time() > deadline:
            return img
        time.sleep(0.5)


def near(img: np.ndarray, colour, tol: int = 40) -> np.ndarray:
    return (np.abs(img - np.array(colour)) <= tol).all(-1)


def _grey(image) -> bool:
    return image is not None and bool((image[..., 0] == image[..., 1]).all() and (image[..., 1] == image[..., 2]).all())


def red_scene_run(tmp_path: Path) -> Path:
    scene = blender_scene(tmp_path / "s", n_train=3)
    for p in list((scene / "train").glob("*.png")) + list((scene / "test").glob("*.png")):
        iio.imwrite(p, np.full((8, 8, 4), [*RED, 255], np.uint8))
    out = tmp_path / "run"
    assert main(["nerf", "train", str(scene), "--steps", "60", "--out", str(out), "--no-progress", *FAST]) == 0
    return out


def test_viewer_shows_a_nerf_run(tmp_path):
    from inr.viewer import Viewer, content_for

    run = red_scene_run(tmp_path)
    viewer = Viewer(content_for([run]), port=free_port())
    try:
        with page_at(viewer.url) as page:
            img = wait_until(page, lambda im: near(im, RED).mean() > 0.3)
            nerf = viewer.content
            assert nerf.progressive.frames >= 1  # the server rendered for this browser
            assert near(img, RED).mean() > 0.3, f"red share {near(img, RED).mean():.2f}"
            # the other outputs, chosen in the page's dropdown: the server renders accumulation,
            # grey levels that are light where the field is opaque. (Checked on the frame sent:
            # headless chromium shows the first background image of a page but not later ones.)
            page.locator("input[value='rgb']").first.click()
            page.get_by_role("option", name="accumulation").click()
            deadline = time.time() + 30
            while time.time() < deadline and not (nerf.mode.value == "accumulation" and _grey(nerf.progressive.last_image)):
                time.sleep(0.2)
            frame = nerf.progressive.last_image.astype(int)
            assert nerf.mode.value == "accumulation" and _grey(frame) and frame.mean() > 150, frame.mean(axis=(0, 1))
    finally:
        viewer.stop()


def test_viewer_shows_a_point_cloud_and_a_pair(tmp_path):
    from inr.data.pointclouds import write_cloud
    from inr.viewer import Viewer, content_for

    rng = np.random.default_rng(0)
    pts = rng.normal(size=(4000, 3))
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    green = np.tile([[0.0, 1.0, 0.0]], (len(pts), 1))
    write_cloud(tmp_path / "a.ply", pts, green)
    write_cloud(tmp_path / "b.ply", pts * 0.5, np.tile([[0.0, 0.0, 1.0]], (len(pts), 1)))
    viewer = Viewer(content_for([tmp_path / "a.ply", tmp_path / "b.ply"]), port=free_port())
    try:
        with page_at(viewer.url) as page:
            # (the axes gizmo in a corner has a few hundred green and blue pixels: count the middle)
            def middle(im):
                h, w = im.shape[:2]
                return im[h // 6: -h // 6, w // 6: -w // 6]

            img = wait_until(page, lambda im: near(middle(im), (0, 255, 0), 90).sum() > 2000
                             and near(middle(im), (0, 0, 255), 90).sum() > 500)
            assert near(middle(img), (0, 255, 0), 90).sum() > 2000, "no green points drawn"
            assert near(middle(img), (0, 0, 255), 90).sum() > 500, "the second cloud of the pair is not drawn"
    finally:
        viewer.stop()


def test_view_command_refuses_bad_input(tmp_path, capsys):
    (tmp_path / "junk.ply").write_text("not a ply")
    assert main(["view", str(tmp_path / "junk.ply")]) == 2
    assert main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "junk.ply" in err and "is not a run folder" in err and "Traceback" not in err
    import trimesh

    text = trimesh.creation.icosphere(2).export(file_type="ply", encoding="ascii")
    text = text.decode() if isinstance(text, bytes) else text
    (tmp_path / "cut.ply").write_text(text[: len(text) * 3 // 4])  # a mesh cut short in its faces
    assert main(["view", str(tmp_path / "cut.ply")]) == 2
    assert "cut.ply: holds" in capsys.readouterr().err
    from .helpers import NAN_TETRAHEDRON

    # a mesh with a NaN vertex is refused as fit-sdf refuses it, not sent to the browser
    (tmp_path / "nan.obj").write_text(NAN_TETRAHEDRON)
    assert main(["view", str(tmp_path / "nan.obj")]) == 2
    err = capsys.readouterr().err
    assert "nan.obj: 1 of 4 vertices have NaN" in err and "Traceback" not in err


def test_live_viewer_sees_the_steps_advance(tmp_path):
    scene = blender_scene(tmp_path / "s", n_train=3)
    port = free_port()
    cmd = [sys.executable, "-m", "inr", "nerf", "train", str(scene), "--time-budget", "40", "--viewer", "--viewer-port",
           str(port), "--out", str(tmp_path / "run"), "--no-progress", *FAST]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:
            if "live viewer at" in line:
                break
        with page_at(f"http://127.0.0.1:{port}") as page:
            steps = []
            deadline = time.time() + 30
            while time.time() < deadline and (len(steps) < 2 or steps[-1] <= steps[0]):
                found = re.search(r"step (\d+)", page.inner_text("body"))
                if found:
                    steps.append(int(found.group(1)))
                time.sleep(1.0)
            assert len(steps) >= 2 and steps[-1] > steps[0], steps
            img = canvas(page)
            assert img.std() > 1.0  # frames of the field arrive while it trains
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_signal_viewer_zoom_renders_the_field(tmp_path):
    from inr.viewer import Viewer, content_for
    from inr.viewer.signal import window_coords

    from .helpers import smooth_image

    # zoom 1 over the whole image at its own size is the training grid
    coords, rows, cols = window_coords((4, 6), (0.0, 0.0), 1.0, 4)
    assert (rows, cols) == (4, 6)
    assert np.allclose(coords[:, 0].reshape(4, 6)[:, 0], [-0.75, -0.25, 0.25, 0.75])
    assert np.allclose(coords[:, 1].reshape(4, 6)[0], np.arange(-5, 6, 2) / 6)
    # zoom 4 at a corner: the window is clamped inside the image, 1/4 of each axis
    coords, _, _ = window_coords((4, 6), (-1.0, 1.0), 4.0, 8)
    assert float(coords[:, 0].min()) > -1 and float(coords[:, 0].max()) < -0.5 and float(coords[:, 1].min()) > 0.5

    img = smooth_image(tmp_path / "a.png", 16)
    out = tmp_path / "run"
    assert main(["fit-image", str(img), "--steps", "30", "--out", str(out), "--no-progress",
                 "--set", "train.compile=false"]) == 0
    viewer = Viewer(content_for([out]), port=free_port())
    try:
        sig = viewer.content
        sig.pixels.value = 16  # the training size: the window is the reconstruction itself
        recon = iio.imread(out / "reconstruction.png")[..., :3].astype(int)
        assert np.abs(sig._render_window().astype(int) - recon).max() <= 1
        sig.zoom.value = 8.0  # 8x: a 2x2-pixel patch of the image drawn on 16 rows
        assert sig._render_window().shape == (16, 16, 3)
    finally:
        viewer.stop()


def test_viewer_camera_conversions_known_values():
    import torch

    from inr.render.paths import keyframe_path
    from inr.viewer.camera import c2w_to_viewer, view_rays, viewer_to_c2w

    # viser's identity camera looks along +z (OpenCV); the centre ray must too, from the position
    c2w = viewer_to_c2w((1.0, 0.0, 0.0, 0.0), (1.0, 2.0, 3.0))
    rays, h, w = view_rays(c2w, fov_y=np.pi / 2, aspect=2.0, height=2)
    assert (h, w) == (2, 4)
    assert torch.allclose(rays.origins[0], torch.tensor([1.0, 2.0, 3.0]))
    centre = torch.nn.functional.normalize(rays.directions.mean(0), dim=0)
    assert torch.allclose(centre, torch.tensor([0.0, 0.0, 1.0]), atol=1e-6)
    # the top-left pixel (row 0, column 0) of a 2x4 render, fov 90 deg: focal 1 pixel, centre
    # (1, 2): its centre (0.5, 0.5) is 1.5 left and 0.5 up, i.e. -x and -y in OpenCV's axes
    d = rays.directions[0] / rays.directions[0][2]
    assert torch.allclose(d, torch.tensor([-1.5, -0.5, 1.0]), atol=1e-6)
    # round trip through a random rotation
    q = np.random.default_rng(3).normal(size=4)
    m = viewer_to_c2w(q / np.linalg.norm(q), (0.5, -1.0, 2.0)).numpy()
    wxyz, pos = c2w_to_viewer(m)
    assert np.allclose(viewer_to_c2w(wxyz, pos).numpy(), m, atol=1e-6)
    # a path from a pose to the same pose turned 90 deg about z: halfway is 45 deg, halfway along
    a, b = np.eye(4), np.eye(4)
    b[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    b[:3, 3] = [2.0, 0.0, 0.0]
    path = keyframe_path([a, b], 3).numpy()
    assert np.allclose(path[0], a) and np.allclose(path[-1], b, atol=1e-6)
    c = np.cos(np.pi / 4)
    assert np.allclose(path[1][:3, :3], [[c, -c, 0], [c, c, 0], [0, 0, 1]], atol=1e-6)
    assert np.allclose(path[1][:3, 3], [1.0, 0.0, 0.0])


def test_sdf_viewer_shows_the_level_set_and_the_slice(tmp_path):
    from inr.viewer import Viewer, content_for

    from .test_sdf import _torus_mesh

    import trimesh

    # a georeferenced torus (UTM-like coordinates): the fit and the slice do not move, and the
    # browser, which draws in float32, gets the scene about the field's centre
    offset = np.array([512345.0, 4123456.0, 321.0])
    torus = trimesh.load(_torus_mesh(tmp_path / "t0.obj"), process=False)
    torus.apply_translation(offset)
    torus.export(tmp_path / "t.obj")
    out = tmp_path / "run"
    assert main(["fit-sdf", str(tmp_path / "t.obj"), "--steps", "150", "--out", str(out), "--no-progress",
                 "--mesh-points", "20000", "--set", "train.mesh_resolution=64", "--set", "field.encoding_options.n_levels=8",
                 "--set", "field.encoding_options.max_resolution=128", "--set", "field.encoding_options.log2_table=15",
                 # this test is about the viewer: its small field keeps the sign weight it was written with
                 "--set", "train.w_sign=3000"]) == 0
    viewer = Viewer(content_for([out]), port=free_port())
    try:
        sdf = viewer.content
        saved = len(sdf.mesh.faces)  # the run's mesh.ply
        np.testing.assert_allclose(sdf.centre, offset, atol=0.05)
        drawn = np.asarray(sdf.mesh_handle.vertices, np.float64)  # what the browser gets (float32)
        shape_drawn, shape_true = drawn - drawn[0], sdf.mesh.vertices - sdf.mesh.vertices[0]
        assert np.abs(shape_drawn - shape_true).max() < 1e-5  # float32 world coordinates: off by ~0.25
        sdf.resolution.value = 32
        sdf._extract()
        assert 0 < len(sdf.mesh.faces) < saved and "resolution 32" in sdf.status.content
        sdf.level.value = 0.1  # an offset surface outside the torus: larger
        sdf._extract()
        assert sdf.mesh.area > 1.2 * 4 * np.pi**2 * 1.0 * 0.35
        # the slice through the torus's middle plane: blue inside (the tube), orange outside
        img = sdf._slice_array().astype(int)
        blue, orange = img[..., 2] > img[..., 0] + 40, img[..., 0] > img[..., 2] + 40
        assert blue.mean() > 0.05 and orange.mean() > 0.5
        # the torus (R 1, r 0.35) is scaled by 0.9 / 1.35 into the box [-1, 1]: its tube's centre
        # line crosses the middle row at x = +-0.667 (columns 43 and 213); the hole is outside
        assert orange[128, 128] and blue[128, 213] and blue[128, 43] and orange[128, 252]
        with page_at(viewer.url) as page:
            # the plane covers ~2 % of the page beside the GUI panel (which overlays the canvas); none without it
            shot = wait_until(page, lambda im: near(im, (240, 150, 60), 70).mean() > 0.01)
            assert near(shot, (240, 150, 60), 70).mean() > 0.01, "the slice plane is not drawn"
    finally:
        viewer.stop()


def test_the_live_time_cap_is_not_overshot_by_a_frame(monkeypatch):
    """The live viewer starts a frame only if it fits in its budget at the latest frame's cost
    per pixel: the first frame is a low-resolution probe (its cost is unknown), a full frame
    that would cross the cap is not started, and a cheaper one still is."""
    from types import SimpleNamespace

    from inr.viewer import progressive as prog_mod
    from inr.viewer.progressive import Progressive

    durations = iter([0.32, 0.05])
    clock = {"t": 0.0}

    def render(camera, rows):
        clock["t"] += next(durations)
        return np.zeros((rows, rows, 3), np.uint8), None

    prog = Progressive(render, lambda: 80)
    client = SimpleNamespace(client_id=1, camera=SimpleNamespace(image_height=80, on_update=lambda f: None),
                             scene=SimpleNamespace(set_background_image=lambda *a, **k: None))
    prog.attach(client)
    monkeypatch.setattr(time, "perf_counter", lambda: clock["t"])  # frame durations as scripted
    low = prog_mod.LOW_HEIGHT
    assert prog.next_rows(client) == low and prog.fits(0.0, low)  # nothing rendered yet: a probe
    assert prog.service(client) and abs(prog.render_seconds - 0.32) < 1e-9
    assert prog.next_rows(client) == 80  # the probe did not pay the full frame that is owed
    expected = 0.32 * (80 / low) ** 2  # the probe's cost per pixel at 80 rows
    assert not prog.fits(0.32 + expected - 1e-6, 80) and prog.fits(0.32 + expected + 1e-6, 80)
    assert prog.service(client, 80) and abs(prog.render_seconds - 0.37) < 1e-9
    assert prog.next_rows(client) is None  # paid: nothing owed until the camera moves
    prog.refresh()
    assert prog.fits(0.37 + 0.05 + 1e-6, 80) and not prog.fits(0.37 + 0.05 - 1e-6, 80)  # the latest frame's cost


def test_the_live_cap_is_a_share_of_this_runs_training_time():
    """The live viewer's render budget is `cap` x the training seconds of this process as the
    run's clock counts them: evaluation pauses and the seconds of the run it resumed do not
    count. Here 15 s since training started, 5 s of them evaluating, 100 s before a resume: a
    budget of 0.07 x 10 s = 0.7 s; 0.6 s rendered, a 0.05-s frame fits; 0.68 s rendered, it does not."""
    from types import SimpleNamespace

    from inr.tasks.callbacks import RunMonitor
    from inr.viewer.live import LiveViewer
    from inr.viewer.progressive import Progressive

    monitor = RunMonitor(lambda module: 0.0, every=10**9, time_budget=None)
    monitor.history = [[0, 0.0, 0.0]]  # no first evaluation at on_train_start
    live = LiveViewer(scene=None, background=1.0, cap=0.07)
    trainer = SimpleNamespace(callbacks=[monitor], global_step=5, callback_metrics={})
    monitor.on_train_start(trainer, None)
    live.on_train_start(trainer, None)
    monitor.before, monitor._paused, monitor._t0 = 100.0, 5.0, time.perf_counter() - 15.0

    sent = []
    prog = Progressive(lambda camera, rows: (np.zeros((rows, rows, 3), np.uint8), None), lambda: 80)
    client = SimpleNamespace(client_id=1, camera=SimpleNamespace(image_height=80, on_update=lambda f: None),
                             scene=SimpleNamespace(set_background_image=lambda *a, **k: sent.append(a)))
    prog.attach(client)
    prog.frames, prog.render_seconds, prog.cost_per_row2 = 3, 0.6, 0.05 / 80**2
    live.viewer = SimpleNamespace(content=SimpleNamespace(progressive=prog, status=SimpleNamespace(content="")),
                                  server=SimpleNamespace(get_clients=lambda: {1: client}))
    live._last_refresh = time.perf_counter()  # no periodic refresh within the test
    live.on_train_batch_end(trainer, None, None, None, 0)
    assert len(sent) == 1, "a frame that fits the budget was not sent"
    # 0.68 + 0.05 > 0.7, and a 72-row frame (0.0405 s) does not fit either; with the wall time
    # (budget 1.05 s) or the resumed run's seconds counted, both would
    prog.render_seconds, prog.cost_per_row2 = 0.68, 0.05 / 80**2
    prog.refresh()
    live.on_train_batch_end(trainer, None, None, None, 1)
    assert len(sent) == 1, "a frame beyond the budget was sent"
    assert live.seconds > 0


def test_cloud_viewer_draws_the_files_normals_else_estimated_oriented_ones(tmp_path):
    # a sphere: the file's normals (here, inward) are drawn as they are; without normals, or with
    # zero ones (some writers leave unknown normals at 0), estimated ones, oriented outwards as
    # `denoise` writes them; a mesh's own vertex normals (outwards on an icosphere)
    import trimesh

    from inr.data.pointclouds import write_cloud
    from unittest.mock import MagicMock

    from inr.viewer.clouds import CloudViewer, load_geometry, normal_segments

    pts = np.random.default_rng(0).normal(size=(3000, 3))
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    write_cloud(tmp_path / "in.ply", pts, normals=-pts)
    write_cloud(tmp_path / "zero.ply", pts, normals=np.zeros_like(pts))
    kind, scan = load_geometry(tmp_path / "in.ply")
    p, n = scan.points, scan.normals
    seg = normal_segments(p, n, 0.1, at_most=1000)
    assert kind == "points" and len(seg) == 1000
    assert np.allclose(seg[:, 1] - seg[:, 0], -0.1 * seg[:, 0], atol=1e-5)
    _, zero = load_geometry(tmp_path / "zero.ply")
    p0, n0 = zero.points, zero.normals
    assert n0 is None
    seg = normal_segments(p0, None, 0.1)
    cos = ((seg[:, 1] - seg[:, 0]) / 0.1 * seg[:, 0]).sum(1)  # signed: outwards
    assert len(seg) == 3000 and (cos > 0.99).mean() > 0.99
    partial = -pts.copy()  # inwards where known, zero (unknown) on the others: estimated, their sides
    partial[np.random.default_rng(1).random(len(pts)) > 0.2] = 0
    write_cloud(tmp_path / "partial.ply", pts, normals=partial)
    _, scan = load_geometry(tmp_path / "partial.ply")
    assert scan.complete_normals is None and (~np.isnan(scan.normals[:, 0])).sum() == (partial != 0).any(1).sum()
    seg = normal_segments(scan.points, None, 0.1, scan=scan)
    cos = ((seg[:, 1] - seg[:, 0]) / 0.1 * seg[:, 0]).sum(1)
    assert (cos < -0.99).mean() > 0.99
    trimesh.creation.icosphere(4).export(tmp_path / "ball.ply")  # through the viewer, no browser
    server = MagicMock()
    viewer = CloudViewer(server, [tmp_path / "ball.ply"])
    viewer.show_normals.value = True
    viewer._normals()
    seg = server.scene.add_line_segments.call_args.args[1]
    d = seg[:, 1] - seg[:, 0]
    cos = (d / np.linalg.norm(d, axis=1, keepdims=True) * seg[:, 0] / np.linalg.norm(seg[:, 0], axis=1, keepdims=True)).sum(1)
    assert len(seg) == 2562 and cos.min() > 0.999


def test_point_size_follows_the_scenes_size(tmp_path):
    # from a power of ten near diag / 5,000 (also the step) to ~diag / 50, starting at ~diag / 250:
    # a unit sphere's scene as before (0.0138 of 3.46), and a 600 m scan's points can be shown metres
    # wide (the fixed 0.0005-0.05 range allowed 5 cm at most)
    from unittest.mock import MagicMock

    from inr.data.pointclouds import write_cloud
    from inr.viewer.clouds import CloudViewer, point_size_range

    assert point_size_range(3.46) == (0.0001, 0.0692, 0.0001, 0.0138)
    assert point_size_range(600.0) == (0.1, 12.0, 0.1, 2.4)
    assert point_size_range(2e6) == (100.0, 40000.0, 100.0, 8000.0)
    assert point_size_range(1e-3) == (1e-7, 2e-5, 1e-7, 4e-6)  # tiny scenes too, on a step
    corners = np.array([[0.0, 0, 0], [480, 360, 0]])  # a 600 m box
    write_cloud(tmp_path / "site.ply", np.r_[corners, np.random.default_rng(3).random((50, 3)) * [480, 360, 0]])
    server = MagicMock()
    CloudViewer(server, [tmp_path / "site.ply"])
    kw = server.gui.add_slider.call_args.kwargs
    assert (kw["min"], kw["max"], kw["step"], kw["initial_value"]) == (0.1, 12.0, 0.1, 2.4)
