"""Cast and CastLike: conversion between every pair of ONNX element types.

The rules (ONNX Cast spec):

* float -> float: round to nearest even, once (float64 to bfloat16/float8/float4 and the wide
  integers to them go through a float32 rounded to odd, :mod:`refmnn.ops._round`); out of
  range gives +-inf (NaN stays NaN).
* float -> integer: truncation toward zero; out of range (and NaN) is undefined: here the
  value converts as NumPy/ml_dtypes do (wrapping for the 4/2-bit types).
* integer -> integer: keep the low bits, two's complement (200 int16 -> -56 int8).
* integer -> float: nearest value; out of range gives +inf.
* anything -> bool: nonzero is true (NaN too); bool -> number: 1 / 0.
* float8 targets (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ): with ``saturate=1`` (default) values
  beyond the largest finite value, infinities included, clamp to +-max; with ``saturate=0``
  they become NaN (E4M3FN, the FNUZ types) or +-inf (E5M2). FNUZ types have no -0 (it becomes
  +0). Rounding is to nearest even. Cast-19 to 23 (and CastLike): +-inf to an FNUZ type is
  NaN even with saturation (their table's "Inf" row; Cast-24 changed it to FLT_MAX).
* float8e8m0 (a power of two 2^(e-127), no sign, no zero): see :func:`_to_e8m0`.
* strings: numbers format as the shortest string that reads back as the same value in the
  source type, float32 for the floats narrower than it ("0.47892547", "1e-07", "65504.0",
  "inf", "-inf", "nan"; integers in decimal; bool as "True"/"False"); strings parse as
  decimal or scientific numbers, case-insensitive "inf", "+inf", "-inf", "nan" included, and
  round once from the literal's exact value, under ``saturate`` and ``round_mode`` as numbers
  do; a decimal string cast to an integer type truncates ("100.5" -> 100). Strings are NumPy
  object arrays of ``str``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np

from refmnn.dtypes import DType, is_narrow
from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._round import odd_float64, odd_float64_of_fraction, round_once
from refmnn.ops._schema import Attr, flag, op

_FLOAT8 = (DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2, DType.float8e5m2fnuz)
_FNUZ = (DType.float8e4m3fnuz, DType.float8e5m2fnuz)
_ROUNDED_ONCE = (*_FLOAT8, DType.bfloat16, DType.float4e2m1)
"""The targets ml_dtypes reaches through float32 (twice rounded from float64): see _round."""

# Cast-1 names its target with a string
_CAST1_NAMES = {"FLOAT": DType.float32, "UINT8": DType.uint8, "INT8": DType.int8,
                "UINT16": DType.uint16, "INT16": DType.int16, "INT32": DType.int32,
                "INT64": DType.int64, "STRING": DType.string, "BOOL": DType.bool,
                "FLOAT16": DType.float16, "DOUBLE": DType.float64, "UINT32": DType.uint32,
                "UINT64": DType.uint64}


def _to_string(x: np.ndarray) -> np.ndarray:
    """Numbers -> object array of str: the shortest string that reads back as the value in
    float32 (float16, bfloat16, float8, float4 -- whose own shortest form, "6.55e+04" for
    float16 65504, reads back as another float32), float64 or the integer type itself."""
    if x.dtype == object:
        return x.copy()
    if x.dtype == np.float16 or (is_narrow(x.dtype) and x.dtype.kind == "V"
                                 and DType.from_numpy(x.dtype).is_float):
        x = x.astype(np.float32)
    elif is_narrow(x.dtype):
        x = x.astype(np.int32)
    return x.astype(np.str_).astype(object)


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        return int(float(text))  # "100.5" -> 100, "1e3" -> 1000


def _parse_real(text: str, exact: bool) -> float:
    """A numeric literal as float64: nearest (``float``) or, with ``exact``, its exact
    decimal value rounded to odd (:func:`odd_float64_of_fraction`) so that a second rounding
    to a narrower type is a single rounding of the literal ("1.00000005960464477550" is
    just above float32's tie 1 + 2^-24 and must give 1 + 2^-23, not 1)."""
    value = float(text)
    if not exact or not math.isfinite(value):
        return value
    try:
        return odd_float64_of_fraction(Fraction(text))
    except ValueError:
        return value


def _from_string(x: np.ndarray, target: DType, saturate: int, round_mode: str,
                 fnuz_inf_nan: bool) -> np.ndarray:
    """Object/str array -> numbers of ``target`` (see the module docstring); float targets
    round the literal once, under ``saturate`` and ``round_mode`` as a number would."""
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
    exact = target != DType.float64
    reals = np.array([_parse_real(s, exact) for s in flat], dtype=np.float64).reshape(x.shape)
    return _cast_numeric(reals, target, saturate, round_mode, fnuz_inf_nan)


_E8M0_NAN, _E8M0_MAX_CODE, _E8M0_MIN_CODE = 0xFF, 0xFE, 0x00
_E8M0_MIN, _E8M0_MAX = 2.0 ** -127, 2.0 ** 127


def _to_e8m0(x: np.ndarray, saturate: int, round_mode: str) -> np.ndarray:
    """Real -> float8e8m0 (value 2^(code - 127), code 0..254; code 255 is NaN), the spec's
    table (Cast-24):

    | x                 | saturate + up | non-saturate + nearest |
    | 0                 | 0             | NaN                    |
    | NaN               | NaN           | NaN                    |
    | Inf               | E8M0_MAX      | NaN                    |
    | x > E8M0_MAX      | E8M0_MAX      | NaN                    |
    | x < E8M0_MIN      | E8M0_MIN      | NaN                    |

    ("0" under saturate + up is code 0, E8M0_MIN, as x < E8M0_MIN: the type has no zero.)
    The table tabulates two of the six (saturate, round_mode) pairs; its rows read as
    ``saturate`` alone deciding, as for the float8 types: a value out of [E8M0_MIN,
    E8M0_MAX] (zero and inf included), compared unrounded as the rows write x, clamps to the
    nearer end with saturation and is NaN without. In range, x in [2^e, 2^(e+1)) rounds
    ``up`` to 2^(e+1) unless x = 2^e, ``down`` to 2^e, ``nearest`` to 2^(e+1) from 1.5 x 2^e
    (the linear midpoint; a tie goes up, as in onnxruntime and onnx.reference). The
    exponent e and x's place against 2^e and 1.5 x 2^e are read exactly from float64 (every
    float type converts exactly; an integer past 2^53 is rounded to odd, which keeps both);
    2^-127 (a float32 subnormal) is code 0 in every mode. The sign is ignored (negative
    values are undefined; -0 unspecified: as 0).
    """
    if round_mode not in ("up", "down", "nearest"):
        raise ValueError(f"Cast round_mode must be 'up', 'down' or 'nearest', got {round_mode!r}")
    magnitude = np.abs(odd_float64(np.asarray(x)))
    with np.errstate(invalid="ignore"):
        fraction, exponent = np.frexp(magnitude)  # magnitude = fraction * 2^exponent
        low, high = magnitude < _E8M0_MIN, magnitude > _E8M0_MAX
    # fraction in [0.5, 1): fraction > 0.5 is above 2^e, fraction >= 0.75 at or past 1.5 x 2^e
    carry = {"up": fraction > 0.5, "down": np.zeros(fraction.shape, dtype=bool),
             "nearest": fraction >= 0.75}[round_mode]
    code = exponent.astype(np.int64) - 1 + carry + 127
    code = np.where(low, _E8M0_MIN_CODE if saturate else _E8M0_NAN, code)
    code = np.where(high, _E8M0_MAX_CODE if saturate else _E8M0_NAN, code)
    code = np.where(np.isnan(magnitude), _E8M0_NAN, code)
    return code.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def _cast_numeric(x: np.ndarray, target: DType, saturate: int, round_mode: str,
                  fnuz_inf_nan: bool = False) -> np.ndarray:
    """A real or bool array -> ``target`` (not string). The float8 types with ``saturate``
    clamp the unrounded value to +-largest (with ``fnuz_inf_nan``, Cast-19 to 23's table,
    +-inf to an FNUZ type is NaN instead); every narrow float target rounds once
    (:func:`round_once`)."""
    dtype = target.numpy
    if x.dtype == dtype and not (target in _FLOAT8 and saturate):
        return x.copy()  # a float8 cast to itself with saturate still maps +-inf to +-FLT_MAX
    if target == DType.float8e8m0:
        return _to_e8m0(x, saturate, round_mode)
    if target == DType.bool:
        return x.astype(np.float32) != 0 if is_narrow(x.dtype) else x != 0
    with np.errstate(invalid="ignore", over="ignore"):
        if target in _FLOAT8 and saturate:
            largest = float(ml_dtypes.finfo(dtype).max)
            wide = odd_float64(x)
            clamped = np.clip(wide, -largest, largest)
            if fnuz_inf_nan and target in _FNUZ:
                clamped = np.where(np.isinf(wide), np.nan, clamped)
            return round_once(clamped, dtype)
        if target in _ROUNDED_ONCE:
            return round_once(x, dtype)
        if is_narrow(x.dtype) and is_narrow(dtype):
            x = x.astype(np.float32 if DType.from_numpy(x.dtype).is_float else np.int32)
        return x.astype(dtype)


def _cast(x: np.ndarray, target: DType, saturate: int = 1, round_mode: str = "up",
          fnuz_inf_nan: bool = False) -> np.ndarray:
    """Cast ``x`` to ``target``; ``fnuz_inf_nan``: Cast-19 to 23's float8 table (with
    saturate, +-inf to E4M3FNUZ / E5M2FNUZ is NaN; Cast-24 made it +-FLT_MAX)."""
    if target == DType.string:
        return _to_string(x)
    if x.dtype == object or x.dtype.kind in "US":
        return _from_string(x, target, saturate, round_mode, fnuz_inf_nan)
    return _cast_numeric(x, target, saturate, round_mode, fnuz_inf_nan)


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
    ``saturate`` (21: int4/uint4, 23: float4e2m1, float8e8m0). Its float8 table differs in
    one row pair: with saturation "Inf | FLT_MAX | NaN | FLT_MAX | NaN" (E4M3FN, E4M3FNUZ,
    E5M2, E5M2FNUZ): +-inf to an FNUZ type is NaN (Cast-24: FLT_MAX)."""
    return _cast(input, DType.from_onnx(to), saturate, fnuz_inf_nan=True)


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
    """CastLike-19 (also 21, 23): as Cast-19 to target_type's element type (its table: +-inf
    to an FNUZ type with saturation is NaN)."""
    return _cast(input, _dtype_of_value(target_type), saturate, fnuz_inf_nan=True)


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
