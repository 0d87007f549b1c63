"""Pooling (refmnn/ops/pool.py): MaxPool and AveragePool with ceil_mode, pads, strides,
dilations, auto_pad and count_include_pad."""

from __future__ import annotations

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
