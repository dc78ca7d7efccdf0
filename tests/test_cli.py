import json
import signal
import subprocess
import sys
import time

import imageio.v3 as iio
import pytest
import soundfile as sf
import torch

import inr.metrics as M
from inr.cli import main
from inr.tasks.optim import TrainingDiverged
from inr.tasks.run import RunOptions, train

from .helpers import smooth_image, tone

INR = [sys.executable, "-m", "inr.cli"]


def test_help_for_every_command(capsys):
    for cmd in ([], ["presets"], ["fit-image"], ["fit-audio"], ["render-image"], ["compare"]):
        with pytest.raises(SystemExit) as info:
            main(cmd + ["--help"])
        assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--time-budget" in out and "--holdout" in out and "--scale" in out and "--presets" in out


def test_presets_lists_every_preset(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    for name in ("relu", "basic", "positional", "fourier", "learnable_fourier", "shifted_basis", "pins",
                 "quantized", "hashgrid", "siren", "spder", "poly_inr"):
        assert f"  {name} " in out


def test_fit_image_render_and_even_odd(tmp_path, capsys):
    img = smooth_image(tmp_path / "img.png", size=16)
    out = tmp_path / "run"
    code = main(["fit-image", str(img), "--preset", "fourier", "--steps", "40", "--holdout", "even-odd",
                 "--out", str(out), "--no-progress", "--set", "train.eval_every=10"])
    assert code == 0
    m = json.loads((out / "metrics.json").read_text())
    for key in ("psnr", "ssim", "steps", "seconds", "preset", "params", "train_psnr", "curve"):
        assert key in m
    assert m["steps"] == 40 and m["preset"] == "fourier" and m["holdout"] == "even-odd"
    assert [h[0] for h in m["curve"]] == [0, 10, 20, 30, 40]
    rec = iio.imread(out / "reconstruction.png")
    assert rec.shape == (16, 16, 3)
    target = iio.imread(img) / 255.0
    # metrics.json's PSNR is on the odd pixel grid: recompute it from the written (8-bit) image
    odd = M.psnr(torch.from_numpy(rec[1::2, 1::2] / 255.0), torch.from_numpy(target[1::2, 1::2]))
    assert odd == pytest.approx(m["psnr"], abs=0.3)
    for name in ("error.png", "curve.png", "config.yaml", "checkpoints/last.ckpt"):
        assert (out / name).is_file(), name
    assert main(["render-image", str(out), "--scale", "2.5", "--out", str(tmp_path / "big.png")]) == 0
    assert iio.imread(tmp_path / "big.png").shape == (40, 40, 3)
    assert "PSNR" in capsys.readouterr().out


def test_fit_audio_stereo(tmp_path):
    wav = tone(tmp_path / "a.wav", seconds=0.1, rate=8000, channels=2)
    out = tmp_path / "arun"
    assert main(["fit-audio", str(wav), "--preset", "positional", "--steps", "30", "--out", str(out), "--no-progress"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert {"psnr", "snr_db", "steps", "seconds", "params"} <= set(m)
    data, rate = sf.read(out / "reconstruction.wav", always_2d=True)
    assert data.shape == (800, 2) and rate == 8000
    assert (out / "audio.png").is_file() and (out / "curve.png").is_file()


def test_compare_writes_table_json_and_plot(tmp_path):
    img = smooth_image(tmp_path / "c.png", size=12)
    out = tmp_path / "cmp"
    assert main(["compare", str(img), "--presets", "relu,basic", "--steps", "10", "--out", str(out), "--no-progress"]) == 0
    data = json.loads((out / "compare.json").read_text())
    assert [r["preset"] for r in data["results"]] == ["relu", "basic"]
    for r in data["results"]:
        assert {"psnr", "ssim", "steps", "seconds", "params"} <= set(r) and r["steps"] == 10
    table = (out / "compare.md").read_text()
    assert "| preset |" in table and "| relu |" in table
    assert (out / "compare.png").is_file()


def _bad_file(tmp_path, case):
    p = tmp_path / f"{case}.png"
    if case == "empty":
        p.write_bytes(b"")
    elif case == "text":
        p.write_text("hello")
    elif case == "truncated":
        smooth_image(p, 16)
        p.write_bytes(p.read_bytes()[:60])
    elif case == "zero-size":
        # a PNG whose header says 0 x 0 pixels
        import struct
        import zlib

        ihdr = struct.pack(">IIBBBBB", 0, 0, 8, 2, 0, 0, 0)
        chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
        p.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))
    return p


@pytest.mark.parametrize("case", ["missing", "empty", "text", "truncated", "zero-size"])
def test_bad_image_one_line_exit_2_nothing_written(tmp_path, capsys, case):
    p = _bad_file(tmp_path, case)
    out = tmp_path / "out"
    assert main(["fit-image", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(p) in err[0] and err[0].startswith("inr: error:")
    assert not out.exists()


def test_bad_input_in_a_real_process_has_no_traceback(tmp_path):
    p = _bad_file(tmp_path, "text")
    r = subprocess.run(INR + ["fit-audio", str(p.with_suffix(".wav")), "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run(INR + ["fit-image", "--preset", "nope", "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown image preset 'nope'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_bad_options_exit_2(tmp_path, capsys):
    img = smooth_image(tmp_path / "i.png", 8)
    assert main(["fit-image", str(img), "--set", "train.nope=1", "--out", str(tmp_path / "o")]) == 2
    assert main(["fit-image", str(img), "--set", "novalue", "--out", str(tmp_path / "o")]) == 2
    assert main(["render-image", str(tmp_path), "--out", str(tmp_path / "x.png")]) == 2
    with pytest.raises(SystemExit) as info:
        main(["fit-image", str(img), "--steps", "0"])
    assert info.value.code == 2
    assert not (tmp_path / "o").exists()


def test_existing_run_is_not_overwritten_silently(tmp_path):
    img = smooth_image(tmp_path / "i.png", 8)
    args = ["fit-image", str(img), "--preset", "relu", "--steps", "2", "--out", str(tmp_path / "r"), "--no-progress"]
    assert main(args) == 0
    assert main(args) == 2
    assert main(args + ["--overwrite"]) == 0


def test_kill_and_resume_continues_from_checkpoint(tmp_path):
    img = smooth_image(tmp_path / "k.png", 16)
    out = tmp_path / "kr"
    cmd = INR + ["fit-image", str(img), "--preset", "relu", "--steps", "100000", "--out", str(out), "--no-progress",
                 "--set", "train.checkpoint_every=20", "--set", "train.eval_every=20"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = out / "checkpoints" / "last.ckpt"
    deadline = time.time() + 120
    while time.time() < deadline and not ckpt.exists():
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ckpt.exists(), "no checkpoint was written before the kill"
    from inr.tasks.status import run_summary

    assert run_summary(out)["status"] == "killed"  # status.json says running; its process is gone
    saved = torch.load(ckpt, weights_only=True)
    killed_at = saved["global_step"]
    assert killed_at >= 20
    assert main(["fit-image", "--resume", str(out), "--steps", str(killed_at + 20), "--no-progress"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["steps"] == killed_at + 20
    steps = [h[0] for h in m["curve"]]
    assert steps[0] == 0 and steps[-1] == killed_at + 20 and steps == sorted(steps)
    assert m["seconds"] >= saved["callbacks"][next(k for k in saved["callbacks"] if "RunMonitor" in k)]["seconds"]


class _Poison:
    """A callback that turns the parameters into NaN after a given step."""

    def __new__(cls, at_step):
        import lightning as L

        class Poison(L.Callback):
            def on_train_batch_end(self, trainer, module, *args):
                if trainer.global_step == at_step:
                    with torch.no_grad():
                        for p in module.parameters():
                            p.fill_(float("nan"))

        return Poison()


def test_nan_stops_training_and_keeps_last_good_checkpoint(tmp_path):
    img = smooth_image(tmp_path / "n.png", 8)
    opts = RunOptions(task="image", input=str(img), preset="relu", out=str(tmp_path / "nan"), steps=50,
                      progress=False, overrides={"train.checkpoint_every": 5})
    with pytest.raises(TrainingDiverged, match="last good checkpoint"):
        train(opts, callbacks=[_Poison(12)])
    ckpt = torch.load(tmp_path / "nan" / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 10
    assert all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())
    assert not (tmp_path / "nan" / "metrics.json").exists()
    status = json.loads((tmp_path / "nan" / "status.json").read_text())
    assert status["status"] == "diverged" and status["step"] >= 12


def test_bf16_precision_option(tmp_path):
    img = smooth_image(tmp_path / "b.png", 16)
    out = tmp_path / "bf"
    assert main(["fit-image", str(img), "--preset", "fourier", "--steps", "60", "--precision", "bf16", "--out", str(out),
                 "--no-progress", "--set", "train.compile=false"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["precision"] == "bf16"
    assert m["psnr"] > m["curve"][0][2] + 10  # it trains: the loss falls >= 10x


@pytest.mark.parametrize("name, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_stops_with_a_checkpoint_and_resume_hint(tmp_path, name, code):
    # SIGTERM (`kill PID`) and SIGINT (Ctrl-C; Lightning 2.6 alone exits with status 1 and no checkpoint)
    img = smooth_image(tmp_path / "t.png", 16)
    out = tmp_path / "term"
    cmd = INR + ["fit-image", str(img), "--preset", "relu", "--steps", "100000", "--out", str(out), "--no-progress",
                 "--set", "train.checkpoint_every=1000000", "--set", "train.compile=false"]
    # SIGINT as a terminal's Ctrl-C delivers it: a job started in the background by a non-interactive
    # shell (as CI may run the tests) inherits SIGINT ignored, and Python then never sees it
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (out / "logs").exists():
            time.sleep(0.2)
        time.sleep(3.0)  # training is under way
        proc.send_signal(getattr(signal, name))
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # it did not stop: not left running (100,000 steps) for the tests after
            proc.kill()
            proc.wait()
    assert proc.returncode == code  # 128 + the signal's number, the shell convention
    assert f"resume with --resume {out}" in err and "Traceback" not in err
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] > 0  # written at the stop, not by the (never reached) schedule
    assert not (out / "metrics.json").exists()
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "stopped" and status["signal"] == name and status["step"] == ckpt["global_step"]
    assert main(["runs", str(tmp_path)]) == 0
