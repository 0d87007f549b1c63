"""Shape and movement ops (refmnn/ops/shape.py, and Transpose, Concat and Slice from layout.py and
split.py): Transpose, Reshape, Concat, Slice, Flatten, Squeeze, Unsqueeze, Expand, Tile, Shape,
Size and Identity."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError, ShapeError

from refmnn_conformance.case import EXTREMAL, ErrorSample, OpCase, Sample, SampleContext
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


# ---------------------------------------------------------------------------------------------
# Flatten, Squeeze, Unsqueeze, Expand, Tile, Shape, Size, Identity (refmnn/ops/shape.py)


def flatten_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 4, 5))
    for axis in (0, 1, 2, 4, -1, -3):
        yield Sample((x,), {"axis": axis}, name=f"axis{axis}".replace("-", "m"))
    yield Sample((ctx.make((0, 3, 2)),), {"axis": 1}, name="empty")
    yield Sample((ctx.noncontiguous(ctx.make((3, 4))),), name="noncontiguous")


def flatten_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)),), {"axis": 3}, name="axis_out_of_range"),
                      ShapeError, r"out of range")


def squeeze_samples(ctx: SampleContext):
    x = ctx.make((1, 3, 1, 4, 1))
    yield Sample((x,), name="all_unit_axes")
    yield Sample((x, _i64(0)), name="one_axis")
    yield Sample((x, _i64(-1, 2)), name="negative_axes")
    yield Sample((ctx.make((1,)),), name="to_scalar")
    yield Sample((ctx.make((3, 4)),), name="nothing_to_squeeze")
    yield Sample((ctx.make((0, 1, 2)), _i64(1)), name="empty")


def squeeze_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), _i64(0)), name="axis_not_one"), ShapeError, r"squeeze")


def unsqueeze_samples(ctx: SampleContext):
    x = ctx.make((3, 4))
    yield Sample((x, _i64(0)), name="front")
    yield Sample((x, _i64(2)), name="back")
    yield Sample((x, _i64(0, 3)), name="two_axes")
    yield Sample((x, _i64(-1)), name="negative_axis")
    yield Sample((x, _i64(3, 0)), name="unsorted_axes")
    yield Sample((ctx.make(()), _i64(0)), name="from_scalar")
    yield Sample((ctx.make((0, 2)), _i64(1)), name="empty")


def unsqueeze_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((3, 4)), _i64(0, 0)), name="duplicate_axes"),
                      ShapeError, r"axes")


def expand_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 1)), _i64(3, 4)), name="column")
    yield Sample((ctx.make((3, 1)), _i64(2, 1, 6)), name="more_dims")
    yield Sample((ctx.make((2, 3)), _i64(1, 1)), name="smaller_shape_keeps_input")
    yield Sample((ctx.make(()), _i64(2, 2)), name="from_scalar")
    yield Sample((ctx.make((1, 3)), _i64(0, 3)), name="to_empty")
    yield Sample((ctx.noncontiguous(ctx.make((1, 4))), _i64(3, 4)), name="noncontiguous")
    yield Sample((ctx.make((1, 64)), _i64(256, 64)), name="larger")


def expand_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), _i64(4, 3)), name="incompatible"),
                      ShapeError, r"broadcast|shape|incompatible")


def tile_samples(ctx: SampleContext):
    x = ctx.make((2, 3))
    yield Sample((x, _i64(2, 3)), name="both_axes")
    yield Sample((x, _i64(1, 1)), name="identity")
    yield Sample((x, _i64(0, 2)), name="zero_repeat")
    yield Sample((ctx.make((2, 1, 3)), _i64(1, 4, 2)), name="rank3")
    yield Sample((ctx.noncontiguous(x), _i64(2, 1)), name="noncontiguous")


def tile_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), _i64(2)), name="repeats_length_mismatch"),
                      ShapeError, r"repeats")


def shape_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 4, 5))
    yield Sample((x,), name="all")
    yield Sample((x,), {"start": 1}, name="start")
    yield Sample((x,), {"end": -1}, name="negative_end")
    yield Sample((x,), {"start": -3, "end": 3}, name="start_end")
    yield Sample((x,), {"start": 3, "end": 1}, name="empty_range")
    yield Sample((x,), {"start": -10, "end": 10}, name="clamped")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 3)),), name="empty_input")


def size_samples(ctx: SampleContext):
    yield Sample((ctx.make((2, 3, 4)),), name="rank3")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 3)),), name="empty")


def identity_samples(ctx: SampleContext):
    yield Sample((ctx.make((2, 3)),), name="matrix")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 3)),), name="empty")
    yield Sample((ctx.noncontiguous(ctx.make((3, 4))),), name="noncontiguous")
    if ctx.is_float:
        yield Sample((ctx.make((4, 16), EXTREMAL),), name="extremal")


_LESS_TYPES = (DType.float32, DType.float16, DType.int64, DType.int8, DType.bool)
CASES = CASES + (
    OpCase("Flatten", dtypes=_LESS_TYPES, samples=flatten_samples, errors=flatten_errors,
           tags=("movement",)),
    OpCase("Squeeze", dtypes=_LESS_TYPES, samples=squeeze_samples, errors=squeeze_errors,
           tags=("movement",)),
    OpCase("Unsqueeze", dtypes=_LESS_TYPES, samples=unsqueeze_samples, errors=unsqueeze_errors,
           tags=("movement",)),
    OpCase("Expand", dtypes=MOVEMENT_TYPES, samples=expand_samples, errors=expand_errors,
           tags=("movement", "broadcast")),
    OpCase("Tile", dtypes=MOVEMENT_TYPES, samples=tile_samples, errors=tile_errors,
           tags=("movement",)),
    OpCase("Shape", dtypes=(DType.float32, DType.int8, DType.bool), samples=shape_samples),
    OpCase("Size", dtypes=(DType.float32, DType.int64, DType.bool), samples=size_samples),
    OpCase("Identity", dtypes=MOVEMENT_TYPES, samples=identity_samples, tags=("movement",)),
)
