"""Random generators: RandomNormal(Like), RandomUniform(Like), Bernoulli, Multinomial.

Source of randomness: with a ``seed`` attribute, a fresh ``np.random.default_rng(seed)``
(seed truncated to an integer, taken modulo 2**64) is made on every call, so a seeded node
gives the same values on every run (ONNX Runtime instead advances one generator across runs);
without a seed the session's generator ``ctx.rng`` is used. The spec says these ops need not
match any other implementation, even with a seed.

Draws are made in float64 and rounded once to the output dtype (float16, float, double and,
from opset 22, bfloat16; the opset-22 versions only added bfloat16, so one definition covers
opsets 1-28 for each op).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType, ValueType
from refmnn.ops._infer import shape_of
from refmnn.ops._schema import Attr, InferContext, OpContext, op


def _generator(seed: float | None, ctx: OpContext) -> np.random.Generator:
    if seed is None:
        return ctx.rng
    return np.random.default_rng(int(seed) % 2**64)


def _float_dtype(code: int | None, fallback: np.dtype) -> np.dtype:
    """The output dtype: the ``dtype`` attribute when given, else ``fallback``; must be a float."""
    dtype = DType.from_onnx(code).numpy if code is not None else np.dtype(fallback)
    if DType.from_numpy(dtype) not in (DType.float16, DType.float32, DType.float64, DType.bfloat16):
        raise TypeError(f"random values must be float16/float/double/bfloat16, not {dtype}")
    return dtype


def _like_dtype(x: ValueType | None, code: int | None) -> DType | None:
    if code is not None:
        return DType.from_onnx(code)
    return x.dtype if isinstance(x, TensorType) else None


_SEED = Attr("seed", "float", None, "seed of a generator made for this node; session rng if absent")
_DTYPE = Attr("dtype", "int", int(DType.float32.value), "output element type (default float)")
_LIKE_DTYPE = Attr("dtype", "int", None, "output element type; the input's dtype when absent")


def _normal(rng: np.random.Generator, shape: Sequence[int], mean: float, scale: float,
            dtype: np.dtype) -> np.ndarray:
    return (rng.standard_normal(tuple(shape)) * scale + mean).astype(dtype)


def _uniform(rng: np.random.Generator, shape: Sequence[int], low: float, high: float,
             dtype: np.dtype) -> np.ndarray:
    return (rng.random(tuple(shape)) * (high - low) + low).astype(dtype)


@op("RandomNormal", since=1, inputs=(), outputs=("output",),
    infer=lambda ctx, *, shape, dtype, **a: TensorType(DType.from_onnx(dtype), tuple(shape)),
    attrs=(Attr("shape", "ints", doc="output shape"), _DTYPE,
           Attr("mean", "float", 0.0, "mean of the distribution"),
           Attr("scale", "float", 1.0, "standard deviation"), _SEED))
def random_normal(*, shape: tuple[int, ...], dtype: int, mean: float, scale: float,
                  seed: float | None, ctx: OpContext) -> np.ndarray:
    """output ~ Normal(mean, scale**2), shape ``shape``, dtype ``dtype`` (a float type)."""
    return _normal(_generator(seed, ctx), shape, mean, scale, _float_dtype(dtype, np.float32))


@op("RandomUniform", since=1, inputs=(), outputs=("output",),
    infer=lambda ctx, *, shape, dtype, **a: TensorType(DType.from_onnx(dtype), tuple(shape)),
    attrs=(Attr("shape", "ints", doc="output shape"), _DTYPE,
           Attr("low", "float", 0.0, "lower bound (inclusive)"),
           Attr("high", "float", 1.0, "upper bound (exclusive)"), _SEED))
def random_uniform(*, shape: tuple[int, ...], dtype: int, low: float, high: float,
                   seed: float | None, ctx: OpContext) -> np.ndarray:
    """output ~ Uniform[low, high), shape ``shape``, dtype ``dtype`` (a float type).

    Rounding to a narrow dtype may produce ``high`` itself.
    """
    return _uniform(_generator(seed, ctx), shape, low, high, _float_dtype(dtype, np.float32))


def _infer_like(ctx: InferContext, x: ValueType | None, *, dtype: int | None,
                **a: object) -> TensorType:
    return TensorType(_like_dtype(x, dtype), shape_of(x))


@op("RandomNormalLike", since=1, inputs=("input",), outputs=("output",), infer=_infer_like,
    attrs=(_LIKE_DTYPE, Attr("mean", "float", 0.0, "mean"), Attr("scale", "float", 1.0, "std"),
           _SEED))
def random_normal_like(input: np.ndarray, *, dtype: int | None, mean: float, scale: float,
                       seed: float | None, ctx: OpContext) -> np.ndarray:
    """output ~ Normal(mean, scale**2) with the shape of ``input`` (any dtype; only its shape is
    read); dtype from the attribute, else the input's dtype (which must then be a float)."""
    out = _float_dtype(dtype, input.dtype)
    return _normal(_generator(seed, ctx), input.shape, mean, scale, out)


@op("RandomUniformLike", since=1, inputs=("input",), outputs=("output",), infer=_infer_like,
    attrs=(_LIKE_DTYPE, Attr("low", "float", 0.0, "lower bound"),
           Attr("high", "float", 1.0, "upper bound"), _SEED))
def random_uniform_like(input: np.ndarray, *, dtype: int | None, low: float, high: float,
                        seed: float | None, ctx: OpContext) -> np.ndarray:
    """output ~ Uniform[low, high) with the shape of ``input``; dtype from the attribute, else
    the input's dtype (which must then be a float)."""
    out = _float_dtype(dtype, input.dtype)
    return _uniform(_generator(seed, ctx), input.shape, low, high, out)


@op("Bernoulli", since=15, inputs=("input",), outputs=("output",), infer=_infer_like,
    attrs=(Attr("dtype", "int", None, "output type (any numeric or bool); input's when absent"),
           _SEED))
def bernoulli(input: np.ndarray, *, dtype: int | None, seed: float | None,
              ctx: OpContext) -> np.ndarray:
    """output = 1 with probability p = input (elementwise), else 0.

    input: float16/float/double (bfloat16 from opset 22) probabilities in [0, 1]. Computed as
    U = RandomUniformLike(input, seed) in the input's dtype, then output = Cast(U < input,
    dtype), so p = 0 never gives 1 and p = 1 always does. ONNX's context-dependent function
    body writes Greater(U, input), which gives 1 with probability 1 - p and contradicts the spec
    text; the spec text (and ONNX Runtime) is followed here. dtype: any numeric type or bool;
    the input's dtype when absent.
    """
    u = _uniform(_generator(seed, ctx), input.shape, 0.0, 1.0, _float_dtype(None, input.dtype))
    out = DType.from_onnx(dtype).numpy if dtype is not None else input.dtype
    return (u < input).astype(out)


def _infer_multinomial(ctx: InferContext, x: ValueType | None, *, dtype: int, sample_size: int,
                       seed: float | None) -> TensorType:
    shape = shape_of(x)
    batch = shape[0] if shape is not None and len(shape) == 2 else None
    return TensorType(DType.from_onnx(dtype), (batch, sample_size))


@op("Multinomial", since=7, inputs=("input",), outputs=("output",), infer=_infer_multinomial,
    attrs=(Attr("dtype", "int", int(DType.int32.value), "int32 (default) or int64"),
           Attr("sample_size", "int", 1, "samples drawn per batch row"), _SEED))
def multinomial(input: np.ndarray, *, dtype: int, sample_size: int, seed: float | None,
                ctx: OpContext) -> np.ndarray:
    """output[b, s] = a class index drawn with probabilities softmax(input[b]).

    input: [batch, classes] unnormalized log-probabilities (float16/float/double). Each of the
    ``sample_size`` draws is independent (with replacement), by inverting the cumulative
    distribution with one uniform number per draw. output: [batch, sample_size], int32/int64.
    """
    out = DType.from_onnx(dtype).numpy
    if out not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"Multinomial dtype must be int32 or int64, not {out}")
    logits = input.astype(np.float64)  # [B, C]
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(probs, axis=1)
    cdf /= cdf[:, -1:]
    u = _generator(seed, ctx).random((input.shape[0], sample_size))  # [B, S]
    index = (u[:, :, None] >= cdf[:, None, :]).sum(axis=2)
    return np.minimum(index, input.shape[1] - 1).astype(out)


OPS = (random_normal, random_uniform, random_normal_like, random_uniform_like, bernoulli,
       multinomial)
