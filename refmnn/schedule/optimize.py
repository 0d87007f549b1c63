"""Graph-level optimisation passes: pure functions from a Graph to an equivalent Graph.

Real models reach fused kernels only after rewrites: Dropout and Identity disappear,
BatchNormalization folds into the convolution before it, and Conv -> Add -> Relu chains become
one ``refmnn::FusedConv`` (the fused ops are defined in :mod:`refmnn.ops.fused` by the very
references they replace); the attention passes are in :mod:`refmnn.schedule.attention`, the
layout pass that puts chains of convolutions into NC8HW8 for a target's kernels in
:mod:`refmnn.schedule.blocked`, the helpers every pass shares (:class:`PassContext` among them) in :mod:`refmnn.schedule.rewrite`.
Every pass

* takes the graph and a :class:`PassContext` (op registry, value types and plan-time constants
  of *that* graph, and the target's op support) and returns a new graph (graphs are frozen);
* rewrites only the top-level graph, and never renames or removes a value that a subgraph
  (If/Loop/Scan body) reads from the enclosing scope;
* keeps every graph output's name and meaning;
* is tested to preserve the reference's results (tests/test_optimize.py).

:func:`optimize` runs a pipeline of passes (:data:`DEFAULT_PASSES`), re-inferring types
between passes. :func:`refmnn.schedule.plan.compile_plan` calls it only when an accelerated
backend is chosen or the Session asks for it (``Session(..., optimize=True)``): a Session on
the reference alone runs the model's own ops, since it is the golden reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from refmnn.graph import Graph, Node, TensorType, ValueType
from refmnn.ops.elementwise import FLT_MAX, clip_limits
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN, POOL_ATTRS
from refmnn.ops.registry import OpRegistry
from refmnn.schedule.attention import absorb_attention_transposes, fuse_attention
from refmnn.schedule.blocked import block_channels
from refmnn.schedule.lower import fold_constants, lower_node
from refmnn.schedule.rewrite import (Pass, PassContext, Runs, Supports, _absorb_add, _captured,
                                     _const, _fresh, _has, _pos, _rewire, _scalar, _sole_reader,
                                     _uses, _with, _with_nodes)
from refmnn.schedule.shapes import UNFOLDABLE, fold_node, infer_types

__all__ = ["Pass", "PassContext", "Runs", "Supports", "DEFAULT_PASSES",
           "absorb_attention_transposes", "block_channels", "decompose_batchnorm",
           "drop_unused_initializers", "fold_batchnorm", "fold_constant_nodes",
           "fold_dequantized_weights", "fuse_attention",
           "fuse_conv_pool",
           "fuse_epilogues", "fuse_gelu", "optimize", "remove_identities", "run_by",
           "supported_by"]

# ---------------------------------------------------------------------------------------------
# pass 0: constant folding (already a part of compile_plan; repeated so optimize() stands alone)


def fold_constant_nodes(graph: Graph, ctx: PassContext) -> Graph:
    """Replace every node whose outputs are all known at plan time (Constant nodes,
    Shape -> Gather -> Concat chains at static input shapes) by initializers.

    Preconditions: the node is not random (UNFOLDABLE), has no subgraph, and no output is a
    graph output. The values come from :func:`infer_types`' value propagation.
    """
    keep = lambda node: node.op in UNFOLDABLE or any(node.subgraphs())  # noqa: E731
    return fold_constants(graph, ctx.constants, keep)


def fold_dequantized_weights(graph: Graph, ctx: PassContext) -> Graph:
    """Replace every DequantizeLinear whose inputs are all initializers -- a QDQ model's
    quantized weights, of any size (:func:`fold_constant_nodes` takes tensors of at most
    ``FOLD_LIMIT`` elements) -- by an initializer holding its output.

    Why: the weights are dequantized once here instead of on every run (ResNet-18 quantized
    by onnxruntime's tool, on numba: 11.7M elements a run), and the convolutions and products
    that read them see constant weights, which their packed, Winograd and register-tile
    schemes need. The value is the op's reference function on the same arrays, so results are
    unchanged bit for bit; the float weights take four times the int8 ones' memory.
    Preconditions: default domain, output not a graph output; a node the reference refuses is
    left for the run to report.
    """
    graph_outputs = {v.name for v in graph.outputs}
    initializers = dict(graph.initializers)
    nodes: list[Node] = []
    for node in graph.nodes:
        folded = None
        if (node.op == "DequantizeLinear" and node.outputs[0] not in graph_outputs
                and all(not name or name in initializers for name in node.inputs)):
            folded = _fold_whole(graph, ctx, node, initializers)
        if folded is None:
            nodes.append(node)
        else:
            initializers[node.outputs[0]] = folded[0]
    if len(nodes) == len(graph.nodes):
        return graph
    return graph.replace(nodes=tuple(nodes), initializers=initializers)


def _fold_whole(graph: Graph, ctx: PassContext, node: Node,
                values: Mapping[str, np.ndarray]) -> tuple[Any, ...] | None:
    """``node``'s outputs from its reference on ``values``, whatever their size (see
    :func:`~refmnn.schedule.shapes.fold_node`); None when the op is unknown at its opset."""
    opset = graph.opset_of(node)
    opdef = ctx.registry.find(node.domain, node.op, opset)
    if opdef is None:
        return None
    try:
        attrs = opdef.bind_attrs(node.attrs, where=f"node {node.name!r}: ")
    except Exception:  # a bad attribute: the run reports it
        return None
    args = opdef.pad_inputs([values[name] if name else None for name in node.inputs])
    return fold_node(node, opdef, attrs, opset, args, limit=None)


# ---------------------------------------------------------------------------------------------
# pass 1: Dropout / Identity removal


def _dropout_is_inference(graph: Graph, ctx: PassContext, node: Node) -> bool:
    """Dropout computes output = data: opsets 7-11 always (inference engine); opset >= 12 when
    training_mode is absent or a constant false; opsets 1-6 when is_test is set."""
    opset = graph.opset_of(node)
    if opset >= 12:
        mode = node.inputs[2] if len(node.inputs) > 2 else ""
        if not mode:
            return True
        value = _const(graph, ctx, mode)
        return value is not None and not bool(value.reshape(-1)[0])
    if opset >= 7:
        return True
    return bool(node.attrs.get("is_test", 0))


def _removal(graph: Graph, ctx: PassContext, node: Node, uses: Mapping[str, int],
             captured: set[str]) -> Graph | None:
    """The graph without Identity/Dropout ``node`` (see :func:`remove_identities`), or None."""
    if node.domain or node.op not in ("Identity", "Dropout") or not node.inputs:
        return None
    if node.op == "Dropout":
        mask = node.outputs[1] if len(node.outputs) > 1 else ""
        if (mask and uses.get(mask, 0)) or not _dropout_is_inference(graph, ctx, node):
            return None
    src, dst = node.inputs[0], node.outputs[0]
    if not src or not dst or dst in captured:
        return None
    nodes = list(graph.nodes)
    del nodes[_pos(nodes, node)]
    if dst not in {v.name for v in graph.outputs}:
        return graph.replace(nodes=tuple(_rewire(nodes, {dst: src})))
    producer = graph.producers().get(src)
    if producer is not None and uses.get(src, 0) == 1:  # read by this node only
        at = _pos(nodes, producer)
        nodes[at] = _with(producer, outputs=tuple(dst if o == src else o for o in producer.outputs))
        return graph.replace(nodes=tuple(nodes))
    if node.op == "Dropout":  # keep a copy under the output's name
        nodes.insert(_pos(graph.nodes, node), Node(name=node.name, op="Identity", inputs=(src,),
                                                   outputs=(dst,), opset=13))
        return graph.replace(nodes=tuple(nodes))
    return None


def remove_identities(graph: Graph, ctx: PassContext) -> Graph:
    """Remove Identity nodes and inference-mode Dropout nodes whose mask nobody reads: their
    readers read the input instead.

    Preconditions: top-level node; the removed output is not captured by a subgraph; a
    Dropout's mask output is unlisted or unread (not an input, not a graph output) and the
    Dropout is in inference mode (opset 7-11; opset >= 12 with training_mode absent or a
    constant false; opset < 7 with is_test set). When the removed output is a graph output,
    the input's producer is renamed to the output's name instead (when the input is a node
    output read by nothing else, so not a graph output either); otherwise the node is kept
    (a Dropout then becomes an Identity-13). One node is removed at a time, on the graph the
    previous removal produced, so chains of Identities resolve correctly.
    """
    done: set[tuple[str, tuple[str, ...]]] = set()
    while True:
        uses, captured = _uses(graph), _captured(graph)
        for node in graph.nodes:
            if (node.name, node.outputs) in done:
                continue
            changed = _removal(graph, ctx, node, uses, captured)
            if changed is not None:
                done.add((node.name, node.outputs))
                graph = changed
                break
        else:
            return graph


# ---------------------------------------------------------------------------------------------
# pass 2: BatchNormalization folding


def _bn_stats(graph: Graph, ctx: PassContext, node: Node
              ) -> tuple[np.ndarray, np.ndarray] | None:
    """(a, b) with BN(y) = y * a + b per channel, in float64, for an inference-mode
    BatchNormalization with constant 1-D statistics and only Y listed; else None."""
    if node.op != "BatchNormalization" or node.domain or len(node.inputs) < 5:
        return None
    if len([o for o in node.outputs if o]) != 1 or node.outputs[0] == "":
        return None
    opset = graph.opset_of(node)
    attrs = node.attrs
    if opset >= 14 and attrs.get("training_mode", 0):
        return None
    if opset < 9 and attrs.get("spatial", 1) != 1:
        return None
    stats = [_const(graph, ctx, name) for name in node.inputs[1:5]]
    if any(s is None or s.ndim != 1 or s.dtype.kind != "f" for s in stats):
        return None
    scale, bias, mean, var = (np.asarray(s, np.float64) for s in stats)  # type: ignore[arg-type]
    if not (scale.shape == bias.shape == mean.shape == var.shape):
        return None
    a = scale / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    return a, bias - mean * a


def _folded_weights(graph: Graph, ctx: PassContext, prod: Node, a: np.ndarray, b: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]] | None:
    """(W', bias', attribute changes) for producer ``prod`` followed by BN (y * a + b per
    output channel), computed in float64 and cast to W's dtype; None when not foldable."""
    w = _const(graph, ctx, prod.inputs[1]) if len(prod.inputs) > 1 else None
    if w is None or w.dtype.kind != "f":
        return None
    bias_name = prod.inputs[2] if len(prod.inputs) > 2 else ""
    bias = _const(graph, ctx, bias_name)
    if bias_name and bias is None:
        return None
    w64 = w.astype(np.float64)
    channels = a.shape[0]
    if prod.op == "Conv":
        if w.ndim < 3 or w.shape[0] != channels:
            return None
        w_new = w64 * a.reshape(-1, *(1,) * (w.ndim - 1))
        old = np.zeros(channels) if bias is None else bias.astype(np.float64).reshape(-1)
        return w_new.astype(w.dtype), (old * a + b).astype(w.dtype), {}
    if prod.op == "ConvTranspose":
        group = int(prod.attrs.get("group", 1))
        if w.ndim < 3 or w.shape[1] * group != channels or w.shape[0] % group:
            return None
        per = a.reshape(group, 1, -1, *(1,) * (w.ndim - 2))         # (G, 1, M/G, 1...)
        grouped = w64.reshape(group, w.shape[0] // group, *w.shape[1:])
        w_new = (grouped * per).reshape(w.shape)
        old = np.zeros(channels) if bias is None else bias.astype(np.float64).reshape(-1)
        return w_new.astype(w.dtype), (old * a + b).astype(w.dtype), {}
    # Gemm: y = alpha * A' @ B' + beta * C, channels along axis 1 (N).
    trans_b = int(prod.attrs.get("transB", 0))
    if w.ndim != 2 or w.shape[0 if trans_b else 1] != channels:
        return None
    w_new = w64 * (a.reshape(-1, 1) if trans_b else a.reshape(1, -1))
    beta = float(prod.attrs.get("beta", 1.0))
    c = np.zeros(channels) if bias is None else beta * bias.astype(np.float64)
    try:
        c_new = np.broadcast_to(c, np.broadcast_shapes(c.shape, (1, channels))) * a + b
    except ValueError:
        return None
    if c_new.ndim == 2 and c_new.shape[0] == 1:
        c_new = c_new.reshape(-1)
    return w_new.astype(w.dtype), c_new.astype(w.dtype), {"beta": 1.0}


def fold_batchnorm(graph: Graph, ctx: PassContext) -> Graph:
    """Fold an inference BatchNormalization into the Conv, ConvTranspose or Gemm before it.

    With a = scale / sqrt(var + epsilon) per output channel (float64):
    W' = W * a (Conv: W[m]; ConvTranspose: W[:, m] within each group; Gemm: column m of B'),
    b' = (b - mean) * a + beta (Gemm: C' = (beta_gemm * C - mean) * a + beta, beta_gemm := 1),
    cast back to W's dtype; the producer then writes BN's output and BN disappears.

    Preconditions: BN in inference mode (training_mode 0 / no extra outputs / spatial 1) with
    constant 1-D statistics; the producer's W (and B/C when present) are constants of a float
    type; the producer's output is read only by the BN (not a graph output, not captured);
    Gemm's output is 2-D (BN's channel axis 1 is Gemm's N). New weights get new names (the
    old ones may be shared); unused initializers are dropped by a later pass.
    """
    uses = _uses(graph)
    readers = graph.consumers()
    producers = graph.producers()
    initializers = dict(graph.initializers)
    taken: set[str] = set()
    nodes = list(graph.nodes)
    for bn in graph.nodes:
        stats = _bn_stats(graph, ctx, bn)
        prod = producers.get(bn.inputs[0]) if stats is not None else None
        if prod is None or prod.domain or prod.op not in ("Conv", "ConvTranspose", "Gemm"):
            continue
        if _sole_reader(readers, uses, bn.inputs[0]) is not bn or len(prod.outputs) != 1:
            continue
        if prod.op == "Gemm" and graph.opset_of(prod) < 7:
            continue
        folded = _folded_weights(graph, ctx, prod, *stats)  # type: ignore[misc]
        if folded is None:
            continue
        w_new, b_new, attrs = folded
        w_name = _fresh(graph, f"{prod.inputs[1]}/bn_folded", taken)
        b_name = _fresh(graph, f"{bn.name or bn.outputs[0]}/bias_folded", taken)
        initializers[w_name], initializers[b_name] = w_new, b_new
        fused = _with(prod, inputs=(prod.inputs[0], w_name, b_name), outputs=(bn.outputs[0],),
                      attrs={**prod.attrs, **attrs})
        nodes[_pos(nodes, prod)] = fused
        del nodes[_pos(nodes, bn)]
    return graph.replace(nodes=tuple(nodes), initializers=initializers)


def decompose_batchnorm(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrite a remaining inference BatchNormalization (no Conv to fold into) as the
    per-channel Y = X * a + b (lower.py's rule: Mul then Add, constants in X's dtype).

    Preconditions: as the rule's (opset >= 9, inference, constant statistics, known rank);
    applied only when the target has no BatchNormalization kernel of its own.
    """
    if ctx.supports is not None and ctx.target_has("", "BatchNormalization"):
        return graph
    nodes: list[Node] = []
    initializers = dict(graph.initializers)
    for node in graph.nodes:
        lowered = None
        if node.op == "BatchNormalization" and not node.domain:
            lowered = lower_node(node, graph.opset_of(node), ctx.registry, ctx.types,
                                 {**ctx.constants, **graph.initializers})
        if lowered is None:
            nodes.append(node)
            continue
        nodes.extend(lowered[0])
        initializers.update(lowered[1])
    return graph.replace(nodes=tuple(nodes), initializers=initializers)


# ---------------------------------------------------------------------------------------------
# pass 3: activation and residual fusion


def _activation_of(graph: Graph, ctx: PassContext, node: Node) -> dict[str, Any] | None:
    """The fused-op attributes that stand for activation ``node``, or None if it is not one."""
    if node.domain or len([i for i in node.inputs if i]) < 1:
        return None
    op, attrs, opset = node.op, node.attrs, graph.opset_of(node)
    if op in ("Relu", "Sigmoid", "Tanh") and opset >= 6:
        return {"activation": op.lower()}
    if op == "LeakyRelu" and opset >= 6:
        return {"activation": "leaky_relu", "activation_alpha": float(attrs.get("alpha", 0.01))}
    if op == "Gelu":
        return {"activation": "gelu" if attrs.get("approximate", "none") == "none" else "gelu_tanh"}
    if op != "Clip":
        return None
    if opset >= 11:
        names = [node.inputs[i] if len(node.inputs) > i else "" for i in (1, 2)]
        limits = (float("-inf"), float("inf"))
        if not all(names):  # an absent bound is the type's lowest / max (ew_ops.clip_limits)
            t = ctx.types.get(node.inputs[0])
            if not isinstance(t, TensorType) or t.dtype is None:
                return None
            limits = clip_limits(t.dtype.numpy) or limits
        bounds = [_scalar(graph, ctx, name) if name else limit
                  for name, limit in zip(names, limits, strict=True)]
        if None in bounds:
            return None
        lo, hi = bounds
    else:  # Clip-6's attributes default to -+FLT_MAX; Clip-1 has no default (no bound)
        limit = FLT_MAX if opset >= 6 else float("inf")
        lo = float(attrs["min"]) if attrs.get("min") is not None else -limit
        hi = float(attrs["max"]) if attrs.get("max") is not None else limit
    return {"activation": "clip", "activation_min": lo, "activation_max": hi}


_FUSED_OF = {"Conv": "FusedConv", "MatMul": "FusedMatMul", "Gemm": "FusedGemm"}


def fuse_epilogues(graph: Graph, ctx: PassContext) -> Graph:
    """Fuse a producer with the chain that follows it into one ``refmnn`` fused op:

    * Conv [-> Add(residual Z)] [-> activation]           -> refmnn::FusedConv(X, W, B, Z)
    * MatMul [-> Add(bias)] [-> Add(residual Z)] [-> act] -> refmnn::FusedMatMul(A, B, bias, Z)
    * Gemm -> activation                                  -> refmnn::FusedGemm(A, B, C)

    Activations: Relu, LeakyRelu, Sigmoid, Tanh, Clip with constant bounds (relu6), Gelu.

    Preconditions: each intermediate value is read only by the next node of the chain (not a
    graph output, not captured by a subgraph); an absorbed Add's other operand has the same
    dtype and a static shape that broadcasts to the producer's without enlarging it (a bias
    is also a constant of rank <= 1); the producer is float (Conv) or of a static shape; a
    node is fused only when something absorbed (a bare producer stays) and the target has
    the fused op. The fused node takes the place of the chain's last node, after which every
    input it reads (a residual in particular) is available.
    """
    uses = _uses(graph)
    readers = graph.consumers()
    nodes = list(graph.nodes)
    gone: set[int] = set()
    for prod in graph.nodes:
        fused_op = _FUSED_OF.get(prod.op) if not prod.domain else None
        if fused_op is None or not ctx.target_has(FUSED_DOMAIN, fused_op) or id(prod) in gone:
            continue
        if prod.op == "Gemm" and graph.opset_of(prod) < 7:
            continue
        value = prod.outputs[0]
        extra: dict[str, str] = {}
        attrs: dict[str, Any] = {}
        chain: list[Node] = []
        steps = {"Conv": ("Z",), "MatMul": ("bias", "Z"), "Gemm": ()}[prod.op]
        for step in (*steps, "act"):
            nxt = _sole_reader(readers, uses, value)
            if nxt is None or id(nxt) in gone:
                break
            if step == "act":
                found = _activation_of(graph, ctx, nxt)
                if found is None or nxt.inputs[0] != value:
                    break
                attrs, value = found, nxt.outputs[0]
            else:
                absorbed = _absorb_add(graph, ctx, value, nxt, step)
                if absorbed is None:
                    continue
                extra[step], value = absorbed
            chain.append(nxt)
        if not chain:
            continue
        inputs = list(prod.inputs)
        if prod.op == "Conv":
            inputs = (inputs + ["", ""])[:3] + [extra.get("Z", "")]
        elif prod.op == "MatMul":
            inputs = inputs[:2] + [extra.get("bias", ""), extra.get("Z", "")]
        while inputs and not inputs[-1]:
            inputs.pop()
        fused = Node(name=prod.name, op=fused_op, domain=FUSED_DOMAIN, inputs=tuple(inputs),
                     outputs=(value,), attrs={**prod.attrs, **attrs}, opset=1)
        last = chain[-1]
        nodes[_pos(nodes, last)] = fused
        for node in (prod, *chain[:-1]):
            del nodes[_pos(nodes, node)]
        gone |= {id(n) for n in (prod, *chain)}
    return _with_nodes(graph, nodes)


_POOL_ATTRS = tuple(a.name[len("pool_"):] for a in POOL_ATTRS)  # the MaxPool attributes taken
_CONVS = (("Conv", ""), ("FusedConv", FUSED_DOMAIN))


def fuse_conv_pool(graph: Graph, ctx: PassContext) -> Graph:
    """Fuse a convolution with the max pool that reads it into one
    ``refmnn::FusedConvMaxPool(X, W, B)`` (a network's stem: ResNet's 7x7, SqueezeNet's 3x3)::

        Conv | FusedConv (no residual) -> MaxPool    -> FusedConvMaxPool

    The MaxPool's attributes go over as ``pool_*`` (storage_order aside).

    Preconditions: the convolution's output is read by the MaxPool alone (not a graph output,
    not captured); the MaxPool has no Indices output; the target computes the fused node at
    these shapes (:meth:`PassContext.target_runs`: a backend's kernel for the fused op may
    cover only some convolutions and pools, and a fused node it does not compute would run on
    the reference). Runs after :func:`fuse_epilogues`, so the activation between the two is
    already in the FusedConv. The fused node computes what the two did, bit for bit.
    """
    uses = _uses(graph)
    readers = graph.consumers()
    producer = {out: node for node in graph.nodes for out in node.outputs if out}
    nodes = list(graph.nodes)
    for pool in graph.nodes:
        if pool.op != "MaxPool" or pool.domain or any(pool.outputs[1:]):
            continue
        conv = producer.get(pool.inputs[0])
        if conv is None or (conv.op, conv.domain) not in _CONVS:
            continue
        if any(conv.inputs[3:]) or _sole_reader(readers, uses, pool.inputs[0]) is not pool:
            continue
        pooling = {"pool_" + k: v for k, v in pool.attrs.items() if k in _POOL_ATTRS}
        attrs = {**conv.attrs, **pooling}
        fused = Node(name=conv.name, op="FusedConvMaxPool", domain=FUSED_DOMAIN,
                     inputs=conv.inputs[:3], outputs=pool.outputs[:1], attrs=attrs, opset=1)
        if not ctx.target_runs(graph, fused):
            continue
        nodes[_pos(nodes, pool)] = fused
        del nodes[_pos(nodes, conv)]
    return _with_nodes(graph, nodes)


def _is_const(graph: Graph, ctx: PassContext, name: str, target: float, rtol: float = 1e-6) -> bool:
    value = _scalar(graph, ctx, name)
    return value is not None and abs(value - target) <= rtol * abs(target)


def _other(node: Node, name: str) -> str | None:
    """The other input of a binary node that reads ``name`` once."""
    if len(node.inputs) != 2 or node.inputs.count(name) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def fuse_gelu(graph: Graph, ctx: PassContext) -> Graph:
    """Recognise Gelu's exact formula as exported by torch and replace it by one Gelu node
    (pinned to opset 20, approximate="none")::

        Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)     (operands of Add/Mul in any order)

    Preconditions: the constants are scalars equal to sqrt(2), 1 and 0.5 (relative 1e-6); x is
    float and read only by the Div and the first Mul; each intermediate is read once (not a
    graph output, not captured). The Gelu reference computes in float64 and rounds once, so
    results may differ from the chain's by rounding (about 1 ulp).
    """
    uses = _uses(graph)
    readers = graph.consumers()
    nodes = list(graph.nodes)

    def only_reader(value: str, op: str) -> Node | None:
        found = _sole_reader(readers, uses, value)
        if found is not None and found.op == op and not found.domain and _has(nodes, found):
            return found
        return None

    for div in graph.nodes:
        if div.op != "Div" or div.domain or len(div.inputs) != 2 or not _has(nodes, div):
            continue
        x = div.inputs[0]
        t = ctx.types.get(x)
        if not _is_const(graph, ctx, div.inputs[1], float(np.sqrt(2.0))) or not (
                isinstance(t, TensorType) and t.dtype is not None and t.dtype.numpy.kind == "f"):
            continue
        erf = only_reader(div.outputs[0], "Erf")
        add = erf and only_reader(erf.outputs[0], "Add")
        if add is None or not _is_const(graph, ctx, _other(add, erf.outputs[0]) or "", 1.0):
            continue
        mul = only_reader(add.outputs[0], "Mul")
        if mul is None or _other(mul, add.outputs[0]) != x:
            continue
        half = only_reader(mul.outputs[0], "Mul")
        if half is None or not _is_const(graph, ctx, _other(half, mul.outputs[0]) or "", 0.5):
            continue
        x_readers = readers.get(x, [])
        if len(x_readers) != 2 or {id(n) for n in x_readers} != {id(div), id(mul)}:
            continue
        gelu = Node(name=half.name, op="Gelu", inputs=(x,), outputs=half.outputs,
                    attrs={"approximate": "none"}, opset=20)
        nodes[_pos(nodes, half)] = gelu
        for node in (div, erf, add, mul):
            del nodes[_pos(nodes, node)]
    return graph.replace(nodes=tuple(nodes))


# ---------------------------------------------------------------------------------------------
# cleanup


def drop_unused_initializers(graph: Graph, ctx: PassContext) -> Graph:
    """Remove initializers nothing reads any more (weights replaced by folded copies).
    Graph outputs and names captured by subgraphs count as reads."""
    uses = _uses(graph)
    kept = {k: v for k, v in graph.initializers.items() if uses.get(k, 0)}
    if len(kept) == len(graph.initializers):
        return graph
    return graph.replace(initializers=kept)


# ---------------------------------------------------------------------------------------------
# the pipeline


DEFAULT_PASSES: tuple[Pass, ...] = (
    fold_constant_nodes,
    fold_dequantized_weights,
    remove_identities,
    fold_batchnorm,
    decompose_batchnorm,
    fuse_gelu,
    fuse_attention,
    absorb_attention_transposes,
    fuse_epilogues,
    fuse_conv_pool,
    block_channels,
    drop_unused_initializers,
)
"""The passes :func:`optimize` runs, in order."""


def optimize(graph: Graph, registry: OpRegistry, types: Mapping[str, ValueType | None], *,
             passes: Sequence[Pass] = DEFAULT_PASSES, supports: Supports | None = None,
             runs: Runs | None = None) -> Graph:
    """Run ``passes`` over ``graph`` in order; types are re-inferred before each pass.

    Args:
        graph: the model graph.
        registry: the op definitions.
        types: the graph inputs' types (entries for other names are ignored); static shapes
            let more chains fold and fuse.
        passes: the pipeline (default :data:`DEFAULT_PASSES`).
        supports: ``supports(domain, op)`` for the target backends; fusions into an op the
            target lacks are skipped. None: every fusion applies (the reference runs all).
        runs: ``runs(spec)`` for the target backends (:func:`run_by`), for the fusions whose
            kernels cover some cases only (:func:`fuse_conv_pool`); None: ``supports`` decides.

    Returns:
        An equivalent graph: same inputs and outputs, same results up to the rounding noted
        in each pass's docstring.
    """
    inputs = {v.name: types.get(v.name, v.type) for v in graph.inputs}
    for step in passes:
        inferred = infer_types(graph, inputs, registry)
        ctx = PassContext(registry, inferred.types, inferred.constants, supports, runs)
        graph = step(graph, ctx)
    return graph


def supported_by(backends: Sequence[Any]) -> Supports:
    """``supports(domain, op)``: some backend of ``backends`` declares a kernel for the op."""
    ops = {(k.domain, k.op) for b in backends for k in b.kernels()}
    return lambda domain, op: (domain, op) in ops


def run_by(backends: Sequence[Any]) -> Runs:
    """``runs(spec)``: some backend of ``backends`` has a scheme that applies to the node."""
    from refmnn.schedule.plan import _find_kernel

    return lambda spec: any(_find_kernel(b, spec) is not None for b in backends)
