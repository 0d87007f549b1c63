"""Normalisations: LayerNormalization (axis, broadcast Scale/B, Mean/InvStdDev),
GroupNormalization (per-group and per-channel scale), InstanceNormalization,
BatchNormalization (inference and training outputs), LRN (odd and even windows),
LpNormalization (p, axis) and MeanVarianceNormalization (axes)."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from ._sweep import POSITIVE, UNIT, Sample, SampleContext, Sweep, Tol

_FLOATS = (DType.float32, DType.float64)


def _shape(rng: np.random.Generator, low: int, high: int) -> tuple[int, ...]:
    """A shape of rank in [low, high], dims in [1, 5]."""
    return tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(low, high + 1))))


def _epsilon(rng: np.random.Generator, attrs: dict[str, object]) -> None:
    """Sets ``epsilon`` in ``attrs`` to one of a few values, or leaves the default."""
    choice = int(rng.integers(0, 4))
    if choice:
        attrs["epsilon"] = (1e-6, 1e-3, 0.5)[choice - 1]


def _broadcastable(rng: np.random.Generator, shape: tuple[int, ...], first: int
                   ) -> tuple[int, ...]:
    """A shape that broadcasts unidirectionally to ``shape``: mostly the trailing
    ``shape[first:]``, otherwise any trailing part of ``shape`` with some dims made 1."""
    if rng.random() < 0.6:
        return shape[first:]
    tail = shape[len(shape) - int(rng.integers(0, len(shape) + 1)):]
    return tuple(1 if rng.random() < 0.3 else d for d in tail)


def draw_layer_norm(ctx: SampleContext, opset: int) -> Sample:
    """A random LayerNormalization: X of rank 1-4, axis in [-r, r) (negative half the time),
    Scale and B (omitted now and then) of shapes that broadcast unidirectionally to X, epsilon
    varied, stash_type 1 written or left to its default, and 1-3 outputs."""
    rng = ctx.rng
    shape = _shape(rng, 1, 4)
    rank = len(shape)
    first = int(rng.integers(rank))
    attrs: dict[str, object] = {"axis": first - rank if rng.random() < 0.5 else first}
    _epsilon(rng, attrs)
    if rng.random() < 0.3:
        attrs["stash_type"] = 1
    inputs = [ctx.make(shape), ctx.make(_broadcastable(rng, shape, first))]
    if rng.random() < 0.7:
        inputs.append(ctx.make(_broadcastable(rng, shape, first)))
    return Sample(tuple(inputs), attrs, outputs=int(rng.integers(1, 4)))


def draw_group_norm(ctx: SampleContext, opset: int) -> Sample:
    """A random GroupNormalization: X [N, C, D...] of rank 2-4 with C in [1, 6], num_groups
    a divisor of C; scale and bias per group (opset 18) or per channel (21, with stash_type 1
    written or defaulted); epsilon varied."""
    rng = ctx.rng
    shape = list(_shape(rng, 2, 4))
    shape[1] = int(rng.integers(1, 7))
    c = shape[1]
    groups = int(rng.choice([g for g in range(1, c + 1) if c % g == 0]))
    attrs: dict[str, object] = {"num_groups": groups}
    _epsilon(rng, attrs)
    if opset >= 21 and rng.random() < 0.3:
        attrs["stash_type"] = 1
    params = groups if opset < 21 else c
    return Sample((ctx.make(shape), ctx.make((params,), UNIT), ctx.make((params,))), attrs)


def draw_instance_norm(ctx: SampleContext, opset: int) -> Sample:
    """A random InstanceNormalization: X [N, C, D...] of rank 3-5, scale and B [C], epsilon
    varied."""
    rng = ctx.rng
    shape = _shape(rng, 3, 5)
    attrs: dict[str, object] = {}
    _epsilon(rng, attrs)
    c = shape[1]
    return Sample((ctx.make(shape), ctx.make((c,), UNIT), ctx.make((c,))), attrs)


def draw_batch_norm(ctx: SampleContext, opset: int) -> Sample:
    """A random BatchNormalization: X [N, C, D...] of rank 2-4 (1-D [N] from opset 9, C = 1),
    positive var, epsilon and momentum varied. Opset 9: inference (Y) or training (all five
    outputs); 14/15: training_mode 0 (Y) or 1 (Y and the running mean and var, or Y alone);
    15: scale/B and mean/var in float32 or float64 apart from X."""
    rng = ctx.rng
    shape = _shape(rng, 1 if rng.random() < 0.1 else 2, 4)
    c = shape[1] if len(shape) > 1 else 1
    attrs: dict[str, object] = {}
    _epsilon(rng, attrs)
    if rng.random() < 0.5:
        attrs["momentum"] = float(rng.choice([0.0, 0.5, 0.9, 0.99]))
    outputs = 1
    training = rng.random() < 0.4
    if opset >= 14:
        if training:  # Y alone with training_mode 1: onnx's shape inference refuses it
            attrs["training_mode"] = 1
            outputs = 3
        elif rng.random() < 0.3:
            attrs["training_mode"] = 0
    elif training:
        outputs = 5
    t1 = t2 = ctx.dtype
    if opset >= 15:
        t1, t2 = (rng.choice([np.float32, np.float64]) for _ in range(2))
    inputs = (ctx.make(shape), ctx.make((c,), UNIT, t1), ctx.make((c,), dtype=t1),
              ctx.make((c,), dtype=t2), ctx.make((c,), POSITIVE, t2))
    return Sample(inputs, attrs, outputs=outputs)


def draw_lrn(ctx: SampleContext, opset: int) -> Sample:
    """A random LRN: X [N, C, D...] of rank 3-5 with C in [1, 7], size 1-6 (odd and even
    windows, some wider than C), alpha, beta and bias varied (bias > 0)."""
    rng = ctx.rng
    shape = list(_shape(rng, 3, 5) if rng.random() < 0.3 else _shape(rng, 4, 4))
    shape[1] = int(rng.integers(1, 8))
    attrs: dict[str, object] = {"size": int(rng.integers(1, 7))}
    for name, values in (("alpha", (1e-4, 0.01, 0.5, 2.0)), ("beta", (0.5, 0.75, 1.0, 1.5)),
                         ("bias", (0.5, 1.0, 2.0))):
        if rng.random() < 0.7:
            attrs[name] = float(rng.choice(values))
    return Sample((ctx.make(shape),), attrs)


def draw_lp_norm(ctx: SampleContext, opset: int) -> Sample:
    """A random LpNormalization: rank 1-4, axis in [-r, r) or its default -1, p 1, 2 or the
    default; from opset 22 (which defines a zero norm's output as 0) a zero line now and
    then."""
    rng = ctx.rng
    shape = _shape(rng, 1, 4)
    rank = len(shape)
    attrs: dict[str, object] = {}
    axis = rank - 1
    if rng.random() < 0.8:
        axis = int(rng.integers(rank))
        attrs["axis"] = axis - rank if rng.random() < 0.5 else axis
    if rng.random() < 0.8:
        attrs["p"] = int(rng.integers(1, 3))
    x = ctx.make(shape)
    if opset >= 22 and rng.random() < 0.3:
        line = [int(rng.integers(d)) for d in shape]
        line[axis] = slice(None)
        x[tuple(line)] = 0
    return Sample((x,), attrs)


def draw_mvn(ctx: SampleContext, opset: int) -> Sample:
    """A random MeanVarianceNormalization: rank 1-4 with a non-empty random subset of the axes
    (some negative), or rank 4 with the default axes [0, 2, 3]."""
    rng = ctx.rng
    if rng.random() < 0.25:
        return Sample((ctx.make(_shape(rng, 4, 4)),))
    shape = _shape(rng, 1, 4)
    rank = len(shape)
    axes = sorted(rng.choice(rank, int(rng.integers(1, rank + 1)), replace=False).tolist())
    signed = [a - rank if rng.random() < 0.5 else a for a in axes]
    return Sample((ctx.make(shape),), {"axes": signed})


_CANCELS = 100.0
"""A group whose mean^2 exceeds this many times its variance + epsilon: a variance taken as
E[x^2] - E[x]^2 loses about log2 of it in bits (float32: ~1e-5 relative error and more)."""


def _cancels(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> bool:
    """Whether a one-pass variance over ``axes`` cancels in some group of ``x`` (see
    :data:`_CANCELS`); in float64, from the data as drawn."""
    wide = x.astype(np.float64)
    if wide.size == 0:
        return False
    mean = wide.mean(axis=axes, keepdims=True)
    var = ((wide - mean) ** 2).mean(axis=axes, keepdims=True)
    return bool(np.max(mean * mean / (var + epsilon)) > _CANCELS)


_ONE_PASS = ("computes the variance in one pass, E[x^2] - E[x]^2 (as the function body "
             "writes it), which cancels when a group's mean^2 is over 100x its variance; the "
             "spec's formula is (x - mean) / sqrt(variance + epsilon) and the reference takes "
             "the variance in two passes, within float32 rounding of the float64 result (ORT: "
             "[1000, 1000.0625, 1000.125, 999.9375] normalises to +-0.44629, +-1.33984 instead "
             "of +-0.44676, +-1.34027)")


def _stash(peer: str, dtype: np.dtype) -> str:
    """Why ``peer`` differs on a ``dtype`` X with stash_type 1."""
    return (f"{peer} computes stage one of a {dtype} X in {dtype}; with stash_type 1 (the "
            "default) the spec says 'this operator casts all input variables to 32-bit float, "
            "perform the computation, and finally cast Normalized back', and the function body "
            "does (XU = Cast<to=1>(X)): the reference's Normalized is the float32 one")


def known_layer_norm(sample: Sample, opset: int, peer: str) -> str | None:
    """LayerNormalization: both peers ignore stash_type for float64, onnx.reference for
    float16 too (and gives Mean/InvStdDev X's dtype)."""
    x = sample.inputs[0]
    if x.dtype == np.float64 or peer == "onnx.reference" and x.dtype == np.float16:
        return (_stash(peer, x.dtype) + (
            "; onnx.reference 1.23.2 also returns Mean and InvStdDev in X's dtype, where "
            "stash_type is the 'Type of Mean and InvStdDev' (float32)"
            if peer == "onnx.reference" else ""))
    first = int(sample.attrs.get("axis", -1)) % max(x.ndim, 1)
    if not _cancels(x, tuple(range(first, x.ndim)), float(sample.attrs.get("epsilon", 1e-5))):
        return None
    corrected = ("; the reference corrects the deviations by their own mean (corrected "
                 "two-pass) and is within float32 rounding of the exact result")
    if peer == "onnx.reference":
        return ("onnx.reference 1.23.2 rounds the mean to float32 before x - mean (the function "
                "body's steps), so every deviation carries ulp(mean) / 2, large against a "
                "spread much smaller than the mean" + corrected)
    return ("onnxruntime 1.32 sums in double but subtracts a float32 mean too: rows of 2 at "
            "-0.597 with a spread of 5e-4 (seed 31) come out 1.2e-4 off the float64 result, "
            "within 1.1e-5 of (x - float32(mean)) normalised by the double variance" + corrected)


def known_group_norm(sample: Sample, opset: int, peer: str) -> str | None:
    """GroupNormalization: both peers follow the function body's one-pass variance, and
    ignore stash_type (21) for float64."""
    x = sample.inputs[0]
    if opset >= 21 and x.dtype == np.float64:
        return _stash(peer, x.dtype)
    groups = x.reshape(x.shape[0], int(sample.attrs["num_groups"]), -1)
    if _cancels(groups, (2,), float(sample.attrs.get("epsilon", 1e-5))):
        return f"{peer} {_ONE_PASS}"
    return None


def known_instance_norm(sample: Sample, opset: int, peer: str) -> str | None:
    """InstanceNormalization: onnxruntime's one-pass variance."""
    x = sample.inputs[0]
    if peer == "onnxruntime" and _cancels(x, tuple(range(2, x.ndim)),
                                          float(sample.attrs.get("epsilon", 1e-5))):
        return f"onnxruntime 1.32 {_ONE_PASS}"
    return None


def known_batch_norm(sample: Sample, opset: int, peer: str) -> str | None:
    """BatchNormalization: onnxruntime's saved_var and one-pass variance; onnx.reference's
    training branch at opset 9 and running statistics' dtype at 15."""
    x, mean = sample.inputs[0], sample.inputs[3]
    training = sample.outputs > 1
    if peer == "onnxruntime":
        if opset < 14 and training:
            return ("onnxruntime 1.32's BatchNormalization-9 returns 1 / sqrt(batch_var + "
                    "epsilon) as saved_var (cuDNN's saved inverse deviation); the spec names it "
                    "'Saved variance used during training' and says no more (ambiguous); the "
                    "reference returns the batch variance")
        axes = tuple(i for i in range(x.ndim) if i != 1)
        if training and _cancels(x, axes, float(sample.attrs.get("epsilon", 1e-5))):
            return f"onnxruntime 1.32 {_ONE_PASS}"
        return None
    if opset < 14:
        return ("onnx.reference 1.23.2's BatchNormalization-9 uses the batch statistics "
                "whenever momentum is set, and it always is (the default 0.9 is filled in); the "
                "spec: 'Output case #2: Y (test mode)', the given mean and var")
    if training and mean.dtype != x.dtype:
        return ("onnx.reference 1.23.2 returns running_mean/running_var in X's dtype; "
                "BatchNormalization-15 types them T2, input_mean's")
    return None


def known_lrn(sample: Sample, opset: int, peer: str) -> str | None:
    """LRN: onnx.reference sums over the wrong loop when N != C."""
    x = sample.inputs[0]
    if peer == "onnx.reference" and x.shape[0] != x.shape[1]:
        return ("onnx.reference 1.23.2's LRN fills square_sum[:, c] for c in range(N) (the "
                "batch size) instead of range(C), so channels >= N keep a zero square_sum; the "
                "spec sums X[n, i, ...]^2 over the window of every channel c")
    return None


def known_lp_norm(sample: Sample, opset: int, peer: str) -> str | None:
    """LpNormalization: onnx.reference's p = 1 norm is sum(x)."""
    if peer == "onnx.reference" and sample.attrs.get("p") == 1:
        return ("onnx.reference 1.23.2 takes the p = 1 norm as sum(x) (np.power(x, 1).sum()), "
                "not sum(|x|); tests/test_reference_oracles.py::"
                "test_lp_normalization_p1_divides_by_the_sum_of_magnitudes")
    return None


def known_mvn(sample: Sample, opset: int, peer: str) -> str | None:
    """MeanVarianceNormalization: onnxruntime's NaN for a zero variance; onnx.reference's
    one-pass variance (the function body's, literally)."""
    x = sample.inputs[0]
    axes = tuple(int(a) % x.ndim for a in sample.attrs.get("axes", (0, 2, 3)))
    if peer == "onnxruntime":
        wide = x.astype(np.float64)
        if np.any(np.ptp(wide, axis=axes) == 0):
            return ("onnxruntime 1.32 returns NaN where a group's variance is 0 (its elements "
                    "all equal, e.g. every reduced axis of size 1); the function body gives "
                    "(X - mean) / (sqrt(0) + 1e-9) = 0, as the reference")
        return None
    if _cancels(x, axes, 0.0):
        return f"onnx.reference 1.23.2 {_ONE_PASS}"
    return None


def draw_rms_norm(ctx: SampleContext, opset: int) -> Sample:
    """A random RMSNormalization: X of rank 1-4, axis in [-r, r) (negative half the time) or
    its default -1, scale of a shape that broadcasts unidirectionally to X, epsilon varied,
    stash_type 1 (float) or 11 (double) written or left to its default 1; now and then a
    zero row (its RMS is sqrt(epsilon))."""
    rng = ctx.rng
    shape = _shape(rng, 1, 4)
    rank = len(shape)
    first = rank - 1
    attrs: dict[str, object] = {}
    if rng.random() < 0.8:
        first = int(rng.integers(rank))
        attrs["axis"] = first - rank if rng.random() < 0.5 else first
    _epsilon(rng, attrs)
    if rng.random() < 0.4:
        attrs["stash_type"] = int(rng.choice([1, 11]))
    x = ctx.make(shape)
    if rng.random() < 0.2:
        x[tuple(int(rng.integers(d)) for d in shape[:first])] = 0
    return Sample((x, ctx.make(_broadcastable(rng, shape, first))), attrs)


_LN_TOL = {DType.float16: Tol(2e-3, 1e-4, "the spec rounds Normalized to float16 before "
                                          "scaling and shifting, the reference rounds once at "
                                          "the end; values near zero need an absolute floor "
                                          "(the conformance case's tolerance)")}

SWEEPS = (
    Sweep("LayerNormalization", (17,), draw_layer_norm, dtypes=_FLOATS + (DType.float16,),
          known=known_layer_norm, tolerance=_LN_TOL),
    Sweep("GroupNormalization", (18, 21), draw_group_norm, dtypes=_FLOATS,
          known=known_group_norm),
    Sweep("InstanceNormalization", (6, 22), draw_instance_norm, dtypes=_FLOATS,
          known=known_instance_norm),
    Sweep("BatchNormalization", (9, 14, 15), draw_batch_norm, dtypes=_FLOATS,
          known=known_batch_norm),
    Sweep("LRN", (1, 13), draw_lrn, dtypes=_FLOATS, known=known_lrn),
    Sweep("LpNormalization", (1, 22), draw_lp_norm, dtypes=_FLOATS, known=known_lp_norm),
    Sweep("MeanVarianceNormalization", (9, 13), draw_mvn, dtypes=_FLOATS, known=known_mvn),
    Sweep("RMSNormalization", (23,), draw_rms_norm, dtypes=_FLOATS + (DType.float16,),
          tolerance={**_LN_TOL, DType.float64: Tol(
              2e-6, 1e-6, "with stash_type 1 (the default) the reference computes stage one of a "
              "float64 X in float32, as the spec says ('casts all input variables to 32-bit "
              "float') and the function body does (XU = Cast<to=1>(X)); onnxruntime 1.32 and "
              "onnx.reference compute it in double: they differ by float32 roundings")}),
)
