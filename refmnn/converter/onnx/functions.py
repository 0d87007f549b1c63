"""Inline function calls: model-local functions and ops defined by an ONNX function body.

A call node is replaced by the function's nodes. Formal inputs and outputs are renamed to the
call's actual names, every internal value gets a unique prefix, and attributes that refer to the
caller's attributes (``ref_attr_name``) take the caller's value or the function's default.
Works on protos, before conversion, so nested subgraphs are renamed too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import onnx

from refmnn.errors import ModelError

FunctionKey = tuple[str, str, str]  # (domain, name, overload)
MAX_DEPTH = 32


def _rename_graph(graph: onnx.GraphProto, rename: Callable[[str], str]) -> None:
    """Rename the names a subgraph reads from its enclosing scope (in place)."""
    local = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    local |= {o for n in graph.node for o in n.output}
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name and name not in local:
                node.input[i] = rename(name)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                _rename_graph(sub, lambda n, local=local: n if n in local else rename(n))
    for out in graph.output:
        if out.name not in local:
            out.name = rename(out.name)


def _bind_attributes(
    node: onnx.NodeProto, caller: Mapping[str, onnx.AttributeProto],
    defaults: Mapping[str, onnx.AttributeProto],
) -> None:
    kept = []
    for attr in node.attribute:
        if attr.ref_attr_name:
            source = caller.get(attr.ref_attr_name) or defaults.get(attr.ref_attr_name)
            if source is None:
                continue
            bound = onnx.AttributeProto()
            bound.CopyFrom(source)
            bound.name = attr.name
            kept.append(bound)
        else:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                for inner in sub.node:
                    _bind_attributes(inner, caller, defaults)
            kept.append(attr)
    del node.attribute[:]
    node.attribute.extend(kept)


def expand_call(call: onnx.NodeProto, function: onnx.FunctionProto, prefix: str) -> list[onnx.NodeProto]:
    """The body of ``function`` instantiated for one call node."""
    mapping: dict[str, str] = {}
    for formal, actual in zip(function.input, call.input, strict=False):
        mapping[formal] = actual
    for formal in function.input[len(call.input):]:
        mapping[formal] = ""
    for formal, actual in zip(function.output, call.output, strict=False):
        mapping[formal] = actual

    def rename(name: str) -> str:
        if not name:
            return ""
        if name not in mapping:
            mapping[name] = f"{prefix}/{name}"
        return mapping[name]

    caller = {a.name: a for a in call.attribute}
    defaults = {a.name: a for a in function.attribute_proto}
    body = []
    for index, original in enumerate(function.node):
        node = onnx.NodeProto()
        node.CopyFrom(original)
        node.name = f"{prefix}/{original.name or original.op_type + str(index)}"
        for i, name in enumerate(node.input):
            node.input[i] = rename(name)
        for i, name in enumerate(node.output):
            node.output[i] = rename(name)
        _bind_attributes(node, caller, defaults)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                local = {v.name for v in sub.input} | {o for n in sub.node for o in n.output}
                _rename_graph(sub, lambda n, local=local: n if n in local else rename(n))
        body.append(node)
    return body


def inline_nodes(
    nodes: list[onnx.NodeProto],
    lookup: Callable[[onnx.NodeProto], onnx.FunctionProto | None],
    depth: int = 0,
) -> list[onnx.NodeProto]:
    """Replace every call for which ``lookup`` returns a function by its body, recursively.

    Subgraph attributes are processed too.
    """
    if depth > MAX_DEPTH:
        raise ModelError(f"function calls nest deeper than {MAX_DEPTH} levels (recursive function?)")
    result: list[onnx.NodeProto] = []
    for index, node in enumerate(nodes):
        function = lookup(node)
        if function is None:
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    inner = inline_nodes(list(sub.node), lookup, depth + 1)
                    del sub.node[:]
                    sub.node.extend(inner)
            result.append(node)
            continue
        prefix = node.name or f"{node.op_type}_{depth}_{index}"
        body = expand_call(node, function, prefix)
        result.extend(inline_nodes(body, lookup, depth + 1))
    return result
