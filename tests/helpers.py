"""Small model builders shared by the machinery tests."""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import TensorProto, helper


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[tuple[str, int, Sequence[int | str | None] | None]],
    outputs: Sequence[tuple[str, int, Sequence[int | str | None] | None]],
    *,
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
    ir_version: int | None = None,
    extra_opsets: Sequence[tuple[str, int]] = (),
    functions: Sequence[onnx.FunctionProto] = (),
) -> onnx.ModelProto:
    """A model from nodes and (name, elem_type, shape) input/output declarations."""
    graph = helper.make_graph(
        list(nodes),
        "test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(initializers),
    )
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def add_relu_model(shape: Sequence[int | str | None] = (2, 3)) -> onnx.ModelProto:
    """Y = Relu(A + B): two nodes, named, with float32 inputs of the given shape."""
    nodes = [
        helper.make_node("Add", ["A", "B"], ["S"], name="add0"),
        helper.make_node("Relu", ["S"], ["Y"], name="relu0"),
    ]
    f = TensorProto.FLOAT
    return make_model(nodes, [("A", f, shape), ("B", f, shape)], [("Y", f, shape)])
