"""Activations: Relu, Sigmoid (flat loops shared with the elementwise unary kernel) and Softmax.

Scheme ``flat`` (Relu, Sigmoid): see :mod:`.elementwise` -- one loop over the flattened tensor.

Softmax-13 views its input as ``(outer, A, inner)`` around ``axis`` (A = the softmax axis).

Scheme ``last_axis`` -- applies when ``inner == 1`` (softmax over the last axis, attention):
    rows of A contiguous elements, three ``prange`` passes over rows: :func:`row_maxes`, then
    :func:`exp_rows` (``out = exp(x - max)`` by :func:`exp_shifted`), then
    :func:`normalise_rows` (the row sum in float64, ``out *= 1 / sum``). Each pass walks a row
    through a slice from 0 (``row = x[base:base + a]``): indexing ``x[base + j]`` with a signed
    index made Numba add negative-index fix-ups that stopped vectorisation, and a helper
    function called once per row cost more than a 128-element row (1536 calls: ~90 us). The row
    max and sum are compiled with the few fast-math flags that let them vectorise.
    Why exp is our own: numba vectorises ``math.exp`` only through Intel's SVML, which the PyPI
    llvmlite does not carry (``numba -s``: "SVML Operational: False"), so its exp is a scalar
    libm call (630 us on (1, 12, 128, 128)); :func:`exp_shifted` is Cephes' ``expf`` in plain
    float32 arithmetic, which LLVM vectorises (84 us on 196608 elements at one thread, NumPy's
    SIMD exp 91 us; within 0.98 ulp of exp on [-87, 0]). Measured on (1, 12, 128, 128) at 2
    threads, medians of 300 calls: max / exp / normalise 35 / 65 / 15 us, 115 us in all, against
    ~350 us for the former numba-max, NumPy-exp, numba-scale passes (per-row helper calls).
    Cost: ``5 * n``.
Scheme ``strided`` -- any axis: the same three passes along a strided axis, the inner index
    outermost so that each pass is a contiguous sweep over ``inner``. Cost: ``4 * n + 10 * n``
    (strided access is slower), so ``last_axis`` wins whenever it applies.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import (F32, JIT, PARALLEL_LOCK, PJIT, SUM_MATH, flat,
                                                    numel, renamed)
from refmnn.backends.numba.kernels.elementwise import unary_def


# exp(t) for float32 t = x - max <= 0 (Cephes expf): t = n ln2 + r with n = round(t / ln2) and
# |r| <= ln2 / 2 (ln2 split in two so that n * ln2 is exact), exp(r) by a degree-7 polynomial,
# then the factor 2^n built from its bits: (n + 127) << 23 is the float32 2^n.
_LOG2E = np.float32(1.44269504088896341)
_LN2_HI, _LN2_LO = np.float32(0.693359375), np.float32(-2.12194440e-4)
_EXP_P = tuple(np.float32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                        4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1))
_EXP_MIN = np.float32(-87.33654)  # below: exp < 2^-126 (subnormal), written as 0
_ROUND = np.float32(12582912.0)  # 1.5 * 2^23: (v + _ROUND) - _ROUND rounds v to an integer


@njit(inline="always", **JIT)
def exp_shifted(x, shift, out, bits):
    """out[i] = exp(x[i] - shift) for x[i] <= shift (``bits``: int32 scratch of x's length).

    Two vectorised loops: the polynomial and the bits of 2^n, then their product. Results
    below 2^-126 (t < -87.34) are 0 instead of subnormal; exp(-inf) = 0; NaN stays NaN (the
    clamp ``t < min`` is false for NaN, so NaN flows through the polynomial). Compiled without
    fast-math: the rounding trick must not be simplified away."""
    p0, p1, p2, p3, p4, p5 = _EXP_P
    for i in range(out.shape[0]):
        t = x[i] - shift
        t = _EXP_MIN if t < _EXP_MIN else t
        n = (t * _LOG2E + _ROUND) - _ROUND
        r = (t - n * _LN2_HI) - n * _LN2_LO
        p = ((((p0 * r + p1) * r + p2) * r + p3) * r + p4) * r + p5
        out[i] = p * (r * r) + r + np.float32(1.0)
        bits[i] = (np.int32(n) + 127) << 23
    scale = bits.view(np.float32)
    for i in range(out.shape[0]):
        out[i] = np.float32(0.0) if x[i] - shift < _EXP_MIN else out[i] * scale[i]


@njit(**PJIT, fastmath={"nnan", "nsz", "reassoc"})
def row_maxes(x, rows, a, peaks):
    """peaks[r] = max of row r, vectorised: ``nnan`` lets LLVM turn the compare-and-select
    into SIMD max instructions, so a NaN in the row may be skipped here. That is harmless: the
    NaN itself still flows through ``x - max``, exp and the row sum (compiled without
    ``nnan``), so the whole row comes out NaN, as in the reference."""
    for r in prange(rows):
        row = x[r * a:(r + 1) * a]
        peak = row[0]
        for j in range(1, a):
            v = row[j]
            peak = v if v > peak else peak
        peaks[r] = peak


@njit(**PJIT)
def exp_rows(x, out, peaks, rows, a):
    """out = exp(x - max of its row)."""
    for r in prange(rows):
        bits = np.empty(a, dtype=np.int32)
        exp_shifted(x[r * a:(r + 1) * a], peaks[r], out[r * a:(r + 1) * a], bits)


@njit(**PJIT, fastmath=SUM_MATH)
def normalise_rows(e, rows, a):
    """e *= 1 / sum of its row (summed in float64)."""
    for r in prange(rows):
        row = e[r * a:(r + 1) * a]
        total = 0.0
        for j in range(a):
            total += row[j]
        scale = np.float32(1.0 / total)
        for j in range(a):
            row[j] *= scale


# serial builds of the row passes, for kernels that run them inside their own parallel loop
# (FusedAttention's blocks of rows, :mod:`.attention`)
row_maxes_serial = njit(**JIT, fastmath={"nnan", "nsz", "reassoc"})(
    renamed(row_maxes.py_func, "_serial"))
normalise_rows_serial = njit(**JIT, fastmath=SUM_MATH)(renamed(normalise_rows.py_func, "_serial"))


@njit(**JIT)
def softmax_strided(x, out, outer, a, inner):
    for o in range(outer):
        base = o * a * inner
        for i in range(inner):
            peak = x[base + i]
            for j in range(1, a):
                v = x[base + j * inner + i]
                if v > peak or v != v:
                    peak = v
            total = 0.0
            for j in range(a):
                e = math.exp(x[base + j * inner + i] - peak)
                out[base + j * inner + i] = e
                total += e
            scale = np.float32(1.0 / total)
            for j in range(a):
                out[base + j * inner + i] *= scale


class Softmax(Kernel):
    def __init__(self, last: bool) -> None:
        self.last = last

    def prepare(self, spec: NodeSpec) -> None:
        self.outer, self.a, self.inner = _split_axis(spec)

    def run(self, inputs, outputs, workspace):
        x, out = flat(inputs[0]), flat(outputs[0])
        if self.last:
            rows = self.outer * self.inner
            peaks = np.empty(rows, dtype=np.float32)
            with PARALLEL_LOCK:
                row_maxes(x, rows, self.a, peaks)
                exp_rows(x, out, peaks, rows, self.a)
                normalise_rows(out, rows, self.a)
        else:
            softmax_strided(x, out, self.outer, self.a, self.inner)


def _split_axis(spec: NodeSpec) -> tuple[int, int, int]:
    shape = [int(d) for d in spec.inputs[0].shape]
    if not shape:
        return 1, 1, 1
    axis = spec.attrs["axis"] % len(shape)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


def _softmax_cost(per: float):
    def cost(spec: NodeSpec) -> float:
        return 2000.0 + per * numel(spec.outputs[0])
    return cost


KERNELS = (
    unary_def("Relu", 6),
    unary_def("Sigmoid", 6),
    KernelDef("Softmax", (
        Scheme("last_axis", lambda b, s: Softmax(True),
               applies=lambda spec: spec.inputs[0].rank >= 1 and _split_axis(spec)[2] == 1,
               cost=_softmax_cost(5.0),
               doc="contiguous rows: row max, vectorised exp, row sum and scale"),
        Scheme("strided", lambda b, s: Softmax(False), cost=_softmax_cost(14.0),
               doc="(outer, axis, inner) with a strided axis"),
    ), since=13, dtypes=F32),
)
