"""Cast and CastLike: conversion between every pair of ONNX element types.

The rules (ONNX Cast spec):

* float -> float: round to nearest even; out of range gives +-inf (NaN stays NaN).
* float -> integer: truncation toward zero; out of range (and NaN) is undefined: here the
  value converts as NumPy/ml_dtypes do (wrapping for the 4/2-bit types).
* integer -> integer: keep the low bits, two's complement (200 int16 -> -56 int8).
* integer -> float: nearest value; out of range gives +inf.
* anything -> bool: nonzero is true (NaN too); bool -> number: 1 / 0.
* float8 targets (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ): with ``saturate=1`` (default) values
  beyond the largest finite value, infinities included, clamp to +-max; with ``saturate=0``
  they become NaN (E4M3FN, the FNUZ types) or +-inf (E5M2). FNUZ types have no -0 (it becomes
  +0). Rounding is to nearest even.
* float8e8m0 (a power of two 2^(e-127), no sign, no zero): see :func:`_to_e8m0`.
* strings: numbers format as the shortest string that reads back as the same value of the
  source type ("0.47892547", "1e-07", "inf", "-inf", "nan"; integers in decimal; bool as
  "True"/"False"); strings parse as decimal or scientific numbers, case-insensitive "inf",
  "+inf", "-inf", "nan" included; a decimal string cast to an integer type truncates
  ("100.5" -> 100). Strings are NumPy object arrays of ``str``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from refmnn.dtypes import DType, is_narrow
from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, flag, op

_FLOAT8 = (DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2, DType.float8e5m2fnuz)

# Cast-1 names its target with a string
_CAST1_NAMES = {"FLOAT": DType.float32, "UINT8": DType.uint8, "INT8": DType.int8,
                "UINT16": DType.uint16, "INT16": DType.int16, "INT32": DType.int32,
                "INT64": DType.int64, "STRING": DType.string, "BOOL": DType.bool,
                "FLOAT16": DType.float16, "DOUBLE": DType.float64, "UINT32": DType.uint32,
                "UINT64": DType.uint64}


def _to_string(x: np.ndarray) -> np.ndarray:
    """Numbers -> object array of str, shortest round-trip form of the source type."""
    if x.dtype == object:
        return x.copy()
    if is_narrow(x.dtype) and x.dtype.kind == "V" and DType.from_numpy(x.dtype).is_float:
        x = x.astype(np.float32)
    elif is_narrow(x.dtype):
        x = x.astype(np.int32)
    return x.astype(np.str_).astype(object)


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        return int(float(text))  # "100.5" -> 100, "1e3" -> 1000


def _from_string(x: np.ndarray, target: DType) -> np.ndarray:
    """Object/str array -> numbers of ``target`` (see the module docstring)."""
    flat = [str(v) for v in x.reshape(-1)]
    if target.is_integer:
        bits = 8 * target.numpy.itemsize if target not in (DType.int4, DType.uint4, DType.int2,
                                                            DType.uint2) else 64
        wrapped = [_parse_int(s) % (1 << bits) for s in flat]
        values = np.array(wrapped, dtype=np.uint64).reshape(x.shape)
        return values.astype(np.dtype(f"i{bits // 8}") if target.name.startswith("int") else
                             np.dtype(f"u{bits // 8}")).astype(target.numpy)
    if target == DType.bool:
        words = {"true": 1.0, "false": 0.0}
        return np.array([words.get(s.strip().lower(), None) if s.strip().lower() in words
                         else float(s) for s in flat], dtype=np.float64).reshape(x.shape) != 0
    return _cast_numeric(np.array([float(s) for s in flat], dtype=np.float64).reshape(x.shape),
                         target, saturate=1, round_mode="up")


def _to_e8m0(x: np.ndarray, saturate: int, round_mode: str) -> np.ndarray:
    """float -> float8e8m0 (value 2^(e - 127), e in 0..254; e = 255 is NaN).

    The float32 exponent field is kept and the mantissa rounded away: ``up`` increments the
    exponent when any mantissa bit is set, ``down`` truncates, ``nearest`` rounds half up
    (mantissa >= 0.5 of the step, i.e. the top mantissa bit). NaN and inf give 255 (NaN) —
    except inf with ``saturate=1``, which gives the largest value 2^127; with ``saturate=1``
    rounding never carries into 255. The sign is ignored (negative inputs are undefined).
    Zero and float32 subnormals have exponent field 0 (2^-127) except when rounding up.
    """
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    mantissa = bits & 0x7FFFFF
    special = exponent == 0xFF
    if round_mode == "up":
        carry = mantissa != 0
    elif round_mode == "nearest":
        carry = (mantissa & 0x400000) != 0
    elif round_mode == "down":
        carry = np.zeros(bits.shape, dtype=np.bool_)
    else:
        raise ValueError(f"Cast round_mode must be 'up', 'down' or 'nearest', got {round_mode!r}")
    if saturate:
        carry &= exponent != 0xFE
    result = np.where(special, 0xFF, exponent + carry).astype(np.uint8)
    if saturate:
        result = np.where(special & (mantissa == 0), np.uint8(0xFE), result)
    return result.view(ml_dtypes.float8_e8m0fnu)


def _cast_numeric(x: np.ndarray, target: DType, saturate: int, round_mode: str) -> np.ndarray:
    dtype = target.numpy
    if x.dtype == dtype:
        return x.copy()
    if target == DType.float8e8m0:
        return _to_e8m0(x.astype(np.float32), saturate, round_mode)
    if target == DType.bool:
        return x.astype(np.float32) != 0 if is_narrow(x.dtype) else x != 0
    with np.errstate(invalid="ignore", over="ignore"):
        if target in _FLOAT8 and saturate and x.dtype.kind != "b":
            largest = float(ml_dtypes.finfo(dtype).max)
            wide = x.astype(np.float32) if is_narrow(x.dtype) or x.dtype.kind in "iu" else x
            return np.clip(wide, -largest, largest).astype(dtype)
        if is_narrow(x.dtype) and is_narrow(dtype):
            x = x.astype(np.float32 if DType.from_numpy(x.dtype).is_float else np.int32)
        return x.astype(dtype)


def _cast(x: np.ndarray, target: DType, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    if target == DType.string:
        return _to_string(x)
    if x.dtype == object or x.dtype.kind in "US":
        return _from_string(x, target)
    return _cast_numeric(x, target, saturate, round_mode)


def _cast_rule(ctx: Any, t: Any, **attrs: Any) -> TensorType:
    to = attrs["to"]
    return TensorType(_CAST1_NAMES[to.upper()] if isinstance(to, str) else DType.from_onnx(to),
                      shape_of(t))


def _cast_like_rule(ctx: Any, t: Any, like: Any, **attrs: Any) -> TensorType:
    return TensorType(dtype_of(like), shape_of(t))


_TO = Attr("to", "int", doc="target DataType code (TensorProto.DataType)")
_SATURATE = flag("saturate", 1, "float8 targets: 1 clamps out-of-range values to +-max, "
                 "0 makes them NaN/inf per the spec's table")
_ROUND_MODE = Attr("round_mode", "string", "up", "float8e8m0 targets: 'up', 'down' or 'nearest'")


@op("Cast", since=24, inputs=("input",), outputs=("output",), infer=_cast_rule,
    attrs=(_ROUND_MODE, _SATURATE, _TO))
def cast(input: np.ndarray, *, round_mode: str, saturate: int, to: int) -> np.ndarray:
    """output = input converted to type ``to`` (rules in the module docstring); same shape.

    Cast-24 added ``round_mode`` (for float8e8m0); 25 added int2/uint2, 28 more types.
    """
    return _cast(input, DType.from_onnx(to), saturate, round_mode)


@op("Cast", since=19, inputs=("input",), outputs=("output",), infer=_cast_rule,
    attrs=(_SATURATE, _TO))
def cast_19(input: np.ndarray, *, saturate: int, to: int) -> np.ndarray:
    """Cast-19 (also 21, 23): as Cast-24 with round_mode 'up'; adds the float8 types and
    ``saturate`` (21: int4/uint4, 23: float4e2m1, float8e8m0)."""
    return _cast(input, DType.from_onnx(to), saturate)


@op("Cast", since=6, inputs=("input",), outputs=("output",), infer=_cast_rule, attrs=(_TO,))
def cast_6(input: np.ndarray, *, to: int) -> np.ndarray:
    """Cast-6 (also 9, 13): ``to`` is a DataType code; strings from 9, bfloat16 from 13."""
    return _cast(input, DType.from_onnx(to))


@op("Cast", since=1, inputs=("input",), outputs=("output",), infer=_cast_rule,
    attrs=(Attr("to", "string", doc="target type name: 'FLOAT', 'INT64', ..."),))
def cast_1(input: np.ndarray, *, to: str) -> np.ndarray:
    """Cast-1: ``to`` is the type's name (e.g. "FLOAT", "INT32"), numbers and bool only."""
    return _cast(input, _CAST1_NAMES[to.upper()])


@op("CastLike", since=24, inputs=("input", "target_type"), outputs=("output",),
    infer=_cast_like_rule, attrs=(_ROUND_MODE, _SATURATE))
def cast_like(input: np.ndarray, target_type: np.ndarray, *, round_mode: str,
              saturate: int) -> np.ndarray:
    """output = Cast(input, to = target_type's element type); target_type's values are not
    read. Same rules as Cast-24."""
    return _cast(input, _dtype_of_value(target_type), saturate, round_mode)


@op("CastLike", since=19, inputs=("input", "target_type"), outputs=("output",),
    infer=_cast_like_rule, attrs=(_SATURATE,))
def cast_like_19(input: np.ndarray, target_type: np.ndarray, *, saturate: int) -> np.ndarray:
    """CastLike-19 (also 21, 23): as Cast-19 to target_type's element type."""
    return _cast(input, _dtype_of_value(target_type), saturate)


@op("CastLike", since=15, inputs=("input", "target_type"), outputs=("output",),
    infer=_cast_like_rule)
def cast_like_15(input: np.ndarray, target_type: np.ndarray) -> np.ndarray:
    """CastLike-15: as Cast-13 to target_type's element type."""
    return _cast(input, _dtype_of_value(target_type))


def _dtype_of_value(value: np.ndarray) -> DType:
    if value.dtype == object or value.dtype.kind in "US":
        return DType.string
    return DType.from_numpy(value.dtype)


OPS = (cast, cast_19, cast_6, cast_1, cast_like, cast_like_19, cast_like_15)
