"""Indexing ops: Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND,
TensorScatter, OneHot, NonZero, Compress, Unique, TopK.

Index inputs may be negative: an index i into an axis of size s must lie in [-s, s-1] and a
negative one is wrapped once (i + s).  An index outside that range is an error (IndexError, to
which the interpreter adds the node); it is never clipped or wrapped twice.  Ops whose output
size depends on the data (NonZero, Compress, Unique) get fresh symbolic dims from their rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.dtypes import DType, compute_dtype
from refmnn.graph import Dim, TensorType
from refmnn.ops._infer import normalize_axis, same_as
from refmnn.ops._schema import Attr, InferContext, flag, op
from refmnn.ops._shape_util import (
    axis_of,
    dtype_or_none,
    known_ints,
    merge_dims,
    scalar_int,
    shape_or_none,
    wrap_indices,
)

INT64 = DType.int64

# =============================================================================== Gather


def _infer_gather(ctx: InferContext, data: Any, indices: Any, *, axis: int) -> TensorType:
    dtype, shape, ind = dtype_or_none(data), shape_or_none(data), shape_or_none(indices)
    if shape is None or ind is None:
        return TensorType(dtype, None)
    if not shape:
        ctx.fail("data must have rank >= 1")
    axis = normalize_axis(ctx, axis, len(shape))
    return TensorType(dtype, shape[:axis] + ind + shape[axis + 1:])


@op("Gather", since=1, inputs=("data", "indices"), outputs=("output",), infer=_infer_gather,
    attrs=(Attr("axis", "int", 0, "axis of data to index; negative counts from the back"),))
def gather(data: np.ndarray, indices: np.ndarray, *, axis: int) -> np.ndarray:
    """output = np.take(data, indices, axis): for axis = 1,
    output[j0, i0, ..., i(q-1), j1, ...] = data[j0, indices[i0, ..., i(q-1)], j1, ...].

    data: rank r >= 1; indices: int32/int64 of any rank q (a scalar drops the axis); output
    rank q + r - 1.  Indices in [-s, s-1] (negative wrapped once), others are an error.  One
    definition covers versions 1, 11 and 13 (11 spelled out negative indices, which Gather-1
    exporters already emitted).
    """
    axis = axis_of(axis, data.ndim)
    return np.take(data, wrap_indices(indices, data.shape[axis], "Gather index"), axis=axis)


# =============================================================================== GatherElements


def _infer_gather_elements(ctx: InferContext, data: Any, indices: Any, *,
                           axis: int) -> TensorType:
    shape, ind = shape_or_none(data), shape_or_none(indices)
    if shape is not None and ind is not None:
        if len(shape) != len(ind):
            ctx.fail(f"data and indices ranks differ ({len(shape)} vs {len(ind)})")
        normalize_axis(ctx, axis, len(shape))
    return TensorType(dtype_or_none(data), ind)


@op("GatherElements", since=11, inputs=("data", "indices"), outputs=("output",),
    infer=_infer_gather_elements,
    attrs=(Attr("axis", "int", 0, "axis indexed; negative counts from the back"),))
def gather_elements(data: np.ndarray, indices: np.ndarray, *, axis: int) -> np.ndarray:
    """output[i][j][k] = data[indices[i][j][k]][j][k] for axis 0 (likewise for other axes);
    np.take_along_axis.

    data and indices have the same rank r >= 1; indices' dims other than ``axis`` must not
    exceed data's.  Output has indices' shape.  Indices in [-s, s-1], wrapped once; others are
    an error.  Versions 11 and 13 differ only in dtypes.
    """
    axis = axis_of(axis, data.ndim)
    if indices.ndim != data.ndim or any(
            n > d for i, (n, d) in enumerate(zip(indices.shape, data.shape)) if i != axis):
        raise ValueError(f"indices shape {list(indices.shape)} does not fit data shape "
                         f"{list(data.shape)} off axis {axis}")
    idx = wrap_indices(indices, data.shape[axis], "GatherElements index")
    return np.take_along_axis(data[_leading(indices.shape, axis, data.ndim)], idx, axis=axis)


def _leading(shape: tuple[int, ...], axis: int, rank: int) -> tuple[slice, ...]:
    """Slices that cut data down to ``shape`` on every axis but ``axis``."""
    return tuple(slice(None) if i == axis else slice(0, shape[i]) for i in range(rank))


# =============================================================================== GatherND


def _gather_nd(data: np.ndarray, indices: np.ndarray, batch_dims: int) -> np.ndarray:
    b, r, q = batch_dims, data.ndim, indices.ndim
    if q < 1 or not 0 <= b < min(q, r):
        raise ValueError(f"batch_dims {b} must be < min(rank(indices)={q}, rank(data)={r})")
    k = indices.shape[-1]
    if not 1 <= k <= r - b:
        raise ValueError(f"index tuples of length {k} must be in [1, rank(data) - batch_dims] "
                         f"= [1, {r - b}]")
    if indices.shape[:b] != data.shape[:b]:
        raise ValueError(f"batch dims differ: data {list(data.shape[:b])}, indices "
                         f"{list(indices.shape[:b])}")
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    per_batch = int(np.prod(indices.shape[b:-1], dtype=np.int64))
    flat = data.reshape((batch,) + data.shape[b:])
    tuples = indices.reshape(batch, per_batch, k)
    coords = [wrap_indices(tuples[..., j], data.shape[b + j], f"GatherND index (axis {b + j})")
              for j in range(k)]
    gathered = flat[(np.arange(batch)[:, None], *coords)]  # [batch, per_batch, *tail]
    return gathered.reshape(indices.shape[:-1] + data.shape[b + k:])


def _infer_gather_nd(ctx: InferContext, data: Any, indices: Any, *,
                     batch_dims: int = 0) -> TensorType:
    dtype, shape, ind = dtype_or_none(data), shape_or_none(data), shape_or_none(indices)
    if shape is None or ind is None:
        return TensorType(dtype, None)
    b = batch_dims
    if not ind or not 0 <= b < min(len(ind), len(shape)):
        ctx.fail(f"batch_dims {b} must be < min(rank(indices)={len(ind)}, rank(data)={len(shape)})")
    k = ind[-1]
    if not isinstance(k, int):
        return TensorType(dtype, None)
    if k > len(shape) - b:
        ctx.fail(f"index tuples of length {k} exceed rank(data) - batch_dims")
    batch = tuple(merge_dims(ctx, [a, c], "batch") for a, c in zip(shape[:b], ind[:b]))
    return TensorType(dtype, batch + ind[b:-1] + shape[b + k:])


@op("GatherND", since=11, inputs=("data", "indices"), outputs=("output",),
    infer=_infer_gather_nd)
def gather_nd_11(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """GatherND-11: GatherND-12 with batch_dims = 0."""
    return _gather_nd(data, indices, 0)


@op("GatherND", since=12, inputs=("data", "indices"), outputs=("output",),
    infer=_infer_gather_nd,
    attrs=(Attr("batch_dims", "int", 0, "leading dims shared by data and indices"),))
def gather_nd_12(data: np.ndarray, indices: np.ndarray, *, batch_dims: int) -> np.ndarray:
    """output[b..., i...] = data[b..., *indices[b..., i..., :]] (a slice when the index tuple
    is shorter than the remaining rank).

    data: rank r >= 1; indices: int64 rank q >= 1 whose last dim k (1 <= k <= r - b) is the
    tuple length; the first b = batch_dims dims of both must match.  Output shape
    indices.shape[:-1] + data.shape[b + k:].  Each coordinate in [-s, s-1], wrapped once.
    Versions 12 and 13 differ only in dtypes.
    """
    return _gather_nd(data, indices, batch_dims)


# =============================================================================== Scatter

_REDUCERS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_into(data: np.ndarray, where: tuple[Any, ...], updates: np.ndarray,
                  reduction: str) -> np.ndarray:
    """A copy of ``data`` with ``updates`` written (or reduced) at the index tuple ``where``."""
    if reduction == "none":
        out = data.copy()
        out[where] = updates
        return out
    if reduction not in _REDUCERS:
        raise ValueError(f"unknown reduction {reduction!r}")
    work = compute_dtype(data.dtype)
    out = data.astype(work, copy=True)
    _REDUCERS[reduction].at(out, where, updates.astype(work, copy=False))
    return out.astype(data.dtype, copy=False)


def _scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int,
                      reduction: str) -> np.ndarray:
    axis = axis_of(axis, data.ndim)
    if indices.shape != updates.shape or indices.ndim != data.ndim:
        raise ValueError(f"indices {list(indices.shape)} and updates {list(updates.shape)} must "
                         f"have one shape, of the rank of data {list(data.shape)}")
    if any(n > d for i, (n, d) in enumerate(zip(indices.shape, data.shape)) if i != axis):
        raise ValueError(f"indices shape {list(indices.shape)} exceeds data shape "
                         f"{list(data.shape)} off axis {axis}")
    where = list(np.indices(indices.shape, sparse=True))
    where[axis] = wrap_indices(indices, data.shape[axis], "scatter index")
    return _scatter_into(data, tuple(where), updates, reduction)


_AXIS = Attr("axis", "int", 0, "axis indexed; negative counts from the back")


@op("Scatter", since=9, inputs=("data", "indices", "updates"), outputs=("output",),
    infer=same_as(0), attrs=(_AXIS,))
def scatter(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
            axis: int) -> np.ndarray:
    """Scatter-9/11 (deprecated): ScatterElements without reduction."""
    return _scatter_elements(data, indices, updates, axis, "none")


@op("ScatterElements", since=11, inputs=("data", "indices", "updates"), outputs=("output",),
    infer=same_as(0), attrs=(_AXIS,))
def scatter_elements_11(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                        axis: int) -> np.ndarray:
    """output = copy of data with output[indices[i][j]][j] = updates[i][j] for axis 0 (the
    index on ``axis`` comes from ``indices``, the others from the position in ``updates``).

    indices (int32/int64) and updates share a shape of data's rank, not larger than data off
    ``axis``.  Indices in [-s, s-1], wrapped once.  With duplicate indices the result is
    unspecified by ONNX (here: NumPy's, the last write wins).  Versions 11 and 13: dtypes only.
    """
    return _scatter_elements(data, indices, updates, axis, "none")


@op("ScatterElements", since=16, inputs=("data", "indices", "updates"), outputs=("output",),
    infer=same_as(0),
    attrs=(_AXIS, Attr("reduction", "string", "none", "none, add or mul")))
def scatter_elements_16(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                        axis: int, reduction: str) -> np.ndarray:
    """ScatterElements-16: as -11, or combine with ``reduction``: output[idx] =
    f(output[idx], update) applied for every update in turn (duplicates accumulate), f = +
    (add) or * (mul); float16/bfloat16 accumulate in float32 and round once."""
    if reduction not in ("none", "add", "mul"):
        raise ValueError(f"reduction {reduction!r} is not allowed before opset 18")
    return _scatter_elements(data, indices, updates, axis, reduction)


@op("ScatterElements", since=18, inputs=("data", "indices", "updates"), outputs=("output",),
    infer=same_as(0),
    attrs=(_AXIS, Attr("reduction", "string", "none", "none, add, mul, max or min")))
def scatter_elements_18(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                        axis: int, reduction: str) -> np.ndarray:
    """ScatterElements-18: as -16, plus reductions max and min."""
    return _scatter_elements(data, indices, updates, axis, reduction)


def _scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                reduction: str) -> np.ndarray:
    k = indices.shape[-1] if indices.ndim else -1
    if indices.ndim < 1 or not 1 <= k <= data.ndim:
        raise ValueError(f"indices shape {list(indices.shape)} does not index data of rank "
                         f"{data.ndim}")
    expected = indices.shape[:-1] + data.shape[k:]
    if updates.shape != expected:
        raise ValueError(f"updates shape {list(updates.shape)} must be {list(expected)}")
    tuples = indices.reshape(-1, k)
    where = tuple(wrap_indices(tuples[:, j], data.shape[j], f"ScatterND index (axis {j})")
                  for j in range(k))
    return _scatter_into(data, where, updates.reshape((-1,) + data.shape[k:]), reduction)


@op("ScatterND", since=11, inputs=("data", "indices", "updates"), outputs=("output",),
    infer=same_as(0))
def scatter_nd_11(data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    """output = copy of data; output[indices[i..., :]] = updates[i...] for every index tuple.

    indices: int64 [..., k], k <= rank(data); each tuple addresses an element (k = r) or a
    slice data[t0, ..., t(k-1), :, ...]; updates.shape = indices.shape[:-1] + data.shape[k:].
    Coordinates in [-s, s-1], wrapped once.  Duplicate tuples: unspecified by ONNX (here the
    last write wins).  Versions 11 and 13 differ only in dtypes.
    """
    return _scatter_nd(data, indices, updates, "none")


@op("ScatterND", since=16, inputs=("data", "indices", "updates"), outputs=("output",),
    infer=same_as(0), attrs=(Attr("reduction", "string", "none", "none, add or mul"),))
def scatter_nd_16(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                  reduction: str) -> np.ndarray:
    """ScatterND-16: as -11, or combine each update into the output with + (add) or * (mul);
    duplicates accumulate; float16/bfloat16 accumulate in float32 and round once."""
    if reduction not in ("none", "add", "mul"):
        raise ValueError(f"reduction {reduction!r} is not allowed before opset 18")
    return _scatter_nd(data, indices, updates, reduction)


@op("ScatterND", since=18, inputs=("data", "indices", "updates"), outputs=("output",),
    infer=same_as(0),
    attrs=(Attr("reduction", "string", "none", "none, add, mul, max or min"),))
def scatter_nd_18(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                  reduction: str) -> np.ndarray:
    """ScatterND-18: as -16, plus reductions max and min."""
    return _scatter_nd(data, indices, updates, reduction)


# =============================================================================== TensorScatter


def _infer_tensor_scatter(ctx: InferContext, past: Any, update: Any, write: Any = None, *,
                          mode: str, axis: int) -> TensorType:
    shape, upd = shape_or_none(past), shape_or_none(update)
    if shape is not None:
        a = normalize_axis(ctx, axis, len(shape))
        if a == 0:
            ctx.fail("axis cannot be 0 (the batch axis)")
        if upd is not None:
            if len(upd) != len(shape):
                ctx.fail("past_cache and update ranks differ")
            shape = tuple(d if i == a else merge_dims(ctx, [d, u])
                          for i, (d, u) in enumerate(zip(shape, upd)))
    return TensorType(dtype_or_none(past), shape)


@op("TensorScatter", since=24, inputs=("past_cache", "update", "write_indices?"),
    outputs=("present_cache",), infer=_infer_tensor_scatter,
    attrs=(Attr("mode", "string", "linear", "linear or circular"),
           Attr("axis", "int", -2, "the sequence axis (not 0)")))
def tensor_scatter(past_cache: np.ndarray, update: np.ndarray,
                   write_indices: np.ndarray | None = None, *, mode: str,
                   axis: int) -> np.ndarray:
    """present = copy of past_cache with, for every batch b and step s < sequence_length,
    present[b, ..., w[b] + s, ...] = update[b, ..., s, ...] on the sequence ``axis``.

    past_cache: (batch, ..., max_seq, ...); update: the same shape with seq <= max_seq on
    ``axis``; write_indices: int64 [batch] (absent: zeros).  mode 'linear' requires
    w[b] + seq <= max_seq (else an error); 'circular' takes positions modulo max_seq.
    """
    rank = past_cache.ndim
    axis = axis_of(axis, rank)
    if axis == 0:
        raise ValueError("axis cannot be 0 (the batch axis)")
    if update.ndim != rank or any(u != p for i, (u, p) in
                                  enumerate(zip(update.shape, past_cache.shape)) if i != axis):
        raise ValueError(f"update shape {list(update.shape)} does not match past_cache "
                         f"{list(past_cache.shape)} off axis {axis}")
    batch, steps, length = past_cache.shape[0], update.shape[axis], past_cache.shape[axis]
    if steps > length:
        raise ValueError(f"update has {steps} steps, more than the cache's {length}")
    start = (np.zeros(batch, np.int64) if write_indices is None
             else np.asarray(write_indices).astype(np.int64).reshape(batch))
    position = (start.reshape((batch,) + (1,) * (rank - 1))
                + np.arange(steps).reshape((steps,) + (1,) * (rank - axis - 1)))
    if mode == "circular":
        position = position % length
    elif mode == "linear":
        if ((position < 0) | (position >= length)).any():
            raise IndexError(f"write_indices {start.tolist()} + {steps} steps overrun the cache "
                             f"length {length}")
    else:
        raise ValueError(f"unknown mode {mode!r} (linear or circular)")
    present = past_cache.copy()
    np.put_along_axis(present, np.broadcast_to(position, update.shape), update, axis)
    return present


# =============================================================================== OneHot


def _one_hot(indices: np.ndarray, depth: np.ndarray, values: np.ndarray, axis: int,
             negative: bool) -> np.ndarray:
    size = scalar_int(depth, "depth")
    if size < 1:
        raise ValueError(f"depth must be positive, got {size}")
    vals = np.asarray(values).reshape(-1)
    if vals.size != 2:
        raise ValueError(f"values must hold [off_value, on_value], got {vals.size} elements")
    idx = np.asarray(indices).astype(np.int64)
    if negative:
        idx = np.where(idx < 0, idx + size, idx)
    axis = axis_of(axis, idx.ndim + 1)
    classes = np.arange(size).reshape((size,) + (1,) * (idx.ndim - axis))
    hot = np.expand_dims(idx, axis) == classes
    return np.where(hot, vals[1], vals[0]).astype(vals.dtype, copy=False)


def _infer_one_hot(ctx: InferContext, indices: Any, depth: Any, values: Any, *,
                   axis: int) -> TensorType:
    dtype, shape = dtype_or_none(values), shape_or_none(indices)
    if shape is None:
        return TensorType(dtype, None)
    rank = len(shape) + 1
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for output rank {rank}")
    axis %= rank
    known = known_ints(ctx, 1)
    size: Dim = known[0] if known is not None and len(known) == 1 else None
    return TensorType(dtype, shape[:axis] + (size,) + shape[axis:])


_ONE_HOT_AXIS = Attr("axis", "int", -1, "position of the new axis in the output")


@op("OneHot", since=9, inputs=("indices", "depth", "values"), outputs=("output",),
    infer=_infer_one_hot, value_inputs=(1,), attrs=(_ONE_HOT_AXIS,))
def one_hot_9(indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *,
              axis: int) -> np.ndarray:
    """OneHot-9: as OneHot-11, but every index outside [0, depth) (negative ones included)
    gives an all-off_value row."""
    return _one_hot(indices, depth, values, axis, negative=False)


@op("OneHot", since=11, inputs=("indices", "depth", "values"), outputs=("output",),
    infer=_infer_one_hot, value_inputs=(1,), attrs=(_ONE_HOT_AXIS,))
def one_hot_11(indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *,
               axis: int) -> np.ndarray:
    """output[..., c, ...] = on_value if c == indices[...] (wrapped) else off_value, the class
    axis inserted at ``axis`` (in [-r-1, r]; -1 is innermost).

    indices: any numeric tensor, cast to int64 (floats truncate); an index in [-depth, -1]
    counts from the back, one outside [-depth, depth-1] gives an all-off_value row.
    depth: a scalar or one-element tensor (cast to int64).  values: [off_value, on_value];
    the output has its dtype.  Versions 11 and 28 differ only in dtypes.
    """
    return _one_hot(indices, depth, values, axis, negative=True)


# =============================================================================== NonZero


def _infer_non_zero(ctx: InferContext, x: Any) -> TensorType:
    shape = shape_or_none(x)
    return TensorType(INT64, (None if shape is None else len(shape), ctx.fresh_dim("nonzero")))


@op("NonZero", since=9, inputs=("X",), outputs=("Y",), infer=_infer_non_zero)
def non_zero(X: np.ndarray) -> np.ndarray:
    """Y = the indices of the non-zero elements of X in row-major order, as int64
    [rank(X), count] (np.nonzero stacked).

    Non-zero: != 0 for numbers, True for bool, a non-empty string for strings; NaN counts as
    non-zero.  A scalar gives shape (0, count), unlike NumPy.  Versions 9, 13: dtypes only.
    """
    work = X.astype(compute_dtype(X.dtype), copy=False)
    mask = work != "" if X.dtype == object else work != 0
    if X.ndim == 0:
        return np.zeros((0, int(mask)), dtype=np.int64)
    return np.array(np.nonzero(mask), dtype=np.int64).reshape(X.ndim, -1)


# =============================================================================== Compress


def _infer_compress(ctx: InferContext, x: Any, condition: Any, *,
                    axis: int | None) -> TensorType:
    dtype, shape = dtype_or_none(x), shape_or_none(x)
    if axis is None:
        return TensorType(dtype, (ctx.fresh_dim("compress"),))
    if shape is None:
        return TensorType(dtype, None)
    axis = normalize_axis(ctx, axis, len(shape))
    return TensorType(dtype, shape[:axis] + (ctx.fresh_dim("compress"),) + shape[axis + 1:])


@op("Compress", since=9, inputs=("input", "condition"), outputs=("output",),
    infer=_infer_compress,
    attrs=(Attr("axis", "int", None, "axis to select on (absent: flatten first)"),))
def compress(input: np.ndarray, condition: np.ndarray, *, axis: int | None) -> np.ndarray:
    """output = the slices of ``input`` along ``axis`` where ``condition`` is True
    (np.compress); axis absent: the selected elements of the flattened input (1-D).

    condition: bool 1-D; it may be shorter than the axis (the remaining slices are dropped);
    a longer one may only hold False beyond the axis (else an error).  Versions 9, 11
    (negative axis spelled out) and 28 (dtypes) behave the same.
    """
    data = input.reshape(-1) if axis is None else input
    axis = 0 if axis is None else axis_of(axis, input.ndim)
    cond = np.asarray(condition).astype(bool).reshape(-1)
    size = data.shape[axis]
    if cond.size > size:
        if cond[size:].any():
            raise IndexError(f"condition selects index {size + int(np.argmax(cond[size:]))} "
                             f"beyond an axis of size {size}")
        cond = cond[:size]
    return np.compress(cond, data, axis=axis)


# =============================================================================== Unique


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sorted unique rows of a 2-D array: (unique, first index, inverse, counts)."""
    if rows.shape[1] == 1:
        return np.unique(rows[:, 0], return_index=True, return_inverse=True, return_counts=True)
    if rows.dtype == object or rows.shape[1] == 0:
        keys = [tuple(r) for r in rows]
        order = sorted(range(len(keys)), key=lambda i: (keys[i], i))
        firsts, inverse = [], np.empty(len(keys), np.int64)
        for i in order:
            if not firsts or keys[firsts[-1]] != keys[i]:
                firsts.append(i)
            inverse[i] = len(firsts) - 1
        first = np.array(firsts, np.int64)
        return rows[first], first, inverse, np.bincount(inverse, minlength=len(first))
    return np.unique(rows, axis=0, return_index=True, return_inverse=True, return_counts=True)


def _infer_unique(ctx: InferContext, x: Any, *, axis: int | None,
                  sorted: int) -> tuple[TensorType, ...]:
    dtype, shape = dtype_or_none(x), shape_or_none(x)
    found = ctx.fresh_dim("unique")
    if axis is None:
        total = None if shape is None else _numel(shape)
        y: TensorType = TensorType(dtype, (found,))
    elif shape is None:
        total, y = None, TensorType(dtype, None)
    else:
        axis = normalize_axis(ctx, axis, len(shape))
        total = shape[axis]
        y = TensorType(dtype, shape[:axis] + (found,) + shape[axis + 1:])
    return (y, TensorType(INT64, (found,)), TensorType(INT64, (total,)),
            TensorType(INT64, (found,)))


def _numel(shape: tuple[Dim, ...]) -> Dim:
    total = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        total *= d
    return total


@op("Unique", since=11, inputs=("X",), outputs=("Y", "indices?", "inverse_indices?", "counts?"),
    infer=_infer_unique,
    attrs=(Attr("axis", "int", None, "axis of the sub-tensors compared (absent: flatten)"),
           flag("sorted", 1, "1: ascending order, 0: order of first occurrence")))
def unique(X: np.ndarray, *, axis: int | None, sorted: int) -> tuple[np.ndarray, ...]:
    """Y = the distinct elements of flattened X (axis absent) or distinct slices along
    ``axis``; indices = where each first occurs in X; inverse_indices = for each element/slice
    of X its position in Y; counts = occurrences of each.  The last three are int64 1-D.

    sorted=1: ascending (slices compare lexicographically in row-major order); sorted=0: in
    order of first occurrence.  NaNs compare equal to each other here (NumPy).
    """
    moved = X.reshape(-1, 1) if axis is None else np.moveaxis(X, axis_of(axis, X.ndim), 0)
    rows = moved.reshape(moved.shape[0], int(np.prod(moved.shape[1:], dtype=np.int64)))  # -1 fails on empty
    work = rows.astype(compute_dtype(rows.dtype), copy=False)
    _, first, inverse, counts = _unique_rows(work)
    first, inverse = first.astype(np.int64), inverse.reshape(-1).astype(np.int64)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first, inverse, counts = first[order], rank[inverse], counts[order]
    picked = moved[first]
    y = picked.reshape(-1) if axis is None else np.moveaxis(picked, 0, axis_of(axis, X.ndim))
    return y, first, inverse, counts.astype(np.int64)


# =============================================================================== TopK


def _top_k(X: np.ndarray, k: int, axis: int, largest: int) -> tuple[np.ndarray, np.ndarray]:
    axis = axis_of(axis, X.ndim)
    n = X.shape[axis]
    if not 0 <= k <= n:
        raise ValueError(f"k = {k} is out of range [0, {n}] for axis {axis}")
    keys = np.moveaxis(X, axis, -1).astype(compute_dtype(X.dtype), copy=False)
    if largest:
        # Stable sort of the reversed axis, read backwards: descending, ties by lower index.
        order = n - 1 - np.argsort(keys[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    else:
        order = np.argsort(keys, axis=-1, kind="stable")
    chosen = np.ascontiguousarray(order[..., :k])
    values = np.take_along_axis(np.moveaxis(X, axis, -1), chosen, axis=-1)
    return np.moveaxis(values, -1, axis), np.moveaxis(chosen, -1, axis).astype(np.int64)


def _infer_top_k(ctx: InferContext, x: Any, K: Any = None, *, axis: int,
                 **attrs: Any) -> tuple[TensorType, TensorType]:
    dtype, shape = dtype_or_none(x), shape_or_none(x)
    if shape is None:
        return TensorType(dtype, None), TensorType(INT64, None)
    axis = normalize_axis(ctx, axis, len(shape))
    if "k" in attrs:
        count: Dim = attrs["k"]
    else:
        known = known_ints(ctx, 1)
        count = known[0] if known is not None and len(known) == 1 else None
    if isinstance(count, int) and isinstance(shape[axis], int) and count > shape[axis]:
        ctx.fail(f"k = {count} exceeds the axis size {shape[axis]}")
    out = shape[:axis] + (count,) + shape[axis + 1:]
    return TensorType(dtype, out), TensorType(INT64, out)


@op("TopK", since=1, inputs=("X",), outputs=("Values", "Indices"), infer=_infer_top_k,
    attrs=(Attr("axis", "int", -1, "axis to sort"),
           Attr("k", "int", doc="number of elements kept")))
def top_k_1(X: np.ndarray, *, axis: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """TopK-1: the ``k`` largest, sorted, with ``k`` an attribute (see TopK-11)."""
    return _top_k(X, k, axis, 1)


@op("TopK", since=10, inputs=("X", "K"), outputs=("Values", "Indices"), infer=_infer_top_k,
    value_inputs=(1,), attrs=(Attr("axis", "int", -1, "axis to sort"),))
def top_k_10(X: np.ndarray, K: np.ndarray, *, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """TopK-10: the K largest, sorted, with K an int64 one-element input (see TopK-11)."""
    return _top_k(X, scalar_int(K, "K"), axis, 1)


@op("TopK", since=11, inputs=("X", "K"), outputs=("Values", "Indices"), infer=_infer_top_k,
    value_inputs=(1,),
    attrs=(Attr("axis", "int", -1, "axis to sort; negative counts from the back"),
           flag("largest", 1, "1: the largest elements, 0: the smallest"),
           flag("sorted", 1, "1: sorted output (0: any order; sorted here too)")))
def top_k_11(X: np.ndarray, K: np.ndarray, *, axis: int, largest: int,
             sorted: int) -> tuple[np.ndarray, np.ndarray]:
    """Values, Indices = the K largest (or smallest) elements along ``axis`` and their int64
    indices; both have X's shape with K on ``axis``.

    Order: descending for largest, ascending for smallest; equal values keep the lower index
    first (the spec's tie rule).  NaN sorts above every number (NumPy order), so it is picked
    first by largest and last by smallest.  K in [0, axis size] (else an error).  sorted=0
    leaves the order unspecified; the sorted order is returned.  Versions 11 and 24: dtypes.
    """
    return _top_k(X, scalar_int(K, "K"), axis, largest)


OPS = (
    gather,
    gather_elements,
    gather_nd_11, gather_nd_12,
    scatter,
    scatter_elements_11, scatter_elements_16, scatter_elements_18,
    scatter_nd_11, scatter_nd_16, scatter_nd_18,
    tensor_scatter,
    one_hot_9, one_hot_11,
    non_zero,
    compress,
    unique,
    top_k_1, top_k_10, top_k_11,
)
