"""The OpenCL backend's fused epilogues (refmnn::FusedConv / FusedMatMul / FusedGemm) against
the NumPy reference: the fusion passes make one fused node of Conv / MatMul / Gemm with a residual
and an activation, and every applicable scheme of it is run on device tensors (moved out of
test_opencl_backend.py, whose helpers these tests use and whose import skips without OpenCL)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import refmnn
from refmnn.schedule.plan import RunStep
from tests.helpers import make_model
from tests.test_opencl_backend import (CONVS, DEPTHWISE, F, H, every_scheme, node_model,
                                       opencl_session, randn)


def _conv_residual_act(case, act):  # type: ignore[no-untyped-def]
    """Conv -> Add(residual z) -> activation on ``case`` = (x shape, w shape, attrs, bias):
    the model and its feeds (z shaped like the conv's output)."""
    x_shape, w_shape, attrs, bias = case
    conv = helper.make_node("Conv", ["x", "w", *(["b"] if bias else [])], ["c"], name="conv", **attrs)
    add = helper.make_node("Add", ["c", "z"], ["s"], name="res")
    acts, act_inits = _act_nodes(act, "s", "y")
    inits = [numpy_helper.from_array(randn(*w_shape), "w"), *act_inits]
    if bias:
        inits.append(numpy_helper.from_array(randn(w_shape[0]), "b"))
    conv_only = refmnn.Session(node_model("Conv", [x_shape], attrs, inits=[("w", randn(*w_shape))]), check=False)
    y_shape = conv_only.run({"x0": randn(*x_shape)})["y0"].shape
    model = make_model([conv, add, *acts], [("x", F, x_shape), ("z", F, y_shape)], [("y", F, None)],
                       initializers=inits)
    feeds = {"x": randn(*x_shape), "z": randn(*y_shape)}
    return model, feeds


@pytest.mark.parametrize("act", ["relu6", "sigmoid", "gelu"])
@pytest.mark.parametrize("case", DEPTHWISE[:3], ids=lambda c: f"{c[0]}x{c[1]}")
def test_fused_depthwise_strips(case, act):  # type: ignore[no-untyped-def]
    model, feeds = _conv_residual_act(case, act)
    assert _fused_ops(model, feeds) == ["FusedConv"]
    assert "FusedConv/depthwise" in every_scheme(model, feeds, tol=3e-6)


# -- fused epilogues (refmnn::FusedConv / FusedMatMul / FusedGemm) -------------------------------

def _act_nodes(act: str, x: str, y: str) -> tuple[list, list]:  # type: ignore[type-arg]
    """Nodes (and initializers) applying activation ``act`` to x, output y."""
    if act == "relu6":
        inits = [numpy_helper.from_array(np.array(0, np.float32), "lo6"),
                 numpy_helper.from_array(np.array(6, np.float32), "hi6")]
        return [helper.make_node("Clip", [x, "lo6", "hi6"], [y], name="act")], inits
    if act == "leaky":
        return [helper.make_node("LeakyRelu", [x], [y], alpha=0.2, name="act")], []
    if act == "gelu":   # torch's exported formula; optimize recognises it as Gelu
        c = [numpy_helper.from_array(np.array(v, np.float32), n)
             for n, v in (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
        return [helper.make_node("Div", [x, "sqrt2"], ["g0"], name="g_div"),
                helper.make_node("Erf", ["g0"], ["g1"], name="g_erf"),
                helper.make_node("Add", ["g1", "one"], ["g2"], name="g_add"),
                helper.make_node("Mul", [x, "g2"], ["g3"], name="g_mul"),
                helper.make_node("Mul", ["g3", "half"], [y], name="g_half")], c
    op = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh"}[act]
    return [helper.make_node(op, [x], [y], name="act")], []


def _fused_ops(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[str]:
    session = opencl_session(model)
    session.run(feeds)
    steps = session.plan.steps
    return [s.node.op for s in steps if isinstance(s, RunStep) and s.node.domain == "refmnn"]


FUSED_ACTS = ["relu", "relu6", "leaky", "sigmoid", "tanh", "gelu"]


@pytest.mark.parametrize("act", FUSED_ACTS)
@pytest.mark.parametrize("case", CONVS, ids=lambda c: f"{c[0]}x{c[1]}")
def test_fused_conv_every_scheme(case, act):  # type: ignore[no-untyped-def]
    """Conv -> Add(residual) -> activation becomes one FusedConv; every applicable scheme
    applies the residual and the activation in its store and matches the unfused reference."""
    model, feeds = _conv_residual_act(case, act)
    assert _fused_ops(model, feeds) == ["FusedConv"]
    checked = every_scheme(model, feeds, tol=3e-6)
    assert "FusedConv/direct" in checked and len(checked) >= 2, checked


@pytest.mark.parametrize("z_shape", [(1, 6, 1, 1), (1, 1, 7, 1), (6, 1, 9)], ids=str)
def test_fused_conv_broadcast_residual(z_shape):  # type: ignore[no-untyped-def]
    """A residual that broadcasts: applied in the GEMM store when it maps onto (m, n) strides,
    else by the separate in-place epilogue pass (every scheme checked)."""
    x_shape, w_shape = (1, 8, 7, 9), (6, 8, 3, 3)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "z"], ["s"], name="res"),
             helper.make_node("Relu", ["s"], ["y"], name="act")]
    inits = [numpy_helper.from_array(randn(*w_shape), "w"), numpy_helper.from_array(randn(6), "b")]
    model = make_model(nodes, [("x", F, x_shape), ("z", F, z_shape)], [("y", F, None)], initializers=inits)
    feeds = {"x": randn(*x_shape), "z": randn(*z_shape)}
    assert _fused_ops(model, feeds) == ["FusedConv"]
    checked = every_scheme(model, feeds, tol=3e-6)
    assert {"FusedConv/direct", "FusedConv/winograd_f23", "FusedConv/im2col_gemm"} <= set(checked), checked


@pytest.mark.filterwarnings("ignore:Non-empty compiler output")   # PoCL's ABI notes on float16
@pytest.mark.parametrize("act", FUSED_ACTS)
@pytest.mark.parametrize("a_shape,b_shape,z_shape", [
    ((5, 7), (7, 9), (5, 9)), ((2, 3, 13, 8), (8, 37), (3, 13, 37)), ((1, 33, 16), (16, 24), (24,)),
], ids=str)
@pytest.mark.parametrize("half", [False, True], ids=["f32", "f16"])
def test_fused_matmul(a_shape, b_shape, z_shape, act, half):  # type: ignore[no-untyped-def]
    """MatMul -> Add(bias) -> Add(residual) -> activation becomes one FusedMatMul whose
    epilogue runs in the GEMM's store; odd shapes, batches, a broadcast residual, float16."""
    dtype, elem = (np.float16, H) if half else (np.float32, F)
    n = b_shape[-1]
    nodes = [helper.make_node("MatMul", ["a", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "bias"], ["mb"], name="bias_add"),
             helper.make_node("Add", ["mb", "z"], ["s"], name="res")]
    acts, act_inits = _act_nodes(act, "s", "y")
    act_inits = [numpy_helper.from_array(numpy_helper.to_array(t).astype(dtype), t.name) for t in act_inits]
    inits = [numpy_helper.from_array(randn(*b_shape, dtype=dtype), "w"),
             numpy_helper.from_array(randn(n, dtype=dtype), "bias"), *act_inits]
    model = make_model([*nodes, *acts], [("a", elem, a_shape), ("z", elem, z_shape)], [("y", elem, None)],
                       initializers=inits)
    feeds = {"a": randn(*a_shape, dtype=dtype), "z": randn(*z_shape, dtype=dtype)}
    assert _fused_ops(model, feeds) == ["FusedMatMul"]
    checked = every_scheme(model, feeds, tol=3e-3 if half else 2e-6)
    # (float16 constants are not sqrt(2) to 1e-6: the Gelu formula stays unfused there)
    assert checked[0] == "FusedMatMul/gemm" and (half and act == "gelu" or len(checked) == 1), checked


@pytest.mark.parametrize("trans_a,trans_b,const_b", [(0, 1, True), (1, 0, False), (1, 1, False), (0, 0, True)],
                         ids=str)
@pytest.mark.parametrize("c_shape", [(11,), (1, 11), (6, 1), None], ids=str)
def test_fused_gemm(trans_a, trans_b, const_b, c_shape):  # type: ignore[no-untyped-def]
    """Gemm -> Relu becomes FusedGemm: transposed operands (constants packed at prepare, inputs
    transposed on the device), alpha, beta, C broadcast any way, activation in the store."""
    M, N, K = 6, 11, 9
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (N, K) if trans_b else (K, N)
    inputs = ["a", "b", *(["c"] if c_shape else [])]
    nodes = [helper.make_node("Gemm", inputs, ["g"], name="gemm", transA=trans_a, transB=trans_b,
                              alpha=0.5, beta=2.0),
             helper.make_node("Relu", ["g"], ["y"], name="act")]
    inits = [numpy_helper.from_array(randn(*b_shape), "b")] if const_b else []
    if c_shape:
        inits.append(numpy_helper.from_array(randn(*c_shape), "c"))
    graph_inputs = [("a", F, a_shape)] + ([] if const_b else [("b", F, b_shape)])
    model = make_model(nodes, graph_inputs, [("y", F, None)], initializers=inits)
    feeds = {"a": randn(*a_shape), **({} if const_b else {"b": randn(*b_shape)})}
    assert _fused_ops(model, feeds) == ["FusedGemm"]
    assert every_scheme(model, feeds, tol=2e-6) == ["FusedGemm/gemm"]


def test_gemm_without_activation_runs_on_opencl():  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm", transB=1)]
    inits = [numpy_helper.from_array(randn(10, 7), "b"), numpy_helper.from_array(randn(10), "c")]
    model = make_model(nodes, [("a", F, (4, 7))], [("y", F, None)], initializers=inits)
    assert every_scheme(model, {"a": randn(4, 7)}, tol=2e-6) == ["Gemm/gemm"]
