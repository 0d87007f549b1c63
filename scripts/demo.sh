#!/usr/bin/env bash
# The README's first command: set up (with the backends that install from PyPI: numba, and
# OpenCL on PoCL's CPU driver), export a zoo model, run it on the reference and on every
# available backend, and print the agreement with onnxruntime.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh numba,opencl
.venv/bin/refmnn demo "${1:-resnet18}"
