"""The reference where other engines disagree with it, checked against oracles written here.

Each case is one the fuzzer (tools/fuzz_models.py --diff, with --values for NaN and
infinities or --opsets for the other opsets, against onnx.reference or --peer onnxruntime) or
the issue found where refmnn and another engine give different answers; where refmnn was the
one that was wrong (the losses, Dropout, DynamicQuantizeLinear, Clip's defaults, Attention's
-inf rows, Det, ConvTranspose's derived padding), the docstring says so and the test failed on
the old code. The oracle is a plain loop or formula over the spec's words, in float64, sharing
no code with refmnn; what onnx.reference 1.23.2 and onnxruntime 1.32 return is said in each
docstring (measured 2026-11-29).
"""

from __future__ import annotations

import itertools
import statistics
from fractions import Fraction

import numpy as np
import pytest
from onnx import TensorProto, helper

import refmnn

from tests.helpers import make_model

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _run(node, inputs, outputs, opset: int, **feeds: np.ndarray) -> dict[str, np.ndarray]:
    return refmnn.Session(make_model([node], inputs, outputs, opset=opset)).run(feeds)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_the_softmax_family_before_opset_13_normalises_the_flattened_trailing_block(op):
    """Before opset 13 the input is coerced to 2-D at ``axis``: with axis 1 on [2, 3, 4], each
    of the 2 rows of 12 is normalised as one. onnx.reference normalises along axis 1 alone
    (Softmax off by 0.55, LogSoftmax by 2.2, Hardmax sets one 1 per column); onnxruntime
    coerces, as refmnn does."""
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    x[1, 2, 3] = x[1, 0, 1] = x[1].max() + 1  # a tie: Hardmax takes the first
    y = _run(helper.make_node(op, ["x"], ["y"], axis=1), [("x", F, [2, 3, 4])],
             [("y", F, [2, 3, 4])], 11, x=x)["y"]
    rows = x.reshape(2, 12).astype(np.float64)
    shifted = rows - rows.max(axis=1, keepdims=True)
    if op == "Softmax":
        want = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    elif op == "LogSoftmax":
        want = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    else:
        want = np.zeros_like(rows)
        want[0, rows[0].argmax()] = want[1, 1] = 1.0  # row 1: flat positions 1 and 11 tie
    np.testing.assert_allclose(y, want.reshape(x.shape), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", [9, 11])
def test_onehot_negative_indices_are_off_at_opset_9_and_wrap_from_11(opset):
    """OneHot-9: "values outside the range [0, depth) will result in one-hot representation
    with all 'off_value' values"; OneHot-11 takes [-depth, depth - 1], negatives counted from
    the end. At opset 9 both onnx.reference and onnxruntime wrap -7 and -10 (opset 11's rule)."""
    indices = np.array([0, -7, 9, -10, 10, -11], dtype=np.int64)
    values = np.array([-1.0, 5.0], dtype=np.float32)
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"])
    y = _run(node, [("i", I64, [6]), ("d", I64, []), ("v", F, [2])], [("y", F, ["r", "k"])],
             opset, i=indices, d=np.array(10, dtype=np.int64), v=values)["y"]
    want = np.full((6, 10), -1.0)
    for row, index in enumerate(indices):
        column = index + 10 if opset >= 11 and -10 <= index < 0 else index
        if 0 <= column < 10:
            want[row, column] = 5.0
    np.testing.assert_array_equal(y, want)


def _pool_windows(shape, kernel, strides, dilations, pads_begin, out_shape):
    """For each output position, the in-range input positions of its window (pads skipped)."""
    for out in itertools.product(*(range(n) for n in out_shape)):
        taps = []
        for tap in itertools.product(*(range(k) for k in kernel)):
            pos = tuple(o * s + t * d - p for o, s, t, d, p in
                        zip(out, strides, tap, dilations, pads_begin, strict=True))
            if all(0 <= p < n for p, n in zip(pos, shape, strict=True)):
                taps.append(pos)
        yield out, taps


def test_dilated_3d_average_pool_with_ceil_mode_against_a_loop():
    """AveragePool-22, 3-D, kernel (5, 7, 5), dilations 2, strides 3, ceil_mode 1,
    count_include_pad 0: each output is the mean of the window's taps that fall inside the
    input. onnx.reference is off by up to 0.26 on this geometry (its shapes agree); onnxruntime
    agrees with the loop."""
    x = np.random.default_rng(1).standard_normal((1, 2, 17, 20, 17)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=(5, 7, 5),
                            dilations=(2, 2, 2), strides=(3, 3, 3), ceil_mode=1,
                            count_include_pad=0)
    y = _run(node, [("x", F, list(x.shape))], [("y", F, ["n", "c", "a", "b", "e"])], 22,
             x=x)["y"]
    assert y.shape == (1, 2, 4, 4, 4)  # ceil((17 - 9) / 3) + 1, ceil((20 - 13) / 3) + 1
    want = np.empty(y.shape)
    for c in range(2):
        for out, taps in _pool_windows(x.shape[2:], (5, 7, 5), (3, 3, 3), (2, 2, 2), (0, 0, 0),
                                       y.shape[2:]):
            want[(0, c) + out] = np.mean([x[(0, c) + tap] for tap in taps], dtype=np.float64)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_with_asymmetric_pads_and_default_strides_against_a_loop(storage_order):
    """MaxPool-12, kernel (3, 2), pads (top 1, left 0, bottom 1, right 1), strides 1: Y is
    [2, 2, 5, 6] and each Indices value is the flat position of its maximum in X, ignoring the
    padding: (n * C + c) * H * W plus h * W + w (storage_order 0) or h + w * H (1, the
    onnx test suite's and onnxruntime's column-major reading). onnx.reference pairs the pads
    per axis when strides are 1 and returns [2, 2, 4, 7]."""
    x = np.random.default_rng(2).permutation(2 * 2 * 5 * 6).astype(np.float32).reshape(2, 2, 5, 6)
    n_, c_, h_, w_ = x.shape
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=(3, 2), pads=(1, 0, 1, 1),
                            storage_order=storage_order)
    got = _run(node, [("x", F, list(x.shape))],
               [("y", F, ["n", "c", "h", "w"]), ("i", I64, ["n", "c", "h", "w"])], 12, x=x)
    assert got["y"].shape == (2, 2, 5, 6)
    want_y, want_i = np.empty((2, 2, 5, 6)), np.empty((2, 2, 5, 6), dtype=np.int64)
    for n, c in itertools.product(range(n_), range(c_)):
        for out, taps in _pool_windows((h_, w_), (3, 2), (1, 1), (1, 1), (1, 0), (5, 6)):
            h, w = max(taps, key=lambda tap: x[(n, c) + tap])
            want_y[(n, c) + out] = x[n, c, h, w]
            want_i[(n, c) + out] = (n * c_ + c) * h_ * w_ + (h * w_ + w if storage_order == 0
                                                            else h + w * h_)
    np.testing.assert_array_equal(got["y"], want_y)
    np.testing.assert_array_equal(got["i"], want_i)


def test_resize_keeps_an_infinite_extrapolation_value():
    """Resize-19 tf_crop_and_resize: a sample outside the input takes ``extrapolation_value``
    as given, infinity included. onnx.reference returns 3.4028235e38 (float32's max) there;
    onnxruntime returns inf."""
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    roi = np.array([0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7], dtype=np.float32)
    node = helper.make_node("Resize", ["X", "roi", "", "sizes"], ["Y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize",
                            extrapolation_value=float("inf"))
    y = _run(node, [("X", F, [1, 1, 4, 4]), ("roi", F, [8]), ("sizes", I64, [4])],
             [("Y", F, ["n", "c", "h", "w"])], 19, X=x, roi=roi,
             sizes=np.array([1, 1, 3, 3], dtype=np.int64))["Y"][0, 0]
    # tf_crop_and_resize: x_in = start * (len - 1) + out * (end - start) * (len - 1) / (n - 1)
    want = np.empty((3, 3))
    for r, c in itertools.product(range(3), range(3)):
        h = 0.4 * 3 + r * (1.2 - 0.4) * 3 / 2
        w = 0.6 * 3 + c * (1.7 - 0.6) * 3 / 2
        if not (0 <= h <= 3 and 0 <= w <= 3):
            want[r, c] = np.inf
            continue
        h0, w0 = min(int(h), 2), min(int(w), 2)
        dh, dw = h - h0, w - w0
        cell = x[0, 0, h0:h0 + 2, w0:w0 + 2].astype(np.float64)
        want[r, c] = (cell[0, 0] * (1 - dh) * (1 - dw) + cell[0, 1] * (1 - dh) * dw
                      + cell[1, 0] * dh * (1 - dw) + cell[1, 1] * dh * dw)
    assert np.isinf(want).sum() == 7
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_attention_qk_output_mode_0_is_the_product_before_softcap():
    """Attention-23, qk_matmul_output_mode 0: "the output of qk matmul", i.e. (Q K^T) * scale
    (scale 1 / sqrt(head size)), before softcap, mask and softmax; Y is softmax(softcap *
    tanh(QK / softcap)) V. onnx.reference returns the softcapped scores in mode 0 (5.6 off
    here); onnxruntime returns the product."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 3, 4)).astype(np.float32) * 2 for _ in range(3))
    node = helper.make_node("Attention", ["q", "k", "v"], ["y", "", "", "qk"], softcap=2.0,
                            qk_matmul_output_mode=0)
    spec = [1, 2, 3, 4]
    got = _run(node, [("q", F, spec), ("k", F, spec), ("v", F, spec)],
               [("y", F, spec), ("qk", F, [1, 2, 3, 3])], 23, q=q, k=k, v=v)
    qk = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(4)
    capped = 2.0 * np.tanh(qk / 2.0)
    weights = np.exp(capped - capped.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(got["qk"], qk, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["y"], weights @ v.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_lp_normalization_p1_divides_by_the_sum_of_magnitudes():
    """LpNormalization p=1: x / sum(|x|) along ``axis``. onnx.reference divides by sum(x)
    (rows with negative values come out wrong: [1, 0.5, -1] -> [2, 1, -2]); onnxruntime
    agrees with the formula. A row of subnormals keeps its ratios."""
    x = np.array([[[1.0, 0.5, -1.0], [1.0, -1.0, 1e-40], [-1e-40, 1e-40, 0.0]]], np.float32)
    y = _run(helper.make_node("LpNormalization", ["x"], ["y"], axis=-1, p=1),
             [("x", F, [1, 3, 3])], [("y", F, [1, 3, 3])], 17, x=x)["y"]
    rows = x.astype(np.float64)
    np.testing.assert_allclose(y, rows / np.abs(rows).sum(axis=-1, keepdims=True), rtol=1e-6)


def test_reduce_log_sum_exp_of_infinities():
    """ReduceLogSumExp = log(sum(exp(x))): a row holding +inf gives +inf and a row of -inf
    gives log(0) = -inf. onnx.reference subtracts the row's max first and returns NaN for the
    -inf row (-inf - -inf); onnxruntime returns -inf."""
    x = np.array([[0.5, np.inf, -1.0], [-np.inf, -np.inf, -np.inf], [1.0, 2.0, 3.0]], np.float32)
    node = helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0)
    y = _run(node, [("x", F, [3, 3]), ("axes", I64, [1])], [("y", F, [3])], 18, x=x,
             axes=np.array([1], dtype=np.int64))["y"]
    assert y[0] == np.inf and y[1] == -np.inf
    np.testing.assert_allclose(y[2], np.log(np.exp([1.0, 2.0, 3.0]).sum()), rtol=1e-6)


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_an_ignored_sample_loses_exactly_zero_whatever_its_input(op, reduction):
    """"loss is zero for the case when target-value equals ignore_index": sample 0's target is
    ignore_index and its input holds NaN and inf, so its loss is 0 and 'mean' averages over the
    two others. refmnn multiplied by a zero weight (NaN * 0 = NaN) until 2026-11-29;
    onnx.reference gives 0."""
    x = np.array([[0.0, -1.0, np.nan, np.inf, np.nan],
                  [-0.0, -1.0, -np.inf, 0.0, 0.0],
                  [1e-40, 1e-40, 1.0, 0.5, -1e-40]], dtype=np.float32)
    target = np.array([2, 4, 3], dtype=np.int64)
    node = helper.make_node(op, ["x", "t"], ["z"], ignore_index=2, reduction=reduction)
    z = _run(node, [("x", F, [3, 5]), ("t", I64, [3])],
             [("z", F, [3] if reduction == "none" else [])], 13, x=x, t=target)["z"]
    rows = x.astype(np.float64)
    if op == "SoftmaxCrossEntropyLoss":  # log(softmax(row)); rows 1 and 2 are finite or -inf
        rows = rows - rows.max(axis=1, keepdims=True)
        rows = rows - np.log(np.exp(rows).sum(axis=1, keepdims=True))
    per_sample = np.array([0.0, -rows[1, 4], -rows[2, 3]])
    want = {"none": per_sample, "sum": per_sample.sum(), "mean": per_sample.sum() / 2}[reduction]
    np.testing.assert_allclose(z, want, rtol=1e-6)


def test_training_dropout_is_scale_times_data_times_mask():
    """Dropout-13 in training: "output = scale * data * mask", scale = 1 / (1 - ratio): a
    dropped NaN or infinity stays NaN (inf * 0), a dropped finite value is a signed zero, a
    kept one is doubled at ratio 0.5. refmnn zeroed dropped elements whatever they held until
    2026-11-29; onnx.reference, onnxruntime and PyTorch follow the formula."""
    x = np.tile(np.array([np.nan, np.inf, -np.inf, -3.0, 2.5, -0.0], dtype=np.float32), 20)
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=7)
    got = _run(node, [("x", F, [120]), ("r", F, []), ("t", TensorProto.BOOL, [])],
               [("y", F, [120]), ("mask", TensorProto.BOOL, [120])], 13, x=x,
               r=np.array(0.5, dtype=np.float32), t=np.array(True))
    y, keep = got["y"], got["mask"]
    assert 0 < keep.sum() < keep.size  # both kinds are present
    np.testing.assert_array_equal(y[keep], 2 * x[keep])  # NaN compares equal to NaN here
    dropped, finite = ~keep, np.isfinite(x)
    assert np.isnan(y[dropped & ~finite]).all()
    np.testing.assert_array_equal(y[dropped & finite], 0.0)
    assert (np.signbit(y[dropped & finite]) == np.signbit(x[dropped & finite])).all()


@pytest.mark.parametrize(("x", "scale"), [
    ([1.0, 2.0, -3.5, 0.25], (2.0 + 3.5) / 255),
    ([np.nan, 1.0, -1e-40, 0.5], np.nan),
    ([np.inf, 1.0, -2.0, 0.0], np.inf),
])
def test_dynamic_quantize_linear_follows_its_formula_through_nan_and_inf(x, scale):
    """DynamicQuantizeLinear: y_scale = (max(0, max(x)) - min(0, min(x))) / 255, with max and
    min propagating NaN as ONNX's Max and Min do, so a NaN in x gives a NaN scale and an
    infinity an infinite one; y = saturate(round(x / y_scale) + y_zero_point), a quotient with
    no code (NaN) taking 0's, as refmnn's QuantizeLinear does. refmnn read NaN past Python's
    max() until 2026-11-29 (y_scale 1.0 for the second x); onnx.reference gives NaN there."""
    x = np.array(x, dtype=np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    got = _run(node, [("x", F, [4])], [("y", TensorProto.UINT8, [4]), ("s", F, []),
                                       ("z", TensorProto.UINT8, [])], 11, x=x)
    np.testing.assert_allclose(got["s"], scale, rtol=1e-6)
    if np.isfinite(scale):
        zero = np.clip(np.round(0 - x.min() / np.float64(scale)), 0, 255)
        want = np.clip(np.round(x / np.float64(scale)) + zero, 0, 255)
    else:  # every quotient is 0 or NaN: every code is 0's, and so is the zero point
        zero, want = 0, np.zeros(4)
    assert got["z"] == zero
    np.testing.assert_array_equal(got["y"], want)


@pytest.mark.parametrize("ratio", [1.0, -0.25, np.nan])
def test_training_dropout_refuses_a_ratio_outside_0_to_1(ratio):
    """The ratio is "with value in [0, 1)": 1 makes the scale infinite, a negative ratio keeps
    everything at a scale below 1, NaN drops everything -- each a wrong answer if run, so
    training refuses them (refmnn returned zeros for 1 and ran the others until 2026-11-29;
    onnx.reference returns NaN for 1). Outside training the ratio is unused."""
    model = make_model([helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")],
                       [("x", F, [4]), ("r", F, []), ("t", TensorProto.BOOL, [])],
                       [("y", F, [4])], opset=13)
    x, r = np.ones(4, dtype=np.float32), np.array(ratio, dtype=np.float32)
    with pytest.raises(refmnn.OpError, match=r"node 'drop' \(Dropout, opset 13\).*\[0, 1\)"):
        refmnn.Session(model).run({"x": x, "r": r, "t": np.array(True)})
    y = refmnn.Session(model).run({"x": x, "r": r, "t": np.array(False)})["y"]
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize(("opset", "dtype", "limit"), [
    (13, np.float32, np.finfo(np.float32).max), (13, np.float16, np.finfo(np.float16).max),
    (13, np.float64, np.finfo(np.float64).max), (6, np.float32, 3.4028234663852886e38),
    (6, np.float16, np.inf), (1, np.float32, np.inf)])
def test_clip_without_bounds_clips_infinities_to_the_default_limits(opset, dtype, limit):
    """Clip-11+: min and max "default to numeric_limits::lowest() and numeric_limits::max()",
    so +-inf become the type's largest finite values; Clip-6's attributes default to
    -+3.4028234663852886e38 (infinite in float16: no clipping there); Clip-1 has no default.
    onnxruntime 1.32 agrees (Clip-6 float32 and Clip-13 of every float type); onnx.reference
    1.23.2 leaves Clip-13's infinities alone, and so did refmnn (every opset) until
    2026-11-29."""
    elem = {np.float32: F, np.float16: TensorProto.FLOAT16, np.float64: TensorProto.DOUBLE}
    x = np.array([np.inf, -np.inf, 1.5, np.nan], dtype=dtype)
    node = helper.make_node("Clip", ["x"], ["y"])
    y = _run(node, [("x", elem[dtype], [4])], [("y", elem[dtype], [4])], opset, x=x)["y"]
    np.testing.assert_array_equal(y, np.array([limit, -limit, 1.5, np.nan]).astype(dtype))


def test_attention_zeroes_only_the_rows_the_mask_leaves_without_a_key():
    """Attention-23: "a fully-masked query row (every key's combined additive bias is -inf)
    produces a zero output row"; a row whose *scores* are all -inf (a -inf query against
    positive keys, no mask) is not masked, and softmax gives NaN there (-inf - -inf), as in
    onnxruntime. refmnn zeroed both until 2026-11-29 (found by fuzz_models --diff --peer
    onnxruntime --values)."""
    rng = np.random.default_rng(4)
    q = rng.random((1, 1, 3, 4)).astype(np.float32)
    k, v = (rng.random((1, 1, 5, 4)).astype(np.float32) + 0.1 for _ in range(2))
    q[0, 0, 1] = -np.inf  # row 1: every score -inf
    mask = np.ones((3, 5), dtype=bool)
    mask[2] = False  # row 2: every key masked
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])
    y = _run(node, [("q", F, [1, 1, 3, 4]), ("k", F, [1, 1, 5, 4]), ("v", F, [1, 1, 5, 4]),
                    ("m", TensorProto.BOOL, [3, 5])], [("y", F, [1, 1, 3, 4])], 23,
             q=q, k=k, v=v, m=mask)["y"][0, 0]
    scores = q[0, 0, 0].astype(np.float64) @ k[0, 0].T.astype(np.float64) / 2.0  # 1/sqrt(4)
    weights = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    np.testing.assert_allclose(y[0], weights @ v[0, 0], rtol=1e-5)
    assert np.isnan(y[1]).all()
    np.testing.assert_array_equal(y[2], 0.0)


def test_det_of_a_matrix_with_nan_or_infinity_is_never_finite():
    """Det by Leibniz's formula ad - bc on 2 x 2 matrices, in IEEE arithmetic: NaN anywhere
    gives NaN, an infinite entry gives +-inf or NaN (inf * 0). LU's zero-pivot shortcut
    reported 0 for [[-0, -inf], [-0, 1]] and [[0, -0], [NaN, inf]] until 2026-11-29
    (onnxruntime gives NaN for both; found by fuzz_models --diff --peer onnxruntime)."""
    x = np.array([[[-0.0, -np.inf], [-0.0, 1.0]], [[0.0, -0.0], [np.nan, np.inf]],
                  [[np.inf, 0.0], [0.0, 1.0]], [[np.inf, 1.0], [1.0, np.inf]],
                  [[1.0, 2.0], [3.0, 4.0]], [[1e-40, -1e-40], [-1.0, -1e-40]]], np.float32)
    y = _run(helper.make_node("Det", ["x"], ["y"]), [("x", F, [6, 2, 2])], [("y", F, [6])],
             22, x=x)["y"]
    m = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = m[:, 0, 0] * m[:, 1, 1] - m[:, 0, 1] * m[:, 1, 0]
    np.testing.assert_allclose(y, want.astype(np.float32), rtol=1e-6)  # NaN equals NaN here


@pytest.mark.parametrize("opset", [7, 11, 22])
@pytest.mark.parametrize(("attrs", "begin"), [
    ({"auto_pad": "SAME_UPPER"}, 1),                 # total 13 - 10 = 3: 1 at the start
    ({"auto_pad": "SAME_LOWER"}, 2),
    ({"output_shape": [11]}, 1),                     # NOTSET, total 2
    ({"output_shape": [10]}, 2),                     # NOTSET, total 3: the larger half first
])
def test_conv_transpose_splits_a_derived_padding_the_same_at_every_opset(opset, attrs, begin):
    """ConvTranspose with a derived padding crops ``total = full - out`` from the full result,
    ``total // 2`` at the start for SAME_UPPER and ``total - total // 2`` for every other mode
    (the equations of version 11's text; the auto_pad attribute's words in version 1 too).
    refmnn was wrong here: it read version 1's equations, which contradict version 1's own
    attribute text and which ONNX corrected in place (onnx/onnx#3000), and cropped SAME_UPPER's
    larger half at the start and NOTSET's at the end before opset 11, and NOTSET's at the end
    at every opset. onnxruntime 1.32 splits as here at every opset; onnx.reference agrees for
    SAME_UPPER and SAME_LOWER and ignores output_shape without auto_pad (a size error)."""
    x = np.array([[[1.0, 2.0, 4.0, 8.0, 16.0]]], dtype=np.float32)
    w = np.array([[[1.0, 10.0, 100.0, 1000.0, 10000.0]]], dtype=np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2], **attrs)
    y = _run(node, [("x", F, [1, 1, 5]), ("w", F, [1, 1, 5])], [("y", F, [1, 1, "n"])], opset,
             x=x, w=w)["y"]
    full = np.zeros(2 * 4 + 5)                       # stride * (in - 1) + kernel = 13
    for i, xv in enumerate(x[0, 0].astype(np.float64)):
        for t, wv in enumerate(w[0, 0].astype(np.float64)):
            full[2 * i + t] += xv * wv
    out = attrs.get("output_shape", [5 * 2])[0]      # SAME: in * stride = 10
    np.testing.assert_array_equal(y[0, 0], full[begin:begin + out])


@pytest.mark.parametrize("given", ["scales", "sizes"])
def test_tf_crop_and_resize_spreads_the_output_over_the_region(given):
    """tf_crop_and_resize with a region [0.25, 0.75] of an 8-pixel row and scale 2: the output
    has floor(8 * (0.75 - 0.25) * 2) = 8 pixels (the spec's size rule; onnxruntime 1.32,
    onnx.reference 1.23.2 and onnx's shape inference make 16, leaving the roi out, as
    onnx/onnx#5783 reports), sampled at x = 0.25 * 7 + y * 0.5 * 7 / (8 - 1) -- the same 8
    pixels as asking for sizes [8]. refmnn was wrong here with scales: it divided by
    8 * 2 - 1, the width of the whole row resized, so the samples covered less than half of
    the region."""
    x = (np.arange(8, dtype=np.float32) ** 2).reshape(1, 1, 1, 8)
    roi = np.array([0, 0, 0, 0.25, 1, 1, 1, 0.75], dtype=np.float32)
    inputs = [("x", F, [1, 1, 1, 8]), ("roi", F, [8])]
    feeds = {"x": x, "roi": roi}
    if given == "scales":
        names = ["x", "roi", "scales"]
        inputs.append(("scales", F, [4]))
        feeds["scales"] = np.array([1, 1, 1, 2], dtype=np.float32)
    else:
        names = ["x", "roi", "", "sizes"]
        inputs.append(("sizes", I64, [4]))
        feeds["sizes"] = np.array([1, 1, 1, 8], dtype=np.int64)
    node = helper.make_node("Resize", names, ["y"], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize")
    y = _run(node, inputs, [("y", F, [1, 1, 1, "n"])], 19, **feeds)["y"]
    row = x.reshape(-1).astype(np.float64)
    want = []
    for out in range(8):
        src = 0.25 * 7 + out * 0.5 * 7 / 7
        lo = int(np.floor(src))
        want.append(row[lo] + (src - lo) * (row[min(lo + 1, 7)] - row[lo]))
    np.testing.assert_allclose(y.reshape(-1), want, rtol=1e-6)


@pytest.mark.parametrize("scale, width", [(0.6, 4), (1.5, 5)])
def test_align_corners_divides_by_the_fractional_output_width(scale, width):
    """Resize linear align_corners with a scale whose product with the width is not whole:
    x = y * (in - 1) / (in * scale - 1), the target width before flooring. With [1 2 3 4]
    and 0.6 the one sample past 0 sits at 3 / 1.4 and gives 3.142857, the value of onnx's
    own test (test_resize_downsample_scales_linear_align_corners) and of onnx.reference
    1.23.2; the author of Resize-11 confirmed the fractional width as intended
    (onnx/onnx#2462). onnxruntime 1.32, PyTorch and MNN divide by the output length minus
    one instead (x = 3, value 4), so a model exported from ``interpolate(scale_factor=1.5,
    align_corners=True)`` of a 5-pixel row differs there by up to a fifth of the range
    (found by exporting it: refmnn and onnx.reference agree, onnxruntime matches PyTorch);
    exported with ``size=`` it agrees everywhere."""
    row = np.arange(1, width + 1, dtype=np.float32) ** 2
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                            coordinate_transformation_mode="align_corners")
    scales = np.array([1, 1, 1, scale], dtype=np.float32)
    y = _run(node, [("x", F, [1, 1, 1, width]), ("scales", F, [4])],
             [("y", F, [1, 1, 1, "n"])], 19, x=row.reshape(1, 1, 1, width), scales=scales)["y"]
    target = width * float(np.float32(scale))
    want = []
    for out in range(int(np.floor(target))):
        src = out * (width - 1) / (target - 1)
        lo = min(int(np.floor(src)), width - 2)
        want.append(row[lo] + (src - lo) * (row[lo + 1] - row[lo]))
    np.testing.assert_allclose(y.reshape(-1), want, rtol=1e-6)


def test_align_corners_gives_the_value_of_onnxs_own_test():
    """test_resize_downsample_scales_linear_align_corners: [[1 2 3 4] [5 6 7 8]] scaled by 0.6
    on both axes is [[1, 3.142857]] (see above; onnxruntime 1.32 gives [[1, 4]])."""
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 4)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                            coordinate_transformation_mode="align_corners")
    y = _run(node, [("x", F, [1, 1, 2, 4]), ("scales", F, [4])], [("y", F, [1, 1, "h", "w"])],
             19, x=x, scales=np.array([1, 1, 0.6, 0.6], dtype=np.float32))["y"]
    np.testing.assert_allclose(y, [[[[1, 1 + 3 / 1.4]]]], rtol=1e-6)


def _round_half_even(value) -> int:
    whole = value.numerator // value.denominator
    rest = value - whole
    return whole + (1 if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2) else 0)


@pytest.mark.parametrize("op", ["QLinearMatMul", "QLinearConv"])
def test_requantization_rounds_as_the_real_number_formula(op):
    """y = round(acc * a_scale * b_scale / y_scale) + y_zero_point with acc = 15 * 9 + 15 * 9 =
    270 and the float32 scales 0.05, 0.1 and 0.3: exactly 4.4999999553... + 1, so y = 5.
    refmnn was wrong here: it formed the multiplier 0.05 * 0.1 / 0.3 in float32 first
    (0.016666668) and rounded 270 times that, 4.50000023, to 6 (found by
    tools/peer_cases.py: onnxruntime gives 5)."""
    u8 = TensorProto.UINT8
    scales = [np.float32(0.05), np.float32(0.1), np.float32(0.3)]
    feeds = {"a": np.array([[15, 15]], np.uint8), "sa": np.array(scales[0]),
             "za": np.array(0, np.uint8), "b": np.array([[9], [9]], np.uint8),
             "sb": np.array(scales[1]), "zb": np.array(0, np.uint8), "sy": np.array(scales[2]),
             "zy": np.array(1, np.uint8)}
    scalars = [("sa", F, []), ("za", u8, []), ("sb", F, []), ("zb", u8, []), ("sy", F, []),
               ("zy", u8, [])]
    if op == "QLinearConv":
        feeds["a"], feeds["b"] = feeds["a"].reshape(1, 1, 1, 2), feeds["b"].reshape(1, 1, 1, 2)
        shapes, out = ([1, 1, 1, 2], [1, 1, 1, 2]), [1, 1, 1, 1]
    else:
        shapes, out = ([1, 2], [2, 1]), [1, 1]
    inputs = [("a", u8, shapes[0]), *scalars[:2], ("b", u8, shapes[1]), *scalars[2:]]
    node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
    y = _run(node, inputs, [("y", u8, out)], 21 if op == "QLinearMatMul" else 10, **feeds)["y"]
    exact = Fraction(270) * Fraction(float(scales[0])) * Fraction(float(scales[1])) \
        / Fraction(float(scales[2]))
    assert _round_half_even(exact) + 1 == 5
    assert int(y.reshape(())) == 5


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_same_is_input_times_stride_when_the_kernel_is_shorter(auto_pad):
    """auto_pad SAME: "output_shape[i] = input_shape[i] * strides[i]", also when the kernel is
    shorter than the stride and the full result (3 * (4 - 1) + 1 = 10) is shorter than that
    (12): the output extends past it, as TensorFlow's SAME transposed convolution does, each
    input pixel at 3 * i. onnxruntime 1.32 and onnx's shape inference give 10 outputs (they
    clamp the padding at 0), onnx.reference 12 shifted right by one (a negative pad)."""
    x = np.array([[[1.0, 2.0, 3.0, 4.0]]], dtype=np.float32)
    w = np.array([[[2.0]]], dtype=np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[3], auto_pad=auto_pad)
    y = _run(node, [("x", F, [1, 1, 4]), ("w", F, [1, 1, 1])], [("y", F, [1, 1, "n"])], 22,
             x=x, w=w)["y"]
    want = np.zeros(12)
    want[::3] = 2.0 * x.reshape(-1)
    np.testing.assert_array_equal(y.reshape(-1), want)


def test_cast_to_float8e5m2_rounds_a_tie_past_the_largest_value_to_infinity():
    """61440 lies halfway between float8e5m2's largest value 57344 (1.11b x 2^15, an odd last
    bit) and 2^16: rounding to nearest even goes up, past the range, and without saturation
    the spec's table makes an E5M2 overflow +inf (as ml_dtypes does). onnxruntime 1.32 gives
    NaN; with saturation both give 57344."""
    import ml_dtypes

    x = np.array([61440.0, -61440.0, 60000.0], dtype=np.float32)
    for saturate, want in ((0, [np.inf, -np.inf, 57344.0]), (1, [57344.0, -57344.0, 57344.0])):
        node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E5M2,
                                saturate=saturate)
        y = _run(node, [("x", F, [3])], [("y", TensorProto.FLOAT8E5M2, [3])], 21, x=x)["y"]
        assert y.dtype == ml_dtypes.float8_e5m2
        np.testing.assert_array_equal(y.astype(np.float32), want)


def _ml_model(op: str, x_shape: list[int], y_shape: list[int], opset: int, **attrs):
    node = helper.make_node(op, ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    return make_model([node], [("x", F, x_shape)], [("y", F, y_shape)],
                      extra_opsets=[("ai.onnx.ml", opset)])


@pytest.mark.parametrize(("op", "attrs"), [
    ("LinearRegressor", {"coefficients": [1.0, 2.0, 3.0], "intercepts": [0.5]}),
    ("TreeEnsembleRegressor", {"n_targets": 1, "nodes_treeids": [0], "nodes_nodeids": [0],
                               "nodes_featureids": [0], "nodes_values": [0.0],
                               "nodes_modes": ["LEAF"], "nodes_truenodeids": [0],
                               "nodes_falsenodeids": [0], "target_treeids": [0],
                               "target_nodeids": [0], "target_ids": [0],
                               "target_weights": [1.5]}),
])
def test_an_empty_batch_gives_an_empty_result(op, attrs):
    """N = 0 rows is a batch like any other: [0, 1] out of [0, 3] in (onnxruntime agrees).
    The [N, C] view of X was reshaped with -1, which NumPy cannot resolve from 0 elements;
    ConvTranspose had the same flaw (its empty_batch conformance sample)."""
    model = _ml_model(op, [0, 3], [0, 1], 1, **attrs)
    y = refmnn.Session(model).run({"x": np.zeros((0, 3), np.float32)})["y"]
    assert y.shape == (0, 1) and y.dtype == np.float32


def test_non_max_suppression_keeps_a_score_equal_to_the_threshold():
    """NonMaxSuppression: "Bounding boxes with score less than score_threshold are removed",
    so a box scoring exactly the threshold stays (the IoU rule next to it says "strictly
    greater" where it means it). onnxruntime 1.32 and onnx.reference drop it."""
    boxes = np.array([[[0, 0, 1, 1], [2, 2, 3, 3], [4, 4, 5, 5]]], np.float32)
    scores = np.array([[[0.9, 0.5, 0.3]]], np.float32)
    node = helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"])
    model = make_model([node], [("b", F, [1, 3, 4]), ("s", F, [1, 1, 3]),
                                ("m", TensorProto.INT64, [1]), ("i", F, [1]), ("t", F, [1])],
                       [("y", TensorProto.INT64, ["n", 3])], opset=11)
    feeds = {"b": boxes, "s": scores, "m": np.array([10]), "i": np.array([0.5], np.float32)}
    run = refmnn.Session(model).run
    assert run({**feeds, "t": np.array([0.5], np.float32)})["y"].tolist() == [[0, 0, 0],
                                                                              [0, 0, 1]]
    assert run({**feeds, "t": np.array([0.51], np.float32)})["y"].tolist() == [[0, 0, 0]]


def _qlinear_matmul(a, a_scale, b, b_scale, y_shape):
    """QLinearMatMul-21 of uint8 a and b (zero points 0, y_scale 1) on the reference."""
    names = ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]
    feeds = {"a": a, "sa": a_scale, "za": np.array(0, np.uint8), "b": b, "sb": b_scale,
             "zb": np.array(0, np.uint8), "sy": np.array(1, np.float32),
             "zy": np.array(0, np.uint8)}
    types = {n: TensorProto.UINT8 if v.dtype == np.uint8 else F for n, v in feeds.items()}
    node = helper.make_node("QLinearMatMul", names, ["y"])
    model = make_model([node], [(n, types[n], list(feeds[n].shape)) for n in names],
                       [("y", TensorProto.UINT8, y_shape)], opset=21)
    return refmnn.Session(model).run(feeds)["y"]


def test_qlinear_matmul_scales_rows_and_columns_of_a_one_dimensional_operand():
    """QLinearMatMul "behaves like numpy.matmul": a 1-D a is one row and a 1-D b one column,
    whose axis leaves the result; a per-column b_scale [..., 1, N] (per-row a_scale [M])
    still scales the result's columns (rows). The scales met acc after matmul had dropped
    the axis: a wrong shape, or a refusal (onnxruntime agrees with the expected values)."""
    b = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    b_scale = np.array([[[1, 2, 4]], [[0.5, 1, 2]]], np.float32)
    y = _qlinear_matmul(np.array([3, 5], np.uint8), np.array(0.5, np.float32), b, b_scale,
                        [2, 3])
    acc = np.array([3, 5]) @ b.astype(np.int64)
    assert y.tolist() == np.rint(acc * 0.5 * b_scale[:, 0, :]).tolist()  # [2, 3]
    a = np.array([[1, 2], [3, 4], [5, 6]], np.uint8)
    y = _qlinear_matmul(a, np.array([1, 2, 4], np.float32), np.array([1, 1], np.uint8),
                        np.array(1, np.float32), [3])
    assert y.tolist() == [3, 14, 44]


def test_quantize_linear_divides_in_the_precision_it_names():
    """QuantizeLinear-23: "The type of y_scale determines the precision of the division
    operation between x and y_scale, unless the precision attribute is specified": a Div in
    float16 takes float16 operands, so a float32 x beyond 65504 is inf there and saturates
    (onnxruntime 1.32 agrees; the exact quotient rounded to float16 would give 38400)."""
    x = np.array([76807, 3, -70000], np.float32)
    for precision in (None, TensorProto.FLOAT16):
        attrs = {} if precision is None else {"precision": precision}
        node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)
        model = make_model([node], [("x", F, [3]), ("s", TensorProto.FLOAT16, []),
                                    ("z", TensorProto.UINT16, [])],
                           [("y", TensorProto.UINT16, [3])], opset=23)
        feeds = {"x": x, "s": np.array(2, np.float16), "z": np.array(0, np.uint16)}
        assert refmnn.Session(model).run(feeds)["y"].tolist() == [65535, 2, 0]


def test_leaky_relu_with_alpha_zero_multiplies_by_zero():
    """LeakyRelu-16's function body is Where(Less(X, 0), Mul(alpha, X), X): with alpha = 0 a
    negative X gives -0.0 and -inf gives 0 * -inf = NaN, not Relu's 0 (onnxruntime and
    onnx.reference agree)."""
    x = np.array([-np.inf, -1.0, -0.0, 2.0, np.nan], np.float32)
    node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.0)
    y = _run(node, [("x", F, [5])], [("y", F, [5])], 16, x=x)["y"]
    assert np.isnan(y[0]) and np.isnan(y[4]) and y[1:4].tolist() == [0.0, 0.0, 2.0]
    assert np.signbit(y[1:3]).all()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_of_a_huge_double_is_the_double(approximate):
    """Gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2))) is x itself for large x, DBL_MAX included:
    x * (1 + erf) overflowed to inf before the halving (onnxruntime and onnx.reference give
    x)."""
    x = np.array([np.finfo(np.float64).max, 1e308, -1e308, 3.0])
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    y = _run(node, [("x", TensorProto.DOUBLE, [4])], [("y", TensorProto.DOUBLE, [4])], 20,
             x=x)["y"]
    assert y[:3].tolist() == [x[0], 1e308, 0.0] and abs(y[3] - 2.9959) < 4e-3


@pytest.mark.parametrize("op", ["LayerNormalization", "GroupNormalization"])
def test_normalization_of_a_narrow_spread_around_a_large_mean_is_exact(op):
    """(x - mean) / sqrt(var + eps) for rows whose spread is 350x smaller than their mean: a
    mean rounded to float32 puts ulp(mean) / 2 into every deviation (1.7e-5 of the result);
    the reference takes the deviations' mean off them (the corrected two-pass algorithm) and
    is within float32 rounding of the exact result (onnxruntime, which sums in double,
    agrees)."""
    rng = np.random.default_rng(1)
    x = (0.63 + 0.002 * rng.standard_normal((4, 6, 8))).astype(np.float32)
    wide = x.astype(np.float64).reshape(4, -1) if op == "GroupNormalization" else \
        x.astype(np.float64)
    dev = wide - wide.mean(-1, keepdims=True)
    exact = (dev / np.sqrt((dev * dev).mean(-1, keepdims=True) + 1e-6)).reshape(x.shape)
    if op == "LayerNormalization":
        node = helper.make_node(op, ["x", "s"], ["y"], axis=-1, epsilon=1e-6)
        scale = np.ones(8, np.float32)
        inputs = [("x", F, [4, 6, 8]), ("s", F, [8])]
        feeds = {"x": x, "s": scale}
        opset = 17
    else:
        node = helper.make_node(op, ["x", "s", "b"], ["y"], num_groups=1, epsilon=1e-6)
        inputs = [("x", F, [4, 6, 8]), ("s", F, [6]), ("b", F, [6])]
        feeds = {"x": x, "s": np.ones(6, np.float32), "b": np.zeros(6, np.float32)}
        opset = 21
    y = refmnn.Session(make_model([node], inputs, [("y", F, [4, 6, 8])], opset=opset)).run(
        feeds)["y"]
    assert np.max(np.abs(y - exact)) <= 4 * np.finfo(np.float32).eps * np.abs(exact).max()


def test_mean_variance_normalization_of_a_narrow_spread_is_exact():
    """The same for MeanVarianceNormalization, (x - mean) / (std + 1e-9) over axes: at a spread
    10^7x below the mean a float32 mean's rounding made the result 3.5e-2 wrong."""
    x = (1e4 + 1e-3 * np.random.default_rng(0).standard_normal((2, 3, 4, 5))).astype(np.float32)
    wide = x.astype(np.float64)
    dev = wide - wide.mean((0, 2, 3), keepdims=True)
    exact = dev / (np.sqrt((dev * dev).mean((0, 2, 3), keepdims=True)) + 1e-9)
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"])
    y = _run(node, [("x", F, [2, 3, 4, 5])], [("y", F, [2, 3, 4, 5])], 13, x=x)["y"]
    assert np.max(np.abs(y - exact)) <= 4 * np.finfo(np.float32).eps * np.abs(exact).max()


def test_sum_of_float16_rounds_once():
    """Sum is "element-wise sum of each of the input tensors": the exact total, rounded once
    to float16 (onnxruntime agrees). Partial sums rounded to float16 lose a cancelling total:
    2048 + 1 + 1 gave 2048 and 0.1 + 0.2 - 0.3 twice the right value."""
    node = helper.make_node("Sum", ["a", "b", "c"], ["y"])
    feeds = {"a": np.array([2048, 0.1], np.float16), "b": np.array([1, 0.2], np.float16),
             "c": np.array([1, -0.3], np.float16)}
    h = TensorProto.FLOAT16
    y = _run(node, [(n, h, [2]) for n in "abc"], [("y", h, [2])], 13, **feeds)["y"]
    exact = sum(v.astype(np.float64) for v in feeds.values()).astype(np.float16)
    assert y.tolist() == exact.tolist() == [2050.0, float(np.float16(-1.221e-04))]


def test_probit_is_the_inverse_normal_cdf():
    """PROBIT = sqrt(2) erf^-1(2 s - 1), the inverse of the normal CDF: -inf and +inf at
    scores 0 and 1 (they were 0), and erf^-1 itself between (it was Winitzki's closed form,
    relative error up to 2e-3, which onnxruntime 1.32 returns)."""
    model = _ml_model("LinearRegressor", [1, 1], [1, 4], 1, targets=4,
                      coefficients=[0.0] * 4, intercepts=[0.0, 0.25, 0.975, 1.0],
                      post_transform="PROBIT")
    y = refmnn.Session(model).run({"x": np.ones((1, 1), np.float32)})["y"][0]
    quantile = statistics.NormalDist().inv_cdf  # of the float32 scores (0.975 is 0.97500002)
    assert y.tolist() == [-np.inf, float(np.float32(quantile(0.25))),
                          float(np.float32(quantile(float(np.float32(0.975))))), np.inf]


def test_a_tree_ensemble_without_votes_gives_its_base_values():
    """Every target_* attribute of TreeEnsembleRegressor is optional: an ensemble that casts
    no vote scores each target its base value (onnxruntime agrees; it raised TypeError)."""
    model = _ml_model("TreeEnsembleRegressor", [2, 1], [2, 1], 3, n_targets=1,
                      nodes_treeids=[0], nodes_nodeids=[0], nodes_featureids=[0],
                      nodes_values=[0.0], nodes_modes=["LEAF"], nodes_truenodeids=[0],
                      nodes_falsenodeids=[0], base_values=[0.5])
    y = refmnn.Session(model).run({"x": np.zeros((2, 1), np.float32)})["y"]
    assert y.tolist() == [[0.5], [0.5]]


def test_a_nan_feature_takes_the_branch_its_missing_value_flag_names():
    """Tree ensembles: "For each node, define what to do in the presence of a NaN: use the
    'true' (if the attribute value is 1) or 'false' (if the attribute value is 0) branch", in
    every mode: at BRANCH_NEQ, NaN != t is true, but the flag 0 sends NaN to 'false'
    (onnx.reference agrees; onnxruntime 1.32 goes 'true')."""
    def tree(flag: int) -> float:
        model = _ml_model("TreeEnsembleRegressor", [1, 1], [1, 1], 3, n_targets=1,
                          nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2],
                          nodes_featureids=[0, 0, 0], nodes_values=[0.5, 0.0, 0.0],
                          nodes_modes=["BRANCH_NEQ", "LEAF", "LEAF"],
                          nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
                          nodes_missing_value_tracks_true=[flag, 0, 0],
                          target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0],
                          target_weights=[1.0, 2.0])
        return float(refmnn.Session(model).run({"x": np.full((1, 1), np.nan, np.float32)})[
            "y"][0, 0])
    assert (tree(0), tree(1)) == (2.0, 1.0)


def _float32_of(exact: Fraction, sign: float) -> np.float32:
    """``exact`` rounded once to float32, half to even (a zero takes ``sign``'s sign)."""
    if exact == 0:
        return np.float32(np.copysign(0.0, sign))
    top = np.finfo(np.float32).max
    if abs(exact) >= Fraction(float(top)) + Fraction(2**104) / 2:  # its ulp is 2^104
        return np.float32(np.copysign(np.inf, float(exact)))
    if abs(exact) > Fraction(float(top)):
        return np.float32(np.copysign(top, float(exact)))
    near = np.float32(float(exact))  # within an ulp, maybe rounded twice: try its neighbours
    candidates = [np.nextafter(near, np.float32(-np.inf)), near,
                  np.nextafter(near, np.float32(np.inf))]
    finite = [c for c in candidates if np.isfinite(c)]
    best = min(finite, key=lambda c: (abs(Fraction(float(c)) - exact),
                                      int(np.array(c).view(np.uint32)) & 1))
    return best


@pytest.mark.parametrize("code", [TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16,
                                  TensorProto.UINT16, TensorProto.INT4, TensorProto.UINT4,
                                  TensorProto.INT32])
def test_dequantize_linear_is_the_exact_product_rounded_once(code):
    """y = (x - x_zero_point) * x_scale: the difference and its product are exact reals,
    rounded once to float32 -- what the reference computes in float32 for codes of up to 16
    bits (exact there too) and in float64 for int32 (a 33-bit difference times a 24-bit scale
    is rounded to float64 first: it could differ only where that lands on a float32 midpoint).
    Checked with Fractions, per tensor and per axis, on the codes' ends and on scales that are
    subnormal, huge or zero."""
    import ml_dtypes

    from refmnn.dtypes import DType

    dtype = DType(code).numpy
    info = ml_dtypes.iinfo(dtype) if dtype.kind == "V" else np.iinfo(dtype)
    rng = np.random.default_rng(code)
    x = rng.integers(int(info.min), int(info.max), (4, 64), endpoint=True)
    x[0, :2] = int(info.min), int(info.max)
    x = x.astype(dtype)
    for scale in (np.array(0.0371, np.float32), np.array(3e38, np.float32),
                  np.array(1e-42, np.float32), np.array([0.5, 7e-39, 1e-3, 0.0], np.float32)):
        zero = np.array(rng.integers(int(info.min), int(info.max), scale.shape,
                                     endpoint=True)).astype(dtype)
        node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=0)
        model = make_model([node], [("x", code, [4, 64]), ("s", F, list(scale.shape)),
                                    ("z", code, list(scale.shape))], [("y", F, [4, 64])],
                           opset=21)
        y = refmnn.Session(model).run({"x": x, "s": scale, "z": zero})["y"]
        s = np.broadcast_to(scale.reshape(-1, 1) if scale.ndim else scale, x.shape)
        z = np.broadcast_to(zero.reshape(-1, 1) if zero.ndim else zero, x.shape)
        want = np.array([_float32_of((int(a) - int(b)) * Fraction(float(c)),
                                     float(int(a) - int(b) or 1) * float(c))
                         for a, b, c in zip(x.ravel(), z.ravel(), s.ravel())],
                        np.float32).reshape(x.shape)
        np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))


def test_conv_multiplies_the_zero_padding_by_an_infinite_weight():
    """Conv pads the input with zeros ("pads: padding added to the beginning and end") and sums
    weight times input over each window, so a window that puts an infinite weight on the
    padding sums inf * 0 = NaN. onnxruntime 1.32 skips the padding taps when the weights are
    constant (a number there; with the weights as an input it agrees); refmnn's backends once
    did too (tools/peer_cases.py KNOWN)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    w = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    w[0, 1, 0, 0] = np.inf
    w[1, 0, 2, 1] = np.nan
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    y = _run(node, [("x", F, [1, 2, 4, 5]), ("w", F, [2, 2, 3, 3])], [("y", F, [1, 2, 4, 5])],
             11, x=x, w=w)["y"]
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.empty((1, 2, 4, 5))
    with np.errstate(invalid="ignore"):
        for m, i, j in itertools.product(range(2), range(4), range(5)):
            want[0, m, i, j] = sum(padded[0, c, i + a, j + b] * float(w[m, c, a, b])
                                   for c, a, b in itertools.product(range(2), range(3), range(3)))
    assert np.isnan(want).sum() == 20 + 8  # channel 1 all NaN; channel 0 its top row, left column
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_allclose(y[~np.isnan(y)], want[~np.isnan(want)], rtol=1e-5, atol=1e-5)
