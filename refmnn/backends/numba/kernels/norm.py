"""LayerNormalization (opset 17): normalise over the trailing axes from ``axis``.

Scheme ``rows`` (the only one): the input is seen as ``(rows, D)`` with ``D`` the product of the
normalised axes; per row a float64 mean, a float64 variance (two passes, no cancellation; both
vectorised sums, ``_common.row_sum``), then ``y = (x - mean) * inv_std * scale + bias``.
Applies: float32, only the ``Y`` output used (Mean and InvStdDev not requested), scale and bias
with exactly ``D`` elements (they then broadcast as the normalised shape). Serial loop (rows are
short).
Cost: ``3 * n``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import (F32, JIT, flat, numel, row_sum,
                                                    row_sum_sq_dev, single_output)


@njit(**JIT)
def layer_norm_rows(x, scale, bias, has_bias, out, rows, d, eps):
    for r in prange(rows):
        base = r * d
        mean = row_sum(x, base, d) / d
        inv = 1.0 / math.sqrt(row_sum_sq_dev(x, base, d, mean) / d + eps)
        if has_bias:
            for j in range(d):
                out[base + j] = (x[base + j] - mean) * inv * scale[j] + bias[j]
        else:
            for j in range(d):
                out[base + j] = (x[base + j] - mean) * inv * scale[j]


class LayerNorm(Kernel):
    def prepare(self, spec: NodeSpec) -> None:
        shape = [int(s) for s in spec.inputs[0].shape]
        axis = spec.attrs["axis"] % len(shape)
        self.d = int(np.prod(shape[axis:], dtype=np.int64))
        self.rows = int(np.prod(shape[:axis], dtype=np.int64))
        self.eps = float(spec.attrs["epsilon"])

    def run(self, inputs, outputs, workspace):
        x, scale = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        b = flat(bias if bias is not None else scale)  # any array when there is no bias
        layer_norm_rows(flat(x), flat(scale), b, bias is not None, flat(outputs[0]),
                        self.rows, self.d, self.eps)


def _ok(spec: NodeSpec) -> bool:
    x = spec.inputs[0]
    if x is None or not x.rank or not single_output(spec):
        return False
    d = int(np.prod(x.shape[spec.attrs["axis"] % x.rank:], dtype=np.int64))
    return all(t is None or numel(t) == d for t in spec.inputs[1:]) and d > 0


KERNELS = (
    KernelDef("LayerNormalization", (Scheme("rows", lambda b, s: LayerNorm(), applies=_ok,
                                            cost=lambda spec: 2000.0 + 3 * numel(spec.inputs[0]),
                                            doc="one pass per row, float64 statistics"),),
              since=17, dtypes=F32),
)
