"""Round once: exact conversions to the narrow float types through a round-to-odd float32.

ml_dtypes converts float64 and the wide integers to bfloat16, the float8 types and float4e2m1
through float32, rounding twice: float64 1 + 2^-8 + 2^-40 rounds to float32 1 + 2^-8 (a
bfloat16 tie), which then goes to even, 1.0 -- a single rounding gives 1 + 2^-7. The cure
(Boldo and Melquiond, "When double rounding is odd", 2005) is to round the first step *to
odd*: truncate toward zero and, when that dropped anything, set the last mantissa bit. An
intermediate of p bits rounded to odd and then rounded to nearest (ties to even) at q <= p - 2
bits gives the value rounded once to q bits, because

* a tie of the q-bit format is a p-bit number with its last bit 0 (it has at most q + 1
  significant bits): an odd intermediate is never one, so only an exact tie is seen as one;
* truncation moves the value toward zero by less than one p-bit step and never across a p-bit
  number, so it never crosses a q-bit number or tie (both are p-bit numbers), and the set
  last bit keeps a value that was strictly between two of them strictly between them.

float32 has 24 bits (bfloat16: 8, the float8 types: at most 4, float4e2m1: 2) and float64 53,
and the same holds in the subnormal range (float32 keeps 16 or more bits below the last bit
of every narrow type) and for overflow (the truncated value stays a finite float32 as long as
the source is finite, which rounds past the narrow type's largest as the source would).
Round-to-odd composes: odd(53 bits) then odd(24 bits) is odd(24 bits), so an integer beyond
2^53 is first rounded to odd in float64 with integer arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

_EXACT_IN_FLOAT64 = 2 ** 53
"""Integers of magnitude up to this convert to float64 exactly."""


def _odd_float64_of_int(value: int) -> float:
    """The integer ``value`` rounded to odd at float64's 53 bits (exact up to 2^53)."""
    magnitude = abs(value)
    drop = magnitude.bit_length() - 53
    if drop <= 0:
        return float(value)
    kept = magnitude >> drop
    if magnitude & ((1 << drop) - 1):
        kept |= 1
    return math.copysign(math.ldexp(float(kept), drop), value)


def odd_float64(x: np.ndarray) -> np.ndarray:
    """``x`` (any real type) as float64, rounded to odd where float64 cannot hold it (only
    int64/uint64 beyond 2^53 can be inexact); NaN and +-inf stay."""
    if x.dtype.kind not in "iu" or x.dtype.itemsize < 8:
        return x.astype(np.float64)
    wide = x.astype(np.float64)
    big = np.abs(wide) >= _EXACT_IN_FLOAT64
    if big.any():
        wide[big] = [_odd_float64_of_int(int(v)) for v in x[big]]
    return wide


def odd_float32(x: np.ndarray) -> np.ndarray:
    """float64 ``x`` rounded to odd at float32's 24 bits: truncated toward zero to float32,
    then the last mantissa bit set when the truncation was inexact. A finite value past
    float32's range truncates to +-FLT_MAX (inexact: its last bit is already 1); NaN and
    +-inf stay."""
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = x.astype(np.float32)
        wide = nearest.astype(np.float64)
        away = np.abs(wide) > np.abs(x)  # rounded away from zero: step back toward it
        truncated = np.where(away, np.nextafter(nearest, np.float32(0)), nearest)
        inexact = truncated.astype(np.float64) != x
    bits = truncated.view(np.uint32) | inexact.astype(np.uint32)
    return np.where(np.isnan(x), nearest, bits.view(np.float32))


def round_once(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` (a real or bool array) converted to the narrow float type ``dtype`` (bfloat16, a
    float8 type or float4e2m1; ml_dtypes' own rounding: nearest, ties to even, its overflow)
    with a single rounding: float64 and the integers of 32 bits or more through a float32
    rounded to odd (see the module docstring); the rest through float32 exactly."""
    if x.dtype == np.float64 or (x.dtype.kind in "iu" and x.dtype.itemsize >= 4):
        return odd_float32(odd_float64(x)).astype(dtype)
    return x.astype(np.float32).astype(dtype)


def odd_float64_of_fraction(value: Fraction) -> float:
    """The rational ``value`` rounded to odd at float64's 53 bits (and in its subnormal range
    at its last bit, 2^-1074); past float64's range +-inf (every narrower type overflows
    there too)."""
    if value == 0:
        return 0.0
    magnitude = abs(value)
    num, den = magnitude.numerator, magnitude.denominator
    exponent = num.bit_length() - den.bit_length()  # 2^(exponent-1) <= value < 2^(exponent+1)
    scale = max(exponent - 54, -1074)  # the last kept bit's weight, 2^scale
    kept, rest = divmod(num << -scale, den) if scale < 0 else divmod(num, den << scale)
    sticky = rest != 0
    while kept.bit_length() > 53:
        sticky |= bool(kept & 1)
        kept >>= 1
        scale += 1
    kept |= int(sticky)
    if scale + kept.bit_length() > 1024:
        return math.copysign(math.inf, value)
    return math.copysign(math.ldexp(float(kept), scale), value)
