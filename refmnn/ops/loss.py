"""Losses and Dropout: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, Dropout."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of, same_as, shape_of
from refmnn.ops._reduction_util import to_work
from refmnn.ops._schema import Attr, InferContext, OpContext, op

# --- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ------------------------------------

_LOSS_ATTRS = (
    Attr("ignore_index", "int", None, "target value whose samples contribute nothing"),
    Attr("reduction", "string", "mean", "none, sum or mean"),
)


def _nll(log_prob: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
         ignore_index: int | None, reduction: str) -> np.ndarray:
    """log_prob: [N, C, d1, ...] (working dtype); target: [N, d1, ...] int; weight: [C]."""
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"unknown reduction {reduction!r}")
    t = target.astype(np.int64)
    ignored = t == ignore_index if ignore_index is not None else np.zeros(t.shape, bool)
    safe = np.where(ignored, 0, t)
    classes = log_prob.shape[1]
    if safe.size and (safe.min() < 0 or safe.max() >= classes):
        raise ValueError(f"target values must lie in [0, {classes}) or equal ignore_index")
    picked = np.take_along_axis(log_prob, safe[:, None], axis=1)[:, 0]
    w = weight.astype(log_prob.dtype)[safe] if weight is not None else np.ones_like(picked)
    zero = log_prob.dtype.type(0)
    w = np.where(ignored, zero, w)
    with np.errstate(invalid="ignore"):  # inf * 0 at ignored samples, replaced by 0
        loss = np.where(ignored, zero, -picked * w)  # not -picked * 0: NaN for NaN or inf
    if reduction == "none":
        return loss
    total = np.sum(loss, dtype=loss.dtype)
    if reduction == "sum":
        return total
    with np.errstate(divide="ignore", invalid="ignore"):
        return total / np.sum(w, dtype=w.dtype)


def _loss_rule(ctx: InferContext, x: TensorType | None, target: TensorType | None,
               weight: TensorType | None = None, *, ignore_index: int | None,
               reduction: str) -> tuple[TensorType, TensorType]:
    shape = shape_of(target) if reduction == "none" else ()
    return TensorType(dtype_of(x), shape), same_as(0)(ctx, x)


@op("NegativeLogLikelihoodLoss", since=12, inputs=("input", "target", "weight?"),
    outputs=("loss",), infer=_loss_rule, attrs=_LOSS_ATTRS)
def negative_log_likelihood_loss(input: np.ndarray, target: np.ndarray,
                                 weight: np.ndarray | None = None, *, ignore_index: int | None,
                                 reduction: str) -> np.ndarray:
    """loss[n, d...] = -input[n, target[n, d...], d...] * weight[target[n, d...]]
    (opset 12, 13, 22 differ only in dtypes).

    input: [N, C] or [N, C, d1, ..., dk] log-probabilities; target: [N] or [N, d1, ..., dk]
    int32/int64 in [0, C) or equal to ignore_index (those samples give exactly 0, whatever
    their input -- NaN and infinities included -- and weigh 0);
    weight: optional [C], default all ones. reduction: 'none' -> [N, d1, ...];
    'sum' -> scalar sum; 'mean' (default) -> sum(loss) / sum(applied weights), NaN when every
    sample is ignored. Output dtype = input's; float16/bfloat16 compute in float32.
    """
    x = to_work(input)
    result = _nll(x, target, weight, ignore_index, reduction)
    return np.asarray(result).astype(input.dtype, copy=False)


def _log_softmax_axis1(x: np.ndarray) -> np.ndarray:
    shifted = x - np.max(x, axis=1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))


@op("SoftmaxCrossEntropyLoss", since=12, inputs=("scores", "labels", "weights?"),
    outputs=("output", "log_prob?"), infer=_loss_rule, attrs=_LOSS_ATTRS)
def softmax_cross_entropy_loss(scores: np.ndarray, labels: np.ndarray,
                               weights: np.ndarray | None = None, *, ignore_index: int | None,
                               reduction: str) -> tuple[np.ndarray, np.ndarray]:
    """output = NegativeLogLikelihoodLoss(log_prob, labels, weights), log_prob =
    log(softmax(scores, axis=1)) computed stably (x - max - log(sum(exp(x - max))))
    (opset 12 and 13 differ only in dtypes).

    scores: [N, C] or [N, C, d1, ...]; labels: [N] or [N, d1, ...] int32/int64 in [0, C) or
    ignore_index; weights: optional [C]. reduction none/sum/mean as in
    NegativeLogLikelihoodLoss ('mean' divides by the sum of applied weights, i.e. the count
    of non-ignored samples without weights). log_prob (optional output): scores' shape.
    Both outputs have scores' dtype; float16/bfloat16 compute in float32.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        log_prob = _log_softmax_axis1(to_work(scores))
    loss = _nll(log_prob, labels, weights, ignore_index, reduction)
    return (np.asarray(loss).astype(scores.dtype, copy=False),
            log_prob.astype(scores.dtype, copy=False))


# --- Dropout --------------------------------------------------------------------------------


def _drop(data: np.ndarray, ratio: float, keep: np.ndarray) -> np.ndarray:
    """output = scale * data * mask with scale = 1 / (1 - ratio), the spec's formula as
    written: a dropped element is +-0 times the scaled value, so NaN and infinities stay NaN
    (as in PyTorch and onnxruntime). In data's dtype (float16 computes in float32)."""
    x = to_work(data)
    scaled = x.dtype.type(1.0 / (1.0 - ratio)) * x
    with np.errstate(invalid="ignore"):  # inf * 0 = NaN is the formula's answer
        return (scaled * keep.astype(x.dtype)).astype(data.dtype, copy=False)


def _dropout(data: np.ndarray, ratio: float, training: bool, mask_dtype: np.dtype,
             rng: np.random.Generator | np.random.RandomState | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    if not training or ratio == 0 or rng is None:
        return data, np.ones(data.shape, dtype=mask_dtype)
    if not 0 <= ratio < 1:  # NaN too; the ratio only matters in training
        raise ValueError(f"Dropout's ratio must lie in [0, 1) in training, got {ratio}")
    uniform = (rng.uniform(0.0, 1.0, data.shape) if isinstance(rng, np.random.RandomState)
               else rng.random(data.shape))
    keep = uniform >= ratio
    return _drop(data, ratio, keep), keep.astype(mask_dtype)


def _dropout_rule(mask: DType | None):
    def rule(ctx: InferContext, data: TensorType | None, *rest: TensorType | None,
             **attrs: object) -> tuple[TensorType, TensorType]:
        return same_as(0)(ctx, data), TensorType(mask or dtype_of(data), shape_of(data))
    return rule


_RATIO = Attr("ratio", "float", 0.5, "probability of dropping an element")
_IS_TEST = Attr("is_test", "int", 0, "nonzero: test mode, output = data")


@op("Dropout", since=1, inputs=("data",), outputs=("output", "mask?"), infer=_dropout_rule(None),
    attrs=(Attr("consumed_inputs", "ints", None, "legacy, ignored"), _IS_TEST, _RATIO))
def dropout_1(data: np.ndarray, *, consumed_inputs: tuple[int, ...] | None, is_test: int,
              ratio: float, ctx: OpContext) -> tuple[np.ndarray, np.ndarray]:
    """Dropout-1 (``consumed_inputs`` ignored); otherwise as Dropout-6."""
    return _dropout(data, ratio, not is_test, data.dtype, ctx.rng)


@op("Dropout", since=6, inputs=("data",), outputs=("output", "mask?"), infer=_dropout_rule(None),
    attrs=(_IS_TEST, _RATIO))
def dropout_6(data: np.ndarray, *, is_test: int, ratio: float,
              ctx: OpContext) -> tuple[np.ndarray, np.ndarray]:
    """Dropout-6. is_test != 0: output = data (mask all ones). is_test == 0 (the default, per
    the spec: training): each element is kept with probability 1 - ratio (session random
    generator) and output = data * mask / (1 - ratio). mask has data's float dtype (1.0 kept,
    0.0 dropped), not bool.
    """
    return _dropout(data, ratio, not is_test, data.dtype, ctx.rng)


@op("Dropout", since=7, inputs=("data",), outputs=("output", "mask?"), infer=_dropout_rule(None),
    attrs=(_RATIO,))
def dropout_7(data: np.ndarray, *, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """Dropout-7: no is_test any more; an inference engine runs it in test mode:
    output = data, mask = all ones in data's float dtype (the mask becomes bool at opset 10).
    ``ratio`` only matters in training."""
    return _dropout(data, ratio, False, data.dtype)


@op("Dropout", since=10, inputs=("data",), outputs=("output", "mask?"),
    infer=_dropout_rule(DType.bool), attrs=(_RATIO,))
def dropout_10(data: np.ndarray, *, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """Dropout-10: as Dropout-7 (output = data in inference) but the mask is bool (all True)."""
    return _dropout(data, ratio, False, np.dtype(np.bool_))


@op("Dropout", since=12, inputs=("data", "ratio?", "training_mode?"), outputs=("output", "mask?"),
    infer=_dropout_rule(DType.bool),
    attrs=(Attr("seed", "int", None, "seed of the generator; session generator when absent"),))
def dropout_12(data: np.ndarray, ratio: np.ndarray | None = None,
               training_mode: np.ndarray | None = None, *, seed: int | None,
               ctx: OpContext) -> tuple[np.ndarray, np.ndarray]:
    """Dropout-12/13/22: output = data * mask / (1 - ratio) in training, data otherwise.

    ratio: optional float scalar in [0, 1), default 0.5 (another value -- 1, negative, NaN --
    is an error in training); training_mode: optional bool scalar, default False. When not
    training, or ratio == 0, output = data and mask is all True.
    Training draws u ~ U[0, 1) per element (numpy RandomState(seed).uniform when ``seed`` is
    set, so runs are reproducible; else the session generator) and keeps u >= ratio.
    mask: bool, data's shape.
    """
    rate = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(-1)[0])
    rng = np.random.RandomState(seed % 2**32) if seed is not None else ctx.rng
    return _dropout(data, rate, training, np.dtype(np.bool_), rng)


OPS = (negative_log_likelihood_loss, softmax_cross_entropy_loss, dropout_1, dropout_6,
       dropout_7, dropout_10, dropout_12)
