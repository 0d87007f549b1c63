"""Lowering: rewrite composite ops into refmnn's small core op set, and fold constants.

The core op set (:data:`CORE_OPS`) is what a backend needs in order to run most models, after
MNN's geometry computing: one strided-copy primitive (``refmnn::Raster``) for all memory
movement, elementwise unary/binary/ternary ops, reductions, MatMul, convolution and its
transposed form, pooling, Softmax, LayerNormalization, Cast, and gather/scatter. Every other op
with a rule in :data:`RULES` is rewritten into core ops when the chosen backends lack it.

A rule sees the node, the static types of its inputs and the inputs known at plan time, and
returns replacement nodes plus any new constants. Rules pin the opset of the nodes they emit
(``Node.opset``), so the rewrite means the same thing whatever the model's opset import is.
Each rule is tested to equal the op's reference (tests/test_lowering.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError, ShapeError, node_with_types
from refmnn.graph import Graph, Node, TensorType, ValueType
from refmnn.ops.raster import DOMAIN as RASTER_DOMAIN, contiguous_strides
from refmnn.ops._schema import OpDef
from refmnn.ops.registry import OpRegistry

UNARY = ("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign",
         "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
         "Erf", "Relu", "Sigmoid", "Tanh", "LeakyRelu", "Not", "IsNaN", "IsInf", "Elu", "Softsign")
BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "PRelu", "Equal", "Less",
          "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "BitShift")
CORE_OPS = frozenset(
    {("", op) for op in UNARY + BINARY}
    | {("", op) for op in ("Where", "Clip", "Cast", "ReduceSum", "ReduceMean", "ReduceMax",
                           "ReduceMin", "ReduceProd", "ArgMax", "ArgMin", "MatMul", "Conv",
                           "ConvTranspose", "MaxPool", "AveragePool", "Softmax",
                           "LayerNormalization", "Gather", "GatherElements", "GatherND",
                           "ScatterND", "ScatterElements")}
    | {(RASTER_DOMAIN, "Raster")}
)
"""(domain, op) pairs of the core op set."""


class Emitter:
    """Builds the replacement nodes of one rule with unique names derived from the node."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.nodes: list[Node] = []
        self.constants: dict[str, np.ndarray] = {}
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{self.node.name}/{hint}{self._count}"

    def const(self, value: Any, dtype: np.dtype) -> str:
        name = self.name("const")
        array = np.asarray(value, dtype=dtype)
        array.flags.writeable = False
        self.constants[name] = array
        return name

    def emit(self, op: str, inputs: Sequence[str], *, opset: int, out: str | None = None,
             domain: str = "", **attrs: Any) -> str:
        output = out if out is not None else self.name(op.lower())
        self.nodes.append(Node(name=self.name(op), op=op, domain=domain, inputs=tuple(inputs),
                               outputs=(output,), attrs=attrs, opset=opset))
        return output


@dataclass(frozen=True, slots=True)
class RuleInput:
    """What a lowering rule may read about the node it rewrites."""

    node: Node
    opdef: OpDef
    attrs: Mapping[str, Any]
    types: tuple[TensorType | None, ...]
    constants: tuple[np.ndarray | None, ...]
    opset: int


Rule = Callable[[RuleInput, Emitter], bool]


def affine_region(index_map: np.ndarray) -> list[int] | None:
    """If ``index_map`` (output element -> source flat index) is affine in the output's
    multi-index, return its region ``[0, offset, 0, sizes..., src_strides..., dst_strides...]``."""
    shape = index_map.shape
    if index_map.size == 0:
        return None
    offset = int(index_map.flat[0])
    src_strides = []
    for axis, dim in enumerate(shape):
        if dim > 1:
            probe = [0] * len(shape)
            probe[axis] = 1
            src_strides.append(int(index_map[tuple(probe)]) - offset)
        else:
            src_strides.append(0)
    grids = np.indices(shape, sparse=True) if shape else []
    predicted = offset + sum(g * s for g, s in zip(grids, src_strides, strict=True))
    if not np.array_equal(np.broadcast_to(predicted, shape), index_map):
        return None
    return [0, offset, 0, *shape, *src_strides, *contiguous_strides(shape)]


def lower_movement(rule: RuleInput, em: Emitter) -> bool:
    """Single-input data movement (Transpose, Slice, Reshape, Expand, ...) as one Raster region,
    found by running the op's own reference on a tensor of source indices."""
    source = rule.types[0]
    if source is None or not source.is_static:
        return False
    index = np.arange(source.numel() or 0, dtype=np.int64).reshape(source.shape)
    args = [index, *rule.constants[1:]]
    if any(a is None and n for a, n in zip(args[1:], rule.node.inputs[1:], strict=False)):
        return False
    result = rule.opdef(*args, **rule.attrs)
    index_map = result[0] if isinstance(result, tuple) else result
    if index_map.size == 0:
        return False
    region = affine_region(np.asarray(index_map))
    if region is None:
        return False
    em.emit("Raster", [rule.node.inputs[0]], opset=1, domain=RASTER_DOMAIN,
            out=rule.node.outputs[0], shape=tuple(index_map.shape), rank=index_map.ndim,
            regions=tuple(region))
    return True


def lower_concat(rule: RuleInput, em: Emitter) -> bool:
    """Concat: one region per input, placed at its offset along ``axis``."""
    if any(t is None or not t.is_static for t in rule.types):
        return False
    shapes = [tuple(t.shape) for t in rule.types]  # type: ignore[union-attr, arg-type]
    rank = len(shapes[0])
    axis = rule.attrs["axis"] % rank
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    out_strides = contiguous_strides(out_shape)
    regions: list[int] = []
    position = 0
    for k, shape in enumerate(shapes):
        regions += [k, 0, position * out_strides[axis], *shape, *contiguous_strides(shape), *out_strides]
        position += shape[axis]
    em.emit("Raster", rule.node.inputs, opset=1, domain=RASTER_DOMAIN, out=rule.node.outputs[0],
            shape=tuple(out_shape), rank=rank, regions=tuple(regions))
    return True


def lower_gemm(rule: RuleInput, em: Emitter) -> bool:
    """Gemm: Y = alpha * A' @ B' + beta * C with A' = A^T if transA, B' = B^T if transB."""
    if rule.opset < 7 or rule.types[0] is None or rule.types[0].dtype is None:
        return False
    a, b = rule.node.inputs[0], rule.node.inputs[1]
    dtype = rule.types[0].dtype.numpy
    if rule.attrs["transA"]:
        a = em.emit("Transpose", [a], opset=13, perm=(1, 0))
    weight = rule.constants[1]
    if rule.attrs["transB"] and weight is not None:  # a weight: transposed once, here
        b = em.const(np.ascontiguousarray(weight.T), weight.dtype)
    elif rule.attrs["transB"]:
        b = em.emit("Transpose", [b], opset=13, perm=(1, 0))
    has_c = len(rule.node.inputs) > 2 and bool(rule.node.inputs[2])
    y = em.emit("MatMul", [a, b], opset=13, out=None if (rule.attrs["alpha"] != 1 or has_c) else rule.node.outputs[0])
    if rule.attrs["alpha"] != 1:
        last = not has_c
        y = em.emit("Mul", [y, em.const(rule.attrs["alpha"], dtype)], opset=14,
                    out=rule.node.outputs[0] if last else None)
    if has_c:
        c = rule.node.inputs[2]
        if rule.attrs["beta"] != 1:
            c = em.emit("Mul", [c, em.const(rule.attrs["beta"], dtype)], opset=14)
        em.emit("Add", [y, c], opset=14, out=rule.node.outputs[0])
    return True


def lower_global_pool(reduce_op: str) -> Rule:
    def rule_fn(rule: RuleInput, em: Emitter) -> bool:
        source = rule.types[0]
        if source is None or source.rank is None:
            return False
        axes = tuple(range(2, source.rank))
        em.emit(reduce_op, [rule.node.inputs[0]], opset=13, out=rule.node.outputs[0], axes=axes, keepdims=1)
        return True

    rule_fn.__doc__ = f"Global pooling as {reduce_op} over the spatial axes, keeping dims."
    return rule_fn


def lower_batchnorm(rule: RuleInput, em: Emitter) -> bool:
    """Inference BatchNormalization with constant statistics as Y = X * a + b, where
    a = scale / sqrt(var + epsilon) and b = bias - mean * a, per channel (axis 1)."""
    if rule.opset < 9 or rule.attrs.get("training_mode", 0) or len(rule.node.outputs) > 1:
        return False
    if any(c is None for c in rule.constants[1:5]) or rule.types[0] is None or rule.types[0].rank is None:
        return False
    scale, bias, mean, var = (np.asarray(c, np.float64) for c in rule.constants[1:5])
    a = scale / np.sqrt(var + rule.attrs["epsilon"])
    b = bias - mean * a
    trailing = (1,) * (rule.types[0].rank - 2)
    dtype = rule.types[0].dtype.numpy  # type: ignore[union-attr]
    y = em.emit("Mul", [rule.node.inputs[0], em.const(a.reshape(-1, *trailing), dtype)], opset=14)
    em.emit("Add", [y, em.const(b.reshape(-1, *trailing), dtype)], opset=14, out=rule.node.outputs[0])
    return True


def lower_variadic(binary: str) -> Rule:
    def rule_fn(rule: RuleInput, em: Emitter) -> bool:
        inputs = [n for n in rule.node.inputs if n]
        if not inputs or rule.opset < 8:
            return False
        if rule.node.op == "Mean" and (rule.types[0] is None or rule.types[0].dtype is None):
            return False
        acc = inputs[0]
        final = rule.node.outputs[0]
        for index, other in enumerate(inputs[1:]):
            last = index == len(inputs) - 2 and rule.node.op != "Mean"
            acc = em.emit(binary, [acc, other], opset=13, out=final if last else None)
        if rule.node.op == "Mean":
            dtype = rule.types[0].dtype.numpy  # type: ignore[union-attr]
            em.emit("Div", [acc, em.const(len(inputs), dtype)], opset=14, out=final)
        elif len(inputs) == 1:
            em.emit("Raster", [acc], opset=1, domain=RASTER_DOMAIN, out=final,
                    **_copy_attrs(rule.types[0]))
        return True

    rule_fn.__doc__ = f"Variadic {binary} as a chain of binary {binary} nodes."
    return rule_fn


def _copy_attrs(t: TensorType | None) -> dict[str, Any]:
    assert t is not None and t.is_static
    n = t.numel() or 0
    return {"shape": tuple(t.shape), "rank": 1, "regions": (0, 0, 0, n, 1, 1)}  # type: ignore[arg-type]


def lower_gelu(rule: RuleInput, em: Emitter) -> bool:
    """Gelu(approximate="none") = 0.5 * X * (1 + erf(X / sqrt(2)))."""
    if rule.attrs.get("approximate", "none") != "none" or rule.types[0] is None:
        return False
    dtype = rule.types[0].dtype.numpy  # type: ignore[union-attr]
    x = rule.node.inputs[0]
    scaled = em.emit("Div", [x, em.const(np.sqrt(2.0), dtype)], opset=14)
    erf = em.emit("Erf", [scaled], opset=13)
    one_plus = em.emit("Add", [erf, em.const(1.0, dtype)], opset=14)
    half_x = em.emit("Mul", [x, em.const(0.5, dtype)], opset=14)
    em.emit("Mul", [half_x, one_plus], opset=14, out=rule.node.outputs[0])
    return True


def lower_log_softmax(rule: RuleInput, em: Emitter) -> bool:
    """LogSoftmax-13 = (X - max) - log(sum(exp(X - max))) along ``axis``."""
    if rule.opset < 13:
        return False
    axis = rule.attrs["axis"]
    x = rule.node.inputs[0]
    peak = em.emit("ReduceMax", [x], opset=13, axes=(axis,), keepdims=1)
    shifted = em.emit("Sub", [x, peak], opset=14)
    total = em.emit("ReduceSum", [em.emit("Exp", [shifted], opset=13)], opset=11, axes=(axis,), keepdims=1)
    em.emit("Sub", [shifted, em.emit("Log", [total], opset=13)], opset=14, out=rule.node.outputs[0])
    return True


def lower_hard_sigmoid(rule: RuleInput, em: Emitter) -> bool:
    """HardSigmoid = clip(alpha * X + beta, 0, 1); HardSwish = X * HardSigmoid(1/6, 1/2)."""
    if rule.types[0] is None:
        return False
    dtype = rule.types[0].dtype.numpy  # type: ignore[union-attr]
    alpha, beta = (rule.attrs["alpha"], rule.attrs["beta"]) if rule.node.op == "HardSigmoid" else (1 / 6, 0.5)
    x = rule.node.inputs[0]
    lin = em.emit("Add", [em.emit("Mul", [x, em.const(alpha, dtype)], opset=14), em.const(beta, dtype)], opset=14)
    final = rule.node.outputs[0]
    clipped = em.emit("Clip", [lin, em.const(0, dtype), em.const(1, dtype)], opset=13,
                      out=final if rule.node.op == "HardSigmoid" else None)
    if rule.node.op == "HardSwish":
        em.emit("Mul", [x, clipped], opset=14, out=final)
    return True


def lower_reduce_norm(rule: RuleInput, em: Emitter) -> bool:
    """ReduceL1 = sum|X|, ReduceL2 = sqrt(sum X^2), ReduceSumSquare = sum X^2,
    ReduceLogSum = log(sum X), over the same axes with the same keepdims."""
    if rule.opset >= 18 or rule.attrs.get("noop_with_empty_axes", 0):
        return False
    x = rule.node.inputs[0]
    kw = {"keepdims": rule.attrs["keepdims"]}
    if rule.attrs.get("axes") is not None:
        kw["axes"] = tuple(rule.attrs["axes"])
    op, final = rule.node.op, rule.node.outputs[0]
    if op == "ReduceL1":
        em.emit("ReduceSum", [em.emit("Abs", [x], opset=13)], opset=11, out=final, **kw)
    elif op in ("ReduceL2", "ReduceSumSquare"):
        total = em.emit("ReduceSum", [em.emit("Mul", [x, x], opset=14)], opset=11,
                        out=final if op == "ReduceSumSquare" else None, **kw)
        if op == "ReduceL2":
            em.emit("Sqrt", [total], opset=13, out=final)
    elif op == "ReduceLogSum":
        em.emit("Log", [em.emit("ReduceSum", [x], opset=11, **kw)], opset=13, out=final)
    else:
        return False
    return True


MOVEMENT = ("Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice",
            "Expand", "Dropout")

RULES: Mapping[tuple[str, str], Rule] = {
    **{("", op): lower_movement for op in MOVEMENT},
    ("", "Concat"): lower_concat,
    ("", "Gemm"): lower_gemm,
    ("", "GlobalAveragePool"): lower_global_pool("ReduceMean"),
    ("", "GlobalMaxPool"): lower_global_pool("ReduceMax"),
    ("", "BatchNormalization"): lower_batchnorm,
    ("", "Sum"): lower_variadic("Add"),
    ("", "Mean"): lower_variadic("Add"),
    ("", "Gelu"): lower_gelu,
    ("", "LogSoftmax"): lower_log_softmax,
    ("", "HardSigmoid"): lower_hard_sigmoid,
    ("", "HardSwish"): lower_hard_sigmoid,
    **{("", op): lower_reduce_norm for op in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum")},
}
"""(domain, op) -> lowering rule."""


WIDENED = frozenset({("", op) for op in ("Sum", "Mean", "Gelu", "LogSoftmax", "HardSigmoid",
                                          "HardSwish", "BatchNormalization", "Gemm", "ReduceL1",
                                          "ReduceL2", "ReduceSumSquare", "ReduceLogSum")})
"""Ops whose reference computes float16 and bfloat16 in float32 and rounds once. Their rule's
chain would round to the narrow type after every step (Sum's and Mean's Adds, Mean's Div,
HardSigmoid's Mul, Add and Clip: beyond float16 tolerance on the conformance samples; Sum's
lost all of a cancelling total, 2048 + 1 + 1 -> 2048), so for those dtypes the
rule runs on float32 Casts of the inputs and the outputs are Cast back: one rounding, as the op."""
NARROW_FLOATS = (DType.float16, DType.bfloat16)


def _widen(node: Node, types: tuple[TensorType | None, ...], values: tuple[np.ndarray | None, ...],
           narrow: DType, em: Emitter) -> tuple[Node, tuple[TensorType | None, ...],
                                                tuple[np.ndarray | None, ...], list[tuple[str, str, DType]]]:
    """``node`` reading float32 Casts of its narrow-float inputs (emitted into ``em``) and
    writing temporaries; returns it with the widened types and constant values and the
    (temporary, output, dtype) Casts back to ``narrow``, the first input's dtype (every op of
    WIDENED returns that dtype), that the caller emits after the rule."""
    inputs, wide_types, wide_values = [], [], []
    for name, t, v in zip(node.inputs, types, values, strict=True):
        if name and t is not None and t.dtype in NARROW_FLOATS:
            name = em.emit("Cast", [name], opset=13, to=DType.float32.value)
            t = TensorType(DType.float32, t.shape)
            v = None if v is None else v.astype(np.float32)
        inputs.append(name)
        wide_types.append(t)
        wide_values.append(v)
    outputs = tuple(em.name("wide") if out else "" for out in node.outputs)
    back = [(tmp, out, narrow) for tmp, out in zip(outputs, node.outputs, strict=True) if out]
    return (dataclasses.replace(node, inputs=tuple(inputs), outputs=outputs), tuple(wide_types),
            tuple(wide_values), back)


def lower_node(node: Node, opset: int, registry: OpRegistry, types: Mapping[str, ValueType | None],
               constants: Mapping[str, np.ndarray]) -> tuple[list[Node], dict[str, np.ndarray]] | None:
    """Apply the node's rule; None when there is no rule or it does not apply here. Ops of
    :data:`WIDENED` with float16/bfloat16 inputs run their rule in float32 (see there)."""
    rule = RULES.get((node.domain, node.op))
    if rule is None or any(node.subgraphs()):
        return None
    if node.op == "Dropout" and len([o for o in node.outputs if o]) > 1:
        return None
    opdef = registry.find(node.domain, node.op, opset)
    if opdef is None:
        return None
    tensor_types = tuple(t if isinstance(t, TensorType) else None
                         for t in (types.get(n) if n else None for n in node.inputs))
    values = tuple(constants.get(n) if n else None for n in node.inputs)
    em = Emitter(node)
    back: list[tuple[str, str, DType]] = []
    first = tensor_types[0] if tensor_types else None
    if (node.domain, node.op) in WIDENED and first is not None and first.dtype in NARROW_FLOATS:
        node, tensor_types, values, back = _widen(node, tensor_types, values, first.dtype, em)
    try:
        applied = rule(RuleInput(node, opdef, opdef.bind_attrs(node.attrs), tensor_types, values,
                                 opset), em)
    except RefmnnError:
        raise
    except Exception as exc:  # a rule runs the op's reference (lower_movement): bad shapes
        raise ShapeError(f"{node_with_types(node, opset, tensor_types)} cannot be planned: "
                         f"{type(exc).__name__}: {exc}") from exc
    if not applied:
        return None
    for tmp, out, dtype in back:
        em.emit("Cast", [tmp], opset=13, to=dtype.value, out=out)
    return em.nodes, em.constants


def lower_graph(graph: Graph, registry: OpRegistry, types: Mapping[str, ValueType | None],
                constants: Mapping[str, np.ndarray], wants: Callable[[Node, int], bool]) -> Graph:
    """Rewrite every node for which ``wants(node, opset)`` is true and a rule applies; rules may
    emit non-core ops (Gemm emits Transpose), which are lowered in turn until nothing changes."""
    nodes = list(graph.nodes)
    initializers = dict(graph.initializers)
    opsets = dict(graph.opsets)
    for _ in range(4):
        changed = False
        result: list[Node] = []
        known = {**initializers, **constants}  # a rule sees every initializer (a Gemm weight)
        for node in nodes:
            opset = graph.opset_of(node)
            lowered = lower_node(node, opset, registry, types, known) if wants(node, opset) else None
            if lowered is None:
                result.append(node)
                continue
            result.extend(lowered[0])
            initializers.update(lowered[1])
            changed = True
        nodes = result
        if not changed:
            break
        if any(n.domain == RASTER_DOMAIN for n in nodes):
            opsets.setdefault(RASTER_DOMAIN, 1)
        from refmnn.schedule.shapes import infer_types

        inferred = infer_types(graph.replace(nodes=tuple(nodes), initializers=initializers, opsets=opsets),
                               {v.name: types.get(v.name) for v in graph.inputs}, registry)
        types, constants = inferred.types, inferred.constants
    return graph.replace(nodes=tuple(nodes), initializers=initializers, opsets=opsets)


def fold_constants(graph: Graph, constants: Mapping[str, np.ndarray], keep: Callable[[Node], bool]) -> Graph:
    """Replace every node whose outputs were all computed at plan time by initializers
    (shape-computation chains at known shapes, Constant nodes), unless ``keep(node)``."""
    nodes: list[Node] = []
    initializers = dict(graph.initializers)
    graph_outputs = {v.name for v in graph.outputs}
    for node in graph.nodes:
        outputs = [o for o in node.outputs if o]
        foldable = outputs and all(o in constants and o not in graph_outputs for o in outputs)
        if foldable and not keep(node):
            for name in outputs:
                initializers[name] = constants[name]
            continue
        nodes.append(node)
    return graph.replace(nodes=tuple(nodes), initializers=initializers)
