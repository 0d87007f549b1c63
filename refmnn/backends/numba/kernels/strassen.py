"""Strassen's algorithm as a MatMul scheme: fewer multiplications for large products.

Scheme ``strassen`` of MatMul / ``refmnn::FusedMatMul`` -- 2-D ``A [M, K] @ B [K, N]`` with M,
K and N large and divisible by ``2^L``. One level splits each operand into 2x2 blocks and
forms the product from **7** block products instead of 8 (Strassen, 1969)::

    M1 = (A11 + A22)(B11 + B22)        C11 = M1 + M4 - M5 + M7
    M2 = (A21 + A22) B11               C12 = M3 + M5
    M3 = A11 (B12 - B22)               C21 = M2 + M4
    M4 = A22 (B21 - B11)               C22 = M1 - M2 + M3 + M6
    M5 = (A11 + A12) B22
    M6 = (A21 - A11)(B11 + B12)
    M7 = (A12 - A22)(B21 + B22)

``L`` levels recurse into the seven products, and the leaves are the backend's BLAS sgemm
(:mod:`refmnn.backends.numba._blas`). Each level trades 1/8 of the multiply-adds for 18 block
additions (10 to form the operands, 8 to combine the products), which are memory passes: the
scheme pays only when the products are large enough that a memory pass is cheap next to the
flops it saves. Its rounding error is larger than a plain GEMM's (each level adds and then
cancels partial products): about 1e-6 relative (L2) per level on standard-normal float32
operands at 1024-4096 (a classic GEMM: ~3e-7), which is why it is a scheme the cost model must
choose, never a silent replacement.

Operands with an infinity or a NaN: block sums spread it (an infinite A11 reaches C22 through
M1 and M6, where inf - inf is NaN), so when the result holds any non-finite value -- which such
an operand always leaves -- the kernel makes the plain BLAS product instead; finite operands pay
one pass over the result (its sum).

Temporaries: per level one ``[M/2, K/2]`` operand sum, one ``[K/2, N/2]`` and one ``[M/2, N/2]``
product, carved from the kernel's WORKSPACE in ``prepare``; nothing is allocated in ``run``.

Cost (flop units, the BLAS scheme's ``2*M*N*K`` at unit price)::

    2*M*N*K * (7/8)^L  +  sum over levels l < L of 7^l * ADD * 18 * (block size at level l)

with ``ADD`` the price of one element of a block addition relative to one flop of BLAS
(:data:`ADD`), and ``L`` the cheapest depth among those whose leaves stay at least :data:`LEAF`
on every side (the scheme applies when one level fits). At the zoo's shapes (at most
128 x 1536 x 384) it never applies.
"""

from __future__ import annotations

import numpy as np

from refmnn.backends.base import Kernel, NodeSpec, Scheme
from refmnn.backends.numba.kernels.fused import Epilogue, epilogue_ok

LEAF = 512
"""Smallest side of a leaf product: below it BLAS's own blocking beats one more level."""
MAX_LEVELS = 3
ADD = 120.0
"""Price of one element of a block addition in BLAS flop units: it reads two floats and writes
one (12 bytes, ~1.2 ns at ~10 GB/s) while BLAS does a flop in ~0.01 ns (~100 GFLOP/s)."""


def _mnk(spec: NodeSpec) -> tuple[int, int, int]:
    (m, k), (_, n) = (tuple(int(d) for d in t.shape) for t in spec.inputs[:2])
    return m, n, k


def levels_that_fit(m: int, n: int, k: int) -> int:
    """How many levels of Strassen fit: halving keeps every side even and >= LEAF."""
    depth = 0
    while depth < MAX_LEVELS and all(d % 2 == 0 and d // 2 >= LEAF for d in (m, n, k)):
        m, n, k, depth = m // 2, n // 2, k // 2, depth + 1
    return depth


def cost_at(m: int, n: int, k: int, depth: int) -> float:
    """The cost formula of the module docstring for ``depth`` levels."""
    total = 2.0 * m * n * k * (7 / 8) ** depth
    for level in range(depth):
        h = 2 ** (level + 1)
        block = (m * k + k * n + m * n) / (h * h)  # one block of each operand and of C
        total += 7 ** level * ADD * 6 * block  # 18 additions: ~6 per operand/result block
    return total + 50000.0


def levels(m: int, n: int, k: int) -> int:
    """The cheapest number of levels (>= 1) among those that fit; 0 when none fits."""
    fit = levels_that_fit(m, n, k)
    return min(range(1, fit + 1), key=lambda d: cost_at(m, n, k, d), default=0)


def applies(spec: NodeSpec) -> bool:
    a, b = spec.inputs[:2]
    return (a.rank == 2 and b.rank == 2 and spec.outputs[0].rank == 2
            and levels_that_fit(*_mnk(spec)) > 0)


def cost(spec: NodeSpec) -> float:
    m, n, k = _mnk(spec)
    return cost_at(m, n, k, levels(m, n, k))


class StrassenMatMul(Kernel):
    def __init__(self, backend) -> None:  # type: ignore[no-untyped-def]
        self.backend = backend

    def prepare(self, spec: NodeSpec) -> None:
        m, n, k = _mnk(spec)
        self.depth = levels(m, n, k)
        self.epilogue = Epilogue(spec, 2, 3)  # FusedMatMul's bias and residual
        self.layout = []  # per level: (h, kh, nh) of the blocks
        for _ in range(self.depth):
            m, n, k = m // 2, n // 2, k // 2
            self.layout.append((m, k, n))
        self.workspace_bytes = 4 * sum(h * kh + kh * nh + h * nh for h, kh, nh in self.layout)

    def run(self, inputs, outputs, workspace):
        raw = workspace.handle[:self.workspace_bytes].view(np.float32)
        temps, start = [], 0
        for h, kh, nh in self.layout:
            sizes = (h * kh, kh * nh, h * nh)
            views = []
            for size, shape in zip(sizes, ((h, kh), (kh, nh), (h, nh)), strict=True):
                views.append(raw[start:start + size].reshape(shape))
                start += size
            temps.append(tuple(views))
        self._product(inputs[0], inputs[1], outputs[0], temps)
        if not np.isfinite(np.add.reduce(outputs[0], axis=None)):
            # Strassen adds and subtracts blocks of A and B before multiplying them, so one
            # infinite or NaN element spreads to outputs whose own products never meet it
            # (M1 - M2 + ...: inf - inf = NaN); such an operand always leaves some output
            # infinite or NaN, and then the plain product, whose NaN and infinities are where
            # the reference puts them, is made instead (also where finite outputs' sum overflows)
            self.backend.gemm(inputs[0], inputs[1], outputs[0])
        self.epilogue(inputs, outputs[0])

    def _product(self, a, b, out, temps) -> None:  # type: ignore[no-untyped-def]
        """out = a @ b with len(temps) levels of Strassen; BLAS at the leaves."""
        if not temps:
            self.backend.gemm(a, b, out)
            return
        (sa, sb, p), rest = temps[0], temps[1:]
        h, kh = sa.shape
        nh = sb.shape[1]
        a11, a12, a21, a22 = a[:h, :kh], a[:h, kh:], a[h:, :kh], a[h:, kh:]
        b11, b12, b21, b22 = b[:kh, :nh], b[:kh, nh:], b[kh:, :nh], b[kh:, nh:]
        c11, c12, c21, c22 = out[:h, :nh], out[:h, nh:], out[h:, :nh], out[h:, nh:]
        mul = self._product
        np.add(a11, a22, out=sa)                     # M1 = (A11 + A22)(B11 + B22)
        np.add(b11, b22, out=sb)
        mul(sa, sb, p, rest)
        c11[...] = p
        c22[...] = p
        np.add(a21, a22, out=sa)                     # M2 = (A21 + A22) B11
        mul(sa, b11, p, rest)
        c21[...] = p
        c22 -= p
        np.subtract(b12, b22, out=sb)                # M3 = A11 (B12 - B22)
        mul(a11, sb, p, rest)
        c12[...] = p
        c22 += p
        np.subtract(b21, b11, out=sb)                # M4 = A22 (B21 - B11)
        mul(a22, sb, p, rest)
        c11 += p
        c21 += p
        np.add(a11, a12, out=sa)                     # M5 = (A11 + A12) B22
        mul(sa, b22, p, rest)
        c11 -= p
        c12 += p
        np.subtract(a21, a11, out=sa)                # M6 = (A21 - A11)(B11 + B12)
        np.add(b11, b12, out=sb)
        mul(sa, sb, p, rest)
        c22 += p
        np.subtract(a12, a22, out=sa)                # M7 = (A12 - A22)(B21 + B22)
        np.add(b21, b22, out=sb)
        mul(sa, sb, p, rest)
        c11 += p


def scheme(fused: bool) -> Scheme:
    ok = (lambda spec: applies(spec) and epilogue_ok(spec, 3, 2)) if fused else applies
    return Scheme("strassen", lambda b, s: StrassenMatMul(b), applies=ok, cost=cost,
                  doc="2-D, large: 7 block products per level, BLAS at the leaves")
