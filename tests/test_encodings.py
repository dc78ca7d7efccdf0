import math

import pytest
import torch

import inr
from inr.encodings.hashgrid import PRIMES, HashGrid
from inr.encodings.quantized import quantize
from inr.encodings.shifted_basis import stable_rank

from .conftest import requires_cuda

S = math.sqrt(0.5)


def test_positional_known_values_1d():
    enc = inr.build_encoding("positional", 1, num_freqs=2)
    # x = 0.5: [x, sin(pi/2), cos(pi/2), sin(pi), cos(pi)]
    out = enc(torch.tensor([[0.5]]))
    assert torch.allclose(out, torch.tensor([[0.5, 1.0, 0.0, 0.0, -1.0]]), atol=1e-6)


def test_positional_known_values_2d_and_log_spacing():
    enc = inr.build_encoding("positional", 2, num_freqs=1)
    # [x, y, sin(pi x), sin(pi y), cos(pi x), cos(pi y)] at (0.5, -0.25)
    out = enc(torch.tensor([[0.5, -0.25]]))
    assert torch.allclose(out, torch.tensor([[0.5, -0.25, 1.0, -S, 0.0, S]]), atol=1e-6)
    tancik = inr.build_encoding("positional", 1, num_freqs=3, max_freq_log2=math.log2(10), include_input=False)
    assert torch.allclose(tancik.freqs, torch.tensor([1.0, math.sqrt(10), 10.0]), rtol=1e-5)
    assert tancik.out_dim == 6


def test_fourier_known_values_and_scale():
    enc = inr.build_encoding("fourier", 2, num_features=2)
    enc.B.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
    # x = 0 -> v = 0.5: 2 pi B v = [pi, 2 pi] -> sin [0, 0], cos [-1, 1]
    out = enc(torch.zeros(1, 2))
    assert torch.allclose(out, torch.tensor([[0.0, 0.0, -1.0, 1.0]]), atol=1e-5)
    big = inr.build_encoding("fourier", 2, num_features=4096, sigma=10.0)
    assert abs(big.B.std().item() - 10.0) < 0.3
    assert "B" in big.state_dict() and not list(big.parameters())


def test_basic_known_values():
    enc = inr.build_encoding("basic", 1)
    out = enc(torch.tensor([[-1.0], [-0.5]]))  # v = 0 and 0.25
    assert torch.allclose(out, torch.tensor([[0.0, 1.0], [1.0, 0.0]]), atol=1e-6)


def test_learnable_fourier_matches_formula_and_trains_W():
    enc = inr.build_encoding("learnable_fourier", 2, num_features=4, hidden=8, out_features=6)
    with torch.no_grad():
        enc.W.copy_(torch.tensor([[[1.0, 0.0], [0.0, 3.0]]]))
    x = torch.tensor([[0.0, 1.0]])  # X = (0.5, 1.0): XW^T = [0.5, 3.0]
    expect = torch.tensor([math.cos(0.5), math.cos(3.0), math.sin(0.5), math.sin(3.0)]) / 2.0
    assert torch.allclose(enc.fourier(x)[0, 0], expect, atol=1e-6)
    enc(x).sum().backward()
    assert enc.W.grad is not None and enc.W.grad.abs().sum() > 0


def test_shifted_basis_gaussian_known_values_and_normalisation():
    enc = inr.build_encoding("shifted_basis", 1, num_centres=4, sigma=0.25)
    out = enc(torch.tensor([[-0.5]]))[0]  # u = 0.25; centres 0, .25, .5, .75 -> d/sigma = 1, 0, -1, -2
    ratios = out / out[1]
    assert torch.allclose(ratios, torch.tensor([math.exp(-0.5), 1.0, math.exp(-0.5), math.exp(-2.0)]), atol=1e-6)
    grid = torch.linspace(-1, 1, 2001)[:, None]
    norms = enc(grid).norm(dim=-1)
    assert norms.max() <= 1.0 + 1e-5 and norms.max() > 0.999


@pytest.mark.parametrize(
    "basis,expected",
    [
        ("triangle", [0.0, 0.8, 0.2, 0.0]),  # 1 - |d|/sigma, d = 0.3, 0.05, -0.2, -0.45
        ("square", [0.0, 1.0, 1.0, 0.0]),
        ("sinc", [math.sin(math.pi * 1.2) / (math.pi * 1.2), math.sin(math.pi * 0.2) / (math.pi * 0.2),
                  math.sin(math.pi * 0.8) / (math.pi * 0.8), math.sin(math.pi * 1.8) / (math.pi * 1.8)]),
    ],
)
def test_shifted_basis_other_bases(basis, expected):
    enc = inr.build_encoding("shifted_basis", 1, num_centres=4, sigma=0.25, basis=basis)
    raw = enc(torch.tensor([[-0.4]])) / enc.scale  # u = 0.3
    assert torch.allclose(raw[0], torch.tensor(expected), atol=1e-5)


def test_stable_rank_and_kernel():
    assert stable_rank(torch.eye(5)) == pytest.approx(5.0)
    assert stable_rank(torch.ones(4, 3)) == pytest.approx(1.0)
    assert stable_rank(torch.diag(torch.tensor([3.0, 1.0]))) == pytest.approx(10.0 / 9.0)
    x = torch.linspace(-1, 1, 64)[:, None]
    narrow = inr.build_encoding("shifted_basis", 1, num_centres=256, sigma=0.001)
    wide = inr.build_encoding("shifted_basis", 1, num_centres=256, sigma=0.1)
    # narrow bases keep points apart (high stable rank, tiny off-diagonal kernel); wide ones blur
    assert stable_rank(narrow(x)) > 4 * stable_rank(wide(x))
    k = narrow.kernel(x[:2], x[:2])
    assert k[0, 1] < 1e-3 * k[0, 0]


def test_progressive_equals_positional_and_splits_by_band():
    prog = inr.build_encoding("progressive", 2, num_freqs=10, levels=4)
    pos = inr.build_encoding("positional", 2, num_freqs=10)
    x = torch.rand(7, 2) * 2 - 1
    assert torch.equal(prog(x), pos(x))
    assert prog.bands_per_level == [3, 3, 2, 2]
    assert prog.level_dims == [14, 12, 8, 8]
    level1 = prog.split(prog(x))[1]
    freqs = torch.tensor([8.0, 16.0, 32.0])  # bands 3, 4, 5
    arg = math.pi * x[:, None, :] * freqs[None, :, None]
    assert torch.allclose(level1, torch.cat([arg.sin(), arg.cos()], -1).flatten(1), atol=1e-5)


def test_quantize_known_cells_and_straight_through_gradient():
    # resolution 5 -> cell 0.25 in u; u = 0.3 -> cell 1 -> centre 0.375 -> x = -0.25; u = 1 -> last cell
    x = torch.tensor([[-0.4], [1.0], [-1.0]])
    q = quantize(x, 5)
    assert torch.allclose(q, torch.tensor([[-0.25], [0.75], [-0.75]]))
    enc = inr.build_encoding("quantized", 1, resolution=5, inner="positional", inner_options={"num_freqs": 3})
    xs = torch.tensor([[-0.4]], requires_grad=True)
    enc(xs).sum().backward()
    centre = torch.tensor([[-0.25]], requires_grad=True)
    enc.inner(centre).sum().backward()
    assert torch.allclose(xs.grad, centre.grad)
    assert torch.equal(enc(torch.tensor([[-0.4]])), enc.inner(torch.tensor([[-0.25]])))


def _slow_hashgrid(g: HashGrid, x: torch.Tensor) -> torch.Tensor:
    """An independent loop over points, levels and corners with Python integers."""
    d = g.in_dim
    rows_out = []
    b = g.per_level_scale
    offset = 0
    layout = []
    for level in range(g.n_levels):
        scale = torch.tensor(2.0 ** (level * math.log2(b)) * g.base_resolution - 1.0, dtype=torch.float32)
        res = math.ceil(scale.item()) + 1
        rows = min(-(-(res**d) // 8) * 8, 2**g.log2_table)
        layout.append((scale, res, rows, offset))
        offset += rows
    for p in x:
        feats = []
        u = ((p + 1) * 0.5).clamp(0, 1)
        for scale, res, rows, off in layout:
            pos = u * scale + 0.5
            cell = torch.floor(pos)
            frac = pos - cell
            acc = torch.zeros(g.n_features)
            for corner in range(2**d):
                c = [int(cell[i]) + ((corner >> i) & 1) for i in range(d)]
                w = 1.0
                for i in range(d):
                    w = w * (frac[i] if (corner >> i) & 1 else 1 - frac[i])
                if res**d <= rows:
                    idx = sum(c[i] * res**i for i in range(d))
                else:
                    idx = 0
                    for i in range(d):
                        idx ^= (c[i] * PRIMES[i]) & 0xFFFFFFFF
                acc = acc + w * g.table.view(-1, g.n_features)[off + idx % rows]
            feats.append(acc)
        rows_out.append(torch.cat(feats))
    return torch.stack(rows_out)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_hashgrid_matches_slow_loop(d):
    g = HashGrid(d, n_levels=6, n_features=2, log2_table=7, base_resolution=4, max_resolution=64, backend="torch")
    with torch.no_grad():
        g.table.uniform_(-1, 1)
    assert bool(g.hashed.any()) == (d > 1)  # small table: finer levels hash in 2D/3D
    x = torch.rand(6, d) * 2 - 1
    w = torch.randn(6, g.out_dim)
    fast = g(x)
    (fast * w).sum().backward()
    grad_fast = g.table.grad.clone()
    g.table.grad = None
    slow = _slow_hashgrid(g, x)
    (slow * w).sum().backward()
    assert torch.allclose(fast, slow, atol=1e-5)
    assert torch.allclose(grad_fast, g.table.grad, atol=1e-5)


def test_hashgrid_layout_follows_instant_ngp():
    g = HashGrid(3, n_levels=16, n_features=2, log2_table=19, base_resolution=16, max_resolution=2048, backend="torch")
    assert g.per_level_scale == pytest.approx(math.exp((math.log(2048) - math.log(16)) / 15))
    assert g.resolutions[0] == 16 and g.resolutions[-1] == 2049
    assert g.rows[0] == 16**3 and max(g.rows) == 2**19
    assert g.out_dim == 32
    assert -1e-4 <= g.table.min() and g.table.max() <= 1e-4


@pytest.mark.parametrize("backend", ["torch", "native"])  # the twin and the native CPU kernels
def test_hashgrid_float64_gradcheck_inputs_and_table(backend):
    g = HashGrid(3, n_levels=3, n_features=2, log2_table=6, base_resolution=2, max_resolution=8, backend=backend).double()
    with torch.no_grad():
        g.table.uniform_(-1, 1)
    x = (torch.rand(5, 3, dtype=torch.float64) * 1.6 - 0.8).requires_grad_()
    table = g.table.detach().clone().requires_grad_()

    def f(x, table):
        return torch.func.functional_call(g, {"table": table}, (x,))

    assert g.backend_for(x.device) == backend
    assert torch.autograd.gradcheck(f, (x, table), eps=1e-6, atol=1e-5)


def test_hashgrid_table_is_flat_in_tcnn_layout_and_loads_old_checkpoints():
    g = HashGrid(2, n_levels=2, n_features=4, log2_table=5, base_resolution=2, max_resolution=4, backend="torch")
    assert g.table.dim() == 1 and g.table.numel() == sum(g.rows) * 4
    # row r, feature f sits at r * F + f: setting one row moves exactly that corner's features
    with torch.no_grad():
        g.table.zero_()
        g.table[4:8] = torch.tensor([1.0, 2.0, 3.0, 4.0])  # row 1 = cell (1, 0) of level 0
    x = torch.tensor([[-1.0 + 2 * (0.5 / 1.0), -1.0]])  # u = (0.5, 0): pos = (1.0+0.5, 0.5) at scale 2-1=1
    index, weight = g.indices_and_weights(x)
    expected = sum(w * (torch.tensor([1.0, 2, 3, 4]) if int(i) == 1 else torch.zeros(4)) for i, w in zip(index[0, 0], weight[0, 0]))
    assert torch.allclose(g(x)[0, :4], expected)
    old = {"table": g.table.detach().view(-1, 4).clone()}
    h = HashGrid(2, n_levels=2, n_features=4, log2_table=5, base_resolution=2, max_resolution=4, backend="torch")
    h.load_state_dict(old)
    assert torch.equal(h.table, g.table)


def test_hashgrid_backend_capability_and_fallback():
    from inr._external import MissingBackend

    assert HashGrid.tcnn_problem(3, 2) is None
    assert "1-D" in HashGrid.tcnn_problem(1, 2) and "features" in HashGrid.tcnn_problem(3, 3)
    with pytest.raises(MissingBackend, match="cannot build"):
        HashGrid(1, backend="tcnn")  # the audio preset's 1-D grid
    g = HashGrid(1, n_levels=2, log2_table=6, backend="auto")
    assert g.backend_for(torch.device("cpu")) in ("native", "torch") and g._tcnn is None
    g(torch.rand(4, 1))
    assert g._tcnn is None  # a CPU run never builds a tcnn module
    with pytest.raises(ValueError):
        HashGrid(2, backend="cuda")


def test_amplified_known_values_and_plain_case():
    enc = inr.build_encoding("amplified", 3, num_freqs=1, voxel_size=1.0, alpha=1.0)
    d = torch.tensor([[0.5, 0.0, 0.0]])
    # s = 1 + |d| = 1.5; [sin(pi d), cos(pi d)] = [1, 0, 0, 0, 1, 1]
    assert torch.allclose(enc(d), 1.5 * torch.tensor([[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]]), atol=1e-6)
    plain = inr.build_encoding("amplified", 3, num_freqs=1, alpha=0.0)
    assert torch.allclose(plain(d), torch.tensor([[1.0, 0.0, 0.0, 0.0, 1.0, 1.0]]), atol=1e-6)
    learned = inr.build_encoding("amplified", 3, learn_alpha=True)
    learned(torch.rand(4, 3)).sum().backward()
    assert learned.alpha.grad is not None


@requires_cuda
def test_hashgrid_tcnn_parity():
    # needs tinycudann built on this CUDA machine (see the README's GPU section)
    pytest.importorskip("tinycudann")
    torch.manual_seed(0)
    ref = HashGrid(3, log2_table=19, backend="torch").cuda()
    fast = HashGrid(3, log2_table=19, backend="tcnn").cuda()
    with torch.no_grad():
        ref.table.uniform_(-1, 1)
        fast.table.copy_(ref.table)
    x = torch.rand(4096, 3, device="cuda") * 2 - 1
    w = torch.randn(4096, 32, device="cuda")
    a, b = ref(x), fast(x)
    assert fast.backend_for(x.device) == "tcnn" and fast._tcnn is not None
    (a * w).sum().backward()
    (b * w).sum().backward()
    # tcnn accumulates in fp32 with a different summation order: 1e-4 absolute on values of O(1)
    assert torch.allclose(a, b, atol=1e-4)
    assert torch.allclose(ref.table.grad, fast.table.grad, atol=1e-3)


def test_spherical_harmonics_known_values_and_orthonormality():
    enc = inr.build_encoding("spherical_harmonics", 3)
    assert enc.out_dim == 16
    up = enc(torch.tensor([[0.0, 0.0, 2.0]]))[0]  # normalised to (0, 0, 1)
    expect = torch.zeros(16)
    expect[0], expect[2], expect[6], expect[12] = 0.28209479, 0.48860251, 0.94617470 - 0.31539157, 0.37317633 * 2
    assert torch.allclose(up, expect, atol=1e-6)
    # tcnn's signs: Y_1 = -c y, Y_3 = -c x
    side = enc(torch.tensor([[1.0, 0.0, 0.0]]))[0]
    assert side[3] == pytest.approx(-0.48860251) and side[1] == 0.0
    # orthonormal on the sphere: 4 pi mean(Y_i Y_j) = delta_ij on a Fibonacci lattice of points
    n = 200_000
    i = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1 - 2 * i / n
    phi = math.pi * (1 + 5**0.5) * i
    r = (1 - z * z).sqrt()
    d = torch.stack([r * phi.cos(), r * phi.sin(), z], -1)
    Y = enc(d)
    gram = 4 * math.pi * (Y.t() @ Y) / n
    assert torch.allclose(gram, torch.eye(16, dtype=torch.float64), atol=1e-3)


@requires_cuda
def test_hashgrid_auto_falls_back_with_one_warning_on_cuda_for_a_1d_grid():
    g = HashGrid(1, n_levels=2, log2_table=6, backend="auto").cuda()
    with pytest.warns(UserWarning, match="pure-torch twin"):
        y = g(torch.rand(8, 1, device="cuda"))
    assert y.is_cuda and g._tcnn is None
