"""Quantisation (refmnn/ops/quant.py and the integer convolutions of refmnn/ops/conv.py):
QuantizeLinear/DequantizeLinear per tensor, per axis and blocked, DynamicQuantizeLinear,
QLinearMatMul, ConvInteger and QLinearConv."""

from __future__ import annotations

import numpy as np
import onnx

from refmnn.dtypes import DType
from refmnn.errors import OpError

from refmnn_conformance.case import EXTREMAL, POSITIVE, ErrorSample, OpCase, Sample, SampleContext

_U8, _I8 = np.uint8, np.int8


def _zp(dtype, values):
    return np.array(values).astype(dtype)


def quantize_samples(ctx: SampleContext):
    """ctx.dtype is the float input; outputs go to uint8/int8 (and int16/uint16)."""
    x = ctx.make((3, 4)) * ctx.scalar(20)
    scale = ctx.scalar(0.25)
    yield Sample((x, scale), name="uint8_default")
    yield Sample((x, scale, _zp(_U8, 128)), name="uint8_zero_point")
    yield Sample((x, scale, _zp(_I8, -3)), name="int8_zero_point")
    yield Sample((x, scale, _zp(np.int16, 7)), name="int16")
    yield Sample((ctx.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0]), ctx.scalar(1.0),
                  _zp(_I8, 0)), name="round_half_even_and_saturate")
    yield Sample((x, ctx.make((4,), POSITIVE), _zp(_U8, [1, 2, 3, 4])), {"axis": 1},
                 name="per_axis")
    yield Sample((ctx.make((2, 3, 4)), ctx.make((3,), POSITIVE), _zp(_I8, [0, -1, 1])),
                 {"axis": -2}, name="per_axis_negative")
    yield Sample((ctx.make((4, 6)), ctx.make((4, 2), POSITIVE), _zp(_I8, np.zeros((4, 2)))),
                 {"axis": 1, "block_size": 3}, name="blocked")
    yield Sample((x, scale, _zp(_U8, 0)), {"output_dtype": int(onnx.TensorProto.UINT8),
                                           "saturate": 1}, name="output_dtype_attr")
    if ctx.dtype_name == "float32":
        yield Sample((x, scale, _zp(_I8, 0)), {"precision": int(onnx.TensorProto.FLOAT)},
                     name="precision_attr")
    yield Sample((ctx.make((4, 8), EXTREMAL), scale, _zp(_U8, 10)), name="extremal")
    yield Sample((ctx.make((0, 3)), scale), name="empty")


def quantize_errors(ctx: SampleContext):
    yield ErrorSample(Sample((ctx.make((3, 4)), ctx.make((3,), POSITIVE)), {"axis": 1},
                             name="per_axis_length_mismatch"), OpError, r".")


def dequantize_samples(ctx: SampleContext):
    """ctx.dtype is the quantised input type."""
    x = ctx.make((3, 4), EXTREMAL)
    scale = np.array(0.5, dtype=np.float32)
    yield Sample((x, scale), name="no_zero_point")
    yield Sample((x, scale, np.array(3).astype(ctx.dtype)), name="zero_point")
    yield Sample((x, np.array([0.5, 2.0, 0.25, 1.0], np.float32),
                  np.array([0, 1, 2, 3]).astype(ctx.dtype)), {"axis": 1}, name="per_axis")
    yield Sample((ctx.make((4, 6)), np.full((4, 2), 0.1, np.float32) + np.arange(8, dtype=np.float32)
                  .reshape(4, 2), np.zeros((4, 2)).astype(ctx.dtype)), {"axis": 1, "block_size": 3},
                 name="blocked")
    yield Sample((x, np.array(0.5, dtype=np.float16)), name="float16_scale")
    yield Sample((ctx.make((0, 2)), scale), name="empty")


def dynamic_quantize_samples(ctx: SampleContext):
    yield Sample((ctx.make((3, 4)),), outputs=3, name="mixed_signs")
    yield Sample((ctx.make((3, 4), POSITIVE),), outputs=3, name="positive_only")
    yield Sample((-ctx.make((2, 5), POSITIVE),), outputs=3, name="negative_only")
    yield Sample((np.zeros((2, 2), np.float32),), outputs=3, name="all_zero")
    yield Sample((ctx.make((64, 64)),), outputs=3, name="larger")


def qlinear_matmul_samples(ctx: SampleContext):
    a, b = ctx.make((3, 4)), ctx.make((4, 5))
    f = np.float32
    za, zb, zy = (np.array(v).astype(ctx.dtype) for v in (2, 3, 1))
    yield Sample((a, f(0.05), za, b, f(0.1), zb, f(0.2), zy), name="per_tensor")
    yield Sample((ctx.make((2, 3, 4)), f(0.05), za, b, np.full((5,), 0.1, f),
                  np.arange(5).astype(ctx.dtype), f(0.3), zy), name="batched_per_column")
    yield Sample((ctx.make((2, 256)), f(0.02), za, ctx.make((256, 3)), f(0.02), zb, f(0.5), zy),
                 name="large_k_saturates")


def conv_integer_samples(ctx: SampleContext):
    x, w = ctx.make((1, 2, 5, 5)), ctx.make((3, 2, 3, 3))
    yield Sample((x, w), name="no_zero_points")
    yield Sample((x, w, np.array(3).astype(ctx.dtype), np.array(1).astype(ctx.dtype)),
                 name="zero_points")
    yield Sample((x, w, None, np.array([1, 2, 3]).astype(ctx.dtype)), {"pads": (1, 1, 1, 1)},
                 name="per_channel_weight_zero_point_pads")
    yield Sample((ctx.make((1, 4, 6, 6)), ctx.make((4, 2, 2, 2))), {"group": 2, "strides": (2, 2)},
                 name="groups_strides")


def qlinear_conv_samples(ctx: SampleContext):
    x, w = ctx.make((1, 2, 5, 5)), ctx.make((3, 2, 3, 3))
    f = np.float32
    zx, zw, zy = (np.array(v).astype(ctx.dtype) for v in (2, 0, 5))
    yield Sample((x, f(0.05), zx, w, f(0.1), zw, f(0.2), zy), name="per_tensor")
    yield Sample((x, f(0.05), zx, w, np.array([0.1, 0.2, 0.05], f), np.zeros(3).astype(ctx.dtype),
                  f(0.2), zy, np.array([10, -20, 30], np.int32)), {"pads": (1, 1, 1, 1)},
                 name="per_channel_bias")
    yield Sample((ctx.make((1, 4, 6, 6)), f(0.05), zx, ctx.make((4, 2, 2, 2)), f(0.1), zw,
                  f(0.02), zy), {"group": 2, "strides": (2, 2)}, name="groups_saturates")


_QUANTIZE_TYPES = (DType.float32, DType.float16, DType.bfloat16)  # T1 has no float64 (any version)
CASES = (
    OpCase("QuantizeLinear", dtypes=_QUANTIZE_TYPES, samples=quantize_samples,
           errors=quantize_errors, tags=("quant",)),
    OpCase("DequantizeLinear", dtypes=(DType.uint8, DType.int8, DType.int32, DType.int16),
           samples=dequantize_samples, tags=("quant",)),
    OpCase("DynamicQuantizeLinear", dtypes=(DType.float32,), samples=dynamic_quantize_samples,
           tags=("quant",)),
    OpCase("QLinearMatMul", dtypes=(DType.uint8, DType.int8), samples=qlinear_matmul_samples,
           tags=("quant",)),
    OpCase("ConvInteger", dtypes=(DType.uint8, DType.int8), samples=conv_integer_samples,
           tags=("quant",)),
    OpCase("QLinearConv", dtypes=(DType.uint8, DType.int8), samples=qlinear_conv_samples,
           tags=("quant",)),
)
