"""Reductions (``cl/reduction.cl``): ReduceSum/Mean/Max/Min, Softmax, LayerNormalization.

All three view the input as rows: (outer, R, inner) for a reduction over a contiguous block of
axes, (outer, N, inner) for Softmax-13 along ``axis`` (Softmax-1/11: coerced to 2-D, inner = 1),
(rows, K) for LayerNormalization over ``axis..rank-1``. One work-group computes one output row
(scheme ``workgroup_tree``): its work-items stride over the row and combine partial results with
a tree in local memory. The work-group size (a power of two, 16..256, capped near R) is tuned.
A reduction over non-adjacent axes is not supported (the node falls back). Empty rows: Sum 0,
Mean NaN, Max -inf, Min +inf (as the reference). Softmax along the last axis on a CPU device
(PoCL) runs one row per work-item instead (``softmax_vec``: float8 loads and the vector exp, no
barriers; the tuned size is rows per work-group).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyopencl as cl

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.opencl.kernels._common import FLOATS, CLKernel, Launch, numel, storage_defines
from refmnn.dtypes import DType

RCODES = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2, "ReduceMin": 3}


def _reduce_axes(spec: NodeSpec) -> list[int] | None:
    """The reduced axes (sorted, non-negative), or None when this kernel cannot run the node."""
    rank = spec.inputs[0].rank
    axes = spec.attrs.get("axes")
    if len(spec.node.inputs) > 1 and spec.node.inputs[1]:
        if 1 not in spec.constants:
            return None
        axes = [int(a) for a in np.asarray(spec.constants[1]).reshape(-1)]
    if not axes:
        if spec.attrs.get("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted({int(a) % rank for a in axes}) if rank else []


class WorkGroupRows(CLKernel):
    """One work-group per row; the tuned local size is a power of two."""

    tunable = True

    def candidates(self) -> list[Any]:
        cap = 1 << max(4, min(8, int(np.ceil(np.log2(max(self.row, 1))))))
        return [(c,) for c in (16, 32, 64, 128, 256) if c <= cap]

    def default_local(self) -> tuple[int]:
        return self.candidates()[-1] if self.row >= 64 else self.candidates()[0]

    def launches(self, local: Any) -> list[Launch]:
        local = local or self.default_local()
        return [Launch(self.knl, (self.groups * local[0],), local,
                       [*self.args, cl.LocalMemory(4 * local[0])])]


class Reduce(WorkGroupRows):
    def setup(self, spec: NodeSpec) -> None:
        shape = [int(d) for d in spec.inputs[0].shape]
        axes = _reduce_axes(spec)
        assert axes is not None
        lo, hi = (axes[0], axes[-1] + 1) if axes else (0, 0)
        outer, R, inner = numel(shape[:lo]), numel(shape[lo:hi]), numel(shape[hi:])
        self.row, self.groups = R, outer * inner
        self.knl = self.ctx.kernel("reduction", "reduce_rows", RCODE=RCODES[spec.node.op],
                                   **storage_defines(spec.inputs[0]))
        self.args = [("in", 0), ("out", 0), R, max(inner, 1)]


def _reduce_ok(spec: NodeSpec) -> bool:
    if spec.inputs[0] is None or not spec.inputs[0].rank or spec.inputs[0].dtype not in FLOATS:
        return False
    axes = _reduce_axes(spec)
    return axes is not None and axes == list(range(axes[0], axes[-1] + 1)) if axes else axes == []


class Softmax(WorkGroupRows):
    def setup(self, spec: NodeSpec) -> None:
        shape = [int(d) for d in spec.inputs[0].shape]
        axis = int(spec.attrs["axis"]) % len(shape)
        if spec.opdef.since < 13:   # coerced to 2-D: (prod(before), prod(from axis))
            outer, N, inner = numel(shape[:axis]), numel(shape[axis:]), 1
        else:
            outer, N, inner = numel(shape[:axis]), shape[axis], numel(shape[axis + 1:])
        self.row, self.groups = N, outer * inner if N else 0
        # On CPU devices a row along the last axis is one work-item's (softmax_vec, float8 with
        # the vector exp); the work-groups' trees are for GPUs (see cl/reduction.cl).
        self.vec = self.ctx.is_cpu and inner == 1
        entry = "softmax_vec" if self.vec else "softmax_rows"
        self.knl = self.ctx.kernel("reduction", entry, **storage_defines(spec.inputs[0]))
        self.args = [("in", 0), ("out", 0), N, outer if self.vec else max(inner, 1)]

    def candidates(self) -> list[Any]:
        if self.vec:   # rows per work-group
            return [(c,) for c in (1, 2, 4, 8, 16, 32) if c == 1 or c <= self.groups]
        return super().candidates()

    def launches(self, local: Any) -> list[Launch]:
        if self.vec:
            local = local or (min(8, max(self.groups, 1)),)
            return [Launch(self.knl, (self.groups,), local, self.args)]
        return super().launches(local)


class LayerNorm(WorkGroupRows):
    def setup(self, spec: NodeSpec) -> None:
        shape = [int(d) for d in spec.inputs[0].shape]
        axis = int(spec.attrs["axis"]) % len(shape)
        K = numel(shape[axis:])
        self.row, self.groups = K, numel(shape[:axis]) if K else 0
        self.knl = self.ctx.kernel("reduction", "layernorm_rows", **storage_defines(spec.inputs[0]))
        has_bias = len(spec.node.inputs) > 2 and bool(spec.node.inputs[2])
        self.args = [("in", 0), ("in", 1), ("in?", 2), ("out", 0), K, float(spec.attrs["epsilon"]),
                     int(has_bias)]


def _layernorm_ok(spec: NodeSpec) -> bool:
    x = spec.inputs[0]
    if x is None or not x.rank or any(spec.node.outputs[1:]):
        return False
    if spec.attrs.get("stash_type", 1) != 1:
        return False
    axis = int(spec.attrs["axis"]) % x.rank
    K = numel(x.shape[axis:])
    params = [t for t in spec.inputs[1:] if t is not None]
    # Scale/B must be the normalized block itself (leading 1s allowed), not a broadcast of it.
    return all(numel(t.shape) == K and [d for d in t.shape if d != 1] == [d for d in x.shape[axis:] if d != 1]
               for t in params)


def _elements(spec: NodeSpec) -> float:
    return float(numel(spec.inputs[0].shape))


KERNELS = (
    *(KernelDef(op, (Scheme("workgroup_tree", lambda b, s: Reduce(b, s), applies=_reduce_ok, cost=_elements,
                            doc="one work-group per output, local-memory tree"),),
                since=1, dtypes=FLOATS | {DType.int64}) for op in RCODES),  # int64: the axes input
    KernelDef("Softmax", (Scheme("workgroup_tree", lambda b, s: Softmax(b, s), cost=_elements,
                                 doc="one work-group per row (CPU, last axis: one row per work-item): max, sum of exp, normalise"),),
              since=1, dtypes=FLOATS),
    KernelDef("LayerNormalization", (Scheme("workgroup_tree", lambda b, s: LayerNorm(b, s),
                                            applies=_layernorm_ok, cost=_elements,
                                            doc="one work-group per row, two-pass mean/variance"),),
              since=17, dtypes=FLOATS),
)
