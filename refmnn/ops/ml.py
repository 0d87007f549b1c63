"""Classic machine-learning ops (domain ``ai.onnx.ml``).

ArrayFeatureExtractor, Binarizer, LabelEncoder (1, 2, 4), CategoryMapper, TreeEnsemble (5),
TreeEnsembleRegressor (1, 3), LinearRegressor, Normalizer, Scaler, Imputer, OneHotEncoder and
FeatureVectorizer.  String tensors are NumPy object arrays of ``str``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType, ValueType
from refmnn.ops._erf import erf64
from refmnn.ops._infer import dtype_of, same_as, shape_of
from refmnn.ops._schema import Attr, InferContext, flag, op

ML = "ai.onnx.ml"
_F32 = DType.float32


def _as_2d(X: np.ndarray) -> np.ndarray:
    """[N, C] view of X: a 1-D input is one row, higher ranks flatten to [N, rest]."""
    if X.ndim == 1:
        return X.reshape(1, -1)
    return X.reshape(X.shape[0], int(np.prod(X.shape[1:])))  # not -1: N may be 0


def _strings(values: Sequence[str], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out.reshape(shape)


# --------------------------------------------------------------------------------------------
# lookups: LabelEncoder, CategoryMapper
# --------------------------------------------------------------------------------------------

def _lookup(X: np.ndarray, keys: Sequence[Any], values: Sequence[Any], default: Any,
            out_dtype: np.dtype) -> np.ndarray:
    """Map each element of X through keys -> values (last duplicate key wins), else default.

    Strings match exactly; numbers match by value, and a NaN key matches every NaN input.
    """
    out_dtype = np.dtype(out_dtype)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    if X.dtype.kind in "OUS":
        table = dict(zip((str(k) for k in keys), values, strict=True))
        mapped = np.frompyfunc(lambda s: table.get(str(s), default), 1, 1)(X)
        return _cast_values(np.asarray(mapped, dtype=object).reshape(X.shape), out_dtype)
    table_num = {}
    nan_value, has_nan = None, False
    for k, v in zip(keys, values, strict=True):
        if isinstance(k, float | np.floating) and np.isnan(k):
            nan_value, has_nan = v, True
        else:
            table_num[k] = v
    key_arr = np.array(list(table_num.keys()), dtype=X.dtype if X.dtype.kind == "f" else np.int64)
    order = np.argsort(key_arr, kind="stable")
    key_arr = key_arr[order]
    val_arr = _cast_values(_object_array(list(table_num.values())), out_dtype)[order]
    result = np.full(X.shape, default, dtype=out_dtype) if out_dtype != object else \
        _strings([default] * X.size, X.shape)
    if key_arr.size:
        pos = np.clip(np.searchsorted(key_arr, X), 0, key_arr.size - 1)
        hit = key_arr[pos] == X
        result[hit] = val_arr[pos[hit]]
    if has_nan and X.dtype.kind == "f":
        result[np.isnan(X)] = nan_value
    return result


def _object_array(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _cast_values(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype == object:
        return np.asarray(values, dtype=object)
    return np.asarray(values.tolist(), dtype=dtype).reshape(values.shape)


def _encoder_kind(attrs: dict[str, Any], prefix: str) -> tuple[str, Any]:
    """Which of the ``<prefix>_*`` attributes is set, and its value."""
    for kind in ("tensor", "strings", "int64s", "floats"):
        value = attrs.get(f"{prefix}_{kind}")
        if value is not None:
            return kind, value
    raise ValueError(f"LabelEncoder: none of the {prefix}_* attributes is set")


_KIND_DTYPE = {"strings": np.dtype(object), "int64s": np.dtype(np.int64),
               "floats": np.dtype(np.float32)}


def _encoder_out_dtype(attrs: dict[str, Any]) -> np.dtype:
    kind, value = _encoder_kind(attrs, "values")
    return value.dtype if kind == "tensor" else _KIND_DTYPE[kind]


def _label_encoder_infer(ctx: InferContext, x: ValueType | None, **attrs: Any) -> TensorType:
    """Y: X's shape; dtype of the values_* attribute (v1: string <-> int64 by X's dtype)."""
    if "classes_strings" in attrs:
        dt = dtype_of(x)
        out = None if dt is None else (DType.int64 if dt is DType.string else DType.string)
        return TensorType(out, shape_of(x))
    return TensorType(DType.from_numpy(_encoder_out_dtype(attrs)), shape_of(x))


@op("LabelEncoder", since=1, domain=ML, inputs=("X",), outputs=("Y",), infer=_label_encoder_infer,
    attrs=(Attr("classes_strings", "strings", (), "the labels; index i <-> classes_strings[i]"),
           Attr("default_int64", "int", -1, "output for a string not in the list"),
           Attr("default_string", "string", "_Unused", "output for an index out of range")))
def label_encoder_1(X, *, classes_strings, default_int64, default_string):
    """String -> int64 (position in classes_strings, else default_int64) for string X; int64 ->
    string (classes_strings[x], else default_string) for int64 X.  Y has X's shape."""
    if X.dtype.kind in "OUS":
        return _lookup(X, list(classes_strings), list(range(len(classes_strings))),
                       default_int64, np.dtype(np.int64))
    return _lookup(X.astype(np.int64), list(range(len(classes_strings))), list(classes_strings),
                   default_string, np.dtype(object))


_ENCODER_ATTRS_2 = (
    Attr("default_float", "float", -0.0, "output for a missing key when values are floats"),
    Attr("default_int64", "int", -1, "output for a missing key when values are int64s"),
    Attr("default_string", "string", "_Unused", "output for a missing key when values are strings"),
    Attr("keys_floats", "floats", None, "float keys"),
    Attr("keys_int64s", "ints", None, "int64 keys"),
    Attr("keys_strings", "strings", None, "string keys"),
    Attr("values_floats", "floats", None, "float values (output float32)"),
    Attr("values_int64s", "ints", None, "int64 values"),
    Attr("values_strings", "strings", None, "string values"),
)


def _label_encoder(X: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    _, keys = _encoder_kind(attrs, "keys")
    vkind, values = _encoder_kind(attrs, "values")
    out_dtype = _encoder_out_dtype(attrs)
    if attrs.get("default_tensor") is not None:
        default = np.asarray(attrs["default_tensor"]).reshape(-1)[0]
    elif vkind == "tensor":
        default = "_Unused" if out_dtype == object else (-0.0 if out_dtype.kind == "f" else -1)
    else:
        default = {"floats": attrs["default_float"], "int64s": attrs["default_int64"],
                   "strings": attrs["default_string"]}[vkind]
    keys = list(np.asarray(keys).reshape(-1).tolist()) if isinstance(keys, np.ndarray) else list(keys)
    values = list(np.asarray(values).reshape(-1).tolist()) if isinstance(values, np.ndarray) else list(values)
    return _lookup(X, keys, values, default, out_dtype)


@op("LabelEncoder", since=2, domain=ML, inputs=("X",), outputs=("Y",), infer=_label_encoder_infer,
    attrs=_ENCODER_ATTRS_2)
def label_encoder_2(X, *, default_float, default_int64, default_string, keys_floats, keys_int64s,
                    keys_strings, values_floats, values_int64s, values_strings):
    """Y[i] = values[j] where keys[j] == X[i] (the last duplicate key wins), else the default of
    the values' type.  Exactly one keys_* and one values_* attribute are set; X's dtype is the
    keys' (string, int64, float), Y's the values' (float values give float32).  NaN keys match
    NaN inputs.  Y has X's shape."""
    return _label_encoder(X, dict(locals()))


@op("LabelEncoder", since=4, domain=ML, inputs=("X",), outputs=("Y",), infer=_label_encoder_infer,
    attrs=_ENCODER_ATTRS_2 + (
        Attr("default_tensor", "tensor", None, "one-element default of the values' type"),
        Attr("keys_tensor", "tensor", None, "keys as a 1-D tensor of any supported type"),
        Attr("values_tensor", "tensor", None, "values as a 1-D tensor of any supported type")))
def label_encoder_4(X, *, default_float, default_int64, default_string, default_tensor,
                    keys_floats, keys_int64s, keys_strings, keys_tensor, values_floats,
                    values_int64s, values_strings, values_tensor):
    """As :func:`label_encoder_2`, with keys/values/default also given as tensors (string,
    int64, int32, int16, float, double); Y has values_tensor's dtype.  Without default_tensor the
    default is "_Unused", -1 or -0.0 by the values' type."""
    return _label_encoder(X, dict(locals()))


def _category_infer(ctx: InferContext, x: ValueType | None, **attrs: Any) -> TensorType:
    """Y: X's shape; int64 for string X, string for int64 X."""
    dt = dtype_of(x)
    out = None if dt is None else (DType.int64 if dt is DType.string else DType.string)
    return TensorType(out, shape_of(x))


@op("CategoryMapper", since=1, domain=ML, inputs=("X",), outputs=("Y",), infer=_category_infer,
    attrs=(Attr("cats_int64s", "ints", (), "the integers of the map"),
           Attr("cats_strings", "strings", (), "the strings of the map, parallel to cats_int64s"),
           Attr("default_int64", "int", -1, "output for an unknown string"),
           Attr("default_string", "string", "_Unused", "output for an unknown integer")))
def category_mapper(X, *, cats_int64s, cats_strings, default_int64, default_string):
    """String X -> int64 through cats_strings[i] -> cats_int64s[i]; int64 X -> string the other
    way; unknown inputs give the default.  Y has X's shape."""
    if X.dtype.kind in "OUS":
        return _lookup(X, list(cats_strings), list(cats_int64s), default_int64, np.dtype(np.int64))
    return _lookup(X, list(cats_int64s), list(cats_strings), default_string, np.dtype(object))


# --------------------------------------------------------------------------------------------
# simple transforms
# --------------------------------------------------------------------------------------------

def _afe_infer(ctx: InferContext, x: ValueType | None, y: ValueType | None) -> TensorType:
    """Z: X's leading dims + [number of indices]; a 1-D X gives [1, k]."""
    xs, ys = shape_of(x), shape_of(y)
    if xs is None or ys is None:
        return TensorType(dtype_of(x), None)
    k = 1
    for d in ys:
        k = k * d if isinstance(d, int) and isinstance(k, int) else None
    lead = (1,) if len(xs) == 1 else tuple(xs[:-1])
    return TensorType(dtype_of(x), lead + (k,))


@op("ArrayFeatureExtractor", since=1, domain=ML, inputs=("X", "Y"), outputs=("Z",), infer=_afe_infer)
def array_feature_extractor(X, Y):
    """Z = X[..., Y.ravel()]: select features on the last axis.  X: [..., F] (1-D X is one row,
    giving [1, k]); Y: int64 indices in [0, F).  Z keeps X's dtype."""
    index = Y.astype(np.int64).reshape(-1)
    if np.any((index < 0) | (index >= X.shape[-1])):
        raise IndexError(f"indices {index.tolist()} out of range for {X.shape[-1]} features")
    data = X.reshape(1, -1) if X.ndim == 1 else X
    return data[..., index]


@op("Binarizer", since=1, domain=ML, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("threshold", "float", 0.0, "values greater than this map to 1"),))
def binarizer(X, *, threshold):
    """Y = 1 where X > threshold else 0, in X's dtype (NaN gives 0)."""
    return np.where(X > threshold, 1, 0).astype(X.dtype)


@op("Normalizer", since=1, domain=ML, inputs=("X",), outputs=("Y",), infer=same_as(0, _F32),
    attrs=(Attr("norm", "string", "MAX", "MAX, L1 or L2"),))
def normalizer(X, *, norm):
    """Row-wise normalisation of X: [N, C] (or [C]) to float32::

        MAX: X / max(X)      L1: X / sum(|X|)      L2: X / sqrt(sum(X^2))

    A zero divisor leaves the row unchanged."""
    x = X.astype(np.float32)
    axis = -1
    if norm == "MAX":
        d = np.max(x, axis=axis, keepdims=True)
    elif norm == "L1":
        d = np.sum(np.abs(x), axis=axis, keepdims=True)
    elif norm == "L2":
        d = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    else:
        raise ValueError(f"Normalizer norm must be MAX, L1 or L2, got {norm!r}")
    return np.where(d == 0, x, x / np.where(d == 0, 1, d)).astype(np.float32)


@op("Scaler", since=1, domain=ML, inputs=("X",), outputs=("Y",), infer=same_as(0, _F32),
    attrs=(Attr("offset", "floats", (), "subtracted first (one value or one per feature)"),
           Attr("scale", "floats", (), "multiplied second (one value or one per feature)")))
def scaler(X, *, offset, scale):
    """Y = (X - offset) * scale in float32, offset/scale broadcast over the last axis."""
    off = np.asarray(offset or (0.0,), dtype=np.float32)
    sc = np.asarray(scale or (1.0,), dtype=np.float32)
    return ((X.astype(np.float32) - off) * sc).astype(np.float32)


@op("Imputer", since=1, domain=ML, inputs=("X",), outputs=("Y",), infer=same_as(0),
    attrs=(Attr("imputed_value_floats", "floats", None, "replacement(s) for float X"),
           Attr("imputed_value_int64s", "ints", None, "replacement(s) for integer X"),
           Attr("replaced_value_float", "float", 0.0, "float value to replace (NaN matches NaN)"),
           Attr("replaced_value_int64", "int", 0, "integer value to replace")))
def imputer(X, *, imputed_value_floats, imputed_value_int64s, replaced_value_float,
            replaced_value_int64):
    """Y = where(X == replaced, imputed, X); imputed is one value or one per feature (last axis).
    Float X uses the *_float(s) attributes (a NaN replaced value matches NaN), integer X the
    *_int64(s) ones.  Y keeps X's dtype."""
    if X.dtype.kind == "f":
        imputed, replaced = imputed_value_floats, replaced_value_float
        hit = np.isnan(X) if np.isnan(replaced) else X == replaced
    else:
        imputed, replaced = imputed_value_int64s, replaced_value_int64
        hit = X == replaced
    if not imputed:
        raise ValueError("Imputer needs imputed_value_floats or imputed_value_int64s")
    fill = np.asarray(imputed, dtype=X.dtype)
    if fill.size not in (1, X.shape[-1] if X.ndim else 1):
        raise ValueError(f"{fill.size} imputed values for {X.shape[-1]} features")
    return np.where(hit, fill, X).astype(X.dtype)


def _onehot_infer(ctx: InferContext, x: ValueType | None, **attrs: Any) -> TensorType:
    """Y: X's shape + [number of categories], float32."""
    xs = shape_of(x)
    n = len(attrs["cats_strings"] or attrs["cats_int64s"] or ())
    return TensorType(_F32, None if xs is None else tuple(xs) + (n,))


@op("OneHotEncoder", since=1, domain=ML, inputs=("X",), outputs=("Y",), infer=_onehot_infer,
    attrs=(Attr("cats_int64s", "ints", None, "integer categories"),
           Attr("cats_strings", "strings", None, "string categories"),
           flag("zeros", 1, "1: unknown category gives a zero row; 0: it is an error")))
def one_hot_encoder(X, *, cats_int64s, cats_strings, zeros):
    """Y[..., j] = 1.0 where X == cats[j] else 0.0; float32 of shape X.shape + [len(cats)].
    Numeric X is cast to int64 and matched against cats_int64s, strings against cats_strings."""
    if X.dtype.kind in "OUS":
        cats = np.asarray(list(cats_strings or ()), dtype=object)
        y = (np.asarray(X, dtype=object)[..., None] == cats).astype(np.float32)
    else:
        cats = np.asarray(list(cats_int64s or ()), dtype=np.int64)
        y = (X.astype(np.int64)[..., None] == cats).astype(np.float32)
    if not zeros and np.any(y.sum(axis=-1) == 0):
        raise ValueError("OneHotEncoder: an input is not among the categories and zeros=0")
    return y


def _fv_infer(ctx: InferContext, *xs: ValueType | None, **attrs: Any) -> TensorType:
    """Y: [N, sum(inputdimensions)], float32."""
    shapes = [shape_of(x) for x in xs]
    n = None if shapes[0] is None else (1 if len(shapes[0]) == 1 else shapes[0][0])
    dims = attrs["inputdimensions"]
    return TensorType(_F32, (n, sum(dims) if dims else None))


@op("FeatureVectorizer", since=1, domain=ML, inputs=("X...",), outputs=("Y",), infer=_fv_infer,
    attrs=(Attr("inputdimensions", "ints", (), "number of features taken from each input"),))
def feature_vectorizer(*X, inputdimensions):
    """Y = concat of the inputs along axis 1 as float32; input i ([N, C_i], 1-D as [1, C_i])
    contributes inputdimensions[i] columns (truncated, or padded with zeros)."""
    parts = []
    for x, width in zip(X, inputdimensions or [None] * len(X), strict=True):
        x2 = _as_2d(x).astype(np.float32)
        if width is not None:
            x2 = x2[:, :width]
            if x2.shape[1] < width:
                x2 = np.pad(x2, [(0, 0), (0, width - x2.shape[1])])
        parts.append(x2)
    return np.concatenate(parts, axis=1).astype(np.float32)


# --------------------------------------------------------------------------------------------
# post transforms (shared by the tree ensembles and the linear models)
# --------------------------------------------------------------------------------------------

def _erfinv(x: np.ndarray) -> np.ndarray:
    """erf^-1(x) in float64: Winitzki's closed form (|error| < 2e-3, what onnxruntime returns)
    refined by three Newton steps on erf (:func:`refmnn.ops._erf.erf64`, 1 ulp), each
    x <- x - (erf(x) - y) / (2 / sqrt(pi) exp(-x^2)), which leaves it within a few ulp.
    erf^-1(+-1) = +-inf, NaN outside [-1, 1]."""
    y = np.asarray(x, np.float64)
    sgn = np.where(y < 0, -1.0, 1.0)
    w = (1.0 - y) * (1.0 + y)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log = np.log(w)
        v = 2.0 / (np.pi * 0.147) + 0.5 * log
        r = sgn * np.sqrt(-v + np.sqrt(v * v - log / 0.147))
        inside = np.isfinite(r)
        r = np.where(inside, r, 0.0)
        for _ in range(3):
            r = r - (erf64(r) - y) / (2.0 / np.sqrt(np.pi) * np.exp(-r * r))
    return np.where(w == 0, sgn * np.inf, np.where(inside, r, np.nan))


def _post_transform(scores: np.ndarray, transform: str) -> np.ndarray:
    """Apply NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT to [N, C] scores (row-wise)."""
    s = scores.astype(np.float64)
    if transform == "NONE":
        out = s
    elif transform == "LOGISTIC":
        out = 1.0 / (1.0 + np.exp(-s))
    elif transform == "SOFTMAX":
        e = np.exp(s - np.max(s, axis=1, keepdims=True))
        out = e / np.sum(e, axis=1, keepdims=True)
    elif transform == "SOFTMAX_ZERO":
        # softmax over the non-zero entries; zero scores stay 0; an all-zero row gives 0.5s
        nonzero = np.abs(s) > 1e-7
        m = np.max(np.where(nonzero, s, -np.inf), axis=1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.where(nonzero, np.exp(s - m), 0.0)
        total = np.sum(e, axis=1, keepdims=True)
        out = np.where(total == 0, 0.5, e / np.where(total == 0, 1, total))
    elif transform == "PROBIT":
        out = np.sqrt(2.0) * _erfinv(2.0 * s - 1.0)
    else:
        raise ValueError(f"unknown post_transform {transform!r}")
    return out.astype(scores.dtype)


_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")


# --------------------------------------------------------------------------------------------
# tree ensembles
# --------------------------------------------------------------------------------------------

_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)


def _walk_trees(X: np.ndarray, roots: np.ndarray, root_is_leaf: np.ndarray, feature: np.ndarray,
                mode: np.ndarray, split: np.ndarray, true_id: np.ndarray, false_id: np.ndarray,
                true_leaf: np.ndarray, false_leaf: np.ndarray, missing_true: np.ndarray,
                members: dict[int, np.ndarray]) -> np.ndarray:
    """Descend every tree for every row at once; returns the leaf reached, shape [N, trees].

    X: [N, F] float64.  Node arrays are indexed by node position; a branch goes to
    ``true_id``/``false_id`` and lands on a leaf when ``true_leaf``/``false_leaf`` is set.
    """
    n = X.shape[0]
    cur = np.broadcast_to(roots, (n, roots.size)).copy()
    done = np.broadcast_to(root_is_leaf, (n, roots.size)).copy()
    rows = np.broadcast_to(np.arange(n)[:, None], cur.shape)
    for _ in range(mode.size + 1):
        if done.all():
            return cur
        r, node = rows[~done], cur[~done]
        x, t, m = X[r, feature[node]], split[node], mode[node]
        with np.errstate(invalid="ignore"):
            cond = np.select([m == _LEQ, m == _LT, m == _GTE, m == _GT, m == _EQ, m == _NEQ],
                             [x <= t, x < t, x >= t, x > t, x == t, x != t], False)
        for member_node, values in members.items():
            at = node == member_node
            cond[at] = np.isin(x[at], values)
        # a NaN feature takes the branch its missing_value_tracks_true flag names, whatever the
        # mode ('true' if 1, 'false' if 0): x != t alone would send it to 'true'
        cond = np.where(np.isnan(x), missing_true[node], cond)
        nxt = np.where(cond, true_id[node], false_id[node])
        leaf = np.where(cond, true_leaf[node], false_leaf[node])
        cur[~done], done[~done] = nxt, leaf
    raise ValueError("tree ensemble: a tree has a cycle")


def _aggregate(leaves: np.ndarray, leaf_target: np.ndarray, leaf_weight: np.ndarray,
               n_leaves: int, n_targets: int, how: str) -> np.ndarray:
    """Combine the weights of the leaves reached ([N, trees]) per target; [N, n_targets] float64.

    A leaf may carry several (target, weight) votes.  SUM/AVERAGE add them (AVERAGE divides by
    the number of trees); MIN/MAX take the extreme vote; a target no leaf voted for is 0.
    """
    has = np.zeros((n_leaves, n_targets), dtype=bool)
    has[leaf_target[0], leaf_target[1]] = True
    if how in ("SUM", "AVERAGE"):
        table = np.zeros((n_leaves, n_targets))
        np.add.at(table, tuple(leaf_target), leaf_weight)
        out = table[leaves].sum(axis=1)
        return out / leaves.shape[1] if how == "AVERAGE" else out
    fill = np.inf if how == "MIN" else -np.inf
    table = np.full((n_leaves, n_targets), fill)
    (np.minimum if how == "MIN" else np.maximum).at(table, tuple(leaf_target), leaf_weight)
    picked = table[leaves]
    out = picked.min(axis=1) if how == "MIN" else picked.max(axis=1)
    return np.where(has[leaves].any(axis=1), out, 0.0)


def _tree_ensemble_infer(ctx: InferContext, x: ValueType | None, **attrs: Any) -> TensorType:
    """Y: [N, n_targets] in X's dtype."""
    xs = shape_of(x)
    return TensorType(dtype_of(x), (None if xs is None else xs[0], attrs["n_targets"]))


@op("TreeEnsemble", since=5, domain=ML, inputs=("X",), outputs=("Y",), infer=_tree_ensemble_infer,
    attrs=(Attr("aggregate_function", "int", 1, "0 AVERAGE, 1 SUM, 2 MIN, 3 MAX"),
           Attr("leaf_targetids", "ints", doc="target of each leaf"),
           Attr("leaf_weights", "tensor", doc="weight of each leaf"),
           Attr("membership_values", "tensor", None, "sets of BRANCH_MEMBER nodes, NaN-separated"),
           Attr("n_targets", "int", None, "number of targets (output columns)"),
           Attr("nodes_falseleafs", "ints", doc="1 when the false branch is a leaf index"),
           Attr("nodes_falsenodeids", "ints", doc="false branch: node or leaf index"),
           Attr("nodes_featureids", "ints", doc="feature compared at each node"),
           Attr("nodes_hitrates", "tensor", None, "node popularity (ignored)"),
           Attr("nodes_missing_value_tracks_true", "ints", None, "1: NaN takes the true branch"),
           Attr("nodes_modes", "tensor", doc="uint8: 0 LEQ 1 LT 2 GTE 3 GT 4 EQ 5 NEQ 6 MEMBER"),
           Attr("nodes_splits", "tensor", doc="threshold of each node"),
           Attr("nodes_trueleafs", "ints", doc="1 when the true branch is a leaf index"),
           Attr("nodes_truenodeids", "ints", doc="true branch: node or leaf index"),
           Attr("post_transform", "int", 0, "0 NONE 1 SOFTMAX 2 LOGISTIC 3 SOFTMAX_ZERO 4 PROBIT"),
           Attr("tree_roots", "ints", doc="node index of each tree's root")))
def tree_ensemble(X, *, aggregate_function, leaf_targetids, leaf_weights, membership_values,
                  n_targets, nodes_falseleafs, nodes_falsenodeids, nodes_featureids,
                  nodes_hitrates, nodes_missing_value_tracks_true, nodes_modes, nodes_splits,
                  nodes_trueleafs, nodes_truenodeids, post_transform, tree_roots):
    """Evaluate a tree ensemble: X [N, F] -> Y [N, n_targets] in X's dtype.

    Each tree starts at ``tree_roots[t]``; node i compares x = X[n, featureids[i]] with
    ``splits[i]`` by its mode (x <= s, x < s, x >= s, x > s, x == s, x != s, or x in its set for
    BRANCH_MEMBER; sets are ``membership_values`` split at NaNs, in node order) and follows the
    true or false branch; a NaN x takes the true branch when missing_value_tracks_true[i] is 1
    (else comparisons with NaN are false).  A root whose two branches are the same leaf is a
    one-leaf tree.  The leaves reached add ``leaf_weights`` to ``leaf_targetids`` per
    ``aggregate_function`` (a target with no vote is 0 for MIN/MAX), then ``post_transform``.
    """
    modes = np.asarray(nodes_modes).astype(np.int64).reshape(-1)
    members: dict[int, np.ndarray] = {}
    if np.any(modes == _MEMBER):
        if membership_values is None:
            raise ValueError("BRANCH_MEMBER nodes need membership_values")
        values = np.asarray(membership_values, dtype=np.float64).reshape(-1)
        cuts = np.flatnonzero(np.isnan(values))
        sets = np.split(values, cuts)
        sets = [s[~np.isnan(s)] for s in sets]
        for k, node in enumerate(np.flatnonzero(modes == _MEMBER)):
            members[int(node)] = sets[k]
    roots = np.asarray(tree_roots, dtype=np.int64)
    tl, fl = np.asarray(nodes_trueleafs, bool), np.asarray(nodes_falseleafs, bool)
    ti, fi = np.asarray(nodes_truenodeids, np.int64), np.asarray(nodes_falsenodeids, np.int64)
    root_is_leaf = tl[roots] & fl[roots] & (ti[roots] == fi[roots])
    roots = np.where(root_is_leaf, ti[roots], roots)
    missing = np.zeros(modes.size, bool) if nodes_missing_value_tracks_true is None else \
        np.asarray(nodes_missing_value_tracks_true, bool)
    x = _as_2d(X).astype(np.float64)
    leaves = _walk_trees(x, roots, root_is_leaf, np.asarray(nodes_featureids, np.int64), modes,
                         np.asarray(nodes_splits, np.float64).reshape(-1), ti, fi, tl, fl, missing,
                         members)
    weights = np.asarray(leaf_weights, np.float64).reshape(-1)
    targets = np.asarray(leaf_targetids, np.int64)
    n_out = n_targets if n_targets is not None else int(targets.max()) + 1
    votes = np.stack([np.arange(weights.size), targets])
    scores = _aggregate(leaves, votes, weights, weights.size, n_out,
                        _AGGREGATES[aggregate_function])
    return _post_transform(scores, _TRANSFORMS[post_transform]).astype(X.dtype)


_REGRESSOR_ATTRS = (
    Attr("aggregate_function", "string", "SUM", "AVERAGE, SUM, MIN or MAX"),
    Attr("base_values", "floats", None, "added to each target's score after aggregation"),
    Attr("n_targets", "int", None, "number of targets"),
    Attr("nodes_falsenodeids", "ints", None, "node id of the false branch"),
    Attr("nodes_featureids", "ints", None, "feature compared at each node"),
    Attr("nodes_hitrates", "floats", None, "node popularity (ignored)"),
    Attr("nodes_missing_value_tracks_true", "ints", None, "1: NaN takes the true branch"),
    Attr("nodes_modes", "strings", None, "BRANCH_LEQ/LT/GTE/GT/EQ/NEQ or LEAF"),
    Attr("nodes_nodeids", "ints", None, "id of each node within its tree"),
    Attr("nodes_treeids", "ints", None, "tree of each node"),
    Attr("nodes_truenodeids", "ints", None, "node id of the true branch"),
    Attr("nodes_values", "floats", None, "threshold of each node"),
    Attr("post_transform", "string", "NONE", "NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT"),
    Attr("target_ids", "ints", None, "target of each leaf vote"),
    Attr("target_nodeids", "ints", None, "leaf node id of each vote"),
    Attr("target_treeids", "ints", None, "tree of each vote"),
    Attr("target_weights", "floats", None, "weight of each vote"),
)
_REGRESSOR_TENSOR_ATTRS = (
    Attr("base_values_as_tensor", "tensor", None, "base_values as a (double) tensor"),
    Attr("nodes_hitrates_as_tensor", "tensor", None, "nodes_hitrates as a tensor (ignored)"),
    Attr("nodes_values_as_tensor", "tensor", None, "nodes_values as a (double) tensor"),
    Attr("target_weights_as_tensor", "tensor", None, "target_weights as a (double) tensor"),
)
_MODE_NAMES = {"BRANCH_LEQ": _LEQ, "BRANCH_LT": _LT, "BRANCH_GTE": _GTE, "BRANCH_GT": _GT,
               "BRANCH_EQ": _EQ, "BRANCH_NEQ": _NEQ, "LEAF": -1}


def _pick(a: Any, b: Any) -> np.ndarray | None:
    value = b if b is not None else a
    return None if value is None else np.asarray(value, np.float64).reshape(-1)


def _tree_regressor(X: np.ndarray, a: dict[str, Any]) -> np.ndarray:
    """Old-style (tree id, node id) ensemble, scored as :func:`tree_ensemble`; float32 [N, targets]."""
    tree_ids, node_ids = list(a["nodes_treeids"]), list(a["nodes_nodeids"])
    where = {(t, n): i for i, (t, n) in enumerate(zip(tree_ids, node_ids, strict=True))}
    modes = np.array([_MODE_NAMES[m] for m in a["nodes_modes"]], np.int64)
    is_leaf = modes < 0
    ti = np.array([where.get((t, c), 0) for t, c in zip(tree_ids, a["nodes_truenodeids"], strict=True)])
    fi = np.array([where.get((t, c), 0) for t, c in zip(tree_ids, a["nodes_falsenodeids"], strict=True)])
    trees = list(dict.fromkeys(tree_ids))
    children = {(tree_ids[i], int(c)) for i in np.flatnonzero(~is_leaf) for c in (ti[i], fi[i])}
    roots = np.array([next(i for i, t in enumerate(tree_ids) if t == tree and (tree, i) not in children)
                      for tree in trees], np.int64)
    missing = np.zeros(modes.size, bool) if a["nodes_missing_value_tracks_true"] is None else \
        np.asarray(a["nodes_missing_value_tracks_true"], bool)
    splits = _pick(a["nodes_values"], a.get("nodes_values_as_tensor"))
    x = _as_2d(X).astype(np.float64)
    leaves = _walk_trees(x, roots, is_leaf[roots], np.asarray(a["nodes_featureids"], np.int64),
                         modes, splits if splits is not None else np.zeros(modes.size), ti, fi,
                         is_leaf[ti], is_leaf[fi], missing, {})
    weights = _pick(a["target_weights"], a.get("target_weights_as_tensor"))
    if weights is None:  # every target_* attribute is optional: an ensemble without votes
        weights = np.zeros(0)
    vote_nodes = [where[(t, n)] for t, n in zip(a["target_treeids"] or (),
                                                a["target_nodeids"] or (), strict=True)]
    targets = np.asarray(a["target_ids"] or (), np.int64)
    n_out = a["n_targets"] or (int(targets.max()) + 1 if targets.size else 1)
    scores = _aggregate(leaves, np.stack([np.asarray(vote_nodes, np.int64), targets]), weights,
                        modes.size, n_out, a["aggregate_function"])
    base = _pick(a["base_values"], a.get("base_values_as_tensor"))
    if base is not None:
        scores = scores + base
    return _post_transform(scores, a["post_transform"]).astype(np.float32)


def _regressor_infer(ctx: InferContext, x: ValueType | None, **attrs: Any) -> TensorType:
    """Y: [N, n_targets] float32."""
    xs = shape_of(x)
    return TensorType(_F32, (None if xs is None else xs[0], attrs["n_targets"]))


@op("TreeEnsembleRegressor", since=1, domain=ML, inputs=("X",), outputs=("Y",),
    infer=_regressor_infer, attrs=_REGRESSOR_ATTRS)
def tree_ensemble_regressor_1(X, *, aggregate_function, base_values, n_targets,
                              nodes_falsenodeids, nodes_featureids, nodes_hitrates,
                              nodes_missing_value_tracks_true, nodes_modes, nodes_nodeids,
                              nodes_treeids, nodes_truenodeids, nodes_values, post_transform,
                              target_ids, target_nodeids, target_treeids, target_weights):
    """Tree ensemble regression, trees given as (tree id, node id) tuples; nodes with mode LEAF
    carry votes (target_treeids/nodeids/ids/weights).  Scored as TreeEnsemble-5 (root: the node
    of each tree no other node points to), base_values added after aggregation, then
    post_transform.  Y: [N, n_targets] float32."""
    return _tree_regressor(X, dict(locals()))


@op("TreeEnsembleRegressor", since=3, domain=ML, inputs=("X",), outputs=("Y",),
    infer=_regressor_infer, attrs=_REGRESSOR_ATTRS + _REGRESSOR_TENSOR_ATTRS)
def tree_ensemble_regressor_3(X, *, aggregate_function, base_values, base_values_as_tensor,
                              n_targets, nodes_falsenodeids, nodes_featureids, nodes_hitrates,
                              nodes_hitrates_as_tensor, nodes_missing_value_tracks_true,
                              nodes_modes, nodes_nodeids, nodes_treeids, nodes_truenodeids,
                              nodes_values, nodes_values_as_tensor, post_transform, target_ids,
                              target_nodeids, target_treeids, target_weights,
                              target_weights_as_tensor):
    """As :func:`tree_ensemble_regressor_1`; the ``*_as_tensor`` attributes (double precision)
    replace their float-list counterparts when given."""
    return _tree_regressor(X, dict(locals()))


@op("LinearRegressor", since=1, domain=ML, inputs=("X",), outputs=("Y",),
    infer=lambda ctx, x, **a: TensorType(_F32, (None if shape_of(x) is None else shape_of(x)[0],
                                                 a["targets"])),
    attrs=(Attr("coefficients", "floats", (), "targets x features weights, row-major"),
           Attr("intercepts", "floats", None, "one per target"),
           Attr("post_transform", "string", "NONE", "NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT"),
           Attr("targets", "int", 1, "number of targets")))
def linear_regressor(X, *, coefficients, intercepts, post_transform, targets):
    """Y = post_transform(X @ W^T + b): X [N, F] (1-D: one row), W [targets, F] from
    ``coefficients``, b = intercepts (or 0).  Y: [N, targets] float32."""
    x = _as_2d(X).astype(np.float64)
    w = np.asarray(coefficients, np.float64).reshape(targets, -1)
    y = x @ w.T
    if intercepts:
        y = y + np.asarray(intercepts, np.float64)
    return _post_transform(y, post_transform).astype(np.float32)


OPS = (array_feature_extractor, binarizer, label_encoder_1, label_encoder_2, label_encoder_4,
       category_mapper, normalizer, scaler, imputer, one_hot_encoder, feature_vectorizer,
       tree_ensemble, tree_ensemble_regressor_1, tree_ensemble_regressor_3, linear_regressor)
