"""Padding ops: Pad (constant, reflect, edge and wrap modes; negative pads crop) and
CenterCropPad (centre crop or zero pad to a given size).

Both work for every dtype (strings are NumPy object arrays, padded with '').
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of, normalize_axis, shape_of
from refmnn.ops._schema import Attr, InferContext, op
from refmnn.ops._shape_util import (
    add_dims,
    axis_of,
    dtype_or_none,
    ints,
    known_ints,
    shape_or_none,
    zero_of,
)

# =============================================================================== Pad


def _pad(data: np.ndarray, pads: Any, mode: str, value: Any, axes: Any = None) -> np.ndarray:
    rank = data.ndim
    axes = list(range(rank)) if axes is None else [axis_of(a, rank) for a in ints(axes)]
    pads = ints(pads)
    if len(pads) != 2 * len(axes):
        raise ValueError(f"pads has {len(pads)} entries; expected 2 * {len(axes)}")
    width = [(0, 0)] * rank
    for i, a in enumerate(axes):
        width[a] = (pads[i], pads[len(axes) + i])
    # Negative pads remove elements: crop first, then pad the cropped tensor.
    crop = []
    for (begin, end), d in zip(width, data.shape):
        stop = d - max(-end, 0)
        if stop < max(-begin, 0):
            raise ValueError(f"pads {pads} remove more than the {d} elements of an axis")
        crop.append(slice(max(-begin, 0), stop))
    data = data[tuple(crop)]
    width = [(max(b, 0), max(e, 0)) for b, e in width]
    if not width:  # a 0-d tensor has no axis to pad (np.pad rejects an empty pad_width)
        return data.copy()
    if mode == "constant":
        fill = zero_of(data.dtype) if value is None else np.asarray(value).reshape(-1)[0]
        if data.dtype != object:
            fill = np.asarray(fill).astype(data.dtype)
        return np.pad(data, width, mode="constant", constant_values=fill)
    if mode not in ("reflect", "edge", "wrap"):
        raise ValueError(f"unknown pad mode {mode!r}")
    for (b, e), d in zip(width, data.shape):
        if (b or e) and d == 0:
            raise ValueError(f"mode {mode!r} cannot pad an empty axis")
    return np.pad(data, width, mode=mode)


def _pad_rule(ctx: InferContext, data: Any, pads: list[int] | None, axes: list[int] | None,
              axes_given: bool) -> TensorType:
    dtype, shape = dtype_or_none(data), shape_or_none(data)
    if shape is None:
        return TensorType(dtype, None)
    rank = len(shape)
    if axes is None and axes_given:
        return TensorType(dtype, (None,) * rank)
    axes = list(range(rank)) if axes is None else [normalize_axis(ctx, a, rank) for a in axes]
    out = list(shape)
    if pads is None:
        for a in axes:
            out[a] = None
        return TensorType(dtype, tuple(out))
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads has {len(pads)} entries; expected 2 * {len(axes)}")
    for i, a in enumerate(axes):
        begin, end = pads[i], pads[len(axes) + i]
        if isinstance(shape[a], int) and shape[a] - max(-end, 0) < max(-begin, 0):
            ctx.fail(f"pads {list(pads)} remove more than the {shape[a]} elements of axis {a}")
        out[a] = add_dims(shape[a], begin + end)
    return TensorType(dtype, tuple(out))


def _infer_pad_1(ctx: InferContext, data: Any, **attrs: Any) -> TensorType:
    pads = attrs.get("paddings", attrs.get("pads"))
    return _pad_rule(ctx, data, list(pads), None, False)


def _infer_pad_11(ctx: InferContext, data: Any, pads: Any, value: Any = None, axes: Any = None,
                  **attrs: Any) -> TensorType:
    return _pad_rule(ctx, data, known_ints(ctx, 1), known_ints(ctx, 3), axes is not None)


_MODE = Attr("mode", "string", "constant", "constant, reflect or edge")


@op("Pad", since=1, inputs=("data",), outputs=("output",), infer=_infer_pad_1,
    attrs=(Attr("paddings", "ints", doc="[x1_begin, x2_begin, ..., x1_end, x2_end, ...]"),
           _MODE, Attr("value", "float", 0.0, "fill value of constant mode")))
def pad_1(data: np.ndarray, *, paddings: Any, mode: str, value: float) -> np.ndarray:
    """Pad-1: as Pad-2 with the pads in the ``paddings`` attribute."""
    return _pad(data, paddings, mode, value)


@op("Pad", since=2, inputs=("data",), outputs=("output",), infer=_infer_pad_1,
    attrs=(Attr("pads", "ints", doc="[x1_begin, x2_begin, ..., x1_end, x2_end, ...]"),
           _MODE, Attr("value", "float", 0.0, "fill value of constant mode")))
def pad_2(data: np.ndarray, *, pads: Any, mode: str, value: float) -> np.ndarray:
    """Pad-2: as Pad-11 with ``pads`` and the fill ``value`` (a float, cast to the data dtype)
    as attributes."""
    return _pad(data, pads, mode, value)


@op("Pad", since=11, inputs=("data", "pads", "constant_value?"), outputs=("output",),
    infer=_infer_pad_11, value_inputs=(1,), attrs=(_MODE,))
def pad_11(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None, *,
           mode: str) -> np.ndarray:
    """output = data padded by ``pads`` (int64, [x1_begin, x2_begin, ..., x1_end, ...]).

    constant: fill with ``constant_value`` (a scalar; absent: 0, '' or False).  reflect:
    mirror without repeating the edge (np.pad 'reflect').  edge: repeat the edge value.
    Negative pads remove elements at that side; removal happens before padding, so reflect and
    edge read the cropped tensor.  Padding an empty axis in a non-constant mode is an error.
    Versions 11 and 13 (more dtypes) behave the same.
    """
    return _pad(data, pads, mode, constant_value)


@op("Pad", since=18, inputs=("data", "pads", "constant_value?", "axes?"), outputs=("output",),
    infer=_infer_pad_11, value_inputs=(1, 3), attrs=(_MODE,))
def pad_18(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None,
           axes: np.ndarray | None = None, *, mode: str) -> np.ndarray:
    """Pad-18: as Pad-11, with ``axes`` (int 1-D, negative from the back) naming the padded
    axes; ``pads`` then has 2 * len(axes) entries."""
    return _pad(data, pads, mode, constant_value, axes)


@op("Pad", since=19, inputs=("data", "pads", "constant_value?", "axes?"), outputs=("output",),
    infer=_infer_pad_11, value_inputs=(1, 3),
    attrs=(Attr("mode", "string", "constant", "constant, reflect, edge or wrap"),))
def pad_19(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None,
           axes: np.ndarray | None = None, *, mode: str) -> np.ndarray:
    """Pad-19: as Pad-18, plus mode 'wrap': pad with the values from the opposite side, as if
    the (cropped) tensor were a torus (np.pad 'wrap').  Versions 19, 21-25: dtypes only."""
    return _pad(data, pads, mode, constant_value, axes)


# ================================================================ CenterCropPad


def _center_crop_pad_infer(ctx: InferContext, data: TensorType | None, shape: TensorType | None,
                           *, axes: tuple[int, ...] | None) -> TensorType:
    in_shape = shape_of(data)
    if in_shape is None:
        return TensorType(dtype_of(data), None)
    rank = len(in_shape)
    chosen = list(range(rank)) if axes is None else [a % rank for a in axes]
    value = ctx.value(1)
    out = list(in_shape)
    for i, a in enumerate(chosen):
        out[a] = None if value is None else int(np.asarray(value).reshape(-1)[i])
    return TensorType(dtype_of(data), tuple(out))


@op("CenterCropPad", since=18, inputs=("input_data", "shape"), outputs=("output_data",),
    infer=_center_crop_pad_infer, value_inputs=(1,),
    attrs=(Attr("axes", "ints", None, "the axes 'shape' refers to (default all)"),))
def center_crop_pad(input_data: np.ndarray, shape: np.ndarray, *,
                    axes: tuple[int, ...] | None) -> np.ndarray:
    """Centre-crop or zero-pad each listed axis to shape[i].

    input_data any rank/dtype; shape int (len(axes),); axes may be negative. Cropping starts at
    (in - out) // 2 (odd surplus: the window sits half a pixel left of centre); padding puts
    (out - in) // 2 zeros before and the rest (one more when odd) after. Output dtype = input.
    """
    rank = input_data.ndim
    chosen = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    sizes = [int(s) for s in np.asarray(shape).reshape(-1)]
    if len(sizes) != len(chosen):
        raise ValueError(f"shape has {len(sizes)} values for {len(chosen)} axes")
    out_shape = list(input_data.shape)
    source = [slice(None)] * rank
    target = [slice(None)] * rank
    for axis, size in zip(chosen, sizes, strict=True):
        length = input_data.shape[axis]
        out_shape[axis] = size
        if size <= length:
            begin = (length - size) // 2
            source[axis] = slice(begin, begin + size)
        else:
            begin = (size - length) // 2
            target[axis] = slice(begin, begin + length)
    result = np.zeros(out_shape, dtype=input_data.dtype)
    if input_data.dtype == object:
        result[...] = ""
    result[tuple(target)] = input_data[tuple(source)]
    return result


OPS = (
    pad_1, pad_2, pad_11, pad_18, pad_19,
    center_crop_pad,
)
