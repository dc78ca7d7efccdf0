"""Distances between point clouds: Chamfer (two stated forms), Hausdorff, F-score.

Nearest neighbours come from open3d's KD-tree (`compute_point_cloud_distance`); the formulas
are these:
- d_PG(p) = min_g |p - g|, d_GP(g) = min_p |g - p|  (Euclidean);
- chamfer_l2 = mean_p d_PG(p)^2 + mean_g d_GP(g)^2          (sum of the two mean squared distances);
- chamfer_l1 = (mean_p d_PG(p) + mean_g d_GP(g)) / 2         (average of the two mean distances);
- hausdorff  = max(max_p d_PG(p), max_g d_GP(g));
- F-score(t) = 2 P R / (P + R), precision P = share of p with d_PG < t, recall R = share of g with d_GP < t.
"""

from __future__ import annotations

from typing import Dict

import numpy as np


def _cloud(points: np.ndarray):
    import open3d as o3d

    return o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, dtype=np.float64)))


def nearest_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(len(a),) distance from each point of a to its nearest point of b."""
    if len(a) == 0 or len(b) == 0:
        raise ValueError("distances need two non-empty clouds")
    return np.asarray(_cloud(a).compute_point_cloud_distance(_cloud(b)))


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
