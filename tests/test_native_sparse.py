"""The native sparse convolutions (inr/native/sparse_conv.cpp) against dense convolutions and the
torch path: the same values, the gather table equal to the torch lookups, independent of the
thread count, taken only for inference (CPU float32, no gradient wanted, no autocast), and a
clean fallback where the kernels are turned off."""

import pytest
import torch

from inr import native
from inr.pointcloud import sparse_conv
from inr.pointcloud.sparse_conv import DownConv3d, SparseTensor, SubmanifoldConv3d, UpConv3d, kernel_offsets

from .helpers import run_without_native


def _sites(n=9, p=0.3, seed=0, batches=1):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(batches, n, n, n, generator=g) < p
    idx = mask.nonzero()
    return mask, idx[:, 1:], idx[:, 0]


def _dense(mask, coords, batch, feats):
    d = torch.zeros(mask.shape[0], feats.shape[1], *mask.shape[1:], dtype=feats.dtype)
    d[batch, :, coords[:, 0], coords[:, 1], coords[:, 2]] = feats
    return d


def _pair(cls, cin, cout, **kw):
    torch.manual_seed(cin * 7 + cout)
    slow, fast = cls(cin, cout, backend="torch", **kw), cls(cin, cout, backend="native", **kw)
    torch.nn.init.normal_(slow.bias)
    fast.load_state_dict(slow.state_dict())
    return slow, fast


@pytest.mark.parametrize("k,cin,cout", [(3, 5, 7), (3, 32, 32), (3, 64, 96), (5, 3, 17), (1, 4, 4)])
def test_native_submanifold_conv_equals_the_dense_conv3d(k, cin, cout):
    mask, coords, batch = _sites(seed=k + cin, batches=2)
    feats = torch.randn(len(coords), cin, generator=torch.Generator().manual_seed(1))
    _, conv = _pair(SubmanifoldConv3d, cin, cout, kernel_size=k)
    with torch.no_grad():
        y = conv(SparseTensor(coords, feats, batch))
        # conv3d's weight (out, in, i, j, k) at kernel index (i, j, k) reads input x + (i, j, k) - k // 2
        w = conv.weight.view(k, k, k, cin, cout).permute(4, 3, 0, 1, 2)
        ref = torch.nn.functional.conv3d(_dense(mask, coords, batch, feats).double(), w.double(),
                                         conv.bias.double(), padding=k // 2)
    at = ref[y.batch, :, y.coords[:, 0], y.coords[:, 1], y.coords[:, 2]]
    assert "subm-table" in str(list(y.cache))  # the native table was built: the kernel ran
    torch.testing.assert_close(y.feats.double(), at, rtol=1e-5, atol=1e-5)


def test_native_gather_table_equals_the_torch_lookups_batches_and_edges():
    # sites at the ends of the coordinate range too, where a neighbour's key would leave it
    _, coords, batch = _sites(n=7, p=0.5, seed=3, batches=3)
    edge = torch.tensor([[-(2**15), 0, 0], [2**15 - 1, 5, 2**15 - 1], [0, -(2**15), 3]])
    coords = torch.cat([coords - 3, edge])
    batch = torch.cat([batch, torch.tensor([0, 1, 2])])
    x = SparseTensor(coords, torch.zeros(len(coords), 1), batch)
    for k in (1, 3, 5):
        table = native.submanifold_table(x.keys, k)
        ref = torch.full_like(table, -1)
        for o, off in enumerate(kernel_offsets(k)):
            shifted = x.coords + off
            inside = ((shifted >= -(2**15)) & (shifted < 2**15)).all(1)
            idx, found = x.lookup(shifted[inside], x.batch[inside])
            ref[inside.nonzero()[:, 0], o] = torch.where(found, idx, -1).int()
        assert torch.equal(table, ref)
        assert (table[:, k**3 // 2] == torch.arange(len(x))).all()  # every site is its own centre


def test_native_down_and_up_convs_equal_the_torch_path():
    mask, coords, batch = _sites(n=10, p=0.3, seed=4, batches=2)
    feats = torch.randn(len(coords), 6, generator=torch.Generator().manual_seed(2))
    (down_t, down_n), (up_t, up_n) = _pair(DownConv3d, 6, 16), _pair(UpConv3d, 16, 5)
    with torch.no_grad():
        xt, xn = SparseTensor(coords, feats, batch), SparseTensor(coords, feats, batch)
        yt, yn = down_t(xt), down_n(xn)
        assert torch.equal(yt.coords, yn.coords) and "down-table" in xn.cache and "down-table" not in xt.cache
        torch.testing.assert_close(yn.feats, yt.feats, rtol=1e-5, atol=1e-5)
        # up onto sites some of whose parents are inactive (they read zeros: the bias alone)
        target = SparseTensor(torch.cat([coords, coords.new_tensor([[40, 40, 40]])]),
                              torch.zeros(len(coords) + 1, 0), torch.cat([batch, batch.new_tensor([0])]))
        zt, zn = up_t(yt, target), up_n(yn, SparseTensor(target.coords, target.feats, target.batch))
    torch.testing.assert_close(zn.feats, zt.feats, rtol=1e-5, atol=1e-5)
    orphan = (zn.coords == 40).all(1)  # rows are in key order: find the site by its coordinates
    assert int(orphan.sum()) == 1
    torch.testing.assert_close(zn.feats[orphan][0], up_n.bias.detach())


def test_native_conv_does_not_depend_on_the_thread_count():
    _, coords, batch = _sites(n=14, p=0.4, seed=5)
    x = SparseTensor(coords, torch.randn(len(coords), 32, generator=torch.Generator().manual_seed(3)), batch)
    _, conv = _pair(SubmanifoldConv3d, 32, 32)
    threads = torch.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            with torch.no_grad():
                outs.append(conv(x).feats)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_the_native_kernel_runs_for_cpu_float32_without_autocast(monkeypatch):
    calls = []
    real = native.gather_conv
    monkeypatch.setattr(native, "gather_conv", lambda *a: calls.append(1) or real(*a))
    _, coords, batch = _sites(seed=6)
    feats = torch.randn(len(coords), 4)
    slow, conv = _pair(SubmanifoldConv3d, 4, 4)
    auto = SubmanifoldConv3d(4, 4)  # backend 'auto'
    with torch.no_grad():
        conv(SparseTensor(coords, feats))
        auto(SparseTensor(coords, feats))
        slow(SparseTensor(coords, feats))  # backend 'torch'
        conv.double()(SparseTensor(coords, feats.double()))  # float64: torch
        conv.float()
        with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16 products: torch
            conv(SparseTensor(coords, feats))
    assert len(calls) == 2
    with pytest.raises(ValueError, match="backend"):
        SubmanifoldConv3d(4, 4, backend="spconv")


@pytest.mark.parametrize("cls", [SubmanifoldConv3d, DownConv3d, UpConv3d])
def test_native_gradients_equal_the_torch_paths(cls):
    # training takes the kernel too: the input gradient through the transposed table (mirrored
    # offsets for a submanifold convolution), weight and bias gradients per offset
    mask, coords, batch = _sites(n=10, p=0.35, seed=8, batches=2)
    feats = torch.randn(len(coords), 6, generator=torch.Generator().manual_seed(4))
    slow, fast = _pair(cls, 6, 16)
    if cls is UpConv3d:  # onto sites some of whose parents are inactive
        coords = coords[batch == 0]
        parents = torch.unique(torch.div(coords, 2, rounding_mode="floor"), dim=0)[::2]
        coarse_t = SparseTensor(parents, torch.zeros(len(parents), 0))
        feats = torch.randn(len(parents), 6, generator=torch.Generator().manual_seed(5))
    results = []
    for layer in (slow, fast):
        leaf = feats.clone().requires_grad_(True)
        if cls is UpConv3d:
            out = layer(SparseTensor(coarse_t.coords, leaf), SparseTensor(coords, torch.zeros(len(coords), 0)))
        else:
            out = layer(SparseTensor(coords, leaf, batch))
        g = torch.randn(out.feats.shape, generator=torch.Generator().manual_seed(6))
        (out.feats * g).sum().backward()
        results.append((out.feats.detach(), leaf.grad, layer.weight.grad, layer.bias.grad))
    assert results[1][1].abs().sum() > 0 and results[1][2].abs().sum() > 0
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)


def test_the_reconstruction_network_agrees_on_both_paths():
    from inr.pointcloud.network import ReconstructionConfig, VoxelNet

    torch.manual_seed(0)
    cfg = ReconstructionConfig(width=16, hourglasses=2, depth=2, moments=True)
    net = VoxelNet(cfg).eval()
    _, coords, _ = _sites(n=16, p=0.25, seed=7)
    feats = torch.randn(len(coords), net.in_features)
    with torch.no_grad():
        fast = net(SparseTensor(coords, feats))
        for m in net.modules():
            if hasattr(m, "backend"):
                m.backend = "torch"
        slow = net(SparseTensor(coords, feats))
    assert torch.equal(fast.sites.coords, slow.sites.coords)
    for a, b in zip(fast.logits, slow.logits):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_sparse_convs_fall_back_to_torch_with_one_warning_when_native_is_off():
    code = (
        "import warnings, torch\n"
        "from inr.pointcloud.sparse_conv import SparseTensor, SubmanifoldConv3d\n"
        "conv = SubmanifoldConv3d(3, 2)\n"
        "x = SparseTensor(torch.tensor([[0, 0, 0], [0, 0, 1]]), torch.ones(2, 3))\n"
        "with warnings.catch_warnings(record=True) as w, torch.no_grad():\n"
        "    warnings.simplefilter('always')\n"
        "    y = conv(x); conv(x)\n"
        "print(list(y.cache), len([m for m in w if 'native' in str(m.message)]))\n"
    )
    assert run_without_native(code).strip() == "[('subm', 3)] 1"  # the torch path's maps, one warning


def test_backend_names_are_checked():
    for cls in (DownConv3d, UpConv3d):
        with pytest.raises(ValueError, match="backend"):
            cls(2, 2, backend="cuda")
    assert sparse_conv.BACKENDS == ("auto", "torch", "native")


def test_native_gather_conv_refuses_a_table_past_the_rows():
    x = torch.randn(4, 3)
    table = torch.tensor([[0, 1], [2, 4]], dtype=torch.int32)  # row 4 of 4: past the end
    with pytest.raises(RuntimeError, match="past x's rows"):
        native.gather_conv(x, table, torch.randn(2, 3, 5), None)
    table[1, 1] = -1  # -1: no neighbour there, the bias alone where none
    out = native.gather_conv(x, table, w := torch.randn(2, 3, 5), b := torch.randn(5))
    torch.testing.assert_close(out, torch.stack([b + x[0] @ w[0] + x[1] @ w[1], b + x[2] @ w[0]]))


def test_native_weight_gradient_equals_a_sum_over_the_table():
    # dW[o] = sum_i x[table[i, o]]^T grad[i] where the entry is a row; an offset no row uses stays 0;
    # widths that are not multiples of the vector width; the same for any thread count
    g = torch.Generator().manual_seed(11)
    x, grad = torch.randn(300, 5, generator=g), torch.randn(400, 19, generator=g)
    table = torch.randint(-1, 300, (400, 4), generator=g, dtype=torch.int32)
    table[:, 2] = -1
    want = torch.zeros(4, 5, 19, dtype=torch.float64)
    for i in range(400):
        for o in range(4):
            if table[i, o] >= 0:
                want[o] += torch.outer(x[table[i, o]].double(), grad[i].double())
    threads = torch.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            outs.append(native.gather_wgrad(x, table, grad))
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(outs[0].double(), want, rtol=1e-5, atol=1e-5)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2]) and not outs[0][2].any()
    table[7, 1] = 300  # past x's rows
    with pytest.raises(RuntimeError, match="past x's rows"):
        native.gather_wgrad(x, table, grad)
