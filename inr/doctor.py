"""`inr doctor`: what this machine gives the toolkit - devices, backends and why, versions."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import List

import torch

from . import _external, __version__
from .devices import resolve_device


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _reason(load) -> str:
    problem = _external.why_not(load)
    return "usable" if problem is None else problem


def _native_folder() -> str:
    from .native import build_directory

    return str(build_directory().parent)


def report() -> List[str]:
    from .encodings.hashgrid import TCNN_DIMS, TCNN_FEATURES

    lines = [f"inr {__version__}, Python {platform.python_version()}, {platform.system()} {platform.machine()}"]
    cuda_build = torch.version.cuda
    lines.append(f"torch {torch.__version__} ({'CUDA ' + cuda_build if cuda_build else 'CPU-only build'}), "
                 f"{torch.get_num_threads()} CPU threads")
    if torch.cuda.is_available():
        for k in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(k)
            lines.append(f"cuda:{k}: {p.name}, {p.total_memory / 2**30:.0f} GiB, compute capability {p.major}.{p.minor}")
    else:
        lines.append("CUDA: no device" + ("" if cuda_build else " (this torch has no CUDA support)"))
    dev = resolve_device("auto")
    lines.append(f"--device auto computes on: {dev}")
    lines.append("backends:")
    if dev.type == "cuda":
        tcnn = _reason(_external.tinycudann)
        grid = ("tiny-cuda-nn" if tcnn == "usable" else "torch twin") + f" (tinycudann: {tcnn})"
        grid += f"; grids tcnn cannot build ({'/'.join(map(str, TCNN_DIMS))}-D inputs and {TCNN_FEATURES} features only) use the torch twin"
        nerfacc = _reason(_external.nerfacc)
        march = ("nerfacc" if nerfacc == "usable" else "torch twin") + f" (nerfacc: {nerfacc})"
    else:
        grid = "tiny-cuda-nn needs CUDA: CPU runs use the CPU hash grid below"
        march = ("native C++ walk" if _reason(_external.native_cpu) == "usable" else "torch twin") + \
            " (the CPU path; nerfacc's kernels need CUDA)"
    lines.append(f"  CUDA hash grid:      {grid}")
    native = _reason(_external.native_cpu)
    lines.append("  CPU hash grid:       " + ("native C++/OpenMP kernels (inr/native; built once, cached in "
                                               f"{_native_folder()})" if native == "usable" else f"torch twin ({native})"))
    lines.append("  CPU ReLU MLPs:       " + ("native fused C++ MLP (inr/native/mlp.cpp)" if native == "usable"
                                               else f"torch ({native})") + "; CUDA MLPs run in torch")
    lines.append("  sparse convolutions: " + ("native C++ kernel (inr/native/sparse_conv.cpp)"
                                               if native == "usable" else f"torch ({native})")
                 + "; CUDA runs in torch")
    lines.append("  point transformer:   " + ("native C++ kernel at inference (inr/native/encoder.cpp)"
                                               if native == "usable" else f"torch ({native})")
                 + "; training and CUDA run in torch")
    if native == "usable":
        from . import native as kernels

        lines.append("  bf16 products:       " + ("yes (AVX512-BF16): pointcloud denoise|densify|reconstruct "
                                                 "--precision bf16 runs the two kernels above in bf16"
                                                 if kernels.bf16_products() else
                                                 "no (this CPU has no AVX512-BF16): --precision bf16 stays float32"))
    lines.append(f"  occupancy marcher:   {march}")
    o3d = _reason(_external.open3d)
    lines.append("  point clouds:        " + ("open3d (PLY/PCD/XYZ, outlier baseline)" if o3d == "usable"
                                           else f"scipy + trimesh (open3d: {o3d})"))
    lines.append("  k-NN and normals:    " + ("native C++ grid search and PCA (inr/native/knn.cpp, mls.cpp)"
                                               if native == "usable" else "KD-tree (" + ("open3d's" if o3d == "usable"
                                                                                         else "scipy's") + f"; native: {native})"))
    colmap = _version("pycolmap")
    lines.append("  captures:            " + (f"pycolmap {colmap} (nerf process, COLMAP scene folders)" if colmap != "not installed"
                                             else "pycolmap not installed: nerf process and COLMAP folders need "
                                                  "pip install 'inr[captures]'"))
    las = _reason(lambda: _external.laspy(compressed=True))
    lines.append("  LAS/LAZ clouds:      " + ("laspy with lazrs" if las == "usable" else las))
    e57 = _reason(_external.pye57)
    lines.append("  E57 scans:           " + ("pye57 (read)" if e57 == "usable" else e57))
    lines.append("versions: " + ", ".join(f"{d} {_version(d)}" for d in (
        "lightning", "torchmetrics", "numpy", "scipy", "imageio", "imageio-ffmpeg", "soundfile", "scikit-image",
        "trimesh", "open3d", "pycolmap", "laspy", "lazrs", "pye57", "nerfacc", "tinycudann")))
    return lines
