"""TensorProto and TypeProto to refmnn values.

Tensors may store their data in ``raw_data``, in the typed fields (``float_data``,
``int32_data``, ...) or in an external file next to the model. Every ONNX element type is
supported; narrow formats (bfloat16, float8, float4, int4, ...) become ``ml_dtypes`` arrays.
External data must live inside the model's folder: a location that is absolute or that escapes
the folder (``..``, symbolic links) is refused.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from refmnn.dtypes import DType
from refmnn.errors import ModelError, ResourceError
from refmnn.graph import OptionalType, SequenceType, TensorType, ValueType


def external_location(tensor: onnx.TensorProto) -> dict[str, str]:
    """The key/value pairs of a tensor's ``external_data`` field."""
    return {entry.key: entry.value for entry in tensor.external_data}


def check_external_path(location: str, base_dir: str | None, tensor_name: str) -> Path:
    """Resolve an external-data location and refuse it unless it lies inside ``base_dir``."""
    if base_dir is None:
        raise ModelError(
            f"tensor {tensor_name!r} stores its data in the external file {location!r}, but the "
            "model was not given as a path, so there is no folder to read it from; load the model "
            "from its file path instead"
        )
    if os.path.isabs(location) or location.startswith(("/", "\\")):
        raise ModelError(f"tensor {tensor_name!r}: external data location {location!r} is an "
                         "absolute path; only files inside the model's folder are read")
    base = Path(base_dir).resolve()
    target = (base / location).resolve()
    if base != target and base not in target.parents:
        raise ModelError(f"tensor {tensor_name!r}: external data location {location!r} points "
                         f"outside the model's folder {str(base)!r}; refusing to read it")
    if not target.is_file():
        raise ModelError(f"tensor {tensor_name!r}: external data file {str(target)!r} not found")
    return target


# Element types whose ONNX bytes are NumPy's own layout (a whole number of bytes an element,
# little-endian): an external tensor of one of these is read straight into its array. The
# others -- strings, and the 2-, 4- and 6-bit formats packed several to a byte -- are decoded
# through a TensorProto.
_BYTES_AS_STORED = frozenset(DType) - {DType.string, DType.uint4, DType.int4, DType.float4e2m1,
                                       DType.uint2, DType.int2, DType.float6e2m3,
                                       DType.float6e3m2}


def _where(tensor: onnx.TensorProto, base_dir: str | None) -> tuple[str, Path, int, int | None]:
    """An external tensor's location as written, its checked path, offset and length."""
    info = external_location(tensor)
    location = info.get("location", "")
    path = check_external_path(location, base_dir, tensor.name)
    try:
        offset = int(info.get("offset", 0) or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        offset = length = -1
    if offset < 0 or (length is not None and length < 0):
        raise ModelError(f"tensor {tensor.name!r}: external data offset "
                         f"{info.get('offset')!r} / length {info.get('length')!r} in "
                         f"{location!r} is not a byte count")
    return location, path, offset, length


def _truncated(tensor: onnx.TensorProto, location: str, held: int, offset: int,
               expected: int) -> ModelError:
    return ModelError(f"tensor {tensor.name!r}: external file {location!r} holds {held} bytes "
                      f"at offset {offset}, {expected} expected (truncated?)")


def _read_external_array(tensor: onnx.TensorProto, base_dir: str | None) -> np.ndarray | None:
    """An external tensor whose element type is stored as NumPy lays it out, read by one
    ``readinto`` into its final array: no bytes object, no TensorProto copy and no decoding
    copy, so each tensor's bytes are in memory once instead of up to four times (twelve 64 MB
    float32 weights in one file, three processes each: 2.5-3.3 -> 0.46-0.78 s to load, peak
    RSS 946 -> 826 MB; onnxruntime 0.78-0.81 s, 887 MB). The file must hold the tensor's
    bytes before any memory is taken for them. None where the general path decodes it
    (another element type, a big-endian machine, negative dims, or a ``length`` that is not
    the tensor's size, which that path reports)."""
    try:
        dtype = DType.from_onnx(tensor.data_type)
    except ValueError:
        return None
    shape = tuple(int(d) for d in tensor.dims)
    if dtype not in _BYTES_AS_STORED or not np.little_endian or min(shape, default=0) < 0:
        return None
    location, path, offset, length = _where(tensor, base_dir)
    nbytes = math.prod(shape) * dtype.numpy.itemsize
    if length is not None and length != nbytes:
        return None
    held = max(0, min(path.stat().st_size - offset, nbytes))
    if held != nbytes:
        raise _truncated(tensor, location, held, offset, nbytes)
    try:
        array = np.empty(shape, dtype.numpy)
    except MemoryError:
        raise ResourceError(f"tensor {tensor.name!r} ({dtype.name}{list(shape)}, {nbytes} "
                            f"bytes in {location!r}) does not fit in memory") from None
    with open(path, "rb") as handle:
        handle.seek(offset)
        held = handle.readinto(memoryview(array.reshape(-1).view(np.uint8)))
    if held != nbytes:  # the file shrank since
        raise _truncated(tensor, location, held, offset, nbytes)
    array.flags.writeable = False
    return array


def _read_external(tensor: onnx.TensorProto, base_dir: str | None) -> onnx.TensorProto:
    location, path, offset, length = _where(tensor, base_dir)
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read() if length is None else handle.read(length)
    if length is not None and len(data) != length:
        raise _truncated(tensor, location, len(data), offset, length)
    inline = onnx.TensorProto()
    inline.CopyFrom(tensor)
    del inline.external_data[:]
    inline.data_location = onnx.TensorProto.DEFAULT
    inline.raw_data = data
    return inline


def to_array(tensor: onnx.TensorProto, base_dir: str | None = None) -> np.ndarray:
    """Decode a TensorProto into a read-only NumPy array (strings become ``str`` objects)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        array = _read_external_array(tensor, base_dir)
        if array is not None:
            return array
        tensor = _read_external(tensor, base_dir)
    try:
        DType.from_onnx(tensor.data_type)
    except ValueError:
        raise ModelError(f"tensor {tensor.name!r}: unknown element type code {tensor.data_type}") from None
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as exc:  # protobuf/numpy errors on malformed tensors
        raise ModelError(f"tensor {tensor.name!r} ({onnx.TensorProto.DataType.Name(tensor.data_type)}"
                         f", dims {list(tensor.dims)}) cannot be decoded: {exc}") from exc
    array = np.array(array, copy=True) if not array.flags.owndata else array
    array.flags.writeable = False
    return array


def sparse_to_array(sparse: onnx.SparseTensorProto, base_dir: str | None = None) -> np.ndarray:
    """Densify a SparseTensorProto (values at linear or coordinate indices, zeros elsewhere)."""
    values = to_array(sparse.values, base_dir)
    indices = to_array(sparse.indices, base_dir).astype(np.int64)
    shape = tuple(int(d) for d in sparse.dims)
    dense = np.zeros(shape, dtype=values.dtype)
    if indices.ndim == 1:
        dense.reshape(-1)[indices] = values
    else:
        dense[tuple(indices.T)] = values
    dense.flags.writeable = False
    return dense


def to_type(proto: onnx.TypeProto) -> ValueType | None:
    """Convert a TypeProto; returns None for an empty (unknown) type."""
    which = proto.WhichOneof("value")
    if which == "tensor_type" or which == "sparse_tensor_type":
        tt = getattr(proto, which)
        try:
            dtype = DType.from_onnx(tt.elem_type) if tt.elem_type else None
        except ValueError:
            raise ModelError(f"unknown element type code {tt.elem_type}") from None
        if not tt.HasField("shape"):
            return TensorType(dtype, None)
        dims: list[int | str | None] = []
        for dim in tt.shape.dim:
            kind = dim.WhichOneof("value")
            if kind == "dim_value":
                dims.append(int(dim.dim_value))
            elif kind == "dim_param":
                dims.append(dim.dim_param or None)
            else:
                dims.append(None)
        return TensorType(dtype, tuple(dims))
    if which == "sequence_type":
        return SequenceType(to_type(proto.sequence_type.elem_type))
    if which == "optional_type":
        return OptionalType(to_type(proto.optional_type.elem_type))
    if which is None:
        return None
    raise ModelError(f"value type {which!r} is not supported (only tensors, sequences and optionals)")
