"""Point-cloud weights files (the model alone, as `inr pointcloud train` exports it) read for
inference, without the training stack: `pointcloud denoise|reconstruct|mesh` load their model here
and do not import Lightning (the maths layer's rule; it saved ~0.15 s of a command, as most of
Lightning's imports are torchmetrics', which `import inr` loads anyway)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Tuple

import torch

from ..errors import InputError
from .network import ReconstructionConfig
from .reconstruct import LEGACY_NOISE_DENSITY, LEGACY_NOISE_VOXEL, LEGACY_VOXEL_RULE, Reconstructor


def load_weights(path) -> Reconstructor:
    """The model a weights file (a path or its string) holds, in eval mode."""
    return read_weights(Path(path))[1]


def read_weights(path: Path) -> Tuple[Dict[str, Any], Reconstructor]:
    """(the file's contents as stored, the model they hold in eval mode)."""
    if not path.is_file():
        raise InputError(path, "no such weights file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
        model = Reconstructor(ReconstructionConfig(**data["config"]), data["voxels_per_diagonal"])
        state = dict(data["state_dict"])
        state.setdefault("max_density", torch.tensor(0.0))  # weights from before it was recorded: the default
        # weights from before the rule / its reading voxel / its reading density were stored
        state.setdefault("voxel_rule", torch.tensor(LEGACY_VOXEL_RULE))
        state.setdefault("share_rule", state["voxel_rule"].clone())  # one rule served both before
        state.setdefault("noise_voxel", torch.tensor(LEGACY_NOISE_VOXEL))
        state.setdefault("noise_density", torch.tensor(LEGACY_NOISE_DENSITY))
        model.load_state_dict(state)
    except Exception as exc:  # pickle/zip/key errors all mean "not our weights"
        raise InputError(path, f"is not a point-cloud weights file ({exc.__class__.__name__})") from None
    return data, model.eval()
