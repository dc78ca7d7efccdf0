"""Readers that turn files into tensors (and metadata), with one clear error per bad file."""

from .audio import AudioSignal, read_audio
from .images import ImageSignal, read_image
from .signal import Signal

__all__ = ["AudioSignal", "ImageSignal", "Signal", "read_audio", "read_image"]
