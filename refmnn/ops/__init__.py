"""The reference semantics: one NumPy function per operator, grouped by family.

Each family module ends with an ``OPS`` tuple; :data:`BUILTIN_OPS` concatenates them in a fixed
order and :func:`default_registry` builds an :class:`OpRegistry` from them. Nothing is
registered as a side effect of importing a module.
"""

from __future__ import annotations

from refmnn.ops import (
    activation,
    attention,
    blocked,
    cast,
    constant,
    control,
    conv,
    detection,
    elementwise,
    fused,
    image,
    indexing,
    layout,
    linalg,
    loss,
    ml,
    norm,
    pad,
    pool,
    quant,
    random,
    raster,
    reduction,
    resize,
    rnn,
    sequence,
    shape,
    signal,
    split,
    text,
    training,
)
from refmnn.ops._schema import REQUIRED, Attr, InferContext, OpContext, OpDef, op
from refmnn.ops.registry import OpRegistry

FAMILIES = (
    elementwise,
    cast,
    activation,
    reduction,
    linalg,
    norm,
    loss,
    conv,
    pool,
    resize,
    image,
    detection,
    quant,
    shape,
    layout,
    split,
    pad,
    constant,
    indexing,
    control,
    sequence,
    rnn,
    signal,
    random,
    text,
    attention,
    training,
    ml,
    raster,
    fused,
    blocked,
)

BUILTIN_OPS: tuple[OpDef, ...] = tuple(opdef for family in FAMILIES for opdef in family.OPS)


def default_registry() -> OpRegistry:
    """A new registry holding every built-in op definition."""
    return OpRegistry(BUILTIN_OPS)


__all__ = [
    "Attr",
    "BUILTIN_OPS",
    "FAMILIES",
    "InferContext",
    "OpContext",
    "OpDef",
    "OpRegistry",
    "REQUIRED",
    "default_registry",
    "op",
]
