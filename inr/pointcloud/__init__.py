"""Point clouds: voxels, sparse convolutions, metrics (pure torch; no Lightning)."""
