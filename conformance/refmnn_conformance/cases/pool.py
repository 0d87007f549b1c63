"""Pooling (refmnn/ops/pool.py): MaxPool and AveragePool with ceil_mode, pads, strides,
dilations, auto_pad and count_include_pad."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from refmnn_conformance.case import EXTREMAL, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS, prod

COMMON = (
    ("2d", (1, 2, 6, 6), {"kernel_shape": (2, 2)}),
    ("1d", (2, 3, 9), {"kernel_shape": (3,), "strides": (2,)}),
    ("3d", (1, 2, 4, 5, 6), {"kernel_shape": (2, 2, 3)}),
    ("strides", (1, 2, 9, 8), {"kernel_shape": (3, 3), "strides": (2, 3)}),
    ("pads", (1, 2, 5, 5), {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1)}),
    ("asymmetric_pads", (1, 1, 6, 5), {"kernel_shape": (3, 2), "pads": (0, 1, 2, 0)}),
    ("ceil_mode", (1, 2, 7, 7), {"kernel_shape": (3, 3), "strides": (2, 2), "ceil_mode": 1}),
    ("ceil_mode_pads", (1, 1, 6, 6), {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1),
                                      "ceil_mode": 1}),
    ("same_upper", (1, 2, 7, 6), {"kernel_shape": (3, 2), "strides": (2, 2), "auto_pad": "SAME_UPPER"}),
    ("same_lower", (1, 2, 7, 6), {"kernel_shape": (3, 2), "strides": (2, 2), "auto_pad": "SAME_LOWER"}),
    ("valid", (1, 2, 7, 6), {"kernel_shape": (3, 2), "auto_pad": "VALID"}),
    ("dilations", (1, 1, 8, 8), {"kernel_shape": (2, 2), "dilations": (2, 2)}),
    ("global_window", (2, 3, 4, 4), {"kernel_shape": (4, 4)}),
)


def maxpool_samples(ctx: SampleContext):
    for name, xs, attrs in COMMON:
        yield Sample((ctx.make(xs),), attrs, name=name)
    yield Sample((ctx.make((1, 2, 6, 6)),), {"kernel_shape": (3, 3), "strides": (2, 2)}, outputs=2,
                 name="with_indices")
    yield Sample((ctx.make((1, 1, 5, 4)),), {"kernel_shape": (2, 2), "storage_order": 1}, outputs=2,
                 name="indices_column_major")
    yield Sample((ctx.make((1, 2, 8, 8), EXTREMAL),), {"kernel_shape": (2, 2)}, name="extremal")


def avgpool_samples(ctx: SampleContext):
    for name, xs, attrs in COMMON:
        yield Sample((ctx.make(xs),), attrs, name=name)
    for name, xs, attrs in COMMON:
        if "pads" in attrs or attrs.get("auto_pad", "").startswith("SAME") or attrs.get("ceil_mode"):
            yield Sample((ctx.make(xs),), {**attrs, "count_include_pad": 1},
                         name=f"{name}_count_include_pad")


def _k(sample: Sample) -> int:
    return prod(sample.attrs["kernel_shape"])


CASES = (
    OpCase("MaxPool", dtypes=FLOATS + (DType.int8, DType.uint8), samples=maxpool_samples),
    OpCase("AveragePool", dtypes=FLOATS, samples=avgpool_samples, accumulates=_k,
           tags=("accumulates",)),
)


# ---------------------------------------------------------------------------------------------
# global pools, LpPool, MaxUnpool, MaxRoiPool


def global_samples(ctx: SampleContext):
    yield Sample((ctx.make((2, 3, 4, 5)),), name="2d")
    yield Sample((ctx.make((2, 3, 7)),), name="1d")
    yield Sample((ctx.make((1, 2, 3, 2, 4)),), name="3d")
    yield Sample((ctx.make((1, 4, 32, 32)),), name="larger")
    if ctx.is_float:
        yield Sample((ctx.make((1, 2, 4, 4), EXTREMAL),), name="extremal")


def global_lp_samples(ctx: SampleContext):
    yield Sample((ctx.make((2, 3, 4, 5)),), name="p2")
    yield Sample((ctx.make((2, 3, 4, 5)),), {"p": 1}, name="p1")
    yield Sample((ctx.make((1, 2, 6)),), {"p": 3}, name="p3_1d")


def lp_pool_samples(ctx: SampleContext):
    yield Sample((ctx.make((1, 2, 6, 6)),), {"kernel_shape": (2, 2)}, name="p2")
    yield Sample((ctx.make((1, 2, 7, 6)),), {"kernel_shape": (3, 2), "p": 1, "strides": (2, 2),
                                             "pads": (1, 0, 1, 0)}, name="p1_strides_pads")
    yield Sample((ctx.make((1, 1, 7, 7)),), {"kernel_shape": (3, 3), "strides": (2, 2),
                                             "ceil_mode": 1, "dilations": (1, 2)},
                 name="ceil_dilations")
    yield Sample((ctx.make((1, 2, 5, 6)),), {"kernel_shape": (2, 3), "auto_pad": "SAME_UPPER",
                                             "p": 3}, name="same_upper_p3")


def max_unpool_samples(ctx: SampleContext):
    x = ctx.make((1, 2, 2, 2))
    idx = np.array([[[[0, 3], [9, 14]], [[17, 18], [28, 31]]]], dtype=np.int64)
    yield Sample((x, idx), {"kernel_shape": (2, 2), "strides": (2, 2)}, name="basic")
    yield Sample((x, idx, np.array([1, 2, 5, 5], dtype=np.int64)),
                 {"kernel_shape": (2, 2), "strides": (2, 2)}, name="output_shape")


def max_roi_pool_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 8, 8))
    rois = ctx.array([[0, 0, 0, 4, 5], [1, 2, 1, 7, 7], [0, 3, 3, 3, 3]])
    yield Sample((x, rois), {"pooled_shape": (2, 3)}, name="basic")
    yield Sample((x, rois), {"pooled_shape": (3, 3), "spatial_scale": 0.5}, name="spatial_scale")


CASES = CASES + (
    OpCase("GlobalAveragePool", dtypes=FLOATS, samples=global_samples,
           accumulates=lambda s: prod(s.inputs[0].shape[2:]), tags=("accumulates",)),
    OpCase("GlobalMaxPool", dtypes=FLOATS, samples=global_samples),
    OpCase("GlobalLpPool", dtypes=(DType.float32, DType.float16, DType.float64),
           samples=global_lp_samples, accumulates=lambda s: prod(s.inputs[0].shape[2:]),
           tags=("accumulates",)),
    OpCase("LpPool", dtypes=(DType.float32, DType.float16, DType.float64), samples=lp_pool_samples,
           accumulates=_k, tags=("accumulates",)),
    OpCase("MaxUnpool", dtypes=(DType.float32, DType.float16, DType.float64),  # T1: floats
           samples=max_unpool_samples),
    OpCase("MaxRoiPool", dtypes=(DType.float32, DType.float64), samples=max_roi_pool_samples),
)
