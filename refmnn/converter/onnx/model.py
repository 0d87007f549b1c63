"""ONNX ModelProto to a refmnn :class:`~refmnn.graph.Graph`.

Steps: validate with ``onnx.checker`` and parse (path, bytes or ModelProto) -> inline
model-local functions, and the function bodies of ops refmnn does not define itself -> convert
graph, subgraphs, attributes and initializers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.message import DecodeError

from refmnn.errors import ModelError
from refmnn.graph import Graph, Node, TensorType, Value
from refmnn.converter.onnx.functions import inline_nodes
from refmnn.converter.onnx.tensors import sparse_to_array, to_array, to_type
from refmnn.ops.registry import OpRegistry

Source = str | os.PathLike[str] | bytes | onnx.ModelProto


def read_model(source: Source, check: bool = False) -> tuple[onnx.ModelProto, str | None]:
    """Parse a model and return it with the folder its external data is read from; with
    ``check``, validated by the ONNX checker first (a failure is a :class:`ModelError`).

    A file or bytes are checked as the bytes already read, before they are parsed here:
    ``check_model(path)`` would read and parse the file once more (BERT-base, 435 MB: 1.07 s
    against 0.26 s for the bytes), and checking the parsed ModelProto serializes it again (1.48
    s), a third copy of the weights in memory. A model whose tensors live in external files
    fails the bytes check (the checker looks for them beside the working directory), so a
    failed check of a file is repeated with its path, which resolves them against its folder.
    """
    if isinstance(source, onnx.ModelProto):
        if check:
            validate(source)
        return source, None
    if isinstance(source, bytes | bytearray | memoryview):
        data, where, path = bytes(source), "model", None
    else:
        path = Path(source)
        if not path.exists():
            raise ModelError(f"model file {str(path)!r} does not exist")
        if path.is_dir():
            raise ModelError(f"{str(path)!r} is a folder, not a model file")
        data, where = path.read_bytes(), str(source)
    problem = _checker_problem(data) if check and data else None
    model = _parse(data, "<bytes>" if path is None else str(path))
    del data  # the parsed model holds everything now
    if problem is not None and path is not None:
        problem = _checker_problem(str(path))
    _raise_problem(problem, where)
    return model, None if path is None else str(path.parent)


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    if not data:
        raise ModelError(f"{where}: the file is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelError(f"{where}: not a valid ONNX model (protobuf parse failed: {exc}); "
                         "the file may be truncated or corrupted") from exc
    if not model.HasField("graph"):
        raise ModelError(f"{where}: the data parsed but holds no graph; it is not an ONNX model "
                         "or it is truncated")
    return model


def validate(model: onnx.ModelProto, where: str = "model", path: str | None = None) -> None:
    """Run the ONNX checker; its failure becomes a ModelError with the checker's message.

    With ``path`` the checker reads the file itself, so external data is checked relative to the
    model's folder (and models over 2 GB can be checked at all).
    """
    _raise_problem(_checker_problem(model if path is None else path), where)


def _checker_problem(model: onnx.ModelProto | bytes | str) -> str | None:
    """What the ONNX checker finds wrong with a model (as a ModelProto, its bytes or its path,
    which resolves external data against the model's folder), or None."""
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid model"
    except Exception as exc:  # the checker raises plain errors on some malformed protos
        return str(exc)
    return None


def _raise_problem(problem: str | None, where: str) -> None:
    if problem is not None:
        raise ModelError(f"{where} fails ONNX validation: {problem}")


TRIM_BYTES = 64 << 20
"""Weights from which a load hands the freed pages back (:func:`_return_freed_memory`): the
trim walks the whole C heap, ~8-12 ms in a process with a fragmented one (a test run), which
tripled the load of a one-node model (5 -> 17 ms) for nothing worth returning."""


def _return_freed_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing where
    the C library has none). Parsing keeps the weights in protobuf's buffers until the
    conversion has copied them into arrays; once those are freed, glibc keeps most of their
    pages for later allocations. BERT-base (435 MB of weights) loaded by a Session: 792 MB more
    resident than before loading without the trim, 429 MB with it (the trim takes ~0.02 s)."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    opsets: dict[str, int] = {}
    for entry in model.opset_import:
        domain = "" if entry.domain == "ai.onnx" else entry.domain
        opsets[domain] = int(entry.version)
    if model.ir_version and model.ir_version < 3 and "" not in opsets:
        opsets[""] = 1
    return opsets


def _schema_function(node: onnx.NodeProto, opsets: Mapping[str, int]) -> onnx.FunctionProto | None:
    domain = "" if node.domain == "ai.onnx" else node.domain
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
    except onnx.defs.SchemaError:
        return None
    if schema.has_function:
        return schema.function_body
    return None


def _inline(model: onnx.ModelProto, registry: OpRegistry, opsets: dict[str, int]) -> list[onnx.NodeProto]:
    local = {(f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions}
    for function in model.functions:
        for entry in function.opset_import:
            opsets.setdefault("" if entry.domain == "ai.onnx" else entry.domain, int(entry.version))

    def lookup(node: onnx.NodeProto) -> onnx.FunctionProto | None:
        _text_field(node.op_type, f"the op type of node {node.name!r}")
        _text_field(node.domain, f"the domain of node {node.name!r} ({node.op_type})")
        key = (node.domain, node.op_type, getattr(node, "overload", ""))
        if key in local:
            return local[key]
        domain = "" if node.domain == "ai.onnx" else node.domain
        if registry.find(domain, node.op_type, opsets.get(domain, 1)) is not None:
            return None
        return _schema_function(node, opsets)

    return inline_nodes(list(model.graph.node), lookup)


def convert_attribute(attr: onnx.AttributeProto, ctx: _Ctx) -> Any:
    """AttributeProto -> Python value (tuples for lists, str for strings, arrays, graphs)."""
    kind = attr.type
    A = onnx.AttributeProto
    if kind == A.INT:
        return int(attr.i)
    if kind == A.FLOAT:
        return float(attr.f)
    if kind == A.STRING:
        return _text(attr.s)
    if kind == A.INTS:
        return tuple(int(v) for v in attr.ints)
    if kind == A.FLOATS:
        return tuple(float(v) for v in attr.floats)
    if kind == A.STRINGS:
        return tuple(_text(v) for v in attr.strings)
    if kind == A.TENSOR:
        return to_array(attr.t, ctx.base_dir)
    if kind == A.TENSORS:
        return tuple(to_array(t, ctx.base_dir) for t in attr.tensors)
    if kind == A.SPARSE_TENSOR:
        return sparse_to_array(attr.sparse_tensor, ctx.base_dir)
    if kind == A.SPARSE_TENSORS:
        return tuple(sparse_to_array(t, ctx.base_dir) for t in attr.sparse_tensors)
    if kind == A.GRAPH:
        return convert_graph(attr.g, ctx)
    if kind == A.GRAPHS:
        return tuple(convert_graph(g, ctx) for g in attr.graphs)
    if kind == A.TYPE_PROTO:
        return to_type(attr.tp)
    if kind == A.TYPE_PROTOS:
        return tuple(to_type(t) for t in attr.type_protos)
    raise ModelError(f"attribute {attr.name!r} has an unknown type code {kind}")


def _text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


class _Ctx:
    def __init__(self, base_dir: str | None, opsets: Mapping[str, int], ir_version: int) -> None:
        self.base_dir = base_dir
        self.opsets = opsets
        self.ir_version = ir_version
        self.counter = 0


def convert_graph(proto: onnx.GraphProto, ctx: _Ctx,
                  node_protos: Sequence[onnx.NodeProto] | None = None) -> Graph:
    """Convert a GraphProto (the main graph or a subgraph) with its initializers;
    ``node_protos`` (the main graph's, functions inlined) in place of its own nodes."""
    initializers = {_text_field(t.name, "an initializer's name"): to_array(t, ctx.base_dir)
                    for t in proto.initializer}
    for sparse in proto.sparse_initializer:
        initializers[sparse.values.name] = sparse_to_array(sparse, ctx.base_dir)
    inputs = tuple(_value(v) for v in proto.input if v.name not in initializers)
    defaults = tuple(_value(v) for v in proto.input if v.name in initializers)
    outputs = tuple(_value(v) for v in proto.output)
    value_info = {v.name: _value(v).type for v in proto.value_info if v.type.WhichOneof("value")}
    nodes = []
    used_names: set[str] = set()
    for index, n in enumerate(proto.node if node_protos is None else node_protos):
        op_type = _text_field(n.op_type, f"the op type of node #{index}")
        name = _text_field(n.name, f"the name of node #{index} ({op_type})") or \
            f"{op_type}_{index}"
        while name in used_names:
            ctx.counter += 1
            name = f"{name}_{ctx.counter}"
        used_names.add(name)
        where = f"node {name!r} ({op_type})"
        try:
            attrs = {a.name: convert_attribute(a, ctx) for a in n.attribute}
        except ModelError as exc:
            raise ModelError(f"{where}: {exc}") from exc
        nodes.append(Node(name=name, op=op_type, domain=_text_field(n.domain, f"{where}'s domain"),
                          inputs=tuple(_text_field(x, f"an input name of {where}")
                                       for x in n.input),
                          outputs=tuple(_text_field(x, f"an output name of {where}")
                                        for x in n.output), attrs=attrs))
    return Graph(nodes=tuple(nodes), inputs=inputs, outputs=outputs, initializers=initializers,
                 defaults=defaults, opsets=dict(ctx.opsets), value_info=value_info,
                 name=proto.name or "graph", ir_version=ctx.ir_version)


def _text_field(value: str | bytes, what: str) -> str:
    """A string field of the proto: protobuf hands back bytes where it is not valid UTF-8."""
    if isinstance(value, str):
        return value
    raise ModelError(f"{what} is not valid UTF-8: {value!r}")


def _value(proto: onnx.ValueInfoProto) -> Value:
    """A graph input, output or value_info entry as a Value, its type converted."""
    name = _text_field(proto.name, "a value's name")
    try:
        return Value(name, to_type(proto.type))
    except ModelError as exc:
        raise ModelError(f"value {name!r}: {exc}") from exc


def from_onnx(source: Source, registry: OpRegistry, *, check: bool = True) -> Graph:
    """Load an ONNX model as a Graph (see the module docstring for the steps)."""
    model, base_dir = read_model(source, check)
    where = str(source) if isinstance(source, str | os.PathLike) else "model"
    opsets = _opsets(model)
    nodes = _inline(model, registry, opsets)
    ctx = _Ctx(base_dir, opsets, int(model.ir_version))
    graph = convert_graph(model.graph, ctx, nodes)
    del model, nodes  # the weights are arrays of the graph now
    if sum(a.nbytes for a in graph.initializers.values()) >= TRIM_BYTES:
        _return_freed_memory()
    for value in graph.inputs:
        if value.type is None:
            raise ModelError(f"{where}: graph input {value.name!r} has no type")
    return graph


def input_type(value: Value) -> TensorType | None:
    """The declared tensor type of a graph input, if it is a tensor."""
    return value.type if isinstance(value.type, TensorType) else None
