"""Mixed pixels of a laser scan (`inr.pointcloud.mixed`): the returns a beam blends from two
surfaces at a depth edge are found, and the surfaces' own points, ground seen at a grazing angle
included, are not; `denoise` and `mesh` leave them out of scans whose stations are known."""

import numpy as np
import pytest

from inr.cli import main

from .helpers import ptx_scan

SITE = np.array([512345.0, 4123456.0, 321.0])  # a surveyor's coordinates: float64 matters
STEP = np.radians(0.3)
PLATE_X, PLATE_Y, PLATE_Z, WALL_X, HEIGHT = 8.0, 1.2, 1.0, 40.0, 1.7


def _ranges(d):
    """(the range along unit directions d (..., 3) from a station 1.7 m over flat ground to the
    nearest of: a wall 40 m away (0), ground at z = -1.7 (1), a plate 2.4 x 2 m facing it 8 m away
    (2); which of them)."""
    t, which = np.full(d.shape[:-1], np.inf), np.full(d.shape[:-1], -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        wall = WALL_X / d[..., 0]
        ground = -HEIGHT / d[..., 2]
        plate = PLATE_X / d[..., 0]
        on = (np.abs(plate * d[..., 1]) <= PLATE_Y) & (np.abs(plate * d[..., 2]) <= PLATE_Z)
        for i, (hit, at) in enumerate(((wall > 0, wall), ((ground > 0) & (ground < t), ground), (on & (plate > 0), plate))):
            nearer = hit & (at < t)
            t, which = np.where(nearer, at, t), np.where(nearer, i, which)
    return t, which


def _distance(p):
    """Each point's distance (N,) to the nearest surface of `_ranges`'s scene (p from the station)."""
    wall = np.abs(p[:, 0] - WALL_X)
    ground = np.abs(p[:, 2] + HEIGHT)
    off = np.stack([p[:, 0] - PLATE_X, np.maximum(np.abs(p[:, 1]) - PLATE_Y, 0), np.maximum(np.abs(p[:, 2]) - PLATE_Z, 0)], 1)
    return np.minimum(np.minimum(wall, ground), np.linalg.norm(off, axis=1))


def _dirs(az, el):
    return np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], -1)


def scan(seed=0, sigma=0.003, jitter=0.1, rows=1, cells=False):
    """(points seen from the origin, whether each is a blend of two surfaces[, each point's scan,
    row and column]): a grid 0.3 degrees apart (`rows` times as dense in elevation; each ray
    jittered by up to `jitter` of a step), range noise sigma; each beam reads 7 rays over a
    footprint of 0.8 of the finer step and blends their ranges by 1 / range^2 (a phase scanner's mixed pixels
    where it straddles an edge). The points are listed a column (an azimuth) at a time."""
    rng = np.random.default_rng(seed)
    az, el = np.meshgrid(np.arange(-0.5, 0.5, STEP), np.arange(-0.45, 0.2, STEP / rows), indexing="ij")
    az = az + rng.uniform(-jitter, jitter, az.shape) * STEP
    el = el + rng.uniform(-jitter, jitter, el.shape) * STEP
    turn = np.arange(6) * np.pi / 3
    offsets = np.concatenate([[[0.0, 0.0]], 0.7 * 0.4 * STEP / rows * np.stack([np.cos(turn), np.sin(turn)], 1)])
    t, which = (np.stack(a, -1) for a in zip(*(_ranges(_dirs(az + da, el + de)) for da, de in offsets)))
    w = 1 / t**2
    blend = (w * t).sum(-1) / w.sum(-1)
    mixed = which.min(-1) != which.max(-1)
    r = blend + rng.normal(scale=sigma, size=blend.shape)
    out = (r[..., None] * _dirs(az, el)).reshape(-1, 3), mixed.reshape(-1)
    if not cells:
        return out
    column, row = np.meshgrid(np.arange(az.shape[0]), np.arange(az.shape[1]), indexing="ij")
    return out + (np.stack([np.zeros(row.size, int), row.ravel(), column.ravel()], 1),)


def test_blended_returns_are_found_and_surface_points_kept():
    from inr.pointcloud.mixed import mixed_pixels

    points, blended = scan()
    off = _distance(points) > 0.05  # the blends that landed off every surface (the rest lie within 5 cm of one)
    assert off.sum() > 100 and (off <= blended).all()
    found = mixed_pixels(points + SITE, SITE)
    assert found[off].mean() > 0.97
    ground = (np.abs(points[:, 2] + HEIGHT) < 0.02) & ~blended
    far_ground = ground & (np.linalg.norm(points, axis=1) > 20)  # rows metres apart, seen at 2-5 degrees
    # (those taken lie at the scan's sides, the plate's shadow and the wall's foot: 0.4-1 % of seeds 0-3)
    assert far_ground.sum() > 500 and found[far_ground].mean() < 0.015
    assert found[~blended].mean() < 0.001  # the surfaces' own points
    # neither the order of the points nor another station's scan in the same file changes a point's verdict
    order = np.random.default_rng(1).permutation(len(points))
    assert np.array_equal(mixed_pixels(points[order] + SITE, SITE), found[order])
    other, _ = scan(seed=2)
    other = other @ np.array([[0.0, 1, 0], [-1, 0, 0], [0, 0, 1]]) + [30.0, 5, 0]  # a second station, turned
    both = np.concatenate([points, other]) + SITE
    stations = np.concatenate([np.tile(SITE, (len(points), 1)), np.tile(SITE + [30.0, 5, 0], (len(other), 1))])
    together = mixed_pixels(both, stations)
    assert np.array_equal(together[:len(points)], found)
    assert np.array_equal(together[len(points):], mixed_pixels(other + SITE + 0.0, SITE + [30.0, 5, 0]))


def test_a_scanners_grid_gives_the_neighbours():
    # on an even grid the stored rows and columns find what the directions find; on a grid three
    # times as dense in elevation as in azimuth (as many scanners store them) the 8 nearest
    # directions all lie along the column, no point is judged, and the grid still finds the blends
    from inr.pointcloud.mixed import mixed_pixels

    points, blended, cells = scan(seed=6, cells=True)
    found = mixed_pixels(points + SITE, SITE, cells)
    assert found.sum() > 100 and np.array_equal(found, mixed_pixels(points + SITE, SITE))
    points, blended, cells = scan(seed=6, rows=3, cells=True)
    off = _distance(points) > 0.05
    assert off.sum() > 100
    found = mixed_pixels(points + SITE, SITE, cells)
    assert found[off].mean() > 0.95 and found[~blended].mean() < 0.001
    assert mixed_pixels(points + SITE, SITE)[off].mean() < 0.1
    # numbers that are not the scanner's grid (a writer's running count) are not taken for one
    numbered = np.stack([np.zeros(len(points), int), np.arange(len(points)) % 100, np.arange(len(points)) // 100], 1)
    assert np.array_equal(mixed_pixels(points + SITE, SITE, numbered), mixed_pixels(points + SITE, SITE))


def test_scans_are_told_apart_by_station_and_number():
    # points listed scan by scan, a station seen twice (two scans from one place) apart by number
    from inr.pointcloud.mixed import _scans

    stations = np.array([[0, 0, 0.0]] * 3 + [[1, 0, 0.0]] * 2 + [[0, 0, 0.0]] * 2)
    assert [list(i) for i in _scans(stations, None)] == [[0, 1, 2, 5, 6], [3, 4]]
    assert [list(i) for i in _scans(stations, np.array([0, 0, 1, 2, 2, 0, 0]))] == [[0, 1, 5, 6], [2], [3, 4]]
    assert [list(i) for i in _scans(stations[:3], None)] == [[0, 1, 2]]


def test_the_line_scale_follows_the_range():
    # offsets of three points' middle one from their line, with noise 1 mm x range^2 (a depth
    # camera's) and a third of them 0 but for rounding (depth in quantized steps): the scale read at each
    # range is the noise there, within 10 % (nearer than the nearest quarter's median range, that
    # quarter's level: more than the noise there)
    from inr.pointcloud.mixed import _line_scale

    rng = np.random.default_rng(0)
    r = rng.uniform(1.0, 4.0, 200_000)
    offs = np.abs(rng.normal(size=r.shape)) * np.sqrt(6) * 0.001 * r**2  # median: 0.6745 sqrt(6) sigma
    level = rng.random(len(r)) < 1 / 3  # three points at one quantized depth: 0 but for float32 rounding
    offs[level] = rng.uniform(0, 2e-7, level.sum()) * r[level]
    at = np.array([2.0, 3.0, 3.9])
    scale = _line_scale(offs, r)
    assert np.allclose(scale(at), 0.001 * at**2, rtol=0.1) and 0.001 * 1.2**2 < scale(np.array([1.2]))[0] < 0.001 * 1.5**2


def test_chunks_give_the_same_verdicts(monkeypatch):
    # a scan is judged a chunk of points at a time: the chunks' size does not change a verdict (by
    # the grid or by directions), and a line scale read from a sample of the points barely does
    import inr.pointcloud.mixed as mixed

    points, _, cells = scan(seed=8, cells=True)
    whole = [mixed.mixed_pixels(points + SITE, SITE, c) for c in (cells, None)]
    monkeypatch.setattr(mixed, "CHUNK", 1000)
    assert all(np.array_equal(mixed.mixed_pixels(points + SITE, SITE, c), w) for c, w in zip((cells, None), whole))
    monkeypatch.setattr(mixed, "SCALE_SAMPLE", 5000)
    sampled = mixed.mixed_pixels(points + SITE, SITE, cells)
    assert whole[0].sum() > 100 and (sampled != whole[0]).sum() <= 0.05 * whole[0].sum()


def test_a_pole_one_coarse_column_wide_is_kept(monkeypatch):
    # a grid 3x coarser in azimuth: a pole 2 cm across, 5 m away in front of a wall, lies in one
    # column (a line along it, as a line of blends would); nearer than both sides, it is a part,
    # kept; the same scan judged as an even grid's would take it all
    import inr.pointcloud.mixed as mixed

    az, el = np.meshgrid(np.radians(np.arange(-15, 15.01, 0.6)), np.radians(np.arange(-10, 10.01, 0.2)), indexing="ij")
    d = _dirs(az, el)
    r = np.where(np.abs(az) < 1e-9, 5.0 / np.cos(el), 10.0 / (np.cos(el) * np.cos(az)))
    r = r + np.random.default_rng(0).normal(scale=0.002, size=r.shape)
    points = (r[..., None] * d).reshape(-1, 3) + SITE
    column, row = np.meshgrid(np.arange(az.shape[0]), np.arange(az.shape[1]), indexing="ij")
    cells = np.stack([np.zeros(row.size, int), row.ravel(), column.ravel()], 1)
    pole = (np.abs(az) < 1e-9).reshape(-1)
    inner = pole & (row.ravel() >= 2) & (row.ravel() < az.shape[1] - 2)  # judged: rows on both sides
    assert inner.sum() > 90 and not mixed.mixed_pixels(points, SITE, cells)[pole].any()
    monkeypatch.setattr(mixed, "THIN_ACROSS", np.inf)
    assert mixed.mixed_pixels(points, SITE, cells)[inner].all()


def test_a_ptx_grid_and_an_organized_pcd_give_each_points_cell(tmp_path, capsys):
    # the grid of a PTX scan (stored a column at a time) and of an organized PCD (a row at a time,
    # no return NaN) come with the points; `denoise` of the dense-row PTX leaves its blends out
    from inr.data.pointclouds import read_cloud, read_scan, write_cloud

    points, blended, cells = scan(seed=7, rows=3, cells=True)
    columns, rows = cells[:, 2].max() + 1, cells[:, 1].max() + 1
    _write_ptx(tmp_path / "scan.ptx", points + SITE, SITE, columns)
    read = read_scan(tmp_path / "scan.ptx")
    assert np.array_equal(read.cells, cells) and np.allclose(read.points, points + SITE, atol=1e-6)
    assert main(["pointcloud", "denoise", str(tmp_path / "scan.ptx"), str(tmp_path / "out.ply"), "--baseline", "mls"]) == 0
    left = int(capsys.readouterr().out.split(" mixed pixels")[0].rsplit("; ", 1)[1].replace(",", ""))
    off = _distance(points) > 0.05
    assert off.sum() * 0.95 < left < off.sum() + 0.001 * len(points)
    assert _distance(read_cloud(tmp_path / "out.ply")[0] - SITE).mean() < 0.001
    image = (points - points.mean(0)).reshape(columns, rows, 3).transpose(1, 0, 2).copy()  # rows of pixels
    image[5, 7] = np.nan
    header = ("# .PCD v0.7\nVERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
              f"WIDTH {columns}\nHEIGHT {rows}\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS {columns * rows}\nDATA ascii\n")
    (tmp_path / "depth.pcd").write_text(header + "\n".join(" ".join(f"{v:.9g}" for v in p) for p in image.reshape(-1, 3)) + "\n")
    depth = read_scan(tmp_path / "depth.pcd")
    want = [[0, r, c] for r in range(rows) for c in range(columns) if (r, c) != (5, 7)]
    assert depth.cells.tolist() == want and len(depth.points) == columns * rows - 1
    write_cloud(tmp_path / "flat.pcd", points)  # unorganized: no grid
    assert read_scan(tmp_path / "flat.pcd").cells is None


def test_the_viewer_shows_a_scans_mixed_pixels_on_demand(tmp_path):
    # `inr view scan.ptx`: a checkbox draws the points the pointcloud commands would leave out, red
    from unittest.mock import MagicMock

    from inr.data.pointclouds import write_cloud
    from inr.pointcloud.mixed import mixed_pixels
    from inr.viewer.clouds import CloudViewer

    points, _ = scan(seed=9)
    _write_ptx(tmp_path / "scan.ptx", points + SITE, SITE)
    server = MagicMock()
    viewer = CloudViewer(server, [tmp_path / "scan.ptx"])
    item = viewer.items[0]
    server.scene.add_point_cloud.reset_mock()
    item["mixed_box"].value = True
    viewer._mixed(item)
    shown = server.scene.add_point_cloud.call_args.args[1] - item["offset"]  # drawn about the scan's centre
    found = mixed_pixels(points + SITE, SITE)
    assert found.sum() > 100 and len(shown) == found.sum()
    assert np.allclose(shown, points[found] + SITE, atol=1e-3) and item["mixed"].visible
    item["mixed_box"].value = False
    viewer._mixed(item)
    assert not item["mixed"].visible and server.scene.add_point_cloud.call_count == 1
    write_cloud(tmp_path / "flat.ply", points)  # no station: no such checkbox
    assert "mixed_box" not in CloudViewer(MagicMock(), [tmp_path / "flat.ply"]).items[0]


def _write_ptx(path, points, station, columns=1):
    path.write_text(ptx_scan(points, station, np.eye(3), np.zeros(3), columns=columns))


def test_denoise_of_a_scan_leaves_its_mixed_pixels_out(tmp_path, capsys):
    # MLS of the scan as read (--keep-mixed-pixels) keeps the blends off the surfaces (7 mm from
    # them on average); without them its output is as good as that of the scan without every
    # blend that landed over 5 cm off (0.80 mm, a one-off check)
    from inr.data.pointclouds import read_cloud

    points, _ = scan(seed=3)
    _write_ptx(tmp_path / "scan.ptx", points + SITE, SITE)
    args = ["pointcloud", "denoise", str(tmp_path / "scan.ptx"), "--baseline", "mls", "--out"]
    assert main(args + [str(tmp_path / "kept.ply"), "--keep-mixed-pixels"]) == 0
    assert "mixed pixels" not in capsys.readouterr().out
    assert main(args + [str(tmp_path / "out.ply")]) == 0
    said = capsys.readouterr().out
    left = int(said.split(" mixed pixels")[0].rsplit("; ", 1)[1].replace(",", ""))
    kept, _ = read_cloud(tmp_path / "kept.ply")
    out, _ = read_cloud(tmp_path / "out.ply")
    assert f"from {len(points):,} " in said and len(kept) == len(points) and len(out) == len(points) - left
    assert 100 < left < 0.01 * len(points)
    assert _distance(out - SITE).mean() < 0.2 * _distance(kept - SITE).mean()
    assert _distance(out - SITE).mean() < 0.001


def test_mesh_of_a_scan_leaves_its_mixed_pixels_out(tmp_path, capsys):
    from inr.tasks.pointcloud_mesh import mesh_file

    pytest.importorskip("open3d")
    points, _ = scan(seed=4)
    _write_ptx(tmp_path / "scan.ptx", points + SITE, SITE)
    r = mesh_file(tmp_path / "scan.ptx", tmp_path / "mesh.ply", method="poisson", denoiser="none", progress=False)
    assert r["input_points"] == len(points) and 100 < r["mixed_left_out"] < 0.01 * len(points)
    kept = mesh_file(tmp_path / "scan.ptx", tmp_path / "kept.ply", method="poisson", denoiser="none", progress=False,
                     keep_mixed=True)
    assert kept["mixed_left_out"] == 0


def test_fit_sdf_reads_a_scan_without_its_mixed_pixels(tmp_path):
    # what fit-sdf fits (and scores its mesh against) is the scan less its blends
    from inr.data.surfaces import read_surface
    from inr.pointcloud.mixed import mixed_pixels

    points, _ = scan(seed=5)
    _write_ptx(tmp_path / "scan.ptx", points + SITE, SITE)
    s = read_surface(tmp_path / "scan.ptx", normals=False)
    found = mixed_pixels(points + SITE, SITE)
    assert s.mixed == found.sum() > 100 and len(s.points) == len(points) - s.mixed
    assert np.allclose(s.points, points[~found] + SITE, atol=1e-6)
