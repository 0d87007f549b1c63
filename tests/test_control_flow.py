"""Control flow cases the official runner cannot judge, checked element by element."""

from __future__ import annotations

import warnings

import numpy as np

import refmnn.backend


def _node_case(name: str):
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in load_model_tests(kind="node"):
            if case.name == name:
                return case
    raise LookupError(name)


def test_loop16_seq_none_values():
    """onnx's runner crashes comparing this case's 0-d sequence elements (see the xfail);
    the values themselves must match."""
    case = _node_case("test_loop16_seq_none")
    (inputs, expected), = case.data_sets
    got = refmnn.backend.prepare(case.model).run(inputs)
    assert len(got) == len(expected)
    for got_value, want_value in zip(got, expected, strict=True):
        assert isinstance(got_value, list) and len(got_value) == len(want_value)
        for g, w in zip(got_value, want_value, strict=True):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)
