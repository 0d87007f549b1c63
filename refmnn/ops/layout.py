"""Layout ops, which reorder elements without changing their values or count: Transpose,
DepthToSpace, SpaceToDepth, ReverseSequence.

Every op here works for every dtype (strings are NumPy object arrays); negative axes are accepted
at every opset version.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.graph import TensorType
from refmnn.ops._schema import Attr, InferContext, flag, op
from refmnn.ops._shape_util import axis_of, dtype_or_none, shape_or_none

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


# =============================================================================== ReverseSequence


def _infer_reverse_sequence(ctx: InferContext, x: Any, lens: Any, *, batch_axis: int,
                            time_axis: int) -> TensorType:
    shape = shape_or_none(x)
    if shape is not None and len(shape) < 2:
        ctx.fail(f"input must have rank >= 2, got {len(shape)}")
    return TensorType(dtype_or_none(x), shape)


@op("ReverseSequence", since=10, inputs=("input", "sequence_lens"), outputs=("Y",),
    infer=_infer_reverse_sequence,
    attrs=(flag("batch_axis", 1, "batch axis (0 or 1)"),
           flag("time_axis", 0, "time axis (1 or 0)")))
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


OPS = (
    transpose,
    depth_to_space_1, depth_to_space_11,
    space_to_depth_1, space_to_depth_28,
    reverse_sequence,
)
