"""Elementwise arithmetic, unary math, Where and Clip (refmnn/ops/elementwise.py)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import (
    ANY,
    EXTREMAL,
    NONZERO,
    UNIT,
    ErrorSample,
    OpCase,
    Sample,
    SampleContext,
    Tol,
)
from refmnn_conformance.cases._common import FLOATS, INTS

BROADCASTS = (
    ("same", (3, 4), (3, 4)),
    ("broadcast_row", (2, 3, 4), (4,)),
    ("broadcast_both", (2, 1, 4), (3, 1)),
    ("broadcast_rank0", (3, 4), ()),
    ("scalars", (), ()),
    ("empty", (0, 3), (3,)),
    ("larger", (4, 33, 17), (33, 1)),
)


def _binary(op: str):
    def samples(ctx: SampleContext):
        b_domain = NONZERO if op == "Div" else ANY
        for name, sa, sb in BROADCASTS:
            yield Sample((ctx.make(sa), ctx.make(sb, b_domain)), name=name)
        a, b = ctx.make((3, 5)), ctx.make((3, 5), b_domain)
        yield Sample((ctx.noncontiguous(a), ctx.noncontiguous(b)), name="noncontiguous")
        if ctx.is_float:
            yield Sample((ctx.make((8, 16), EXTREMAL), ctx.make((8, 16), EXTREMAL)), name="extremal")
            if op == "Div":
                zero = ctx.array([0.0, -0.0, 0.0, 0.0, -0.0, 0.0])
                num = ctx.array([1.0, 1.0, -1.0, 0.0, 0.0, np.nan])
                yield Sample((num, zero), name="divide_by_zero")
        else:
            info = np.iinfo(ctx.dtype)
            if op in ("Add", "Mul"):
                yield Sample((ctx.array([info.max, info.max, info.min]),
                              ctx.array([1, 2, info.min if op == "Add" else 2])), name="overflow_wraps")
            if op == "Sub":
                yield Sample((ctx.array([info.min, 0]), ctx.array([1, 1])), name="overflow_wraps")
            if op == "Div":
                signed = info.min < 0
                a = ctx.array([-7, 7, -7, 7, 0] if signed else [7, 8, 9, 1, 0])
                b = ctx.array([2, 2, -2, -2, 3] if signed else [2, 3, 4, 5, 3])
                yield Sample((a, b), name="truncates_toward_zero")

    def errors(ctx: SampleContext):
        yield ErrorSample(Sample((ctx.make((2, 3)), ctx.make((4,))), name="incompatible_shapes"),
                          ShapeError, r"broadcast|shape|incompatible")

    return samples, errors


def _binary_case(op: str) -> OpCase:
    samples, errors = _binary(op)
    tolerance = {}
    if op == "Div":
        tolerance = {DType.float16: Tol(2e-3, 1e-5, "a quotient near a rounding boundary may round "
                                                    "either way after the float32 computation")}
    return OpCase(op, dtypes=FLOATS + INTS, samples=samples, errors=errors, tolerance=tolerance,
                  tags=("binary", "broadcast"))


def _unary(op: str, domain=ANY, extra=()):
    def samples(ctx: SampleContext):
        yield Sample((ctx.make((3, 7), domain),), name="basic")
        yield Sample((ctx.make(()),), name="rank0")
        yield Sample((ctx.make((0, 4)),), name="empty")
        yield Sample((ctx.noncontiguous(ctx.make((4, 6), domain)),), name="noncontiguous")
        yield Sample((ctx.make((2, 3, 5, 7), UNIT),), name="unit")
        yield Sample((ctx.make((6, 16), EXTREMAL),), name="extremal")
        for name, values in extra:
            yield Sample((ctx.array(values),), name=name)

    return samples


def clip_samples(ctx: SampleContext):
    x = ctx.make((4, 5))
    if ctx.is_float:
        lo, hi = ctx.scalar(-0.5), ctx.scalar(0.5)
    else:
        signed = np.iinfo(ctx.dtype).min < 0
        lo, hi = ctx.scalar(-2 if signed else 3), ctx.scalar(3 if signed else 12)
    yield Sample((x, lo, hi), name="min_max")
    yield Sample((x, lo), name="min_only")
    yield Sample((x, None, hi), name="max_only")
    yield Sample((x,), name="no_bounds")
    yield Sample((x, hi, lo), name="min_above_max")
    yield Sample((ctx.make((0, 3)), lo, hi), name="empty")
    if ctx.is_float:
        yield Sample((ctx.make((6, 16), EXTREMAL), lo, hi), name="extremal")


def where_samples(ctx: SampleContext):
    def cond(shape):
        return ctx.make(shape, dtype=DType.bool)

    yield Sample((cond((3, 4)), ctx.make((3, 4)), ctx.make((3, 4))), name="same")
    yield Sample((cond((2, 1, 4)), ctx.make((3, 1)), ctx.make(())), name="broadcast_three_ways")
    yield Sample((cond(()), ctx.make((2, 2)), ctx.make((2, 2))), name="scalar_condition")
    yield Sample((cond((0, 2)), ctx.make((0, 2)), ctx.make((2,))), name="empty")
    if ctx.is_float:
        yield Sample((cond((8, 8)), ctx.make((8, 8), EXTREMAL), ctx.make((8, 8), EXTREMAL)),
                     name="extremal")


def where_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3), dtype=DType.bool), ctx.make((4,)), ctx.make((2, 3))),
                             name="incompatible_shapes"), ShapeError, r"broadcast|shape|incompatible")


CASES = (
    _binary_case("Add"),
    _binary_case("Sub"),
    _binary_case("Mul"),
    _binary_case("Div"),
    OpCase("Tanh", dtypes=FLOATS, samples=_unary("Tanh"), tags=("unary",)),
    OpCase("Erf", dtypes=FLOATS, samples=_unary("Erf", extra=(("tails", [-6.0, -3.5, 3.5, 6.0]),)),
           tags=("unary",),
           tolerance={DType.float32: Tol(2e-6, 1e-5, "erf is evaluated by a rational approximation; "
                                                     "libm-grade implementations differ by ~2 ulp")}),
    OpCase("Exp", dtypes=FLOATS, samples=_unary("Exp", extra=(("overflow", [88.0, 89.0, 710.0, -104.0]),)),
           tags=("unary",)),
    OpCase("Where", dtypes=FLOATS + (DType.int64, DType.int32, DType.bool), samples=where_samples,
           errors=where_errors),
    OpCase("Clip", dtypes=FLOATS + (DType.int32, DType.int64, DType.int8, DType.uint8),
           samples=clip_samples),
)
