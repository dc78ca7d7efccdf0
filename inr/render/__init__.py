"""Rays, volume rendering and occupancy-grid ray marching (pure torch; no Lightning)."""

from .rays import Rays, pinhole_rays
from .renderer import RenderOut, RenderSettings, render_rays, render_rays_chunked
from .volume import accumulate, render_weights

__all__ = ["RenderOut", "RenderSettings", "Rays", "accumulate", "pinhole_rays", "render_rays", "render_rays_chunked",
           "render_weights"]
