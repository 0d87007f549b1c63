"""Shape ops: Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile, Shape, Size, Identity.

Every op here moves data without arithmetic on it, so each works for every dtype (strings are
NumPy object arrays). Their shape rules matter most: shape inference resolves the
shape-computation chains of real models (Shape -> Gather -> Concat -> Reshape) through them, so
each rule reads constant inputs with ``ctx.value`` and, when a value is unknown, returns the most
precise partial answer (known rank, None dims).

Negative axes are accepted at every opset version: the spec spells them out from opset 11, and
earlier producers already relied on them. The other data-movement families: layout (Transpose,
DepthToSpace, SpaceToDepth, ReverseSequence), split (Concat, Split, Slice), pad (Pad,
CenterCropPad) and constant (Constant, ConstantOfShape, EyeLike, Range, Trilu).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import Dim, TensorType
from refmnn.ops._infer import broadcast_dims, normalize_axis, same_as
from refmnn.ops._schema import Attr, InferContext, op
from refmnn.ops._shape_util import (
    axis_of,
    dtype_or_none,
    ints,
    known_ints,
    product,
    scalar_int,
    shape_or_none,
    static_length,
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
    if out_int == 0:  # a literal 0 among the other dims: -1 could be any size
        ctx.fail(f"cannot reshape {list(in_shape)}: the target's dims besides its -1, "
                 f"{known}, multiply to 0, so the -1 is ambiguous")
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


OPS = (
    reshape_1, reshape_5, reshape_14,
    flatten,
    squeeze_1, squeeze_13,
    unsqueeze_1, unsqueeze_13,
    expand,
    tile_1, tile_6,
    shape_1, shape_15,
    size,
    identity,
)
