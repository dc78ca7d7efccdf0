"""LAS and LAZ point clouds: files as lidar and photogrammetry tools write them, round trips far
from the origin, and the ways such files go wrong."""

import numpy as np
import pytest

laspy = pytest.importorskip("laspy")

UTM = np.array([512345.0, 4123456.0, 321.0])


def _scanner_file(path, n=1000, seed=0, compress=False):
    """A LAS file as a scanner writes it, made with laspy directly: millimetre steps about a UTM
    offset, point format 3 (GPS time and colours), 8-bit colours in the 16-bit fields, and
    normals as extra dimensions spelled nx ny nz. Returns (points, colours, normals) it holds."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(-20_000, 20_000, size=(n, 3))
    header = laspy.LasHeader(point_format=3, version="1.2")
    header.offsets, header.scales = UTM, np.full(3, 0.001)
    header.add_extra_dims([laspy.ExtraBytesParams(name=c, type=np.float32) for c in ("nx", "ny", "nz")])
    las = laspy.LasData(header)
    las.X, las.Y, las.Z = steps[:, 0], steps[:, 1], steps[:, 2]
    rgb = rng.integers(0, 256, size=(n, 3))
    las.red, las.green, las.blue = rgb[:, 0], rgb[:, 1], rgb[:, 2]
    normals = rng.normal(size=(n, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    for i, c in enumerate(("nx", "ny", "nz")):
        las[c] = normals[:, i].astype(np.float32)
    las.gps_time = np.arange(n, dtype=np.float64)
    las.write(path, do_compress=compress)
    return steps * 0.001 + UTM, rgb / 255.0, normals.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_las_files_as_scanners_write_them(tmp_path, suffix):
    from inr.data.pointclouds import read_oriented_cloud

    path = tmp_path / f"scan{suffix}"
    pts, rgb, normals = _scanner_file(path, compress=suffix == ".laz")
    back, colours, back_normals = read_oriented_cloud(path)
    np.testing.assert_allclose(back, pts, rtol=0, atol=1e-9)  # float64 at UTM coordinates: mm steps kept
    np.testing.assert_allclose(colours, rgb, rtol=0, atol=1e-12)  # 8-bit values in 16-bit fields
    np.testing.assert_allclose(back_normals, normals / np.linalg.norm(normals, axis=1, keepdims=True), atol=1e-12)


@pytest.mark.parametrize("suffix", [".las", ".laz"])
def test_las_round_trip_far_from_the_origin_with_colours_and_normals(tmp_path, suffix):
    from inr.data.las import INT_RANGE
    from inr.data.pointclouds import read_oriented_cloud, write_cloud

    rng = np.random.default_rng(1)
    pts = rng.normal(size=(300, 3)) * 3.0 + UTM
    colours = rng.random((300, 3))
    normals = rng.normal(size=(300, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    path = tmp_path / f"out{suffix}"
    write_cloud(path, pts, colours, normals)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    header = laspy.read(path).header
    reach = np.abs(pts - (pts.min(0) + pts.max(0)) / 2).max()
    step = float(header.scales[0])
    assert reach / INT_RANGE <= step < 10 * reach / INT_RANGE  # the power of ten that fits
    back, back_colours, back_normals = read_oriented_cloud(path)
    np.testing.assert_allclose(back, pts, rtol=0, atol=step / 2 + 4 * np.spacing(UTM.max()))  # half a step, float64 rounding
    np.testing.assert_allclose(back_colours, colours, rtol=0, atol=0.5 / 65535 + 1e-12)
    np.testing.assert_allclose(back_normals, normals, rtol=0, atol=1e-6)  # float32 extra dimensions
    write_cloud(path, pts)  # no colours, no normals: point format 0
    back, back_colours, back_normals = read_oriented_cloud(path)
    assert back_colours is None and back_normals is None and laspy.read(path).header.point_format.id == 0


def _cut(path, keep):
    data = path.read_bytes()
    path.write_bytes(data[:keep(len(data), laspy.read(path).header)])


@pytest.mark.parametrize("case", ["LAS cut at a point", "LAS cut mid-point", "LAZ cut short", "not LAS", "empty file"])
def test_broken_las_files_give_one_line_exit_2(tmp_path, case, capsys):
    from inr.cli import main

    bad = tmp_path / ("scan.laz" if "LAZ" in case else "scan.las")
    if case == "not LAS":
        bad.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(400))
        message = "is not a readable LAS point cloud"
    elif case == "empty file":
        bad.write_bytes(b"")
        message = "is not a readable LAS point cloud"
    else:
        _scanner_file(bad, compress="LAZ" in case)
        if case == "LAS cut at a point":  # laspy itself reads the 400 points left without a word
            _cut(bad, lambda size, h: h.offset_to_point_data + 400 * h.point_format.size)
            message = "holds 400 of the 1000 points its header declares"
        else:
            _cut(bad, lambda size, h: size * 2 // 3)
            message = f"is not a readable {bad.suffix[1:].upper()} point cloud, or is cut short"
    out = tmp_path / "out.las"
    assert main(["pointcloud", "denoise", str(bad), str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"inr: error: {bad}: ") and message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_las_without_laspy_says_what_to_install(tmp_path, monkeypatch):
    from inr import _external
    from inr.data.pointclouds import read_cloud, write_cloud
    from inr.errors import InputError

    _scanner_file(tmp_path / "scan.las", n=20)
    write_cloud(tmp_path / "ok.las", np.eye(3))
    monkeypatch.setitem(_external._PROBES, "lazrs", (None, "ModuleNotFoundError: hidden by the test"))
    read_cloud(tmp_path / "scan.las")  # LAS needs no LAZ backend
    with pytest.raises(InputError, match=r"LAZ files need laspy: lazrs is not usable .*pip install 'inr\[las\]'"):
        write_cloud(tmp_path / "c.laz", np.eye(3))
    monkeypatch.setitem(_external._PROBES, "laspy", (None, "ModuleNotFoundError: hidden by the test"))
    with pytest.raises(InputError, match=r"LAS files need laspy: laspy is not usable .*pip install 'inr\[las\]'"):
        read_cloud(tmp_path / "scan.las")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.las", "scan.las"]


def test_denoise_and_mesh_a_georeferenced_las_scan(tmp_path, capsys):
    # a noisy sphere at UTM coordinates in, a LAZ with normals out: the points come back near the
    # sphere (in float64, far from the origin), and the normals written point outwards
    from inr.cli import main
    from inr.data.pointclouds import read_oriented_cloud, write_cloud

    rng = np.random.default_rng(2)
    sphere = rng.normal(size=(3000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    noisy = sphere + rng.normal(scale=0.02, size=sphere.shape)
    write_cloud(tmp_path / "scan.las", noisy + UTM)
    out = tmp_path / "clean.laz"
    assert main(["pointcloud", "denoise", str(tmp_path / "scan.las"), str(out), "--no-progress"]) == 0
    points, _, normals = read_oriented_cloud(out)
    radius = np.linalg.norm(points - UTM, axis=1)
    before = np.abs(np.linalg.norm(noisy, axis=1) - 1).mean()
    assert len(points) == 3000 and np.abs(radius - 1).mean() < 0.6 * before
    outward = np.einsum("ij,ij->i", normals, (points - UTM) / radius[:, None])
    assert (outward > 0.9).mean() > 0.95
    mesh = tmp_path / "scan.ply"
    assert main(["pointcloud", "mesh", str(out), str(mesh), "--method", "poisson", "--denoise", "none"]) == 0
    import trimesh

    surface = trimesh.load(mesh, process=False)
    assert np.abs(np.linalg.norm(surface.vertices - UTM, axis=1) - 1).mean() < 0.02


def test_a_valleys_normals_face_up_and_a_closed_objects_face_out(tmp_path, capsys):
    # airborne lidar of a valley (z = r^2 / 400 m over 200 m): turned away from its centroid the
    # estimate points the floor's normals down; LAS's z is the elevation, so an open cloud lying
    # along it faces up. A closed object (a sphere) keeps its outward normals.
    from inr.cli import main
    from inr.data.pointclouds import read_oriented_cloud, write_cloud
    from inr.data.surfaces import estimate_normals

    rng = np.random.default_rng(4)
    xy = rng.uniform(-100, 100, size=(4000, 2))
    valley = np.c_[xy, (xy**2).sum(1) / 400 + rng.normal(scale=0.05, size=4000)] + UTM
    sphere = rng.normal(size=(4000, 3))
    sphere = 10 * sphere / np.linalg.norm(sphere, axis=1, keepdims=True) + UTM
    assert (estimate_normals(valley)[:, 2] < 0).mean() > 0.99  # the case this is for
    for name, pts in (("valley", valley), ("ball", sphere)):
        write_cloud(tmp_path / f"{name}.las", pts)
        assert main(["pointcloud", "denoise", str(tmp_path / f"{name}.las"), str(tmp_path / f"{name}.ply"), "--baseline", "mls"]) == 0
        out, _, n = read_oriented_cloud(tmp_path / f"{name}.ply")
        if name == "valley":
            assert (n[:, 2] > 0).mean() > 0.99
        else:
            assert ((n * (out - UTM)).sum(1) > 0).mean() > 0.99
    np.save(tmp_path / "valley.npy", valley)  # other formats say nothing of up: as the estimate gives
    assert main(["pointcloud", "denoise", str(tmp_path / "valley.npy"), str(tmp_path / "npy.ply"), "--baseline", "mls"]) == 0
    assert (read_oriented_cloud(tmp_path / "npy.ply")[2][:, 2] < 0).mean() > 0.99


@pytest.mark.parametrize("point_format,version", [(1, "1.2"), (6, "1.4")])  # the flag in two places of the record
def test_withheld_points_are_left_out_as_the_specification_asks(tmp_path, capsys, point_format, version):
    # a noisy sphere and 300 points far off it marked withheld (as a QA step marks bad returns): every
    # reader leaves them out and the records stay aligned; denoise says how many, counts them in its
    # input, and the output lies on the sphere; a file of withheld points only is refused, one line
    from inr.cli import main
    from inr.data.pointclouds import read_cloud, read_scan

    rng = np.random.default_rng(5)
    sphere = rng.normal(size=(2000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    noisy = sphere + rng.normal(scale=0.01, size=sphere.shape)
    far = rng.uniform(3, 6, size=(300, 3))
    header = laspy.LasHeader(point_format=point_format, version=version)
    header.offsets, header.scales = UTM, np.full(3, 1e-5)
    las = laspy.LasData(header)
    las.x, las.y, las.z = (np.r_[noisy, far] + UTM).T
    las.classification = np.r_[np.full(2000, 2), np.full(300, 7)]
    las.withheld = np.r_[np.zeros(2000, bool), np.ones(300, bool)]
    las.write(tmp_path / "scan.las")
    scan = read_scan(tmp_path / "scan.las", records=True)
    assert scan.withheld == 300 and np.allclose(scan.points - UTM, noisy, atol=1e-5)
    assert (np.asarray(scan.records.points.classification) == 2).all() and len(read_cloud(tmp_path / "scan.las")[0]) == 2000
    assert main(["pointcloud", "denoise", str(tmp_path / "scan.las"), str(tmp_path / "out.las"), "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "2,000 points with normals from 2,300 " in said
    assert "; 300 points the file marks withheld (not to be processed) left out" in said
    out = read_scan(tmp_path / "out.las")
    assert len(out.points) == 2000 and np.abs(np.linalg.norm(out.points - UTM, axis=1) - 1).max() < 0.1
    las.withheld = np.ones(2300, bool)
    las.write(tmp_path / "gone.las")
    assert main(["pointcloud", "denoise", str(tmp_path / "gone.las"), str(tmp_path / "x.las"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"inr: error: {tmp_path / 'gone.las'}: all 2,300 of its points are marked withheld (not to be processed)"
    assert not (tmp_path / "x.las").exists()


def test_points_moved_onto_the_surface_take_no_noise_class(tmp_path, monkeypatch):
    # ground (class 2) with a tenth of its returns classed low noise (7) among them: `denoise`
    # moves points onto the ground, and none takes a noise record (each the nearest other's);
    # with no class counted as noise about a tenth would
    from inr.cli import main
    from inr.data import las as las_module

    rng = np.random.default_rng(9)
    x = np.c_[rng.uniform(0, 10, (3000, 2)), rng.normal(scale=0.02, size=3000)]
    header = laspy.LasHeader(point_format=1, version="1.2")
    header.offsets, header.scales = UTM, [0.001] * 3
    las = laspy.LasData(header)
    las.x, las.y, las.z = x[:, 0] + UTM[0], x[:, 1] + UTM[1], x[:, 2] + UTM[2]
    las.classification = np.where(np.arange(3000) % 10 == 0, 7, 2).astype(np.uint8)
    las.write(tmp_path / "in.las")
    shares = []
    for noise in (las_module.NOISE_CLASSES, ()):
        monkeypatch.setattr(las_module, "NOISE_CLASSES", noise)
        assert main(["pointcloud", "denoise", str(tmp_path / "in.las"), str(tmp_path / "out.las"), "--no-progress"]) == 0
        shares.append((np.asarray(laspy.read(tmp_path / "out.las").classification) == 7).mean())
    assert shares[0] == 0 and 0.05 < shares[1] < 0.15, shares
