"""Activations and Softmax (refmnn/ops/activation.py)."""

from __future__ import annotations

from refmnn.dtypes import DType

from refmnn_conformance.case import EXTREMAL, UNIT, OpCase, Sample, SampleContext, Tol
from refmnn_conformance.cases._common import FLOATS, prod


def unary_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 7)),), name="basic")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 4)),), name="empty")
    yield Sample((ctx.noncontiguous(ctx.make((4, 6))),), name="noncontiguous")
    yield Sample((ctx.make((2, 3, 5, 7), UNIT),), name="unit")
    yield Sample((ctx.make((6, 16), EXTREMAL),), name="extremal")
    yield Sample((ctx.array([-0.0, 0.0, -1e-30, 1e-30]),), name="signed_zeros")


def sigmoid_samples(ctx: SampleContext):
    yield from unary_samples(ctx)
    yield Sample((ctx.array([-100.0, -30.0, -10.0, 10.0, 30.0, 100.0]),), name="saturation")


def softmax_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 5))
    for axis in (-1, 0, 1, 2):
        yield Sample((x,), {"axis": axis}, name=f"axis{axis}".replace("-", "m"))
    yield Sample((ctx.make((4, 1000)),), {"axis": -1}, name="long_row")
    yield Sample((ctx.make((3, 0)),), {"axis": -1}, name="zero_size_axis")
    yield Sample((ctx.make((0, 3)),), {"axis": -1}, name="zero_size_batch")
    yield Sample((ctx.array([[1000.0, 1000.0, -1000.0], [-1e4, -1e4, -1e4]]),), {"axis": -1},
                 name="large_magnitude")
    yield Sample((ctx.make((4, 16), EXTREMAL),), {"axis": -1}, name="extremal")
    yield Sample((ctx.noncontiguous(ctx.make((3, 6))),), {"axis": 0}, name="noncontiguous")


def softmax11_samples(ctx: SampleContext):
    """Softmax-11 coerces the input to 2-D at ``axis``: rows are the flattened trailing dims."""
    x = ctx.make((2, 3, 4))
    for axis in (0, 1, 2, -1):
        yield Sample((x,), {"axis": axis}, name=f"coerce2d_axis{axis}".replace("-", "m"))
    yield Sample((x,), name="default_axis1")


def _row(sample: Sample) -> int:
    x = sample.inputs[0]
    axis = sample.attrs.get("axis", -1)
    return x.shape[axis] if x.ndim else 1


def _coerced_row(sample: Sample) -> int:
    x = sample.inputs[0]
    return prod(x.shape[sample.attrs.get("axis", 1):])


_SOFTMAX_TOL = {DType.float16: Tol(2e-3, 1e-5, "exp, sum and divide each round once in float32 "
                                                "before the final rounding to float16")}

CASES = (
    OpCase("Relu", dtypes=FLOATS + (DType.int32, DType.int8, DType.int64), samples=unary_samples),
    OpCase("Sigmoid", dtypes=FLOATS, samples=sigmoid_samples),
    OpCase("Softmax", dtypes=FLOATS, samples=softmax_samples, accumulates=_row,
           tolerance=_SOFTMAX_TOL, tags=("reduction",)),
    OpCase("Softmax", opset=11, dtypes=(DType.float32, DType.float64), samples=softmax11_samples,
           accumulates=_coerced_row,
           tags=("reduction", "old-opset")),
)
