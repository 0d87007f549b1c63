"""QuantizeLinear and DequantizeLinear per tensor, float32 <-> int8/uint8 (``refmnn/ops/quant.py``).

What a QDQ model (onnxruntime's quantization tool) runs between its float ops: every activation
is quantized and dequantized again, so these two ops stream every activation twice. (Its
quantized weights are folded into float constants when planning:
:func:`refmnn.schedule.optimize.fold_dequantized_weights`.)

Scheme ``flat``, one loop over the flattened tensor, on one thread (a (128, 384) tensor: 6 us
to quantize, 10 to dequantize; in blocks over two threads, 36-56 us: waking the OpenMP team
costs more than the loop):

* QuantizeLinear: ``q = x / scale`` divided in float32 (the reference divides in the scale's
  type), NaN -> 0, rounded half to even, plus the zero point, clipped to the code range
  (+-inf to its ends): ``y = clip(rint(q) + zp, lo, hi)``, every step in float32 as the
  reference's.
* DequantizeLinear: ``y = float32((float64(x) - zp) * float64(scale))``: exact in float64
  (a 9-bit difference times a 24-bit scale) and rounded once, as the reference's.

Both are bit-equal to the reference (tests/test_numba_quant.py: random, special, tie and
out-of-range values). Applies: :func:`refmnn.backends.base.per_tensor_quantization` (float32
and int8/uint8, one scale and zero point, no blocks). Per-axis and blocked scales, other types
and float8 run on the reference. Cost: ``n`` elements.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from refmnn.backends.base import (QUANT_DTYPES, Kernel, KernelDef, NodeSpec, Scheme,
                                  per_tensor_quantization)
from refmnn.backends.numba.kernels._common import JIT, flat, numel


@njit(**JIT)
def quantize_flat(x, scale, zero, lo, hi, out):
    """out[i] = clip(rint(x[i] / scale, NaN as 0) + zero, lo, hi), in float32."""
    s = np.float32(scale)
    z = np.float32(zero)
    low = np.float32(lo)
    high = np.float32(hi)
    for i in range(x.size):
        q = x[i] / s
        if q != q:
            q = np.float32(0.0)
        v = np.rint(q) + z
        if v < low:
            v = low
        elif v > high:
            v = high
        out[i] = np.int32(v)


@njit(**JIT)
def dequantize_flat(x, scale, zero, out):
    """out[i] = (x[i] - zero) * scale, in float64, rounded once to float32."""
    s = np.float64(scale)
    z = np.float64(zero)
    for i in range(x.size):
        out[i] = (np.float64(x[i]) - z) * s


def _zero(inputs) -> float:  # type: ignore[no-untyped-def]
    return float(inputs[2].reshape(-1)[0]) if len(inputs) > 2 and inputs[2] is not None else 0.0


class Quantize(Kernel):
    def prepare(self, spec: NodeSpec) -> None:
        info = np.iinfo(spec.outputs[0].dtype.numpy)
        self.lo, self.hi = float(info.min), float(info.max)

    def run(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        quantize_flat(flat(inputs[0]), float(inputs[1].reshape(-1)[0]), _zero(inputs), self.lo,
                      self.hi, flat(outputs[0]))


class Dequantize(Kernel):
    def run(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        dequantize_flat(flat(inputs[0]), float(inputs[1].reshape(-1)[0]), _zero(inputs),
                        flat(outputs[0]))


def _cost(spec: NodeSpec) -> float:
    return 2000.0 + numel(spec.outputs[0])


KERNELS = (
    KernelDef("QuantizeLinear", (Scheme("flat", lambda b, s: Quantize(),
                                        applies=per_tensor_quantization, cost=_cost,
                                        doc="one rounding loop"),),
              since=10, dtypes=QUANT_DTYPES),
    KernelDef("DequantizeLinear", (Scheme("flat", lambda b, s: Dequantize(),
                                          applies=per_tensor_quantization, cost=_cost,
                                          doc="one loop in float64"),),
              since=10, dtypes=QUANT_DTYPES),
)
