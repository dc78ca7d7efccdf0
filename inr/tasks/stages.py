"""Finished stages of a long point-cloud command, kept so that the same command run again after a
kill picks up where it stopped.

A 10-million-point laser scan takes the network twenty minutes on two cores, band by band
(`inr.pointcloud.bands`). Each stage's arrays (the spacing bands, the MLS projection, each band's
output, the normals) are saved as it finishes, in a folder beside the output (`OUT.partial`),
under a key: a hash of the input's points (and of its normals and stations, which the normals
depend on) and the command's settings. A run whose key matches the folder's reuses what it holds;
another key starts the folder afresh. Inside the stage under way, each tile of the network's
run is kept too (`tile`, in `tiles/`), so that a kill in a long band loses at most the tile being
computed; a stage's tiles go once the stage is saved. The folder goes when the output has been
written.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import zipfile
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np

from .. import __version__
from ..digest import array_digest
from ..errors import InputError, Terminated

FORMAT = 2
"""Bumped when a stage's content changes meaning: an older folder then starts afresh (2: a banded
cloud's bands are made after the points off its surface are left out, `inr.pointcloud.bands`)."""
KEY_FILE = "key.json"
TILES = "tiles"

Arrays = Dict[str, np.ndarray]


def partial_folder(out: Path) -> Path:
    """Where the finished stages of a command writing `out` are kept: `OUT.partial` beside it."""
    return out.with_name(out.name + ".partial")


def _load_tile(path: Path) -> Optional[np.ndarray]:
    """A tile's array as saved, or None where there is no file or a damaged one: computed again."""
    if not path.is_file():
        return None
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None


@contextmanager
def _sigterm_stops() -> Iterator[None]:
    """While the block runs, a SIGTERM raises `Terminated` (where the handler can be set: the main
    thread), so that a `kill PID` stops a command as Ctrl-C does; the handler before is put back."""
    def stop(signum, frame):
        raise Terminated("terminated")

    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: signals are not Python's to take there
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _kept(folder: Path, suffix: str) -> List[Path]:
    """The files of `folder` ending in `suffix`, less the temporary ones a kill left half written."""
    return [p for p in folder.glob(f"*{suffix}") if not p.name.startswith(".tmp-")]


def _load(path: Path) -> Optional[Arrays]:
    """A stage's arrays as saved, or None where there is no file or a damaged one (a kill while the
    disk was full): that stage is then computed again."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None


def resumable(out: Path, scan, settings: Dict[str, Any]) -> "Stages":
    """The stages of a command that writes `out` from `scan` (`inr.data.pointclouds.Scan`, as the
    network gets it) with `settings` (JSON values: whatever else changes the result)."""
    key = {"scan": array_digest(scan.points, scan.normals, scan.towards, scan.up), **settings}
    return Stages(partial_folder(out), key)


def file_identity(path: Path) -> List[Any]:
    """A file's resolved path, size and modification time (a weights file's identity in a key)."""
    st = Path(path).stat()
    return [str(Path(path).resolve()), st.st_size, st.st_mtime_ns]


class Stages:
    """`stages(name, compute)`: the arrays `compute()` returns (a dict of numpy arrays), from the
    folder when a run with the same key saved them, else computed and saved (atomically: a temporary
    file renamed). `reused` names the stages taken from the folder."""

    def __init__(self, folder: Path, key: Dict[str, Any]) -> None:
        self.folder = Path(folder)
        # through JSON once, so that the key compares equal to the one read back (tuples, floats)
        self.key = json.loads(json.dumps({"format": FORMAT, "inr": __version__, **key}, sort_keys=True))
        self.reused: List[str] = []
        self.reused_tiles = 0
        self._ready = False

    def _prepare(self) -> None:
        """The folder holds this key's stages from here on: one of another key is emptied first."""
        if self._ready:
            return
        key_file = self.folder / KEY_FILE
        if self.folder.exists():
            if not key_file.is_file():
                raise InputError(self.folder, "is in the way: the command keeps its finished stages there "
                                 "(move it, or write the output elsewhere)")
            if not self._same_key():
                shutil.rmtree(self.folder)
        if not self.folder.exists():
            self.folder.mkdir()
            tmp = key_file.with_name(".tmp-" + KEY_FILE)
            tmp.write_text(json.dumps(self.key, indent=1, sort_keys=True))
            os.replace(tmp, key_file)
        self._ready = True

    def _same_key(self) -> bool:
        """Whether the folder's key is this run's (False where it has none, or an unreadable one)."""
        try:
            return json.loads((self.folder / KEY_FILE).read_text()) == self.key
        except (OSError, ValueError):
            return False

    def held(self) -> List[str]:
        """The stages this key finds in the folder (none where the folder is another key's)."""
        return sorted(p.stem for p in _kept(self.folder, ".npz")) if self._same_key() else []

    def __call__(self, name: str, compute: Callable[[], Arrays]) -> Arrays:
        self._prepare()
        path = self.folder / f"{name}.npz"
        kept = _load(path)
        if kept is not None:
            self.reused.append(name)
            return kept
        value = compute()
        tmp = path.with_name(f".tmp-{name}.npz")
        with tmp.open("wb") as f:
            np.savez(f, **value)
        os.replace(tmp, path)
        shutil.rmtree(self.folder / TILES, ignore_errors=True)  # the stage holds what its tiles made
        return value

    def tile(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """One tile of the network's run in the stage under way (`Reconstructor.keep_tiles`): the
        array kept under `key` (a hash of all it is computed from), else computed and kept."""
        self._prepare()
        path = self.folder / TILES / f"{key}.npy"
        kept = _load_tile(path)
        if kept is not None:
            self.reused_tiles += 1
            return kept
        value = np.ascontiguousarray(compute())
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".tmp-{key}.npy")
        with tmp.open("wb") as f:
            np.save(f, value)
        os.replace(tmp, path)
        return value

    def held_tiles(self) -> int:
        """How many tiles of an unfinished stage this key finds in the folder."""
        return len(_kept(self.folder / TILES, ".npy")) if self._same_key() else 0

    @contextmanager
    def guarded(self, sigterm: bool = True) -> Iterator[None]:
        """Around the command's work: a Ctrl-C inside, a SIGTERM with `sigterm` (`Terminated`; in the
        main thread, where Python takes signals; off where a Lightning fit runs inside, which takes
        SIGTERM itself and would call this handler from its own), or a training run stopped by a
        signal, says that the same command resumes from the folder (where it holds a stage or a
        tile); bad input found inside removes the folder (the same command would meet it again)."""
        with _sigterm_stops() if sigterm else nullcontext():
            try:
                yield
            except KeyboardInterrupt as exc:  # or Terminated, or a training run's RunStopped: its type is kept
                if not _kept(self.folder, ".npz") and not _kept(self.folder / TILES, ".npy"):
                    raise
                exc.args = (f"{str(exc) or 'interrupted'}; the same command resumes from {self.folder}",)
                raise
            except InputError:
                self.finish()
                raise

    def finish(self) -> None:
        """The output is written: the folder goes."""
        if (self.folder / KEY_FILE).is_file():
            shutil.rmtree(self.folder, ignore_errors=True)
