"""Losses (refmnn/ops/loss.py): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, every
reduction, weights and ignore_index; Dropout in inference (no training_mode)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from refmnn_conformance.case import POSITIVE, OpCase, Sample, SampleContext, Tol
from refmnn_conformance.cases._common import prod


def _labels(ctx: SampleContext, shape, classes: int, ignore: int | None = None) -> np.ndarray:
    labels = ctx.rng.integers(0, classes, shape).astype(np.int64)
    if ignore is not None:
        labels.reshape(-1)[::3] = ignore
    return labels


def loss_samples(op: str):
    def samples(ctx: SampleContext):
        outputs = 2 if op == "SoftmaxCrossEntropyLoss" else 1
        x = ctx.make((4, 5))
        for reduction in ("mean", "sum", "none"):
            yield Sample((x, _labels(ctx, (4,), 5)), {"reduction": reduction}, name=reduction)
        w = ctx.make((5,), POSITIVE)
        yield Sample((x, _labels(ctx, (4,), 5), w), name="weighted_mean")
        yield Sample((x, _labels(ctx, (4,), 5), w), {"reduction": "none"}, name="weighted_none")
        x4 = ctx.make((2, 3, 4, 2))
        yield Sample((x4, _labels(ctx, (2, 4, 2), 3)), name="spatial_dims")
        yield Sample((x4, _labels(ctx, (2, 4, 2), 3, ignore=-1), ctx.make((3,), POSITIVE)),
                     {"ignore_index": -1}, name="ignore_index_weighted")
        yield Sample((x, _labels(ctx, (4,), 5, ignore=2)), {"ignore_index": 2, "reduction": "sum"},
                     name="ignore_index_sum")
        yield Sample((x, _labels(ctx, (4,), 5)), {"reduction": "none"}, outputs=outputs,
                     name="all_outputs")
        yield Sample((ctx.make((8, 1000)), _labels(ctx, (8,), 1000)), name="large_many_classes")

    return samples


def _classes(sample: Sample) -> int:
    x = sample.inputs[0]
    return max(1, x.shape[1] + prod(x.shape) // x.shape[1])


def dropout_samples(ctx: SampleContext):
    x = ctx.make((3, 4))
    yield Sample((x,), name="inference_identity")
    yield Sample((x, ctx.scalar(0.5)), outputs=2, name="ratio_given_mask")
    yield Sample((x, ctx.scalar(0.3), np.array(False)), outputs=2, name="training_mode_false")


_TOL = {DType.float16: Tol(2e-3, 1e-4, "log-softmax and a mean, each in float32"),
        DType.float32: Tol(4e-6, 1e-6, "log-softmax: exp, sum and log round separately")}
CASES = (
    OpCase("NegativeLogLikelihoodLoss", dtypes=(DType.float32, DType.float16, DType.float64),
           samples=loss_samples("NegativeLogLikelihoodLoss"), accumulates=_classes,
           tolerance=_TOL, tags=("loss",)),
    OpCase("SoftmaxCrossEntropyLoss", dtypes=(DType.float32, DType.float16, DType.float64),
           samples=loss_samples("SoftmaxCrossEntropyLoss"), accumulates=_classes,
           tolerance=_TOL, tags=("loss",)),
    OpCase("Dropout", dtypes=(DType.float32, DType.float16, DType.float64), samples=dropout_samples),
)
