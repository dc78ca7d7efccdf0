"""Presets: YAML files in configs/<task>/, loaded with a safe loader into typed configs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from ._config import from_dict_strict
from ._resources import data_dir
from .errors import InputError
from .pointcloud.shapes import FAMILIES, FAMILY_WEIGHTS

ALL_TASKS = ("image", "audio", "video", "sdf", "nerf", "pointcloud")


def _check_precision(precision: str) -> None:
    if precision not in ("32", "bf16"):
        raise ValueError(f"precision must be '32' or 'bf16', got {precision!r}")


@dataclass
class OptimConfig:
    """The optimizer of every task: Adam with an exponential learning-rate decay, a step budget,
    precision, compilation and checkpoint spacing. Each task's train config extends it."""

    steps: int = 1000
    """Optimizer steps (a time budget can stop earlier)."""
    lr: float = 1e-3
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    lr_final_factor: float = 1.0
    """Exponential decay of the learning rate down to lr * this factor at `steps`."""
    precision: str = "32"
    """'32' (fp32) or 'bf16' (bf16 autocast, ~2x faster on CPUs with AVX-512 bf16)."""
    compile: bool = False
    """torch.compile the field for training (compile time counts in the reported seconds)."""
    eval_every: int = 50
    """Steps between evaluations for the curve (evaluation time is not counted)."""
    checkpoint_every: int = 100
    """Steps between checkpoints (the last one is also written at the end)."""

    FLOATS = ("lr", "eps", "lr_final_factor")
    POSITIVE = ("steps", "eval_every", "checkpoint_every")

    @classmethod
    def from_dict(cls, data: Dict[str, Any]):
        cfg = from_dict_strict(cls, data, "train", floats=cls.FLOATS)
        cfg.betas = tuple(float(b) for b in cfg.betas)  # type: ignore[assignment]
        _check_precision(cfg.precision)
        for name in cls.POSITIVE:
            if getattr(cfg, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(cfg, name)}")
        if not (cfg.lr > 0 and cfg.lr_final_factor > 0):
            raise ValueError("train.lr and train.lr_final_factor must be > 0")
        cfg.check()
        return cfg

    def check(self) -> None:
        """Task-specific validation (subclasses)."""

    def to_dict(self) -> Dict[str, Any]:
        return _plain(asdict(self))


def _plain(d: Dict[str, Any]) -> Dict[str, Any]:
    """Tuples as lists, so that YAML stays plain."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


@dataclass
class TrainConfig(OptimConfig):
    """How a field is fitted to one sampled signal (image, audio, video)."""

    batch_size: Optional[int] = None
    """Random coordinates per step; None = the full training grid every step."""
    value_range: Tuple[float, float] = (0.0, 1.0)
    """Range the targets are mapped to for training (images: [0, 1]; SIREN's setting: [-1, 1]).
    Audio amplitudes are always in [-1, 1] and use (-1, 1)."""
    supervise_levels: bool = False
    """Multi-level fields (PINs): supervise every level's output (mean of the level losses)
    instead of the last one only, so that each coarse level is itself a fit of the signal."""

    def check(self) -> None:
        self.value_range = tuple(float(v) for v in self.value_range)  # type: ignore[assignment]


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


@dataclass
class NerfTrainConfig(OptimConfig):
    """How a radiance field is trained on a scene."""

    steps: int = 20000
    lr: float = 1e-2
    betas: Tuple[float, float] = (0.9, 0.99)
    eps: float = 1e-15
    lr_final_factor: float = 0.03
    eval_every: int = 500
    checkpoint_every: int = 500
    rays_per_batch: int = 8192
    """The most rays in one step."""
    target_samples: int = 65536
    """Samples per step to aim at: the ray count follows the samples per ray of the last step
    (nerfacc's dynamic batch), so early steps with a fog-filled grid stay cheap."""
    render_step_size: Optional[float] = None
    """Marching step in world units; None: the scene box's diagonal / 256 (nerfacc and
    nerfstudio use ~1/1000 on GPU; on CPU 1/256 is the better trade, see the README)."""
    far: Optional[float] = None
    """Where rays end in an unbounded (contracted) scene, in world units; None: 1000 x the
    sample spacing's knee (twice the scene box's largest half extent)."""
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
    stratified: bool = False
    """Training rays start their sample lattice at a random offset in [0, step) (nerfacc's
    `stratified`), so the field is not only ever queried at the same depths."""
    train_background: str = "random"
    """'random' (a random colour per ray, so transparent pixels teach empty space), or 'white'/'black'."""
    eval_background: str = "white"
    eval_views: int = 2
    """Test views rendered for the PSNR curve (the final evaluation uses all of them)."""
    eval_stride: int = 4
    """The curve's PSNR uses every eval_stride-th pixel in each direction (the final evaluation uses all)."""

    FLOATS = ("lr", "eps", "lr_final_factor", "render_step_size", "far", "grid_threshold", "grid_ema_decay", "early_stop_eps",
              "alpha_thre")
    POSITIVE = ("steps", "rays_per_batch", "target_samples", "grid_resolution", "grid_update_every", "eval_every",
                "eval_views", "eval_stride", "checkpoint_every")

    def check(self) -> None:
        if self.render_step_size is not None and self.render_step_size <= 0:
            raise ValueError(f"train.render_step_size must be > 0, got {self.render_step_size}")
        if self.far is not None and self.far <= 0:
            raise ValueError(f"train.far must be > 0, got {self.far}")
        for bg in (self.train_background, self.eval_background):
            if bg not in ("random", "white", "black"):
                raise ValueError(f"background must be random, white or black, got {bg!r}")



@dataclass
class PointCloudTrainConfig(OptimConfig):
    """How the point-cloud reconstruction network is trained on shapes made on the fly."""

    steps: int = 4000
    lr: float = 2e-3
    lr_final_factor: float = 0.1
    eval_every: int = 200
    checkpoint_every: int = 200
    dense_points: int = 20000
    voxels_per_diagonal: float = 56.0
    shape_pool: int = 64
    """Synthetic shapes kept and re-corrupted (a new one replaces a random old one every step)."""
    stage2_on_predicted: bool = True
    """Stage 2 also learns on the voxels stage 1 wrongly predicts (False: the true voxels only)."""
    mesh_share: float = 0.5
    """With --meshes: the share of new shapes drawn from those meshes (randomly rotated); the
    rest are synthetic."""
    open_share: float = 0.2
    """The share of shapes cut open by a random plane (open surfaces, one-sided scans)."""
    fragment_share: float = 0.0
    """The share of shapes (after any open cut) broken into open pieces with gaps of 1-5 % of the
    diagonal between them (`inr.pointcloud.shapes.fragment_cut`: surfaces with many free edges,
    as scans of built scenes show); 0 draws nothing, the stream of earlier runs."""
    scan_share: float = 0.0
    """The share of steps whose input is a range scan (`inr.pointcloud.shapes.RangeScan`: 2-8
    depth cameras, noise along the rays, dense where the surface faces a camera, sparse where
    rays graze it) and whose target is the part of the surface its cameras see; the rest are
    points spread evenly with noise per coordinate (`Corruption`)."""
    shape_resolution: int = 128
    """Marching-cubes lattice of the synthetic shapes (thin parts need ~3 cells across)."""
    init_weights: Optional[str] = None
    """Start from these weights (a model.pt or the shipped assets/pointcloud.pt): fine-tuning.
    The model settings (field) must be the same."""
    family_weights: Tuple[float, ...] = FAMILY_WEIGHTS
    """How often each family of synthetic shapes is drawn (`inr.pointcloud.shapes.FAMILIES`:
    union, creature, winged, drilled, bracket); the default is the shipped weights' stream."""
    noise_given: str = "read"
    """For a network that reads the noise level (`field.noise_input`), the level each pair gives
    it: 'read' (the network reads it from the input, as `reconstruct` does) or 'truth' (the
    input's distance to the planes of the clean points, times a random factor spanning the
    reading's error): a plate then shows a spread the given level does not explain."""

    FLOATS = ("lr", "eps", "lr_final_factor", "voxels_per_diagonal", "mesh_share", "open_share", "scan_share",
              "fragment_share")

    def check(self) -> None:
        if not all(0 <= x <= 1 for x in (self.mesh_share, self.open_share, self.scan_share, self.fragment_share)):
            raise ValueError("train.mesh_share, train.open_share, train.scan_share and train.fragment_share must be in [0, 1]")
        if self.shape_resolution < 16:
            raise ValueError(f"train.shape_resolution must be >= 16, got {self.shape_resolution}")
        self.family_weights = tuple(float(w) for w in self.family_weights)  # type: ignore[assignment]
        if len(self.family_weights) != len(FAMILIES) or min(self.family_weights) < 0 or sum(self.family_weights) <= 0:
            raise ValueError(f"train.family_weights must be {len(FAMILIES)} weights >= 0 ({', '.join(FAMILIES)}), "
                             f"not all 0, got {list(self.family_weights)}")
        if self.noise_given not in ("read", "truth"):
            raise ValueError(f"train.noise_given must be read or truth, got {self.noise_given!r}")


@dataclass
class SdfTrainConfig(OptimConfig):
    """How a signed distance field is fitted to oriented surface points (SIREN's loss, see
    `inr.sdf`). Lengths are in the field's frame: the input's longest side spans 1.8."""

    steps: int = 2000
    lr: float = 1e-4
    surface_batch: int = 8192
    """Surface points (with their normals) per step."""
    space_batch: int = 8192
    """Points off the surface per step: uniform in the box, and a `near_share` of them near it."""
    near_share: float = 0.0
    """Share of the space points drawn as surface points plus Gaussian noise of `near_std`
    (eikonal term only); the rest are uniform in [-1, 1]^3 (eikonal and off-surface terms)."""
    near_std: float = 0.02
    gradient: str = "analytic"
    """'analytic' (autograd, twice differentiable networks such as SIREN) or 'numerical'
    (central differences of step grad_step, any network: the hash-grid presets)."""
    grad_step: Tuple[float, float] = (0.02, 0.002)
    """Numerical gradients: the difference step at the run's start and end (geometric decay
    over the run, like the learning rate), coarse first as in Neuralangelo."""
    sphere_prior: float = 0.0
    """> 0: the field is network + (|x| - sphere_prior), so that training starts from a sphere
    of that radius (far space positive from step 0); 0: the network alone (SIREN's setting)."""
    w_sdf: float = 3e3
    w_normal: float = 1e2
    w_eikonal: float = 5e1
    w_off_surface: float = 1e2
    off_surface_alpha: float = 100.0
    w_sign: float = 0.0
    """> 0: the sign term (see `inr.sdf.sdf_loss_terms`): space points farther than sign_margin
    from the surface points must have the sign of their side of the nearest point's tangent plane."""
    sign_margin: float = 0.02
    sign_votes: int = 1
    """The sign term's side of a point: the majority over this many nearest surface points."""
    adapt_resolution: float = 0.0
    """> 0, hash-grid fields: the finest grid resolution is at most this / the median distance
    between neighbouring input points (in the field's box): a sparse scan gets a coarser, smoother
    field instead of one that bulges between its points (0: the preset's resolution as is)."""
    mesh_resolution: int = 256
    """Marching-cubes lattice points per side of the run's mesh.ply (any other: inr extract-mesh)."""
    mesh_trim: float = 0.0
    """> 0: large patches of the mesh farther than this many units from every input point go
    (the unit: the larger of the input's median point spacing and the mesh lattice's cell;
    `inr.sdf.trim_to_points`): the level set closes an open scan (a figure without its base, a
    scanned facade) far from any point, and noisy scans grow webs between parts; 0: the whole
    level set (closed, watertight)."""

    FLOATS = ("lr", "eps", "lr_final_factor", "near_share", "near_std", "sphere_prior", "w_sdf", "w_normal",
              "w_eikonal", "w_off_surface", "off_surface_alpha", "w_sign", "sign_margin", "adapt_resolution", "mesh_trim")
    POSITIVE = ("steps", "eval_every", "checkpoint_every", "surface_batch", "space_batch", "mesh_resolution", "sign_votes")

    def check(self) -> None:
        self.grad_step = tuple(float(v) for v in self.grad_step)  # type: ignore[assignment]
        if self.gradient not in ("analytic", "numerical"):
            raise ValueError(f"train.gradient must be 'analytic' or 'numerical', got {self.gradient!r}")
        if len(self.grad_step) != 2 or min(self.grad_step) <= 0:
            raise ValueError(f"train.grad_step must be two steps > 0 (start, end), got {list(self.grad_step)}")
        if not 0 <= self.near_share <= 1:
            raise ValueError(f"train.near_share must be in [0, 1], got {self.near_share}")
        if self.sphere_prior < 0 or self.near_std <= 0 or self.w_sign < 0 or self.sign_margin < 0 or self.mesh_trim < 0:
            raise ValueError("train.sphere_prior, w_sign, sign_margin and mesh_trim must be >= 0, train.near_std > 0")
        if self.mesh_resolution < 8:
            raise ValueError(f"train.mesh_resolution must be >= 8, got {self.mesh_resolution}")


def _field_config(task: str):
    """The field (model) config class of a task's presets, imported only when needed."""
    if task in SIGNAL_TASKS or task == "sdf":
        from .fields import FieldConfig

        return FieldConfig
    if task == "nerf":
        from .render.radiance import RadianceFieldConfig

        return RadianceFieldConfig
    from .pointcloud.network import ReconstructionConfig

    return ReconstructionConfig


SIGNAL_TASKS = ("image", "audio", "video")
TRAIN_CONFIGS = {"image": TrainConfig, "audio": TrainConfig, "video": TrainConfig, "sdf": SdfTrainConfig,
                 "nerf": NerfTrainConfig, "pointcloud": PointCloudTrainConfig}
"""Every task's train config; its field config comes from `_field_config`."""


@dataclass
class Preset:
    """A named preset of one task: what to train (`field`) and how (`train`)."""

    name: str
    task: str
    description: str
    field: Any
    train: Any

    @classmethod
    def from_dict(cls, name: str, data: Dict[str, Any]) -> "Preset":
        unknown = set(data) - {"task", "description", "field", "train"}
        if unknown:
            raise ValueError(f"unknown preset keys {sorted(unknown)}")
        task = data.get("task")
        if task not in TRAIN_CONFIGS:
            raise ValueError(f"task must be one of {tuple(TRAIN_CONFIGS)}, got {task!r}")
        field_cls = _field_config(task)
        field_data = dict(data.get("field") or {})
        if hasattr(field_cls, "from_dict"):
            fld = field_cls.from_dict(field_data)
        else:
            fld = from_dict_strict(field_cls, field_data, "field")
        return cls(name, task, str(data.get("description", "")), fld, TRAIN_CONFIGS[task].from_dict(dict(data.get("train") or {})))

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "task": self.task, "description": self.description,
                "field": _plain(asdict(self.field)), "train": self.train.to_dict()}


def load_preset(name_or_path: str, task: str, overrides: Optional[Dict[str, Any]] = None) -> Preset:
    """A preset of `task` by name or YAML path, with dotted overrides ('train.lr'), validated."""
    label, path, data = read_preset_data(name_or_path, task, overrides)
    try:
        preset = Preset.from_dict(label, data)
    except (TypeError, ValueError) as exc:
        raise InputError(path, f"invalid preset: {exc}") from None
    if preset.task != task:
        raise InputError(path, f"is a {preset.task} preset, not a {task} one")
    return preset


def preset_from_saved(data: Dict[str, Any]) -> Preset:
    """The preset a run saved in its config.yaml (Preset.to_dict())."""
    return Preset.from_dict(data["name"], {k: v for k, v in data.items() if k != "name"})


def load_nerf_preset(name_or_path: str, overrides: Optional[Dict[str, Any]] = None) -> Preset:
    return load_preset(name_or_path, "nerf", overrides)


def describe_preset(name: str, task: str) -> str:
    return load_preset(name, task).description
