#!/usr/bin/env bash
# How the bundled samples in assets/ were made (needs: the project's venv; espeak-ng and sox from
# Debian for the speech clip). Run from the repository root.
set -euo pipefail
.venv/bin/python - <<'PY'
import imageio.v3 as iio
import skimage.data
# NASA portrait of Eileen Collins shipped with scikit-image (public domain), 512 x 512 RGB
iio.imwrite("assets/astronaut.png", skimage.data.astronaut())
PY
tmp=$(mktemp -d)
espeak-ng -s 150 -w "$tmp/speech.wav" \
  "Implicit neural representations fit a signal with a small network over its coordinates. This clip lasts five seconds."
# 16 kHz mono 16-bit, exactly 5 s (trimmed or padded with silence)
sox "$tmp/speech.wav" -r 16000 -c 1 -b 16 assets/speech.wav trim 0 5 pad 0 5 trim 0 5
rm -r "$tmp"
