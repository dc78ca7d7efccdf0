"""The wheel holds every module of the source tree, and the package works without open3d."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_holds_every_module_preset_and_asset(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    # setuptools and build come with the test extra (make setup): a missing one fails here
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("inr-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    source = {str(p.relative_to(ROOT)) for p in (ROOT / "inr").rglob("*.py")}
    missing = sorted(s for s in source if s not in names)
    assert not missing, f"modules missing from the wheel: {missing}"
    from inr.native import HEADERS, SOURCES  # the native kernels compile from the installed package

    assert {f"inr/native/{n}" for n in SOURCES + HEADERS} <= names
    for folder, pattern in (("configs", "*/*.yaml"), ("assets", "*.p[nt]*"), ("scenes", "*/transforms_*.json")):
        for f in (ROOT / folder).glob(pattern):
            assert f"inr/{folder}/{f.relative_to(ROOT / folder)}" in names, f"{f} is not in the wheel"


def test_point_clouds_without_open3d(tmp_path, monkeypatch):
    """k-NN, distances, PLY/XYZ I/O and even subsampling fall back to scipy/trimesh/numpy, with
    the same results as open3d's (where open3d is installed to compare)."""
    import numpy as np
    import torch
    import trimesh

    from inr import _external
    from inr.data.pointclouds import read_cloud, read_oriented_cloud, write_cloud
    from inr.pointcloud.knn import knn
    from inr.pointcloud.metrics import nearest_distances
    from inr.pointcloud.voxel import even_subsample
    from inr.tasks.outputs import write_mesh

    rng = np.random.default_rng(0)
    pts = rng.normal(size=(500, 3))
    cols = rng.random((500, 3))
    with_o3d = _external.has_open3d()
    if with_o3d:
        ref_idx, _ = knn(torch.from_numpy(pts[:50]).float(), torch.from_numpy(pts).float(), 4)
        ref_d = nearest_distances(pts[:50] + 0.01, pts)
    monkeypatch.setitem(_external._PROBES, "open3d", (None, "ModuleNotFoundError: hidden by the test"))
    assert not _external.has_open3d()
    idx, d2 = knn(torch.from_numpy(pts[:50]).float(), torch.from_numpy(pts).float(), 4)
    assert torch.equal(idx[:, 0], torch.arange(50)) and float(d2[:, 0].abs().max()) < 1e-10
    brute = torch.cdist(torch.from_numpy(pts[:50]), torch.from_numpy(pts)).topk(4, largest=False).indices
    assert torch.equal(idx, brute)
    d = nearest_distances(pts[:50] + 0.01, pts)
    if with_o3d:
        assert torch.equal(idx, ref_idx) and np.allclose(d, ref_d)
    for suffix in (".ply", ".xyz"):
        write_cloud(tmp_path / f"c{suffix}", pts, cols)
        back, back_cols = read_cloud(tmp_path / f"c{suffix}")
        assert np.allclose(back, pts, atol=1e-6)
        if suffix == ".ply":
            assert np.abs(back_cols - cols).max() <= 0.5 / 255 + 1e-9
    with pytest.raises(Exception, match="PCD files need open3d"):
        write_cloud(tmp_path / "c.pcd", pts)
    assert not (tmp_path / "c.pcd").exists()
    normals = pts / np.linalg.norm(pts, axis=1, keepdims=True)
    far = pts + [4.5e6, 5.2e6, 310.0]  # a georeferenced scan: float32 would put it on a 0.5 m grid
    for name, where in (("near", pts), ("far", far)):  # PLY with normals and colours, without open3d
        write_cloud(tmp_path / f"{name}.ply", where, cols, normals)
        back, back_cols, back_normals = read_oriented_cloud(tmp_path / f"{name}.ply")
        assert np.abs(back - where).max() <= (0 if name == "far" else 1e-6)
        assert np.abs(back_normals - normals).max() < 1e-6 and np.abs(back_cols - cols).max() <= 0.5 / 255 + 1e-9
    cut = tmp_path / "cut.ply"  # an ASCII PLY cut short: trimesh reads the lines there are
    cut.write_text("ply\nformat ascii 1.0\nelement vertex 10\nproperty float x\nproperty float y\n"
                   "property float z\nend_header\n" + "".join(f"{i} {i * i} 1\n" for i in range(5)))
    with pytest.raises(Exception, match="holds 5 of the 10 points its header declares"):
        read_cloud(cut)
    sphere = trimesh.creation.icosphere(2)  # a mesh far from the origin, with vertex colours: float64 PLY too
    sphere.vertices += far[0]
    sphere.visual.vertex_colors = (cols[: len(sphere.vertices)] * 255).astype(np.uint8)
    write_mesh(tmp_path / "far-mesh.ply", sphere)
    back = trimesh.load(tmp_path / "far-mesh.ply", process=False)
    assert np.array_equal(back.vertices, sphere.vertices) and np.array_equal(back.faces, sphere.faces)
    assert np.array_equal(back.visual.vertex_colors[:, :3], sphere.visual.vertex_colors[:, :3])
    sub = even_subsample(pts, 100)
    assert sub.shape == (100, 3)
    if with_o3d:  # what was written without open3d, open3d reads the same
        monkeypatch.undo()
        o3d = _external.open3d()
        for name, where in (("near", pts), ("far", far)):
            cloud = o3d.io.read_point_cloud(str(tmp_path / f"{name}.ply"))
            assert np.abs(np.asarray(cloud.points) - where).max() <= (0 if name == "far" else 1e-6)
            assert np.abs(np.asarray(cloud.normals) - normals).max() < 1e-6


def test_the_cli_imports_no_compiler_metrics_or_training_stack():
    # `inr --help` and the point-cloud commands need none of them: torch._dynamo (~1 s, imported
    # by torch.compiler.disable, now applied on first call), torchmetrics (~1 s, imported by the
    # metrics on first use) and Lightning (training only)
    code = ("import contextlib, io, sys\n"
            "from inr.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['--help'])\n"
            "print(*[m in sys.modules for m in ('torch._dynamo', 'torchmetrics', 'lightning', 'inr.tasks.audio')])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False", "True"]  # the tasks are registered, their heavy imports deferred
