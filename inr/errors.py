"""Errors the CLI reports as one line with exit code 2, and the stop a SIGTERM makes."""

from __future__ import annotations

from pathlib import Path
from typing import Union


class InputError(Exception):
    """Bad user input: a file that cannot be used, or a bad option value."""

    def __init__(self, path: Union[str, Path, None], problem: str) -> None:
        self.path = None if path is None else str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class Terminated(KeyboardInterrupt):
    """A SIGTERM (`kill PID`) met while a command keeps its work (`inr.tasks.stages.Stages.guarded`):
    stopped like Ctrl-C, with SIGTERM's exit code (143)."""

    signal = "SIGTERM"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when the message is empty): what
    an InputError quotes of a library's error."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
