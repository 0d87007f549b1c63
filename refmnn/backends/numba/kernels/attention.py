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
``prange`` launch; each part owns its slice of the workspace (scores, probabilities, row
maxima, exp's bits). Q, KT, V and Y are addressed by per-item element offsets and a row and a
column stride each, worked out in ``prepare`` from the arena tensors' shapes and the node's
``perm_*``: batch axes broadcast as in MatMul (stride 0), and the heads are read from and
written to [B, S, heads, D] in place when the graph pass has absorbed the Transposes around
attention (:func:`refmnn.schedule.attention.absorb_attention_transposes`; 2 threads, in-model,
interleaved: 18 of BERT-6's 24 head split/merge copies go, K's transposes stay, -0.33 ms of
Raster for +0.02-0.05 ms of attention; ViT-Tiny's 12 merges, -0.25 ms). The mask's broadcast
goes through per-item offsets and row/column strides (0 along a broadcast axis). Rounding: the
scale is the sgemm's alpha (one rounding where the reference rounds the product and then the
scaled value), and the softmax is the Softmax kernel's (about an ulp from NumPy's exp);
measured against the reference's rel L2 ~1e-7.

Scheme ``blas`` -- both products are sgemm calls from inside the parallel loop (NumPy's
OpenBLAS ``cblas_sgemm``, held at one thread while the backend runs: :mod:`.sgemm`). Applies
when that symbol is exported, no dimension is 0 and each operand has a unit stride where sgemm
needs one (Q's, V's and Y's last axis; either of KT's, K's rows being sgemm's transposed B).
ViT-Tiny's layer shape (3 heads, 197 x 64) at 2 threads: 250 us against 610 us for the unfused
MatMul, Mul, Softmax, MatMul kernels; BERT's (12 heads, 128 x 32) 277 against 730 us.
Cost ``2 * items * Sq * Sk * (D + Dv)`` plus the softmax's ``8 * items * Sq * Sk``.

Scheme ``loops`` -- the same jobs with both products as plain loop nests (``S[i, :] += Q[i, d]
* KT[d, :]``, ``Y[i, :] += P[i, j] * V[j, :]``, the inner loops contiguous and vectorised where
the strides allow, else indexed): no BLAS needed, any size (Sk = 0 gives zeros, D = 0 a uniform
softmax) and any strides. Cost: 3x ``blas``'s products.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit, prange

from refmnn.backends.base import Kernel, KernelDef, NodeSpec, Scheme
from refmnn.backends.numba.kernels import sgemm
from refmnn.backends.numba.kernels._common import (F32, JIT, PJIT, Bound, BoundRun, Call,
                                                  item_offsets, renamed)
from refmnn.backends.numba.kernels.activation import (exp_shifted, normalise_rows_serial,
                                                      row_maxes_serial)
from refmnn.ops.fused import DOMAIN as FUSED_DOMAIN
from refmnn.ops.raster import contiguous_strides

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
def _scores_loops(q, kt, s, qbase, kbase, m, sk, d, scale, st):
    """s[r, :] = scale * q[r, :] @ kt for the block's m rows: q's rows from element qbase
    (strides st[0], st[1]), kt from kbase (row stride st[2] along D, st[3] along Sk)."""
    q_rs, q_cs, kt_rs, kt_cs = st[0], st[1], st[2], st[3]
    for r in range(m):
        row = s[r * sk:(r + 1) * sk]
        for j in range(sk):
            row[j] = 0.0
        for k in range(d):
            c = q[qbase + r * q_rs + k * q_cs]
            kb = kbase + k * kt_rs
            if kt_cs == 1:
                krow = kt[kb:kb + sk]
                for j in range(sk):
                    row[j] += c * krow[j]
            else:
                for j in range(sk):
                    row[j] += c * kt[kb + j * kt_cs]
        for j in range(sk):
            row[j] *= scale


@njit(**JIT)
def _apply_loops(p, v, out, vbase, obase, m, sk, dv, st):
    """out[r, :] = p[r, :] @ v for the block's m rows: v from element vbase (strides st[4],
    st[5]), out's rows from obase (st[6], st[7]); each output sums over the keys in order."""
    v_rs, v_cs, o_rs, o_cs = st[4], st[5], st[6], st[7]
    for r in range(m):
        ob = obase + r * o_rs
        prow = p[r * sk:(r + 1) * sk]
        if v_cs == 1 and o_cs == 1:
            orow = out[ob:ob + dv]
            for c in range(dv):
                orow[c] = 0.0
            for j in range(sk):
                w = prow[j]
                vrow = v[vbase + j * v_rs:vbase + j * v_rs + dv]
                for c in range(dv):
                    orow[c] += w * vrow[c]
        else:
            for c in range(dv):
                acc = np.float32(0.0)
                for j in range(sk):
                    acc += prow[j] * v[vbase + j * v_rs + c * v_cs]
                out[ob + c * o_cs] = acc


@njit(**JIT)
def _scores_blas(q, kt, s, qbase, kbase, m, sk, d, scale, st):
    """As :func:`_scores_loops`, by one sgemm (alpha = scale); Q's columns and one of KT's
    axes have unit stride (KT with unit stride along D is K's rows: sgemm's transposed B)."""
    trans = sgemm.NO_TRANS if st[3] == 1 else sgemm.TRANS
    sgemm.cblas_sgemm(sgemm.ROW_MAJOR, sgemm.NO_TRANS, trans, m, sk, d, scale,
                      q.ctypes.data + 4 * qbase, st[0], kt.ctypes.data + 4 * kbase,
                      st[2] if st[3] == 1 else st[3], 0.0, s.ctypes.data, sk)


@njit(**JIT)
def _apply_blas(p, v, out, vbase, obase, m, sk, dv, st):
    """As :func:`_apply_loops`, by one sgemm (V's and out's columns of unit stride)."""
    sgemm.cblas_sgemm(sgemm.ROW_MAJOR, sgemm.NO_TRANS, sgemm.NO_TRANS, m, dv, sk, 1.0,
                      p.ctypes.data, sk, v.ctypes.data + 4 * vbase, st[4], 0.0,
                      out.ctypes.data + 4 * obase, st[6])


SCORES, APPLY = _scores_loops, _apply_loops  # the products :func:`_attend` calls (rebound below)


def _attend(q, kt, v, mask, out, qo, ko, vo, oo, mo, mr, mc, has_mask, sq, sk, d, dv, st,
            scale, rb, work, bits, parts):
    """Every job (item, block of rb query rows) of out = softmax(scale * q @ kt + mask) @ v:
    q, kt, v, mask, out flat float32; qo, ko, vo, oo, mo per-item element offsets; ``st`` the
    row and column strides of Q [Sq, D], KT [D, Sk], V [Sk, Dv] and Y [Sq, Dv] in elements
    (int64 [8]); ``work`` (flat float32, per part: scores and probabilities rb * sk each, row
    maxima rb) and ``bits`` (flat int32, sk per part) the parts' workspace. Every array is a
    flat C-contiguous one and each part slices its own: a 2-D workspace's rows would be typed
    as strided arrays, whose loops did not vectorise (the softmax then took 3x longer)."""
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
            SCORES(q, kt, s, qo[item] + i0 * st[0], ko[item], m, sk, d, scale, st)
            softmax_block(s, p, m, sk, mask, mo[item] + i0 * mr, mr, mc, has_mask, peaks,
                          exp_bits)
            APPLY(p, v, out, vo[item], oo[item] + i0 * st[6], m, sk, dv, st)


attend_loops = njit(**PJIT)(_attend)
attend_blas = njit(**PJIT)(renamed(_attend, "_blas", SCORES=_scores_blas, APPLY=_apply_blas))


def _layout(shape: tuple[int, ...], perm: Sequence[int]
            ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and element strides of ``Transpose(x, perm)`` viewed on C-contiguous ``x`` of
    ``shape`` (an empty perm: x itself)."""
    strides = contiguous_strides(shape)
    if not perm:
        return shape, tuple(strides)
    return tuple(shape[p] for p in perm), tuple(strides[p] for p in perm)


class FusedAttention(BoundRun, Kernel):
    def __init__(self, use_blas: bool) -> None:
        self.use_blas = use_blas

    def prepare(self, spec: NodeSpec) -> None:
        import numba

        if self.use_blas:
            from refmnn.backends.numba._blas import sgemm as blas

            sgemm.register(blas().address)
        q, kt, v, y = _operands(spec)
        batch = y[0][:-2]
        self.sq, self.d, self.sk, self.dv = q[0][-2], q[0][-1], kt[0][-1], v[0][-1]
        self.offsets = [item_offsets(*x, batch) for x in (q, kt, v, y)]
        self.strides = np.array([x[1][a] for x in (q, kt, v, y) for a in (-2, -1)], np.int64)
        items = int(np.prod(batch, dtype=np.int64))
        mask = spec.inputs[3] if len(spec.inputs) > 3 else None
        self.has_mask = mask is not None
        if self.has_mask:  # read as it is, broadcast axes at stride 0
            dims = (1,) * (2 - mask.rank) + tuple(int(d) for d in mask.shape)
            shape, strides = _layout(dims, ())
            self.offsets.append(item_offsets(shape, strides, batch))
            self.mr, self.mc = (0 if shape[a] == 1 else strides[a] for a in (-2, -1))
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
        self.bound = Bound()

    def calls(self, inputs, out, workspace) -> tuple[Call, ...]:  # type: ignore[no-untyped-def]
        """The one attention call (see :class:`.Bound`)."""
        raw = workspace.handle[:self.workspace_bytes]
        work, bits = raw[:4 * self.work].view(np.float32), raw[4 * self.work:].view(np.int32)
        q, kt, v = (x.reshape(-1) for x in inputs[:3])
        mask = inputs[3].reshape(-1) if self.has_mask else self._dummy
        qo, ko, vo, oo, mo = self.offsets
        attend = attend_blas if self.use_blas else attend_loops
        return ((attend, (q, kt, v, mask, out.reshape(-1), qo, ko, vo, oo, mo, self.mr, self.mc,
                          self.has_mask, self.sq, self.sk, self.d, self.dv, self.strides,
                          self.scale, self.rb, work, bits, self.parts)),)


def _operands(spec: NodeSpec) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(shape, element strides) of Q, KT, V and Y as the products see them: the inputs through
    their ``perm_*`` (views of the C-contiguous arena tensors), Y through the inverse of
    ``perm_y`` on the output."""
    a = spec.attrs
    found = [_layout(tuple(int(d) for d in t.shape), a.get(key) or ())
             for t, key in zip(spec.inputs[:3], ("perm_q", "perm_kt", "perm_v"), strict=True)]
    out = tuple(int(d) for d in spec.outputs[0].shape)
    perm_y = a.get("perm_y") or ()
    found.append(_layout(out, tuple(int(i) for i in np.argsort(perm_y)) if perm_y else ()))
    return found


def _dims(spec: NodeSpec) -> tuple[int, int, int, int, int]:
    """(items, Sq, Sk, D, Dv)."""
    q, kt, _, y = (shape for shape, _ in _operands(spec))
    return int(np.prod(y[:-2], dtype=np.int64)), q[-2], kt[-1], q[-1], y[-1]


def _cost(product_factor: float):
    def cost(spec: NodeSpec) -> float:
        items, sq, sk, d, dv = _dims(spec)
        return product_factor * 2.0 * items * sq * sk * (d + dv) + 8.0 * items * sq * sk + 3000.0
    return cost


def _applies(spec: NodeSpec) -> bool:
    return all(t is not None and t.rank >= 2 for t in spec.inputs[:3])


def _blas_applies(spec: NodeSpec) -> bool:
    """BLAS needs each head's matrices with a unit stride: Q's, V's and Y's along their last
    axis, KT's along either (K's rows are sgemm's transposed B)."""
    from refmnn.backends.numba._blas import sgemm as blas

    if not _applies(spec) or blas() is None or min(_dims(spec)[1:]) <= 0:
        return False
    (_, q), (_, kt), (_, v), (_, y) = _operands(spec)
    return q[-1] == 1 and 1 in kt[-2:] and v[-1] == 1 and y[-1] == 1


KERNELS = (
    KernelDef("FusedAttention", (
        Scheme("blas", lambda b, s: FusedAttention(True), applies=_blas_applies, cost=_cost(1.0),
               doc="per block of query rows: sgemm, masked softmax in cache, sgemm"),
        Scheme("loops", lambda b, s: FusedAttention(False), applies=_applies, cost=_cost(3.0),
               doc="per block of query rows: loop nests, masked softmax in cache"),
    ), domain=FUSED_DOMAIN, since=1, dtypes=F32),
)
