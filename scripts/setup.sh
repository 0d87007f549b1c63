#!/usr/bin/env bash
# Create .venv (if needed) and install refmnn with the given extras into it.
#   scripts/setup.sh            -> refmnn + zoo (torch) + onnxruntime
#   scripts/setup.sh numba,opencl -> + the numba and OpenCL (PoCL) backends (the demo's set-up)
#   scripts/setup.sh test       -> + the test dependencies (numba, PoCL OpenCL, hypothesis, ...)
#   scripts/setup.sh test,bench -> + the benchmark peers (MNN, matplotlib, ...)
# pip's output goes to .venv/setup.log and is shown only if the install fails.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="zoo${1:+,$1}"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
log=.venv/setup.log
echo "installing refmnn[${extras}] into .venv (log: ${log})"
# torch==2.13.0 is pinned exactly: on this project's machines that pin is a local CPU wheel,
# while an unpinned torch would pull gigabytes of CUDA packages.
if ! { .venv/bin/python -m pip install -q --upgrade pip &&
       .venv/bin/python -m pip install -q -e ".[${extras}]" onnxruntime; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "setup failed; see above" >&2
    exit 1
fi
