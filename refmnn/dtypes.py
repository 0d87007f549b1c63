"""Element types: the ONNX data types and their NumPy counterparts.

Every ONNX ``TensorProto.DataType`` has a :class:`DType` member whose value is the ONNX code.
The narrow float and integer formats (bfloat16, the float8 family, float4/float6, int4/uint4,
int2/uint2, float8 e8m0) are NumPy dtypes from ``ml_dtypes``, so arrays of them are ordinary
``np.ndarray`` objects. Strings are NumPy ``object`` arrays holding ``str``.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class DType(enum.Enum):
    """An element type; the value is the ONNX ``TensorProto.DataType`` code."""

    float32 = 1
    uint8 = 2
    int8 = 3
    uint16 = 4
    int16 = 5
    int32 = 6
    int64 = 7
    string = 8
    bool = 9
    float16 = 10
    float64 = 11
    uint32 = 12
    uint64 = 13
    complex64 = 14
    complex128 = 15
    bfloat16 = 16
    float8e4m3fn = 17
    float8e4m3fnuz = 18
    float8e5m2 = 19
    float8e5m2fnuz = 20
    uint4 = 21
    int4 = 22
    float4e2m1 = 23
    float8e8m0 = 24
    uint2 = 25
    int2 = 26
    float6e2m3 = 27
    float6e3m2 = 28

    @property
    def numpy(self) -> np.dtype:
        """The NumPy dtype that stores elements of this type."""
        return _TO_NUMPY[self]

    @property
    def is_float(self) -> bool:
        """True for every floating-point format, narrow ones included."""
        return self in FLOATS

    @property
    def is_integer(self) -> bool:
        """True for signed and unsigned integers of every width (not bool)."""
        return self in INTEGERS

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory (sub-byte formats take one byte each when unpacked)."""
        return int(self.numpy.itemsize)

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> DType:
        """Map a NumPy dtype (or scalar type) to its DType; raises KeyError if there is none."""
        return _FROM_NUMPY[np.dtype(dtype)]

    @classmethod
    def from_onnx(cls, code: int) -> DType:
        """Map an ONNX ``TensorProto.DataType`` code to its DType."""
        return cls(code)


_TO_NUMPY: dict[DType, np.dtype] = {
    DType.float32: np.dtype(np.float32),
    DType.uint8: np.dtype(np.uint8),
    DType.int8: np.dtype(np.int8),
    DType.uint16: np.dtype(np.uint16),
    DType.int16: np.dtype(np.int16),
    DType.int32: np.dtype(np.int32),
    DType.int64: np.dtype(np.int64),
    DType.string: np.dtype(object),
    DType.bool: np.dtype(np.bool_),
    DType.float16: np.dtype(np.float16),
    DType.float64: np.dtype(np.float64),
    DType.uint32: np.dtype(np.uint32),
    DType.uint64: np.dtype(np.uint64),
    DType.complex64: np.dtype(np.complex64),
    DType.complex128: np.dtype(np.complex128),
    DType.bfloat16: np.dtype(ml_dtypes.bfloat16),
    DType.float8e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.float8e4m3fnuz: np.dtype(ml_dtypes.float8_e4m3fnuz),
    DType.float8e5m2: np.dtype(ml_dtypes.float8_e5m2),
    DType.float8e5m2fnuz: np.dtype(ml_dtypes.float8_e5m2fnuz),
    DType.uint4: np.dtype(ml_dtypes.uint4),
    DType.int4: np.dtype(ml_dtypes.int4),
    DType.float4e2m1: np.dtype(ml_dtypes.float4_e2m1fn),
    DType.float8e8m0: np.dtype(ml_dtypes.float8_e8m0fnu),
    DType.uint2: np.dtype(ml_dtypes.uint2),
    DType.int2: np.dtype(ml_dtypes.int2),
    DType.float6e2m3: np.dtype(ml_dtypes.float6_e2m3fn),
    DType.float6e3m2: np.dtype(ml_dtypes.float6_e3m2fn),
}
_FROM_NUMPY: dict[np.dtype, DType] = {v: k for k, v in _TO_NUMPY.items()}

FLOAT8 = frozenset(
    {DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2, DType.float8e5m2fnuz,
     DType.float8e8m0}
)
NARROW_FLOATS = FLOAT8 | {DType.float4e2m1, DType.float6e2m3, DType.float6e3m2}
FLOATS = frozenset({DType.float16, DType.float32, DType.float64, DType.bfloat16}) | NARROW_FLOATS
SIGNED = frozenset({DType.int8, DType.int16, DType.int32, DType.int64, DType.int4, DType.int2})
UNSIGNED = frozenset({DType.uint8, DType.uint16, DType.uint32, DType.uint64, DType.uint4,
                      DType.uint2})
INTEGERS = SIGNED | UNSIGNED
COMPLEX = frozenset({DType.complex64, DType.complex128})
NUMERIC = FLOATS | INTEGERS
ALL = frozenset(DType)


def to_numpy_dtype(dtype: DType | np.dtype | type | str) -> np.dtype:
    """Accept a DType, a NumPy dtype or a dtype name and return the NumPy dtype."""
    if isinstance(dtype, DType):
        return dtype.numpy
    return np.dtype(dtype)


def is_narrow(dtype: np.dtype) -> bool:
    """True for the ml_dtypes formats, which NumPy cannot compute in directly."""
    return np.dtype(dtype) in _NARROW_NUMPY


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype the reference computes in for elements of ``dtype``.

    bfloat16 and the other ml_dtypes floats compute in float32 and round once at the end (NumPy
    has no arithmetic of its own for them); narrow integers compute in int32; every other dtype,
    float16 included, computes in itself. Ops where float16 arithmetic would lose accuracy that
    the spec does not ask for (accumulations: MatMul, reductions, normalisations) upcast float16
    themselves and say so in their docstrings.
    """
    dtype = np.dtype(dtype)
    if dtype in _NARROW_NUMPY_FLOAT:
        return np.dtype(np.float32)
    if dtype in _NARROW_NUMPY_INT:
        return np.dtype(np.int32)
    return dtype


_NARROW_NUMPY_FLOAT = frozenset(_TO_NUMPY[d] for d in NARROW_FLOATS | {DType.bfloat16})
_NARROW_NUMPY_INT = frozenset(
    _TO_NUMPY[d] for d in (DType.int4, DType.uint4, DType.int2, DType.uint2)
)
_NARROW_NUMPY = _NARROW_NUMPY_FLOAT | _NARROW_NUMPY_INT
