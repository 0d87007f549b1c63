"""Accuracy of the reference Erf against math.erf (the vectorised fits in refmnn.ops.elementwise).

float64 (fdlibm, :func:`_erf`): within 1 ulp. float32 (:func:`_erf_float32`, float64 arithmetic
on float32 fits): within 0.52 ulp of the exact value, i.e. correctly rounded or 1 ulp off the
correctly rounded float32, and correctly rounded almost everywhere.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from refmnn.ops.activation import gelu
from refmnn.ops.elementwise import _erf, _erf_float32, erf

_MATH_ERF = np.frompyfunc(math.erf, 1, 1)


def _exact(x: np.ndarray) -> np.ndarray:
    """math.erf per element, float64 (within 1 ulp itself; correctly rounded in practice)."""
    return _MATH_ERF(x.astype(np.float64)).astype(np.float64)


def _ulps(y: np.ndarray, exact: np.ndarray, dtype: type) -> np.ndarray:
    """|y - exact| in ulps of ``dtype`` at exact's magnitude (subnormal spacing near 0)."""
    return np.abs(y.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(dtype))


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan]


def test_float64_within_one_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.uniform(-10, 10, 200_000),
        np.linspace(-7, 7, 100_001),  # crosses every interval boundary region
        np.ldexp(rng.uniform(-1, 1, 20_000), rng.integers(-1074, -10, 20_000)),  # tiny, subnormal
        [5e-324, -5e-324, 2.2250738585072014e-308, 1e-300, 0.84375, np.nextafter(0.84375, 0),
         1.25, np.nextafter(1.25, 0), 1 / 0.35, 6.0, np.nextafter(6.0, 0), 1e300, -1.7e308],
    ])
    y = _erf(x)
    assert y.dtype == np.float64 and y.shape == x.shape
    assert _ulps(y, _exact(x), np.float64).max() <= 1.0
    assert np.array_equal(np.signbit(y), np.signbit(x))


def test_float32_correctly_rounded_or_one_ulp():
    rng = np.random.default_rng(1)
    x = np.concatenate([
        rng.uniform(-5, 5, 200_000),
        rng.standard_normal(100_000),
        np.linspace(-4.5, 4.5, 100_001),
        np.ldexp(rng.uniform(-1, 1, 20_000), rng.integers(-149, -5, 20_000)),
        np.arange(1, 4096, dtype=np.int32).view(np.float32),  # the smallest subnormals
        [1.17549435e-38, 2.0, 1.9999999, 2.0000002, 3.9192057, 3.919206, 4.0, 1e30, -3.4e38],
    ]).astype(np.float32)
    y = _erf_float32(x)
    assert y.dtype == np.float32 and y.shape == x.shape
    exact = _exact(x)
    assert _ulps(y, exact, np.float32).max() < 0.53
    assert np.mean(y == exact.astype(np.float32)) > 0.98
    assert np.array_equal(np.signbit(y), np.signbit(x))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_op_special_values_and_dtype(dtype):
    x = np.array(SPECIALS, dtype=dtype)
    y = erf(x)
    assert y.dtype == x.dtype and y.shape == x.shape
    y = y.astype(np.float64)
    assert y[0] == 0 and not np.signbit(y[0]) and y[1] == 0 and np.signbit(y[1])
    assert y[2] == 1 and y[3] == -1 and np.isnan(y[4])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_floats_round_once_from_float64(dtype):
    x = np.linspace(-5, 5, 4001).astype(dtype)
    expected = _exact(x).astype(dtype)
    assert np.array_equal(erf(x).astype(np.float32), expected.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_integers_truncate(dtype):
    values = [0, 1, 2, 5, 6, 100] + ([-1, -6, -100] if np.dtype(dtype).kind == "i" else [])
    x = np.array(values, dtype=dtype)
    y = erf(x)
    assert y.dtype == x.dtype
    assert y.tolist() == [int(math.trunc(math.erf(v))) for v in values]  # 0 unless |x| >= 6


def test_shapes_blocks_and_gelu():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 40_000)).astype(np.float32)  # spans several 32768-element blocks
    assert np.array_equal(erf(x), _erf_float32(x.reshape(-1)).reshape(3, 40_000))
    assert erf(np.zeros((0, 4), np.float32)).shape == (0, 4)
    assert erf(np.array(0.5)).shape == () and erf(np.array(0.5, np.float32)).dtype == np.float32
    x64 = x[0, :5000].astype(np.float64)
    expected = 0.5 * x64 * (1 + _exact(x64 / math.sqrt(2)))
    # 1 + erf cancels for negative x: absolute, not relative, accuracy there (see Gelu)
    np.testing.assert_allclose(gelu(x64, approximate="none"), expected, rtol=1e-14, atol=1e-15)


_MATH_ERFC = np.frompyfunc(math.erfc, 1, 1)


def test_float32_gelu_is_correctly_rounded_or_one_ulp_on_both_sides():
    """Gelu of float32, x (1 + erf(x / sqrt(2))) / 2, against x erfc(-x / sqrt(2)) / 2 in
    float64: within 0.502 ulp everywhere, the negative side included, where 1 + erf cancels
    (Gelu(-10) = -7.62e-23, a normal float32, which onnxruntime, onnx.reference and torch give
    as -0, and so did this reference's float64 evaluation of 1 + erf)."""
    rng = np.random.default_rng(3)
    x = np.concatenate([
        rng.uniform(-16, 16, 200_000),
        rng.standard_normal(100_000) * 2,
        np.linspace(-15.6, 15.6, 100_001),
        np.ldexp(rng.uniform(-1, 1, 20_000), rng.integers(-149, -5, 20_000)),
        np.arange(1, 4096, dtype=np.int32).view(np.float32),
        [15.5, -15.5, 15.6, -15.6, -14.0, -13.5, -10.0, 1e30, -1e30, 3.4e38, -3.4e38],
    ]).astype(np.float32)
    y = gelu(x, approximate="none")
    assert y.dtype == np.float32 and y.shape == x.shape
    x64 = x.astype(np.float64)
    exact = x64 * _MATH_ERFC(-x64 / math.sqrt(2)).astype(np.float64) / 2
    assert _ulps(y, exact, np.float32).max() < 0.502
    assert np.mean(y == exact.astype(np.float32)) > 0.99
    assert gelu(np.array([-10.0], np.float32), approximate="none")[0] == np.float32(-7.619853e-23)
    specials = gelu(np.array(SPECIALS, np.float32), approximate="none").astype(np.float64)
    assert specials[0] == 0 and not np.signbit(specials[0])
    assert specials[1] == 0 and np.signbit(specials[1])
    assert specials[2] == np.inf and np.isnan(specials[3]) and np.isnan(specials[4])  # -inf * 0
    blocks = rng.standard_normal((3, 40_000)).astype(np.float32)  # several blocks, a short last
    np.testing.assert_array_equal(gelu(blocks, approximate="none")[1],
                                  gelu(blocks[1].copy(), approximate="none"))
