"""Indexing (refmnn/ops/indexing.py): Gather, GatherElements, GatherND, ScatterElements,
ScatterND, TensorScatter, OneHot, NonZero, Compress, Unique and TopK."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import OpError, RefmnnError, ShapeError

from refmnn_conformance.case import (
    EXTREMAL,
    SMALL_INT,
    ErrorSample,
    OpCase,
    Sample,
    SampleContext,
)
from refmnn_conformance.cases._common import FLOATS


def gather_samples(ctx: SampleContext):
    x = ctx.make((5, 4, 3))
    yield Sample((x, np.array([0, 4, 2], dtype=np.int64)), name="axis0")
    yield Sample((x, np.array([[1, 3], [0, 0]], dtype=np.int64)), {"axis": 1}, name="matrix_indices")
    yield Sample((x, np.array(2, dtype=np.int64)), {"axis": 2}, name="scalar_index")
    yield Sample((x, np.array([-1, -5], dtype=np.int64)), name="negative_indices")
    yield Sample((x, np.array([1, 0], dtype=np.int32)), {"axis": -1}, name="int32_indices")
    yield Sample((x, np.zeros((0,), dtype=np.int64)), name="no_indices")
    yield Sample((ctx.noncontiguous(ctx.make((4, 6))), np.array([3, 1], dtype=np.int64)),
                 name="noncontiguous")


def gather_errors(ctx: SampleContext):
    x = ctx.make((3, 4))
    yield ErrorSample(Sample((x, np.array([3], dtype=np.int64)), name="index_out_of_range"),
                      OpError, r"out of range|bounds|index")
    yield ErrorSample(Sample((x, np.array([-4], dtype=np.int64)), name="negative_out_of_range"),
                      RefmnnError, r"out of range|bounds|index")


CASES = (
    OpCase("Gather", dtypes=FLOATS + (DType.int64, DType.int32, DType.uint8, DType.bool),
           samples=gather_samples, errors=gather_errors, tags=("movement",)),
)


# ---------------------------------------------------------------------------------------------
# the element-wise and N-d gathers and scatters, OneHot, NonZero, Compress, Unique, TopK


def _i64(values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def gather_elements_samples(ctx: SampleContext):
    x = ctx.make((3, 4))
    yield Sample((x, _i64([[0, 2, 1, 0], [2, 2, 0, 1]])), name="axis0")
    yield Sample((x, _i64([[3, 0], [1, 1], [-1, -4]])), {"axis": 1}, name="axis1_negative_indices")
    yield Sample((ctx.make((2, 3, 4)), ctx.rng.integers(0, 3, (2, 2, 4)).astype(np.int32)),
                 {"axis": 1}, name="rank3_int32")
    yield Sample((x, np.zeros((0, 4), dtype=np.int64)), name="no_indices")
    yield Sample((ctx.noncontiguous(x), _i64([[1, 0, 2, 1]])), name="noncontiguous")


def gather_elements_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((3, 4)), _i64([[3, 0, 0, 0]])), name="index_out_of_range"),
                      OpError, r"out of range|bounds|index")


def gather_nd_samples(ctx: SampleContext):
    x = ctx.make((3, 4, 2))
    yield Sample((x, _i64([[0, 1], [2, 3]])), name="pairs")
    yield Sample((x, _i64([[0], [2]])), name="slices")
    yield Sample((x, _i64([[0, 1, 1], [-1, -1, 0]])), name="elements_negative")
    yield Sample((ctx.make((2, 3, 4)), _i64([[1], [0]])), {"batch_dims": 1}, name="batch_dims")
    yield Sample((x, np.zeros((0, 2), dtype=np.int64)), name="no_indices")


def gather_nd_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((3, 4)), _i64([[3, 0]])), name="index_out_of_range"),
                      OpError, r"out of range|bounds|index")


def scatter_elements_samples(ctx: SampleContext):
    x = ctx.make((3, 4))
    idx = _i64([[1, 0, 2, 0], [2, 2, 0, 1]])
    yield Sample((x, idx, ctx.make((2, 4))), name="axis0")
    yield Sample((x, _i64([[3, -1], [0, 1]]), ctx.make((2, 2))), {"axis": 1},
                 name="axis1_negative_indices")
    for reduction in ("add", "mul", "max", "min"):
        dup = _i64([[1, 1, 1, 1], [1, 1, 1, 1]])
        yield Sample((x, dup, ctx.make((2, 4), SMALL_INT)), {"reduction": reduction},
                     name=f"duplicates_{reduction}")
    yield Sample((x, np.zeros((0, 4), dtype=np.int64), ctx.make((0, 4))), name="no_updates")


def scatter_elements_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((3, 4)), _i64([[3]]), ctx.make((1, 1))),
                             name="index_out_of_range"), OpError, r"out of range|bounds|index")


def scatter_nd_samples(ctx: SampleContext):
    x = ctx.make((4, 3, 2))
    yield Sample((x, _i64([[1], [3]]), ctx.make((2, 3, 2))), name="slices")
    yield Sample((x, _i64([[0, 1, 1], [3, 2, 0]]), ctx.make((2,))), name="elements")
    yield Sample((x, _i64([[-1, 0]]), ctx.make((1, 2))), name="negative_index")
    for reduction in ("add", "mul", "max", "min"):
        yield Sample((x, _i64([[1], [1], [2]]), ctx.make((3, 3, 2), SMALL_INT)),
                     {"reduction": reduction}, name=f"duplicates_{reduction}")


def scatter_nd_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((4, 3)), _i64([[4]]), ctx.make((1, 3))),
                             name="index_out_of_range"), OpError, r"out of range|bounds|index")


def onehot_samples(ctx: SampleContext):
    values = ctx.array([0, 1], dtype=ctx.dtype)
    yield Sample((_i64([0, 2, 1, 4]), _i64(5), values), name="basic")
    yield Sample((_i64([[0, -1], [3, 2]]), _i64(4), values), {"axis": 0}, name="axis0_negative")
    yield Sample((np.array([1.0, 2.7, 0.0], dtype=np.float32), np.array(3.0, dtype=np.float32),
                  ctx.array([-1, 5])), {"axis": 1}, name="float_indices_and_depth")
    yield Sample((_i64([0, 7, -9]), _i64(3), values), name="out_of_range_all_off")
    yield Sample((np.zeros((0,), dtype=np.int64), _i64(3), values), name="empty")


def nonzero_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 4), SMALL_INT),), name="matrix")
    yield Sample((ctx.make((2, 3, 4), SMALL_INT),), name="rank3")
    yield Sample((ctx.make((5,), SMALL_INT),), name="vector")
    yield Sample((ctx.scalar(1),), name="rank0")
    yield Sample((ctx.make((0, 3)),), name="empty")
    yield Sample((np.zeros((3, 3), dtype=ctx.dtype),), name="all_zero")
    if ctx.is_float:
        yield Sample((ctx.array([-0.0, np.nan, 0.0, np.inf]),), name="nan_and_negative_zero")


def compress_samples(ctx: SampleContext):
    x = ctx.make((3, 4))
    yield Sample((x, np.array([True, False, True])), {"axis": 0}, name="axis0")
    yield Sample((x, np.array([False, True])), {"axis": 1}, name="short_condition")
    yield Sample((x, np.array([True, False, True, True, False])), name="flattened")
    yield Sample((x, np.array([False, False, False])), {"axis": 0}, name="none_selected")
    yield Sample((x, np.array([True, True, False, True])), {"axis": -1}, name="negative_axis")


def unique_samples(ctx: SampleContext):
    x = ctx.array([2, 1, 1, 3, 4, 3, 2, 0])
    yield Sample((x,), outputs=4, name="flattened_sorted")
    yield Sample((x,), {"sorted": 0}, outputs=4, name="first_occurrence_order")
    rows = ctx.array([[1, 0, 0], [1, 0, 0], [2, 3, 4], [0, 1, 1]])
    yield Sample((rows,), {"axis": 0}, outputs=4, name="unique_rows")
    yield Sample((rows,), {"axis": 1, "sorted": 0}, outputs=4, name="unique_columns")
    yield Sample((ctx.make((0,)),), outputs=4, name="empty")
    yield Sample((ctx.make((3, 4), SMALL_INT),), outputs=1, name="values_only")


def topk_samples(ctx: SampleContext):
    x = ctx.make((3, 7))
    yield Sample((x, _i64([3])), outputs=2, name="largest")
    yield Sample((x, _i64([3])), {"largest": 0}, outputs=2, name="smallest")
    yield Sample((ctx.make((4, 3, 5)), _i64([2])), {"axis": 1}, outputs=2, name="axis1")
    yield Sample((x, _i64([7])), outputs=2, name="k_is_axis_length")
    yield Sample((x, _i64([0])), outputs=2, name="k0")
    ties = ctx.array([[1, 3, 3, 2, 3], [0, 0, 0, 0, 0]])
    yield Sample((ties, _i64([2])), outputs=2, name="ties_lower_index_first")
    yield Sample((ties, _i64([2])), {"largest": 0}, outputs=2, name="ties_smallest")
    yield Sample((ctx.make((2, 2048)), _i64([5])), outputs=2, name="long_axis")
    yield Sample((ctx.noncontiguous(ctx.make((3, 6))), _i64([2])), outputs=2, name="noncontiguous")
    if ctx.is_float:
        yield Sample((ctx.make((2, 16), EXTREMAL), _i64([4])), outputs=2, name="extremal")


def topk_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((3, 4)), _i64([5])), outputs=2, name="k_above_axis_length"),
                      ShapeError, r"exceeds")


def tensor_scatter_samples(ctx: SampleContext):
    cache = ctx.make((2, 3, 6, 4))
    yield Sample((cache, ctx.make((2, 3, 2, 4)), _i64([1, 3])), name="linear")
    yield Sample((cache, ctx.make((2, 3, 2, 4))), name="default_write_index_zero")
    yield Sample((cache, ctx.make((2, 3, 3, 4)), _i64([4, 5])), {"mode": "circular"},
                 name="circular_wraps")
    yield Sample((ctx.make((2, 5, 3)), ctx.make((2, 1, 3)), _i64([0, 4])), {"axis": 1},
                 name="axis1")


_INDEX_TYPES = FLOATS + (DType.int64, DType.int32, DType.uint8)
_TOPK_TYPES = FLOATS + (DType.int64, DType.int32, DType.int8, DType.uint8)
CASES = CASES + (
    OpCase("GatherElements", dtypes=_INDEX_TYPES + (DType.bool,), samples=gather_elements_samples,
           errors=gather_elements_errors, tags=("movement",)),
    OpCase("GatherND", dtypes=_INDEX_TYPES + (DType.bool,), samples=gather_nd_samples,
           errors=gather_nd_errors, tags=("movement",)),
    OpCase("ScatterElements", dtypes=_INDEX_TYPES, samples=scatter_elements_samples,
           errors=scatter_elements_errors, tags=("movement",)),
    OpCase("ScatterND", dtypes=_INDEX_TYPES, samples=scatter_nd_samples, errors=scatter_nd_errors,
           tags=("movement",)),
    OpCase("OneHot", dtypes=(DType.float32, DType.int64, DType.int32, DType.float16),
           samples=onehot_samples),
    OpCase("NonZero", dtypes=FLOATS + (DType.int64, DType.int32, DType.uint8, DType.bool),
           samples=nonzero_samples),
    OpCase("Compress", dtypes=_INDEX_TYPES + (DType.bool,), samples=compress_samples,
           tags=("movement",)),
    OpCase("Unique", dtypes=(DType.float32, DType.int64, DType.int32, DType.int8, DType.float64),
           samples=unique_samples),
    OpCase("TopK", dtypes=_TOPK_TYPES, samples=topk_samples, errors=topk_errors,
           tags=("reduction",)),
    OpCase("TensorScatter", dtypes=(DType.float32, DType.float16, DType.int64),
           samples=tensor_scatter_samples, tags=("movement",)),
)
