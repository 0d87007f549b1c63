"""Helpers shared by the reduction, linear-algebra, normalisation and loss families.

Private to those families (and to Softmax's row sums): the dtype a reference computes in, axis
handling for reductions, the matching shape rules and fast sums along the last axis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from refmnn.dtypes import DType, compute_dtype
from refmnn.graph import Dim, TensorType
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import InferContext


def work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype arithmetic runs in: float16, bfloat16 and narrower floats compute in float32
    (and round once at the end); every other dtype computes in itself."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return np.dtype(np.float32)
    return compute_dtype(dtype)


def to_work(x: np.ndarray) -> np.ndarray:
    """``x`` in its working dtype (no copy when it already is)."""
    return np.asarray(x, dtype=work_dtype(x.dtype))


def mean_along(x: np.ndarray, axes: Sequence[int], *, dtype: Any = None) -> np.ndarray:
    """The mean of a float ``x`` over ``axes`` (kept as length-1 axes) as ``np.mean`` computes
    it -- the sum in ``dtype`` (default x's), divided by the count as an integer, in float64 for
    float32 --, bit for bit, without its "Mean of empty slice" warning: under ``-W error`` that
    warning made a valid GlobalAveragePool over an empty image an OpError. Over nothing it is
    0 / 0 = NaN, the mean of nothing."""
    count = np.intp(math.prod(x.shape[a] for a in axes))
    total = np.sum(x, axis=tuple(axes), dtype=dtype, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.true_divide(total, count, out=total, casting="unsafe")


def stash_dtype(stash_type: int) -> np.dtype:
    """The NumPy dtype named by a ``stash_type`` attribute (an ONNX TensorProto code)."""
    return DType.from_onnx(int(stash_type)).numpy


def check_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Normalise possibly negative axes into [0, rank); reject out-of-range and repeated ones."""
    out = []
    for axis in axes:
        axis = int(axis)
        if not -rank <= axis < max(rank, 1) or (rank == 0 and axis not in (0, -1)):
            raise ValueError(f"axis {axis} is out of range for rank {rank}")
        out.append(axis % rank if rank else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {list(axes)}")
    return tuple(out) if rank else ()


def sum_along(x: np.ndarray, y: np.ndarray | None = None, *, axis: int = -1
              ) -> np.ndarray:
    """sum(x) -- or sum(x * y), without the temporary -- over ``axis`` (the last by default),
    kept as a length-1 axis, in x's dtype.

    Along the last axis, rows of up to 8192 elements are summed by einsum: np.sum reduces short
    contiguous rows one by one with a per-row overhead, einsum streams them, 2.5-3.5x faster
    (float32, median us: [1536, 128] 56 -> 18, [128, 384] 13 -> 4.5), with float32 errors
    within a few times np.sum's there (max relative error on sums of positive values, einsum
    against np.sum: rows of 128 1.6e-7 / 2.6e-7, 1536 2.4e-7 / 1.1e-7, 8192 3.8e-7 / 1.0e-7;
    of products x * y, einsum, up to 1.3e-6 at 8192, tests/test_row_sums.py). Longer rows keep np.sum's pairwise
    summation, whose error grows more slowly (rows of 100000: 1.3e-6 / 1.1e-7), and any other
    axis is np.sum's.
    """
    if axis in (-1, x.ndim - 1) and x.shape[-1] <= 8192:
        row = np.einsum("...i->...", x) if y is None else np.einsum("...i,...i->...", x, y)
        return row[..., None]
    return np.sum(x if y is None else x * y, axis=axis, keepdims=True, dtype=x.dtype)


def reduce_axes_from(data_rank: int, axes: Sequence[int] | np.ndarray | None,
                     noop_with_empty_axes: int) -> tuple[int, ...]:
    """The axes a Reduce* op reduces over: all of them when ``axes`` is missing or empty,
    unless ``noop_with_empty_axes`` is set, in which case none (the reduction is the identity)."""
    listed = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not listed:
        return () if noop_with_empty_axes else tuple(range(data_rank))
    return check_axes(listed, data_rank)


def reduced_shape_rule(ctx: InferContext, data: TensorType | None,
                       axes_values: Sequence[int] | None, axes_known: bool, keepdims: int,
                       noop: int, dtype: DType | None = None) -> TensorType:
    """Shape rule for reductions: ``axes_known`` False means the axes are a run-time input."""
    out_dtype = dtype if dtype is not None else dtype_of(data)
    shape = shape_of(data)
    if shape is None:
        return TensorType(out_dtype, None)
    rank = len(shape)
    if not axes_known:
        if keepdims:
            return TensorType(out_dtype, tuple(None if d != 1 else 1 for d in shape))
        return TensorType(out_dtype, None)
    try:
        axes = reduce_axes_from(rank, axes_values, noop)
    except ValueError as exc:
        ctx.fail(str(exc))
    dims: list[Dim] = []
    for i, d in enumerate(shape):
        if i in axes:
            if keepdims:
                dims.append(1)
        else:
            dims.append(d)
    return TensorType(out_dtype, tuple(dims))
