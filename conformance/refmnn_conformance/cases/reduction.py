"""Reductions (refmnn/ops/reduction.py): ReduceSum, ReduceMean, ReduceMax at their newest
opsets, where ``axes`` is an input (an initializer in the one-node graph, as in real models)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError

from refmnn_conformance.case import EXTREMAL, ErrorSample, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS, prod


def _axes(*axes: int) -> np.ndarray:
    return np.array(axes, dtype=np.int64)


def reduce_samples(op: str):
    def samples(ctx: SampleContext):
        x = ctx.make((2, 3, 4))
        yield Sample((x, _axes(1)), name="axis1_keepdims")
        yield Sample((x, _axes(1)), {"keepdims": 0}, name="axis1")
        yield Sample((x, _axes(0, 2)), {"keepdims": 0}, name="two_axes")
        yield Sample((x, _axes(-1)), name="negative_axis")
        yield Sample((x,), name="all_axes_default")
        yield Sample((x, _axes()), name="empty_axes_reduces_all")
        yield Sample((x, _axes()), {"noop_with_empty_axes": 1}, name="empty_axes_noop")
        yield Sample((x,), {"noop_with_empty_axes": 1, "keepdims": 0}, name="omitted_axes_noop")
        yield Sample((ctx.make((3, 1000)), _axes(1)), name="long_axis")
        yield Sample((ctx.make(()),), name="rank0")
        yield Sample((ctx.noncontiguous(ctx.make((4, 6))), _axes(0)), name="noncontiguous")
        yield Sample((ctx.make((0, 3)), _axes(0)), name="empty_reduced_axis")
        yield Sample((ctx.make((0, 3)), _axes(1)), name="empty_kept_axis")
        if ctx.is_float:
            yield Sample((ctx.make((4, 16), EXTREMAL), _axes(1)), name="extremal")

    return samples


def reduce_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), _axes(2)), name="axis_out_of_range"),
                      RefmnnError, r"axis|axes|range")


def _k(sample: Sample) -> int:
    x = sample.inputs[0]
    if len(sample.inputs) < 2 or sample.inputs[1] is None or sample.inputs[1].size == 0:
        return max(1, x.size)
    return max(1, prod(tuple(x.shape[int(a)] for a in sample.inputs[1])))


INT_TYPES = (DType.int32, DType.int64)
CASES = (
    OpCase("ReduceSum", dtypes=FLOATS + INT_TYPES, samples=reduce_samples("ReduceSum"),
           errors=reduce_errors, accumulates=_k, tags=("reduction",)),
    OpCase("ReduceMean", dtypes=FLOATS + INT_TYPES, samples=reduce_samples("ReduceMean"),
           errors=reduce_errors, accumulates=_k, tags=("reduction",)),
    OpCase("ReduceMax", dtypes=FLOATS + INT_TYPES + (DType.uint8, DType.int8),
           samples=reduce_samples("ReduceMax"), errors=reduce_errors, tags=("reduction",)),
)
