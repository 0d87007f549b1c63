#!/usr/bin/env bash
# Create .venv (if needed) and install refmnn with the given extras into it.
#   scripts/setup.sh            -> refmnn + zoo (torch) + onnxruntime
#   scripts/setup.sh test       -> + the test dependencies
#   scripts/setup.sh test,bench -> + the benchmark peers (MNN, matplotlib, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="zoo${1:+,$1}"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch==2.13.0 is pinned exactly: on this project's machines that pin is a local CPU wheel,
# while an unpinned torch would pull gigabytes of CUDA packages.
.venv/bin/python -m pip install -q -e ".[${extras}]" onnxruntime
