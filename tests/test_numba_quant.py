"""The numba backend's QuantizeLinear and DequantizeLinear (per tensor, float32 <-> int8/uint8)
bit for bit against the reference: random values, rounding ties, values past the code range,
NaN and infinities, at every opset whose definition differs; where they decline; and a QDQ
model, whose quantized weights the planner folds into float constants."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refmnn  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import assert_bit_equal, make_model, quantization_values  # noqa: E402
from tests.numba_checks import F, check_node  # noqa: E402

CODES = {"int8": (TensorProto.INT8, np.int8), "uint8": (TensorProto.UINT8, np.uint8)}
SCALE = np.float32(0.0371)


def _node_model(op: str, x_type: int, y_type: int | None, zero: np.ndarray | None, opset: int,
                shape: tuple[int, ...] = (40000,), **attrs):  # type: ignore[no-untyped-def]
    inits = [numpy_helper.from_array(np.array(SCALE), "scale")]
    inputs = ["X", "scale"]
    if zero is not None:
        inits.append(numpy_helper.from_array(zero, "zero"))
        inputs.append("zero")
    node = helper.make_node(op, inputs, ["Y"], name="n0", **attrs)
    return make_model([node], [("X", x_type, shape)], [("Y", y_type or 0, None)],
                      initializers=inits, opset=opset)


def _bit_equal(want):  # type: ignore[no-untyped-def]
    return lambda scheme, outputs: assert_bit_equal(outputs[0], want, scheme)


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23])
@pytest.mark.parametrize("code", ["int8", "uint8", None])
def test_quantize_linear_is_the_reference_bit_for_bit(code, opset):
    elem, dtype = CODES[code] if code else (TensorProto.UINT8, np.uint8)
    zero = None if code is None else np.array(-7 if dtype == np.int8 else 131, dtype)
    model = _node_model("QuantizeLinear", F, elem, zero, opset)
    x = quantization_values(40000, SCALE, opset)
    want = refmnn.Session(model, check=False).run({"X": x})["Y"]
    assert want.dtype == dtype and len(np.unique(want)) > 200  # both ends of the range reached
    check_node(model, {"X": x}, tol=None, inspect=_bit_equal(want), must_run=("flat",))


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23])
@pytest.mark.parametrize("code", ["int8", "uint8", None])
def test_dequantize_linear_is_the_reference_bit_for_bit(code, opset):
    elem, dtype = CODES[code or "int8"]
    zero = None if code is None else np.array(-7 if dtype == np.int8 else 131, dtype)
    model = _node_model("DequantizeLinear", elem, F, zero, opset, shape=(300, 70))
    info = np.iinfo(dtype)
    x = np.random.default_rng(opset).integers(info.min, info.max + 1, (300, 70)).astype(dtype)
    want = refmnn.Session(model, check=False).run({"X": x})["Y"]
    check_node(model, {"X": x}, tol=None, inspect=_bit_equal(want), must_run=("flat",))


def test_scale_and_zero_point_given_at_run_time():
    """Scale and zero point as graph inputs, new values on every run of one session."""
    nodes = [helper.make_node("QuantizeLinear", ["X", "s", "z"], ["Q"], name="q"),
             helper.make_node("DequantizeLinear", ["Q", "s", "z"], ["Y"], name="d")]
    model = make_model(nodes, [("X", F, (3, 1000)), ("s", F, ()), ("z", TensorProto.INT8, ())],
                       [("Y", F, None), ("Q", TensorProto.INT8, None)], opset=13)
    session = refmnn.Session(model, backends=("numba",), check=False)
    assert {s.backend for s in session.resize({"X": (3, 1000)}).steps
            if isinstance(s, RunStep)} == {"numba"}
    for seed, (s, z) in enumerate([(0.02, 3), (0.5, -100), (1e-3, 0)]):
        feeds = {"X": quantization_values(3000, s, seed).reshape(3, 1000),
                 "s": np.array(s, np.float32),
                 "z": np.array(z, np.int8)}
        want = refmnn.Session(model, check=False).run(feeds)
        got = session.run(feeds)
        for name in ("Q", "Y"):
            assert_bit_equal(got[name], want[name], name)


@pytest.mark.parametrize(("op", "scale", "attrs", "why"), [
    ("QuantizeLinear", np.full(4, SCALE), {"axis": 1}, "per-axis scale"),
    ("QuantizeLinear", np.array(SCALE), {"precision": TensorProto.FLOAT16}, "float16 division"),
    ("DequantizeLinear", np.array(SCALE, np.float16), {}, "float16 scale"),
])
def test_other_granularities_and_types_run_on_the_reference(op, scale, attrs, why):
    x_type = F if op == "QuantizeLinear" else TensorProto.INT8
    node = helper.make_node(op, ["X", "scale"], ["Y"], name="n0", **attrs)
    model = make_model([node], [("X", x_type, (2, 4))], [("Y", 0, None)],
                       initializers=[numpy_helper.from_array(scale, "scale")], opset=23)
    session = refmnn.Session(model, backends=("numba",), check=False)
    (step,) = [s for s in session.resize({"X": (2, 4)}).steps if isinstance(s, RunStep)]
    assert step.backend == "reference", why


def _qdq_conv_model() -> tuple:  # type: ignore[type-arg]
    """X -> Q -> DQ -> Conv (weights int8 through DQ, 3x3, padded) -> Relu -> Q -> DQ: the
    pattern onnxruntime's quantize_static writes."""
    rng = np.random.default_rng(5)
    w = rng.integers(-127, 128, (32, 16, 3, 3)).astype(np.int8)  # > FOLD_LIMIT
    inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(np.float32(0.004), "w_s"),
             numpy_helper.from_array(np.int8(0), "w_z"),
             numpy_helper.from_array(np.float32(0.02), "x_s"),
             numpy_helper.from_array(np.uint8(128), "x_z"),
             numpy_helper.from_array(np.float32(0.05), "y_s"),
             numpy_helper.from_array(np.uint8(0), "y_z"),
             numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")]
    nodes = [helper.make_node("QuantizeLinear", ["X", "x_s", "x_z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["wf"]),
             helper.make_node("Conv", ["xf", "wf", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "y_s", "y_z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "y_s", "y_z"], ["Y"])]
    model = make_model(nodes, [("X", F, (1, 16, 20, 20))], [("Y", F, None)],
                       initializers=inits, opset=13)
    return model, {"X": rng.standard_normal((1, 16, 20, 20)).astype(np.float32)}


def test_a_qdq_model_runs_on_numba_with_its_weights_folded():
    """Every node on numba, the weights' DequantizeLinear folded when planning (so the 3x3
    convolution gets the constant-weight schemes), within one code step of the reference:
    the convolution sums in another order, which may move a value across a rounding boundary
    of the last QuantizeLinear."""
    model, feeds = _qdq_conv_model()
    want = refmnn.Session(model, check=False).run(feeds)["Y"]
    session = refmnn.Session(model, backends=("numba",), check=False)
    got = session.run(feeds)["Y"]
    steps = [s for s in session.plan.steps if isinstance(s, RunStep)]
    assert {s.backend for s in steps} == {"numba"}, [(s.node.op, s.reason) for s in steps]
    assert [s.node.op for s in steps].count("DequantizeLinear") == 2  # not the weights'
    assert "wf" in session.plan.graph.initializers
    conv = next(s for s in steps if "Conv" in s.node.op)
    assert str(conv.scheme).startswith("winograd"), conv.scheme
    step = np.float32(0.05)
    assert np.abs(got - want).max() <= step * 1.0001
    assert np.mean(got == want) > 0.99
