"""Signed distance fields: gradients, loss terms, the sparse lattice and marching cubes against
analytic shapes, reading oriented surfaces, and `inr fit-sdf` / `inr extract-mesh` end to end."""

import json

import numpy as np
import pytest
import torch

from inr import progress
from inr.cli import main
from inr.render.extract import lattice_points, sdf_lattice, zero_level_mesh
from inr.sdf import Frame, LossWeights, analytic_gradient, lookup_side, numerical_gradient, sdf_loss_terms, side_lattice

progress.set_enabled(False)


def sphere_sdf(r=0.5013):  # a radius off the lattice: no lattice point lies exactly on the surface
    return lambda x: x.norm(dim=-1) - r


def test_gradients_of_a_quadratic_are_exact():
    x = torch.tensor([[0.3, -0.2, 0.1], [0.0, 0.5, -0.7]], dtype=torch.float64)
    fn = lambda p: (p**2).sum(-1) + 3 * p[:, 0]  # noqa: E731  grad = 2x + (3, 0, 0)
    want = 2 * x + torch.tensor([3.0, 0, 0], dtype=torch.float64)
    f, g = numerical_gradient(fn, x, 0.1)  # central differences are exact on quadratics at any step
    assert torch.allclose(g, want, atol=1e-12) and torch.allclose(f, fn(x))
    f, g = analytic_gradient(fn, x)
    assert torch.allclose(g, want, atol=1e-12)


def test_numerical_gradient_trains_the_parameters():
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    _, g = numerical_gradient(lambda p: p @ w, torch.rand(5, 3), 0.01)
    g.sum().backward()  # d/dw of sum over points of grad(p . w) = d/dw (5 * sum(w)) = 5
    assert torch.allclose(w.grad, torch.full((3,), 5.0), atol=1e-4)


def test_loss_terms_vanish_on_an_exact_sdf_and_the_sign_term_sees_a_flipped_region():
    torch.manual_seed(0)
    fn = sphere_sdf(0.5)
    surface = torch.nn.functional.normalize(torch.randn(256, 3, dtype=torch.float64), dim=-1) * 0.5
    space = torch.rand(256, 3, dtype=torch.float64) * 2 - 1
    fs, gs = analytic_gradient(fn, surface)
    fx, gx = analytic_gradient(fn, space)
    sign = torch.sign(fn(space))
    w = LossWeights(sign=10.0)
    terms = sdf_loss_terms(fs, gs, surface / 0.5, fx, gx, 256, w, space_sign=sign)
    for name in ("sdf", "normal", "eikonal", "sign"):
        assert float(terms[name].detach()) < 1e-9, name
    # off-surface: mean exp(-100 |f|) over the uniform points, by hand
    assert float(terms["off_surface"].detach()) == pytest.approx(100 * float(torch.exp(-100 * fx.abs()).mean()), rel=1e-6)
    flipped = sdf_loss_terms(fs, gs, surface / 0.5, -fx, -gx, 256, w, space_sign=sign)
    assert float(flipped["sign"].detach()) == pytest.approx(10 * float(fx.detach().abs().mean()), rel=1e-9)


def test_side_lattice_knows_inside_outside_and_stays_silent_near_the_surface():
    rng = np.random.default_rng(0)
    n = rng.normal(size=(20000, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    sides = side_lattice(0.5 * n, n, margin=0.02, resolution=33)
    q = torch.tensor([[0.0, 0, 0], [0.9, 0.9, 0.9], [0.5, 0, 0], [0.2, 0.1, 0], [0, -0.8, 0]])
    assert lookup_side(sides, q).tolist() == [-1.0, 1.0, 0.0, -1.0, 1.0]


def test_nearest_is_exact_within_the_bound_and_from_the_subset_beyond():
    from scipy.spatial import cKDTree

    from inr.sdf import _nearest

    rng = np.random.default_rng(1)
    points = rng.uniform(-0.5, 0.5, (10000, 3))
    q = rng.uniform(-1, 1, (3000, 3))
    tree = cKDTree(points)
    exact_d, exact_i = tree.query(q, k=3)
    dist, idx = _nearest(tree, points, q, 3, bound=0.1, subset=500)
    within = exact_d[:, -1] <= 0.1
    assert within.sum() > 400 and (~within).sum() > 1000
    np.testing.assert_array_equal(idx[within], exact_i[within])
    # beyond: true distances to the points it names, no nearer than the exact ones, from 500 points
    far_d, far_i = dist[~within], idx[~within]
    np.testing.assert_allclose(far_d, np.linalg.norm(q[~within][:, None] - points[far_i], axis=2), rtol=1e-6)
    assert (far_d >= exact_d[~within] - 1e-12).all() and len(np.unique(far_i)) <= 500
    assert (far_d > exact_d[~within] + 1e-9).any()  # a subset, not the whole cloud


def test_winding_numbers_and_a_flipped_patch_of_normals():
    from inr.sdf import winding_numbers

    rng = np.random.default_rng(0)
    n = rng.normal(size=(6000, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    p = 0.5 * n
    # the analytic values of a sphere: 1 inside, 0 outside (up to the sampling)
    w = winding_numbers(np.array([[0.0, 0, 0], [0.2, -0.1, 0.1], [0.8, 0, 0], [0, 0, -0.9]]), p, n)
    np.testing.assert_allclose(w, [1, 1, 0, 0], atol=0.03)
    # a patch of normals turned inwards (a wrong orientation patch, 7 % of the points), facing a
    # corner of the box, where the space beyond it is inside the points' bounding box
    bad = n @ (np.ones(3) / 3**0.5) > 0.86
    flipped = np.where(bad[:, None], -n, n)
    axis = np.linspace(-1, 1, 33)
    q = torch.tensor(np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3), dtype=torch.float32)
    truth = torch.where(q.norm(dim=1) < 0.5, -1.0, 1.0)
    wrong = {}
    for winding in (None, (0.4, 0.6)):
        side = lookup_side(side_lattice(p, flipped, margin=0.02, resolution=33, winding=winding), q)
        bad_side = (side != 0) & (side != truth)
        wrong[winding] = (int(bad_side.sum()), int((bad_side & (truth > 0)).sum()))
    # the nearest point's side turns the space beyond the patch "inside" (280 points, 187 of
    # them outside the sphere); the winding number keeps it outside (78, 11): what stays wrong is
    # just under the patch, where the flipped normals dominate any estimate
    assert wrong[None][1] > 150 and wrong[(0.4, 0.6)][1] < 20 and wrong[(0.4, 0.6)][0] < 0.4 * wrong[None][0], wrong


@pytest.mark.parametrize("resolution", [64, 129])
def test_sparse_lattice_gives_the_dense_mesh_of_a_sphere(resolution):
    import trimesh

    values, mask = sdf_lattice(sphere_sdf(), resolution)
    res = values.shape[0]
    assert (res - 1) % 4 == 0 and res >= resolution
    assert mask.float().mean() < 0.5  # the work follows the surface, not the volume
    dense = sphere_sdf()(lattice_points(torch.tensor([-1.0, -1, -1, 1, 1, 1]), res)).view(res, res, res)
    assert torch.allclose(values[mask], dense[mask], atol=1e-6)
    v1, f1 = zero_level_mesh(values, mask)
    v2, f2 = zero_level_mesh(dense)
    assert np.array_equal(f1, f2) and np.allclose(v1, v2, atol=1e-6)
    mesh = trimesh.Trimesh(v1, f1)
    assert mesh.is_watertight and mesh.volume > 0  # closed, normals outwards
    assert mesh.volume == pytest.approx(4 / 3 * np.pi * 0.5013**3, rel=0.01)
    assert np.abs(np.linalg.norm(v1, axis=1) - 0.5013).max() < 2.0 / res


def test_sparse_lattice_keeps_a_plate_thinner_than_its_coarse_cells():
    # a plate 0.02 thick (the coarsest level's cells are 0.0625): the levels must not lose it
    half = torch.tensor([0.7, 0.01, 0.5])

    def plate(x):  # the exact distance to a box
        q = x.abs() - half
        return q.clamp_min(0).norm(dim=-1) + q.amax(-1).clamp_max(0)

    values, mask = sdf_lattice(plate, 129, show_progress=False)
    assert mask.float().mean() < 0.2
    dense = plate(lattice_points(torch.tensor([-1.0, -1, -1, 1, 1, 1]), 129)).view(129, 129, 129)
    v1, f1 = zero_level_mesh(values, mask)
    v2, f2 = zero_level_mesh(dense)
    assert len(f1) > 1000 and np.array_equal(f1, f2) and np.allclose(v1, v2, atol=1e-6)


def test_trim_drops_large_patches_away_from_the_points_and_renumbers():
    from inr.sdf import median_spacing, trim_to_points

    # a unit square of 4 x 4 cells in z = 0 (two triangles a cell) and the same square lifted to
    # z = 1 (area 1 each); the points cover the lower square only, 0.25 apart
    g = np.linspace(0, 1, 5)
    grid = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    lower = np.c_[grid, np.zeros(25)]
    verts = np.r_[lower, lower + [0, 0, 1]]
    cells = [(5 * i + j, 5 * (i + 1) + j, 5 * i + j + 1, 5 * (i + 1) + j + 1) for i in range(4) for j in range(4)]
    quad = np.array([[a, b, c] for a, b, c, d in cells] + [[c, b, d] for a, b, c, d in cells])
    faces = np.r_[quad, quad + 25]
    assert median_spacing(lower) == pytest.approx(0.25)
    v, f = trim_to_points(verts, faces, lower + [0, 0, 0.1], 0.15, 0.9)  # points 0.1 above the lower square
    assert len(f) == 32 and len(v) == 25 and f.max() == 24
    np.testing.assert_allclose(v[f], verts[faces[:32]])  # the same triangles, renumbered
    assert len(trim_to_points(verts, faces, lower, 0.15, 1.1)[1]) == 64  # a patch under min_area stays
    assert len(trim_to_points(verts, faces, lower, 1.01, 0.0)[1]) == 64  # within reach
    # a face is away when any one of its vertices is: the corner (0, 0, 0) without a point makes
    # its one triangle (area 1/32) a patch of its own
    v, f = trim_to_points(verts, faces, lower[1:], 0.01, 0.9)
    assert len(f) == 32 and len(v) == 25  # the lifted square went, the small patch stayed
    v, f = trim_to_points(verts, faces, lower[1:], 0.01, 0.01)
    assert len(f) == 31 and len(v) == 24 and not np.isclose(v, 0).all(1).any()


def test_zero_level_mesh_refuses_a_field_without_a_surface():
    with pytest.raises(ValueError, match="no zero level"):
        zero_level_mesh(torch.ones(9, 9, 9))


def test_frame_round_trip_and_margin():
    pts = np.array([[0.0, 0, 0], [4.0, 1, 2], [2.0, 3, 1]])
    fr = Frame.fit(pts)
    x = fr.to_field(pts)
    assert np.abs(x).max() == pytest.approx(0.9) and np.allclose(fr.to_world(x), pts)


def _torus_mesh(path):
    import trimesh

    trimesh.creation.torus(major_radius=1.0, minor_radius=0.35, major_sections=48, minor_sections=24).export(path)
    return path


def _gradient(points):
    """A colour known everywhere: red and green grow linearly across the torus's x and y (0-1)."""
    return np.c_[(points[:, :2] + 1.35) / 2.7, np.full(len(points), 0.5)]


def _textured_torus(path):
    """The torus with a texture whose colour at each point is _gradient's (red along u, green along
    v; UV = the point's scaled x, y): an OBJ (+ .mtl + .png) or a GLB (base-colour texture)."""
    import trimesh
    from PIL import Image

    mesh = trimesh.load(_torus_mesh(path.with_suffix(".ply")), process=False)
    u, v = np.meshgrid(np.arange(256), np.arange(256))
    image = np.stack([u, 255 - v, np.full_like(u, 128)], -1).astype(np.uint8)  # image rows run down, v up
    mesh.visual = trimesh.visual.TextureVisuals(uv=_gradient(mesh.vertices)[:, :2],
                                                image=Image.fromarray(image))
    mesh.export(path)
    return path


def _face_of(mesh, points):
    """The face each point lies on (in its plane, barycentric weights >= 0), by brute force."""
    a, b, c = (mesh.vertices[mesh.faces[:, i]] for i in range(3))
    e1, e2, rel = b - a, c - a, points[:, None] - a  # rel: (N, F, 3)
    normal = np.cross(e1, e2)
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    g = np.stack([np.einsum("fc,fc->f", e1, e1), np.einsum("fc,fc->f", e1, e2), np.einsum("fc,fc->f", e2, e2)], 1)
    r1, r2 = np.einsum("nfc,fc->nf", rel, e1), np.einsum("nfc,fc->nf", rel, e2)
    det = g[:, 0] * g[:, 2] - g[:, 1] ** 2
    v, w = (g[:, 2] * r1 - g[:, 1] * r2) / det, (g[:, 0] * r2 - g[:, 1] * r1) / det
    off = np.abs(np.einsum("nfc,fc->nf", rel, normal)) + 1e9 * ((v < -1e-9) | (w < -1e-9) | (v + w > 1 + 1e-9))
    assert off.min(1).max() < 1e-9  # every point on a face
    return off.argmin(1)


def test_a_coloured_mesh_gives_its_samples_its_colours(tmp_path):
    # vertex colours interpolated (a linear colour stays linear), a face's colour, a texture at the
    # interpolated UV; the points are those of the plain mesh (the same draws)
    import trimesh

    from inr.data.surfaces import read_surface

    plain = read_surface(_torus_mesh(tmp_path / "plain.ply"), mesh_points=3000)
    assert plain.colors is None
    mesh = trimesh.load(tmp_path / "plain.ply", process=False)
    mesh.visual = trimesh.visual.ColorVisuals(mesh, vertex_colors=np.round(_gradient(mesh.vertices) * 255).astype(np.uint8))
    mesh.export(tmp_path / "vertex.ply")
    s = read_surface(tmp_path / "vertex.ply", mesh_points=3000)
    assert np.array_equal(s.points, plain.points)
    assert np.abs(s.colors - _gradient(s.points)).max() < 1 / 255
    faces = np.random.default_rng(0).integers(0, 256, (len(mesh.faces), 3)).astype(np.uint8)
    mesh.visual = trimesh.visual.ColorVisuals(mesh, face_colors=faces)
    mesh.export(tmp_path / "face.ply")
    s = read_surface(tmp_path / "face.ply", mesh_points=3000)
    assert np.array_equal(np.round(s.colors * 255), faces[_face_of(mesh, s.points)])
    for name in ("tex.obj", "tex.glb"):
        s = read_surface(_textured_torus(tmp_path / name), mesh_points=3000)
        assert np.abs(s.colors - _gradient(s.points)).max() < 3 / 255, name


def test_read_surface_from_a_mesh_a_cloud_with_normals_and_one_without(tmp_path):
    from inr.data.pointclouds import write_cloud
    from inr.data.surfaces import read_surface

    s = read_surface(_torus_mesh(tmp_path / "t.ply"), mesh_points=5000)
    assert s.source == "mesh" and s.normals_from == "faces" and s.points.shape == (5000, 3)
    # on a torus the outward normal is the direction from the tube's centre circle
    ring = s.points.copy()
    ring[:, 2] = 0
    centre = ring / np.linalg.norm(ring, axis=1, keepdims=True)
    radial = s.points - centre
    radial /= np.linalg.norm(radial, axis=1, keepdims=True)
    assert np.mean(np.sum(radial * s.normals, 1) > 0.95) > 0.99
    write_cloud(tmp_path / "c.ply", s.points, normals=s.normals)
    c = read_surface(tmp_path / "c.ply")
    assert c.normals_from == "file" and np.allclose(c.normals, s.normals, atol=1e-6)
    write_cloud(tmp_path / "bare.xyz", s.points)
    e = read_surface(tmp_path / "bare.xyz")
    assert e.normals_from == "estimated"
    assert np.mean(np.sum(e.normals * s.normals, 1) > 0.9) > 0.98  # consistent and outwards
    # zero normals (unknown, as some writers leave them) count as none: estimated, not refused
    write_cloud(tmp_path / "zero.ply", s.points, normals=np.zeros_like(s.points))
    z = read_surface(tmp_path / "zero.ply")
    assert z.normals_from == "estimated" and np.allclose(z.normals, e.normals)
    # some known (turned inwards, as seen from inside), the others zero: the estimate takes their sides
    partial = -s.normals.copy()
    partial[np.random.default_rng(1).random(len(partial)) > 0.1] = 0
    write_cloud(tmp_path / "partial.ply", s.points, normals=partial)
    p = read_surface(tmp_path / "partial.ply")
    assert p.normals_from == "estimated, their sides from the file's"
    assert np.mean(np.sum(p.normals * s.normals, 1) < -0.9) > 0.98


def test_fit_sdf_makes_a_mesh_close_to_the_input_and_extract_mesh_any_resolution(tmp_path, capsys):
    import trimesh

    torus = _textured_torus(tmp_path / "torus.obj")  # a textured mesh, as photogrammetry gives
    out = tmp_path / "run"
    args = ["fit-sdf", str(torus), "--steps", "200", "--out", str(out), "--no-progress", "--mesh-points", "20000",
            "--set", "train.mesh_resolution=96", "--set", "field.encoding_options.n_levels=8",
            "--set", "field.encoding_options.max_resolution=128", "--set", "field.encoding_options.log2_table=15"]
    assert main(args) == 0
    m = json.loads((out / "metrics.json").read_text())
    diag = float(np.linalg.norm([2.7, 2.7, 0.7]))
    assert m["chamfer_l1"] < 0.01 * diag and m["fscore"] > 0.9 and m["normal_consistency"] > 0.95, m
    mesh = trimesh.load(out / "mesh.ply")
    assert mesh.extents == pytest.approx([2.7, 2.7, 0.7], abs=0.08)  # in the input's units
    # coloured as the texture: each vertex its nearest sample's colour (samples ~0.03 apart)
    miss = np.abs(mesh.visual.vertex_colors[:, :3] / 255 - _gradient(mesh.vertices)).max(1)
    assert m["coloured"] and np.median(miss) < 3 / 255 and miss.max() < 12 / 255, (np.median(miss), miss.max())
    assert (out / "slice.png").is_file() and (out / "curve.png").is_file()
    assert m["curve"][-1][2] < m["curve"][0][2]
    capsys.readouterr()
    assert main(["extract-mesh", str(out), "--resolution", "48", "--out", str(tmp_path / "m48.obj"), "--no-progress"]) == 0
    coarse = trimesh.load(tmp_path / "m48.obj")
    assert 0 < len(coarse.faces) < len(mesh.faces)
    assert main(["fit-sdf", "--resume", str(out), "--steps", "210", "--no-progress"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 210


def test_fit_sdf_trims_the_sheet_that_closes_an_open_scan(tmp_path, capsys):
    import trimesh

    from inr.data.pointclouds import write_cloud

    # the upper half of a sphere of radius 0.8, open below: the level set closes it somewhere
    # under the rim, where no point is
    rng = np.random.default_rng(0)
    n = rng.normal(size=(12000, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    n = n[n[:, 2] > 0.05]
    colours = np.c_[n[:, 2], 0.5 * np.ones(len(n)), 1 - n[:, 2]]  # red at the top, blue at the rim
    write_cloud(tmp_path / "dome.ply", 0.8 * n, colours, normals=n)
    out = tmp_path / "run"
    args = ["fit-sdf", str(tmp_path / "dome.ply"), "--steps", "150", "--out", str(out), "--no-progress",
            "--set", "train.mesh_resolution=64", "--set", "train.mesh_trim=3", "--set", "train.surface_batch=2048",
            "--set", "train.space_batch=2048", "--set", "field.encoding_options.n_levels=8",
            "--set", "field.encoding_options.max_resolution=64", "--set", "field.encoding_options.log2_table=15"]
    assert main(args) == 0
    m = json.loads((out / "metrics.json").read_text())
    mesh = trimesh.load(out / "mesh.ply")
    assert m["trimmed_faces"] > 0 and m["mesh_faces"] == len(mesh.faces) and not m["watertight"]
    from scipy.spatial import cKDTree

    def coloured_as_the_scan(mesh_file):  # each vertex its nearest input point's colour (8-bit in the files)
        v = trimesh.load(mesh_file, process=False)
        near = cKDTree(0.8 * n).query(v.vertices)[1]
        want = (np.round(colours[near] * 255) - v.visual.vertex_colors[:, :3]).astype(float)
        return np.abs(want).max() <= 1 and (np.abs(want).max(1) == 0).mean() > 0.99

    assert m["coloured"] and coloured_as_the_scan(out / "mesh.ply")

    def cap(v):  # vertices of a sheet across the opening: inside the rim, below the dome
        return int(((np.linalg.norm(v[:, :2], axis=1) < 0.6) & (v[:, 2] < 0.3)).sum())

    assert cap(mesh.vertices) == 0  # the closing sheet went
    capsys.readouterr()
    assert main(["extract-mesh", str(out), "--resolution", "48", "--no-progress"]) == 0
    assert cap(trimesh.load(out / "mesh-48.ply").vertices) == 0 and coloured_as_the_scan(out / "mesh-48.ply")  # trimmed as the run was
    assert main(["extract-mesh", str(out), "--resolution", "48", "--trim", "0", "--out", str(tmp_path / "whole.ply"),
                 "--no-progress"]) == 0
    assert cap(trimesh.load(tmp_path / "whole.ply").vertices) > 100 and "watertight" in capsys.readouterr().out
    assert coloured_as_the_scan(tmp_path / "whole.ply")
    # the viewer re-extracts as extract-mesh does: trimmed at level 0, whole when unticked or offset
    from inr.viewer import Viewer, content_for

    from .test_viewer import free_port

    viewer = Viewer(content_for([out]), port=free_port())
    try:
        sdf = viewer.content
        sdf.resolution.value = 48
        assert sdf.mesh.visual.kind == "vertex"  # mesh.ply, coloured by the run
        sdf._extract()
        assert cap(sdf.mesh.vertices) == 0 and "trimmed" in sdf.status.content
        near = cKDTree(0.8 * n).query(sdf.mesh.vertices)[1]  # re-extracted meshes coloured as the scan
        assert np.abs(np.round(colours[near] * 255) - sdf.mesh.visual.vertex_colors[:, :3]).max() <= 1
        sdf.trimmed.value = False
        sdf._extract()
        assert cap(sdf.mesh.vertices) > 100 and "untrimmed" in sdf.status.content
        sdf.trimmed.value, sdf.level.value = True, 0.02
        sdf._extract()
        assert cap(sdf.mesh.vertices) > 100 and "untrimmed" in sdf.status.content
    finally:
        viewer.stop()
    (tmp_path / "dome.ply").unlink()
    viewer = Viewer(content_for([out]), port=free_port())  # the input gone: the viewer still opens, untrimmed
    try:
        assert viewer.content.surface is None and viewer.content.trimmed.value is False
    finally:
        viewer.stop()
    assert main(["extract-mesh", str(out), "--resolution", "48", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is gone" in err and "--trim 0" in err, err


def test_a_fit_without_a_mesh_is_one_line_marked_failed_and_kept_for_extract_mesh(tmp_path, capsys, monkeypatch):
    import trimesh

    import inr.tasks.sdf as sdf_task

    def no_faces(mesh, module, resolution, points, trim):  # as trim_mesh says when it drops every face
        raise ValueError(f"every face lies in a large patch farther than {trim:g} units from the input")

    monkeypatch.setattr(sdf_task, "trim_mesh", no_faces)
    torus = _torus_mesh(tmp_path / "torus.obj")
    out = tmp_path / "run"
    args = ["fit-sdf", str(torus), "--steps", "30", "--out", str(out), "--no-progress", "--mesh-points", "5000",
            "--set", "train.mesh_resolution=32",
            "--set", "field.encoding_options.n_levels=4", "--set", "field.encoding_options.max_resolution=32",
            "--set", "field.encoding_options.log2_table=12"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no surface" in err and f"extract-mesh {out} --trim 0" in err, err
    assert not (out / "mesh.ply").exists() and not (out / "metrics.json").exists()
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "failed" and status["step"] == 30 and "every face" in status["error"]
    monkeypatch.undo()
    assert main(["extract-mesh", str(out), "--resolution", "32", "--trim", "0", "--no-progress"]) == 0
    assert len(trimesh.load(out / "mesh-32.ply").faces) > 0


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path, capsys):
    (tmp_path / "bad.ply").write_text("not a ply file\n")
    (tmp_path / "few.xyz").write_text("0 0 0\n1 0 0\n0 1 0\n")
    (tmp_path / "x.dat").write_text("0 0 0\n")
    import trimesh

    text = trimesh.creation.icosphere(2).export(file_type="ply", encoding="ascii")
    text = text.decode() if isinstance(text, bytes) else text
    (tmp_path / "cut.ply").write_text(text[: len(text) * 3 // 4])  # 320 faces declared, some read
    from .helpers import NAN_TETRAHEDRON

    # a tetrahedron with a NaN vertex: trimesh's processing would drop it and three faces quietly
    (tmp_path / "nan.obj").write_text(NAN_TETRAHEDRON)
    for path, words in ((tmp_path / "bad.ply", "bad.ply"), (tmp_path / "few.xyz", "at least 10"),
                        (tmp_path / "none.obj", "no such file"), (tmp_path / "x.dat", "unsupported format"),
                        (tmp_path / "cut.ply", "of the 320 faces its header declares"),
                        (tmp_path / "nan.obj", "1 of 4 vertices have NaN or infinite coordinates (first: vertex 1)")):
        capsys.readouterr()
        assert main(["fit-sdf", str(path), "--out", str(tmp_path / "r"), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
        assert not (tmp_path / "r").exists()
    assert main(["extract-mesh", str(tmp_path), "--no-progress"]) == 2
    assert "is not a run folder" in capsys.readouterr().err
