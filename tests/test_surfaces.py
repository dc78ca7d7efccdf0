"""Point clouds to surfaces: MLS projection, the thin/open/drilled training shapes, mesh mixing and
fine-tuning in pointcloud training, and `inr pointcloud mesh`."""

import json

import numpy as np
import pytest
import torch

from inr.cli import main
from inr.data.pointclouds import read_cloud, read_oriented_cloud, write_cloud

from .test_pointcloud import _sphere_points


def test_mls_leaves_a_plane_alone_and_pulls_noise_onto_a_sphere():
    from inr.pointcloud.mls import mls_project

    rng = np.random.default_rng(0)
    plane = np.c_[rng.uniform(-1, 1, (2000, 2)), np.zeros(2000)] @ np.linalg.qr(rng.normal(size=(3, 3)))[0]
    assert np.abs(mls_project(plane) - plane).max() < 1e-9
    noisy = _sphere_points(5000, noise=0.02)
    out = mls_project(noisy)
    assert out.shape == noisy.shape
    before, after = np.abs(np.linalg.norm(noisy, axis=1) - 1).mean(), np.abs(np.linalg.norm(out, axis=1) - 1).mean()
    assert after < 0.45 * before, (before, after)


def test_mls_fill_adds_points_on_the_surface_and_none_across_a_gap():
    from inr.pointcloud.knn import knn
    from inr.pointcloud.mls import mls_fill

    rng = np.random.default_rng(1)
    rotation = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    # two squares of a plane 0.5 apart, 0.05 between points: the gap is ten spacings wide
    grid = np.stack(np.meshgrid(np.arange(0, 1.0001, 0.05), np.arange(0, 1.0001, 0.05)), -1).reshape(-1, 2)
    flat = np.concatenate([np.c_[grid, np.zeros(len(grid))], np.c_[grid + [1.5, 0], np.zeros(len(grid))]])
    out = mls_fill(flat @ rotation, 4 * len(flat)) @ rotation.T
    assert out.shape == (4 * len(flat), 3)
    assert np.abs(out[:, 2]).max() < 1e-9  # on the plane
    assert not ((out[:, 0] > 1.01) & (out[:, 0] < 1.49)).any()  # nothing in the gap
    _, d2 = knn(torch.from_numpy(out), torch.from_numpy(out), 2)
    assert np.median(np.sqrt(d2[:, 1].numpy())) < 0.7 * 0.05  # denser
    # a sphere: the midpoints of chords go back onto it
    sphere = _sphere_points(1500)
    out = mls_fill(sphere, 6000)
    assert len(out) == 6000 and {tuple(p) for p in sphere} <= {tuple(p) for p in out}  # every point kept
    idx, _ = knn(torch.from_numpy(sphere), torch.from_numpy(sphere), 2)
    sag = 1 - np.linalg.norm((sphere + sphere[idx[:, 1].numpy()]) / 2, axis=1)  # plain midpoints fall inside
    added = out[np.abs(np.linalg.norm(out, axis=1) - 1) > 1e-12]
    assert len(added) > 3000
    assert np.abs(np.linalg.norm(added, axis=1) - 1).mean() < 0.05 * sag.mean(), sag.mean()
    assert mls_fill(sphere, 1000).shape == (1000, 3)  # enough already: a subset


def test_mls_fill_writes_no_point_twice_on_scan_lines():
    # points on straight lines (a laser scanner's lines over flat ground, exactly): a later round
    # offers a pair again whose midpoint an earlier round added, and the jet of points on a line
    # leaves it in place; before 2026-12-07 it was added again (540 of these 3,200 points were
    # repeats, which `read_cloud` then refused)
    from inr.pointcloud.mls import mls_fill

    lines = np.concatenate([np.c_[60 + 0.058 * np.arange(200), np.full(200, 28.0 + 0.3 * j), np.zeros(200)] for j in range(4)])
    out = mls_fill(lines, 4 * len(lines))
    assert len(out) == 4 * len(lines) and len(np.unique(out, axis=0)) == len(out)
    assert np.abs(out[:, 2]).max() < 1e-9 and np.isin(np.round(out[:, 1], 9), np.round(28.0 + 0.3 * np.arange(4), 9)).all()


def test_mls_fill_adds_no_midpoint_twice_and_even_subsample_takes_near_duplicates():
    # a flat patch filled 6x: the second round's pairs of midpoints share midpoints, (a + b) / 2 and
    # (c + d) / 2 with (a + c) / 2 and (b + d) / 2; before 2026-12-07 (session 59) they went in
    # twice, and where they left fewer distinct midpoints than asked the even choice among them
    # shrank its cells until Open3D raised "voxel_size is too small"; now each once, all distinct
    from inr.pointcloud.mls import mls_fill
    from inr.pointcloud.voxel import even_subsample

    rng = np.random.default_rng(4)
    patch = np.r_[np.c_[rng.uniform(0, 1, (200, 2)), np.zeros(200)], np.c_[rng.uniform(1, 2, 100), rng.uniform(0, 1, 100), np.zeros(100)]]
    for n in (1800, 2400):
        out = mls_fill(patch, n)
        assert len(out) == n and len(np.unique(out, axis=0)) == n and np.abs(out[:, 2]).max() == 0
    clumped = np.r_[rng.random((10, 3)), np.repeat(rng.random((1, 3)), 100, 0)]  # 11 distinct points
    out = even_subsample(clumped, 50)  # no cell size gives 50 cells: a random 50 of the points
    assert len(out) == 50 and len(np.unique(out, axis=0)) <= 11


def test_mls_projects_in_chunks_with_the_same_result(monkeypatch):
    # the jets go chunk by chunk (memory bounded on millions of points): every point's projection
    # is its own, so chunks of 7 points give the whole cloud's result bit for bit
    from inr.pointcloud import mls

    noisy = _sphere_points(500, noise=0.02)
    whole, filled = mls.mls_project(noisy), mls.mls_fill(noisy[:200], 700)
    monkeypatch.setattr(mls, "PROJECT_CHUNK", 7)
    assert np.array_equal(mls.mls_project(noisy), whole) and np.array_equal(mls.mls_fill(noisy[:200], 700), filled)
    assert np.abs(np.linalg.norm(whole, axis=1) - 1).mean() < 0.5 * np.abs(np.linalg.norm(noisy, axis=1) - 1).mean()


def test_mls_fill_projects_only_the_points_it_keeps(monkeypatch):
    # the midpoints are thinned to as many as are missing before their jets are fitted (a
    # 10M-point fill projected 4-5x what it kept), and those kept lie on the surface
    from inr.pointcloud import mls

    sphere = _sphere_points(1500)
    projected, real = [], mls._project_once
    monkeypatch.setattr(mls, "_project_once",
                        lambda x, k, ref=None, backend="auto", fresh=False: projected.append(len(x)) or real(x, k, ref, backend, fresh))
    out = mls.mls_fill(sphere, 6000)
    assert len(out) == 6000 and sum(projected) == 6000 - 1500, projected
    added = out[np.abs(np.linalg.norm(out, axis=1) - 1) > 1e-12]
    assert np.abs(np.linalg.norm(added, axis=1) - 1).max() < 1e-4


def test_denoise_mls_baseline_cli(tmp_path, capsys):
    np.save(tmp_path / "in.npy", _sphere_points(3000, noise=0.02))
    assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "out.ply"), "--baseline", "mls"]) == 0
    assert "MLS projection" in capsys.readouterr().out
    out, _ = read_cloud(tmp_path / "out.ply")
    assert len(out) == 3000 and np.abs(np.linalg.norm(out, axis=1) - 1).mean() < 0.01


def _torus(n, seed=0, big=1.0, small=0.35):
    """n points on a torus around z, and their true outward normals."""
    rng = np.random.default_rng(seed)
    u, v = rng.uniform(0, 2 * np.pi, (2, n))
    ring = np.stack([np.cos(u), np.sin(u), np.zeros(n)], -1)
    normal = np.cos(v)[:, None] * ring + np.sin(v)[:, None] * np.array([0.0, 0, 1])
    return big * ring + small * normal, normal


def test_estimated_normals_are_outward_on_a_torus_also_when_oriented_on_a_subset():
    # a torus's inner ring faces the centroid: only a consistent orientation (not "away from
    # the centroid" point by point) gets it right, on all points or through a 600-point subset
    from inr.data.surfaces import estimate_normals

    pts, truth = _torus(6000)
    for at_most in (10_000, 600):
        cos = (estimate_normals(pts, orient_at_most=at_most) * truth).sum(1)
        assert (cos > 0.95).mean() > 0.99, (at_most, (cos < 0).mean())


def test_a_dense_noisy_cloud_takes_the_wider_normals_and_a_clean_one_keeps_its_own():
    # 60,000 points with noise 0.02 (30 neighbours reach ~0.05: inside the noise); the wider scale
    # (a 7,500-point subset's own neighbourhoods, ~8x the count) sees the torus. Oriented on all
    # points, or through 3,000 (the subset is then the orientation's, 20x). Before, the points
    # kept their own PCA normals: 65 % within 18 degrees, 17 degrees off on average. On the clean
    # torus each point keeps its own, finer normal
    from inr.data.surfaces import estimate_normals, plain_normals

    pts, truth = _torus(60_000)
    noisy = pts + np.random.default_rng(1).normal(scale=0.02, size=pts.shape)
    for estimate in (estimate_normals, plain_normals):
        for at_most in (3000, 200_000):
            for cloud, share, degrees in ((noisy, 0.99, 8.0), (pts, 1.0, 1.0)):
                cos = (estimate(cloud, orient_at_most=at_most) * truth).sum(1)
                angle = np.degrees(np.arccos(np.clip(cos, -1, 1)))
                assert (cos > 0.95).mean() >= share and angle.mean() < degrees, (estimate.__name__, at_most, angle.mean())


def _body_and_leg(seed=0, density=600):
    """Points on a closed shape with a thin part: a unit sphere and a leg (a cylinder of radius
    0.15 along +x, capped at x = 2), each part's points inside the other left out; their true
    outward normals."""
    rng = np.random.default_rng(seed)
    ball = rng.normal(size=(int(4 * np.pi * density), 3))
    ball /= np.linalg.norm(ball, axis=1, keepdims=True)
    ball = ball[~((ball[:, 0] > 0) & (ball[:, 1] ** 2 + ball[:, 2] ** 2 < 0.15**2))]
    m = int(2 * np.pi * 0.15 * 1.2 * density)
    a, x = rng.uniform(0, 2 * np.pi, m), rng.uniform(0.8, 2.0, m)
    side = np.stack([np.zeros(m), np.cos(a), np.sin(a)], 1)
    tube = np.concatenate([x[:, None], 0.15 * side[:, 1:]], 1)
    keep = np.linalg.norm(tube, axis=1) > 1
    r, b = 0.15 * np.sqrt(rng.uniform(0, 1, 60)), rng.uniform(0, 2 * np.pi, 60)
    cap = np.stack([np.full(60, 2.0), r * np.cos(b), r * np.sin(b)], 1)
    pts = np.concatenate([ball, tube[keep], cap])
    normals = np.concatenate([ball, side[keep], np.tile([1.0, 0, 0], (60, 1))])
    return pts, normals


def test_winding_numbers_turn_back_a_leg_that_points_inwards_and_leave_open_or_right_clouds_alone(monkeypatch):
    # the leg's normals turned inwards (as the graph orientation turns a thin part whole): just
    # off the leg on its normals' side the winding number reads about -1, so the leg is turned
    # back, also when the probes run on a subset; and so is the body when it is the part turned
    # inwards. A rightly oriented closed cloud and an open hemisphere (with a patch turned) come
    # back as they were
    from inr.data import orientation

    pts, truth = _body_and_leg()
    leg = pts[:, 0] > 1.05
    for at_most, share in ((10_000, 0.995), (3000, 0.98)):  # all 8,120 points probed, or a subset
        monkeypatch.setattr(orientation, "WINDING_AT_MOST", at_most)
        for part in (leg, ~leg):
            cos = (orientation.turn_inverted_parts(pts, np.where(part[:, None], -truth, truth)) * truth).sum(1)
            assert (cos[part] > 0).mean() >= share and (cos[~part] > 0).mean() > 0.999, (at_most, (cos[part] < 0).mean())
        assert (orientation.turn_inverted_parts(pts, truth) == truth).all()
    cup, up = pts[pts[:, 2] > 0.1], truth[pts[:, 2] > 0.1]
    patch = np.where((cup[:, 2] > 0.9)[:, None], -up, up)
    assert (orientation.turn_inverted_parts(cup, patch) == patch).all()


def test_visibility_orients_a_thin_plate_that_the_neighbour_graph_flips_and_spares_an_open_sheet():
    # a closed plate 0.06 thick (neighbourhoods reach across it): the graph orientation passes one
    # side to both faces (about half the normals point in); visibility sees each face from its side
    import trimesh

    from inr.data.orientation import seam, view_directions
    from inr import _external
    from inr.data.surfaces import estimate_normals, graph_consistent, orient_outwards

    o3d = _external.open3d()
    plate = trimesh.creation.box((2.0, 1.0, 0.06))
    pts, faces = trimesh.sample.sample_surface(plate, 6000, seed=0)
    pts = np.asarray(pts) + np.random.default_rng(0).normal(scale=0.005, size=(6000, 3))
    truth = plate.face_normals[faces]
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(pts))
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(30))
    graph_only = orient_outwards(pts, graph_consistent(pts, np.asarray(cloud.normals)))
    assert (np.sum(graph_only * truth, 1) < 0).mean() > 0.3  # the failure this guards against
    assert (np.sum(estimate_normals(pts) * truth, 1) < 0).mean() < 0.03
    # an open wavy sheet, seen from both sides: one side throughout, as the graph gives it
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (2, 6000))
    sheet = np.c_[x, y, 0.3 * np.sin(3 * x) * np.cos(2 * y)]
    up = np.c_[-0.9 * np.cos(3 * x) * np.cos(2 * y), 0.6 * np.sin(3 * x) * np.sin(2 * y), np.ones(6000)]
    cos = np.sum(estimate_normals(sheet) * up, 1) / np.linalg.norm(up, axis=1)
    assert min((cos < 0).mean(), (cos > 0).mean()) < 0.005
    # the helpers' known answers: even directions on the unit sphere; a seam only where sides disagree
    d = view_directions(14)
    assert np.allclose(np.linalg.norm(d, axis=1), 1) and np.abs(d.mean(0)).max() < 0.05
    sphere = rng.normal(size=(3000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    assert seam(sphere, sphere) == 0.0
    assert seam(sphere, sphere * np.where(sphere[:, 2:] > 0, 1, -1)) > 0.0


def test_estimated_normals_of_a_flat_cloud_take_one_side():
    # open3d's graph orientation fails on a plane (qhull: cospherical Delaunay sites), and so
    # does hidden point removal: a flat scan still gets normals, all to one side of it
    from inr.data.surfaces import estimate_normals

    flat = np.c_[np.random.default_rng(0).uniform(size=(500, 2)), np.zeros(500)]
    z = estimate_normals(flat)[:, 2]
    assert np.allclose(np.abs(z), 1) and (np.all(z > 0) or np.all(z < 0))


def test_denoise_writes_oriented_normals_where_the_format_holds_them(tmp_path, capsys):
    from inr.data.pointclouds import read_oriented_cloud

    np.save(tmp_path / "in.npy", _torus(3000)[0] + np.random.default_rng(1).normal(scale=0.01, size=(3000, 3)))

    def outward(path):
        pts, _, normals = read_oriented_cloud(path)
        ring = pts * np.array([1.0, 1, 0])
        ring /= np.linalg.norm(ring, axis=1, keepdims=True)
        true = pts - ring
        return ((normals * true).sum(1) / np.linalg.norm(true, axis=1) > 0.9).mean()

    assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "out.ply"), "--baseline", "mls"]) == 0
    assert "with normals" in capsys.readouterr().out
    assert outward(tmp_path / "out.ply") > 0.98
    assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--baseline", "mls", "--normals"]) == 0
    assert np.load(tmp_path / "out.npy").shape == (3000, 9) and outward(tmp_path / "out.npy") > 0.98
    # off by default for NPY (its columns stay x y z), and off when asked
    assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "plain.npy"), "--baseline", "mls"]) == 0
    assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "plain.ply"), "--baseline", "mls", "--no-normals"]) == 0
    assert np.load(tmp_path / "plain.npy").shape == (3000, 3) and read_oriented_cloud(tmp_path / "plain.ply")[2] is None
    capsys.readouterr()
    assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "out.xyz"), "--baseline", "mls", "--normals"]) == 2
    err = capsys.readouterr().err
    assert "out.xyz" in err and "no place for normals" in err and err.count("\n") == 1
    assert not (tmp_path / "out.xyz").exists()


def test_normals_take_their_sides_from_a_clouds_known_normals_on_all_points_or_a_subset():
    # a torus's normals given turned inwards (a scan seen from inside): the estimate follows
    # them, on all points and through a 600-point subset; without them it turns outwards
    from inr.data.surfaces import estimate_normals, plain_normals

    pts, truth = _torus(6000)
    noisy = pts + np.random.default_rng(2).normal(scale=0.01, size=pts.shape)
    for estimate in (estimate_normals, plain_normals):
        for at_most in (10_000, 600):
            cos = (estimate(noisy, orient_at_most=at_most, sides_from=(pts[::3], -truth[::3])) * truth).sum(1)
            assert (cos < -0.9).mean() > 0.99, (estimate.__name__, at_most, (cos > 0).mean())
    assert ((estimate_normals(noisy) * truth).sum(1) > 0.9).mean() > 0.99
    # far from the origin too (the known points move with the cloud)
    far = np.array([512345.0, 4123456.0, 321.0])
    cos = (estimate_normals(noisy + far, sides_from=(pts + far, -truth)) * truth).sum(1)
    assert (cos < -0.9).mean() > 0.99


def test_normals_known_on_some_points_only_turn_the_whole_and_where_they_are_dense():
    # an open sheet, whose estimate may face either way, known on its left half only: all of it
    # takes the known side (the whole turned), either way round; a torus with inward normals
    # known on 2 % of its points, scattered: all inwards
    from inr.data.surfaces import estimate_normals

    rng = np.random.default_rng(3)
    sheet = np.c_[rng.uniform(-1, 1, (4000, 2)), 0.01 * rng.normal(size=4000)]
    for side in (1.0, -1.0):
        given = np.tile([0.0, 0.0, side], (4000, 1))
        given[sheet[:, 0] > 0] = np.nan
        assert (side * estimate_normals(sheet, sides_from=(sheet, given))[:, 2] > 0.95).mean() > 0.99
    ball, truth = _torus(6000)
    given = np.where((rng.random(6000) < 0.02)[:, None], -truth, np.nan)
    cos = (estimate_normals(ball, sides_from=(ball, given)) * truth).sum(1)
    assert (cos < -0.9).mean() > 0.99
    # dense where known: one of two tori far apart scanned from inside with normals, the other
    # (known nowhere) keeps the estimate's consistent side, which the whole turn sets
    far = ball + [5.0, 0.0, 0.0]
    both, normals = np.r_[ball, far], np.r_[-truth, np.full_like(truth, np.nan)]
    cos = (estimate_normals(both, sides_from=(both, normals)) * np.r_[truth, truth]).sum(1)
    assert (cos[:6000] < -0.9).mean() > 0.99 and (np.abs(cos[6000:]) > 0.9).mean() > 0.99
    assert max((cos[6000:] > 0).mean(), (cos[6000:] < 0).mean()) > 0.99


def test_denoise_and_mesh_take_the_sides_of_the_inputs_normals_and_pass_over_zero_ones(tmp_path, capsys):
    # a sphere scanned from its centre (normals facing inwards): the written normals, and the
    # side Poisson's faces face, follow the scanner's; zero normals (unknown, as some writers
    # leave them) are passed over: outwards, as for a cloud without normals
    import trimesh

    from inr.data.pointclouds import read_oriented_cloud, write_cloud

    rng = np.random.default_rng(0)
    sphere = rng.normal(size=(3000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    noisy = sphere + rng.normal(scale=0.01, size=sphere.shape)
    write_cloud(tmp_path / "inward.ply", noisy, normals=-sphere)
    write_cloud(tmp_path / "zero.ply", noisy, normals=np.zeros_like(sphere))
    partial = -sphere.copy()  # the scanner's normals known on a fifth of the points, zero elsewhere
    partial[rng.random(len(sphere)) > 0.2] = 0
    write_cloud(tmp_path / "partial.ply", noisy, normals=partial)
    for name, side in (("inward", -1), ("zero", 1), ("partial", -1)):
        assert main(["pointcloud", "denoise", str(tmp_path / f"{name}.ply"), str(tmp_path / f"d_{name}.ply"), "--baseline", "mls"]) == 0
        said = capsys.readouterr().out
        assert ("sides from the input's" in said) == (name != "zero")
        assert ("known on" in said) == (name == "partial")
        pts, _, normals = read_oriented_cloud(tmp_path / f"d_{name}.ply")
        assert (side * (normals * pts).sum(1) / np.linalg.norm(pts, axis=1) > 0.9).mean() > 0.99, name
        assert main(["pointcloud", "mesh", str(tmp_path / f"{name}.ply"), str(tmp_path / f"m_{name}.ply"), "--method", "poisson",
                     "--denoise", "mls"]) == 0
        said = capsys.readouterr().out
        assert ("normals estimated, their sides from the file's" in said) == (name != "zero")
        mesh = trimesh.load(tmp_path / f"m_{name}.ply", process=False)
        facing = (mesh.face_normals * mesh.triangles_center).sum(1)
        assert (side * facing > 0).mean() > 0.99, name


def test_new_shape_families_have_thin_parts_holes_and_open_cuts():
    from inr.pointcloud.shapes import creature, drilled, open_cut, sdf_mesh, sphere, winged

    mesh = sdf_mesh(sphere(0.5013), resolution=64)
    assert mesh.is_watertight and mesh.volume == pytest.approx(4 / 3 * np.pi * 0.5013**3, rel=0.01)
    rng = np.random.default_rng(1)
    for family in (creature, winged):
        m = sdf_mesh(family(rng), resolution=128)
        # a thin part: a share of the surface whose local thickness (along the inward normal) is small
        pts, faces = m.sample(4000, return_index=True)
        tip = pts - m.face_normals[faces] * 0.1
        from scipy.spatial import cKDTree

        d, _ = cKDTree(m.vertices).query(tip)
        assert m.is_watertight and (d < 0.08).mean() > 0.02
    holed = sdf_mesh(drilled(np.random.default_rng(3)), resolution=96)
    assert holed.is_watertight
    cut = open_cut(mesh, np.random.default_rng(0))
    boundary = len(np.unique(cut.edges_sorted, axis=0, return_counts=True)[1] == 1)
    assert not cut.is_watertight and boundary > 0 and 0.4 * mesh.area <= cut.area < mesh.area


def test_fragment_cut_leaves_pieces_a_gap_apart():
    # a box's surface cut by planes into pieces: every kept face lies at least half the drawn gap
    # from each plane, so faces of pieces on opposite sides of a plane are a gap apart (less a
    # face's size, as the test is on face centres)
    import trimesh
    from scipy.spatial import cKDTree

    from inr.pointcloud.shapes import fragment_cut

    mesh = trimesh.creation.box(extents=(1.0, 0.8, 0.6)).subdivide_to_size(0.02)
    diag = float(np.linalg.norm(mesh.extents))
    for seed in range(3):
        cut = fragment_cut(mesh, np.random.default_rng(seed), planes=(3, 3), gap=(0.05, 0.05), drop=0.2)
        assert 0.3 * mesh.area <= cut.area < 0.97 * mesh.area and not cut.is_watertight
        # pieces: vertices joined by edges (faces touching at a corner belong to one piece)
        pieces = [cut.vertices[c] for c in trimesh.graph.connected_components(cut.edges, nodes=np.arange(len(cut.vertices)))]
        pieces = [p for p in pieces if len(p) >= 3]
        assert len(pieces) >= 3
        # the nearest points of two different pieces: at least the gap less two faces' size
        nearest = min(cKDTree(a).query(b)[0].min() for i, a in enumerate(pieces) for b in pieces[i + 1:])
        assert nearest >= 0.05 * diag - 2 * 0.02 * np.sqrt(2)
    # nothing is cut when no draw keeps enough: the mesh itself
    assert fragment_cut(mesh, np.random.default_rng(0), drop=1.0) is mesh


def test_brackets_are_plates_of_their_drawn_thickness():
    # rays cast inward from the surface meet the far side of a plate 2h away: on a bracket most of
    # the surface is such plate (the rest: plate edges, ribs' corners, hole walls)
    import open3d as o3d

    from inr.pointcloud.shapes import bracket_parts, sdf_mesh

    rng = np.random.default_rng(2)
    for _ in range(3):
        f, h = bracket_parts(rng)
        m = sdf_mesh(f, resolution=128)
        assert m.is_watertight and (np.abs(m.bounds) < 1.2).all()
        pts, faces = m.sample(5000, return_index=True)
        normals = m.face_normals[faces]
        scene = o3d.t.geometry.RaycastingScene()
        scene.add_triangles(o3d.core.Tensor(m.vertices.astype(np.float32)), o3d.core.Tensor(m.faces.astype(np.uint32)))
        rays = np.concatenate([pts - normals * 1e-4, -normals], 1).astype(np.float32)
        depth = scene.cast_rays(o3d.core.Tensor(rays))["t_hit"].numpy()
        cell = 2.4 / 128
        assert np.mean(np.abs(depth - 2 * h) < cell / 2) > 0.75
        assert np.median(depth) == pytest.approx(2 * h, abs=cell / 4)


def test_a_gusset_is_the_triangle_between_wall_and_floor():
    # a wall at y = 0.5 (its inner face), the floor's top at z = 0, legs 0.2, 0.02 thick at x = 0.1
    from inr.pointcloud.shapes import gusset

    f = gusset(0, 1.0, 0.5, 0.0, 0.1, 0.2, 0.01)
    p = np.array([[0.1, 0.45, 0.05],  # inside, nearest the thin faces
                  [0.1, 0.38, 0.2],  # beyond the hypotenuse: y' + z = 0.32 > 0.2
                  [0.1, 0.45, -0.05],  # below the floor's top by more than h
                  [0.14, 0.45, 0.05]])  # beside the rib
    assert f(p) == pytest.approx([-0.01, 0.12 / np.sqrt(2), 0.04, 0.03])


def test_family_weights_keep_the_stream_and_can_draw_brackets():
    # a zero weight for brackets draws the shapes the four-family stream drew; all weight on
    # brackets draws the bracket the same generator state makes
    from inr.pointcloud.shapes import FAMILIES, FAMILY_WEIGHTS, bracket, random_shape
    from inr.presets import PointCloudTrainConfig

    probe = np.random.default_rng(9).uniform(-1, 1, (500, 3))
    for seed in range(6):
        old = random_shape(np.random.default_rng(seed), FAMILIES[:4], FAMILY_WEIGHTS[:4])
        assert np.array_equal(random_shape(np.random.default_rng(seed))(probe), old(probe))
        rng = np.random.default_rng(seed)
        only = random_shape(rng, weights=(0, 0, 0, 0, 1))
        twin = np.random.default_rng(seed)
        twin.choice(5, p=np.array([0, 0, 0, 0, 1.0]))
        assert np.array_equal(only(probe), bracket(twin)(probe))
    assert PointCloudTrainConfig.from_dict({"family_weights": [1, 0, 0, 0, 3]}).family_weights == (1.0, 0.0, 0.0, 0.0, 3.0)
    for bad in ([1, 1], [1, 0, 0, 0, -1], [0, 0, 0, 0, 0]):
        with pytest.raises(ValueError, match="family_weights"):
            PointCloudTrainConfig.from_dict({"family_weights": bad})


def test_training_mixes_given_meshes_with_synthetic_shapes_and_can_start_from_weights(tmp_path):
    import trimesh

    from inr.errors import InputError
    from inr.presets import PointCloudTrainConfig
    from inr.tasks.pointcloud import default_weights
    from inr.tasks.pointcloud_train import PointCloudModule, ShapeStream, load_weights

    box = trimesh.creation.box((1.0, 2.0, 3.0))  # 12 faces: no synthetic shape has so few
    cfg = PointCloudTrainConfig(mesh_share=0.5, open_share=0.0, shape_resolution=32)
    rng = np.random.default_rng(0)
    stream = ShapeStream(cfg, [box], seed=0)
    faces = [len(stream._new_mesh(rng).faces) for _ in range(16)]
    assert 3 <= sum(f == 12 for f in faces) <= 13 and any(f > 12 for f in faces)
    shipped = load_weights(default_weights())
    module = PointCloudModule(shipped.cfg.to_dict(), {"init_weights": str(default_weights())})
    for k, v in shipped.state_dict().items():
        assert torch.equal(module.model.state_dict()[k], v)
    with pytest.raises(InputError, match="other settings"):
        PointCloudModule({**shipped.cfg.to_dict(), "width": 8}, {"init_weights": str(default_weights())})


def test_range_scan_and_visibility_on_a_sphere_known_answers():
    # a camera at distance D from the centre of a unit sphere sees exactly the cap p . e > 1 / D
    # (e: the camera's direction), whose area is (1 - 1/D) / 2 of the sphere's
    import trimesh

    from inr.pointcloud.shapes import RangeScan, range_scan, scan_pair, visible

    ball = trimesh.creation.icosphere(subdivisions=5, radius=1.0)
    rng = np.random.default_rng(0)
    hits, cameras = range_scan(ball, 1, 0.0, 100_000, rng, pixels=120)
    D = float(np.linalg.norm(cameras[0]))
    e = cameras[0] / D
    assert D == pytest.approx(1.5 * np.sqrt(12), rel=1e-6)  # 1.5 diagonals of the 2x2x2 box
    assert 0.2 * 120**2 < len(hits) < 0.3 * 120**2  # the view spans the box's bounding sphere (radius sqrt 3): (1 / sqrt 3)^2 pi / 4 = 0.26 of it is the ball
    np.testing.assert_allclose(np.linalg.norm(hits, axis=1), 1.0, atol=2e-3)  # on the facets
    assert (hits @ e).min() > 1 / D - 0.01
    # noise along the rays: the radius moves by the noise times the cosine of the incidence
    sigma = 0.02
    noisy, _ = range_scan(ball, 1, sigma, 100_000, np.random.default_rng(0), pixels=120)
    radial = np.linalg.norm(noisy, axis=1) - 1.0
    assert 0.5 * sigma < radial.std() < sigma and abs(radial.mean()) < 0.1 * sigma
    # visibility: the cap, up to the facets near its rim; two opposite cameras see both caps
    pts = trimesh.sample.sample_surface(ball, 20000, seed=1)[0]
    cos = pts @ e
    seen = visible(ball, cameras, pts)
    rim = np.abs(cos - 1 / D) < 0.02  # the polyhedron's silhouette differs from the sphere's by up to ~0.015
    assert np.array_equal(seen[~rim], cos[~rim] > 1 / D)
    both = visible(ball, np.stack([cameras[0], -cameras[0]]), pts)
    rims = np.abs(np.abs(cos) - 1 / D) < 0.02
    assert np.array_equal(both[~rims], (np.abs(cos) > 1 / D)[~rims])
    # a training pair: the target is the surface the one camera sees (a share (1 - 1/D) / 2 of
    # 2 x 5000 samples), the input a scan of 2000 hits with the outlier share replaced
    noisy, clean = scan_pair(ball, 5000, 2000, np.random.default_rng(2), RangeScan(views=(1, 1), noise=(0.01, 0.01), outliers=(0.05, 0.05)))
    assert len(noisy) == 2000 and len(clean) == pytest.approx(2 * 5000 * (1 - 1 / D) / 2, rel=0.05)
    off = np.abs(np.linalg.norm(noisy, axis=1) - 1.0) > 0.1
    assert 0.03 < off.mean() <= 0.05
    direction = clean.mean(0) / np.linalg.norm(clean.mean(0))
    assert (clean @ direction).min() > 1 / D - 0.03  # (the cap's axis estimated from the samples)
    assert direction @ (noisy[~off].mean(0) / np.linalg.norm(noisy[~off].mean(0))) > 0.999


def test_training_stream_range_scans_a_share_of_its_steps(monkeypatch):
    import trimesh

    import inr.tasks.pointcloud_train as T
    from inr.presets import PointCloudTrainConfig

    ball = trimesh.creation.icosphere(subdivisions=4, radius=1.0)
    calls, scan_pair = [], T.scan_pair

    def spy(mesh, n_clean, n_scan, rng):
        calls.append(n_scan)
        pair = scan_pair(mesh, n_clean, n_scan, rng)
        return pair if len(calls) % 2 else None  # every other scan "saw too little"

    monkeypatch.setattr(T, "scan_pair", spy)
    got = {}
    for share in (0.0, 1.0):
        calls.clear()
        cfg = PointCloudTrainConfig(mesh_share=1.0, open_share=0.0, scan_share=share, dense_points=4000)
        got[share] = ([tuple(map(len, pair)) for _, pair in zip(range(6), T.ShapeStream(cfg, [ball], seed=0))], list(calls))
    assert got[0.0][1] == [] and all(c == 4000 for _, c in got[0.0][0])
    assert len(got[1.0][1]) == 6 and all(250 <= n <= 1000 for n in got[1.0][1])  # dense / 4-16 hits
    # the scans' inputs have the drawn count; the fallbacks are evenly spread points
    assert [n for n, _ in got[1.0][0][::2]] == got[1.0][1][::2]
    with pytest.raises(ValueError, match="scan_share"):
        PointCloudTrainConfig(scan_share=1.5).check()


def test_pointcloud_mesh_poisson_trim_keeps_an_open_scan_open(tmp_path, capsys):
    # Poisson closes an open hemisphere with an invented cap; trimming its low-density vertices
    # removes the cap (vertices far below the points) and keeps the scanned dome
    import trimesh

    dome = _sphere_points(12000, seed=2)
    dome = dome[dome[:, 2] > 0]
    write_cloud(tmp_path / "dome.ply", dome, normals=dome)
    made = {}
    for trim in ("0", "0.1"):
        assert main(["pointcloud", "mesh", str(tmp_path / "dome.ply"), str(tmp_path / f"m{trim}.ply"), "--method", "poisson",
                     "--denoise", "none", "--poisson-trim", trim, "--no-progress"]) == 0
        made[trim] = trimesh.load(tmp_path / f"m{trim}.ply")
    assert (made["0"].vertices[:, 2] < -0.2).sum() > 100
    kept = made["0.1"].vertices
    assert (kept[:, 2] < -0.05).sum() == 0 and kept[:, 2].max() > 0.95
    assert np.abs(np.linalg.norm(kept, axis=1) - 1).mean() < 0.2 * np.abs(np.linalg.norm(made["0"].vertices, axis=1) - 1).mean()
    capsys.readouterr()
    assert main(["pointcloud", "mesh", str(tmp_path / "dome.ply"), str(tmp_path / "x.ply"), "--method", "poisson",
                 "--poisson-trim", "1"]) == 2
    assert "--poisson-trim" in capsys.readouterr().err and not (tmp_path / "x.ply").exists()
    assert main(["pointcloud", "mesh", str(tmp_path / "dome.ply"), str(tmp_path / "x.ply"), "--method", "ball-pivoting",
                 "--poisson-trim", "0.1"]) == 2  # not silently ignored
    assert "needs --method poisson" in capsys.readouterr().err and not (tmp_path / "x.ply").exists()


def test_pointcloud_mesh_of_a_cloud_the_network_keeps_nothing_of_is_one_line_exit_2(tmp_path, capsys):
    # 12 scattered points: no surface for the network, which keeps none of them
    np.save(tmp_path / "few.npy", np.random.default_rng(0).normal(size=(12, 3)))
    assert main(["pointcloud", "mesh", str(tmp_path / "few.npy"), str(tmp_path / "m.ply"), "--method", "poisson",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "few.npy" in err and "0 points are left after denoising (network)" in err and "Traceback" not in err
    assert not (tmp_path / "m.ply").exists() and not (tmp_path / "m-oriented.ply").exists()
    assert not (tmp_path / "m.ply.partial").exists()  # its stages are not kept: the same input fails the same way


def test_pointcloud_mesh_resumes_its_network_denoising_after_a_kill(tmp_path, capsys, monkeypatch):
    import inr.pointcloud.classical as classical

    np.save(tmp_path / "in.npy", _sphere_points(4000, noise=0.01))
    args = ["pointcloud", "mesh", str(tmp_path / "in.npy"), "--method", "poisson", "--no-progress"]
    poisson, given = classical.poisson, []

    def seen(points, normals, *a):  # what Poisson meshes (its own output's vertex order is not repeatable)
        given.append((points.copy(), normals.copy()))
        return poisson(points, normals, *a)

    def killed(*a, **k):  # Ctrl-C while Poisson meshes the denoised, oriented points
        raise KeyboardInterrupt

    monkeypatch.setattr(classical, "poisson", seen)
    assert main(args[:3] + [str(tmp_path / "whole.ply")] + args[3:]) == 0
    capsys.readouterr()
    partial = tmp_path / "m.ply.partial"
    with monkeypatch.context() as m:
        m.setattr(classical, "poisson", killed)
        assert main(args[:3] + [str(tmp_path / "m.ply")] + args[3:]) == 130
    assert capsys.readouterr().err.strip() == f"inr: interrupted; the same command resumes from {partial}"
    assert sorted(f.name for f in partial.glob("*.npz")) == ["network.npz", "normals.npz"]
    assert main(args[:3] + [str(tmp_path / "m.ply")] + args[3:]) == 0
    out = capsys.readouterr().out
    assert "; resumed: 2 stages (network, normals) kept from a run that stopped" in out and not partial.exists()
    assert len(given) == 2 and all(np.array_equal(x, y) for x, y in zip(*given))  # the same points and normals
    assert (tmp_path / "m.ply").is_file()


def test_pointcloud_mesh_resumes_a_stopped_fit(tmp_path, capsys, monkeypatch):
    import lightning

    import inr.tasks.run as run

    np.save(tmp_path / "in.npy", _sphere_points(3000, noise=0.01))
    args = ["pointcloud", "mesh", str(tmp_path / "in.npy"), str(tmp_path / "m.ply"), "--steps", "60",
            "--resolution", "32", "--no-progress"]
    train = run.train

    class Stop(lightning.Callback):  # Ctrl-C at step 20 of the fit (Lightning stops, the run saves a checkpoint)
        def on_train_batch_end(self, trainer, *a):
            if trainer.global_step >= 20:
                raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(run, "train", lambda opts, resume=None: train(opts, resume, callbacks=[Stop()]))
        assert main(args) == 130
    partial, fit = tmp_path / "m.ply.partial", tmp_path / "m-run"
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"inr: stopped at step 20; the same command resumes from {partial}"
    assert sorted(f.stem for f in partial.glob("*.npz")) == ["network", "normals", "oriented"]
    assert (fit / "checkpoints" / "last.ckpt").is_file() and not (tmp_path / "m.ply").exists()
    assert main(args) == 0  # the same command: the fit goes on from step 20 to 60, the mesh is written
    assert "; resumed: 2 stages (network, normals) kept from a run that stopped" in capsys.readouterr().out
    assert json.loads((fit / "metrics.json").read_text())["steps"] == 60
    assert (tmp_path / "m.ply").is_file() and not partial.exists()
    assert main(args) == 2 and "already holds a run" in capsys.readouterr().err  # done: no run of it to resume
    # a stopped fit of another input is not resumed by this command: one line, nothing changed
    with monkeypatch.context() as m:
        m.setattr(run, "train", lambda opts, resume=None: train(opts, resume, callbacks=[Stop()]))
        assert main(args + ["--overwrite"]) == 130
    np.save(tmp_path / "in.npy", _sphere_points(3000, noise=0.01, seed=5))
    assert main(args) == 2 and "already holds a run of another input or settings" in capsys.readouterr().err
    assert partial.is_dir() and (fit / "checkpoints" / "last.ckpt").is_file()


def test_pointcloud_mesh_poisson_and_sdf(tmp_path, capsys):
    import trimesh
    from scipy.spatial import cKDTree

    noisy = _sphere_points(4000, noise=0.01)
    np.save(tmp_path / "in.npy", noisy)
    assert main(["pointcloud", "mesh", str(tmp_path / "in.npy"), str(tmp_path / "p.obj"), "--method", "poisson",
                 "--denoise", "mls", "--no-progress"]) == 0
    assert "poisson" in capsys.readouterr().out
    mesh = trimesh.load(tmp_path / "p.obj", process=False)
    assert np.abs(np.linalg.norm(mesh.vertices, axis=1) - 1).mean() < 0.02
    assert mesh.visual.kind is None  # no colours in, none out
    # colours in (a hemisphere each): every vertex takes its nearest point's, in OBJ and GLB too
    rgb = np.where(noisy[:, 2:] > 0, [[0.2, 0.8, 0.4]], [[0.9, 0.1, 0.0]])
    np.save(tmp_path / "c.npy", np.c_[noisy, rgb])
    for suffix in (".obj", ".glb"):
        assert main(["pointcloud", "mesh", str(tmp_path / "c.npy"), str(tmp_path / f"c{suffix}"), "--method", "poisson",
                     "--denoise", "mls", "--no-progress"]) == 0
        back = trimesh.load(tmp_path / f"c{suffix}", process=False, force="mesh")
        got = back.visual.vertex_colors[:, :3]
        near = cKDTree(noisy).query(back.vertices)[1]  # scipy's nearest, in float64
        assert (got == (rgb[near] * 255 + 0.5).astype(np.uint8)).all(1).mean() > 0.999, suffix
        z = back.vertices[:, 2]
        assert (got[z > 0.1] == [51, 204, 102]).all() and (got[z < -0.1] == [230, 26, 0]).all(), suffix
    clean = _sphere_points(3000, seed=1)
    write_cloud(tmp_path / "oriented.ply", clean, normals=clean)
    args = ["pointcloud", "mesh", str(tmp_path / "oriented.ply"), str(tmp_path / "s.ply"), "--denoise", "none",
            "--steps", "150", "--resolution", "48", "--no-progress"]
    assert main(args) == 0
    run = tmp_path / "s-run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["normals"] == "file" and metrics["steps"] == 150  # the file's normals, nothing moved the points
    sphere = trimesh.load(tmp_path / "s.ply")
    assert np.abs(np.linalg.norm(sphere.vertices, axis=1) - 1).mean() < 0.03
    capsys.readouterr()
    assert main(args) == 2 and "already holds a run" in capsys.readouterr().err
    assert main(["pointcloud", "mesh", str(tmp_path / "in.npy"), str(tmp_path / "x.stl")]) == 2
    assert "unsupported mesh format" in capsys.readouterr().err
    for bad in (["--trim", "-1"], ["--trim", "0", "--method", "poisson"]):
        assert main(["pointcloud", "mesh", str(tmp_path / "oriented.ply"), str(tmp_path / "t.ply"), *bad]) == 2
        assert "--trim" in capsys.readouterr().err and not (tmp_path / "t.ply").exists()


def test_pointcloud_mesh_trim_0_keeps_the_closed_level_set_of_an_open_scan(tmp_path):
    # a dome: trimmed at the preset's reach, the field's invented underside goes; at 0 it stays, closed
    import trimesh

    dome = _sphere_points(6000, seed=3)
    dome = dome[dome[:, 2] > 0]
    write_cloud(tmp_path / "dome.ply", dome, normals=dome)
    meshes = {}
    for trim in (None, "0"):
        out = tmp_path / f"m{trim}.ply"
        assert main(["pointcloud", "mesh", str(tmp_path / "dome.ply"), str(out), "--denoise", "none", "--steps", "150",
                     "--resolution", "48", "--no-progress"] + (["--trim", trim] if trim else [])) == 0
        meshes[trim] = trimesh.load(out)
        metrics = json.loads((tmp_path / f"m{trim}-run" / "metrics.json").read_text())
        assert (metrics["trimmed_faces"] == 0) == (trim == "0"), metrics["trimmed_faces"]
    assert meshes["0"].is_watertight and not meshes[None].is_watertight
    # the closed one's extra faces are the cap the field closes the dome's opening with, inside the sphere
    assert len(meshes[None].faces) < 0.85 * len(meshes["0"].faces)
    inside = {t: (np.linalg.norm(m.vertices, axis=1) < 0.9).sum() for t, m in meshes.items()}
    assert inside["0"] > 200 and inside[None] == 0, inside


def test_read_surface_without_normals_reads_the_same_points_and_estimates_none(tmp_path):
    from inr.data.surfaces import read_surface

    np.save(tmp_path / "c.npy", _sphere_points(500, noise=0.01))
    full, bare = read_surface(tmp_path / "c.npy"), read_surface(tmp_path / "c.npy", normals=False)
    assert full.normals_from == "estimated" and bare.normals is None and bare.normals_from == "none"
    assert np.array_equal(full.points, bare.points)


def test_a_cloud_far_from_the_origin_gives_the_near_clouds_results_moved(tmp_path, capsys):
    # a georeferenced scan: a unit sphere at UTM-like coordinates, where float32 rounds to a grid
    # of 0.25-0.5; every step must give the same answer as on the cloud at the origin, moved
    import trimesh

    from inr.data.surfaces import estimate_normals
    from inr.pointcloud import classical
    from inr.pointcloud.knn import knn
    from inr.pointcloud.metrics import nearest_distances
    from inr.tasks.outputs import write_mesh

    offset = np.array([512345.0, 4123456.0, 321.0])
    near = _sphere_points(1500, noise=0.01)
    far = near + offset
    assert np.abs(far.astype(np.float32) - far).max() > 0.05  # what float32 would do to it
    idx_near, d2_near = knn(torch.from_numpy(near), torch.from_numpy(near), 8)
    idx_far, d2_far = knn(torch.from_numpy(far), torch.from_numpy(far), 8)
    assert torch.equal(idx_far, idx_near) and torch.allclose(d2_far, d2_near, atol=1e-7)
    np.save(tmp_path / "near.npy", near)
    np.save(tmp_path / "far.npy", far)
    for label, extra in (("network", []), ("mls", ["--baseline", "mls"])):
        for name in ("near", "far"):
            assert main(["pointcloud", "denoise", str(tmp_path / f"{name}.npy"), str(tmp_path / f"{name}-{label}.ply"),
                         "--no-progress", *extra]) == 0
        a, b = (read_cloud(tmp_path / f"{name}-{label}.ply")[0] for name in ("near", "far"))
        assert len(a) == len(b) > 1000
        # the far cloud relative to its centre differs from the near one in float64's last bits, so
        # the network's points differ by ~1e-7, and the even thinning to the input's count can
        # then choose differently: a few points move, by under a spacing
        moved = np.abs(b - offset - a).max(axis=1)
        assert (moved < 1e-5).mean() > 0.99 and moved.max() < 0.01, (label, np.sort(moved)[-5:])
    normals_near, normals_far = estimate_normals(near), estimate_normals(far)
    assert (np.sum(normals_near * normals_far, 1) > 0.999).all()
    assert (np.sum(normals_near * near, 1) > 0).mean() > 0.95  # and they point out of the sphere
    mesh_near = classical.poisson(near, normals_near, 6)
    mesh_far = classical.poisson(far, normals_far, 6)
    assert len(mesh_far.faces) == len(mesh_near.faces) > 500
    gap = nearest_distances(mesh_far.vertices - offset, mesh_near.vertices)  # the same vertices (in their own order)
    assert gap.max() < 1e-5, gap.max()  # Poisson computes in float32 about the centre
    for suffix in (".ply", ".glb", ".obj"):  # float32 PLY/GLB vertices would round them
        write_mesh(tmp_path / f"m{suffix}", mesh_far)
        back = trimesh.load(tmp_path / f"m{suffix}", process=False, force="mesh")
        np.testing.assert_allclose(back.vertices, mesh_far.vertices, atol=1e-5, rtol=0, err_msg=suffix)
    for suffix in (".ply", ".pcd", ".xyz", ".npy"):
        write_cloud(tmp_path / f"c{suffix}", far)
        np.testing.assert_allclose(read_cloud(tmp_path / f"c{suffix}")[0], far, atol=1e-6, rtol=0, err_msg=suffix)


def test_far_strays_neither_coarsen_the_voxel_nor_break_the_network():
    # a scan with 3 stray returns far from the object (reflections, a bird): the raw bounding box
    # would make the voxel 10-1000x coarser and the output a blur; the frame must be the clean
    # cloud's, strays 1000 diagonals out (beyond STRAY_REACH) must leave the output exactly as it
    # was, and nearer strays must not come out as surface
    from inr.pointcloud.reconstruct import STRAY_REACH, make_frame
    from inr.pointcloud.strays import extent
    from inr.pointcloud.metrics import nearest_distances
    from inr.tasks.pointcloud import network_points

    clean = _sphere_points(1500, noise=0.01)
    lo, hi = clean.min(0), clean.max(0)
    diag = float(np.linalg.norm(hi - lo))
    ways = np.array([[1.0, 0.3, 0.2], [-0.2, 1.0, 0.5], [0.1, -0.4, -1.0]])
    ways /= np.linalg.norm(ways, axis=1, keepdims=True)
    base, _, _ = network_points(clean)
    assert 1000 < len(base)
    assert nearest_distances(base, clean).max() < 0.1 * diag
    for far in (10.0, 1000.0, 1e6):
        dirty = np.concatenate([clean, (lo + hi) / 2 + far * diag * ways])
        d_lo, d_hi = extent(torch.from_numpy(dirty))
        np.testing.assert_array_equal(d_lo.numpy(), lo)  # the clean cloud's box, to the bit
        np.testing.assert_array_equal(d_hi.numpy(), hi)
        assert make_frame(torch.from_numpy(dirty).float(), 56).voxel == make_frame(torch.from_numpy(clean).float(), 56).voxel
        out, _, _ = network_points(dirty)
        assert np.linalg.norm(out - (lo + hi) / 2, axis=1).max() < 0.6 * diag, far  # no stray came out
        if far * 56 > STRAY_REACH:  # left out of the input: the same output as without them
            np.testing.assert_allclose(out, base, atol=1e-6, rtol=0)
        else:  # in the input (only the noise reading's median sees them): nearly the same surface
            gap = nearest_distances(out, base).mean() + nearest_distances(base, out).mean()
            assert gap < 0.002 * diag, (far, gap)


def test_far_strays_are_left_out_of_sdf_fits_and_meshes(tmp_path):
    # fit-sdf fits in the cloud's box and Poisson meshes all it is given: 3 strays 10 diagonals
    # out made fit-sdf a 384-face blob and Poisson's mesh 3.4 diagonals off (bull, 2026-12-03);
    # they are left out, and the rest is what the clean cloud gives
    import trimesh

    from inr.data.surfaces import read_surface
    from inr.tasks.pointcloud_mesh import mesh_file

    clean = _sphere_points(1500, noise=0.0)
    normals = clean / np.linalg.norm(clean, axis=1, keepdims=True)
    ways = np.array([[1.0, 0.3, 0.2], [-0.2, 1.0, 0.5], [0.1, -0.4, -1.0]])
    ways /= np.linalg.norm(ways, axis=1, keepdims=True)
    dirty = np.concatenate([clean[:700], 35.0 * ways, clean[700:]])  # the strays in the middle of the file
    dirty_normals = np.concatenate([normals[:700], ways, normals[700:]])
    write_cloud(tmp_path / "clean.ply", clean, normals=normals)
    write_cloud(tmp_path / "dirty.ply", dirty, normals=dirty_normals)
    a, b = read_surface(tmp_path / "clean.ply"), read_surface(tmp_path / "dirty.ply")
    assert (a.strays, b.strays) == (0, 3)
    np.testing.assert_array_equal(b.points, a.points)
    np.testing.assert_array_equal(b.normals, a.normals)
    results = {}
    for name in ("clean", "dirty"):
        results[name] = mesh_file(tmp_path / f"{name}.ply", tmp_path / f"{name}-mesh.ply", method="poisson",
                                  denoiser="none", progress=False, poisson_depth=6)
    assert results["clean"]["strays_left_out"] == 0 and results["dirty"]["strays_left_out"] == 3
    mesh_a, mesh_b = (trimesh.load(tmp_path / f"{n}-mesh.ply", process=False) for n in ("clean", "dirty"))
    assert len(mesh_b.faces) == len(mesh_a.faces) > 500
    from inr.pointcloud.metrics import nearest_distances

    gap = nearest_distances(mesh_b.vertices, mesh_a.vertices)  # Poisson's vertex order varies run to run
    assert gap.max() < 1e-5, gap.max()
    assert np.abs(mesh_b.vertices).max() < 1.2


def test_tree_signs_multiply_the_sides_along_each_tree_from_a_root_facing_up():
    # hand-worked: the path 0-1-2 (root 2, the highest, faces down: -1; 1 agrees with 2: -1; 0
    # disagrees with 1: +1), the edge 3-4 (root 3 level: kept; 4 disagrees); then an independent
    # breadth-first walk over a random tree's edges
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

    from inr.data.surfaces import _tree_signs

    points = np.array([[0, 0, 0], [1, 0, 1], [2, 0, 2], [5, 0, 1], [6, 0, 0]], float)
    normals = np.array([[0, 0, 1], [0, 0, -1], [0, 0, -1], [1, 0, 0], [-1, 0, 0]], float)
    assert _tree_signs(points, normals, np.array([0, 2, 4]), np.array([1, 1, 3]))[0].tolist() == [1, -1, -1, 1, -1]
    rng = np.random.default_rng(0)
    points, normals = rng.normal(size=(400, 3)), rng.normal(size=(400, 3))
    full = np.linalg.norm(points[:, None] - points[None], axis=2)
    tree = minimum_spanning_tree(coo_matrix(np.where(full < 0.8, full, 0))).tocoo()  # a forest
    signs = _tree_signs(points, normals, tree.row, tree.col)[0]
    oriented, done = normals.copy(), np.zeros(400, bool)
    graph = (tree + tree.T).tocsr()
    for root in np.argsort(-points[:, 2]):
        if done[root]:
            continue
        order, parent = breadth_first_order(graph, root, directed=False)
        oriented[root] *= 1 if oriented[root, 2] >= 0 else -1
        for node in order[1:]:
            oriented[node] *= 1 if oriented[node] @ oriented[parent[node]] >= 0 else -1
        done[order] = True
    assert set(signs.tolist()) == {-1, 1} and tree.nnz < 399  # both sides taken, several trees
    assert np.array_equal(normals * signs[:, None], oriented)


def test_graph_orientation_faces_a_closed_part_out_and_makes_separate_sheets_agree():
    # a sphere's outward normals given with random sides: all outward (the highest point's
    # normal faces up). Two upright sheets 0.3 apart (no neighbour edge joins them), their
    # normals +-y at random: one side on both, as the closest pairs across the gap agree (each
    # sheet's highest point alone would give each a side by chance: its normal is level)
    from inr.data.surfaces import graph_consistent

    rng = np.random.default_rng(1)
    unit = rng.normal(size=(3000, 3))
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    assert np.array_equal(graph_consistent(unit, unit * rng.choice([-1.0, 1.0], size=(3000, 1))), unit)
    x, z = rng.uniform(0, 1, (2, 4000))
    sheets = np.c_[x + 1.3 * (np.arange(4000) % 2), np.zeros(4000), z]
    for seed in range(4):
        given = np.array([0.0, 1.0, 0.0]) * np.random.default_rng(seed).choice([-1.0, 1.0], size=(4000, 1))
        y = graph_consistent(sheets, given)[:, 1]
        assert np.all(y == y[0]), seed


def test_normals_without_open3d_are_pca_made_consistent_along_a_spanning_tree(tmp_path, monkeypatch):
    from inr import _external
    from inr.data.surfaces import estimate_normals, plain_normals

    monkeypatch.setitem(_external._PROBES, "open3d", (None, "ModuleNotFoundError: hidden by the test"))
    rng = np.random.default_rng(3)
    u, v = rng.uniform(0, 2 * np.pi, (2, 6000))
    torus = np.c_[(1 + 0.3 * np.cos(v)) * np.cos(u), (1 + 0.3 * np.cos(v)) * np.sin(u), 0.3 * np.sin(v)]
    outward = np.c_[np.cos(v) * np.cos(u), np.cos(v) * np.sin(u), np.sin(v)]
    for orient_at_most in (10_000, 2_000):  # whole, and on a subset that the rest follow
        n = plain_normals(torus + [1e6, 0, 0], orient_at_most)  # far from the origin: the same normals
        cos = np.sum(n * outward, 1)
        assert np.allclose(np.linalg.norm(n, axis=1), 1) and (cos > 0.98).mean() > 0.99, (cos < 0).mean()
    # a plane's normals all point one way (its side is a coin toss; here the first point's up)
    plane = np.c_[rng.uniform(0, 1, (2000, 2)), np.zeros(2000)]
    assert np.abs(np.abs(plain_normals(plane)[:, 2]) - 1).max() < 1e-9 and len(np.unique(np.sign(plain_normals(plane)[:, 2]))) == 1
    assert np.array_equal(estimate_normals(torus), plain_normals(torus))
    # so fit-sdf takes a cloud without normals on a machine without open3d
    np.savetxt(tmp_path / "torus.xyz", torus)
    out = tmp_path / "run"
    assert main(["fit-sdf", str(tmp_path / "torus.xyz"), "--steps", "20", "--out", str(out), "--no-progress",
                 "--set", "train.mesh_resolution=32"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["normals"] == "estimated" and m["normal_consistency"] > 0.9  # 0.96 here; flipped normals break the sign


def test_denoise_writes_normals_and_mesh_makes_a_surface_without_open3d(tmp_path, monkeypatch, capsys):
    # a plain `pip install .`: the network's cloud comes out with oriented normals in a PLY, and
    # `pointcloud mesh` (the sdf route) makes the surface; Poisson, Open3D's, says so at once
    import trimesh

    from inr import _external

    monkeypatch.setitem(_external._PROBES, "open3d", (None, "ModuleNotFoundError: hidden by the test"))
    sphere_points = _sphere_points(3000, noise=0.01)
    np.save(tmp_path / "in.npy", sphere_points)
    assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "d.ply"), "--no-progress"]) == 0
    assert "with normals" in capsys.readouterr().out
    points, _, normals = read_oriented_cloud(tmp_path / "d.ply")
    radial = points / np.linalg.norm(points, axis=1, keepdims=True)
    assert len(points) == 3000 and (np.sum(normals * radial, 1) > 0.9).mean() > 0.98
    assert main(["pointcloud", "mesh", str(tmp_path / "in.npy"), str(tmp_path / "p.ply"), "--method", "poisson",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--method poisson is Open3D's" in err and "Traceback" not in err and not list(tmp_path.glob("p*"))
    # a coloured scan (red above the equator, blue below) gives a coloured mesh and oriented cloud
    red, blue = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    write_cloud(tmp_path / "in.ply", sphere_points, np.where(sphere_points[:, 2:] > 0, red, blue))
    assert main(["pointcloud", "mesh", str(tmp_path / "in.ply"), str(tmp_path / "s.ply"), "--steps", "60",
                 "--resolution", "32", "--no-progress"]) == 0
    points, colours, normals = read_oriented_cloud(tmp_path / "s-oriented.ply")
    assert normals is not None and len(normals) == 3000
    assert np.array_equal(colours[points[:, 2] > 0.1], np.tile(red, ((points[:, 2] > 0.1).sum(), 1)))
    sphere = trimesh.load(tmp_path / "s.ply")
    assert len(sphere.faces) > 500 and np.abs(np.linalg.norm(sphere.vertices, axis=1) - 1).mean() < 0.05
    rgb = sphere.visual.vertex_colors[:, :3]
    assert (rgb[sphere.vertices[:, 2] > 0.1] == [255, 0, 0]).all() and (rgb[sphere.vertices[:, 2] < -0.1] == [0, 0, 255]).all()
