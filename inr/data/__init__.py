"""Readers that turn files into tensors (and metadata), with one clear error per bad file."""

from .audio import AudioSignal, read_audio
from .images import ImageSignal, read_image
from .signal import Signal
from .video import VideoSignal, read_video

__all__ = ["AudioSignal", "ImageSignal", "Signal", "VideoSignal", "read_audio", "read_image", "read_video"]
