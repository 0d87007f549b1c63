"""Activations: Softmax, LogSoftmax and Hardmax before opset 13 (coerced to 2-D at axis) and
from 13 (along axis) over every axis of ranks 1-4; the element-wise activations with their
attributes varied; PRelu's slope broadcasting; Clip's bounds as attributes (6) and as optional
inputs (11+, integers from 12), min > max included."""

from __future__ import annotations

import math

import numpy as np

from refmnn.dtypes import DType

from ._sweep import (EXTREMAL, SMALL_INT, Draw, Sample, SampleContext, Sweep, Tol,
                     float16_in_float16)

_FLOATS = (DType.float32, DType.float64, DType.float16)
_INTS = (DType.int32, DType.int64)


def _shape(rng: np.random.Generator, low: int, high: int, empty: float = 0.0
           ) -> tuple[int, ...]:
    """Rank in [low, high], dims in [1, 5]; with probability ``empty`` one dim is 0."""
    shape = [int(d) for d in rng.integers(1, 6, int(rng.integers(low, high + 1)))]
    if shape and rng.random() < empty:
        shape[int(rng.integers(len(shape)))] = 0
    return tuple(shape)


def _data(ctx: SampleContext, shape: tuple[int, ...]) -> np.ndarray:
    """Values for an element-wise op: standard normal times 1 or 4, or (one time in eight)
    EXTREMAL (NaN, infinities, -0.0, subnormals, the extreme finite values)."""
    rng = ctx.rng
    if rng.random() < 0.125:
        return ctx.make(shape, EXTREMAL)
    x = ctx.make(shape)
    return x * x.dtype.type(4) if rng.random() < 0.5 and ctx.is_float else x


def _softmax_draw(op: str) -> Draw:
    def draw(ctx: SampleContext, opset: int) -> Sample:
        rng = ctx.rng
        shape = _shape(rng, 1, 4)
        rank = len(shape)
        if op == "Hardmax" and rng.random() < 0.5:
            x = ctx.make(shape, SMALL_INT)  # ties: the first maximum wins
        else:
            x = ctx.make(shape) * ctx.dtype.type(rng.choice([1, 10, 100]))
        default = -1 if opset >= 13 else 1
        if rng.random() < 0.25 and -rank <= default < rank:
            return Sample((x,), {})
        axis = int(rng.integers(rank))
        if opset >= 11 and rng.random() < 0.5:  # negative axes: from opset 11
            axis -= rank
        return Sample((x,), {"axis": axis})

    draw.__doc__ = (f"A random {op}: rank 1-4, any axis (negative ones from opset 11) or the "
                    "default (1 before opset 13, where the input is coerced to 2-D there, and "
                    "-1 from 13) when the rank has it; data up to 100x a standard normal"
                    + (", small integers half the time (ties)." if op == "Hardmax" else "."))
    return draw


_ATTRS: dict[str, dict[str, tuple[object, ...]]] = {
    "Celu": {"alpha": (0.1, 0.5, 1.0, 2.0)},
    "Elu": {"alpha": (0.0, 0.5, 1.0, 2.5)},
    "Selu": {"alpha": (0.5, 1.67326, 3.0), "gamma": (0.5, 1.0507, 2.0)},
    "LeakyRelu": {"alpha": (-0.5, 0.0, 0.01, 0.2, 3.0)},
    "HardSigmoid": {"alpha": (0.1, 0.2, 1 / 6, 1.0), "beta": (0.0, 0.25, 0.5, 0.9)},
    "HardSwish": {}, "Mish": {}, "Softplus": {}, "Softsign": {},
    "Gelu": {"approximate": ("none", "tanh")},
    "ThresholdedRelu": {"alpha": (-1.0, 0.0, 0.5, 1.0, 2.0)},
}
"""The attribute values each element-wise activation is drawn with (or left to default)."""


def _unary_draw(op: str) -> Draw:
    choices = _ATTRS[op]

    def draw(ctx: SampleContext, opset: int) -> Sample:
        rng = ctx.rng
        x = _data(ctx, _shape(rng, 0, 4, empty=0.05))
        attrs = {name: values[int(rng.integers(len(values)))]
                 for name, values in choices.items() if rng.random() < 0.8}
        return Sample((x,), attrs)

    names = ", ".join(f"{k} in {list(v)}" for k, v in choices.items()) or "no attributes"
    draw.__doc__ = (f"A random {op}: rank 0-4 (a zero-size dim now and then), data as "
                    f":func:`_data`; {names} (each left to its default a fifth of the time).")
    return draw


def draw_prelu(ctx: SampleContext, opset: int) -> Sample:
    """A random PRelu: X of rank 1-4; slope of a shape that broadcasts unidirectionally to
    X: a trailing part of X's shape with some dims 1, X's own shape, or [C, 1, ..., 1]."""
    rng = ctx.rng
    shape = _shape(rng, 1, 4)
    rank = len(shape)
    pick = rng.random()
    if pick < 0.3 and rank >= 2:
        slope_shape = (shape[1],) + (1,) * (rank - 2)
    elif pick < 0.45:
        slope_shape = shape
    else:
        tail = shape[rank - int(rng.integers(0, rank + 1)):]
        slope_shape = tuple(1 if rng.random() < 0.3 else d for d in tail)
    return Sample((_data(ctx, shape), ctx.make(slope_shape)))


def draw_clip(ctx: SampleContext, opset: int) -> Sample:
    """A random Clip: rank 0-4, data as :func:`_data`; min and max in [-3, 3] (min > max a
    quarter of the time; whole, and >= 0 for uint8, in an integer X), each present or not:
    attributes at opset 6, optional 0-d inputs of X's dtype from 11 (omitted: None, or
    dropped when trailing)."""
    rng = ctx.rng
    x = _data(ctx, _shape(rng, 0, 4, empty=0.05))
    low, high = sorted(float(v) for v in rng.integers(-12, 13, 2) / 4)
    if rng.random() < 0.25:
        low, high = high, low
    if not ctx.is_float:  # whole bounds, and none below 0 for an unsigned X
        low, high = (max(round(b), np.iinfo(ctx.dtype).min) for b in (low, high))
    bounds = [b if rng.random() < 0.7 else None for b in (low, high)]
    if opset < 11:
        return Sample((x,), {k: v for k, v in zip(("min", "max"), bounds) if v is not None})
    inputs = [x] + [None if b is None else ctx.scalar(b) for b in bounds]
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs))


def known_hardmax(sample: Sample, opset: int, peer: str) -> str | None:
    """Softmax/LogSoftmax/Hardmax: onnx.reference's per-axis reading of opsets 1 and 11
    (where it differs: the coerced rows are not the lines along its axis)."""
    if peer != "onnx.reference" or opset >= 13:
        return None
    x = sample.inputs[0]
    coerced = int(sample.attrs.get("axis", 1)) % x.ndim
    along = int(sample.attrs.get("axis", -1)) % x.ndim
    if along >= coerced and math.prod(x.shape[coerced:]) == x.shape[along]:
        return None  # the coerced rows are the lines along ``along``
    return ("onnx.reference 1.23.2 normalises along axis alone (default -1) before opset 13; "
            "opsets 1 and 11 coerce the input to 2-D [a_0 * ... * a_{k-1}, a_k * ... * a_{n-1}] "
            "at axis (default 1) and normalise each row; tests/test_reference_oracles.py::"
            "test_the_softmax_family_before_opset_13_normalises_the_flattened_trailing_block")


_SOFTMAX_FLOAT16 = float16_in_float16(
    "onnx.reference 1.23.2 computes Softmax in float16, rounding exp, sum and divide each (up "
    "to a few ulp off); the reference computes in float32 and rounds once")


def known_softmax(sample: Sample, opset: int, peer: str) -> str | None:
    """Softmax: as :func:`known_hardmax`, plus onnx.reference's float16 arithmetic."""
    return known_hardmax(sample, opset, peer) or _SOFTMAX_FLOAT16(sample, opset, peer)


def known_log_softmax(sample: Sample, opset: int, peer: str) -> str | None:
    """LogSoftmax: as :func:`known_hardmax`, plus onnx.reference's log(softmax(x))."""
    reason = known_hardmax(sample, opset, peer)
    if reason or peer != "onnx.reference":
        return reason
    x = sample.inputs[0]
    axis = int(sample.attrs.get("axis", -1)) % x.ndim
    with np.errstate(under="ignore"):
        probability = np.exp(x - x.max(axis=axis, keepdims=True))
    underflows = np.any(probability < np.finfo(x.dtype).tiny)
    if x.dtype == np.float16 or underflows:
        return ("onnx.reference 1.23.2 takes LogSoftmax as np.log(softmax(x)) in X's dtype: "
                "a probability that underflows gives -inf, a subnormal one a log off by up to "
                "1e-4 (the spec's (x - max) - log(sum(exp(x - max))) is finite and exact), and "
                "in float16 a probability rounded to 1 "
                "gives log 0; the reference computes the log-sum-exp form in float32 or wider")
    return None


def known_clip(sample: Sample, opset: int, peer: str) -> str | None:
    """Clip: infinities with an omitted bound, which defaults to the type's finite limit."""
    x = sample.inputs[0]
    omitted = len(sample.inputs) < 3 or any(b is None for b in sample.inputs[1:])
    if opset < 11 or not omitted or x.dtype.kind != "f" or not np.isinf(x).any():
        return None
    limits = ("Clip-11+: min and max 'default to numeric_limits::lowest() and "
              "numeric_limits::max()', so +-inf clip to the type's largest finite values")
    if peer == "onnx.reference":
        return (f"onnx.reference 1.23.2 leaves infinities alone where a bound is omitted; "
                f"{limits}; tests/test_reference_oracles.py::"
                "test_clip_without_bounds_clips_infinities_to_the_default_limits")
    if opset == 11 and x.dtype == np.float16:
        return ("onnxruntime 1.32's Clip-11 float16 leaves infinities alone where a bound is "
                f"omitted (its Clip-12/13 clip them to +-65504); {limits}")
    return None


known_gelu = float16_in_float16(
    "onnx.reference 1.23.2 runs Gelu's function body op by op in float16 (each of Div, Erf, "
    "Add, Mul rounded to float16): 1 + erf(x / sqrt(2)) cancels below about x = -2 "
    "(Gelu(-3.6) comes out -0 instead of -3.1e-4); the reference computes in float64 and rounds "
    "once")
"""Gelu: onnx.reference runs the function body op by op in float16."""


_SOFTMAX_TOL = {DType.float16: Tol(2e-3, 1e-5, "exp, sum and divide each round once in float32 "
                                                "before the final rounding to float16 (the "
                                                "conformance case's tolerance)")}
_TRANSCENDENTAL = {DType.float32: Tol(4e-6, 1e-6, "exp/log1p/tanh/erf compositions; libm-grade "
                                                  "implementations differ by a few ulp"),
                   DType.float16: Tol(2e-3, 1e-5, "two or three float32 roundings before the "
                                                  "final one to float16")}
"""The conformance cases' tolerances of the same ops."""

SWEEPS = (
    Sweep("Softmax", (1, 11, 13), _softmax_draw("Softmax"), dtypes=_FLOATS,
          known=known_softmax, tolerance=_SOFTMAX_TOL),
    Sweep("LogSoftmax", (1, 11, 13), _softmax_draw("LogSoftmax"), dtypes=_FLOATS,
          known=known_log_softmax, tolerance=_SOFTMAX_TOL),
    Sweep("Hardmax", (1, 11, 13), _softmax_draw("Hardmax"), dtypes=_FLOATS,
          known=known_hardmax),
    Sweep("Celu", (12,), _unary_draw("Celu"), tolerance=_TRANSCENDENTAL),
    Sweep("Elu", (6, 22), _unary_draw("Elu"), dtypes=_FLOATS, tolerance=_TRANSCENDENTAL),
    Sweep("Selu", (6, 22), _unary_draw("Selu"), dtypes=_FLOATS, tolerance=_TRANSCENDENTAL),
    Sweep("LeakyRelu", (6, 16), _unary_draw("LeakyRelu"), dtypes=_FLOATS),
    Sweep("HardSigmoid", (6, 22), _unary_draw("HardSigmoid"), dtypes=_FLOATS),
    Sweep("HardSwish", (14, 22), _unary_draw("HardSwish"), dtypes=_FLOATS),
    Sweep("Gelu", (20,), _unary_draw("Gelu"), dtypes=_FLOATS, known=known_gelu,
          tolerance=_TRANSCENDENTAL),
    Sweep("Mish", (18, 22), _unary_draw("Mish"), dtypes=_FLOATS, tolerance=_TRANSCENDENTAL),
    Sweep("Softplus", (1, 22), _unary_draw("Softplus"), dtypes=_FLOATS,
          tolerance=_TRANSCENDENTAL),
    Sweep("Softsign", (1, 22), _unary_draw("Softsign"), dtypes=_FLOATS),
    Sweep("ThresholdedRelu", (10, 22), _unary_draw("ThresholdedRelu"), dtypes=_FLOATS),
    Sweep("PRelu", (7, 9, 16), draw_prelu, dtypes=_FLOATS),
    Sweep("PRelu", (9, 16), draw_prelu, dtypes=_INTS),
    Sweep("Clip", (6, 11, 12, 13), draw_clip, dtypes=_FLOATS, known=known_clip),
    Sweep("Clip", (12, 13), draw_clip, dtypes=_INTS + (DType.int8, DType.uint8)),
)
