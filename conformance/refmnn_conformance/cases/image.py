"""Image sampling (refmnn/ops/image.py): GridSample and AffineGrid."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from refmnn_conformance.case import UNIT, OpCase, Sample, SampleContext, Tol


def grid_sample_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 5, 6))
    grid = ctx.make((2, 4, 7, 2), UNIT) * ctx.scalar(1.2)   # some points fall outside [-1, 1]
    for mode in ("linear", "nearest", "cubic"):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                yield Sample((x, grid), {"mode": mode, "padding_mode": padding,
                                         "align_corners": align},
                             name=f"{mode}_{padding}_align{align}")
    yield Sample((ctx.make((1, 2, 3, 4, 5)), ctx.make((1, 2, 3, 2, 3), UNIT)), {"mode": "linear"},
                 name="volumetric")
    yield Sample((x, ctx.array(np.zeros((2, 1, 1, 2)))), name="centre_point")


def affine_grid_samples(ctx: SampleContext):
    theta = ctx.make((2, 2, 3), UNIT)
    yield Sample((theta, np.array([2, 3, 4, 5], dtype=np.int64)), name="2d")
    yield Sample((theta, np.array([2, 3, 4, 5], dtype=np.int64)), {"align_corners": 1},
                 name="2d_align_corners")
    yield Sample((ctx.make((1, 3, 4), UNIT), np.array([1, 2, 3, 4, 5], dtype=np.int64)),
                 name="3d")
    yield Sample((ctx.make((1, 3, 4), UNIT), np.array([1, 2, 2, 3, 1], dtype=np.int64)),
                 {"align_corners": 1}, name="3d_align_corners_one_wide")


_TYPES = (DType.float32, DType.float16, DType.float64)
_TOL = {DType.float16: Tol(3e-3, 3e-3, "grid coordinates are unnormalised and weighted in "
                                       "float32 before rounding"),
        DType.float32: Tol(1e-5, 1e-5, "unnormalising the grid loses a few ulp before weighting")}
CASES = (
    OpCase("GridSample", dtypes=_TYPES, samples=grid_sample_samples, tolerance=_TOL),
    OpCase("AffineGrid", dtypes=_TYPES, samples=affine_grid_samples, tolerance=_TOL),
)
