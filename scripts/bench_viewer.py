"""What `nerf train --viewer` costs: the same NeRF training (the same steps) without a viewer and
with the live viewer and a client connected, whose camera is dragged every 2 s.

    .venv/bin/python scripts/bench_viewer.py [--steps 300] [--repeats 3] [--clients protocol,browser]

The runs are `inr nerf train --preset ngp --steps N` on the bundled scene; the cost is the extra
training time for the same steps (rays/s would also count the slower progress of a run that
trained less far). Clients:
- protocol: a client without a browser (`protocol_client`), which does on the wire what the page
  does. It stands for a browser on another machine, or one that draws WebGL on a GPU: the cost
  left is the viewer's own (its renders, their encoding and sending, the status line).
- browser: headless chromium on this machine, drawing WebGL in software (SwiftShader) on the
  same cores as training; --browser-nice N starts it at that niceness.
Runs alternate (no viewer, each client) --repeats times; the slowdown is the median over the
rounds of each run's time against the no-viewer run of its round (the machine's speed drifts
between rounds), and the run of median time stands for each kind in the table.
"""

from __future__ import annotations

import argparse
import json
import os
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


def run(steps: int, client: str = "", port: int = 8093, nice: int = 0) -> dict:
    """One training run; client: "" (no viewer), "protocol" (`protocol_client`) or "browser"."""
    viewer = bool(client)
    out = OUT / ("with-viewer" if viewer else "no-viewer")
    cmd = [sys.executable, "-m", "inr", "nerf", "train", "--steps", str(steps), "--out", str(out), "--overwrite",
           "--no-progress"] + (["--viewer", "--viewer-port", str(port)] if viewer else [])
    print("$", " ".join(cmd[2:]), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, client_thread, stats = [], None, {}
    cpu0 = time.process_time()  # this process: the protocol client's thread, and reading the run's output
    for line in proc.stdout:
        lines.append(line)
        if viewer and "live viewer at" in line and client_thread is None:
            url = f"http://127.0.0.1:{port}"
            target, args = (browse, (url, proc, stats, nice)) if client == "browser" else (protocol_client, (url, proc, stats))
            client_thread = threading.Thread(target=target, args=args, daemon=True)
            client_thread.start()
    proc.wait()
    if client_thread is not None:
        client_thread.join(timeout=60)  # its figures are written when it sees the run end
    m = json.loads((out / "metrics.json").read_text())
    frames = next((ln.strip() for ln in lines if "live viewer rendered" in ln), "")
    found = re.search(r"rendered (\d+) frames in ([\d.]+) s \(([\d.]+) s in all", frames)
    label = {"": "no viewer", "protocol": "live viewer + client (no browser)",
             "browser": "live viewer + headless chromium, same 2 cores"}[client] + (f" at nice {nice}" if nice else "")
    row = {"run": label, "test PSNR": m["test_psnr"], "steps": m["steps"],
           "train s": m["seconds"], "rays/s": m["rays_per_second"],
           "viewer frames": int(found.group(1)) if found else 0, "viewer render s": float(found.group(2)) if found else 0.0,
           "viewer s in all": float(found.group(3)) if found else 0.0}
    if client == "browser":
        row["browser CPU (cores)"] = stats.get("browser cores", "")
    if client == "protocol":
        row["frames received"] = stats.get("frames", 0)
        row["client CPU s"] = round(time.process_time() - cpu0, 2)
    return row


def camera_message(position, look_at, up, fov: float, height: int = 640, width: int = 960) -> bytes:
    """A `ViewerCameraMessage` as a browser sends it (OpenCV camera: +Z forward, +Y down)."""
    import msgspec
    import numpy as np
    from viser.transforms import SO3

    position, look_at, up = (np.asarray(v, float) for v in (position, look_at, up))
    z = look_at - position
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    x /= np.linalg.norm(x)
    rotation = np.stack([x, np.cross(z, x), z], 1)
    return msgspec.msgpack.encode({
        "type": "ViewerCameraMessage", "wxyz": tuple(SO3.from_matrix(rotation).wxyz.tolist()),
        "position": tuple(position.tolist()), "fov": fov, "near": 0.01, "far": 1000.0, "image_height": height,
        "image_width": width, "look_at": tuple(look_at.tolist()), "up_direction": tuple(up.tolist())})


def decoded(frame: bytes) -> list:
    """The messages of one server -> client websocket frame (viser's wire format: sizes, zstd
    msgpack, then raw buffers, which a client without WebGL has no use for)."""
    import msgspec
    import zstandard

    size, packed = int.from_bytes(frame[:8], "little"), int.from_bytes(frame[8:16], "little")
    inner = zstandard.ZstdDecompressor().decompress(frame[16:16 + packed], max_output_size=size)
    return msgspec.msgpack.decode(inner)["messages"]


def protocol_client(url: str, proc: subprocess.Popen, stats: dict) -> None:
    """A viewer client without a browser: it speaks viser's websocket protocol like the page
    does, reports the camera the server sets, then orbits it a little every 2 s (as a drag
    does), and receives every frame. It stands in for a browser on another machine: its own
    CPU time is measured (`run`'s "client CPU s") and small beside the run's."""
    import numpy as np
    import viser
    from websockets.sync.client import connect

    camera = {"position": (3.0, 3.0, 3.0), "look_at": (0.0, 0.0, 0.0), "up": (0.0, 0.0, 1.0), "fov": 0.9}
    keys = {"SetCameraPositionMessage": ("position", "position"), "SetCameraLookAtMessage": ("look_at", "look_at"),
            "SetCameraUpDirectionMessage": ("up", "position"), "SetCameraFovMessage": ("fov", "fov")}
    with connect(url.replace("http", "ws"), subprotocols=[f"viser-v{viser.__version__}"], max_size=None) as ws:
        # the page reports its camera first: viser counts a client as connected from then on,
        # and the viewer's connect callback answers with the camera it wants
        ws.send(camera_message(camera["position"], camera["look_at"], camera["up"], camera["fov"]))
        angle, last = 0.0, time.time()
        while proc.poll() is None:
            try:
                frame = ws.recv(timeout=0.1)
            except TimeoutError:
                frame = None
            except Exception:  # the run ended and its server closed the connection
                break
            if frame is not None:
                for message in decoded(frame):
                    key = keys.get(message.get("type"))
                    if key is not None:
                        camera[key[0]] = message[key[1]]
                    stats["frames"] = stats.get("frames", 0) + (message.get("type") == "BackgroundImageMessage")
            if time.time() - last < 2.0:
                continue
            last = time.time()
            look, up = np.asarray(camera["look_at"], float), np.asarray(camera["up"], float)
            up /= np.linalg.norm(up)
            rel = np.asarray(camera["position"], float) - look
            angle += 0.05  # about the up axis (Rodrigues), as a short horizontal drag orbits
            rel = (rel * np.cos(angle) + np.cross(up, rel) * np.sin(angle)
                   + up * (up @ rel) * (1 - np.cos(angle)))
            for _ in range(4):  # a drag sends a few poses in a row
                ws.send(camera_message(look + rel, look, up, float(camera["fov"])))


def chromium_cpu_seconds() -> float:
    """CPU seconds used so far by the chromium processes running on this machine."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text()
            stat = Path(f"/proc/{pid}/stat").read_text() if "chrom" in comm else ""
        except OSError:  # the process ended meanwhile: its time is not counted
            continue
        if stat:
            fields = stat.rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def browse(url: str, proc: subprocess.Popen, stats: dict, nice: int = 0) -> None:
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
        x, start = 400, time.perf_counter()
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
        stats["browser cores"] = round(chromium_cpu_seconds() / (time.perf_counter() - start), 2)
        browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="steps of each run: the same work with and without a viewer")
    ap.add_argument("--clients", default="protocol,browser",
                    help="comma-separated viewer runs: protocol (a client without a browser), browser")
    ap.add_argument("--browser-nice", type=int, default=0, help="run the browser at this niceness (e.g. 19)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds of (no viewer, each client), alternated")
    args = ap.parse_args()
    clients = [""] + [c for c in args.clients.split(",") if c]
    runs = {c: [] for c in clients}
    for _ in range(args.repeats):  # alternated, so that a slow spell of the machine hits all alike
        for client in clients:
            runs[client].append(run(args.steps, client, nice=args.browser_nice if client == "browser" else 0))
    rows = []
    for client in clients:  # the run of median training time stands for its kind
        ordered = sorted(runs[client], key=lambda r: r["train s"])
        row = dict(ordered[len(ordered) // 2])
        row["train s of the runs"] = ", ".join(f"{r['train s']:.1f}" for r in runs[client])
        rows.append(row)
    for client, row in zip(clients[1:], rows[1:]):  # each run against the no-viewer run of its round
        extra = sorted(r["train s"] / base["train s"] - 1 for r, base in zip(runs[client], runs[""]))
        row["slowdown"] = (f"{extra[len(extra) // 2]:.1%} more time for the same steps (median of the rounds: "
                           + ", ".join(f"{e:.1%}" for e in extra) + ")")
        row["viewer share"] = (f"{row['viewer render s'] / row['train s']:.1%} rendering, "
                               f"{row['viewer s in all'] / row['train s']:.1%} in all between steps")
    keys = list(dict.fromkeys(k for row in rows for k in row))
    print(table(rows, keys))
    save("viewer", rows)


if __name__ == "__main__":
    main()
