"""tools/peer_cases.py: the conformance samples run on a peer engine agree with the reference
on the ops where the engines are known to agree (the tool's own regressions), and a sample
where they do not is reported as a DIFF with a failing exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _peer_cases(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "peer_cases.py"), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.parametrize(("peer", "ops", "least"), [
    # Cast left out: onnxruntime 1.32 casts 61440 to float8e5m2 without saturation as NaN
    # (tests/test_reference_oracles.py); DequantizeLinear's float8 inputs go as raw bytes
    ("onnxruntime", "Conv,ConvTranspose,Gemm,Softmax,DequantizeLinear", 140),
    # onnx.reference multiplies float16 in float16 and gets Softmax-11 wrong: fewer ops
    ("onnx.reference", "ConvTranspose,Cast,Relu", 60),
])
def test_agreeing_ops_agree(peer, ops, least):
    """Ops where the engines agree on every sample and dtype both run (bfloat16 and float8
    values, which onnxruntime takes and returns as their bytes, included)."""
    if peer == "onnxruntime":
        pytest.importorskip("onnxruntime")
    result = _peer_cases("--ops", ops, "--peer", peer)
    summary = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    agreed = int(summary.split("agree ")[1].split(",")[0])
    assert agreed >= least, summary


def test_a_disagreement_fails_the_run():
    """Resize's tf_crop_and_resize with scales: onnx.reference leaves the roi out of the output
    size (tests/test_reference_oracles.py), so the tool reports DIFFs and exits 1."""
    result = _peer_cases("--ops", "Resize", "--peer", "onnx.reference")
    assert result.returncode == 1
    assert "DIFF Resize@19-float32-linear_tf_crop_and_resize_up" in result.stdout
