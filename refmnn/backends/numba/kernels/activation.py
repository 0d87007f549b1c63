"""Activations: Relu, Sigmoid (flat loops shared with the elementwise unary kernel) and Softmax.

Scheme ``flat`` (Relu, Sigmoid): see :mod:`.elementwise` -- one loop over the flattened tensor.

Softmax-13 views its input as ``(outer, A, inner)`` around ``axis`` (A = the softmax axis).

Scheme ``last_axis`` -- applies when ``inner == 1`` (softmax over the last axis, attention):
    rows of A contiguous elements. Pass 1 (numba, ``prange`` over rows): ``out = x - max(row)``.
    Pass 2: NumPy's ``exp`` in place on the whole tensor. Pass 3 (numba, ``prange``): the row
    sums in float64, scaled by ``1 / sum``. The row max and row sum are compiled with the few
    fast-math flags that let them vectorise (:func:`row_max`, ``_common.row_sum``); measured on
    (1, 12, 128, 128) at one thread: max 239 -> 90 us, sum 110 -> 16 us. Why exp leaves numba: numba vectorises ``math.exp``
    only through Intel's SVML, which the PyPI llvmlite does not carry (``numba -s``: "SVML
    Operational: False"), so its exp is a scalar libm call, while NumPy's float32 exp is an
    AVX2/AVX-512 loop: on (1, 12, 128, 128) the scalar one-pass kernel measured 630 us of exp
    against NumPy's 90 us. Cost: ``3 * n`` memory passes + ``2 * n`` for exp.
Scheme ``strided`` -- any axis: the same three passes along a strided axis, the inner index
    outermost so that each pass is a contiguous sweep over ``inner``. Cost: ``4 * n + 10 * n``
    (strided access is slower), so ``last_axis`` wins whenever it applies.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import (F32, JIT, PARALLEL_LOCK, PJIT, flat, numel,
                                                    row_sum)
from refmnn.backends.numba.kernels.elementwise import unary_def


@njit(**JIT, fastmath={"nnan", "nsz", "reassoc"})
def row_max(x, base, a):
    """max of x[base:base + a], vectorised: ``nnan`` lets LLVM turn the compare-and-select
    into SIMD max instructions, so a NaN in the row may be skipped here. That is harmless: the
    NaN itself still flows through ``x - max``, exp and the row sum (compiled without
    ``nnan``), so the whole row comes out NaN, as in the reference."""
    peak = x[base]
    for j in range(1, a):
        peak = max(peak, x[base + j])
    return peak


@njit(**PJIT)
def shift_rows(x, out, rows, a):
    """out = x - max of its row."""
    for r in prange(rows):
        base = r * a
        peak = row_max(x, base, a)
        for j in range(a):
            out[base + j] = x[base + j] - peak


@njit(**PJIT)
def normalise_rows(e, rows, a):
    """e *= 1 / sum of its row."""
    for r in prange(rows):
        base = r * a
        scale = np.float32(1.0 / row_sum(e, base, a))
        for j in range(a):
            e[base + j] *= scale


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
            with PARALLEL_LOCK:
                shift_rows(x, out, rows, self.a)
            np.exp(out, out=out)
            with PARALLEL_LOCK:
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
               cost=_softmax_cost(5.0), doc="contiguous rows: numba shift, NumPy exp, numba scale"),
        Scheme("strided", lambda b, s: Softmax(False), cost=_softmax_cost(14.0),
               doc="(outer, axis, inner) with a strided axis"),
    ), since=13, dtypes=F32),
)
