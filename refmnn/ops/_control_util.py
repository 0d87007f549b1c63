"""Helpers shared by the control-flow and sequence families (private).

* :func:`merge_types` joins two value types into the most precise type both satisfy (If's two
  branches, a sequence's elements, a loop-carried value before and after the body);
* :func:`declared_type` reads a subgraph's declared input/output type for use in an outer
  graph: symbolic dims of a subgraph are not the outer graph's symbols, so they become unknown;
* :func:`empty_stack` builds the empty scan output of a loop that ran zero iterations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import Dim, OptionalType, SequenceType, TensorType, ValueType


def _merge_dims(a: tuple[Dim, ...] | None, b: tuple[Dim, ...] | None) -> tuple[Dim, ...] | None:
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y and x is not None else None for x, y in zip(a, b, strict=True))


def merge_types(a: ValueType | None, b: ValueType | None) -> ValueType | None:
    """The most precise type that both ``a`` and ``b`` satisfy (None when nothing is known).

    Dims kept are those equal in both; a rank difference gives an unknown rank; the dtype is
    kept when equal or known on one side only.
    """
    if a is None or b is None:
        return None
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        if a.dtype == b.dtype or b.dtype is None:
            dtype = a.dtype
        else:
            dtype = b.dtype if a.dtype is None else None
        return TensorType(dtype, _merge_dims(a.shape, b.shape))
    if isinstance(a, SequenceType) and isinstance(b, SequenceType):
        return SequenceType(merge_types(a.elem, b.elem))
    if isinstance(a, OptionalType) and isinstance(b, OptionalType):
        return OptionalType(merge_types(a.elem, b.elem))
    return None


def merge_all(types: list[ValueType | None]) -> ValueType | None:
    """:func:`merge_types` folded over a non-empty list."""
    result = types[0]
    for other in types[1:]:
        result = merge_types(result, other)
    return result


def declared_type(t: ValueType | None, *, shapes: bool = True) -> ValueType | None:
    """A subgraph's declared type as seen from outside: symbolic dims become unknown.

    Tensors nested in sequences/optionals keep only their dtype (declarations of sequence
    element shapes are often wrong: ``seq(float[])`` is written where elements have any rank).
    With ``shapes=False`` a tensor keeps only its dtype too.
    """
    if isinstance(t, TensorType):
        if not shapes or t.shape is None:
            return TensorType(t.dtype, None)
        return TensorType(t.dtype, tuple(d if isinstance(d, int) else None for d in t.shape))
    if isinstance(t, SequenceType):
        return SequenceType(declared_type(t.elem, shapes=False))
    if isinstance(t, OptionalType):
        return OptionalType(declared_type(t.elem, shapes=False))
    return None


def element_dtype(t: ValueType | None) -> DType | None:
    """The dtype of a tensor type (None for other or unknown types)."""
    return t.dtype if isinstance(t, TensorType) else None


def empty_stack(t: ValueType | None) -> np.ndarray:
    """The scan output of zero iterations: shape ``(0, *element_shape)``.

    The element shape comes from the body's declared output type; unknown dims count as 0 and
    an unknown rank gives shape ``(0,)``. The dtype is the declared one (float32 if unknown).
    """
    dtype = element_dtype(t)
    np_dtype = dtype.numpy if dtype is not None else np.dtype(np.float32)
    shape = t.shape if isinstance(t, TensorType) and t.shape is not None else ()
    dims = tuple(d if isinstance(d, int) else 0 for d in shape)
    return np.empty((0, *dims), dtype=np_dtype)


def scalar_bool(value: Any, what: str) -> bool:
    """Read a one-element boolean tensor (If's cond, Loop's cond)."""
    array = np.asarray(value)
    if array.size != 1:
        raise ValueError(f"{what} must hold exactly one element, got shape {list(array.shape)}")
    return bool(array.reshape(-1)[0])
