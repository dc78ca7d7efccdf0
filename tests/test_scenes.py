import json
import math

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from inr import InputError
from inr.data.scenes import load_scene


def _img(path, h=8, w=8, c=4, value=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, np.full((h, w, c), value, np.uint8))


def _pose(tz=4.0):
    m = np.eye(4)
    m[2, 3] = tz
    return m.tolist()


def blender_scene(root, n_train=2, angle=0.6):
    for split, n in (("train", n_train), ("test", 1)):
        frames = []
        for k in range(n):
            _img(root / split / f"r_{k}.png", value=10 * k)
            frames.append({"file_path": f"./{split}/r_{k}", "transform_matrix": _pose(4.0 + k)})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": angle, "frames": frames}))
    return root


def test_blender_scene_loads_and_downscales(tmp_path):
    s = load_scene(blender_scene(tmp_path / "b"))
    assert s.format == "blender" and len(s.splits["train"]) == 2 and len(s.splits["test"]) == 1
    tr = s.splits["train"]
    assert tr.images.shape == (2, 8, 8, 4)
    focal = 0.5 * 8 / math.tan(0.3)
    assert torch.allclose(tr.intrinsics[0], torch.tensor([focal, focal, 4.0, 4.0]))
    assert tr.c2w[1, 2, 3] == 5.0
    assert torch.equal(s.aabb, torch.tensor([-1.5, -1.5, -1.5, 1.5, 1.5, 1.5]))
    assert s.splits["val"] is s.splits["test"]
    half = load_scene(tmp_path / "b", downscale=2).splits["train"]
    assert half.images.shape == (2, 4, 4, 4) and torch.allclose(half.intrinsics[0], tr.intrinsics[0] / 2)


def _break(root, case):
    data = json.loads((root / "transforms_train.json").read_text())
    if case == "missing image":
        (root / "train" / "r_1.png").unlink()
        return "frame 1: image './train/r_1' not found"
    if case == "missing key":
        del data["frames"][0]["transform_matrix"]
        msg = "frame 0: missing key 'transform_matrix'"
    elif case == "nan":
        data["frames"][1]["transform_matrix"][0][3] = float("nan")
        msg = "frame 1: transform_matrix has NaN"
    elif case == "non-rigid":
        data["frames"][0]["transform_matrix"][0][0] = 2.0
        msg = "frame 0: transform_matrix is not rigid"
    elif case == "size":
        _img(root / "train" / "r_1.png", h=6)
        return "frame 1: image is 8x6x4, the first frame is 8x8x4"
    (root / "transforms_train.json").write_text(json.dumps(data).replace("NaN", "NaN"))
    return msg


@pytest.mark.parametrize("case", ["missing image", "missing key", "nan", "non-rigid", "size"])
def test_blender_bad_scenes_name_file_and_frame(tmp_path, case):
    root = blender_scene(tmp_path / "b")
    msg = _break(root, case)
    with pytest.raises(InputError) as info:
        load_scene(root)
    assert msg in str(info.value)


def test_not_a_scene_folder(tmp_path):
    with pytest.raises(InputError, match="not a scene folder"):
        load_scene(tmp_path)
    with pytest.raises(InputError, match="no such scene folder"):
        load_scene(tmp_path / "nope")


def test_transforms_json_intrinsics_splits_and_box(tmp_path):
    root = tmp_path / "t"
    frames = []
    for k in range(9):
        _img(root / "images" / f"{k}.png", h=10, w=20, c=3)
        frames.append({"file_path": f"images/{k}.png", "transform_matrix": _pose()})
    frames[3]["fl_x"] = 30.0  # a per-frame value wins over the file's
    data = {"fl_x": 25.0, "fl_y": 26.0, "cx": 9.0, "cy": 4.0, "w": 40, "h": 20, "aabb_scale": 4, "frames": frames}
    (root / "transforms.json").write_text(json.dumps(data))
    s = load_scene(root)
    assert s.format == "transforms"
    assert len(s.splits["test"]) == 2 and len(s.splits["train"]) == 7  # frames 0 and 8 held out
    # images are 20x10 copies of 40x20 originals: intrinsics scale by 1/2
    assert torch.allclose(s.splits["train"].intrinsics[0], torch.tensor([12.5, 13.0, 4.5, 2.0]))
    assert torch.allclose(s.splits["train"].intrinsics[2], torch.tensor([15.0, 13.0, 4.5, 2.0]))
    assert s.aabb[3] == 4.0 and s.extra["poses"] == "normalise"  # aabb_scale x [-1, 1]^3 around normalised cameras
    assert load_scene(root, poses="keep").aabb[3] == 6.0  # as given: instant-ngp's 1.5 x aabb_scale
    # nerfstudio's split lists win over the every-8th rule
    data.update(train_filenames=[f"images/{k}.png" for k in (1, 2, 3)], test_filenames=["./images/5.png"])
    (root / "transforms.json").write_text(json.dumps(data))
    s = load_scene(root)
    assert s.splits["train"].names == ["images/1.png", "images/2.png", "images/3.png"] and s.splits["test"].names == ["images/5.png"]
    data["test_filenames"] = ["images/50.png"]
    (root / "transforms.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="test_filenames names 'images/50.png', which no frame has"):
        load_scene(root)
    with pytest.raises(InputError, match="--poses must be one of"):
        load_scene(root, poses="tilt")


def test_llff_axes_focal_and_box(tmp_path):
    root = tmp_path / "l"
    rows = []
    for k in range(3):
        _img(root / "images" / f"img{k}.jpg", h=8, w=12, c=3, value=100)
        # OpenGL identity rotation in LLFF's (down, right, back) columns, camera at z = k
        pose = np.array([[0, 1, 0, 0, 16], [-1, 0, 0, 0, 24], [0, 0, 1, k, 30]], dtype=np.float64)
        rows.append(np.concatenate([pose.ravel(), [1.0, 5.0]]))
    np.save(root / "poses_bounds.npy", np.stack(rows))
    s = load_scene(root)
    assert s.format == "llff"
    c2w = s.splits["train"].c2w[0]
    assert torch.allclose(c2w[:3, :3], torch.eye(3)) and c2w[2, 3] == 1.0  # frame 0 is the test view
    # hwf says w = 24, focal 30; the images are 12 wide: focal 15
    assert s.splits["train"].intrinsics[0, 0] == pytest.approx(15.0)
    # the box holds every frustum between near 1 and far 5: z from -5 (camera 0 looking down -z) to 1
    assert s.aabb[2] == pytest.approx(-5.0) and s.aabb[5] == pytest.approx(1.0)
    (root / "images" / "img2.jpg").unlink()
    with pytest.raises(InputError, match="holds 2 images but poses_bounds.npy has 3 poses"):
        load_scene(root)
