"""Progress bars of the long commands: tqdm on stderr (a total, a rate and an ETA), with one
switch for the process (`--no-progress` on the command line turns every bar off)."""

from __future__ import annotations

import sys
from typing import Iterable, Optional

_ENABLED = True


def set_enabled(enabled: bool) -> None:
    global _ENABLED
    _ENABLED = bool(enabled)


def bar(iterable: Optional[Iterable] = None, desc: str = "", total: Optional[float] = None, unit: str = "it"):
    """tqdm over `iterable` (or a manual bar when None) that disappears when done; off when the
    process's switch is off."""
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=not _ENABLED, leave=False, file=sys.stderr,
                dynamic_ncols=True, mininterval=0.5)
