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


_ALLOCATOR_TUNED = False
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def keep_freed_memory(threshold: int = 256 << 20) -> bool:
    """Let glibc serve and keep blocks up to `threshold` bytes in the heap instead of mapping
    fresh pages for each and returning them at free. A training step allocates the same large
    buffers every time (the hash table's dense gradient: 49 MB for the NeRF preset); fresh pages
    cost a page fault per 4 KB on first touch, which was 14 of the 34 ms of the NeRF field's
    hash-grid forward+backward on this CPU. Once per process; True when applied (Linux with
    glibc), False elsewhere or with INR_MALLOC_TUNING=0. The price: a process keeps up to
    2 x threshold of freed memory for reuse instead of returning it to the system at once."""
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED:
        return True
    import ctypes
    import os
    import sys

    if os.environ.get("INR_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(M_MMAP_THRESHOLD, int(threshold)) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 2 * int(threshold)) == 1
    except (OSError, AttributeError):  # another C library (musl) or none by that name
        return False
    _ALLOCATOR_TUNED = ok
    return ok
