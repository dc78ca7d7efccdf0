"""Helpers for the typed config dataclasses: strict construction from plain dicts (YAML)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Dict, Iterable, Type, TypeVar

T = TypeVar("T")


def from_dict_strict(cls: Type[T], data: Dict[str, Any], what: str, floats: Iterable[str] = ()) -> T:
    """cls(**data), refusing keys the dataclass does not have (a typo in a YAML preset must not be
    silently ignored); `floats` are converted with float() (YAML reads 1e-3 as a string), None kept."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown {what} keys {sorted(unknown)}; expected {sorted(known)}")
    obj = cls(**data)
    for name in floats:
        if getattr(obj, name) is not None:
            setattr(obj, name, float(getattr(obj, name)))
    return obj
