"""The numba backend's convolution schemes with infinities and NaN among their inputs or
weights, each scheme forced (:func:`tests.numba_checks.check_node`) against the reference: the
edge columns that depthwise3x3_same reads across the row edge, depthwise3x3_c8's padding and
overlapping store, depthwise3x3_s2_simd's left padding, and infinite or NaN weights whose windows
reach the padding (moved out of test_numba_backend.py, which holds the schemes' ordinary cases;
Winograd's are in test_numba_winograd.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import helper, numpy_helper  # noqa: E402

import refmnn  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import assert_same_specials, make_model  # noqa: E402
from tests.numba_checks import (F, SIMD_DW_C8, SIMD_DW_S2, check_node, conv_model,  # noqa: E402
                                rand)


def test_depthwise3x3_same_edge_columns_with_inf_and_nan():
    """depthwise3x3_same reads across the row edge (column 0's left taps see the previous row's
    last element) and selects those sums away: +-inf and NaN in the first and last columns must
    reach exactly the outputs whose windows hold them, as in the reference (multiplying the
    wrapped sums by 0 instead would turn inf into NaN in the neighbouring row's edge)."""
    model = conv_model((1, 3, 6, 7), (3, 1, 3, 3), group=3, pads=[1, 1, 1, 1])
    x = rand(1, 3, 6, 7)
    x[0, 0, 2, 0] = np.inf
    x[0, 1, 3, 6] = -np.inf
    x[0, 2, 4, 0] = np.nan
    x[0, 2, 1, 6] = np.inf
    expected = refmnn.Session(model, check=False).run({"X": x})["Y"]
    session = refmnn.Session(model, backends=("numba",), check=False)
    got = session.run({"X": x})["Y"]
    steps = [s for s in session.plan.steps if isinstance(s, RunStep)]
    assert [(s.backend, str(s.scheme)) for s in steps] == [("numba", "depthwise3x3_same")]
    finite = np.isfinite(expected)
    assert 0 < finite.sum() < finite.size
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_array_equal(got[~finite], expected[~finite])  # the same infs, NaN == NaN
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-5, atol=1e-5)


def _same_nonfinite(expected):  # type: ignore[no-untyped-def]
    """A check_node ``inspect`` that wants ``expected``'s infs and NaNs exactly where they are,
    and its finite outputs within 1e-5."""
    finite = np.isfinite(expected)
    assert 0 < finite.sum() < finite.size

    def same(scheme, outputs):  # type: ignore[no-untyped-def]
        got = outputs[0]
        np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=scheme)
        np.testing.assert_array_equal(got[~finite], expected[~finite], err_msg=scheme)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-5, atol=1e-5,
                                   err_msg=scheme)

    return same


def test_depthwise_c8_padding_and_overlap_with_inf_and_nan():
    """depthwise3x3_c8 reads only its zero-padded block buffer and stores a plane's last group
    of eight pixels twice (overlapping the group before): +-inf and NaN on the planes' edges
    and in that overlap must reach exactly the outputs whose windows hold them, as in the
    reference, at stride 1 and 2."""
    if not SIMD_DW_C8:
        pytest.skip("depthwise3x3_c8 applies only on CPUs with AVX2 and FMA")
    for stride in (1, 2):
        model = conv_model((1, 8, 7, 7), (8, 1, 3, 3), group=8, strides=[stride, stride],
                           pads=[1, 1, 1, 1])
        x = rand(1, 8, 7, 7)
        x[0, 0, 0, 0] = np.inf  # the plane's first pixel
        x[0, 3, 6, 6] = -np.inf  # the last, in the overlapping group
        x[0, 5, 3, 0] = np.nan  # a row's first column
        x[0, 7, 2, 6] = np.inf  # a row's last
        expected = refmnn.Session(model, check=False).run({"X": x})["Y"]
        check_node(model, {"X": x}, tol=None, must_run=SIMD_DW_C8,
                   inspect=_same_nonfinite(expected))


def _with_specials(w):  # type: ignore[no-untyped-def]
    """``w`` with +inf, NaN and -inf as the first tap of its first, middle and last filters."""
    w[[0, w.shape[0] // 2, -1], :, 0, 0] = [[np.inf], [np.nan], [-np.inf]]
    return w


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), [
    ((1, 4, 9, 8), (5, 4, 3, 3), {"pads": [1, 2, 0, 1]}),
    ((1, 6, 10, 10), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
    ((2, 3, 9, 37), (6, 1, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 3, 9, 12), (6, 1, 3, 2), {"group": 3, "dilations": [2, 3], "pads": [2, 0, 1, 3]}),
])
def test_infinite_and_nan_weights_where_windows_overlap_the_padding(x_shape, w_shape, attrs):
    """The reference pads with zeros and multiplies them by the weights, so an infinite or NaN
    weight makes NaN of every output whose window puts it on the padding. direct, depthwise,
    depthwise3x3_same and depthwise3x3_s2_simd skip the padding taps: with such constant
    weights they gave numbers there (8 to 224 outputs a run on these cases), so they
    decline them and every scheme that still applies must have the reference's NaN,
    infinities and numbers."""
    model = conv_model(x_shape, w_shape, **attrs)
    weights = model.graph.initializer[0]
    weights.CopyFrom(numpy_helper.from_array(_with_specials(rand(*w_shape)), weights.name))
    x = rand(*x_shape)
    want = refmnn.Session(model, check=False).run({"X": x})["Y"]
    assert np.isnan(want).any() and np.isfinite(want).any()

    def same(scheme, outputs):  # type: ignore[no-untyped-def]
        assert_same_specials(outputs[0], want, scheme, rel_l2=1e-5)
    check_node(model, {"X": x}, tol=None, inspect=same)


def test_weights_given_at_run_time_keep_the_padding_products():
    """Weights that arrive at run time cannot be checked when planning, so where the
    convolution pads, the schemes that skip the padding taps decline them too (im2col_gemm and
    the zero-padded planes run): an infinite weight gives the reference's NaN."""
    for w_shape, attrs in (((5, 4, 3, 3), {}), ((4, 1, 3, 3), {"group": 4})):
        node = helper.make_node("Conv", ["X", "W"], ["Y"], name="n0", pads=[1, 1, 1, 1],
                                **attrs)
        model = make_model([node], [("X", F, (1, 4, 9, 8)), ("W", F, w_shape)],
                           [("Y", F, None)])
        feeds = {"X": rand(1, 4, 9, 8), "W": _with_specials(rand(*w_shape))}
        want = refmnn.Session(model, check=False).run(feeds)["Y"]
        assert np.isnan(want).any() and np.isfinite(want).any()
        session = refmnn.Session(model, backends=("numba",), check=False)
        assert_same_specials(session.run(feeds)["Y"], want, attrs, rel_l2=1e-5)
        (step,) = [s for s in session.plan.steps if isinstance(s, RunStep)]
        assert step.backend == "numba", step.reason


def test_depthwise_s2_left_padding_reads_no_inf_or_nan_across_the_row_edge():
    """depthwise3x3_s2_simd computes a row's output 0 (one column of padding on the left) in a
    vector whose first lane reads the element before the row -- the previous row's last, or the
    previous plane's -- zeroed after the load: +-inf and NaN in the last column must reach
    exactly the outputs whose windows hold them, as in the reference, under every scheme."""
    model = conv_model((1, 3, 7, 37), (3, 1, 3, 3), group=3, strides=[2, 2], pads=[1, 1, 1, 1])
    x = rand(1, 3, 7, 37)
    x[0, 0, 2, 36] = np.inf  # before row 3 of plane 0
    x[0, 0, 6, 36] = -np.inf  # the plane's last: before plane 1's first row
    x[0, 1, 4, 36] = np.nan
    x[0, 2, 0, 36] = np.inf
    expected = refmnn.Session(model, check=False).run({"X": x})["Y"]
    check_node(model, {"X": x}, tol=None, must_run=("depthwise3x3", *SIMD_DW_S2),
               inspect=_same_nonfinite(expected))
