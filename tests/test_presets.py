"""Every bundled preset overfits a tiny signal: its test PSNR rises by >= 10 dB (MSE falls >= 10x)."""

import json

import pytest

from inr.presets import available_presets, load_preset
from inr.tasks.run import RunOptions, train

from .helpers import smooth_image, tone

GAIN_DB = 10.0  # the loss falls by a factor >= 10
STEPS = 200


@pytest.fixture(scope="module")
def signals(tmp_path_factory):
    d = tmp_path_factory.mktemp("signals")
    return {"image": smooth_image(d / "i.png", 16), "audio": tone(d / "a.wav", 0.05, 8000)}


@pytest.mark.parametrize("kind,preset", [(k, p) for k in ("image", "audio") for p in available_presets(k)])
def test_preset_overfits_tiny_signal(kind, preset, signals, tmp_path):
    # the preset as shipped (torch.compile included), only the evaluation interval changed
    opts = RunOptions(task=kind, input=str(signals[kind]), preset=preset, out=str(tmp_path / "run"), steps=STEPS,
                      progress=False, overrides={"train.eval_every": STEPS})
    r = train(opts)
    start, end = r["curve"][0][2], r["psnr"]
    assert end - start >= GAIN_DB, f"{kind}/{preset}: {start:.1f} -> {end:.1f} dB"


def test_default_preset_is_compiled_hashgrid(signals, tmp_path):
    assert load_preset("hashgrid", "image").train.compile
    # (the decay spans the run's 60 steps: kept flat here, this checks the compiled fit, not the schedule)
    opts = RunOptions(task="image", input=str(signals["image"]), out=str(tmp_path / "c"), steps=60, progress=False,
                      overrides={"train.lr_final_factor": 1.0})
    r = train(opts)
    m = json.loads((tmp_path / "c" / "metrics.json").read_text())
    assert m["compile"] is True and m["preset"] == "hashgrid"
    assert r["psnr"] > 35.0


def test_eager_and_compiled_fits_agree(signals, tmp_path):
    runs = {}
    for compile_ in (False, True):
        opts = RunOptions(task="image", input=str(signals["image"]), preset="siren", out=str(tmp_path / str(compile_)),
                          steps=20, progress=False, overrides={"train.compile": compile_})
        runs[compile_] = train(opts)["psnr"]
    # same seed, same maths: only floating-point reordering differs
    assert abs(runs[False] - runs[True]) < 0.05


def test_preset_files_validate():
    for kind in ("image", "audio", "video", "sdf"):
        for name in available_presets(kind):
            p = load_preset(name, kind)
            assert p.description and p.task == kind
