"""The numba backend's direct_few_oc16 and direct_few_oc16_max_pool
(kernels/conv_direct_few_oc16.py): a stem convolution in tiles of sixteen output channels by eight
outputs, alone and with the max pool after it. Against the reference (:func:`tests.numba_checks.check_node`), bit for bit
against the four-channel tiles of direct3x3_few_simd and direct_few_max_pool (the same sums in
the same order), and as the planner's choice."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import helper, numpy_helper  # noqa: E402

import refmnn  # noqa: E402
from refmnn.backends.numba import NumbaBackend  # noqa: E402
from refmnn.backends.numba.kernels.simd import native  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import make_model  # noqa: E402
from tests.numba_checks import F, check_node, rand  # noqa: E402

pytestmark = pytest.mark.skipif(not native(), reason="direct_few_oc16 needs AVX2 and FMA")

ACTS = [("none", {}), ("relu", {}), ("clip", {"activation_min": 0.0, "activation_max": 0.5}),
        ("leaky_relu", {"activation_alpha": 0.2})]  # the last one in the epilogue pass


def _conv(x_shape, oc, strides, pads, act="none", params=None, residual=False):
    n, c, h, wd = x_shape
    w = numpy_helper.from_array(rand(oc, c, 3, 3) * 0.5, "W")
    b = numpy_helper.from_array(rand(oc), "B")
    oh = (h + pads[0] + pads[2] - 3) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - 3) // strides[1] + 1
    inputs = ["X", "W", "B"] + (["Z"] if residual else [])
    node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn", pads=pads,
                            strides=strides, activation=act, **(params or {}))
    decl = [("X", F, x_shape)] + ([("Z", F, (n, oc, oh, ow))] if residual else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=[w, b],
                       extra_opsets=[("refmnn", 1)])
    feeds = {"X": rand(*x_shape), **({"Z": rand(n, oc, oh, ow)} if residual else {})}
    return model, feeds


CASES = [  # (input, output channels, strides, pads)
    ((2, 3, 61, 67), 32, [2, 2], [1, 1, 1, 1]),  # MobileNet's stem, smaller: padded edge tiles
    ((2, 3, 33, 30), 16, [2, 2], [0, 0, 0, 0]),  # SqueezeNet's: no padding, a short last tile
    ((2, 1, 20, 29), 16, [1, 1], [0, 1, 2, 0]),  # stride 1, uneven padding, one channel
    ((2, 4, 9, 8), 16, [1, 1], [1, 1, 1, 1]),    # rows of exactly one tile
    ((2, 3, 40, 37), 16, [3, 2], [2, 0, 1, 1]),  # strides that differ, padding past the reach
]


@pytest.mark.parametrize(("act", "params"), ACTS)
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(("x_shape", "oc", "strides", "pads"), CASES)
def test_direct_few_oc16_matches_the_reference(act, params, residual, x_shape, oc, strides,
                                               pads):
    """Bias and none / Relu / Clip in the tiles, a residual (then the activation) or another
    activation in the epilogue pass; N = 2."""
    model, feeds = _conv(x_shape, oc, strides, pads, act, params, residual)
    check_node(model, feeds, must_run=("direct_few_oc16",))


def test_direct_few_oc16_is_bit_for_bit_direct3x3_few_simd():
    """The same sums in the same order (bias first, then the taps by channel, row, column, one
    FMA each) as direct3x3_few_simd's tiles, where both apply; NaN and -inf propagate alike."""
    model, feeds = _conv((2, 3, 45, 51), 32, [2, 2], [1, 1, 1, 1], "relu")
    feeds["X"][0, 1, 5:9, 7] = np.nan
    feeds["X"][1, 0, 20, 3:6] = -np.inf
    outputs = {}

    def keep(scheme, outs):
        outputs[scheme] = outs[0].copy()
    check_node(model, feeds, tol=None, inspect=keep,
               must_run=("direct_few_oc16", "direct3x3_few_simd"))
    np.testing.assert_array_equal(outputs["direct_few_oc16"], outputs["direct3x3_few_simd"])
    assert np.isnan(outputs["direct_few_oc16"]).any()


def test_a_strided_output_is_written_through_a_temporary():
    model, feeds = _conv((1, 3, 30, 34), 16, [2, 2], [1, 1, 1, 1], "clip",
                         {"activation_min": 0.0, "activation_max": 0.5})
    session = refmnn.Session(model, backends=("numba",), check=False)
    want = session.run(feeds)["Y"]
    spec = session.plan.specs["n0"]
    backend = NumbaBackend()
    kdef = next(k for k in backend.kernels() if k.op == "FusedConv")
    kernel = next(s for s in kdef.schemes if s.name == "direct_few_oc16").build(backend, spec)
    kernel.prepare(spec)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    wide = np.full((*want.shape[:3], 2 * want.shape[3]), np.nan, np.float32)
    backend.begin_run()
    kernel.run([feeds["X"], inits["W"], inits["B"]], [wide[..., ::2]], None)
    backend.end_run()
    np.testing.assert_array_equal(wide[..., ::2], want)
    assert np.isnan(wide[..., 1::2]).all()
    backend.close()


POOL = {"pool_kernel_shape": [3, 3], "pool_strides": [2, 2]}
STEMS = {  # (input, weights, conv attributes, pool attributes)
    "squeezenet": ((1, 3, 63, 63), (16, 3, 3, 3), {"strides": [2, 2]}, {"pool_ceil_mode": 1}),
    "mobilenet": ((2, 3, 64, 70), (32, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]},
                  {"pool_pads": [1, 1, 1, 1]}),
    "stride1": ((1, 4, 35, 33), (16, 4, 3, 3), {"pads": [1, 1, 1, 1]}, {"pool_ceil_mode": 1}),
}


@pytest.mark.parametrize(("act", "params"), ACTS[:3])
@pytest.mark.parametrize("stem", sorted(STEMS))
def test_direct_few_oc16_max_pool_is_bit_for_bit_direct_few_max_pool(stem, act, params):
    """Against the reference, and bit for bit against the four-channel fused kernel (the same
    convolution sums, the same maxima); NaN propagates alike."""
    x, w, conv, pool = STEMS[stem]
    node = helper.make_node("FusedConvMaxPool", ["X", "W", "B"], ["Y"], name="n0",
                            domain="refmnn", activation=act, **params, **conv, **POOL, **pool)
    inits = [numpy_helper.from_array(rand(*w) * 0.3, "W"),
             numpy_helper.from_array(rand(w[0]), "B")]
    model = make_model([node], [("X", F, x)], [("Y", F, None)], initializers=inits,
                       extra_opsets=[("refmnn", 1)])
    feeds = {"X": rand(*x)}
    check_node(model, feeds, must_run=("direct_few_oc16_max_pool",))
    feeds["X"][0, 1, 5:9, 7] = np.nan
    outputs = {}

    def keep(scheme, outs):
        outputs[scheme] = outs[0].copy()
    check_node(model, feeds, tol=None, inspect=keep,
               must_run=("direct_few_oc16_max_pool", "direct_few_max_pool"))
    np.testing.assert_array_equal(outputs["direct_few_oc16_max_pool"],
                                  outputs["direct_few_max_pool"])
    assert np.isnan(outputs["direct_few_oc16_max_pool"]).any()


def _run(model, x):
    """The numba session's output and its steps' (op, scheme)."""
    session = refmnn.Session(model, backends=("numba",), check=False)
    y = session.run({"X": x})["Y"]
    return y, [(s.node.op, s.scheme) for s in session.plan.steps if isinstance(s, RunStep)]


@pytest.mark.parametrize(("oc", "k", "want"), [
    (32, 3, "direct_few_oc16"),      # MobileNet's stem
    (24, 3, "direct3x3_few_simd"),   # output channels not a multiple of 16
    (64, 7, "direct7x7_few_simd"),   # a 7x7 kernel: the four-channel tiles ran faster
])
def test_the_planner_chooses_direct_few_oc16_for_3x3_stems(oc, k, want):
    w = numpy_helper.from_array(rand(oc, 3, k, k), "W")
    nodes = [helper.make_node("Conv", ["X", "W"], ["c"], name="conv", strides=[2, 2],
                              pads=[k // 2] * 4),
             helper.make_node("Relu", ["c"], ["Y"], name="relu")]
    model = make_model(nodes, [("X", F, (1, 3, 64, 64))], [("Y", F, None)], initializers=[w])
    x = rand(1, 3, 64, 64)
    got, steps = _run(model, x)
    assert steps == [("FusedConv", want)]
    np.testing.assert_allclose(got, refmnn.Session(model, check=False).run({"X": x})["Y"],
                               rtol=1e-5, atol=1e-5)


def test_a_stem_with_sixteen_channels_and_its_pool_fuse_into_the_oc16_kernel():
    w = numpy_helper.from_array(rand(16, 3, 3, 3) * 0.3, "W")
    nodes = [helper.make_node("Conv", ["X", "W"], ["c"], name="conv", strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["Y"], name="pool", kernel_shape=[3, 3],
                              strides=[2, 2], ceil_mode=1)]
    model = make_model(nodes, [("X", F, (1, 3, 63, 63))], [("Y", F, None)], initializers=[w])
    x = rand(1, 3, 63, 63)
    got, steps = _run(model, x)
    assert steps == [("FusedConvMaxPool", "direct_few_oc16_max_pool")]
    np.testing.assert_allclose(got, refmnn.Session(model, check=False).run({"X": x})["Y"],
                               rtol=1e-5, atol=1e-5)
