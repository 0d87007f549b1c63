"""Padding (refmnn/ops/pad.py): Pad in every mode (and opset 2's attribute form), CenterCropPad."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import EXTREMAL, ErrorSample, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def pad_samples(ctx: SampleContext):
    x = ctx.make((3, 4))
    value = ctx.scalar(2)
    yield Sample((x, _i64(1, 2, 0, 1)), name="constant_zero")
    yield Sample((x, _i64(1, 2, 0, 1), value), name="constant_value")
    yield Sample((x, _i64(0, -1, 1, -2), value), name="negative_pads_crop")
    for mode in ("reflect", "edge", "wrap"):
        yield Sample((x, _i64(2, 1, 1, 3)), {"mode": mode}, name=mode)
        yield Sample((ctx.make((2, 3, 5)), _i64(1, 2), None, _i64(-1)), {"mode": mode},
                     name=f"{mode}_axes")
    yield Sample((ctx.make((2, 3, 4, 5)), _i64(1, 1, 2, 0), value, _i64(1, 3)),
                 name="constant_axes")
    yield Sample((ctx.make(()), _i64()), name="rank0")
    yield Sample((ctx.make((0, 3)), _i64(1, 0, 1, 0), value), name="empty_input")
    yield Sample((ctx.noncontiguous(x), _i64(1, 1, 1, 1)), {"mode": "edge"}, name="noncontiguous")
    yield Sample((ctx.make((1, 3, 64, 64)), _i64(0, 0, 3, 3, 0, 0, 3, 3)), {"mode": "reflect"},
                 name="larger_image")
    if ctx.is_float:
        yield Sample((ctx.make((4, 8), EXTREMAL), _i64(1, 1, 1, 1)), {"mode": "reflect"},
                     name="extremal")


def pad_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((3, 4)), _i64(1, 1)), name="pads_length_mismatch"),
                      ShapeError, r"pads")
    yield ErrorSample(Sample((ctx.make((2, 4)), _i64(-3, 0, 0, 0)), name="crops_more_than_axis"),
                      ShapeError, r"remove more")


def pad2_samples(ctx: SampleContext):
    x = ctx.make((3, 4))
    yield Sample((x,), {"pads": (1, 0, 2, 1)}, name="constant")
    yield Sample((x,), {"pads": (1, 0, 2, 1), "value": 1.5}, name="value_attribute")
    yield Sample((x,), {"pads": (1, 1, 1, 1), "mode": "reflect"}, name="reflect")
    yield Sample((x,), {"pads": (0, 2, 1, 0), "mode": "edge"}, name="edge")


def center_crop_pad_samples(ctx: SampleContext):
    yield Sample((ctx.make((5, 6, 3)), _i64(3, 8, 3)), name="crop_and_pad")
    yield Sample((ctx.make((4, 4, 2)), _i64(7, 2)), {"axes": (0, 1)}, name="axes")
    yield Sample((ctx.make((3, 5, 5)), _i64(4, 3)), {"axes": (-2, -1)}, name="negative_axes")
    yield Sample((ctx.make((3, 4)), _i64(3, 4)), name="unchanged")


_PAD_TYPES = FLOATS + (DType.int64, DType.int32, DType.int8, DType.uint8)
CASES = (
    OpCase("Pad", dtypes=_PAD_TYPES, samples=pad_samples, errors=pad_errors, tags=("movement",)),
    OpCase("Pad", opset=2, dtypes=(DType.float32, DType.float16, DType.float64),
           samples=pad2_samples, tags=("movement", "old-opset")),
    OpCase("CenterCropPad", dtypes=(DType.float32, DType.int64, DType.uint8),
           samples=center_crop_pad_samples, tags=("movement",)),
)
