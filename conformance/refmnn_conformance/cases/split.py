"""Split (refmnn/ops/split.py; Concat and Slice are in shape.py)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import ErrorSample, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS, INTS


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def split_samples(ctx: SampleContext):
    x = ctx.make((6, 4))
    yield Sample((x,), {"num_outputs": 3}, outputs=3, name="equal_parts")
    yield Sample((ctx.make((7, 2)),), {"num_outputs": 3}, outputs=3, name="uneven_last_smaller")
    yield Sample((x, _i64(1, 2, 3)), outputs=3, name="split_sizes")
    yield Sample((x, _i64(1, 3)), {"axis": 1}, outputs=2, name="axis1")
    yield Sample((x, _i64(0, 6)), outputs=2, name="zero_size_part")
    yield Sample((ctx.make((2, 3, 8)),), {"axis": -1, "num_outputs": 2}, outputs=2,
                 name="negative_axis")
    yield Sample((ctx.noncontiguous(x),), {"axis": 1, "num_outputs": 2}, outputs=2,
                 name="noncontiguous")


def split_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((6, 4)), _i64(2, 2)), outputs=2, name="sizes_do_not_sum"),
                      ShapeError, r"split")


def split11_samples(ctx: SampleContext):
    x = ctx.make((6, 4))
    yield Sample((x,), outputs=2, name="equal_parts_from_outputs")
    yield Sample((x,), {"split": (2, 4)}, outputs=2, name="split_attribute")
    yield Sample((x,), {"axis": 1, "split": (1, 1, 2)}, outputs=3, name="axis1")


CASES = (
    OpCase("Split", dtypes=FLOATS + INTS + (DType.bool,), samples=split_samples,
           errors=split_errors, tags=("movement",)),
    OpCase("Split", opset=11, dtypes=(DType.float32, DType.int64), samples=split11_samples,
           tags=("movement", "old-opset")),
)
