"""Render the held-out unbounded capture with Mitsuba 3 (path traced; no code of `inr` makes these
pixels): textured objects on a textured ground that runs to the horizon, far walls, a panorama
sky and a sun; ~100 JPEG photos (4:3) on a walk around the objects and an MP4 of a similar walk.
The true cameras go to truth.json (OpenGL camera-to-world), which no tool reads but the
benchmark (`scripts/bench_capture.py --scene DIR`).

    .venv/bin/python scripts/make_capture_scene.py data/heldout-capture [--photos 100] [--frames 150]

Needs `pip install mitsuba` (`make capture-scene` does both).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inr.data.testscenes import look_at  # noqa: E402


def fractal_noise(size: int, rng: np.random.Generator, octaves=(4, 16, 64, 256, 1024), gains=(1.0, 0.6, 0.4, 0.3, 0.25)):
    """(size, size) sum of bilinearly upsampled random grids, normalised to [0, 1]."""
    from skimage.transform import resize

    out = np.zeros((size, size), np.float32)
    for cells, gain in zip(octaves, gains):
        if cells > size:
            continue
        out += gain * resize(rng.random((cells, cells)).astype(np.float32), (size, size), order=1)
    out -= out.min()
    return out / out.max()


def ground_texture(size: int, rng) -> np.ndarray:
    """Grass and dirt patches, with pebbles: no repeating structure."""
    n1, n2 = fractal_noise(size, rng), fractal_noise(size, rng)
    grass, dirt = np.array([0.25, 0.42, 0.14]), np.array([0.48, 0.36, 0.22])
    mix = np.clip((n1 - 0.45) * 5, 0, 1)[..., None]
    tex = grass * (1 - mix) + dirt * mix
    tex *= (0.6 + 0.8 * n2)[..., None]
    k = size * size // 400
    r, c = rng.integers(0, size - 3, k), rng.integers(0, size - 3, k)
    shade = rng.uniform(0.3, 0.9, k)[:, None]
    for dr in range(3):
        for dc in range(3):
            tex[r + dr, c + dc] = shade
    return np.clip(tex, 0, 1).astype(np.float32)


def sky_panorama(width: int, rng) -> np.ndarray:
    """Equirectangular sky: a blue gradient with clouds above the horizon, dark earth below."""
    h = width // 2
    elev = (0.5 - (np.arange(h) + 0.5) / h)[:, None] * np.pi  # +pi/2 top
    base = np.where(elev > 0, 1.0, 0.0)
    blue = np.array([0.25, 0.45, 0.85]) * (1 - 0.5 * np.clip(elev, 0, None) / (np.pi / 2))[..., None] + 0.4
    clouds = fractal_noise(width, rng, octaves=(8, 32, 128, 512), gains=(1.0, 0.7, 0.4, 0.2))[:h]
    c = np.clip((clouds - 0.5) * 3, 0, 1)[..., None]
    sky = blue * (1 - c) + np.array([1.0, 1.0, 1.0]) * c
    earth = np.broadcast_to(np.array([0.2, 0.18, 0.15]), sky.shape)
    out = np.where(base[..., None] > 0, sky, earth) * 1.2
    return np.ascontiguousarray(np.broadcast_to(out, (h, width, 3)), np.float32)


def picture(name: str, tint=(1.0, 1.0, 1.0)) -> np.ndarray:
    from skimage import data

    img = np.asarray(getattr(data, name)(), np.float32) / 255.0
    if img.ndim == 2:
        img = img[..., None] * np.array(tint, np.float32)
    return np.ascontiguousarray(img[..., :3])


def scene_dict(mi, rng) -> dict:
    T = mi.ScalarTransform4f

    def textured(img, scale=1.0):
        return {"type": "diffuse", "reflectance": {"type": "bitmap", "bitmap": mi.Bitmap(img), "raw": False,
                                                  "to_uv": mi.ScalarTransform4f().scale([scale, scale, 1])}}

    d = {
        "type": "scene",
        "integrator": {"type": "path", "max_depth": 3},
        "sky": {"type": "envmap", "bitmap": mi.Bitmap(sky_panorama(2048, rng)), "scale": 1.0,
                "to_world": T().rotate([1, 0, 0], 90)},  # the map's up (+y) turns to +z
        "sun": {"type": "directional", "direction": [-0.4, -0.3, -0.85], "irradiance": {"type": "rgb", "value": 2.5}},
        # a 60 x 60 ground with its own detail, inside a tiled ground to the horizon
        "ground": {"type": "rectangle", "to_world": T().scale([30, 30, 1]), "bsdf": textured(ground_texture(4096, rng))},
        "far_ground": {"type": "rectangle", "to_world": T().translate([0, 0, -0.01]).scale([3000, 3000, 1]),
                       "bsdf": textured(ground_texture(1024, rng), scale=200.0)},
        # objects around the origin
        "box": {"type": "cube", "to_world": T().translate([0.1, -0.2, 0.35]).rotate([0, 0, 1], 25).scale(0.35),
                "bsdf": textured(picture("astronaut"))},
        "ball": {"type": "sphere", "center": [-0.55, 0.45, 0.3], "radius": 0.3, "bsdf": textured(picture("coffee"))},
        "pillar": {"type": "cylinder", "p0": [0.6, 0.55, 0.0], "p1": [0.6, 0.55, 0.9], "radius": 0.15,
                   "bsdf": textured(picture("chelsea"))},
        "crate": {"type": "cube", "to_world": T().translate([-0.5, -0.6, 0.15]).rotate([0, 0, 1], -40).scale(0.15),
                  "bsdf": textured(picture("rocket"))},
    }
    # far walls: textured panels 12-20 units out, around part of the horizon
    walls = [("camera", (0.9, 0.8, 0.7)), ("brick", (0.9, 0.55, 0.45)), ("page", (0.8, 0.85, 1.0)), ("gravel", (0.9, 0.9, 0.8)),
             ("moon", (0.8, 0.9, 0.8)), ("text", (1.0, 0.9, 0.7))]
    for k, (name, tint) in enumerate(walls):
        a = 2 * np.pi * k / len(walls) + 0.3
        r = 12.0 + 3.0 * (k % 3)
        x, y = r * np.cos(a), r * np.sin(a)
        # a rectangle facing the origin: its normal (+z) turns to -(x, y)
        to_world = (T().translate([x, y, 2.0]).rotate([0, 0, 1], float(np.degrees(a)) + 90).rotate([1, 0, 0], 90)
                    .scale([3.5, 2.0, 1]))
        d[f"wall{k}"] = {"type": "rectangle", "to_world": to_world, "bsdf": {"type": "twosided", "bsdf": textured(picture(name, tint))}}
    return d


def walk(n: int, rng, radius=2.6, height=1.2, turns=1.0, wobble=True) -> np.ndarray:
    """(n, 4, 4) OpenGL cameras walking around the objects at a varying distance and height,
    each looking near the centre."""
    out = []
    for k in range(n):
        a = 2 * np.pi * turns * k / n
        r = radius + (0.35 * np.sin(2 * a) if wobble else 0.0)
        z = height + 0.3 * np.sin(3 * a + 0.5)
        target = np.array([0.15 * np.cos(5 * a), 0.15 * np.sin(4 * a), 0.25])
        if wobble:
            target = target + rng.normal(0, 0.05, 3)
        out.append(look_at((r * np.cos(a), r * np.sin(a), z), target))
    return np.stack(out) if out else np.zeros((0, 4, 4))


def render_views(mi, scene_d, poses, size, focal, spp):
    """uint8 sRGB renders (H, W, 3) of the scene from each OpenGL camera."""
    w, h = size
    fov = float(np.degrees(2 * np.arctan(0.5 * w / focal)))
    scene = mi.load_dict(scene_d)
    for m in poses:
        eye, fwd, up = m[:3, 3], -m[:3, 2], m[:3, 1]
        sensor = mi.load_dict({"type": "perspective", "fov": fov, "fov_axis": "x",
                               "to_world": mi.ScalarTransform4f().look_at(origin=eye.tolist(), target=(eye + fwd).tolist(), up=up.tolist()),
                               "film": {"type": "hdrfilm", "width": w, "height": h, "rfilter": {"type": "gaussian"}},
                               "sampler": {"type": "independent", "sample_count": spp}})
        img = mi.render(scene, sensor=sensor, spp=spp)
        yield np.asarray(mi.util.convert_to_bitmap(img))[..., :3]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--photos", type=int, default=100)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--size", type=int, nargs=2, default=(640, 480))
    ap.add_argument("--video-size", type=int, nargs=2, default=(480, 360))
    ap.add_argument("--spp", type=int, default=16, help="samples per pixel of the photos (the video's: half, at least 8)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    import imageio.v3 as iio
    import mitsuba as mi

    mi.set_variant("scalar_rgb")
    rng = np.random.default_rng(args.seed)
    out = Path(args.out)
    (out / "photos").mkdir(parents=True, exist_ok=True)
    scene_d = scene_dict(mi, rng)
    focal = 0.8 * args.size[0]
    photos = walk(args.photos, rng)
    frames = walk(args.frames, rng, radius=2.9, height=1.4, wobble=False)
    start = time.perf_counter()
    for k, img in enumerate(render_views(mi, scene_d, photos, args.size, focal, args.spp)):
        iio.imwrite(out / "photos" / f"IMG_{k:04d}.jpg", img, quality=90)
        if k == 0:
            print(f"first photo in {time.perf_counter() - start:.1f} s", flush=True)
    print(f"{args.photos} photos in {time.perf_counter() - start:.0f} s", flush=True)
    if args.frames:
        video_focal = 0.8 * args.video_size[0]
        video = np.stack(list(render_views(mi, scene_d, frames, args.video_size, video_focal, max(8, args.spp // 2))))
        iio.imwrite(out / "walk.mp4", video, fps=24, codec="libx264", quality=8, macro_block_size=1, plugin="FFMPEG")
    truth = {"focal": focal, "size": list(args.size), "photos": {f"IMG_{k:04d}.jpg": m.tolist() for k, m in enumerate(photos)},
             "video_fps": 24, "video_focal": 0.8 * args.video_size[0], "video_size": list(args.video_size),
             "video_frames": [m.tolist() for m in frames]}
    (out / "truth.json").write_text(json.dumps(truth))
    print(f"wrote {out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
