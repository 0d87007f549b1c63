"""Detection (refmnn/ops/detection.py): RoiAlign and NonMaxSuppression."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from refmnn_conformance.case import OpCase, Sample, SampleContext, Tol


def roi_align_samples(ctx: SampleContext):
    x = ctx.make((2, 3, 8, 9))
    rois = ctx.array([[0.5, 1.0, 6.0, 7.0], [2.0, 0.0, 8.0, 4.5], [0.0, 0.0, 1.0, 1.0]])
    batch = np.array([0, 1, 1], dtype=np.int64)
    yield Sample((x, rois, batch), name="default")
    for mode in ("avg", "max"):
        for coord in ("half_pixel", "output_half_pixel"):
            yield Sample((x, rois, batch), {"mode": mode, "coordinate_transformation_mode": coord,
                                            "output_height": 3, "output_width": 2,
                                            "sampling_ratio": 2, "spatial_scale": 0.5},
                         name=f"{mode}_{coord}")
    yield Sample((x, rois, batch), {"sampling_ratio": 0}, name="adaptive_sampling")
    yield Sample((x, ctx.array(np.zeros((0, 4))), np.zeros((0,), dtype=np.int64)), name="no_rois")


def _boxes(ctx: SampleContext, batches: int, n: int) -> np.ndarray:
    corner = ctx.rng.uniform(0, 10, (batches, n, 2))
    size = ctx.rng.uniform(1, 5, (batches, n, 2))
    return np.concatenate([corner, corner + size], axis=-1).astype(np.float32)


def nms_samples(ctx: SampleContext):
    boxes = _boxes(ctx, 2, 12)
    scores = ctx.rng.uniform(0, 1, (2, 3, 12)).astype(np.float32)
    i64, f32 = (lambda v: np.array(v, dtype=np.int64)), (lambda v: np.array(v, dtype=np.float32))
    yield Sample((boxes, scores), name="no_limit_given")
    yield Sample((boxes, scores, i64([3])), name="max_output")
    yield Sample((boxes, scores, i64([5]), f32([0.3])), name="iou_threshold")
    yield Sample((boxes, scores, i64([5]), f32([0.5]), f32([0.4])), name="score_threshold")
    centre = np.concatenate([boxes[..., :2] + 1, np.full(boxes.shape[:-1] + (2,), 3.0)], axis=-1)
    yield Sample((centre.astype(np.float32), scores, i64([4]), f32([0.2])),
                 {"center_point_box": 1}, name="center_point_box")
    flipped = boxes[..., [2, 3, 0, 1]].copy()
    yield Sample((flipped, scores, i64([4]), f32([0.3])), name="flipped_corners")
    tie = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [5, 5, 6, 6]]], dtype=np.float32)
    yield Sample((tie, f32([[[0.9, 0.9, 0.8]]]), i64([3]), f32([0.5])), name="equal_scores")
    yield Sample((np.zeros((1, 0, 4), np.float32), np.zeros((1, 1, 0), np.float32), i64([3])),
                 name="no_boxes")


CASES = (
    OpCase("RoiAlign", dtypes=(DType.float32, DType.float16, DType.float64),
           samples=roi_align_samples,
           tolerance={DType.float16: Tol(3e-3, 2e-3, "bilinear samples averaged in float32"),
                      DType.float32: Tol(1e-5, 1e-6, "bilinear samples averaged: a few ulp")}),
    OpCase("NonMaxSuppression", dtypes=(DType.float32,), samples=nms_samples),
)
