"""The ai.onnx.ml ops: ArrayFeatureExtractor, Binarizer, CategoryMapper, FeatureVectorizer,
Imputer, LabelEncoder (1, 2, 4), LinearRegressor, Normalizer, OneHotEncoder and Scaler:
random valid configurations of each, in float32, float64 and the integer and string types
where the op takes them (the tree ensembles are in :mod:`.ml_trees`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from refmnn.dtypes import DType
from refmnn_conformance.runner import reference_outputs

from ._sweep import SMALL_INT, Known, Sample, SampleContext, Sweep

ML = "ai.onnx.ml"
_NUMBERS = (DType.float32, DType.float64, DType.int64, DType.int32)
"""The element types of the ops whose T is float, double, int64 and int32."""
_WORDS = ("a", "b", "cat", "dog", "Dog", "", "é", "a b", "x1", "_Unused")
"""The strings drawn: short words, an empty string, a non-ASCII letter, a default's name."""
_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")


def _rows(rng: np.random.Generator) -> tuple[int, ...]:
    """A batch shape: [C] (one row) or [N, C], N in [0, 4], C in [1, 5]."""
    c = int(rng.integers(1, 6))
    return (c,) if rng.random() < 0.3 else (int(rng.integers(0, 5)), c)


def _words(rng: np.random.Generator, shape: tuple[int, ...], pool: list[str]) -> np.ndarray:
    """An object array of ``shape`` of strings from ``pool``."""
    out = np.empty(int(np.prod(shape)), dtype=object)
    out[:] = [str(rng.choice(pool)) for _ in range(out.size)]
    return out.reshape(shape)


def _numbers(ctx: SampleContext, shape: tuple[int, ...], dtype: DType | None = None,
             nans: float = 0.0) -> np.ndarray:
    """Small values (multiples of 1/2 for floats, so that equal thresholds and keys are hit)
    of ``dtype`` (the context's by default), a fraction ``nans`` of float elements NaN."""
    dtype = dtype or DType.from_numpy(ctx.dtype)
    x = ctx.make(shape, SMALL_INT, dtype)
    if dtype.is_float:
        x = np.asarray(x / 2 + ctx.make(shape, SMALL_INT, dtype) * (ctx.rng.random() < 0.5),
                       dtype.numpy)
        x[ctx.rng.random(shape) < nans] = np.nan
    return x


def _floats(rng: np.random.Generator, n: int, scale: float = 1.0) -> list[float]:
    """``n`` random floats that float32 holds exactly (attributes are float32)."""
    return [float(v) for v in (rng.standard_normal(n) * scale).astype(np.float32)]


def _halves(rng: np.random.Generator, n: int) -> list[float]:
    """``n`` random multiples of 1/2 in [-4, 4]."""
    return [float(v) / 2 for v in rng.integers(-8, 9, n)]


# --------------------------------------------------------------------------------------------
# simple transforms
# --------------------------------------------------------------------------------------------

def draw_array_feature_extractor(ctx: SampleContext, opset: int) -> Sample:
    """A random ArrayFeatureExtractor: X of rank 1-3 (strings when drawn in string), indices
    Y of 1-5 features in [0, F) (repeats, any order) shaped [k] or [1, k]."""
    rng = ctx.rng
    rank = int(rng.integers(1, 4))
    shape = tuple(int(d) for d in rng.integers(1, 5, rank))
    x = _words(rng, shape, list(_WORDS)) if ctx.dtype == object else _numbers(ctx, shape)
    index = rng.integers(0, shape[-1], int(rng.integers(1, 6)))
    return Sample((x, index.reshape((1, -1) if rng.random() < 0.3 else (-1,))))


def draw_binarizer(ctx: SampleContext, opset: int) -> Sample:
    """A random Binarizer: X of rank 0-3 (NaN among the floats in a fifth of the samples:
    onnxruntime refuses NaN), threshold a multiple of 1/2 (equal to some elements), a random
    float, or left to its default 0."""
    rng = ctx.rng
    shape = tuple(int(d) for d in rng.integers(0 if rng.random() < 0.1 else 1, 5,
                                               int(rng.integers(0, 4))))
    attrs: dict[str, object] = {}
    if rng.random() < 0.8:
        attrs["threshold"] = _halves(rng, 1)[0] if rng.random() < 0.6 else _floats(rng, 1)[0]
    return Sample((_numbers(ctx, shape, nans=0.2 if rng.random() < 0.2 else 0.0),), attrs)


def draw_normalizer(ctx: SampleContext, opset: int) -> Sample:
    """A random Normalizer: X [C] or [N, C] (N 0-4) of small values of either sign, some rows
    all zero now and then; norm MAX, L1 or L2."""
    rng = ctx.rng
    x = _numbers(ctx, _rows(rng))
    if x.ndim == 2 and x.shape[0] and rng.random() < 0.3:
        x[int(rng.integers(0, x.shape[0]))] = 0
    return Sample((x,), {"norm": str(rng.choice(["MAX", "L1", "L2"]))})


def draw_scaler(ctx: SampleContext, opset: int) -> Sample:
    """A random Scaler: X [C] or [N, C] (N 0-4); offset and scale of one length, 1 or C; one of
    them left out now and then (onnxruntime refuses that: the spec says scale 'Must be same
    length as offset')."""
    rng = ctx.rng
    x = _numbers(ctx, _rows(rng))
    n = 1 if rng.random() < 0.4 else x.shape[-1]
    attrs: dict[str, object] = {"offset": _floats(rng, n), "scale": _floats(rng, n)}
    if rng.random() < 0.1:
        del attrs[str(rng.choice(["offset", "scale"]))]
    return Sample((x,), attrs)


def draw_imputer(ctx: SampleContext, opset: int) -> Sample:
    """A random Imputer: X [C] or [N, C]; floats replace NaN or a number (some elements equal
    to it, NaNs among the data either way), integers a number; imputed values one or one per
    feature."""
    rng = ctx.rng
    x = _numbers(ctx, _rows(rng), nans=0.15)
    n = 1 if rng.random() < 0.4 else x.shape[-1]
    if ctx.is_float:
        replaced = float("nan") if rng.random() < 0.5 else _halves(rng, 1)[0]
        return Sample((x,), {"imputed_value_floats": _floats(rng, n, 3.0),
                             "replaced_value_float": replaced})
    attrs: dict[str, object] = {"imputed_value_int64s": [int(v) for v in rng.integers(-9, 9, n)]}
    if rng.random() < 0.8:
        attrs["replaced_value_int64"] = int(rng.integers(-4, 5))
    return Sample((x,), attrs)


def draw_feature_vectorizer(ctx: SampleContext, opset: int) -> Sample:
    """A random FeatureVectorizer: 1-4 inputs of the drawn type (X is homogeneous: one T1 for
    all), [N, C_i] with one N or (when N is 1) [C_i]; inputdimensions each C_i, or now and
    then fewer or more (the input cut short or padded with zeros)."""
    rng = ctx.rng
    n = int(rng.integers(1, 4))
    inputs = []
    for _ in range(int(rng.integers(1, 5))):
        c = int(rng.integers(1, 5))
        inputs.append(_numbers(ctx, (c,) if n == 1 and rng.random() < 0.5 else (n, c)))
    dims = [int(x.shape[-1]) + (int(rng.integers(-1, 2)) if rng.random() < 0.2 else 0)
            for x in inputs]
    return Sample(tuple(inputs), {"inputdimensions": [max(d, 1) for d in dims]})


def draw_one_hot_encoder(ctx: SampleContext, opset: int) -> Sample:
    """A random OneHotEncoder: X of rank 1-3, strings against cats_strings or numbers (floats
    with fractions, cast to integers) against cats_int64s; 1-6 distinct categories; zeros 1
    (unknown inputs give a zero row) or 0 with every input among the categories."""
    rng = ctx.rng
    shape = tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(1, 4))))
    zeros = int(rng.random() < 0.6)
    if ctx.dtype == object:
        cats = [str(w) for w in rng.choice(_WORDS, int(rng.integers(1, 7)), replace=False)]
        x = _words(rng, shape, list(_WORDS) if zeros else cats)
        attrs: dict[str, object] = {"cats_strings": cats}
    else:
        ints = [int(v) for v in rng.choice(np.arange(-4, 5), int(rng.integers(1, 7)),
                                           replace=False)]
        x = _numbers(ctx, shape)
        if not zeros:
            x = np.asarray(rng.choice(ints, shape)).astype(ctx.dtype)
        if ctx.is_float:
            x = (x + np.sign(x) * rng.choice([0.0, 0.25, 0.5], shape)).astype(ctx.dtype)
        attrs = {"cats_int64s": ints}
    if zeros == 0 or rng.random() < 0.7:
        attrs["zeros"] = zeros
    return Sample((x,), attrs)


def draw_linear_regressor(ctx: SampleContext, opset: int) -> Sample:
    """A random LinearRegressor: X [F] or [N, F] (N 0-4), 1-3 targets, coefficients, intercepts
    (left out now and then), every post_transform (PROBIT with scores in (0, 1), from small
    coefficients around an intercept of 1/2)."""
    rng = ctx.rng
    x = _numbers(ctx, _rows(rng))
    targets = int(rng.integers(1, 4))
    transform = str(rng.choice(_TRANSFORMS))
    scale = 0.02 if transform == "PROBIT" else 1.0
    attrs: dict[str, object] = {"coefficients": _floats(rng, targets * x.shape[-1], scale)}
    if transform == "PROBIT" or rng.random() < 0.7:
        attrs["intercepts"] = [0.5] * targets if transform == "PROBIT" else _floats(rng, targets)
    if targets > 1 or rng.random() < 0.5:
        attrs["targets"] = targets
    if transform != "NONE" or rng.random() < 0.5:
        attrs["post_transform"] = transform
    return Sample((x,), attrs)


# --------------------------------------------------------------------------------------------
# lookups
# --------------------------------------------------------------------------------------------

def draw_category_mapper(ctx: SampleContext, opset: int) -> Sample:
    """A random CategoryMapper: 1-6 (string, int64) pairs, distinct on both sides; string X
    (drawn in string) maps to int64, int64 X to string, some inputs unknown; the default of
    the output's type set or left out."""
    rng = ctx.rng
    n = int(rng.integers(1, 7))
    strings = [str(w) for w in rng.choice(_WORDS, n, replace=False)]
    ints = [int(v) for v in rng.choice(np.arange(-5, 10), n, replace=False)]
    shape = tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(1, 4))))
    attrs: dict[str, object] = {"cats_int64s": ints, "cats_strings": strings}
    if ctx.dtype == object:
        x = _words(rng, shape, list(_WORDS))
        if rng.random() < 0.6:
            attrs["default_int64"] = int(rng.integers(-9, 99))
    else:
        x = rng.integers(-5, 10, shape).astype(np.int64)
        if rng.random() < 0.6:
            attrs["default_string"] = str(rng.choice(["?", "none", ""]))
    return Sample((x,), attrs)


_KEY_KINDS = {DType.string: "strings", DType.int64: "int64s", DType.float32: "floats"}
"""The keys_*/values_* list attribute of each type."""


def _table(rng: np.random.Generator, dtype: DType, n: int, unique: bool) -> list[object]:
    """``n`` keys or values of ``dtype``: words, small integers, multiples of 1/2 (a NaN among
    float keys now and then); distinct when ``unique``."""
    if dtype is DType.string:
        pool: list[object] = list(_WORDS)
    elif dtype.is_float:
        pool = [float(v) / 2 for v in range(-8, 9)] + [float("nan")]
    else:
        pool = list(range(-6, 10))
    picked = rng.choice(len(pool), n, replace=not unique or n > len(pool))
    return [pool[int(i)] for i in picked]


def _as_tensor(dtype: DType, values: list[object]) -> np.ndarray:
    """Values for a tensor attribute of ``dtype`` (``.tolist()``: for a list attribute)."""
    if dtype is DType.string:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    return np.asarray(values, dtype=dtype.numpy)


def _inputs_from(ctx: SampleContext, keys: list[object], dtype: DType) -> np.ndarray:
    """X of rank 1-3 holding keys and other values of ``dtype`` (NaN among floats)."""
    rng = ctx.rng
    shape = tuple(int(d) for d in rng.integers(1, 4, int(rng.integers(1, 4))))
    others = _table(rng, dtype, int(np.prod(shape)), unique=False)
    pool = [*keys, *others]
    picked = [pool[int(i)] for i in rng.integers(0, len(pool), int(np.prod(shape)))]
    return _as_tensor(dtype, picked).reshape(shape)


def draw_label_encoder(ctx: SampleContext, opset: int) -> Sample:
    """A random LabelEncoder. 1: classes_strings (1-6 words), string X -> int64 or int64 X (in
    and out of range) -> string, the default of the output set or left out. 2 and 4: X of the
    drawn type, 1-6 keys (distinct; repeats at 4, where the last one wins; a NaN key among
    floats) and values of a random type (string, int64, float; at 4 also int32, int16, double
    as tensors), given as the keys_*/values_* lists or (4, and for the types lists cannot hold)
    as tensors; the default of the values' type set (default_* or default_tensor at 4) or
    left out."""
    rng = ctx.rng
    key_type = DType.from_numpy(ctx.dtype)
    n = int(rng.integers(1, 7))
    if opset == 1:
        classes = [str(w) for w in rng.choice(_WORDS, n, replace=False)]
        attrs: dict[str, object] = {"classes_strings": classes}
        if key_type is DType.string:
            x = _inputs_from(ctx, classes, DType.string)
            if rng.random() < 0.6:
                attrs["default_int64"] = int(rng.integers(-9, 99))
        else:
            x = rng.integers(-2, n + 2, tuple(int(d) for d in rng.integers(1, 4, 2)))
            if rng.random() < 0.6:
                attrs["default_string"] = str(rng.choice(["?", "none", ""]))
        return Sample((x,), attrs)
    types = [DType.string, DType.int64, DType.float32]
    types += [DType.int32, DType.int16, DType.float64] if opset >= 4 else []
    value_type = types[int(rng.integers(0, len(types)))]
    keys = _table(rng, key_type, n, unique=opset < 4 or rng.random() < 0.7)
    values = _table(rng, value_type, n, unique=False)
    values = [0.0 if isinstance(v, float) and np.isnan(v) else v for v in values]
    attrs = {}
    for prefix, dtype, table in (("keys", key_type, keys), ("values", value_type, values)):
        if dtype in _KEY_KINDS and (opset < 4 or rng.random() < 0.5):
            attrs[f"{prefix}_{_KEY_KINDS[dtype]}"] = _as_tensor(dtype, table).tolist()
        else:
            attrs[f"{prefix}_tensor"] = _as_tensor(dtype, table)
    default = _table(rng, value_type, 1, unique=True)
    if "values_tensor" in attrs and rng.random() < 0.6:
        attrs["default_tensor"] = _as_tensor(value_type, default)
    elif "values_tensor" not in attrs and rng.random() < 0.6:
        name = {"strings": "default_string", "int64s": "default_int64",
                "floats": "default_float"}[_KEY_KINDS[value_type]]
        attrs[name] = _as_tensor(value_type, default).tolist()[0]
    return Sample((_inputs_from(ctx, keys, key_type),), attrs)



# --------------------------------------------------------------------------------------------
# the peers' settled differences
# --------------------------------------------------------------------------------------------

def _onnx_reference(sample: Sample, op: str, opset: int) -> np.ndarray | None:
    """onnx.reference's output on ``sample``, or None where it fails."""
    names = [f"x{i}" for i in range(len(sample.inputs))]
    node = helper.make_node(op, names, ["y"], domain=ML)
    node.attribute.extend(helper.make_attribute(k, numpy_helper.from_array(v)) if isinstance(
        v, np.ndarray) else helper.make_attribute(k, v) for k, v in sorted(sample.attrs.items()))
    inputs = [helper.make_tensor_value_info(n, DType.from_numpy(a.dtype).value, list(a.shape))
              for n, a in zip(names, sample.inputs, strict=True)]
    graph = helper.make_graph([node], op, inputs, [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid(ML, opset)])
    try:
        return np.asarray(ReferenceEvaluator(model).run(
            None, dict(zip(names, sample.inputs, strict=True)))[0])
    except Exception:
        return None


def _onnx_reference_agrees(sample: Sample, op: str, opset: int) -> bool:
    """Whether onnx.reference's output on ``sample`` holds the reference's values once given
    the reference's dtype and shape (it returns unicode arrays for strings, X's type where the
    schema says float, [targets] for a 1-D X; integers truncated toward zero)."""
    theirs = _onnx_reference(sample, op, opset)
    mine = np.asarray(reference_outputs(op, ML, opset, sample)[0])
    if theirs is None or theirs.size != mine.size:
        return False
    theirs = theirs.reshape(mine.shape)
    if mine.dtype == object:
        return [str(v) for v in theirs.reshape(-1)] == [str(v) for v in mine.reshape(-1)]
    if theirs.dtype.kind in "iu" and mine.dtype.kind == "f":
        mine = np.trunc(mine)
    return bool(np.allclose(theirs.astype(np.float64), mine.astype(np.float64), rtol=1e-6,
                            atol=1e-5, equal_nan=True))


_AS_FLOAT = ("onnx.reference 1.23.2 returns Y in X's type (double, or an integer type with "
             "the values truncated) where the schema types Y tensor(float){}; the values agree")


def _as_float(op: str, shape: str = "") -> Known:
    """``known`` for the ops whose onnx.reference differences are Y's type (and shape), and
    for the models, its computing in an integer X's type."""
    def known(sample: Sample, opset: int, peer: str) -> str | None:
        if peer != "onnx.reference":
            return None
        if _onnx_reference_agrees(sample, op, opset):
            return _AS_FLOAT.format(shape)
        theirs = _onnx_reference(sample, op, opset)
        if op.endswith("Regressor") and theirs is not None and theirs.dtype.kind in "iu":
            return ("onnx.reference 1.23.2 computes and returns Y in an integer X's type (the "
                    "weights and sums truncated); the schema types Y tensor(float)")
        return None
    return known


def known_feature_vectorizer(sample: Sample, opset: int, peer: str) -> str | None:
    """FeatureVectorizer: onnx.reference's 1-D inputs and float64 output."""
    if peer == "onnx.reference" and any(x.ndim == 1 for x in sample.inputs):
        return ("onnx.reference 1.23.2 reads a 1-D input [C] as C rows; the spec: '1-D tensors "
                "are treated as [1,C]' (onnxruntime agrees with the reference)")
    return _as_float("FeatureVectorizer")(sample, opset, peer)


def known_normalizer(sample: Sample, opset: int, peer: str) -> str | None:
    """Normalizer: onnx.reference's float64 output and MAX by the largest magnitude."""
    x = sample.inputs[0].reshape(-1, sample.inputs[0].shape[-1]).astype(np.float64)
    if peer != "onnx.reference":
        return None
    if sample.attrs["norm"] == "MAX" and x.size and np.any(x.max(axis=1) != abs(x).max(axis=1)):
        return ("onnx.reference 1.23.2 divides by the largest magnitude, max(|X|); the spec: "
                "'Max: Y = X / max(X)' (onnxruntime agrees with the reference)")
    return _as_float("Normalizer")(sample, opset, peer)


def known_one_hot_encoder(sample: Sample, opset: int, peer: str) -> str | None:
    """OneHotEncoder: onnx.reference does not cast float X to integers."""
    x = sample.inputs[0]
    if peer == "onnx.reference" and x.dtype.kind == "f" and np.any(x != np.trunc(x)):
        return ("onnx.reference 1.23.2 compares float X with cats_int64s as it is; the spec: "
                "'If the input is a tensor of float, int32, or double, the data will be cast to "
                "integers' (-4.25 to -4, as a C cast and onnxruntime do)")
    return None


def _nan_key_hit(sample: Sample) -> bool:
    """Whether a NaN key meets a NaN input."""
    keys = sample.attrs.get("keys_floats", sample.attrs.get("keys_tensor"))
    x = sample.inputs[0]
    return keys is not None and x.dtype.kind == "f" and bool(
        np.isnan(np.asarray(keys, np.float64)).any() and np.isnan(x).any())


def _duplicate_key_hit(sample: Sample) -> bool:
    """Whether an input meets a key given twice (NaN keys the same)."""
    keys = sample.attrs.get("keys_strings", sample.attrs.get("keys_int64s",
                            sample.attrs.get("keys_floats", sample.attrs.get("keys_tensor"))))
    flat = ["nan" if isinstance(k, float) and np.isnan(k) else str(k)
            for k in np.asarray(keys, dtype=object).reshape(-1)]
    twice = {k for k in flat if flat.count(k) > 1}
    return any(("nan" if isinstance(v, float) and np.isnan(v) else str(v)) in twice
               for v in sample.inputs[0].reshape(-1).tolist())


def known_label_encoder(sample: Sample, opset: int, peer: str) -> str | None:
    """LabelEncoder: NaN keys (both peers at 2, onnx.reference at 4), onnxruntime's first
    duplicate key, onnx.reference's unicode arrays."""
    if opset >= 2 and _nan_key_hit(sample) and (peer == "onnx.reference" or opset == 2):
        return (f"{peer} does not map a NaN input through a NaN key (it compares by value); the "
                "spec: 'For key look-up, bit-wise comparison is used so even a float NaN can be "
                "mapped' (2; the inputs' NaN has the key's bits), 'Float keys with value NaN "
                "match any input NaN value regardless of bit value' (4)")
    if peer == "onnxruntime" and opset >= 4 and _duplicate_key_hit(sample):
        return ("onnxruntime 1.32 maps a key given twice to the first one's value; the spec "
                "(4): 'If a key is repeated, the last key takes precedence' (onnx.reference "
                "agrees with the reference)")
    theirs = _onnx_reference(sample, "LabelEncoder", opset) if peer == "onnx.reference" else None
    if theirs is not None and theirs.dtype.kind == "U" and _onnx_reference_agrees(
            sample, "LabelEncoder", opset):
        return ("onnx.reference 1.23.2 returns strings as a NumPy unicode array (dtype <U), not "
                "the object array of tensor(string); the values agree")
    return None


_ONE_TARGET = ("onnxruntime 1.32 skips {} for a single target (it applies only PROBIT to one "
               "score, as a binary classifier's); the spec applies post_transform to the output "
               "whatever its length (LOGISTIC elementwise, a softmax of one score is 1)")
_ZERO_ROW = ("onnxruntime 1.32 gives NaN (0 / 0) for SOFTMAX_ZERO over a row of zero scores; "
             "the reference gives 0.5, a documented choice (the spec does not define "
             "SOFTMAX_ZERO)")


def _probit_cancels(raw: np.ndarray) -> str | None:
    """Why onnxruntime's PROBIT differs on these raw scores (all of them but 0 and 1, where
    both give -inf and +inf)."""
    if np.all((raw == 0) | (raw == 1)):
        return None
    return ("onnxruntime 1.32 returns Winitzki's closed-form erf^-1 (relative error up to "
            "2e-3), evaluated in float32, for PROBIT = sqrt(2) erf^-1(2 s - 1); the reference "
            "refines it to erf^-1 itself (Newton steps on a 1-ulp erf)")


def _nan_at_neq(sample: Sample, peer: str) -> str | None:
    """Why ``peer`` differs where a NaN feature meets a BRANCH_NEQ node whose
    missing_value_tracks_true is 0."""
    a = sample.attrs
    x = np.asarray(sample.inputs[0], np.float64)
    x = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
    modes = list(a["nodes_modes"])
    flags = a.get("nodes_missing_value_tracks_true")
    flags = [0] * len(modes) if flags is None else list(flags)
    for node, mode in enumerate(modes):
        if mode in ("BRANCH_NEQ", 5) and not flags[node] and \
                np.isnan(x[:, a["nodes_featureids"][node]]).any():
            return (f"{peer} sends a NaN feature at BRANCH_NEQ to the 'true' branch "
                    "(NaN != t) when missing_value_tracks_true is 0; the spec: 'use the 'true' "
                    "(if the attribute value is 1) or 'false' (if the attribute value is 0) "
                    "branch' (tests/test_reference_oracles.py)")
    return None


def _with(sample: Sample, op: str, opset: int, **changes: Any) -> np.ndarray:
    """The reference's output on ``sample`` with some attributes changed (None: removed)."""
    attrs = {k: v for k, v in {**sample.attrs, **changes}.items() if v is not None}
    return np.asarray(reference_outputs(op, ML, opset, Sample(sample.inputs, attrs))[0])


def _zero_row(scores: np.ndarray) -> bool:
    """Whether some row of scores is all (near) zero, as SOFTMAX_ZERO sees it."""
    return bool(scores.size and np.any(np.all(np.abs(scores) <= 1e-7, axis=1)))


def known_linear_regressor(sample: Sample, opset: int, peer: str) -> str | None:
    """LinearRegressor: onnxruntime's transforms of one target and of zero rows; onnx.reference's
    float64 output and [targets] shape."""
    transform = sample.attrs.get("post_transform", "NONE")
    if peer == "onnxruntime":
        if sample.attrs.get("targets", 1) == 1 and transform not in ("NONE", "PROBIT"):
            return _ONE_TARGET.format(transform)
        raw = _with(sample, "LinearRegressor", opset, post_transform=None)
        if transform == "SOFTMAX_ZERO" and _zero_row(raw):
            return _ZERO_ROW
        return _probit_cancels(raw) if transform == "PROBIT" else None
    if "intercepts" not in sample.attrs:
        theirs = _onnx_reference(sample, "LinearRegressor", opset)
        if theirs is not None and theirs.size and np.isnan(theirs).all():
            return ("onnx.reference 1.23.2 gives NaN when intercepts is left out; the spec: "
                    "'Intercepts are optional' (no intercept: 0)")
    return _as_float("LinearRegressor", ", and [targets] for a 1-D X (the reference, as "
                     "onnxruntime, reads it as one row: [1, targets])")(sample, opset, peer)


SWEEPS = (
    Sweep("ArrayFeatureExtractor", (1,), draw_array_feature_extractor,
          dtypes=(*_NUMBERS, DType.string), domain=ML),
    Sweep("Binarizer", (1,), draw_binarizer, dtypes=_NUMBERS, domain=ML),
    Sweep("CategoryMapper", (1,), draw_category_mapper, dtypes=(DType.string, DType.int64),
          domain=ML),
    Sweep("FeatureVectorizer", (1,), draw_feature_vectorizer, dtypes=_NUMBERS,
          known=known_feature_vectorizer, domain=ML),
    Sweep("Imputer", (1,), draw_imputer, dtypes=_NUMBERS[:3], domain=ML),
    Sweep("LabelEncoder", (1,), draw_label_encoder, dtypes=(DType.string, DType.int64),
          known=known_label_encoder, domain=ML),
    Sweep("LabelEncoder", (2,), draw_label_encoder,
          dtypes=(DType.string, DType.int64, DType.float32), known=known_label_encoder,
          domain=ML),
    Sweep("LabelEncoder", (4,), draw_label_encoder,
          dtypes=(DType.string, DType.int64, DType.float32, DType.int32, DType.int16,
                  DType.float64), known=known_label_encoder, domain=ML),
    Sweep("LinearRegressor", (1,), draw_linear_regressor, dtypes=_NUMBERS,
          known=known_linear_regressor, domain=ML),
    Sweep("Normalizer", (1,), draw_normalizer, dtypes=_NUMBERS, known=known_normalizer,
          domain=ML),
    Sweep("OneHotEncoder", (1,), draw_one_hot_encoder,
          dtypes=(DType.string, DType.int64, DType.int32, DType.float32, DType.float64),
          known=known_one_hot_encoder, domain=ML),
    Sweep("Scaler", (1,), draw_scaler, dtypes=_NUMBERS, known=_as_float("Scaler"), domain=ML),
)
