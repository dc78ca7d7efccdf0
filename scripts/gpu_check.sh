#!/usr/bin/env bash
# The GPU check (issue 9): run on one NVIDIA GPU machine that has Python with torch (CUDA),
# lightning, pytest, numpy/scipy/scikit-image/imageio/matplotlib/tqdm/pyyaml and nvcc, and no
# network. The other dependencies come as wheels made beforehand on a networked machine with
# `make gpu-wheels` (into the git-ignored gpu-wheels/). Writes one JSON report:
#   bash scripts/gpu_check.sh [REPORT.json]      (default: $OUT/gpu_report.json or gpu_report.json)
# Budget: under 8 minutes on one H200, the nerfacc JIT build included.
set -uo pipefail
cd "$(dirname "$0")/.."
REPORT="${1:-${OUT:-.}/gpu_report.json}"
PY="${PYTHON:-python3}"
if [ -d gpu-wheels ] && ls gpu-wheels/*.whl >/dev/null 2>&1; then
  # into a folder of their own: the machine's Python may be externally managed
  "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/inr-gpu-site gpu-wheels/*.whl \
    || echo "gpu_check: some wheels did not install"
  export PYTHONPATH="/tmp/inr-gpu-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export MAX_JOBS="${MAX_JOBS:-$(nproc)}"
export TCNN_CUDA_ARCHITECTURES="${TCNN_CUDA_ARCHITECTURES:-90}"
exec "$PY" scripts/gpu_check.py --report "$REPORT" "${@:2}"
