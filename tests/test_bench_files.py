"""The pytest-benchmark files under bench/ run (once each, timing disabled) and check their results.

Both files check every engine's / scheme's output against the reference op before timing it, so
running them here is a real test of those kernels at zoo shapes, not only of the harness.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is in refmnn's test extra")


def _run(path: str, selection: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--benchmark-disable", "-k", selection],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=900)


@pytest.mark.slow
def test_scheme_benchmarks_run_and_check_every_scheme():
    pytest.importorskip("numba")
    done = _run("bench/test_schemes.py",
                "conv3x3_512c_7 or conv_depthwise3x3_144c_56 or matmul_128x384")
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    # Conv at 7x7x512: im2col_gemm, winograd_f23, winograd_f43 and, on a CPU with AVX2 and FMA,
    # winograd_f23_simd and winograd_f43_simd (direct is skipped as not worth timing: 68-75x by
    # the costs, measured 71 ms against im2col_gemm's 1.9 ms); depthwise at 56x56x144: direct,
    # depthwise, depthwise_s1, depthwise3x3, depthwise3x3_same and, with AVX2 and FMA,
    # depthwise3x3_c8; MatMul: blas, blocked and, with AVX2 and FMA, packed_simd
    from refmnn.backends.numba.kernels.simd import native

    assert f"{14 if native() else 10} passed" in tail, tail


@pytest.mark.slow
def test_op_benchmarks_run_and_check_against_the_reference():
    pytest.importorskip("onnxruntime")
    done = _run("bench/test_ops.py", "add_1x64 or softmax")
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert "4 passed" in tail, tail
