"""`--device auto|cpu|cuda[:N]`: which device a command computes on."""

from __future__ import annotations

import torch

from .errors import InputError


def resolve_device(spec: str = "auto") -> torch.device:
    """'auto' -> the first CUDA device when there is one, else the CPU; 'cpu'; 'cuda' or 'cuda:N'
    (an InputError when that device does not exist here)."""
    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    try:
        dev = torch.device(spec)
    except RuntimeError:
        raise InputError(None, f"--device must be auto, cpu, cuda or cuda:N, got {spec!r}") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise InputError(None, f"--device must be auto, cpu, cuda or cuda:N, got {spec!r}")
    if not torch.cuda.is_available():
        raise InputError(None, f"--device {spec}: this machine has no CUDA device (torch {torch.__version__}"
                         f"{', a CPU-only build' if torch.version.cuda is None else ''}); use --device cpu")
    index = 0 if dev.index is None else dev.index
    if index >= torch.cuda.device_count():
        raise InputError(None, f"--device {spec}: there are {torch.cuda.device_count()} CUDA device(s)")
    return torch.device("cuda", index)
