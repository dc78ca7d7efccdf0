"""Point clouds as text (.xyz .txt .asc .csv .pts), as scanners and tools write them."""

import numpy as np
import pytest

from inr.data.pointclouds import read_cloud, read_oriented_cloud, write_cloud
from inr.errors import InputError

PTS = np.array([[1.5, -2.0, 3.25], [0.0, 1e-3, -7.0], [512345.125, 4123456.5, 321.0]])
ROWS = [" ".join(f"{float(v)!r}" for v in p) for p in PTS]


@pytest.mark.parametrize("layout", ["spaces", "tabs and rgb", "commas with header", "semicolons", "trailing commas",
                                    "comments and blank lines", "count line first"])
def test_xyz_files_as_scanners_and_tools_write_them(tmp_path, layout):
    text = {
        "spaces": "\n".join(ROWS),
        "tabs and rgb": "\n".join("\t".join(f"{float(v)!r}" for v in p) + "\t200\t10\t0" for p in PTS),
        "commas with header": "X,Y,Z,Intensity\n" + "\n".join(", ".join(f"{float(v)!r}" for v in p) + ", 0.5" for p in PTS),
        "semicolons": "\n".join(";".join(f"{float(v)!r}" for v in p) for p in PTS),
        "trailing commas": "\n".join(",".join(f"{float(v)!r}" for v in p) + "," for p in PTS),
        "comments and blank lines": "# scan 7\n\n" + ROWS[0] + "\n# moved\n" + "\n".join(ROWS[1:]) + "\n\n",
        "count line first": "3\n" + "\n".join(ROWS),
    }[layout]
    path = tmp_path / "scan.xyz"
    path.write_text(text + "\n")
    back, colours = read_cloud(path)
    np.testing.assert_array_equal(back, PTS)  # float64, to the bit
    assert colours is None  # unnamed columns after x y z could be anything


@pytest.mark.parametrize("suffix", [".txt", ".asc", ".xyz"])
def test_a_cloudcompare_header_names_the_colour_and_normal_columns(tmp_path, suffix):
    normals = np.array([[0.0, 0.0, 1.0], [0.6, 0.8, 0.0], [0.0, -1.0, 0.0]])
    rgb = np.array([[255, 0, 10], [1, 2, 3], [128, 64, 32]])
    lines = [f"{r} {c[0]} {c[1]} {c[2]} {n[0]} {n[1]} {n[2]}" for r, c, n in zip(ROWS, rgb, normals)]
    path = tmp_path / f"scan{suffix}"
    path.write_text("//X Y Z R G B Nx Ny Nz\n" + "\n".join(lines) + "\n")
    back, colours, back_normals = read_oriented_cloud(path)
    np.testing.assert_array_equal(back, PTS)
    np.testing.assert_allclose(colours, rgb / 255.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(back_normals, normals, rtol=0, atol=1e-15)


def test_csv_columns_are_found_by_name(tmp_path):
    # an export with an id column first and the colours spelled out, as spreadsheets and GIS tools write
    path = tmp_path / "scan.csv"
    rows = [f"{i},{float(p[0])!r},{float(p[1])!r},{float(p[2])!r},{10 * i},{20 * i},{30 * i}" for i, p in enumerate(PTS)]
    path.write_bytes(("\ufeff" + '"id","x","y","z","red","green","blue"\n' + "\n".join(rows) + "\n").encode())  # Excel's BOM
    back, colours = read_cloud(path)
    np.testing.assert_array_equal(back, PTS)
    np.testing.assert_allclose(colours, np.array([[0, 0, 0], [10, 20, 30], [20, 40, 60]]) / 255.0, atol=1e-15)


def test_leica_pts_with_two_scans(tmp_path):
    # count line, then x y z intensity r g b, once per scan
    rgb = np.array([[1, 2, 3], [40, 50, 60], [250, 251, 252]])
    lines = [f"{r} -1024 {c[0]} {c[1]} {c[2]}" for r, c in zip(ROWS, rgb)]
    path = tmp_path / "site.pts"
    path.write_text("2\n" + "\n".join(lines[:2]) + "\n1\n" + lines[2] + "\n")
    back, colours = read_cloud(path)
    np.testing.assert_array_equal(back, PTS)
    np.testing.assert_allclose(colours, rgb / 255.0, atol=1e-15)
    path.write_text("5\n" + "\n".join(lines) + "\n")  # cut short: 3 of the 5 points it counts
    with pytest.raises(InputError, match="holds 3 points where its count lines declare 5"):
        read_cloud(path)
    path.write_text("3\n" + "\n".join(r + " 7" for r in ROWS) + "\n")  # x y z intensity: no colours
    assert read_cloud(path)[1] is None


@pytest.mark.parametrize("suffix", [".txt", ".asc", ".csv", ".xyz"])
def test_text_round_trip_far_from_the_origin(tmp_path, suffix):
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(200, 3)) + PTS[2]
    colours = rng.integers(0, 256, size=(200, 3)) / 255.0
    normals = rng.normal(size=(200, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    path = tmp_path / f"c{suffix}"
    write_cloud(path, pts, colours, normals)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    back, back_colours, back_normals = read_oriented_cloud(path)
    np.testing.assert_allclose(back, pts, rtol=1e-14, atol=0)  # 15 significant digits
    if suffix == ".xyz":  # x y z only
        assert back_colours is None and back_normals is None
    else:
        np.testing.assert_allclose(back_colours, colours, rtol=0, atol=1e-15)
        np.testing.assert_allclose(back_normals, normals, rtol=0, atol=1e-7)
    write_cloud(path, pts)
    back, back_colours, back_normals = read_oriented_cloud(path)
    assert back_colours is None and back_normals is None


def test_text_files_that_are_not_clouds_say_why(tmp_path):
    for text, words in (("1 2\n3 4\n", "2 numbers per line"), ("1 2 3\n4 5 x\n", "could not convert"),
                        ("x y z\nno numbers here\n", "is not an XYZ point cloud")):
        (tmp_path / "c.xyz").write_text(text)
        with pytest.raises(InputError, match=words):
            read_cloud(tmp_path / "c.xyz")
    (tmp_path / "b.txt").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InputError, match="is not a TXT point cloud \\(not text\\)"):
        read_cloud(tmp_path / "b.txt")
    for name, text in (("e.xyz", "# nothing yet\n"), ("h.csv", "x,y,z\n"), ("n.pts", "0\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(InputError, match="holds no points"):
            read_cloud(tmp_path / name)
    with pytest.raises(InputError, match="unsupported point-cloud format .pts to write"):
        write_cloud(tmp_path / "out.pts", PTS)
    assert not (tmp_path / "out.pts").exists()
