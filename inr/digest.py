"""A hash of numpy arrays, for the keys of kept work (`inr.tasks.stages`: a command's stages, and
each tile of the network's run, `inr.pointcloud.reconstruct.tile_key`)."""

from __future__ import annotations

import hashlib
from typing import Optional

import numpy as np


def array_digest(*arrays: Optional[np.ndarray]) -> str:
    """A hash of the arrays' shapes, dtypes and bytes (None counts as absent)."""
    h = hashlib.blake2b(digest_size=20)
    for a in arrays:
        if a is None:
            h.update(b"none;")
            continue
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()
