"""The native kernels' bfloat16 products (gather_conv and encoder_first_token with bf16=True,
`pointcloud.network.use_bf16`) against independent references: the same sums in float64 of the
operands rounded to bfloat16 by torch. They must match those (float32 sums) and differ from the
float32 kernels by the rounding (so the bf16 path really ran). Skipped where the CPU has no
bfloat16 dot products (AVX512-BF16)."""

import pytest
import torch
from torch import nn

from inr import _external, native
from inr.pointcloud.network import PointNet, ReconstructionConfig, use_bf16
from inr.pointcloud.sparse_conv import SparseTensor, SubmanifoldConv3d

from .test_native_encoder import _encoder, _params

pytestmark = pytest.mark.skipif(not (_external.has_native_cpu() and native.bf16_products()),
                                reason="no bfloat16 dot products on this CPU (or no native kernels)")


def bf(t: torch.Tensor) -> torch.Tensor:
    """t rounded to bfloat16 (to nearest, ties to even), in float64."""
    return t.to(torch.bfloat16).double()


@pytest.mark.parametrize("cin,cout", [(32, 32), (5, 7), (33, 20)])  # odd widths: a zero-padded pair
def test_bf16_gather_conv_equals_float64_sums_of_rounded_operands(cin, cout):
    g = torch.Generator().manual_seed(cin + cout)
    n, m, k = 300, 250, 27
    x = torch.randn(n, cin, generator=g)
    w = torch.randn(k, cin, cout, generator=g) / cin**0.5
    b = torch.randn(cout, generator=g)
    table = torch.randint(-1, n, (m, k), generator=g, dtype=torch.int32)  # about 1 in n entries none
    table[::7, ::2] = -1
    out = native.gather_conv(x, table, w, b, True)
    fp32 = native.gather_conv(x, table, w, b)
    ref, ref32 = b.double().repeat(m, 1), b.double().repeat(m, 1)
    for o in range(k):
        rows = (table[:, o] >= 0).nonzero()[:, 0]
        src = table[rows, o].long()
        ref[rows] += bf(x[src]) @ bf(w[o])
        ref32[rows] += x[src].double() @ w[o].double()
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=2e-5)  # float32 sums of exact products
    torch.testing.assert_close(fp32.double(), ref32, rtol=1e-5, atol=2e-5)
    assert (out.double() - ref32).abs().max() > 1e-3  # the rounding shows: bf16 ran


def test_bf16_gather_conv_is_exact_on_operands_that_bfloat16_holds():
    # small integers and halves are bfloat16 numbers: the products and sums are exact
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-8, 9, (40, 16), generator=g).float() / 2
    w = torch.randint(-4, 5, (3, 16, 16), generator=g).float()
    table = torch.randint(-1, 40, (30, 3), generator=g, dtype=torch.int32)
    assert torch.equal(native.gather_conv(x, table, w, None, True), native.gather_conv(x, table, w, None))


def _reference(enc, tokens, keep, rounded):
    """The encoder's first-token output in float64, written out: each linear layer's input and
    weight rounded to bfloat16 where `rounded` (the attention's own products, softmax and norms not)."""
    r = bf if rounded else (lambda t: t.double())
    x = tokens.double()
    for i, L in enumerate(enc.layers):
        a, d = L.self_attn, x.shape[-1]
        h_, dh = a.num_heads, d // a.num_heads
        w, b = a.in_proj_weight, a.in_proj_bias.double()
        rows = x if i + 1 < len(enc.layers) else x[:, :1]
        q = r(rows) @ r(w[:d] / dh**0.5).T + b[:d] / dh**0.5  # the kernel folds the scale into the weights
        k = r(x) @ r(w[d:2 * d]).T + b[d:2 * d]
        v = r(x) @ r(w[2 * d:]).T + b[2 * d:]
        split = lambda t: t.unflatten(-1, (h_, dh)).transpose(1, 2)  # noqa: E731
        s = split(q) @ split(k).transpose(-1, -2)
        s = s.masked_fill(~keep[:, None, None, :], float("-inf")).softmax(-1)
        o = (s @ split(v)).transpose(1, 2).flatten(2)
        ln = lambda t, n: nn.functional.layer_norm(t, (d,), n.weight.double(), n.bias.double(), n.eps)  # noqa: E731
        h = ln(rows + r(o) @ r(a.out_proj.weight).T + a.out_proj.bias.double(), L.norm1)
        f = (r(h) @ r(L.linear1.weight).T + L.linear1.bias.double()).relu()
        x = ln(h + r(f) @ r(L.linear2.weight).T + L.linear2.bias.double(), L.norm2)
    return x[:, 0]


@pytest.mark.parametrize("d,heads,ff,layers,T", [(64, 4, 128, 2, 33), (24, 3, 40, 1, 5)])
def test_bf16_encoder_equals_a_float64_reference_of_rounded_linear_layers(d, heads, ff, layers, T):
    enc = _encoder(d, heads, ff, layers, seed=d + T)
    g = torch.Generator().manual_seed(T)
    tokens, keep = torch.randn(41, T, d, generator=g), torch.rand(41, T, generator=g) > 0.3
    keep[:, 0] = True
    with torch.no_grad():
        out = native.encoder_first_token(tokens, keep, _params(enc), heads, 1e-5, True)
        ref, ref32 = _reference(enc, tokens, keep, True), _reference(enc, tokens, keep, False)
        fp32 = native.encoder_first_token(tokens, keep, _params(enc), heads, 1e-5)
    torch.testing.assert_close(fp32.double(), ref32, rtol=1e-4, atol=1e-4)  # the reference is right
    # bf16 inside: the kernel and the reference round the same operands, but a rounding of a value
    # that float32 and float64 hold apart can fall on either side: a few 1e-3 at most, far below
    # the rounding's own effect
    err, effect = (out.double() - ref).abs(), (ref - ref32).abs()
    assert err.max() < 5e-3 and err.mean() < 0.02 * effect.mean()


def test_use_bf16_runs_the_network_layers_in_bf16_for_inference_only():
    torch.manual_seed(0)
    conv = SubmanifoldConv3d(16, 16)
    net = PointNet(ReconstructionConfig(width=8, d_model=32, heads=4, neighbours=12)).eval()
    coords = torch.randint(0, 6, (80, 3)).unique(dim=0)
    x = SparseTensor(coords, torch.randn(len(coords), 16))
    g = torch.Generator().manual_seed(1)
    feats, rel, mask = torch.randn(50, 8, generator=g), torch.rand(50, 12, 3, generator=g) * 4 - 2, torch.zeros(50, 12, dtype=torch.bool)
    with torch.no_grad():
        y32, p32 = conv(x).feats, net(feats, rel, mask)
        assert use_bf16(conv) and use_bf16(net)
        y16, p16 = conv(x).feats, net(feats, rel, mask)
    assert 0 < (y16 - y32).abs().max() < 0.05 and 0 < (p16 - p32).abs().max() < 0.05
    trained = conv(SparseTensor(coords, x.feats.clone().requires_grad_())).feats  # a gradient wanted: float32
    assert torch.equal(trained.detach(), y32)
    assert use_bf16(net, False) is False and not any(getattr(m, "bf16", False) for m in net.modules())
    with torch.no_grad():
        assert torch.equal(net(feats, rel, mask), p32)


def test_denoise_with_precision_bf16_says_so_and_stays_on_the_surface(tmp_path, capsys):
    import numpy as np

    from inr.cli import main
    from inr.data.pointclouds import read_cloud

    rng = np.random.default_rng(0)
    pts = rng.normal(size=(3000, 3))
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    np.save(tmp_path / "in.npy", pts + rng.normal(scale=0.02, size=pts.shape))
    outs = {}
    for precision in ("32", "bf16"):
        out = tmp_path / f"{precision}.ply"
        assert main(["pointcloud", "denoise", str(tmp_path / "in.npy"), str(out), "--precision", precision,
                     "--no-progress", "--no-normals"]) == 0
        said = capsys.readouterr().out
        assert (" in bf16)" in said) == (precision == "bf16"), said
        outs[precision] = read_cloud(out)[0]
    radius = {p: np.abs(np.linalg.norm(o, axis=1) - 1) for p, o in outs.items()}
    assert radius["bf16"].mean() < 0.6 * 0.02 * np.sqrt(2 / np.pi)  # well inside the input's own spread (0.016)
    assert abs(radius["bf16"].mean() - radius["32"].mean()) < 0.1 * radius["32"].mean()
    assert not np.array_equal(outs["bf16"], outs["32"])
