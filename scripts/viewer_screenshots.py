"""Screenshots of `inr view` for the README (docs/viewer_*.png), taken in headless chromium.

    .venv/bin/python scripts/viewer_screenshots.py [--nerf RUN] [--image RUN]

--nerf: a nerf run folder (default bench-results/nerf/ngp-180s-native, from scripts/bench_nerf.py
--only native); --image: an image fit (default bench-results/image40). The point-cloud shot is a
noisy and a clean torus made here, side by side.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inr.data.pointclouds import write_cloud  # noqa: E402
from inr.viewer import Viewer, content_for  # noqa: E402
from tests.test_viewer import free_port, page_at  # noqa: E402

DOCS = Path("docs")


def shot(paths, out: Path, wait: float) -> None:
    viewer = Viewer(content_for(paths), port=free_port())
    try:
        with page_at(viewer.url) as page:
            time.sleep(wait)
            page.screenshot(path=str(out))
    finally:
        viewer.stop()
    print("wrote", out)


def torus(n: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u, v = rng.uniform(0, 2 * np.pi, (2, n))
    p = np.stack([(1 + 0.35 * np.cos(v)) * np.cos(u), (1 + 0.35 * np.cos(v)) * np.sin(u), 0.35 * np.sin(v)], -1)
    return p + rng.normal(scale=noise, size=p.shape)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nerf", default="bench-results/nerf/ngp-180s-native")
    ap.add_argument("--image", default="bench-results/image40")
    args = ap.parse_args()
    DOCS.mkdir(exist_ok=True)
    shot([Path(args.nerf)], DOCS / "viewer_nerf.png", 20.0)
    with tempfile.TemporaryDirectory() as tmp:
        noisy, clean = Path(tmp) / "noisy.ply", Path(tmp) / "clean.ply"
        colours = lambda p: (p - p.min(0)) / (p.max(0) - p.min(0))  # noqa: E731
        pn, pc = torus(20000, 0.03, 0), torus(20000, 0.0, 1)
        write_cloud(noisy, pn, colours(pn))
        write_cloud(clean, pc, colours(pc))
        shot([noisy, clean], DOCS / "viewer_clouds.png", 6.0)
    shot([Path(args.image)], DOCS / "viewer_image.png", 8.0)


if __name__ == "__main__":
    main()
