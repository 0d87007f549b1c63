"""Generators: Trilu (upper and lower, k anywhere including past the matrix, batched, empty
matrices), EyeLike (k, output dtype, non-square), Range (integer and float, either sign of
delta, empty) and ConstantOfShape (value dtypes, empty and scalar shapes)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import Sample, SampleContext, Sweep


def draw_trilu(ctx: SampleContext, opset: int) -> Sample:
    """Trilu: input of rank 2-4 (matrices 0-5 x 0-5), k absent or in [-rows-2, cols+2] (now
    and then +-10**12), upper absent, 0 or 1."""
    rng = ctx.rng
    rank = int(rng.integers(2, 5))
    shape = [int(d) for d in rng.integers(1, 4, rank - 2)]
    rows, cols = (int(d) for d in rng.integers(0 if rng.random() < 0.1 else 1, 6, 2))
    x = ctx.make(shape + [rows, cols])
    attrs = {"upper": int(rng.integers(0, 2))} if rng.random() < 0.7 else {}
    if rng.random() < 0.2:
        return Sample((x,), attrs)
    k = int(rng.integers(-rows - 2, cols + 3))
    if rng.random() < 0.08:
        k = int(rng.choice([-1, 1])) * 10**12
    return Sample((x, np.array(k, np.int64)), attrs)


_EYE_TYPES = (DType.float32, DType.float64, DType.int64, DType.int32, DType.uint8, DType.bool)


def draw_eye_like(ctx: SampleContext, opset: int) -> Sample:
    """EyeLike: a 2-D input (1-6 x 1-6, now and then empty), k in [-rows-2, cols+2] or
    absent, the output dtype absent (the input's) or one of float32/64, int64/32, uint8,
    bool."""
    rng = ctx.rng
    rows, cols = (int(d) for d in rng.integers(0 if rng.random() < 0.05 else 1, 7, 2))
    attrs: dict[str, object] = {}
    if rng.random() < 0.8:
        attrs["k"] = int(rng.integers(-rows - 2, cols + 3))
    if rng.random() < 0.6:
        attrs["dtype"] = _EYE_TYPES[int(rng.integers(0, len(_EYE_TYPES)))].value
    return Sample((ctx.make((rows, cols)),), attrs)


def draw_range(ctx: SampleContext, opset: int) -> Sample:
    """Range: integer start/limit in [-12, 12] and delta in [-5, 5] \\ {0}; floats in
    quarter steps (exact counts), tenths (a quotient next to a whole number, rounding
    decides) or arbitrary normals; about half the draws go the wrong way (empty)."""
    rng = ctx.rng
    if not ctx.is_float:
        start, limit = (int(v) for v in rng.integers(-12, 13, 2))
        delta = int(rng.choice([-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]))
        return Sample((ctx.scalar(start), ctx.scalar(limit), ctx.scalar(delta)))
    roll = rng.random()
    if roll < 0.35:
        start, limit = (float(v) / 4 for v in rng.integers(-40, 41, 2))
        delta = float(rng.choice([-3, -2, -1, 1, 2, 3])) / 4 * int(rng.integers(1, 4))
    elif roll < 0.7:  # tenths: (limit - start) / delta lands next to a whole number
        start, limit = (float(v) / 10 for v in rng.integers(-30, 31, 2))
        delta = float(rng.choice([-3, -2, -1, 1, 2, 3])) / 10
    else:
        start, limit = (float(v) for v in rng.standard_normal(2) * 5)
        delta = float(rng.choice([-1, 1]) * rng.uniform(0.1, 2))
    return Sample((ctx.scalar(start), ctx.scalar(limit), ctx.scalar(delta)))


def draw_constant_of_shape(ctx: SampleContext, opset: int) -> Sample:
    """ConstantOfShape: a shape of length 0-4 (dims 0-4), the value a one-element tensor of
    the sweep dtype (absent now and then: float32 zeros)."""
    rng = ctx.rng
    shape = rng.integers(0 if rng.random() < 0.15 else 1, 5, int(rng.integers(0, 5)))
    attrs = {}
    if rng.random() < 0.85:
        attrs["value"] = ctx.make((1,))
    return Sample((shape.astype(np.int64),), attrs)


SWEEPS = (
    Sweep("Trilu", (14,), draw_trilu, dtypes=(DType.float32, DType.int64, DType.bool)),
    Sweep("EyeLike", (9, 22), draw_eye_like, dtypes=(DType.float32, DType.int64, DType.int32)),
    Sweep("Range", (11,), draw_range,
          dtypes=(DType.float32, DType.float64, DType.int64, DType.int32)),
    Sweep("ConstantOfShape", (9, 20, 21), draw_constant_of_shape,
          dtypes=(DType.float32, DType.int64, DType.int32, DType.bool, DType.float16)),
)
