"""Slice (negative and out-of-range starts/ends, INT_MAX/INT_MIN, negative steps, axes
omitted or negative, steps omitted; attributes at opset 1), Split (split as attribute or
input, equal parts, num_outputs with a smaller last piece, zero-length pieces) and Concat
(1-4 inputs, negative axes, empty inputs) over ranks 1-4."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import Sample, SampleContext, Sweep


def _shape(rng: np.random.Generator, rank: int, high: int = 5, empty: float = 0.0
           ) -> list[int]:
    """A shape of ``rank`` dims in [1, high], each 0 with probability ``empty``."""
    return [0 if rng.random() < empty else int(rng.integers(1, high + 1)) for _ in range(rank)]


def _spell(rng: np.random.Generator, axis: int, rank: int, opset: int, since: int = 11) -> int:
    """``axis``, written negative half the time from opset ``since``."""
    return axis - rank if opset >= since and rng.random() < 0.5 else axis


# =============================================================================== Slice


def _bound(rng: np.random.Generator, dim: int, extreme: int) -> int:
    """A start or end: in [-dim-3, dim+3] mostly, else the index type's extreme (either sign)."""
    if rng.random() < 0.15:
        return extreme if rng.random() < 0.5 else -extreme - 1
    return int(rng.integers(-dim - 3, dim + 4))


def draw_slice(ctx: SampleContext, opset: int) -> Sample:
    """Slice: data of rank 1-4 (dims 0-6), a random subset of distinct axes in random order
    (some negative, omitted when they are 0..n-1 half the time), starts and ends anywhere
    in [-d-3, d+3] or INT_MAX/INT_MIN of the index type (int32 or int64), steps in
    [-3, 3] \\ {0} (omitted when all 1 half the time); opset 1 takes them as attributes,
    without steps."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    shape = _shape(rng, rank, 6, empty=0.05)
    count = int(rng.integers(1, rank + 1))
    axes = [int(a) for a in rng.permutation(rank)[:count]]
    if rng.random() < 0.3:
        axes = list(range(count))
    index_type = np.int64 if opset == 1 or rng.random() < 0.7 else np.int32
    extreme = int(np.iinfo(index_type).max)
    starts = [_bound(rng, shape[a], extreme) for a in axes]
    ends = [_bound(rng, shape[a], extreme) for a in axes]
    steps = [int(rng.choice([-3, -2, -1, 1, 2, 3])) if rng.random() < 0.6 else 1 for _ in axes]
    signed = [_spell(rng, a, rank, opset, 10) for a in axes]
    omit_axes = axes == list(range(count)) and rng.random() < 0.5
    x = ctx.make(shape)
    if opset < 10:
        attrs: dict[str, object] = {"starts": starts, "ends": ends}
        if not omit_axes:
            attrs["axes"] = signed
        return Sample((x,), attrs)
    inputs: list[np.ndarray | None] = [x, np.array(starts, index_type),
                                       np.array(ends, index_type)]
    omit_steps = all(s == 1 for s in steps) and rng.random() < 0.5
    inputs.append(None if omit_axes else np.array(signed, index_type))
    inputs.append(None if omit_steps else np.array(steps, index_type))
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs))


def known_slice(sample: Sample, opset: int, peer: str) -> str | None:
    """onnxruntime: a negative step with end INT_MAX slices to the front; onnx.reference: a
    negative step with start below -d selects nothing (NumPy's slice)."""
    if opset < 10 or len(sample.inputs) < 5 or sample.inputs[4] is None:
        return None  # only negative steps differ
    data, starts, ends = sample.inputs[0], sample.inputs[1], sample.inputs[2]
    axes = sample.inputs[3] if sample.inputs[3] is not None else range(len(starts))
    for start, end, axis, step in zip(starts.tolist(), ends.tolist(), list(axes),
                                      sample.inputs[4].tolist()):
        if step > 0:
            continue
        if peer == "onnxruntime" and end in (2**31 - 1, 2**63 - 1):
            return ("onnxruntime 1.32 reads end = INT_MAX with a negative step as 'through "
                    "index 0' (and warns that its shape differs from the inferred one); Slice "
                    "clamps a positive end 'to [-1, dims[axes[i]]-1]' for negative stepping, "
                    "so end = d - 1 and [start, d-1) going backward is empty")
        if peer == "onnx.reference" and start < -data.shape[int(axis)]:
            return ("onnx.reference slices with NumPy, which drops everything for a negative "
                    "step and start < -d; Slice adds d then clamps start 'to [0, dims[axes[i]]-1] "
                    "for negative stepping', so it starts at 0 and keeps element 0")
    return None


# =============================================================================== Split


def draw_split(ctx: SampleContext, opset: int) -> Sample:
    """Split: data of rank 1-4 on any axis (negative from 11); explicit lengths (zero-length
    pieces too) as the split attribute (2, 11) or input (13+); else equal parts by output
    count (before 18) or num_outputs (18+), whose last piece is smaller."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    axis = int(rng.integers(0, rank))
    shape = _shape(rng, rank, 4)
    shape[axis] = int(rng.integers(0, 9))
    dim = shape[axis]
    x = ctx.make(shape)
    attrs: dict[str, object] = {}
    if axis or rng.random() < 0.5:
        attrs["axis"] = _spell(rng, axis, rank, opset)
    # from 18 exactly one of split and num_outputs (onnx refuses neither)
    how = str(rng.choice(["lengths", "equal" if opset < 18 else "num_outputs"]))
    if how == "lengths":
        parts = int(rng.integers(1, 5))
        cuts = np.sort(rng.integers(0, dim + 1, parts - 1))
        lengths = np.diff(np.concatenate([[0], cuts, [dim]])).astype(np.int64)
        if opset >= 13:
            return Sample((x, lengths), attrs, outputs=parts)
        return Sample((x,), {**attrs, "split": lengths.tolist()}, outputs=parts)
    if how == "num_outputs":  # ceil(dim / n) each, the last what is left (>= 0)
        parts = int(rng.integers(1, max(dim, 1) + 1))
        while parts > 1 and -(-dim // parts) * (parts - 1) > dim:
            parts -= 1
        return Sample((x,), {**attrs, "num_outputs": parts}, outputs=parts)
    divisors = [p for p in range(1, 5) if dim % p == 0]
    return Sample((x,), attrs, outputs=int(rng.choice(divisors)))


# =============================================================================== Concat


def draw_concat(ctx: SampleContext, opset: int) -> Sample:
    """Concat: 1-4 inputs of rank 1-4 that agree off the axis, each 0-4 long on it; the axis
    negative from 11."""
    rng = ctx.rng
    rank = int(rng.integers(1, 5))
    axis = int(rng.integers(0, rank))
    shape = _shape(rng, rank, 4, empty=0.04)
    inputs = []
    for _ in range(int(rng.integers(1, 5))):
        shape[axis] = int(rng.integers(0, 5))
        inputs.append(ctx.make(shape))
    return Sample(tuple(inputs), {"axis": _spell(rng, axis, rank, opset)})


SWEEPS = (
    Sweep("Slice", (1, 10, 11, 13), draw_slice, dtypes=(DType.float32, DType.int64),
          known=known_slice),
    Sweep("Split", (2, 11, 13, 18), draw_split, dtypes=(DType.float32, DType.int64)),
    Sweep("Concat", (4, 11, 13), draw_concat,
          dtypes=(DType.float32, DType.int64, DType.bool)),
)
