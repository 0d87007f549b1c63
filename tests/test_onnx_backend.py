"""The official ONNX backend test suite, run through ``refmnn.backend`` unchanged.

Every case the installed onnx package ships (node, simple, pytorch-converted, pytorch-operator,
real) runs with the suite's own tolerances. Expected failures and exclusions live in
``onnx_backend_expectations.toml`` beside this file; each entry carries a written reason, and
xfails are strict, so a case that starts passing fails the run until its entry is removed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import onnx.backend.test

from refmnn.backend import RefmnnBackend

MANIFEST = Path(__file__).with_name("onnx_backend_expectations.toml")


def _load_manifest() -> dict[str, list[dict[str, str]]]:
    data = tomllib.loads(MANIFEST.read_text())
    for kind in ("xfail", "exclude"):
        for entry in data.get(kind, []):
            if not entry.get("reason", "").strip():
                raise ValueError(f"{MANIFEST.name}: entry {entry} has no reason")
    return data


_manifest = _load_manifest()
backend_test = onnx.backend.test.BackendTest(RefmnnBackend, __name__)
for _entry in _manifest.get("exclude", []):
    backend_test.exclude(_entry["pattern"])
for _entry in _manifest.get("xfail", []):
    backend_test.xfail(_entry["pattern"])

globals().update(backend_test.test_cases)


