"""What `nerf train --viewer` costs: the same NeRF training with no viewer, and with the live viewer
and a browser connected to it (headless chromium on this machine, its camera dragged every 2 s).

    .venv/bin/python scripts/bench_viewer.py [--budget 90] [--browser-nice 19]

The runs are `inr nerf train --preset ngp --time-budget B` on the bundled scene. The browser
renders WebGL in software (SwiftShader) on the same 2 cores, so the second figure includes the
browser's own CPU use, not only the viewer's renders (which the run caps at 10 % of its time).
With --browser-nice N a third run starts the browser at that niceness: it then gets the CPU
mostly when training leaves it idle, which stands in for a browser on another machine (the
viewer's own cost, its renders and its frames' encoding and sending, stays in the training
process at normal priority).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import RESULTS, save, table  # noqa: E402

OUT = RESULTS / "viewer"


def run(budget: float, viewer: bool, port: int = 8093, nice: int = 0) -> dict:
    out = OUT / ("with-viewer" if viewer else "no-viewer")
    cmd = [sys.executable, "-m", "inr", "nerf", "train", "--time-budget", str(budget), "--out", str(out), "--overwrite",
           "--no-progress"] + (["--viewer", "--viewer-port", str(port)] if viewer else [])
    print("$", " ".join(cmd[2:]), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, browsing = [], None
    for line in proc.stdout:
        lines.append(line)
        if viewer and "live viewer at" in line and browsing is None:
            browsing = threading.Thread(target=browse, args=(f"http://127.0.0.1:{port}", proc, nice), daemon=True)
            browsing.start()
    proc.wait()
    m = json.loads((out / "metrics.json").read_text())
    frames = next((ln.strip() for ln in lines if "live viewer rendered" in ln), "")
    found = re.search(r"rendered (\d+) frames in ([\d.]+) s", frames)
    label = "no viewer" if not viewer else "live viewer + browser" + (f" at nice {nice}" if nice else "")
    return {"run": label, "test PSNR": m["test_psnr"], "steps": m["steps"],
            "train s": m["seconds"], "rays/s": m["rays_per_second"],
            "viewer frames": int(found.group(1)) if found else 0, "viewer render s": float(found.group(2)) if found else 0.0}


def browse(url: str, proc: subprocess.Popen, nice: int = 0) -> None:
    import tempfile

    from playwright.sync_api import sync_playwright

    from tests.test_viewer import BROWSER_ARGS, CHROMIUM

    executable = CHROMIUM
    if nice:  # every chromium process and thread inherits the niceness from this wrapper
        wrapper = Path(tempfile.mkdtemp()) / "chromium-nice"
        wrapper.write_text(f'#!/bin/sh\nexec nice -n {int(nice)} "{CHROMIUM}" "$@"\n')
        wrapper.chmod(0o755)
        executable = str(wrapper)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 960, "height": 640})
        page.goto(url)
        x = 400
        while proc.poll() is None:
            time.sleep(2.0)
            try:  # a short drag: the camera orbits a little, the viewer owes new frames
                page.mouse.move(x, 300)
                page.mouse.down()
                page.mouse.move(x + 15, 305, steps=4)
                page.mouse.up()
            except Exception:  # the run ended and its server went away mid-drag
                break
            x = 400 if x > 600 else x + 15
        browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=90.0)
    ap.add_argument("--browser-nice", type=int, default=0, help="also a run with the browser at this niceness (e.g. 19)")
    args = ap.parse_args()
    rows = [run(args.budget, False), run(args.budget, True)]
    if args.browser_nice:
        rows.append(run(args.budget, True, nice=args.browser_nice))
    for row in rows[1:]:
        row["slowdown"] = f"{1 - row['rays/s'] / rows[0]['rays/s']:.1%} fewer rays/s"
        row["viewer share"] = f"{row['viewer render s'] / row['train s']:.1%} of training time"
    print(table(rows, list(rows[1])))
    save("viewer", rows)


if __name__ == "__main__":
    main()
