"""Resize (opsets 10-19) and Upsample (7, 9): modes x coordinate transformations x nearest
rounding x cubic coefficient x exclude_outside x tf_crop_and_resize roi and extrapolation,
scales or sizes, axes, antialias and keep_aspect_ratio_policy (18+), ranks 1-5."""

from __future__ import annotations

import math

import numpy as np

from refmnn.dtypes import DType
from refmnn.ops.resize import (_nearest_index, _resize_plan, _resize_taps,
                               _source_coordinates)

from ._sweep import Sample, SampleContext, Sweep, Tol

_SCALES = (0.25, 0.5, 0.6, 0.75, 0.8, 1.0, 1.25, 1.5, 1.7, 2.0, 2.5, 3.0)
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_CTM_13 = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
           "tf_crop_and_resize")


def _coordinate_modes(opset: int) -> tuple[str, ...]:
    if opset < 13:
        return _CTM_13 + ("tf_half_pixel_for_nn",)
    return _CTM_13 + (("half_pixel_symmetric",) if opset >= 19 else ())


def _layout(rng: np.random.Generator, mode: str) -> tuple[int, list[int]]:
    """A rank and the axes to resize. linear/cubic mostly take a layout onnxruntime implements
    (rank 2 or 3 resized whole, rank 4 or 5 with the outer two axes kept; cubic: 2-D only); the
    spec allows any, drawn the rest of the time (and always for nearest)."""
    if mode != "nearest" and rng.random() < 0.85:
        rank = int(rng.choice([2, 4] if mode == "cubic" else [2, 3, 4, 5]))
        return rank, list(range(2 if rank > 3 else 0, rank))
    rank = int(rng.integers(1, 6))
    count = int(rng.integers(1, rank + 1))
    return rank, sorted(rng.choice(rank, count, replace=False).tolist())


def _draw_scale(rng: np.random.Generator, length: int, upsample: bool) -> float:
    """A scale from the table (>= 1 for Upsample) giving at least one output element."""
    choices = [s for s in _SCALES if (s >= 1 if upsample else length * s >= 1)]
    return float(rng.choice(choices)) if choices else 1.0


def _roi_bounds(rng: np.random.Generator, unit_width: bool) -> tuple[float, float]:
    """A tf_crop_and_resize region [start, end] in eighths, possibly reaching outside [0, 1];
    ``unit_width``: end - start == 1 (exactly, in float32)."""
    start = float(rng.integers(-3, 6)) / 8
    width = 1.0 if unit_width else float(rng.integers(1, 11)) / 8
    return start, start + width


def draw_resize(ctx: SampleContext, opset: int) -> Sample:
    """A random Resize at ``opset``: rank 1-5 with dims 1-6 (rarely an empty axis that is not
    resized), a mode of the opset (integers mostly nearest), a coordinate transformation of
    the opset, nearest_mode, cubic_coeff_a and exclude_outside; scales from a table of exact
    and inexact values or sizes 1-9 (11+); tf_crop_and_resize draws a roi in eighths (with
    scales mostly of width 1, so the output length is the same under every reading of the
    size rule) and an extrapolation_value; 18+ draws an axes subset (negative or permuted at
    times), antialias and keep_aspect_ratio_policy. linear/cubic mostly resize only the
    innermost axes."""
    rng = ctx.rng
    modes = ["nearest", "linear"] + (["cubic"] if opset >= 11 else [])
    mode = str(rng.choice(modes)) if ctx.is_float or rng.random() < 0.3 else "nearest"
    rank, resized = _layout(rng, mode)
    shape = [int(d) for d in rng.integers(1, 7, rank)]
    if opset < 18:  # no axes: every axis is listed, the others with scale 1 / their size
        listed = list(range(rank))
    else:
        listed = resized if rng.random() < 0.5 else list(range(rank))
        if rng.random() < 0.2:
            listed = [int(a) for a in rng.permutation(listed)]
    still = [a for a in range(rank) if a not in resized]
    if still and rng.random() < 0.05:
        shape[int(rng.choice(still))] = 0
    attrs: dict[str, object] = {"mode": mode}
    if opset == 10:
        scales = [_draw_scale(rng, shape[a], False) if a in resized else 1.0 for a in listed]
        return Sample((ctx.make(shape), np.array(scales, np.float32)), attrs)
    ctm = str(rng.choice(_coordinate_modes(opset)))
    attrs["coordinate_transformation_mode"] = ctm
    if mode == "nearest":
        attrs["nearest_mode"] = str(rng.choice(_NEAREST))
    if mode == "cubic" and rng.random() < 0.6:
        attrs["cubic_coeff_a"] = float(rng.choice([-0.5, -0.75, round(rng.uniform(-1, 0), 3)]))
    if opset >= 18 and mode != "nearest" and rng.random() < 0.4:
        attrs["antialias"] = 1
    if mode == "cubic" or "antialias" in attrs or rng.random() < 0.1:
        if mode != "nearest" and rng.random() < 0.4:  # (onnxruntime: cubic or antialias only)
            attrs["exclude_outside"] = 1
    use_sizes = rng.random() < 0.4
    roi = None
    if ctm == "tf_crop_and_resize":
        if rng.random() < 0.7:
            values = [-1.5, 0.5, 7.0, -100.0] if ctx.is_float else [0.0, 7.0, 100.0]
            attrs["extrapolation_value"] = float(rng.choice(values))
        unit = not use_sizes and rng.random() < 0.8
        bounds = [_roi_bounds(rng, unit) if a in resized
                  else (0.0, 1.0) for a in listed]
        roi = np.array([b[0] for b in bounds] + [b[1] for b in bounds], np.float32)
    elif opset == 11 or rng.random() < 0.2:  # ignored; required as an input at 11
        roi = np.zeros(0 if rng.random() < 0.5 else 2 * len(listed), np.float32)
    if use_sizes:
        sizes = [int(rng.integers(1, 10)) if a in resized else shape[a] for a in listed]
        if opset >= 18 and rng.random() < 0.4:
            attrs["keep_aspect_ratio_policy"] = str(rng.choice(["not_larger", "not_smaller"]))
        if any(shape[a] == 0 for a in listed):
            attrs.pop("keep_aspect_ratio_policy", None)
        scales = np.zeros(0, np.float32) if opset == 11 else None
        inputs = [ctx.make(shape), roi, scales, np.array(sizes, np.int64)]
    else:
        scales = [_draw_scale(rng, shape[a], False) if a in resized else 1.0 for a in listed]
        inputs = [ctx.make(shape), roi, np.array(scales, np.float32)]
    if opset >= 18 and listed != list(range(rank)):
        attrs["axes"] = [a - rank if rng.random() < 0.5 else a for a in listed]
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), attrs)


def draw_upsample(ctx: SampleContext, opset: int) -> Sample:
    """A random Upsample: rank 1-5, scales >= 1 from the table on some axes (linear: mostly
    the innermost one or two), mode nearest or linear; the scales an attribute at 7, an input
    at 9."""
    rng = ctx.rng
    mode = str(rng.choice(["nearest", "linear"]))
    rank, resized = _layout(rng, mode)
    shape = [int(d) for d in rng.integers(1, 6, rank)]
    scales = [_draw_scale(rng, shape[a], True) if a in resized else 1.0 for a in range(rank)]
    if opset < 9:
        return Sample((ctx.make(shape),), {"mode": mode, "scales": scales})
    return Sample((ctx.make(shape), np.array(scales, np.float32)), {"mode": mode})


def _axes_plan(sample: Sample, opset: int) -> list[tuple[int, int, float, float, tuple]]:
    """(in_len, out_len, scale, out_width, roi) of each listed axis of a Resize sample, as the
    reference reads them (scale 1 and roi [0, 1] where the sample omits them)."""
    x, roi, scales, sizes = (list(sample.inputs) + [None] * 3)[:4]
    if opset == 10:
        roi, scales = None, sample.inputs[1]
    attrs = sample.attrs

    def listed(values: np.ndarray | None) -> list | None:
        return None if values is None or values.size == 0 else values.tolist()

    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    out, scale, rois, widths = _resize_plan(
        x.shape, listed(scales), listed(sizes), attrs.get("axes"),
        attrs.get("keep_aspect_ratio_policy", "stretch"), listed(roi), ctm)
    return [(x.shape[a], out[a], scale[a], widths[a], rois[a]) for a in scale]


def _near_tie(sample: Sample, opset: int) -> bool:
    """Whether a nearest source coordinate lies within 1e-5 of where its rounding flips (an
    integer for floor/ceil, a half for the round modes): float32 arithmetic may round it to
    the other side."""
    ctm = sample.attrs.get("coordinate_transformation_mode", "half_pixel")
    mode = sample.attrs.get("nearest_mode", "round_prefer_floor")
    if opset == 10:
        ctm, mode = "asymmetric", "floor"
    for in_len, out_len, scale, width, roi in _axes_plan(sample, opset):
        if in_len == 0 or out_len == 0:
            continue
        x = _source_coordinates(out_len, in_len, scale, width, roi, ctm)
        flip = x if mode in ("floor", "ceil") else x - 0.5
        if np.any(np.abs(flip - np.round(flip)) < 1e-5):
            return True
    return False


def _moves_unscaled_axis(sample: Sample, opset: int) -> bool:
    """Whether an axis of scale 1 reads other pixels than its own (a shifted or cropped
    coordinate transformation: tf_half_pixel_for_nn, tf_crop_and_resize), or, for
    tf_crop_and_resize, takes the extrapolation value somewhere (a coordinate outside
    [0, in_len - 1], though its nearest index may round back inside: 1.25 on a length 2)."""
    attrs = sample.attrs
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    for in_len, out_len, scale, width, roi in _axes_plan(sample, opset):
        if scale != 1 or in_len == 0 or opset == 10:
            continue
        x = _source_coordinates(out_len, in_len, scale, width, roi, ctm)
        if ctm == "tf_crop_and_resize" and np.any((x < 0) | (x > in_len - 1)):
            return True
        if attrs.get("mode", "nearest") == "nearest":
            x = np.clip(_nearest_index(x, attrs.get("nearest_mode", "round_prefer_floor")),
                        -1 if ctm == "tf_crop_and_resize" else 0, in_len - 1)
        if not np.array_equal(x, np.arange(in_len)):
            return True
    return False


def _symmetric_near_integer(sample: Sample, opset: int) -> bool:
    """Whether half_pixel_symmetric puts a source coordinate within 1e-9 of an integer, where
    its offset's rounding (in_len / 2 * (1 - out_len / out_width)) leaves it a hair either
    side (5.6e-17 for 3 -> 2 at scale 0.5)."""
    if sample.attrs.get("coordinate_transformation_mode") != "half_pixel_symmetric":
        return False
    for in_len, out_len, scale, width, roi in _axes_plan(sample, opset):
        if in_len and out_len:
            x = _source_coordinates(out_len, in_len, scale, width, roi, "half_pixel_symmetric")
            if np.any(np.abs(x - np.round(x)) < 1e-9):
                return True
    return False


def _every_tap_outside(sample: Sample, opset: int) -> bool:
    """Whether exclude_outside leaves an output of linear/cubic no weight inside the input (a
    coordinate two or more pixels outside it), with the reference's own taps."""
    attrs = sample.attrs
    mode = attrs.get("mode", "nearest")
    if not attrs.get("exclude_outside") or mode == "nearest":
        return False
    for in_len, out_len, scale, width, roi in _axes_plan(sample, opset):
        if in_len and out_len:
            _, weights, _ = _resize_taps(
                in_len, out_len, scale, width, roi, mode=mode,
                ctm=attrs.get("coordinate_transformation_mode", "half_pixel"),
                nearest_mode="round_prefer_floor",
                cubic_coeff_a=float(np.float32(attrs.get("cubic_coeff_a", -0.75))),  # as stored
                exclude_outside=True,
                antialias=bool(attrs.get("antialias", 0)))
            if np.any((weights == 0).all(axis=1)):
                return True
    return False


def known_resize(sample: Sample, opset: int, peer: str) -> str | None:
    """The Resize differences read as the peers' (see each reason)."""
    attrs = sample.attrs
    mode = attrs.get("mode", "nearest")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    x, scales = sample.inputs[0], sample.inputs[1 if opset == 10 else 2] \
        if len(sample.inputs) > (1 if opset == 10 else 2) else None
    with_scales = scales is not None and scales.size > 0
    plan = _axes_plan(sample, opset)
    if ctm == "tf_crop_and_resize" and with_scales and any(r[1] - r[0] != 1 for *_, r in plan):
        return ("tf_crop_and_resize with scales and a roi narrower or wider than 1: the peer "
                "sizes the output floor(in * scale), leaving out the spec's (roi_end - "
                "roi_start) factor (onnx/onnx#5783; tests/test_reference_oracles.py::"
                "test_tf_crop_and_resize_spreads_the_output_over_the_region)")
    if mode == "nearest" and _near_tie(sample, opset):
        return ("nearest with a source coordinate within 1e-5 of a rounding boundary (e.g. "
                "1.5 / float32(0.6) - 0.5 = 1.99999992): the peer computes it in float32 "
                "(onnxruntime) or in another order (onnx.reference) and lands on the other "
                "side; the reference computes the spec's formula in float64")
    if _every_tap_outside(sample, opset):
        return ("exclude_outside with every tap of an output outside the input (align_corners "
                "on a fractional output width puts x = 4 on a length 3): the weights are all "
                "0 and renormalising them divides 0 by 0, which the spec leaves open; the "
                "reference gives 0 (no tap contributes), onnxruntime clamps x into the input "
                "first, onnx.reference gives other values")
    if x.dtype.kind in "iu" and mode != "nearest":
        return ("integer linear/cubic: the peer truncates the interpolated value toward zero "
                "(onnxruntime: 1.5 -> 1, -3.25 -> -3; onnx.reference: astype of its float64 "
                "result); the spec does not say how an integer result is rounded and the "
                "reference rounds half to even (resize_19's docstring)")
    if peer == "onnx.reference":
        if (mode == "cubic" or attrs.get("exclude_outside")) and \
                _symmetric_near_integer(sample, opset):
            return ("half_pixel_symmetric at a source coordinate a rounding error off an integer "
                    "(5 -> 9 at scale 1.75: x = 2 + 4e-16): onnx.reference 1.23.2 weighs the "
                    "taps floor(x) - 1 .. floor(x) + 2 (1-4) but reads the pixels nearest x by "
                    "distance (0-3), and applies exclude_outside's in-range test to the latter: "
                    "the row comes out wrong, or all 0 under exclude_outside (in nearest mode "
                    "too); onnxruntime agrees with the reference where it runs the case")
        if attrs.get("antialias") and attrs.get("exclude_outside") and mode == "cubic":
            return ("antialias with exclude_outside, cubic: onnx.reference 1.23.2's antialias "
                    "path weighs some outputs near the edges differently (seed 18: 4 of 5625 "
                    "elements off by up to 3.1e-5, in float32 and in float64 alike); an "
                    "independent float64 evaluation of the spec's separable formula agrees with "
                    "the reference to 2e-14")
        if ctm == "tf_half_pixel_for_nn":
            return ("tf_half_pixel_for_nn: onnx.reference does not implement it (it raises, "
                    "except where every scale is 1, where it returns the input unshifted)")
        if ctm in ("pytorch_half_pixel", "tf_crop_and_resize") and \
                any(out == 1 for _, out, *_ in plan):
            return (f"{ctm} on an axis resized to length 1: onnx.reference tests the "
                    "fractional width in * scale against 1 (and returns -0.5 for "
                    "pytorch_half_pixel); the spec's case is length_resized (the output "
                    "length) == 1, giving x_original = 0, or the roi centre for "
                    "tf_crop_and_resize")
        return None
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch" and \
            any(a < 0 for a in attrs.get("axes", ())):
        return ("keep_aspect_ratio_policy not_larger/not_smaller with a negative axis: "
                "onnxruntime 1.32 leaves the axes named negatively at their input length (onnx "
                "shape inference agrees with the reference); the spec accepts axes in [-r, r-1]")
    if ctm in ("align_corners", "tf_crop_and_resize") and \
            any(w != out for _, out, _, w, _ in plan if out > 1):
        return (f"{ctm} with a fractional output width (in * scale, or scale * in under "
                "keep_aspect_ratio_policy): onnxruntime divides by length_resized - 1 with the "
                "integer output length; the reference divides by output_width - 1 with the "
                "fractional width, as onnx.reference and the ONNX test "
                "resize_downsample_scales_linear_align_corners ([[1, 3.142857]]) do (the spec "
                "text names length_resized in the formula but defines output_width for this)")
    if all(out == in_len for in_len, out, *_ in plan):
        return ("the output shape equals the input shape: onnxruntime returns the input "
                "unchanged whatever the scales (2 x 2 at scales [1, 1.25], half_pixel, gives "
                "the input); the spec samples at x = (y + 0.5) / 1.25 - 0.5 there")
    if attrs.get("antialias") and mode != "nearest" and ctm == "tf_crop_and_resize" and any(
            r[0] < 0 or r[1] > 1 for *_, r in plan):
        return ("antialias with tf_crop_and_resize and a roi reaching outside [0, 1]: "
                "onnxruntime's antialias path samples the edge pixels where the spec writes "
                "extrapolation_value ('When coordinate_transformation_mode is "
                "\"tf_crop_and_resize\" and x_original is outside the range [0, "
                "length_original - 1], this value is used'); without antialias it agrees, and "
                "onnx.reference agrees with the reference")
    if attrs.get("antialias") and any(out == n and sc != 1 for n, out, sc, *_ in plan):
        return ("antialias with an axis whose output length equals its input length at a "
                "scale other than 1 (3 at scale 1.25 -> 3): onnxruntime's antialias path "
                "copies that axis; the spec (and onnx.reference) sample it at the scale's "
                "coordinates")
    if _moves_unscaled_axis(sample, opset):
        return (f"{ctm} on an axis of scale 1: onnxruntime leaves the axis untouched; the spec "
                "(and onnx.reference) still apply the transformation there: "
                "tf_half_pixel_for_nn shifts it by half a pixel, tf_crop_and_resize crops it "
                "to its roi")
    return None


def known_upsample(sample: Sample, opset: int, peer: str) -> str | None:
    """The Upsample differences read as the peers' (as Resize's)."""
    x = sample.inputs[0]
    scales = sample.attrs["scales"] if opset < 9 else sample.inputs[1].tolist()
    if x.dtype.kind in "iu" and sample.attrs.get("mode") == "linear":
        return ("integer linear: onnxruntime truncates the interpolated value toward zero "
                "(1.5 -> 1); the spec does not say how an integer result is rounded and the "
                "reference rounds half to even")
    if all(math.floor(n * s) == n for n, s in zip(x.shape, scales, strict=True)):
        return ("the output shape equals the input shape: onnxruntime returns the input "
                "unchanged whatever the scales (2 x 2 at scales [1.25, 1]); the spec samples at "
                "x = y / 1.25 there")
    return None


_TOL = {DType.float32: Tol(1e-5, 1e-5, "a weighted sum of up to 16 taps per axis pair (more "
                                       "with antialias), weights computed in float32")}

SWEEPS = (
    Sweep("Resize", (10, 11, 13, 18, 19), draw_resize, dtypes=(DType.float32, DType.uint8),
          known=known_resize, tolerance=_TOL),
    Sweep("Upsample", (7, 9), draw_upsample, dtypes=(DType.float32, DType.int8),
          known=known_upsample, tolerance=_TOL),
)
