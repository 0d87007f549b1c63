"""Reductions (refmnn/ops/reduction.py): ReduceSum, ReduceMean, ReduceMax at their newest
opsets, where ``axes`` is an input (an initializer in the one-node graph, as in real models)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import (
    ANY,
    EXTREMAL,
    SMALL_INT,
    UNIT,
    ErrorSample,
    OpCase,
    Sample,
    SampleContext,
    Tol,
)
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
            x = ctx.make((4, 16), EXTREMAL)
            if op in _SUMS:
                x = _one_sign_of_huge(x)
            yield Sample((x, _axes(1)), name="extremal")

    return samples


_SUMS = ("ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum",
         "ReduceLogSumExp")
"""The reductions that add their (mapped) elements up."""


def _one_sign_of_huge(x: np.ndarray) -> np.ndarray:
    """``x`` with, in every row that holds both +max and -max (the dtype's largest finite
    values), the negative ones replaced by -1.

    Floating-point addition is not associative, and ONNX leaves the summation order open: a row
    holding max, max, -max, -max sums to inf in one order (max + max overflows first) and to a
    finite value in another (max - max first), and both are conformant. Such a sample would
    test the summation order, not the backend, so the sum family keeps one sign of huge values
    per row. With one sign the result is the same in every order: two or more of them overflow
    whatever comes between, a single one absorbs the small values (ulp(max) is 2^104 in
    float32). inf, NaN, -0 and subnormals stay, and ReduceMax/ReduceMin keep the full sample.
    """
    x = x.copy()
    finite = np.isfinite(x.astype(np.float64))
    top = float(np.max(np.abs(x.astype(np.float64)), where=finite, initial=0.0))
    wide = x.astype(np.float64)
    for row in range(x.shape[0]):
        huge_pos = finite[row] & (wide[row] == top)
        huge_neg = finite[row] & (wide[row] == -top)
        if huge_pos.any() and huge_neg.any():
            x[row, huge_neg] = -1
    return x


def reduce_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), _axes(2)), name="axis_out_of_range"),
                      ShapeError, r"axis .* out of range")


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


# ---------------------------------------------------------------------------------------------
# the other reductions, ArgMax/ArgMin and the cumulative ops


def _positive_first(op: str):
    """LogSum needs a positive sum; the others take any input (reduce_samples' shapes)."""
    base = reduce_samples(op)

    def samples(ctx: SampleContext):
        for sample in base(ctx):
            if op == "ReduceLogSum" and ctx.is_float and sample.name != "extremal":
                x = np.abs(sample.inputs[0]) + ctx.scalar(0.1)
                sample = Sample((x, *sample.inputs[1:]), sample.attrs, name=sample.name)
            yield sample
        if op == "ReduceProd" and ctx.is_float:
            yield Sample((ctx.make((3, 64), UNIT) + ctx.scalar(0.5), _axes(1)), name="long_product")
        if op == "ReduceLogSumExp" and ctx.is_float:
            yield Sample((ctx.array([[1000.0, 1000.0], [-1000.0, -1e4]]), _axes(1)),
                         name="large_magnitude")

    return samples


def arg_samples(ctx: SampleContext):
    x = ctx.make((3, 4, 5))
    yield Sample((x,), name="default_axis0")
    yield Sample((x,), {"axis": 1, "keepdims": 0}, name="axis1")
    yield Sample((x,), {"axis": -1}, name="negative_axis")
    ties = ctx.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, 1, 0, 1]])
    yield Sample((ties,), {"axis": 1}, name="ties_first")
    yield Sample((ties,), {"axis": 1, "select_last_index": 1}, name="ties_last")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 3)),), {"axis": 1}, name="empty_kept_axis")
    yield Sample((ctx.noncontiguous(ctx.make((4, 6))),), {"axis": 1}, name="noncontiguous")
    yield Sample((ctx.make((2, 4096)),), {"axis": 1}, name="long_axis")
    if ctx.is_float:
        yield Sample((ctx.make((4, 16), EXTREMAL),), {"axis": 1}, name="extremal")


def arg_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)),), {"axis": 2}, name="axis_out_of_range"),
                      ShapeError, r"axis .* out of range")


def cum_samples(op: str):
    def samples(ctx: SampleContext):
        domain = (UNIT if ctx.is_float else SMALL_INT) if op == "CumProd" else ANY
        x = ctx.make((3, 4, 5), domain)
        axis = np.array(1, dtype=np.int64)
        yield Sample((x, axis), name="axis1")
        yield Sample((x, np.array(-1, dtype=np.int32)), name="negative_axis_int32")
        yield Sample((x, axis), {"exclusive": 1}, name="exclusive")
        yield Sample((x, axis), {"reverse": 1}, name="reverse")
        yield Sample((x, axis), {"exclusive": 1, "reverse": 1}, name="exclusive_reverse")
        yield Sample((ctx.make((7,), domain), np.array(0, dtype=np.int64)), name="rank1")
        yield Sample((ctx.make((0, 3), domain), np.array(0, dtype=np.int64)), name="empty")
        yield Sample((ctx.noncontiguous(ctx.make((4, 6), domain)), np.array(0, dtype=np.int64)),
                     name="noncontiguous")
        yield Sample((ctx.make((2, 512), domain), np.array(1, dtype=np.int64)), name="long_axis")
        if ctx.is_float:
            yield Sample((ctx.make((4, 16), EXTREMAL), np.array(1, dtype=np.int64)), name="extremal")

    return samples


def _cum_k(sample: Sample) -> int:
    x = sample.inputs[0]
    return max(1, x.shape[int(sample.inputs[1])] if x.ndim else 1)


_ARG_TYPES = FLOATS + INT_TYPES + (DType.uint8, DType.int8)
_TRANSCENDENTAL = {DType.float32: Tol(4e-6, 1e-6, "a log or exp after the sum: a few ulp"),
                   DType.float16: Tol(2e-3, 1e-5, "log/exp of a float32 sum, rounded to float16")}
MORE_CASES = (
    OpCase("ReduceMin", dtypes=FLOATS + INT_TYPES + (DType.uint8, DType.int8),
           samples=reduce_samples("ReduceMin"), errors=reduce_errors, tags=("reduction",)),
    OpCase("ReduceProd", dtypes=FLOATS + INT_TYPES, samples=_positive_first("ReduceProd"),
           errors=reduce_errors, accumulates=_k, tags=("reduction",)),
    OpCase("ReduceSumSquare", dtypes=FLOATS + INT_TYPES, samples=reduce_samples("ReduceSumSquare"),
           errors=reduce_errors, accumulates=_k, tags=("reduction",)),
    OpCase("ReduceL1", dtypes=FLOATS + INT_TYPES, samples=reduce_samples("ReduceL1"),
           errors=reduce_errors, accumulates=_k, tags=("reduction",)),
    OpCase("ReduceL2", dtypes=FLOATS, samples=reduce_samples("ReduceL2"),
           errors=reduce_errors, accumulates=_k, tags=("reduction",)),
    OpCase("ReduceLogSum", dtypes=FLOATS, samples=_positive_first("ReduceLogSum"),
           errors=reduce_errors, accumulates=_k, tolerance=_TRANSCENDENTAL, tags=("reduction",)),
    OpCase("ReduceLogSumExp", dtypes=FLOATS, samples=_positive_first("ReduceLogSumExp"),
           errors=reduce_errors, accumulates=_k, tolerance=_TRANSCENDENTAL, tags=("reduction",)),
    OpCase("ArgMax", dtypes=_ARG_TYPES, samples=arg_samples, errors=arg_errors,
           tags=("reduction",)),
    OpCase("ArgMin", dtypes=_ARG_TYPES, samples=arg_samples, errors=arg_errors,
           tags=("reduction",)),
    OpCase("CumSum", dtypes=FLOATS + INT_TYPES, samples=cum_samples("CumSum"), accumulates=_cum_k,
           tags=("reduction", "scan")),
    OpCase("CumProd", dtypes=FLOATS + INT_TYPES, samples=cum_samples("CumProd"), accumulates=_cum_k,
           tags=("reduction", "scan")),
)
CASES = CASES + MORE_CASES
