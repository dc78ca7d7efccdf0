"""Render the bundled NeRF scene `scenes/tabletop` with Mitsuba 3 (a physically based renderer).

    .venv/bin/pip install mitsuba && .venv/bin/python scripts/make_scene.py [--out scenes/tabletop]

A red sphere, a blue box and a yellow cylinder on a checkered ground plate, lit by an area
light and a dim sky; 200 x 200 RGBA views from the upper hemisphere at radius 4 (60 train,
5 val, 10 test), written in the Blender-synthetic format (transforms_{split}.json, OpenGL
camera-to-world matrices, camera_angle_x). Alpha is 0 where a ray leaves the scene.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

SPLITS = {"train": 60, "val": 5, "test": 10}
FOV_DEG = 40.0


def camera_positions(n: int, seed: int, radius: float = 4.0):
    """n points on the upper hemisphere (elevation 15-70 degrees), stratified in azimuth."""
    rng = np.random.default_rng(seed)
    az = (np.arange(n) + rng.uniform(0, 1, n)) / n * 2 * math.pi
    el = np.radians(rng.uniform(15, 70, n))
    return np.stack([radius * np.cos(el) * np.cos(az), radius * np.cos(el) * np.sin(az), radius * np.sin(el)], -1)


def scene_dict(mi, origin, size: int, spp: int):
    T = mi.ScalarTransform4f
    diffuse = lambda rgb: {"type": "diffuse", "reflectance": {"type": "rgb", "value": rgb}}
    return {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": 6, "hide_emitters": True},
        "sensor": {
            "type": "perspective",
            "fov": FOV_DEG,
            "fov_axis": "x",
            "to_world": T().look_at(origin=origin.tolist(), target=[0, 0, -0.1], up=[0, 0, 1]),
            "film": {"type": "hdrfilm", "width": size, "height": size, "pixel_format": "rgba", "rfilter": {"type": "gaussian"}},
            "sampler": {"type": "independent", "sample_count": spp},
        },
        "sky": {"type": "constant", "radiance": {"type": "rgb", "value": 0.45}},
        "light": {"type": "rectangle", "to_world": T().translate([1.0, -1.0, 3.0]).scale(0.8),
                  "emitter": {"type": "area", "radiance": {"type": "rgb", "value": 20.0}}},
        "ground": {"type": "rectangle", "to_world": T().translate([0, 0, -0.5]).scale(1.4),
                   "bsdf": {"type": "diffuse", "reflectance": {"type": "checkerboard", "color0": 0.15, "color1": 0.85,
                                                              "to_uv": mi.ScalarTransform4f().scale([6, 6, 1])}}},
        "sphere": {"type": "sphere", "center": [-0.45, 0.3, -0.05], "radius": 0.45, "bsdf": diffuse([0.8, 0.1, 0.1])},
        "box": {"type": "cube", "to_world": T().translate([0.5, 0.35, -0.2]).rotate([0, 0, 1], 30).scale(0.3),
                "bsdf": diffuse([0.1, 0.25, 0.8])},
        "cylinder": {"type": "cylinder", "p0": [0.1, -0.6, -0.5], "p1": [0.1, -0.6, 0.3], "radius": 0.2,
                     "bsdf": diffuse([0.9, 0.75, 0.1])},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="scenes/tabletop")
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--spp", type=int, default=128)
    args = ap.parse_args()
    import imageio.v3 as iio
    import mitsuba as mi

    mi.set_variant("scalar_rgb")
    out = Path(args.out)
    flip = np.diag([-1.0, 1.0, -1.0, 1.0])  # Mitsuba camera axes -> OpenGL / Blender
    for seed, (split, n) in enumerate(SPLITS.items()):
        (out / split).mkdir(parents=True, exist_ok=True)
        frames = []
        for k, origin in enumerate(camera_positions(n, seed)):
            scene = mi.load_dict(scene_dict(mi, origin, args.size, args.spp))
            img = np.array(mi.render(scene, seed=k))  # linear RGBA
            rgb = np.clip(img[..., :3], 0, 1)
            srgb = np.where(rgb <= 0.0031308, 12.92 * rgb, 1.055 * rgb ** (1 / 2.4) - 0.055)
            rgba = np.concatenate([srgb, np.clip(img[..., 3:], 0, 1)], -1)
            iio.imwrite(out / split / f"r_{k}.png", (rgba * 255 + 0.5).astype(np.uint8))
            c2w = np.array(scene.sensors()[0].world_transform().matrix) @ flip
            frames.append({"file_path": f"./{split}/r_{k}", "transform_matrix": c2w.tolist()})
        meta = {"camera_angle_x": math.radians(FOV_DEG), "aabb": [-1.5, -1.5, -0.6, 1.5, 1.5, 1.2], "frames": frames}
        (out / f"transforms_{split}.json").write_text(json.dumps(meta, indent=1))
        print(f"{split}: {n} views")


if __name__ == "__main__":
    main()
