"""The numba backend's ``refmnn::FusedConvMaxPool`` (kernels/conv_few_pool.py): a stem
convolution and the 3x3 stride-2 max pool after it in one pass. Against the reference
(:func:`tests.numba_checks.check_node`), bit for bit against the convolution and pool kernels
run one after the other, and where the graph pass fuses the two on numba and where not."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import helper, numpy_helper  # noqa: E402

import refmnn  # noqa: E402
from refmnn.backends import BackendConfig, Storage  # noqa: E402
from refmnn.backends.numba import NumbaBackend  # noqa: E402
from refmnn.backends.numba.kernels.simd import native  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import make_model  # noqa: E402
from tests.numba_checks import F, check_node, rand  # noqa: E402

pytestmark = pytest.mark.skipif(not native(), reason="direct_few_max_pool needs AVX2 and FMA")

POOL = {"kernel_shape": [3, 3], "strides": [2, 2]}
ACTIVATIONS = {"none": {}, "relu": {"activation": "relu"},
               "clip": {"activation": "clip", "activation_min": -0.25, "activation_max": 0.5}}
# (input, weights, conv attributes, pool attributes): SqueezeNet's and ResNet's stems, stride 1,
# one input channel, pools with padding and ceil_mode, a batch of two
STEMS = {
    "squeezenet": ((1, 3, 63, 63), (8, 3, 3, 3), {"strides": [2, 2]}, {"ceil_mode": 1}),
    "resnet": ((2, 3, 64, 64), (12, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]},
               {"pads": [1, 1, 1, 1]}),
    "stride1": ((1, 4, 35, 33), (4, 4, 3, 3), {"pads": [1, 1, 1, 1]}, {"ceil_mode": 1}),
    "grey": ((1, 1, 40, 37), (8, 1, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]},
             {"pads": [0, 1, 1, 0], "ceil_mode": 1}),
}


def _fused_model(stem, activation, *, weights_input=False):
    x, w, conv, pool = STEMS[stem]
    attrs = {**conv, **ACTIVATIONS[activation],
             **{"pool_" + k: v for k, v in {**POOL, **pool}.items()}}
    node = helper.make_node("FusedConvMaxPool", ["X", "W", "B"], ["Y"], name="n0",
                            domain="refmnn", **attrs)
    inits = [numpy_helper.from_array(rand(w[0]), "B")]
    inputs = [("X", F, x)]
    if weights_input:
        inputs.append(("W", F, w))
    else:
        inits.append(numpy_helper.from_array(rand(*w) * 0.3, "W"))
    return make_model([node], inputs, [("Y", F, None)], initializers=inits,
                      extra_opsets=[("refmnn", 1)])


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("stem", sorted(STEMS))
def test_direct_few_max_pool_matches_the_reference(stem, activation):
    model = _fused_model(stem, activation)
    check_node(model, {"X": rand(*STEMS[stem][0])}, must_run=("direct_few_max_pool",))


def test_weights_that_are_not_constants_are_packed_on_every_run():
    model = _fused_model("squeezenet", "relu", weights_input=True)
    x, w = STEMS["squeezenet"][0], STEMS["squeezenet"][1]
    session = refmnn.Session(model, backends=("numba",), check=False)
    for seed in range(2):  # new weights each run: a stale packing would give the first run's
        weights = np.random.default_rng(seed).standard_normal(w).astype(np.float32)
        feeds = {"X": rand(*x), "W": weights}
        got = session.run(feeds)["Y"]
        want = refmnn.Session(model, check=False).run(feeds)["Y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert [s.scheme for s in session.plan.steps if isinstance(s, RunStep)] == [
        "direct_few_max_pool"]


def test_a_strided_output_is_written_through_a_temporary():
    model = _fused_model("stride1", "relu")
    session = refmnn.Session(model, backends=("numba",), check=False)
    x = rand(*STEMS["stride1"][0])
    want = session.run({"X": x})["Y"]
    spec = session.plan.specs["n0"]
    backend = NumbaBackend()
    kdef = next(k for k in backend.kernels() if k.op == "FusedConvMaxPool")
    kernel = kdef.schemes[0].build(backend, spec)
    kernel.prepare(spec)
    workspace = backend.allocate(kernel.workspace_bytes, Storage.WORKSPACE)
    wide = np.full((*want.shape[:3], 2 * want.shape[3]), np.nan, np.float32)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    inputs = [x, inits["W"], inits["B"]]
    backend.begin_run()
    kernel.run(inputs, [wide[..., ::2]], workspace)
    backend.end_run()
    np.testing.assert_array_equal(wide[..., ::2], want)
    assert np.isnan(wide[..., 1::2]).all()
    backend.close()


def _stem_then_pool(c_in=3, c_out=8, size=63, also_out=False, relu=True):
    rng = np.random.default_rng(7)  # the same weights for every variant of the model
    w = numpy_helper.from_array(rng.standard_normal((c_out, c_in, 3, 3), np.float32) * 0.3, "W")
    b = numpy_helper.from_array(rng.standard_normal(c_out, np.float32), "B")
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], name="conv", strides=[2, 2])]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
    nodes.append(helper.make_node("MaxPool", ["r" if relu else "c"], ["Y"], name="pool",
                                  ceil_mode=1, **POOL))
    outputs = [("Y", F, None)] + ([("r", F, None)] if also_out else [])
    return make_model(nodes, [("X", F, (1, c_in, size, size))], outputs, initializers=[w, b])


def _schemes(session):
    return [(s.node.op, s.scheme) for s in session.plan.steps if isinstance(s, RunStep)]


def test_conv_relu_max_pool_is_fused_on_numba_bit_for_bit():
    feeds = {"X": rand(1, 3, 63, 63)}
    feeds["X"][0, 1, 5:9, 7] = np.nan  # NaN propagates through both paths alike
    feeds["X"][0, 0, 20, 3:6] = -np.inf
    fused = refmnn.Session(_stem_then_pool(), backends=("numba",), check=False)
    got = fused.run(feeds)["Y"]
    assert _schemes(fused) == [("FusedConvMaxPool", "direct_few_max_pool")]
    # the ReLU's output read twice (a graph output too): the pass leaves the pool alone
    apart = refmnn.Session(_stem_then_pool(also_out=True), backends=("numba",), check=False)
    want = apart.run(feeds)["Y"]
    assert _schemes(apart) == [("FusedConv", "direct3x3_few_simd"), ("MaxPool", "max3x3s2_simd")]
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got).any()


def test_a_convolution_the_kernel_does_not_take_is_not_fused():
    # 16 input channels: no scheme of FusedConvMaxPool applies, so the pass keeps the two nodes
    # (fused, the node would run on the reference)
    model = _stem_then_pool(c_in=16, size=41)
    session = refmnn.Session(model, backends=("numba",), check=False,
                             configs={"numba": BackendConfig(threads=2)})
    feeds = {"X": rand(1, 16, 41, 41)}
    got = session.run(feeds)["Y"]
    assert [op for op, _ in _schemes(session)] == ["FusedConv", "MaxPool"]
    assert all(s.backend == "numba" for s in session.plan.steps if isinstance(s, RunStep))
    want = refmnn.Session(model, check=False).run(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_plain_conv_then_max_pool_is_fused_on_numba():
    model = _stem_then_pool(relu=False)  # a Conv, no FusedConv before the pass
    session = refmnn.Session(model, backends=("numba",), check=False)
    feeds = {"X": rand(1, 3, 63, 63)}
    got = session.run(feeds)["Y"]
    assert _schemes(session) == [("FusedConvMaxPool", "direct_few_max_pool")]
    want = refmnn.Session(model, check=False).run(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
