import math

import numpy as np
import pytest
import torch

import inr
from inr.networks.siren import ACTIVATIONS


def test_siren_initialisation_ranges():
    net = inr.build_network("siren", 2, 3, hidden=256, layers=3, w0=30.0)
    first, hidden = net.body[0].linear.weight, net.body[1].linear.weight
    # first layer U(-1/n, 1/n) with n = 2; later U(-sqrt(6/n)/w0, +) with n = 256
    assert first.abs().max() <= 1 / 2 and first.abs().max() > 0.45
    bound = math.sqrt(6 / 256) / 30
    assert hidden.abs().max() <= bound and hidden.abs().max() > 0.95 * bound
    # uniform: the std of U(-b, b) is b / sqrt(3)
    assert hidden.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.02)


def test_siren_first_w0_and_activation_values():
    net = inr.build_network("siren", 1, 1, hidden=4, layers=0, w0=30.0, first_w0=3000.0)
    assert net.body[0].w0 == 3000.0
    layer = net.body[0]
    x = torch.tensor([[0.25]])
    assert torch.allclose(layer(x), torch.sin(3000.0 * layer.linear(x)))


def test_spder_activation_known_values_and_defaults():
    z = torch.tensor([0.0, math.pi / 2, -4.0])
    expect = torch.tensor([0.0, math.sqrt(math.pi / 2), math.sin(-4.0) * 2.0])
    assert torch.allclose(ACTIVATIONS["spder"](z), expect, atol=1e-4)
    assert torch.allclose(ACTIVATIONS["spder_arctan"](torch.tensor([1.0])), torch.tensor([math.sin(1.0) * math.atan(1.0)]))
    net = inr.build_network("spder", 2, 1)
    assert len(net.body) == 6 and net.body[0].activation == "spder"  # 1 input + 5 hidden layers
    grad_net = inr.build_network("spder", 1, 1, hidden=8, layers=1)
    x = torch.zeros(3, 1, requires_grad=True)
    grad_net(x).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_mlp_shape_and_sigmoid():
    net = inr.build_network("mlp", 4, 2, hidden=16, layers=2, output_activation="sigmoid")
    y = net(torch.randn(100, 4) * 50)
    assert ((y >= 0) & (y <= 1)).all()
    assert sum(isinstance(m, torch.nn.Linear) for m in net.modules()) == 3


def test_poly_inr_is_a_polynomial_of_degree_levels_plus_one():
    # with a linear activation (slope 1) and no clamp hit, the output along a line is a
    # polynomial of degree levels + 1 in the coordinate: exact fit at that degree, not below
    levels = 3
    net = inr.build_network("poly_inr", 1, 1, hidden=8, levels=levels, negative_slope=1.0).double()
    t = torch.linspace(-1, 1, 41, dtype=torch.float64)[:, None]
    y = net(t).detach().numpy()[:, 0]
    tt = t.numpy()[:, 0]
    res_ok = np.abs(np.polyval(np.polyfit(tt, y, levels + 1), tt) - y).max()
    res_low = np.abs(np.polyval(np.polyfit(tt, y, levels), tt) - y).max()
    assert res_ok < 1e-9 * max(1.0, np.abs(y).max())
    assert res_low > 1e-6 * np.abs(y).max()


def test_pins_levels_only_see_their_bands():
    net = inr.build_network("pins", 12, 3, level_dims=[4, 4, 4], hidden=16)
    f = torch.randn(5, 12)
    g = f.clone()
    g[:, 8:] += 1.0  # change only band 2
    assert torch.equal(net(f, level=1), net(g, level=1))
    assert not torch.allclose(net(f, level=2), net(g, level=2))
    # level outputs are cumulative: level k = level k-1 + head_k(h_k)
    with torch.no_grad():
        for head in net.heads[1:]:
            head.weight.zero_()
            head.bias.zero_()
    assert torch.allclose(net(f, level=0), net(f))
    with pytest.raises(ValueError):
        net(f, level=3)


@pytest.mark.parametrize("name", ["mlp", "siren", "spder", "poly_inr", "pins"])
@pytest.mark.parametrize("in_dim", [1, 2, 3])
def test_every_network_builds_from_its_sizes_alone(name, in_dim):
    net = inr.build_network(name, in_dim, 3)
    assert net(torch.rand(5, in_dim)).shape == (5, 3)
