"""What a task is: how to read its input, build its Lightning module and data, measure it,
and write its outputs. The run lifecycle (`run.py`) does everything else, once for all tasks."""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Optional, Tuple, Type

from ..registry import Registry

if TYPE_CHECKING:  # annotations only: the CLI starts without torch
    import torch


@dataclass
class TaskOptions:
    """Options of one task beyond the shared run options (each task extends it)."""


class Task(ABC):
    """One kind of training run. Subclasses set the class attributes and the methods below.

    An instance lives for one run: `load()` reads and checks the input before anything is
    written (InputError on bad input), the other methods are called in the order listed.
    """

    name: ClassVar[str]
    default_preset: ClassVar[str]
    Options: ClassVar[Type[TaskOptions]] = TaskOptions
    input_help: ClassVar[str] = ""
    outputs_help: ClassVar[str] = ""
    log_every: ClassVar[int] = 50
    main_metric: ClassVar[str] = "psnr"
    """The metrics.json entry that `inr runs` shows for a finished run."""
    curve_name: ClassVar[str] = "PSNR"
    """What `measure` gives (the curve's value), shown by `inr runs` for an unfinished run."""

    def __init__(self, opts, preset, options: TaskOptions) -> None:
        self.opts, self.preset, self.options = opts, preset, options

    # ---- declared by each task ----------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Task options on the command line (default None: 'not given')."""

    @classmethod
    def options_from_args(cls, args: argparse.Namespace) -> Dict[str, Any]:
        """The TaskOptions fields the command line gave (None = not given)."""
        return {}

    def default_input(self) -> Optional[str]:
        return None

    @classmethod
    def auto_preset(cls, input: Optional[str]) -> Optional[Tuple[str, str]]:
        """(preset, why) when this input calls for another preset than `default_preset` (used
        when no --preset is given), else None. Must be cheap: the input is not loaded yet."""
        return None

    @abstractmethod
    def load(self) -> None:
        """Read and check the input (InputError on bad input); nothing is written yet."""

    @abstractmethod
    def build_module(self):
        """The LightningModule to train."""

    @abstractmethod
    def build_data(self):
        """The LightningDataModule that feeds it."""

    @abstractmethod
    def measure(self, module) -> float:
        """The curve's value (test PSNR, validation ratio, ...), computed without gradient."""

    def callbacks(self) -> list:
        """Lightning callbacks the task adds to its run (the NeRF live viewer)."""
        return []

    def sample_render(self, module) -> Optional["torch.Tensor"]:
        """An (H, W, 3) image in [0, 1] that shows the run's state (for the experiment tracker),
        or None when the task has none."""
        return None

    def gather(self, module) -> None:
        """Called on every DDP process after training, before the first one alone writes the
        outputs: the place for collective operations (sums over processes)."""

    @abstractmethod
    def write_outputs(self, out: Path, module, steps: int, seconds: float, history) -> Dict[str, Any]:
        """Write the run's files; return the metrics for metrics.json."""

    @staticmethod
    def summary(result: Dict[str, Any]) -> str:
        return f"{result['preset']}: {result['steps']} steps in {result['seconds']:.1f} s"


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


TASKS: Registry[Task] = Registry("task")
def register_task(name: str):
    """Class decorator: the task is known by `name` (its command-line and preset-folder name)."""

    def deco(cls):
        cls.name = name
        return TASKS.register(name)(cls)

    return deco


def get_task(name: str) -> Type[Task]:
    from . import audio, image, nerf_fit, pointcloud, sdf, video  # noqa: F401  (registration)

    return TASKS.get(name)
