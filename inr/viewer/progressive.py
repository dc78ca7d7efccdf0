"""Progressive rendering for each browser: a quick low-resolution frame while its camera moves,
the full-resolution frame once the camera has rested; nothing while nothing changes.

`service(client)` renders at most one frame: the standalone viewer calls it from one thread per
browser, the live viewer of a training run from the training loop between steps (so that a
render never runs beside a step), within its time cap."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Tuple

import numpy as np

LOW_HEIGHT = 72  # rows of a frame while the camera moves
REST_SECONDS = 0.25  # the camera counts as still after this long without a move

RenderFn = Callable[[object, int], Tuple[np.ndarray, Optional[np.ndarray]]]
"""(camera handle, rows) -> (uint8 image (H, W, 3), optional depth (H, W) along the view axis)"""


@dataclass
class _State:
    moved_at: float = 0.0
    dirty: bool = True  # a full frame is owed
    wake: threading.Event = field(default_factory=threading.Event)
    frames: int = 0


def _moving(state: _State) -> bool:
    """The camera moved within the last REST_SECONDS (a low-resolution frame is owed)."""
    return time.time() - state.moved_at < REST_SECONDS


class Progressive:
    def __init__(self, render: RenderFn, full_height: Callable[[], int]) -> None:
        self.render, self.full_height = render, full_height
        self.states: Dict[int, _State] = {}
        self.render_seconds = 0.0
        self.cost_per_row2 = 0.0
        """Seconds per row^2 of the latest frame: a time cap expects a frame of R rows to cost
        this x R^2 (pixels grow as rows^2 at a fixed aspect). The latest, not the most: a one-off
        slow frame (the first, while things warm up) must not bar every later one."""
        self.frames = 0
        self.last_image: Optional[np.ndarray] = None

    def next_rows(self, client) -> Optional[int]:
        """The rows of the frame `client` is owed (low while its camera moves), None if none."""
        state = self.states.get(client.client_id)
        if state is None or not state.dirty:
            return None
        rows = LOW_HEIGHT if _moving(state) else self.full_height()
        return rows if self.frames else min(rows, LOW_HEIGHT)  # the first frame probes the unknown cost

    def fits(self, budget: float, rows: int) -> bool:
        """Whether a frame of `rows` rows, at the latest frame's cost per pixel, keeps the
        rendering time within `budget` seconds (a time cap that the frame crossing it does
        not overshoot)."""
        return self.render_seconds + self.cost_per_row2 * rows * rows <= budget

    def attach(self, client) -> None:
        state = self.states[client.client_id] = _State()

        def moved(_camera) -> None:
            state.moved_at, state.dirty = time.time(), True
            state.wake.set()

        client.camera.on_update(moved)

    def detach(self, client) -> None:
        state = self.states.pop(client.client_id, None)
        if state is not None:
            state.wake.set()

    def refresh(self) -> None:
        """Every browser is owed a new full frame (the field or a setting changed)."""
        for state in self.states.values():
            state.dirty = True
            state.wake.set()

    def service(self, client, rows: Optional[int] = None) -> bool:
        """Render one frame for `client` if it is owed one, of `rows` rows (default: `next_rows`);
        True when a frame was sent. Only a full frame of a resting camera pays what is owed."""
        state = self.states.get(client.client_id)
        if state is None or not state.dirty:
            return False
        try:
            if client.camera.image_height <= 0:  # a hidden canvas
                return False
        except AssertionError:  # the browser has not reported its camera yet
            return False
        rows = rows or self.next_rows(client)
        if not _moving(state) and rows >= self.full_height():
            state.dirty = False  # a move during the render sets it again
        start = time.perf_counter()
        image, depth = self.render(client.camera, rows)
        client.scene.set_background_image(image, format="jpeg", jpeg_quality=90, depth=depth)
        self.last_image = image
        took = time.perf_counter() - start
        self.render_seconds += took
        self.cost_per_row2 = took / max(rows, 1) ** 2
        state.frames += 1
        self.frames += 1
        return True

    def run_thread(self, client, stopped: threading.Event) -> threading.Thread:
        """The standalone viewer's loop for one browser."""

        def loop() -> None:
            while not stopped.is_set() and client.client_id in self.states:
                state = self.states.get(client.client_id)
                if state is None:
                    return
                if not self.service(client):
                    state.wake.wait(timeout=0.1)
                    state.wake.clear()
                elif _moving(state):
                    time.sleep(0.02)  # moving: let the camera messages in between low frames

        thread = threading.Thread(target=loop, daemon=True, name=f"inr-view-{client.client_id}")
        thread.start()
        return thread
