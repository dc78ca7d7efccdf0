"""`inr compare`: several presets on one signal, one table and one plot."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, List

from ..errors import InputError
from ..presets import load_preset
from .outputs import plot_compare, write_json
from .run import RunOptions, train

COLUMNS = ("preset", "psnr", "ssim", "snr_db", "steps", "seconds", "params")


def markdown_table(records: List[Dict[str, Any]]) -> str:
    cols = [c for c in COLUMNS if any(c in r for r in records)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in records:
        cells = []
        for c in cols:
            v = r.get(c, "")
            cells.append(f"{v:,}" if c == "params" else (f"{v:.2f}" if isinstance(v, float) and c != "ssim" else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_compare(opts: RunOptions, presets: List[str]) -> str:
    """Run each preset with the same options into opts.out/<preset>/; returns the markdown table
    ("" in DDP processes other than the first, which write nothing)."""
    out = Path(opts.out or "runs/compare")
    for name in presets:  # validate them all before the first (long) fit
        load_preset(name, opts.task, opts.overrides)
    if opts.input is None:
        raise InputError(None, "compare needs a signal file")
    records, curves = [], {}
    for name in presets:
        result = train(dataclasses.replace(opts, preset=name, out=str(out / Path(name).stem)))
        if "rank" in result:  # a DDP process other than the first: it trains, the first one writes
            continue
        rec = {c: result[c] for c in COLUMNS if c in result}
        records.append(rec)
        curves[rec["preset"]] = result["curve"]
    if not records:
        return ""
    holdout = opts.task_options.get("holdout") or "none"
    write_json(out / "compare.json", {"signal": opts.input, "holdout": holdout, "results": records})
    table = markdown_table(records)
    (out / "compare.md").write_text(
        f"Signal: `{opts.input}`, holdout: {holdout}, steps: {opts.steps or 'preset'}, "
        f"time budget: {opts.time_budget or 'none'} s\n\n{table}\n"
    )
    plot_compare(out / "compare.png", curves, "test PSNR (dB)")
    return table
