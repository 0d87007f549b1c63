"""``refmnn::FusedAttention``: softmax(scale * Q @ KT + mask) @ V, one block of query rows at a time.

Unfused, attention is two batched MatMuls around a scaling, a mask Add and a Softmax, each a
pass over the scores ``[..., Sq, Sk]`` in memory (ViT-Tiny: 3 x 197 x 197 floats per layer).
Here each job takes ``rb`` query rows of one batch item (one head) and runs the whole chain
while the block's scores, ``rb x Sk`` floats, stay in the core's cache:

1. ``S = scale * Q[rows] @ KT``  (sgemm, or the loop nest of the ``loops`` scheme);
2. ``S += mask[rows]``, then per row ``P = exp(S - max) / sum`` (:func:`softmax_block`: the
   Softmax kernel's vectorised max, Cephes exp and float64 row sum, :mod:`.activation`);
3. ``Y[rows] = P @ V``.

Jobs are ``items x ceil(Sq / rb)``, dealt round-robin to ``parts`` (the thread count) in one
``prange`` launch; each part owns its slice of the workspace (scores, probabilities, row maxima,
exp's bits). Batch axes broadcast as in MatMul through per-item element offsets computed in
``prepare``; the mask's through per-item offsets and row/column strides (0 along a broadcast
axis). Rounding: the scale is the sgemm's alpha (one rounding where the reference rounds the
product and then the scaled value), and the softmax is the Softmax kernel's (about an ulp from
NumPy's exp); measured against the reference's rel L2 ~1e-7.

Scheme ``blas`` -- both products are sgemm calls from inside the parallel loop (NumPy's OpenBLAS
``cblas_sgemm``, held at one thread while the backend runs: :mod:`.sgemm`). Applies when that
symbol is exported and no dimension is 0. ViT-Tiny's layer shape (3 heads, 197 x 64) at 2
threads: 250 us against 610 us for the unfused MatMul, Mul, Softmax, MatMul kernels; BERT's
(12 heads, 128 x 32) 277 against 730 us. Cost ``2 * items * Sq * Sk * (D + Dv)`` plus the
softmax's ``8 * items * Sq * Sk``.

Scheme ``loops`` -- the same jobs with both products as plain loop nests (``S[i, :] += Q[i, d]
* KT[d, :]``, ``Y[i, :] += P[i, j] * V[j, :]``, the inner loops contiguous and vectorised): no
BLAS needed, any size (Sk = 0 gives zeros, D = 0 a uniform softmax). Cost: 3x ``blas``'s
products.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels import sgemm
from refmnn.backends.numba.kernels._common import (F32, JIT, PARALLEL_LOCK, PJIT, batch_items,
                                                    renamed)
from refmnn.backends.numba.kernels.activation import (exp_shifted, normalise_rows_serial,
                                                      row_maxes_serial)
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN

ROWS = 32  # query rows per job; fewer when that leaves under 4 jobs per thread


@njit(**JIT)
def softmax_block(s, p, m, sk, mask, moff, mr, mc, has_mask, peaks, bits):
    """p[:m * sk] = softmax of each row of ``s`` (+ the mask rows from element ``moff``, row
    stride ``mr``, column stride ``mc``: 0 or 1)."""
    if has_mask:
        for r in range(m):
            row = s[r * sk:(r + 1) * sk]
            base = moff + r * mr
            if mc == 1:
                mrow = mask[base:base + sk]
                for j in range(sk):
                    row[j] += mrow[j]
            else:
                c = mask[base]
                for j in range(sk):
                    row[j] += c
    if sk == 0:
        return
    row_maxes_serial(s, m, sk, peaks)
    for r in range(m):
        exp_shifted(s[r * sk:(r + 1) * sk], peaks[r], p[r * sk:(r + 1) * sk], bits)
    normalise_rows_serial(p, m, sk)


@njit(**JIT)
def _scores_loops(q, kt, s, qbase, kbase, m, sk, d, scale):
    """s[r, :] = scale * q[r, :] @ kt for the block's m rows (q rows from element qbase)."""
    for r in range(m):
        row = s[r * sk:(r + 1) * sk]
        for j in range(sk):
            row[j] = 0.0
        qrow = q[qbase + r * d:qbase + (r + 1) * d]
        for k in range(d):
            c = qrow[k]
            krow = kt[kbase + k * sk:kbase + (k + 1) * sk]
            for j in range(sk):
                row[j] += c * krow[j]
        for j in range(sk):
            row[j] *= scale


@njit(**JIT)
def _apply_loops(p, v, out, vbase, obase, m, sk, dv):
    """out[r, :] = p[r, :] @ v for the block's m rows (out rows from element obase)."""
    for r in range(m):
        orow = out[obase + r * dv:obase + (r + 1) * dv]
        for c in range(dv):
            orow[c] = 0.0
        prow = p[r * sk:(r + 1) * sk]
        for j in range(sk):
            w = prow[j]
            vrow = v[vbase + j * dv:vbase + (j + 1) * dv]
            for c in range(dv):
                orow[c] += w * vrow[c]


@njit(**JIT)
def _scores_blas(q, kt, s, qbase, kbase, m, sk, d, scale):
    """As :func:`_scores_loops`, by one sgemm (alpha = scale)."""
    sgemm.cblas_sgemm(sgemm.ROW_MAJOR, sgemm.NO_TRANS, sgemm.NO_TRANS, m, sk, d, scale,
                      q.ctypes.data + 4 * qbase, d, kt.ctypes.data + 4 * kbase, sk, 0.0,
                      s.ctypes.data, sk)


@njit(**JIT)
def _apply_blas(p, v, out, vbase, obase, m, sk, dv):
    """As :func:`_apply_loops`, by one sgemm."""
    sgemm.cblas_sgemm(sgemm.ROW_MAJOR, sgemm.NO_TRANS, sgemm.NO_TRANS, m, dv, sk, 1.0,
                      p.ctypes.data, sk, v.ctypes.data + 4 * vbase, dv, 0.0,
                      out.ctypes.data + 4 * obase, dv)


SCORES, APPLY = _scores_loops, _apply_loops  # the products :func:`_attend` calls (rebound below)


def _attend(q, kt, v, mask, out, qo, ko, vo, mo, mr, mc, has_mask, sq, sk, d, dv, scale, rb,
            work, bits, parts):
    """Every job (item, block of rb query rows) of out = softmax(scale * q @ kt + mask) @ v:
    q, kt, v, mask, out flat float32; qo, ko, vo, mo per-item element offsets; ``work`` (flat
    float32, per part: scores and probabilities rb * sk each, row maxima rb) and ``bits``
    (flat int32, sk per part) the parts' workspace. Every array is a flat C-contiguous one
    and each part slices its own: a 2-D workspace's rows would be typed as strided arrays, whose
    loops did not vectorise (the softmax then took 3x longer)."""
    blocks = (sq + rb - 1) // rb
    jobs = qo.shape[0] * blocks
    per = 2 * rb * sk + rb
    for part in prange(parts):
        base = part * per
        s = work[base:base + rb * sk]
        p = work[base + rb * sk:base + 2 * rb * sk]
        peaks = work[base + 2 * rb * sk:base + per]
        exp_bits = bits[part * sk:(part + 1) * sk]
        for job in range(part, jobs, parts):
            item = job // blocks
            i0 = (job % blocks) * rb
            m = min(rb, sq - i0)
            SCORES(q, kt, s, qo[item] + i0 * d, ko[item], m, sk, d, scale)
            softmax_block(s, p, m, sk, mask, mo[item] + i0 * mr, mr, mc, has_mask, peaks,
                          exp_bits)
            APPLY(p, v, out, vo[item], (item * sq + i0) * dv, m, sk, dv)


attend_loops = njit(**PJIT)(_attend)
attend_blas = njit(**PJIT)(renamed(_attend, "_blas", SCORES=_scores_blas, APPLY=_apply_blas))


class FusedAttention(Kernel):
    def __init__(self, use_blas: bool) -> None:
        self.use_blas = use_blas

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        if self.use_blas:
            from refmnn.backends.numba._blas import openblas

            sgemm.register(openblas().sgemm64)
        q, kt, v = (tuple(int(d) for d in t.shape) for t in spec.inputs[:3])
        out = tuple(int(d) for d in spec.outputs[0].shape)
        batch = out[:-2]
        self.sq, self.d, self.sk, self.dv = q[-2], q[-1], kt[-1], v[-1]
        # element offset of each batch item's matrix in each operand
        self.offsets = [batch_items(x, batch) * (x[-2] * x[-1]) for x in (q, kt, v)]
        items = int(np.prod(batch, dtype=np.int64))
        mask = spec.inputs[3] if len(spec.inputs) > 3 else None
        self.has_mask = mask is not None
        if self.has_mask:
            shape = (1,) * (2 - mask.rank) + tuple(int(d) for d in mask.shape)
            self.offsets.append(batch_items(shape, batch) * (shape[-2] * shape[-1]))
            self.mr = 0 if shape[-2] == 1 else shape[-1]
            self.mc = 0 if shape[-1] == 1 else 1
        else:
            self.offsets.append(np.zeros(max(items, 1), np.int64))
            self.mr = self.mc = 0
        self.parts = numba.config.NUMBA_NUM_THREADS
        rb = ROWS
        while rb > 8 and items * -(-self.sq // rb) < 4 * self.parts:
            rb //= 2
        self.rb = rb
        self.work = self.parts * (2 * rb * self.sk + rb)  # floats, then int32 bits
        self.workspace_bytes = 4 * (self.work + self.parts * self.sk)
        self.scale = np.float32(spec.attrs["scale"])
        self._dummy = np.zeros(1, np.float32)

    def run(self, inputs, outputs, workspace):
        raw = workspace.handle[:self.workspace_bytes]
        work, bits = raw[:4 * self.work].view(np.float32), raw[4 * self.work:].view(np.int32)
        q, kt, v = (x.reshape(-1) for x in inputs[:3])
        mask = inputs[3].reshape(-1) if self.has_mask else self._dummy
        qo, ko, vo, mo = self.offsets
        attend = attend_blas if self.use_blas else attend_loops
        with PARALLEL_LOCK:
            attend(q, kt, v, mask, outputs[0].reshape(-1), qo, ko, vo, mo, self.mr, self.mc,
                   self.has_mask, self.sq, self.sk, self.d, self.dv, self.scale, self.rb,
                   work, bits, self.parts)


def _dims(spec: NodeSpec) -> tuple[int, int, int, int, int]:
    """(items, Sq, Sk, D, Dv)."""
    out = [int(d) for d in spec.outputs[0].shape]
    q, kt = ([int(d) for d in t.shape] for t in spec.inputs[:2])
    return int(np.prod(out[:-2], dtype=np.int64)), q[-2], kt[-1], q[-1], out[-1]


def _cost(product_factor: float):
    def cost(spec: NodeSpec) -> float:
        items, sq, sk, d, dv = _dims(spec)
        return product_factor * 2.0 * items * sq * sk * (d + dv) + 8.0 * items * sq * sk + 3000.0
    return cost


def _applies(spec: NodeSpec) -> bool:
    return all(t is not None and t.rank >= 2 for t in spec.inputs[:3])


def _blas_applies(spec: NodeSpec) -> bool:
    from refmnn.backends.numba._blas import openblas

    return _applies(spec) and openblas().sgemm64 is not None and min(_dims(spec)[1:]) > 0


KERNELS = (
    KernelDef("FusedAttention", (
        Scheme("blas", lambda b, s: FusedAttention(True), applies=_blas_applies, cost=_cost(1.0),
               doc="per block of query rows: sgemm, masked softmax in cache, sgemm"),
        Scheme("loops", lambda b, s: FusedAttention(False), applies=_applies, cost=_cost(3.0),
               doc="per block of query rows: loop nests, masked softmax in cache"),
    ), domain=FUSED_DOMAIN, since=1, dtypes=F32),
)
