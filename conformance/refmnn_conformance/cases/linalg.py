"""Matrix products (refmnn/ops/linalg.py): MatMul and Gemm."""

from __future__ import annotations

from refmnn.dtypes import DType
from refmnn.errors import OpError, ShapeError

from refmnn_conformance.case import (
    EXTREMAL,
    SMALL_INT,
    UNIT,
    ErrorSample,
    OpCase,
    Sample,
    SampleContext,
    Tol,
)
from refmnn_conformance.cases._common import FLOATS

MATMUL_SHAPES = (
    ("2d", (3, 4), (4, 5)),
    ("vector_vector", (4,), (4,)),
    ("vector_matrix", (4,), (4, 5)),
    ("matrix_vector", (3, 4), (4,)),
    ("batched", (2, 3, 4), (2, 4, 5)),
    ("batched_broadcast", (2, 1, 3, 4), (5, 4, 6)),
    ("batch_times_matrix", (2, 3, 4), (4, 5)),
    ("k1", (3, 1), (1, 5)),
    ("k0_gives_zeros", (3, 0), (0, 5)),
    ("m0", (0, 4), (4, 5)),
    ("large_k", (4, 2048), (2048, 3)),
    ("odd_sizes", (17, 33), (33, 65)),
)


def matmul_samples(ctx: SampleContext):
    domain = UNIT if ctx.is_float else SMALL_INT
    for name, sa, sb in MATMUL_SHAPES:
        yield Sample((ctx.make(sa, domain), ctx.make(sb, domain)), name=name)
    yield Sample((ctx.noncontiguous(ctx.make((3, 4), domain)), ctx.noncontiguous(ctx.make((4, 6), domain))),
                 name="noncontiguous")


def matmul_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), ctx.make((4, 5))), name="inner_dim_mismatch"),
                      ShapeError, r"inner|dimension|contract|mismatch")
    yield ErrorSample(Sample((ctx.make((2, 2, 3)), ctx.make((3, 3, 4))), name="batch_mismatch"),
                      ShapeError, r"broadcast|batch|shape")


def _matmul_k(sample: Sample) -> int:
    a = sample.inputs[0]
    return a.shape[-1] if a.ndim else 1


def gemm_samples(ctx: SampleContext):
    domain = UNIT if ctx.is_float else SMALL_INT
    a, b = ctx.make((3, 4), domain), ctx.make((4, 5), domain)
    yield Sample((a, b, ctx.make((3, 5), domain)), name="full_c")
    yield Sample((a, b, ctx.make((5,), domain)), name="row_c")
    yield Sample((a, b, ctx.make((3, 1), domain)), name="column_c")
    yield Sample((a, b, ctx.make((), domain)), name="scalar_c")
    yield Sample((a, b), name="no_c")
    yield Sample((ctx.make((4, 3), domain), ctx.make((5, 4), domain), ctx.make((5,), domain)),
                 {"transA": 1, "transB": 1}, name="transposed")
    if ctx.is_float:
        yield Sample((a, b, ctx.make((3, 5), domain)), {"alpha": 0.5, "beta": -2.0}, name="alpha_beta")
        yield Sample((a, b, ctx.make((3, 5), domain)), {"beta": 0.0}, name="beta_zero")
    yield Sample((ctx.make((8, 1024), domain), ctx.make((1024, 4), domain), ctx.make((4,), domain)),
                 name="large_k")
    yield Sample((ctx.make((0, 4), domain), b, ctx.make((5,), domain)), name="m0")
    # one output row, a classifier's [1, K] @ W' (numba runs it as a matrix-vector product)
    yield Sample((ctx.make((1, 300), domain), ctx.make((700, 300), domain), ctx.make((700,), domain)),
                 {"transB": 1}, name="one_row")
    yield Sample((ctx.make((300, 1), domain), ctx.make((300, 700), domain), ctx.make((1, 700), domain)),
                 {"transA": 1}, name="one_row_transA")


def _gemm_k(sample: Sample) -> int:
    a = sample.inputs[0]
    return a.shape[0] if sample.attrs.get("transA", 0) else a.shape[1]


_INTS = (DType.int32, DType.int64)
CASES = (
    OpCase("MatMul", dtypes=FLOATS + _INTS, samples=matmul_samples, errors=matmul_errors,
           accumulates=_matmul_k, tags=("accumulates",)),
    # B as an initializer, as a model's weights are: what numba's packed_simd runs on
    OpCase("MatMul", dtypes=(DType.float32,), samples=matmul_samples, accumulates=_matmul_k,
           tags=("accumulates",), variant="constant_weights", constants=(1,)),
    OpCase("Gemm", dtypes=FLOATS + _INTS, samples=gemm_samples, accumulates=_gemm_k,
           tags=("accumulates",)),
)


# ---------------------------------------------------------------------------------------------
# Einsum, Det, MatMulInteger

EINSUMS = (
    ("matmul", "ij,jk->ik", ((3, 4), (4, 5))),
    ("batched", "bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
    ("transpose", "ij->ji", ((3, 4),)),
    ("trace", "ii->", ((4, 4),)),
    ("diagonal", "ii->i", ((4, 4),)),
    ("sum_axis", "ij->i", ((3, 4),)),
    ("implicit_output", "ij,jk", ((3, 4), (4, 2))),
    ("outer", "i,j->ij", ((3,), (4,))),
    ("dot", "i,i", ((5,), (5,))),
    ("ellipsis", "...ij,...jk->...ik", ((2, 3, 4), (2, 4, 2))),
    ("broadcast_ellipsis", "...ij,jk->...ik", ((2, 2, 3, 4), (4, 2))),
    ("three_operands", "ij,jk,kl->il", ((2, 3), (3, 4), (4, 2))),
    ("attention_like", "bhqd,bhkd->bhqk", ((1, 2, 3, 4), (1, 2, 5, 4))),
    ("empty", "ij,jk->ik", ((0, 3), (3, 2))),
)


def einsum_samples(ctx: SampleContext):
    domain = UNIT if ctx.is_float else SMALL_INT
    for name, eq, shapes in EINSUMS:
        yield Sample(tuple(ctx.make(s, domain) for s in shapes), {"equation": eq}, name=name)
    yield Sample((ctx.noncontiguous(ctx.make((3, 4), domain)), ctx.make((4, 2), domain)),
                 {"equation": "ij,jk->ik"}, name="noncontiguous")


def einsum_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), ctx.make((4, 5))), {"equation": "ij,jk->ik"},
                             name="dimension_mismatch"), OpError, r".")


def _einsum_k(sample: Sample) -> int:
    return max(max(a.shape, default=1) for a in sample.inputs if a is not None and a.ndim) \
        if any(a.ndim for a in sample.inputs) else 1


def det_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 3)),), name="3x3")
    yield Sample((ctx.make((2, 4, 4)),), name="batched")
    yield Sample((ctx.make((1, 1)),), name="1x1")
    yield Sample((ctx.array([[1.0, 2.0], [2.0, 4.0]]),), name="singular")
    yield Sample((ctx.make((0, 2, 2)),), name="empty_batch")
    yield Sample((ctx.noncontiguous(ctx.make((3, 3))),), name="noncontiguous")


def det_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)),), name="not_square"), OpError, r".")


def mmi_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 4)), ctx.make((4, 5))), name="2d")
    yield Sample((ctx.make((2, 3, 4)), ctx.make((4, 5)), ctx.array(3), ctx.array(5)),
                 name="zero_points")
    yield Sample((ctx.make((3, 4)), ctx.make((4, 5)), ctx.make((3,)), ctx.make((5,))),
                 name="per_row_and_column_zero_points")
    yield Sample((ctx.make((6, 16), EXTREMAL), ctx.make((16, 3), EXTREMAL)), name="extremal")
    yield Sample((ctx.make((2, 512)), ctx.make((512, 3))), name="large_k")
    yield Sample((ctx.make((0, 4)), ctx.make((4, 2))), name="m0")


def mmi_mixed_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 4), dtype=DType.uint8), ctx.make((4, 5), dtype=DType.int8)),
                 name="u8_times_s8")
    yield Sample((ctx.make((3, 4), dtype=DType.int8), ctx.make((4, 5), dtype=DType.uint8),
                  ctx.array(-2, dtype=DType.int8), ctx.array(7, dtype=DType.uint8)), name="s8_times_u8")


_DET_TOL = {DType.float16: Tol(5e-3, 1e-3, "an LU factorisation: cancellation over n pivots"),
            DType.float32: Tol(1e-5, 1e-5, "an LU factorisation: cancellation over n pivots")}
CASES = CASES + (
    OpCase("Einsum", dtypes=FLOATS + _INTS, samples=einsum_samples, errors=einsum_errors,
           accumulates=_einsum_k, tags=("accumulates",)),
    OpCase("Det", dtypes=(DType.float32, DType.float16, DType.float64), samples=det_samples,
           errors=det_errors, tolerance=_DET_TOL),
    OpCase("MatMulInteger", dtypes=(DType.uint8, DType.int8), samples=mmi_samples,
           tags=("quant",)),
    OpCase("MatMulInteger", dtypes=(DType.uint8,), samples=mmi_mixed_samples, variant="mixed",
           tags=("quant",)),
)
