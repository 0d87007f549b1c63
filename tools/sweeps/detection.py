"""RoiAlign (10, 16, 22): avg/max x coordinate transformation x sampling_ratio (0: adaptive)
x spatial_scale x output sizes over RoIs inside, across and outside the map, tiny and
inverted; NonMaxSuppression (10, 11): box formats, flipped corners, thresholds given or not,
distinct scores (no order ties)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import Sample, SampleContext, Sweep, Tol


def _roi(rng: np.random.Generator, height: int, width: int, scale: float) -> list[float]:
    """One RoI [x1, y1, x2, y2] in image coordinates (map coordinates / ``scale``): mostly a
    box of 0.25-1.3 times the map reaching up to 2 pixels outside it, at times a tiny box
    (under a pixel) or one with its corners swapped."""
    kind = rng.random()
    corner = rng.uniform([-2, -2], [width + 1, height + 1])
    if kind < 0.15:
        size = rng.uniform(0, 1, 2)
    else:
        size = rng.uniform([0.25 * width, 0.25 * height], [1.3 * width, 1.3 * height])
    box = np.concatenate([corner, corner + size])
    if kind > 0.93:
        box = box[[2, 3, 0, 1]]
    return [float(v) / scale for v in box]


def draw_roi_align(ctx: SampleContext, opset: int) -> Sample:
    """A random RoiAlign: X (1-2, 1-3, 1-8, 1-8), 0-4 RoIs on random images, mode avg/max,
    output sizes 1-4, sampling_ratio 0 (adaptive) or 1-3, spatial_scale 0.25-2, and from 16
    the coordinate_transformation_mode."""
    rng = ctx.rng
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    height, width = (int(d) for d in rng.integers(1, 9, 2))
    scale = float(rng.choice([1.0, 0.5, 0.25, 2.0]))
    count = int(rng.choice([0, 1, 2, 3, 4], p=[0.05, 0.3, 0.25, 0.2, 0.2]))
    rois = ctx.array(np.array([_roi(rng, height, width, scale) for _ in range(count)],
                              dtype=np.float64).reshape(count, 4))
    attrs: dict[str, object] = {
        "mode": str(rng.choice(["avg", "max"])),
        "output_height": int(rng.integers(1, 5)), "output_width": int(rng.integers(1, 5)),
        "sampling_ratio": int(rng.choice([0, 0, 1, 2, 3])), "spatial_scale": scale}
    if opset >= 16:
        attrs["coordinate_transformation_mode"] = str(rng.choice(["half_pixel",
                                                                  "output_half_pixel"]))
    batch = rng.integers(0, n, count).astype(np.int64)
    return Sample((ctx.make((n, c, height, width)), rois, batch), attrs)


def known_roi_align(sample: Sample, opset: int, peer: str) -> str | None:
    """The RoiAlign differences read as the peers'."""
    if peer == "onnx.reference" and opset < 16:
        return ("RoiAlign-10: onnx.reference applies its default half_pixel shift (-0.5) "
                "though version 10 has no coordinate_transformation_mode and no shift (the "
                "later output_half_pixel); onnxruntime does not shift, as the reference")
    return None


def _boxes(rng: np.random.Generator, batches: int, count: int, center: int) -> np.ndarray:
    """Boxes (batches, count, 4): corners [y1, x1, y2, x2] (some listed max corner first) or
    [x_c, y_c, w, h], in a 10 x 10 field, sides 0-5 (some degenerate)."""
    low = rng.uniform(0, 10, (batches, count, 2))
    size = rng.uniform(0, 5, (batches, count, 2)) * (rng.random((batches, count, 1)) > 0.05)
    if center:
        return np.concatenate([low + size / 2, size], axis=-1)[..., [1, 0, 2, 3]]
    boxes = np.concatenate([low, low + size], axis=-1)
    flip = rng.random((batches, count)) < 0.2
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes


def draw_non_max_suppression(ctx: SampleContext, opset: int) -> Sample:
    """A random NonMaxSuppression: 1-2 batches of 0-10 boxes, 1-3 classes with distinct
    scores in each class, center_point_box 0/1; max_output_boxes_per_class absent, 0, 1-5 or
    100; iou_threshold absent or in [0, 1]; score_threshold absent, in [0, 1], or equal to one
    of the scores (the spec keeps a box whose score equals it: only 'less than' is removed)."""
    rng = ctx.rng
    batches, count, classes = int(rng.integers(1, 3)), int(rng.integers(0, 11)), \
        int(rng.integers(1, 4))
    center = int(rng.integers(0, 2))
    boxes = _boxes(rng, batches, count, center).astype(np.float32)
    scores = np.stack([np.stack([rng.permutation(count) + rng.uniform(0.05, 0.95)
                                 for _ in range(classes)]) for _ in range(batches)])
    scores = (scores / max(count, 1)).astype(np.float32)
    inputs: list[np.ndarray | None] = [boxes, scores, None, None, None]
    if rng.random() < 0.85:
        inputs[2] = np.array([int(rng.choice([0, 1, 2, 3, 5, 100]))], np.int64)
    if rng.random() < 0.8:
        inputs[3] = np.array([float(rng.choice([0.0, 0.3, 0.5, 0.7, 1.0,
                                                rng.uniform(0, 1)])), ], np.float32)
    if rng.random() < 0.6:
        pick = rng.random()
        level = float(scores.reshape(-1)[rng.integers(scores.size)]) if pick < 0.4 and \
            scores.size else float(rng.uniform(0, 1))
        inputs[4] = np.array([level], np.float32)
    while inputs and inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), {"center_point_box": center})


def known_non_max_suppression(sample: Sample, opset: int, peer: str) -> str | None:
    """A score equal to score_threshold: the spec removes only scores "less than" it, so the
    box stays; onnxruntime and onnx.reference remove it too (tests/test_reference_oracles.py,
    test_non_max_suppression_keeps_a_score_equal_to_the_threshold)."""
    if len(sample.inputs) < 5 or sample.inputs[4] is None:
        return None
    if np.any(sample.inputs[1] == sample.inputs[4].reshape(-1)[0]):
        return f"{peer} removes a score equal to score_threshold; the spec keeps it"
    return None


_ROI_TOL = {DType.float32: Tol(1e-5, 1e-5, "bilinear samples averaged over up to 64 points a "
                                           "bin, a few ulp each")}

SWEEPS = (
    Sweep("RoiAlign", (10, 16, 22), draw_roi_align, dtypes=(DType.float32, DType.float64),
          known=known_roi_align, tolerance=_ROI_TOL),
    Sweep("NonMaxSuppression", (10, 11), draw_non_max_suppression,
          known=known_non_max_suppression),
)
