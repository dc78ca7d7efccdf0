"""Audio reading through soundfile (WAV, FLAC, OGG, MP3), amplitudes scaled to [-1, 1]."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError, first_line
from .signal import Signal


@dataclass
class AudioSignal(Signal):
    """values: (T, C) amplitudes divided by `scale` = max|a| (so in [-1, 1]); C channels are
    fitted as C outputs of one network (stereo stays stereo)."""

    sample_rate: int = 16000
    scale: float = 1.0


def read_audio(path: str | Path, max_seconds: float | None = None) -> AudioSignal:
    import soundfile as sf

    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file")
    if p.is_dir():
        raise InputError(p, "is a directory, not an audio file")
    if p.stat().st_size == 0:
        raise InputError(p, "file is empty (0 bytes)")
    _check_wav_length(p)
    try:
        data, rate = sf.read(str(p), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile raises LibsndfileError/RuntimeError/TypeError
        raise InputError(p, f"cannot be read as audio ({first_line(exc)})") from None
    if max_seconds is not None:
        data = data[: int(max_seconds * rate)]
    if data.shape[0] < 2:
        raise InputError(p, f"audio has {data.shape[0]} samples; at least 2 are needed")
    if not np.isfinite(data).all():
        raise InputError(p, "audio has NaN or infinite samples")
    scale = float(np.abs(data).max())
    if scale == 0.0:
        raise InputError(p, "audio is silent (all samples are 0)")
    values = torch.from_numpy(np.ascontiguousarray(data / scale, dtype=np.float32))
    return AudioSignal(values=values, kind="audio", path=str(p), sample_rate=int(rate), scale=scale)


def _check_wav_length(p: Path) -> None:
    """A WAV whose data chunk declares more bytes than the file holds was cut short (an
    interrupted download or recording); libsndfile would read the part that is there silently."""
    import struct

    with p.open("rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE" or head[:4] == b"RF64":
            return
        size = p.stat().st_size
        pos = 12
        while pos + 8 <= size:
            f.seek(pos)
            chunk_id, chunk_size = struct.unpack("<4sI", f.read(8))
            if chunk_id == b"data":
                held = size - pos - 8
                if chunk_size > held:
                    raise InputError(p, f"is truncated: its header declares {chunk_size:,} bytes of samples, the file holds {held:,}")
                return
            pos += 8 + chunk_size + (chunk_size & 1)
