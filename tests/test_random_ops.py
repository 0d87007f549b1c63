"""Random ops: what can be checked when values cannot be compared with fixed expected data."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

import refmnn
from tests.helpers import make_model


def _bernoulli(seed: float | None, dtype: int = TensorProto.FLOAT):
    attrs = {} if seed is None else {"seed": seed}
    node = helper.make_node("Bernoulli", ["P"], ["Y"], name="b", **attrs)
    return make_model([node], [("P", dtype, [20000])], [("Y", dtype, [20000])], opset=15)


def test_bernoulli_shape_dtype_mean_and_extremes():
    p = np.full(20000, 0.3, np.float32)
    p[:10], p[10:20] = 0.0, 1.0
    y = refmnn.Session(_bernoulli(1.0)).run({"P": p})["Y"]
    assert y.shape == p.shape and y.dtype == np.float32
    assert set(np.unique(y)) <= {0.0, 1.0}
    assert np.all(y[:10] == 0) and np.all(y[10:20] == 1)
    assert abs(y[20:].mean() - 0.3) < 0.02  # 20k draws: 5 sigma is about 0.016


def test_bernoulli_seed_makes_runs_repeatable():
    p = np.full(20000, 0.5, np.float64)
    model = _bernoulli(7.0, TensorProto.DOUBLE)
    first = refmnn.Session(model).run({"P": p})["Y"]
    again = refmnn.Session(model).run({"P": p})["Y"]
    other = refmnn.Session(_bernoulli(8.0, TensorProto.DOUBLE)).run({"P": p})["Y"]
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_bernoulli_without_seed_uses_the_session_seed():
    p = np.full(20000, 0.5, np.float32)
    a = refmnn.Session(_bernoulli(None), seed=1).run({"P": p})["Y"]
    b = refmnn.Session(_bernoulli(None), seed=1).run({"P": p})["Y"]
    c = refmnn.Session(_bernoulli(None), seed=2).run({"P": p})["Y"]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
