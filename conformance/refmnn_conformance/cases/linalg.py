"""Matrix products (refmnn/ops/linalg.py): MatMul and Gemm."""

from __future__ import annotations

from refmnn.dtypes import DType
from refmnn.errors import ShapeError

from refmnn_conformance.case import SMALL_INT, UNIT, ErrorSample, OpCase, Sample, SampleContext
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


def _gemm_k(sample: Sample) -> int:
    a = sample.inputs[0]
    return a.shape[0] if sample.attrs.get("transA", 0) else a.shape[1]


_INTS = (DType.int32, DType.int64)
CASES = (
    OpCase("MatMul", dtypes=FLOATS + _INTS, samples=matmul_samples, errors=matmul_errors,
           accumulates=_matmul_k, tags=("accumulates",)),
    OpCase("Gemm", dtypes=FLOATS + _INTS, samples=gemm_samples, accumulates=_gemm_k,
           tags=("accumulates",)),
)
