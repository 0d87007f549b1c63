"""Graph optimisation passes (refmnn/schedule/optimize.py) and the fused ops (refmnn/ops/fused.py):
each pass preserves the reference's results, and refuses where its preconditions fail."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import refmnn
from refmnn.converter import load
from refmnn.demo import rel_l2
from refmnn.ops import default_registry
from refmnn.ops.fused import fused_attention, fused_conv, fused_gemm, fused_matmul
from refmnn.schedule import optimize as opt
from refmnn.schedule.shapes import infer_types
from tests.helpers import make_model

F = TensorProto.FLOAT
REG = default_registry()


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _graph(model):
    return load(model, REG)


def _optimize(model, passes=opt.DEFAULT_PASSES, supports=None):
    graph = _graph(model)
    types = {v.name: v.type for v in graph.inputs}
    return graph, opt.optimize(graph, REG, types, passes=passes, supports=supports)


def _ops(graph):
    return collections.Counter((n.domain + "::" if n.domain else "") + n.op for n in graph.nodes)


def _check_same(model, feeds, *, exact=False, tol=1e-6):
    """Session(optimize=True) against the plain reference; returns the optimized plan graph."""
    want = refmnn.Session(model).run(feeds)
    session = refmnn.Session(model, optimize=True)
    got = session.run(feeds)
    assert list(got) == list(want)
    for key in want:
        assert got[key].shape == want[key].shape and got[key].dtype == want[key].dtype
        if exact:
            np.testing.assert_array_equal(got[key], want[key])
        else:
            assert rel_l2(got[key], want[key]) <= tol
    return session.plan.graph


# ---------------------------------------------------------------------------------------------
# Identity / Dropout


def _conv_inits(c_in=3, c_out=4, k=3, seed=0, bias=True):
    rng = _rng(seed)
    inits = [_init("W", rng.standard_normal((c_out, c_in, k, k)).astype(np.float32))]
    if bias:
        inits.append(_init("B", rng.standard_normal(c_out).astype(np.float32)))
    return inits


X_FEED = {"X": _rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}


def test_identity_in_the_middle_is_removed():
    nodes = [helper.make_node("Relu", ["X"], ["a"], name="r0"),
             helper.make_node("Identity", ["a"], ["b"], name="id"),
             helper.make_node("Neg", ["b"], ["Y"], name="neg")]
    model = make_model(nodes, [("X", F, (2, 3))], [("Y", F, (2, 3))])
    _, graph = _optimize(model, passes=(opt.remove_identities,))
    assert _ops(graph) == {"Relu": 1, "Neg": 1}
    assert graph.nodes[1].inputs == ("a",)
    _check_same(model, {"X": _rng().standard_normal((2, 3)).astype(np.float32)}, exact=True)


def test_identity_chain_to_a_graph_output_renames_the_producer():
    nodes = [helper.make_node("Relu", ["X"], ["a"], name="r0"),
             helper.make_node("Identity", ["a"], ["b"], name="id0"),
             helper.make_node("Identity", ["b"], ["Y"], name="id1")]
    model = make_model(nodes, [("X", F, (2, 3))], [("Y", F, (2, 3))])
    _, graph = _optimize(model, passes=(opt.remove_identities,))
    assert [(n.op, n.outputs) for n in graph.nodes] == [("Relu", ("Y",))]
    _check_same(model, {"X": _rng().standard_normal((2, 3)).astype(np.float32)}, exact=True)


def test_identity_from_an_input_or_onto_a_shared_value_is_kept():
    nodes = [helper.make_node("Identity", ["X"], ["Y"], name="id0"),       # input -> output
             helper.make_node("Relu", ["X"], ["a"], name="r0"),
             helper.make_node("Identity", ["a"], ["Z"], name="id1")]       # a is also an output
    model = make_model(nodes, [("X", F, (2,))], [("Y", F, (2,)), ("Z", F, (2,)), ("a", F, (2,))])
    original, graph = _optimize(model, passes=(opt.remove_identities,))
    assert _ops(graph) == _ops(original)


def _dropout_model(mask_used=False, training=None, opset=13, mask_listed=True):
    outs = ["d", "mask"] if mask_listed else ["d"]
    inputs = ["X"] if training is None else ["X", "", "T"]
    nodes = [helper.make_node("Dropout", inputs, outs, name="drop"),
             helper.make_node("Relu", ["d"], ["Y"], name="r0")]
    outputs = [("Y", F, (2, 3))]
    if mask_used:
        nodes.append(helper.make_node("Not", ["mask"], ["M"], name="not"))
        outputs.append(("M", TensorProto.BOOL, (2, 3)))
    inits = [] if training is None else [_init("T", np.array(training))]
    return make_model(nodes, [("X", F, (2, 3))], outputs, initializers=inits, opset=opset)


@pytest.mark.parametrize("kwargs", [{}, {"mask_listed": False}, {"training": False},
                                    {"opset": 10}, {"opset": 7}])
def test_inference_dropout_is_removed(kwargs):
    model = _dropout_model(**kwargs)
    _, graph = _optimize(model, passes=(opt.remove_identities,))
    assert _ops(graph) == {"Relu": 1}
    _check_same(model, {"X": _rng().standard_normal((2, 3)).astype(np.float32)}, exact=True)


@pytest.mark.parametrize("kwargs", [{"mask_used": True}, {"training": True}])
def test_dropout_whose_mask_is_used_or_training_is_kept(kwargs):
    model = _dropout_model(**kwargs)
    original, graph = _optimize(model, passes=(opt.remove_identities,))
    assert _ops(graph) == _ops(original)


def test_training_dropout_6_is_kept():
    nodes = [helper.make_node("Dropout", ["X"], ["Y"], name="drop", is_test=0)]
    model = make_model(nodes, [("X", F, (2, 3))], [("Y", F, (2, 3))], opset=6)
    original, graph = _optimize(model, passes=(opt.remove_identities,))
    assert _ops(graph) == {"Dropout": 1}


def test_dropout_from_input_to_output_becomes_identity():
    nodes = [helper.make_node("Dropout", ["X"], ["Y"], name="drop")]
    model = make_model(nodes, [("X", F, (2, 3))], [("Y", F, (2, 3))])
    _, graph = _optimize(model, passes=(opt.remove_identities,))
    assert _ops(graph) == {"Identity": 1}
    _check_same(model, {"X": _rng().standard_normal((2, 3)).astype(np.float32)}, exact=True)


# ---------------------------------------------------------------------------------------------
# DequantizeLinear of weights


@pytest.mark.parametrize("per_axis", [False, True])
def test_dequantized_weights_fold_into_float_constants(per_axis):
    """A QDQ model's weights (int8 through DequantizeLinear; 16 x 32 x 3 x 3 = 4608 elements,
    past the value propagation's FOLD_LIMIT) become one float32 initializer, bit for bit the
    reference's, and the int8 copy is dropped; the activations' DequantizeLinear stays."""
    rng = _rng(4)
    scale = rng.uniform(1e-3, 1e-2, 16 if per_axis else ()).astype(np.float32)
    zero = np.zeros(16 if per_axis else (), np.int8)
    inits = [_init("w_q", rng.integers(-127, 128, (16, 32, 3, 3)).astype(np.int8)),
             _init("w_s", scale), _init("w_z", zero),
             _init("x_s", np.float32(0.03)), _init("x_z", np.uint8(120))]
    nodes = [helper.make_node("QuantizeLinear", ["X", "x_s", "x_z"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["wf"], name="dq_w",
                              axis=0),
             helper.make_node("Conv", ["xf", "wf"], ["Y"], name="conv", pads=[1, 1, 1, 1])]
    model = make_model(nodes, [("X", F, (1, 32, 6, 6))], [("Y", F, (1, 16, 6, 6))],
                       initializers=inits, opset=13)
    _, graph = _optimize(model, passes=(opt.fold_dequantized_weights,
                                        opt.drop_unused_initializers))
    assert _ops(graph) == {"QuantizeLinear": 1, "DequantizeLinear": 1, "Conv": 1}
    assert "w_q" not in graph.initializers
    dq = REG.find("", "DequantizeLinear", 13).reference
    want = dq(numpy_helper.to_array(inits[0]), scale, zero, axis=0)
    np.testing.assert_array_equal(graph.initializers["wf"], want)
    _check_same(model, {"X": rng.standard_normal((1, 32, 6, 6)).astype(np.float32)}, exact=True)


def test_dequantize_linear_of_a_graph_input_or_onto_a_graph_output_is_kept():
    inits = [_init("w_q", np.arange(6, dtype=np.int8)), _init("s", np.float32(0.5))]
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "s"], ["Y"], name="to_output"),
             helper.make_node("DequantizeLinear", ["X", "s"], ["Z"], name="from_input")]
    model = make_model(nodes, [("X", TensorProto.INT8, (6,))], [("Y", F, (6,)), ("Z", F, (6,))],
                       initializers=inits, opset=13)
    _, graph = _optimize(model, passes=(opt.fold_dequantized_weights,))
    assert _ops(graph) == {"DequantizeLinear": 2}


# ---------------------------------------------------------------------------------------------
# BatchNormalization folding


def _bn_inits(c, seed=3, prefix=""):
    rng = _rng(seed)
    return [_init(prefix + "scale", rng.uniform(0.5, 1.5, c).astype(np.float32)),
            _init(prefix + "beta", rng.standard_normal(c).astype(np.float32)),
            _init(prefix + "mean", rng.standard_normal(c).astype(np.float32)),
            _init(prefix + "var", rng.uniform(0.5, 2.0, c).astype(np.float32))]


def _conv_bn_relu(bias=True, second_consumer=False):
    conv_in = ["X", "W", "B"] if bias else ["X", "W"]
    nodes = [helper.make_node("Conv", conv_in, ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["bn"],
                              name="bn", epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["Y"], name="relu")]
    outputs = [("Y", F, (1, 6, 8, 8))]
    if second_consumer:
        nodes.append(helper.make_node("Sigmoid", ["c"], ["S"], name="sig"))
        outputs.append(("S", F, (1, 6, 8, 8)))
    return make_model(nodes, [("X", F, (1, 3, 8, 8))], outputs,
                      initializers=_conv_inits(c_out=6, bias=bias) + _bn_inits(6))


@pytest.mark.parametrize("bias", [True, False])
def test_conv_bn_relu_folds_and_fuses(bias):
    model = _conv_bn_relu(bias=bias)
    _, folded = _optimize(model, passes=(opt.fold_batchnorm, opt.drop_unused_initializers))
    assert _ops(folded) == {"Conv": 1, "Relu": 1}
    assert set(folded.initializers) == {"W/bn_folded", "bn/bias_folded"}
    _, graph = _optimize(model)
    assert _ops(graph) == {"refmnn::FusedConv": 1}
    assert graph.nodes[0].attrs["activation"] == "relu"
    _check_same(model, X_FEED, tol=1e-5)


def test_bn_with_a_second_consumer_of_the_conv_output_is_not_folded():
    model = _conv_bn_relu(second_consumer=True)
    original, graph = _optimize(model, passes=(opt.fold_batchnorm,))
    assert _ops(graph) == _ops(original)
    # the full pipeline still turns the standalone BN into Mul + Add and fuses nothing into conv
    _, graph = _optimize(model)
    assert _ops(graph)["Conv"] == 1 and "BatchNormalization" not in _ops(graph)
    _check_same(model, X_FEED, tol=1e-5)


def test_bn_in_training_mode_is_not_folded():
    nodes = [helper.make_node("Conv", ["X", "W"], ["c"], name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"],
                              ["Y", "rm", "rv"], name="bn", training_mode=1)]
    model = make_model(nodes, [("X", F, (1, 3, 8, 8))],
                       [("Y", F, (1, 6, 6, 6)), ("rm", F, (6,)), ("rv", F, (6,))],
                       initializers=_conv_inits(c_out=6, bias=False) + _bn_inits(6), opset=15)
    original, graph = _optimize(model, passes=(opt.fold_batchnorm, opt.decompose_batchnorm))
    assert _ops(graph) == _ops(original)


def test_standalone_bn_becomes_mul_add():
    nodes = [helper.make_node("BatchNormalization", ["X", "scale", "beta", "mean", "var"], ["Y"],
                              name="bn")]
    model = make_model(nodes, [("X", F, (2, 6, 4, 4))], [("Y", F, (2, 6, 4, 4))],
                       initializers=_bn_inits(6))
    _, graph = _optimize(model)
    assert _ops(graph) == {"Mul": 1, "Add": 1}
    _check_same(model, {"X": _rng().standard_normal((2, 6, 4, 4)).astype(np.float32)}, tol=1e-6)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_bn_folds(trans_b):
    rng = _rng(5)
    w = rng.standard_normal((6, 5) if trans_b else (5, 6)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["X", "W", "C"], ["g"], name="gemm", transB=trans_b,
                              alpha=0.5, beta=2.0),
             helper.make_node("BatchNormalization", ["g", "scale", "beta", "mean", "var"], ["Y"],
                              name="bn")]
    model = make_model(nodes, [("X", F, (3, 5))], [("Y", F, (3, 6))],
                       initializers=[_init("W", w), _init("C", rng.standard_normal(6)
                                                          .astype(np.float32))] + _bn_inits(6))
    _, graph = _optimize(model, passes=(opt.fold_batchnorm,))
    assert _ops(graph) == {"Gemm": 1}
    _check_same(model, {"X": rng.standard_normal((3, 5)).astype(np.float32)}, tol=1e-5)


@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose_bn_folds(group):
    rng = _rng(6)
    nodes = [helper.make_node("ConvTranspose", ["X", "W", "B"], ["t"], name="convT", group=group,
                              strides=[2, 2]),
             helper.make_node("BatchNormalization", ["t", "scale", "beta", "mean", "var"], ["Y"],
                              name="bn")]
    inits = [_init("W", rng.standard_normal((4, 6 // group, 3, 3)).astype(np.float32)),
             _init("B", rng.standard_normal(6).astype(np.float32))] + _bn_inits(6)
    model = make_model(nodes, [("X", F, (1, 4, 5, 5))], [("Y", F, (1, 6, 11, 11))],
                       initializers=inits)
    _, graph = _optimize(model, passes=(opt.fold_batchnorm,))
    assert _ops(graph) == {"ConvTranspose": 1}
    _check_same(model, {"X": rng.standard_normal((1, 4, 5, 5)).astype(np.float32)}, tol=1e-5)


def test_legacy_bn_6_is_test_folds():
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["Y"],
                              name="bn", is_test=1)]
    model = make_model(nodes, [("X", F, (1, 3, 8, 8))], [("Y", F, (1, 6, 6, 6))],
                       initializers=_conv_inits(c_out=6) + _bn_inits(6), opset=6)
    _, graph = _optimize(model, passes=(opt.fold_batchnorm,))
    assert _ops(graph) == {"Conv": 1}
    _check_same(model, X_FEED, tol=1e-5)


# ---------------------------------------------------------------------------------------------
# activation and residual fusion


def _conv_then(act_nodes, extra_inits=(), opset=17, outputs=(("Y", F, (1, 4, 8, 8)),)):
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1])]
    return make_model(nodes + act_nodes, [("X", F, (1, 3, 8, 8))], list(outputs),
                      initializers=_conv_inits() + list(extra_inits), opset=opset)


@pytest.mark.parametrize("case", ["relu", "relu6", "clip6", "leaky", "sigmoid", "tanh", "clip_lo"])
def test_conv_activation_fuses(case):
    inits = [_init("zero", np.float32(0)), _init("six", np.float32(6))]
    act, opset = {
        "relu": (helper.make_node("Relu", ["c"], ["Y"], name="a"), 17),
        "relu6": (helper.make_node("Clip", ["c", "zero", "six"], ["Y"], name="a"), 17),
        "clip6": (helper.make_node("Clip", ["c"], ["Y"], name="a", min=0.0, max=6.0), 6),
        "leaky": (helper.make_node("LeakyRelu", ["c"], ["Y"], name="a", alpha=0.2), 17),
        "sigmoid": (helper.make_node("Sigmoid", ["c"], ["Y"], name="a"), 17),
        "tanh": (helper.make_node("Tanh", ["c"], ["Y"], name="a"), 17),
        "clip_lo": (helper.make_node("Clip", ["c", "zero"], ["Y"], name="a"), 17),
    }[case]
    model = _conv_then([act], inits if opset >= 11 else (), opset=opset)
    _, graph = _optimize(model)
    assert _ops(graph) == {"refmnn::FusedConv": 1}
    assert not graph.initializers.keys() & {"zero", "six"}
    _check_same(model, X_FEED, exact=True)


def _residual_model(z_shape=(1, 4, 8, 8), act=True, c_out=4):
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["Zin"], ["z"], name="zrelu"),
             helper.make_node("Add", ["z", "c"], ["s"], name="add")]
    nodes.append(helper.make_node("Relu", ["s"], ["Y"], name="relu") if act else
                 helper.make_node("Identity", ["s"], ["Y"], name="out"))
    return make_model(nodes, [("X", F, (1, 3, 8, 8)), ("Zin", F, z_shape)],
                      [("Y", F, (z_shape[0], 4, 8, 8))],
                      initializers=_conv_inits(c_out=c_out))


def _residual_feeds(z_shape=(1, 4, 8, 8)):
    return {**X_FEED, "Zin": _rng(9).standard_normal(z_shape).astype(np.float32)}


@pytest.mark.parametrize("act", [True, False])
def test_conv_add_relu_is_one_fused_conv(act):
    model = _residual_model(act=act)
    _, graph = _optimize(model)
    assert _ops(graph) == {"Relu": 1, "refmnn::FusedConv": 1}
    fused = graph.nodes[-1]
    assert fused.inputs == ("X", "W", "B", "z")
    assert fused.attrs.get("activation", "none") == ("relu" if act else "none")
    _check_same(model, _residual_feeds(), exact=True)


def test_residual_that_would_enlarge_the_output_is_not_fused():
    model = _residual_model(z_shape=(2, 4, 8, 8), c_out=4)
    _, graph = _optimize(model)
    assert _ops(graph)["Add"] == 1 and _ops(graph)["Conv"] == 1
    _check_same(model, _residual_feeds((2, 4, 8, 8)), exact=True)


def test_conv_output_that_is_also_a_graph_output_is_not_fused():
    model = _conv_then([helper.make_node("Relu", ["c"], ["Y"], name="a")],
                       outputs=(("Y", F, (1, 4, 8, 8)), ("c", F, (1, 4, 8, 8))))
    original, graph = _optimize(model)
    assert _ops(graph) == _ops(original)


def test_fusion_is_skipped_when_the_target_lacks_the_fused_op():
    model = _residual_model()
    original, graph = _optimize(model, supports=lambda domain, op: domain == "")
    assert _ops(graph) == _ops(original)


# ---------------------------------------------------------------------------------------------
# convolution + max pool


def _conv_pool(*, act=True, pool=None, opset=17, also_out=False, indices=False,
               shape=(1, 4, 4, 4)):
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1])]
    src = "c"
    if act:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
        src = "r"
    attrs = pool if pool is not None else {"kernel_shape": [3, 3], "strides": [2, 2],
                                           "ceil_mode": 1}
    nodes.append(helper.make_node("MaxPool", [src], ["Y", "I"] if indices else ["Y"],
                                  name="pool", **attrs))
    outputs = [("Y", F, shape)]
    outputs += [(src, F, (1, 4, 8, 8))] if also_out else []
    outputs += [("I", TensorProto.INT64, shape)] if indices else []
    return make_model(nodes, [("X", F, (1, 3, 8, 8))], outputs, initializers=_conv_inits(),
                      opset=opset)


@pytest.mark.parametrize(("pool", "opset", "act", "shape"), [
    (None, 17, True, (1, 4, 4, 4)),
    ({"kernel_shape": [2, 2], "pads": [1, 0, 0, 1], "dilations": [2, 1]}, 17, False,
     (1, 4, 7, 8)),
    ({"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}, 12, True,
     (1, 4, 4, 4)),
    ({"kernel_shape": [3, 3], "strides": [2, 2]}, 7, True, (1, 4, 3, 3)),  # MaxPool-7: floor
])
def test_conv_max_pool_is_one_fused_conv_max_pool(pool, opset, act, shape):
    model = _conv_pool(pool=pool, opset=opset, act=act, shape=shape)
    _, graph = _optimize(model)
    assert _ops(graph) == {"refmnn::FusedConvMaxPool": 1}
    fused = graph.nodes[0]
    assert fused.inputs == ("X", "W", "B") and fused.outputs == ("Y",)
    assert list(fused.attrs["pads"]) == [1, 1, 1, 1] and "storage_order" not in fused.attrs
    assert fused.attrs.get("activation", "none") == ("relu" if act else "none")
    for key, value in (pool or {"kernel_shape": [3, 3], "ceil_mode": 1}).items():
        got = fused.attrs["pool_" + key]
        assert (list(got) if isinstance(value, list) else got) == value
    _check_same(model, X_FEED, exact=True)


@pytest.mark.parametrize("kwargs", [{"also_out": True}, {"indices": True}])
def test_conv_max_pool_is_kept_where_a_precondition_fails(kwargs):
    original, graph = _optimize(_conv_pool(**kwargs))
    assert _ops(graph)["MaxPool"] == 1 and _ops(graph)["refmnn::FusedConv"] == 1


def test_conv_max_pool_fuses_only_where_the_target_runs_the_fused_node():
    model = _conv_pool()
    seen = []

    def runs(spec):
        seen.append(spec)
        return False

    graph = _graph(model)
    types = {v.name: v.type for v in graph.inputs}
    kept = opt.optimize(graph, REG, types, supports=lambda domain, op: True, runs=runs)
    assert _ops(kept) == {"refmnn::FusedConv": 1, "MaxPool": 1}
    (spec,) = [s for s in seen if s.node.op == "FusedConvMaxPool"]  # the layout pass asks too
    assert spec.node.op == "FusedConvMaxPool" and spec.constants.keys() == {1, 2}
    assert spec.outputs[0].shape == (1, 4, 4, 4) and list(spec.attrs["pool_strides"]) == [2, 2]
    fused = opt.optimize(graph, REG, types, supports=lambda domain, op: True,
                         runs=lambda spec: True)
    assert _ops(fused) == {"refmnn::FusedConvMaxPool": 1}
    lacking = opt.optimize(graph, REG, types, supports=lambda domain, op: op != "FusedConvMaxPool",
                           runs=lambda spec: True)
    assert _ops(lacking) == {"refmnn::FusedConv": 1, "MaxPool": 1}


def _gelu_chain(x, out, tag):
    """torch's export of exact Gelu: Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5)."""
    return [helper.make_node("Div", [x, "sqrt2"], [f"{tag}d"], name=f"{tag}div"),
            helper.make_node("Erf", [f"{tag}d"], [f"{tag}e"], name=f"{tag}erf"),
            helper.make_node("Add", [f"{tag}e", "one"], [f"{tag}a"], name=f"{tag}add"),
            helper.make_node("Mul", [x, f"{tag}a"], [f"{tag}m"], name=f"{tag}mul"),
            helper.make_node("Mul", [f"{tag}m", "half"], [out], name=f"{tag}half")]


GELU_INITS = [_init("sqrt2", np.float32(np.sqrt(2))), _init("one", np.float32(1)),
              _init("half", np.float32(0.5))]


def test_matmul_bias_gelu_is_one_fused_matmul():
    rng = _rng(11)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["m"], name="mm"),
             helper.make_node("Add", ["bias", "m"], ["h"], name="bias_add"),
             *_gelu_chain("h", "g", "act"),
             helper.make_node("MatMul", ["g", "W2"], ["m2"], name="mm2"),
             helper.make_node("Add", ["m2", "bias2"], ["h2"], name="bias_add2"),
             helper.make_node("Add", ["X", "h2"], ["Y"], name="residual")]
    inits = [_init("W", rng.standard_normal((8, 16)).astype(np.float32)),
             _init("bias", rng.standard_normal(16).astype(np.float32)),
             _init("W2", rng.standard_normal((16, 8)).astype(np.float32)),
             _init("bias2", rng.standard_normal(8).astype(np.float32))] + GELU_INITS
    model = make_model(nodes, [("X", F, (2, 5, 8))], [("Y", F, (2, 5, 8))], initializers=inits)
    _, gelu_only = _optimize(model, passes=(opt.fuse_gelu,))
    assert _ops(gelu_only)["Gelu"] == 1 and "Erf" not in _ops(gelu_only)
    _, graph = _optimize(model)
    assert _ops(graph) == {"refmnn::FusedMatMul": 2}
    first, second = graph.nodes
    assert first.attrs["activation"] == "gelu" and first.inputs == ("X", "W", "bias")
    assert "activation" not in second.attrs and second.inputs == ("g", "W2", "bias2", "X")
    _check_same(model, {"X": rng.standard_normal((2, 5, 8)).astype(np.float32)}, tol=1e-6)


def test_gelu_pattern_with_wrong_constant_is_kept():
    nodes = _gelu_chain("X", "Y", "act")
    inits = [_init("sqrt2", np.float32(1.5)), _init("one", np.float32(1)),
             _init("half", np.float32(0.5))]
    model = make_model(nodes, [("X", F, (4,))], [("Y", F, (4,))], initializers=inits)
    original, graph = _optimize(model, passes=(opt.fuse_gelu,))
    assert _ops(graph) == _ops(original)


def test_gemm_relu_is_one_fused_gemm():
    rng = _rng(12)
    nodes = [helper.make_node("Gemm", ["X", "W", "C"], ["g"], name="gemm", transB=1, alpha=0.7),
             helper.make_node("Relu", ["g"], ["Y"], name="relu")]
    inits = [_init("W", rng.standard_normal((6, 5)).astype(np.float32)),
             _init("C", rng.standard_normal(6).astype(np.float32))]
    model = make_model(nodes, [("X", F, (3, 5))], [("Y", F, (3, 6))], initializers=inits)
    _, graph = _optimize(model)
    assert _ops(graph) == {"refmnn::FusedGemm": 1}
    _check_same(model, {"X": rng.standard_normal((3, 5)).astype(np.float32)}, exact=True)


# ---------------------------------------------------------------------------------------------
# attention

B, H, SQ, SK, D = 2, 3, 5, 7, 4


def _attention_model(*, q_scale=None, k_scale=None, scale=("Div", 2.0), mask=None, axis=-1,
                     opset=17, probs_out=False, scores_out=False):
    """softmax(scale(q @ kt) [+ mask], axis) @ v with optional scalings of q and kt: the
    shapes of BERT's attention (q, kt, v graph inputs, per-head batch dims)."""
    nodes, inits = [], []
    q, kt = "q", "kt"
    for name, factor in (("q", q_scale), ("kt", k_scale)):
        if factor is not None:
            inits.append(_init(f"{name}_c", np.float32(factor)))
            nodes.append(helper.make_node("Mul", [name, f"{name}_c"], [f"{name}_s"], name=f"{name}_mul"))
            q, kt = (f"{name}_s", kt) if name == "q" else (q, f"{name}_s")
    nodes.append(helper.make_node("MatMul", [q, kt], ["scores"], name="qk"))
    value = "scores"
    if scale is not None:
        op, c = scale
        inits.append(_init("c", np.float32(c) if np.ndim(c) == 0 else np.asarray(c, np.float32)))
        nodes.append(helper.make_node(op, [value, "c"], ["scaled"], name="scale"))
        value = "scaled"
    inputs = [("q", F, (B, H, SQ, D)), ("kt", F, (B, H, D, SK)), ("v", F, (B, H, SK, 6))]
    if mask is not None:
        inputs.append(("mask", F, mask))
        nodes.append(helper.make_node("Add", ["mask", value], ["masked"], name="add_mask"))
        value = "masked"
    attrs = {} if axis is None else {"axis": axis}
    nodes.append(helper.make_node("Softmax", [value], ["probs"], name="softmax", **attrs))
    nodes.append(helper.make_node("MatMul", ["probs", "v"], ["Y"], name="av"))
    outputs = [("Y", F, (B, H, SQ, 6))] + ([("probs", F, (B, H, SQ, SK))] if probs_out else []) + \
        ([("scores", F, (B, H, SQ, SK))] if scores_out else [])
    return make_model(nodes, inputs, outputs, initializers=inits, opset=opset)


def _attention_feeds(mask=None, seed=21):
    rng = _rng(seed)
    feeds = {"q": rng.standard_normal((B, H, SQ, D)), "kt": rng.standard_normal((B, H, D, SK)),
             "v": rng.standard_normal((B, H, SK, 6))}
    if mask is not None:
        feeds["mask"] = np.where(rng.random(mask) < 0.3, -np.inf, rng.standard_normal(mask))
    return {k: v.astype(np.float32) for k, v in feeds.items()}


@pytest.mark.parametrize(("kwargs", "scale"), [
    ({}, 0.5),                                                          # BERT: Div by sqrt(d)
    ({"scale": ("Mul", 0.25), "mask": (B, 1, 1, SK)}, 0.25),            # padding mask
    ({"scale": None, "q_scale": 0.125}, 0.125),                         # timm ViT: q * d**-0.5
    ({"q_scale": 0.5, "k_scale": 0.5, "mask": (SQ, SK)}, 0.125),        # both sides + causal-like
    ({"opset": 11, "axis": 3}, 0.5),                                    # Softmax-11 on the last axis
])
def test_attention_chain_is_one_fused_attention(kwargs, scale):
    model = _attention_model(**kwargs)
    _, graph = _optimize(model, passes=(opt.fuse_attention,))
    assert _ops(graph) == {"refmnn::FusedAttention": 1}
    (node,) = graph.nodes
    assert node.inputs == ("q", "kt", "v", "mask")[:4 if "mask" in kwargs else 3]
    assert node.attrs["scale"] == pytest.approx(scale, rel=1e-7)
    _check_same(model, _attention_feeds(kwargs.get("mask")), tol=1e-6)


@pytest.mark.parametrize("kwargs", [
    {"probs_out": True},                    # the probabilities are a graph output
    {"scores_out": True},                   # so are the raw scores
    {"axis": 2},                            # softmax over the queries, not the keys
    {"opset": 11, "axis": None},            # Softmax-11's default axis 1 coerces [B, H*SQ*SK]
    {"scale": ("Mul", [0.5, 1, 1, 1, 1, 1, 1])},  # a per-key factor, not a scalar
    {"mask": (2, B, H, SQ, SK)},            # a mask that would enlarge the scores
])
def test_attention_chain_is_kept_where_a_precondition_fails(kwargs):
    model = _attention_model(**kwargs)
    original, graph = _optimize(model, passes=(opt.fuse_attention,))
    assert _ops(graph) == _ops(original)


def test_attention_is_not_fused_for_a_target_without_the_op():
    model = _attention_model(mask=(SQ, SK))
    original, graph = _optimize(model, passes=(opt.fuse_attention,),
                                supports=lambda domain, op: op != "FusedAttention")
    assert _ops(graph) == _ops(original)


def _heads_attention_model(*, q_perm=(0, 2, 1, 3), y_out=False, q_read_twice=False):
    """BERT's attention with the heads split from [B, S, H, D] inputs and merged back: Q, K
    and V through Transposes (K's to [B, H, D, S]), the output Transposed to [B, S, H, Dv]."""
    nodes = [helper.make_node("Transpose", ["q4"], ["q"], name="tq", perm=list(q_perm)),
             helper.make_node("Transpose", ["k4"], ["kt"], name="tk", perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["v4"], ["v"], name="tv", perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
             helper.make_node("Softmax", ["scores"], ["probs"], name="softmax", axis=-1),
             helper.make_node("MatMul", ["probs", "v"], ["y"], name="av"),
             helper.make_node("Transpose", ["y"], ["Y"], name="ty", perm=[0, 2, 1, 3])]
    q_shape = (B, SQ, H, D) if q_perm == (0, 2, 1, 3) else (B, H, D, SQ)
    inputs = [("q4", F, q_shape), ("k4", F, (B, SK, H, D)), ("v4", F, (B, SK, H, 6))]
    outputs = [("Y", F, (B, SQ, H, 6))] + ([("y", F, (B, H, SQ, 6))] if y_out else []) + \
        ([("q", F, (B, H, SQ, D))] if q_read_twice else [])
    return make_model(nodes, inputs, outputs, opset=17), q_shape


def _heads_feeds(q_shape, seed=5):
    rng = _rng(seed)
    return {"q4": rng.standard_normal(q_shape).astype(np.float32),
            "k4": rng.standard_normal((B, SK, H, D)).astype(np.float32),
            "v4": rng.standard_normal((B, SK, H, 6)).astype(np.float32)}


def test_attention_absorbs_the_head_split_and_merge_transposes():
    """Q's, V's and the output's Transposes become perm_q, perm_v and perm_y; K's (which moves
    the last axis) stays a Transpose; the result equals the plain reference."""
    model, q_shape = _heads_attention_model()
    _, graph = _optimize(model, passes=(opt.fuse_attention, opt.absorb_attention_transposes))
    assert _ops(graph) == {"refmnn::FusedAttention": 1, "Transpose": 1}
    node = next(n for n in graph.nodes if n.op == "FusedAttention")
    assert node.inputs == ("q4", "kt", "v4") and node.outputs == ("Y",)
    assert node.attrs["perm_q"] == node.attrs["perm_v"] == node.attrs["perm_y"] == (0, 2, 1, 3)
    assert "perm_kt" not in node.attrs
    _check_same(model, _heads_feeds(q_shape), exact=True)


@pytest.mark.parametrize("kwargs", [
    {"y_out": True},                     # the unmerged output is a graph output too: Y's stays
    {"q_read_twice": True},              # the split Q is read elsewhere (a graph output): Q's stays
    {"q_perm": (0, 1, 3, 2)},            # Q's Transpose moves its last axis: Q's stays
])
def test_attention_transposes_kept_where_a_precondition_fails(kwargs):
    model, q_shape = _heads_attention_model(**kwargs)
    _, graph = _optimize(model, passes=(opt.fuse_attention, opt.absorb_attention_transposes))
    node = next(n for n in graph.nodes if n.op == "FusedAttention")
    kept = "perm_y" if "y_out" in kwargs else "perm_q"
    assert kept not in node.attrs and _ops(graph)["Transpose"] == 2
    _check_same(model, _heads_feeds(q_shape), exact=True)


def test_fused_op_references_equal_their_definitions():
    rng = _rng(13)
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    z = rng.standard_normal((2, 6, 3, 3)).astype(np.float32)
    conv = REG.resolve("", "Conv", 11)
    want = np.clip(conv(x, w, group=2, strides=(2, 2), pads=(1, 1, 1, 1)) + z, -1, 0.5)
    got = fused_conv(x, w, None, z, group=2, strides=(2, 2), pads=(1, 1, 1, 1),
                     activation="clip", activation_min=-1.0, activation_max=0.5)
    np.testing.assert_array_equal(got, want)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 2)).astype(np.float32)
    bias = rng.standard_normal(2).astype(np.float32)
    np.testing.assert_array_equal(fused_matmul(a, b, bias, activation="relu"),
                                  np.maximum(a @ b + bias, 0))
    np.testing.assert_allclose(fused_gemm(a[0].T.copy(), b, bias, transA=1, activation="tanh"),
                               np.tanh(a[0] @ b + bias), rtol=1e-6)
    with pytest.raises(ValueError):
        fused_conv(x, w, None, rng.standard_normal((3, 6, 3, 3)).astype(np.float32), group=2)
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 5, 4), (2, 4, 6), (6, 3)))
    mask = np.where(np.tril(np.ones((5, 6))) > 0, 0, -np.inf).astype(np.float32)
    softmax = REG.resolve("", "Softmax", 13)
    np.testing.assert_array_equal(fused_attention(q, kt, v, mask, scale=0.5),
                                  softmax((q @ kt) * np.float32(0.5) + mask, axis=-1) @ v)
    with pytest.raises(ValueError, match="mask"):
        fused_attention(q, kt, v, np.zeros((2, 2, 5, 6), np.float32), scale=1.0)


def test_fused_conv_shape_rule_rejects_a_bad_residual_and_activation():
    from refmnn.errors import ShapeError

    for z_shape, activation in (((1, 5, 7, 7), "relu"), ((1, 4, 8, 8), "swish")):
        node = helper.make_node("FusedConv", ["X", "W", "B", "Z"], ["Y"], name="fc",
                                domain="refmnn", pads=[1, 1, 1, 1], activation=activation)
        model = make_model([node], [("X", F, (1, 3, 8, 8)), ("Z", F, z_shape)],
                           [("Y", F, (1, 4, 8, 8))],
                           initializers=_conv_inits(), extra_opsets=[("refmnn", 1)])
        graph = _graph(model)
        with pytest.raises(ShapeError):
            infer_types(graph, {v.name: v.type for v in graph.inputs}, REG)


# ---------------------------------------------------------------------------------------------
# the plan hook


def test_reference_session_runs_the_models_own_ops():
    model = _residual_model()
    plain = refmnn.Session(model)
    plain.resize()
    assert _ops(plain.plan.graph) == {"Conv": 1, "Relu": 2, "Add": 1}
    optimized = refmnn.Session(model, optimize=True)
    optimized.resize()
    assert _ops(optimized.plan.graph) == {"Relu": 1, "refmnn::FusedConv": 1}
    off = refmnn.Session(model, optimize=False)
    off.resize()
    assert _ops(off.plan.graph) == _ops(plain.plan.graph)


# ---------------------------------------------------------------------------------------------
# the zoo


def test_vit_tiny_shape_chains_fold_at_a_static_input_shape():
    pytest.importorskip("torch")
    from refmnn import zoo

    graph = _graph(str(zoo.export_onnx("vit_tiny")))
    before = _ops(graph)
    assert before["Shape"] == 1 and before["Concat"] == 2 and before["Constant"] > 0
    shape_chain = {"Shape", "Slice", "ConstantOfShape", "Equal", "Where", "Expand", "Constant"}
    # with a symbolic batch nothing of the chain can fold...
    after = opt.optimize(graph, REG, {"input": None}, passes=(opt.fold_constant_nodes,))
    assert _ops(after)["Shape"] == 1
    # ...at the static input shape the whole chain becomes initializers
    after = opt.optimize(graph, REG, {v.name: v.type for v in graph.inputs},
                         passes=(opt.fold_constant_nodes,))
    ops = _ops(after)
    assert not shape_chain & set(ops), ops
    assert ops["Concat"] == 1  # the shape Concat folded; the token Concat (activations) stays


ZOO_COUNTS: dict[str, tuple[int, int]] = {}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "squeezenet1_1", "mobilenet_v1",
                                  "vit_tiny", "bert6"])
def test_zoo_model_optimized_matches_the_reference(name):
    pytest.importorskip("torch")
    from refmnn import zoo

    path, feeds = zoo.export_onnx(name), zoo.make_inputs(name)
    before = len(_graph(str(path)).nodes)
    graph = _check_same(str(path), feeds, tol=1e-5)
    fused = sum(n.domain == "refmnn" for n in graph.nodes)
    print(f"{name}: {before} nodes -> {len(graph.nodes)} ({fused} fused) {dict(_ops(graph))}")
    assert fused > 0 and len(graph.nodes) < before
