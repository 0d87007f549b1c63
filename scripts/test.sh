#!/usr/bin/env bash
# The README's second command: set up with the test dependencies and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
export ONNX_HOME="${ONNX_HOME:-$PWD/.cache/onnx-home}"
status=0
.venv/bin/python -m pytest -n "${REFMNN_TEST_WORKERS:-2}" -q -p no:cacheprovider "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit "$status"
