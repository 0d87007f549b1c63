"""Reductions: ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSum/LogSumExp, ArgMax/ArgMin,
CumSum and CumProd.

Every Reduce* op exists in two schemas:

* the *attribute* form (opset 1 up to 12 for ReduceSum, up to 17 for the others): ``axes`` is an
  attribute; missing or empty means "all axes";
* the *input* form (ReduceSum-13, the others 18): ``axes`` is an optional int64 input and
  ``noop_with_empty_axes`` decides what a missing/empty list means: all axes (0, the default)
  or none, in which case the reduction is the identity but the element-wise steps of the
  composite reductions still apply (ReduceSumSquare gives X*X, ReduceLogSum log(X), ...).

Negative axes count from the back (accepted at every version; opset 1-10 only listed
non-negative ones). ``keepdims`` (default 1) keeps reduced axes as size 1. Rank-0 inputs are
valid: there is nothing to reduce and the result is the (mapped) input.

Element types: the result has the input's dtype. float16/bfloat16 accumulate in float32 and
round once; integers accumulate in their own width and wrap on overflow (two's complement).

Reductions over an empty set (a reduced axis of size 0) give the identity of the reduction:
ReduceSum/SumSquare/L1/L2 0, ReduceProd 1, ReduceMax -inf (the dtype's minimum for integers,
False for bool), ReduceMin +inf (the dtype's maximum, True for bool), ReduceLogSum and
ReduceLogSumExp -inf, ReduceMean NaN (0/0) for floats. NaN propagates through every
reduction, ReduceMax/ReduceMin included.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType
from refmnn.ops._infer import same_as
from refmnn.ops._reduction_util import check_axes, reduce_axes_from, reduced_shape_rule, to_work
from refmnn.ops._schema import Attr, InferContext, OpDef, flag, op

Axes = tuple[int, ...]
Kernel = Callable[[np.ndarray, Axes, bool], np.ndarray]


# --- kernels: (x in its working dtype, axes, keepdims) -> reduced array ------------------------

def _lowest(dtype: np.dtype) -> object:
    if dtype == np.bool_:
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return -np.inf


def _highest(dtype: np.dtype) -> object:
    if dtype == np.bool_:
        return True
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return np.inf


def _sum(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    return np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _mean(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    count = math.prod(x.shape[a] for a in axes)
    total = _sum(x, axes, keepdims)
    if x.dtype.kind in "iu":
        # integer mean: wrapped integer sum, divided with truncation toward zero
        if count == 0:
            return np.zeros_like(total)
        quotient = np.abs(total) // count
        return np.where(total < 0, -quotient, quotient).astype(x.dtype)
    return total / x.dtype.type(count)


def _max(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    return np.max(x, axis=axes, keepdims=keepdims, initial=_lowest(x.dtype))


def _min(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    return np.min(x, axis=axes, keepdims=keepdims, initial=_highest(x.dtype))


def _prod(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    return np.prod(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _sum_square(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    return _sum(x * x, axes, keepdims)


def _l1(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    return _sum(np.abs(x), axes, keepdims)


def _l2(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    return np.sqrt(_sum(x * x, axes, keepdims))


def _log_sum(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    return np.log(_sum(x, axes, keepdims))


def _log_sum_exp(x: np.ndarray, axes: Axes, keepdims: bool) -> np.ndarray:
    if x.dtype.kind in "iu":
        x = x.astype(np.float64)
    # shift by the maximum so exp cannot overflow; an infinite or NaN maximum shifts by 0
    peak = _max(x, axes, True)
    peak = np.where(np.isfinite(peak), peak, 0).astype(x.dtype)
    total = np.sum(np.exp(x - peak), axis=axes, keepdims=True, dtype=x.dtype)
    result = np.log(total) + peak
    return result if keepdims else np.squeeze(result, axis=axes)


def _reduce(data: np.ndarray, axes: Axes, keepdims: int, kernel: Kernel) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        result = kernel(to_work(data), axes, bool(keepdims))
    return np.asarray(result).astype(data.dtype, copy=False)


# --- op builders: one attribute-axes and one input-axes version per Reduce* op ---------------

_EMPTY = {
    "ReduceSum": "0", "ReduceMean": "NaN for floats, 0 for integers", "ReduceMax":
    "-inf (integers: the dtype's minimum; bool: False)", "ReduceMin":
    "+inf (integers: the dtype's maximum; bool: True)", "ReduceProd": "1",
    "ReduceSumSquare": "0", "ReduceL1": "0", "ReduceL2": "0", "ReduceLogSum": "-inf",
    "ReduceLogSumExp": "-inf",
}


def _attr_rule(ctx: InferContext, data: TensorType | None, *, axes: tuple[int, ...] | None,
               keepdims: int) -> TensorType:
    return reduced_shape_rule(ctx, data, axes, True, keepdims, 0)


def _input_rule(ctx: InferContext, data: TensorType | None, axes_type: TensorType | None = None,
                *, keepdims: int, noop_with_empty_axes: int) -> TensorType:
    has_axes = len(ctx.node.inputs) > 1 and bool(ctx.node.inputs[1])
    value = ctx.value(1) if has_axes else None
    known = not has_axes or value is not None
    return reduced_shape_rule(ctx, data, value, known, keepdims, noop_with_empty_axes)


def _attr_form(name: str, formula: str, kernel: Kernel) -> OpDef:
    def reduce_attr(data: np.ndarray, *, axes: tuple[int, ...] | None, keepdims: int) -> np.ndarray:
        # data: any shape -> reduced shape
        return _reduce(data, reduce_axes_from(data.ndim, axes, 0), keepdims, kernel)

    reduce_attr.__doc__ = (
        f"{name} (opset 1-{12 if name == 'ReduceSum' else 17}): reduced = {formula} over "
        "``axes``.\n\n"
        "axes: attribute; missing or empty reduces over all axes (negative axes count from the\n"
        "back). keepdims: keep reduced axes as size 1 (default 1).\n"
        f"Result dtype = input dtype. Empty set: {_EMPTY[name]}. NaN propagates."
    )
    return op(name, since=1, inputs=("data",), outputs=("reduced",), infer=_attr_rule,
              attrs=(Attr("axes", "ints", None, "axes to reduce; all when absent"),
                     flag("keepdims", 1, "keep reduced axes as size 1")))(reduce_attr)


def _input_form(name: str, since: int, formula: str, kernel: Kernel) -> OpDef:
    def reduce_input(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int,
                     noop_with_empty_axes: int) -> np.ndarray:
        # data: any shape; axes: int64 [k] or None -> reduced shape
        chosen = reduce_axes_from(data.ndim, axes, noop_with_empty_axes)
        return _reduce(data, chosen, keepdims, kernel)

    reduce_input.__doc__ = (
        f"{name} (opset {since}+): reduced = {formula} over the axes listed by input ``axes``.\n\n"
        "axes: optional int64 1-D input; missing or empty reduces over all axes, or over none\n"
        "(identity of the reduction step, element-wise steps still applied) when\n"
        "noop_with_empty_axes=1. keepdims: keep reduced axes as size 1 (default 1).\n"
        f"Result dtype = input dtype. Empty set: {_EMPTY[name]}. NaN propagates."
    )
    return op(name, since=since, inputs=("data", "axes?"), outputs=("reduced",),
              infer=_input_rule, value_inputs=(1,),
              attrs=(flag("keepdims", 1, "keep reduced axes as size 1"),
                     flag("noop_with_empty_axes", 0,
                          "empty/missing axes: 0 reduces all axes, 1 reduces none")))(reduce_input)


_REDUCTIONS: tuple[tuple[str, int, str, Kernel], ...] = (
    ("ReduceSum", 13, "sum(data)", _sum),
    ("ReduceMean", 18, "sum(data) / count (integers: truncated toward zero)", _mean),
    ("ReduceMax", 18, "max(data) (bool: any; False < True)", _max),
    ("ReduceMin", 18, "min(data) (bool: all)", _min),
    ("ReduceProd", 18, "prod(data)", _prod),
    ("ReduceSumSquare", 18, "sum(data * data)", _sum_square),
    ("ReduceL1", 18, "sum(|data|)", _l1),
    ("ReduceL2", 18, "sqrt(sum(data * data)) (integers: truncated)", _l2),
    ("ReduceLogSum", 18, "log(sum(data))", _log_sum),
    ("ReduceLogSumExp", 18,
     "log(sum(exp(data))), computed stably as m + log(sum(exp(data - m))) with m = max(data)",
     _log_sum_exp),
)

REDUCE_OPS: tuple[OpDef, ...] = tuple(
    opdef for name, since, formula, kernel in _REDUCTIONS
    for opdef in (_attr_form(name, formula, kernel), _input_form(name, since, formula, kernel))
)


# --- ArgMax / ArgMin ------------------------------------------------------------------------

def _arg(data: np.ndarray, axis: int, keepdims: int, select_last_index: int,
         pick: Callable[..., np.ndarray]) -> np.ndarray:
    (axis,) = check_axes([axis], data.ndim) if data.ndim else (0,)
    x = to_work(data)
    if x.ndim == 0:
        x = x.reshape(1)
    if select_last_index:
        index = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis, keepdims=True)
    else:
        index = pick(x, axis=axis, keepdims=True)
    index = index.astype(np.int64)
    if data.ndim == 0:
        return index.reshape(())
    return index if keepdims else np.squeeze(index, axis=axis)


def _arg_rule(ctx: InferContext, data: TensorType | None, *, axis: int, keepdims: int,
              select_last_index: int = 0) -> TensorType:
    return reduced_shape_rule(ctx, data, [axis], True, keepdims, 0, dtype=DType.int64)


_ARG_ATTRS = (Attr("axis", "int", 0, "axis to reduce; negative counts from the back"),
              flag("keepdims", 1, "keep the reduced axis as size 1"))
_LAST = flag("select_last_index", 0, "on ties pick the last index instead of the first")


@op("ArgMax", since=1, inputs=("data",), outputs=("reduced",), infer=_arg_rule, attrs=_ARG_ATTRS)
def argmax_1(data: np.ndarray, *, axis: int, keepdims: int) -> np.ndarray:
    """reduced = index of the maximum of ``data`` along ``axis`` (first one on ties), int64.

    data: any shape, numeric. keepdims keeps the axis as size 1. NaN counts as the maximum
    (the first NaN wins). An empty axis is an error.
    """
    return _arg(data, axis, keepdims, 0, np.argmax)


@op("ArgMax", since=12, inputs=("data",), outputs=("reduced",), infer=_arg_rule,
    attrs=(*_ARG_ATTRS, _LAST))
def argmax_12(data: np.ndarray, *, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
    """ArgMax-12: as ArgMax-1, plus ``select_last_index`` (ties give the last index). int64."""
    return _arg(data, axis, keepdims, select_last_index, np.argmax)


@op("ArgMin", since=1, inputs=("data",), outputs=("reduced",), infer=_arg_rule, attrs=_ARG_ATTRS)
def argmin_1(data: np.ndarray, *, axis: int, keepdims: int) -> np.ndarray:
    """reduced = index of the minimum of ``data`` along ``axis`` (first one on ties), int64.

    data: any shape, numeric. keepdims keeps the axis as size 1. NaN counts as the minimum
    (the first NaN wins). An empty axis is an error.
    """
    return _arg(data, axis, keepdims, 0, np.argmin)


@op("ArgMin", since=12, inputs=("data",), outputs=("reduced",), infer=_arg_rule,
    attrs=(*_ARG_ATTRS, _LAST))
def argmin_12(data: np.ndarray, *, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
    """ArgMin-12: as ArgMin-1, plus ``select_last_index`` (ties give the last index). int64."""
    return _arg(data, axis, keepdims, select_last_index, np.argmin)


# --- CumSum / CumProd -------------------------------------------------------------------------

def _cumulate(x: np.ndarray, axis: np.ndarray, exclusive: int, reverse: int,
              ufunc: np.ufunc, identity: int) -> np.ndarray:
    (ax,) = check_axes([int(np.asarray(axis).reshape(-1)[0])], x.ndim)
    w = to_work(x)
    if reverse:
        w = np.flip(w, ax)
    with np.errstate(over="ignore", invalid="ignore"):
        y = ufunc.accumulate(w, axis=ax, dtype=w.dtype)
    if exclusive and y.shape[ax] > 0:
        y = np.roll(y, 1, axis=ax)
        first = [slice(None)] * y.ndim
        first[ax] = 0
        y[tuple(first)] = identity
    if reverse:
        y = np.flip(y, ax)
    return y.astype(x.dtype, copy=False)


_CUM_ATTRS = (flag("exclusive", 0, "1: element j excludes x[j] itself"),
              flag("reverse", 0, "1: accumulate from the end of the axis"))


@op("CumSum", since=11, inputs=("x", "axis"), outputs=("y",), infer=same_as(0), attrs=_CUM_ATTRS)
def cumsum(x: np.ndarray, axis: np.ndarray, *, exclusive: int, reverse: int) -> np.ndarray:
    """y[..., j, ...] = sum of x[..., i, ...] for i <= j along ``axis`` (i < j if exclusive;
    i >= j / i > j when reverse).

    x: any shape (rank >= 1), numeric; axis: int32/int64 scalar (or 1-element) tensor in
    [-rank, rank). Integers wrap on overflow; float16/bfloat16 accumulate in float32.
    Exclusive positions with nothing before them are 0.
    """
    return _cumulate(x, axis, exclusive, reverse, np.add, 0)


@op("CumProd", since=26, inputs=("x", "axis"), outputs=("y",), infer=same_as(0), attrs=_CUM_ATTRS)
def cumprod(x: np.ndarray, axis: np.ndarray, *, exclusive: int, reverse: int) -> np.ndarray:
    """y[..., j, ...] = product of x[..., i, ...] for i <= j along ``axis`` (i < j if exclusive;
    i >= j / i > j when reverse).

    x: any shape (rank >= 1), numeric; axis: int32/int64 scalar tensor in [-rank, rank).
    Integers wrap on overflow; float16/bfloat16 accumulate in float32. Exclusive positions
    with nothing before them are 1.
    """
    return _cumulate(x, axis, exclusive, reverse, np.multiply, 1)


OPS = (*REDUCE_OPS, argmax_1, argmax_12, argmin_1, argmin_12, cumsum, cumprod)
