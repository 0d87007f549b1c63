"""Convolution ops: Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv, Col2Im,
CausalConvWithState.

Every op here is rank-generic (1-D, 2-D, 3-D and beyond) and shares the window geometry of
:mod:`refmnn.ops._window` (pads, auto_pad, strides, dilations, output sizes).

How a convolution is computed (the formulation every conv here builds on)
-----------------------------------------------------------------------
ONNX Conv is a cross-correlation. With the input padded by zeros (``Xp``) and ``Cg = C / group``
input channels per group::

    Y[n, m, o] = B[m] + sum_{c < Cg} sum_{t in kernel} W[m, c, t] * Xp[n, g(m)*Cg + c, o*s + t*d]

for every output position ``o`` and kernel tap ``t`` (both multi-indices; ``g(m)`` is the group
of output channel ``m``). It is computed as **im2col + GEMM**:

1. ``window_view`` presents the padded input as a strided view of shape
   ``(N, C, *out, *kernel)`` -- every window at once, nothing copied.
2. Moving the kernel axes in front of the output axes and copying once gives the "column"
   matrix of each (image, group), ``cols[n, g] : (Cg * K, P)`` with ``K = prod(kernel)`` and
   ``P = prod(out)``. A 1x1 convolution with stride 1 and no padding copies nothing: its
   window view already is the contiguous input.
3. The weights reshape for free to ``(G, M/G, Cg * K)`` and one batched ``np.matmul`` computes
   ``Y[n, g] = W[g] @ cols[n, g]``: a BLAS GEMM per (image, group) in the input's own
   precision (float32 stays float32). Its result ``(N, G, M/G, P)`` *is* ``(N, M, *out)`` in
   memory, so no transpose follows.

Depthwise convolution (``Cg == 1``, MobileNet) goes through the same code: the columns are
``(K, P)`` per channel and the GEMMs degenerate to one ``(1, K) @ (K, P)`` product per channel,
all issued by the same ``np.matmul`` call (no Python loop). The obvious alternative, summing
``K`` strided views of the input each scaled by one weight per channel (K multiply-add passes,
no copy), was measured 1.6x slower on MobileNetV2's depthwise layers (16.8 ms against 10.3 ms
in total, one thread): each pass re-reads a strided view and writes a temporary, whereas the
im2col copy is a single pass and the products stream through contiguous memory.

Integer convolutions (ConvInteger, QLinearConv) subtract the zero points, then run the same
code in float64: every product is below 2**16 in magnitude and every partial sum an integer far
below 2**53, so float64 GEMM is *exact* whatever its summation order, and fast. The exact
integer result is then wrapped to int32 as the spec allows ("accumulation may overflow if and
only if in 32 bits").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import Dim, TensorType
from refmnn.ops import _window as win
from refmnn.ops._infer import dtype_of, shape_of
from refmnn.ops._schema import Attr, InferContext, into, op
from refmnn.ops.quant import requantize

# -- shared attribute schema ------------------------------------------------------------------

_AUTO_PAD = Attr("auto_pad", "string", "NOTSET",
                 "NOTSET: use pads; VALID: no padding; SAME_UPPER/SAME_LOWER: pad so that "
                 "out = ceil(in / stride), odd padding at the end (UPPER) or beginning (LOWER)")
_DILATIONS = Attr("dilations", "ints", None, "spacing between kernel taps per axis (default 1)")
_GROUP = Attr("group", "int", 1, "number of channel groups (C and M divisible by it)")
_KERNEL = Attr("kernel_shape", "ints", None, "kernel spatial shape (default: from W)")
_PADS = Attr("pads", "ints", None, "[x1_begin, x2_begin, ..., x1_end, x2_end, ...] (default 0)")
_STRIDES = Attr("strides", "ints", None, "step of the window per axis (default 1)")
CONV_ATTRS = (_AUTO_PAD, _DILATIONS, _GROUP, _KERNEL, _PADS, _STRIDES)


def _float_compute(dtype: np.dtype) -> np.dtype:
    """float16 / bfloat16 compute in float32 and round once; float32 and float64 in themselves."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _spatial_ones(rank: int) -> tuple[int, ...]:
    return (1,) * rank


# -- the core: cross-correlation of a batch with grouped weights -------------------------------

def correlate(x: np.ndarray, w: np.ndarray, group: int, geom: win.Geometry,
              out: np.ndarray | None = None) -> np.ndarray:
    """Grouped N-D cross-correlation, zero padding, no bias: im2col + GEMM (module docstring).

    x: (N, C, *in); w: (M, C / group, *kernel), same dtype; returns (N, M, *geom.out), computed
    into ``out`` when it is a C-contiguous array of that shape and x's dtype (then returned).
    """
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    if c != cg * group or m % group:
        raise ValueError(f"X has {c} channels and W shape {w.shape}: need C == W.shape[1] * "
                         f"group and M divisible by group (group={group})")
    rank, k = len(geom.kernel), win.prod(geom.kernel)
    xp = win.pad(x, geom.pads_begin, geom.pads_end, 0)
    view = win.window_view(xp, geom)                           # (N, C, *out, *kernel)
    kernel_first = (0, 1, *range(2 + rank, 2 + 2 * rank), *range(2, 2 + rank))
    cols = np.ascontiguousarray(view.transpose(kernel_first))  # (N, C, *kernel, *out): im2col
    cols = cols.reshape(n, group, cg * k, win.prod(geom.out))
    target = into(out, (n, m, *geom.out), x.dtype)
    if target is not None and not target.flags.c_contiguous:
        target = None
    grouped = (n, group, m // group, win.prod(geom.out))  # (N, G, M/G, P): a GEMM each
    y = np.matmul(w.reshape(group, m // group, cg * k), cols,
                  out=None if target is None else target.reshape(grouped))  # a view of target
    return y.reshape(n, m, *geom.out) if target is None else target


def _kernel_of(w: np.ndarray, kernel_shape: Sequence[int] | None) -> tuple[int, ...]:
    kernel = tuple(w.shape[2:])
    if kernel_shape and tuple(kernel_shape) != kernel:
        raise ValueError(f"kernel_shape {tuple(kernel_shape)} does not match W {w.shape}")
    return kernel


def _conv_float(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *, auto_pad: str,
                dilations: Sequence[int] | None, group: int, kernel_shape: Sequence[int] | None,
                pads: Sequence[int] | None, strides: Sequence[int] | None,
                out: np.ndarray | None = None) -> np.ndarray:
    geom = win.geometry(X.shape[2:], _kernel_of(W, kernel_shape), strides, dilations, pads,
                        auto_pad)
    dtype = _float_compute(X.dtype)
    y = correlate(X.astype(dtype, copy=False), W.astype(dtype, copy=False), group, geom,
                  out if dtype == X.dtype else None)
    if B is not None:
        y += B.astype(dtype).reshape(-1, *_spatial_ones(len(geom.kernel)))
    return y.astype(X.dtype, copy=False)


# -- shape rules -------------------------------------------------------------------------------

def _conv_dims(x: TensorType | None, w: TensorType | None, attrs: dict[str, Any]
               ) -> tuple[Dim, ...] | None:
    """(N, M, *out) of a Conv-like op from its X and W types; None when the rank is unknown."""
    kernel_shape = attrs.get("kernel_shape")
    xs, ws = shape_of(x), shape_of(w)
    rank = len(xs) if xs is not None else (len(ws) if ws is not None else None)
    if rank is None:
        return None
    spatial = rank - 2
    kernel: Sequence[Dim] | None = kernel_shape
    if not kernel and ws is not None and all(isinstance(d, int) for d in ws[2:]):
        kernel = ws[2:]
    batch = xs[0] if xs is not None else None
    channels = ws[0] if ws is not None else None
    if not kernel or xs is None:
        return (batch, channels, *([None] * spatial))
    return (batch, channels, *win.output_dims(xs[2:], kernel, attrs.get("strides"),
                                              attrs.get("dilations"), attrs.get("pads"),
                                              attrs.get("auto_pad", "NOTSET")))


def _conv_rule(ctx: InferContext, x: TensorType | None, w: TensorType | None, *rest: Any,
               **attrs: Any) -> TensorType:
    xs, ws = shape_of(x), shape_of(w)
    group = attrs.get("group", 1)
    if xs is not None and ws is not None and len(xs) > 1 and len(ws) > 1:
        c, cg, m = xs[1], ws[1], ws[0]
        if isinstance(c, int) and isinstance(cg, int) and c != cg * group:
            ctx.fail(f"X has {c} channels but W expects {cg} per group x {group} groups")
        if isinstance(m, int) and m % group:
            ctx.fail(f"W's {m} output channels are not divisible by group={group}")
    return TensorType(dtype_of(x), _conv_dims(x, w, attrs))


# -- Conv ---------------------------------------------------------------------------------------

@op("Conv", since=1, inputs=("X", "W", "B?"), outputs=("Y",), attrs=CONV_ATTRS, infer=_conv_rule)
def conv(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *, auto_pad: str,
         dilations: Sequence[int] | None, group: int, kernel_shape: Sequence[int] | None,
         pads: Sequence[int] | None, strides: Sequence[int] | None,
         out: np.ndarray | None = None) -> np.ndarray:
    """N-D grouped cross-correlation (the "convolution" of deep learning).

    ``Y[n, m, o] = B[m] + sum_{c, t} W[m, c, t] * Xp[n, g(m) * C/group + c, o * s + t * d]``,
    ``Xp`` the input zero-padded by ``pads`` (or by ``auto_pad``), ``g(m) = m // (M / group)``.
    Computed by im2col + one BLAS GEMM per (image, group), or by tap accumulation for depthwise
    convolution: see the module docstring for both formulations.

    X: (N, C, D1..Dn); W: (M, C/group, k1..kn); B: (M,) optional; Y: (N, M, o1..on) with
    ``o_i = floor((D_i + pads - ((k_i - 1) * d_i + 1)) / s_i) + 1`` (SAME_*: ceil(D_i / s_i)).
    dtype: float16, float32, float64, bfloat16 (since 22); float16/bfloat16 compute in float32.
    Versions 1, 11 and 22 differ only in documentation and dtypes. Empty batches give empty Y.
    float32/float64 Y is computed into ``out`` (the planned buffer) when it fits.
    """
    return _conv_float(X, W, B, auto_pad=auto_pad, dilations=dilations, group=group,
                       kernel_shape=kernel_shape, pads=pads, strides=strides, out=out)


# -- ConvInteger / QLinearConv -------------------------------------------------------------------

def _per_channel(v: np.ndarray | None, rank: int) -> np.ndarray | float:
    """A scalar, or a 1-D per-output-channel array shaped (M, 1, ..., 1) to broadcast on W."""
    if v is None:
        return 0.0
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(()).astype(np.float64)
    return v.astype(np.float64).reshape(-1, *([1] * (rank - 1)))


def _conv_exact(x: np.ndarray, x_zero_point: np.ndarray | None, w: np.ndarray,
                w_zero_point: np.ndarray | None, bias: np.ndarray | None,
                group: int, geom: win.Geometry) -> np.ndarray:
    """sum (x - x_zp)(w - w_zp) [+ bias], exactly, as int64: float64 GEMM of small integers."""
    xs = x.astype(np.float64) - _per_channel(x_zero_point, 1)
    ws = w.astype(np.float64) - _per_channel(w_zero_point, w.ndim)
    acc = correlate(xs, ws, group, geom)
    if bias is not None:
        acc += bias.astype(np.float64).reshape(-1, *_spatial_ones(len(geom.kernel)))
    return acc.astype(np.int64)


@op("ConvInteger", since=10, inputs=("x", "w", "x_zero_point?", "w_zero_point?"),
    outputs=("y",), attrs=CONV_ATTRS, infer=lambda ctx, x, w, *rest, **a: TensorType(
        DType.int32, _conv_dims(x, w, a)))
def conv_integer(x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                 w_zero_point: np.ndarray | None = None, *, auto_pad: str,
                 dilations: Sequence[int] | None, group: int, kernel_shape: Sequence[int] | None,
                 pads: Sequence[int] | None, strides: Sequence[int] | None) -> np.ndarray:
    """Integer Conv: ``y = Conv(x - x_zero_point, w - w_zero_point)`` accumulated exactly.

    x: (N, C, *in) int8/uint8; w: (M, C/group, *k) int8/uint8; x_zero_point: scalar of x's
    type; w_zero_point: scalar or (M,) per output channel. Padding pads ``x - x_zero_point``
    with 0 (i.e. pads x with its zero point). y: int32; a sum beyond int32 wraps.
    """
    geom = win.geometry(x.shape[2:], _kernel_of(w, kernel_shape), strides, dilations, pads,
                        auto_pad)
    return _conv_exact(x, x_zero_point, w, w_zero_point, None, group, geom).astype(np.int32)


@op("QLinearConv", since=10,
    inputs=("x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale",
            "y_zero_point", "B?"),
    outputs=("y",), attrs=CONV_ATTRS,
    infer=lambda ctx, x, xs, xz, w, ws, wz, ys, yz, *rest, **a: TensorType(
        dtype_of(yz), _conv_dims(x, w, a)))
def qlinear_conv(x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray, w: np.ndarray,
                 w_scale: np.ndarray, w_zero_point: np.ndarray, y_scale: np.ndarray,
                 y_zero_point: np.ndarray, B: np.ndarray | None = None, *, auto_pad: str,
                 dilations: Sequence[int] | None, group: int,
                 kernel_shape: Sequence[int] | None, pads: Sequence[int] | None,
                 strides: Sequence[int] | None) -> np.ndarray:
    """Quantized Conv: ``y = saturate(round((x_scale * w_scale / y_scale) * acc) + y_zero_point)``
    with ``acc = B + Conv(x - x_zero_point, w - w_zero_point)`` computed exactly in integers.

    x: (N, C, *in) int8/uint8; w: (M, C/group, *k) int8/uint8; x_scale, y_scale: float scalars;
    w_scale, w_zero_point: scalar or (M,) per output channel; B: (M,) int32 quantized with
    scale x_scale * w_scale and zero point 0. ``acc * x_scale * w_scale / y_scale`` is
    computed in float64 (the float32 scales exactly, each rounding ~1e-16 relative, so a
    result rounds as the real-number formula does unless it lies within ~1e-15 of a tie),
    rounded half to even and saturated to y's type (y_zero_point's). A multiplier formed in
    float32 first moves a result across a tie about once in 100,000 outputs (2 of 200,000
    random ones in the int8 range, checked against exact fractions; float64: none).
    """
    geom = win.geometry(x.shape[2:], _kernel_of(w, kernel_shape), strides, dilations, pads,
                        auto_pad)
    acc = _conv_exact(x, x_zero_point, w, w_zero_point, B, group, geom)
    rank = len(geom.kernel)
    w_scale = np.asarray(w_scale, np.float64)
    if w_scale.size > 1:
        w_scale = w_scale.reshape(-1, *_spatial_ones(rank))
    scaled = acc * np.float64(x_scale.reshape(())) * w_scale / np.float64(y_scale.reshape(()))
    return requantize(scaled, y_zero_point.reshape(()), y_zero_point.dtype)


# -- ConvTranspose and Col2Im: the scatter-add inverse of the window view ---------------------

def col2im(cols: np.ndarray, geom: win.Geometry, canvas: Sequence[int]) -> np.ndarray:
    """Scatter-add blocks back onto an image: the adjoint of the im2col window view.

    cols: (N, C, *kernel, *blocks) with ``blocks == geom.out``; returns (N, C, *canvas) where
    ``image[n, c, b * s + t * d] += cols[n, c, t, b]`` for every tap ``t`` and block ``b``.
    One vectorised strided add per kernel tap (the taps of one block overlap, so no single
    fancy-indexed assignment could do it).
    """
    image = np.zeros((*cols.shape[:2], *canvas), dtype=cols.dtype)
    for offset in win.tap_offsets(geom.kernel):
        win.tap(image, geom, offset)[...] += cols[(slice(None), slice(None), *offset)]
    return image


def _split_total(total: int, auto_pad: str) -> tuple[int, int]:
    """(pad_begin, pad_end) for a ConvTranspose total padding (see conv_transpose)."""
    if total <= 0:
        return 0, total                         # output larger than the full result: extend at end
    small, large = total // 2, total - total // 2
    return (small, large) if auto_pad == "SAME_UPPER" else (large, small)


def _transpose_axes(in_shape: Sequence[Dim], kernel: Sequence[int], attrs: dict[str, Any]
                    ) -> list[tuple[Dim, int]]:
    """(output size, pad_begin) per spatial axis of a ConvTranspose."""
    rank = len(kernel)
    strides, dilations, pads = win.defaults(rank, attrs["strides"], attrs["dilations"],
                                            attrs["pads"])
    adjust = tuple(attrs["output_padding"] or (0,) * rank)
    target = tuple(attrs["output_shape"] or ())[-rank:] if attrs["output_shape"] else None
    if len(adjust) != rank or min(adjust, default=0) < 0:
        raise ValueError(f"output_padding {adjust} needs {rank} entries >= 0")
    for a, s, d in zip(adjust, strides, dilations, strict=True):
        if a >= max(s, d):  # "must be less than the corresponding stride/dilation dimension"
            raise ValueError(f"output_padding {adjust} must be less than the stride or the "
                             f"dilation of its axis (strides {tuple(strides)}, dilations "
                             f"{tuple(dilations)})")
    if attrs["output_shape"] and len(attrs["output_shape"]) not in (rank, rank + 2):
        raise ValueError(f"output_shape {tuple(attrs['output_shape'])} needs {rank} spatial "
                         f"entries (or {rank + 2} with N and C)")
    auto_pad = attrs["auto_pad"]
    result: list[tuple[Dim, int]] = []
    for i, (size, k) in enumerate(zip(in_shape, kernel, strict=True)):
        if not isinstance(size, int):
            result.append((target[i] if target else None, 0))
            continue
        full = strides[i] * (size - 1) + adjust[i] + (k - 1) * dilations[i] + 1
        if target is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = target[i] if target is not None else size * strides[i]
            if adjust[i] + out - full >= max(strides[i], dilations[i]):  # as output_padding
                raise ValueError(f"output_shape {tuple(target or ())} is too large for the "
                                 f"input: axis {i} can reach at most "
                                 f"{full - adjust[i] + max(strides[i], dilations[i]) - 1}")
            begin = _split_total(full - out, auto_pad)[0]
        elif auto_pad == "VALID":
            out, begin = full, 0
        else:
            out, begin = full - pads[i] - pads[i + rank], pads[i]
        result.append((out, begin))
    return result


def _conv_transpose(X: np.ndarray, W: np.ndarray, B: np.ndarray | None, attrs: dict[str, Any]
                    ) -> np.ndarray:
    n, c = X.shape[:2]
    group, kernel = attrs["group"], _kernel_of(W, attrs["kernel_shape"])
    rank, k = len(kernel), win.prod(kernel)
    if W.shape[0] != c or c % group:
        raise ValueError(f"W {W.shape} does not fit X {X.shape} with group={group}")
    cg, mg = c // group, W.shape[1]
    axes = _transpose_axes(X.shape[2:], kernel, attrs)
    strides, dilations, _ = win.defaults(rank, attrs["strides"], attrs["dilations"], None)
    dtype = _float_compute(X.dtype)
    p_in = win.prod(X.shape[2:])  # not -1 in the reshape: n may be 0
    x = X.astype(dtype, copy=False).reshape(n, group, cg, p_in)        # (N, G, Cg, P_in)
    w = W.astype(dtype, copy=False).reshape(group, cg, mg * k)         # (G, Cg, Mg * K)
    cols = np.matmul(w.transpose(0, 2, 1), x)                          # (N, G, Mg * K, P_in)
    cols = cols.reshape(n, group * mg, *kernel, *X.shape[2:])
    geom = win.Geometry(kernel, strides, dilations, (0,) * rank, (0,) * rank, X.shape[2:])
    canvas = [max((size - 1) * s + (kk - 1) * d + 1, begin + out)
              for size, s, kk, d, (out, begin) in zip(X.shape[2:], strides, kernel, dilations,
                                                      axes, strict=True)]
    full = col2im(cols, geom, canvas)
    y = full[(Ellipsis, *(slice(begin, begin + out) for out, begin in axes))]
    if B is not None:
        y = y + B.astype(dtype).reshape(-1, *_spatial_ones(rank))
    return np.ascontiguousarray(y).astype(X.dtype, copy=False)


_TRANSPOSE_ATTRS = (*CONV_ATTRS,
                    Attr("output_padding", "ints", None,
                         "extra size added at the end of each axis (default 0)"),
                    Attr("output_shape", "ints", None,
                         "explicit output spatial shape; pads are then derived and ignored"))


def _transpose_rule(ctx: InferContext, x: TensorType | None, w: TensorType | None, *rest: Any,
                    **attrs: Any) -> TensorType:
    xs, ws = shape_of(x), shape_of(w)
    if xs is None:
        return TensorType(dtype_of(x), None)
    channels = ws[1] * attrs["group"] if ws is not None and isinstance(ws[1], int) else None
    kernel = attrs["kernel_shape"] or (ws[2:] if ws is not None else None)
    if not kernel or not all(isinstance(k, int) for k in kernel):
        return TensorType(dtype_of(x), (xs[0], channels, *([None] * (len(xs) - 2))))
    axes = _transpose_axes(xs[2:], kernel, attrs)
    return TensorType(dtype_of(x), (xs[0], channels, *(a[0] for a in axes)))


@op("ConvTranspose", since=1, inputs=("X", "W", "B?"), outputs=("Y",), attrs=_TRANSPOSE_ATTRS,
    infer=_transpose_rule)
def conv_transpose(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *, auto_pad: str,
                   dilations: Sequence[int] | None, group: int,
                   kernel_shape: Sequence[int] | None, pads: Sequence[int] | None,
                   strides: Sequence[int] | None, output_padding: Sequence[int] | None,
                   output_shape: Sequence[int] | None) -> np.ndarray:
    """Transposed convolution (the gradient of Conv with respect to its input).

    Every input pixel scatters a weighted copy of the kernel into the output::

        full[n, g*Mg + j, i * s + t * d] += sum_c X[n, g*Cg + c, i] * W[g*Cg + c, j, t]
        Y = full[..., pads_begin : pads_begin + out] (+ B)

    computed as one GEMM per (image, group), ``W[g]^T @ X[n, g]`` giving (Mg * K, P_in)
    columns, then :func:`col2im` (one strided add per kernel tap). Per axis the full size is
    ``s * (in - 1) + output_padding + (k - 1) * d + 1``, and the output size is

    * ``output_shape`` when given (pads ignored; ``total = full - output_shape``; beyond the
      full result by less than the stride or dilation, with output_padding), or
    * ``in * s`` for auto_pad SAME_UPPER / SAME_LOWER (``total = full - in * s``), or
    * ``full`` for VALID, or ``full - pads_begin - pads_end`` (NOTSET).

    A derived ``total`` splits as ``total // 2`` and ``total - total // 2``: SAME_UPPER puts the
    larger half at the end; SAME_LOWER, and NOTSET with an ``output_shape``, at the beginning
    (the spec's equations: "If (auto_pads == SAME_UPPER): pads[start_i] = total_padding[i]/2
    ... Else: pads[start_i] = total_padding[i] - (total_padding[i]/2)"). A negative total
    (output_shape beyond the full result) extends the output at the end with B only.

    Versions 1 and 11 compute the same. Version 1's frozen text contradicts itself: its
    auto_pad attribute puts the extra padding "at the end for SAME_UPPER and at the beginning
    for SAME_LOWER", its equations (``auto_pads != SAME_UPPER`` where version 11 now reads
    ``==``) split every mode the other way round. ONNX settled it for the attribute's words by
    correcting the same equations in version 11's text in place (onnx/onnx#3000, no new
    version), and onnxruntime (since 1.13, microsoft/onnxruntime#12537) splits every mode as
    above at every opset; onnx.reference does for SAME_UPPER and SAME_LOWER.

    Each output_padding entry must be less than its axis's stride or dilation (version 11's
    words; version 1 states no bound, but a larger one only appends outputs no input reaches,
    and onnxruntime and PyTorch refuse it too).

    X: (N, C, *in); W: (C, M/group, *k); B: (M,); Y: (N, M, *out). Float types; float16 and
    bfloat16 compute in float32. ``output_shape`` may also list N and C (only its last
    ``rank`` entries are read).
    """
    attrs = dict(auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
                 pads=pads, strides=strides, output_padding=output_padding,
                 output_shape=output_shape)
    return _conv_transpose(X, W, B, attrs)


def _col2im_rule(ctx: InferContext, data: TensorType | None, *rest: Any,
                 **attrs: Any) -> TensorType:
    shape, image, block = shape_of(data), ctx.value(1), ctx.value(2)
    if image is None:
        return TensorType(dtype_of(data), None)
    channels: Dim = None
    if shape is not None and block is not None and isinstance(shape[1], int):
        channels = shape[1] // max(1, int(np.prod(block)))
    batch = shape[0] if shape is not None else None
    return TensorType(dtype_of(data), (batch, channels, *(int(v) for v in image)))


@op("Col2Im", since=18, inputs=("input", "image_shape", "block_shape"), outputs=("output",),
    attrs=(_DILATIONS, _PADS, _STRIDES), infer=_col2im_rule, value_inputs=(1, 2))
def col2im_op(input: np.ndarray, image_shape: np.ndarray, block_shape: np.ndarray, *,
              dilations: Sequence[int] | None, pads: Sequence[int] | None,
              strides: Sequence[int] | None) -> np.ndarray:
    """Rearrange column blocks back into an image, summing overlaps (PyTorch ``nn.Fold``).

    input: (N, C * prod(block_shape), L) where ``L = prod(blocks)`` and, per axis,
    ``blocks_i = floor((image_i + pads - ((block_i - 1) * d_i + 1)) / s_i) + 1``.
    Column ``(c, t)`` of block ``b`` lands at ``padded[n, c, b * s + t * d]``; the padding is
    then cropped. output: (N, C, *image_shape), input's dtype (numeric or bool: bool sums are
    logical or).
    """
    image = tuple(int(v) for v in image_shape)
    kernel = tuple(int(v) for v in block_shape)
    geom = win.geometry(image, kernel, strides, dilations, pads)
    n, ck, count = input.shape
    k = win.prod(kernel)
    if ck % k or count != win.prod(geom.out):
        raise ValueError(f"input {input.shape} does not hold {kernel} blocks at {geom.out}")
    cols = input.reshape(n, ck // k, *kernel, *geom.out)
    padded = [size + b + e for size, b, e in zip(image, geom.pads_begin, geom.pads_end,
                                                 strict=True)]
    full = col2im(cols, geom, padded)
    return np.ascontiguousarray(
        full[(Ellipsis, *(slice(b, b + size) for b, size in zip(geom.pads_begin, image,
                                                                strict=True)))])


# -- DeformConv -----------------------------------------------------------------------------------

def _sample(x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Multilinear interpolation of x at fractional positions, zero outside the input.

    x: (N, OG, Co, *in); pos: (N, OG, rank, Q) positions in input coordinates;
    returns (N, OG, Co, Q). Each of the 2**rank corners of a position's cell contributes
    ``prod_i (1 - |pos_i - corner_i|)`` times its value (0 where the corner is outside).
    """
    n, og, co = x.shape[:3]
    spatial = x.shape[3:]
    flat = x.reshape(n, og, co, win.prod(spatial))  # not -1: n may be 0
    low = np.floor(pos)
    frac = pos - low
    low = low.astype(np.int64)
    result = np.zeros((n, og, co, pos.shape[-1]), dtype=x.dtype)
    for corner in win.tap_offsets((2,) * len(spatial)):
        weight = np.ones(pos.shape[:2] + pos.shape[3:], dtype=np.float64)
        index = np.zeros_like(low[:, :, 0])
        for axis, (size, step) in enumerate(zip(spatial, corner, strict=True)):
            at = low[:, :, axis] + step
            weight *= frac[:, :, axis] if step else 1.0 - frac[:, :, axis]
            weight *= (at >= 0) & (at < size)
            index = index * size + np.clip(at, 0, size - 1)
        values = np.take_along_axis(flat, index[:, :, None, :], axis=3)
        result += values * weight[:, :, None, :].astype(x.dtype)
    return result


@op("DeformConv", since=19, inputs=("X", "W", "offset", "B?", "mask?"), outputs=("Y",),
    attrs=(_DILATIONS, _GROUP, _KERNEL,
           Attr("offset_group", "int", 1, "number of offset groups (C divisible by it)"),
           _PADS, _STRIDES),
    infer=lambda ctx, x, w, off, *rest, **a: TensorType(
        dtype_of(x), None if shape_of(off) is None else
        (shape_of(off)[0], shape_of(w)[0] if shape_of(w) else None, *shape_of(off)[2:])))
def deform_conv(X: np.ndarray, W: np.ndarray, offset: np.ndarray, B: np.ndarray | None = None,
                mask: np.ndarray | None = None, *, dilations: Sequence[int] | None, group: int,
                kernel_shape: Sequence[int] | None, offset_group: int,
                pads: Sequence[int] | None, strides: Sequence[int] | None) -> np.ndarray:
    """Deformable convolution (v1 without mask, v2 with mask), N-D.

    Like Conv, but tap ``t`` of output ``o`` reads the input at the learned fractional position
    ``p = o * s - pads_begin + t * d + offset[n, og, t, :, o]``, interpolated multilinearly
    (zero outside the input), and is scaled by ``mask[n, og, t, o]``::

        Y[n, m, o] = B[m] + sum_{c, t} W[m, c, t] * mask * X~[n, c, p]

    Channel ``c`` uses the offsets of its offset group ``c // (C / offset_group)``.
    X: (N, C, *in); W: (M, C/group, *k); offset: (N, offset_group * K * rank, *out) laid out as
    (offset_group, *kernel, rank); mask: (N, offset_group * K, *out); Y: (N, M, *out) where
    ``out`` is offset's spatial shape. The sampled columns then go through the same GEMM as
    Conv. Versions 19 and 22 differ only in dtypes (22 adds bfloat16).
    """
    n, c = X.shape[:2]
    kernel = _kernel_of(W, kernel_shape)
    rank, k = len(kernel), win.prod(kernel)
    strides, dilations, pads = win.defaults(rank, strides, dilations, pads)
    out = offset.shape[2:]
    q = win.prod(out)
    dtype = _float_compute(X.dtype)
    grid = np.indices(out).reshape(rank, 1, q)                        # (rank, 1, P)
    taps = np.array(list(win.tap_offsets(kernel))).T.reshape(rank, k, 1)
    base = (grid * np.array(strides).reshape(rank, 1, 1) - np.array(pads[:rank]).reshape(rank, 1, 1)
            + taps * np.array(dilations).reshape(rank, 1, 1))        # (rank, K, P)
    shift = offset.astype(np.float64).reshape(n, offset_group, k, rank, q).transpose(0, 1, 3, 2, 4)
    pos = (base + shift).reshape(n, offset_group, rank, k * q)
    x = X.astype(dtype, copy=False).reshape(n, offset_group, c // offset_group, *X.shape[2:])
    sampled = _sample(x, pos).reshape(n, offset_group, c // offset_group, k, q)
    if mask is not None:
        sampled *= mask.astype(dtype).reshape(n, offset_group, 1, k, q)
    m, cg = W.shape[:2]
    cols = sampled.reshape(n, group, cg * k, q)
    y = np.matmul(W.astype(dtype).reshape(group, m // group, cg * k), cols).reshape(n, m, *out)
    if B is not None:
        y += B.astype(dtype).reshape(-1, *_spatial_ones(rank))
    return y.astype(X.dtype, copy=False)


# -- CausalConvWithState --------------------------------------------------------------------------

def _causal_rule(ctx: InferContext, x: TensorType | None, w: TensorType | None,
                 *rest: Any, activation: str) -> tuple[TensorType, TensorType]:
    xs, ws = shape_of(x), shape_of(w)
    k = ws[2] if ws is not None and len(ws) == 3 else None
    state = None if xs is None else (xs[0], xs[1], k - 1 if isinstance(k, int) else None)
    return TensorType(dtype_of(x), xs), TensorType(dtype_of(x), state)


@op("CausalConvWithState", since=27, inputs=("input", "weight", "bias?", "past_state?"),
    outputs=("output", "present_state"),
    attrs=(Attr("activation", "string", "none", "fused activation: none, silu or swish"),),
    infer=_causal_rule)
def causal_conv_with_state(input: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None,
                           past_state: np.ndarray | None = None, *,
                           activation: str) -> tuple[np.ndarray, np.ndarray]:
    """Stateful causal depthwise 1-D convolution (Mamba / Gated DeltaNet decode steps).

    ``padded = concat(past_state or zeros(B, C, k - 1), input)`` along the length axis, then::

        output[b, c, l]  = act(bias[c] + sum_{t < k} weight[c, 0, t] * padded[b, c, l + t])
        present_state    = padded[:, :, -(k - 1):]      (the last k - 1 positions; empty if k == 1)

    ``act`` is the identity for "none" and ``y * sigmoid(y)`` for "silu" and its alias "swish".
    output[l] depends only on input positions <= l (and the carried state), so running a
    sequence in chunks with the state carried gives the same result as one call.
    input: (B, C, L); weight: (C, 1, k); bias: (C,); past_state: (B, C, k - 1);
    float32/float16/bfloat16 (the latter two compute in float32 and round once).
    """
    if activation not in ("none", "silu", "swish"):
        raise ValueError(f"activation must be 'none', 'silu' or 'swish', got {activation!r}")
    batch, channels, length = input.shape
    k = weight.shape[2]
    if past_state is None:
        past_state = np.zeros((batch, channels, k - 1), dtype=input.dtype)
    padded = np.concatenate([past_state.astype(input.dtype, copy=False), input], axis=2)
    dtype = _float_compute(input.dtype)
    geom = win.Geometry((k,), (1,), (1,), (0,), (0,), (length,))
    y = correlate(padded.astype(dtype, copy=False), weight.astype(dtype, copy=False), channels,
                  geom)
    if bias is not None:
        y += bias.astype(dtype).reshape(-1, 1)
    if activation != "none":
        with np.errstate(over="ignore"):
            y = y / (1 + np.exp(-y))
    return y.astype(input.dtype, copy=False), padded[:, :, length:].copy()


OPS = (conv, conv_transpose, conv_integer, qlinear_conv, deform_conv,
       col2im_op, causal_conv_with_state)
