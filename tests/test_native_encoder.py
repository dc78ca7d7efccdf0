"""The native transformer encoder (inr/native/encoder.cpp) against torch's own
nn.TransformerEncoderLayer: the same first-token outputs with keys left out, widths that are not
multiples of the vector width, one layer or several; independent of the thread count; taken by the
point-cloud network's stage 2 only for inference (CPU float32, no gradient wanted, no autocast),
and a clean fallback where the kernels are turned off."""

import pytest
import torch
from torch import nn

from inr import native
from inr.pointcloud.network import PointNet, ReconstructionConfig

from .helpers import run_without_native


def _encoder(d, heads, ff, layers, seed):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    with torch.no_grad():  # biases and norms away from their initial 0 and 1
        for name, p in enc.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(0.3 * torch.randn(p.shape))
    return enc


def _params(enc):
    return [t for L in enc.layers
            for t in (L.self_attn.in_proj_weight, L.self_attn.in_proj_bias, L.self_attn.out_proj.weight,
                      L.self_attn.out_proj.bias, L.norm1.weight, L.norm1.bias, L.linear1.weight, L.linear1.bias,
                      L.linear2.weight, L.linear2.bias, L.norm2.weight, L.norm2.bias)]


@pytest.mark.parametrize("d,heads,ff,layers,T", [(64, 4, 128, 2, 33), (32, 2, 48, 1, 5), (24, 3, 40, 3, 17), (16, 1, 16, 2, 1)])
def test_native_encoder_equals_torchs_encoder_layers(d, heads, ff, layers, T):
    enc = _encoder(d, heads, ff, layers, seed=d + T)
    g = torch.Generator().manual_seed(T)
    V = 37  # groups of two sequences and a last one alone
    tokens = torch.randn(V, T, d, generator=g)
    keep = torch.rand(V, T, generator=g) > 0.4
    keep[:, 0] = True  # as stage 2 keeps its voxel token
    keep[3, 1:] = False  # a sequence that attends to its first token alone
    with torch.no_grad():
        ref = enc(tokens, src_key_padding_mask=~keep)[:, 0]  # torch's own layers, every row computed
        out = native.encoder_first_token(tokens, keep, _params(enc), heads, enc.layers[0].norm1.eps)
    assert out.shape == (V, d)
    torch.testing.assert_close(out, ref, rtol=2e-5, atol=2e-5)


def test_a_sequence_with_no_key_kept_attends_to_nothing():
    enc = _encoder(16, 2, 16, 1, seed=1)
    tokens = torch.randn(2, 4, 16)
    keep = torch.tensor([[False] * 4, [True] * 4])
    out = native.encoder_first_token(tokens, keep, _params(enc), 2, 1e-5)
    # attention output 0: the first row is norm2(h + ffn(h)) with h = norm1(x + out_proj's bias)
    L = enc.layers[0]
    with torch.no_grad():
        h = L.norm1(tokens[0, 0] + L.self_attn.out_proj.bias)
        want = L.norm2(h + L.linear2(L.linear1(h).relu()))
    torch.testing.assert_close(out[0], want, rtol=2e-5, atol=2e-5)
    assert torch.isfinite(out).all()


def test_native_encoder_does_not_depend_on_the_thread_count():
    enc = _encoder(64, 4, 128, 2, seed=3)
    tokens = torch.randn(301, 33, 64, generator=torch.Generator().manual_seed(2))
    keep = torch.rand(301, 33, generator=torch.Generator().manual_seed(3)) > 0.2
    threads = torch.get_num_threads()
    try:
        outs = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            outs.append(native.encoder_first_token(tokens, keep, _params(enc), 4, 1e-5))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_native_encoder_checks_its_arguments():
    enc = _encoder(16, 2, 16, 1, seed=4)
    tokens, keep = torch.randn(3, 4, 16), torch.ones(3, 4, dtype=torch.bool)
    with pytest.raises(RuntimeError, match="12 tensors per layer"):
        native.encoder_first_token(tokens, keep, _params(enc)[:11], 2, 1e-5)
    with pytest.raises(RuntimeError, match="multiple of heads"):
        native.encoder_first_token(tokens, keep, _params(enc), 3, 1e-5)
    with pytest.raises(RuntimeError, match="keep must be bool"):
        native.encoder_first_token(tokens, keep[:, :3], _params(enc), 2, 1e-5)


def _stage2(seed=0):
    torch.manual_seed(seed)
    net = PointNet(ReconstructionConfig(width=8, d_model=32, heads=4, neighbours=12)).eval()
    g = torch.Generator().manual_seed(seed)
    feats, rel = torch.randn(600, 8, generator=g), torch.rand(600, 12, 3, generator=g) * 4 - 2
    return net, feats, rel, torch.rand(600, 12, generator=g) < 0.3


def test_stage2_takes_the_kernel_for_inference_only(monkeypatch):
    calls = []
    real = native.encoder_first_token
    monkeypatch.setattr(native, "encoder_first_token", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(PointNet, "NATIVE_CHUNK", 256)  # several blocks
    net, feats, rel, mask = _stage2()
    with torch.no_grad():
        fast = net(feats, rel, mask)
        net.backend = "torch"
        slow = net(feats, rel, mask)
        net.backend = "auto"
        with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16 products: torch
            net(feats, rel, mask)
        net.double()(feats.double(), rel.double(), mask)  # float64: torch
    assert len(calls) == 3  # the three blocks of the first call
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
    net.float()
    out = net(feats, rel, mask)  # gradients wanted: torch, and they flow
    out.sum().backward()
    assert len(calls) == 3 and net.transformer.layers[0].self_attn.in_proj_weight.grad.abs().sum() > 0
    net.backend = "cuda"
    with pytest.raises(ValueError, match="backend"), torch.no_grad():
        net(feats, rel, mask)


def test_stage2_falls_back_to_torch_with_one_warning_when_native_is_off():
    code = (
        "import warnings, torch\n"
        "from inr.pointcloud.network import PointNet, ReconstructionConfig\n"
        "net = PointNet(ReconstructionConfig(width=4, d_model=16, heads=2, neighbours=3)).eval()\n"
        "with warnings.catch_warnings(record=True) as w, torch.no_grad():\n"
        "    warnings.simplefilter('always')\n"
        "    y = net(torch.ones(2, 4), torch.zeros(2, 3, 3), torch.zeros(2, 3, dtype=torch.bool)); net(torch.ones(2, 4), torch.zeros(2, 3, 3), torch.zeros(2, 3, dtype=torch.bool))\n"
        "print(tuple(y.shape), len([m for m in w if 'native' in str(m.message)]))\n"
    )
    assert run_without_native(code).strip() == "(2, 8, 3) 1"
