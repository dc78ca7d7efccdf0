"""Every optional import of the toolkit, loaded lazily, failing at use with what to install."""

from __future__ import annotations

import importlib
import warnings
from functools import lru_cache
from types import ModuleType

import torch


class MissingBackend(ImportError):
    """An optional backend was asked for but is not usable here."""


_HINTS = {
    "tinycudann": "tinycudann needs CUDA and is built from its repository: "
    "pip install 'inr[cuda]' on a machine with CUDA, or see the README's GPU section",
}


@lru_cache(maxsize=None)
def _load(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a broken native build raises OSError/RuntimeError, not only ImportError
        raise MissingBackend(f"optional backend {name!r} is not usable ({exc}); {_HINTS.get(name, 'pip install ' + name)}") from exc


def tinycudann() -> ModuleType:
    """The tinycudann module; raises MissingBackend without CUDA or without the package."""
    if not torch.cuda.is_available():
        raise MissingBackend("tinycudann needs a CUDA device and none is available")
    return _load("tinycudann")


def nerfacc() -> ModuleType:
    """The nerfacc module; its marching kernels need CUDA (raises MissingBackend without it)."""
    if not torch.cuda.is_available():
        raise MissingBackend("nerfacc's marching kernels need a CUDA device and none is available")
    return _load("nerfacc")


def has_nerfacc() -> bool:
    try:
        nerfacc()
    except MissingBackend:
        return False
    return True


def has_tinycudann() -> bool:
    try:
        tinycudann()
    except MissingBackend:
        return False
    return True


def resolve_backend(requested: str, available: bool, name: str) -> str:
    """'auto' -> the fast backend when available else 'torch' (with a visible warning)."""
    if requested not in ("auto", "torch", name):
        raise ValueError(f"backend must be 'auto', 'torch' or {name!r}, got {requested!r}")
    if requested == "auto":
        if available:
            return name
        if torch.cuda.is_available():
            warnings.warn(f"{name} is not installed: using the pure-torch backend", stacklevel=3)
        return "torch"
    return requested
