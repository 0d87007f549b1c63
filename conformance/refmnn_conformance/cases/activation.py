"""Activations and Softmax (refmnn/ops/activation.py)."""

from __future__ import annotations

from refmnn.dtypes import DType

from refmnn.errors import OpError

from refmnn_conformance.case import (
    EXTREMAL,
    UNIT,
    ErrorSample,
    OpCase,
    Sample,
    SampleContext,
    Tol,
)
from refmnn_conformance.cases._common import FLOATS, prod


def unary_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 7)),), name="basic")
    yield Sample((ctx.make(()),), name="rank0")
    yield Sample((ctx.make((0, 4)),), name="empty")
    yield Sample((ctx.noncontiguous(ctx.make((4, 6))),), name="noncontiguous")
    yield Sample((ctx.make((2, 3, 5, 7), UNIT),), name="unit")
    yield Sample((ctx.make((6, 16), EXTREMAL),), name="extremal")
    yield Sample((ctx.array([-0.0, 0.0, -1e-30, 1e-30]),), name="signed_zeros")


def sigmoid_samples(ctx: SampleContext):
    yield from unary_samples(ctx)
    yield Sample((ctx.array([-100.0, -30.0, -10.0, 10.0, 30.0, 100.0]),), name="saturation")


def softmax_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 5))
    for axis in (-1, 0, 1, 2):
        yield Sample((x,), {"axis": axis}, name=f"axis{axis}".replace("-", "m"))
    yield Sample((ctx.make((4, 1000)),), {"axis": -1}, name="long_row")
    yield Sample((ctx.make((3, 0)),), {"axis": -1}, name="zero_size_axis")
    yield Sample((ctx.make((0, 3)),), {"axis": -1}, name="zero_size_batch")
    yield Sample((ctx.array([[1000.0, 1000.0, -1000.0], [-1e4, -1e4, -1e4]]),), {"axis": -1},
                 name="large_magnitude")
    yield Sample((ctx.make((4, 16), EXTREMAL),), {"axis": -1}, name="extremal")
    yield Sample((ctx.noncontiguous(ctx.make((3, 6))),), {"axis": 0}, name="noncontiguous")


def softmax11_samples(ctx: SampleContext):
    """Softmax-11 coerces the input to 2-D at ``axis``: rows are the flattened trailing dims."""
    x = ctx.make((2, 3, 4))
    for axis in (0, 1, 2, -1):
        yield Sample((x,), {"axis": axis}, name=f"coerce2d_axis{axis}".replace("-", "m"))
    yield Sample((x,), name="default_axis1")


def _row(sample: Sample) -> int:
    x = sample.inputs[0]
    axis = sample.attrs.get("axis", -1)
    return x.shape[axis] if x.ndim else 1


def _coerced_row(sample: Sample) -> int:
    x = sample.inputs[0]
    return prod(x.shape[sample.attrs.get("axis", 1):])


_SOFTMAX_TOL = {DType.float16: Tol(2e-3, 1e-5, "exp, sum and divide each round once in float32 "
                                                "before the final rounding to float16")}

CASES = (
    OpCase("Relu", dtypes=FLOATS + (DType.int32, DType.int8, DType.int64), samples=unary_samples),
    OpCase("Sigmoid", dtypes=FLOATS, samples=sigmoid_samples),
    OpCase("Softmax", dtypes=FLOATS, samples=softmax_samples, accumulates=_row,
           tolerance=_SOFTMAX_TOL, tags=("reduction",)),
    OpCase("Softmax", opset=11, dtypes=(DType.float32, DType.float64), samples=softmax11_samples,
           accumulates=_coerced_row,
           tags=("reduction", "old-opset")),
)


# ---------------------------------------------------------------------------------------------
# parameterised activations and the other axis-wise functions


def _with_attrs(*variants):
    """unary_samples, plus the ``basic`` input once per attribute set in ``variants``."""

    def samples(ctx: SampleContext):
        yield from unary_samples(ctx)
        x = ctx.make((4, 9))
        for name, attrs in variants:
            yield Sample((x,), attrs, name=name)

    return samples


def prelu_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 4, 5))
    yield Sample((x, ctx.make((3, 1, 1), UNIT)), name="per_channel")
    yield Sample((x, ctx.make((5,), UNIT)), name="last_axis_slope")
    yield Sample((x, ctx.make((), UNIT)), name="scalar_slope")
    yield Sample((x, ctx.make((2, 3, 4, 5), UNIT)), name="full_slope")
    yield Sample((ctx.make((0, 3)), ctx.make((3,), UNIT)), name="empty")
    yield Sample((ctx.noncontiguous(ctx.make((3, 6))), ctx.make((6,), UNIT)), name="noncontiguous")
    yield Sample((ctx.make((6, 16), EXTREMAL), ctx.make((16,), UNIT)), name="extremal")


def prelu_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((2, 3)), ctx.make((4,))), name="slope_not_broadcastable"),
                      OpError, r"broadcast|shape")


def axis_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 5))
    for axis in (-1, 0, 1):
        yield Sample((x,), {"axis": axis}, name=f"axis{axis}".replace("-", "m"))
    yield Sample((ctx.make((4, 1000)),), {"axis": -1}, name="long_row")
    yield Sample((ctx.make((0, 3)),), {"axis": -1}, name="zero_size_batch")
    yield Sample((ctx.array([[1000.0, 1000.0, -1000.0], [-1e4, -1e4, -1e4]]),), {"axis": -1},
                 name="large_magnitude")
    yield Sample((ctx.make((4, 16), EXTREMAL),), {"axis": -1}, name="extremal")
    yield Sample((ctx.noncontiguous(ctx.make((3, 6))),), {"axis": 0}, name="noncontiguous")


def hardmax_samples(ctx: SampleContext):
    yield from axis_samples(ctx)
    yield Sample((ctx.array([[1.0, 3.0, 3.0, 2.0], [0.0, 0.0, 0.0, 0.0]]),), name="ties_first")


def swiglu_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 8)), ctx.make((3, 8))), name="basic")
    yield Sample((ctx.make((2, 3, 8)), ctx.make((2, 3, 8))), {"alpha": 1.702}, name="alpha")
    yield Sample((ctx.make((0, 4)), ctx.make((0, 4))), name="empty")


_TRANSCENDENTAL = {DType.float32: Tol(4e-6, 1e-6, "exp/log1p/tanh compositions; libm-grade "
                                                  "implementations differ by a few ulp"),
                   DType.float16: Tol(2e-3, 1e-5, "two or three float32 roundings before the "
                                                  "final one to float16")}
_ACTIVATION_TYPES = FLOATS


def _act(op: str, *variants, tol=None, dtypes=_ACTIVATION_TYPES) -> OpCase:
    return OpCase(op, dtypes=dtypes, samples=_with_attrs(*variants),
                  tolerance=tol or {}, tags=("activation",))


def leaky_relu_samples(ctx: SampleContext):
    yield from _with_attrs(("alpha", {"alpha": 0.3}), ("alpha_negative", {"alpha": -2.0}),
                           ("alpha_infinite", {"alpha": float("inf")}))(ctx)  # never on X >= 0
    # alpha = 0 is not Relu: alpha * X gives -0.0 for X < 0 and NaN for -inf
    yield Sample((ctx.make((6, 16), EXTREMAL),), {"alpha": 0.0}, name="alpha_zero_extremal")


MORE_CASES = (
    OpCase("LeakyRelu", dtypes=_ACTIVATION_TYPES, samples=leaky_relu_samples,
           tags=("activation",)),
    _act("Elu", ("alpha", {"alpha": 0.5}), tol=_TRANSCENDENTAL),
    _act("Selu", ("attrs", {"alpha": 2.0, "gamma": 3.0}), tol=_TRANSCENDENTAL),
    _act("Celu", ("alpha", {"alpha": 2.0}), tol=_TRANSCENDENTAL),
    _act("HardSigmoid", ("attrs", {"alpha": 0.5, "beta": 0.6})),
    _act("HardSwish"),
    _act("Softplus", tol=_TRANSCENDENTAL),
    _act("Softsign"),
    _act("Gelu", ("tanh", {"approximate": "tanh"}), tol=_TRANSCENDENTAL),
    _act("Mish", tol=_TRANSCENDENTAL),
    _act("Swish", ("alpha", {"alpha": 1.702}), tol=_TRANSCENDENTAL),
    _act("ThresholdedRelu", ("alpha", {"alpha": 0.5}), ("alpha_negative", {"alpha": -0.5})),
    _act("Shrink", ("attrs", {"lambd": 1.0, "bias": 0.5}),  # Shrink's T has no bfloat16
         dtypes=tuple(t for t in _ACTIVATION_TYPES if t != DType.bfloat16)),
    OpCase("Shrink", dtypes=(DType.int32, DType.int8, DType.int64), variant="int",
           samples=lambda ctx: [Sample((ctx.make((4, 9)),), {"lambd": 2.0, "bias": 1.0}, name="basic")]),
    OpCase("PRelu", dtypes=FLOATS + (DType.int32, DType.int64), samples=prelu_samples,
           errors=prelu_errors, tags=("activation", "broadcast")),
    OpCase("LogSoftmax", dtypes=FLOATS, samples=axis_samples, accumulates=_row,
           tolerance=_SOFTMAX_TOL, tags=("reduction",)),
    OpCase("Hardmax", dtypes=FLOATS, samples=hardmax_samples, tags=("reduction",)),
    OpCase("SwiGLU", dtypes=FLOATS, samples=swiglu_samples, tolerance=_TRANSCENDENTAL,
           tags=("activation",)),
)
CASES = CASES + MORE_CASES
