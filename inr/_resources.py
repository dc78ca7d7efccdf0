"""Where the bundled presets (configs/) and samples (assets/) are.

In a source checkout or editable install they are the repository's top-level folders; a wheel
(`pip install .`) carries them inside the package as inr/configs and inr/assets (see
pyproject.toml's package-dir)."""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    inside = _PKG / name
    return inside if inside.is_dir() else _PKG.parent / name
