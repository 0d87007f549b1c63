"""ONNX import: :func:`from_onnx` turns a path, bytes or ModelProto into a refmnn Graph."""

from refmnn.converter.onnx.model import from_onnx, read_model, validate

__all__ = ["from_onnx", "read_model", "validate"]
