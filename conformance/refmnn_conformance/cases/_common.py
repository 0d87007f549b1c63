"""Dtype sets and small helpers shared by the case modules."""

from __future__ import annotations

import math

from refmnn.dtypes import DType

FLOATS = (DType.float32, DType.float16, DType.bfloat16, DType.float64)
"""The float types every float op is checked in."""

SIGNED = (DType.int32, DType.int64, DType.int8)
UNSIGNED = (DType.uint8,)
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
ALL_TYPES = NUMERIC + (DType.bool,)


def prod(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
