"""`inr compare`: several presets on one signal, one table and one plot."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, List

from ..errors import InputError
from ..presets import load_preset
from .fit import FitOptions, run_fit
from .outputs import plot_compare, write_json

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


def run_compare(opts: FitOptions, presets: List[str]) -> str:
    """Fit each preset with the same options into opts.out/<preset>/; returns the markdown table."""
    out = Path(opts.out or "runs/compare")
    for name in presets:  # validate them all before the first (long) fit
        load_preset(name, opts.kind, opts.overrides)
    if opts.signal is None:
        raise InputError(None, "compare needs a signal file")
    records, curves = [], {}
    for name in presets:
        sub = dataclasses.replace(opts, preset=name, out=str(out / Path(name).stem))
        result = run_fit(sub)
        rec = {c: result[c] for c in COLUMNS if c in result}
        records.append(rec)
        curves[rec["preset"]] = result["curve"]
    write_json(out / "compare.json", {"signal": opts.signal, "holdout": opts.holdout, "results": records})
    table = markdown_table(records)
    (out / "compare.md").write_text(
        f"Signal: `{opts.signal}`, holdout: {opts.holdout}, steps: {opts.steps or 'preset'}, "
        f"time budget: {opts.time_budget or 'none'} s\n\n{table}\n"
    )
    plot_compare(out / "compare.png", curves, "test PSNR (dB)")
    return table
