"""``gemm_1x1_simd``: a 1x1 convolution (stride 1, one group) as a register-blocked product in
Numba's own code -- no BLAS call, nothing packed (see :mod:`.conv` for the notation).

Per image the output plane is ``y [OC, P] = W [OC, C] @ x [C, P]`` (``P = H * W``), the input
plane read in place. Tasks of ``GROUP`` output channels by ``BLOCK`` pixels are shared out over
the threads (``prange``). A task walks its pixels in the micro-tiles of :mod:`.gemm_simd`
(:func:`.gemm_simd.block`): 4 x 24 outputs, twelve 8-lane accumulators (:mod:`.simd`) held in
registers through the whole sum over the C input channels, each step loading three vectors of
one input row and broadcasting four weights (12 FMAs for 7 loads), the tile stored once at the
end; the task's row blocks take the same strip of x in turn, so it comes from L1 after the
first. The pixels left after the last whole micro-tile go in one 4 x 16 or 4 x 8 tile (one
8-wide row for the channels left after the blocks of four); the last few pixels of a plane
whose size is not a multiple of 8 go one at a time, with the output channels in the lanes
(weights transposed once in ``prepare``). The task's bias, FusedConv residual and activation
are applied right after, while its outputs are in L1 (:func:`.fused.epilogue_rows`; a residual
that broadcasts goes to the epilogue pass instead, as in ``gemm_1x1``).

Where it pays: few input channels. There OpenBLAS's sgemm (``gemm_1x1``) spends much of its
time packing a thin x and on its tile edges; with more input channels its cache blocking wins.
Against it on an AVX2 EPYC (Zen 3; OpenBLAS's Haswell kernels, one panel per thread), 2
threads, each scheme's kernel with a bias, medians of 5 x 40 calls alternating (us,
``gemm_1x1`` / ``gemm_1x1_simd``):

    ====================  ==============  =======================================
    layer (C -> OC @ HW)  times           in the zoo
    ====================  ==============  =======================================
    16 -> 96 @ 112x112    453 / 372       MobileNetV2's first expansion
    32 -> 16 @ 112x112    123 / 103       MobileNetV2's first projection
    24 -> 144 @ 56x56     195 / 174       MobileNetV2
    32 -> 192 @ 28x28     75 / 74         MobileNetV2
    16 -> 64 @ 55x55      135 / 106       SqueezeNet's expand1x1
    128 -> 16 @ 55x55     132 / 97        SqueezeNet's squeeze (priced above: C > 32)
    96 -> 24 @ 56x56      117 / 144
    64 -> 384 @ 14x14     67 / 72
    96 -> 576 @ 14x14     136 / 152
    576 -> 96 @ 14x14     155 / 185
    960 -> 320 @ 7x7      206 / 257
    512 -> 1000 @ 13x13   1026 / 1387     SqueezeNet's classifier
    ====================  ==============  =======================================

The cost (:func:`gemm_1x1_simd_cost`) prices it below ``gemm_1x1`` for at most
``FEW_CHANNELS`` input channels and above it otherwise.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import NodeSpec, Storage
from refmnn.backends.numba.kernels._common import JIT, PJIT
from refmnn.backends.numba.kernels.conv_base import GEMM_CALL, gemm_macs, is_1x1
from refmnn.backends.numba.kernels.fused import NONE, epilogue_rows
from refmnn.backends.numba.kernels.gemm_simd import BLOCK, GROUP, ROWS, block
from refmnn.backends.numba.kernels.simd import native, vfma, vlane, vload, vsplat

FEW_CHANNELS = 32  # the scheme is priced below gemm_1x1 up to this many input channels


@njit(inline="always", **JIT)
def _pixel(wt, pitch, x, y, i0, i1, j, k, p):
    """``y[i0:i1, j] = w[i0:i1] @ x[:, j]`` for one pixel, the output channels in the lanes:
    ``wt [C, pitch]`` holds the transposed weights (zero beyond OC, ``pitch >= i0 + 8``), the
    pixel's input value is broadcast. Four chains of FMAs, summed at the end (one chain is
    bound by the FMA's latency)."""
    a0 = a1 = a2 = a3 = vsplat(np.float32(0))
    c = 0
    while c + 4 <= k:
        a0 = vfma(vload(wt, c * pitch + i0), vsplat(x[c * p + j]), a0)
        a1 = vfma(vload(wt, (c + 1) * pitch + i0), vsplat(x[(c + 1) * p + j]), a1)
        a2 = vfma(vload(wt, (c + 2) * pitch + i0), vsplat(x[(c + 2) * p + j]), a2)
        a3 = vfma(vload(wt, (c + 3) * pitch + i0), vsplat(x[(c + 3) * p + j]), a3)
        c += 4
    for c in range(c, k):
        a0 = vfma(vload(wt, c * pitch + i0), vsplat(x[c * p + j]), a0)
    for r in range(i1 - i0):
        y[(i0 + r) * p + j] = (vlane(a0, r) + vlane(a1, r)) + (vlane(a2, r) + vlane(a3, r))


@njit(**PJIT)
def gemm_1x1_simd(w, wt, x, y, bias, z, has_b, has_z, b_cols, act, alpha, lo, hi):
    """``y = act(w @ x + bias + z)`` for one image: ``w [OC, C]``, ``x [C, P]`` and ``y [OC,
    P]`` C-contiguous float32, ``wt`` the transposed weights, flat (see :func:`_pixel`); ``z``
    shaped like ``y`` when ``has_z``. Tasks of ``GROUP`` output channels by ``BLOCK`` pixels;
    within a task, each micro-tile's strip of x is read by all ``GROUP / ROWS`` of its row
    blocks in turn (from L1 after the first). The epilogue per task
    (:func:`.fused.epilogue_rows`, bias per row)."""
    m, k = w.shape
    p = x.shape[1]
    pitch = wt.shape[0] // k
    xf, yf = x.reshape(-1), y.reshape(-1)
    blocks = (p + BLOCK - 1) // BLOCK
    for task in prange(((m + GROUP - 1) // GROUP) * blocks):
        i0 = (task // blocks) * GROUP
        i1 = min(m, i0 + GROUP)
        j0 = (task % blocks) * BLOCK
        j1 = min(p, j0 + BLOCK)
        j = block(w, xf, 0, p, yf, 0, p, i0, i1, j0, j1, k)  # all but the last < 8 pixels
        for i in range(i0, i1, ROWS):  # the plane's last few pixels, one at a time
            for jj in range(j, j1):
                _pixel(wt, pitch, xf, yf, i, min(i1, i + ROWS), jj, k, p)
        if has_b or has_z or act != NONE:
            epilogue_rows(y, bias, z, has_b, has_z, b_cols, act, alpha, lo, hi, i0, i1, j0, j1)


def is_1x1_constant(spec: NodeSpec) -> bool:
    """``gemm_1x1``'s conditions (1x1, stride 1, no padding, one group) with the weights known
    when planning (``prepare`` transposes them once), on a CPU with AVX2 and FMA
    (:func:`.simd.native`)."""
    return is_1x1(spec) and 1 in spec.constants and native()


def gemm_1x1_simd_cost(spec: NodeSpec) -> float:
    """``gemm_1x1``'s cost -- ``2 * MACs`` plus ``GEMM_CALL`` per image (here a parallel launch)
    -- with the MACs' term times 0.85 for at most ``FEW_CHANNELS`` input channels, times 1.3
    beyond (see the module docstring)."""
    c = int(spec.inputs[1].shape[1])
    factor = 0.85 if c <= FEW_CHANNELS else 1.3
    return 2 * gemm_macs(spec) * factor + GEMM_CALL * int(spec.inputs[0].shape[0])


def transposed_weights(backend, spec: NodeSpec) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The constant weights ``[OC, C, 1, 1]`` transposed into a STATIC buffer, flat ``[C,
    pitch]`` with zeros beyond OC (:func:`_pixel`'s ``wt``; ``pitch`` leaves every task's
    ``i0 + 8`` lanes inside a row)."""
    oc, c = int(spec.inputs[1].shape[0]), int(spec.inputs[1].shape[1])
    pitch = (oc + ROWS - 1) // ROWS * ROWS + 4
    buf = backend.allocate(c * pitch * 4, Storage.STATIC)
    wt = buf.handle[:c * pitch * 4].view(np.float32)
    wt[:] = 0
    wt.reshape(c, pitch)[:, :oc] = np.asarray(spec.constants[1], np.float32).reshape(oc, c).T
    return wt
