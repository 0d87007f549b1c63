"""Activations: Relu, Sigmoid (flat loops shared with the elementwise unary kernel) and Softmax.

Scheme ``flat`` (Relu, Sigmoid): see :mod:`.elementwise` -- one loop over the flattened tensor.

Softmax-13 views its input as ``(outer, A, inner)`` around ``axis`` (A = the softmax axis).

Scheme ``last_axis`` -- applies when ``inner == 1`` (softmax over the last axis, attention):
    rows of A contiguous elements, ``prange`` over rows; per row: max, ``exp(x - max)`` summed in
    float64, scale by ``1 / sum``. Cost: ``3 * n`` memory passes + ``10 * n`` for exp.
Scheme ``strided`` -- any axis: the same three passes along a strided axis, the inner index
    outermost so that each pass is a contiguous sweep over ``inner``. Cost: ``4 * n + 10 * n``
    (strided access is slower), so ``last_axis`` wins whenever it applies.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import F32, JIT, PARALLEL_LOCK, PJIT, flat, numel
from refmnn.backends.numba.kernels.elementwise import unary_def


@njit(**PJIT)
def softmax_rows(x, out, rows, a):
    for r in prange(rows):
        base = r * a
        peak = x[base]
        for j in range(1, a):
            v = x[base + j]
            if v > peak or v != v:
                peak = v
        total = 0.0
        for j in range(a):
            e = math.exp(x[base + j] - peak)
            out[base + j] = e
            total += e
        scale = np.float32(1.0 / total)
        for j in range(a):
            out[base + j] *= scale


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
            with PARALLEL_LOCK:
                softmax_rows(x, out, self.outer * self.inner, self.a)
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
               cost=_softmax_cost(13.0), doc="contiguous rows, prange over rows"),
        Scheme("strided", lambda b, s: Softmax(False), cost=_softmax_cost(14.0),
               doc="(outer, axis, inner) with a strided axis"),
    ), since=13, dtypes=F32),
)
