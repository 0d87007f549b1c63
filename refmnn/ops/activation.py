"""Activation functions: Relu, LeakyRelu, PRelu, Elu, Sigmoid, Gelu, ..., Softmax, LogSoftmax,
Hardmax.

Float attributes (alpha, beta, ...) are applied as Python floats, which NumPy casts to the
input's dtype (NEP 50), so float32 stays float32. float16, bfloat16 and the narrower float
formats compute in float32 and round once at the end (:func:`_f32`), so composite formulas
(Softplus, Gelu, Mish, Softmax, ...) do not round after every step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from refmnn.dtypes import is_narrow
from refmnn.ops._erf import gelu_float32
from refmnn.ops._infer import same_as
from refmnn.ops._reduction_util import sum_along
from refmnn.ops._schema import Attr, into, op
from refmnn.ops.elementwise import _erf, with_consumed_inputs


def _f32(fn: Callable[[np.ndarray], np.ndarray], X: np.ndarray) -> np.ndarray:
    """Apply ``fn``; float16, bfloat16 and narrower floats compute in float32, round once."""
    if X.dtype == np.float16 or is_narrow(X.dtype):
        return np.asarray(fn(X.astype(np.float32))).astype(X.dtype)
    return np.asarray(fn(X))


def _sigmoid(X: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-X)) in X's (float) dtype; exp overflow gives exactly 0."""
    with np.errstate(over="ignore"):
        e = np.asarray(np.exp(-X))  # asarray: a 0-d input gives a NumPy scalar
    e += 1
    return np.reciprocal(e, out=e)


# --------------------------------------------------------------------------------------------
# rectifiers
# --------------------------------------------------------------------------------------------


@op("Relu", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def relu(X: np.ndarray) -> np.ndarray:
    """Y = max(X, 0), elementwise; NaN stays NaN.

    X: any shape; float, or (from opset 14) signed integer.
    """
    return np.maximum(X, X.dtype.type(0))


@op("LeakyRelu", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 0.009999999776482582, "slope for X < 0"),))
def leaky_relu(X: np.ndarray, *, alpha: float) -> np.ndarray:
    """Y = X if X >= 0 else alpha * X, elementwise.  X: any shape, float.

    NaN stays NaN, -0.0 stays -0.0 (it is >= 0), -inf gives -inf * alpha: NaN when alpha = 0,
    as the function body's Mul(alpha, X) does (so alpha = 0 is not Relu: negative X give -0.0
    and -inf gives NaN; onnxruntime and onnx.reference agree). alpha only ever multiplies
    X < 0, so an infinite or NaN alpha leaves X >= 0 as it is (a max(X, 0) + alpha * min(X, 0)
    form would give alpha * 0 = NaN there).
    """
    with np.errstate(invalid="ignore"):  # 0 * -inf = NaN, as intended
        return _f32(lambda v: np.where(v >= 0, v, v * alpha), X)


@op("PRelu", since=7, inputs=("X", "slope"), outputs=("Y",), infer=same_as(0))
def prelu(X: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """Y = X if X >= 0 else slope * X, elementwise.

    slope broadcasts unidirectionally onto X (NumPy rules; Y has X's shape). Float, and from
    opset 9 also int32/int64/uint32/uint64 (integer products wrap).
    """
    if np.broadcast_shapes(X.shape, slope.shape) != X.shape:
        raise ValueError(f"PRelu slope {list(slope.shape)} does not broadcast onto X "
                         f"{list(X.shape)} unidirectionally")
    return _f32(lambda v: np.where(v < 0, v * slope.astype(v.dtype, copy=False), v), X)


@op("PRelu", since=6, inputs=("X", "slope"), outputs=("Y",), infer=same_as(0))
def prelu_6(X: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """PRelu before opset 7: slope has one element (shared by every channel) or one per channel
    of X's axis 1 (shape [C]); any other shape falls back to NumPy broadcasting.

    Y = X if X >= 0 else slope * X.  X: [N, C, ...].
    """
    if slope.size == 1:
        slope = slope.reshape(())
    elif slope.ndim == 1 and X.ndim >= 2 and slope.shape[0] == X.shape[1]:
        slope = slope.reshape((-1,) + (1,) * (X.ndim - 2))
    return prelu.reference(X, slope)


@op("ThresholdedRelu", since=10, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 1.0, "threshold"),))
def thresholded_relu(X: np.ndarray, *, alpha: float) -> np.ndarray:
    """Y = X if X > alpha else 0, elementwise; float. NaN gives 0 (NaN > alpha is false)."""
    return np.where(X > alpha, X, X.dtype.type(0))


@op("Elu", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 1.0, "scale of the negative part"),))
def elu(X: np.ndarray, *, alpha: float) -> np.ndarray:
    """Y = X if X > 0 else alpha * (exp(X) - 1), elementwise; float (expm1 for accuracy
    near 0)."""
    return _f32(lambda v: np.where(v > 0, v, alpha * np.expm1(np.minimum(v, 0))), X)


@op("Selu", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 1.6732631921768188, "scale of the negative part"),
           Attr("gamma", "float", 1.0507010221481323, "overall scale")))
def selu(X: np.ndarray, *, alpha: float, gamma: float) -> np.ndarray:
    """Y = gamma * X if X > 0 else gamma * alpha * (exp(X) - 1), elementwise; float.

    Selu-1 had other defaults (alpha 1.6732, gamma 1.0507) and ``consumed_inputs``.
    """
    return _f32(lambda v: gamma * np.where(v > 0, v, alpha * np.expm1(np.minimum(v, 0))), X)


@op("Celu", since=12, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 1.0, "the alpha of the formula"),))
def celu(X: np.ndarray, *, alpha: float) -> np.ndarray:
    """Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1)), elementwise. float (float32
    only before opset 28; then also float16/bfloat16/double)."""
    def formula(v: np.ndarray) -> np.ndarray:
        return np.maximum(v, 0) + np.minimum(0, alpha * np.expm1(np.minimum(v, 0) / alpha))

    return _f32(formula, X)


@op("Shrink", since=9, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(Attr("bias", "float", 0.0, "added/subtracted outside the band"),
           Attr("lambd", "float", 0.5, "half-width of the band mapped to 0")))
def shrink(input: np.ndarray, *, bias: float, lambd: float) -> np.ndarray:
    """output = input + bias if input < -lambd; input - bias if input > lambd; else 0.

    Any numeric type; the comparison is done in float64 and the result has input's type
    (integer results wrap)."""
    wide = input.astype(np.float64)
    result = np.where(wide < -lambd, wide + bias, np.where(wide > lambd, wide - bias, 0.0))
    if input.dtype.kind in "iu":
        return result.astype(np.int64).astype(input.dtype)
    return result.astype(input.dtype)


# --------------------------------------------------------------------------------------------
# smooth activations
# --------------------------------------------------------------------------------------------


@op("Sigmoid", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0))
def sigmoid(X: np.ndarray) -> np.ndarray:
    """Y = 1 / (1 + exp(-X)), elementwise; float. Large negative X gives exactly 0."""
    return _f32(_sigmoid, X)


@op("HardSigmoid", since=6, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 0.20000000298023224, "slope"),
           Attr("beta", "float", 0.5, "offset")))
def hard_sigmoid(X: np.ndarray, *, alpha: float, beta: float) -> np.ndarray:
    """Y = max(0, min(1, alpha * X + beta)), elementwise; float; NaN stays NaN."""
    return _f32(lambda v: np.clip(alpha * v + beta, 0, 1), X)


@op("HardSwish", since=14, inputs=("X",), outputs=("Y",), infer=same_as(0))
def hard_swish(X: np.ndarray) -> np.ndarray:
    """Y = X * max(0, min(1, X / 6 + 0.5)), elementwise (HardSigmoid with alpha = 1/6)."""
    return _f32(lambda v: v * np.clip(v * (1 / 6) + 0.5, 0, 1), X)


@op("Softplus", since=1, inputs=("X",), outputs=("Y",), infer=same_as(0))
def softplus(X: np.ndarray) -> np.ndarray:
    """Y = ln(exp(X) + 1), elementwise; float. Computed as logaddexp(0, X): no overflow for
    large X (Y = X there) and full accuracy for very negative X (Y = exp(X))."""
    return _f32(lambda v: np.logaddexp(v.dtype.type(0), v), X)


@op("Softsign", since=1, inputs=("input",), outputs=("output",), infer=same_as(0))
def softsign(input: np.ndarray) -> np.ndarray:
    """output = input / (1 + |input|), elementwise; float; +-inf gives NaN (inf/inf) as in
    the formula."""
    with np.errstate(invalid="ignore"):
        return _f32(lambda v: v / (1 + np.abs(v)), input)


@op("Gelu", since=20, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("approximate", "string", "none", '"none" (exact) or "tanh"'),))
def gelu(X: np.ndarray, *, approximate: str) -> np.ndarray:
    """Y = 0.5 * X * (1 + erf(X / sqrt(2))) (approximate="none"), or
    Y = 0.5 * X * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * X^3))) (approximate="tanh").

    float32, "none": :func:`gelu_float32`, float64 arithmetic through the tail erfc (no
    cancellation for negative X), rounded once: within 0.502 ulp. Otherwise computed in float64
    (erf by the vectorised :func:`_erf`) and rounded once to X's type; for X below about -8 the
    float64 sum 1 + erf cancels, so such outputs (true magnitude < 1e-14) come out with an
    absolute error of about 1e-16 * |X| (often exactly 0). Gelu(-inf) = NaN (-inf * 0).
    """
    if X.dtype == np.float32 and approximate == "none":
        return gelu_float32(X)
    x = X.astype(np.float64)
    if approximate == "tanh":
        with np.errstate(over="ignore"):  # x^3 = +-inf past ~5e102: tanh gives +-1
            inner = np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))
    elif approximate == "none":
        inner = _erf(x * np.sqrt(0.5))
    else:
        raise ValueError(f"Gelu approximate must be 'none' or 'tanh', got {approximate!r}")
    inner += 1.0
    x *= 0.5  # halved first (exact): x * (1 + erf) overflows beyond DBL_MAX / 2, where Y = X
    inner *= x
    return inner.astype(X.dtype)


@op("Mish", since=18, inputs=("X",), outputs=("Y",), infer=same_as(0))
def mish(X: np.ndarray) -> np.ndarray:
    """Y = X * tanh(softplus(X)) = X * tanh(ln(1 + exp(X))), elementwise; float."""
    return _f32(lambda v: v * np.tanh(np.logaddexp(v.dtype.type(0), v)), X)


@op("Swish", since=24, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 1.0, "scale inside the sigmoid"),))
def swish(X: np.ndarray, *, alpha: float) -> np.ndarray:
    """Y = X * sigmoid(alpha * X), elementwise; float."""
    return _f32(lambda v: v * _sigmoid(alpha * v), X)


@op("SwiGLU", since=28, inputs=("A", "B"), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 1.0, "Swish scale applied to the gate"),))
def swiglu(A: np.ndarray, B: np.ndarray, *, alpha: float) -> np.ndarray:
    """Y = Swish_alpha(A) * B = A * sigmoid(alpha * A) * B; A (gate) and B (value) have the same
    shape (no broadcasting); float."""
    if A.shape != B.shape:
        raise ValueError(f"SwiGLU needs A and B of one shape, got {list(A.shape)} and "
                         f"{list(B.shape)}")
    if A.dtype.itemsize < 4:
        return (swiglu.reference(A.astype(np.float32), B.astype(np.float32), alpha=alpha)
                .astype(A.dtype))
    return A * _sigmoid(alpha * A) * B


# --------------------------------------------------------------------------------------------
# Softmax, LogSoftmax, Hardmax
# --------------------------------------------------------------------------------------------


def _softmax(x: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    # initial=-inf: a zero-size axis gives an empty result instead of an error. A row of -inf
    # gives NaN (-inf - -inf), as the formula does: no NumPy warning for it (errstate).
    with np.errstate(invalid="ignore"):
        e = np.subtract(x, x.max(axis=axis, keepdims=True, initial=-np.inf), out=out)
    np.exp(e, out=e)
    e /= sum_along(e, axis=axis)
    return e


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # a row of -inf: NaN, as in _softmax
        shifted = np.subtract(x, x.max(axis=axis, keepdims=True, initial=-np.inf))
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    out = np.zeros_like(x)
    if x.size:
        first = np.argmax(x, axis=axis, keepdims=True)  # first occurrence of the maximum
        np.put_along_axis(out, first, x.dtype.type(1), axis=axis)
    return out


def _along_axis(fn: Callable[..., np.ndarray], X: np.ndarray, axis: int,
                out: np.ndarray | None = None) -> np.ndarray:
    """``fn(X, axis)``; ``fn(X, axis, out)`` for a float32/float64 X of rank >= 1 when ``out``
    is an array of X's shape and dtype (the planned output: computed there, no copy)."""
    if not -max(X.ndim, 1) <= axis < max(X.ndim, 1):
        raise ValueError(f"axis {axis} out of range for rank {X.ndim}")
    if X.ndim and X.dtype in (np.float32, np.float64) and into(out, X.shape, X.dtype) is not None:
        return fn(X, axis, out)
    if X.ndim == 0:
        return _f32(lambda v: fn(v.reshape(1), 0).reshape(()), X)
    return _f32(lambda v: fn(v, axis), X)


def _coerced_2d(fn: Callable[[np.ndarray, int], np.ndarray], X: np.ndarray,
                axis: int) -> np.ndarray:
    """Apply ``fn`` over the rows of X viewed as [prod(shape[:axis]), prod(shape[axis:])]."""
    if not -X.ndim <= axis <= X.ndim:
        raise ValueError(f"axis {axis} out of range for rank {X.ndim}")
    axis = axis + X.ndim if axis < 0 else axis
    rows = math.prod(X.shape[:axis])
    cols = math.prod(X.shape[axis:])
    flat = X.reshape(rows, cols)
    if flat.size == 0:
        return X.copy()
    return _f32(lambda v: fn(v, 1), flat).reshape(X.shape)


_AXIS_13 = Attr("axis", "int", -1, "the axis the function is computed along")
_AXIS_1 = Attr("axis", "int", 1, "the input is coerced to 2-D [prod(dims before axis), "
               "prod(dims from axis)] and each row is normalised")


@op("Softmax", since=13, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(_AXIS_13,), in_place=(0,))
def softmax(input: np.ndarray, *, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    """output = exp(x - max) / sum(exp(x - max)) along ``axis`` (default -1); float.

    The max is subtracted first, so large inputs do not overflow; a row holding +inf gives NaN.
    float32/float64 compute into ``out`` (the planned output) when it fits.
    """
    return _along_axis(_softmax, input, axis, out)


@op("Softmax", since=1, inputs=("input",), outputs=("output",), infer=same_as(0), attrs=(_AXIS_1,))
def softmax_1(input: np.ndarray, *, axis: int) -> np.ndarray:
    """Softmax before opset 13 (versions 1 and 11): the input is coerced to 2-D at ``axis``
    (default 1): [a_0 * ... * a_{axis-1}, a_axis * ... * a_{n-1}], and each row (the whole
    flattened trailing block) is normalised; the output has the input's shape."""
    return _coerced_2d(_softmax, input, axis)


@op("LogSoftmax", since=13, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(_AXIS_13,))
def log_softmax(input: np.ndarray, *, axis: int) -> np.ndarray:
    """output = (x - max) - log(sum(exp(x - max))) along ``axis`` (default -1); float."""
    return _along_axis(_log_softmax, input, axis)


@op("LogSoftmax", since=1, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(_AXIS_1,))
def log_softmax_1(input: np.ndarray, *, axis: int) -> np.ndarray:
    """LogSoftmax before opset 13 (versions 1 and 11): coerced to 2-D at ``axis`` (default
    1) and normalised over each flattened trailing block."""
    return _coerced_2d(_log_softmax, input, axis)


@op("Hardmax", since=13, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(_AXIS_13,))
def hardmax(input: np.ndarray, *, axis: int) -> np.ndarray:
    """output = 1 at the first occurrence of the maximum along ``axis`` (default -1), 0
    elsewhere; float. Ties go to the first (lowest-index) element; a NaN counts as the max."""
    return _along_axis(_hardmax, input, axis)


@op("Hardmax", since=1, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(_AXIS_1,))
def hardmax_1(input: np.ndarray, *, axis: int) -> np.ndarray:
    """Hardmax before opset 13 (versions 1 and 11): coerced to 2-D at ``axis`` (default 1);
    one 1 per row of the flattened trailing block, at the first maximum."""
    return _coerced_2d(_hardmax, input, axis)


# --------------------------------------------------------------------------------------------
# opset-1 versions (consumed_inputs; Selu-1 also had other defaults)
# --------------------------------------------------------------------------------------------

_LEGACY: tuple[Any, ...] = (
    with_consumed_inputs(relu),
    with_consumed_inputs(leaky_relu),
    with_consumed_inputs(prelu_6),
    with_consumed_inputs(elu),
    with_consumed_inputs(sigmoid),
    with_consumed_inputs(hard_sigmoid),
    with_consumed_inputs(selu, attrs=(
        Attr("alpha", "float", 1.673200011253357, "scale of the negative part"),
        Attr("gamma", "float", 1.0506999492645264, "overall scale"))),
)

OPS = (
    relu, leaky_relu, prelu, prelu_6, thresholded_relu, elu, selu, celu, shrink,
    sigmoid, hard_sigmoid, hard_swish, softplus, softsign, gelu, mish, swish, swiglu,
    softmax, softmax_1, log_softmax, log_softmax_1, hardmax, hardmax_1,
    *_LEGACY,
)
