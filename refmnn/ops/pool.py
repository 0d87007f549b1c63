"""Pooling ops: MaxPool, AveragePool, LpPool, their Global forms, MaxUnpool, MaxRoiPool.

All windowed pools are rank-generic and share the geometry of :mod:`refmnn.ops._window`
(kernel_shape, strides, dilations, pads, auto_pad, ceil_mode and the output-size rules).

How a pool is computed
----------------------
A pool reduces every window of the padded input to one number. Rather than materialising the
windows (``N x C x out x K`` values) and reducing over them, each op walks the ``K`` taps of the
kernel and folds one strided *view* of the padded input per tap into the result::

    Y = reduce over taps t of  Xp[:, :, t*d : t*d + s*(out-1) + 1 : s]      (K passes, no copy)

For a 3x3 max pool that is 9 ``np.maximum`` calls over the output tensor: each pass streams
through memory once, while a reduction over a (..., 3, 3) window view makes NumPy walk the
tiny trailing axes element by element (about 20x slower for ResNet's stem pool). The loop runs
over kernel taps, never over elements.

Padding is filled with the reduction's neutral value: -inf (the dtype's minimum for integers)
for max, 0 for sums. The ``ceil_mode`` overhang past the end padding is filled the same way and
is never counted as padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType
from refmnn.ops import _window as win
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._reduction_util import mean_along
from refmnn.ops._schema import Attr, InferContext, flag, op

# -- shared attributes ------------------------------------------------------------------------

_AUTO_PAD = Attr("auto_pad", "string", "NOTSET",
                 "NOTSET: use pads; VALID: no padding; SAME_UPPER/SAME_LOWER: out = "
                 "ceil(in / stride), odd padding at the end (UPPER) or beginning (LOWER)")
_KERNEL = Attr("kernel_shape", "ints", doc="window size per spatial axis")
_PADS = Attr("pads", "ints", None, "[x1_begin, x2_begin, ..., x1_end, x2_end, ...] (default 0)")
_STRIDES = Attr("strides", "ints", None, "window step per spatial axis (default 1)")
_CEIL = flag("ceil_mode", 0, "1: round the output size up (a window may overhang)")
_DILATIONS = Attr("dilations", "ints", None, "spacing between window taps (default 1)")
_STORAGE = flag("storage_order", 0,
                "Indices layout of the spatial axes: 0 row-major, 1 column-major")
_COUNT_PAD = flag("count_include_pad", 0, "1: the divisor counts padding taps too")
BASE_ATTRS = (_AUTO_PAD, _KERNEL, _PADS, _STRIDES)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16 / bfloat16 average in float32 and round once; float32 and float64 in themselves."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _geometry(x: np.ndarray, kernel_shape: Sequence[int], strides: Sequence[int] | None,
              dilations: Sequence[int] | None, pads: Sequence[int] | None, auto_pad: str,
              ceil_mode: int) -> win.Geometry:
    return win.geometry(x.shape[2:], tuple(kernel_shape), strides, dilations, pads, auto_pad,
                        bool(ceil_mode))


def _padded(x: np.ndarray, geom: win.Geometry, value: Any) -> np.ndarray:
    """x padded by the pads and the ceil_mode overhang, all filled with ``value``."""
    end = [e + extra for e, extra in zip(geom.pads_end, geom.extra_end(x.shape[2:]), strict=True)]
    return win.pad(x, geom.pads_begin, end, value)


def _fold(xp: np.ndarray, geom: win.Geometry, combine: Any) -> np.ndarray:
    """Fold the K tap views of ``xp`` with the in-place binary ufunc ``combine``."""
    result = None
    for offset in win.tap_offsets(geom.kernel):
        view = win.tap(xp, geom, offset)
        if result is None:
            result = view.copy()
        else:
            combine(result, view, out=result)
    assert result is not None
    return result


def _pool_rule(ctx: InferContext, x: TensorType | None, *rest: Any,
               **attrs: Any) -> TensorType | tuple[TensorType, TensorType]:
    """(N, C, *out) with the window rules; a second int64 output (Indices) of the same shape."""
    shape = shape_of(x)
    dims = None
    if shape is not None:
        dims = (shape[0], shape[1], *win.output_dims(
            shape[2:], attrs["kernel_shape"], attrs.get("strides"), attrs.get("dilations"),
            attrs.get("pads"), attrs.get("auto_pad", "NOTSET"), bool(attrs.get("ceil_mode", 0))))
    y = TensorType(dtype_of(x), dims)
    if ctx.num_outputs > 1:
        return y, TensorType(DType.int64, dims)
    return y


# -- MaxPool ------------------------------------------------------------------------------------

def _lowest(dtype: np.dtype) -> Any:
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else -np.inf


def _max_pool(X: np.ndarray, geom: win.Geometry, storage_order: int,
              want_indices: bool) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    compute = X.dtype if X.dtype.kind in "iuf" else np.dtype(np.float32)  # bfloat16: float32
    xp = _padded(X.astype(compute, copy=False), geom, _lowest(np.dtype(compute)))
    y = _fold(xp, geom, np.maximum)
    if not want_indices:
        return y.astype(X.dtype, copy=False)
    return y.astype(X.dtype, copy=False), _argmax_indices(X, xp, y, geom, storage_order)


def _argmax_indices(X: np.ndarray, xp: np.ndarray, y: np.ndarray, geom: win.Geometry,
                    storage_order: int) -> np.ndarray:
    """Flat index into X of the first tap (kernel row-major order) holding each window's max.

    index = (n * C + c) * prod(spatial) + position, with position row-major over the spatial
    axes (storage_order 0) or column-major (storage_order 1, first axis fastest). Taps in the
    padding are never chosen; a NaN maximum points at the first NaN.
    """
    spatial = X.shape[2:]
    rank = len(spatial)
    order = range(rank) if storage_order == 0 else range(rank - 1, -1, -1)
    place = np.ones(rank, dtype=np.int64)
    step = 1
    for axis in reversed(list(order)):
        place[axis] = step
        step *= spatial[axis]
    found = np.zeros(y.shape, dtype=bool)
    index = np.zeros(y.shape, dtype=np.int64)
    nan_max = np.isnan(y) if y.dtype.kind == "f" else None
    for offset in win.tap_offsets(geom.kernel):
        view = win.tap(xp, geom, offset)
        position = np.zeros(geom.out, dtype=np.int64)
        inside = np.ones(geom.out, dtype=bool)
        for axis in range(rank):
            shape = [1] * rank
            shape[axis] = geom.out[axis]
            coord = (np.arange(geom.out[axis]) * geom.strides[axis] - geom.pads_begin[axis]
                     + offset[axis] * geom.dilations[axis]).reshape(shape)
            inside = inside & (coord >= 0) & (coord < spatial[axis])
            position = position + coord * place[axis]
        hit = view == y
        if nan_max is not None:
            hit |= nan_max & np.isnan(view)
        hit &= inside & ~found
        index[hit] = np.broadcast_to(position, y.shape)[hit]
        found |= hit
    plane = np.arange(X.shape[0] * X.shape[1], dtype=np.int64).reshape(X.shape[:2] + (1,) * rank)
    return index + plane * int(np.prod(spatial, dtype=np.int64))


@op("MaxPool", since=1, inputs=("X",), outputs=("Y",), attrs=BASE_ATTRS, infer=_pool_rule)
def max_pool_1(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
               pads: Sequence[int] | None, strides: Sequence[int] | None) -> np.ndarray:
    """MaxPool-1: as MaxPool-10 without dilations, ceil_mode, storage_order or Indices."""
    geom = _geometry(X, kernel_shape, strides, None, pads, auto_pad, 0)
    return _max_pool(X, geom, 0, False)  # type: ignore[return-value]


@op("MaxPool", since=8, inputs=("X",), outputs=("Y", "Indices?"),
    attrs=(*BASE_ATTRS, _STORAGE), infer=_pool_rule)
def max_pool_8(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
               pads: Sequence[int] | None, strides: Sequence[int] | None, storage_order: int,
               ctx: Any) -> Any:
    """MaxPool-8: adds the optional Indices output and storage_order (see MaxPool-10)."""
    geom = _geometry(X, kernel_shape, strides, None, pads, auto_pad, 0)
    return _max_pool(X, geom, storage_order, ctx.num_outputs > 1)


@op("MaxPool", since=10, inputs=("X",), outputs=("Y", "Indices?"),
    attrs=(*BASE_ATTRS, _STORAGE, _CEIL, _DILATIONS), infer=_pool_rule)
def max_pool_10(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
                pads: Sequence[int] | None, strides: Sequence[int] | None, storage_order: int,
                ceil_mode: int, dilations: Sequence[int] | None, ctx: Any) -> Any:
    """Max over each window: ``Y[n, c, o] = max_t Xp[n, c, o * s + t * d]``, padding excluded.

    X: (N, C, *in); Y: (N, C, *out) with the window rules of :mod:`refmnn.ops._window`
    (ceil_mode drops a last window that would start in the end padding). Indices (int64,
    optional): the flat index into X of the maximum, ``(n * C + c) * prod(in) + position``,
    position row-major (storage_order 0) or column-major (1); ties pick the first tap in
    kernel row-major order. NaN propagates (a window holding NaN gives NaN).
    dtype: float16/32/64, int8 and uint8 (since 12), bfloat16 (since 22). Versions 11, 12 and
    22 change only documentation and dtypes.
    """
    geom = _geometry(X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    return _max_pool(X, geom, storage_order, ctx.num_outputs > 1)


# -- AveragePool and LpPool ----------------------------------------------------------------------

def _window_sum(X: np.ndarray, geom: win.Geometry) -> np.ndarray:
    """Sum of every window (zero padding), in the compute dtype."""
    xp = _padded(X.astype(_compute_dtype(X.dtype), copy=False), geom, 0)
    return _fold(xp, geom, np.add)


def _window_count(spatial: Sequence[int], geom: win.Geometry, include_pad: bool) -> np.ndarray:
    """How many taps of each window fall inside the input (or inside the padded input)."""
    ones = np.ones(spatial, dtype=np.float64)
    padded = win.pad(ones, geom.pads_begin, geom.pads_end, 1.0 if include_pad else 0.0)
    padded = win.pad(padded, (0,) * len(spatial), geom.extra_end(spatial), 0.0)
    return _fold(padded, geom, np.add)


def _average_pool(X: np.ndarray, geom: win.Geometry, count_include_pad: int) -> np.ndarray:
    total = _window_sum(X, geom)
    count = _window_count(X.shape[2:], geom, bool(count_include_pad)).astype(total.dtype)
    return (total / count).astype(X.dtype, copy=False)


@op("AveragePool", since=1, inputs=("X",), outputs=("Y",), attrs=BASE_ATTRS, infer=_pool_rule)
def average_pool_1(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
                   pads: Sequence[int] | None, strides: Sequence[int] | None) -> np.ndarray:
    """AveragePool-1: the mean of each window over the taps inside the input (padding is never
    counted), no ceil_mode or dilations. See AveragePool-19."""
    return _average_pool(X, _geometry(X, kernel_shape, strides, None, pads, auto_pad, 0), 0)


@op("AveragePool", since=7, inputs=("X",), outputs=("Y",), attrs=(*BASE_ATTRS, _COUNT_PAD),
    infer=_pool_rule)
def average_pool_7(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
                   pads: Sequence[int] | None, strides: Sequence[int] | None,
                   count_include_pad: int) -> np.ndarray:
    """AveragePool-7: adds count_include_pad (see AveragePool-19)."""
    geom = _geometry(X, kernel_shape, strides, None, pads, auto_pad, 0)
    return _average_pool(X, geom, count_include_pad)


@op("AveragePool", since=10, inputs=("X",), outputs=("Y",),
    attrs=(*BASE_ATTRS, _COUNT_PAD, _CEIL), infer=_pool_rule)
def average_pool_10(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
                    pads: Sequence[int] | None, strides: Sequence[int] | None,
                    count_include_pad: int, ceil_mode: int) -> np.ndarray:
    """AveragePool-10: adds ceil_mode (see AveragePool-19); version 11 only rewords the docs."""
    geom = _geometry(X, kernel_shape, strides, None, pads, auto_pad, ceil_mode)
    return _average_pool(X, geom, count_include_pad)


@op("AveragePool", since=19, inputs=("X",), outputs=("Y",),
    attrs=(*BASE_ATTRS, _COUNT_PAD, _CEIL, _DILATIONS), infer=_pool_rule)
def average_pool_19(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
                    pads: Sequence[int] | None, strides: Sequence[int] | None,
                    count_include_pad: int, ceil_mode: int,
                    dilations: Sequence[int] | None) -> np.ndarray:
    """Mean of each window: ``Y[n, c, o] = sum_t Xp[n, c, o * s + t * d] / count[o]``.

    ``count[o]`` is the number of taps of window ``o`` inside the input (count_include_pad=0)
    or inside the explicitly padded input (count_include_pad=1). Taps in the ceil_mode
    overhang past the end padding are never counted, so with ceil_mode a last window that
    hangs over the edge averages only what it covers (PyTorch's rule).
    X: (N, C, *in) float16/32/64 (bfloat16 since 22); Y: (N, C, *out), same dtype;
    float16/bfloat16 sum in float32 and round once.
    """
    geom = _geometry(X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    return _average_pool(X, geom, count_include_pad)


def _lp_pool(X: np.ndarray, geom: win.Geometry, p: float) -> np.ndarray:
    dtype = _compute_dtype(X.dtype)
    powered = np.abs(X.astype(dtype, copy=False)) ** dtype.type(p)
    total = _window_sum(powered, geom)
    return (total ** dtype.type(1.0 / p)).astype(X.dtype, copy=False)


@op("LpPool", since=1, inputs=("X",), outputs=("Y",),
    attrs=(_AUTO_PAD, Attr("kernel_shape", "ints", None, "window size per spatial axis"),
           Attr("p", "float", 2.0, "the norm's exponent"), _PADS, _STRIDES),
    infer=lambda ctx, x, **a: _pool_rule(ctx, x, **a) if a["kernel_shape"]
    else TensorType(dtype_of(x), None))
def lp_pool_1(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int] | None, p: float,
              pads: Sequence[int] | None, strides: Sequence[int] | None) -> np.ndarray:
    """LpPool-1: as LpPool-18 with a float ``p``, no ceil_mode or dilations.

    kernel_shape is optional in version 1's schema; without it the window covers the whole
    spatial extent (the op degenerates to GlobalLpPool).
    """
    kernel = tuple(kernel_shape) if kernel_shape else X.shape[2:]
    return _lp_pool(X, _geometry(X, kernel, strides, None, pads, auto_pad, 0), p)


@op("LpPool", since=2, inputs=("X",), outputs=("Y",),
    attrs=(*BASE_ATTRS, Attr("p", "int", 2, "the norm's exponent")), infer=_pool_rule)
def lp_pool_2(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
              pads: Sequence[int] | None, strides: Sequence[int] | None, p: int) -> np.ndarray:
    """LpPool-2: integer ``p``, required kernel_shape (see LpPool-18); 11 rewords the docs."""
    return _lp_pool(X, _geometry(X, kernel_shape, strides, None, pads, auto_pad, 0), p)


@op("LpPool", since=18, inputs=("X",), outputs=("Y",),
    attrs=(*BASE_ATTRS, Attr("p", "int", 2, "the norm's exponent"), _CEIL, _DILATIONS),
    infer=_pool_rule)
def lp_pool_18(X: np.ndarray, *, auto_pad: str, kernel_shape: Sequence[int],
               pads: Sequence[int] | None, strides: Sequence[int] | None, p: int,
               ceil_mode: int, dilations: Sequence[int] | None) -> np.ndarray:
    """Lp norm of each window: ``Y[n, c, o] = (sum_t |Xp[n, c, o * s + t * d]| ** p) ** (1/p)``.

    Padding contributes 0. X: (N, C, *in) float16/32/64 (bfloat16 since 22); Y: (N, C, *out);
    float16/bfloat16 compute in float32.
    """
    geom = _geometry(X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    return _lp_pool(X, geom, p)


# -- global pools ------------------------------------------------------------------------------

def _global_rule(ctx: InferContext, x: TensorType | None, **attrs: Any) -> TensorType:
    shape = shape_of(x)
    if shape is None:
        return TensorType(dtype_of(x), None)
    return TensorType(dtype_of(x), (*shape[:2], *([1] * (len(shape) - 2))))


def _spatial_axes(X: np.ndarray) -> tuple[int, ...]:
    return tuple(range(2, X.ndim))


@op("GlobalAveragePool", since=1, inputs=("X",), outputs=("Y",), infer=_global_rule)
def global_average_pool(X: np.ndarray) -> np.ndarray:
    """Mean over all spatial axes: (N, C, *in) -> (N, C, 1, ..., 1). float16/bfloat16 average
    in float32; an empty spatial extent gives NaN. Version 22 adds bfloat16."""
    dtype = _compute_dtype(X.dtype)
    return mean_along(X, _spatial_axes(X), dtype=dtype).astype(X.dtype)


@op("GlobalMaxPool", since=1, inputs=("X",), outputs=("Y",), infer=_global_rule)
def global_max_pool(X: np.ndarray) -> np.ndarray:
    """Max over all spatial axes: (N, C, *in) -> (N, C, 1, ..., 1); NaN propagates.
    Version 22 adds bfloat16."""
    dtype = _compute_dtype(X.dtype)
    return np.max(X.astype(dtype, copy=False), axis=_spatial_axes(X),
                  keepdims=True).astype(X.dtype)


def _global_lp(X: np.ndarray, p: float) -> np.ndarray:
    dtype = _compute_dtype(X.dtype)
    total = np.sum(np.abs(X.astype(dtype, copy=False)) ** dtype.type(p), axis=_spatial_axes(X),
                   keepdims=True)
    return (total ** dtype.type(1.0 / p)).astype(X.dtype)


@op("GlobalLpPool", since=1, inputs=("X",), outputs=("Y",), infer=_global_rule,
    attrs=(Attr("p", "float", 2.0, "the norm's exponent"),))
def global_lp_pool_1(X: np.ndarray, *, p: float) -> np.ndarray:
    """GlobalLpPool-1: as GlobalLpPool-2 with a float ``p``."""
    return _global_lp(X, p)


@op("GlobalLpPool", since=2, inputs=("X",), outputs=("Y",), infer=_global_rule,
    attrs=(Attr("p", "int", 2, "the norm's exponent"),))
def global_lp_pool_2(X: np.ndarray, *, p: int) -> np.ndarray:
    """Lp norm over all spatial axes: ``(sum |X| ** p) ** (1 / p)``, (N, C, *in) ->
    (N, C, 1, ..., 1). float16/bfloat16 compute in float32; 22 adds bfloat16."""
    return _global_lp(X, p)


# -- MaxUnpool ---------------------------------------------------------------------------------

def _unpool_dims(x_shape: Sequence[Any], kernel: Sequence[int], strides: Sequence[int] | None,
                 pads: Sequence[int] | None) -> list[Any]:
    rank = len(kernel)
    strides, _, pads = win.defaults(rank, strides, None, pads)
    return [(n - 1) * s - pads[i] - pads[i + rank] + k if isinstance(n, int) else None
            for i, (n, k, s) in enumerate(zip(x_shape[2:], kernel, strides, strict=True))]


def _unpool_rule(ctx: InferContext, x: TensorType | None, i: TensorType | None,
                 output_shape: TensorType | None = None, **attrs: Any) -> TensorType:
    shape = shape_of(x)
    if output_shape is not None:
        value = ctx.value(2)
        dims = None if value is None else tuple(int(v) for v in value)
        return TensorType(dtype_of(x), dims)
    if shape is None:
        return TensorType(dtype_of(x), None)
    return TensorType(dtype_of(x), (*shape[:2], *_unpool_dims(shape, attrs["kernel_shape"],
                                                              attrs["strides"], attrs["pads"])))


@op("MaxUnpool", since=9, inputs=("X", "I", "output_shape?"), outputs=("output",),
    attrs=(_KERNEL, _PADS, _STRIDES), infer=_unpool_rule, value_inputs=(2,))
def max_unpool(X: np.ndarray, I: np.ndarray,  # noqa: E741 (the spec's name)
               output_shape: np.ndarray | None = None, *,
               kernel_shape: Sequence[int], pads: Sequence[int] | None,
               strides: Sequence[int] | None) -> np.ndarray:
    """Partial inverse of MaxPool: scatter each X value to the flat position I gives, zeros
    elsewhere: ``unpooled.flat[I[j]] = X.flat[j]``.

    ``unpooled`` has, per spatial axis, the size ``(in - 1) * stride - pads_begin - pads_end +
    kernel`` (the size MaxPool would have pooled from), and I indexes into that layout.
    ``output_shape`` (the full N, C, *spatial shape), when given, only resizes the result: the
    unpooled tensor is placed at its origin and the rest is zero (cropped if smaller). This is
    the spec's own example (``test_maxunpool_export_with_output_shape``); PyTorch and
    onnxruntime instead read I as indices into the output_shape layout.
    X: (N, C, *in) float; I: int64 of X's shape. Duplicate indices keep the last value.
    Versions 11 and 22 change only documentation and dtypes.
    """
    shape = (*X.shape[:2], *_unpool_dims(X.shape, kernel_shape, strides, pads))
    unpooled = np.zeros(int(np.prod(shape, dtype=np.int64)), dtype=X.dtype)
    unpooled[I.reshape(-1)] = X.reshape(-1)
    unpooled = unpooled.reshape(shape)
    if output_shape is None:
        return unpooled
    out = np.zeros(tuple(int(v) for v in output_shape), dtype=X.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(out.shape, shape, strict=True))
    out[common] = unpooled[common]
    return out


# -- MaxRoiPool --------------------------------------------------------------------------------

def _roi_bins(start: np.ndarray, end: np.ndarray, bins: int,
              size: int) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) input rows of each of ``bins`` bins of every RoI, clipped to [0, size]."""
    extent = np.maximum(end - start + 1, 1).astype(np.float64)        # (R,)
    step = extent[:, None] / bins                                      # (R, 1)
    index = np.arange(bins)[None, :]
    lo = np.floor(index * step).astype(np.int64) + start[:, None]
    hi = np.ceil((index + 1) * step).astype(np.int64) + start[:, None]
    return np.clip(lo, 0, size), np.clip(hi, 0, size)


@op("MaxRoiPool", since=1, inputs=("X", "rois"), outputs=("Y",),
    attrs=(Attr("pooled_shape", "ints", doc="(pooled_h, pooled_w)"),
           Attr("spatial_scale", "float", 1.0, "scale from RoI coordinates to X's grid")),
    infer=lambda ctx, x, rois, **a: TensorType(dtype_of(x), (
        shape_of(rois)[0] if shape_of(rois) else None,
        shape_of(x)[1] if shape_of(x) else None, *a["pooled_shape"])))
def max_roi_pool(X: np.ndarray, rois: np.ndarray, *, pooled_shape: Sequence[int],
                 spatial_scale: float) -> np.ndarray:
    """Max pooling over regions of interest (Fast R-CNN, Caffe's rounding).

    rois: (R, 5) rows ``[batch_index, x1, y1, x2, y2]`` in input-image coordinates. Each RoI
    is scaled by spatial_scale and rounded half away from zero to integer corners (inclusive),
    split into pooled_h x pooled_w bins of ``extent / pooled`` rows/columns (floor of the
    start, ceil of the end, clipped to X); each bin's maximum is the output, 0 for an empty bin.
    X: (N, C, H, W); Y: (R, C, pooled_h, pooled_w), X's dtype.
    """
    ph, pw = pooled_shape
    height, width = X.shape[2:]
    corners = np.sign(rois[:, 1:]) * np.floor(np.abs(rois[:, 1:] * spatial_scale) + 0.5)
    x1, y1, x2, y2 = (corners[:, i].astype(np.int64) for i in range(4))
    h_lo, h_hi = _roi_bins(y1, y2, ph, height)                         # (R, PH)
    w_lo, w_hi = _roi_bins(x1, x2, pw, width)                          # (R, PW)
    rows, cols = np.arange(height), np.arange(width)
    in_h = (rows >= h_lo[..., None]) & (rows < h_hi[..., None])        # (R, PH, H)
    in_w = (cols >= w_lo[..., None]) & (cols < w_hi[..., None])        # (R, PW, W)
    dtype = _compute_dtype(X.dtype)
    y = np.zeros((rois.shape[0], X.shape[1], ph, pw), dtype=dtype)
    for r, image in enumerate(X[rois[:, 0].astype(np.int64)].astype(dtype)):  # one RoI at a time
        # separable max: over the columns of each column bin, then the rows of each row bin
        by_col = np.where(in_w[r], image[:, :, None, :], -np.inf).max(axis=-1)   # (C, H, PW)
        by_bin = np.where(in_h[r][:, None, :], by_col.transpose(0, 2, 1)[:, None], -np.inf)
        empty = ~(in_h[r].any(-1)[:, None] & in_w[r].any(-1)[None, :])            # (PH, PW)
        y[r] = np.where(empty, 0, by_bin.max(axis=-1))
    return y.astype(X.dtype)


OPS = (max_pool_1, max_pool_8, max_pool_10, average_pool_1, average_pool_7, average_pool_10,
       average_pool_19, lp_pool_1, lp_pool_2, lp_pool_18, global_average_pool, global_max_pool,
       global_lp_pool_1, global_lp_pool_2, max_unpool, max_roi_pool)
