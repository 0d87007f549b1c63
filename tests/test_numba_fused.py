"""refmnn's fused ops (FusedConv, FusedMatMul, FusedAttention) and Gemm, whose epilogue they
share, on the numba backend: every applicable scheme forced and compared with the reference
(:func:`tests.numba_checks.check_node`), every activation, bias and residual form."""

from __future__ import annotations

import numpy as np
import pytest

import refmnn

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import helper, numpy_helper  # noqa: E402

from tests.helpers import make_model  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.numba_checks import (F, RNG, SIMD_1X1, SIMD_DW_C8, SIMD_DW_S2, SIMD_FEW,  # noqa: E402
                                SIMD_MATMUL, WINOGRAD, check_node, conv_model, rand, rel_l2)

FUSED_ACTS = [("none", {}), ("relu", {}), ("clip", {"activation_min": 0.0, "activation_max": 0.5}),
              ("leaky_relu", {"activation_alpha": 0.2}), ("sigmoid", {}), ("tanh", {}), ("gelu", {}),
              ("gelu_tanh", {})]


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS)
@pytest.mark.parametrize("residual", [False, True])
def test_fused_conv(act, params, residual):
    """refmnn::FusedConv = act(Conv(X, W, B) + Z): every Conv scheme plus the epilogue."""
    w = numpy_helper.from_array(rand(6, 6, 3, 3), "W")
    b = numpy_helper.from_array(rand(6), "B")
    inputs = ["X", "W", "B"] + (["Z"] if residual else [])
    node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn", pads=[1, 1, 1, 1],
                            activation=act, **params)
    decl = [("X", F, (1, 6, 8, 8))] + ([("Z", F, (1, 6, 8, 8))] if residual else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=[w, b], extra_opsets=[("refmnn", 1)])
    feeds = {"X": rand(1, 6, 8, 8), **({"Z": rand(1, 6, 8, 8)} if residual else {})}
    # 2e-5, not 1e-5: the session runs Winograd F(4,3), whose transforms' rounding, relative to
    # outputs that Clip to [0, 0.5] makes small, reached 1.3e-5 (3000 random draws of this case
    # with a residual: median 2e-6, p99 7.6e-6, 9 above 1e-5); the draws depend on the tests
    # that ran before in the worker, so 1e-5 failed about once in 300 runs
    check_node(model, feeds, tol=2e-5, must_run=WINOGRAD)


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS[:3] + FUSED_ACTS[6:7])
def test_fused_conv_1x1_and_depthwise(act, params):
    for w_shape, attrs, schemes in (((5, 6, 1, 1), {}, ("gemm_1x1", *SIMD_1X1)),
                                    ((6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}, ("depthwise", "depthwise_s1"))):
        w = numpy_helper.from_array(rand(*w_shape), "W")
        b = numpy_helper.from_array(rand(w_shape[0]), "B")
        node = helper.make_node("FusedConv", ["X", "W", "B"], ["Y"], name="n0", domain="refmnn",
                                activation=act, **attrs, **params)
        model = make_model([node], [("X", F, (2, 6, 7, 7))], [("Y", F, None)], initializers=[w, b],
                           extra_opsets=[("refmnn", 1)])
        check_node(model, {"X": rand(2, 6, 7, 7)}, must_run=schemes)


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS[1:3])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("width", [6, 5])
def test_fused_conv_1x1_activation_passes_nan(act, params, residual, width):
    """gemm_1x1_simd applies Relu and Clip in registers (``simd.vrelu``, ``simd.vclamp``): a NaN
    input reaches every output channel of its pixel as NaN, as in the reference, and +-inf are
    clipped or kept; 11 output channels (two blocks of four, then three), 30 pixels (the last
    six in an 8-wide strip) or 25 (the last one a column, in scalars)."""
    w = numpy_helper.from_array(rand(11, 6, 1, 1), "W")
    b = numpy_helper.from_array(rand(11), "B")
    inputs = ["X", "W", "B"] + (["Z"] if residual else [])
    node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn",
                            activation=act, **params)
    decl = [("X", F, (1, 6, 5, width))] + ([("Z", F, (1, 11, 5, width))] if residual else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=[w, b],
                       extra_opsets=[("refmnn", 1)])
    x = rand(1, 6, 5, width)
    x[0, 2, 1, 4] = np.nan  # pixel 10 or 9: the first strip, inside the tiles
    x[0, 0, 4, width - 1] = np.nan  # the last pixel: the narrow last strip, or the column
    x[0, 3, 0, 0] = np.inf
    feeds = {"X": x, **({"Z": rand(1, 11, 5, width)} if residual else {})}
    expected = refmnn.Session(model, check=False).run(feeds)["Y"]
    assert np.isnan(expected).sum() == 2 * 11

    def same(scheme, outputs):
        got = outputs[0]
        assert np.array_equal(np.isnan(got), np.isnan(expected)), scheme
        finite = np.isfinite(expected)
        assert np.array_equal(got[~finite & ~np.isnan(expected)],
                              expected[~finite & ~np.isnan(expected)]), scheme
        assert rel_l2(got[finite], expected[finite]) <= 1e-5, scheme

    check_node(model, feeds, tol=None, must_run=("gemm_1x1", *SIMD_1X1), inspect=same)


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS[:3] + FUSED_ACTS[4:5] + FUSED_ACTS[6:7])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(("stride", "pads", "scheme", "width"), [
    (1, [1, 2, 2, 0], "depthwise3x3", 8), (2, [1, 2, 2, 0], "depthwise3x3", 8),
    (1, [2, 1, 0, 1], "depthwise3x3_same", 8), (2, [2, 1, 0, 1], "depthwise3x3_same", 8),
    *[(2, [1, 1, 2, 0], scheme, 35) for scheme in SIMD_DW_S2],
    *[(s, [1, 2, 2, 0], scheme, 8) for scheme in SIMD_DW_C8 for s in (1, 2)]])
def test_fused_depthwise3x3(act, params, residual, stride, pads, scheme, width):
    """depthwise3x3, depthwise3x3_same, depthwise3x3_s2_simd and depthwise3x3_c8 apply bias
    and activation in their own pass (the last two in registers for Relu and Clip, then a pass
    over each row or block for the others) and leave a residual, then the activation too, to
    the epilogue: N = 2, odd sizes, uneven padding, stride 1 and 2 (16 channels, two blocks of
    eight, for depthwise3x3_c8; 6 for the others)."""
    c = 16 if scheme in SIMD_DW_C8 else 6
    w = numpy_helper.from_array(rand(c, 1, 3, 3), "W")
    b = numpy_helper.from_array(rand(c), "B")
    x_shape = (2, c, 9, width)
    oh = (9 + pads[0] + pads[2] - 3) // stride + 1
    ow = (width + pads[1] + pads[3] - 3) // stride + 1
    inputs = ["X", "W", "B"] + (["Z"] if residual else [])
    node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn", group=c,
                            pads=pads, strides=[stride, stride], activation=act, **params)
    decl = [("X", F, x_shape)] + ([("Z", F, (2, c, oh, ow))] if residual else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=[w, b], extra_opsets=[("refmnn", 1)])
    feeds = {"X": rand(*x_shape), **({"Z": rand(2, c, oh, ow)} if residual else {})}
    check_node(model, feeds, must_run=(scheme,))


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS[:3] + FUSED_ACTS[6:7])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(("c_in", "stride", "pads", "x_hw"), [
    (3, 2, [1, 1, 1, 1], (11, 12)),     # MobileNet's first layer, odd and even sides
    (3, 2, [0, 0, 0, 0], (13, 10)),     # SqueezeNet's: no padding
    (1, 1, [1, 2, 0, 1], (9, 8)),       # grey, stride 1, uneven padding
    (4, 1, [2, 0, 3, 1], (7, 10)),      # padding wider than the kernel's reach below
    (2, 2, [0, 1, 2, 0], (8, 9)),
    (3, 2, [3, 3, 3, 3], (23, 20)),     # ResNet's first layer (7x7)
])
@pytest.mark.parametrize("k", [3, 7])
def test_fused_direct_few(act, params, residual, c_in, stride, pads, x_hw, k):
    """direct3x3_few and direct7x7_few (at most four input channels): bias and activation in
    their loops, a residual (then the activation) in the epilogue pass; N = 2 (the padded planes
    are reused by the second image), odd sizes, uneven padding, stride 1 and 2, five output
    channels (a block of four and a short one)."""
    h, wd = x_hw
    w = numpy_helper.from_array(rand(5, c_in, k, k), "W")
    b = numpy_helper.from_array(rand(5), "B")
    x_shape = (2, c_in, h, wd)
    oh = (h + pads[0] + pads[2] - k) // stride + 1
    ow = (wd + pads[1] + pads[3] - k) // stride + 1
    inputs = ["X", "W", "B"] + (["Z"] if residual else [])
    node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn", pads=pads,
                            strides=[stride, stride], activation=act, **params)
    decl = [("X", F, x_shape)] + ([("Z", F, (2, 5, oh, ow))] if residual else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=[w, b],
                       extra_opsets=[("refmnn", 1)])
    feeds = {"X": rand(*x_shape), **({"Z": rand(2, 5, oh, ow)} if residual else {})}
    check_node(model, feeds, must_run=(f"direct{k}x{k}_few",))


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS[:3])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(("k", "c_in", "stride", "pads", "x_hw"), [
    (3, 3, 2, [1, 1, 1, 1], (61, 67)),  # MobileNet's first layer, smaller: tasks of 7 rows, 3 left
    (3, 3, 2, [0, 0, 0, 0], (33, 30)),  # SqueezeNet's: no padding
    (3, 1, 1, [0, 1, 2, 0], (20, 29)),  # stride 1, uneven padding, one channel
    (3, 4, 1, [1, 1, 1, 1], (5, 3)),    # a plane narrower than one micro-tile
    (7, 3, 2, [3, 3, 3, 3], (45, 38)),  # ResNet's first layer, smaller
    (7, 2, 2, [0, 1, 2, 0], (23, 20)),  # no padding above, uneven
    (7, 1, 1, [1, 0, 3, 2], (20, 29)),  # stride 1, one channel
    (7, 4, 1, [1, 1, 1, 1], (7, 5)),    # a 3 x 1 output
])
def test_fused_direct_few_simd(act, params, residual, k, c_in, stride, pads, x_hw):
    """direct3x3_few_simd and direct7x7_few_simd (the padded planes of direct3x3_few and
    direct7x7_few, 4 x 24 register tiles over every tap): bias and activation in their loops, a
    residual (then the activation) in the epilogue pass; N = 2, eight output channels (two
    blocks of four), odd sizes."""
    if not SIMD_FEW:
        pytest.skip("the direct*_few_simd schemes apply only on CPUs with AVX2 and FMA")
    h, wd = x_hw
    w = numpy_helper.from_array(rand(8, c_in, k, k), "W")
    b = numpy_helper.from_array(rand(8), "B")
    oh = (h + pads[0] + pads[2] - k) // stride + 1
    ow = (wd + pads[1] + pads[3] - k) // stride + 1
    inputs = ["X", "W", "B"] + (["Z"] if residual else [])
    node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn", pads=pads,
                            strides=[stride, stride], activation=act, **params)
    decl = [("X", F, (2, c_in, h, wd))] + ([("Z", F, (2, 8, oh, ow))] if residual else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=[w, b],
                       extra_opsets=[("refmnn", 1)])
    feeds = {"X": rand(2, c_in, h, wd), **({"Z": rand(2, 8, oh, ow)} if residual else {})}
    check_node(model, feeds, must_run=(f"direct{k}x{k}_few", f"direct{k}x{k}_few_simd"))


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS[:3])
@pytest.mark.parametrize("z_shape", [None, "full", "broadcast"])
@pytest.mark.parametrize(("pads", "x_hw"), [
    ([1, 1, 1, 1], (12, 12)),     # ResNet's downsampling layers: even sides
    ([1, 0, 0, 1], (11, 9)),      # odd sides, uneven padding
    ([0, 2, 2, 0], (7, 10)),      # padding wider than the kernel's reach
])
def test_fused_im2col_s2(act, params, z_shape, pads, x_hw):
    """im2col_s2 (3x3 stride 2 through parity planes; the junk column of each output row is
    computed and dropped): bias and activation in its last pass, a residual (full or
    broadcast, then the activation) in the epilogue pass; N = 2 (the planes are refilled)."""
    h, wd = x_hw
    w = numpy_helper.from_array(rand(6, 5, 3, 3), "W")
    b = numpy_helper.from_array(rand(6), "B")
    oh = (h + pads[0] + pads[2] - 3) // 2 + 1
    ow = (wd + pads[1] + pads[3] - 3) // 2 + 1
    z = {"full": (2, 6, oh, ow), "broadcast": (1, 6, 1, ow), None: None}[z_shape]
    inputs = ["X", "W", "B"] + (["Z"] if z else [])
    node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn", pads=pads,
                            strides=[2, 2], activation=act, **params)
    decl = [("X", F, (2, 5, h, wd))] + ([("Z", F, z)] if z else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=[w, b],
                       extra_opsets=[("refmnn", 1)])
    feeds = {"X": rand(2, 5, h, wd), **({"Z": rand(*z)} if z else {})}
    check_node(model, feeds, must_run=("im2col_s2", "im2col_gemm"))


@pytest.mark.parametrize("act", ["none", "relu", "clip", "sigmoid"])
def test_direct_few_simd_stores_rows_alike_into_flat_or_strided_outputs(act):
    """conv_direct_few_simd stores its output rows with vectors (activation in registers) into
    a C-contiguous output, and row by row into any other (``flat`` empty): the same values;
    N = 2, rows of 111 outputs (the last vector of a row overlaps the one before)."""
    if not SIMD_FEW:
        pytest.skip("direct3x3_few_simd applies only on CPUs with AVX2 and FMA")
    from refmnn.backends.numba.kernels import conv_direct_few as few
    from refmnn.backends.numba.kernels import fused
    from refmnn.backends.numba.kernels.conv_depthwise3x3 import padded_geometry
    from refmnn.backends.numba.kernels.gemm_simd import pack_rows

    c, oc, h, s, rows, parts = 3, 8, 224, 2, 2, 2
    oh = (h - 3) // s + 1
    x, w, b = rand(2, c, h, h), rand(oc, c, 3, 3), rand(oc)
    _, _, pitch, size, area, _, wide = padded_geometry(oh, oh, s, 3)
    planes = np.zeros(c * (area + wide) + few.SLACK, np.float32)
    span = -(-((rows - 1) * pitch + oh) // few.TILE) * few.TILE
    wp = np.zeros(oc * c * 9, np.float32)
    pack_rows(w.reshape(1, oc, c * 9), wp.reshape(1, oc // 4, c * 9, 4))
    code = {"none": fused.NONE, "relu": fused.RELU, "clip": fused.CLIP,
            "sigmoid": fused.SIGMOID}[act]
    outs = []
    for flat_store in (True, False):
        out = np.full((2, oc, oh, oh), np.nan, np.float32)
        flat = out.reshape(-1) if flat_store else np.zeros(0, np.float32)
        few.conv_direct_few_simd(x, wp, 3, few.tap_offsets(s, pitch, size), b, out, flat, s, 0,
                                 0, code, np.float32(0), np.float32(-0.5), np.float32(0.5),
                                 planes, np.zeros((parts, 4 * span), np.float32), parts, rows)
        outs.append(out)
    assert not np.isnan(outs[0]).any()
    np.testing.assert_array_equal(outs[0], outs[1])


def test_direct_few_apply_to_few_channels_only():
    """Five input channels, a group, another kernel size, dilation or stride 3 rule
    direct3x3_few and direct7x7_few out; their simd variants also need a multiple of four
    output channels and constant weights."""
    from refmnn.backends.numba.kernels.conv_direct_few import (is_direct3x3_few,
                                                               is_direct3x3_few_simd,
                                                               is_direct7x7_few,
                                                               is_direct7x7_few_simd)

    def spec(c, k=3, oc=4, **attrs):
        model = conv_model((1, c, 9, 9), (oc, c // attrs.get("group", 1), k, k), **attrs)
        session = refmnn.Session(model, backends=("numba",), check=False)
        session.run({"X": rand(1, c, 9, 9)})
        return session.plan.specs["n0"]

    assert is_direct3x3_few(spec(3, strides=[2, 2], pads=[1, 1, 1, 1]))
    assert is_direct3x3_few_simd(spec(3)) == bool(SIMD_FEW)  # 4 output channels
    assert not is_direct3x3_few_simd(spec(3, oc=6))  # not a multiple of 4
    assert not is_direct3x3_few_simd(spec(5))
    assert not is_direct3x3_few(spec(5))
    assert not is_direct3x3_few(spec(4, group=2))
    assert not is_direct3x3_few(spec(3, k=5))
    assert not is_direct3x3_few(spec(3, dilations=[2, 2]))
    assert not is_direct3x3_few(spec(3, strides=[3, 3]))
    assert is_direct7x7_few(spec(3, k=7, strides=[2, 2], pads=[3, 3, 3, 3]))
    assert not is_direct7x7_few(spec(3)) and not is_direct7x7_few(spec(5, k=7))
    assert not is_direct7x7_few(spec(3, k=7, dilations=[2, 2]))
    assert is_direct7x7_few_simd(spec(3, k=7, strides=[2, 2], pads=[3, 3, 3, 3])) == \
        bool(SIMD_FEW)
    assert not is_direct7x7_few_simd(spec(3, k=7, oc=6, pads=[3, 3, 3, 3]))
    # weights fed at run time: the simd variants pack them in prepare, so they do not apply
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="n0", pads=[3, 3, 3, 3])
    fed = make_model([node], [("X", F, (1, 3, 9, 9)), ("W", F, (4, 3, 7, 7))], [("Y", F, None)])
    session = refmnn.Session(fed, backends=("numba",), check=False)
    session.run({"X": rand(1, 3, 9, 9), "W": rand(4, 3, 7, 7)})
    assert is_direct7x7_few(session.plan.specs["n0"])
    assert not is_direct7x7_few_simd(session.plan.specs["n0"])


@pytest.mark.parametrize(("stride", "scheme", "width"), [
    (2, "depthwise3x3", 9), (1, "depthwise3x3_same", 9), (2, "depthwise3x3_same", 9),
    *[(2, scheme, 20) for scheme in SIMD_DW_S2],
    *[(s, scheme, 9) for scheme in SIMD_DW_C8 for s in (1, 2)]])
def test_depthwise3x3_parallel_parts(stride, scheme, width, monkeypatch):
    """The parallel copy of the depthwise3x3 loops (several parts, each its own scratch where
    the scheme has one; depthwise3x3_c8: three images of three blocks of eight channels, so the
    parts' runs of blocks cross images)."""
    from refmnn.backends.numba.kernels import conv_depthwise3x3

    monkeypatch.setattr(conv_depthwise3x3, "DEPTHWISE_PARALLEL_MIN", 0)
    c = 24 if scheme in SIMD_DW_C8 else 5
    check_node(conv_model((3, c, 7, width), (c, 1, 3, 3), group=c, pads=[1, 1, 1, 1],
                          strides=[stride, stride]),
               {"X": rand(3, c, 7, width)}, must_run=(scheme,))


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(("oc", "c", "h", "w"), [(7, 5, 9, 11), (7, 9, 5, 10), (141, 314, 5, 7),
                                                (141, 314, 13, 13)])
def test_fused_gemm_1x1_epilogue_per_panel(split, residual, oc, c, h, w, monkeypatch):
    """gemm_1x1 applies bias, residual and activation per sgemm panel (split over the GEMM pool's
    threads or not), gemm_1x1_simd per tile (7 x 5 weights: the "by strips" order; 7 x 9 over 50
    pixels: two of them columns; 141 x 314 over small planes: "by rows", 13 x 13 in two passes over
    the packed plane, its last pixel a column), N = 2, odd sizes; a broadcast residual goes
    through the epilogue pass."""
    from refmnn.backends.numba import _blas

    monkeypatch.setattr(_blas, "SPLIT_MIN_FLOPS", 0 if split else 1e30)
    weights = numpy_helper.from_array(rand(oc, c, 1, 1), "W")
    b = numpy_helper.from_array(rand(oc), "B")
    for z_shape in ((2, oc, h, w), (1, oc, 1, w)) if residual else (None,):
        inputs = ["X", "W", "B"] + (["Z"] if z_shape else [])
        node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn",
                                activation="clip", activation_min=-0.5, activation_max=1.0)
        decl = [("X", F, (2, c, h, w))] + ([("Z", F, z_shape)] if z_shape else [])
        model = make_model([node], decl, [("Y", F, None)], initializers=[weights, b],
                           extra_opsets=[("refmnn", 1)])
        feeds = {"X": rand(2, c, h, w), **({"Z": rand(*z_shape)} if z_shape else {})}
        check_node(model, feeds, must_run=("gemm_1x1", *SIMD_1X1))


def test_bound_gemm_kernels_follow_new_inputs(monkeypatch):
    """gemm_1x1 and FusedMatMul bind their products to the run's tensors once: later runs with
    other feeds (the same tensors, new contents) still match the reference. The conv's weights
    are fed too, so that gemm_1x1 runs (gemm_1x1_simd takes constant weights only), and so is
    the MatMul's B, so that blas runs (packed_simd takes a constant B only)."""
    from refmnn.backends.numba import _blas

    monkeypatch.setattr(_blas, "REGION_SPLIT_MIN_FLOPS", 0)  # these small products split too
    binds = []
    bind = _blas.Gemm.bind
    monkeypatch.setattr(_blas.Gemm, "bind", lambda self, *a: binds.append(1) or bind(self, *a))
    b = numpy_helper.from_array(rand(72), "B")  # 40 -> 72 over 200 px
    conv = helper.make_node("FusedConv", ["X", "W", "B", "Z"], ["Y"], name="conv",
                            domain="refmnn", activation="relu")
    mm = helper.make_node("FusedMatMul", ["Y", "M", "", "R"], ["Out"], name="mm",
                          domain="refmnn", activation="none")
    decl = [("X", F, (1, 40, 20, 10)), ("W", F, (72, 40, 1, 1)), ("Z", F, (1, 72, 20, 10)),
            ("R", F, (1, 72, 20, 40)), ("M", F, (10, 40))]
    model = make_model([conv, mm], decl, [("Out", F, None)], initializers=[b],
                       extra_opsets=[("refmnn", 1)])
    reference = refmnn.Session(model, check=False)
    session = refmnn.Session(model, backends=("numba",), check=False)
    for _ in range(3):
        feeds = {"X": rand(1, 40, 20, 10), "W": rand(72, 40, 1, 1), "Z": rand(1, 72, 20, 10),
                 "R": rand(1, 72, 20, 40), "M": rand(10, 40)}
        assert rel_l2(session.run(feeds)["Out"], reference.run(feeds)["Out"]) <= 1e-5
    schemes = {s.node.name: str(s.scheme) for s in session.plan.steps if isinstance(s, RunStep)}
    assert schemes == {"conv": "gemm_1x1", "mm": "blas"}
    assert len(binds) == 2  # once per kernel, at its first run


@pytest.mark.parametrize(("z_shape", "act"), [
    ((2, 7, 11, 10), "relu"),   # the residual and relu in the output transform
    ((2, 7, 11, 10), "clip"),
    ((1, 7, 1, 10), "relu"),    # a broadcast residual: the epilogue pass, which then activates
    (None, "clip"),             # bias and activation in the output transform
    (None, "none"),
])
def test_fused_conv_winograd_odd_sizes_residual(z_shape, act):
    """FusedConv = act(Conv + Z) with N = 2, uneven padding and an 11x10 output (edge tiles),
    on every scheme (the Winograd ones fuse what they can into their output transform)."""
    w = numpy_helper.from_array(rand(7, 5, 3, 3), "W")
    b = numpy_helper.from_array(rand(7), "B")
    inputs = ["X", "W", "B"] + (["Z"] if z_shape else [])
    params = {"activation_min": -0.5, "activation_max": 1.0} if act == "clip" else {}
    node = helper.make_node("FusedConv", inputs, ["Y"], name="n0", domain="refmnn",
                            pads=[1, 2, 1, 1], activation=act, **params)
    decl = [("X", F, (2, 5, 11, 9))] + ([("Z", F, z_shape)] if z_shape else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=[w, b],
                       extra_opsets=[("refmnn", 1)])
    feeds = {"X": rand(2, 5, 11, 9), **({"Z": rand(*z_shape)} if z_shape else {})}
    check_node(model, feeds, must_run=WINOGRAD)


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS)
@pytest.mark.parametrize(("bias", "residual"), [(True, False), (True, True), (False, True), (False, False)])
def test_fused_matmul(act, params, bias, residual):
    """refmnn::FusedMatMul = act((A @ B + bias) + Z)."""
    inits = [numpy_helper.from_array(rand(8, 5), "Bm")]
    inputs = ["A", "Bm", "bias" if bias else ""] + (["Z"] if residual else [])
    if bias:
        inits.append(numpy_helper.from_array(rand(5), "bias"))
    node = helper.make_node("FusedMatMul", inputs, ["Y"], name="n0", domain="refmnn", activation=act, **params)
    decl = [("A", F, (2, 3, 8))] + ([("Z", F, (3, 5))] if residual else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=inits, extra_opsets=[("refmnn", 1)])
    feeds = {"A": rand(2, 3, 8), **({"Z": rand(3, 5)} if residual else {})}
    check_node(model, feeds, must_run=("blas", "blocked", *SIMD_MATMUL))


@pytest.mark.parametrize(("act", "params"), FUSED_ACTS)
@pytest.mark.parametrize(("bias_shape", "z_shape"), [
    ((1, 50), (2, 9, 50)),   # bias and residual in the tiles' registers
    ((50,), (9, 50)),        # a residual that broadcasts: the epilogue pass after the product
    (None, None),
])
def test_fused_matmul_packed_simd(act, params, bias_shape, z_shape):
    """packed_simd's epilogue -- bias per column, residual, every activation (Relu, Clip and
    Gelu in registers, the others on each tile after its store) -- on a product with a last
    block of two rows and a last strip of two columns (2 x 9 rows, 50 columns)."""
    if not SIMD_MATMUL:
        pytest.skip("packed_simd applies only on CPUs with AVX2 and FMA")
    inits = [numpy_helper.from_array(rand(16, 50), "Bm")]
    if bias_shape:
        inits.append(numpy_helper.from_array(rand(*bias_shape), "bias"))
    inputs = ["A", "Bm", "bias" if bias_shape else ""] + (["Z"] if z_shape else [])
    node = helper.make_node("FusedMatMul", inputs, ["Y"], name="n0", domain="refmnn",
                            activation=act, **params)
    decl = [("A", F, (2, 9, 16))] + ([("Z", F, z_shape)] if z_shape else [])
    model = make_model([node], decl, [("Y", F, None)], initializers=inits,
                       extra_opsets=[("refmnn", 1)])
    feeds = {"A": rand(2, 9, 16), **({"Z": rand(*z_shape)} if z_shape else {})}
    check_node(model, feeds, must_run=SIMD_MATMUL)


@pytest.mark.parametrize(("q", "kt", "v", "mask"), [
    ((1, 3, 197, 64), (1, 3, 64, 197), (1, 3, 197, 64), None),          # ViT-Tiny's layer
    ((2, 4, 37, 5), (2, 4, 5, 23), (2, 4, 23, 7), (2, 1, 1, 23)),       # odd sizes, padding mask
    ((2, 4, 37, 5), (1, 4, 5, 23), (4, 23, 7), (37, 23)),               # broadcast batch, 2-D mask
    ((3, 40, 8), (3, 8, 33), (3, 33, 8), (3, 40, 1)),                   # one value per query row
    ((6, 9), (9, 11), (11, 4), (11,)),                                  # rank 2: one item
])
def test_fused_attention(q, kt, v, mask):
    """refmnn::FusedAttention = softmax(scale * Q @ KT + mask) @ V: both schemes, several row
    blocks per item (Sq 37 and 40 over blocks of 8-32 rows, the last one partial)."""
    inputs = [("Q", F, q), ("KT", F, kt), ("V", F, v)] + ([("M", F, mask)] if mask else [])
    node = helper.make_node("FusedAttention", [n for n, *_ in inputs], ["Y"], name="n0",
                            domain="refmnn", scale=0.3)
    model = make_model([node], inputs, [("Y", F, None)], extra_opsets=[("refmnn", 1)])
    feeds = {name: rand(*shape) for name, _, shape in inputs}
    if mask:  # some keys dropped (-inf), the rest biased; every row keeps a key
        m = feeds["M"]
        feeds["M"] = np.where((RNG.random(m.shape) < 0.4) & (np.arange(m.shape[-1]) > 0), -np.inf,
                              m).astype(np.float32)
    check_node(model, feeds, must_run=("blas", "loops"))


@pytest.mark.parametrize(("shapes", "perms", "schemes"), [
    # BERT's heads from [B, S, H, D], merged back: Q, V and Y with row strides H * D
    (((2, 37, 4, 8), (2, 4, 8, 23), (2, 23, 4, 6)),
     {"perm_q": [0, 2, 1, 3], "perm_v": [0, 2, 1, 3], "perm_y": [0, 2, 1, 3]}, ("blas", "loops")),
    # K given untransposed [B, H, Sk, D]: KT's unit stride is along D (sgemm's transposed B)
    (((2, 4, 37, 8), (2, 4, 23, 8), (2, 4, 23, 6)), {"perm_kt": [0, 1, 3, 2]}, ("blas", "loops")),
    # everything from [B, S, H, D], K too, with a broadcast batch item
    (((1, 37, 4, 8), (2, 23, 4, 8), (2, 23, 4, 6)),
     {"perm_q": [0, 2, 1, 3], "perm_kt": [0, 2, 3, 1], "perm_v": [0, 2, 1, 3],
      "perm_y": [0, 2, 1, 3]}, ("blas", "loops")),
    # Q's features strided (its last axis moved): no BLAS operand, the loop nests only
    (((2, 4, 8, 37), (2, 4, 8, 23), (2, 4, 23, 6)), {"perm_q": [0, 1, 3, 2]}, ("loops",)),
    # V's and Y's features strided: each output a sum over the keys in order
    (((2, 4, 37, 8), (2, 4, 8, 23), (2, 4, 6, 23)),
     {"perm_v": [0, 1, 3, 2], "perm_y": [0, 1, 3, 2]}, ("loops",)),
])
def test_fused_attention_with_transposed_operands(shapes, perms, schemes):
    """FusedAttention's perm_* read Q, KT and V through their strides and write Y through
    perm_y's (no copies), in both schemes where they apply, against the reference."""
    inputs = [("Q", F, shapes[0]), ("KT", F, shapes[1]), ("V", F, shapes[2])]
    node = helper.make_node("FusedAttention", ["Q", "KT", "V"], ["Y"], name="n0",
                            domain="refmnn", scale=0.3, **perms)
    model = make_model([node], inputs, [("Y", F, None)], extra_opsets=[("refmnn", 1)])
    ran = check_node(model, {name: rand(*shape) for name, _, shape in inputs}, must_run=schemes)
    assert sorted(ran) == sorted(schemes)


def test_fused_attention_causal_mask_and_empty_keys():
    """A causal mask gives exact zeros above the diagonal; with no keys at all (Sk = 0) the
    output is zeros, from the reference (a node with an empty tensor is always its)."""
    sq, d = 40, 16
    causal = np.where(np.tril(np.ones((sq, sq), bool)), 0, -np.inf).astype(np.float32)
    inputs = [("Q", F, (2, sq, d)), ("KT", F, (2, d, sq)), ("V", F, (2, sq, d))]
    node = helper.make_node("FusedAttention", ["Q", "KT", "V", "M"], ["Y"], name="n0",
                            domain="refmnn", scale=0.25)
    model = make_model([node], inputs, [("Y", F, None)], extra_opsets=[("refmnn", 1)],
                       initializers=[numpy_helper.from_array(causal, "M")])
    feeds = {name: rand(*shape) for name, _, shape in inputs}
    feeds["V"][:, 1:] = 3e38  # query 0 sees key 0 only: a weight of even 1e-38 on a later key shows

    def first_row_is_v0(scheme, outputs):
        np.testing.assert_array_equal(outputs[0][:, 0], feeds["V"][:, 0], err_msg=scheme)

    check_node(model, feeds, must_run=("blas", "loops"), inspect=first_row_is_v0)
    empty = [("Q", F, (2, 5, 3)), ("KT", F, (2, 3, 0)), ("V", F, (2, 0, 4))]
    node = helper.make_node("FusedAttention", ["Q", "KT", "V"], ["Y"], name="n0", domain="refmnn")
    model = make_model([node], empty, [("Y", F, None)], extra_opsets=[("refmnn", 1)])
    session = refmnn.Session(model, backends=("numba",), check=False)
    out = session.run({name: rand(*shape) for name, _, shape in empty})["Y"]
    np.testing.assert_array_equal(out, np.zeros((2, 5, 4), np.float32))
    (step,) = [s for s in session.plan.steps if isinstance(s, RunStep)]
    assert step.backend == "reference" and "empty tensor" in step.reason


@pytest.mark.parametrize(("ta", "tb", "alpha", "beta", "c_shape"), [
    (0, 1, 1.0, 1.0, (5,)), (1, 0, 0.5, 2.0, (3, 5)), (1, 1, 1.0, 0.0, (1, 5)), (0, 0, 2.0, 1.0, None)])
@pytest.mark.parametrize("fused", [False, True])
def test_gemm(ta, tb, alpha, beta, c_shape, fused):
    a_shape = (8, 3) if ta else (3, 8)
    model = _gemm_model(a_shape, (5, 8) if tb else (8, 5), c_shape, ta, tb, alpha, beta, fused)
    check_node(model, {"A": rand(*a_shape)}, must_run=("blas",))


def _gemm_model(a_shape, b_shape, c_shape, ta, tb, alpha, beta, fused):  # type: ignore[no-untyped-def]
    """Gemm (FusedGemm with relu when ``fused``) of a fed A, a constant B and C (if a shape)."""
    inits = [numpy_helper.from_array(rand(*b_shape), "B")]
    inputs = ["A", "B"]
    if c_shape is not None:
        inits.append(numpy_helper.from_array(rand(*c_shape), "C"))
        inputs.append("C")
    extra = {"domain": "refmnn", "activation": "relu"} if fused else {}
    node = helper.make_node("FusedGemm" if fused else "Gemm", inputs, ["Y"], name="n0", transA=ta,
                            transB=tb, alpha=alpha, beta=beta, **extra)
    return make_model([node], [("A", F, a_shape)], [("Y", F, None)], initializers=inits,
                      extra_opsets=[("refmnn", 1)] if fused else ())


@pytest.mark.parametrize(("ta", "tb", "alpha", "beta", "c_shape"), [
    (0, 1, 1.0, 1.0, (700,)), (1, 0, 0.5, 2.0, (1, 700)), (1, 1, 1.0, 0.0, None), (0, 0, 2.0, 1.0, (1,))])
@pytest.mark.parametrize("fused", [False, True])
def test_gemm_with_one_output_row_runs_as_gemv(ta, tb, alpha, beta, c_shape, fused):
    """A classifier's Gemm ([1, K] @ W'): the gemv scheme (dot products with W's rows for
    transB=1, scaled rows summed into column blocks for transB=0) agrees with the reference and
    sgemm; 700 outputs and K = 301 span several work items and leave SIMD remainders."""
    a_shape = (301, 1) if ta else (1, 301)
    model = _gemm_model(a_shape, (700, 301) if tb else (301, 700), c_shape, ta, tb, alpha, beta,
                        fused)
    check_node(model, {"A": rand(*a_shape)}, must_run=("blas", "gemv"))
    plan = refmnn.Session(model, backends=("numba",), check=False).resize()
    assert next(s.scheme for s in plan.steps if s.node.name == "n0") == "gemv"


@pytest.mark.parametrize("n", [1, 8, 45])
def test_activate_row_relu_is_the_reference_bit_for_bit(n):
    """``fused.activate_row``'s Relu, the in-place epilogue of the Winograd, depthwise and GEMM
    schemes, written so that LLVM stores whole vectors (see its comment): NaN kept, -0 and
    -inf to +0, everything else as ``np.maximum(x, 0)`` -- on rows that end in a partial
    vector too."""
    from numba import njit

    from refmnn.backends.numba.kernels.fused import RELU, activate_row
    from refmnn.ops.activation import relu

    @njit
    def run(row):
        activate_row(row, RELU, np.float32(0), np.float32(0), np.float32(0))

    special = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -1.5, 2.5, 1e-45, -1e-45, -3e38],
                       np.float32)
    row = np.concatenate([special, rand(max(0, n - special.size))])[:n]
    expected = relu(row.copy())
    run(row)
    assert np.array_equal(np.isnan(row), np.isnan(expected))
    assert np.array_equal(row[~np.isnan(row)].view(np.uint32),
                          expected[~np.isnan(expected)].view(np.uint32))
