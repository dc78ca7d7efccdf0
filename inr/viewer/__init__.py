"""`inr view`: a local web viewer (viser) for NeRF runs, signal fits, point clouds and meshes.

The viewer is an application layer: it loads runs through inr.tasks and draws with viser; the
maths layers know nothing of it. `open_viewer(paths)` builds the server and its content;
`serve` keeps it running until Ctrl-C.
"""

from __future__ import annotations

import ipaddress
import sys
import threading
from pathlib import Path
from typing import List, Sequence

from .. import _external
from ..errors import InputError

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _viser():
    return _external.viser()


def check_host(host: str) -> None:
    """One warning on stderr when the viewer is reachable from other machines."""
    local = host in LOCAL_HOSTS
    if not local:
        try:
            local = ipaddress.ip_address(host).is_loopback
        except ValueError:
            local = False
    if not local:
        print(f"inr view: listening on {host}: anyone who can reach this machine can see the viewer and "
              "download renders and exports from it", file=sys.stderr)


class Viewer:
    """A viser server with one content (NeRF, signal fit, clouds). `render_threads`: a thread per
    browser renders its frames (the standalone viewer); False when the owner calls
    `content.progressive.service` itself (the live viewer, from the training loop)."""

    def __init__(self, content_factory, host: str = "127.0.0.1", port: int = 8080, render_threads: bool = True) -> None:
        viser = _viser()
        check_host(host)
        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self.stopped = threading.Event()
        self.content = content_factory(self.server)
        progressive = getattr(self.content, "progressive", None)

        @self.server.on_client_connect
        def _(client) -> None:
            self.content.connect(client)
            if progressive is not None and render_threads:
                progressive.run_thread(client, self.stopped)

        @self.server.on_client_disconnect
        def _(client) -> None:
            if progressive is not None:
                progressive.detach(client)

    @property
    def url(self) -> str:
        host = self.server.get_host()
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{self.server.get_port()}"

    def stop(self) -> None:
        self.stopped.set()
        self.server.stop()


def content_for(paths: Sequence[Path], device: str = "auto"):
    """A factory server -> content for what `paths` are: one run folder (NeRF, or an image /
    audio / video fit), or point-cloud / mesh files."""
    paths = [Path(p) for p in paths]
    if len(paths) == 1 and paths[0].is_dir():
        run = paths[0]
        if not (run / "config.yaml").is_file():
            raise InputError(run, "is not a run folder (no config.yaml) and not a point-cloud or mesh file")
        import yaml

        task = ((yaml.safe_load((run / "config.yaml").read_text()) or {}).get("preset") or {}).get("task")
        if task == "nerf":
            from ..tasks.nerf import BACKGROUNDS
            from ..tasks.nerf_fit import load_nerf_run
            from .nerf import NerfViewer

            module, scene, config = load_nerf_run(run, device)
            bg = BACKGROUNDS.get(config["preset"]["train"].get("eval_background", "white"), 1.0)
            return lambda server: NerfViewer(server, module, scene, bg, run)
        if task in ("image", "audio", "video"):
            from .signal import SignalViewer

            return lambda server: SignalViewer(server, run, task, device)
        if task == "sdf":
            from .sdf import SdfViewer

            return lambda server: SdfViewer(server, run, device)
        raise InputError(run, f"holds a {task or 'unknown'} run: the viewer shows nerf, sdf, image, audio and video runs")
    for p in paths:
        if p.is_dir():
            raise InputError(p, "is a folder: give one run folder alone, or point-cloud / mesh files")
    from .clouds import CloudViewer, load_geometry

    for p in paths:  # bad files fail here, before a server starts
        load_geometry(p)
    return lambda server: CloudViewer(server, paths)


def serve(paths: List[str], host: str = "127.0.0.1", port: int = 8080, device: str = "auto") -> None:
    """Open the viewer on `paths` and serve until Ctrl-C."""
    viewer = Viewer(content_for([Path(p) for p in paths], device), host, port)
    print(f"inr view: {viewer.url} (Ctrl-C stops)", flush=True)
    try:
        threading.Event().wait()  # the server runs in its own threads
    except KeyboardInterrupt:
        print("inr view: stopped", flush=True)
    finally:
        viewer.stop()
