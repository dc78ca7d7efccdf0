"""What image, audio and video fits share: a field over a regular grid of samples, fitted by
MSE, scored on held-out or all samples. The three tasks differ only in reading their input and
in the files they write (`image.py`, `audio.py`, `video.py`)."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch

from .. import metrics
from .._resources import data_dir
from ..data.signal import HOLDOUTS, Signal, grid_coords, split_holdout
from ..errors import InputError
from ..networks import count_parameters
from .base import Task, TaskOptions
from .outputs import plot_curve


@dataclass
class SignalOptions(TaskOptions):
    holdout: str = "none"
    """'none': fit and score every sample; 'even-odd': train on even-index samples, score the odd ones."""


class SignalTask(Task):
    """Base of the sampled-signal tasks. Subclasses set `native_range`, `default_asset` and
    implement `read` and `write_signal_outputs`."""

    default_preset = "hashgrid"
    Options = SignalOptions
    native_range: Tuple[float, float] = (0.0, 1.0)
    default_asset: Optional[str] = None

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("--holdout", choices=list(HOLDOUTS), help="'none' (default): fit and score every sample; "
                            "'even-odd': train on even-index samples, score the odd ones (Tancik et al.'s protocol)")

    @classmethod
    def options_from_args(cls, args) -> Dict[str, Any]:
        return {"holdout": args.holdout}

    def default_input(self) -> Optional[str]:
        return str(data_dir("assets") / self.default_asset) if self.default_asset else None

    @abstractmethod
    def read(self, path: str) -> Signal:
        """The signal of a file (InputError on bad input)."""

    @property
    def value_range(self) -> Tuple[float, float]:
        return tuple(self.preset.train.value_range)

    def load(self) -> None:
        if self.opts.input is None:
            raise InputError(None, f"fit-{self.name} needs an input file (or --resume DIR)")
        if self.options.holdout not in HOLDOUTS:
            raise InputError(None, f"--holdout must be one of {', '.join(HOLDOUTS)}")
        self.signal = self.read(self.opts.input)
        if self.options.holdout == "even-odd" and min(self.signal.grid_shape) < 2:
            raise InputError(self.opts.input, "is too small for the even-odd holdout (needs 2 samples per axis)")
        _, _, self.test_coords, self.test_values = split_holdout(self.signal.values, self.options.holdout)

    def build_module(self):
        from .signal_fit import SignalFitModule

        sig = self.signal
        return SignalFitModule(sig.in_dim, sig.channels, self.preset.field.to_dict(), asdict(self.preset.train))

    def build_data(self):
        from .signal_fit import SignalData

        cfg = self.preset.train
        return SignalData(self.signal.values, self.options.holdout, cfg.batch_size, self.native_range, self.value_range,
                          seed=self.opts.seed)

    def measure(self, module) -> float:
        pred = module.predict_values(self.test_coords, self.value_range, self.native_range)
        return metrics.psnr(pred, self.test_values, data_range=self.native_range[1] - self.native_range[0])

    def predict(self, module, shape=None, level: Optional[int] = None) -> torch.Tensor:
        """The field on the signal's grid (or another grid `shape`), in the native range."""
        shape = tuple(shape or self.signal.grid_shape)
        pred = module.predict_values(grid_coords(shape), self.value_range, self.native_range, level=level)
        return pred.view(*shape, -1)

    def write_outputs(self, out: Path, module, steps: int, seconds: float, history) -> Dict[str, Any]:
        sig = self.signal
        pred = self.predict(module)
        rng = self.native_range[1] - self.native_range[0]
        even_odd = self.options.holdout == "even-odd"
        test_sel = tuple(slice(1, None, 2) for _ in sig.grid_shape) if even_odd else ()
        train_sel = tuple(slice(0, None, 2) for _ in sig.grid_shape) if even_odd else ()
        p_test, t_test = pred[test_sel], sig.values[test_sel]
        result: Dict[str, Any] = {
            "signal": sig.path,
            "holdout": self.options.holdout,
            "psnr": round(metrics.psnr(p_test, t_test, rng), 4),
            "train_psnr": round(metrics.psnr(pred[train_sel], sig.values[train_sel], rng), 4),
            "steps": int(steps),
            "seconds": round(seconds, 3),
            "params": count_parameters(module.field),
            "precision": self.preset.train.precision,
            "compile": self.preset.train.compile,
            "seed": self.opts.seed,
        }
        if module.field.num_levels > 1:
            result["level_psnr"] = [round(metrics.psnr(self.predict(module, level=k)[test_sel], t_test, rng), 4)
                                    for k in range(module.field.num_levels)]
        title = f"{self.preset.name} on {Path(sig.path).name}"
        result.update(self.write_signal_outputs(out, pred, p_test, t_test, title))
        plot_curve(out / "curve.png", history, title)
        return result

    @abstractmethod
    def write_signal_outputs(self, out: Path, pred: torch.Tensor, p_test: torch.Tensor, t_test: torch.Tensor,
                             title: str) -> Dict[str, Any]:
        """The task's own files (reconstruction, plots) and metrics."""

    @staticmethod
    def summary(r: Dict[str, Any]) -> str:
        quality = f"PSNR {r['psnr']:.2f} dB" + (f", SSIM {r['ssim']:.4f}" if "ssim" in r else "") + (
            f", SNR {r['snr_db']:.2f} dB" if "snr_db" in r else "")
        return f"{r['preset']}: {quality} ({r['holdout']}) after {r['steps']} steps in {r['seconds']:.1f} s, {r['params']:,} parameters"
