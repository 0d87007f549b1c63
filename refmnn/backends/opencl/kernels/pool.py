"""MaxPool / AveragePool (``cl/pool.cl``), 2-D, one work-item per output element (scheme
``window``). Pads, strides, dilations (MaxPool), auto_pad and ceil_mode are resolved on the host
with the reference's own window geometry; AveragePool's divisor counts taps inside the input, or
inside the padded input with count_include_pad (never the ceil_mode overhang), as the reference.
MaxPool with an Indices output falls back. Work-group size tuned. Cost: output x window.
"""

from __future__ import annotations

from typing import Any

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.opencl.kernels._common import FLOATS, CLKernel, Launch, numel, storage_defines
from refmnn.backends.opencl.kernels.elementwise import CANDIDATES_1D
from refmnn.ops import _window as win


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
        self.n = numel(spec.outputs[0].shape)
        H, W = (int(d) for d in x.shape[2:])
        is_max = spec.node.op == "MaxPool"
        self.args = [self.n, H, W, *g.out, *g.kernel, *g.strides, *g.pads_begin, *g.pads_end, *g.dilations,
                     int(is_max), int(spec.attrs.get("count_include_pad", 0))]
        self.knl = self.ctx.kernel("pool", "pool2d", **storage_defines(x))

    def candidates(self) -> list[Any]:
        return [c for c in CANDIDATES_1D if c is None or self.n >= c[0]]

    def launches(self, local: Any) -> list[Launch]:
        return [Launch(self.knl, (self.n,), local, [("in", 0), ("out", 0), *self.args])]


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
                          doc="one work-item per output, window clipped to the input"),),
              since=since, dtypes=FLOATS)
    for op, since in (("MaxPool", 8), ("AveragePool", 7))
)
