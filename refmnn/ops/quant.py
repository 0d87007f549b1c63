"""Quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul.

The linear quantization scheme maps a real value to an integer (or a narrow float) code::

    q = saturate(round_half_even(x / scale) + zero_point)         (QuantizeLinear)
    x = (q - zero_point) * scale                                   (DequantizeLinear)

Granularity is set by the shape of ``scale`` (``zero_point`` has the same shape):

* per tensor: a scalar (or a 1-element tensor);
* per axis: a 1-D tensor of length ``x.shape[axis]``;
* blocked (since 21): ``x``'s shape with ``ceil(D_axis / block_size)`` on ``axis``: each scale
  covers ``block_size`` consecutive elements along ``axis`` (the last block may be short).

Saturation clips integer codes to the target range (uint8 [0, 255], int8 [-128, 127], uint16,
int16, uint4 [0, 15], int4 [-8, 7], uint2 [0, 3], int2 [-2, 1]). For float8 targets
``saturate=1`` (the default) clamps out-of-range values and infinities to the largest finite
value; ``saturate=0`` converts as IEEE would (overflow gives inf for float8e5m2 and NaN for the
formats without infinity). float4e2m1 and float6 have no infinity or NaN and always saturate.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, flag, op

_FLOAT8 = frozenset(np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                          ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz))
_ALWAYS_SATURATE = frozenset(np.dtype(t) for t in (ml_dtypes.float4_e2m1fn,
                                                   ml_dtypes.float6_e2m3fn,
                                                   ml_dtypes.float6_e3m2fn))
_NARROW_INT = frozenset(np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2,
                                              ml_dtypes.uint2))

_AXIS = Attr("axis", "int", 1, "the quantization axis for per-axis and blocked scales")
_SATURATE = flag("saturate", 1, "float8 targets: 1 clamps to the finite range")
_BLOCK = Attr("block_size", "int", 0, "blocked quantization: elements per scale along axis")
_OUT_DTYPE = Attr("output_dtype", "int", 0, "ONNX dtype code of y (0: from the zero point)")
_PRECISION = Attr("precision", "int", 0, "ONNX dtype code of the division (0: y_scale's)")


def integer_range(dtype: np.dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype, the ml_dtypes int4/uint4/int2/uint2 included."""
    info = ml_dtypes.iinfo(dtype) if dtype in _NARROW_INT else np.iinfo(dtype)
    return int(info.min), int(info.max)


def requantize(scaled: np.ndarray, zero_point: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``saturate(round_half_even(scaled) + zero_point)`` into integer ``dtype`` (scaled: the
    float64 ``acc * scales`` of QLinearConv and QLinearMatMul)."""
    low, high = integer_range(dtype)
    y = np.rint(scaled) + np.asarray(zero_point, np.float64)
    return np.clip(y, low, high).astype(dtype)


def to_narrow_float(v: np.ndarray, dtype: np.dtype, saturate: bool) -> np.ndarray:
    """Round float32 ``v`` to a float8/float4/float6 ``dtype``, half to even.

    saturate: out-of-range values and +-inf clamp to +-(largest finite); NaN stays NaN.
    Without it, overflow follows the format (inf for float8e5m2, NaN for the others).
    """
    dtype = np.dtype(dtype)
    if saturate or dtype in _ALWAYS_SATURATE:
        top = float(ml_dtypes.finfo(dtype).max)
        v = np.clip(v, -top, top)
    return v.astype(np.float32).astype(dtype)


def block_param(value: np.ndarray, shape: tuple[int, ...], axis: int,
                block_size: int) -> np.ndarray:
    """Shape a scale or zero point to broadcast against ``shape`` (the input's).

    Per tensor: a scalar. Per axis (1-D, block_size 0): length ``shape[axis]`` laid along
    ``axis``. Blocked: each entry repeated ``block_size`` times along ``axis``, then cut to
    ``shape[axis]``.
    """
    value = np.asarray(value)
    if value.size == 1 and (value.ndim <= 1 or block_size <= 0):
        return value.reshape(())
    rank = len(shape)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    if block_size <= 0:
        if value.ndim != 1 or value.shape[0] != shape[axis]:
            raise ValueError(f"per-axis parameter of shape {value.shape} does not fit axis {axis}"
                             f" of {shape}")
        return value.reshape([shape[axis] if i == axis else 1 for i in range(rank)])
    if value.ndim != rank or -(-shape[axis] // block_size) != value.shape[axis]:
        raise ValueError(f"blocked parameter of shape {value.shape} does not fit {shape} with "
                         f"block_size {block_size} on axis {axis}")
    value = np.repeat(value, block_size, axis=axis)
    return np.take(value, np.arange(shape[axis]), axis=axis)


def _divide(x: np.ndarray, scale: np.ndarray, precision: np.dtype) -> np.ndarray:
    """x / scale as a division in ``precision``: both operands converted to it (a float32 x
    beyond float16's range becomes +-inf there), the quotient rounded to it; returned as
    float32 (float64 if precision is)."""
    if precision == np.float64:
        return x.astype(np.float64) / scale.astype(np.float64)
    if precision != np.float32:
        with np.errstate(over="ignore"):  # beyond the type's range: +-inf, as intended
            x, scale = x.astype(precision), scale.astype(precision)
    quotient = x.astype(np.float32) / scale.astype(np.float32)
    if precision != np.float32:
        # float16 / bfloat16: a float32 quotient rounded once more is the correctly rounded
        # quotient (float32 has more than twice their precision bits), so this is exact IEEE.
        quotient = quotient.astype(precision).astype(np.float32)
    return quotient


def quantize_quotient(x: np.ndarray, y_scale: np.ndarray, axis: int, block_size: int,
                      precision: int) -> np.ndarray:
    """QuantizeLinear's x / y_scale (:func:`_divide`): in ``precision`` when set (an ONNX dtype
    code), else in y_scale's type -- float32 for an int32 or float8e8m0 scale."""
    scale = block_param(y_scale, x.shape, axis, block_size)
    if precision:
        division = DType.from_onnx(precision).numpy
    elif scale.dtype in (np.float16, ml_dtypes.bfloat16, np.float64):
        division = scale.dtype
    else:
        division = np.dtype(np.float32)
    return _divide(x, scale, np.dtype(division))


def _quantize(x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None, axis: int,
              saturate: int, block_size: int, output_dtype: int, precision: int) -> np.ndarray:
    target = _target_dtype(y_zero_point, output_dtype)
    quotient = quantize_quotient(x, y_scale, axis, block_size, precision)
    zero = (np.zeros((), np.float32) if y_zero_point is None else
            block_param(y_zero_point, x.shape, axis, block_size).astype(np.float32))
    if target.kind in "iu" or target in _NARROW_INT:
        low, high = integer_range(target)
        code = np.clip(np.rint(_nan_as_zero(quotient)) + zero, low, high)
        return code.astype(np.int32).astype(target)
    return to_narrow_float(quotient + zero, target, bool(saturate))


def _target_dtype(y_zero_point: np.ndarray | None, output_dtype: int) -> np.dtype:
    """y's dtype: output_dtype when set (it must agree with the zero point), else the zero
    point's, else uint8."""
    if output_dtype:
        target = DType.from_onnx(output_dtype).numpy
        if y_zero_point is not None and y_zero_point.dtype != target:
            raise ValueError(f"output_dtype {target} differs from y_zero_point's "
                             f"{y_zero_point.dtype}")
        return target
    return np.dtype(np.uint8) if y_zero_point is None else y_zero_point.dtype


def _quantize_rule(ctx: InferContext, x: TensorType | None, scale: TensorType | None = None,
                   zero_point: TensorType | None = None, **attrs: Any) -> TensorType:
    code = attrs.get("output_dtype", 0)
    dtype = (DType.from_onnx(code) if code else
             dtype_of(zero_point) if zero_point is not None else DType.uint8)
    return TensorType(dtype, shape_of(x))


@op("QuantizeLinear", since=10, inputs=("x", "y_scale", "y_zero_point?"), outputs=("y",),
    infer=_quantize_rule)
def quantize_linear_10(x: np.ndarray, y_scale: np.ndarray,
                       y_zero_point: np.ndarray | None = None) -> np.ndarray:
    """QuantizeLinear-10: per-tensor only; x float32 or int32, y uint8/int8 (see version 23)."""
    return _quantize(x, y_scale, y_zero_point, 1, 1, 0, 0, 0)


@op("QuantizeLinear", since=13, inputs=("x", "y_scale", "y_zero_point?"), outputs=("y",),
    attrs=(_AXIS,), infer=_quantize_rule)
def quantize_linear_13(x: np.ndarray, y_scale: np.ndarray,
                       y_zero_point: np.ndarray | None = None, *, axis: int) -> np.ndarray:
    """QuantizeLinear-13: adds per-axis scales along ``axis`` (see version 23)."""
    return _quantize(x, y_scale, y_zero_point, axis, 1, 0, 0, 0)


@op("QuantizeLinear", since=19, inputs=("x", "y_scale", "y_zero_point?"), outputs=("y",),
    attrs=(_AXIS, _SATURATE), infer=_quantize_rule)
def quantize_linear_19(x: np.ndarray, y_scale: np.ndarray,
                       y_zero_point: np.ndarray | None = None, *, axis: int,
                       saturate: int) -> np.ndarray:
    """QuantizeLinear-19: adds float8 targets, ``saturate``, float16/bfloat16 x and scale."""
    return _quantize(x, y_scale, y_zero_point, axis, saturate, 0, 0, 0)


@op("QuantizeLinear", since=21, inputs=("x", "y_scale", "y_zero_point?"), outputs=("y",),
    attrs=(_AXIS, _SATURATE, _BLOCK, _OUT_DTYPE), infer=_quantize_rule)
def quantize_linear_21(x: np.ndarray, y_scale: np.ndarray,
                       y_zero_point: np.ndarray | None = None, *, axis: int, saturate: int,
                       block_size: int, output_dtype: int) -> np.ndarray:
    """QuantizeLinear-21: adds blocked scales, output_dtype, int16/uint16/int4/uint4 targets."""
    return _quantize(x, y_scale, y_zero_point, axis, saturate, block_size, output_dtype, 0)


@op("QuantizeLinear", since=23, inputs=("x", "y_scale", "y_zero_point?"), outputs=("y",),
    attrs=(_AXIS, _SATURATE, _BLOCK, _OUT_DTYPE, _PRECISION), infer=_quantize_rule)
def quantize_linear_23(x: np.ndarray, y_scale: np.ndarray,
                       y_zero_point: np.ndarray | None = None, *, axis: int, saturate: int,
                       block_size: int, output_dtype: int, precision: int) -> np.ndarray:
    """``y = saturate(round_half_even(x / y_scale) + y_zero_point)``, elementwise.

    x: any shape, float32/float16/bfloat16/int32; y_scale: scalar, 1-D (per axis) or blocked
    (see the module docstring); y_zero_point: y_scale's shape, y's dtype. y's dtype is
    ``output_dtype`` if set, else y_zero_point's, else uint8: an integer type (codes clipped
    to its range, +-inf to its ends and NaN to the zero point), a float8 type (``saturate``),
    or float4e2m1 / float6 (always saturating).
    The division is done in ``precision`` when set, else in y_scale's type (float32 for an
    int32 or float8e8m0 scale): "the precision of the division operation", read as the
    precision of a Div -- x and y_scale converted to that type (a float32 x beyond float16's
    range is +-inf there and saturates), the quotient rounded to it; onnxruntime 1.32 and
    onnx.reference (given ``precision``) do the same. Versions 24, 25 and 28 only add types
    (float8e8m0 scales; int2/uint2; float6).
    """
    return _quantize(x, y_scale, y_zero_point, axis, saturate, block_size, output_dtype,
                     precision)


# -- DequantizeLinear ------------------------------------------------------------------------------

def _dequantize(x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray | None, axis: int,
                block_size: int, output_dtype: int) -> np.ndarray:
    out = DType.from_onnx(output_dtype).numpy if output_dtype else x_scale.dtype
    if out not in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16):
        raise ValueError(f"DequantizeLinear cannot output {out}; set output_dtype")
    # (x - zp) is exact in float64 and so is its product with a float32 scale up to 29-bit
    # differences: one rounding, to the output type (int32 codes' 33-bit differences are
    # rounded to float64 first, which moves the result only where that lands on a midpoint
    # of the output type). For codes of at most 16 bits, a float32 scale and a
    # float32 output, float32 arithmetic gives the same bits: x - zp (17 bits at most) is exact
    # there too and the float32 product is the exact product rounded once, as is the float64
    # one converted (a (512, 512, 3, 3) int8 weight: 3.8 -> 0.5 ms per tensor, 5.7 -> 0.5 per
    # axis).
    narrow = (x.dtype.kind in "iu" and x.dtype.itemsize <= 2) or x.dtype in _NARROW_INT
    work = np.float32 if narrow and out == np.float32 and x_scale.dtype == np.float32 else \
        np.float64
    values = x.astype(work)
    if x_zero_point is not None:
        values -= block_param(x_zero_point, x.shape, axis, block_size).astype(work)
    values *= block_param(x_scale, x.shape, axis, block_size).astype(work)
    return values.astype(out, copy=False)


def _dequantize_rule(ctx: InferContext, x: TensorType | None, scale: TensorType | None = None,
                     *rest: Any, **attrs: Any) -> TensorType:
    code = attrs.get("output_dtype", 0)
    return TensorType(DType.from_onnx(code) if code else dtype_of(scale), shape_of(x))


@op("DequantizeLinear", since=10, inputs=("x", "x_scale", "x_zero_point?"), outputs=("y",),
    infer=_dequantize_rule)
def dequantize_linear_10(x: np.ndarray, x_scale: np.ndarray,
                         x_zero_point: np.ndarray | None = None) -> np.ndarray:
    """DequantizeLinear-10: per-tensor only, x int8/uint8/int32, y float32 (see version 23)."""
    return _dequantize(x, x_scale, x_zero_point, 1, 0, 0)


@op("DequantizeLinear", since=13, inputs=("x", "x_scale", "x_zero_point?"), outputs=("y",),
    attrs=(_AXIS,), infer=_dequantize_rule)
def dequantize_linear_13(x: np.ndarray, x_scale: np.ndarray,
                         x_zero_point: np.ndarray | None = None, *, axis: int) -> np.ndarray:
    """DequantizeLinear-13: adds per-axis scales; 19 adds float8 x and float16/bfloat16 scales
    (y takes the scale's type). See version 23."""
    return _dequantize(x, x_scale, x_zero_point, axis, 0, 0)


@op("DequantizeLinear", since=21, inputs=("x", "x_scale", "x_zero_point?"), outputs=("y",),
    attrs=(_AXIS, _BLOCK), infer=_dequantize_rule)
def dequantize_linear_21(x: np.ndarray, x_scale: np.ndarray,
                         x_zero_point: np.ndarray | None = None, *, axis: int,
                         block_size: int) -> np.ndarray:
    """DequantizeLinear-21: adds blocked scales and int16/uint16/int4/uint4 x (see 23)."""
    return _dequantize(x, x_scale, x_zero_point, axis, block_size, 0)


@op("DequantizeLinear", since=23, inputs=("x", "x_scale", "x_zero_point?"), outputs=("y",),
    attrs=(_AXIS, _BLOCK, _OUT_DTYPE), infer=_dequantize_rule)
def dequantize_linear_23(x: np.ndarray, x_scale: np.ndarray,
                         x_zero_point: np.ndarray | None = None, *, axis: int, block_size: int,
                         output_dtype: int) -> np.ndarray:
    """``y = (x - x_zero_point) * x_scale``, elementwise.

    x: any shape; integer (8/16/32-bit, int4/uint4, int2/uint2 since 25), float8, float4e2m1 or
    float6 (since 28); x_scale: scalar, 1-D per-axis or blocked (module docstring);
    x_zero_point: x_scale's shape and x's type (0 when omitted; int32 x has none).
    y: ``output_dtype`` when set, else x_scale's type (float32/float16/bfloat16; a float8e8m0
    scale, since 24, needs output_dtype). The difference and product are exact and rounded
    once to y's type (in float32 for codes of up to 16 bits with a float32 scale and output,
    where that gives the same bits; else in float64, where int32 codes' products can be
    rounded twice: it matters only on a midpoint of y's type).
    """
    return _dequantize(x, x_scale, x_zero_point, axis, block_size, output_dtype)


# -- DynamicQuantizeLinear ---------------------------------------------------------------------

@op("DynamicQuantizeLinear", since=11, inputs=("x",), outputs=("y", "y_scale", "y_zero_point"),
    infer=lambda ctx, x: (TensorType(DType.uint8, shape_of(x)), TensorType(DType.float32, ()),
                          TensorType(DType.uint8, ())))
def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quantize float32 x to uint8 with a scale and zero point computed from its range::

        lo, hi  = min(0, min(x)), max(0, max(x))          (the range always includes 0)
        y_scale = (hi - lo) / 255
        y_zero_point = round_half_even(clip(0 - lo / y_scale, 0, 255))
        y = clip(round_half_even(x / y_scale) + y_zero_point, 0, 255)

    All in float32. When hi == lo (x all zeros) the spec divides by zero; here, as in
    onnxruntime, y_scale = 1 and everything quantizes to 0. An empty x behaves as all zeros.
    The min and max propagate NaN, as ONNX's Min and Max do: a NaN in x makes y_scale NaN, and
    an infinity makes it infinite. A quotient with no code (NaN: x / y_scale for a NaN or
    infinite x or scale, and so the zero point itself then) takes 0's code, as in
    QuantizeLinear. x: float32, any shape; y: uint8, x's shape; y_scale: float32 scalar;
    y_zero_point: uint8 scalar.
    """
    x = x.astype(np.float32, copy=False)
    lo = np.minimum(np.float32(0), x.min()) if x.size else np.float32(0)
    hi = np.maximum(np.float32(0), x.max()) if x.size else np.float32(0)
    scale = np.float32((hi - lo) / np.float32(255)) if hi != lo else np.float32(1)
    with np.errstate(invalid="ignore"):  # inf / inf, NaN: codes by the rule above
        zero = np.rint(np.clip(_nan_as_zero(np.float32(0) - lo / scale), 0, 255))
        y = np.clip(np.rint(_nan_as_zero(x / scale)) + zero, 0, 255).astype(np.uint8)
    return y, np.array(scale, np.float32), np.array(zero, np.uint8)


def _nan_as_zero(quotient: np.ndarray) -> np.ndarray:
    """A quotient to be rounded to a code, NaN (no code) read as 0: the zero point's code."""
    return np.where(np.isnan(quotient), quotient.dtype.type(0), quotient)


# -- QLinearMatMul -----------------------------------------------------------------------------

def _row_param(value: np.ndarray, a: np.ndarray) -> np.ndarray:
    """a's scale / zero point: a 1-D vector of length M is per row, i.e. shape (M, 1)."""
    value = np.asarray(value)
    if value.size == 1:
        return value.reshape(())
    if value.ndim == 1 and a.ndim >= 2:
        return value.reshape(-1, 1)
    return value


def _qlinear_matmul(a: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray, b: np.ndarray,
                    b_scale: np.ndarray, b_zero_point: np.ndarray, y_scale: np.ndarray,
                    y_zero_point: np.ndarray) -> np.ndarray:
    # as numpy.matmul: a 1-D a is one row, a 1-D b one column (axes dropped from the result),
    # so per-row and per-column parameters meet acc's rows and columns in every case
    a2, b2 = (a[None, :] if a.ndim == 1 else a), (b[:, None] if b.ndim == 1 else b)
    av = a2.astype(np.float64) - _row_param(a_zero_point, a2).astype(np.float64)
    bv = b2.astype(np.float64) - np.asarray(b_zero_point).astype(np.float64).reshape(
        () if np.size(b_zero_point) == 1 else np.shape(b_zero_point))
    acc = np.matmul(av, bv)      # exact: integer products < 2**16, sums far below 2**53
    scaled = (acc * _row_param(a_scale, a2).astype(np.float64)
              * np.asarray(b_scale, np.float64).reshape(() if np.size(b_scale) == 1 else
                                                        np.shape(b_scale))
              / np.asarray(y_scale, np.float64).reshape(()))
    if b.ndim == 1:
        scaled = scaled[..., 0]
    if a.ndim == 1:
        scaled = scaled[..., 0, :] if b.ndim > 1 else scaled[..., 0]
    zero = np.asarray(y_zero_point).astype(np.float64).reshape(())
    target = y_zero_point.dtype
    if target in _FLOAT8:
        return to_narrow_float((scaled + zero).astype(np.float32), target, True)
    return requantize(scaled, zero, target)


def _qmatmul_rule(ctx: InferContext, a: TensorType | None, a_scale: Any, a_zero: Any,
                  b: TensorType | None, *rest: Any) -> TensorType:
    from refmnn.ops._infer import broadcast_dims

    y_zero = rest[3] if len(rest) > 3 else None
    sa, sb = shape_of(a), shape_of(b)
    if sa is None or sb is None or len(sa) < 1 or len(sb) < 1:
        return TensorType(dtype_of(y_zero), None)
    left = sa if len(sa) > 1 else (1, *sa)
    right = sb if len(sb) > 1 else (*sb, 1)
    batch = broadcast_dims(ctx, left[:-2], right[:-2])
    dims = (*(batch or ()), *(left[-2:-1] if len(sa) > 1 else ()),
            *(right[-1:] if len(sb) > 1 else ()))
    return TensorType(dtype_of(y_zero), dims if batch is not None else None)


_QMM_INPUTS = ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale",
               "y_zero_point")


@op("QLinearMatMul", since=10, inputs=_QMM_INPUTS, outputs=("y",), infer=_qmatmul_rule)
def qlinear_matmul_10(a: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray,
                      b: np.ndarray, b_scale: np.ndarray, b_zero_point: np.ndarray,
                      y_scale: np.ndarray, y_zero_point: np.ndarray) -> np.ndarray:
    """QLinearMatMul-10: int8/uint8 operands, float32 scales (see version 21)."""
    return _qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                           y_zero_point)


@op("QLinearMatMul", since=21, inputs=_QMM_INPUTS, outputs=("y",), infer=_qmatmul_rule)
def qlinear_matmul_21(a: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray,
                      b: np.ndarray, b_scale: np.ndarray, b_zero_point: np.ndarray,
                      y_scale: np.ndarray, y_zero_point: np.ndarray) -> np.ndarray:
    """Quantized matmul with NumPy matmul semantics (batch broadcasting, 1-D operands)::

        acc = (a - a_zero_point) @ (b - b_zero_point)                 (exact)
        y   = saturate(round_half_even(acc * a_scale * b_scale / y_scale) + y_zero_point)

    Scales and zero points are scalars (per tensor) or per row of a (an M-vector or
    [..., M, 1]) and per column of b (a N-vector or [..., 1, N]). ``acc * a_scale * b_scale /
    y_scale`` is computed in float64, so it rounds as the real-number formula does (see
    QLinearConv; a multiplier formed in float32 first rounded 5.49999996 to 6 in a
    conformance sample, where onnxruntime gives 5). y has
    y_zero_point's type; version 21 adds float16/bfloat16 scales and float8 operands (float8
    outputs saturate instead of rounding to an integer).
    """
    return _qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                           y_zero_point)


OPS = (quantize_linear_10, quantize_linear_13, quantize_linear_19, quantize_linear_21,
       quantize_linear_23, dequantize_linear_10, dequantize_linear_13, dequantize_linear_21,
       dequantize_linear_23, dynamic_quantize_linear, qlinear_matmul_10, qlinear_matmul_21)
