"""In-place execution on the reference: an op that declares :attr:`OpDef.in_place` computes the
same values when its output *is* one of those inputs, and the planner hands an output an
input's bytes only where nothing reads them afterwards."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from refmnn_conformance.cases import ALL_CASES

import refmnn
from refmnn.ops import default_registry
from refmnn.ops._schema import OpDef
from tests.helpers import make_model

F = TensorProto.FLOAT
REGISTRY = default_registry()
IN_PLACE = sorted((d for d in REGISTRY if d.in_place), key=lambda d: (d.domain, d.name, d.since))


def test_the_ops_that_claim_in_place_are_the_elementwise_ones_with_out():
    assert {d.name for d in IN_PLACE} == {"Add", "Sub", "Mul", "Div", "Erf", "Clip", "Softmax",
                                          "LayerNormalization"}
    assert all(d.writes_out for d in IN_PLACE)


def _samples(opdef: OpDef):
    for case in ALL_CASES:
        if (case.domain, case.op) != (opdef.domain, opdef.name) or \
                REGISTRY.find(case.domain, case.op, case.resolved_opset) is not opdef:
            continue
        for dtype in case.dtypes:
            for sample in case.make_samples(dtype):
                yield sample


@pytest.mark.parametrize("opdef", IN_PLACE, ids=lambda d: f"{d.name}-{d.since}")
def test_an_in_place_op_computes_the_same_values_into_its_own_input(opdef):
    """On every conformance sample of the op, for every input it may write over that has the
    result's shape and dtype: the reference run with ``out`` being (a copy of) that input gives
    byte for byte what it gives out of place. At least one sample per op really writes in place
    (returns the input array), so the check cannot pass by never sharing."""
    written = 0
    for sample in _samples(opdef):
        attrs = opdef.bind_attrs(sample.attrs)
        want = opdef.reference(*sample.inputs, **attrs)
        want = want[0] if isinstance(want, tuple) else want
        for k in opdef.in_place:
            x = sample.inputs[k] if k < len(sample.inputs) else None
            if x is None or x.shape != want.shape or x.dtype != want.dtype or \
                    any(other is x for j, other in enumerate(sample.inputs) if j != k):
                continue
            inputs = list(sample.inputs)
            inputs[k] = shared = np.array(x, copy=True)
            got = opdef.reference(*inputs, **attrs, out=shared)
            got = got[0] if isinstance(got, tuple) else got
            assert (got.dtype, got.shape, got.tobytes()) == (want.dtype, want.shape,
                                                             want.tobytes()), sample.name
            written += got is shared
    assert written, f"no sample of {opdef.name}-{opdef.since} wrote over its input"


def _plan(model, feeds):
    session = refmnn.Session(model)
    result = session.run(feeds)
    return session._last.plan, result


def _in_place_steps(plan) -> dict[str, str]:
    """{node name: the input it writes over}, from the steps' reasons."""
    return {step.node.name: step.reason.rsplit("in place of ", 1)[1]
            for step in plan.steps if "in place of " in getattr(step, "reason", "")}


def _chain(n: int) -> tuple:
    """x [256] -> t = Sigmoid(x) -> u1 = t + c -> ... -> y = u(n-1) + c (n Adds)."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["t"], name="sig")]
    names = ["t", *(f"u{i}" for i in range(1, n)), "y"]
    for i in range(n):
        nodes.append(helper.make_node("Add", [names[i], "c"], [names[i + 1]], name=f"add{i}"))
    c = helper.make_tensor("c", F, [256], np.linspace(-1, 1, 256).astype(np.float32))
    return make_model(nodes, [("x", F, [256])], [("y", F, [256])], initializers=[c]), names


def test_a_chain_of_adds_works_in_one_buffer():
    model, names = _chain(5)
    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    plan, result = _plan(model, {"x": x})
    shared = _in_place_steps(plan)
    assert shared == {f"add{i}": names[i] for i in range(5)}
    assert len({plan.slots[name].offset for name in names}) == 1
    # the graph input and the chain's one buffer: 2 KiB, where ping-ponging needs 3
    assert plan.arenas["reference"].peak == 2 * 1024
    c = np.linspace(-1, 1, 256).astype(np.float32)
    want = 1 / (1 + np.exp(-x))
    for _ in range(5):
        want = want + c
    np.testing.assert_allclose(result["y"], want, rtol=1e-6)
    assert "in place of t" in refmnn.Session(model).explain({"x": [256]})


def _run_both(model, feeds):
    """The outputs with the plan's sharing and on the reference without an arena."""
    plan, result = _plan(model, feeds)
    plain = refmnn.Session(model, arena=False).run(feeds)
    for name, value in plain.items():
        np.testing.assert_array_equal(result[name], value)
    return plan


@pytest.mark.parametrize("nodes, expect", [
    # t is read again after u: u may not take its bytes; y takes u's (u dies at y)
    ([("Add", ["t", "c"], "u"), ("Mul", ["u", "t"], "y")], {"n1": "u"}),
    # the graph input is never written over
    ([("Add", ["x", "c"], "y")], {}),
    # the same value twice: not in place
    ([("Add", ["t", "t"], "y")], {}),
    # r is a reshape of t (it shares t's bytes) and is read after u: t's bytes stay
    ([("Reshape", ["t", "shape"], "r"), ("Add", ["t", "c"], "u"), ("Mul", ["u", "r"], "y")],
     {"n2": "u"}),
    # r shares t's bytes and is the other input of the same node
    ([("Reshape", ["t", "shape"], "r"), ("Add", ["t", "r"], "y")], {}),
])
def test_an_output_takes_an_input_s_bytes_only_when_nothing_reads_them_after(nodes, expect):
    built = [helper.make_node("Sigmoid", ["x"], ["t"], name="sig")]
    built += [helper.make_node(op, ins, [out], name=f"n{i}")
              for i, (op, ins, out) in enumerate(nodes)]
    inits = [helper.make_tensor("c", F, [4, 6], np.arange(24, dtype=np.float32) / 7),
             helper.make_tensor("shape", TensorProto.INT64, [2], [4, 6])]
    model = make_model(built, [("x", F, [4, 6])], [("y", F, [4, 6])], initializers=inits)
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    plan = _run_both(model, {"x": x})
    assert _in_place_steps(plan) == expect


def test_a_callback_sees_the_inputs_a_step_wrote_over():
    model, names = _chain(2)
    x = np.random.default_rng(2).standard_normal(256).astype(np.float32)
    seen = {}
    refmnn.Session(model).run({"x": x}, callback=lambda name, op, ins, outs: seen.update(
        {name: (ins, outs)}))
    np.testing.assert_array_equal(seen["add0"][0][0], seen["sig"][1][0])
    np.testing.assert_array_equal(seen["add1"][0][0], seen["add0"][1][0])


def test_layer_normalization_and_softmax_write_over_their_input_in_a_model():
    nodes = [helper.make_node("Sigmoid", ["x"], ["t"], name="sig"),
             helper.make_node("LayerNormalization", ["t", "s", "b"], ["n"], name="ln", axis=-1),
             helper.make_node("Softmax", ["n"], ["y"], name="sm", axis=-1)]
    inits = [helper.make_tensor("s", F, [6], np.linspace(0.5, 2, 6).astype(np.float32)),
             helper.make_tensor("b", F, [6], np.linspace(-1, 1, 6).astype(np.float32))]
    model = make_model(nodes, [("x", F, [4, 6])], [("y", F, [4, 6])], initializers=inits)
    x = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
    plan = _run_both(model, {"x": x})
    assert _in_place_steps(plan) == {"ln": "t", "sm": "n"}
