"""Throughput on this machine: sgemm peak, MLP training (fp32 / bf16), hash grid fwd+bwd,
and the framework overhead of a Lightning fit against a plain PyTorch loop.

    .venv/bin/python scripts/bench_speed.py            # all sections, ~5 minutes on 2 cores
    .venv/bin/python scripts/bench_speed.py --section cpu_kernels   # native kernels vs the twin
    .venv/bin/python scripts/bench_speed.py --section startup       # whole commands' start-up, fresh processes

Medians of 5 after 2 warm-ups; ratios are measured in the same run (the machine is shared).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import cameraman, median_seconds, save, table  # noqa: E402

import inr  # noqa: E402
from inr.encodings.hashgrid import HashGrid  # noqa: E402
from inr.presets import load_preset  # noqa: E402


def sgemm_gflops(dtype_ctx) -> float:
    a, b = torch.randn(4096, 4096), torch.randn(4096, 4096)

    def run():
        with dtype_ctx():
            return a @ b

    return 2 * 4096**3 / median_seconds(run) / 1e9


def mlp_flops_per_sample(field: inr.Field) -> float:
    """fwd + bwd FLOPs of the linear layers: 2 per MAC forward, 4 per MAC backward."""
    macs = sum(m.in_features * m.out_features for m in field.modules() if isinstance(m, torch.nn.Linear))
    return 6.0 * macs


def train_step_fn(field: torch.nn.Module, batch: int, bf16: bool, in_dim: int = 2, out_dim: int = 3):
    x = torch.rand(batch, in_dim) * 2 - 1
    y = torch.rand(batch, out_dim)
    opt = torch.optim.Adam(field.parameters(), lr=1e-4)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            pred = field(x)
        loss = torch.nn.functional.mse_loss(pred.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def section_mlp(rows, batch: int = 65536):
    """Training-step throughput of the MLP presets (torch.compile), torch's layers in fp32 and
    bf16 against sgemm measured in the same run, eager fp32 for reference, and the native fused
    MLP that ReLU networks run on the CPU as shipped (backend auto)."""
    import contextlib
    import dataclasses

    peak32 = sgemm_gflops(contextlib.nullcontext)
    peak16 = sgemm_gflops(lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    rows.append({"what": "sgemm 4096^3", "fp32 eager": "", "fp32": f"{peak32:.0f} GFLOP/s", "bf16 autocast": f"{peak16:.0f} GFLOP/s",
                 "native": ""})
    for preset in ("fourier", "relu", "siren", "spder"):
        torch._dynamo.reset()  # each preset compiles afresh (fp32, bf16, native): no recompile limit hit
        cfg = load_preset(preset, "image").field
        relu = cfg.network == "mlp"
        twin_cfg = dataclasses.replace(cfg, network_options={**cfg.network_options, "backend": "torch"}) if relu else cfg
        field = inr.Field(2, 3, twin_cfg)
        flops = mlp_flops_per_sample(field)

        def rate(module, bf16, flops=flops):
            sec = median_seconds(train_step_fn(module, batch, bf16))
            return batch / sec, flops * batch / sec / 1e9

        eager = rate(field, False)
        compiled = torch.compile(field)
        c32, c16 = rate(compiled, False), rate(compiled, True)
        native = rate(torch.compile(inr.Field(2, 3, cfg)), False) if relu else None
        rows.append({
            "what": f"{preset} preset train step (batch {batch})",
            "fp32 eager": f"{eager[0]/1e3:.0f}k samples/s = {eager[1]/peak32:.0%} of sgemm",
            "fp32": f"{c32[0]/1e3:.0f}k samples/s = {c32[1]:.0f} GFLOP/s = {c32[1]/peak32:.0%} of sgemm",
            "bf16 autocast": f"{c16[0]/1e3:.0f}k samples/s = {c16[1]:.0f} GFLOP/s = {c16[1]/peak16:.0%} of bf16 sgemm",
            "native": f"{native[0]/1e3:.0f}k samples/s = {native[1]:.0f} GFLOP/s ({native[0]/c32[0]:.1f}x fp32)" if native else "(not a ReLU MLP)",
        })


def section_hashgrid(rows, n: int = 65536):
    g = HashGrid(3, n_levels=16, n_features=2, log2_table=19, backend="torch")
    x = torch.rand(n, 3) * 2 - 1

    def step(f):
        def run():
            f(x).square().sum().backward()

        return run

    eager = n / median_seconds(step(g))
    t = time.perf_counter()
    c = torch.compile(g)
    step(c)()
    compile_s = time.perf_counter() - t
    compiled = n / median_seconds(step(c))
    rows.append({"what": "hash grid L16 F2 T2^19 3D fwd+bwd, 65,536 pts", "fp32 eager": f"{eager/1e3:.0f}k pts/s",
                 "fp32": f"{compiled/1e3:.0f}k pts/s ({compiled/eager:.1f}x eager; first compile {compile_s:.1f} s)", "bf16 autocast": "", "native": ""})


def plain_siren(size: int) -> torch.nn.Module:
    """An independent SIREN written the plain way (reference for the overhead measurement)."""

    class Sine(torch.nn.Module):
        def __init__(self, i, o, w0, first):
            super().__init__()
            self.l, self.w0 = torch.nn.Linear(i, o), w0
            b = 1 / i if first else math.sqrt(6 / i) / w0
            torch.nn.init.uniform_(self.l.weight, -b, b)

        def forward(self, x):
            return torch.sin(self.w0 * self.l(x))

    return torch.nn.Sequential(Sine(2, 256, 30, True), Sine(256, 256, 30, False), Sine(256, 256, 30, False),
                               Sine(256, 256, 30, False), torch.nn.Linear(256, 1))


def section_overhead(rows, size: int = 256, steps: int = 12):
    """Per-step time of `inr fit-image --preset siren` (Lightning) vs a plain loop, same image."""
    from inr.data.signal import grid_coords
    from inr.devices import keep_freed_memory
    from inr.tasks.run import RunOptions, train
    from benchlib import load_image_tensor

    keep_freed_memory()  # as inr's runs do (else the plain loop alone page-faults on its activations)
    img = cameraman(size)
    values = load_image_tensor(img).reshape(-1, 1) * 2 - 1
    coords = grid_coords((size, size))
    net = plain_siren(size)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)

    def plain_step():
        loss = torch.nn.functional.mse_loss(net(coords), values)
        opt.zero_grad()
        loss.backward()
        opt.step()

    plain = median_seconds(plain_step, repeats=steps, warmup=2)

    def ours(compile_: bool) -> float:
        per_run = []
        for n in (2, 2 + steps):  # the difference of two runs cancels set-up, compile and final evaluation
            r = train(RunOptions(task="image", input=str(img), preset="siren", out=f"bench-results/overhead{n}",
                                   steps=n, progress=False, overwrite=True,
                                   overrides={"train.eval_every": 10**6, "train.compile": compile_}))
            per_run.append(r["seconds"])
        return (per_run[1] - per_run[0]) / steps

    eager, compiled = ours(False), ours(True)
    rows.append({"what": f"siren preset, full batch {size}x{size}, seconds per step",
                 "fp32 eager": f"plain loop {plain:.3f} s; inr fit-image {eager:.3f} s (overhead {eager/plain - 1:+.1%})",
                 "fp32": f"inr fit-image as shipped (compiled) {compiled:.3f} s ({compiled/plain - 1:+.1%} vs the plain loop)",
                 "bf16 autocast": ""})


COLS = ["what", "fp32 eager", "fp32", "bf16 autocast", "native"]


def copy_bandwidth(mib: int = 512) -> float:
    """A STREAM-like copy of mib MiB: bytes read + written per second (the machine's reachable
    memory bandwidth from torch, all threads)."""
    src = torch.ones(mib << 18)
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / median_seconds(lambda: dst.copy_(src), repeats=7)


def section_cpu_kernels(rows):
    """The hash grid's native C++ kernels against the pure-torch twin (compiled, as the presets
    run it), fwd+bwd at 2^14..2^20 points, with bytes per second beside the measured copy bandwidth."""
    from inr import _external
    from inr.devices import keep_freed_memory

    _external.native_cpu()  # build (or load) before timing
    keep_freed_memory()  # as training runs do: large per-step buffers reuse their pages
    bw = copy_bandwidth()
    rows.append({"what": "memory copy (STREAM-like, 512 MiB)", "n": "", "twin": "", "native": f"{bw / 1e9:.1f} GB/s",
                 "speed-up": "", "bytes": ""})

    def grid(d, log2_table, backend, max_res=2048):
        return HashGrid(d, n_levels=16, n_features=2, log2_table=log2_table, max_resolution=max_res, backend=backend)

    def rate(module, x, n, input_grad=False, compiled=False):
        f = torch.compile(module, dynamic=True) if compiled else module
        xs = x.clone().requires_grad_(input_grad)

        def run():
            module.table.grad = None
            f(xs).square().sum().backward()

        return n / median_seconds(run, repeats=5 if n <= 1 << 18 else 3)

    def useful_bytes(g, n):
        # what the work must move: per point 2^d corners x L levels x F floats read forward and
        # read+written backward, the input, output and its gradient; per step the zeroed table gradient
        corners = 2**g.in_dim * g.n_levels * g.n_features * 4
        return 3 * corners + 4 * g.in_dim + 2 * 4 * g.out_dim + g.table.numel() * 4 / n

    cases = [("3D L16 F2 T2^19 (NeRF)", 3, 19, 2048, n) for n in (1 << 14, 1 << 16, 1 << 18, 1 << 20)]
    cases += [("2D L16 F2 T2^18 (image)", 2, 18, 1024, 1 << 16), ("1D L16 F2 T2^17 (audio)", 1, 17, 65536, 1 << 15)]
    for name, d, t, res, n in cases:
        twin, fast = grid(d, t, "torch", res), grid(d, t, "native", res)
        x = torch.rand(n, d) * 2 - 1
        a, b = rate(twin, x, n, compiled=True), rate(fast, x, n)
        rows.append({"what": f"hash grid {name} fwd+bwd", "n": f"2^{n.bit_length() - 1}", "twin": f"{a / 1e3:,.0f}k pts/s",
                     "native": f"{b / 1e3:,.0f}k pts/s", "speed-up": f"{b / a:.1f}x",
                     "bytes": f"{b * useful_bytes(fast, n) / 1e9:.1f} GB/s = {b * useful_bytes(fast, n) / bw:.0%} of copy"})
        print(table(rows[-1:], KERNEL_COLS).splitlines()[-1], flush=True)
    # the deterministic level split against atomic adds, table gradient alone
    fast = grid(3, 19, "native")
    for n in (1 << 16, 1 << 18):
        x, go = torch.rand(n, 3) * 2 - 1, torch.randn(n, fast.out_dim)
        tbl, layout = fast.table.detach(), (*fast._layout, fast.n_features)
        det = n / median_seconds(lambda: torch.ops.inr_native.hashgrid_backward(go, x, tbl, *layout, True, False))
        atomic = n / median_seconds(lambda: torch.ops.inr_native.hashgrid_table_grad_atomic(go, x, tbl, *layout))
        same = torch.allclose(torch.ops.inr_native.hashgrid_backward(go, x, tbl, *layout, True, False)[0],
                              torch.ops.inr_native.hashgrid_table_grad_atomic(go, x, tbl, *layout), atol=1e-5)
        rows.append({"what": f"table gradient alone 3D: deterministic level split (native) vs atomic adds (twin column){'' if same else ' MISMATCH'}",
                     "n": f"2^{n.bit_length() - 1}", "twin": f"{atomic / 1e3:,.0f}k pts/s", "native": f"{det / 1e3:,.0f}k pts/s",
                     "speed-up": f"{det / atomic:.2f}x", "bytes": ""})
        print(table(rows[-1:], KERNEL_COLS).splitlines()[-1], flush=True)
    twin, fast = grid(3, 19, "torch"), grid(3, 19, "native")
    x = torch.rand(1 << 16, 3) * 2 - 1
    a, b = rate(twin, x, 1 << 16, input_grad=True, compiled=True), rate(fast, x, 1 << 16, input_grad=True)
    rows.append({"what": "hash grid 3D L16 F2 T2^19 fwd+bwd, input gradients too (SDF)", "n": "2^16",
                 "twin": f"{a / 1e3:,.0f}k pts/s", "native": f"{b / 1e3:,.0f}k pts/s", "speed-up": f"{b / a:.1f}x", "bytes": ""})
    section_native_mlp(rows)


def section_native_mlp(rows, n: int = 1 << 16):
    """The fused native MLP against torch's Linear/ReLU layers compiled (the twin column), fwd+bwd
    with input gradients (as inside a field), FLOPs of the useful work (6 per MAC) per second."""
    from inr.networks.mlp import MLP

    cases = [("NeRF density 32-64-16", 32, 16, 64, 1), ("NeRF colour 31-64-64-3", 31, 3, 64, 2),
             ("image 2x64 (Instant-NGP)", 32, 3, 64, 2), ("Fourier features 256-3x256-3", 256, 3, 256, 3)]
    for name, i, o, h, layers in cases:
        twin, fast = MLP(i, o, h, layers, backend="torch"), MLP(i, o, h, layers, backend="native")
        fast.load_state_dict(twin.state_dict())
        x = torch.randn(n, i, requires_grad=True)
        flops = 6 * sum(m.weight.numel() for m in twin.modules() if isinstance(m, torch.nn.Linear)) * n

        def step(module):
            def run():
                x.grad = None
                module(x).square().sum().backward()
            return run

        a = median_seconds(step(torch.compile(twin, dynamic=True)))
        b = median_seconds(step(fast))
        rows.append({"what": f"MLP {name} fwd+bwd", "n": f"2^{n.bit_length() - 1}",
                     "twin": f"{n / a / 1e3:,.0f}k rows/s = {flops / a / 1e9:.0f} GFLOP/s",
                     "native": f"{n / b / 1e3:,.0f}k rows/s = {flops / b / 1e9:.0f} GFLOP/s", "speed-up": f"{a / b:.1f}x", "bytes": ""})
        print(table(rows[-1:], KERNEL_COLS).splitlines()[-1], flush=True)


def section_startup(rows, repeats: int = 5):
    """Wall seconds of whole commands in fresh processes, started in the current directory (its
    `inr` package, so an old checkout can be timed the same way): `inr --help`, `inr pointcloud
    denoise` of a 5,000-point sphere with 1 % noise (shipped weights), and the bare `import inr.cli`
    with which heavy modules it loaded. Median of `repeats` after one warm-up (which also builds the
    native kernels where they are not cached)."""
    import subprocess
    import tempfile

    import numpy as np

    tmp = Path(tempfile.mkdtemp())
    rng = np.random.default_rng(0)
    sphere = rng.normal(size=(5000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    np.savetxt(tmp / "sphere.xyz", sphere + rng.normal(scale=0.01 * 2 * np.sqrt(3), size=sphere.shape))  # 1 % of the diagonal
    probe = ("import sys, inr.cli; print(' '.join(m for m in ('torch._dynamo', 'torchmetrics', 'lightning') "
             "if m in sys.modules) or 'none')")
    commands = [("inr --help", ["-m", "inr", "--help"]),
                ("inr pointcloud denoise (5,000 points)", ["-m", "inr", "pointcloud", "denoise", str(tmp / "sphere.xyz"),
                                                          "--out", str(tmp / "out.ply")]),
                ("import inr.cli", ["-c", probe])]
    for name, args in commands:
        times, out = [], ""
        for k in range(repeats + 1):
            t = time.perf_counter()
            out = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True).stdout
            if k:
                times.append(time.perf_counter() - t)
        rows.append({"command": name, "seconds": f"{sorted(times)[len(times) // 2]:.2f}",
                     "heavy modules loaded": out.strip().splitlines()[-1] if name == "import inr.cli" else ""})
        print(rows[-1], flush=True)


KERNEL_COLS = ["what", "n", "twin", "native", "speed-up", "bytes"]
SECTIONS = {"mlp": (section_mlp, COLS), "hashgrid": (section_hashgrid, COLS), "overhead": (section_overhead, COLS),
            "cpu_kernels": (section_cpu_kernels, KERNEL_COLS),
            "startup": (section_startup, ["command", "seconds", "heavy modules loaded"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", "--section", dest="only", choices=list(SECTIONS), action="append")
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, (fn, cols) in SECTIONS.items():
        if args.only and name not in args.only:
            continue
        if name in ("cpu_kernels", "startup") and not args.only:
            continue  # run on request: kernels build and take ~3 minutes; start-up times whole commands
        rows: list = []
        fn(rows)
        print(table(rows, cols))
        save(f"speed_{name}", rows)


if __name__ == "__main__":
    main()
