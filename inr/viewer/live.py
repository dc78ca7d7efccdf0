"""`nerf train --viewer`: the NeRF viewer on the field while it trains.

Frames are rendered in the training loop between steps (never beside a step, which would halve
both on 2 cores), only for browsers owed one, and only while the time spent rendering stays
under `cap` of the training time so far; the viewer's time is inside the run's training clock,
so its cost shows in rays/s and in the time-budget curve.

The cap, 7 %, is below the 10 % that the viewer may cost: renders that take a fraction c of the
run's time make it 1 / (1 - c) longer (10 % -> 11.1 %), and the rest of the viewer (its server
thread sending frames, the status line) costs a little beside the renders."""

from __future__ import annotations

import time

import lightning as L

from .progressive import LOW_HEIGHT

REFRESH_SECONDS = 2.0  # a resting browser gets a new full frame this often: the field changes
CAP = 0.07  # the share of the training time that renders may take (see the module docstring)


class LiveViewer(L.Callback):
    def __init__(self, scene, background: float, host: str = "127.0.0.1", port: int = 8080, cap: float = CAP) -> None:
        self.scene, self.background, self.host, self.port, self.cap = scene, background, host, port, cap
        self.viewer = None
        self._t0 = 0.0
        self._last_refresh = 0.0
        self._last_status = 0.0
        self._monitor = None
        self.curve_text = ""
        self.seconds = 0.0  # all the time this callback took in the training loop, renders included

    def on_fit_start(self, trainer: "L.Trainer", module: "L.LightningModule") -> None:
        if not trainer.is_global_zero:
            return
        from . import Viewer
        from .nerf import NerfViewer

        self.viewer = Viewer(lambda server: NerfViewer(server, module, self.scene, self.background), self.host, self.port,
                             render_threads=False)
        print(f"inr: live viewer at {self.viewer.url}", flush=True)

    def on_train_start(self, trainer, module) -> None:
        self._t0 = time.perf_counter()
        from ..tasks.callbacks import RunMonitor

        self._monitor = next((cb for cb in trainer.callbacks if isinstance(cb, RunMonitor)), None)

    def _training_seconds(self, now: float) -> float:
        """This process's training time so far: the run's clock (evaluations excluded) when
        there is one, else the time since training started."""
        if self._monitor is not None:
            return self._monitor.seconds() - self._monitor.before
        return now - self._t0

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if self.viewer is None:
            return
        now = time.perf_counter()
        try:
            self._between_steps(trainer, now)
        finally:
            self.seconds += time.perf_counter() - now

    def _between_steps(self, trainer, now: float) -> None:
        nerf = self.viewer.content
        if now - self._last_status > 0.5:
            self._last_status = now
            metrics = trainer.callback_metrics
            loss = metrics.get("loss")
            nerf.status.content = (f"**training** step {trainer.global_step}"
                                   + (f", loss {float(loss):.4g}" if loss is not None else "") + self.curve_text)
        if now - self._last_refresh > REFRESH_SECONDS:
            self._last_refresh = now
            nerf.progressive.refresh()
        budget = self.cap * self._training_seconds(now)
        for client in list(self.viewer.server.get_clients().values()):
            rows = nerf.progressive.next_rows(client)
            if rows is None:
                continue
            if not nerf.progressive.fits(budget, rows):
                if rows <= LOW_HEIGHT or not nerf.progressive.fits(budget, LOW_HEIGHT):
                    continue  # another browser may be owed a cheaper frame
                rows = LOW_HEIGHT  # a full frame does not fit, a low one does: the change still shows
            nerf.progressive.service(client, rows)

    def record(self, step: int, seconds: float, value: float) -> None:
        self.curve_text = f"; test PSNR {value:.2f} dB at step {step} ({seconds:.0f} s)"

    def on_train_end(self, trainer, module) -> None:
        if self.viewer is not None:
            nerf = self.viewer.content
            print(f"inr: the live viewer rendered {nerf.progressive.frames} frames in "
                  f"{nerf.progressive.render_seconds:.1f} s ({self.seconds:.1f} s in all between steps)", flush=True)
            self.viewer.stop()
            self.viewer = None

    def on_exception(self, trainer, module, exception) -> None:
        if self.viewer is not None:
            self.viewer.stop()
            self.viewer = None
