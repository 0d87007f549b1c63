"""Reductions: the ten Reduce* ops with axes as an attribute (before ReduceSum-13 and the
others' 18) and as an input with noop_with_empty_axes, ArgMax/ArgMin with keepdims and
select_last_index over ties, and CumSum/CumProd with exclusive, reverse and negative axes."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import (EXTREMAL, POSITIVE, SMALL_INT, UNIT, Domain, Draw, Sample,
                     SampleContext, Sweep, Tol)

_INPUT_AXES_SINCE = {"ReduceSum": 13}
"""The opset from which ``axes`` is an input (18 for the ops not listed)."""

_DOMAIN = {"ReduceLogSum": POSITIVE, "ReduceProd": UNIT}
"""Data that keeps the result meaningful: the log of a positive sum; float products that do
not overflow (integer products: :func:`_int_factors`)."""

_EMPTY_UNDEFINED = ("ReduceMean",)
"""The spec leaves a reduction over an empty set undefined: never drawn."""

_ORDER_FREE = ("ReduceMax", "ReduceMin")
"""The reductions whose result does not depend on the order of the elements, drawn with
EXTREMAL data now and then (NaN, infinities, -0.0, the extreme finite values)."""

_FLOAT_ONLY = ("ReduceLogSum", "ReduceLogSumExp")

_TRANSCENDENTAL = {DType.float32: Tol(4e-6, 1e-6, "a log, exp or sqrt after a float32 sum of up "
                                                  "to ~100 terms: a few ulp either way")}
_PROD = {DType.float32: Tol(1e-5, 1e-6, "a float32 product of up to ~100 factors, in any order: "
                                        "one rounding per factor")}


def _shape(rng: np.random.Generator, rank: int, empty: bool) -> tuple[int, ...]:
    """Dims in [1, 5]; with ``empty`` one of them (chosen at random) is 0."""
    shape = [int(d) for d in rng.integers(1, 6, rank)]
    if empty and rank:
        shape[int(rng.integers(rank))] = 0
    return tuple(shape)


def _signed(rng: np.random.Generator, axes: list[int], rank: int) -> list[int]:
    """``axes`` with about half of them written negative (counted from the back)."""
    return [a - rank if rng.random() < 0.5 else a for a in axes]


def _int_factors(ctx: SampleContext, shape: tuple[int, ...]) -> np.ndarray:
    """Integer ReduceProd data: -1, 0 and 1 with at most 20 factors of +-2, so no product
    leaves int32 (the spec does not say what an overflowing product is)."""
    rng = ctx.rng
    values = rng.integers(-1, 2, shape)
    flat = values.reshape(-1)
    twos = rng.choice(flat.size, min(flat.size, int(rng.integers(0, 21))), replace=False)
    flat[twos] = rng.choice([-2, 2], len(twos))
    return ctx.array(values)


def _reduce_draw(op: str) -> Draw:
    since = _INPUT_AXES_SINCE.get(op, 18)

    def draw(ctx: SampleContext, opset: int) -> Sample:
        rng = ctx.rng
        rank = int(rng.integers(0, 5))
        shape = _shape(rng, rank, rng.random() < 0.15)
        count = int(rng.integers(0, rank + 1))
        axes = sorted(rng.choice(rank, count, replace=False).tolist()) if rank else []
        attrs: dict[str, object] = {"keepdims": int(rng.integers(0, 2))}
        noop = opset >= since and rng.random() < 0.3
        reduced = axes if axes or noop else list(range(rank))
        if op in _EMPTY_UNDEFINED and any(shape[a] == 0 for a in reduced):
            shape = tuple(max(d, 1) for d in shape)
        domain = _DOMAIN.get(op, Domain.ANY)
        if op in _ORDER_FREE and rng.random() < 0.15:
            domain = EXTREMAL
        x = (_int_factors(ctx, shape) if op == "ReduceProd" and not ctx.is_float
             else ctx.make(shape, domain))
        if op == "ReduceLogSumExp" and rng.random() < 0.3:
            x = x * x.dtype.type(60)  # exp overflows unless the maximum is taken out first
        listed = _signed(rng, axes, rank)
        if opset < since:
            if listed:  # (an empty list, which means all axes, cannot be written: no type)
                attrs["axes"] = listed
            return Sample((x,), attrs)
        if noop:
            attrs["noop_with_empty_axes"] = 1
        if listed or rng.random() < 0.5:
            return Sample((x, np.array(listed, dtype=np.int64)), attrs)
        return Sample((x,), attrs)

    draw.__doc__ = (f"A random {op}: rank 0-4 (a zero-size dim now and then"
                    f"{', never a reduced one' if op in _EMPTY_UNDEFINED else ''}), a random "
                    "subset of the axes (some negative) or none, keepdims 0/1; axes an attribute "
                    f"before opset {since}, then an optional input, empty or omitted, with "
                    "noop_with_empty_axes."
                    + (" Data up to ~200 in magnitude now and then." if op == "ReduceLogSumExp"
                       else ""))
    return draw


def draw_arg(ctx: SampleContext, opset: int) -> Sample:
    """A random ArgMax/ArgMin: rank 1-4, a non-empty reduced axis (another may be 0), axis
    negative half the time, keepdims 0/1, small integers half the time (ties), and
    select_last_index 0/1 from opset 12."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    axis = int(rng.integers(rank))
    shape = list(_shape(rng, rank, rng.random() < 0.1))
    shape[axis] = max(shape[axis], 1)
    x = ctx.make(shape, SMALL_INT if rng.random() < 0.5 else Domain.ANY)
    attrs: dict[str, object] = {"axis": _signed(rng, [axis], rank)[0],
                                "keepdims": int(rng.integers(0, 2))}
    if opset >= 12:
        attrs["select_last_index"] = int(rng.integers(0, 2))
    return Sample((x,), attrs)


def _cum_draw(op: str) -> Draw:
    def draw(ctx: SampleContext, opset: int) -> Sample:
        rng = ctx.rng
        rank = int(rng.integers(1, 5))
        x = ctx.make(_shape(rng, rank, rng.random() < 0.1),
                     UNIT if op == "CumProd" else Domain.ANY)
        axis = _signed(rng, [int(rng.integers(rank))], rank)[0]
        axis_array = np.array(axis, dtype=np.int32 if rng.random() < 0.5 else np.int64)
        attrs = {k: int(rng.integers(0, 2)) for k in ("exclusive", "reverse")}
        return Sample((x, axis_array), attrs)

    draw.__doc__ = (f"A random {op}: rank 1-4 (a zero-size dim now and then), a 0-d int32 or "
                    "int64 axis (negative half the time), exclusive and reverse 0/1.")
    return draw


def known_max_min(sample: Sample, opset: int, peer: str) -> str | None:
    """ReduceMax/ReduceMin: onnxruntime drops a NaN that is not first."""
    x = sample.inputs[0]
    if peer == "onnxruntime" and x.dtype.kind == "f" and np.isnan(x).any():
        return ("onnxruntime 1.32's ReduceMax/ReduceMin keep a NaN only when it comes first in "
                "the reduced run ([nan, 1, 2] -> nan but [2, 1, nan] -> 2: order-dependent); "
                "the spec's reduction 'is similar to numpy', whose max/min propagate NaN, as "
                "onnx.reference 1.23.2 and the reference do")
    return None


def known_sum_square(sample: Sample, opset: int, peer: str) -> str | None:
    """ReduceSumSquare: onnx.reference widens int32."""
    if peer == "onnx.reference" and sample.inputs[0].dtype == np.int32:
        return ("onnx.reference 1.23.2's ReduceSumSquare sums np.square(data) with np.sum, "
                "which widens int32 to int64; the spec's output 'reduced' has type T, the "
                "input's (int32)")
    return None


_FLOAT_INT = (DType.float32, DType.float64, DType.int32, DType.int64)
_FLOATS = (DType.float32, DType.float64)


_REDUCE_OPSETS = {"ReduceSum": (11, 13), "ReduceMax": (11, 12, 13, 18, 20),
                  "ReduceMin": (11, 12, 13, 18, 20)}
"""The opsets where each Reduce* op's definition changes ((11, 13, 18) for those not listed):
axes attribute -> input, int8/uint8 (ReduceMax/Min-12), bool (ReduceMax/Min-20)."""


def _reduce_sweeps() -> tuple[Sweep, ...]:
    sweeps = []
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
               "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"):
        tolerance = (_TRANSCENDENTAL if op in ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp")
                     else _PROD if op == "ReduceProd" else {})
        known = (known_max_min if op in _ORDER_FREE
                 else known_sum_square if op == "ReduceSumSquare" else None)
        sweeps.append(Sweep(op, _REDUCE_OPSETS.get(op, (11, 13, 18)), _reduce_draw(op),
                            dtypes=_FLOATS if op in _FLOAT_ONLY else _FLOAT_INT,
                            known=known, tolerance=tolerance))
        if op in _ORDER_FREE:
            sweeps.append(Sweep(op, (12, 13, 18, 20), _reduce_draw(op),
                                dtypes=(DType.int8, DType.uint8)))
            sweeps.append(Sweep(op, (20,), _reduce_draw(op), dtypes=(DType.bool,)))
    return tuple(sweeps)


SWEEPS = (
    *_reduce_sweeps(),
    Sweep("ArgMax", (11, 12, 13), draw_arg, dtypes=_FLOAT_INT),
    Sweep("ArgMin", (11, 12, 13), draw_arg, dtypes=_FLOAT_INT),
    Sweep("CumSum", (11, 14), _cum_draw("CumSum"), dtypes=_FLOAT_INT),
    Sweep("CumProd", (26,), _cum_draw("CumProd"), dtypes=_FLOAT_INT),
)
