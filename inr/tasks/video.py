"""`inr fit-video`: a field over (t, y, x) fitted to every frame of a clip at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import numpy as np

from .. import _external, metrics
from ..data import read_video
from .base import register_task
from .outputs import plot_frame_psnr, write_video
from .signal import SignalTask


@register_task("video")
class VideoTask(SignalTask):
    input_help = "video: MP4/GIF/... or a folder of frames"
    outputs_help = "reconstruction.mp4, frame_psnr.png, curve.png"

    def read(self, path: str):
        return read_video(path)

    def write_signal_outputs(self, out: Path, pred, p_test, t_test, title: str) -> Dict[str, Any]:
        sig = self.signal
        # scored frames: every frame, or with --holdout even-odd the odd frames' odd pixels
        per_frame = [round(metrics.psnr(p_test[k].clamp(0, 1), t_test[k], 1.0), 4) for k in range(len(p_test))]
        ssim = float(np.mean([metrics.ssim(p_test[k].clamp(0, 1), t_test[k], 1.0) for k in range(len(p_test))]))
        frames = pred.clamp(0, 1)
        rgb = frames if frames.shape[-1] == 3 else frames[..., :1].expand(*frames.shape[:-1], 3)
        name = "reconstruction.mp4"
        problem = _external.why_not(_external.ffmpeg)
        if problem is not None:  # a partial install (imageio-ffmpeg is a dependency): still write the video
            _external.warn_once(f"MP4 needs imageio-ffmpeg ({problem}); writing reconstruction.gif instead")
            name = "reconstruction.gif"
        write_video(out / name, (rgb.cpu().numpy() * 255 + 0.5).astype(np.uint8), sig.fps)
        plot_frame_psnr(out / "frame_psnr.png", per_frame, title)
        return {"ssim": round(ssim, 5), "frame_psnr": per_frame, "shape": list(sig.values.shape), "fps": sig.fps,
                "video": name}
