"""The channel-blocked ops (refmnn/ops/blocked.py) and the layout pass that creates them
(refmnn/schedule/blocked.py): the layout's round trip, the ops' meaning, and the pass's
choices on small graphs, whose results on the reference must stay bit for bit the graph's."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import refmnn
from refmnn.converter import load
from refmnn.errors import RefmnnError
from refmnn.ops import default_registry
from refmnn.ops.blocked import from_nc8hw8, fused_conv_nc8hw8, to_nc8hw8
from refmnn.ops.fused import fused_conv
from refmnn.schedule.optimize import optimize
from tests.helpers import make_model

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)
CONV = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
        "pads": (1, 1, 1, 1), "strides": None, "activation": "relu", "activation_alpha": 0.01,
        "activation_min": float("-inf"), "activation_max": float("inf")}


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(2, 11, 5, 4), (1, 16, 9), (1, 3, 2, 3, 4), (0, 8, 2, 2)])
def test_nc8hw8_round_trip_pads_with_zero_lanes(shape):
    x = rand(*shape)
    xb = to_nc8hw8(x)
    blocks = -(-shape[1] // 8)
    assert xb.shape == (shape[0], blocks, *shape[2:], 8) and xb.flags.c_contiguous
    assert not xb[:, -1, ..., shape[1] - 8 * (blocks - 1):].any()  # the padding lanes
    np.testing.assert_array_equal(from_nc8hw8(xb, shape[1]), x)
    if shape[0]:
        assert xb[0, 0, ..., 1].flat[0] == x[0, 1].flat[0]


def test_fused_conv_nc8hw8_is_fused_conv_reordered():
    x, w, b = rand(2, 11, 6, 5), rand(13, 11, 3, 3), rand(13)
    z = rand(2, 13, 6, 5)
    want = fused_conv.reference(x, w, b, z, **CONV)
    got = fused_conv_nc8hw8.reference(to_nc8hw8(x), w, b, to_nc8hw8(z), **CONV,
                                      input_layout="NC8HW8")
    np.testing.assert_array_equal(got, to_nc8hw8(want))
    got = fused_conv_nc8hw8.reference(x, w, b, to_nc8hw8(z), **CONV, input_layout="NCHW")
    np.testing.assert_array_equal(got, to_nc8hw8(want))


def test_from_nc8hw8_rejects_a_channel_count_its_blocks_do_not_hold():
    node = helper.make_node("FromNC8HW8", ["X"], ["Y"], name="back", domain="refmnn",
                            channels=30)
    model = make_model([node], [("X", F, (1, 3, 4, 4, 8))], [("Y", F, None)],
                       extra_opsets=[("refmnn", 1)])
    with pytest.raises(RefmnnError, match=r"back.*FromNC8HW8.*3 blocks.*30 channels need 4"):
        refmnn.Session(model, check=False).run({"X": rand(1, 3, 4, 4, 8)})


# ---------------------------------------------------------------------------------------------
# the pass


def _inverted_residual(second_output=False, residual_from_input=False):
    """A MobileNetV2-like block: stem 3 -> 16 (3x3 stride 2, Clip), expansion 1x1 16 -> 32
    (Relu), depthwise 3x3 (Clip), projection 1x1 32 -> 16 + the stem's output (or a graph
    input), then a global average pool."""
    inits = [numpy_helper.from_array(rand(*s) * 0.3, n) for n, s in (
        ("Ws", (16, 3, 3, 3)), ("Bs", (16,)), ("We", (32, 16, 1, 1)), ("Be", (32,)),
        ("Wd", (32, 1, 3, 3)), ("Bd", (32,)), ("Wp", (16, 32, 1, 1)))]
    inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
              (("lo", 0.0), ("hi", 6.0))]
    nodes = [
        helper.make_node("Conv", ["X", "Ws", "Bs"], ["s"], name="stem", strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["s", "lo", "hi"], ["s6"], name="stem_clip"),
        helper.make_node("Conv", ["s6", "We", "Be"], ["e"], name="expand"),
        helper.make_node("Relu", ["e"], ["er"], name="expand_relu"),
        helper.make_node("Conv", ["er", "Wd", "Bd"], ["d"], name="dw", group=32,
                         pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["d", "lo", "hi"], ["d6"], name="dw_clip"),
        helper.make_node("Conv", ["d6", "Wp"], ["p"], name="project"),
        helper.make_node("Add", ["p", "R" if residual_from_input else "s6"], ["a"], name="add"),
        helper.make_node("GlobalAveragePool", ["a"], ["Y"], name="pool"),
    ]
    inputs = [("X", F, (2, 3, 20, 18))] + ([("R", F, (2, 16, 10, 9))] if residual_from_input
                                           else [])
    outputs = [("Y", F, None)] + ([("d6", F, None)] if second_output else [])
    model = make_model(nodes, inputs, outputs, initializers=inits)
    feeds = {"X": rand(2, 3, 20, 18), **({"R": rand(2, 16, 10, 9)} if residual_from_input
                                         else {})}
    return model, feeds


def _optimized(model, feeds, supports=lambda domain, op: True, runs=None):
    registry = default_registry()
    graph = load(model, registry, check=False)
    types = {k: refmnn.graph.TensorType(refmnn.dtypes.DType.float32, v.shape)
             for k, v in feeds.items()}
    return graph, optimize(graph, registry, types, supports=supports, runs=runs)


def _ops(graph):
    return [(n.name, n.op, n.attrs.get("input_layout")) for n in graph.nodes]


def _same_results(model, graph, feeds):
    want = refmnn.Session(model, check=False).run(feeds)
    got = refmnn.Session(graph).run(feeds)
    assert list(got) == list(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_a_chain_goes_blocked_and_comes_back_where_something_else_reads_it():
    model, feeds = _inverted_residual(second_output=True)
    _, graph = _optimized(model, feeds)
    assert _ops(graph) == [
        ("stem", "FusedConvNC8HW8", "NCHW"),  # the stem reads NCHW, writes blocks
        ("expand", "FusedConvNC8HW8", "NC8HW8"),
        ("dw", "FusedConvNC8HW8", "NC8HW8"),
        ("dw/FromNC8HW8", "FromNC8HW8", None),  # d6 is a graph output
        ("project", "FusedConvNC8HW8", "NC8HW8"),  # the residual Z is the stem's blocks
        ("project/FromNC8HW8", "FromNC8HW8", None),  # the pool reads NCHW
        ("pool", "GlobalAveragePool", None),
    ]
    project = graph.nodes[4]
    assert project.inputs[3] == graph.nodes[0].outputs[0]
    assert graph.nodes[5].outputs == ("a",) and graph.nodes[5].attrs["channels"] == 16
    _same_results(model, graph, feeds)


def test_a_residual_in_nchw_keeps_its_node_out_of_the_chain():
    model, feeds = _inverted_residual(residual_from_input=True)
    _, graph = _optimized(model, feeds)
    assert _ops(graph)[:4] == [("stem", "FusedConvNC8HW8", "NCHW"),
                               ("expand", "FusedConvNC8HW8", "NC8HW8"),
                               ("dw", "FusedConvNC8HW8", "NC8HW8"),
                               ("dw/FromNC8HW8", "FromNC8HW8", None)]
    assert _ops(graph)[4] == ("project", "FusedConv", None)
    _same_results(model, graph, feeds)


def test_a_stem_whose_blocks_nobody_reads_stays_nchw():
    model, feeds = _inverted_residual()
    # a target that computes only stems: nothing would read their blocks
    _, graph = _optimized(model, feeds, runs=lambda spec: spec.node.op != "FusedConvNC8HW8"
                          or spec.attrs["input_layout"] == "NCHW")
    assert not any(n.op in ("FusedConvNC8HW8", "FromNC8HW8") for n in graph.nodes)


def test_no_target_or_a_target_without_the_ops_leaves_the_graph_alone():
    model, feeds = _inverted_residual()
    for supports in (None, lambda domain, op: op not in ("FusedConvNC8HW8", "FromNC8HW8")):
        _, graph = _optimized(model, feeds, supports=supports)
        assert not any(n.op in ("FusedConvNC8HW8", "FromNC8HW8") for n in graph.nodes)


def test_a_residual_that_broadcasts_keeps_its_node_out_of_the_chain():
    """Z = a 1x1 convolution of the pooled input, [N, 16, 1, 1], added to the stem's output:
    the blocked op takes only a residual of Y's shape, so the stem stays a FusedConv (and the
    others, whose blocks nothing would read, as they were)."""
    inits = [numpy_helper.from_array(rand(*s) * 0.3, n) for n, s in (
        ("Ws", (16, 3, 3, 3)), ("Wg", (16, 3, 1, 1)), ("We", (16, 16, 1, 1)))]
    nodes = [
        helper.make_node("GlobalAveragePool", ["X"], ["m"], name="mean"),
        helper.make_node("Conv", ["m", "Wg"], ["g"], name="gate"),
        helper.make_node("Conv", ["X", "Ws"], ["s"], name="stem", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["s", "g"], ["a"], name="add"),
        helper.make_node("Conv", ["a", "We"], ["Y"], name="expand"),
    ]
    model = make_model(nodes, [("X", F, (2, 3, 8, 8))], [("Y", F, None)], initializers=inits)
    feeds = {"X": rand(2, 3, 8, 8)}
    _, graph = _optimized(model, feeds)
    ops = {n.name: (n.op, n.attrs.get("input_layout")) for n in graph.nodes}
    assert ops == {"mean": ("GlobalAveragePool", None), "gate": ("Conv", None),
                   "stem": ("FusedConv", None), "expand": ("Conv", None)}
    _same_results(model, graph, feeds)
