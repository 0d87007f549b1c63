"""Run an ONNX model on a peer engine -- onnxruntime's CPU provider or onnx.reference -- the
way refmnn's differential tools (fuzz_models.py, peer_cases.py) compare against them.

Tensor feeds go as C-contiguous arrays (NumPy scalars as 0-d arrays); onnxruntime gets
bfloat16 and float8 tensors as OrtValues of their bytes and returns them the same way, as the
ml_dtypes types refmnn uses (int4 and the other packed types it cannot be fed from here). Other
feeds (sequences, optionals) go as they are.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import onnx

from refmnn.dtypes import DType

PEERS = ("onnxruntime", "onnx.reference")
_AS_BYTES = frozenset({DType.bfloat16, DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2,
                       DType.float8e5m2fnuz, DType.float8e8m0})
"""Types onnxruntime takes as one element a byte (two for bfloat16); int4 and the other
sub-byte types it packs two or more to a byte, unlike ml_dtypes, so they are not sent."""


def as_bytes(dtype: np.dtype) -> bool:
    """Whether onnxruntime exchanges ``dtype`` as its raw bytes (see ``_AS_BYTES``). By the
    refmnn DType, not the NumPy kind: ml_dtypes gives float8_e5m2 kind 'f', the others 'V'."""
    try:
        return DType.from_numpy(dtype) in _AS_BYTES
    except (KeyError, TypeError, ValueError):
        return False


def run_peer(model: onnx.ModelProto, feeds: dict[str, Any], peer: str) -> list[Any]:
    """The peer's outputs, in the graph's output order; raises whatever the peer raises."""
    # arrays C-contiguous: onnxruntime reads a raw buffer in that order
    feeds = {name: np.asarray(value, order="C") if isinstance(value, np.ndarray | np.generic)
             else value for name, value in feeds.items()}
    if peer == "onnx.reference":
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(model).run(None, feeds))
    import onnxruntime

    onnxruntime.set_default_logger_severity(4)  # a refused model is an exception, not a log line
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    if not all(isinstance(value, np.ndarray) and value.dtype != object
               for value in feeds.values()):  # sequences, optionals, strings: no OrtValue path
        return list(session.run(None, feeds))
    values = {}
    for name, value in feeds.items():
        if as_bytes(value.dtype):
            raw = value.view(np.uint8 if value.dtype.itemsize == 1 else np.uint16)
            values[name] = onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(
                raw, DType.from_numpy(value.dtype).value)
        else:
            values[name] = onnxruntime.OrtValue.ortvalue_from_numpy(value)
    return [_ort_array(value) for value in session.run_with_ort_values(None, values)]


def _ort_array(value: Any) -> Any:
    """An onnxruntime output as a NumPy array; bfloat16 and float8, which its ``numpy()``
    cannot convert, copied from the tensor's bytes into their ml_dtypes type."""
    if not value.is_tensor():
        return None
    try:
        return value.numpy()
    except Exception:
        dtype = DType.from_onnx(value.element_type()).numpy
        size = value.tensor_size_in_bytes()
        raw = (ctypes.c_uint8 * size).from_address(value.data_ptr())
        return np.frombuffer(raw, dtype=np.uint8).copy().view(dtype).reshape(value.shape())
