"""What the graph passes share: :class:`PassContext` and the helpers that walk and edit a graph.

The passes themselves live in :mod:`refmnn.schedule.optimize` (folding, cleanup, BatchNorm,
epilogue and GELU fusion, the pipeline) and :mod:`refmnn.schedule.attention` (attention
fusion); the underscore helpers here are private to those modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refmnn.graph import Graph, Node, TensorType, ValueType
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN
from refmnn.ops.registry import OpRegistry

Supports = Callable[[str, str], bool]
"""``supports(domain, op)``: the target has a fast kernel for this op."""

Runs = Callable[[Any], bool]
"""``runs(spec)``: a scheme of the target's computes this node (a :class:`NodeSpec`: its
shapes, attributes and constants), for fusions whose kernels cover only some cases."""


@dataclass(frozen=True, slots=True)
class PassContext:
    """What a pass may read besides the graph.

    Attributes:
        registry: the op definitions.
        types: the inferred type of every value of the graph the pass receives.
        constants: the values known at plan time (initializers and folded values).
        supports: the target's op support; None means "any op" (the reference runs them all).
        runs: whether the target computes a given node; None: whatever ``supports`` admits.
    """

    registry: OpRegistry
    types: Mapping[str, ValueType | None]
    constants: Mapping[str, np.ndarray]
    supports: Supports | None = None
    runs: Runs | None = None

    def target_has(self, domain: str, op: str) -> bool:
        return self.supports is None or self.supports(domain, op)

    def target_runs(self, graph: Graph, node: Node) -> bool:
        """The target has the node's op and (given ``runs``) a scheme that applies to it at
        the types of ``graph``'s values (``node`` is a candidate, not yet in ``graph``)."""
        if not self.target_has(node.domain, node.op):
            return False
        if self.supports is None or self.runs is None:
            return True
        from refmnn.schedule.plan import make_spec

        return self.runs(make_spec(node, graph, self.registry, self.types, self.constants))


Pass = Callable[[Graph, PassContext], Graph]


# ---------------------------------------------------------------------------------------------
# helpers: uses of values, rewiring, constants


def _captured(graph: Graph) -> set[str]:
    """Names read by some subgraph from the enclosing scope (they must keep their names)."""
    names: set[str] = set()
    for node in graph.nodes:
        for sub in node.subgraphs():
            names |= sub.outer_names()
    return names


def _uses(graph: Graph) -> dict[str, int]:
    """How many times each value is read: node inputs, subgraph captures and graph outputs."""
    count: dict[str, int] = {}
    for node in graph.nodes:
        for name in node.inputs:
            if name:
                count[name] = count.get(name, 0) + 1
        for sub in node.subgraphs():
            for name in sub.outer_names():
                count[name] = count.get(name, 0) + 1
    for value in graph.outputs:
        count[value.name] = count.get(value.name, 0) + 1
    return count


def _sole_reader(readers: Mapping[str, list[Node]], uses: Mapping[str, int], name: str
                 ) -> Node | None:
    """The one node that reads ``name``, when nothing else does (no other node, no graph
    output, no subgraph capture), so that node may absorb ``name``'s producer; else None."""
    found = readers.get(name, [])
    return found[0] if len(found) == 1 and uses.get(name, 0) == 1 else None


def _walk(graph: Graph) -> tuple[dict[str, int], Mapping[str, list[Node]], dict[str, Node],
                              list[Node]]:
    """What a rewriting pass walks: reads per value, readers and producer of each value, and
    the nodes as a list to edit."""
    producer = {out: node for node in graph.nodes for out in node.outputs if out}
    return _uses(graph), graph.consumers(), producer, list(graph.nodes)


def _pos(nodes: Sequence[Node], node: Node) -> int:
    """Index of ``node`` in ``nodes`` by identity (Node equality would compare attributes)."""
    return next(i for i, n in enumerate(nodes) if n is node)


def _has(nodes: Sequence[Node], node: Node) -> bool:
    return any(n is node for n in nodes)


def _rewire(nodes: Iterable[Node], mapping: Mapping[str, str]) -> list[Node]:
    """Replace input names by ``mapping`` in every node (top level only)."""
    result = []
    for node in nodes:
        if any(n in mapping for n in node.inputs):
            node = _with(node, inputs=tuple(mapping.get(n, n) for n in node.inputs))
        result.append(node)
    return result


def _with(node: Node, **changes: Any) -> Node:
    from dataclasses import replace

    return replace(node, **changes)


def _const(graph: Graph, ctx: PassContext, name: str) -> np.ndarray | None:
    """The plan-time value of ``name`` (an initializer or a folded value), else None."""
    if not name:
        return None
    if name in graph.initializers:
        return np.asarray(graph.initializers[name])
    value = ctx.constants.get(name)
    return None if value is None else np.asarray(value)


def _shape(ctx: PassContext, name: str) -> tuple[Any, ...] | None:
    t = ctx.types.get(name)
    if isinstance(t, TensorType) and t.is_static:
        return tuple(t.shape)  # type: ignore[arg-type]
    return None


def _with_nodes(graph: Graph, nodes: Sequence[Node]) -> Graph:
    """``graph`` with ``nodes``, importing the fused ops' domain when a node is of it."""
    opsets = dict(graph.opsets)
    if any(n.domain == FUSED_DOMAIN for n in nodes):
        opsets.setdefault(FUSED_DOMAIN, 1)
    return graph.replace(nodes=tuple(nodes), opsets=opsets)


def _fresh(graph: Graph, hint: str, taken: set[str]) -> str:
    """A value name not used in the graph nor in ``taken`` (which it joins)."""
    used = taken | set(graph.initializers) | {v.name for v in graph.inputs}
    used |= {o for node in graph.nodes for o in node.outputs}
    name, k = hint, 0
    while name in used:
        k += 1
        name = f"{hint}_{k}"
    taken.add(name)
    return name


def _scalar(graph: Graph, ctx: PassContext, name: str) -> float | None:
    value = _const(graph, ctx, name)
    if value is None or value.size != 1 or value.dtype.kind not in "fiu":
        return None
    return float(value.reshape(-1)[0])


def _absorb_add(graph: Graph, ctx: PassContext, value: str, add: Node, want: str
                ) -> tuple[str, str] | None:
    """If ``add`` is Add(value, other) with ``other`` broadcasting to ``value``'s static shape
    without enlarging it (and a constant when ``want == "bias"``), return (other, add output)."""
    if add.op != "Add" or add.domain or len(add.inputs) != 2 or graph.opset_of(add) < 7:
        return None
    other = add.inputs[1] if add.inputs[0] == value else add.inputs[0]
    if other == value or value not in add.inputs:
        return None
    shape, other_shape = _shape(ctx, value), _shape(ctx, other)
    if shape is None or other_shape is None or _shape(ctx, add.outputs[0]) != shape:
        return None
    t_value, t_other = ctx.types.get(value), ctx.types.get(other)
    if t_value.dtype != t_other.dtype:  # type: ignore[union-attr]
        return None
    if want == "bias" and (_const(graph, ctx, other) is None or len(other_shape) > 1):
        return None
    return other, add.outputs[0]
