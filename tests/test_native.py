"""The native CPU hash grid (inr/native/hashgrid.cpp) against the pure-torch twin: the same
function, the same gradients, deterministic, differentiable in float64, traced by torch.compile,
and a clean fallback where it is turned off. These tests build the kernels (once per machine)
and fail, rather than skip, where they cannot: `make setup` installs the compiler."""

import os
import subprocess
import sys
import warnings

import pytest
import torch

from inr import _external
from inr.encodings.hashgrid import HashGrid

from .helpers import run_without_native

GRIDS = [(1, 2, 8), (2, 2, 10), (2, 8, 6), (3, 2, 12), (3, 4, 10), (3, 1, 19), (4, 1, 10)]


def _pair(d, F, T, dtype=torch.float32):
    kw = dict(n_levels=5, n_features=F, log2_table=T, base_resolution=3, max_resolution=150)
    twin, fast = HashGrid(d, backend="torch", **kw).to(dtype), HashGrid(d, backend="native", **kw).to(dtype)
    with torch.no_grad():
        twin.table.uniform_(-1, 1)
    fast.load_state_dict(twin.state_dict())
    return twin, fast


def test_native_kernels_build_here():
    ops = _external.native_cpu()  # raises MissingBackend with the compiler's complaint
    assert hasattr(ops, "hashgrid_forward") and hasattr(ops, "hashgrid_backward")


def test_native_build_folder_is_one_per_install(tmp_path, monkeypatch):
    import shutil

    import inr.native as native

    here = native.build_directory()
    assert native.build_directory() == here  # stable: later processes find their build
    copy = tmp_path / "native"
    copy.mkdir()
    for name in native.SOURCES + native.HEADERS:
        shutil.copy(native._HERE / name, copy / name)
    monkeypatch.setattr(native, "_HERE", copy)
    # the same sources in another checkout get their own folder (a shared one recompiled on each switch)
    assert native.build_directory() != here and native.build_directory().parent == here.parent


def test_native_build_runs_the_ninja_of_the_installed_package(monkeypatch):
    # another ninja first on the PATH (Debian's 1.11 beside the package's 1.13) hashes the build
    # log's commands differently: each switch between the two rebuilt every kernel
    ninja = pytest.importorskip("ninja")
    import inr.native as native

    monkeypatch.setenv("PATH", "/usr/bin" + os.pathsep + os.environ.get("PATH", ""))
    native.build()
    assert os.environ["PATH"].split(os.pathsep)[0] == ninja.BIN_DIR


@pytest.mark.parametrize("d,F,T", GRIDS)
def test_native_matches_the_twin_values_and_gradients(d, F, T):
    twin, fast = _pair(d, F, T)
    assert fast.backend_for(torch.device("cpu")) == "native"
    x = torch.rand(3000, d) * 2.4 - 1.2  # some points outside [-1, 1]: clamped, no gradient there
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = twin(xa), fast(xb)
    # the same float32 operations in the same order (no FMA contraction); the corner sums of
    # 3-/4-D cells may round in another order: 1 ulp of values of O(1)
    assert torch.allclose(ya, yb, rtol=0, atol=5e-7)
    go = torch.randn_like(ya)
    (ya * go).sum().backward()
    (yb * go).sum().backward()
    assert torch.allclose(twin.table.grad, fast.table.grad, rtol=0, atol=1e-6)
    scale = xa.grad.abs().max()
    assert torch.allclose(xa.grad, xb.grad, rtol=0, atol=1e-5 * float(scale))
    outside = (x.abs() > 1).any(1)
    assert outside.any() and torch.equal(xb.grad[outside] == 0, xa.grad[outside] == 0)


def test_native_known_value_of_one_corner():
    # level 0 of a 2-D grid at scale 2 - 1 = 1: u = (0.5, 0) sits at pos (1.0, 0.5), cell (1, 0),
    # frac (0, 0.5): corners (1, 0) and (1, 1) with weights 1/2 each; row of (1, 0) is 1, of (1, 1) is 1 + 2 = 3
    g = HashGrid(2, n_levels=1, n_features=4, log2_table=5, base_resolution=2, max_resolution=2, backend="native")
    with torch.no_grad():
        g.table.zero_()
        g.table[4:8] = torch.tensor([1.0, 2.0, 3.0, 4.0])
        g.table[12:16] = torch.tensor([10.0, 20.0, 30.0, 40.0])
    out = g(torch.tensor([[0.0, -1.0]]))
    assert torch.equal(out, torch.tensor([[5.5, 11.0, 16.5, 22.0]]))


# the float64 gradcheck of the native kernels: tests/test_encodings.py, beside the twin's


def test_native_backward_is_deterministic_across_thread_counts():
    _, fast = _pair(3, 2, 12)
    x = torch.rand(5000, 3) * 2 - 1
    go = torch.randn(5000, fast.out_dim)
    threads = torch.get_num_threads()
    grads = []
    try:
        for n in (1, threads, threads, 3):
            torch.set_num_threads(n)
            fast.table.grad = None
            (fast(x) * go).sum().backward()
            grads.append(fast.table.grad.clone())
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(grads[0], g) for g in grads[1:])


def test_native_under_torch_compile_matches_eager():
    _, fast = _pair(3, 2, 10)
    x = torch.rand(777, 3) * 2 - 1
    eager = fast(x)
    compiled = torch.compile(fast, dynamic=True)
    assert torch.equal(compiled(x), eager)
    compiled(x).sum().backward()
    assert fast.table.grad is not None and fast.table.grad.abs().sum() > 0


def test_native_nan_coordinates_read_as_the_border_not_out_of_bounds():
    _, fast = _pair(3, 2, 12)
    x = torch.tensor([[float("nan"), 0.0, 0.0], [-1.0, 0.0, 0.0]])
    out = fast(x)
    assert torch.isfinite(out).all() and torch.equal(out[0], out[1])


def test_native_turned_off_falls_back_with_one_warning():
    code = (
        "import warnings, torch\n"
        "from inr.encodings.hashgrid import HashGrid\n"
        "from inr._external import MissingBackend\n"
        "g = HashGrid(3, n_levels=2, log2_table=8)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    g(torch.rand(4, 3)); g(torch.rand(4, 3))\n"
        "print(g.backend_for(torch.device('cpu')), len([m for m in w if 'native' in str(m.message)]))\n"
        "try:\n"
        "    HashGrid(3, n_levels=2, log2_table=8, backend='native')(torch.rand(4, 3))\n"
        "except MissingBackend as e:\n"
        "    print('refused:', e)\n"
    )
    first, second = run_without_native(code).strip().splitlines()
    assert first == "torch 1"
    assert second.startswith("refused:") and "INR_NATIVE=0" in second


def test_native_capability_checks():
    assert HashGrid.native_problem(3, 2) is None
    assert "5-D" in HashGrid.native_problem(5, 2) and "features" in HashGrid.native_problem(2, 3)
    with pytest.raises(_external.MissingBackend):
        HashGrid(5, backend="native")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a 5-D grid on 'auto' runs the twin without complaint at build
        HashGrid(5, n_levels=2, log2_table=6)


def test_native_march_gives_the_twins_samples_bit_for_bit():
    from inr.render.occupancy import OccupancyGrid, march
    from inr.render.rays import Rays

    grid = OccupancyGrid([-1.5, -1.2, -1.0, 1.5, 1.3, 1.1], resolution=32)
    grid.binaries.copy_(torch.rand(32**3) < 0.2)
    o = torch.randn(3000, 3) * 2.5
    d = torch.nn.functional.normalize(torch.randn(3000, 3) - 0.3 * o, dim=-1)
    d[:10, 1:] = 0  # axis-aligned rays (the slab test's 1e-12 guard)
    d[:10, 0] = 1
    o[10:20] = torch.tensor([5.0, 5.0, 5.0])  # rays that miss the box
    d[10:20] = torch.tensor([1.0, 0.0, 0.0])
    rays = Rays(o, d)
    for stratified in (False, True):
        twin = march(rays, grid, 0.013, near=0.05, stratified=stratified, backend="torch",
                     generator=torch.Generator().manual_seed(3))
        fast = march(rays, grid, 0.013, near=0.05, stratified=stratified, backend="native",
                     generator=torch.Generator().manual_seed(3))
        assert len(twin[0]) > 1000 and all(torch.equal(a, b) for a, b in zip(twin, fast))
    # with the early-stop rules of a density function, and 'auto' taking the native walk here
    sigma = lambda s, e, r: torch.full_like(s, 30.0)  # noqa: E731
    twin = march(rays, grid, 0.013, sigma_fn=sigma, backend="torch")
    auto = march(rays, grid, 0.013, sigma_fn=sigma)
    assert all(torch.equal(a, b) for a, b in zip(twin, auto))
    grid.binaries.zero_()
    assert march(rays, grid, 0.013, backend="native")[0].numel() == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_keep_freed_memory_stops_page_faults_on_reused_buffers():
    # minor page faults of allocating and filling a 49 MB tensor again (fewest of 8 tries): with the tuning
    # glibc hands back the freed heap block (no fresh pages), without it every 4 KB page faults. With the
    # tuning a try still faults now and then: small allocations between two tries can take the front of
    # the freed block, and the next 49 MB then comes from fresh pages (seen as two addresses taking turns)
    code = (
        "import torch, resource\n"
        "from inr.devices import keep_freed_memory\n"
        "print(keep_freed_memory())\n"
        "torch.zeros(12_196_240)\n"
        "counts = []\n"
        "for _ in range(8):\n"
        "    n0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "    torch.zeros(12_196_240)\n"
        "    counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - n0)\n"
        "print(min(counts), *counts)\n"
    )
    faults = {}
    for setting in ("1", "0"):
        env = {**os.environ, "INR_MALLOC_TUNING": setting}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
        faults[setting] = (out[0], int(out[1]), out[2:])
    assert faults["0"][0] == "False" and faults["0"][1] > 10_000, faults  # 49 MB / 4 KB = 11,900 pages
    assert faults["1"][0] == "True" and faults["1"][1] < 1_000, faults
