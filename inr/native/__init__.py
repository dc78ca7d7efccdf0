"""Native CPU kernels (C++ with OpenMP through torch's extension API), built on first use.

The sources ship with the package and compile once per machine, torch version and source
(a few tens of seconds, with the C++ compiler that torch.compile on CPU needs anyway) into
$INR_CACHE or ~/.cache/inr/native/<key>; later processes load the cached library in
milliseconds. Where no compiler or OpenMP is found, `_external.native_cpu` reports why and the
callers fall back to their pure-torch twins with one warning.

The C++ side registers plain operators (`torch.ops.inr_native.*`); this module adds their
autograd formulas and their shapes for torch.compile (`register_fake`), so the compiled NeRF and
signal fields trace through them like any torch op. The sparse convolutions' operators
(`gather_conv`, `gather_wgrad`, `submanifold_table`) have no autograd formula of their own: the
point-cloud layers' autograd Function (`pointcloud.sparse_conv._GatherConv`) calls gather_conv for
the input gradient too, over the transposed table, and gather_wgrad for the weight gradient.
`encoder_first_token` (the point-cloud network's stage-2 transformer), `mls_project`, `pca_normals`
and `knn_grid` are for inference only: training runs torch's layers.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import platform
import sys
from pathlib import Path
from typing import List, Sequence

import torch

SOURCES = ("hashgrid.cpp", "march.cpp", "mlp.cpp", "sparse_conv.cpp", "encoder.cpp", "mls.cpp", "knn.cpp")
HEADERS = ("vectors.h", "gemm.h")
"""Included by the sources: part of the build folder's key, so an edit rebuilds."""
_HERE = Path(__file__).resolve().parent


def _cpu_signature() -> str:
    """The CPU's instruction-set flags: the library is built with -march=native for this CPU."""
    cpuinfo = Path("/proc/cpuinfo")
    text = cpuinfo.read_text() if cpuinfo.is_file() else ""
    flags = [line for line in text.splitlines() if line.startswith("flags")]
    return flags[0] if flags else platform.processor()


def wide_vectors() -> bool:
    """Whether the kernels build with 16-float (AVX-512) vectors here; else 8-float (AVX2) ones."""
    return "avx512f" in _cpu_signature().split()


def build_directory() -> Path:
    """The build folder: one per source, torch, CPU and install. The install's paths count because
    the folder's build.ninja names the sources and torch's headers by absolute path: two checkouts
    (or venvs) sharing one folder rewrote it in turn and recompiled everything on each switch
    (a 70 s stall inside a timed fit-sdf run, once a fresh clone had run its tests)."""
    digest = hashlib.sha256()
    for name in SOURCES + HEADERS:
        digest.update((_HERE / name).read_bytes())
    digest.update(f"{torch.__version__}|{platform.machine()}|{_cpu_signature()}".encode())
    digest.update(f"{_HERE}|{Path(torch.__file__).resolve().parent}".encode())
    root = Path(os.environ.get("INR_CACHE", Path.home() / ".cache" / "inr")) / "native"
    return root / digest.hexdigest()[:16]


def build():
    """Compile (or load the cached build of) the kernels and register their operators."""
    from torch.utils import cpp_extension

    if importlib.util.find_spec("ninja") is not None:
        # always the pip package's binary, also when its venv is not activated and the system has
        # another ninja on the PATH: two ninja versions read each other's build log as stale, and
        # each switch between an activated venv and a plain `.venv/bin/python` rebuilt every
        # kernel (~40-65 s, inside timed runs; Debian's 1.11 against the package's 1.13)
        bin_dir = importlib.import_module("ninja").BIN_DIR
        if os.environ.get("PATH", "").split(os.pathsep)[0] != bin_dir:
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    folder = build_directory()
    folder.mkdir(parents=True, exist_ok=True)
    if not list(folder.glob("inr_native*.so")):
        print(f"inr: compiling the native CPU kernels once (~20 s) into {folder}", file=sys.stderr, flush=True)
    flags = ["-O3", "-fopenmp", "-march=native", "-fno-math-errno", "-ffp-contract=off"]  # no FMA: the twin's rounding
    cpp_extension.load(
        name="inr_native",
        sources=[str(_HERE / name) for name in SOURCES],
        extra_cflags=flags,
        extra_ldflags=["-fopenmp"],
        build_directory=str(folder),
        is_python_module=False,
        verbose=os.environ.get("INR_NATIVE_VERBOSE") == "1",
    )
    _register_python_side()
    return torch.ops.inr_native


_REGISTERED = False


def _register_python_side() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    _REGISTERED = True

    @torch.library.register_fake("inr_native::hashgrid_forward")
    def _(x, table, scales, resolutions, rows, offsets, features):
        return x.new_empty(x.shape[0], len(scales) * features)

    @torch.library.register_fake("inr_native::hashgrid_backward")
    def _(grad_out, x, table, scales, resolutions, rows, offsets, features, table_grad, input_grad):
        return (table.new_empty(table.shape if table_grad else (0,)), x.new_empty(x.shape if input_grad else (0,)))

    def setup_context(ctx, inputs, output):
        x, table, *layout = inputs
        ctx.save_for_backward(x, table)
        ctx.layout = layout

    def backward(ctx, grad_out):
        x, table = ctx.saved_tensors
        need_x, need_table = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_table, grad_x = torch.ops.inr_native.hashgrid_backward(
            grad_out, x, table, *ctx.layout, need_table, need_x
        )
        return (grad_x if need_x else None, grad_table if need_table else None, None, None, None, None, None)

    torch.library.register_autograd("inr_native::hashgrid_forward", backward, setup_context=setup_context)

    @torch.library.register_fake("inr_native::mlp_forward")
    def _(x, weights, biases):
        return x.new_empty(x.shape[0], weights[-1].shape[0])

    @torch.library.register_fake("inr_native::mlp_backward")
    def _(grad_out, x, weights, biases, input_grad):
        return (x.new_empty(x.shape if input_grad else (0,)), [w.new_empty(w.shape) for w in weights],
                [w.new_empty(w.shape[0]) for w in weights])

    def mlp_setup_context(ctx, inputs, output):
        x, weights, biases = inputs
        ctx.save_for_backward(x, *weights, *biases)
        ctx.layers, ctx.has_bias = len(weights), bool(biases)

    def mlp_backward(ctx, grad_out):
        if torch.is_grad_enabled():
            raise RuntimeError("the native MLP has no double backward (create_graph=True): set the network's "
                               "backend to 'torch'")
        x, *params = ctx.saved_tensors
        weights, biases = params[:ctx.layers], params[ctx.layers:]
        grad_x, grad_w, grad_b = torch.ops.inr_native.mlp_backward(grad_out.float(), x, weights, biases,
                                                                   ctx.needs_input_grad[0])
        return (grad_x if ctx.needs_input_grad[0] else None, grad_w, grad_b if ctx.has_bias else [])

    torch.library.register_autograd("inr_native::mlp_forward", mlp_backward, setup_context=mlp_setup_context)

    @torch.library.register_fake("inr_native::gather_conv")
    def _(x, table, weight, bias, bf16=False):
        return x.new_empty(table.shape[0], weight.shape[2])

    @torch.library.register_fake("inr_native::gather_wgrad")
    def _(x, table, grad):
        return x.new_empty(table.shape[1], x.shape[1], grad.shape[1])

    @torch.library.register_fake("inr_native::submanifold_table")
    def _(keys, k):
        return keys.new_empty(keys.shape[0], k**3, dtype=torch.int32)

    @torch.library.register_fake("inr_native::encoder_first_token")
    def _(tokens, keep, params, heads, eps, bf16=False):
        return tokens.new_empty(tokens.shape[0], tokens.shape[2])

    @torch.library.register_fake("inr_native::mls_project")
    def _(x, ref, idx, d2):
        return x.new_empty(x.shape[0], 3)

    @torch.library.register_fake("inr_native::pca_normals")
    def _(points, idx):
        return points.new_empty(idx.shape[0], 3), points.new_empty(idx.shape[0])

    @torch.library.register_fake("inr_native::knn_grid")
    def _(queries, points, k, fill, max_rings):
        m = queries.shape[0]
        return (queries.new_empty(m, k, dtype=torch.long), queries.new_empty(m, k, dtype=torch.float32),
                queries.new_empty(m, dtype=torch.bool))


def hashgrid(x: torch.Tensor, table: torch.Tensor, scales: Sequence[float], resolutions: List[int], rows: List[int],
             offsets: List[int], features: int) -> torch.Tensor:
    """The hash encoding of x (N, d) in [-1, 1] with the flat table: (N, levels * features).
    Differentiable once, to x and to the table (no double backward: eikonal terms on a native
    grid use numerical gradients)."""
    from .. import _external

    return _external.native_cpu().hashgrid_forward(x, table, list(scales), resolutions, rows, offsets, features)


def mlp(x: torch.Tensor, weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor]) -> torch.Tensor:
    """A ReLU MLP in one fused pass: Linear layers with `weights` (out, in) and `biases` (out,) (or
    none), ReLU after every layer but the last. x (N, in) float32 -> (N, out). Differentiable once,
    to x and to every weight and bias."""
    from .. import _external

    return _external.native_cpu().mlp_forward(x, list(weights), list(biases))


def bf16_products() -> bool:
    """Whether the kernels built here have bfloat16 dot products (AVX512-BF16's vdpbf16ps): the
    `bf16=True` of gather_conv and encoder_first_token. Builds (or loads) the kernels."""
    from .. import _external

    return bool(_external.native_cpu().bf16_products())


def gather_conv(x: torch.Tensor, table: torch.Tensor, weight: torch.Tensor, bias=None, bf16: bool = False) -> torch.Tensor:
    """A sparse convolution's forward pass from its gather table: y_i = bias + sum_o weight[o]^T
    x[table[i, o]] over the entries >= 0 (-1: none). x (N, Cin) float32, table (M, K) int32,
    weight (K, Cin, Cout), bias (Cout,) or None -> (M, Cout). Not differentiable itself: the
    point-cloud layers' `_GatherConv` gives it gradients. `bf16`: x and the weights rounded to
    bfloat16, their products summed in float32 (where `bf16_products()`; ~2x the products per
    instruction)."""
    from .. import _external

    return _external.native_cpu().gather_conv(x, table, weight, bias, bf16)


def gather_wgrad(x: torch.Tensor, table: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """gather_conv's weight gradient: (K, Cin, Cout) with [o] = sum over the rows i whose table[i, o]
    >= 0 of x[table[i, o]]^T grad[i]. x (N, Cin) float32, table (M, K) int32, grad (M, Cout) float32."""
    from .. import _external

    return _external.native_cpu().gather_wgrad(x, table, grad)


def submanifold_table(keys: torch.Tensor, k: int) -> torch.Tensor:
    """(M, k^3) int32: for sites with these sorted, unique packed keys (`pointcloud.voxel.pack_keys`),
    the row of each site's neighbour at each offset of an odd kernel k (x-major), -1 where none."""
    from .. import _external

    return _external.native_cpu().submanifold_table(keys, k)


def encoder_first_token(tokens: torch.Tensor, keep: torch.Tensor, params: Sequence[torch.Tensor], heads: int,
                        eps: float, bf16: bool = False) -> torch.Tensor:
    """Transformer encoder layers (nn.TransformerEncoderLayer with norm_first=False, ReLU, no
    dropout) on many short sequences, the first token's output of the last layer alone.
    tokens (V, T, d) float32, keep (V, T) bool (False: a key left out), params 12 per layer:
    in_proj weight and bias, out_proj weight and bias, norm1 weight and bias, linear1 weight and
    bias, linear2 weight and bias, norm2 weight and bias; all LayerNorms with `eps` -> (V, d).
    Inference only (no gradient). `bf16`: the linear layers' products in bfloat16 with float32
    sums (where `bf16_products()`); the attention's products, softmax and norms stay float32."""
    from .. import _external

    return _external.native_cpu().encoder_first_token(tokens, keep, list(params), heads, eps, bf16)


def mls_project(x: torch.Tensor, ref: torch.Tensor, idx: torch.Tensor, d2: torch.Tensor) -> torch.Tensor:
    """Each point of x (N, 3) float64 projected onto the second-order jet fitted to its neighbours
    in ref (M, 3) float64: idx (N, k) int64 their rows, d2 (N, k) float64 their squared distances,
    nearest first (k <= 64) -> (N, 3) float64. The maths of `pointcloud.mls` (its NumPy path is the
    twin). Not differentiable."""
    from .. import _external

    return _external.native_cpu().mls_project(x, ref, idx, d2)


def knn_grid(queries: torch.Tensor, points: torch.Tensor, k: int, fill: float, max_rings: int):
    """The k nearest points (N, 3) float64 of each query (Q, 3) float64, searched on a grid of
    cells holding about `fill` points each (`knn.cpp`): (idx (Q, k) int64, squared distances (Q, k)
    float32, nearest first; found (Q,) bool, False where a query lies over `max_rings` rings of
    cells from its k nearest, or the cloud is too spread to grid: those rows -1 and inf)."""
    from .. import _external

    return _external.native_cpu().knn_grid(queries, points, int(k), float(fill), int(max_rings))


def KnnIndex(points: torch.Tensor, fill: float):  # noqa: N802 (a class, built by the kernels)
    """`knn_grid`'s grid of points (N, 3) float64, built once: `.query(queries, k, max_rings)` gives
    what `knn_grid(queries, points, k, fill, max_rings)` gives (queries in any number of calls)."""
    from .. import _external

    _external.native_cpu()
    return torch.classes.inr_native.KnnIndex(points, float(fill))


def pca_normals(points: torch.Tensor, idx: torch.Tensor):
    """PCA normals over neighbourhoods idx (M, k) int64 (rows of points (N, 3) float64; M = N, or a
    chunk of the points' rows): (normals (M, 3) float64, the covariance's eigenvector of the smallest
    eigenvalue, either side; surface variation (M,) float64, that eigenvalue's share of their sum). `inr.data.surfaces._pca`'s
    NumPy path is the twin."""
    from .. import _external

    return _external.native_cpu().pca_normals(points, idx)
