"""Resize (refmnn/ops/resize.py): every mode, coordinate transformation and nearest rounding,
scales and sizes, axes, keep_aspect_ratio_policy, antialias; Upsample (opset 9)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import ErrorSample, OpCase, Sample, SampleContext, Tol


def _f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
           "tf_crop_and_resize", "half_pixel_symmetric")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def resize_samples(ctx: SampleContext):
    x = ctx.make((1, 2, 4, 5))
    up, down = _f32(1, 1, 2, 1.5), _f32(1, 1, 0.5, 0.6)
    roi = _f32(0, 0, 0.1, 0.2, 1, 1, 0.9, 0.8)
    for mode in ("nearest", "linear", "cubic"):
        for coord in _COORDS:
            r = roi if coord == "tf_crop_and_resize" else None
            attrs = {"mode": mode, "coordinate_transformation_mode": coord}
            yield Sample((x, r, up), attrs, name=f"{mode}_{coord}_up")
            yield Sample((x, r, down), attrs, name=f"{mode}_{coord}_down")
    for rounding in _NEAREST:
        yield Sample((x, None, up), {"mode": "nearest", "nearest_mode": rounding},
                     name=f"nearest_{rounding}")
    yield Sample((x, None, None, _i64(1, 2, 7, 3)), {"mode": "linear"}, name="sizes")
    yield Sample((x, None, None, _i64(6, 9)), {"mode": "linear", "axes": (2, 3),
                                               "keep_aspect_ratio_policy": "not_smaller"},
                 name="sizes_not_smaller")
    yield Sample((x, None, None, _i64(6, 9)), {"mode": "nearest", "axes": (-2, -1),
                                               "keep_aspect_ratio_policy": "not_larger"},
                 name="sizes_not_larger")
    yield Sample((x, None, _f32(0.5, 0.5)), {"mode": "linear", "axes": (2, 3), "antialias": 1},
                 name="linear_antialias")
    yield Sample((x, None, _f32(1, 1, 0.6, 0.5)), {"mode": "cubic", "antialias": 1,
                                                   "cubic_coeff_a": -0.5}, name="cubic_antialias")
    yield Sample((x, None, up), {"mode": "cubic", "exclude_outside": 1}, name="cubic_exclude_outside")
    yield Sample((x, roi, up), {"mode": "linear", "coordinate_transformation_mode":
                                "tf_crop_and_resize", "extrapolation_value": -3.0},
                 name="extrapolation_value")
    yield Sample((ctx.make((2, 3, 5)), None, _f32(1, 1, 2.5)), {"mode": "linear"}, name="1d")
    yield Sample((ctx.make((1, 1, 3, 4, 2)), None, _f32(1, 1, 2, 0.5, 2)), {"mode": "linear"},
                 name="3d_trilinear")
    yield Sample((ctx.make((1, 3, 32, 32)), None, _f32(1, 1, 2, 2)), {"mode": "cubic"},
                 name="larger_image")


def resize_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((1, 1, 4, 4)), None, _f32(2, 2)), {"mode": "linear"},
                             name="scales_length_mismatch"), ShapeError, r".")


def upsample_samples(ctx: SampleContext):
    x = ctx.make((1, 2, 3, 4))
    yield Sample((x, _f32(1, 1, 2, 3)), name="nearest")
    yield Sample((x, _f32(1, 1, 2, 1.5)), {"mode": "linear"}, name="linear")
    yield Sample((x, _f32(1, 1, 1, 1)), name="identity")


_TYPES = (DType.float32, DType.float16, DType.float64)
_TOL = {DType.float16: Tol(2e-3, 2e-3, "a weighted sum of up to 16 taps (cubic) with weights "
                                       "computed in float32"),
        DType.float32: Tol(1e-5, 1e-5, "a weighted sum of up to 16 taps (cubic); antialias "
                                       "filters have more")}
CASES = (
    OpCase("Resize", dtypes=_TYPES, samples=resize_samples, errors=resize_errors, tolerance=_TOL,
           tags=("resize",)),
    OpCase("Resize", dtypes=(DType.uint8, DType.int8), samples=lambda ctx: [
        Sample((ctx.make((1, 1, 3, 4)), None, _f32(1, 1, 2, 2)), {"mode": "nearest"}, name="nearest"),
        Sample((ctx.make((1, 1, 3, 4)), None, _f32(1, 1, 2, 2)), {"mode": "linear"}, name="linear"),
    ], variant="int", tags=("resize",)),
    OpCase("Upsample", opset=9, dtypes=_TYPES, samples=upsample_samples, tolerance=_TOL,
           tags=("resize", "old-opset")),
)
