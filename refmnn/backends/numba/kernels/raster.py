"""Raster: the strided-copy primitive every memory-movement op is lowered to.

A region copies ``sizes`` elements from ``source[src_offset + i . src_strides]`` to
``out[dst_offset + i . dst_strides]`` (see :mod:`refmnn.ops.raster`). After lowering, Transpose,
Reshape, Flatten, Squeeze, Slice, Expand and Concat all arrive here, so this kernel carries
every layout change of a transformer.

Scheme ``strided6`` (the only one; it applies to every Raster):
    ``prepare`` simplifies each region -- drops size-1 axes, merges neighbouring axes that both
    sides walk contiguously (a Reshape becomes one run of ``n`` elements, a Transpose of the last
    two axes keeps two), pads to six axes -- groups regions by source, and works out whether the
    regions cover the output exactly once (then no zero fill is needed and all regions of a
    source go in one call; otherwise regions run one by one in order so later ones win).
    ``run`` is a five-deep loop with a tight innermost loop, special-cased for unit strides
    (a memcpy-like loop LLVM vectorises). Cost: ``n_out`` (one read and one write per element),
    plus the zero fill when needed.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import JIT, bits, numel
from refmnn.dtypes import DType
from refmnn.ops.raster import DOMAIN, split_regions

RR = 6  # axes of a simplified region
WIDTH = 3 + 3 * RR  # src, src_offset, dst_offset, sizes, src strides, dst strides

DTYPES = frozenset(d for d in DType if d.numpy.itemsize in (1, 2, 4, 8)
                   and (d.numpy.kind in "biuf" or "float" in d.name))  # moved as raw bits


@njit(**JIT)
def raster_copy(src, out, regions):
    """Apply every row of ``regions`` (int64 [R, 21]) copying ``src`` into ``out`` (flat)."""
    for r in range(regions.shape[0]):
        reg = regions[r]
        so, do = reg[1], reg[2]
        n0, n1, n2, n3, n4, n5 = reg[3], reg[4], reg[5], reg[6], reg[7], reg[8]
        s0, s1, s2, s3, s4, s5 = reg[9], reg[10], reg[11], reg[12], reg[13], reg[14]
        d0, d1, d2, d3, d4, d5 = reg[15], reg[16], reg[17], reg[18], reg[19], reg[20]
        for i0 in range(n0):
            for i1 in range(n1):
                for i2 in range(n2):
                    for i3 in range(n3):
                        for i4 in range(n4):
                            ps = so + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3 + i4 * s4
                            pd = do + i0 * d0 + i1 * d1 + i2 * d2 + i3 * d3 + i4 * d4
                            if s5 == 1 and d5 == 1:  # slices: indices from 0 vectorise
                                sv = src[ps:ps + n5]
                                dv = out[pd:pd + n5]
                                for i in range(n5):
                                    dv[i] = sv[i]
                            else:
                                for i in range(n5):
                                    out[pd + i * d5] = src[ps + i * s5]


@njit(**JIT)
def fill_zero(out):
    for i in range(out.size):
        out[i] = 0


@njit(**JIT)
def count_writes(counts, regions):
    """Prepare-time: how many regions write each output element."""
    for r in range(regions.shape[0]):
        reg = regions[r]
        do = reg[2]
        for i0 in range(reg[3]):
            for i1 in range(reg[4]):
                for i2 in range(reg[5]):
                    for i3 in range(reg[6]):
                        for i4 in range(reg[7]):
                            pd = (do + i0 * reg[15] + i1 * reg[16] + i2 * reg[17]
                                  + i3 * reg[18] + i4 * reg[19])
                            for i in range(reg[8]):
                                counts[pd + i * reg[20]] += 1


def simplify_region(src: int, src_offset: int, dst_offset: int, sizes, src_strides, dst_strides
                    ) -> list[int] | None:
    """Drop size-1 axes, merge axes walked contiguously by both sides, pad to :data:`RR` axes.
    None when the region is empty or more than RR axes remain."""
    if 0 in sizes:
        return None
    n: list[int] = []
    ss: list[int] = []
    ds: list[int] = []
    for size, s, d in zip(sizes, src_strides, dst_strides, strict=True):
        if size == 1:
            continue
        if n and ss[-1] == s * size and ds[-1] == d * size:
            n[-1] *= size
            ss[-1], ds[-1] = s, d
            continue
        n.append(size)
        ss.append(s)
        ds.append(d)
    if len(n) > RR:
        raise ValueError(f"a region with {len(n)} axes after simplification (at most {RR})")
    pad = RR - len(n)
    return [src, src_offset, dst_offset, *([1] * pad + n), *([0] * pad + ss), *([0] * pad + ds)]


def _region_ok(spec: NodeSpec) -> bool:
    rank = spec.attrs["rank"]
    try:
        for region in split_regions(spec.attrs["regions"], rank):
            simplify_region(*region)
    except ValueError:
        return False
    return True


class RegionCopy(Kernel):
    """Copies prepared regions; shared by Raster and Split."""

    def plan(self, regions: list[list[int]], out_numel: int) -> None:
        table = np.array(regions, dtype=np.int64).reshape(-1, WIDTH)
        counts = np.zeros(out_numel, dtype=np.int32)
        count_writes(counts, table)
        exact = bool(np.all(counts == 1))
        self.zero = not bool(np.all(counts >= 1))
        if exact:  # disjoint: one call per source with all its regions
            self.calls = [(int(s), np.ascontiguousarray(table[table[:, 0] == s]))
                          for s in np.unique(table[:, 0])]
        else:  # overlapping or partial: keep the order
            self.calls = [(int(row[0]), table[i:i + 1].copy()) for i, row in enumerate(table)]


class Raster(RegionCopy):
    def prepare(self, spec: NodeSpec) -> None:
        rank = spec.attrs["rank"]
        simplified = (simplify_region(*reg) for reg in split_regions(spec.attrs["regions"], rank))
        regions = [r for r in simplified if r is not None]
        self.plan(regions, numel(spec.outputs[0]))

    def run(self, inputs, outputs, workspace):
        out = bits(outputs[0])
        if self.zero:
            fill_zero(out)
        for source, table in self.calls:
            raster_copy(bits(inputs[source]), out, table)


def _raster_cost(spec: NodeSpec) -> float:
    return 2000.0 + numel(spec.outputs[0])


KERNELS = (
    KernelDef("Raster", (Scheme("strided6", lambda b, s: Raster(), applies=_region_ok,
                                cost=_raster_cost,
                                doc="regions simplified to <= 6 axes, contiguous inner loop"),),
              domain=DOMAIN, since=1, dtypes=DTYPES),
)
