"""Cast (6, 9, 13, 19, 21, 23, 24, 25) and CastLike (15, 19, 21, 23, 24, 25): every pair of
element types the opset names -- bool, the integers (int4/uint4 from 21, int2/uint2 from 25),
float16/32/64, bfloat16 (13+), the float8 types with saturate 0 and 1 (19+), float4e2m1 (23+),
float8e8m0 with its round modes (24+) and strings (9+) -- over the values that decide a cast:
NaN, +-inf, -0, subnormals, the target's largest value and the ties just past it, ties of
rounding and values a hair off them, integer extremes (wrapping into narrower integers),
floats truncated toward zero. Only results the spec defines are drawn: a float cast to an
integer type truncates to a value inside it, float8e8m0 gets no negative numbers (nor zero,
NaN, inf or out-of-range values outside the spec's two tabled modes), float4e2m1 (which has
no inf or NaN) nothing it cannot hold, and strings hold numeric literals only."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np

from refmnn.dtypes import FLOATS, DType
from refmnn.ops.cast import _cast_numeric

from ._sweep import Sample, SampleContext, Sweep, Tol

_INTS = (DType.int8, DType.int16, DType.int32, DType.int64, DType.uint8, DType.uint16,
         DType.uint32, DType.uint64)
_FLOAT8 = (DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2, DType.float8e5m2fnuz)
_SUB_BYTE_INTS = (DType.int4, DType.uint4, DType.int2, DType.uint2)
_NARROW = (*_FLOAT8, DType.float4e2m1, DType.float8e8m0)
"""The float types of one byte (or less), whose every value can be listed."""
_E8M0_MIN, _E8M0_MAX = 2.0 ** -127, 2.0 ** 127


def _types(opset: int) -> list[DType]:
    """The element types Cast (and CastLike) take at ``opset``."""
    types = [DType.bool, *_INTS, DType.float16, DType.float32, DType.float64]
    types += [DType.string] if opset >= 9 else []
    types += [DType.bfloat16] if opset >= 13 else []
    types += list(_FLOAT8) if opset >= 19 else []
    types += [DType.int4, DType.uint4] if opset >= 21 else []
    types += [DType.float4e2m1] if opset >= 23 else []
    types += [DType.float8e8m0] if opset >= 24 else []
    types += [DType.int2, DType.uint2] if opset >= 25 else []
    return types


def _int_range(dtype: DType) -> tuple[int, int]:
    info = ml_dtypes.iinfo(dtype.numpy)
    return int(info.min), int(info.max)


def _grid(dtype: DType) -> np.ndarray:
    """The finite values of a one-byte float type, ascending (float64)."""
    count = 16 if dtype is DType.float4e2m1 else 256
    values = np.arange(count, dtype=np.uint8).view(dtype.numpy).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def _neighbours(rng: np.random.Generator, target: DType, size: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """``size`` pairs of adjacent finite values of the float type ``target`` (float64), of
    every magnitude it holds, subnormals included."""
    if target in _NARROW:
        grid = _grid(target)
        at = rng.integers(0, len(grid) - 1, size)
        return grid[at], grid[at + 1]
    info = ml_dtypes.finfo(target.numpy)
    magnitude = 2.0 ** rng.uniform(info.minexp - info.nmant - 1, info.maxexp, size)
    with np.errstate(over="ignore"):
        low = (np.where(rng.random(size) < 0.5, -1.0, 1.0) * magnitude).astype(target.numpy)
    bits = np.dtype(f"u{target.itemsize}")
    high = (low.view(bits) + bits.type(1)).view(target.numpy).astype(np.float64)
    low = low.astype(np.float64)
    ok = np.isfinite(low) & np.isfinite(high)
    return np.where(ok, low, 1.0), np.where(ok, high, np.nextafter(np.float32(1.0), 2.0))


def _edges(source: DType, target: DType) -> list[float]:
    """The values where a cast from ``source`` to ``target`` changes behaviour: the target's
    largest value, the tie just past it and values a hair either side, twice it, its
    smallest normal and subnormal and the ties around them; an integer target's ends and the
    floats that truncate to them; the source's own extremes."""
    values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5]
    if target is DType.float8e8m0:
        values += [_E8M0_MAX, 1.5 * _E8M0_MAX, 2.0 * _E8M0_MAX, _E8M0_MIN, 2.0 * _E8M0_MIN,
                   1.25 * _E8M0_MIN, 1.5 * _E8M0_MIN, 1.75 * _E8M0_MIN, 2.0 ** -130, 2.0 ** -149,
                   1.5, 3.0, 0.75, 1e300]
    elif target.is_float:
        info = ml_dtypes.finfo(target.numpy)
        top = float(info.max)
        ulp = top * 2.0 ** -(info.nmant + 1) if target is not DType.float4e2m1 else 2.0
        tie = top + ulp / 2
        sub = float(info.smallest_subnormal)
        for v in (top, tie, tie * (1 + 2.0 ** -20), tie * (1 - 2.0 ** -20), 2 * top,
                  float(info.tiny), sub, sub / 2, 1.5 * sub, 0.75 * sub, sub / 4):
            values += [v, -v]
    elif target.is_integer:
        low, high = _int_range(target)
        values += [float(low), float(high), float(np.nextafter(float(high + 1), -np.inf)),
                   float(np.nextafter(float(low - 1), np.inf)), high - 0.5, low + 0.5,
                   float(high + 1), float(low - 1)]
    if source.is_float:
        info = ml_dtypes.finfo(source.numpy)
        for v in (float(info.max), float(info.tiny), float(info.smallest_subnormal)):
            values += [v, -v]
    return values


def _precision(dtype: DType) -> int:
    """Significant bits of a float type (the implicit one included)."""
    return int(ml_dtypes.finfo(dtype.numpy).nmant) + 1


def _reals(rng: np.random.Generator, source: DType, target: DType, size: int) -> np.ndarray:
    """``size`` real numbers (float64) to cast from the float type ``source``: ordinary
    values of every scale, random bit patterns of the source (NaN payloads, subnormals, huge
    values), the target's ties (exact midpoints and ones a source ulp or 2^-40 off, where a
    cast through float32 would round twice), the edges of :func:`_edges`, NaN and +-inf, and
    for an integer target values spread over its range with fractions to truncate."""
    ordinary = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size)
    if source in _NARROW:
        codes = rng.integers(0, 16 if source is DType.float4e2m1 else 256, size).astype(np.uint8)
    else:
        bits = np.dtype(f"u{source.itemsize}")
        codes = rng.integers(0, 256, size * source.itemsize).astype(np.uint8).view(bits)
    with np.errstate(over="ignore", invalid="ignore"):
        patterns = codes.view(source.numpy).astype(np.float64)
    edges = np.array(_edges(source, target))
    edges = edges[rng.integers(0, len(edges), size)]
    specials = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0], size)
    pools = [ordinary, patterns, edges, specials]
    weights = [0.25, 0.15, 0.25, 0.1]
    if target.is_float:
        low, high = _neighbours(rng, target, size)
        middle = (low + high) / 2
        offset = 2.0 ** np.where(rng.random(size) < 0.5, -40, -_precision(source) - 1)
        if target is DType.float8e8m0:  # round_mode nearest: ties halfway in the linear scale
            middle = 1.5 * low
        off = middle * (1 + np.where(rng.random(size) < 0.5, -offset, offset))
        ties = np.where(rng.random(size) < 0.5, middle, np.where(rng.random(size) < 0.3, low,
                                                                 off))
        pools.append(ties)
        weights.append(0.25)
    elif target.is_integer:
        low_int, high_int = _int_range(target)
        spread = rng.uniform(low_int, float(high_int) + 1, size)
        small = rng.integers(max(low_int, -40), min(high_int, 40) + 1, size).astype(np.float64)
        pools.append(np.where(rng.random(size) < 0.5, spread, small) + rng.choice(
            [0.0, 0.5, -0.5, 0.25, 0.99, -0.99], size))
        weights.append(0.3)
    pick = rng.choice(len(pools), size, p=np.array(weights) / sum(weights))
    return np.choose(pick, pools)


def _int_values(rng: np.random.Generator, source: DType, target: DType, size: int
                ) -> list[int]:
    """``size`` integers of the integer type ``source``: its extremes, values over its whole
    range, small ones, an integer target's ends and their neighbours (wrapping), a float
    target's ties (2^e + 2^(e - p), and one more: rounding through float32 first would lose
    it), powers of two one either side and the target's largest value and the tie past it."""
    low, high = _int_range(source)
    picks: list[int] = []
    for _ in range(size):
        kind = int(rng.integers(0, 5))
        if kind == 0:
            value = int(rng.choice([low, high, low + 1, high - 1, 0, 1, -1]))
        elif kind == 1:
            value = low + int(rng.integers(0, 2 ** 62)) * (high - low) // 2 ** 62
        elif kind == 2:
            value = int(rng.integers(-20, 21))
        elif target.is_integer:
            t_low, t_high = _int_range(target)
            value = int(rng.choice([t_low, t_high])) + int(rng.integers(-2, 3))
        elif target.is_float and target is not DType.float8e8m0 and kind == 3:
            p = _precision(target)
            e = int(rng.integers(p, 64))
            value = 2 ** e + 2 ** (e - p) + int(rng.choice([0, 1, -1]))
            value = -value if rng.random() < 0.3 else value
        elif target.is_float:
            info = ml_dtypes.finfo(target.numpy)
            top = float(info.max)
            e = int(rng.integers(1, 64))
            value = int(rng.choice([2 ** e + 1, 2 ** e - 1, 2 ** e, 3 * 2 ** (e - 1)] + (
                [int(top), int(top * (1 + 2.0 ** -(info.nmant + 2))) + int(rng.integers(-1, 2))]
                if top < 2 ** 64 else [])))
        else:
            value = int(rng.integers(-5, 6))
        picks.append(value if low <= value <= high else int(rng.integers(max(low, -3), 4)))
    return picks


def _defined(x: np.ndarray, source: DType, target: DType, attrs: dict[str, object]
             ) -> np.ndarray:
    """Where the spec defines the cast of ``x`` (float64 of the source values) to ``target``:
    a float must truncate into an integer target's range; float4e2m1 has no inf or NaN and
    its largest value is 6 (7 rounds to 8); float8e8m0 takes no negative values, -0
    included, and zero, NaN, inf and values past its range only in the spec's table's two
    modes (saturate with round_mode up, no saturation with nearest)."""
    with np.errstate(invalid="ignore"):
        if target.is_integer and source.is_float:
            low, high = _int_range(target)
            return np.array([bool(np.isfinite(v)) and low <= int(np.trunc(v)) <= high
                             for v in x.reshape(-1)], dtype=bool).reshape(x.shape)
        if target is DType.float4e2m1:
            return np.isfinite(x) & (np.abs(x) < 7)
        if target is DType.float8e8m0:
            saturate, mode = attrs.get("saturate", 1), attrs.get("round_mode", "up")
            if (saturate, mode) in ((1, "up"), (0, "nearest")):
                return np.isnan(x) | ~np.signbit(x)
            return (x >= _E8M0_MIN) & (x <= _E8M0_MAX)
    return np.ones(x.shape, dtype=bool)


def _as_source(values: np.ndarray, source: DType) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(source.numpy)


def _numbers(ctx: SampleContext, source: DType, target: DType, shape: tuple[int, ...],
             attrs: dict[str, object]) -> np.ndarray:
    """An array of the numeric (or bool) type ``source`` whose cast to ``target`` the spec
    defines; undefined elements are replaced by 1 (a value of every type)."""
    rng = ctx.rng
    size = int(np.prod(shape))
    if source is DType.bool:
        x = rng.integers(0, 2, size).astype(bool)
    elif source.is_integer:
        ints = _int_values(rng, source, target, size)
        x = np.array(ints, dtype=object).astype(
            np.int64 if source.numpy.kind == "V" else source.numpy).astype(source.numpy)
    else:
        x = _as_source(_reals(rng, source, target, size), source)
    wide = x.astype(np.float64)
    x[~_defined(wide, source, target, attrs)] = _as_source(np.array(1.0), source)
    return x.reshape(shape)


_NAN_SPELLINGS = ("NaN", "nan", "NAN")
_INF_SPELLINGS = ("INF", "inf", "+INF", "+inf", "Inf", "iNf")


def _spell(rng: np.random.Generator, value: float) -> str:
    """A numeric literal of ``value``: Python's shortest repr, 9 significant digits, or
    scientific with a capital E; a '+' now and then; the spec's spellings of NaN and inf."""
    if np.isnan(value):
        return str(rng.choice(_NAN_SPELLINGS))
    if np.isinf(value):
        text = str(rng.choice(_INF_SPELLINGS))
        return text if value > 0 else "-" + text.lstrip("+")
    kind = int(rng.integers(0, 3))
    text = repr(value) if kind == 0 else f"{value:.9g}" if kind == 1 else f"{value:E}"
    return "+" + text if value > 0 and rng.random() < 0.2 else text


def _strings(ctx: SampleContext, target: DType, shape: tuple[int, ...],
             attrs: dict[str, object]) -> np.ndarray:
    """An object array of numeric literals the spec reads for ``target``: floats (of every
    scale, ties, edges, NaN and inf, spelled as :func:`_spell`) for a float target; integer
    literals within an integer target's range (a '+' now and then); "0" and other decimal
    integers for bool; any words for a string target."""
    rng = ctx.rng
    size = int(np.prod(shape))
    if target is DType.string:
        texts = [str(rng.choice(["a", "hello", "1.5", "NaN", "", "-0", "x y"])) for _ in
                 range(size)]
    elif target is DType.bool:
        texts = [str(rng.choice(["0", "1", "2", "10", "00"])) for _ in range(size)]
    elif target.is_integer:
        low, high = _int_range(target)
        texts = []
        for _ in range(size):
            value = int(rng.choice([low, high, 0, int(rng.integers(-100, 101)),
                                    low + int(rng.integers(0, 2 ** 62)) * (high - low)
                                    // 2 ** 62]))
            value = min(max(value, low), high)
            texts.append(("+" if value > 0 and rng.random() < 0.3 else "") + str(value))
    else:
        reals = _reals(rng, DType.float64, target, size)
        reals = np.where(_defined(reals, DType.float64, target, attrs), reals, 1.0)
        texts = [_spell(rng, float(v)) for v in reals]
    return np.array(texts, dtype=object).reshape(shape)


def _shape(rng: np.random.Generator) -> tuple[int, ...]:
    """Rank 0-3 (0 seldom), dims 1-6 (0 seldom)."""
    rank = int(rng.choice([0, 1, 1, 2, 2, 3]))
    dims = [int(d) for d in rng.integers(1, 7, rank)]
    if dims and rng.random() < 0.04:
        dims[int(rng.integers(0, rank))] = 0
    return tuple(dims)


def _pick(rng: np.random.Generator, types: list[DType]) -> DType:
    return types[int(rng.integers(0, len(types)))]


def _attributes(rng: np.random.Generator, opset: int, target: DType) -> dict[str, object]:
    """saturate (19+: written 0 or 1 for a float8 target, 1 now and then for the others, or
    left to its default 1) and round_mode (24+: up, down, nearest or the default up); for a
    float8e8m0 target half the draws take one of the spec's two tabled modes."""
    attrs: dict[str, object] = {}
    if opset >= 19 and (target in _FLOAT8 or target is DType.float8e8m0) and rng.random() < 0.8:
        attrs["saturate"] = int(rng.integers(0, 2))
    elif opset >= 19 and rng.random() < 0.2:  # onnxruntime refuses saturate=0 for the others
        attrs["saturate"] = 1
    if opset >= 24 and rng.random() < (0.9 if target is DType.float8e8m0 else 0.2):
        attrs["round_mode"] = str(rng.choice(["up", "down", "nearest"]))
    if target is DType.float8e8m0 and rng.random() < 0.5:
        attrs.update({"saturate": 1, "round_mode": "up"} if rng.random() < 0.5 else
                     {"saturate": 0, "round_mode": "nearest"})
    return attrs


def _draw_pair(ctx: SampleContext, opset: int) -> tuple[np.ndarray, DType, dict[str, object]]:
    """The input, target type and attributes of a random cast at ``opset``."""
    rng = ctx.rng
    types = _types(opset)
    source, target = _pick(rng, types), _pick(rng, types)
    if opset >= 24 and rng.random() < 0.1:  # a type of its own rules: drawn more often
        target = DType.float8e8m0
    if rng.random() < 0.3:  # a float on one side most of the time: where the rounding is
        wide = [t for t in types if t in FLOATS and t not in _NARROW]
        source, target = (_pick(rng, wide), target) if rng.random() < 0.5 else \
            (source, _pick(rng, wide))
    attrs = _attributes(rng, opset, target)
    shape = _shape(rng)
    if source is DType.string:
        x = _strings(ctx, target, shape, attrs)
    elif target is DType.string:
        x = _numbers(ctx, source, DType.float64, shape, attrs)
    else:
        x = _numbers(ctx, source, target, shape, attrs)
    return x, target, attrs


def draw_cast(ctx: SampleContext, opset: int) -> Sample:
    """A random Cast: a source and a target type of the opset (a wide float on one side
    a third of the time), rank 0-3 data from :func:`_numbers` or :func:`_strings`, and
    saturate / round_mode as :func:`_attributes`."""
    x, target, attrs = _draw_pair(ctx, opset)
    return Sample((x,), {"to": target.value, **attrs})


def draw_cast_like(ctx: SampleContext, opset: int) -> Sample:
    """A random CastLike: as :func:`draw_cast`, the target type given by a second input of
    rank 0-2 whose values are not read."""
    x, target, attrs = _draw_pair(ctx, opset)
    shape = tuple(int(d) for d in ctx.rng.integers(1, 3, int(ctx.rng.integers(0, 3))))
    like = np.full(shape, "t", dtype=object) if target is DType.string else \
        np.ones(shape, dtype=target.numpy)
    return Sample((x, like), attrs)


def _target(sample: Sample) -> DType:
    """The type a Cast or CastLike sample casts to."""
    if "to" in sample.attrs:
        return DType(sample.attrs["to"])
    like = sample.inputs[1]
    return DType.string if like.dtype == object else DType.from_numpy(like.dtype)


_WIDE_SOURCES = (DType.float64, DType.int32, DType.uint32, DType.int64, DType.uint64)
"""The sources the peers take to a narrow float through a float32 (rounding twice)."""
_ONCE_TARGETS = (*_NARROW, DType.bfloat16)
_FNUZ = (DType.float8e4m3fnuz, DType.float8e5m2fnuz)


def _exact(x: np.ndarray, source: DType) -> list[Fraction | None]:
    """The exact value of each element (None: NaN or inf)."""
    out: list[Fraction | None] = []
    for v in x.reshape(-1):
        if source is DType.string:
            text = str(v)
            finite = np.isfinite(float(text))
            out.append(Fraction(text) if finite else None)
        elif source.is_integer:
            out.append(Fraction(int(v)))
        else:
            out.append(Fraction(float(v)) if np.isfinite(float(v)) else None)
    return out


def _rounds_twice(sample: Sample, source: DType, target: DType) -> bool:
    """Whether some element, read first into float32 (a string: into float64 or float32, as
    the peers read literals), lands on a point where ``target``'s rounding changes (a tie,
    or a power of two for float8e8m0 up/down) that the exact value is not on: rounding the
    intermediate and its neighbour toward the exact value give different results. The
    single rounding of a float32/float64 intermediate is refmnn's (it rounds once)."""
    x = sample.inputs[0]
    attrs = sample.attrs
    saturate, mode = int(attrs.get("saturate", 1)), str(attrs.get("round_mode", "up"))
    exact = _exact(x, source)
    if source is DType.string:
        first64 = np.array([float(str(v)) for v in x.reshape(-1)])
        firsts = [first64, first64.astype(np.float32)]
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            firsts = [x.reshape(-1).astype(np.float32)]
    for first in firsts:
        beyond = first.copy()
        for i, value in enumerate(exact):
            if value is None or not np.isfinite(first[i]):
                continue
            step = (value > Fraction(float(first[i]))) - (value < Fraction(float(first[i])))
            if step:
                beyond[i] = np.nextafter(first[i], first.dtype.type(step * np.inf))
        with np.errstate(over="ignore", invalid="ignore"):
            a = _cast_numeric(first, target, saturate, mode).astype(np.float64)
            b = _cast_numeric(beyond, target, saturate, mode).astype(np.float64)
        if not np.array_equal(a, b, equal_nan=True):
            return True
    return False


def known_cast(sample: Sample, opset: int, peer: str) -> str | None:
    """The peers' settled differences on Cast and CastLike (see each reason)."""
    x, target = sample.inputs[0], _target(sample)
    source = DType.string if x.dtype == object else DType.from_numpy(x.dtype)
    if target is DType.string and peer == "onnx.reference":
        return ("onnx.reference 1.23.2 returns a string tensor as a NumPy '<U' array, not "
                "ONNX's object array of str, so the judge stops at the dtype")
    if peer == "onnxruntime" and source is target and source.numpy.kind != "O" and \
            target.value in (17, 18, 19, 20) and sample.attrs.get("saturate", 1) and \
            np.isinf(x.astype(np.float32)).any():
        return ("onnxruntime 1.32 returns a float8 cast to its own type unchanged, keeping "
                "+-inf; with saturate the spec's table maps 'Inf' to FLT_MAX for every float8 "
                "target, whatever the source (onnx.reference agrees with the reference)")
    if target is DType.string and (source.is_float or source is DType.bool):
        return ("the spec fixes no format for a number cast to string ('plain floating-point "
                "representation (such as \"314.15926\")'): onnxruntime 1.32 prints 8 "
                "significant digits (float64 too, which then no longer reads back), 'NaN', "
                "'INF', '-0', bool as '1'/'0'; refmnn the shortest string that reads back as "
                "the source's value, 'nan', 'inf', 'True'/'False' (as onnx.reference)")
    if source is DType.string:
        if peer == "onnx.reference" and target is DType.bool and any(
                float(v) == 0 for v in x.reshape(-1)):
            return ("onnx.reference 1.23.2 casts strings to bool with NumPy's astype, which "
                    "makes every non-empty string true; the spec reads strings as numeric "
                    "literals, and '0' is zero (onnxruntime 1.32 also gives false)")
        if peer == "onnxruntime" and target is DType.float16 and any(
                np.float32(float(v)).astype(np.float16) != np.float16(float(v))
                for v in x.reshape(-1) if not np.isnan(float(v))):
            return ("onnxruntime 1.32 reads a string cast to float16 as a float32 first and "
                    "rounds that again ('-0.0295791626' lands on a float16 tie in float32 and "
                    "goes to even, -0.0295715); the literal's nearest float16 is -0.0295868")
        if target.is_float and target is not DType.float64 and _rounds_twice(
                sample, source, target):
            return ("the peers read a numeric literal into a float64 (or float32) and round "
                    "that again: a literal just off a tie of the target lands on it and goes "
                    "to even ('1.00000005960464477550' gives float32 1, not 1 + 2^-23); the "
                    "spec reads the literal's value, which a cast rounds once")
        if opset < 24 and target in _FNUZ and sample.attrs.get("saturate", 1) == 1 and any(
                np.isinf(float(str(v))) for v in x.reshape(-1)):
            return _FNUZ_INF
        if target is DType.float8e8m0:
            return _known_e8m0(np.array([float(str(v)) for v in x.reshape(-1)]), sample, peer)
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        wide = x.astype(np.float64)
    if source in _WIDE_SOURCES and target in _ONCE_TARGETS and _rounds_twice(
            sample, source, target):
        return ("the peers cast float64 and the 32/64-bit integers to bfloat16, float8, "
                "float4e2m1 and float8e8m0 through float32, rounding twice (float64 1 + 2^-8 + "
                "2^-40 gives bfloat16 1, not 1 + 2^-7; int64 2^40 + 1 float8e8m0 up 2^40, not "
                "2^41): a cast rounds the value once")
    if opset < 24 and target in _FNUZ and sample.attrs.get("saturate", 1) == 1 and (
            np.isinf(wide)).any():
        return _FNUZ_INF
    if target is DType.float8e8m0 and (reason := _known_e8m0(wide, sample, peer)):
        return reason
    if peer == "onnxruntime" and "to" not in sample.attrs and target is DType.float8e8m0 and (
            sample.attrs.get("round_mode", "up") != "up"):
        return ("onnxruntime 1.32's CastLike-24/25 ignores round_mode and rounds float8e8m0 "
                "up (Cast honours it)")
    if peer == "onnxruntime" and source is DType.float8e8m0 and target is DType.bool and (
            wide == _E8M0_MIN).any():
        return ("onnxruntime 1.32 casts float8e8m0's 2^-127 (code 0) to false (it tests the "
                "byte for nonzero); the spec: 'all else to True'")
    if peer == "onnxruntime" and target is DType.float8e5m2 and sample.attrs.get(
            "saturate", 1) == 0 and source is not DType.bool and (
            (np.abs(wide) >= 61440) & (np.abs(wide) < 65536)).any():
        return ("onnxruntime 1.32 casts a value that rounds past float8e5m2's largest (57344) "
                "to NaN without saturation; the spec's table: '[x] > FLT_MAX' is Inf for E5M2 "
                "(tests/test_reference_oracles.py, 61440)")
    if peer == "onnxruntime" and target is DType.bool and source in _FLOAT8 and (
            (wide == 0) & np.signbit(wide)).any():
        return ("onnxruntime 1.32 casts a float8 -0 to true (it tests the byte, 0x80, for "
                "nonzero); the spec: 'Casting from floating point to bool: +/- 0.0 to False'")
    if peer == "onnxruntime" and target in _SUB_BYTE_INTS and source.is_float and (
            np.abs(wide - np.trunc(wide)) >= 0.5).any():
        return ("onnxruntime 1.32 rounds a float cast to int4/uint4/int2/uint2 half away from "
                "zero (2.5 -> 3) where it truncates for int8 and the wider types; the spec's "
                "string example ('100.5' to an integer may yield 100), onnx.reference and "
                "ml_dtypes truncate toward zero")
    if peer == "onnxruntime" and source is DType.float64 and target is DType.float16:
        with np.errstate(over="ignore", invalid="ignore"):
            twice = x.astype(np.float32).astype(np.float16)
        if (twice.view(np.uint16) != x.astype(np.float16).view(np.uint16)).any():
            return ("onnxruntime 1.32 casts float64 to float16 through float32, rounding twice "
                    "(1 + 2^-11 + 2^-40 gives 1, not 1 + 2^-10): a cast rounds the value once")
    if peer == "onnx.reference" and source is target is DType.float8e8m0 and sample.attrs.get(
            "round_mode", "up") == "up" and (wide == _E8M0_MIN).any():
        return ("onnx.reference 1.23.2 rounds float8e8m0's least value 2^-127 (a float32 "
                "subnormal) up to 2^-126 when casting float8e8m0 to itself; a value the type "
                "holds casts to itself")
    if peer == "onnx.reference" and target is DType.float8e8m0 and sample.attrs.get(
            "saturate", 1) == 1 and (np.abs(wide) > float(np.finfo(np.float32).max)).any():
        return ("onnx.reference 1.23.2 casts +inf (and a float64 past float32's range) to "
                "float8e8m0 NaN with saturate=1; the spec's table: Inf and x > E8M0_MAX give "
                "E8M0_MAX with saturation (onnxruntime 1.32 agrees)")
    return None


_FNUZ_INF = ("Cast-19, 21 and 23's saturate table: 'Inf | FLT_MAX | NaN | FLT_MAX | NaN' (E4M3FN, "
             "E4M3FNUZ, E5M2, E5M2FNUZ): +-inf to an FNUZ type is NaN (Cast-24 made it "
             "FLT_MAX); onnxruntime 1.32 and onnx.reference 1.23.2 give +-FLT_MAX at every "
             "opset")

_E8M0_INF_REASON = (
    "the float8e8m0 table: 'Inf | E8M0_MAX | NaN' and 'x > E8M0_MAX | E8M0_MAX | NaN' "
    "(saturate + up | non-saturate + nearest); onnx.reference 1.23.2 gives NaN for +inf, and "
    "for a literal beyond float32's range, which it reads as a float32 (+inf): "
    "'1.97876123e+299' to float8e8m0, saturate, up")


def _e8m0_inf(values: np.ndarray, sample: Sample, peer: str) -> bool:
    """Whether onnx.reference meets a value that is +inf in float32 on a saturating
    float8e8m0 cast."""
    with np.errstate(over="ignore"):
        return peer == "onnx.reference" and sample.attrs.get("saturate", 1) == 1 and bool(
            np.isposinf(values.astype(np.float32)).any())


_E8M0_LOW_REASON = (
    "the float8e8m0 table: '0 | 0 | NaN' and 'x < E8M0_MIN | E8M0_MIN | NaN' (saturate + up | "
    "non-saturate + nearest; saturate decides in the other modes); onnx.reference 1.23.2 "
    "reads float32's exponent field (zero and the float32 subnormals below 2^-127 give "
    "2^-127, or 2^-126 rounding up, never NaN; onnxruntime 1.32 follows the table)")


def _e8m0_low(wide: np.ndarray, peer: str) -> bool:
    """Whether a float8e8m0 sample holds zero or a value up to 2^-127 (which onnx.reference
    mishandles in every mode)."""
    return peer == "onnx.reference" and bool(((wide >= 0) & (wide <= _E8M0_MIN)).any())


def _known_e8m0(values: np.ndarray, sample: Sample, peer: str) -> str | None:
    """The reason onnx.reference's float8e8m0 cast of ``values`` (the source's values, or a
    string's literals) differs, or None: +inf in float32 (:func:`_e8m0_inf`), else values up to
    2^-127 (:func:`_e8m0_low`)."""
    if _e8m0_inf(values, sample, peer):
        return _E8M0_INF_REASON
    if _e8m0_low(values, peer):
        return _E8M0_LOW_REASON
    return None


_EXACT = {dtype: Tol(0.0, 0.0, "a cast rounds once, to nearest with ties to even (float8: the "
                     "spec's tables): one right answer") for dtype in FLOATS}
_EXACT[DType.string] = Tol(0.0, 0.0, "strings are compared as they are (the judge ignores "
                           "tolerances for them; the table has no entry)")

SWEEPS = (
    Sweep("Cast", (6, 9, 13, 19, 21, 23, 24, 25), draw_cast, known=known_cast,
          tolerance=_EXACT),
    Sweep("CastLike", (15, 19, 21, 23, 24, 25), draw_cast_like, known=known_cast,
          tolerance=_EXACT),
)
