"""The Numba backend's MatMul schemes against the NumPy reference: blas and the blocked loop
nest, packed_simd (a constant B packed once) in both work orders and its choice by cost, and
Strassen's scheme with its cost (the helpers and the checks: tests/numba_checks.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from onnx import helper, numpy_helper  # noqa: E402

import refmnn  # noqa: E402
from refmnn.schedule.plan import RunStep  # noqa: E402
from tests.helpers import assert_same_specials, make_model  # noqa: E402
from tests.numba_checks import F, SIMD_MATMUL, check_node, rand  # noqa: E402


@pytest.mark.parametrize(("a", "b"), [((5, 7), (7, 3)), ((2, 3, 5, 4), (4, 6)), ((3, 1, 4, 5), (2, 5, 3)),
                                      ((7,), (7, 4)), ((2, 6, 7), (7,))])
def test_matmul_schemes(a, b):
    node = helper.make_node("MatMul", ["A", "B"], ["Y"], name="n0")
    model = make_model([node], [("A", F, a), ("B", F, b)], [("Y", F, None)])
    ranks_ok = len(a) >= 2 and len(b) >= 2
    check_node(model, {"A": rand(*a), "B": rand(*b)}, must_run=("blas", "blocked") if ranks_ok else ("blas",))


@pytest.mark.parametrize("order", ["rows", "strips"])
@pytest.mark.parametrize(("a", "b"), [((5, 7), (7, 3)), ((2, 3, 5, 4), (4, 6)), ((7,), (7, 4)),
                                      ((70, 40), (40, 72)), ((3, 50), (50, 49))])
def test_matmul_packed_simd(a, b, order, monkeypatch):
    """packed_simd (a constant B) against the reference, its work shared out by rows of A or by
    strips of B: full tiles, a last block of fewer than four rows, a last strip narrower than 24
    columns, one row (a vector A), batch axes folded into the rows."""
    from refmnn.backends.numba.kernels import matmul_packed

    if not SIMD_MATMUL:
        pytest.skip("packed_simd applies only on CPUs with AVX2 and FMA")
    monkeypatch.setattr(matmul_packed, "ROWS_PER_PART", 1 if order == "rows" else 10**6)
    node = helper.make_node("MatMul", ["A", "B"], ["Y"], name="n0")
    model = make_model([node], [("A", F, a)], [("Y", F, None)],
                       initializers=[numpy_helper.from_array(rand(*b), "B")])
    check_node(model, {"A": rand(*a)}, must_run=("blas", *SIMD_MATMUL))


def test_matmul_packed_simd_is_chosen_for_constant_weights(monkeypatch):
    """The costs give a MatMul with a constant B and at most MAX_ROWS rows to packed_simd
    (priced below the sgemm, which packs B on every call) -- except on an Intel CPU with
    AVX-512, whose BLAS runs FMAs twice as wide; a B fed at run time cannot be packed in
    prepare, so blas runs (matmul_packed's docstring has the measurements)."""
    from refmnn.backends.numba import _blas

    def chosen(a, b, constant=True):  # type: ignore[no-untyped-def]
        node = helper.make_node("MatMul", ["A", "B"], ["Y"], name="n0")
        inits = [numpy_helper.from_array(rand(*b), "B")] if constant else []
        decl = [("A", F, a)] + ([] if constant else [("B", F, b)])
        model = make_model([node], decl, [("Y", F, None)], initializers=inits)
        plan = refmnn.Session(model, backends=("numba",), check=False).resize()
        return next(s.scheme for s in plan.steps if isinstance(s, RunStep))

    if not SIMD_MATMUL:
        pytest.skip("packed_simd applies only on CPUs with AVX2 and FMA")
    monkeypatch.setattr(_blas, "wide_fma_cpu", lambda: False)
    for a, b in (((1, 128, 384), (384, 1536)), ((1, 197, 192), (192, 576)), ((6, 10), (10, 3))):
        assert chosen(a, b) == "packed_simd", (a, b)
    assert chosen((1, 128, 384), (384, 1536), constant=False) == "blas"
    assert chosen((1, 1024, 384), (384, 384)) == "blas"  # more rows than MAX_ROWS
    monkeypatch.setattr(_blas, "wide_fma_cpu", lambda: True)
    assert chosen((1, 128, 384), (384, 1536)) == "blas"


@pytest.mark.parametrize(("a", "b", "leaf", "depth"), [((32, 48), (48, 64), 8, 2),
                                                   ((64, 64), (64, 32), 8, 2),
                                                   ((1024, 1024), (1024, 1024), None, 1)])
def test_matmul_strassen(a, b, leaf, depth, monkeypatch):
    """Strassen's scheme against the reference: with a small leaf (so that small products
    recurse two levels), and once at its real threshold (1024 = two leaves of 512)."""
    from refmnn.backends.numba.kernels import strassen

    if leaf is not None:  # and additions for free, so that the deepest recursion is the cheapest
        monkeypatch.setattr(strassen, "LEAF", leaf)
        monkeypatch.setattr(strassen, "ADD", 0.0)
    assert strassen.levels(a[0], b[1], a[1]) == depth
    node = helper.make_node("MatMul", ["A", "B"], ["Y"], name="n0")
    model = make_model([node], [("A", F, a), ("B", F, b)], [("Y", F, None)])
    check_node(model, {"A": rand(*a), "B": rand(*b)}, must_run=("blas", "strassen"))


def test_matmul_strassen_with_infinite_and_nan_operands(monkeypatch):
    """Strassen's block sums spread an infinity of A or B to outputs whose own products never
    meet it (inf - inf: NaN), so a result that is not all finite is made again by the plain
    product: NaN and infinities exactly where the reference has them, the rest close."""
    from refmnn.backends.numba.kernels import strassen

    monkeypatch.setattr(strassen, "LEAF", 8)
    monkeypatch.setattr(strassen, "ADD", 0.0)
    a, b = rand(32, 48), rand(48, 64)
    a[3, 5], a[20, 40], b[7, 2] = np.inf, np.nan, -np.inf
    node = helper.make_node("MatMul", ["A", "B"], ["Y"], name="n0")
    model = make_model([node], [("A", F, (32, 48)), ("B", F, (48, 64))], [("Y", F, None)])
    want = a.astype(np.float64) @ b.astype(np.float64)

    def same_specials(scheme, outputs):  # type: ignore[no-untyped-def]
        assert_same_specials(outputs[0], want, scheme, rtol=1e-4, atol=1e-4)

    assert np.isnan(want).any() and np.isinf(want).any() and np.isfinite(want).any()
    check_node(model, {"A": a, "B": b}, tol=None, inspect=same_specials, must_run=("strassen",))


def test_fused_matmul_strassen(monkeypatch):
    """FusedMatMul's epilogue (bias, residual, relu) after a two-level Strassen product."""
    from refmnn.backends.numba.kernels import strassen

    monkeypatch.setattr(strassen, "LEAF", 8)
    monkeypatch.setattr(strassen, "ADD", 0.0)
    inits = [numpy_helper.from_array(rand(32, 64), "Bm"), numpy_helper.from_array(rand(64), "bias")]
    node = helper.make_node("FusedMatMul", ["A", "Bm", "bias", "Z"], ["Y"], name="n0",
                            domain="refmnn", activation="relu")
    model = make_model([node], [("A", F, (32, 32)), ("Z", F, (32, 64))], [("Y", F, None)],
                       initializers=inits, extra_opsets=[("refmnn", 1)])
    check_node(model, {"A": rand(32, 32), "Z": rand(32, 64)}, must_run=("strassen",))


def test_strassen_cost_prefers_blas_below_large_products():
    """The cost model picks Strassen only for large products (none in the zoo)."""
    from refmnn.backends.numba.kernels import linalg, strassen
    from refmnn.dtypes import DType
    from refmnn.graph import TensorType

    class Spec:  # the two fields the costs read
        def __init__(self, m, k, n):
            self.inputs = (TensorType(DType.float32, (m, k)), TensorType(DType.float32, (k, n)))
            self.outputs = (TensorType(DType.float32, (m, n)),)

    for m, k, n, wins in ((128, 384, 1536, False), (1024, 1024, 1024, False),
                          (4096, 4096, 4096, True)):
        spec = Spec(m, k, n)
        fits = strassen.levels_that_fit(m, n, k) > 0
        assert fits or not wins
        if fits:
            assert (strassen.cost(spec) < linalg._blas_cost(spec)) == wins, (m, k, n)
    assert strassen.levels(4096, 4096, 4096) == 1  # deeper levels cost more additions than they save
