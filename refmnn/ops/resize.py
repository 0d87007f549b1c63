"""Resize and Upsample.

Both share one rank-generic, separable interpolation: for every resized axis the output
coordinates are mapped to source coordinates, each output position gets a short list of source
indices ("taps") with weights, and the data is contracted with those weights one axis at a time
(``_resample_axis``). GridSample (refmnn.ops.image) uses the same tap/weight description per
spatial axis, but the coordinates vary per output element, so it gathers the taps jointly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from refmnn.graph import TensorType
from refmnn.ops._image_util import cast_back, float_compute_dtype, keys_cubic
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, flag, op

def _triangle(d: np.ndarray) -> np.ndarray:
    """The linear-interpolation (tent) kernel max(0, 1 - |d|)."""
    return np.clip(1 - np.abs(d), 0, 1)


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


def _source_coordinates(out_len: int, in_len: int, scale: float, out_width: float,
                        roi: tuple[float, float], ctm: str) -> np.ndarray:
    """x_original for every x_resized in [0, out_len), per coordinate_transformation_mode.

    ``scale`` is the axis scale (given, or size / in_len); ``out_width`` the target length
    before rounding: in_len * scale with scales (times roi_end - roi_start for
    tf_crop_and_resize, whose output covers the region), the size with sizes. As in the spec
    and the ONNX tests, the ratios of align_corners and tf_crop_and_resize divide by W - 1 with
    W = ``out_width``, the possibly fractional output width (intended: onnx/onnx#2462;
    onnxruntime, PyTorch and MNN divide by the integer length - 1, so an export of
    ``interpolate(scale_factor=s, align_corners=True)`` where in * s is not whole gives
    other values there); the "length_resized > 1" tests use the integer output length
    (pytorch_half_pixel gives 0 there, as the spec says).
    """
    y = np.arange(out_len, dtype=np.float64)
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


def _resize_taps(in_len: int, out_len: int, scale: float, out_width: float,
                 roi: tuple[float, float], *,
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
    x = _source_coordinates(out_len, in_len, scale, out_width, roi, ctm)
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
        weights = _triangle(distance) if mode == "linear" else keys_cubic(distance, cubic_coeff_a)
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
                 ) -> tuple[list[Any], dict[int, float | None], dict[int, tuple[float, float]],
                            dict[int, float | None]]:
    """Output shape, per-axis scale, per-axis roi (start, end) and per-axis target width (the
    output length before rounding; see :func:`_source_coordinates`) of a Resize.

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
    widths: dict[int, float | None] = {}
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
            d = in_shape[a]
            widths[a] = d * (end - start) * float(s) if isinstance(d, int) else None
            if s == 1.0 and (start, end) == (0.0, 1.0):
                continue  # out = in, symbolic dims kept
            out[a] = math.floor(widths[a]) if widths[a] is not None else None
        return out, axis_scale, rois, widths
    ratios = {a: (int(n) / in_shape[a] if in_shape[a] else 1.0)
              if isinstance(in_shape[a], int) else None for a, n in zip(axes, sizes, strict=True)}
    if policy == "stretch":
        for a, n in zip(axes, sizes, strict=True):
            if isinstance(in_shape[a], int) and in_shape[a] == 0 and n != 0:
                raise ValueError(f"cannot resize an empty axis {a} to {n}")
            out[a], axis_scale[a], widths[a] = int(n), ratios[a], float(n)
        return out, axis_scale, rois, widths
    if policy not in _POLICIES:
        raise ValueError(f"unknown keep_aspect_ratio_policy {policy!r}")
    known = [r for r in ratios.values() if r is not None]
    common = None if len(known) < len(ratios) else (min(known) if policy == "not_larger"
                                                    else max(known))
    for a in axes:
        axis_scale[a] = common
        widths[a] = None if common is None else common * in_shape[a]
        out[a] = None if common is None else math.floor(common * in_shape[a] + 0.5)
    return out, axis_scale, rois, widths


def _interpolate(X: np.ndarray, out_shape: Sequence[int], axis_scale: dict[int, float | None],
                 rois: dict[int, tuple[float, float]], widths: dict[int, float | None], *,
                 mode: str, ctm: str, nearest_mode: str,
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
    result = X if mode == "nearest" else X.astype(float_compute_dtype(X.dtype))
    outside = np.zeros((1,) * X.ndim, dtype=bool)
    for axis, scale in axis_scale.items():
        in_len, out_len = X.shape[axis], int(out_shape[axis])
        if out_len == 0 or in_len == 0:  # nothing to sample (an empty axis resizes to 0)
            result = np.take(result, np.zeros(0, np.intp), axis=axis)
            continue
        taps, weights, x = _resize_taps(
            in_len, out_len, scale, widths[axis], rois[axis], mode=mode, ctm=ctm,
            nearest_mode=nearest_mode, cubic_coeff_a=cubic_coeff_a,
            exclude_outside=bool(exclude_outside),
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
    return cast_back(result, X.dtype, rounding="even")


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
    out_shape, axis_scale, rois, widths = _resize_plan(
        X.shape, _as_list(scales), _as_list(sizes), axes, keep_aspect_ratio_policy,
        _as_list(roi), ctm)
    return _interpolate(X, out_shape, axis_scale, rois, widths, mode=mode, ctm=ctm,
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
            out = _resize_plan(in_shape, scales, sizes, attrs.get("axes"),
                               attrs.get("keep_aspect_ratio_policy", "stretch"),
                               roi or None, ctm)[0]
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
    flag("exclude_outside", 0, "1: taps outside the input get weight 0, renormalised"),
    Attr("extrapolation_value", "float", 0.0,
         "tf_crop_and_resize: value where the source coordinate leaves [0, in - 1]"),
    Attr("mode", "string", "nearest", "nearest, linear or cubic"),
    Attr("nearest_mode", "string", "round_prefer_floor",
         "nearest rounding: round_prefer_floor, round_prefer_ceil, floor, ceil"),
)
_RESIZE_ATTRS_18 = _RESIZE_ATTRS_11 + (
    flag("antialias", 0, "1: linear/cubic stretch the kernel by 1/scale when downscaling"),
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
    Source coordinate x of output index y (scale per axis; W, the output length before
    rounding: scale * in, times (end - start) for tf_crop_and_resize, or the size):
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
        out = _resize_plan(in_shape, scales, None, None, "stretch", None, "asymmetric")[0]
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


OPS = (
    resize_10, resize_11, resize_13, resize_18, resize_19,
    upsample_1, upsample_7, upsample_9,
)
