"""Shape and data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split,
Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Shape, Size, Identity, Constant,
ConstantOfShape, EyeLike, Range, ReverseSequence, Trilu.

Every op here moves or creates data without arithmetic on it, so each works for every dtype
(strings are NumPy object arrays). Their shape rules matter most: shape inference resolves the
shape-computation chains of real models (Shape -> Gather -> Concat -> Reshape) through them, so
each rule reads constant inputs with ``ctx.value`` and, when a value is unknown, returns the most
precise partial answer (known rank, None dims).

Negative axes are accepted at every opset version: the spec spells them out from opset 11, and
earlier producers already relied on them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refmnn.dtypes import DType, compute_dtype
from refmnn.graph import Dim, TensorType
from refmnn.ops._infer import broadcast_dims, normalize_axis, same_as
from refmnn.ops._schema import Attr, InferContext, op
from refmnn.ops._shape_util import (
    HUGE,
    add_dims,
    axis_of,
    dtype_or_none,
    ints,
    known_ints,
    merge_dims,
    product,
    scalar_int,
    shape_or_none,
    static_length,
    zero_of,
)

INT64 = DType.int64

# =============================================================================== Reshape


def _reshape(data: np.ndarray, shape: Any, allowzero: int) -> np.ndarray:
    target = ints(shape)
    if any(s < -1 for s in target) or target.count(-1) > 1:
        raise ValueError(f"invalid target shape {target}: only one -1 and no other negatives")
    if allowzero and 0 in target and -1 in target:
        raise ValueError(f"target shape {target} has both 0 and -1 while allowzero=1")
    if not allowzero:
        for i, s in enumerate(target):
            if s == 0:
                if i >= data.ndim:
                    raise ValueError(f"target shape {target}: 0 at position {i} copies an input "
                                     f"dim, but the input has rank {data.ndim}")
                target[i] = data.shape[i]
    if -1 in target:
        rest = math.prod(s for s in target if s != -1)
        if rest == 0 or data.size % rest:
            raise ValueError(f"cannot reshape {list(data.shape)} into {target}")
        target[target.index(-1)] = data.size // rest
    if math.prod(target) != data.size:
        raise ValueError(f"cannot reshape {list(data.shape)} ({data.size} elements) into {target}")
    return data.reshape(target)


def _minus_one(ctx: InferContext, in_shape: tuple[Dim, ...] | None, known: list[Dim]) -> Dim:
    """The size a -1 stands for: input size / product of the other target dims, cancelling
    symbols that appear on both sides (so [batch, 12] -> [-1, 3, 4] gives batch)."""
    if in_shape is None or None in in_shape or None in known:
        return None
    left = [d for d in in_shape if isinstance(d, str)]
    for d in known:
        if isinstance(d, str):
            if d not in left:
                return None
            left.remove(d)
    in_int = math.prod(d for d in in_shape if isinstance(d, int))
    out_int = math.prod(d for d in known if isinstance(d, int))
    if out_int == 0:
        return None
    if not left:
        if in_int % out_int:
            ctx.fail(f"cannot reshape {list(in_shape)} into a shape with fixed part {known}")
        return in_int // out_int
    if len(left) == 1 and in_int == out_int:
        return left[0]
    return None


def _reshape_rule(ctx: InferContext, data: Any, target: list[int] | None, length: int | None,
                  allowzero: int) -> TensorType:
    dtype, in_shape = dtype_or_none(data), shape_or_none(data)
    if target is None:
        return TensorType(dtype, None if length is None else (None,) * length)
    out: list[Dim] = []
    for i, s in enumerate(target):
        if s == 0 and not allowzero:
            if in_shape is not None and i >= len(in_shape):
                ctx.fail(f"target shape {target}: 0 at position {i} but input rank {len(in_shape)}")
            out.append(None if in_shape is None else in_shape[i])
        elif s < -1:
            ctx.fail(f"invalid target shape {target}")
        else:
            out.append(s)
    if out.count(-1) > 1:
        ctx.fail(f"target shape {target} has more than one -1")
    if -1 in out:
        where = out.index(-1)
        out[where] = _minus_one(ctx, in_shape, out[:where] + out[where + 1:])
    elif in_shape is not None and all(isinstance(d, int) for d in (*in_shape, *out)):
        if math.prod(in_shape) != math.prod(out):  # type: ignore[arg-type]
            ctx.fail(f"cannot reshape {list(in_shape)} into {out}")
    return TensorType(dtype, tuple(out))


def _infer_reshape_1(ctx: InferContext, data: Any, **attrs: Any) -> TensorType:
    shape = attrs["shape"]
    return _reshape_rule(ctx, data, list(shape) if shape is not None else [], None, 0)


def _infer_reshape(ctx: InferContext, data: Any, shape: Any, allowzero: int = 0) -> TensorType:
    return _reshape_rule(ctx, data, known_ints(ctx, 1), static_length(shape), allowzero)


@op("Reshape", since=1, inputs=("data",), outputs=("reshaped",), infer=_infer_reshape_1,
    attrs=(Attr("consumed_inputs", "ints", None, "legacy; ignored"),
           Attr("shape", "ints", None, "the new shape (absent: a scalar)")))
def reshape_1(data: np.ndarray, *, consumed_inputs: Any, shape: Any) -> np.ndarray:
    """Reshape-1: as Reshape-5 with the target shape as the ``shape`` attribute.

    data: any shape.  A 0 in ``shape`` copies the input dim at that position, one -1 is
    inferred from the element count; an empty (or absent) ``shape`` gives a scalar.
    """
    return _reshape(data, () if shape is None else shape, 0)


@op("Reshape", since=5, inputs=("data", "shape"), outputs=("reshaped",), infer=_infer_reshape,
    value_inputs=(1,))
def reshape_5(data: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """reshaped = data with shape ``shape`` (int64, 1-D), element order unchanged.

    data: any shape, any dtype.  A 0 in ``shape`` copies the input dim at the same position
    (it is an error when the input has no such dim); at most one -1, which takes the size
    that keeps the element count (an error when it does not divide, or when the other dims'
    product is 0).  An empty ``shape`` gives a scalar.  The output is a view when NumPy can
    make one.
    """
    return _reshape(data, shape, 0)


@op("Reshape", since=14, inputs=("data", "shape"), outputs=("reshaped",), infer=_infer_reshape,
    value_inputs=(1,),
    attrs=(Attr("allowzero", "int", 0, "1: a 0 in shape means an empty dim, not a copy"),))
def reshape_14(data: np.ndarray, shape: np.ndarray, *, allowzero: int) -> np.ndarray:
    """Reshape-14: as Reshape-5, plus ``allowzero``.

    allowzero=0: a 0 in ``shape`` copies the input dim at that position (Reshape-5 rule).
    allowzero=1: a 0 is a literal empty dim, as in NumPy; ``shape`` may then not hold both
    0 and -1 (an error).
    """
    return _reshape(data, shape, allowzero)


# =============================================================================== Flatten


def _infer_flatten(ctx: InferContext, x: Any, *, axis: int) -> TensorType:
    shape = shape_or_none(x)
    if shape is None:
        return TensorType(dtype_or_none(x), (None, None))
    rank = len(shape)
    if not -rank <= axis <= rank:
        ctx.fail(f"axis {axis} is out of range [-{rank}, {rank}]")
    axis = axis + rank if axis < 0 else axis
    return TensorType(x.dtype, (product(shape[:axis]), product(shape[axis:])))


@op("Flatten", since=1, inputs=("input",), outputs=("output",), infer=_infer_flatten,
    attrs=(Attr("axis", "int", 1, "input dims before axis form the outer dim"),))
def flatten(input: np.ndarray, *, axis: int) -> np.ndarray:
    """output = input reshaped to (prod(shape[:axis]), prod(shape[axis:])), always 2-D.

    input: any shape (a scalar gives (1, 1) for axis 0 and 1).  axis in [-r, r]; negative
    counts from the back (spelled out from opset 11).  axis=0 gives (1, numel).
    Versions 1, 9, 11, 13, 21-25 differ only in the dtypes they list.
    """
    rank = input.ndim
    if not -rank <= axis <= rank:
        raise ValueError(f"axis {axis} is out of range [-{rank}, {rank}]")
    axis = axis + rank if axis < 0 else axis
    outer = math.prod(input.shape[:axis])
    return input.reshape(outer, math.prod(input.shape[axis:]))


# =============================================================================== Squeeze


def _squeeze(data: np.ndarray, axes: Any) -> np.ndarray:
    if axes is None:
        return data.reshape([d for d in data.shape if d != 1])
    chosen = {axis_of(a, data.ndim) for a in ints(axes)}
    for a in chosen:
        if data.shape[a] != 1:
            raise ValueError(f"cannot squeeze axis {a} of size {data.shape[a]} (shape "
                             f"{list(data.shape)})")
    return data.reshape([d for i, d in enumerate(data.shape) if i not in chosen])


def _squeeze_rule(ctx: InferContext, data: Any, axes: list[int] | None, count: int | None,
                  given: bool) -> TensorType:
    dtype, shape = dtype_or_none(data), shape_or_none(data)
    if shape is None:
        return TensorType(dtype, None)
    if not given:
        if all(isinstance(d, int) for d in shape):
            return TensorType(dtype, tuple(d for d in shape if d != 1))
        return TensorType(dtype, None)
    if axes is None:
        return TensorType(dtype, None if count is None else (None,) * (len(shape) - count))
    chosen = {normalize_axis(ctx, a, len(shape)) for a in axes}
    for a in chosen:
        if isinstance(shape[a], int) and shape[a] != 1:
            ctx.fail(f"cannot squeeze axis {a} of size {shape[a]}")
    return TensorType(dtype, tuple(d for i, d in enumerate(shape) if i not in chosen))


def _infer_squeeze_1(ctx: InferContext, data: Any, *, axes: Any) -> TensorType:
    return _squeeze_rule(ctx, data, None if axes is None else list(axes), None, axes is not None)


def _infer_squeeze_13(ctx: InferContext, data: Any, axes: Any = None) -> TensorType:
    return _squeeze_rule(ctx, data, known_ints(ctx, 1), static_length(axes), axes is not None)


@op("Squeeze", since=1, inputs=("data",), outputs=("squeezed",), infer=_infer_squeeze_1,
    attrs=(Attr("axes", "ints", None, "axes to remove (absent: every size-1 axis)"),))
def squeeze_1(data: np.ndarray, *, axes: Any) -> np.ndarray:
    """Squeeze-1/11: remove the size-1 dims listed in the ``axes`` attribute.

    data: any shape.  axes absent: every size-1 dim is removed.  Squeezing a dim whose size is
    not 1 is an error; negative axes count from the back.
    """
    return _squeeze(data, axes)


@op("Squeeze", since=13, inputs=("data", "axes?"), outputs=("squeezed",),
    infer=_infer_squeeze_13, value_inputs=(1,))
def squeeze_13(data: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    """Squeeze-13: as Squeeze-1 with ``axes`` an optional int64 1-D input."""
    return _squeeze(data, axes)


# =============================================================================== Unsqueeze


def _unsqueeze_axes(axes: list[int], out_rank: int) -> list[int]:
    chosen = [axis_of(a, out_rank) for a in axes]
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"axes {axes} repeat an axis")
    return sorted(chosen)


def _unsqueeze(data: np.ndarray, axes: Any) -> np.ndarray:
    listed = ints(axes)
    out_rank = data.ndim + len(listed)
    shape = list(data.shape)
    for a in _unsqueeze_axes(listed, out_rank):
        shape.insert(a, 1)
    return data.reshape(shape)


def _unsqueeze_rule(ctx: InferContext, data: Any, axes: list[int] | None,
                    count: int | None) -> TensorType:
    dtype, shape = dtype_or_none(data), shape_or_none(data)
    if shape is None:
        return TensorType(dtype, None)
    if axes is None:
        return TensorType(dtype, None if count is None else (None,) * (len(shape) + count))
    out_rank = len(shape) + len(axes)
    try:
        chosen = _unsqueeze_axes(axes, out_rank)
    except ValueError as exc:
        ctx.fail(str(exc))
    out = list(shape)
    for a in chosen:
        out.insert(a, 1)
    return TensorType(dtype, tuple(out))


def _infer_unsqueeze_1(ctx: InferContext, data: Any, *, axes: Any) -> TensorType:
    return _unsqueeze_rule(ctx, data, list(axes), None)


def _infer_unsqueeze_13(ctx: InferContext, data: Any, axes: Any) -> TensorType:
    return _unsqueeze_rule(ctx, data, known_ints(ctx, 1), static_length(axes))


@op("Unsqueeze", since=1, inputs=("data",), outputs=("expanded",), infer=_infer_unsqueeze_1,
    attrs=(Attr("axes", "ints", doc="positions of the new size-1 dims in the output"),))
def unsqueeze_1(data: np.ndarray, *, axes: Any) -> np.ndarray:
    """Unsqueeze-1/11: insert size-1 dims at the output positions listed in ``axes``.

    data: any shape.  Output rank = rank + len(axes); each axis is in [-out_rank, out_rank)
    (negative counts from the back of the output), in any order, without repeats.
    """
    return _unsqueeze(data, axes)


@op("Unsqueeze", since=13, inputs=("data", "axes"), outputs=("expanded",),
    infer=_infer_unsqueeze_13, value_inputs=(1,))
def unsqueeze_13(data: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """Unsqueeze-13: as Unsqueeze-1 with ``axes`` an int64 1-D input."""
    return _unsqueeze(data, axes)


# =============================================================================== Transpose


def _perm(perm: Any, rank: int) -> list[int]:
    if perm is None:
        return list(range(rank))[::-1]
    order = [axis_of(p, rank, "perm entry") for p in perm]
    if sorted(order) != list(range(rank)):
        raise ValueError(f"perm {list(perm)} is not a permutation of {rank} axes")
    return order


def _infer_transpose(ctx: InferContext, data: Any, *, perm: Any) -> TensorType:
    shape = shape_or_none(data)
    if shape is None:
        return TensorType(dtype_or_none(data), None if perm is None else (None,) * len(perm))
    try:
        order = _perm(perm, len(shape))
    except ValueError as exc:
        ctx.fail(str(exc))
    return TensorType(data.dtype, tuple(shape[p] for p in order))


@op("Transpose", since=1, inputs=("data",), outputs=("transposed",), infer=_infer_transpose,
    attrs=(Attr("perm", "ints", None, "output axis i is input axis perm[i] (absent: reversed)"),))
def transpose(data: np.ndarray, *, perm: Any) -> np.ndarray:
    """transposed.shape[i] = data.shape[perm[i]]; perm absent reverses the axes.

    data: any shape.  The output is a NumPy view.  Versions 1, 13, 21-25 differ only in dtypes.
    """
    return np.transpose(data, _perm(perm, data.ndim))


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


# =============================================================================== Expand


def _infer_expand(ctx: InferContext, x: Any, shape: Any) -> TensorType:
    dtype, in_shape = dtype_or_none(x), shape_or_none(x)
    target = known_ints(ctx, 1)
    if target is not None:
        if any(t < 0 for t in target):
            ctx.fail(f"expand shape {target} has negative entries")
        return TensorType(dtype, broadcast_dims(ctx, in_shape, tuple(target)))
    n = static_length(shape)
    if in_shape is None or n is None:
        return TensorType(dtype, None)
    rank = max(n, len(in_shape))
    out: list[Dim] = [None] * rank
    for i, d in enumerate(in_shape):
        if isinstance(d, int) and d != 1:
            out[rank - len(in_shape) + i] = d  # a target dim may only be 1 or d here
    return TensorType(dtype, tuple(out))


@op("Expand", since=8, inputs=("input", "shape"), outputs=("output",), infer=_infer_expand,
    value_inputs=(1,))
def expand(input: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """output = input broadcast with ``shape`` (int64 1-D), like input * ones(shape).

    Unlike np.broadcast_to, ``shape`` may have fewer dims than ``input`` or hold 1 where the
    input is larger: the output shape is the two-way broadcast of both.  A 0 in ``shape``
    against a 1 gives an empty dim.  Versions 8 and 13 differ only in dtypes.
    """
    target = ints(shape)
    out_shape = np.broadcast_shapes(input.shape, tuple(target))
    return np.array(np.broadcast_to(input, out_shape))


# =============================================================================== Tile


def _infer_tile_6(ctx: InferContext, x: Any, repeats: Any) -> TensorType:
    dtype, shape = dtype_or_none(x), shape_or_none(x)
    if shape is None:
        return TensorType(dtype, None)
    reps = known_ints(ctx, 1)
    if reps is None:
        return TensorType(dtype, (None,) * len(shape))
    if len(reps) != len(shape):
        ctx.fail(f"repeats {reps} must have one entry per input axis ({len(shape)})")
    return TensorType(dtype, tuple(_mul_dim(d, r) for d, r in zip(shape, reps)))


def _mul_dim(d: Dim, r: int) -> Dim:
    if r == 1 or r == 0:
        return d if r == 1 else 0
    return d * r if isinstance(d, int) else None


def _infer_tile_1(ctx: InferContext, x: Any, tiles: Any, axis: Any) -> TensorType:
    dtype, shape = dtype_or_none(x), shape_or_none(x)
    if shape is None:
        return TensorType(dtype, None)
    t, a = ctx.value(1), ctx.value(2)
    if t is None or a is None:
        return TensorType(dtype, (None,) * len(shape))
    axis = normalize_axis(ctx, scalar_int(a, "axis"), len(shape))
    out = list(shape)
    out[axis] = _mul_dim(shape[axis], scalar_int(t, "tiles"))
    return TensorType(dtype, tuple(out))


@op("Tile", since=1, inputs=("input", "tiles", "axis"), outputs=("output",), infer=_infer_tile_1,
    value_inputs=(1, 2))
def tile_1(input: np.ndarray, tiles: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Tile-1: repeat the whole tensor ``tiles`` times along one ``axis`` (both scalar inputs)."""
    reps = [1] * input.ndim
    reps[axis_of(scalar_int(axis, "axis"), input.ndim)] = scalar_int(tiles, "tiles")
    return np.tile(input, reps)


@op("Tile", since=6, inputs=("input", "repeats"), outputs=("output",), infer=_infer_tile_6,
    value_inputs=(1,))
def tile_6(input: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    """output = input tiled repeats[i] times along each axis i (np.tile).

    repeats: int64 1-D, one non-negative entry per input axis; output.shape[i] =
    shape[i] * repeats[i].  Versions 6 and 13 differ only in dtypes.
    """
    reps = ints(repeats)
    if len(reps) != input.ndim or any(r < 0 for r in reps):
        raise ValueError(f"repeats {reps} must be {input.ndim} non-negative entries")
    return np.tile(input, reps)


# =============================================================================== Pad


def _pad(data: np.ndarray, pads: Any, mode: str, value: Any, axes: Any = None) -> np.ndarray:
    rank = data.ndim
    axes = list(range(rank)) if axes is None else [axis_of(a, rank) for a in ints(axes)]
    pads = ints(pads)
    if len(pads) != 2 * len(axes):
        raise ValueError(f"pads has {len(pads)} entries; expected 2 * {len(axes)}")
    width = [(0, 0)] * rank
    for i, a in enumerate(axes):
        width[a] = (pads[i], pads[len(axes) + i])
    # Negative pads remove elements: crop first, then pad the cropped tensor.
    crop = []
    for (begin, end), d in zip(width, data.shape):
        stop = d - max(-end, 0)
        if stop < max(-begin, 0):
            raise ValueError(f"pads {pads} remove more than the {d} elements of an axis")
        crop.append(slice(max(-begin, 0), stop))
    data = data[tuple(crop)]
    width = [(max(b, 0), max(e, 0)) for b, e in width]
    if mode == "constant":
        fill = zero_of(data.dtype) if value is None else np.asarray(value).reshape(-1)[0]
        if data.dtype != object:
            fill = np.asarray(fill).astype(data.dtype)
        return np.pad(data, width, mode="constant", constant_values=fill)
    if mode not in ("reflect", "edge", "wrap"):
        raise ValueError(f"unknown pad mode {mode!r}")
    for (b, e), d in zip(width, data.shape):
        if (b or e) and d == 0:
            raise ValueError(f"mode {mode!r} cannot pad an empty axis")
    return np.pad(data, width, mode=mode)


def _pad_rule(ctx: InferContext, data: Any, pads: list[int] | None, axes: list[int] | None,
              axes_given: bool) -> TensorType:
    dtype, shape = dtype_or_none(data), shape_or_none(data)
    if shape is None:
        return TensorType(dtype, None)
    rank = len(shape)
    if axes is None and axes_given:
        return TensorType(dtype, (None,) * rank)
    axes = list(range(rank)) if axes is None else [normalize_axis(ctx, a, rank) for a in axes]
    out = list(shape)
    if pads is None:
        for a in axes:
            out[a] = None
        return TensorType(dtype, tuple(out))
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads has {len(pads)} entries; expected 2 * {len(axes)}")
    for i, a in enumerate(axes):
        out[a] = add_dims(shape[a], pads[i] + pads[len(axes) + i])
    return TensorType(dtype, tuple(out))


def _infer_pad_1(ctx: InferContext, data: Any, **attrs: Any) -> TensorType:
    pads = attrs.get("paddings", attrs.get("pads"))
    return _pad_rule(ctx, data, list(pads), None, False)


def _infer_pad_11(ctx: InferContext, data: Any, pads: Any, value: Any = None, axes: Any = None,
                  **attrs: Any) -> TensorType:
    return _pad_rule(ctx, data, known_ints(ctx, 1), known_ints(ctx, 3), axes is not None)


_MODE = Attr("mode", "string", "constant", "constant, reflect or edge")


@op("Pad", since=1, inputs=("data",), outputs=("output",), infer=_infer_pad_1,
    attrs=(Attr("paddings", "ints", doc="[x1_begin, x2_begin, ..., x1_end, x2_end, ...]"),
           _MODE, Attr("value", "float", 0.0, "fill value of constant mode")))
def pad_1(data: np.ndarray, *, paddings: Any, mode: str, value: float) -> np.ndarray:
    """Pad-1: as Pad-2 with the pads in the ``paddings`` attribute."""
    return _pad(data, paddings, mode, value)


@op("Pad", since=2, inputs=("data",), outputs=("output",), infer=_infer_pad_1,
    attrs=(Attr("pads", "ints", doc="[x1_begin, x2_begin, ..., x1_end, x2_end, ...]"),
           _MODE, Attr("value", "float", 0.0, "fill value of constant mode")))
def pad_2(data: np.ndarray, *, pads: Any, mode: str, value: float) -> np.ndarray:
    """Pad-2: as Pad-11 with ``pads`` and the fill ``value`` (a float, cast to the data dtype)
    as attributes."""
    return _pad(data, pads, mode, value)


@op("Pad", since=11, inputs=("data", "pads", "constant_value?"), outputs=("output",),
    infer=_infer_pad_11, value_inputs=(1,), attrs=(_MODE,))
def pad_11(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None, *,
           mode: str) -> np.ndarray:
    """output = data padded by ``pads`` (int64, [x1_begin, x2_begin, ..., x1_end, ...]).

    constant: fill with ``constant_value`` (a scalar; absent: 0, '' or False).  reflect:
    mirror without repeating the edge (np.pad 'reflect').  edge: repeat the edge value.
    Negative pads remove elements at that side; removal happens before padding, so reflect and
    edge read the cropped tensor.  Padding an empty axis in a non-constant mode is an error.
    Versions 11 and 13 (more dtypes) behave the same.
    """
    return _pad(data, pads, mode, constant_value)


@op("Pad", since=18, inputs=("data", "pads", "constant_value?", "axes?"), outputs=("output",),
    infer=_infer_pad_11, value_inputs=(1, 3), attrs=(_MODE,))
def pad_18(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None,
           axes: np.ndarray | None = None, *, mode: str) -> np.ndarray:
    """Pad-18: as Pad-11, with ``axes`` (int 1-D, negative from the back) naming the padded
    axes; ``pads`` then has 2 * len(axes) entries."""
    return _pad(data, pads, mode, constant_value, axes)


@op("Pad", since=19, inputs=("data", "pads", "constant_value?", "axes?"), outputs=("output",),
    infer=_infer_pad_11, value_inputs=(1, 3),
    attrs=(Attr("mode", "string", "constant", "constant, reflect, edge or wrap"),))
def pad_19(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None,
           axes: np.ndarray | None = None, *, mode: str) -> np.ndarray:
    """Pad-19: as Pad-18, plus mode 'wrap': pad with the values from the opposite side, as if
    the (cropped) tensor were a torus (np.pad 'wrap').  Versions 19, 21-25: dtypes only."""
    return _pad(data, pads, mode, constant_value, axes)


# =============================================================================== DepthToSpace


def _check_4d(x: np.ndarray, op_name: str) -> None:
    if x.ndim != 4:
        raise ValueError(f"{op_name} takes a 4-D [N, C, H, W] input, got shape {list(x.shape)}")


def _depth_to_space(x: np.ndarray, blocksize: int, mode: str) -> np.ndarray:
    _check_4d(x, "DepthToSpace")
    b, c, h, w = x.shape
    bs = blocksize
    if bs < 1 or c % (bs * bs):
        raise ValueError(f"channels {c} are not divisible by blocksize^2 = {bs * bs}")
    if mode == "DCR":
        tmp = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        tmp = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        raise ValueError(f"unknown mode {mode!r} (DCR or CRD)")
    return tmp.reshape(b, c // (bs * bs), h * bs, w * bs)


def _infer_depth_to_space(ctx: InferContext, x: Any, *, blocksize: int, **_: Any) -> TensorType:
    shape = shape_or_none(x)
    if shape is None:
        return TensorType(dtype_or_none(x), (None,) * 4)
    if len(shape) != 4:
        ctx.fail(f"input must be 4-D, got rank {len(shape)}")
    if blocksize < 1:
        ctx.fail(f"blocksize must be positive, got {blocksize}")
    n, c, h, w = shape
    bs2 = blocksize * blocksize
    if isinstance(c, int) and c % bs2:
        ctx.fail(f"channels {c} are not divisible by blocksize^2 = {bs2}")
    return TensorType(x.dtype, (n, c // bs2 if isinstance(c, int) else None,
                                h * blocksize if isinstance(h, int) else None,
                                w * blocksize if isinstance(w, int) else None))


_BLOCK = Attr("blocksize", "int", doc="side of the square blocks moved")


@op("DepthToSpace", since=1, inputs=("input",), outputs=("output",),
    infer=_infer_depth_to_space, attrs=(_BLOCK,))
def depth_to_space_1(input: np.ndarray, *, blocksize: int) -> np.ndarray:
    """DepthToSpace-1: the DCR rearrangement of DepthToSpace-11 (the only mode before 11)."""
    return _depth_to_space(input, blocksize, "DCR")


@op("DepthToSpace", since=11, inputs=("input",), outputs=("output",),
    infer=_infer_depth_to_space,
    attrs=(Attr("mode", "string", "DCR", "DCR (depth-column-row) or CRD"), _BLOCK))
def depth_to_space_11(input: np.ndarray, *, mode: str, blocksize: int) -> np.ndarray:
    """Move channel blocks into bs x bs spatial blocks: [N, C, H, W] -> [N, C/bs², H·bs, W·bs].

    DCR: x.reshape(N, bs, bs, C/bs², H, W).transpose(0, 3, 4, 1, 5, 2).
    CRD: x.reshape(N, C/bs², bs, bs, H, W).transpose(0, 1, 4, 2, 5, 3).
    C must be divisible by bs².  Versions 11, 13, 28 differ only in dtypes.
    """
    return _depth_to_space(input, blocksize, mode)


def _space_to_depth(x: np.ndarray, blocksize: int, mode: str) -> np.ndarray:
    _check_4d(x, "SpaceToDepth")
    b, c, h, w = x.shape
    bs = blocksize
    if bs < 1 or h % bs or w % bs:
        raise ValueError(f"spatial dims {h}x{w} are not divisible by blocksize {bs}")
    tmp = x.reshape(b, c, h // bs, bs, w // bs, bs)
    if mode == "DCR":
        tmp = tmp.transpose(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        tmp = tmp.transpose(0, 1, 3, 5, 2, 4)
    else:
        raise ValueError(f"unknown mode {mode!r} (DCR or CRD)")
    return tmp.reshape(b, c * bs * bs, h // bs, w // bs)


def _infer_space_to_depth(ctx: InferContext, x: Any, *, blocksize: int, **_: Any) -> TensorType:
    shape = shape_or_none(x)
    if shape is None:
        return TensorType(dtype_or_none(x), (None,) * 4)
    if len(shape) != 4:
        ctx.fail(f"input must be 4-D, got rank {len(shape)}")
    if blocksize < 1:
        ctx.fail(f"blocksize must be positive, got {blocksize}")
    n, c, h, w = shape
    for d in (h, w):
        if isinstance(d, int) and d % blocksize:
            ctx.fail(f"spatial dim {d} is not divisible by blocksize {blocksize}")
    return TensorType(x.dtype, (n, c * blocksize**2 if isinstance(c, int) else None,
                                h // blocksize if isinstance(h, int) else None,
                                w // blocksize if isinstance(w, int) else None))


@op("SpaceToDepth", since=1, inputs=("input",), outputs=("output",),
    infer=_infer_space_to_depth, attrs=(_BLOCK,))
def space_to_depth_1(input: np.ndarray, *, blocksize: int) -> np.ndarray:
    """Move bs x bs spatial blocks into channels: [N, C, H, W] -> [N, C·bs², H/bs, W/bs].

    x.reshape(N, C, H/bs, bs, W/bs, bs).transpose(0, 3, 5, 1, 2, 4) (block row, block column,
    then channel: the inverse of DepthToSpace DCR).  H and W must be divisible by bs.
    Versions 1 and 13 differ only in dtypes.
    """
    return _space_to_depth(input, blocksize, "DCR")


@op("SpaceToDepth", since=28, inputs=("input",), outputs=("output",),
    infer=_infer_space_to_depth,
    attrs=(Attr("mode", "string", "DCR", "DCR (depth-column-row) or CRD"), _BLOCK))
def space_to_depth_28(input: np.ndarray, *, mode: str, blocksize: int) -> np.ndarray:
    """SpaceToDepth-28: as SpaceToDepth-1 (mode DCR), plus mode CRD: transpose
    (0, 1, 3, 5, 2, 4), channel first then block row and column (inverse of DepthToSpace CRD)."""
    return _space_to_depth(input, blocksize, mode)


# =============================================================================== Shape, Size


def _shape_range(rank: int, start: int, end: int | None) -> tuple[int, int]:
    def clamp(a: int) -> int:
        return min(max(a + rank if a < 0 else a, 0), rank)

    return clamp(start), clamp(rank if end is None else end)


def _infer_shape(ctx: InferContext, data: Any, *, start: int = 0,
                 end: int | None = None) -> TensorType:
    shape = shape_or_none(data)
    if shape is None:
        return TensorType(INT64, (None,))
    lo, hi = _shape_range(len(shape), start, end)
    return TensorType(INT64, (max(hi - lo, 0),))


@op("Shape", since=1, inputs=("data",), outputs=("shape",), infer=_infer_shape)
def shape_1(data: np.ndarray) -> np.ndarray:
    """shape = data's shape as an int64 1-D tensor (empty for a scalar)."""
    return np.array(data.shape, dtype=np.int64)


@op("Shape", since=15, inputs=("data",), outputs=("shape",), infer=_infer_shape,
    attrs=(Attr("end", "int", None, "end axis, exclusive (absent: rank)"),
           Attr("start", "int", 0, "first axis")))
def shape_15(data: np.ndarray, *, end: int | None, start: int) -> np.ndarray:
    """Shape-15: data.shape[start:end] as int64 1-D.

    Negative start/end have the rank added, then both are clamped to [0, rank]; start >= end
    gives an empty tensor.  Versions 15, 19, 21-25 differ only in dtypes.
    """
    lo, hi = _shape_range(data.ndim, start, end)
    return np.array(data.shape[lo:hi], dtype=np.int64)


@op("Size", since=1, inputs=("data",), outputs=("size",),
    infer=lambda ctx, data: TensorType(INT64, ()))
def size(data: np.ndarray) -> np.ndarray:
    """size = the number of elements of ``data`` as an int64 scalar (1 for a scalar)."""
    return np.array(data.size, dtype=np.int64)


# =============================================================================== Identity


@op("Identity", since=1, inputs=("input",), outputs=("output",), infer=same_as(0))
def identity(input: Any) -> Any:
    """output = input, unchanged and uncopied.

    Tensors of every dtype; from opset 14 also sequences (Python lists), from 16 optionals
    (None when empty).  One definition covers versions 1-25.
    """
    return input


# =============================================================================== Constant


def _constant_value(value: Any, sparse_value: Any = None, value_float: Any = None,
                    value_floats: Any = None, value_int: Any = None, value_ints: Any = None,
                    value_string: Any = None, value_strings: Any = None) -> np.ndarray:
    given = [(name, v) for name, v in (
        ("value", value), ("sparse_value", sparse_value), ("value_float", value_float),
        ("value_floats", value_floats), ("value_int", value_int), ("value_ints", value_ints),
        ("value_string", value_string), ("value_strings", value_strings)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"Constant needs exactly one value attribute, got {[n for n, _ in given]}")
    name, v = given[0]
    if name in ("value", "sparse_value"):
        return np.asarray(v)
    if name in ("value_float", "value_floats"):
        return np.array(v, dtype=np.float32)
    if name in ("value_int", "value_ints"):
        return np.array(v, dtype=np.int64)
    if name == "value_string":
        return np.array(v, dtype=object)
    out = np.empty(len(v), dtype=object)
    out[:] = list(v)
    return out


def _infer_constant(ctx: InferContext, **attrs: Any) -> TensorType:
    try:
        array = _constant_value(**attrs)
    except ValueError as exc:
        ctx.fail(str(exc))
    return TensorType(DType.from_numpy(array.dtype), tuple(array.shape))


@op("Constant", since=1, inputs=(), outputs=("output",), infer=_infer_constant,
    attrs=(Attr("value", "tensor", doc="the output tensor"),))
def constant_1(*, value: np.ndarray) -> np.ndarray:
    """output = the ``value`` tensor attribute (versions 1 and 9; 9 adds dtypes)."""
    return value


@op("Constant", since=11, inputs=(), outputs=("output",), infer=_infer_constant,
    attrs=(Attr("value", "tensor", None, "the output tensor"),
           Attr("sparse_value", "sparse_tensor", None, "the output tensor, sparse")))
def constant_11(*, value: Any, sparse_value: Any) -> np.ndarray:
    """Constant-11: exactly one of ``value`` or ``sparse_value`` (densified: zeros except at
    the listed indices)."""
    return _constant_value(value, sparse_value)


@op("Constant", since=12, inputs=(), outputs=("output",), infer=_infer_constant,
    attrs=(Attr("value", "tensor", None, "the output tensor"),
           Attr("sparse_value", "sparse_tensor", None, "the output tensor, sparse"),
           Attr("value_float", "float", None, "a float32 scalar"),
           Attr("value_floats", "floats", None, "a float32 1-D tensor"),
           Attr("value_int", "int", None, "an int64 scalar"),
           Attr("value_ints", "ints", None, "an int64 1-D tensor"),
           Attr("value_string", "string", None, "a string scalar"),
           Attr("value_strings", "strings", None, "a string 1-D tensor")))
def constant_12(*, value: Any, sparse_value: Any, value_float: Any, value_floats: Any,
                value_int: Any, value_ints: Any, value_string: Any,
                value_strings: Any) -> np.ndarray:
    """Constant-12: exactly one attribute gives the output.

    value / sparse_value: that tensor; value_float(s): float32 scalar / 1-D; value_int(s):
    int64 scalar / 1-D; value_string(s): string scalar / 1-D.  Versions 12, 13, 19, 21-25
    differ only in dtypes.
    """
    return _constant_value(value, sparse_value, value_float, value_floats, value_int,
                           value_ints, value_string, value_strings)


# =============================================================================== ConstantOfShape


def _fill_value(value: Any) -> np.ndarray:
    if value is None:
        return np.zeros((), dtype=np.float32)
    array = np.asarray(value)
    if array.size != 1:
        raise ValueError(f"value must hold one element, got shape {list(array.shape)}")
    return array.reshape(())


def _infer_constant_of_shape(ctx: InferContext, shape: Any, *, value: Any) -> TensorType:
    dtype = DType.from_numpy(_fill_value(value).dtype)
    target = known_ints(ctx, 0)
    if target is not None:
        if any(d < 0 for d in target):
            ctx.fail(f"shape {target} has negative entries")
        return TensorType(dtype, tuple(target))
    n = static_length(shape)
    return TensorType(dtype, None if n is None else (None,) * n)


@op("ConstantOfShape", since=9, inputs=("input",), outputs=("output",),
    infer=_infer_constant_of_shape, value_inputs=(0,),
    attrs=(Attr("value", "tensor", None, "one-element fill tensor (absent: float32 0)"),))
def constant_of_shape(input: np.ndarray, *, value: Any) -> np.ndarray:
    """output = a tensor of shape ``input`` (int64 1-D, entries >= 0) filled with ``value``.

    The dtype is that of ``value`` (absent: float32 zeros); an empty ``input`` gives a scalar.
    Versions 9, 20, 21-25 differ only in dtypes.
    """
    shape = ints(input)
    if any(d < 0 for d in shape):
        raise ValueError(f"shape {shape} has negative entries")
    fill = _fill_value(value)
    return np.full(shape, fill, dtype=fill.dtype)


# =============================================================================== EyeLike


def _infer_eye_like(ctx: InferContext, x: Any, *, dtype: int | None, k: int) -> TensorType:
    out = dtype_or_none(x) if dtype is None else DType.from_onnx(dtype)
    shape = shape_or_none(x)
    if shape is not None and len(shape) != 2:
        ctx.fail(f"input must be 2-D, got rank {len(shape)}")
    return TensorType(out, shape if shape is not None else (None, None))


@op("EyeLike", since=9, inputs=("input",), outputs=("output",), infer=_infer_eye_like,
    attrs=(Attr("dtype", "int", None, "output dtype as a TensorProto code (absent: input's)"),
           Attr("k", "int", 0, "diagonal: output[i, i+k] = 1")))
def eye_like(input: np.ndarray, *, dtype: int | None, k: int) -> np.ndarray:
    """output[i, j] = 1 if j - i == k else 0, with the shape of the 2-D ``input``.

    dtype: the output element type (absent: the input's); bool gives True/False.  k > 0 is an
    upper diagonal, k < 0 a lower one; |k| beyond the matrix gives all zeros.  Versions 9 and
    22 differ only in dtypes.
    """
    if input.ndim != 2:
        raise ValueError(f"EyeLike takes a 2-D input, got shape {list(input.shape)}")
    out_dtype = input.dtype if dtype is None else DType.from_onnx(dtype).numpy
    return np.eye(input.shape[0], input.shape[1], k=k).astype(out_dtype)


# =============================================================================== Range


def _range_count(start: Any, limit: Any, delta: Any) -> int:
    """max(ceil((limit - start) / delta), 0): exact for integers, in float64 for floats."""
    s, l, d = (np.asarray(v).reshape(()).item() for v in (start, limit, delta))
    if d == 0:
        raise ValueError("Range delta cannot be 0")
    if isinstance(s, int) and isinstance(l, int) and isinstance(d, int):
        return max(-((s - l) // d), 0)
    return max(math.ceil((float(l) - float(s)) / float(d)), 0)


def _range(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, work: np.dtype) -> np.ndarray:
    count = _range_count(start, limit, delta)
    s, d = np.asarray(start).reshape(()).item(), np.asarray(delta).reshape(()).item()
    if start.dtype.kind in "iu":
        return (s + np.arange(count, dtype=np.int64) * d).astype(start.dtype)
    steps = np.arange(count, dtype=work)
    return (work.type(s) + steps * work.type(d)).astype(start.dtype)


def _infer_range(ctx: InferContext, start: Any, limit: Any, delta: Any, **_: Any) -> TensorType:
    dtype = dtype_or_none(start)
    values = [ctx.value(i) for i in range(3)]
    if any(v is None for v in values):
        return TensorType(dtype, (None,))
    try:
        n = _range_count(*values)
    except ValueError as exc:
        ctx.fail(str(exc))
    return TensorType(dtype, (n,))


@op("Range", since=11, inputs=("start", "limit", "delta"), outputs=("output",),
    infer=_infer_range, value_inputs=(0, 1, 2))
def range_11(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """output[i] = start + i * delta for i < max(ceil((limit - start) / delta), 0).

    start, limit, delta: scalars of one dtype (float, double, int16/32/64).  The count is
    computed exactly for integers and in float64 for floats; each element is computed
    directly (no running sum).  delta = 0 is an error.
    """
    return _range(start, limit, delta, compute_dtype(start.dtype))


@op("Range", since=27, inputs=("start", "limit", "delta"), outputs=("output",),
    infer=_infer_range, value_inputs=(0, 1, 2),
    attrs=(Attr("stash_type", "int", 1, "compute type for float16/bfloat16 (1: float32)"),))
def range_27(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, *,
             stash_type: int) -> np.ndarray:
    """Range-27: as Range-11, plus float16/bfloat16, whose elements are computed in the
    ``stash_type`` precision (TensorProto code; 1 = float32, the default) and rounded once."""
    work = start.dtype
    if start.dtype in (np.dtype(np.float16), DType.bfloat16.numpy):
        work = DType.from_onnx(stash_type).numpy
    return _range(start, limit, delta, np.dtype(work))


# =============================================================================== ReverseSequence


def _infer_reverse_sequence(ctx: InferContext, x: Any, lens: Any, *, batch_axis: int,
                            time_axis: int) -> TensorType:
    shape = shape_or_none(x)
    if shape is not None and len(shape) < 2:
        ctx.fail(f"input must have rank >= 2, got {len(shape)}")
    return TensorType(dtype_or_none(x), shape)


@op("ReverseSequence", since=10, inputs=("input", "sequence_lens"), outputs=("Y",),
    infer=_infer_reverse_sequence,
    attrs=(Attr("batch_axis", "int", 1, "batch axis (0 or 1)"),
           Attr("time_axis", "int", 0, "time axis (1 or 0)")))
def reverse_sequence(input: np.ndarray, sequence_lens: np.ndarray, *, batch_axis: int,
                     time_axis: int) -> np.ndarray:
    """For each batch entry b, reverse the first sequence_lens[b] steps along ``time_axis`` and
    copy the rest: Y[b, t] = input[b, L-1-t] for t < L = sequence_lens[b], else input[b, t].

    input: rank >= 2; sequence_lens: int64 [batch], each in [0, time] (else an error).
    batch_axis and time_axis are 0 and 1 in either order.  Versions 10 and 28: dtypes only.
    """
    if {batch_axis, time_axis} != {0, 1} or input.ndim < 2:
        raise ValueError(f"batch_axis/time_axis must be 0 and 1 (got {batch_axis}, {time_axis})")
    steps, batch = input.shape[time_axis], input.shape[batch_axis]
    lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
    if lens.shape != (batch,) or (lens < 0).any() or (lens > steps).any():
        raise ValueError(f"sequence_lens {lens.tolist()} must be {batch} values in [0, {steps}]")
    t = np.arange(steps)
    source = np.where(t < lens[:, None], lens[:, None] - 1 - t, t)  # [batch, time]
    if time_axis == 0:
        source = source.T
    index = source.reshape(source.shape + (1,) * (input.ndim - 2))
    return np.take_along_axis(input, np.broadcast_to(index, input.shape), axis=time_axis)


# =============================================================================== Trilu


@op("Trilu", since=14, inputs=("input", "k?"), outputs=("output",), infer=same_as(0),
    attrs=(Attr("upper", "int", 1, "1: keep the upper triangle, 0: the lower"),))
def trilu(input: np.ndarray, k: np.ndarray | None = None, *, upper: int) -> np.ndarray:
    """Keep one triangle of the last two dims (N x M) and zero the rest.

    upper=1: keep input[..., i, j] where j - i >= k; upper=0: where j - i <= k.  k: int64
    scalar input, default 0.  "Zero" is '' for strings and False for bool.  input: rank >= 2.
    """
    if input.ndim < 2:
        raise ValueError(f"Trilu takes a rank >= 2 input, got shape {list(input.shape)}")
    diag = 0 if k is None else scalar_int(k, "k")
    rows, cols = input.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset >= diag if upper else offset <= diag
    return np.where(keep, input, zero_of(input.dtype)).astype(input.dtype, copy=False)


OPS = (
    reshape_1, reshape_5, reshape_14,
    flatten,
    squeeze_1, squeeze_13,
    unsqueeze_1, unsqueeze_13,
    transpose,
    concat_1, concat_4,
    split_1, split_2, split_13, split_18,
    slice_1, slice_10,
    expand,
    tile_1, tile_6,
    pad_1, pad_2, pad_11, pad_18, pad_19,
    depth_to_space_1, depth_to_space_11,
    space_to_depth_1, space_to_depth_28,
    shape_1, shape_15,
    size,
    identity,
    constant_1, constant_11, constant_12,
    constant_of_shape,
    eye_like,
    range_11, range_27,
    reverse_sequence,
    trilu,
)
