"""LayerNormalization (opset 17): normalise over the trailing axes from ``axis``.

Scheme ``rows`` (the only one): the input is seen as ``(rows, D)`` with ``D`` the product of the
normalised axes; per row a float64 mean, a float64 variance (two passes, no cancellation; past
float32's range the spec's float32 overflow, see :func:`row_stats`), then
``y = (x - mean) * inv_std * scale + bias``. Two ``prange`` passes over rows: :func:`row_stats`
(the sums, compiled with the fast-math flags that let them vectorise) and
:func:`normalise_rows` (the output, plain IEEE arithmetic). Rows are walked through slices from
0: the former serial loop indexed ``x[base + j]`` (signed indices: Numba's negative-index
fix-ups stopped vectorisation) and called a sum helper per row; BERT's (1, 128, 384) rows took
~75 us, now ~15 us at 2 threads.
Applies: float32, only the ``Y`` output used (Mean and InvStdDev not requested), scale and bias
with exactly ``D`` elements (they then broadcast as the normalised shape).
Cost: ``3 * n``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import (F32, PJIT, SUM_MATH, Bound, BoundRun, Call,
                                                    flat, numel, single_output)


FLOAT32_MAX = float(np.finfo(np.float32).max)


@njit(**PJIT, fastmath=SUM_MATH)
def row_stats(x, rows, d, eps, mean, inv):
    """mean[r] and inv[r] = 1 / sqrt(variance + eps) of each row of d elements, in float64 --
    but where the row's sum, or its sum of squared deviations, is beyond float32's range, what
    the spec's float32 statistics (stash_type 1) give: a mean of +-inf (every output NaN), an
    inv of 0 (every output the bias). Found with tools/fuzz_graphs.py --special: a row holding
    8.5e37 gave numba the exact normalised values, the reference, onnxruntime and
    onnx.reference the bias."""
    for r in prange(rows):
        row = x[r * d:(r + 1) * d]
        total = 0.0
        for j in range(d):
            total += row[j]
        m = total / d
        sq = 0.0
        for j in range(d):
            t = row[j] - m
            sq += t * t
        if abs(total) > FLOAT32_MAX:
            mean[r] = math.copysign(math.inf, total)
            inv[r] = 0.0
        else:
            mean[r] = m
            inv[r] = 0.0 if sq > FLOAT32_MAX else 1.0 / math.sqrt(sq / d + eps)


@njit(**PJIT)
def normalise_rows(x, scale, bias, has_bias, out, rows, d, mean, inv):
    """out = (x - mean) * inv * scale (+ bias), row by row."""
    for r in prange(rows):
        row, dst = x[r * d:(r + 1) * d], out[r * d:(r + 1) * d]
        m, s = mean[r], inv[r]
        if has_bias:
            for j in range(d):
                dst[j] = (row[j] - m) * s * scale[j] + bias[j]
        else:
            for j in range(d):
                dst[j] = (row[j] - m) * s * scale[j]


class LayerNorm(BoundRun, Kernel):
    def prepare(self, spec: NodeSpec) -> None:
        shape = [int(s) for s in spec.inputs[0].shape]
        axis = spec.attrs["axis"] % len(shape)
        self.d = int(np.prod(shape[axis:], dtype=np.int64))
        self.rows = int(np.prod(shape[:axis], dtype=np.int64))
        self.eps = float(spec.attrs["epsilon"])
        self.mean = np.empty(self.rows, dtype=np.float64)  # the row statistics, per run
        self.inv = np.empty(self.rows, dtype=np.float64)
        self.bound = Bound()

    def binding(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        return (*inputs, outputs[0]), lambda: self.calls(inputs, outputs[0]), None

    def calls(self, inputs, out) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The statistics, then the output rows (see :class:`.Bound`)."""
        x, scale = flat(inputs[0]), flat(inputs[1])
        bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        b = flat(bias if bias is not None else scale)  # any array when there is no bias
        return ((row_stats, (x, self.rows, self.d, self.eps, self.mean, self.inv)),
                (normalise_rows, (x, scale, b, bias is not None, flat(out), self.rows, self.d,
                                  self.mean, self.inv)))


def _ok(spec: NodeSpec) -> bool:
    x = spec.inputs[0]
    if x is None or not x.rank or not single_output(spec):
        return False
    d = int(np.prod(x.shape[spec.attrs["axis"] % x.rank:], dtype=np.int64))
    return all(t is None or numel(t) == d for t in spec.inputs[1:]) and d > 0


KERNELS = (
    KernelDef("LayerNormalization", (Scheme("rows", lambda b, s: LayerNorm(), applies=_ok,
                                            cost=lambda spec: 2000.0 + 3 * numel(spec.inputs[0]),
                                            doc="row statistics in float64, then the output rows"),),
              since=17, dtypes=F32),
)
