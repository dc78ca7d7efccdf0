"""`inr nerf process INPUT OUT_SCENE`: photos or a video in, a posed scene folder out.

Frames of a video are taken at a chosen rate, keeping the sharper of every two candidates
(variance of the Laplacian); structure from motion is pycolmap's (SIFT on the CPU, exhaustive
matching for photo sets and small frame sets, sequential matching for longer videos,
incremental mapping); the largest model is written as a scene folder in nerfstudio's
convention: `transforms.json` (OpenGL camera-to-world poses, intrinsics and distortion),
`images/` with `images_2/4/8` copies, `sparse/0/` (the COLMAP model) and `sparse_pc.ply` (the
sparse points with colours). The folder is built beside OUT_SCENE and moved there when complete.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from .. import progress
from ..data.scenes import image_size
from ..data.video import FRAME_SUFFIXES, VIDEO_SUFFIXES
from ..errors import InputError

CAMERA_MODELS = ("SIMPLE_RADIAL", "OPENCV", "PINHOLE", "SIMPLE_PINHOLE", "RADIAL", "OPENCV_FISHEYE")
MATCHERS = ("auto", "exhaustive", "sequential")
DOWNSCALES = (2, 4, 8)
EXHAUSTIVE_UP_TO = 120  # images; beyond, sequential matching for videos


def sharpness(img: np.ndarray) -> float:
    """Variance of the Laplacian of the gray image (higher: sharper)."""
    from scipy.ndimage import laplace

    gray = img[..., :3].astype(np.float32).mean(-1) if img.ndim == 3 else img.astype(np.float32)
    return float(laplace(gray).var())


def extract_frames(video: Path, folder: Path, fps: Optional[float], num_frames: int) -> Dict[str, Any]:
    """Frames of `video` into folder/frame_NNNNN.jpg (NNNNN: the frame's number in the video, from
    1): candidates at twice the chosen rate (`fps`, or the rate giving about `num_frames`), of
    each consecutive pair the sharper kept."""
    import imageio.v3 as iio

    try:
        meta = iio.immeta(video)
        src_fps = float(meta.get("fps") or 25.0)
        duration = float(meta.get("duration") or 0.0)
    except Exception as exc:  # imageio/ffmpeg raise many types for unreadable files
        raise InputError(video, f"cannot be read as a video ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'})") from None
    total = int(round(duration * src_fps)) if duration > 0 else None
    if fps is not None:
        step = max(1, int(round(src_fps / (2 * fps))))
    else:
        step = max(1, (total or 2 * num_frames) // (2 * num_frames))
    folder.mkdir(parents=True, exist_ok=True)
    kept: List[Path] = []
    pending = None  # (score, frame) of the first candidate of a pair
    seen = 0
    bar = progress.bar(None, f"frames of {video.name}", total=total, unit="frame")
    try:
        for k, frame in enumerate(iio.imiter(video)):
            seen += 1
            bar.update(1)
            if k % step:
                continue
            score = sharpness(frame)
            if pending is None:
                pending = (score, frame, k)
                continue
            _, best, index = max(pending, (score, frame, k), key=lambda c: c[0])
            pending = None
            kept.append(folder / f"frame_{index + 1:05d}.jpg")  # named by its frame number in the video
            iio.imwrite(kept[-1], np.asarray(best)[..., :3], quality=95)
    except Exception as exc:  # a truncated or unreadable stream
        if not seen:
            raise InputError(video, f"cannot be read as a video ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'})") from None
    finally:
        bar.close()
    if pending is not None:
        kept.append(folder / f"frame_{pending[2] + 1:05d}.jpg")
        iio.imwrite(kept[-1], np.asarray(pending[1])[..., :3], quality=95)
    return {"video_frames": seen, "candidates_every": step, "frames": len(kept), "source_fps": src_fps}


def copy_photos(src: Path, folder: Path) -> int:
    files = sorted(f for f in src.iterdir() if f.is_file() and f.suffix.lower() in FRAME_SUFFIXES)
    if not files:
        raise InputError(src, f"holds no photos ({', '.join(FRAME_SUFFIXES)})")
    folder.mkdir(parents=True, exist_ok=True)
    for f in progress.bar(files, "copying photos", unit="photo"):
        shutil.copy2(f, folder / f.name)
    return len(files)


def write_downscaled(images: Path, names: List[str]) -> None:
    """images_2/4/8 copies (area resampling), the sizes nerfstudio writes."""
    from PIL import Image

    for name in progress.bar(names, "downscaled copies", unit="image"):
        with Image.open(images / name) as im:
            im = im.convert("RGB")
            for d in DOWNSCALES:
                out = images.parent / f"images_{d}" / name
                out.parent.mkdir(exist_ok=True)
                im.resize((max(1, im.width // d), max(1, im.height // d)), Image.Resampling.BOX).save(out, quality=95)


def run_sfm(images: Path, work: Path, matcher: str, camera_model: str, max_size: int, n_images: int, video: bool,
            one_camera: bool = True):
    """pycolmap's SIFT + matching + incremental mapping; the model with most registered images.
    one_camera: all images share one camera (their sizes are equal), else one camera each."""
    import pycolmap

    pycolmap.logging.minloglevel = 2  # warnings and errors only; our bars show progress
    db = work / "database.db"
    names = sorted(p.name for p in images.iterdir())
    reader = pycolmap.ImageReaderOptions()
    reader.camera_model = camera_model
    extraction = pycolmap.FeatureExtractionOptions()
    extraction.max_image_size = max_size
    extraction.use_gpu = False
    with progress.bar(None, "SIFT features", total=len(names), unit="image") as bar:
        mode = pycolmap.CameraMode.SINGLE if one_camera else pycolmap.CameraMode.PER_IMAGE
        for k in range(0, len(names), 8):  # in chunks, for the bar
            chunk = names[k : k + 8]
            pycolmap.extract_features(db, images, image_names=chunk, camera_mode=mode,
                                      reader_options=reader, extraction_options=extraction, device=pycolmap.Device.cpu)
            if one_camera:
                reader.existing_camera_id = 1  # the first chunk made the one camera: later chunks share it
            bar.update(len(chunk))
    matching = pycolmap.FeatureMatchingOptions()
    matching.use_gpu = False
    if matcher == "auto":
        matcher = "sequential" if video and n_images > EXHAUSTIVE_UP_TO else "exhaustive"
    with progress.bar(None, f"{matcher} matching", total=1, unit="stage") as bar:
        if matcher == "sequential":
            pycolmap.match_sequential(db, matching_options=matching, device=pycolmap.Device.cpu)
        else:
            pycolmap.match_exhaustive(db, matching_options=matching, device=pycolmap.Device.cpu)
        bar.update(1)
    options = pycolmap.IncrementalPipelineOptions()
    options.random_seed = 0
    out = work / "models"
    out.mkdir()
    with progress.bar(None, "mapping (images tried)", unit="image") as bar:
        models = pycolmap.incremental_mapping(db, images, out, options=options, next_image_callback=lambda: bar.update(1))
    if not models:
        return None, matcher
    return max(models.values(), key=lambda r: r.num_reg_images()), matcher


def write_transforms(rec, out: Path, extra: Dict[str, Any]) -> int:
    """transforms.json in nerfstudio's convention from a pycolmap model (OpenGL camera-to-world
    in COLMAP's world frame; per-frame intrinsics when there are several cameras)."""
    from ..data.colmap import c2w_of, camera_of
    from ..data.pointclouds import write_cloud

    cams = {}
    for cid, cam in rec.cameras.items():
        (fx, fy, cx, cy), lens = camera_of(cam, out / "sparse" / "0")
        cams[cid] = {"camera_model": lens.model, "fl_x": fx, "fl_y": fy, "cx": cx, "cy": cy, "w": int(cam.width),
                     "h": int(cam.height), "k1": lens.k[0], "k2": lens.k[1], "k3": lens.k[2], "k4": lens.k[3],
                     "p1": lens.p[0], "p2": lens.p[1]}
    frames = []
    for img in sorted((im for im in rec.images.values() if im.has_pose), key=lambda im: im.name):
        frame = {"file_path": f"images/{img.name}", "transform_matrix": c2w_of(img).tolist(), "colmap_im_id": int(img.image_id)}
        if len(cams) > 1:
            frame.update(cams[img.camera_id])
        frames.append(frame)
    data: Dict[str, Any] = dict(next(iter(cams.values()))) if len(cams) == 1 else {}
    data.update({"frames": frames, "ply_file_path": "sparse_pc.ply", "inr_process": extra})
    (out / "transforms.json").write_text(json.dumps(data, indent=2))
    pts = [(p.xyz, p.color) for p in rec.points3D.values()]
    if pts:
        xyz = np.array([p[0] for p in pts], np.float32)
        rgb = np.array([p[1] for p in pts], np.float32) / 255.0
        write_cloud(out / "sparse_pc.ply", xyz, rgb)
    return len(frames)


def process(input_path: Path, out: Path, *, fps: Optional[float] = None, num_frames: int = 100, matcher: str = "auto",
            camera_model: str = "SIMPLE_RADIAL", max_size: int = 1600, min_registered: float = 0.5,
            overwrite: bool = False) -> Dict[str, Any]:
    """Photos (a folder) or a video (a file) -> a posed scene folder at `out`. Raises InputError
    when the input is unusable or fewer than `min_registered` of the images register (nothing is
    written then)."""
    try:
        import pycolmap  # noqa: F401
    except ImportError:
        raise InputError(None, "nerf process needs pycolmap: pip install 'inr[captures]'") from None
    input_path, out = Path(input_path), Path(out)
    if matcher not in MATCHERS:
        raise InputError(None, f"--matcher must be one of {', '.join(MATCHERS)}")
    if camera_model not in CAMERA_MODELS:
        raise InputError(None, f"--camera-model must be one of {', '.join(CAMERA_MODELS)}")
    if not input_path.exists():
        raise InputError(input_path, "no such file or folder")
    video = input_path.is_file()
    if video and input_path.suffix.lower() not in VIDEO_SUFFIXES:
        raise InputError(input_path, f"is neither a folder of photos nor a video ({', '.join(VIDEO_SUFFIXES)})")
    if out.exists() and not overwrite:
        raise InputError(out, "exists; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise InputError(out.parent, "no such folder")
    t0 = time.perf_counter()
    work = out.parent / f".{out.name}.partial"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        images = work / "images"
        info: Dict[str, Any] = {"input": str(input_path)}
        if video:
            info.update(extract_frames(input_path, images, fps, num_frames))
            n = info["frames"]
            if n < 3:
                raise InputError(input_path, f"gave {n} frames; structure from motion needs at least 3 (a longer video, or --fps higher)")
        else:
            n = copy_photos(input_path, images)
            if n < 3:
                raise InputError(input_path, f"holds {n} photos; structure from motion needs at least 3")
        sizes = {image_size(f) for f in sorted(images.iterdir())}  # every image readable before the long stages
        rec, used = run_sfm(images, work, matcher, camera_model, max_size, n, video, one_camera=len(sizes) == 1)
        registered = 0 if rec is None else rec.num_reg_images()
        if registered < max(3, min_registered * n):
            raise InputError(input_path, f"only {registered} of {n} images registered (at least {max(3, int(np.ceil(min_registered * n)))} "
                             "needed): the images need more overlap, texture and sharpness"
                             + ("" if used == "exhaustive" else "; try --matcher exhaustive"))
        error = float(rec.compute_mean_reprojection_error())
        info.update({"images": n, "registered": registered, "reprojection_error_px": round(error, 4), "matcher": used,
                     "camera_model": camera_model, "points": int(rec.num_points3D())})
        sparse = work / "sparse" / "0"
        sparse.mkdir(parents=True)
        rec.write_binary(str(sparse))
        registered_names = sorted(im.name for im in rec.images.values() if im.has_pose)
        write_downscaled(images, sorted(p.name for p in images.iterdir()))
        info["seconds"] = round(time.perf_counter() - t0, 2)
        write_transforms(rec, work, info)
        (work / "database.db").unlink(missing_ok=True)
        shutil.rmtree(work / "models", ignore_errors=True)
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    info["registered_names"] = registered_names
    return info
