"""MaxPool / AveragePool (``cl/pool.cl``), 2-D, scheme ``window``: grid (ceil(OW / 8), OH, N * C),
a strip of 8 outputs of one row per work-item, no index divisions, the window geometry compiled
in (taps unrolled, vector loads at stride 1 and 2). Pads, strides, dilations (MaxPool), auto_pad
and ceil_mode are resolved on the host with the reference's own window geometry; AveragePool's divisor counts taps inside the input, or
inside the padded input with count_include_pad (never the ceil_mode overhang), as the reference.
MaxPool with an Indices output falls back. Work-group shape tuned. Cost: output x window.
"""

from __future__ import annotations

from typing import Any

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.opencl.kernels._common import FLOATS, CLKernel, Launch, numel, storage_defines
from refmnn.backends.opencl.kernels.conv import window_locals
from refmnn.ops import _window as win

P_VW = 8
"""Outputs per work-item of ``pool2d`` (P_VW in cl/pool.cl)."""


def _geometry(spec: NodeSpec) -> win.Geometry:
    x = spec.inputs[0]
    return win.geometry(tuple(int(d) for d in x.shape[2:]), tuple(spec.attrs["kernel_shape"]),
                        spec.attrs.get("strides"), spec.attrs.get("dilations"), spec.attrs.get("pads"),
                        spec.attrs.get("auto_pad", "NOTSET"), bool(spec.attrs.get("ceil_mode", 0)))


class Pool(CLKernel):
    tunable = True

    def setup(self, spec: NodeSpec) -> None:
        x = spec.inputs[0]
        g = _geometry(spec)
        N, C, H, W = (int(d) for d in x.shape)
        self.OH, self.OW = (int(d) for d in g.out)
        self.planes = N * C
        self.strips = -(-self.OW // P_VW)
        (KH, KW), (SH, SW), (DH, DW) = g.kernel, g.strides, g.dilations
        self.args = [H, W, self.OH, self.OW, *g.pads_begin, *g.pads_end]
        self.knl = self.ctx.kernel("pool", "pool2d", **storage_defines(x), P_KH=KH, P_KW=KW, P_SH=SH, P_SW=SW,
                                   P_DH=DH, P_DW=DW, P_MAX=int(spec.node.op == "MaxPool"),
                                   P_INCL=int(spec.attrs.get("count_include_pad", 0)))
        self.local = window_locals(self.strips, self.OH, self.planes)[0]

    def candidates(self) -> list[Any]:
        return window_locals(self.strips, self.OH, self.planes)

    def launches(self, local: Any) -> list[Launch]:
        return [Launch(self.knl, (self.strips, self.OH, self.planes), local, [("in", 0), ("out", 0), *self.args])]


def _pool_ok(spec: NodeSpec) -> bool:
    x = spec.inputs[0]
    if x is None or x.rank != 4 or any(spec.node.outputs[1:]):
        return False
    try:
        g = _geometry(spec)
    except ValueError:
        return False
    return tuple(g.out) == tuple(int(d) for d in spec.outputs[0].shape[2:])


def _cost(spec: NodeSpec) -> float:
    return float(numel(spec.outputs[0].shape) * numel(spec.attrs["kernel_shape"]))


KERNELS = tuple(
    KernelDef(op, (Scheme("window", lambda b, s: Pool(b, s), applies=_pool_ok, cost=_cost,
                          doc="a strip of 8 outputs per work-item, window unrolled and clipped to the input"),),
              since=since, dtypes=FLOATS)
    for op, since in (("MaxPool", 8), ("AveragePool", 7))
)
