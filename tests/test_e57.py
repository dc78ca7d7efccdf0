"""E57 point clouds (terrestrial laser scanners): registered multi-scan files read in their common
frame, the ways such files go wrong, and the commands on them."""

import numpy as np
import pytest

pye57 = pytest.importorskip("pye57")

SITE = np.array([512345.0, 4123456.0, 321.0])
QUARTER_TURN_Z = np.array([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)])  # w x y z: 90 degrees about z


def _scan(points, colours=None, invalid=None, grid=False):
    data = {"cartesianX": points[:, 0].copy(), "cartesianY": points[:, 1].copy(), "cartesianZ": points[:, 2].copy()}
    if grid:  # a stationary scanner's row and column of each point
        data["rowIndex"], data["columnIndex"] = (np.arange(len(points)) % 100).astype(np.int32), (np.arange(len(points)) // 100).astype(np.int32)
    if colours is not None:
        for j, c in enumerate(("colorRed", "colorGreen", "colorBlue")):
            data[c] = colours[:, j].astype(np.uint8)
    if invalid is not None:
        data["cartesianInvalidState"] = invalid.astype(np.int8)
    return data


def _two_station_file(path, colours=True):
    """A registered project of two scanner stations, written with pye57 directly: station A at
    the site's origin with no rotation, station B turned a quarter about z and moved 10 m east;
    each scan in its own frame, A with 3 of its points marked invalid (no return). Returns the
    points in the common frame that a reader must give (invalid ones left out) and their colours."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-5, 5, size=(400, 3)), rng.uniform(-5, 5, size=(300, 3))
    ca, cb = rng.integers(0, 256, size=(400, 3)), rng.integers(0, 256, size=(300, 3))
    invalid = np.zeros(400, bool)
    invalid[[3, 50, 399]] = True
    e57 = pye57.E57(str(path), mode="w")
    e57.write_scan_raw(_scan(a, ca if colours else None, invalid), name="A", rotation=np.array([1.0, 0, 0, 0]), translation=SITE)
    e57.write_scan_raw(_scan(b, cb if colours else None), name="B", rotation=QUARTER_TURN_Z, translation=SITE + [10.0, 0, 0])
    e57.close()
    turned = np.stack([-b[:, 1], b[:, 0], b[:, 2]], 1)  # a quarter turn about z, by hand
    points = np.concatenate([a[~invalid] + SITE, turned + SITE + [10.0, 0, 0]])
    return points, np.concatenate([ca[~invalid], cb]) / 255.0


def test_registered_scans_read_in_the_common_frame(tmp_path):
    from inr.data.pointclouds import read_oriented_cloud

    path = tmp_path / "project.e57"
    truth, colours = _two_station_file(path)
    points, back_colours, normals = read_oriented_cloud(path)
    assert normals is None and points.shape == (697, 3)
    # pye57 stores each scan's own coordinates (within 10 m) in float32; the poses put them at the
    # site in float64, so the error is float32's on metres, not on millions of metres
    np.testing.assert_allclose(points, truth, rtol=0, atol=1e-6)
    np.testing.assert_allclose(back_colours, colours, rtol=0, atol=1e-12)
    _two_station_file(path, colours=False)
    assert read_oriented_cloud(path)[1] is None


@pytest.mark.parametrize("case", ["not E57", "empty file", "cut short", "no scans"])
def test_broken_e57_files_give_one_line_exit_2(tmp_path, case, capsys):
    from inr.cli import main

    bad = tmp_path / "scan.e57"
    if case == "not E57":
        bad.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(4000))
    elif case == "empty file":
        bad.write_bytes(b"")
    elif case == "cut short":
        _two_station_file(bad)
        bad.write_bytes(bad.read_bytes()[:5000])
    else:
        pye57.E57(str(bad), mode="w").close()  # a valid file that holds no scan
    out = tmp_path / "out.ply"
    assert main(["pointcloud", "denoise", str(bad), str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    message = "holds no scans" if case == "no scans" else "is not a readable E57 file"
    assert err.startswith(f"inr: error: {bad}: {message}") and err.count("\n") == 1, err
    assert not out.exists()


def test_e57_without_pye57_says_what_to_install(tmp_path, monkeypatch):
    from inr import _external
    from inr.data.pointclouds import read_cloud, write_cloud
    from inr.errors import InputError

    _two_station_file(tmp_path / "scan.e57")
    monkeypatch.setitem(_external._PROBES, "pye57", (None, "ModuleNotFoundError: hidden by the test"))
    with pytest.raises(InputError, match=r"E57 files need pye57: pye57 is not usable .*pip install 'inr\[e57\]'"):
        read_cloud(tmp_path / "scan.e57")
    with pytest.raises(InputError, match=r"E57 files need pye57"):
        write_cloud(tmp_path / "out.e57", np.eye(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.e57"]


def test_e57_written_a_scan_per_station_far_from_the_origin(tmp_path):
    # points at a UTM site with colours, normals and intensities, from two stations: two scans,
    # each posed at its station (no rotation), read back in the common frame (coordinates as
    # float64: exact); without stations one scan
    from inr.data.pointclouds import read_scan, write_cloud

    rng = np.random.default_rng(3)
    stations = np.repeat(np.array([SITE, SITE + [30.0, 0, 2]]), [250, 150], axis=0)
    points = stations + rng.uniform(-20, 20, size=(400, 3))
    colours, shine = rng.integers(0, 256, size=(400, 3)) / 255.0, rng.random(400)
    normals = rng.normal(size=(400, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    write_cloud(tmp_path / "out.e57", points, colours, normals, shine, stations=stations)
    e57 = pye57.E57(str(tmp_path / "out.e57"))
    poses = [np.asarray(e57.get_header(i).translation) for i in range(e57.scan_count)]
    e57.close()
    assert np.array_equal(np.array(poses), np.array([SITE, SITE + [30.0, 0, 2]]))
    back = read_scan(tmp_path / "out.e57")
    np.testing.assert_allclose(back.points, points, rtol=0, atol=1e-9)
    np.testing.assert_allclose(back.colors, colours, rtol=0, atol=1e-12)
    np.testing.assert_allclose(back.normals, normals, rtol=0, atol=1e-7)  # float32
    np.testing.assert_allclose(back.intensity, shine.astype(np.float32), rtol=0, atol=0)
    write_cloud(tmp_path / "one.e57", points)
    e57 = pye57.E57(str(tmp_path / "one.e57"))
    assert e57.scan_count == 1 and np.allclose(e57.get_header(0).translation, (points.min(0) + points.max(0)) / 2)
    e57.close()
    np.testing.assert_allclose(read_scan(tmp_path / "one.e57").points, points, rtol=0, atol=1e-9)


def test_denoise_a_two_station_e57_scan(tmp_path):
    # a noisy sphere scanned from two stations (each half in its own frame) in, a PLY out: the
    # halves meet in the common frame and the points come back nearer the sphere
    from inr.cli import main
    from inr.data.pointclouds import read_cloud

    rng = np.random.default_rng(2)
    sphere = rng.normal(size=(3000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    noisy = sphere + rng.normal(scale=0.02, size=sphere.shape)
    east = noisy[:, 0] > 0
    station = np.array([3.0, 0, 0])
    local_b = noisy[~east] - station
    unturned = np.stack([local_b[:, 1], -local_b[:, 0], local_b[:, 2]], 1)  # B's frame: a quarter turn back
    path = tmp_path / "scan.e57"
    e57 = pye57.E57(str(path), mode="w")
    e57.write_scan_raw(_scan(noisy[east]), name="A", translation=SITE)
    e57.write_scan_raw(_scan(unturned), name="B", rotation=QUARTER_TURN_Z, translation=SITE + station)
    e57.close()
    out = tmp_path / "clean.ply"
    assert main(["pointcloud", "denoise", str(path), str(out), "--no-progress"]) == 0
    points, _ = read_cloud(out)
    radius = np.linalg.norm(points - SITE, axis=1)
    before = np.abs(np.linalg.norm(noisy, axis=1) - 1).mean()
    assert len(points) == 3000 and np.abs(radius - 1).mean() < 0.6 * before


def test_normals_of_an_e57_scan_face_the_stations_that_saw_it(tmp_path, capsys):
    # a room (a sphere of radius 4 m) scanned from inside by two stations, each scan in its own
    # frame on a scanner's row/column grid: `denoise` writes normals facing into the room
    # (towards the scanners; the estimate alone turns a closed cloud outwards), and fit-sdf
    # reads the same sides. Cartesian points only (a mobile mapper's) name no station.
    from inr.cli import main
    from inr.data.pointclouds import read_oriented_cloud, read_scan
    from inr.data.surfaces import read_surface

    rng = np.random.default_rng(3)
    room = rng.normal(size=(4000, 3))
    room *= 4.0 / np.linalg.norm(room, axis=1, keepdims=True)
    noisy = room + rng.normal(scale=0.02, size=room.shape)
    stations = np.array([[-1.0, 0, 0], [1.0, 0.5, 0]])
    half = noisy[:, 0] < 0
    local_b = noisy[~half] - stations[1]
    path = tmp_path / "room.e57"
    e57 = pye57.E57(str(path), mode="w")
    for name, grid in (("room.e57", True), ("mobile.e57", False)):
        e57 = pye57.E57(str(tmp_path / name), mode="w")
        e57.write_scan_raw(_scan(noisy[half] - stations[0], grid=grid), name="A", translation=SITE + stations[0])
        e57.write_scan_raw(_scan(np.stack([local_b[:, 1], -local_b[:, 0], local_b[:, 2]], 1), grid=grid), name="B",
                           rotation=QUARTER_TURN_Z, translation=SITE + stations[1])
        e57.close()
    assert read_scan(tmp_path / "mobile.e57")[3] is None
    assert read_scan(tmp_path / "mobile.e57").cells is None
    points, _, normals, towards, _, origins, cells = read_scan(path)[:7]
    assert np.allclose(origins[:3], SITE + stations[0])
    n_a = int(half.sum())  # each scan's rows and columns as written, the scan's number first
    assert np.array_equal(cells, np.concatenate([np.stack([np.full(n, i), np.arange(n) % 100, np.arange(n) // 100], 1)
                                                 for i, n in enumerate((n_a, len(room) - n_a))]))
    assert normals is None and np.allclose(towards[:3], (SITE + stations[0] - points[:3]) / np.linalg.norm(
        SITE + stations[0] - points[:3], axis=1, keepdims=True))
    assert main(["pointcloud", "denoise", str(path), str(tmp_path / "clean.ply"), "--no-progress"]) == 0
    assert "sides from the scanner stations" in capsys.readouterr().out
    pts, _, n = read_oriented_cloud(tmp_path / "clean.ply")
    inward = -(pts - SITE) / np.linalg.norm(pts - SITE, axis=1, keepdims=True)
    assert ((n * inward).sum(1) > 0.9).mean() > 0.98
    s = read_surface(path)
    inward = -(s.points - SITE) / np.linalg.norm(s.points - SITE, axis=1, keepdims=True)
    assert s.normals_from == "estimated, facing the scanner" and ((s.normals * inward).sum(1) > 0).mean() > 0.99
    from inr.viewer.clouds import load_geometry, normal_segments  # the viewer draws the same sides

    kind, scan = load_geometry(path)
    seg = normal_segments(scan.points, scan.complete_normals, 0.1, scan=scan)
    p = scan.points
    inward = -(seg[:, 0] - SITE) / np.linalg.norm(seg[:, 0] - SITE, axis=1, keepdims=True)
    assert kind == "points" and (((seg[:, 1] - seg[:, 0]) * inward).sum(1) > 0).mean() > 0.99


def _write_scans_with_normals(path, scans):
    """An E57 file whose scans carry the surface-normals extension (`nor:normalX/Y/Z`), written
    through libE57's nodes (pye57's writer has no such fields). scans: (points, normals, rotation
    w x y z, translation, invalid mask or None, with normals) in the scan's own frame."""
    import uuid

    from pye57 import libe57

    e57 = pye57.E57(str(path), mode="w")
    imf = e57.image_file
    imf.extensionsAdd("nor", "http://www.libe57.org/E57_EXT_surface_normals.txt")
    for points, normals, rotation, translation, invalid, with_normals in scans:
        scan = libe57.StructureNode(imf)
        scan.set("guid", libe57.StringNode(imf, "{%s}" % uuid.uuid4()))
        pose, rot, tr = libe57.StructureNode(imf), libe57.StructureNode(imf), libe57.StructureNode(imf)
        for key, value in zip("wxyz", rotation):
            rot.set(key, libe57.FloatNode(imf, float(value)))
        for key, value in zip("xyz", translation):
            tr.set(key, libe57.FloatNode(imf, float(value)))
        pose.set("rotation", rot)
        pose.set("translation", tr)
        scan.set("pose", pose)
        columns = {"cartesianX": points[:, 0], "cartesianY": points[:, 1], "cartesianZ": points[:, 2]}
        if with_normals:
            columns.update({"nor:normalX": normals[:, 0], "nor:normalY": normals[:, 1], "nor:normalZ": normals[:, 2]})
        prototype = libe57.StructureNode(imf)
        for name in columns:
            prototype.set(name, libe57.FloatNode(imf, 0.0, libe57.E57_DOUBLE if name.startswith("cart") else libe57.E57_SINGLE))
        if invalid is not None:
            prototype.set("cartesianInvalidState", libe57.IntegerNode(imf, 0, 0, 2))
            columns["cartesianInvalidState"] = invalid.astype(np.int8) * 2  # 2: no return
        points_node = libe57.CompressedVectorNode(imf, prototype, libe57.VectorNode(imf, True))
        scan.set("points", points_node)
        e57.data3d.append(scan)
        arrays = {name: np.ascontiguousarray(col, dtype=np.int8 if name.endswith("State") else np.float64)
                  for name, col in columns.items()}
        buffers = libe57.VectorSourceDestBuffer()
        for name, array in arrays.items():
            buffers.append(libe57.SourceDestBuffer(imf, name, array, len(points), True, True))
        writer = points_node.writer(buffers)
        writer.write(len(points))
        writer.close()
    e57.close()


def test_the_normals_an_e57_file_carries_are_read_in_the_common_frame(tmp_path, capsys):
    # a sphere scanned in two halves, each in its own frame with its normals (the extension's
    # fields): they come back turned by each scan's pose, the invalid points' left out, and
    # `denoise` takes its sides from them; a file where one scan has none reads without normals
    from inr.cli import main
    from inr.data.pointclouds import read_oriented_cloud
    from inr.data.surfaces import read_surface

    rng = np.random.default_rng(4)
    sphere = rng.normal(size=(2000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    inward = -sphere  # a room's walls seen from inside: normals the estimate alone would turn outwards
    east = sphere[:, 0] > 0
    back = lambda v: np.stack([v[:, 1], -v[:, 0], v[:, 2]], 1)  # noqa: E731  B's frame: a quarter turn back
    invalid = np.zeros(int(east.sum()), bool)
    invalid[[0, 7]] = True
    path = tmp_path / "normals.e57"
    scans = [(sphere[east], inward[east], (1.0, 0, 0, 0), SITE, invalid, True),
             (back(sphere[~east]), back(inward[~east]), QUARTER_TURN_Z, SITE, None, True)]
    _write_scans_with_normals(path, scans)
    points, _, normals = read_oriented_cloud(path)
    keep = np.concatenate([~invalid, np.ones(int((~east).sum()), bool)])
    order = np.concatenate([np.flatnonzero(east), np.flatnonzero(~east)])[keep]
    np.testing.assert_allclose(points, sphere[order] + SITE, rtol=0, atol=1e-6)
    np.testing.assert_allclose(normals, inward[order], rtol=0, atol=1e-6)  # float32 in the file
    assert read_surface(path).normals_from == "file"
    assert main(["pointcloud", "denoise", str(path), str(tmp_path / "clean.ply"), "--no-progress"]) == 0
    assert "sides from the input's normals" in capsys.readouterr().out
    pts, _, n = read_oriented_cloud(tmp_path / "clean.ply")
    assert ((n * -(pts - SITE)).sum(1) > 0).mean() > 0.99  # facing into the room, as the file's
    scans[1] = scans[1][:5] + (False,)
    _write_scans_with_normals(path, scans)
    assert read_oriented_cloud(path)[2] is None


def test_denoise_a_station_scan_to_e57_keeps_a_scan_per_station(tmp_path, capsys):
    # two stations on a scanner's grid (so the reader knows them): the written E57 has a scan posed at
    # each station, holding the output points whose nearest input point that station saw
    from inr.cli import main
    from inr.data.pointclouds import read_scan

    rng = np.random.default_rng(5)
    sphere = rng.normal(size=(2000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    noisy = 4 * sphere + rng.normal(scale=0.05, size=sphere.shape)
    east = noisy[:, 0] > 0
    stations = np.array([[1.0, 0, 0], [-1.0, 0, 0]])
    path = tmp_path / "room.e57"
    e57 = pye57.E57(str(path), mode="w")
    e57.write_scan_raw(_scan(noisy[east] - stations[0], grid=True), name="A", translation=SITE + stations[0])
    e57.write_scan_raw(_scan(noisy[~east] - stations[1], grid=True), name="B", translation=SITE + stations[1])
    e57.close()
    held = read_scan(path)
    assert held.stations is not None
    out = tmp_path / "clean.e57"
    assert main(["pointcloud", "denoise", str(path), str(out), "--no-progress", "--keep-mixed"]) == 0
    e57 = pye57.E57(str(out))
    scans = [(np.asarray(e57.get_header(i).translation), e57.read_scan(i, transform=True, ignore_missing_fields=True))
             for i in range(e57.scan_count)]
    e57.close()
    assert [tuple(t) for t, _ in scans] == [tuple(SITE + stations[1]), tuple(SITE + stations[0])]  # sorted
    for station, scan in scans:
        pts = np.stack([scan["cartesianX"], scan["cartesianY"], scan["cartesianZ"]], 1)
        near = np.argmin(((pts[:, None] - held.points[None]) ** 2).sum(-1), 1)
        assert np.array_equal(held.stations[near], np.tile(station, (len(pts), 1)))
    assert sum(len(s["cartesianX"]) for _, s in scans) == 2000
    written = read_scan(out)  # the normals face the stations, inside the room
    inward = np.einsum("ij,ij->i", written.normals, -(written.points - SITE) / np.linalg.norm(written.points - SITE, axis=1, keepdims=True))
    assert (inward > 0.9).mean() > 0.95
