"""A run's state on disk (DIR/status.json) and the table of `inr runs`.

The run lifecycle writes status.json when training starts ("running", with the process id and
host), at every curve point (step, training seconds, the curve's value), and when it ends:
"finished", "stopped" (a signal; a checkpoint to resume from), "diverged" (non-finite loss or
parameters) or "failed" (an error). A run whose process died without a word (SIGKILL, power
loss) still says "running": `inr runs` checks the process on this host and shows it "killed".
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from .outputs import write_json

STATUS_FILE = "status.json"


class RunStatus:
    """Writes DIR/status.json (atomically, merging into what is there)."""

    def __init__(self, out: Path, enabled: bool = True) -> None:
        self.path, self.enabled = Path(out) / STATUS_FILE, enabled
        self.data: Dict[str, Any] = {}

    def update(self, **fields: Any) -> None:
        if not self.enabled:
            return
        self.data.update(fields, updated=time.strftime("%Y-%m-%dT%H:%M:%S"))
        write_json(self.path, self.data)

    def start(self, task: str, preset: str, curve_name: str) -> None:
        self.update(status="running", task=task, preset=preset, pid=os.getpid(), host=socket.gethostname(),
                    started=time.strftime("%Y-%m-%dT%H:%M:%S"), curve_name=curve_name)

    def record(self, step: int, seconds: float, value: float) -> None:
        self.update(step=int(step), seconds=round(float(seconds), 3), curve_value=float(value))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def _read_json(path: Path) -> Optional[Dict[str, Any]]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def run_summary(run_dir: Path) -> Optional[Dict[str, Any]]:
    """One row of `inr runs` for a run folder (None when `run_dir` is not one)."""
    from .base import get_task

    cfg_path = run_dir / "config.yaml"
    if not cfg_path.is_file():
        return None
    try:
        config = yaml.safe_load(cfg_path.read_text()) or {}
    except yaml.YAMLError:
        return None
    preset = config.get("preset") or {}
    task_name = preset.get("task", "?")
    status = _read_json(run_dir / STATUS_FILE) or {}
    metrics = _read_json(run_dir / "metrics.json")
    state = status.get("status")
    if metrics is not None and state in (None, "running", "finished"):
        state = "finished"
    elif state == "running" and status.get("host") == socket.gethostname() and not _alive(int(status.get("pid", -1))):
        state = "killed"
    elif state is None:
        state = "stopped" if (run_dir / "checkpoints" / "last.ckpt").is_file() else "no checkpoint"
    row = {"run": str(run_dir), "task": task_name, "preset": preset.get("name") or (config.get("run") or {}).get("preset"),
           "status": state, "steps": status.get("step"), "seconds": status.get("seconds"), "metric": ""}
    try:
        task = get_task(task_name)
    except (KeyError, ValueError):
        task = None
    if metrics is not None:
        row["steps"], row["seconds"] = metrics.get("steps"), metrics.get("seconds")
        key = task.main_metric if task else None
        if key and metrics.get(key) is not None:
            row["metric"] = f"{key} {metrics[key]:.4g}"
    elif status.get("curve_value") is not None:
        row["metric"] = f"{status.get('curve_name', 'curve')} {status['curve_value']:.4g} (last evaluation)"
    return row


def find_runs(root: Path, depth: int = 3) -> List[Path]:
    """Run folders (with a config.yaml) at or under `root`, down to `depth` levels."""
    if (root / "config.yaml").is_file():
        return [root]
    found: List[Path] = []
    if depth == 0 or not root.is_dir():
        return found
    for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        found += find_runs(child, depth - 1)
    return found


COLUMNS = ["run", "task", "preset", "status", "steps", "seconds", "metric"]


def runs_table(root: Path) -> List[Dict[str, Any]]:
    rows = [r for r in (run_summary(p) for p in find_runs(root)) if r is not None]
    for r in rows:
        r["run"] = os.path.relpath(r["run"], root) if r["run"] != str(root) else str(root)
        r["seconds"] = "" if r["seconds"] is None else f"{float(r['seconds']):.1f}"
        r["steps"] = "" if r["steps"] is None else str(r["steps"])
    return rows


def format_table(rows: List[Dict[str, Any]], columns: List[str] = COLUMNS) -> str:
    cells = [[str(c) for c in columns]] + [[str(r.get(c) if r.get(c) is not None else "") for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
