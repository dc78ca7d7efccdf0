"""`inr fit-image`: a field over (y, x) fitted to one image."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict

from .. import metrics
from ..data import read_image
from .base import register_task
from .outputs import write_error_image, write_image
from .signal import SignalOptions, SignalTask


@dataclass
class ImageOptions(SignalOptions):
    alpha: str = "fit"
    """RGBA images: 'fit' all 4 channels, or 'composite' onto white and fit RGB."""


@register_task("image")
class ImageTask(SignalTask):
    Options = ImageOptions
    default_asset = "astronaut.png"
    input_help = "image file (default: the bundled 512x512 astronaut photo)"
    outputs_help = "reconstruction.png, error.png, curve.png"

    @classmethod
    def add_arguments(cls, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--alpha", choices=["fit", "composite"],
                            help="RGBA images: fit all 4 channels (default) or composite onto white and fit RGB")

    @classmethod
    def options_from_args(cls, args) -> Dict[str, Any]:
        return {**super().options_from_args(args), "alpha": getattr(args, "alpha", None)}

    def read(self, path: str):
        return read_image(path, alpha=self.options.alpha)

    def sample_render(self, module):
        img = self.predict(module)[..., :3]  # RGBA: the colour channels
        return img.expand(*img.shape[:2], 3) if img.shape[-1] == 1 else img

    def write_signal_outputs(self, out: Path, pred, p_test, t_test, title: str) -> Dict[str, Any]:
        write_image(out / "reconstruction.png", pred, getattr(self.signal, "bit_depth", 8))
        write_error_image(out / "error.png", pred, self.signal.values)
        return {"ssim": round(metrics.ssim(p_test, t_test, 1.0), 5), "shape": list(self.signal.values.shape)}
