"""Shape and movement ops (refmnn/ops/shape.py): Transpose, Reshape, Concat, Slice."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError, ShapeError

from refmnn_conformance.case import ErrorSample, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS, INTS

MOVEMENT_TYPES = FLOATS + INTS + (DType.bool,)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def transpose_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 4))
    yield Sample((x,), name="default_reverses")
    yield Sample((x,), {"perm": (1, 0, 2)}, name="perm_102")
    yield Sample((x,), {"perm": (2, 0, 1)}, name="perm_201")
    yield Sample((ctx.make((2, 3, 4, 5)),), {"perm": (0, 2, 3, 1)}, name="nchw_to_nhwc")
    yield Sample((ctx.make((5,)),), name="rank1")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 3)),), name="empty")
    yield Sample((ctx.noncontiguous(ctx.make((3, 4))),), name="noncontiguous")


def transpose_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)),), {"perm": (0, 0)}, name="bad_perm"),
                      RefmnnError, r"perm")


def reshape_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 4))
    yield Sample((x, _i64(4, 6)), name="plain")
    yield Sample((x, _i64(-1, 4)), name="infer_dim")
    yield Sample((x, _i64(0, -1)), name="copy_dim")
    yield Sample((x, _i64(24)), name="flatten")
    yield Sample((ctx.make((1,)), _i64()), name="to_scalar")
    yield Sample((ctx.make((0, 3)), _i64(3, 0)), {"allowzero": 1}, name="allowzero")
    yield Sample((ctx.make((0, 3)), _i64(0, 3)), name="empty_copy_dim")
    yield Sample((ctx.noncontiguous(ctx.make((4, 6))), _i64(3, 8)), name="noncontiguous")


def reshape_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), _i64(4, 2)), name="impossible_shape"),
                      ShapeError, r"reshape|shape")
    yield ErrorSample(Sample((ctx.make((2, 3)), _i64(-1, -1)), name="two_minus_ones"),
                      RefmnnError, r"-1")


def concat_samples(ctx: SampleContext):
    yield Sample((ctx.make((2, 3)), ctx.make((4, 3))), {"axis": 0}, name="axis0")
    yield Sample((ctx.make((2, 3)), ctx.make((2, 1)), ctx.make((2, 5))), {"axis": 1}, name="three_inputs")
    yield Sample((ctx.make((2, 3, 4)), ctx.make((2, 3, 2))), {"axis": -1}, name="negative_axis")
    yield Sample((ctx.make((2, 3)),), {"axis": 0}, name="single_input")
    yield Sample((ctx.make((0, 3)), ctx.make((2, 3))), {"axis": 0}, name="empty_input")
    yield Sample((ctx.noncontiguous(ctx.make((2, 4))), ctx.make((1, 4))), {"axis": 0}, name="noncontiguous")


def concat_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), ctx.make((2, 4))), {"axis": 0}, name="mismatched_dims"),
                      ShapeError, r"(?i)sizes differ|shape|dim")


def slice_samples(ctx: SampleContext):
    x = ctx.make((5, 6, 7))
    yield Sample((x, _i64(1), _i64(4)), name="first_axis")
    yield Sample((x, _i64(1, 2), _i64(4, 6), _i64(1, 2)), name="axes")
    yield Sample((x, _i64(0, 1), _i64(5, 7), _i64(1, 2), _i64(2, 3)), name="steps")
    yield Sample((x, _i64(-1), _i64(-6), _i64(0), _i64(-1)), name="negative_step")
    yield Sample((x, _i64(-3), _i64(2**62), _i64(2)), name="clamped_ends")
    yield Sample((x, _i64(3), _i64(1), _i64(0)), name="empty_result")
    yield Sample((x, _i64(0), _i64(-1), _i64(-1)), name="negative_axis")
    yield Sample((x, _i64(0, 0), _i64(2, 3), _i64(0, 2)), name="two_axes")
    yield Sample((ctx.noncontiguous(ctx.make((4, 6))), _i64(1), _i64(3)), name="noncontiguous")


CASES = (
    OpCase("Transpose", dtypes=MOVEMENT_TYPES, samples=transpose_samples, errors=transpose_errors,
           tags=("movement",)),
    OpCase("Reshape", dtypes=MOVEMENT_TYPES, samples=reshape_samples, errors=reshape_errors,
           tags=("movement",)),
    OpCase("Concat", dtypes=MOVEMENT_TYPES, samples=concat_samples, errors=concat_errors,
           tags=("movement",)),
    OpCase("Slice", dtypes=MOVEMENT_TYPES, samples=slice_samples, tags=("movement",)),
)
