"""`denoise --keep-points`: the input's own points kept, less those off the network's surface
(`inr.pointcloud.keep`): the noise level, the offsets, the edge gate, the groups, the command."""

import numpy as np
import pytest


def _plane(n, sigma, rng, side=1.0):
    return np.c_[rng.uniform(0, side, (n, 2)), rng.normal(scale=sigma, size=n)]


def _grid(m, side=1.0):
    g = (np.arange(m) + 0.5) / m * side
    return np.c_[np.repeat(g, m), np.tile(g, m), np.zeros(m * m)]


def test_noise_level_reads_a_gaussians_sigma_through_a_fifth_of_outliers():
    from inr.pointcloud.keep import noise_level

    rng = np.random.default_rng(0)
    off = np.abs(rng.normal(scale=0.02, size=40_000))
    assert abs(noise_level(off) / 0.02 - 1) < 0.02
    # a fifth more far off: the 40th percentile of all is the inliers' median, read as
    # 0.6745 / 0.5244 = 1.286 sigma
    with_outliers = np.r_[off, rng.uniform(0.1, 1.0, 10_000)]
    assert abs(noise_level(with_outliers) / 0.02 - 1.286) < 0.03
    assert noise_level(np.zeros(10), floor=1e-6) == 1e-6 and noise_level(np.zeros(0), floor=0.5) == 0.5


def test_points_off_a_flat_surface_by_more_than_the_threshold_go():
    # a clean grid as the surface, the points on it with sigma = 0.01 across, and points set at
    # known heights: up to 3 sigma kept, from 4.5 sigma gone (the level reads sigma within ~5 %)
    from inr.pointcloud.keep import KEEP_SIGMAS, offsets, on_surface

    rng = np.random.default_rng(1)
    surface = _grid(60)
    pts = _plane(3000, 0.01, rng)
    probes = np.c_[rng.uniform(0.2, 0.8, (8, 2)), [0.02, -0.03, 0.045, -0.05, 0.08, -0.1, 0.3, 0.5]]
    x = np.r_[pts, probes]
    off, overhang, _ = offsets(x, surface)
    assert np.allclose(off, np.abs(x[:, 2]), atol=1e-9) and overhang[:3000].max() < 1.0  # flat: the height
    keep = on_surface(x, surface)
    assert keep[-8:].tolist() == [True, True, False, False, False, False, False, False]
    inliers = np.abs(pts[:, 2]) <= KEEP_SIGMAS * 0.0095
    assert keep[:3000][inliers].mean() == 1.0 and keep[:3000].mean() > 0.997


def test_points_beyond_the_surfaces_edge_go_though_they_lie_in_its_plane():
    from inr.pointcloud.keep import on_surface

    surface = _grid(40)  # spacing 0.025 over [0, 1]^2
    rng = np.random.default_rng(2)
    inside = _plane(1000, 0.005, rng)
    beyond = np.array([[1.2, 0.5, 0.0], [0.5, -0.2, 0.001], [1.03, 0.5, 0.0]])  # 8 / 8 / 1.2 spacings out
    keep = on_surface(np.r_[inside, beyond], surface)
    assert keep[-3:].tolist() == [False, False, True] and keep[:1000].mean() > 0.997


def test_a_point_does_not_vouch_for_itself_where_the_surface_holds_it():
    # the points themselves as the surface (a band kept as scanned): an outlier among them still goes
    from inr.pointcloud.keep import on_surface
    from inr.pointcloud.mls import _project_once

    rng = np.random.default_rng(3)
    x = np.r_[_plane(2000, 0.002, rng), [[0.5, 0.5, 0.05], [0.3, 0.6, -0.04]]]
    keep = on_surface(x, x)
    assert not keep[-2:].any() and keep[:2000].mean() > 0.995
    # `others`: the same as projecting each point onto the surface without it (a slow twin)
    some = [0, 7, 2000, 2001]
    fast = _project_once(x[some], 16, x, others=True)
    for row, i in zip(fast, some):
        alone = _project_once(x[i:i + 1], 16, np.delete(x, i, axis=0))
        assert np.allclose(row, alone[0], atol=1e-12)


def test_far_apart_points_are_judged_against_a_share_of_their_spacing():
    # a grid 0.1 apart with 0.1 mm of noise: the level is SPACING_FLOOR x 0.1 = 0.015, not the
    # noise, so a point 0.04 off stays and one 0.06 off goes (3.5 levels: 0.0525)
    from inr.pointcloud.keep import SPACING_FLOOR, on_surface

    rng = np.random.default_rng(8)
    grid = _grid(30, side=3.0)
    x = np.r_[grid + np.c_[np.zeros((900, 2)), rng.normal(scale=1e-4, size=900)], [[1.55, 1.55, 0.04], [1.45, 1.45, 0.06]]]
    assert SPACING_FLOOR == 0.15
    keep = on_surface(x, grid)
    assert keep[:900].all() and keep[-2:].tolist() == [True, False]


def test_scattered_points_go_though_the_surface_runs_through_them():
    # sparse outliers in a volume above a plane, and (as a band of their own makes it) a surface
    # through them: judged against it they would pass; found scattered, they go, the plane stays
    from inr.pointcloud.keep import on_surface

    rng = np.random.default_rng(11)
    plane = _plane(3000, 0.002, rng)
    cloud = np.c_[rng.uniform(0.3, 0.7, (80, 2)), rng.uniform(0.2, 0.6, 80)]
    x = np.r_[plane, cloud]
    surface = np.r_[_grid(50), np.repeat(cloud, 4, axis=0) + rng.normal(scale=0.02, size=(320, 3))]
    groups = np.r_[np.zeros(2500, int), np.ones(320, int)]  # the outliers' surface a band of its own
    found = on_surface(x, surface, groups)
    blind = on_surface(x, surface, groups, stray=np.zeros(len(x), bool))
    assert found[3000:].mean() < 0.2 and blind[3000:].mean() > 0.8 and found[:3000].mean() > 0.995


def test_points_not_of_a_surface_go_only_where_isolated():
    # a plane and a canopy over it (points even in a slab, sparser than the plane's): judged by the
    # surface the canopy goes; as not a surface it stays, but for a few points far above it, alone
    # (7-12 times the canopy's median spacing from their 8th nearest; the spread of their neighbours,
    # a flat slab below, would not call them scattered)
    from inr.pointcloud.keep import on_surface

    rng = np.random.default_rng(12)
    plane = _plane(3000, 0.002, rng)
    canopy = np.c_[rng.uniform(0.2, 0.8, (600, 2)), rng.uniform(0.1, 0.2, 600)]
    birds = np.c_[rng.uniform(0.2, 0.8, (6, 2)), rng.uniform(0.5, 1.0, 6)]
    x = np.r_[plane, canopy, birds]
    loose = np.r_[np.zeros(3000, bool), np.ones(606, bool)]
    surface = _grid(50)
    judged = on_surface(x, surface)
    kept = on_surface(x, surface, not_surface=loose)
    assert judged[3000:3600].mean() < 0.05 and kept[3000:3600].mean() > 0.98
    assert not kept[3600:].any() and (kept[:3000] == judged[:3000]).all()


def test_each_group_reads_its_own_noise():
    # two patches, sigma 0.002 and 0.02: a point 0.012 off the quiet one is 6 of its sigma (gone
    # with the groups) but within the level both read together
    from inr.pointcloud.keep import on_surface

    rng = np.random.default_rng(4)
    quiet, loud = _plane(2000, 0.002, rng), _plane(2000, 0.02, rng) + [2.0, 0, 0]
    surface = np.r_[_grid(50), _grid(50) + [2.0, 0, 0]]
    probe = np.array([[0.5, 0.5, 0.012]])
    x = np.r_[quiet, loud, probe]
    groups = np.r_[np.zeros(2500, int), np.ones(2500, int)]  # the surface's: each grid its own
    assert on_surface(x, surface)[-1] and not on_surface(x, surface, groups)[-1]
    assert on_surface(x, surface, groups)[:4000].mean() > 0.995


def test_denoise_keep_points_writes_the_inputs_own_rows(tmp_path, capsys):
    # a noisy sphere with 5 % of its points uniform in the box, with colours: the output is a
    # subset of the input's rows, exactly, colours and all; it keeps nearly every point on the
    # sphere and drops most of those far off it, more than Open3D's statistical removal does
    from inr.cli import main
    from inr.data.pointclouds import read_cloud, write_cloud

    rng = np.random.default_rng(5)
    d = rng.normal(size=(3000, 3))
    x = d / np.linalg.norm(d, axis=1, keepdims=True) + rng.normal(scale=0.01, size=(3000, 3))
    x[:150] = rng.uniform(-1, 1, (150, 3))
    colours = rng.uniform(size=(3000, 3))
    write_cloud(tmp_path / "in.ply", x, colours)
    far = np.abs(np.linalg.norm(x, axis=1) - 1) > 0.05
    far[150:] = False
    kept = {}
    for label, extra in (("keep", ["--keep-points"]), ("open3d", ["--baseline", "open3d"]),
                         ("strict", ["--keep-points", "--keep-sigmas", "2"])):
        assert main(["pointcloud", "denoise", str(tmp_path / "in.ply"), str(tmp_path / f"{label}.ply"), "--no-progress",
                     "--no-normals", *extra]) == 0
        out, out_colours = read_cloud(tmp_path / f"{label}.ply")[:2]
        from scipy.spatial import cKDTree

        dist, rows = cKDTree(x).query(out)
        assert dist.max() < 1e-6 and len(np.unique(rows)) == len(out)  # the input's own points, each once
        assert np.allclose(out_colours, colours[rows], atol=1 / 255)
        mask = np.zeros(3000, bool)
        mask[rows] = True
        kept[label] = (mask[150:].mean(), 1 - mask[far].mean())
    assert "the input's own points kept, less" in capsys.readouterr().out
    assert kept["keep"][0] > 0.995 and kept["keep"][1] > 0.95 and kept["keep"][1] > kept["open3d"][1], kept
    assert kept["strict"][0] < kept["keep"][0] and kept["strict"][1] >= kept["keep"][1]  # 2 levels: fewer kept


@pytest.mark.parametrize("args", [["--keep-points", "--baseline", "mls"], ["--keep-points", "--density", "scan"],
                                  ["--keep-sigmas", "5"]])
def test_keep_points_with_what_it_cannot_go_with_is_one_line_exit_2(tmp_path, capsys, args):
    from inr.cli import main
    from inr.data.pointclouds import write_cloud

    write_cloud(tmp_path / "in.ply", np.random.default_rng(6).normal(size=(500, 3)))
    assert main(["pointcloud", "denoise", str(tmp_path / "in.ply"), str(tmp_path / "out.ply"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--keep-points" in err and not (tmp_path / "out.ply").exists()


def test_class_losses_names_the_classes_that_lost_most_first():
    from inr.data.las import class_losses

    before = np.r_[np.full(600, 2), np.full(300, 5), np.full(95, 6), np.full(5, 7)]  # 7: under 1 %
    kept = np.r_[np.full(594, 2), np.full(200, 5), np.full(85, 6)]  # lost 1 %, 33 %, 11 %, 100 %
    assert class_losses(before, kept) == "high vegetation (class 5) 33%, building (class 6) 11%"
    assert class_losses(before, before) is None and class_losses(np.zeros(0, int), np.zeros(0, int)) is None
    assert class_losses(np.r_[np.full(50, 40), np.full(50, 2)], np.full(50, 2)) == "class 40 100%"


def _las(path, x, classes):
    laspy = pytest.importorskip("laspy")
    header = laspy.LasHeader(point_format=1, version="1.2")
    header.offsets, header.scales = [500000.0, 4000000.0, 100.0], [0.001] * 3
    las = laspy.LasData(header)
    las.x, las.y, las.z = x[:, 0] + 500000.0, x[:, 1] + 4000000.0, x[:, 2] + 100.0
    las.classification = np.asarray(classes, np.uint8)
    las.gps_time = np.arange(len(x), dtype=np.float64)
    las.write(path)
    return las


def test_keep_points_keeps_a_las_files_records_and_says_which_class_went(tmp_path, capsys):
    # ground (class 2) a noisy plane; unclassified points (class 1) scattered over a metre above it:
    # those are off the surface and go, which the summary names; every kept record is the input's,
    # GPS time and all
    laspy = pytest.importorskip("laspy")
    from inr.cli import main

    rng = np.random.default_rng(7)
    ground = _plane(3000, 0.01, rng, side=10.0)
    canopy = np.c_[rng.uniform(0, 10, (600, 2)), rng.uniform(0.5, 1.5, 600)]
    x = np.r_[ground, canopy]
    las = _las(tmp_path / "in.las", x, np.r_[np.full(3000, 2), np.full(600, 1)])
    assert main(["pointcloud", "denoise", str(tmp_path / "in.las"), str(tmp_path / "out.las"), "--no-progress",
                 "--keep-points"]) == 0
    said = capsys.readouterr().out
    assert "LAS records kept" in said and "left out by class: unclassified (class 1) " in said
    out, back = laspy.read(tmp_path / "out.las"), laspy.read(tmp_path / "in.las")
    rows = np.asarray(out.gps_time).astype(int)
    # the input's own grid: the stored integers are the input's
    assert np.allclose(out.header.scales, 0.001) and np.allclose(out.header.offsets, [500000.0, 4000000.0, 100.0])
    assert (np.c_[out.X, out.Y, out.Z] == np.c_[back.X, back.Y, back.Z][rows]).all()
    assert (np.asarray(out.classification) == np.asarray(las.classification)[rows]).all()
    assert (rows < 3000).mean() > 0.97 and np.isin(np.arange(3000), rows).mean() > 0.99


def _classed_site(rng):
    """(points, each one's part, its LAS class): ground (class 2), tree crowns over it (class 5:
    returns through a volume, off any surface), five returns of class 5 far above them, alone (a
    bird), low-noise returns lying on the ground (class 7), unclassified points scattered above."""
    ground = _plane(3000, 0.01, rng, side=10.0)
    centres = rng.uniform(2, 8, (5, 2))
    crowns = np.concatenate([np.c_[c + rng.normal(scale=0.5, size=(300, 2)), rng.uniform(1.5, 2.5, 300)] for c in centres])
    birds = np.c_[rng.uniform(2, 8, (5, 2)), np.full(5, 12.0)]
    noise = _plane(30, 0.01, rng, side=10.0)
    loose = np.c_[rng.uniform(0, 10, (60, 2)), rng.uniform(4, 8, 60)]
    parts = np.r_[np.zeros(3000), np.ones(1500), np.full(5, 2), np.full(30, 3), np.full(60, 4)].astype(int)
    return np.r_[ground, crowns, birds, noise, loose], parts, np.array([2, 5, 5, 7, 1])[parts]


def _own_rows(x, out, offset):
    """Which of the points x the output (read back, less the LAS offset) holds as they came."""
    from scipy.spatial import cKDTree

    dist, rows = cKDTree(x).query(out - offset)
    mask = np.zeros(len(x), bool)
    mask[rows[dist < 1e-3]] = True  # within the LAS grid's millimetre
    return mask, dist


def test_keep_points_keeps_a_las_files_vegetation_and_leaves_out_its_noise_classes(tmp_path, capsys):
    # the crowns stay, whatever the output's format, the lone class-5 returns go, and so do the
    # noise class and the scattered points; from the same points without classes (PLY) the crowns
    # go as off the surface
    pytest.importorskip("laspy")
    import re

    from inr.cli import main
    from inr.data.pointclouds import read_cloud, write_cloud

    x, parts, classes = _classed_site(np.random.default_rng(9))
    _las(tmp_path / "in.las", x, classes)
    write_cloud(tmp_path / "in.ply", x)
    kept = {}
    for src, dst in (("in.las", "out.las"), ("in.las", "out.ply"), ("in.ply", "plain.ply")):
        assert main(["pointcloud", "denoise", str(tmp_path / src), str(tmp_path / dst), "--no-progress",
                     "--no-normals", "--keep-points"]) == 0
        offset = np.array([500000.0, 4000000.0, 100.0]) if src == "in.las" else 0.0
        mask, dist = _own_rows(x, read_cloud(tmp_path / dst)[0], offset)
        assert dist.max() < 1e-3  # the input's own points, every one
        kept[dst] = [mask[parts == p].mean() for p in range(5)]
    said = capsys.readouterr().out
    isolated = re.findall(r"of its 1,505 classed as vegetation or wires \(not surfaces\) the (\d+) isolated among them", said)
    assert len(isolated) == 2 and all(5 <= int(n) <= 15 for n in isolated), said  # the birds, a crown's fringe
    assert said.count("30 points classed as noise left out first") == 2 and "from 4,595" in said
    for dst in ("out.las", "out.ply"):
        ground_kept, crowns_kept, birds_kept, noise_kept, loose_kept = kept[dst]
        assert ground_kept > 0.99 and crowns_kept > 0.99 and birds_kept == 0 and noise_kept == 0 and loose_kept < 0.1, kept
    assert kept["plain.ply"][1] < 0.5 and kept["plain.ply"][3] > 0.9, kept  # no classes: judged by the surface alone


def test_denoise_of_a_las_file_passes_its_vegetation_through_as_measured(tmp_path, capsys):
    # the network denoises the surfaces (ground, the unclassified points) and the crowns are written
    # as measured with their own records, less the lone returns; noise goes first. The network's
    # points take records of the surface classes only. From the same points without classes the
    # network resamples the crowns too
    laspy = pytest.importorskip("laspy")
    from inr.cli import main
    from inr.data.pointclouds import read_cloud, write_cloud

    x, parts, classes = _classed_site(np.random.default_rng(9))
    _las(tmp_path / "in.las", x, classes)
    write_cloud(tmp_path / "in.ply", x)
    assert main(["pointcloud", "denoise", str(tmp_path / "in.las"), str(tmp_path / "out.las"), "--no-progress",
                 "--no-normals"]) == 0
    said = capsys.readouterr().out
    out = laspy.read(tmp_path / "out.las")
    pts, cls = np.c_[out.x, out.y, out.z] - [500000.0, 4000000.0, 100.0], np.asarray(out.classification)
    own, _ = _own_rows(x, pts, 0.0)
    assert own[parts == 1].mean() > 0.98 and not own[parts == 2].any() and not own[parts == 3].any()
    assert "1,505 points classed as vegetation or wires (not surfaces) written as measured, less the" in said
    assert "30 points classed as noise left out first" in said
    crowns = len(pts) - 3060  # the network's points: as many as the surface classes' points (ground, class 1)
    assert (cls[-crowns:] == 5).all() and np.isin(cls[:-crowns], [1, 2]).all()
    assert (np.abs(pts[:-crowns, 2]) < 0.05).mean() > 0.95  # on the ground
    assert main(["pointcloud", "denoise", str(tmp_path / "in.ply"), str(tmp_path / "plain.ply"), "--no-progress",
                 "--no-normals"]) == 0
    plain, _ = _own_rows(x, read_cloud(tmp_path / "plain.ply")[0], 0.0)
    assert plain[parts == 1].mean() < 0.05


def test_mesh_of_a_las_file_leaves_its_vegetation_and_noise_out(tmp_path, capsys):
    # the mesh of the classed site is the ground's: no crown blobs over it; the summary counts what
    # the classes left out (1,505 vegetation returns, 30 noise ones)
    pytest.importorskip("laspy")
    pytest.importorskip("open3d")
    import trimesh

    from inr.cli import main

    x, parts, classes = _classed_site(np.random.default_rng(9))
    keep = parts != 4  # the scattered unclassified points aside: Poisson would close a surface through them
    _las(tmp_path / "in.las", x[keep], classes[keep])
    assert main(["pointcloud", "mesh", str(tmp_path / "in.las"), str(tmp_path / "mesh.ply"), "--method", "poisson",
                 "--denoise", "none", "--no-progress"]) == 0
    assert "1,535 points classed as noise, vegetation or wires" in capsys.readouterr().out
    z = trimesh.load(tmp_path / "mesh.ply", process=False).vertices[:, 2] - 100.0
    assert np.abs(z).max() < 0.5  # the crowns stand 1.5-2.5 over the ground


def test_on_grid_tells_a_files_own_points_from_moved_ones():
    from inr.data.las import _on_grid

    s, o = [0.001] * 3, [500000.0, 0.0, 0.0]
    assert _on_grid(np.array([[500001.234, 2.0, -3.001]]), s, o)
    assert not _on_grid(np.array([[500001.2345, 2.0, -3.001]]), s, o)  # half a step off
    assert not _on_grid(np.array([[500000.0 + 3e6, 0.0, 0.0]]), s, o)  # 3e9 steps: past a 32-bit integer
    assert not _on_grid(np.zeros((0, 3)), s, o) and not _on_grid(np.zeros((1, 3)), None, o)


def test_keep_points_keeps_the_inputs_own_normals(tmp_path, capsys):
    # a scanner's normals on every point: the kept points carry them as they came (not estimated)
    from inr.cli import main
    from inr.data.pointclouds import read_oriented_cloud, write_cloud

    rng = np.random.default_rng(10)
    d = rng.normal(size=(2000, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    n = d + rng.normal(scale=0.2, size=d.shape)  # rough, as a scanner's: an estimate would differ
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    x = d + rng.normal(scale=0.01, size=d.shape)
    write_cloud(tmp_path / "in.ply", x, normals=n)
    assert main(["pointcloud", "denoise", str(tmp_path / "in.ply"), str(tmp_path / "out.ply"), "--no-progress",
                 "--keep-points"]) == 0
    assert "sides from the input's, kept as they came" in capsys.readouterr().out
    pts, _, normals = read_oriented_cloud(tmp_path / "out.ply")
    from scipy.spatial import cKDTree

    rows = cKDTree(x).query(pts)[1]
    assert len(pts) > 1980 and np.allclose(normals, n[rows], atol=1e-6)
