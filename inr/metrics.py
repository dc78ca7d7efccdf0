"""Signal metrics, thin wrappers over torchmetrics (imported on first use: ~1 s that commands
without these metrics, such as point-cloud inference or `inr --help`, need not pay)."""

from __future__ import annotations

import torch


def psnr(pred: torch.Tensor, target: torch.Tensor, data_range: float = 1.0) -> float:
    """10 log10(range^2 / MSE) in dB over all elements."""
    from torchmetrics.functional.image import peak_signal_noise_ratio

    return float(peak_signal_noise_ratio(pred.float(), target.float(), data_range=data_range))


def ssim(pred: torch.Tensor, target: torch.Tensor, data_range: float = 1.0) -> float:
    """SSIM of two (H, W, C) images (Gaussian window 11, sigma 1.5). Images smaller than the
    window on a side get a proportionally smaller window."""
    from torchmetrics.functional.image import structural_similarity_index_measure

    p = pred.float().permute(2, 0, 1)[None]
    t = target.float().permute(2, 0, 1)[None]
    side = min(p.shape[-2:])
    kernel = 11 if side >= 11 else max(3, side - (1 - side % 2))
    sigma = 1.5 * kernel / 11
    return float(structural_similarity_index_measure(p, t, data_range=data_range, kernel_size=kernel, sigma=sigma))


def snr_db(pred: torch.Tensor, target: torch.Tensor) -> float:
    """10 log10(sum target^2 / sum (target - pred)^2), over all channels."""
    from torchmetrics.functional.audio import signal_noise_ratio

    return float(signal_noise_ratio(pred.float().flatten(), target.float().flatten()))
