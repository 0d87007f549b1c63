"""Frontends that turn models from other formats into refmnn graphs.

:func:`load` accepts a path, bytes, an ``onnx.ModelProto`` or a refmnn :class:`Graph` (returned
as is). ONNX is the first frontend; the onnx package is imported only when it is used.
"""

from __future__ import annotations

import os
from typing import Any

from refmnn.graph import Graph
from refmnn.ops.registry import OpRegistry


def load(source: Any, registry: OpRegistry, *, check: bool = True) -> Graph:
    """Load a model from a path, bytes, an ONNX ModelProto or a Graph."""
    if isinstance(source, Graph):
        return source
    from refmnn.converter.onnx import from_onnx

    if isinstance(source, str | os.PathLike | bytes | bytearray | memoryview):
        return from_onnx(source, registry, check=check)
    import onnx

    if isinstance(source, onnx.ModelProto):
        return from_onnx(source, registry, check=check)
    from refmnn.errors import UsageError

    raise UsageError(f"cannot load a model from a {type(source).__name__}; give a path, bytes, "
                     "an onnx.ModelProto or a refmnn Graph")
