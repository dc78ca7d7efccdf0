"""Distances between point clouds: Chamfer (two stated forms), Hausdorff, F-score.

Nearest neighbours come from a float64 KD-tree (open3d's `compute_point_cloud_distance`, or
scipy's cKDTree without open3d: the same distances); the formulas are these:
- d_PG(p) = min_g |p - g|, d_GP(g) = min_p |g - p|  (Euclidean);
- chamfer_l2 = mean_p d_PG(p)^2 + mean_g d_GP(g)^2          (sum of the two mean squared distances);
- chamfer_l1 = (mean_p d_PG(p) + mean_g d_GP(g)) / 2         (average of the two mean distances);
- hausdorff  = max(max_p d_PG(p), max_g d_GP(g));
- F-score(t) = 2 P R / (P + R), precision P = share of p with d_PG < t, recall R = share of g with d_GP < t.
"""

from __future__ import annotations

from typing import Dict

import numpy as np


def nearest_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a),) distance from each point of a to its nearest point of b."""
    if len(a) == 0 or len(b) == 0:
        raise ValueError("distances need two non-empty clouds")
    from .. import _external

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if _external.has_open3d():
        o3d = _external.open3d()
        cloud = lambda x: o3d.geometry.PointCloud(o3d.utility.Vector3dVector(x))  # noqa: E731
        return np.asarray(cloud(a).compute_point_cloud_distance(cloud(b)))
    from scipy.spatial import cKDTree

    return cKDTree(b).query(a, k=1, workers=-1)[0]


def compare(pred: np.ndarray, gt: np.ndarray, threshold: float) -> Dict[str, float]:
    """Every metric of the module docstring, plus the point counts."""
    d_pg, d_gp = nearest_distances(pred, gt), nearest_distances(gt, pred)
    precision, recall = float((d_pg < threshold).mean()), float((d_gp < threshold).mean())
    f = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return {
        "chamfer_l2": float((d_pg**2).mean() + (d_gp**2).mean()),
        "chamfer_l1": float((d_pg.mean() + d_gp.mean()) / 2),
        "hausdorff": float(max(d_pg.max(), d_gp.max())),
        "fscore": f,
        "precision": precision,
        "recall": recall,
        "threshold": float(threshold),
        "pred_points": int(len(pred)),
        "gt_points": int(len(gt)),
    }
