"""The Numba backend's MaxPool and AveragePool schemes against the NumPy reference: every
scheme forced on each case (:func:`tests.numba_checks.check_node`); NaN, +-inf and -0 bit for bit
in every 3x3 stride-2 scheme, and which scheme the costs choose (moved out of
test_numba_backend.py, which holds the other kernels' cases)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import helper  # noqa: E402

import refmnn  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import make_model  # noqa: E402
from tests.numba_checks import F, SIMD_POOL, check_node, rand  # noqa: E402


POOL_CASES = [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2, 3], "dilations": [2, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
]


@pytest.mark.parametrize(("op", "attrs"), POOL_CASES)
def test_pool(op, attrs):
    node = helper.make_node(op, ["X"], ["Y"], name="n0", **attrs)
    model = make_model([node], [("X", F, (2, 3, 9, 8))], [("Y", F, None)])
    check_node(model, {"X": rand(2, 3, 9, 8)})


@pytest.mark.parametrize(("pads", "ceil_mode"), [([0, 0, 0, 0], 0), ([1, 1, 1, 1], 0),
                                                  ([0, 1, 2, 0], 1), ([2, 2, 2, 2], 1),
                                                  ([3, 3, 3, 3], 0)])  # windows all padding
@pytest.mark.parametrize("width", [12, 19])
def test_maxpool_3x3_stride2_special_values(pads, ceil_mode, width):
    """MaxPool 3x3 stride 2 in every scheme (``direct``: one loop over three rows, then the
    interior outputs' taps, the borders tap by tap; ``max3x3s2``: column maxima, even/odd split,
    each row's last window redone; ``max3x3s2_simd``, on rows of 16 or more: eight outputs a
    vector from a -inf padded row, the last vector of each row overlapping) against the
    reference bit for bit: NaN wins wherever it is (interior, corner, last column), +-inf and -0
    pass through."""
    node = helper.make_node("MaxPool", ["X"], ["Y"], name="n0", kernel_shape=[3, 3],
                            strides=[2, 2], pads=pads, ceil_mode=ceil_mode)
    model = make_model([node], [("X", F, (2, 3, 13, width))], [("Y", F, None)])
    x = rand(2, 3, 13, width)
    x[0, 0, 5, 6] = np.nan
    x[0, 1, 0, 0] = np.nan
    x[1, 2, 12, width - 1] = np.nan
    x[1, 0, 4, 3] = np.inf
    x[1, 1] = -np.inf
    x[0, 2, 7] = -0.0
    x[0, 2, 6] = -1.0
    expected = refmnn.Session(model, check=False).run({"X": x})["Y"]
    session = refmnn.Session(model, backends=("numba",), check=False)
    got = session.run({"X": x})["Y"]
    assert all(s.backend == "numba" for s in session.plan.steps if isinstance(s, RunStep))
    assert np.isnan(got).sum() >= 3
    np.testing.assert_array_equal(got, expected)
    assert np.array_equal(np.signbit(got), np.signbit(expected))

    def bitwise(scheme, outputs):
        np.testing.assert_array_equal(outputs[0], expected, err_msg=scheme)
        assert np.array_equal(np.signbit(outputs[0]), np.signbit(expected)), scheme

    simd = SIMD_POOL if width >= 16 else ()
    check_node(model, {"X": x}, tol=None, must_run=("direct", "max3x3s2", *simd), inspect=bitwise)


def test_max3x3s2_simd_is_chosen_for_short_rows():
    """The costs give max3x3s2_simd SqueezeNet's pools on 55 x 55 and 27 x 27 planes and leave
    the 111 x 111 and 112 x 112 ones to max3x3s2 (the kernels' times in pool's docstring)."""
    def chosen(c, h, pads, ceil_mode):  # type: ignore[no-untyped-def]
        node = helper.make_node("MaxPool", ["X"], ["Y"], name="n0", kernel_shape=[3, 3],
                                strides=[2, 2], pads=pads, ceil_mode=ceil_mode)
        model = make_model([node], [("X", F, (1, c, h, h))], [("Y", F, None)])
        plan = refmnn.Session(model, backends=("numba",), check=False).resize()
        return next(str(st.scheme) for st in plan.steps if isinstance(st, RunStep))

    if not SIMD_POOL:
        pytest.skip("max3x3s2_simd applies only on CPUs with AVX2 and FMA")
    assert chosen(128, 55, [0, 0, 0, 0], 1) == "max3x3s2_simd"
    assert chosen(256, 27, [0, 0, 0, 0], 1) == "max3x3s2_simd"
    assert chosen(64, 111, [0, 0, 0, 0], 1) == "max3x3s2"
    assert chosen(64, 112, [1, 1, 1, 1], 0) == "max3x3s2"
