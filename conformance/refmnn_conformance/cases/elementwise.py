"""Elementwise arithmetic, unary math, Where and Clip (refmnn/ops/elementwise.py)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import (
    ANY,
    EXTREMAL,
    NONZERO,
    POSITIVE,
    SMALL_INT,
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


def clip_6_samples(ctx: SampleContext):
    """Clip-6: the bounds are float attributes, -+3.4028234663852886e38 by default (float32's
    +-inf clip to them; in float16 they are infinite and clip nothing)."""
    x = ctx.make((4, 5))
    yield Sample((x,), {"min": -0.5, "max": 0.5}, name="min_max")
    yield Sample((x,), {"min": 0.25}, name="min_only")
    yield Sample((x,), name="defaults")
    yield Sample((x,), {"min": 0.5, "max": -0.5}, name="min_above_max")
    yield Sample((ctx.make((0, 3)),), {"min": -1.0, "max": 1.0}, name="empty")
    yield Sample((ctx.make((6, 16), EXTREMAL),), {"min": -2.0, "max": 3.0}, name="extremal")
    yield Sample((ctx.make((6, 16), EXTREMAL),), name="extremal_defaults")


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
    OpCase("Clip", opset=6, dtypes=(DType.float32, DType.float16, DType.float64),
           samples=clip_6_samples),
)


# ---------------------------------------------------------------------------------------------
# the rest of the unary math ops, logic, bitwise, Mod, Pow, variadic and comparisons

_SIGNED_INTS = (DType.int32, DType.int64, DType.int8)
_HALVES = ("halves", [-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 3.5, 0.49999997])


def _acosh_samples(ctx: SampleContext):
    yield Sample((ctx.array([1.0, 1.5, 2.0, 10.0, 100.0]),), name="domain")
    yield Sample((ctx.make((3, 7), POSITIVE) + ctx.scalar(1.0),), name="basic")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 4)),), name="empty")
    yield Sample((ctx.make((6, 16), EXTREMAL),), name="extremal")


def _int_unary(op: str):
    def samples(ctx: SampleContext):
        yield Sample((ctx.make((3, 7)),), name="basic")
        yield Sample((ctx.make(()),), name="rank0")
        yield Sample((ctx.make((0, 4)),), name="empty")
        yield Sample((ctx.noncontiguous(ctx.make((4, 6))),), name="noncontiguous")
        yield Sample((ctx.make((6, 16), EXTREMAL),), name="extremal")

    return samples


def _unary_float_case(op: str, domain=ANY, extra=(), tol=None) -> OpCase:
    return OpCase(op, dtypes=FLOATS, samples=_unary(op, domain, extra), tags=("unary",),
                  tolerance=tol or {})


_TRIG_TOL = {DType.float32: Tol(2e-6, 1e-6, "libm-grade transcendental functions differ by ~2 ulp")}
_UNARY_FLOAT = (
    ("Sqrt", POSITIVE, ()), ("Log", POSITIVE, (("near_one", [0.999, 1.0, 1.001, 1e-30]),)),
    ("Reciprocal", NONZERO, (("zeros", [0.0, -0.0, 1e-30]),)),
    ("Floor", ANY, (_HALVES,)), ("Ceil", ANY, (_HALVES,)), ("Round", ANY, (_HALVES,)),
    ("Sin", ANY, (("large", [100.0, -1000.0, 3.14159265]),)), ("Cos", ANY, ()), ("Tan", UNIT, ()),
    ("Asin", UNIT, (("bounds", [-1.0, 1.0, 1.5]),)), ("Acos", UNIT, (("bounds", [-1.0, 1.0, -1.5]),)),
    ("Atan", ANY, ()), ("Sinh", UNIT, ()), ("Cosh", UNIT, ()), ("Asinh", ANY, ()),
    ("Atanh", UNIT, (("bounds", [-1.0, 1.0, 0.999]),)),
)


def _isinf_samples(ctx: SampleContext):
    x = ctx.make((6, 16), EXTREMAL)
    yield Sample((x,), name="extremal")
    yield Sample((x,), {"detect_negative": 0}, name="positive_only")
    yield Sample((x,), {"detect_positive": 0}, name="negative_only")
    yield Sample((x,), {"detect_positive": 0, "detect_negative": 0}, name="neither")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 3)),), name="empty")


def _bool_binary(ctx: SampleContext):
    def b(shape):
        return ctx.make(shape, dtype=DType.bool)

    for name, sa, sb in BROADCASTS:
        yield Sample((b(sa), b(sb)), name=name)
    yield Sample((ctx.noncontiguous(b((3, 5))), b((3, 5))), name="noncontiguous")


def _bitwise_binary(ctx: SampleContext):
    for name, sa, sb in BROADCASTS:
        yield Sample((ctx.make(sa), ctx.make(sb)), name=name)
    yield Sample((ctx.make((6, 16), EXTREMAL), ctx.make((6, 16), EXTREMAL)), name="extremal")


def _bitshift(direction: str):
    def samples(ctx: SampleContext):
        bits = ctx.dtype.itemsize * 8
        x = ctx.make((3, 8), EXTREMAL)
        shift = ctx.rng.integers(0, bits, (3, 8)).astype(ctx.dtype)
        yield Sample((x, shift), {"direction": direction}, name="basic")
        yield Sample((x, ctx.array([1])), {"direction": direction}, name="broadcast_shift")
        yield Sample((ctx.make(()), ctx.scalar(bits - 1)), {"direction": direction}, name="scalars")
        yield Sample((ctx.make((0, 2)), ctx.array([1, 2])), {"direction": direction}, name="empty")

    return samples


def _mod(fmod: int):
    def samples(ctx: SampleContext):
        attrs = {"fmod": fmod}
        if ctx.is_float:
            yield Sample((ctx.make((3, 7)), ctx.make((3, 7), NONZERO)), attrs, name="basic")
            yield Sample((ctx.make((2, 3, 4)), ctx.make((4,), NONZERO)), attrs, name="broadcast")
            yield Sample((ctx.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0]),
                          ctx.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0])), attrs, name="signs")
            yield Sample((ctx.make((6, 16), EXTREMAL), ctx.make((6, 16), EXTREMAL)), attrs,
                         name="extremal")
        else:
            signed = np.iinfo(ctx.dtype).min < 0
            a = ctx.array([7, -7, 7, -7, 0, 6] if signed else [7, 8, 9, 0, 6, 255 % 200])
            b = ctx.array([3, 3, -3, -3, 5, 3] if signed else [3, 3, 4, 5, 3, 7])
            yield Sample((a, b), attrs, name="signs")
            yield Sample((ctx.make((3, 7)), ctx.make((3, 7), NONZERO)), attrs, name="basic")
            yield Sample((ctx.make((2, 3, 4)), ctx.make((4,), NONZERO)), attrs, name="broadcast")
        yield Sample((ctx.make((0, 4)), ctx.make((4,), NONZERO)), attrs, name="empty")

    return samples


def _pow_samples(ctx: SampleContext):
    if ctx.is_float:
        yield Sample((ctx.make((3, 7), POSITIVE), ctx.make((3, 7))), name="basic")
        yield Sample((ctx.make((2, 3, 4)), ctx.array([2.0])), name="square")
        yield Sample((ctx.make((2, 3, 4), POSITIVE), ctx.scalar(0.5)), name="sqrt")
        yield Sample((ctx.make((3, 4)), ctx.make((3, 4), SMALL_INT)), name="negative_base_int_exp")
        yield Sample((ctx.make((3, 4)), ctx.make((3, 4), SMALL_INT, dtype=DType.int64)),
                     name="int64_exponent")
        yield Sample((ctx.make((4, 8), EXTREMAL), ctx.make((4, 8), EXTREMAL)), name="extremal")
        yield Sample((ctx.array([0.0, -0.0, 0.0, -1.0, 1.0, np.nan]),
                      ctx.array([0.0, -1.0, -1.0, 0.5, np.nan, 0.0])), name="special")
    else:
        yield Sample((ctx.make((3, 7), SMALL_INT), ctx.make((3, 7), POSITIVE) % ctx.scalar(4)),
                     name="basic")
        yield Sample((ctx.make((3, 4), SMALL_INT), ctx.scalar(3)), name="cube")
        yield Sample((ctx.make((3, 4), SMALL_INT), ctx.array([2.0], dtype=DType.float32)),
                     name="float_exponent")
    yield Sample((ctx.make((0, 3)), ctx.make((3,), SMALL_INT)), name="empty")


def _variadic(op: str):
    def samples(ctx: SampleContext):
        yield Sample((ctx.make((3, 4)),), name="one_input")
        yield Sample((ctx.make((3, 4)), ctx.make((3, 4))), name="two_inputs")
        yield Sample((ctx.make((2, 3, 4)), ctx.make((4,)), ctx.make((3, 1))), name="three_broadcast")
        yield Sample((ctx.make(()), ctx.make(())), name="scalars")
        yield Sample((ctx.make((0, 3)), ctx.make((3,))), name="empty")
        yield Sample((ctx.noncontiguous(ctx.make((3, 5))), ctx.make((3, 5))), name="noncontiguous")
        yield Sample(tuple(ctx.make((4, 33, 17)) for _ in range(4)), name="larger")
        if ctx.is_float:
            yield Sample((ctx.make((6, 16), EXTREMAL), ctx.make((6, 16), EXTREMAL)), name="extremal")
            if op in ("Max", "Min"):
                yield Sample((ctx.array([np.nan, 1.0, -0.0, 0.0]), ctx.array([1.0, np.nan, 0.0, -0.0])),
                             name="nan_and_signed_zero")

    def errors(ctx: SampleContext):
        yield ErrorSample(Sample((ctx.make((2, 3)), ctx.make((4,))), name="incompatible_shapes"),
                          ShapeError, r"broadcast|shape|incompatible")

    return samples, errors


def _compare_samples(ctx: SampleContext):
    for name, sa, sb in BROADCASTS:
        yield Sample((ctx.make(sa, SMALL_INT), ctx.make(sb, SMALL_INT)), name=name)
    if ctx.is_float:
        yield Sample((ctx.make((6, 16), EXTREMAL), ctx.make((6, 16), EXTREMAL)), name="extremal")
        yield Sample((ctx.array([np.nan, 0.0, -0.0, np.inf]), ctx.array([np.nan, -0.0, 0.0, np.inf])),
                     name="nan_and_signed_zero")


def _variadic_case(op: str, dtypes) -> OpCase:
    samples, errors = _variadic(op)
    return OpCase(op, dtypes=dtypes, samples=samples, errors=errors, tags=("variadic", "broadcast"))


def _not_samples(ctx: SampleContext):
    yield from _int_unary("Not")(ctx)


_BITWISE_INTS = (DType.int32, DType.int64, DType.int8, DType.uint8, DType.uint16)
_UINTS = (DType.uint8, DType.uint16, DType.uint32)  # uint64: extremal_values() mis-casts it
_COMPARE_TYPES = FLOATS + INTS
MORE_CASES = (
    *(_unary_float_case(op, dom, extra, _TRIG_TOL if op in ("Sin", "Cos", "Tan", "Asin", "Acos",
                                                               "Atan", "Sinh", "Cosh", "Asinh",
                                                               "Atanh") else None)
      for op, dom, extra in _UNARY_FLOAT),
    OpCase("Acosh", dtypes=FLOATS, samples=_acosh_samples, tags=("unary",), tolerance=_TRIG_TOL),
    OpCase("Abs", dtypes=FLOATS + INTS, samples=_int_unary("Abs"), tags=("unary",)),
    OpCase("Neg", dtypes=FLOATS + _SIGNED_INTS, samples=_int_unary("Neg"), tags=("unary",)),
    OpCase("Sign", dtypes=FLOATS + INTS, samples=_int_unary("Sign"), tags=("unary",)),
    OpCase("IsNaN", dtypes=FLOATS, samples=_int_unary("IsNaN"), tags=("unary",)),
    OpCase("IsInf", dtypes=FLOATS, samples=_isinf_samples, tags=("unary",)),
    OpCase("Not", dtypes=(DType.bool,), samples=_not_samples, tags=("unary", "logic")),
    *(OpCase(op, dtypes=(DType.bool,), samples=_bool_binary, tags=("logic", "broadcast"))
      for op in ("And", "Or", "Xor")),
    *(OpCase(op, dtypes=_BITWISE_INTS, samples=_bitwise_binary, tags=("bitwise", "broadcast"))
      for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")),
    OpCase("BitwiseNot", dtypes=_BITWISE_INTS, samples=_int_unary("BitwiseNot"), tags=("bitwise",)),
    OpCase("BitShift", dtypes=_UINTS, samples=_bitshift("LEFT"), variant="left", tags=("bitwise",)),
    OpCase("BitShift", dtypes=_UINTS, samples=_bitshift("RIGHT"), variant="right",
           tags=("bitwise",)),
    OpCase("Mod", dtypes=INTS, samples=_mod(0), variant="fmod0", tags=("binary",)),
    OpCase("Mod", dtypes=FLOATS + INTS, samples=_mod(1), variant="fmod1", tags=("binary",)),
    OpCase("Pow", dtypes=FLOATS + (DType.int32, DType.int64), samples=_pow_samples,
           tags=("binary",),
           tolerance={DType.float32: Tol(4e-6, 1e-6, "pow is exp(y log x) in some libms: a few ulp")}),
    _variadic_case("Sum", FLOATS),  # Sum-6/8/13 allow float types only (ONNX schema)
    _variadic_case("Mean", FLOATS),
    _variadic_case("Max", FLOATS + INTS),
    _variadic_case("Min", FLOATS + INTS),
    *(OpCase(op, dtypes=_COMPARE_TYPES, samples=_compare_samples, tags=("compare", "broadcast"))
      for op in ("Greater", "Less", "GreaterOrEqual", "LessOrEqual")),
    OpCase("Equal", dtypes=_COMPARE_TYPES + (DType.bool,), samples=_compare_samples,
           tags=("compare", "broadcast")),
)

CASES = CASES + MORE_CASES
