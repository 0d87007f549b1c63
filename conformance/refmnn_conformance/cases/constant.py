"""Generators (refmnn/ops/constant.py): Constant, ConstantOfShape, EyeLike, Range and Trilu."""

from __future__ import annotations

import numpy as np
import onnx

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import EXTREMAL, ErrorSample, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS, INTS


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def constant_of_shape_samples(ctx: SampleContext):
    value = ctx.array([3])  # a tensor attribute is an ndarray in a refmnn graph
    yield Sample((_i64(2, 3),), {"value": value}, name="matrix")
    yield Sample((_i64(4),), {"value": value}, name="vector")
    yield Sample((_i64(),), {"value": value}, name="rank0")
    yield Sample((_i64(0, 3),), {"value": value}, name="empty")


def constant_of_shape_default(ctx: SampleContext):
    yield Sample((_i64(2, 3),), name="float_zeros")


def eyelike_samples(ctx: SampleContext):
    for name, shape, k in (("square", (4, 4), 0), ("wide_k1", (3, 5), 1), ("tall_km2", (5, 3), -2),
                           ("k_past_edge", (3, 3), 4), ("empty", (0, 3), 0)):
        yield Sample((ctx.make(shape),), {"k": k}, name=name)
    yield Sample((ctx.make((3, 4)),), {"dtype": int(onnx.TensorProto.INT32)}, name="dtype_attr")


def range_samples(ctx: SampleContext):
    s = ctx.scalar
    if ctx.is_float:
        yield Sample((s(0.5), s(3.0), s(0.25)), name="fractional_delta")
        yield Sample((s(3.0), s(-2.0), s(-0.75)), name="negative_delta")
        yield Sample((s(1.0), s(1.0), s(1.0)), name="empty")
        yield Sample((s(0.0), s(1.0), s(0.1)), name="rounding_count")
    else:
        signed = np.iinfo(ctx.dtype).min < 0
        yield Sample((s(1), s(10), s(3)), name="step3")
        yield Sample((s(5), s(5), s(1)), name="empty")
        if signed:
            yield Sample((s(5), s(-6), s(-2)), name="negative_delta")


def range_errors(ctx: SampleContext):
    s = ctx.scalar
    yield ErrorSample(Sample((s(0), s(5), s(0)), name="zero_delta"), ShapeError, r"delta")


def trilu_samples(ctx: SampleContext):
    x = ctx.make((4, 5))
    yield Sample((x,), name="upper")
    yield Sample((x,), {"upper": 0}, name="lower")
    for k in (1, -2, 7, -7):
        yield Sample((x, _i64(k)), name=f"upper_k{k}".replace("-", "m"))
        yield Sample((x, _i64(k)), {"upper": 0}, name=f"lower_k{k}".replace("-", "m"))
    yield Sample((ctx.make((2, 3, 3)), _i64(-1)), {"upper": 0}, name="batched")
    yield Sample((ctx.make((0, 3)),), name="empty")
    yield Sample((ctx.noncontiguous(ctx.make((3, 4))),), name="noncontiguous")
    if ctx.is_float:
        yield Sample((ctx.make((8, 8), EXTREMAL),), name="extremal")


_RANGE_TYPES = (DType.float32, DType.float64, DType.int32, DType.int64, DType.int16, DType.float16)
CASES = (
    OpCase("ConstantOfShape", dtypes=(DType.float32, DType.int64, DType.int8, DType.bool,
                                      DType.float16), samples=constant_of_shape_samples),
    OpCase("ConstantOfShape", dtypes=(DType.float32,), samples=constant_of_shape_default,
           variant="default_value"),
    OpCase("EyeLike", dtypes=(DType.float32, DType.float16, DType.int64, DType.int32, DType.bool),
           samples=eyelike_samples),
    OpCase("Range", dtypes=_RANGE_TYPES, samples=range_samples, errors=range_errors),
    OpCase("Trilu", dtypes=FLOATS + INTS + (DType.bool,), samples=trilu_samples,
           tags=("movement",)),
)
