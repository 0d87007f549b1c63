"""refmnn: an inference engine whose every operator is a readable NumPy function.

Public API::

    import refmnn
    sess = refmnn.Session("model.onnx")          # path, bytes, onnx.ModelProto or refmnn.Graph
    outputs = sess.run({"input": x})

``import refmnn`` needs only NumPy (and onnx with ml_dtypes for ONNX import and narrow dtypes).
"""

from refmnn.dtypes import DType
from refmnn.errors import (
    BackendError,
    InputError,
    ModelError,
    OpError,
    RefmnnError,
    ResourceError,
    ShapeError,
    UnsupportedOpError,
    UsageError,
)
from refmnn.graph import Graph, Node, OptionalType, SequenceType, TensorType, Value
from refmnn.session import Session

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "DType",
    "Graph",
    "InputError",
    "ModelError",
    "Node",
    "OpError",
    "OptionalType",
    "RefmnnError",
    "ResourceError",
    "SequenceType",
    "Session",
    "ShapeError",
    "TensorType",
    "UnsupportedOpError",
    "UsageError",
    "Value",
    "__version__",
    "load",
]


def load(model, *, check: bool = True) -> Graph:  # type: ignore[no-untyped-def]
    """Load a model (path, bytes, onnx.ModelProto) into a refmnn Graph using the built-in ops."""
    from refmnn.converter import load as _load
    from refmnn.ops import default_registry

    return _load(model, default_registry(), check=check)
