"""Image ops: Resize, Upsample, GridSample, AffineGrid, RoiAlign, NonMaxSuppression,
CenterCropPad and ImageDecoder.

Resize and Upsample share one rank-generic, separable interpolation: for every resized axis the
output coordinates are mapped to source coordinates, each output position gets a short list of
source indices ("taps") with weights, and the data is contracted with those weights one axis at a
time (``_resample_axis``). GridSample uses the same tap/weight description per spatial axis, but
the coordinates vary per output element, so it gathers the taps jointly.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from refmnn.dtypes import DType, compute_dtype
from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, op

# ---------------------------------------------------------------------------------------------
# Interpolation kernels and helpers shared by Resize, Upsample and GridSample
# ---------------------------------------------------------------------------------------------


def _keys_cubic(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel k(d) with coefficient ``a`` (support |d| < 2)."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _triangle(d: np.ndarray) -> np.ndarray:
    """The linear-interpolation (tent) kernel max(0, 1 - |d|)."""
    return np.clip(1 - np.abs(d), 0, 1)


def _float_compute_dtype(dtype: np.dtype) -> np.dtype:
    """The float dtype interpolation runs in: float32 for float32 and narrower floats, the
    dtype itself for float64 and complex, float64 for integers and bool."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return dtype
    work = compute_dtype(dtype)
    return work if work.kind == "f" else np.dtype(np.float64)


def _cast_back(values: np.ndarray, dtype: np.dtype, *, rounding: str) -> np.ndarray:
    """Cast interpolated values to the input dtype: integers are rounded (``"even"``: half to
    even, ``"trunc"``: toward zero) and saturated; floats are cast directly (NaN/inf kept)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return values != 0
    if dtype.kind in "iu" or compute_dtype(dtype).kind in "iu":
        info = ml_dtypes.iinfo(dtype)
        values = np.rint(values) if rounding == "even" else np.trunc(values)
        return np.clip(values, int(info.min), int(info.max)).astype(dtype)
    return values.astype(dtype)


def _as_list(values: np.ndarray | None) -> list[Any] | None:
    """A 1-D tensor input as a Python list; None (or an empty tensor) means absent."""
    if values is None:
        return None
    values = np.asarray(values).reshape(-1)
    return None if values.size == 0 else values.tolist()


# ---------------------------------------------------------------------------------------------
# Resize / Upsample
# ---------------------------------------------------------------------------------------------

_RESIZE_MODES = ("nearest", "linear", "cubic")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


def _source_coordinates(out_len: int, in_len: int, scale: float, roi: tuple[float, float],
                        ctm: str) -> np.ndarray:
    """x_original for every x_resized in [0, out_len), per coordinate_transformation_mode.

    ``scale`` is the axis scale (given, or size / in_len). As in the spec and the ONNX tests,
    the ratios of align_corners and tf_crop_and_resize divide by W - 1 with W = scale * in_len,
    the possibly fractional output width; the "length_resized > 1" tests use the integer
    output length (pytorch_half_pixel gives 0 there, as the spec says).
    """
    y = np.arange(out_len, dtype=np.float64)
    out_width = scale * in_len
    start, end = roi
    if ctm in ("half_pixel", "half_pixel_symmetric"):
        x = (y + 0.5) / scale - 0.5
        if ctm == "half_pixel_symmetric":
            x = x + (in_len / 2) * (1 - out_len / out_width)
        return x
    if ctm == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(y)
    if ctm == "asymmetric":
        return y / scale
    if ctm == "tf_half_pixel_for_nn":
        return (y + 0.5) / scale
    if ctm == "align_corners":
        return y * (in_len - 1) / (out_width - 1) if out_len > 1 else np.zeros_like(y)
    if ctm == "tf_crop_and_resize":
        if out_len > 1:
            return start * (in_len - 1) + y * (end - start) * (in_len - 1) / (out_width - 1)
        return np.full_like(y, 0.5 * (start + end) * (in_len - 1))
    raise ValueError(f"unknown coordinate_transformation_mode {ctm!r}")


def _nearest_index(x: np.ndarray, nearest_mode: str) -> np.ndarray:
    """Round source coordinates to a pixel index per nearest_mode."""
    if nearest_mode == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if nearest_mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if nearest_mode == "floor":
        return np.floor(x)
    if nearest_mode == "ceil":
        return np.ceil(x)
    raise ValueError(f"unknown nearest_mode {nearest_mode!r}")


def _resize_taps(in_len: int, out_len: int, scale: float, roi: tuple[float, float], *,
                 mode: str, ctm: str, nearest_mode: str, cubic_coeff_a: float,
                 exclude_outside: bool, antialias: bool
                 ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Source taps of one axis: indices (out, taps), weights (out, taps) or None for nearest,
    and the source coordinates x (out,).

    linear/cubic: write x = base + r with r in (0, 1] (base = ceil(x) - 1); the taps are
    base + i for i in [start, 1 - start], start = floor(-R / s) + 1, with kernel radius R (1
    linear, 2 cubic) and s = min(scale, 1) when antialiasing (the kernel is stretched by 1/s),
    else s = 1. Weight of tap t: kernel((t - x) * s); antialias and exclude_outside renormalise
    the weights to sum 1. Taps outside [0, in_len) read the edge pixel (clamped index) unless
    exclude_outside gives them weight 0.
    """
    x = _source_coordinates(out_len, in_len, scale, roi, ctm)
    if mode == "nearest":
        if nearest_mode == "resize_10":  # Upsample / Resize-10 (onnxruntime's rule)
            nearest_mode = "ceil" if scale < 1 else "floor"
        taps = _nearest_index(x, nearest_mode)[:, None]
        weights = None
    else:
        radius = 1.0 if mode == "linear" else 2.0
        stretch = min(scale, 1.0) if antialias else 1.0
        start = math.floor(-radius / stretch) + 1
        taps = (np.ceil(x) - 1)[:, None] + np.arange(start, 2 - start)
        distance = (taps - x[:, None]) * stretch
        weights = _triangle(distance) if mode == "linear" else _keys_cubic(distance, cubic_coeff_a)
        if exclude_outside:
            weights = np.where((taps >= 0) & (taps < in_len), weights, 0.0)
        if antialias or exclude_outside:
            total = weights.sum(axis=1, keepdims=True)
            weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(taps, 0, max(in_len - 1, 0)).astype(np.intp), weights, x


def _resample_axis(data: np.ndarray, axis: int, taps: np.ndarray,
                   weights: np.ndarray | None) -> np.ndarray:
    """Y[..., o, ...] = sum_t weights[o, t] * data[..., taps[o, t], ...] along ``axis``.

    taps/weights: (out, taps); weights None means a single tap of weight 1 (nearest), which
    copies values exactly. Accumulated one tap at a time (no (..., out, taps) temporary).
    """
    if weights is None:
        return np.take(data, taps[:, 0], axis=axis)
    shape = (-1,) + (1,) * (data.ndim - axis - 1)
    w = weights.astype(data.dtype)
    out = np.take(data, taps[:, 0], axis=axis) * w[:, 0].reshape(shape)
    for t in range(1, taps.shape[1]):
        out += np.take(data, taps[:, t], axis=axis) * w[:, t].reshape(shape)
    return out


def _resize_plan(in_shape: Sequence[Any], scales: list[float] | None,
                 sizes: list[int] | None, axes: Sequence[int] | None, policy: str,
                 roi: list[float] | None, ctm: str
                 ) -> tuple[list[Any], dict[int, float | None], dict[int, tuple[float, float]]]:
    """Output shape, per-axis scale and per-axis roi (start, end) of a Resize.

    Works on symbolic shapes too (dims that are str/None): unknown results are None.
    Raises ValueError on an inconsistent request.
    """
    rank = len(in_shape)
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"axes {axes} invalid for rank {rank}")
    rois = {a: (0.0, 1.0) for a in axes}
    if roi is not None and ctm == "tf_crop_and_resize":
        if len(roi) != 2 * len(axes):
            raise ValueError(f"roi has {len(roi)} values, expected {2 * len(axes)}")
        rois = {a: (float(roi[i]), float(roi[i + len(axes)])) for i, a in enumerate(axes)}
    out: list[Any] = list(in_shape)
    axis_scale: dict[int, float | None] = {}
    if (scales is None) == (sizes is None):
        raise ValueError("exactly one of 'scales' and 'sizes' must be given (non-empty)")
    wanted = scales if scales is not None else sizes
    if len(wanted) != len(axes):
        raise ValueError(f"{'scales' if scales is not None else 'sizes'} has {len(wanted)} "
                         f"values, expected {len(axes)}")
    if scales is not None:
        for a, s in zip(axes, scales, strict=True):
            if not s > 0:
                raise ValueError(f"scales must be > 0, got {s}")
            axis_scale[a] = float(s)
            start, end = rois[a]
            if s == 1.0 and (start, end) == (0.0, 1.0):
                continue  # out = in, symbolic dims kept
            d = in_shape[a]
            out[a] = math.floor(d * (end - start) * float(s)) if isinstance(d, int) else None
        return out, axis_scale, rois
    ratios = {a: (int(n) / in_shape[a] if in_shape[a] else 1.0)
              if isinstance(in_shape[a], int) else None for a, n in zip(axes, sizes, strict=True)}
    if policy == "stretch":
        for a, n in zip(axes, sizes, strict=True):
            if isinstance(in_shape[a], int) and in_shape[a] == 0 and n != 0:
                raise ValueError(f"cannot resize an empty axis {a} to {n}")
            out[a], axis_scale[a] = int(n), ratios[a]
        return out, axis_scale, rois
    if policy not in _POLICIES:
        raise ValueError(f"unknown keep_aspect_ratio_policy {policy!r}")
    known = [r for r in ratios.values() if r is not None]
    common = None if len(known) < len(ratios) else (min(known) if policy == "not_larger"
                                                    else max(known))
    for a in axes:
        axis_scale[a] = common
        out[a] = None if common is None else math.floor(common * in_shape[a] + 0.5)
    return out, axis_scale, rois


def _interpolate(X: np.ndarray, out_shape: Sequence[int], axis_scale: dict[int, float | None],
                 rois: dict[int, tuple[float, float]], *, mode: str, ctm: str, nearest_mode: str,
                 cubic_coeff_a: float, exclude_outside: int, extrapolation_value: float,
                 antialias: int) -> np.ndarray:
    """Resample X to ``out_shape`` one axis at a time (the interpolation is separable).

    nearest gathers exactly (any dtype, no arithmetic); linear/cubic compute in float (float32
    for float32 and narrower floats, float64 otherwise) and cast back: integers round half to
    even and saturate. tf_crop_and_resize writes ``extrapolation_value`` wherever a source
    coordinate of any axis falls outside [0, in_len - 1].
    """
    if mode not in _RESIZE_MODES:
        raise ValueError(f"unknown mode {mode!r}")
    result = X if mode == "nearest" else X.astype(_float_compute_dtype(X.dtype))
    outside = np.zeros((1,) * X.ndim, dtype=bool)
    for axis, scale in axis_scale.items():
        in_len, out_len = X.shape[axis], int(out_shape[axis])
        if out_len == 0 or in_len == 0:  # nothing to sample (an empty axis resizes to 0)
            result = np.take(result, np.zeros(0, np.intp), axis=axis)
            continue
        taps, weights, x = _resize_taps(
            in_len, out_len, scale, rois[axis], mode=mode, ctm=ctm, nearest_mode=nearest_mode,
            cubic_coeff_a=cubic_coeff_a, exclude_outside=bool(exclude_outside),
            antialias=bool(antialias) and mode != "nearest")
        if ctm == "tf_crop_and_resize":
            shape = [1] * X.ndim
            shape[axis] = out_len
            outside = outside | ((x < 0) | (x > in_len - 1)).reshape(shape)
        if out_len == in_len and np.array_equal(x, np.arange(in_len)):
            continue  # every output sits exactly on its source pixel
        result = _resample_axis(result, axis, taps, weights)
    if outside.any():
        result = np.where(outside, np.asarray(extrapolation_value).astype(result.dtype), result)
    if mode == "nearest":
        return result
    return _cast_back(result, X.dtype, rounding="even")


def _resize(X: np.ndarray, roi: np.ndarray | None, scales: np.ndarray | None,
            sizes: np.ndarray | None, *, allowed_ctm: Sequence[str], mode: str,
            coordinate_transformation_mode: str = "half_pixel", cubic_coeff_a: float = -0.75,
            exclude_outside: int = 0, extrapolation_value: float = 0.0,
            nearest_mode: str = "round_prefer_floor", antialias: int = 0,
            axes: Sequence[int] | None = None, keep_aspect_ratio_policy: str = "stretch"
            ) -> np.ndarray:
    """The Resize computation shared by every version (see ``resize_19`` for the formulas)."""
    ctm = coordinate_transformation_mode
    if ctm not in allowed_ctm:
        raise ValueError(f"coordinate_transformation_mode {ctm!r} is not one of "
                         f"{list(allowed_ctm)}")
    if mode == "nearest" and nearest_mode not in _NEAREST_MODES + ("resize_10",):
        raise ValueError(f"unknown nearest_mode {nearest_mode!r}")
    out_shape, axis_scale, rois = _resize_plan(
        X.shape, _as_list(scales), _as_list(sizes), axes, keep_aspect_ratio_policy,
        _as_list(roi), ctm)
    return _interpolate(X, out_shape, axis_scale, rois, mode=mode, ctm=ctm,
                        nearest_mode=nearest_mode, cubic_coeff_a=cubic_coeff_a,
                        exclude_outside=exclude_outside, extrapolation_value=extrapolation_value,
                        antialias=antialias)


def _resize_infer(roi_at: int | None, scales_at: int, sizes_at: int | None):
    """Shape rule for Resize/Upsample with scales/sizes/roi inputs at the given positions."""

    def rule(ctx: InferContext, X: TensorType | None, *rest: Any, **attrs: Any) -> TensorType:
        in_shape = shape_of(X)
        dtype = dtype_of(X)
        if in_shape is None:
            return TensorType(dtype, None)

        def value(index: int | None) -> list[Any] | None:
            if index is None or index >= len(ctx.node.inputs) or not ctx.node.inputs[index]:
                return None
            v = ctx.value(index)
            return [] if v is None else (_as_list(v) or None)

        rank = len(in_shape)
        axes = {a % rank for a in attrs.get("axes") or range(rank)}
        unknown = TensorType(dtype, tuple(None if a in axes else d for a, d in enumerate(in_shape)))
        scales, sizes, roi = value(scales_at), value(sizes_at), value(roi_at)
        if scales == [] or sizes == [] or (scales is None and sizes is None):
            return unknown  # [] marks an input whose value is not known before running
        ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
        if roi == [] and ctm == "tf_crop_and_resize" and scales is not None:
            return unknown
        try:
            out, _, _ = _resize_plan(in_shape, scales, sizes, attrs.get("axes"),
                                     attrs.get("keep_aspect_ratio_policy", "stretch"),
                                     roi or None, ctm)
        except ValueError as exc:
            ctx.fail(str(exc))
        return TensorType(dtype, tuple(out))

    return rule


_CTM_11 = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
           "tf_half_pixel_for_nn", "tf_crop_and_resize")
_CTM_13 = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
           "tf_crop_and_resize")
_CTM_19 = _CTM_13 + ("half_pixel_symmetric",)

_RESIZE_ATTRS_11 = (
    Attr("coordinate_transformation_mode", "string", "half_pixel",
         "how an output coordinate maps to an input coordinate (see the formulas)"),
    Attr("cubic_coeff_a", "float", -0.75, "the 'a' of Keys' cubic kernel"),
    Attr("exclude_outside", "int", 0, "1: taps outside the input get weight 0, renormalised"),
    Attr("extrapolation_value", "float", 0.0,
         "tf_crop_and_resize: value where the source coordinate leaves [0, in - 1]"),
    Attr("mode", "string", "nearest", "nearest, linear or cubic"),
    Attr("nearest_mode", "string", "round_prefer_floor",
         "nearest rounding: round_prefer_floor, round_prefer_ceil, floor, ceil"),
)
_RESIZE_ATTRS_18 = _RESIZE_ATTRS_11 + (
    Attr("antialias", "int", 0, "1: linear/cubic stretch the kernel by 1/scale when downscaling"),
    Attr("axes", "ints", None, "the axes roi/scales/sizes refer to (default all)"),
    Attr("keep_aspect_ratio_policy", "string", "stretch",
         "how sizes are read: stretch, not_larger, not_smaller"),
)


@op("Resize", since=10, inputs=("X", "scales"), outputs=("Y",),
    attrs=(Attr("mode", "string", "nearest", "nearest or linear"),),
    infer=_resize_infer(None, 1, None), value_inputs=(1,))
def resize_10(X: np.ndarray, scales: np.ndarray, *, mode: str) -> np.ndarray:
    """Resize-10: Y has dims floor(X.shape[i] * scales[i]).

    The first Resize (Upsample-9 extended to downsampling) has no coordinate attribute: the
    source coordinate is x_resized / scale ("asymmetric"); nearest takes floor(x) on axes with
    scale >= 1 and ceil(x) on axes with scale < 1 (onnxruntime's rule, which reproduces the
    opset-10 ONNX test resize_downsample_nearest: [[1,2,3,4],[5,6,7,8]] at 0.6 -> [[1, 3]]);
    linear interpolates the two neighbours with edge clamping. Integers round half to even.
    X: any rank, any dtype for nearest; numeric for linear. scales: float (rank(X),).
    """
    if mode not in ("nearest", "linear"):
        raise ValueError(f"Resize-10 mode must be nearest or linear, got {mode!r}")
    return _resize(X, None, scales, None, allowed_ctm=("asymmetric",), mode=mode,
                   coordinate_transformation_mode="asymmetric", nearest_mode="resize_10")


@op("Resize", since=11, inputs=("X", "roi", "scales", "sizes?"), outputs=("Y",),
    attrs=_RESIZE_ATTRS_11, infer=_resize_infer(1, 2, 3), value_inputs=(1, 2, 3))
def resize_11(X: np.ndarray, roi: np.ndarray, scales: np.ndarray,
              sizes: np.ndarray | None = None, *,
              coordinate_transformation_mode: str, cubic_coeff_a: float, exclude_outside: int,
              extrapolation_value: float, mode: str, nearest_mode: str) -> np.ndarray:
    """Resize-11: as Resize-19 without axes/antialias/keep_aspect_ratio_policy and
    half_pixel_symmetric, plus the coordinate mode tf_half_pixel_for_nn:
    x_original = (x_resized + 0.5) / scale. roi and scales are required inputs; give an empty
    scales tensor to use sizes.
    """
    return _resize(X, roi, scales, sizes, allowed_ctm=_CTM_11, mode=mode,
                   coordinate_transformation_mode=coordinate_transformation_mode,
                   cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                   extrapolation_value=extrapolation_value, nearest_mode=nearest_mode)


@op("Resize", since=13, inputs=("X", "roi?", "scales?", "sizes?"), outputs=("Y",),
    attrs=_RESIZE_ATTRS_11, infer=_resize_infer(1, 2, 3), value_inputs=(1, 2, 3))
def resize_13(X: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
              sizes: np.ndarray | None = None, *, coordinate_transformation_mode: str,
              cubic_coeff_a: float, exclude_outside: int, extrapolation_value: float, mode: str,
              nearest_mode: str) -> np.ndarray:
    """Resize-13: as Resize-19 without axes/antialias/keep_aspect_ratio_policy and
    half_pixel_symmetric; tf_half_pixel_for_nn is gone. roi/scales/sizes are optional (an empty
    tensor counts as absent); exactly one of scales and sizes must be given.
    """
    return _resize(X, roi, scales, sizes, allowed_ctm=_CTM_13, mode=mode,
                   coordinate_transformation_mode=coordinate_transformation_mode,
                   cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                   extrapolation_value=extrapolation_value, nearest_mode=nearest_mode)


@op("Resize", since=18, inputs=("X", "roi?", "scales?", "sizes?"), outputs=("Y",),
    attrs=_RESIZE_ATTRS_18, infer=_resize_infer(1, 2, 3), value_inputs=(1, 2, 3))
def resize_18(X: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
              sizes: np.ndarray | None = None, *, coordinate_transformation_mode: str,
              cubic_coeff_a: float, exclude_outside: int, extrapolation_value: float, mode: str,
              nearest_mode: str, antialias: int, axes: tuple[int, ...] | None,
              keep_aspect_ratio_policy: str) -> np.ndarray:
    """Resize-18: as Resize-19 except that half_pixel_symmetric does not exist yet."""
    return _resize(X, roi, scales, sizes, allowed_ctm=_CTM_13, mode=mode,
                   coordinate_transformation_mode=coordinate_transformation_mode,
                   cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                   extrapolation_value=extrapolation_value, nearest_mode=nearest_mode,
                   antialias=antialias, axes=axes,
                   keep_aspect_ratio_policy=keep_aspect_ratio_policy)


@op("Resize", since=19, inputs=("X", "roi?", "scales?", "sizes?"), outputs=("Y",),
    attrs=_RESIZE_ATTRS_18, infer=_resize_infer(1, 2, 3), value_inputs=(1, 2, 3))
def resize_19(X: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
              sizes: np.ndarray | None = None, *, coordinate_transformation_mode: str,
              cubic_coeff_a: float, exclude_outside: int, extrapolation_value: float, mode: str,
              nearest_mode: str, antialias: int, axes: tuple[int, ...] | None,
              keep_aspect_ratio_policy: str) -> np.ndarray:
    """Resize: every output value is a weighted sum of input values near its source coordinate.

    Shapes: X any rank; scales float (len(axes),); sizes int64 (len(axes),); roi
    (2 * len(axes),) = [starts..., ends...] (only read by tf_crop_and_resize). Exactly one of
    scales/sizes (an empty tensor counts as absent). Axes not in ``axes`` are untouched.
    Output size per axis: with scales, floor(in * (roi_end - roi_start) * scale) (the roi factor
    only for tf_crop_and_resize, as the spec states; onnxruntime and the ONNX Python reference
    omit it); with sizes and policy stretch, sizes[i] (scale = size / in); with not_larger /
    not_smaller, one scale = min / max of sizes[i] / in over the axes and
    out = floor(scale * in + 0.5).
    Source coordinate x of output index y (scale per axis, W = scale * in):
      half_pixel (y + 0.5) / scale - 0.5; half_pixel_symmetric the same plus
      (in / 2) * (1 - out / W); pytorch_half_pixel as half_pixel if out > 1 else 0;
      align_corners y * (in - 1) / (W - 1) (0 if out == 1); asymmetric y / scale;
      tf_crop_and_resize start*(in-1) + y*(end-start)*(in-1)/(W-1) (out == 1: centre).
    nearest: index = round(x) per nearest_mode, clamped to [0, in - 1]. linear/cubic: tent or
    Keys(cubic_coeff_a) weights of the neighbours of x, edge pixels repeated outside the input;
    exclude_outside drops taps outside and renormalises; antialias (downscaling only) stretches
    the kernel by 1/scale and normalises. Axes are resampled one after the other.
    dtype: Y has X's dtype; nearest copies values exactly, linear/cubic integers round half to
    even and saturate. extrapolation_value (tf_crop_and_resize) fills outputs whose source
    coordinate leaves [0, in - 1] on any axis.
    """
    return _resize(X, roi, scales, sizes, allowed_ctm=_CTM_19, mode=mode,
                   coordinate_transformation_mode=coordinate_transformation_mode,
                   cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                   extrapolation_value=extrapolation_value, nearest_mode=nearest_mode,
                   antialias=antialias, axes=axes,
                   keep_aspect_ratio_policy=keep_aspect_ratio_policy)


def _upsample(X: np.ndarray, scales: Sequence[float], mode: str) -> np.ndarray:
    """Upsample: asymmetric coordinates (x = y / scale); nearest takes floor(x) (ceil(x) on an
    axis with scale < 1, which the spec forbids but onnxruntime accepts), linear the N-linear
    interpolation of the neighbours with edge clamping. The mode names linear (7+) and
    bilinear (1) are accepted in every version."""
    if mode not in ("nearest", "linear", "bilinear"):
        raise ValueError(f"Upsample mode must be nearest, linear or bilinear, got {mode!r}")
    scales = [float(s) for s in scales]
    if len(scales) != X.ndim:
        raise ValueError(f"scales has {len(scales)} values for a rank-{X.ndim} input")
    return _resize(X, None, np.asarray(scales), None, allowed_ctm=("asymmetric",),
                   mode="nearest" if mode == "nearest" else "linear",
                   coordinate_transformation_mode="asymmetric", nearest_mode="resize_10")


def _upsample_attr_infer(ctx: InferContext, X: TensorType | None, **attrs: Any) -> TensorType:
    in_shape = shape_of(X)
    if in_shape is None:
        return TensorType(dtype_of(X), None)
    if "scales" in attrs:
        scales = list(attrs["scales"])
    else:
        scales = [1.0] * (len(in_shape) - 2) + [attrs["height_scale"], attrs["width_scale"]]
    try:
        out, _, _ = _resize_plan(in_shape, scales, None, None, "stretch", None, "asymmetric")
    except ValueError as exc:
        ctx.fail(str(exc))
    return TensorType(dtype_of(X), tuple(out))


@op("Upsample", since=1, inputs=("X",), outputs=("Y",), infer=_upsample_attr_infer,
    attrs=(Attr("height_scale", "float", doc="scale of dim 2 (>= 1)"),
           Attr("width_scale", "float", doc="scale of dim 3 (>= 1)"),
           Attr("mode", "string", "nearest", "nearest or bilinear")))
def upsample_1(X: np.ndarray, *, height_scale: float, width_scale: float,
               mode: str) -> np.ndarray:
    """Upsample-1: X (N, C, H, W) -> (N, C, floor(H * height_scale), floor(W * width_scale)).

    nearest: Y[.., h, w] = X[.., floor(h / height_scale), floor(w / width_scale)]; bilinear:
    interpolation at (h / height_scale, w / width_scale) with edge clamping. Same dtype.
    """
    return _upsample(X, [1.0] * (X.ndim - 2) + [height_scale, width_scale], mode)


@op("Upsample", since=7, inputs=("X",), outputs=("Y",), infer=_upsample_attr_infer,
    attrs=(Attr("scales", "floats", doc="scale per dim (>= 1)"),
           Attr("mode", "string", "nearest", "nearest or linear")))
def upsample_7(X: np.ndarray, *, scales: tuple[float, ...], mode: str) -> np.ndarray:
    """Upsample-7: Y dims floor(X.shape[i] * scales[i]); the scales are an attribute.

    nearest: Y[y] = X[floor(y / scale)] per axis; linear: N-linear interpolation at
    y / scale with edge clamping. Any rank; same dtype (integers round half to even).
    """
    return _upsample(X, scales, mode)


@op("Upsample", since=9, inputs=("X", "scales"), outputs=("Y",),
    attrs=(Attr("mode", "string", "nearest", "nearest or linear"),),
    infer=_resize_infer(None, 1, None), value_inputs=(1,))
def upsample_9(X: np.ndarray, scales: np.ndarray, *, mode: str) -> np.ndarray:
    """Upsample-9 (deprecated at 10, the same meaning there): as Upsample-7 with the scales as
    an input tensor (float, (rank(X),))."""
    return _upsample(X, np.asarray(scales).reshape(-1).tolist(), mode)


# ---------------------------------------------------------------------------------------------
# GridSample / AffineGrid
# ---------------------------------------------------------------------------------------------


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect coordinates off the borders lo and hi (repeatedly) until they lie in [lo, hi]."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dist = np.where(below, lo - x, x - hi)
    flips = np.floor(dist / span)
    rest = dist - flips * span
    even = flips % 2 == 0
    from_below = np.where(even, lo + rest, hi - rest)
    from_above = np.where(even, hi - rest, lo + rest)
    return np.where(below, from_below, np.where(above, from_above, x))


def _grid_axis_taps(coord: np.ndarray, length: int, *, mode: str, padding_mode: str,
                    align_corners: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Taps of one spatial axis of GridSample: (indices, weights, inside), each (..., taps).

    coord: normalised positions in [-1, 1] (any shape). ``inside`` is False where a tap lies
    outside the input and padding_mode is zeros (its value counts as 0).
    """
    one = coord.dtype.type(1)
    x = (coord + one) / 2 * (length - 1) if align_corners else ((coord + one) * length - one) / 2
    lo, hi = (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)
    if mode == "nearest":
        x = np.rint(x)
    if mode != "cubic":  # cubic pads each tap, never the coordinate (torch, onnxruntime)
        outside = (x < lo) | (x > hi)
        if padding_mode == "border":
            x = np.where(outside, np.clip(x, 0, length - 1), x)
        elif padding_mode == "reflection":
            x = np.where(outside, _reflect(x, lo, hi), x)
    if mode == "nearest":
        taps = x[..., None]
        weights = np.ones_like(taps)
    else:
        floor = np.floor(x)
        t = (x - floor)[..., None]
        offsets = np.arange(2) if mode == "linear" else np.arange(-1, 3)
        taps = floor[..., None] + offsets
        weights = (np.concatenate([1 - t, t], axis=-1) if mode == "linear"
                   else _keys_cubic(t - offsets, -0.75).astype(t.dtype))
    if padding_mode == "zeros":
        inside = (taps >= 0) & (taps <= length - 1)
    else:
        inside = np.ones(taps.shape, dtype=bool)
        if padding_mode == "reflection":
            taps = np.trunc(_reflect(taps, lo, hi))
    return np.clip(taps, 0, length - 1).astype(np.intp), weights, inside


def _grid_sample(X: np.ndarray, grid: np.ndarray, *, mode: str, padding_mode: str,
                 align_corners: int) -> np.ndarray:
    """The GridSample computation shared by all versions (modes: nearest, linear, cubic)."""
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"unknown padding_mode {padding_mode!r}")
    rank = X.ndim - 2
    if grid.ndim != rank + 2 or grid.shape[-1] != rank or grid.shape[0] != X.shape[0]:
        raise ValueError(f"grid shape {grid.shape} does not fit X shape {X.shape}")
    coords = grid.astype(_float_compute_dtype(grid.dtype))
    axes = [_grid_axis_taps(coords[..., rank - 1 - i], X.shape[2 + i], mode=mode,
                            padding_mode=padding_mode, align_corners=align_corners)
            for i in range(rank)]  # grid's last dim lists the innermost axis first
    values = np.moveaxis(X, 1, -1)  # (N, D1..Dr, C)
    batch = np.arange(X.shape[0]).reshape((-1,) + (1,) * rank)
    if mode == "nearest":
        picked = values[(batch, *(taps[..., 0] for taps, _, _ in axes))]  # (N, O1..Or, C)
        inside = np.logical_and.reduce([ins[..., 0] for _, _, ins in axes])[..., None]
        out = np.where(inside, picked, np.zeros((), X.dtype))
        return np.moveaxis(out, -1, 1)
    values = values.astype(_float_compute_dtype(X.dtype))
    out = np.zeros(grid.shape[:-1] + (X.shape[1],), dtype=np.result_type(values, coords))
    for combo in itertools.product(range(axes[0][0].shape[-1]), repeat=rank):
        weight = np.ones((), coords.dtype)
        for (_, w, ins), k in zip(axes, combo, strict=True):
            weight = weight * np.where(ins[..., k], w[..., k], 0)
        picked = values[(batch, *(taps[..., k] for (taps, _, _), k in zip(axes, combo,
                                                                           strict=True)))]
        out += weight[..., None] * picked
    return _cast_back(np.moveaxis(out, -1, 1), X.dtype, rounding="trunc")


def _grid_sample_infer(ctx: InferContext, X: TensorType | None, grid: TensorType | None,
                       **attrs: Any) -> TensorType:
    xs, gs = shape_of(X), shape_of(grid)
    if gs is None and xs is None:
        return TensorType(dtype_of(X), None)
    if gs is None:
        return TensorType(dtype_of(X), (xs[0], xs[1]) + (None,) * (len(xs) - 2))
    n = gs[0] if xs is None or not isinstance(xs[0], int) else xs[0]
    c = None if xs is None else xs[1]
    if xs is not None and len(xs) != len(gs):
        ctx.fail(f"X has rank {len(xs)} but grid has rank {len(gs)}")
    return TensorType(dtype_of(X), (n, c) + tuple(gs[1:-1]))


_GRID_ATTRS = (
    Attr("align_corners", "int", 0, "1: -1 and 1 are the centres of the corner pixels"),
    Attr("padding_mode", "string", "zeros", "outside the input: zeros, border or reflection"),
)


@op("GridSample", since=16, inputs=("X", "grid"), outputs=("Y",), infer=_grid_sample_infer,
    attrs=_GRID_ATTRS + (Attr("mode", "string", "bilinear", "bilinear, nearest or bicubic"),))
def grid_sample_16(X: np.ndarray, grid: np.ndarray, *, align_corners: int, padding_mode: str,
                   mode: str) -> np.ndarray:
    """GridSample-16: the 4-D case of GridSample-20, with the modes named bilinear, nearest and
    bicubic. X (N, C, H, W), grid (N, H_out, W_out, 2) -> Y (N, C, H_out, W_out)."""
    names = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
    if mode not in names:
        raise ValueError(f"GridSample-16 mode must be bilinear, nearest or bicubic, got {mode!r}")
    if X.ndim != 4:
        raise ValueError(f"GridSample-16 takes a 4-D X, got rank {X.ndim}")
    return _grid_sample(X, grid, mode=names[mode], padding_mode=padding_mode,
                        align_corners=align_corners)


@op("GridSample", since=20, inputs=("X", "grid"), outputs=("Y",), infer=_grid_sample_infer,
    attrs=_GRID_ATTRS + (Attr("mode", "string", "linear", "linear, nearest or cubic"),))
def grid_sample_20(X: np.ndarray, grid: np.ndarray, *, align_corners: int, padding_mode: str,
                   mode: str) -> np.ndarray:
    """Y[n, c, o...] = X sampled at grid[n, o..., :] (as torch.nn.functional.grid_sample).

    X (N, C, D1..Dr), grid (N, O1..Or, r) with grid[..., 0] the innermost axis (x, then y, z);
    Y (N, C, O1..Or). Per axis of length L the normalised g maps to the pixel coordinate
    x = (g + 1) / 2 * (L - 1) (align_corners=1) or ((g + 1) * L - 1) / 2 (align_corners=0).
    nearest rounds x half to even; then (nearest, linear) a coordinate outside [lo, hi]
    ([0, L-1], or [-0.5, L-0.5] without align_corners) is clamped to [0, L-1] (border) or
    reflected off lo/hi (reflection). linear: tent weights of floor(x), floor(x)+1; cubic:
    Keys (a = -0.75) weights of floor(x)-1 .. floor(x)+2 at the unpadded coordinate. Taps
    outside the input read 0 (zeros), the clamped pixel (border) or the reflected pixel
    (reflection). This is torch's and onnxruntime's rule; the ONNX Python reference also clamps
    the cubic coordinate under border padding, which differs near the edges. Weights are
    computed in the grid's precision.
    dtype: Y has X's dtype; integer results are computed in float and truncated (saturating).
    """
    if mode not in ("linear", "nearest", "cubic"):
        raise ValueError(f"GridSample mode must be linear, nearest or cubic, got {mode!r}")
    return _grid_sample(X, grid, mode=mode, padding_mode=padding_mode,
                        align_corners=align_corners)


def _linspace_from_neg_one(length: int, align_corners: int) -> np.ndarray:
    """Normalised pixel-centre positions of an axis of ``length`` pixels (torch semantics)."""
    if length <= 1:
        return np.zeros(max(length, 0))
    positions = np.linspace(-1.0, 1.0, length)
    return positions if align_corners else positions * (length - 1) / length


def _affine_grid_infer(ctx: InferContext, theta: TensorType | None, size: TensorType | None,
                       **attrs: Any) -> TensorType:
    value = ctx.value(1)
    ts = shape_of(theta)
    if value is not None:
        dims = [int(d) for d in np.asarray(value).reshape(-1)]
        return TensorType(dtype_of(theta), (dims[0], *dims[2:], len(dims) - 2))
    count = None
    if shape_of(size) is not None and isinstance(shape_of(size)[0], int):
        count = shape_of(size)[0]
    elif ts is not None and isinstance(ts[1], int):
        count = ts[1] + 2
    if count is None:
        return TensorType(dtype_of(theta), None)
    n = ts[0] if ts is not None else None
    return TensorType(dtype_of(theta), (n,) + (None,) * (count - 2) + (count - 2,))


@op("AffineGrid", since=20, inputs=("theta", "size"), outputs=("grid",), value_inputs=(1,),
    infer=_affine_grid_infer,
    attrs=(Attr("align_corners", "int", 0, "1: -1 and 1 are the centres of the corner pixels"),))
def affine_grid(theta: np.ndarray, size: np.ndarray, *, align_corners: int) -> np.ndarray:
    """grid[n, d.., h, w, :] = theta[n] @ [x_w, y_h, (z_d,) 1] (torch affine_grid).

    theta (N, 2, 3) or (N, 3, 4); size int64 [N, C, H, W] or [N, C, D, H, W]; grid
    (N, H, W, 2) or (N, D, H, W, 3) with the innermost coordinate (x) first. Base positions per
    axis of length L: linspace(-1, 1, L), scaled by (L - 1) / L when align_corners=0; an axis
    of length 1 sits at 0. Computed in float32 (float64 for a float64 theta), cast to theta's
    dtype.
    """
    dims = [int(d) for d in np.asarray(size).reshape(-1)]
    spatial = dims[2:]
    rank = len(spatial)
    if rank not in (2, 3) or theta.shape[1:] != (rank, rank + 1):
        raise ValueError(f"theta shape {theta.shape} does not fit size {dims}")
    axes = [_linspace_from_neg_one(length, align_corners) for length in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # each (D.., H, W)
    base = np.stack([*mesh[::-1], np.ones(spatial)], axis=-1)  # (..., rank + 1): x, y, z, 1
    work = _float_compute_dtype(theta.dtype)
    grid = np.einsum("...k,njk->n...j", base.astype(work), theta.astype(work))
    return grid.astype(theta.dtype)


# ---------------------------------------------------------------------------------------------
# RoiAlign
# ---------------------------------------------------------------------------------------------


def _roi_axis_samples(start: Any, bin_size: Any, bins: int, grid: int, length: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Bilinear taps of the sample points of one RoI axis: indices and weights, each
    (bins, grid, 2). A sample outside [-1, length] gets weight 0; others clamp to [0, ...]."""
    dtype = np.asarray(start).dtype
    steps = np.arange(bins, dtype=dtype)[:, None] * bin_size
    offsets = (np.arange(grid, dtype=dtype) + dtype.type(0.5)) * bin_size / dtype.type(grid)
    pos = start + steps + offsets[None, :]  # (bins, grid)
    valid = (pos >= -1) & (pos <= length)
    pos = np.maximum(pos, 0)
    low = np.floor(pos)
    at_edge = low >= length - 1
    low = np.where(at_edge, length - 1, low)
    pos = np.where(at_edge, low, pos)
    frac = pos - low
    high = np.where(at_edge, low, low + 1)
    taps = np.stack([low, high], axis=-1).astype(np.intp)
    weights = np.stack([1 - frac, frac], axis=-1) * valid[..., None]
    return taps, weights


def _roi_align(X: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *, half_pixel: bool,
               mode: str, output_height: int, output_width: int, sampling_ratio: int,
               spatial_scale: float) -> np.ndarray:
    """RoiAlign shared by all versions; see roi_align_16."""
    if mode not in ("avg", "max"):
        raise ValueError(f"RoiAlign mode must be avg or max, got {mode!r}")
    work = _float_compute_dtype(X.dtype)
    data = X.astype(work)
    boxes = rois.astype(work) * work.type(spatial_scale) - work.type(0.5 if half_pixel else 0.0)
    height, width = X.shape[2], X.shape[3]
    out = np.zeros((rois.shape[0], X.shape[1], output_height, output_width), dtype=work)
    for r in range(rois.shape[0]):  # RoIs differ in their adaptive sampling grids
        x1, y1, x2, y2 = boxes[r]
        roi_w, roi_h = x2 - x1, y2 - y1
        if not half_pixel:  # legacy: force malformed RoIs to be 1 x 1
            roi_w, roi_h = max(roi_w, work.type(1)), max(roi_h, work.type(1))
        bin_h, bin_w = roi_h / work.type(output_height), roi_w / work.type(output_width)
        grid_h = sampling_ratio if sampling_ratio > 0 else int(math.ceil(roi_h / output_height))
        grid_w = sampling_ratio if sampling_ratio > 0 else int(math.ceil(roi_w / output_width))
        ys, wy = _roi_axis_samples(y1, bin_h, output_height, grid_h, height)
        xs, wx = _roi_axis_samples(x1, bin_w, output_width, grid_w, width)
        image = data[int(batch_indices[r])]  # (C, H, W)
        if mode == "avg":
            rows = np.zeros((output_height, height), dtype=work)
            np.add.at(rows, (np.arange(output_height)[:, None, None], ys), wy)
            cols = np.zeros((output_width, width), dtype=work)
            np.add.at(cols, (np.arange(output_width)[:, None, None], xs), wx)
            out[r] = np.einsum("ph,chw,qw->cpq", rows, image, cols) / max(grid_h * grid_w, 1)
        elif grid_h > 0 and grid_w > 0:  # (an empty RoI has no samples: 0)
            # max over samples and over the four weighted corner terms (onnxruntime's rule)
            corners = image[:, ys[:, :, :, None, None, None], xs[None, None, None]]
            terms = corners * (wy[:, :, :, None, None, None] * wx[None, None, None])
            out[r] = terms.max(axis=(2, 3, 5, 6))
    return out.astype(X.dtype)


def _roi_align_infer(ctx: InferContext, X: TensorType | None, rois: TensorType | None,
                     batch_indices: TensorType | None, **attrs: Any) -> TensorType:
    xs, rs, bs = shape_of(X), shape_of(rois), shape_of(batch_indices)
    count = rs[0] if rs is not None else (bs[0] if bs is not None else None)
    channels = xs[1] if xs is not None else None
    return TensorType(dtype_of(X), (count, channels, attrs["output_height"],
                                    attrs["output_width"]))


_ROI_ATTRS = (
    Attr("mode", "string", "avg", "pooling over the samples of a bin: avg or max"),
    Attr("output_height", "int", 1, "pooled height"),
    Attr("output_width", "int", 1, "pooled width"),
    Attr("sampling_ratio", "int", 0, "samples per bin and axis; 0: ceil(roi size / bins)"),
    Attr("spatial_scale", "float", 1.0, "factor from RoI coordinates to X's pixel grid"),
)


@op("RoiAlign", since=10, inputs=("X", "rois", "batch_indices"), outputs=("Y",),
    attrs=_ROI_ATTRS, infer=_roi_align_infer)
def roi_align_10(X: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *, mode: str,
                 output_height: int, output_width: int, sampling_ratio: int,
                 spatial_scale: float) -> np.ndarray:
    """RoiAlign-10: RoiAlign-16 with coordinate_transformation_mode fixed to
    output_half_pixel (no -0.5 pixel shift; RoIs smaller than 1 x 1 are enlarged to 1 x 1)."""
    return _roi_align(X, rois, batch_indices, half_pixel=False, mode=mode,
                      output_height=output_height, output_width=output_width,
                      sampling_ratio=sampling_ratio, spatial_scale=spatial_scale)


@op("RoiAlign", since=16, inputs=("X", "rois", "batch_indices"), outputs=("Y",),
    attrs=_ROI_ATTRS + (Attr("coordinate_transformation_mode", "string", "half_pixel",
                             "half_pixel (shift by -0.5) or output_half_pixel (legacy)"),),
    infer=_roi_align_infer)
def roi_align_16(X: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *, mode: str,
                 output_height: int, output_width: int, sampling_ratio: int,
                 spatial_scale: float, coordinate_transformation_mode: str) -> np.ndarray:
    """Y[r, c, i, j] = pool over the sample points of bin (i, j) of RoI r of X[b_r, c].

    X (N, C, H, W) float; rois (R, 4) = [x1, y1, x2, y2] in image coordinates; batch_indices
    int64 (R,); Y (R, C, output_height, output_width), X's dtype.
    A RoI is scaled by spatial_scale (and shifted by -0.5 for half_pixel); its size is split in
    output_height x output_width bins, each sampled on a grid_h x grid_w lattice of bin
    sub-cell centres (grid = sampling_ratio, or ceil(roi size / bins) when it is 0). A sample
    is bilinearly interpolated from its 4 neighbours (coordinates clamped at 0 and at the last
    pixel); samples outside [-1, H] x [-1, W] count as 0. avg: mean over the samples. max:
    maximum over the samples of the four weighted corner terms w_k * X[corner_k] (the rule of
    onnxruntime and of the ONNX tests, not the max of the interpolated values).
    Computed in X's precision (float32 for float16/bfloat16).
    """
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise ValueError("coordinate_transformation_mode must be half_pixel or "
                         f"output_half_pixel, got {coordinate_transformation_mode!r}")
    return _roi_align(X, rois, batch_indices,
                      half_pixel=coordinate_transformation_mode == "half_pixel", mode=mode,
                      output_height=output_height, output_width=output_width,
                      sampling_ratio=sampling_ratio, spatial_scale=spatial_scale)


# ---------------------------------------------------------------------------------------------
# NonMaxSuppression
# ---------------------------------------------------------------------------------------------


def _box_corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """(..., 4) boxes -> (..., 4) as [y_min, x_min, y_max, x_max]."""
    if center_point_box:
        cx, cy, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=-1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """IoU of one [y_min, x_min, y_max, x_max] box with each of ``others`` (K, 4); 0 where
    the intersection or an area is not positive."""
    inter_h = np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0])
    inter_w = np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1])
    overlap = (inter_h > 0) & (inter_w > 0)
    inter = np.where(overlap, inter_h * inter_w, 0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    ok = overlap & (area > 0) & (areas > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, inter / np.where(ok, union, 1), 0)


def _nms_infer(ctx: InferContext, *types: Any, **attrs: Any) -> TensorType:
    return TensorType(DType.int64, (ctx.fresh_dim("selected"), 3))


def _scalar(value: np.ndarray | None, default: Any) -> Any:
    if value is None or np.asarray(value).size == 0:
        return default
    return np.asarray(value).reshape(-1)[0]


@op("NonMaxSuppression", since=10,
    inputs=("boxes", "scores", "max_output_boxes_per_class?", "iou_threshold?",
            "score_threshold?"),
    outputs=("selected_indices",), infer=_nms_infer,
    attrs=(Attr("center_point_box", "int", 0,
                "0: boxes are [y1, x1, y2, x2] corners; 1: [x_center, y_center, w, h]"),))
def non_max_suppression(boxes: np.ndarray, scores: np.ndarray,
                        max_output_boxes_per_class: np.ndarray | None = None,
                        iou_threshold: np.ndarray | None = None,
                        score_threshold: np.ndarray | None = None, *,
                        center_point_box: int) -> np.ndarray:
    """Greedy non-maximum suppression per (batch, class).

    boxes float (B, K, 4); scores float (B, classes, K); max_output_boxes_per_class int64
    scalar (absent: 0, i.e. nothing selected); iou_threshold scalar (absent: 0);
    score_threshold scalar (absent: no score filter). Output int64 (num_selected, 3) rows
    [batch, class, box], batch-major then class, each class in selection order.
    Per class: keep boxes with score > score_threshold (strictly, as onnxruntime and the ONNX
    reference do), visit them by descending score (ties: lower box index first), select a box
    unless its IoU with an already selected box of that class is > iou_threshold (equal is
    kept), stop after max_output_boxes_per_class. Boxes may list their corners in any order;
    IoU is 0 for boxes without positive area. Arithmetic in the boxes' dtype (float32).
    """
    limit = max(int(_scalar(max_output_boxes_per_class, 0)), 0)
    iou_limit = _scalar(iou_threshold, np.float32(0))
    floor = _scalar(score_threshold, None)
    corners = _box_corners(boxes, center_point_box)
    selected: list[tuple[int, int, int]] = []
    for b, c in itertools.product(range(scores.shape[0]), range(scores.shape[1])):
        if limit == 0:
            break
        class_scores = scores[b, c]
        order = np.argsort(-class_scores.astype(np.float64), kind="stable")
        if floor is not None:
            order = order[class_scores[order] > floor]
        candidates = corners[b, order]
        alive = np.ones(len(order), dtype=bool)
        kept = 0
        for i in range(len(order)):  # greedy: each pick suppresses later overlapping boxes
            if not alive[i]:
                continue
            selected.append((b, c, int(order[i])))
            kept += 1
            if kept == limit:
                break
            alive[i + 1:] &= ~(_iou(candidates[i], candidates[i + 1:]) > iou_limit)
    return np.array(selected, dtype=np.int64).reshape(-1, 3)


# ---------------------------------------------------------------------------------------------
# CenterCropPad
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# ImageDecoder
# ---------------------------------------------------------------------------------------------


def _image_decoder_infer(ctx: InferContext, stream: TensorType | None, *,
                         pixel_format: str) -> TensorType:
    return TensorType(DType.uint8, (None, None, 1 if pixel_format == "Grayscale" else 3))


@op("ImageDecoder", since=20, inputs=("encoded_stream",), outputs=("image",),
    infer=_image_decoder_infer,
    attrs=(Attr("pixel_format", "string", "RGB", "RGB, BGR or Grayscale"),))
def image_decoder(encoded_stream: np.ndarray, *, pixel_format: str) -> np.ndarray:
    """Decode an encoded image (BMP, JPEG, JPEG 2000, TIFF, PNG, WebP, PBM/PGM/PPM/PNM).

    encoded_stream uint8 (bytes,); image uint8 (H, W, 3) for RGB/BGR, (H, W, 1) for Grayscale.
    Decoded with Pillow (imported lazily; JPEG chroma uses libjpeg's fancy upsampling). Any
    colour model is converted (palette, alpha dropped, CMYK...). A stream that cannot be
    decoded gives an empty (0, 0, channels) image, as the spec asks.
    """
    if pixel_format not in ("RGB", "BGR", "Grayscale"):
        raise ValueError(f"pixel_format must be RGB, BGR or Grayscale, got {pixel_format!r}")
    try:
        import PIL.Image
    except ImportError as exc:
        raise ImportError("ImageDecoder needs Pillow: pip install pillow") from exc
    channels = 1 if pixel_format == "Grayscale" else 3
    try:
        with PIL.Image.open(io.BytesIO(np.asarray(encoded_stream, np.uint8).tobytes())) as img:
            pixels = np.asarray(img.convert("L" if channels == 1 else "RGB"), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError, PIL.Image.DecompressionBombError):
        return np.zeros((0, 0, channels), dtype=np.uint8)
    if channels == 1:
        return pixels[:, :, None].copy()
    return np.ascontiguousarray(pixels[:, :, ::-1] if pixel_format == "BGR" else pixels)


OPS = (
    resize_10, resize_11, resize_13, resize_18, resize_19,
    upsample_1, upsample_7, upsample_9,
    grid_sample_16, grid_sample_20,
    affine_grid,
    roi_align_10, roi_align_16,
    non_max_suppression,
    center_crop_pad,
    image_decoder,
)
