"""The optimizer of every task (one OptimConfig, see presets.py), the NaN guard, and the
learning-rate change of a resumed run."""

from __future__ import annotations

import math
from typing import Any, Dict

import torch


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


def check_loss(loss: torch.Tensor, step: int) -> None:
    if not torch.isfinite(loss):
        raise TrainingDiverged(f"the loss became {loss.item()} at step {step}")


def adam_with_decay(params, cfg) -> Dict[str, Any]:
    """Adam (the fused kernel: on CPU 6 ms instead of 32 ms per step for a 12M-parameter hash
    table) with an exponential decay from cfg.lr to cfg.lr * cfg.lr_final_factor over cfg.steps
    steps, for Lightning's configure_optimizers."""
    opt = torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, fused=True)
    gamma = math.log(cfg.lr_final_factor) / cfg.steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: math.exp(gamma * min(step, cfg.steps)))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def retarget_learning_rate(checkpoint: Dict[str, Any], lr: float) -> None:
    """A checkpoint restores the optimizer's learning rate; a resumed run given another
    `train.lr` continues its decay schedule from the new base rate instead."""
    for state in checkpoint.get("optimizer_states", []):
        for group in state.get("param_groups", []):
            if "initial_lr" in group and group["initial_lr"] > 0:
                group["lr"] = group["lr"] * lr / group["initial_lr"]
            group["initial_lr"] = lr
    for sched in checkpoint.get("lr_schedulers", []):
        if "base_lrs" in sched:
            old = sched["base_lrs"]
            sched["base_lrs"] = [lr for _ in old]
            if "_last_lr" in sched and old and old[0] > 0:
                sched["_last_lr"] = [v * lr / old[0] for v in sched["_last_lr"]]
