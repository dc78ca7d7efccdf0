"""Point clouds at scale: k-NN search, the density rule of the voxel size, tiling, held-out shapes."""

import re

import numpy as np
import pytest
import torch


def test_knn_equals_brute_force():
    from inr.pointcloud.knn import knn

    g = torch.Generator().manual_seed(0)
    pts, q = torch.rand(500, 3, generator=g), torch.rand(120, 3, generator=g)
    idx, d2 = knn(q, pts, 5)
    ref = torch.cdist(q.double(), pts.double())
    ref_d, ref_i = ref.topk(5, largest=False)
    assert torch.equal(idx, ref_i)
    torch.testing.assert_close(d2.double(), ref_d**2, rtol=1e-5, atol=1e-6)
    idx, _ = knn(q, pts[:3], 5)  # fewer points than k: all of them, nearest first
    assert idx.shape == (120, 3) and torch.equal(idx, ref[:, :3].argsort(1))


def test_neighbours_mask_points_beyond_reach():
    from inr.pointcloud.reconstruct import neighbours

    u = torch.tensor([[0.2, 0.1, 0.0], [1.9, 0.0, 0.0], [0.0, -1.4, 0.3], [4.0, 4.0, 4.0]])
    rel, mask = neighbours(torch.zeros(1, 3), u, k=6, reach=1.5)
    # sorted by distance: (0.2, 0.1, 0) d=0.22, (0, -1.4, 0.3) d=1.43, (1.9, 0, 0) d=1.9, (4, 4, 4); then padding
    assert mask.tolist() == [[False, False, True, True, True, True]]
    torch.testing.assert_close(rel[0, :2], u[[0, 2]])
    assert float(rel[0, 2:].abs().sum()) == 0.0  # ignored slots are zeroed
    _, mask = neighbours(torch.zeros(1, 3), u, k=6, reach=2.0)
    assert mask.tolist() == [[False, False, False, True, True, True]]


def test_voxel_rule_keeps_density_in_the_trained_range():
    from inr.pointcloud.reconstruct import density, make_frame

    MAX_TRAINED_DENSITY = 4.0

    g = torch.Generator().manual_seed(0)
    # a unit square (diagonal sqrt 2 in the xy plane) sampled densely
    pts = torch.cat([torch.rand(200_000, 2, generator=g), torch.zeros(200_000, 1)], 1)
    assert density(pts, 1.0) == pytest.approx(200_000 / 1)  # all in one voxel
    assert density(pts, 0.5) == pytest.approx(200_000 / 4)
    sparse = pts[:1000]
    frame = make_frame(sparse, 40.0, MAX_TRAINED_DENSITY)
    assert frame.voxel == pytest.approx(2**0.5 / 40, rel=1e-3)  # sparse enough: the diagonal rule
    frame = make_frame(pts, 40.0, MAX_TRAINED_DENSITY)
    d = density(pts, frame.voxel)
    assert 0.8 * MAX_TRAINED_DENSITY < d <= MAX_TRAINED_DENSITY  # dense: the voxel shrank to the limit
    assert frame.voxel < 2**0.5 / 40 / 4


def test_a_long_low_noise_scan_gets_the_noise_adapted_voxel():
    # a tube 30 radii long: its diagonal voxel holds ~30 points per voxel, so the density cap
    # sets the voxel, 10x the noise (0.03); that voxel must still adapt to the noise, as a
    # compact scan's does (2026-12-03: 0.880 of the input's Chamfer without, 0.711 with; MLS 0.816)
    import trimesh

    from inr.pointcloud.metrics import nearest_distances
    from inr.pointcloud.reconstruct import make_frame
    from inr.pointcloud.voxel import even_subsample
    from inr.tasks.pointcloud import default_weights
    from inr.tasks.pointcloud_train import load_weights

    tube = trimesh.creation.cylinder(radius=1.0, height=30.0, sections=64)
    truth = np.asarray(trimesh.sample.sample_surface(tube, 100_000, seed=1)[0])
    clean = np.asarray(trimesh.sample.sample_surface(tube, 20_000, seed=2)[0])
    noisy = clean + np.random.default_rng(0).normal(scale=0.03, size=clean.shape)
    model = load_weights(default_weights())
    diagonal_voxel = float(np.linalg.norm(np.ptp(noisy, 0))) / model.voxels_per_diagonal
    assert make_frame(torch.from_numpy(noisy).float(), model.voxels_per_diagonal, float(model.max_density)).voxel < 0.6 * diagonal_voxel

    def chamfer(a):
        return nearest_distances(a, truth).mean() + nearest_distances(truth, a).mean()

    scores = {}
    for adaptive in (False, True):
        out = model.reconstruct(torch.from_numpy(noisy), adaptive=adaptive)[0].numpy()
        scores[adaptive] = chamfer(even_subsample(out, len(noisy), 0)) / chamfer(noisy)
    assert scores[True] < 0.78 and scores[True] < 0.9 * scores[False], scores


def test_training_records_the_densest_input():
    from inr.pointcloud.network import ReconstructionConfig
    from inr.pointcloud.reconstruct import Reconstructor

    model = Reconstructor(ReconstructionConfig(width=8, d_model=16, layers=1), 2.0)
    # diagonal 2 * sqrt(3) / 2 voxels per diagonal: a voxel of side sqrt(3); 8 corners of the
    # cube [0, 2]^3 fall into 2 x 2 x 2 voxels (1 point each), the dense clump adds 8 to one
    corners = torch.cartesian_prod(*[torch.tensor([0.0, 2.0])] * 3)
    clump = torch.full((8, 3), 0.1) + torch.arange(8.0)[:, None] * 0.01
    noisy = torch.cat([corners, clump])
    model.train()(noisy, noisy)
    assert float(model.max_density) == pytest.approx(16 / 8)
    model.eval()(noisy[:9], noisy[:9])
    assert float(model.max_density) == pytest.approx(16 / 8)  # evaluation does not record


def test_tiled_reconstruction_matches_one_pass():
    # tiles with margins decide almost every voxel as one pass over the whole grid does, and no
    # voxel twice
    from inr.pointcloud.network import ReconstructionConfig
    from inr.pointcloud.reconstruct import Reconstructor
    from inr.pointcloud.shapes import sample_surface
    from inr.pointcloud.heldout import terrain

    torch.manual_seed(0)
    model = Reconstructor(ReconstructionConfig(width=8, d_model=16, layers=1, points_per_voxel=2), 40.0).eval()
    pts = torch.from_numpy(sample_surface(terrain(), 4000, np.random.default_rng(0))).float()
    whole, _ = model.reconstruct(pts, threshold=0.5, tile=1000)
    tiled, _ = model.reconstruct(pts, threshold=0.5, tile=12, margin=16)  # margin 0: 0.41 voxels
    assert len(whole) > 100
    assert abs(len(tiled) - len(whole)) <= 0.02 * len(whole), (len(tiled), len(whole))
    from inr.pointcloud.knn import knn
    from inr.pointcloud.reconstruct import DEFAULT_MAX_DENSITY, make_frame

    voxel = make_frame(pts, 40.0, DEFAULT_MAX_DENSITY).voxel
    for a, b in ((tiled, whole), (whole, tiled)):  # the same points, up to a few near tile borders
        d = knn(a, b, 1)[1][:, 0].sqrt() / voxel
        assert float(torch.quantile(d, 0.95)) < 0.01, float(torch.quantile(d, 0.95))


def test_tiles_cover_every_candidate_once():
    from inr.pointcloud.reconstruct import Reconstructor

    ijk = torch.tensor([[0, 0, 0], [5, 0, 0], [9, 9, 9]])
    lo = ijk.min(0).values - 1
    starts = Reconstructor._tile_starts(ijk, lo, 4)
    cand = (ijk[:, None, :] + torch.cartesian_prod(*[torch.arange(-1, 2)] * 3)[None]).reshape(-1, 3)
    owners = torch.stack([((cand >= s) & (cand < s + 4)).all(1) for s in starts]).sum(0)
    assert owners.min() == 1 and owners.max() == 1


def test_heldout_meshes_known_geometry():
    from inr.pointcloud.heldout import heldout_meshes, star_area

    meshes = heldout_meshes()
    assert set(meshes) == {"tetrahedron", "octahedron", "mobius", "trefoil", "star", "terrain"}
    for name in ("tetrahedron", "octahedron", "trefoil", "star"):
        assert meshes[name].is_watertight and meshes[name].volume > 0, name
    assert not meshes["mobius"].is_watertight and not meshes["terrain"].is_watertight
    assert meshes["star"].volume == pytest.approx(star_area() * 0.5, rel=1e-9)
    assert meshes["octahedron"].volume == pytest.approx(4 / 3, rel=1e-9)  # radius 1: |x|+|y|+|z| <= 1
    # the trefoil tube: area ~ 2 pi r * curve length (thin-tube limit, within the polygonal error)
    t = np.linspace(0, 2 * np.pi, 20001)
    c = np.stack([np.sin(t) + 2 * np.sin(2 * t), np.cos(t) - 2 * np.cos(2 * t), -np.sin(3 * t)], 1)
    length = np.linalg.norm(np.diff(c, axis=0), axis=1).sum()
    assert meshes["trefoil"].area == pytest.approx(2 * np.pi * 0.5 * length, rel=0.03)


def test_voxel_size_option_and_too_small_voxel(tmp_path, capsys):
    from inr.cli import main
    from inr.data.pointclouds import read_cloud

    rng = np.random.default_rng(0)
    pts = rng.normal(size=(3000, 3))
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    np.save(tmp_path / "in.npy", pts + rng.normal(scale=0.01, size=pts.shape))
    assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "tiny.ply"), "--voxel-size", "1e-6"]) == 2
    err = capsys.readouterr().err
    assert "--voxel-size" in err and err.count("\n") == 1
    assert not (tmp_path / "tiny.ply").exists()
    assert main(["pointcloud", "reconstruct", str(tmp_path / "in.npy"), str(tmp_path / "out.ply"), "--voxel-size", "0.1",
                 "--factor", "10"]) == 0
    out, _ = read_cloud(tmp_path / "out.ply")
    # 8 points per occupied voxel; a unit sphere's surface at 0.1 voxels touches roughly 4 pi / 0.01 ~ 1,300 of
    # them: fewer than the 30,000 asked, so the rest are filled in
    made = int(re.search(r"\(([\d,]+) points, filled in", capsys.readouterr().out).group(1).replace(",", ""))
    assert 4000 < made < 8 * 3000 and len(out) == 30000
    assert np.abs(np.linalg.norm(out, axis=1) - 1).mean() < 0.05


def test_even_subsample_covers_the_cloud():
    from inr.pointcloud.voxel import even_subsample

    rng = np.random.default_rng(0)
    clump = np.c_[rng.uniform(0, 0.01, 900), np.zeros((900, 2))]
    line = np.c_[np.linspace(0, 1, 100), np.zeros((100, 2))]
    pts = np.concatenate([clump, line])
    out = even_subsample(pts, 20)
    assert out.shape == (20, 3) and np.abs(out[:, 1:]).max() == 0 and 0 <= out[:, 0].min() and out[:, 0].max() <= 1
    gaps = np.diff(np.sort(np.r_[0.0, out[:, 0], 1.0]))
    assert gaps.max() < 0.2  # a random 20 of these points would hold ~18 from the clump
    assert even_subsample(pts[:10], 20) is not None and len(even_subsample(pts[:10], 20)) == 10


@pytest.mark.parametrize("power", [1.0, 2.0, 3.0])  # cells of a curve, a surface, a volume
def test_even_subsample_finds_the_largest_cell_size_in_few_down_samplings(power):
    # a known count law: size s leaves floor(c / s^power) cells; the largest size leaving n is
    # (c / n)^(1 / power). The search lands below it, leaving at most 1 % more cells than n or
    # within EVEN_TOLERANCE of it, in far fewer down-samplings than a bisection (20-30)
    from inr.pointcloud.voxel import EVEN_SLACK, EVEN_TOLERANCE, _largest_cells

    for c, n in [(1e6, 1000), (3.7e4, 20000), (5e2, 7)]:
        sizes = []

        def down(size):
            sizes.append(size)
            return np.full(int(c / size ** power), size)

        found = _largest_cells(down, n, 1e3)[0]
        best = (c / n) ** (1 / power)
        cells = int(c / found ** power)
        assert found <= best and n <= cells and (cells <= n * (1 + EVEN_SLACK) or found >= best * (1 - 2 * EVEN_TOLERANCE))
        assert len(sizes) <= 12, len(sizes)
    assert _largest_cells(lambda size: np.zeros(5), 7, 1.0) is None  # never 7 cells (duplicates)


def test_a_reading_on_sampled_tiles_runs_exactly_those_tiles_of_the_whole_pass(monkeypatch):
    # the finer step reads the noise of a large share on random tiles of the pass's grid: the pass on
    # those tiles gives exactly the points the whole tiled pass gives there (the same crops), the
    # tiles hold just enough points, and the noise is read from the points well inside them
    import inr.pointcloud.reconstruct as rec
    from inr.pointcloud.heldout import terrain
    from inr.pointcloud.knn import knn
    from inr.pointcloud.network import ReconstructionConfig
    from inr.pointcloud.reconstruct import Frame, Reconstructor, to_voxel_units
    from inr.pointcloud.shapes import sample_surface

    torch.manual_seed(0)
    model = Reconstructor(ReconstructionConfig(width=8, d_model=16, layers=1, points_per_voxel=2), 40.0).eval()
    pts = torch.from_numpy(sample_surface(terrain(), 4000, np.random.default_rng(0))).float()
    frame = Frame((pts.min(0).values + pts.max(0).values) / 2, float((pts.max(0).values - pts.min(0).values).norm()) / 40)
    starts, inside = Reconstructor._sampled_tiles(pts, frame, 12, 900)
    u = to_voxel_units(pts, frame)
    lo = torch.floor(u).long().min(0).values - 1
    in_tile = torch.stack([((u >= s) & (u < s + 12)).all(1) for s in starts])  # (tiles, N)
    held = in_tile.sum(1)
    assert 1 < len(starts) and int(held.sum()) >= 900 and int(held[:-1].sum()) < 900  # just enough tiles
    assert all(bool(((s - lo) % 12 == 0).all()) for s in starts)  # on the whole pass's grid
    deep = torch.stack([((u >= s + rec.READ_EDGE) & (u < s + 12 - rec.READ_EDGE)).all(1) for s in starts]).any(0)
    assert torch.equal(inside, deep) and 0 < int(inside.sum()) < int(held.sum())
    assert Reconstructor._sampled_tiles(pts, frame, 12, 900)[1].equal(inside)  # a fixed seed
    with torch.no_grad():
        whole = model._run(pts, frame, 0.3, 12, 4, False)
        part = model._run(pts, frame, 0.3, 12, 4, False, tiles=starts)
        every = model._run(pts, frame, 0.3, 12, 4, False, tiles=Reconstructor._tile_starts(torch.floor(u).long(), lo, 12))
    assert 0 < len(part) < len(whole) and torch.equal(every, whole)
    assert float(knn(part, whole, 1)[1].max()) == 0.0  # each of its points is one of the whole pass's
    # the sampled reading: tiles holding max(READ_POINTS, READ_SHARE of the share), their pass, read
    # from the points well inside them; a share of at most twice that is read whole
    from inr.pointcloud.reconstruct import NOISE_NEIGHBOURS, plane_sigma

    monkeypatch.setattr(model, "noise_density", torch.tensor(float("inf")))  # the whole cloud is the share
    for points, share in ((900, 0.0), (100, 900 / len(pts))):  # either bound sets it
        monkeypatch.setattr(rec, "READ_POINTS", points)
        monkeypatch.setattr(rec, "READ_SHARE", share)
        with torch.no_grad():
            surface, level, _ = model._read_noise(pts, frame, at=1.0, tile=12, margin=4, sample=True)
            again = model._run(pts, frame, 0.5, 12, 4, False, tiles=starts)  # both inference: one path
        assert torch.equal(surface, again)
        assert level == pytest.approx(plane_sigma(pts[inside], surface, NOISE_NEIGHBOURS) / frame.voxel)
    for points, share in ((len(pts) // 2, 0.0), (100, 0.5)):
        monkeypatch.setattr(rec, "READ_POINTS", points)
        monkeypatch.setattr(rec, "READ_SHARE", share)
        with torch.no_grad():
            surface, level, _ = model._read_noise(pts, frame, at=1.0, tile=12, margin=4, sample=True)
            again = model._run(pts, frame, 0.5, 12, 4, False)
        assert torch.equal(surface, again)
