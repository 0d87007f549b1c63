"""Ops that create tensors from attributes, shapes or scalars: Constant, ConstantOfShape,
EyeLike, Range, and the triangle mask Trilu.

Their shape rules read constant inputs with ``ctx.value``, so shape inference resolves the
shape-computation chains of real models through them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refmnn.dtypes import DType, compute_dtype
from refmnn.graph import TensorType
from refmnn.ops._infer import same_as
from refmnn.ops._schema import Attr, InferContext, flag, op
from refmnn.ops._shape_util import (
    dtype_or_none,
    ints,
    known_ints,
    scalar_int,
    shape_or_none,
    static_length,
    zero_of,
)

# =============================================================================== Constant


def _constant_value(value: Any, sparse_value: Any = None, value_float: Any = None,
                    value_floats: Any = None, value_int: Any = None, value_ints: Any = None,
                    value_string: Any = None, value_strings: Any = None) -> np.ndarray:
    given = [(name, v) for name, v in (
        ("value", value), ("sparse_value", sparse_value), ("value_float", value_float),
        ("value_floats", value_floats), ("value_int", value_int), ("value_ints", value_ints),
        ("value_string", value_string), ("value_strings", value_strings)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"Constant needs exactly one value attribute, got {[n for n, _ in given]}")
    name, v = given[0]
    if name in ("value", "sparse_value"):
        return np.asarray(v)
    if name in ("value_float", "value_floats"):
        return np.array(v, dtype=np.float32)
    if name in ("value_int", "value_ints"):
        return np.array(v, dtype=np.int64)
    if name == "value_string":
        return np.array(v, dtype=object)
    out = np.empty(len(v), dtype=object)
    out[:] = list(v)
    return out


def _infer_constant(ctx: InferContext, **attrs: Any) -> TensorType:
    try:
        array = _constant_value(**attrs)
    except ValueError as exc:
        ctx.fail(str(exc))
    return TensorType(DType.from_numpy(array.dtype), tuple(array.shape))


@op("Constant", since=1, inputs=(), outputs=("output",), infer=_infer_constant,
    attrs=(Attr("value", "tensor", doc="the output tensor"),))
def constant_1(*, value: np.ndarray) -> np.ndarray:
    """output = the ``value`` tensor attribute (versions 1 and 9; 9 adds dtypes)."""
    return value


@op("Constant", since=11, inputs=(), outputs=("output",), infer=_infer_constant,
    attrs=(Attr("value", "tensor", None, "the output tensor"),
           Attr("sparse_value", "sparse_tensor", None, "the output tensor, sparse")))
def constant_11(*, value: Any, sparse_value: Any) -> np.ndarray:
    """Constant-11: exactly one of ``value`` or ``sparse_value`` (densified: zeros except at
    the listed indices)."""
    return _constant_value(value, sparse_value)


@op("Constant", since=12, inputs=(), outputs=("output",), infer=_infer_constant,
    attrs=(Attr("value", "tensor", None, "the output tensor"),
           Attr("sparse_value", "sparse_tensor", None, "the output tensor, sparse"),
           Attr("value_float", "float", None, "a float32 scalar"),
           Attr("value_floats", "floats", None, "a float32 1-D tensor"),
           Attr("value_int", "int", None, "an int64 scalar"),
           Attr("value_ints", "ints", None, "an int64 1-D tensor"),
           Attr("value_string", "string", None, "a string scalar"),
           Attr("value_strings", "strings", None, "a string 1-D tensor")))
def constant_12(*, value: Any, sparse_value: Any, value_float: Any, value_floats: Any,
                value_int: Any, value_ints: Any, value_string: Any,
                value_strings: Any) -> np.ndarray:
    """Constant-12: exactly one attribute gives the output.

    value / sparse_value: that tensor; value_float(s): float32 scalar / 1-D; value_int(s):
    int64 scalar / 1-D; value_string(s): string scalar / 1-D.  Versions 12, 13, 19, 21-25
    differ only in dtypes.
    """
    return _constant_value(value, sparse_value, value_float, value_floats, value_int,
                           value_ints, value_string, value_strings)


# =============================================================================== ConstantOfShape


def _fill_value(value: Any) -> np.ndarray:
    if value is None:
        return np.zeros((), dtype=np.float32)
    array = np.asarray(value)
    if array.size != 1:
        raise ValueError(f"value must hold one element, got shape {list(array.shape)}")
    return array.reshape(())


def _infer_constant_of_shape(ctx: InferContext, shape: Any, *, value: Any) -> TensorType:
    dtype = DType.from_numpy(_fill_value(value).dtype)
    target = known_ints(ctx, 0)
    if target is not None:
        if any(d < 0 for d in target):
            ctx.fail(f"shape {target} has negative entries")
        return TensorType(dtype, tuple(target))
    n = static_length(shape)
    return TensorType(dtype, None if n is None else (None,) * n)


@op("ConstantOfShape", since=9, inputs=("input",), outputs=("output",),
    infer=_infer_constant_of_shape, value_inputs=(0,),
    attrs=(Attr("value", "tensor", None, "one-element fill tensor (absent: float32 0)"),))
def constant_of_shape(input: np.ndarray, *, value: Any) -> np.ndarray:
    """output = a tensor of shape ``input`` (int64 1-D, entries >= 0) filled with ``value``.

    The dtype is that of ``value`` (absent: float32 zeros); an empty ``input`` gives a scalar.
    Versions 9, 20, 21-25 differ only in dtypes.
    """
    shape = ints(input)
    if any(d < 0 for d in shape):
        raise ValueError(f"shape {shape} has negative entries")
    fill = _fill_value(value)
    return np.full(shape, fill, dtype=fill.dtype)


# =============================================================================== EyeLike


def _infer_eye_like(ctx: InferContext, x: Any, *, dtype: int | None, k: int) -> TensorType:
    out = dtype_or_none(x) if dtype is None else DType.from_onnx(dtype)
    shape = shape_or_none(x)
    if shape is not None and len(shape) != 2:
        ctx.fail(f"input must be 2-D, got rank {len(shape)}")
    return TensorType(out, shape if shape is not None else (None, None))


@op("EyeLike", since=9, inputs=("input",), outputs=("output",), infer=_infer_eye_like,
    attrs=(Attr("dtype", "int", None, "output dtype as a TensorProto code (absent: input's)"),
           Attr("k", "int", 0, "diagonal: output[i, i+k] = 1")))
def eye_like(input: np.ndarray, *, dtype: int | None, k: int) -> np.ndarray:
    """output[i, j] = 1 if j - i == k else 0, with the shape of the 2-D ``input``.

    dtype: the output element type (absent: the input's); bool gives True/False.  k > 0 is an
    upper diagonal, k < 0 a lower one; |k| beyond the matrix gives all zeros.  Versions 9 and
    22 differ only in dtypes.
    """
    if input.ndim != 2:
        raise ValueError(f"EyeLike takes a 2-D input, got shape {list(input.shape)}")
    out_dtype = input.dtype if dtype is None else DType.from_onnx(dtype).numpy
    return np.eye(input.shape[0], input.shape[1], k=k).astype(out_dtype)


# =============================================================================== Range


def _range_count(start: Any, limit: Any, delta: Any) -> int:
    """max(ceil((limit - start) / delta), 0): exact for integers, in float64 for floats."""
    s, l, d = (np.asarray(v).reshape(()).item() for v in (start, limit, delta))
    if d == 0:
        raise ValueError("Range delta cannot be 0")
    if isinstance(s, int) and isinstance(l, int) and isinstance(d, int):
        return max(-((s - l) // d), 0)
    return max(math.ceil((float(l) - float(s)) / float(d)), 0)


def _range(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, work: np.dtype) -> np.ndarray:
    count = _range_count(start, limit, delta)
    s, d = np.asarray(start).reshape(()).item(), np.asarray(delta).reshape(()).item()
    if start.dtype.kind in "iu":
        return (s + np.arange(count, dtype=np.int64) * d).astype(start.dtype)
    steps = np.arange(count, dtype=work)
    return (work.type(s) + steps * work.type(d)).astype(start.dtype)


def _infer_range(ctx: InferContext, start: Any, limit: Any, delta: Any, **_: Any) -> TensorType:
    dtype = dtype_or_none(start)
    values = [ctx.value(i) for i in range(3)]
    if any(v is None for v in values):
        return TensorType(dtype, (None,))
    try:
        n = _range_count(*values)
    except ValueError as exc:
        ctx.fail(str(exc))
    return TensorType(dtype, (n,))


@op("Range", since=11, inputs=("start", "limit", "delta"), outputs=("output",),
    infer=_infer_range, value_inputs=(0, 1, 2))
def range_11(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """output[i] = start + i * delta for i < max(ceil((limit - start) / delta), 0).

    start, limit, delta: scalars of one dtype (float, double, int16/32/64).  The count is
    computed exactly for integers and in float64 for floats; each element is computed
    directly (no running sum).  delta = 0 is an error.
    """
    return _range(start, limit, delta, compute_dtype(start.dtype))


@op("Range", since=27, inputs=("start", "limit", "delta"), outputs=("output",),
    infer=_infer_range, value_inputs=(0, 1, 2),
    attrs=(Attr("stash_type", "int", 1, "compute type for float16/bfloat16 (1: float32)"),))
def range_27(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, *,
             stash_type: int) -> np.ndarray:
    """Range-27: as Range-11, plus float16/bfloat16, whose elements are computed in the
    ``stash_type`` precision (TensorProto code; 1 = float32, the default) and rounded once."""
    work = start.dtype
    if start.dtype in (np.dtype(np.float16), DType.bfloat16.numpy):
        work = DType.from_onnx(stash_type).numpy
    return _range(start, limit, delta, np.dtype(work))


# =============================================================================== Trilu


@op("Trilu", since=14, inputs=("input", "k?"), outputs=("output",), infer=same_as(0),
    attrs=(flag("upper", 1, "1: keep the upper triangle, 0: the lower"),))
def trilu(input: np.ndarray, k: np.ndarray | None = None, *, upper: int) -> np.ndarray:
    """Keep one triangle of the last two dims (N x M) and zero the rest.

    upper=1: keep input[..., i, j] where j - i >= k; upper=0: where j - i <= k.  k: int64
    scalar input, default 0.  "Zero" is '' for strings and False for bool.  input: rank >= 2.
    """
    if input.ndim < 2:
        raise ValueError(f"Trilu takes a rank >= 2 input, got shape {list(input.shape)}")
    diag = 0 if k is None else scalar_int(k, "k")
    rows, cols = input.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset >= diag if upper else offset <= diag
    return np.where(keep, input, zero_of(input.dtype)).astype(input.dtype, copy=False)


OPS = (
    constant_1, constant_11, constant_12,
    constant_of_shape,
    eye_like,
    range_11, range_27,
    trilu,
)
