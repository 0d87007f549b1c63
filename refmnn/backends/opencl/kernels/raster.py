"""Memory movement (``cl/raster.cl``): Raster, Split and Gather.

* Raster (scheme ``regions``): every region is collapsed on the host (size-1 axes dropped,
  neighbours merged) to at most 4 axes -- deeper regions are split into several launches over
  their leading axes -- and copied by one launch of ``raster_region``, a work-item per element,
  moving words of the element size (any dtype), as a 3-D NDRange without per-element integer
  division (``cl/raster.cl``). When the regions do not cover the whole output
  (checked at prepare on a coverage mask), a ``clEnqueueFillBuffer`` of zeros comes first.
  Cost: elements copied.
* Split (``regions``): one region per output, the same copy kernel.
* Gather (``rows``): data seen as (outer, axis, inner), one work-item per output element;
  indices int32/int64, negative indices wrap; an out-of-range index is an error, checked on the
  device (the kernel sets the context's error flag, the backend raises an OpError naming the
  node at the end of the run: ``Context.register_check``).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyopencl as cl
from numpy.lib.stride_tricks import as_strided

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.opencl.kernels._common import (
    CLKernel,
    Launch,
    collapse,
    numel,
    set_args,
)
from refmnn.dtypes import DType
from refmnn.errors import node_context
from refmnn.ops.raster import split_regions

ALL_TYPES = frozenset({DType.float32, DType.float16, DType.float64, DType.int64, DType.int32,
                       DType.int16, DType.int8, DType.uint8, DType.uint16, DType.uint32,
                       DType.uint64, DType.bool, DType.bfloat16})


def region_launches(ctx: Any, itemsize: int, src: int, src_off: int, dst_off: int, sizes, s_strides,
                    d_strides) -> list[Launch]:  # type: ignore[no-untyped-def]
    """Launches copying one region: collapsed to <= 4 axes, leading axes unrolled if needed;
    each a 3-D NDRange (n3, n2, n0 * n1), the program specialised on unit inner strides."""
    if 0 in sizes:
        return []
    csizes, (cs, cd) = collapse(sizes, [s_strides, d_strides])
    if not csizes:
        csizes, cs, cd = [1], [0], [0]
    lead = max(0, len(csizes) - 4)
    launches = []
    for index in itertools.product(*[range(n) for n in csizes[:lead]]):
        so = src_off + sum(i * s for i, s in zip(index, cs, strict=False))
        do = dst_off + sum(i * s for i, s in zip(index, cd, strict=False))
        sz, ss, ds = csizes[lead:], cs[lead:], cd[lead:]
        pad = 4 - len(sz)
        sz, ss, ds = [1] * pad + sz, [0] * pad + ss, [0] * pad + ds
        n = numel(sz)
        unit = {k: 1 for k, s in (("S3", ss[3]), ("D3", ds[3])) if s == 1}
        knl = ctx.kernel("raster", "raster_region", ELEM_SIZE=itemsize, **unit)
        launches.append(Launch(knl, (sz[3], sz[2], sz[0] * sz[1]), None,
                               [("in", src), ("out", 0), n, sz[1], sz[2], sz[3], *ss, *ds, ("src_off", so),
                                ("dst_off", do)]))
    return launches


class RegionCopy(CLKernel):
    """Base of Raster and Split: a list of region copies, with an optional zero fill first.
    Region launches carry their offsets as extra slots resolved at enqueue."""

    def _enqueue(self, plan, inputs, outputs, workspace):  # type: ignore[no-untyped-def]
        queue = self.ctx.queue
        for target, nbytes in self.fills:
            out = outputs[target]
            cl.enqueue_fill_buffer(queue, out.buffer, np.uint8(0), out.offset, nbytes)
        for launch in plan:
            args = launch.args
            src_t = inputs[args[0][1]]
            dst_t = outputs[self.out_of.get(id(launch), 0)]
            so, do = args[-2][1], args[-1][1]
            set_args(launch.kernel, [src_t.buffer, np.int32(int(src_t.off) + so), dst_t.buffer,
                                     np.int32(int(dst_t.off) + do), *args[2:-2]])
            cl.enqueue_nd_range_kernel(queue, launch.kernel, launch.gsize, None)
            self.backend.stats["launches"] += 1

    def launches(self, local: Any) -> list[Launch]:
        return self._plan


class Raster(RegionCopy):
    def setup(self, spec: NodeSpec) -> None:
        out = spec.outputs[0]
        itemsize = out.dtype.numpy.itemsize
        rank, shape = int(spec.attrs["rank"]), tuple(spec.attrs["shape"])
        total = numel(shape)
        covered = np.zeros(total, dtype=bool)
        self._plan, self.out_of = [], {}
        for src, so, do, sizes, ss, ds in split_regions(spec.attrs["regions"], rank):
            self._plan += region_launches(self.ctx, itemsize, src, so, do, sizes, ss, ds)
            if 0 not in sizes and total:
                as_strided(covered[do:], sizes, tuple(int(s) for s in ds), writeable=True)[...] = True
        self.fills = [] if covered.all() else [(0, total * itemsize)]


class Split(RegionCopy):
    def setup(self, spec: NodeSpec) -> None:
        shape = [int(d) for d in spec.inputs[0].shape]
        axis = int(spec.attrs.get("axis") or 0) % len(shape)
        outer, inner = numel(shape[:axis]), numel(shape[axis + 1:])
        itemsize = spec.inputs[0].dtype.numpy.itemsize
        self._plan, self.out_of, self.fills = [], {}, []
        start = 0
        for k, t in enumerate(spec.outputs):
            size = int(t.shape[axis]) if t is not None else 0
            if t is not None:
                for launch in region_launches(self.ctx, itemsize, 0, start * inner, 0, (outer, size * inner),
                                              (shape[axis] * inner, 1), (size * inner, 1)):
                    self.out_of[id(launch)] = k
                    self._plan.append(launch)
            start += size


def _split_ok(spec: NodeSpec) -> bool:
    t = spec.inputs[0]
    return t is not None and t.rank and all(o is None or o.is_static for o in spec.outputs)


class Gather(CLKernel):
    def setup(self, spec: NodeSpec) -> None:
        data, idx = spec.inputs[0], spec.inputs[1]
        axis = int(spec.attrs.get("axis", 0)) % data.rank
        shape = [int(d) for d in data.shape]
        self.n = numel(spec.outputs[0].shape)
        self.count, self.inner, self.axis_size = numel(idx.shape), numel(shape[axis + 1:]), shape[axis]
        self.knl = self.ctx.kernel("raster", "gather", ELEM_SIZE=data.dtype.numpy.itemsize,
                                   INDEX_T="long" if idx.dtype == DType.int64 else "int")
        node = spec.node
        self.check = self.ctx.register_check(
            f"{node_context(node, spec.opset, spec.inputs)} on "
            f"backend 'opencl': an index of 'indices' is out of range [-{self.axis_size}, "
            f"{self.axis_size - 1}] for axis {axis} (checked on the device)")

    def launches(self, local: Any) -> list[Launch]:
        return [Launch(self.knl, (self.n,), (64,) if self.n >= 64 else None,
                       [("in", 0), ("in", 1), ("out", 0), self.n, max(self.count, 1),
                        max(self.inner, 1), self.axis_size, ("err", self.check)])]


def _gather_ok(spec: NodeSpec) -> bool:
    data, idx = spec.inputs[0], spec.inputs[1]
    return (data is not None and idx is not None and data.rank >= 1
            and idx.dtype in (DType.int32, DType.int64) and data.dtype.numpy.itemsize in (1, 2, 4, 8))


def _elements(spec: NodeSpec) -> float:
    return float(numel(spec.outputs[0].shape))


KERNELS = (
    KernelDef("Raster", (Scheme("regions", lambda b, s: Raster(b, s), cost=_elements,
                                doc="one launch per region (<= 4 collapsed axes), zero fill if needed"),),
              domain="refmnn", since=1, dtypes=ALL_TYPES),
    KernelDef("Split", (Scheme("regions", lambda b, s: Split(b, s), applies=_split_ok, cost=_elements,
                               doc="one strided region copy per output"),),
              since=1, dtypes=ALL_TYPES),
    KernelDef("Gather", (Scheme("rows", lambda b, s: Gather(b, s), applies=_gather_ok, cost=_elements,
                                doc="one work-item per output element"),),
              since=1, dtypes=ALL_TYPES),
)
