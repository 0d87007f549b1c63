"""Linear algebra: MatMul, Gemm, MatMulInteger, Einsum, Det.

float32/float64 products go straight to ``np.matmul`` (BLAS) in their own dtype; float16 and
bfloat16 multiply in float32 and round once; integer products accumulate in the integer dtype
and wrap on overflow.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import Dim, TensorType
from refmnn.ops._infer import broadcast_dims, dtype_of, shape_of
from refmnn.ops._reduction_util import to_work, work_dtype
from refmnn.ops._schema import Attr, InferContext, flag, into, op

# --- MatMul ---------------------------------------------------------------------------------


def _matmul_shape(ctx: InferContext, a: tuple[Dim, ...] | None, b: tuple[Dim, ...] | None
                  ) -> tuple[Dim, ...] | None:
    """numpy.matmul's shape rule: 1-D operands get a 1 prepended (A) / appended (B) that is
    removed from the result; leading (batch) dims broadcast."""
    if a is None or b is None:
        return None
    if not a or not b:
        ctx.fail("MatMul operands must have rank >= 1")
    a2 = a if len(a) > 1 else (1, *a)
    b2 = b if len(b) > 1 else (*b, 1)
    if isinstance(a2[-1], int) and isinstance(b2[-2], int) and a2[-1] != b2[-2]:
        ctx.fail(f"inner dimensions differ: {list(a)} @ {list(b)}")
    batch = broadcast_dims(ctx, a2[:-2], b2[:-2])
    if batch is None:
        return None
    return (*batch, *(a2[-2:-1] if len(a) > 1 else ()), *(b2[-1:] if len(b) > 1 else ()))


def _matmul_rule(ctx: InferContext, a: TensorType | None, b: TensorType | None) -> TensorType:
    return TensorType(dtype_of(a), _matmul_shape(ctx, shape_of(a), shape_of(b)))


def _matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    if a.dtype == b.dtype and a.dtype in (np.float32, np.float64):
        if out is not None and min(a.ndim, b.ndim) >= 2:  # into the planned buffer if it fits
            shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
            return np.matmul(a, b, out=into(out, shape, a.dtype))
        return np.matmul(a, b)
    return np.matmul(to_work(a), to_work(b)).astype(a.dtype, copy=False)


@op("MatMul", since=1, inputs=("A", "B"), outputs=("Y",), infer=_matmul_rule)
def matmul(A: np.ndarray, B: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
    """Y = A @ B with numpy.matmul semantics (opset 1, 9 and 13 differ only in dtypes).

    A: [..., M, K] or [K]; B: [..., K, N] or [K]. A 1-D A is treated as [1, K] and a 1-D B
    as [K, 1]; the added axis is removed from Y. Batch dims broadcast. Y has A's dtype;
    float16/bfloat16 multiply in float32 and round once; integers wrap on overflow.
    """
    return _matmul(A, B, out)


# --- Gemm -----------------------------------------------------------------------------------


def _gemm_rule(ctx: InferContext, a: TensorType | None, b: TensorType | None,
               c: TensorType | None = None, *, transA: int, transB: int, **_: object) -> TensorType:
    sa, sb = shape_of(a), shape_of(b)
    m: Dim = None
    n: Dim = None
    if sa is not None:
        if len(sa) != 2:
            ctx.fail(f"Gemm's A must be 2-D, got {list(sa)}")
        m = sa[1] if transA else sa[0]
    if sb is not None:
        if len(sb) != 2:
            ctx.fail(f"Gemm's B must be 2-D, got {list(sb)}")
        n = sb[0] if transB else sb[1]
    if sa is not None and sb is not None:
        ka, kb = (sa[0] if transA else sa[1]), (sb[1] if transB else sb[0])
        if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
            ctx.fail(f"Gemm inner dimensions differ: {ka} vs {kb}")
    return TensorType(dtype_of(a), (m, n))


def _times(y: np.ndarray, factor: float) -> np.ndarray:
    """y * factor in y's dtype (a non-integral factor on integers computes in float64)."""
    if factor == 1.0:
        return y
    if y.dtype.kind in "iu" and factor != int(factor):
        return y * factor
    return y * y.dtype.type(factor)


def _gemm(A: np.ndarray, B: np.ndarray, C: np.ndarray | None, alpha: float, beta: float,
          transA: int, transB: int) -> np.ndarray:
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"Gemm takes 2-D A and B, got {A.shape} and {B.shape}")
    a = A.T if transA else A
    b = B.T if transB else B
    with np.errstate(over="ignore"):
        y = _times(np.matmul(to_work(a), to_work(b)), alpha)
        if C is not None and beta != 0.0:
            c = np.broadcast_to(to_work(C), y.shape)   # unidirectional: C -> (M, N)
            y = y + _times(c, beta)
    return y.astype(A.dtype, copy=False)


_GEMM_ATTRS = (
    Attr("alpha", "float", 1.0, "multiplier of A' @ B'"),
    Attr("beta", "float", 1.0, "multiplier of C"),
    flag("transA", 0, "transpose A first"),
    flag("transB", 0, "transpose B first"),
)


@op("Gemm", since=1, inputs=("A", "B", "C"), outputs=("Y",), infer=_gemm_rule,
    attrs=(*_GEMM_ATTRS, flag("broadcast", 0, "whether C is broadcast to (M, N)")))
def gemm_1(A: np.ndarray, B: np.ndarray, C: np.ndarray, *, alpha: float, beta: float,
           transA: int, transB: int, broadcast: int) -> np.ndarray:
    """Gemm-1/6: Y = alpha * A' @ B' + beta * C, A' = A.T if transA, B' = B.T if transB.

    A: [M, K] ([K, M] if transA); B: [K, N] ([N, K] if transB); C: [M, N], or (broadcast=1)
    any shape broadcastable to [M, N]. This reference broadcasts C in both cases. Y: [M, N]
    in A's dtype. With beta == 0 the C term is skipped (inf/NaN in C do not leak into Y).
    """
    return _gemm(A, B, C, alpha, beta, transA, transB)


@op("Gemm", since=7, inputs=("A", "B", "C"), outputs=("Y",), infer=_gemm_rule, attrs=_GEMM_ATTRS)
def gemm_7(A: np.ndarray, B: np.ndarray, C: np.ndarray, *, alpha: float, beta: float,
           transA: int, transB: int) -> np.ndarray:
    """Gemm-7/9: Y = alpha * A' @ B' + beta * C with C unidirectionally broadcast to [M, N]
    (no ``broadcast`` attribute any more). A: [M, K]/[K, M]; B: [K, N]/[N, K]. Y in A's dtype;
    beta == 0 skips C; float16/bfloat16 compute in float32; integers (opset 9+) wrap."""
    return _gemm(A, B, C, alpha, beta, transA, transB)


@op("Gemm", since=11, inputs=("A", "B", "C?"), outputs=("Y",), infer=_gemm_rule,
    attrs=_GEMM_ATTRS)
def gemm_11(A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *, alpha: float,
            beta: float, transA: int, transB: int) -> np.ndarray:
    """Gemm-11/13: as Gemm-7, but C is optional (absent means 0).

    Y = alpha * A' @ B' (+ beta * C). A: [M, K] ([K, M] if transA); B: [K, N] ([N, K] if
    transB); C broadcastable to [M, N]. Y: [M, N] in A's dtype.
    """
    return _gemm(A, B, C, alpha, beta, transA, transB)


# --- MatMulInteger --------------------------------------------------------------------------


def _matmul_integer_rule(ctx: InferContext, a: TensorType | None, b: TensorType | None,
                         *zero_points: TensorType | None) -> TensorType:
    return TensorType(DType.int32, _matmul_shape(ctx, shape_of(a), shape_of(b)))


@op("MatMulInteger", since=10, inputs=("A", "B", "a_zero_point?", "b_zero_point?"),
    outputs=("Y",), infer=_matmul_integer_rule)
def matmul_integer(A: np.ndarray, B: np.ndarray, a_zero_point: np.ndarray | None = None,
                   b_zero_point: np.ndarray | None = None) -> np.ndarray:
    """Y = (A - a_zero_point) @ (B - b_zero_point), numpy.matmul semantics, int32.

    A: int8/uint8 [..., M, K]; B: int8/uint8 [..., K, N]. a_zero_point: scalar, [M] (per row
    of a 2-D A) or [..., M, 1]; b_zero_point: scalar, [N] (per column) or [..., 1, N]; both
    default 0. The products are exact; the int32 accumulation wraps on overflow.
    """
    # In float64 from the start (the differences are exact there): |a|, |b| <= 255, so float64
    # BLAS is exact while K < 2**53 / 65025. (Through int64 differences first: a [128, 384] @
    # [384, 1536] call 4.9 -> 1.9 ms; BERT-6 quantized dynamically by onnxruntime's tool, on the
    # reference, 64.4 / 64.8 -> 54.7 / 56.5 ms, alternating processes.)
    a = A.astype(np.float64)
    b = B.astype(np.float64)
    if a_zero_point is not None:
        zp = a_zero_point.astype(np.float64)
        if zp.ndim == 1 and a.ndim >= 2:
            zp = zp.reshape(-1, 1)   # one zero point per row of A
        a = _minus(a, zp)
    if b_zero_point is not None:
        b = _minus(b, b_zero_point.astype(np.float64))
    return np.matmul(a, b).astype(np.int64).astype(np.int32)


def _minus(v: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """v - zero_point, into v (a new array of the caller's) unless the difference broadcasts to
    a larger shape."""
    if np.broadcast_shapes(v.shape, zero_point.shape) == v.shape:
        return np.subtract(v, zero_point, out=v)
    return v - zero_point


# --- Einsum ---------------------------------------------------------------------------------


def _einsum_rule(ctx: InferContext, *operands: TensorType | None, equation: str) -> TensorType:
    dtype = dtype_of(operands[0]) if operands else None
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        ctx.fail(f"equation {equation!r} has {len(terms)} terms for {len(operands)} inputs")
    sizes: dict[str, Dim] = {}
    ellipses: list[tuple[Dim, ...]] = []
    for term, operand in zip(terms, operands, strict=True):
        shape = shape_of(operand)
        head, has_ellipsis, tail = term.partition("...")
        if shape is None:
            if has_ellipsis:
                return TensorType(dtype, None)
            shape = (None,) * len(term)
        n_ell = len(shape) - len(head) - len(tail)
        if n_ell < 0 or (not has_ellipsis and n_ell != 0):
            ctx.fail(f"term {term!r} does not match an operand of rank {len(shape)}")
        if has_ellipsis:
            ellipses.append(tuple(shape[len(head):len(head) + n_ell]))
        for label, dim in zip(head + tail, shape[:len(head)] + shape[len(head) + n_ell:],
                              strict=True):
            if sizes.get(label) is None or sizes[label] == 1:
                sizes[label] = dim
    ell = broadcast_dims(ctx, *ellipses) if ellipses else ()
    if ell is None:
        return TensorType(dtype, None)
    if not arrow:
        counts = Counter(lhs.replace("...", "").replace(",", ""))
        rhs = ("..." if ellipses else "") + "".join(sorted(c for c, k in counts.items() if k == 1))
    head, _, tail = rhs.partition("...")
    dims = [sizes.get(c) for c in head] + list(ell if "..." in rhs else ()) + [sizes.get(c)
                                                                            for c in tail]
    return TensorType(dtype, tuple(dims))


@op("Einsum", since=12, inputs=("Inputs...",), outputs=("Output",), infer=_einsum_rule,
    attrs=(Attr("equation", "string", doc="Einstein summation, e.g. 'bij,bjk->bik'"),))
def einsum(*Inputs: np.ndarray, equation: str) -> np.ndarray:
    """Output = numpy.einsum(equation, *Inputs) (opset 12 and 28 differ only in dtypes).

    Explicit form 'ij,jk->ik' lists the output labels; implicit form 'ij,jk' outputs the labels
    that occur once, sorted by ASCII (upper case first), after the broadcast '...' dims. A label
    repeated in one term takes a diagonal; labels missing from the output are summed. Spaces
    are ignored. Output has the inputs' dtype; float16/bfloat16 compute in float32; integers wrap.
    """
    dtype = Inputs[0].dtype
    work = [to_work(x) for x in Inputs]
    result = np.einsum(equation.replace(" ", ""), *work, optimize=len(work) >= 2)
    return np.asarray(result).astype(dtype, copy=False)


# --- Det ------------------------------------------------------------------------------------


def _det_rule(ctx: InferContext, x: TensorType | None) -> TensorType:
    shape = shape_of(x)
    if shape is None:
        return TensorType(dtype_of(x), None)
    if len(shape) < 2:
        ctx.fail(f"Det needs rank >= 2, got {list(shape)}")
    return TensorType(dtype_of(x), tuple(shape[:-2]))


@op("Det", since=11, inputs=("X",), outputs=("Y",), infer=_det_rule)
def det(X: np.ndarray) -> np.ndarray:
    """Y = determinant of each trailing [M, M] matrix of X (opset 11 and 22 differ in dtypes).

    X: [*, M, M] float; Y: [*] in X's dtype (a 2-D X gives a scalar). Computed by LU
    factorisation (numpy.linalg.det), float16/bfloat16 in float32. Singular matrices give 0
    (up to rounding); an empty 0x0 matrix gives 1. A matrix holding NaN gives NaN, and one
    holding an infinity gives +-inf or NaN, never a finite value: in Leibniz's sum every term
    with an infinite entry is +-inf or inf * 0 = NaN (LU's zero-pivot shortcut reported 0
    for [[0, inf], [0, 1]]; onnxruntime gives NaN).
    """
    w = np.asarray(X, dtype=np.float64 if X.dtype == np.float64 else work_dtype(X.dtype))
    with np.errstate(invalid="ignore"):
        y = np.linalg.det(w)
    finite = np.isfinite(w).all(axis=(-2, -1))
    kept = finite | (np.isinf(y) & ~np.isnan(w).any(axis=(-2, -1)))
    return np.asarray(np.where(kept, y, np.nan)).astype(X.dtype, copy=False)


OPS = (matmul, gemm_1, gemm_7, gemm_11, matmul_integer, einsum, det)
