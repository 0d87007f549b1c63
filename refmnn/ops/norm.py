"""Normalisation: BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, LRN, MeanVarianceNormalization, RMSNormalization, LpNormalization.

Statistics are population statistics (divide by the count, not count - 1) computed in two
passes (mean, then mean of squared deviations) so they do not cancel catastrophically.
float16/bfloat16 inputs compute in float32 (or the ``stash_type`` precision where the op has
one) and round once.
"""

from __future__ import annotations

import math

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType
from refmnn.ops._infer import dtype_of, normalize_axis, same_as, shape_of
from refmnn.ops._reduction_util import (check_axes, mean_along, stash_dtype, sum_along, to_work,
                                        work_dtype)
from refmnn.ops._schema import Attr, InferContext, OpContext, flag, into, op

_EPS = Attr("epsilon", "float", 1e-5, "added to the variance before the square root")
_MOMENTUM = Attr("momentum", "float", 0.9,
                 "running = running * momentum + batch * (1 - momentum)")


def _rows(x: np.ndarray, first_axis: int) -> np.ndarray:
    """View ``x`` as [prod(shape[:axis]), prod(shape[axis:])] (a copy only if not contiguous)."""
    lead = math.prod(x.shape[:first_axis])
    trail = math.prod(x.shape[first_axis:])  # explicit: -1 fails when lead is 0
    return x.reshape(lead, trail)


def _standardize_rows(x: np.ndarray, epsilon: float, out: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x: [R, K] -> ((x - mean) * inv_std, mean [R, 1], inv_std [R, 1]), by the corrected
    two-pass algorithm (Chan, Golub and LeVeque 1983); the deviations go into ``out`` (an
    [R, K] array of x's dtype) when it is given.

    The mean, summed and rounded in x's dtype, is off by up to half an ulp; every deviation
    x - mean would carry that error, which is all of it where the spread is small against the
    mean (float32: 1.7e-5 of the result for a spread 350x below the mean, 3.5e-2 at 10^7x).
    So the deviations' own mean -- that rounding error, recovered from them in a second sum --
    is taken off them (and added to the mean): where x lies near the mean, x - mean is exact
    and the correction rounds once. Measured against float64 at spreads 1-10^7x below the
    mean: within 1.4e-7 of the largest result; onnxruntime sums in double and agrees.
    """
    count = x.dtype.type(x.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = sum_along(x) / count
        dev = np.subtract(x, mean, out=out)
        shift = _finite_or_zero(sum_along(dev) / count)  # the mean's rounding error
        dev -= shift
        mean += shift
        var = sum_along(dev, dev) / count
        inv_std = 1 / np.sqrt(var + x.dtype.type(epsilon))
        dev *= inv_std
    return dev, mean, inv_std


def _finite_or_zero(shift: np.ndarray) -> np.ndarray:
    """The correction where it is finite, else 0: a row holding an infinity or NaN keeps its
    plain mean (the spec's Mean output there is +-inf or NaN, and its deviations are NaN
    either way)."""
    return np.where(np.isfinite(shift), shift, shift.dtype.type(0))


def _centered(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(x - mean, mean) over ``axes`` (kept as length-1 axes), the deviations corrected by their
    own mean as in :func:`_standardize_rows` (the mean's rounding error taken off them)."""
    mean = mean_along(x, axes)
    dev = x - mean
    with np.errstate(invalid="ignore"):
        shift = _finite_or_zero(mean_along(dev, axes))
    dev -= shift
    return dev, mean + shift


# --- BatchNormalization ---------------------------------------------------------------------


def _per_channel(param: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A [C] parameter shaped to broadcast against X [N, C, D1, ...]; a parameter that already
    has X's trailing shape (the non-spatial [C, D1, ...] layout of opset 1-8) is kept."""
    if x.ndim >= 2 and param.ndim == x.ndim - 1 and param.ndim > 1:
        return param
    return param.reshape((-1,) + (1,) * max(x.ndim - 2, 0))


def _bn_inference(X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                  var: np.ndarray, epsilon: float) -> np.ndarray:
    """Y = (X - mean) / sqrt(var + epsilon) * scale + B, folded into Y = X * a + b."""
    w = work_dtype(X.dtype)
    a = scale.astype(w) / np.sqrt(var.astype(w) + w.type(epsilon))
    b = B.astype(w) - mean.astype(w) * a
    y = to_work(X) * _per_channel(a, X)
    y += _per_channel(b, X)
    return y.astype(X.dtype, copy=False)


def _bn_training(X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                 var: np.ndarray, epsilon: float, momentum: float, spatial: int = 1
                 ) -> tuple[np.ndarray, ...]:
    """Normalise with the batch statistics; returns (Y, running_mean, running_var,
    batch_mean, batch_var) with the running ones updated by ``momentum``."""
    w = work_dtype(X.dtype)
    x = to_work(X)
    axes = tuple(i for i in range(x.ndim) if i != 1) if spatial and x.ndim > 1 else (0,)
    dev, batch_mean = _centered(x, axes)
    batch_var = mean_along(dev * dev, axes)
    y = dev / np.sqrt(batch_var + w.type(epsilon))
    y = y * _per_channel(scale.astype(w), X) + _per_channel(B.astype(w), X)
    batch_mean = batch_mean.reshape(mean.shape)
    batch_var = batch_var.reshape(var.shape)
    m = w.type(momentum)
    running_mean = mean.astype(w) * m + batch_mean * (1 - m)
    running_var = var.astype(w) * m + batch_var * (1 - m)
    stat = mean.dtype
    return (y.astype(X.dtype, copy=False), running_mean.astype(stat), running_var.astype(stat),
            batch_mean.astype(stat), batch_var.astype(stat))


def _bn_rule(ctx: InferContext, x: TensorType | None, scale: TensorType | None,
             b: TensorType | None, mean: TensorType | None, var: TensorType | None,
             **_: object) -> tuple[TensorType | None, ...]:
    stat = TensorType(dtype_of(mean), shape_of(mean))
    return (same_as(0)(ctx, x), stat, stat, stat, stat)[:max(ctx.num_outputs, 1)]


_BN_IN = ("X", "scale", "B", "mean", "var")
_BN_OUT = ("Y", "mean?", "var?", "saved_mean?", "saved_var?")
_IS_TEST = Attr("is_test", "int", 0, "nonzero: inference with the given mean/var")
_SPATIAL = flag("spatial", 1, "1: statistics per channel; 0: per activation")


def _bn_legacy(X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
               var: np.ndarray, epsilon: float, momentum: float, spatial: int,
               training: bool) -> np.ndarray | tuple[np.ndarray, ...]:
    if not training:
        return _bn_inference(X, scale, B, mean, var, epsilon)
    return _bn_training(X, scale, B, mean, var, epsilon, momentum, spatial)


@op("BatchNormalization", since=1, inputs=_BN_IN, outputs=_BN_OUT, infer=_bn_rule,
    attrs=(Attr("consumed_inputs", "ints", doc="legacy, required by the schema, ignored"), _EPS,
           _IS_TEST, _MOMENTUM, _SPATIAL))
def batch_normalization_1(X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                          var: np.ndarray, *, consumed_inputs: tuple[int, ...],
                          epsilon: float, is_test: int, momentum: float, spatial: int,
                          ctx: OpContext) -> np.ndarray | tuple[np.ndarray, ...]:
    """BatchNormalization-1 (``consumed_inputs`` ignored); otherwise as BatchNormalization-6."""
    training = not is_test and ctx.num_outputs > 1
    return _bn_legacy(X, scale, B, mean, var, epsilon, momentum, spatial, training)


@op("BatchNormalization", since=6, inputs=_BN_IN, outputs=_BN_OUT, infer=_bn_rule,
    attrs=(_EPS, _IS_TEST, _MOMENTUM, _SPATIAL))
def batch_normalization_6(X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                          var: np.ndarray, *, epsilon: float, is_test: int, momentum: float,
                          spatial: int, ctx: OpContext) -> np.ndarray | tuple[np.ndarray, ...]:
    """BatchNormalization-6. X: [N, C, D1, ...]; scale, B, mean, var: [C].

    Inference (is_test != 0, or the node lists only Y — the spec's "test mode" output case):
        Y = (X - mean) / sqrt(var + epsilon) * scale + B.
    Training (is_test == 0 and the node lists the extra outputs): Y uses the batch mean and
    population variance over every axis but 1 (over axis 0 only when spatial == 0, with
    parameters of shape [C, D1, ...]); outputs mean/var are the running statistics updated as
    running * momentum + batch * (1 - momentum); saved_mean/saved_var are the batch mean and
    variance. All outputs have X's dtype.
    """
    training = not is_test and ctx.num_outputs > 1
    return _bn_legacy(X, scale, B, mean, var, epsilon, momentum, spatial, training)


@op("BatchNormalization", since=7, inputs=_BN_IN, outputs=_BN_OUT, infer=_bn_rule,
    attrs=(_EPS, _MOMENTUM, _SPATIAL))
def batch_normalization_7(X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                          var: np.ndarray, *, epsilon: float, momentum: float, spatial: int,
                          ctx: OpContext) -> np.ndarray | tuple[np.ndarray, ...]:
    """BatchNormalization-7: as -6 without ``is_test``: the node is in training mode exactly
    when it lists the outputs beyond Y; otherwise Y = (X - mean) / sqrt(var + eps) * scale + B
    with the given (estimated) mean and variance. spatial == 0 takes [C, D1, ...] parameters.
    """
    return _bn_legacy(X, scale, B, mean, var, epsilon, momentum, spatial, ctx.num_outputs > 1)


@op("BatchNormalization", since=9, inputs=_BN_IN, outputs=_BN_OUT, infer=_bn_rule,
    attrs=(_EPS, _MOMENTUM))
def batch_normalization_9(X: np.ndarray, scale: np.ndarray, B: np.ndarray, mean: np.ndarray,
                          var: np.ndarray, *, epsilon: float, momentum: float,
                          ctx: OpContext) -> np.ndarray | tuple[np.ndarray, ...]:
    """BatchNormalization-9: as -7 without ``spatial`` (always per channel); X may also be 1-D
    [N] (C = 1). Inference mode unless the node lists the training outputs (note: onnx's own
    reference takes the training branch here whenever momentum is set; that is wrong)."""
    return _bn_legacy(X, scale, B, mean, var, epsilon, momentum, 1, ctx.num_outputs > 1)


@op("BatchNormalization", since=14, inputs=("X", "scale", "B", "input_mean", "input_var"),
    outputs=("Y", "running_mean?", "running_var?"), infer=_bn_rule,
    attrs=(_EPS, _MOMENTUM, flag("training_mode", 0, "1: use and update batch stats")))
def batch_normalization_14(X: np.ndarray, scale: np.ndarray, B: np.ndarray,
                           input_mean: np.ndarray, input_var: np.ndarray, *, epsilon: float,
                           momentum: float, training_mode: int, ctx: OpContext
                           ) -> np.ndarray | tuple[np.ndarray, ...]:
    """BatchNormalization-14/15. X: [N, C, D1, ...] (or [N]); the others: [C].

    training_mode = 0: Y = (X - input_mean) / sqrt(input_var + epsilon) * scale + B; the node
    must not list running_mean/running_var.
    training_mode = 1: Y uses the batch mean and population variance over all axes but 1;
    running_mean = input_mean * momentum + batch_mean * (1 - momentum), likewise running_var.
    Y has X's dtype, the running statistics input_mean's (opset 15 lets scale/B and mean/var
    have their own float types).
    """
    if not training_mode:
        if ctx.num_outputs > 1:
            raise ValueError("running_mean/running_var are only produced with training_mode=1")
        return _bn_inference(X, scale, B, input_mean, input_var, epsilon)
    return _bn_training(X, scale, B, input_mean, input_var, epsilon, momentum)[:3]


# --- InstanceNormalization ------------------------------------------------------------------


def _instance_norm(X: np.ndarray, scale: np.ndarray, B: np.ndarray, epsilon: float) -> np.ndarray:
    if X.ndim < 2:
        raise ValueError(f"InstanceNormalization needs X of rank >= 2, got {X.shape}")
    x = to_work(X)
    normalized, _, _ = _standardize_rows(_rows(x, 2), epsilon)
    y = normalized.reshape(X.shape) * _per_channel(to_work(scale), X)
    y += _per_channel(to_work(B), X)
    return y.astype(X.dtype, copy=False)


@op("InstanceNormalization", since=1, inputs=("input", "scale", "B"), outputs=("output",),
    infer=same_as(0), attrs=(_EPS, Attr("consumed_inputs", "ints", None, "legacy, ignored")))
def instance_normalization_1(input: np.ndarray, scale: np.ndarray, B: np.ndarray, *,
                             epsilon: float, consumed_inputs: tuple[int, ...] | None
                             ) -> np.ndarray:
    """InstanceNormalization-1 (``consumed_inputs`` ignored); as InstanceNormalization-6."""
    return _instance_norm(input, scale, B, epsilon)


@op("InstanceNormalization", since=6, inputs=("input", "scale", "B"), outputs=("output",),
    infer=same_as(0), attrs=(_EPS,))
def instance_normalization_6(input: np.ndarray, scale: np.ndarray, B: np.ndarray, *,
                             epsilon: float) -> np.ndarray:
    """output = scale * (input - mean) / sqrt(var + epsilon) + B (opset 6 and 22).

    input: [N, C, D1, ...]; mean and population variance per (n, c) over D1, ...;
    scale, B: [C]. Output: input's shape and dtype (float16/bfloat16 compute in float32).
    """
    return _instance_norm(input, scale, B, epsilon)


# --- LayerNormalization ---------------------------------------------------------------------


def _stat_shape(shape: tuple, axis: int) -> tuple:
    return (*shape[:axis], *(1,) * (len(shape) - axis))


def _layer_norm_rule(ctx: InferContext, x: TensorType | None, scale: TensorType | None,
                     b: TensorType | None = None, *, axis: int, epsilon: float,
                     stash_type: int) -> tuple[TensorType, ...]:
    shape = shape_of(x)
    stat_dtype = DType.from_onnx(stash_type)
    if shape is None:
        return (same_as(0)(ctx, x), TensorType(stat_dtype, None), TensorType(stat_dtype, None))
    first = normalize_axis(ctx, axis, len(shape))
    stat = TensorType(stat_dtype, _stat_shape(shape, first))
    return (same_as(0)(ctx, x), stat, stat)


@op("LayerNormalization", since=17, inputs=("X", "Scale", "B?"),
    outputs=("Y", "Mean?", "InvStdDev?"), infer=_layer_norm_rule,
    attrs=(Attr("axis", "int", -1, "first normalised axis; the rest follow"), _EPS,
           Attr("stash_type", "int", 1, "precision of stage one and dtype of Mean/InvStdDev")),
    in_place=(0,))
def layer_normalization(X: np.ndarray, Scale: np.ndarray, B: np.ndarray | None = None, *,
                        axis: int, epsilon: float, stash_type: int,
                        out: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Y = (X - Mean) * InvStdDev * Scale + B over the axes [axis, ..., rank-1].

    Mean = mean(X), InvStdDev = 1 / sqrt(mean((X - Mean)^2) + epsilon), both computed in the
    ``stash_type`` precision (1 = float32; bfloat16 stashes compute in float32 and round) and
    returned in that dtype with shape [d0, ..., d(axis-1), 1, ..., 1]. X: any rank >= 1,
    float; Scale and B (optional) broadcast unidirectionally to X. Y has X's dtype; stage two
    (scale and shift) computes in X's precision (float32 for float16/bfloat16), into ``out``
    (the planned Y) when it fits.
    """
    first = check_axes([axis], X.ndim)[0]
    stash = stash_dtype(stash_type)
    x = _rows(np.asarray(X, dtype=work_dtype(stash)), first)
    w = work_dtype(X.dtype)
    # Y in the planned buffer from the first pass on when stages one and two share X's dtype
    target = into(out, X.shape, X.dtype) if w == X.dtype == x.dtype else None
    normalized, mean, inv_std = _standardize_rows(
        x, epsilon, None if target is None else target.reshape(x.shape))
    y = normalized.reshape(X.shape).astype(w, copy=False) if target is None else target
    y *= to_work(Scale)
    if B is not None:
        y += to_work(B)
    stat_shape = _stat_shape(X.shape, first)
    return (y.astype(X.dtype, copy=False), mean.reshape(stat_shape).astype(stash),
            inv_std.reshape(stat_shape).astype(stash))


# --- GroupNormalization ---------------------------------------------------------------------


def _group_norm(X: np.ndarray, scale: np.ndarray, bias: np.ndarray, num_groups: int,
                epsilon: float, stage_one: np.dtype, per_group: bool) -> np.ndarray:
    if X.ndim < 2:
        raise ValueError(f"GroupNormalization needs X of rank >= 2, got {X.shape}")
    n, c = X.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise ValueError(f"num_groups={num_groups} does not divide the {c} channels")
    group_size = (c // num_groups) * math.prod(X.shape[2:])  # -1 fails when n is 0
    x = np.asarray(X, dtype=stage_one).reshape(n * num_groups, group_size)
    normalized, _, _ = _standardize_rows(x, epsilon)
    w = work_dtype(X.dtype)
    if per_group:   # opset 18: one scale/bias per group, shared by its channels
        scale, bias = (np.repeat(p, c // num_groups) for p in (scale, bias))
    y = normalized.reshape(X.shape).astype(w, copy=False) * _per_channel(scale.astype(w), X)
    y += _per_channel(bias.astype(w), X)
    return y.astype(X.dtype, copy=False)


@op("GroupNormalization", since=18, inputs=("X", "scale", "bias"), outputs=("Y",),
    infer=same_as(0),
    attrs=(_EPS, Attr("num_groups", "int", doc="groups the C channels split into")))
def group_normalization_18(X: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                           epsilon: float, num_groups: int) -> np.ndarray:
    """GroupNormalization-18: Y = scale[g] * (X - mean) / sqrt(var + epsilon) + bias[g].

    X: [N, C, D1, ...]; the C channels split into ``num_groups`` consecutive groups; mean and
    population variance per (n, group) over its channels and D1, .... scale, bias: [num_groups]
    (one value per *group*, unlike opset 21). Y: X's shape and dtype.
    """
    return _group_norm(X, scale, bias, num_groups, epsilon, work_dtype(X.dtype), True)


@op("GroupNormalization", since=21, inputs=("X", "scale", "bias"), outputs=("Y",),
    infer=same_as(0),
    attrs=(_EPS, Attr("num_groups", "int", doc="groups the C channels split into"),
           Attr("stash_type", "int", 1, "precision of stage one (1 = float32)")))
def group_normalization_21(X: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                           epsilon: float, num_groups: int, stash_type: int) -> np.ndarray:
    """GroupNormalization-21: Y = scale[c] * (X - mean) / sqrt(var + epsilon) + bias[c].

    X: [N, C, D1, ...]; statistics per (n, group) as in opset 18, computed in the
    ``stash_type`` precision; scale, bias: [C] (one value per *channel*). Y: X's shape, dtype.
    """
    stage_one = work_dtype(stash_dtype(stash_type))
    return _group_norm(X, scale, bias, num_groups, epsilon, stage_one, False)


# --- LRN ------------------------------------------------------------------------------------


@op("LRN", since=1, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("alpha", "float", 1e-4, "scale of the squared sum"),
           Attr("beta", "float", 0.75, "exponent"), Attr("bias", "float", 1.0, "offset"),
           Attr("size", "int", doc="number of channels in the window")))
def lrn(X: np.ndarray, *, alpha: float, beta: float, bias: float, size: int) -> np.ndarray:
    """Y = X / (bias + alpha / size * square_sum) ** beta (opset 1 and 13).

    square_sum[n, c, ...] = sum of X[n, i, ...]^2 for i from max(0, c - floor((size-1)/2))
    to min(C-1, c + ceil((size-1)/2)). X: [N, C, D1, ...] float; Y: X's shape and dtype.
    """
    x = to_work(X)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    pad = [(0, 0)] * x.ndim
    pad[1] = (before, after)
    squares = np.pad(x * x, pad)
    c = x.shape[1]
    square_sum = np.zeros_like(x)
    for offset in range(size):          # a loop over the window, not over elements
        square_sum += squares[:, offset:offset + c]
    y = x / (x.dtype.type(bias) + x.dtype.type(alpha / size) * square_sum) ** x.dtype.type(beta)
    return y.astype(X.dtype, copy=False)


# --- MeanVarianceNormalization --------------------------------------------------------------


@op("MeanVarianceNormalization", since=9, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("axes", "ints", (0, 2, 3), "axes the mean and variance are taken over"),))
def mean_variance_normalization(X: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
    """Y = (X - mean) / (sqrt(var) + 1e-9) over ``axes`` (opset 9 and 13).

    mean and population variance over ``axes`` (default [0, 2, 3]: per channel of NCHW).
    The epsilon 1e-9 is added to the standard deviation, as in the op's function body.
    X: any shape, float; Y: X's shape and dtype.
    """
    chosen = check_axes(axes, X.ndim)
    x = to_work(X)
    dev, _ = _centered(x, chosen)
    std = np.sqrt(mean_along(dev * dev, chosen))
    return (dev / (std + x.dtype.type(1e-9))).astype(X.dtype, copy=False)


# --- RMSNormalization -----------------------------------------------------------------------


def _rms_rule(ctx: InferContext, x: TensorType | None, scale: TensorType | None,
              **_: object) -> TensorType:
    return TensorType(dtype_of(scale), shape_of(x))


@op("RMSNormalization", since=23, inputs=("X", "scale"), outputs=("Y",), infer=_rms_rule,
    attrs=(Attr("axis", "int", -1, "first normalised axis; the rest follow"), _EPS,
           Attr("stash_type", "int", 1, "precision of stage one (1 = float32)")))
def rms_normalization(X: np.ndarray, scale: np.ndarray, *, axis: int, epsilon: float,
                      stash_type: int) -> np.ndarray:
    """Y = X / sqrt(mean(X^2) + epsilon) * scale, mean over axes [axis, ..., rank-1].

    Stage one (the normalisation) computes in the ``stash_type`` precision (1 = float32).
    X: rank >= 1, float; scale broadcasts unidirectionally to X. Y has X's shape and
    *scale's* dtype (type V in the spec).
    """
    first = check_axes([axis], X.ndim)[0]
    x = _rows(np.asarray(X, dtype=work_dtype(stash_dtype(stash_type))), first)
    count = x.dtype.type(x.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_rms = 1 / np.sqrt(sum_along(x, x) / count + x.dtype.type(epsilon))
    w = work_dtype(scale.dtype)
    y = (x * inv_rms).reshape(X.shape).astype(w, copy=False) * to_work(scale)
    return y.astype(scale.dtype, copy=False)


# --- LpNormalization ------------------------------------------------------------------------


@op("LpNormalization", since=1, inputs=("input",), outputs=("output",), infer=same_as(0),
    attrs=(Attr("axis", "int", -1, "axis normalised along"),
           Attr("p", "int", 2, "order of the norm: 1 or 2")))
def lp_normalization(input: np.ndarray, *, axis: int, p: int) -> np.ndarray:
    """output = input / ||input||_p along ``axis`` (opset 1 and 22), p = 1 (sum |x|) or
    p = 2 (sqrt of sum x^2). Where the norm is 0 the output is 0 (opset 22 makes this
    explicit; opset 1 left it undefined). input: any shape, float; output: same shape, dtype.
    """
    if p not in (1, 2):
        raise ValueError(f"LpNormalization supports p = 1 or 2, got {p}")
    (ax,) = check_axes([axis], input.ndim)
    x = to_work(input)
    norm = (np.sum(np.abs(x), axis=ax, keepdims=True) if p == 1
            else np.sqrt(np.sum(x * x, axis=ax, keepdims=True)))
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(norm == 0, x.dtype.type(0), x / norm)
    return y.astype(input.dtype, copy=False)


OPS = (batch_normalization_1, batch_normalization_6, batch_normalization_7,
       batch_normalization_9, batch_normalization_14, instance_normalization_1,
       instance_normalization_6, layer_normalization, group_normalization_18,
       group_normalization_21, lrn, mean_variance_normalization, rms_normalization,
       lp_normalization)
