"""Conv (``cl/conv.cl`` and the GEMM of ``cl/matmul.cl``), 2-D, float32/float16, bias fused.

Schemes (the planner takes the applicable one of lowest cost; flops = 2 N M OH OW C/g KH KW):

* ``direct`` -- one work-item per output element looping over C/group x KH x KW; any groups,
  strides, dilations, pads. Cost: flops (x1.0). Work-group size tuned.
* ``depthwise`` -- group == C (M a multiple of C): grid (ceil(OW / 8), OH, N M), a strip of 8
  outputs of one row per work-item (vector loads inside the input, scalar at the borders), the
  window compiled in so the KH x KW taps unroll, no index divisions. Cost: 0.5 flops.
* ``gemm_1x1`` -- 1x1, stride 1, no pads, group 1: Y[n] = W (M x C) @ X[n] (C x HW) + bias,
  the batched GEMM straight on the input. Cost: 0.35 flops.
* ``im2col_gemm`` -- any geometry: ``im2col`` unfolds every (image, group) into a WORKSPACE
  matrix (C/g KH KW x OH OW), then one batched GEMM with the weights (bias fused).
  Cost: 0.45 flops + 4 x workspace elements.
* ``winograd_f23`` -- 3x3, stride 1, dilation 1, group 1, float32: F(2x2, 3x3) -- weights transformed
  once at prepare on the host (U = G g G^T, 16 x M x C, a STATIC buffer; only weights that are
  not constants are transformed on the device every run, into the workspace), input tiles
  transformed to V (16 x C x tiles), 16 batched GEMMs U[k] @ V[k], output transform
  A^T m A + bias. 2.25x fewer multiplies than direct. A strip of tiles whose computed outputs
  are not all finite (an infinite or NaN input or weight, which the transforms spread to outputs
  whose own windows never see it) stores its outputs summed the direct way, so NaN and
  infinities land where the reference puts them (``winograd_output``). Cost: 0.3 flops +
  transform traffic.

``refmnn::FusedConv`` (act(Conv(X, W, B) + Z), :mod:`refmnn.ops.fused`) has the same schemes.
Its epilogue runs in each scheme's store: the GEMM schemes pass Z and the activation to the
GEMM's store (``cl/matmul.cl``), the direct, depthwise and Winograd kernels read Z at the
output's own index (``HAS_Z``) and apply ``activate()`` (``cl/epilogue.cl``). A residual that
broadcasts (not the output's shape) is added by a separate in-place pass instead.

Taps in the padding: the direct and depthwise kernels (and Winograd's direct-way strips) add
the weight times a zero for each, as the reference's padded product does: 0 for a finite
weight, NaN for an infinite or NaN one (``conv_direct_sum``, ``DW_PAD_ROW`` in ``cl/conv.cl``).
Skipping them, as they did, gave numbers where the reference has NaN for such weights; the
multiplies by zero fall only to work-items whose windows reach the padding (MobileNetV2, 17
depthwise layers, old and new alternating in three pairs of processes: 12.28 / 11.52, 9.45 /
9.63, 9.71 / 9.71 ms).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.backends.base import KernelDef, NodeSpec, Scheme
from refmnn.backends.opencl.kernels._common import (
    FLOATS,
    NO_ACTIVATION,
    Activation,
    CLKernel,
    Launch,
    storage_defines,
)
from refmnn.backends.opencl.kernels.elementwise import CANDIDATES_1D
from refmnn.backends.opencl.kernels.matmul import EpiloguePass, FusedTail, Gemm, candidates, fused_ok
from refmnn.dtypes import DType
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN
from refmnn.ops import _window as win


class Geometry:
    """The 2-D geometry of one Conv node (pads resolved, auto_pad included)."""

    def __init__(self, spec: NodeSpec) -> None:
        x, w = spec.inputs[0], spec.inputs[1]
        self.N, self.C, self.H, self.W = (int(d) for d in x.shape)
        self.M = int(w.shape[0])
        kernel = tuple(spec.attrs.get("kernel_shape") or w.shape[2:])
        g = win.geometry((self.H, self.W), kernel, spec.attrs.get("strides"), spec.attrs.get("dilations"),
                         spec.attrs.get("pads"), spec.attrs.get("auto_pad", "NOTSET"))
        self.KH, self.KW = (int(k) for k in g.kernel)
        self.SH, self.SW = g.strides
        self.DH, self.DW = g.dilations
        self.PH, self.PW = g.pads_begin
        self.OH, self.OW = g.out
        self.group = int(spec.attrs.get("group", 1))
        self.has_bias = len(spec.node.inputs) > 2 and bool(spec.node.inputs[2])

    @property
    def flops(self) -> float:
        return 2.0 * self.N * self.M * self.OH * self.OW * (self.C // self.group) * self.KH * self.KW

    def args(self) -> list[int]:
        return [self.KH, self.KW, self.SH, self.SW, self.PH, self.PW, self.DH, self.DW]


class DirectTail:
    """FusedConv's residual Z (input 3) and activation for the kernels that write each output
    element themselves (direct, depthwise, Winograd's output transform): applied in the store
    when Z has the output's shape (read at the output's own index), else the store applies the
    bias only and an :class:`~.matmul.EpiloguePass` adds Z and applies the activation."""

    def __init__(self, kernel: CLKernel, spec: NodeSpec) -> None:
        act = Activation(spec.attrs) if spec.node.domain == FUSED_DOMAIN else NO_ACTIVATION
        z = spec.inputs[3] if len(spec.inputs) > 3 else None
        self.post: list[Launch] = []
        if z is not None and tuple(z.shape) != tuple(spec.outputs[0].shape):
            self.post = [EpiloguePass(kernel, spec, [(3, z.shape)], act).launch]
            z, act = None, NO_ACTIVATION
        self.defines = {**act.defines, **({"HAS_Z": ""} if z is not None else {})}
        self.args = [("in?", 3) if z is not None else ("in?", 99), *act.args]


class ConvDirect(CLKernel):
    """direct: one work-item per output element."""

    tunable = True
    entry = "conv_direct"

    def setup(self, spec: NodeSpec) -> None:
        g = self.geom = Geometry(spec)
        self.n = g.N * g.M * g.OH * g.OW
        self.tail = DirectTail(self, spec)
        self.knl = self.ctx.kernel("conv", self.entry, **storage_defines(spec.inputs[0]), **self.tail.defines)

    def candidates(self) -> list[Any]:
        return [c for c in CANDIDATES_1D if c is None or self.n >= c[0]]

    def launches(self, local: Any) -> list[Launch]:
        g = self.geom
        return [Launch(self.knl, (self.n,), local,
                       [("in", 0), ("in", 1), ("in?", 2), ("out", 0), self.n, g.C, g.H, g.W, g.M,
                        g.OH, g.OW, *g.args(), g.group, int(g.has_bias), *self.tail.args]),
                *self.tail.post]


DW_VW = 8
"""Outputs per work-item of ``conv_depthwise`` (a strip along a row; DW_VW in cl/conv.cl)."""


class ConvDepthwise(CLKernel):
    """depthwise: grid (ceil(OW / 8), OH, N * M), a strip of 8 outputs per work-item, no index divisions; the
    window geometry is compiled in (``DW_*`` defines) so the taps unroll. The tuned parameter
    is the work-group shape (LX, LY, LZ): LZ (image, channel) planes per work-group."""

    tunable = True

    def setup(self, spec: NodeSpec) -> None:
        g = self.geom = Geometry(spec)
        self.tail = DirectTail(self, spec)
        self.knl = self.ctx.kernel("conv", "conv_depthwise", **storage_defines(spec.inputs[0]), **self.tail.defines,
                                   DW_KH=g.KH, DW_KW=g.KW, DW_SH=g.SH, DW_SW=g.SW, DW_DH=g.DH, DW_DW=g.DW)
        self.strips = -(-g.OW // DW_VW)
        self.local = window_locals(self.strips, g.OH, g.N * g.M)[0]

    def candidates(self) -> list[Any]:
        return window_locals(self.strips, self.geom.OH, self.geom.N * self.geom.M)

    def launches(self, local: Any) -> list[Launch]:
        g = self.geom
        return [Launch(self.knl, (self.strips, g.OH, g.N * g.M), local,
                       [("in", 0), ("in", 1), ("in?", 2), ("out", 0), g.C, g.H, g.W, g.M, g.OH, g.OW,
                        g.PH, g.PW, g.M // g.C, int(g.has_bias), *self.tail.args]),
                *self.tail.post]


def window_locals(strips: int, oh: int, planes: int) -> list[tuple[int, int, int]]:
    """Work-group shapes (LX, LY, LZ) for a grid (strips, OH, planes) (depthwise conv, pooling):
    LX the power of two covering a row's strips (at most 64) or half of it, LY 1, 2, 4 or 8 rows
    of one plane (more rows per work-group pays off on small planes: MobileNet's 7x7, 14x14), LZ
    1 plane, or 4 or 16 planes where they divide ``planes`` (the kernels guard no plane index).
    Stacking planes is for small planes: PoCL pays a fixed cost per work-group, and a 14x14
    plane in (2, 4, 1) groups is 1536 work-groups of 8 work-items per 384 channels. The first
    is the untuned default."""
    lx = 1 << max(0, min(6, (max(strips, 1) - 1).bit_length()))
    out: list[tuple[int, int, int]] = []
    for z in (1, 4, 16):
        if planes % z:
            continue
        for x in (lx, lx // 2):
            if x < 1:
                continue
            for y in (1, 2, 4, 8):
                if y > 1 and (y // 2) >= oh:
                    continue
                if x * y * z > 256 or (z > 1 and x * y * z < 16):
                    continue
                if (x, y, z) not in out:
                    out.append((x, y, z))
    return out


class GemmConv(CLKernel):
    """Shared by gemm_1x1, im2col_gemm and winograd_f23: the tuned parameter is the GEMM
    configuration (kernel and block, :func:`matmul.candidates`)."""

    tunable = True

    def candidates(self) -> list[Any]:
        return candidates(self.ctx)


class Conv1x1(GemmConv):
    def setup(self, spec: NodeSpec) -> None:
        g = self.geom = Geometry(spec)
        hw = g.H * g.W
        offsets = [(0, n * g.C * hw, 0) for n in range(g.N)]
        self.tail = FusedTail(self, spec, g.N, g.M, hw, None, 3)
        self.gemm = Gemm(self, g.M, hw, g.C, self.tail.table(np.array(offsets).reshape(-1, 3)), g.M * hw,
                         ("in", 1), ("in", 0), ("out", 0), ("in?", 2) if g.has_bias else None,
                         half=bool(storage_defines(spec.inputs[0])), **self.tail.in_store)

    def launches(self, local: Any) -> list[Launch]:
        return [self.gemm.launch(local), *([self.tail.post.launch] if self.tail.post else [])]


class ConvIm2col(GemmConv):
    def setup(self, spec: NodeSpec) -> None:
        g = self.geom = Geometry(spec)
        half = bool(storage_defines(spec.inputs[0]))
        G = g.group
        cg, mg, ohw = g.C // G, g.M // G, g.OH * g.OW
        kc = cg * g.KH * g.KW
        self.n_col = g.N * g.C * g.KH * g.KW * ohw
        self.workspace_bytes = max(self.n_col * spec.inputs[0].dtype.numpy.itemsize, 4)
        self.knl = self.ctx.kernel("conv", "im2col", **storage_defines(spec.inputs[0]))
        offsets = [(gi * mg * kc, (n * G + gi) * kc * ohw, gi * mg) for n in range(g.N) for gi in range(G)]
        self.tail = FusedTail(self, spec, g.N * G, mg, ohw, None, 3)
        self.gemm = Gemm(self, mg, ohw, kc, self.tail.table(np.array(offsets).reshape(-1, 3)), mg * ohw,
                         ("in", 1), ("ws", 0), ("out", 0), ("in?", 2) if g.has_bias else None, half=half,
                         **self.tail.in_store)

    def launches(self, local: Any) -> list[Launch]:
        g = self.geom
        rows = g.N * g.C * g.KH * g.KW
        unfold = Launch(self.knl, (g.OH, rows), None,
                        [("in", 0), ("ws", 0), rows, g.C, g.H, g.W, g.OH, g.OW, *g.args()])
        return [unfold, self.gemm.launch(local), *([self.tail.post.launch] if self.tail.post else [])]


# G of F(2x2, 3x3): U = G g G^T turns a 3x3 filter g into a 4x4 tile.
WINOGRAD_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


class ConvWinograd(GemmConv):
    """Workspace: [U (16 x M x C) |] V (N x 16 x C x tiles) | Mt (N x 16 x M x tiles).

    U, the transformed weights, is computed once at prepare on the host (in float64, rounded
    once) into a STATIC buffer when the weights are a constant -- the usual case; only weights
    computed at run time are transformed on the device each run (``winograd_weights``)."""

    def setup(self, spec: NodeSpec) -> None:
        g = self.geom = Geometry(spec)
        dtype = spec.inputs[0].dtype.numpy
        half = bool(storage_defines(spec.inputs[0]))
        self.TH, self.TW = -(-g.OH // 2), -(-g.OW // 2)
        tiles = self.TH * self.TW
        self.n_v = g.N * 16 * g.C * tiles
        self.n_m = g.N * 16 * g.M * tiles
        defines = storage_defines(spec.inputs[0])
        self.tail = DirectTail(self, spec)
        if 1 in spec.constants:
            w = np.asarray(spec.constants[1], dtype=np.float64)            # (M, C, 3, 3)
            u = np.einsum("ij,mcjk,lk->ilmc", WINOGRAD_G, w, WINOGRAD_G)    # (4, 4, M, C)
            self.u_slot: Any = ("static", self.static(u.reshape(16, g.M, g.C).astype(dtype)))
            self.n_u = 0
            self.k_w = None
        else:
            self.n_u = 16 * g.M * g.C
            self.u_slot = ("ws", 0)
            self.k_w = self.ctx.kernel("conv", "winograd_weights", **defines)
        self.workspace_bytes = (self.n_u + self.n_v + self.n_m) * dtype.itemsize
        self.k_in = self.ctx.kernel("conv", "winograd_input", **defines)
        self.k_out = self.ctx.kernel("conv", "winograd_output", **defines, **self.tail.defines)
        offsets = [(k * g.M * g.C, (n * 16 + k) * g.C * tiles, 0) for n in range(g.N) for k in range(16)]
        self.gemm = Gemm(self, g.M, tiles, g.C, np.array(offsets).reshape(-1, 3), g.M * tiles,
                         self.u_slot, ("ws", self.n_u), ("ws", self.n_u + self.n_v), None, half=half)

    def launches(self, local: Any) -> list[Launch]:
        g = self.geom
        n_w = g.M * g.C

        def lsize(n: int) -> tuple[int] | None:
            return (64,) if n >= 64 else None

        weights = [Launch(self.k_w, (n_w,), lsize(n_w), [("in", 1), ("ws", 0), n_w])] if self.k_w else []
        return [
            *weights,
            Launch(self.k_in, (-(-self.TW // 8), self.TH, g.N * g.C), None,
                   [("in", 0), ("ws", self.n_u), g.N * g.C, g.C, g.H, g.W, self.TH, self.TW, g.PH, g.PW]),
            self.gemm.launch(local),
            Launch(self.k_out, (-(-self.TW // 8), self.TH, g.N * g.M), None,
                   [("ws", self.n_u + self.n_v), ("in?", 2), ("out", 0), g.N * g.M, g.M, g.OH, g.OW,
                    self.TH, self.TW, int(g.has_bias), ("in", 0), ("in", 1), g.C, g.H, g.W, g.PH,
                    g.PW, *self.tail.args]),
            *self.tail.post,
        ]


def _conv2d(spec: NodeSpec) -> bool:
    x, w = spec.inputs[0], spec.inputs[1]
    if x is None or w is None or x.rank != 4 or w.rank != 4:
        return False
    if spec.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        return False
    return True


def _depthwise_ok(spec: NodeSpec) -> bool:
    if not _conv2d(spec):
        return False
    g = Geometry(spec)
    return g.group == g.C and g.M % g.C == 0 and g.group > 1


def _is_1x1(spec: NodeSpec) -> bool:
    if not _conv2d(spec):
        return False
    g = Geometry(spec)
    return (g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.group, g.OH, g.OW) == (1, 1, 1, 1, 0, 0, 1, g.H, g.W)


def _im2col_ok(spec: NodeSpec) -> bool:
    return _conv2d(spec) and Geometry(spec).group < 64


def _winograd_ok(spec: NodeSpec) -> bool:
    """3x3, stride 1, dilation 1, one group, 8+ input channels; float32 only: with float16
    storage the transformed tiles V and products Mt are rounded to half in the workspace, three
    roundings more than im2col_gemm's one, beyond float16 tolerance with 64 input channels
    (conformance Conv@22 float16 wide_channels: 2 ulp, abs error 0.016)."""
    if not _conv2d(spec) or spec.inputs[0].dtype != DType.float32:
        return False
    g = Geometry(spec)
    return (g.KH, g.KW, g.SH, g.SW, g.DH, g.DW, g.group) == (3, 3, 1, 1, 1, 1, 1) and g.C >= 8


def _cost(factor: float, extra=None):  # type: ignore[no-untyped-def]
    def cost(spec: NodeSpec) -> float:
        g = Geometry(spec)
        return factor * g.flops + (extra(g) if extra else 0.0)

    return cost


def _im2col_traffic(g: Geometry) -> float:
    return 4.0 * g.N * g.C * g.KH * g.KW * g.OH * g.OW


def _wino_traffic(g: Geometry) -> float:
    tiles = -(-g.OH // 2) * -(-g.OW // 2)
    return 4.0 * 16 * g.N * (g.C + g.M) * tiles


def _schemes(fused: bool) -> tuple[Scheme, ...]:
    """Conv's schemes; FusedConv's are the same, applicable when its residual broadcasts to
    the output through at most 4 collapsed axes (the epilogue's fallback pass)."""
    def when(applies):  # type: ignore[no-untyped-def]
        return (lambda spec: applies(spec) and fused_ok(spec, (3,))) if fused else applies

    tail = "; residual and activation in the store" if fused else ""
    return (
        Scheme("direct", lambda b, s: ConvDirect(b, s), applies=when(_conv2d), cost=_cost(1.0),
               doc="one work-item per output element" + tail),
        Scheme("depthwise", lambda b, s: ConvDepthwise(b, s), applies=when(_depthwise_ok), cost=_cost(0.5),
               doc="group == C: a strip of 8 outputs per work-item, KH x KW taps unrolled" + tail),
        Scheme("gemm_1x1", lambda b, s: Conv1x1(b, s), applies=when(_is_1x1), cost=_cost(0.35),
               doc="1x1 stride 1: GEMM W @ X[n], bias fused" + tail),
        Scheme("im2col_gemm", lambda b, s: ConvIm2col(b, s), applies=when(_im2col_ok),
               cost=_cost(0.45, _im2col_traffic), doc="im2col into workspace + batched GEMM" + tail),
        Scheme("winograd_f23", lambda b, s: ConvWinograd(b, s), applies=when(_winograd_ok),
               cost=_cost(0.3, _wino_traffic),
               doc="F(2x2,3x3): weights transformed at prepare, 16 batched GEMMs" + tail),
    )


KERNELS = (
    KernelDef("Conv", _schemes(False), since=1, dtypes=FLOATS),
    KernelDef("FusedConv", _schemes(True), domain=FUSED_DOMAIN, since=1, dtypes=FLOATS),
)
