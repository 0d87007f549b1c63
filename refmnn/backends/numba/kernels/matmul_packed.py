"""``packed_simd``: MatMul / FusedMatMul with constant weights ``B [K, N]`` as register tiles
on B packed once -- a transformer's projections without a BLAS call (see :mod:`.linalg` for
the other schemes).

The rows of ``A`` (every batch axis folded in: ``A [..., M, K]`` is ``a [R, K]`` with ``R`` the
product of its leading axes, since B has no batch axes) times B give ``y [R, N]``. B is packed
in ``prepare`` into strips of 24 columns, ``[ceil(N/24)][K][24]``, zeros past N
(:func:`pack_strips`), so one step of K reads 24 adjacent floats of a strip; A is read where
it lies. A tile is four rows by one strip, twelve 8-lane accumulators held over the whole sum
(:mod:`.gemm_simd`'s 4 x 24 micro-tile with the roles of its operands swapped from
``gemm_1x1_simd``'s: the broadcast values are four rows of A, pitch K, the streamed ones a
strip of B). A tile of the last rows (``R % 4``) or the last columns (``N % 24``) runs on
zero-padded copies of those rows and through a small buffer, of which only what lies inside y
is copied out.

FusedMatMul's epilogue is applied in registers: the accumulators start at the bias (one per
column: the same three vectors for the four rows), the residual (shaped like the output) is
added and Relu, Clip or Gelu applied before the store (:func:`gelu8`, ``_common.gelu32`` on
eight lanes); another activation on the tile just stored, in L1; another residual or bias
shape as the epilogue pass after the product. Applied as a pass over each stored tile, the
epilogue had cost more than it saved: ViT-Tiny's fc1 (Gelu over [197, 768]) 528 us in the model
against the sgemm's 447.

Work is shared out by rows of A where there are enough (``ROWS_PER_PART`` blocks of four rows
a worker), each worker running every strip over its blocks, ``CHUNK_BYTES`` of A's rows at a
time (they stay in L2 while the strips pass); with fewer rows, by strips of B. An sgemm packs
both operands on every call; here B's packing is paid once and A needs none -- which is what
pays for the products of a transformer's few hundred tokens. For more rows a BLAS's full
blocking (panels of A packed into L2) wins, so the cost gives products of more than
``MAX_ROWS`` rows to ``blas``; so it does on an Intel CPU with AVX-512, where a BLAS runs
16-lane FMAs at full rate, twice this kernel's width (AMD's Zen 4 runs a 512-bit FMA as two
halves), :func:`cost`.

Measured on a two-core AMD EPYC with AVX-512 (Zen 4), 2 threads, against the ``blas`` scheme
(NumPy's OpenBLAS in refmnn's panels: on its SkylakeX kernels, the small-matrix ones where a
panel fits them; and forced onto its Haswell kernels with ``OPENBLAS_CORETYPE=Haswell``, which
pack every panel, as on the Zen 3 machines of other runs). The kernels alone, hot, with a bias,
the two schemes' calls alternating, median us, blas / packed_simd:

    ==============================  ================  ================
    [R, K] @ [K, N], activation     SkylakeX          Haswell
    ==============================  ================  ================
    [128, 384] @ [384, 384]         222 / 217         274 / 235
    [128, 384] @ [384, 1536] Gelu   950 / 861         1063 / 968
    [128, 1536] @ [1536, 384]       911 / 826         1079 / 909
    [197, 192] @ [192, 576]         265 / 271         296 / 287
    [197, 192] @ [192, 768] Gelu    378 / 375         437 / 413
    [197, 768] @ [768, 192]         328 / 315         346 / 305
    [197, 192] @ [192, 192]         137 / 175         94 / 92
    [128, 768] @ [768, 3072]        3992 / 3564       3645 / 3359
    [512, 1024] @ [1024, 1024]      6434 / 7677       6753 / 6893
    [1024, 1024] @ [1024, 1024]     11585 / 11632     12971 / 13375
    [2048, 384] @ [384, 1536]       12833 / 12528     14286 / 15486
    ==============================  ================  ================

The first seven are BERT-6's and ViT-Tiny's products. Whole models, their FusedMatMul nodes on
either scheme, sessions alternating in one process (40-50 runs each), median ms, blas ->
packed_simd: BERT-6 27.91 -> 24.80 and 26.84 -> 23.50 (SkylakeX), 24.58 -> 21.00 and 25.48 ->
22.80 (Haswell); ViT-Tiny 21.47 -> 20.30 and, loaded, 29.73 -> 29.72 (SkylakeX), 22.45 -> 20.98
and 24.79 -> 22.46 (Haswell); outputs within 4.4e-7 (BERT-6) and 1.3e-6 (ViT-Tiny) of the
reference (rel L2), against the sgemm's 3.0e-7 and 7.9e-7.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, NodeSpec, Storage
from refmnn.backends.numba.kernels._common import (F0, F1, F2, F3, F4, F5, F6, G0, G1, G2, G3,
                                                   G4, G5, JIT, PJIT, Bound, BoundRun)
from refmnn.backends.numba.kernels.fused import CLIP, GELU, NONE, RELU, Epilogue, epilogue_rows
from refmnn.backends.numba.kernels.gemm_simd import (PIXELS, ROWS, activate8, fma3, store3,
                                                    tile4x24)
from refmnn.backends.numba.kernels.simd import (native, vadd, vbroadcast, vclamp, vdiv, vfma,
                                                vload, vmul, vsplat)

STRIP = PIXELS  # columns of B per packed strip: the tile's width (three vectors)
ROWS_PER_PART = 8  # blocks of four rows a worker needs for the work to be shared out by rows
SPARE = ROWS * STRIP  # a worker's buffer for one tile that overhangs y
CHUNK_BYTES = 256 * 1024  # A's rows a worker runs every strip over at a time (a quarter of L2)
FACTOR = 0.8  # the cost's multiple of 2*R*N*K (the blas scheme's is 1) ...
ABOVE_FACTOR = 1.1  # ... and above MAX_ROWS rows or on an Intel CPU with AVX-512 (see cost)
MAX_ROWS = 256  # rows of A up to which the tiles outrun the sgemm (the module docstring)
LAUNCH = 2000.0  # one parallel launch, in the costs' flop units
IN_REGISTERS = (NONE, RELU, CLIP, GELU)  # the activations a tile applies before its store
_NO_BIAS = np.zeros(ROWS, np.float32)  # tile4x24's per-row bias (never read: bias is per column)
_ZERO = np.float32(0)


def pack_strips(b: np.ndarray, out: np.ndarray) -> None:
    """``b [K, N]`` into ``out [ceil(N/24), K, 24]``: column ``j`` of b at ``out[j // 24, :, j %
    24]``, zeros past N."""
    k, n = b.shape
    full = n // STRIP
    out[...] = 0
    out[:full] = b[:, :full * STRIP].reshape(k, full, STRIP).transpose(1, 0, 2)
    if n > full * STRIP:
        out[full, :, :n - full * STRIP] = b[:, full * STRIP:]


@njit(inline="always", **JIT)
def gelu8(x):  # type: ignore[no-untyped-def]
    """:func:`._common.gelu32` on eight lanes (its Horner steps as FMAs)."""
    v = vclamp(vmul(x, vsplat(np.float32(0.7071067811865476))), vsplat(np.float32(-4.0)),
               vsplat(np.float32(4.0)))
    z = vmul(v, v)
    p = vfma(vsplat(F6), z, vsplat(F5))
    for c in (F4, F3, F2, F1, F0):
        p = vfma(p, z, vsplat(c))
    q = vadd(z, vsplat(G5))
    for c in (G4, G3, G2, G1, G0):
        q = vfma(q, z, vsplat(c))
    half = vmul(vsplat(np.float32(0.5)), x)
    return vfma(half, vdiv(vmul(v, p), q), half)


@njit(inline="always", **JIT)
def _finish3(y, z, o, has_z, a0, a1, a2, act, lo, hi):
    """One row of a finished tile: ``act(a + z)`` (``z`` from ``o`` like y, when ``has_z``)
    stored into ``y`` from ``o``."""
    if has_z:
        a0, a1, a2 = vadd(a0, vload(z, o)), vadd(a1, vload(z, o + 8)), vadd(a2, vload(z, o + 16))
    if act == GELU:
        a0, a1, a2 = gelu8(a0), gelu8(a1), gelu8(a2)
    else:
        a0, a1, a2 = activate8(a0, act, lo, hi), activate8(a1, act, lo, hi), \
            activate8(a2, act, lo, hi)
    store3(y, o, a0, a1, a2)


@njit(inline="always", **JIT)
def _tile(af, ao, k, bf, so, yf, yo, n, bias, j0, zf, has_b, has_z, act, lo, hi):
    """``y[4 rows, 24 columns] = act(a[4 rows] @ strip + bias[j0:j0 + 24] + z)``: rows of A
    from ``ao`` (pitch K), the packed strip from ``so``, y (and z) from ``yo`` (pitch N); the
    accumulators start at the bias, the residual and the activation are applied in
    registers (``act`` one of ``IN_REGISTERS``)."""
    if has_b:
        b0, b1, b2 = vload(bias, j0), vload(bias, j0 + 8), vload(bias, j0 + 16)
    else:
        b0 = b1 = b2 = vsplat(_ZERO)
    a00, a01, a02 = b0, b1, b2
    a10, a11, a12 = b0, b1, b2
    a20, a21, a22 = b0, b1, b2
    a30, a31, a32 = b0, b1, b2
    for c in range(k):
        base = so + c * STRIP
        x0, x1, x2 = vload(bf, base), vload(bf, base + 8), vload(bf, base + 16)
        q = ao + c
        a00, a01, a02 = fma3(vbroadcast(af, q), x0, x1, x2, a00, a01, a02)
        a10, a11, a12 = fma3(vbroadcast(af, q + k), x0, x1, x2, a10, a11, a12)
        a20, a21, a22 = fma3(vbroadcast(af, q + 2 * k), x0, x1, x2, a20, a21, a22)
        a30, a31, a32 = fma3(vbroadcast(af, q + 3 * k), x0, x1, x2, a30, a31, a32)
    _finish3(yf, zf, yo, has_z, a00, a01, a02, act, lo, hi)
    _finish3(yf, zf, yo + n, has_z, a10, a11, a12, act, lo, hi)
    _finish3(yf, zf, yo + 2 * n, has_z, a20, a21, a22, act, lo, hi)
    _finish3(yf, zf, yo + 3 * n, has_z, a30, a31, a32, act, lo, hi)


@njit(inline="always", **JIT)
def _edge_tile(af, k, i0, rows, bf, so, yf, n, j0, width, buf):
    """The plain product of rows ``i0 .. i0 + rows - 1`` (``rows <= 4``) and columns ``j0 ..
    j0 + width - 1`` (``width <= 24``): A's rows copied into ``buf`` (zeros for the rows past
    them), the tile computed into the spare part of ``buf``, what lies inside y copied there."""
    for r in range(ROWS):
        for c in range(k):
            buf[r * k + c] = af[(i0 + r) * k + c] if r < rows else np.float32(0)
    spare = ROWS * k
    tile4x24(buf, 0, k, 1, bf, so, STRIP, buf, spare, STRIP, 0, k, _NO_BIAS, 0, False, NONE,
             _ZERO, _ZERO)
    for r in range(rows):
        for t in range(width):
            yf[(i0 + r) * n + j0 + t] = buf[spare + r * STRIP + t]


@njit(**JIT)  # called, not inlined: see _common (Inlining)
def _strip(af, bf, y, yf, z, zf, bias, k, n, r_all, s, b0, b1, buf, has_b, has_z, act, alpha,
           lo, hi):
    """Strip ``s`` of B over the blocks of rows ``b0 .. b1 - 1``, each tile with its epilogue:
    in registers for the activations of ``IN_REGISTERS``, for the others on the tile just
    stored (in L1); an edge tile's whole epilogue after it (:func:`.fused.epilogue_rows`)."""
    regs = act in IN_REGISTERS
    j0 = s * STRIP
    width = min(STRIP, n - j0)
    so = s * k * STRIP
    for blk in range(b0, b1):
        i0 = blk * ROWS
        rows = min(ROWS, r_all - i0)
        if rows == ROWS and width == STRIP:
            _tile(af, i0 * k, k, bf, so, yf, i0 * n + j0, n, bias, j0, zf, has_b, has_z,
                  act if regs else NONE, lo, hi)
            if not regs:
                epilogue_rows(y, bias, z, False, False, True, act, alpha, lo, hi, i0, i0 + rows,
                              j0, j0 + width)
        else:
            _edge_tile(af, k, i0, rows, bf, so, yf, n, j0, width, buf)
            epilogue_rows(y, bias, z, has_b, has_z, True, act, alpha, lo, hi, i0, i0 + rows, j0,
                          j0 + width)


@njit(**PJIT)
def matmul_packed(a, bp, y, bias, z, has_b, has_z, act, alpha, lo, hi, by_rows, scratch):
    """``y = act(a @ B + bias + z)``: ``a [R, K]``, ``y [R, N]`` C-contiguous float32, ``bp`` B
    packed by :func:`pack_strips`, ``bias`` one per column and ``z`` shaped like y where
    ``has_b`` / ``has_z`` (placeholders otherwise), ``act`` any activation code of
    :mod:`.fused`. ``scratch [parts, 4 K + 96]``: each worker's copy of a last block's rows and
    spare tile. ``by_rows``: each worker takes a share of the blocks of four rows and runs every
    strip over them; else a share of the strips over every block. See the module docstring."""
    r_all, k = a.shape
    n = y.shape[1]
    strips = (n + STRIP - 1) // STRIP
    blocks = (r_all + ROWS - 1) // ROWS
    parts = scratch.shape[0]
    af, bf, yf, zf = a.reshape(-1), bp.reshape(-1), y.reshape(-1), z.reshape(-1)
    chunk = max(1, CHUNK_BYTES // (ROWS * k * 4))  # blocks of A's rows held in L2 at a time
    for part in prange(parts):
        buf = scratch[part]
        b0, b1, s0, s1 = 0, blocks, 0, strips
        if by_rows:
            b0, b1 = part * blocks // parts, (part + 1) * blocks // parts
        else:
            s0, s1 = part * strips // parts, (part + 1) * strips // parts
        for c0 in range(b0, b1, chunk):
            for s in range(s0, s1):
                _strip(af, bf, y, yf, z, zf, bias, k, n, r_all, s, c0, min(b1, c0 + chunk),
                       buf, has_b, has_z, act, alpha, lo, hi)


def dense(x: np.ndarray) -> np.ndarray:
    """``x`` C-contiguous, as the compiled loop takes its operands: a copy only of a strided
    view (the executor's arena views never are; such calls are not bound, :class:`.Bound`)."""
    return np.ascontiguousarray(x)


def applies(spec: NodeSpec) -> bool:
    """B a constant 2-D float32 matrix, A of rank >= 1 with every size non-zero, on a CPU with
    AVX2 and FMA (:func:`.simd.native`)."""
    a, b = spec.inputs[0], spec.inputs[1]
    return (1 in spec.constants and b.rank == 2 and a.rank >= 1 and spec.inputs[0].numel() > 0
            and b.numel() > 0 and native())


def _rows(spec: NodeSpec) -> int:
    """R: A's rows with every batch axis folded in."""
    shape = [int(d) for d in spec.inputs[0].shape]
    return int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1


def cost(spec: NodeSpec) -> float:
    """``2 * R * N * K`` times ``FACTOR``, below the ``blas`` scheme's unit price (B is not
    packed on every call, the epilogue is applied in registers), for at most ``MAX_ROWS`` rows
    on CPUs where the tiles' 8 lanes are the FMA width; else times ``ABOVE_FACTOR`` (above
    ``blas``): for more rows a BLAS's full blocking wins, and on an Intel CPU with AVX-512 its
    16-lane FMAs do. Plus one launch. See the module docstring for the measurements."""
    from refmnn.backends.numba._blas import wide_fma_cpu

    k, n = (int(d) for d in spec.inputs[1].shape)
    rows = _rows(spec)
    factor = ABOVE_FACTOR if rows > MAX_ROWS or wide_fma_cpu() else FACTOR
    return 2.0 * rows * n * k * factor + LAUNCH


class MatMulPacked(BoundRun, Kernel):
    """packed_simd: B packed into a STATIC buffer once, each run one call of
    :func:`matmul_packed` bound to the run's arrays (:class:`.Bound`)."""

    def __init__(self, backend) -> None:  # type: ignore[no-untyped-def]
        self.backend = backend

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        b = np.asarray(spec.constants[1], np.float32)
        k, n = b.shape
        strips = -(-n // STRIP)
        self.buffer = self.backend.allocate(strips * k * STRIP * 4, Storage.STATIC)
        self.bp = self.buffer.handle[:strips * k * STRIP * 4].view(np.float32)
        pack_strips(b, self.bp.reshape(strips, k, STRIP))
        self.k, self.n, self.r = k, n, _rows(spec)
        self.epilogue = ep = Epilogue(spec, 2, 3)
        self.in_tile = ep.active and ep.per_column(spec)
        self.parts = numba.config.NUMBA_NUM_THREADS
        blocks = -(-self.r // ROWS)
        self.by_rows = blocks >= ROWS_PER_PART * self.parts
        self.row = ROWS * k + SPARE
        self.workspace_bytes = self.parts * self.row * 4
        self.bound = Bound()

    def after_calls(self, inputs, out):  # type: ignore[no-untyped-def]
        return None if self.in_tile else self.epilogue.after(inputs, out)

    def calls(self, inputs, out, workspace):  # type: ignore[no-untyped-def]
        """The one call of :func:`matmul_packed` for these arrays."""
        ep = self.epilogue
        y = out.reshape(self.r, self.n)
        bias = z = None
        if self.in_tile:
            bias = dense(inputs[2]).reshape(-1) if ep.bias_input is not None else None
            z = dense(inputs[3]).reshape(self.r, self.n) if ep.z_input is not None else None
        bias, z, has_b, has_z = ep.panel_args(bias, z, True)[:4]
        act = ep.act if self.in_tile else NONE  # else the product alone; run's pass follows
        args = (bias, z, has_b, has_z, act, ep.alpha, ep.lo, ep.hi)
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        scratch = raw.reshape(self.parts, self.row)
        a = dense(inputs[0]).reshape(self.r, self.k)
        return ((matmul_packed, (a, self.bp, y, *args, self.by_rows, scratch)),)
