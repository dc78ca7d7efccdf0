import torch

import inr
import inr.encodings

EXPECTED_ENCODINGS = {"identity", "basic", "positional", "fourier", "learnable_fourier", "shifted_basis",
                      "progressive", "quantized", "hashgrid", "amplified", "spherical_harmonics"}
EXPECTED_NETWORKS = {"mlp", "siren", "spder", "poly_inr", "pins"}


def test_star_import_matches_all():
    ns = {}
    exec("from inr import *", ns)
    exported = {k for k in ns if not k.startswith("__")} | ({"__version__"} & set(ns))
    assert exported == set(inr.__all__)
    for name in inr.__all__:
        assert getattr(inr, name) is not None


def test_registries_list_every_method():
    assert set(inr.available_encodings()) == EXPECTED_ENCODINGS
    assert set(inr.available_networks()) == EXPECTED_NETWORKS


def test_every_encoding_builds_from_in_dim_alone():
    for name in inr.available_encodings():
        fixed = inr.encodings.ENCODINGS.get(name).fixed_in_dim
        for d in (1, 2, 3) if fixed is None else (fixed,):
            enc = inr.build_encoding(name, d)
            x = torch.rand(9, d) * 2 - 1
            y = enc(x)
            assert y.shape == (9, enc.out_dim), name
            assert torch.isfinite(y).all(), name


def test_every_network_builds_from_dims_alone():
    for name in inr.available_networks():
        net = inr.build_network(name, 6, 2)
        y = net(torch.rand(5, 6))
        assert y.shape == (5, 2) and torch.isfinite(y).all(), name


def test_unknown_names_say_what_exists():
    for fn, args in ((inr.build_encoding, ("nope", 2)), (inr.build_network, ("nope", 2, 3))):
        try:
            fn(*args)
        except ValueError as exc:
            assert "available" in str(exc) and "nope" in str(exc)
        else:
            raise AssertionError("no error for an unknown name")


def test_field_from_config_and_levels():
    field = inr.Field(2, 3, inr.FieldConfig(encoding="progressive", encoding_options={"num_freqs": 6, "levels": 3}, network="pins"))
    assert field.num_levels == 3
    x = torch.rand(4, 2) * 2 - 1
    assert torch.equal(field(x), field(x, level=2))


def test_maths_layers_do_not_load_lightning_or_cli():
    import subprocess
    import sys

    code = "import sys, inr, inr.render, inr.encodings, inr.networks, inr.data; print(any(m.startswith(('lightning', 'inr.cli', 'inr.tasks', 'matplotlib')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
