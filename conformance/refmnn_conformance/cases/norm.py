"""Normalizations (refmnn/ops/norm.py): LayerNormalization and BatchNormalization (newest, and
opset 9 where inference is the only mode and there are no is_test/spatial attributes)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from refmnn_conformance.case import POSITIVE, UNIT, OpCase, Sample, SampleContext, Tol
from refmnn_conformance.cases._common import FLOATS, prod


def layernorm_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 8))
    yield Sample((x, ctx.make((8,)), ctx.make((8,))), name="last_axis")
    yield Sample((x, ctx.make((8,))), name="no_bias")
    yield Sample((x, ctx.make((3, 8)), ctx.make((3, 8))), {"axis": 1}, name="two_axes")
    yield Sample((x, ctx.make((2, 3, 8)), ctx.make((8,))), {"axis": 0}, name="all_axes")
    yield Sample((x, ctx.make((8,)), ctx.make((8,))), {"axis": -1, "epsilon": 1e-2}, name="epsilon")
    yield Sample((x, ctx.make((8,)), ctx.make((8,))), outputs=3, name="mean_and_invstddev")
    yield Sample((ctx.make((4, 768)), ctx.make((768,)), ctx.make((768,))), name="wide")
    yield Sample((ctx.array([[1.0, 1.0, 1.0, 1.0]]), ctx.make((4,)), ctx.make((4,))), name="constant_row")
    yield Sample((ctx.make((0, 8)), ctx.make((8,)), ctx.make((8,))), name="empty_batch")
    if ctx.dtype_name != "float64":
        yield Sample((x, ctx.make((8,)), ctx.make((8,))), {"stash_type": 1}, outputs=3,
                     name="stash_float32")
    if ctx.dtype_name in ("float32", "float64"):
        # rows whose spread is 10^5 times below their mean: a mean summed and rounded once in
        # float32 is off by up to half an ulp of 1000 (3e-5), 0.3 % of the spread, and every
        # deviation carries that error unless it is taken off them (the reference's second pass)
        offset = (ctx.make((4, 384)).astype(np.float64) * 1e-2 + 1000.0).astype(x.dtype)
        yield Sample((offset, ctx.make((384,)), ctx.make((384,))), name="offset_rows")
    if ctx.dtype_name == "float32":
        # beyond float32's range the spec's stage one (its function body in float32:
        # ReduceMean, Sub, Mul(D, D), ReduceMean, ...) overflows: a deviation of 8.5e37 or 3e19
        # squares to inf (InvStdDev 0: Y = B; onnxruntime and onnx.reference agree), a row
        # summing past the largest float has the mean inf (Y NaN; onnx.reference agrees,
        # onnxruntime sums in double); the other rows are ordinary
        huge = np.finfo(np.float32).max
        rows = ctx.make((3, 16)).astype(np.float32)
        rows[0, 5], rows[1, 2] = huge / 4, 3e19
        rows[2, :3] = huge / 2
        yield Sample((rows, ctx.make((16,)), ctx.make((16,))), name="overflowing_rows")


def _ln_k(sample: Sample) -> int:
    x = sample.inputs[0]
    return max(1, prod(x.shape[sample.attrs.get("axis", -1):]))


def _bn_inputs(ctx: SampleContext, shape: tuple[int, ...]):
    c = shape[1]
    return (ctx.make(shape), ctx.make((c,), UNIT), ctx.make((c,), UNIT), ctx.make((c,)),
            ctx.make((c,), POSITIVE))


def batchnorm_samples(ctx: SampleContext):
    yield Sample(_bn_inputs(ctx, (2, 3, 4, 5)), name="nchw")
    yield Sample(_bn_inputs(ctx, (4, 3)), name="nc")
    yield Sample(_bn_inputs(ctx, (2, 3, 4)), name="ncl")
    yield Sample(_bn_inputs(ctx, (1, 2, 3, 2, 2)), name="ncdhw")
    yield Sample(_bn_inputs(ctx, (2, 3, 4, 5)), {"epsilon": 1e-2}, name="epsilon")
    yield Sample(_bn_inputs(ctx, (0, 3, 2, 2)), name="empty_batch")


def batchnorm_training_samples(ctx: SampleContext):
    yield Sample(_bn_inputs(ctx, (2, 3, 4, 5)), {"training_mode": 1, "momentum": 0.8}, outputs=3,
                 name="training_mode")


def batchnorm9_samples(ctx: SampleContext):
    yield Sample(_bn_inputs(ctx, (2, 3, 4, 5)), name="inference")
    yield Sample(_bn_inputs(ctx, (4, 3)), name="nc")
    yield Sample(_bn_inputs(ctx, (2, 3, 4)), {"epsilon": 1e-3, "momentum": 0.5}, name="attributes")


_LN_TOL = {DType.float16: Tol(2e-3, 1e-4, "mean, variance and rsqrt each round in float32; "
                                          "normalised values near zero need an absolute floor"),
           DType.bfloat16: Tol(1.6e-2, 1e-3, "8-bit mantissa; normalised values near zero need an "
                                            "absolute floor of about one bfloat16 step at 0.1")}
CASES = (
    OpCase("LayerNormalization", dtypes=FLOATS, samples=layernorm_samples, accumulates=_ln_k,
           tolerance=_LN_TOL, tags=("accumulates",)),
    OpCase("BatchNormalization", dtypes=FLOATS, samples=batchnorm_samples),
    OpCase("BatchNormalization", dtypes=(DType.float32,), samples=batchnorm_training_samples,
           variant="training", accumulates=lambda s: prod(s.inputs[0].shape) // s.inputs[0].shape[1],
           tags=("accumulates",)),
    OpCase("BatchNormalization", opset=9, dtypes=(DType.float32, DType.float16, DType.float64),
           samples=batchnorm9_samples, tags=("old-opset",)),
)


# ---------------------------------------------------------------------------------------------
# Instance, Group, RMS and Lp normalisation, LRN, MeanVarianceNormalization


def instancenorm_samples(ctx: SampleContext):
    for name, shape in (("nchw", (2, 3, 4, 5)), ("ncl", (2, 3, 7)), ("ncdhw", (1, 2, 3, 2, 4))):
        c = shape[1]
        yield Sample((ctx.make(shape), ctx.make((c,)), ctx.make((c,))), name=name)
    yield Sample((ctx.make((2, 3, 4, 4)), ctx.make((3,)), ctx.make((3,))), {"epsilon": 1e-2},
                 name="epsilon")
    yield Sample((ctx.array([[[1.0, 1.0, 1.0]]]), ctx.make((1,)), ctx.make((1,))),
                 name="constant_channel")
    yield Sample((ctx.make((1, 4, 32, 32)), ctx.make((4,)), ctx.make((4,))), name="large_spatial")
    yield Sample((ctx.make((0, 3, 4)), ctx.make((3,)), ctx.make((3,))), name="empty_batch")


def _spatial(sample: Sample) -> int:
    return max(1, prod(sample.inputs[0].shape[2:]))


def groupnorm_samples(ctx: SampleContext):
    x = ctx.make((2, 6, 4, 3))
    yield Sample((x, ctx.make((6,)), ctx.make((6,))), {"num_groups": 3}, name="three_groups")
    yield Sample((x, ctx.make((6,)), ctx.make((6,))), {"num_groups": 1}, name="one_group")
    yield Sample((x, ctx.make((6,)), ctx.make((6,))), {"num_groups": 6}, name="per_channel")
    yield Sample((ctx.make((2, 4, 5)), ctx.make((4,)), ctx.make((4,))), {"num_groups": 2,
                                                                         "epsilon": 1e-2},
                 name="ncl_epsilon")
    yield Sample((ctx.make((0, 6, 2)), ctx.make((6,)), ctx.make((6,))), {"num_groups": 3},
                 name="empty_batch")


def _group_k(sample: Sample) -> int:
    x = sample.inputs[0]
    return max(1, prod(x.shape[1:]) // sample.attrs["num_groups"])


def rmsnorm_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 8))
    yield Sample((x, ctx.make((8,))), name="last_axis")
    yield Sample((x, ctx.make((3, 8))), {"axis": 1}, name="two_axes")
    yield Sample((x, ctx.make((8,))), {"epsilon": 1e-2}, name="epsilon")
    yield Sample((ctx.make((4, 768)), ctx.make((768,))), name="wide")
    yield Sample((ctx.make((0, 8)), ctx.make((8,))), name="empty_batch")
    yield Sample((ctx.array([[0.0, 0.0, 0.0, 0.0]]), ctx.make((4,))), name="zero_row")
    yield Sample((ctx.noncontiguous(ctx.make((3, 8))), ctx.make((8,))), name="noncontiguous")


def lpnorm_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 5))
    yield Sample((x,), name="default_l2_last_axis")
    yield Sample((x,), {"p": 1, "axis": 1}, name="l1_axis1")
    yield Sample((x,), {"p": 2, "axis": 0}, name="l2_axis0")
    yield Sample((ctx.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]]),), name="zero_row")
    yield Sample((ctx.make((0, 4)),), name="empty")


def lrn_samples(ctx: SampleContext):
    x = ctx.make((2, 5, 4, 4))
    yield Sample((x,), {"size": 3}, name="size3")
    yield Sample((x,), {"size": 2}, name="even_size")
    yield Sample((x,), {"size": 5, "alpha": 1e-2, "beta": 0.5, "bias": 2.0}, name="attrs")
    yield Sample((ctx.make((1, 3, 6)),), {"size": 3}, name="ncl")


def mvn_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 4, 5))
    yield Sample((x,), name="default_axes")
    yield Sample((x,), {"axes": (1,)}, name="channel_axis")
    yield Sample((x,), {"axes": (2, 3)}, name="spatial_axes")
    yield Sample((ctx.array([[[[1.0, 1.0], [1.0, 1.0]]]]),), name="constant_input")


def _axes_k(sample: Sample) -> int:
    x = sample.inputs[0]
    return max(1, prod(tuple(x.shape[a] for a in sample.attrs.get("axes", (0, 2, 3)))))


_NORM_TOL = {DType.float16: Tol(2e-3, 1e-3, "statistics in float32; normalised values near zero "
                                            "need an absolute floor"),
             DType.bfloat16: Tol(1.6e-2, 1e-2, "8-bit mantissa; normalised values near zero need "
                                              "an absolute floor"),
             DType.float32: Tol(1.3e-6, 1e-5, "normalised values near zero: the mean's rounding "
                                              "is an absolute error")}
_LRN_TOL = {DType.float16: Tol(2e-3, 1e-5, "a power of a float32 sum rounded to float16")}
CASES = CASES + (
    OpCase("InstanceNormalization", dtypes=FLOATS, samples=instancenorm_samples,
           accumulates=_spatial, tolerance=_NORM_TOL, tags=("accumulates",)),
    OpCase("GroupNormalization", dtypes=FLOATS, samples=groupnorm_samples, accumulates=_group_k,
           tolerance=_NORM_TOL, tags=("accumulates",)),
    OpCase("RMSNormalization", dtypes=FLOATS, samples=rmsnorm_samples, accumulates=_ln_k,
           tolerance=_LN_TOL, tags=("accumulates",)),
    OpCase("LpNormalization", dtypes=FLOATS, samples=lpnorm_samples,
           accumulates=lambda s: max(1, s.inputs[0].shape[s.attrs.get("axis", -1)]),
           tags=("accumulates",)),
    OpCase("LRN", dtypes=FLOATS, samples=lrn_samples, accumulates=lambda s: s.attrs["size"],
           tolerance=_LRN_TOL),
    OpCase("MeanVarianceNormalization", dtypes=FLOATS, samples=mvn_samples, accumulates=_axes_k,
           tolerance=_NORM_TOL, tags=("accumulates",)),
)
