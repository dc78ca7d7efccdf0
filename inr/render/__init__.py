"""Rays, volume rendering and occupancy-grid ray marching (pure torch; no Lightning)."""

from .rays import Rays, pinhole_rays
from .volume import accumulate, render_weights

__all__ = ["Rays", "accumulate", "pinhole_rays", "render_weights"]
