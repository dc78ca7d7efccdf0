from dataclasses import asdict

import pytest
import torch
from torch._dynamo.utils import counters

from inr.presets import TrainConfig
from inr.tasks.signal_fit import SignalFitModule, split_holdout


def test_many_compiled_fits_in_one_process_stay_compiled():
    # Dynamo would fall back to eager after 8 differently shaped fields sharing Field.forward
    for hidden in range(4, 14):
        module = SignalFitModule(2, 1, {"encoding": "identity", "network": "mlp", "network_options": {"hidden": hidden, "layers": 1}},
                                 asdict(TrainConfig(compile=True)))
        module.configure_model()
        before = counters["stats"]["unique_graphs"]
        module._fast["field"](torch.rand(8, 2))
        assert counters["stats"]["unique_graphs"] == before + 1, f"field {hidden} was not compiled"


def test_even_odd_split_known_values():
    values = torch.arange(16, dtype=torch.float32).view(4, 4, 1)
    ctr, vtr, cte, vte = split_holdout(values, "even-odd")
    assert vtr.flatten().tolist() == [0, 2, 8, 10]
    assert vte.flatten().tolist() == [5, 7, 13, 15]
    # pixel (1, 1) of a 4x4 grid has cell-centre coordinates (-0.25, -0.25)
    assert torch.allclose(cte[0], torch.tensor([-0.25, -0.25]))
    c, v, c2, v2 = split_holdout(values, "none")
    assert c is c2 and v.shape == (16, 1)
    with pytest.raises(ValueError):
        split_holdout(values, "random")


def test_supervising_every_pins_level_makes_coarse_levels_fits(tmp_path):
    from inr.tasks.run import RunOptions, train

    from .helpers import smooth_image

    img = smooth_image(tmp_path / "p.png", 16)
    level0 = {}
    for every in (False, True):
        opts = RunOptions(task="image", input=str(img), preset="pins", out=str(tmp_path / str(every)), steps=150,
                          progress=False, overrides={"train.supervise_levels": every, "train.compile": False})
        r = train(opts)
        assert len(r["level_psnr"]) == 4 and r["level_psnr"][-1] == r["psnr"]
        level0[every] = r["level_psnr"][0]
    assert level0[True] > level0[False] + 3.0
