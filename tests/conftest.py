"""Shared test configuration."""

from __future__ import annotations

import os
import tempfile

# The ONNX backend suite copies its 'real' models into $ONNX_HOME; keep that out of the home folder.
os.environ.setdefault("ONNX_HOME", os.path.join(tempfile.gettempdir(), "refmnn-onnx-home"))
