"""refmnn.ops._reduction_util.sum_along: the row sums of LayerNormalization, RMS
normalisation, InstanceNormalization, GroupNormalization and Softmax (along any axis: np.sum off the last)."""

from __future__ import annotations

import numpy as np
import pytest

from refmnn.ops._reduction_util import sum_along


@pytest.mark.parametrize("shape", [(1536, 128), (3, 4, 384), (7, 8192), (2, 8193), (3, 100000)])
def test_row_sums_match_float64_sums(shape):
    """Both paths (einsum up to 8192 elements a row, np.sum beyond) give x's dtype and shape
    with the last axis kept, within 2e-6 (relative) of the float64 sums of positive rows and
    of their products with a second array (here at most 1.3e-6: einsum's products at 8192
    elements; 3e-7 and less elsewhere)."""
    rng = np.random.default_rng(0)
    x = np.exp(rng.standard_normal(shape) * 3).astype(np.float32)
    y = rng.uniform(0.5, 2.0, shape).astype(np.float32)
    for got, exact in ((sum_along(x), x.astype(np.float64).sum(-1, keepdims=True)),
                       (sum_along(x, y), (x.astype(np.float64) * y).sum(-1, keepdims=True))):
        assert got.dtype == np.float32 and got.shape == (*shape[:-1], 1)
        np.testing.assert_allclose(got, exact, rtol=2e-6)


def test_row_sums_of_float64_views_and_empty_rows():
    """A strided float64 view is summed in float64; an empty last axis sums to 0, and no rows
    give an empty result."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 10))[:, ::2]
    np.testing.assert_allclose(sum_along(x), x.sum(-1, keepdims=True), rtol=1e-13,
                               atol=1e-14)
    assert sum_along(x).dtype == np.float64
    np.testing.assert_array_equal(sum_along(np.ones((3, 0), np.float32)),
                                  np.zeros((3, 1), np.float32))
    assert sum_along(np.ones((0, 5), np.float32)).shape == (0, 1)
