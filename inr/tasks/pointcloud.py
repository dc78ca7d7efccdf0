"""`inr pointcloud ...`: orchestration of point-cloud commands (files in, files/JSON out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from ..data.pointclouds import read_cloud
from ..errors import InputError
from ..pointcloud.metrics import compare

DEFAULT_THRESHOLD_SHARE = 0.01
"""F-score threshold when none is given: this share of the ground truth's bounding-box diagonal."""


def evaluate_files(pred: Path, gt: Path, threshold: Optional[float] = None, drop_duplicates: bool = False) -> Dict[str, Any]:
    """Chamfer (both forms), Hausdorff, F-score and counts of PRED against GT."""
    policy = "drop" if drop_duplicates else "error"
    p, _ = read_cloud(pred, policy)
    g, _ = read_cloud(gt, policy)
    diag = float(np.linalg.norm(g.max(0) - g.min(0)))
    if threshold is None:
        threshold, rule = DEFAULT_THRESHOLD_SHARE * diag, f"{DEFAULT_THRESHOLD_SHARE:g} x the ground truth's bounding-box diagonal"
    elif threshold <= 0:
        raise InputError(None, f"--threshold must be > 0, got {threshold}")
    else:
        rule = "given"
    out: Dict[str, Any] = {"pred": str(pred), "gt": str(gt)}
    out.update(compare(p, g, threshold))
    out.update({
        "threshold_rule": rule,
        "gt_bbox_diagonal": diag,
        "chamfer_l2_form": "mean_p min_g |p-g|^2 + mean_g min_p |g-p|^2",
        "chamfer_l1_form": "(mean_p min_g |p-g| + mean_g min_p |g-p|) / 2",
    })
    return out
