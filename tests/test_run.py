"""The run lifecycle through the command line: resume rules, video, the writers' checks,
multi-process training of another task than NeRF."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from inr.cli import main

from .helpers import smooth_image, tone

TINY = ["--set", "field.encoding_options.log2_table=10", "--set", "field.encoding_options.n_levels=4",
        "--set", "train.compile=false", "--no-progress"]


def _err_line(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_set_on_resume_is_applied_or_refused(tmp_path, capsys):
    img = smooth_image(tmp_path / "a.png", 16)
    out = tmp_path / "run"
    assert main(["fit-image", str(img), "--steps", "4", "--out", str(out), *TINY]) == 0
    # lr changes: the restored optimizer continues from the new base rate
    assert main(["fit-image", "--resume", str(out), "--steps", "6", "--set", "train.lr=0.5", "--no-progress"]) == 0
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    group = ckpt["optimizer_states"][0]["param_groups"][0]
    assert group["initial_lr"] == 0.5 and ckpt["lr_schedulers"][0]["base_lrs"] == [0.5]
    # the decay spans the run as given (--steps 6): at its end, lr * lr_final_factor (0.03 in the preset)
    assert group["lr"] == pytest.approx(0.5 * 0.03, rel=1e-6) and ckpt["global_step"] == 6
    capsys.readouterr()
    # what cannot change is refused with one line, exit 2, and the run is untouched
    assert main(["fit-image", "--resume", str(out), "--set", "field.network=siren"]) == 2
    assert "cannot change when resuming" in _err_line(capsys)
    other = smooth_image(tmp_path / "b.png", 16)
    assert main(["fit-image", str(other), "--resume", str(out)]) == 2
    assert "is not the input of the run" in _err_line(capsys)
    assert main(["fit-image", "--resume", str(out), "--holdout", "even-odd"]) == 2
    assert "a resumed run keeps it" in _err_line(capsys)
    assert main(["fit-audio", "--resume", str(out)]) == 2
    assert "not a audio run folder" in _err_line(capsys)
    assert json.loads((out / "metrics.json").read_text())["steps"] == 6


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_cuda_device_without_cuda_is_one_line_before_anything_is_written(tmp_path, capsys):
    img = smooth_image(tmp_path / "a.png", 8)
    assert main(["fit-image", str(img), "--device", "cuda", "--out", str(tmp_path / "r"), *TINY]) == 2
    assert "no CUDA device" in _err_line(capsys) and not (tmp_path / "r").exists()


def test_device_option_is_checked_before_anything_is_written(tmp_path, capsys):
    img = smooth_image(tmp_path / "a.png", 8)
    assert main(["fit-image", str(img), "--device", "tpu", "--out", str(tmp_path / "r"), *TINY]) == 2
    assert "--device must be" in _err_line(capsys) and not (tmp_path / "r").exists()
    assert main(["fit-image", str(img), "--device", "cpu", "--steps", "2", "--out", str(tmp_path / "r"), *TINY]) == 0
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["device"] == "cpu"


def _clip(path, frames=8, h=13, w=17):
    import imageio.v3 as iio

    t = np.arange(frames)[:, None, None]
    y, x = np.mgrid[0:h, 0:w]
    f = np.stack([0.5 + 0.5 * np.sin(x / 4 + t / 3), 0.5 + 0.5 * np.cos(y / 3 - t / 4), (x + y) / (h + w) + 0 * t], -1)
    iio.imwrite(path, (f * 255).astype(np.uint8), duration=100, loop=0)
    return path


def test_fit_video_and_render_video(tmp_path):
    import imageio.v3 as iio

    clip = _clip(tmp_path / "c.gif")
    out = tmp_path / "v"
    assert main(["fit-video", str(clip), "--steps", "150", "--out", str(out), *TINY, "--set", "train.lr=1e-2",
                 "--set", "train.lr_final_factor=1.0"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["shape"] == [8, 13, 17, 3] and len(m["frame_psnr"]) == 8 and m["fps"] == pytest.approx(10.0)
    assert m["psnr"] > 25 and abs(np.mean([10 ** (-p / 10) for p in m["frame_psnr"]]) - 10 ** (-m["psnr"] / 10)) < 1e-3
    video = iio.imread(out / "reconstruction.mp4", index=None, plugin="FFMPEG")
    assert video.shape == (8, 14, 18, 3)  # H.264 needs even sizes: padded by one row and column
    assert main(["render-video", str(out), "--scale", "2", "--fps", "20", "--out", str(tmp_path / "up.gif")]) == 0
    assert iio.imread(tmp_path / "up.gif", index=None).shape[:3] == (16, 26, 34)
    # slow motion at the fitted size: its first and last frames sit at the source's first and
    # last frame times, so they are the reconstruction's frames (up to video compression)
    assert main(["render-video", str(out), "--fps", "20", "--out", str(tmp_path / "slow.mp4")]) == 0
    slow = iio.imread(tmp_path / "slow.mp4", index=None, plugin="FFMPEG").astype(float)
    assert slow.shape == (16, 14, 18, 3)
    # (H.264 on 14x18 frames loses ~5-10 levels; another frame of this clip differs by far more)
    assert np.abs(slow[0] - video[0]).mean() < 12 and np.abs(slow[-1] - video[-1]).mean() < 12
    assert np.abs(slow[0] - video[-1]).mean() > 2 * np.abs(slow[0] - video[0]).mean()


def test_fit_video_bad_input_exit_2(tmp_path, capsys):
    (tmp_path / "frames").mkdir()
    assert main(["fit-video", str(tmp_path / "frames")]) == 2
    assert "holds no frames" in _err_line(capsys)
    (tmp_path / "x.mp4").write_bytes(b"not a video")
    assert main(["fit-video", str(tmp_path / "x.mp4")]) == 2
    assert "cannot be read as a video" in _err_line(capsys)


def test_truncated_wav_is_refused(tmp_path, capsys):
    wav = tone(tmp_path / "t.wav", seconds=0.2)
    data = wav.read_bytes()
    (tmp_path / "cut.wav").write_bytes(data[: len(data) // 2])
    assert main(["fit-audio", str(tmp_path / "cut.wav"), "--out", str(tmp_path / "r")]) == 2
    assert "is truncated" in _err_line(capsys) and not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("task", ["image", "audio", "video"])
def test_signal_fits_with_ddp_on_two_cpu_processes(tmp_path, task):
    signal = {"image": lambda: smooth_image(tmp_path / "a.png", 16), "audio": lambda: tone(tmp_path / "t.wav"),
              "video": lambda: _clip(tmp_path / "c.gif", frames=4, h=8, w=8)}[task]()
    out = tmp_path / "run"
    length = ["--steps", "4"] if task != "audio" else ["--steps", "400", "--time-budget", "2"]  # clocks agreed per step
    cmd = [sys.executable, "-m", "inr", f"fit-{task}", str(signal), *length, "--devices", "2", "--device", "cpu",
           "--out", str(out), *TINY]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "terminate called" not in proc.stderr  # a process ended with its process group open
    assert proc.stdout.count("PSNR") == 1  # only the first process reports
    m = json.loads((out / "metrics.json").read_text())
    assert m["devices"] == 2 and (m["steps"] == 4 if task != "audio" else 0 < m["steps"] <= 400)


@pytest.mark.slow
def test_compare_runs_every_preset_with_ddp_on_two_cpu_processes(tmp_path):
    # each preset's training is its own process group: closed after one run, opened again for
    # the next; the second process trains every run and writes nothing
    img = smooth_image(tmp_path / "a.png", 12)
    out = tmp_path / "cmp"
    cmd = [sys.executable, "-m", "inr", "compare", str(img), "--presets", "relu,siren", "--steps", "3", "--devices", "2",
           "--device", "cpu", "--out", str(out), "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("| preset |") == 1 and "terminate called" not in proc.stderr
    assert [r["preset"] for r in json.loads((out / "compare.json").read_text())["results"]] == ["relu", "siren"]
    for name in ("relu", "siren"):
        m = json.loads((out / name / "metrics.json").read_text())
        assert m["devices"] == 2 and m["steps"] == 3


@pytest.mark.parametrize("h,w", [(7, 9), (8, 10)])
def test_video_writer_checks_what_it_wrote_and_pads_odd_sizes(tmp_path, h, w):
    import imageio.v3 as iio

    from inr.tasks.outputs import write_video

    frames = np.zeros((5, h, w, 3), np.uint8)
    frames[:, : h // 2] = 200  # top half bright
    assert write_video(tmp_path / "v.mp4", frames, 10) == (h + h % 2, w + w % 2)
    back = iio.imread(tmp_path / "v.mp4", index=None, plugin="FFMPEG")
    assert back.shape == (5, h + h % 2, w + w % 2, 3)
    assert abs(float(back[:, 0].mean()) - 200) < 10 and float(back[:, -1].mean()) < 10
    assert not list(tmp_path.glob(".tmp-*"))


def test_doctor_reports_devices_and_backends(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "torch" in out and "--device auto computes on:" in out
    assert "hash grid:" in out and "occupancy marcher:" in out and "point clouds:" in out and "LAS/LAZ clouds:" in out and "E57 scans:" in out
    assert "sparse convolutions: native C++ kernel" in out  # `make setup` installs the compiler
    assert "point transformer:   native C++ kernel at inference" in out
    from inr import native

    assert ("bf16 products:       yes" if native.bf16_products() else "bf16 products:       no") in out
    assert "k-NN and normals:    native C++ grid search" in out


def test_fit_video_needs_an_input_and_resumes_without_one(tmp_path, capsys):
    assert main(["fit-video", "--out", str(tmp_path / "none")]) == 2
    assert "needs an input file" in _err_line(capsys) and not (tmp_path / "none").exists()
    clip = _clip(tmp_path / "c.gif", frames=3, h=6, w=6)
    out = tmp_path / "v"
    assert main(["fit-video", str(clip), "--steps", "2", "--out", str(out), *TINY]) == 0
    assert main(["fit-video", "--resume", str(out), "--steps", "3", "--no-progress"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 3


def test_time_budget_run_shows_the_budget_as_the_bars_total(tmp_path, capsys):
    img = smooth_image(tmp_path / "a.png", 16)
    out = tmp_path / "run"
    args = ["fit-image", str(img), "--time-budget", "2", "--out", str(out), *[a for a in TINY if a != "--no-progress"]]
    assert main(args) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    bars = [seg for seg in text.replace("\r", "\n").splitlines() if seg.startswith("fit:")]
    assert bars and all("/2 s [" in b for b in bars), bars[-3:]  # seconds towards the budget, with an ETA
    assert "step=" in bars[-1]
    steps = json.loads((out / "metrics.json").read_text())["steps"]
    assert int(bars[-1].split("step=")[1].split(",")[0].split("]")[0]) <= steps


def test_runs_lists_finished_and_unfinished_runs(tmp_path, capsys):
    img = smooth_image(tmp_path / "a.png", 16)
    root = tmp_path / "runs"
    assert main(["fit-image", str(img), "--steps", "6", "--out", str(root / "done"), *TINY]) == 0
    wav = tone(tmp_path / "t.wav", seconds=0.1)
    assert main(["fit-audio", str(wav), "--preset", "positional", "--steps", "4", "--out", str(root / "sub" / "audio"),
                 "--no-progress"]) == 0
    # an unfinished run: its status as the lifecycle leaves it mid-training, by a process that is gone
    (root / "mid").mkdir()
    (root / "mid" / "config.yaml").write_text((root / "done" / "config.yaml").read_text())
    (root / "mid" / "status.json").write_text(json.dumps({"status": "running", "pid": 2**22 + 12345, "host": __import__("socket").gethostname(),
                                                          "step": 40, "seconds": 3.5, "curve_name": "PSNR", "curve_value": 21.25}))
    capsys.readouterr()
    assert main(["runs", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "task", "preset", "status", "steps", "seconds", "metric"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    done = json.loads((root / "done" / "metrics.json").read_text())
    assert rows["done"][1:5] == ["image", "hashgrid", "finished", "6"] and f"{done['psnr']:.4g}" in rows["done"]
    audio = json.loads((root / "sub" / "audio" / "metrics.json").read_text())
    assert rows["sub/audio"][1:4] == ["audio", "positional", "finished"] and f"{audio['snr_db']:.4g}" in rows["sub/audio"]
    assert rows["mid"][3:6] == ["killed", "40", "3.5"] and "21.25" in rows["mid"]
    assert main(["runs", str(tmp_path / "nowhere")]) == 2


def test_tensorboard_logger_gets_the_curve_and_sample_renders(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    img = smooth_image(tmp_path / "a.png", 16)
    out = tmp_path / "tb"
    assert main(["fit-image", str(img), "--steps", "52", "--out", str(out), "--logger", "tensorboard",
                 "--set", "train.eval_every=26", *TINY]) == 0  # scalars are logged every 50 steps
    (events,) = (out / "tensorboard").glob("version_0/events.out.tfevents.*")
    acc = EventAccumulator(str(events), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    curve = json.loads((out / "metrics.json").read_text())["curve"]
    logged = [(e.step, e.value) for e in acc.Scalars("curve/PSNR")]
    assert [s for s, _ in logged] == [c[0] for c in curve] == [0, 26, 52]
    assert all(abs(v - c[2]) < 1e-4 for (_, v), c in zip(logged, curve))
    assert [(e.step, e.width, e.height) for e in acc.Images("render")] == [(0, 16, 16), (26, 16, 16), (52, 16, 16)]
    assert "lr-Adam" in acc.Tags()["scalars"] and "loss" in acc.Tags()["scalars"]
    assert (out / "logs" / "version_0").is_dir()  # the CSV logs are kept beside it


def test_wandb_logger_works_offline_without_an_account(tmp_path, monkeypatch):
    for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_ENTITY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc login either
    img = smooth_image(tmp_path / "a.png", 16)
    out = tmp_path / "wb"
    assert main(["fit-image", str(img), "--steps", "8", "--out", str(out), "--logger", "wandb",
                 "--set", "train.eval_every=4", *TINY]) == 0
    (run,) = (out / "wandb").glob("offline-run-*")
    assert len(list((run / "files" / "media" / "images").glob("render_*.png"))) == 3
    (log,) = run.glob("run-*.wandb")
    assert b"curve/PSNR" in log.read_bytes()  # the curve's history rows are in the offline run file


def test_decay_horizon_known_values():
    from inr.tasks.optim import DecayHorizon

    now = [0.0]
    assert DecayHorizon(steps=100).progress(25) == 0.25 and DecayHorizon(steps=100).progress(300) == 1.0
    by_time = DecayHorizon(seconds=10.0, clock=lambda: now[0])
    now[0] = 2.5
    assert by_time.progress(10**6) == 0.25  # no step limit: time alone
    both = DecayHorizon(steps=100, seconds=10.0, clock=lambda: now[0])
    assert both.progress(10) == 0.25 and both.progress(50) == 0.5  # whichever is further along


def test_time_budget_run_decays_over_its_budget(tmp_path):
    img = smooth_image(tmp_path / "a.png", 16)
    out = tmp_path / "run"
    assert main(["fit-image", str(img), "--time-budget", "2", "--out", str(out), "--set", "train.lr=0.01",
                 "--set", "train.steps=1000000", *TINY]) == 0
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    lr = ckpt["optimizer_states"][0]["param_groups"][0]["lr"]
    steps = ckpt["global_step"]
    # decay to 0.03 x: over the preset's 10^6 steps it would still be near 0.01; over the budget it ends at 3e-4
    assert steps < 10**5 and lr <= 0.01 * 0.03 ** 0.95, (steps, lr)
