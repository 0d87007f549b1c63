"""Cast and CastLike against the spec's words and tables, one-node models at their opsets.

Each case is one a differential sweep (tools/sweep_ops.py with tools/sweeps/cast.py) found
where refmnn's reference was wrong: float8e8m0's table (zero, underflow, rank 0), rounding
twice through float32 (float64 and the wide integers to bfloat16, float8, float8e8m0),
strings that ignored ``saturate`` and ``round_mode`` or rounded through float64, and Cast-19
to 23's FNUZ row for infinity. Every test failed on the old code.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import refmnn

from tests.helpers import make_model

T = TensorProto


def _cast(x: np.ndarray, source: int, to: int, opset: int, **attrs: object) -> np.ndarray:
    """Run Cast(to) on ``x`` (ONNX element type ``source``) as a one-node model."""
    node = helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    model = make_model([node], [("x", source, list(x.shape))], [("y", to, list(x.shape))],
                       opset=opset)
    return refmnn.Session(model).run({"x": x})["y"]


def _codes(y: np.ndarray) -> list[int]:
    """The bytes of a float8e8m0 array (code c is 2^(c - 127), 255 is NaN)."""
    assert y.dtype == ml_dtypes.float8_e8m0fnu
    return y.view(np.uint8).reshape(-1).tolist()


def test_a_rank_0_tensor_cast_to_float8e8m0_stays_rank_0():
    """"returns an output tensor of the same size in the converted type": a scalar stays a
    scalar (the old code made it shape [1], and the planner raised ShapeError)."""
    y = _cast(np.array(3.0, np.float32), T.FLOAT, T.FLOAT8E8M0, 24)
    assert y.shape == ()
    assert _codes(y) == [129]  # 3 rounds up to 4


@pytest.mark.parametrize(("saturate", "round_mode", "want"), [
    (1, "up", [0, 0, 0, 0, 1]),
    (0, "nearest", [255, 255, 255, 0, 0]),
    (1, "nearest", [0, 0, 0, 0, 0]),
    (0, "up", [255, 255, 255, 0, 1]),
    (0, "down", [255, 255, 255, 0, 0]),
])
def test_zero_and_values_below_e8m0_min_follow_the_table(saturate, round_mode, want):
    """Cast-24's float8e8m0 table: "0 | 0 | NaN" and "x < E8M0_MIN | E8M0_MIN | NaN"
    (saturate + up | non-saturate + nearest); ``saturate`` decides in the other modes too.
    2^-127 (a float32 subnormal, 0.m x 2^-126) is E8M0_MIN itself, code 0 in every mode;
    1.25 x 2^-127 rounds up to 2^-126 or to nearest 2^-127. The old code read exponent field 0
    as 2^-127 for every subnormal and zero and never gave NaN for them."""
    x = np.array([0.0, 2.0 ** -149, 2.0 ** -130, 2.0 ** -127, 1.25 * 2.0 ** -127], np.float32)
    y = _cast(x, T.FLOAT, T.FLOAT8E8M0, 24, saturate=saturate, round_mode=round_mode)
    assert _codes(y) == want


@pytest.mark.parametrize(("round_mode", "want"), [
    ("up", [128, 128, 128]), ("down", [127, 127, 127]), ("nearest", [127, 128, 127])])
def test_float64_to_e8m0_rounds_the_float64_value(round_mode, want):
    """"the rounding behavior can be specified using the round_mode": 1 + 2^-40 is above 1
    (up: 2), 2 - 2^-40 below 2 (down: 1), 1.5 - 2^-40 below the midpoint 1.5 (nearest: 1).
    The old code rounded them to float32 first (1, 2, 1.5) and then to a power of two."""
    x = np.array([1 + 2.0 ** -40, 2 - 2.0 ** -40, 1.5 - 2.0 ** -40])
    assert _codes(_cast(x, T.DOUBLE, T.FLOAT8E8M0, 24, round_mode=round_mode)) == want


def test_int64_to_e8m0_rounds_the_integer():
    """round_mode up: 2^40 + 1 is above 2^40, so 2^41 (float32 made it 2^40 first); 2^62 + 1
    (past 2^53, where float64 too rounds) gives 2^63."""
    x = np.array([2 ** 40 + 1, 2 ** 40, 2 ** 62 + 1], np.int64)
    assert _codes(_cast(x, T.INT64, T.FLOAT8E8M0, 24, round_mode="up")) == [168, 167, 190]


def test_strings_to_float8_obey_saturate():
    """Strings cast "to float types"; with saturate=0 the float8 table gives "Inf | NaN" and
    "[x] > FLT_MAX | NaN" for E4M3FN: "1e6", "-1e6", "inf", "500" (448 is the largest; 500
    rounds past it) are NaN. The old code parsed strings with saturate=1 whatever the node
    said (448, -448, 448, 448)."""
    x = np.array(["1e6", "-1e6", "inf", "500", "1.0625"], dtype=object)
    y = _cast(x, T.STRING, T.FLOAT8E4M3FN, 21, saturate=0).astype(np.float32)
    np.testing.assert_array_equal(y, [np.nan, np.nan, np.nan, np.nan, 1.0])


def test_strings_to_e8m0_obey_round_mode():
    """round_mode nearest: "0.000366" is 1.499 x 2^-12, below the midpoint, so 2^-12 (code
    115); the old code rounded strings up (2^-11)."""
    x = np.array(["0.000366"], dtype=object)
    assert _codes(_cast(x, T.STRING, T.FLOAT8E8M0, 24, round_mode="nearest")) == [115]


@pytest.mark.parametrize(("source", "value", "to", "want"), [
    (T.DOUBLE, np.float64(1 + 2.0 ** -8 + 2.0 ** -40), T.BFLOAT16, 1.0078125),
    (T.DOUBLE, np.float64(1 + 2.0 ** -4 + 2.0 ** -40), T.FLOAT8E4M3FN, 1.125),
    (T.DOUBLE, np.float64(1 + 2.0 ** -3 + 2.0 ** -40), T.FLOAT8E5M2, 1.25),
    (T.INT64, np.int64(2 ** 24 + 2 ** 16 + 1), T.BFLOAT16, 16908288.0),
    (T.UINT32, np.uint32(2 ** 24 + 2 ** 16 + 1), T.BFLOAT16, 16908288.0),
    (T.INT64, np.int64(2 ** 60 + 2 ** 52 + 1), T.BFLOAT16, 2.0 ** 60 + 2.0 ** 53),
])
def test_a_cast_rounds_once(source, value, to, want):
    """"a 64-bit float 3.1415926459 may be round to a 32-bit float 3.141592": the value is
    rounded to the target, once, to nearest (the float8 tables' "RNE"). Each value lies just
    past a tie of the target; rounding it to float32 first lands on the tie, which then goes
    to even (1, 1, 1, 16777216, 16777216, 2^60) -- ml_dtypes' way, the old code's."""
    y = _cast(np.array([value]), source, to, 21)
    assert y.astype(np.float64).tolist() == [want]


def test_saturation_decides_on_the_unrounded_float64():
    """E4M3FN, saturate=0: "[x] > FLT_MAX | NaN". 464 is the tie between 448 (the largest)
    and 480 and goes to even, 448; 464 + 2^-30 rounds past 448: NaN (through float32 it
    became 464 and then 448)."""
    x = np.array([464.0, 464.0 + 2.0 ** -30])
    y = _cast(x, T.DOUBLE, T.FLOAT8E4M3FN, 21, saturate=0).astype(np.float32)
    np.testing.assert_array_equal(y, [448.0, np.nan])


@pytest.mark.parametrize(("opset", "want"), [(19, np.nan), (21, np.nan), (23, np.nan),
                                             (24, 240.0), (25, 240.0)])
@pytest.mark.parametrize("op", ["Cast", "CastLike"])
def test_infinity_to_fnuz_with_saturation_follows_the_versioned_table(op, opset, want):
    """Cast-19, 21 and 23 (and CastLike): the saturate table's row "Inf | FLT_MAX | NaN |
    FLT_MAX | NaN" (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) and "-Inf | -FLT_MAX | NaN | -FLT_MAX |
    NaN"; Cast-24 changed both to +-FLT_MAX (240 for E4M3FNUZ). onnxruntime 1.32 and
    onnx.reference 1.23.2 give +-FLT_MAX at every opset; so did the old code."""
    x = np.array([np.inf, -np.inf, 300.0], np.float32)
    if op == "Cast":
        node = helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT8E4M3FNUZ)
        inputs = [("x", T.FLOAT, [3])]
        feeds = {"x": x}
    else:
        node = helper.make_node("CastLike", ["x", "like"], ["y"])
        inputs = [("x", T.FLOAT, [3]), ("like", T.FLOAT8E4M3FNUZ, [1])]
        feeds = {"x": x, "like": np.zeros(1, ml_dtypes.float8_e4m3fnuz)}
    model = make_model([node], inputs, [("y", T.FLOAT8E4M3FNUZ, [3])], opset=opset)
    y = refmnn.Session(model).run(feeds)["y"].astype(np.float32)
    np.testing.assert_array_equal(y, [want, -want, 240.0])


def test_a_string_to_float32_rounds_the_literal_once():
    """"Casting from string tensor in plain ... and scientific numeric representations ... to
    float types": "1.00000005960464477550" is just above float32's tie 1 + 2^-24, so
    1 + 2^-23; read as float64 first it is the tie itself, which goes to even, 1."""
    x = np.array(["1.00000005960464477550", "0.1", "-1e-50", "NaN"], dtype=object)
    y = _cast(x, T.STRING, T.FLOAT, 21)
    np.testing.assert_array_equal(y, np.array([1 + 2.0 ** -23, 0.1, -0.0, np.nan], np.float32))


def test_a_float16_to_string_reads_back_in_float32():
    """"plain floating-point representation (such as "314.15926")": float16 65504 is written
    so that it reads back as 65504 in float32 (the shortest float16 repr, "6.55e+04", reads
    back as 65500 anywhere wider)."""
    y = _cast(np.array([65504.0, 0.5], np.float16), T.FLOAT16, T.STRING, 21)
    assert [float(np.float32(v)) for v in y] == [65504.0, 0.5]


def test_a_float8_cast_to_itself_with_saturation_maps_infinity_to_the_largest_value():
    """The saturate table: "Inf | FLT_MAX" for every float8 target, whatever the source, so
    float8e5m2 +-inf cast to float8e5m2 with saturate=1 is +-57344 (onnx.reference agrees;
    onnxruntime 1.32 returns the input unchanged). Without saturation it stays +-inf."""
    x = np.array([np.inf, -np.inf, 3.0], np.float32).astype(ml_dtypes.float8_e5m2)
    e5m2 = T.FLOAT8E5M2
    assert _cast(x, e5m2, e5m2, 19).astype(np.float32).tolist() == [57344.0, -57344.0, 3.0]
    assert _cast(x, e5m2, e5m2, 19, saturate=0).astype(np.float32).tolist() == [
        np.inf, -np.inf, 3.0]
