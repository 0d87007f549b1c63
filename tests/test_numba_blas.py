"""The numba backend's GEMM path (refmnn/backends/numba/_blas.py and kernels/sgemm.py): how a
product is cut into panels for the sgemm library the process calls (OpenBLAS's small-matrix
tiles or one panel per thread, MKL's rows), the library chosen per process, the sgemm called
per panel inside one parallel loop with its epilogue, the plans kept per operand geometry and
the calls bound to a run's arrays."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("numba", reason="the numba backend needs numba: pip install 'refmnn[numba]'")

from tests.numba_checks import rand, rel_l2  # noqa: E402



def test_column_panels_rule():
    """Panels split the larger of m and n, except that an output-bound product (k <= m) with at
    least 64 rows per panel splits its rows (see :func:`_blas.column_panels`)."""
    from refmnn.backends.numba._blas import column_panels

    assert column_panels(32, 784, 144, 2)       # few rows per panel: columns
    assert column_panels(128, 1536, 384, 2)     # k > m: columns (BERT's FFN)
    assert not column_panels(192, 784, 32, 2)   # k <= m, 96 rows each: rows (MobileNetV2)
    assert not column_panels(197, 576, 192, 2)  # ViT-Tiny's qkv
    assert not column_panels(576, 196, 96, 2)   # n < m: rows
    assert column_panels(192, 784, 32, 4)       # 48 rows per panel at 4 threads: columns


def test_panel_plan_rule():
    """Products whose per-thread panels exceed OpenBLAS's small-matrix limit are cut into the
    fewest panels that fit it (at most MAX_TILES per thread), rows while they keep enough rows;
    the others keep one panel per thread (see :func:`_blas.panel_plan`)."""
    from refmnn.backends.numba._blas import MAX_TILES, SMALL_MNK, _largest_panel, panel_plan

    assert panel_plan(96, 12544, 16, 1, 2) == (20, True)    # MobileNetV2 expand: 4 rows each
    assert panel_plan(128, 784, 64, 1, 2) == (8, False)     # ResNet-18 1x1: 16 rows each
    assert panel_plan(144, 3136, 24, 1, 2) == (12, True)    # 12 rows of 261 columns: columns
    assert panel_plan(96, 196, 384, 1, 2) == (8, False)     # 12 rows of 25 columns: rows
    assert panel_plan(256, 16, 256, 36, 2) == (2, False)    # Winograd batch: 2 per product
    assert panel_plan(64, 196, 64, 36, 2) == (1, False)     # small already: 1 per product
    assert panel_plan(37, 53, 29, 1, 2) == (2, True)        # small already: 1 per thread
    assert panel_plan(11, 40, 13, 3, 2) == (2, True)        # 3 items on 2 threads: halves
    assert panel_plan(128, 1536, 384, 1, 2) == (2, True)    # would need > MAX_TILES: as before
    assert panel_plan(197, 768, 192, 1, 2) == (2, False)
    for m, n, k, batch in ((96, 12544, 16, 1), (128, 784, 64, 1), (60, 700, 50, 2),
                           (1280, 49, 320, 1)):
        parts, by_cols = panel_plan(m, n, k, batch, 2)
        assert parts % (2 // math.gcd(batch, 2)) == 0 and parts <= 2 * MAX_TILES
        assert _largest_panel(m, n, k, parts, by_cols) <= SMALL_MNK


def test_sgemm_panel_plan_follows_the_library():
    """The region panels are cut for the library the process calls: OpenBLAS's small-matrix
    tiles only on the cores that have that kernel (SMALL_MATRIX_CORES), else one panel per
    thread; MKL's rows (see :meth:`_blas.Sgemm.panel_plan`)."""
    from refmnn.backends.numba import _blas

    shape = (96, 12544, 16, 1, 2)  # MobileNetV2's expand
    assert _blas.Sgemm("openblas", 0, small_matrix=True).panel_plan(*shape) == (20, True)
    assert _blas.Sgemm("openblas", 0).panel_plan(*shape) == _blas.thread_panels(*shape) \
        == (2, True)
    assert _blas.Sgemm("mkl", 0).panel_plan(*shape) == _blas.mkl_panel_plan(*shape) == (6, False)
    assert _blas.thread_panels(256, 16, 256, 36, 2) == (1, False)  # Winograd batch: whole items
    assert _blas.thread_panels(11, 40, 13, 3, 2) == (2, True)      # 3 items on 2 threads: halves
    assert _blas.thread_panels(197, 576, 192, 1, 2) == (2, False)  # ViT-Tiny's qkv: rows
    kernel, lib = _blas.sgemm(), _blas.openblas()
    if kernel is not None and kernel.name == "openblas":
        assert lib.core, "OpenBLAS exports get_corename: the core should be known"
        assert kernel.small_matrix == (lib.core.lower() in _blas.SMALL_MATRIX_CORES)


def test_mkl_panel_plan_rule():
    """MKL's panels are rows while each keeps 16 rows, more of them where a thread's share of
    the output passes MKL_PANEL_BYTES, otherwise columns (see :func:`_blas.mkl_panel_plan`)."""
    from refmnn.backends.numba._blas import MKL_PANEL_BYTES, mkl_panel_plan

    assert mkl_panel_plan(128, 1536, 384, 1, 2) == (2, False)   # BERT's FFN: one per thread
    assert mkl_panel_plan(96, 12544, 16, 1, 2) == (6, False)    # 4.8 MB of output: 3 each
    assert mkl_panel_plan(24, 3136, 144, 1, 2) == (2, True)     # 12 rows each: columns
    assert mkl_panel_plan(256, 16, 256, 36, 2) == (1, False)    # Winograd batch: whole items
    assert mkl_panel_plan(20, 30, 40, 3, 2) == (2, True)        # odd batch, few rows: halves
    for m, n in ((96, 12544), (4096, 4096), (40, 100000), (1000, 169)):
        parts, by_cols = mkl_panel_plan(m, n, 64, 1, 2)
        assert parts % 2 == 0 and (by_cols or m // parts >= 16)
    assert mkl_panel_plan(4096, 4096, 64, 1, 2) == (32, False)  # at most MAX_TILES each
    assert 4 * 1000 * 169 / 2 <= MKL_PANEL_BYTES  # SqueezeNet's classifier: one each
    assert mkl_panel_plan(1000, 169, 512, 1, 2) == (2, False)


_SGEMM_CHILD = """
import json, sys
import numpy as np
from refmnn.backends.numba import _blas
kernel = _blas.sgemm()
gemm = _blas.Gemm(2, True, True)
rng = np.random.default_rng(0)
a, b = rng.standard_normal((96, 64), np.float32), rng.standard_normal((64, 3000), np.float32)
out = np.full((96, 3000), np.nan, np.float32)
gemm.begin()
try:
    gemm(a, b, out)
finally:
    gemm.end()
want = a.astype(np.float64) @ b.astype(np.float64)
err = float(np.linalg.norm(out - want) / np.linalg.norm(want))
print(json.dumps({"name": kernel.name, "region": gemm.region is not None, "err": err}))
"""


def _sgemm_child(choice: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "REFMNN_SGEMM": choice}
    return subprocess.run([sys.executable, "-c", _SGEMM_CHILD], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("choice", ["openblas", "mkl"])
def test_sgemm_library_is_chosen_per_process(choice):
    """``REFMNN_SGEMM`` picks the library the region panels call (one per process: LLVM links
    one address), and either gives NumPy's product."""
    from refmnn.backends.numba import _blas

    if choice == "mkl" and _blas._mkl_sgemm() is None:
        pytest.skip("no libmkl_rt with cblas_sgemm_64 here (pip install mkl)")
    done = _sgemm_child(choice)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["name"] == choice and result["region"]
    assert result["err"] <= 1e-5


def test_sgemm_choice_rejects_unknown_names():
    done = _sgemm_child("atlas")
    assert done.returncode != 0
    assert "REFMNN_SGEMM='atlas': expected auto, mkl or openblas" in done.stderr


@pytest.mark.parametrize(("ta", "tb", "batch", "shape"), [
    (False, False, 2, (60, 50, 700)), (True, False, 0, (60, 50, 700)),  # small-kernel tiles:
    (False, True, 0, (300, 40, 200)),  # 3 row panels per item of a pair, 4 columns, 4 rows
    (False, False, 0, (37, 29, 53)), (True, False, 0, (64, 17, 9)), (False, True, 0, (5, 31, 70)),
    (True, True, 0, (33, 8, 41)), (False, False, 3, (11, 13, 40)), (False, False, 1, (50, 7, 3)),
    (False, False, 0, (130, 20, 150)), (True, True, 0, (131, 9, 140)),  # row panels, n >= m
])
@pytest.mark.parametrize("epilogue", [None, "rows", "cols"])
@pytest.mark.parametrize("small_matrix", [True, False], ids=["tiles", "per-thread"])
def test_gemm_in_region(ta, tb, batch, shape, epilogue, small_matrix, monkeypatch):
    """Gemm's ``region`` path (sgemm per panel inside one prange, epilogue per panel, the bias
    per row as a conv's or per column as a MatMul's) against NumPy: transposed operands,
    batches (shared and broadcast weights), odd panel sizes -- under both OpenBLAS panel plans
    (small-matrix tiles and one panel per thread), whichever this CPU's core takes."""
    import dataclasses

    from refmnn.backends.numba import _blas
    from refmnn.backends.numba.kernels import fused

    monkeypatch.setattr(_blas, "REGION_SPLIT_MIN_FLOPS", 0)
    gemm = _blas.Gemm(2, True, True)
    if gemm.region is None:
        pytest.skip("no ILP64 cblas_sgemm in NumPy's OpenBLAS")
    if gemm.kernel.name == "openblas":
        gemm.kernel = dataclasses.replace(gemm.kernel, small_matrix=small_matrix)
    elif not small_matrix:
        pytest.skip("MKL has one panel plan (test_mkl_panel_plan_rule)")
    m, k, n = shape
    lead = (batch,) if batch else ()
    a = rand(*lead, k, m).swapaxes(-1, -2) if ta else rand(*lead, m, k)
    if batch == 3:  # weights shared by the batch
        b = rand(k, n)
    else:
        b = rand(*lead, n, k).swapaxes(-1, -2) if tb else rand(*lead, k, n)
    out = np.full((*lead, m, n), np.nan, np.float32)
    want = np.matmul(a, b)
    ep = None
    if epilogue:
        cols = epilogue == "cols"
        bias, z = rand(n if cols else m), rand(*lead, m, n)
        ep = (bias, z, True, True, cols, fused.CLIP, np.float32(0), np.float32(-0.5),
              np.float32(0.7))
        want = np.clip((want + (bias if cols else bias[:, None])) + z, -0.5, 0.7)
    gemm.begin()
    try:
        gemm(a, b, out, epilogue=ep)
    finally:
        gemm.end()
    assert rel_l2(out, want) <= 1e-5


def test_region_plan_splits_by_flops_or_bytes():
    """Products split from REGION_SPLIT_MIN_FLOPS, or from REGION_SPLIT_MIN_BYTES of operands
    (a matrix-vector product with 2 MB of weights: bound by memory); small ones do not."""
    from refmnn.backends.numba import _blas

    def plan(m, k, n):
        return _blas.region_plan(np.empty((m, k), np.float32), np.empty((n, k), np.float32).T,
                                 np.empty((m, n), np.float32), 2)

    assert plan(1, 512, 1000) is not None  # 1 MFLOP, 2 MB: ResNet-18's classifier
    assert plan(64, 64, 256) is not None  # 2.1 MFLOP
    assert plan(8, 64, 64) is None  # 66 kFLOP, 18 kB: one sgemm on the calling thread


def test_gemm_region_plans_kept_per_geometry(monkeypatch):
    """The region path keeps one plan per operand geometry: the same shapes with other strides
    (a transposed operand), other data at the same geometry, and a product that does not fit
    (float64: remembered, and run by NumPy) all give NumPy's result; past ``_MAX_PLANS``
    geometries the plans start over."""
    from refmnn.backends.numba import _blas

    monkeypatch.setattr(_blas, "REGION_SPLIT_MIN_FLOPS", 0)
    monkeypatch.setattr(_blas, "_MAX_PLANS", 3)
    gemm = _blas.Gemm(2, True, True)
    if gemm.region is None:
        pytest.skip("no ILP64 cblas_sgemm in NumPy's OpenBLAS")
    plain, trans = rand(20, 12), rand(12, 20).T
    calls = [(plain, rand(12, 33)), (trans, rand(12, 33)), (rand(20, 12), rand(12, 33)),
             (plain.astype(np.float64), rand(12, 33).astype(np.float64))]
    gemm.begin()
    try:
        for a, b in calls:
            out = np.full((20, 33), np.nan, a.dtype)
            gemm(a, b, out)
            assert rel_l2(out, a @ b) <= 1e-5
        assert len(gemm._plans) == 3 and () in gemm._plans.values()  # the float64 one: none
        gemm(rand(20, 12), rand(12, 34), np.empty((20, 34), np.float32))  # a fourth geometry
        assert len(gemm._plans) == 1
    finally:
        gemm.end()


def test_gemm_binding_follows_the_arrays(monkeypatch):
    """A bound region call reads its arrays' current contents, is made again for other arrays,
    does nothing outside a run, and views that reshape could copy are never bound."""
    from refmnn.backends.numba import _blas

    monkeypatch.setattr(_blas, "REGION_SPLIT_MIN_FLOPS", 0)
    gemm = _blas.Gemm(2, True, True)
    if gemm.region is None:
        pytest.skip("no ILP64 cblas_sgemm in NumPy's OpenBLAS")
    binding = _blas.Binding()
    a, b, out = rand(20, 12), rand(12, 33), np.zeros((20, 33), np.float32)
    gemm.begin()
    try:
        assert binding.run((a, b, out), lambda: gemm.bind(a, b, out))
        assert rel_l2(out, a @ b) <= 1e-5
        a[:] = rand(20, 12)  # same arrays, new contents: the bound call reads them
        assert binding.run((a, b, out), lambda: pytest.fail("bound again for the same arrays"))
        assert rel_l2(out, a @ b) <= 1e-5
        a2 = rand(20, 12)
        assert binding.run((a2, b, out), lambda: gemm.bind(a2, b, out))
        assert rel_l2(out, a2 @ b) <= 1e-5
    finally:
        gemm.end()
    out[:] = 0
    assert not binding.run((a2, b, out), lambda: gemm.bind(a2, b, out))  # outside a run
    assert not out.any()
    assert _blas.Binding.bindable((a, None, out))
    assert not _blas.Binding.bindable((a.T, b)) and not _blas.Binding.bindable(([1.0],))
