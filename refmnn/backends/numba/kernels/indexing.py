"""Gather: rows of the data tensor picked by an index tensor (embedding lookup).

Scheme ``rows`` (Gather-1/11/13, any axis): data is seen as ``(outer, A, inner)`` around
``axis``; for each outer block and each index ``k`` the contiguous run of ``inner`` elements at
``data[o, k, :]`` is copied to the output (as raw bits, so any fixed-size type works). Negative indices count from the end; an index
outside ``[-A, A)`` raises IndexError. Applies: any fixed-size data type, int64/int32 indices.
Cost: ``n_out`` elements copied.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import JIT, Bound, BoundRun, bits, flat, numel
from refmnn.backends.numba.kernels.raster import DTYPES as RASTER_DTYPES


@njit(**JIT)
def gather_rows(data, indices, out, outer, a, inner):
    n = indices.size
    for o in range(outer):
        for j in range(n):
            k = indices[j]
            if k < 0:
                k += a
            if k < 0 or k >= a:
                raise IndexError("Gather: index out of range")
            src = (o * a + k) * inner
            dst = (o * n + j) * inner
            sv = data[src:src + inner]
            dv = out[dst:dst + inner]
            for i in range(inner):
                dv[i] = sv[i]


class Gather(BoundRun, Kernel):
    def prepare(self, spec: NodeSpec) -> None:
        shape = [int(d) for d in spec.inputs[0].shape]
        axis = spec.attrs["axis"] % len(shape)
        self.outer = int(np.prod(shape[:axis], dtype=np.int64))
        self.a = shape[axis]
        self.inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        self.bound = Bound()

    def binding(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        data, indices = inputs
        return ((data, indices, outputs[0]),
                lambda: ((gather_rows, (bits(data), flat(np.asarray(indices)), bits(outputs[0]),
                                        self.outer, self.a, self.inner)),), None)


KERNELS = (
    KernelDef("Gather", (Scheme("rows", lambda b, s: Gather(),
                                applies=lambda spec: spec.inputs[0].rank >= 1
                                and spec.inputs[1].dtype.numpy.kind == "i",
                                cost=lambda spec: 2000.0 + numel(spec.outputs[0]),
                                doc="contiguous inner runs per index"),),
              since=1, dtypes=RASTER_DTYPES),
)
