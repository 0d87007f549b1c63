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
    (a memcpy-like loop LLVM vectorises); outputs of ``RASTER_PARALLEL_MIN`` elements or more
    whose regions write disjoint elements share the outer loops out over the threads. Cost:
    ``n_out`` (one read and one write per element), plus the zero fill when needed.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels._common import (JIT, PJIT, Bound, BoundRun, Call, bits,
                                                   numel)
from refmnn.dtypes import DType
from refmnn.ops.raster import DOMAIN, split_regions

RR = 6  # axes of a simplified region
WIDTH = 3 + 3 * RR  # src, src_offset, dst_offset, sizes, src strides, dst strides

# Outputs from this many elements run the parallel copy. In-model the copies read what a GEMM
# has just written on both cores, so they cost several times their time in cache (ViT-Tiny's
# head split, 113k floats: 12 us alone, 60-150 us in-model). Raster time per run, 2 threads,
# 60 interleaved runs, serial -> parallel: ViT-Tiny 1.22 -> 1.09 and (under load) 3.80 ->
# 2.69 ms; BERT-6 (only its K transposes, 49k) 0.53 -> 0.49 and 0.52 -> 0.56 ms: no change.
RASTER_PARALLEL_MIN = 1 << 15

DTYPES = frozenset(d for d in DType if d.numpy.itemsize in (1, 2, 4, 8)
                   and (d.numpy.kind in "biuf" or "float" in d.name))  # moved as raw bits


@njit(inline="always", **JIT)
def _copy_run(src, out, ps, pd, n, s, d):
    """out[pd + i * d] = src[ps + i * s] for i < n: the innermost run of a region."""
    if s == 1 and d == 1:  # slices: indices from 0 vectorise
        sv = src[ps:ps + n]
        dv = out[pd:pd + n]
        for i in range(n):
            dv[i] = sv[i]
    else:
        for i in range(n):
            out[pd + i * d] = src[ps + i * s]


@njit(inline="always", **JIT)
def _copy_rows(src, out, reg, i0, i1, i2, i3):
    """The runs of region ``reg`` at outer index (i0, i1, i2, i3): every i4, innermost run."""
    ps = reg[1] + i0 * reg[9] + i1 * reg[10] + i2 * reg[11] + i3 * reg[12]
    pd = reg[2] + i0 * reg[15] + i1 * reg[16] + i2 * reg[17] + i3 * reg[18]
    n5, s4, s5, d4, d5 = reg[8], reg[13], reg[14], reg[19], reg[20]
    for i4 in range(reg[7]):
        _copy_run(src, out, ps + i4 * s4, pd + i4 * d4, n5, s5, d5)


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
                            _copy_run(src, out, ps, pd, n5, s5, d5)


@njit(**PJIT)
def raster_copy_parallel(src, out, regions):
    """:func:`raster_copy` with each region's four outer axes flattened into one ``prange``
    (regions keep their real axes last, so this shares out the third-innermost one when fewer
    remain); the regions must write disjoint elements. (Serially the flattened loop's index
    arithmetic, and :func:`_copy_rows` reading the strides per call, cost 5-35% on some
    transposes, hence two functions.)"""
    for r in range(regions.shape[0]):
        reg = regions[r]
        n1, n2, n3 = reg[4], reg[5], reg[6]
        for t in prange(reg[3] * n1 * n2 * n3):
            i3, q = t % n3, t // n3
            i2, q = q % n2, q // n2
            _copy_rows(src, out, reg, q // n1, q % n1, i2, i3)


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
        self.exact = exact = bool(np.all(counts == 1))
        self.zero = not bool(np.all(counts >= 1))
        if exact:  # disjoint: one call per source with all its regions
            self.calls = [(int(s), np.ascontiguousarray(table[table[:, 0] == s]))
                          for s in np.unique(table[:, 0])]
        else:  # overlapping or partial: keep the order
            self.calls = [(int(row[0]), table[i:i + 1].copy()) for i, row in enumerate(table)]


class Raster(BoundRun, RegionCopy):
    def prepare(self, spec: NodeSpec) -> None:
        rank = spec.attrs["rank"]
        simplified = (simplify_region(*reg) for reg in split_regions(spec.attrs["regions"], rank))
        regions = [r for r in simplified if r is not None]
        self.plan(regions, numel(spec.outputs[0]))
        # regions writing disjoint elements may share out their runs; overlapping ones keep
        # their order (later regions win), so they stay serial
        self.parallel = self.exact and numel(spec.outputs[0]) >= RASTER_PARALLEL_MIN
        self.bound = Bound()

    def binding(self, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        def make() -> tuple[Call, ...]:
            out = bits(outputs[0])
            copy = raster_copy_parallel if self.parallel else raster_copy
            zero: tuple[Call, ...] = ((fill_zero, (out,)),) if self.zero else ()
            return zero + tuple((copy, (bits(inputs[source]), out, table))
                                for source, table in self.calls)
        return (*inputs, outputs[0]), make, None


def _raster_cost(spec: NodeSpec) -> float:
    return 2000.0 + numel(spec.outputs[0])


KERNELS = (
    KernelDef("Raster", (Scheme("strided6", lambda b, s: Raster(), applies=_region_ok,
                                cost=_raster_cost,
                                doc="regions simplified to <= 6 axes, contiguous inner loop"),),
              domain=DOMAIN, since=1, dtypes=DTYPES),
)
