"""The native fused MLP (inr/native/mlp.cpp) against torch's Linear/ReLU stack computed in float64:
values and every gradient, at widths that are not multiples of the kernel's 16 lanes and at row
counts around its tile and chunk sizes; deterministic across thread counts; traced by
torch.compile; the MLP network's backend switch and its fallback."""

import pytest
import torch

from inr import native
from inr.networks.mlp import MLP

from .helpers import run_without_native


def _reference(x, weights, biases):
    h = x
    for i, w in enumerate(weights):
        h = torch.nn.functional.linear(h, w, biases[i] if biases else None)
        if i < len(weights) - 1:
            h = torch.relu(h)
    return h


def _random_layers(dims, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    weights = [torch.randn(b, a, generator=g, dtype=torch.float64) / a ** 0.5 for a, b in zip(dims[:-1], dims[1:])]
    biases = [torch.randn(b, generator=g, dtype=torch.float64) * 0.3 for b in dims[1:]] if bias else []
    return weights, biases


CASES = [([32, 64, 16], 1), ([31, 64, 64, 3], 5000), ([5, 37, 3], 47), ([3, 20, 1], 2049), ([2, 130, 70, 17], 300),
         ([7, 4], 100), ([16, 64, 64, 64, 2], 4097)]


@pytest.mark.parametrize("dims,n", CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_native_mlp_matches_float64_reference(dims, n, bias):
    weights, biases = _random_layers(dims, bias)
    x = torch.randn(n, dims[0], dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    go = torch.randn(n, dims[-1], dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ref_params = [p.clone().requires_grad_() for p in weights + biases]
    xr = x.clone().requires_grad_()
    ref = _reference(xr, ref_params[:len(weights)], ref_params[len(weights):])
    (ref * go).sum().backward()

    params = [p.float().requires_grad_() for p in weights + biases]
    xf = x.float().requires_grad_()
    out = native.mlp(xf, params[:len(weights)], params[len(weights):])
    (out * go.float()).sum().backward()

    def close(a, b):  # float32 sums of up to a few thousand terms, in another order than float64
        return float((a.detach().double() - b).abs().max()) <= 2e-6 * max(1.0, float(b.abs().max()))

    assert out.dtype == torch.float32 and out.shape == ref.shape
    assert close(out, ref) and close(xf.grad, xr.grad)
    assert all(close(p.grad, r.grad) for p, r in zip(params, ref_params))


def test_native_mlp_known_value():
    # 2 -> 2 (ReLU) -> 1 by hand: h = relu([1*1 + 2*(-1) + 0.5, 1*2 + 2*1 - 1]) = relu([-0.5, 3]) = [0, 3]
    # y = 3*h0 - 2*h1 + 1 = -5; dy/dx = -2 * W1[1] = (-4, -2) (h0's ReLU is off); dy/dW2 = h; dy/db2 = 1
    w1 = torch.tensor([[1.0, -1.0], [2.0, 1.0]], requires_grad=True)
    b1 = torch.tensor([0.5, -1.0], requires_grad=True)
    w2 = torch.tensor([[3.0, -2.0]], requires_grad=True)
    b2 = torch.tensor([1.0], requires_grad=True)
    x = torch.tensor([[1.0, 2.0]], requires_grad=True)
    y = native.mlp(x, [w1, w2], [b1, b2])
    y.sum().backward()
    assert torch.equal(y, torch.tensor([[-5.0]]))
    assert torch.equal(x.grad, torch.tensor([[-4.0, -2.0]]))
    assert torch.equal(w2.grad, torch.tensor([[0.0, 3.0]])) and torch.equal(b2.grad, torch.tensor([1.0]))
    assert torch.equal(w1.grad, torch.tensor([[0.0, 0.0], [-2.0, -4.0]])) and torch.equal(b1.grad, torch.tensor([0.0, -2.0]))


def test_native_mlp_empty_batch_and_strided_input():
    weights, biases = _random_layers([6, 64, 3])
    weights, biases = [w.float() for w in weights], [b.float() for b in biases]
    assert native.mlp(torch.zeros(0, 6), weights, biases).shape == (0, 3)
    wide = torch.randn(50, 12)
    assert torch.allclose(native.mlp(wide[:, ::2], weights, biases), _reference(wide[:, ::2], weights, biases), atol=1e-5)


def test_native_mlp_gradients_do_not_depend_on_the_thread_count():
    weights, biases = _random_layers([32, 64, 64, 3])
    params = [p.float().requires_grad_() for p in weights + biases]
    x = torch.randn(9000, 32, requires_grad=True)
    go = torch.randn(9000, 3)
    threads = torch.get_num_threads()
    grads = []
    try:
        for n in (1, threads, 3):
            torch.set_num_threads(n)
            for p in params + [x]:
                p.grad = None
            (native.mlp(x, params[:3], params[3:]) * go).sum().backward()
            grads.append([p.grad.clone() for p in params + [x]])
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for g in grads[1:] for a, b in zip(grads[0], g))


def test_mlp_network_backends_agree_and_compile():
    torch.manual_seed(0)
    fast = MLP(31, 3, hidden=64, layers=2, output_activation="sigmoid", backend="native")
    slow = MLP(31, 3, hidden=64, layers=2, output_activation="sigmoid", backend="torch")
    slow.load_state_dict(fast.state_dict())
    assert fast.backend_for(torch.device("cpu")) == "native" and slow.backend_for(torch.device("cpu")) == "torch"
    assert MLP(3, 1, backend="native").backend_for(torch.device("meta")) == "torch"  # other devices: torch
    x = torch.randn(1000, 31)
    ya, yb = fast(x), slow(x)
    assert torch.allclose(ya, yb, atol=2e-6)
    ya.square().sum().backward()
    yb.square().sum().backward()
    for a, b in zip(fast.parameters(), slow.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=2e-5 * float(b.grad.abs().max()))
    compiled = torch.compile(fast, dynamic=True)
    compiled(x)
    with torch.profiler.profile() as prof:
        yc = compiled(x)
    assert "inr_native::mlp_forward" in {e.key for e in prof.key_averages()}  # traced as one op, not decomposed
    assert torch.allclose(yc, ya, atol=1e-6)  # inductor's vectorised sigmoid rounds differently
    # bf16 autocast runs torch's bf16 layers (faster there than the float32 kernel)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.profiler.profile() as prof:
        assert fast(x).dtype == torch.bfloat16
    assert "inr_native::mlp_forward" not in {e.key for e in prof.key_averages()}
    # float64 modules run torch's layers (the kernel is float32)
    assert fast.double()(x.double()).dtype == torch.float64


def test_native_mlp_refuses_double_backward():
    net = MLP(3, 1, hidden=16, layers=2, backend="native")
    x = torch.randn(10, 3, requires_grad=True)
    (g,) = torch.autograd.grad(net(x).sum(), x)  # first order: fine
    assert g.shape == x.shape
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(net(x).sum(), x, create_graph=True)
    with pytest.raises(ValueError, match="backend"):
        MLP(3, 1, backend="tcnn")


def test_mlp_falls_back_to_torch_with_one_warning_when_native_is_off():
    code = (
        "import warnings, torch\n"
        "from inr.networks.mlp import MLP\n"
        "net = MLP(4, 2, hidden=8, layers=1)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    net(torch.rand(4, 4)); net(torch.rand(4, 4))\n"
        "print(net.backend_for(torch.device('cpu')), len([m for m in w if 'native' in str(m.message)]))\n"
    )
    assert run_without_native(code).strip() == "torch 1"


def test_auto_takes_torch_for_wide_layers_only_without_wide_vectors(monkeypatch):
    # with 8-float (AVX2) vectors the fused kernel loses to torch on 256-wide layers
    from inr.networks.mlp import NATIVE_NARROW, MLP

    cpu = torch.device("cpu")
    for wide_vectors, expect_wide in ((True, "native"), (False, "torch")):
        monkeypatch.setattr(native, "wide_vectors", lambda w=wide_vectors: w)
        assert MLP(3, 1, hidden=NATIVE_NARROW, backend="auto").backend_for(cpu) == "native"
        assert MLP(3, 1, hidden=2 * NATIVE_NARROW, backend="auto").backend_for(cpu) == expect_wide
        assert MLP(3, 1, hidden=2 * NATIVE_NARROW, backend="native").backend_for(cpu) == "native"  # asked for: kept
