"""PTX point clouds (Leica's text export of terrestrial scans): registered multi-scan files read in
their common frame with each point's direction towards its scanner, the ways such files go
wrong, and the normals of a room scanned from inside."""

import numpy as np
import pytest

from inr.cli import main

from .helpers import ptx_scan

SITE = np.array([512345.0, 4123456.0, 321.0])


def test_two_registered_scans_read_in_the_common_frame_with_their_stations(tmp_path):
    # scan A: identity transform; scan B: a quarter turn about z (x -> y, y -> -x: rows 0 1 0 and
    # -1 0 0) and moved 10 m east, its points in its own frame: the reader must give the
    # hand-rotated values, A's empty cells left out, colours / 255, unit vectors to each station,
    # and each point's cell: scan, row, column (A: 4 columns of 10 rows, stored a column at a time)
    from inr.data.pointclouds import read_scan

    rng = np.random.default_rng(0)
    a, b = rng.uniform(-5, 5, size=(40, 3)), rng.uniform(-5, 5, size=(30, 3))
    ca, cb = rng.integers(0, 256, size=(40, 3)), rng.integers(0, 256, size=(30, 3))
    identity, quarter = np.eye(3), np.array([[0.0, 1, 0], [-1, 0, 0], [0, 0, 1]])
    east = SITE + [10.0, 0, 0]
    text = (ptx_scan(a, SITE, identity, SITE, ca, empty=(3, 17), columns=4) + ptx_scan(b, east, quarter, east, cb))
    (tmp_path / "site.ptx").write_text(text)
    points, colours, normals, towards, up, origins, cells = read_scan(tmp_path / "site.ptx")[:7]
    keep = np.ones(40, bool)
    keep[[3, 17]] = False
    expected = np.concatenate([a[keep] + SITE, np.stack([-b[:, 1], b[:, 0], b[:, 2]], 1) + east])
    assert normals is None and np.allclose(points, expected, atol=1e-6)
    assert np.allclose(colours, np.concatenate([ca[keep], cb]) / 255.0)
    stations = np.concatenate([np.tile(SITE, (38, 1)), np.tile(east, (30, 1))])
    assert np.array_equal(origins, stations) and up is None
    assert np.allclose(towards, (stations - expected) / np.linalg.norm(stations - expected, axis=1, keepdims=True), atol=1e-6)
    at = np.flatnonzero(keep)
    assert cells.tolist() == [[0, k % 10, k // 10] for k in at] + [[1, k, 0] for k in range(30)]


@pytest.mark.parametrize("case", ["header", "short", "width", "number"])
def test_broken_ptx_files_give_one_line_exit_2(tmp_path, case, capsys):
    good = ptx_scan(np.ones((5, 3)), np.zeros(3), np.eye(3), np.zeros(3))
    lines = good.splitlines()
    text = {"header": "\n".join(lines[:2] + lines[3:]),  # the position line missing
            "short": "\n".join(lines[:-2]),  # two points of five cut off
            "width": "\n".join(lines[:-1] + ["1 1 1 0.5 7"]),
            "number": "\n".join(["five"] + lines[1:])}[case]
    (tmp_path / "bad.ptx").write_text(text + "\n")
    assert main(["pointcloud", "denoise", str(tmp_path / "bad.ptx"), str(tmp_path / "out.ply"), "--baseline", "mls"]) == 2
    err = capsys.readouterr().err
    assert "bad.ptx" in err and err.count("\n") == 1 and "Traceback" not in err
    assert {"short": "cut short", "width": "4 or 7", "number": "not a number"}.get(case, "PTX header") in err
    assert not (tmp_path / "out.ply").exists()


def test_normals_of_a_ptx_room_face_its_scanners(tmp_path, capsys):
    # a room (a sphere of radius 4 m) scanned from inside by two stations: `denoise` writes
    # normals facing into the room, where the estimate alone turns a closed cloud outwards
    from inr.data.pointclouds import read_oriented_cloud

    rng = np.random.default_rng(3)
    room = rng.normal(size=(3000, 3))
    room *= 4.0 / np.linalg.norm(room, axis=1, keepdims=True)
    noisy = room + rng.normal(scale=0.02, size=room.shape)
    stations = SITE + np.array([[-1.0, 0, 0], [1.0, 0.5, 0]])
    half = noisy[:, 0] < 0
    text = (ptx_scan(noisy[half], stations[0], np.eye(3), SITE) + ptx_scan(noisy[~half], stations[1], np.eye(3), SITE))
    (tmp_path / "room.ptx").write_text(text)
    assert main(["pointcloud", "denoise", str(tmp_path / "room.ptx"), str(tmp_path / "clean.ply"), "--baseline", "mls"]) == 0
    assert "sides from the scanner stations" in capsys.readouterr().out
    pts, _, n = read_oriented_cloud(tmp_path / "clean.ply")
    inward = -(pts - SITE) / np.linalg.norm(pts - SITE, axis=1, keepdims=True)
    assert ((n * inward).sum(1) > 0.9).mean() > 0.98


def test_one_station_is_told_from_several():
    # the lines from the points towards their stations meet at one point only when one station
    # saw them all (then each normal takes its side point by point; from several, the whole cloud)
    from inr.data.orientation import one_station

    pts = np.random.default_rng(1).normal(size=(2000, 3)) * 5 + SITE

    def towards(stations):
        d = stations - pts
        return d / np.linalg.norm(d, axis=1, keepdims=True)

    station = SITE + [1.0, 2.0, -3.0]
    assert one_station(pts, towards(np.tile(station, (2000, 1))))
    two = np.tile(station, (2000, 1))
    two[1000:] += [0.5, 0, 0]
    assert not one_station(pts, towards(two))
