"""Object-detection ops: RoiAlign (bilinear pooling of regions of interest) and
NonMaxSuppression (greedy per-class box selection by IoU).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType
from refmnn.ops._image_util import float_compute_dtype
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, flag, op

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
    work = float_compute_dtype(X.dtype)
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
    attrs=(flag("center_point_box", 0,
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
    Per class: keep boxes with score >= score_threshold (the spec: "boxes with score less than
    score_threshold are removed"; onnxruntime and onnx.reference drop an equal score too),
    visit them by descending score (ties: lower box index first), select a box unless its IoU
    with an already selected box of that class is > iou_threshold (equal is kept), stop after
    max_output_boxes_per_class. Boxes may list their corners in any order;
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
            order = order[class_scores[order] >= floor]
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


OPS = (
    roi_align_10, roi_align_16,
    non_max_suppression,
)
