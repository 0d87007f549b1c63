"""Layout ops (refmnn/ops/layout.py): DepthToSpace, SpaceToDepth and ReverseSequence
(Transpose is in shape.py)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import ErrorSample, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS

_TYPES = FLOATS + (DType.int64, DType.int8, DType.uint8, DType.bool)


def depth_to_space_samples(ctx: SampleContext):
    x = ctx.make((2, 8, 3, 2))
    yield Sample((x,), {"blocksize": 2}, name="dcr_default")
    yield Sample((x,), {"blocksize": 2, "mode": "CRD"}, name="crd")
    yield Sample((ctx.make((1, 9, 2, 2)),), {"blocksize": 3}, name="blocksize3")
    yield Sample((ctx.make((1, 4, 1, 1)),), {"blocksize": 2, "mode": "CRD"}, name="one_pixel")
    yield Sample((ctx.noncontiguous(ctx.make((1, 4, 2, 3))),), {"blocksize": 2},
                 name="noncontiguous")


def depth_to_space_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((1, 6, 2, 2)),), {"blocksize": 2}, name="channels_not_divisible"),
                      ShapeError, r"channels")


def space_to_depth_samples(ctx: SampleContext):
    yield Sample((ctx.make((2, 3, 4, 6)),), {"blocksize": 2}, name="blocksize2")
    yield Sample((ctx.make((1, 2, 6, 3)),), {"blocksize": 3}, name="blocksize3")
    yield Sample((ctx.make((1, 1, 2, 2)),), {"blocksize": 2}, name="to_one_pixel")


def space_to_depth_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((1, 2, 5, 4)),), {"blocksize": 2}, name="height_not_divisible"),
                      ShapeError, r"spatial")


def reverse_sequence_samples(ctx: SampleContext):
    x = ctx.make((4, 3, 2))
    yield Sample((x, np.array([4, 1, 2], dtype=np.int64)), name="time_major")
    yield Sample((ctx.make((3, 5)), np.array([5, 0, 3], dtype=np.int64)),
                 {"batch_axis": 0, "time_axis": 1}, name="batch_major_zero_length")
    yield Sample((x, np.array([1, 1, 1], dtype=np.int64)), name="length_one_is_identity")


CASES = (
    OpCase("DepthToSpace", dtypes=_TYPES, samples=depth_to_space_samples,
           errors=depth_to_space_errors, tags=("movement",)),
    OpCase("SpaceToDepth", dtypes=_TYPES, samples=space_to_depth_samples,
           errors=space_to_depth_errors, tags=("movement",)),
    OpCase("ReverseSequence", dtypes=_TYPES, samples=reverse_sequence_samples, tags=("movement",)),
)
