"""Losses: SoftmaxCrossEntropyLoss (12, 13) and NegativeLogLikelihoodLoss (12, 13, 22) over
ranks 2-4, every reduction, optional weights, ignore_index (negative, a class, out of range;
some targets or all of them ignored), int32/int64 targets and SoftmaxCrossEntropyLoss's
log_prob output; Dropout (12, 13, 22) in inference only (training_mode absent or false: the
output is the input and the mask all true; a random training mask cannot be compared)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import EXTREMAL, POSITIVE, Sample, SampleContext, Sweep, Tol, float16_in_float16

_FLOATS = (DType.float32, DType.float64, DType.float16)


def _loss_sample(ctx: SampleContext, outputs: int) -> Sample:
    """A random loss sample: input [N, C, d...] of rank 2-4 (N 1-4, C 1-6, d 1-4), targets
    in [0, C) of int32 or int64; half the time an ignore_index (-1, -100, a class or C + 2)
    that a quarter of the targets take (now and then all of them); weights [C] (positive,
    a zero now and then) 60% of the time; reduction none, sum, mean or left to its default."""
    rng = ctx.rng
    rank = int(rng.integers(2, 5))
    classes = int(rng.integers(1, 7))
    shape = [int(rng.integers(1, 5)), classes] + [int(d) for d in rng.integers(1, 5, rank - 2)]
    target_shape = [shape[0]] + shape[2:]
    target = rng.integers(0, classes, target_shape).astype(rng.choice([np.int32, np.int64]))
    attrs: dict[str, object] = {}
    if rng.random() < 0.5:
        ignore = int(rng.choice([-1, -100, int(rng.integers(classes)), classes + 2]))
        attrs["ignore_index"] = ignore
        hit = rng.random(target_shape) < (1.0 if rng.random() < 0.15 else 0.25)
        target[hit] = ignore
    if rng.random() < 0.8:
        attrs["reduction"] = str(rng.choice(["none", "sum", "mean"]))
    inputs: list[np.ndarray] = [ctx.make(shape), target]
    if rng.random() < 0.6:
        weight = ctx.make((classes,), POSITIVE)
        if rng.random() < 0.2:
            weight[int(rng.integers(classes))] = 0
        inputs.append(weight)
    return Sample(tuple(inputs), attrs, outputs=outputs)


def draw_softmax_cross_entropy(ctx: SampleContext, opset: int) -> Sample:
    """A random SoftmaxCrossEntropyLoss (see :func:`_loss_sample`), with the log_prob output
    half the time."""
    return _loss_sample(ctx, int(ctx.rng.integers(1, 3)))


def draw_nll(ctx: SampleContext, opset: int) -> Sample:
    """A random NegativeLogLikelihoodLoss (see :func:`_loss_sample`); the input stands for
    log-probabilities but any value is valid."""
    return _loss_sample(ctx, 1)


def draw_dropout(ctx: SampleContext, opset: int) -> Sample:
    """A random inference Dropout: data of rank 0-4 (dims 0-4, special values now and then),
    a ratio in [0, 1) (its own float type from opset 12's T1) or none, training_mode false or
    none, a seed now and then; the mask output half the time."""
    rng = ctx.rng
    shape = tuple(int(d) for d in rng.integers(0 if rng.random() < 0.1 else 1, 5,
                                               int(rng.integers(0, 5))))
    data = ctx.make(shape, EXTREMAL if rng.random() < 0.2 else POSITIVE)
    ratio_type = (ctx.dtype, np.float32, np.float64, np.float16)[int(rng.integers(4))]
    ratio = ctx.scalar(float(rng.choice([0.0, 0.1, 0.5, 0.9])), ratio_type) \
        if rng.random() < 0.6 else None
    inputs: list[np.ndarray | None] = [data, ratio]
    if rng.random() < 0.5:
        inputs.append(np.array(False))
    while inputs[-1] is None:
        inputs.pop()
    attrs = {"seed": int(rng.integers(0, 1000))} if rng.random() < 0.3 else {}
    return Sample(tuple(inputs), attrs, outputs=int(rng.integers(1, 3)))


def known_nll(sample: Sample, opset: int, peer: str) -> str | None:
    """NegativeLogLikelihoodLoss: onnx.reference's mean with ignore_index -1 and no weight."""
    target = sample.inputs[1]
    if peer == "onnx.reference" and len(sample.inputs) == 2 \
            and sample.attrs.get("ignore_index") == -1 \
            and sample.attrs.get("reduction", "mean") == "mean" and np.any(target == -1):
        return ("onnx.reference 1.23.2 builds the 0/1 weights of the ignored targets only when "
                "ignore_index != -1 (`elif ignore_index != -1`), so with -1 and no weight input "
                "its 'mean' divides by every target, ignored ones too (0 instead of NaN when all "
                "are); the attribute says 'the sum of the output will be divided by the sum of "
                "applied weights' and the function body divides by the count of non-ignored "
                "targets (0 / 0 = NaN when there is none), as onnxruntime 1.32 does")
    return None


known_softmax_cross_entropy = float16_in_float16(
    "onnx.reference 1.23.2 computes float16 SoftmaxCrossEntropyLoss in float16 (the "
    "log-softmax's exp, sum and log, the weight's product, each rounded): 13 ulp off at seed "
    "21 (0.3469 where float64 gives 0.35018, which rounds to 0.35); the reference computes in "
    "float32 and rounds once")
"""SoftmaxCrossEntropyLoss: onnx.reference's float16 arithmetic."""


_LOSS_TOL = {
    DType.float16: Tol(4e-3, 1e-3, "log-softmax in float32 and a sum of up to 256 losses, "
                                   "rounded once (the conformance case's, widened for the sum)"),
    DType.float32: Tol(2e-5, 1e-5, "log-softmax (exp, sum and log round separately) and a sum "
                                   "of up to 256 losses in any order: the conformance case's "
                                   "4e-6 widened by ~sqrt(K)"),
}

SWEEPS = (
    Sweep("SoftmaxCrossEntropyLoss", (12, 13), draw_softmax_cross_entropy, dtypes=_FLOATS,
          known=known_softmax_cross_entropy, tolerance=_LOSS_TOL),
    Sweep("NegativeLogLikelihoodLoss", (12, 13, 22), draw_nll, dtypes=_FLOATS,
          known=known_nll, tolerance=_LOSS_TOL),
    Sweep("Dropout", (12, 13, 22), draw_dropout, dtypes=_FLOATS),
)
