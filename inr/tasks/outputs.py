"""Files a run writes: images, audio, plots, JSON, meshes (and a scan's colours carried onto its
outputs). Matplotlib is imported only here, lazily."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import torch

ERROR_SCALE = 0.1  # error.png saturates at an absolute error of 10 % of the value range


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_json(path: Path, data: Dict[str, Any]) -> None:
    """Write JSON atomically (a reader never sees half a file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


MESH_FORMATS = (".ply", ".obj", ".glb")


def check_suffix(path: Path, allowed, what: str) -> None:
    """An InputError unless `path` has one of the `allowed` suffixes and its folder exists."""
    from ..errors import InputError

    if path.suffix.lower() not in allowed:
        raise InputError(path, f"unsupported {what} format {path.suffix or '(none)'}; use one of {', '.join(allowed)}")
    if not path.parent.is_dir():
        raise InputError(path.parent, "no such folder")


def write_mesh(path: Path, mesh) -> None:
    """Write a trimesh atomically (.ply, .obj, .glb: trimesh picks the format from the suffix).
    Far from the origin, where float32 would round the vertices (`float32_loses`), a PLY is
    written with float64 vertices (`inr.data.ply64`; trimesh writes float32) and a GLB, whose
    positions are float32 by the glTF standard, holds the mesh about its box centre under a
    node that moves it back; OBJ is text with enough digits already."""
    from ..data.ply64 import write_ply_float64
    from ..data.pointclouds import float32_loses

    tmp = path.with_name(f".tmp-{path.name}")
    suffix = path.suffix.lower()
    far = float32_loses(mesh.vertices)
    try:
        if far and suffix == ".ply":
            colors = mesh.visual.vertex_colors if getattr(mesh.visual, "kind", None) == "vertex" else None
            write_ply_float64(tmp, mesh.vertices, np.asarray(mesh.faces), colors=colors)
        elif far and suffix == ".glb":
            import trimesh

            centre = (mesh.vertices.min(0) + mesh.vertices.max(0)) / 2
            local = mesh.copy()
            local.vertices = mesh.vertices - centre
            move = np.eye(4)
            move[:3, 3] = centre
            scene = trimesh.Scene()
            scene.add_geometry(local, transform=move)
            scene.export(tmp, file_type="glb")
        else:
            mesh.export(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def nearest_rows(at: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The index (M,) of the nearest of the cloud's `points` to each of `at`'s (M, 3) points (the
    searches in float64 about the cloud's centre: exact far from the origin)."""
    from ..pointcloud.knn import knn

    idx, _ = knn(torch.from_numpy(np.asarray(at, np.float64)), torch.from_numpy(np.asarray(points, np.float64)), 1)
    return idx[:, 0].numpy()


def nearest_colours(at: np.ndarray, points: np.ndarray, colors: np.ndarray) -> np.ndarray:
    """The colour of each of `at`'s (M, 3) points: that of its nearest of the cloud's `points`
    (`nearest_rows`)."""
    return colors[nearest_rows(at, points)]


def paint_mesh(mesh, points: np.ndarray, colors: np.ndarray) -> None:
    """Give each of a trimesh's vertices its nearest cloud point's colour (`nearest_colours`)."""
    rgb = np.clip(nearest_colours(mesh.vertices, points, colors) * 255 + 0.5, 0, 255).astype(np.uint8)
    mesh.visual.vertex_colors = np.concatenate([rgb, np.full((len(rgb), 1), 255, np.uint8)], 1)


def image_to_array(img: torch.Tensor, bit_depth: int = 8) -> np.ndarray:
    """(H, W, C) in [0, 1] -> uint8 or uint16 array for imageio (C = 1 is written as gray)."""
    a = img.detach().clamp(0, 1).cpu().numpy()
    if a.shape[-1] == 1:
        a = a[..., 0]
    if bit_depth == 16:
        return (a * 65535.0 + 0.5).astype(np.uint16)
    return (a * 255.0 + 0.5).astype(np.uint8)


def write_image(path: Path, img: torch.Tensor, bit_depth: int = 8) -> None:
    import imageio.v3 as iio

    tmp = path.with_name(".tmp-" + path.name)
    iio.imwrite(tmp, image_to_array(img, 16 if bit_depth == 16 else 8), extension=path.suffix)
    os.replace(tmp, path)


def write_error_image(path: Path, pred: torch.Tensor, target: torch.Tensor) -> None:
    """Mean absolute error over channels, inferno colour map from 0 to ERROR_SCALE."""
    import imageio.v3 as iio
    from matplotlib import colormaps

    err = (pred - target).abs().mean(-1).cpu().numpy() / ERROR_SCALE
    rgb = colormaps["inferno"](np.clip(err, 0, 1))[..., :3]
    iio.imwrite(path, (rgb * 255 + 0.5).astype(np.uint8))


def plot_curve(path: Path, history: Sequence[Sequence[float]], title: str, label: str = "test PSNR (dB)") -> None:
    plt = _plt()
    h = np.asarray(history, dtype=float)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.plot(h[:, 0], h[:, 2], marker=".")
    a.set_xlabel("step")
    b.plot(h[:, 1], h[:, 2], marker=".")
    b.set_xlabel("training seconds (compile included, evaluation excluded)")
    for ax in (a, b):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_audio(path: Path, pred: np.ndarray, target: np.ndarray, rate: int, title: str) -> None:
    """Waveforms (target and reconstruction, first channel) and both spectrograms."""
    plt = _plt()
    t = np.arange(target.shape[0]) / rate
    fig, axes = plt.subplots(3, 1, figsize=(10, 7.5))
    axes[0].plot(t, target[:, 0], lw=0.5, label="target")
    axes[0].plot(t, pred[:, 0], lw=0.5, alpha=0.7, label="reconstruction")
    axes[0].set_xlabel("seconds")
    axes[0].legend(loc="upper right")
    nfft = int(min(512, 2 ** np.floor(np.log2(max(target.shape[0] // 4, 16)))))
    for ax, sig, name in ((axes[1], target, "target"), (axes[2], pred, "reconstruction")):
        ax.specgram(sig[:, 0], Fs=rate, NFFT=nfft, noverlap=nfft * 3 // 4, cmap="magma")
        ax.set_ylabel(f"{name}\nHz")
    axes[2].set_xlabel("seconds")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_compare(path: Path, curves: Dict[str, List[List[float]]], ylabel: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, h in curves.items():
        h = np.asarray(h, dtype=float)
        ax.plot(h[:, 1], h[:, 2], marker=".", label=name)
    ax.set_xlabel("training seconds")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_audio(path: Path, samples: torch.Tensor, rate: int) -> None:
    """(T, C) amplitudes to a WAV file, atomically; 16-bit PCM when they fit [-1, 1], else float."""
    import soundfile as sf

    data = samples.detach().cpu().numpy()
    tmp = path.with_name(".tmp-" + path.name)
    try:
        sf.write(str(tmp), data, rate, subtype="PCM_16" if float(np.abs(data).max(initial=0)) <= 1.0 else "FLOAT",
                 format="WAV")
        if sf.info(str(tmp)).frames != data.shape[0]:
            raise OSError(f"{path}: the written file does not hold the {data.shape[0]} samples")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_video(path: Path, frames: np.ndarray, fps: float) -> Tuple[int, int]:
    """(T, H, W, 3) uint8 frames to .mp4 (libx264) or .gif, atomically, and read back to check
    that every frame is there. H.264's usual pixel format needs even sizes: an odd height or
    width is padded by repeating the last row or column. Returns the written (H, W)."""
    import imageio.v3 as iio

    if frames.ndim != 4 or len(frames) == 0:
        raise ValueError(f"write_video needs (T, H, W, 3) frames, got {frames.shape}")
    suffix = path.suffix.lower()
    if suffix == ".mp4":
        pad_h, pad_w = frames.shape[1] % 2, frames.shape[2] % 2
        if pad_h or pad_w:
            frames = np.pad(frames, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    tmp = path.with_name(".tmp-" + path.name)
    try:
        if suffix == ".mp4":
            iio.imwrite(tmp, frames, fps=fps, codec="libx264", macro_block_size=1, plugin="FFMPEG")
        else:
            iio.imwrite(tmp, frames, duration=1000 / fps, loop=0, extension=suffix)
        back = iio.imread(tmp, index=None, **({"plugin": "FFMPEG"} if suffix == ".mp4" else {"extension": suffix}))
        if tmp.stat().st_size == 0 or len(back) != len(frames):
            raise OSError(f"{path}: the video writer produced {len(back)} of {len(frames)} frames")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return int(frames.shape[1]), int(frames.shape[2])


def plot_frame_psnr(path: Path, psnr: Sequence[float], title: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.plot(np.arange(len(psnr)), psnr, marker=".")
    ax.set_xlabel("frame")
    ax.set_ylabel("PSNR (dB)")
    ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
