"""Cast (refmnn/ops/cast.py): float <-> int, narrowing floats, float8 with and without
saturation. A cast rounds once (to nearest, ties to even): results are judged exactly."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import FLOAT8, DType

from refmnn_conformance.case import EXTREMAL, SMALL_INT, OpCase, Sample, SampleContext, Tol

EXACT = "a cast rounds once, to nearest with ties to even (float8: as the spec's tables): one right answer"


def _to(dtype: DType) -> dict:
    return {"to": dtype.value}


def cast_float_samples(ctx: SampleContext):
    x = ctx.make((4, 6))
    for target in (DType.float32, DType.float16, DType.bfloat16, DType.float64):
        if target.numpy != ctx.dtype:
            yield Sample((x,), _to(target), name=f"to_{target.name}")
            yield Sample((ctx.make((8, 8), EXTREMAL),), _to(target), name=f"extremal_to_{target.name}")
    # float -> int truncates toward zero (values kept inside the target's range)
    values = ctx.array([-2.9, -2.5, -0.5, -0.0, 0.5, 1.5, 2.5, 3.99, 100.0, -100.0])
    for target in (DType.int32, DType.int64, DType.int8):
        yield Sample((values,), _to(target), name=f"to_{target.name}")
    yield Sample((ctx.array([0.0, -0.0, 1.0, np.nan, -3.0, np.inf]),), _to(DType.bool), name="to_bool")
    yield Sample((ctx.make((0, 3)),), _to(DType.int64), name="empty")
    if ctx.dtype == np.float32:
        big = ctx.array([0.0, 1.0, -1.0, 300.0, 448.0, 449.0, 465.0, 1e6, -1e6, 57344.0, 61440.0,
                         1e-3, 1e-9, np.inf, -np.inf, np.nan])
        for target in sorted(FLOAT8 - {DType.float8e8m0}, key=lambda d: d.value):
            yield Sample((big,), {**_to(target), "saturate": 1}, name=f"to_{target.name}_saturate")
            yield Sample((big,), {**_to(target), "saturate": 0}, name=f"to_{target.name}_no_saturate")
        yield Sample((ctx.make((6, 7)),), _to(DType.float8e4m3fn), name="random_to_float8e4m3fn")


def cast_int_samples(ctx: SampleContext):
    x = ctx.make((4, 6), EXTREMAL)
    for target in (DType.float32, DType.float16, DType.float64, DType.int64, DType.int8, DType.uint8,
                   DType.bool):
        if target.numpy != ctx.dtype:
            yield Sample((x,), _to(target), name=f"to_{target.name}")
    yield Sample((ctx.make((3, 3), SMALL_INT),), _to(DType.bfloat16), name="to_bfloat16")


def cast_bool_samples(ctx: SampleContext):
    x = ctx.make((3, 5))
    for target in (DType.float32, DType.float16, DType.int64, DType.uint8):
        yield Sample((x,), _to(target), name=f"to_{target.name}")


_EXACT_TOL = {d: Tol(0.0, 0.0, EXACT) for d in
              (DType.float32, DType.float16, DType.bfloat16, DType.float64, *sorted(FLOAT8, key=lambda d: d.value))}

CASES = (
    OpCase("Cast", dtypes=(DType.float32, DType.float16, DType.bfloat16, DType.float64),
           samples=cast_float_samples, tolerance=_EXACT_TOL, variant="from_float"),
    OpCase("Cast", dtypes=(DType.int32, DType.int64, DType.int8, DType.uint8),
           samples=cast_int_samples, tolerance=_EXACT_TOL, variant="from_int"),
    OpCase("Cast", dtypes=(DType.bool,), samples=cast_bool_samples, tolerance=_EXACT_TOL,
           variant="from_bool"),
)
