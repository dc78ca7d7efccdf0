"""A tiny name -> class registry shared by encodings and networks."""

from __future__ import annotations

from typing import Callable, Dict, Generic, List, Type, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a public name to a class; `build` checks the name and passes options through."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._classes: Dict[str, Type[T]] = {}

    def register(self, name: str) -> Callable[[Type[T]], Type[T]]:
        def deco(cls: Type[T]) -> Type[T]:
            if name in self._classes:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._classes[name] = cls
            cls.registry_name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def names(self) -> List[str]:
        return sorted(self._classes)

    def get(self, name: str) -> Type[T]:
        try:
            return self._classes[name]
        except KeyError:
            raise ValueError(
                f"unknown {self.kind} {name!r}; available: {', '.join(self.names())}"
            ) from None
