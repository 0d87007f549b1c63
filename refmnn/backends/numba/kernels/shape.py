"""Split: each output is one strided region of the input (the Raster copy kernel).

Scheme ``regions`` (every Split whose output shapes are static): output ``k`` is the region
``(outer, size_k * inner)`` at offset ``start_k * inner`` of the input seen as
``(outer, axis, inner)``; one :func:`~.raster.raster_copy` call per output.
Cost: ``n_in`` (every input element is read once and written once).
"""

from __future__ import annotations

import numpy as np

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import bits, numel
from refmnn.backends.numba.kernels.raster import (
    DTYPES,
    WIDTH,
    RegionCopy,
    raster_copy,
    simplify_region,
)


class Split(RegionCopy):
    def prepare(self, spec: NodeSpec) -> None:
        shape = [int(d) for d in spec.inputs[0].shape]
        axis = (spec.attrs.get("axis") or 0) % len(shape)
        outer = int(np.prod(shape[:axis], dtype=np.int64))
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        self.tables = []
        start = 0
        for t in spec.outputs:
            size = int(t.shape[axis]) if t is not None else 0
            region = simplify_region(0, start * inner, 0, (outer, size * inner),
                                     (shape[axis] * inner, 1), (size * inner, 1))
            self.tables.append(None if region is None or t is None
                               else np.array(region, dtype=np.int64).reshape(1, WIDTH))
            start += size

    def run(self, inputs, outputs, workspace):
        x = bits(inputs[0])
        for out, table in zip(outputs, self.tables, strict=True):
            if out is not None and table is not None:
                raster_copy(x, bits(out), table)


def _split_ok(spec: NodeSpec) -> bool:
    t = spec.inputs[0]
    return t is not None and t.rank is not None and t.rank >= 1 and all(
        o is None or o.shape is not None for o in spec.outputs)


KERNELS = (
    KernelDef("Split", (Scheme("regions", lambda b, s: Split(), applies=_split_ok,
                               cost=lambda spec: 2000.0 + numel(spec.inputs[0]),
                               doc="one strided region copy per output"),),
              since=1, dtypes=DTYPES),
)
