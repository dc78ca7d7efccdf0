"""The run lifecycle, written once for every task.

A run folder holds `config.yaml` (the options as given and the preset as used),
`checkpoints/last.ckpt` (atomic, only ever finite parameters), `metrics.json` and the task's
outputs. `train(opts)` creates or refuses the folder, trains with Lightning (time budget,
Ctrl-C/SIGTERM stop with a checkpoint, NaN stop, DDP over processes or nodes), and writes the
outputs; `train(opts, resume=DIR)` continues a stopped run.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import yaml

from .. import _external
from ..errors import InputError
from ..presets import Preset, load_preset, preset_from_saved, set_option
from .base import Task, get_task
from .optim import DecayHorizon, TrainingDiverged

UNBOUNDED_STEPS = 10**9
LOGGERS = ("csv", "tensorboard", "wandb")
RESUMABLE_SETTINGS = ("train.lr", "train.lr_final_factor", "train.steps", "train.eval_every", "train.checkpoint_every")
"""`--set` keys that may change when a run is resumed; any other refuses the resume."""


@dataclass
class RunOptions:
    """One training run as the user asked for it (saved in the run's config.yaml)."""

    task: str
    input: Optional[str] = None
    """The signal file, scene folder or meshes folder (None: the task's bundled default)."""
    preset: Optional[str] = None
    out: Optional[str] = None
    steps: Optional[int] = None
    time_budget: Optional[float] = None
    seed: int = 0
    overrides: Dict[str, Any] = field(default_factory=dict)
    device: str = "auto"
    devices: int = 1
    num_nodes: int = 1
    progress: bool = True
    logger: str = "csv"
    viewer: Optional[str] = None
    """'HOST:PORT' of a live web viewer while training (tasks that have one: nerf), or None."""
    """'csv' (always written: DIR/logs/version_N/metrics.csv), 'tensorboard' or 'wandb' beside it."""
    overwrite: bool = False
    task_options: Dict[str, Any] = field(default_factory=dict)
    """The task's own options (its TaskOptions fields), None meaning 'not given'."""


def quiet_lightning() -> None:
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    logging.getLogger("lightning.fabric").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*IterableDataset.*has `__len__`.*")
    warnings.filterwarnings("ignore", message=".*You're resuming from a checkpoint that ended before the epoch ended.*")


def _task_options(task_cls, given: Dict[str, Any]):
    known = {f.name for f in fields(task_cls.Options)}
    unknown = set(given) - known
    if unknown:
        raise InputError(None, f"{task_cls.name}: unknown options {sorted(unknown)}")
    return task_cls.Options(**{k: v for k, v in given.items() if v is not None})


def _check_run_options(opts: RunOptions) -> None:
    if opts.steps is not None and opts.steps < 1:
        raise InputError(None, "--steps must be >= 1")
    if opts.time_budget is not None and opts.time_budget <= 0:
        raise InputError(None, "--time-budget must be > 0 seconds")
    if opts.devices < 1 or opts.num_nodes < 1:
        raise InputError(None, "--devices and --num-nodes must be >= 1")
    if opts.logger not in LOGGERS:
        raise InputError(None, f"--logger must be one of {', '.join(LOGGERS)}, got {opts.logger!r}")
    if opts.logger != "csv":
        _external.experiment_logger(opts.logger)  # missing package: one line before anything is written


def _same_path(a: str, b: str) -> bool:
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def resume_options(run_dir: Path, given: RunOptions) -> Tuple[RunOptions, Dict[str, Any]]:
    """The saved options and preset of a run, with what this invocation may change applied:
    --steps, --time-budget, --device(s), --no-progress, --logger and `--set` of RESUMABLE_SETTINGS.
    Anything else given differently is refused with one line (never silently ignored)."""
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.is_file():
        raise InputError(run_dir, "is not a run folder (no config.yaml)")
    if not (run_dir / "checkpoints" / "last.ckpt").is_file():
        raise InputError(run_dir, "has no checkpoint to resume from (checkpoints/last.ckpt)")
    data = yaml.safe_load(cfg_path.read_text()) or {}
    saved_preset = data.get("preset") or {}
    if "run" not in data or saved_preset.get("task") != given.task:
        raise InputError(run_dir, f"is not a {given.task} run folder of this version of inr")
    saved = RunOptions(**data["run"])
    if given.input is not None and (saved.input is None or not _same_path(given.input, saved.input)):
        raise InputError(given.input, f"is not the input of the run in {run_dir} ({saved.input or 'the bundled default'}); "
                         "resume without it, or start a new run")
    if given.preset is not None and given.preset != saved.preset:
        raise InputError(None, f"--preset {given.preset}: the run in {run_dir} uses {saved.preset}; a resumed run keeps its preset")
    for key, value in given.task_options.items():
        if value is not None and saved.task_options.get(key) != value:
            raise InputError(None, f"--{key.replace('_', '-')} {value}: the run in {run_dir} was started with "
                             f"{saved.task_options.get(key)!r}; a resumed run keeps it")
    for key, value in given.overrides.items():
        if key not in RESUMABLE_SETTINGS:
            raise InputError(None, f"--set {key}: cannot change when resuming (only {', '.join(RESUMABLE_SETTINGS)} can)")
        set_option(saved_preset, key, value)
    saved.overrides = {**saved.overrides, **given.overrides}
    saved.out = str(run_dir)
    saved.progress, saved.device, saved.devices, saved.num_nodes = given.progress, given.device, given.devices, given.num_nodes
    saved.logger, saved.viewer = given.logger, given.viewer
    saved.steps = given.steps if given.steps is not None else saved.steps
    saved.time_budget = given.time_budget if given.time_budget is not None else saved.time_budget
    return saved, saved_preset


def run_folder(opts: RunOptions, preset: Preset) -> Path:
    if opts.out:
        return Path(opts.out)
    return Path("runs") / f"{opts.task}-{preset.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def is_ddp_child() -> bool:
    """Lightning re-runs the command for DDP ranks 1..N-1 (LOCAL_RANK / NODE_RANK set)."""
    return int(os.environ.get("LOCAL_RANK", "0")) > 0 or int(os.environ.get("NODE_RANK", "0")) > 0


def prepare(opts: RunOptions, resume: Optional[Path] = None) -> Tuple[Task, Path, RunOptions]:
    """Validate options, preset and input; nothing is written yet (InputError on any problem)."""
    task_cls = get_task(opts.task)
    _check_run_options(opts)
    if resume is not None:
        opts, saved_preset = resume_options(Path(resume), opts)
        try:
            preset = preset_from_saved(saved_preset)
        except (TypeError, ValueError) as exc:
            raise InputError(None, f"--set: {exc}") from None
    else:
        if opts.preset is None:
            auto = task_cls.auto_preset(opts.input)
            if auto is not None:
                opts.preset = auto[0]
                if not is_ddp_child():
                    print(f"inr: preset {auto[0]} ({auto[1]}; --preset overrides)", flush=True)
        preset = load_preset(opts.preset or task_cls.default_preset, opts.task, opts.overrides)
        opts.preset = opts.preset or task_cls.default_preset
    task = task_cls(opts, preset, _task_options(task_cls, opts.task_options))
    if opts.input is None and resume is None:
        opts.input = task.default_input()
    task.load()
    from ..devices import resolve_device

    resolve_device(opts.device)  # an unusable --device fails here, before the folder exists
    return task, run_folder(opts, preset), opts


def _init_folder(out: Path, opts: RunOptions, preset: Preset, resume: bool) -> None:
    ckpt = out / "checkpoints" / "last.ckpt"
    if not resume:
        if ckpt.exists() and not opts.overwrite:
            raise InputError(out, "already holds a run: use --resume to continue it, --overwrite to replace it, or another --out")
        if opts.overwrite and out.exists():
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    data = {"run": asdict(opts), "preset": preset.to_dict()}
    tmp = out / ".config.yaml.tmp"
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    os.replace(tmp, out / "config.yaml")


def train(opts: RunOptions, resume: Optional[Path] = None, callbacks: Sequence[Any] = ()) -> Dict[str, Any]:
    """Train (or resume) a run of any task and write its folder; returns metrics.json's content
    plus 'out'. DDP ranks other than the first return {'rank': k}."""
    import lightning as L

    from .callbacks import RunMonitor

    quiet_lightning()
    from ..devices import keep_freed_memory

    keep_freed_memory()  # large per-step buffers reuse their pages (see there)
    task, out, opts = prepare(opts, resume)
    if not is_ddp_child():
        _init_folder(out, opts, task.preset, resume is not None)
    L.seed_everything(opts.seed, verbose=False)
    cfg = task.preset.train
    module = task.build_module()
    data = task.build_data()
    from .status import RunStatus

    status = RunStatus(out, enabled=not is_ddp_child())
    trainer = None

    task_callbacks = task.callbacks() if not is_ddp_child() else []

    def on_record(step: int, seconds: float, value: float) -> None:
        status.record(step, seconds, value)
        for cb in task_callbacks:
            if hasattr(cb, "record"):
                cb.record(step, seconds, value)
        if trainer is not None and opts.logger != "csv":
            log_curve_point(trainer, task, module, step, seconds, value)

    monitor = RunMonitor(task.measure, cfg.eval_every, opts.time_budget, on_record=on_record)
    max_steps = opts.steps or (UNBOUNDED_STEPS if opts.time_budget else cfg.steps)
    # the learning rate decays over the run as given: --steps, --time-budget (whichever ends
    # first), or the preset's train.steps
    module.decay_horizon = DecayHorizon(steps=None if max_steps == UNBOUNDED_STEPS else max_steps,
                                        seconds=opts.time_budget, clock=lambda: monitor.run_seconds)
    trainer = make_trainer(out, max_steps, cfg.precision, task.log_every, cfg.checkpoint_every, opts.progress,
                           [monitor, *callbacks, *task_callbacks], devices=opts.devices, device=opts.device, num_nodes=opts.num_nodes,
                           clock=monitor, logger=opts.logger, run_name=f"{opts.task}-{task.preset.name}-{out.name}")
    ckpt = out / "checkpoints" / "last.ckpt"
    _external.prepare_backends(module, trainer.strategy.root_device)  # a first-use kernel build is not training time
    status.start(opts.task, task.preset.name, task.curve_name)
    try:
        fit_or_stop(trainer, module, data, ckpt, out, resume is not None)
    except TrainingDiverged as exc:
        status.update(status="diverged", step=int(trainer.global_step), error=str(exc))
        raise TrainingDiverged(f"{exc}; training stopped. The last good checkpoint is {ckpt} "
                               f"(resume with --resume {out} --set train.lr=<lower>)") from None
    except RunStopped as exc:
        status.update(status="stopped", step=int(trainer.global_step), seconds=round(monitor.seconds(), 3), signal=exc.signal)
        raise
    except Exception as exc:
        status.update(status="failed", step=int(trainer.global_step), error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        finish_experiment(trainer)
    save_checkpoint_atomically(trainer, ckpt)
    # Lightning's teardown leaves the module on the CPU: evaluation, outputs and the collective
    # sums of gather() belong on the device it trained on
    module.to(trainer.strategy.root_device)
    seconds = monitor.seconds()
    task.gather(module)
    end_process_group()
    if not trainer.is_global_zero:
        return {"rank": trainer.global_rank}
    result = {"task": opts.task, "preset": task.preset.name}
    try:
        result.update(task.write_outputs(out, module, int(trainer.global_step), seconds, monitor.history))
    except Exception as exc:  # the training is done and checkpointed; its outputs could not be made
        status.update(status="failed", step=int(trainer.global_step), seconds=round(seconds, 3),
                      error=f"{type(exc).__name__}: {exc}")
        raise
    result.setdefault("steps", int(trainer.global_step))
    result.setdefault("seconds", round(seconds, 3))
    result["devices"] = trainer.world_size
    result["device"] = str(module.device)
    result["curve"] = monitor.history
    from .outputs import write_json

    write_json(out / "metrics.json", result)
    status.update(status="finished", step=result["steps"], seconds=result["seconds"])
    return {**result, "out": str(out)}


# ---- Lightning plumbing ---------------------------------------------------------------------
def accelerator_for(device: str, devices: int):
    """Lightning's (accelerator, devices) for `--device` and `--devices N`: 'cpu' -> N CPU
    processes; 'cuda:K' -> GPUs K..K+N-1; 'auto' -> GPUs when CUDA is there, else CPU."""
    import torch

    from ..devices import resolve_device

    dev = resolve_device(device)
    if dev.type == "cpu":
        return "cpu", devices
    first = dev.index or 0
    if first + devices > torch.cuda.device_count():
        raise InputError(None, f"--devices {devices} from {dev}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return "gpu", list(range(first, first + devices))


def make_trainer(out: Path, max_steps: int, precision: str, log_every: int, checkpoint_every: int, progress: bool,
                 callbacks: Sequence[Any], devices: int = 1, device: str = "auto", num_nodes: int = 1, clock=None,
                 logger: str = "csv", run_name: str = "inr"):
    """The Lightning Trainer of every run: step-bounded endless epoch, safe checkpoints in
    out/checkpoints, CSV logs in out/logs/version_N (and TensorBoard's in out/tensorboard or W&B's
    in out/wandb with `logger`), a progress bar (of steps, or of seconds when
    `clock`, the run's RunMonitor, has a time budget); DDP when devices > 1 or num_nodes > 1 (GPUs,
    or CPU processes with gloo)."""
    import lightning as L
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers import CSVLogger

    from .callbacks import SafeCheckpoint, StepBar

    accelerator, device_list = accelerator_for(device, devices)
    ckpt = SafeCheckpoint(dirpath=out / "checkpoints", filename="step{step}", every_n_train_steps=checkpoint_every,
                          save_top_k=0, save_last=True, save_on_train_epoch_end=False)
    bar = [StepBar(refresh_rate=max(1, min(log_every, 20)), clock=clock)] if progress else []
    return L.Trainer(
        accelerator=accelerator,
        devices=device_list,
        num_nodes=num_nodes,
        strategy="ddp" if devices > 1 or num_nodes > 1 else "auto",
        max_steps=max_steps,
        max_epochs=-1,
        precision="bf16-mixed" if precision == "bf16" else "32-true",
        logger=[CSVLogger(out, name="logs"), *experiment_loggers(logger, out, run_name)],  # version_N: a resumed run keeps the earlier logs
        log_every_n_steps=log_every,
        callbacks=[*callbacks, *bar, ckpt, LearningRateMonitor(logging_interval="step")],
        enable_progress_bar=progress,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )


def experiment_loggers(name: str, out: Path, run_name: str) -> list:
    """The experiment tracker beside the CSV logs: TensorBoard event files in out/tensorboard, or
    a W&B run in out/wandb, offline (no account, no network) unless WANDB_MODE=online is set;
    `wandb sync out/wandb/offline-run-*` uploads it later."""
    if name == "tensorboard":
        from lightning.pytorch.loggers import TensorBoardLogger

        _external.experiment_logger(name)
        return [TensorBoardLogger(out, name="tensorboard", default_hp_metric=False)]
    if name == "wandb":
        from lightning.pytorch.loggers import WandbLogger

        _external.experiment_logger(name)
        (out / "wandb").mkdir(parents=True, exist_ok=True)
        return [WandbLogger(name=run_name, save_dir=str(out), project="inr", offline=os.environ.get("WANDB_MODE") != "online")]
    return []


def end_process_group() -> None:
    """After the last collective (task.gather), every DDP process meets once more and closes its
    process group. Left to the interpreter's exit, gloo's worker threads could be torn down while
    still joinable ("terminate called without an active exception", about 1 run in 7 here): the
    child aborted, and Lightning then killed the first process with SIGKILL."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def finish_experiment(trainer) -> None:
    """Close a W&B run at the end of its training run: the next run of the same process (inr
    compare, the Python API) starts its own, and the offline files are complete."""
    from lightning.pytorch.loggers import WandbLogger

    for lg in trainer.loggers:
        if isinstance(lg, WandbLogger) and lg._experiment is not None:
            lg.experiment.finish()


def log_curve_point(trainer, task: Task, module, step: int, seconds: float, value: float) -> None:
    """The curve point (value and training seconds) and the task's sample render, to the
    experiment tracker (the CSV logs hold the scalars; the curve is in metrics.json)."""
    from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger

    image = task.sample_render(module)
    for lg in trainer.loggers:
        if isinstance(lg, (TensorBoardLogger, WandbLogger)):
            lg.log_metrics({f"curve/{task.curve_name}": value, "curve/train_seconds": seconds}, step=step)
        if image is None:
            continue
        array = (image.detach().clamp(0, 1).cpu().float().numpy() * 255 + 0.5).astype("uint8")
        if isinstance(lg, TensorBoardLogger):
            lg.experiment.add_image("render", array, global_step=step, dataformats="HWC")
        elif isinstance(lg, WandbLogger):
            lg.log_image("render", [array], step=step)


def fit_or_stop(trainer, module, data, ckpt: Path, out: Path, resume: bool) -> None:
    """trainer.fit, but a run stopped by Ctrl-C or SIGTERM (`kill PID`; Lightning turns it into
    a SystemExit with status 0) keeps a checkpoint of where it stopped, when its parameters are
    finite, and raises RunStopped saying how to resume, instead of writing results."""
    import signal

    import torch
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    signal_name, on_sigint = None, signal.getsignal(signal.SIGINT)
    try:
        trainer.fit(module, datamodule=data, ckpt_path=str(ckpt) if resume else None, weights_only=True)
        if trainer.interrupted:
            signal_name = "SIGINT"
    except SIGTERMException:
        signal_name = "SIGTERM"
    except SystemExit:
        # Lightning (2.6) answers a Ctrl-C during fit by tearing the run down and exiting with status 1,
        # Ctrl-C ignored from then on: that process kept no checkpoint of where it stopped and said nothing.
        # Several processes: it has killed the others (a checkpoint is written by all), so its exit stands
        if not trainer.interrupted or trainer.world_size > 1:
            raise
        signal.signal(signal.SIGINT, on_sigint)
        signal_name = "SIGINT"
    if signal_name is None and getattr(trainer, "received_sigterm", False):
        signal_name = "SIGTERM"
    if signal_name:
        if all(bool(torch.isfinite(p).all()) for p in module.parameters()):
            save_checkpoint_atomically(trainer, ckpt)
        raise RunStopped(f"stopped at step {trainer.global_step}; resume with --resume {out}", signal_name)


class RunStopped(KeyboardInterrupt):
    """A run stopped by a signal after saving a checkpoint; `signal` is SIGINT or SIGTERM."""

    def __init__(self, message: str, signal: str = "SIGINT") -> None:
        super().__init__(message)
        self.signal = signal


def save_checkpoint_atomically(trainer, path: Path) -> None:
    trainer.save_checkpoint(f"{path}.tmp", weights_only=False)  # collective: rank 0 writes
    if trainer.is_global_zero:
        os.replace(f"{path}.tmp", path)


def load_checkpoint_module(ckpt_path: Path, cls, device: str = "auto"):
    """A LightningModule rebuilt from its saved hyperparameters and weights (torch.load with
    weights_only=True), on `device`; unreadable files raise InputError naming the file."""
    import torch

    from ..devices import resolve_device

    dev = resolve_device(device)
    try:
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        module = cls(**ckpt["hyper_parameters"])
        module.load_state_dict(ckpt["state_dict"])
    except Exception as exc:  # a truncated or foreign file fails in many ways
        raise InputError(ckpt_path, f"cannot be loaded as a checkpoint ({type(exc).__name__}: {exc})") from None
    return module.to(dev).eval()


def load_run(run_dir: Path, task: str, cls, device: str = "auto"):
    """(module on `device`, saved config) of a run folder of `task` that has a checkpoint."""
    run_dir = Path(run_dir)
    cfg_path, ckpt_path = run_dir / "config.yaml", run_dir / "checkpoints" / "last.ckpt"
    if not cfg_path.is_file() or not ckpt_path.is_file():
        raise InputError(run_dir, "is not a run folder (needs config.yaml and checkpoints/last.ckpt)")
    config = yaml.safe_load(cfg_path.read_text()) or {}
    found = (config.get("preset") or {}).get("task")
    if found != task:
        raise InputError(run_dir, f"holds a {found or 'unknown'} run, not a {task} one")
    return load_checkpoint_module(ckpt_path, cls, device), config
