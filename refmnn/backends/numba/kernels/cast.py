"""Cast between numeric types (Cast-6 and later).

Scheme ``flat``: one loop ``out[i] = x[i]`` over the flattened tensors; Numba's conversion
rules match NumPy's ``astype`` for in-range values (float to integer truncates toward zero;
to bool is ``x != 0``). Applies: float32, float64, int32, int64, int8, uint8 and bool on both
sides (no float16/float8/string: their rounding and saturation rules are the reference's).
Cost: ``n`` elements.
"""

from __future__ import annotations

from numba import njit

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import JIT, flat, numel
from refmnn.dtypes import DType

DTYPES = frozenset({DType.float32, DType.float64, DType.int32, DType.int64, DType.int8,
                    DType.uint8, DType.bool})


@njit(**JIT)
def cast_flat(x, out):
    for i in range(x.size):
        out[i] = x[i]


@njit(**JIT)
def cast_to_bool(x, out):
    for i in range(x.size):
        out[i] = x[i] != 0


class Cast(Kernel):
    def prepare(self, spec: NodeSpec) -> None:
        self.to_bool = spec.outputs[0].dtype == DType.bool

    def run(self, inputs, outputs, workspace):
        (cast_to_bool if self.to_bool else cast_flat)(flat(inputs[0]), flat(outputs[0]))


KERNELS = (
    KernelDef("Cast", (Scheme("flat", lambda b, s: Cast(),
                              cost=lambda spec: 2000.0 + numel(spec.outputs[0]),
                              doc="one conversion loop"),),
              since=6, dtypes=DTYPES),
)
