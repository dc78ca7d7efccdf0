"""Fit a field to an image or audio file: the orchestration behind `inr fit-image|fit-audio`."""

from __future__ import annotations

import logging
import os
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import yaml

from .. import metrics
from .._resources import data_dir
from ..data import read_audio, read_image
from ..data.signal import Signal, grid_coords
from ..errors import InputError
from ..networks import count_parameters
from ..presets import Preset, load_preset
from .outputs import plot_audio, plot_curve, write_error_image, write_image, write_json
from .signal_fit import HOLDOUTS, SignalData, SignalFitModule, TrainingDiverged, split_holdout

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif")
NATIVE_RANGE = {"image": (0.0, 1.0), "audio": (-1.0, 1.0)}
DEFAULT_SIGNAL = {"image": "astronaut.png", "audio": "speech.wav"}
DEFAULT_PRESET = {"image": "hashgrid", "audio": "hashgrid"}
UNBOUNDED_STEPS = 10**9


@dataclass
class FitOptions:
    """One fit as the user asked for it (saved as the run's config.yaml)."""

    kind: str
    signal: Optional[str] = None
    preset: Optional[str] = None
    out: Optional[str] = None
    steps: Optional[int] = None
    time_budget: Optional[float] = None
    seed: int = 0
    holdout: str = "none"
    overrides: Dict[str, Any] = field(default_factory=dict)
    alpha: str = "fit"
    progress: bool = True
    overwrite: bool = False


def kind_of(path: str) -> str:
    return "audio" if Path(path).suffix.lower() in AUDIO_SUFFIXES else "image"


def default_signal(kind: str) -> str:
    return str(data_dir("assets") / DEFAULT_SIGNAL[kind])


def read_signal(kind: str, path: str, alpha: str = "fit") -> Signal:
    return read_image(path, alpha=alpha) if kind == "image" else read_audio(path)


def _quiet_lightning() -> None:
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    logging.getLogger("lightning.fabric").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*IterableDataset.*has `__len__`.*")
    warnings.filterwarnings("ignore", message=".*You're resuming from a checkpoint that ended before the epoch ended.*")


def _run_dir(opts: FitOptions, preset: Preset) -> Path:
    if opts.out:
        return Path(opts.out)
    return Path("runs") / f"{opts.kind}-{preset.name}-{time.strftime('%Y%m%d-%H%M%S')}"


class Run:
    """Everything one fit needs, validated before anything is written."""

    def __init__(self, opts: FitOptions, preset: Preset, signal: Signal, out: Path) -> None:
        self.opts, self.preset, self.signal, self.out = opts, preset, signal, out
        self.native = NATIVE_RANGE[opts.kind]
        self.value_range = self.native if opts.kind == "audio" else preset.train.value_range
        self.max_steps = opts.steps or (UNBOUNDED_STEPS if opts.time_budget else preset.train.steps)
        _, _, self.test_coords, self.test_values = split_holdout(signal.values, opts.holdout)

    @property
    def ckpt(self) -> Path:
        return self.out / "checkpoints" / "last.ckpt"

    def test_psnr(self, module: SignalFitModule) -> float:
        pred = module.predict_values(self.test_coords, self.value_range, self.native)
        return metrics.psnr(pred, self.test_values, data_range=self.native[1] - self.native[0])


def prepare(opts: FitOptions, preset_data: Optional[Dict[str, Any]] = None) -> Run:
    """Validate options, preset and signal; raises InputError before touching the output folder."""
    if opts.holdout not in HOLDOUTS:
        raise InputError(None, f"--holdout must be one of {', '.join(HOLDOUTS)}")
    if opts.steps is not None and opts.steps < 1:
        raise InputError(None, "--steps must be >= 1")
    if opts.time_budget is not None and opts.time_budget <= 0:
        raise InputError(None, "--time-budget must be > 0 seconds")
    if preset_data is not None:
        preset = Preset.from_dict(preset_data["name"], {k: v for k, v in preset_data.items() if k != "name"})
    else:
        preset = load_preset(opts.preset or DEFAULT_PRESET[opts.kind], opts.kind, opts.overrides)
    path = opts.signal or default_signal(opts.kind)
    signal = read_signal(opts.kind, path, opts.alpha)
    if opts.holdout == "even-odd" and min(signal.grid_shape) < 2:
        raise InputError(path, "is too small for the even-odd holdout (needs 2 samples per axis)")
    return Run(opts, preset, signal, _run_dir(opts, preset))


def make_trainer(out: Path, max_steps: int, precision: str, log_every: int, checkpoint_every: int, progress: bool,
                 callbacks: Sequence[Any], devices: int = 1):
    """The Lightning Trainer of every fit: step-bounded endless epoch, safe checkpoints in
    out/checkpoints, CSV logs in out/logs/version_N, a step progress bar. devices > 1: DDP over
    that many processes (GPUs when CUDA is there, else CPU processes with gloo); Lightning
    re-runs the command line for ranks 1..N-1."""
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    from .callbacks import SafeCheckpoint, StepBar

    ckpt = SafeCheckpoint(dirpath=out / "checkpoints", filename="step{step}", every_n_train_steps=checkpoint_every,
                          save_top_k=0, save_last=True, save_on_train_epoch_end=False)
    bar = [StepBar(refresh_rate=max(1, min(log_every, 20)))] if progress else []
    return L.Trainer(
        accelerator="auto",
        devices=devices,
        strategy="ddp" if devices > 1 else "auto",
        max_steps=max_steps,
        max_epochs=-1,
        precision="bf16-mixed" if precision == "bf16" else "32-true",
        logger=CSVLogger(out, name="logs"),  # version_N: a resumed run keeps the earlier logs
        log_every_n_steps=log_every,
        callbacks=[*callbacks, *bar, ckpt],
        enable_progress_bar=progress,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )


def _trainer(run: Run, callbacks: Sequence[Any]):
    cfg = run.preset.train
    return make_trainer(run.out, run.max_steps, cfg.precision, cfg.eval_every, cfg.checkpoint_every, run.opts.progress, callbacks)


def load_checkpoint_module(ckpt_path: Path, cls):
    """A LightningModule rebuilt from its saved hyperparameters and weights, read with
    torch.load(weights_only=True); unreadable files raise InputError naming the file."""
    import torch

    try:
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        module = cls(**ckpt["hyper_parameters"])
        module.load_state_dict(ckpt["state_dict"])
    except Exception as exc:  # a truncated or foreign file fails in many ways
        raise InputError(ckpt_path, f"cannot be loaded as a checkpoint ({type(exc).__name__}: {exc})") from None
    return module.eval()


def fit_or_stop(trainer, module, data, ckpt: Path, out: Path, resume: bool) -> None:
    """trainer.fit, but a run stopped by Ctrl-C or SIGTERM (`kill PID`; Lightning turns it into
    a SystemExit with status 0) keeps a checkpoint of where it stopped, when its parameters are
    finite, and raises KeyboardInterrupt saying how to resume, instead of writing results."""
    import torch
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    try:
        trainer.fit(module, datamodule=data, ckpt_path=str(ckpt) if resume else None, weights_only=True)
        stopped = trainer.interrupted
    except SIGTERMException:
        stopped = True
    if stopped:
        if all(bool(torch.isfinite(p).all()) for p in module.parameters()):
            save_checkpoint_atomically(trainer, ckpt)
        raise KeyboardInterrupt(f"stopped at step {trainer.global_step}; resume with --resume {out}")


def save_checkpoint_atomically(trainer, path: Path) -> None:
    trainer.save_checkpoint(f"{path}.tmp", weights_only=False)  # collective: rank 0 writes
    if trainer.is_global_zero:
        os.replace(f"{path}.tmp", path)


def run_fit(opts: FitOptions, resume: Optional[Path] = None, callbacks: Sequence[Any] = ()) -> Dict[str, Any]:
    """Fit, evaluate and write the run folder; returns the metrics written to metrics.json.

    With `resume`, the run's saved config is used (opts.steps / opts.time_budget, when set,
    replace the saved ones) and training continues from its last checkpoint.
    """
    import lightning as L

    from .callbacks import RunMonitor

    _quiet_lightning()
    preset_data = None
    if resume is not None:
        opts, preset_data = load_run_config(resume, opts)
    run = prepare(opts, preset_data)
    if resume is None:
        if run.ckpt.exists() and not opts.overwrite:
            raise InputError(run.out, "already holds a run: use --resume to continue it, --overwrite to replace it, or another --out")
        if opts.overwrite and run.out.exists():
            shutil.rmtree(run.out)
    run.out.mkdir(parents=True, exist_ok=True)
    save_run_config(run)

    L.seed_everything(opts.seed, verbose=False)
    cfg = run.preset.train
    module = SignalFitModule(run.signal.in_dim, run.signal.channels, run.preset.field.to_dict(), asdict(cfg))
    data = SignalData(run.signal.values, opts.holdout, cfg.batch_size, run.native, run.value_range, seed=opts.seed)
    monitor = RunMonitor(run.test_psnr, cfg.eval_every, opts.time_budget)
    trainer = _trainer(run, [monitor, *callbacks])
    try:
        fit_or_stop(trainer, module, data, run.ckpt, run.out, resume is not None)
    except TrainingDiverged as exc:
        raise TrainingDiverged(f"{exc}; training stopped. The last good checkpoint is {run.ckpt} "
                               f"(resume with --resume {run.out} after lowering train.lr)") from None
    save_checkpoint_atomically(trainer, run.ckpt)
    return write_outputs(run, module, monitor.history, monitor.seconds(), trainer.global_step)


def write_outputs(run: Run, module: SignalFitModule, history: List[List[float]], seconds: float, steps: int) -> Dict[str, Any]:
    sig, out = run.signal, run.out
    coords = grid_coords(sig.grid_shape)
    pred = module.predict_values(coords, run.value_range, run.native).view(*sig.grid_shape, sig.channels)
    rng = run.native[1] - run.native[0]
    test_sel = tuple(slice(1, None, 2) for _ in sig.grid_shape) if run.opts.holdout == "even-odd" else ()
    train_sel = tuple(slice(0, None, 2) for _ in sig.grid_shape) if run.opts.holdout == "even-odd" else ()
    p_test, t_test = pred[test_sel], sig.values[test_sel]
    result: Dict[str, Any] = {
        "preset": run.preset.name,
        "signal": sig.path,
        "holdout": run.opts.holdout,
        "psnr": round(metrics.psnr(p_test, t_test, rng), 4),
        "train_psnr": round(metrics.psnr(pred[train_sel], sig.values[train_sel], rng), 4),
        "steps": int(steps),
        "seconds": round(seconds, 3),
        "params": count_parameters(module.field),
        "precision": run.preset.train.precision,
        "compile": run.preset.train.compile,
        "seed": run.opts.seed,
    }
    if module.field.num_levels > 1:
        result["level_psnr"] = [
            round(metrics.psnr(module.predict_values(coords, run.value_range, run.native, level=k).view_as(pred)[test_sel], t_test, rng), 4)
            for k in range(module.field.num_levels)
        ]
    title = f"{run.preset.name} on {Path(sig.path).name}"
    if sig.kind == "image":
        result["ssim"] = round(metrics.ssim(p_test, t_test, rng), 5)
        result["shape"] = list(sig.values.shape)
        write_image(out / "reconstruction.png", pred, getattr(sig, "bit_depth", 8))
        write_error_image(out / "error.png", pred, sig.values)
    else:
        import soundfile as sf

        result["snr_db"] = round(metrics.snr_db(p_test, t_test), 4)
        result["sample_rate"] = sig.sample_rate
        result["samples"] = int(sig.values.shape[0])
        audio = (pred * sig.scale).numpy()
        sf.write(str(out / "reconstruction.wav"), audio, sig.sample_rate, subtype="PCM_16" if sig.scale <= 1.0 else "FLOAT")
        plot_audio(out / "audio.png", pred.numpy(), sig.values.numpy(), sig.sample_rate, title)
    result["curve"] = history
    plot_curve(out / "curve.png", history, title)
    write_json(out / "metrics.json", result)
    return {**result, "out": str(out)}


def save_run_config(run: Run) -> None:
    data = {"options": asdict(run.opts), "preset": run.preset.to_dict()}
    (run.out / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def load_run_config(run_dir: Path, given: FitOptions):
    cfg_path = Path(run_dir) / "config.yaml"
    if not cfg_path.is_file():
        raise InputError(run_dir, "is not a run folder (no config.yaml)")
    if not (Path(run_dir) / "checkpoints" / "last.ckpt").is_file():
        raise InputError(run_dir, "has no checkpoint to resume from (checkpoints/last.ckpt)")
    data = yaml.safe_load(cfg_path.read_text())
    opts = FitOptions(**data["options"])
    if opts.kind != given.kind:
        raise InputError(run_dir, f"holds a {opts.kind} run, not an {given.kind} one")
    opts.out = str(run_dir)
    opts.progress = given.progress
    if given.steps is not None:
        opts.steps = given.steps
    if given.time_budget is not None:
        opts.time_budget = given.time_budget
    return opts, data["preset"]
