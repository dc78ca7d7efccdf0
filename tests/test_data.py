import numpy as np
import pytest
import soundfile as sf
import torch
import imageio.v3 as iio

from inr import InputError
from inr.data import read_audio, read_image
from inr.data.signal import grid_coords


def test_grid_coords_cell_centres():
    c = grid_coords((2, 4))
    assert c.shape == (8, 2)
    assert torch.allclose(c[:4, 0], torch.full((4,), -0.5))
    assert torch.allclose(c[:4, 1], torch.tensor([-0.75, -0.25, 0.25, 0.75]))


def test_image_kinds(tmp_path):
    rgb = (np.arange(4 * 5 * 3) % 256).astype(np.uint8).reshape(4, 5, 3)
    iio.imwrite(tmp_path / "rgb.png", rgb)
    img = read_image(tmp_path / "rgb.png")
    assert img.values.shape == (4, 5, 3) and torch.allclose(img.values, torch.from_numpy(rgb / 255.0).float())
    gray16 = np.array([[0, 65535], [32768, 1000]], dtype=np.uint16)
    iio.imwrite(tmp_path / "g16.png", gray16)
    g = read_image(tmp_path / "g16.png")
    assert g.values.shape == (2, 2, 1) and g.bit_depth == 16
    assert g.values[0, 1, 0] == 1.0 and g.values[1, 0, 0] == pytest.approx(32768 / 65535)
    rgba = np.zeros((2, 2, 4), np.uint8)
    rgba[..., 0] = 255
    rgba[0, 0, 3] = 255  # one opaque red pixel, the rest transparent
    iio.imwrite(tmp_path / "rgba.png", rgba)
    assert read_image(tmp_path / "rgba.png").values.shape == (2, 2, 4)
    comp = read_image(tmp_path / "rgba.png", alpha="composite").values
    assert comp.shape == (2, 2, 3)
    assert torch.allclose(comp[0, 0], torch.tensor([1.0, 0.0, 0.0])) and torch.allclose(comp[1, 1], torch.ones(3))
    flt = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    iio.imwrite(tmp_path / "f.tiff", flt)
    f = read_image(tmp_path / "f.tiff")
    assert f.values.min() == 0.0 and f.values.max() == 1.0


def _png_bytes(tmp_path):
    iio.imwrite(tmp_path / "ok.png", np.zeros((8, 8, 3), np.uint8))
    return (tmp_path / "ok.png").read_bytes()


@pytest.mark.parametrize("case", ["missing", "empty", "text", "truncated", "directory"])
def test_bad_images_raise_input_error(tmp_path, case):
    p = tmp_path / "bad.png"
    if case == "empty":
        p.write_bytes(b"")
    elif case == "text":
        p.write_text("not an image\n")
    elif case == "truncated":
        p.write_bytes(_png_bytes(tmp_path)[:40])
    elif case == "directory":
        p.mkdir()
    with pytest.raises(InputError) as info:
        read_image(p)
    assert str(p) in str(info.value)


def test_audio_stereo_and_scale(tmp_path):
    t = np.arange(800) / 8000
    stereo = np.stack([0.5 * np.sin(2 * np.pi * 440 * t), 0.25 * np.sin(2 * np.pi * 220 * t)], -1)
    sf.write(tmp_path / "s.flac", stereo, 8000)
    a = read_audio(tmp_path / "s.flac")
    assert a.values.shape == (800, 2) and a.sample_rate == 8000
    assert a.values.abs().max() == pytest.approx(1.0, abs=1e-6)
    assert a.scale == pytest.approx(0.5, abs=1e-3)


@pytest.mark.parametrize("case", ["missing", "empty", "text", "silent"])
def test_bad_audio_raises_input_error(tmp_path, case):
    p = tmp_path / "bad.wav"
    if case == "empty":
        p.write_bytes(b"")
    elif case == "text":
        p.write_text("RIFF but not really\n")
    elif case == "silent":
        sf.write(p, np.zeros(100), 8000)
    with pytest.raises(InputError) as info:
        read_audio(p)
    assert str(p) in str(info.value)
