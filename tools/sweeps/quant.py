"""QuantizeLinear and DequantizeLinear (per tensor, per axis, blocked; every target type of
each opset; ties to even; saturation; output_dtype and precision), DynamicQuantizeLinear and
QLinearMatMul (per-tensor, per-row and per-column parameters, batch broadcasting)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from refmnn.dtypes import DType
from refmnn.ops.quant import block_param, quantize_quotient

from ._sweep import Sample, SampleContext, Sweep

_FLOAT8 = (DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2, DType.float8e5m2fnuz)
_INT4 = (DType.int4, DType.uint4)


def _codes(opset: int) -> list[DType]:
    """The quantized types of QuantizeLinear / DequantizeLinear at ``opset``."""
    types = [DType.uint8, DType.int8]
    types += list(_FLOAT8) if opset >= 19 else []
    types += [DType.int16, DType.uint16, *_INT4] if opset >= 21 else []
    types += [DType.float4e2m1] if opset >= 23 else []
    types += [DType.int2, DType.uint2] if opset >= 25 else []
    return types


def _is_int(dtype: DType) -> bool:
    return dtype not in _FLOAT8 and dtype is not DType.float4e2m1


def _int_range(dtype: DType) -> tuple[int, int]:
    info = ml_dtypes.iinfo(dtype.numpy)
    return int(info.min), int(info.max)


def _layout(ctx: SampleContext, opset: int, x_shape: tuple[int, ...]
            ) -> tuple[tuple[int, ...], dict[str, int]]:
    """A random granularity valid at ``opset`` for an input of ``x_shape``: (the scale's shape,
    the attributes). Per tensor (a scalar, or [1]); per axis (13+, a negative axis now and
    then); blocked (21+: the axis dim becomes ceil(D / block_size), block_size in 1..D + 1)."""
    rng = ctx.rng
    rank = len(x_shape)
    kinds = ["tensor"] + (["axis", "axis"] if opset >= 13 and rank else []) \
        + (["block", "block"] if opset >= 21 and rank else [])
    kind = str(rng.choice(kinds))
    attrs: dict[str, int] = {}
    if kind == "tensor":
        if opset >= 13 and rng.random() < 0.2:
            attrs["axis"] = int(rng.integers(-rank, rank)) if rank else 0
        return ((), attrs) if rng.random() < 0.75 else ((1,), attrs)
    axis = int(rng.integers(0, rank))
    if axis != 1 or rng.random() < 0.5:
        attrs["axis"] = axis - rank if rng.random() < 0.4 else axis
    if kind == "axis":
        return (x_shape[axis],), attrs
    block = int(rng.integers(1, x_shape[axis] + 2))
    attrs["block_size"] = block
    scale = list(x_shape)
    scale[axis] = -(-x_shape[axis] // block)
    return tuple(scale), attrs


def _shape(ctx: SampleContext) -> tuple[int, ...]:
    """Rank 0-4 (rank 0 seldom), dims 1-5 (0 seldom)."""
    rng = ctx.rng
    rank = int(rng.choice([0, 1, 2, 2, 3, 3, 4]))
    dims = [int(d) for d in rng.integers(1, 6, rank)]
    if dims and rng.random() < 0.04:
        dims[int(rng.integers(0, rank))] = 0
    return tuple(dims)


def _scales(ctx: SampleContext, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Positive scales: mostly powers of two (x / scale exact, so ties stay ties), now and then
    arbitrary values in [0.01, 2)."""
    rng = ctx.rng
    if dtype is DType.float8e8m0 or rng.random() < 0.7:
        values = 2.0 ** rng.integers(-4, 3, shape)
    else:
        values = rng.uniform(0.01, 2.0, shape)
    if dtype is DType.int32:
        values = np.maximum(np.rint(values), 1)
    return np.asarray(values, dtype=np.float64).astype(dtype.numpy)


def _expand(param: np.ndarray, x_shape: tuple[int, ...], attrs: dict[str, int]) -> np.ndarray:
    """A scale or zero point laid out over x's shape, as QuantizeLinear lays it (to draw x
    from the real numbers it scales to)."""
    return np.broadcast_to(block_param(param, x_shape, attrs.get("axis", 1),
                                       attrs.get("block_size", 0)), x_shape)


def _grid(dtype: DType) -> np.ndarray:
    """The finite values of a narrow float type, ascending (float64)."""
    count = 16 if dtype is DType.float4e2m1 else 256
    values = np.arange(count, dtype=np.uint8).view(dtype.numpy).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def _narrow_floats(ctx: SampleContext, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Real numbers for a narrow float type: its values, midpoints of two neighbours (ties to
    even), values past its largest one and (in a fifth of the samples) +-inf and NaN."""
    rng = ctx.rng
    grid = _grid(dtype)
    at = rng.integers(0, len(grid) - 1, shape)
    pick = rng.random(shape)
    out = np.where(pick < 0.4, grid[at], (grid[at] + grid[at + 1]) / 2)
    over = np.where(rng.random(shape) < 0.5, -1.0, 1.0) * grid[-1] * rng.uniform(1.0, 3.0, shape)
    out = np.where((pick > 0.85) & (pick < 0.95), over, out)
    if rng.random() < 0.2:
        out = np.where(pick >= 0.97, rng.choice([np.inf, -np.inf, np.nan], shape), out)
    return out


def draw_quantize(ctx: SampleContext, opset: int) -> Sample:
    """A random QuantizeLinear: x in the context's dtype of rank 0-4; a target type of the
    opset (integers: x drawn as scale * (k + f), k spanning past the type's range, f an exact
    0 or +-0.5 or random; narrow floats: representable values, midpoints, overflows, +-inf,
    NaN, with saturate 0 or 1); the zero point given, or left out (output_dtype naming the
    type from 21, always for the types onnxruntime cannot be fed); a scale of x's dtype
    (before 23) or any allowed type (float8e8m0 from 24), per tensor, per axis or blocked;
    precision now and then from 23."""
    rng = ctx.rng
    x_type = DType.from_numpy(ctx.dtype)
    target = DType(rng.choice([t.value for t in _codes(opset)]))
    shape = _shape(ctx)
    scale_shape, attrs = _layout(ctx, opset, shape)
    if opset < 19:
        scale_type = DType.float32
    elif opset < 23:
        scale_type = x_type
    else:
        scale_types = [DType.float32, DType.float16, DType.bfloat16, DType.int32] + (
            [DType.float8e8m0] if opset >= 24 else [])
        scale_type = x_type if rng.random() < 0.5 else DType(rng.choice(
            [t.value for t in scale_types]))
        if rng.random() < 0.15:
            attrs["precision"] = int(rng.choice([1, 10, 16]))
    scale = _scales(ctx, scale_shape, scale_type)
    zero: np.ndarray | None = None
    if _is_int(target):
        low, high = _int_range(target)
        span = high - low
        if rng.random() < 0.7 or opset < 21 and target is not DType.uint8:
            zero = rng.integers(low + span // 4, high - span // 4 + 1, scale_shape).astype(
                target.numpy)
        k = rng.integers(low - 3 - span // 8, high + 4 + span // 8, shape)
        k = k - (0 if zero is None else _expand(zero.astype(np.int64), shape, attrs))
        f = rng.choice([0.0, 0.5, -0.5, 0.25, 0.0], shape) + np.where(
            rng.random(shape) < 0.2, rng.uniform(-0.5, 0.5, shape), 0.0)
        real = (k + f) * _expand(scale.astype(np.float64), shape, attrs)
    else:
        if rng.random() < 0.2 or opset < 21:  # before 21 only the zero point names the type
            zero = np.zeros(scale_shape, target.numpy)
        real = _narrow_floats(ctx, target, shape) * _expand(scale.astype(np.float64), shape,
                                                          attrs)
        if target is not DType.float4e2m1 and rng.random() < 0.7:
            attrs["saturate"] = int(rng.integers(0, 2))
    if _is_int(target):  # within x's type: an infinite x has no code the spec names
        top = 2e9 if x_type is DType.int32 else float(ml_dtypes.finfo(ctx.dtype).max)
        real = np.clip(real, -top, top)
    with np.errstate(over="ignore", invalid="ignore"):
        x = (np.rint(np.nan_to_num(real, posinf=2e9, neginf=-2e9).clip(-2e9, 2e9))
             if x_type is DType.int32 else real).astype(ctx.dtype)
    if opset >= 21 and (zero is None and (target is not DType.uint8 or rng.random() < 0.3)
                        or rng.random() < 0.15):
        attrs["output_dtype"] = target.value
    if target in _INT4 or target.value >= DType.float4e2m1.value:
        zero = None  # sub-byte types cannot be fed to onnxruntime: output_dtype names them
        attrs["output_dtype"] = target.value
    inputs = [x, scale] + ([zero] if zero is not None else [])
    return Sample(tuple(inputs), attrs)


def draw_dequantize(ctx: SampleContext, opset: int) -> Sample:
    """A random DequantizeLinear: x of a quantized type of the opset (int32 too, without a zero
    point) and rank 0-4, over its whole range; a zero point of x's type or none; a scale of the
    context's dtype (float8e8m0 from 24, with output_dtype) per tensor, per axis or blocked;
    output_dtype now and then from 23."""
    rng = ctx.rng
    x_type = DType(rng.choice([t.value for t in _codes(opset) + [DType.int32]]))
    shape = _shape(ctx)
    scale_shape, attrs = _layout(ctx, opset, shape)
    scale_type = DType.from_numpy(ctx.dtype)
    if opset >= 24 and rng.random() < 0.1:
        scale_type = DType.float8e8m0
    scale = _scales(ctx, scale_shape, scale_type)
    if scale_type is not DType.float32 and scale_type is not DType.from_numpy(ctx.dtype) or (
            opset >= 23 and rng.random() < 0.2):
        attrs["output_dtype"] = int(rng.choice([1, 10, 16]))
    zero: np.ndarray | None = None
    if _is_int(x_type):
        low, high = _int_range(x_type) if x_type is not DType.int32 else (-2 ** 20, 2 ** 20)
        x = rng.integers(low, high + 1, shape).astype(x_type.numpy)
        if x_type is not DType.int32 and rng.random() < 0.7:
            zero = rng.integers(low, high + 1, scale_shape).astype(x_type.numpy)
    else:
        x = np.asarray(_narrow_floats(ctx, x_type, shape), np.float64)
        x = np.where(np.abs(x) > float(ml_dtypes.finfo(x_type.numpy).max), 0.0, x)
        x = x.astype(np.float32).astype(x_type.numpy)
        if rng.random() < 0.2:
            zero = np.zeros(scale_shape, x_type.numpy)
    inputs = [x, scale] + ([zero] if zero is not None else [])
    return Sample(tuple(inputs), attrs)


def draw_dynamic_quantize(ctx: SampleContext, opset: int) -> Sample:
    """A random DynamicQuantizeLinear: float32 x of rank 0-4 from a range that straddles 0, is
    all positive, all negative or all zero, of widths from 1e-3 to 1e3; values at exact
    multiples of the range / 255 (ties in x / y_scale) now and then."""
    rng = ctx.rng
    shape = _shape(ctx)
    width = 10.0 ** rng.uniform(-3, 3)
    kind = rng.choice(["straddle", "positive", "negative", "zeros", "grid"])
    if kind == "zeros":
        x = np.zeros(shape)
    elif kind == "grid":
        x = rng.integers(-128, 128, shape) * 0.5 * 2.0 ** int(rng.integers(-6, 4))
    else:
        x = rng.uniform(-width, width, shape)
        x = np.abs(x) if kind == "positive" else -np.abs(x) if kind == "negative" else x
    return Sample((np.asarray(x, np.float32),), outputs=3)


def draw_qlinear_matmul(ctx: SampleContext, opset: int) -> Sample:
    """A random QLinearMatMul: a, b of ranks 1-4 with broadcasting batch dims (as MatMul), each
    int8 or uint8 over its whole range, y int8 or uint8 (float8 a, b and y from 21); scales
    float32 (float16 from 21) per tensor, a's per row ([M] for a 2-D a, [..., M, 1] batched)
    and b's per column ([N], [..., 1, N]); y_scale chosen so the outputs span y's range and
    past it; y's zero point anywhere in range."""
    rng = ctx.rng
    rank_a, rank_b = (int(v) for v in rng.integers(1, 5, 2))
    m, k, n = (int(v) for v in rng.integers(1, 6, 3))
    full = [int(d) for d in rng.integers(1, 4, max(rank_a, rank_b, 2) - 2)]
    batch_a = tuple(1 if rng.random() < 0.3 else d for d in full[len(full) - max(rank_a - 2, 0):])
    batch_b = tuple(1 if rng.random() < 0.3 else d for d in full[len(full) - max(rank_b - 2, 0):])
    shape_a = (k,) if rank_a == 1 else (*batch_a, m, k)
    shape_b = (k,) if rank_b == 1 else (*batch_b, k, n)
    kinds = [DType.int8, DType.uint8]
    scale_type = DType.float32
    if opset >= 21:
        kinds_f8 = [DType.float8e4m3fn, DType.float8e5m2]
        if rng.random() < 0.15:
            kinds = kinds_f8
        if rng.random() < 0.2:
            scale_type = DType.float16
    types = [DType(rng.choice([t.value for t in kinds])) for _ in range(3)]
    if rng.random() < 0.7:  # onnxruntime runs y of a's type (and b int8 or a's type)
        types[2] = types[0]

    def tensor(shape: tuple[int, ...], dtype: DType) -> np.ndarray:
        if dtype in _FLOAT8:
            return rng.uniform(-4, 4, shape).astype(np.float32).astype(dtype.numpy)
        low, high = _int_range(dtype)
        return rng.integers(low, high + 1, shape).astype(dtype.numpy)

    def param(row: bool, shape: tuple[int, ...], dtype: DType) -> tuple[np.ndarray, np.ndarray]:
        pick = rng.random()
        if pick < 0.6 or len(shape) < 2:
            pshape: tuple[int, ...] = ()
        elif len(shape) == 2:
            pshape = (shape[0],) if row else (shape[1],)
        else:
            pshape = (*shape[:-2], shape[-2], 1) if row else (*shape[:-2], 1, shape[-1])
        scale = rng.uniform(0.005, 0.05, pshape).astype(np.float32).astype(scale_type.numpy)
        zero = np.zeros(pshape, dtype.numpy) if dtype in _FLOAT8 else tensor(pshape, dtype)
        return scale, zero

    a, b = tensor(shape_a, types[0]), tensor(shape_b, types[1])
    a_scale, a_zero = param(True, shape_a, types[0])
    b_scale, b_zero = param(False, shape_b, types[1])
    y_scale = np.asarray(rng.uniform(0.005, 0.05) * np.sqrt(k), np.float32).astype(
        scale_type.numpy)
    y_zero = np.zeros((), types[2].numpy) if types[2] in _FLOAT8 else tensor((), types[2])
    return Sample((a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero))


_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _quotient(x: np.ndarray, scale: np.ndarray, attrs: dict) -> np.ndarray:
    """x / y_scale (float64) as the reference divides it."""
    with np.errstate(all="ignore"):
        return quantize_quotient(x, scale, attrs.get("axis", 1), attrs.get("block_size", 0),
                                 attrs.get("precision", 0)).astype(np.float64)


def known_quantize(sample: Sample, opset: int, peer: str) -> str | None:
    """The peers' settled differences on QuantizeLinear (see each reason)."""
    x, scale = sample.inputs[0], sample.inputs[1]
    zero = sample.inputs[2] if len(sample.inputs) > 2 else None
    attrs = dict(sample.attrs)
    code = attrs.get("output_dtype") or (DType.from_numpy(zero.dtype).value if zero is not None
                                         else DType.uint8.value)
    target = DType(code)
    if peer == "onnxruntime" and 19 <= opset < 23 and x.dtype in _HALF:
        return ("onnxruntime 1.32 divides float16/bfloat16 x by its scale in float32 and rounds "
                "that quotient; refmnn (as onnx.reference) rounds x / y_scale to the operands' "
                "type first, as an ONNX Div of two float16 tensors does (the spec of 19 and 21 "
                "names no precision; 23 says y_scale's type sets the division's precision)")
    if peer == "onnx.reference" and opset >= 23 and not attrs.get("precision") and \
            scale.dtype in _HALF and x.dtype != scale.dtype:
        return ("onnx.reference 1.23.2 divides x by a float16/bfloat16 y_scale of another type "
                "in NumPy's promoted type (float32); QuantizeLinear-23: 'The type of y_scale "
                "determines the precision of the division operation'")
    quotient = _quotient(x, scale, attrs)
    if peer == "onnx.reference" and _is_int(target) and np.isinf(quotient).any():
        return ("onnx.reference 1.23.2 casts an infinite quotient (a float16 x / y_scale past "
                "65504) to int32, which gives INT_MIN and so the type's lowest code; the spec "
                "saturates y to the type's range, +inf to its top")
    if peer == "onnxruntime" and target in _FLOAT8 and attrs.get("saturate", 1) == 0:
        grid = _grid(target)
        limit = grid[-1] + (grid[-1] - grid[-2]) / 2
        if (np.abs(quotient) >= limit).any():
            return ("onnxruntime 1.32's non-saturating float8 conversion: an out-of-range value "
                    "or infinity gives 448 for float8e4m3fn and NaN for float8e5m2, where "
                    "Cast's saturate=0 table gives NaN and +-inf (see tests/test_reference_"
                    "oracles.py, the float8e5m2 tie past the largest value)")
    return None


def known_dynamic_quantize(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference's y_scale for an all-zero x (see the reason)."""
    if peer == "onnx.reference" and not np.asarray(sample.inputs[0]).any():
        return ("x all zeros: the spec's y_scale = (0 - 0) / 255 = 0 divides by zero; refmnn "
                "(as onnxruntime) documents y_scale = 1 there, onnx.reference 1.23.2 gives 1/255")
    return None


def known_qlinear_matmul(sample: Sample, opset: int, peer: str) -> str | None:
    """onnx.reference's broadcasting of the parameters and its float16 requantization."""
    a, a_scale, a_zero = sample.inputs[:3]
    if peer == "onnx.reference" and a_scale.dtype == np.float16:
        return ("onnx.reference 1.23.2 requantizes in float16 when the scales are float16 "
                "(one code off near a .5); the formula is the real-number one, which refmnn "
                "evaluates in float64 (tests/test_reference_oracles.py, requantization)")
    params = sample.inputs[1:3] + sample.inputs[4:6]
    if peer == "onnx.reference" and (a.ndim == 1 or sample.inputs[3].ndim == 1) and any(
            p.ndim >= 2 for p in params):
        return ("onnx.reference 1.23.2 broadcasts an N-D scale or zero point against the product "
                "after matmul has removed a 1-D operand's axis, so the axis comes back or the "
                "scales meet the wrong axis (shape (1, 1, 1) for [1, 1, 3] @ [3]); matmul "
                "semantics give (1, 1) (tests/test_reference_oracles.py, 1-D operand)")
    if peer == "onnx.reference" and a.ndim >= 2 and (a_scale.ndim == 1 and a_scale.size > 1
                                                     or a_zero.ndim == 1 and a_zero.size > 1):
        return ("onnx.reference 1.23.2 applies an M-vector a_scale / a_zero_point along a's "
                "last axis (NumPy broadcasting); the spec: 'If the input is 2D of shape [M, K] "
                "then zero point and scale tensor may be an M element vector ... for per row "
                "quantization'")
    return None


SWEEPS = (
    Sweep("QuantizeLinear", (10, 13), draw_quantize, dtypes=(DType.float32, DType.int32),
          known=known_quantize),
    Sweep("QuantizeLinear", (19, 21, 23, 24, 25), draw_quantize,
          dtypes=(DType.float32, DType.float16, DType.bfloat16, DType.int32),
          known=known_quantize),
    Sweep("DequantizeLinear", (10, 13), draw_dequantize),
    Sweep("DequantizeLinear", (19, 21, 23, 24, 25), draw_dequantize,
          dtypes=(DType.float32, DType.float16, DType.bfloat16)),
    Sweep("DynamicQuantizeLinear", (11,), draw_dynamic_quantize, known=known_dynamic_quantize),
    Sweep("QLinearMatMul", (10, 21), draw_qlinear_matmul, dtypes=(DType.uint8,),
          known=known_qlinear_matmul),
)
