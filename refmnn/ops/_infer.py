"""Reusable shape/dtype rules and the symbolic-dimension helpers they are built from.

A rule is ``rule(ctx, *input_types, **attrs)`` and returns one type per output (a single type
for single-output ops). Input types are :class:`~refmnn.graph.TensorType` (or sequence/optional
types), or None for an omitted optional input. A rule returns ``TensorType(dtype, None)`` when the
rank cannot be known and uses ``None`` dims for unknown sizes; it calls ``ctx.fail`` on a
contradiction it can prove.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from refmnn.dtypes import DType
from refmnn.graph import Dim, TensorType, ValueType
from refmnn.ops._schema import InferContext


def shape_of(t: ValueType | None) -> tuple[Dim, ...] | None:
    """The shape of a tensor type, or None when unknown or not a tensor."""
    return t.shape if isinstance(t, TensorType) else None


def dtype_of(t: ValueType | None) -> DType | None:
    """The element type of a tensor type, or None when unknown or not a tensor."""
    return t.dtype if isinstance(t, TensorType) else None


def broadcast_dims(ctx: InferContext | None, *shapes: Sequence[Dim] | None) -> tuple[Dim, ...] | None:
    """NumPy (multidirectional) broadcasting over possibly symbolic shapes.

    Returns None when any rank is unknown. Fails (through ``ctx``) when two known sizes differ
    and neither is 1.
    """
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    result: list[Dim] = []
    for axis in range(rank):
        dims = [s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0]  # type: ignore[arg-type]
        known = {d for d in dims if isinstance(d, int) and d != 1}
        if len(known) > 1:
            if ctx is not None:
                ctx.fail(f"cannot broadcast shapes {[list(s) for s in shapes]}")  # type: ignore[arg-type]
            return None
        if known:
            result.append(known.pop())
            continue
        symbols = {d for d in dims if isinstance(d, str)}
        if all(d == 1 for d in dims):
            result.append(1)
        elif len(symbols) == 1 and None not in dims:
            result.append(symbols.pop())
        else:
            result.append(None)
    return tuple(result)


def normalize_axis(ctx: InferContext, axis: int, rank: int) -> int:
    """Map a possibly negative axis into [0, rank); fail when it is out of range."""
    if not -rank <= axis < max(rank, 1):
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def same_as(index: int = 0, dtype: DType | None = None) -> Callable[..., TensorType]:
    """Rule: the output has the shape (and, unless given, the dtype) of input ``index``."""

    def rule(ctx: InferContext, *types: ValueType | None, **attrs: Any) -> ValueType:
        source = types[index] if index < len(types) else None
        if dtype is not None:
            return TensorType(dtype, shape_of(source))
        if source is None:
            return TensorType(None, None)
        return source

    return rule


def broadcast(dtype: DType | None = None, inputs: Sequence[int] | None = None) -> Callable[..., TensorType]:
    """Rule: the output shape broadcasts the inputs (all, or those listed); dtype is that of the
    first input unless given (comparisons give bool)."""

    def rule(ctx: InferContext, *types: ValueType | None, **attrs: Any) -> TensorType:
        chosen = [types[i] for i in inputs] if inputs is not None else list(types)
        chosen = [t for t in chosen if t is not None]
        shape = broadcast_dims(ctx, *(shape_of(t) for t in chosen))
        out_dtype = dtype if dtype is not None else (dtype_of(chosen[0]) if chosen else None)
        return TensorType(out_dtype, shape)

    return rule


def fixed(dtype: DType | None, shape: Sequence[Dim] | None) -> TensorType:
    """A tensor type with a known dtype and shape (helper for rules)."""
    return TensorType(dtype, None if shape is None else tuple(shape))


def unknown(dtype: DType | None = None) -> TensorType:
    """A tensor type whose rank is not known statically."""
    return TensorType(dtype, None)


def dim_product(dims: Sequence[Dim]) -> Dim:
    """Product of dims; None when any is not a known integer."""
    total = 1
    for d in dims:
        if not isinstance(d, int):
            return None
        total *= d
    return total
