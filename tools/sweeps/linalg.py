"""Gemm (transposes, alpha/beta, every broadcastable C), MatMul (1-D operands, batch
broadcasting over ranks 1-4), MatMulInteger (zero points per tensor, row and column), Einsum
(random equations: diagonals, traces, ellipses, implicit outputs) and Det."""

from __future__ import annotations

import string

import numpy as np

from refmnn.dtypes import DType

from ._sweep import SMALL_INT, UNIT, Sample, SampleContext, Sweep, Tol


def _domain(ctx: SampleContext):
    """Floats uniform in [-1, 1] (sums stay O(1)); integers small, so products never wrap."""
    return UNIT if ctx.is_float else SMALL_INT


def draw_gemm(ctx: SampleContext, opset: int) -> Sample:
    """A random Gemm: M, K, N in 1-6 (M or N 0 now and then), each of transA / transB set or
    left out, alpha and beta from a few values (0 included, left out for the default 1), C of
    any shape unidirectionally broadcastable to [M, N] (scalar, [N], [1, N], [M, 1], [1, 1],
    [M, N]), or omitted from opset 11."""
    rng = ctx.rng
    m, k, n = (int(v) for v in rng.integers(1, 7, 3))
    if rng.random() < 0.08:
        m, n = (0, n) if rng.random() < 0.5 else (m, 0)
    attrs: dict[str, object] = {}
    trans_a, trans_b = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    if trans_a or rng.random() < 0.3:
        attrs["transA"] = trans_a
    if trans_b or rng.random() < 0.3:
        attrs["transB"] = trans_b
    for name in ("alpha", "beta"):
        if rng.random() < 0.6:
            attrs[name] = float(rng.choice([0.0, 1.0, -1.0, 0.5, 2.0, -0.75]))
    dom = _domain(ctx)
    a = ctx.make((k, m) if trans_a else (m, k), dom)
    b = ctx.make((n, k) if trans_b else (k, n), dom)
    shapes = [(), (1,), (n,), (1, n), (m, 1), (1, 1), (m, n)]
    if opset >= 11 and rng.random() < 0.2:
        return Sample((a, b), attrs)
    c = ctx.make(shapes[int(rng.integers(0, len(shapes)))], dom)
    return Sample((a, b, c), attrs)


def _batch_pair(rng: np.random.Generator, rank_a: int, rank_b: int
                ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Batch dims of two operands (their ranks minus the matrix dims) that broadcast: the
    shorter aligned at the end, each pair equal or one of them 1."""
    full = [int(d) for d in rng.integers(1, 4, max(rank_a, rank_b))]

    def side(rank: int) -> tuple[int, ...]:
        dims = full[len(full) - rank:]
        return tuple(1 if rng.random() < 0.3 else d for d in dims)

    return side(rank_a), side(rank_b)


def draw_matmul(ctx: SampleContext, opset: int) -> Sample:
    """A random MatMul: each operand of rank 1-4 (a 1-D A is a row, a 1-D B a column), batch
    dims broadcasting (size-1 dims on either side, ranks unequal), M, K, N in 1-5 (0 now
    and then)."""
    rng = ctx.rng
    rank_a, rank_b = (int(v) for v in rng.integers(1, 5, 2))
    m, k, n = (int(v) for v in rng.integers(1, 6, 3))
    if rng.random() < 0.06:
        m, k, n = [0 if i == int(rng.integers(0, 3)) else d for i, d in enumerate((m, k, n))]
    batch_a, batch_b = _batch_pair(rng, max(rank_a - 2, 0), max(rank_b - 2, 0))
    shape_a = (k,) if rank_a == 1 else (*batch_a, m, k)
    shape_b = (k,) if rank_b == 1 else (*batch_b, k, n)
    dom = _domain(ctx)
    return Sample((ctx.make(shape_a, dom), ctx.make(shape_b, dom)))


def draw_matmul_integer(ctx: SampleContext, opset: int) -> Sample:
    """A random MatMulInteger: A and B int8 or uint8 independently, of ranks 1-4 with
    broadcasting batch dims (as MatMul), full-range codes; a_zero_point left out, a scalar, or
    per row ([M] for a 2-D A, [..., M, 1] for a batched one); b_zero_point left out, a scalar,
    or per column ([N] for a 2-D B, [..., 1, N] for a batched one)."""
    rng = ctx.rng
    rank_a, rank_b = (int(v) for v in rng.integers(1, 5, 2))
    m, k, n = (int(v) for v in rng.integers(1, 6, 3))
    batch_a, batch_b = _batch_pair(rng, max(rank_a - 2, 0), max(rank_b - 2, 0))
    shape_a = (k,) if rank_a == 1 else (*batch_a, m, k)
    shape_b = (k,) if rank_b == 1 else (*batch_b, k, n)
    type_a, type_b = (np.dtype(rng.choice(["int8", "uint8"])) for _ in range(2))

    def codes(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        info = np.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)

    a, b = codes(shape_a, type_a), codes(shape_b, type_b)
    zp_a = zp_b = None
    pick = rng.random()
    if pick < 0.35:
        zp_a = codes((), type_a) if rng.random() < 0.7 else codes((1,), type_a)
    elif pick < 0.7 and rank_a >= 2:
        zp_a = codes((m,) if rank_a == 2 else (*batch_a, m, 1), type_a)
    pick = rng.random()
    if pick < 0.35:
        zp_b = codes((), type_b) if rng.random() < 0.7 else codes((1,), type_b)
    elif pick < 0.7 and rank_b >= 2:
        zp_b = codes((n,) if rank_b == 2 else (*batch_b, 1, n), type_b)
    inputs = [a, b, zp_a, zp_b]
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs))


def known_matmul_integer(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference subtracts a 1-D a_zero_point from A as NumPy broadcasts it, along A's
    last axis (per column); the spec: "If the input is 2D of shape [M, K] then zero point
    tensor may be an M element vector [zp_1, zp_2, ..., zp_M]" (per row)."""
    a, zp_a = sample.inputs[0], sample.inputs[2] if len(sample.inputs) > 2 else None
    if peer == "onnx.reference" and zp_a is not None and zp_a.ndim == 1 and zp_a.size > 1 \
            and a.ndim == 2:
        return ("onnx.reference 1.23.2 applies a per-row (M-vector) a_zero_point along A's "
                "columns; the spec makes an M-element vector one zero point per row of A")
    return None


_LABELS = string.ascii_lowercase[:8] + "XYZ"


def draw_einsum(ctx: SampleContext, opset: int) -> Sample:
    """A random Einsum of 1-3 operands: labels (lower and upper case) of sizes 1-4 drawn into
    each term, a label sometimes repeated within a term (a diagonal; in one operand alone and
    summed, a trace); an ellipsis of one rank in every term or none, its dims broadcasting
    (size 1 on some operands); an implicit output (no "->") or an explicit one that keeps a
    random subset of the labels in random order, the ellipsis kept. Spaces now and then."""
    rng = ctx.rng
    count = int(rng.integers(1, 4))
    pool = list(rng.choice(list(_LABELS), int(rng.integers(1, 6)), replace=False))
    sizes = {label: int(rng.integers(1, 5)) for label in pool}
    ellipsis = rng.random() < 0.35
    ell_dims = [int(d) for d in rng.integers(1, 4, int(rng.integers(0, 3)))] if ellipsis else []
    terms, operands = [], []
    for _ in range(count):
        labels = [str(c) for c in rng.choice(pool, int(rng.integers(0, min(4, len(pool)) + 1)),
                                               replace=False)]
        if labels and rng.random() < 0.25:  # a repeated label: a diagonal
            labels.insert(int(rng.integers(0, len(labels) + 1)), str(rng.choice(labels)))
        shape = [sizes[c] for c in labels]
        term = "".join(labels)
        if ellipsis:
            at = int(rng.integers(0, len(labels) + 1))
            term = term[:at] + "..." + term[at:]
            mine = [1 if rng.random() < 0.3 else d for d in ell_dims]
            shape = shape[:at] + mine + shape[at:]
        terms.append(term)
        operands.append(ctx.make(tuple(shape), _domain(ctx)))
    used = sorted({c for t in terms for c in t if c != "."})
    if rng.random() < 0.35:
        equation = ",".join(terms)
    else:
        out = [str(c) for c in rng.permutation(used)[:int(rng.integers(0, len(used) + 1))]]
        if ellipsis:
            out.insert(int(rng.integers(0, len(out) + 1)), "...")
        equation = ",".join(terms) + "->" + "".join(out)
    if rng.random() < 0.15:
        equation = equation.replace(",", " , ").replace("->", " -> ")
    return Sample(tuple(operands), {"equation": equation})


def draw_det(ctx: SampleContext, opset: int) -> Sample:
    """A random Det: [*, M, M] with 0-2 batch dims of 1-3 and M in 1-4; a singular matrix
    (a repeated row) now and then."""
    rng = ctx.rng
    m = int(rng.integers(1, 5))
    batch = tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(0, 3))))
    x = ctx.make((*batch, m, m), UNIT)
    if m >= 2 and rng.random() < 0.15:
        x[..., 1, :] = x[..., 0, :]
    return Sample((x,))


_SUM_TOL = {
    DType.float32: Tol(1e-5, 1e-5, "a sum of up to ~100 products of values in [-1, 1], in an "
                                   "order each engine picks: cancellation near zero"),
    DType.float16: Tol(4e-3, 4e-3, "a sum of products in float16 (onnxruntime may round "
                                   "partial sums to half precision); cancellation near zero"),
}
_DET_TOL = {
    DType.float32: Tol(1e-5, 1e-5, "an LU factorisation: cancellation over M pivots"),
}


SWEEPS = (
    Sweep("Gemm", (7, 9, 11, 13), draw_gemm, dtypes=(DType.float32, DType.float64),
          tolerance=_SUM_TOL),
    Sweep("MatMul", (1,), draw_matmul, dtypes=(DType.float32, DType.float64),
          tolerance=_SUM_TOL),
    Sweep("MatMul", (9, 13), draw_matmul,
          dtypes=(DType.float32, DType.float64, DType.int32, DType.int64), tolerance=_SUM_TOL),
    Sweep("MatMulInteger", (10,), draw_matmul_integer, dtypes=(DType.uint8,),
          known=known_matmul_integer),
    Sweep("Einsum", (12,), draw_einsum,
          dtypes=(DType.float32, DType.float64, DType.int32, DType.int64), tolerance=_SUM_TOL),
    Sweep("Det", (11, 22), draw_det, dtypes=(DType.float32, DType.float64), tolerance=_DET_TOL),
)
