"""Elementwise ops: Add/Sub/Mul/Div (integer truncation, wrap-around, IEEE specials), Mod (fmod
0 and 1, signs, floats with fmod 0 from 28), Pow (mixed base and exponent types from 12),
BitShift (signed and over-wide shifts from 28), the Bitwise* and logical ops, the comparisons
(NaN, +-0, strings for Equal 19), Min/Max/Sum/Mean with 1-4 inputs, Where, the legacy (opset
1/6) broadcast and same-shape forms, the unary math ops over their domains and special values,
IsNaN/IsInf and BitCast. Shapes: ranks 0-4 with size-1 (and now and then size-0) dims,
broadcast multidirectionally."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import (ANY, EXTREMAL, POSITIVE, SMALL_INT, UNIT, Draw, Known, Sample,
                     SampleContext, Sweep, Tol, float16_in_float16)

Shape = tuple[int, ...]

_FLOATS = (DType.float32, DType.float64, DType.float16)
_WIDE = (DType.int32, DType.int64, DType.uint32, DType.uint64)
_NARROW = (DType.int8, DType.int16, DType.uint8, DType.uint16)
_INTS = _WIDE + _NARROW
_SIGNED = (DType.int8, DType.int16, DType.int32, DType.int64)
_UNSIGNED = (DType.uint8, DType.uint16, DType.uint32, DType.uint64)
_BOOL = (DType.bool,)
_STRINGS = np.array(["", "a", "b", "ab", "ba", "A", "\u00e9", "a b"], dtype=object)


# --------------------------------------------------------------------------------------------
# shapes and values
# --------------------------------------------------------------------------------------------


def _target(rng: np.random.Generator, low: int = 0) -> Shape:
    """A shape of rank low-4, dims 1-5; one time in twenty one dim is 0."""
    shape = [int(d) for d in rng.integers(1, 6, int(rng.integers(low, 5)))]
    if shape and rng.random() < 0.05:
        shape[int(rng.integers(len(shape)))] = 0
    return tuple(shape)


def _shapes(rng: np.random.Generator, count: int) -> list[Shape]:
    """``count`` shapes that broadcast multidirectionally: each a trailing part of one random
    target shape (the full rank half the time) with some dims made 1."""
    target = _target(rng)
    shapes = []
    for _ in range(count):
        rank = len(target) if rng.random() < 0.5 else int(rng.integers(0, len(target) + 1))
        tail = target[len(target) - rank:]
        shapes.append(tuple(1 if rng.random() < 0.25 else d for d in tail))
    return shapes


def _full_range(ctx: SampleContext, shape: Shape, dtype: np.dtype) -> np.ndarray:
    """Integers drawn uniformly over the whole range of ``dtype`` (every bit pattern)."""
    info = np.iinfo(dtype)
    return ctx.rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _values(ctx: SampleContext, shape: Shape, dtype: np.dtype | None = None,
            ties: bool = False) -> np.ndarray:
    """Data for an elementwise op: floats a standard normal times 1, 4 or 100, small integers
    (ties, exact results), or one time in five EXTREMAL (NaN, +-inf, -0, subnormals, the
    largest values); integers small, over the whole range, or EXTREMAL; fair bools. ``ties``
    (comparisons, Min and Max): small integers in place of the whole range."""
    rng = ctx.rng
    dtype = ctx.dtype if dtype is None else np.dtype(dtype)
    kind = rng.random()
    if kind < 0.2 or dtype == np.bool_:
        return ctx.make(shape, EXTREMAL, dtype)
    if kind < (0.6 if ties else 0.35):
        return ctx.make(shape, SMALL_INT, dtype)
    if dtype.kind in "iu":
        return _full_range(ctx, shape, dtype) if kind < 0.6 else ctx.make(shape, ANY, dtype)
    x = ctx.make(shape, ANY, dtype)
    return x * dtype.type(rng.choice([1, 4, 100]))


def _nonzero_divisor(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """B with its integer zeros made 1, and its -1s made 1 when A holds the most negative value
    (integer x / 0 and INT_MIN / -1 are undefined: the second traps on x86)."""
    if b.dtype.kind not in "iu":
        return b
    b = np.where(b == 0, b.dtype.type(1), b)
    if b.dtype.kind == "i" and (a == np.iinfo(a.dtype).min).any():
        b = np.where(b == -1, b.dtype.type(1), b)
    return b.astype(a.dtype)


def _strings(ctx: SampleContext, shape: Shape) -> np.ndarray:
    """A string tensor (an object array) of short strings, many equal."""
    return np.asarray(_STRINGS[ctx.rng.integers(0, len(_STRINGS), shape)], dtype=object)


def _operands(ctx: SampleContext, op: str, shapes: list[Shape]) -> list[np.ndarray]:
    """The inputs of a binary or variadic ``op`` of the given shapes: strings for a string
    context, ties for comparisons and Min/Max, a nonzero divisor for integer Div and Mod."""
    if ctx.dtype == object:
        return [_strings(ctx, s) for s in shapes]
    ties = op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Min", "Max")
    inputs = [_values(ctx, s, ties=ties) for s in shapes]
    if op in ("Div", "Mod"):
        inputs[1] = _nonzero_divisor(inputs[0], inputs[1])
    return inputs


# --------------------------------------------------------------------------------------------
# binary, variadic and ternary ops
# --------------------------------------------------------------------------------------------


def _binary_draw(op: str) -> Draw:
    def draw(ctx: SampleContext, opset: int) -> Sample:
        rng = ctx.rng
        inputs = _operands(ctx, op, _shapes(rng, 2))
        attrs: dict[str, object] = {}
        if op == "Mod":
            floats = ctx.is_float
            fmod = int(rng.integers(0, 2)) if opset >= 28 or (opset == 10 and not floats) \
                else int(floats)
            if fmod or rng.random() < 0.5:
                attrs["fmod"] = fmod
        return Sample(tuple(inputs), attrs)

    draw.__doc__ = (f"A random {op}: two shapes of rank 0-4 that broadcast both ways; values "
                    "from standard normals to EXTREMAL (integers over their whole range"
                    + (", divisor never 0 nor -1 under INT_MIN" if op in ("Div", "Mod") else "")
                    + (", the fmod the opset allows: 1 for floats before 28, ints also 1 at "
                       "10 and 28" if op == "Mod" else "") + ").")
    return draw


def _legacy_draw(op: str) -> Draw:
    def draw(ctx: SampleContext, opset: int) -> Sample:
        rng = ctx.rng
        a_shape = _target(rng, 1)
        rank = len(a_shape)
        attrs: dict[str, object] = {}
        choice = rng.random()
        if choice < 0.25:
            b_shape = a_shape
            if rng.random() < 0.5:
                attrs["broadcast"] = 0
        else:
            attrs["broadcast"] = 1
            if choice < 0.4:  # a scalar or a one-element tensor
                b_shape = (1,) * int(rng.integers(0, rank + 1))
            else:
                length = int(rng.integers(1, rank + 1))
                start = int(rng.integers(0, rank - length + 1))
                if start + length != rank or rng.random() < 0.3:
                    attrs["axis"] = start
                b_shape = a_shape[start:start + length]
        if opset == 1 and op in ("Add", "Sub", "Mul", "Div") and rng.random() < 0.3:
            attrs["consumed_inputs"] = [0, 1]
        return Sample(tuple(_operands(ctx, op, [a_shape, b_shape])), attrs)

    draw.__doc__ = (f"A random legacy {op} (opset 1/6 broadcasting): equal shapes (broadcast "
                    "0 or absent), or broadcast=1 with B a scalar, a one-element tensor, a "
                    "suffix of A's shape or (axis) any contiguous run of it; consumed_inputs "
                    "now and then at opset 1.")
    return draw


def draw_pow(ctx: SampleContext, opset: int) -> Sample:
    """A random Pow: base and exponent of shapes that broadcast both ways. The exponent type is
    the base's before opset 12, any numeric type from 12 (float32/64 and int32/64 most often).
    Float bases: any values, EXTREMAL among them, with small integral exponents half the time
    (negative bases, 0 ** 0, 0 ** -k). Integer bases in [-4, 4] with exponents 0-4, or -3..3
    over a nonzero base (a signed exponent), or fractional ones in [0, 3) over a base >= 0
    (a float exponent): every result fits."""
    rng = ctx.rng
    a_shape, b_shape = _shapes(rng, 2)
    etype = ctx.dtype
    if opset >= 12 and rng.random() < 0.6:  # onnxruntime runs float32/64 and int32/64 ones
        common = rng.random() < 0.6
        types = (DType.float32, DType.float64, DType.int32, DType.int64) if common else \
            (DType.float16, *_NARROW, DType.uint32, DType.uint64)
        etype = np.dtype(types[int(rng.integers(len(types)))].numpy)
    if ctx.is_float:
        base = _values(ctx, a_shape)
        exponent = ctx.make(b_shape, SMALL_INT, etype) if rng.random() < 0.5 or \
            etype.kind in "iu" else _values(ctx, b_shape, etype)
        return Sample((base, exponent))
    base = ctx.make(a_shape, SMALL_INT)
    exponent = rng.integers(0, 5, b_shape)
    if etype.kind == "f" and rng.random() < 0.5:
        base = np.abs(base)
        exponent = rng.uniform(0.0, 3.0, b_shape)
    elif etype.kind == "i" and rng.random() < 0.3:
        exponent = rng.integers(-3, 4, b_shape)
        base = np.where(base == 0, base.dtype.type(2), base)
    return Sample((base, exponent.astype(etype)))


def draw_bitshift(ctx: SampleContext, opset: int) -> Sample:
    """A random BitShift: LEFT or RIGHT, X over its whole range or EXTREMAL; shift amounts in
    [0, bits) at opset 11, in [-3, bits + 3) from 28 (negative and over-wide shifts: the
    fill alone), shapes that broadcast both ways."""
    rng = ctx.rng
    x_shape, y_shape = _shapes(rng, 2)
    bits = ctx.dtype.itemsize * 8
    x = ctx.make(x_shape, EXTREMAL) if rng.random() < 0.3 else _full_range(ctx, x_shape,
                                                                          ctx.dtype)
    low, high = (0, bits) if opset < 28 else (0 if ctx.dtype.kind == "u" else -3, bits + 3)
    y = rng.integers(low, high, y_shape).astype(ctx.dtype)
    return Sample((x, y), {"direction": str(rng.choice(["LEFT", "RIGHT"]))})


def _variadic_draw(op: str) -> Draw:
    def draw(ctx: SampleContext, opset: int) -> Sample:
        rng = ctx.rng
        count = int(rng.integers(1, 5))
        if opset >= 8:
            shapes = _shapes(rng, count)
        else:
            shapes = [_target(rng)] * count
        attrs = {"consumed_inputs": [0] * count} if opset == 1 and rng.random() < 0.3 else {}
        return Sample(tuple(_operands(ctx, op, shapes)), attrs)

    draw.__doc__ = (f"A random {op} of 1-4 inputs: shapes that broadcast both ways from opset "
                    "8, one shape before (consumed_inputs now and then at 1); values with many "
                    "ties, NaN, +-0 and infinities.")
    return draw


def draw_where(ctx: SampleContext, opset: int) -> Sample:
    """A random Where: condition, X and Y of three shapes that broadcast both ways; X and Y of
    the context's type (strings included), any values."""
    c_shape, x_shape, y_shape = _shapes(ctx.rng, 3)
    x, y = _operands(ctx, "Where", [x_shape, y_shape])
    return Sample((ctx.make(c_shape, dtype=DType.bool), x, y))


# --------------------------------------------------------------------------------------------
# unary ops
# --------------------------------------------------------------------------------------------


def _unary_values(ctx: SampleContext, shape: Shape, domain: str) -> np.ndarray:
    """Values for a unary op: EXTREMAL one time in five (three in five for IsNaN/IsInf),
    otherwise mostly its domain: "any" (normal times 1, 4 or 100), "positive" (Sqrt, Log),
    "unit" ([-1, 1]: Asin, Acos, Atanh), "acosh" (>= 1), "halves" (multiples of 0.5 and 0.25,
    for Round, Floor and Ceil), "special" (IsNaN, IsInf); a normal times 4 one time in four
    outside its domain."""
    rng = ctx.rng
    kind = rng.random()
    if kind < (0.6 if domain == "special" else 0.2) or not ctx.is_float and kind < 0.4 \
            or ctx.dtype == np.bool_:
        return ctx.make(shape, EXTREMAL)
    if not ctx.is_float:
        return _full_range(ctx, shape, ctx.dtype) if kind < 0.6 else ctx.make(shape)
    if kind < 0.4 and domain != "any":
        return ctx.make(shape) * ctx.dtype.type(4)
    if domain == "positive":
        return ctx.make(shape, POSITIVE) * ctx.dtype.type(rng.choice([0.25, 1, 100]))
    if domain == "unit":
        return ctx.make(shape, UNIT)
    if domain == "acosh":
        return ctx.make(shape, POSITIVE) * ctx.dtype.type(rng.choice([0.25, 4])) + 1
    if domain == "halves":
        return (rng.integers(-40, 41, shape) / rng.choice([2, 4])).astype(ctx.dtype)
    return ctx.make(shape) * ctx.dtype.type(rng.choice([1, 4, 100]))


def _unary_draw(op: str, domain: str) -> Draw:
    def draw(ctx: SampleContext, opset: int) -> Sample:
        rng = ctx.rng
        attrs = {}
        if op == "IsInf":
            attrs = {name: int(rng.integers(0, 2)) for name in ("detect_negative",
                                                                 "detect_positive")
                     if rng.random() < 0.6}
        return Sample((_unary_values(ctx, _target(rng), domain),), attrs)

    draw.__doc__ = (f"A random {op}: rank 0-4 (dims 1-5, now and then 0), values mostly from "
                    f"the {domain!r} domain of :func:`_unary_values`, EXTREMAL among them"
                    + (", detect_negative and detect_positive 0, 1 or absent."
                       if op == "IsInf" else "."))
    return draw


_BITCAST_TO = {1: (DType.bool, DType.int8, DType.uint8), 2: (DType.int16, DType.uint16,
                                                            DType.float16, DType.bfloat16),
               4: (DType.int32, DType.uint32, DType.float32),
               8: (DType.int64, DType.uint64, DType.float64, DType.complex64)}
_BITCAST_FLOATS = (DType.float16, DType.bfloat16, DType.float32, DType.float64, DType.complex64)


def draw_bitcast(ctx: SampleContext, opset: int) -> Sample:
    """A random BitCast: a tensor of rank 0-4 (any bit pattern for integers, EXTREMAL or
    normal values for floats, 0/1 for bool) reinterpreted as any type of its width; a
    reinterpretation to bool reads bytes that are 0 or 1 only."""
    rng = ctx.rng
    shape = _target(rng)
    targets = _BITCAST_TO[ctx.dtype.itemsize]
    to = targets[int(rng.integers(len(targets)))]
    if to == DType.bool:
        x = rng.integers(0, 2, shape).astype(ctx.dtype)
    elif ctx.dtype.kind in "iu":
        x = _full_range(ctx, shape, ctx.dtype)
    else:
        x = _values(ctx, shape)
    return Sample((x,), {"to": to.value})


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------

_TRIG_TOL = {DType.float32: Tol(2e-6, 1e-6, "libm-grade transcendental functions differ by "
                                            "~2 ulp (the conformance case's tolerance)")}
_ERF_TOL = {DType.float32: Tol(2e-6, 1e-5, "erf by a rational approximation; libm-grade "
                                           "implementations differ by ~2 ulp")}
_POW_TOL = {DType.float32: Tol(4e-6, 1e-6, "pow is exp(y log x) in some libms: a few ulp")}

_UNARY: tuple[tuple[str, tuple[int, ...], tuple[DType, ...], str], ...] = (
    ("Abs", (6, 13), _FLOATS + _INTS, "any"),
    ("Neg", (6, 13), _FLOATS + _SIGNED, "any"),
    ("Sign", (9, 13), _FLOATS + _INTS, "any"),
    ("Reciprocal", (6, 13), _FLOATS, "any"),
    ("Floor", (6, 13), _FLOATS, "halves"),
    ("Ceil", (6, 13), _FLOATS, "halves"),
    ("Round", (11, 22), _FLOATS, "halves"),
    ("Sqrt", (6, 13), _FLOATS, "positive"),
    ("Exp", (6, 13), _FLOATS, "any"),
    ("Log", (6, 13), _FLOATS, "positive"),
    ("Erf", (9, 13), _FLOATS, "any"),
    ("Erf", (9,), (DType.int32, DType.int64, DType.int8), "any"),
    ("Tanh", (6, 13), _FLOATS, "any"),
    ("Sin", (7, 22), _FLOATS, "any"),
    ("Cos", (7, 22), _FLOATS, "any"),
    ("Tan", (7, 22), _FLOATS, "any"),
    ("Asin", (7, 22), _FLOATS, "unit"),
    ("Acos", (7, 22), _FLOATS, "unit"),
    ("Atan", (7, 22), _FLOATS, "any"),
    ("Sinh", (9, 22), _FLOATS, "any"),
    ("Cosh", (9, 22), _FLOATS, "any"),
    ("Asinh", (9, 22), _FLOATS, "any"),
    ("Acosh", (9, 22), _FLOATS, "acosh"),
    ("Atanh", (9, 22), _FLOATS, "unit"),
    ("Sigmoid", (6, 13), _FLOATS, "any"),
    ("Relu", (6, 13, 14), _FLOATS, "any"),
    ("Relu", (14,), _SIGNED, "any"),
    ("IsNaN", (9, 13, 20), _FLOATS, "special"),
    ("IsInf", (10, 20), (DType.float32, DType.float64), "special"),
    ("IsNaN", (20,), (DType.float8e4m3fn, DType.float8e5m2), "special"),
    ("IsInf", (20,), (DType.float16, DType.float8e4m3fn, DType.float8e5m2), "special"),
    ("Not", (1,), _BOOL, "any"),
    ("BitwiseNot", (18,), _INTS, "any"),
)
"""(op, opsets, dtypes, domain of :func:`_unary_values`)."""

_UNARY_TOL = {**{op: _TRIG_TOL for op in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
                                          "Cosh", "Asinh", "Acosh", "Atanh")},
              "Erf": _ERF_TOL}

_BINARY: tuple[tuple[str, tuple[int, ...], tuple[DType, ...]], ...] = (
    *((op, (7, 13, 14), _FLOATS + _WIDE) for op in ("Add", "Sub", "Mul", "Div")),
    *((op, (14,), _NARROW) for op in ("Add", "Sub", "Mul", "Div")),
    ("Mod", (10, 13, 28), _FLOATS + _INTS),
    *((op, (18,), _INTS) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")),
    *((op, (7,), _BOOL) for op in ("And", "Or", "Xor")),
    ("Equal", (7, 11, 13, 19), _BOOL + (DType.int32, DType.int64)),
    ("Equal", (11, 13, 19), _FLOATS + (DType.uint64, DType.int8, DType.uint8, DType.int16)),
    ("Equal", (19,), (DType.string,)),
    *((op, (7, 9, 13), _FLOATS) for op in ("Less", "Greater")),
    *((op, (9, 13), _INTS) for op in ("Less", "Greater")),
    *((op, (12, 16), _FLOATS + _INTS) for op in ("LessOrEqual", "GreaterOrEqual")),
)
"""(op, opsets, dtypes) of the binary ops drawn by :func:`_binary_draw`."""

_LEGACY: tuple[tuple[str, tuple[int, ...], tuple[DType, ...]], ...] = (
    *((op, (1, 6), _FLOATS) for op in ("Add", "Sub", "Mul", "Div")),
    *((op, (6,), (DType.int32, DType.int64)) for op in ("Add", "Sub", "Mul", "Div")),
    ("Pow", (1,), _FLOATS),
    ("Equal", (1,), _BOOL + (DType.int32, DType.int64)),
    ("Less", (1,), _FLOATS), ("Greater", (1,), _FLOATS),
    *((op, (1,), _BOOL) for op in ("And", "Or", "Xor")),
)
"""(op, opsets, dtypes) of the opset-1/6 forms with the broadcast and axis attributes."""

_VARIADIC: tuple[tuple[str, tuple[int, ...], tuple[DType, ...]], ...] = (
    *((op, (1, 6, 8, 12, 13), _FLOATS) for op in ("Max", "Min")),
    *((op, (12, 13), _INTS) for op in ("Max", "Min")),
    *((op, (1, 6, 8, 13), _FLOATS) for op in ("Sum", "Mean")),
)



def known_legacy_axis(sample: Sample, opset: int, peer: str) -> str | None:
    """The opset-1/6 binary ops with an axis that is not the suffix position."""
    a, b = sample.inputs[0], sample.inputs[1]
    axis = sample.attrs.get("axis")
    if peer == "onnx.reference" and opset < 7 and axis is not None \
            and axis != a.ndim - b.ndim and b.size != 1:
        return ("onnx.reference 1.23.2 ignores the legacy broadcast and axis attributes and "
                "broadcasts NumPy-style (suffix-aligned); Add-6 etc.: 'The starting of the "
                "mutually equal shape is specified by the argument \"axis\"' (shape(B) = (3, 4) "
                "with axis=1 meets dims 1-2 of A (2, 3, 4, 5))")
    return None


def known_sign(sample: Sample, opset: int, peer: str) -> str | None:
    """float16 NaN in onnxruntime."""
    x = sample.inputs[0]
    if peer == "onnxruntime" and x.dtype == np.float16 and np.isnan(x).any():
        return ("onnxruntime 1.32's float16 Sign maps NaN to 0 (its float32 and float64 Sign "
                "give NaN, as do NumPy and onnx.reference); the spec defines Sign only for "
                "input > 0, < 0 and == 0, which NaN is none of: NaN propagates")
    return None


def known_erf(sample: Sample, opset: int, peer: str) -> str | None:
    """Integer Erf-9 in onnx.reference (the spec does not say how erf becomes an integer)."""
    x = sample.inputs[0]
    if peer == "onnx.reference" and x.dtype.kind in "iu" and \
            np.isin(np.abs(x.astype(np.int64)), (4, 5)).any():
        return ("onnx.reference 1.23.2 evaluates Erf in float32 (np.vectorize(math.erf, "
                "otypes='f')), where erf(4) and erf(5) round to 1.0, and casts: +-1; the "
                "reference truncates erf in float64 (0.99999998 -> 0, as a Cast would), which "
                "gives +-1 from |x| = 6. Erf-9 allows integer types but does not say how the "
                "real result becomes an integer: the spec is silent")
    return None


known_sigmoid = float16_in_float16(
    "onnx.reference 1.23.2 computes float16 Sigmoid in float16, exp(x) / (1 + exp(x)) with "
    "each of exp, add and divide rounded (up to 2 ulp off: -1.386 gives 0.2 against the "
    "correctly rounded 0.2001); the reference computes in float32 and rounds once, as "
    "onnxruntime does")
"""float16 Sigmoid in onnx.reference."""


def known_mean(sample: Sample, opset: int, peer: str) -> str | None:
    """float16 Sum and Mean in onnx.reference."""
    if peer == "onnx.reference" and sample.inputs[0].dtype == np.float16 \
            and len(sample.inputs) > 1:
        return ("onnx.reference 1.23.2 adds float16 Sum's and Mean's inputs in float16 (each "
                "partial sum rounded, and overflowing to inf past 65504); the reference adds in "
                "float32 and rounds the result once, as onnxruntime does "
                "(tests/test_reference_oracles.py::test_sum_of_float16_rounds_once)")
    return None


_KNOWN: dict[str, Known] = {
    **{op: known_legacy_axis for op, _, _ in _LEGACY}, "Sign": known_sign, "Erf": known_erf,
    "Sum": known_mean, "Mean": known_mean, "Sigmoid": known_sigmoid}
"""The ``known`` predicate of each op that has one."""


def _sweep(op: str, opsets: tuple[int, ...], draw: Draw, dtypes: tuple[DType, ...],
           tolerance: dict[DType, Tol] | None = None) -> Sweep:
    return Sweep(op, opsets, draw, dtypes=dtypes, known=_KNOWN.get(op), tolerance=tolerance or {})


SWEEPS = (
    *(_sweep(op, opsets, _binary_draw(op), dtypes) for op, opsets, dtypes in _BINARY),
    *(_sweep(op, opsets, _legacy_draw(op), dtypes) for op, opsets, dtypes in _LEGACY),
    _sweep("Pow", (7, 12, 13, 15), draw_pow, _FLOATS, _POW_TOL),
    _sweep("Pow", (12, 13, 15), draw_pow, (DType.int32, DType.int64)),
    _sweep("BitShift", (11, 28), draw_bitshift, _UNSIGNED),
    _sweep("BitShift", (28,), draw_bitshift, _SIGNED),
    *(_sweep(op, opsets, _variadic_draw(op), dtypes) for op, opsets, dtypes in _VARIADIC),
    _sweep("Where", (9, 16), draw_where, _FLOATS + _BOOL + (DType.int64, DType.int8,
                                                              DType.uint64, DType.string),
           {DType.string: Tol(0.0, 0.0, "strings are exact (no default tolerance has them)")}),
    *(_sweep(op, opsets, _unary_draw(op, domain), dtypes, _UNARY_TOL.get(op))
      for op, opsets, dtypes, domain in _UNARY),
    _sweep("BitCast", (26,), draw_bitcast, (DType.uint8, DType.bool, DType.int16,
                                            DType.float16, DType.float32, DType.int32,
                                            DType.int64, DType.float64),
           {t: Tol(0.0, 0.0, "a reinterpreted bit pattern is exact") for t in _BITCAST_FLOATS}),
)
