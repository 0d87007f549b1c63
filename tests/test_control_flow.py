"""Control flow cases the official runner cannot judge, checked element by element."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import refmnn.backend


def _node_case(name: str):
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in load_model_tests(kind="node"):
            if case.name == name:
                return case
    raise LookupError(name)


def test_loop16_seq_none_values():
    """onnx's runner crashes comparing this case's 0-d sequence elements (see the xfail);
    the values themselves must match."""
    case = _node_case("test_loop16_seq_none")
    (inputs, expected), = case.data_sets
    got = refmnn.backend.prepare(case.model).run(inputs)
    assert len(got) == len(expected)
    for got_value, want_value in zip(got, expected, strict=True):
        assert isinstance(got_value, list) and len(got_value) == len(want_value)
        for g, w in zip(got_value, want_value, strict=True):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


def _loop_after_a_chain(chain: int, trips: int):
    """``chain`` Neg nodes, then a Loop of ``trips`` whose body adds the chain's end (captured)
    and, through an If inside it, the graph input x (captured two scopes up)."""
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    nodes, prev = [], "x"
    for i in range(chain):
        nodes.append(helper.make_node("Neg", [prev], [f"h{i}"], name=f"neg{i}"))
        prev = f"h{i}"
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["b"], name="take_x")],
                               "branch", [], [helper.make_tensor_value_info("b", f, [4])])
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", prev], ["a"], name="add_end"),
         helper.make_node("If", ["cond_in"], ["bx"], name="pick", then_branch=branch,
                          else_branch=branch),
         helper.make_node("Add", ["a", "bx"], ["acc_out"], name="add_x"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", f, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", f, [4])])
    nodes.append(helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body, name="loop"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [4])],
                              [helper.make_tensor_value_info("y", f, [4])],
                              [helper.make_tensor("trips", TensorProto.INT64, [], [trips])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), prev


def test_a_subgraph_reads_only_the_outer_values_it_captures(monkeypatch):
    """Each run of a Loop body looks up the values its nodes (and nested If branches) capture,
    not the whole outer scope: the lookup downloads values held on device backends, and copying
    every value of a 200-node graph each iteration made a 300-trip Loop on OpenCL take 2.4 s."""
    from refmnn.runtime import executor

    model, end = _loop_after_a_chain(chain=30, trips=7)
    reads: list[str] = []
    lookup = executor._Values.__getitem__

    def counted(self, key):
        reads.append(key)
        return lookup(self, key)

    monkeypatch.setattr(executor._Values, "__getitem__", counted)
    x = np.arange(4, dtype=np.float32)
    y = refmnn.Session(model).run({"x": x})["y"]
    np.testing.assert_array_equal(y, x + 7 * (x + x))  # the chain's end is -x * (-1)^30 = x
    assert sorted(set(reads)) == sorted({end, "x"})
    assert len(reads) == 2 * 7  # each trip reads each captured value once


def _held_then_overwritten(holder: list) -> "onnx.ModelProto":
    """x [n] -> a = x + x; ``holder`` (nodes taking "a" to "held"); then b = x * x and a chain
    of Negs that the planner may put in a's dead bytes; finally ``y`` read from "held"."""
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), *holder[:-1],
             helper.make_node("Mul", ["x", "x"], ["b0"])]
    nodes += [helper.make_node("Neg", [f"b{i}"], [f"b{i + 1}"]) for i in range(4)]
    nodes.append(holder[-1])
    graph = helper.make_graph(  # a symbolic length: the Loop's output is then a host object
        nodes, "g", [helper.make_tensor_value_info("x", f, ["n"])],
        [helper.make_tensor_value_info("y", f, ["n"]),
         helper.make_tensor_value_info("b4", f, ["n"])],
        [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
         helper.make_tensor("true", TensorProto.BOOL, [], [True])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _zero_trip_loop():
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Neg", ["v"], ["v2"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v", f, ["n"])],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v2", f, ["n"])])
    # a Loop of no trips returns its initial value; its scan output (none here) would be empty
    return [helper.make_node("Loop", ["zero", "true", "a"], ["held"], body=body),
            helper.make_node("Identity", ["held"], ["y"])]


def _holders():
    from onnx import helper

    return {
        "sequence": [helper.make_node("SequenceConstruct", ["a"], ["held"]),
                     helper.make_node("SequenceAt", ["held", "zero"], ["y"])],
        "optional": [helper.make_node("Optional", ["a"], ["held"]),
                     helper.make_node("OptionalGetElement", ["held"], ["y"])],
        "loop": _zero_trip_loop(),
    }


def test_a_host_object_keeps_its_tensors_when_their_bytes_are_reused():
    """A sequence, an optional or a Loop of no iterations holds the tensor it was given, a
    view of arena bytes; the planner reuses those bytes once the tensor is dead, so the host
    object must hold a copy (found by tools/fuzz_graphs.py: SequenceAt returned x * x here)."""
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    for name, holder in _holders().items():
        session = refmnn.Session(_held_then_overwritten(holder))
        for intermediates in (False, True):
            got = session.run({"x": x}, intermediates=intermediates)
            np.testing.assert_array_equal(got["y"], x + x, err_msg=name)
            np.testing.assert_array_equal(got["b4"], x * x, err_msg=name)
        plan = session._last.plan
        reused = {plan.slots["a"].offset} & {plan.slots[f"b{i}"].offset for i in range(5)}
        if not reused:
            pytest.fail(f"{name}: the planner no longer reuses a's bytes; the test needs a model "
                        "that does")
