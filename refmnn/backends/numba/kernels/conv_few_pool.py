"""``direct_few_max_pool`` -- the numba scheme of ``refmnn::FusedConvMaxPool``: a stem
convolution with few input channels (``direct3x3_few_simd``'s and ``direct7x7_few_simd``'s
cases, :mod:`.conv_direct_few`) and the 3x3 stride-2 max pool after it (``max3x3s2_simd``'s
cases, :mod:`.pool`) in one pass, so that the convolution's output -- the largest activation of
SqueezeNet and ResNet, 3.2 MB at 64 x 111 x 111 -- is never written out and read back: each
of its rows is pooled while it is in the worker's L1/L2.

The padded input planes are filled as for ``direct3x3_few_simd`` (input channels in parallel).
Tasks are (block of four output channels, band of about a quarter of the pooled rows). For
each pooled row in turn, a task computes the convolution rows its windows read that it does
not hold yet -- two per pooled row, three for a band's first -- with the register tiles of
:func:`.conv_direct_few._tile_taps`, one row at a time, into a ring of three row slots per
channel (1.9 KB each at SqueezeNet's 111 columns: all of it stays in L1), then pools the row of
each of the four channels: :func:`.pool.column_maxima8` for the four, then
:func:`.pool.window_maxima8` for the four (the window loads straddle the column maxima's
stores; right after them they stall on store forwarding). The activation (none, Relu or Clip)
is applied as the column maxima load each element; activating the ring's rows in place
instead cost more than the whole pool -- LLVM turns a Relu stored back where it was loaded
from into AVX masked stores (:func:`.fused.activate_row`). The results are those of the
convolution's and the pool's kernels run one after the other, bit for bit: the same sums in
the same order, the same maxima.

The first versions held a band's 17 convolution rows at once (30 KB a worker) and were slower
than the two kernels apart (1.3-1.6x on the stems below): the rows fell out of L1, a band's
first row was computed twice, the in-place activation used masked stores, and a slice
assignment moving the rows within the buffer went through a temporary array.

Measured, 2 threads, medians, kernels alone on one input (hot), us: SqueezeNet 1.1's stem
(3 -> 64, 3x3 stride 2, 224 -> 111, Relu, pool 3x3 stride 2 ceil -> 55) 935 against 941 for
direct3x3_few_simd alone and 213 for its max3x3s2; ResNet-18's (7x7 stride 2 pads 3 -> 112,
pool pads 1 -> 56) 2773 against 2776 and 223 -- the pool comes for free. The same layers as
sessions, fused and unfused alternating in one process, the input cycling over eight images:
1086 -> 870 (0.80x) and 3119 -> 2746 (0.88x).

Cost: direct3x3_few_simd's formula for the convolution, less its output's traffic.

``direct_few_oc16_max_pool`` (:class:`Oc16MaxPool`) is the same pass with the sixteen-channel
tiles of :mod:`.conv_direct_few_oc16` (no padded planes), for 3x3 stems with output channels a
multiple of 16 and constant weights; see that module for its kernel and measurements.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import njit, prange

from refmnn.backends.base import KernelDef, NodeSpec, Scheme, Storage
from refmnn.backends.numba.kernels._common import F32, PJIT, Call, into_contiguous
from refmnn.backends.numba.kernels.conv_depthwise3x3 import padded_geometry
from refmnn.backends.numba.kernels.conv_direct_few_oc16 import (BLOCK, LANES, DirectFewOc16Conv,
                                                                conv_few_oc16_max_pool,
                                                                direct_few_oc16_cost,
                                                                is_direct_few_oc16)
from refmnn.backends.numba.kernels.conv_direct_few import (TILE, DirectFewSimdConv,
                                                           _tile_taps, direct3x3_few_simd_cost,
                                                           fill_channel, is_direct3x3_few,
                                                           is_direct7x7_few)
from refmnn.backends.numba.kernels.gemm_simd import ROWS, pack_rows
from refmnn.backends.numba.kernels.pool import (_ok_3x3s2_simd, column_maxima8, pool_params,
                                                scratch_3x3s2_simd, window_maxima8)
from refmnn.graph import TensorType
from refmnn.ops import _window as win
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN
from refmnn.ops.fused import split_pool_attrs

BANDS = 4  # bands of pooled rows per block of output channels (tasks: blocks x bands)


@njit(**PJIT)
def conv_few_max_pool(x, wp, k, offsets, bias, out, s, pt, pl, act, lo, hi, conv_oh, conv_ow,
                      ph_n, pw_n, ppt, ppl, band, slot, planes, scratch, parts):
    """``out = MaxPool3x3s2(act(conv(x) + bias))`` (see the module docstring). ``wp``,
    ``offsets``, ``planes`` and the stride/padding ``s``, ``pt``, ``pl`` as in
    :func:`.conv_direct_few.conv_direct_few_simd` (``k`` the kernel size); ``conv_oh x conv_ow``
    the convolution's output, ``ph_n x pw_n`` the pool's, ``ppt``, ``ppl`` its top and left
    padding; ``out`` the flat pooled output; ``band`` pooled rows a task. ``scratch [parts,
    4 * (3 * slot + row)]``: each worker's ring of convolution rows for four channels (three
    slots each, a slot the row's columns in whole micro-tiles: :func:`ring_slot`) and its four
    -inf padded pooling rows (``row`` each: :func:`.pool.scratch_3x3s2_simd`)."""
    n_img, c_in = x.shape[0], x.shape[1]
    oc_n = bias.shape[0]
    hp, wpad, pitch, size, area, _, wide = padded_geometry(conv_oh, conv_ow, s, k)
    per_channel = area + wide
    span = 3 * slot
    bands = (ph_n + band - 1) // band
    tasks = (oc_n // 4) * bands
    for n in range(n_img):
        for c in prange(c_in):
            fill_channel(x, n, c, planes, per_channel, area, s, pt, pl, hp, wpad, pitch, size)
        for part in prange(parts):
            buf = scratch[part]  # (a 1-D slice of it: scratch[part, a:b] loses C layout)
            acc, rows = buf[:4 * span], buf[4 * span:]
            width = rows.size // 4
            rows[:] = np.float32(-np.inf)  # the padding columns stay -inf
            for task in range(part * tasks // parts, (part + 1) * tasks // parts):
                oc0 = task // bands * 4
                p0 = task % bands * band
                done = 0  # the convolution rows before it are in the ring (or not needed)
                for ph in range(p0, min(ph_n, p0 + band)):
                    top, bottom = max(2 * ph - ppt, 0), min(2 * ph - ppt + 3, conv_oh)
                    for r in range(max(top, done) if ph > p0 else top, bottom):
                        o = r % 3 * slot  # row r's slot: the ring holds a window's rows
                        for q in range(r * pitch, r * pitch + conv_ow, TILE):
                            _tile_taps(planes, per_channel, offsets, wp, bias, oc0, c_in, q,
                                       acc, o + q - r * pitch, span)
                    done = bottom
                    # the column maxima of the four channels first, then their windows: the
                    # window loads read whole vectors across two of the row's stores, which
                    # must have left the store buffer (right after them, they stall)
                    for i in range(4):
                        o = i * span
                        column_maxima8(acc, o + top % 3 * slot, o + (top + 1) % 3 * slot,
                                       o + (top + 2) % 3 * slot, bottom - top, conv_ow,
                                       rows[i * width:], ppl, act, lo, hi)
                    for i in range(4):
                        window_maxima8(rows[i * width:], out,
                                       ((n * oc_n + oc0 + i) * ph_n + ph) * pw_n, pw_n)


def ring_slot(conv_ow: int) -> int:
    """Elements of one convolution row in the ring: its columns in whole micro-tiles."""
    return -(-conv_ow // TILE) * TILE


def conv_part(spec: NodeSpec) -> NodeSpec:
    """The FusedConvMaxPool node as the FusedConv it starts with: the convolution's attributes
    and output (its shape by Conv's rule), for the predicates and kernels of FusedConv."""
    x, w = spec.inputs[0], spec.inputs[1]
    attrs = split_pool_attrs(spec.attrs)[0]
    dims = None
    if x is not None and w is not None and x.shape is not None and w.shape is not None:
        kernel = attrs.get("kernel_shape") or w.shape[2:]
        dims = (x.shape[0], w.shape[0], *win.output_dims(
            x.shape[2:], kernel, attrs.get("strides"), attrs.get("dilations"),
            attrs.get("pads"), attrs.get("auto_pad", "NOTSET")))
    y = TensorType(spec.outputs[0].dtype, dims) if spec.outputs[0] is not None else None
    return replace(spec, attrs=attrs, outputs=(y,))


def pool_part(spec: NodeSpec, conv: NodeSpec) -> NodeSpec:
    """The FusedConvMaxPool node as the MaxPool it ends with: the pool_* attributes under
    MaxPool's names, reading the output of ``conv`` (:func:`conv_part`)."""
    attrs = split_pool_attrs(spec.attrs)[1]
    return replace(spec, attrs={**attrs, "storage_order": 0}, inputs=conv.outputs)


def is_few_max_pool(spec: NodeSpec) -> bool:
    """The convolution is ``direct3x3_few``'s or ``direct7x7_few``'s case (few input channels)
    with output channels a multiple of 4 and its activation in the loops (none, Relu or Clip);
    the pool is ``max3x3s2_simd``'s (3x3, stride 2, dilation 1, rows of at least 16
    convolution and 8 pooled outputs, a CPU with AVX2). The weights need not be constants."""
    conv = conv_part(spec)
    if conv.outputs[0] is None or conv.outputs[0].shape is None or None in conv.outputs[0].shape:
        return False
    if spec.attrs.get("activation", "none") not in ("none", "relu", "clip"):
        return False
    return ((is_direct3x3_few(conv) or is_direct7x7_few(conv))
            and int(conv.inputs[1].shape[0]) % 4 == 0 and _ok_3x3s2_simd(pool_part(spec, conv)))


def few_max_pool_cost(spec: NodeSpec) -> float:
    """direct3x3_few_simd's cost of the convolution without its output's traffic (see the
    module docstring)."""
    conv = conv_part(spec)
    n, oc, oh, ow = (int(d) for d in conv.outputs[0].shape)
    return direct3x3_few_simd_cost(conv) - 4.0 * n * oc * oh * ow


class PooledBands:
    """What both fused kernels take from the node: the convolution's output size, the pool's
    output size and top and left padding, and the pooled rows a task (``BANDS`` per block)."""

    def pool_geometry(self, spec: NodeSpec, conv: NodeSpec) -> None:
        *_, self.ppt, self.ppl, _, _ = pool_params(pool_part(spec, conv))
        self.conv_oh, self.conv_ow = (int(d) for d in conv.outputs[0].shape[2:])
        self.ph, self.pw = (int(d) for d in spec.outputs[0].shape[2:])
        self.band = max(1, -(-self.ph // BANDS))


class ConvFewMaxPool(PooledBands, DirectFewSimdConv):
    """direct_few_max_pool: :class:`.conv_direct_few.DirectFewSimdConv`'s padded planes and
    packed weights for the convolution, tasks of bands of pooled rows."""

    def prepare(self, spec: NodeSpec) -> None:
        conv = conv_part(spec)
        super().prepare(conv)
        self.pool_geometry(spec, conv)
        self.slot = ring_slot(self.conv_ow)
        self.row = scratch_3x3s2_simd(self.conv_ow, self.ppl, self.pw)
        self.per_part = 4 * (3 * self.slot + self.row)  # a worker's ring and pooling rows
        self.workspace_bytes = (self.planes + self.parts * self.per_part) * 4

    def packed(self, spec: NodeSpec) -> np.ndarray:
        """The weights packed once when they are constants, else a buffer for :meth:`calls` to
        pack them into on every run (a stem's are a few kilobytes)."""
        self.pack_each_run = 1 not in spec.constants
        if not self.pack_each_run:
            return super().packed(spec)
        oc, k = int(spec.inputs[1].shape[0]), int(np.prod(spec.inputs[1].shape[1:]))
        size = -(-oc // ROWS) * ROWS * k
        return self.backend.allocate(size * 4, Storage.STATIC).handle[:size * 4].view(np.float32)

    def after_calls(self, inputs, out):  # type: ignore[no-untyped-def]
        # no epilogue pass after it (unlike DirectFewSimdConv's): the activation is applied in
        # the loops and the fused op has no residual
        return None

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The :func:`conv_few_max_pool` call (see :class:`.Bound`), after packing the weights
        when they are not constants; into a temporary, then copied, when ``out`` is not
        C-contiguous."""
        _, _, s, _, _, _, pt, pl, _, _, _ = self.params
        ep = self.epilogue
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        planes = raw[:self.planes]
        scratch = raw[self.planes:].reshape(self.parts, self.per_part)
        calls = into_contiguous(out, lambda target: (conv_few_max_pool, (
            inputs[0], self.wp, self.params[0], self.offsets, self.bias(inputs),
            target.reshape(-1), s, pt, pl, self.act, ep.lo, ep.hi, self.conv_oh, self.conv_ow,
            self.ph, self.pw, self.ppt, self.ppl, self.band, self.slot, planes, scratch,
            self.parts)))
        if self.pack_each_run:
            w = inputs[1]
            oc = w.shape[0]
            pack = (pack_rows, (w.reshape(1, oc, -1), self.wp.reshape(1, oc // ROWS, -1, ROWS)))
            calls = (pack, *calls)
        return calls


def is_oc16_max_pool(spec: NodeSpec) -> bool:
    """A FusedConvMaxPool whose convolution is :func:`is_direct_few_oc16`'s case with its
    activation in the loops (none, Relu or Clip) and whose pool is ``max3x3s2_simd``'s."""
    conv = conv_part(spec)
    if conv.outputs[0] is None or conv.outputs[0].shape is None or None in conv.outputs[0].shape:
        return False
    if spec.attrs.get("activation", "none") not in ("none", "relu", "clip"):
        return False
    return is_direct_few_oc16(conv) and _ok_3x3s2_simd(pool_part(spec, conv))


def oc16_max_pool_cost(spec: NodeSpec) -> float:
    """direct_few_oc16's cost of the convolution (its output stays in the ring)."""
    return direct_few_oc16_cost(conv_part(spec))


class Oc16MaxPool(PooledBands, DirectFewOc16Conv):
    """direct_few_oc16_max_pool: the packed weights of :class:`DirectFewOc16Conv`, tasks of
    bands of pooled rows."""

    def prepare(self, spec: NodeSpec) -> None:
        conv = conv_part(spec)
        super().prepare(conv)
        self.pool_geometry(spec, conv)
        self.slot = -(-self.conv_ow // LANES) * LANES
        row = scratch_3x3s2_simd(self.conv_ow, self.ppl, self.pw)
        self.per_part = BLOCK * 3 * self.slot + 2 * row
        self.workspace_bytes = self.parts * self.per_part * 4

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The :func:`conv_few_oc16_max_pool` call (see :class:`.Bound`). No epilogue pass
        follows it: the activation is applied in the loops and the fused op has no residual."""
        kh, kw, sh, sw, _, _, pt, pl, _, _, _ = self.params
        ep = self.epilogue
        x = np.ascontiguousarray(inputs[0])
        scratch = workspace.handle[:self.workspace_bytes].view(np.float32).reshape(
            self.parts, self.per_part)
        return into_contiguous(out, lambda target: (conv_few_oc16_max_pool, (
            x, self.wp, self.bias(inputs), target.reshape(-1), kh, kw, sh, sw, pt, pl, self.act,
            ep.lo, ep.hi, self.conv_oh, self.conv_ow, self.ph, self.pw, self.ppt, self.ppl,
            self.band, self.slot, scratch, self.parts)))


KERNELS = (
    KernelDef("FusedConvMaxPool", (
        Scheme("direct_few_max_pool", lambda b, s: ConvFewMaxPool(b), applies=is_few_max_pool,
               cost=few_max_pool_cost,
               doc="stem conv in register tiles, each band of rows max-pooled from cache"),
        Scheme("direct_few_oc16_max_pool", lambda b, s: Oc16MaxPool(b),
               applies=is_oc16_max_pool, cost=oc16_max_pool_cost,
               doc="stem conv in 16-channel x 8-output tiles, bands of rows max-pooled in cache"),
    ), domain=FUSED_DOMAIN, since=1, dtypes=F32),
)
