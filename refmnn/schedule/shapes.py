"""Shape and dtype inference over a graph: a pure function from input types to value types.

Each node's :attr:`OpDef.infer` rule is applied in topological order. Values that are small
and computable before running (initializers, Constant outputs, ``Shape`` of a static tensor, and
any cheap op whose inputs are all known) are propagated too, so rules that need an input's value
(Reshape's shape, Slice's starts, ...) see it; this is how shape-computation chains resolve.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError, ShapeError, node_label
from refmnn.graph import Graph, Node, TensorType, ValueType
from refmnn.ops._schema import InferContext, OpContext, OpDef
from refmnn.ops.registry import OpRegistry
from refmnn.schedule.type_constraints import check_input_types

FOLD_LIMIT = 4096
"""Largest number of elements a value may have to be propagated as a known constant."""

UNFOLDABLE = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                        "Bernoulli", "Multinomial", "Dropout", "If", "Loop", "Scan",
                        "SequenceMap"})


@dataclass(frozen=True, slots=True)
class Inferred:
    """The result of inference: a type per value and the values known before running."""

    types: Mapping[str, ValueType | None]
    constants: Mapping[str, np.ndarray]


def type_of_array(value: Any) -> ValueType | None:
    """The type of a runtime value (tensor arrays only; sequences are left unknown)."""
    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        try:
            dtype = DType.from_numpy(array.dtype)
        except KeyError:
            dtype = DType.string if array.dtype.kind in "US" else None
        return TensorType(dtype, tuple(int(d) for d in array.shape))
    return None


def fold_node(node: Node, opdef: OpDef, attrs: Mapping[str, Any], opset: int,
              values: list[np.ndarray | None], limit: int | None = FOLD_LIMIT
              ) -> tuple[Any, ...] | None:
    """The outputs of ``node`` by its op's reference function on the constant input
    ``values`` (``opdef.pad_inputs``'d), or None: a random op (UNFOLDABLE), another domain, a
    subgraph, an input not given or of more than ``limit`` elements (None: any size), a
    reference that refuses the inputs (the run reports real errors) or non-tensor results."""
    if node.op in UNFOLDABLE or node.domain not in ("", "ai.onnx") or any(node.subgraphs()):
        return None
    for name, value in zip(node.inputs, values, strict=False):
        if name and (value is None or not isinstance(value, np.ndarray)):
            return None
        if name and limit is not None and value.size > limit:
            return None
    try:
        if opdef.takes_context:
            result = opdef.reference(*values, ctx=OpContext(node, opset), **attrs)
        else:
            result = opdef.reference(*values, **attrs)
    except Exception:  # folding is an optimisation; the run will report real errors
        return None
    results = result if isinstance(result, tuple) else (result,)
    if not all(isinstance(r, np.ndarray | np.generic) for r in results):
        return None
    return tuple(np.asarray(r) for r in results)


def infer_types(
    graph: Graph,
    input_types: Mapping[str, ValueType | None],
    registry: OpRegistry,
    outer: Mapping[str, ValueType | None] | None = None,
) -> Inferred:
    """Infer the type of every value of ``graph`` (not descending into subgraphs).

    Raises:
        ShapeError: a rule found a contradiction; the message names node, op and opset.
    """
    types: dict[str, ValueType | None] = dict(outer or {})
    constants: dict[str, np.ndarray] = {}
    for name, array in graph.initializers.items():
        types[name] = type_of_array(array)
        if array.size <= FOLD_LIMIT:
            constants[name] = array
    types.update(input_types)
    for node in graph.nodes:
        opset = graph.opset_of(node)
        opdef = registry.find(node.domain, node.op, opset)
        in_types = [types.get(name) if name else None for name in node.inputs]
        values = [constants.get(name) if name else None for name in node.inputs]
        if opdef is not None:
            in_types, values = opdef.pad_inputs(in_types), opdef.pad_inputs(values)
        out_types: tuple[ValueType | None, ...] = (None,) * len(node.outputs)
        if opdef is not None:
            attrs = opdef.bind_attrs(node.attrs, where=f"node {node.name!r}: ")
            check_input_types(node, opset, in_types)
            ctx = InferContext(node, opset, values, in_types)
            if opdef.infer is not None:
                try:
                    result = opdef.infer(ctx, *in_types, **attrs)
                except RefmnnError:
                    raise
                except Exception as exc:
                    raise ShapeError(f"{node_label(node, opset)}: shape rule failed on input "
                                     f"types {[str(t) for t in in_types]}: "
                                     f"{type(exc).__name__}: {exc}") from exc
                out_types = result if isinstance(result, tuple) else (result,)
                _check_dims(node, opset, in_types, out_types)
            folded = _fold_value(node, opdef, attrs, opset, in_types, values)
            if folded is not None:
                for name, value in zip(node.outputs, folded, strict=False):
                    if name:
                        constants[name] = value
                out_types = tuple(type_of_array(v) for v in folded) + out_types[len(folded):]
        for index, name in enumerate(node.outputs):
            if name:
                types[name] = out_types[index] if index < len(out_types) else None
    return Inferred(types=types, constants=constants)


def _check_dims(node: Node, opset: int, in_types: list[ValueType | None],
                out_types: tuple[ValueType | None, ...]) -> None:
    """A rule's output dims must be counts (ints >= 0) or symbols: a negative one comes from
    attributes or inputs that make no sense (a negative head count, a reversed slice turned
    into a size), and would otherwise surface later as a wrong-sized buffer."""
    for index, t in enumerate(out_types):
        shape = t.shape if isinstance(t, TensorType) else None
        if shape is not None and any(isinstance(d, int) and d < 0 for d in shape):
            raise ShapeError(f"{node_label(node, opset)}: output #{index} would have the "
                             f"negative dimension(s) of {list(shape)} (inputs "
                             f"{[str(v) for v in in_types]}); check the node's attributes")


def _fold_value(node: Node, opdef: OpDef, attrs: Mapping[str, Any], opset: int,
                in_types: list[ValueType | None], values: list[np.ndarray | None]
                ) -> tuple[Any, ...] | None:
    if node.op == "Shape" and node.domain in ("", "ai.onnx"):
        source = in_types[0]
        if isinstance(source, TensorType) and source.is_static:
            # A zero-strided stand-in has the right shape and costs no memory.
            dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), source.shape,
                                                    (0,) * len(source.shape))
            try:
                return (np.asarray(opdef.reference(dummy, **attrs)),)
            except Exception:
                return None
        return None
    if node.op == "Size" and node.domain in ("", "ai.onnx"):
        source = in_types[0]
        if isinstance(source, TensorType) and source.is_static:
            return (np.array(source.numel(), dtype=np.int64),)
        return None
    return fold_node(node, opdef, attrs, opset, values)
