"""Activation references at the edges of the float range (found by tools/fuzz_models.py)."""

from __future__ import annotations

import numpy as np
import pytest

from refmnn.ops import default_registry

X = np.array([-np.inf, -2.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32)


@pytest.mark.parametrize("alpha", [np.inf, np.nan, -3.0, 0.25])
def test_leaky_relu_alpha_touches_only_negative_x(alpha):
    """Y = X for X >= 0 whatever alpha is: max(X, 0) + alpha * min(X, 0) gave inf * 0 = NaN."""
    leaky = default_registry().find("", "LeakyRelu", 16)
    with np.errstate(invalid="ignore"):
        y = leaky(X, alpha=alpha)
        np.testing.assert_array_equal(y[2:], X[2:])  # -0.0, 0, 1, inf, NaN unchanged
        assert np.signbit(y[2])  # -0.0 is >= 0: kept as is
        np.testing.assert_array_equal(y[:2], X[:2] * np.float32(alpha))


def test_prelu_slope_touches_only_negative_x():
    """PRelu: Y = X for X >= 0 whatever the slope is -- an infinite or NaN slope included (onnx
    1.23.2's reference multiplies everywhere: inf * 0 = NaN); each element its own slope."""
    prelu = default_registry().find("", "PRelu", 16)
    slope = np.array([np.inf, np.nan, np.inf, np.nan, -np.inf, np.nan, 2.0], np.float32)
    with np.errstate(invalid="ignore"):
        y = prelu(X, slope)
    np.testing.assert_array_equal(y[2:], X[2:])
    assert np.signbit(y[2])
    np.testing.assert_array_equal(y[:2], [-np.inf, np.nan])  # -inf * inf, -2 * NaN
