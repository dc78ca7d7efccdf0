"""`inr fit-audio`: a field over t fitted to one audio clip (channels as outputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from .. import metrics
from ..data import read_audio
from .base import register_task
from .outputs import plot_audio, write_audio
from .signal import SignalTask


@register_task("audio")
class AudioTask(SignalTask):
    native_range = (-1.0, 1.0)
    default_asset = "speech.wav"
    main_metric = "snr_db"
    input_help = "audio file: WAV, FLAC, OGG, MP3 (default: the bundled 5 s 16 kHz speech clip)"
    outputs_help = "reconstruction.wav, audio.png, curve.png"

    @property
    def value_range(self):
        return self.native_range  # amplitudes are fitted in [-1, 1] whatever the preset says

    def read(self, path: str):
        return read_audio(path)

    def write_signal_outputs(self, out: Path, pred, p_test, t_test, title: str) -> Dict[str, Any]:
        sig = self.signal
        write_audio(out / "reconstruction.wav", pred * sig.scale, sig.sample_rate)
        plot_audio(out / "audio.png", pred.cpu().numpy(), sig.values.numpy(), sig.sample_rate, title)
        return {"snr_db": round(metrics.snr_db(p_test, t_test), 4), "sample_rate": sig.sample_rate,
                "samples": int(sig.values.shape[0])}
