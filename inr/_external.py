"""Every optional import of the toolkit, loaded lazily, failing at use with what to install.

A probe (import, and for nerfacc the build of its CUDA extension) runs once per process; its
success or its error is remembered, so a missing backend costs nothing after the first call.
`resolve_backend` is the one place that turns 'auto' into a backend, with one warning when a
fast backend is skipped on a device where it would have run.
"""

from __future__ import annotations

import functools
import importlib
import os
import warnings
from typing import Any, Callable, Dict, Optional, Set, Tuple

import torch


class MissingBackend(ImportError):
    """An optional backend was asked for but is not usable here."""


_HINTS = {
    "tinycudann": "build it from its repository on a CUDA machine (see the README's GPU section)",
    "nerfacc": "pip install 'inr[cuda]' (its CUDA code compiles on first use and needs nvcc)",
    "inr_native": "install a C++ compiler with OpenMP (Debian: apt-get install g++), or set INR_NATIVE=0 to silence this",
    "open3d": "pip install 'inr[open3d]' (Debian/Ubuntu also need apt-get install libusb-1.0-0)",
    "tensorboard": "pip install 'inr[tensorboard]'",
    "wandb": "pip install 'inr[wandb]'",
    "viser": "pip install 'inr[viewer]'",
    "laspy": "pip install 'inr[las]'",
    "lazrs": "pip install 'inr[las]' (LAZ decompression)",
    "pye57": "pip install 'inr[e57]'",
}
_PROBES: Dict[str, Tuple[Any, Optional[str]]] = {}
_WARNED: Set[str] = set()


def _probe(key: str, load: Callable[[], Any]) -> Any:
    if key not in _PROBES:
        try:
            _PROBES[key] = (load(), None)
        except Exception as exc:  # a broken native build raises OSError/RuntimeError, not only ImportError
            _PROBES[key] = (None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else 'no detail'}")
    value, error = _PROBES[key]
    if error is not None:
        raise MissingBackend(f"{key} is not usable ({error}); {_HINTS.get(key, 'pip install ' + key)}")
    return value


def warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, stacklevel=3)


def tinycudann():
    """The tinycudann module; raises MissingBackend without CUDA or without the package."""
    if not torch.cuda.is_available():
        raise MissingBackend("tinycudann needs a CUDA device and none is available")
    return _probe("tinycudann", lambda: importlib.import_module("tinycudann"))


def _nerfacc_with_kernels():
    module = importlib.import_module("nerfacc")
    from nerfacc.cuda._backend import _C  # builds (or loads) the CUDA extension

    if _C is None:
        raise RuntimeError("its CUDA extension did not build (is nvcc on PATH and CUDA_HOME set?)")
    return module


def nerfacc():
    """The nerfacc module with its CUDA kernels built; raises MissingBackend otherwise."""
    if not torch.cuda.is_available():
        raise MissingBackend("nerfacc's marching kernels need a CUDA device and none is available")
    return _probe("nerfacc", _nerfacc_with_kernels)


def open3d():
    """The open3d module; raises MissingBackend when it is not installed or does not load."""
    return _probe("open3d", lambda: importlib.import_module("open3d"))


def laspy(compressed: bool = False):
    """The laspy module (LAS point clouds); with compressed, also a LAZ backend (lazrs)."""
    module = _probe("laspy", lambda: importlib.import_module("laspy"))
    if compressed:
        _probe("lazrs", lambda: importlib.import_module("lazrs"))
    return module


def pye57():
    """The pye57 module (E57 point clouds)."""
    return _probe("pye57", lambda: importlib.import_module("pye57"))


def native_cpu():
    """The toolkit's own CPU kernels (`torch.ops.inr_native`), compiled on first use and cached;
    raises MissingBackend where they cannot build or INR_NATIVE=0 turns them off."""

    def load():
        if os.environ.get("INR_NATIVE", "1") == "0":
            raise RuntimeError("turned off by INR_NATIVE=0")
        return importlib.import_module("inr.native").build()

    return _probe("inr_native", load)


def has_native_cpu() -> bool:
    return why_not(native_cpu) is None


def ffmpeg() -> str:
    """The path of the ffmpeg binary that imageio-ffmpeg ships (MP4 writing)."""
    return _probe("imageio_ffmpeg", lambda: importlib.import_module("imageio_ffmpeg").get_ffmpeg_exe())


def why_not(load: Callable[[], Any]) -> Optional[str]:
    """None when load() works, else its MissingBackend message."""
    try:
        load()
    except MissingBackend as exc:
        return str(exc)
    return None


def has_nerfacc() -> bool:
    return why_not(nerfacc) is None


def has_tinycudann() -> bool:
    return why_not(tinycudann) is None


def has_open3d() -> bool:
    return why_not(open3d) is None


def resolve_backend(requested: str, name: str, what: str, problem: Optional[str]) -> str:
    """The backend to run `what` with: 'torch' or `name`.

    problem: None when `name` can run this configuration on this device, else why it cannot.
    'auto' takes `name` when it can and otherwise falls back to torch with one warning;
    `name` asked for explicitly but unusable raises MissingBackend; 'torch' is always torch.
    """
    if requested not in ("auto", "torch", name):
        raise ValueError(f"backend must be 'auto', 'torch' or {name!r}, got {requested!r}")
    if requested == "torch":
        return "torch"
    if problem is None:
        return name
    if requested == name:
        raise MissingBackend(f"{what}: backend {name!r} cannot be used: {problem}")
    warn_once(f"{what}: {name} is not used ({problem}); running the pure-torch twin instead")
    return "torch"


def uses_native(requested: str, what: str, twin: str = "torch") -> bool:
    """Whether `what` runs on the native CPU kernels (`native_cpu`) for the backend `requested`:
    'native' (raises MissingBackend where they do not build), `twin` (never), or 'auto' (where
    they build, else the twin with one warning). The caller has checked that the call is one
    the kernel computes (device, dtype, gradients)."""
    if requested not in ("auto", twin, "native"):
        raise ValueError(f"backend must be 'auto', {twin!r} or 'native', got {requested!r}")
    if requested == twin:
        return False
    return resolve_backend(requested, "native", what, why_not(native_cpu)) == "native"


def prepare_backends(module: torch.nn.Module, device: torch.device) -> None:
    """Resolve (and build, where that takes time) the backend of every submodule that has a
    fast path (a `prepare_backend(device)` method: hash grids, MLPs) for `device` now, so that a
    first-use build is not charged to a run's training seconds."""
    for m in module.modules():
        if hasattr(m, "prepare_backend") and device.type not in getattr(m, "_backends", {}):
            m.prepare_backend(torch.device(device))


def experiment_logger(name: str):
    """The tracker's package ('tensorboard' or 'wandb'); raises MissingBackend naming the extra."""
    return _probe(name, lambda: importlib.import_module(name))


def viser():
    """The viser package (the web viewer's server)."""
    return _probe("viser", lambda: importlib.import_module("viser"))


def not_traced(fn: Callable) -> Callable:
    """fn as `torch.compiler.disable` makes it (never traced into a compiled graph: it runs eagerly
    there), with the disable applied on fn's first call instead of at its definition: disable
    imports torch._dynamo (~1 s), which a command that never compiles (`inr --help`, point-cloud
    inference) need not pay for. A first call inside a compiled region runs it eagerly too."""
    disabled = None

    @functools.wraps(fn)
    def call(*args, **kwargs):
        nonlocal disabled
        if disabled is None:
            disabled = torch.compiler.disable(fn)
        return disabled(*args, **kwargs)

    return call
