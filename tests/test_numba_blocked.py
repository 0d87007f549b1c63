"""The numba backend's channel-blocked kernels (kernels/blocked.py): gemm_1x1_nc8hw8,
depthwise3x3_nc8hw8, direct_few_oc16_nc8hw8 and FromNC8HW8's transpose8, each against the
reference on one-node models (:func:`tests.numba_checks.check_node`: every applicable scheme,
no input written, no allocation per run), the stem bit for bit against direct_few_oc16, and
the planner putting a MobileNet block's chain into the layout."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import helper, numpy_helper  # noqa: E402

import refmnn  # noqa: E402
from refmnn.backends.numba.kernels.simd import native  # noqa: E402
from refmnn.ops.blocked import from_nc8hw8, to_nc8hw8  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import make_model  # noqa: E402
from tests.numba_checks import F, check_node, rand, rel_l2  # noqa: E402
from tests.test_blocked import _inverted_residual  # noqa: E402

pytestmark = pytest.mark.skipif(not native(), reason="the blocked kernels need AVX2 and FMA")

ACTS = [("none", {}), ("relu", {}), ("clip", {"activation_min": -0.25, "activation_max": 0.5})]


def _blocked_conv(x_shape, w_shape, *, act="none", params=None, residual=False, bias=True,
                  layout="NC8HW8", **attrs):
    """A one-node FusedConvNC8HW8 model on the NCHW shapes ``x_shape`` and ``w_shape``, and its
    feeds (X blocked unless ``layout`` is NCHW)."""
    n, c = x_shape[:2]
    x = rand(*x_shape)
    ref = refmnn.ops.fused.fused_conv.reference(
        x, rand(*w_shape), None, None, auto_pad="NOTSET", dilations=None,
        group=attrs.get("group", 1), kernel_shape=None, pads=attrs.get("pads"),
        strides=attrs.get("strides"), activation="none", activation_alpha=0.0,
        activation_min=0.0, activation_max=0.0)  # for Y's shape
    inits = [numpy_helper.from_array(rand(*w_shape) * 0.3, "W")]
    inputs = ["X", "W"]
    if bias:
        inits.append(numpy_helper.from_array(rand(w_shape[0]), "B"))
        inputs.append("B")
    feeds = {"X": x if layout == "NCHW" else to_nc8hw8(x)}
    decl = [("X", F, feeds["X"].shape)]
    if residual:
        inputs += [""] * (3 - len(inputs)) + ["Z"]
        feeds["Z"] = to_nc8hw8(rand(*ref.shape))
        decl.append(("Z", F, feeds["Z"].shape))
    node = helper.make_node("FusedConvNC8HW8", inputs, ["Y"], name="n0", domain="refmnn",
                            activation=act, input_layout=layout, **(params or {}), **attrs)
    model = make_model([node], decl, [("Y", F, None)], initializers=inits,
                       extra_opsets=[("refmnn", 1)])
    return model, feeds


POINTWISE = [  # (input NCHW, output channels)
    ((2, 16, 5, 6), 24),  # a group of three blocks; 30 pixels: a task's one-pixel tail
    ((1, 32, 7, 7), 40),  # a whole group and a group of one block
    ((1, 8, 3, 3), 16),   # two blocks, nine pixels
    ((2, 64, 14, 14), 96),
    ((1, 24, 1, 1), 8),   # one pixel
]


@pytest.mark.parametrize(("act", "params"), ACTS)
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(("x_shape", "oc"), POINTWISE)
def test_gemm_1x1_nc8hw8_matches_the_reference(x_shape, oc, residual, act, params):
    model, feeds = _blocked_conv(x_shape, (oc, x_shape[1], 1, 1), act=act, params=params,
                                 residual=residual, bias=not residual or act == "relu")
    check_node(model, feeds, must_run=("gemm_1x1_nc8hw8",))


DEPTHWISE = [  # (input NCHW, strides, pads)
    ((2, 16, 7, 9), (1, 1), (1, 1, 1, 1)),
    ((1, 8, 9, 8), (2, 2), (1, 1, 1, 1)),
    ((1, 24, 5, 11), (1, 2), (0, 1, 2, 1)),
    ((1, 8, 1, 2), (1, 1), (1, 1, 1, 1)),  # every output in the padding's reach
    ((2, 8, 6, 6), (3, 3), (0, 0, 0, 0)),
]


@pytest.mark.parametrize(("act", "params"), ACTS)
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(("x_shape", "strides", "pads"), DEPTHWISE)
def test_depthwise3x3_nc8hw8_matches_the_reference(x_shape, strides, pads, residual, act,
                                                  params):
    c = x_shape[1]
    model, feeds = _blocked_conv(x_shape, (c, 1, 3, 3), act=act, params=params,
                                 residual=residual, group=c, strides=list(strides),
                                 pads=list(pads))
    check_node(model, feeds, must_run=("depthwise3x3_nc8hw8",))


@pytest.mark.parametrize(("act", "params"), ACTS)
@pytest.mark.parametrize(("x_shape", "oc", "strides", "pads"), [
    ((2, 3, 29, 31), 32, [2, 2], [1, 1, 1, 1]),
    ((1, 1, 12, 9), 16, [1, 1], [0, 1, 2, 0]),
])
def test_direct_few_oc16_nc8hw8_is_direct_few_oc16_blocked(x_shape, oc, strides, pads, act,
                                                           params):
    """The same tiles as direct_few_oc16's, stored without the transposes: bit for bit its
    output in NC8HW8."""
    model, feeds = _blocked_conv(x_shape, (oc, x_shape[1], 3, 3), act=act, params=params,
                                 layout="NCHW", strides=strides, pads=pads)
    outputs = {}

    def keep(scheme, outs):
        outputs[scheme] = outs[0].copy()
    check_node(model, feeds, inspect=keep, must_run=("direct_few_oc16_nc8hw8",))
    node = helper.make_node("FusedConv", ["X", "W", "B"], ["Y"], name="n0", domain="refmnn",
                            activation=act, strides=strides, pads=pads, **params)
    plain = make_model([node], [("X", F, x_shape)], [("Y", F, None)],
                       initializers=list(model.graph.initializer), extra_opsets=[("refmnn", 1)])
    session = refmnn.Session(plain, backends=("numba",), check=False)
    want = session.run(feeds)["Y"]
    assert [s.scheme for s in session.plan.steps if isinstance(s, RunStep)] == ["direct_few_oc16"]
    np.testing.assert_array_equal(outputs["direct_few_oc16_nc8hw8"], to_nc8hw8(want))


@pytest.mark.parametrize(("shape", "channels"), [((2, 3, 5, 7, 8), 20), ((1, 1, 9, 9, 8), 8),
                                                 ((1, 2, 24, 8), 16), ((1, 4, 2, 2, 2, 8), 32)])
def test_from_nc8hw8_matches_the_reference(shape, channels):
    node = helper.make_node("FromNC8HW8", ["X"], ["Y"], name="n0", domain="refmnn",
                            channels=channels)
    model = make_model([node], [("X", F, shape)], [("Y", F, None)],
                       extra_opsets=[("refmnn", 1)])
    x = to_nc8hw8(from_nc8hw8(rand(*shape), channels))  # zero padding lanes, as produced

    def exact(scheme, outs):
        np.testing.assert_array_equal(outs[0], from_nc8hw8(x, channels))
    check_node(model, {"X": x}, inspect=exact, must_run=("transpose8",))


def test_the_planner_runs_a_mobilenet_block_in_the_layout():
    model, feeds = _inverted_residual(second_output=True)
    session = refmnn.Session(model, backends=("numba",), check=False)
    got = session.run(feeds)
    want = refmnn.Session(model, check=False).run(feeds)
    for key in want:
        assert rel_l2(got[key], want[key]) <= 1e-5, key
    steps = [(s.node.name, s.scheme) for s in session.plan.steps if isinstance(s, RunStep)]
    assert steps[:6] == [("stem", "direct_few_oc16_nc8hw8"), ("expand", "gemm_1x1_nc8hw8"),
                         ("dw", "depthwise3x3_nc8hw8"), ("dw/FromNC8HW8", "transpose8"),
                         ("project", "gemm_1x1_nc8hw8"), ("project/FromNC8HW8", "transpose8")]
    assert steps[6][0].startswith("pool")  # the pool (lowered to a ReduceMean) reads NCHW
    assert all(s.backend == "numba" for s in session.plan.steps if isinstance(s, RunStep))
