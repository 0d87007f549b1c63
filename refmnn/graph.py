"""The graph IR: typed, immutable values, nodes and graphs.

A :class:`Graph` is a frozen value. Passes never mutate a graph; they build a new one with
:meth:`Graph.replace`. Shapes may be symbolic: a dimension is an ``int``, a ``str`` naming a
symbol (``"batch"``) or ``None`` when nothing is known about it.

Value types follow ONNX's type system: :class:`TensorType`, :class:`SequenceType` and
:class:`OptionalType` (maps and sparse tensors are converted to these or refused at import).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Union

import numpy as np

from refmnn.dtypes import DType

Dim = Union[int, str, None]
"""One dimension: a size, a symbol name, or None when unknown."""


@dataclass(frozen=True, slots=True)
class TensorType:
    """A tensor's element type and shape; ``shape is None`` means the rank is unknown."""

    dtype: DType | None
    shape: tuple[Dim, ...] | None = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when every dimension is a known integer."""
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def numel(self) -> int | None:
        """Number of elements, or None when the shape is not fully known."""
        if not self.is_static:
            return None
        return math.prod(self.shape)  # type: ignore[arg-type]  # exact (no int64 wrap-around)

    def __str__(self) -> str:
        dtype = self.dtype.name if self.dtype else "?"
        if self.shape is None:
            return f"{dtype}[...]"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{dtype}[{dims}]"


@dataclass(frozen=True, slots=True)
class SequenceType:
    """A sequence of values of one element type (tensors, in practice)."""

    elem: ValueType | None

    def __str__(self) -> str:
        return f"seq({self.elem})"


@dataclass(frozen=True, slots=True)
class OptionalType:
    """A value that may be absent (None at run time)."""

    elem: ValueType | None

    def __str__(self) -> str:
        return f"optional({self.elem})"


ValueType = Union[TensorType, SequenceType, OptionalType]


@dataclass(frozen=True, slots=True)
class Value:
    """A named graph input or output with its (possibly partial) type."""

    name: str
    type: ValueType | None = None


def _freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class Node:
    """One op application.

    Attributes:
        name: unique within its graph; used in every error message.
        op: the op type, e.g. ``"Conv"``.
        domain: ``""`` or ``"ai.onnx"`` for the default ONNX domain (normalized to ``""``).
        inputs: value names; ``""`` marks an omitted optional input.
        outputs: value names; ``""`` marks an output the model does not want.
        attrs: attribute values (int, float, str, tuples, np.ndarray, Graph, tuple of Graph,
            or a value type for type-valued attributes).
        opset: the opset this node is written against, when it differs from the graph's import
            for its domain (nodes made by lowering rules pin the version they were written for).
    """

    name: str
    op: str
    domain: str = ""
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    opset: int | None = None

    def __post_init__(self) -> None:
        if self.domain == "ai.onnx":
            object.__setattr__(self, "domain", "")
        if not isinstance(self.attrs, MappingProxyType):
            object.__setattr__(self, "attrs", _freeze(self.attrs))

    def subgraphs(self) -> Iterator[Graph]:
        """Every graph-valued attribute (If branches, Loop and Scan bodies)."""
        for value in self.attrs.values():
            if isinstance(value, Graph):
                yield value
            elif isinstance(value, tuple) and value and isinstance(value[0], Graph):
                yield from value


@dataclass(frozen=True, slots=True)
class Graph:
    """An immutable computation graph.

    Attributes:
        nodes: in topological order.
        inputs: the values a caller feeds (initializers are not listed here).
        outputs: the values a run returns, in this order.
        initializers: constant arrays by value name; arrays are read-only.
        defaults: inputs the model also gives an initializer (ONNX: "an initializer with the
            name of a graph input specifies a default value for it"): the initializer is used
            unless the caller feeds the input.
        opsets: domain -> opset version (``""`` is the default ONNX domain).
        value_info: declared types of intermediate values, when the model states them.
        name: the graph's name (informational).
        ir_version: the ONNX IR version the model was written with (0 if not from ONNX).
    """

    nodes: tuple[Node, ...] = ()
    inputs: tuple[Value, ...] = ()
    outputs: tuple[Value, ...] = ()
    initializers: Mapping[str, np.ndarray] = field(default_factory=lambda: MappingProxyType({}))
    defaults: tuple[Value, ...] = ()
    opsets: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({"": 21}))
    value_info: Mapping[str, ValueType] = field(default_factory=lambda: MappingProxyType({}))
    name: str = "graph"
    ir_version: int = 0

    def __post_init__(self) -> None:
        for key in ("initializers", "opsets", "value_info"):
            value = getattr(self, key)
            if not isinstance(value, MappingProxyType):
                object.__setattr__(self, key, _freeze(value))
        for array in self.initializers.values():
            if isinstance(array, np.ndarray):
                array.flags.writeable = False

    def replace(self, **changes: Any) -> Graph:
        """Return a copy with some fields replaced (passes use this; graphs never mutate)."""
        return replace(self, **changes)

    def opset(self, domain: str) -> int:
        """The opset version imported for ``domain`` (``""`` and ``"ai.onnx"`` are the same)."""
        domain = "" if domain == "ai.onnx" else domain
        if domain not in self.opsets:
            return 1
        return self.opsets[domain]

    def opset_of(self, node: Node) -> int:
        """The opset a node resolves at: its own pin, else the graph's import for its domain."""
        return node.opset if node.opset is not None else self.opset(node.domain)

    def producers(self) -> dict[str, Node]:
        """Map each value name to the node that produces it."""
        return {out: node for node in self.nodes for out in node.outputs if out}

    def consumers(self) -> dict[str, list[Node]]:
        """Map each value name to the nodes that read it, in graph order."""
        result: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    result.setdefault(name, []).append(node)
        return result

    def walk(self) -> Iterator[tuple[Graph, Node]]:
        """Every node of this graph and of its subgraphs, depth first, with its owning graph."""
        for node in self.nodes:
            yield self, node
            for sub in node.subgraphs():
                yield from sub.walk()

    def outer_names(self) -> set[str]:
        """Names this graph reads but does not define (captured from an enclosing scope)."""
        defined = {v.name for v in self.inputs} | set(self.initializers)
        needed: set[str] = set()
        for node in self.nodes:
            for name in node.inputs:
                if name and name not in defined:
                    needed.add(name)
            for sub in node.subgraphs():
                needed |= sub.outer_names() - defined
            defined.update(o for o in node.outputs if o)
        needed |= {v.name for v in self.outputs if v.name not in defined}
        return needed
