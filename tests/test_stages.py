"""`inr.tasks.stages`: finished stages kept under a key, reused by the same run, dropped by another."""

import numpy as np
import pytest

from inr.errors import InputError
from inr.tasks.stages import Stages, array_digest, partial_folder


def _counting():
    calls = []

    def compute(value):
        def run():
            calls.append(value)
            return {"a": np.arange(value, dtype=np.float64), "name": np.array(f"v{value}")}
        return run

    return calls, compute


def test_stages_are_computed_once_per_key_and_reused(tmp_path):
    folder = partial_folder(tmp_path / "out.ply")
    assert folder == tmp_path / "out.ply.partial"
    calls, compute = _counting()
    first = Stages(folder, {"scan": "abc", "voxel": None, "weights": ("w.pt", 3)})
    assert not folder.exists()  # nothing written before a stage
    got = first("one", compute(3))
    assert calls == [3] and first.reused == [] and np.array_equal(got["a"], [0, 1, 2])
    assert (folder / "one.npz").is_file() and not list(folder.glob(".tmp-*"))
    # the same key (the tuple read back from JSON as a list): taken from the folder, not computed
    again = Stages(folder, {"scan": "abc", "voxel": None, "weights": ["w.pt", 3]})
    assert again.held() == ["one"]
    got = again("one", compute(3))
    assert calls == [3] and again.reused == ["one"]
    assert np.array_equal(got["a"], [0, 1, 2]) and str(got["name"]) == "v3"
    got = again("two", compute(5))  # a stage the first run did not reach: computed
    assert calls == [3, 5] and again.reused == ["one"] and len(got["a"]) == 5
    # another key: the folder starts afresh (its stages are not this run's)
    other = Stages(folder, {"scan": "abd", "voxel": None, "weights": ["w.pt", 3]})
    assert other.held() == []
    other("one", compute(4))
    assert calls == [3, 5, 4] and sorted(p.name for p in folder.glob("*.npz")) == ["one.npz"]
    other.finish()
    assert not folder.exists()


def test_a_damaged_stage_is_computed_again_and_a_foreign_folder_is_left_alone(tmp_path):
    folder = tmp_path / "x.ply.partial"
    calls, compute = _counting()
    Stages(folder, {"k": 1})("s", compute(2))
    (folder / "s.npz").write_bytes(b"PK\x03\x04 cut short")  # a kill while the disk filled
    again = Stages(folder, {"k": 1})
    assert len(again("s", compute(2))["a"]) == 2 and calls == [2, 2] and again.reused == []
    assert np.load(folder / "s.npz")["a"].tolist() == [0, 1]  # rewritten whole
    # a folder of that name that is not a stages folder: an input error, and it is kept
    mine = tmp_path / "y.ply.partial"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="in the way"):
        Stages(mine, {"k": 1})("s", compute(2))
    assert (mine / "notes.txt").read_text() == "mine"


def test_array_digest_follows_values_shapes_and_dtypes():
    a = np.arange(6, dtype=np.float64).reshape(3, 2)
    assert array_digest(a, None) == array_digest(a.copy(), None)
    assert array_digest(a) != array_digest(a.reshape(2, 3))
    assert array_digest(a) != array_digest(a.astype(np.float32))
    b = a.copy()
    b[2, 1] = np.nextafter(b[2, 1], 10)
    assert array_digest(a) != array_digest(b)
    assert array_digest(a, None) != array_digest(a, a)
    assert array_digest(np.asfortranarray(a)) == array_digest(a)  # the values, not the memory layout


def test_a_run_killed_inside_a_stage_reruns_only_the_tiles_it_had_not_finished(tmp_path):
    # the shipped network on a noisy sphere, 16-voxel tiles: killed after 5 computed tiles, the same
    # run again computes only the others and gives the uninterrupted points; saving the stage
    # clears its tiles
    import torch

    from inr.pointcloud.weights import load_weights
    from inr.tasks.pointcloud import default_weights
    from inr.tasks.stages import TILES, Stages

    rng = np.random.default_rng(0)
    sphere = rng.normal(size=(3000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    cloud = torch.from_numpy(sphere + rng.normal(scale=0.01, size=sphere.shape))
    model = load_weights(default_weights())
    whole, _ = model.reconstruct(cloud, tile=16)
    stages = Stages(tmp_path / "p", {"scan": "sphere"})
    computed = []

    def counted(key, compute, limit=None):
        def run():
            if limit is not None and len(computed) == limit:
                raise KeyboardInterrupt
            computed.append(key)
            return compute()
        return stages.tile(key, run)

    model.keep_tiles = lambda key, compute: counted(key, compute, limit=5)
    with pytest.raises(KeyboardInterrupt):
        model.reconstruct(cloud, tile=16)
    assert stages.held_tiles() == 5
    first = list(computed)
    computed.clear()
    stages = Stages(tmp_path / "p", {"scan": "sphere"})
    model.keep_tiles = counted
    again, _ = model.reconstruct(cloud, tile=16)
    assert stages.reused_tiles == 5 and not set(first) & set(computed) and len(computed) > 5
    assert torch.equal(again, whole)
    stages("band-0", lambda: {"points": again.numpy()})
    assert not (tmp_path / "p" / TILES).exists() and stages.held() == ["band-0"]


def test_half_written_files_of_a_kill_are_not_counted_as_kept(tmp_path):
    from inr.tasks.stages import TILES, Stages

    stages = Stages(tmp_path / "p", {"scan": "x"})
    stages("spacing", lambda: {"a": np.arange(3)})
    stages.tile("abc", lambda: np.zeros((2, 3), np.float32))
    (tmp_path / "p" / ".tmp-band-0.npz").write_bytes(b"half")  # a kill while these were written
    (tmp_path / "p" / TILES / ".tmp-def.npy").write_bytes(b"half")
    again = Stages(tmp_path / "p", {"scan": "x"})
    assert again.held() == ["spacing"] and again.held_tiles() == 1


def test_sigterm_stops_a_network_command_as_ctrl_c_does_with_its_exit_code(tmp_path, capsys, monkeypatch):
    # `kill PID` while the normals are estimated (after the network's stage is kept): one line saying
    # where the same command resumes, exit 143; the handler before is put back; the same command
    # then finishes from the kept stage
    import os
    import signal

    import inr.data.surfaces as surfaces
    from inr.cli import main

    rng = np.random.default_rng(4)
    sphere = rng.normal(size=(2000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    np.save(tmp_path / "in.npy", sphere + rng.normal(scale=0.01, size=sphere.shape))
    args = ["pointcloud", "denoise", str(tmp_path / "in.npy"), str(tmp_path / "out.ply"), "--no-progress"]
    normals = surfaces.scan_normals

    def killed(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)
        return normals(*a, **k)  # not reached: the handler raises as the signal arrives

    before = signal.getsignal(signal.SIGTERM)
    with monkeypatch.context() as m:
        m.setattr(surfaces, "scan_normals", killed)
        assert main(args) == 143
    partial = tmp_path / "out.ply.partial"
    assert capsys.readouterr().err == f"inr: terminated; the same command resumes from {partial}\n"
    assert signal.getsignal(signal.SIGTERM) is before and (partial / "network.npz").is_file()
    assert main(args) == 0 and "resumed: " in capsys.readouterr().out and not partial.exists()


def test_a_damaged_tile_is_computed_again(tmp_path):
    from inr.tasks.stages import TILES, Stages

    stages = Stages(tmp_path / "p", {"scan": "x"})
    stages.tile("abc", lambda: np.ones((2, 3), np.float32))
    (tmp_path / "p" / TILES / "abc.npy").write_bytes(b"\x93NUMPY cut short")  # a kill with the disk full
    again = Stages(tmp_path / "p", {"scan": "x"})
    assert np.array_equal(again.tile("abc", lambda: np.full((2, 3), 2, np.float32)), np.full((2, 3), 2)) and again.reused_tiles == 0
    assert np.array_equal(Stages(tmp_path / "p", {"scan": "x"}).tile("abc", lambda: None), np.full((2, 3), 2))
