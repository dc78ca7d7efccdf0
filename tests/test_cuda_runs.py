"""Runs on a CUDA device end to end (skipped without CUDA; the GPU check runs them): the module
stays on the GPU after training (Lightning's teardown moves it to the CPU), so evaluation,
outputs and exports compute there."""

import json

import pytest
import torch

from inr.cli import main

from .conftest import requires_cuda
from .helpers import smooth_image

pytestmark = requires_cuda


@pytest.mark.parametrize("preset", ["hashgrid", "siren"])
def test_signal_fit_evaluates_on_the_gpu(tmp_path, preset):
    img = smooth_image(tmp_path / "a.png", 32)
    out = tmp_path / "run"
    assert main(["fit-image", str(img), "--preset", preset, "--steps", "5", "--device", "cuda", "--out", str(out),
                 "--no-progress"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["device"].startswith("cuda") and m["psnr"] > 0


def test_nerf_train_eval_and_export_on_the_gpu(tmp_path):
    out = tmp_path / "nerf"
    assert main(["nerf", "train", "--downscale", "4", "--steps", "20", "--device", "cuda", "--out", str(out),
                 "--no-progress"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["device"].startswith("cuda") and m["test_psnr"] > 8
    assert main(["nerf", "eval", str(out), "--device", "cuda"]) == 0
    assert json.loads((out / "eval.json").read_text())["test_psnr"] == pytest.approx(m["test_psnr"], abs=0.05)


@pytest.mark.parametrize("preset", ["hashgrid_sdf", "siren_sdf"])
def test_sdf_fit_and_extract_mesh_on_the_gpu(tmp_path, preset):
    import numpy as np

    rng = np.random.default_rng(0)
    p = rng.normal(size=(4000, 3))
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    np.save(tmp_path / "sphere.npy", np.concatenate([p, np.zeros_like(p), p], 1))  # x y z, r g b, normals
    out = tmp_path / "run"
    assert main(["fit-sdf", str(tmp_path / "sphere.npy"), "--preset", preset, "--steps", "100", "--device", "cuda",
                 "--out", str(out), "--no-progress", "--set", "train.mesh_resolution=64"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["device"].startswith("cuda") and m["normals"] == "file" and m["mesh_faces"] > 0
    assert main(["extract-mesh", str(out), "--resolution", "48", "--device", "cuda", "--no-progress"]) == 0
