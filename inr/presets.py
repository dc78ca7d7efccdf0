"""Presets: YAML files in configs/<task>/, loaded with a safe loader into typed configs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from ._config import from_dict_strict
from ._resources import data_dir
from .errors import InputError
from .fields import FieldConfig
from .render.radiance import RadianceFieldConfig

TASKS = ("image", "audio")
ALL_TASKS = ("image", "audio", "nerf")


def _check_precision(precision: str) -> None:
    if precision not in ("32", "bf16"):
        raise ValueError(f"precision must be '32' or 'bf16', got {precision!r}")


@dataclass
class TrainConfig:
    """How a field is fitted to one signal."""

    steps: int = 1000
    """Optimizer steps (a time budget can stop earlier)."""
    lr: float = 1e-3
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    lr_final_factor: float = 1.0
    """Exponential decay of the learning rate down to lr * this factor at `steps`."""
    batch_size: Optional[int] = None
    """Random coordinates per step; None = the full training grid every step."""
    precision: str = "32"
    """'32' (fp32) or 'bf16' (bf16 autocast, ~2x faster on CPUs with AVX-512 bf16)."""
    compile: bool = False
    """torch.compile the field for training (compile time counts in the reported seconds)."""
    value_range: Tuple[float, float] = (0.0, 1.0)
    """Range the targets are mapped to for training (images: [0, 1]; SIREN's setting: [-1, 1]).
    Audio amplitudes are always in [-1, 1] and use (-1, 1)."""
    supervise_levels: bool = False
    """Multi-level fields (PINs): supervise every level's output (mean of the level losses)
    instead of the last one only, so that each coarse level is itself a fit of the signal."""
    eval_every: int = 50
    """Steps between test-PSNR evaluations for the curve (evaluation time is not counted)."""
    checkpoint_every: int = 100
    """Steps between checkpoints (the last one is also written at the end)."""

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "TrainConfig":
        cfg = from_dict_strict(cls, data, "train", floats=("lr", "eps", "lr_final_factor"))
        cfg.betas = tuple(float(b) for b in cfg.betas)  # type: ignore[assignment]
        cfg.value_range = tuple(float(v) for v in cfg.value_range)  # type: ignore[assignment]
        _check_precision(cfg.precision)
        if cfg.steps < 1 or cfg.eval_every < 1 or cfg.checkpoint_every < 1:
            raise ValueError("steps, eval_every and checkpoint_every must be >= 1")
        return cfg


@dataclass
class Preset:
    name: str
    task: str
    description: str
    field: FieldConfig
    train: TrainConfig = field(default_factory=TrainConfig)

    @classmethod
    def from_dict(cls, name: str, data: Dict[str, Any]) -> "Preset":
        unknown = set(data) - {"task", "description", "field", "train"}
        if unknown:
            raise ValueError(f"unknown preset keys {sorted(unknown)}")
        task = data.get("task")
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        return cls(
            name=name,
            task=task,
            description=str(data.get("description", "")),
            field=FieldConfig.from_dict(dict(data.get("field") or {})),
            train=TrainConfig.from_dict(dict(data.get("train") or {})),
        )

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["train"]["betas"] = list(self.train.betas)
        d["train"]["value_range"] = list(self.train.value_range)
        return d


def _preset_dir(task: str) -> Path:
    return data_dir("configs") / task


def available_presets(task: Optional[str] = None) -> List[str]:
    """'task/name' for every bundled preset (or bare names of one task's presets)."""
    out = []
    for t in ALL_TASKS if task is None else (task,):
        for p in sorted(_preset_dir(t).glob("*.yaml")):
            out.append(p.stem if task else f"{t}/{p.stem}")
    return out


def _read_yaml(path: Path) -> Dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(path, f"cannot be read as YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise InputError(path, "a preset must be a YAML mapping")
    return data


def set_option(data: Dict[str, Any], dotted: str, value: Any) -> None:
    """data['a']['b'] = value for dotted = 'a.b' (creating mappings on the way)."""
    keys = dotted.split(".")
    node = data
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ValueError(f"{dotted}: {k} is not a mapping")
    node[keys[-1]] = value


def read_preset_data(name_or_path: str, task: str, overrides: Optional[Dict[str, Any]] = None) -> Tuple[str, Path, Dict[str, Any]]:
    """(name, file, data) of a bundled preset of `task` or of a YAML file, with `overrides`
    (dotted keys such as 'train.lr') applied."""
    path = Path(name_or_path)
    if name_or_path.endswith((".yaml", ".yml")) or path.exists():
        if not path.is_file():
            raise InputError(path, "no such preset file")
        label = path.stem
    else:
        bare = name_or_path.split("/", 1)[1] if name_or_path.startswith(task + "/") else name_or_path
        path = _preset_dir(task) / f"{bare}.yaml"
        if not path.is_file():
            raise InputError(None, f"unknown {task} preset {name_or_path!r}; available: {', '.join(available_presets(task))}")
        label = bare
    data = _read_yaml(path)
    for key, value in (overrides or {}).items():
        set_option(data, key, value)
    return label, path, data


def load_preset(name_or_path: str, task: str, overrides: Optional[Dict[str, Any]] = None) -> Preset:
    """A signal-fitting preset (image or audio) by name or YAML path, validated."""
    label, path, data = read_preset_data(name_or_path, task, overrides)
    try:
        preset = Preset.from_dict(label, data)
    except (TypeError, ValueError) as exc:
        raise InputError(path, f"invalid preset: {exc}") from None
    if preset.task != task:
        raise InputError(path, f"is a {preset.task} preset, not an {task} one")
    return preset


@dataclass
class NerfTrainConfig:
    """How a radiance field is trained on a scene."""

    steps: int = 20000
    lr: float = 1e-2
    betas: Tuple[float, float] = (0.9, 0.99)
    eps: float = 1e-15
    lr_final_factor: float = 0.03
    rays_per_batch: int = 8192
    """The most rays in one step."""
    target_samples: int = 65536
    """Samples per step to aim at: the ray count follows the samples per ray of the last step
    (nerfacc's dynamic batch), so early steps with a fog-filled grid stay cheap."""
    precision: str = "32"
    compile: bool = False
    render_step_size: Optional[float] = None
    """Marching step in world units; None: the scene box's diagonal / 256 (nerfacc and
    nerfstudio use ~1/1000 on GPU; on CPU 1/256 is the better trade, see the README)."""
    grid_resolution: int = 64
    grid_update_every: int = 16
    grid_warmup_steps: int = 256
    grid_threshold: float = 0.01
    grid_ema_decay: float = 0.95
    early_stop_eps: float = 1e-4
    prepass: bool = True
    """Training marches with a density pre-pass (early termination, alpha_thre): it drops samples
    behind surfaces, but on CPU it costs more than it saves unless it drops most samples."""
    alpha_thre: float = 0.0
    train_background: str = "random"
    """'random' (a random colour per ray, so transparent pixels teach empty space), or 'white'/'black'."""
    eval_background: str = "white"
    eval_every: int = 500
    eval_views: int = 2
    """Test views rendered for the PSNR curve (the final evaluation uses all of them)."""
    eval_stride: int = 4
    """The curve's PSNR uses every eval_stride-th pixel in each direction (the final evaluation uses all)."""
    checkpoint_every: int = 500

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "NerfTrainConfig":
        floats = ("lr", "eps", "lr_final_factor", "render_step_size", "grid_threshold", "grid_ema_decay", "early_stop_eps", "alpha_thre")
        cfg = from_dict_strict(cls, data, "train", floats=floats)
        cfg.betas = tuple(float(b) for b in cfg.betas)  # type: ignore[assignment]
        _check_precision(cfg.precision)
        for name in ("steps", "rays_per_batch", "target_samples", "grid_resolution", "grid_update_every", "eval_every",
                     "eval_views", "eval_stride", "checkpoint_every"):
            if getattr(cfg, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(cfg, name)}")
        if cfg.render_step_size is not None and cfg.render_step_size <= 0:
            raise ValueError(f"train.render_step_size must be > 0, got {cfg.render_step_size}")
        for bg in (cfg.train_background, cfg.eval_background):
            if bg not in ("random", "white", "black"):
                raise ValueError(f"background must be random, white or black, got {bg!r}")
        return cfg


@dataclass
class NerfPreset:
    name: str
    description: str
    field: RadianceFieldConfig
    train: NerfTrainConfig

    @classmethod
    def from_dict(cls, name: str, data: Dict[str, Any]) -> "NerfPreset":
        unknown = set(data) - {"task", "description", "field", "train"}
        if unknown:
            raise ValueError(f"unknown preset keys {sorted(unknown)}")
        if data.get("task") != "nerf":
            raise ValueError(f"task must be 'nerf', got {data.get('task')!r}")
        return cls(name, str(data.get("description", "")), RadianceFieldConfig.from_dict(dict(data.get("field") or {})),
                   NerfTrainConfig.from_dict(dict(data.get("train") or {})))

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["task"] = "nerf"
        d["train"]["betas"] = list(self.train.betas)
        return d


def load_nerf_preset(name_or_path: str, overrides: Optional[Dict[str, Any]] = None) -> NerfPreset:
    label, path, data = read_preset_data(name_or_path, "nerf", overrides)
    try:
        return NerfPreset.from_dict(label, data)
    except (TypeError, ValueError) as exc:
        raise InputError(path, f"invalid preset: {exc}") from None


def describe_preset(name: str, task: str) -> str:
    return (load_nerf_preset(name) if task == "nerf" else load_preset(name, task)).description
