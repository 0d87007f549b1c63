"""Joining and cutting ops: Concat, Split, Slice.

Every op here moves data without arithmetic on it, so each works for every dtype (strings are
NumPy object arrays). The shape rules read constant inputs (split lengths, slice bounds) with
``ctx.value`` and, when a value is unknown, return the most precise partial answer (known rank,
None dims). Negative axes are accepted at every opset version.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.graph import Dim, TensorType
from refmnn.ops._infer import normalize_axis
from refmnn.ops._schema import Attr, InferContext, op
from refmnn.ops._shape_util import (
    HUGE,
    add_dims,
    axis_of,
    dtype_or_none,
    ints,
    known_ints,
    merge_dims,
    shape_or_none,
    static_length,
)

# =============================================================================== Concat


def _concat(inputs: tuple[np.ndarray, ...], axis: int) -> np.ndarray:
    if not inputs:
        raise ValueError("Concat needs at least one input")
    rank = inputs[0].ndim
    axis = axis_of(axis, rank)
    for x in inputs:
        if x.ndim != rank or any(a != b for i, (a, b) in enumerate(zip(x.shape, inputs[0].shape))
                                 if i != axis):
            raise ValueError(f"cannot concatenate shapes {[list(x.shape) for x in inputs]} on "
                             f"axis {axis}")
    return np.concatenate(inputs, axis=axis)


def _infer_concat(ctx: InferContext, *inputs: Any, axis: int | None) -> TensorType:
    axis = 1 if axis is None else axis
    dtype = next((dtype_or_none(t) for t in inputs if dtype_or_none(t) is not None), None)
    shapes = [shape_or_none(t) for t in inputs]
    known = [s for s in shapes if s is not None]
    if not known:
        return TensorType(dtype, None)
    rank = len(known[0])
    if any(len(s) != rank for s in known):
        ctx.fail(f"inputs have different ranks {[len(s) for s in known]}")
    axis = normalize_axis(ctx, axis, rank)
    out: list[Dim] = []
    for i in range(rank):
        if i == axis:
            out.append(None if len(known) < len(shapes) else add_dims(*(s[i] for s in known)))
        else:
            out.append(merge_dims(ctx, [s[i] for s in known], f"axis {i}"))
    return TensorType(dtype, tuple(out))


@op("Concat", since=1, inputs=("inputs...",), outputs=("concat_result",), infer=_infer_concat,
    attrs=(Attr("axis", "int", None, "axis to join on (absent: 1)"),))
def concat_1(*inputs: np.ndarray, axis: int | None) -> np.ndarray:
    """Concat-1: as Concat-4, with ``axis`` optional and defaulting to 1."""
    return _concat(inputs, 1 if axis is None else axis)


@op("Concat", since=4, inputs=("inputs...",), outputs=("concat_result",), infer=_infer_concat,
    attrs=(Attr("axis", "int", doc="axis to join on; negative counts from the back"),))
def concat_4(*inputs: np.ndarray, axis: int) -> np.ndarray:
    """concat_result = the inputs joined along ``axis`` (required from opset 4).

    inputs: one or more tensors of one rank and dtype whose shapes agree except on ``axis``;
    empty inputs (size 0 on ``axis``) take part normally.  Versions 4, 11 (negative axis
    spelled out) and 13 (dtypes) behave the same.
    """
    return _concat(inputs, axis)


# =============================================================================== Split


def _split_sizes(dim: int, split: Any, parts: int, num_outputs: int | None) -> list[int]:
    if split is not None:
        sizes = ints(split)
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise ValueError(f"split {sizes} does not add up to the axis size {dim}")
        if len(sizes) != parts:
            raise ValueError(f"split has {len(sizes)} entries but the node lists {parts} outputs")
        return sizes
    if num_outputs is not None:
        if num_outputs < 1 or num_outputs != parts:
            raise ValueError(f"num_outputs={num_outputs} but the node lists {parts} outputs")
        chunk = -(-dim // num_outputs)
        last = dim - chunk * (num_outputs - 1)
        if last < 0:
            raise ValueError(f"an axis of size {dim} cannot be split into {num_outputs} chunks "
                             f"of {chunk} with a smaller last one")
        return [chunk] * (num_outputs - 1) + [last]
    if parts < 1 or dim % parts:
        raise ValueError(f"an axis of size {dim} cannot be split into {parts} equal parts")
    return [dim // parts] * parts


def _split(x: np.ndarray, split: Any, axis: int, ctx: Any,
           num_outputs: int | None = None) -> tuple[np.ndarray, ...]:
    axis = axis_of(axis, x.ndim)
    sizes = _split_sizes(x.shape[axis], split, len(ctx.node.outputs), num_outputs)
    bounds = np.cumsum([0] + sizes)
    index = [slice(None)] * x.ndim
    parts = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        index[axis] = slice(int(start), int(stop))
        parts.append(x[tuple(index)])
    return tuple(parts)


def _split_rule(ctx: InferContext, x: Any, axis: int, split: list[int] | None, given: bool,
                num_outputs: int | None) -> tuple[TensorType, ...]:
    parts = len(ctx.node.outputs)
    dtype, shape = dtype_or_none(x), shape_or_none(x)
    if shape is None:
        return tuple(TensorType(dtype, None) for _ in range(parts))
    axis = normalize_axis(ctx, axis, len(shape))
    dim = shape[axis]
    sizes: list[Dim] = [None] * parts
    if split is not None:
        if len(split) != parts:
            ctx.fail(f"split has {len(split)} entries but the node lists {parts} outputs")
        if isinstance(dim, int) and sum(split) != dim:
            ctx.fail(f"split {split} does not add up to the axis size {dim}")
        sizes = list(split)
    elif not given and isinstance(dim, int):
        try:
            sizes = list(_split_sizes(dim, None, parts, num_outputs))
        except ValueError as exc:
            ctx.fail(str(exc))
    elif not given and parts == 1:
        sizes = [dim]
    return tuple(TensorType(dtype, shape[:axis] + (s,) + shape[axis + 1:]) for s in sizes)


def _infer_split_1(ctx: InferContext, x: Any, split_in: Any = None, *, split: Any,
                   axis: int | None) -> tuple[TensorType, ...]:
    if split_in is not None:
        return _split_rule(ctx, x, axis or 0, known_ints(ctx, 1), True, None)
    return _split_rule(ctx, x, axis or 0, None if split is None else list(split),
                       split is not None, None)


def _infer_split_2(ctx: InferContext, x: Any, *, split: Any, axis: int) -> tuple[TensorType, ...]:
    return _split_rule(ctx, x, axis, None if split is None else list(split), split is not None,
                       None)


def _infer_split_13(ctx: InferContext, x: Any, split: Any = None, *, axis: int,
                    num_outputs: int | None = None) -> tuple[TensorType, ...]:
    return _split_rule(ctx, x, axis, known_ints(ctx, 1), split is not None, num_outputs)


@op("Split", since=1, inputs=("input", "split?"), outputs=("outputs...",), infer=_infer_split_1,
    value_inputs=(1,),
    attrs=(Attr("split", "ints", None, "length of each output"),
           Attr("axis", "int", None, "axis to split (absent: 0)")))
def split_1(input: np.ndarray, split_in: np.ndarray | None = None, *, split: Any,
            axis: int | None, ctx: Any) -> tuple[np.ndarray, ...]:
    """Split-1: the lengths come from the optional second input, else the ``split`` attribute,
    else the axis is cut into as many equal parts as the node has outputs.  axis absent: 0."""
    return _split(input, split if split_in is None else split_in, axis or 0, ctx)


@op("Split", since=2, inputs=("input",), outputs=("outputs...",), infer=_infer_split_2,
    attrs=(Attr("split", "ints", None, "length of each output"),
           Attr("axis", "int", 0, "axis to split; negative counts from the back")))
def split_2(input: np.ndarray, *, split: Any, axis: int, ctx: Any) -> tuple[np.ndarray, ...]:
    """Split-2/11: cut ``input`` along ``axis`` into pieces of the lengths in ``split``.

    split absent: as many equal parts as the node lists outputs (an error when the axis size
    does not divide).  Lengths must be >= 0 and add up to the axis size; zero-length pieces
    are empty tensors.
    """
    return _split(input, split, axis, ctx)


@op("Split", since=13, inputs=("input", "split?"), outputs=("outputs...",),
    infer=_infer_split_13, value_inputs=(1,),
    attrs=(Attr("axis", "int", 0, "axis to split; negative counts from the back"),))
def split_13(input: np.ndarray, split: np.ndarray | None = None, *, axis: int,
             ctx: Any) -> tuple[np.ndarray, ...]:
    """Split-13: as Split-2 with ``split`` an optional int64 1-D input."""
    return _split(input, split, axis, ctx)


@op("Split", since=18, inputs=("input", "split?"), outputs=("outputs...",),
    infer=_infer_split_13, value_inputs=(1,),
    attrs=(Attr("axis", "int", 0, "axis to split; negative counts from the back"),
           Attr("num_outputs", "int", None, "number of pieces; the last may be smaller")))
def split_18(input: np.ndarray, split: np.ndarray | None = None, *, axis: int,
             num_outputs: int | None, ctx: Any) -> tuple[np.ndarray, ...]:
    """Split-18: as Split-13, or cut into ``num_outputs`` pieces of ceil(dim / num_outputs)
    with a smaller last piece (e.g. 7 into 3 gives 3, 3, 1).

    The spec asks for exactly one of ``split`` and ``num_outputs``; with neither, the axis is
    cut into as many equal parts as the node lists outputs, as before opset 18.
    """
    if split is not None and num_outputs is not None:
        raise ValueError("give either the split input or num_outputs, not both")
    return _split(input, split, axis, ctx, num_outputs)


# =============================================================================== Slice


def _slice_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int | None, int]:
    """Effective (start, end, step) for a Python slice, by the Slice-13 clamping rules."""
    if step == 0:
        raise ValueError("slice step cannot be 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim), step
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return start, (None if end < 0 else end), step


def _slice(data: np.ndarray, starts: Any, ends: Any, axes: Any, steps: Any) -> np.ndarray:
    starts, ends = ints(starts), ints(ends)
    axes = list(range(len(starts))) if axes is None else ints(axes)
    steps = [1] * len(starts) if steps is None else ints(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError(f"starts/ends/axes/steps lengths differ: {len(starts)}, {len(ends)}, "
                         f"{len(axes)}, {len(steps)}")
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = axis_of(axis, data.ndim)
        index[axis] = slice(*_slice_bounds(data.shape[axis], start, end, step))
    return data[tuple(index)]


def _slice_dim(dim: Dim, start: int, end: int, step: int) -> Dim:
    if isinstance(dim, int):
        return len(range(*slice(*_slice_bounds(dim, start, end, step)).indices(dim)))
    # A symbolic dim survives only a full slice: [0 or -INF : INF : 1] or [-1 or INF : -INF : -1].
    if step == 1 and (start == 0 or start <= -HUGE) and end >= HUGE:
        return dim
    if step == -1 and (start == -1 or start >= HUGE) and end <= -HUGE:
        return dim
    return None


def _slice_rule(ctx: InferContext, data: Any, starts: list[int] | None, ends: list[int] | None,
                axes: list[int] | None, steps: list[int] | None, axes_given: bool,
                count: int | None) -> TensorType:
    dtype, shape = dtype_or_none(data), shape_or_none(data)
    if shape is None:
        return TensorType(dtype, None)
    rank = len(shape)
    if axes is None and axes_given:
        return TensorType(dtype, (None,) * rank)
    n = len(starts) if starts is not None else (len(ends) if ends is not None else count)
    if axes is None:
        if n is None:
            return TensorType(dtype, (None,) * rank)
        axes = list(range(n))
    axes = [normalize_axis(ctx, a, rank) for a in axes]
    out = list(shape)
    if starts is None or ends is None:
        for a in axes:
            out[a] = None
        return TensorType(dtype, tuple(out))
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.fail("starts/ends/axes/steps lengths differ")
    for start, end, a, step in zip(starts, ends, axes, steps):
        if step == 0:
            ctx.fail("slice step cannot be 0")
        out[a] = _slice_dim(shape[a], start, end, step)
    return TensorType(dtype, tuple(out))


def _infer_slice_1(ctx: InferContext, data: Any, *, starts: Any, ends: Any,
                   axes: Any) -> TensorType:
    return _slice_rule(ctx, data, list(starts), list(ends), None if axes is None else list(axes),
                       None, False, None)


def _infer_slice_10(ctx: InferContext, data: Any, starts: Any, ends: Any, axes: Any = None,
                    steps: Any = None) -> TensorType:
    starts_v, ends_v, steps_v = known_ints(ctx, 1), known_ints(ctx, 2), known_ints(ctx, 4)
    if steps is not None and steps_v is None:
        starts_v = None  # the bounds alone do not fix the sizes without the steps
    return _slice_rule(ctx, data, starts_v, ends_v, known_ints(ctx, 3), steps_v,
                       axes is not None, static_length(starts))


@op("Slice", since=1, inputs=("data",), outputs=("output",), infer=_infer_slice_1,
    attrs=(Attr("starts", "ints", doc="first index per sliced axis"),
           Attr("ends", "ints", doc="end index (exclusive) per sliced axis"),
           Attr("axes", "ints", None, "axes sliced (absent: 0..len(starts)-1)")))
def slice_1(data: np.ndarray, *, starts: Any, ends: Any, axes: Any) -> np.ndarray:
    """Slice-1: as Slice-10 with step 1 and the bounds as attributes."""
    return _slice(data, starts, ends, axes, None)


@op("Slice", since=10, inputs=("data", "starts", "ends", "axes?", "steps?"), outputs=("output",),
    infer=_infer_slice_10, value_inputs=(1, 2, 3, 4))
def slice_10(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
             axes: np.ndarray | None = None, steps: np.ndarray | None = None) -> np.ndarray:
    """output = data[starts:ends:steps] on the listed axes (int32/int64 1-D inputs).

    Per sliced axis of size d: a negative start/end has d added; then for step > 0 start and
    end are clamped to [0, d]; for step < 0 start is clamped to [0, d-1] and end to [-1, d-1]
    (-1 meaning "before index 0").  So INT_MAX/INT_MIN slice to the ends and out-of-range
    bounds give empty or full slices, never an error.  axes absent: 0..len(starts)-1 (negative
    axes count from the back); steps absent: all 1; step 0 is an error.  Versions 10, 11, 13
    behave the same.
    """
    return _slice(data, starts, ends, axes, steps)


OPS = (
    concat_1, concat_4,
    split_1, split_2, split_13, split_18,
    slice_1, slice_10,
)
