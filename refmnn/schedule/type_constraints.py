"""The ONNX schemas' type constraints, checked on every node of an ONNX domain during inference.

refmnn's shape rules state each output's dtype but do not repeat the schemas' lists of allowed
input types; this module reads them from ``onnx.defs`` (the schema of the op at the node's
opset) and checks the inferred input types against them:

* each input's type must be one its formal parameter allows (``T``'s list, or a fixed type
  such as ``tensor(int64)``);
* inputs bound to one type parameter must share one type (Add's A and B), except the members
  of a heterogeneous variadic tail (Loop's carried values).

A node that breaks them -- float indices for ScatterElements, a float shape for Expand, a
non-bool condition for Where, an int64 tensor where a float is required -- stops at inference
with a :class:`ShapeError` naming the node, op, opset, the input and the types allowed, where
otherwise the reference might convert the value and answer a question the model never asked.
onnxruntime refuses such nodes too (it has no kernel for them). Inputs whose type is unknown are
not checked, nor ops outside the ONNX domains or without a schema in the installed onnx.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from refmnn.errors import ShapeError, node_label
from refmnn.graph import Node, OptionalType, SequenceType, TensorType, ValueType

ONNX_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


@dataclass(frozen=True, slots=True)
class Param:
    """One formal input of a schema: its type (a parameter name or a fixed type string), the
    type strings it allows and whether it is a variadic tail / homogeneous."""

    name: str
    type_str: str
    allowed: frozenset[str]
    variadic: bool
    homogeneous: bool
    is_type_param: bool


@functools.lru_cache(maxsize=4096)
def signature(domain: str, op: str, opset: int) -> tuple[Param, ...] | None:
    """The formal inputs of ``op``'s schema at ``opset`` (None: onnx has no schema for it)."""
    import onnx.defs

    try:
        schema = onnx.defs.get_schema(op, opset, "" if domain == "ai.onnx" else domain)
    except onnx.defs.SchemaError:
        return None
    constraints = {c.type_param_str: frozenset(c.allowed_type_strs)
                   for c in schema.type_constraints}
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    return tuple(Param(p.name, p.type_str, constraints.get(p.type_str, frozenset({p.type_str})),
                       p.option == variadic, p.is_homogeneous, p.type_str in constraints)
                 for p in schema.inputs)


def type_string(value_type: ValueType | None) -> str | None:
    """The schema's spelling of a value type (``tensor(float)``, ``seq(tensor(int64))``), or
    None when it is not fully known."""
    if isinstance(value_type, TensorType):
        dtype = value_type.dtype
        return None if dtype is None else f"tensor({_element_name(dtype.value)})"
    if isinstance(value_type, SequenceType | OptionalType):
        inner = type_string(value_type.elem)
        kind = "seq" if isinstance(value_type, SequenceType) else "optional"
        return None if inner is None else f"{kind}({inner})"
    return None


@functools.lru_cache(maxsize=64)
def _element_name(code: int) -> str:
    import onnx

    return onnx.TensorProto.DataType.Name(int(code)).lower()


def check_input_types(node: Node, opset: int, in_types: list[ValueType | None]) -> None:
    """Raise a ShapeError when ``node``'s inputs break its ONNX schema's type constraints."""
    if node.domain not in ONNX_DOMAINS:
        return
    params = signature(node.domain, node.op, opset)
    if not params:
        return
    bound: dict[str, tuple[str, int]] = {}
    for index, value_type in enumerate(in_types):
        if index >= len(params) and not params[-1].variadic:
            break  # more inputs than the schema has: the ONNX checker and the rules say so
        param = params[min(index, len(params) - 1)]
        text = type_string(value_type)
        if text is None:
            continue
        if text not in param.allowed:
            raise ShapeError(f"{node_label(node, opset)}: input #{index} ({param.name}) is {text}; "
                             f"{param.type_str} allows {', '.join(sorted(param.allowed))}")
        if param.is_type_param and (param.homogeneous or not param.variadic):
            first, at = bound.setdefault(param.type_str, (text, index))
            if first != text:
                raise ShapeError(f"{node_label(node, opset)}: inputs #{at} and #{index} share type "
                                 f"{param.type_str} but are {first} and {text}")

