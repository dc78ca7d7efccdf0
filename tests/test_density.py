"""Output points that follow a scan's density (`--density scan`): the Morton order, the capped
chances, the systematic choice, mls_fill's pool, and the commands."""

import numpy as np
import pytest


def _slow_morton(q):
    """Bit by bit: bit b of axis a goes to bit 3b + (2 - a)."""
    code = 0
    for b in range(21):
        for a in range(3):
            code |= ((int(q[a]) >> b) & 1) << (3 * b + 2 - a)
    return code


def test_morton_codes_interleave_the_bits_of_each_axis():
    from inr.pointcloud.voxel import morton_codes

    corners = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1.0]])
    # the box's far side quantizes to 2^21 - 1 on its axis: every third bit set, from bit 2 - axis
    assert morton_codes(corners).tolist() == [0, 0x4924924924924924, 0x2492492492492492, 0x1249249249249249,
                                              (1 << 63) - 1]
    rng = np.random.default_rng(0)
    pts = np.r_[rng.uniform(-3, 5, (200, 3)), [[-3, -3, -3], [5, 5, 5]]]  # a box of side 8 from -3
    q = np.minimum((pts + 3) / 8 * (1 << 21), (1 << 21) - 1).astype(np.int64)
    assert morton_codes(pts).tolist() == [_slow_morton(r) for r in q]


def test_capped_chances_sum_to_the_count_and_stay_at_most_one():
    from inr.pointcloud.voxel import _capped_chances

    assert np.allclose(_capped_chances(np.array([1.0, 1, 1, 10]), 2), [1 / 3, 1 / 3, 1 / 3, 1])
    # capping the largest pushes the next over (5 x 2 / 8 > 1): both capped, the rest share what is left
    assert np.allclose(_capped_chances(np.array([8.0, 5, 1, 1, 1]), 3), [1, 1, 1 / 3, 1 / 3, 1 / 3])
    w = np.random.default_rng(1).pareto(1.0, 1000) + 0.01
    c = _capped_chances(w, 400)
    assert abs(c.sum() - 400) < 1e-9 and c.max() <= 1 and (c[w > w.min()] >= c[w == w.min()].max()).all()


def test_density_subsample_follows_the_scan_not_the_area():
    # two unit squares side by side, covered as evenly by the candidates (5,000 each), scanned
    # 1,000 : 100: the chosen 1,100 points split about 1,000 : 100, all distinct candidates
    from inr.pointcloud.voxel import density_subsample

    rng = np.random.default_rng(2)
    square = lambda n, x0: np.c_[rng.uniform(x0, x0 + 1, n), rng.uniform(0, 1, n), np.zeros(n)]
    like = np.r_[square(1000, 0), square(100, 2)]
    cands = np.r_[square(5000, 0), square(5000, 2)]
    out = density_subsample(cands, 1100, like)
    assert len(out) == 1100 and len(np.unique(out, axis=0)) == 1100
    assert len(np.unique(np.r_[cands, out], axis=0)) == len(cands)  # each one a candidate
    assert 960 <= (out[:, 0] < 1.5).sum() <= 1040
    assert density_subsample(cands[:50], 100, like) is not None and len(density_subsample(cands[:50], 100, like)) == 50


def test_density_subsample_leaves_no_gaps_a_random_choice_would():
    # a line scanned evenly: 100 of 10,000 candidates, chosen along the curve, lie close to every
    # 1 / 100 (a weighted random choice leaves gaps of ~4-5 / 100 here)
    from inr.pointcloud.voxel import density_subsample

    line = np.c_[np.linspace(0, 1, 10000), np.zeros((10000, 2))]
    like = np.c_[np.linspace(0, 1, 100), np.zeros((100, 2))]
    for seed in range(3):
        out = density_subsample(line, 100, like, seed)
        gaps = np.diff(np.sort(np.r_[0.0, out[:, 0], 1.0]))
        assert len(out) == 100 and gaps.max() < 0.021, gaps.max()


def test_mls_fill_like_a_scan_fills_then_follows_it():
    # 800 points spread evenly over a plane (as the network's are), its scan 3 : 1 between the
    # halves, 1,600 asked: filled in between to 3,200, then 0.70 of them on the dense half (the
    # weights alone ask 0.74: some there are capped, alone by their scan point; evenly: ~1 : 1)
    from inr.pointcloud.mls import mls_fill

    rng = np.random.default_rng(4)
    g = (np.arange(40) + 0.5) / 20  # 40 x 20 points over [0, 2] x [0, 1]
    even_points = np.c_[np.repeat(g, 20) + rng.normal(0, 0.005, 800), np.tile(g[:20], 40), np.zeros(800)]
    half = lambda n, x0: np.c_[rng.uniform(x0, x0 + 1, n), rng.uniform(0, 1, n), np.zeros(n)]
    scan = np.r_[half(300, 0), half(100, 1)]
    even, like = mls_fill(even_points, 1600), mls_fill(even_points, 1600, like=scan)
    assert len(even) == len(like) == 1600 and np.abs(like[:, 2]).max() < 1e-9
    assert 0.45 < (even[:, 0] < 1).mean() < 0.55 and 0.68 < (like[:, 0] < 1).mean() < 0.78


def test_bands_pass_each_band_its_own_scan(monkeypatch):
    from inr.pointcloud import bands

    seen = []

    def fill(pts, want, seed, like=None):
        seen.append(like)
        return pts[:want]

    monkeypatch.setattr(bands, "mls_fill", fill)
    rng = np.random.default_rng(5)
    pts = np.r_[np.c_[rng.uniform(0, 1, (2000, 2)), np.zeros(2000)], np.c_[rng.uniform(2, 12, (200, 2)), np.zeros(200)]]
    bands.denoise_by_band(pts, lambda x: x, 1.0, follow=False)
    assert seen and all(like is None for like in seen)
    seen.clear()
    bands.denoise_by_band(pts, lambda x: x, 1.0, follow=True)
    assert sum(len(like) for like in seen) == len(pts)
    assert len(np.unique(np.concatenate(seen), axis=0)) == len(pts)


def test_denoise_density_scan_keeps_the_scans_share_per_region(tmp_path, capsys):
    # a noisy sphere scanned 4 : 1 between its hemispheres: `--density scan` keeps ~4 : 1 (the
    # default spreads the output evenly: 0.57 of it on top); a bad value is refused by argparse
    from inr.cli import main
    from inr.data.pointclouds import read_cloud, write_cloud

    rng = np.random.default_rng(6)
    d = rng.normal(size=(8000, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    top = d[d[:, 2] > 0][:1600]
    bottom = d[d[:, 2] <= 0][:400]
    sphere = np.r_[top, bottom]
    write_cloud(tmp_path / "in.ply", sphere + rng.normal(scale=0.01, size=sphere.shape))
    shares = {}
    for density in ("even", "scan"):
        assert main(["pointcloud", "denoise", str(tmp_path / "in.ply"), str(tmp_path / f"{density}.ply"),
                     "--no-progress", "--density", density]) == 0
        said = capsys.readouterr().out
        assert ("as dense as the input in each region" in said) == (density == "scan")
        out = read_cloud(tmp_path / f"{density}.ply")[0]
        assert len(out) == 2000 and np.abs(np.linalg.norm(out, axis=1) - 1).mean() < 0.005  # in: 0.008
        shares[density] = (out[:, 2] > 0).mean()
    assert 0.5 < shares["even"] < 0.62 and 0.77 < shares["scan"] < 0.83, shares
    with pytest.raises(SystemExit):
        main(["pointcloud", "denoise", str(tmp_path / "in.ply"), str(tmp_path / "x.ply"), "--density", "ground"])


def test_class_shift_names_the_class_that_lost_most_of_its_share():
    from inr.data.las import class_shift

    before = np.r_[np.full(40, 2), np.full(50, 5), np.full(7, 6), np.full(3, 33)]  # 40 / 50 / 7 / 3 %
    assert class_shift(before, before[::-1]) is None
    after = np.r_[np.full(20, 2), np.full(74, 5), np.full(5, 6), np.full(1, 33)]  # 6: 5/7 = 0.71, 2: 0.5
    assert class_shift(before, after) == "ground (class 2): 40% of the input's points, 20% of the output's"
    after = np.r_[np.full(40, 2), np.full(55, 5), np.full(5, 6)]  # class 33 under 5 % of the input: not said
    assert class_shift(before, after) == "building (class 6): 7% of the input's points, 5% of the output's"
    assert class_shift(np.r_[np.full(50, 1), np.full(50, 40)], np.full(10, 1)) == \
        "class 40: 50% of the input's points, 0% of the output's"


def test_las_denoise_says_when_a_class_loses_its_share(tmp_path, capsys):
    # a sphere scanned 4 : 1 between hemispheres, the dense one ground: the even output gives
    # ground about half of its points and says so; `--density scan` keeps its share, and says nothing
    laspy = pytest.importorskip("laspy")
    from inr.cli import main

    rng = np.random.default_rng(6)
    d = rng.normal(size=(8000, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    sphere = np.r_[d[d[:, 2] < 0][:1600], d[d[:, 2] >= 0][:400]] + rng.normal(scale=0.01, size=(2000, 3))
    header = laspy.LasHeader(point_format=3, version="1.2")
    header.offsets, header.scales = np.zeros(3), np.full(3, 1e-5)
    las = laspy.LasData(header)
    las.x, las.y, las.z = sphere.T
    las.classification = np.r_[np.full(1600, 2), np.full(400, 6)]  # building: a surface (vegetation is not denoised)
    las.write(tmp_path / "in.las")
    said = {}
    for density in ("even", "scan"):
        assert main(["pointcloud", "denoise", str(tmp_path / "in.las"), str(tmp_path / f"{density}.las"),
                     "--no-progress", "--density", density]) == 0
        said[density] = capsys.readouterr().out
        ground = (np.asarray(laspy.read(tmp_path / f"{density}.las").classification) == 2).mean()
        assert (0.42 < ground < 0.62) if density == "even" else (0.75 < ground < 0.85), (density, ground)
    assert "; ground (class 2): 80% of the input's points, " in said["even"]
    assert "(spread evenly over the surface; --density scan keeps the scan's shares)" in said["even"]
    assert "ground (class 2)" not in said["scan"]
