"""The native MLS projection (inr/native/mls.cpp) against the NumPy path of inr/pointcloud/mls.py
and known answers: points over a plane land on their foot points (also where the tangent axes are
degenerate), points off a sphere land on it; independent of the thread count; a clean fallback
where the kernels are turned off."""

import numpy as np
import pytest
import torch

from inr import native
from inr.pointcloud import mls

from .helpers import run_without_native


def _noisy_sphere(n=3000, sigma=0.02, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.normal(size=(n, 3))
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    return p + rng.normal(scale=sigma, size=p.shape)


@pytest.mark.parametrize("k", [1, 3, 16, 30, 64])
def test_native_projection_equals_the_numpy_path(k):
    x = _noisy_sphere(seed=k)
    ref = _noisy_sphere(n=2000, seed=k + 1)
    fast = mls._project_once(x, k, ref, backend="native")
    slow = mls._project_once(x, k, ref, backend="numpy")
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-10)
    if k >= 16:
        # the projection smooths: the sphere's noise (ref's, 2 %) shrinks (k = 16: to 0.55 of it)
        assert np.abs(np.linalg.norm(fast, axis=1) - 1).mean() < 0.7 * np.abs(np.linalg.norm(x, axis=1) - 1).mean()


def test_mls_fill_and_the_baseline_agree_on_both_paths():
    x = _noisy_sphere(n=1500, seed=9)
    np.testing.assert_allclose(mls.mls_fill(x, 5000, backend="native"), mls.mls_fill(x, 5000, backend="numpy"),
                               rtol=0, atol=1e-10)
    np.testing.assert_allclose(mls.mls_project(x, backend="native"), mls.mls_project(x, backend="numpy"), rtol=0, atol=1e-10)


def test_points_over_a_plane_land_on_their_foot_points():
    # a square grid: the in-plane covariance is isotropic, so the tangent axes are any pair
    g = np.arange(-10, 11) * 0.1
    ref = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    ref = np.concatenate([ref, np.zeros((len(ref), 1))], 1)
    turn = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))[0]  # the plane in a general pose
    rng = np.random.default_rng(4)
    foot = np.concatenate([rng.uniform(-0.5, 0.5, size=(50, 2)), np.zeros((50, 1))], 1)
    x = foot + np.array([0, 0, 1.0]) * rng.uniform(-0.05, 0.05, size=(50, 1))
    for backend in ("native", "numpy"):
        out = mls._project_once(x @ turn.T, 25, ref @ turn.T, backend=backend)
        np.testing.assert_allclose(out, foot @ turn.T, rtol=0, atol=1e-9)


def test_points_off_a_sphere_land_on_it():
    rng = np.random.default_rng(5)
    ref = rng.normal(size=(20000, 3))
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    x = ref[:200] * rng.uniform(0.99, 1.01, size=(200, 1))
    out = mls._project_once(x, 30, ref, backend="native")
    # the jet of a unit sphere over a patch of radius ~0.04 misses it by ~r^4 / 8
    assert np.abs(np.linalg.norm(out, axis=1) - 1).max() < 1e-5
    # along the frame's normal, which the patch's uneven sampling tilts from the radius a little
    np.testing.assert_allclose(out / np.linalg.norm(out, axis=1, keepdims=True), x / np.linalg.norm(x, axis=1, keepdims=True),
                               rtol=0, atol=5e-4)


def test_native_projection_does_not_depend_on_the_thread_count():
    x = _noisy_sphere(n=5000, seed=7)
    threads = torch.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            outs.append(mls._project_once(x, 16, backend="native"))
    finally:
        torch.set_num_threads(threads)
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


def test_native_projection_checks_its_arguments():
    x = torch.zeros(2, 3, dtype=torch.float64)
    idx = torch.tensor([[0, 1], [1, 2]])
    d2 = torch.zeros(2, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="past ref's 2 rows"):
        native.mls_project(x, x, idx, d2)
    with pytest.raises(RuntimeError, match="float64"):
        native.mls_project(x.float(), x, idx[:, :1], d2[:, :1])
    with pytest.raises(ValueError, match="backend"):
        mls._project_once(np.zeros((3, 3)), 2, backend="torch")


def test_mls_falls_back_to_numpy_with_one_warning_when_native_is_off():
    code = (
        "import warnings, numpy as np\n"
        "from inr.pointcloud.mls import mls_project\n"
        "x = np.random.default_rng(0).normal(size=(50, 3))\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    y = mls_project(x, k=10)\n"
        "print(y.shape, len([m for m in w if 'native' in str(m.message)]))\n"
    )
    assert run_without_native(code).strip() == "(50, 3) 1"
