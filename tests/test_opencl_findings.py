"""The OpenCL backend where tools/fuzz_models.py found it wrong: an outer value a subgraph reads
while it sits in a device buffer, and tanh at the top of the float range; where
tools/fuzz_graphs.py --special did: Winograd's transforms spreading an infinite input; where the
conformance report's ULP column did (passes inside the tolerance, far from the oracle): Elu near
0 and the fused tanh Gelu's negative tail; and where special values fed to every scheme did:
infinite weights on the padding and the fused erf Gelu past its fit's clip. Skipped with the
probe's reason when OpenCL is missing (the helpers come from test_opencl_backend, whose import
skips)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import refmnn
from refmnn.schedule.plan import RunStep
from tests.helpers import assert_same_specials, make_model, special_input
from tests.test_opencl_backend import F, every_scheme, node_model, opencl_session, randn


def test_a_subgraph_reads_an_outer_value_held_on_the_device():  # type: ignore[no-untyped-def]
    """If runs on the reference; the branch reads ``r``, which Relu left in an OpenCL buffer:
    the branch must see its values (downloaded), not the device tensor."""
    f = TensorProto.FLOAT
    then_branch = helper.make_graph([helper.make_node("Add", ["r", "r"], ["t"])], "then", [],
                                    [helper.make_tensor_value_info("t", f, [2, 3])])
    else_branch = helper.make_graph([helper.make_node("Neg", ["r"], ["e"])], "else", [],
                                    [helper.make_tensor_value_info("e", f, [2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_branch,
                              else_branch=else_branch)]
    model = make_model(nodes, [("x", f, [2, 3]), ("c", TensorProto.BOOL, [])], [("y", f, [2, 3])])
    session = opencl_session(model)
    x = randn(2, 3)
    placed = {s.node.name: s.backend for s in session.resize({"x": (2, 3), "c": ()}).steps
              if isinstance(s, RunStep)}
    assert placed == {"relu": "opencl", "if": "reference"}
    for c in (True, False):
        got = session.run({"x": x, "c": np.array(c)})["y"]
        np.testing.assert_array_equal(got, 2 * np.maximum(x, 0) if c else -np.maximum(x, 0))


@pytest.mark.parametrize("op", ["Tanh", "ConvGelu"])
def test_tanh_reaches_one(op):  # type: ignore[no-untyped-def]
    """PoCL's tanh stops at 1 - 2^-24; the kernels' tanh_sat reaches +-1, in Tanh and in the
    fused epilogue of Gelu's tanh form (at -inf: -inf * (1 + tanh) = -inf * 0 = NaN, as in
    the reference, not -inf)."""
    x = np.array([-np.inf, -20.0, -10.0, 9.5, 10.0, 100.0, np.inf, np.nan, 0.5], np.float32)
    if op == "Tanh":
        model = node_model("Tanh", [(9,)])
        feeds = {"x0": x}
    else:  # a 1x1 convolution by 1 (exact) with the Gelu fused into its epilogue
        nodes = [helper.make_node("Conv", ["x0", "w"], ["c"], name="conv"),
                 helper.make_node("Gelu", ["c"], ["y0"], name="gelu", approximate="tanh")]
        model = make_model(nodes, [("x0", F, [1, 1, 1, 9])], [("y0", F, [1, 1, 1, 9])],
                           initializers=[numpy_helper.from_array(np.ones((1, 1, 1, 1),
                                                                         np.float32), "w")],
                           opset=20)
        feeds = {"x0": x.reshape(1, 1, 1, 9)}
    session = opencl_session(model)
    steps = [s for s in session.resize({"x0": feeds["x0"].shape}).steps if isinstance(s, RunStep)]
    assert [s.backend for s in steps] == ["opencl"], [(s.node.op, s.backend) for s in steps]
    got = session.run(feeds)["y0"].ravel()
    want = refmnn.Session(model, check=False).run(feeds)["y0"].ravel()
    if op == "Tanh":
        np.testing.assert_array_equal(got[[0, 1, 2, 4, 5, 6]], [-1, -1, -1, 1, 1, 1])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)  # NaN where the reference's is


def test_elu_keeps_its_small_negative_values():  # type: ignore[no-untyped-def]
    """Elu(x) = alpha (exp(x) - 1) for x < 0: computed as written, exp(x) - 1 cancels, and a
    tiny x gave 0 instead of alpha x (the conformance report's ``signed_zeros`` and ``extremal``
    samples passed inside their absolute tolerance, 1e7 ULP from the oracle); expm1 keeps it."""
    x = np.array([-1e-30, -1e-10, -3e-8, -1e-4, -0.01, -0.5, -1.0, -20.0, 0.0, 1e-30],
                 np.float32)
    model = node_model("Elu", [(10,)], attrs={"alpha": 1.5})
    session = opencl_session(model)
    steps = [s for s in session.resize({"x0": (10,)}).steps if isinstance(s, RunStep)]
    assert [s.backend for s in steps] == ["opencl"]
    got = session.run({"x0": x})["y0"]
    want = np.where(x < 0, 1.5 * np.expm1(x.astype(np.float64)), x)
    np.testing.assert_allclose(got, want, rtol=4e-7, atol=0)


def test_fused_tanh_gelu_keeps_its_negative_tail():  # type: ignore[no-untyped-def]
    """The tanh form of Gelu in a fused epilogue computed 0.5 x (1 + tanh(...)) in float: the sum
    cancels for negative x, so every digit was gone below about -5 (3.1e6 ULP from the oracle
    in a conformance sample). Now in double, as the reference, rounded once. (The erf form
    already was in double; its 1 + erf cancels only below about -5.5, which the conformance
    report lists among the passes far from the oracle.)"""
    approximate = "tanh"
    x = np.array([-12.0, -9.0, -7.0, -5.5, -4.0, -3.0, -1.0, -0.0, 0.5, 3.0, 8.0], np.float32)
    nodes = [helper.make_node("Conv", ["x0", "w"], ["c"], name="conv"),
             helper.make_node("Gelu", ["c"], ["y0"], name="gelu", approximate=approximate)]
    model = make_model(nodes, [("x0", F, [1, 1, 1, 11])], [("y0", F, [1, 1, 1, 11])],
                       initializers=[numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32),
                                                             "w")], opset=20)
    feeds = {"x0": x.reshape(1, 1, 1, 11)}
    session = opencl_session(model)
    steps = [s for s in session.resize({"x0": (1, 1, 1, 11)}).steps if isinstance(s, RunStep)]
    assert [(s.node.op, s.backend) for s in steps] == [("FusedConv", "opencl")]
    got = session.run(feeds)["y0"].ravel()
    want = refmnn.Session(model, check=False).run(feeds)["y0"].ravel()
    assert np.all(want[2:6] < 0)  # the reference keeps the tail (to about -8)
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=0)


def test_fused_erf_gelu_of_large_negative_and_infinite_values():  # type: ignore[no-untyped-def]
    """The erf form of Gelu in a fused epilogue, past its fit's clip (v / sqrt 2 < -4): 0.5 v
    (1 + erf) kept the clipped erf(-4) = -1 + 1.5e-8, so Gelu(-inf) was -inf (the reference:
    -inf * 0 = NaN) and Gelu(-3e38) -2.3e30 (the reference: -0). Now -0 there (the true
    values are above -4.4e-8) and NaN at -inf; within 2.1e-9 (absolute) above the clip."""
    x = np.array([-np.inf, -3e38, -1e6, -100.0, -6.0, -5.7, -5.6, -4.0, -3.0, -1.0, -0.0, 0.0,
                  0.5, 3.0, 8.0, 3e38, np.inf, np.nan], np.float32)
    nodes = [helper.make_node("Conv", ["x0", "w"], ["c"], name="conv"),
             helper.make_node("Gelu", ["c"], ["y0"], name="gelu")]
    model = make_model(nodes, [("x0", F, [1, 1, 1, x.size])], [("y0", F, [1, 1, 1, x.size])],
                       initializers=[numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32),
                                                             "w")], opset=20)
    feeds = {"x0": x.reshape(1, 1, 1, x.size)}
    session = opencl_session(model)
    steps = [s for s in session.resize({"x0": (1, 1, 1, x.size)}).steps if isinstance(s, RunStep)]
    assert [(s.node.op, s.backend) for s in steps] == [("FusedConv", "opencl")]
    got = session.run(feeds)["y0"].ravel()
    want = refmnn.Session(model, check=False).run(feeds)["y0"].ravel()
    assert_same_specials(got, want, "gelu", rtol=2e-6, atol=4.4e-8)
    above = x > -5.656854
    assert_same_specials(got[above], want[above], "above the clip", rtol=2e-6, atol=2.1e-9)


@pytest.mark.parametrize("fused", [False, True], ids=["Conv", "FusedConv-relu-residual"])
def test_winograd_with_infinite_and_nan_inputs_matches_the_reference(fused):  # type: ignore
    """Winograd F(2,3) on an image whose inputs are a tenth NaN, +-inf, zeros and subnormals
    (tools/fuzz_graphs.py --special --scale 3 found 55 outputs NaN where the reference has
    infinities): its transforms spread a tile's infinity to outputs whose own windows never see
    it, so winograd_output stores a strip of tiles whose computed outputs are not all finite
    summed the direct way instead. NaN, infinities and numbers where the reference has them,
    also through a residual and a Relu (which would have turned a -inf that should be NaN
    into 0)."""
    shape = (2, 12, 9, 15)
    x = special_input(shape)
    inits = [("w", randn(8, 12, 3, 3)), ("b", randn(8))]
    if fused:
        f = TensorProto.FLOAT
        node = helper.make_node("FusedConv", ["x0", "w", "b", "z"], ["y0"], name="n0",
                                domain="refmnn", pads=[1, 1, 1, 1], activation="relu")
        model = make_model([node], [("x0", f, shape), ("z", f, (2, 8, 9, 15))], [("y0", f, None)],
                           initializers=[numpy_helper.from_array(v, n) for n, v in inits],
                           extra_opsets=[("refmnn", 1)])
        feeds = {"x0": x, "z": randn(2, 8, 9, 15)}
    else:
        model = node_model("Conv", [shape], {"pads": [1, 1, 1, 1]}, inits=inits)
        feeds = {"x0": x}
    want = refmnn.Session(model, check=False).run(feeds)["y0"]
    session = opencl_session(model)
    (step,) = [s for s in session.resize({k: v.shape for k, v in feeds.items()}).steps
               if isinstance(s, RunStep)]
    assert (step.backend, step.scheme) == ("opencl", "winograd_f23"), (step.backend, step.scheme)
    for _ in range(2):  # then the same image made finite, on the same session
        assert_same_specials(session.run(feeds)["y0"], want, "opencl", rtol=1e-5, atol=1e-5)
        feeds = {**feeds, "x0": np.nan_to_num(feeds["x0"], nan=0.0, posinf=1.0, neginf=-1.0)}
        want = refmnn.Session(model, check=False).run(feeds)["y0"]


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), [
    ((1, 8, 7, 9), (6, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 4, 9, 8), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [2, 1],
                                  "pads": [1, 0, 2, 1]}),
    ((1, 6, 8, 8), (12, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 8, 12, 20), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    ((1, 3, 10, 10), (4, 3, 5, 5), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
], ids=["winograd", "grouped", "depthwise_s2", "depthwise_s1", "same_upper"])
@pytest.mark.parametrize("runtime", [False, True], ids=["constant", "runtime"])
def test_infinite_and_nan_weights_where_windows_overlap_the_padding(x_shape, w_shape, attrs,
                                                                    runtime):
    """The reference pads with zeros and multiplies them by the weights, so an infinite or NaN
    weight makes NaN of every output whose window puts it on the padding. The direct and
    depthwise kernels skipped the padding taps (numbers there; Winograd's strips summed the
    direct way too): now every scheme, forced in turn, has the reference's NaN, infinities and
    numbers, with the weights a constant or given at run time."""
    w = randn(*w_shape)  # +inf, NaN, -inf as the first tap of three filters
    w[[0, w_shape[0] // 2, -1], :, 0, 0] = [[np.inf], [np.nan], [-np.inf]]
    x = randn(*x_shape)
    if runtime:
        model = node_model("Conv", [x_shape, w_shape], attrs)
        feeds = {"x0": x, "x1": w}
    else:
        model = node_model("Conv", [x_shape], attrs, inits=[("w", w), ("b", randn(w_shape[0]))])
        feeds = {"x0": x}
    want = refmnn.Session(model, check=False).run(feeds)["y0"]
    assert np.isnan(want).any() and np.isfinite(want).any()

    def compare(what, got, expected):  # type: ignore[no-untyped-def]
        assert_same_specials(got, expected, what, rel_l2=1e-5)
    checked = every_scheme(model, feeds, compare=compare)
    assert "Conv/direct" in checked, checked
