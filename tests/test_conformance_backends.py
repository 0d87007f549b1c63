"""Conformance reports for every built-in accelerated backend present, generated and checked.

Each available backend runs refmnn's own conformance cases (the ONNX node source is covered for
the reference by tests/test_conformance.py) with its shipped xfail manifest, strict; the report
must exist in its three forms, name the backend and end with the closing line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.helpers import require_backend

BACKENDS = ("numba", "opencl")


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_passes_its_conformance_suite_and_reports(backend, tmp_path):
    require_backend(backend)
    report = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "refmnn_conformance", "--backend", backend, "--source", "refmnn",
         "--report", str(report), "-n", "2", "-q"],
        capture_output=True, text=True, check=False, timeout=1800,
    )
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    markdown = (report / "report.md").read_text()
    closing = markdown.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(r"\d+ passed, 0 failed", closing), closing
    assert f"**backend**: {backend}" in markdown and "| case |" in markdown
    data = json.loads((report / "report.json").read_text())
    assert data["closing"] == closing
    statuses = {cell["status"] for op in data["matrix"][backend].values() for cell in op.values()}
    assert "pass" in statuses
    page = (report / "report.html").read_text()
    assert "<table>" in page and closing in page
