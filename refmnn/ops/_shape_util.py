"""Private helpers shared by the data-movement families (refmnn.ops.shape, .layout, .split,
.pad, .constant) and the indexing family (refmnn.ops.indexing).

Run-time helpers raise ``ValueError``/``IndexError`` with a plain message; the interpreter adds
the node context. Shape-rule helpers work on possibly symbolic dims (int, str symbol or None).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from refmnn.graph import Dim, TensorType
from refmnn.ops._schema import InferContext

HUGE = 2**31 - 1
"""Slice bounds at or beyond this magnitude mean "to the end" (INT_MAX / INT64_MAX idioms)."""


# ---------------------------------------------------------------- run time


def ints(value: Any) -> list[int]:
    """A tensor (or scalar, or sequence) of integers as a flat Python list."""
    return [int(v) for v in np.asarray(value).reshape(-1)]


def scalar_int(value: Any, what: str) -> int:
    """The single integer held by a scalar or one-element tensor (floats are truncated)."""
    array = np.asarray(value).reshape(-1)
    if array.size != 1:
        raise ValueError(f"{what} must hold exactly one value, got shape {list(np.shape(value))}")
    return int(array[0])


def axis_of(axis: int, rank: int, what: str = "axis") -> int:
    """Normalize a possibly negative axis into [0, rank); raise when out of range."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


def wrap_indices(indices: np.ndarray, size: int, what: str = "index") -> np.ndarray:
    """Indices in [-size, size) made non-negative (wrapped once), as int64.

    Raises IndexError naming the first offending value; indices are never wrapped twice or
    clipped.
    """
    idx = np.asarray(indices).astype(np.int64, copy=False)
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        raise IndexError(f"{what} {int(idx[bad][0])} is out of range [-{size}, {size - 1}] "
                         f"for an axis of size {size}")
    return np.where(idx < 0, idx + size, idx)


def zero_of(dtype: np.dtype) -> Any:
    """The "zero" element of a dtype: '' for strings, False for bool, 0 otherwise."""
    dtype = np.dtype(dtype)
    if dtype == object:
        return ""
    return np.zeros((), dtype=dtype)[()]


# ---------------------------------------------------------------- shape rules


def shape_or_none(t: Any) -> tuple[Dim, ...] | None:
    return t.shape if isinstance(t, TensorType) else None


def dtype_or_none(t: Any) -> Any:
    return t.dtype if isinstance(t, TensorType) else None


def known_ints(ctx: InferContext, index: int) -> list[int] | None:
    """The constant value of input ``index`` as a list of ints, or None when unknown."""
    value = ctx.value(index)
    if value is None:
        return None
    return ints(value)


def static_length(t: Any) -> int | None:
    """The length of a 1-D tensor type when known (a scalar counts as one element)."""
    shape = shape_or_none(t)
    if shape is None:
        return None
    if len(shape) == 0:
        return 1
    return shape[0] if len(shape) == 1 and isinstance(shape[0], int) else None


def product(dims: Iterable[Dim]) -> Dim:
    """Product of dims: an int when all are known, the symbol when one symbol times ones, a 0
    when any known dim is 0, else None."""
    total, symbols, unknown = 1, [], False
    for d in dims:
        if isinstance(d, int):
            total *= d
        elif isinstance(d, str):
            symbols.append(d)
        else:
            unknown = True
    if total == 0:
        return 0
    if unknown:
        return None
    if not symbols:
        return total
    return symbols[0] if len(symbols) == 1 and total == 1 else None


def merge_dims(ctx: InferContext, dims: Sequence[Dim], what: str = "dimension") -> Dim:
    """The one dim that several dims known to be equal share; fails on two different ints."""
    known = {d for d in dims if isinstance(d, int)}
    if len(known) > 1:
        ctx.fail(f"{what} sizes differ: {sorted(known)}")
    if known:
        return known.pop()
    for d in dims:
        if isinstance(d, str):
            return d
    return None


def add_dims(*dims: Dim) -> Dim:
    """Sum of dims when all are known ints (a symbol plus zeros stays the symbol)."""
    if all(isinstance(d, int) for d in dims):
        return sum(dims)  # type: ignore[arg-type]
    nonzero = [d for d in dims if d != 0]
    if len(nonzero) == 1 and isinstance(nonzero[0], str):
        return nonzero[0]
    return None
