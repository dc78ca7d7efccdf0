"""Return intensities: read from every scan format that stores them, written to every format
with a place for them, and carried by the point-cloud commands from each output point's nearest
input point."""

import numpy as np
import pytest

from .helpers import ptx_scan

SITE = np.array([512345.0, 4123456.0, 321.0])


def _cloud(n=60, seed=0, far=False):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, 3)) + (SITE if far else 0.0)
    normals = rng.normal(size=(n, 3))
    return points, rng.random((n, 3)), normals / np.linalg.norm(normals, axis=1, keepdims=True), rng.random(n)


@pytest.mark.parametrize("suffix", [".ply", ".pcd", ".las", ".laz", ".txt", ".asc", ".csv"])
@pytest.mark.parametrize("far", [False, True])
def test_intensity_round_trips_where_the_format_holds_it(tmp_path, suffix, far):
    from inr.data.pointclouds import read_scan, write_cloud

    if suffix in (".las", ".laz"):
        pytest.importorskip("laspy")
    points, colours, normals, intensity = _cloud(far=far)
    path = tmp_path / f"c{suffix}"
    write_cloud(path, points, colours, normals, intensity)
    back = read_scan(path)
    assert np.allclose(back.points, points, rtol=0, atol=1e-6)
    assert np.allclose(back.normals, normals, atol=1e-6)
    if suffix in (".las", ".laz"):  # [0, 1] values as LAS's 16 bits
        assert np.array_equal(back.intensity, np.round(intensity * 65535))
    else:  # float32 in binary files, 8 digits in text
        assert np.allclose(back.intensity, intensity, rtol=1e-7, atol=0)


@pytest.mark.parametrize("suffix", [".npy", ".xyz"])
def test_npy_and_xyz_have_no_place_for_intensity(tmp_path, suffix):
    from inr.data.pointclouds import read_scan, write_cloud

    points, colours, normals, intensity = _cloud()
    write_cloud(tmp_path / f"c{suffix}", points, intensity=intensity)
    back = read_scan(tmp_path / f"c{suffix}")
    assert back.intensity is None and np.allclose(back.points, points)


def test_las_intensity_rule():
    from inr.data.las import las_intensity

    assert las_intensity(np.array([0.0, 300.0, 65535.0])).tolist() == [0, 300, 65535]  # a LAS file's, as they are
    assert las_intensity(np.array([0.0, 0.25, 1.0])).tolist() == [0, 16384, 65535]  # PTX's 0-1: 0.25 * 65535 = 16383.75
    # Leica PTS's -2048..2047 stretched: 2048 / 4095 * 65535 = 32775.50... -> 32776
    assert las_intensity(np.array([-2048.0, 0.0, 2047.0])).tolist() == [0, 32776, 65535]
    assert las_intensity(np.array([-3.5, -3.5])).tolist() == [0, 0]


def test_scan_formats_give_their_intensities(tmp_path):
    from inr.data.pointclouds import read_scan

    rng = np.random.default_rng(3)
    # PTX: x y z intensity [r g b]; the empty cell (0 0 0) leaves its intensity out too
    a = rng.uniform(-5, 5, size=(12, 3))
    shine = np.round(rng.random(12), 6)
    text = ptx_scan(a, SITE, np.eye(3), SITE, empty=(4,), intensity=shine)
    (tmp_path / "s.ptx").write_text(text)
    assert np.array_equal(read_scan(tmp_path / "s.ptx").intensity, np.delete(shine, 4))
    # Leica PTS: a count, then x y z intensity [r g b]
    rows = [f"{p[0]:.6f} {p[1]:.6f} {p[2]:.6f} {v}" for p, v in zip(a, (-2048, 5, 2047, 0) * 3)]
    (tmp_path / "s.pts").write_text("12\n" + "\n".join(r + " 1 2 3" for r in rows) + "\n")
    assert read_scan(tmp_path / "s.pts").intensity.tolist() == [-2048, 5, 2047, 0] * 3
    (tmp_path / "s.pts").write_text("12\n" + "\n".join(rows) + "\n")
    assert read_scan(tmp_path / "s.pts").intensity.tolist() == [-2048, 5, 2047, 0] * 3
    # a CSV whose header names the column, and one without it
    (tmp_path / "s.csv").write_text("X,Y,Z,Intensity\n" + "\n".join(r.replace(" ", ",") for r in rows) + "\n")
    assert read_scan(tmp_path / "s.csv").intensity.tolist() == [-2048, 5, 2047, 0] * 3
    (tmp_path / "n.csv").write_text("\n".join(r.replace(" ", ",") for r in rows) + "\n")
    assert read_scan(tmp_path / "n.csv").intensity is None
    # PLY as CloudCompare writes a scalar field, and a PCD with PCL's intensity field
    head = "ply\nformat ascii 1.0\nelement vertex 12\nproperty float x\nproperty float y\nproperty float z\n"
    (tmp_path / "s.ply").write_text(head + "property float scalar_Intensity\nend_header\n" + "\n".join(rows) + "\n")
    assert read_scan(tmp_path / "s.ply").intensity.tolist() == [-2048, 5, 2047, 0] * 3
    pcd = "VERSION 0.7\nFIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\nWIDTH 12\nHEIGHT 1\n"
    pcd += "VIEWPOINT 0 0 0 1 0 0 0\nPOINTS 12\nDATA ascii\n"
    (tmp_path / "s.pcd").write_text(pcd + "\n".join(rows) + "\n")
    assert read_scan(tmp_path / "s.pcd").intensity.tolist() == [-2048, 5, 2047, 0] * 3


def test_las_and_e57_intensities(tmp_path):
    from inr.data.pointclouds import read_scan

    laspy = pytest.importorskip("laspy")
    rng = np.random.default_rng(4)
    header = laspy.LasHeader(point_format=1, version="1.2")
    header.offsets, header.scales = SITE, np.full(3, 0.001)
    las = laspy.LasData(header)
    steps = rng.integers(-5000, 5000, size=(40, 3))
    las.X, las.Y, las.Z = steps[:, 0], steps[:, 1], steps[:, 2]
    raw = rng.integers(0, 4096, size=40)  # a 12-bit sensor's values
    las.intensity = raw
    las.write(tmp_path / "s.las")
    assert read_scan(tmp_path / "s.las").intensity.tolist() == raw.tolist()
    las.intensity = np.zeros(40, np.uint16)  # a writer that stored none
    las.write(tmp_path / "z.las")
    assert read_scan(tmp_path / "z.las").intensity is None

    pye57 = pytest.importorskip("pye57")
    a, b = rng.uniform(-5, 5, size=(30, 3)), rng.uniform(-5, 5, size=(20, 3))
    ia, ib = rng.random(30), rng.random(20)
    e57 = pye57.E57(str(tmp_path / "s.e57"), mode="w")
    for name, p, shine in (("A", a, ia), ("B", b, ib)):
        e57.write_scan_raw({"cartesianX": p[:, 0].copy(), "cartesianY": p[:, 1].copy(), "cartesianZ": p[:, 2].copy(),
                            "intensity": shine.astype(np.float32)}, name=name, translation=SITE)
    e57.close()
    got = read_scan(tmp_path / "s.e57").intensity
    assert np.allclose(got, np.concatenate([ia, ib]).astype(np.float32), rtol=0, atol=1e-7)


def test_ply_intensity_without_open3d(tmp_path, monkeypatch):
    from inr import _external
    from inr.data.pointclouds import read_scan, write_cloud

    points, colours, normals, intensity = _cloud(seed=5)
    monkeypatch.setitem(_external._PROBES, "open3d", (None, "ModuleNotFoundError: hidden by the test"))
    write_cloud(tmp_path / "c.ply", points, colours, normals, intensity)
    back = read_scan(tmp_path / "c.ply")
    assert np.allclose(back.intensity, intensity, rtol=1e-7, atol=0) and np.allclose(back.points, points, atol=1e-6)


def _nearest(at, points):
    return np.argmin(((at[:, None, :] - points[None, :, :]) ** 2).sum(-1), axis=1)


@pytest.mark.parametrize("baseline", [None, "mls"])
def test_denoise_carries_each_points_nearest_input_intensity(tmp_path, baseline, capsys):
    # a noisy sphere in a PTX scan (intensity in 0-1) to LAS (16 bits) and to PLY (as read): each
    # output point has its nearest input point's intensity, found here by brute force
    from inr.cli import main
    from inr.data.pointclouds import read_scan

    rng = np.random.default_rng(6)
    sphere = rng.normal(size=(1500, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    noisy = sphere + rng.normal(scale=0.02, size=sphere.shape)
    shine = np.round(rng.random(1500), 6)
    (tmp_path / "scan.ptx").write_text(ptx_scan(noisy, SITE + [0, 0, 5.0], np.eye(3), SITE, intensity=shine))
    held = read_scan(tmp_path / "scan.ptx")
    extra = [] if baseline is None else ["--baseline", baseline]
    for name in ("out.ply", "out.las"):
        if name.endswith(".las"):
            pytest.importorskip("laspy")
        assert main(["pointcloud", "denoise", str(tmp_path / "scan.ptx"), str(tmp_path / name), "--no-progress",
                     "--keep-mixed"] + extra) == 0
        out = read_scan(tmp_path / name)
        want = held.intensity[_nearest(out.points - SITE, held.points - SITE)]
        if name.endswith(".las"):
            assert np.array_equal(out.intensity, np.round(want * 65535))
        else:
            assert np.allclose(out.intensity, want, rtol=1e-7, atol=0)
        assert len(np.unique(out.intensity)) > 100  # many points' values, not one
        assert "intensities from the nearest input points" in capsys.readouterr().out
    assert main(["pointcloud", "denoise", str(tmp_path / "scan.ptx"), str(tmp_path / "out.xyz"), "--no-progress",
                 "--keep-mixed", "--baseline", "mls"]) == 0
    assert "the input's intensities left out (.xyz files have no place for them)" in capsys.readouterr().out


def test_las_to_las_keeps_each_points_nearest_record(tmp_path, capsys):
    # a LAS 1.4 scan (point format 7: GPS time, 16-bit colours; an extra dimension; a WKT coordinate
    # system) of a noisy sphere, denoised to LAZ: the output has the input's point format, version,
    # extra dimension and coordinate system, and every point the record of its nearest input point
    # (found here by brute force), its coordinates and normal its own
    laspy = pytest.importorskip("laspy")
    from laspy.vlrs.known import WktCoordinateSystemVlr

    from inr.cli import main
    from inr.data.pointclouds import read_scan

    rng = np.random.default_rng(7)
    n = 1500
    sphere = rng.normal(size=(n, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    noisy = sphere + rng.normal(scale=0.02, size=sphere.shape)
    header = laspy.LasHeader(point_format=7, version="1.4")
    header.offsets, header.scales = SITE, np.full(3, 1e-4)
    header.add_extra_dims([laspy.ExtraBytesParams(name="Amplitude", type=np.float32)])
    wkt = 'PROJCS["WGS 84 / UTM zone 10N",GEOGCS["WGS 84"],UNIT["metre",1]]'
    header.vlrs.append(WktCoordinateSystemVlr(wkt))
    header.global_encoding.wkt = True
    las = laspy.LasData(header)
    las.x, las.y, las.z = (noisy + SITE).T
    las.classification = rng.choice([1, 2, 6, 9, 11], size=n)  # surfaces' classes (vegetation's: tests/test_keep.py)
    las.return_number, las.number_of_returns = np.ones(n, int), rng.integers(1, 4, size=n)
    las.gps_time = rng.random(n) * 1e5
    las.intensity = rng.integers(1, 65535, size=n)
    las.red, las.green, las.blue = rng.integers(0, 65535, size=(3, n))
    las["Amplitude"] = rng.random(n).astype(np.float32)
    las.write(tmp_path / "scan.las")
    held = laspy.read(tmp_path / "scan.las")
    for name, extra in (("out.laz", ["--baseline", "mls"]), ("net.las", [])):
        assert main(["pointcloud", "denoise", str(tmp_path / "scan.las"), str(tmp_path / name), "--no-progress"] + extra) == 0
        assert "intensities and LAS records from the nearest input points" in capsys.readouterr().out
        out = laspy.read(tmp_path / name)
        assert out.header.version == "1.4" and out.header.point_format.id == 7 and out.header.global_encoding.wkt
        assert [v.string for v in out.header.vlrs if isinstance(v, WktCoordinateSystemVlr)] == [wkt]
        assert {"Amplitude", "NormalX", "NormalY", "NormalZ"} <= set(out.point_format.extra_dimension_names)
        xyz = np.stack([out.x, out.y, out.z], 1)
        near = _nearest(xyz - SITE, np.stack([held.x, held.y, held.z], 1) - SITE)
        for dim in ("classification", "number_of_returns", "gps_time", "intensity", "red", "blue", "Amplitude"):
            assert np.array_equal(np.asarray(out[dim]), np.asarray(held[dim])[near]), dim
        assert np.abs(np.linalg.norm(xyz - SITE, axis=1) - 1).mean() < np.abs(np.linalg.norm(noisy, axis=1) - 1).mean()
        normals = read_scan(tmp_path / name).normals
        assert (np.einsum("ij,ij->i", normals, (xyz - SITE) / np.linalg.norm(xyz - SITE, axis=1, keepdims=True)) > 0.9).mean() > 0.95
    # to another format the records have no place: PLY keeps the intensities only
    assert main(["pointcloud", "denoise", str(tmp_path / "scan.las"), str(tmp_path / "out.ply"), "--no-progress",
                 "--baseline", "mls"]) == 0
    said = capsys.readouterr().out
    assert "intensities from the nearest input points" in said and "LAS records" not in said


def test_the_viewer_greys_a_scan_without_colours_by_its_intensity(tmp_path):
    from unittest.mock import MagicMock

    from inr.viewer.clouds import CloudViewer, point_colours

    ramp = np.arange(101.0)  # percentiles 1 and 99: 1 and 99; 50 -> 49 / 98 of white
    grey = point_colours(None, ramp)
    assert grey.shape == (101, 3) and (grey == grey[:, :1]).all()
    assert grey[[0, 1, 50, 99, 100], 0].tolist() == [0, 0, 128, 255, 255]
    assert point_colours(None, np.full(5, 7.0))[:, 0].tolist() == [128] * 5
    assert point_colours(np.array([[1.0, 0.0, 0.5]]), ramp[:1]).tolist() == [[255, 0, 128]]  # colours win
    assert point_colours(None, None).tolist() == [60, 110, 200]
    rng = np.random.default_rng(8)
    local = rng.uniform(-5, 5, size=(300, 3))
    shine = rng.random(300)
    (tmp_path / "s.ptx").write_text(ptx_scan(local, SITE, np.eye(3), SITE, intensity=shine))
    server = MagicMock()
    CloudViewer(server, [tmp_path / "s.ptx"])
    drawn = server.scene.add_point_cloud.call_args.args[2]
    lo, hi = np.percentile(shine, [1, 99])
    assert np.array_equal(drawn[:, 0], (np.clip((shine - lo) / (hi - lo), 0, 1) * 255 + 0.5).astype(np.uint8))
    assert any("s.ptx: 300 points, grey by intensity" == c.args[0] for c in server.gui.add_checkbox.call_args_list)


def test_the_viewer_colours_a_las_scan_by_class_on_demand(tmp_path):
    laspy = pytest.importorskip("laspy")
    from unittest.mock import MagicMock

    from inr.viewer.clouds import CLASS_COLOURS, CloudViewer, class_colours

    assert class_colours(np.array([2, 6, 2])).tolist() == [[150, 100, 50], [220, 60, 40], [150, 100, 50]]
    other = class_colours(np.array([40, 41, 40]))  # not the standard's: fixed, distinct hues
    assert (other[0] == other[2]).all() and (other[0] != other[1]).any()
    assert not any(tuple(other[0]) == c for c in CLASS_COLOURS.values())
    rng = np.random.default_rng(9)
    header = laspy.LasHeader(point_format=1, version="1.2")
    header.offsets, header.scales = SITE, np.full(3, 1e-3)
    las = laspy.LasData(header)
    las.x, las.y, las.z = (rng.uniform(-5, 5, size=(300, 3)) + SITE).T
    las.intensity = rng.integers(1, 65535, size=300)
    las.classification = rng.choice([2, 5, 6], size=300)
    las.write(tmp_path / "a.las")
    server = MagicMock()
    CloudViewer(server, [tmp_path / "a.las"])
    handle = server.scene.add_point_cloud.return_value
    greys = server.scene.add_point_cloud.call_args.args[2]
    assert (greys == greys[:, :1]).all()  # drawn grey by intensity at first
    box = next(c for c in server.gui.add_checkbox.call_args_list if c.args[0] == "a.las: colour by class (3 classes)")
    toggle = server.gui.add_checkbox.return_value.on_update.call_args_list
    shown = np.asarray(laspy.read(tmp_path / "a.las").classification)
    server.gui.add_checkbox.return_value.value = True
    for call in toggle:  # the checkboxes share one mock: the class box's callback is the one that sets colours
        call.args[0](None)
    assert box and np.array_equal(handle.colors, class_colours(shown))
    server.gui.add_checkbox.return_value.value = False
    for call in toggle:
        call.args[0](None)
    assert np.array_equal(handle.colors, greys)


def test_las_records_leave_out_what_a_copy_does_not_hold(tmp_path):
    # waveform packets (the points' descriptors and the file's flag) and COPC's records describe
    # data or a layout that the written file does not have: left out; other records kept
    laspy = pytest.importorskip("laspy")
    from inr.data.pointclouds import read_scan, write_cloud

    header = laspy.LasHeader(point_format=4, version="1.3")
    header.global_encoding.waveform_data_packets_external = True
    header.vlrs.append(laspy.VLR("copc", 77, "octree notes", b"12345678"))
    header.vlrs.append(laspy.VLR("someone", 5, "kept", b"abc"))
    las = laspy.LasData(header)
    rng = np.random.default_rng(9)
    las.x, las.y, las.z = rng.normal(size=(3, 50))
    las.wavepacket_index, las.wavepacket_size, las.classification = np.full(50, 3), np.full(50, 40), np.full(50, 6)
    las.write(tmp_path / "wave.las")
    scan = read_scan(tmp_path / "wave.las", records=True)
    write_cloud(tmp_path / "out.las", scan.points + 0.001, records=scan.records)
    out = laspy.read(tmp_path / "out.las")
    assert out.header.point_format.id == 4 and not out.header.global_encoding.waveform_data_packets_external
    assert [(v.user_id, v.record_id) for v in out.header.vlrs] == [("someone", 5)]
    assert np.asarray(out.wavepacket_index).tolist() == [0] * 50 and np.asarray(out.classification).tolist() == [6] * 50
    assert np.asarray(out.wavepacket_size).tolist() == [40] * 50  # the rest of the record as read
    assert read_scan(tmp_path / "wave.las").records is None  # only when asked
