"""The channel-blocked layout pass: chains of convolutions in NC8HW8 for a target that has
kernels for it (the ops are in :mod:`refmnn.ops.blocked`, numba's kernels in
``refmnn/backends/numba/kernels/blocked.py``).

A convolution's output is kept blocked when the target computes the blocked version of the node
that produces it, and that node reads its input blocked -- or is a chain's first layer, which
reads NCHW and writes blocks (``input_layout`` "NCHW", a network's stem) -- and something reads
the blocks::

    Conv/FusedConv (X -> Y)                 -> FusedConvNC8HW8 (X or its twin -> Y's twin)
    a reader of Y that is not blocked       -> reads FromNC8HW8(Y's twin), named Y

Each blocked value is a new name (its twin); the NCHW name stays wherever anything else reads
it: a graph output, a subgraph's capture, a node of another kind (MobileNet's last convolution
feeds its pooling through one FromNC8HW8). A residual (FusedConv's Z) must itself be blocked
for its node to be. The result is exactly the graph's: the blocked ops are defined as the ops
they replace with their tensors reordered.

Runs only for a target that declares the blocked ops (``PassContext.supports`` not None and
admitting them): the reference gains nothing from the layout, so ``optimize=True`` without a
target leaves the graph as it is.
"""

from __future__ import annotations

from refmnn.errors import RefmnnError
from refmnn.graph import Graph, Node, TensorType
from refmnn.ops.blocked import blocked_dims
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN
from refmnn.schedule.rewrite import PassContext, _captured, _fresh, _with_nodes

BLOCKED_CONV = "FusedConvNC8HW8"
FROM_BLOCKED = "FromNC8HW8"
_CONVS = (("Conv", ""), ("FusedConv", FUSED_DOMAIN))


def block_channels(graph: Graph, ctx: PassContext) -> Graph:
    """Put chains of convolutions into NC8HW8 where the target computes them so (module
    docstring). Preconditions per node: a Conv or FusedConv with one output, a known number of
    output channels, a residual (if any) of the output's shape and already blocked, and a
    scheme of the target that applies to the blocked node at these shapes."""
    if ctx.supports is None or not (ctx.target_has(FUSED_DOMAIN, BLOCKED_CONV)
                                    and ctx.target_has(FUSED_DOMAIN, FROM_BLOCKED)):
        return graph
    types = dict(ctx.types)
    local = PassContext(ctx.registry, types, ctx.constants, ctx.supports, ctx.runs)
    twin: dict[str, str] = {}  # an NCHW value -> its NC8HW8 twin
    blocked: dict[int, Node] = {}  # id(a node) -> its FusedConvNC8HW8
    taken: set[str] = set()
    for node in graph.nodes:
        candidate = _blocked_node(graph, local, node, twin, types, taken)
        if candidate is not None:
            blocked[id(node)] = candidate
            twin[node.outputs[0]] = candidate.outputs[0]
    readers = graph.consumers()

    def read_blocked(value: str) -> bool:  # some blocked node reads the value's twin
        return any(twin[value] in blocked[id(r)].inputs for r in readers.get(value, ())
                   if id(r) in blocked)

    for node in graph.nodes:  # a stem whose blocks nobody reads stays as it was
        new = blocked.get(id(node))
        if new is not None and new.attrs["input_layout"] == "NCHW" and not read_blocked(
                node.outputs[0]):
            del blocked[id(node)], twin[node.outputs[0]]
    keep = _captured(graph) | {v.name for v in graph.outputs}
    nodes: list[Node] = []
    for node in graph.nodes:
        new = blocked.get(id(node))
        if new is None:
            nodes.append(node)
            continue
        nodes.append(new)
        y = node.outputs[0]
        nchw_readers = [r for r in readers.get(y, ()) if id(r) not in blocked
                        or y in blocked[id(r)].inputs]
        if y in keep or nchw_readers:
            channels = int(types[node.inputs[1]].shape[0])  # type: ignore[union-attr, index]
            nodes.append(Node(name=f"{node.name}/{FROM_BLOCKED}", op=FROM_BLOCKED,
                              domain=FUSED_DOMAIN, inputs=(twin[y],), outputs=(y,),
                              attrs={"channels": channels}, opset=1))
    return _with_nodes(graph, nodes) if blocked else graph


def _blocked_node(graph: Graph, ctx: PassContext, node: Node, twin: dict[str, str],
                  types: dict, taken: set[str]) -> Node | None:  # type: ignore[type-arg]
    """The FusedConvNC8HW8 that would replace ``node`` (its output's twin typed in ``types``),
    or None where a precondition of :func:`block_channels` fails."""
    if (node.op, node.domain) not in _CONVS or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    x, z = node.inputs[0], node.inputs[3] if len(node.inputs) > 3 else ""
    w_type, y_type = types.get(node.inputs[1]), types.get(node.outputs[0])
    if z and (z not in twin or types.get(z) != y_type):  # a residual of Y's very shape
        return None
    if not (isinstance(w_type, TensorType) and isinstance(y_type, TensorType)
            and w_type.shape and y_type.shape and isinstance(w_type.shape[0], int)):
        return None
    name = _fresh(graph, node.outputs[0] + ".nc8hw8", taken)
    types[name] = TensorType(y_type.dtype, blocked_dims(y_type.shape, w_type.shape[0]))
    inputs = [twin.get(x, x), *node.inputs[1:3]] + [""] * (3 - len(node.inputs[:3]))
    candidate = Node(name=node.name, op=BLOCKED_CONV, domain=FUSED_DOMAIN,
                     inputs=tuple(inputs + ([twin[z]] if z else [])), outputs=(name,),
                     attrs={**node.attrs, "input_layout": "NC8HW8" if x in twin else "NCHW"},
                     opset=1)
    try:
        return candidate if ctx.target_runs(graph, candidate) else None
    except RefmnnError:  # a node whose blocked form has no valid type is not blocked
        return None


__all__ = ["BLOCKED_CONV", "FROM_BLOCKED", "block_channels"]
